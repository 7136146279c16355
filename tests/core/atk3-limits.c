/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: every descriptor number taken (RLIMIT_NOFILE at the edge)
 * while the library decides about a received file and rescues.  A memfd
 * is handed over a Unix socket to a process whose every number but one
 * is taken: the received descriptor takes the last.  Then, with no
 * number free for the library's own descriptors (the O_PATH one of the
 * decision, the maps', the zero file): the mapping of the received file
 * (default policy: protected), a truncation by the peer, and reads past
 * the new end must all go as with numbers to spare: rescued with zeros,
 * the program's errno as it was around each call and each rescue, no
 * line from the library, and the program's next descriptor the number
 * the kernel would give it.
 *
 * Runs under the default policy (a received memory file is protected
 * without MAP_NOSIGBUS); each run in a child with a watchdog, its stderr
 * captured.
 */
#include "core.h"

static int
recv_one(int sock)
{
	char c, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec io = { &c, 1 };
	struct msghdr msg = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	ssize_t n;
	int fd;

	errno = 4242;
	n = recvmsg(sock, &msg, 0);
	NSBT_CHECK(n == 1 && CMSG_FIRSTHDR(&msg) && !(msg.msg_flags & MSG_CTRUNC),
		   "recvmsg: %zd %s, flags %#x", n, strerror(errno), msg.msg_flags);
	NSBT_CHECK(errno == 4242, "recvmsg changed errno to %d (%s)", errno, strerror(errno));
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
	return fd;
}

static void
full_child(void *arg)
{
	size_t ps = nsbt_page(), n = 16;
	struct rlimit rl = { 64, 64 };
	int sv[2], fd, peer, last = -1, spare, got;
	struct nosigbus_stats st;
	char *p;

	(void)arg;
	NSBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s",
		   strerror(errno));
	fd = memfd_create("atk3-pool", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	core_truncate(fd, (off_t)(n * ps));
	NSBT_CHECK(nsbt_send_fd(sv[0], fd, 'x', 0) == 1, "sendmsg: %s", strerror(errno));
	/* The peer's own number: a descriptor of the same file (kept for
	 * the truncation), then every number below the limit but one. */
	peer = fd;
	NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	while ((spare = dup(0)) >= 0)
		last = spare;
	NSBT_CHECK(errno == EMFILE && last >= 0, "dup: %s", strerror(errno));
	close(last);
	got = recv_one(sv[1]);
	NSBT_CHECK(got == last, "the received descriptor is %d, the free number was %d", got, last);

	errno = 4343;
	p = mmap(NULL, n * ps, PROT_READ, MAP_SHARED, got, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(errno == 4343, "mmap changed errno to %d (%s)", errno, strerror(errno));
	core_truncate(peer, 0);
	for (size_t i = 1; i < n; i += 5) {
		errno = 4444;
		core_expect_bytes(p + i * ps, 0, ps, "a page past the end of the received file");
		NSBT_CHECK(errno == 4444, "a rescue changed errno to %d (%s)", errno, strerror(errno));
	}
	st = core_stats();
	NSBT_CHECK(st.rescues > 0, "no rescue counted");
	/* Still nothing free: the library took no number for good. */
	errno = 0;
	spare = dup(0);
	NSBT_CHECK(spare < 0 && errno == EMFILE, "dup gave %d (%s): a number was free", spare,
		   strerror(errno));
	close(got);
	spare = dup(0);
	NSBT_CHECK(spare == got, "after closing %d, dup gave %d", got, spare);
	printf("ok: every number taken: the received file protected, %llu rescues with zeros, "
	       "errno kept\n", (unsigned long long)st.rescues);
}

int
main(void)
{
	char err[8192];
	int st;

	core_require_library();
	st = core_run_watched(full_child, NULL, nsbt_scaled(45), NULL, "nofile", err, sizeof(err));
	core_expect_quiet(err, "nofile");
	nsbt_expect_exit(st, 0, "every descriptor number taken while receiving and rescuing");
	return 0;
}
