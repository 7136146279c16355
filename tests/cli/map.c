/* SPDX-License-Identifier: MIT */
/*
 * nsb-cli-map - maps a file the way an unmodified program would (no
 * MAP_NOSIGBUS unless --flag), lets a child process shrink it, and touches
 * the mapping.  The bats tests run it with and without the wrapper and look
 * at what it prints and how it ends: a SIGBUS that is not rescued kills it
 * (status 135 in the shell), which is the point.
 *
 * Not linked with libnosigbus: it only gets it through LD_PRELOAD.
 *
 * Usage: nsb-cli-map [--flag] [--private] [--readonly[-rw]] BACKING PAGES [OP]...
 *   --readonly  maps PROT_READ through a descriptor of the file opened
 *            read-only (and closed at once, as ripgrep --mmap does); the
 *            mmap is between two getppid() calls, markers for strace
 *   --readonly-rw  the same through a descriptor opened read-write
 *   BACKING  memfd | memfd-sealed (F_SEAL_SHRINK) | anon | dev-zero | PATH
 *            (PATH is created, filled and left in place for the caller)
 *   PAGES    length of the file and of the mapping, in system pages
 *   OP       trunc=N  a child process truncates the file to N pages
 *            grow=N   a child process refills the file with N pages
 *            read=P   reads all of page P: prints "page P: zeros|file|mixed"
 *            write=P  writes to page P and reads it back
 *            size     prints the file's size in bytes
 *            stats    prints the library's counters, if it is loaded
 *            pid      prints this process's pid
 *            fork     a child prints "child pid: PID" and its counters
 *                     (stats), then ends with exit(0), atexit handlers
 *                     and all, as any process that returns from main
 *            fork-read=P  the same, reading page P before its counters
 *            read-all  touches a byte of every page, in order
 *            sleep-ms=N  sleeps N milliseconds (at least)
 *            unmap    munmap()s the mapping (nothing may touch it after)
 *            writable mprotect()s it read-write: prints "writable: yes"
 *                     or "writable: EACCES" (or the error)
 *
 * The file holds the nsbtest pattern: byte i is (i * 7 + 1) & 0xff.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbtest.h"

static size_t page;

/* Another process changes the file, as a Wayland client would. */
static void
resize_in_child(int fd, size_t pages, bool refill)
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		if (refill)
			nsbt_fill(fd, pages * page);
		else if (ftruncate(fd, (off_t)(pages * page)) < 0) {
			printf("resize: %s\n", strerror(errno));
			fflush(stdout);
			_exit(3);
		}
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0)
		nsbt_fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("resizing the file failed: %s", nsbt_status_str(status));
}

static void
read_page(const volatile unsigned char *map, size_t p)
{
	bool zeros = true, file = true;

	for (size_t i = 0; i < page; i++) {
		unsigned char c = map[p * page + i];

		zeros = zeros && c == 0;
		file = file && c == (unsigned char)nsbt_pattern(p * page + i);
	}
	printf("page %zu: %s\n", p, zeros ? "zeros" : file ? "file" : "mixed");
}

static void
write_page(volatile unsigned char *map, size_t p)
{
	map[p * page + 1] = 0xab;
	printf("wrote %zu: %s\n", p, map[p * page + 1] == 0xab ? "ok" : "lost");
}

static void
print_stats(void)
{
	int (*get)(struct nosigbus_stats *, size_t);
	struct nosigbus_stats st;

	*(void **)&get = dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	if (!get) {
		printf("stats: no library\n");
		return;
	}
	if (get(&st, sizeof(st)) < 0)
		nsbt_fail("nosigbus_get_stats: %s", strerror(errno));
	printf("stats: rescues=%llu pages=%llu failures=%llu mappings=%llu\n",
	       (unsigned long long)st.rescues, (unsigned long long)st.pages,
	       (unsigned long long)st.failures, (unsigned long long)st.mappings);
}

/* A child that ends as a program does (exit, so the library's exit
 * summary runs in it); the parent waits for it. */
static void
fork_child(const volatile unsigned char *map, long p)
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		printf("child pid: %d\n", (int)getpid());
		if (p >= 0)
			read_page(map, (size_t)p);
		print_stats();
		exit(0);
	}
	if (waitpid(pid, &status, 0) < 0)
		nsbt_fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("the forked child: %s", nsbt_status_str(status));
}

