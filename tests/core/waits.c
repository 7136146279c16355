/* SPDX-License-Identifier: MIT */
/*
 * The ways into the waits that glibc offers past the names the library
 * interposes (SPEC §6: a mask of the wait's own never really blocks
 * SIGBUS; an ignored SIGBUS interrupts nothing).
 *
 * This program is built with -D_FORTIFY_SOURCE=2 -O2 (Debian's default
 * flags), so that glibc's headers turn its poll() and ppoll() calls,
 * whose buffer size the compiler knows and whose nfds it does not, into
 * __poll_chk() and __ppoll_chk() (gcc does; where the compiler did not,
 * the fortify tests skip).  It is not linked with the library: each body
 * runs in a child that execs it again, once without the library (the
 * reference, which shows that the body tests something) and once with it
 * preloaded, each under a watchdog with its stderr captured.
 *
 *   fortify-ppoll-mask	   a ppoll mask holding SIGBUS: a handler run
 *			   during the wait is rescued (the reference dies)
 *   fortify-poll-ignored,  an ignored SIGBUS sent during the wait ends
 *   fortify-ppoll-ignored  nothing
 *   fortify-chk	   nfds past the buffer still ends in glibc's check
 *   aliases		   __poll_chk and __ppoll_chk by name, and glibc's
 *			   aliases __poll, __select, __nanosleep, __sigsuspend
 *   ignored		   the same in the interposed polls, selects and
 *			   epoll waits themselves
 *   sigpause		   the sigpause family (glibc's calls its own
 *			   sigsuspend): an ignored SIGBUS, a held one, and
 *			   SIGBUS in the mask of the BSD one
 *   thrd-sleep		   C11's thrd_sleep (glibc's own clock_nanosleep)
 * Each wait that succeeds must leave errno as it was.
 *
 *   core-waits TEST	run one meson test (the table at the bottom)
 *   core-waits run BODY ref|lib   a body, in the child
 *
 * A body checks what it can itself and prints what it saw; the driver
 * checks how each child ended.  Signals are sent by a thread of the body
 * once the main thread sleeps in the wait (/proc/self/task/TID/syscall).
 */
#include <elf.h>
#include <link.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <threads.h>

#include "core.h"

#if !defined(__USE_FORTIFY_LEVEL) || __USE_FORTIFY_LEVEL < 2
#error "core-waits must be built with -D_FORTIFY_SOURCE=2 and optimisation"
#endif

/* Exported by glibc, not declared by its headers: aliases of the waits. */
extern int __poll(struct pollfd *fds, nfds_t n, int timeout);
extern int __select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv);
extern int __nanosleep(const struct timespec *req, struct timespec *rem);
extern int __sigsuspend(const sigset_t *mask);
/* Declared for compilers other than GNU C: the sigpause of both kinds. */
extern int __sigpause(int sig_or_mask, int is_sig);

static size_t ps;
static bool lib;		/* this body runs with the library preloaded */
static nfds_t nfds_two;		/* 2, from argc: not a constant, so fortified */

/* ---- in the body ----------------------------------------------------- */

/*
 * A protected mapping (NOSIGBUS_POLICY=shm: a shared memfd), so that the
 * library's handler is installed; pages past `size` bytes fault.  In lib
 * mode, checks that the library recorded it.
 */
static volatile char *
protected_pool(size_t pages, size_t size)
{
	int fd = nsbt_file(NSBT_MEMFD, pages * ps);
	char *p = core_map(NULL, pages * ps, PROT_READ, MAP_SHARED, fd, 0);

	core_truncate(fd, (off_t)size);
	close(fd);
	if (lib) {
		int (*stats)(struct nosigbus_stats *, size_t) =
			(int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT,
									  "nosigbus_get_stats");
		struct nosigbus_stats st;

		memset(&st, 0, sizeof(st));
		NSBT_CHECK(stats && stats(&st, sizeof(st)) == 0 && st.mappings >= 1,
			   "the library is preloaded and protects the pool");
	} else {
		NSBT_CHECK(!nsbt_have_library(), "the reference runs without the library");
	}
	return p;
}

