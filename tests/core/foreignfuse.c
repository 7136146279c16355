/* SPDX-License-Identifier: MIT */
/*
 * A file another process handed over that no stat describes (issue 37).
 *
 * A FUSE file system mounted by root without allow_other refuses every
 * fstat and statx of another user's (fuse's per-process permission check
 * on getattr: EACCES), while a mapping and reads through a descriptor
 * already open work - and so do its faults.  This test mounts
 * tests/fs's nsb-fs-fuse (its file: FS_FUSE_PAGES pages, reads of pages
 * [FS_FUSE_BAD_FIRST, FS_FUSE_BAD_END) fail with EIO), and hands the
 * file's descriptor over a Unix socket (SCM_RIGHTS) to a child that drops
 * to uid 65534 and executes this program again (the library, linked,
 * reads its settings there).  The child maps more pages than the file
 * has, reads page 0, a page that fails, a page past the end and page 0
 * again, and the failing page in a second (private) mapping of the same
 * descriptor.  The peer's file: under the default (NOSIGBUS_ERRORS=peer) and
 * zero both faults read zeros, counted unverified (the size cannot be
 * learnt), the log names the sender; under pass the fault goes to the
 * program (SIGBUS), as without the library.  As under a seccomp filter
 * (NSB_TEST_SECCOMP=filtered: fstat alone) as by default.  Before the fix the default
 * died of SIGBUS too: the library protected nothing of such a file.
 *
 * Needs root (to mount, and to become another user) and /dev/fuse; skips
 * and says why without them.  Each scenario in a child, killed (SIGKILL)
 * if it has not ended after 60 seconds (scaled); its stderr is checked.
 *
 * Usage: core-foreignfuse NSB-FS-FUSE  (the parent)
 *        core-foreignfuse child SOCKET  (the receiver, re-executed)
 */
#include "foreign.h"

#define LEN_PAGES (FS_FUSE_PAGES + 16)	/* the mapping: past the end too */
#define BAD_PAGE (FS_FUSE_BAD_FIRST + 8)
#define PAST_PAGE (FS_FUSE_PAGES + 6)
#define SENDER "nsb-fuse-peer"

static size_t ps;

/* ---- the receiver (uid 65534) ------------------------------------------ */

static void
expect_page(const volatile unsigned char *p, size_t page, unsigned char v)
{
	printf("reading page %zu\n", page);
	fflush(stdout);
	for (size_t i = 0; i < ps; i++)
		NSBT_CHECK(p[page * ps + i] == v, "page %zu byte %zu is %#x, expected %#x", page,
			   i, p[page * ps + i], v);
	printf("page %zu reads %02x*%zu\n", page, v, ps);
}

static int
receiver(int s)
{
	const volatile unsigned char *p, *q;
	int fd;

	core_no_core();
	NSBT_CHECK(foreign_receive(s, &fd, 1) == 1, "no descriptor arrived");
	if (!foreign_unstattable(fd))
		return 77;
	p = core_map(NULL, LEN_PAGES * ps, PROT_READ, MAP_SHARED, fd, 0);
	/* The same descriptor mapped again is the peer's file too. */
	q = core_map(NULL, LEN_PAGES * ps, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);	/* as a compositor does, once mapped */
	expect_page(p, 0, fs_tag(0));
	expect_page(p, BAD_PAGE, 0);
	expect_page(p, PAST_PAGE, 0);
	expect_page(p, 0, fs_tag(0));
	expect_page(q, BAD_PAGE, 0);
	foreign_expect_three();
	return 0;
}

/* ---- the parent (root) -------------------------------------------------- */

/* Runs one scenario; its status, and its stderr in err. */
static int
scenario(const char *self, const char *name, const char *const *env, char *err, size_t errsz)
{
	struct foreign_run r;

	foreign_begin(&r, SOCK_STREAM, self, env, NULL);
	NSBT_CHECK(nsbt_send_fd(r.sock, r.fd, 'F', 0) == 1, "sendmsg: %s", strerror(errno));
	return foreign_end(&r, name, err, errsz);
}

int
main(int argc, char **argv)
{
	static const char *const dflt[] = { NULL };
	static const char *const peer[] = { "NOSIGBUS_ERRORS=peer", NULL };
	static const char *const zero[] = { "NOSIGBUS_ERRORS=zero", NULL };
	static const char *const pass[] = { "NOSIGBUS_ERRORS=pass", NULL };
	static const char *const logged[] = { "NOSIGBUS_LOG=1", NULL };
	static const char *const filtered[] = { "NSB_TEST_SECCOMP=filtered", NULL };
	char err[8192], self[4096];
	int status;

	ps = nsbt_page();
	if (argc == 3 && !strcmp(argv[1], "child"))
		return receiver(atoi(argv[2]));
	/* The sender the log names (SO_PEERCRED of a socket pair: its maker). */
	prctl(PR_SET_NAME, SENDER);
	foreign_setup(argc, argv, "foreignfuse", self, sizeof(self));

	status = scenario(self, "default", dflt, err, sizeof(err));
	nsbt_expect_exit(status, 0, "default: a received FUSE file no stat describes");
	NSBT_CHECK(!err[0], "default: stderr not empty:\n%s", err);

	status = scenario(self, "NOSIGBUS_ERRORS=peer", peer, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NOSIGBUS_ERRORS=peer");
	NSBT_CHECK(!err[0], "peer: stderr not empty:\n%s", err);

	status = scenario(self, "NOSIGBUS_ERRORS=zero", zero, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NOSIGBUS_ERRORS=zero");
	NSBT_CHECK(!err[0], "zero: stderr not empty:\n%s", err);

	/* As under a seccomp filter (fstat alone, sandbox.c). */
	status = scenario(self, "NSB_TEST_SECCOMP=filtered", filtered, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NSB_TEST_SECCOMP=filtered");
	NSBT_CHECK(!err[0], "filtered: stderr not empty:\n%s", err);

	/* Pass: every error to the program; without the size every fault
	 * may be one, so the first (the failing page) kills it. */
	status = scenario(self, "NOSIGBUS_ERRORS=pass", pass, err, sizeof(err));
	nsbt_expect_signal(status, SIGBUS, "NOSIGBUS_ERRORS=pass");
	NSBT_CHECK(!err[0], "pass: stderr not empty:\n%s", err);

	status = scenario(self, "NOSIGBUS_LOG=1", logged, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NOSIGBUS_LOG=1");
	NSBT_CHECK(strstr(err, nsbt_fmt("in %s from " SENDER "[%d]", foreign_data, (int)getpid())) &&
		   strstr(err, "unverified)"),
		   "NOSIGBUS_LOG=1: no rescue line naming the file, the sender and "
		   "unverified:\n%s", err);
	printf("ok: the log: %s", err);
	return 0;
}
