/* SPDX-License-Identifier: MIT */
/*
 * A resized mapping is still the file (issue 19).
 *
 * "grow": a compositor's pool.  A memfd of 4 pages, mapped; the client
 * truncates it; the compositor reads the pool (every page rescued, the last
 * one included: the whole mapping is anonymous memory now); the client
 * grows the file to 8 pages and writes new pixels; the compositor grows
 * the mapping with mremap.  The part mremap adds must show the file (with
 * the kernel's own flag it would: its zero pages stay inside the file's
 * mapping), the pages rescued before stay zero, and the grown part is
 * protected.  Also with only the last page rescued (the file cut to
 * three pages), in place (flags 0) and moved (MREMAP_MAYMOVE), MAP_SHARED and
 * MAP_PRIVATE, for fill page, range and auto (re-executed).
 *
 * "dontunmap": MREMAP_MAYMOVE | MREMAP_DONTUNMAP of a protected mapping
 * that a rescue split: it moves (the kernel alone refuses with EFAULT),
 * the destination shows what the source showed, and both stay protected.
 *
 * Usage: core-resize grow|dontunmap
 */
#include "core.h"

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

static size_t ps;

/* The client's new contents: byte 'N' + page number. */
static void
write_file(int fd, size_t pages)
{
	char *buf = malloc(ps);

	NSBT_CHECK(buf != NULL, "malloc");
	for (size_t i = 0; i < pages; i++) {
		memset(buf, 'N' + (int)i, ps);
		NSBT_CHECK(pwrite(fd, buf, ps, (off_t)(i * ps)) == (ssize_t)ps, "pwrite: %s",
			   strerror(errno));
	}
	free(buf);
}

struct grow {
	int type;		/* MAP_SHARED or MAP_PRIVATE */
	bool all;		/* every page rescued, or only the last */
	bool in_place;
	bool closed;		/* the process closed its descriptor (weston) */
};

/* The file by its path, for a process that keeps no descriptor. */
static char shm_path[64];

static int
client_fd(int fd)
{
	int c;

	if (fd >= 0)
		return fd;
	c = open(shm_path, O_RDWR | O_CLOEXEC);
	NSBT_CHECK(c >= 0, "open %s: %s", shm_path, strerror(errno));
	return c;
}

static void
client_done(int fd, int c)
{
	if (c != fd)
		close(c);
}

static void
client_truncate(int fd, off_t size)
{
	int c = client_fd(fd);

	core_truncate(c, size);
	client_done(fd, c);
}

