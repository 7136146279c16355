// SPDX-License-Identifier: MIT
/*
 * nsb-probe: what killed systemd units under the library's old code, done
 * by a unit of the project's own (tests/boot/nspawn-boot runs it as a
 * system unit and a user unit with SystemCallFilter=@system-service and no
 * SystemCallErrorNumber=, the kill action):
 *
 *  - every signal blocked, then a thread started (GLib does this: the
 *    library's old warm-up mincore(NULL, 0) ran here and killed
 *    wireplumber, upower and fprintd);
 *  - a memfd mapped shared, its descriptor closed while mapped (the old
 *    open_tree, in @mount), unmapped;
 *  - a /dev/shm file mapped and its descriptor closed (shm_open);
 *  - a disk file mapped (the policy's statx/fstatfs).
 *
 * Prints one line per step and "nsb-probe: ok" at the end; any failure
 * exits 1 saying which step.  Without the library it does nothing that
 * @system-service refuses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIZE 65536

static void
fail(const char *what)
{
	printf("nsb-probe: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *
thread(void *arg)
{
	return arg;
}

static void
map_and_close(int fd, const char *what)
{
	char *p;

	if (ftruncate(fd, SIZE) != 0)
		fail(what);
	p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		fail(what);
	close(fd);	/* while mapped */
	memset(p, 0x5a, SIZE);
	if (p[SIZE - 1] != 0x5a || munmap(p, SIZE) != 0)
		fail(what);
	printf("nsb-probe: %s mapped, its descriptor closed, unmapped\n", what);
}

int
main(void)
{
	sigset_t all, old;
	pthread_t t;
	char name[64];
	int fd, err;
	void *p;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigfillset(&all);
	if ((err = pthread_sigmask(SIG_BLOCK, &all, &old)) != 0 ||
	    (err = pthread_create(&t, NULL, thread, NULL)) != 0 ||
	    (err = pthread_join(t, NULL)) != 0 ||
	    (err = pthread_sigmask(SIG_SETMASK, &old, NULL)) != 0) {
		errno = err;
		fail("every signal blocked, a thread");
	}
	printf("nsb-probe: every signal blocked, a thread started and joined\n");

	fd = memfd_create("nsb-probe", MFD_CLOEXEC);
	if (fd < 0)
		fail("memfd_create");
	map_and_close(fd, "a memfd");

	snprintf(name, sizeof(name), "/nsb-probe-%ld", (long)getpid());
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		fail("shm_open");
	shm_unlink(name);
	map_and_close(fd, "a /dev/shm file");

	fd = open("/etc/os-release", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail("open /etc/os-release");
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		fail("mmap /etc/os-release");
	close(fd);
	munmap(p, 4096);
	printf("nsb-probe: a disk file mapped\n");

	printf("nsb-probe: ok\n");
	return 0;
}
