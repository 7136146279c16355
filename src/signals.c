/* SPDX-License-Identifier: MIT */
/*
 * signals.c - the interposed signal calls: sigaction and its older
 * relatives, the mask calls (the BSD ones too), sigpending and sigsuspend.
 *
 * Thin shims: each keeps the C library's contract (return value, errno,
 * EFAULT for a bad pointer where it gives EFAULT) and hands the work to
 * dispositions.c, which keeps the program's view.  glibc's signal(),
 * sigset() and friends call sigaction internally, not through the PLT,
 * so each needs its own shim; their flags are glibc's
 * (sysdeps/posix/signal.c, sysv_signal.c, sigset.c).
 *
 * Not used in signal context (but every one may be called from a signal
 * handler: dispositions.c takes its lock with every signal blocked).
 */
#include <errno.h>
#include <string.h>

#include "nsb.h"

/* Exported by glibc but not declared by its headers (or not always). */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t handler);

#ifndef SA_INTERRUPT
#define SA_INTERRUPT 0x20000000
#endif

/*
 * siginterrupt(sig, 1): later signal() calls leave out SA_RESTART.  glibc
 * keeps that set itself (_sigintr, not exported): every siginterrupt goes
 * to glibc too, whether or not the library's handler is installed, and
 * this is an exact copy of glibc's set, consulted by our signal() once
 * the handler is installed (before, signal() is glibc's own).
 */
static uint64_t interrupts;	/* bit sig - 1, signals 1..64 (a sigset_t is 128 bytes of .bss) */

static bool
interrupts_has(int sig)
{
	return sig > 0 && sig < 65 && (interrupts >> (sig - 1) & 1);
}

static inline bool
library_owns(int sig)
{
	return sig > 0 && sig < 65 && nsb_disp_installed();
}

/* A handler of the program is about to be installed: what it may call
 * must be looked up now (real.c), and locks block signals from now on
 * (process.c).  sigaction() gets there through nsb_disp_action(). */
static inline void
before_handler(int sig, sighandler_t handler)
{
	if (handler != SIG_DFL && handler != SIG_IGN && handler != SIG_ERR && handler != SIG_HOLD) {
		nsb_process_handler_coming(sig);
		nsb_real_handler_fns();
	}
}

/* ---- dispositions ------------------------------------------------------ */

static int
do_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return nsb_disp_action(sig, act, old);
}

NSB_EXPORT int
sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return do_sigaction(sig, act, old);
}

NSB_EXPORT int
__sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return do_sigaction(sig, act, old);
}

