/* SPDX-License-Identifier: MIT */
/*
 * maps.c - reads /proc/self/maps, for the two slow paths that need to know
 * the kernel's VMAs: mremap of a protected mapping that rescues split into
 * pieces, and nosigbus_protect() of an existing mapping.
 *
 * No malloc (we may be inside mmap called by malloc): one stack buffer,
 * parsed line by line.  Not used in signal context.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nsb.h"

static const char *
parse_hex(const char *p, uintptr_t *out)
{
	uintptr_t v = 0;

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

/* "start-end perms offset dev inode   path" */
static bool
parse_line(const char *line, struct nsb_vma *vma)
{
	const char *p = line;
	uintptr_t inode;
	int field;

	p = parse_hex(p, &vma->start);
	if (*p++ != '-')
		return false;
	p = parse_hex(p, &vma->end);
	if (*p++ != ' ' || strlen(p) < 5)
		return false;
	vma->prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
		    (p[2] == 'x' ? PROT_EXEC : 0);
	vma->shared = p[3] == 's';
	/* Skip perms, offset and dev to reach the inode. */
	for (field = 0; field < 3; field++) {
		p = strchr(p, ' ');
		if (!p)
			return false;
		p++;
	}
	inode = 0;
	while (*p >= '0' && *p <= '9')
		inode = inode * 10 + (uintptr_t)(*p++ - '0');
	vma->anon = inode == 0;
	return true;
}

/* Calls fn for each line of path (NUL-terminated, without the newline)
 * until fn returns non-zero; returns that, or -1 if path cannot be read. */
static int
each_line(const char *path, int (*fn)(const char *line, void *arg), void *arg)
{
	char buf[4096];
	size_t have = 0;
	int fd, ret = 0;
	bool eof = false;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (!ret) {
		char *nl = memchr(buf, '\n', have);

		if (!nl) {
			ssize_t n;

			if (eof)
				break;
			if (have == sizeof(buf))	/* a line longer than the buffer: drop it */
				have = 0;
			n = read(fd, buf + have, sizeof(buf) - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				ret = -1;
				break;
			}
			if (n == 0)
				eof = true;
			have += (size_t)n;
			continue;
		}
		*nl = '\0';
		ret = fn(buf, arg);
		have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have);
	}
	close(fd);
	return ret;
}

struct maps_walk {
	uintptr_t lo, hi;
	int (*fn)(const struct nsb_vma *vma, void *arg);
	void *arg;
};

static int
maps_line(const char *line, void *arg)
{
	struct maps_walk *w = arg;
	struct nsb_vma vma;

	if (!parse_line(line, &vma) || vma.end <= w->lo)
		return 0;
	if (vma.start >= w->hi)
		return 2;	/* past the range: stop, no error */
	return w->fn(&vma, w->arg);
}

int
nsb_maps_each(uintptr_t lo, uintptr_t hi,
	      int (*fn)(const struct nsb_vma *vma, void *arg), void *arg)
{
	struct maps_walk w = { .lo = lo, .hi = hi, .fn = fn, .arg = arg };
	int ret = each_line("/proc/self/maps", maps_line, &w);

	return ret == 2 ? 0 : ret;
}

struct page_walk {
	uintptr_t addr;
	bool inside;
	size_t size;
};

static int
smaps_line(const char *line, void *arg)
{
	struct page_walk *w = arg;
	struct nsb_vma vma;
	unsigned long kb = 0;

	if (parse_line(line, &vma)) {
		w->inside = vma.start <= w->addr && w->addr < vma.end;
		return 0;
	}
	if (!w->inside || strncmp(line, "KernelPageSize:", 15) != 0)
		return 0;
	for (line += 15; *line == ' '; line++)
		;
	while (*line >= '0' && *line <= '9')
		kb = kb * 10 + (unsigned long)(*line++ - '0');
	w->size = kb * 1024;
	return 1;
}

size_t
nsb_maps_page_size(uintptr_t addr)
{
	struct page_walk w = { .addr = addr };

	if (each_line("/proc/self/smaps", smaps_line, &w) != 1 || !w.size)
		return nsb_config.page_size;
	return w.size;
}
