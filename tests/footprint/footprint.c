/* SPDX-License-Identifier: MIT */
/*
 * footprint - what the library adds to a process (issue 20; libnosigbus(7),
 * "What the library adds to a process").  Not linked with the library:
 * every check runs in a fresh exec of this program with LD_PRELOAD=
 * $NSB_PRELOAD (and, where a comparison needs it, without), under the
 * default policy, each under a watchdog that shows the stacks of, and
 * kills, a child that hangs.
 *
 *   nsb-footprint CHECK
 *
 *  inventory  after mapping 100 memfd pools (64 KiB, shared, touched, the
 *             descriptor closed as a compositor does) and unmapping them:
 *             descriptors (number, type, fdinfo flags), resource limits,
 *             the kernel's handler of every signal (raw rt_sigaction), the
 *             environment a child gets, the order of fork handlers and
 *             whether interposed calls work in them.  Equal with and
 *             without the library, except what the section lists: SIGBUS's
 *             handler, and VmSize and RSS (RssAnon: the library's own
 *             memory), which must stay within 8 MiB and 256 KiB of the
 *             process without it, with the 100 pools mapped and after.
 *  locks      fcntl (POSIX) locks on a memfd, a tmpfs and a disk file, held
 *             across mmap/munmap, nosigbus_protect/unprotect, and the
 *             program's dup2 onto the number of the library's descriptor,
 *             checked after each step from another process with F_GETLK.
 *  rlimit     setrlimit/getrlimit(RLIMIT_NOFILE) in one thread while three
 *             others map new memfds and tmpfs files: every getrlimit reads
 *             back what the thread set, and so does a child forked
 *             meanwhile.
 *  ulimit     RLIMIT_AS 64 KiB above what the process uses plus the 100
 *             MiB memfd it then maps, in a process where the library has
 *             no memory yet: the mapping succeeds as without the library;
 *             1 MiB above: it succeeds and is protected.
 *  atfork     pthread_atfork handlers registered first thing in main
 *             (prepare, parent, child) that call sigaction, sigprocmask,
 *             and mmap/mprotect/munmap of protected memory: fork returns
 *             in both processes.
 *
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

#include "nsbtest.h"

static size_t ps;
static char *self_exe;

/* ---- running children ---------------------------------------------------- */

/*
 * Runs this program as "child CHECK", preloaded or not, with stdout into a
 * pipe read back into out; a child that makes no progress for 120 s (a
 * hang: the attacks below deadlock on 46234bc) shows its stacks and is
 * killed.  Returns the wait status.
 */
static int
run_child(const char *check, bool preload, bool with_stderr, char *out, size_t outlen)
{
	int pfd[2], status = 0;
	size_t used = 0;
	int idle = 0;
	pid_t pid;

	NSBT_CHECK(pipe2(pfd, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		if (with_stderr)
			dup2(pfd[1], STDERR_FILENO);
		if (preload)
			setenv("LD_PRELOAD", getenv("NSB_PRELOAD"), 1);
		else
			unsetenv("LD_PRELOAD");
		unsetenv("NOSIGBUS_POLICY");
		execl(self_exe, self_exe, "child", check, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		int r = poll(&p, 1, 1000);

		if (r > 0) {
			ssize_t n = read(pfd[0], out + used, outlen - 1 - used);

			if (n <= 0)
				break;
			used += (size_t)n;
			idle = 0;
		} else if (++idle >= 120) {
			fprintf(stderr, "footprint: %s (%s) made no progress for 120 s\n", check,
				preload ? "with the library" : "without");
			nsbt_show_stacks(pid);
			kill(pid, SIGKILL);
			break;
		}
	}
	out[used] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0)
		NSBT_CHECK(errno == EINTR, "waitpid");
	return status;
}

/* Forks fn(arg) and returns its exit code (or 100 + signal). */
static int
in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(fn(arg));
	while (waitpid(pid, &status, 0) < 0)
		NSBT_CHECK(errno == EINTR, "waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static int (*api_protect)(void *, size_t);
static int (*api_unprotect)(void *, size_t);

static void
find_api(void)
{
	api_protect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_protect");
	api_unprotect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_unprotect");
}

/* ---- inventory ----------------------------------------------------------- */

static void
h_usr1(int sig)
{
	(void)sig;
}

static void
h_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
}

struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

static char fork_order[256];
static bool fork_calls_ok = true;

/* An interposed call of each kind, from a fork handler. */
static void
calls_in_handler(void)
{
	struct sigaction sa = { .sa_handler = h_usr1 };
	sigset_t set, old;
	int fd = memfd_create("nsb-fork", MFD_CLOEXEC);
	unsigned char *p;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		fork_calls_ok = false;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGBUS);
	if (sigprocmask(SIG_BLOCK, &set, &old) != 0 || sigprocmask(SIG_SETMASK, &old, NULL) != 0)
		fork_calls_ok = false;
	if (fd < 0 || ftruncate(fd, (off_t)ps) != 0) {
		fork_calls_ok = false;
		return;
	}
	p = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fork_calls_ok = false;
		return;
	}
	p[0] = 1;
	if (mprotect(p, 2 * ps, PROT_READ) != 0 || munmap(p, 2 * ps) != 0)
		fork_calls_ok = false;
}

