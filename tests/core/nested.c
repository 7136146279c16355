/* SPDX-License-Identifier: MIT */
/*
 * Nested calls (src/ranges.c, src/process.c).  Where the program's only
 * handlers are for signals of its own faults (SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE, SIGTRAP, SIGSYS, SIGABRT: Rust's stack guard, crash reporters),
 * the library's table lock is held without blocking signals, and a handler
 * of those that another thread sends (pthread_kill) may interrupt the
 * holder and call the library from there.  Such a call must never wait for
 * the lock its own thread holds (a hang), and no record it made stale may
 * be trusted by a rescue.
 *
 * Modes (argv[1]):
 *   storm [SENDS [SECONDS]]  workers loop over calls on protected
 *       mappings; the main thread, on another CPU, sends them SIGSEGV as
 *       fast as it can.  The handler counts the deliveries that landed
 *       inside the library's own code (the interrupted instruction in
 *       libnosigbus's text), and makes calls: a read past the end of a
 *       mapping made before (a rescue), mmap of a memfd with
 *       MAP_NOSIGBUS, mprotect, mremap, munmap, a
 *       MAP_FIXED over a protected page, fork, sigaction, nosigbus_
 *       unprotect.  A parent's watchdog on the count of sends fails the
 *       test on a hang.  Then: enough deliveries landed in the library
 *       (else the run says it was too slow and skips); a protected mapping
 *       is still rescued; a disk file mapped where the handlers' nested
 *       calls unmapped protected pages is not (no stale record protects
 *       it); the library printed nothing.
 *   pairs N fault|async|none  installs handlers of that kind (fault:
 *       SIGSEGV and SIGBUS, as Rust's std does; async: SIGUSR1), then
 *       makes N mmap+munmap pairs of a one-page MAP_NOSIGBUS memfd, each
 *       after a getppid() marker: tests/cli/syscalls.bats counts the
 *       rt_sigprocmask calls of the last pair with strace.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "core.h"

#define WORKERS 2

static size_t ps;
static int zfd;			/* an empty memfd: every page past its end */
static int ffd;			/* a memfd of 4 pages */
#define PRE_PAGES 4096
static char *pre;		/* PRE_PAGES past the end of zfd */
static uintptr_t lib_lo, lib_hi;	/* the library's text */
static atomic_bool stop_workers;
static atomic_ulong in_library, handled, worker_loops;
static volatile unsigned long *progress;	/* sends, shared with the parent */
static char *volatile freed[WORKERS * 64];	/* pages nested munmaps freed */
static atomic_uint freed_n;

static int
find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	if (!strstr(info->dlpi_name, "libnosigbus"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			lib_lo = info->dlpi_addr + ph->p_vaddr;
			lib_hi = lib_lo + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

static uintptr_t
interrupted_pc(const ucontext_t *uc)
{
#if defined(__x86_64__)
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uintptr_t)uc->uc_mcontext.pc;
#else
	(void)uc;
	return 0;
#endif
}

static void
say(const char *msg)
{
	(void)!write(STDERR_FILENO, msg, strlen(msg));
}

static void on_segv(int sig, siginfo_t *si, void *ctx);

/* [signal handler] The calls a crash handler or a guard might make. */
static void
handler_calls(unsigned long n)
{
	char *p = mmap(NULL, 3 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, ffd, 0);
	char *q;

	if (p == MAP_FAILED) {
		say("FAIL: mmap in the SIGSEGV handler failed\n");
		_exit(3);
	}
	/* A rescue from the handler, of a mapping made before the storm (a
	 * mapping made from a handler nested in the library's call is not
	 * protected: ranges.c). */
	if (pre[(n % PRE_PAGES) * ps] != 0) {
		say("FAIL: a page rescued in the handler reads non-zero\n");
		_exit(3);
	}
	if (mprotect(p, 3 * ps, PROT_READ) != 0) {
		say("FAIL: mprotect in the SIGSEGV handler failed\n");
		_exit(3);
	}
	q = mremap(p, 3 * ps, 4 * ps, MREMAP_MAYMOVE);
	if (q == MAP_FAILED) {
		say("FAIL: mremap in the SIGSEGV handler failed\n");
		_exit(3);
	}
	/* Anonymous memory over a protected page, then part unprotected
	 * (EAGAIN where the handler interrupted the library's call). */
	if (mmap(q + ps, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != q + ps ||
	    (nosigbus_unprotect(q + 3 * ps, ps) != 0 && errno != EAGAIN)) {
		say("FAIL: MAP_FIXED or nosigbus_unprotect in the SIGSEGV handler failed\n");
		_exit(3);
	}
	q[ps] = 1;
	if (munmap(q, 4 * ps) != 0) {
		say("FAIL: munmap in the SIGSEGV handler failed\n");
		_exit(3);
	}
	/* Remembered: later, an unprotected file is mapped there. */
	if ((n & 15) == 0) {
		unsigned i = atomic_fetch_add(&freed_n, 1);

		if (i < sizeof(freed) / sizeof(freed[0]))
			freed[i] = q;
	}
	if ((n & 31) == 0) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		if (pid < 0 || waitpid(pid, NULL, 0) != pid) {
			say("FAIL: fork in the SIGSEGV handler failed\n");
			_exit(3);
		}
	}
	if ((n & 7) == 0) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_segv;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, NULL) != 0) {
			say("FAIL: sigaction in the SIGSEGV handler failed\n");
			_exit(3);
		}
	}
}

