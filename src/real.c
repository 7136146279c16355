/* SPDX-License-Identifier: MIT */
/*
 * real.c - every dlsym(RTLD_NEXT) lookup of the library, in one place.
 *
 * Each real function is looked up on its first use, never at start-up: a
 * process that calls none of them (most short ones: /bin/true, a shell's
 * children) pays nothing for them (SPEC §9).  But dlsym() takes the
 * dynamic loader's lock, which a thread stopped by a garbage collector
 * may hold (inside dlopen or dlsym): so before a second thread can exist,
 * every one is looked up at once (nsb_real_find_all), and from then on
 * none of the library's calls waits for the loader (SPEC §5 "Progress").
 *
 * The check that a lookup has not found our own function is two
 * comparisons against the bounds of our loaded image, which the linker
 * provides: dladdr() would scan a whole symbol table per call, and that
 * was a third of the start-up time of a short process.
 *
 * The mapping calls must work before our constructor has run (another
 * preload's initialisation may map memory: ASan's does, from
 * .preinit_array) and while dlsym() itself is allocating (malloc may call
 * mmap, which lands in our mmap, which needs the real mmap): then they go
 * straight to the kernel with syscall(), which is what glibc's own
 * wrappers do on the 64-bit targets we support.
 *
 * Signal context: no path a handler can reach depends on a lookup made
 * lazily (issue 21 item 6).  The mapping calls fall back to the kernel;
 * nsb_sys_sigmask always asks the kernel (what glibc's pthread_sigmask
 * does, its two signals kept out); and every real function marked
 * `handler` below - the library's handler's, and those of the interposed
 * calls a program's handler may make (the async-signal-safe ones, and
 * the jumps out) - is looked up before any handler can run: by the first
 * nsb_sys_sigaction() (the library's handler is installed through it),
 * and by every shim that installs a program's handler
 * (nsb_real_handler_fns), before it installs it.  A handler the program
 * installs behind the library's back (a raw system call) may still make
 * a first lookup; one that interrupts a lookup of its own thread then
 * finds `looking_up` set, which the compiler now keeps (a signal fence
 * on each side of dlsym): the mapping calls take the kernel then, and
 * any other call waits for nothing but the lookup it makes itself.
 * Threads may race to look up the same function: each gets the same
 * answer, and stores it.
 */
#include <gnu/libc-version.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

