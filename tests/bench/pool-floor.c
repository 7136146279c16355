/* SPDX-License-Identifier: MIT */
/*
 * libnsb-pool-floor - the exact floor of a compositor's received pool, as
 * a preload of its own, for tests/bench/weston-pools --preload: the system
 * calls libnosigbus makes on that path (strace, default policy), with its
 * arguments, and nothing else (no records, no decision, no protection).
 * What it makes is chosen by NSB_POOL_FLOOR:
 *   recv    statx of each descriptor a recvmsg brings (the arrival's
 *           identity)
 *   decide  recv, and at the mmap of the last one a statx of it (the
 *           decision, on the program's descriptor)
 *   dup     recv, and at that mmap F_DUPFD_CLOEXEC, statx, close: the
 *           decision through a second descriptor that shares the
 *           program's open file (not O_PATH: not one the library may keep)
 *   opath   recv, and at that mmap open_tree, statx, close: the decision
 *           through an O_PATH descriptor, not kept
 *   keep    (the default) the library's eight: recv; open_tree, statx,
 *           F_DUPFD_CLOEXEC to a high number, close at the mmap; F_GETFL,
 *           fstat, close of the kept one at the munmap
 * One pool at a time (a client that makes a new pool per buffer): the
 * last number received, the last mapping of it.  Not thread-safe, not
 * for anything but the benchmark.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#define STATX_RECV (0x0001U | 0x0100U | 0x0800U)	/* TYPE | INO | BTIME */
#define STATX_MAP (0x07ffU | 0x4000U | 0x0800U)	/* BASIC_STATS | MNT_ID_UNIQUE | BTIME */

enum level { RECV, DECIDE, DUP, OPATH, KEEP };

static int hint = -1, kept = -1;
static void *kept_at;

static enum level
level(void)
{
	static int lv = -1;

	if (lv < 0) {
		const char *e = getenv("NSB_POOL_FLOOR");

		lv = !e ? KEEP : !strcmp(e, "recv") ? RECV : !strcmp(e, "decide") ? DECIDE
		   : !strcmp(e, "dup") ? DUP : !strcmp(e, "opath") ? OPATH : KEEP;
	}
	return (enum level)lv;
}

static void
stx(int fd, unsigned mask)
{
	struct statx sx;

	syscall(SYS_statx, fd, "", AT_EMPTY_PATH, mask, &sx);
}

ssize_t
recvmsg(int sock, struct msghdr *m, int flags)
{
	ssize_t r = syscall(SYS_recvmsg, sock, m, flags);

	if (r < 0 || !m->msg_controllen)
		return r;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			memcpy(&hint, CMSG_DATA(c), sizeof(hint));
			stx(hint, STATX_RECV);
		}
	return r;
}

/* Under both names, whatever _FILE_OFFSET_BITS makes <sys/mman.h> call
 * them (off_t is 64 bits on the 64-bit machines this runs on). */
void *floor_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__asm__("mmap");
void *floor_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__asm__("mmap64");

void *
floor_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	int pfd = -1;
	void *r;

	if (fd >= 0 && fd == hint) {
		hint = -1;
		switch (level()) {
		case RECV:
			break;
		case DECIDE:
			stx(fd, STATX_MAP);
			break;
		case DUP:
		case OPATH:
			pfd = level() == DUP ? (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0)
					     : (int)syscall(SYS_open_tree, fd, "", AT_EMPTY_PATH | O_CLOEXEC);
			stx(pfd, STATX_MAP);
			syscall(SYS_close, pfd);
			pfd = -1;
			break;
		case KEEP:
			pfd = (int)syscall(SYS_open_tree, fd, "", AT_EMPTY_PATH | O_CLOEXEC);
			stx(pfd, STATX_MAP);
			break;
		}
	}
	r = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (pfd >= 0) {
		kept = (int)syscall(SYS_fcntl, pfd, F_DUPFD_CLOEXEC, 1024 - 16);
		syscall(SYS_close, pfd);
		kept_at = r;
	}
	return r;
}

void *
floor_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return floor_mmap(addr, len, prot, flags, fd, off);
}

int
munmap(void *addr, size_t len)
{
	int r = (int)syscall(SYS_munmap, addr, len);

	if (addr == kept_at && kept >= 0) {
		struct stat st;

		syscall(SYS_fcntl, kept, F_GETFL);
		syscall(SYS_fstat, kept, &st);
		syscall(SYS_close, kept);
		kept = -1;
		kept_at = NULL;
	}
	return r;
}
