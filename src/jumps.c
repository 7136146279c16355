/* SPDX-License-Identifier: MIT */
/*
 * jumps.c - the interposed longjmp, _longjmp, siglongjmp and __longjmp_chk.
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

#include "nsb.h"

void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

/* glibc restores a saved mask inside these, past our sigprocmask. */
#define JUMP(real, env, val)						\
	do {								\
		nsb_real_init();					\
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
