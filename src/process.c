/* SPDX-License-Identifier: MIT */
/*
 * process.c - the library's locks, and the one place that says what fork
 * does to the library's per-process state (SPEC §7).
 *
 * No handler of the program's that could stop its thread ever runs in a
 * thread that holds a lock, so a program that stops threads from a
 * handler (a garbage collector) can never stop one holding it.  Holders
 * only make system calls and touch the library's memory.  nsb_lock()
 * keeps handlers out by blocking every signal for as long as the lock is
 * held: two rt_sigprocmask calls, as much as a one-page mprotect costs.
 * nsb_lock_quiet(), the table lock's, skips the mask where the program has
 * no handler of its own, or handlers only for signals of its own faults
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT: Rust's stack
 * guard, crash reporters, a sandbox's SIGSYS; own_fault_signal below).
 * Every other signal is then ignored, stops or kills the whole process
 * (which stops every thread, not one holder), or is the C library's
 * (SIGCANCEL, SIGSETXID: never blocked by the library either); a holder
 * raises no fault, so a fault handler runs in one only where another
 * thread or process sends its signal, and then its calls to the library
 * are nested calls (ranges.c): they go straight to the kernel rather than
 * wait for the lock their own thread holds, which the lock words tell
 * exactly (nsb_lock_mine, inline in nsb.h).  Such a handler is taken not to stop its thread
 * to wait for another (libnosigbus(7), "Limitations").  The handlers are
 * known once the library's own is installed (dispositions.c asks the
 * kernel for every signal's action then, and sees every later sigaction,
 * signal, sigset...); the first other handler the program installs ends
 * it for good (nsb_process_handler_coming), after the threads that hold
 * a lock without the mask have let go: the program cannot stop them, with
 * no such handler yet.  A handler installed with a raw system call is not
 * seen (libnosigbus(7), "Limitations").
 *
 * fork: the parent takes every lock last, after the program's own fork
 * handlers have run (nsb_process_start), so the child never inherits
 * one held by a thread it does not have, and the child resets, in one
 * sequence below, everything that belonged to threads it does not have:
 * rescues in flight and their claims, readers of the table, held
 * signals, the threads' views, the counters.  vfork and the C library's
 * posix_spawn share our memory and run no handlers: what they must not
 * touch is guarded with nsb_in_vfork_child().  In a process of one
 * thread (glibc's __libc_single_threaded) no lock can be held when fork
 * is called - a holder blocks every signal, or there is no handler to
 * call fork - so the fork takes none, and costs no system call.
 *
 * Who we are, without a system call (a shell pays for every one of them
 * in every child it starts): glibc's getpid and gettid are system calls,
 * so the pid and each thread's tid are cached (initial-exec TLS for the
 * tid), learnt on first use and forgotten in the fork child; between our
 * fork handlers the forking thread asks the kernel.  A vfork child is
 * known by the kernel's own word: the library's vfork is clone(CLONE_VM |
 * CLONE_VFORK) with CLONE_CHILD_SETTID and CLONE_CHILD_CLEARTID on a word
 * of the calling thread's TLS, which the child runs on: the kernel writes
 * the child's tid there before the child's first instruction (a handler
 * of the child's included), and 0 when it execs or exits, before the
 * parent goes on.  posix_spawn's child (the C library's) calls nothing
 * of ours.  A process made any other way the library sees - clone(), or
 * syscall() with clone, clone3, fork or vfork, whose child shares our
 * memory or has a copy of it made behind the fork handlers' back - puts
 * the process for good in the exact mode of before: the pid it had then
 * is the owner's, and every question goes to the kernel (getpid,
 * gettid).  A process made with a raw system call instruction is not seen.
 *
 * Signal context: nsb_gettid, nsb_getpid, nsb_process_clone_coming.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

static pid_t owner_pid;	/* the process this memory belongs to (exact mode) */

/* A process was made with clone() or syscall(), or a filter installed:
 * ask the kernel.  (Read by vfork's assembly too.) */
atomic_bool nsb_exact __attribute__((visibility("hidden")));
/* The pid, once asked (not in a vfork child, nor in exact mode). */
static _Atomic pid_t cached_pid;
/* Written by the kernel (our vfork below): the tid of the vfork child
 * running on this thread's memory, from its first instruction until it
 * execs or exits; 0 otherwise. */
__thread pid_t nsb_vfork_tid __attribute__((tls_model("initial-exec"), visibility("hidden")));
static __thread pid_t cached_tid __attribute__((tls_model("initial-exec")));
/* Set from this thread's vfork (nsb_vfork_coming) until it returns
 * (nsb_vfork_back): what runs on this TLS meanwhile is the vfork child,
 * marked or not (exact mode's is the plain vfork system call, whose
 * child nsb_vfork_tid does not tell), or a handler of the parent's as
 * vfork returns.  Its reader tickets are slots (ranges.c). */
__thread uint8_t nsb_vforking __attribute__((tls_model("initial-exec"), visibility("hidden")));
/* Between our fork handlers, in the forking thread: the caches are the
 * parent's, and this may already be the child. */
static __thread uint8_t forking __attribute__((tls_model("initial-exec")));
/* The fork took the locks (not in a process of one thread). */
static bool fork_locked;

/*
 * Policy mappings between the kernel's mmap and their record (mman.c
 * makes them before it takes the table lock): a fork must not come in
 * between, or the child has the mapping and not its record (the thread
 * that would record it is not in the child).  A fork waits for them
 * before it takes the locks, and while one waits, new ones are made under
 * the lock instead (nsb_process_map_begin says no).  This thread's own,
 * where a handler of the program's that interrupted one forks, is not
 * waited for: the child goes on with it, and records it.  The wait is
 * bounded (FORK_WAIT_YIELDS, tens of milliseconds on an idle machine; the
 * window is a few microseconds): a thread in the window holds no lock and
 * has its signals, so the program may stop it there, and no thread waits
 * for good for one the program can stop (doc/design.md).  A fork past
 * that bound is as before the wait: its child may lack that one record.
 */
