/* SPDX-License-Identifier: MIT */
/*
 * threads.c - code of the program that runs in threads it did not start
 * itself with its own mask: pthread_create (a new thread inherits its
 * creator's view of SIGBUS), and the SIGEV_THREAD notifications of
 * timer_create and mq_notify, which the C library runs in threads that
 * have every signal blocked - SIGBUS too, so that a fault there would kill
 * the process.  Their functions run through a thunk that makes SIGBUS
 * deliverable and keeps it blocked in the program's view, as it is
 * without the library (dispositions.c).  A thunk that finds SIGBUS
 * blocked installs the handler first, as blocking it does.
 *
 * And _Fork, whose child, started without the atfork handlers, gets the
 * library's reset of a fork child here.
 *
 * Signal context: none (the thunks run in ordinary threads; _Fork's
 * child reset is async-signal-safe, as fork's is).
 */
#include <errno.h>
#include <mqueue.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <threads.h>
#include <time.h>

#include "nsb.h"

/* ---- pthread_create ---------------------------------------------------- */

struct start {
	void *(*fn)(void *);
	void *arg;
	bool blocked;		/* the new thread's view of SIGBUS */
};

/* The thread ends: by returning, pthread_exit or cancellation. */
static void
end_thread(void *unused)
{
	(void)unused;
	nsb_disp_thread_exit();
}

static void *
start_thread(void *p)
{
	struct start s = *(struct start *)p;
	void *ret;

	free(p);
	nsb_disp_thread_start(s.blocked);
	/* Started with the attribute's mask, SIGBUS perhaps in it. */
	nsb_disp_thread_start_kernel();
	/* A cleanup handler, not a pthread key: a thread's first key value
	 * may allocate, and the blocker table it cleans is written in signal
	 * context (dispositions.c). */
	pthread_cleanup_push(end_thread, NULL);
	ret = s.fn(s.arg);
	pthread_cleanup_pop(1);
	return ret;
}

/* Does attr give the thread a mask of its own (pthread_attr_setsigmask_np)?
 * Then *blocked is its SIGBUS bit. */
static bool
attr_mask(const pthread_attr_t *attr, bool *blocked)
{
#ifdef PTHREAD_ATTR_NO_SIGMASK_NP
	sigset_t m;

	if (attr && pthread_attr_getsigmask_np(attr, &m) == 0) {
		*blocked = sigismember(&m, SIGBUS) == 1;
		return true;
	}
#endif
	(void)attr;
	(void)blocked;
	return false;
}

/* glibc's mark for a C11 thread (thrd_create): an attribute pointer that
 * is no attribute, telling pthread_create to run an int function. */
#define C11_THREAD ((const pthread_attr_t *)(uintptr_t)-1)

static int
create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	bool blocked = nsb_disp_thread_blocked_at_start();
	struct start *s;
	int ret;

	/* From now on, no lookup may wait for the loader's lock. */
	nsb_real_find_all();
	/* A mask that blocks SIGBUS installs the handler, as blocking it
	 * does: glibc sets it in the new thread, past us, and a handler
	 * installed later would leave that thread to die of its next fault
	 * (attr_sigmask_before_install). */
	if (attr != C11_THREAD && attr_mask(attr, &blocked) && blocked && !nsb_disp_installed())
		(void)nsb_disp_install();
	/* Every thread, so that it leaves the blocker table when it ends. */
	s = malloc(sizeof(*s));
	if (!s)
		return EAGAIN;	/* what pthread_create says when out of memory */
	s->fn = fn;
	s->arg = arg;
	s->blocked = blocked;
	ret = real_pthread_create(thread, attr, start_thread, s);
	if (ret)
		free(s);
	return ret;
}

NSB_EXPORT int
pthread_create(pthread_t *thread, const pthread_attr_t *attr,
	       void *(*fn)(void *), void *arg)
{
	return create(thread, attr, fn, arg);
}

/*
 * C11's thrd_create is glibc's pthread_create called internally, past
 * ours: its threads started with the kernel's mask, not the program's
 * view (issue 38, c11_thread_mask).  The same call, with glibc's C11 mark
 * (start_thread then runs as the int function glibc takes it for, and
 * passes its int through), and glibc's mapping of the error.
 */
NSB_EXPORT int
thrd_create(thrd_t *thr, thrd_start_t fn, void *arg)
{
	int err = create((pthread_t *)thr, C11_THREAD, (void *(*)(void *))(void (*)(void))fn, arg);

	switch (err) {
	case 0:
		return thrd_success;
	case ENOMEM:
		return thrd_nomem;
	case ETIMEDOUT:
		return thrd_timedout;
	case EBUSY:
		return thrd_busy;
	default:
		return thrd_error;
	}
}

/* ---- SIGEV_THREAD ------------------------------------------------------ */

struct notify {
	void (*fn)(union sigval);
	union sigval value;
	bool once;		/* mq_notify: fires once, then frees itself */
};

static void
thunk(union sigval v)
{
	struct notify *n = v.sival_ptr;
	struct notify copy = *n;
	sigset_t cur;

	if (copy.once)
		free(n);
	/* Started with SIGBUS blocked (glibc 2.36's timer threads block
	 * every signal but its own): that is the program blocking SIGBUS,
	 * which installs the handler, as pthread_attr_setsigmask_np does.
	 * Installed later by another thread, the handler would leave this
	 * one to die of its next fault (sigev_thread_before_install). */
	if (!nsb_disp_installed() && nsb_sys_sigmask(SIG_BLOCK, NULL, &cur) == 0 &&
	    sigismember(&cur, SIGBUS) == 1) {
		int saved_errno = errno;

		(void)nsb_disp_install();
		errno = saved_errno;
	}
	nsb_disp_thread_start_kernel();
	copy.fn(copy.value);
}