#define FORK_HANDLER(name) \
	static void name(void) \
	{ \
		strncat(fork_order, " " #name, sizeof(fork_order) - strlen(fork_order) - 1); \
		calls_in_handler(); \
	}
FORK_HANDLER(prepare_a)
FORK_HANDLER(parent_a)
FORK_HANDLER(child_a)
FORK_HANDLER(prepare_b)
FORK_HANDLER(parent_b)
FORK_HANDLER(child_b)

static const char *
fd_type(int fd)
{
	static char buf[64];
	char link[64], target[256];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return "?";
	target[n] = '\0';
	/* pipe:[inode], anon_inode:[eventfd], /memfd:x (deleted): the kind */
	snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(target, ":["), target);
	return buf;
}

static unsigned long
fd_flags(int fd)
{
	char path[64], line[128];
	unsigned long flags = ~0ul;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "flags: %lo", &flags) == 1)
			break;
	if (f)
		fclose(f);
	return flags;
}

static void
print_fds(void)
{
	int fds[1024], n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	NSBT_CHECK(d != NULL, "/proc/self/fd");
	while ((e = readdir(d)) && n < 1024)
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			fds[n++] = atoi(e->d_name);
	closedir(d);
	printf("fds count=%d\n", n);
	for (int i = 0; i < n; i++)
		printf("fd %d type=%s flags=0%lo\n", fds[i], fd_type(fds[i]), fd_flags(fds[i]));
}

static void
print_memory(const char *when)
{
	/* RssAnon: the library's own memory (the file pages of its code are
	 * the page cache's, shared, and faulted in as it happens). */
	printf("mem-%s vmsize=%zu rss=%zu\n", when, nsbt_vm_size(),
	       nsbt_proc_bytes("/proc/self/status", "RssAnon"));
}

static int
print_env_child(void *arg)
{
	(void)arg;
	execl(self_exe, self_exe, "child", "printenv", (char *)NULL);
	return 127;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Our environment, sorted, one per line, into buf. */
static void
env_text(char **env, char *buf, size_t len)
{
	char *sorted[512];
	size_t n = 0, used = 0;

	for (; *env && n < 512; env++)
		sorted[n++] = *env;
	qsort(sorted, n, sizeof(*sorted), cmp_str);
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s\n", sorted[i]);
}

extern char **environ;

static void
child_printenv(void)
{
	static char buf[65536];

	env_text(environ, buf, sizeof(buf));
	fputs(buf, stdout);
}

/* The environment a child of ours starts with equals ours. */
static void
print_child_env(void)
{
	static char mine[65536], theirs[65536];
	int pfd[2], status;
	size_t used = 0;
	ssize_t n;
	pid_t pid;

	env_text(environ, mine, sizeof(mine));
	NSBT_CHECK(pipe(pfd) == 0, "pipe");
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		_exit(print_env_child(NULL));
	}
	close(pfd[1]);
	while ((n = read(pfd[0], theirs + used, sizeof(theirs) - 1 - used)) > 0)
		used += (size_t)n;
	theirs[used] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	printf("env-child %s\n", strcmp(mine, theirs) == 0 ? "same" : "differs");
	if (strcmp(mine, theirs) != 0)
		fprintf(stderr, "the child's environment:\n%s\nours:\n%s", theirs, mine);
}

