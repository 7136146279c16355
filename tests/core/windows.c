/* SPDX-License-Identifier: MIT */
/*
 * The target of core-windows (windows.py drives it under gdb): the race
 * windows of a failing mprotect held open, one at a time, instead of
 * hoped for (issue 39 item 7: two defects seen only where two idle cores
 * run the threads truly in parallel).  The threads here do nothing on
 * their own: each step waits for a flag that the driver sets while it
 * holds the other threads where it wants them (scheduler-locking).
 *
 *   points KIND   the main thread makes a failing mprotect of KIND over
 *                 a protected mapping of a truncated memfd, ROUNDS times;
 *                 the driver stops it at each step of the library's path
 *                 (lock, records collected, flux, the system call, the
 *                 kernel asked, cut, inserts, joins, flux ended, unlock)
 *                 and lets the faulter read one fresh page meanwhile.
 *                 KIND: hole (the mapping and the unmapped page after it:
 *                 ENOMEM), middle (an unmapped page inside, alternately
 *                 to PROT_READ: ENOMEM after the kernel changed the lower
 *                 part), below (the unmapped page before it), eacces (a
 *                 shared mapping of a read-only descriptor made writable),
 *                 pkey (a key never allocated: EINVAL), einval (unknown
 *                 protection bits), growsdown (PROT_GROWSDOWN on a
 *                 mapping that does not grow: EINVAL).
 *   remap         the main thread's failing mprotect (hole) is stopped
 *                 between the cut of its records and their insert; a
 *                 second thread maps the mapping afresh (MAP_FIXED) then,
 *                 and is stopped after its system call, before its
 *                 record; the faulter reads page 0 there, whose unit the
 *                 old mapping had replaced.
 *
 * Every read must be rescued (the faulter checks zeros; the process dies
 * of SIGBUS where one is not), and every mprotect must fail with the
 * kernel's errno.  Prints "survived" at the end.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nosigbus.h>

#define NPAGES	128
#define ROUNDS	3

volatile int fault_go, remap_go, target, release;	/* set by the driver */
static volatile int stop;
static atomic_int started;	/* threads in their loops */
static char *map;
static size_t ps;
static int fd;

/* Where the driver catches each thread done with its step. */
void windows_faulted(int page);
void windows_remapped(void);
void windows_round(int n);
void windows_rounds_done(void);

__attribute__((noinline)) void
windows_faulted(int page)
{
	__asm__ volatile("" : : "r"(page) : "memory");
}

__attribute__((noinline)) void
windows_remapped(void)
{
	__asm__ volatile("" : : : "memory");
}

__attribute__((noinline)) void
windows_round(int n)
{
	__asm__ volatile("" : : "r"(n) : "memory");
}

/* The main thread's last step: after it, the driver lets every thread run
 * to the end (the join needs the faulter). */
__attribute__((noinline)) void
windows_rounds_done(void)
{
	__asm__ volatile("" : : : "memory");
}

static void
die(const char *what)
{
	fprintf(stderr, "core-windows: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* Reads page `target` when told to: zeros, past the end of the file. */
static void *
faulter(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	while (!stop) {
		while (!fault_go && !stop)
			;
		if (stop)
			break;
		fault_go = 0;
		if (((volatile char *)map)[(size_t)target * ps] != 0) {
			fprintf(stderr, "core-windows: page %d reads non-zero\n", target);
			exit(2);
		}
		windows_faulted(target);
	}
	return NULL;
}

/* Maps the mapping afresh when told to. */
static void *
remapper(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	while (!stop) {
		while (!remap_go && !stop)
			;
		if (stop)
			break;
		remap_go = 0;
		if (mmap(map, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
			 fd, 0) != map)
			die("remap");
		windows_remapped();
	}
	return NULL;
}

static int
failing_mprotect(const char *kind, int n)
{
	int want = EINVAL, ret;

	errno = 0;
	if (!strcmp(kind, "hole") || !strcmp(kind, "remap")) {
		want = ENOMEM;
		ret = mprotect(map, (NPAGES + 1) * ps, PROT_READ | PROT_WRITE);
	} else if (!strcmp(kind, "middle")) {
		want = ENOMEM;
		ret = mprotect(map, NPAGES * ps, (n & 1) ? PROT_READ | PROT_WRITE : PROT_READ);
	} else if (!strcmp(kind, "below")) {
		want = ENOMEM;
		ret = mprotect(map - ps, (NPAGES + 1) * ps, PROT_READ | PROT_WRITE);
	} else if (!strcmp(kind, "eacces")) {
		want = EACCES;
		ret = mprotect(map, NPAGES * ps, PROT_READ | PROT_WRITE);
	} else if (!strcmp(kind, "pkey")) {
		ret = pkey_mprotect(map, NPAGES * ps, PROT_READ | PROT_WRITE, 13);
		if (ret < 0 && errno == ENOSYS)
			return 0;
	} else if (!strcmp(kind, "einval")) {
		ret = mprotect(map, NPAGES * ps, PROT_READ | PROT_WRITE | 0x40);
	} else {
		ret = mprotect(map, NPAGES * ps, PROT_READ | PROT_GROWSDOWN);
	}
	if (ret != -1 || errno != want) {
		fprintf(stderr, "core-windows: mprotect %s: %d (%s), expected -1/%s\n", kind, ret,
			strerror(errno), strerror(want));
		exit(2);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "points";
	const char *kind = argc > 2 ? argv[2] : "hole";
	bool remap = !strcmp(what, "remap");
	bool readonly = !remap && !strcmp(kind, "eacces");
	pthread_t f, r;
	char *area;
	int mfd;

	ps = (size_t)sysconf(_SC_PAGESIZE);
	fd = memfd_create("core-windows", 0);
	if (fd < 0 || ftruncate(fd, NPAGES * ps) != 0)
		die("memfd");
	mfd = fd;
	if (readonly) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		mfd = open(path, O_RDONLY | O_CLOEXEC);
		if (mfd < 0)
			die("open read-only");
	}
	/* Room for the mapping and a page on either side, unmapped once the
	 * threads (their stacks) are made. */
	area = mmap(NULL, (NPAGES + 2) * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		die("room");
	map = mmap(area + ps, NPAGES * ps, readonly ? PROT_READ : PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, mfd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	if (!remap && !strcmp(kind, "middle") && munmap(map + NPAGES / 2 * ps, ps) != 0)
		die("munmap");
	if (ftruncate(fd, 0) != 0)
		die("ftruncate");
	/* Page 0 replaced in this mapping: its unit is claimed for good. */
	if (((volatile char *)map)[0] != 0)
		die("page 0");
	if (pthread_create(&f, NULL, faulter, NULL) != 0 ||
	    (remap && pthread_create(&r, NULL, remapper, NULL) != 0))
		die("pthread_create");
	while (atomic_load(&started) < (remap ? 2 : 1))
		;
	if (munmap(area, ps) != 0 || munmap(area + (NPAGES + 1) * ps, ps) != 0)
		die("munmap");
	for (int n = 0; n < (remap ? 1 : ROUNDS); n++) {
		windows_round(n);
		failing_mprotect(remap ? "remap" : kind, n);
	}
	windows_rounds_done();
	/* remap: the driver's steps go on after the mprotect returned. */
	while (remap && !release)
		;
	stop = 1;
	pthread_join(f, NULL);
	if (remap)
		pthread_join(r, NULL);
	printf("survived\n");
	return 0;
}