#define FORK_WAIT_YIELDS 100000
/* Forks waiting for them (nsb_process_map_begin and _end count them in
 * in_flight_by, below; read inline, nsb.h). */
atomic_int nsb_forks_waiting __attribute__((visibility("hidden")));

/* The mask this thread had before it took its first lock. */
static __thread sigset_t *outer_mask __attribute__((tls_model("initial-exec")));

/* Set for good when the program may have a handler that is not for its
 * own faults (nsb_process_handler_coming). */
static atomic_bool handlers_possible;
/*
 * The threads that hold (or wait for) a lock without having blocked
 * signals, and the policy mappings in flight (above): each one's thread
 * number (nsb_lock_id) in a slot (nsb.h, slots.c), one slot per lock it
 * counts or mapping it makes (a handler that interrupted one may take the
 * lock, or map, itself).  One compare-exchange counts and one lets go, so
 * that a handler that interrupts its thread at any instruction knows
 * exactly which slots are its own thread's: those with its number.  (A
 * shared count beside a count of the thread's own left a window between
 * the two updates where the handler took another thread's count for its
 * own thread's, and did not wait for it: core-atk-counter,
 * core-atk-forkflight.)  A thread tries the slot of its number first.  A
 * thread that finds every slot taken takes the lock with the mask, or
 * makes its mapping under the lock (unit-slots).
 */
#define SLOTS NSB_SLOTS
#define unmasked_by (nsb_slot_words + NSB_SLOTS_UNMASKED)
/* (Read inline by nsb_process_map_begin and _end, nsb.h.) */
#define in_flight_by nsb_in_flight_by

/* This thread's locks, slots and reader tickets, plus those it is
 * taking (nsb.h): counted up before each is taken and down after each
 * is let go. */
__thread unsigned nsb_holds __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* Counts this thread (self): false where every slot is taken.  The
 * slot of its number first, inline. */
static inline bool
slot_claim(atomic_uintptr_t *slots, int self)
{
	return nsb_slot_claim_at(slots, (unsigned)self % SLOTS, (uintptr_t)self) ||
	       nsb_slots_claim(slots, SLOTS, (uintptr_t)self, (unsigned)self) >= 0;
}

/* Lets one of this thread's slots go (any: they are alike). */
static inline void
slot_release(atomic_uintptr_t *slots, int self)
{
	if (!nsb_slot_release_at(slots, (unsigned)self % SLOTS, (uintptr_t)self))
		(void)nsb_slots_release(slots, SLOTS, (uintptr_t)self, (unsigned)self);
}

/* Is a thread other than self counted? */
static bool
slot_others(atomic_uintptr_t *slots, int self)
{
	return nsb_slots_others(slots, SLOTS, (uintptr_t)self);
}

/* How many slots hold self (a vfork child's, on its parent's thread
 * number, are counted with the parent's: process.c's vfork recovery). */
static int
slot_count(atomic_uintptr_t *slots, int self)
{
	return (int)nsb_slots_count(slots, SLOTS, (uintptr_t)self);
}

/*
 * The locks are words of our own, not pthread mutexes: the word is its
 * holder's number, set by the one instruction that takes the lock and
 * cleared by the one that lets it go, so a thread can tell at every
 * instant whether it holds one (nsb_table_mine), even from a handler that
 * interrupted it anywhere in nsb_lock_quiet or nsb_unlock.  A number is
 * this thread's own, given at its first lock; a fork child's thread
 * (and a vfork child, which runs on its parent's thread) has its
 * parent's, which is what a child needs whose parent forked inside a
 * holder.  WAITERS says that a thread may sleep on the word (futex).
 */
#define WAITERS	NSB_LOCK_WAITERS
static atomic_int next_id;
/* Read inline by nsb_lock_mine() (nsb.h). */
__thread int nsb_lock_id __attribute__((tls_model("initial-exec")));

static int
my_id(void)
{
	if (__builtin_expect(nsb_lock_id == 0, 0)) {
		int id;

		do
			id = (atomic_fetch_add(&next_id, 1) + 1) & (WAITERS - 1);
		while (id == 0);
		nsb_lock_id = id;
	}
	return nsb_lock_id;
}

/* word_lock() when the word was not free: waits.  Out of line, so that
 * the usual take (one compare-exchange) saves no registers for the
 * futex call (issue 40). */
static __attribute__((noinline, cold)) void
word_lock_wait(atomic_int *w, int self)
{
	int seen;

	for (;;) {
		seen = atomic_load(w);
		if (seen == 0) {
			/* Others may sleep: whoever lets go wakes one. */
			if (atomic_compare_exchange_strong(w, &seen, self | WAITERS))
				return;
			continue;
		}
		if (!(seen & WAITERS) && !atomic_compare_exchange_strong(w, &seen, seen | WAITERS))
			continue;
		/* A handler that interrupts the wait may take the lock and let
		 * it go in between: the loop looks again. */
		int err = errno;

		syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, seen | WAITERS, NULL, NULL, 0);
		errno = err;
	}
}

static inline void
word_lock(atomic_int *w)
{
	int self = my_id(), seen = 0;

	nsb_holds_up();
	if (__builtin_expect(!atomic_compare_exchange_strong(w, &seen, self), 0))
		word_lock_wait(w, self);
}

/* word_unlock() when a thread may sleep on the word: wakes one. */
static __attribute__((noinline, cold)) void
word_wake(atomic_int *w)
{
	int err = errno;

	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = err;
}

static inline void
word_unlock(atomic_int *w)
{
	int was = atomic_exchange(w, 0);

	nsb_holds_down();
	if (__builtin_expect(was & WAITERS, 0))
		word_wake(w);
}


