/* SPDX-License-Identifier: MIT */
/*
 * Results and errno: for every call the library does not act on, the
 * interposed mmap/munmap/mremap/mprotect/pkey_mprotect return what the
 * kernel returns for the same call made with syscall(2) directly, with the
 * same errno; a failed call records nothing; MAP_NOSIGBUS is stripped
 * before the kernel sees it (a seccomp filter proves it); and a rescue,
 * or a sleep that succeeds with an unreadable rem, leaves errno as it
 * found it.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "core.h"

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

static size_t ps;

struct res {
	bool failed;
	int err;
	long val;
};

static struct res
from_ptr(void *r, int err)
{
	struct res x = { r == MAP_FAILED, r == MAP_FAILED ? err : 0, (long)r };

	return x;
}

static struct res
from_int(long r, int err)
{
	struct res x = { r == -1, r == -1 ? err : 0, r };

	return x;
}

/* Sequenced: errno is read after the call, and only the call's own errno. */
#define CALL_INT(call) ({ errno = 0; long r_ = (long)(call); from_int(r_, errno); })
#define CALL_PTR(call) ({ errno = 0; void *r_ = (void *)(call); from_ptr(r_, errno); })

static const char *
res_str(struct res r)
{
	static char buf[2][64];
	static int i;

	i ^= 1;
	if (r.failed)
		snprintf(buf[i], sizeof(buf[i]), "-1/%s", strerrorname_np(r.err) ?
			 strerrorname_np(r.err) : "?");
	else
		snprintf(buf[i], sizeof(buf[i]), "success");
	return buf[i];
}

/*
 * The library's result must equal the kernel's; expect_err is what both
 * should be (0: success), so that the test also fails if both are wrong
 * in the same way (say, a probe that does not probe what it claims).
 */
static void
same(const char *what, struct res lib, struct res raw, int expect_err)
{
	if (lib.failed != raw.failed || lib.err != raw.err)
		nsbt_fail("%s: library gave %s, the kernel %s", what, res_str(lib),
			  res_str(raw));
	if (expect_err ? !raw.failed || raw.err != expect_err : raw.failed)
		nsbt_fail("%s: the kernel gave %s, expected %s (test assumption wrong)",
			  what, res_str(raw), expect_err ? strerrorname_np(expect_err) : "success");
	printf("ok: %s: %s, same as the kernel\n", what, res_str(lib));
}

static void *
raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void
unmap_if(struct res r, size_t len)
{
	if (!r.failed)
		munmap((void *)r.val, len);
}

/*
 * mmap(args) through the library, then with MAP_NOSIGBUS added (the
 * library acts on that one, but a failing call must still fail the same
 * way and record nothing), then raw.
 */
static void
mmap_case(const char *what, void *addr, size_t len, int prot, int flags, int fd,
	  off_t off, int expect_err)
{
	struct nosigbus_stats st0 = core_stats();
	struct res lib, flagged, raw;
	char name[160];

	errno = 0;
	lib = CALL_PTR(mmap(addr, len, prot, flags, fd, off));
	unmap_if(lib, len);
	errno = 0;
	raw = CALL_PTR(raw_mmap(addr, len, prot, flags, fd, off));
	unmap_if(raw, len);
	same(what, lib, raw, expect_err);

	errno = 0;
	flagged = CALL_PTR(mmap(addr, len, prot, flags | MAP_NOSIGBUS, fd, off));
	unmap_if(flagged, len);
	snprintf(name, sizeof(name), "%s with MAP_NOSIGBUS", what);
	same(name, flagged, raw, expect_err);
	if (expect_err)
		NSBT_CHECK(core_stats().mappings == st0.mappings,
			   "%s: a failed call added a record", name);
}

