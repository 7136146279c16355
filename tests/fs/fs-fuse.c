/* SPDX-License-Identifier: MIT */
/*
 * nsb-fs-fuse - a FUSE file system whose one file fails reads of chosen
 * pages with EIO, the way a disk with bad sectors does.  A page fault
 * on such a page gets SIGBUS inside the file's size: a file-system error
 * that libnosigbus must pass on (SPEC §5), unlike a page past the end.
 *
 * Usage: nsb-fs-fuse MOUNTPOINT
 * Runs in the foreground, single-threaded, until unmounted or sent
 * SIGTERM.  The layout is in fs.h.  A request that touches a bad page
 * fails as a whole: a short read would make the kernel believe the file
 * ended there and shrink its size.
 */
#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"

static size_t page;

static int
fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(path, "/" FS_FUSE_NAME) == 0) {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)(FS_FUSE_PAGES * page);
		return 0;
	}
	return -ENOENT;
}

static int
fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
	   struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/") != 0)
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, FS_FUSE_NAME, NULL, 0, 0);
	return 0;
}

static int
fs_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, "/" FS_FUSE_NAME) != 0)
		return -ENOENT;
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EACCES;
	return 0;
}

static int
fs_read(const char *path, char *buf, size_t size, off_t off,
	struct fuse_file_info *fi)
{
	size_t end = FS_FUSE_PAGES * page;
	size_t first, last;

	(void)fi;
	if (strcmp(path, "/" FS_FUSE_NAME) != 0)
		return -ENOENT;
	if (off < 0 || (size_t)off >= end || size == 0)
		return 0;
	if (size > end - (size_t)off)
		size = end - (size_t)off;
	first = (size_t)off / page;
	last = ((size_t)off + size - 1) / page;
	if (first < FS_FUSE_BAD_END && last >= FS_FUSE_BAD_FIRST)
		return -EIO;
	for (size_t i = 0; i < size; i++)
		buf[i] = (char)fs_tag(((size_t)off + i) / page);
	return (int)size;
}

static const struct fuse_operations ops = {
	.getattr = fs_getattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
};

int
main(int argc, char **argv)
{
	char *args[] = {
		argv[0], "-f", "-s", "-o", "fsname=nsbtest-eio,subtype=nsbtest",
		argc == 2 ? argv[1] : NULL, NULL,
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s MOUNTPOINT\n", argv[0]);
		return 2;
	}
	page = (size_t)sysconf(_SC_PAGESIZE);
	return fuse_main(6, args, &ops, NULL);
}
