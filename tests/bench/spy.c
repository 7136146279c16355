/* SPDX-License-Identifier: MIT */
/*
 * spy.c - counts calls to dladdr() and dladdr1(), for the start-up test.
 *
 * Preloaded before libnosigbus, so that the library's calls bind here;
 * each is passed on to the C library.  At exit it writes one line to
 * stderr: "nsb-spy: dladdr calls: N".  Each such call scans a whole
 * symbol table: the library must make none while a process starts.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_ulong calls;

int
dladdr(const void *addr, Dl_info *info)
{
	int (*next)(const void *, Dl_info *);

	atomic_fetch_add(&calls, 1);
	*(void **)&next = dlsym(RTLD_NEXT, "dladdr");
	return next ? next(addr, info) : 0;
}

int
dladdr1(const void *addr, Dl_info *info, void **extra, int flags)
{
	int (*next)(const void *, Dl_info *, void **, int);

	atomic_fetch_add(&calls, 1);
	*(void **)&next = dlsym(RTLD_NEXT, "dladdr1");
	return next ? next(addr, info, extra, flags) : 0;
}

__attribute__((destructor)) static void
report(void)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "nsb-spy: dladdr calls: %lu\n",
			 (unsigned long)atomic_load(&calls));

	if (n > 0)
		(void)!write(STDERR_FILENO, line, (size_t)n);
}