void
nsb_lock(struct nsb_lock *l)
{
	sigset_t all, old;

	/* A thread that holds a lock which blocked every signal still has
	 * them all blocked (a holder unblocks none but SIGBUS, whose handler
	 * takes no lock): nothing to block here, nothing to restore at
	 * unlock, where the outermost lock restores the thread's mask.  Locks
	 * are let go in the reverse order.  (The fork handlers take three
	 * locks: two rt_sigprocmask calls a fork instead of six.) */
	if (outer_mask) {
		word_lock(&l->word);
		l->masked = true;
		l->inner = true;
		return;
	}
	sigfillset(&all);
	nsb_sys_sigmask(SIG_BLOCK, &all, &old);
	word_lock(&l->word);
	/* The bytes the kernel wrote (struct nsb_kset), not all 128 of a
	 * sigset_t: the rest of old is not written, and never read. */
	memcpy(&l->saved, &old, sizeof(struct nsb_kset));
	l->masked = true;
	l->inner = false;
	outer_mask = &l->saved;
}

/* nsb_lock_quiet() past its usual way: every step from the start. */
static __attribute__((noinline)) void
lock_quiet_slow(struct nsb_lock *l)
{
	/* Before the library's handler is installed, the program's are not
	 * known yet.  Counted first, then checked: either the thread that
	 * installs a handler sees us counted and waits, or we see its flag
	 * (both sequentially consistent). */
	if (!atomic_load(&handlers_possible) && nsb_disp_installed()) {
		int self = my_id();

		if (slot_claim(unmasked_by, self)) {
			if (!atomic_load(&handlers_possible)) {
				word_lock(&l->word);
				l->masked = false;
				return;
			}
			slot_release(unmasked_by, self);
		}
	}
	nsb_lock(l);
}

/*
 * The usual way of lock_quiet_slow(): the thread has its number, its own
 * slot is free, no handler is possible and the word is free.  The same
 * steps in the same order (claim, check, count, compare-exchange), so a
 * handler that interrupts it, a fork or a vfork child sees only states
 * the slow way passes through too.  Anything else undoes what it did, in
 * the reverse order (a failed compare-exchange changed nothing but the
 * count; the slot is the one this thread just claimed, nsb_slot_free),
 * and takes the slow way from the start, as a thread just arriving: the
 * slow way itself lets go of its slot and starts again (nsb_lock) when
 * the check fails.  Only tail calls: no register saved, no frame (about
 * 15 instructions a call, issue 40).  No system call on either way.
 */
void
nsb_lock_quiet(struct nsb_lock *l)
{
	int self = nsb_lock_id;

	if (__builtin_expect(self != 0 && !atomic_load(&handlers_possible) &&
			     nsb_disp_installed(), 1) &&
	    nsb_slot_claim_at(unmasked_by, (unsigned)self % SLOTS, (uintptr_t)self)) {
		if (__builtin_expect(!atomic_load(&handlers_possible), 1)) {
			int seen = 0;

			nsb_holds_up();
			if (__builtin_expect(atomic_compare_exchange_strong(&l->word, &seen, self), 1)) {
				l->masked = false;
				return;
			}
			nsb_holds_down();
		}
		nsb_slot_free(unmasked_by, (int)((unsigned)self % SLOTS));
	}
	lock_quiet_slow(l);
}

void
nsb_unlock(struct nsb_lock *l)
{
	sigset_t old;

	if (!l->masked) {
		word_unlock(&l->word);
		slot_release(unmasked_by, nsb_lock_id);
		return;
	}
	if (l->inner) {
		word_unlock(&l->word);
		return;
	}
	bool outermost = outer_mask == &l->saved;

	memcpy(&old, &l->saved, sizeof(struct nsb_kset));	/* what the kernel reads */
	if (outermost)
		outer_mask = NULL;
	word_unlock(&l->word);
	nsb_sys_sigmask(SIG_SETMASK, &old, NULL);
	/* A SIGBUS held for the process while this thread had every signal
	 * blocked here: the kernel would deliver it now (dispositions.c). */
	if (outermost)
		nsb_disp_lock_left();
}

/*
 * Signals the kernel sends a thread for what its own instruction did (a
 * fault, a trap, a system call a seccomp filter traps) and the one its
 * own abort() raises.  A holder runs only the library's code on the
 * library's memory and makes only calls that every filter allows
 * (sandbox.c), so such a handler runs in a holder only where another
 * thread or process sends the signal (kill, pthread_kill): then the
 * program's calls from that handler go straight to the kernel (nested
 * calls, ranges.c).  The handlers programs install for these - Rust's
 * stack guard, crash reporters, a sandbox's SIGSYS - do not stop their
 * thread to wait for another, so they need no mask.
 */
static bool
own_fault_signal(int sig)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE:
	case SIGTRAP: case SIGSYS: case SIGABRT:
		return true;
	}
	return false;
}

void
nsb_process_handler_coming(int sig)
{
	if (own_fault_signal(sig) || atomic_load(&handlers_possible))
		return;
	atomic_store(&handlers_possible, true);
	/* A handler that interrupted this thread while it held the table
	 * lock without the mask (a nested call, ranges.c) cannot wait: the
	 * threads counted may be waiting for that lock, which its thread
	 * lets go only once it returns (libnosigbus(7), LIMITATIONS). */
	if (nsb_lock_mine(&nsb_table_lock))
		return;
	/* Holders without the mask finish what they do: a few system calls,
	 * which only the handlers of faults can interrupt.  Not this thread,
	 * if a handler that interrupted it (waiting for the lock) installs
	 * this one. */
	while (slot_others(unmasked_by, nsb_lock_id))
		sched_yield();
}

sigset_t *
nsb_outer_mask(void)
{
	return outer_mask;
}

/* [signal-safe] Reads one word of the program's memory, or returns false
 * where the kernel would fail with EFAULT, instead of crashing: the kernel
 * reads the 8-byte signal set, and rt_sigprocmask can block nothing for
 * good.  errno is left as it was either way: a caller that fails with
 * EFAULT says so itself, and one that goes on to a call that succeeds
 * (nanosleep's rem, which the kernel writes only when interrupted) must
 * not leave the probe's EFAULT behind. */