/* Installs handler for sig the way glibc's wrappers would. */
static sighandler_t
set_handler(int sig, sighandler_t handler, int flags, bool mask_self)
{
	struct sigaction act, old;

	if (handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (mask_self && sigaddset(&act.sa_mask, sig) < 0)
		return SIG_ERR;
	if (nsb_disp_action(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

static sighandler_t
bsd_semantics(int sig, sighandler_t handler)
{
	before_handler(sig, handler);
	if (!library_owns(sig))
		return real_signal(sig, handler);
	return set_handler(sig, handler, interrupts_has(sig) ? 0 : SA_RESTART, true);
}

NSB_EXPORT sighandler_t
signal(int sig, sighandler_t handler)
{
	return bsd_semantics(sig, handler);
}

NSB_EXPORT sighandler_t
bsd_signal(int sig, sighandler_t handler)
{
	return bsd_semantics(sig, handler);
}

/* glibc's third name for its BSD signal(). */
NSB_EXPORT sighandler_t
ssignal(int sig, sighandler_t handler)
{
	return bsd_semantics(sig, handler);
}

static sighandler_t
sysv_semantics(int sig, sighandler_t handler)
{
	before_handler(sig, handler);
	if (!library_owns(sig))
		return real_sysv_signal(sig, handler);
	return set_handler(sig, handler, SA_RESETHAND | SA_NODEFER | SA_INTERRUPT, false);
}

NSB_EXPORT sighandler_t
sysv_signal(int sig, sighandler_t handler)
{
	return sysv_semantics(sig, handler);
}

NSB_EXPORT sighandler_t
__sysv_signal(int sig, sighandler_t handler)
{
	return sysv_semantics(sig, handler);
}

NSB_EXPORT int
siginterrupt(int sig, int flag)
{
	struct sigaction act;

	/* glibc's set first; once installed, glibc also rewrote the kernel's
	 * action (ours, or the program's) with the flag, which the program's
	 * action below puts right. */
	if (real_siginterrupt(sig, flag) < 0)
		return -1;
	/* Valid: glibc took it. */
	if (sig > 0 && sig < 65) {
		if (flag)
			interrupts |= (uint64_t)1 << (sig - 1);
		else
			interrupts &= ~((uint64_t)1 << (sig - 1));
	}
	if (!library_owns(sig))
		return 0;
	if (nsb_disp_action(sig, NULL, &act) < 0)
		return -1;
	if (flag)
		act.sa_flags &= ~SA_RESTART;
	else
		act.sa_flags |= SA_RESTART;
	return nsb_disp_action(sig, &act, NULL);
}

NSB_EXPORT int
sigignore(int sig)
{
	if (!library_owns(sig))
		return real_sigignore(sig);
	return set_handler(sig, SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
}

/* ---- masks ------------------------------------------------------------- */

NSB_EXPORT int
pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return nsb_disp_mask(how, set, old);
}

NSB_EXPORT int
sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int err;

	err = nsb_disp_mask(how, set, old);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

static int
change_one(int how, int sig)
{
	sigset_t set;
	int err;

	sigemptyset(&set);
	if (sigaddset(&set, sig) < 0)
		return -1;
	err = nsb_disp_mask(how, &set, NULL);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

NSB_EXPORT int
sighold(int sig)
{
	if (!library_owns(sig) && sig != SIGBUS)
		return real_sighold(sig);
	return change_one(SIG_BLOCK, sig);
}

NSB_EXPORT int
sigrelse(int sig)
{
	if (!library_owns(sig))
		return real_sigrelse(sig);
	return change_one(SIG_UNBLOCK, sig);
}

/* Is sig blocked in the program's view of this thread's mask? */
static bool
view_blocks(int sig)
{
	sigset_t cur;

	return nsb_disp_mask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, sig) == 1;
}

NSB_EXPORT sighandler_t
sigset(int sig, sighandler_t disp)
{
	sighandler_t prev;
	struct sigaction act;
	bool was_blocked;

	before_handler(sig, disp);
	/* Holding SIGBUS installs the handler, as blocking it does (glibc's
	 * sigset blocks through its own sigprocmask, past ours: the kernel
	 * then blocked SIGBUS for real, sigset_hold_before_install). */
	if (sig == SIGBUS && disp == SIG_HOLD && !library_owns(sig))
		(void)nsb_disp_install();
	if (!library_owns(sig))
		return real_sigset(sig, disp);
	was_blocked = view_blocks(sig);
	if (disp == SIG_HOLD) {
		if (change_one(SIG_BLOCK, sig) < 0 || nsb_disp_action(sig, NULL, &act) < 0)
			return SIG_ERR;
		return was_blocked ? SIG_HOLD : act.sa_handler;
	}
	prev = set_handler(sig, disp, 0, false);
	if (prev == SIG_ERR || change_one(SIG_UNBLOCK, sig) < 0)
		return SIG_ERR;
	return was_blocked ? SIG_HOLD : prev;
}

/*
 * pthread_sigqueue sends to one thread, with the siginfo of sigqueue
 * (SI_QUEUE): the receiving thread cannot tell it from one sent to the
 * process, which the library passes on to a thread that does not block
 * SIGBUS; one sent to a thread must stay with it (issue 38,
 * sigqueue_thread_redirected).  It is counted while on its way
 * (dispositions.c).  A sigqueue() to this process from another thread
 * at the same moment may be taken for it.
 */
NSB_EXPORT int
pthread_sigqueue(pthread_t thread, int sig, const union sigval value)
{
	bool directed = sig == SIGBUS && nsb_disp_installed();
	int err;

	if (directed)
		nsb_disp_directed(1);
	err = real_pthread_sigqueue(thread, sig, value);
	if (directed && err)
		nsb_disp_directed(-1);
	return err;
}

NSB_EXPORT int
sigpending(sigset_t *set)
{
	return nsb_disp_pending(set);
}

/*
 * ---- the BSD mask calls -------------------------------------------------
 *
 * sigblock, sigsetmask and siggetmask take and give an int whose bit
 * sig - 1 stands for signals 1 to 32 (the sigpause family, which waits,
 * is in waits.c).  glibc's call its own sigprocmask, not through the
 * PLT: without these shims
 * SIGBUS got blocked for real (the next fault killed), and the view went
 * stale (dash unblocks with sigsetmask(0) in its vfork children: every
 * command of sh -c, system() and popen() then started with SIGBUS
 * blocked).  Defined under their symbols' names, as glibc's headers
 * mark them deprecated.
 */
int nsb_sigblock(int mask) __asm__("sigblock");
int nsb_sigsetmask(int mask) __asm__("sigsetmask");
int nsb_siggetmask(void) __asm__("siggetmask");

static int
old_mask_call(int how, int mask)
{
	sigset_t set, old;
	int err;

	nsb_bsd_mask_set(&set, mask);
	err = nsb_disp_mask(how, &set, &old);
	if (err) {
		errno = err;
		return -1;
	}
	return nsb_bsd_mask_get(&old);
}

NSB_EXPORT int
nsb_sigblock(int mask)
{
	return old_mask_call(SIG_BLOCK, mask);
}

NSB_EXPORT int
nsb_sigsetmask(int mask)
{
	return old_mask_call(SIG_SETMASK, mask);
}

NSB_EXPORT int
nsb_siggetmask(void)
{
	return old_mask_call(SIG_BLOCK, 0);
}

