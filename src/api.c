/* SPDX-License-Identifier: MIT */
/*
 * api.c - the public API of <nosigbus.h>, and the library's constructor.
 *
 * Not used in signal context.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>

#include "nosigbus.h"
#include "nsb.h"

struct protect_walk {
	uintptr_t start, end;
	uintptr_t next;		/* where the next VMA must start */
	bool hole;
	bool shared;
	struct nsb_saved recs;
};

/* One record per VMA of the range, as the kernel describes it: one pass
 * over /proc/self/smaps, for the page size of each (huge pages). */
static int
collect_vma(const struct nsb_vma *vma, void *arg)
{
	struct protect_walk *w = arg;
	bool anon = vma->anon || (vma->path && strncmp(vma->path, "/anon_hugepage", 14) == 0);
	bool memfs = false;
	struct nsb_range r;

	if (vma->start > w->next) {
		w->hole = true;
		return 1;
	}
	w->next = vma->end;
	w->shared |= vma->shared;
	r.start = vma->start < w->start ? w->start : vma->start;
	r.end = vma->end > w->end ? w->end : vma->end;
	r.off = anon ? 0 : vma->off + (r.start - vma->start);
	r.file = anon ? 0 : nsb_files_get_mapped(vma->start, vma->end, vma->dev, vma->ino,
						 vma->path, &memfs);
	r.meta = ((uint32_t)vma->prot & NSB_META_PROT) |
		 (vma->shared ? NSB_META_SHARED : 0) | (anon ? NSB_META_ANON : 0) |
		 (memfs ? NSB_META_MEMFS : 0) |
		 NSB_META_MKSHIFT(nsb_log2(vma->page_size ? vma->page_size : nsb_config.page_size)) |
		 NSB_META_MKPKEY(vma->pkey > 0 ? vma->pkey : -1) |
		 (vma->dontfork ? NSB_META_DONTFORK : 0) |
		 (vma->wipeonfork ? NSB_META_WIPEONFORK : 0) | vma->kept;
	/* Until nsb_record numbers it, gen carries whether the kernel lets
	 * the VMA become writable (record_unrecorded: mprotect's EACCES). */
	r.gen = vma->write;
	return nsb_saved_push(&w->recs, &r) < 0 ? -1 : 0;
}

/* Records the parts of the VMA piece r that no record in old (the
 * records of the range, lowest first, from *j on) covers.  What is
 * recorded already stays as it is: a record knows more than the maps (a
 * page rescued in a shared mapping of a file reads there as private
 * anonymous memory, yet MADV_REMOVE, nosigbus_refresh() and the account
 * of replaced pages need the file's record).  Table lock held. */
static void
record_unrecorded(const struct nsb_range *r, const struct nsb_saved *old, size_t *j)
{
	uintptr_t s = r->start;
	bool recorded = false;

	for (; s < r->end; (*j)++) {
		const struct nsb_range *o = *j < old->n ? &old->r[*j] : NULL;
		uintptr_t e = o && o->start < r->end ? o->start : r->end;

		if (s < e) {
			struct nsb_range piece = *r;

			piece.start = s;
			piece.end = e;
			if (!(r->meta & NSB_META_ANON))
				piece.off = r->off + (s - r->start);
			if (nsb_record(&piece) == 0) {
				recorded = true;
				if (r->gen && (r->meta & NSB_META_SHARED) && !(r->meta & NSB_META_ANON))
					nsb_account_set_may_write(piece.acct, r->gen == NSB_VMA_MAY_WRITE);
			}
		}
		if (!o || o->start >= r->end)
			break;
		if (o->end > r->end)	/* the next VMA piece starts in it */
			break;
		s = o->end;
	}
	/* An entry of the files named by no record goes (files.c). */
	if (!recorded && r->file) {
		nsb_files_ref(r->file, 1);
		nsb_files_ref(r->file, -1);
	}
}

/* [addr, addr + len) as whole pages: false (errno EINVAL) if addr is not
 * page aligned or the span is empty or wraps. */
static bool
user_span(void *addr, size_t len, uintptr_t *start, uintptr_t *end)
{
	size_t ps;

	nsb_enter();
	ps = nsb_config.page_size;
	*start = (uintptr_t)addr;
	/* Its end, rounded up to a page, must not wrap (from the last page,
	 * UINTPTR_MAX - start - ps would wrap itself). */
	if (!len || (*start & (ps - 1)) || *start > UINTPTR_MAX - ps ||
	    len > UINTPTR_MAX - ps - *start) {
		errno = EINVAL;
		return false;
	}
	*end = (*start + len + ps - 1) & ~(uintptr_t)(ps - 1);
	return true;
}