/* [signal handler] SIGSEGV: sent by the main thread, never a fault here. */
static void
on_segv(int sig, siginfo_t *si, void *ctx)
{
	int saved = errno;
	uintptr_t pc = interrupted_pc(ctx);
	unsigned long n = atomic_fetch_add(&handled, 1);

	(void)sig;
	if (si->si_code != SI_TKILL) {
		say("FAIL: a SIGSEGV that nobody sent\n");
		_exit(4);
	}
	if (pc >= lib_lo && pc < lib_hi)
		atomic_fetch_add(&in_library, 1);
	handler_calls(n);
	errno = saved;
}

/* Calls on protected mappings, which hold the table lock. */
static void *
worker(void *arg)
{
	int type = (intptr_t)arg & 1 ? MAP_SHARED : MAP_PRIVATE;

	core_pin(1 + (int)(intptr_t)arg);
	while (!atomic_load(&stop_workers)) {
		char *p = mmap(NULL, 3 * ps, CORE_PROT_RW, type | MAP_NOSIGBUS, zfd, 0), *q;

		if (p == MAP_FAILED)
			nsbt_fail("worker: mmap: %s", strerror(errno));
		if (p[ps] != 0)		/* a rescue */
			nsbt_fail("worker: a rescued page reads non-zero");
		if (mprotect(p + ps, ps, PROT_READ) != 0 || mprotect(p, 3 * ps, PROT_READ) != 0)
			nsbt_fail("worker: mprotect: %s", strerror(errno));
		q = mremap(p, 3 * ps, 4 * ps, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			nsbt_fail("worker: mremap: %s", strerror(errno));
		/* Fails (EINVAL: an unknown bit): the resync path.  (Not
		 * past the mapping: the next one up may be another's.) */
		if (mprotect(q, 4 * ps, PROT_READ | 0x40000000) == 0)
			nsbt_fail("worker: mprotect with an unknown bit succeeded");
		if (munmap(q + ps, ps) != 0 || munmap(q, 4 * ps) != 0)
			nsbt_fail("worker: munmap: %s", strerror(errno));
		atomic_fetch_add(&worker_loops, 1);
	}
	return NULL;
}

static void
install(void (*fn)(int, siginfo_t *, void *), int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = fn;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(sig, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
}

struct storm {
	unsigned long sends;
	int seconds;
};

static void
storm_child(void *arg)
{
	const struct storm *s = arg;
	struct nsbt_budget budget = nsbt_budget_start(s->seconds);
	pthread_t th[WORKERS];
	unsigned long sent = 0;
	char *p;

	dl_iterate_phdr(find_text, NULL);
	NSBT_CHECK(lib_lo != 0, "the library's text was not found");
	zfd = nsbt_file(NSBT_MEMFD, 0);
	ffd = nsbt_file(NSBT_MEMFD, 4 * ps);
	pre = core_map(NULL, PRE_PAGES * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, zfd, 0);
	/* A protected mapping first: the library's handler is installed,
	 * and the table lock is taken without the mask from then on. */
	p = core_map(NULL, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, zfd, 0);
	NSBT_CHECK(p[0] == 0, "a rescued page reads non-zero");
	install(on_segv, SIGSEGV);
	core_pin(0);
	for (intptr_t i = 0; i < WORKERS; i++)
		NSBT_CHECK(pthread_create(&th[i], NULL, worker, (void *)i) == 0, "pthread_create");
	while (atomic_load(&worker_loops) < 10)
		sched_yield();
	while (sent < s->sends) {
		for (int i = 0; i < WORKERS; i++)
			NSBT_CHECK(pthread_kill(th[i], SIGSEGV) == 0, "pthread_kill");
		sent += WORKERS;
		(*progress)++;
		/* Each send handled before the next: a handler's own calls
		 * are interrupted too, but not by a pile of them. */
		while (atomic_load(&handled) < sent)
			sched_yield();
		if ((sent & 255) == 0 && nsbt_budget_spent(&budget))
			break;
	}
	atomic_store(&stop_workers, true);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	printf("ok: %lu SIGSEGVs sent, %lu landed in the library's code, %lu worker loops\n",
	       sent, atomic_load(&in_library), atomic_load(&worker_loops));
	if (atomic_load(&in_library) < 20)
		nsbt_too_slow("SIGSEGVs that interrupted the library", atomic_load(&in_library), 20,
			      s->seconds);

	/* Still protected: a new mapping, and the first one. */
	NSBT_CHECK(p[0] == 0, "the first mapping's page reads non-zero");
	{
		char *r = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);

		NSBT_CHECK(r[ps] == 0, "a page rescued after the storm reads non-zero");
		NSBT_CHECK(munmap(r, 2 * ps) == 0, "munmap: %s", strerror(errno));
	}
	/* Where the handlers' nested calls unmapped protected pages, a new
	 * unprotected file is not rescued: no record outlived them. */
	for (unsigned i = 0; i < atomic_load(&freed_n) && i < sizeof(freed) / sizeof(freed[0]); i += 7) {
		if (core_page_mapped(freed[i]))
			continue;	/* something else is there now */
		core_expect_unprotected(freed[i], "a page a nested munmap freed");
	}
	printf("ok: after the storm, protection is where it belongs\n");
}

static void
storm(int argc, char **argv)
{
	struct storm s = {
		.sends = argc > 2 ? strtoul(argv[2], NULL, 0) : 20000,
		.seconds = argc > 3 ? atoi(argv[3]) : 60,
	};
	char err[4096];
	int status;

	progress = core_progress();
	status = core_run_watched(storm_child, &s, nsbt_scaled(30), progress,
				  "a handler's call that interrupted the library's own waits for it",
				  err, sizeof(err));
	core_expect_quiet(err, "nested calls");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		exit(77);
	nsbt_expect_exit(status, 0, "nested calls");
	printf("ok: no hang, no stale protection\n");
}

static void
quiet_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	(void)ctx;
}

