/* SPDX-License-Identifier: MIT */
/*
 * Attacks on the table lock held without the signal mask in a process
 * with a handler that is not for its own faults (issue 40; doc/design.md,
 * "Dropping the mask for every handler").  Today such a process takes
 * every lock with every signal blocked (process.c), and these scenarios
 * pass; with the mask left out they are what breaks it:
 *
 *   stw    a stop-the-world collector: the target thread (CPU 0) loops
 *          over mmap, a rescue, mprotect and munmap of a protected memfd;
 *          the collector (CPU 1) sends it SIGUSR1 at random moments (the
 *          handler posts "stopped" and waits until released), and while
 *          it is stopped maps a protected memfd, reads its truncated page
 *          (a rescue) and unmaps it.  A third thread rescues and
 *          MADV_DONTNEEDs a long-lived protected mapping throughout.
 *   jump   the SIGUSR1 handler siglongjmps out of whatever the target is
 *          doing (back to the top of its loop), often from inside a
 *          protected mapping call; the sender maps, rescues and unmaps
 *          after each jump.
 *   exit   the SIGUSR1 handler calls pthread_exit: a fresh worker each
 *          round, killed at a random moment of its mapping calls; then the
 *          sender maps, rescues and unmaps.
 *
 * Each scenario runs in a child under a watchdog on its progress (a
 * mapping call that waits for good is a hang: SIGKILL, failure).  At the
 * end: the long-lived mapping is still rescued, a fresh one is, every
 * page the scenario unmapped that /proc/self/maps shows unmapped has no
 * record left (a raw mmap of an empty memfd there is not rescued), and
 * the library printed nothing.
 *
 * With the table lock taken without the mask for a SIGUSR1 handler too (an
 * experiment build: nsb_process_handler_coming never setting
 * handlers_possible), each breaks at once: stw hangs within a hundred
 * stops (the collector's mmap waits for the table lock its stopped target
 * holds, in munmap), jump dies of SIGBUS in its first cycle (the lock it
 * jumped out of still holds the target's number: its next mmap is taken
 * for a nested call, unprotected, and the read past its end is not
 * rescued), exit hangs in its first cycle (the sender's
 * mmap waits for a lock whose holder has exited).
 *
 * Usage: core-nomask stw|jump|exit [CYCLES [SECONDS]]
 */
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdatomic.h>

#include "core.h"

#define KEEP_PAGES 16
#define FREED 64

static size_t ps;
static int zfd;				/* an empty memfd: every page faults */
static char *keep;			/* KEEP_PAGES of it, for the rescuer */
static volatile unsigned long *progress;	/* shared with the parent */
static struct nsbt_budget budget;
static unsigned long total_cycles;
static const char *mode;
static atomic_bool stop_all;
static atomic_ulong target_loops, rescues;
static sem_t stopped, resume;
static char *volatile freed[FREED];	/* pages unmapped, for the end check */
static atomic_uint freed_n;
static __thread sigjmp_buf jump_env;
static __thread volatile sig_atomic_t jump_armed, exit_armed;
static atomic_ulong jumps, exits, handled;
static bool stw_mode;

static void
say(const char *msg)
{
	(void)!write(STDERR_FILENO, msg, strlen(msg));
}

static void
remember_freed(char *p)
{
	freed[atomic_fetch_add(&freed_n, 1) % FREED] = p;
}

/* [signal handler] */
static void
on_usr1(int sig)
{
	int saved = errno;

	(void)sig;
	atomic_fetch_add(&handled, 1);
	if (jump_armed) {
		atomic_fetch_add(&jumps, 1);
		siglongjmp(jump_env, 1);
	}
	if (exit_armed) {
		atomic_fetch_add(&exits, 1);
		pthread_exit(NULL);
	}
	if (!stw_mode) {	/* jump: not armed yet */
		errno = saved;
		return;
	}
	/* stw: stopped until the collector releases this thread. */
	sem_post(&stopped);
	while (sem_wait(&resume) != 0)
		;
	errno = saved;
}

