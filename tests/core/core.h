/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the tests in tests/core, on top of tests/common/nsbtest.h.
 *
 * Every core test is linked with libnosigbus (the same interposition as a
 * preload).  Settings that the library reads once at start (NOSIGBUS_FILL,
 * NOSIGBUS_STRICT) are tested by re-executing the test binary with the
 * variable set and a scenario name as argv[1]: core_reexec().
 */
#ifndef CORE_H
#define CORE_H

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "nsbtest.h"

#define CORE_PROT_RW (PROT_READ | PROT_WRITE)

/* One case of a test: run in a child by core_run_cases(). */
struct core_case {
	const char *name;
	void (*fn)(void *);
};

/* Runs each of n cases in a child (nsbt_run); a failed one is said on
 * stderr.  A case that exits 77 (its reason said) is skipped when skips,
 * failed when not.  The test's exit: 1 if any failed. */
static inline int
core_run_cases(const struct core_case *cases, size_t n, bool skips)
{
	int failed = 0;

	for (size_t i = 0; i < n; i++) {
		int status = nsbt_run(cases[i].fn, NULL);

		if (skips && WIFEXITED(status) && WEXITSTATUS(status) == 77)
			continue;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "FAIL: %s: %s\n", cases[i].name, nsbt_status_str(status));
			failed++;
		}
	}
	return failed ? 1 : 0;
}

/* Naps (1 ms at a time) until another thread sets *flag. */
static inline void
core_nap_until(atomic_bool *flag)
{
	while (!atomic_load(flag)) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
}

/*
 * A system call of up to three arguments made with the instruction
 * itself, behind the library's back (its wrappers, and libc's, do not
 * see it; a seccomp filter does): the kernel's return, a value or -errno;
 * -ENOSYS on architectures other than x86_64 and aarch64.  Not inlined:
 * in a function that calls vfork (vforkdeath.c), gcc's -Wclobbered takes
 * the register variables for ones vfork may clobber (aarch64).
 */
static __attribute__((noinline, unused)) long
core_raw3(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;

	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
#else
	(void)nr, (void)a, (void)b, (void)c;
	return -ENOSYS;
#endif
}

/* Installs a seccomp filter with the system call itself (core_raw3),
 * behind the library's back (its prctl and seccomp wrappers would see
 * it), with flags (SECCOMP_FILTER_FLAG_*): the kernel's return, 0 (or the
 * listener's descriptor) or -errno; -ENOSYS on other architectures. */
static inline long
core_raw_seccomp(struct sock_fprog *prog, unsigned long flags)
{
	return core_raw3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, (long)flags, (long)prog);
}


#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/* A userfaultfd, O_CLOEXEC | O_NONBLOCK.  Not root, with
 * vm.unprivileged_userfaultfd=0 (the default): one that handles faults
 * from user space only (Linux 5.11), as are the faults the tests make.
 * -1 with errno, from the first attempt, where neither is allowed. */
static inline int
core_userfaultfd(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK), saved = errno;

	if (fd < 0 && errno == EPERM) {
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
		if (fd < 0)
			errno = saved;
	}
	return fd;
}

static inline struct nosigbus_stats
core_stats(void)
{
	struct nosigbus_stats st;

	memset(&st, 0, sizeof(st));
	if (nosigbus_get_stats(&st, sizeof(st)) != 0)
		nsbt_fail("nosigbus_get_stats: %s", strerror(errno));
	return st;
}

static inline void *
core_map(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(addr, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		nsbt_fail("mmap(%p, %zu, %#x, %#x, %d, %lld): %s", addr, len,
			  prot, flags, fd, (long long)off, strerror(errno));
	return p;
}

static inline void
core_truncate(int fd, off_t size)
{
	if (ftruncate(fd, size) != 0)
		nsbt_fail("ftruncate(%d, %lld): %s", fd, (long long)size,
			  strerror(errno));
}

/* An address range that nothing uses: reserved, then released. */
static inline char *
core_free_range(size_t len)
{
	char *p = core_map(NULL, len, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (munmap(p, len) != 0)
		nsbt_fail("munmap: %s", strerror(errno));
	return p;
}

/* Index of the first byte that is not c, or len. */
static inline size_t
core_first_not(const volatile char *p, char c, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != c)
			return i;
	return len;
}

/* Index of the first byte that differs from the file pattern at off, or len. */
static inline size_t
core_first_not_pattern(const volatile char *p, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != nsbt_pattern(off + i))
			return i;
	return len;
}

