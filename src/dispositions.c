/* SPDX-License-Identifier: MIT */
/*
 * dispositions.c - the program's view of signals: all the bookkeeping,
 * in one place (SPEC §6).
 *
 * Until the library's SIGBUS handler is installed (the first protected
 * mapping, or the first time the program blocks SIGBUS), every call
 * passes straight to the C library: a process that never has a protected
 * mapping sees no change at all.
 *
 * Once installed, SIGBUS must never be really blocked in any thread: the
 * kernel kills the process for a fault's SIGBUS that is blocked.  The
 * kernel's mask can gain SIGBUS in more ways than a call to sigprocmask,
 * and each is kept from doing so:
 *  - sigprocmask, pthread_sigmask, sigsuspend, sighold, sigset: SIGBUS
 *    goes to the thread's view (`blocked` below), the rest to the kernel;
 *  - the sa_mask of a handler the program installs: a handler whose
 *    sa_mask holds SIGBUS runs through trampoline(), installed with SIGBUS
 *    taken out of its sa_mask, which keeps the view while the handler runs
 *    (SIGBUS blocked) and after it returns (what the handler left in
 *    uc->uc_sigmask).  Every other handler is installed exactly as the
 *    program asked (SPEC §12 "Handlers"): the kernel runs it, and a query
 *    reads the kernel's action back.  If such a handler adds SIGBUS to its
 *    uc_sigmask, the kernel blocks SIGBUS for real at sigreturn: the next
 *    mask call that reads the old mask takes that bit into the view;
 *  - a program that blocks SIGBUS and then, outside of any handler,
 *    ignores it is told apart from one whose view blocks it: see
 *    nsb_disp_mask;
 *  - threads the C library starts with every signal blocked (SIGEV_THREAD
 *    timers and message queues): threads.c runs their functions with
 *    SIGBUS deliverable and the view blocked, as the kernel would have it
 *    (installing the handler first if needed);
 *  - exec and posix_spawn: exec.c hands the new program the program's own
 *    state: a blocked SIGBUS in this thread's kernel mask for the call, an
 *    ignored one through the environment (never SIG_IGN in the kernel,
 *    where a fault of a handler that runs meanwhile would kill).
 * Out of reach (documented in libnosigbus(7)): raw system calls, a mask
 * saved by getcontext on targets other than x86-64 and aarch64 (jumps.c),
 * and threads other than these
 * that the C library or the kernel start with SIGBUS blocked.  The whole
 * list of paths, each with its test: doc/signals.md.
 *
 * The program's actions live in one seqlocked slot per signal; handlers
 * read them without a lock, and SA_RESETHAND resets one with a
 * compare-and-swap, so that of two threads that take the signal at once
 * only one runs the handler (the kernel gives the other SIG_DFL).
 *
 * A SIGBUS sent while the program has it blocked is held here (one per
 * thread and one per process, as the kernel would keep), reported by
 * sigpending, dropped when the program ignores SIGBUS, and delivered when
 * the view unblocks it.
 *
 * Signal context: nsb_disp_chain, trampoline, nsb_disp_blocked,
 * nsb_disp_thread_start_kernel and what they call.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "nsb.h"

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif
#ifndef SA_EXPOSE_TAGBITS
#define SA_EXPOSE_TAGBITS 0x00000800
#endif
#ifndef SA_UNSUPPORTED
#define SA_UNSUPPORTED 0x00000400
#endif

#define NSIGS 65	/* 1..64 */

struct nsb_lock nsb_disp_lock = NSB_LOCK_INITIALIZER;

/* The program's action for each signal; `seq` odd while it changes. */
struct prog_action {
	atomic_uint seq;
	struct sigaction act;
	bool trampoline;	/* the kernel runs it through trampoline(); when
				 * false (and not SIGBUS) the kernel holds the
				 * program's own action, and is asked */
};
atomic_bool nsb_disp_is_installed;	/* read inline too (nsb.h) */

/* The program's view of the SIGBUS bit of this thread's mask, and of the
 * handlers it is in (for jumps out of them). */
static __thread bool blocked __attribute__((tls_model("initial-exec")));
static __thread int handler_depth __attribute__((tls_model("initial-exec")));
static __thread bool blocked_outside __attribute__((tls_model("initial-exec")));
/* The siginfo of the SIGBUS whose program handler runs now: see
 * nsb_disp_chain. */
static __thread const siginfo_t *chaining __attribute__((tls_model("initial-exec")));
/* The frame that runs it: a call back from the program's handler comes
 * from deeper on the stack; a new delivery after the handler was left
 * (setcontext, a coroutine switch) comes no deeper (issue 38). */
static __thread const char *chaining_frame __attribute__((tls_model("initial-exec")));

/* A sent SIGBUS that arrived while the program had it blocked.  Standard
 * signals do not queue, so one of each is all the kernel would keep.
 * Setting SIG_IGN discards them: a held signal older than the last
 * discard is no longer there. */
enum { HELD_NONE, HELD_BUSY, HELD_READY };
static atomic_int held_process;
static siginfo_t held_process_info;
static unsigned held_process_gen;
static __thread int held_thread __attribute__((tls_model("initial-exec")));
static __thread siginfo_t held_thread_info __attribute__((tls_model("initial-exec")));
static __thread unsigned held_thread_gen __attribute__((tls_model("initial-exec")));
static atomic_uint discard_gen;

/* A vfork child's view of its SIGBUS bit, once it changes it (`blocked`
 * is its parent's: the child runs on the parent's thread's memory), for
 * the mask calls it makes and for its exec; forgotten by the parent's
 * next mask call. */
/* Per thread: the child runs on its parent thread's memory, thread
 * pointer included, while the parent's other threads run on: their mask
 * calls must not erase the child's view (issue 38, vfork_view_forgotten). */
static __thread pid_t vfork_view_pid __attribute__((tls_model("initial-exec")));
static __thread bool vfork_view __attribute__((tls_model("initial-exec")));
/* The vfork child that set a SIGBUS action of its own, in its kernel
 * (its exec reads it back from there; any other child has ours). */
static __thread pid_t vfork_action_pid __attribute__((tls_model("initial-exec")));

/* Has this vfork child a view of its own?  (The parent, asking, forgets
 * the one of a child that has gone.) */
static bool
vfork_view_mine(void)
{
	if (!vfork_view_pid)
		return false;
	if (!nsb_in_vfork_child()) {
		vfork_view_pid = 0;
		return false;
	}
	return vfork_view_pid == nsb_getpid();
}

static void note_blocker(bool is_blocking);
static void set_blocked(bool b);

/* Made when the handler is installed (memory.c): a process that never
 * installs it pays nothing for it at start-up (SPEC §9). */
#define BLOCKERS 1024
struct blockers {
	atomic_int tid[BLOCKERS];
	struct blockers *_Atomic next;	/* made when this one is full */
};
struct disp_state {
	struct prog_action actions[NSIGS];
	struct blockers blockers;	/* see note_blocker() */
	atomic_bool blockers_incomplete;	/* a chunk could not be made */
	atomic_int directed_inflight;	/* see took_directed() */
};
static struct disp_state *state;

/* ---- raw helpers ------------------------------------------------------- */

/* [signal-safe] The kernel's mask of this thread, without glibc's filter
 * of its internal signals (which would hide nothing we care about). */
static int
kernel_mask(int how, const sigset_t *set, sigset_t *old)
{
	return (int)syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

static void
sigbus_only(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGBUS);
}

/* ---- the program's actions --------------------------------------------- */

/* [signal-safe] A consistent copy of the program's action for sig. */
static unsigned
read_action(int sig, struct sigaction *out)
{
	struct prog_action *pa = &state->actions[sig];

	for (;;) {
		unsigned s = atomic_load(&pa->seq);

		if (s & 1)
			continue;	/* a writer, which no signal can stop */
		*out = pa->act;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load(&pa->seq) == s)
			return s;
	}
}

/* Caller holds nsb_disp_lock. */
static void
write_action(int sig, const struct sigaction *act, bool trampoline)
{
	struct prog_action *pa = &state->actions[sig];
	unsigned s;

	/* A handler's SA_RESETHAND may be resetting it: take turns. */
	do
		s = atomic_load(&pa->seq) & ~1u;
	while (!atomic_compare_exchange_weak(&pa->seq, &s, s + 1));
	pa->act = *act;
	pa->trampoline = trampoline;
	atomic_store(&pa->seq, s + 2);
}

/*
 * [signal-safe] The action the kernel would use for this delivery: reads
 * it and, for SA_RESETHAND, resets it to SIG_DFL in the same step, as the
 * kernel does (only the handler; flags and mask stay).  Of two threads,
 * only one gets the handler.
 */
