/* SPDX-License-Identifier: MIT */
/*
 * policy.c - decides at mmap() time whether a mapping is protected.
 *
 * The decision is made from the file descriptor (fstatfs, fstat, fcntl),
 * never from a path, so a file cannot pretend to live in memory.  With
 * NOSIGBUS_POLICY=flag (the default) and no MAP_NOSIGBUS, this costs
 * nothing: no system call is made.
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

static unsigned
log2_of(size_t v)
{
	unsigned s = 0;

	while (((size_t)1 << s) < v)
		s++;
	return s;
}

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
	return kb ? log2_of(kb * 1024) : 21;
}

static uint32_t
remember_path(int fd)
{
	char link[64], path[4096];
	ssize_t n;

	if (!nsb_config.log)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = '\0';
	return nsb_paths_intern(path);
}

/* A memfd that can never shrink cannot fault past its end. */
static bool
cannot_shrink(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	return seals > 0 && (seals & F_SEAL_SHRINK);
}

bool
nsb_policy_protect(int prot, int flags, int fd, uint32_t *meta, uint32_t *path)
{
	bool anon = (flags & MAP_ANONYMOUS) || fd < 0;
	bool flagged = flags & MAP_NOSIGBUS;
	unsigned shift = log2_of(nsb_config.page_size);
	struct statfs fs;
	struct stat st;

	if (!flagged && (anon || nsb_config.policy == NSB_POLICY_FLAG))
		return false;

	if (anon) {
		if (flags & MAP_HUGETLB) {
			unsigned s = ((unsigned)flags >> MAP_HUGE_SHIFT) & MAP_HUGE_MASK;

			shift = s ? s : default_huge_shift();
		}
		*meta = NSB_META_ANON;
	} else {
		if (fstatfs(fd, &fs) < 0)
			return flagged;
		if (fs.f_type == HUGETLBFS_MAGIC)
			shift = log2_of((size_t)fs.f_bsize);
		if (!flagged) {
			bool in_memory = fs.f_type == TMPFS_MAGIC ||
					 fs.f_type == HUGETLBFS_MAGIC;

			if (nsb_config.policy == NSB_POLICY_SHM && !in_memory)
				return false;
			if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
				return false;
			if (in_memory && cannot_shrink(fd))
				return false;
		}
		*meta = 0;
	}
	*meta |= ((uint32_t)prot & NSB_META_PROT) | NSB_META_MKSHIFT(shift) |
		 NSB_META_MKPKEY(-1);
	if ((flags & MAP_TYPE) != MAP_PRIVATE)
		*meta |= NSB_META_SHARED;
	*path = anon ? 0 : remember_path(fd);
	return true;
}
