/* SPDX-License-Identifier: MIT */
/*
 * files.c - the files behind protected mappings, and the descriptors the
 * library keeps for them.
 *
 * Only a page at or past the end of its file is rescued (SPEC §5); a fault
 * inside the file's size is an error the file system reported.  The
 * handler therefore needs the file's size at fault time, from a signal
 * handler, long after the program may have closed its descriptor.  Two
 * ways were weighed:
 *  - readlink of /proc/self/map_files/START-END, then stat of the path:
 *    no descriptor, but two path lookups per fault (several microseconds,
 *    more than the rescue itself), START-END must be the exact VMA (which
 *    rescues keep splitting), following the link itself needs
 *    CAP_SYS_ADMIN, and a memfd or a deleted file has no path to stat;
 *  - one descriptor per file, kept by the library: one fstat() per fault
 *    that needs the size (about 0.1 us), for every kind of file.
 * The descriptor wins.  It must be invisible and robust:
 *  - numbered above the soft RLIMIT_NOFILE (the limit is raised for the
 *    F_DUPFD_CLOEXEC alone), so a program near its limit never loses a
 *    descriptor it would have had; when the limit cannot be raised (the
 *    hard limit equals the soft one, without CAP_SYS_RESOURCE), no
 *    descriptor is kept, and the handler falls back to the slow way
 *    above (privileged, or a file that still has its path); failing
 *    that, the rescue is counted as unverified;
 *  - close-on-exec, and checked against the st_dev/st_ino recorded when
 *    the file was mapped, so a number the program reused is never
 *    trusted;
 *  - close, dup2, dup3, close_range and closefrom cannot take it away: to
 *    the program its number is not open (EBADF), and a dup2/dup3 onto it
 *    first moves ours elsewhere.
 * Descriptors are closed when no record names their file any more.
 *
 * Signal context: nsb_files_size and nsb_files_path.  The rest runs under
 * the table lock (nsb_ranges_lock), except the interposed calls, which
 * take it when they touch one of our descriptors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "nsb.h"

struct file {
	atomic_int fd;		/* kept descriptor, -1: none */
	uint32_t refs;		/* records naming this file */
	bool used;
	uint64_t dev;
	uint64_t ino;
	uint32_t path;		/* offset in the path pool, 0: unknown */
};

#define MAX_FILES	(1u << 16)	/* indexes fit a record's 16 bits */
static struct file *files;	/* MAX_FILES entries, reserved, index 0 unused */
static uint32_t files_top = 1;	/* entries ever used: [1, files_top) */
static bool release_pending;

/* Our descriptors, for the interposed calls: a bit per number below
 * KEPT_BITS (BSS: costs nothing until used), a count, the lowest. */
#define KEPT_BITS	(1u << 20)
static atomic_ulong *kept_bits;	/* KEPT_BITS / 64, mapped at first need */
static atomic_uint kept_count;

uint64_t
nsb_dev_of(unsigned major, unsigned minor)
{
	return (uint64_t)makedev(major, minor);
}

static bool
entries_ready(void)
{
	if (!files)
		files = nsb_memory(MAX_FILES * sizeof(struct file));
	return files != NULL;
}

/* ---- kept descriptors -------------------------------------------------- */

static bool
is_kept(int fd)
{
	if (atomic_load_explicit(&kept_count, memory_order_relaxed) == 0 || fd < 0)
		return false;
	if ((unsigned)fd < KEPT_BITS && kept_bits)
		return atomic_load(&kept_bits[fd / 64]) & (1ul << (fd % 64));
	for (uint32_t i = 1; i < files_top; i++)
		if (files[i].used && atomic_load(&files[i].fd) == fd)
			return true;
	return false;
}

static void
mark_kept(int fd, bool kept)
{
	if (fd < 0)
		return;
	if (!kept_bits)
		kept_bits = nsb_memory(KEPT_BITS / 8);
	if ((unsigned)fd < KEPT_BITS && kept_bits) {
		if (kept)
			atomic_fetch_or(&kept_bits[fd / 64], 1ul << (fd % 64));
		else
			atomic_fetch_and(&kept_bits[fd / 64], ~(1ul << (fd % 64)));
	}
	if (kept)
		atomic_fetch_add(&kept_count, 1);
	else
		atomic_fetch_sub(&kept_count, 1);
}

static void
close_kept(int fd)
{
	if (fd < 0)
		return;
	mark_kept(fd, false);
	syscall(SYS_close, fd);
}