static void
take_action(int sig, struct sigaction *act)
{
	struct prog_action *pa = &state->actions[sig];

	for (;;) {
		unsigned s = read_action(sig, act);

		if (!(act->sa_flags & SA_RESETHAND) || act->sa_handler == SIG_DFL ||
		    act->sa_handler == SIG_IGN)
			return;
		if (atomic_compare_exchange_strong(&pa->seq, &s, s + 1)) {
			pa->act.sa_handler = SIG_DFL;
			atomic_store(&pa->seq, s + 2);
			return;
		}
	}
}

static bool
is_function(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

/* What the C library adds to every action it installs (x86: SA_RESTORER
 * and its restorer; nothing on arm64): learnt from our own installation,
 * since <signal.h> does not say. */
static int lib_flags;
static void (*lib_restorer)(void);

/* Does the kernel keep flags it does not know?  Before Linux 5.11 it
 * stored sa_flags as given and a query read them all back; since, it
 * drops the bits it does not know.  Learnt from our own installation,
 * made with SA_UNSUPPORTED (a bit no kernel knows, defined for this
 * question). */
#ifndef SA_UNSUPPORTED
#define SA_UNSUPPORTED 0x00000400
#endif
static bool keeps_unknown;
static bool flags_learnt;

/* What the kernel keeps of an action the program installs, so that a
 * query reads back exactly what it would without us: unknown flags
 * dropped, SIGKILL and SIGSTOP out of the mask, the C library's restorer
 * added.  (Actions the program never set are kept as the kernel had them.)
 * SA_RESTORER is a flag both x86_64's and arm64's kernels know and keep:
 * on arm64, where glibc adds none, a program that passes it reads it back
 * (signals-restorer, in a VM). */
static void
normalize(struct sigaction *act)
{
	static const int kept = SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK |
				SA_RESTART | SA_NODEFER | SA_RESETHAND | SA_EXPOSE_TAGBITS |
				SA_RESTORER;

	act->sa_flags = (keeps_unknown ? act->sa_flags : act->sa_flags & kept) | lib_flags;
	if (lib_flags)
		act->sa_restorer = lib_restorer;
	sigdelset(&act->sa_mask, SIGKILL);
	sigdelset(&act->sa_mask, SIGSTOP);
}

static void trampoline(int sig, siginfo_t *si, void *ucv);

/* Must the kernel run the program's handler for sig through trampoline()?
 * Only when its sa_mask holds SIGBUS (the kernel would block SIGBUS while
 * it runs): every other action goes to the kernel as the program gave it. */
static bool
wrapped(int sig, const struct sigaction *prog)
{
	return sig != SIGBUS && is_function(prog) && sigismember(&prog->sa_mask, SIGBUS) == 1;
}

/* Puts into the kernel what runs the program's action for sig: SIGBUS and
 * wrapped() handlers only (the others go to the kernel unchanged). */
static void
kernel_install(int sig, const struct sigaction *prog)
{
	struct sigaction k;

	if (sig == SIGBUS) {
		memset(&k, 0, sizeof(k));
		k.sa_sigaction = nsb_rescue_handler;
		/* The program's SA_ONSTACK, and its SA_RESTART - always, when
		 * it has no handler: a signal it ignores should interrupt
		 * nothing (a sleep still ends early: see libnosigbus(7)). */
		k.sa_flags = SA_SIGINFO | (prog->sa_flags & SA_ONSTACK) |
			     (is_function(prog) ? prog->sa_flags & SA_RESTART : SA_RESTART) |
			     (flags_learnt ? 0 : SA_UNSUPPORTED);
		/* Asynchronous signals wait while we rescue; the program's own
		 * mask is set explicitly before its handler runs. */
		sigfillset(&k.sa_mask);
		nsb_sys_sigaction(SIGBUS, &k, NULL);
		return;
	}
	k = *prog;
	k.sa_sigaction = trampoline;
	k.sa_flags |= SA_SIGINFO;
	sigdelset(&k.sa_mask, SIGBUS);
	nsb_sys_sigaction(sig, &k, NULL);
}

/* [signal-safe] SIGBUS back to the kernel's default, to die of it. */
static void
kernel_default(int sig)
{
	struct sigaction dfl;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	nsb_sys_sigaction(sig, &dfl, NULL);
}

/* Signals the program cannot or may not handle itself. */
static bool
kernel_only(int sig)
{
	return sig == SIGKILL || sig == SIGSTOP || (sig >= 32 && sig < SIGRTMIN);
}

/*
 * From now on the library's handler holds SIGBUS, and every handler of the
 * program whose sa_mask holds SIGBUS runs through trampoline() with SIGBUS
 * out of its sa_mask: those it installed before are taken over now.  The thread that installs
 * keeps, as its view, what its kernel mask says of SIGBUS.
 */
int
nsb_disp_install_now(void)
{
	struct sigaction act;
	sigset_t *mask;
	int ret = 0;

	if (atomic_load(&nsb_disp_is_installed))
		return 0;
	/* A child that shares our memory (vfork, clone(CLONE_VM)) has signal
	 * actions of its own: installing there would tell the owner that
	 * its kernel holds our handler when it does not. */
	if (nsb_in_vfork_child())
		return -1;
	nsb_lock(&nsb_disp_lock);
	if (!atomic_load(&nsb_disp_is_installed)) {
		void *p = state ? state : nsb_memory(sizeof(*state));

		if (!p || nsb_rescue_prepare() < 0 || nsb_ranges_prepare() < 0) {
			state = p;
			ret = -1;
			goto out;
		}
		state = p;
		for (int sig = 1; sig < NSIGS; sig++) {
			if (kernel_only(sig) || nsb_sys_sigaction(sig, NULL, &act) < 0)
				continue;
			/* One installed before us, or behind our back: locks
			 * block signals from now on (process.c; no thread holds
			 * one without the mask before this is done). */
			if (is_function(&act))
				nsb_process_handler_coming(sig);
			write_action(sig, &act, wrapped(sig, &act));
			if (sig == SIGBUS || wrapped(sig, &act))
				kernel_install(sig, &act);
			if (sig == SIGBUS && nsb_sys_sigaction(SIGBUS, NULL, &act) == 0) {
				lib_flags = act.sa_flags & SA_RESTORER;
				lib_restorer = act.sa_restorer;
				keeps_unknown = (act.sa_flags & SA_UNSUPPORTED) != 0;
			}
			if (sig == SIGBUS)
				flags_learnt = true;
		}
		atomic_store(&nsb_disp_is_installed, true);
		/* Our locks block everything: the mask from before is saved,
		 * and is restored without SIGBUS. */
		mask = nsb_outer_mask();
		if (mask && sigismember(mask, SIGBUS)) {
			set_blocked(true);
			sigdelset(mask, SIGBUS);
		}
	}
out:
	nsb_unlock(&nsb_disp_lock);
	if (ret < 0)
		errno = ENOMEM;
	return ret;
}

/* The program sets and/or queries its action for sig. */
int
nsb_disp_action(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction copy, asked, prev, kold;
	bool prev_ours;

	/* Before the kernel can run it, and before any lock (process.c).  (A
	 * bad pointer dies here as it would in the C library's copy.) */
	if (act && sig > 0 && sig < NSIGS && !kernel_only(sig) && is_function(act))
		nsb_process_handler_coming(sig);
	if (!atomic_load(&nsb_disp_is_installed) || sig <= 0 || sig >= NSIGS || kernel_only(sig))
		return nsb_sys_sigaction(sig, act, old);
	/* Read the program's memory before any lock: a bad pointer kills
	 * here as it would in the C library, and holds nothing. */
	if (act) {
		asked = *act;
		copy = asked;
		normalize(&copy);
		/* A vfork child has its own actions but our memory: its
		 * changes go to its kernel only, never to the parent's view. */
		if (nsb_in_vfork_child()) {
			if (sig != SIGBUS && !wrapped(sig, &copy) &&
			    !state->actions[sig].trampoline)
				return nsb_sys_sigaction(sig, &asked, old);
			read_action(sig, &prev);
			nsb_sys_sigaction(sig, &copy, NULL);
			if (sig == SIGBUS)
				vfork_action_pid = nsb_getpid();
			if (old)
				*old = prev;
			return 0;
		}
	}
	nsb_lock(&nsb_disp_lock);
	read_action(sig, &prev);
	/* Is the previous action ours to tell (SIGBUS, or run through the
	 * trampoline), or the kernel's (it may have reset an SA_RESETHAND)? */
	prev_ours = sig == SIGBUS || state->actions[sig].trampoline;
	if (!prev_ours && (!act || wrapped(sig, &copy)))
		nsb_sys_sigaction(sig, NULL, &kold);
	if (act) {
		bool discard = sig == SIGBUS && copy.sa_handler == SIG_IGN;
		bool w = wrapped(sig, &copy);

		write_action(sig, &copy, w);
		if (sig == SIGBUS || w)
			kernel_install(sig, &copy);
		else
			nsb_sys_sigaction(sig, &asked, prev_ours ? NULL : &kold);
		/* Ignoring a signal discards it if it is pending. */
		if (discard) {
			int expected = HELD_READY;

			atomic_fetch_add(&discard_gen, 1);
			atomic_compare_exchange_strong(&held_process, &expected, HELD_NONE);
		}
	}
	nsb_unlock(&nsb_disp_lock);
	if (old)
		*old = prev_ours ? prev : kold;
	return 0;
}

/* ---- the mask ---------------------------------------------------------- */

/* [signal-safe] */
bool
nsb_disp_blocked(void)
{
	return blocked;
}

/* Threads whose view blocks SIGBUS, by thread id, so that a SIGBUS sent to
 * the process can go to a thread that does not block it, as the kernel
 * would choose.  A thread leaves the table when it unblocks or exits (the
 * threads that pthread_create starts: threads.c calls
 * nsb_disp_thread_exit; no pthread key, whose first use in a thread may
 * allocate, and this runs in signal context); a fork child keeps only
 * itself.  The table grows by chunks of BLOCKERS (issue 38,
 * blockers_overflow_pingpong: with a fixed table, a sent SIGBUS went
 * round the unlisted blockers for ever); no memory for a chunk, or the
 * id of a thread started otherwise that exited blocking, only means that
 * a sent SIGBUS may be held where the kernel would have delivered it. */

static void
forget_tid(int tid)
{
	for (struct blockers *b = state ? &state->blockers : NULL; b; b = atomic_load(&b->next)) {
		for (int i = 0; i < BLOCKERS; i++) {
			int seen = tid;

			if (atomic_compare_exchange_strong(&b->tid[i], &seen, 0))
				return;
		}
	}
}

/* A thread that pthread_create started ends (returns or exits). */
void
nsb_disp_thread_exit(void)
{
	if (blocked && !nsb_in_vfork_child())
		forget_tid(nsb_gettid());
}

static void
note_blocker(bool is_blocking)
{
	int tid = nsb_gettid();

	if (!state || nsb_in_vfork_child())
		return;	/* none yet, or the parent's */
	if (!is_blocking) {
		forget_tid(tid);
		return;
	}
	for (struct blockers *b = &state->blockers; b;) {
		struct blockers *next = NULL;

		for (int i = 0; i < BLOCKERS; i++) {
			int seen = 0;

			if (atomic_load(&b->tid[i]) == tid)
				return;
			if (atomic_compare_exchange_strong(&b->tid[i], &seen, tid))
				return;
		}
		/* Full: one more chunk, never freed (signal-safe memory).
		 * Of two threads that make one at once, one keeps its own. */
		next = atomic_load(&b->next);
		if (!next) {
			struct blockers *fresh = nsb_memory_try(sizeof(*fresh));

			if (!fresh) {
				/* None: the table no longer names every
				 * blocker, and a resend could go round them
				 * for ever; sent ones are held instead. */
				atomic_store(&state->blockers_incomplete, true);
				return;
			}
			if (atomic_compare_exchange_strong(&b->next, &next, fresh))
				next = fresh;
		}
		b = next;
	}
}

static void
set_blocked(bool b)
{
	if (b != blocked)
		note_blocker(b);
	blocked = b;
}

/* [signal-safe] */
static bool
is_blocker(int tid)
{
	for (struct blockers *b = state ? &state->blockers : NULL; b; b = atomic_load(&b->next))
		for (int i = 0; i < BLOCKERS; i++)
			if (atomic_load(&b->tid[i]) == tid)
				return true;
	return false;
}

/* [signal-safe] Sends si to this thread again, siginfo and all.  Keeps errno. */
static void
resend(const siginfo_t *si)
{
	int saved_errno = errno;
	siginfo_t copy = *si;

	if (syscall(SYS_rt_tgsigqueueinfo, getpid(), nsb_gettid(), SIGBUS, &copy) < 0)
		syscall(SYS_tgkill, getpid(), nsb_gettid(), SIGBUS);	/* refused */
	errno = saved_errno;
}

/* Buffers for finding a thread to resend to, in the signal space (the
 * handler's stack may be a small alternate stack: SPEC §5). */
struct resend_space {
	char dir[2048];		/* /proc/self/task entries */
	char status[1024];	/* one thread's status */
	char path[64];
};
_Static_assert(sizeof(struct resend_space) <= NSB_SIGNAL_SPACE, "signal space");
static atomic_uint resend_busy;

/* [signal-safe] The hex mask after a status line's "Name:". */
static uint64_t
status_mask(const char *p)
{
	uint64_t v = 0;

	for (p += strspn(p, " \t"); (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
		v = v << 4 | (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
	return v;
}

/* [signal-safe] One line of a thread's status, for kernel_blocks: 1 it
 * blocks SIGBUS or is gone, 0 it does not, -1 not the line that tells. */
static int
blocks_line(const char *line, void *unused)
{
	(void)unused;
	/* An exited thread (the main one, after pthread_exit) stays listed,
	 * a zombie: a signal sent to it would never run. */
	if (strncmp(line, "State:", 6) == 0) {
		const char *p = line + 6 + strspn(line + 6, " \t");

		return *p == 'Z' || *p == 'X' ? 1 : -1;
	}
	if (strncmp(line, "SigBlk:", 7) != 0)
		return -1;
	return (status_mask(line + 7) >> (SIGBUS - 1) & 1) != 0;
}

/*
 * [signal-safe] Reads /proc/self/task/TID/status line by line through the
 * buffer, however long it is (issue 38, status_groups_livelock: a user in
 * many groups has a Groups line of kilobytes before SigBlk, and a 1 023-byte
 * read missed it), passing each line to fn until it returns 0 or more.
 * Returns that, or -1 when no line told, -2 when unreadable (gone).
 */
static int
read_status(struct resend_space *sp, pid_t tid, int (*fn)(const char *line, void *ctx), void *ctx)
{
	char *path = sp->path, *buf = sp->status;
	size_t have = 0, size = sizeof(sp->status) - 1;
	bool skipping = false, any = false;
	int fd, r = -1;

	nsb_proc_path(path, sizeof(sp->path), "/proc/self/task/", (unsigned long)tid, "/status");
	fd = nsb_proc_open_trapped(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -2;
	while (r < 0) {
		ssize_t n = read(fd, buf + have, size - have);
		char *line = buf, *nl;

		if (n <= 0)
			break;
		any = true;
		have += (size_t)n;
		buf[have] = '\0';
		while (r < 0 && (nl = memchr(line, '\n', (size_t)(buf + have - line)))) {
			*nl = '\0';
			if (!skipping)
				r = fn(line, ctx);
			skipping = false;
			line = nl + 1;
		}
		if (line == buf && have == size) {
			/* A line longer than the buffer (Groups): not one
			 * that tells; skipped to its end. */
			skipping = true;
			have = 0;
		} else {
			have = (size_t)(buf + have - line);
			memmove(buf, line, have);
		}
	}
	syscall(SYS_close, fd);
	return any ? r : -2;
}

/* [signal-safe] Does thread tid really block SIGBUS (the kernel's mask,
 * as for a thread the C library started with every signal blocked), or is
 * it gone? */
static bool
kernel_blocks(struct resend_space *sp, pid_t tid)
{
	int r = read_status(sp, tid, blocks_line, NULL);

	return r == -2 ? true : r == 1;	/* no SigBlk: not blocking */
}

/* [signal-safe] For pending_line: the signals pending so far. */
struct pending_scan {
	uint64_t pending;
	int seen;
};

static int
pending_line(const char *line, void *ctx)
{
	struct pending_scan *ps = ctx;

	if (strncmp(line, "SigPnd:", 7) == 0 || strncmp(line, "ShdPnd:", 7) == 0) {
		ps->pending |= status_mask(line + 7);
		if (++ps->seen == 2)
			return 0;
	}
	return -1;
}

/*
 * [signal-safe] A SIGBUS the program ignores or blocks was swallowed
 * here: will a signal of the program's be delivered as this handler
 * returns (pending, and not blocked in the mask sigreturn restores)?
 * Then the wait this interrupts ends with EINTR for that one, and must not
 * be retried (issue 38, poll_eintr_lost: our handler runs with every
 * signal blocked, so a signal sent with the SIGBUS waits for its return).
 */
static bool
other_signal_coming(const ucontext_t *uc)
{
	int slot = nsb_slot_take(&resend_busy, NSB_SIGNAL_SLOTS);
	struct pending_scan ps = { 0, 0 };
	struct resend_space *sp;
	uint64_t open = 0;

	if (slot < 0)
		return false;
	sp = nsb_signal_space(NSB_SPACE_DISP, slot);
	/* Not under a seccomp filter (sandbox.c: a trapped openat here,
	 * every signal blocked, kills): none then, and the wait is retried. */
	if (sp && uc && nsb_unfiltered()) {
		memcpy(&open, &uc->uc_sigmask, sizeof(open));
		open = ~open & ~((uint64_t)1 << (SIGBUS - 1));
		(void)read_status(sp, nsb_gettid(), pending_line, &ps);
	}
	nsb_slot_give(&resend_busy, slot);
	return (ps.pending & open) != 0;
}

/* [signal-safe] Another thread of ours that does not block SIGBUS, in its
 * view or in the kernel, from /proc/self/task (open and getdents64 are
 * async-signal-safe); 0 if none, or if every buffer is in use. */
static pid_t
unblocked_thread(void)
{
	int slot = nsb_slot_take(&resend_busy, NSB_SIGNAL_SLOTS);
	struct resend_space *sp;
	pid_t self = nsb_gettid(), found = 0;
	long n;
	int fd = -1;

	if (slot < 0)
		return 0;
	sp = nsb_signal_space(NSB_SPACE_DISP, slot);
	/* Not under a seccomp filter: a browser traps openat, a kill in a
	 * handler that blocks every signal (sandbox.c).  None found then. */
	if (sp && nsb_unfiltered())
		fd = nsb_proc_open_trapped("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		nsb_slot_give(&resend_busy, slot);
		return 0;
	}
	while (!found && (n = syscall(SYS_getdents64, fd, sp->dir, sizeof(sp->dir))) > 0) {
		for (long off = 0; off < n && !found;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen;
				 unsigned char type; char name[]; } *d = (void *)(sp->dir + off);
			pid_t tid = 0;

			for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
				tid = tid * 10 + (*c - '0');
			if (tid > 0 && tid != self && !is_blocker(tid) && !kernel_blocks(sp, tid))
				found = tid;
			off += d->reclen;
		}
	}
	syscall(SYS_close, fd);
	nsb_slot_give(&resend_busy, slot);
	return found;
}

/*
 * [signal-safe] A SIGBUS sent to the process arrived at a thread whose
 * view blocks it: it goes to one that does not, as the kernel would have
 * chosen.  (Not inlined, nor is die_of: their frames must not be on the
 * stack when nsb_disp_chain runs the program's handler.)  The kernel lets us resend a siginfo exactly only when its
 * si_code is negative (sigqueue), or to the whole process from the main
 * thread; otherwise (kill's SI_USER, from another thread) the copy says
 * SI_QUEUE, with the sender's pid and uid.  Keeps errno.
 */
/* hold()'s copy of the siginfo it resends (the kernel may write into
 * it): thread-local, not on the handler's stack.  hold() runs in the
 * handler, which blocks every signal, once per thread at a time. */
static __thread siginfo_t hold_copy __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) static void
hold(const siginfo_t *si, bool directed)
{
	int expected = HELD_NONE, saved_errno = errno;
	siginfo_t *copy = &hold_copy;
	pid_t tid;

	if (!directed && !atomic_load(&state->blockers_incomplete) &&
	    (tid = unblocked_thread()) > 0) {
		*copy = *si;
		if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGBUS, copy) == 0)
			goto out;
		*copy = *si;
		if (nsb_gettid() == getpid() &&
		    syscall(SYS_rt_sigqueueinfo, getpid(), SIGBUS, copy) == 0)
			goto out;
		*copy = *si;
		copy->si_code = SI_QUEUE;
		if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGBUS, copy) == 0)
			goto out;
	}
	if (directed) {
		held_thread_info = *si;
		held_thread_gen = atomic_load(&discard_gen);
		held_thread = HELD_READY;
		goto out;
	}
	/* Already one pending: the kernel would have merged them. */
	if (!atomic_compare_exchange_strong(&held_process, &expected, HELD_BUSY))
		goto out;
	held_process_info = *si;
	held_process_gen = atomic_load(&discard_gen);
	atomic_store(&held_process, HELD_READY);
