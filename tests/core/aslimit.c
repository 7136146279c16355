/* SPDX-License-Identifier: MIT */
/*
 * A call that needs no memory of the kernel's needs none of the library's
 * either (SPEC §12: RLIMIT_AS never turns a call that would succeed into a
 * failure).  40 protected one-page mappings side by side, RLIMIT_AS set to
 * what the process uses, then mremap shrinking the 80 pages they start to
 * one: the kernel unmaps the rest and succeeds.  The library asked its
 * table for room for 2 x 40 + 6 more records, a new chunk each, which did
 * not fit, and failed the call with ENOMEM (found by the model test).
 * Also munmap of every other page, and mprotect of them: the same.
 * Runs in a child; the records must equal what is mapped after each.
 */
#include <sys/resource.h>

#include "core.h"

#define N 40

static void
tight(void *arg)
{
	int how = *(int *)arg;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, N * ps);
	char *w = core_free_range(2 * N * ps);
	struct rlimit rl;

	/* Each its own VMA and record: every other page of the file, in
	 * reverse, so that no two neighbours merge. */
	for (size_t i = 0; i < N; i++)
		core_map(w + 2 * i * ps, ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd,
			 (off_t)((N - 1 - i) * ps));
	NSBT_CHECK(core_stats().mappings == N, "%llu records, not %d",
		   (unsigned long long)core_stats().mappings, N);
	NSBT_CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit");
	rl.rlim_cur = core_vm_size();
	NSBT_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
	if (how == 0) {
		char *p = mremap(w, 2 * N * ps - ps, ps, 0);

		NSBT_CHECK(p == w, "mremap shrinking %d mappings to one page at RLIMIT_AS: %s", N,
			   p == MAP_FAILED ? strerror(errno) : "moved");
		NSBT_CHECK(core_stats().mappings == 1, "%llu records after the shrink, not 1",
			   (unsigned long long)core_stats().mappings);
	} else {
		for (size_t i = 0; i < N; i += 2) {
			int r = how == 1 ? munmap(w + 2 * i * ps, ps)
					 : mprotect(w + 2 * i * ps, ps, PROT_READ);

			NSBT_CHECK(r == 0, "%s at RLIMIT_AS: %s", how == 1 ? "munmap" : "mprotect",
				   strerror(errno));
		}
		NSBT_CHECK(core_stats().mappings == (how == 1 ? N / 2 : N), "%llu records",
			   (unsigned long long)core_stats().mappings);
	}
	core_truncate(fd, 0);
	NSBT_CHECK(*(volatile char *)(how == 0 ? w : w + 2 * ps) == 0, "a record left is not protected");
	printf("ok: %s at RLIMIT_AS: as without the library\n",
	       how == 0 ? "mremap shrinking many records" : how == 1 ? "munmap" : "mprotect");
}

int
main(int argc, char **argv)
{
	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	for (int how = 0; how < 3; how++)
		nsbt_expect_exit(nsbt_run(tight, &how), 0,
				 how == 0 ? "mremap" : how == 1 ? "munmap" : "mprotect");
	return 0;
}