/* The notification of sev, through the thunk; NULL if sev needs none. */
static struct notify *
wrap(const struct sigevent *sev, struct sigevent *copy, bool once)
{
	struct notify *n;

	if (!sev || sev->sigev_notify != SIGEV_THREAD || !sev->sigev_notify_function)
		return NULL;
	n = malloc(sizeof(*n));
	if (!n)
		return NULL;	/* unwrapped: as without the library */
	n->fn = sev->sigev_notify_function;
	n->value = sev->sigev_value;
	n->once = once;
	*copy = *sev;
	copy->sigev_notify_function = thunk;
	copy->sigev_value.sival_ptr = n;
	return n;
}

/*
 * A deleted timer's notification may still be on its way to a thread:
 * its box is freed only after RETIRED later deletions, so memory stays
 * bounded without freeing one that is about to be read.
 *
 * The list and the ring are the timers lock's.  Its holders make no call
 * at all, malloc and free included: a fork takes the lock after every
 * fork handler of the program's has run (process.c), and an allocator's
 * own handler may then hold the allocator's lock.  A fork child keeps the
 * parent's boxes (its timers are not inherited): a timer the child makes
 * is listed before any of them, so its id finds its own box.
 */
#define RETIRED 256
struct timer_box {
	timer_t id;
	struct notify *n;
	struct timer_box *next;
};
static struct timer_box *timers;
static struct notify **_Atomic retired;	/* RETIRED of them, made at first need */
static unsigned retired_next;
struct nsb_lock nsb_timers_lock = NSB_LOCK_INITIALIZER;

/* The ring, made outside the lock; NULL if there is no memory for it. */
static struct notify **
retired_ring(void)
{
	struct notify **r = atomic_load(&retired), **none = NULL;

	if (r)
		return r;
	r = calloc(RETIRED, sizeof(*r));
	if (r && !atomic_compare_exchange_strong(&retired, &none, r)) {
		free(r);	/* another thread's is there */
		r = none;
	}
	return r;
}

NSB_EXPORT int
timer_create(clockid_t clock, struct sigevent *sev, timer_t *id)
{
	struct timer_box *box;
	struct sigevent copy;
	struct notify *n;
	int ret;

	n = wrap(sev, &copy, false);
	if (!n)
		return real_timer_create(clock, sev, id);
	box = malloc(sizeof(*box));
	if (!box) {
		free(n);
		return real_timer_create(clock, sev, id);
	}
	ret = real_timer_create(clock, &copy, id);
	if (ret < 0) {
		int err = errno;

		free(n);
		free(box);
		errno = err;
		return ret;
	}
	box->id = *id;
	box->n = n;
	nsb_lock(&nsb_timers_lock);
	box->next = timers;
	timers = box;
	nsb_unlock(&nsb_timers_lock);
	return ret;
}

NSB_EXPORT int
timer_delete(timer_t id)
{
	struct timer_box **p, *box = NULL;
	struct notify *old = NULL, **ring;
	int ret;

	ret = real_timer_delete(id);
	if (ret < 0)
		return ret;
	ring = retired_ring();
	nsb_lock(&nsb_timers_lock);
	for (p = &timers; *p; p = &(*p)->next) {
		if ((*p)->id == id) {
			box = *p;
			*p = box->next;
			if (ring) {
				old = ring[retired_next];
				ring[retired_next] = box->n;
				retired_next = (retired_next + 1) % RETIRED;
			}	/* else kept: a notification may be on its way */
			break;
		}
	}
	nsb_unlock(&nsb_timers_lock);
	free(box);
	free(old);
	return ret;
}

NSB_EXPORT int
mq_notify(mqd_t mqd, const struct sigevent *sev)
{
	struct sigevent copy;
	struct notify *n;
	int ret;

	n = wrap(sev, &copy, true);
	if (!n)
		return real_mq_notify(mqd, sev);
	ret = real_mq_notify(mqd, &copy);
	if (ret < 0) {
		int err = errno;

		free(n);
		errno = err;
	}
	return ret;
}

/* ---- _Fork ------------------------------------------------------------- */

/*
 * glibc 2.34's _Fork is fork without the atfork handlers, ours among
 * them: its child kept the parent's pid as the library's owner and was
 * taken for a vfork child (its faults not rescued, its sigaction the
 * kernel's only; issue 38, fork_underscore).  Its child gets the reset
 * of fork's child here; no lock of the library's was taken for it, and
 * the child has the mask of the thread that called.  (In a process of
 * several threads, POSIX allows the child only async-signal-safe calls.)
 */
static pid_t
our_Fork(void)
{
	pid_t pid;

	nsb_process_Fork_window(true);
	pid = ((pid_t (*)(void))nsb_real(NSB_REAL__FORK))();
	if (pid == 0)
		nsb_process_after_Fork_child();
	else
		nsb_process_Fork_window(false);
	return pid;
}

NSB_EXPORT_SINCE(2, 34, _Fork, our_Fork);
