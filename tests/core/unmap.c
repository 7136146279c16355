/* SPDX-License-Identifier: MIT */
/*
 * Calls that remove or replace address space: partial munmap (the edges
 * stay protected, the hole does not), MAP_FIXED of an unflagged mapping
 * over a protected one (and the other way round), and mremap grow, move
 * and shrink, both before any rescue and after rescues split the mapping
 * into several kernel VMAs.  Each scenario runs in a child, for
 * MAP_PRIVATE and MAP_SHARED.
 */
#include "core.h"

struct sc {
	int type;		/* MAP_PRIVATE or MAP_SHARED */
	bool after;		/* rescue (and write) before the operation */
};

static const char *
sc_name(const char *op, const struct sc *s)
{
	static char buf[160];

	snprintf(buf, sizeof(buf), "%s, %s, %s", op,
		 s->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE",
		 s->after ? "after rescues" : "before any rescue");
	return buf;
}

/*
 * Six pages of an empty file.  "after": pages 1, 2 and 4 are rescued and
 * written first (the kernel then has 6 VMAs there).  munmap pages 2-3:
 * pages 0, 1, 4, 5 stay protected with their data, 2-3 are gone and a new
 * unflagged mapping there is not protected.
 */
static void
partial_munmap_child(void *arg)
{
	struct sc *s = arg;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 6 * ps);
	char *p = core_map(NULL, 6 * ps, CORE_PROT_RW, s->type | MAP_NOSIGBUS, fd, 0);
	char name[160];

	snprintf(name, sizeof(name), "%s", sc_name("partial munmap", s));
	core_truncate(fd, 0);
	if (s->after) {
		memset(p + 1 * ps, 'b', ps);
		memset(p + 2 * ps, 'c', ps);
		memset(p + 4 * ps, 'e', ps);
	}
	NSBT_CHECK(munmap(p + 2 * ps, 2 * ps) == 0, "munmap: %s", strerror(errno));
	core_expect_unmapped(p + 2 * ps, 2 * ps, name);
	if (s->after) {
		core_expect_bytes(p + 1 * ps, 'b', ps, name);
		core_expect_bytes(p + 4 * ps, 'e', ps, name);
	} else {
		core_expect_bytes(p + 1 * ps, 0, ps, name);
		core_expect_bytes(p + 4 * ps, 0, ps, name);
	}
	core_expect_bytes(p, 0, ps, name);
	core_expect_bytes(p + 5 * ps, 0, ps, name);
	memset(p, 'a', ps);
	memset(p + 5 * ps, 'f', ps);
	core_expect_bytes(p, 'a', ps, name);
	core_expect_bytes(p + 5 * ps, 'f', ps, name);
	printf("ok: %s: edges still protected, data kept\n", name);

	/* Nothing in the hole: an access is a plain SIGSEGV. */
	nsbt_expect_signal(core_touch_status(p + 2 * ps, false), SIGSEGV,
			   "read in the unmapped hole");
	/* A new unflagged mapping in the hole is not protected. */
	core_expect_unprotected(p + 2 * ps, "unflagged mapping in the hole, first page");
	core_expect_unprotected(p + 3 * ps, "unflagged mapping in the hole, second page");
	printf("ok: %s\n", name);
}

/*
 * MAP_FIXED of an unflagged mapping of an empty file over pages 1-2 of a
 * protected 4-page mapping: those pages die, pages 0 and 3 are rescued.
 */
