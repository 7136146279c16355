/* SPDX-License-Identifier: MIT */
/*
 * sandbox.c - whether a seccomp filter may be in force, and the calls
 * that install one (SPEC §12 "System calls").
 *
 * A seccomp filter decides which system calls exist, and many kill the
 * process on any call they do not list: systemd's SystemCallFilter=
 * without SystemCallErrorNumber= (wireplumber, upower, pipewire),
 * chrony's deny-list of @mount, Chromium's and Firefox's content
 * processes.  The library's own calls must never be the one that kills.
 * Its calls fall in two sets (libnosigbus(7), "Sandboxes", has the table):
 *  - those every filter allows, because the C library and every program
 *    make them: read, write, close, fstat, fcntl, mmap, munmap, mprotect,
 *    mremap, the rt_sig* calls, getpid, gettid, tgkill, futex,
 *    sched_yield;
 *  - the others, each of which some filter refuses or kills on: statx,
 *    fstatfs, open_tree, mincore, ioctl(PROCMAP_QUERY), openat of /proc
 *    (a browser traps it to its broker), memfd_create (with the
 *    ftruncate and F_ADD_SEALS of the zero file: rescue.c), uname,
 *    getsockopt, rt_tgsigqueueinfo, and the masked variants a parked
 *    wait is retried with in place of the program's wait (ppoll for
 *    poll and sleeps, pselect6 for select, epoll_pwait for epoll_wait,
 *    rt_sigsuspend for pause: dispositions.c, "Parked"; the renderer
 *    allow-list of the seccomp harness lacks pselect6 and rt_sigsuspend).
 * The library makes one of the second set only where nsb_unfiltered()
 * says no filter is in force: the kernel says so in /proc/self/status
 * ("Seccomp: 0"), read once, on the first call that needs to know (a
 * process that never needs one of those calls never reads it), and no
 * filter was installed since through a call the library sees: prctl
 * (PR_SET_SECCOMP) and syscall(SYS_seccomp) - libseccomp, systemd,
 * Chromium, Firefox, bubblewrap and sshd install theirs through one of
 * the two (libseccomp's probes, which the kernel refuses on their
 * arguments, do not count: nsb_seccomp_coming).  A filter only ever
 * stays (it is inherited across fork and exec, and never removed), so
 * once filtered, always filtered.  An
 * unreadable status counts as filtered; one that cannot be opened for
 * want of a descriptor or memory (EMFILE, ENFILE, ENOMEM) counts so for
 * that one decision, and the next reads it again.  A filter installed later by a
 * raw system call instruction is not seen (libnosigbus(7) says so).
 *
 * Under a filter the library does without the second set: it protects
 * what it can check with the first (a file received from another process,
 * a mapping made with MAP_NOSIGBUS), and every other mapping its policy
 * would have protected stays as the program made it, counted in
 * nosigbus_get_stats' `unchecked` and, with NOSIGBUS_LOG=1, logged once.
 *
 * The interposed syscall() goes to the kernel itself (the instruction,
 * as glibc's syscall() does, in the same assembly; only the seccomp
 * operations that install, SECCOMP_SET_MODE_STRICT and _FILTER, count):
 * the library's own
 * syscall() calls bind to it (-Bsymbolic-functions), and a handler may
 * make them.
 *
 * Signal context: everything in this file (nsb_unfiltered_ask reads the
 * status with raw system calls into a small stack buffer; no lock), and
 * nsb_unfiltered, inline in nsb.h (one atomic load of the state it keeps).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

#ifndef PR_SET_SECCOMP
#define PR_SET_SECCOMP 22
#endif

void nsb_filter_coming(void);
struct nsb_coming {
	long done;	/* the call was made here: its raw result in ret */
	long ret;
};
struct nsb_coming nsb_seccomp_coming(long nr, long a, long b, long c, long d, long e);
long nsb_syscall_failed(long ret);

/* 0: not asked yet; 1: no filter; 2: a filter is (or may be) in force. */
_Atomic int nsb_filter_state;	/* nsb_unfiltered() reads it inline (nsb.h) */

/*
 * [signal-safe] The raw system call, as glibc's syscall() makes it: -1
 * and errno for a result in [-4095, -1].
 */
