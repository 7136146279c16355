/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the C test programs.  Header-only on purpose:
 * each test is one .c file plus this.
 *
 * Conventions: a test prints what it checks, exits 0 on success, 1 on
 * failure (after printing why), 77 to skip (after printing why).
 * Anything that may kill a process runs in a child: nsbt_run().
 */
#ifndef NSBTEST_H
#define NSBTEST_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nosigbus.h"

/* A function the compiler must keep out of line (a handler tells a
 * faulting PC lies in it: tests/signals).  GCC's noipa also keeps the caller from
 * assuming anything about it; other compilers have noinline only. */
#ifdef __has_attribute
#if __has_attribute(noipa)
#define NSBT_OUT_OF_LINE __attribute__((noinline, noipa))
#endif
#endif
#ifndef NSBT_OUT_OF_LINE
#define NSBT_OUT_OF_LINE __attribute__((noinline))
#endif

/* Run by nsbt_fail() and nsbt_skip() before they exit: what a test set up
 * outside itself (mounts, temporary directories, children). */
static void (*nsbt_on_exit)(void);

/* "tag" and the message, on a line of its own in to. */
static inline void __attribute__((format(printf, 3, 0)))
nsbt_vsay(FILE *to, const char *tag, const char *fmt, va_list ap)
{
	fflush(stdout);
	fputs(tag, to);
	vfprintf(to, fmt, ap);
	fputc('\n', to);
}

static inline void __attribute__((noreturn, format(printf, 1, 2)))
nsbt_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nsbt_vsay(stderr, "FAIL: ", fmt, ap);
	va_end(ap);
	if (nsbt_on_exit)
		nsbt_on_exit();
	exit(1);
}

static inline void __attribute__((noreturn, format(printf, 1, 2)))
nsbt_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nsbt_vsay(stdout, "SKIP: ", fmt, ap);
	va_end(ap);
	if (nsbt_on_exit)
		nsbt_on_exit();
	exit(77);
}

#define NSBT_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
			nsbt_fail("%s:%d: %s: " "%s", __FILE__, __LINE__, #cond, \
				  nsbt_fmt(__VA_ARGS__)); \
	} while (0)

static inline const char * __attribute__((format(printf, 1, 2)))
nsbt_fmt(const char *fmt, ...)
{
	static char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return buf;
}

/*
 * Time (issue 23).  A test is bounded by its work; wall-clock limits only
 * catch a hang (no progress), and every one of them scales with
 * NSB_TIMEOUT_MULTIPLIER (a number >= 1; tests/run-all sets it with
 * meson test --timeout-multiplier, and doc/testing.md names it), as
 * meson's own timeouts scale with --timeout-multiplier.  A test whose work
 * progresses but does not fit its budget is merely slow: it says "too slow
 * under load (N of M done)" and skips (exit 77), never "hung", never that
 * the code is wrong.
 */
/*
 * The system call thread tid of process pid is blocked in (its number), or
 * -1 while it runs or when this cannot be read (/proc/PID/task/TID/syscall).
 */
static inline long
nsbt_task_syscall(pid_t pid, pid_t tid)
{
	char path[64], buf[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || buf[0] < '0' || buf[0] > '9')
		return -1;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

static inline double
nsbt_time_scale(void)
{
	static double scale;
	const char *v;

	if (scale == 0) {
		v = getenv("NSB_TIMEOUT_MULTIPLIER");
		scale = v ? strtod(v, NULL) : 1;
		if (!(scale >= 1))
			scale = 1;
	}
	return scale;
}

/* seconds, scaled by NSB_TIMEOUT_MULTIPLIER. */
static inline int
nsbt_scaled(int seconds)
{
	return (int)(seconds * nsbt_time_scale() + 0.5);
}

/* CLOCK_MONOTONIC, in seconds. */
static inline double
nsbt_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A budget of wall-clock time for some work: nsbt_budget_start(), then
 * nsbt_budget_spent() between units of work. */
struct nsbt_budget {
	double start;
	int seconds;		/* scaled */
};

static inline struct nsbt_budget
nsbt_budget_start(int seconds)
{
	struct nsbt_budget b = { nsbt_now(), nsbt_scaled(seconds) };

	return b;
}

static inline bool
nsbt_budget_spent(const struct nsbt_budget *b)
{
	return nsbt_now() - b->start >= b->seconds;
}

/* The message of a merely slow run: on stdout, exit 77. */
static inline void __attribute__((noreturn))
nsbt_too_slow(const char *what, unsigned long done, unsigned long total, int seconds)
{
	printf("SKIP: %s: too slow under load (%lu of %lu done in %d s; "
	       "NSB_TIMEOUT_MULTIPLIER=%g scales the budget)\n",
	       what, done, total, seconds, nsbt_time_scale());
	fflush(NULL);
	if (nsbt_on_exit)
		nsbt_on_exit();
	exit(77);
}

static inline size_t
nsbt_page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * The "key: N kB" line of a /proc file (/proc/meminfo, /proc/self/status)
 * in bytes; 0 when the file or the line is not there.
 */
static inline size_t
nsbt_proc_bytes(const char *file, const char *key)
{
	char line[256];
	size_t klen = strlen(key), kb = 0;
	FILE *f = fopen(file, "re");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			kb = strtoull(line + klen + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return kb * 1024;
}

/* The process's address space in use (what RLIMIT_AS counts). */
static inline size_t
nsbt_vm_size(void)
{
	size_t n = nsbt_proc_bytes("/proc/self/status", "VmSize");

	if (!n)
		nsbt_fail("no VmSize in /proc/self/status");
	return n;
}

/* The default huge page size, 0 without hugetlbfs. */
static inline size_t
nsbt_huge_page_size(void)
{
	return nsbt_proc_bytes("/proc/meminfo", "Hugepagesize");
}

/* True when libnosigbus is in the process (preloaded or linked). */
static inline bool
nsbt_have_library(void)
{
	return dlsym(RTLD_DEFAULT, "nosigbus_get_stats") != NULL;
}

/*
 * Runs fn(arg) in a forked child; the child exits 0 when fn returns.
 * Returns the raw wait status.
 */
static inline int
nsbt_run(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		fn(arg);
		fflush(NULL);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			nsbt_fail("waitpid: %s", strerror(errno));
	return status;
}

static inline const char *
nsbt_status_str(int status)
{
	static char buf[64];

	if (WIFEXITED(status))
		snprintf(buf, sizeof(buf), "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "killed by %s%s",
			 strsignal(WTERMSIG(status)),
			 WCOREDUMP(status) ? " (core dumped)" : "");
	else
		snprintf(buf, sizeof(buf), "status 0x%x", status);
	return buf;
}

/*
 * For a watchdog, before it kills a hung process: every thread's stack on
 * stderr, when gdb is installed (tests/debian-packages has it), so that a
 * hang seen once in CI says where it was.  Never fails the caller.
 */
static inline void
nsbt_show_stacks(pid_t pid)
{
	char cmd[256];

	if (access("/usr/bin/gdb", X_OK) != 0) {
		fprintf(stderr, "(no gdb: no stacks of the hung process %d)\n", (int)pid);
		return;
	}
	fprintf(stderr, "the hung process %d, thread by thread:\n", (int)pid);
	fflush(NULL);
	snprintf(cmd, sizeof(cmd),
		 "timeout 60 /usr/bin/gdb -batch -nx -p %d -ex 'thread apply all bt' "
		 "</dev/null 2>&1 | grep -v '^\\[New LWP' | head -n 400 >&2", (int)pid);
	if (system(cmd) != 0)
		fprintf(stderr, "(gdb could not show them)\n");
}

static inline void
nsbt_expect_exit(int status, int code, const char *what)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status) != code)
		nsbt_fail("%s: expected exit %d, got %s", what, code,
			  nsbt_status_str(status));
	printf("ok: %s: exited %d\n", what, code);
}

