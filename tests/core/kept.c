/* SPDX-License-Identifier: MIT */
/*
 * The library's own descriptors (files.c) at the edges a review found:
 *  - close_range(K, ~0U, CLOSE_RANGE_UNSHARE) from a thread, K one of
 *    ours: the calling thread's table is unshared and nothing closes in
 *    the other threads' (the library dropped the flag when its first
 *    piece, below K, was empty, and closed the rest in the shared table);
 *  - a vfork child's dup2 onto one of ours replaces it in the child's
 *    table only: the parent's stays ours, and goes once the last mapping
 *    of its file does (the child moved it in our shared memory: leaked);
 *  - freopen of the stream a file was mapped from: the C library closes
 *    the number where we cannot see; what the library keeps then is the
 *    mapped file, never the file freopen opened;
 *  - a close that succeeds keeps errno, even where every number is taken
 *    and the library could not make its own (EMFILE leaked into errno);
 *  - dup3(K, K) is EINVAL, as the kernel says (EBADF);
 *  - dup2(K, K) is EBADF (the program never opened K), where the kernel
 *    gives K back for a number that is open (the library returned K);
 *    close_range(K, K, flags) with a flag the kernel does not know is
 *    EINVAL (the library made no call and returned 0);
 *  - a failed call with every number taken (the maps cannot be read):
 *    its records stay where the mapping still is;
 *  - a number of ours closed behind the library's back (close_range made
 *    with syscall(2)) and opened again by the program: the last unmap
 *    forgets it, never closes it (kept_number_reused_closed);
 *  - a watched number (the program's descriptor a file was mapped from)
 *    closed with a raw close, and an unrelated file opened there and
 *    closed: the library keeps nothing of that file
 *    (watched_number_reused_pinned).
 * Each runs in a child.
 */
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "core.h"

static size_t ps;

/* The first of the library's O_PATH descriptors, or -1. */
static int
kept_fd(void)
{
	struct rlimit rl;

	NSBT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	for (int fd = 3; fd < (int)(rl.rlim_cur < 65536 ? rl.rlim_cur : 65536); fd++) {
		int fl = fcntl(fd, F_GETFL);

		if (fl >= 0 && (fl & O_PATH))
			return fd;
	}
	return -1;
}

/* A memfd of one page, mapped protected (MAP_NOSIGBUS) and closed: the
 * library keeps a descriptor of it. */
static char *
mapped_and_closed(int *kept)
{
	int fd = nsbt_file(NSBT_MEMFD, ps);
	char *p = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);

	NSBT_CHECK(close(fd) == 0, "close: %s", strerror(errno));
	*kept = kept_fd();
	NSBT_CHECK(*kept >= 0, "the library kept no descriptor");
	return p;
}

struct unshare_arg {
	int kept;
	int ret, err;
};

static void *
unshare_thread(void *arg)
{
	struct unshare_arg *a = arg;

	a->ret = (int)close_range((unsigned)a->kept, ~0U, CLOSE_RANGE_UNSHARE);
	a->err = errno;
	return NULL;
}

static void
unshare_child(void *arg)
{
	struct unshare_arg a = { 0 };
	int above, kept;
	pthread_t t;

	(void)arg;
	(void)mapped_and_closed(&kept);
	above = fcntl(0, F_DUPFD, kept + 4);
	NSBT_CHECK(above > kept, "F_DUPFD: %s", strerror(errno));
	a.kept = kept;
	NSBT_CHECK(pthread_create(&t, NULL, unshare_thread, &a) == 0, "pthread_create");
	pthread_join(t, NULL);
	NSBT_CHECK(a.ret == 0, "close_range: %s", strerror(a.err));
	NSBT_CHECK(fcntl(above, F_GETFD) >= 0, "close_range(%d, ~0U, CLOSE_RANGE_UNSHARE) in a "
		   "thread closed fd %d in the other threads' table", kept, above);
	printf("ok: close_range from one of ours with CLOSE_RANGE_UNSHARE closes nothing shared\n");
}