bool
nsb_read_word(const void *user, void *out)
{
	uint64_t old, val;
	int saved_errno = errno;

	_Static_assert(sizeof(void *) == 8, "64-bit targets only");
	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, user, &old, 8) < 0) {
		errno = saved_errno;
		return false;
	}
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	memcpy(&val, user, 8);
	memcpy(out, &val, 8);
	return true;
}

/* [signal-safe] Can len bytes (8 or more, less than a page) at user be
 * written, as the kernel's copy to user memory would find?  Its first and
 * last 8 bytes are written with this thread's mask (rt_sigprocmask's old
 * set), which the caller then writes over; false where the kernel would
 * fail with EFAULT.  errno untouched. */
bool
nsb_write_probe(void *user, size_t len)
{
	int saved_errno = errno;
	bool ok = syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, user, 8) == 0 &&
		  syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, (char *)user + len - 8, 8) == 0;

	errno = saved_errno;
	return ok;
}

/* Does the process run other threads?  (/proc/self/stat, field 20.) */
bool
nsb_other_threads(void)
{
	char buf[1024], *p;
	ssize_t n;
	int fd, field = 2;

	/* Under a seccomp filter /proc is not opened (sandbox.c): "yes",
	 * the careful answer. */
	fd = nsb_unfiltered() ? open("/proc/self/stat", O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the name may hold anything */
	if (!p)
		return true;
	for (; *p && field < 20; p++)
		if (*p == ' ')
			field++;
	return atoi(p) != 1;
}

/* [signal-safe] */
pid_t
nsb_gettid(void)
{
	pid_t tid = nsb_vfork_tid;

	if (tid)
		return tid;
	if (forking || atomic_load(&nsb_exact))
		return (pid_t)syscall(SYS_gettid);
	tid = cached_tid;
	if (!tid)
		cached_tid = tid = (pid_t)syscall(SYS_gettid);
	return tid;
}

/* [signal-safe] A vfork child's pid is its one thread's tid. */
pid_t
nsb_getpid(void)
{
	pid_t pid = nsb_vfork_tid;

	if (pid)
		return pid;
	if (forking || atomic_load(&nsb_exact))
		return getpid();
	pid = atomic_load_explicit(&cached_pid, memory_order_relaxed);
	if (!pid) {
		pid = getpid();
		atomic_store_explicit(&cached_pid, pid, memory_order_relaxed);
	}
	return pid;
}

bool
nsb_in_vfork_child(void)
{
	if (nsb_vfork_tid)
		return true;
	return atomic_load(&nsb_exact) && getpid() != owner_pid;
}

/* [signal-safe] Called by the thread that makes the process, before it
 * exists: this thread is the owner's (a vfork child's own children run
 * on its memory or a copy of it: they are taken for vfork children). */
void
nsb_process_clone_coming(void)
{
	if (atomic_load(&nsb_exact) || nsb_vfork_tid)
		return;
	owner_pid = nsb_getpid();
	atomic_store(&nsb_exact, true);
}

/* clone() makes a process (or thread) that runs no fork handler and may
 * share our memory and this thread's TLS. */
NSB_EXPORT int
clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	pid_t *ptid, *ctid;
	void *tls;

	/* Read as glibc's clone reads them: always, used per flags. */
	va_start(ap, arg);
	ptid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	ctid = va_arg(ap, pid_t *);
	va_end(ap);
	nsb_process_clone_coming();
	return real_clone(fn, stack, flags, arg, ptid, tls, ctid);
}
/* glibc's other name for it.  copy(): GCC's, so that the alias keeps
 * clone's attributes (-Wmissing-attributes); clang has no such attribute
 * and does not warn. */
#if defined(__clang__)
NSB_EXPORT __typeof__(clone) __clone __attribute__((alias("clone")));
#else
NSB_EXPORT __typeof__(clone) __clone __attribute__((alias("clone"), copy(clone)));
#endif

/*
 * vfork(), in assembly like the C library's (no frame: the child returns
 * on the parent's stack, and the parent after it): clone(CLONE_VM |
 * CLONE_VFORK | SIGCHLD) with the child's tid written to, and cleared
 * from, nsb_vfork_tid by the kernel.  In a vfork child (the word is set)
 * a nested vfork is plain, so that the word stays set in the child once
 * its own child has gone.  The parent clears the word (a child that dumps
 * core leaves it).  In exact mode - a filter installed through a call the
 * library sees puts the process there: some filters (Chromium's) kill a
 * clone whose flags they do not know - it is the vfork system call, as
 * the C library's; so is it where the clone is refused (EPERM, ENOSYS
 * under a filter the library did not see), in exact mode from then on.
 */
