/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces of libnosigbus.  Nothing here is exported.
 *
 * Signal context: functions marked [signal-safe] may be called from a
 * signal handler (the SIGBUS handler, or the trampoline that runs the
 * program's handlers); everything else may not.
 */
#ifndef NSB_H
#define NSB_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define NSB_INTERNAL __attribute__((visibility("hidden")))
#define NSB_EXPORT __attribute__((visibility("default")))
/*
 * An interposed name that glibc gained in MAJOR.MINOR (SPEC §12 "Names":
 * the library exports no name that the running glibc lacks): a GNU
 * indirect function whose resolver gives impl where the running glibc is
 * that recent, and nothing before, so that dlsym finds nothing there,
 * whatever glibc the library was built against.  The resolver runs while
 * the loader relocates us, after the C library (real.c).
 */
#define NSB_EXPORT_SINCE(major, minor, name, impl)				\
	__attribute__((used)) static __typeof__(impl) *resolve_##name(void)	\
	{									\
		return nsb_libc_at_least(major, minor) ? impl : NULL;		\
	}									\
	NSB_EXPORT __typeof__(impl) name __attribute__((ifunc("resolve_" #name)))
bool nsb_libc_at_least(unsigned major, unsigned minor);

/* ---- real.c: the next definitions of what we interpose ---------------- */

/*
 * Every function is looked up with dlsym(RTLD_NEXT) on its first use, not
 * at start-up: loading the library must cost what loading an empty one
 * costs (SPEC §9).  A missing mandatory function, or a lookup that finds
 * the library itself, aborts with one line on stderr, at that first use.
 *
 * The mapping calls (nsb_sys_mmap ... nsb_sys_pkey_mprotect) go straight
 * to the kernel with syscall() when the real function is not known yet
 * and cannot be looked up now: before our constructor has run, or
 * re-entered from inside dlsym (which may allocate, and so map memory).
 *
 * Signal context: nsb_real_handler_fns() looks up every function a
 * handler can reach (the library's, and the interposed calls a program's
 * handler may make); nsb_sys_sigaction() calls it before it installs
 * anything, and so does every shim that installs a program's handler.  No
 * handler runs a lookup then (dlsym is not async-signal-safe).
 * nsb_sys_sigmask() is the system call itself.
 */
void nsb_real_start(void);	/* our constructor has run: lookups are safe */
void *nsb_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off); /* [signal-safe] */
int nsb_sys_munmap(void *addr, size_t len); /* [signal-safe] */
void *nsb_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr); /* [signal-safe] */
int nsb_sys_mprotect(void *addr, size_t len, int prot); /* [signal-safe] */
int nsb_sys_pkey_mprotect(void *addr, size_t len, int prot, int pkey); /* [signal-safe] */
int nsb_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old); /* [signal-safe] */
int nsb_sys_sigmask(int how, const sigset_t *set, sigset_t *old); /* [signal-safe] */
/* The kernel's own mask: _NSIG / 8 bytes (8 on x86_64 and aarch64). */
struct nsb_kset {
	unsigned long w[_NSIG / 8 / sizeof(unsigned long)];
};
/* [signal-safe] Signal sig's bit of a kernel mask. */
static inline void
nsb_kset_add(struct nsb_kset *set, int sig)
{
	const unsigned bits = 8 * sizeof(unsigned long);

	set->w[(unsigned)(sig - 1) / bits] |= 1ul << ((unsigned)(sig - 1) % bits);
}
static inline void
nsb_kset_del(struct nsb_kset *set, int sig)
{
	const unsigned bits = 8 * sizeof(unsigned long);

	set->w[(unsigned)(sig - 1) / bits] &= ~(1ul << ((unsigned)(sig - 1) % bits));
}
/* [signal-safe] clears glibc's two signals in *set, then sets the mask */
int nsb_sys_sigmask_kernel(int how, struct nsb_kset *set, sigset_t *old);
/* [signal-safe] madvise() without our interposition (the kernel's own). */
static inline int
nsb_sys_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

/* The other real functions, by name: real_execve(path, argv, envp) calls
 * the next execve, looking it up the first time.  Optional ones
 * (real___longjmp_chk) are NULL when the C library lacks them. */
enum nsb_real_fn {
	NSB_REAL_MMAP,
	NSB_REAL_MUNMAP,
	NSB_REAL_MREMAP,
	NSB_REAL_MPROTECT,
	NSB_REAL_PKEY_MPROTECT,
	NSB_REAL_SIGACTION,
	NSB_REAL_PTHREAD_SIGMASK,
	NSB_REAL_SIGPROCMASK,
	NSB_REAL_SIGPENDING,
	NSB_REAL_SIGSUSPEND,
	NSB_REAL_PTHREAD_CREATE,
	NSB_REAL_EXECVE,
	NSB_REAL_EXECVPE,
	NSB_REAL_FEXECVE,
	NSB_REAL_POSIX_SPAWN,
	NSB_REAL_POSIX_SPAWNP,
	NSB_REAL_SIGNAL,
	NSB_REAL_SIGSET,
	NSB_REAL_SYSV_SIGNAL,
	NSB_REAL_SIGINTERRUPT,
	NSB_REAL_SIGHOLD,
	NSB_REAL_SIGRELSE,
	NSB_REAL_SIGIGNORE,
	NSB_REAL_LONGJMP,
	NSB_REAL_SIGLONGJMP,
	NSB_REAL__LONGJMP,
	NSB_REAL___LONGJMP_CHK,
	NSB_REAL_EXECVEAT,
	NSB_REAL_SYSTEM,
	NSB_REAL_POPEN,
	NSB_REAL_WORDEXP,
	NSB_REAL_TIMER_CREATE,
	NSB_REAL_TIMER_DELETE,
	NSB_REAL_MQ_NOTIFY,
	NSB_REAL_CLOSE,
	NSB_REAL_DUP2,
	NSB_REAL_DUP3,
	NSB_REAL_CLOSE_RANGE,
	NSB_REAL_CLOSEFROM,
	NSB_REAL_PAUSE,
	NSB_REAL_NANOSLEEP,
	NSB_REAL_CLOCK_NANOSLEEP,
	NSB_REAL_POLL,
	NSB_REAL_PPOLL,
	NSB_REAL_SELECT,
	NSB_REAL_PSELECT,
	NSB_REAL_EPOLL_WAIT,
	NSB_REAL_EPOLL_PWAIT,
	NSB_REAL_EPOLL_PWAIT2,
	NSB_REAL_SETCONTEXT,
	NSB_REAL_SWAPCONTEXT,
	NSB_REAL___SIGSETJMP,
	NSB_REAL_PIDFD_SPAWN,
	NSB_REAL_PIDFD_SPAWNP,
	NSB_REAL_MADVISE,
	NSB_REAL_PROCESS_MADVISE,
	NSB_REAL_RECVMSG,
	NSB_REAL_RECVMMSG,
	NSB_REAL_IOCTL,
	NSB_REAL_FCLOSE,
	NSB_REAL_FREOPEN,
	NSB_REAL_FREOPEN64,
	NSB_REAL_PTHREAD_SIGQUEUE,
	NSB_REAL_SIGTIMEDWAIT,
	NSB_REAL_SIGWAIT,
	NSB_REAL_GETCONTEXT,
	NSB_REAL_CLONE,
	NSB_REAL__FORK,
	NSB_REAL_COUNT
};

/* Any function pointer; cast to the real type at the call. */
typedef void (*nsb_any_fn)(void);
extern NSB_INTERNAL _Atomic nsb_any_fn nsb_real_fns[NSB_REAL_COUNT];
nsb_any_fn nsb_real_find(enum nsb_real_fn fn);
/* Every one, before a second thread exists: see real.c. */
void nsb_real_find_all(void);
/* Those a handler can reach, before a handler is installed: see real.c. */
void nsb_real_handler_fns(void);

/* Not in signal context (it may call dlsym), except for the functions the
 * first nsb_sys_sigaction() has looked up. */
static inline nsb_any_fn
nsb_real(enum nsb_real_fn fn)
{
	nsb_any_fn f = atomic_load_explicit(&nsb_real_fns[fn], memory_order_acquire);

	if (__builtin_expect(f != NULL, 1))
		return f;
	return nsb_real_find(fn);
}

struct __jmp_buf_tag;
typedef void (*nsb_jump_fn)(struct __jmp_buf_tag *, int) __attribute__((noreturn));

#define real_sigprocmask \
	((int (*)(int, const sigset_t *, sigset_t *))nsb_real(NSB_REAL_SIGPROCMASK))
#define real_sigpending ((int (*)(sigset_t *))nsb_real(NSB_REAL_SIGPENDING))
#define real_sigsuspend ((int (*)(const sigset_t *))nsb_real(NSB_REAL_SIGSUSPEND))
#define real_pthread_sigqueue \
	((int (*)(pthread_t, int, const union sigval))nsb_real(NSB_REAL_PTHREAD_SIGQUEUE))
#define real_clone \
	((int (*)(int (*)(void *), void *, int, void *, pid_t *, void *, pid_t *)) \
	 nsb_real(NSB_REAL_CLONE))
#define real_pthread_create \
	((int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)) \
	 nsb_real(NSB_REAL_PTHREAD_CREATE))
