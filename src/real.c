/* SPDX-License-Identifier: MIT */
/*
 * real.c - every dlsym(RTLD_NEXT) lookup of the library, in one place.
 *
 * The interposed calls must work before our constructor has run and while
 * dlsym() itself is allocating (malloc may call mmap, which lands in our
 * mmap, which needs real_mmap): until the lookups are done, the mapping
 * calls go straight to the kernel with syscall(), which is what glibc's
 * own wrappers do on the 64-bit targets we support.
 *
 * Signal context: nsb_sys_mmap, nsb_sys_pkey_mprotect, nsb_sys_sigaction
 * and nsb_sys_sigmask run in the SIGBUS handler.  They only read pointers
 * that were set before the handler could be installed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);
static void *(*real_mremap)(void *, size_t, size_t, int, ...);
static int (*real_mprotect)(void *, size_t, int);
static int (*real_pkey_mprotect)(void *, size_t, int, int);
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);

int (*real_sigprocmask)(int, const sigset_t *, sigset_t *);
int (*real_sigpending)(sigset_t *);
int (*real_sigsuspend)(const sigset_t *);
int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
int (*real_execve)(const char *, char *const[], char *const[]);
int (*real_execvpe)(const char *, char *const[], char *const[]);
int (*real_fexecve)(int, char *const[], char *const[]);
int (*real_execveat)(int, const char *, char *const[], char *const[], int);
int (*real_system)(const char *);
void *(*real_popen)(const char *, const char *);
int (*real_timer_create)(clockid_t, struct sigevent *, void *);
int (*real_timer_delete)(void *);
int (*real_mq_notify)(int, const struct sigevent *);
int (*real_close)(int);
int (*real_dup2)(int, int);
int (*real_dup3)(int, int, int);
int (*real_close_range)(unsigned, unsigned, int);
void (*real_closefrom)(int);
int (*real_posix_spawn)(pid_t *, const char *, const void *, const void *,
			char *const[], char *const[]);
int (*real_posix_spawnp)(pid_t *, const char *, const void *, const void *,
			 char *const[], char *const[]);
sighandler_t (*real_signal)(int, sighandler_t);
sighandler_t (*real_sigset)(int, sighandler_t);
sighandler_t (*real_sysv_signal)(int, sighandler_t);
int (*real_siginterrupt)(int, int);
int (*real_sighold)(int);
int (*real_sigrelse)(int);
int (*real_sigignore)(int);
nsb_jump_fn real_longjmp;
nsb_jump_fn real_siglongjmp;
nsb_jump_fn real__longjmp;
nsb_jump_fn real___longjmp_chk;

enum { INIT_NONE, INIT_BUSY, INIT_DONE };
static atomic_int init_state;

static void
die(const char *what, const char *name)
{
	char msg[256];
	int n;

	n = snprintf(msg, sizeof(msg), "nosigbus: %s %s; "
		     "remove libnosigbus from LD_PRELOAD\n", what, name);
	if (n > 0)
		(void)!write(STDERR_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	abort();
}

static void *
lookup(const char *name, bool mandatory)
{
	Dl_info self, found;
	void *p;

	p = dlsym(RTLD_NEXT, name);
	if (!p) {
		if (mandatory)
			die("cannot find the real", name);
		return NULL;
	}
	/* Another copy of ourselves further down the chain would loop. */
	if (dladdr((void *)nsb_real_init, &self) && dladdr(p, &found) &&
	    self.dli_fbase == found.dli_fbase)
		die("found itself looking for the real", name);
	return p;
}

/* For a C library older than 2.34, which has not these. */
static int
fallback_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	return (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
}

static int
fallback_close_range(unsigned first, unsigned last, int flags)
{
	return (int)syscall(SYS_close_range, first, last, flags);
}

static void
fallback_closefrom(int lowfd)
{
	(void)syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0);
}

#define LOOKUP(var, name, mandatory) \
	(*(void **)&(var) = lookup(name, mandatory))