static const struct {
	const char *name;
	bool mandatory;
	bool handler;		/* reachable from a handler: see the top */
} wanted[NSB_REAL_COUNT] = {
	[NSB_REAL_MMAP] = { "mmap", true, true },
	[NSB_REAL_MUNMAP] = { "munmap", true, true },
	[NSB_REAL_MREMAP] = { "mremap", true, true },
	[NSB_REAL_MPROTECT] = { "mprotect", true, true },
	[NSB_REAL_PKEY_MPROTECT] = { "pkey_mprotect", false, true },
	[NSB_REAL_SIGACTION] = { "sigaction", true, true },
	[NSB_REAL_PTHREAD_SIGMASK] = { "pthread_sigmask", true, false },
	[NSB_REAL_SIGPROCMASK] = { "sigprocmask", true, true },
	[NSB_REAL_SIGPENDING] = { "sigpending", true, true },
	[NSB_REAL_SIGSUSPEND] = { "sigsuspend", true, true },
	[NSB_REAL_PTHREAD_CREATE] = { "pthread_create", true, false },
	[NSB_REAL_EXECVE] = { "execve", true, true },
	[NSB_REAL_EXECVPE] = { "execvpe", true, true },
	[NSB_REAL_FEXECVE] = { "fexecve", true, true },
	[NSB_REAL_POSIX_SPAWN] = { "posix_spawn", true, true },
	[NSB_REAL_POSIX_SPAWNP] = { "posix_spawnp", true, true },
	[NSB_REAL_SIGNAL] = { "signal", true, true },
	[NSB_REAL_SIGSET] = { "sigset", true, true },
	[NSB_REAL_SYSV_SIGNAL] = { "sysv_signal", true, true },
	[NSB_REAL_SIGINTERRUPT] = { "siginterrupt", true, true },
	[NSB_REAL_SIGHOLD] = { "sighold", true, true },
	[NSB_REAL_SIGRELSE] = { "sigrelse", true, true },
	[NSB_REAL_SIGIGNORE] = { "sigignore", true, true },
	[NSB_REAL_LONGJMP] = { "longjmp", true, true },
	[NSB_REAL_SIGLONGJMP] = { "siglongjmp", true, true },
	[NSB_REAL__LONGJMP] = { "_longjmp", true, true },
	[NSB_REAL___LONGJMP_CHK] = { "__longjmp_chk", false, true },
	[NSB_REAL_EXECVEAT] = { "execveat", false, true },
	[NSB_REAL_SYSTEM] = { "system", true, false },
	[NSB_REAL_POPEN] = { "popen", true, false },
	[NSB_REAL_WORDEXP] = { "wordexp", true, false },
	[NSB_REAL_TIMER_CREATE] = { "timer_create", true, false },
	[NSB_REAL_TIMER_DELETE] = { "timer_delete", true, false },
	[NSB_REAL_MQ_NOTIFY] = { "mq_notify", true, false },
	[NSB_REAL_CLOSE] = { "close", true, true },
	[NSB_REAL_DUP2] = { "dup2", true, true },
	[NSB_REAL_DUP3] = { "dup3", true, true },
	[NSB_REAL_CLOSE_RANGE] = { "close_range", false, false },
	[NSB_REAL_CLOSEFROM] = { "closefrom", false, false },
	[NSB_REAL_PAUSE] = { "pause", true, true },
	[NSB_REAL_NANOSLEEP] = { "nanosleep", true, true },
	[NSB_REAL_CLOCK_NANOSLEEP] = { "clock_nanosleep", true, true },
	[NSB_REAL_POLL] = { "poll", true, true },
	[NSB_REAL_PPOLL] = { "ppoll", true, true },
	[NSB_REAL_SELECT] = { "select", true, true },
	[NSB_REAL_PSELECT] = { "pselect", true, true },
	[NSB_REAL_EPOLL_WAIT] = { "epoll_wait", true, false },
	[NSB_REAL_EPOLL_PWAIT] = { "epoll_pwait", true, false },
	[NSB_REAL_EPOLL_PWAIT2] = { "epoll_pwait2", false, false },
	[NSB_REAL_SETCONTEXT] = { "setcontext", true, true },
	[NSB_REAL_SWAPCONTEXT] = { "swapcontext", true, true },
	[NSB_REAL___SIGSETJMP] = { "__sigsetjmp", true, true },
	[NSB_REAL_PIDFD_SPAWN] = { "pidfd_spawn", false, false },
	[NSB_REAL_PIDFD_SPAWNP] = { "pidfd_spawnp", false, false },
	[NSB_REAL_MADVISE] = { "madvise", true, false },
	[NSB_REAL_PROCESS_MADVISE] = { "process_madvise", false, false },
	[NSB_REAL_RECVMSG] = { "recvmsg", true, true },
	[NSB_REAL_RECVMMSG] = { "recvmmsg", true, true },
	[NSB_REAL_IOCTL] = { "ioctl", true, true },
	[NSB_REAL_FCLOSE] = { "fclose", true, false },
	[NSB_REAL_FREOPEN] = { "freopen", true, false },
	[NSB_REAL_FREOPEN64] = { "freopen64", true, false },
	[NSB_REAL_PTHREAD_SIGQUEUE] = { "pthread_sigqueue", true, true },
	[NSB_REAL_SIGTIMEDWAIT] = { "sigtimedwait", true, false },
	[NSB_REAL_SIGWAIT] = { "sigwait", true, false },
	[NSB_REAL_GETCONTEXT] = { "getcontext", true, true },
	[NSB_REAL_CLONE] = { "clone", true, false },
	[NSB_REAL__FORK] = { "_Fork", false, true },
};

/*
 * NULL: not looked up yet, or an optional function that is absent.
 *
 * In .data, not .bss: the loader has already written that page (its
 * relocations), while the first touch of a .bss page is one more page
 * fault for every process that starts, whether or not it calls anything.
 */
#define ON_A_WRITTEN_PAGE __attribute__((section(".data")))
ON_A_WRITTEN_PAGE _Atomic nsb_any_fn nsb_real_fns[NSB_REAL_COUNT];
ON_A_WRITTEN_PAGE static atomic_bool absent[NSB_REAL_COUNT];
ON_A_WRITTEN_PAGE static atomic_bool handler_fns_found;
ON_A_WRITTEN_PAGE static atomic_bool all_found;
ON_A_WRITTEN_PAGE static atomic_bool started;

/* This thread is inside dlsym: whatever it calls from there must not look up. */
static __thread bool looking_up __attribute__((tls_model("initial-exec")));