#define real_execve \
	((int (*)(const char *, char *const[], char *const[]))nsb_real(NSB_REAL_EXECVE))
#define real_execvpe \
	((int (*)(const char *, char *const[], char *const[]))nsb_real(NSB_REAL_EXECVPE))
#define real_fexecve ((int (*)(int, char *const[], char *const[]))nsb_real(NSB_REAL_FEXECVE))
#define real_posix_spawn \
	((int (*)(pid_t *, const char *, const void *, const void *, char *const[], \
		  char *const[]))nsb_real(NSB_REAL_POSIX_SPAWN))
#define real_posix_spawnp \
	((int (*)(pid_t *, const char *, const void *, const void *, char *const[], \
		  char *const[]))nsb_real(NSB_REAL_POSIX_SPAWNP))
#define real_signal ((sighandler_t (*)(int, sighandler_t))nsb_real(NSB_REAL_SIGNAL))
#define real_sigset ((sighandler_t (*)(int, sighandler_t))nsb_real(NSB_REAL_SIGSET))
#define real_sysv_signal ((sighandler_t (*)(int, sighandler_t))nsb_real(NSB_REAL_SYSV_SIGNAL))
#define real_siginterrupt ((int (*)(int, int))nsb_real(NSB_REAL_SIGINTERRUPT))
#define real_sighold ((int (*)(int))nsb_real(NSB_REAL_SIGHOLD))
#define real_sigrelse ((int (*)(int))nsb_real(NSB_REAL_SIGRELSE))
#define real_sigignore ((int (*)(int))nsb_real(NSB_REAL_SIGIGNORE))
#define real_longjmp ((nsb_jump_fn)nsb_real(NSB_REAL_LONGJMP))
#define real_siglongjmp ((nsb_jump_fn)nsb_real(NSB_REAL_SIGLONGJMP))
#define real__longjmp ((nsb_jump_fn)nsb_real(NSB_REAL__LONGJMP))
#define real___longjmp_chk ((nsb_jump_fn)nsb_real(NSB_REAL___LONGJMP_CHK))
/* Optional (glibc 2.34 and later): NULL, and a system call instead. */
#define real_execveat \
	((int (*)(int, const char *, char *const[], char *const[], int))nsb_real(NSB_REAL_EXECVEAT))
#define real_system ((int (*)(const char *))nsb_real(NSB_REAL_SYSTEM))
#define real_popen ((void *(*)(const char *, const char *))nsb_real(NSB_REAL_POPEN))
#define real_wordexp ((int (*)(const char *, void *, int))nsb_real(NSB_REAL_WORDEXP))
#define real_timer_create \
	((int (*)(clockid_t, struct sigevent *, void *))nsb_real(NSB_REAL_TIMER_CREATE))
#define real_timer_delete ((int (*)(void *))nsb_real(NSB_REAL_TIMER_DELETE))
#define real_mq_notify ((int (*)(int, const struct sigevent *))nsb_real(NSB_REAL_MQ_NOTIFY))
#define real_close ((int (*)(int))nsb_real(NSB_REAL_CLOSE))
#define real_dup2 ((int (*)(int, int))nsb_real(NSB_REAL_DUP2))
#define real_dup3 ((int (*)(int, int, int))nsb_real(NSB_REAL_DUP3))
#define real_close_range ((int (*)(unsigned, unsigned, int))nsb_real(NSB_REAL_CLOSE_RANGE))
#define real_closefrom ((void (*)(int))nsb_real(NSB_REAL_CLOSEFROM))
#define real_fclose ((int (*)(void *))nsb_real(NSB_REAL_FCLOSE))
#define real_freopen ((void *(*)(const char *, const char *, void *))nsb_real(NSB_REAL_FREOPEN))
#define real_freopen64 \
	((void *(*)(const char *, const char *, void *))nsb_real(NSB_REAL_FREOPEN64))
struct msghdr;
struct mmsghdr;
#define real_recvmsg ((ssize_t (*)(int, struct msghdr *, int))nsb_real(NSB_REAL_RECVMSG))
#define real_recvmmsg \
	((int (*)(int, struct mmsghdr *, unsigned, int, struct timespec *))nsb_real(NSB_REAL_RECVMMSG))
#define real_ioctl ((int (*)(int, unsigned long, void *))nsb_real(NSB_REAL_IOCTL))
struct pollfd;
struct epoll_event;
struct timeval;
#define real_pause ((int (*)(void))nsb_real(NSB_REAL_PAUSE))
#define real_sigtimedwait \
	((int (*)(const sigset_t *, siginfo_t *, const struct timespec *))nsb_real(NSB_REAL_SIGTIMEDWAIT))
#define real_sigwait ((int (*)(const sigset_t *, int *))nsb_real(NSB_REAL_SIGWAIT))
#define real_setcontext ((int (*)(const void *))nsb_real(NSB_REAL_SETCONTEXT))
#define real_swapcontext ((int (*)(void *, const void *))nsb_real(NSB_REAL_SWAPCONTEXT))
#define real_madvise ((int (*)(void *, size_t, int))nsb_real(NSB_REAL_MADVISE))
/* Optional (glibc 2.36 and later): NULL, and a system call instead. */
#define real_process_madvise \
	((ssize_t (*)(int, const void *, size_t, int, unsigned))nsb_real(NSB_REAL_PROCESS_MADVISE))
#define real_nanosleep \
	((int (*)(const struct timespec *, struct timespec *))nsb_real(NSB_REAL_NANOSLEEP))
#define real_clock_nanosleep \
	((int (*)(clockid_t, int, const struct timespec *, struct timespec *)) \
	 nsb_real(NSB_REAL_CLOCK_NANOSLEEP))
#define real_poll ((int (*)(struct pollfd *, unsigned long, int))nsb_real(NSB_REAL_POLL))
#define real_ppoll \
	((int (*)(struct pollfd *, unsigned long, const struct timespec *, const sigset_t *)) \
	 nsb_real(NSB_REAL_PPOLL))
#define real_select \
	((int (*)(int, fd_set *, fd_set *, fd_set *, struct timeval *))nsb_real(NSB_REAL_SELECT))
#define real_pselect \
	((int (*)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *)) \
	 nsb_real(NSB_REAL_PSELECT))
#define real_epoll_wait \
	((int (*)(int, struct epoll_event *, int, int))nsb_real(NSB_REAL_EPOLL_WAIT))
#define real_epoll_pwait \
	((int (*)(int, struct epoll_event *, int, int, const sigset_t *))nsb_real(NSB_REAL_EPOLL_PWAIT))
#define real_epoll_pwait2 \
	((int (*)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *)) \
	 nsb_real(NSB_REAL_EPOLL_PWAIT2))

/* ---- config.c: NOSIGBUS_* read once ------------------------------------ */

enum nsb_policy { NSB_POLICY_FLAG, NSB_POLICY_SHM, NSB_POLICY_FILES };
enum nsb_fill { NSB_FILL_PAGE, NSB_FILL_RANGE, NSB_FILL_AUTO };
/* What a SIGBUS inside the file's size (an I/O error) gets: the program
 * (pass), zeros (zero), or zeros in a file another process handed over
 * and the program in the rest (peer: rescue.c). */
enum nsb_errors { NSB_ERRORS_PASS, NSB_ERRORS_ZERO, NSB_ERRORS_PEER };

/* The defaults, also used before the constructor has read the variables. */
#define NSB_DEFAULT_POLICY	NSB_POLICY_SHM
#define NSB_DEFAULT_FILL	NSB_FILL_PAGE
#define NSB_DEFAULT_ERRORS	NSB_ERRORS_PEER

enum nsb_log { NSB_LOG_OFF, NSB_LOG_MAPPINGS, NSB_LOG_PAGES };