static void
pairs(int argc, char **argv)
{
	unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 0) : 4;
	const char *kind = argc > 3 ? argv[3] : "fault";
	int fd = nsbt_file(NSBT_MEMFD, ps);

	/* The library's handler first (a protected mapping), as in a
	 * program that maps a client's pool. */
	NSBT_CHECK(munmap(core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0), ps) == 0,
		   "munmap");
	if (strcmp(kind, "fault") == 0) {
		install(quiet_handler, SIGSEGV);
		install(quiet_handler, SIGBUS);
	} else if (strcmp(kind, "async") == 0) {
		install(quiet_handler, SIGUSR1);
	} else if (strcmp(kind, "none") != 0) {
		nsbt_fail("pairs: kind %s: fault, async or none", kind);
	}
	for (unsigned long i = 0; i < n; i++) {
		char *p;

		(void)syscall(SYS_getppid);	/* the marker */
		p = mmap(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
		NSBT_CHECK(munmap(p, ps) == 0, "munmap: %s", strerror(errno));
	}
	(void)syscall(SYS_getppid);
	printf("ok: %lu pairs with %s handlers\n", n, kind);
}

int
main(int argc, char **argv)
{
	core_require_library();
	ps = nsbt_page();
	if (argc > 1 && strcmp(argv[1], "storm") == 0)
		storm(argc, argv);
	else if (argc > 1 && strcmp(argv[1], "pairs") == 0)
		pairs(argc, argv);
	else
		nsbt_fail("usage: core-nested storm [SENDS [SECONDS]] | pairs N fault|async|none");
	return 0;
}