static void
fixed_over_child(void *arg)
{
	struct sc *s = arg;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps);
	int ufd = nsbt_file(NSBT_MEMFD, 2 * ps);
	char *p = core_map(NULL, 4 * ps, CORE_PROT_RW, s->type | MAP_NOSIGBUS, fd, 0);
	char *u;
	char name[160];

	snprintf(name, sizeof(name), "%s", sc_name("MAP_FIXED unflagged over protected", s));
	core_truncate(fd, 0);
	if (s->after) {
		memset(p, 'a', ps);
		memset(p + 2 * ps, 'c', ps);	/* replaced below */
	}
	u = core_map(p + ps, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED, ufd, 0);
	NSBT_CHECK(u == p + ps, "MAP_FIXED moved");
	core_expect_pattern(u, 0, 2 * ps, "the new mapping shows its file");
	core_truncate(ufd, 0);
	nsbt_expect_signal(core_touch_status(u, false), SIGBUS,
			   "unflagged MAP_FIXED mapping, first page, past EOF");
	nsbt_expect_signal(core_touch_status(u + ps, true), SIGBUS,
			   "unflagged MAP_FIXED mapping, second page, past EOF (write)");
	core_expect_bytes(p, s->after ? 'a' : 0, ps, name);
	core_expect_bytes(p + 3 * ps, 0, ps, name);
	memset(p + 3 * ps, 'd', ps);
	core_expect_bytes(p + 3 * ps, 'd', ps, name);
	printf("ok: %s: the rest is still protected\n", name);

	/* The other way round: a protected MAP_FIXED mapping over the unflagged one. */
	NSBT_CHECK(mmap(u, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS,
			ufd, 0) == u, "MAP_FIXED|MAP_NOSIGBUS: %s", strerror(errno));
	core_expect_bytes(u, 0, ps, "MAP_FIXED|MAP_NOSIGBUS over an unflagged mapping");
	nsbt_expect_signal(core_touch_status(u + ps, false), SIGBUS,
			   "the part of the unflagged mapping not covered");
	printf("ok: %s: MAP_FIXED|MAP_NOSIGBUS over unflagged is protected\n", name);

	/* Anonymous MAP_FIXED over everything: no protection left anywhere. */
	NSBT_CHECK(mmap(p, 4 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			-1, 0) == p, "MAP_FIXED anonymous: %s", strerror(errno));
	core_expect_bytes(p, 0, 4 * ps, "anonymous MAP_FIXED over everything");
	NSBT_CHECK(munmap(p, 4 * ps) == 0, "munmap");
	for (int i = 0; i < 4; i++)
		core_expect_unprotected(p + i * ps, "unflagged mapping where the protected one was");
	printf("ok: %s\n", name);
}

/*
 * mremap.  The file has 8 pages of data, truncated to 1.5 pages; the
 * protected mapping starts with 4 pages: page 0 file data, page 1 file
 * data then zeros, pages 2-3 past EOF.  "after": page 2 was rescued and
 * written ('R'), page 3 not touched, so the kernel sees [file][anon][file].
 */
struct mr {
	int fd;
	char *p;
	size_t ps;
};

static void
mr_setup(struct mr *m, const struct sc *s)
{
	m->ps = nsbt_page();
	m->fd = nsbt_file(NSBT_MEMFD, 8 * m->ps);
	m->p = core_map(NULL, 4 * m->ps, CORE_PROT_RW, s->type | MAP_NOSIGBUS, m->fd, 0);
	core_expect_pattern(m->p, 0, 4 * m->ps, "before truncation");
	core_truncate(m->fd, (off_t)(m->ps + m->ps / 2));
	if (s->after) {
		memset(m->p + 2 * m->ps, 'R', m->ps);
		core_expect_bytes(m->p + 2 * m->ps, 'R', m->ps, "rescued page 2");
	}
}

/* Checks the first npages of q (npages >= 3) after an mremap. */
static void
mr_check(const struct mr *m, char *q, size_t npages, const struct sc *s,
	 const char *name)
{
	size_t ps = m->ps;

	core_expect_pattern(q, 0, ps + ps / 2, name);
	core_expect_bytes(q + ps + ps / 2, 0, ps / 2, name);
	core_expect_bytes(q + 2 * ps, s->after ? 'R' : 0, ps, name);
	/* Pages past the old length (grown) or never touched: protected, zero. */
	for (size_t i = 3; i < npages; i++)
		core_expect_bytes(q + i * ps, 0, ps, name);
	for (size_t i = 2; i < npages; i++)
		q[i * ps + 17] = (char)('0' + i);
	for (size_t i = 2; i < npages; i++)
		NSBT_CHECK(q[i * ps + 17] == (char)('0' + i), "%s: write to page %zu", name, i);
	core_expect_file(m->fd, ps + ps / 2, name);
}

static void
mremap_grow_child(void *arg)
{
	struct sc *s = arg;
	struct mr m;
	char *q;
	char name[160];

	snprintf(name, sizeof(name), "%s", sc_name("mremap grow 4 -> 8 pages", s));
	mr_setup(&m, s);
	q = mremap(m.p, 4 * m.ps, 8 * m.ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "%s: mremap: %s", name, strerror(errno));
	if (q != m.p)
		for (size_t i = 0; i < 4; i++)
			if (m.p + i * m.ps < q || m.p + i * m.ps >= q + 8 * m.ps)
				NSBT_CHECK(!core_page_mapped(m.p + i * m.ps),
					   "%s: old page %zu still mapped after a move", name, i);
	mr_check(&m, q, 8, s, name);
	printf("ok: %s: contents kept, grown part protected (%s)\n", name,
	       q == m.p ? "in place" : "moved");
}