static void
grow_child(void *arg)
{
	const struct grow *g = arg;
	const char *fill = getenv("NOSIGBUS_FILL") ? getenv("NOSIGBUS_FILL") : "page";
	int fd, c;
	char what[200];
	volatile char *p, *q;
	struct nosigbus_stats before;

	snprintf(what, sizeof(what), "mremap growth (%s, %s, %s rescued%s, fill=%s)",
		 g->in_place ? "in place" : "MREMAP_MAYMOVE",
		 g->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE",
		 g->all ? "every page" : "the last page",
		 g->closed ? ", descriptor closed" : "", fill);
	if (g->closed) {
		snprintf(shm_path, sizeof(shm_path), "/dev/shm/core-resize-%d", (int)getpid());
		fd = open(shm_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		NSBT_CHECK(fd >= 0, "open %s: %s", shm_path, strerror(errno));
	} else {
		fd = memfd_create("core-resize", MFD_CLOEXEC);
		NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	}
	core_truncate(fd, (off_t)(4 * ps));
	if (g->in_place) {
		/* Room after it, so that it can grow where it is. */
		char *room = core_free_range(8 * ps);

		p = core_map(room, 4 * ps, CORE_PROT_RW, g->type | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
	} else {
		p = core_map(NULL, 4 * ps, CORE_PROT_RW, g->type | MAP_NOSIGBUS, fd, 0);
	}
	/* The compositor keeps no descriptor (libwayland-server closes it). */
	if (g->closed) {
		close(fd);
		fd = -1;
	}
	/* The client cuts its file: everything, or the last page. */
	client_truncate(fd, g->all ? 0 : (off_t)(3 * ps));
	for (size_t i = g->all ? 0 : 3; i < 4; i++)
		NSBT_CHECK(p[i * ps + 7] == 0, "%s: page %zu before", what, i);
	/* It grows the file and draws. */
	c = client_fd(fd);
	core_truncate(c, (off_t)(8 * ps));
	write_file(c, 8);
	client_done(fd, c);
	q = mremap((void *)p, 4 * ps, 8 * ps, g->in_place ? 0 : MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "%s: %s", what, strerror(errno));
	NSBT_CHECK(!g->in_place || q == p, "%s: moved", what);
	for (size_t i = 0; i < 8; i++) {
		/* A shared mapping shows the file again where it came back
		 * (SPEC §5, Recovery); a private one keeps its zero pages. */
		bool kept = g->type == MAP_PRIVATE && i < 4 && (g->all || i == 3);
		char want = kept ? 0 : (char)('N' + (int)i);

		NSBT_CHECK(q[i * ps + 5] == want, "%s: page %zu reads %#x, expected %#x (%s)", what,
			   i, (unsigned)(unsigned char)q[i * ps + 5], (unsigned)(unsigned char)want,
			   i >= 4 ? "the grown part is not the file"
			   : kept ? "a rescued page of a private mapping"
				  : "a rescued page the file covers again");
	}
	/* The grown part is protected: cut the file again and read it. */
	client_truncate(fd, 0);
	before = core_stats();
	NSBT_CHECK(q[6 * ps + 1] == 0, "%s: page 6 after the cut", what);
	NSBT_CHECK(core_stats().rescues > before.rescues, "%s: no rescue in the grown part", what);
	printf("ok: %s: the grown part shows the file and is protected\n", what);
	if (fd >= 0)
		close(fd);
	else
		unlink(shm_path);
}

static void
grow(void)
{
	for (int t = 0; t < 2; t++)
		for (int all = 0; all < 2; all++)
			for (int in_place = 0; in_place < 2; in_place++)
			for (int closed = 0; closed < 2; closed++) {
				struct grow g = { t ? MAP_PRIVATE : MAP_SHARED, all, in_place, closed };
				char err[4096];
				int status = core_run_watched(grow_child, &g, nsbt_scaled(45), NULL, "grow", err,
							      sizeof(err));

				core_expect_quiet(err, "grow");
				nsbt_expect_exit(status, 0, "mremap growth after rescues");
			}
}

/* Does the kernel take MREMAP_DONTUNMAP of a file mapping?  Linux 5.13 and
 * later; from 5.7, private anonymous memory only (EINVAL otherwise). */
static bool file_dontunmap;

static void
dontunmap_child(void *arg)
{
	const int type = *(const int *)arg;
	const char *name = type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE";
	int fd = memfd_create("core-resize-dontunmap", MFD_CLOEXEC);
	struct nosigbus_stats before;
	volatile char *p, *q;

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	core_truncate(fd, (off_t)(4 * ps));
	write_file(fd, 4);
	p = core_map(NULL, 4 * ps, CORE_PROT_RW, type | MAP_NOSIGBUS, fd, 0);
	core_truncate(fd, (off_t)(2 * ps));
	/* Page 3 rescued: the mapping is two VMAs and a rescued page. */
	NSBT_CHECK(p[3 * ps] == 0, "%s: page 3", name);
	p[3 * ps + 1] = 'w';
	/* The fifth argument is read for MREMAP_DONTUNMAP (a hint): NULL. */
	q = mremap((void *)p, 4 * ps, 4 * ps, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
	if (!file_dontunmap) {
		NSBT_CHECK(q == MAP_FAILED && errno == EINVAL, "MREMAP_DONTUNMAP of a %s mapping "
			   "a rescue split: %p %s, where the kernel says EINVAL", name, (void *)q,
			   strerror(errno));
		before = core_stats();
		(void)p[2 * ps];
		NSBT_CHECK(core_stats().rescues == before.rescues + 1 && p[3 * ps + 1] == 'w',
			   "%s: the source changed after the refused call", name);
		printf("ok: MREMAP_DONTUNMAP of a %s mapping split by a rescue: EINVAL, as the "
		       "kernel, the source still protected\n", name);
		close(fd);
		return;
	}
	NSBT_CHECK(q != MAP_FAILED, "MREMAP_DONTUNMAP of a %s mapping a rescue split: %s", name,
		   strerror(errno));
	NSBT_CHECK(q[0] == 'N' && q[ps] == 'N' + 1 && q[3 * ps + 1] == 'w',
		   "%s: the destination does not show what the source showed", name);
	/* Both protected: page 2 is past the end now. */
	before = core_stats();
	(void)q[2 * ps];
	(void)p[2 * ps];
	NSBT_CHECK(core_stats().rescues == before.rescues + 2,
		   "%s: %llu rescues in the two mappings, expected 2", name,
		   (unsigned long long)(core_stats().rescues - before.rescues));
	/* The source's page 3 is fresh (what was there moved). */
	NSBT_CHECK(p[3 * ps + 1] == 0, "%s: the source's rescued page kept its data", name);
	printf("ok: MREMAP_DONTUNMAP of a %s mapping split by a rescue: moved, both protected\n",
	       name);
	close(fd);
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "grow";

	ps = nsbt_page();
	core_require_library();
	if (strcmp(what, "grow-one") == 0) {
		grow();
		return 0;
	}
	if (strcmp(what, "grow") == 0) {
		core_reexec_each_fill("grow-one", "growth");
		return 0;
	}
	if (strcmp(what, "dontunmap") == 0) {
		static const int types[] = { MAP_SHARED, MAP_PRIVATE };
		int fd = memfd_create("core-resize-probe", MFD_CLOEXEC);
		void *m, *r;

		/* Asked with the raw call, of a mapping the library leaves alone. */
		NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)ps) == 0, "memfd: %s", strerror(errno));
		m = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);
		NSBT_CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
		r = (void *)syscall(SYS_mremap, m, ps, ps, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
		file_dontunmap = r != MAP_FAILED;
		NSBT_CHECK(file_dontunmap || errno == EINVAL, "mremap: %s", strerror(errno));
		if (file_dontunmap)
			munmap(r, ps);
		munmap(m, ps);
		close(fd);
		if (!file_dontunmap)
			printf("note: this kernel takes MREMAP_DONTUNMAP of private anonymous memory "
			       "only (Linux 5.13 and later take file mappings): the library must "
			       "give the same EINVAL\n");

		for (int t = 0; t < 2; t++)
			nsbt_expect_exit(nsbt_run(dontunmap_child, (void *)&types[t]), 0,
					 "MREMAP_DONTUNMAP after a rescue");
		return 0;
	}
	nsbt_fail("usage: %s grow|dontunmap", argv[0]);
}