static void
print_fork_order(void)
{
	int pfd[2], status;
	char child_order[256] = "";
	ssize_t n;
	pid_t pid;

	fork_order[0] = '\0';
	NSBT_CHECK(pipe(pfd) == 0, "pipe");
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close(pfd[0]);
		n = snprintf(child_order, sizeof(child_order), "%s calls=%s", fork_order,
			     fork_calls_ok ? "ok" : "failed");
		(void)!write(pfd[1], child_order, (size_t)n);
		_exit(0);
	}
	close(pfd[1]);
	n = read(pfd[0], child_order, sizeof(child_order) - 1);
	child_order[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	printf("fork-order parent:%s calls=%s; child:%s\n", fork_order,
	       fork_calls_ok ? "ok" : "failed", child_order);
}

static void
child_inventory(void)
{
	enum { POOLS = 100 };
	static void *pools[POOLS];
	size_t len = 64 * 1024;
	struct sigaction sa;

	pthread_atfork(prepare_a, parent_a, child_a);
	pthread_atfork(prepare_b, parent_b, child_b);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h_usr1;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
	NSBT_CHECK(sigaction(SIGCHLD, &sa, NULL) == 0, "sigaction");
	sa.sa_sigaction = h_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	NSBT_CHECK(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
	signal(SIGPIPE, SIG_IGN);

	print_memory("start");
	for (int i = 0; i < POOLS; i++) {
		int fd = memfd_create("wl_shm", MFD_CLOEXEC);

		NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0, "memfd: %s", strerror(errno));
		pools[i] = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		NSBT_CHECK(pools[i] != MAP_FAILED, "mmap: %s", strerror(errno));
		close(fd);
		((volatile char *)pools[i])[0] = 1;
	}
	print_memory("mapped");
	for (int i = 0; i < POOLS; i++)
		NSBT_CHECK(munmap(pools[i], len) == 0, "munmap");
	print_memory("unmapped");
	print_fds();
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		struct rlimit rl;

		NSBT_CHECK(getrlimit((__rlimit_resource_t)r, &rl) == 0, "getrlimit");
		printf("rlimit %d cur=%llu max=%llu\n", r, (unsigned long long)rl.rlim_cur,
		       (unsigned long long)rl.rlim_max);
	}
	for (int sig = 1; sig < 65; sig++) {
		struct ksigaction k;
		const char *who;

		if (syscall(SYS_rt_sigaction, sig, NULL, &k, 8) != 0)
			continue;
		who = k.handler == (void *)SIG_DFL   ? "dfl"
		      : k.handler == (void *)SIG_IGN ? "ign"
		      : k.handler == (void *)h_usr1 || k.handler == (void *)h_segv ? "program"
										     : "other";
		printf("sig %d handler=%s flags=0x%lx mask=0x%" PRIx64 "\n", sig, who,
		       k.flags & ~0x04000000ul /* SA_RESTORER: the C library's */, k.mask);
	}
	print_child_env();
	print_fork_order();
}

/* ---- locks --------------------------------------------------------------- */

struct lock_probe {
	int fd;
	pid_t holder;
};

/* In another process: is the holder's write lock on the whole file there? */
static int
probe_lock(void *arg)
{
	struct lock_probe *p = arg;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };

	if (fcntl(p->fd, F_GETLK, &fl) != 0)
		return 2;
	return fl.l_type == F_WRLCK && fl.l_pid == p->holder ? 0 : 1;
}

static void
expect_locked(int fd, const char *backing, const char *step)
{
	struct lock_probe p = { fd, getpid() };
	int r = in_child(probe_lock, &p);

	NSBT_CHECK(r == 0, "%s file: after %s another process sees %s", backing, step,
		   r == 1 ? "no lock: the program's lock was released" : "an error");
	printf("ok: locks: %s: held after %s\n", backing, step);
}

/* The descriptors open now that are not in before[0..n). */
static int
new_fds(const int *before, int n, int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int got = 0;

	NSBT_CHECK(d != NULL, "/proc/self/fd");
	while ((e = readdir(d)) && got < max) {
		int fd = atoi(e->d_name), i;

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		for (i = 0; i < n && before[i] != fd; i++)
			;
		if (i == n)
			out[got++] = fd;
	}
	closedir(d);
	return got;
}