static void
mmap_cases(void)
{
	int memfd = nsbt_file(NSBT_MEMFD, 2 * ps);
	int tmpfd = nsbt_file(NSBT_TMPFS, 2 * ps);
	char path[64];
	int rofd, dirfd;
	char *existing = core_map(NULL, 2 * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *free_addr = core_free_range(4 * ps);
	/* A descriptor number nothing uses (a freed low one would be reused below). */
	int closed = 987;

	NSBT_CHECK(fcntl(closed, F_GETFD) == -1 && errno == EBADF, "fd %d is open", closed);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", tmpfd);
	rofd = open(path, O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(rofd >= 0, "reopen read-only: %s", strerror(errno));
	dirfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	NSBT_CHECK(dirfd >= 0, "open /: %s", strerror(errno));

	mmap_case("mmap zero length", NULL, 0, CORE_PROT_RW,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, EINVAL);
	mmap_case("mmap zero length of a file", NULL, 0, PROT_READ, MAP_PRIVATE, memfd, 0, EINVAL);
	mmap_case("mmap MAP_FIXED at an unaligned address", free_addr + 1, ps, PROT_READ,
		  MAP_PRIVATE | MAP_FIXED, memfd, 0, EINVAL);
	mmap_case("mmap neither MAP_SHARED nor MAP_PRIVATE", NULL, ps, PROT_READ,
		  MAP_ANONYMOUS, -1, 0, EINVAL);
	mmap_case("mmap bad mapping type 0xf", NULL, ps, PROT_READ,
		  0xf | MAP_ANONYMOUS, -1, 0, EINVAL);
	mmap_case("mmap closed fd", NULL, ps, PROT_READ, MAP_PRIVATE, closed, 0, EBADF);
	mmap_case("mmap fd -1 without MAP_ANONYMOUS", NULL, ps, PROT_READ, MAP_SHARED, -1, 0, EBADF);
	mmap_case("mmap MAP_FIXED_NOREPLACE over a mapping", existing, ps, PROT_READ,
		  MAP_PRIVATE | MAP_FIXED_NOREPLACE, memfd, 0, EEXIST);
	mmap_case("mmap unaligned offset", NULL, ps, PROT_READ, MAP_PRIVATE, memfd, 1, EINVAL);
	mmap_case("mmap huge length", NULL, SIZE_MAX & ~(ps - 1), PROT_READ,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, ENOMEM);
	mmap_case("mmap PROT_WRITE MAP_SHARED of a read-only fd", NULL, ps, CORE_PROT_RW,
		  MAP_SHARED, rofd, 0, EACCES);
	mmap_case("mmap MAP_SHARED_VALIDATE|MAP_SYNC of a memfd", NULL, ps, PROT_READ,
		  MAP_SHARED_VALIDATE | MAP_SYNC, memfd, 0, EOPNOTSUPP);
	mmap_case("mmap a directory", NULL, ps, PROT_READ, MAP_PRIVATE, dirfd, 0, ENODEV);
	mmap_case("mmap a plain anonymous mapping", NULL, ps, CORE_PROT_RW,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, 0);
	mmap_case("mmap MAP_FIXED over an existing mapping", existing, ps, PROT_READ,
		  MAP_PRIVATE | MAP_FIXED, memfd, 0, 0);
	close(rofd);
	close(dirfd);
	close(memfd);
	close(tmpfd);
}

static void
munmap_cases(void)
{
	char *m = core_map(NULL, 2 * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *gone = core_free_range(2 * ps);

	errno = 0;
	same("munmap unaligned address", CALL_INT(munmap(m + 1, ps)),
	     CALL_INT(syscall(SYS_munmap, m + 1, ps)), EINVAL);
	same("munmap zero length", CALL_INT(munmap(m, 0)),
	     CALL_INT(syscall(SYS_munmap, m, 0)), EINVAL);
	same("munmap length past the end of the address space",
	     CALL_INT(munmap(m, SIZE_MAX & ~(ps - 1))),
	     CALL_INT(syscall(SYS_munmap, m, SIZE_MAX & ~(ps - 1))), EINVAL);
	same("munmap of nothing", CALL_INT(munmap(gone, 2 * ps)),
	     CALL_INT(syscall(SYS_munmap, gone, 2 * ps)), 0);
	munmap(m, 2 * ps);
}

static void *
raw_mremap(void *old, size_t ol, size_t nl, int flags, void *new_addr)
{
	return (void *)syscall(SYS_mremap, old, ol, nl, flags, new_addr);
}

static void
mremap_cases(void)
{
	char *m = core_map(NULL, 2 * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *pair = core_map(NULL, 2 * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* Last: a mapping made after it could land in the hole. */
	char *gone = core_free_range(2 * ps);

	/* pair: two one-page mappings side by side, so the first cannot grow in place. */
	NSBT_CHECK(mprotect(pair + ps, ps, PROT_NONE) == 0, "mprotect");
	errno = 0;
	same("mremap unaligned old address", CALL_PTR(mremap(m + 1, ps, 2 * ps, 0)),
	     CALL_PTR(raw_mremap(m + 1, ps, 2 * ps, 0, NULL)), EINVAL);
	same("mremap bad flags (8)", CALL_PTR(mremap(m, ps, ps, 8)),
	     CALL_PTR(raw_mremap(m, ps, ps, 8, NULL)), EINVAL);
	same("mremap MREMAP_FIXED without MREMAP_MAYMOVE",
	     CALL_PTR(mremap(m, ps, ps, MREMAP_FIXED, gone)),
	     CALL_PTR(raw_mremap(m, ps, ps, MREMAP_FIXED, gone)), EINVAL);
	same("mremap new length 0", CALL_PTR(mremap(m, ps, 0, 0)),
	     CALL_PTR(raw_mremap(m, ps, 0, 0, NULL)), EINVAL);
	same("mremap of unmapped memory", CALL_PTR(mremap(gone, ps, 2 * ps, MREMAP_MAYMOVE)),
	     CALL_PTR(raw_mremap(gone, ps, 2 * ps, MREMAP_MAYMOVE, NULL)), EFAULT);
	same("mremap grow in place blocked", CALL_PTR(mremap(pair, ps, 2 * ps, 0)),
	     CALL_PTR(raw_mremap(pair, ps, 2 * ps, 0, NULL)), ENOMEM);
	same("mremap MREMAP_FIXED onto an unaligned address",
	     CALL_PTR(mremap(m, ps, ps, MREMAP_MAYMOVE | MREMAP_FIXED, gone + 1)),
	     CALL_PTR(raw_mremap(m, ps, ps, MREMAP_MAYMOVE | MREMAP_FIXED, gone + 1)),
	     EINVAL);
	same("mremap same size (nothing to do)", CALL_PTR(mremap(m, ps, ps, 0)),
	     CALL_PTR(raw_mremap(m, ps, ps, 0, NULL)), 0);
	munmap(m, 2 * ps);
	munmap(pair, 2 * ps);
}

static void
mprotect_cases(void)
{
	char *m = core_map(NULL, 2 * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *gone = core_free_range(2 * ps);

	errno = 0;
	same("mprotect unmapped range", CALL_INT(mprotect(gone, ps, PROT_READ)),
	     CALL_INT(syscall(SYS_mprotect, gone, ps, PROT_READ)), ENOMEM);
	{
		/* Three pages, the last one unmapped again. */
		char *part = core_map(NULL, 3 * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		NSBT_CHECK(munmap(part + 2 * ps, ps) == 0, "munmap");
		same("mprotect partly unmapped range", CALL_INT(mprotect(part, 3 * ps, PROT_READ)),
		     CALL_INT(syscall(SYS_mprotect, part, 3 * ps, PROT_READ)), ENOMEM);
		munmap(part, 2 * ps);
	}
	same("mprotect unaligned address", CALL_INT(mprotect(m + 1, ps, PROT_READ)),
	     CALL_INT(syscall(SYS_mprotect, m + 1, ps, PROT_READ)), EINVAL);
	same("mprotect bad protection bits", CALL_INT(mprotect(m, ps, 0x100)),
	     CALL_INT(syscall(SYS_mprotect, m, ps, 0x100)), EINVAL);
	same("mprotect zero length", CALL_INT(mprotect(m, 0, PROT_READ)),
	     CALL_INT(syscall(SYS_mprotect, m, 0, PROT_READ)), 0);
#ifdef SYS_pkey_mprotect
	/* Assumption checked: the kernel has the pkey calls (x86_64 from
	 * 4.9; arm64 only from 6.12, ENOSYS before).  Without them the
	 * library must give what glibc's pkey_mprotect gives: with key -1
	 * it is mprotect (glibc calls mprotect, whatever the kernel has),
	 * with another key the kernel's ENOSYS. */
	if (syscall(SYS_pkey_mprotect, m, ps, PROT_READ, -1) < 0 && errno == ENOSYS) {
		same("pkey_mprotect key -1 on a kernel without pkey calls",
		     CALL_INT(pkey_mprotect(m, ps, PROT_READ, -1)),
		     CALL_INT(syscall(SYS_mprotect, m, ps, PROT_READ)), 0);
		same("pkey_mprotect key 1 on a kernel without pkey calls",
		     CALL_INT(pkey_mprotect(m, ps, PROT_READ, 1)),
		     CALL_INT(syscall(SYS_pkey_mprotect, m, ps, PROT_READ, 1)), ENOSYS);
		printf("ok: this kernel has no pkey calls (ENOSYS: arm64 before 6.12): "
		       "the pkey cases not run\n");
	} else {
		same("pkey_mprotect unallocated pkey 1000",
		     CALL_INT(pkey_mprotect(m, ps, PROT_READ, 1000)),
		     CALL_INT(syscall(SYS_pkey_mprotect, m, ps, PROT_READ, 1000)), EINVAL);
		same("pkey_mprotect unmapped range",
		     CALL_INT(pkey_mprotect(gone, ps, PROT_READ, -1)),
		     CALL_INT(syscall(SYS_pkey_mprotect, gone, ps, PROT_READ, -1)), ENOMEM);
	}
#else
	printf("ok: no SYS_pkey_mprotect on this system, pkey cases not run\n");
#endif
	munmap(m, 2 * ps);
}

/* Failed calls on a protected mapping leave its record as it was. */
static void
failed_calls_on_protected_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, 3 * ps);
	char *p = core_map(NULL, 3 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	char *after = p + 3 * ps;
	char *blocker;

	(void)arg;
	/* Something right after p, so that p cannot grow in place. */
	blocker = mmap(after, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	core_truncate(fd, 0);
	errno = 0;
	NSBT_CHECK(mprotect(p, 3 * ps, 0x100) == -1 && errno == EINVAL,
		   "mprotect bad bits on a protected mapping: %s", strerror(errno));
	NSBT_CHECK(munmap(p + 1, ps) == -1 && errno == EINVAL,
		   "munmap unaligned inside a protected mapping: %s", strerror(errno));
	if (blocker == after) {
		NSBT_CHECK(mremap(p, 3 * ps, 4 * ps, 0) == MAP_FAILED && errno == ENOMEM,
			   "blocked mremap of a protected mapping: %s", strerror(errno));
	}
	NSBT_CHECK(mremap(p, 3 * ps, 3 * ps, MREMAP_FIXED, after) == MAP_FAILED && errno == EINVAL,
		   "MREMAP_FIXED without MAYMOVE on a protected mapping: %s", strerror(errno));
	/* Still protected, still writable, all three pages. */
	memset(p, 'a', 3 * ps);
	core_expect_bytes(p, 'a', 3 * ps, "protected mapping after failed calls");
	printf("ok: failed calls on a protected mapping fail like the kernel's and keep the record\n");
}

/* MAP_SHARED_VALIDATE rejects unknown flags: it only works if the flag is stripped. */
static void
shared_validate_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, 2 * ps);
	char *p;
	void *raw;

	(void)arg;
	errno = 0;
	raw = raw_mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED_VALIDATE | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(raw == MAP_FAILED && errno == EOPNOTSUPP,
		   "this kernel accepts MAP_NOSIGBUS with MAP_SHARED_VALIDATE (%s): "
		   "the check below proves nothing", raw == MAP_FAILED ? strerror(errno) : "mapped");
	printf("ok: the kernel rejects MAP_SHARED_VALIDATE|MAP_NOSIGBUS itself (EOPNOTSUPP)\n");
	p = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED_VALIDATE | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap(MAP_SHARED_VALIDATE|MAP_NOSIGBUS) under the library: %s",
		   strerror(errno));
	printf("ok: mmap(MAP_SHARED_VALIDATE|MAP_NOSIGBUS) succeeds under the library\n");
	core_truncate(fd, 0);
	core_expect_bytes(p, 0, 2 * ps, "MAP_SHARED_VALIDATE|MAP_NOSIGBUS mapping past EOF");
	printf("ok: and it is protected\n");
}

/*
 * A seccomp filter makes every mmap system call that carries 0x200000
 * fail with ENOTUNIQ (an errno nothing else produces here).  Then every
 * way of mapping with the flag, and the library's own rescue, must work.
 */
static void
seccomp_child(void *arg)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 3),
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
#else
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3]) + 4),
#endif
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_NOSIGBUS, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOTUNIQ),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps);
	char *p, *q, *r;

	(void)arg;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		printf("ok: seccomp filters unavailable (%s): flag stripping checked only "
		       "through MAP_SHARED_VALIDATE\n", strerror(errno));
		return;
	}
	errno = 0;
	NSBT_CHECK(raw_mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0) == MAP_FAILED &&
		   errno == ENOTUNIQ, "the seccomp filter does not catch the flag: %s",
		   strerror(errno));
	printf("ok: seccomp filter active: a raw mmap with 0x200000 fails with ENOTUNIQ\n");

	p = mmap(NULL, 4 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "MAP_PRIVATE|MAP_NOSIGBUS: %s", strerror(errno));
	q = mmap(NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(q != MAP_FAILED, "MAP_SHARED|MAP_NOSIGBUS: %s", strerror(errno));
	r = mmap64(NULL, ps, PROT_READ, MAP_SHARED_VALIDATE | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(r != MAP_FAILED, "mmap64 MAP_SHARED_VALIDATE|MAP_NOSIGBUS: %s", strerror(errno));
	NSBT_CHECK(mmap(r, ps, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS, fd, 0) == r,
		   "MAP_FIXED|MAP_NOSIGBUS: %s", strerror(errno));
	NSBT_CHECK(mmap(NULL, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NOSIGBUS,
			-1, 0) != MAP_FAILED, "MAP_ANONYMOUS|MAP_NOSIGBUS: %s", strerror(errno));
	errno = 0;
	NSBT_CHECK(mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, 9999, 0) == MAP_FAILED &&
		   errno == EBADF, "bad fd with MAP_NOSIGBUS: %s", strerror(errno));
	printf("ok: no mapping call passed 0x200000 to the kernel\n");

	/* The rescues and an mremap after them: the library's own mmap calls. */
	core_truncate(fd, 0);
	memset(p + ps, 'p', ps);
	memset(q + 2 * ps, 'q', ps);
	core_expect_bytes(p, 0, ps, "rescue under the seccomp filter");
	q = mremap(p, 4 * ps, 6 * ps, MREMAP_MAYMOVE);
	if (q == MAP_FAILED && errno == EFAULT) {
		/* Where a seccomp filter keeps the library from reading the
		 * maps (libnosigbus(7), "Sandboxes"), it cannot move a mapping
		 * its rescues split piece by piece: the kernel's own answer
		 * for several mappings. */
		core_expect_bytes(p + ps, 'p', ps, "after a refused mremap");
		printf("ok: rescues under the seccomp filter; mremap of the split mapping fails "
		       "with EFAULT there, as documented\n");
		return;
	}
	p = q;
	NSBT_CHECK(p != MAP_FAILED, "mremap after rescues: %s", strerror(errno));
	core_expect_bytes(p + ps, 'p', ps, "after mremap");
	core_expect_bytes(p + 5 * ps, 0, ps, "grown part after mremap");
	printf("ok: rescues and mremap after rescues never pass 0x200000 to the kernel\n");
}

