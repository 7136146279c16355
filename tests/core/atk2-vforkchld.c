/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: the parent's SIGCHLD handler maps a memfd, where its vfork
 * child died holding the library's table lock.
 *
 * The parent takes back what a dead vfork child left in vfork's assembly
 * after the clone returns (process.c, nsb_vfork_back).  But the child's
 * death queues SIGCHLD to the parent, delivered as the clone returns to
 * user space: before that assembly runs.  A handler that maps there finds
 * the table lock holding its own thread's number (the child's), and is
 * taken for a call nested in a handler that interrupted the lock's
 * holder.
 *
 * The test, in a child of its own with a watchdog, twice: the vfork
 * child killed by a filter of its own (raw prctl and seccomp) at its
 * munmap of a protected page, holding the lock; and, as the control, a
 * child that exits at once.  The parent's SIGCHLD handler maps a one-page
 * memfd (MAP_SHARED, protected by default); after vfork the parent
 * truncates that file and reads the page.  Without the library's
 * protection that read dies of SIGBUS.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "core.h"

static size_t ps;
static int hfd = -1;
static void *volatile hq;

static void
on_chld(int sig)
{
	void *q;

	(void)sig;
	if (hq)
		return;
	q = mmap(NULL, ps, PROT_READ, MAP_SHARED, hfd, 0);
	if (q != MAP_FAILED)
		hq = q;
}

/* The vfork child (not inlined into vfork's caller). */
static __attribute__((noinline)) void
child(bool die, void *a)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)SYS_munmap, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (!die)
		_exit(0);
	/* Raw: the library is not told of this filter. */
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || core_raw_seccomp(&prog) != 0)
		_exit(70);
	munmap(a, ps);	/* killed here, holding the table lock */
	_exit(71);
}

static void
body(void *arg)
{
	bool die = arg != NULL;
	struct sigaction sa;
	void *a;
	int fd, status;
	pid_t c;

	ps = nsbt_page();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGCHLD, &sa, NULL) == 0, "sigaction");
	fd = memfd_create("vforkchld", MFD_CLOEXEC);
	hfd = memfd_create("vforkchld-handler", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0 && hfd >= 0 && ftruncate(fd, (off_t)ps) == 0 &&
			   ftruncate(hfd, (off_t)ps) == 0,
		   "memfd: %s", strerror(errno));
	a = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);
	NSBT_CHECK(a != MAP_FAILED, "mmap: %s", strerror(errno));
	c = vfork();
	if (c == 0)
		child(die, a);
	NSBT_CHECK(c > 0, "vfork: %s", strerror(errno));
	NSBT_CHECK(waitpid(c, &status, 0) == c, "waitpid: %s", strerror(errno));
	NSBT_CHECK(die ? WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS
		       : WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "the vfork child: %s", nsbt_status_str(status));
	NSBT_CHECK(hq != NULL, "the SIGCHLD handler's mapping was not made");
	NSBT_CHECK(ftruncate(hfd, 0) == 0, "ftruncate: %s", strerror(errno));
	(void)*(volatile const char *)hq;	/* SIGBUS where not protected */
	printf("the handler's mapping read past its file's end (%s)\n",
	       die ? "child killed holding the lock" : "child exited");
	fflush(NULL);
	_exit(0);
}

int
main(void)
{
	char err[16384];
	int status;

	core_require_library();
	for (int die = 0; die < 2; die++) {
		const char *what = die ? "SIGCHLD handler after a vfork child's death in the library"
				       : "SIGCHLD handler after a vfork child's exit";

		status = core_run_watched(body, die ? (void *)1 : NULL, 60, NULL, what, err, sizeof(err));
		nsbt_expect_exit(status, 0, what);
		core_expect_quiet(err, what);
	}
	printf("ok\n");
	return 0;
}
