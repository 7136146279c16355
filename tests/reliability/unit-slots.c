/* SPDX-License-Identifier: MIT */
/*
 * unit-slots - the library's signal-safe slots (src/slots.c) with more
 * threads holding them at once than there are slots: the fallback when
 * every slot is taken, which no other test reaches.
 *
 *  inflight  24 threads inside nsb_process_map_begin() at once (a policy
 *            mapping in flight): exactly 16 (NSB_SLOTS) are counted in a
 *            slot, the others are told to map under the lock; once all
 *            have ended, no slot is held.
 *  unmasked  24 threads each holding a lock of its own with
 *            nsb_lock_quiet() at once, no handler of the program's yet:
 *            exactly 16 hold it without the mask (their kernel mask as
 *            it was), the others with every signal blocked (the kernel's
 *            mask, read with the raw call); every mask as before once
 *            they let go; no slot held.
 *  stress    40 threads, each 3000 rounds of both, at random.
 *  install   24 holders as in unmasked; a handler installed meanwhile
 *            (sigaction) must return only after the 16 holders without
 *            the mask have let go (the first such handler waits for
 *            them, process.c), and every lock after it blocks signals.
 * Every thread's count of holds (nsb_holds) is 0 at its end, and the test
 * must not hang (an alarm kills it).
 *
 * Usage: unit-slots
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "nsb.h"
#include "nsbtest.h"

#define MANY 24
#define STRESS 40
#define ROUNDS 3000

static pthread_barrier_t bar;
static struct nsb_lock locks[STRESS];
static atomic_int counted, fallback, unmasked, masked, restored, holds_left;
static atomic_bool installing;
static atomic_int gone_unmasked;
static atomic_int gone_early;	/* holders without the mask gone before install returned */

static bool
kernel_blocks(int sig)
{
	uint64_t k = 0;

	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &k, sizeof(k)) != 0)
		return false;
	return (k >> (sig - 1)) & 1;
}

static void *
inflight(void *arg)
{
	bool mine;

	(void)arg;
	pthread_barrier_wait(&bar);
	mine = nsb_process_map_begin();
	atomic_fetch_add(mine ? &counted : &fallback, 1);
	pthread_barrier_wait(&bar);	/* every one in flight at once */
	if (mine)
		nsb_process_map_end();
	if (nsb_holds != 0)
		atomic_fetch_add(&holds_left, 1);
	return NULL;
}

static void *
holder(void *arg)
{
	struct nsb_lock *l = arg;
	bool before = kernel_blocks(SIGUSR1);

	pthread_barrier_wait(&bar);
	nsb_lock_quiet(l);
	bool blocked = kernel_blocks(SIGUSR1);

	atomic_fetch_add(blocked ? &masked : &unmasked, 1);
	if (blocked == !l->masked)
		nsbt_fail("lock %p: masked %d but the kernel's mask says %d", (void *)l, l->masked,
			  blocked);
	pthread_barrier_wait(&bar);	/* every one holding at once */
	if (atomic_load(&installing)) {
		/* The install (main) waits for the holders without the
		 * mask: let it wait a while, then go. */
		usleep(20000);
		if (!l->masked)
			atomic_fetch_add(&gone_unmasked, 1);
	}
	nsb_unlock(l);
	if (kernel_blocks(SIGUSR1) == before)
		atomic_fetch_add(&restored, 1);
	if (nsb_holds != 0)
		atomic_fetch_add(&holds_left, 1);
	return NULL;
}

static unsigned
rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

static void *
stress(void *arg)
{
	struct nsb_lock *l = arg;
	unsigned seed = (unsigned)(uintptr_t)arg;

	pthread_barrier_wait(&bar);
	for (int i = 0; i < ROUNDS; i++) {
		unsigned r = rnd(&seed);

		if (r & 1) {
			bool mine = nsb_process_map_begin();

			if (r & 2)
				sched_yield();
			if (mine)
				nsb_process_map_end();
		} else {
			nsb_lock_quiet(l);
			if (r & 2)
				sched_yield();
			nsb_unlock(l);
		}
	}
	if (nsb_holds != 0)
		atomic_fetch_add(&holds_left, 1);
	return NULL;
}