/* The bounds of our own loaded image: the ELF header starts the first
 * segment and _end ends the last (both defined by GNU ld, gold, lld and
 * mold).  Hidden, so that they are ours and cost no relocation. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

static void __attribute__((noreturn))
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

void
nsb_real_start(void)
{
	atomic_store_explicit(&started, true, memory_order_release);
}

/* fn, or NULL (with must, a mandatory one that is missing is fatal). */
static nsb_any_fn
lookup(enum nsb_real_fn fn, bool must)
{
	nsb_any_fn f;
	void *p;
	int saved = errno;

	if (atomic_load_explicit(&absent[fn], memory_order_relaxed))
		return NULL;
	/* The fences keep both stores: a handler of this thread reads the
	 * flag (without them the first store was dead code to the compiler,
	 * the address of a static __thread never escaping). */
	looking_up = true;
	atomic_signal_fence(memory_order_seq_cst);
	p = dlsym(RTLD_NEXT, wanted[fn].name);
	atomic_signal_fence(memory_order_seq_cst);
	looking_up = false;
	errno = saved;
	if (!p) {
		if (wanted[fn].mandatory) {
			if (must)
				die("cannot find the real", wanted[fn].name);
			return NULL;
		}
		atomic_store_explicit(&absent[fn], true, memory_order_relaxed);
		return NULL;
	}
	/* Our own function would call itself forever. */
	if ((const char *)p >= __ehdr_start && (const char *)p < _end)
		die("found itself looking for the real", wanted[fn].name);
	/* dlsym gives an object pointer; POSIX says it converts this way. */
	memcpy(&f, &p, sizeof(f));
	atomic_store_explicit(&nsb_real_fns[fn], f, memory_order_release);
	return f;
}

/*
 * Looks fn up (NULL for an optional function that the C library lacks).
 * Never NULL for a mandatory one: the callers of nsb_real() have no
 * fallback.  Those that do (the mapping calls) ask known_fn() first.
 */
nsb_any_fn
nsb_real_find(enum nsb_real_fn fn)
{
	return lookup(fn, true);
}

/*
 * Every real function, once: called by the first pthread_create (the
 * process has one thread: nobody can hold the loader's lock stopped) and
 * by our constructor when threads already run (dlopen holds the lock for
 * this thread then).  About a microsecond per function, in a process that
 * starts threads anyway.  A mandatory function the C library lacks is
 * left to its first use, which reports it, as before.
 */
void
nsb_real_find_all(void)
{
	if (atomic_load_explicit(&all_found, memory_order_acquire) || looking_up)
		return;
	for (int fn = 0; fn < NSB_REAL_COUNT; fn++)
		if (!atomic_load_explicit(&nsb_real_fns[fn], memory_order_acquire))
			(void)lookup((enum nsb_real_fn)fn, false);
	atomic_store_explicit(&all_found, true, memory_order_release);
}

/*
 * The real function fn, or NULL when it is not known yet and must not be
 * looked up now: before our constructor (another library's initialisation,
 * or ours) or from inside dlsym.  Then the caller asks the kernel itself.
 */
static inline nsb_any_fn
known_fn(enum nsb_real_fn fn)
{
	nsb_any_fn f = atomic_load_explicit(&nsb_real_fns[fn], memory_order_acquire);

	if (__builtin_expect(f != NULL, 1))
		return f;
	if (!atomic_load_explicit(&started, memory_order_acquire) || looking_up)
		return NULL;
	return nsb_real_find(fn);
}

/* Is the running C library glibc MAJOR.MINOR or later?  (For
 * NSB_EXPORT_SINCE's resolvers: gnu_get_libc_version returns a constant
 * string, no system call.) */
bool
nsb_libc_at_least(unsigned major, unsigned minor)
{
	const char *v = gnu_get_libc_version();
	unsigned long ma = 0, mi = 0;

	for (; *v >= '0' && *v <= '9'; v++)
		ma = ma * 10 + (unsigned long)(*v - '0');
	if (*v++ != '.')
		return false;
	for (; *v >= '0' && *v <= '9'; v++)
		mi = mi * 10 + (unsigned long)(*v - '0');
	return ma > major || (ma == major && mi >= minor);
}

/* The function fn once known (the usual answer), read inline: the three
 * calls every mapping pair makes then jump straight to it, with no frame
 * for the rest (known_fn, the system call), which is out of line. */
static inline nsb_any_fn
found_fn(enum nsb_real_fn fn)
{
	return atomic_load_explicit(&nsb_real_fns[fn], memory_order_acquire);
}

