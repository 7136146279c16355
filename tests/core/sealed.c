/* SPDX-License-Identifier: MIT */
/*
 * Sealed files are protected like the rest (issue 37).  A memfd sealed
 * F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL cannot change size, but it can
 * be shorter than its mapping: mapped longer than it is from the start,
 * or grown by mremap (libwayland's wl_shm_pool.resize).  Without the
 * library every libwayland compositor dies of that SIGBUS; under the
 * default policy the read past the end is rescued: zeros, the bytes
 * inside still the file's, and the program lives.  Each case runs in a
 * child judged by how it ended.
 */
#include "core.h"

struct sealed_case {
	const char *name;
	int type;		/* MAP_SHARED or MAP_PRIVATE */
	bool grow;		/* mapped at the file's size, then mremap()ed */
};

static int
sealed_memfd(size_t size)
{
	int fd = memfd_create("nsbtest-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	nsbt_fill(fd, size);
	NSBT_CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0,
		   "F_ADD_SEALS: %s", strerror(errno));
	return fd;
}

static void
sealed_child(void *arg)
{
	const struct sealed_case *c = arg;
	size_t ps = nsbt_page();
	struct nosigbus_stats before, after;
	volatile char *p;
	int fd;

	core_no_core();
	fd = sealed_memfd(ps);
	before = core_stats();
	if (c->grow) {
		p = core_map(NULL, ps, PROT_READ | PROT_WRITE, c->type, fd, 0);
		core_expect_pattern((const char *)p, 0, ps, c->name);
		p = mremap((void *)p, ps, 2 * ps, MREMAP_MAYMOVE);
		NSBT_CHECK(p != MAP_FAILED, "%s: mremap: %s", c->name, strerror(errno));
	} else {
		p = core_map(NULL, 2 * ps, PROT_READ | PROT_WRITE, c->type, fd, 0);
	}
	core_expect_pattern((const char *)p, 0, ps, c->name);
	core_expect_bytes((const char *)p + ps, 0, ps, c->name);
	after = core_stats();
	NSBT_CHECK(after.rescues - before.rescues == 1, "%s: %llu rescues, expected 1", c->name,
		   (unsigned long long)(after.rescues - before.rescues));
	core_expect_file(fd, ps, c->name);
	printf("ok: %s: the page past the end reads zeros\n", c->name);
}

int
main(void)
{
	static const struct sealed_case cases[] = {
		{ "sealed memfd mapped shared twice its size", MAP_SHARED, false },
		{ "sealed memfd mapped private twice its size", MAP_PRIVATE, false },
		{ "sealed memfd mapped shared, grown by mremap", MAP_SHARED, true },
		{ "sealed memfd mapped private, grown by mremap", MAP_PRIVATE, true },
	};

	if (!nsbt_have_library())
		nsbt_skip("the library is not loaded");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		nsbt_expect_exit(nsbt_run(sealed_child, (void *)&cases[i]), 0, cases[i].name);
	return 0;
}