struct nsb_config {
	enum nsb_policy policy;
	enum nsb_fill fill;
	enum nsb_errors errors;
	bool strict;
	enum nsb_log log;	/* 0: nothing printed but failures */
	size_t page_size;	/* sysconf(_SC_PAGESIZE), read outside signals */
	bool handoff_seen;	/* NSB_HANDOFF_VAR is in the environment */
	bool inherit_ignored;	/* ... with the value written for this process */
	bool secure;		/* AT_SECURE: no variable read, nothing printed */
	bool fill_set;		/* NOSIGBUS_FILL was given (not empty) */
	bool test_filtered;	/* NSB_TEST_SECCOMP=filtered: as under a filter */
	bool test_plain_mnt_id;	/* NSB_TEST_MNT_ID=plain: as before Linux 6.8 */
};

/* Read by the constructor; read-only afterwards (defaults before it). */
extern NSB_INTERNAL struct nsb_config nsb_config;
void nsb_config_init(void);	/* the page size, for shims called early */
void nsb_config_read(void);	/* the NOSIGBUS_* variables, once */
/* Parses one variable's value; returns false for an invalid value. */
bool nsb_config_parse(const char *name, const char *value, int *out);

/* log2 of a power of two (a page size). */
static inline unsigned
nsb_log2(size_t v)
{
	/* The least s with 2^s >= v, without a loop: it runs at every
	 * mapping call (the page size's shift). */
	return v <= 1 ? 0 : (unsigned)(8 * sizeof(unsigned long long)) -
				(unsigned)__builtin_clzll((unsigned long long)(v - 1));
}

/* The signal set of a BSD mask (sigblock, sigsetmask, sigpause): bit
 * sig - 1 for signals 1 to 32, as glibc's sigset_set_old_mask, and the
 * way back. */
static inline void
nsb_bsd_mask_set(sigset_t *set, int mask)
{
	sigemptyset(set);
	set->__val[0] = (unsigned int)mask;
}

static inline int
nsb_bsd_mask_get(const sigset_t *set)
{
	return (int)(unsigned int)set->__val[0];
}

/* [signal-safe] head, n in decimal, tail into buf (a /proc path such as
 * "/proc/self/fd/" N), cut to size - 1 bytes; no stdio, which a handler
 * may not use. */
static inline void
nsb_proc_path(char *buf, size_t size, const char *head, unsigned long n, const char *tail)
{
	char digits[24];
	size_t at = 0;
	int k = 0;

	do
		digits[k++] = (char)('0' + n % 10);
	while ((n /= 10) != 0);
	for (; *head && at + 1 < size; head++)
		buf[at++] = *head;
	while (k && at + 1 < size)
		buf[at++] = digits[--k];
	for (; *tail && at + 1 < size; tail++)
		buf[at++] = *tail;
	buf[at] = '\0';
}

/* Set (to 1) by a vfork child of this thread's as it returns from the
 * clone, in the TLS it shares with its parent; cleared by the parent as
 * it compares what the child left (process.c, nsb_vfork_early). */
extern NSB_INTERNAL __thread uint8_t nsb_vfork_ran __attribute__((tls_model("initial-exec")));
void nsb_vfork_early(void);

/* Everything the interposed calls need, whether or not our constructor
 * has run yet.  Cheap after the first call. */
static inline void
nsb_init(void)
{
	if (__builtin_expect(nsb_config.page_size == 0, 0))
		nsb_config_init();
}
/* The same, first thing in an interposed mapping call or a call of the
 * API (never under a lock of the library's): a handler that runs in a
 * vfork parent as the clone returns first takes back what a dead child
 * left (process.c, nsb_vfork_early).  One load of the TLS. */
static inline void
nsb_enter(void)
{
	nsb_init();
	if (__builtin_expect(nsb_vfork_ran != 0, 0))
		nsb_vfork_early();
}

/* ---- process.c: the library's locks, and what fork does to its state -- */

/*
 * [signal-safe] Slots: a set of n words (n a power of two), each 0 (free)
 * or the key of whoever holds it - a thread's number (process.c's holders
 * without the mask and policy mappings in flight), a thread's reader key
 * (ranges.c's vfork tickets).  A claim is one compare-exchange and a
 * release one compare-exchange or one store, so that whatever instruction
 * a thread (or a vfork child on its memory) stops or dies at, what it
 * holds is exactly the slots with its key: a handler that interrupts it
 * knows its own, and the parent of a dead vfork child finds what the
 * child left (process.c).  A claim that finds every slot taken fails
 * (-1): the caller's fallback is its way without slots.  Before each
 * claim (and after each release) this thread's nsb_holds is counted up
 * (down), as for its locks and reader tickets: a vfork child that leaves
 * nothing behind leaves it as it was (process.c).
 */
extern NSB_INTERNAL __thread unsigned nsb_holds __attribute__((tls_model("initial-exec")));

static inline void
nsb_holds_up(void)
{
	nsb_holds++;
	/* The count is up before the claim (this thread's, or its vfork
	 * child's, which shares the memory): never after it. */
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void
nsb_holds_down(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	nsb_holds--;
}

/* The slot of key in s[n] from first on, taken; -1: every one is. */
int nsb_slots_claim(atomic_uintptr_t *s, unsigned n, uintptr_t key, unsigned first);
/* One slot holding key let go (they are alike); false: none holds it. */
bool nsb_slots_release(atomic_uintptr_t *s, unsigned n, uintptr_t key, unsigned first);

/* Inline first tries of both, on slot `at` alone. */
static inline bool
nsb_slot_claim_at(atomic_uintptr_t *s, unsigned at, uintptr_t key)
{
	uintptr_t none = 0;

	nsb_holds_up();
	if (__builtin_expect(atomic_compare_exchange_strong(&s[at], &none, key), 1))
		return true;
	nsb_holds_down();
	return false;
}

static inline bool
nsb_slot_release_at(atomic_uintptr_t *s, unsigned at, uintptr_t key)
{
	if (__builtin_expect(atomic_compare_exchange_strong(&s[at], &key, 0), 1)) {
		nsb_holds_down();
		return true;
	}
	return false;
}

/* Slot i, known to be the caller's (its claim's return), let go. */
static inline void
nsb_slot_free(atomic_uintptr_t *s, int i)
{
	atomic_store(&s[i], 0);
	nsb_holds_down();
}

/* Does a slot hold a key other than key (0: any key)?  Inline: a
 * writer of the table asks it of the vfork tickets as it drains. */
static inline bool
nsb_slots_others(atomic_uintptr_t *s, unsigned n, uintptr_t key)
{
	for (unsigned i = 0; i < n; i++) {
		uintptr_t v = atomic_load(&s[i]);

		if (v != 0 && v != key)
			return true;
	}
	return false;
}
/* Is any slot held?  (Every load made: one branch.) */
static inline __attribute__((always_inline)) bool
nsb_slots_any(atomic_uintptr_t *s, unsigned n)
{
	uintptr_t any = 0;

	for (unsigned i = 0; i < n; i++)
		any |= atomic_load(&s[i]);
	return any != 0;
}
/* How many slots hold key (0: none). */
unsigned nsb_slots_count(atomic_uintptr_t *s, unsigned n, uintptr_t key);
/* Every slot that holds key let go (a dead vfork child's: process.c);
 * this thread's count is the caller's to set. */
void nsb_slots_drop(atomic_uintptr_t *s, unsigned n, uintptr_t key, unsigned keep);
/* A fork child: every slot but key's let go (their threads are gone). */
void nsb_slots_keep_only(atomic_uintptr_t *s, unsigned n, uintptr_t key);
/* The slots, in one array (slots.c: one piece of .bss, whose alignment
 * is paid once): process.c's two sets of NSB_SLOTS, then ranges.c's two
 * sides of vfork tickets (NSB_TICKET_SLOTS each). */
#define NSB_SLOTS 16
#define NSB_TICKET_SLOTS 4
#define NSB_SLOTS_UNMASKED 0
#define NSB_SLOTS_IN_FLIGHT NSB_SLOTS
#define NSB_SLOTS_TICKETS (2 * NSB_SLOTS)
#define NSB_SLOT_WORDS (2 * NSB_SLOTS + 2 * NSB_TICKET_SLOTS)
extern NSB_INTERNAL atomic_uintptr_t nsb_slot_words[NSB_SLOT_WORDS];

/*
 * No handler of the program's that could stop its thread ever runs in a
 * thread that holds a lock of the library's, so the program can never
 * stop a holder with one of its own handlers (nobody waits for a thread
 * the program has suspended, SPEC §5 "Progress").  nsb_lock() blocks
 * every signal while the lock is held.  nsb_lock_quiet() does the same,
 * unless the program has no handler, or handlers only for its own faults
 * (process.c): then the two rt_sigprocmask calls are saved, and a call
 * from a fault handler sent to a holder is a nested call (ranges.c).
 */
struct nsb_lock {
	atomic_int word;	/* the holder's number | waiters (process.c) */
	sigset_t saved;		/* the holder's mask, restored at unlock */
	bool masked;		/* the holder blocked signals (saved is valid) */
	bool inner;		/* ... by an outer lock of its thread (saved is not) */
};
#define NSB_LOCK_INITIALIZER { 0, { { 0 } }, false, false }
void nsb_lock(struct nsb_lock *l);
void nsb_lock_quiet(struct nsb_lock *l);
void nsb_unlock(struct nsb_lock *l);
/* A handler of the program's is about to be installed (or was found in
 * the kernel): from now on every lock blocks signals.  Returns once no
 * thread holds a lock without having blocked them.  Not called under a
 * lock of the library's. */
void nsb_process_handler_coming(int sig);
/* The lock word: its holder's number | NSB_LOCK_WAITERS (a thread may
 * sleep on it).  A thread's number is nsb_lock_id, given at its first
 * lock (process.c). */
#define NSB_LOCK_WAITERS 0x40000000
extern NSB_INTERNAL __thread int nsb_lock_id __attribute__((tls_model("initial-exec")));
/* [signal-safe] Does this thread hold l?  Exact at every instant, from a
 * handler that interrupted its holder too.  Inline: every mapping call
 * asks it (nsb_ranges_nested). */
static inline bool
nsb_lock_mine(struct nsb_lock *l)
{
	int w = atomic_load(&l->word);

	return w != 0 && nsb_lock_id != 0 && (w & (NSB_LOCK_WAITERS - 1)) == nsb_lock_id;
}
extern NSB_INTERNAL struct nsb_lock nsb_table_lock;	/* ranges.c and files.c */
extern NSB_INTERNAL struct nsb_lock nsb_disp_lock;	/* dispositions.c */
extern NSB_INTERNAL struct nsb_lock nsb_timers_lock;	/* threads.c */

/* Is this a child that runs on our memory (vfork, posix_spawn's child,
 * clone(CLONE_VM)) or on a copy of it made behind the fork handlers' back
 * (a raw fork)?  Such a child must not take the parent's state.  Known
 * without a system call unless the program made a process with clone()
 * or syscall() (process.c). */
bool nsb_in_vfork_child(void);
/* [signal-safe] The caller's pid, without a system call where it is
 * known. */
pid_t nsb_getpid(void);
/* [signal-safe] A process is about to be made with clone() or syscall():
 * from now on nsb_in_vfork_child, nsb_getpid and nsb_gettid ask the
 * kernel. */
void nsb_process_clone_coming(void);
void nsb_process_start(void);	/* from the constructor: fork handlers */
pid_t nsb_gettid(void);	/* [signal-safe] */
/* The mask to restore when this thread releases its outermost lock
 * (NULL: it holds none): what "this thread's mask" means under a lock. */
sigset_t *nsb_outer_mask(void);
bool nsb_other_threads(void);
/* One word of the program's memory, or false where the kernel would give
 * EFAULT; errno untouched. */
bool nsb_read_word(const void *user, void *out);	/* [signal-safe] */
/* Can len bytes (8 to a page) at user be written, or would the kernel give
 * EFAULT?  Writes what the caller must write over; errno untouched. */
bool nsb_write_probe(void *user, size_t len);	/* [signal-safe] */

/*
 * [signal-safe] Buffers for signal context, so that no path buffer is on
 * the handler's stack (it may be a small alternate stack): one of n slots
 * of a pool (a bit each in *busy), taken without waiting, or -1 when every
 * one is in use (the caller then cannot tell, and says so).
 */
static inline int
nsb_slot_take(atomic_uint *busy, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!(atomic_fetch_or(busy, 1u << i) & (1u << i)))
			return (int)i;
	return -1;
}

