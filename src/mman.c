/* SPDX-License-Identifier: MIT */
/*
 * mman.c - the interposed mmap, mmap64, munmap, mremap, mprotect and
 * pkey_mprotect.
 *
 * Each keeps libc's contract exactly (MAP_FAILED/-1 and errno) and, for a
 * call that touches no protected mapping and makes none, costs one
 * lock-free check.  The rules (SPEC §4):
 *  - MAP_NOSIGBUS never reaches the kernel;
 *  - records are cut *before* a call that can hand their addresses to
 *    someone else (munmap, mremap, MAP_FIXED), and put back if it fails;
 *  - a protected mapping that cannot be recorded is undone (ENOMEM).
 *
 * Not used in signal context.
 */
/* Meson builds with _FILE_OFFSET_BITS=64, which makes glibc's headers
 * rename mmap to mmap64; we define both names ourselves. */
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>

#include "nosigbus.h"
#include "nsb.h"

static inline uintptr_t
round_up(uintptr_t v, size_t unit)
{
	return (v + unit - 1) & ~(uintptr_t)(unit - 1);
}

static inline bool
page_aligned(uintptr_t v)
{
	return (v & (nsb_config.page_size - 1)) == 0;
}

/* [start, start + len rounded to pages), or false if it wraps around. */
static bool
span_of(void *addr, size_t len, uintptr_t *start, uintptr_t *end)
{
	*start = (uintptr_t)addr;
	if (len > UINTPTR_MAX - *start - nsb_config.page_size)
		return false;
	*end = round_up(*start + len, nsb_config.page_size);
	return true;
}

/* Is [start, end) still mapped?  (After a failed MAP_FIXED the kernel
 * may or may not have unmapped the old mapping.) */
static bool
still_mapped(uintptr_t start, uintptr_t end)
{
	unsigned char vec[256];
	size_t page = nsb_config.page_size;

	for (uintptr_t a = start; a < end; a += sizeof(vec) * page) {
		size_t n = (end - a) / page;

		if (n > sizeof(vec))
			n = sizeof(vec);
		if (mincore((void *)a, n * page, vec) < 0)
			return false;
	}
	return true;
}

int
nsb_protect_range(uintptr_t start, uintptr_t end, uint32_t meta, uint32_t path)
{
	nsb_disp_install();
	return nsb_ranges_insert(start, end, meta, path);
}

static void *
do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	int kflags = flags & ~MAP_NOSIGBUS;
	bool fixed = (flags & MAP_FIXED) != 0;
	uintptr_t start, end;
	struct nsb_saved saved;
	uint32_t meta = 0, path = 0;
	bool protect;
	void *p;
	int err;

	nsb_init();
	/* The fast path: nothing to record, nothing to cut. */
	if (!(flags & MAP_NOSIGBUS) && nsb_config.policy == NSB_POLICY_FLAG &&
	    (!fixed || !span_of(addr, len, &start, &end) ||
	     !nsb_ranges_overlap(start, end)))
		return nsb_sys_mmap(addr, len, prot, kflags, fd, off);

	protect = nsb_policy_protect(prot, flags, fd, &meta, &path);
	if (protect && (meta & NSB_META_SHARED) && nsb_config.strict) {
		if (flags & MAP_NOSIGBUS) {
			/* The v2 patch: MAP_NOSIGBUS is for private mappings.
			 * MAP_SHARED_VALIDATE has the MAP_PRIVATE bit, passes
			 * that test, and fails validation of the unknown flag. */
			errno = (flags & MAP_TYPE) == MAP_SHARED_VALIDATE ? EOPNOTSUPP : EINVAL;
			return MAP_FAILED;
		}
		protect = false;	/* policies follow v2 too */
	}
	fixed = fixed && span_of(addr, len, &start, &end) && page_aligned(start) &&
		len && nsb_ranges_overlap(start, end);
	if (!protect && !fixed)
		return nsb_sys_mmap(addr, len, prot, kflags, fd, off);

	nsb_saved_init(&saved);
	nsb_ranges_lock();
	if (fixed && nsb_ranges_cut(start, end, &saved) < 0) {
		p = MAP_FAILED;
		err = ENOMEM;
		goto out;
	}
	/* Make room first: after the mapping exists, recording it must not fail. */
	if (protect && nsb_ranges_reserve(2) < 0) {
		p = MAP_FAILED;
		err = ENOMEM;
		if (fixed)
			nsb_ranges_restore(&saved);
		goto out;
	}
	p = nsb_sys_mmap(addr, len, prot, kflags, fd, off);
	err = errno;
	if (p == MAP_FAILED) {
		if (fixed && still_mapped(start, end))
			nsb_ranges_restore(&saved);
		goto out;
	}
	if (protect) {
		size_t unit = (size_t)1 << NSB_META_SHIFT(meta);
		uintptr_t s = (uintptr_t)p;

		if (nsb_protect_range(s, round_up(s + len, unit), meta, path) < 0) {
			nsb_sys_munmap(p, len);
			p = MAP_FAILED;
			err = ENOMEM;
		}
	}
