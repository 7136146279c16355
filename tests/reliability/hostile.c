/* SPDX-License-Identifier: MIT */
/*
 * The hostile-peer soak (issue 37).  A peer process hands the program
 * memfds (one of them sealable), /dev/shm files, disk files and the file
 * of a FUSE file system of its own over a Unix socket (SCM_RIGHTS), then
 * changes them as fast as it can, at random: ftruncate to any size,
 * fallocate (punch a hole, grow), writes, seals, and closes (a file
 * dropped and a fresh one handed over in its place).  Its FUSE file
 * (../e2e/fuse-pool.h, served by a child of the peer) changes the way a
 * file system the peer controls can: its size (what the server answers,
 * the kernel's cached size and pages dropped each time), reads that fail
 * with EIO from any page on (faults inside the size: the peer's errors,
 * rescued by default, SPEC §5), healed again, new contents, and the same
 * file handed over again (the library must keep it among the files
 * received: it is the same file all along).  Where FUSE cannot be
 * mounted (no /dev/fuse, not permitted, built without libfuse3) the peer
 * says why in one line and the run goes on with the other files; its
 * server answers every request at once (peer_fuse() says why it must).
 * Meanwhile the program, under the bare preload and the default
 * policy, maps them from several threads, reads, writes, mremaps,
 * mprotects, forks children that read them, and unmaps them; each thread
 * also writes its own disk file through a shared mapping and reads it
 * back with pread.  Under NOSIGBUS_FILL=page, range and auto, each in a
 * fresh exec:
 *  - the program never dies (the driver judges how it ended);
 *  - no thread hangs: each worker counts its operations, and a watchdog
 *    in the program fails the run when one stops for 20 s (scaled); the
 *    driver kills the program (showing its stacks) past its time;
 *  - what the program wrote to its own files is intact;
 *  - a forked child that reads a peer's mapping exits, within 20 s.
 * Every run prints its seed; --seed N replays the same random choices
 * (the interleaving is the machine's).
 *
 * Usage: hostile [--seed N] [--seconds S] [--fill page|range|auto|all]
 *        (--program: one run, under the preload, internal)
 */
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "nsbtest.h"

#ifdef NSB_HAVE_FUSE
#define FUSE_POOL_WHO "hostile"
#include "../e2e/fuse-pool.h"
#endif

#define FILES		7	/* 2 memfds, 2 /dev/shm, 2 disk, 1 FUSE */
#define FUSE_KIND	6
#define MAX_PAGES	16
#define WORKERS		4
#define OWN_PAGES	8

static size_t ps;
static uint64_t seed;
static int seconds = 20;

/* ---- the peer ---------------------------------------------------------- */

static int
peer_file(int kind, bool *sealable)
{
	char path[4096];
	const char *dir;
	int fd;

	*sealable = false;
	if (kind < 2) {
		*sealable = kind == 1;
		fd = memfd_create("nsb-hostile", MFD_CLOEXEC | (*sealable ? MFD_ALLOW_SEALING : 0));
	} else {
		dir = kind < 4 ? "/dev/shm" : getenv("NSB_BUILD_ROOT");
		snprintf(path, sizeof(path), "%s/nsb-hostile-%d-XXXXXX", dir ? dir : ".",
			 (int)getpid());
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0)
		_exit(20);
	nsbt_fill(fd, (size_t)(kind + 1) * ps);
	return fd;
}

static void
send_fd(int sock, int index, int fd)
{
	if (nsbt_send_fd(sock, fd, (unsigned char)index, MSG_NOSIGNAL) != 1)
		_exit(0);	/* the program is done */
}

/*
 * The peer's FUSE file: the one file of a FUSE file system served by a
 * child of the peer (fuse-pool.h), started before the peer opens its other
 * files (the server holds none of them).  Returns its descriptor, or -1
 * having said in one line why it is left out.
 *
 * The server answers every request at once, from memory: with data, with
 * EIO, or with whatever size the peer set last.  It must: a fault on a
 * FUSE file waits in the kernel until the server answers (only a fatal
 * signal, or aborting the connection, ends that wait), so a server that
 * stalls would hang the program's faulting thread for as long as it
 * stalls; that is the kernel's FUSE, which no library inside the program
 * can change.  What this soak asks of the library is what it does with
 * the answers.
 */
#ifdef NSB_HAVE_FUSE
static struct fuse_pool pool;
#endif

