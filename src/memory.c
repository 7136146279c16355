/* SPDX-License-Identifier: MIT */
/*
 * memory.c - where the library's own memory comes from.
 *
 * Never malloc (we may be inside mmap called by malloc), and never a
 * mapping wherever the kernel would put it at that moment: that is
 * whatever the program has just freed, and a program may take its own
 * freed addresses back (with MAP_FIXED, as stress-ng does, or by growing
 * a neighbour with mremap): it would wipe the library's state out, or
 * find its room taken (both seen: an mremap in place that failed, a
 * MAP_FIXED destination that was taken, the first protected mapping
 * being a MAP_FIXED into a range the program had just released).
 *
 * So the library's memory lives in an arena of address space far from
 * the program's activity: half way between the heap's break and the
 * address the kernel would give a new mapping now (terabytes from both
 * on 64-bit layouts; the kernel fills the free space from the top down
 * and would reach it last).  The arena is only addresses: each of its
 * areas (below) is mapped, with MAP_FIXED_NOREPLACE (which never replaces
 * anything of the program's), as far as it is used, so the library's
 * VmSize and RLIMIT_AS share grow with what it records and nothing is
 * taken before it is needed (a reservation made up front broke
 * `ulimit -v`): a first chunk of each area when the arena is placed (the
 * first time the library needs memory), then steps that double what an
 * area has.  Where a piece of an area cannot be mapped (the program
 * holds those addresses, or RLIMIT_AS), small memory comes from a plain
 * mmap and the other areas say so (NULL): their callers have fallbacks.
 * Nothing is ever given back while the process lives: an optimistic
 * reader of the table, or a signal handler, may still be looking at it.
 *
 * Not used in signal context; callers hold one of the library's locks
 * (so a fork never finds the memory lock held: the prepare handler holds
 * them all).
 */
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nsb.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Addresses only: an area costs nothing until it is used. */
static const size_t area_size[NSB_AREAS] = {
	[NSB_AREA_SMALL] = (size_t)32 << 20,	/* nsb_memory(): accounts of big mappings too */
	[NSB_AREA_SCRATCH] = (size_t)8 << 20,	/* nsb_scratch() */
	[NSB_AREA_TABLE0] = (size_t)40 << 20,	/* each copy of the table */
	[NSB_AREA_TABLE1] = (size_t)40 << 20,
	[NSB_AREA_FILES] = (size_t)4 << 20,	/* files.c's entries */
	[NSB_AREA_INDEX] = (size_t)1 << 20,	/* files.c's index */
	[NSB_AREA_PATHS] = (size_t)1 << 20,	/* files.c's paths (logging) */
};

/* An area grows by at least this, or by what it has: fewer, larger
 * steps, so that a call made at a tight RLIMIT_AS rarely needs one. */
#define CHUNK		((size_t)64 << 10)

static uintptr_t arena;		/* 0: not placed yet */
static size_t area_mapped[NSB_AREAS];
static size_t small_used;
size_t nsb_scratch_used;	/* nsb_scratch_reset() is inline (nsb.h) */
static pthread_mutex_t memory_mutex = PTHREAD_MUTEX_INITIALIZER;

static size_t
pages(size_t bytes)
{
	size_t page = nsb_config.page_size;

	return (bytes + page - 1) & ~(page - 1);
}

static uintptr_t
area_base(enum nsb_area a)
{
	uintptr_t at = arena;

	for (int i = 0; i < (int)a; i++)
		at += area_size[i];
	return at;
}

/*
 * Where the arena goes, once: between the break and where mappings are
 * made (the library's own, mapped there by the loader).  With the
 * legacy bottom-up layout (mappings above the heap, growing up) the probe
 * is above the break too but mappings grow towards the top: half the
 * probe's address is then below both.
 */
static void *area_ensure(enum nsb_area a, size_t bytes);