out:
	errno = saved_errno;
}

/* Is something held for this thread?  A vfork child sees nothing of its
 * parent's. */
static bool
held(void)
{
	unsigned gen = atomic_load(&discard_gen);

	if (nsb_in_vfork_child())
		return false;
	if (held_thread == HELD_READY && held_thread_gen != gen)
		held_thread = HELD_NONE;
	return held_thread == HELD_READY ||
	       (atomic_load(&held_process) == HELD_READY && held_process_gen == gen);
}

/* Empties the held slots, passing each live siginfo to fn. */
static void
take_held(void (*fn)(const siginfo_t *si))
{
	unsigned gen = atomic_load(&discard_gen);
	int expected = HELD_READY;
	siginfo_t si;

	if (nsb_in_vfork_child())
		return;
	if (held_thread == HELD_READY) {
		si = held_thread_info;
		held_thread = HELD_NONE;
		if (held_thread_gen == gen)
			fn(&si);
	}
	if (atomic_compare_exchange_strong(&held_process, &expected, HELD_BUSY)) {
		bool live = held_process_gen == gen;

		si = held_process_info;
		atomic_store(&held_process, HELD_NONE);
		if (live)
			fn(&si);
	}
}

/* Delivers what was held, now that the view unblocked SIGBUS. */
static void
deliver_held(void)
{
	if (!blocked)
		take_held(resend);
}