static int
open_backing(const char *backing, size_t size)
{
	int fd;

	if (strcmp(backing, "anon") == 0)
		return -1;
	if (strcmp(backing, "dev-zero") == 0) {
		fd = open("/dev/zero", O_RDWR | O_CLOEXEC);
		if (fd < 0)
			nsbt_fail("/dev/zero: %s", strerror(errno));
		return fd;
	}
	if (strcmp(backing, "memfd") == 0 || strcmp(backing, "memfd-sealed") == 0) {
		bool sealed = backing[5] != '\0';

		fd = memfd_create("nsb-cli", MFD_CLOEXEC | (sealed ? MFD_ALLOW_SEALING : 0));
		if (fd < 0)
			nsbt_fail("memfd_create: %s", strerror(errno));
		nsbt_fill(fd, size);
		if (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
			nsbt_fail("F_ADD_SEALS: %s", strerror(errno));
		return fd;
	}
	fd = open(backing, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		nsbt_fail("%s: %s", backing, strerror(errno));
	nsbt_fill(fd, size);
	return fd;
}

int
main(int argc, char **argv)
{
	int flags = MAP_SHARED, fd, i = 1;
	unsigned char *map;
	size_t pages;
	struct stat st;
	bool readonly = false, rdwr = false;

	page = nsbt_page();
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--flag") == 0)
			flags |= MAP_NOSIGBUS;
		else if (strcmp(argv[i], "--private") == 0)
			flags = (flags & ~MAP_SHARED) | MAP_PRIVATE;
		else if (strcmp(argv[i], "--readonly") == 0)
			readonly = true;
		else if (strcmp(argv[i], "--readonly-rw") == 0)
			readonly = rdwr = true;
		else
			nsbt_fail("unknown option %s", argv[i]);
	}
	if (argc - i < 2)
		nsbt_fail("usage: nsb-cli-map [--flag] [--private] [--readonly[-rw]] BACKING PAGES [OP]...");
	pages = strtoul(argv[i + 1], NULL, 10);
	fd = open_backing(argv[i], pages * page);
	if (fd < 0)
		flags |= MAP_ANONYMOUS;
	if (readonly && fd >= 0) {
		char path[64];
		int rfd;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		(void)getppid();
		rfd = open(path, (rdwr ? O_RDWR : O_RDONLY) | O_CLOEXEC);
		if (rfd < 0)
			nsbt_fail("%s: %s", path, strerror(errno));
		map = mmap(NULL, pages * page, PROT_READ, flags, rfd, 0);
		close(rfd);
		(void)getppid();
	} else {
		map = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, flags, fd, 0);
	}
	if (map == MAP_FAILED)
		nsbt_fail("mmap: %s", strerror(errno));

	for (i += 2; i < argc; i++) {
		const char *op = argv[i], *eq = strchr(op, '=');
		size_t n = eq ? strtoul(eq + 1, NULL, 10) : 0;

		if (strncmp(op, "trunc=", 6) == 0)
			resize_in_child(fd, n, false);
		else if (strncmp(op, "grow=", 5) == 0)
			resize_in_child(fd, n, true);
		else if (strncmp(op, "read=", 5) == 0)
			read_page(map, n);
		else if (strncmp(op, "write=", 6) == 0)
			write_page(map, n);
		else if (strcmp(op, "size") == 0) {
			if (fstat(fd, &st) < 0)
				nsbt_fail("fstat: %s", strerror(errno));
			printf("size: %lld\n", (long long)st.st_size);
		} else if (strcmp(op, "stats") == 0)
			print_stats();
		else if (strcmp(op, "unmap") == 0) {
			if (munmap(map, pages * page) < 0)
				nsbt_fail("munmap: %s", strerror(errno));
			printf("unmapped\n");
		} else if (strcmp(op, "writable") == 0) {
			if (mprotect(map, pages * page, PROT_READ | PROT_WRITE) == 0)
				printf("writable: yes\n");
			else
				printf("writable: %s\n", errno == EACCES ? "EACCES" : strerror(errno));
		} else if (strncmp(op, "sleep-ms=", 9) == 0) {
			struct timespec ts = { (time_t)(n / 1000), (long)(n % 1000) * 1000000 };

			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		} else if (strcmp(op, "read-all") == 0) {
			for (size_t p = 0; p < pages; p++)
				(void)*(volatile char *)(map + p * page);
			printf("read %zu pages\n", pages);
		} else if (strcmp(op, "pid") == 0)
			printf("pid: %d\n", (int)getpid());
		else if (strcmp(op, "fork") == 0)
			fork_child(map, -1);
		else if (strncmp(op, "fork-read=", 10) == 0)
			fork_child(map, (long)n);
		else
			nsbt_fail("unknown operation %s", op);
	}
	return 0;
}
