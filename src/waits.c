/* SPDX-License-Identifier: MIT */
/*
 * waits.c - the interposed calls that wait: sigsuspend, pause, the sleeps
 * and the polls.
 *
 * Two things the kernel would do that need help once the library's
 * SIGBUS handler is installed (dispositions.c):
 *  - a SIGBUS the program ignores or blocks interrupts nothing: but the
 *    kernel runs our handler for it, and a wait that a handler interrupts
 *    ends with EINTR whatever SA_RESTART says (sleeps and polls).  Such an
 *    EINTR is retried with the time left, unless a handler of the program
 *    ran too;
 *  - a wait with a mask of its own (sigsuspend, ppoll, pselect,
 *    epoll_pwait) must not really block SIGBUS: a fault in a handler run
 *    during it would kill the process.  Its SIGBUS bit goes to the view;
 *  - a wait that consumes a signal (sigwait, sigwaitinfo, sigtimedwait)
 *    takes a SIGBUS the library held while the program blocked it: the
 *    kernel never had it pending.
 * Before the handler is installed each is the C library's own call.
 *
 * glibc's other entry points to the same waits call its own functions
 * through internal names, past ours, so they are interposed too: what a
 * program built with _FORTIFY_SOURCE calls for poll and ppoll
 * (__poll_chk, __ppoll_chk: Debian's default flags), and the public
 * aliases a binary may be linked to (__poll, which libnsl calls;
 * __sigsuspend, __nanosleep, __select).  So are the C library's waits
 * that are built on its own sigsuspend and clock_nanosleep: the
 * sigpause family and C11's thrd_sleep.
 *
 * Not used in signal context.
 */
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nsb.h"

/* Exported by glibc, not declared by its headers (the two _chk ones only
 * under _FORTIFY_SOURCE, which declares them alike). */
int __poll(struct pollfd *fds, nfds_t n, int timeout);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask,
		size_t fdslen);
int __sigsuspend(const sigset_t *mask);
int __nanosleep(const struct timespec *req, struct timespec *rem);
int __select(int nfds, fd_set *r, fd_set *wr, fd_set *e, struct timeval *tv);
/* The sigpause family.  <signal.h> under GNU C gives the name sigpause to
 * __xpg_sigpause, so the C library's own sigpause (the BSD one) is
 * defined under a label. */
int bsd_sigpause(int mask) __asm__("sigpause");
int __sigpause(int sig_or_mask, int is_sig);
int __xpg_sigpause(int sig);
/* C11 (<threads.h>, which is not needed for this). */
int thrd_sleep(const struct timespec *req, struct timespec *rem);
/* glibc's end of a failed _FORTIFY_SOURCE check: its message, then abort. */
void __chk_fail(void) __attribute__((noreturn));

static struct timespec
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t;
}

/* Milliseconds of timeout_ms left since start; negative stays forever. */
static int
ms_left(int timeout_ms, struct timespec start)
{
	struct timespec t = now();
	long long used;

	if (timeout_ms < 0)
		return timeout_ms;
	used = (t.tv_sec - start.tv_sec) * 1000LL + (t.tv_nsec - start.tv_nsec) / 1000000;
	return used >= timeout_ms ? 0 : (int)(timeout_ms - used);
}

/* ms milliseconds (not negative) as a timespec. */
static struct timespec
ms_ts(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };

	return t;
}

/* The time of *total left since start (zero when it is over). */
static struct timespec
ts_left(const struct timespec *total, struct timespec start)
{
	struct timespec t = now(), left;

	left.tv_sec = total->tv_sec - (t.tv_sec - start.tv_sec);
	left.tv_nsec = total->tv_nsec - (t.tv_nsec - start.tv_nsec);
	while (left.tv_nsec < 0) {
		left.tv_nsec += 1000000000;
		left.tv_sec--;
	}
	while (left.tv_nsec >= 1000000000) {
		left.tv_nsec -= 1000000000;
		left.tv_sec++;
	}
	if (left.tv_sec < 0)
		left.tv_sec = left.tv_nsec = 0;
	return left;
}

/* Runs `call` (an expression that sets ret, -1 and errno on failure) until
 * it ends for a reason of its own; `update` prepares a retry, made with
 * `recall` instead once the wait is parked (w_.park, the mask the retry
 * must unblock: dispositions.c).  kind: NSB_WAIT_*.  A call that succeeds
 * after a retry leaves errno as it found it, not at the EINTR that was
 * retried. */