static inline void
core_expect_bytes(const void *p, char c, size_t len, const char *what)
{
	size_t i = core_first_not(p, c, len);

	if (i != len)
		nsbt_fail("%s: byte %zu of %zu at %p is %#x, expected %#x", what,
			  i, len, (const char *)p + i,
			  (unsigned char)((const volatile char *)p)[i],
			  (unsigned char)c);
}

static inline void
core_expect_pattern(const void *p, size_t off, size_t len, const char *what)
{
	size_t i = core_first_not_pattern(p, off, len);

	if (i != len)
		nsbt_fail("%s: byte %zu of %zu (file offset %zu) is %#x, expected "
			  "the file's %#x", what, i, len, off + i,
			  (unsigned char)((const volatile char *)p)[i],
			  (unsigned char)nsbt_pattern(off + i));
}

/*
 * The file must still be exactly size bytes of the pattern: the library
 * never writes, extends or shrinks it.
 */
static inline void
core_expect_file(int fd, size_t size, const char *what)
{
	struct stat st;
	char *buf;
	ssize_t n;

	if (fstat(fd, &st) != 0)
		nsbt_fail("%s: fstat: %s", what, strerror(errno));
	if ((size_t)st.st_size != size)
		nsbt_fail("%s: file size is %lld, expected %zu", what,
			  (long long)st.st_size, size);
	buf = malloc(size + 1);
	if (!buf)
		nsbt_fail("malloc");
	n = pread(fd, buf, size + 1, 0);
	if (n != (ssize_t)size)
		nsbt_fail("%s: pread returned %zd (%s), expected %zu", what, n,
			  n < 0 ? strerror(errno) : "short", size);
	core_expect_pattern(buf, 0, size, what);
	free(buf);
}

/* Is the page at p mapped at all?  mincore() fails with ENOMEM if not. */
static inline bool
core_page_mapped(const void *p)
{
	unsigned char v;
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(nsbt_page() - 1);

	if (mincore((void *)a, nsbt_page(), &v) == 0)
		return true;
	if (errno != ENOMEM)
		nsbt_fail("mincore(%p): %s", (void *)a, strerror(errno));
	return false;
}

/* The line of /proc/self/maps that holds p (empty if none), for messages. */
static inline const char *
core_maps_line(const void *p)
{
	static char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long lo, hi;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= (uintptr_t)p && (uintptr_t)p < hi)
			goto out;
	line[0] = 0;
out:
	if (f)
		fclose(f);
	return line;
}

/* The protection of the VMA holding p, as /proc/self/maps shows it
 * ("r--s"), in out[5]; fails the test where no VMA holds p. */
static inline void
core_maps_perms(const void *p, char out[5])
{
	const char *l = core_maps_line(p), *sp = strchr(l, ' ');

	NSBT_CHECK(sp && strlen(sp) > 5, "no maps line for %p", p);
	memcpy(out, sp + 1, 4);
	out[4] = 0;
}

static inline void
core_expect_unmapped(const void *p, size_t len, const char *what)
{
	for (size_t off = 0; off < len; off += nsbt_page())
		if (core_page_mapped((const char *)p + off))
			nsbt_fail("%s: page %p is mapped, expected nothing there: %s",
				  what, (const char *)p + off, core_maps_line((const char *)p + off));
}

/* In a child that is expected to die: no core file, it only slows things. */
static inline void
core_no_core(void)
{
	struct rlimit rl = { 0, 0 };

	setrlimit(RLIMIT_CORE, &rl);
}

struct core_touch {
	volatile char *p;
	bool write;
};

static inline void
core_touch_fn(void *arg)
{
	struct core_touch *t = arg;

	core_no_core();
	if (t->write)
		*t->p = 1;
	else
		(void)*t->p;
}

/* The process's address space in bytes (/proc/self/statm), for tests
 * that set RLIMIT_AS just above what is mapped. */
