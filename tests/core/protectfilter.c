/* SPDX-License-Identifier: MIT */
/*
 * nosigbus_protect() under a seccomp filter the library knows of (installed
 * through the interposed prctl) that kills the process on fstatfs(2), as
 * some filters do on the calls libnosigbus(7) lists as "Refused or fatal
 * somewhere".  The library makes none of those under a filter (sandbox.c);
 * nosigbus_protect() made two to learn about the file of the range
 * (files.c, open_mapped: openat of /proc/self/map_files or of the file's
 * path, then fstatfs), and the process died of SIGSYS.  Now it protects
 * the range without them, and a read past the end of the file once it
 * shrank is rescued.  The file is on disk and keeps its name until the
 * call (its path opens without privileges); the scenario runs in a
 * watched child.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "core.h"

static void
scenario(void *arg)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fstatfs, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	size_t ps = nsbt_page();
	const char *dir = getenv("NSB_BUILD_ROOT");
	char path[4096];
	char *p;
	int fd;

	(void)arg;
	snprintf(path, sizeof(path), "%s/core-protectfilter-%d-XXXXXX", dir ? dir : ".",
		 (int)getpid());
	fd = mkostemp(path, O_CLOEXEC);
	NSBT_CHECK(fd >= 0, "mkostemp %s: %s", path, strerror(errno));
	nsbt_fill(fd, 2 * ps);
	p = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED, fd, 0);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		unlink(path);
		nsbt_skip("no seccomp filter could be installed (%s)", strerror(errno));
	}
	if (nosigbus_protect(p, 2 * ps) != 0) {
		unlink(path);
		nsbt_fail("nosigbus_protect under a filter: %s", strerror(errno));
	}
	unlink(path);
	core_truncate(fd, 0);
	NSBT_CHECK(p[ps] == 0, "a rescued page reads non-zero");
	printf("ok: nosigbus_protect under a filter that kills fstatfs\n");
}

int
main(void)
{
	char err[4096];
	int status;

	core_require_library();
	status = core_run_watched(scenario, NULL, nsbt_scaled(30), NULL,
				  "nosigbus_protect under a filter", err, sizeof(err));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 77;
	nsbt_expect_exit(status, 0, "nosigbus_protect under a filter that kills fstatfs");
	core_expect_quiet(err, "protectfilter");
	printf("ok: protectfilter\n");
	return 0;
}