static void
vfork_child(void *arg)
{
	int kept, status;
	char *p;
	pid_t pid;

	(void)arg;
	p = mapped_and_closed(&kept);
	pid = vfork();
	if (pid == 0) {
		dup2(0, kept);
		_exit(0);
	}
	NSBT_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "vfork");
	NSBT_CHECK(kept_fd() == kept, "the parent's kept descriptor moved (now %d)", kept_fd());
	NSBT_CHECK(munmap(p, ps) == 0, "munmap");
	NSBT_CHECK(kept_fd() < 0, "a kept descriptor outlived its file's last mapping");
	printf("ok: a vfork child's dup2 onto one of ours leaves the parent's alone\n");
}

static void
freopen_child(void *arg)
{
	char a[64], b[64];
	struct stat sa, sb, sk;
	FILE *f;
	int fa, fb, kept;
	char *p;

	(void)arg;
	nsbt_require_tmpfs();
	snprintf(a, sizeof(a), "/dev/shm/core-kept-a-%d-XXXXXX", (int)getpid());
	snprintf(b, sizeof(b), "/dev/shm/core-kept-b-%d-XXXXXX", (int)getpid());
	fa = mkstemp(a);
	fb = mkstemp(b);
	NSBT_CHECK(fa >= 0 && fb >= 0, "mkstemp: %s", strerror(errno));
	NSBT_CHECK(ftruncate(fa, (off_t)ps) == 0 && fstat(fa, &sa) == 0 && fstat(fb, &sb) == 0,
		   "ftruncate/fstat");
	close(fa);
	close(fb);
	f = fopen(a, "r+");
	NSBT_CHECK(f, "fopen: %s", strerror(errno));
	p = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED, fileno(f), 0);
	f = freopen(b, "r", f);
	NSBT_CHECK(f, "freopen: %s", strerror(errno));
	fclose(f);
	kept = kept_fd();
	NSBT_CHECK(kept >= 0 && fstat(kept, &sk) == 0, "the library kept no descriptor of the "
		   "mapped file");
	NSBT_CHECK(sk.st_ino == sa.st_ino && sk.st_dev == sa.st_dev,
		   "the library kept a descriptor of the file freopen opened, not the mapped one");
	munmap(p, ps);
	unlink(a);
	unlink(b);
	printf("ok: freopen: the library keeps the mapped file, not the new one\n");
}

static void
errno_child(void *arg)
{
	struct rlimit rl;
	int fd, spare;
	char *p;

	(void)arg;
	fd = nsbt_file(NSBT_MEMFD, ps);
	p = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	/* Every number taken: the library cannot make a descriptor. */
	NSBT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	rl.rlim_cur = (rlim_t)fd + 8;
	NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	while ((spare = dup(0)) >= 0)
		;
	errno = ENOTTY;
	NSBT_CHECK(close(fd) == 0, "close: %s", strerror(errno));
	NSBT_CHECK(errno == ENOTTY, "a close that succeeded set errno to %s", strerror(errno));
	munmap(p, ps);
	printf("ok: a successful close keeps errno, every number taken\n");
}

/*
 * A failed mprotect (it runs into a hole above a protected mapping) while
 * every descriptor number is taken: the library cannot open
 * /proc/self/maps to ask what the call did.  The mapping is still there,
 * so it stays protected (the records of the span were dropped: a Bus
 * error after the file shrank).
 */