#define WAIT(mask, kind, ret, call, recall, update)			\
	do {								\
		struct nsb_wait w_;					\
		int err_, saved_errno_ = errno;				\
									\
		err_ = nsb_disp_wait_begin(&w_, (mask), (kind));	\
		if (err_) {						\
			errno = err_;					\
			(ret) = -1;					\
			break;						\
		}							\
		for (;;) {						\
			if (w_.park)					\
				recall;					\
			else						\
				call;					\
			if ((ret) >= 0 || errno != EINTR || !nsb_disp_wait_again(&w_)) \
				break;					\
			update;						\
		}							\
		err_ = (ret) >= 0 ? saved_errno_ : errno;		\
		nsb_disp_wait_end(&w_);					\
		errno = err_;						\
	} while (0)

static int
do_sigsuspend(const sigset_t *mask)
{
	int ret;

	WAIT(mask, NSB_WAIT_PARK, ret, ret = real_sigsuspend(w_.kmask),
	     ret = real_sigsuspend(w_.kmask), (void)0);
	return ret;
}

NSB_EXPORT int
sigsuspend(const sigset_t *mask)
{
	return do_sigsuspend(mask);
}

NSB_EXPORT int
__sigsuspend(const sigset_t *mask)
{
	return do_sigsuspend(mask);
}

/*
 * glibc's __sigpause (signal/sigpause.c): is_sig, the X/Open one (what
 * sigpause() is under GNU C), waits with the mask less sig; else the BSD
 * one takes the bits of the first 32 signals.  glibc reads the kernel's
 * mask; the program's is the view, SIGBUS's bit included.
 */
static int
do_sigpause(int sig_or_mask, int is_sig)
{
	sigset_t set;
	int err;

	if (is_sig) {
		err = nsb_disp_mask(SIG_BLOCK, NULL, &set);
		if (err) {
			errno = err;
			return -1;
		}
		if (sigdelset(&set, sig_or_mask) < 0)
			return -1;
	} else {
		nsb_bsd_mask_set(&set, sig_or_mask);
	}
	return do_sigsuspend(&set);
}

NSB_EXPORT int
bsd_sigpause(int mask)
{
	return do_sigpause(mask, 0);
}

NSB_EXPORT int
__sigpause(int sig_or_mask, int is_sig)
{
	return do_sigpause(sig_or_mask, is_sig);
}

NSB_EXPORT int
__xpg_sigpause(int sig)
{
	return do_sigpause(sig, 1);
}

NSB_EXPORT int
pause(void)
{
	int ret;

	WAIT(NULL, NSB_WAIT_PARK_FREE, ret, ret = real_pause(), ret = real_sigsuspend(w_.park),
	     (void)0);
	return ret;
}

/* rem's contents, to put back if a retry succeeds: the kernel writes
 * rem only when it returns EINTR.  False if rem cannot be read. */
static bool
save_ts(const struct timespec *ts, struct timespec *out)
{
	return nsb_read_word(ts, &out->tv_sec) && nsb_read_word(&ts->tv_nsec, &out->tv_nsec);
}

/* A parked sleep's retry (the time left in *q, on the monotonic clock):
 * ppoll with no descriptors, the mask unblocked for as long as it sleeps.
 * 0, or an error number (EINTR: the time left in *rem, as the sleep's);
 * errno left alone (clock_nanosleep's is: park-usr1-clock-nanosleep). */
static int
park_sleep(const struct timespec *q, struct timespec *rem, const sigset_t *mask)
{
	struct timespec start = now();
	int saved = errno, err = 0;

	if (real_ppoll(NULL, 0, q, mask) != 0) {
		err = errno;
		if (err == EINTR)
			*rem = ts_left(q, start);
	}
	errno = saved;
	return err;
}

static int
do_nanosleep(const struct timespec *req, struct timespec *rem)
{
	struct timespec left, own, before;
	struct timespec *r = rem ? rem : &own;
	const struct timespec *q = req;
	bool retried = false;
	int ret;

	if (rem && !save_ts(rem, &before))
		return real_nanosleep(req, rem);	/* EFAULT if it writes rem */
	/* The kernel reads req and writes rem first: its EFAULT, not ours. */
	WAIT(NULL, NSB_WAIT_PARK_FREE, ret, ret = real_nanosleep(q, r),
	     (ret = park_sleep(q, r, w_.park), errno = ret ? ret : errno, ret = ret ? -1 : 0),
	     (left = *r, q = &left, retried = true));
	if (ret == 0 && retried && rem)
		*rem = before;
	return ret;
}

NSB_EXPORT int
nanosleep(const struct timespec *req, struct timespec *rem)
{
	return do_nanosleep(req, rem);
}

NSB_EXPORT int
__nanosleep(const struct timespec *req, struct timespec *rem)
{
	return do_nanosleep(req, rem);
}

