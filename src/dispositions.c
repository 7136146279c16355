/* SPDX-License-Identifier: MIT */
/*
 * dispositions.c - the program's own SIGBUS disposition and mask.
 *
 * Once the library's handler is installed, the kernel's SIGBUS action is
 * always ours and SIGBUS is never really blocked (a blocked synchronous
 * SIGBUS is fatal: the kernel forces the default action).  What the
 * program installed and blocked is kept here, and every SIGBUS we do not
 * rescue is handed to it as the kernel would have (SPEC §6).
 *
 * The program's disposition lives in a small ring of immutable slots; the
 * current one is named by an atomic index, so the handler can read it
 * without a lock and SA_RESETHAND can reset it with one compare-and-swap.
 *
 * Signal context: nsb_disp_chain, nsb_disp_blocked and what they call.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "nsb.h"

enum { SLOT_DFL, SLOT_IGN, SLOT_FIRST, SLOTS = 64 };

static struct sigaction slots[SLOTS];
static atomic_int current = SLOT_DFL;
static int next_slot = SLOT_FIRST;
static atomic_bool installed;
static pthread_mutex_t disp_lock = PTHREAD_MUTEX_INITIALIZER;

/* The program's view of the SIGBUS bit in this thread's mask. */
static __thread bool blocked __attribute__((tls_model("initial-exec")));
/* How many of the program's handlers this thread is in, and the view
 * outside the outermost one (for jumps out of them). */
static __thread int handler_depth __attribute__((tls_model("initial-exec")));
static __thread bool blocked_outside __attribute__((tls_model("initial-exec")));

/* A sent SIGBUS that arrived while the program had it blocked.  Standard
 * signals do not queue, so one of each is all the kernel would keep. */
enum { HELD_NONE, HELD_BUSY, HELD_READY };
static atomic_int held_process;
static siginfo_t held_process_info;
static __thread int held_thread __attribute__((tls_model("initial-exec")));
static __thread siginfo_t held_thread_info __attribute__((tls_model("initial-exec")));

static void note_blocker(bool is_blocking);

/* ---- the kernel side --------------------------------------------------- */

/* [signal-safe] Our action, with the program's SA_RESTART and SA_ONSTACK
 * so that interrupted system calls and stacks behave as it asked. */
static void
kernel_install(const struct sigaction *prog)
{
	struct sigaction ours;

	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = nsb_rescue_handler;
	ours.sa_flags = SA_SIGINFO | (prog->sa_flags & (SA_RESTART | SA_ONSTACK));
	/* Asynchronous signals wait while we rescue; the program's own mask
	 * is set explicitly before its handler runs. */
	sigfillset(&ours.sa_mask);
	nsb_sys_sigaction(SIGBUS, &ours, NULL);
}

/* [signal-safe] */
static void
kernel_default(void)
{
	struct sigaction dfl;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	nsb_sys_sigaction(SIGBUS, &dfl, NULL);
}

/* [signal-safe] */
static void
current_action(struct sigaction *out)
{
	*out = slots[atomic_load(&current)];
}

/* Caller holds disp_lock.  A handler with SA_RESETHAND gets a second slot
 * right after it, the same action with SIG_DFL, which the signal handler
 * switches to with one compare-and-swap (as the kernel resets only the
 * handler, not the flags or mask). */
static void
publish(const struct sigaction *act)
{
	int slot;

	if (act->sa_handler == SIG_DFL && !act->sa_flags && sigisemptyset(&act->sa_mask)) {
		atomic_store(&current, SLOT_DFL);
		return;
	}
	if (next_slot + 1 >= SLOTS)
		next_slot = SLOT_FIRST;
	slot = next_slot;
	slots[slot] = *act;
	slots[slot + 1] = *act;
	slots[slot + 1].sa_handler = SIG_DFL;
	next_slot += 2;
	atomic_store(&current, slot);
}

