/* SPDX-License-Identifier: MIT */
/*
 * Many received files that no stat describes, in one message (a hostile
 * peer; issue 37's FUSE file, see core-foreignfuse).
 *
 * The peer mounts a FUSE file system of its own without allow_other: the
 * receiver's fstat of its file fails (EACCES), and the only evidence that
 * a descriptor is the peer's is that it arrived over SCM_RIGHTS
 * (received.c keeps its number).  libwayland reads up to 28 descriptors
 * with one recvmsg, and a compositor maps each pool when it dispatches
 * the request that brought it, after the whole batch arrived.  The peer
 * sends COUNT descriptors of its file in one message; the receiver maps
 * the first, the middle and the last, then reads a page whose read fails
 * in each: every one is rescued (zeros, unverified).  A second scenario
 * sends them one message each before the receiver maps any (a peer
 * that writes faster than the compositor dispatches).  Before the fix
 * the library kept the numbers of the last 8 such descriptors only: the
 * first mapping was not protected, and its fault killed the receiver
 * (SIGBUS).
 *
 * Needs root (to mount, and to become another user) and /dev/fuse; skips
 * and says why without them.  Each scenario in a child, killed (SIGKILL)
 * if it has not ended after 60 seconds (scaled); its stderr is checked.
 *
 * Usage: core-foreignmany NSB-FS-FUSE  (the parent)
 *        core-foreignmany child SOCKET MESSAGES  (the receiver, re-executed)
 */
#include "foreign.h"

#define COUNT FOREIGN_MOST	/* libwayland's most per message */
#define LEN_PAGES FS_FUSE_PAGES
#define BAD_PAGE (FS_FUSE_BAD_FIRST + 1)

static size_t ps;

/* ---- the receiver (uid 65534) ------------------------------------------ */

static int
receiver(int s, int messages)
{
	static const int which[] = { 0, COUNT / 2, COUNT - 1 };
	const volatile unsigned char *p[3];
	int fds[COUNT], n = 0;

	core_no_core();
	for (int m = 0; m < messages; m++)
		n += foreign_receive(s, fds + n, COUNT - n);
	NSBT_CHECK(n == COUNT, "%d descriptors arrived, expected %d", n, COUNT);
	if (!foreign_unstattable(fds[0]))
		return 77;
	/* Mapped in the order the requests are dispatched, each descriptor
	 * closed once mapped, as a compositor does. */
	for (int i = 0; i < 3; i++) {
		p[i] = core_map(NULL, LEN_PAGES * ps, PROT_READ, MAP_SHARED, fds[which[i]], 0);
		close(fds[which[i]]);
	}
	for (int i = 0; i < 3; i++) {
		printf("descriptor %d of %d: reading page %d\n", which[i] + 1, COUNT, BAD_PAGE);
		fflush(stdout);
		for (size_t b = 0; b < ps; b++)
			NSBT_CHECK(p[i][BAD_PAGE * ps + b] == 0, "byte %zu is %#x, expected 0", b,
				   p[i][BAD_PAGE * ps + b]);
		NSBT_CHECK(p[i][0] == fs_tag(0), "page 0 reads %#x", p[i][0]);
	}
	foreign_expect_three();
	return 0;
}

/* ---- the parent (root) -------------------------------------------------- */

/* n copies of fd in one message. */
static void
send_fds(int s, int fd, int n)
{
	char cbuf[CMSG_SPACE(COUNT * sizeof(int))] = { 0 }, byte = 'F';
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	for (int i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
	NSBT_CHECK(sendmsg(s, &msg, 0) == 1, "sendmsg: %s", strerror(errno));
}

static void
scenario(const char *self, const char *name, int messages)
{
	static const char *const env[] = { NULL };
	struct foreign_run r;
	char err[8192], msgs[16];
	int status;

	snprintf(msgs, sizeof(msgs), "%d", messages);
	/* SOCK_SEQPACKET: one message a recvmsg, as sent. */
	foreign_begin(&r, SOCK_SEQPACKET, self, env, msgs);
	for (int m = 0; m < messages; m++)
		send_fds(r.sock, r.fd, COUNT / messages);
	status = foreign_end(&r, name, err, sizeof(err));
	nsbt_expect_exit(status, 0, nsbt_fmt("%s: every received FUSE descriptor protected", name));
	NSBT_CHECK(!err[0], "%s: stderr not empty:\n%s", name, err);
}

int
main(int argc, char **argv)
{
	char self[4096];

	ps = nsbt_page();
	if (argc == 4 && !strcmp(argv[1], "child"))
		return receiver(atoi(argv[2]), atoi(argv[3]));
	foreign_setup(argc, argv, "foreignmany", self, sizeof(self));
	scenario(self, "one message", 1);
	scenario(self, "one a message", COUNT);
	return 0;
}
