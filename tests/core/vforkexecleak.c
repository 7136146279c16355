/* SPDX-License-Identifier: MIT */
/*
 * A vfork child that executes a program while the program ignores SIGBUS
 * (exec.c's hand-off) must leave nothing behind in its parent's memory.
 *
 * exec.c tells a new program that loads the library that SIGBUS is
 * ignored through a copy of the environment with NOSIGBUS_INHERIT_IGNORED
 * added.  The copy was a mapping of its own, unmapped after a failed
 * exec; after one that succeeds the process's memory is gone, except in a
 * vfork child, whose memory is its parent's: every vfork-then-exec left a
 * mapping in the parent, for ever.  CPython's subprocess (vfork since
 * 3.10), and every spawner that uses vfork, grew by at least a page a
 * child while SIGBUS was ignored.
 *
 * The test (in a child with a watchdog, stderr checked): a protected
 * mapping rescued once (the library's handler installed), SIGBUS
 * ignored, then ROUNDS vfork children that execute this program again
 * (LD_PRELOAD naming the library in the environment passed, so the
 * hand-off is made), each of which must start with SIGBUS ignored (its
 * exit status says).  The parent's VmSize after WARM rounds and after
 * all of them must be the same within SLACK pages.  Before the fix it
 * grew by a page or more a round.
 *
 * Usage: core-vforkexecleak  |  core-vforkexecleak report
 */
#include <sys/wait.h>

#include "core.h"

#define WARM 8
#define ROUNDS 264
#define SLACK 16

static char self[4096];

static void
spawn(char **env)
{
	char *argv[] = { self, (char *)"report", NULL };
	int status;
	pid_t pid;

	pid = vfork();
	NSBT_CHECK(pid >= 0, "vfork: %s", strerror(errno));
	if (pid == 0) {
		execve(self, argv, env);
		_exit(127);
	}
	NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "the new program: %s, expected exit 0 (SIGBUS ignored)",
		   nsbt_status_str(status));
}

static void
body(void *arg)
{
	const char *lib = getenv("NSB_PRELOAD");
	char preload[4200], *env[] = { preload, (char *)"PATH=/usr/bin:/bin", NULL };
	size_t ps = nsbt_page(), before, after;
	volatile char *p;
	int fd;

	(void)arg;
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", lib);
	fd = memfd_create("vforkexecleak", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)ps) == 0, "memfd: %s", strerror(errno));
	p = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(p[ps] == 0, "past the end reads %#x", p[ps]);
	NSBT_CHECK(signal(SIGBUS, SIG_IGN) != SIG_ERR, "signal: %s", strerror(errno));
	for (int i = 0; i < WARM; i++)
		spawn(env);
	before = core_vm_size();
	for (int i = WARM; i < ROUNDS; i++)
		spawn(env);
	after = core_vm_size();
	printf("VmSize after %d rounds %zu, after %d %zu: %+ld pages\n", WARM, before, ROUNDS,
	       after, ((long)after - (long)before) / (long)ps);
	NSBT_CHECK(after <= before + SLACK * ps,
		   "VmSize grew by %zu pages over %d vfork-then-exec children",
		   (after - before) / ps, ROUNDS - WARM);
}

int
main(int argc, char **argv)
{
	char err[8192];
	ssize_t n;
	int status;

	if (argc == 2 && !strcmp(argv[1], "report")) {
		struct sigaction old;

		if (sigaction(SIGBUS, NULL, &old) != 0)
			return 2;
		return old.sa_handler == SIG_IGN ? 0 : 1;
	}
	core_require_library();
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run by meson test)");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	NSBT_CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	status = core_run_watched(body, NULL, nsbt_scaled(150), NULL, "vfork-then-exec", err, sizeof(err));
	nsbt_expect_exit(status, 0, "vfork-then-exec with SIGBUS ignored");
	core_expect_quiet(err, "vfork-then-exec");
	printf("ok\n");
	return 0;
}
