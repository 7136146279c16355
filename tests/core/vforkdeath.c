/* SPDX-License-Identifier: MIT */
/*
 * A vfork child that dies while it holds the library's table lock (KNOWN
 * TO FAIL: declared should_fail in meson.build until it is fixed).
 *
 * A vfork child runs on its parent's thread and memory: a mapping call it
 * makes takes the table lock with the parent thread's lock number
 * (process.c, my_id).  Killed inside that call - here a seccomp filter of
 * its own kills it at its munmap(2), which the library makes holding the
 * lock; SIGKILL from elsewhere at that instant does the same - it leaves
 * the lock word holding the parent thread's number.  The parent then
 * takes every later call of its own for one nested in a handler
 * (nsb_ranges_nested): no record is made, and a new MAP_NOSIGBUS mapping
 * is not protected (a read past the end of its file dies of SIGBUS), with
 * no log line.  (A child killed inside a rescue leaves a reader counted,
 * and the parent's next change of the table would wait for it for good.)
 * Without the library the parent goes on as if nothing happened.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "core.h"

static size_t ps;

static void
scenario(void *arg)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_munmap, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps), status;
	char *a, *b, *c;
	pid_t pid;

	(void)arg;
	a = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	b = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	pid = vfork();
	if (pid == 0) {
		/* Raw: the library's prctl and syscall are not for a vfork
		 * child's own filter. */
		if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    core_raw_seccomp(&prog) != 0)
			_exit(77);
		munmap(a, ps);
		_exit(0);
	}
	NSBT_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "vfork: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("no seccomp filter could be installed in the vfork child");
	nsbt_expect_signal(status, SIGSYS, "the vfork child killed in its munmap");
	NSBT_CHECK(munmap(b, ps) == 0, "munmap: %s", strerror(errno));
	c = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	core_truncate(fd, 0);
	NSBT_CHECK(*(volatile char *)c == 0, "a rescued page reads non-zero");
	printf("ok: the parent of a vfork child killed in a mapping call still protects\n");
}

int
main(void)
{
	char err[4096];
	int status;

	core_require_library();
	ps = nsbt_page();
#if !defined(__x86_64__) && !defined(__aarch64__)
	nsbt_skip("the raw seccomp call is written for x86_64 and aarch64 only");
#endif
	status = core_run_watched(scenario, NULL, nsbt_scaled(30), NULL,
				  "a vfork child killed holding the table lock", err, sizeof(err));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 77;
	nsbt_expect_exit(status, 0, "a vfork child killed holding the table lock");
	core_expect_quiet(err, "vforkdeath");
	printf("ok: vforkdeath\n");
	return 0;
}
