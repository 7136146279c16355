/* SPDX-License-Identifier: MIT */
/*
 * true.c - a process that does nothing, started many times by the
 * benchmark's start-up figure and traced by the start-up test.
 *
 * With the argument "dladdr" it calls dladdr() once: the start-up test's
 * control that its spy (spy.c) sees such calls.
 *
 *   nsb-true spawn HOW N HANDLERS PROGRAM
 *
 * starts PROGRAM (no argument) N times, one after the other, and waits
 * for each: HOW is fork (then execv), vfork (then execv), posix_spawn, or
 * exec (this program execs itself N times, counting down, then PROGRAM).
 * With HANDLERS "handlers" it first installs handlers for SIGCHLD and
 * SIGINT, and blocks every signal around each fork and vfork, which the
 * child unblocks before its exec, as dash does.  The start-up test counts
 * what each child costs.
 * Exit 0 when every child exited 0.
 */
#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void
on_signal(int sig)
{
	(void)sig;
}

static int
spawn(char **argv)
{
	const char *how = argv[2], *program = argv[5];
	char *child[] = { (char *)program, NULL };
	int n = atoi(argv[3]);
	bool shell = strcmp(argv[4], "handlers") == 0;
	sigset_t all, none;

	sigfillset(&all);
	sigemptyset(&none);
	if (shell) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		if (sigaction(SIGCHLD, &sa, NULL) || sigaction(SIGINT, &sa, NULL))
			return 1;
	}
	if (strcmp(how, "exec") == 0) {
		char count[16];

		if (n <= 0) {
			execv(program, child);
			return 127;
		}
		snprintf(count, sizeof(count), "%d", n - 1);
		argv[3] = count;
		execv(argv[0], argv);
		return 127;
	}
	for (volatile int i = 0; i < n; i++) {	/* volatile: kept across vfork */
		int status;
		pid_t pid;

		if (strcmp(how, "fork") == 0 || strcmp(how, "vfork") == 0) {
			if (shell)
				sigprocmask(SIG_SETMASK, &all, NULL);
			pid = how[0] == 'v' ? vfork() : fork();
			if (pid == 0) {
				if (shell)
					sigprocmask(SIG_SETMASK, &none, NULL);
				execv(program, child);
				_exit(127);
			}
			if (shell)
				sigprocmask(SIG_SETMASK, &none, NULL);
		} else if (strcmp(how, "posix_spawn") == 0) {
			if (posix_spawn(&pid, program, NULL, NULL, child, environ) != 0)
				return 1;
		} else {
			return 2;
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	Dl_info info;

	if (argc > 1 && strcmp(argv[1], "dladdr") == 0)
		return dladdr((void *)argv, &info) >= 0 ? 0 : 1;
	if (argc == 6 && strcmp(argv[1], "spawn") == 0)
		return spawn(argv);
	return 0;
}
