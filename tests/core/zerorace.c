/* SPDX-License-Identifier: MIT */
/*
 * The target of core-zerorace (zerorace.py drives it under gdb): two
 * threads' first read-first range fills of the process, each wanting
 * the zero file (rescue.c) at once.  The driver stops the first in the
 * making of the file, runs the second alone through its fill, then lets
 * the first finish: the window where both once made a file and wrote its
 * identity before either published its number, the loser's identity
 * then standing for the winner's file (a fill mapped anonymously, the
 * file never recognised again, a second one made and the first never
 * closed).
 *
 * The second racer starts its fill only when the driver says so
 * (zerorace_go), once it holds the first in the making: left to race
 * freely, the second could run its whole fill (anonymous: the making
 * claimed) and reach zerorace_done while gdb was still stopping it after
 * the first one's breakpoint, and gdb could report that stop first (on a
 * loaded machine, 2 to 4 runs of 10).  Run without the driver, the second
 * starts once the first has filled.
 *
 * Afterwards: every page read zeros, there is exactly one zero file, one
 * of the two fills is mapped from it, and a third fill maps from that
 * same file without making another.  zerorace_verdict() is where the
 * driver reads the outcome (zerorace_msg); the exit status says it too.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nosigbus.h>

#define NPAGES 64

char zerorace_msg[512];
volatile int zerorace_go;	/* set by the driver: the second racer may fill */
static pthread_barrier_t barrier;
static size_t ps;

void zerorace_done(int who);
void zerorace_verdict(int ok);
void *zerorace_racer(void *arg);

__attribute__((noinline)) void
zerorace_done(int who)
{
	__asm__ volatile("" : : "r"(who) : "memory");
}

__attribute__((noinline)) void
zerorace_verdict(int ok)
{
	__asm__ volatile("" : : "r"(ok) : "memory");
}

static void __attribute__((noreturn, format(printf, 2, 3)))
verdict(bool ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(zerorace_msg, sizeof(zerorace_msg), fmt, ap);
	va_end(ap);
	printf("%s: %s\n", ok ? "ok" : "FAIL", zerorace_msg);
	fflush(stdout);
	zerorace_verdict(ok);
	exit(ok ? 0 : 1);
}

/* NPAGES pages of a memfd, protected, then emptied. */
static char *
emptied(void)
{
	int fd = memfd_create("zerorace-pool", MFD_CLOEXEC);
	char *p;

	if (fd < 0 || ftruncate(fd, (off_t)(NPAGES * ps)) != 0)
		verdict(false, "memfd: %s", strerror(errno));
	p = mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	if (p == MAP_FAILED || ftruncate(fd, 0) != 0)
		verdict(false, "mmap: %s", strerror(errno));
	close(fd);
	return p;
}

static bool
zeros(const char *p)
{
	for (size_t i = 0; i < NPAGES; i++)
		if (((volatile const char *)p)[i * ps] || ((volatile const char *)p)[i * ps + ps - 1])
			return false;
	return true;
}

static char *pools[3];
static bool read_zeros[2];
static atomic_bool filled0;	/* the first racer's fill has returned */

void *
zerorace_racer(void *arg)
{
	int who = (int)(long)arg;

	pthread_barrier_wait(&barrier);
	if (who == 1)
		while (!zerorace_go && !atomic_load(&filled0))
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	read_zeros[who] = zeros(pools[who]);	/* the first read: a range fill */
	if (who == 0)
		atomic_store(&filled0, true);
	zerorace_done(who);
	return NULL;
}

/* Descriptors naming a zero file. */
static int
zero_files(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int count = 0;

	if (!d)
		verdict(false, "opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d))) {
		char path[300], link[256];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		count += strncmp(link, "/memfd:nosigbus-zero", 20) == 0;
	}
	closedir(d);
	return count;
}

/* Is the page at p mapped from a zero file? */
static bool
from_zero_file(const char *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;

	if (!f)
		verdict(false, "fopen /proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= (unsigned long)p &&
		    (unsigned long)p < hi) {
			found = strstr(line, "memfd:nosigbus-zero") != NULL;
			break;
		}
	}
	fclose(f);
	return found;
}

int
main(void)
{
	pthread_t t[2];
	int n1, n2;

	ps = (size_t)sysconf(_SC_PAGESIZE);
	for (int i = 0; i < 3; i++)
		pools[i] = emptied();
	pthread_barrier_init(&barrier, NULL, 2);
	for (long i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, zerorace_racer, (void *)i) != 0)
			verdict(false, "pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	if (!read_zeros[0] || !read_zeros[1])
		verdict(false, "a racing fill read non-zero bytes");
	n1 = zero_files();
	if (n1 != 1)
		verdict(false, "%d zero files after two racing first fills, expected 1", n1);
	if (!from_zero_file(pools[0]) && !from_zero_file(pools[1]))
		verdict(false, "neither racing fill is mapped from the zero file (its maker's "
			       "should be: the file was not recognised as the zero file)");
	if (!zeros(pools[2]))
		verdict(false, "the third fill read non-zero bytes");
	n2 = zero_files();
	if (n2 != 1)
		verdict(false, "%d zero files after a third fill, expected 1 (a second one made: "
			       "the first one's identity was lost)", n2);
	if (!from_zero_file(pools[2]))
		verdict(false, "the third fill is not mapped from the zero file");
	verdict(true, "two racing first fills: one zero file, recognised, reused by a third fill");
}
