/* SPDX-License-Identifier: MIT */
/*
 * The library's memory never sits where the program may take its own
 * addresses back (memory.c).  A program frees a range, does something
 * that makes the library allocate, maps the range back with MAP_FIXED
 * (stress-ng does), fills it, and does more of the same: its memory must
 * keep what it wrote and stay mapped.  Both allocations below were once
 * plain mmap(NULL) calls, which the kernel put in the freed range:
 *  - received: the first regular file received over SCM_RIGHTS makes the
 *    table of received files (later receives wrote into the program's
 *    memory);
 *  - account: a protected mapping of more than 64 MiB has an account of
 *    more than half a page (its unmap unmapped the program's memory).
 * Each runs in a child, three times with fresh addresses.
 */
#include <sys/socket.h>

#include "core.h"

static void
send_fd(int sock, int fd)
{
	char c = 'x';
	struct iovec io = { &c, 1 };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
			      .msg_controllen = sizeof(u.b) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&msg);

	memset(&u, 0, sizeof(u));
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	NSBT_CHECK(sendmsg(sock, &msg, 0) == 1, "sendmsg: %s", strerror(errno));
}

static int
recv_fd(int sock)
{
	char c;
	struct iovec io = { &c, 1 };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
			      .msg_controllen = sizeof(u.b) };
	int fd;

	NSBT_CHECK(recvmsg(sock, &msg, 0) == 1 && CMSG_FIRSTHDR(&msg), "recvmsg: %s",
		   strerror(errno));
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
	return fd;
}

/* What makes the library allocate while the program's range is free:
 * the first regular file received (a disk file), or a protected mapping
 * of 512 MiB (a 16 KiB account), made here and unmapped after the program
 * took its range back (the account is released then). */
static char *
library_allocates(bool account, int sock[2], int round, int *mfd)
{
	size_t big = (size_t)512 << 20;
	int fd;

	if (account) {
		/* A mapping may reach past its file's end: one page of file. */
		*mfd = nsbt_file(NSBT_MEMFD, nsbt_page());
		return core_map(NULL, big, PROT_READ, MAP_SHARED, *mfd, 0);
	}
	fd = nsbt_file(round ? NSBT_MEMFD : NSBT_DISK, nsbt_page());
	send_fd(sock[0], fd);
	close(recv_fd(sock[1]));
	close(fd);
	return NULL;
}

static void
reclaim_child(void *arg)
{
	bool account = *(bool *)arg;
	/* The size the library asks for (a 16 KiB table; an account of 16
	 * KiB and a page): the range just freed is then where it lands. */
	size_t len = account ? 3 * nsbt_page() : 16384, big = (size_t)512 << 20;
	const char *what = account ? "a big mapping's account" : "the table of received files";
	unsigned char vec[16384 / 4096 + 4];
	int sock[2], mfd = -1;
	char *p, *q, *m;

	NSBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sock) == 0, "socketpair");
	p = core_map(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(munmap(p, len) == 0, "munmap");
	m = library_allocates(account, sock, 0, &mfd);
	q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	NSBT_CHECK(q == p, "mmap MAP_FIXED: %s", strerror(errno));
	memset(p, 0x5a, len);
	if (m) {
		NSBT_CHECK(munmap(m, big) == 0, "munmap: %s", strerror(errno));
		close(mfd);
	}
	for (int i = 1; i < 20; i++) {
		m = library_allocates(account, sock, i, &mfd);
		if (m) {
			NSBT_CHECK(munmap(m, big) == 0, "munmap: %s", strerror(errno));
			close(mfd);
		}
	}
	NSBT_CHECK(mincore(p, len, vec) == 0, "%s: the program's memory is no longer mapped", what);
	for (size_t i = 0; i < len; i++)
		NSBT_CHECK((unsigned char)p[i] == 0x5a,
			   "%s: the program's memory changed at offset %zu (%#x)", what, i,
			   (unsigned char)p[i]);
	printf("ok: %s: the program took its freed range back and kept it\n", what);
}

int
main(int argc, char **argv)
{
	int failed = 0;

	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "shm");
	for (int round = 0; round < 3; round++)
		for (int k = 0; k < 2; k++) {
			bool account = k;
			int status = nsbt_run(reclaim_child, &account);

			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "FAIL: %s: %s\n", account ? "account" : "received",
					nsbt_status_str(status));
				failed++;
			}
		}
	return failed ? 1 : 0;
}