/*
 * A close-on-exec copy of fd numbered at or above the soft limit, or -1.
 * The soft limit goes up to the hard one only for the F_DUPFD; when they
 * are equal, both go up for it if we may (CAP_SYS_RESOURCE), and down
 * again.  Another thread's open() in that moment may get a number it would
 * not have had, but none loses one.  Keeps errno.
 */
static int
keep(int fd)
{
	/* Raising the hard limit needs CAP_SYS_RESOURCE: once refused, not
	 * asked again while the limits stay where they were (a container's
	 * soft == hard would otherwise cost a failed call per mapping). */
	static _Atomic rlim_t refused_at = RLIM_INFINITY;
	struct rlimit rl, raised;
	int saved_errno = errno, kfd = -1;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < INT_MAX - 65536) {
		raised = rl;
		if (rl.rlim_max > rl.rlim_cur)
			raised.rlim_cur = rl.rlim_max;
		else if (atomic_load(&refused_at) == rl.rlim_max)
			goto out;
		else
			raised.rlim_cur = raised.rlim_max =
				rl.rlim_cur + atomic_load(&kept_count) + 64;
		if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
			kfd = fcntl(fd, F_DUPFD_CLOEXEC, (int)rl.rlim_cur);
			setrlimit(RLIMIT_NOFILE, &rl);
		} else if (errno == EPERM && rl.rlim_max == rl.rlim_cur) {
			atomic_store(&refused_at, rl.rlim_max);
		}
	}
out:
	if (kfd >= 0)
		mark_kept(kfd, true);
	errno = saved_errno;
	return kfd;
}

/* ---- entries ----------------------------------------------------------- */

#define PATH_POOL_SIZE (1u << 20)
static char *path_pool;
static size_t path_used = 1;	/* offset 0 means "unknown" */

/* Paths are never freed (only kept while logging); a full pool gives 0. */
static uint32_t
intern_path(const char *path)
{
	size_t len;

	if (!path || !nsb_config.log)
		return 0;
	len = strlen(path) + 1;
	if (!path_pool && !(path_pool = nsb_memory(PATH_POOL_SIZE)))
		return 0;
	for (size_t off = 1; off < path_used; off += strlen(path_pool + off) + 1)
		if (strcmp(path_pool + off, path) == 0)
			return (uint32_t)off;
	if (len > PATH_POOL_SIZE - path_used)
		return 0;
	memcpy(path_pool + path_used, path, len);
	path_used += len;
	return (uint32_t)(path_used - len);
}

static uint32_t
find(uint64_t dev, uint64_t ino)
{
	for (uint32_t i = 1; i < files_top; i++)
		if (files[i].used && files[i].dev == dev && files[i].ino == ino)
			return i;
	return 0;
}

/* A new entry (refs 0: released at the next update unless a record names
 * it by then). */
static uint32_t
add(uint64_t dev, uint64_t ino, int kfd, const char *path)
{
	uint32_t i;

	for (i = 1; i < files_top && files[i].used; i++)
		;
	if (i == MAX_FILES) {
		close_kept(kfd);
		return 0;
	}
	if (i == files_top)
		files_top++;
	files[i].used = true;
	files[i].refs = 0;
	files[i].dev = dev;
	files[i].ino = ino;
	files[i].path = intern_path(path);
	atomic_store(&files[i].fd, kfd);
	release_pending = true;
	return i;
}

uint32_t
nsb_files_get(int fd, const struct stat *st, const char *path)
{
	uint32_t i;

	if (!entries_ready())
		return 0;
	i = find((uint64_t)st->st_dev, (uint64_t)st->st_ino);
	if (i)
		return i;
	return add((uint64_t)st->st_dev, (uint64_t)st->st_ino,
		   nsb_config.errors == NSB_ERRORS_PASS ? keep(fd) : -1, path);
}

/* Opens the file mapped at [start, end) without side effects: through
 * /proc/self/map_files (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE),
 * else by its path if that is still the same regular file. */
static int
open_mapped(uintptr_t start, uintptr_t end, uint64_t dev, uint64_t ino, const char *path)
{
	char link[64];
	struct stat st;
	int fd;

	snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx",
		 (unsigned long)start, (unsigned long)end);
	fd = open(link, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && path && path[0] == '/' && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd >= 0 && (fstat(fd, &st) < 0 || (uint64_t)st.st_dev != dev ||
			(uint64_t)st.st_ino != ino)) {
		syscall(SYS_close, fd);
		fd = -1;
	}
	return fd;
}

