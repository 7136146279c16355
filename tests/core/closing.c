/* SPDX-License-Identifier: MIT */
/*
 * The end-of-file check's descriptor (issue 24, files.c): while the
 * program holds open the descriptor a file was mapped from, the library
 * keeps none of its own and a rescue learns the size through the
 * program's; it keeps one when the program closes that number, however
 * it closes it (close, fclose, dup2 and dup3 onto it, close_range,
 * closefrom), so that a rescue after the close is still checked against
 * the size, not counted as unverified.  A number closed behind the
 * library's back (a raw close) leaves the file without one: the rescue
 * is unverified, as documented (unless /proc/self/map_files answers).
 *
 * Each way runs in a child: a memfd of 2 pages mapped MAP_NOSIGBUS over
 * 4, the descriptor closed that way, then a read past the end.
 */
#include "core.h"

static size_t ps;

/* O_PATH descriptors of this process (the library's; the program has none). */
static int
kept_count(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		int fl = fcntl(fd, F_GETFL);

		n += fl >= 0 && (fl & O_PATH);
	}
	return n;
}

enum way { WAY_OPEN, WAY_CLOSE, WAY_FCLOSE, WAY_DUP2, WAY_DUP3, WAY_CLOSE_RANGE,
	   WAY_CLOSEFROM, WAY_RAW, WAYS };
static const char *const way_names[WAYS] = {
	"held open", "close", "fclose", "dup2 onto it", "dup3 onto it", "close_range",
	"closefrom", "a raw close",
};

static void
way_child(void *arg)
{
	enum way way = *(enum way *)arg;
	const char *what = way_names[way];
	int fd = memfd_create("core-closing", MFD_CLOEXEC), other = memfd_create("other", 0);
	struct nosigbus_stats before, after;
	volatile char *p;
	FILE *f = NULL;

	NSBT_CHECK(fd >= 0 && other >= 0, "memfd_create: %s", strerror(errno));
	core_truncate(fd, (off_t)(2 * ps));
	if (way == WAY_FCLOSE) {
		f = fdopen(fd, "r+");
		NSBT_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	}
	p = core_map(NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(kept_count() == 0, "%s: the library keeps a descriptor while the program's "
		   "is open", what);
	switch (way) {
	case WAY_OPEN:
		break;
	case WAY_CLOSE:
		NSBT_CHECK(close(fd) == 0, "close: %s", strerror(errno));
		break;
	case WAY_FCLOSE:
		NSBT_CHECK(fclose(f) == 0, "fclose: %s", strerror(errno));
		break;
	case WAY_DUP2:
		NSBT_CHECK(dup2(other, fd) == fd, "dup2: %s", strerror(errno));
		break;
	case WAY_DUP3:
		NSBT_CHECK(dup3(other, fd, O_CLOEXEC) == fd, "dup3: %s", strerror(errno));
		break;
	case WAY_CLOSE_RANGE:
		NSBT_CHECK(close_range((unsigned)fd, (unsigned)fd, 0) == 0, "close_range: %s",
			   strerror(errno));
		break;
	case WAY_CLOSEFROM:
		closefrom(other > fd ? fd : other);
		break;
	case WAY_RAW:
		NSBT_CHECK(syscall(SYS_close, fd) == 0, "close: %s", strerror(errno));
		break;
	case WAYS:
		break;
	}
	if (way != WAY_OPEN && way != WAY_RAW)
		NSBT_CHECK(kept_count() == 1, "%s: the library kept no descriptor", what);
	before = core_stats();
	NSBT_CHECK(p[3 * ps] == 0, "%s: a rescued page reads non-zero", what);
	after = core_stats();
	NSBT_CHECK(after.rescues == before.rescues + 1, "%s: the read was not rescued", what);
	/* After a raw close only /proc/self/map_files can tell (with
	 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), or nothing. */
	if (way != WAY_RAW)
		NSBT_CHECK(after.unverified == before.unverified,
			   "%s: the rescue was not checked against the file's size", what);
	/* Inside the size: the program's, as without the library (it reads
	 * the file: no fault at all). */
	NSBT_CHECK(p[ps] == 0, "%s: reading inside the size", what);
	NSBT_CHECK(munmap((void *)p, 4 * ps) == 0, "munmap");
	NSBT_CHECK(kept_count() == 0, "%s: a descriptor kept after the mapping went", what);
	printf("ok: %s: %s\n", what,
	       way == WAY_OPEN ? "no descriptor kept, the rescue checked through the program's"
	       : way != WAY_RAW ? "a descriptor kept at the close, the rescue checked"
	       : after.unverified == before.unverified
		       ? "no descriptor kept, the rescue checked through /proc/self/map_files"
		       : "no descriptor kept, the rescue unverified (documented)");
}

int
main(void)
{
	core_require_library();
	ps = nsbt_page();
	for (enum way w = 0; w < WAYS; w++)
		nsbt_expect_exit(nsbt_run(way_child, &w), 0, way_names[w]);
	return 0;
}
