/* SPDX-License-Identifier: MIT */
/*
 * signals.c - the interposed signal calls: sigaction and its older
 * relatives, the mask calls, sigpending, sigsuspend and pthread_create.
 *
 * For every signal but SIGBUS each one is exactly libc's (we call it).
 * For SIGBUS they read and write the program's disposition and mask kept
 * by dispositions.c, so the program sees what it set while the library's
 * handler stays installed and SIGBUS stays deliverable underneath.
 * glibc's signal(), sigset() and friends call sigaction internally, not
 * through the PLT, so each needs its own shim; their SIGBUS flags are
 * glibc's (sysdeps/posix/signal.c, sysv_signal.c, sigset.c).
 *
 * Not used in signal context.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nsb.h"

/* Exported by glibc but not declared by its headers (or not always). */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t handler);

#ifndef SA_INTERRUPT
#define SA_INTERRUPT 0x20000000
#endif

/* siginterrupt(SIGBUS, 1): later signal() calls leave out SA_RESTART. */
static bool sigbus_interrupts;

static inline bool
library_owns(int sig)
{
	return sig == SIGBUS && nsb_disp_installed();
}

/* ---- dispositions ------------------------------------------------------ */

static int
do_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	nsb_real_init();
	if (sig != SIGBUS)
		return nsb_sys_sigaction(sig, act, old);
	return nsb_disp_set(act, old);
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