uint32_t
nsb_files_get_mapped(uintptr_t start, uintptr_t end, uint64_t dev, uint64_t ino,
		     const char *path, bool *memfs)
{
	struct statfs fs;
	uint32_t i;
	int fd, kfd = -1;

	*memfs = false;
	if (!entries_ready())
		return 0;
	fd = open_mapped(start, end, dev, ino, path);
	if (fd >= 0) {
		*memfs = fstatfs(fd, &fs) == 0 &&
			 (fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC);
		if (nsb_config.errors == NSB_ERRORS_PASS && !find(dev, ino))
			kfd = keep(fd);
		syscall(SYS_close, fd);
	}
	i = find(dev, ino);
	if (i) {
		close_kept(kfd);
		return i;
	}
	return add(dev, ino, kfd, path);
}

void
nsb_files_ref(uint32_t file, int delta)
{
	if (!file)
		return;
	files[file].refs += (uint32_t)delta;
	if (files[file].refs == 0)
		release_pending = true;
}

/* After an update of the table: no handler can still hold a record that
 * names an entry with no records left. */
void
nsb_files_release_unused(void)
{
	if (!release_pending)
		return;
	release_pending = false;
	for (uint32_t i = 1; i < files_top; i++) {
		if (!files[i].used || files[i].refs)
			continue;
		close_kept(atomic_exchange(&files[i].fd, -1));
		files[i].used = false;
	}
	while (files_top > 1 && !files[files_top - 1].used)
		files_top--;
}

bool
nsb_files_identity(uint32_t file, uint64_t *dev, uint64_t *ino)
{
	if (!file || !files || !files[file].used)
		return false;
	*dev = files[file].dev;
	*ino = files[file].ino;
	return true;
}

/* [signal-safe] Is st the file the entry recorded? */
static bool
same_file(uint32_t file, const struct stat *st)
{
	return (uint64_t)st->st_dev == files[file].dev && (uint64_t)st->st_ino == files[file].ino;
}

/* [signal-safe] Appends a number in hex. */
static char *
put_hex(char *p, uintptr_t v)
{
	char tmp[2 * sizeof(v)];
	int n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* Where size_by_map_files works: not on the handler's stack (a small
 * alternate stack has no room for a path). */
struct map_files_space {
	char link[64];
	char path[4096];
	struct nsb_vma vma;
};
_Static_assert(sizeof(struct map_files_space) <= NSB_SIGNAL_SPACE, "signal space");
static atomic_uint map_files_busy;

/* [signal-safe] stat() of /proc/self/map_files/START-END, or of the path
 * it names, if that is the recorded file. */
static bool
stat_map_files(struct map_files_space *sp, uint32_t file, uintptr_t start, uintptr_t end,
	       struct stat *st)
{
	char *p = put_hex(sp->link + strlen("/proc/self/map_files/"), start);
	ssize_t n;

	*p++ = '-';
	p = put_hex(p, end);
	*p = '\0';
	if (stat(sp->link, st) == 0 && same_file(file, st))
		return true;
	n = readlink(sp->link, sp->path, sizeof(sp->path) - 1);
	if (n <= 0)
		return false;
	sp->path[n] = '\0';
	return stat(sp->path, st) == 0 && same_file(file, st);
}

/*
 * [signal-safe] Without a kept descriptor (no room above the limit): the
 * file through /proc/self/map_files of the VMA at addr - following the
 * link needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; reading it does not,
 * and its path is as good while the file has one.  Slow (the maps are
 * read), and checked against the recorded inode like the descriptor.
 * False also when every slot is in use by other handlers.
 */
static bool
size_by_map_files(uint32_t file, uintptr_t start, uintptr_t end, uintptr_t addr, struct stat *st)
{
	int slot = nsb_slot_take(&map_files_busy, NSB_SIGNAL_SLOTS);
	struct map_files_space *sp;
	bool ok;

	if (slot < 0)
		return false;
	sp = nsb_signal_space(NSB_SPACE_FILES, slot);
	if (!sp) {
		nsb_slot_give(&map_files_busy, slot);
		return false;
	}
	memcpy(sp->link, "/proc/self/map_files/", sizeof("/proc/self/map_files/"));
	/* The record is the VMA until rescues split it: try it first. */
	ok = stat_map_files(sp, file, start, end, st) ||
	     (nsb_maps_find(addr, &sp->vma) &&
	      stat_map_files(sp, file, sp->vma.start, sp->vma.end, st));
	nsb_slot_give(&map_files_busy, slot);
	return ok;
}