static void
run(int n, void *(*fn)(void *), bool own_lock)
{
	pthread_t t[STRESS];

	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		locks[i] = (struct nsb_lock)NSB_LOCK_INITIALIZER;
		NSBT_CHECK(pthread_create(&t[i], NULL, fn, own_lock ? &locks[i] : NULL) == 0,
			   "pthread_create");
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
}

static void
no_slot_held(const char *after)
{
	if (nsb_slots_any(nsb_slot_words, NSB_SLOT_WORDS))
		nsbt_fail("%s: a slot is still held", after);
	if (atomic_exchange(&holds_left, 0))
		nsbt_fail("%s: a thread ended with holds counted", after);
}

static void
on_usr2(int sig)
{
	(void)sig;
}

int
main(void)
{
	size_t ps = nsbt_page();
	int fd;
	void *p;

	alarm(120);	/* a hang is a failure */
	nsb_init();
	/* A protected mapping installs the library's handler: from then on
	 * its locks may skip the mask (no handler of the program's yet). */
	fd = memfd_create("unit-slots", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)ps) == 0, "memfd");
	p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap");
	NSBT_CHECK(nsb_disp_installed(), "the library's handler is installed");

	run(MANY, inflight, false);
	if (counted != NSB_SLOTS || fallback != MANY - NSB_SLOTS)
		nsbt_fail("inflight: %d counted, %d told to map under the lock (want %d, %d)",
			  atomic_load(&counted), atomic_load(&fallback), NSB_SLOTS, MANY - NSB_SLOTS);
	no_slot_held("inflight");
	printf("ok: inflight: %d of %d policy mappings in flight counted, the rest under the lock\n",
		counted, MANY);

	run(MANY, holder, true);
	if (unmasked != NSB_SLOTS || masked != MANY - NSB_SLOTS || restored != MANY)
		nsbt_fail("unmasked: %d without the mask, %d with it, %d masks restored "
			  "(want %d, %d, %d)", unmasked, masked, restored, NSB_SLOTS,
			  MANY - NSB_SLOTS, MANY);
	no_slot_held("unmasked");
	printf("ok: unmasked: %d of %d holders without the mask, the rest with it\n", unmasked, MANY);

	run(STRESS, stress, true);
	no_slot_held("stress");
	printf("ok: stress: %d threads, %d rounds each of mappings in flight and locks\n", STRESS,
		ROUNDS);

	/* install: the holders hold until main is installing. */
	atomic_store(&unmasked, 0);
	atomic_store(&masked, 0);
	atomic_store(&restored, 0);
	atomic_store(&installing, true);
	{
		pthread_t t[MANY];
		struct sigaction sa = { .sa_handler = on_usr2 };

		pthread_barrier_init(&bar, NULL, MANY + 1);
		for (int i = 0; i < MANY; i++) {
			locks[i] = (struct nsb_lock)NSB_LOCK_INITIALIZER;
			NSBT_CHECK(pthread_create(&t[i], NULL, holder, &locks[i]) == 0,
				   "pthread_create");
		}
		pthread_barrier_wait(&bar);	/* they take their locks */
		pthread_barrier_wait(&bar);	/* they hold them */
		NSBT_CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
		atomic_store(&gone_early, atomic_load(&gone_unmasked));
		for (int i = 0; i < MANY; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&bar);
	}
	if (unmasked != NSB_SLOTS || gone_early != NSB_SLOTS)
		nsbt_fail("install: returned with %d of %d holders without the mask gone",
			  gone_early, unmasked);
	no_slot_held("install");
	/* Every lock now blocks signals. */
	nsb_lock_quiet(&locks[0]);
	bool blocked = kernel_blocks(SIGUSR1);

	nsb_unlock(&locks[0]);
	if (!blocked || nsb_holds != 0)
		nsbt_fail("install: a lock after it did not block signals");
	printf("ok: install: waited for the %d holders without the mask\n", gone_early);
	munmap(p, ps);
	close(fd);
	return 0;
}