/* What the kernel keeps of an action, so that a query reads back exactly
 * what it would without us: unknown flags dropped (SA_INTERRUPT, say),
 * SIGKILL and SIGSTOP out of the mask, and glibc's restorer added where
 * glibc adds one (x86). */
static void
normalize(struct sigaction *act)
{
	static const int kept = SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK |
				SA_RESTART | SA_NODEFER | SA_RESETHAND
#ifdef SA_EXPOSE_TAGBITS
				| SA_EXPOSE_TAGBITS
#else
				| 0x800
#endif
				;
	struct sigaction ours;

	act->sa_flags &= kept;
	sigdelset(&act->sa_mask, SIGKILL);
	sigdelset(&act->sa_mask, SIGSTOP);
#ifdef SA_RESTORER
	if (nsb_sys_sigaction(SIGBUS, NULL, &ours) == 0 && (ours.sa_flags & SA_RESTORER)) {
		act->sa_flags |= SA_RESTORER;
		act->sa_restorer = ours.sa_restorer;
	}
#else
	(void)ours;
#endif
}

bool
nsb_disp_installed(void)
{
	return atomic_load(&installed);
}

void
nsb_disp_install(void)
{
	struct sigaction prog;

	if (atomic_load(&installed))
		return;
	pthread_mutex_lock(&disp_lock);
	if (!atomic_load(&installed)) {
		nsb_sys_sigaction(SIGBUS, NULL, &prog);
		publish(&prog);
		kernel_install(&prog);
		atomic_store(&installed, true);
	}
	pthread_mutex_unlock(&disp_lock);
}

int
nsb_disp_set(const struct sigaction *act, struct sigaction *old)
{
	struct sigaction prev;
	int ret;

	pthread_mutex_lock(&disp_lock);
	if (!atomic_load(&installed)) {
		/* Nothing of ours in the kernel yet: it keeps the program's. */
		ret = nsb_sys_sigaction(SIGBUS, act, old);
		pthread_mutex_unlock(&disp_lock);
		return ret;
	}
	current_action(&prev);
	if (act) {
		struct sigaction copy = *act;

		normalize(&copy);
		publish(&copy);
		kernel_install(&copy);
	}
	pthread_mutex_unlock(&disp_lock);
	if (old)
		*old = prev;
	return 0;
}

/* ---- the mask ---------------------------------------------------------- */

/* [signal-safe] */
bool
nsb_disp_blocked(void)
{
	return blocked;
}

void
nsb_disp_set_blocked(bool b)
{
	if (b)
		nsb_disp_install();	/* needed to hold a sent SIGBUS */
	if (b != blocked)
		note_blocker(b);
	blocked = b;
}

bool
nsb_disp_held(void)
{
	return held_thread == HELD_READY || atomic_load(&held_process) == HELD_READY;
}

/* [signal-safe] Sends si to this thread again, siginfo and all. */
static void
resend(const siginfo_t *si)
{
	siginfo_t copy = *si;

	syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGBUS, &copy);
}

/*
 * Threads whose view blocks SIGBUS, by thread id, so that a SIGBUS sent to
 * the process can go to a thread that does not block it, as the kernel
 * would choose.  A full table (more than BLOCKERS such threads) only means
 * that a sent SIGBUS may be held where the kernel would have delivered it.
 */
#define BLOCKERS 256
static atomic_int blockers[BLOCKERS];