#define NSB_STR2(x) #x
#define NSB_STR(x) NSB_STR2(x)
#define VFORK_FLAGS (CLONE_VM | CLONE_VFORK | SIGCHLD)
#define VFORK_TID_FLAGS (VFORK_FLAGS | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID)
void nsb_vfork_refused(void);
void nsb_vfork_coming(void);
void nsb_vfork_back(void);
long nsb_syscall_failed(long ret);
#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	".globl __vfork\n"
	".type __vfork, @function\n"
	".p2align 4\n"
	"vfork:\n"
	"__vfork:\n"
	".cfi_startproc\n"
	"	subq $8, %rsp\n"	/* 16-byte aligned at the call */
	".cfi_adjust_cfa_offset 8\n"
	"	call nsb_vfork_coming\n"
	"	addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"	movq nsb_vfork_tid@gottpoff(%rip), %r10\n"
	"	addq %fs:0, %r10\n"	/* &nsb_vfork_tid: clone's child_tid */
	"	cmpl $0, (%r10)\n"
	"	jne 2f\n"
	"	cmpb $0, nsb_exact(%rip)\n"
	"	jne 2f\n"
	"	popq %r9\n"	/* the return address, kept in a register */
	".cfi_adjust_cfa_offset -8\n"
	".cfi_register %rip, %r9\n"
	"	movl $" NSB_STR(VFORK_TID_FLAGS) ", %edi\n"
	"	xorl %esi, %esi\n"
	"	xorl %edx, %edx\n"
	"	xorl %r8d, %r8d\n"
	"	movl $" NSB_STR(SYS_clone) ", %eax\n"
	"	syscall\n"
	"	pushq %r9\n"
	".cfi_adjust_cfa_offset 8\n"
	".cfi_rel_offset %rip, 0\n"
	"	testq %rax, %rax\n"
	"	je 6f\n"	/* the child */
	"	movl $0, (%r10)\n"
	"	cmpq $-4095, %rax\n"
	"	jae 3f\n"
	"7:	pushq %rax\n"	/* the parent: what its child left */
	".cfi_adjust_cfa_offset 8\n"
	"	call nsb_vfork_back\n"
	"	popq %rax\n"
	".cfi_adjust_cfa_offset -8\n"
	"1:	ret\n"
	/* As glibc's: with a shadow stack (shared with the parent), the
	 * child goes back without popping it. */
	"6:	movq nsb_vfork_ran@gottpoff(%rip), %rsi\n"
	"	movb $1, %fs:(%rsi)\n"	/* the child has run: nsb_vfork_early */
	"	xorl %esi, %esi\n"
	"	rdsspq %rsi\n"
	"	testq %rsi, %rsi\n"
	"	je 1b\n"
	"	popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	jmp *%rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"3:	cmpq $-" NSB_STR(EPERM) ", %rax\n"
	"	je 4f\n"
	"	cmpq $-" NSB_STR(ENOSYS) ", %rax\n"
	"	jne 5f\n"
	"4:	subq $8, %rsp\n"	/* 16-byte aligned at the call */
	".cfi_adjust_cfa_offset 8\n"
	"	call nsb_vfork_refused\n"
	"	addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"2:	popq %r9\n"
	".cfi_adjust_cfa_offset -8\n"
	".cfi_register %rip, %r9\n"
	"	movl $" NSB_STR(SYS_vfork) ", %eax\n"
	"	syscall\n"
	"	pushq %r9\n"
	".cfi_adjust_cfa_offset 8\n"
	".cfi_rel_offset %rip, 0\n"
	"	cmpq $-4095, %rax\n"
	"	jae 5f\n"
	"	testq %rax, %rax\n"
	"	jne 7b\n"
	"	ret\n"
	"5:	movq %rax, %rdi\n"
	"	jmp nsb_syscall_failed\n"
	".cfi_endproc\n"
	".size vfork, .-vfork\n"
	".size __vfork, .-__vfork\n");
#elif defined(__aarch64__)
/* The return address stays in x30; the kernel keeps every register but x0. */
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, %function\n"
	".globl __vfork\n"
	".type __vfork, %function\n"
	".p2align 2\n"
	"vfork:\n"
	"__vfork:\n"
	".cfi_startproc\n"
	"	hint 34\n"	/* bti c */
	"	stp x29, x30, [sp, #-16]!\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset 29, -16\n"
	".cfi_offset 30, -8\n"
	"	mov x29, sp\n"
	"	bl nsb_vfork_coming\n"
	"	ldp x29, x30, [sp], #16\n"
	".cfi_def_cfa_offset 0\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	"	mrs x9, tpidr_el0\n"
	"	adrp x10, :gottprel:nsb_vfork_tid\n"
	"	ldr x10, [x10, #:gottprel_lo12:nsb_vfork_tid]\n"
	"	add x4, x9, x10\n"	/* &nsb_vfork_tid: clone's child_tid */
	"	ldr w11, [x4]\n"
	"	cbnz w11, 2f\n"
	"	adrp x10, nsb_exact\n"
	"	ldrb w11, [x10, #:lo12:nsb_exact]\n"
	"	cbnz w11, 2f\n"
	"	mov x0, #(" NSB_STR(VFORK_TID_FLAGS) " & 0xffff)\n"
	"	movk x0, #(" NSB_STR(VFORK_TID_FLAGS) " >> 16), lsl #16\n"
	"	mov x1, #0\n"
	"	mov x2, #0\n"
	"	mov x3, #0\n"
	"	mov x8, #" NSB_STR(SYS_clone) "\n"
	"	svc #0\n"
	"	cbz x0, 8f\n"	/* the child */
	"	str wzr, [x4]\n"
	"	cmn x0, #4095\n"
	"	b.cs 3f\n"
	"7:	stp x0, x30, [sp, #-16]!\n"	/* the parent: what its child left */
	".cfi_def_cfa_offset 16\n"
	".cfi_offset 30, -8\n"
	"	bl nsb_vfork_back\n"
	"	ldp x0, x30, [sp], #16\n"
	".cfi_def_cfa_offset 0\n"
	".cfi_restore 30\n"
	"1:	ret\n"
	"3:	cmn x0, #" NSB_STR(EPERM) "\n"
	"	b.eq 4f\n"
	"	cmn x0, #" NSB_STR(ENOSYS) "\n"
	"	b.ne 5f\n"
	"4:	stp x29, x30, [sp, #-16]!\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset 29, -16\n"
	".cfi_offset 30, -8\n"
	"	mov x29, sp\n"
	"	bl nsb_vfork_refused\n"
	"	ldp x29, x30, [sp], #16\n"
	".cfi_def_cfa_offset 0\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	"2:	mov x0, #" NSB_STR(VFORK_FLAGS) "\n"
	"	mov x1, #0\n"
	"	mov x2, #0\n"
	"	mov x3, #0\n"
	"	mov x4, #0\n"
	"	mov x8, #" NSB_STR(SYS_clone) "\n"
	"	svc #0\n"
	"	cmn x0, #4095\n"
	"	b.cs 5f\n"
	"	cbnz x0, 7b\n"
	"	ret\n"
	"5:	b nsb_syscall_failed\n"
	"8:	mrs x9, tpidr_el0\n"	/* the child has run: nsb_vfork_early */
	"	adrp x10, :gottprel:nsb_vfork_ran\n"
	"	ldr x10, [x10, #:gottprel_lo12:nsb_vfork_ran]\n"
	"	mov w11, #1\n"
	"	strb w11, [x9, x10]\n"
	"	ret\n"
	".cfi_endproc\n"
	".size vfork, .-vfork\n"
	".size __vfork, .-__vfork\n");