/*
 * A SIGBUS sent to the process, held while the only thread that did not
 * block it was inside one of the library's locks (every signal blocked
 * there, so it looked like a thread that blocks SIGBUS): the kernel would
 * have kept it pending and delivered it as that thread's mask came back
 * (issue 38, held_lost_lock_mask).  Called as a thread leaves the
 * outermost lock.
 */
void
nsb_disp_lock_left(void)
{
	if (atomic_load(&nsb_disp_is_installed) && !blocked && atomic_load(&held_process) == HELD_READY &&
	    held())
		deliver_held();
}

/* [signal-safe] Copies a sigset the program passed, or fails with EFAULT
 * as the kernel would, instead of crashing. */
static bool
read_user_sigset(const sigset_t *user, sigset_t *out)
{
	sigemptyset(out);
	return nsb_read_word(user, out);
}

static bool
how_valid(int how)
{
	return how == SIG_BLOCK || how == SIG_UNBLOCK || how == SIG_SETMASK;
}

/* Like pthread_sigmask: an error number, errno untouched. */
static int
sigmask_call(int how, const sigset_t *set, sigset_t *old)
{
	int saved_errno = errno, ret;

	ret = nsb_sys_sigmask(how, set, old) < 0 ? errno : 0;
	errno = saved_errno;
	return ret;
}

/* The view's SIGBUS bit after a change (how, set) of a view that was `was`. */
static bool
view_after(int how, bool set_has, bool was)
{
	if (how == SIG_BLOCK)
		return was || set_has;
	if (how == SIG_UNBLOCK)
		return was && !set_has;
	return set_has;
}

int
nsb_disp_mask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy, kold;
	bool was, now, set_has = false, own_view;
	int ret;

	if (!atomic_load(&nsb_disp_is_installed)) {
		/* Blocking SIGBUS installs the handler (to hold a sent one). */
		if (!set || !how_valid(how) || how == SIG_UNBLOCK || !sigismember(set, SIGBUS) ||
		    nsb_disp_install() < 0)
			return sigmask_call(how, set, old);
	}
	own_view = vfork_view_mine();
	was = own_view ? vfork_view : blocked;
	now = was;
	if (set) {
		copy = *set;	/* the C library reads it too */
		set_has = sigismember(&copy, SIGBUS) == 1;
		if (how_valid(how))
			now = view_after(how, set_has, was);
		sigdelset(&copy, SIGBUS);
	}
	/* A vfork child has its own mask but our memory: a change of its
	 * SIGBUS bit goes to its kernel mask and to a view of its own (for
	 * its exec), never to the parent's view. */
	if (own_view || (set && now != was && nsb_in_vfork_child())) {
		ret = sigmask_call(how, set, old);
		if (ret)
			return ret;
		vfork_view = now;
		vfork_view_pid = nsb_getpid();
		if (old && was)
			sigaddset(old, SIGBUS);
		else if (old)
			sigdelset(old, SIGBUS);
		return 0;
	}
	/* The kernel sets the mask, then writes old: EFAULT after a change. */
	/* Always read back: a SIGBUS that the kernel really blocks must
	 * be seen by a call without an old mask too (unblock_without_old). */
	if (!old)
		old = &kold;
	ret = sigmask_call(how, set ? &copy : NULL, old);
	if (ret && ret != EFAULT)
		return ret;
	if (!ret) {
		/* SIGBUS really blocked: a handler the kernel runs unwrapped
		 * added it to its uc_sigmask, which sigreturn restored.  That
		 * is the program's mask: its bit goes to the view, out of the
		 * kernel's. */
		if (sigismember(old, SIGBUS) == 1 && !nsb_in_vfork_child()) {
			sigset_t bus;

			was = true;
			now = set && how_valid(how) ? view_after(how, set_has, was) : was;
			sigbus_only(&bus);
			kernel_mask(SIG_UNBLOCK, &bus, NULL);
			if (!set || !how_valid(how))
				set_blocked(true);
		}
		if (was)
			sigaddset(old, SIGBUS);
		else
			sigdelset(old, SIGBUS);
	}
	if (set && how_valid(how)) {
		set_blocked(now);
		deliver_held();
	}
	return ret;
}