static void
place_arena(void)
{
	size_t total = 0;
	uintptr_t probe, low, at;

	for (int i = 0; i < NSB_AREAS; i++)
		total += area_size[i];
	/* Where mappings are made now: the library's own, which the loader
	 * made there.  (A probe mapping, made and unmapped, could take an
	 * address another thread is taking back with MAP_FIXED, and its
	 * munmap would undo that.) */
	probe = (uintptr_t)&arena;
	low = (uintptr_t)sbrk(0) + ((uintptr_t)1 << 30);	/* room for the heap */
	if (probe > low + 4 * total)
		at = low + (probe - low) / 2;
	else
		at = probe / 2;
	at &= ~(((uintptr_t)2 << 20) - 1);
	arena = at > total ? at : (uintptr_t)-1;
	/* A first chunk of each area now: what a call needs later, under a
	 * RLIMIT_AS the program set meanwhile, is then already there. */
	for (int i = 0; arena != (uintptr_t)-1 && i < NSB_AREAS; i++)
		if (i != NSB_AREA_PATHS || nsb_config.log)
			(void)area_ensure((enum nsb_area)i, CHUNK);
}

/* Maps area a (at base) up to upto bytes, from where it ends now. */
static bool
area_map(enum nsb_area a, char *base, size_t upto)
{
	size_t len = upto - area_mapped[a];
	void *p;

	p = nsb_sys_mmap(base + area_mapped[a], len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return false;
	if (p != base + area_mapped[a]) {
		/* A kernel before 4.17 took the flag for a hint. */
		(void)nsb_sys_munmap(p, len);
		return false;
	}
	area_mapped[a] = upto;
	return true;
}

/*
 * Area a usable (zeroed) up to bytes from its start: its base, or NULL.
 * Memory lock held.
 */
static void *
area_ensure(enum nsb_area a, size_t bytes)
{
	size_t want = pages(bytes);
	char *base;

	if (!arena)
		place_arena();
	if (arena == (uintptr_t)-1 || want > area_size[a])
		return NULL;
	base = (char *)area_base(a);
	if (want > area_mapped[a]) {
		/* Doubling from the first chunk on: with `> CHUNK` an area of
		 * exactly its first chunk grew by only what was asked (a page),
		 * an extra step soon after, against the comment above. */
		size_t grown = area_mapped[a] >= CHUNK ? 2 * area_mapped[a] : CHUNK;

		if (grown > area_size[a])
			grown = area_size[a];
		/* The step, or (RLIMIT_AS) just what is needed. */
		if ((grown <= want || !area_map(a, base, grown)) && !area_map(a, base, want))
			return NULL;
	}
	return base;
}

void *
nsb_memory_area(enum nsb_area a, size_t bytes)
{
	void *p;

	nsb_init();
	pthread_mutex_lock(&memory_mutex);
	p = area_ensure(a, bytes);
	pthread_mutex_unlock(&memory_mutex);
	return p;
}

/* bytes (whole pages) from the arena's small area, or NULL.  Memory lock
 * held. */
static void *
small_take(size_t bytes)
{
	char *base;

	bytes = pages(bytes);
	base = area_ensure(NSB_AREA_SMALL, small_used + bytes);
	if (!base)
		return NULL;
	small_used += bytes;
	return base + small_used - bytes;
}

/* bytes of zeroed memory, or NULL with errno ENOMEM.  NORESERVE: only the
 * pages used are committed. */
void *
nsb_memory(size_t bytes)
{
	void *p;

	nsb_init();
	pthread_mutex_lock(&memory_mutex);
	p = small_take(bytes);
	pthread_mutex_unlock(&memory_mutex);
	if (p)
		return p;
	/* The arena is full or taken: a mapping of its own. */
	bytes = pages(bytes);
	p = nsb_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

/*
 * [signal-safe] As nsb_memory, for a caller that may be a signal handler
 * (recvmsg): NULL, with nothing done, where another thread, or the one
 * this handler interrupted, is placing or growing the arena; and never a
 * mapping of its own.
 */
void *
nsb_memory_try(size_t bytes)
{
	void *p;

	if (pthread_mutex_trylock(&memory_mutex) != 0)
		return NULL;
	p = small_take(bytes);
	pthread_mutex_unlock(&memory_mutex);
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
	base = nsb_memory_area(NSB_AREA_SCRATCH, nsb_scratch_used + bytes);
	if (!base)
		return NULL;
	nsb_scratch_used += bytes;
	return base + nsb_scratch_used - bytes;
}

/* The call is over (the table lock is released). */

/*
 * The fixed home of copy `which` of the table, made usable up to bytes;
 * NULL when bytes is more than its area (or it cannot grow there): the
 * table then moves to memory of its own (ranges.c).
 */
void *
nsb_memory_table(int which, size_t bytes)
{
	return nsb_memory_area(which ? NSB_AREA_TABLE1 : NSB_AREA_TABLE0, bytes);
}
