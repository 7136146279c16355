/* SPDX-License-Identifier: MIT */
/*
 * nested - the program's signal handlers against the library's table lock
 * (process.c): a handler that maps, unmaps and faults while the thread it
 * interrupted is inside an interposed call, and a garbage collector that
 * stops threads from a handler while it maps itself.
 *
 * handler-maps: the main thread recycles protected mappings of an empty
 * memfd (mmap MAP_FIXED, a rescue, mprotect, madvise, a shrinking mremap,
 * and a MAP_FIXED that replaces the whole slot), every one a locked call;
 * a second thread, on another CPU where there is one, sends it SIGUSR1
 * again and again (pthread_kill), and the handler, on the main thread,
 * maps a protected mapping of the memfd, reads both its pages (two
 * rescues inside the handler), or unmaps one it made earlier.  A handler
 * that ran inside the library's critical section would wait for its own
 * thread, or find the records half changed.
 *
 * stop-the-world: worker threads recycle protected mappings the same way;
 * a collector (the main thread) stops them all with SIGUSR2, whose handler
 * posts a semaphore and waits in sigsuspend until the collector sends
 * SIGXCPU (Boehm GC's scheme), and, while they are stopped, maps,
 * rescues, changes and unmaps protected mappings of its own.  A worker
 * stopped while it holds the table lock would stop the collector for good.
 *
 * Afterwards the records are checked against the kernel's view: every
 * slot must show in /proc/self/maps the protection it should have, the
 * library must count exactly the live protected mappings, and a forked
 * probe maps the empty memfd over each slot with a raw mmap(2), unseen by
 * the library, and reads it: a live slot must be rescued (its record is
 * there), a replaced one must die of SIGBUS (no stale record).  The
 * library must have failed no rescue and printed nothing.
 *
 * A hang fails the test: the scenario counts its progress in memory shared
 * with this process, which kills it (SIGKILL) after 20 s without progress,
 * showing its threads' stacks first.
 *
 * Usage: nested handler-maps|stop-the-world [--iterations N]
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "nsbtest.h"

#define SLOT_PAGES	4	/* a slot's reservation */
#define MAIN_SLOTS	16
#define HANDLER_SLOTS	8
#define WORKERS		3
#define WORKER_SLOTS	4
#define COLLECTOR_SLOTS	4

static size_t ps;
static int memfd;		/* empty: every read of a protected mapping is rescued */
static int probe_fd;		/* empty too, never mapped through the library */
static atomic_ulong *progress;	/* shared with the watchdog */
static int (*get_stats)(struct nosigbus_stats *, size_t);
static uint64_t records_before;	/* the progress page, under the default policy */

/* ---- slots: a reservation, and a protected mapping at its start -------- */

struct slot {
	char *base;
	bool live;		/* a protected mapping of one page, read-write */
};

static void
reserve(struct slot *s, size_t n)
{
	char *p = mmap(NULL, n * SLOT_PAGES * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NSBT_CHECK(p != MAP_FAILED, "reserve: %s", strerror(errno));
	for (size_t i = 0; i < n; i++) {
		s[i].base = p + i * SLOT_PAGES * ps;
		s[i].live = false;
	}
}

/* One round of locked calls over a slot; the slot ends live or not.
 * Page 0 is never touched: a rescued page is the library's, and a fault
 * there later is not the mapping's (the probe faults on page 0). */
static void
recycle(struct slot *s, bool end_live)
{
	char *b = s->base;

	NSBT_CHECK(mmap(b, 3 * ps, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS, memfd, 0) == b,
		   "mmap(MAP_FIXED | MAP_NOSIGBUS): %s", strerror(errno));
	NSBT_CHECK(((volatile char *)b)[ps] == 0, "a rescued page reads 0");
	NSBT_CHECK(mprotect(b, 3 * ps, PROT_READ | PROT_WRITE) == 0, "mprotect: %s", strerror(errno));
	b[2 * ps] = 1;	/* rescued, then written */
	NSBT_CHECK(madvise(b, 3 * ps, MADV_DONTNEED) == 0, "madvise: %s", strerror(errno));
	NSBT_CHECK(mremap(b, 3 * ps, 2 * ps, 0) == b, "mremap: %s", strerror(errno));
	/* The page given up goes back to the reservation, without replacing
	 * what another thread may have been given there meanwhile (the
	 * library's rescues map a page where the kernel finds room, then
	 * move it): a MAP_FIXED over it later would. */
	while (mmap(b + 2 * ps, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
		    0) != b + 2 * ps) {
		NSBT_CHECK(errno == EEXIST, "mmap(MAP_FIXED_NOREPLACE): %s", strerror(errno));
		sched_yield();
	}
	NSBT_CHECK(((volatile char *)b)[ps] == 0, "a rescued page after MADV_DONTNEED");
	s->live = true;
	if (!end_live) {
		/* Back to the reservation: the record goes. */
		NSBT_CHECK(mmap(b, 3 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == b,
			   "mmap(MAP_FIXED) over a record: %s", strerror(errno));
		s->live = false;
	}
	atomic_fetch_add(progress, 1);
}

static void
pin(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		if (cpu == 0)
			printf("one CPU: the threads take turns (not pinned)\n");
		return;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/* ---- the check ----------------------------------------------------------- */

/* The protection /proc/self/maps shows at addr ("rw-p"), or "" for none. */
static void
maps_prot(const void *addr, char out[5])
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	out[0] = '\0';
	NSBT_CHECK(f, "/proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		char prot[5];

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, prot) == 3 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			memcpy(out, prot, 5);
			break;
		}
	}
	fclose(f);
}

