/* SPDX-License-Identifier: MIT */
/*
 * process.c - the library's locks, and the one place that says what fork
 * does to the library's per-process state (SPEC §7).
 *
 * No handler of the program's ever runs in a thread that holds a lock, so
 * a handler that calls mmap or sigaction never finds the lock held by its
 * own thread, and a program that stops threads from a handler (a garbage
 * collector) can never stop one holding it.  Holders only make system
 * calls and touch the library's memory.  nsb_lock() keeps handlers out by
 * blocking every signal for as long as the lock is held: two
 * rt_sigprocmask calls, as much as a one-page mprotect costs.  In a
 * process that has no handler of its own there is nothing to keep out:
 * every other signal is ignored, stops or kills the whole process (which
 * stops every thread, not one holder), or is the C library's (SIGCANCEL,
 * SIGSETXID: never blocked by the library either), or SIGBUS, whose
 * handler, the library's, takes no lock.  nsb_lock_quiet(), the table
 * lock's, then skips the mask.  "No handler" is known once the library's
 * own is installed (dispositions.c asks the kernel for every signal's
 * action then, and sees every later sigaction, signal, sigset...); the
 * first handler the program installs ends it for good
 * (nsb_process_handler_coming), after the threads that hold a lock
 * without the mask have let go: the program cannot stop them, having no
 * handler yet.  A handler installed with a raw system call is not seen
 * (libnosigbus(7), "Limitations").
 *
 * fork: the parent takes every lock last, after the program's own fork
 * handlers have run (nsb_process_start), so the child never inherits
 * one held by a thread it does not have, and the child resets, in one
 * sequence below, everything that belonged to threads it does not have:
 * rescues in flight and their claims, readers of the table, held
 * signals, the threads' views, the counters.  vfork and the C library's
 * posix_spawn share our memory and run no handlers: what they must not
 * touch is guarded with nsb_in_vfork_child().
 *
 * Signal context: nsb_gettid.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

static pid_t owner_pid;	/* the process this memory belongs to */

/* The mask this thread had before it took its first lock. */
static __thread sigset_t *outer_mask __attribute__((tls_model("initial-exec")));

/* Set for good when the program may have a handler; threads that hold (or
 * wait for) a lock without having blocked signals. */
static atomic_bool handlers_possible;
static atomic_long unmasked;

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
		pthread_mutex_lock(&l->mutex);
		l->masked = true;
		l->inner = true;
		return;
	}
	sigfillset(&all);
	nsb_sys_sigmask(SIG_BLOCK, &all, &old);
	pthread_mutex_lock(&l->mutex);
	l->saved = old;
	l->masked = true;
	l->inner = false;
	outer_mask = &l->saved;
}

void
nsb_lock_quiet(struct nsb_lock *l)
{
	/* Before the library's handler is installed, the program's are not
	 * known yet.  Counted first, then checked: either the thread that
	 * installs a handler sees us counted and waits, or we see its flag
	 * (both sequentially consistent). */
	if (!atomic_load(&handlers_possible) && nsb_disp_installed()) {
		atomic_fetch_add(&unmasked, 1);
		if (!atomic_load(&handlers_possible)) {
			pthread_mutex_lock(&l->mutex);
			l->masked = false;
			return;
		}
		atomic_fetch_sub(&unmasked, 1);
	}
	nsb_lock(l);
}

void
nsb_unlock(struct nsb_lock *l)
{
	sigset_t old;

	if (!l->masked) {
		pthread_mutex_unlock(&l->mutex);
		atomic_fetch_sub(&unmasked, 1);
		return;
	}
	if (l->inner) {
		pthread_mutex_unlock(&l->mutex);
		return;
	}
	bool outermost = outer_mask == &l->saved;

	old = l->saved;
	if (outermost)
		outer_mask = NULL;
	pthread_mutex_unlock(&l->mutex);
	nsb_sys_sigmask(SIG_SETMASK, &old, NULL);
	/* A SIGBUS held for the process while this thread had every signal
	 * blocked here: the kernel would deliver it now (dispositions.c). */
	if (outermost)
		nsb_disp_lock_left();
}

void
nsb_process_handler_coming(void)
{
	if (atomic_load(&handlers_possible))
		return;
	atomic_store(&handlers_possible, true);
	/* Holders without the mask finish what they do: a few system calls,
	 * which no handler can interrupt (there is none yet). */
	while (atomic_load(&unmasked) != 0)
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
	return (pid_t)syscall(SYS_gettid);
}

bool
nsb_in_vfork_child(void)
{
	return owner_pid && getpid() != owner_pid;
}

/*
 * The locks are taken in this order everywhere: table, then dispositions.
 * The timers lock's holders take no other and make no call (threads.c),
 * so it could come anywhere: first, so that its saved mask is the forking
 * thread's own, the one the child gets back.
 */
static void
before_fork(void)
{
	nsb_lock(&nsb_timers_lock);
	nsb_lock(&nsb_table_lock);
	nsb_lock(&nsb_disp_lock);
}

static void
after_fork_parent(void)
{
	nsb_unlock(&nsb_disp_lock);
	nsb_unlock(&nsb_table_lock);
	nsb_unlock(&nsb_timers_lock);
}

/* The child's reset; the locks' saved mask is the caller's business. */
static void
reset_child(void)
{
	owner_pid = getpid();
	/* The locks are new, and this thread holds none of them. */
	outer_mask = NULL;
	/* Threads that waited for the lock without the mask are not here. */
	atomic_store(&unmasked, 0);
	pthread_mutex_init(&nsb_timers_lock.mutex, NULL);
	pthread_mutex_init(&nsb_table_lock.mutex, NULL);
	pthread_mutex_init(&nsb_disp_lock.mutex, NULL);
	nsb_files_after_fork_child();
	nsb_ranges_after_fork_child();
	nsb_rescue_after_fork_child();
	nsb_disp_after_fork_child();
	nsb_log_after_fork_child();
}

static void
after_fork_child(void)
{
	sigset_t mask = nsb_timers_lock.saved;

	reset_child();
	nsb_sys_sigmask(SIG_SETMASK, &mask, NULL);
}

/* The child of _Fork, which runs no atfork handler (threads.c). */
void
nsb_process_after_Fork_child(void)
{
	reset_child();
}

/*
 * From the constructor, before any code of the program's can register
 * its own: the C library runs prepare handlers in the reverse order of
 * registration and the others in order, so ours take the library's locks
 * after every handler of the program's has run, and give them back (or
 * reset them, in the child) before any runs: a program's handler may map,
 * unmap, mprotect and change signals like any code.  The C library keeps
 * its first handlers in static storage; the one system call is getpid.
 * (Loaded later with dlopen, the library's handlers come after those
 * registered before: such a program's handlers must not call the
 * interposed functions.)
 */
void
nsb_process_start(void)
{
	/* Learnt here, not when it first matters: the first process to
	 * need it might be a child that shares our memory without being a
	 * thread (clone(CLONE_VM) without CLONE_THREAD, as LTP's clone tests
	 * make), and the owner would then be taken for a vfork child for
	 * good: its handler never installed, its mask changes never seen. */
	owner_pid = getpid();
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