static inline void
nsb_slot_give(atomic_uint *busy, int slot)
{
	atomic_fetch_and(busy, ~(1u << slot));
}
#define NSB_SIGNAL_SLOTS 8
/* [signal-safe] Slot `slot` of the space a user of the pool above has
 * (NSB_SIGNAL_SPACE bytes), made with the handler's memory before it is
 * installed (rescue.c: not in the library's .bss, which every process
 * would pay for at start-up); NULL before. */
enum nsb_space_user { NSB_SPACE_FILES, NSB_SPACE_MAPS, NSB_SPACE_DISP, NSB_SPACE_USERS };
#define NSB_SIGNAL_SPACE 4608
void *nsb_signal_space(enum nsb_space_user user, int slot);

/* ---- memory.c: the library's own memory -------------------------------- */

/* The areas of the library's arena: each at a fixed address, mapped as
 * far as it is used (memory.c). */
enum nsb_area {
	NSB_AREA_SMALL,
	NSB_AREA_SCRATCH,
	NSB_AREA_TABLE0,
	NSB_AREA_TABLE1,
	NSB_AREA_FILES,
	NSB_AREA_INDEX,
	NSB_AREA_PATHS,
	NSB_AREAS
};
void *nsb_memory(size_t bytes);	/* zeroed, never freed; NULL with ENOMEM */
void *nsb_memory_try(size_t bytes);	/* [signal-safe] the same, or NULL if busy */
/* Area a, zeroed and usable up to bytes from its start (it never moves):
 * its start, or NULL. */
void *nsb_memory_area(enum nsb_area a, size_t bytes);
void *nsb_scratch(size_t bytes);	/* until the table lock is released */
extern NSB_INTERNAL size_t nsb_scratch_used;
static inline void
nsb_scratch_reset(void)
{
	nsb_scratch_used = 0;
}
void *nsb_memory_table(int which, size_t bytes);

/* ---- ranges.c: the table of protected mappings ------------------------- */

/* meta: what a rescue needs to know about a protected range. */
#define NSB_META_PROT		0x0007u		/* PROT_READ|PROT_WRITE|PROT_EXEC */
#define NSB_META_SHARED		0x0008u
#define NSB_META_ANON		0x0010u		/* no file behind it */
#define NSB_META_MEMFS		0x0020u		/* a file that lives in memory */
#define NSB_META_RECEIVED	0x0040u		/* a file another process handed over */
#define NSB_META_FOREIGN	0x10000000u	/* with RECEIVED: its size cannot be learnt */
#define NSB_META_POLICY		0x8000u		/* protected by the policy, not asked for */
#define NSB_META_SHIFT(m)	(((m) >> 8) & 0x3fu)	/* log2 of the page size */
#define NSB_META_MKSHIFT(s)	((uint32_t)(s) << 8)
#define NSB_META_PKEY(m)	((int)(((m) >> 16) & 0x1fu) - 1) /* -1: none */
#define NSB_META_MKPKEY(k)	((uint32_t)((k) + 1) << 16)
#define NSB_META_PKEY_MASK	0x1f0000u
#define NSB_META_DONTFORK	0x0080u		/* MADV_DONTFORK: not in a fork child */
#define NSB_META_WIPEONFORK	0x4000u		/* MADV_WIPEONFORK: fresh in a fork child */
/* What a replaced page must keep of the mapping besides (the program's
 * mlock and madvise calls, followed in mman.c; doc/mappings.md). */
#define NSB_META_LOCKED		0x200000u	/* mlock */
#define NSB_META_ONFAULT	0x400000u	/* MLOCK_ONFAULT, with LOCKED */
#define NSB_META_DONTDUMP	0x800000u	/* MADV_DONTDUMP */
#define NSB_META_HUGEPAGE	0x1000000u	/* MADV_HUGEPAGE */
#define NSB_META_NOHUGEPAGE	0x2000000u	/* MADV_NOHUGEPAGE */
#define NSB_META_MERGEABLE	0x4000000u	/* MADV_MERGEABLE */
#define NSB_META_MBIND		0x8000000u	/* mbind: a policy of its own */

struct nsb_account;

/*
 * [signal-safe] The fill of a record: NOSIGBUS_FILL where it is given;
 * else range for a memory-backed file the policy protects (a compositor's
 * view of a client's buffer: doc/compositors.md, "Which fill for a
 * compositor"), page for everything else: what the program asked for (MAP_NOSIGBUS,
 * nosigbus_protect: the kernel patch's semantics), and disk files under
 * the files policy (which may grow back under a reader).
 */
static inline enum nsb_fill
nsb_fill_of(uint32_t meta)
{
	if (nsb_config.fill_set || !(meta & NSB_META_POLICY) ||
	    !(meta & (NSB_META_MEMFS | NSB_META_RECEIVED)))
		return nsb_config.fill;
	return NSB_FILL_RANGE;
}