/* One round of protected calls; what it unmaps is remembered. */
static void
protected_round(const char *who)
{
	char *p = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, zfd, 0);

	if (p == MAP_FAILED) {
		say("FAIL: mmap of a protected memfd failed\n");
		_exit(3);
	}
	if (p[ps] != 0) {		/* a rescue */
		say("FAIL: a rescued page reads non-zero\n");
		_exit(3);
	}
	if (mprotect(p, ps, PROT_READ) != 0 || munmap(p, 2 * ps) != 0) {
		say("FAIL: mprotect/munmap of a protected memfd failed\n");
		_exit(3);
	}
	(void)who;
	remember_freed(p);
}

static void
spin_random(uint64_t *seed, unsigned max)
{
	unsigned n = (unsigned)(core_rand(seed) % max);

	for (volatile unsigned i = 0; i < n; i++)
		;
}

/* The target of stw and jump (CPU 0). */
static void *
target(void *arg)
{
	(void)arg;
	core_pin(0);
	while (!atomic_load(&stop_all)) {
		if (strcmp(mode, "jump") == 0) {
			/* Not armed while the jmp_buf is being written. */
			jump_armed = 0;
			if (sigsetjmp(jump_env, 1))
				continue;	/* back from the handler */
			jump_armed = 1;
		}
		protected_round("target");
		atomic_fetch_add(&target_loops, 1);
	}
	jump_armed = 0;
	return NULL;
}

/* Rescues on a long-lived protected mapping, then gives its pages back. */
static void *
rescuer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_all)) {
		for (size_t i = 0; i < KEEP_PAGES; i++)
			if (keep[i * ps] != 0) {
				say("FAIL: rescuer: a rescued page reads non-zero\n");
				_exit(3);
			}
		atomic_fetch_add(&rescues, 1);
		if (madvise(keep, KEEP_PAGES * ps, MADV_DONTNEED) != 0) {
			say("FAIL: rescuer: madvise failed\n");
			_exit(3);
		}
		sched_yield();
	}
	return NULL;
}

/* A worker of exit: killed by its handler at a random moment. */
static void *
exit_worker(void *arg)
{
	atomic_bool *running = arg;

	core_pin(0);
	exit_armed = 1;
	atomic_store(running, true);
	for (;;)
		protected_round("worker");
	return NULL;
}

static void
budget_check(void)
{
	(*progress)++;
	if (nsbt_budget_spent(&budget))
		nsbt_too_slow(mode, *progress, total_cycles, budget.seconds);
}

static void
run_stw(unsigned long cycles, uint64_t *seed)
{
	pthread_t t;

	NSBT_CHECK(pthread_create(&t, NULL, target, NULL) == 0, "pthread_create");
	for (unsigned long c = 0; c < cycles; c++) {
		spin_random(seed, 20000);
		NSBT_CHECK(pthread_kill(t, SIGUSR1) == 0, "pthread_kill");
		while (sem_wait(&stopped) != 0)
			;
		/* The world is stopped: the collector maps, rescues, unmaps. */
		protected_round("collector");
		sem_post(&resume);
		budget_check();
	}
	atomic_store(&stop_all, true);
	pthread_join(t, NULL);
	printf("ok: stw: %lu stops at random moments (%lu target rounds)\n", cycles,
	       atomic_load(&target_loops));
}

static void
run_jump(unsigned long cycles, uint64_t *seed)
{
	pthread_t t;

	NSBT_CHECK(pthread_create(&t, NULL, target, NULL) == 0, "pthread_create");
	while (atomic_load(&target_loops) == 0)
		sched_yield();
	for (unsigned long c = 0; c < cycles; c++) {
		unsigned long before = atomic_load(&handled), loops;

		spin_random(seed, 20000);
		NSBT_CHECK(pthread_kill(t, SIGUSR1) == 0, "pthread_kill");
		/* Handled (mostly a jump), and the target on its way again. */
		while (atomic_load(&handled) == before)
			sched_yield();
		loops = atomic_load(&target_loops);
		while (atomic_load(&target_loops) == loops)
			sched_yield();
		protected_round("sender");
		budget_check();
	}
	atomic_store(&stop_all, true);
	pthread_join(t, NULL);
	printf("ok: jump: %lu siglongjmps out of the target's calls (%lu target rounds)\n",
	       atomic_load(&jumps), atomic_load(&target_loops));
}