static void
mremap_move_child(void *arg)
{
	struct sc *s = arg;
	struct mr m;
	char *target, *q;
	char name[160];

	snprintf(name, sizeof(name), "%s", sc_name("mremap move (MREMAP_MAYMOVE|MREMAP_FIXED)", s));
	mr_setup(&m, s);
	/* Something unprotected sits at the target: MREMAP_FIXED replaces it. */
	target = core_map(NULL, 4 * m.ps, PROT_READ,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	q = mremap(m.p, 4 * m.ps, 4 * m.ps, MREMAP_MAYMOVE | MREMAP_FIXED, target);
	NSBT_CHECK(q == target, "%s: mremap returned %p (%s), expected %p", name,
		   (void *)q, q == MAP_FAILED ? strerror(errno) : "", (void *)target);
	core_expect_unmapped(m.p, 4 * m.ps, "the old address after the move");
	mr_check(&m, q, 4, s, name);
	for (int i = 0; i < 4; i++)
		core_expect_unprotected(m.p + i * m.ps, "unflagged mapping at the old address");
	printf("ok: %s: contents kept, still protected, old address free\n", name);
}

static void
mremap_shrink_child(void *arg)
{
	struct sc *s = arg;
	struct mr m;
	char *q;
	char name[160];

	snprintf(name, sizeof(name), "%s", sc_name("mremap shrink 4 -> 3 pages", s));
	mr_setup(&m, s);
	if (s->after)
		memset(m.p + 3 * m.ps, 'S', m.ps);	/* the page that goes away */
	q = mremap(m.p, 4 * m.ps, 3 * m.ps, 0);
	NSBT_CHECK(q == m.p, "%s: mremap returned %p (%s), expected %p", name,
		   (void *)q, q == MAP_FAILED ? strerror(errno) : "", (void *)m.p);
	core_expect_unmapped(m.p + 3 * m.ps, m.ps, "the released page");
	mr_check(&m, q, 3, s, name);
	core_expect_unprotected(m.p + 3 * m.ps, "unflagged mapping in the released page");
	printf("ok: %s: contents kept, still protected, released page free\n", name);
}

/* grow, then shrink, then move, on the same mapping, with rescues between. */
static void
mremap_chain_child(void *arg)
{
	struct sc *s = arg;
	struct mr m;
	char *q, *target;
	char name[160];

	snprintf(name, sizeof(name), "%s", sc_name("mremap grow+shrink+move chain", s));
	mr_setup(&m, s);
	q = mremap(m.p, 4 * m.ps, 6 * m.ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "grow: %s", strerror(errno));
	memset(q + 4 * m.ps, 'G', m.ps);	/* rescue in the grown part */
	q = mremap(q, 6 * m.ps, 5 * m.ps, 0);
	NSBT_CHECK(q != MAP_FAILED, "shrink: %s", strerror(errno));
	target = core_map(NULL, 5 * m.ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	q = mremap(q, 5 * m.ps, 5 * m.ps, MREMAP_MAYMOVE | MREMAP_FIXED, target);
	NSBT_CHECK(q == target, "move: %s", q == MAP_FAILED ? strerror(errno) : "elsewhere");
	core_expect_bytes(q + 4 * m.ps, 'G', m.ps, name);
	mr_check(&m, q, 4, s, name);
	printf("ok: %s\n", name);
}

static void
run_all(const char *what, void (*fn)(void *))
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	for (int t = 0; t < 2; t++)
		for (int after = 0; after < 2; after++) {
			struct sc s = { types[t], after };

			nsbt_expect_exit(nsbt_run(fn, &s), 0, sc_name(what, &s));
		}
}

int
main(int argc, char **argv)
{
	(void)argc;
	core_require_library();
	/* The unflagged memfds here must be unprotected: the default is shm. */
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	run_all("partial munmap", partial_munmap_child);
	run_all("MAP_FIXED over", fixed_over_child);
	run_all("mremap grow", mremap_grow_child);
	run_all("mremap move", mremap_move_child);
	run_all("mremap shrink", mremap_shrink_child);
	run_all("mremap chain", mremap_chain_child);
	return 0;
}
