/* SPDX-License-Identifier: MIT *
 * (Written against a probe of VM_MAYWRITE at the first rescue, which it
 * found wrong and which was taken out again: the library asks the
 * descriptor at mmap, doc/performance.md "ripgrep under files"; this
 * test guards the answer, whichever way it is learnt.)
 */
/*
 * Adversarial: the first rescue of a shared mapping not writable learns
 * whether the kernel would let it become writable (VM_MAYWRITE) from an
 * mprotect of the faulting unit to its protection plus PROT_WRITE
 * (rescue.c learn_write).  A mapping PROT_READ | PROT_EXEC of a file
 * opened read-write, in a process with memory-deny-write-execute
 * (prctl PR_SET_MDWE, Linux 6.3): that mprotect fails with EACCES for
 * write and execute together, not for want of VM_MAYWRITE, and the
 * kernel lets the mapping become PROT_READ | PROT_WRITE.  After the
 * rescue, so must the library: mprotect to read-write succeeds, the page
 * of the file written shows in the file, and /proc/self/maps shows the
 * protection asked.  The controls: the same mapping of a descriptor
 * opened read-only is refused (EACCES), as the kernel refuses it; and
 * without MDWE, read-write is allowed.  The same once the file is grown
 * back and the page shown again (nosigbus_refresh): the file mapped back
 * through a descriptor opened as the program's was.
 *
 * Each case in a child with a watchdog and its stderr checked; the
 * default policy (a memfd is protected).
 */
#include "core.h"
#include <sys/prctl.h>

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN (1UL << 0)
#endif

struct how {
	const char *what;
	bool mdwe;
	int mode;	/* O_RDWR or O_RDONLY: the descriptor mapped */
	bool refresh;	/* the file grown back and shown again first */
};

static void
exec_shared(void *arg)
{
	const struct how *h = arg;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	int fd = memfd_create("nsbtest-atk5-mdwe", MFD_CLOEXEC), rfd;
	char path[64], perms[5], c = 0;
	volatile char *p;
	int ret;

	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)(2 * ps)) == 0, "memfd: %s", strerror(errno));
	NSBT_CHECK(pwrite(fd, "a", 1, 0) == 1, "pwrite: %s", strerror(errno));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, h->mode | O_CLOEXEC);
	NSBT_CHECK(rfd >= 0, "open(%s): %s", path, strerror(errno));
	if (h->mdwe && prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0) {
		printf("skip: %s: PR_SET_MDWE: %s\n", h->what, strerror(errno));
		_exit(0);
	}
	p = mmap(NULL, 2 * ps, PROT_READ | PROT_EXEC, MAP_SHARED, rfd, 0);
	if (p == MAP_FAILED && (errno == EPERM || errno == EACCES)) {
		printf("skip: %s: an executable memfd mapping: %s\n", h->what, strerror(errno));
		_exit(0);
	}
	NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	close(rfd);
	/* The second page past the end: its first rescue. */
	core_truncate(fd, (off_t)ps);
	NSBT_CHECK(p[ps] == 0 && p[0] == 'a', "the pages read %d %d", p[0], p[ps]);
	NSBT_CHECK(!strstr(core_maps_line((const char *)p + ps), "nsbtest-atk5-mdwe"),
		   "the second page not replaced: %s", core_maps_line((const char *)p + ps));
	if (h->refresh) {
		core_truncate(fd, (off_t)(2 * ps));
		NSBT_CHECK(pwrite(fd, "b", 1, (off_t)ps) == 1, "pwrite: %s", strerror(errno));
		NSBT_CHECK(nosigbus_refresh((void *)p, 2 * ps) == 1 && p[ps] == 'b',
			   "%s: nosigbus_refresh: the page reads %d (%s)", h->what, p[ps],
			   strerror(errno));
	}
	errno = 0;
	ret = mprotect((void *)p, 2 * ps, PROT_READ | PROT_WRITE);
	if (h->mode == O_RDONLY) {
		NSBT_CHECK(ret == -1 && errno == EACCES, "%s: mprotect read-write: %d, %s "
			   "(want EACCES, as the kernel)", h->what, ret, strerror(errno));
		core_maps_perms((const char *)p, perms);
		NSBT_CHECK(strcmp(perms, "r-xs") == 0, "%s: the file page is %s after the refused call",
			   h->what, perms);
		core_maps_perms((const char *)p + ps, perms);
		NSBT_CHECK(strcmp(perms, h->refresh ? "r-xs" : "r-xp") == 0,
			   "%s: the second page is %s after the refused call", h->what, perms);
	} else {
		NSBT_CHECK(ret == 0, "%s: mprotect read-write: %s (the kernel allows it: "
			   "the descriptor was opened read-write)", h->what, strerror(errno));
		core_maps_perms((const char *)p, perms);
		NSBT_CHECK(strcmp(perms, "rw-s") == 0, "%s: the file page is %s", h->what, perms);
		core_maps_perms((const char *)p + ps, perms);
		NSBT_CHECK(strcmp(perms, h->refresh ? "rw-s" : "rw-p") == 0, "%s: the second page is %s",
			   h->what, perms);
		p[0] = 'w';
		p[ps] = 'z';
		NSBT_CHECK(pread(fd, &c, 1, 0) == 1 && c == 'w', "%s: the file reads %c", h->what, c);
		NSBT_CHECK(p[ps] == 'z', "%s: the second page reads %d", h->what, p[ps]);
		c = 0;
		NSBT_CHECK(!h->refresh || (pread(fd, &c, 1, (off_t)ps) == 1 && c == 'z'),
			   "%s: the file's second page reads %c", h->what, c);
	}
	/* A new truncation: the first page rescued too, nothing else. */
	core_truncate(fd, 0);
	NSBT_CHECK(p[0] == 0, "%s: the first page after a new truncation reads %d", h->what, p[0]);
	printf("ok: %s\n", h->what);
}

int
main(void)
{
	static const struct how hows[] = {
		{ "MDWE, read-write descriptor", true, O_RDWR, false },
		{ "MDWE, read-only descriptor", true, O_RDONLY, false },
		{ "no MDWE, read-write descriptor", false, O_RDWR, false },
		{ "no MDWE, read-only descriptor", false, O_RDONLY, false },
		{ "MDWE, read-write descriptor, refreshed", true, O_RDWR, true },
		{ "MDWE, read-only descriptor, refreshed", true, O_RDONLY, true },
		{ "no MDWE, read-write descriptor, refreshed", false, O_RDWR, true },
	};

	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++)
		core_run_case_watched(exec_shared, (void *)&hows[i], 45, hows[i].what);
	return 0;
}
