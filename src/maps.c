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
 * nsb_maps_each asks the kernel only about the span it is given where it
 * can: ioctl(PROCMAP_QUERY) on /proc/self/maps (Linux 6.11) returns the
 * VMA at or above an address, so a span costs one call per VMA in it (and
 * one more for what lies above), whatever is mapped below it.  Reading
 * the file costs every line below the span, and is what happens when the
 * kernel lacks the call, for smaps (page sizes and protection keys, which
 * the call does not give), and when NSB_TEST_MAPS=read or =probe forces
 * it (the test that both give the same VMAs, and the benchmark's rows for
 * the fallbacks).  Both report the same fields the same way: offset and
 * inode 0 without a file, paths with newlines escaped as the file has
 * them.  Between the two, nsb_maps_hole is the bounded probe that answers
 * the one question some failed calls need (is there a hole in a range?)
 * without either (mman.c).
 *
 * Signal context: nsb_maps_find (and the parsing it shares).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

/* The kernel writes a VMA's name into our buffer with an ioctl valgrind's
 * memcheck may not know (PROCMAP_QUERY): the bytes it wrote are marked
 * defined for it, a no-op outside memcheck (a 4 KiB memset per query
 * cost more than the query's own user-space work). */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) ((void)(addr), (void)(len))
#endif

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
	vma->zero_file = vma->ino != 0 && nsb_rescue_zero_file(vma->dev, vma->ino);
	vma->anon = vma->ino == 0 || vma->zero_file;
	p = skip_spaces(p);
	vma->path = whole && *p ? p : NULL;
	vma->page_size = 0;
	vma->pkey = -1;
	vma->dontfork = vma->wipeonfork = false;
	vma->write = 0;
	vma->kept = 0;
	vma->flags_sig = 0;
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

/* A flag of VmFlags, mixed (splitmix64's finaliser): the sum over a
 * line's flags tells two sets apart. */
