/* SPDX-License-Identifier: MIT *
 * (Written against a probe of VM_MAYWRITE at the first rescue, which it
 * found wrong and which was taken out again: the library asks the
 * descriptor at mmap, doc/performance.md "ripgrep under files"; this
 * test guards the answer, whichever way it is learnt.)
 */
/*
 * Adversarial: fork while the first rescue in a shared mapping not
 * writable is between its VM_MAYWRITE probe (rescue.c learn_write: an
 * mprotect of the faulting unit to its protection plus PROT_WRITE) and
 * the replacement.  As in atk-forkrescue.c, a seccomp filter with a
 * user-space listener (installed with a raw system call, unseen by the
 * library) holds the rescue's mmap of the replacement in the kernel; the
 * main thread then forks.  The child has the unit as the file's: the
 * claim is given back (nsb_rescue_after_fork_child), and its protection
 * must be the record's, PROT_READ, as the program made it: not the
 * probe's PROT_READ | PROT_WRITE, through which a write would reach the
 * file where the program gets SIGSEGV (the file grown back meanwhile).
 * The child checks /proc/self/maps, that a write to the unit of the file
 * grown back is SIGSEGV and leaves the file as it was, and that the unit
 * shrunk again is rescued; the parent's rescue then completes.  Stderr
 * checked; a SIGKILL watchdog ends a hang.
 */
#include "held.h"

/* In the fork child. */
static void
child_checks(void)
{
	char perms[5], c = 0;
	int status;

	core_maps_perms(prot + ps, perms);
	if (strcmp(perms, "r--s") != 0) {
		fprintf(stderr, "child: the unit the parent was rescuing is %s, not r--s\n", perms);
		_exit(10);
	}
	/* The file grown back: a write to the read-only mapping is the
	 * program's SIGSEGV, and the file is unchanged. */
	if (ftruncate(zfd, (off_t)(2 * ps)) != 0 || pwrite(zfd, "f", 1, (off_t)ps) != 1)
		_exit(11);
	status = core_touch_status(prot + ps, true);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV) {
		fprintf(stderr, "child: a write to the unit: %s, not SIGSEGV\n",
			nsbt_status_str(status));
		_exit(12);
	}
	if (pread(zfd, &c, 1, (off_t)ps) != 1 || c != 'f') {
		fprintf(stderr, "child: the file's page reads %c after the refused write\n", c);
		_exit(13);
	}
	/* Shrunk again: the unit is rescued here (the claim given back). */
	if (ftruncate(zfd, (off_t)ps) != 0 || prot[ps] != 0)
		_exit(14);
	_exit(0);
}

static void
scenario(void *arg)
{
	char perms[5];
	pid_t pid;
	int st;

	(void)arg;
	zfd = memfd_create("atk5-forkprobe", MFD_CLOEXEC);
	if (zfd < 0 || ftruncate(zfd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	/* Read-only, shared, of a descriptor opened read-write: the probe
	 * succeeds.  No rescue in it before the held one (its first). */
	prot = core_map(NULL, 4 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	held_start();
	/* The rescue is held in its mmap, after its probe. */
	core_maps_perms(prot + ps, perms);
	printf("the unit while the rescue is held: %s\n", perms);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0)
		child_checks();
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		nsbt_fail("the child: %s (10 protection, 11 grow, 12 write, 13 file, 14 rescue)",
			  nsbt_status_str(st));
	held_release();
	core_maps_perms(prot + ps, perms);
	if (strcmp(perms, "r--p") != 0)
		nsbt_fail("the parent's rescued unit is %s, not r--p", perms);
	if (munmap(prot, 4 * ps) != 0 || core_stats().mappings != 0)
		nsbt_fail("the parent's last unmap");
	printf("ok: fork during a held first rescue\n");
}

int
main(void)
{
	core_require_library();
	if (NATIVE_ARCH == 0)
		nsbt_skip("x86-64 and aarch64 only");
	ps = nsbt_page();
	if (core_run_case_watched(scenario, NULL, 30, "fork during a held first rescue") == 77)
		return 77;
	return 0;
}
