/* SPDX-License-Identifier: MIT */
/*
 * maps.c - reads /proc/self/maps and /proc/self/smaps: the kernel's own
 * account of the address space, which the records follow whenever a call
 * fails or changes more than its arguments say (mman.c), and which
 * nosigbus_protect() records from (api.c).
 *
 * No malloc (we may be inside mmap called by malloc): one stack buffer.
 * nsb_maps_find runs in the SIGBUS handler, perhaps on a small signal
 * stack: it uses a small buffer and only async-signal-safe calls.
 * A line longer than the buffer (a long path) is parsed from its start -
 * the fields before the path always fit - and the rest of it is skipped,
 * so no text inside a path can ever be read as a line of its own.  The
 * kernel escapes newlines in names (\012), so a line is a line.
 *
 * Signal context: nsb_maps_find (and the parsing it shares).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

static const char *
parse_hex(const char *p, uint64_t *out)
{
	uint64_t v = 0;

	for (;; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		v = v * 16 + d;
	}
	*out = v;
	return p;
}

static const char *
skip_spaces(const char *p)
{
	while (*p == ' ')
		p++;
	return p;
}

/* "start-end perms offset major:minor inode   path" */
static bool
parse_header(const char *line, bool whole, struct nsb_vma *vma)
{
	const char *p = line;
	uint64_t v, major, minor;

	if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
		return false;
	p = parse_hex(p, &v);
	vma->start = (uintptr_t)v;
	if (*p++ != '-')
		return false;
	p = parse_hex(p, &v);
	vma->end = (uintptr_t)v;
	if (*p++ != ' ' || strnlen(p, 5) < 5 || p[4] != ' ')
		return false;
	vma->prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
		    (p[2] == 'x' ? PROT_EXEC : 0);
	vma->shared = p[3] == 's';
	p = parse_hex(p + 5, &vma->off);
	if (*p++ != ' ')
		return false;
	p = parse_hex(p, &major);
	if (*p++ != ':')
		return false;
	p = parse_hex(p, &minor);
	if (*p++ != ' ')
		return false;
	vma->ino = 0;
	while (*p >= '0' && *p <= '9')
		vma->ino = vma->ino * 10 + (uint64_t)(*p++ - '0');
	vma->dev = nsb_dev_of((unsigned)major, (unsigned)minor);
	vma->anon = vma->ino == 0;
	p = skip_spaces(p);
	vma->path = whole && *p ? p : NULL;
	vma->page_size = 0;
	vma->pkey = -1;
	return true;
}

/* "Name:   1234 kB" -> 1234 */
static uint64_t
field_value(const char *line)
{
	uint64_t v = 0;

	line = skip_spaces(strchr(line, ':') + 1);
	while (*line >= '0' && *line <= '9')
		v = v * 10 + (uint64_t)(*line++ - '0');
	return v;
}

struct walk {
	uintptr_t lo, hi;
	bool smaps;
	bool have;		/* vma holds a header not yet reported */
	struct nsb_vma vma;
	char path[256];		/* the path of the pending VMA (smaps) */
	int (*fn)(const struct nsb_vma *vma, void *arg);
	void *arg;
};

/* Reports the pending VMA if it overlaps the range.  2: past the range. */
static int
report(struct walk *w)
{
	if (!w->have)
		return 0;
	w->have = false;
	if (w->vma.end <= w->lo)
		return 0;
	if (w->vma.start >= w->hi)
		return 2;
	return w->fn(&w->vma, w->arg);
}

static int
on_line(char *line, bool whole, struct walk *w)
{
	struct nsb_vma vma;
	int ret;

	if (parse_header(line, whole, &vma)) {
		if ((ret = report(w)) != 0)
			return ret;
		w->vma = vma;
		w->have = true;
		if (!w->smaps)
			return report(w);
		/* The buffer moves on: keep a short path, drop a long one. */
		if (vma.path && strlen(vma.path) < sizeof(w->path)) {
			strcpy(w->path, vma.path);
			w->vma.path = w->path;
		} else {
			w->vma.path = NULL;
		}
		return 0;
	}
	if (!w->have)
		return 0;
	if (strncmp(line, "KernelPageSize:", 15) == 0)
		w->vma.page_size = (size_t)field_value(line) * 1024;
	else if (strncmp(line, "ProtectionKey:", 14) == 0)
		w->vma.pkey = (int)field_value(line);
	return 0;
}

/* [signal-safe] Reads path line by line into buf (size bytes) and walks. */
static int
walk_file(const char *path, char *buf, size_t size, struct walk *w)
{
	const size_t cap = size - 1;	/* room for a final NUL */
	size_t have = 0;
	bool skipping = false, eof = false;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (!ret) {
		char *nl = memchr(buf, '\n', have);
		ssize_t n;

		if (nl) {
			size_t used = (size_t)(nl + 1 - buf);

			*nl = '\0';
			if (!skipping)
				ret = on_line(buf, true, w);
			skipping = false;
			have -= used;
			memmove(buf, buf + used, have);
			continue;
		}
		if (have == cap) {
			/* A line longer than the buffer: its fields, not its path. */
			buf[have] = '\0';
			if (!skipping)
				ret = on_line(buf, false, w);
			skipping = true;
			have = 0;
			continue;
		}
		if (eof) {
			if (have && !skipping) {
				buf[have] = '\0';
				ret = on_line(buf, true, w);
			}
			break;
		}
		n = read(fd, buf + have, cap - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -1;
			break;
		}
		if (n == 0)
			eof = true;
		have += (size_t)n;
	}
	if (!ret)
		ret = report(w);
	syscall(SYS_close, fd);
	return ret == 2 ? 0 : ret;
}

int
nsb_maps_each(uintptr_t lo, uintptr_t hi, bool smaps,
	      int (*fn)(const struct nsb_vma *vma, void *arg), void *arg)
{
	struct walk w = { .lo = lo, .hi = hi, .smaps = smaps, .fn = fn, .arg = arg };
	char buf[8192];

	return walk_file(smaps ? "/proc/self/smaps" : "/proc/self/maps", buf, sizeof(buf), &w);
}

/* [signal-safe] */
static int
found(const struct nsb_vma *vma, void *arg)
{
	struct nsb_vma *out = arg;

	*out = *vma;
	out->path = NULL;	/* in a buffer that is gone on return */
	return 1;
}

/* What nsb_maps_find works in: not on the handler's stack. */
struct find_space {
	struct walk w;
	char buf[512];
};
_Static_assert(sizeof(struct find_space) <= NSB_SIGNAL_SPACE, "signal space");
static atomic_uint find_busy;

/* [signal-safe] The VMA that contains addr; false also when every slot
 * is in use by other handlers. */
bool
nsb_maps_find(uintptr_t addr, struct nsb_vma *vma)
{
	int saved_errno = errno, slot = nsb_slot_take(&find_busy, NSB_SIGNAL_SLOTS);
	struct find_space *fs;
	bool ok;

	if (slot < 0)
		return false;
	fs = nsb_signal_space(NSB_SPACE_MAPS, slot);
	if (!fs) {
		nsb_slot_give(&find_busy, slot);
		return false;
	}
	memset(&fs->w, 0, sizeof(fs->w));
	fs->w.lo = addr;
	fs->w.hi = addr + 1;
	fs->w.fn = found;
	fs->w.arg = vma;
	ok = walk_file("/proc/self/maps", fs->buf, sizeof(fs->buf), &fs->w) == 1;
	nsb_slot_give(&find_busy, slot);
	errno = saved_errno;
	return ok;
}