out:
	nsb_ranges_unlock();
	nsb_saved_free(&saved);
	errno = err;
	return p;
}

NSB_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	int saved_errno;
	void *p;

	/* Most calls: no flag, no policy, nothing replaced.  (The policy is
	 * only known once page_size is set.) */
	if (__builtin_expect(!(flags & (MAP_NOSIGBUS | MAP_FIXED)) &&
			     nsb_config.policy == NSB_POLICY_FLAG && nsb_config.page_size, 1))
		return nsb_sys_mmap(addr, len, prot, flags, fd, off);
	saved_errno = errno;
	p = do_mmap(addr, len, prot, flags, fd, off);

	if (p != MAP_FAILED)
		errno = saved_errno;
	return p;
}

NSB_EXPORT void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

NSB_EXPORT int
munmap(void *addr, size_t len)
{
	uintptr_t start, end;
	struct nsb_saved saved;
	int ret, err;

	if (nsb_ranges_count() == 0)
		return nsb_sys_munmap(addr, len);
	nsb_init();
	if (!span_of(addr, len, &start, &end) || !page_aligned(start) || !len ||
	    !nsb_ranges_overlap(start, end))
		return nsb_sys_munmap(addr, len);

	nsb_saved_init(&saved);
	nsb_ranges_lock();
	if (nsb_ranges_cut(start, end, &saved) < 0) {
		nsb_ranges_unlock();
		errno = ENOMEM;
		return -1;
	}
	ret = nsb_sys_munmap(addr, len);
	err = errno;
	if (ret < 0)
		nsb_ranges_restore(&saved);
	nsb_ranges_unlock();
	nsb_saved_free(&saved);
	errno = err;
	return ret;
}

/* ---- mprotect ---------------------------------------------------------- */

struct span {
	uintptr_t start, end;
};

/* Records of [start, end) take the protection the kernel reports. */
static int
sync_prot(const struct nsb_vma *vma, void *arg)
{
	const struct span *sp = arg;
	uintptr_t s = vma->start < sp->start ? sp->start : vma->start;
	uintptr_t e = vma->end > sp->end ? sp->end : vma->end;

	(void)nsb_ranges_set_prot(s, e, vma->prot, -1);
	return 0;
}

static int
do_mprotect(void *addr, size_t len, int prot, int pkey, bool with_pkey)
{
	uintptr_t start, end;
	struct nsb_saved saved;
	int ret, err;

	nsb_init();
	if (!span_of(addr, len, &start, &end) || !page_aligned(start) ||
	    !nsb_ranges_overlap(start, end))
		return with_pkey ? nsb_sys_pkey_mprotect(addr, len, prot, pkey)
				 : nsb_sys_mprotect(addr, len, prot);

	/* Record first, so that a rescue racing with us already uses the
	 * new protection; set right if the kernel refused the call. */
	nsb_saved_init(&saved);
	nsb_ranges_lock();
	if (nsb_ranges_collect(start, end, &saved) < 0 ||
	    nsb_ranges_set_prot(start, end, prot, with_pkey ? pkey : -1) < 0) {
		nsb_ranges_unlock();
		nsb_saved_free(&saved);
		errno = ENOMEM;
		return -1;
	}
	ret = with_pkey ? nsb_sys_pkey_mprotect(addr, len, prot, pkey)
			: nsb_sys_mprotect(addr, len, prot);
	err = errno;
	if (ret < 0) {
		/* The kernel may have changed a part before it stopped (at a
		 * hole, say): put the records back, then take each VMA's
		 * protection as it really is now. */
		struct span sp = { start, end };

		nsb_ranges_cut(start, end, NULL);
		nsb_ranges_restore(&saved);
		nsb_maps_each(start, end, sync_prot, &sp);
	}
	nsb_ranges_unlock();
	nsb_saved_free(&saved);
	errno = err;
	return ret;
}