int
nsb_disp_pending(sigset_t *set)
{
	int ret = real_sigpending(set);

	if (ret == 0 && atomic_load(&nsb_disp_is_installed) && held())
		sigaddset(set, SIGBUS);
	return ret;
}

/*
 * Calls that wait (waits.c).  With the library's handler installed, a
 * sent SIGBUS that the program ignores, or blocks, still runs our handler
 * and so interrupts the wait (EINTR), where without us nothing would:
 * such an EINTR is retried, unless a handler of the program ran too.  And
 * a wait with a mask of its own (sigsuspend, ppoll, ...) must not really
 * block SIGBUS: its SIGBUS bit goes to the view for the wait.
 */
static __thread unsigned swallowed __attribute__((tls_model("initial-exec")));
static __thread unsigned handled __attribute__((tls_model("initial-exec")));
/* In one of those waits (NSB_WAIT_*, waits.c): only there does a
 * swallowed SIGBUS matter, and other_signal_coming's /proc read is paid
 * (a program flooded with sent SIGBUS outside waits paid it for each:
 * 30 000 reads in 0.1 s of signals-sent-during-lock-mmap, a run that did
 * not end in 160 s under TCG).  A wait left by a jump out of a handler
 * leaves it set: the read is made again then, where it is not needed
 * (an interposed jump turns a parking wait into a plain one, below). */
static __thread unsigned char waiting __attribute__((tls_model("initial-exec")));

/*
 * Parked: the exact way to retry (poll_eintr_lost).  The /proc read can
 * only see what is pending when it is made: a signal of the program sent
 * after it and before our handler returns runs its handler as we return,
 * and the wait it should have ended is retried.  So where the retry can be
 * made with a mask (waits.c: ppoll for poll and the sleeps, pselect for
 * select, epoll_pwait, sigsuspend for pause, and the masked waits
 * themselves), our handler returns with every signal blocked but the
 * faults' (uc_sigmask) and keeps the mask it replaced here: the retry
 * unblocks exactly that mask for as long as it waits, so a signal that
 * came meanwhile ends it with EINTR, its handler run, as the kernel's wait
 * would have; the wait's end puts the mask back.  Parked only when the
 * interrupted context is our wait's system call (an EINTR just returned,
 * on a stack a little below the wait's frame, wait_sp): never for a stale
 * `waiting`.  The thread's own kernel mask: 64 bits (_NSIG on x86-64 and
 * aarch64).
 */
static __thread bool parked __attribute__((tls_model("initial-exec")));
static __thread uint64_t park_bits __attribute__((tls_model("initial-exec")));
static __thread uintptr_t wait_sp __attribute__((tls_model("initial-exec")));

/* The signals a parked thread still takes: the faults, which the kernel
 * forces (a blocked one kills), and glibc's own two (SIGCANCEL,
 * SIGSETXID: setuid() in another thread waits for every thread). */
#define PARK_OPEN								\
	((1ULL << (SIGBUS - 1)) | (1ULL << (SIGSEGV - 1)) | (1ULL << (SIGILL - 1)) |	\
	 (1ULL << (SIGFPE - 1)) | (1ULL << (SIGTRAP - 1)) | (1ULL << (SIGSYS - 1)) |	\
	 (1ULL << 31) | (1ULL << 32))

#if defined(__aarch64__)
#define WAIT_CALL_DEPTH 4096
#else
#define WAIT_CALL_DEPTH 1024
#endif

/* [signal-safe] Is uc our wait's system call, just interrupted (EINTR)?
 * 1 yes, 0 no, -1 unknown (a target whose context is not read here). */
static int
in_our_wait(const ucontext_t *uc)
{
	uintptr_t sp;
	long ret;

#if defined(__x86_64__)
	sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	ret = (long)uc->uc_mcontext.gregs[REG_RAX];
#elif defined(__aarch64__)
	sp = (uintptr_t)uc->uc_mcontext.sp;
	ret = (long)uc->uc_mcontext.regs[0];
#else
	(void)uc;
	return -1;
#endif
	/* The C library's wrapper and its cancellation helpers use a few
	 * hundred bytes below the wait's frame (96 to 208 in glibc 2.36
	 * x86-64).  A handler of the program's that runs during the wait
	 * (the EINTR of its signal) runs below the kernel's signal frame,
	 * and a system call of its that the SIGBUS ends with EINTR is not
	 * the wait's: taken for it, its mask (the handler's signal blocked)
	 * was the one restored at the wait's end and the wait retried
	 * (park-handler-eintr-*).  The signal frame is larger than this
	 * bound: x86-64, 128 bytes of red zone, the ucontext and siginfo,
	 * and the FPU state (512 bytes of legacy area and the XSAVE header
	 * at the least); aarch64, a ucontext with 4096 reserved bytes. */
	return ret == -EINTR && sp < wait_sp && wait_sp - sp < WAIT_CALL_DEPTH;
}

/* [signal-safe] The end of a SIGBUS swallowed: counted for the wait it
 * interrupts, unless a signal of the program's comes with it.  One that
 * interrupted no system call of the wait (it came while the wait's own
 * code ran) ended nothing: not counted, or a program's signal that
 * interrupts the call next would be retried.  Parked (above) where the
 * wait allows it: then whatever comes is the retry's. */
static void
swallow(ucontext_t *uc)
{
	int ours = waiting && uc ? in_our_wait(uc) : -1;

	if (ours == 0)
		return;
	if (ours == 1 &&
	    (waiting == NSB_WAIT_PARK || (waiting == NSB_WAIT_PARK_FREE && nsb_unfiltered()))) {
		uint64_t closed = ~PARK_OPEN;

		/* Again during the retry: the mask there is ours already. */
		if (!parked)
			memcpy(&park_bits, &uc->uc_sigmask, sizeof(park_bits));
		parked = true;
		memcpy(&uc->uc_sigmask, &closed, sizeof(closed));
		swallowed++;
		return;
	}
	if (!waiting || !other_signal_coming(uc))
		swallowed++;
}

int
nsb_disp_wait_begin(struct nsb_wait *w, const sigset_t *mask, int kind)
{
	w->active = atomic_load(&nsb_disp_is_installed);
	w->kmask = mask;
	w->park = NULL;
	if (!w->active)
		return 0;
	w->was = blocked;
	w->swallowed = swallowed;
	w->handled = handled;
	/* Nested (in a handler run during a wait): this wait's state over
	 * the outer one's, put back at its end. */
	w->outer = waiting;
	w->outer_parked = parked;
	w->outer_bits = park_bits;
	w->outer_sp = wait_sp;
	w->outer_swallowed = swallowed;
	w->kind = (unsigned char)kind;
	if (!mask) {
		parked = false;
		wait_sp = (uintptr_t)w;
		waiting = (unsigned char)kind;
		return 0;
	}
	if (!read_user_sigset(mask, &w->copy))
		return EFAULT;
	set_blocked(sigismember(&w->copy, SIGBUS));
	sigdelset(&w->copy, SIGBUS);
	w->kmask = &w->copy;
	if (!blocked && held()) {
		/* A pending, now unblocked signal: handled, then EINTR - and
		 * so is every other signal pending that the wait's mask
		 * unblocks, as the kernel's wait would have it: the wait's
		 * mask, for as long as one system call. */
		sigset_t saved;

		deliver_held();
		if (kernel_mask(SIG_SETMASK, &w->copy, &saved) == 0)
			kernel_mask(SIG_SETMASK, &saved, NULL);
		set_blocked(w->was);
		return EINTR;
	}
	parked = false;
	wait_sp = (uintptr_t)w;
	waiting = (unsigned char)kind;
	return 0;
}