/* errno is the program's: a rescue in between leaves it alone. */
static void
errno_rescue_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, 3 * ps);
	volatile char *p = core_map(NULL, 3 * ps, CORE_PROT_RW,
				    MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	static const int values[] = { EDOM, 0, ENOENT };
	char c;

	(void)arg;
	core_truncate(fd, 0);
	for (int i = 0; i < 3; i++) {
		errno = values[i];
		__asm__ __volatile__("" ::: "memory");
		if (i == 1)
			p[i * ps] = 'w';	/* a write as the faulting access */
		else
			c = p[i * ps];
		__asm__ __volatile__("" ::: "memory");
		if (errno != values[i])
			nsbt_fail("errno was %s before the rescue of page %d, %s after",
				  strerrorname_np(values[i]) ? strerrorname_np(values[i]) : "0",
				  i, strerrorname_np(errno) ? strerrorname_np(errno) : "0");
	}
	(void)c;
	NSBT_CHECK(core_stats().rescues >= 3, "three rescues happened");
	printf("ok: errno preserved across rescues (read and write faults)\n");

	/* Successful calls leave errno alone too. */
	errno = EDOM;
	p = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(p != MAP_FAILED && errno == EDOM,
		   "errno after a successful protected mmap: %s", strerror(errno));
	NSBT_CHECK(mprotect((void *)p, ps, CORE_PROT_RW) == 0 && errno == EDOM,
		   "errno after a successful mprotect of a protected mapping: %s", strerror(errno));
	p = mremap((void *)p, ps, 2 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(p != MAP_FAILED && errno == EDOM,
		   "errno after a successful mremap of a protected mapping: %s", strerror(errno));
	NSBT_CHECK(munmap((void *)p, 2 * ps) == 0 && errno == EDOM,
		   "errno after a successful munmap of a protected mapping: %s", strerror(errno));
	p = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(p != MAP_FAILED && errno == EDOM,
		   "errno after a successful unflagged mmap: %s", strerror(errno));
	printf("ok: successful calls leave errno unchanged\n");
}

/*
 * The same after rescues split the mapping into several VMAs (issue 10
 * item 8): the library then moves it piece by piece, after a kernel call
 * that failed (EFAULT) and maybe a grow in place that failed (ENOMEM);
 * neither may leak into errno when the call succeeds.
 */
static void
errno_split_child(void *arg)
{
	static const int values[] = { EDOM, 0 };
	int fd = nsbt_file(NSBT_MEMFD, 0);

	(void)arg;
	for (int v = 0; v < 2; v++) {
		const char *was = values[v] ? strerrorname_np(values[v]) : "0";
		char *p, *q, *dest, *blocker;

		/* Pages 1 and 3 rescued: 5 VMAs; the page after it taken, so
		 * that the grow cannot happen in place. */
		p = core_map(NULL, 6 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		blocker = mmap(p + 5 * ps, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		NSBT_CHECK(blocker == p + 5 * ps, "blocker: %s", strerror(errno));
		p[ps] = 1;
		p[3 * ps] = 3;

		errno = values[v];
		q = mremap(p, 5 * ps, 7 * ps, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			nsbt_fail("mremap grow (moves) of a split protected mapping: %s", strerror(errno));
		if (errno != values[v])
			nsbt_fail("errno was %s before a successful mremap grow of a split protected "
				  "mapping, %s after", was, strerrorname_np(errno) ?: "0");
		NSBT_CHECK(q[ps] == 1 && q[3 * ps] == 3 && q[6 * ps] == 0, "contents after the move");

		errno = values[v];
		p = mremap(q, 7 * ps, 2 * ps + 1, 0);
		if (p == MAP_FAILED)
			nsbt_fail("mremap shrink of a split protected mapping: %s", strerror(errno));
		if (errno != values[v])
			nsbt_fail("errno was %s before a successful mremap shrink of a split protected "
				  "mapping, %s after", was, strerrorname_np(errno) ?: "0");

		dest = core_free_range(4 * ps);
		errno = values[v];
		q = mremap(p, 3 * ps, 4 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
		if (q != dest)
			nsbt_fail("mremap move+grow (MREMAP_FIXED) of a split protected mapping: %s",
				  q == MAP_FAILED ? strerror(errno) : "elsewhere");
		if (errno != values[v])
			nsbt_fail("errno was %s before a successful MREMAP_FIXED move of a split "
				  "protected mapping, %s after", was, strerrorname_np(errno) ?: "0");
		NSBT_CHECK(q[ps] == 1 && q[3 * ps] == 0, "contents after the second move");

		errno = values[v];
		NSBT_CHECK(mprotect(q, 4 * ps, PROT_READ) == 0 && errno == values[v],
			   "errno after a successful mprotect of a split protected mapping: %s",
			   strerrorname_np(errno) ?: "0");
		errno = values[v];
		NSBT_CHECK(munmap(q, 4 * ps) == 0 && errno == values[v],
			   "errno after a successful munmap of a split protected mapping: %s",
			   strerrorname_np(errno) ?: "0");
		munmap(blocker, ps);
		printf("ok: errno %s kept by successful mremap grow, shrink and move, mprotect and "
		       "munmap of a split protected mapping\n", was);
	}
}

/*
 * nanosleep and clock_nanosleep write rem only when a handler interrupts
 * them: with an unreadable rem (a PROT_NONE page, an address nothing
 * maps) or none, a sleep that ends succeeds and leaves errno as it was.
 * The library reads rem first (to put it back after a retry); that read
 * must not leave its EFAULT behind.  Before the library's handler is
 * installed and after.
 */
static void
errno_sleep_round(const char *when)
{
	static const int values[] = { EDOM, 0, ENOENT };
	char *none = core_map(NULL, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct {
		const char *name;
		struct timespec *rem;
	} rems[] = {
		{ "a PROT_NONE page", (struct timespec *)none },
		{ "address 8", (struct timespec *)8 },
		{ "NULL", NULL },
	};
	struct timespec t = { 0, 1000 };

	for (size_t r = 0; r < sizeof(rems) / sizeof(rems[0]); r++) {
		struct timespec *rem = rems[r].rem;

		NSBT_CHECK(syscall(SYS_nanosleep, &t, rem) == 0,
			   "the kernel's nanosleep with rem %s: %s (test assumption wrong)",
			   rems[r].name, strerror(errno));
		for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
			const char *was = values[v] ? strerrorname_np(values[v]) : "0";
			struct timespec abs;
			int ret;

			errno = values[v];
			ret = nanosleep(&t, rem);
			if (ret != 0 || errno != values[v])
				nsbt_fail("%s: nanosleep with rem %s returned %d, errno was %s "
					  "before, %s after", when, rems[r].name, ret, was,
					  strerrorname_np(errno) ?: "0");
			errno = values[v];
			ret = clock_nanosleep(CLOCK_MONOTONIC, 0, &t, rem);
			if (ret != 0 || errno != values[v])
				nsbt_fail("%s: clock_nanosleep with rem %s returned %d, errno was %s "
					  "before, %s after", when, rems[r].name, ret, was,
					  strerrorname_np(errno) ?: "0");
			clock_gettime(CLOCK_MONOTONIC, &abs);
			errno = values[v];
			ret = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, rem);
			if (ret != 0 || errno != values[v])
				nsbt_fail("%s: clock_nanosleep(TIMER_ABSTIME) with rem %s returned %d, "
					  "errno was %s before, %s after", when, rems[r].name, ret, was,
					  strerrorname_np(errno) ?: "0");
		}
	}
	munmap(none, ps);
	printf("ok: %s: errno kept by successful nanosleep and clock_nanosleep with rem "
	       "unreadable or NULL\n", when);
}

static void
errno_sleep_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, ps);

	(void)arg;
	errno_sleep_round("before any protected mapping");
	core_map(NULL, ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(core_stats().mappings >= 1, "the mapping is protected");
	errno_sleep_round("with a protected mapping");
}

int
main(void)
{
	core_require_library();
	ps = nsbt_page();
	mmap_cases();
	munmap_cases();
	mremap_cases();
	mprotect_cases();
	nsbt_expect_exit(nsbt_run(failed_calls_on_protected_child, NULL), 0,
			 "failed calls on a protected mapping");
	nsbt_expect_exit(nsbt_run(shared_validate_child, NULL), 0,
			 "MAP_SHARED_VALIDATE|MAP_NOSIGBUS");
	nsbt_expect_exit(nsbt_run(seccomp_child, NULL), 0, "MAP_NOSIGBUS never reaches the kernel");
	nsbt_expect_exit(nsbt_run(errno_rescue_child, NULL), 0, "errno across rescues");
	nsbt_expect_exit(nsbt_run(errno_split_child, NULL), 0,
			 "errno after successful calls on a split protected mapping");
	nsbt_expect_exit(nsbt_run(errno_sleep_child, NULL), 0,
			 "errno after successful sleeps with an unreadable rem");
	return 0;
}