static long
raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory", "cc");
	ret = x0;
#else
#error "libnosigbus supports x86_64 and aarch64 (SPEC §13)"
#endif
	if ((unsigned long)ret > -4096UL) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/*
 * [signal-safe] openat with SIGSYS unblocked in this thread for the call
 * alone: a filter that traps openat to a broker (a browser's) delivers
 * SIGSYS, which the library's locks and handler otherwise block, and a
 * trapped call with SIGSYS blocked is a kill.  The broker refuses /proc:
 * -1, as where it is not mounted.
 */
static int
open_trapped(const char *path, int flags)
{
	sigset_t sys, old;
	int fd, err;

	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	if (raw_syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&sys, (long)&old, _NSIG / 8, 0, 0) < 0)
		return -1;
	fd = (int)raw_syscall(SYS_openat, AT_FDCWD, (long)path, flags, 0, 0, 0);
	err = errno;
	raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, _NSIG / 8, 0, 0);
	errno = err;
	return fd;
}

/*
 * [signal-safe] The value of "Seccomp:" in /proc/self/status: 0 none,
 * 1 strict, 2 filter; -1 if it cannot be read; -2 if it cannot be opened
 * for want of a descriptor or memory (EMFILE, ENFILE, ENOMEM: the
 * program's state at this moment, not the sandbox's, which the next ask
 * may find).  Read a chunk at a time and matched across chunks: the file
 * is as long as the process's groups make it, and no fixed-size read of
 * it is long enough.
 */
