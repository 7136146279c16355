/* SPDX-License-Identifier: MIT */
/*
 * jumps.c - the interposed longjmp, _longjmp, siglongjmp, __longjmp_chk,
 * setcontext and swapcontext.
 *
 * A program that leaves a signal handler with one of these gets its saved
 * signal mask back inside glibc, past our sigprocmask: the program's view
 * of SIGBUS is brought back here first (dispositions.c).
 *
 * Built without _FORTIFY_SOURCE: with it, glibc's <setjmp.h> renames
 * longjmp and siglongjmp to __longjmp_chk, which this file defines too,
 * and every name must stay exported as itself (distributions build with
 * -D_FORTIFY_SOURCE=2).
 *
 * Not used in signal context (but called from signal handlers: each only
 * touches this thread's state and jumps).
 */
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <ucontext.h>

#include "nsb.h"

void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

/* glibc restores a saved mask inside these, past our sigprocmask. */
#define JUMP(real, env, val)						\
	do {								\
		nsb_disp_longjmp((env)[0].__mask_was_saved != 0);	\
		(real)((env), (val));					\
	} while (0)

NSB_EXPORT void
longjmp(jmp_buf env, int val)
{
	JUMP(real_longjmp, env, val);
}

NSB_EXPORT void
_longjmp(jmp_buf env, int val)
{
	JUMP(real__longjmp, env, val);
}

NSB_EXPORT void
siglongjmp(sigjmp_buf env, int val)
{
	JUMP(real_siglongjmp, env, val);
}

NSB_EXPORT void
__longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	JUMP(real___longjmp_chk ? real___longjmp_chk : real_longjmp, env, val);
}

/*
 * A context carries a signal mask (uc_sigmask), which glibc gives the
 * kernel: a coroutine made with every signal blocked would block SIGBUS
 * for real.  The kernel gets a copy without it, and the view gets its
 * bit.  A swapcontext that comes back here brings back the view of the
 * moment it left.  (A context saved by getcontext holds the kernel's mask,
 * without the view's bit: see libnosigbus(7).)
 */
NSB_EXPORT int
setcontext(const ucontext_t *ucp)
{
	ucontext_t copy = *ucp;
	bool was = nsb_disp_view_for_context(&copy.uc_sigmask);
	int ret = real_setcontext(&copy);

	nsb_disp_view_restore(was);	/* it failed */
	return ret;
}

NSB_EXPORT int
swapcontext(ucontext_t *oucp, const ucontext_t *ucp)
{
	ucontext_t copy = *ucp;
	bool was = nsb_disp_view_for_context(&copy.uc_sigmask);
	int ret = real_swapcontext(oucp, &copy);

	nsb_disp_view_restore(was);
	return ret;
}
