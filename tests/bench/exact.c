/* SPDX-License-Identifier: MIT */
/*
 * exact.c - the rows measured against their exact floor, and the costs
 * outside single calls: process creation, readers and writers after a
 * rescue, the hostile frame's memory, whole workloads under the preload.
 *
 * Children (run by the driver below, through bench_child in children.c):
 *   exact   (library)  every mapping-call row three ways in one process and
 *                      round, interleaved ABBA: bare (raw system calls, which
 *                      the library does not see), floor (bare plus exactly
 *                      the calls an exact decision needs, same arguments),
 *                      library (the libc calls the library interposes);
 *                      CPU time per op; with NSB_BENCH_MARKS=1 instead a few
 *                      ops of each, between marker calls, for strace
 *   spawn   (either)   NSB_BENCH_SPAWN=fork|vfork|spawn|exec children of
 *                      nsb-true, NSB_BENCH_N of them, NSB_BENCH_HANDLER=1: a
 *                      handler installed first (counted under strace -c)
 *   pass    (library)  read-first and write-first passes over a range- or
 *                      auto-filled truncated mapping and over fresh
 *                      anonymous memory, ABBA, CPU time
 *
 * The driver (bench_exact) prints the table; timing never fails it.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/magic.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include "nosigbus.h"
#include "bench.h"

extern char **environ;

static size_t page;

/* ---- the exact rows ------------------------------------------------------ */

#define STATX_MAP (0x0fffU | 0x4000U)	/* STATX_ALL | STATX_MNT_ID_UNIQUE */
#define STATX_RECV (0x0001U | 0x0100U | 0x0800U)	/* TYPE | INO | BTIME */

struct nsb_statx_buf {
	char b[256];
};

static void
floor_statx(int fd, unsigned int mask)
{
	struct nsb_statx_buf st;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, mask, &st) < 0)
		bench_die("statx: %s", strerror(errno));
}

struct xctx {
	int fd;		/* the file mapped, or the memfd sent */
	size_t len;
	char *p;	/* the protected page (mprotect rows) */
	int sock[2];
	int maps;	/* /proc/self/maps, for PROCMAP_QUERY */
};

enum variant { V_BARE, V_FLOOR, V_LIB };

static void
op_pair(struct xctx *c, enum variant v)
{
	void *p;

	if (v == V_LIB) {
		p = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
		if (p == MAP_FAILED)
			bench_die("mmap: %s", strerror(errno));
		munmap(p, c->len);
		return;
	}
	if (v == V_FLOOR)
		floor_statx(c->fd, STATX_MAP);
	p = (void *)syscall(SYS_mmap, NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	syscall(SYS_munmap, p, c->len);
}

static void
op_pool(struct xctx *c, enum variant v)
{
	int fd;
	void *p;

	if (v == V_LIB) {
		fd = memfd_create("nsb-bench-pool", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)c->len) < 0)
			bench_die("memfd_create: %s", strerror(errno));
		p = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			bench_die("mmap: %s", strerror(errno));
		munmap(p, c->len);
		close(fd);
		return;
	}
	fd = (int)syscall(SYS_memfd_create, "nsb-bench-pool", MFD_CLOEXEC);
	if (fd < 0 || syscall(SYS_ftruncate, fd, (off_t)c->len) < 0)
		bench_die("memfd_create: %s", strerror(errno));
	if (v == V_FLOOR)
		floor_statx(fd, STATX_MAP);
	p = (void *)syscall(SYS_mmap, NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	syscall(SYS_munmap, p, c->len);
	syscall(SYS_close, fd);
}

/* Sends fd over c's socket pair (raw calls: the same for every variant)
 * and receives it, through the library's recvmsg for V_LIB: the number it
 * arrived at. */