static int
seccomp_mode(void)
{
	static const char key[] = "\nSeccomp:";
	char buf[256];
	size_t matched = 0;
	bool value = false;
	int fd, mode = -1;
	ssize_t n;

	/* Not known yet whether a filter traps openat: SIGSYS unblocked
	 * for the call, as under one (nsb_proc_open). */
	fd = open_trapped("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -2 : -1;
	while (mode < 0 && (n = raw_syscall(SYS_read, fd, (long)buf, sizeof(buf), 0, 0, 0)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (ssize_t i = 0; i < n && mode < 0; i++) {
			char c = buf[i];

			if (value) {
				if (c >= '0' && c <= '9')
					mode = c - '0';
				else if (c != ' ' && c != '\t')
					break;	/* malformed: unknown */
			} else if (c == key[matched]) {
				value = ++matched == sizeof(key) - 1;
			} else {
				matched = c == key[0];
			}
		}
	}
	raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
	return mode;
}

/* [signal-safe] nsb_unfiltered() the first time (its state 0). */
bool
nsb_unfiltered_ask(void)
{
	int state = atomic_load_explicit(&nsb_filter_state, memory_order_acquire);

	if (state == 0) {
		/* NSB_TEST_SECCOMP=filtered (tests): as under a filter,
		 * without reading the status. */
		int saved_errno = errno, mode = nsb_config.test_filtered ? 2 : seccomp_mode();

		/* Every descriptor taken (a program at its RLIMIT_NOFILE, as
		 * a compositor with a burst of clients): careful this once,
		 * as under a filter, and asked again by the next call that
		 * needs to know.  Once, this made the process "filtered" for
		 * good: no memfd protected for the rest of its life
		 * (core-atk4-nofile). */
		if (mode == -2) {
			errno = saved_errno;
			return false;
		}
		state = mode == 0 ? 1 : 2;
		/* A filter seen meanwhile wins: only ever 0 -> 1 -> 2. */
		int expected = 0;

		if (!atomic_compare_exchange_strong(&nsb_filter_state, &expected, state))
			state = expected;
		errno = saved_errno;
	}
	return state == 1;
}

/* [signal-safe] A filter is about to be installed: from now on, as if it
 * were (a failed install leaves the library careful, never wrong). */
__attribute__((used)) void
nsb_filter_coming(void)
{
	atomic_store_explicit(&nsb_filter_state, 2, memory_order_release);
	/* vfork from now on as the C library's (process.c). */
	nsb_process_clone_coming();
}

/*
 * [signal-safe] openat of a file of /proc, as every filter can take it.
 * Kill filters that list it (systemd's, chrony's, flatpak's) let it
 * through; a browser traps it to its broker through SIGSYS, which must
 * then be deliverable: the library's locks and its handler block every
 * signal, and a trapped call with SIGSYS blocked is a kill.  So under a
 * filter SIGSYS is unblocked in this thread for the call alone (the
 * broker refuses /proc: -1, as where it is not mounted).
 */
int
nsb_proc_open(const char *path, int flags)
{
	if (nsb_unfiltered())
		return (int)raw_syscall(SYS_openat, AT_FDCWD, (long)path, flags, 0, 0, 0);
	return open_trapped(path, flags);
}

/*
 * [signal-safe] The same, SIGSYS unblocked for the call whatever the
 * library knows: for the library's handler, where a filter installed by a
 * raw instruction after the library looked (a Go program's, a static
 * sandbox's) would trap the call with every signal blocked - a kill.
 */
int
nsb_proc_open_trapped(const char *path, int flags)
{
	return open_trapped(path, flags);
}

/* [signal-safe] Mappings left unprotected for want of an allowed call:
 * one line under a filter, and one where the status could not be opened
 * yet (every descriptor number taken: nsb_unfiltered_ask), which says so
 * rather than that a filter is in force. */
void
nsb_sandbox_unchecked(void)
{
	static atomic_bool logged, logged_unknown;
	bool filtered = atomic_load_explicit(&nsb_filter_state, memory_order_acquire) == 2;

	atomic_fetch_add(&nsb_counters.unchecked, 1);
	if (nsb_config.log && !atomic_exchange(filtered ? &logged : &logged_unknown, true))
		nsb_log_unchecked(filtered);
}

/* ---- the calls that install a filter ----------------------------------- */

/*
 * [signal-safe] syscall() itself, in assembly: the same instructions as
 * glibc's (sysdeps/unix/sysv/linux/{x86_64,aarch64}/syscall.S), no frame
 * of its own, so that what programs do through it with the stack - a
 * vfork, a clone onto a stack of their own - behaves exactly as with
 * glibc's; only a seccomp install first calls nsb_seccomp_coming(), and a
 * clone, clone3, fork or vfork too (nsb_process_clone_coming: the child
 * runs no fork handler, and may share our memory), with the arguments
 * saved around it.  A clone that copies the process onto the same stack
 * is made by that function instead (copy_clone below), which answers
 * whether it did (rax / x0) and the raw result (rdx / x1).  A failure
 * goes to nsb_syscall_failed (errno).
 */
#define NSB_STR2(x) #x
#define NSB_STR(x) NSB_STR2(x)
#if defined(__x86_64__)
__asm__(".text\n"
	".globl syscall\n"
	".type syscall, @function\n"
	".p2align 4\n"
	"syscall:\n"
	".cfi_startproc\n"
	"	cmpq $" NSB_STR(SYS_seccomp) ", %rdi\n"
	"	jne 0f\n"
	"	cmpq $1, %rsi\n"	/* SECCOMP_SET_MODE_STRICT or _FILTER */
	"	jbe 1f\n"
	"	jmp 2f\n"
	"0:\n"
	"	cmpq $" NSB_STR(SYS_prctl) ", %rdi\n"
	"	jne 6f\n"
	"	cmpq $" NSB_STR(PR_SET_SECCOMP) ", %rsi\n"
	"	jne 2f\n"
	"	jmp 1f\n"
	"6:	cmpq $" NSB_STR(SYS_clone) ", %rdi\n"
	"	je 1f\n"
	"	cmpq $" NSB_STR(SYS_clone3) ", %rdi\n"
	"	je 1f\n"
	"	cmpq $" NSB_STR(SYS_fork) ", %rdi\n"
	"	je 1f\n"
	"	cmpq $" NSB_STR(SYS_vfork) ", %rdi\n"
	"	jne 2f\n"
	"1:	pushq %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %rdx\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %rcx\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %r8\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %r9\n"
	".cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n"	/* 16-byte aligned at the call */
	".cfi_adjust_cfa_offset 8\n"
	"	call nsb_seccomp_coming\n"
	"	addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"	/* made there (a copy clone): rdx */
	".cfi_remember_state\n"
	"	jnz 7f\n"
	"	popq %r9\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %r8\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rcx\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rdx\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"2:	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	movq %r8, %r10\n"
	"	movq %r9, %r8\n"
	"	movq 8(%rsp), %r9\n"
	"	syscall\n"
	"	cmpq $-4095, %rax\n"
	"	jae 3f\n"
	"	ret\n"
	"3:	movq %rax, %rdi\n"
	"	jmp nsb_syscall_failed\n"
	"7:\n"
	".cfi_restore_state\n"
	"	addq $48, %rsp\n"
	".cfi_adjust_cfa_offset -48\n"
	"	movq %rdx, %rax\n"
	"	cmpq $-4095, %rax\n"
	"	jae 3b\n"
	"	ret\n"
	".cfi_endproc\n"
	".size syscall, .-syscall\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl syscall\n"
	".type syscall, %function\n"
	".p2align 2\n"
	"syscall:\n"
	".cfi_startproc\n"
	"	hint 34\n"	/* bti c */
	"	cmp x0, #" NSB_STR(SYS_seccomp) "\n"
	"	b.ne 0f\n"
	"	cmp x1, #1\n"	/* SECCOMP_SET_MODE_STRICT or _FILTER */
	"	b.ls 1f\n"
	"	b 2f\n"
	"0:\n"
	"	cmp x0, #" NSB_STR(SYS_prctl) "\n"
	"	b.ne 6f\n"
	"	cmp x1, #" NSB_STR(PR_SET_SECCOMP) "\n"
	"	b.ne 2f\n"
	"	b 1f\n"
	"6:	cmp x0, #" NSB_STR(SYS_clone) "\n"
	"	b.eq 1f\n"
	"	cmp x0, #" NSB_STR(SYS_clone3) "\n"
	"	b.ne 2f\n"
	"1:	stp x29, x30, [sp, #-80]!\n"
	".cfi_def_cfa_offset 80\n"
	".cfi_offset 29, -80\n"
	".cfi_offset 30, -72\n"
	"	mov x29, sp\n"
	"	stp x0, x1, [sp, #16]\n"
	"	stp x2, x3, [sp, #32]\n"
	"	stp x4, x5, [sp, #48]\n"
	"	str x6, [sp, #64]\n"
	"	bl nsb_seccomp_coming\n"
	".cfi_remember_state\n"
	"	cbnz x0, 7f\n"	/* made there (a copy clone): x1 */
	"	ldp x0, x1, [sp, #16]\n"
	"	ldp x2, x3, [sp, #32]\n"
	"	ldp x4, x5, [sp, #48]\n"
	"	ldr x6, [sp, #64]\n"
	"	ldp x29, x30, [sp], #80\n"
	".cfi_def_cfa_offset 0\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	"2:	mov x8, x0\n"
	"	mov x0, x1\n"
	"	mov x1, x2\n"
	"	mov x2, x3\n"
	"	mov x3, x4\n"
	"	mov x4, x5\n"
	"	mov x5, x6\n"
	"	svc #0\n"
	"	cmn x0, #4095\n"
	"	b.cs 3f\n"
	"	ret\n"
	"3:	b nsb_syscall_failed\n"
	"7:\n"
	".cfi_restore_state\n"
	"	mov x0, x1\n"
	"	ldp x29, x30, [sp], #80\n"
	".cfi_def_cfa_offset 0\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	"	cmn x0, #4095\n"
	"	b.cs 3b\n"
	"	ret\n"
	".cfi_endproc\n"
	".size syscall, .-syscall\n");
#endif

/* [signal-safe] The system call nr with 5 arguments, made here: a clone
 * that copies the process continues in the child on this stack, as the
 * C library's fork does (its arch_fork). */
static long
raw_clone_call(long nr, long a, long b, long c, long d, long e)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;

	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4)
			 : "memory");
	return x0;