static inline size_t
core_vm_size(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long pages = 0;

	NSBT_CHECK(f && fscanf(f, "%lu", &pages) == 1, "statm");
	fclose(f);
	return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* RLIMIT_AS set to what is mapped now, and every page of room left under
 * it (what stdio gave back since) taken with raw mmaps: the library's
 * next mapping of its own fails, as it would at a tight limit. */
static inline void
core_tight_as(void)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	NSBT_CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit");
	rl.rlim_cur = core_vm_size();
	NSBT_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
	for (;;) {
		long r = syscall(SYS_mmap, NULL, ps, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (r == -1) {
			NSBT_CHECK(errno == ENOMEM, "mmap: %s", strerror(errno));
			break;
		}
	}
}

/* Touches p in a child and returns how the child ended. */
static inline int
core_touch_status(void *p, bool write)
{
	struct core_touch t = { p, write };

	return nsbt_run(core_touch_fn, &t);
}

/*
 * A child that maps a fresh, unflagged mapping of an empty file at addr
 * (MAP_FIXED_NOREPLACE: the range must be free) and reads it: it must die
 * by SIGBUS, i.e. nothing of the library's protection is left at addr.
 * The file is on disk, which neither the default policy nor flag
 * protects (a memfd would be rescued by the default policy's own right).
 */
static inline void
core_unflagged_at_fn(void *arg)
{
	struct core_touch *t = arg;
	int fd = nsbt_file(NSBT_DISK, 0);
	char *p;

	core_no_core();
	p = mmap((void *)t->p, nsbt_page(), CORE_PROT_RW,
		 MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
	if (p == MAP_FAILED || p != t->p)
		nsbt_fail("mmap at %p: %s", (void *)t->p,
			  p == MAP_FAILED ? strerror(errno) : "other address");
	(void)*(volatile char *)p;
	_exit(3);
}

static inline void
core_expect_unprotected(void *addr, const char *what)
{
	struct core_touch t = { addr, false };
	const char *policy = getenv("NOSIGBUS_POLICY");
	int status;

	/* Under files every file mapping is protected in its own right. */
	if (policy && strcmp(policy, "files") == 0)
		nsbt_skip("%s: under NOSIGBUS_POLICY=files a new file mapping is protected anyway: "
			  "run under the default policy or flag", what);
	status = nsbt_run(core_unflagged_at_fn, &t);

	if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
		nsbt_fail("%s: a read past the end of a new, unflagged mapping at %p was rescued: "
			  "a record outlived the mapping it described", what, addr);
	nsbt_expect_signal(status, SIGBUS, what);
}

/*
 * A child maps an empty memfd over the page at addr with a raw mmap(2)
 * (which the library does not see, so its records stay as they are) and
 * reads it: it must die of SIGBUS, i.e. no record covers addr.  Unlike
 * core_expect_unprotected(), addr may be mapped.
 */
static inline void
core_raw_probe_fn(void *arg)
{
	struct core_touch *t = arg;
	int fd = memfd_create("core-raw-probe", MFD_CLOEXEC);

	core_no_core();
	if (fd < 0 || (void *)syscall(SYS_mmap, t->p, nsbt_page(), PROT_READ,
				      MAP_SHARED | MAP_FIXED, fd, 0) != (void *)t->p)
		nsbt_fail("raw mmap at %p: %s", (void *)t->p, strerror(errno));
	(void)*(volatile char *)t->p;
	_exit(3);
}

static inline void
core_expect_no_record(void *addr, const char *what)
{
	struct core_touch t = { addr, false };
	int status = nsbt_run(core_raw_probe_fn, &t);

	if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
		nsbt_fail("%s: a fault past the end of an empty file mapped at %p was rescued: the "
			  "library has a record there", what, addr);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		nsbt_fail("%s: a fault past the end of an empty file mapped at %p was 'rescued' with "
			  "a page that cannot be read: the library has a record there", what, addr);
	nsbt_expect_signal(status, SIGBUS, what);
}

/*
 * Runs this test binary again as "argv0 scenario" with the given
 * NAME=VALUE settings (NULL-terminated) added to the environment.
 * Returns the wait status.
 */
struct core_reexec_args {
	const char *scenario;
	const char *const *settings;
};

static inline void
core_reexec_child(void *arg)
{
	const struct core_reexec_args *a = arg;
	char *argv[] = { (char *)"core-reexec", (char *)a->scenario, NULL };

	for (size_t i = 0; a->settings && a->settings[i]; i++)
		if (putenv((char *)a->settings[i]) != 0)
			_exit(126);
	execv("/proc/self/exe", argv);
	fprintf(stderr, "execv /proc/self/exe: %s\n", strerror(errno));
	_exit(127);
}

static inline int
core_reexec(const char *scenario, const char *const *settings)
{
	struct core_reexec_args a = { scenario, settings };

	return nsbt_run(core_reexec_child, &a);
}

/*
 * Runs "argv0 scenario" once under each fill (NOSIGBUS_FILL page, range
 * and auto), each in a fresh exec; every one must exit 0.
 */
static inline void
core_reexec_each_fill(const char *scenario, const char *what)
{
	static const char *const fills[] = { "page", "range", "auto" };

	for (int i = 0; i < 3; i++) {
		char env[64];
		const char *settings[] = { env, NULL };

		snprintf(env, sizeof(env), "NOSIGBUS_FILL=%s", fills[i]);
		nsbt_expect_exit(core_reexec(scenario, settings), 0,
				 nsbt_fmt("%s, fill=%s", what, fills[i]));
	}
}

/*
 * The library reads its NOSIGBUS_* variables once, at start: a test that
 * depends on one (NOSIGBUS_POLICY=flag, say: the default became shm)
 * re-executes itself with it set, unless it already is.
 */
static inline void
core_setenv_reexec(char **argv, const char *name, const char *value)
{
	const char *cur = getenv(name);

	if (cur && strcmp(cur, value) == 0)
		return;
	if (setenv(name, value, 1) != 0)
		nsbt_fail("setenv %s: %s", name, strerror(errno));
	fflush(NULL);
	execv("/proc/self/exe", argv);
	nsbt_fail("execv /proc/self/exe: %s", strerror(errno));
}

static inline double
core_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A fresh progress word (0) for core_wait_watchdog/core_run_watched: a
 * shared anonymous mapping, so that what a child counts after the fork is
 * what its parent's watchdog reads.  Make it before the fork; each call
 * maps a new one (never unmapped: a test makes a few).
 */
static inline volatile unsigned long *
core_progress(void)
{
	void *m = mmap(NULL, sizeof(unsigned long), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	NSBT_CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	return m;
}

/*
 * The parent's watchdog: waits for pid; if it is still running after
 * `seconds`, or (with progress != NULL) if *progress has not changed for
 * `seconds`, kills it with SIGKILL (a child spinning with signals blocked
 * never sees alarm()), reaps it and fails with a message naming what.
 * Returns the wait status otherwise.  Not a timing assertion: the limit
 * is far above what the scenario needs; only a hang reaches it.
 */
static inline int
core_wait_watchdog(pid_t pid, int seconds, const volatile unsigned long *progress,
		   const char *what)
{
	unsigned long last = progress ? *progress : 0;
	double since = core_now();
	int status;

	for (;;) {
		struct timespec nap = { 0, 5 * 1000 * 1000 };
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			nsbt_fail("waitpid: %s", strerror(errno));
		if (progress && *progress != last) {
			last = *progress;
			since = core_now();
		}
		if (core_now() - since > seconds)
			break;
		nanosleep(&nap, NULL);
	}
	nsbt_show_stacks(pid);
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (progress)
		nsbt_fail("%s: no progress for %d s (stuck at %lu): a hang; the watchdog "
			  "killed it with SIGKILL", what, seconds, *progress);
	nsbt_fail("%s: still running after %d s: a hang; the watchdog killed it with "
		  "SIGKILL", what, seconds);
}

/*
 * Like nsbt_run(), with the watchdog, and with the child's stderr
 * captured into err (NUL-terminated, may be NULL) so that the caller can
 * check that the library printed nothing.
 */
static inline int
core_run_watched(void (*fn)(void *), void *arg, int seconds,
		 const volatile unsigned long *progress, const char *what,
		 char *err, size_t errlen)
{
	int efd = -1, status;
	pid_t pid;

	if (err) {
		efd = memfd_create("core-stderr", MFD_CLOEXEC);
		if (efd < 0)
			nsbt_fail("memfd_create: %s", strerror(errno));
		err[0] = '\0';
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		if (efd >= 0)
			dup2(efd, STDERR_FILENO);
		fn(arg);
		fflush(NULL);
		_exit(0);
	}
	status = core_wait_watchdog(pid, seconds, progress, what);
	if (efd >= 0) {
		ssize_t n = pread(efd, err, errlen - 1, 0);

		err[n > 0 ? n : 0] = '\0';
		close(efd);
		/* Shown as it came, so that a failure message has it. */
		if (n > 0)
			fprintf(stderr, "%s: the child's stderr:\n%s", what, err);
	}
	return status;
}

/* An unexpected line from the library ("... passing SIGBUS on") fails. */
static inline void
core_expect_quiet(const char *err, const char *what)
{
	const char *l = strstr(err, "nosigbus:");

	if (l)
		nsbt_fail("%s: the library printed: %.*s", what, (int)strcspn(l, "\n"), l);
}

/*
 * One scenario run watched: fn(arg) in a child (core_run_watched) with a
 * watchdog of `seconds` scaled by NSB_TIMEOUT_MULTIPLIER (nsbt_scaled),
 * its stderr captured.  Returns 77 if it exited 77 (a skip, its reason
 * said: the caller passes it on); otherwise it must have exited 0 with no
 * line of the library's on its stderr, else the test fails; returns 0.
 */
static inline int
core_run_case_watched(void (*fn)(void *), void *arg, int seconds, const char *what)
{
	char err[16384];
	int status = core_run_watched(fn, arg, nsbt_scaled(seconds), NULL, what, err, sizeof(err));

	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 77;
	nsbt_expect_exit(status, 0, what);
	core_expect_quiet(err, what);
	return 0;
}

/*
 * Runs fn on each of the n scenarios of a table (each `size` bytes, its
 * name a const char * at name_off), or on the one of index `only` alone
 * if only < n, each in a watched child of its own
 * (core_run_case_watched), given a pointer to its scenario.  Returns 77
 * at the first that exits 77 (the rest are not run), 0 when all passed.
 * CORE_RUN_TABLE_WATCHED() takes the table's array itself.
 */
static inline int
core_run_cases_watched(void (*fn)(void *), const void *table, size_t size, size_t name_off,
		       size_t n, size_t only, int seconds)
{
	for (size_t i = 0; i < n; i++) {
		const char *sc = (const char *)table + i * size;

		if (only < n && i != only)
			continue;
		if (core_run_case_watched(fn, (void *)sc, seconds,
					  *(const char *const *)(const void *)(sc + name_off)) == 77)
			return 77;
	}
	return 0;
}

#define CORE_RUN_TABLE_WATCHED(fn, table, only, seconds)                                       \
	core_run_cases_watched((fn), (table), sizeof((table)[0]),                             \
			       offsetof(__typeof__((table)[0]), name),                        \
			       sizeof(table) / sizeof((table)[0]), (only), (seconds))

/* Touches p in a child with its stderr captured: status, and no message. */
static inline int
core_touch_quiet(void *p, bool write, const char *what)
{
	struct core_touch t = { p, write };
	char err[4096];
	int status = core_run_watched(core_touch_fn, &t, 60, NULL, what, err, sizeof(err));

	core_expect_quiet(err, what);
	return status;
}

/* A tiny deterministic PRNG (xorshift64*), so that runs are reproducible. */
static inline uint64_t
core_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/*
 * Pins the calling thread to CPU n (modulo the CPUs it may use): race
 * tests put their threads on different CPUs, so that on an idle machine
 * they run truly in parallel, as a loaded one never makes them (issue
 * 39: two races failed only on idle machines).  Silently nothing where
 * affinity cannot be set.
 */
static inline void
core_pin(int n)
{
	cpu_set_t allowed, one;
	int count, k = 0;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
	    (count = CPU_COUNT(&allowed)) < 2)
		return;
	n %= count;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		if (k++ == n) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			(void)sched_setaffinity(0, sizeof(one), &one);
			return;
		}
	}
}

