/* SPDX-License-Identifier: MIT */
/*
 * files.c - the files behind protected mappings, and the descriptors the
 * library keeps for them.
 *
 * Only a page at or past the end of its file is rescued (SPEC §5); a fault
 * inside the file's size is an error the file system reported (the
 * program's, but in a file another process handed over: rescue.c).  The
 * handler therefore needs the file's size at fault time, from a signal
 * handler, long after the program may have closed its descriptor.  Two
 * ways were weighed:
 *  - readlink of /proc/self/map_files/START-END, then stat of the path:
 *    no descriptor, but two path lookups per fault (several microseconds,
 *    more than the rescue itself), START-END must be the exact VMA (which
 *    rescues keep splitting), following the link itself needs
 *    CAP_SYS_ADMIN, and a memfd or a deleted file has no path to stat;
 *  - a descriptor of the file, kept by the library: one fstat() per fault
 *    that needs the size (about 0.1 us), for every kind of file.
 * The descriptor wins, for every protected file (a memfd's faults need
 * the size too: userfaultfd in SIGBUS mode, SPEC §5), except under
 * NOSIGBUS_ERRORS=zero, where no rescue needs it.  It is made only when
 * it is needed (issue 24): while the descriptor the program mapped the
 * file from is open, that one answers (checked against the recorded
 * inode like ours), and the library keeps one of its own when the
 * program closes it (the interposed close, fclose, dup2, dup3,
 * close_range and closefrom watch the numbers files were mapped from:
 * nsb_files_closing).  A file mapped and unmapped while the program
 * holds it open - a pool made, used and gone, a file mapped again and
 * again - costs no descriptor at all; one the program closes while
 * mapped costs what it cost before, at the close - unless it was just
 * received (a compositor maps a client's pool and closes it at once): then
 * the policy makes the O_PATH descriptor at mmap time, decides on it, and
 * nsb_files_get keeps that one (received.c's hint), so that no question
 * is asked twice of a descriptor and the close costs nothing.  A number
 * the program closes behind the library's back (a raw close system call)
 * leaves that file without a descriptor, like one the library let go
 * (below).  At most WATCH_MAX
 * numbers are watched; past that a descriptor is kept at mmap time.  The
 * kept descriptor must be invisible (libnosigbus(7), "Descriptors"):
 *  - O_PATH, opened through /proc/self/fd/N (or by path), close-on-exec.
 *    Closing an ordinary descriptor of a file releases every POSIX lock
 *    the process holds on it; closing an O_PATH one does not: Linux's
 *    fs/open.c filp_flush() (in filp_close() itself in older kernels)
 *    calls dnotify_flush() and locks_remove_posix() only
 *    `if (likely(!(filp->f_mode & FMODE_PATH)))`, and __fput()'s
 *    locks_remove_file() removes only the locks owned by that struct file
 *    (OFD locks and flock()s made through it: none, on an O_PATH file).
 *    fstat() works on one.  Checked by tests/footprint (F_GETLK from
 *    another process after the library let go of its descriptor).
 *  - never a resource limit changed: the numbers come from the program's
 *    budget, at most KEPT_MAX of them, the least recently mapped (or
 *    closed) file letting go of its own for a new one, numbered from TOP_MAX or the
 *    soft RLIMIT_NOFILE (the lesser) downwards: the lowest free number at
 *    or above top - KEPT_MAX.  The soft limit is read once, and again
 *    only when a number is refused (EINVAL: the program lowered it).
 *  - checked against the st_dev/st_ino recorded when the file was mapped,
 *    so a number the program reused is never trusted;
 *  - close, dup2, dup3, close_range and closefrom cannot take it away: to
 *    the program its number is not open (EBADF), and a dup2/dup3 onto it
 *    first moves ours elsewhere.
 * Descriptors are closed when no record names their file any more.
 *
 * The entries live at a fixed place of the library's arena (the handler
 * reads them), found through a hash index of (st_dev, st_ino); freed
 * entries are reused from a free list, and the entries whose last record
 * went are on a list of their own: find, add and release cost O(1) on
 * average, whatever the number of files.
 *
 * Signal context: nsb_files_size and nsb_files_path, and the interposed
 * close (a signal handler may call it).  The rest runs under the table
 * lock (nsb_ranges_lock), except the interposed calls, which take it when
 * they touch one of our descriptors.
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
	atomic_int src;		/* the program's descriptor it was mapped from
				 * (watched: see below), -1: none */
	uint32_t refs;		/* records naming this file */
	bool used;
	bool releasing;		/* on the release list */
	uint8_t wslot;		/* while src >= 0: its watch slot, where
				 * watch_slot looks first (in the padding:
				 * the entry's size is unchanged) */
	uint64_t dev;
	uint64_t ino;
	uint32_t path;		/* offset in the path pool, 0: unknown */
	uint32_t next;		/* free list, or release list */
};

#define MAX_FILES	(1u << 16)	/* indexes fit a record's 16 bits */
static struct file *files;	/* NSB_AREA_FILES, index 0 unused */
static uint32_t files_top = 1;	/* entries ever used: [1, files_top) */
static uint32_t free_list;	/* 0: empty */
uint32_t nsb_files_release_list;	/* 0: empty; tested inline (nsb.h) */
static uint32_t live;		/* entries in use */

/* The index: open addressing, linear probing, entry numbers (0: empty),
 * at most half full. */
static uint16_t *slots;		/* NSB_AREA_INDEX */
static uint32_t slots_cap;

/* Our descriptors: KEPT_MAX slots, number + 1 (0: free), lock-free for
 * the interposed calls; which file each is for, and when that file was
 * last mapped, under the table lock. */
#define KEPT_MAX	16
#define TOP_MAX		1024	/* FD_SETSIZE: what select() can take */
#define TOP_MIN		64	/* below this soft limit, none is kept */
static atomic_int kept_fd[KEPT_MAX];
static uint32_t kept_file[KEPT_MAX];
static uint64_t kept_used[KEPT_MAX];
static uint64_t use_clock;
static atomic_uint kept_count;
static rlim_t soft_limit;	/* as last read, 0: not yet */