/* [signal-safe] */
static pid_t
gettid_raw(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void
note_blocker(bool is_blocking)
{
	int tid = gettid_raw(), want = is_blocking ? 0 : tid;

	for (int i = 0; i < BLOCKERS; i++) {
		int seen = want;

		if (atomic_compare_exchange_strong(&blockers[i], &seen, is_blocking ? tid : 0))
			return;
		if (is_blocking && seen == tid)
			return;
	}
}

/* [signal-safe] */
static bool
is_blocker(int tid)
{
	for (int i = 0; i < BLOCKERS; i++)
		if (atomic_load(&blockers[i]) == tid)
			return true;
	return false;
}

/* [signal-safe] Another thread of ours whose view does not block SIGBUS,
 * from /proc/self/task (open and getdents64 are async-signal-safe). */
static pid_t
unblocked_thread(void)
{
	char buf[2048];
	pid_t self = gettid_raw(), found = 0;
	long n;
	int fd;

	fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (!found && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && !found;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen;
				 unsigned char type; char name[]; } *d = (void *)(buf + off);
			pid_t tid = 0;

			for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
				tid = tid * 10 + (*c - '0');
			if (tid > 0 && tid != self && !is_blocker(tid))
				found = tid;
			off += d->reclen;
		}
	}
	close(fd);
	return found;
}

/* [signal-safe] */
static void
hold(const siginfo_t *si)
{
	int expected = HELD_NONE;
	siginfo_t copy;
	pid_t tid;

	/* The kernel lets a thread send a siginfo with si_code >= 0 (kill's
	 * SI_USER) only to itself, or to its process from the main thread:
	 * try the exact thread first, then the process (SIGBUS is blocked in
	 * this thread while we run, so the kernel picks another one). */
	if (si->si_code != SI_TKILL && (tid = unblocked_thread()) > 0) {
		copy = *si;
		if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGBUS, &copy) == 0)
			return;
		copy = *si;
		if (syscall(SYS_rt_sigqueueinfo, getpid(), SIGBUS, &copy) == 0)
			return;
	}
	if (si->si_code == SI_TKILL) {
		held_thread_info = *si;
		held_thread = HELD_READY;
		return;
	}
	/* Already one pending: the kernel would have merged them. */
	if (!atomic_compare_exchange_strong(&held_process, &expected, HELD_BUSY))
		return;
	held_process_info = *si;
	atomic_store(&held_process, HELD_READY);
}

/* Empties the held slots, passing each held siginfo to fn. */
static void
take_held(void (*fn)(const siginfo_t *si))
{
	int expected = HELD_READY;
	siginfo_t si;

	if (held_thread == HELD_READY) {
		si = held_thread_info;
		held_thread = HELD_NONE;
		fn(&si);
	}
	if (atomic_compare_exchange_strong(&held_process, &expected, HELD_BUSY)) {
		si = held_process_info;
		atomic_store(&held_process, HELD_NONE);
		fn(&si);
	}
}

/* Delivers what was held, now that the program unblocked SIGBUS. */
void
nsb_disp_deliver_held(void)
{
	if (!blocked)
		take_held(resend);
}

/* ---- chaining ---------------------------------------------------------- */

/* [signal-safe] Raised by the kernel for this thread's own access: the
 * kernel forces these even when blocked or ignored.  BUS_MCEERR_AO and
 * SI_KERNEL are sent like any other signal. */
static bool
is_fault(const siginfo_t *si)
{
	return si->si_code == BUS_ADRALN || si->si_code == BUS_ADRERR ||
	       si->si_code == BUS_OBJERR || si->si_code == BUS_MCEERR_AR;
}

