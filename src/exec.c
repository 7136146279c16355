/* SPDX-License-Identifier: MIT */
/*
 * exec.c - the exec family and posix_spawn.
 *
 * exec resets handled signals to SIG_DFL but keeps ignored ones and the
 * mask.  Since the kernel holds our handler and never a blocked SIGBUS,
 * the new program would lose the program's SIG_IGN and blocked SIGBUS:
 * so, just before, the kernel is given the program's own SIGBUS state,
 * and given ours back if the call returns.  glibc's execvp, execl and
 * friends call execve internally, not through the PLT, so each is here.
 *
 * Not used in signal context.
 */
#include <errno.h>
#include <stdarg.h>
#include <spawn.h>
#include <unistd.h>

#include "nsb.h"

extern char **environ;

/* Runs an exec-like call with the program's own SIGBUS state in the
 * kernel; keeps the call's result and errno. */
#define WITH_PROGRAM_SIGBUS(call)					\
	({								\
		int ret_, err_;						\
									\
		nsb_real_init();					\
		nsb_disp_before_exec();					\
		ret_ = (call);						\
		err_ = errno;						\
		nsb_disp_after_exec();					\
		errno = err_;						\
		ret_;							\
	})

NSB_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(real_execve(path, argv, envp));
}

NSB_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(real_execvpe(file, argv, envp));
}

NSB_EXPORT int
fexecve(int fd, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(real_fexecve(fd, argv, envp));
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

NSB_EXPORT int
execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = exec_list(LIST_PATH, path, arg, ap);
	va_end(ap);
	return ret;
}

NSB_EXPORT int
execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = exec_list(LIST_SEARCH, file, arg, ap);
	va_end(ap);
	return ret;
}

NSB_EXPORT int
execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = exec_list(LIST_ENV, path, arg, ap);
	va_end(ap);
	return ret;
}

/* posix_spawn returns an error number and leaves errno alone. */
NSB_EXPORT int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
	    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(real_posix_spawn(pid, path, actions, attr, argv, envp));
}

NSB_EXPORT int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
	     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(real_posix_spawnp(pid, file, actions, attr, argv, envp));
}