/* A wait begun in a handler that interrupted this one (w) was left by a
 * jump without its end (park-jump-nested): the state here is still that
 * wait's (its parked mask, its swallowed SIGBUS, its frame).  This wait's
 * own again: its call was interrupted by the handler that ran, an EINTR
 * of the program's, never retried. */
static bool
inner_left(struct nsb_wait *w)
{
	if (wait_sp == (uintptr_t)w)
		return false;
	waiting = w->kind;
	wait_sp = (uintptr_t)w;
	parked = w->park != NULL;
	if (w->park)
		memcpy(&park_bits, &w->park_mask, sizeof(park_bits));
	swallowed = w->swallowed;
	return true;
}

bool
nsb_disp_wait_again(struct nsb_wait *w)
{
	bool again;

	if (w->active && inner_left(w))
		return false;
	again = w->active && swallowed != w->swallowed && handled == w->handled;
	if (w->active) {
		w->swallowed = swallowed;
		w->handled = handled;
		if (parked && waiting == NSB_WAIT_PARK_FREE && !nsb_unfiltered()) {
			/* A filter came since the wait parked (one
			 * synchronized to every thread, or made by this
			 * thread's handler): the variant, another system
			 * call, may be refused.  The wait's own call again,
			 * with the mask it began with
			 * (park-filter-later-*). */
			sigset_t m;

			sigemptyset(&m);
			memcpy(&m, &park_bits, sizeof(park_bits));
			kernel_mask(SIG_SETMASK, &m, NULL);
			parked = false;
			waiting = NSB_WAIT_PLAIN;
			w->park = NULL;
			w->kmask = NULL;
		} else if (parked && !w->park) {
			sigemptyset(&w->park_mask);
			memcpy(&w->park_mask, &park_bits, sizeof(park_bits));
			w->park = &w->park_mask;
			/* A masked wait given no mask (ppoll, pselect,
			 * epoll_pwait with NULL: the thread's as it is) is
			 * retried with the one parking replaced, or it would
			 * wait with every signal blocked. */
			if (!w->kmask)
				w->kmask = w->park;
		}
	}
	return again;
}

void
nsb_disp_wait_end(struct nsb_wait *w)
{
	if (!w->active)
		return;
	/* Parked: the mask the wait began with (every signal of it that
	 * came since is delivered here: after the wait, as the kernel's).
	 * This wait's own record (w->park, set by nsb_disp_wait_again at
	 * the EINTR that parked it), not the thread's, which an inner wait
	 * left by a jump may hold. */
	if (w->park)
		kernel_mask(SIG_SETMASK, &w->park_mask, NULL);
	waiting = w->outer;
	parked = w->outer_parked;
	park_bits = w->outer_bits;
	wait_sp = w->outer_sp;
	/* What a nested wait swallowed was its own (the handler it ran in
	 * still ends the outer wait with EINTR). */
	if (w->outer)
		swallowed = w->outer_swallowed;
	if (w->kmask == &w->copy) {
		set_blocked(w->was);
		/* Held while the wait's mask blocked it: the kernel delivers
		 * it as the wait restores the mask (sigsuspend_end_held). */
		deliver_held();
	}
}

/* A jump or a context switch out of a handler may leave a wait without
 * its end: no more parking in it (a plain wait's /proc read is all a
 * stale `waiting` costs). */
static void
wait_jumped(void)
{
	if (waiting == NSB_WAIT_PARK || waiting == NSB_WAIT_PARK_FREE)
		waiting = NSB_WAIT_PLAIN;
}

/*
 * sigwait, sigwaitinfo, sigtimedwait: they consume a pending signal of
 * their set.  A SIGBUS sent while the program blocked it is held here,
 * not pending in the kernel, so the wait takes it from here: before it
 * starts, and once more after one that got nothing (held meanwhile by our
 * handler in this thread, just before the wait began).  For the time of
 * the wait the thread leaves the blocker table, so that a SIGBUS sent to
 * the process and landing in another thread that blocks it is passed here
 * and consumed by the kernel's wait, which unblocks its set for as long
 * as it waits (issue 38, sigwait_held).  The kernel dequeues the
 * synchronous signals, SIGBUS among them, before any other: so does this.
 */
bool
nsb_disp_sigwait_begin(struct nsb_sigwait *w, const sigset_t *set, siginfo_t *got)
{
	sigset_t copy;

	w->active = false;
	if (!atomic_load(&nsb_disp_is_installed) || nsb_in_vfork_child() || !read_user_sigset(set, &copy) ||
	    sigismember(&copy, SIGBUS) != 1)
		return false;
	w->active = true;
	if (blocked)
		note_blocker(false);	/* no allocation, no errno */
	return nsb_disp_sigwait_take(w, got);
}

/* The one held SIGBUS the kernel would give (this thread's first). */
bool
nsb_disp_sigwait_take(struct nsb_sigwait *w, siginfo_t *got)
{
	unsigned gen = atomic_load(&discard_gen);
	int expected = HELD_READY;

	if (!w->active)
		return false;
	if (held_thread == HELD_READY) {
		*got = held_thread_info;
		held_thread = HELD_NONE;
		if (held_thread_gen == gen)
			return true;
	}
	if (atomic_compare_exchange_strong(&held_process, &expected, HELD_BUSY)) {
		bool live = held_process_gen == gen;

		*got = held_process_info;
		atomic_store(&held_process, HELD_NONE);
		if (live)
			return true;
	}
	return false;
}

void
nsb_disp_sigwait_end(struct nsb_sigwait *w)
{
	int saved_errno = errno;

	if (w->active && blocked)
		note_blocker(true);	/* may map a chunk of the table */
	errno = saved_errno;
}

/* ---- running the program's handlers ------------------------------------ */

/* [signal-safe] Dies of si as the kernel would kill with it: default
 * action, delivered once we return (the signal is blocked while we run). */
__attribute__((noinline)) static void
die_of(int sig, const siginfo_t *si)
{
	int saved_errno = errno;
	siginfo_t copy = *si;

	kernel_default(sig);
	/* With its siginfo where no seccomp filter can refuse or kill on
	 * rt_tgsigqueueinfo; else, or refused (seccomp_sigqueue_survives),
	 * as tgkill sends it, which every filter that lets raise() work
	 * allows: the same death, without the siginfo (sandbox.c). */
	if (!nsb_unfiltered() ||
	    syscall(SYS_rt_tgsigqueueinfo, getpid(), nsb_gettid(), sig, &copy) < 0)
		syscall(SYS_tgkill, getpid(), nsb_gettid(), sig);
	errno = saved_errno;
}

/* Signals whose default action is to do nothing. */
static bool
default_ignores(int sig)
{
	return sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT;
}

/*
 * [signal-safe] Runs the program's handler act for sig, as the kernel
 * would have: the mask it sets (its sa_mask, sig itself unless
 * SA_NODEFER), with SIGBUS only in the view; uc->uc_sigmask as the
 * program sees it; and afterwards the view that the handler left there.
 * `set_mask`: the kernel has not set the handler's mask (our SIGBUS
 * handler runs with every signal blocked).
 */
/*
 * [signal-safe] What arrived while the program's handler ran is delivered
 * once we return, as the kernel would: pending until sigreturn restores
 * the mask, not nested in this frame (a flood would overflow the stack).
 * Not inlined: its set is not on the stack while the program's handler
 * runs (the handler may run on a small alternate stack).
 */
__attribute__((noinline)) static void
resend_held(void)
{
	sigset_t bus;

	sigbus_only(&bus);
	kernel_mask(SIG_BLOCK, &bus, NULL);
	take_held(resend);
}

static void
run_handler(int sig, siginfo_t *si, ucontext_t *uc, const struct sigaction *act, bool set_mask)
{
	bool was = blocked, in;

	handled++;
	in = was || sigismember(&act->sa_mask, SIGBUS) ||
	     (sig == SIGBUS && !(act->sa_flags & SA_NODEFER));
	if (uc) {
		if (was)
			sigaddset(&uc->uc_sigmask, SIGBUS);
		else
			sigdelset(&uc->uc_sigmask, SIGBUS);
	}
	/* The view first: once the kernel's mask lets SIGBUS in, a sent one
	 * must find it blocked, if the program's handler has it so. */
	if (handler_depth++ == 0)
		blocked_outside = was;
	if (in != was)
		set_blocked(in);
	if (set_mask && uc) {
		/* In the kernel's size: this frame stays small on the way to
		 * the program's handler (issue 19: 512 bytes, aarch64 too). */
		struct nsb_kset mask, extra;

		memcpy(&mask, &uc->uc_sigmask, sizeof(mask));
		memcpy(&extra, &act->sa_mask, sizeof(extra));
		for (size_t i = 0; i < sizeof(mask.w) / sizeof(mask.w[0]); i++)
			mask.w[i] |= extra.w[i];
		if (!(act->sa_flags & SA_NODEFER))
			nsb_kset_add(&mask, sig);
		nsb_kset_del(&mask, SIGBUS);
		nsb_sys_sigmask_kernel(SIG_SETMASK, &mask, NULL);
	}
	/* With the three arguments the kernel gave, SA_SIGINFO or not, as the
	 * kernel passes them (x86-64 always; older code reads them). */
	if (sig == SIGBUS) {
		chaining = si;
		chaining_frame = __builtin_frame_address(0);
	}
	act->sa_sigaction(sig, si, uc);
	chaining = NULL;
	/* Back from the handler (not jumped out of it: see nsb_disp_longjmp). */
	handler_depth--;
	if (uc) {
		set_blocked(sigismember(&uc->uc_sigmask, SIGBUS));
		sigdelset(&uc->uc_sigmask, SIGBUS);
	} else {
		set_blocked(was);
	}
	if (!blocked && held())
		resend_held();
}

