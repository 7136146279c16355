/* SPDX-License-Identifier: MIT */
/*
 * jumps.c - the interposed __sigsetjmp, longjmp, _longjmp, siglongjmp,
 * __longjmp_chk, getcontext (x86-64, aarch64), setcontext and swapcontext.
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
 * sigsetjmp is followed too (issue 21 item 2): the macro calls
 * __sigsetjmp, which is defined here as a tail call, in assembly, that
 * first records the program's view of SIGBUS by the jmp_buf's address
 * (dispositions.c), then jumps to glibc's with the stack and registers
 * untouched, so that glibc saves the program's own frame.  Why wrap it
 * rather than leave it: without it, a siglongjmp out of a handler that
 * ran while the program blocked SIGBUS (or into a section that blocked it)
 * restores the view of the wrong moment, and interpreters, shells and
 * test harnesses recover exactly that way.  The jmp_buf is not touched: the
 * record is beside it.  A jump whose saved mask holds SIGBUS (saved before
 * the handler was installed) is made with a copy of the jmp_buf without
 * it, so that the kernel never blocks SIGBUS.  On targets other than
 * x86-64 and aarch64 there is no wrapper: libnosigbus(7) says which
 * sequences differ then.
 *
 * Not used in signal context (but called from signal handlers: each only
 * touches this thread's state and jumps).
 */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "nsb.h"

void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

/* [signal-safe] Called by __sigsetjmp below: records, and returns glibc's
 * __sigsetjmp to jump to (looked up before any handler can run: real.c). */
NSB_INTERNAL nsb_any_fn nsb_jumps_sigsetjmp(struct __jmp_buf_tag *env, int savemask)
	__attribute__((used));

nsb_any_fn
nsb_jumps_sigsetjmp(struct __jmp_buf_tag *env, int savemask)
{
	nsb_disp_setjmp(env, savemask != 0);
	return nsb_real(NSB_REAL___SIGSETJMP);
}

#if defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
#define NSB_ENDBR "endbr64\n\t"
#else
#define NSB_ENDBR ""
#endif
/* Arguments kept across the call, the stack 16-byte aligned for it, and
 * glibc entered with the program's return address on top, as if called. */
__asm__(".text\n\t"
	".globl __sigsetjmp\n\t"
	".type __sigsetjmp, @function\n\t"
	".p2align 4\n"
	"__sigsetjmp:\n\t"
	".cfi_startproc\n\t"
	NSB_ENDBR
	"push %rdi\n\t"
	".cfi_adjust_cfa_offset 8\n\t"
	"push %rsi\n\t"
	".cfi_adjust_cfa_offset 8\n\t"
	"sub $8, %rsp\n\t"
	".cfi_adjust_cfa_offset 8\n\t"
	"call nsb_jumps_sigsetjmp\n\t"
	"add $8, %rsp\n\t"
	".cfi_adjust_cfa_offset -8\n\t"
	"pop %rsi\n\t"
	".cfi_adjust_cfa_offset -8\n\t"
	"pop %rdi\n\t"
	".cfi_adjust_cfa_offset -8\n\t"
	"jmp *%rax\n\t"
	".cfi_endproc\n\t"
	".size __sigsetjmp, .-__sigsetjmp\n\t"
	".previous");
#elif defined(__aarch64__)
/* bti c (a no-op without BTI) for an indirect call through the PLT; x16
 * is the register a BTI target accepts from br. */
__asm__(".text\n\t"
	".globl __sigsetjmp\n\t"
	".type __sigsetjmp, %function\n\t"
	".p2align 2\n"
	"__sigsetjmp:\n\t"
	".cfi_startproc\n\t"
	"hint 34\n\t"
	"stp x29, x30, [sp, #-32]!\n\t"
	".cfi_def_cfa_offset 32\n\t"
	".cfi_offset 29, -32\n\t"
	".cfi_offset 30, -24\n\t"
	"mov x29, sp\n\t"
	"stp x0, x1, [sp, #16]\n\t"
	"bl nsb_jumps_sigsetjmp\n\t"
	"mov x16, x0\n\t"
	"ldp x0, x1, [sp, #16]\n\t"
	"ldp x29, x30, [sp], #32\n\t"
	".cfi_restore 29\n\t"
	".cfi_restore 30\n\t"
	".cfi_def_cfa_offset 0\n\t"
	"br x16\n\t"
	".cfi_endproc\n\t"
	".size __sigsetjmp, .-__sigsetjmp\n\t"
	".previous");