/* The program's descriptors that files are mapped from, while the library
 * keeps none of its own for them: number + 1 (0: free), lock-free for the
 * interposed calls that close descriptors; which file each is for, under
 * the table lock.  Made with the entries. */
#define WATCH_MAX	64
_Static_assert(WATCH_MAX <= 256, "a watch slot fits struct file's wslot");
struct watching {
	atomic_uint count;
	atomic_int top;		/* slots ever used (never falls): scans stop
				 * there, not at WATCH_MAX; set before the slot */
	atomic_int fd[WATCH_MAX];
	uint32_t file[WATCH_MAX];
};
static struct watching *watching;

/* The library's descriptor of /proc/self/maps (maps.c's queries): number
 * + 1, 0: none; kept in a slot like a file's, marked by file 0, while
 * protected mappings exist. */
atomic_int nsb_files_maps_kept;	/* tested inline (nsb.h) */
static uint64_t maps_dev, maps_ino;

uint64_t
nsb_dev_of(unsigned major, unsigned minor)
{
	return (uint64_t)makedev(major, minor);
}

static __attribute__((noinline)) bool
entries_make(void)
{
	if (!files)
		files = nsb_memory_area(NSB_AREA_FILES, nsb_config.page_size);
	if (!watching)
		watching = nsb_memory(sizeof(*watching));
	return files != NULL;
}

/* Both made: every call after the first (no call made for it). */
static inline bool
entries_ready(void)
{
	if (__builtin_expect(files && watching, 1))
		return true;
	return entries_make();
}

/* ---- the index --------------------------------------------------------- */

static uint32_t
hash(uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;

	return (uint32_t)(h ^ (h >> 31));
}

static void
index_put(uint32_t i)
{
	uint32_t at = hash(files[i].dev, files[i].ino) & (slots_cap - 1);

	while (slots[at])
		at = (at + 1) & (slots_cap - 1);
	slots[at] = (uint16_t)i;
}

/* Room for one more entry in the index: doubled and rebuilt from the
 * entries (in place: the area is the index's alone) when half full. */
static bool
index_room(void)
{
	uint32_t cap = slots_cap ? slots_cap : 512;
	uint16_t *p;

	while ((live + 1) * 2 > cap)
		cap *= 2;
	if (cap == slots_cap)
		return true;
	p = nsb_memory_area(NSB_AREA_INDEX, cap * sizeof(*slots));
	if (!p)
		return false;
	slots = p;
	slots_cap = cap;
	memset(slots, 0, cap * sizeof(*slots));
	for (uint32_t i = 1; i < files_top; i++)
		if (files[i].used)
			index_put(i);
	return true;
}

/* The entry of (dev, ino), or 0; then *hole is the empty slot its probe
 * ended at, where index_put would put it while the index is not rebuilt
 * (add), or UINT32_MAX without an index. */
static inline uint32_t
find(uint64_t dev, uint64_t ino, uint32_t *hole)
{
	uint32_t at;

	*hole = UINT32_MAX;
	if (!slots_cap)
		return 0;
	for (at = hash(dev, ino) & (slots_cap - 1); slots[at]; at = (at + 1) & (slots_cap - 1)) {
		uint32_t i = slots[at];

		if (files[i].dev == dev && files[i].ino == ino)
			return i;
	}
	*hole = at;
	return 0;
}

/* Takes entry i out of the index, shifting back the entries after it
 * that would no longer be found. */
static void
index_remove(uint32_t i)
{
	uint32_t mask = slots_cap - 1, at = hash(files[i].dev, files[i].ino) & mask;

	while (slots[at] != i)
		at = (at + 1) & mask;
	for (uint32_t next = (at + 1) & mask; slots[next]; next = (next + 1) & mask) {
		uint32_t home = hash(files[slots[next]].dev, files[slots[next]].ino) & mask;

		/* Moves into the hole unless its home lies in (at, next]. */
		if (((next - home) & mask) >= ((next - at) & mask)) {
			slots[at] = slots[next];
			at = next;
		}
	}
	slots[at] = 0;
}

/* ---- kept descriptors -------------------------------------------------- */

static int
kept_slot(int fd)
{
	if (fd < 0 || atomic_load_explicit(&kept_count, memory_order_relaxed) == 0)
		return -1;
	for (int s = 0; s < KEPT_MAX; s++)
		if (atomic_load_explicit(&kept_fd[s], memory_order_relaxed) == fd + 1)
			return s;
	return -1;
}

/*
 * [signal-safe] Is fd ours?  A number in our slots is checked with the
 * kernel first: a close_range made with syscall(2) may have closed ours
 * and the program opened the number again, and then it is the program's
 * (the slot is let go).
 */
/* [signal-safe] Does fd, in slot s, still name what the slot is for (an
 * O_PATH descriptor of its file, or the maps)?  Keeps errno. */
static bool
still_ours(int s, int fd)
{
	int saved_errno = errno, fl;
	uint32_t file = kept_file[s];
	struct stat st;
	bool ours;

	fl = (int)syscall(SYS_fcntl, fd, F_GETFL);
	ours = fl >= 0 && nsb_fstat(fd, &st) == 0 &&
	       (file ? (fl & O_PATH) && (uint64_t)st.st_dev == files[file].dev &&
			       (uint64_t)st.st_ino == files[file].ino
		     : (uint64_t)st.st_dev == maps_dev && (uint64_t)st.st_ino == maps_ino);
	errno = saved_errno;
	return ours;
}

/* [signal-safe] Slot s held fd, which is not ours any more: forgotten,
 * never closed (it is the program's, or nobody's). */