struct nsb_range {
	uintptr_t start;
	uintptr_t end;
	uint64_t off;		/* file offset of start */
	uint32_t meta;
	uint16_t file;		/* files.c index, 0: none */
	uint16_t gen;		/* which mapping made it (wraps): tells a new
				 * mapping at the same address from the old */
	struct nsb_account *acct;	/* what was replaced (account.c) */
};

/* Writers: every function below except the lock-free ones must be called
 * between nsb_ranges_lock() and nsb_ranges_unlock().  The same lock
 * guards files.c. */
void nsb_ranges_lock(void);
void nsb_ranges_unlock(void);

/* Makes room for n more records now, so that the updates after a system
 * call need no memory.  0, or -1 with errno ENOMEM.  Where there is none
 * (RLIMIT_AS), the updates still never fail, but an insert may (below),
 * and a cut or change that must split a record for which the table's
 * chunks have no free slot cuts it to one piece instead, losing the
 * protection of the rest (nsb_ranges_lost). */
int nsb_ranges_reserve(size_t n);
/* Room for n (<= 2) more records, now or in free slots of the table's
 * chunks: an insert of n then cannot fail. */
bool nsb_ranges_room(size_t n);
/* 0, or -1 with errno ENOMEM (table full). */
int nsb_ranges_insert(const struct nsb_range *r);
/* Removes [start, end) from every record, splitting as needed.  Never
 * fails (0; see nsb_ranges_reserve).  On return no rescue is still using
 * the removed pieces. */
int nsb_ranges_cut(uintptr_t start, uintptr_t end);
/* The same, for the records a raw call left where a new mapping is: never
 * fails. */
void nsb_ranges_cut_stale(uintptr_t start, uintptr_t end);
/* Protection lost for want of memory for records (RLIMIT_AS): counted
 * (nosigbus_get_stats' lost), and with NOSIGBUS_LOG=1 said once, after
 * the table lock is let go. */
void nsb_ranges_lost(void);
/* Makes the two records that meet at addr one, where they are one
 * mapping's contiguous pieces alike in everything (as the kernel's VMAs
 * are one there). */
int nsb_ranges_join(uintptr_t addr);
/* Sets the protection (and pkey, -1 to keep) of the recorded parts. */
int nsb_ranges_set_prot(uintptr_t start, uintptr_t end, int prot, int pkey);
/* The same two for a caller that found records in [start, end) under the
 * table lock it still holds (a count or a list of them): without the
 * search for them again.  (Where there are none after all, the same
 * result, at the cost of a change of the table that changes nothing.) */
int nsb_ranges_cut_found(uintptr_t start, uintptr_t end);
int nsb_ranges_set_prot_found(uintptr_t start, uintptr_t end, int prot, int pkey);

/* A list of ranges, in memory of its own (never malloc). */
struct nsb_saved {
	size_t n;
	size_t cap;
	struct nsb_range *r;	/* inline_r, scratch, or a mapping of its own */
	bool mapped;
	struct nsb_range inline_r[8];
};
void nsb_saved_unmap(struct nsb_saved *s);
/* Inline: every locked call makes and frees a list, most never grow it
 * past inline_r. */
static inline void
nsb_saved_init(struct nsb_saved *s)
{
	s->n = 0;
	s->cap = sizeof(s->inline_r) / sizeof(s->inline_r[0]);
	s->r = s->inline_r;
	s->mapped = false;
}

static inline void
nsb_saved_free(struct nsb_saved *s)
{
	if (s->mapped)
		nsb_saved_unmap(s);
	nsb_saved_init(s);
}
int nsb_saved_push(struct nsb_saved *s, const struct nsb_range *r);
/* Appends the records overlapping [start, end), clipped, lowest first. */
int nsb_ranges_collect(uintptr_t start, uintptr_t end, struct nsb_saved *saved);
/* The largest page size of the records overlapping [start, end) (the
 * page size where there are none), and how many there are in *n. */
size_t nsb_ranges_unit(uintptr_t start, uintptr_t end, size_t *n);
/* What nsb_ranges_overlap_peek() saw (no lock): where the span met one
 * record only, inside it, of pages, that record's place in the active
 * copy as of version v (odd: nothing seen). */
struct nsb_peek {
	unsigned long v;
	size_t j, i;
};
/* Does [start, end) meet exactly one record, inside it, of pages?  Then
 * that record in *r (as nsb_ranges_collect() would list it).  pk (or
 * NULL): what the call's quick check saw, used if nothing changed since. */
bool nsb_ranges_one(uintptr_t start, uintptr_t end, struct nsb_range *r,
		    const struct nsb_peek *pk);

/*
 * Changes in flux: while a call may change [s1, e1) and [s2, e2), a fault
 * there is neither rescued nor passed on: the handler returns, and the
 * instruction faults again until the call is over and the records say
 * what the kernel did.  nsb_ranges_flux() returns once no rescue that
 * started before it is still running.
 */
void nsb_ranges_flux(uintptr_t s1, uintptr_t e1, uintptr_t s2, uintptr_t e2);
void nsb_ranges_flux_end(void);

/* Does any record overlap [start, end)?  Lock-free, but where a call is
 * changing the records there (its span in flux: it may have cut them to
 * put them back) it asks under the table lock, whose holder the program
 * cannot stop. */
bool nsb_ranges_overlap(uintptr_t start, uintptr_t end);
/* The same, and in *pk what nsb_ranges_one() may take from it, for a
 * caller that has just found nsb_ranges_none() false (munmap, mprotect):
 * not asked again (where it has become true since, the search says no). */
bool nsb_ranges_overlap_peek(uintptr_t start, uintptr_t end, struct nsb_peek *pk);
/* Nothing recorded and no call changing records (the interposed calls'
 * first check; nsb_ranges_count() == 0 may be a call's passing moment),
 * and not nested in a handler that interrupted this thread's holder of
 * the table lock (whose span must be noted: ranges.c).  _empty: without
 * the last, for a new mapping where the kernel found room. */
bool nsb_ranges_none(void);
bool nsb_ranges_empty(void);
size_t nsb_ranges_count(void);	/* [signal-safe] */
unsigned long nsb_ranges_version(void);	/* [signal-safe] changes with every update */
size_t nsb_ranges_bytes(void);	/* memory the table holds */

/*
 * [signal-safe] Finds the record containing addr and keeps it alive (no
 * writer can finish removing it) until nsb_ranges_leave(ticket).
 */
enum nsb_lookup { NSB_LOOKUP_NONE, NSB_LOOKUP_FOUND, NSB_LOOKUP_BUSY };
enum nsb_lookup nsb_ranges_enter(uintptr_t addr, struct nsb_range *out, int *ticket);
void nsb_ranges_leave(int ticket);	/* [signal-safe] */

/* Sets (set) or clears (clear) meta bits of the recorded parts of
 * [start, end): madvise(MADV_DONTFORK ...). */
int nsb_ranges_set_flags(uintptr_t start, uintptr_t end, uint32_t set, uint32_t clear);
/* Replaced units in the records of [start, end) (tests). */
size_t nsb_ranges_replaced(uintptr_t start, uintptr_t end);

void nsb_ranges_fail_next_alloc(void);	/* test hook */
void nsb_ranges_test_no_alloc(bool on);	/* test hook: no memory at all */
void nsb_ranges_test_chunk(size_t n);	/* test hook: records per chunk */
void nsb_ranges_after_fork_child(bool nested);
/* The parent of a vfork child that died (process.c): the tickets the
 * child left on this thread's TLS given back; the table, whose lock the
 * child left, made whole and marked for a resync from the kernel. */
extern NSB_INTERNAL __thread uint8_t nsb_my_readers[2] __attribute__((tls_model("initial-exec")));
void nsb_ranges_vfork_readers(const uint8_t before[2]);
bool nsb_ranges_vfork_tickets(void);
void nsb_ranges_after_vfork_death(void);
/* Its recount of the records naming an account, a file (from 0). */
void nsb_account_refs_clear(struct nsb_account *a);
void nsb_files_refs_clear(uint32_t file);
/* [signal-safe] Nested calls (ranges.c): is this call of the program's
 * made from a handler that interrupted this thread while it held the
 * table lock?  Then it goes to the kernel, after nsb_ranges_note() of the
 * span whose records it may make stale. */
static inline bool
nsb_ranges_nested(void)
{
	return nsb_lock_mine(&nsb_table_lock);
}
void nsb_ranges_note(uintptr_t start, uintptr_t end);
int nsb_ranges_prepare(void);	/* with the handler: 0, or -1 (ENOMEM) */
/* mman.c: the records of a noted span made the kernel's again (table
 * lock held). */
void nsb_resync_noted(uintptr_t start, uintptr_t end);

/* ---- account.c: which units the library replaced ---------------------- */