#endif

/*
 * getcontext saves the kernel's mask, which never holds SIGBUS once the
 * handler is installed: a context saved while the program blocked SIGBUS
 * came back with it unblocked, and the program read a saved mask without
 * it (issue 38, getcontext_view).  On x86-64 and aarch64 getcontext is a
 * wrapper, in assembly, that calls glibc's from its own frame, leaving the
 * program's callee-saved registers untouched, and then makes the saved
 * context the one glibc would have saved for the program: its return
 * address and stack pointer (aarch64: pc, sp, and x29/x30, which the
 * wrapper's frame used), and the view's SIGBUS bit in uc_sigmask.
 * Entering it (setcontext) resumes in the program, never in the wrapper's
 * frame.  Elsewhere glibc's own (libnosigbus(7)).
 */
#if defined(__x86_64__) || defined(__aarch64__)
NSB_INTERNAL nsb_any_fn nsb_jumps_getcontext_real(void) __attribute__((used));

nsb_any_fn
nsb_jumps_getcontext_real(void)
{
	return nsb_real(NSB_REAL_GETCONTEXT);
}

/* [signal-safe] The view's SIGBUS bit into a context glibc saved. */
static void
getcontext_view(ucontext_t *uc)
{
	if (nsb_disp_installed() && nsb_disp_blocked())
		sigaddset(&uc->uc_sigmask, SIGBUS);
}
#endif

#if defined(__aarch64__)
NSB_INTERNAL int nsb_jumps_getcontext(ucontext_t *uc, uintptr_t sp, uintptr_t ret, uintptr_t fp)
	__attribute__((used));

/* [signal-safe] */
int
nsb_jumps_getcontext(ucontext_t *uc, uintptr_t sp, uintptr_t ret, uintptr_t fp)
{
	uc->uc_mcontext.pc = ret;
	uc->uc_mcontext.regs[30] = ret;
	uc->uc_mcontext.regs[29] = fp;
	uc->uc_mcontext.sp = sp;
	getcontext_view(uc);
	return 0;
}

/* The program's x29 and x30 at [sp], uc at [sp + 16]; glibc's getcontext
 * called with x19-x28 and d8-d15 as the program left them (the C call
 * before it keeps them: they are callee-saved). */
__asm__(".text\n\t"
	".globl getcontext\n\t"
	".type getcontext, %function\n\t"
	".p2align 2\n"
	"getcontext:\n\t"
	".cfi_startproc\n\t"
	"hint 34\n\t"
	"stp x29, x30, [sp, #-32]!\n\t"
	".cfi_def_cfa_offset 32\n\t"
	".cfi_offset 29, -32\n\t"
	".cfi_offset 30, -24\n\t"
	"str x0, [sp, #16]\n\t"
	"bl nsb_jumps_getcontext_real\n\t"
	"mov x9, x0\n\t"
	"ldr x0, [sp, #16]\n\t"
	"blr x9\n\t"
	"cbnz w0, 1f\n\t"
	"ldr x0, [sp, #16]\n\t"
	"add x1, sp, #32\n\t"
	"ldr x2, [sp, #8]\n\t"
	"ldr x3, [sp]\n\t"
	"bl nsb_jumps_getcontext\n"
	"1:\n\t"
	"ldp x29, x30, [sp], #32\n\t"
	".cfi_restore 29\n\t"
	".cfi_restore 30\n\t"
	".cfi_def_cfa_offset 0\n\t"
	"ret\n\t"
	".cfi_endproc\n\t"
	".size getcontext, .-getcontext\n\t"
	".previous");
#elif defined(__x86_64__)
NSB_INTERNAL int nsb_jumps_getcontext(ucontext_t *uc, uintptr_t sp, uintptr_t ret)
	__attribute__((used));

