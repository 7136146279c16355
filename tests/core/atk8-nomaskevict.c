/* SPDX-License-Identifier: MIT */
/*
 * atk8: sigsetjmp(env, 0) and the views of other envs (src/dispositions.c,
 * jump_views: a small table by jmp_buf address).  The program blocks
 * SIGBUS (the library keeps it unblocked in the kernel and keeps the
 * program's view), calls sigsetjmp(a, 1), unblocks it, then calls
 * sigsetjmp(b, 0) for another jmp_buf b, and siglongjmps to a: the mask
 * saved in a blocks SIGBUS, so the program must find SIGBUS blocked after
 * the jump, whichever b (a sigsetjmp that saves no mask records no view:
 * it has no business evicting a's).  Every b of an array is tried (some
 * share a's slot of the table, whatever its hash).
 */
#include "core.h"

#include <setjmp.h>

#define ENVS 64

static sigjmp_buf envs[ENVS];

static bool
bus_blocked(void)
{
	sigset_t m;

	if (sigprocmask(SIG_BLOCK, NULL, &m) != 0)
		nsbt_fail("sigprocmask: %s", strerror(errno));
	return sigismember(&m, SIGBUS) == 1;
}

static void
bus_mask(int how)
{
	sigset_t m;

	sigemptyset(&m);
	sigaddset(&m, SIGBUS);
	if (sigprocmask(how, &m, NULL) != 0)
		nsbt_fail("sigprocmask: %s", strerror(errno));
}

static void
scenario(void *arg)
{
	size_t ps = nsbt_page();
	int fd = memfd_create("atk8-nomaskevict", MFD_CLOEXEC);
	char *p;
	volatile int b, lost = 0, first = -1;

	(void)arg;
	/* A protected mapping: the library's handler is installed. */
	if (fd < 0 || ftruncate(fd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	if (p == MAP_FAILED || p[ps] != 0)
		nsbt_fail("the protected mapping failed or was not rescued");
	for (b = 1; b < ENVS; b++) {
		bus_mask(SIG_BLOCK);
		if (sigsetjmp(envs[0], 1) == 0) {
			bus_mask(SIG_UNBLOCK);
			if (bus_blocked())
				nsbt_fail("SIGBUS still blocked after SIG_UNBLOCK");
			(void)sigsetjmp(envs[b], 0);
			siglongjmp(envs[0], 1);
		}
		if (!bus_blocked()) {
			lost++;
			if (first < 0)
				first = b;
		}
		bus_mask(SIG_UNBLOCK);
	}
	if (lost)
		nsbt_fail("SIGBUS not blocked after a siglongjmp to an env whose saved mask "
			  "blocked it, after sigsetjmp(env, 0) of another env (%d of %d, the "
			  "first envs[%d])", (int)lost, ENVS - 1, (int)first);
	munmap(p, 2 * ps);
}

int
main(void)
{
	core_require_library();
	if (core_run_case_watched(scenario, NULL, 45, "sigsetjmp(env, 0) of another env") == 77)
		return 77;
	printf("ok: sigsetjmp(env, 0) keeps the views of other envs\n");
	return 0;
}
