/* SPDX-License-Identifier: MIT */
/*
 * api.c - the public API of <nosigbus.h>, and the library's constructor.
 *
 * Not used in signal context.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "nosigbus.h"
#include "nsb.h"

struct protect_walk {
	uintptr_t next;
	bool hole;
	struct nsb_saved vmas;
};

static int
collect_vma(const struct nsb_vma *vma, void *arg)
{
	struct protect_walk *w = arg;
	struct nsb_range r = { .start = vma->start, .end = vma->end };

	if (vma->start > w->next) {
		w->hole = true;
		return 1;
	}
	r.meta = ((uint32_t)vma->prot & NSB_META_PROT) |
		 (vma->shared ? NSB_META_SHARED : 0) | (vma->anon ? NSB_META_ANON : 0);
	w->next = vma->end;
	return nsb_saved_push(&w->vmas, &r) < 0 ? -1 : 0;
}

NSB_EXPORT int
nosigbus_protect(void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end;
	struct protect_walk w = { .next = start };
	int ret = -1, err = 0;

	nsb_init();
	if (!len || (start & (nsb_config.page_size - 1)) ||
	    len > UINTPTR_MAX - start - nsb_config.page_size) {
		errno = EINVAL;
		return -1;
	}
	end = (start + len + nsb_config.page_size - 1) & ~(uintptr_t)(nsb_config.page_size - 1);

	nsb_saved_init(&w.vmas);
	nsb_ranges_lock();
	if (nsb_maps_each(start, end, collect_vma, &w) != 0 || w.hole || w.next < end) {
		err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < w.vmas.n; i++) {
		if ((w.vmas.r[i].meta & NSB_META_SHARED) && nsb_config.strict) {
			err = EINVAL;
			goto out;
		}
	}
	if (nsb_ranges_cut(start, end, NULL) < 0 || nsb_ranges_reserve(w.vmas.n + 2) < 0) {
		err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < w.vmas.n; i++) {
		struct nsb_range *r = &w.vmas.r[i];
		uintptr_t s = r->start < start ? start : r->start;
		uintptr_t e = r->end > end ? end : r->end;

		/* hugetlbfs: a rescue must replace whole huge pages. */
		unsigned shift = (unsigned)__builtin_ctzl(nsb_maps_page_size(s));

		if (nsb_protect_range(s, e, r->meta | NSB_META_MKSHIFT(shift) |
				      NSB_META_MKPKEY(-1), 0) < 0) {
			nsb_ranges_cut(start, end, NULL);
			err = ENOMEM;
			goto out;
		}
	}
	ret = 0;
out:
	nsb_ranges_unlock();
	nsb_saved_free(&w.vmas);
	if (ret < 0)
		errno = err;
	return ret;
}

NSB_EXPORT int
nosigbus_unprotect(void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end;
	int ret;

	nsb_init();
	if (!len || (start & (nsb_config.page_size - 1)) ||
	    len > UINTPTR_MAX - start - nsb_config.page_size) {
		errno = EINVAL;
		return -1;
	}
	end = (start + len + nsb_config.page_size - 1) & ~(uintptr_t)(nsb_config.page_size - 1);
	nsb_ranges_lock();
	ret = nsb_ranges_cut(start, end, NULL);
	nsb_ranges_unlock();
	if (ret < 0)
		errno = ENOMEM;
	return ret;
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
	memcpy(stats, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}

/*
 * Runs before main when preloaded or linked; every shim also copes with
 * being called earlier (nsb_init, real.c).  Loading the library must cost
 * what loading an empty one costs (SPEC §9): no system call here, and no
 * symbol lookup (real.c looks each function up on its first use).
 */
__attribute__((constructor(103))) static void
library_init(void)
{
	nsb_real_start();
	nsb_config_read();
	nsb_log_init();
}