static int
peer_fuse(void)
{
#ifdef NSB_HAVE_FUSE
	int fd;

	if (fuse_pool_start(&pool) != 0) {
		printf("hostile: the FUSE file is left out: %s\n", pool.why);
		fflush(stdout);
		return -1;
	}
	fd = fuse_pool_open(&pool, (size_t)(FUSE_KIND + 1) * ps, 0x5a5a5a5au);
	if (fd < 0) {
		printf("hostile: the FUSE file is left out: it was mounted but did not open "
		       "(said above)\n");
		fflush(stdout);
	}
	return fd;
#else
	printf("hostile: the FUSE file is left out: built without libfuse3\n");
	fflush(stdout);
	return -1;
#endif
}

#ifdef NSB_HAVE_FUSE
/* Tells the kernel the FUSE file changed: its cached size and pages are
 * dropped (from every mapping), so the next fault asks the server. */
static void
fuse_changed(void)
{
	if (fuse_pool_fail(&pool, pool.shared->fail_from) != 0)
		_exit(21);	/* the server is gone: the program sees the peer's end */
}

/* One change to the FUSE file, drawn from the same r as the others'. */
static void
fuse_change(int sock, int fd, uint64_t r, off_t size, off_t at)
{
	switch ((r >> 56) % 16) {
	case 0: case 1: case 2: case 3: case 4: case 5:
		pool.shared->size = (uint64_t)size;
		break;
	case 6: case 7:
		pool.shared->size = 0;
		fuse_changed();
		pool.shared->size = MAX_PAGES * ps;
		break;
	case 8: case 9:
		/* Every read that touches a page at or past at: EIO. */
		pool.shared->fail_from = at;
		break;
	case 10: case 13:
		pool.shared->fail_from = -1;
		break;
	case 11: case 12:
		pool.shared->pixel = (uint32_t)r;
		break;
	case 14:
		/* The same file, handed over again (it cannot be opened
		 * anew: fuse_pool_open unmounted it). */
		send_fd(sock, FUSE_KIND, fd);
		return;
	default:
		sched_yield();
		return;
	}
	fuse_changed();
}
#endif

/* Changes the files as fast as it can until its parent goes. */
static void __attribute__((noreturn))
peer(int sock)
{
	uint64_t rng = seed ^ 0x5045455200000000ull;
	int fds[FILES];
	bool sealable[FILES];
	char buf[512];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_NAME, "nsb-hostile-peer");
	fds[FUSE_KIND] = peer_fuse();
	sealable[FUSE_KIND] = false;
	for (int i = 0; i < FUSE_KIND; i++) {
		fds[i] = peer_file(i, &sealable[i]);
		send_fd(sock, i, fds[i]);
	}
	if (fds[FUSE_KIND] >= 0)
		send_fd(sock, FUSE_KIND, fds[FUSE_KIND]);
	for (uint64_t n = 0;; n++) {
		uint64_t r = nsbt_random(&rng);
		int i = (int)(r % FILES);
		off_t size = (off_t)((r >> 8) % (MAX_PAGES * ps + 1));
		off_t at = (off_t)((r >> 24) % (MAX_PAGES * ps));
		off_t len = (off_t)((r >> 40) % (4 * ps) + 1);

		if (i == FUSE_KIND) {
#ifdef NSB_HAVE_FUSE
			if (fds[i] >= 0)
				fuse_change(sock, fds[i], r, size, at);
#endif
			continue;
		}
		switch ((r >> 56) % 16) {
		case 0: case 1: case 2: case 3: case 4: case 5:
			if (ftruncate(fds[i], size) < 0) { /* a sealed file: refused */ }
			break;
		case 6: case 7:
			/* Toggle: to nothing and back, the hidden case's peer. */
			if (ftruncate(fds[i], 0) < 0) { /* sealed */ }
			if (ftruncate(fds[i], (off_t)(MAX_PAGES * ps)) < 0) { /* sealed */ }
			break;
		case 8: case 9:
			(void)fallocate(fds[i], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, len);
			break;
		case 10:
			(void)fallocate(fds[i], 0, at, len);
			break;
		case 11: case 12:
			memset(buf, (int)(r & 0xff), sizeof(buf));
			if (pwrite(fds[i], buf, sizeof(buf), at) < 0) { /* sealed, or full */ }
			break;
		case 13:
			if (sealable[i])
				(void)fcntl(fds[i], F_ADD_SEALS,
					    (r & 1 ? F_SEAL_SHRINK : F_SEAL_GROW) |
					    (r & 2 ? F_SEAL_SEAL : 0));
			break;
		case 14:
			/* Closes it, and hands over a fresh one in its place. */
			close(fds[i]);
			fds[i] = peer_file(i, &sealable[i]);
			send_fd(sock, i, fds[i]);
			break;
		default:
			sched_yield();
			break;
		}
	}
}