#else
	(void)nr; (void)a; (void)b; (void)c; (void)d; (void)e;
	return -ENOSYS;
#endif
}

/*
 * [signal-safe] Is syscall(nr, a, b, ...) a clone that copies the process
 * onto the same stack (fork, or clone and clone3 without CLONE_VM,
 * CLONE_VFORK, CLONE_SETTLS or a stack)?  Its child runs no fork handler: the
 * library's locks and counts are copied as they were, held by threads
 * the child does not have (its first protected mapping waited for ever
 * on the table lock of a thread mapping at the clone: core-rawclone).
 * Such a call is made here, between fork's own handlers (process.c:
 * the locks taken as for fork; the child's reset).  (_Fork's model, the
 * child's reset without the locks, left the child a table another
 * thread was changing: core-rawclone's children died of SIGSEGV now and
 * then.)  A clone3 whose arguments cannot be read is left to
 * the kernel (EFAULT).  So is one with CLONE_SETTLS (core-atk2-settls:
 * the reset wrote over the program's memory about its thread pointer);
 * such a child keeps the copied locks, as before.
 */
static bool
copy_clone(long nr, long a, long b)
{
	unsigned long flags, stack;

#ifdef SYS_fork
	if (nr == SYS_fork)
		return true;
#endif
	if (nr == SYS_clone) {
		flags = (unsigned long)a;
		stack = (unsigned long)b;
	} else if (nr == SYS_clone3) {
		const struct {
			uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack;
		} *args = (const void *)a;
		uint64_t f, st;

		if ((unsigned long)b < sizeof(*args) || !nsb_read_word(&args->flags, &f) ||
		    !nsb_read_word(&args->stack, &st))
			return false;
		flags = (unsigned long)f;
		stack = (unsigned long)st;
	} else {
		return false;
	}
	/* A new TLS (CLONE_SETTLS): the child is the program's business
	 * from its first instruction; the reset would write the library's
	 * thread variables into that memory. */
	return !(flags & (CLONE_VM | CLONE_VFORK | CLONE_SETTLS)) && !stack;
}

