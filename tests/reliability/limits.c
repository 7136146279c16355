/* SPDX-License-Identifier: MIT */
/*
 * limits - resource and fault limits under the preloaded library (issue 7,
 * item 5).  Each check runs in a fresh exec with the library preloaded:
 *
 *  maxmap   protected mappings, one VMA each, until the kernel's
 *           vm.max_map_count refuses one: that mmap fails with ENOMEM and
 *           records nothing, every earlier one is recorded and rescued when
 *           touched, and unmapping them all leaves no record.
 *  rlimit   RLIMIT_AS a few pages above what the process uses: protected
 *           mappings are made until mmap fails (the mapping or the table's
 *           growth does not fit); the failure is ENOMEM, nothing is mapped
 *           where it was asked, nothing is recorded for it, and the earlier
 *           mappings stay protected.
 *  fds      the descriptors the library keeps (one per protected file
 *           whose faults need its size, at most 16) never get in the
 *           program's way (libnosigbus(7), "Descriptors"): each is O_PATH
 *           and close-on-exec (fdinfo), numbered below the soft
 *           RLIMIT_NOFILE and 1024 and at or above the lesser minus 16
 *           (with soft == hard too: no limit is ever changed); close() of
 *           one fails with EBADF and leaves it open; a program that opens
 *           files up to its limit gets as many as without them less the
 *           ones kept; and /proc/self/fd is the same before and after
 *           mapping, rescuing, mprotect, mremap (whole and in pieces),
 *           nosigbus_protect/unprotect and unmapping, with every policy
 *           and with NOSIGBUS_LOG=1.
 *  evict    20 tmpfs files mapped: 16 descriptors kept, and a rescue of a
 *           file whose descriptor was let go is checked through the
 *           program's own descriptor of it, unverified without one.
 *  leaks    after everything in a window is unmapped, no record is left
 *           (mappings back to 0) and /proc/self/maps shows nothing in it.
 *
 * The table's own allocation failing at a chosen moment (through the
 * internal hook) is in unit-ranges.c, which links the library's objects.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "nsbtest.h"

static size_t ps;
static int (*get_stats)(struct nosigbus_stats *, size_t);
static int (*protect)(void *, size_t);
static int (*unprotect)(void *, size_t);

static struct nosigbus_stats
stats(void)
{
	struct nosigbus_stats st;

	NSBT_CHECK(get_stats(&st, sizeof(st)) == 0, "nosigbus_get_stats: %s", strerror(errno));
	return st;
}

static long
read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long long v = -1;

	if (!f || fscanf(f, "%lld", &v) != 1)
		nsbt_fail("cannot read %s", path);
	fclose(f);
	return (long)v;
}

static size_t
count_vmas(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	size_t n = 0;
	int c;

	NSBT_CHECK(f != NULL, "/proc/self/maps: %s", strerror(errno));
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static bool
is_mapped(void *p, size_t len)
{
	unsigned char vec[64];

	return mincore(p, len, vec) == 0;
}

/* A sanitizer runtime allocates with mmap as it goes: it cannot live at
 * the VMA limit or under a tight RLIMIT_AS, and dies there on its own. */
static const char *
sanitizer_loaded(void)
{
	if (dlsym(RTLD_DEFAULT, "__asan_init"))
		return "AddressSanitizer";
	if (dlsym(RTLD_DEFAULT, "__tsan_init"))
		return "ThreadSanitizer";
	if (dlsym(RTLD_DEFAULT, "__msan_init"))
		return "MemorySanitizer";
	return NULL;
}

/* Reads every page: must be rescued (0) and must not kill. */
static void
touch_zero(volatile unsigned char *p, size_t len, const char *what)
{
	for (size_t off = 0; off < len; off += ps)
		NSBT_CHECK(p[off] == 0, "%s: page %zu reads 0x%02x", what, off / ps, p[off]);
}

/* ---- maxmap -------------------------------------------------------------- */