NSB_EXPORT int
mprotect(void *addr, size_t len, int prot)
{
	return do_mprotect(addr, len, prot, -1, false);
}

NSB_EXPORT int
pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	return do_mprotect(addr, len, prot, pkey, true);
}

/* ---- mremap ------------------------------------------------------------ */

/*
 * After rescues, a protected mapping is several VMAs to the kernel, and its
 * mremap fails with EFAULT.  To the program it is one mapping, as it would
 * be with the kernel patch, so we move it piece by piece.
 */
struct pieces {
	struct nsb_saved list;	/* start/end of each VMA; meta NSB_META_ANON */
	uintptr_t next;		/* where the next piece must start */
	uintptr_t end;		/* where the mapping ends */
	bool hole;
};

static int
collect_piece(const struct nsb_vma *vma, void *arg)
{
	struct pieces *pc = arg;
	struct nsb_range r = { .start = vma->start, .end = vma->end,
			       .meta = vma->anon ? NSB_META_ANON : 0 };

	if (vma->start > pc->next) {
		pc->hole = true;
		return 1;
	}
	/* A rescued page merges with anonymous neighbours: clip. */
	if (r.start < pc->next)
		r.start = pc->next;
	if (r.end > pc->end)
		r.end = pc->end;
	pc->next = r.end;
	return nsb_saved_push(&pc->list, &r) < 0 ? -1 : 0;
}

