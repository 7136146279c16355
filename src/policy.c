/* SPDX-License-Identifier: MIT */
/*
 * policy.c - decides at mmap() time whether a mapping is protected.
 *
 * The decision is made from the file descriptor (fstatfs, fstat, fcntl),
 * never from a path, so a file cannot pretend to live in memory.  With
 * NOSIGBUS_POLICY=flag and no MAP_NOSIGBUS, this costs
 * nothing: no system call is made.  The file itself (its descriptor kept
 * for the end-of-file check) is looked up by mman.c under the table lock.
 *
 * Not used in signal context.
 */
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "nosigbus.h"
#include "nsb.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_MASK
#define MAP_HUGE_MASK 0x3f
#endif

/* The default huge page size, for MAP_HUGETLB without a size. */
static unsigned
default_huge_shift(void)
{
	unsigned long kb = 0;
	char line[128];
	FILE *f;

	f = fopen("/proc/meminfo", "re");
	if (!f)
		return 21;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb ? nsb_log2(kb * 1024) : 21;
}

/* A memfd that can never shrink cannot fault past its end. */
static bool
cannot_shrink(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	return seals > 0 && (seals & F_SEAL_SHRINK);
}

/*
 * Can a write into this memory-backed file never be refused for room?  A
 * tmpfs without a size limit (memfds live on one) only refuses pages when
 * the kernel does not overcommit memory (vm.overcommit_memory=2).
 */
static bool
roomy(const struct statfs *fs)
{
	static int strict = -1;

	if (fs->f_type != TMPFS_MAGIC || fs->f_blocks != 0)
		return false;
	if (strict < 0) {
		char c = '0';
		int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			if (read(fd, &c, 1) != 1)
				c = '2';
			close(fd);
		}
		strict = c == '2';
	}
	return !strict;
}

void
nsb_policy_decide(int prot, int flags, int fd, struct nsb_decision *d)
{
	bool anon = (flags & MAP_ANONYMOUS) || fd < 0;
	bool flagged = flags & MAP_NOSIGBUS;
	unsigned shift = nsb_log2(nsb_config.page_size);
	struct statfs fs;

	d->protect = false;
	d->has_file = false;
	d->memfs = false;
	if (!flagged && (anon || nsb_config.policy == NSB_POLICY_FLAG))
		return;

	if (anon) {
		if (flags & MAP_HUGETLB) {
			unsigned s = ((unsigned)flags >> MAP_HUGE_SHIFT) & MAP_HUGE_MASK;

			shift = s ? s : default_huge_shift();
		}
		d->meta = NSB_META_ANON;
	} else {
		if (fstatfs(fd, &fs) < 0) {
			if (!flagged)
				return;
			fs.f_type = 0;
		}
		d->memfs = fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC;
		if (fs.f_type == HUGETLBFS_MAGIC)
			shift = nsb_log2((size_t)fs.f_bsize);
		d->has_file = fstat(fd, &d->st) == 0;
		if (!flagged) {
			if (nsb_config.policy == NSB_POLICY_SHM && !d->memfs)
				return;
			if (!d->has_file || !S_ISREG(d->st.st_mode))
				return;
			if (d->memfs && cannot_shrink(fd))
				return;
		}
		d->meta = d->memfs ? NSB_META_MEMFS : 0;
		if (roomy(&fs))
			d->meta |= NSB_META_ROOMY;
	}
	d->meta |= ((uint32_t)prot & NSB_META_PROT) | NSB_META_MKSHIFT(shift) |
		   NSB_META_MKPKEY(-1);
	if ((flags & MAP_TYPE) != MAP_PRIVATE)
		d->meta |= NSB_META_SHARED;
	d->protect = true;
}
