/* SPDX-License-Identifier: MIT */
/*
 * What the three programs of tests/fs agree on: the driver (fs-test.c),
 * the program it runs with and without the library (fs-prog.c) and the
 * FUSE file system that fails reads (fs-fuse.c).
 *
 * Sizes are in system pages, never bytes, so that every case means the
 * same on 4 KiB and 64 KiB pages.
 */
#ifndef FS_H
#define FS_H

#include <stddef.h>

/*
 * The FUSE file system has one read-only file, FS_FUSE_NAME, of
 * FS_FUSE_PAGES pages; page i holds fs_tag(i) in every byte.  Reads that
 * touch pages [FS_FUSE_BAD_FIRST, FS_FUSE_BAD_END) fail with EIO.  The bad
 * run is far from page 0 and from the end, and aligned, so that the
 * kernel's read-around and large folios never make a good page fail.
 */
#define FS_FUSE_NAME "data"
#define FS_FUSE_PAGES 64
#define FS_FUSE_BAD_FIRST 32
#define FS_FUSE_BAD_END 48

/* The byte that fills page i of a file written page by page: never 0. */
static inline unsigned char
fs_tag(size_t i)
{
	return (unsigned char)(i % 251 + 1);
}

#endif /* FS_H */