/* [signal-safe] */
bool
nsb_files_size(uint32_t file, uintptr_t start, uintptr_t end, uintptr_t addr, uint64_t *size)
{
	int saved_errno = errno, fd;
	struct stat st;
	bool ok;

	if (!file)
		return false;
	fd = atomic_load(&files[file].fd);
	/* A number the program reused behind our back is not our file. */
	ok = fd >= 0 ? fstat(fd, &st) == 0 && same_file(file, &st)
		     : size_by_map_files(file, start, end, addr, &st);
	errno = saved_errno;
	if (ok)
		*size = (uint64_t)st.st_size;
	return ok;
}

/* [signal-safe] */
const char *
nsb_files_path(uint32_t file)
{
	uint32_t off = file && files ? files[file].path : 0;

	return off && path_pool ? path_pool + off : NULL;
}

/* ---- the interposed descriptor calls ----------------------------------- */

/* Moves our descriptor away from `fd`, which the program wants. */
static void
move_away(int fd)
{
	nsb_ranges_lock();
	for (uint32_t i = 1; i < files_top; i++) {
		int kfd;

		if (!files[i].used || atomic_load(&files[i].fd) != fd)
			continue;
		kfd = keep(fd);
		/* Out of numbers: the file's rescues become unverified. */
		atomic_store(&files[i].fd, kfd);
		mark_kept(fd, false);
	}
	nsb_ranges_unlock();
}

NSB_EXPORT int
close(int fd)
{
	if (__builtin_expect(is_kept(fd), 0)) {
		errno = EBADF;
		return -1;
	}
	return real_close(fd);
}

/* Before a dup2 or dup3 of old onto new: false (EBADF) if old is ours,
 * which the program never opened; ours moves away from new. */
static bool
may_dup(int old, int new)
{
	if (is_kept(old)) {
		errno = EBADF;
		return false;
	}
	if (old != new && is_kept(new))
		move_away(new);
	return true;
}

NSB_EXPORT int
dup2(int old, int new)
{
	return may_dup(old, new) ? real_dup2(old, new) : -1;
}

NSB_EXPORT int
dup3(int old, int new, int flags)
{
	return may_dup(old, new) ? real_dup3(old, new, flags) : -1;
}

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1u << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1u << 2)
#endif

/* close_range, closefrom and execveat are in glibc 2.34 and later. */
static int
sys_close_range(unsigned first, unsigned last, int flags)
{
	int (*f)(unsigned, unsigned, int) = real_close_range;

	return f ? f(first, last, flags) : (int)syscall(SYS_close_range, first, last, flags);
}

/* The lowest of our descriptors in [first, last], or -1. */
static int
next_kept(unsigned first, unsigned last)
{
	int best = -1;

	nsb_ranges_lock();
	for (uint32_t i = 1; i < files_top; i++) {
		int fd = files[i].used ? atomic_load(&files[i].fd) : -1;

		if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last &&
		    (best < 0 || fd < best))
			best = fd;
	}
	nsb_ranges_unlock();
	return best;
}

/* close_range over the program's descriptors only: the gaps between ours. */
static int
close_around(unsigned first, unsigned last, int flags)
{
	int fd;

	while (first <= last && (fd = next_kept(first, last)) >= 0) {
		if ((unsigned)fd > first &&
		    sys_close_range(first, (unsigned)fd - 1, flags) < 0)
			return -1;
		flags &= ~(int)CLOSE_RANGE_UNSHARE;	/* once is enough */
		if ((unsigned)fd == UINT_MAX)
			return 0;
		first = (unsigned)fd + 1;
	}
	return first <= last ? sys_close_range(first, last, flags) : 0;
}

NSB_EXPORT int
close_range(unsigned first, unsigned last, int flags)
{
	/* Setting close-on-exec touches nothing of ours that is not so. */
	if (atomic_load(&kept_count) == 0 || (flags & CLOSE_RANGE_CLOEXEC) || first > last)
		return sys_close_range(first, last, flags);
	return close_around(first, last, flags);
}

NSB_EXPORT void
closefrom(int lowfd)
{
	int saved_errno = errno;
	unsigned first = lowfd < 0 ? 0 : (unsigned)lowfd;	/* as glibc */

	if (atomic_load(&kept_count) == 0 && real_closefrom) {
		real_closefrom(lowfd);
		return;
	}
	if (close_around(first, UINT_MAX, 0) < 0) {
		/* No close_range (kernels before 5.9): one by one. */
		DIR *d = opendir("/proc/self/fd");
		struct dirent *e;

		if (d) {
			int self = dirfd(d);

			while ((e = readdir(d))) {
				int fd = atoi(e->d_name);

				if (e->d_name[0] != '.' && (unsigned)fd >= first && fd != self &&
				    !is_kept(fd))
					syscall(SYS_close, fd);
			}
			closedir(d);
		}
	}
	errno = saved_errno;
}