static void
check_maxmap(void)
{
	long max = read_long("/proc/sys/vm/max_map_count");
	size_t n = 0, touched = 0, before = count_vmas();
	struct nosigbus_stats st0 = stats(), st;
	int fd = nsbt_file(NSBT_MEMFD, 0);
	void **maps;
	int err = 0;

	if (max <= 0 || max > 1 << 20)
		nsbt_skip("vm.max_map_count is %ld: too many to fill in a test", max);
	if (sanitizer_loaded())
		nsbt_skip("limits maxmap: %s is loaded and needs VMAs of its own", sanitizer_loaded());
	maps = calloc((size_t)max + 1, sizeof(*maps));
	NSBT_CHECK(maps != NULL, "calloc");
	/* One page each, at offset 0: neighbours never merge into one VMA. */
	for (;;) {
		void *p = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);

		if (p == MAP_FAILED) {
			err = errno;
			break;
		}
		maps[n++] = p;
		NSBT_CHECK(n <= (size_t)max, "more than vm.max_map_count (%ld) mappings", max);
	}
	st = stats();
	printf("limits: maxmap: vm.max_map_count %ld; %zu VMAs before; %zu protected mappings made, "
	       "then mmap failed with %s; %zu VMAs now\n", max, before, n, strerror(err), count_vmas());
	NSBT_CHECK(err == ENOMEM, "the mmap at the limit failed with %s, not ENOMEM", strerror(err));
	NSBT_CHECK(n + before >= (size_t)max - 16, "only %zu mappings before the limit", n);
	NSBT_CHECK(st.mappings - st0.mappings == n, "%" PRIu64 " records for %zu protected mappings",
		   st.mappings - st0.mappings, n);

	/* At the limit the kernel refuses every mmap, the replacement too:
	 * the fault is passed on, and the process dies as it would without
	 * the library, saying why in one line (SPEC §5). */
	{
		int pfd[2], status;
		char buf[1024];
		ssize_t got;
		pid_t pid;

		NSBT_CHECK(pipe(pfd) == 0, "pipe");
		fflush(NULL);
		pid = fork();
		NSBT_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			dup2(pfd[1], STDERR_FILENO);
			(void)*(volatile unsigned char *)maps[n / 2];
			_exit(0);
		}
		close(pfd[1]);
		got = read(pfd[0], buf, sizeof(buf) - 1);
		buf[got > 0 ? got : 0] = '\0';
		close(pfd[0]);
		while (waitpid(pid, &status, 0) < 0)
			NSBT_CHECK(errno == EINTR, "waitpid");
		printf("limits: maxmap: a rescue at the limit: the child %s, stderr: %s", nsbt_status_str(status),
		       buf[0] ? buf : "(nothing)\n");
		NSBT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
			   "a fault that cannot be rescued must die of SIGBUS: %s", nsbt_status_str(status));
		NSBT_CHECK(strstr(buf, "cannot replace the page") && strchr(buf, '\n') == strrchr(buf, '\n'),
			   "expected one line saying why on stderr, got: %s", buf);
	}

	/* Two VMAs below the limit, every mapping is still protected: a
	 * sample, and the newest ones.  (A one-page mapping replaced by a
	 * zero page stays one VMA.) */
	NSBT_CHECK(munmap(maps[--n], ps) == 0 && munmap(maps[--n], ps) == 0, "munmap");
	for (size_t i = 0; i < n; i += i + 200 < n ? 97 : 1, touched++)
		touch_zero(maps[i], ps, "a protected mapping near the limit");
	st = stats();
	NSBT_CHECK(st.rescues - st0.rescues == touched && st.failures == st0.failures,
		   "%zu pages touched: %" PRIu64 " rescues, %" PRIu64 " failures", touched,
		   st.rescues - st0.rescues, st.failures - st0.failures);

	/* Newest (lowest) first, so that the table shrinks from its end. */
	while (n)
		NSBT_CHECK(munmap(maps[--n], ps) == 0, "munmap: %s", strerror(errno));
	st = stats();
	NSBT_CHECK(st.mappings == st0.mappings, "%" PRIu64 " records left after unmapping all",
		   st.mappings - st0.mappings);
	printf("ok: limits: maxmap: ENOMEM at the limit, SIGBUS and one line for a rescue there, "
	       "%zu rescues just below it, no record left\n", touched);
	free(maps);
	close(fd);
}

/* ---- rlimit -------------------------------------------------------------- */