#endif

/*
 * A vfork child that dies - killed, or by a seccomp filter of its own -
 * while inside a call of the library's leaves behind, on the memory and
 * the TLS it shares with its parent's thread, what it had taken there:
 * a lock (whose word holds this thread's number: every later call of the
 * parent's would be taken for a nested one, ranges.c, and its mappings go
 * unrecorded; another thread would wait for it for good), the table half
 * changed, a span in flux, a reader's ticket, a rescue's slot and claims,
 * counts of holders without the mask and of policy mappings in flight.
 * What this thread held as it called vfork is noted here
 * (nsb_vfork_coming, from the assembly above); once its child has exec'd
 * or gone, the parent compares (nsb_vfork_back), no system call.  The
 * usual case is one word: nsb_holds (nsb.h), counted up before every
 * lock, slot and reader ticket this thread takes and down after it lets
 * go, so that a child killed at any instruction leaves it changed if it
 * took anything it did not give back (and perhaps if it did: a child
 * killed between a release and the count).  Where it is as before and
 * the parent held nothing as it called vfork, the child left nothing;
 * else the parent compares what it held (its TLS, the lock words, the
 * slots: in nsb_vfork_coming too, only where it held something).  Only
 * where they differ - the child died holding something - does it take
 * back what was left:
 * the counts, the locks (the dispositions' and the timers' holders change
 * nothing a vfork child could leave half done: let go), and the table
 * lock, adopted as if this thread had just taken it, all with every
 * signal blocked (rt_sigprocmask, twice: the one system call of the
 * recovery besides the resync's); under it the table is made whole
 * (nsb_ranges_after_vfork_death: its copies alike again, the counts of
 * the files and accounts its records name made from them) and every
 * record made the kernel's again
 * as the lock is let go (ranges.c's settle: /proc/self/maps read where it
 * may be, else mincore, as for a nested call's notes).
 */
struct vfork_held {
	unsigned holds;		/* nsb_holds */
	sigset_t *outer;	/* outer_mask */
	int unmasked;		/* slots of unmasked_by with our number */
	int maps;		/* ... of in_flight_by */
	uint8_t locks;		/* VFORK_TABLE... held */
	uint8_t readers[2];	/* nsb_my_readers */
};
static __thread struct vfork_held vfork_held __attribute__((tls_model("initial-exec")));
#define VFORK_TABLE	1
#define VFORK_DISP	2
#define VFORK_TIMERS	4

static inline uint8_t
locks_mine(void)
{
	return (nsb_lock_mine(&nsb_table_lock) ? VFORK_TABLE : 0) |
	       (nsb_lock_mine(&nsb_disp_lock) ? VFORK_DISP : 0) |
	       (nsb_lock_mine(&nsb_timers_lock) ? VFORK_TIMERS : 0);
}

/* Set by the child as it returns from the clone (vfork's assembly, the
 * marked path only), on the TLS it shares with this thread: see
 * nsb_vfork_early. */
NSB_INTERNAL __thread uint8_t nsb_vfork_ran __attribute__((tls_model("initial-exec")));

static void settle(void);

/* Before the clone (vfork's assembly).  In a vfork child, whose own vfork
 * is plain, nothing: the snapshot is its parent's.  A vfork of a handler
 * that runs as an earlier vfork's clone returns (nsb_vfork_ran set) first
 * takes back what that child left (nsb_vfork_early): its snapshot would
 * hold it. */
__attribute__((used)) void
nsb_vfork_coming(void)
{
	if (nsb_vfork_tid)
		return;
	if (__builtin_expect(nsb_vfork_ran != 0, 0))
		settle();
	nsb_vfork_ran = 0;
	nsb_vforking = 1;
	vfork_held.holds = nsb_holds;
	vfork_held.outer = outer_mask;
	if (__builtin_expect(nsb_holds == 0, 1)) {
		/* No lock, slot or ticket of this thread's, nor one being
		 * taken (a handler that interrupted a take vforks before
		 * it is made). */
		vfork_held.unmasked = vfork_held.maps = 0;
		vfork_held.locks = 0;
	} else {
		vfork_held.unmasked = slot_count(unmasked_by, nsb_lock_id);
		vfork_held.maps = slot_count(in_flight_by, nsb_lock_id);
		vfork_held.locks = locks_mine();
	}
	vfork_held.readers[0] = nsb_my_readers[0];
	vfork_held.readers[1] = nsb_my_readers[1];
}

/* A lock word the dead child left holding this thread's number: free,
 * and whoever sleeps on it woken. */
static void
let_go(struct nsb_lock *l)
{
	word_unlock(&l->word);
}

/* The table lock the dead child left: this thread's now, as nsb_lock()
 * would have made it under an outer lock (the fields the child wrote are
 * its own: its mask was its own task's).  Every signal is blocked already
 * (settle, below), the mask to restore kept there. */
static void
adopt(struct nsb_lock *l)
{
	l->masked = true;
	l->inner = true;
}

/* Does this thread hold what it held as it called vfork, no more?  Loads
 * of its TLS and of the lock words; what more the table lock is, in
 * *left. */