/* ---- the program --------------------------------------------------------- */

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static int slots[FILES];	/* the latest file of each kind, -1: none yet */
static atomic_bool stop;
static atomic_ulong progress[WORKERS];
static atomic_ulong forks, maps, fuse_maps;

static void *
receiver(void *arg)
{
	int sock = (int)(intptr_t)arg;

	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		unsigned char byte;
		struct iovec iov = { &byte, 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c;
		int fd, old;

		if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
			return NULL;
		c = CMSG_FIRSTHDR(&msg);
		if (!c || c->cmsg_type != SCM_RIGHTS || byte >= FILES)
			nsbt_fail("seed %" PRIu64 ": a message without a file", seed);
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
		pthread_mutex_lock(&slots_lock);
		old = slots[byte];
		slots[byte] = fd;
		pthread_mutex_unlock(&slots_lock);
		if (old >= 0)
			close(old);
	}
}

/* A descriptor of one of the peer's files (the next one it handed over
 * from r's), or -1; *kind says which. */
static int
peer_fd(uint64_t r, int *kind)
{
	int fd = -1;

	pthread_mutex_lock(&slots_lock);
	for (int k = 0; k < FILES && fd < 0; k++) {
		*kind = (int)((r + (uint64_t)k) % FILES);
		if (slots[*kind] >= 0)
			fd = dup(slots[*kind]);
	}
	pthread_mutex_unlock(&slots_lock);
	return fd;
}

static void
touch(volatile char *p, size_t len, bool write, uint64_t r)
{
	unsigned sum = 0;

	for (size_t off = (size_t)(r % 64); off < len; off += ps / 2) {
		sum += (unsigned char)p[off];
		if (write)
			p[off] = (char)sum;
	}
}