static int
list_fds(int *out, int max)
{
	return new_fds(NULL, 0, out, max);
}

static void
child_locks(void)
{
	static const enum nsbt_backing backings[] = { NSBT_MEMFD, NSBT_TMPFS, NSBT_DISK };
	bool lib = nsbt_have_library();

	struct rlimit rl;

	/* A desktop's limits (1024:524288): room above the soft limit, where
	 * the library once kept duplicates of the program's descriptors. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 1024 && rl.rlim_max > 2048) {
		rl.rlim_cur = 1024;
		NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	}
	find_api();
	for (size_t b = 0; b < 3; b++) {
		const char *name = nsbt_backing_name(backings[b]);
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		int fd = nsbt_file(backings[b], 2 * ps), other = nsbt_file(NSBT_TMPFS, ps);
		/* The default policy protects memory-backed files; a disk
		 * file through the flag. */
		int flags = MAP_SHARED | (backings[b] == NSBT_DISK ? MAP_NOSIGBUS : 0);
		int before[256], nb, kept[16], nk, fd2;
		char path[64];
		unsigned char *p;

		NSBT_CHECK(fcntl(fd, F_SETLK, &fl) == 0, "F_SETLK: %s", strerror(errno));
		expect_locked(fd, name, "F_SETLK");

		p = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, flags, fd, 0);
		NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
		expect_locked(fd, name, "mmap");
		if (lib)
			(void)*(volatile unsigned char *)(p + 3 * ps);	/* a rescue */
		NSBT_CHECK(munmap(p, 4 * ps) == 0, "munmap");
		expect_locked(fd, name, "munmap of the last mapping");

		if (api_protect) {
			p = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
			NSBT_CHECK(api_protect(p, 2 * ps) == 0, "nosigbus_protect: %s", strerror(errno));
			expect_locked(fd, name, "nosigbus_protect");
			NSBT_CHECK(api_unprotect(p, 2 * ps) == 0, "nosigbus_unprotect");
			expect_locked(fd, name, "nosigbus_unprotect");
			NSBT_CHECK(api_protect(p, 2 * ps) == 0, "nosigbus_protect: %s", strerror(errno));
			NSBT_CHECK(munmap(p, 2 * ps) == 0, "munmap");
			expect_locked(fd, name, "munmap of a nosigbus_protect range");
		}

		/* The program's dup2 onto the library's number for this file.
		 * The library keeps a descriptor once the program closes the
		 * one a mapping was made from (files.c): a second one here,
		 * whose close releases the lock as it would without the
		 * library; the lock is taken again. */
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		fd2 = open(path, O_RDWR | O_CLOEXEC);
		NSBT_CHECK(fd2 >= 0, "open %s: %s", path, strerror(errno));
		p = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, flags, fd2, 0);
		NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
		nb = list_fds(before, 256);
		NSBT_CHECK(close(fd2) == 0, "close: %s", strerror(errno));
		NSBT_CHECK(fcntl(fd, F_SETLK, &fl) == 0, "F_SETLK: %s", strerror(errno));
		expect_locked(fd, name, "F_SETLK again (the close of a second descriptor let it go)");
		nk = new_fds(before, nb, kept, 16);
		NSBT_CHECK(nk <= 1, "%d descriptors kept for one file", nk);
		if (lib)
			NSBT_CHECK(nk == 1, "%s file: no descriptor kept: its rescues cannot be "
				   "checked against its size", name);
		for (int i = 0; i < nk; i++) {
			NSBT_CHECK(dup2(other, kept[i]) == kept[i], "dup2: %s", strerror(errno));
			expect_locked(fd, name, "the program's dup2 onto the library's number");
			NSBT_CHECK(close(kept[i]) == 0, "close of the program's own dup: %s",
				   strerror(errno));
			expect_locked(fd, name, "the program's close of that number");
		}
		if (lib)
			(void)*(volatile unsigned char *)(p + 3 * ps);
		NSBT_CHECK(munmap(p, 4 * ps) == 0, "munmap");
		expect_locked(fd, name, "munmap after the dup2");
		close(other);
		close(fd);
	}
}