/*
 * A race between calls of the caller's thread and a faulter thread that
 * reads the pages of a truncated protected mapping, past its file's end,
 * and maps it afresh after each pass, so that every pass faults again
 * (races.c, inplace.c): every fault must be rescued, to zero.  Each race
 * runs in a child of its own (core_race_watched), its watchdog watching
 * the progress the threads make (core_race_tick).
 */
struct core_race {
	const char *what;	/* for messages */
	char *p;		/* the mapping */
	size_t pages;		/* its length in pages */
	/* Is page i left unread?  NULL: every page is read. */
	bool (*unread)(const struct core_race *r, size_t i);
	/* Maps it afresh (MAP_FIXED) after each pass; NULL: not (another
	 * thread of the caller's does). */
	void (*afresh)(struct core_race *r);
	atomic_bool stop;
	atomic_ulong faults;
};

/* The progress counter, shared with the watchdog: mapped on the first
 * call, which must come before the fork (core_race_watched makes it). */
static inline volatile unsigned long *
core_race_progress(void)
{
	static volatile unsigned long *progress;

	if (!progress)
		progress = core_progress();
	return progress;
}

static inline void
core_race_tick(void)
{
	__atomic_add_fetch(core_race_progress(), 1, __ATOMIC_RELAXED);
}