static void
check_rlimit(void)
{
	int fd = nsbt_file(NSBT_MEMFD, 0);
	unsigned char *base, *p = NULL;
	struct nosigbus_stats st0 = stats(), st;
	size_t n = 0, max = 4096;
	struct rlimit rl;
	int err = 0;

	if (sanitizer_loaded())
		nsbt_skip("limits rlimit: %s is loaded and allocates address space of its own",
			  sanitizer_loaded());
	/* Addresses of our choosing, to see that a failed call left nothing. */
	base = mmap(NULL, max * 2 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(base != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(munmap(base, max * 2 * ps) == 0, "munmap");

	rl.rlim_cur = rl.rlim_max = nsbt_vm_size() + 6 * ps;
	NSBT_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
	for (n = 0; n < max; n++) {
		/* Every other page, so that no two merge. */
		p = mmap(base + n * 2 * ps, ps, PROT_READ,
			 MAP_PRIVATE | MAP_NOSIGBUS | MAP_FIXED_NOREPLACE, fd, 0);
		if (p == MAP_FAILED) {
			err = errno;
			p = base + n * 2 * ps;
			break;
		}
	}
	rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
	setrlimit(RLIMIT_AS, &rl);
	st = stats();
	printf("limits: rlimit: RLIMIT_AS 6 pages above the process's size: %zu protected mappings, "
	       "then mmap failed with %s\n", n, strerror(err));
	NSBT_CHECK(n < max, "RLIMIT_AS never stopped mmap");
	NSBT_CHECK(err == ENOMEM, "the failed mmap set errno %s, not ENOMEM", strerror(err));
	NSBT_CHECK(!is_mapped(p, ps), "the failed mmap left something mapped at its address");
	NSBT_CHECK(st.mappings - st0.mappings == n, "%" PRIu64 " records for %zu mappings",
		   st.mappings - st0.mappings, n);
	for (size_t i = 0; i < n; i++)
		touch_zero(base + i * 2 * ps, ps, "a mapping made under RLIMIT_AS");
	st = stats();
	NSBT_CHECK(st.rescues - st0.rescues == n, "%" PRIu64 " rescues for %zu pages",
		   st.rescues - st0.rescues, n);
	munmap(base, max * 2 * ps);
	NSBT_CHECK(stats().mappings == st0.mappings, "records left after unmapping");
	printf("ok: limits: rlimit: ENOMEM, nothing mapped or recorded for it, %zu earlier mappings "
	       "still protected\n", n);
	close(fd);
}

/* ---- fds ----------------------------------------------------------------- */

static size_t
list_fds(char *out, size_t len)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t used = 0, n = 0;

	NSBT_CHECK(d != NULL, "/proc/self/fd: %s", strerror(errno));
	out[0] = '\0';
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		used += (size_t)snprintf(out + used, len - used, " %s", e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

/* Is fd a descriptor of /proc/PID/maps (the one the library keeps for its
 * queries while protected mappings exist)? */
static bool
is_maps(int fd)
{
	char link[64], target[256];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 5)
		return false;
	target[n] = '\0';
	return strcmp(target + n - 5, "/maps") == 0 && strncmp(target, "/proc/", 6) == 0;
}

/* Descriptors open now that are not in `before`, into kept[]: the files'
 * (the one of the maps checked apart). */
static int
new_fds(const char *before, int *kept, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	NSBT_CHECK(d != NULL, "/proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)) && n < max) {
		char word[32];
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		snprintf(word, sizeof(word), " %d ", fd);
		if (strstr(before, word))
			continue;
		if (is_maps(fd)) {
			NSBT_CHECK(fd >= 1024 - 16 && fcntl(fd, F_GETFD) == FD_CLOEXEC,
				   "the library's descriptor %d of the maps is not high and "
				   "close-on-exec", fd);
			NSBT_CHECK(close(fd) == -1 && errno == EBADF,
				   "close(%d) of the library's descriptor of the maps did not fail "
				   "with EBADF", fd);
			continue;
		}
		kept[n++] = fd;
	}
	closedir(d);
	return n;
}

/* How many files can be opened before EMFILE (all closed again). */
static int
count_opens(void)
{
	static int fds[70000];
	int n = 0;

	while (n < (int)(sizeof(fds) / sizeof(fds[0]))) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (fd < 0) {
			NSBT_CHECK(errno == EMFILE, "open: %s, not EMFILE", strerror(errno));
			break;
		}
		fds[n++] = fd;
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return n;
}

static void
check_fds(void)
{
	static const enum nsbt_backing backings[] = { NSBT_MEMFD, NSBT_TMPFS, NSBT_DISK };
	char before[4096], after[4096], spaced[4200];
	struct rlimit rl;
	int steps = 0, kept_seen = 0, opens_without, opens_with;

	/* The container case (soft == hard), where the library once kept
	 * nothing: it must keep descriptors all the same. */
	NSBT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_max > 2048 || rl.rlim_max == RLIM_INFINITY)
		rl.rlim_max = 2048;
	rl.rlim_cur = rl.rlim_max;
	NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	list_fds(before, sizeof(before));
	snprintf(spaced, sizeof(spaced), "%s ", before);
	opens_without = count_opens();
	for (size_t b = 0; b < 3; b++) {
		for (int shared = 0; shared < 2; shared++) {
			for (int flag = 0; flag < 2; flag++) {
				int fd = nsbt_file(backings[b], 2 * ps);
				int flags = (shared ? MAP_SHARED : MAP_PRIVATE) | (flag ? MAP_NOSIGBUS : 0);
				unsigned char *p, *q;
				int kept[16], n;

				p = mmap(NULL, 8 * ps, PROT_READ | PROT_WRITE, flags, fd, 0);
				if (p == MAP_FAILED && shared && flag && errno == EINVAL) {
					close(fd);	/* NOSIGBUS_STRICT=1 */
					continue;
				}
				NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
				close(fd);
				/* What the library keeps for this file, if anything. */
				n = new_fds(spaced, kept, 16);
				NSBT_CHECK(n <= 1, "%d descriptors kept for one file (%d, %d)", n, kept[0], kept[1]);
				for (int i = 0; i < n; i++) {
					int top = rl.rlim_cur > 1024 ? 1024 : (int)rl.rlim_cur;

					NSBT_CHECK(kept[i] < top && kept[i] >= top - 16,
						   "kept descriptor %d not in [%d, %d)", kept[i], top - 16, top);
					NSBT_CHECK(fcntl(kept[i], F_GETFD) == FD_CLOEXEC,
						   "kept descriptor %d is not close-on-exec", kept[i]);
					NSBT_CHECK(fcntl(kept[i], F_GETFL) >= 0 &&
						   (fcntl(kept[i], F_GETFL) & O_PATH),
						   "kept descriptor %d is not O_PATH: closing it would "
						   "release the program's locks", kept[i]);
					NSBT_CHECK(close(kept[i]) == -1 && errno == EBADF,
						   "close(%d) of a kept descriptor did not fail with EBADF", kept[i]);
					NSBT_CHECK(fcntl(kept[i], F_GETFD) >= 0,
						   "close() took the kept descriptor %d away", kept[i]);
					opens_with = count_opens();
					NSBT_CHECK(opens_with == opens_without - n,
						   "%d files open up to the limit with %d kept descriptors, %d "
						   "without", opens_with, n, opens_without);
					kept_seen++;
				}
				/* Rescue two pages only if protected: unprotected would die. */
				if (flag) {
					p[4 * ps] = 1;
					(void)*(volatile unsigned char *)(p + 6 * ps);
				}
				NSBT_CHECK(mprotect(p, 8 * ps, PROT_READ) == 0, "mprotect");
				/* Rescued pages make it several VMAs: mremap in pieces. */
				q = mremap(p, 8 * ps, 10 * ps, MREMAP_MAYMOVE);
				NSBT_CHECK(q != MAP_FAILED, "mremap: %s", strerror(errno));
				/* The file is still mapped: its descriptor stays (it was let go
				 * in the middle of a move once). */
				NSBT_CHECK(new_fds(spaced, kept + 8, 8) == n,
					   "the kept descriptor did not survive mremap");
				if (protect) {
					/* EINVAL: a shared mapping under NOSIGBUS_STRICT=1. */
					NSBT_CHECK(protect(q, 10 * ps) == 0 || (shared && errno == EINVAL),
						   "nosigbus_protect: %s", strerror(errno));
					NSBT_CHECK(unprotect(q, 2 * ps) == 0, "nosigbus_unprotect");
				}
				NSBT_CHECK(munmap(q, 10 * ps) == 0, "munmap");
				steps++;
			}
		}
	}
	list_fds(after, sizeof(after));
	/* Memory-backed files without a size limit need none; the others
	 * (tmpfs, disk) one each, under every policy that protects them. */
	NSBT_CHECK(kept_seen > 0, "no descriptor kept for a tmpfs or disk file with soft == hard "
		   "RLIMIT_NOFILE (%llu): the end-of-file check is off", (unsigned long long)rl.rlim_cur);
	printf("limits: fds: %d map/rescue/mprotect/mremap/protect/unmap rounds, %d kept descriptors "
	       "seen (O_PATH, below the soft limit, close-on-exec, safe from close); open fds before:%s; "
	       "after:%s\n", steps, kept_seen, before, after);
	NSBT_CHECK(strcmp(before, after) == 0, "file descriptors differ: before%s, after%s", before, after);
	printf("ok: limits: fds: nothing left open once the mappings are gone\n");
}

/* ---- leaks --------------------------------------------------------------- */

static void
check_leaks(void)
{
	struct nosigbus_stats st0 = stats();
	int fd = nsbt_file(NSBT_MEMFD, 0);
	size_t len = 32 * ps;
	unsigned char *w;
	char line[512];
	FILE *f;
	int left = 0;

	w = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(w != MAP_FAILED, "mmap");
	/* Protected mappings, rescues, moves and protection changes inside. */
	for (int i = 0; i < 8; i++) {
		unsigned char *p = mmap(w + (size_t)i * 4 * ps, 3 * ps, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS, fd, 0);

		NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
		p[ps] = (unsigned char)i;
	}
	NSBT_CHECK(mremap(w, 3 * ps, 3 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, w + 29 * ps) != MAP_FAILED,
		   "mremap: %s", strerror(errno));
	NSBT_CHECK(mprotect(w + 4 * ps, 8 * ps, PROT_READ) == 0, "mprotect");
	NSBT_CHECK(munmap(w, len) == 0, "munmap");
	NSBT_CHECK(stats().mappings == st0.mappings, "%" PRIu64 " records left after unmapping",
		   stats().mappings - st0.mappings);
	f = fopen("/proc/self/maps", "re");
	NSBT_CHECK(f != NULL, "maps");
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && b > (uintptr_t)w && a < (uintptr_t)w + len) {
			printf("  left in the window: %s", line);
			left++;
		}
	}
	fclose(f);
	NSBT_CHECK(left == 0, "%d mappings left in the unmapped window", left);
	close(fd);
	printf("ok: limits: leaks: no record and no mapping left after unmapping everything\n");
}