/* [signal-safe] */
void
nsb_disp_chain(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct sigaction act;
	sigset_t mask;
	bool was;
	int slot;

	if (!is_fault(si) && blocked) {
		hold(si);
		return;
	}
	slot = atomic_load(&current);
	act = slots[slot];

	/* The kernel forces the default action on a fault that is blocked
	 * or ignored. */
	if (act.sa_handler == SIG_DFL ||
	    (is_fault(si) && (blocked || act.sa_handler == SIG_IGN))) {
		/* Dies of the same signal, core and all, as soon as we return:
		 * SIGBUS is blocked while we run, and sigreturn restores the
		 * faulting context first.  Re-faulting instead would not be
		 * certain: another thread may have remapped the page. */
		kernel_default();
		resend(si);
		return;
	}
	if (act.sa_handler == SIG_IGN)
		return;

	if ((act.sa_flags & SA_RESETHAND) && slot >= SLOT_FIRST)
		atomic_compare_exchange_strong(&current, &slot, slot + 1);
	/* The mask the kernel would have set, SIGBUS included unless
	 * SA_NODEFER; but SIGBUS is blocked only in the program's view, so
	 * that a fault in its handler can still be rescued. */
	mask = uc->uc_sigmask;
	sigorset(&mask, &mask, &act.sa_mask);
	was = blocked;
	if (!(act.sa_flags & SA_NODEFER) || sigismember(&mask, SIGBUS))
		blocked = true;
	sigdelset(&mask, SIGBUS);
	if (handler_depth++ == 0)
		blocked_outside = was;
	nsb_sys_sigmask(SIG_SETMASK, &mask, NULL);
	if (act.sa_flags & SA_SIGINFO)
		act.sa_sigaction(sig, si, ucv);
	else
		act.sa_handler(sig);
	/* Back from the handler (not jumped out of it: see nsb_disp_longjmp). */
	handler_depth--;
	blocked = was;
}

/*
 * The program leaves a signal handler with siglongjmp or longjmp.  glibc
 * restores a saved mask without going through our sigprocmask, so the
 * program's view of SIGBUS is brought back here: to what it was outside
 * the handler when the mask was saved, left blocked when it was not (as
 * the kernel would leave it).
 */
void
nsb_disp_longjmp(bool mask_saved)
{
	if (handler_depth == 0)
		return;
	handler_depth = 0;
	if (!mask_saved)
		return;
	blocked = blocked_outside;
	nsb_disp_deliver_held();
}

/* ---- exec -------------------------------------------------------------- */

/* What an exec'd program inherits is what this one set: an ignored SIGBUS
 * stays ignored and a blocked one stays blocked.  A handler is reset to the
 * default by exec anyway, so ours can stay. */
void
nsb_disp_before_exec(void)
{
	struct sigaction act, ign;
	sigset_t set;

	if (!atomic_load(&installed))
		return;
	current_action(&act);
	if (act.sa_handler == SIG_IGN) {
		ign = act;
		nsb_sys_sigaction(SIGBUS, &ign, NULL);
	}
	if (blocked) {
		sigemptyset(&set);
		sigaddset(&set, SIGBUS);
		nsb_sys_sigmask(SIG_BLOCK, &set, NULL);
		/* A held SIGBUS stays pending across exec, as it would have:
		 * hand it to the kernel, now that it is really blocked. */
		take_held(resend);
	}
}

/* The exec failed: back to normal. */
void
nsb_disp_after_exec(void)
{
	struct sigaction act;
	sigset_t set;

	if (!atomic_load(&installed))
		return;
	pthread_mutex_lock(&disp_lock);
	current_action(&act);
	kernel_install(&act);
	pthread_mutex_unlock(&disp_lock);
	sigemptyset(&set);
	sigaddset(&set, SIGBUS);
	nsb_sys_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* ---- start and fork ---------------------------------------------------- */

/* The child starts with no signal pending, and one thread. */
static void
after_fork_child(void)
{
	pthread_mutex_init(&disp_lock, NULL);
	held_thread = HELD_NONE;
	atomic_store(&held_process, HELD_NONE);
}

/* A process can start with SIGBUS blocked (inherited across exec): that is
 * the program's mask, not the kernel's. */
__attribute__((constructor(102))) static void
disp_init(void)
{
	sigset_t set;

	pthread_atfork(NULL, NULL, after_fork_child);
	if (nsb_sys_sigmask(SIG_BLOCK, NULL, &set) == 0 && sigismember(&set, SIGBUS)) {
		nsb_disp_set_blocked(true);
		sigemptyset(&set);
		sigaddset(&set, SIGBUS);
		nsb_sys_sigmask(SIG_UNBLOCK, &set, NULL);
	}
}
