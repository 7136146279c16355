/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the tests in tests/core, on top of tests/common/nsbtest.h.
 *
 * Every core test is linked with libnosigbus (the same interposition as a
 * preload).  Settings that the library reads once at start (NOSIGBUS_FILL,
 * NOSIGBUS_STRICT) are tested by re-executing the test binary with the
 * variable set and a scenario name as argv[1]: core_reexec().
 */
#ifndef CORE_H
#define CORE_H

#include <limits.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "nsbtest.h"

#define CORE_PROT_RW (PROT_READ | PROT_WRITE)

static inline struct nosigbus_stats
core_stats(void)
{
	struct nosigbus_stats st;

	memset(&st, 0, sizeof(st));
	if (nosigbus_get_stats(&st, sizeof(st)) != 0)
		nsbt_fail("nosigbus_get_stats: %s", strerror(errno));
	return st;
}

static inline void *
core_map(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(addr, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		nsbt_fail("mmap(%p, %zu, %#x, %#x, %d, %lld): %s", addr, len,
			  prot, flags, fd, (long long)off, strerror(errno));
	return p;
}

static inline void
core_truncate(int fd, off_t size)
{
	if (ftruncate(fd, size) != 0)
		nsbt_fail("ftruncate(%d, %lld): %s", fd, (long long)size,
			  strerror(errno));
}

/* An address range that nothing uses: reserved, then released. */
static inline char *
core_free_range(size_t len)
{
	char *p = core_map(NULL, len, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (munmap(p, len) != 0)
		nsbt_fail("munmap: %s", strerror(errno));
	return p;
}

/* Index of the first byte that is not c, or len. */
static inline size_t
core_first_not(const volatile char *p, char c, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != c)
			return i;
	return len;
}

/* Index of the first byte that differs from the file pattern at off, or len. */
static inline size_t
core_first_not_pattern(const volatile char *p, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != nsbt_pattern(off + i))
			return i;
	return len;
}

static inline void
core_expect_bytes(const void *p, char c, size_t len, const char *what)
{
	size_t i = core_first_not(p, c, len);

	if (i != len)
		nsbt_fail("%s: byte %zu of %zu at %p is %#x, expected %#x", what,
			  i, len, (const char *)p + i,
			  (unsigned char)((const volatile char *)p)[i],
			  (unsigned char)c);
}

static inline void
core_expect_pattern(const void *p, size_t off, size_t len, const char *what)
{
	size_t i = core_first_not_pattern(p, off, len);

	if (i != len)
		nsbt_fail("%s: byte %zu of %zu (file offset %zu) is %#x, expected "
			  "the file's %#x", what, i, len, off + i,
			  (unsigned char)((const volatile char *)p)[i],
			  (unsigned char)nsbt_pattern(off + i));
}

/*
 * The file must still be exactly size bytes of the pattern: the library
 * never writes, extends or shrinks it.
 */
static inline void
core_expect_file(int fd, size_t size, const char *what)
{
	struct stat st;
	char *buf;
	ssize_t n;

	if (fstat(fd, &st) != 0)
		nsbt_fail("%s: fstat: %s", what, strerror(errno));
	if ((size_t)st.st_size != size)
		nsbt_fail("%s: file size is %lld, expected %zu", what,
			  (long long)st.st_size, size);
	buf = malloc(size + 1);
	if (!buf)
		nsbt_fail("malloc");
	n = pread(fd, buf, size + 1, 0);
	if (n != (ssize_t)size)
		nsbt_fail("%s: pread returned %zd (%s), expected %zu", what, n,
			  n < 0 ? strerror(errno) : "short", size);
	core_expect_pattern(buf, 0, size, what);
	free(buf);
}

/* Is the page at p mapped at all?  mincore() fails with ENOMEM if not. */
static inline bool
core_page_mapped(const void *p)
{
	unsigned char v;
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(nsbt_page() - 1);

	if (mincore((void *)a, nsbt_page(), &v) == 0)
		return true;
	if (errno != ENOMEM)
		nsbt_fail("mincore(%p): %s", (void *)a, strerror(errno));
	return false;
}

static inline void
core_expect_unmapped(const void *p, size_t len, const char *what)
{
	for (size_t off = 0; off < len; off += nsbt_page())
		if (core_page_mapped((const char *)p + off))
			nsbt_fail("%s: page %p is mapped, expected nothing there",
				  what, (const char *)p + off);
}

/* In a child that is expected to die: no core file, it only slows things. */
static inline void
core_no_core(void)
{
	struct rlimit rl = { 0, 0 };

	setrlimit(RLIMIT_CORE, &rl);
}

struct core_touch {
	volatile char *p;
	bool write;
};

static inline void
core_touch_fn(void *arg)
{
	struct core_touch *t = arg;

	core_no_core();
	if (t->write)
		*t->p = 1;
	else
		(void)*t->p;
}

/* Touches p in a child and returns how the child ended. */
static inline int
core_touch_status(void *p, bool write)
{
	struct core_touch t = { p, write };

	return nsbt_run(core_touch_fn, &t);
}

/*
 * A child that maps a fresh, unflagged mapping of an empty file at addr
 * (MAP_FIXED_NOREPLACE: the range must be free) and reads it: it must die
 * by SIGBUS, i.e. nothing of the library's protection is left at addr.
 */
static inline void
core_unflagged_at_fn(void *arg)
{
	struct core_touch *t = arg;
	int fd = memfd_create("core-unflagged", MFD_CLOEXEC);
	char *p;

	core_no_core();
	if (fd < 0)
		nsbt_fail("memfd_create: %s", strerror(errno));
	p = mmap((void *)t->p, nsbt_page(), CORE_PROT_RW,
		 MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
	if (p == MAP_FAILED || p != t->p)
		nsbt_fail("mmap at %p: %s", (void *)t->p,
			  p == MAP_FAILED ? strerror(errno) : "other address");
	(void)*(volatile char *)p;
	_exit(3);
}

static inline void
core_expect_unprotected(void *addr, const char *what)
{
	struct core_touch t = { addr, false };

	nsbt_expect_signal(nsbt_run(core_unflagged_at_fn, &t), SIGBUS, what);
}

/*
 * Runs this test binary again as "argv0 scenario" with the given
 * NAME=VALUE settings (NULL-terminated) added to the environment.
 * Returns the wait status.
 */
struct core_reexec_args {
	const char *scenario;
	const char *const *settings;
};

static inline void
core_reexec_child(void *arg)
{
	const struct core_reexec_args *a = arg;
	char *argv[] = { (char *)"core-reexec", (char *)a->scenario, NULL };

	for (size_t i = 0; a->settings && a->settings[i]; i++)
		if (putenv((char *)a->settings[i]) != 0)
			_exit(126);
	execv("/proc/self/exe", argv);
	fprintf(stderr, "execv /proc/self/exe: %s\n", strerror(errno));
	_exit(127);
}

static inline int
core_reexec(const char *scenario, const char *const *settings)
{
	struct core_reexec_args a = { scenario, settings };

	return nsbt_run(core_reexec_child, &a);
}

/* A tiny deterministic PRNG (xorshift64*), so that runs are reproducible. */
static inline uint64_t
core_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static inline void
core_require_library(void)
{
	if (!nsbt_have_library())
		nsbt_fail("libnosigbus is not in the process (the core tests link it)");
}

#endif /* CORE_H */