/* A child reads the mapping and exits: it must, within 20 s. */
static void
fork_and_read(volatile char *p, size_t len)
{
	double end = nsbt_now() + nsbt_scaled(20);
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return;	/* out of processes: not this test's concern */
	if (pid == 0) {
		touch(p, len, false, 0);
		_exit(0);
	}
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (nsbt_now() > end) {
			kill(pid, SIGKILL);
			nsbt_fail("seed %" PRIu64 ": a forked child hung reading a peer's file", seed);
		}
		usleep(1000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("seed %" PRIu64 ": a forked child reading a peer's file: %s", seed,
			  nsbt_status_str(status));
	atomic_fetch_add(&forks, 1);
}

/* One operation on a file of the peer's: map, use, change, unmap. */
static void
peer_round(uint64_t *rng)
{
	uint64_t r = nsbt_random(rng);
	size_t len = ((r >> 8) % MAX_PAGES + 1) * ps;
	int prot = r & 1 ? PROT_READ : PROT_READ | PROT_WRITE;
	int type = r & 2 ? MAP_PRIVATE : MAP_SHARED;
	int kind;
	int fd = peer_fd(r >> 16, &kind);
	volatile char *p;

	if (fd < 0)
		return;
	p = mmap(NULL, len, prot, type, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		nsbt_fail("seed %" PRIu64 ": mmap of a peer's file (kind %d): %s", seed, kind,
			  strerror(errno));
	atomic_fetch_add(&maps, 1);
	if (kind == FUSE_KIND)
		atomic_fetch_add(&fuse_maps, 1);
	for (int k = 0; k < 6; k++) {
		uint64_t o = nsbt_random(rng);

		switch (o % 8) {
		case 0: case 1: case 2:
			touch(p, len, prot & PROT_WRITE, o >> 8);
			break;
		case 3: {
			size_t nlen = ((o >> 8) % MAX_PAGES + 1) * ps;
			void *q = mremap((void *)p, len, nlen, MREMAP_MAYMOVE);

			/* Never EFAULT: the program splits nothing, and the
			 * library moves its own rescues' and refreshes'
			 * pieces (seed 118358210324599, fill=page, failed
			 * so when a refresh's piece was taken for the
			 * program's). */
			if (q == MAP_FAILED)
				nsbt_fail("seed %" PRIu64 ": mremap: %s", seed, strerror(errno));
			p = q;
			len = nlen;
			break;
		}
		case 4: {
			int nprot = o & 256 ? PROT_READ : PROT_READ | PROT_WRITE;

			/* Every file arrives read-write: always allowed. */
			if (mprotect((void *)p, len, nprot) != 0)
				nsbt_fail("seed %" PRIu64 ": mprotect: %s", seed, strerror(errno));
			prot = nprot;
			break;
		}
		case 5:
			if ((o >> 8) % 8 == 0)
				fork_and_read(p, len);
			break;
		default:
			touch(p, len, false, o >> 8);
			break;
		}
	}
	if (munmap((void *)p, len) != 0)
		nsbt_fail("seed %" PRIu64 ": munmap: %s", seed, strerror(errno));
}

/* The program's own disk file: written through a shared mapping, read
 * back with pread; nothing may be lost. */
static void
own_round(int fd, uint64_t *rng)
{
	uint64_t r = nsbt_random(rng);
	size_t len = OWN_PAGES * ps;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	char got[64];

	if (p == MAP_FAILED)
		nsbt_fail("seed %" PRIu64 ": mmap of its own file: %s", seed, strerror(errno));
	for (size_t pg = 0; pg < OWN_PAGES; pg++)
		memset(p + pg * ps, (int)((r + pg) & 0xff), sizeof(got));
	if (munmap(p, len) != 0)
		nsbt_fail("seed %" PRIu64 ": munmap: %s", seed, strerror(errno));
	for (size_t pg = 0; pg < OWN_PAGES; pg++) {
		char want[64];

		memset(want, (int)((r + pg) & 0xff), sizeof(want));
		if (pread(fd, got, sizeof(got), (off_t)(pg * ps)) != (ssize_t)sizeof(got) ||
		    memcmp(got, want, sizeof(got)) != 0)
			nsbt_fail("seed %" PRIu64 ": a write to the program's own file was lost "
				  "(page %zu)", seed, pg);
	}
}

static void *
worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint64_t rng = seed ^ ((uint64_t)(me + 1) << 48);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	int own = -1;
	char path[4096];
	const char *dir = getenv("NSB_BUILD_ROOT");

	CPU_ZERO(&set);
	CPU_SET(me % (int)(cpus > 0 ? cpus : 1), &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
	snprintf(path, sizeof(path), "%s/nsb-hostile-own-%d-XXXXXX", dir ? dir : ".", (int)getpid());
	own = mkostemp(path, O_CLOEXEC);
	if (own < 0)
		nsbt_fail("creating its own file: %s", strerror(errno));
	unlink(path);
	nsbt_fill(own, OWN_PAGES * ps);
	while (!atomic_load(&stop)) {
		if (nsbt_random(&rng) % 8 == 0)
			own_round(own, &rng);
		else
			peer_round(&rng);
		atomic_fetch_add(&progress[me], 1);
	}
	close(own);
	return NULL;
}

/* A file the peer had created but not yet unlinked when it was killed. */
static void
remove_leftovers(pid_t peer_pid)
{
	const char *dirs[] = { "/dev/shm", getenv("NSB_BUILD_ROOT") };

	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		char pattern[4096];
		glob_t g;

		snprintf(pattern, sizeof(pattern), "%s/nsb-hostile-%d-??????",
			 dirs[d] ? dirs[d] : ".", (int)peer_pid);
		if (glob(pattern, 0, NULL, &g) != 0)
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
}

static int
program(const char *fill)
{
	pthread_t workers[WORKERS], recv_thread;
	unsigned long last[WORKERS] = { 0 }, rounds = 0;
	double stalled[WORKERS], end;
	struct nosigbus_stats st = { 0 };
	int (*get_stats)(struct nosigbus_stats *, size_t);
	int sv[2], status;
	pid_t peer_pid;

	if (!nsbt_have_library())
		nsbt_fail("the library is not preloaded");
	for (int i = 0; i < FILES; i++)
		slots[i] = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		nsbt_fail("socketpair: %s", strerror(errno));
	fflush(NULL);
	peer_pid = fork();
	if (peer_pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (peer_pid == 0) {
		close(sv[0]);
		peer(sv[1]);
	}
	close(sv[1]);
	if (pthread_create(&recv_thread, NULL, receiver, (void *)(intptr_t)sv[0]) != 0)
		nsbt_fail("pthread_create");
	for (intptr_t i = 0; i < WORKERS; i++)
		if (pthread_create(&workers[i], NULL, worker, (void *)i) != 0)
			nsbt_fail("pthread_create");
	end = nsbt_now() + seconds;
	for (int i = 0; i < WORKERS; i++)
		stalled[i] = nsbt_now();
	while (nsbt_now() < end) {
		usleep(100000);
		for (int i = 0; i < WORKERS; i++) {
			unsigned long now = atomic_load(&progress[i]);

			if (now != last[i]) {
				last[i] = now;
				stalled[i] = nsbt_now();
			} else if (nsbt_now() - stalled[i] > nsbt_scaled(20)) {
				nsbt_fail("seed %" PRIu64 ", fill=%s: worker %d made no progress for "
					  "20 s (replay: hostile --seed %" PRIu64 " --fill %s)",
					  seed, fill, i, seed, fill);
			}
		}
	}
	atomic_store(&stop, true);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(workers[i], NULL);
	kill(peer_pid, SIGKILL);
	waitpid(peer_pid, &status, 0);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		nsbt_fail("seed %" PRIu64 ": the peer ended: %s", seed, nsbt_status_str(status));
	remove_leftovers(peer_pid);
	get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT,
								   "nosigbus_get_stats");
	if (get_stats)
		(void)get_stats(&st, sizeof(st));
	for (int i = 0; i < WORKERS; i++)
		rounds += atomic_load(&progress[i]);
	printf("ok: fill=%s: %lu rounds, %lu mappings of the peer's files (%lu of its FUSE file), "
	       "%lu forks, %" PRIu64 " rescues in %d s; its own files intact\n", fill, rounds,
	       atomic_load(&maps), atomic_load(&fuse_maps), atomic_load(&forks),
	       (uint64_t)st.rescues, seconds);
	fflush(NULL);
	_exit(0);	/* the receiver thread stays in recvmsg */
}

/* ---- the driver -------------------------------------------------------- */

static void
run(const char *self, const char *fill)
{
	int limit = nsbt_scaled(seconds + 60), status;
	double end = nsbt_now() + limit;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		char ld[8192], s_seed[32], s_secs[16];
		const char *old = getenv("LD_PRELOAD");
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		snprintf(ld, sizeof(ld), "%s%s%s", old ? old : "", old && *old ? ":" : "",
			 getenv("NSB_PRELOAD"));
		setenv("LD_PRELOAD", ld, 1);
		setenv("NOSIGBUS_FILL", fill, 1);
		unsetenv("NOSIGBUS_POLICY");
		unsetenv("NOSIGBUS_ERRORS");
		unsetenv("NOSIGBUS_STRICT");
		snprintf(s_seed, sizeof(s_seed), "%" PRIu64, seed);
		snprintf(s_secs, sizeof(s_secs), "%d", seconds);
		execl(self, "hostile", "--program", "--seed", s_seed, "--seconds", s_secs, "--fill",
		      fill, (char *)NULL);
		_exit(127);
	}
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (nsbt_now() > end) {
			nsbt_show_stacks(pid);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			nsbt_fail("seed %" PRIu64 ", fill=%s: the program hung (killed after %d s; "
				  "replay: hostile --seed %" PRIu64 " --fill %s)", seed, fill, limit,
				  seed, fill);
		}
		usleep(50000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("seed %" PRIu64 ", fill=%s: the program %s (replay: hostile --seed %" PRIu64
			  " --fill %s)", seed, fill, nsbt_status_str(status), seed, fill);
}

int
main(int argc, char **argv)
{
	const char *fill = "all";
	bool as_program = false, seeded = false;

	ps = nsbt_page();
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0), seeded = true;
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--fill") && i + 1 < argc)
			fill = argv[++i];
		else if (!strcmp(argv[i], "--program"))
			as_program = true;
		else
			nsbt_fail("usage: hostile [--seed N] [--seconds S] [--fill page|range|auto|all]");
	}
	if (seconds < 1)
		seconds = 1;
	if (as_program)
		return program(fill);
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	nsbt_require_tmpfs();
	if (!seeded)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	printf("seed %" PRIu64 " (replay: hostile --seed %" PRIu64 " --seconds %d)\n", seed, seed,
	       seconds);
	if (strcmp(fill, "all") != 0) {
		run("/proc/self/exe", fill);
	} else {
		run("/proc/self/exe", "page");
		run("/proc/self/exe", "range");
		run("/proc/self/exe", "auto");
	}
	printf("ok: the program outlived its peer under every fill\n");
	return 0;
}