static int
pass_fd(struct xctx *c, enum variant v, int fd)
{
	char data[16] = "request", in[64];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} out_ctl, in_ctl;
	struct iovec iov = { data, sizeof(data) }, iov_in = { in, sizeof(in) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct msghdr r = { .msg_iov = &iov_in, .msg_iovlen = 1,
			    .msg_control = in_ctl.buf, .msg_controllen = sizeof(in_ctl.buf) };
	struct cmsghdr *h;
	ssize_t got_n;
	int got;

	memset(&out_ctl, 0, sizeof(out_ctl));
	m.msg_control = out_ctl.buf;
	m.msg_controllen = sizeof(out_ctl.buf);
	h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	if (syscall(SYS_sendmsg, c->sock[0], &m, 0) != (long)sizeof(data))
		bench_die("sendmsg: %s", strerror(errno));
	got_n = v == V_LIB ? recvmsg(c->sock[1], &r, MSG_CMSG_CLOEXEC)
			   : syscall(SYS_recvmsg, c->sock[1], &r, MSG_CMSG_CLOEXEC);
	if (got_n != (ssize_t)sizeof(data) || !(h = CMSG_FIRSTHDR(&r)) ||
	    h->cmsg_type != SCM_RIGHTS)
		bench_die("recvmsg: %s", strerror(errno));
	memcpy(&got, CMSG_DATA(h), sizeof(got));
	return got;
}

static void
op_recv(struct xctx *c, enum variant v)
{
	int got = pass_fd(c, v, c->fd);

	if (v == V_FLOOR)
		floor_statx(got, STATX_RECV);
	if (v == V_LIB)
		close(got);
	else
		syscall(SYS_close, got);
}

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif

/*
 * A compositor's pool cycle for a client that makes a new pool per buffer
 * (libwayland-server's wl_shm.create_pool, then the pool's destroy): the
 * client's memfd is made and sent (raw calls, the same for every
 * variant), and the compositor receives it, maps it shared, closes its
 * descriptor at once and unmaps the pool.  The floor adds exactly what
 * the library makes (strace, default policy): at recvmsg the identity of
 * what arrived (statx); at mmap an O_PATH descriptor of the file
 * (open_tree), the decision on it (statx), and keeping it at a high
 * number (F_DUPFD_CLOEXEC, close); at munmap letting it go after checking
 * the number is still its own (F_GETFL, fstat, close).
 */
