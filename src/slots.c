/* SPDX-License-Identifier: MIT */
/*
 * slots.c - the library's signal-safe slots (nsb.h): who holds what, one
 * word each, taken and let go by one atomic instruction, so that a thread
 * interrupted (or a vfork child killed) between any two instructions
 * leaves a state that tells exactly what it holds.  Used by process.c
 * (threads that hold a lock without the mask, policy mappings in flight)
 * and ranges.c (a marked vfork child's reader tickets).  No system call.
 *
 * Signal context: all of it.
 */
#include "nsb.h"

atomic_uintptr_t nsb_slot_words[NSB_SLOT_WORDS];

/* [signal-safe] */
int
nsb_slots_claim(atomic_uintptr_t *s, unsigned n, uintptr_t key, unsigned first)
{
	nsb_holds_up();
	for (unsigned i = 0; i < n; i++) {
		unsigned at = (first + i) & (n - 1);
		uintptr_t none = 0;

		if (atomic_compare_exchange_strong(&s[at], &none, key))
			return (int)at;
	}
	nsb_holds_down();
	return -1;
}

/* [signal-safe] */
bool
nsb_slots_release(atomic_uintptr_t *s, unsigned n, uintptr_t key, unsigned first)
{
	for (unsigned i = 0; i < n; i++) {
		uintptr_t mine = key;

		if (atomic_compare_exchange_strong(&s[(first + i) & (n - 1)], &mine, 0)) {
			nsb_holds_down();
			return true;
		}
	}
	return false;
}

/* [signal-safe] */
unsigned
nsb_slots_count(atomic_uintptr_t *s, unsigned n, uintptr_t key)
{
	unsigned c = 0;

	for (unsigned i = 0; key != 0 && i < n; i++)
		c += atomic_load_explicit(&s[i], memory_order_relaxed) == key;
	return c;
}

void
nsb_slots_drop(atomic_uintptr_t *s, unsigned n, uintptr_t key, unsigned keep)
{
	for (unsigned c = nsb_slots_count(s, n, key); c > keep; c--)
		(void)nsb_slots_release(s, n, key, 0);
}

void
nsb_slots_keep_only(atomic_uintptr_t *s, unsigned n, uintptr_t key)
{
	for (unsigned i = 0; i < n; i++)
		if (atomic_load(&s[i]) != key)
			atomic_store(&s[i], 0);
}
