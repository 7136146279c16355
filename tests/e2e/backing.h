/* SPDX-License-Identifier: MIT */
/*
 * The file behind a hostile client's shared buffer (hostile-client.c, a
 * Wayland client; xshm-client.c, an X client): a client chooses its
 * descriptor, and the server receives it whatever it is.
 *
 *   memfd  memfd_create (what most Wayland clients use);
 *   shm    a file in /dev/shm (shm_open);
 *   disk   a file in DIR, which the test chooses on a disk file system.
 *
 * Never a sealed memfd: one sealed with F_SEAL_SHRINK could not be
 * truncated, which is the whole point of these clients (hostile-client's
 * --sealed-resize and xshm-client's --backing sealed make their own,
 * shorter than the buffer, instead).  The shm and disk
 * files are unlinked at once, so nothing is left behind when a client is
 * killed; the server maps them all the same.
 */
#ifndef NSB_E2E_BACKING_H
#define NSB_E2E_BACKING_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum backing { BACKING_MEMFD, BACKING_SHM, BACKING_DISK };

/* 0, or -1 for an unknown name. */
static inline int
parse_backing(const char *name, enum backing *backing)
{
	if (strcmp(name, "memfd") == 0)
		*backing = BACKING_MEMFD;
	else if (strcmp(name, "shm") == 0)
		*backing = BACKING_SHM;
	else if (strcmp(name, "disk") == 0)
		*backing = BACKING_DISK;
	else
		return -1;
	return 0;
}

/* An empty file of the backing, read-write, close-on-exec; -1 (said on
 * stderr, prefixed with who) when it cannot be made. */
static inline int
open_backing(enum backing backing, const char *dir, const char *who)
{
	char path[4096];
	int fd = -1;

	switch (backing) {
	case BACKING_MEMFD:
		fd = memfd_create("nosigbus-hostile", MFD_CLOEXEC);
		if (fd < 0)
			fprintf(stderr, "%s: memfd_create: %m\n", who);
		break;
	case BACKING_SHM:
		snprintf(path, sizeof(path), "/nosigbus-hostile-%ld",
			 (long)getpid());
		fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			fprintf(stderr, "%s: shm_open %s: %m\n", who, path);
		else
			shm_unlink(path);
		break;
	case BACKING_DISK:
		if ((size_t)snprintf(path, sizeof(path),
				     "%s/nosigbus-hostile-XXXXXX", dir) >=
		    sizeof(path)) {
			fprintf(stderr, "%s: --dir too long\n", who);
			break;
		}
		fd = mkostemp(path, O_CLOEXEC);
		if (fd < 0)
			fprintf(stderr, "%s: mkostemp %s: %m\n", who, path);
		else
			unlink(path);
		break;
	}
	return fd;
}

/*
 * Fills the first size bytes of the file with the 32-bit pixel, through a
 * mapping of our own that is gone before any truncation: the client
 * never faults.  0, or -1 (said on stderr, prefixed with who).
 */
static inline int
fill_backing(int fd, size_t size, uint32_t pixel, const char *who)
{
	uint32_t *pixels = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (pixels == MAP_FAILED) {
		fprintf(stderr, "%s: mmap: %m\n", who);
		return -1;
	}
	for (size_t i = 0; i < size / 4; i++)
		pixels[i] = pixel;
	munmap(pixels, size);
	return 0;
}

#endif