static void
forget(int s, int fd)
{
	uint32_t file = kept_file[s];

	if (atomic_compare_exchange_strong(&kept_fd[s], &(int){ fd + 1 }, 0)) {
		int expected = file ? fd : fd + 1;

		atomic_compare_exchange_strong(file ? &files[file].fd : &nsb_files_maps_kept, &expected,
					       file ? -1 : 0);
		atomic_fetch_sub(&kept_count, 1);
	}
}

static bool
is_kept(int fd)
{
	int s = kept_slot(fd);

	if (s < 0)
		return false;
	if (still_ours(s, fd))
		return true;
	forget(s, fd);
	return false;
}

/* Slot s now holds fd (or none: -1) for its file, or for the maps. */
static void
slot_names(int s, int fd)
{
	if (kept_file[s])
		atomic_store(&files[kept_file[s]].fd, fd);
	else
		atomic_store(&nsb_files_maps_kept, fd + 1);
}

/* Lets slot s go: its file has no descriptor any more.  Table lock held. */
static void
let_go(int s)
{
	int fd = atomic_load(&kept_fd[s]) - 1;

	if (fd < 0)
		return;
	/* A number closed behind our back (a raw close or close_range) may
	 * be the program's again: closed only if it still names ours. */
	if (!still_ours(s, fd)) {
		forget(s, fd);
		return;
	}
	atomic_store(&kept_fd[s], 0);
	slot_names(s, -1);
	atomic_fetch_sub(&kept_count, 1);
	syscall(SYS_close, fd);		/* O_PATH, or the maps: no lock of the program's goes */
}