static inline bool
vfork_same(uint8_t *left)
{
	const struct vfork_held *h = &vfork_held;

	*left = 0;
	/* The usual case: the child took nothing it did not give back. */
	if (__builtin_expect(nsb_holds == h->holds && h->holds == 0, 1))
		return true;
	*left = locks_mine() & ~h->locks;
	if (*left == 0 && slot_count(unmasked_by, nsb_lock_id) == h->unmasked &&
	    slot_count(in_flight_by, nsb_lock_id) == h->maps && outer_mask == h->outer &&
	    nsb_my_readers[0] == h->readers[0] && nsb_my_readers[1] == h->readers[1] &&
	    !nsb_ranges_vfork_tickets()) {
		/* (A child killed between a release and its count.) */
		nsb_holds = h->holds;
		return true;
	}
	return false;
}

/* Every signal blocked (settle): outer_mask is the caller's mask while it
 * runs, so that the locks taken and adopted are inner ones, and the table
 * lock's unlock restores nothing before the rescues' slots are let go. */
static __attribute__((noinline, cold)) void
vfork_recover(uint8_t left, sigset_t *mask)
{
	const struct vfork_held *h = &vfork_held;

	/* Counts first: the child's holders without the mask, its policy
	 * mappings in flight, its tickets (which a writer would wait for). */
	nsb_slots_drop(unmasked_by, SLOTS, (uintptr_t)nsb_lock_id, (unsigned)h->unmasked);
	nsb_slots_drop(in_flight_by, SLOTS, (uintptr_t)nsb_lock_id, (unsigned)h->maps);
	outer_mask = h->outer ? h->outer : mask;
	nsb_ranges_vfork_readers(h->readers);
	if (left & VFORK_TIMERS)
		let_go(&nsb_timers_lock);
	if (left & VFORK_DISP)
		let_go(&nsb_disp_lock);
	if (left & VFORK_TABLE) {
		adopt(&nsb_table_lock);
		nsb_ranges_after_vfork_death();
		nsb_ranges_unlock();	/* settles: the records made the kernel's */
	}
	/* A rescue's slot and claims: once the table is whole (give_back
	 * reads it). */
	nsb_rescue_vfork_left();
	outer_mask = h->outer;
	/* Everything the child took is given back: the count is as the
	 * parent left it. */
	nsb_holds = h->holds;
}

/*
 * The parent compares, once its child has exec'd or gone: from vfork's
 * assembly (nsb_vfork_back), or first from a handler of its own that ran
 * as the clone returned (nsb_vfork_early).  Where the child left nothing,
 * loads only; else, with every signal blocked (rt_sigprocmask, twice),
 * compared again and taken back: a handler that interrupted the first
 * comparison may have taken it back already, and none can run in the
 * middle of it.  The mark is cleared before: the recovery's own calls
 * (nsb_init) do not come back here.
 */
static void
settle(void)
{
	sigset_t all, old;
	uint8_t left;
	int err;

	if (__builtin_expect(vfork_same(&left), 1)) {
		nsb_vfork_ran = 0;
		return;
	}
	err = errno;
	sigfillset(&all);
	nsb_sys_sigmask(SIG_BLOCK, &all, &old);
	nsb_vfork_ran = 0;
	atomic_signal_fence(memory_order_seq_cst);
	if (!vfork_same(&left))
		vfork_recover(left, &old);
	nsb_sys_sigmask(SIG_SETMASK, &old, NULL);
	/* A SIGBUS held for the process while every signal was blocked
	 * here, as an outermost lock's unlock (dispositions.c). */
	if (!vfork_held.outer)
		nsb_disp_lock_left();
	errno = err;
}

/*
 * [signal-safe] The first entry of the library's (nsb_init, the SIGBUS
 * handler) in a thread whose vfork child has run (nsb_vfork_ran, set by
 * the child on their shared TLS) and whose nsb_vfork_back has not yet
 * compared.  The child's death queues SIGCHLD to its parent (and any
 * signal sent while the parent waited is held: the kernel's wait is
 * killable only), delivered as the clone returns, before vfork's
 * assembly takes back what the child left: a handler's mapping call there
 * found the table lock holding its thread's number, was taken for a
 * nested one and went to the kernel unrecorded (core-vforkchld).  The
 * parent runs nothing between the clone and its return, and nothing
 * after it while the child runs (vfork), so this is the parent after the
 * child's exec or death, not one before the clone (the mark is cleared
 * by nsb_vfork_coming): it compares now, as nsb_vfork_back would, which
 * then finds nothing.  The child itself (the mark set too) is known by
 * its tid, on its TLS from its first instruction (CLONE_CHILD_SETTID),
 * cleared by the kernel as it exec's or dies.  No system call where the
 * child left nothing.
 */
void
nsb_vfork_early(void)
{
	if (nsb_vfork_tid)
		return;
	settle();
}

/* The parent, once its vfork child has exec'd or gone (vfork's assembly;
 * errno is the caller's): the vfork is over (nsb_vforking), then the
 * comparison, nsb_vfork_early's.  In the parent nsb_vfork_tid is 0 here
 * (the assembly cleared it), in a vfork child's own plain vfork its tid:
 * nothing. */
__attribute__((used)) void
nsb_vfork_back(void)
{
	if (!nsb_vfork_tid)
		nsb_vforking = 0;
	nsb_vfork_early();
}

/* The clone that marks a vfork child was refused: exact mode, then the
 * vfork system call. */
__attribute__((used)) void
nsb_vfork_refused(void)
{
	nsb_process_clone_coming();
}

/*
 * The locks are taken in this order everywhere: table, then dispositions.
 * The timers lock's holders take no other and make no call (threads.c),
 * so it could come anywhere but before the table's: a handler that
 * interrupted a table holder may make a thread (the timers lock) while
 * another thread forks.  The first lock's saved mask is the forking
 * thread's own, the one the child gets back.
 *
 * A fork from a handler of the program's that interrupted this thread
 * while it held the table lock without the mask (a handler of a fault,
 * sent by another thread: process.c above) leaves the table lock to the
 * interrupted call, which goes on in parent and child alike once the
 * handler returns: the child keeps it held by its thread.
 */
