/* SPDX-License-Identifier: MIT */
/*
 * userfaultfd in SIGBUS mode (issue 19).  A program registers a protected
 * shared mapping of a memfd, and of a /dev/shm file, with userfaultfd and
 * UFFD_FEATURE_SIGBUS (post-copy migration, lazy restore and garbage
 * collectors do this): every missing page raises SIGBUS/BUS_ADRERR inside
 * the file's size.  That fault is the program's: its handler must run
 * (it fills the page with UFFDIO_COPY), and its write must reach the
 * file - not a private page of the library's.
 *
 * Needs userfaultfd (root, vm.unprivileged_userfaultfd=1, or else one for
 * user-mode faults only: Linux 5.11) and shared memory support in it;
 * skipped with the reason otherwise.
 */
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

#include "core.h"

static size_t ps;
static int uffd = -1;
static volatile int handled;
static char *page_buf;

static void
handler(int sig, siginfo_t *si, void *uc)
{
	struct uffdio_copy copy;

	(void)sig;
	(void)uc;
	if (si->si_code != BUS_ADRERR)
		_exit(5);
	handled++;
	/* The program fills the missing page, and the access runs again. */
	copy.dst = (uintptr_t)si->si_addr & ~(uintptr_t)(ps - 1);
	copy.src = (uintptr_t)page_buf;
	copy.len = ps;
	copy.mode = 0;
	copy.copy = 0;
	if (ioctl(uffd, UFFDIO_COPY, &copy) < 0 && errno != EEXIST)
		_exit(6);
}

static void
uffd_child(void *arg)
{
	bool shm = arg != NULL;
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_SIGBUS };
	struct uffdio_register reg;
	struct sigaction sa;
	struct nosigbus_stats before;
	char path[64], got;
	volatile char *p;
	int fd;

	page_buf = core_map(NULL, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(page_buf, 'U', ps);
	if (shm) {
		snprintf(path, sizeof(path), "/dev/shm/core-uffd-%d", (int)getpid());
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		NSBT_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
		unlink(path);
	} else {
		fd = memfd_create("core-uffd", MFD_CLOEXEC);
		NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	}
	core_truncate(fd, (off_t)(4 * ps));
	p = core_map(NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);

	uffd = core_userfaultfd();
	if (uffd < 0)
		nsbt_skip("userfaultfd: %s (needs root, vm.unprivileged_userfaultfd=1, or "
			  "UFFD_USER_MODE_ONLY: Linux 5.11)", strerror(errno));
	if (ioctl(uffd, UFFDIO_API, &api) < 0)
		nsbt_skip("UFFDIO_API with UFFD_FEATURE_SIGBUS: %s", strerror(errno));
	reg.range.start = (uintptr_t)p;
	reg.range.len = 4 * ps;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		nsbt_skip("UFFDIO_REGISTER of a shared %s mapping: %s", shm ? "/dev/shm" : "memfd",
			  strerror(errno));

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGBUS, &sa, NULL) == 0, "sigaction: %s", strerror(errno));

	before = core_stats();
	p[ps + 10] = 'w';		/* a write into a missing page */
	got = p[2 * ps + 3];		/* a read of another */
	NSBT_CHECK(handled == 2, "%s: the program's handler ran %d times, expected 2 (the "
		   "library rescued a fault inside the file's size)", shm ? "/dev/shm" : "memfd",
		   handled);
	NSBT_CHECK(got == 'U', "%s: the read did not see the page the program filled",
		   shm ? "/dev/shm" : "memfd");
	NSBT_CHECK(core_stats().rescues == before.rescues, "%s: the library rescued",
		   shm ? "/dev/shm" : "memfd");
	NSBT_CHECK(pread(fd, &got, 1, (off_t)(ps + 10)) == 1 && got == 'w',
		   "%s: the write did not reach the file", shm ? "/dev/shm" : "memfd");
	/* Past the end it is the library's again. */
	core_truncate(fd, (off_t)ps);
	(void)p[3 * ps];
	NSBT_CHECK(core_stats().rescues == before.rescues + 1 && handled == 2,
		   "%s: a fault past the end was not rescued", shm ? "/dev/shm" : "memfd");
	printf("ok: userfaultfd SIGBUS mode on a %s: the program's handler ran, its write "
	       "reached the file; past the end, the library rescued\n",
	       shm ? "/dev/shm file" : "memfd");
}

int
main(void)
{
	int status;

	ps = nsbt_page();
	core_require_library();
	for (int shm = 0; shm < 2; shm++) {
		status = nsbt_run(uffd_child, shm ? (void *)1 : NULL);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			return 77;
		nsbt_expect_exit(status, 0, shm ? "userfaultfd on /dev/shm" : "userfaultfd on a memfd");
	}
	return 0;
}
