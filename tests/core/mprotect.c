/* SPDX-License-Identifier: MIT */
/*
 * mprotect and pkey_mprotect on protected mappings: a rescue maps the
 * zero page with the protection the program set last, so after
 * mprotect(PROT_READ) a rescued page reads zeros and a write dies by
 * SIGSEGV, exactly as the kernel patch's zero page would behave.
 */
#include "core.h"

struct mp {
	int type;
	int fd;
	char *p;
};

static void
mp_setup(struct mp *m, int type, size_t npages)
{
	size_t ps = nsbt_page();

	m->type = type;
	m->fd = nsbt_file(NSBT_MEMFD, npages * ps);
	m->p = core_map(NULL, npages * ps, CORE_PROT_RW, type | MAP_NOSIGBUS, m->fd, 0);
	core_truncate(m->fd, 0);
}

static const char *
tname(int type)
{
	return type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE";
}

/* mprotect(PROT_READ) then a rescue: read-only zeros; then write: SIGSEGV. */
static void
readonly_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 2);
	NSBT_CHECK(mprotect(m.p, 2 * ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	core_expect_bytes(m.p, 0, ps, "read-only rescued page");
	printf("ok: %s: rescue after mprotect(PROT_READ) reads zeros\n", tname(type));
	nsbt_expect_signal(core_touch_status(m.p, true), SIGSEGV,
			   "write to the read-only rescued page");
	/* A write as the first access: the rescue maps it read-only, the write re-faults. */
	nsbt_expect_signal(core_touch_status(m.p + ps, true), SIGSEGV,
			   "write as the first access to a read-only protected page");
	/* Made writable again: the next rescue is writable. */
	NSBT_CHECK(mprotect(m.p + ps, ps, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	memset(m.p + ps, 'w', ps);
	core_expect_bytes(m.p + ps, 'w', ps, "page made writable again");
	printf("ok: %s: read-only then writable again\n", tname(type));
}

/* Only part of the mapping is made read-only. */
static void
partial_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 3);
	NSBT_CHECK(mprotect(m.p + ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	memset(m.p, 'a', ps);
	memset(m.p + 2 * ps, 'c', ps);
	core_expect_bytes(m.p, 'a', ps, "page 0 (still read-write)");
	core_expect_bytes(m.p + 2 * ps, 'c', ps, "page 2 (still read-write)");
	core_expect_bytes(m.p + ps, 0, ps, "page 1 (read-only)");
	nsbt_expect_signal(core_touch_status(m.p + ps, true), SIGSEGV,
			   "write to the read-only middle page");
	printf("ok: %s: mprotect of the middle page only\n", tname(type));
}

/* mprotect after the rescue: the kernel protects the rescued page itself. */
static void
after_rescue_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 2);
	memset(m.p, 'x', ps);
	NSBT_CHECK(mprotect(m.p, 2 * ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	core_expect_bytes(m.p, 'x', ps, "rescued page after mprotect(PROT_READ)");
	nsbt_expect_signal(core_touch_status(m.p, true), SIGSEGV,
			   "write to a rescued page made read-only");
	core_expect_bytes(m.p + ps, 0, ps, "second page rescued read-only");
	nsbt_expect_signal(core_touch_status(m.p + ps, true), SIGSEGV,
			   "write to the second page rescued read-only");
	NSBT_CHECK(mprotect(m.p, 2 * ps, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	m.p[0] = 'y';
	m.p[ps] = 'z';
	NSBT_CHECK(m.p[0] == 'y' && m.p[ps] == 'z', "writes after mprotect(RW)");
	printf("ok: %s: mprotect after a rescue\n", tname(type));
}

/* PROT_NONE: an access is a SIGSEGV, never a rescue. */
static void
prot_none_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct nosigbus_stats before;
	struct mp m;

	mp_setup(&m, type, 1);
	NSBT_CHECK(mprotect(m.p, ps, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
	before = core_stats();
	nsbt_expect_signal(core_touch_status(m.p, false), SIGSEGV,
			   "read of a PROT_NONE protected page");
	NSBT_CHECK(core_stats().rescues == before.rescues, "no rescue for PROT_NONE");
	NSBT_CHECK(mprotect(m.p, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	core_expect_bytes(m.p, 0, ps, "PROT_NONE made readable, then rescued");
	printf("ok: %s: PROT_NONE\n", tname(type));
}

/* pkey_mprotect with pkey -1 is mprotect; the library must follow it too. */
static void
pkey_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 2);
	if (pkey_mprotect(m.p, 2 * ps, PROT_READ, -1) != 0) {
		if (errno == ENOSYS) {
			printf("ok: pkey_mprotect not available here (ENOSYS), nothing to check\n");
			return;
		}
		nsbt_fail("pkey_mprotect(-1): %s", strerror(errno));
	}
	core_expect_bytes(m.p, 0, ps, "rescue after pkey_mprotect(PROT_READ)");
	nsbt_expect_signal(core_touch_status(m.p, true), SIGSEGV,
			   "write after pkey_mprotect(PROT_READ)");
	NSBT_CHECK(pkey_mprotect(m.p + ps, ps, CORE_PROT_RW, -1) == 0,
		   "pkey_mprotect: %s", strerror(errno));
	memset(m.p + ps, 'k', ps);
	core_expect_bytes(m.p + ps, 'k', ps, "rescue after pkey_mprotect(RW)");
	printf("ok: %s: pkey_mprotect\n", tname(type));
}

int
main(void)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	core_require_library();
	for (int i = 0; i < 2; i++) {
		int t = types[i];

		nsbt_expect_exit(nsbt_run(readonly_child, &t), 0, "mprotect(PROT_READ) then rescue");
		nsbt_expect_exit(nsbt_run(partial_child, &t), 0, "partial mprotect");
		nsbt_expect_exit(nsbt_run(after_rescue_child, &t), 0, "mprotect after rescue");
		nsbt_expect_exit(nsbt_run(prot_none_child, &t), 0, "PROT_NONE");
		nsbt_expect_exit(nsbt_run(pkey_child, &t), 0, "pkey_mprotect");
	}
	return 0;
}