NSB_EXPORT int
nosigbus_protect(void *addr, size_t len)
{
	uintptr_t start, end;
	struct protect_walk w;
	struct nsb_saved old;
	int ret = -1, err = 0;

	if (!user_span(addr, len, &start, &end))
		return -1;
	/* From a handler that interrupted this thread's own call to the
	 * library (ranges.c, nested calls): the table is that call's. */
	if (nsb_ranges_nested()) {
		errno = EAGAIN;
		return -1;
	}

	memset(&w, 0, sizeof(w));
	w.start = w.next = start;
	w.end = end;
	nsb_saved_init(&w.recs);
	nsb_saved_init(&old);
	nsb_ranges_lock();
	if (nsb_maps_each(start, end, true, collect_vma, &w) != 0 || w.hole || w.next < end) {
		err = ENOMEM;
		goto out;
	}
	if (w.shared && nsb_config.strict) {
		err = EINVAL;
		goto out;
	}
	if (nsb_ranges_collect(start, end, &old) < 0 ||
	    nsb_ranges_reserve(w.recs.n + old.n + 4) < 0) {
		err = ENOMEM;
		goto out;
	}
	/* Faults in the range wait until it is recorded. */
	nsb_ranges_flux(start, end, 0, 0);
	for (size_t i = 0, j = 0; i < w.recs.n; i++)
		record_unrecorded(&w.recs.r[i], &old, &j);
	nsb_ranges_flux_end();
	ret = 0;
out:
	nsb_ranges_unlock();
	nsb_saved_free(&w.recs);
	nsb_saved_free(&old);
	if (ret < 0)
		errno = err;
	return ret;
}

NSB_EXPORT int
nosigbus_unprotect(void *addr, size_t len)
{
	uintptr_t start, end;
	int ret;

	if (!user_span(addr, len, &start, &end))
		return -1;
	/* Nested (ranges.c): the table is the interrupted call's, and a
	 * note would not do: its settle keeps the records of what the kernel
	 * still shows, which an unprotect leaves mapped. */
	if (nsb_ranges_nested()) {
		errno = EAGAIN;
		return -1;
	}
	nsb_ranges_lock();
	ret = nsb_ranges_cut(start, end);
	nsb_ranges_unlock();
	if (ret < 0)
		errno = ENOMEM;
	return ret;
}

NSB_EXPORT long
nosigbus_refresh(void *addr, size_t len)
{
	int saved_errno = errno;
	uintptr_t start, end;
	size_t pages;

	if (!user_span(addr, len, &start, &end))
		return -1;
	if (nsb_ranges_nested())	/* (ranges.c) nothing shown again */
		return 0;
	nsb_ranges_lock();
	pages = nsb_refresh(start, end, false);
	nsb_ranges_unlock();
	errno = saved_errno;
	return pages > LONG_MAX ? LONG_MAX : (long)pages;
}

NSB_EXPORT int
nosigbus_get_stats(struct nosigbus_stats *stats, size_t size)
{
	struct nosigbus_stats s;

	if (!stats || size < sizeof(uint64_t)) {
		errno = EINVAL;
		return -1;
	}
	s.rescues = atomic_load(&nsb_counters.rescues);
	s.pages = atomic_load(&nsb_counters.pages);
	s.failures = atomic_load(&nsb_counters.failures);
	s.mappings = nsb_ranges_count();
	s.unverified = atomic_load(&nsb_counters.unverified);
	s.unchecked = atomic_load(&nsb_counters.unchecked);
	s.lost = atomic_load(&nsb_counters.lost);
	memcpy(stats, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}

/*
 * Runs before main when preloaded or linked; every shim also copes with
 * being called earlier (nsb_init, real.c).  Loading the library must cost
 * what loading an empty one costs (SPEC §9): no system call here, and no
 * symbol lookup (real.c looks each function up on its first use, or all
 * at once before a second thread exists).
 */
__attribute__((constructor(103))) static void
library_init(void)
{
	nsb_real_start();
	nsb_process_start();	/* fork handlers first, so they run outermost */
	/* Loaded (dlopen) into a process that already runs threads. */
	if (!__libc_single_threaded)
		nsb_real_find_all();
	nsb_config_read();
	nsb_disp_start();
	nsb_log_init();
}