/* The system call the thread sleeps in, or -1 when it runs (or cannot be read). */
static long
asleep_in(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] != 'S')
		return -1;
	return nsbt_task_syscall(getpid(), tid);
}

/* Every system call glibc may wait in for the calls tested here. */
static bool
is_wait_call(long nr)
{
	static const long calls[] = {
#ifdef SYS_poll
		SYS_poll,
#endif
#ifdef SYS_select
		SYS_select,
#endif
#ifdef SYS_nanosleep
		SYS_nanosleep,
#endif
#ifdef SYS_epoll_wait
		SYS_epoll_wait,
#endif
#ifdef SYS_epoll_pwait2
		SYS_epoll_pwait2,
#endif
		SYS_ppoll, SYS_pselect6, SYS_clock_nanosleep, SYS_rt_sigsuspend, SYS_epoll_pwait,
	};

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (calls[i] == nr)
			return true;
	return false;
}

/*
 * The sender: once the main thread sleeps in a wait, SIGBUS to it
 * (ignored: it must interrupt nothing), then, with `then_usr1`, SIGUSR1
 * 100 ms later (for waits that only a handler ends).  Gives up when the
 * wait ended first (a loaded machine): `sent` says whether it sent.
 */
struct sender {
	pthread_t target;
	pid_t tid;
	bool then_usr1;
	atomic_bool done;
	atomic_bool sent;
};

static void *
sender_fn(void *arg)
{
	struct sender *s = arg;

	while (!atomic_load(&s->done)) {
		if (is_wait_call(asleep_in(s->tid))) {
			pthread_kill(s->target, SIGBUS);
			atomic_store(&s->sent, true);
			if (s->then_usr1) {
				struct timespec t = { 0, 100 * 1000 * 1000 };

				nanosleep(&t, NULL);
				pthread_kill(s->target, SIGUSR1);
			}
			return NULL;
		}
		sched_yield();
	}
	return NULL;
}

static volatile sig_atomic_t usr1_calls;

static void
on_usr1_count(int sig)
{
	(void)sig;
	usr1_calls++;
}

enum wait_call {
	W_POLL, W_PPOLL, W___POLL_CHK, W___PPOLL_CHK, W___POLL, W___SELECT, W___NANOSLEEP,
	W___SIGSUSPEND, W_PLAIN_POLL, W_PLAIN_PPOLL, W_SELECT, W_PSELECT, W_EPOLL_WAIT,
	W_EPOLL_PWAIT, W_EPOLL_PWAIT2, W_SIGPAUSE, W_BSD_SIGPAUSE, W___SIGPAUSE, W_THRD_SLEEP,
};

static const char *const wait_names[] = {
	"poll (fortified: __poll_chk)", "ppoll (fortified: __ppoll_chk)", "__poll_chk by name",
	"__ppoll_chk by name", "__poll", "__select", "__nanosleep", "__sigsuspend",
	"poll (not fortified)", "ppoll (not fortified)", "select", "pselect", "epoll_wait",
	"epoll_pwait", "epoll_pwait2", "sigpause (X/Open: __xpg_sigpause)",
	"sigpause (BSD, by name)", "__sigpause", "thrd_sleep",
};

/* Waits that only a handler ends: the sender follows SIGBUS with SIGUSR1. */
static bool
ends_by_handler(enum wait_call how)
{
	return how == W___SIGSUSPEND || how == W_SIGPAUSE || how == W_BSD_SIGPAUSE ||
	       how == W___SIGPAUSE;
}

static int epfd = -1;	/* an epoll instance with nothing in it */

/*
 * __poll_chk and __ppoll_chk called by name, whatever the compiler does
 * with poll() (clang 14 calls plain poll): looked up as the loader binds
 * them (the preloaded library first), not imported, so that the fortify
 * tests can tell from this program's imports whether poll() was turned
 * into them.
 */
static struct {
	int (*bsd_sigpause)(int);	/* <signal.h> names __xpg_sigpause sigpause */
	int (*poll_chk)(struct pollfd *, nfds_t, int, size_t);
	int (*ppoll_chk)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *,
			 size_t);
} by_name;

