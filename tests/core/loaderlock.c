/* SPDX-License-Identifier: MIT */
/*
 * A thread stopped while it holds the dynamic loader's lock (SPEC §5
 * "Progress"): garbage collectors stop threads wherever they are, inside
 * dlopen() or dlsym() too, and then map, unmap and change memory in the
 * thread that collects.  Without the library those calls never wait for
 * the loader.  If the library looked a real function up with dlsym() at
 * that moment (its first use of mprotect, say), the collector would wait
 * for the loader's lock, held by a thread that waits for the collector.
 *
 * Here one thread loads a library whose constructor stops until released
 * (dlopen() holds the lock meanwhile: loader-ctor.c), and this thread,
 * which has used none of them before, makes every interposed call a
 * collector may make, with a rescue among them; then it releases the
 * other thread.  The parent's watchdog follows the step reached, in
 * shared memory: a step that does not return within 20 s is a hang, and
 * the failure names it.
 *
 * Built twice: linked with the library (as preloaded), and without it
 * (-DNSBT_DLOPEN), for a program that loads libnosigbus with dlopen()
 * once it runs threads, then protects a mapping with nosigbus_protect()
 * and has a page rescued while the other thread is stopped.
 *
 *   core-loaderlock LOADER_CTOR_SO           (linked)
 *   core-loaderlock-dlopen LOADER_CTOR_SO    (loads $NSB_PRELOAD)
 */
#include <dlfcn.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "core.h"

static const char *ctor_so;
static volatile unsigned long *step;	/* shared with the parent */
static int in_ctor[2], go_on[2];

static void *
loader(void *arg)
{
	void *h;

	(void)arg;
	h = dlopen(ctor_so, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "FAIL: dlopen(%s): %s\n", ctor_so, dlerror());
		_exit(4);
	}
	return h;
}

#ifdef NSBT_DLOPEN
static const char *const steps[] = {
	"start", "protect", "rescue", "unprotect", "done",
};
#else
static const char *const steps[] = {
	"start", "mmap", "rescue", "mprotect", "mremap", "munmap", "sigaction",
	"sigprocmask", "pthread_sigmask", "sigpending", "signal", "nanosleep",
	"clock_nanosleep", "poll", "ppoll", "select", "pselect", "epoll_wait", "dup2", "dup3",
	"close", "done",
};
#endif

static void
next(const char *name)
{
	(*step)++;
	if (strcmp(steps[*step], name) != 0)
		nsbt_fail("step %lu is %s, not %s", *step, steps[*step], name);
}

/* Starts the thread that stops inside dlopen(), and waits until it has. */
static void
stop_a_thread_in_dlopen(pthread_t *th)
{
	char fds[32], byte;

	if (pipe(in_ctor) || pipe(go_on))
		nsbt_fail("pipe: %s", strerror(errno));
	snprintf(fds, sizeof(fds), "%d,%d", in_ctor[1], go_on[0]);
	setenv("NSBT_CTOR_FDS", fds, 1);
	if (pthread_create(th, NULL, loader, NULL) != 0)
		nsbt_fail("pthread_create");
	if (read(in_ctor[0], &byte, 1) != 1)
		nsbt_fail("the loader thread never reached the constructor");
}

static void
release(pthread_t th)
{
	char byte = 0;
	void *h;

	if (write(go_on[1], &byte, 1) != 1 || pthread_join(th, &h) != 0 || !h)
		nsbt_fail("could not release the loader thread");
}

#ifdef NSBT_DLOPEN
static void *
idle(void *arg)
{
	char byte;

	return read(*(int *)arg, &byte, 1) == 1 ? arg : NULL;
}