/* forking == FORK_NESTED: the table lock was this thread's already (per
 * thread: handlers on two threads may fork at once). */
#define FORK_NESTED 2
#define fork_nested (forking == FORK_NESTED)

/* A policy mapping's kernel mmap comes (mman.c): false where a fork
 * waits, or every slot is taken; then it is made under the lock.  The
 * first try, on the slot of this thread's number, is inline (nsb.h);
 * this is the rest. */
bool
nsb_process_map_begin_slow(void)
{
	int self = my_id();

	if (!slot_claim(in_flight_by, self))
		return false;
	if (atomic_load(&nsb_forks_waiting) == 0)
		return true;
	slot_release(in_flight_by, self);
	return false;
}

/* ... and is recorded, or failed: where the inline try did not find
 * this thread's number in its slot. */
void
nsb_process_map_end_slow(void)
{
	slot_release(in_flight_by, nsb_lock_id);
}

static void
before_fork(void)
{
	forking = nsb_lock_mine(&nsb_table_lock) ? FORK_NESTED : 1;
	/* One thread (never more since it started, nor any made behind
	 * glibc's back): no lock is held but by this thread, and none can
	 * be taken while we fork. */
	fork_locked = !__libc_single_threaded || atomic_load(&nsb_exact);
	if (!fork_locked)
		return;
	atomic_fetch_add(&nsb_forks_waiting, 1);
	for (int i = 0; i < FORK_WAIT_YIELDS && slot_others(in_flight_by, nsb_lock_id); i++)
		sched_yield();
	if (!fork_nested)
		nsb_lock(&nsb_table_lock);
	nsb_lock(&nsb_timers_lock);
	nsb_lock(&nsb_disp_lock);
}

static void
after_fork_parent(void)
{
	if (fork_locked) {
		nsb_unlock(&nsb_disp_lock);
		nsb_unlock(&nsb_timers_lock);
		if (!fork_nested)
			nsb_unlock(&nsb_table_lock);
		atomic_fetch_sub(&nsb_forks_waiting, 1);
	}
	forking = false;
}

/* The child's reset; the locks' saved mask is the caller's business. */
static void
reset_child(bool nested)
{

	/* A new pid and tid, learnt again when asked (the resets below may);
	 * a vfork child's word, if a vfork child forked, is its memory's. */
	atomic_store(&cached_pid, 0);
	cached_tid = 0;
	nsb_vfork_tid = 0;
	nsb_vforking = 0;
	forking = false;
	if (atomic_load(&nsb_exact))
		owner_pid = getpid();
	/* The locks are free, or this thread's: its number is the
	 * parent's (my_id).  No other lock can be held by a thread with the
	 * table lock unmasked and interrupted (a holder of the others has
	 * every signal blocked). */
	outer_mask = NULL;
	atomic_store(&nsb_timers_lock.word, 0);
	atomic_store(&nsb_disp_lock.word, 0);
	atomic_store(&nsb_table_lock.word, nested ? my_id() : 0);
	/* Threads that waited for the lock without the mask are not here,
	 * nor their policy mappings in flight, nor other forks. */
	nsb_slots_keep_only(unmasked_by, SLOTS, (uintptr_t)my_id());
	nsb_slots_keep_only(in_flight_by, SLOTS, (uintptr_t)my_id());
	atomic_store(&nsb_forks_waiting, 0);
	nsb_files_after_fork_child();
	nsb_ranges_after_fork_child(nested);
	nsb_rescue_after_fork_child();
	nsb_disp_after_fork_child();
	nsb_log_after_fork_child();
	/* What this thread holds now (the fork's locks were reset, not let
	 * go): its count, made again. */
	nsb_holds = (nsb_lock_mine(&nsb_table_lock) ? 1u : 0u) +
		    (unsigned)slot_count(unmasked_by, my_id()) +
		    (unsigned)slot_count(in_flight_by, my_id()) + nsb_my_readers[0] +
		    nsb_my_readers[1];
}

static void
after_fork_child(void)
{
	sigset_t mask = fork_nested ? nsb_timers_lock.saved : nsb_table_lock.saved;

	reset_child(fork_nested);
	if (fork_locked)
		nsb_sys_sigmask(SIG_SETMASK, &mask, NULL);
}

/* Around _Fork, which runs no atfork handler (threads.c): the caller's
 * caches are the parent's until the child's reset. */
void
nsb_process_Fork_window(bool open)
{
	forking = open;
}

/* A clone that copies the process, made by syscall() (sandbox.c): fork's
 * own handlers around it, the locks taken as for fork, so that the child
 * never has a table another thread was changing. */
void
nsb_process_copy_clone(int phase)
{
	if (phase == 0)
		before_fork();
	else if (phase == 1)
		after_fork_parent();
	else
		after_fork_child();
}

/* The child of _Fork, which runs no atfork handler (threads.c). */
void
nsb_process_after_Fork_child(void)
{
	/* _Fork took no lock: the table lock is this thread's only where
	 * a handler that interrupted its holder called _Fork (above). */
	reset_child(nsb_lock_mine(&nsb_table_lock));
}

/*
 * From the constructor, before any code of the program's can register
 * its own: the C library runs prepare handlers in the reverse order of
 * registration and the others in order, so ours take the library's locks
 * after every handler of the program's has run, and give them back (or
 * reset them, in the child) before any runs: a program's handler may map,
 * unmap, mprotect and change signals like any code.  The C library keeps
 * its first handlers in static storage; no system call.  (Loaded later
 * with dlopen, the library's handlers come after those registered before:
 * such a program's handlers must not call the interposed functions.)
 *
 * The owner's pid is not asked here: the thread that makes a child that
 * shares our memory without being a vfork child (clone(CLONE_VM), as
 * LTP's clone tests make) learns it before the child exists
 * (nsb_process_clone_coming), so the child is never taken for the owner.
 */
void
nsb_process_start(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
