/* SPDX-License-Identifier: MIT */
/*
 * maps.c - reads /proc/self/maps, for the two slow paths that need to know
 * the kernel's VMAs: mremap of a protected mapping that rescues split into
 * pieces, and nosigbus_protect() of an existing mapping.
 *
 * No malloc (we may be inside mmap called by malloc): one stack buffer,
 * parsed line by line.  Not used in signal context.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nsb.h"

static const char *
parse_hex(const char *p, uintptr_t *out)
{
	uintptr_t v = 0;

	for (;; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		v = v * 16 + d;
	}
	*out = v;
	return p;
}

/* "start-end perms offset dev inode   path" */
static bool
parse_line(const char *line, struct nsb_vma *vma)
{
	const char *p = line;
	uintptr_t inode;
	int field;

	p = parse_hex(p, &vma->start);
	if (*p++ != '-')
		return false;
	p = parse_hex(p, &vma->end);
	if (*p++ != ' ' || strlen(p) < 5)
		return false;
	vma->prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
		    (p[2] == 'x' ? PROT_EXEC : 0);
	vma->shared = p[3] == 's';
	/* Skip perms, offset and dev to reach the inode. */
	for (field = 0; field < 3; field++) {
		p = strchr(p, ' ');
		if (!p)
			return false;
		p++;
	}
	inode = 0;
	while (*p >= '0' && *p <= '9')
		inode = inode * 10 + (uintptr_t)(*p++ - '0');
	vma->anon = inode == 0;
	return true;
}

int
nsb_maps_each(uintptr_t lo, uintptr_t hi,
	      int (*fn)(const struct nsb_vma *vma, void *arg), void *arg)
{
	char buf[4096];
	size_t have = 0;
	int fd, ret = 0;
	bool eof = false;

	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (!ret) {
		char *nl;
		struct nsb_vma vma = { 0 };

		nl = memchr(buf, '\n', have);
		if (!nl) {
			ssize_t n;

			if (eof)
				break;
			if (have == sizeof(buf))	/* a line longer than the buffer: drop it */
				have = 0;
			n = read(fd, buf + have, sizeof(buf) - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				ret = -1;
				break;
			}
			if (n == 0)
				eof = true;
			have += (size_t)n;
			continue;
		}
		*nl = '\0';
		if (parse_line(buf, &vma) && vma.end > lo && vma.start < hi)
			ret = fn(&vma, arg);
		have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have);
		if (vma.start >= hi)
			break;
	}
	close(fd);
	return ret;
}