static uint64_t
flag_hash(unsigned a, unsigned b)
{
	uint64_t x = ((uint64_t)a << 8 | b) * 0x9e3779b97f4a7c15u;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

/* The fork advices of smaps' VmFlags line ("dc": MADV_DONTFORK, "wf":
 * MADV_WIPEONFORK), and the locks and advice a replaced page must get
 * again (doc/mappings.md), for a record made of a mapping advised before
 * the library knew it (nosigbus_protect); and the sum of the others'
 * hashes, for mremap (mman.c remap_pieces). */
static void
vm_flags(const char *p, struct nsb_vma *vma)
{
	while (*p == ' ' || *p == '\t')
		p++;
	vma->write = NSB_VMA_NO_WRITE;
	while (p[0] && p[0] != '\n' && p[1] && p[1] != '\n') {
		if (p[0] == 'm' && p[1] == 'w')
			vma->write = NSB_VMA_MAY_WRITE;
		else if (p[0] == 'd' && p[1] == 'c')
			vma->dontfork = true;
		else if (p[0] == 'w' && p[1] == 'f')
			vma->wipeonfork = true;
		else if (p[0] == 'l' && p[1] == 'o')
			vma->kept |= NSB_META_LOCKED;
		else if (p[0] == 'l' && p[1] == 'f')
			vma->kept |= NSB_META_ONFAULT;
		else if (p[0] == 'd' && p[1] == 'd')
			vma->kept |= NSB_META_DONTDUMP;
		else if (p[0] == 'h' && p[1] == 'g')
			vma->kept |= NSB_META_HUGEPAGE;
		else if (p[0] == 'n' && p[1] == 'h')
			vma->kept |= NSB_META_NOHUGEPAGE;
		else if (p[0] == 'm' && p[1] == 'g')
			vma->kept |= NSB_META_MERGEABLE;
		/* The rest, hashed: all but the ones that no call sets on
		 * part of a mapping, or that a mapping the library made
		 * afresh has its own way (soft-dirty, the may-flags of the
		 * descriptor it was mapped from, accounting, noreserve). */
		if (!((p[0] == 's' && p[1] == 'd') ||
		      (p[0] == 'm' && (p[1] == 'r' || p[1] == 'w' || p[1] == 'e')) ||
		      (p[0] == 'a' && p[1] == 'c') || (p[0] == 'n' && p[1] == 'r')))
			vma->flags_sig += flag_hash((unsigned char)p[0], (unsigned char)p[1]);
		p += 2;
		while (*p == ' ')
			p++;
	}
}

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
	else if (strncmp(line, "VmFlags:", 8) == 0)
		vm_flags(line + 8, &w->vma);
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

	fd = nsb_proc_open(path, O_RDONLY | O_CLOEXEC);
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

/* ---- PROCMAP_QUERY ----------------------------------------------------- */

/* linux/fs.h from Linux 6.11; defined here for the headers that lack it
 * (Debian 12's), under our own names so that both can be included. */
struct nsb_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
_Static_assert(sizeof(struct nsb_procmap_query) == 104, "the kernel's layout");
#define NSB_PROCMAP_QUERY		_IOWR('f', 17, struct nsb_procmap_query)
#define NSB_QUERY_VMA_READABLE		0x01
#define NSB_QUERY_VMA_WRITABLE		0x02
#define NSB_QUERY_VMA_EXECUTABLE	0x04
#define NSB_QUERY_VMA_SHARED		0x08
#define NSB_QUERY_COVERING_OR_NEXT_VMA	0x10

/* 0: not tried yet; else whether the query works here (or is forced off). */
static _Atomic int query_state;
static _Atomic int last_path;	/* test hook: which path the last call took */
enum { QUERY_UNKNOWN, QUERY_WORKS, QUERY_NONE };
#define QUERY_MISSING INT_MIN	/* query_each: the kernel lacks the call */

/* The newlines of a name escaped as /proc/self/maps shows them (\012), in
 * place (size bytes); false if it does not fit. */
static bool
escape_newlines(char *name, size_t size)
{
	size_t len = strlen(name);

	for (char *nl = strchr(name, '\n'); nl; nl = strchr(nl + 4, '\n')) {
		size_t at = (size_t)(nl - name);

		if (len + 3 >= size)
			return false;
		memmove(nl + 4, nl + 1, len - at);	/* with the NUL */
		memcpy(nl, "\\012", 4);
		len += 3;
	}
	return true;
}

/*
 * The VMAs overlapping [lo, hi) from the kernel, one query each.  0 (or
 * fn's non-zero), -1 with errno if a query failed, QUERY_MISSING if the
 * kernel does not know the call.
 */
static int
query_each(int fd, uintptr_t lo, uintptr_t hi, bool names,
	   int (*fn)(const struct nsb_vma *vma, void *arg), void *arg)
{
	char name[PATH_MAX];
	uintptr_t at = lo;
	bool with_name = names;

	name[0] = '\0';
	while (at < hi) {
		struct nsb_procmap_query q = {
			.size = sizeof(q),
			.query_flags = NSB_QUERY_COVERING_OR_NEXT_VMA,
			.query_addr = at,
			.vma_name_size = with_name ? sizeof(name) : 0,
			/* Both or neither: a size of 0 with an address is
			 * EINVAL (the kernel checks them together). */
			.vma_name_addr = with_name ? (uintptr_t)name : 0,
		};
		struct nsb_vma vma;
		int ret;

		/* The kernel's, not our interposed ioctl (uffd.c), whose real
		 * function may not be looked up yet under a mapping call. */
		if (syscall(SYS_ioctl, fd, NSB_PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOENT)
				return 0;	/* nothing at or above */
			if (errno == EINTR)
				continue;
			if (errno == ENAMETOOLONG && with_name) {
				with_name = false;	/* kept as "too long" */
				continue;
			}
			/* Only the first query can find the call missing (or,
			 * EBADF, a kept descriptor gone: maps_fd). */
			return at == lo && (errno == ENOTTY || errno == EINVAL || errno == EBADF)
				       ? QUERY_MISSING : -1;
		}
		if (with_name && q.vma_name_size)
			VALGRIND_MAKE_MEM_DEFINED(name, q.vma_name_size);
		if (q.vma_start >= hi)
			return 0;
		vma.start = (uintptr_t)q.vma_start;
		vma.end = (uintptr_t)q.vma_end;
		vma.off = q.vma_offset;
		vma.dev = nsb_dev_of(q.dev_major, q.dev_minor);
		vma.ino = q.inode;
		vma.prot = (q.vma_flags & NSB_QUERY_VMA_READABLE ? PROT_READ : 0) |
			   (q.vma_flags & NSB_QUERY_VMA_WRITABLE ? PROT_WRITE : 0) |
			   (q.vma_flags & NSB_QUERY_VMA_EXECUTABLE ? PROT_EXEC : 0);
		vma.shared = q.vma_flags & NSB_QUERY_VMA_SHARED;
		vma.zero_file = vma.ino != 0 && nsb_rescue_zero_file(vma.dev, vma.ino);
		vma.anon = vma.ino == 0 || vma.zero_file;
		vma.pkey = -1;
		vma.page_size = 0;
		vma.dontfork = vma.wipeonfork = false;
		vma.write = 0;
		vma.kept = 0;
		vma.flags_sig = 0;
		vma.path = with_name && q.vma_name_size > 1 &&
			   escape_newlines(name, sizeof(name)) ? name : NULL;
		with_name = names;
		if ((ret = fn(&vma, arg)) != 0)
			return ret;
		at = vma.end;
	}
	return 0;
}

/*
 * The descriptor of /proc/self/maps the queries go to: the library's kept
 * one (files.c: one of its 16 kept descriptors, while protected mappings
 * exist; opening the file costs three times a query), or, where none can
 * be kept (*kept false), one opened for the call.  Callers hold the table
 * lock, or are a fork child's handler (rescue.c).
 */
static int
maps_fd(bool *kept)
{
	int fd = nsb_files_maps_descriptor();

	*kept = fd >= 0;
	return *kept ? fd : nsb_proc_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
}

/* NSB_TEST_MAPS=read: neither query nor probe (the last fallback alone). */
static _Atomic bool no_probe;

/* Whether to try the query: not where it failed, nor when forced off
 * (NSB_TEST_MAPS=probe: as a kernel without it; =read: not even a probe). */
static bool
query_wanted(void)
{
	int state = atomic_load_explicit(&query_state, memory_order_relaxed);

	if (state == QUERY_UNKNOWN) {
		const char *force = getenv("NSB_TEST_MAPS");

		atomic_store_explicit(&no_probe, force && strcmp(force, "read") == 0,
				      memory_order_relaxed);
		state = force && (strcmp(force, "read") == 0 || strcmp(force, "probe") == 0)
				? QUERY_NONE : QUERY_WORKS;
		atomic_store_explicit(&query_state, state, memory_order_relaxed);
	}
	return state == QUERY_WORKS;
}

bool
nsb_maps_queries(void)
{
	return query_wanted() && nsb_unfiltered();
}

/*
 * The bounded probe, for kernels without PROCMAP_QUERY: is any page of
 * [lo, hi) unmapped?  mincore(2) fails with ENOMEM at the first hole, and
 * says nothing else that matters here (it changes nothing).  1: a hole;
 * 0: none; -1: cannot tell (or not wanted).  Costs one call per 4096
 * pages of the range (4 KiB pages: 16 MiB), whatever is mapped elsewhere.
 * errno is left as it was.
 */
int
nsb_maps_hole(uintptr_t lo, uintptr_t hi)
{
	size_t ps = nsb_config.page_size;
	unsigned char vec[4096];
	int saved_errno = errno, ret = 0;

	(void)query_wanted();	/* reads NSB_TEST_MAPS */
	if (atomic_load_explicit(&no_probe, memory_order_relaxed))
		return -1;
	/* mincore is in no systemd group but @known: a unit's filter kills. */
	if (!nsb_unfiltered())
		return -1;
	atomic_store_explicit(&last_path, 2, memory_order_relaxed);
	for (uintptr_t at = lo & ~(uintptr_t)(ps - 1); at < hi;) {
		size_t len = hi - at > sizeof(vec) * ps ? sizeof(vec) * ps : hi - at;

		if (mincore((void *)at, len, vec) < 0) {
			ret = errno == ENOMEM ? 1 : -1;
			break;
		}
		at += len;
	}
	errno = saved_errno;
	return ret;
}

static int
maps_each(uintptr_t lo, uintptr_t hi, bool smaps, bool names,
	  int (*fn)(const struct nsb_vma *vma, void *arg), void *arg)
{
	struct walk w;
	char buf[8192];

	/* Under a seccomp filter the maps are read, never queried: a
	 * browser's filter kills on an ioctl it does not list (and its
	 * broker refuses the file: nsb_proc_open). */
	if (!smaps && query_wanted() && nsb_unfiltered()) {
		bool kept;
		int fd = maps_fd(&kept), ret, err;

		if (fd < 0)
			return -1;
		ret = query_each(fd, lo, hi, names, fn, arg);
		if (ret == QUERY_MISSING && kept) {
			/* Not the maps any more (the program reused our number
			 * behind our back), or a kernel without the call: asked
			 * again on a descriptor of its own, which tells. */
			fd = nsb_proc_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				nsb_files_maps_forget();
				return -1;
			}
			ret = query_each(fd, lo, hi, names, fn, arg);
			if (ret == QUERY_MISSING)
				nsb_files_maps_drop();
			else
				nsb_files_maps_forget();
			kept = false;
		}
		err = errno;
		if (!kept)
			syscall(SYS_close, fd);
		errno = err;
		if (ret != QUERY_MISSING) {
			atomic_store_explicit(&last_path, 1, memory_order_relaxed);
			return ret;
		}
		atomic_store_explicit(&query_state, QUERY_NONE, memory_order_relaxed);
	}
	atomic_store_explicit(&last_path, 0, memory_order_relaxed);
	/* Made only here: zeroing its 300 bytes cost a query 57
	 * instructions. */
	w = (struct walk){ .lo = lo, .hi = hi, .smaps = smaps, .fn = fn, .arg = arg };
	return walk_file(smaps ? "/proc/self/smaps" : "/proc/self/maps", buf, sizeof(buf), &w);
}

