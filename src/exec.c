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

NSB_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	int err;

	nsb_real_init();
	nsb_disp_before_exec();
	real_execve(path, argv, envp);
	err = errno;
	nsb_disp_after_exec();
	errno = err;
	return -1;
}

NSB_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	int err;

	nsb_real_init();
	nsb_disp_before_exec();
	real_execvpe(file, argv, envp);
	err = errno;
	nsb_disp_after_exec();
	errno = err;
	return -1;
}

NSB_EXPORT int
fexecve(int fd, char *const argv[], char *const envp[])
{
	int err;

	nsb_real_init();
	nsb_disp_before_exec();
	real_fexecve(fd, argv, envp);
	err = errno;
	nsb_disp_after_exec();
	errno = err;
	return -1;
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

/* execl(path, arg0, ..., NULL[, envp]): how many arguments follow arg0. */
static size_t
count_args(va_list ap)
{
	va_list copy;
	size_t n = 0;

	va_copy(copy, ap);
	while (va_arg(copy, char *))
		n++;
	va_end(copy);
	return n;
}

/* Fills argv (n + 2 slots) from arg0 and ap, up to and with the NULL. */
static void
fill_args(char **argv, const char *arg0, size_t n, va_list *ap)
{
	argv[0] = (char *)arg0;
	for (size_t i = 1; i <= n + 1; i++)
		argv[i] = va_arg(*ap, char *);
}

NSB_EXPORT int
execl(const char *path, const char *arg, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = count_args(ap);
	{
		char *argv[n + 2];

		fill_args(argv, arg, n, &ap);
		va_end(ap);
		return execve(path, argv, environ);
	}
}

NSB_EXPORT int
execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = count_args(ap);
	{
		char *argv[n + 2];

		fill_args(argv, arg, n, &ap);
		va_end(ap);
		return execvpe(file, argv, environ);
	}
}

NSB_EXPORT int
execle(const char *path, const char *arg, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = count_args(ap);
	{
		char *argv[n + 2];
		char **envp;

		fill_args(argv, arg, n, &ap);
		envp = va_arg(ap, char **);
		va_end(ap);
		return execve(path, argv, envp);
	}
}

NSB_EXPORT int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
	    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	int ret;

	nsb_real_init();
	nsb_disp_before_exec();
	ret = real_posix_spawn(pid, path, actions, attr, argv, envp);
	nsb_disp_after_exec();
	return ret;
}

NSB_EXPORT int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
	     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	int ret;

	nsb_real_init();
	nsb_disp_before_exec();
	ret = real_posix_spawnp(pid, file, actions, attr, argv, envp);
	nsb_disp_after_exec();
	return ret;
}