/* The faulter thread (CPU 1), until r->stop. */
static inline void *
core_race_faulter(void *arg)
{
	struct core_race *r = arg;

	core_pin(1);
	while (!atomic_load(&r->stop)) {
		for (size_t i = 0; i < r->pages && !atomic_load(&r->stop); i++) {
			if (r->unread && r->unread(r, i))
				continue;
			if (*(volatile char *)(r->p + i * nsbt_page()) != 0)
				nsbt_fail("%s: a rescued page reads non-zero", r->what);
			atomic_fetch_add(&r->faults, 1);
		}
		core_race_tick();
		if (r->afresh)
			r->afresh(r);
	}
	return NULL;
}

/*
 * The race: the faulter started (and `also`, a thread of the caller's,
 * if not NULL; both see r->stop), the caller's thread on CPU 0 makes
 * call(r, n) for n = 0, 1, ... for 1 s (scaled) and on until min_faults
 * faults, at most 10 s; then both threads are stopped and joined.
 * Returns the number of calls made.
 */
static inline unsigned long
core_race_run(struct core_race *r, unsigned long min_faults,
	      void (*call)(struct core_race *r, unsigned long n), void *(*also)(void *))
{
	struct nsbt_budget budget, most;
	pthread_t f, a;
	unsigned long n;

	core_pin(0);
	NSBT_CHECK(pthread_create(&f, NULL, core_race_faulter, r) == 0, "pthread_create");
	if (also)
		NSBT_CHECK(pthread_create(&a, NULL, also, r) == 0, "pthread_create");
	budget = nsbt_budget_start(1);
	most = nsbt_budget_start(10);
	for (n = 0; (!nsbt_budget_spent(&budget) || atomic_load(&r->faults) < min_faults) &&
		    !nsbt_budget_spent(&most); n++) {
		call(r, n);
		if (n % 64 == 0)
			core_race_tick();
	}
	atomic_store(&r->stop, true);
	pthread_join(f, NULL);
	if (also)
		pthread_join(a, NULL);
	return n;
}

/* Runs fn(arg) in a watched child (no progress for 60 s, scaled: a hang),
 * its stderr quiet; death by SIGBUS is a fault not rescued.  Returns the
 * wait status (the caller checks the exit). */
static inline int
core_race_watched(void (*fn)(void *), void *arg, const char *what)
{
	char err[4096];
	int st = core_run_watched(fn, arg, nsbt_scaled(60), core_race_progress(), what, err,
				  sizeof(err));

	core_expect_quiet(err, what);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
		nsbt_fail("%s: killed by SIGBUS: a fault in the protected mapping was not rescued",
			  what);
	return st;
}

static inline void
core_require_library(void)
{
	if (!nsbt_have_library())
		nsbt_fail("libnosigbus is not in the process (the core tests link it)");
}

#endif /* CORE_H */