/*
 * [signal-safe] syscall(nr, a, b, c, ...) is about to be made, for nr
 * seccomp with a <= 1 or prctl with a == PR_SET_SECCOMP (the assembly
 * above tells those apart; the arguments are where this function's are),
 * or for clone, clone3, fork and vfork (process.c).
 * Calls the kernel refuses on their arguments alone install nothing:
 * libseccomp probes the kernel with seccomp(SET_MODE_STRICT, 1, NULL)
 * and seccomp(SET_MODE_FILTER, flag, NULL) in every process that uses it
 * (seccomp_api_get), and a process that probes and never installs keeps
 * its protection.  Kernel: do_seccomp() and prctl_set_seccomp().
 */
__attribute__((used)) struct nsb_coming
nsb_seccomp_coming(long nr, long a, long b, long c, long d, long e)
{
	struct nsb_coming r = { 0, 0 };

	if (nr != SYS_seccomp && nr != SYS_prctl) {
		nsb_process_clone_coming();
		if (copy_clone(nr, a, b)) {
			nsb_process_copy_clone(0);
			r.ret = raw_clone_call(nr, a, b, c, d, e);
			nsb_process_copy_clone(r.ret == 0 ? 2 : 1);
			r.done = 1;
		}
		return r;
	}
	if (nr == SYS_seccomp) {
		if (a == SECCOMP_SET_MODE_STRICT ? b != 0 || c != 0 : c == 0)
			return r;	/* EINVAL; EFAULT */
	} else if (b == SECCOMP_MODE_FILTER ? c == 0 : b != SECCOMP_MODE_STRICT) {
		return r;	/* EFAULT; EINVAL */
	}
	nsb_filter_coming();
	return r;
}

/* [signal-safe] The error path of syscall() above: errno, and -1. */
__attribute__((used)) long
nsb_syscall_failed(long ret)
{
	errno = (int)-ret;
	return -1;
}

/* [signal-safe] */
NSB_EXPORT int
prctl(int option, ...)
{
	va_list ap;
	unsigned long a, b, c, d;

	va_start(ap, option);
	a = va_arg(ap, unsigned long);
	b = va_arg(ap, unsigned long);
	c = va_arg(ap, unsigned long);
	d = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP)
		(void)nsb_seccomp_coming(SYS_prctl, option, (long)a, (long)b, 0, 0);
	return (int)raw_syscall(SYS_prctl, option, (long)a, (long)b, (long)c, (long)d, 0);
}