/* In a grandchild: the empty memfd mapped over addr behind the library's
 * back, then read.  Returns the wait status. */
static int
probe_one(void *addr)
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		void *p = (void *)syscall(SYS_mmap, addr, ps, PROT_READ, MAP_SHARED | MAP_FIXED,
					  probe_fd, 0);

		if (p != addr)
			_exit(3);
		_exit(((volatile char *)addr)[0] == 0 ? 0 : 4);
	}
	while (waitpid(pid, &status, 0) < 0)
		NSBT_CHECK(errno == EINTR, "waitpid");
	return status;
}

static void
check_slot(const struct slot *s, const char *who, size_t i)
{
	char prot[5];
	int status;

	maps_prot(s->base, prot);
	NSBT_CHECK(strcmp(prot, s->live ? "rw-p" : "---p") == 0,
		   "%s slot %zu (%s): /proc/self/maps shows \"%s\"", who, i,
		   s->live ? "live" : "replaced", prot);
	status = probe_one(s->base);
	if (s->live)
		NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			   "%s slot %zu: live, but a fault there was not rescued (%s)", who, i,
			   nsbt_status_str(status));
	else
		NSBT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
			   "%s slot %zu: replaced, but a fault there was not SIGBUS (%s): a stale record",
			   who, i, nsbt_status_str(status));
}

static void
check_counts(size_t live)
{
	struct nosigbus_stats st;


	NSBT_CHECK(get_stats(&st, sizeof(st)) == 0, "nosigbus_get_stats");
	NSBT_CHECK(st.mappings - records_before == live,
		   "%" PRIu64 " protected mappings recorded, %zu live", st.mappings - records_before, live);
	NSBT_CHECK(st.failures == 0, "%" PRIu64 " failed rescues", st.failures);
	printf("records: %zu live protected mappings, as the kernel shows; %" PRIu64 " rescues\n",
	       live, st.rescues);
}

/* ---- handler-maps ------------------------------------------------------ */

static char *volatile hmaps[HANDLER_SLOTS];
static atomic_ulong handler_runs, handler_maps;
static atomic_bool stop_pinger;

/* A failure in the handler: said, then the scenario dies. */
static void
handler_fail(const char *what)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "FAIL: in the SIGUSR1 handler: %s: %s\n", what,
			 strerror(errno));

	if (write(2, msg, (size_t)n) < 0)
		_exit(2);
	_exit(1);
}

static void
on_usr1(int sig)
{
	int saved = errno;
	unsigned long k = atomic_fetch_add(&handler_runs, 1) % HANDLER_SLOTS;
	char *p = hmaps[k];

	(void)sig;
	if (!p) {
		p = mmap(NULL, 3 * ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, memfd, 0);
		if (p == MAP_FAILED)
			handler_fail("mmap(MAP_NOSIGBUS)");
		/* Two rescues, in the handler (page 0 is the probe's). */
		if (((volatile char *)p)[ps] != 0 || ((volatile char *)p)[2 * ps] != 0)
			handler_fail("a rescued page does not read 0");
		hmaps[k] = p;
		atomic_fetch_add(&handler_maps, 1);
	} else {
		if (mprotect(p, 3 * ps, PROT_READ | PROT_WRITE) != 0 || munmap(p, 3 * ps) != 0)
			handler_fail("mprotect or munmap");
		hmaps[k] = NULL;
	}
	errno = saved;
}

