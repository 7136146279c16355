/* SPDX-License-Identifier: MIT */
/*
 * loader-ctor.c - a library whose constructor stops until told to go on,
 * for core-loaderlock: dlopen() holds the dynamic loader's lock while it
 * runs constructors, so the thread that loads this one stands for a
 * thread a garbage collector stopped in the middle of dlopen().
 *
 * NSBT_CTOR_FDS=W,R: the constructor writes one byte to W ("I am in"),
 * then reads one from R ("go on").
 */
#include <stdlib.h>
#include <unistd.h>

void nsbt_loader_ctor_loaded(void);

void
nsbt_loader_ctor_loaded(void)
{
}

__attribute__((constructor)) static void
stop_inside_dlopen(void)
{
	const char *fds = getenv("NSBT_CTOR_FDS");
	char *end, byte = 1;
	long w, r;

	if (!fds)
		return;
	w = strtol(fds, &end, 10);
	if (*end != ',')
		return;
	r = strtol(end + 1, NULL, 10);
	if (write((int)w, &byte, 1) != 1 || read((int)r, &byte, 1) != 1)
		_exit(5);
}