/* One wait of 500 ms (sigsuspend: until SIGUSR1); -1 with errno on failure. */
static int
wait_once(enum wait_call how)
{
	struct pollfd fds[2] = { { .fd = -1 }, { .fd = -1 } };
	struct timespec ts = { 0, 500 * 1000 * 1000 }, rem = { 0, 0 };
	struct timeval tv = { 0, 500 * 1000 };
	sigset_t none;

	sigemptyset(&none);
	switch (how) {
	case W_POLL:
		return poll(fds, nfds_two, 500);
	case W_PPOLL:
		return ppoll(fds, nfds_two, &ts, &none);
	case W___POLL_CHK:
		return by_name.poll_chk(fds, nfds_two, 500, sizeof(fds));
	case W___PPOLL_CHK:
		return by_name.ppoll_chk(fds, nfds_two, &ts, &none, sizeof(fds));
	case W___POLL:
		return __poll(fds, nfds_two, 500);
	case W___SELECT:
		return __select(0, NULL, NULL, NULL, &tv);
	case W___NANOSLEEP:
		return __nanosleep(&ts, &rem);
	case W___SIGSUSPEND:
		return __sigsuspend(&none);
	case W_PLAIN_POLL:	/* the size of NULL is not known: plain poll */
		return poll(NULL, 0, 500);
	case W_PLAIN_PPOLL:
		return ppoll(NULL, 0, &ts, &none);
	case W_SELECT:
		return select(0, NULL, NULL, NULL, &tv);
	case W_PSELECT:
		return pselect(0, NULL, NULL, NULL, &ts, &none);
	case W_EPOLL_WAIT:
		return epoll_wait(epfd, (struct epoll_event[1]){ 0 }, 1, 500);
	case W_EPOLL_PWAIT:
		return epoll_pwait(epfd, (struct epoll_event[1]){ 0 }, 1, 500, &none);
	case W_EPOLL_PWAIT2:
		return epoll_pwait2(epfd, (struct epoll_event[1]){ 0 }, 1, &ts, &none);
	case W_SIGPAUSE:
		return sigpause(SIGUSR2);
	case W_BSD_SIGPAUSE:
		return by_name.bsd_sigpause(0);
	case W___SIGPAUSE:
		return __sigpause(SIGUSR2, 1);
	case W_THRD_SLEEP:
		return thrd_sleep(&ts, &rem) == 0 ? 0 : -1;
	}
	return -2;
}

/*
 * SIGBUS ignored, the library's handler installed: a SIGBUS sent while
 * the main thread waits must not end the wait (with the library's
 * handler underneath the kernel would end it with EINTR, which the
 * library retries), and a wait that succeeds leaves errno as it was.
 * Retried when the wait ended before the sender saw it asleep; skipped as
 * too slow if that keeps happening.
 */
static void
ignored_round(enum wait_call how)
{
	const char *name = wait_names[how];

	for (int attempt = 0; attempt < 5; attempt++) {
		struct sender s = { .target = pthread_self(), .tid = gettid(),
				    .then_usr1 = ends_by_handler(how) };
		pthread_t t;
		int r, e, calls;

		usr1_calls = 0;
		NSBT_CHECK(pthread_create(&t, NULL, sender_fn, &s) == 0, "pthread_create");
		errno = ENOTUNIQ;	/* what nothing here sets */
		r = wait_once(how);
		e = errno;
		calls = usr1_calls;	/* before the join, where SIGUSR1 may come later */
		atomic_store(&s.done, true);
		pthread_join(t, NULL);
		if (!atomic_load(&s.sent))
			continue;
		if (ends_by_handler(how)) {
			if (r != -1 || e != EINTR || calls != 1)
				nsbt_fail("%s: returned %d (%s) with %d SIGUSR1 handled: an ignored "
					  "SIGBUS ended it", name, r, strerrorname_np(e) ?: "0", calls);
		} else if (r != 0) {
			nsbt_fail("%s: returned %d (%s), expected 0 (the time ran out): an ignored "
				  "SIGBUS interrupted it", name, r, strerrorname_np(e) ?: "0");
		} else if (e != ENOTUNIQ) {
			nsbt_fail("%s: returned 0 with errno %s, expected it unchanged (ENOTUNIQ)",
				  name, strerrorname_np(e) ?: "0");
		}
		printf("ok: %s: an ignored SIGBUS sent during the wait interrupted nothing\n", name);
		return;
	}
	nsbt_too_slow(name, 0, 1, 5);
}

