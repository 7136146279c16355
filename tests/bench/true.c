/* SPDX-License-Identifier: MIT */
/*
 * true.c - a process that does nothing, started many times by the
 * benchmark's start-up figure and traced by the start-up test.
 *
 * With the argument "dladdr" it calls dladdr() once: the start-up test's
 * control that its spy (spy.c) sees such calls.
 */
#include <dlfcn.h>
#include <string.h>

int
main(int argc, char **argv)
{
	Dl_info info;

	if (argc > 1 && strcmp(argv[1], "dladdr") == 0)
		return dladdr((void *)argv, &info) >= 0 ? 0 : 1;
	return 0;
}