static inline void
nsbt_expect_signal(int status, int sig, const char *what)
{
	if (!WIFSIGNALED(status) || WTERMSIG(status) != sig)
		nsbt_fail("%s: expected death by %s, got %s", what,
			  strsignal(sig), nsbt_status_str(status));
	printf("ok: %s: killed by %s\n", what, strsignal(sig));
}

/* Fills fd with size bytes of a known pattern: byte i is (i * 7 + 1) & 0xff. */
static inline void
nsbt_fill(int fd, size_t size)
{
	char buf[4096];
	size_t done = 0;

	if (ftruncate(fd, 0) < 0)
		nsbt_fail("ftruncate: %s", strerror(errno));
	while (done < size) {
		size_t n = size - done < sizeof(buf) ? size - done : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = (char)(((done + i) * 7 + 1) & 0xff);
		if (pwrite(fd, buf, n, (off_t)done) != (ssize_t)n)
			nsbt_fail("pwrite: %s", strerror(errno));
		done += n;
	}
}

static inline char
nsbt_pattern(size_t i)
{
	return (char)((i * 7 + 1) & 0xff);
}

/* splitmix64: a small seeded generator, the same sequence everywhere. */
static inline uint64_t
nsbt_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

enum nsbt_backing { NSBT_MEMFD, NSBT_TMPFS, NSBT_DISK };

static inline const char *
nsbt_backing_name(enum nsbt_backing b)
{
	return b == NSBT_MEMFD ? "memfd" : b == NSBT_TMPFS ? "tmpfs" : "disk";
}

/*
 * Skips, saying why, unless a file can be made in /dev/shm, the tmpfs the
 * tests use: a chroot that binds /dev without its submounts has a /dev/shm
 * only root can write (schroot mounts one; issue 23).
 */
static inline void
nsbt_require_tmpfs(void)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/nsbtest-%d-XXXXXX", (int)getpid());
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		nsbt_skip("cannot create a file in /dev/shm (%s): these tests need a writable "
			  "tmpfs there (in a chroot, mount one, as schroot does)", strerror(errno));
	unlink(path);
	close(fd);
}

/*
 * A file of size bytes filled with the pattern, already unlinked.
 * NSBT_DISK lives in the build tree (NSB_BUILD_ROOT or the working
 * directory), never in /tmp, which may be tmpfs.
 */
static inline int
nsbt_file(enum nsbt_backing b, size_t size)
{
	char path[4096];
	const char *dir;
	int fd;

	if (b == NSBT_MEMFD) {
		fd = memfd_create("nsbtest", MFD_CLOEXEC);
	} else {
		if (b == NSBT_TMPFS)
			nsbt_require_tmpfs();
		dir = b == NSBT_TMPFS ? "/dev/shm" : getenv("NSB_BUILD_ROOT");
		if (!dir)
			dir = ".";
		snprintf(path, sizeof(path), "%s/nsbtest-%d-XXXXXX", dir, (int)getpid());
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0)
		nsbt_fail("creating a %s file: %s", nsbt_backing_name(b), strerror(errno));
	nsbt_fill(fd, size);
	return fd;
}

/* Sends fd over the Unix socket sock (SCM_RIGHTS) with one byte of data:
 * sendmsg's result. */
static inline ssize_t
nsbt_send_fd(int sock, int fd, unsigned char byte, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, flags);
}

#endif /* NSBTEST_H */