/* [signal-safe] Every program handler of a signal other than SIGBUS. */
static void
trampoline(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	struct sigaction act;

	take_action(sig, &act);
	errno = saved_errno;
	/* The program changed it while this one was on its way. */
	if (act.sa_handler == SIG_IGN || (act.sa_handler == SIG_DFL && default_ignores(sig)))
		return;
	if (act.sa_handler == SIG_DFL) {
		die_of(sig, si);
		return;
	}
	run_handler(sig, si, ucv, &act, false);
}

/*
 * [signal-safe] Raised by the kernel for this thread's own access (uc:
 * its context), rather than sent?  The kernel forces a fault's SIGBUS
 * even when blocked or ignored; BUS_MCEERR_AO and SI_KERNEL are sent like
 * any other signal.  And the kernel sends SIGBUS with positive codes of other families
 * that a fault's share: a clone child's exit signal (CLD_EXITED 1,
 * CLD_KILLED 2, CLD_DUMPED 3, CLD_TRAPPED 4) and F_SETSIG (POLL_IN 1 ...).
 * Taken for a fault, one of those killed a program that blocked or
 * ignored SIGBUS (issue 38, exit_signal_bus).  A fault's context holds
 * the faulting address where si_addr does (x86-64's cr2, aarch64's
 * fault_address); a child's siginfo holds its pid there.  x86's alignment
 * check (#AC, split locks) reports no address.  A machine check
 * (BUS_MCEERR_AR, asynchronous, no address in the context) is always
 * taken for a fault.
 */
bool
nsb_disp_is_fault(const siginfo_t *si, const void *ucv)
{
	uintptr_t addr = (uintptr_t)si->si_addr;

	switch (si->si_code) {
	case BUS_MCEERR_AR:
		return true;
	case BUS_ADRALN:
	case BUS_ADRERR:
	case BUS_OBJERR:
		break;
	default:
		return false;
	}
#if defined(__x86_64__)
	{
		const ucontext_t *uc = ucv;

		if (si->si_code == BUS_ADRALN && addr == 0)
			return true;
		return !uc || (uintptr_t)uc->uc_mcontext.gregs[REG_CR2] == addr;
	}
#elif defined(__aarch64__)
	{
		const ucontext_t *uc = ucv;

		return !uc || (uintptr_t)uc->uc_mcontext.fault_address == addr;
	}
#else
	(void)ucv;
	(void)addr;
	return true;
#endif
}

/* SIGBUS sent by pthread_sigqueue and not yet arrived (signals.c):
 * counted in state->directed_inflight (only once installed). */
void
nsb_disp_directed(int delta)
{
	if (state)
		atomic_fetch_add(&state->directed_inflight, delta);
}

/* [signal-safe] Is this SI_QUEUE one that pthread_sigqueue sent to this
 * thread?  Ours (our pid), while one is on its way: taken. */
static bool
took_directed(const siginfo_t *si)
{
	int n;

	if (!state || si->si_pid != getpid())
		return false;
	n = atomic_load(&state->directed_inflight);
	while (n > 0)
		if (atomic_compare_exchange_weak(&state->directed_inflight, &n, n - 1))
			return true;
	return false;
}

/*
 * [signal-safe] nsb_disp_chain's way to the program's action: out of line,
 * so that the action (a struct sigaction) is on the stack only on this
 * path, not on the held path's (the handler's budget, SPEC §5).
 */
__attribute__((noinline)) static void
chain_to_action(int sig, siginfo_t *si, void *ucv)
{
	struct sigaction act;

	take_action(SIGBUS, &act);
	/* The kernel forces the default action on a fault that is blocked
	 * or ignored. */
	if (act.sa_handler == SIG_DFL ||
	    (nsb_disp_is_fault(si, ucv) && (blocked || act.sa_handler == SIG_IGN))) {
		/* Dies of the same signal, core and all, as soon as we return:
		 * SIGBUS is blocked while we run, and sigreturn restores the
		 * faulting context first.  Re-faulting instead would not be
		 * certain: another thread may have remapped the page. */
		die_of(sig, si);
		return;
	}
	if (act.sa_handler == SIG_IGN) {
		swallow(ucv);
		return;
	}
	run_handler(sig, si, ucv, &act, true);
}

/* [signal-safe] A SIGBUS the library does not rescue. */
void
nsb_disp_chain(int sig, siginfo_t *si, void *ucv)
{
	bool directed;

	/* The program's handler calls ours with the siginfo it was given:
	 * another sigaction interposer (the JVM's libjsig, preloaded after
	 * us) saw our handler in the kernel before the program's and chains
	 * to it as "the previous one".  Running the program's handler again
	 * would recurse; the previous action, as the program was told, is
	 * the default: die of it. */
	if (si == chaining && (const char *)__builtin_frame_address(0) < chaining_frame) {
		chaining = NULL;
		die_of(sig, si);
		return;
	}
	directed = si->si_code == SI_TKILL || (si->si_code == SI_QUEUE && took_directed(si));
	if (!nsb_disp_is_fault(si, ucv) && blocked) {
		hold(si, directed);
		swallow(ucv);
		return;
	}
	chain_to_action(sig, si, ucv);
}

/*
 * sigsetjmp(env, 1) saves the kernel's mask in env, which never holds
 * SIGBUS once the handler is installed: the view's bit is kept here, by
 * jmp_buf address (jumps.c's __sigsetjmp calls nsb_disp_setjmp), per
 * thread (a jmp_buf is jumped to by the thread that set it), in a small
 * direct-mapped table (low bits: the view, or JUMP_KERNEL when the mask
 * was saved before the handler was installed, and so holds the program's
 * SIGBUS bit itself).  A newer sigsetjmp at the same
 * address replaces the entry; one at a colliding address evicts it, and a
 * jump to an env without an entry (evicted, copied elsewhere, or filled by
 * a __sigsetjmp that did not come through our symbol) falls back: SIGBUS
 * in the saved mask (saved before the handler was installed) means
 * blocked, else the view outside the handler being left, else the view
 * as it is (libnosigbus(7)).  Nothing is written into the jmp_buf itself.
 */
#define JUMP_SLOTS 16
#define JUMP_BLOCKED ((uintptr_t)1)
#define JUMP_KERNEL ((uintptr_t)2)
#define JUMP_BITS (JUMP_BLOCKED | JUMP_KERNEL)
static __thread uintptr_t jump_views[JUMP_SLOTS] __attribute__((tls_model("initial-exec")));

static unsigned
jump_slot(uintptr_t env)
{
	return (unsigned)((env >> 4) ^ (env >> 10)) % JUMP_SLOTS;
}

/* [signal-safe] */
void
nsb_disp_setjmp(const void *env, bool savemask)
{
	uintptr_t k = (uintptr_t)env & ~JUMP_BITS;
	uintptr_t *slot = &jump_views[jump_slot(k)];

	if (!savemask)
		*slot = (*slot & ~JUMP_BITS) == k ? 0 : *slot;
	else if (!atomic_load(&nsb_disp_is_installed))
		*slot = k | JUMP_KERNEL;
	else
		*slot = k | (blocked ? JUMP_BLOCKED : 0);
}

/*
 * The program jumps with siglongjmp or longjmp (to env).  glibc restores a
 * saved mask inside these, past our sigprocmask, so the program's view of
 * SIGBUS is brought back here: to what it was at sigsetjmp when the mask
 * was saved, left as it is when it was not (as the kernel would leave it).
 * Returns true when the saved mask holds SIGBUS and the handler is
 * installed: the caller must then jump with a copy of env without it (the
 * kernel must not block SIGBUS).
 */