/* ---- evict --------------------------------------------------------------- */

/* Without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE in the effective set
 * (/proc/self/map_files cannot be followed), as an ordinary process. */
static void
drop_effective_caps(void)
{
	struct { uint32_t version; int pid; } hdr = { 0x20080522, 0 };
	struct { uint32_t effective, permitted, inheritable; } data[2];

	if (syscall(SYS_capget, &hdr, data) != 0)
		return;
	data[0].effective = data[1].effective = 0;
	NSBT_CHECK(syscall(SYS_capset, &hdr, data) == 0, "capset: %s", strerror(errno));
}

/* A shared write into a tmpfs file could be a refused one (a full tmpfs):
 * the only fault of a tmpfs file whose rescue needs the size. */
static void
write_past_end(volatile unsigned char *p, const char *what)
{
	p[0] = 0x5a;
	NSBT_CHECK(p[0] == 0x5a, "%s: a write did not read back", what);
}

/* Descriptors open now that were not in before[0..nb) (the library's). */
static int
new_descriptors(const int *before, int nb)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	NSBT_CHECK(d != NULL, "opendir");
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name), j;

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		for (j = 0; j < nb && before[j] != fd; j++)
			;
		n += j == nb;
	}
	closedir(d);
	return n;
}

/*
 * 20 tmpfs files of /dev/shm (a size-limited tmpfs: their faults need the
 * size), mapped in turn while the program holds their descriptors: the
 * library keeps none of its own (files.c), and a rescue is checked
 * through the program's.  The program then closes them in turn: the
 * library keeps a descriptor of each at its close, at most 16, the first
 * files' let go.  A rescue in one of those is counted as unverified (the
 * program holds none: unlinked, no path either); one in a file with a
 * kept descriptor is checked.
 */
