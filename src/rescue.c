/* SPDX-License-Identifier: MIT */
/*
 * rescue.c - the SIGBUS handler.
 *
 * Everything in this file runs in signal context.  It finds the record,
 * maps zero-filled private memory over the faulting page, and returns so
 * that the instruction runs again (SPEC §5).  No locks, no malloc, no
 * stdio; errno is preserved.  What is not rescued goes to
 * nsb_disp_chain(), which behaves as if the library were absent.
 */
#include <errno.h>
#include <sys/mman.h>

#include "nsb.h"

/* [signal-safe] Replaces [start, end) with zero pages at the recorded protection. */
static bool
replace(uintptr_t start, uintptr_t end, const struct nsb_range *r)
{
	int prot = (int)(r->meta & NSB_META_PROT);
	int pkey = NSB_META_PKEY(r->meta);
	void *p;

	p = nsb_sys_mmap((void *)start, end - start, prot,
			 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	if (pkey >= 0)
		(void)nsb_sys_pkey_mprotect(p, end - start, prot, pkey);
	return true;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* [signal-safe] Would reading the page at addr fault?  1 yes, 0 no, -1
 * cannot tell (kernels before 5.14, or another error). */
static int
would_fault(uintptr_t addr, size_t unit)
{
	if (madvise((void *)addr, unit, MADV_POPULATE_READ) == 0)
		return 0;
	return errno == EFAULT ? 1 : -1;
}

/*
 * [signal-safe] Where a range fill from start must stop: below the pages
 * that an earlier range fill replaced (and the program may have written
 * since).  Range fills make the replaced pages one tail of the record, so
 * a binary search finds its start; pages that still fault lie below it.
 * When the kernel cannot tell, fall back to one page: nothing is lost.
 */
static uintptr_t
range_end(uintptr_t start, const struct nsb_range *r, size_t unit)
{
	uintptr_t lo = start, hi = r->end;	/* lo faults; hi is past the end */

	if (!(r->meta & PROT_READ))
		return start + unit;
	while (hi - lo > unit) {
		uintptr_t mid = lo + (hi - lo) / unit / 2 * unit;
		int f = would_fault(mid, unit);

		if (f < 0)
			return start + unit;
		if (f)
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}

/*
 * Threads that fault on the same page at once must not each replace it:
 * the second replacement would throw away what the first thread wrote.
 * A rescue first claims its page (with range fill: its record) in this
 * small table; whoever finds it claimed returns and lets the instruction
 * fault again, which it will not once the owner is done.  Nobody waits.
 */
#define CLAIMS 64
static atomic_uintptr_t claims[CLAIMS];

/* [signal-safe] The slot claimed for key, or -1 if another rescue holds
 * key (or every slot is busy). */
static int
claim(uintptr_t key)
{
	unsigned first = (unsigned)((key >> 12) * 2654435761u) % CLAIMS;
	int mine = -1;

	for (unsigned i = 0; i < CLAIMS; i++) {
		unsigned k = (first + i) % CLAIMS;
		uintptr_t seen = atomic_load(&claims[k]);

		if (seen == 0 && mine < 0 &&
		    atomic_compare_exchange_strong(&claims[k], &seen, key)) {
			mine = (int)k;
			continue;
		}
		/* Checked after claiming too: of two claims, both back off. */
		if (seen == key && (int)k != mine) {
			if (mine >= 0)
				atomic_store(&claims[mine], 0);
			return -1;
		}
	}
	return mine;
}

/* [signal-safe] */
static void
release(int slot)
{
	atomic_store(&claims[slot], 0);
}

/* The page this thread last found already rescued by someone else, and
 * the table's version then (a later mapping at the same address is new). */
static __thread uintptr_t last_declined __attribute__((tls_model("initial-exec")));
static __thread unsigned long declined_version __attribute__((tls_model("initial-exec")));

/* [signal-safe] */
static bool
rescue(uintptr_t addr)
{
	struct nsb_range r;
	uintptr_t start, end;
	unsigned long version;
	size_t unit;
	bool ok;
	int ticket, slot;

	if (!nsb_ranges_enter(addr, &r, &ticket))
		return false;
	/* A huge page cannot be split: replace the whole of it. */
	unit = (size_t)1 << NSB_META_SHIFT(r.meta);
	start = addr & ~(uintptr_t)(unit - 1);
	if (start < r.start)
		start = r.start;

	slot = claim(nsb_config.fill == NSB_FILL_RANGE ? r.start : start);
	if (slot < 0) {
		nsb_ranges_leave(ticket);
		return true;	/* fault again; the owner will be done */
	}
	/* Another thread may have rescued (and written) it just before us.
	 * A page that reads fine but faulted anyway (a write the file system
	 * refused) comes back at once: replace it then. */
	version = nsb_ranges_version();
	if ((last_declined != start || declined_version != version) &&
	    would_fault(start, unit) == 0) {
		last_declined = start;
		declined_version = version;
		release(slot);
		nsb_ranges_leave(ticket);
		return true;
	}
	last_declined = 0;
	end = nsb_config.fill == NSB_FILL_RANGE ? range_end(start, &r, unit) : start + unit;
	if (end > r.end)
		end = r.end;

	ok = replace(start, end, &r);
	/* Out of VMAs (vm.max_map_count): one mapping for the rest of the
	 * record needs none, and merges what earlier rescues split (SPEC §5;
	 * what the program wrote into those earlier pages is lost then). */
	if (!ok && errno == ENOMEM && end < r.end) {
		end = r.end;
		ok = replace(start, end, &r);
	}
	release(slot);
	nsb_ranges_leave(ticket);

	if (!ok) {
		atomic_fetch_add(&nsb_counters.failures, 1);
		nsb_log_failure(addr, errno);
		return false;
	}
	atomic_fetch_add(&nsb_counters.rescues, 1);
	atomic_fetch_add(&nsb_counters.pages, (end - start) / nsb_config.page_size);
	nsb_log_rescue(addr, &r, (end - start) / nsb_config.page_size);
	return true;
}

/* [signal-safe] The SIGBUS handler the library installs. */
void
nsb_rescue_handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;

	/* Only a fault the kernel raised counts: si_code BUS_ADRERR cannot
	 * be sent by another process (the kernel refuses si_code >= 0). */
	if (si && si->si_code == BUS_ADRERR && rescue((uintptr_t)si->si_addr)) {
		errno = saved_errno;
		return;
	}
	errno = saved_errno;
	nsb_disp_chain(sig, si, uc);
}
