/* SPDX-License-Identifier: MIT */
/*
 * memory.c - where the library's own memory comes from.
 *
 * Never malloc (we may be inside mmap called by malloc), and never a
 * mapping made whenever it is first needed: memory the library mapped
 * then would land in whatever the program had just freed, and a program
 * may take its own freed addresses back (with MAP_FIXED, as stress-ng
 * does, or by growing a neighbour with mremap): it would wipe the
 * library's state out, or find its room taken.  So everything comes from
 * one reservation, made once, when the library first needs memory (the
 * first protected mapping, or the first time the program blocks SIGBUS),
 * and too big to fit in a hole the program has just made: address space
 * only, committed page by page as it is used.  A hole at the edge of the
 * free address space is as big as that space, though, and the program may
 * be about to map into it (the first protected mapping is often a
 * MAP_FIXED into a range it reserved and released): the reservation is
 * made with room above it, GAP, that is given back at once, so that the
 * addresses the program has just released stay free.  If it cannot be made
 * (RLIMIT_AS), memory comes from mmap directly.  Nothing is ever given
 * back while the process lives: an optimistic reader of the table, or a
 * signal handler, may still be looking at it.
 *
 * Not used in signal context; callers hold one of the library's locks.
 */
#include <errno.h>
#include <sys/mman.h>

#include "nsb.h"

#define RESERVE		((size_t)96 << 20)
#define GAP		((size_t)64 << 20)	/* left free above it */
#define SMALL		((size_t)8 << 20)	/* for nsb_memory() */
#define SCRATCH		((size_t)8 << 20)	/* for nsb_scratch() */
#define TABLE_HALF	((RESERVE - SMALL - SCRATCH) / 2)	/* each copy of the table */

static char *reservation;	/* (char *)-1: could not be made */
static atomic_size_t small_used;
static size_t scratch_used, scratch_ready;	/* under the table lock */

static bool
reserved(void)
{
	void *p;

	if (!reservation) {
		p = nsb_sys_mmap(NULL, RESERVE + GAP, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED)
			(void)nsb_sys_munmap((char *)p + RESERVE, GAP);
		else	/* RLIMIT_AS: as close to the program as it may be */
			p = nsb_sys_mmap(NULL, RESERVE, PROT_NONE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		reservation = p == MAP_FAILED ? (char *)-1 : p;
	}
	return reservation != (char *)-1;
}

static size_t
pages(size_t bytes)
{
	size_t page = nsb_config.page_size;

	return (bytes + page - 1) & ~(page - 1);
}

/* bytes of zeroed memory, or NULL with errno ENOMEM.  NORESERVE: only the
 * pages used are committed. */
void *
nsb_memory(size_t bytes)
{
	size_t at;
	void *p;

	nsb_init();
	bytes = pages(bytes);
	if (reserved()) {
		at = atomic_fetch_add(&small_used, bytes);
		if (at + bytes <= SMALL) {
			if (nsb_sys_mprotect(reservation + at, bytes, PROT_READ | PROT_WRITE) == 0)
				return reservation + at;
			errno = ENOMEM;
			return NULL;
		}
	}
	p = nsb_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

/*
 * Memory for the length of one call, under the table lock: lists of
 * records and pieces.  Never a mapping of its own, which could land where
 * the call is about to put the program's mapping (MAP_FIXED, MREMAP_FIXED
 * into a range the program has just freed) and be torn down with it, or
 * tear it down when freed.  NULL when it is full (the caller then maps).
 */
void *
nsb_scratch(size_t bytes)
{
	char *base;

	bytes = (bytes + 15) & ~(size_t)15;
	if (!reserved() || scratch_used + bytes > SCRATCH)
		return NULL;
	base = reservation + SMALL;
	if (scratch_used + bytes > scratch_ready) {
		size_t ready = pages(scratch_used + bytes);

		if (nsb_sys_mprotect(base + scratch_ready, ready - scratch_ready,
				     PROT_READ | PROT_WRITE) < 0)
			return NULL;
		scratch_ready = ready;
	}
	scratch_used += bytes;
	return base + scratch_used - bytes;
}

/* The call is over (the table lock is released). */
void
nsb_scratch_reset(void)
{
	scratch_used = 0;
}

/*
 * The fixed home of copy `which` of the table, made usable up to bytes;
 * NULL when bytes is more than its share of the reservation (or there is
 * none): the table then moves to memory of its own (ranges.c).
 */
void *
nsb_memory_table(int which, size_t bytes)
{
	char *home;

	if (!reserved() || bytes > TABLE_HALF)
		return NULL;
	home = reservation + SMALL + SCRATCH + (size_t)which * TABLE_HALF;
	if (nsb_sys_mprotect(home, pages(bytes), PROT_READ | PROT_WRITE) < 0)
		return NULL;
	return home;
}