static int
do_clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem)
{
	struct timespec left, own, before;
	struct timespec *r = rem ? rem : &own;
	const struct timespec *q = req;
	bool retried = false;
	struct nsb_wait w;
	int ret;

	if (rem && !save_ts(rem, &before))
		return real_clock_nanosleep(clock, flags, req, rem);
	/* It returns an error number and leaves errno alone. */
	/* Relative sleeps on these two clocks have a masked variant (ppoll
	 * sleeps on the monotonic clock, which is what a relative sleep on
	 * the real-time clock measures too). */
	if (nsb_disp_wait_begin(&w, NULL,
				!(flags & TIMER_ABSTIME) &&
						(clock == CLOCK_MONOTONIC || clock == CLOCK_REALTIME)
					? NSB_WAIT_PARK_FREE
					: NSB_WAIT_PLAIN) != 0)
		return EINTR;
	for (;;) {
		ret = w.park ? park_sleep(q, r, w.park) : real_clock_nanosleep(clock, flags, q, r);
		if (ret != EINTR || !nsb_disp_wait_again(&w))
			break;
		retried = true;
		if (!(flags & TIMER_ABSTIME)) {
			left = *r;
			q = &left;
		}
	}
	nsb_disp_wait_end(&w);
	if (ret == 0 && retried && rem)
		*rem = before;
	return ret;
}

NSB_EXPORT int
clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem)
{
	return do_clock_nanosleep(clock, flags, req, rem);
}

/* glibc's (its clock_nanosleep on CLOCK_REALTIME), C11's results. */
NSB_EXPORT int
thrd_sleep(const struct timespec *req, struct timespec *rem)
{
	switch (do_clock_nanosleep(CLOCK_REALTIME, 0, req, rem)) {
	case 0:
		return 0;
	case EINTR:
		return -1;
	default:
		return -2;
	}
}

/* glibc's, through our nanosleep: whole seconds left if interrupted. */
NSB_EXPORT unsigned
sleep(unsigned seconds)
{
	struct timespec ts = { (time_t)seconds, 0 };
	int saved_errno = errno;

	if (nanosleep(&ts, &ts) < 0)
		return (unsigned)ts.tv_sec;
	errno = saved_errno;
	return 0;
}

NSB_EXPORT int
usleep(useconds_t usec)
{
	struct timespec ts = { (time_t)(usec / 1000000), (long)(usec % 1000000) * 1000 };

	return nanosleep(&ts, NULL);
}

static int
do_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec start = now(), ts;
	int ret, t = timeout;

	WAIT(NULL, NSB_WAIT_PARK_FREE, ret, ret = real_poll(fds, n, t),
	     ret = real_ppoll(fds, n, t < 0 ? NULL : (ts = ms_ts(t), &ts), w_.park),
	     t = ms_left(timeout, start));
	return ret;
}

NSB_EXPORT int
poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return do_poll(fds, n, timeout);
}

NSB_EXPORT int
__poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return do_poll(fds, n, timeout);
}

/* fdslen: the size of the buffer at fds, as the compiler knew it.  The
 * check is glibc's (debug/poll_chk.c), and so is the end when it fails. */
NSB_EXPORT int
__poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return do_poll(fds, n, timeout);
}

static int
do_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	struct timespec start = now(), left;
	const struct timespec *t = tmo;
	int ret;

	WAIT(mask, NSB_WAIT_PARK, ret, ret = real_ppoll(fds, n, t, w_.kmask),
	     ret = real_ppoll(fds, n, t, w_.kmask), (t = tmo ? (left = ts_left(tmo, start), &left) : NULL));
	return ret;
}

NSB_EXPORT int
ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	return do_ppoll(fds, n, tmo, mask);
}

NSB_EXPORT int
__ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask,
	    size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return do_ppoll(fds, n, tmo, mask);
}

/* A parked select's retry: pselect, and tv counted down as Linux's select
 * does. */
static int
park_select(int nfds, fd_set *r, fd_set *wr, fd_set *e, struct timeval *tv, const sigset_t *mask)
{
	struct timespec total, start = now(), left;
	int ret, saved;

	if (!tv)
		return real_pselect(nfds, r, wr, e, NULL, mask);
	total.tv_sec = tv->tv_sec;
	total.tv_nsec = tv->tv_usec * 1000L;
	ret = real_pselect(nfds, r, wr, e, &total, mask);
	saved = errno;
	left = ts_left(&total, start);
	tv->tv_sec = left.tv_sec;
	tv->tv_usec = left.tv_nsec / 1000;
	errno = saved;
	return ret;
}

static int
do_select(int nfds, fd_set *r, fd_set *wr, fd_set *e, struct timeval *tv)
{
	int ret;

	/* Linux leaves the sets alone on EINTR and counts tv down. */
	WAIT(NULL, NSB_WAIT_PARK_FREE, ret, ret = real_select(nfds, r, wr, e, tv),
	     ret = park_select(nfds, r, wr, e, tv, w_.park), (void)0);
	return ret;
}

NSB_EXPORT int
select(int nfds, fd_set *r, fd_set *wr, fd_set *e, struct timeval *tv)
{
	return do_select(nfds, r, wr, e, tv);
}

