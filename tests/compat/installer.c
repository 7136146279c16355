// SPDX-License-Identifier: MIT
/*
 * nsb-compat-installer.so: preloaded after libnosigbus in the comparison
 * runs (and alone in the runs without the library, so that both sides make
 * the same calls), it maps one page of a memfd with MAP_NOSIGBUS from a
 * constructor, then unmaps it and closes the memfd.  With the library that
 * is a protected mapping under every policy, so the library's SIGBUS
 * handler is installed before the program's main() -- and stays installed
 * -- and every signal call of the program goes through the library's
 * installed paths, not its pass-through.  Nothing is left behind: no
 * mapping, no descriptor (a protected mapping left in place whose
 * descriptor the program closed would have the library keep an O_PATH
 * descriptor of its own, the man page's "Descriptors": a documented
 * difference that a program listing its descriptors sees, as CPython's
 * test_subprocess test_pass_fds_redirected does).  Without the library the
 * kernel ignores the unknown flag of a MAP_SHARED mapping.  errno is kept.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nosigbus.h>

__attribute__((constructor)) static void nsb_compat_install(void)
{
	int saved = errno;
	long page = sysconf(_SC_PAGESIZE);
	int fd = memfd_create("nsb-compat", MFD_CLOEXEC);

	if (fd >= 0) {
		if (page > 0 && ftruncate(fd, page) == 0) {
			void *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_NOSIGBUS, fd, 0);

			if (p != MAP_FAILED)
				(void)munmap(p, (size_t)page);
		}
		close(fd);
	}
	errno = saved;
}