static void
resync_child(void *arg)
{
	struct rlimit rl = { 256, 256 };
	char *area, *m;
	int fd;

	(void)arg;
	NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	fd = nsbt_file(NSBT_MEMFD, 4 * ps);
	area = core_free_range(8 * ps);
	m = core_map(area, 4 * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(core_stats().mappings == 1, "not recorded");
	while (dup(0) >= 0)
		;
	NSBT_CHECK(mprotect(m, 8 * ps, PROT_READ) == -1 && errno == ENOMEM,
		   "mprotect over a hole: %s", strerror(errno));
	NSBT_CHECK(core_stats().mappings == 1, "after a failed mprotect with every number "
		   "taken: %llu protected mappings, not 1",
		   (unsigned long long)core_stats().mappings);
	core_truncate(fd, 0);
	NSBT_CHECK(*(volatile char *)m == 0, "read past the end");
	printf("ok: a failed call with every number taken keeps what is still mapped\n");
}

/* kept_number_reused_closed */
static void
reused_kept_child(void *arg)
{
	int kept, fd;
	char *p;

	(void)arg;
	p = mapped_and_closed(&kept);
	NSBT_CHECK(syscall(SYS_close_range, (unsigned)kept, (unsigned)kept, 0) == 0,
		   "close_range: %s", strerror(errno));
	fd = nsbt_file(NSBT_MEMFD, ps);
	/* Raw: the interposed dup2 would check the number first. */
	NSBT_CHECK(syscall(SYS_dup3, fd, kept, 0) == kept, "dup3: %s", strerror(errno));
	NSBT_CHECK(close(fd) == 0, "close");
	NSBT_CHECK(munmap(p, ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(fcntl(kept, F_GETFD) >= 0, "the last unmap closed fd %d, the program's now",
		   kept);
	NSBT_CHECK(write(kept, "x", 1) == 1, "write to the program's fd %d: %s", kept,
		   strerror(errno));
	printf("ok: a number of ours the program reused is forgotten, not closed\n");
}

/* watched_number_reused_pinned */
static void
reused_watched_child(void *arg)
{
	char path[] = "/tmp/nsbt-kept-XXXXXX";
	int fd, other;
	char *p;

	(void)arg;
	fd = nsbt_file(NSBT_MEMFD, ps);
	p = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(syscall(SYS_close, fd) == 0, "raw close");
	other = mkstemp(path);
	NSBT_CHECK(other == fd, "mkstemp took %d, not %d", other, fd);
	NSBT_CHECK(unlink(path) == 0, "unlink");
	NSBT_CHECK(close(other) == 0, "close: %s", strerror(errno));
	NSBT_CHECK(kept_fd() < 0, "the library keeps fd %d open: a file it never mapped",
		   kept_fd());
	NSBT_CHECK(munmap(p, ps) == 0, "munmap");
	printf("ok: an unrelated file opened at a watched number is not kept\n");
}

static void
dup3_child(void *arg)
{
	int kept;

	(void)arg;
	(void)mapped_and_closed(&kept);
	errno = 0;
	NSBT_CHECK(dup3(kept, kept, 0) == -1 && errno == EINVAL, "dup3(%d, %d, 0): %s", kept,
		   kept, strerror(errno));
	printf("ok: dup3(K, K) is EINVAL\n");
}

static void
dup2_self_child(void *arg)
{
	int kept, ret;

	(void)arg;
	(void)mapped_and_closed(&kept);
	errno = 0;
	ret = dup2(kept, kept);
	NSBT_CHECK(ret == -1 && errno == EBADF, "dup2(%d, %d) of a number the program never "
		   "opened: %d (%s), not EBADF", kept, kept, ret, strerror(errno));
	NSBT_CHECK(fcntl(kept, F_GETFL) >= 0, "the library's descriptor %d is gone", kept);
	errno = 0;
	ret = close_range((unsigned)kept, (unsigned)kept, 1 << 30);
	NSBT_CHECK(ret == -1 && errno == EINVAL, "close_range(%d, %d) with an unknown flag: %d "
		   "(%s), not EINVAL", kept, kept, ret, strerror(errno));
	printf("ok: dup2(K, K) is EBADF, close_range(K, K, unknown flag) EINVAL\n");
}

int
main(int argc, char **argv)
{
	static const struct core_case cases[] = {
		{ "close_range with CLOSE_RANGE_UNSHARE", unshare_child },
		{ "a vfork child's dup2", vfork_child },
		{ "freopen", freopen_child },
		{ "errno of a close", errno_child },
		{ "dup3 onto itself", dup3_child },
		{ "dup2 onto itself, close_range with a bad flag", dup2_self_child },
		{ "a failed mprotect with every number taken", resync_child },
		{ "kept_number_reused_closed", reused_kept_child },
		{ "watched_number_reused_pinned", reused_watched_child },
	};

	ps = nsbt_page();
	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "shm");
	return core_run_cases(cases, sizeof(cases) / sizeof(cases[0]), false);
}