static void
op_cpool(struct xctx *c, enum variant v)
{
	int fd, got, pfd = -1, kfd = -1;
	void *p;

	fd = (int)syscall(SYS_memfd_create, "nsb-bench-cpool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || syscall(SYS_ftruncate, fd, (off_t)c->len) < 0)
		bench_die("memfd_create: %s", strerror(errno));
	got = pass_fd(c, v, fd);
	syscall(SYS_close, fd);
	if (v == V_LIB) {
		p = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, got, 0);
		if (p == MAP_FAILED)
			bench_die("mmap: %s", strerror(errno));
		close(got);
		munmap(p, c->len);
		return;
	}
	if (v == V_FLOOR) {
		floor_statx(got, STATX_RECV);
		pfd = (int)syscall(SYS_open_tree, got, "", AT_EMPTY_PATH | O_CLOEXEC);
		if (pfd < 0)
			bench_die("open_tree: %s", strerror(errno));
		floor_statx(pfd, STATX_MAP);
	}
	p = (void *)syscall(SYS_mmap, NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, got, 0);
	if (p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	if (v == V_FLOOR) {
		kfd = (int)syscall(SYS_fcntl, pfd, F_DUPFD_CLOEXEC, 1024 - 16);
		syscall(SYS_close, pfd);
	}
	syscall(SYS_close, got);
	syscall(SYS_munmap, p, c->len);
	if (v == V_FLOOR) {
		struct stat st;

		syscall(SYS_fcntl, kfd, F_GETFL);
		syscall(SYS_fstat, kfd, &st);
		syscall(SYS_close, kfd);
	}
}

static void
op_mprotect_ok(struct xctx *c, enum variant v)
{
	if (v == V_LIB) {
		if (mprotect(c->p, page, PROT_READ) < 0 ||
		    mprotect(c->p, page, PROT_READ | PROT_WRITE) < 0)
			bench_die("mprotect: %s", strerror(errno));
		return;
	}
	if (syscall(SYS_mprotect, c->p, page, PROT_READ) < 0 ||
	    syscall(SYS_mprotect, c->p, page, PROT_READ | PROT_WRITE) < 0)
		bench_die("mprotect: %s", strerror(errno));
}

/* What the library asks after a failed call (maps.c): the kernel's VMA at
 * or after the record's page, without its name (the record is a memfd's,
 * not anonymous memory's: mman.c's resync asks no name for it). */
static void
floor_query(struct xctx *c)
{
	struct {
		uint64_t size, flags, addr, start, end, vflags, psize, off, ino;
		uint32_t maj, min, name_size, build_id_size;
		uint64_t name_addr, build_id_addr;
	} q = { .size = 104, .flags = 0x10, .addr = (uintptr_t)c->p };

	_Static_assert(sizeof(q) == 104, "struct procmap_query");
	syscall(SYS_ioctl, c->maps, _IOWR('f', 17, q), &q);
}

/* Over the protected page and the free page above it: ENOMEM. */
static void
op_mprotect_fail(struct xctx *c, enum variant v)
{
	for (int i = 0; i < 2; i++) {
		int prot = i ? PROT_READ | PROT_WRITE : PROT_READ;
		long r = v == V_LIB ? mprotect(c->p, 2 * page, prot)
				    : syscall(SYS_mprotect, c->p, 2 * page, prot);

		if (r == 0 || errno != ENOMEM)
			bench_die("mprotect did not fail with ENOMEM");
		if (v == V_FLOOR)
			floor_query(c);
	}
}

struct xrow {
	const char *key;
	void (*op)(struct xctx *, enum variant);
	struct xctx *ctx;
};

static double
xbatch(const struct xrow *r, enum variant v, size_t n)
{
	double t0 = bench_cpu_ns();

	for (size_t i = 0; i < n; i++)
		r->op(r->ctx, v);
	return (bench_cpu_ns() - t0) / (double)n;
}

/* Marks a place in an strace log: a failing openat whose path says what
 * follows (raw, so that no interposed call surrounds it). */
static void
mark(const char *key, const char *what)
{
	char path[128];

	snprintf(path, sizeof(path), "/nsb-bench-mark/%s/%s", key, what);
	syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
}

static const char *const vnames[] = { "bare", "floor", "lib" };

/* A counter of this process's user-space instructions, or -1 where the
 * machine has none (many virtual machines). */
static int
instructions_counter(void)
{
	struct perf_event_attr pe;

	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_HARDWARE;
	pe.size = sizeof(pe);
	pe.config = PERF_COUNT_HW_INSTRUCTIONS;
	pe.disabled = 1;
	pe.exclude_kernel = 1;
	pe.exclude_hv = 1;
	return (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int pmu = -1;

static void
xrow_run(const struct xrow *r, const char *suffix, size_t n, int rounds, bool marks)
{
	double b[16], f[16], l[16], lb[16], lf[16];
	char key[64];

	snprintf(key, sizeof(key), "%s%s", r->key, suffix);
	for (int v = 0; v < 3; v++)	/* warm up: caches, the library's first use */
		xbatch(r, (enum variant)v, n / 10 + 2);
	if (marks) {
		for (int v = 0; v < 3; v++) {
			mark(key, vnames[v]);
			xbatch(r, (enum variant)v, n);
		}
		mark(key, "end");
		return;
	}
	for (int k = 0; k < rounds; k++) {
		static const enum variant abba[2][6] = {
			{ V_BARE, V_FLOOR, V_LIB, V_LIB, V_FLOOR, V_BARE },
			{ V_LIB, V_FLOOR, V_BARE, V_BARE, V_FLOOR, V_LIB },
		};
		double t[3] = { 0, 0, 0 };

		for (int i = 0; i < 6; i++)
			t[abba[k % 2][i]] += xbatch(r, abba[k % 2][i], n) / 2;
		b[k] = t[V_BARE];
		f[k] = t[V_FLOOR];
		l[k] = t[V_LIB];
		lb[k] = l[k] / b[k];
		lf[k] = l[k] / f[k];
	}
	if (pmu >= 0)
		for (int v = 0; v < 3; v++) {
			uint64_t count = 0;

			ioctl(pmu, PERF_EVENT_IOC_RESET, 0);
			ioctl(pmu, PERF_EVENT_IOC_ENABLE, 0);
			xbatch(r, (enum variant)v, n);
			ioctl(pmu, PERF_EVENT_IOC_DISABLE, 0);
			if (read(pmu, &count, sizeof(count)) == (ssize_t)sizeof(count))
				printf("ex.%s.ins.%s %.17g\n", key, vnames[v], (double)count / (double)n);
		}
	printf("ex.%s.bare %.17g\n", key, bench_median(b, (size_t)rounds));
	printf("ex.%s.floor %.17g\n", key, bench_median(f, (size_t)rounds));
	printf("ex.%s.lib %.17g\n", key, bench_median(l, (size_t)rounds));
	printf("ex.%s.lb %.17g\n", key, bench_median(lb, (size_t)rounds));
	printf("ex.%s.lf %.17g\n", key, bench_median(lf, (size_t)rounds));
}

static void
on_usr1(int sig)
{
	(void)sig;
}

static void
child_exact(const struct bench_params *bp)
{
	bool marks = getenv("NSB_BENCH_MARKS") != NULL;
	size_t n = marks ? 20 : bp->quick ? 100 : 2000;
	int rounds = bp->quick ? 1 : 5;
	struct xctx mem = { .len = page }, shm = { .len = page }, disk = { .len = page };
	struct xctx pool = { .len = 16 * page }, recv = { 0 }, prot = { 0 };
	struct xctx cpool = { .len = 4 * page };
	struct xrow rows[9];
	int nrows = 0;
	char path[64];
	char *hole;

	mem.fd = memfd_create("nsb-bench-exact", MFD_CLOEXEC);
	if (mem.fd < 0 || ftruncate(mem.fd, 1 << 20) < 0)
		bench_die("memfd_create: %s", strerror(errno));
	snprintf(path, sizeof(path), "/dev/shm/nsb-bench-exact-%d", (int)getpid());
	shm.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (shm.fd >= 0) {
		unlink(path);
		if (ftruncate(shm.fd, 1 << 20) < 0)
			bench_die("ftruncate %s: %s", path, strerror(errno));
	}
	disk.fd = bench_disk_file(1 << 20);
	recv.fd = mem.fd;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, recv.sock) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cpool.sock) < 0)
		bench_die("socketpair: %s", strerror(errno));
	/* A protected page (mapped through the library: a record) with a
	 * free page above it. */
	hole = mmap(NULL, 3 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	munmap(hole, 3 * page);
	prot.p = mmap(hole + page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mem.fd, 0);
	if (prot.p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	prot.maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	pmu = marks ? -1 : instructions_counter();
	printf("ex.pmu %d\n", pmu >= 0);

	rows[nrows++] = (struct xrow){ "memfd", op_pair, &mem };
	if (shm.fd >= 0)
		rows[nrows++] = (struct xrow){ "devshm", op_pair, &shm };
	if (disk.fd >= 0)
		rows[nrows++] = (struct xrow){ "disk", op_pair, &disk };
	rows[nrows++] = (struct xrow){ "pool", op_pool, &pool };
	rows[nrows++] = (struct xrow){ "recv", op_recv, &recv };
	rows[nrows++] = (struct xrow){ "cpool", op_cpool, &cpool };
	rows[nrows++] = (struct xrow){ "mprotect", op_mprotect_ok, &prot };
	rows[nrows++] = (struct xrow){ "mprotect.fail", op_mprotect_fail, &prot };
	/* No handler; then handlers of the program's own faults only
	 * (SIGSEGV and SIGBUS, as Rust's std installs: the table lock
	 * blocks no signal yet); then one of a signal another thread may
	 * send to stop it (SIGUSR1: the lock blocks signals from then on). */
	for (int h = 0; h < 3; h++) {
		static const int sigs[3][2] = { { 0, 0 }, { SIGSEGV, SIGBUS }, { SIGUSR1, 0 } };
		static const char *const suffix[3] = { "", ".f", ".h" };

		for (int k = 0; k < 2 && sigs[h][k]; k++) {
			struct sigaction sa;

			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = on_usr1;
			sigemptyset(&sa.sa_mask);
			if (sigaction(sigs[h][k], &sa, NULL) < 0)
				bench_die("sigaction: %s", strerror(errno));
		}
		for (int i = 0; i < nrows; i++)
			xrow_run(&rows[(i + bp->round) % nrows], suffix[h], n, rounds, marks);
	}
	printf("ex.n %zu\n", n);
}

/* ---- process creation -------------------------------------------------- */

static void
child_spawn(const struct bench_params *bp)
{
	const char *how = getenv("NSB_BENCH_SPAWN");
	long n = getenv("NSB_BENCH_N") ? atol(getenv("NSB_BENCH_N")) : 10;
	char *argv[] = { (char *)bp->program, NULL };

	if (!how || !bp->program)
		bench_die("spawn: NSB_BENCH_SPAWN and --true are needed");
	if (getenv("NSB_BENCH_HANDLER")) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGUSR1, &sa, NULL) < 0)
			bench_die("sigaction: %s", strerror(errno));
	}
	for (long i = 0; i < n; i++) {
		pid_t pid;
		int status;

		if (!strcmp(how, "fork")) {
			pid = fork();
			if (pid == 0)
				_exit(0);
		} else if (!strcmp(how, "vfork")) {
			pid = vfork();
			if (pid == 0)
				_exit(0);
		} else if (!strcmp(how, "spawn")) {
			errno = posix_spawn(&pid, bp->program, NULL, NULL, argv, environ);
			if (errno)
				pid = -1;
		} else {
			pid = fork();
			if (pid == 0) {
				execve(bp->program, argv, environ);
				_exit(127);
			}
		}
		if (pid < 0)
			bench_die("%s: %s", how, strerror(errno));
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			bench_die("%s: the child failed", how);
	}
}

