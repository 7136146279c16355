/* SPDX-License-Identifier: MIT */
/*
 * exec.c - the exec family, posix_spawn, system, popen and wordexp.
 *
 * exec resets handled signals to SIG_DFL but keeps ignored ones and the
 * mask.  Since the kernel holds our handler and never a blocked SIGBUS,
 * the new program would lose the program's SIG_IGN and blocked SIGBUS:
 * dispositions.c gives the kernel the program's own state for the call
 * (or, for SIG_IGN with other threads running, tells the new program
 * through its environment), and ours back if the call returns.  glibc's
 * execvp, execl and friends call execve internally, not through the PLT,
 * so each is here.
 *
 * Not used in signal context.
 */
#include <errno.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <wordexp.h>

#include "nsb.h"

extern char **environ;

static const char handoff[] = NSB_HANDOFF_VAR "=1";

/*
 * Before the call: the kernel takes the program's SIGBUS state.  Returns
 * the environment to pass: envp, or a copy that tells the new program
 * (our constructor there) to ignore SIGBUS, freed by finish().  The copy
 * reads envp with care: a bad pointer must give the C library's EFAULT,
 * not a crash in here.  A new program that does not load the library
 * (static, set-user-ID) starts with SIGBUS at its default then.
 */
static char *const *
prepare(struct nsb_exec *x, char *const envp[])
{
	char **copy = NULL;
	size_t n = 0, cap = 0;

	nsb_disp_before_exec(x, true);
	if (!x->handoff)
		return envp;
	for (;;) {
		char *s;

		if (n + 2 > cap) {
			char **bigger = realloc(copy, (cap = cap ? cap * 2 : 64) * sizeof(*copy));

			if (!bigger)
				break;
			copy = bigger;
		}
		if (!nsb_read_word(&envp[n], &s))
			break;
		if (!s) {
			copy[n] = (char *)handoff;
			copy[n + 1] = NULL;
			return copy;
		}
		copy[n++] = s;
	}
	free(copy);
	return envp;	/* told neither way, or it fails anyway */
}

/* After the call: ours back; keeps the call's errno. */
static void
finish(struct nsb_exec *x, char *const *env, char *const envp[])
{
	int err = errno;

	nsb_disp_after_exec(x);
	if (env != envp)
		free((void *)env);
	errno = err;
}

/* Runs `call` (which passes env) with the program's SIGBUS state in the
 * kernel, the environment prepared from envp; its result and errno. */
#define WITH_PROGRAM_SIGBUS(envp, call)					\
	({								\
		struct nsb_exec x_;					\
		char *const *env = prepare(&x_, (envp));		\
		int ret_ = (call);					\
									\
		finish(&x_, env, (envp));				\
		ret_;							\
	})

NSB_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(envp, real_execve(path, argv, env));
}

NSB_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(envp, real_execvpe(file, argv, env));
}

NSB_EXPORT int
fexecve(int fd, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(envp, real_fexecve(fd, argv, env));
}

/* In glibc 2.34 and later. */
static int
sys_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	int (*f)(int, const char *, char *const[], char *const[], int) = real_execveat;

	return f ? f(dirfd, path, argv, envp, flags)
		 : (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
}

NSB_EXPORT int
execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	return WITH_PROGRAM_SIGBUS(envp, sys_execveat(dirfd, path, argv, env, flags));
}

NSB_EXPORT int
execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

NSB_EXPORT int
execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

enum list_kind { LIST_PATH, LIST_SEARCH, LIST_ENV };

/* execl(path, arg0, ..., NULL[, envp]): the arguments go on the stack. */
static int
exec_list(enum list_kind kind, const char *file, const char *arg0, va_list ap)
{
	va_list count;
	size_t n = 1;

	va_copy(count, ap);
	while (va_arg(count, char *))
		n++;
	va_end(count);
	{
		char *argv[n + 1];
		char **envp = environ;

		argv[0] = (char *)arg0;
		for (size_t i = 1; i <= n; i++)
			argv[i] = va_arg(ap, char *);
		if (kind == LIST_ENV)
			envp = va_arg(ap, char **);
		if (kind == LIST_SEARCH)
			return execvpe(file, argv, envp);
		return execve(file, argv, envp);
	}
}

#define EXEC_LIST(kind, file, arg)			\
	({						\
		va_list ap_;				\
		int ret_;				\
							\
		va_start(ap_, arg);			\
		ret_ = exec_list(kind, file, arg, ap_);	\
		va_end(ap_);				\
		ret_;					\
	})

NSB_EXPORT int
execl(const char *path, const char *arg, ...)
{
	return EXEC_LIST(LIST_PATH, path, arg);
}

NSB_EXPORT int
execlp(const char *file, const char *arg, ...)
{
	return EXEC_LIST(LIST_SEARCH, file, arg);
}

NSB_EXPORT int
execle(const char *path, const char *arg, ...)
{
	return EXEC_LIST(LIST_ENV, path, arg);
}

/* posix_spawn returns an error number and leaves errno alone.  The child
 * copies the kernel's dispositions when it is created, and its mask is
 * this thread's unless the attributes set one. */
NSB_EXPORT int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
	    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(envp, real_posix_spawn(pid, path, actions, attr, argv, env));
}

NSB_EXPORT int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
	     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(envp, real_posix_spawnp(pid, file, actions, attr, argv, env));
}

/*
 * system, popen and wordexp spawn through the C library's internal posix_spawn,
 * with the process's environment, which we do not change: with other
 * threads running, the shell starts with SIGBUS at its default rather
 * than with SIG_IGN put into the kernel for every thread.
 */
#define WITH_PROGRAM_SIGBUS_NO_ENV(type, call)			\
	({								\
		struct nsb_exec x_;					\
		type ret_;						\
									\
		nsb_disp_before_exec(&x_, true);			\
		ret_ = (call);						\
		finish(&x_, environ, environ);				\
		ret_;							\
	})

NSB_EXPORT int
system(const char *command)
{
	return WITH_PROGRAM_SIGBUS_NO_ENV(int, real_system(command));
}

/* Command substitution runs a shell the same way. */
NSB_EXPORT int
wordexp(const char *words, wordexp_t *we, int flags)
{
	return WITH_PROGRAM_SIGBUS_NO_ENV(int, real_wordexp(words, we, flags));
}

NSB_EXPORT FILE *
popen(const char *command, const char *mode)
{
	return WITH_PROGRAM_SIGBUS_NO_ENV(FILE *, real_popen(command, mode));
}