/* ---- rlimit -------------------------------------------------------------- */

static atomic_bool stop_mappers;
static atomic_long mapped_count;

static void *
mapper(void *arg)
{
	long n = 0;

	(void)arg;
	while (!atomic_load(&stop_mappers)) {
		int fd = nsbt_file(n & 1 ? NSBT_TMPFS : NSBT_MEMFD, ps);
		void *p = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);

		NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
		close(fd);
		NSBT_CHECK(munmap(p, ps) == 0, "munmap");
		atomic_fetch_add(&mapped_count, 1);
		n++;
	}
	return NULL;
}

static rlim_t expected_soft;

static int
child_reads_limit(void *arg)
{
	struct rlimit rl;

	(void)arg;
	return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == expected_soft ? 0 : 1;
}

static void
child_rlimit(void)
{
	pthread_t t[3];
	struct rlimit rl, got;
	rlim_t hard, s1, s2;
	long i, wrong = 0, wrong_child = 0, forks = 0;

	NSBT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	hard = rl.rlim_max;
	if (hard < 200)
		nsbt_skip("rlimit: the hard RLIMIT_NOFILE is %llu: too low", (unsigned long long)hard);
	/* Below the hard limit, where raising the soft one was possible. */
	s1 = (hard > 4096 ? 4096 : hard) - 2;
	s2 = s1 - 60;
	for (int k = 0; k < 3; k++)
		NSBT_CHECK(pthread_create(&t[k], NULL, mapper, NULL) == 0, "pthread_create");
	/* Bounded by work: at least 20000 rounds and 3000 new files mapped. */
	for (i = 0; i < 20000 || atomic_load(&mapped_count) < 3000; i++) {
		rl.rlim_cur = i & 1 ? s1 : s2;
		rl.rlim_max = hard;
		NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
		NSBT_CHECK(getrlimit(RLIMIT_NOFILE, &got) == 0, "getrlimit");
		if (got.rlim_cur != rl.rlim_cur || got.rlim_max != hard) {
			if (wrong++ < 3)
				fprintf(stderr, "getrlimit read %llu:%llu after setrlimit(%llu:%llu)\n",
					(unsigned long long)got.rlim_cur,
					(unsigned long long)got.rlim_max,
					(unsigned long long)rl.rlim_cur, (unsigned long long)hard);
		}
		if (i % 200 == 0) {
			expected_soft = rl.rlim_cur;
			wrong_child += in_child(child_reads_limit, NULL) != 0;
			forks++;
		}
		/* The process never needs a second of this loop after 10^6. */
		NSBT_CHECK(i < 5000000, "the mapping threads made no progress");
	}
	atomic_store(&stop_mappers, true);
	for (int k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	printf("rlimit: %ld setrlimit/getrlimit rounds while %ld files were mapped; %ld read "
	       "back wrong; %ld of %ld children saw another limit\n", i,
	       atomic_load(&mapped_count), wrong, wrong_child, forks);
	NSBT_CHECK(wrong == 0, "%ld getrlimit calls read a limit the program did not set", wrong);
	NSBT_CHECK(wrong_child == 0, "%ld forked children inherited a limit the program did not set",
		   wrong_child);
	printf("ok: rlimit: the program's RLIMIT_NOFILE is its own\n");
}

/* ---- ulimit -------------------------------------------------------------- */

/* RLIMIT_AS 64 KiB above what the program needs, in a process where the
 * library has no memory yet (it then needs about 32 KiB for itself, not
 * the 384 KiB of its first chunks): the mapping is made, as without the
 * library. */
static int
tight_mapping(void *arg)
{
	size_t need = (size_t)100 << 20;
	int fd = *(int *)arg;
	struct rlimit rl;
	void *p;

	rl.rlim_cur = rl.rlim_max = nsbt_vm_size() + need + ((size_t)64 << 10);
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		return 2;
	p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "RLIMIT_AS 64 KiB above what the process needs: mmap: %s\n",
			strerror(errno));
		return 1;
	}
	return munmap(p, need) == 0 ? 0 : 3;
}