static void
usr1_counts(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1_count;
	sigaction(SIGUSR1, &sa, NULL);
}

static void
body_poll_ignored(void)
{
	protected_pool(1, ps);
	signal(SIGBUS, SIG_IGN);
	ignored_round(W_POLL);
}

static void
body_ppoll_ignored(void)
{
	protected_pool(1, ps);
	signal(SIGBUS, SIG_IGN);
	ignored_round(W_PPOLL);
}

static void
body_aliases(void)
{
	protected_pool(1, ps);
	by_name.poll_chk = (int (*)(struct pollfd *, nfds_t, int, size_t))dlsym(RTLD_DEFAULT,
										  "__poll_chk");
	by_name.ppoll_chk = (int (*)(struct pollfd *, nfds_t, const struct timespec *,
				     const sigset_t *, size_t))dlsym(RTLD_DEFAULT, "__ppoll_chk");
	NSBT_CHECK(by_name.poll_chk && by_name.ppoll_chk, "glibc has __poll_chk and __ppoll_chk");
	signal(SIGBUS, SIG_IGN);
	usr1_counts();
	ignored_round(W___POLL_CHK);
	ignored_round(W___PPOLL_CHK);
	ignored_round(W___POLL);
	ignored_round(W___SELECT);
	ignored_round(W___NANOSLEEP);
	ignored_round(W___SIGSUSPEND);
}

static void
body_sigpause_ignored(void)
{
	protected_pool(1, ps);
	by_name.bsd_sigpause = (int (*)(int))dlsym(RTLD_DEFAULT, "sigpause");
	NSBT_CHECK(by_name.bsd_sigpause, "the C library has sigpause");
	signal(SIGBUS, SIG_IGN);
	usr1_counts();
	ignored_round(W_SIGPAUSE);
	ignored_round(W_BSD_SIGPAUSE);
	ignored_round(W___SIGPAUSE);
}

static volatile sig_atomic_t bus_calls;

static void
on_bus_count(int sig)
{
	(void)sig;
	bus_calls++;
}

/* A 5 s alarm ends a wait that never ends, with a line that says why. */
static void
on_alarm_stuck(int sig)
{
	static const char msg[] = "FAIL: still waiting after 5 s: the SIGBUS sent was not "
				  "delivered\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

/*
 * SIGBUS blocked and sent (the library holds it): sigpause with a mask
 * that lets it in must get it, as the kernel would deliver a pending one.
 */
static void
body_sigpause_held(void)
{
	int (*bsd_sigpause)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "sigpause");
	static const char *const hows[] = { "sigpause(SIGBUS) (X/Open)", "__sigpause(SIGBUS, 1)",
					    "sigpause(0) (BSD, by name)" };
	struct sigaction sa;
	sigset_t bus;

	protected_pool(1, ps);
	NSBT_CHECK(bsd_sigpause, "the C library has sigpause");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_bus_count;
	sigaction(SIGBUS, &sa, NULL);
	sa.sa_handler = on_alarm_stuck;
	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	for (int i = 0; i < 3; i++) {
		sigset_t after;
		int r, e;

		bus_calls = 0;
		sigprocmask(SIG_BLOCK, &bus, NULL);
		kill(getpid(), SIGBUS);
		NSBT_CHECK(bus_calls == 0, "a blocked SIGBUS was handled at once");
		alarm(5);
		errno = 0;
		r = i == 0 ? sigpause(SIGBUS) : i == 1 ? __sigpause(SIGBUS, 1) : bsd_sigpause(0);
		e = errno;
		alarm(0);
		NSBT_CHECK(r == -1 && e == EINTR && bus_calls == 1,
			   "%s returned %d (%s) with %d SIGBUS handled, expected -1/EINTR after one",
			   hows[i], r, strerrorname_np(e) ?: "0", (int)bus_calls);
		sigprocmask(SIG_SETMASK, NULL, &after);
		NSBT_CHECK(sigismember(&after, SIGBUS), "%s: SIGBUS blocked again after it", hows[i]);
		sigprocmask(SIG_UNBLOCK, &bus, NULL);
		printf("ok: %s delivered the SIGBUS held for it\n", hows[i]);
	}
}

