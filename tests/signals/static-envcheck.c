/* SPDX-License-Identifier: MIT */
/*
 * static-envcheck - a statically linked program, which never loads
 * libnosigbus: does its environment carry the library's hand-off
 * variable?  (issue 20 item 8; run by sigtest's handoff-rules scenario.)
 */
#include <stdio.h>
#include <stdlib.h>

int
main(void)
{
	printf("%s\n", getenv("NOSIGBUS_INHERIT_IGNORED") ? "hand-off variable" : "no hand-off variable");
	return 0;
}