static void *
remap_pieces(uintptr_t old, size_t old_len, size_t new_len, int flags, uintptr_t dest)
{
	uintptr_t old_end = old + old_len;
	struct pieces pc = { .next = old, .end = old_end };
	void *ret = MAP_FAILED;
	int err = EFAULT;

	nsb_saved_init(&pc.list);
	if (nsb_maps_each(old, old_end, collect_piece, &pc) != 0 || pc.hole ||
	    pc.next < old_end || pc.list.n == 0)
		goto out;

	if (!(flags & MREMAP_FIXED) && new_len <= old_len) {
		if (new_len < old_len && nsb_sys_munmap((void *)(old + new_len), old_len - new_len) < 0) {
			err = errno;
			goto out;
		}
		ret = (void *)old;
		goto out;
	}
	if (!(flags & MREMAP_FIXED)) {
		/* Grow in place by growing the last piece. */
		struct nsb_range *last = &pc.list.r[pc.list.n - 1];
		size_t len = last->end - last->start;

		if (nsb_sys_mremap((void *)last->start, len, len + new_len - old_len, 0, NULL) != MAP_FAILED) {
			ret = (void *)old;
			goto out;
		}
		if (!(flags & MREMAP_MAYMOVE)) {
			err = ENOMEM;
			goto out;
		}
		/* A reservation that the pieces will replace. */
		ret = nsb_sys_mmap(NULL, new_len, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (ret == MAP_FAILED) {
			err = errno;
			goto out;
		}
		dest = (uintptr_t)ret;
	} else {
		ret = (void *)dest;
	}
	for (size_t i = 0; i < pc.list.n; i++) {
		struct nsb_range *p = &pc.list.r[i];
		size_t off = p->start - old, len = p->end - p->start, to;

		if (off >= new_len) {
			nsb_sys_munmap((void *)p->start, len);
			continue;
		}
		to = len < new_len - off ? len : new_len - off;
		if (i == pc.list.n - 1 && new_len > old_len)
			to += new_len - old_len;
		if (nsb_sys_mremap((void *)p->start, len, to, MREMAP_MAYMOVE | MREMAP_FIXED,
				   (void *)(dest + off)) == MAP_FAILED) {
			/* Half moved: nothing sane to go back to. */
			err = errno;
			ret = MAP_FAILED;
			goto out;
		}
	}
out:
	nsb_saved_free(&pc.list);
	if (ret == MAP_FAILED)
		errno = err;
	return ret;
}

NSB_EXPORT void *
mremap(void *old_addr, size_t old_len, size_t new_len, int flags, ...)
{
	uintptr_t old = (uintptr_t)old_addr, old_end, dest = 0, dest_end = 0;
	struct nsb_saved from, over;
	bool moves_old, covers_dest = false;
	uint32_t tail_meta = 0, tail_path = 0;
	bool has_tail = false;
	void *new_addr = NULL, *p;
	int err;

	if (flags & MREMAP_FIXED) {
		va_list ap;

		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
		dest = (uintptr_t)new_addr;
	}
	nsb_init();
	if (!page_aligned(old) || !new_len ||
	    !span_of(old_addr, old_len ? old_len : 1, &old, &old_end) ||
	    ((flags & MREMAP_FIXED) && !span_of(new_addr, new_len, &dest, &dest_end)))
		return nsb_sys_mremap(old_addr, old_len, new_len, flags, new_addr);
	covers_dest = (flags & MREMAP_FIXED) && nsb_ranges_overlap(dest, dest_end);
	if (!nsb_ranges_overlap(old, old_end) && !covers_dest)
		return nsb_sys_mremap(old_addr, old_len, new_len, flags, new_addr);

	/* old_len == 0 duplicates a shared mapping; DONTUNMAP keeps the old
	 * range mapped.  In both cases its records stay. */
	moves_old = old_len && !(flags & MREMAP_DONTUNMAP);
	nsb_saved_init(&from);
	nsb_saved_init(&over);
	nsb_ranges_lock();
	if (nsb_ranges_collect(old, old_end, &from) < 0 ||
	    nsb_ranges_reserve(from.n + 2) < 0)
		goto nomem;
	if (from.n && from.r[from.n - 1].end == old_end) {
		has_tail = true;
		tail_meta = from.r[from.n - 1].meta;
		tail_path = from.r[from.n - 1].path;
	}
	if (moves_old && nsb_ranges_cut(old, old_end, NULL) < 0)
		goto nomem;
	if (covers_dest && nsb_ranges_cut(dest, dest_end, &over) < 0) {
		if (moves_old)
			nsb_ranges_restore(&from);
		goto nomem;
	}

	p = nsb_sys_mremap(old_addr, old_len, new_len, flags, new_addr);
	err = errno;
	if (p == MAP_FAILED && err == EFAULT && moves_old && from.n &&
	    from.r[0].start == old && has_tail)
		p = remap_pieces(old, old_end - old, new_len, flags, dest), err = errno;
	if (p == MAP_FAILED) {
		if (moves_old)
			nsb_ranges_restore(&from);
		nsb_ranges_restore(&over);
		goto out;
	}

	/* The records follow the mapping; a grown tail is protected too. */
	{
		uintptr_t base = (uintptr_t)p;
		size_t keep = new_len < (size_t)(old_end - old) ? new_len : (size_t)(old_end - old);

		for (size_t i = 0; i < from.n; i++) {
			uintptr_t s = from.r[i].start - old, e = from.r[i].end - old;

			if (s >= keep)
				continue;
			if (e > keep)
				e = keep;
			(void)nsb_ranges_insert(base + s, base + e, from.r[i].meta, from.r[i].path);
		}
		if (has_tail && new_len > keep)
			(void)nsb_ranges_insert(base + keep, round_up(base + new_len, nsb_config.page_size),
						tail_meta, tail_path);
	}
	goto out;

nomem:
	p = MAP_FAILED;
	err = ENOMEM;
out:
	nsb_ranges_unlock();
	nsb_saved_free(&from);
	nsb_saved_free(&over);
	errno = err;
	return p;
}