static void
body_thrd_sleep(void)
{
	protected_pool(1, ps);
	signal(SIGBUS, SIG_IGN);
	ignored_round(W_THRD_SLEEP);
}

/* The interposed waits by their own names. */
static void
body_ignored(void)
{
	protected_pool(1, ps);
	signal(SIGBUS, SIG_IGN);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	NSBT_CHECK(epfd >= 0, "epoll_create1: %s", strerror(errno));
	for (enum wait_call w = W_PLAIN_POLL; w <= W_EPOLL_PWAIT; w++)
		ignored_round(w);
	if (epoll_pwait2(epfd, (struct epoll_event[1]){ 0 }, 1, &(struct timespec){ 0, 0 },
			 NULL) < 0 && errno == ENOSYS)
		printf("ok: no epoll_pwait2 in this kernel, not tried\n");
	else
		ignored_round(W_EPOLL_PWAIT2);
}

static volatile char *usr1_pool;
static volatile sig_atomic_t usr1_bus_blocked = -1, usr1_byte = -1;

/* [signal context] Reads the page past EOF, then asks the mask (the read
 * first: the query must not change what the kernel blocks before it). */
static void
on_usr1_read(int sig)
{
	static const char msg[] = "in the SIGUSR1 handler: reading the page past EOF\n";
	sigset_t m;

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(4);
	usr1_byte = usr1_pool[ps];
	sigprocmask(SIG_SETMASK, NULL, &m);
	usr1_bus_blocked = sigismember(&m, SIGBUS);
}

/*
 * The reviewer's case: ppoll with every signal but SIGUSR1 blocked (or
 * the BSD sigpause with SIGBUS's bit), a SIGUSR1 pending, whose handler
 * reads a protected page past EOF.  The kernel must not really block
 * SIGBUS meanwhile (it would kill the process); the handler sees it
 * blocked.  The reference dies of SIGBUS.
 */
static void
mask_wait(bool bsd_sigpause)
{
	const char *how = bsd_sigpause ? "sigpause (BSD, by name)" : "ppoll (fortified)";
	int (*bsd)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "sigpause");
	struct pollfd fds[2] = { { .fd = -1 }, { .fd = -1 } };
	struct timespec ts = { 5, 0 };
	struct sigaction sa;
	sigset_t usr1, mask, after;
	int r, e;

	NSBT_CHECK(bsd, "the C library has sigpause");
	usr1_pool = protected_pool(2, ps);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1_read;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	kill(getpid(), SIGUSR1);
	sigfillset(&mask);
	sigdelset(&mask, SIGUSR1);
	fflush(NULL);
	errno = 0;
	if (bsd_sigpause)
		r = bsd((int)(1u << (SIGBUS - 1)));
	else
		r = ppoll(fds, nfds_two, &ts, &mask);
	e = errno;
	NSBT_CHECK(r == -1 && e == EINTR, "%s returned %d (%s), expected -1/EINTR", how, r,
		   strerrorname_np(e) ?: "0");
	NSBT_CHECK(usr1_byte == 0, "the handler read %d past EOF, expected 0", (int)usr1_byte);
	NSBT_CHECK(usr1_bus_blocked == 1, "in the handler SIGBUS reads back as %s, expected blocked "
		   "(the wait's mask)", usr1_bus_blocked == 0 ? "unblocked" : "unknown");
	sigprocmask(SIG_SETMASK, NULL, &after);
	NSBT_CHECK(!sigismember(&after, SIGBUS) && sigismember(&after, SIGUSR1),
		   "after %s the mask is the program's again", how);
	printf("ok: %s with SIGBUS in its mask: a handler run during it was rescued past EOF "
	       "and saw SIGBUS blocked\n", how);
}