/* ---- passes over a rescued mapping -------------------------------------- */

/* One pass, first touch of every page in order: CPU ns per page. */
static double
pass(char *p, size_t n, bool write)
{
	volatile char *v = p;
	unsigned sum = 0;
	double t0 = bench_cpu_ns();

	for (size_t i = 0; i < n; i++) {
		if (write)
			v[i * page] = 1;
		else
			sum += (unsigned char)v[i * page];
	}
	t0 = bench_cpu_ns() - t0;
	if (sum)
		bench_die("a read saw non-zero bytes");
	return t0 / (double)n;
}

static double
anon_pass(size_t size, bool write)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t;

	if (p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	madvise(p, size, MADV_NOHUGEPAGE);
	t = pass(p, size / page, write);
	munmap(p, size);
	return t;
}

static double
rescue_pass(size_t size, bool write)
{
	int fd = memfd_create("nsb-bench-pass", MFD_CLOEXEC);
	char *p;
	double t;

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		bench_die("memfd_create: %s", strerror(errno));
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	if (p == MAP_FAILED || ftruncate(fd, 0) < 0)
		bench_die("mmap: %s", strerror(errno));
	t = pass(p, size / page, write);
	if (write)
		for (size_t i = 0; i < size / page; i++)
			if (p[i * page] != 1)
				bench_die("a write after the rescue did not stick");
	munmap(p, size);
	close(fd);
	return t;
}