static void
collector(void *arg)
{
	int (*protect)(void *, size_t), (*unprotect)(void *, size_t);
	const char *lib = getenv("NSB_PRELOAD");
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 0), quit[2];
	pthread_t other, th;
	unsigned char *p;
	void *h;

	(void)arg;
	if (!lib || pipe(quit))
		nsbt_fail("NSB_PRELOAD is not set, or pipe: %s", strerror(errno));
	/* The library arrives in a process that already runs threads. */
	if (pthread_create(&other, NULL, idle, &quit[0]) != 0)
		nsbt_fail("pthread_create");
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		nsbt_fail("dlopen(%s): %s", lib, dlerror());
	*(void **)&protect = dlsym(h, "nosigbus_protect");
	*(void **)&unprotect = dlsym(h, "nosigbus_unprotect");
	if (!protect || !unprotect)
		nsbt_fail("dlsym: %s", dlerror());
	p = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		nsbt_fail("mmap: %s", strerror(errno));
	stop_a_thread_in_dlopen(&th);
	next("protect");
	if (protect(p, 2 * ps) != 0)
		nsbt_fail("nosigbus_protect: %s", strerror(errno));
	next("rescue");
	if (p[ps] != 0)
		nsbt_fail("a rescued page reads non-zero");
	next("unprotect");
	if (unprotect(p, 2 * ps) != 0)
		nsbt_fail("nosigbus_unprotect: %s", strerror(errno));
	next("done");
	release(th);
	if (write(quit[1], "", 1) != 1 || pthread_join(other, NULL) != 0)
		nsbt_fail("could not end the idle thread");
}
#else
static void
collector(void *arg)
{
	struct timespec zero = { 0, 0 };
	struct timeval tv = { 0, 0 };
	struct sigaction sa;
	struct epoll_event ev;
	sigset_t set;
	pthread_t th;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 0), ep, d;
	unsigned char *p, *q;

	(void)arg;
	if ((ep = epoll_create1(0)) < 0)
		nsbt_fail("epoll_create1: %s", strerror(errno));
	stop_a_thread_in_dlopen(&th);
	/* The other thread now holds the loader's lock, stopped. */
	next("mmap");
	p = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	if (p == MAP_FAILED)
		nsbt_fail("mmap: %s", strerror(errno));
	next("rescue");
	if (p[ps] != 0)
		nsbt_fail("a rescued page reads non-zero");
	next("mprotect");
	if (mprotect(p, 2 * ps, PROT_READ) != 0)
		nsbt_fail("mprotect: %s", strerror(errno));
	next("mremap");
	q = mremap(p, 2 * ps, ps, 0);
	if (q != p)
		nsbt_fail("mremap: %s", strerror(errno));
	next("munmap");
	if (munmap(p, ps) != 0)
		nsbt_fail("munmap: %s", strerror(errno));
	next("sigaction");
	sigaction(SIGUSR2, NULL, &sa);
	next("sigprocmask");
	sigprocmask(SIG_BLOCK, NULL, &set);
	next("pthread_sigmask");
	pthread_sigmask(SIG_BLOCK, NULL, &set);
	next("sigpending");
	sigpending(&set);
	next("signal");
	signal(SIGUSR2, SIG_DFL);
	next("nanosleep");
	nanosleep(&zero, NULL);
	next("clock_nanosleep");
	clock_nanosleep(CLOCK_MONOTONIC, 0, &zero, NULL);
	next("poll");
	poll(NULL, 0, 0);
	next("ppoll");
	ppoll(NULL, 0, &zero, NULL);
	next("select");
	select(0, NULL, NULL, NULL, &tv);
	next("pselect");
	pselect(0, NULL, NULL, NULL, &zero, NULL);
	next("epoll_wait");
	epoll_wait(ep, &ev, 1, 0);
	next("dup2");
	d = dup(fd);
	if (d < 0 || dup2(fd, d) != d)
		nsbt_fail("dup2: %s", strerror(errno));
	next("dup3");
	if (dup3(fd, d, O_CLOEXEC) != d)
		nsbt_fail("dup3: %s", strerror(errno));
	next("close");
	if (close(d) != 0)
		nsbt_fail("close: %s", strerror(errno));
	next("done");
	release(th);
}
#endif

/* In the parent, when the watchdog fails the test: where the child was. */
static void
say_step(void)
{
	unsigned long s = *step;

	fprintf(stderr, "the collector was at step \"%s\" (a call that waits for the loader's "
		"lock, held by a stopped thread, never returns)\n",
		s < sizeof(steps) / sizeof(steps[0]) ? steps[s] : "?");
}

int
main(int argc, char **argv)
{
	char err[4096];
	int status;

	if (argc != 2)
		nsbt_fail("usage: core-loaderlock LOADER_CTOR_SO");
	ctor_so = argv[1];
#ifdef NSBT_DLOPEN
	if (nsbt_have_library())
		nsbt_fail("the library is already loaded: it must come with dlopen()");
#else
	if (!nsbt_have_library())
		nsbt_fail("the library is not loaded");
#endif
	step = mmap(NULL, nsbt_page(), CORE_PROT_RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (step == MAP_FAILED)
		nsbt_fail("mmap: %s", strerror(errno));
	nsbt_on_exit = say_step;
	status = core_run_watched(collector, NULL, nsbt_scaled(20), step, "collector", err, sizeof(err));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("the collector %s", nsbt_status_str(status));
	core_expect_quiet(err, "collector");
	printf("ok: every interposed call returned while another thread held the loader's lock\n");
	return 0;
}