/* [signal-safe] */
int
nsb_jumps_getcontext(ucontext_t *uc, uintptr_t sp, uintptr_t ret)
{
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)ret;
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	getcontext_view(uc);
	return 0;
}

/* The uc pointer kept on the stack (16-byte aligned for both calls); the
 * program's return address above it. */
__asm__(".text\n\t"
	".globl getcontext\n\t"
	".type getcontext, @function\n\t"
	".p2align 4\n"
	"getcontext:\n\t"
	".cfi_startproc\n\t"
	NSB_ENDBR
	"push %rdi\n\t"
	".cfi_adjust_cfa_offset 8\n\t"
	"call nsb_jumps_getcontext_real\n\t"
	"movq (%rsp), %rdi\n\t"
	"call *%rax\n\t"
	"testl %eax, %eax\n\t"
	"jnz 1f\n\t"
	"movq (%rsp), %rdi\n\t"
	"leaq 16(%rsp), %rsi\n\t"
	"movq 8(%rsp), %rdx\n\t"
	"call nsb_jumps_getcontext\n"
	"1:\n\t"
	"add $8, %rsp\n\t"
	".cfi_adjust_cfa_offset -8\n\t"
	"ret\n\t"
	".cfi_endproc\n\t"
	".size getcontext, .-getcontext\n\t"
	".previous");
#endif

/* The jmp_buf to jump with: env, or (saved mask holding SIGBUS) a copy
 * without it. */
static inline struct __jmp_buf_tag *
before_jump(struct __jmp_buf_tag *env, struct __jmp_buf_tag *copy)
{
	if (!nsb_disp_longjmp(env, env->__mask_was_saved != 0, (const sigset_t *)&env->__saved_mask))
		return env;
	*copy = *env;
	sigdelset((sigset_t *)&copy->__saved_mask, SIGBUS);
	return copy;
}