void
nsb_real_init(void)
{
	int expected = INIT_NONE;

	if (atomic_load_explicit(&init_state, memory_order_acquire) == INIT_DONE)
		return;
	/* Re-entered from inside dlsym, or racing another thread: the
	 * callers fall back to syscall() until we are done. */
	if (!atomic_compare_exchange_strong(&init_state, &expected, INIT_BUSY))
		return;

	LOOKUP(real_mmap, "mmap", true);
	LOOKUP(real_munmap, "munmap", true);
	LOOKUP(real_mremap, "mremap", true);
	LOOKUP(real_mprotect, "mprotect", true);
	LOOKUP(real_pkey_mprotect, "pkey_mprotect", false);
	LOOKUP(real_sigaction, "sigaction", true);
	LOOKUP(real_pthread_sigmask, "pthread_sigmask", true);
	LOOKUP(real_sigprocmask, "sigprocmask", true);
	LOOKUP(real_sigpending, "sigpending", true);
	LOOKUP(real_sigsuspend, "sigsuspend", true);
	LOOKUP(real_pthread_create, "pthread_create", true);
	LOOKUP(real_execve, "execve", true);
	LOOKUP(real_execvpe, "execvpe", true);
	LOOKUP(real_fexecve, "fexecve", true);
	LOOKUP(real_execveat, "execveat", false);
	LOOKUP(real_system, "system", true);
	LOOKUP(real_popen, "popen", true);
	LOOKUP(real_timer_create, "timer_create", true);
	LOOKUP(real_timer_delete, "timer_delete", true);
	LOOKUP(real_mq_notify, "mq_notify", true);
	LOOKUP(real_close, "close", true);
	LOOKUP(real_dup2, "dup2", true);
	LOOKUP(real_dup3, "dup3", true);
	LOOKUP(real_close_range, "close_range", false);
	LOOKUP(real_closefrom, "closefrom", false);
	if (!real_execveat)
		real_execveat = fallback_execveat;
	if (!real_close_range)
		real_close_range = fallback_close_range;
	if (!real_closefrom)
		real_closefrom = fallback_closefrom;
	LOOKUP(real_posix_spawn, "posix_spawn", true);
	LOOKUP(real_posix_spawnp, "posix_spawnp", true);
	LOOKUP(real_signal, "signal", true);
	LOOKUP(real_sigset, "sigset", true);
	LOOKUP(real_sysv_signal, "sysv_signal", true);
	LOOKUP(real_siginterrupt, "siginterrupt", true);
	LOOKUP(real_sighold, "sighold", true);
	LOOKUP(real_sigrelse, "sigrelse", true);
	LOOKUP(real_sigignore, "sigignore", true);
	LOOKUP(real_longjmp, "longjmp", true);
	LOOKUP(real_siglongjmp, "siglongjmp", true);
	LOOKUP(real__longjmp, "_longjmp", true);
	LOOKUP(real___longjmp_chk, "__longjmp_chk", false);

	atomic_store_explicit(&init_state, INIT_DONE, memory_order_release);
}

static inline bool
ready(void)
{
	if (__builtin_expect(atomic_load_explicit(&init_state, memory_order_acquire) == INIT_DONE, 1))
		return true;
	nsb_real_init();
	return atomic_load_explicit(&init_state, memory_order_acquire) == INIT_DONE;
}

/* The raw fallbacks return like libc: -1/MAP_FAILED with errno. */
void *
nsb_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (ready())
		return real_mmap(addr, len, prot, flags, fd, off);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int
nsb_sys_munmap(void *addr, size_t len)
{
	if (ready())
		return real_munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

void *
nsb_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
	if (ready())
		return real_mremap(old, old_len, new_len, flags, new_addr);
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

int
nsb_sys_mprotect(void *addr, size_t len, int prot)
{
	if (ready())
		return real_mprotect(addr, len, prot);
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

int
nsb_sys_pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	if (ready() && real_pkey_mprotect)
		return real_pkey_mprotect(addr, len, prot, pkey);
#ifdef SYS_pkey_mprotect
	return (int)syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
#else
	errno = ENOSYS;
	return -1;
#endif
}

int
nsb_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!ready())
		die("called before it could find", "sigaction");
	return real_sigaction(sig, act, old);
}

int
nsb_sys_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	int err;

	if (!ready())
		die("called before it could find", "pthread_sigmask");
	err = real_pthread_sigmask(how, set, old);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}