/*
 * A bit per unit of a mapping, indexed by file offset (see account.c).
 * Made, counted and released under the table lock; claimed and tested in
 * the handler.
 */
struct nsb_account *nsb_account_new(uint64_t off, size_t len, size_t unit);
/* A new account for [off, off + len) with the bits from's has there; the
 * log's counts move to it (from is replaced by it, at least in part). */
struct nsb_account *nsb_account_copy(struct nsb_account *from, uint64_t off, size_t len);
void nsb_account_ref(struct nsb_account *a, int delta);
/* Table lock held, no handler on the table's old contents (ranges.c):
 * accounts no record names any more go back to their free lists.  The
 * test inline (the usual unlock has none to release). */
extern NSB_INTERNAL struct nsb_account *nsb_account_release_list;
void nsb_account_release_listed(void);
static inline void
nsb_account_release_unused(void)
{
	if (nsb_account_release_list)
		nsb_account_release_listed();
}
uint64_t nsb_account_id(const struct nsb_account *a);	/* [signal-safe] */
bool nsb_account_claim(struct nsb_account *a, uint64_t off);	/* [signal-safe] */
size_t nsb_account_claim_run(struct nsb_account *a, uint64_t off, size_t max); /* [signal-safe] */
void nsb_account_unclaim(struct nsb_account *a, uint64_t off, size_t n); /* [signal-safe] */
bool nsb_account_test(const struct nsb_account *a, uint64_t off);	/* [signal-safe] */
struct nsb_maplog *nsb_account_log(struct nsb_account *a);	/* [signal-safe] */
void nsb_account_clear(struct nsb_account *a, uint64_t off, size_t len);
size_t nsb_account_count(const struct nsb_account *a, uint64_t off, size_t len);
void nsb_account_set_unsure(struct nsb_account *a);	/* [signal-safe] */
bool nsb_account_unsure(const struct nsb_account *a);
void nsb_account_set_may_write(struct nsb_account *a, bool may);
bool nsb_account_may_write(const struct nsb_account *a);
bool nsb_account_no_write(const struct nsb_account *a);
void nsb_account_copy_write(struct nsb_account *to, const struct nsb_account *from);
/* The memory an account of a mapping of len bytes takes. */
size_t nsb_account_bytes(size_t len, size_t unit);

/* ---- files.c: the files behind protected mappings ---------------------- */

/*
 * One entry per file (st_dev, st_ino) that a record names, holding a
 * descriptor the library keeps to learn the file's size at fault time.
 * Entries are counted by the records that name them; callers hold the
 * table lock (nsb_ranges_lock) except where marked.
 */
/* meta: the decision's (no descriptor for a file whose faults never need
 * the size). */
uint32_t nsb_files_get(int fd, const struct stat *st, const char *path, uint32_t meta, int pfd);
/* An O_PATH, close-on-exec descriptor of the file open as fd, or -1. */
int nsb_files_path_descriptor(int fd);
uint32_t nsb_files_get_mapped(uintptr_t start, uintptr_t end, uint64_t dev, uint64_t ino,
			      const char *path, bool *memfs);
void nsb_files_ref(uint32_t file, int delta);
/* The program closes its descriptors [first, last]: files mapped from
 * them get a descriptor of the library's first (files.c).  Not under the
 * table lock; may be called from a signal handler. */
void nsb_files_closing(unsigned first, unsigned last);
/* The library's descriptor of /proc/self/maps, or -1 (files.c); the one it
 * gave answered as no maps file would; a fork child lets it go. */
int nsb_files_maps_descriptor(void);
void nsb_files_maps_forget(void);
void nsb_files_maps_drop(void);
void nsb_files_after_fork_child(void);
/* After an update of the table: entries that lost their last record are
 * let go, and the maps' descriptor with the last protected mapping.  The
 * test inline (the usual unlock has nothing to do). */
extern NSB_INTERNAL uint32_t nsb_files_release_list;
extern NSB_INTERNAL atomic_int nsb_files_maps_kept;
void nsb_files_release_some(void);
static inline void
nsb_files_release_unused(void)
{
	if (nsb_files_release_list ||
	    atomic_load_explicit(&nsb_files_maps_kept, memory_order_relaxed))
		nsb_files_release_some();
}
bool nsb_files_identity(uint32_t file, uint64_t *dev, uint64_t *ino);	/* [signal-safe] */
/* [signal-safe] The size now of the file mapped at addr, in the record
 * [start, end), and its status change time from the same fstat (ctime may
 * be NULL); false if the library cannot tell. */
bool nsb_files_size(uint32_t file, uintptr_t start, uintptr_t end, uintptr_t addr,
		    uint64_t *size, struct timespec *ctime);
const char *nsb_files_path(uint32_t file);	/* [signal-safe] NULL: unknown */
/* A descriptor of the file, the program's or ours, for mapping it again
 * (refresh.c): the widest (O_RDWR, then O_PATH, then O_RDONLY), its
 * F_GETFL flags in *flags; -1 if the process has none. */
int nsb_files_descriptor(uint32_t file, int *flags);
uint64_t nsb_dev_of(unsigned major, unsigned minor);

/* ---- rescue.c: the SIGBUS handler -------------------------------------- */

void nsb_rescue_handler(int sig, siginfo_t *si, void *uc); /* [signal-safe] */
void nsb_rescue_after_fork_child(void);
/* The parent of a vfork child that died: the rescue slots and claims it
 * left (process.c). */
void nsb_rescue_vfork_left(void);
int nsb_rescue_prepare(void);	/* its memory, before the handler is installed */
void nsb_rescue_arm(void);	/* at the first protected record: its settings */
/* What a VMA made anew over a record's page must be given again (a rescue's
 * zero page, a refresh's file page): the policy at p before (-1: none
 * kept), then everything with it after. */
#define NSB_POLICY_BITS (8 * 2 * sizeof(unsigned long))
int nsb_rescue_policy(const void *p, uint32_t meta, unsigned long nodes[2]); /* [signal-safe] */
void nsb_rescue_reapply(void *p, size_t len, uint32_t meta, int policy,
			const unsigned long nodes[2]); /* [signal-safe] */
/* [signal-safe] Is (dev, ino) the library's zero file, which read-first
 * fills are mapped from (a VMA of it is a rescue's, like anonymous
 * memory)? */
bool nsb_rescue_zero_file(uint64_t dev, uint64_t ino);
/* The tail r an mremap grew over a rescued last unit: anonymous memory,
 * as the kernel grows anonymous memory, where that unit may have been the
 * zero file's (table lock held, the span in flux). */
void nsb_rescue_regrown(const struct nsb_range *r);

/* ---- dispositions.c: the program's view of signals --------------------- */

/* Installs the library's handler under the program's disposition (once).
 * 0, or -1 with errno ENOMEM. */
extern NSB_INTERNAL atomic_bool nsb_disp_is_installed;
int nsb_disp_install_now(void);
/* Inline: every recorded mapping asks, and every lock (process.c). */
static inline int
nsb_disp_install(void)
{
	if (atomic_load(&nsb_disp_is_installed))
		return 0;
	return nsb_disp_install_now();
}
static inline bool
nsb_disp_installed(void)
{
	return atomic_load(&nsb_disp_is_installed);
}
/* The program's action for sig: set (act) and/or query (old).  0 or -1 with errno. */
int nsb_disp_action(int sig, const struct sigaction *act, struct sigaction *old);
/* The program's view of its mask: like pthread_sigmask, returns 0 or an
 * error number.  set and old are the caller's (they may be bad pointers). */
int nsb_disp_mask(int how, const sigset_t *set, sigset_t *old);
bool nsb_disp_blocked(void);		/* [signal-safe] this thread's view */
int nsb_disp_pending(sigset_t *set);
/* Calls that wait (waits.c): begin gives the mask to pass the kernel
 * (w->kmask) and returns 0, or an error number to return at once;
 * again says whether an EINTR was only a SIGBUS the program ignores or
 * blocks (retry); end restores the view. */
/* How a wait can be retried (dispositions.c, "Parked"): PLAIN with the
 * same call only; PARK with the same call, which takes a mask of its own
 * (ppoll, sigsuspend...); PARK_FREE with a masked variant of another
 * system call (ppoll for poll), made only where no seccomp filter is
 * known. */
