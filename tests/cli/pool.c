/* SPDX-License-Identifier: MIT */
/*
 * nsb-cli-pool - a compositor's pool path, as libwayland-server runs it
 * for a client that makes a new wl_shm pool per buffer: a memfd arrives
 * (recvmsg, SCM_RIGHTS), is mapped shared read-write, its descriptor
 * closed at once, and the mapping unmapped when the pool goes.  The
 * sender is this process too (a socketpair): strace shows one process.
 *
 * Not linked with libnosigbus: it only gets it through LD_PRELOAD.
 *
 * Usage: nsb-cli-pool CYCLES [full]
 * With "full", before the cycles: a file on disk is mapped (the library
 * reads whether a seccomp filter is in force), then a memfd is mapped
 * (and unmapped) with every descriptor number taken (RLIMIT_NOFILE
 * lowered to 256 for it, then put back): the first memfd the library
 * decides on comes when it can open nothing.
 * Each cycle begins and ends with a getppid() call, a marker for the
 * strace log (syscalls.bats counts the calls between two).  Prints
 * "unique-mount-ids yes|no": whether statx gives unique mount IDs here
 * (Linux 6.8), which the library's decision relies on to need one call.
 * Exit 0, or 1 with a message on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x4000U
#endif

static int
fail(const char *what)
{
	fprintf(stderr, "nsb-cli-pool: %s: %s\n", what, strerror(errno));
	return 1;
}

int
main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 3, sv[2];
	size_t len = 4 * (size_t)sysconf(_SC_PAGESIZE);
	struct statx sx;
	int probe;

	probe = memfd_create("nsb-cli-pool-probe", MFD_CLOEXEC);
	if (probe < 0)
		return fail("memfd_create");
	printf("unique-mount-ids %s\n",
	       statx(probe, "", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, &sx) == 0 &&
	       (sx.stx_mask & STATX_MNT_ID_UNIQUE) ? "yes" : "no");
	fflush(stdout);
	close(probe);
	if (argc > 2 && strcmp(argv[2], "full") == 0) {
		static int fillers[4096];
		struct rlimit rl, low;
		int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), mfd, n = 0;
		void *p;

		if (exe < 0)
			return fail("open /proc/self/exe");
		p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, exe, 0);
		if (p == MAP_FAILED)
			return fail("mmap /proc/self/exe");
		munmap(p, len);
		close(exe);
		mfd = memfd_create("nsb-cli-pool-full", MFD_CLOEXEC);
		if (mfd < 0 || ftruncate(mfd, (off_t)len) != 0)
			return fail("memfd");
		if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
			return fail("getrlimit");
		low = rl;
		low.rlim_cur = 256;
		if (setrlimit(RLIMIT_NOFILE, &low) != 0)
			return fail("setrlimit");
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (null < 0)
			return fail("open /dev/null");
		while (n < 4096 && (fillers[n] = dup(null)) >= 0)
			n++;
		if (n == 4096 || errno != EMFILE)
			return fail("taking every number");
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
		if (p == MAP_FAILED)
			return fail("mmap with every number taken");
		munmap(p, len);
		while (n > 0)
			close(fillers[--n]);
		close(null);
		close(mfd);
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			return fail("setrlimit back");
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return fail("socketpair");
	for (int i = 0; i < cycles; i++) {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		char c = 'p';
		struct iovec iov = { &c, 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
		struct cmsghdr *cm;
		int fd = memfd_create("nsb-cli-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		void *p;

		if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
			return fail("memfd");
		memset(&u, 0, sizeof(u));
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
		if (sendmsg(sv[0], &m, 0) != 1)
			return fail("sendmsg");
		close(fd);
		syscall(SYS_getppid);
		/* The compositor's side. */
		memset(&u, 0, sizeof(u));
		m.msg_controllen = sizeof(u.buf);
		if (recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC) != 1 || !(cm = CMSG_FIRSTHDR(&m)) ||
		    cm->cmsg_type != SCM_RIGHTS)
			return fail("recvmsg");
		memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			return fail("mmap");
		close(fd);
		((volatile char *)p)[0] = 1;
		if (munmap(p, len) != 0)
			return fail("munmap");
		syscall(SYS_getppid);
	}
	return 0;
}
