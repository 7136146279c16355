/* SPDX-License-Identifier: MIT */
/*
 * uffd.c - the userfaultfd registrations the program makes itself.
 *
 * A fault inside the size of a file another process handed over is the
 * peer's error and is rescued by default (NOSIGBUS_ERRORS=peer, SPEC §5),
 * but not one the program arranged itself: a userfaultfd registration in
 * SIGBUS mode (UFFD_FEATURE_SIGBUS) raises SIGBUS/BUS_ADRERR inside the
 * size exactly as an I/O error does, and its handler must run.  Nothing
 * at fault time tells the two apart (the registration is in the VMA's
 * flags, which only /proc/self/smaps shows, at the cost of walking every
 * mapping's page tables), so the library watches the one call that makes
 * a registration: ioctl(UFFDIO_REGISTER), interposed at the cost of one
 * comparison per ioctl.  A registration made with a raw system call, or
 * by another library's own ioctl wrapper, is not seen (libnosigbus(7),
 * BUGS): there a fault inside a received file's size is rescued.
 *
 * The table is conservative: a range stays registered until the program
 * unregisters all of it (closing the userfaultfd or unmapping the range
 * ends a registration too, unseen: an error in that range then goes to
 * the program, as without the library); a full table, or an entry being
 * written, counts as "registered everywhere".  Lock-free: the program may
 * call ioctl from a signal handler.  Made on the first registration, from
 * the library's memory (nothing in .bss).
 *
 * Signal context: all of it.
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/ioctl.h>

#include "nsb.h"

#define REGS_MAX 32

struct reg {
	atomic_uintptr_t start;
	atomic_uintptr_t end;	/* 0: free; 1: being written */
};

static _Atomic(struct reg *) regs_p;
static atomic_bool overflow;	/* a registration not kept: all count */

/* [signal-safe] */
static struct reg *
regs(bool make)
{
	struct reg *t = atomic_load_explicit(&regs_p, memory_order_acquire), *none = NULL;

	if (t || !make)
		return t;
	t = nsb_memory_try(REGS_MAX * sizeof(*t));
	if (!t)
		return NULL;
	if (!atomic_compare_exchange_strong(&regs_p, &none, t))
		return none;
	return t;
}

/* [signal-safe] */
static void
note_register(uintptr_t start, uintptr_t end)
{
	struct reg *t = regs(true);

	if (!t) {
		atomic_store(&overflow, true);
		return;
	}
	for (int i = 0; i < REGS_MAX; i++) {
		uintptr_t free_end = 0;

		if (atomic_compare_exchange_strong(&t[i].end, &free_end, (uintptr_t)1)) {
			atomic_store(&t[i].start, start);
			atomic_store(&t[i].end, end);
			return;
		}
	}
	atomic_store(&overflow, true);
}

/* [signal-safe] Ranges wholly unregistered are forgotten; a part of one
 * stays registered as a whole (conservative). */
static void
note_unregister(uintptr_t start, uintptr_t end)
{
	struct reg *t = regs(false);

	for (int i = 0; t && i < REGS_MAX; i++) {
		uintptr_t e = atomic_load(&t[i].end);

		if (e > 1 && start <= atomic_load(&t[i].start) && e <= end)
			(void)atomic_compare_exchange_strong(&t[i].end, &e, (uintptr_t)0);
	}
}

/* [signal-safe] */
bool
nsb_uffd_registered(uintptr_t start, uintptr_t end)
{
	struct reg *t = regs(false);

	if (atomic_load(&overflow))
		return true;
	for (int i = 0; t && i < REGS_MAX; i++) {
		uintptr_t e = atomic_load(&t[i].end);

		if (e == 1 || (e > 1 && atomic_load(&t[i].start) < end && start < e))
			return true;
	}
	return false;
}

NSB_EXPORT int
ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;
	int ret;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	ret = real_ioctl(fd, request, arg);
	if (ret == 0 && arg && (request == UFFDIO_REGISTER || request == UFFDIO_UNREGISTER)) {
		int saved_errno = errno;

		if (request == UFFDIO_REGISTER) {
			const struct uffdio_register *r = arg;

			note_register((uintptr_t)r->range.start,
				      (uintptr_t)(r->range.start + r->range.len));
		} else {
			const struct uffdio_range *r = arg;

			note_unregister((uintptr_t)r->start, (uintptr_t)(r->start + r->len));
		}
		errno = saved_errno;
	}
	return ret;
}