NSB_EXPORT int
__select(int nfds, fd_set *r, fd_set *wr, fd_set *e, struct timeval *tv)
{
	return do_select(nfds, r, wr, e, tv);
}

NSB_EXPORT int
pselect(int nfds, fd_set *r, fd_set *wr, fd_set *e, const struct timespec *tmo,
	const sigset_t *mask)
{
	struct timespec start = now(), left;
	const struct timespec *t = tmo;
	int ret;

	WAIT(mask, NSB_WAIT_PARK, ret, ret = real_pselect(nfds, r, wr, e, t, w_.kmask),
	     ret = real_pselect(nfds, r, wr, e, t, w_.kmask), (t = tmo ? (left = ts_left(tmo, start), &left) : NULL));
	return ret;
}

NSB_EXPORT int
epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
	struct timespec start = now();
	int ret, t = timeout;

	WAIT(NULL, NSB_WAIT_PARK_FREE, ret, ret = real_epoll_wait(ep, ev, max, t),
	     ret = real_epoll_pwait(ep, ev, max, t, w_.park), t = ms_left(timeout, start));
	return ret;
}

NSB_EXPORT int
epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	struct timespec start = now();
	int ret, t = timeout;

	WAIT(mask, NSB_WAIT_PARK, ret, ret = real_epoll_pwait(ep, ev, max, t, w_.kmask),
	     ret = real_epoll_pwait(ep, ev, max, t, w_.kmask), t = ms_left(timeout, start));
	return ret;
}

/* In glibc 2.35 and later. */
static int
sys_epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *tmo,
		 const sigset_t *mask)
{
	int (*f)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *) =
		real_epoll_pwait2;

	if (f)
		return f(ep, ev, max, tmo, mask);
	return (int)syscall(SYS_epoll_pwait2, ep, ev, max, tmo, mask, _NSIG / 8);
}

static int
our_epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *tmo,
		 const sigset_t *mask)
{
	struct timespec start = now(), left;
	const struct timespec *t = tmo;
	int ret;

	WAIT(mask, NSB_WAIT_PARK, ret, ret = sys_epoll_pwait2(ep, ev, max, t, w_.kmask),
	     ret = sys_epoll_pwait2(ep, ev, max, t, w_.kmask), (t = tmo ? (left = ts_left(tmo, start), &left) : NULL));
	return ret;
}

/* glibc 2.35 and later (SPEC §12 "Names"). */
NSB_EXPORT_SINCE(2, 35, epoll_pwait2, our_epoll_pwait2);

/* ---- sigwait, sigwaitinfo, sigtimedwait -------------------------------- */

/*
 * A SIGBUS the program blocked and was sent is held by the library, not
 * pending in the kernel: these waits take it from there (dispositions.c,
 * nsb_disp_sigwait_begin).  Without SIGBUS in the set, or before the
 * handler is installed, the C library's call alone.
 */
static int
took_held(const siginfo_t *got, siginfo_t *info)
{
	if (info) {
		/* The kernel takes the signal, then fails to write its
		 * siginfo: EFAULT, the signal gone (as here). */
		if (!nsb_write_probe(info, sizeof(*info))) {
			errno = EFAULT;
			return -1;
		}
		*info = *got;
		/* As the C library folds the kernel's answer (2.36 and now). */
		if (info->si_code == SI_TKILL)
			info->si_code = SI_USER;
	}
	return SIGBUS;
}

/* tmo NULL: no timeout (glibc's sigwaitinfo is its sigtimedwait so). */
static int
our_sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *tmo)
{
	struct nsb_sigwait w;
	siginfo_t got;
	int ret, saved_errno = errno;

	if (nsb_disp_sigwait_begin(&w, set, &got)) {
		nsb_disp_sigwait_end(&w);
		return took_held(&got, info);
	}
	ret = real_sigtimedwait(set, info, tmo);
	/* Held by our handler here just before the wait began. */
	if (ret < 0 && (errno == EAGAIN || errno == EINTR) && nsb_disp_sigwait_take(&w, &got)) {
		errno = saved_errno;
		ret = took_held(&got, info);
	}
	nsb_disp_sigwait_end(&w);
	return ret;
}

NSB_EXPORT int
sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *tmo)
{
	return our_sigtimedwait(set, info, tmo);
}

NSB_EXPORT int
sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	return our_sigtimedwait(set, info, NULL);
}

/* glibc's: sigwaitinfo until it is not interrupted. */
NSB_EXPORT int
sigwait(const sigset_t *set, int *sig)
{
	int ret;

	if (!nsb_disp_installed())
		return real_sigwait(set, sig);
	do
		ret = our_sigtimedwait(set, NULL, NULL);
	while (ret < 0 && errno == EINTR);
	if (ret < 0)
		return errno;
	*sig = ret;
	return 0;
}