/* The highest number ours may take, from the soft limit as last read. */
static int
top_number(bool reread)
{
	struct rlimit rl;

	if ((reread || !soft_limit) && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		soft_limit = rl.rlim_cur ? rl.rlim_cur : 1;
	return soft_limit > TOP_MAX ? TOP_MAX : (int)soft_limit;
}

/* A close-on-exec copy of the O_PATH descriptor pfd, numbered as the
 * head comment says, or -1.  Keeps errno. */
static int
dup_high(int pfd)
{
	int top = top_number(false), kfd = -1;

	if (top >= TOP_MIN) {
		kfd = (int)syscall(SYS_fcntl, pfd, F_DUPFD_CLOEXEC, top - KEPT_MAX);
		if (kfd < 0 && errno == EINVAL && (top = top_number(true)) >= TOP_MIN)
			kfd = (int)syscall(SYS_fcntl, pfd, F_DUPFD_CLOEXEC, top - KEPT_MAX);
	}
	return kfd;
}

/*
 * Gives entry i a descriptor from the O_PATH descriptor pfd, letting go of
 * the least recently mapped file's if all KEPT_MAX are taken.  Table lock
 * held.  Keeps errno.
 */
static int
keep(uint32_t i, int pfd)
{
	int saved_errno = errno, s = -1, kfd;

	for (int t = 0; t < KEPT_MAX && s < 0; t++)
		if (atomic_load(&kept_fd[t]) == 0)
			s = t;
	if (s < 0) {
		s = 0;
		for (int t = 1; t < KEPT_MAX; t++)
			if (kept_used[t] < kept_used[s])
				s = t;
		let_go(s);
	}
	kfd = dup_high(pfd);
	if (kfd >= 0) {
		kept_file[s] = i;
		kept_used[s] = ++use_clock;
		slot_names(s, kfd);
		atomic_fetch_add(&kept_count, 1);
		atomic_store(&kept_fd[s], kfd + 1);
	}
	errno = saved_errno;
	return kfd;
}

/*
 * The library's descriptor of /proc/self/maps, for maps.c's queries, or
 * -1 (then maps.c opens one for the call): kept once a call needed it, in
 * a slot of the kept descriptors (one of the 16), for as long as protected
 * mappings exist (nsb_files_release_unused), never in a fork child (it
 * names the parent's maps: nsb_files_after_fork_child) and never made by a
 * vfork child (whose descriptor table is not ours).  Table lock held.
 */
int
nsb_files_maps_descriptor(void)
{
	int fd = atomic_load(&nsb_files_maps_kept) - 1, pfd;
	struct stat st;

	if (fd >= 0 || nsb_in_vfork_child())
		return fd;
	pfd = nsb_proc_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (nsb_fstat(pfd, &st) == 0) {
		maps_dev = (uint64_t)st.st_dev;
		maps_ino = (uint64_t)st.st_ino;
		fd = keep(0, pfd);
	}
	syscall(SYS_close, pfd);
	return fd;
}

/* The kept descriptor of the maps answered as no maps file would: the
 * program closed and reused its number behind our back.  It is the
 * program's now: forgotten, not closed.  Table lock held. */
void
nsb_files_maps_forget(void)
{
	int fd = atomic_exchange(&nsb_files_maps_kept, 0) - 1, s = kept_slot(fd);

	if (s >= 0 && !kept_file[s]) {
		atomic_store(&kept_fd[s], 0);
		atomic_fetch_sub(&kept_count, 1);
	}
}

/* The kernel has no PROCMAP_QUERY (before 6.11): the kept descriptor of
 * the maps is no use; closed if it is still ours (is_kept: still the maps
 * file kept), forgotten if the program took its number.  Left kept, it
 * outlived the last protected mapping.  Table lock held. */
void
nsb_files_maps_drop(void)
{
	int fd = atomic_load(&nsb_files_maps_kept) - 1, s = kept_slot(fd);

	if (s >= 0 && !kept_file[s] && is_kept(fd))
		let_go(s);
	else
		nsb_files_maps_forget();
}

/* A fork child: the kept descriptor of the maps names the parent's. */
void
nsb_files_after_fork_child(void)
{
	int s = kept_slot(atomic_load(&nsb_files_maps_kept) - 1);

	if (s >= 0 && !kept_file[s])
		let_go(s);
}

/* The file was mapped again: its descriptor is the last to go. */
static void
touch(uint32_t i)
{
	int fd = atomic_load(&files[i].fd), s = kept_slot(fd);

	if (s >= 0 && kept_file[s] == i)
		kept_used[s] = ++use_clock;
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
	char *pool;

	if (!path || !nsb_config.log)
		return 0;
	len = strlen(path) + 1;
	if (len > PATH_POOL_SIZE - path_used)
		return 0;
	for (size_t off = 1; off < path_used; off += strlen(path_pool + off) + 1)
		if (strcmp(path_pool + off, path) == 0)
			return (uint32_t)off;
	pool = nsb_memory_area(NSB_AREA_PATHS, path_used + len);
	if (!pool)
		return 0;
	path_pool = pool;
	memcpy(path_pool + path_used, path, len);
	path_used += len;
	return (uint32_t)(path_used - len);
}

/* A new entry, without a descriptor (refs 0: released at the next update
 * unless a record names it by then), or 0.  hole: find()'s, just before
 * (the lock held): the index slot it goes in unless index_room() rebuilds
 * the index, which saves hashing and probing again. */
static uint32_t
add(uint64_t dev, uint64_t ino, const char *path, uint32_t hole)
{
	uint32_t i = free_list, cap = slots_cap;

	if (!index_room())
		return 0;
	if (i) {
		free_list = files[i].next;
	} else {
		if (files_top == MAX_FILES ||
		    !nsb_memory_area(NSB_AREA_FILES, (files_top + 1) * sizeof(struct file)))
			return 0;
		i = files_top++;
	}
	files[i].used = true;
	files[i].refs = 0;
	files[i].dev = dev;
	files[i].ino = ino;
	files[i].path = intern_path(path);
	atomic_store(&files[i].fd, -1);
	atomic_store(&files[i].src, -1);
	files[i].releasing = true;
	files[i].next = nsb_files_release_list;
	nsb_files_release_list = i;
	live++;
	if (hole < slots_cap && cap == slots_cap)
		slots[hole] = (uint16_t)i;
	else
		index_put(i);
	return i;
}

/* Does a rescue of this file need its size?  Always (rescue.c's
 * check()), but under NOSIGBUS_ERRORS=zero, and for a received file that
 * cannot be described (NSB_META_FOREIGN: no stat of it answers; its
 * entry is there only for the log's path and sender). */
static bool
wants_descriptor(uint32_t meta)
{
	return nsb_config.errors != NSB_ERRORS_ZERO && !(meta & NSB_META_FOREIGN);
}

#ifndef SYS_open_tree
#define SYS_open_tree 428	/* the same on every architecture */
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

/*
 * An O_PATH descriptor of the file open as fd (the program's), or -1.
 * open_tree(fd, "", AT_EMPTY_PATH) gives one (Linux 5.2; O_PATH, unless
 * OPEN_TREE_CLONE, which needs privilege), at half the cost of opening
 * /proc/self/fd/N, whose path walk through /proc is the slow part of a
 * memfd's first mapping (issue 24).  Where the kernel lacks it or a
 * seccomp filter refuses it, /proc/self/fd/N, once and for all.
 */
int
nsb_files_path_descriptor(int fd)
{
	/* 0: not tried; 1: gives O_PATH (checked once); 2: not here. */
	static _Atomic int open_tree_state;
	int state = atomic_load_explicit(&open_tree_state, memory_order_relaxed), pfd;
	char link[32];

	/* Under a seccomp filter, not open_tree (systemd's @mount; it kills
	 * a browser's content process): /proc/self/fd/N, with SIGSYS
	 * deliverable for a browser's broker, which refuses it (the file
	 * then keeps no descriptor of ours: its rescues go unverified once
	 * the program's own is closed).  nsb_proc_open. */
	if (state != 2 && nsb_unfiltered()) {
		pfd = (int)syscall(SYS_open_tree, fd, "", AT_EMPTY_PATH | O_CLOEXEC);
		if (pfd >= 0 && (state == 1 || ((int)syscall(SYS_fcntl, pfd, F_GETFL) & O_PATH))) {
			atomic_store_explicit(&open_tree_state, 1, memory_order_relaxed);
			return pfd;
		}
		if (pfd >= 0)
			syscall(SYS_close, pfd);	/* never: not O_PATH */
		else if (errno != ENOSYS && errno != EPERM && errno != EINVAL)
			return -1;	/* EBADF, EMFILE...: not for want of open_tree */
		atomic_store_explicit(&open_tree_state, 2, memory_order_relaxed);
	}
	/* (No snprintf: an interposed close may get here from a handler.) */
	nsb_proc_path(link, sizeof(link), "/proc/self/fd/", (unsigned long)fd, "");
	return nsb_proc_open(link, O_PATH | O_CLOEXEC);
}

/* ---- watched descriptors ----------------------------------------------- */

/* Entry i's watch slot, or -1.  Table lock held. */
/* Is entry i watched for fd in the slot watch() gave it?  (Table lock
 * held: then watch_slot(i) is that slot.)  Inline: the usual mapping of
 * a file mapped before asks only this. */
static inline bool
watched_in_slot(uint32_t i, int fd)
{
	int w = files[i].wslot;

	return w < WATCH_MAX && atomic_load(&watching->fd[w]) == fd + 1 && watching->file[w] == i;
}

static int
watch_slot(uint32_t i)
{
	int fd = atomic_load(&files[i].src), w = files[i].wslot;

	if (fd < 0)
		return -1;
	/* The slot watch() gave it, first: a slot is cleared only by its
	 * own entry's unwatch (which sets src to -1), so while src >= 0 this
	 * is it; the scan stays for safety, and answers the same. */
	if (w < WATCH_MAX && atomic_load(&watching->fd[w]) == fd + 1 && watching->file[w] == i)
		return w;
	for (int top = atomic_load(&watching->top), v = 0; v < top; v++)
		if (atomic_load(&watching->fd[v]) == fd + 1 && watching->file[v] == i)
			return v;
	return -1;
}

static void
unwatch(uint32_t i)
{
	int w = watch_slot(i);

	atomic_store(&files[i].src, -1);
	if (w >= 0) {
		atomic_store(&watching->fd[w], 0);
		atomic_fetch_sub(&watching->count, 1);
	}
}

/* Watches fd for entry i; false if every slot is taken.  Table lock held. */
static bool
watch(uint32_t i, int fd)
{
	if (atomic_load(&files[i].src) == fd && (watched_in_slot(i, fd) || watch_slot(i) >= 0))
		return true;
	unwatch(i);
	/* A number names one file: another watch of it is stale (closed
	 * behind our back). */
	for (int w = 0, left = (int)atomic_load(&watching->count); w < WATCH_MAX && left > 0; w++) {
		int v = atomic_load(&watching->fd[w]);

		if (v)
			left--;
		if (v == fd + 1)
			unwatch(watching->file[w]);
	}
	for (int w = 0; w < WATCH_MAX; w++)
		if (atomic_load(&watching->fd[w]) == 0) {
			watching->file[w] = i;
			files[i].wslot = (uint8_t)w;
			atomic_store(&files[i].src, fd);
			atomic_fetch_add(&watching->count, 1);
			if (w >= atomic_load(&watching->top))
				atomic_store(&watching->top, w + 1);
			atomic_store(&watching->fd[w], fd + 1);
			return true;
		}
	return false;
}

/* Entry i keeps a descriptor of its own, made from fd (the program's,
 * which names the file).  Table lock held. */
static void
keep_from(uint32_t i, int fd)
{
	int saved_errno = errno, pfd = nsb_files_path_descriptor(fd);
	struct stat st;

	/* Only if the number still names the file: one closed with a raw
	 * close and opened again names another, which is never kept. */
	if (pfd >= 0 && nsb_fstat(pfd, &st) == 0 && (uint64_t)st.st_dev == files[i].dev &&
	    (uint64_t)st.st_ino == files[i].ino)
		(void)keep(i, pfd);
	if (pfd >= 0)
		syscall(SYS_close, pfd);
	errno = saved_errno;
}

/*
 * The program is about to close its descriptors [first, last] (close,
 * dup2 and dup3 onto one, close_range, closefrom): each file mapped from
 * one of them, that the library keeps no descriptor of yet, gets one now,
 * while the number still names it.  Lock-free when none is watched (the
 * usual close).  An interposed close may run in a signal handler: no lock
 * of the library's is ever held by a thread a handler runs in (process.c).
 */
void
nsb_files_closing(unsigned first, unsigned last)
{
	bool any = false;
	int top;

	nsb_received_hint_drop(first, last);
	if (!watching || atomic_load_explicit(&watching->count, memory_order_acquire) == 0)
		return;
	/* Up to the slots ever used, not all WATCH_MAX (a close with one
	 * file watched scanned 64 slots, ~1 000 instructions, issue 40): a
	 * slot set before this load is below the top it reads (the top is
	 * set first, and never falls). */
	top = atomic_load(&watching->top);
	for (int w = 0; w < top && !any; w++) {
		int fd = atomic_load(&watching->fd[w]) - 1;

		any = fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last;
	}
	/* A vfork child closes in a descriptor table of its own, over our
	 * memory: nothing of the parent's to keep there.  A nested call
	 * (ranges.c) cannot take the lock: the file is then checked as one
	 * of no descriptor (libnosigbus(7), "End of file"). */
	if (!any || nsb_in_vfork_child() || nsb_ranges_nested())
		return;
	nsb_ranges_lock();
	top = atomic_load(&watching->top);
	for (int w = 0; w < top; w++) {
		int fd = atomic_load(&watching->fd[w]) - 1;
		uint32_t i = watching->file[w];

		if (fd < 0 || (unsigned)fd < first || (unsigned)fd > last)
			continue;
		if (files[i].used && files[i].refs && atomic_load(&files[i].fd) < 0)
			keep_from(i, fd);
		unwatch(i);
	}
	nsb_ranges_unlock();
}

uint32_t
nsb_files_get(int fd, const struct stat *st, const char *path, uint32_t meta, int pfd)
{
	uint32_t i, hole;

	if (!entries_ready())
		return 0;
	i = find((uint64_t)st->st_dev, (uint64_t)st->st_ino, &hole);
	if (!i)
		i = add((uint64_t)st->st_dev, (uint64_t)st->st_ino, path, hole);
	if (!i || !wants_descriptor(meta))
		return i;
	/* A descriptor of our own only once the program closes its own: a
	 * file mapped and unmapped while the program holds it open costs no
	 * system call here.  But now from pfd, an O_PATH descriptor of this
	 * very file (the decision's), where the policy made one: a file
	 * just received, which the program is about to close. */
	if (atomic_load(&files[i].fd) >= 0)
		touch(i);
	else if ((pfd < 0 || keep(i, pfd) < 0) && !watch(i, fd))
		keep_from(i, fd);
	return i;
}

/* An O_PATH descriptor of the file mapped at [start, end), without side
 * effects: through /proc/self/map_files (needs CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE), else by its path if that is still the same
 * file.  O_PATH: closing it releases no lock of the program's. */
static int
open_mapped(uintptr_t start, uintptr_t end, uint64_t dev, uint64_t ino, const char *path)
{
	char link[64];
	struct stat st;
	int fd;

	snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx",
		 (unsigned long)start, (unsigned long)end);
	fd = open(link, O_PATH | O_CLOEXEC);
	if (fd < 0 && path && path[0] == '/')
		fd = open(path, O_PATH | O_CLOEXEC);
	if (fd >= 0 && (nsb_fstat(fd, &st) < 0 || (uint64_t)st.st_dev != dev ||
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
	uint32_t i, hole;
	int fd;

	*memfs = false;
	if (!entries_ready())
		return 0;
	i = find(dev, ino, &hole);
	if (!i)
		i = add(dev, ino, path, hole);
	/* openat (of /proc/self/map_files, or of a path a broker may trap)
	 * and fstatfs: calls a filter may kill on (sandbox.c), made only
	 * where none is in force.  Under one, no descriptor is kept at this
	 * call, and the file is not known to live in memory. */
	fd = nsb_unfiltered() ? open_mapped(start, end, dev, ino, path) : -1;
	if (fd >= 0) {
		*memfs = fstatfs(fd, &fs) == 0 &&
			 (fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC);
		if (i && wants_descriptor(0) && atomic_load(&files[i].fd) < 0)
			(void)keep(i, fd);
		syscall(SYS_close, fd);
	}
	if (i)
		touch(i);
	return i;
}

void
nsb_files_ref(uint32_t file, int delta)
{
	if (!file)
		return;
	files[file].refs += (uint32_t)delta;
	if (files[file].refs == 0 && !files[file].releasing) {
		files[file].releasing = true;
		files[file].next = nsb_files_release_list;
		nsb_files_release_list = file;
	} else if (files[file].refs && files[file].releasing && nsb_files_release_list == file) {
		/* Named again, and first on the list (an entry just made:
		 * add()): taken off it now, as release_listed() would, which
		 * the unlock then need not call.  Should it lose its records
		 * again, the lines above put it back. */
		nsb_files_release_list = files[file].next;
		files[file].releasing = false;
	}
}

/* As nsb_account_refs_clear (account.c), for a file's entry. */
void
nsb_files_refs_clear(uint32_t file)
{
	if (file)
		files[file].refs = 0;
}

/* The entries on the release list (nsb_files_release_unused).  Apart,
 * so that the usual unlock, with none, does not pay this loop's set-up
 * (six registers saved and restored, ~20 instructions). */
static __attribute__((noinline)) void
release_listed(void)
{
	while (nsb_files_release_list) {
		uint32_t i = nsb_files_release_list;
		int fd, s;

		nsb_files_release_list = files[i].next;
		files[i].releasing = false;
		if (!files[i].used || files[i].refs)
			continue;
		fd = atomic_load(&files[i].fd);
		s = kept_slot(fd);
		if (s >= 0 && kept_file[s] == i)
			let_go(s);
		atomic_store(&files[i].fd, -1);
		unwatch(i);
		index_remove(i);
		files[i].used = false;
		files[i].next = free_list;
		free_list = i;
		live--;
	}
}

/* After an update of the table: no handler can still hold a record that
 * names an entry with no records left.  Only the entries that lost their
 * last record are visited. */
void
nsb_files_release_some(void)
{
	if (nsb_files_release_list)
		release_listed();
	/* The maps' descriptor goes with the last protected mapping. */
	if (atomic_load_explicit(&nsb_files_maps_kept, memory_order_relaxed) && nsb_ranges_count() == 0) {
		int s = kept_slot(atomic_load(&nsb_files_maps_kept) - 1);

		if (s >= 0 && !kept_file[s])
			let_go(s);
	}
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
	struct stat st;		/* the file's, once found */
};
_Static_assert(sizeof(struct map_files_space) <= NSB_SIGNAL_SPACE, "signal space");
static atomic_uint map_files_busy;

/* [signal-safe] stat() of /proc/self/map_files/START-END, or of the path
 * it names, if that is the recorded file. */
static bool
stat_map_files(struct map_files_space *sp, uint32_t file, uintptr_t start, uintptr_t end,
	       struct stat *st, bool *vma)
{
	char *p = put_hex(sp->link + strlen("/proc/self/map_files/"), start);
	ssize_t n;

	*p++ = '-';
	p = put_hex(p, end);
	*p = '\0';
	if (stat(sp->link, st) == 0) {
		*vma = true;
		if (same_file(file, st))
			return true;
	} else {
		/* EPERM (not following the link is allowed): it is there. */
		*vma = errno != ENOENT;
	}
	n = readlink(sp->link, sp->path, sizeof(sp->path) - 1);
	if (n <= 0)
		return false;
	*vma = true;
	sp->path[n] = '\0';
	return stat(sp->path, st) == 0 && same_file(file, st);
}

/*
 * [signal-safe] Without a kept descriptor (it was let go): the file
 * through /proc/self/map_files of the VMA at addr - following the link
 * needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; reading it does not,
 * and its path is as good while the file has one.  Slow (the maps are
 * read), and checked against the recorded inode like the descriptor.
 */
static bool
size_by_map_files(struct map_files_space *sp, uint32_t file, uintptr_t start, uintptr_t end,
		  uintptr_t addr, struct stat *st)
{
	bool vma = false;

	memcpy(sp->link, "/proc/self/map_files/", sizeof("/proc/self/map_files/"));
	/* The record is the VMA until rescues split it: try it first.
	 * Where it is one (its link is there), the maps would only name it
	 * again: reading them - every line, at every rescue of a user who
	 * may not follow the link, of a file no longer at its path - made
	 * 10 000 rescues of 10 000 VMAs take minutes (core-procmaps-vmas as
	 * a user). */
	if (stat_map_files(sp, file, start, end, st, &vma))
		return true;
	return !vma && nsb_maps_find(addr, &sp->vma) &&
	       stat_map_files(sp, file, sp->vma.start, sp->vma.end, st, &vma);
}

/*
 * [signal-safe] Calls take(fd, arg) for each number in /proc/self/fd that
 * is the file (fstat of each into *st: a number closed or reused
 * meanwhile is simply not the file), until take returns true; true then,
 * *st that file's.  The directory's entries are read into buf (the
 * handler's stack may be small).
 */
static bool
each_descriptor(char *buf, size_t len, uint32_t file, struct stat *st,
		bool (*take)(int fd, void *arg), void *arg)
{
	bool found = false;
	long n;
	int dir;

	dir = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/fd",
			   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return false;
	while (!found && (n = syscall(SYS_getdents64, dir, buf, len)) > 0) {
		for (long off = 0; off < n && !found;) {
			/* struct linux_dirent64: ino, off, reclen, type, name */
			unsigned short reclen;
			const char *name = buf + off + 19;
			int fd = 0;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			off += reclen;
			if (name[0] < '0' || name[0] > '9')
				continue;
			for (; *name >= '0' && *name <= '9'; name++)
				fd = fd * 10 + (*name - '0');
			found = fd != dir && nsb_fstat(fd, st) == 0 &&
				same_file(file, st) && (!take || take(fd, arg));
		}
	}
	syscall(SYS_close, dir);
	return found;
}

/*
 * [signal-safe] Without either: one of the program's own descriptors of
 * the file, if it holds one (a compositor that keeps a client's pool
 * open, a database its file).  Slow, and only for a file whose own
 * descriptor the library let go.
 */
static bool
size_by_program_fds(struct map_files_space *sp, uint32_t file, struct stat *st)
{
	return each_descriptor(sp->path, sizeof(sp->path), file, st, NULL, NULL);
}

struct widest {
	int fd;
	int flags;	/* its F_GETFL */
	int rank;
};

/* O_RDWR, then O_PATH (it can be opened anew for writing), then O_RDONLY
 * (or O_WRONLY, which no mapping can use). */
static bool
take_widest(int fd, void *arg)
{
	struct widest *w = arg;
	int fl = (int)syscall(SYS_fcntl, fd, F_GETFL), rank;

	if (fl < 0)
		return false;
	rank = (fl & O_ACCMODE) == O_RDWR ? 3 : (fl & O_PATH) ? 2 : (fl & O_ACCMODE) == O_RDONLY;
	if (rank > w->rank) {
		w->fd = fd;
		w->flags = fl;
		w->rank = rank;
	}
	return rank == 3;
}

int
nsb_files_descriptor(uint32_t file, int *flags)
{
	struct widest w = { .fd = -1 };
	char *buf = nsb_scratch(4096);
	struct stat st;

	if (!file || !buf)
		return -1;
	/* Ours are in /proc/self/fd too. */
	(void)each_descriptor(buf, 4096, file, &st, take_widest, &w);
	*flags = w.flags;
	return w.fd;
}

/* [signal-safe] The two slow ways, in one slot of the signal space; false
 * also when every slot is in use by other handlers. */
static bool
size_without_descriptor(uint32_t file, uintptr_t start, uintptr_t end, uintptr_t addr,
			uint64_t *size, struct timespec *ctime)
{
	int slot = nsb_slot_take(&map_files_busy, NSB_SIGNAL_SLOTS);
	struct map_files_space *sp;
	bool ok;

	if (slot < 0)
		return false;
	/* Both ways open files in /proc: not under a seccomp filter. */
	if (!nsb_unfiltered()) {
		nsb_slot_give(&map_files_busy, slot);
		return false;
	}
	sp = nsb_signal_space(NSB_SPACE_FILES, slot);
	ok = sp && (size_by_map_files(sp, file, start, end, addr, &sp->st) ||
		    size_by_program_fds(sp, file, &sp->st));
	if (ok) {
		*size = (uint64_t)sp->st.st_size;
		*ctime = sp->st.st_ctim;
	}
	nsb_slot_give(&map_files_busy, slot);
	return ok;
}

/* [signal-safe] Through a descriptor: ours, or the program's own still
 * open.  Out of line: its struct stat is on the handler's stack only
 * here, not under the slow way above (SPEC §5's budget). */
__attribute__((noinline)) static bool
size_by_descriptor(uint32_t file, uint64_t *size, struct timespec *ctime)
{
	struct stat st;
	int fd = atomic_load(&files[file].fd);
	/* A number the program reused behind our back is not our file. */
	bool ok = fd >= 0 && nsb_fstat(fd, &st) == 0 && same_file(file, &st);

	if (!ok && !(fd >= 0)) {
		/* None of ours yet: the program's own, still open. */
		fd = atomic_load(&files[file].src);
		ok = fd >= 0 && nsb_fstat(fd, &st) == 0 && same_file(file, &st);
	}
	if (ok) {
		*size = (uint64_t)st.st_size;
		*ctime = st.st_ctim;
	}
	return ok;
}

/* [signal-safe] */
bool
nsb_files_size(uint32_t file, uintptr_t start, uintptr_t end, uintptr_t addr, uint64_t *size,
	       struct timespec *ctime)
{
	int saved_errno = errno;
	struct timespec ct;
	uint64_t sz;
	bool ok;

	if (!file)
		return false;
	ok = size_by_descriptor(file, &sz, &ct) ||
	     size_without_descriptor(file, start, end, addr, &sz, &ct);
	errno = saved_errno;
	if (ok)
		*size = sz;
	if (ok && ctime)
		*ctime = ct;
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

/* Moves our descriptor away from `fd`, which the program wants (its
 * dup2 or dup3 will replace it: an O_PATH file, no lock goes).  False if
 * fd was not ours after all. */
static bool
move_away(int fd)
{
	bool moved = false;

	nsb_ranges_lock();
	for (int s = 0; s < KEPT_MAX; s++) {
		int kfd;

		if (atomic_load(&kept_fd[s]) != fd + 1)
			continue;
		/* Out of numbers: the file's descriptor goes (libnosigbus(7),
		 * "End of file and errors of the file system"). */
		kfd = dup_high(fd);
		slot_names(s, kfd);
		if (kfd >= 0) {
			atomic_store(&kept_fd[s], kfd + 1);
		} else {
			atomic_store(&kept_fd[s], 0);
			atomic_fetch_sub(&kept_count, 1);
		}
		moved = true;
	}
	nsb_ranges_unlock();
	return moved;
}

NSB_EXPORT int
close(int fd)
{
	if (__builtin_expect(is_kept(fd), 0)) {
		errno = EBADF;
		return -1;
	}
	if (fd >= 0)
		nsb_files_closing((unsigned)fd, (unsigned)fd);
	return real_close(fd);
}

/* The C library closes a stream's descriptor out of our sight: fclose,
 * and freopen (which closes it and opens the new file, often at the same
 * number: a keep made later, from that number, would pin a file nothing
 * maps, and its file system). */
static void
stream_closing(FILE *stream)
{
	if (stream && (nsb_received_any() || nsb_received_foreign_any())) {
		int fd = fileno(stream);

		if (fd >= 0)
			nsb_received_hint_drop((unsigned)fd, (unsigned)fd);
	}
	if (stream && watching && atomic_load_explicit(&watching->count, memory_order_relaxed)) {
		int fd = fileno(stream);

		if (fd >= 0)
			nsb_files_closing((unsigned)fd, (unsigned)fd);
	}
}

NSB_EXPORT int
fclose(FILE *stream)
{
	stream_closing(stream);
	return real_fclose(stream);
}

/* Under their symbols' names: with _FILE_OFFSET_BITS=64 <stdio.h> maps
 * freopen to freopen64. */
FILE *nsb_freopen(const char *path, const char *mode, FILE *stream) __asm__("freopen");
FILE *nsb_freopen64(const char *path, const char *mode, FILE *stream) __asm__("freopen64");

NSB_EXPORT FILE *
nsb_freopen(const char *path, const char *mode, FILE *stream)
{
	stream_closing(stream);
	return real_freopen(path, mode, stream);
}

NSB_EXPORT FILE *
nsb_freopen64(const char *path, const char *mode, FILE *stream)
{
	stream_closing(stream);
	return real_freopen64(path, mode, stream);
}

/* Before a dup2 or dup3 of old onto new: -1 (EBADF) if old is ours,
 * which the program never opened; ours moves away from new (1), or
 * nothing was ours (0). */
static int
may_dup(int old, int new)
{
	/* dup3(fd, fd) is EINVAL, whoever fd is: the kernel's answer. */
	if (old == new)
		return 0;
	if (is_kept(old)) {
		errno = EBADF;
		return -1;
	}
	if (new >= 0)
		nsb_files_closing((unsigned)new, (unsigned)new);
	/* A vfork child replaces the number in a descriptor table of its
	 * own: ours stays where it is in the parent's.  A nested call
	 * (ranges.c) cannot take the lock to move ours: it fails with EBUSY,
	 * as a dup2 onto a number another thread is opening does. */
	if (!is_kept(new) || nsb_in_vfork_child())
		return 0;
	if (nsb_ranges_nested()) {
		errno = EBUSY;
		return -1;
	}
	return move_away(new);
}

/* A dup2/dup3 that failed after ours moved away: the old number is ours
 * still, and nobody else's. */
static int
dup_failed(int new)
{
	int saved_errno = errno;

	syscall(SYS_close, new);
	errno = saved_errno;
	return -1;
}

NSB_EXPORT int
dup2(int old, int new)
{
	int moved, ret;

	/* dup2(fd, fd) says whether fd is open: ours is not, to the program
	 * (dup3's EINVAL comes first, whoever fd is: may_dup). */
	if (__builtin_expect(old == new, 0) && is_kept(old)) {
		errno = EBADF;
		return -1;
	}
	moved = may_dup(old, new);

	if (moved < 0)
		return -1;
	ret = real_dup2(old, new);
	return ret < 0 && moved ? dup_failed(new) : ret;
}

NSB_EXPORT int
dup3(int old, int new, int flags)
{
	int moved = may_dup(old, new), ret;

	if (moved < 0)
		return -1;
	ret = real_dup3(old, new, flags);
	return ret < 0 && moved ? dup_failed(new) : ret;
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

/* The lowest of our descriptors in [first, last], or -1.  Table lock
 * held (no new one meanwhile). */
static int
next_kept(unsigned first, unsigned last)
{
	int best = -1;

	for (int s = 0; s < KEPT_MAX; s++) {
		int fd = atomic_load(&kept_fd[s]) - 1;

		/* One no longer ours is the program's to close. */
		if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last &&
		    (best < 0 || fd < best) && is_kept(fd))
			best = fd;
	}
	return best;
}

/* close_range over the program's descriptors only: the gaps between ours. */
static int
close_around(unsigned first, unsigned last, int flags)
{
	int fd, ret = 0;
	/* A nested call (ranges.c): the lock is this thread's, held by the
	 * call it interrupted, which keeps no new descriptor meanwhile. */
	bool nested = nsb_ranges_nested(), called = false;

	if (!nested)
		nsb_ranges_lock();
	while (first <= last && (fd = next_kept(first, last)) >= 0) {
		if ((unsigned)fd > first) {
			called = true;
			if (sys_close_range(first, (unsigned)fd - 1, flags) < 0) {
				ret = -1;
				goto out;
			}
			/* Once is enough: the table is our own from now on
			 * (not before a call was made). */
			flags &= ~(int)CLOSE_RANGE_UNSHARE;
		}
		if ((unsigned)fd == UINT_MAX)
			goto out;
		first = (unsigned)fd + 1;
	}
	if (first <= last)
		ret = sys_close_range(first, last, flags);
	else if (!called)
		/* Every number ours: still the kernel's to check the flags
		 * (EINVAL) and to unshare the table if asked, with a range
		 * above every descriptor, which closes nothing. */
		ret = sys_close_range(UINT_MAX, UINT_MAX, flags);
out:
	if (!nested)
		nsb_ranges_unlock();
	return ret;
}

NSB_EXPORT int
close_range(unsigned first, unsigned last, int flags)
{
	/* Setting close-on-exec touches nothing of ours that is not so. */
	if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		nsb_files_closing(first, last);
	if (atomic_load(&kept_count) == 0 || (flags & CLOSE_RANGE_CLOEXEC) || first > last)
		return sys_close_range(first, last, flags);
	return close_around(first, last, flags);
}

NSB_EXPORT void
closefrom(int lowfd)
{
	int saved_errno = errno;
	unsigned first = lowfd < 0 ? 0 : (unsigned)lowfd;	/* as glibc */

	nsb_files_closing(first, UINT_MAX);
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