/* Installs handler for SIGBUS the way glibc's wrappers would. */
static sighandler_t
set_handler(sighandler_t handler, int flags, bool mask_self)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (mask_self)
		sigaddset(&act.sa_mask, SIGBUS);
	if (nsb_disp_set(&act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

static sighandler_t
bsd_semantics(int sig, sighandler_t handler)
{
	nsb_real_init();
	if (!library_owns(sig))
		return real_signal(sig, handler);
	if (handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	return set_handler(handler, sigbus_interrupts ? 0 : SA_RESTART, true);
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

static sighandler_t
sysv_semantics(int sig, sighandler_t handler)
{
	nsb_real_init();
	if (!library_owns(sig))
		return real_sysv_signal(sig, handler);
	if (handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	return set_handler(handler, SA_RESETHAND | SA_NODEFER | SA_INTERRUPT, false);
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

	nsb_real_init();
	if (!library_owns(sig))
		return real_siginterrupt(sig, flag);
	nsb_disp_set(NULL, &act);
	sigbus_interrupts = flag != 0;
	if (flag)
		act.sa_flags &= ~SA_RESTART;
	else
		act.sa_flags |= SA_RESTART;
	return nsb_disp_set(&act, NULL);
}

NSB_EXPORT int
sigignore(int sig)
{
	nsb_real_init();
	if (!library_owns(sig))
		return real_sigignore(sig);
	set_handler(SIG_IGN, 0, false);
	return 0;
}

/* ---- masks ------------------------------------------------------------- */

/*
 * The one place where a program's mask change is split in two: SIGBUS goes
 * to the per-thread record, the rest to the kernel.  Returns 0 or an error
 * number, like pthread_sigmask.
 */
static int
change_mask(int how, const sigset_t *set, sigset_t *old)
{
	bool was = nsb_disp_blocked(), now = was;
	sigset_t copy, prev;
	int ret;

	nsb_real_init();
	if (set) {
		if (how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK)
			return EINVAL;
		if (how == SIG_BLOCK)
			now = was || sigismember(set, SIGBUS);
		else if (how == SIG_UNBLOCK)
			now = was && !sigismember(set, SIGBUS);
		else
			now = sigismember(set, SIGBUS);
		copy = *set;
		sigdelset(&copy, SIGBUS);
		if (now && !was)
			nsb_disp_set_blocked(true);
	}
	ret = nsb_sys_sigmask(how, set ? &copy : NULL, &prev) < 0 ? errno : 0;
	if (ret) {
		if (now && !was)
			nsb_disp_set_blocked(false);
		return ret;
	}
	if (old) {
		*old = prev;
		if (was)
			sigaddset(old, SIGBUS);
		else
			sigdelset(old, SIGBUS);
	}
	if (!now && was) {
		nsb_disp_set_blocked(false);
		nsb_disp_deliver_held();
	}
	return 0;
}

NSB_EXPORT int
pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return change_mask(how, set, old);
}

NSB_EXPORT int
sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int err = change_mask(how, set, old);

	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

static int
block_sigbus(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGBUS);
	return change_mask(how, &set, NULL);
}

NSB_EXPORT int
sighold(int sig)
{
	nsb_real_init();
	if (sig != SIGBUS)
		return real_sighold(sig);
	return block_sigbus(SIG_BLOCK) ? -1 : 0;
}

NSB_EXPORT int
sigrelse(int sig)
{
	nsb_real_init();
	if (sig != SIGBUS)
		return real_sigrelse(sig);
	return block_sigbus(SIG_UNBLOCK) ? -1 : 0;
}

NSB_EXPORT sighandler_t
sigset(int sig, sighandler_t disp)
{
	bool was_blocked = nsb_disp_blocked();
	sighandler_t prev;
	struct sigaction act;

	nsb_real_init();
	if (sig != SIGBUS)
		return real_sigset(sig, disp);
	if (disp == SIG_HOLD) {
		block_sigbus(SIG_BLOCK);
		nsb_disp_set(NULL, &act);
		return was_blocked ? SIG_HOLD : act.sa_handler;
	}
	if (!nsb_disp_installed()) {
		/* glibc's sigset unblocks through the kernel: that is fine. */
		prev = real_sigset(sig, disp);
		if (prev != SIG_ERR && was_blocked)
			prev = SIG_HOLD;
		nsb_disp_set_blocked(false);
		return prev;
	}
	prev = set_handler(disp, 0, false);
	block_sigbus(SIG_UNBLOCK);
	return was_blocked ? SIG_HOLD : prev;
}

NSB_EXPORT int
sigpending(sigset_t *set)
{
	int ret;

	nsb_real_init();
	ret = real_sigpending(set);
	if (ret == 0 && nsb_disp_held())
		sigaddset(set, SIGBUS);
	return ret;
}

NSB_EXPORT int
sigsuspend(const sigset_t *mask)
{
	bool was = nsb_disp_blocked();
	sigset_t copy;
	int ret;

	nsb_real_init();
	if (!nsb_disp_installed())
		return real_sigsuspend(mask);
	copy = *mask;
	nsb_disp_set_blocked(sigismember(&copy, SIGBUS));
	sigdelset(&copy, SIGBUS);
	if (!nsb_disp_blocked() && nsb_disp_held()) {
		/* A pending, now unblocked signal: handled, then EINTR. */
		nsb_disp_deliver_held();
		nsb_disp_set_blocked(was);
		errno = EINTR;
		return -1;
	}
	ret = real_sigsuspend(&copy);
	nsb_disp_set_blocked(was);
	return ret;
}

/* ---- threads ----------------------------------------------------------- */

/* A new thread inherits its creator's mask, SIGBUS bit included. */
struct start {
	void *(*fn)(void *);
	void *arg;
};

static void *
start_blocked(void *p)
{
	struct start s = *(struct start *)p;

	free(p);
	nsb_disp_set_blocked(true);
	return s.fn(s.arg);
}

NSB_EXPORT int
pthread_create(pthread_t *thread, const pthread_attr_t *attr,
	       void *(*fn)(void *), void *arg)
{
	struct start *s;
	int ret;

	nsb_real_init();
	if (!nsb_disp_blocked())
		return real_pthread_create(thread, attr, fn, arg);
	s = malloc(sizeof(*s));
	if (!s)
		return EAGAIN;
	s->fn = fn;
	s->arg = arg;
	ret = real_pthread_create(thread, attr, start_blocked, s);
	if (ret)
		free(s);
	return ret;
}