static void
child_pass(const struct bench_params *bp)
{
	int rounds = bp->quick ? 1 : 3;

	/* Pages the kernel has handed out before; the first rescue. */
	anon_pass(2 * bp->size, true);
	rescue_pass(16 * page, false);
	for (int w = 0; w < 2; w++) {
		double a[16], r[16], ratio[16];

		for (int k = 0; k < rounds; k++) {
			bool first = (k + bp->round) % 2;
			double x, y, z, u;

			x = first ? anon_pass(bp->size, w) : rescue_pass(bp->size, w);
			y = first ? rescue_pass(bp->size, w) : anon_pass(bp->size, w);
			z = first ? rescue_pass(bp->size, w) : anon_pass(bp->size, w);
			u = first ? anon_pass(bp->size, w) : rescue_pass(bp->size, w);
			a[k] = first ? (x + u) / 2 : (y + z) / 2;
			r[k] = first ? (y + z) / 2 : (x + u) / 2;
			ratio[k] = r[k] / a[k];
		}
		printf("pass.%s.anon %.17g\n", w ? "write" : "read", bench_median(a, (size_t)rounds));
		printf("pass.%s.rescue %.17g\n", w ? "write" : "read", bench_median(r, (size_t)rounds));
		printf("pass.%s.ratio %.17g\n", w ? "write" : "read", bench_median(ratio, (size_t)rounds));
	}
}

int
bench_exact_child(const char *kind, const struct bench_params *bp)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (!strcmp(kind, "exact"))
		child_exact(bp);
	else if (!strcmp(kind, "spawn"))
		child_spawn(bp);
	else if (!strcmp(kind, "pass"))
		child_pass(bp);
	else
		return -1;
	fflush(stdout);
	return ferror(stdout) ? 1 : 0;
}