static void *
pinger(void *arg)
{
	pthread_t target = *(pthread_t *)arg;

	pin(1);
	while (!atomic_load(&stop_pinger)) {
		pthread_kill(target, SIGUSR1);
		/* Let the handler end before the next: a queue of pending
		 * SIGUSR1 collapses into one anyway. */
		for (int i = 0; i < 20 && !atomic_load(&stop_pinger); i++)
			sched_yield();
	}
	return NULL;
}

static int
handler_maps_scenario(unsigned long iterations)
{
	struct slot s[MAIN_SLOTS];
	struct sigaction sa = { .sa_handler = on_usr1 };
	pthread_t self = pthread_self(), t;
	sigset_t usr1;
	size_t live = 0;
	uint64_t state = 12345;

	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
	reserve(s, MAIN_SLOTS);
	pin(0);
	NSBT_CHECK(pthread_create(&t, NULL, pinger, &self) == 0, "pthread_create");
	for (unsigned long i = 0; i < iterations; i++)
		recycle(&s[i % MAIN_SLOTS], nsbt_random(&state) & 1);
	atomic_store(&stop_pinger, true);
	pthread_join(t, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	printf("handler-maps: %lu recycles, %lu signals handled, %lu mappings made in the handler\n",
	       iterations, atomic_load(&handler_runs), atomic_load(&handler_maps));
	NSBT_CHECK(atomic_load(&handler_runs) > 0, "no signal arrived");
	for (size_t i = 0; i < MAIN_SLOTS; i++) {
		check_slot(&s[i], "main", i);
		live += s[i].live;
	}
	for (size_t k = 0; k < HANDLER_SLOTS; k++) {
		char prot[5];
		int status;

		if (!hmaps[k])
			continue;
		live++;
		maps_prot(hmaps[k], prot);
		NSBT_CHECK(strcmp(prot, "r--p") == 0, "handler mapping %zu: /proc/self/maps shows \"%s\"",
			   k, prot);
		status = probe_one(hmaps[k]);
		NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			   "handler mapping %zu: a fault there was not rescued (%s)", k,
			   nsbt_status_str(status));
	}
	check_counts(live);
	return 0;
}

/* ---- stop-the-world ---------------------------------------------------- */

static sem_t acks;
static atomic_uint world_gen;	/* odd: stopped */
static atomic_bool workers_stop;
static sigset_t suspend_mask;

static void
on_suspend(int sig)
{
	int saved = errno;
	unsigned gen = atomic_load(&world_gen);

	(void)sig;
	sem_post(&acks);
	while (atomic_load(&world_gen) == gen)
		sigsuspend(&suspend_mask);
	errno = saved;
}

static void
on_restart(int sig)
{
	(void)sig;
}

struct worker {
	pthread_t t;
	struct slot s[WORKER_SLOTS];
	unsigned long n;
};

static void *
worker(void *arg)
{
	struct worker *w = arg;
	uint64_t state = (uintptr_t)w;

	for (unsigned long i = 0; !atomic_load(&workers_stop); i++, w->n++)
		recycle(&w->s[i % WORKER_SLOTS], nsbt_random(&state) & 1);
	return NULL;
}

static int
stop_the_world_scenario(unsigned long rounds)
{
	static struct worker w[WORKERS];
	struct slot c[COLLECTOR_SLOTS];
	struct sigaction sa = { .sa_handler = on_suspend };
	size_t live = 0;
	uint64_t state = 777;

	sigfillset(&suspend_mask);
	sigdelset(&suspend_mask, SIGXCPU);
	/* SIGXCPU waits for the sigsuspend: none is lost between the
	 * handler's look at the generation and its wait. */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGXCPU);
	sa.sa_flags = SA_RESTART;
	NSBT_CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_restart;
	NSBT_CHECK(sigaction(SIGXCPU, &sa, NULL) == 0, "sigaction");
	NSBT_CHECK(sem_init(&acks, 0, 0) == 0, "sem_init");
	reserve(c, COLLECTOR_SLOTS);
	for (int i = 0; i < WORKERS; i++) {
		reserve(w[i].s, WORKER_SLOTS);
		NSBT_CHECK(pthread_create(&w[i].t, NULL, worker, &w[i]) == 0, "pthread_create");
	}
	for (unsigned long r = 0; r < rounds; r++) {
		atomic_fetch_add(&world_gen, 1);
		for (int i = 0; i < WORKERS; i++)
			pthread_kill(w[i].t, SIGUSR2);
		for (int i = 0; i < WORKERS; i++)
			while (sem_wait(&acks) != 0)
				NSBT_CHECK(errno == EINTR, "sem_wait");
		/* The world is stopped, wherever each worker was. */
		recycle(&c[r % COLLECTOR_SLOTS], nsbt_random(&state) & 1);
		atomic_fetch_add(&world_gen, 1);
		for (int i = 0; i < WORKERS; i++)
			pthread_kill(w[i].t, SIGXCPU);
	}
	atomic_store(&workers_stop, true);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(w[i].t, NULL);
	printf("stop-the-world: %lu stops; worker recycles %lu, %lu, %lu\n", rounds, w[0].n, w[1].n,
	       w[2].n);
	for (int i = 0; i < WORKERS; i++)
		for (size_t j = 0; j < WORKER_SLOTS; j++) {
			check_slot(&w[i].s[j], "worker", j);
			live += w[i].s[j].live;
		}
	for (size_t j = 0; j < COLLECTOR_SLOTS; j++) {
		check_slot(&c[j], "collector", j);
		live += c[j].live;
	}
	check_counts(live);
	return 0;
}