/* The raw fallbacks return like libc: -1/MAP_FAILED with errno. */
static __attribute__((noinline)) void *
sys_mmap_known(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	nsb_any_fn f = known_fn(NSB_REAL_MMAP);

	if (f)
		return ((void *(*)(void *, size_t, int, int, int, off_t))f)(addr, len, prot,
									     flags, fd, off);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

void *
nsb_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	nsb_any_fn f = found_fn(NSB_REAL_MMAP);

	if (__builtin_expect(f != NULL, 1))
		return ((void *(*)(void *, size_t, int, int, int, off_t))f)(addr, len, prot,
									     flags, fd, off);
	return sys_mmap_known(addr, len, prot, flags, fd, off);
}

static __attribute__((noinline)) int
sys_munmap_known(void *addr, size_t len)
{
	nsb_any_fn f = known_fn(NSB_REAL_MUNMAP);

	if (f)
		return ((int (*)(void *, size_t))f)(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

int
nsb_sys_munmap(void *addr, size_t len)
{
	nsb_any_fn f = found_fn(NSB_REAL_MUNMAP);

	if (__builtin_expect(f != NULL, 1))
		return ((int (*)(void *, size_t))f)(addr, len);
	return sys_munmap_known(addr, len);
}

void *
nsb_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
	nsb_any_fn f = known_fn(NSB_REAL_MREMAP);

	if (f)
		return ((void *(*)(void *, size_t, size_t, int, ...))f)(old, old_len, new_len,
									flags, new_addr);
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

static __attribute__((noinline)) int
sys_mprotect_known(void *addr, size_t len, int prot)
{
	nsb_any_fn f = known_fn(NSB_REAL_MPROTECT);

	if (f)
		return ((int (*)(void *, size_t, int))f)(addr, len, prot);
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

int
nsb_sys_mprotect(void *addr, size_t len, int prot)
{
	nsb_any_fn f = found_fn(NSB_REAL_MPROTECT);

	if (__builtin_expect(f != NULL, 1))
		return ((int (*)(void *, size_t, int))f)(addr, len, prot);
	return sys_mprotect_known(addr, len, prot);
}

int
nsb_sys_pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	nsb_any_fn f = known_fn(NSB_REAL_PKEY_MPROTECT);

	if (f)
		return ((int (*)(void *, size_t, int, int))f)(addr, len, prot, pkey);
#ifdef SYS_pkey_mprotect
	return (int)syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* Every function a handler may reach, so that no handler looks one up.
 * Mandatory ones the C library lacks are left to their first use, which
 * reports them. */
void
nsb_real_handler_fns(void)
{
	if (atomic_load_explicit(&handler_fns_found, memory_order_acquire) || looking_up)
		return;
	for (int fn = 0; fn < NSB_REAL_COUNT; fn++)
		if (wanted[fn].handler && !atomic_load_explicit(&nsb_real_fns[fn], memory_order_acquire))
			(void)lookup((enum nsb_real_fn)fn, false);
	atomic_store_explicit(&handler_fns_found, true, memory_order_release);
}

int
nsb_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	nsb_any_fn f;

	/* Before a handler can run: the library's, or the program's.  Not
	 * for a signal glibc refuses (EINVAL) before it reads act: 0, past
	 * 64, and its own two (32 and 33), whose act may be a bad pointer. */
	if (act && sig > 0 && sig < NSIG && sig != 32 && sig != 33 &&
	    act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN)
		nsb_real_handler_fns();
	f = nsb_real(NSB_REAL_SIGACTION);
	if (!f)
		die("called from inside dlsym, cannot find", "sigaction");
	return ((int (*)(int, const struct sigaction *, struct sigaction *))f)(sig, act, old);
}

/*
 * glibc's pthread_sigmask, straight to the kernel: its own two signals
 * (SIGCANCEL and SIGSETXID, 32 and 33) never get blocked.  sigdelset()
 * refuses to touch them, hence the bits.
 */
static int
kernel_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	struct nsb_kset k;

	if (!set)
		return (int)syscall(SYS_rt_sigprocmask, how, NULL, old, sizeof(k));
	memcpy(&k, set, sizeof(k));
	return nsb_sys_sigmask_kernel(how, &k, old);
}

/* The kernel's part of a mask, glibc's two signals kept out: the only
 * bytes the kernel reads (_NSIG / 8), so no 128-byte sigset_t on the
 * stack of a handler that may run on a small alternate stack. */
int
nsb_sys_sigmask_kernel(int how, struct nsb_kset *set, sigset_t *old)
{
	nsb_kset_del(set, 32);
	nsb_kset_del(set, 33);
	return (int)syscall(SYS_rt_sigprocmask, how, set, old, sizeof(*set));
}

/* Always the kernel, as glibc's pthread_sigmask does it: no lookup, in a
 * call that handlers make all the time (and the library's locks too). */
int
nsb_sys_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return kernel_sigmask(how, set, old);
}