static void
check_evict(void)
{
	enum { FILES = 20 };
	int fds[FILES], before[64], nb = 0, kept;
	unsigned char *maps[FILES];
	struct nosigbus_stats st0, st;
	DIR *d;
	struct dirent *e;

	drop_effective_caps();
	d = opendir("/proc/self/fd");
	NSBT_CHECK(d != NULL, "opendir");
	while ((e = readdir(d)) && nb < 64)
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			before[nb++] = atoi(e->d_name);
	closedir(d);
	for (int i = 0; i < FILES; i++) {
		fds[i] = nsbt_file(NSBT_TMPFS, 2 * ps);
		maps[i] = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NOSIGBUS,
			       fds[i], 0);
		NSBT_CHECK(maps[i] != MAP_FAILED, "mmap: %s", strerror(errno));
	}
	kept = new_descriptors(before, nb) - FILES;
	printf("limits: evict: %d files mapped, their descriptors open: %d kept\n", FILES, kept);
	NSBT_CHECK(kept == 0, "%d descriptors kept while the program holds its own", kept);
	st0 = stats();
	write_past_end(maps[0] + 3 * ps, "past the end of a file the program holds open");
	st = stats();
	NSBT_CHECK(st.rescues == st0.rescues + 1 && st.unverified == st0.unverified,
		   "%" PRIu64 " rescues, %" PRIu64 " unverified: the size was not found through "
		   "the program's own descriptor", st.rescues - st0.rescues,
		   st.unverified - st0.unverified);

	for (int i = 0; i < FILES; i++)
		close(fds[i]);
	kept = new_descriptors(before, nb);
	printf("limits: evict: the program closed them: %d kept\n", kept);
	NSBT_CHECK(kept == 16, "%d descriptors kept for %d files, not 16", kept, FILES);
	/* File 1's went (the first ones kept are the first let go): nothing
	 * names it but the mapping. */
	write_past_end(maps[1] + 3 * ps, "past the end of a file nothing names");
	st0 = st;
	st = stats();
	NSBT_CHECK(st.rescues == st0.rescues + 1 && st.unverified == st0.unverified + 1,
		   "%" PRIu64 " rescues, %" PRIu64 " unverified for a file the library cannot "
		   "find", st.rescues - st0.rescues, st.unverified - st0.unverified);
	/* A file with a kept descriptor: checked. */
	write_past_end(maps[FILES - 1] + 3 * ps, "past the end of a file with a descriptor");
	st0 = st;
	st = stats();
	NSBT_CHECK(st.unverified == st0.unverified, "a rescue with a kept descriptor is unverified");
	for (int i = 0; i < FILES; i++)
		munmap(maps[i], 4 * ps);
	NSBT_CHECK(new_descriptors(before, nb) == 0, "descriptors kept after every mapping went");
	printf("ok: limits: evict: none kept while the program's are open (checked through "
	       "them), 16 once it closed them, unverified only without one\n");
}

