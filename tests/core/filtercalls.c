/* SPDX-License-Identifier: MIT */
/*
 * The API under a seccomp filter the library knows of (installed through
 * the interposed prctl) that kills the process on one of the calls
 * libnosigbus(7) lists as "Refused or fatal somewhere", which the library
 * makes only where no filter is in force (sandbox.c).  Each mode kills on
 * one call and makes the library call that made it:
 *
 *   protect   fstatfs: nosigbus_protect() of a disk file's mapping (it
 *       opened /proc/self/map_files or the file's path and asked fstatfs;
 *       the file keeps its name until the call, so that the path opens
 *       without privileges).  Protected, and a read past the end of the
 *       file once it shrank is rescued.
 *   refresh   getdents64: nosigbus_refresh() of a memfd mapping with a
 *       replaced page whose file grew back (it scanned /proc/self/fd).
 *   clone     clone (Chromium's filters kill a clone whose flags they do
 *       not know): the same (it mapped the file in a clone(CLONE_VM |
 *       CLONE_VFORK) child).
 *   mremap    clone: an mremap that grows such a mapping, which refreshes
 *       by itself.
 * Before the fixes each died of SIGSYS; now the call succeeds, and under
 * the filter the replaced page stays the zero page (nothing is shown
 * again: libnosigbus(7), "Sandboxes").  Each runs in a watched child.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "core.h"

static size_t ps;

static void
install(int nr)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		nsbt_skip("no seccomp filter could be installed (%s)", strerror(errno));
}

static void
protect(void)
{
	const char *dir = getenv("NSB_BUILD_ROOT");
	char path[4096];
	char *p;
	int fd, ret;

	snprintf(path, sizeof(path), "%s/core-filtercalls-%d-XXXXXX", dir ? dir : ".",
		 (int)getpid());
	fd = mkostemp(path, O_CLOEXEC);
	NSBT_CHECK(fd >= 0, "mkostemp %s: %s", path, strerror(errno));
	nsbt_fill(fd, 2 * ps);
	p = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED, fd, 0);
	install(SYS_fstatfs);
	ret = nosigbus_protect(p, 2 * ps);
	unlink(path);
	NSBT_CHECK(ret == 0, "nosigbus_protect under a filter: %s", strerror(errno));
	core_truncate(fd, 0);
	NSBT_CHECK(p[ps] == 0, "a rescued page reads non-zero");
}

/* A protected memfd mapping of 2 pages whose second page was replaced,
 * the file grown back; then the filter. */
static char *
replaced(int nr, int *fdp)
{
	int fd = nsbt_file(NSBT_MEMFD, 2 * ps);
	char *p = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0);

	core_truncate(fd, (off_t)ps);
	NSBT_CHECK(p[ps] == 0, "a rescued page reads non-zero");
	core_truncate(fd, (off_t)(2 * ps));
	install(nr);
	*fdp = fd;
	return p;
}

static void
refresh(int nr)
{
	int fd;
	char *p = replaced(nr, &fd);
	long n = nosigbus_refresh(p, 2 * ps);

	NSBT_CHECK(n == 0, "nosigbus_refresh under a filter: %ld (%s), 0 expected", n,
		   strerror(errno));
	NSBT_CHECK(p[ps] == 0, "the replaced page does not read zeros");
}

static void
grow(void)
{
	int fd;
	char *p = replaced(SYS_clone, &fd), *q;

	core_truncate(fd, (off_t)(4 * ps));
	q = mremap(p, 2 * ps, 4 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "mremap under a filter: %s", strerror(errno));
	NSBT_CHECK(q[ps] == 0, "the replaced page does not read zeros");
}

static void
scenario(void *arg)
{
	const char *mode = arg;

	if (strcmp(mode, "protect") == 0)
		protect();
	else if (strcmp(mode, "refresh") == 0)
		refresh(SYS_getdents64);
	else if (strcmp(mode, "clone") == 0)
		refresh(SYS_clone);
	else
		grow();
	printf("ok: %s under a filter\n", mode);
}

int
main(int argc, char **argv)
{
	core_require_library();
	ps = nsbt_page();
	if (argc != 2 || (strcmp(argv[1], "protect") && strcmp(argv[1], "refresh") &&
			  strcmp(argv[1], "clone") && strcmp(argv[1], "mremap")))
		nsbt_fail("usage: core-filtercalls protect|refresh|clone|mremap");
	if (core_run_case_watched(scenario, argv[1], 30, argv[1]) == 77)
		return 77;
	printf("ok: filtercalls %s\n", argv[1]);
	return 0;
}