static void
body_ppoll_mask(void)
{
	mask_wait(false);
}

static void
body_sigpause_mask(void)
{
	mask_wait(true);
}

/* nfds one more than the buffer holds: glibc's check ends the process. */
static void
body_chk_fail_poll(void)
{
	struct pollfd fds[2] = { { .fd = -1 }, { .fd = -1 } };

	protected_pool(1, ps);
	fflush(NULL);
	poll(fds, nfds_two + 1, 0);
	printf("poll with nfds past the buffer returned\n");
}

static void
body_chk_fail_ppoll(void)
{
	struct pollfd fds[2] = { { .fd = -1 }, { .fd = -1 } };
	struct timespec ts = { 0, 0 };

	protected_pool(1, ps);
	fflush(NULL);
	ppoll(fds, nfds_two + 1, &ts, NULL);
	printf("ppoll with nfds past the buffer returned\n");
}

/* nfds exactly what the buffer holds: no check fails. */
static void
body_chk_pass(void)
{
	struct pollfd fds[2] = { { .fd = -1 }, { .fd = -1 } };
	struct timespec ts = { 0, 0 };

	protected_pool(1, ps);
	NSBT_CHECK(poll(fds, nfds_two, 0) == 0, "poll: %s", strerror(errno));
	NSBT_CHECK(ppoll(fds, nfds_two, &ts, NULL) == 0, "ppoll: %s", strerror(errno));
	printf("ok: poll and ppoll (fortified) with nfds the size of the buffer\n");
}

static const struct body {
	const char *name;
	void (*fn)(void);
} bodies[] = {
	{ "ppoll-mask", body_ppoll_mask },
	{ "poll-ignored", body_poll_ignored },
	{ "ppoll-ignored", body_ppoll_ignored },
	{ "aliases", body_aliases },
	{ "ignored", body_ignored },
	{ "sigpause-ignored", body_sigpause_ignored },
	{ "sigpause-held", body_sigpause_held },
	{ "sigpause-mask", body_sigpause_mask },
	{ "thrd-sleep", body_thrd_sleep },
	{ "chk-fail-poll", body_chk_fail_poll },
	{ "chk-fail-ppoll", body_chk_fail_ppoll },
	{ "chk-pass", body_chk_pass },
};

static int
run_body(const char *name, const char *mode)
{
	lib = strcmp(mode, "lib") == 0;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
		if (strcmp(bodies[i].name, name) == 0) {
			core_no_core();
			bodies[i].fn();
			fflush(NULL);
			return 0;
		}
	nsbt_fail("no body %s", name);
}

/* ---- the driver ------------------------------------------------------ */

/* How a child must end: exit 0, or death by a signal with a line on stderr. */
struct outcome {
	int sig;		/* 0: exit 0 */
	const char *stderr_has;
};

#define EXIT0 { 0, NULL }
#define DIES(s, line) { s, line }
#define ABORTS DIES(SIGABRT, "*** buffer overflow detected ***")

struct child {
	const char *body;
	bool lib;
};

static void
exec_body(void *arg)
{
	const struct child *c = arg;
	char *argv[] = { (char *)"core-waits", (char *)"run", (char *)c->body,
			 (char *)(c->lib ? "lib" : "ref"), NULL };

	unsetenv("LD_PRELOAD");
	if (c->lib) {
		setenv("LD_PRELOAD", getenv("NSB_PRELOAD"), 1);
		setenv("NOSIGBUS_POLICY", "shm", 1);
	}
	execv("/proc/self/exe", argv);
	fprintf(stderr, "execv /proc/self/exe: %s\n", strerror(errno));
	_exit(127);
}

static void
expect(const char *body, bool with_lib, struct outcome want)
{
	struct child c = { body, with_lib };
	char what[128], err[8192];
	int status;

	snprintf(what, sizeof(what), "%s, %s", body,
		 with_lib ? "with the library" : "without it (the reference)");
	status = core_run_watched(exec_body, &c, nsbt_scaled(30), NULL, what, err, sizeof(err));
	core_expect_quiet(err, what);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("%s: skipped (above)", what);
	if (!want.sig) {
		nsbt_expect_exit(status, 0, what);
		return;
	}
	nsbt_expect_signal(status, want.sig, what);
	if (want.stderr_has && !strstr(err, want.stderr_has))
		nsbt_fail("%s: expected \"%s\" on its stderr", what, want.stderr_has);
}