bool
nsb_disp_longjmp(const void *env, bool mask_saved, const sigset_t *saved_mask)
{
	uintptr_t k = (uintptr_t)env & ~JUMP_BITS, e;
	bool depth = handler_depth > 0, saved_bus, view;

	handler_depth = 0;
	chaining = NULL;
	wait_jumped();
	if (!mask_saved || !atomic_load(&nsb_disp_is_installed))
		return false;
	saved_bus = sigismember(saved_mask, SIGBUS) == 1;
	e = jump_views[jump_slot(k)];
	if ((e & ~JUMP_BITS) == k && !(e & JUMP_KERNEL))
		view = e & JUMP_BLOCKED;
	else if ((e & ~JUMP_BITS) == k || saved_bus)
		view = saved_bus;
	else if (depth)
		view = blocked_outside;
	else
		view = blocked;
	set_blocked(view);
	deliver_held();
	return saved_bus;
}

/* A context's mask is about to be the thread's: its SIGBUS bit goes to
 * the view, out of the kernel's copy.  Returns the view before. */
bool
nsb_disp_view_for_context(sigset_t *mask, bool leaves)
{
	bool was = blocked;

	/* A context whose mask blocks SIGBUS installs the handler, as
	 * blocking it does: otherwise the kernel would block it here for
	 * real, and a later installation, from any thread, leaves this one
	 * to be killed by its next fault (swapcontext_mask_before_install). */
	if (!atomic_load(&nsb_disp_is_installed) &&
	    (sigismember(mask, SIGBUS) != 1 || nsb_disp_install() < 0))
		return was;
	/* setcontext leaves whatever handler runs, for good, as a longjmp
	 * does (setcontext_leaves_handler). */
	if (leaves) {
		handler_depth = 0;
		chaining = NULL;
		wait_jumped();
	}
	set_blocked(sigismember(mask, SIGBUS) == 1);
	sigdelset(mask, SIGBUS);
	/* A SIGBUS held while the view blocked it is delivered as the
	 * context's mask lets it in (setcontext_held_lost): the kernel would
	 * deliver it on the way out of the mask change, on this stack. */
	deliver_held();
	return was;
}

void
nsb_disp_view_restore(bool was)
{
	if (!atomic_load(&nsb_disp_is_installed))
		return;
	set_blocked(was);
	deliver_held();
}

/* ---- threads ----------------------------------------------------------- */

/* A new thread inherits its creator's mask, SIGBUS bit included. */
bool
nsb_disp_thread_blocked_at_start(void)
{
	return atomic_load(&nsb_disp_is_installed) && blocked;
}

void
nsb_disp_thread_start(bool b)
{
	if (atomic_load(&nsb_disp_is_installed))
		set_blocked(b);
}

/*
 * [signal-safe] A thread the C library started with every signal blocked
 * runs a function of the program: the program sees SIGBUS blocked there,
 * as the kernel has it, but a fault must still be rescued.
 */
void
nsb_disp_thread_start_kernel(void)
{
	sigset_t cur, bus;

	if (!atomic_load(&nsb_disp_is_installed) || kernel_mask(SIG_BLOCK, NULL, &cur) < 0 ||
	    !sigismember(&cur, SIGBUS))
		return;
	set_blocked(true);
	sigbus_only(&bus);
	kernel_mask(SIG_UNBLOCK, &bus, NULL);
}

/* ---- exec -------------------------------------------------------------- */

/*
 * What an exec'd program inherits is what this one set: an ignored SIGBUS
 * stays ignored and a blocked one stays blocked.  Blocking is per thread,
 * so this thread's kernel mask takes the program's bit for the call (a
 * fault while it is blocked kills, with or without the library).  The
 * disposition is per process, and SIG_IGN in the kernel would let a fault
 * kill the process meanwhile (another thread's, or a handler's that runs
 * during system()): exec.c tells the new program through its environment
 * instead (NSB_HANDOFF_VAR), when it will load the library.  A held
 * SIGBUS stays pending across exec, as it would have.
 */
void
nsb_disp_before_exec(struct nsb_exec *x)
{
	struct sigaction act;
	sigset_t bus;

	memset(x, 0, sizeof(*x));
	if (!atomic_load(&nsb_disp_is_installed))
		return;
	read_action(SIGBUS, &act);
	/* A vfork child that set its own SIGBUS action has it in its
	 * kernel, the parent's stays in our memory (vfork_reset_ignored). */
	if (nsb_in_vfork_child() && vfork_action_pid == nsb_getpid()) {
		struct sigaction k;

		if (nsb_sys_sigaction(SIGBUS, NULL, &k) == 0 &&
		    k.sa_sigaction != nsb_rescue_handler)
			act = k;
	}
	x->ignored = act.sa_handler == SIG_IGN;
	x->blocked = vfork_view_mine() ? vfork_view : blocked;
	if (x->blocked) {
		sigbus_only(&bus);
		kernel_mask(SIG_BLOCK, &bus, &x->saved_mask);
		take_held(resend);
	}
}

/*
 * An ignored SIGBUS, for a new program that will not load the library:
 * SIG_IGN goes into the kernel for the call, where no other thread can
 * fault meanwhile - a vfork child (its actions are its own) or a process
 * of one thread (issue 38, execveat_ign; POSIX keeps ignored signals
 * ignored across exec).  Elsewhere the new program starts with SIGBUS at
 * its default (libnosigbus(7)).  Left: a handler that runs between this
 * and the exec and faults in a protected page dies of it.
 */
void
nsb_disp_exec_ignore(struct nsb_exec *x)
{
	struct sigaction ign, k;

	if (!x->ignored || (!nsb_in_vfork_child() && nsb_other_threads()))
		return;
	/* Only over our handler: a vfork child's own SIG_IGN is there. */
	if (nsb_sys_sigaction(SIGBUS, NULL, &k) < 0 || k.sa_sigaction != nsb_rescue_handler)
		return;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	if (nsb_sys_sigaction(SIGBUS, &ign, &x->saved_action) == 0)
		x->ignore_set = true;
}

/* The exec failed (or, for posix_spawn, the child has started): back. */
void
nsb_disp_after_exec(struct nsb_exec *x)
{
	sigset_t bus;

	if (!atomic_load(&nsb_disp_is_installed))
		return;
	if (x->ignore_set)
		nsb_sys_sigaction(SIGBUS, &x->saved_action, NULL);
	if (x->blocked) {
		sigbus_only(&bus);
		kernel_mask(SIG_UNBLOCK, &bus, NULL);
	}
}

/* ---- start and fork ---------------------------------------------------- */

/*
 * The child starts with no signal pending, one thread, and a new id.  An
 * action that another thread's handler was resetting at the fork
 * (take_action: SA_RESETHAND; the fork holds the lock of every other
 * writer) is left odd in the child, where every reader and writer of it
 * would wait forever: the reset is finished.  That thread took the
 * handler before the fork, so the child's action is SIG_DFL, as the
 * kernel would have it.
 */
void
nsb_disp_after_fork_child(void)
{
	for (int sig = 1; state && sig < NSIGS; sig++) {
		struct prog_action *pa = &state->actions[sig];
		unsigned s = atomic_load(&pa->seq);

		if (s & 1) {
			pa->act.sa_handler = SIG_DFL;
			atomic_store(&pa->seq, s + 1);
		}
	}
	held_thread = HELD_NONE;
	atomic_store(&held_process, HELD_NONE);
	if (state)
		atomic_store(&state->directed_inflight, 0);
	for (struct blockers *b = state ? &state->blockers : NULL; b; b = atomic_load(&b->next))
		for (int i = 0; i < BLOCKERS; i++)
			atomic_store(&b->tid[i], 0);
	if (blocked) {
		blocked = false;
		set_blocked(true);
	}
}

/*
 * A process can start with SIGBUS blocked (inherited across exec): that
 * is the program's mask, not the kernel's.  And a program that ignored
 * SIGBUS while other threads ran passed that on in the environment (seen
 * by nsb_config_read, in its one pass over it).  Called by the
 * constructor, after nsb_config_read.
 */
void
nsb_disp_start(void)
{
	sigset_t set;

	/* Never passed further: a program that does not load the library
	 * would hand it on to one that does, much later. */
	if (nsb_config.handoff_seen)
		unsetenv(NSB_HANDOFF_VAR);
	if (nsb_config.inherit_ignored) {
		struct sigaction ign;

		memset(&ign, 0, sizeof(ign));
		ign.sa_handler = SIG_IGN;
		nsb_sys_sigaction(SIGBUS, &ign, NULL);
	}
	if (kernel_mask(SIG_BLOCK, NULL, &set) == 0 && sigismember(&set, SIGBUS)) {
		(void)nsb_disp_install();
		sigbus_only(&set);
		kernel_mask(SIG_UNBLOCK, &set, NULL);
	}
}