#define JUMP(real, env, val)						\
	do {								\
		struct __jmp_buf_tag copy_;				\
									\
		(real)(before_jump((env), &copy_), (val));		\
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
 * moment it left.  (A context saved by getcontext holds the view's bit:
 * see above; on x86-64 only.)
 *
 * A context made by makecontext with a uc_link goes there, when its
 * function returns, through glibc's __start_context, which calls glibc's
 * own __setcontext, past ours: the linked context's mask went to the
 * kernel as it was, SIGBUS and all (issue 38, uclink_blocks_sigbus).  On
 * x86-64, makecontext leaves __start_context's address as the return
 * address on top of the new context's stack; a context entered through
 * us with that word there gets link_start's instead, which does the same
 * through our setcontext.  aarch64's makecontext keeps that address in
 * x30 (and uc_link in x19): the same, in x30 of the copy.
 */
#if defined(__x86_64__) || defined(__aarch64__)
NSB_INTERNAL void nsb_jumps_link(const ucontext_t *link) __attribute__((used, noreturn));

/* Where makecontext leaves the way out of a context (x86-64: the word on
 * top of its stack; aarch64: x30). */
#if defined(__x86_64__)
typedef uintptr_t link_word;
#define LINK_SLOT(uc) ((link_word *)(uc)->uc_mcontext.gregs[REG_RSP])
#else
typedef unsigned long long link_word;
#define LINK_SLOT(uc) (&(uc)->uc_mcontext.regs[30])
#endif

/* Where glibc's makecontext sends a context whose function returns,
 * learnt from a context it makes (no system call); 0 if unknown. */
static uintptr_t
glibc_start_context(void)
{
	static uintptr_t addr;	/* 1: learnt, unknown (.bss is counted) */
	uintptr_t a = __atomic_load_n(&addr, __ATOMIC_ACQUIRE);

	if (!a) {
		ucontext_t probe;
		uintptr_t stack[64];

		memset(&probe, 0, sizeof(probe));
		probe.uc_stack.ss_sp = stack;
		probe.uc_stack.ss_size = sizeof(stack);
		probe.uc_link = NULL;
		makecontext(&probe, (void (*)(void))abort, 0);
		a = (uintptr_t)*LINK_SLOT(&probe);
		if (!a)
			a = 1;
		__atomic_store_n(&addr, a, __ATOMIC_RELEASE);
	}
	return a == 1 ? 0 : a;
}

#if defined(__x86_64__)
/* glibc's __start_context, through our setcontext: rbx points at the
 * uc_link slot that makecontext left; the stack is 16-byte aligned there. */
__asm__(".text\n\t"
	".type nsb_link_start, @function\n\t"
	".p2align 4\n"
	"nsb_link_start:\n\t"
	".cfi_startproc\n\t"
	".cfi_undefined rip\n\t"
	"movq %rbx, %rsp\n\t"
	"movq (%rsp), %rdi\n\t"
	"call nsb_jumps_link\n\t"
	"hlt\n\t"
	".cfi_endproc\n\t"
	".size nsb_link_start, .-nsb_link_start\n\t"
	".previous");
#else
/* glibc's __startcontext, through our setcontext: makecontext left
 * uc_link in x19; the context's function returned here (x30), on its
 * stack, 16-byte aligned.  bti c: harmless where BTI is off, and a
 * landing pad where a branch (not a return) comes here. */
__asm__(".text\n\t"
	".type nsb_link_start, %function\n\t"
	".p2align 2\n"
	"nsb_link_start:\n\t"
	".cfi_startproc\n\t"
	".cfi_undefined x30\n\t"
	"hint 34\n\t"
	"mov x0, x19\n\t"
	"bl nsb_jumps_link\n\t"
	"brk #1000\n\t"
	".cfi_endproc\n\t"
	".size nsb_link_start, .-nsb_link_start\n\t"
	".previous");
#endif
extern char nsb_link_start[] __attribute__((visibility("hidden")));

static int enter_context(const ucontext_t *ucp);

void
nsb_jumps_link(const ucontext_t *link)
{
	if (link)
		exit(enter_context(link));
	exit(0);
}

/* A fresh context of makecontext's: its way out through us. */
static void
patch_link(ucontext_t *copy)
{
	link_word *slot = LINK_SLOT(copy);
	uintptr_t start = glibc_start_context(), word;

	if (start && nsb_read_word(slot, &word) && word == start)
		*slot = (link_word)(uintptr_t)nsb_link_start;
}
#else
static void
patch_link(ucontext_t *copy)
{
	(void)copy;
}
#endif

/* Can the context's mask be read?  glibc's setcontext and swapcontext
 * hand it to the kernel before they touch anything else of it, and fail
 * with EFAULT where it cannot: then theirs alone, not a crash in our
 * copy.  Asked in one call that changes nothing: the kernel reads the
 * set before it looks at how (EFAULT), and refuses an unknown how
 * (EINVAL).  errno untouched. */
static bool
mask_readable(const ucontext_t *ucp)
{
	int saved_errno = errno;
	bool ok = syscall(SYS_rt_sigprocmask, -1, &ucp->uc_sigmask, NULL, 8) == 0 ||
		  errno != EFAULT;

	errno = saved_errno;
	return ok;
}

static int
enter_context(const ucontext_t *ucp)
{
	ucontext_t copy;
	bool was;
	int ret;

	if (!mask_readable(ucp))
		return real_setcontext(ucp);
	copy = *ucp;
	was = nsb_disp_view_for_context(&copy.uc_sigmask, true);

	patch_link(&copy);
	ret = real_setcontext(&copy);
	nsb_disp_view_restore(was);	/* it failed */
	return ret;
}

NSB_EXPORT int
setcontext(const ucontext_t *ucp)
{
	return enter_context(ucp);
}

NSB_EXPORT int
swapcontext(ucontext_t *oucp, const ucontext_t *ucp)
{
	ucontext_t copy;
	bool was;
	int ret;

	if (!mask_readable(ucp))
		return real_swapcontext(oucp, ucp);
	copy = *ucp;
	was = nsb_disp_view_for_context(&copy.uc_sigmask, false);

	patch_link(&copy);
	ret = real_swapcontext(oucp, &copy);
	nsb_disp_view_restore(was);
	return ret;
}
