/* SPDX-License-Identifier: MIT */
/*
 * A peer that toggles the size (hidden case peer_toggles_size): another
 * process loops ftruncate(fd, 0); ftruncate(fd, full) on a memfd the
 * program maps, as fast as it can, while reader threads pinned to
 * different CPUs map the file (the default policy protects a memfd), read
 * every page and unmap it, again and again.  Every fault the readers take
 * was past the end when the kernel raised it, and the size the rescue
 * then reads may already be the full one again: the program must never
 * die of it, nor hang (a watchdog kills it and shows its stacks).
 *
 * Run under the default policy and fill, and re-executed with
 * NOSIGBUS_FILL=range and auto.  argv[2] may give the seconds each run
 * lasts (3 by default; argv[1] is "all" or the re-executed fill).
 */
#include <sched.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#include "core.h"

#define NPAGES	16
#define READERS	4

static int seconds = 3;
static int file_fd;
static size_t ps;
static atomic_bool stop;
static atomic_ulong rounds;

static void *
reader(void *arg)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET((int)((uintptr_t)arg % (uintptr_t)(cpus > 0 ? cpus : 1)), &set);
	(void)sched_setaffinity(0, sizeof(set), &set);	/* this thread */
	while (!atomic_load(&stop)) {
		volatile char *p = mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_SHARED,
					file_fd, 0);
		unsigned sum = 0;

		if (p == MAP_FAILED)
			nsbt_fail("mmap: %s", strerror(errno));
		for (size_t i = 0; i < NPAGES * ps; i += ps / 4)
			sum += (unsigned char)p[i];
		(void)sum;
		if (munmap((void *)p, NPAGES * ps) != 0)
			nsbt_fail("munmap: %s", strerror(errno));
		atomic_fetch_add(&rounds, 1);
	}
	return NULL;
}

/* The peer: a process of its own, toggling until its parent goes. */
static pid_t
start_peer(void)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_NAME, "nsb-toggler");
		for (;;) {
			if (ftruncate(file_fd, 0) != 0 ||
			    ftruncate(file_fd, (off_t)(NPAGES * ps)) != 0)
				_exit(3);
		}
	}
	return pid;
}

static void
program(void *arg)
{
	const char *fill = arg;
	pthread_t t[READERS];
	struct nosigbus_stats before, after;
	pid_t peer;
	int status;

	core_no_core();
	ps = nsbt_page();
	file_fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	before = core_stats();
	peer = start_peer();
	for (uintptr_t i = 0; i < READERS; i++)
		NSBT_CHECK(pthread_create(&t[i], NULL, reader, (void *)i) == 0, "pthread_create");
	sleep((unsigned)seconds);
	atomic_store(&stop, true);
	for (int i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	kill(peer, SIGKILL);
	NSBT_CHECK(waitpid(peer, &status, 0) == peer, "waitpid: %s", strerror(errno));
	NSBT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the peer: %s",
		   nsbt_status_str(status));
	after = core_stats();
	printf("ok: fill=%s: %lu rounds of %d pages against a toggling peer, %llu rescues\n",
	       fill, atomic_load(&rounds), NPAGES,
	       (unsigned long long)(after.rescues - before.rescues));
	NSBT_CHECK(after.rescues > before.rescues, "fill=%s: no fault was ever rescued: "
		   "the peer never raced the readers", fill);
}

/* The program in a child, killed (stacks shown) if it outlives its time. */
static void
run(const char *fill)
{
	int limit = nsbt_scaled(seconds + 30), status;
	double end = nsbt_now() + limit;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		program((void *)fill);
		fflush(NULL);
		_exit(0);
	}
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		NSBT_CHECK(w >= 0, "waitpid: %s", strerror(errno));
		if (w == pid)
			break;
		if (nsbt_now() > end) {
			nsbt_show_stacks(pid);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			nsbt_fail("fill=%s: the program hung (killed after %d s)", fill, limit);
		}
		usleep(20000);
	}
	nsbt_expect_exit(status, 0, nsbt_fmt("fill=%s: the program against a toggling peer",
					    fill));
}

int
main(int argc, char **argv)
{
	static const char *const fills[] = { "range", "auto" };

	if (!nsbt_have_library())
		nsbt_skip("the library is not loaded");
	if (argc > 2)
		seconds = atoi(argv[2]);
	if (seconds < 1)
		seconds = 1;
	if (argc > 1 && !strncmp(argv[1], "fill-", 5)) {
		run(argv[1] + 5);
		return 0;
	}
	run("default");
	for (int i = 0; i < 2; i++) {
		char env[64], scenario[32], secs[16];
		int status;
		pid_t pid;

		snprintf(env, sizeof(env), "NOSIGBUS_FILL=%s", fills[i]);
		snprintf(scenario, sizeof(scenario), "fill-%s", fills[i]);
		snprintf(secs, sizeof(secs), "%d", seconds);
		fflush(NULL);
		pid = fork();
		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			char *args[] = { argv[0], scenario, secs, NULL };

			putenv(env);
			execv("/proc/self/exe", args);
			_exit(127);
		}
		NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		nsbt_expect_exit(status, 0, fills[i]);
	}
	return 0;
}