static void
child_ulimit(void)
{
	size_t need = (size_t)100 << 20;
	int fd = memfd_create("big", MFD_CLOEXEC);
	struct rlimit rl;
	unsigned char *p;

	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)need) == 0, "memfd: %s", strerror(errno));
	NSBT_CHECK(in_child(tight_mapping, &fd) == 0, "a mapping that fits without the library "
		   "failed with it");
	printf("ok: ulimit: a 100 MiB mapping with 64 KiB of RLIMIT_AS to spare\n");
	rl.rlim_cur = rl.rlim_max = nsbt_vm_size() + need + ((size_t)1 << 20);
	NSBT_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
	p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "RLIMIT_AS 1 MiB above what the process needs: its 100 MiB "
		   "mmap failed: %s", strerror(errno));
	p[0] = 1;
	if (nsbt_have_library()) {
		/* Protected: a page past the new end reads zeros. */
		NSBT_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
		NSBT_CHECK(*(volatile unsigned char *)(p + need / 2) == 0, "not zero");
	}
	NSBT_CHECK(munmap(p, need) == 0, "munmap");
	printf("ok: ulimit: a 100 MiB mapping with 1 MiB of RLIMIT_AS to spare\n");
}

/* ---- atfork -------------------------------------------------------------- */

static unsigned char *protected_page;

static void
atfork_calls(void)
{
	calls_in_handler();
	if (mprotect(protected_page, ps, PROT_READ) != 0 ||
	    mprotect(protected_page, ps, PROT_READ | PROT_WRITE) != 0)
		fork_calls_ok = false;
}

static void
child_atfork(void)
{
	int fd;

	/* First thing: before any call of the library's. */
	pthread_atfork(atfork_calls, atfork_calls, atfork_calls);
	fd = memfd_create("prot", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)ps) == 0, "memfd");
	protected_page = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	NSBT_CHECK(protected_page != MAP_FAILED, "mmap");
	close(fd);
	if (nsbt_have_library())
		(void)*(volatile unsigned char *)(protected_page + ps);	/* a rescue */
	for (int i = 0; i < 3; i++) {
		pid_t pid;
		int status;

		fflush(NULL);
		pid = fork();
		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			_exit(fork_calls_ok ? 0 : 3);
		while (waitpid(pid, &status, 0) < 0)
			NSBT_CHECK(errno == EINTR, "waitpid");
		NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			   "the child's fork handlers: %s", nsbt_status_str(status));
		NSBT_CHECK(fork_calls_ok, "an interposed call failed in the parent's fork handlers");
		printf("atfork: fork %d returned in both processes\n", i);
	}
	printf("ok: atfork: sigaction, sigprocmask, mmap/mprotect/munmap in every fork handler\n");
}

/* ---- the driver ---------------------------------------------------------- */

static int
child(const char *check)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(check, "printenv") == 0)
		child_printenv();
	else if (strcmp(check, "inventory") == 0)
		child_inventory();
	else if (strcmp(check, "locks") == 0)
		child_locks();
	else if (strcmp(check, "rlimit") == 0)
		child_rlimit();
	else if (strcmp(check, "ulimit") == 0)
		child_ulimit();
	else if (strcmp(check, "atfork") == 0)
		child_atfork();
	else
		nsbt_fail("unknown check %s", check);
	fflush(NULL);
	return 0;
}

/* The line of text that starts with key (up to its first space). */
static const char *
line_of(const char *text, const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key);

	for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		if (strncmp(l, key, klen) == 0 && l[klen] == ' ') {
			snprintf(buf, len, "%.*s", (int)strcspn(l, "\n"), l);
			return buf;
		}
	return NULL;
}

static void
mem_of(const char *text, const char *key, size_t *vm, size_t *rss)
{
	char buf[256];

	NSBT_CHECK(line_of(text, key, buf, sizeof(buf)) &&
		   sscanf(buf + strlen(key), " vmsize=%zu rss=%zu", vm, rss) == 2,
		   "no %s line", key);
}

/* What the section lists: SIGBUS's handler (the library's) and memory. */
static bool
documented(const char *line)
{
	char sigbus[32];

	snprintf(sigbus, sizeof(sigbus), "sig %d ", SIGBUS);
	return strncmp(line, sigbus, strlen(sigbus)) == 0 || strncmp(line, "mem-", 4) == 0;
}