/* The test: bodies, each with how the reference and the library's run end. */
static const struct test {
	const char *name;
	const char *body;
	struct outcome ref, lib;
} tests[] = {
	{ "fortify-ppoll-mask", "ppoll-mask", DIES(SIGBUS, NULL), EXIT0 },
	{ "fortify-poll-ignored", "poll-ignored", EXIT0, EXIT0 },
	{ "fortify-ppoll-ignored", "ppoll-ignored", EXIT0, EXIT0 },
	{ "fortify-chk", "chk-pass", EXIT0, EXIT0 },
	{ "fortify-chk", "chk-fail-poll", ABORTS, ABORTS },
	{ "fortify-chk", "chk-fail-ppoll", ABORTS, ABORTS },
	{ "aliases", "aliases", EXIT0, EXIT0 },
	{ "ignored", "ignored", EXIT0, EXIT0 },
	{ "sigpause", "sigpause-ignored", EXIT0, EXIT0 },
	{ "sigpause", "sigpause-held", EXIT0, EXIT0 },
	{ "sigpause", "sigpause-mask", DIES(SIGBUS, NULL), EXIT0 },
	{ "thrd-sleep", "thrd-sleep", EXIT0, EXIT0 },
};

/* Does this program import `name` (an undefined symbol of its .dynsym)? */
static bool
imports(const char *name)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	const ElfW(Ehdr) *eh;
	const ElfW(Shdr) *sh;
	bool found = false;
	struct stat st;
	char *img;

	NSBT_CHECK(fd >= 0 && fstat(fd, &st) == 0, "open /proc/self/exe: %s", strerror(errno));
	img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	NSBT_CHECK(img != MAP_FAILED, "mmap /proc/self/exe: %s", strerror(errno));
	close(fd);
	eh = (const ElfW(Ehdr) *)img;
	sh = (const ElfW(Shdr) *)(img + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum && !found; i++) {
		const ElfW(Sym) *sym = (const ElfW(Sym) *)(img + sh[i].sh_offset);
		const char *str = img + sh[sh[i].sh_link].sh_offset;

		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym) && !found; k++)
			found = sym[k].st_shndx == SHN_UNDEF && strcmp(str + sym[k].st_name, name) == 0;
	}
	munmap(img, (size_t)st.st_size);
	return found;
}

/*
 * The compiler turned this program's poll() and ppoll() into __poll_chk()
 * and __ppoll_chk() (gcc does; clang 14 with glibc 2.36 does not, and
 * then the "aliases" test calls both by name), or the fortify tests test
 * nothing: they skip.
 */
static void
expect_fortified(void)
{
	if (!imports("__poll_chk") || !imports("__ppoll_chk"))
		nsbt_skip("this compiler did not turn poll() and ppoll() into __poll_chk() and "
			  "__ppoll_chk() under -D_FORTIFY_SOURCE=2 -O2 (clang does not): nothing to "
			  "test here (core-waits-aliases calls them by name)");
	printf("ok: built fortified: poll() and ppoll() call __poll_chk and __ppoll_chk\n");
}

int
main(int argc, char **argv)
{
	bool found = false;

	ps = nsbt_page();
	nfds_two = (nfds_t)(argc > 2 ? 2 : argc);
	if (argc == 4 && strcmp(argv[1], "run") == 0)
		return run_body(argv[2], argv[3]);
	if (argc != 2)
		nsbt_fail("usage: core-waits TEST");
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	if (strncmp(argv[1], "fortify-", 8) == 0)
		expect_fortified();
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (strcmp(tests[i].name, argv[1]) != 0)
			continue;
		found = true;
		expect(tests[i].body, false, tests[i].ref);
		expect(tests[i].body, true, tests[i].lib);
	}
	if (!found)
		nsbt_fail("no test %s", argv[1]);
	return 0;
}