enum { NSB_WAIT_NONE, NSB_WAIT_PLAIN, NSB_WAIT_PARK, NSB_WAIT_PARK_FREE };
struct nsb_wait {
	bool active;
	bool was;
	unsigned char outer;	/* in a wait already (a handler's) */
	unsigned char kind;	/* NSB_WAIT_*: this wait's */
	bool outer_parked;
	unsigned swallowed, handled, outer_swallowed;
	uint64_t outer_bits;
	uintptr_t outer_sp;
	/* The mask the call is given (NULL: none, the thread's; once
	 * parked, the park mask in its place). */
	const sigset_t *kmask;
	/* Set by nsb_disp_wait_again once parked: the mask every retry
	 * must unblock atomically (PARK_FREE's masked variant uses it). */
	const sigset_t *park;
	sigset_t copy, park_mask;
};
int nsb_disp_wait_begin(struct nsb_wait *w, const sigset_t *mask, int kind);
bool nsb_disp_wait_again(struct nsb_wait *w);
void nsb_disp_wait_end(struct nsb_wait *w);
/* sigwait, sigwaitinfo, sigtimedwait (waits.c): true when a held SIGBUS
 * is taken into *got. */
struct nsb_sigwait {
	bool active;
};
bool nsb_disp_sigwait_begin(struct nsb_sigwait *w, const sigset_t *set, siginfo_t *got);
bool nsb_disp_sigwait_take(struct nsb_sigwait *w, siginfo_t *got);
void nsb_disp_sigwait_end(struct nsb_sigwait *w);
/* [signal-safe] Everything the library does not rescue ends up here. */
void nsb_disp_chain(int sig, siginfo_t *si, void *uc);
bool nsb_disp_is_fault(const siginfo_t *si, const void *uc);	/* [signal-safe] */
/* sigsetjmp and siglongjmp (see dispositions.c, jumps.c). */
void nsb_disp_setjmp(const void *env, bool savemask);	/* [signal-safe] */
bool nsb_disp_longjmp(const void *env, bool mask_saved, const sigset_t *saved_mask);
/* The program switches contexts (jumps.c). */
bool nsb_disp_view_for_context(sigset_t *mask, bool leaves);
void nsb_disp_view_restore(bool was);
/* A thread starts: its view of SIGBUS is its creator's (or, for threads
 * the C library starts with every signal blocked, blocked). */
bool nsb_disp_thread_blocked_at_start(void);
void nsb_disp_thread_start(bool blocked);
void nsb_disp_thread_start_kernel(void);
/* exec and spawn: what the new program must inherit. */
struct nsb_exec {
	bool ignored;		/* the program ignores SIGBUS */
	bool blocked;		/* ... and blocks it */
	sigset_t saved_mask;
	bool ignore_set;	/* SIG_IGN put into the kernel for the call */
	struct sigaction saved_action;
};
void nsb_disp_before_exec(struct nsb_exec *x);
void nsb_disp_after_exec(struct nsb_exec *x);
void nsb_disp_exec_ignore(struct nsb_exec *x);
void nsb_disp_after_fork_child(void);
void nsb_process_after_Fork_child(void);	/* process.c */
void nsb_process_Fork_window(bool open);	/* process.c */
/* process.c: a policy mapping's kernel mmap comes (false: a fork waits,
 * make it under the lock), and it is recorded or failed; a fork waits
 * for those in between.  Each mapping in flight is its thread's number
 * in a slot of nsb_in_flight_by: the slot of the number first, inline
 * (one compare-exchange each way), the others out of line. */
#define nsb_in_flight_by (nsb_slot_words + NSB_SLOTS_IN_FLIGHT)
extern NSB_INTERNAL atomic_int nsb_forks_waiting;
bool nsb_process_map_begin_slow(void);
void nsb_process_map_end_slow(void);

static inline bool
nsb_process_map_begin(void)
{
	unsigned self = (unsigned)nsb_lock_id;

	if (__builtin_expect(self != 0, 1) &&
	    nsb_slot_claim_at(nsb_in_flight_by, self % NSB_SLOTS, self)) {
		if (__builtin_expect(atomic_load(&nsb_forks_waiting) == 0, 1))
			return true;
		nsb_slot_free(nsb_in_flight_by, (int)(self % NSB_SLOTS));
		return false;
	}
	return nsb_process_map_begin_slow();
}

static inline void
nsb_process_map_end(void)
{
	unsigned self = (unsigned)nsb_lock_id;

	if (!nsb_slot_release_at(nsb_in_flight_by, self % NSB_SLOTS, self))
		nsb_process_map_end_slow();
}
void nsb_process_copy_clone(int phase);	/* process.c: 0 before, 1 parent, 2 child */
void nsb_disp_start(void);	/* the constructor's part: inherited mask, handoff */
/* Its value is the decimal pid of the process that wrote it: the exec'd
 * program's own (exec keeps the pid), or a spawned child's parent's. */
#define NSB_HANDOFF_VAR "NOSIGBUS_INHERIT_IGNORED"
/* A thread that pthread_create started ends. */
void nsb_disp_thread_exit(void);
/* pthread_sigqueue sends a SIGBUS to one thread (signals.c): +1 before,
 * -1 if it failed. */
void nsb_disp_directed(int delta);
/* The thread left the library's outermost lock, which blocked every
 * signal (process.c). */
void nsb_disp_lock_left(void);

/* ---- maps.c: /proc/self/maps and smaps --------------------------------- */

struct nsb_vma {
	uintptr_t start;
	uintptr_t end;
	uint64_t off;
	uint64_t dev;		/* nsb_dev_of(major, minor) */
	uint64_t ino;
	int prot;
	bool shared;
	bool anon;		/* no file behind it, or the library's zero file
				 * (a rescue's: rescue.c) */
	bool zero_file;		/* the latter: a file's VMA to the kernel */
	int pkey;		/* smaps only: -1 when unknown */
	size_t page_size;	/* smaps only: 0 when unknown */
	bool dontfork;		/* smaps only: MADV_DONTFORK given (VmFlags dc) */
	bool wipeonfork;	/* smaps only: MADV_WIPEONFORK given (VmFlags wf) */
	unsigned char write;	/* smaps only: VmFlags mw (VM_MAYWRITE): 0 unknown,
				 * NSB_VMA_MAY_WRITE or NSB_VMA_NO_WRITE */
	uint32_t kept;		/* smaps only: the NSB_META_ bits of what a replaced
				 * page must get again (VmFlags lo lf dd hg nh mg) */
	uint64_t flags_sig;	/* smaps only: a hash of the VmFlags a program can
				 * set on part of a mapping (all but sd mr mw me
				 * ac nr): equal for two VMAs the kernel would
				 * have kept as one */
	const char *path;	/* NULL when absent or too long to keep */
};
#define NSB_VMA_MAY_WRITE	1
#define NSB_VMA_NO_WRITE	2
/* Calls fn for each VMA overlapping [lo, hi), in address order, from
 * /proc/self/smaps when smaps is true (page sizes and keys), else maps
 * (ioctl(PROCMAP_QUERY) on it where the kernel has it: a cost that does
 * not grow with the VMAs outside [lo, hi)).
 * fn returns non-zero to stop.  Returns -1 with errno if the file could
 * not be read, else fn's last return value (0 when it never stopped). */
int nsb_maps_each(uintptr_t lo, uintptr_t hi, bool smaps,
		  int (*fn)(const struct nsb_vma *vma, void *arg), void *arg);
/* nsb_maps_each(lo, hi, false, ...) where fn needs no vma->path: a query
 * leaves it NULL (the kernel does not build the names). */
int nsb_maps_each_unnamed(uintptr_t lo, uintptr_t hi,
			  int (*fn)(const struct nsb_vma *vma, void *arg), void *arg);
/* Test hook: always read the file (true), or query the kernel where it
 * can (false, the default; NSB_TEST_MAPS=read in the environment makes it
 * true at the first call). */
void nsb_maps_force_read(bool read);
bool nsb_maps_last_queried(void);	/* test hook: the last call queried */
int nsb_maps_last_path(void);	/* test hook: 0 read, 1 queried, 2 probed */
void nsb_maps_allow_probe(bool allow);	/* test hook */
/* Does nsb_maps_each ask the kernel about the span alone (PROCMAP_QUERY)? */
bool nsb_maps_queries(void);
/* The bounded probe (mincore): 1 if a page of [lo, hi) is not mapped, 0 if
 * every one is, -1 if it cannot tell or is turned off (NSB_TEST_MAPS=read). */
int nsb_maps_hole(uintptr_t lo, uintptr_t hi);
/* [signal-safe] The VMA containing addr (path not kept). */
bool nsb_maps_find(uintptr_t addr, struct nsb_vma *vma);

/* ---- policy.c: which mappings are protected ---------------------------- */

/* Decides, at mmap() time, whether a mapping is protected and how.
 * Returns true and fills in the record's meta and file when it is; the
 * caller holds the table lock when it is (files.c). */