/* ---- the driver -------------------------------------------------------- */

int
main(int argc, char **argv)
{
	const char *old = getenv("LD_PRELOAD");
	unsigned long iterations = 3000;
	struct rlimit no_core = { 0, 0 };
	char ld[8192], out[8192];
	double last_move;
	unsigned long seen = 0;
	int status, err_fd;
	ssize_t n;
	pid_t pid;

	if (argc < 2 || (strcmp(argv[1], "handler-maps") && strcmp(argv[1], "stop-the-world")))
		nsbt_fail("usage: nested handler-maps|stop-the-world [--iterations N]");
	if (argc == 4 && strcmp(argv[2], "--iterations") == 0)
		iterations = strtoul(argv[3], NULL, 10);
	ps = nsbt_page();
	if (argc == 5 && strcmp(argv[2], "--scenario") == 0) {
		progress = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(argv[4]), 0);
		NSBT_CHECK(progress != MAP_FAILED, "the progress page: %s", strerror(errno));
		NSBT_CHECK(nsbt_have_library(), "the library is not loaded");
		get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT,
									    "nosigbus_get_stats");
		memfd = nsbt_file(NSBT_MEMFD, 0);
		probe_fd = nsbt_file(NSBT_MEMFD, 0);
		{
			struct nosigbus_stats st;

			NSBT_CHECK(get_stats(&st, sizeof(st)) == 0, "nosigbus_get_stats");
			records_before = st.mappings;
		}
		iterations = strtoul(argv[3], NULL, 10);
		return strcmp(argv[1], "handler-maps") == 0 ? handler_maps_scenario(iterations)
							   : stop_the_world_scenario(iterations);
	}
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	setrlimit(RLIMIT_CORE, &no_core);
	{
		int pfd = memfd_create("nested-progress", 0);
		char fdarg[16], itarg[32];

		NSBT_CHECK(pfd >= 0 && ftruncate(pfd, (off_t)ps) == 0, "memfd: %s", strerror(errno));
		progress = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
		NSBT_CHECK(progress != MAP_FAILED, "mmap: %s", strerror(errno));
		err_fd = memfd_create("nested-stderr", MFD_CLOEXEC);
		NSBT_CHECK(err_fd >= 0, "memfd: %s", strerror(errno));
		snprintf(fdarg, sizeof(fdarg), "%d", pfd);
		snprintf(itarg, sizeof(itarg), "%lu", iterations);
		fflush(NULL);
		pid = fork();
		NSBT_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			snprintf(ld, sizeof(ld), "%s%s%s", old && *old ? old : "",
				 old && *old ? ":" : "", getenv("NSB_PRELOAD"));
			setenv("LD_PRELOAD", ld, 1);
			dup2(err_fd, 2);
			execl("/proc/self/exe", "nested", argv[1], "--scenario", itarg, fdarg,
			      (char *)NULL);
			_exit(127);
		}
	}
	/* The watchdog: 20 s without progress is a hang. */
	last_move = nsbt_now();
	for (;;) {
		pid_t got = waitpid(pid, &status, WNOHANG);
		unsigned long now = atomic_load(progress);

		if (got == pid)
			break;
		if (now != seen) {
			seen = now;
			last_move = nsbt_now();
		} else if (nsbt_now() - last_move > nsbt_scaled(20)) {
			nsbt_show_stacks(pid);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			nsbt_fail("%s: no progress for 20 s after %lu recycles: a thread waits for "
				  "one that a handler keeps", argv[1], seen);
		}
		usleep(50 * 1000);
	}
	n = pread(err_fd, out, sizeof(out) - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	if (n > 0)
		fprintf(stderr, "the scenario's stderr:\n%s", out);
	nsbt_expect_exit(status, 0, argv[1]);
	NSBT_CHECK(n <= 0, "the scenario printed on stderr");
	return 0;
}