int
nsb_maps_each(uintptr_t lo, uintptr_t hi, bool smaps,
	      int (*fn)(const struct nsb_vma *vma, void *arg), void *arg)
{
	return maps_each(lo, hi, smaps, true, fn, arg);
}

/* Where the kernel is asked, it is not asked for the VMAs' names (the
 * path it would build and the library scan for newlines): vma->path is
 * NULL.  Read from the maps, the names come with the lines. */
int
nsb_maps_each_unnamed(uintptr_t lo, uintptr_t hi,
		      int (*fn)(const struct nsb_vma *vma, void *arg), void *arg)
{
	return maps_each(lo, hi, false, false, fn, arg);
}

/* Test hook: did the last nsb_maps_each ask the kernel (true) or read? */
bool
nsb_maps_last_queried(void)
{
	return atomic_load(&last_path) == 1;
}

/* Test hook: which path the last look at the kernel took (0 read, 1 query,
 * 2 probe). */
int
nsb_maps_last_path(void)
{
	return atomic_load(&last_path);
}

/* Test hook: read the file (true) or query where the kernel can (false). */
void
nsb_maps_force_read(bool read)
{
	atomic_store(&query_state, read ? QUERY_NONE : QUERY_WORKS);
}

/* Test hook: whether the probe may answer (NSB_TEST_MAPS=read: no). */
void
nsb_maps_allow_probe(bool allow)
{
	(void)query_wanted();
	atomic_store(&no_probe, !allow);
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