static void
inventory(void)
{
	static char without[65536], with[65536];
	static const char *const mem_keys[] = { "mem-mapped", "mem-unmapped" };
	int st_without = run_child("inventory", false, false, without, sizeof(without));
	int st_with = run_child("inventory", true, false, with, sizeof(with));
	size_t vm0, rss0, vm1, rss1, start_vm0, start_rss0, start_vm1, start_rss1;
	int differences = 0;

	printf("without the library:\n%s\nwith it:\n%s\n", without, with);
	nsbt_expect_exit(st_without, 0, "inventory without the library");
	nsbt_expect_exit(st_with, 0, "inventory with the library");
	/* Line by line, both ways. */
	for (int pass = 0; pass < 2; pass++) {
		const char *a = pass ? with : without, *b = pass ? without : with;

		for (const char *l = a; *l; l = strchr(l, '\n') + 1) {
			char line[512];

			snprintf(line, sizeof(line), "%.*s", (int)strcspn(l, "\n"), l);
			if (!documented(line) && !strstr(b, line) && differences++ < 20)
				fprintf(stderr, "FAIL: only %s the library: %s\n", pass ? "with" : "without",
					line);
			if (!strchr(l, '\n'))
				break;
		}
	}
	mem_of(without, "mem-start", &start_vm0, &start_rss0);
	mem_of(with, "mem-start", &start_vm1, &start_rss1);
	printf("footprint: at start, the library adds %zd KiB of VmSize, %zd KiB of RssAnon (its "
	       "code and data)\n", ((ssize_t)start_vm1 - (ssize_t)start_vm0) / 1024,
	       ((ssize_t)start_rss1 - (ssize_t)start_rss0) / 1024);
	for (size_t k = 0; k < 2; k++) {
		mem_of(without, mem_keys[k], &vm0, &rss0);
		mem_of(with, mem_keys[k], &vm1, &rss1);
		printf("footprint: %s: VmSize %zu KiB without, %zu KiB with (+%zd KiB); RssAnon %zu KiB "
		       "without, %zu KiB with (+%zd KiB)\n", mem_keys[k] + 4, vm0 / 1024, vm1 / 1024,
		       ((ssize_t)vm1 - (ssize_t)vm0) / 1024, rss0 / 1024, rss1 / 1024,
		       ((ssize_t)rss1 - (ssize_t)rss0) / 1024);
		NSBT_CHECK(vm1 <= vm0 + ((size_t)8 << 20),
			   "%s: the library adds %zu KiB of VmSize, more than 8 MiB", mem_keys[k],
			   (vm1 - vm0) / 1024);
		NSBT_CHECK(rss1 <= rss0 + ((size_t)256 << 10),
			   "%s: the library adds %zu KiB of RSS, more than 256 KiB", mem_keys[k],
			   (rss1 - rss0) / 1024);
	}
	NSBT_CHECK(differences == 0, "%d differences the footprint section does not list",
		   differences);
	printf("ok: footprint: no difference but SIGBUS's handler and memory within its bounds\n");
}

int
main(int argc, char **argv)
{
	static char out[65536];
	int status;

	ps = nsbt_page();
	self_exe = realpath("/proc/self/exe", NULL);
	NSBT_CHECK(self_exe != NULL, "realpath");
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child(argv[2]);
	NSBT_CHECK(argc == 2, "usage: nsb-footprint CHECK");
	NSBT_CHECK(getenv("NSB_PRELOAD") != NULL, "NSB_PRELOAD is not set");
	if (strcmp(argv[1], "inventory") == 0) {
		inventory();
		return 0;
	}
	/* The attacks: without the library first (the test itself is right),
	 * then with it. */
	for (int lib = 0; lib < 2; lib++) {
		status = run_child(argv[1], lib, true, out, sizeof(out));
		fputs(out, stdout);
		/* The library says nothing unless asked (NOSIGBUS_LOG). */
		NSBT_CHECK(!strstr(out, "nosigbus:"), "the library printed something");
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			nsbt_skip("%s: the child skipped", argv[1]);
		nsbt_expect_exit(status, 0, nsbt_fmt("%s %s the library", argv[1],
						     lib ? "with" : "without"));
	}
	return 0;
}