static void
run_exit(unsigned long cycles, uint64_t *seed)
{
	for (unsigned long c = 0; c < cycles; c++) {
		atomic_bool running = false;
		pthread_t t;

		NSBT_CHECK(pthread_create(&t, NULL, exit_worker, &running) == 0, "pthread_create");
		while (!atomic_load(&running))
			sched_yield();
		spin_random(seed, 200000);
		NSBT_CHECK(pthread_kill(t, SIGUSR1) == 0, "pthread_kill");
		NSBT_CHECK(pthread_join(t, NULL) == 0, "pthread_join");
		protected_round("sender");
		budget_check();
	}
	printf("ok: exit: %lu workers left by pthread_exit from a handler\n",
	       atomic_load(&exits));
}

/* The records against the kernel's mappings: see the header. */
static void
check_records(void)
{
	unsigned n = atomic_load(&freed_n);
	int probed = 0;

	for (size_t i = 0; i < KEEP_PAGES; i++)
		if (keep[i * ps] != 0)
			nsbt_fail("the long-lived protected mapping reads non-zero");
	protected_round("end");
	for (unsigned i = 0; i < (n < FREED ? n : FREED); i++) {
		char *p = freed[i];

		if (!p || core_page_mapped(p) || core_page_mapped(p + ps))
			continue;
		core_expect_no_record(p, "a page the scenario unmapped");
		core_expect_no_record(p + ps, "a page the scenario unmapped");
		probed++;
	}
	printf("ok: records: the long-lived mapping rescued, %d unmapped spans have no record\n",
	       probed);
}

static void
nomask_child(void *arg)
{
	unsigned long cycles = *(unsigned long *)arg;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	struct sigaction sa;
	pthread_t r;

	NSBT_CHECK(sem_init(&stopped, 0, 0) == 0 && sem_init(&resume, 0, 0) == 0, "sem_init");
	zfd = nsbt_file(NSBT_MEMFD, 0);
	keep = core_map(NULL, KEEP_PAGES * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, zfd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	NSBT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	core_pin(1);
	NSBT_CHECK(pthread_create(&r, NULL, rescuer, NULL) == 0, "pthread_create");
	if (strcmp(mode, "stw") == 0)
		run_stw(cycles, &seed);
	else if (strcmp(mode, "jump") == 0)
		run_jump(cycles, &seed);
	else
		run_exit(cycles, &seed);
	atomic_store(&stop_all, true);
	pthread_join(r, NULL);
	check_records();
}

int
main(int argc, char **argv)
{
	unsigned long cycles;
	int seconds;
	char err[8192], what[128];
	int status;

	if (argc < 2 || (strcmp(argv[1], "stw") != 0 && strcmp(argv[1], "jump") != 0 &&
			 strcmp(argv[1], "exit") != 0)) {
		fprintf(stderr, "usage: core-nomask stw|jump|exit [CYCLES [SECONDS]]\n");
		return 2;
	}
	core_require_library();
	mode = argv[1];
	stw_mode = strcmp(mode, "stw") == 0;
	cycles = argc > 2 ? strtoul(argv[2], NULL, 0) : 2000;
	seconds = argc > 3 ? atoi(argv[3]) : 90;
	ps = nsbt_page();
	progress = core_progress();
	total_cycles = cycles;
	budget = nsbt_budget_start(seconds);
	snprintf(what, sizeof(what), "%s: a mapping call waits for good after a SIGUSR1 handler", mode);
	status = core_run_watched(nomask_child, &cycles, nsbt_scaled(30), progress, what,
				  err, sizeof(err));
	core_expect_quiet(err, mode);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 77;	/* too slow: the child said so */
	nsbt_expect_exit(status, 0, mode);
	printf("ok: %s: %lu cycles\n", mode, *progress);
	return 0;
}