struct nsb_decision {
	bool protect;
	uint32_t meta;
	bool has_file;
	struct stat st;	/* where has_file: st_dev, st_ino, st_mode and
			 * st_size are set, nothing else need be */
	bool memfs;
	int pfd;	/* an O_PATH descriptor of the file decided on, or -1:
			 * nsb_files_get keeps it, nsb_policy_drop closes it */
};
void nsb_policy_decide(int prot, int flags, int fd, struct nsb_decision *d);
unsigned nsb_default_huge_shift(void);	/* policy.c: MAP_HUGETLB without a size */
void nsb_policy_drop_fd(struct nsb_decision *d);
static inline void
nsb_policy_drop(struct nsb_decision *d)
{
	if (d->pfd >= 0)
		nsb_policy_drop_fd(d);
}
/* Table lock held: the first protected mapping is about to be recorded. */
static inline void
nsb_policy_prepare(void)
{
	nsb_rescue_arm();
}

/* ---- uffd.c: the program's own userfaultfd registrations -------------- */

/* [signal-safe] May the program have registered [start, end) with a
 * userfaultfd of its own?  (True when it cannot tell.) */
bool nsb_uffd_registered(uintptr_t start, uintptr_t end);

/* ---- received.c: files handed over by another process ----------------- */

/* A file, whatever descriptor names it (birth time where the file system
 * keeps one: an inode number reused later is another file). */
struct nsb_identity {
	uint64_t dev;
	uint64_t ino;
	int64_t btime_sec;
	uint32_t btime_nsec;
	bool has_btime;
};
struct statx;
void nsb_identity_from(const struct statx *sx, struct nsb_identity *id);
bool nsb_identity_of(int fd, struct nsb_identity *id);	/* regular files */
/* Has a regular file ever been received?  (Inline: every decision asks.) */
extern NSB_INTERNAL atomic_uint nsb_received_written;
static inline bool
nsb_received_any(void)
{
	return atomic_load_explicit(&nsb_received_written, memory_order_acquire) != 0;
}
bool nsb_received_is(const struct nsb_identity *id);
/* Did a regular file arrive at fd lately, not mapped, closed or replaced
 * since through a call the library saw?  A hint (received.c); true once. */
extern NSB_INTERNAL atomic_uint nsb_received_hints;	/* ever given: 0, nothing to look at */
bool nsb_received_hint_find(int fd);
static inline bool
nsb_received_hint_take(int fd)
{
	return atomic_load_explicit(&nsb_received_hints, memory_order_relaxed) &&
	       nsb_received_hint_find(fd);
}
/* [signal-safe] The program closes or replaces [first, last]. */
void nsb_received_hint_drop(unsigned first, unsigned last);
/*
 * A received descriptor whose file cannot be described (a stat of it
 * fails: a FUSE file system of another user's refuses it), still the
 * peer's file: was fd one, not closed or replaced since through a call
 * the library saw?  Its arrival number then, which stands for its
 * identity: (NSB_DEV_FOREIGN, arrival), a device no file has.  Not taken
 * by a mapping (received.c).
 */
#define NSB_DEV_FOREIGN UINT64_MAX
/* [signal-safe] */
extern NSB_INTERNAL atomic_uint nsb_received_foreign_given;	/* 0: nothing to look at */
static inline bool
nsb_received_foreign_any(void)
{
	return atomic_load_explicit(&nsb_received_foreign_given, memory_order_relaxed) != 0;
}
bool nsb_received_foreign(int fd, uint32_t *arrival);
/* [signal-safe] The process that sent this file, where known. */
bool nsb_received_sender(uint64_t dev, uint64_t ino, int *pid, char comm[16]);

/* ---- sandbox.c: seccomp filters (SPEC §12 "System calls") ------------- */

/* [signal-safe] The fstat system call itself.  glibc's fstat() is
 * newfstatat(fd, "", AT_EMPTY_PATH), which Firefox's content sandbox
 * traps to its SIGSYS handler; trapped while every signal is blocked (the
 * library's locks, its handler), the kernel kills the process instead. */
static inline int
nsb_fstat(int fd, struct stat *st)
{
	return (int)syscall(SYS_fstat, fd, st);
}

/* [signal-safe] True if no seccomp filter is in force: only then may the
 * library make a call some filter refuses or kills on (sandbox.c lists
 * them).  Reads /proc/self/status on its first call. */
extern NSB_INTERNAL _Atomic int nsb_filter_state;	/* 0 not known yet, 1 none, 2 filtered */
bool nsb_unfiltered_ask(void);
static inline bool
nsb_unfiltered(void)
{
	int state = atomic_load_explicit(&nsb_filter_state, memory_order_acquire);

	if (__builtin_expect(state != 0, 1))
		return state == 1;
	return nsb_unfiltered_ask();
}
/* [signal-safe] openat(AT_FDCWD, path, flags) of a /proc file, with
 * SIGSYS deliverable under a filter (a browser's broker trap). */
int nsb_proc_open(const char *path, int flags);
int nsb_proc_open_trapped(const char *path, int flags);	/* [signal-safe] */
/* [signal-safe] A mapping the policy would protect, left as the program
 * made it for want of an allowed call: counted, logged once. */
void nsb_sandbox_unchecked(void);

/* ---- log.c: counters and messages -------------------------------------- */

/* What the log said about one mapping (kept in its account): with
 * NOSIGBUS_LOG=1 a line at its first rescue, then at most one a second
 * with the count, and one when it is unmapped.  Only the process that
 * rescued (pid) reports: a fork child inherits its parent's accounts. */
struct nsb_maplog {
	atomic_int pid;			/* 0: nothing rescued yet */
	atomic_uint_least64_t faults;	/* rescues */
	atomic_uint_least64_t pages;	/* pages they replaced */
	atomic_uint_least64_t reported;	/* pages the lines so far counted */
	atomic_int_least64_t next_ns;	/* no count line before (CLOCK_MONOTONIC) */
	atomic_uint file;		/* files.c index, for the last line */
	atomic_uint meta;
};

struct nsb_counters {
	atomic_uint_least64_t rescues;
	atomic_uint_least64_t pages;
	atomic_uint_least64_t failures;
	atomic_uint_least64_t unverified;
	atomic_uint_least64_t unchecked;	/* left unprotected under a filter */
	atomic_uint_least64_t lost;	/* protection lost: no memory for records */
};
extern NSB_INTERNAL struct nsb_counters nsb_counters;

void nsb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* [signal-safe] */
/* [signal-safe] Counts a rescue and says what the log level asks for; lets
 * go of the record (nsb_ranges_leave(ticket)) before it writes. */
enum nsb_rescue_kind {
	NSB_RESCUE_PAST_END,
	NSB_RESCUE_UNVERIFIED,	/* the file's size could not be learnt */
	NSB_RESCUE_PEERS_ERROR,	/* inside a received file's size */
};
void nsb_log_rescue(uintptr_t addr, const struct nsb_range *r, size_t pages,
		    enum nsb_rescue_kind kind, int ticket);
/* Table lock held: the mapping's last line, written at the unlock. */
void nsb_log_unmapped(struct nsb_maplog *m);
/* At the unlock: takes the lines nsb_log_unmapped queued (out: at least
 * NSB_LOG_QUEUE bytes), to write after the lock is let go. */
#define NSB_LOG_QUEUE 512
extern NSB_INTERNAL size_t nsb_log_queued;
size_t nsb_log_take_queued(char *out);
static inline size_t
nsb_log_take(char *out)
{
	return nsb_log_queued ? nsb_log_take_queued(out) : 0;
}
void nsb_log_write(const char *buf, size_t len);
void nsb_log_failure(uintptr_t addr, int err);	/* [signal-safe] */
void nsb_log_unchecked(bool filtered);	/* [signal-safe] sandbox.c, once each */
void nsb_log_lost(void);	/* ranges.c, once */
void nsb_log_init(void);
/* Per-process counters: zeroes them in a fork child. */
void nsb_log_after_fork_child(void);

/* ---- mman.c: shared with api.c ----------------------------------------- */

/* Records r, a new mapping (the library's handler is installed first),
 * with a new account of what will be replaced in it.  Table lock held. */
int nsb_record(struct nsb_range *r);
void nsb_forget_stale(void *p, size_t len);	/* mman.c: a new mapping's stale records */

/* ---- refresh.c: the file shown again where it came back --------------- */

/* Maps the file again over the replaced units of the shared file records
 * of [start, end) that it covers now (whole: all of them, its size
 * unasked); how many pages.  Table lock held. */
size_t nsb_refresh(uintptr_t start, uintptr_t end, bool whole);

#endif /* NSB_H */