/* ---- driver -------------------------------------------------------------- */

static int
run_under_library(const char *check, const char *policy, const char *log)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		char ld[8192];

		snprintf(ld, sizeof(ld), "%s%s%s", old && *old ? old : "", old && *old ? ":" : "",
			 getenv("NSB_PRELOAD"));
		setenv("LD_PRELOAD", ld, 1);
		setenv("NOSIGBUS_POLICY", policy, 1);
		setenv("NOSIGBUS_LOG", log, 1);
		if (strcmp(policy, "strict") == 0) {
			setenv("NOSIGBUS_POLICY", "files", 1);
			setenv("NOSIGBUS_STRICT", "1", 1);
		}
		execl("/proc/self/exe", "limits", check, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		NSBT_CHECK(errno == EINTR, "waitpid");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 0;	/* it said why */
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("FAIL: limits %s (NOSIGBUS_POLICY=%s NOSIGBUS_LOG=%s): %s\n", check, policy, log,
		       nsbt_status_str(status));
		return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const char *const policies[] = { "flag", "shm", "files", "strict" };
	int failed = 0, runs = 0;

	ps = nsbt_page();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1) {
		if (!nsbt_have_library())
			nsbt_fail("the library is not loaded");
		get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
		protect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_protect");
		unprotect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_unprotect");
		if (strcmp(argv[1], "maxmap") == 0)
			check_maxmap();
		else if (strcmp(argv[1], "rlimit") == 0)
			check_rlimit();
		else if (strcmp(argv[1], "fds") == 0)
			check_fds();
		else if (strcmp(argv[1], "leaks") == 0)
			check_leaks();
		else if (strcmp(argv[1], "evict") == 0)
			check_evict();
		else
			nsbt_fail("unknown check %s", argv[1]);
		return 0;
	}
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	failed += run_under_library("maxmap", "flag", "0"), runs++;
	failed += run_under_library("rlimit", "flag", "0"), runs++;
	failed += run_under_library("evict", "flag", "0"), runs++;
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		failed += run_under_library("fds", policies[i], "0"), runs++;
		failed += run_under_library("fds", policies[i], "1"), runs++;
		failed += run_under_library("leaks", policies[i], "0"), runs++;
	}
	printf("limits: %d checks run, %d failed\n", runs, failed);
	return failed ? 1 : 0;
}
