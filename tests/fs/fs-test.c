/* SPDX-License-Identifier: MIT */
/*
 * nsb-fs-test - file-system errors must reach the program (issue 12,
 * SPEC §5): only a page at or past the end of its file is rescued.
 *
 * Usage: nsb-fs-test PROG FUSE FILLS CASE...
 *   PROG   nsb-fs-prog, the program run with and without the library
 *   FUSE   nsb-fs-fuse, or "-" when it was not built (no libfuse3)
 *   FILLS  the NOSIGBUS_FILL values to run, comma separated
 *   CASE   tmpfs-write, tmpfs-handler, tmpfs-hole, tmpfs-eof,
 *          tmpfs-private, tmpfs-log, ext4-write, ext4-mmap16,
 *          ext4-handler, ext4-eof, fuse-eio, fuse-private, fuse-eof,
 *          fuse-handler; all CASEs of one run use the same file system
 *
 * Each case runs PROG without the library (the reference: what the
 * kernel does) and then preloaded, under every policy that protects the
 * mapping (NOSIGBUS_POLICY=shm and files; flag with MAP_NOSIGBUS), with
 * every fill in FILLS, with NOSIGBUS_ERRORS unset (errors reach the
 * program) and =zero (every fault gets zeros, as the v2 patch did).
 * After each run it checks how PROG ended, what it printed on stdout and
 * stderr, and what the file holds.  Every run is one child process with
 * a watchdog; a run that hangs is killed and is a failure.
 *
 * The file systems are real and made here, in a mount namespace of our
 * own (so that nothing outlives us even if we are killed): a 1 MiB tmpfs;
 * an ext4 with 1 KiB blocks on a loop device (the Linux Test Project's
 * mmap16 scenario); a FUSE file system that fails reads of chosen pages
 * with EIO.  The ext4 needs root; not root, the tmpfs and the FUSE fs are
 * mounted in a user namespace of our own (where the library, as for any
 * user, cannot follow /proc/self/map_files); each skips (exit 77) with the
 * reason where it cannot.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "nsbtest.h"

extern char **environ;

/* Seconds a run may take before the watchdog kills it. */
#define RUN_TIMEOUT 30
#define MAX_MODES 64

static size_t page;
static const char *prog, *fuse_prog, *preload;

/* ---- what is set up, for cleanup ---- */

static char topdir[4096], mnt[4200], imgdir[4200];
static bool mnt_mounted, img_mounted;
static int loop_num = -1;
static volatile pid_t fuse_pid, child_pid;

static void
cleanup(void)
{
	if (child_pid > 0) {
		kill(child_pid, SIGKILL);
		waitpid(child_pid, NULL, 0);
		child_pid = 0;
	}
	if (fuse_pid > 0) {
		/* SIGTERM makes libfuse unmount and exit; give it a moment. */
		kill(fuse_pid, SIGTERM);
		for (int i = 0; i < 200; i++) {
			struct timespec ts = { 0, 10 * 1000 * 1000 };

			if (waitpid(fuse_pid, NULL, WNOHANG) == fuse_pid) {
				fuse_pid = 0;
				break;
			}
			nanosleep(&ts, NULL);
		}
		if (fuse_pid > 0) {
			kill(fuse_pid, SIGKILL);
			waitpid(fuse_pid, NULL, 0);
			fuse_pid = 0;
		}
	}
	if (mnt_mounted && umount2(mnt, 0) != 0)
		umount2(mnt, MNT_DETACH);
	mnt_mounted = false;
	if (loop_num >= 0) {
		/* Auto-clear detaches it at umount; this is for a failed mount. */
		char dev[64];
		int fd;

		snprintf(dev, sizeof(dev), "/dev/loop%d", loop_num);
		fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			ioctl(fd, LOOP_CLR_FD, 0);
			close(fd);
		}
		loop_num = -1;
	}
	if (img_mounted && umount2(imgdir, 0) != 0)
		umount2(imgdir, MNT_DETACH);
	img_mounted = false;
	if (topdir[0]) {
		rmdir(mnt);
		rmdir(imgdir);
		rmdir(topdir);
		topdir[0] = '\0';
	}
}

static void
on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* ---- text ---- */

struct text {
	char *buf;
	size_t len, cap;
};

static void
text_add(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->buf = realloc(t->buf, t->cap);
		if (!t->buf)
			nsbt_fail("out of memory");
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static void __attribute__((format(printf, 2, 3)))
text_line(struct text *t, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	text_add(t, buf, (size_t)n);
	text_add(t, "\n", 1);
}

static const char *
text_str(const struct text *t)
{
	return t->buf ? t->buf : "";
}

static void
text_free(struct text *t)
{
	free(t->buf);
	memset(t, 0, sizeof(*t));
}

/* ---- modes ---- */

struct mode {
	char label[80];
	bool lib;
	const char *policy;	/* "flag" also maps with MAP_NOSIGBUS */
	const char *fill;
	bool zero;		/* NOSIGBUS_ERRORS=zero */
	bool log;		/* NOSIGBUS_LOG=pages: a line per rescue */
};

static const struct mode reference = { "no library", false, NULL, NULL, false, false };
static struct mode modes[MAX_MODES];
static int nmodes;

/* Every policy in policies (NULL-terminated) x every fill x pass/zero. */
static void
make_modes(const char *const *policies, const char *fills, bool log)
{
	nmodes = 0;
	for (int zero = 0; zero < 2; zero++) {
		for (const char *const *p = policies; *p; p++) {
			char list[256], *save = NULL;

			snprintf(list, sizeof(list), "%s", fills);
			for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
				struct mode *m = &modes[nmodes++];

				if (nmodes == MAX_MODES)
					nsbt_fail("too many modes");
				m->lib = true;
				m->policy = *p;
				m->fill = strdup(f);
				m->zero = zero;
				m->log = log;
				snprintf(m->label, sizeof(m->label), "policy=%s%s fill=%s%s%s",
					 *p, strcmp(*p, "flag") == 0 ? " +MAP_NOSIGBUS" : "",
					 f, zero ? " ERRORS=zero" : "", log ? " LOG=pages" : "");
			}
		}
	}
}

/* ---- one run of PROG ---- */

struct run {
	const char *name;	/* the case */
	const struct mode *mode;
	int status;
	bool hung;
	struct text out, err;
	bool failed;
};

static int runs, failed_runs;

static void __attribute__((format(printf, 2, 3)))
fail(struct run *r, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "FAIL: %s [%s]: ", r->name, r->mode->label);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	r->failed = true;
}

static const char *
status_str(int status)
{
	static char buf[80];

	if (WIFEXITED(status))
		snprintf(buf, sizeof(buf), "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "killed by %s%s", strsignal(WTERMSIG(status)),
			 WCOREDUMP(status) ? " (core dumped)" : "");
	else
		snprintf(buf, sizeof(buf), "status %#x", status);
	return buf;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The environment without LD_PRELOAD and NOSIGBUS_*, plus the mode's. */
static char **
child_env(const struct mode *m)
{
	static char *env[4096];
	static char vars[6][4200];
	int n = 0, v = 0;

	for (char **e = environ; *e && n < 4000; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && strncmp(*e, "NOSIGBUS_", 9) != 0)
			env[n++] = *e;
	if (m->lib) {
		snprintf(vars[v], sizeof(vars[v]), "LD_PRELOAD=%s", preload);
		env[n++] = vars[v++];
		snprintf(vars[v], sizeof(vars[v]), "NOSIGBUS_POLICY=%s", m->policy);
		env[n++] = vars[v++];
		snprintf(vars[v], sizeof(vars[v]), "NOSIGBUS_FILL=%s", m->fill);
		env[n++] = vars[v++];
		if (m->zero) {
			snprintf(vars[v], sizeof(vars[v]), "NOSIGBUS_ERRORS=zero");
			env[n++] = vars[v++];
		}
		if (m->log) {
			snprintf(vars[v], sizeof(vars[v]), "NOSIGBUS_LOG=pages");
			env[n++] = vars[v++];
		}
	}
	env[n] = NULL;
	return env;
}

/*
 * Runs PROG with the mode's environment and the steps in fmt (separated
 * by spaces; %s/%zu are formatted first), collecting its stdout, stderr
 * and wait status.  The watchdog kills it after RUN_TIMEOUT seconds.
 */
static void __attribute__((format(printf, 5, 6)))
run_prog(struct run *r, const char *name, const struct mode *m, bool handler,
	 const char *fmt, ...)
{
	static char steps[65536];
	char *argv[512];
	int argc = 0, out[2], err[2];
	struct pollfd pfd[2];
	double deadline;
	va_list ap;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	r->name = name;
	r->mode = m;
	runs++;
	va_start(ap, fmt);
	vsnprintf(steps, sizeof(steps), fmt, ap);
	va_end(ap);

	argv[argc++] = (char *)prog;
	if (m->lib && strcmp(m->policy, "flag") == 0)
		argv[argc++] = "--flag";
	if (handler)
		argv[argc++] = "--handler";
	for (char *save = NULL, *s = strtok_r(steps, " ", &save); s; s = strtok_r(NULL, " ", &save)) {
		if (argc == 510)
			nsbt_fail("too many steps");
		argv[argc++] = s;
	}
	argv[argc] = NULL;

	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
		nsbt_fail("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		execve(prog, argv, child_env(m));
		dprintf(err[1], "exec %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	child_pid = pid;
	close(out[1]);
	close(err[1]);
	pfd[0] = (struct pollfd){ .fd = out[0], .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = err[0], .events = POLLIN };
	deadline = now() + RUN_TIMEOUT;
	while (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
		double left = deadline - now();
		char buf[8192];

		if (left <= 0) {
			/* Signals blocked or a wait that never ends: no alarm() helps. */
			kill(pid, SIGKILL);
			r->hung = true;
			break;
		}
		if (poll(pfd, 2, (int)(left * 1000) + 1) < 0) {
			if (errno == EINTR)
				continue;
			nsbt_fail("poll: %s", strerror(errno));
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			n = read(pfd[i].fd, buf, sizeof(buf));
			if (n > 0) {
				text_add(i ? &r->err : &r->out, buf, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	while (waitpid(pid, &r->status, 0) < 0)
		if (errno != EINTR)
			nsbt_fail("waitpid: %s", strerror(errno));
	child_pid = 0;
	if (r->hung)
		fail(r, "hung: killed after %d seconds", RUN_TIMEOUT);
}

/* Prints text indented, only its last max lines. */
static void
dump(const char *title, const struct text *t, int max)
{
	const char *s = text_str(t);
	int lines = 0;

	for (const char *p = s; *p; p++)
		lines += *p == '\n';
	fprintf(stderr, "  %s%s:\n", title, lines > max ? " (the last lines)" : "");
	for (; lines > max; lines--)
		s = strchr(s, '\n') + 1;
	for (const char *e; *s; s = e) {
		e = strchr(s, '\n');
		e = e ? e + 1 : s + strlen(s);
		fprintf(stderr, "    %.*s%s", (int)(e - s), s, e[-1] == '\n' ? "" : "\n");
	}
}

/* Reports the run: "ok", or what it printed; returns whether it passed. */
static bool
finish(struct run *r)
{
	if (r->failed) {
		failed_runs++;
		fprintf(stderr, "  ended: %s\n", status_str(r->status));
		/* The last lines of stdout say where it stopped. */
		dump("stdout", &r->out, 20);
		dump("stderr", &r->err, 20);
	} else {
		printf("ok: %s [%s]: %s\n", r->name, r->mode->label, status_str(r->status));
	}
	text_free(&r->out);
	text_free(&r->err);
	return !r->failed;
}

/* ---- looking at a run ---- */

/* stdout without the lines that differ between runs ("#") and the stats. */
static char *
transcript(const struct run *r)
{
	struct text t = { 0 };

	for (const char *s = text_str(&r->out), *e; *s; s = e) {
		e = strchr(s, '\n');
		e = e ? e + 1 : s + strlen(s);
		if (*s != '#' && strncmp(s, "stats ", 6) != 0)
			text_add(&t, s, (size_t)(e - s));
	}
	if (!t.buf)
		text_add(&t, "", 0);
	return t.buf;
}

static void
expect_transcript(struct run *r, const char *want)
{
	char *got = transcript(r);
	const char *g = got, *w = want;
	int line = 1;

	if (strcmp(got, want) != 0) {
		while (*g && *g == *w) {
			if (*g == '\n')
				line++;
			g++;
			w++;
		}
		while (g > got && g[-1] != '\n')
			g--;
		while (w > want && w[-1] != '\n')
			w--;
		fail(r, "stdout differs at line %d: got \"%.*s\", expected \"%.*s\"", line,
		     (int)strcspn(g, "\n"), g, (int)strcspn(w, "\n"), w);
	}
	free(got);
}

static int
count_lines(const struct run *r, const char *prefix)
{
	int n = 0;

	for (const char *s = text_str(&r->out); *s; s = strchr(s, '\n') + 1) {
		if (strncmp(s, prefix, strlen(prefix)) == 0)
			n++;
		if (!strchr(s, '\n'))
			break;
	}
	return n;
}

static void
expect_exit0(struct run *r)
{
	if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0)
		fail(r, "expected exit 0 (the program goes on), got %s", status_str(r->status));
}

/* Death by SIGBUS, exactly as the reference died (core flag included). */
static void
expect_death(struct run *r, int ref_status)
{
	if (!WIFSIGNALED(r->status) || WTERMSIG(r->status) != SIGBUS)
		fail(r, "expected death by SIGBUS as without the library, got %s",
		     status_str(r->status));
	else if (WCOREDUMP(r->status) != WCOREDUMP(ref_status))
		fail(r, "died %s, without the library %s", status_str(r->status),
		     status_str(ref_status));
}

static void
expect_no_stderr(struct run *r)
{
	if (r->err.len)
		fail(r, "stderr is not empty (nothing is printed by default): %.*s",
		     (int)strcspn(text_str(&r->err), "\n"), text_str(&r->err));
}

struct stats {
	bool found, none, unverified_known;
	uint64_t rescues, pages, failures, mappings, unverified;
};

static struct stats
stats_of(const struct run *r)
{
	struct stats st = { 0 };
	const char *s = strstr(text_str(&r->out), "\nstats ");

	if (!s)
		return st;
	s++;
	st.found = true;
	if (strncmp(s, "stats none", 10) == 0) {
		st.none = true;
		return st;
	}
	if (sscanf(s, "stats rescues=%" SCNu64 " pages=%" SCNu64 " failures=%" SCNu64
		   " mappings=%" SCNu64 " unverified=%" SCNu64, &st.rescues, &st.pages,
		   &st.failures, &st.mappings, &st.unverified) == 5)
		st.unverified_known = true;
	return st;
}

/*
 * The counters of a run that ended normally: at least min_rescues, and
 * no unverified rescue (the size is always learnable here).
 */
static struct stats
expect_stats(struct run *r, uint64_t min_rescues)
{
	struct stats st = stats_of(r);

	if (!st.found || st.none) {
		fail(r, "no counters printed (is the library loaded?)");
		return st;
	}
	if (st.rescues < min_rescues)
		fail(r, "%" PRIu64 " rescues counted, expected at least %" PRIu64,
		     st.rescues, min_rescues);
	if (!st.unverified_known)
		fail(r, "nosigbus_get_stats() has no 'unverified' counter (issue 12)");
	else if (st.unverified != 0)
		fail(r, "%" PRIu64 " unverified rescues: the file's size was learnable",
		     st.unverified);
	return st;
}

/* Address of mapping i, from the "# map I at ADDR" line. */
static uintptr_t
map_base(const struct run *r, int i)
{
	char key[32];
	const char *s;
	void *p = NULL;

	snprintf(key, sizeof(key), "# map %d at ", i);
	s = strstr(text_str(&r->out), key);
	if (!s || sscanf(s + strlen(key), "%p", &p) != 1)
		return 0;
	return (uintptr_t)p;
}

/* ---- the file afterwards ---- */

/* The file at path must be size bytes, byte i being want(i, arg). */
static void
expect_file(struct run *r, const char *path, size_t size,
	    unsigned char (*want)(size_t, const void *), const void *arg)
{
	unsigned char *buf = malloc(page);
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (!buf)
		nsbt_fail("out of memory");
	if (fd < 0 || fstat(fd, &st) != 0) {
		fail(r, "%s: %s", path, strerror(errno));
		goto out;
	}
	if ((size_t)st.st_size != size) {
		fail(r, "%s: size %lld, expected %zu: the file changed size", path,
		     (long long)st.st_size, size);
		goto out;
	}
	for (size_t p = 0; p * page < size; p++) {
		size_t len = size - p * page < page ? size - p * page : page;

		if (pread(fd, buf, len, (off_t)(p * page)) != (ssize_t)len) {
			fail(r, "%s: reading page %zu: %s", path, p, strerror(errno));
			goto out;
		}
		for (size_t i = 0; i < len; i++) {
			unsigned char c = want(p * page + i, arg);

			if (buf[i] != c) {
				fail(r, "%s: page %zu byte %zu is %#x, expected %#x", path, p,
				     i, buf[i], c);
				goto out;
			}
		}
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
}

/* Pages below *k hold fs_tag(page), the rest zeros. */
static unsigned char
want_prefix(size_t off, const void *k)
{
	return off / page < *(const size_t *)k ? fs_tag(off / page) : 0;
}

/*
 * list is pairs (FROM, C) ended by SIZE_MAX, FROM in bytes and rising:
 * bytes from FROM up to the next FROM are C; zeros before the first.
 */
static unsigned char
want_runs(size_t off, const void *list)
{
	const size_t *l = list;
	unsigned char c = 0;

	for (; l[0] != SIZE_MAX && l[0] <= off; l += 2)
		c = (unsigned char)l[1];
	return c;
}

/* How many leading pages hold fs_tag(page); the rest must be zeros. */
static size_t
tagged_prefix(struct run *r, const char *path, size_t pages)
{
	unsigned char *buf = malloc(page);
	size_t k = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (!buf || fd < 0)
		nsbt_fail("%s: %s", path, strerror(errno));
	for (size_t p = 0; p < pages; p++) {
		bool tagged = true, zero = true;

		if (pread(fd, buf, page, (off_t)(p * page)) != (ssize_t)page)
			nsbt_fail("%s: reading page %zu: %s", path, p, strerror(errno));
		for (size_t i = 0; i < page; i++) {
			tagged = tagged && buf[i] == fs_tag(p);
			zero = zero && buf[i] == 0;
		}
		if (tagged && k == p)
			k++;
		else if (!zero)
			fail(r, "%s: page %zu is neither what was written nor zeros", path, p);
	}
	close(fd);
	free(buf);
	return k;
}

/* ---- file systems ---- */

static char path_f[4300], path_g[4300], path_e[4300], path_c[4300], path_data[4300];

static void
remove_files(void)
{
	unlink(path_f);
	unlink(path_g);
	unlink(path_e);
	unlink(path_c);
}

static void
make_dirs(void)
{
	const char *base = getenv("NSB_BUILD_ROOT");

	if (!base || strchr(base, ' '))
		base = "/tmp";
	snprintf(topdir, sizeof(topdir), "%s/nsb-fs-XXXXXX", base);
	if (!mkdtemp(topdir)) {
		topdir[0] = '\0';
		nsbt_fail("mkdtemp in %s: %s", base, strerror(errno));
	}
	snprintf(mnt, sizeof(mnt), "%s/mnt", topdir);
	snprintf(imgdir, sizeof(imgdir), "%s/img", topdir);
	if (mkdir(mnt, 0700) != 0 || mkdir(imgdir, 0700) != 0)
		nsbt_fail("mkdir in %s: %s", topdir, strerror(errno));
	snprintf(path_f, sizeof(path_f), "%s/f", mnt);
	snprintf(path_g, sizeof(path_g), "%s/g", mnt);
	snprintf(path_e, sizeof(path_e), "%s/e", mnt);
	snprintf(path_c, sizeof(path_c), "%s/c", mnt);
	snprintf(path_data, sizeof(path_data), "%s/" FS_FUSE_NAME, mnt);
}

static void
setup_tmpfs(void)
{
	if (mount("nsbtest", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0700") != 0)
		nsbt_skip("cannot mount a tmpfs: %s", strerror(errno));
	mnt_mounted = true;
}

/* mkfs.ext4 -b 1024 on a 10 MiB image, as mmap16 does. */
static void
setup_ext4(void)
{
	char img[4300], dev[64];
	char *argv[] = { "mkfs.ext4", "-q", "-F", "-b", "1024", img, NULL };
	struct loop_config lc;
	int status, imgfd, ctl, fd = -1;
	pid_t pid;

	/* The image lives in memory: nothing reaches the disk. */
	if (mount("nsbtest-img", imgdir, "tmpfs", MS_NOSUID | MS_NODEV, "size=12m,mode=0700") != 0)
		nsbt_skip("cannot mount a tmpfs for the image: %s", strerror(errno));
	img_mounted = true;
	snprintf(img, sizeof(img), "%s/ext4.img", imgdir);
	imgfd = open(img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (imgfd < 0 || ftruncate(imgfd, 10 << 20) != 0)
		nsbt_fail("%s: %s", img, strerror(errno));
	fflush(NULL);
	errno = posix_spawnp(&pid, "mkfs.ext4", NULL, NULL, argv, environ);
	if (errno)
		nsbt_skip("cannot run mkfs.ext4 (Debian: e2fsprogs): %s", strerror(errno));
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) == 127)
		nsbt_skip("mkfs.ext4 not found (Debian: e2fsprogs)");
	if (WEXITSTATUS(status) != 0)
		nsbt_fail("mkfs.ext4 %s: %s", img, status_str(status));

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		nsbt_skip("no loop devices: /dev/loop-control: %s", strerror(errno));
	/* Another test may take the same free device at once: try again. */
	for (int tries = 0; tries < 20 && fd < 0; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			nsbt_skip("no free loop device: %s", strerror(errno));
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			nsbt_skip("%s: %s", dev, strerror(errno));
		memset(&lc, 0, sizeof(lc));
		lc.fd = (unsigned)imgfd;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
			loop_num = n;
			break;
		}
		if (errno != EBUSY)
			nsbt_skip("cannot set up %s: %s", dev, strerror(errno));
		close(fd);
		fd = -1;
	}
	close(ctl);
	if (fd < 0)
		nsbt_skip("every free loop device was taken by someone else");
	if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV, NULL) != 0)
		nsbt_skip("cannot mount ext4 from %s: %s", dev, strerror(errno));
	mnt_mounted = true;
	/* The mount holds the device now; at umount it detaches itself. */
	close(fd);
	close(imgfd);
}

static void
setup_fuse(void)
{
	struct stat st;
	double deadline;
	pid_t pid;

	if (strcmp(fuse_prog, "-") == 0)
		nsbt_skip("nsb-fs-fuse was not built: libfuse3 missing (Debian: libfuse3-dev fuse3)");
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		nsbt_skip("cannot use /dev/fuse (read and write): %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(fuse_prog, fuse_prog, mnt, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", fuse_prog, strerror(errno));
		_exit(127);
	}
	fuse_pid = pid;
	mnt_mounted = true;
	/* Wait until the file is there (a readiness wait, not a timing test). */
	deadline = now() + 20;
	while (stat(path_data, &st) != 0 || (size_t)st.st_size != FS_FUSE_PAGES * page) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			fuse_pid = 0;
			nsbt_skip("the FUSE file system did not mount (%s)", status_str(status));
		}
		if (now() > deadline)
			nsbt_fail("the FUSE file system did not come up in 20 seconds");
		nanosleep(&ts, NULL);
	}
}

/* ---- the cases ---- */

static const char *const tmpfs_policies[] = { "shm", "files", "flag", NULL };
static const char *const disk_policies[] = { "files", "flag", NULL };
/* Where received files are known: not under flag (received.c). */
static const char *const received_policies[] = { "shm", "files", NULL };
static const char *fills;

/* 4 MiB, in pages: larger than the 1 MiB tmpfs, smaller than the ext4. */
static size_t
big(void)
{
	return (4u << 20) / page;
}

/*
 * A shared write to a hole inside the file's size, page after page,
 * until the file system refuses.  Without the library: death by SIGBUS
 * (or the handler) at the first page the fs cannot back, and every page
 * written before is in the file.  With it: the same, under every policy
 * and fill; with ERRORS=zero the writes "succeed" and the file has only
 * what fitted (the v2 patch's silent loss, chosen explicitly).
 * ext4 gives the file system 16 pages back first, so some writes fit.
 */
static void
case_write(const char *name, bool handler, bool ext4)
{
	const size_t n = big();
	char fill_step[4400] = "";
	struct text want = { 0 };
	struct run r;
	size_t k_ref, k;
	int ref_status;

	/* The tmpfs fills up with the file itself. */
	if (ext4)
		snprintf(fill_step, sizeof(fill_step), "fill=%s:16", path_g);
	run_prog(&r, name, &reference, handler, "create=%s:%zu map=%zu %s writeall=0:%zu msync stats",
		 path_f, n, n, fill_step, n);
	k_ref = (size_t)count_lines(&r, "wrote ");
	ref_status = r.status;
	if (handler)
		expect_exit0(&r);
	else
		expect_death(&r, r.status);
	if (!ext4 && (k_ref == 0 || k_ref >= n))
		fail(&r, "%zu of %zu pages written: the tmpfs did not fill up as planned", k_ref, n);
	if (ext4 && k_ref >= n)
		fail(&r, "every page written: the ext4 did not fill up as planned");
	text_line(&want, "created");
	text_line(&want, "mapped 0");
	if (ext4)
		text_line(&want, "filled");
	for (size_t p = 0; p < k_ref; p++)
		text_line(&want, "wrote %zu", p);
	if (handler) {
		text_line(&want, "sigbus code=%d map=0 off=%zu", BUS_ADRERR, k_ref * page);
		text_line(&want, "msync ok");
	}
	expect_transcript(&r, text_str(&want));
	expect_file(&r, path_f, n * page, want_prefix, &k_ref);
	remove_files();
	if (!finish(&r))
		nsbt_fail("%s: the reference run without the library did not behave as "
		       "the kernel should; nothing to compare with", name);

	for (int i = 0; i < nmodes; i++) {
		const struct mode *m = &modes[i];

		run_prog(&r, name, m, handler, "create=%s:%zu map=%zu %s writeall=0:%zu msync stats",
			 path_f, n, n, fill_step, n);
		expect_no_stderr(&r);
		k = (size_t)count_lines(&r, "wrote ");
		if (m->zero) {
			expect_exit0(&r);
			text_free(&want);
			text_line(&want, "created");
			text_line(&want, "mapped 0");
			if (ext4)
				text_line(&want, "filled");
			for (size_t p = 0; p < n; p++)
				text_line(&want, "wrote %zu", p);
			text_line(&want, "msync ok");
			expect_transcript(&r, text_str(&want));
			expect_stats(&r, 1);
			/* What did not fit is lost: that is what =zero means. */
			k = tagged_prefix(&r, path_f, n);
			if (k >= n)
				fail(&r, "every page reached the file: the fs was not full");
		} else {
			if (handler) {
				expect_exit0(&r);
				if (expect_stats(&r, 0).rescues != 0)
					fail(&r, "a rescue counted: nothing here is past the end");
			} else {
				expect_death(&r, ref_status);
			}
			/* Exactly the reference, page for page (ext4 may fit a
			 * different number of pages from run to run). */
			if (k >= n)
				fail(&r, "all %zu pages \"written\": the refused write was "
				     "rescued, its data silently lost", n);
			text_free(&want);
			text_line(&want, "created");
			text_line(&want, "mapped 0");
			if (ext4)
				text_line(&want, "filled");
			for (size_t p = 0; p < (ext4 ? k : k_ref); p++)
				text_line(&want, "wrote %zu", p);
			if (handler) {
				text_line(&want, "sigbus code=%d map=0 off=%zu", BUS_ADRERR,
					  (ext4 ? k : k_ref) * page);
				text_line(&want, "msync ok");
			}
			expect_transcript(&r, text_str(&want));
			/* Every page the program wrote is in the file, no more. */
			expect_file(&r, path_f, n * page, want_prefix, &k);
		}
		remove_files();
		finish(&r);
	}
	text_free(&want);
}

/* How one kind of run must end. */
struct outcome {
	bool dies;		/* by SIGBUS, as the reference did; else exit 0 */
	struct text out;	/* the transcript */
	int rescues;		/* if it ends: 0 exactly none, n at least n */
	const size_t *file;	/* want_runs() of the file afterwards, or NULL */
};

struct spec {
	const char *name;
	bool handler;
	char steps[16384];
	const char *path;	/* the file checked afterwards */
	size_t size;		/* its size */
	struct outcome ref, pass, zero;
};

static void
check_outcome(struct run *r, const struct outcome *o, int ref_status, const struct spec *s)
{
	if (o->dies)
		expect_death(r, ref_status);
	else
		expect_exit0(r);
	expect_transcript(r, text_str(&o->out));
	if (r->mode->lib) {
		expect_no_stderr(r);
		if (!o->dies) {
			struct stats st = expect_stats(r, (uint64_t)o->rescues);

			if (o->rescues == 0 && st.found && !st.none && st.rescues)
				fail(r, "%" PRIu64 " rescues counted: nothing here is past "
				     "the end of the file", st.rescues);
		}
	}
	if (o->file)
		expect_file(r, s->path, s->size, want_runs, o->file);
}

/* The reference first (it must behave as the kernel does), then every mode. */
static void
run_spec(struct spec *s)
{
	struct run r;
	int ref_status;

	run_prog(&r, s->name, &reference, s->handler, "%s", s->steps);
	ref_status = r.status;
	check_outcome(&r, &s->ref, ref_status, s);
	remove_files();
	if (!finish(&r))
		nsbt_fail("%s: the run without the library did not behave as the kernel "
		       "should; nothing to compare with", s->name);
	for (int i = 0; i < nmodes; i++) {
		run_prog(&r, s->name, &modes[i], s->handler, "%s", s->steps);
		check_outcome(&r, modes[i].zero ? &s->zero : &s->pass, ref_status, s);
		remove_files();
		finish(&r);
	}
	text_free(&s->ref.out);
	text_free(&s->pass.out);
	text_free(&s->zero.out);
}

/* Appends the same line to several transcripts (NULL-terminated). */
static void __attribute__((sentinel))
say_all(const char *line, ...)
{
	va_list ap;
	struct text *t;

	va_start(ap, line);
	while ((t = va_arg(ap, struct text *)))
		text_line(t, "%s", line);
	va_end(ap);
}

/* A formatted line for say_all(); one static buffer, so use it at once. */
static const char *
strf(const char *f, ...) __attribute__((format(printf, 1, 2)));

static const char *
strf(const char *f, ...)
{
	static char buf[1024];
	va_list ap;

	va_start(ap, f);
	vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

/*
 * A full tmpfs, a sparse file with one page of data at d.  Reading a hole
 * inside the size fails because the fs is full: inside the size, so it
 * dies as without the library (issue 19 withdrew the "hole" exception:
 * only a page past the end of its file is rescued).  =zero rescues it,
 * and must not touch the data page after it (a range fill that replaced
 * it would show zeros, and lose the write that follows); a write to
 * another hole is rescued there too, and lost.
 */
static void
case_hole(void)
{
	static struct spec s;
	const size_t n = big(), d = n / 4, h = n / 2;
	const size_t ref_file[] = { d * page, 'A', (d + 1) * page, 0, SIZE_MAX };
	const size_t file[] = { d * page, 'B', (d + 1) * page, 0, SIZE_MAX };

	memset(&s, 0, sizeof(s));
	s.name = "tmpfs-hole";
	s.path = path_f;
	s.size = n * page;
	snprintf(s.steps, sizeof(s.steps),
		 "create=%s:%zu pwrite=%zu:A fill=%s map=%zu read=1 read=%zu write=%zu:B "
		 "msync write=%zu:C msync stats", path_f, n, d, path_g, n, d, d, h);
	say_all("created", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all(strf("pwrote %zu", d), &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("filled", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("mapped 0", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	s.ref.dies = true;
	s.ref.file = ref_file;
	s.pass.dies = true;
	s.pass.file = ref_file;
	say_all(strf("read 1: 00*%zu", page), &s.zero.out, NULL);
	say_all(strf("read %zu: 41*%zu", d, page), &s.zero.out, NULL);
	say_all(strf("wrote %zu", d), &s.zero.out, NULL);
	say_all("msync ok", &s.zero.out, NULL);
	say_all(strf("wrote %zu", h), &s.zero.out, NULL);
	say_all("msync ok", &s.zero.out, NULL);
	s.zero.rescues = 1;
	s.zero.file = file;
	run_spec(&s);
}

/*
 * Past the end of a file on a full tmpfs: still rescued, at the page
 * that starts exactly at the end and beyond, for reads and writes, with
 * errors passed on or not.  The file keeps its size and contents.
 */
static void
case_eof(bool ext4)
{
	static struct spec s;
	const size_t n = big();
	/* ext4: a size that ends inside page 2; tmpfs: exactly at page 2. */
	const size_t size = ext4 ? 2 * page + 100 : 2 * page;
	const size_t file[] = { 0, 'A', size, 0, SIZE_MAX };

	memset(&s, 0, sizeof(s));
	s.name = ext4 ? "ext4-eof" : "tmpfs-eof";
	s.path = path_f;
	s.size = size;
	snprintf(s.steps, sizeof(s.steps),
		 "create=%s:4 pwrite=0:A pwrite=1:A pwrite=2:A pwrite=3:A map=%zu fill=%s "
		 "trunc=%s fill=%s read=1 read=2 read=3 write=5:B read=5 read=0 read=9 "
		 "msync stats", path_f, n, path_g, ext4 ? "2+100" : "2", path_g);
	say_all("created", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	for (int p = 0; p < 4; p++)
		say_all(strf("pwrote %d", p), &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("mapped 0", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("filled", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("truncated", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("filled", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all(strf("read 1: 41*%zu", page), &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	if (ext4) {
		say_all("read 2: 41*100", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
		say_all(strf("read 3: 00*%zu", page), &s.pass.out, &s.zero.out, NULL);
	} else {
		say_all(strf("read 2: 00*%zu", page), &s.pass.out, &s.zero.out, NULL);
		say_all(strf("read 3: 00*%zu", page), &s.pass.out, &s.zero.out, NULL);
	}
	say_all("wrote 5", &s.pass.out, &s.zero.out, NULL);
	say_all(strf("read 5: 42*%zu", page), &s.pass.out, &s.zero.out, NULL);
	say_all(strf("read 0: 41*%zu", page), &s.pass.out, &s.zero.out, NULL);
	say_all(strf("read 9: 00*%zu", page), &s.pass.out, &s.zero.out, NULL);
	say_all("msync ok", &s.pass.out, &s.zero.out, NULL);
	s.ref.dies = true;
	s.ref.file = s.pass.file = s.zero.file = file;
	s.pass.rescues = s.zero.rescues = 1;
	run_spec(&s);
}

/*
 * MAP_PRIVATE writes to holes of a full tmpfs.  The kernel fails them
 * (it cannot read the hole's page to copy it: the fs is full).  Inside
 * the size: the program dies as without the library (issue 19: only a
 * page past the end of its file is rescued); =zero rescues them, and the
 * data page between keeps showing the file, the file is untouched.
 */
static void
case_private(void)
{
	static struct spec s;
	const size_t n = big(), d = n / 4, h = n / 2;
	const size_t file[] = { d * page, 'A', (d + 1) * page, 0, SIZE_MAX };

	memset(&s, 0, sizeof(s));
	s.name = "tmpfs-private";
	s.path = path_f;
	s.size = n * page;
	snprintf(s.steps, sizeof(s.steps),
		 "create=%s:%zu pwrite=%zu:A fill=%s map=%zu:private write=1:B read=1 "
		 "read=%zu write=%zu:C read=%zu write=%zu:E read=%zu stats",
		 path_f, n, d, path_g, n, d, d, d, h, h);
	say_all("created", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all(strf("pwrote %zu", d), &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("filled", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("mapped 0", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("wrote 1", &s.zero.out, NULL);
	say_all(strf("read 1: 42*%zu", page), &s.zero.out, NULL);
	say_all(strf("read %zu: 41*%zu", d, page), &s.zero.out, NULL);
	say_all(strf("wrote %zu", d), &s.zero.out, NULL);
	say_all(strf("read %zu: 43*%zu", d, page), &s.zero.out, NULL);
	say_all(strf("wrote %zu", h), &s.zero.out, NULL);
	say_all(strf("read %zu: 45*%zu", h, page), &s.zero.out, NULL);
	s.ref.dies = s.pass.dies = true;
	s.ref.file = s.pass.file = s.zero.file = file;
	s.zero.rescues = 1;
	run_spec(&s);
}

/*
 * The Linux Test Project's mmap16: a 1 KiB file mapped shared and
 * written, grown to two pages, the fs filled, then the other 1 KiB
 * blocks of the first page written through the mapping.  The page is
 * inside the file and reads fine; the fs refuses the blocks: SIGBUS (or
 * the handler, once per store), exactly as without the library.  Before
 * the kernel fix the data vanished silently; a rescue would bring that
 * back.  The file keeps its first KiB.
 */
static void
case_mmap16(bool handler)
{
	static struct spec s;
	const size_t file[] = { 0, 'a', 1024, 0, SIZE_MAX };

	memset(&s, 0, sizeof(s));
	s.name = handler ? "ext4-handler" : "ext4-mmap16";
	s.handler = handler;
	s.path = path_c;
	s.size = 2 * page;
	/* One step per store: a handler abandons only the store that faulted. */
	snprintf(s.steps, sizeof(s.steps),
		 "create=%s:0 append=1024:a mapat=1024:2 poke=0:a trunc=2 mremap=2 fill=%s",
		 path_c, path_g);
	for (size_t b = 1024; b < page; b += 1024)
		snprintf(s.steps + strlen(s.steps), sizeof(s.steps) - strlen(s.steps),
			 " poke=%zu:A", b);
	snprintf(s.steps + strlen(s.steps), sizeof(s.steps) - strlen(s.steps), " msync stats");
	say_all("created", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("appended 1024", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("mapped 0", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("poked 0", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("truncated", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("mremapped", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("filled", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	if (handler) {
		/* The store is abandoned; the next one faults again. */
		for (size_t b = 1024; b < page; b += 1024)
			say_all(strf("sigbus code=%d map=0 off=%zu", BUS_ADRERR, b),
				&s.ref.out, &s.pass.out, NULL);
		say_all("msync ok", &s.ref.out, &s.pass.out, NULL);
	}
	for (size_t b = 1024; b < page; b += 1024)
		say_all(strf("poked %zu", b), &s.zero.out, NULL);
	say_all("msync ok", &s.zero.out, NULL);
	s.ref.dies = s.pass.dies = !handler;
	s.ref.file = s.pass.file = s.zero.file = file;
	s.pass.rescues = 0;
	s.zero.rescues = 1;
	run_spec(&s);
}

/*
 * FUSE: reads of pages FS_FUSE_BAD_FIRST..END fail with EIO.  Such a
 * read inside the size dies (or reaches the handler) as without the
 * library; past the size it is rescued; =zero rescues both.  Pages
 * around the bad ones keep showing the file.
 */
static void
case_fuse(const char *name)
{
	static struct spec s;
	const size_t len = 2 * FS_FUSE_PAGES, bad = FS_FUSE_BAD_FIRST + 8;
	const size_t after = FS_FUSE_BAD_END + 2, last = FS_FUSE_PAGES - 1;
	const size_t past = FS_FUSE_PAGES, past2 = FS_FUSE_PAGES + 6;
	bool private = strcmp(name, "fuse-private") == 0;

	memset(&s, 0, sizeof(s));
	s.name = name;
	s.handler = strcmp(name, "fuse-handler") == 0;
	say_all("opened", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("mapped 0", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all(strf("read 0: %02x*%zu", fs_tag(0), page), &s.ref.out, &s.pass.out,
		&s.zero.out, NULL);
	if (strcmp(name, "fuse-eof") == 0) {
		snprintf(s.steps, sizeof(s.steps),
			 "open=%s map=%zu:ro read=0 read=%zu read=%zu read=%zu read=%zu stats",
			 path_data, len, past, past2, last, after);
		say_all(strf("read %zu: 00*%zu", past, page), &s.pass.out, &s.zero.out, NULL);
		say_all(strf("read %zu: 00*%zu", past2, page), &s.pass.out, &s.zero.out, NULL);
		say_all(strf("read %zu: %02x*%zu", last, fs_tag(last), page), &s.pass.out,
			&s.zero.out, NULL);
		say_all(strf("read %zu: %02x*%zu", after, fs_tag(after), page), &s.pass.out,
			&s.zero.out, NULL);
		s.ref.dies = true;
		s.pass.rescues = s.zero.rescues = 1;
	} else if (s.handler) {
		snprintf(s.steps, sizeof(s.steps),
			 "open=%s map=%zu:ro read=0 read=%zu read=%zu read=%zu stats",
			 path_data, len, bad, bad + 1, after);
		say_all(strf("sigbus code=%d map=0 off=%zu", BUS_ADRERR, bad * page),
			&s.ref.out, &s.pass.out, NULL);
		say_all(strf("sigbus code=%d map=0 off=%zu", BUS_ADRERR, (bad + 1) * page),
			&s.ref.out, &s.pass.out, NULL);
		say_all(strf("read %zu: 00*%zu", bad, page), &s.zero.out, NULL);
		say_all(strf("read %zu: 00*%zu", bad + 1, page), &s.zero.out, NULL);
		say_all(strf("read %zu: %02x*%zu", after, fs_tag(after), page), &s.ref.out,
			&s.pass.out, &s.zero.out, NULL);
		s.pass.rescues = 0;
		s.zero.rescues = 1;
	} else {
		snprintf(s.steps, sizeof(s.steps),
			 "open=%s map=%zu:ro%s read=0 read=%zu read=%zu read=0 stats",
			 path_data, len, private ? ":private" : "", bad, after);
		say_all(strf("read %zu: 00*%zu", bad, page), &s.zero.out, NULL);
		say_all(strf("read %zu: %02x*%zu", after, fs_tag(after), page), &s.zero.out, NULL);
		say_all(strf("read 0: %02x*%zu", fs_tag(0), page), &s.zero.out, NULL);
		s.ref.dies = s.pass.dies = true;
		s.zero.rescues = 1;
	}
	run_spec(&s);
}

/*
 * FUSE, the file received from another process (issue 37): its errors
 * are the peer's.  The same EIO inside the size that kills the program in
 * its own file is rescued by default (NOSIGBUS_ERRORS=peer), the pages
 * around it still the file's; without the library it dies.  Under shm
 * (which protects a received file whatever its file system) and files;
 * under flag the library does not note received files (received.c).
 */
static void
case_fuse_received(const char *name)
{
	static struct spec s;
	const size_t len = 2 * FS_FUSE_PAGES, bad = FS_FUSE_BAD_FIRST + 8;
	const size_t after = FS_FUSE_BAD_END + 2;

	memset(&s, 0, sizeof(s));
	s.name = name;
	snprintf(s.steps, sizeof(s.steps),
		 "open=%s recv map=%zu:ro read=0 read=%zu read=%zu read=0 stats", path_data, len,
		 bad, after);
	say_all("opened", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("received", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all("mapped 0", &s.ref.out, &s.pass.out, &s.zero.out, NULL);
	say_all(strf("read 0: %02x*%zu", fs_tag(0), page), &s.ref.out, &s.pass.out,
		&s.zero.out, NULL);
	say_all(strf("read %zu: 00*%zu", bad, page), &s.pass.out, &s.zero.out, NULL);
	say_all(strf("read %zu: %02x*%zu", after, fs_tag(after), page), &s.pass.out,
		&s.zero.out, NULL);
	say_all(strf("read 0: %02x*%zu", fs_tag(0), page), &s.pass.out, &s.zero.out, NULL);
	s.ref.dies = true;
	s.pass.rescues = s.zero.rescues = 1;
	run_spec(&s);
}

/* ---- the log ---- */

/* The address in "... rescued 0xADDR ...", or 0. */
static uintptr_t
rescued_addr(const char *line)
{
	const char *s = strstr(line, "rescued 0x");
	unsigned long long a;

	if (!s || sscanf(s + 8, "%llx", &a) != 1)
		return 0;
	return (uintptr_t)a;
}

/* The number before " word" in line, or -1. */
static long long
number_before(const char *line, const char *word)
{
	const char *s = strstr(line, word);

	if (!s || s == line)
		return -1;
	while (s > line && s[-1] >= '0' && s[-1] <= '9')
		s--;
	return *s >= '0' && *s <= '9' ? atoll(s) : -1;
}

/*
 * NOSIGBUS_LOG=pages: a rescue past the end (and with =zero, a rescued hole)
 * print their lines (address inside the page, the file, the fill); a refused write
 * passed on to the program's handler prints nothing that claims a
 * rescue; the exit summary adds up with nosigbus_get_stats().
 */
static void
case_log(void)
{
	const size_t n = big(), h = n / 2;
	struct text want = { 0 };
	struct run r;

	for (int i = 0; i <= nmodes; i++) {
		const struct mode *m = i == 0 ? &reference : &modes[i - 1];
		/* Which page of which mapping each rescue line must name. */
		struct { int map; size_t page; const char *path; } rescues[3] = {
			{ 0, 2, path_e }, { 1, 1, path_f }, { 1, h, path_f },
		};
		/* With =zero the write is rescued too, unless the range fill of
		 * the hole before it (no data between) already replaced it. */
		int expected = m->zero ? 3 : 1, seen = 0, lines = 0, summaries = 0;
		int at_least = m->zero && strcmp(m->fill, "page") != 0 ? 2 : expected;
		char prefix[512];
		struct stats st;

		run_prog(&r, "tmpfs-log", m, true,
			 "create=%s:4 pwrite=0:A pwrite=1:A pwrite=2:A pwrite=3:A map=4 trunc=1 "
			 "read=2 create=%s:%zu fill=%s map=%zu read=1 write=%zu:C msync stats",
			 path_e, path_f, n, path_g, n, h);
		text_free(&want);
		text_line(&want, "created");
		for (int p = 0; p < 4; p++)
			text_line(&want, "pwrote %d", p);
		text_line(&want, "mapped 0");
		text_line(&want, "truncated");
		if (m->lib)
			text_line(&want, "read 2: 00*%zu", page);
		else
			text_line(&want, "sigbus code=%d map=0 off=%zu", BUS_ADRERR, 2 * page);
		text_line(&want, "created");
		text_line(&want, "filled");
		text_line(&want, "mapped 1");
		/* A hole inside the size: the program's, but with =zero. */
		if (m->zero)
			text_line(&want, "read 1: 00*%zu", page);
		else
			text_line(&want, "sigbus code=%d map=1 off=%zu", BUS_ADRERR, page);
		if (m->zero)
			text_line(&want, "wrote %zu", h);
		else
			text_line(&want, "sigbus code=%d map=1 off=%zu", BUS_ADRERR, h * page);
		text_line(&want, "msync ok");
		expect_exit0(&r);
		expect_transcript(&r, text_str(&want));
		remove_files();
		if (!m->lib) {
			if (!finish(&r))
				nsbt_fail("tmpfs-log: the run without the library did not behave "
				       "as the kernel should; nothing to compare with");
			continue;
		}
		st = expect_stats(&r, (uint64_t)at_least);
		/* SPEC §9: every line names the program and its pid. */
		{
			const char *pid = strstr(text_str(&r.out), "# pid ");
			const char *base = strrchr(prog, '/');

			snprintf(prefix, sizeof(prefix), "nosigbus: %s[%d]: ", base ? base + 1 : prog,
				 pid ? atoi(pid + 6) : -1);
		}
		for (const char *s = text_str(&r.err), *e; *s; s = e) {
			char line[1024];
			uintptr_t a, base;

			e = strchr(s, '\n');
			e = e ? e + 1 : s + strlen(s);
			snprintf(line, sizeof(line), "%.*s", (int)(e - s - (e[-1] == '\n')), s);
			if (strncmp(line, prefix, strlen(prefix)) != 0) {
				fail(&r, "stderr line does not start with \"%s\": %s", prefix, line);
			} else if (strstr(line, " rescues, ")) {
				long long v;

				summaries++;
				if (number_before(line, " rescues,") != (long long)st.rescues ||
				    number_before(line, " pages replaced") != (long long)st.pages ||
				    number_before(line, " failures") != (long long)st.failures)
					fail(&r, "exit summary \"%s\" does not add up with "
					     "nosigbus_get_stats(): %" PRIu64 " rescues, %" PRIu64
					     " pages, %" PRIu64 " failures", line, st.rescues,
					     st.pages, st.failures);
				v = number_before(line, " unverified");
				if (v >= 0 && v != (long long)st.unverified)
					fail(&r, "exit summary \"%s\": unverified is %" PRIu64
					     " in nosigbus_get_stats()", line, st.unverified);
			} else if ((a = rescued_addr(line)) != 0) {
				if (lines++ >= expected) {
					fail(&r, "a rescue line too many (a fault inside the "
					     "file's size was passed on): %s", line);
					continue;
				}
				base = map_base(&r, rescues[seen].map) +
				       rescues[seen].page * page;
				if (a < base || a >= base + page)
					fail(&r, "rescue line %d names %#lx, expected page %zu "
					     "of mapping %d (%#lx): %s", seen + 1, (unsigned long)a,
					     rescues[seen].page, rescues[seen].map,
					     (unsigned long)base, line);
				if (!strstr(line, strf(" in %s ", rescues[seen].path)))
					fail(&r, "rescue line %d does not name %s: %s", seen + 1,
					     rescues[seen].path, line);
				if (strcmp(m->fill, "auto") != 0 &&
				    !strstr(line, strf("(fill=%s", m->fill)))
					fail(&r, "rescue line %d does not say fill=%s: %s",
					     seen + 1, m->fill, line);
				seen++;
			} else if (strcasestr(line, "rescu") || strstr(line, "cannot replace")) {
				fail(&r, "a line that claims a rescue or a failed one: %s", line);
			}
		}
		if (lines < at_least || lines > expected)
			fail(&r, "%d rescue lines, expected %d", lines, expected);
		if (st.found && !st.none && st.rescues != (uint64_t)lines)
			fail(&r, "%" PRIu64 " rescues counted, %d logged", st.rescues, lines);
		if (summaries != 1)
			fail(&r, "%d exit summary lines, expected 1", summaries);
		finish(&r);
	}
	text_free(&want);
}

/* ---- main ---- */

static uid_t outside_uid;

/* Writes s to path; NULL, or what went wrong. */
static const char *
write_proc(const char *path, const char *s)
{
	static char why[256];
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : write(fd, s, strlen(s));

	if (n != (ssize_t)strlen(s)) {
		snprintf(why, sizeof(why), "writing %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return why;
	}
	close(fd);
	return NULL;
}

/*
 * Not root: a user namespace where our uid and gid are root, so that a
 * tmpfs or a FUSE fs can be mounted in a mount namespace of ours (both
 * allow it).  The library runs there with no capability of the initial
 * namespace, as for any user: /proc/self/map_files cannot be followed.
 * NULL, or why not.
 */
static const char *
enter_user_namespace(void)
{
	static char why[256];
	char map[64];
	const char *err;
	gid_t gid = getegid();

	outside_uid = geteuid();
	if (unshare(CLONE_NEWUSER) != 0) {
		snprintf(why, sizeof(why), "unshare(CLONE_NEWUSER): %s", strerror(errno));
		return why;
	}
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)outside_uid);
	if ((err = write_proc("/proc/self/uid_map", map)) != NULL)
		return err;
	if ((err = write_proc("/proc/self/setgroups", "deny")) != NULL)
		return err;
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
	return write_proc("/proc/self/gid_map", map);
}

int
main(int argc, char **argv)
{
	const char *kind;
	size_t kind_len;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 5) {
		fprintf(stderr, "usage: %s PROG FUSE FILLS CASE...\n", argv[0]);
		return 2;
	}
	page = (size_t)sysconf(_SC_PAGESIZE);
	prog = argv[1];
	fuse_prog = argv[2];
	fills = argv[3];
	preload = getenv("NSB_PRELOAD");
	if (!preload)
		nsbt_fail("NSB_PRELOAD is not set: run through meson test");
	if (access(preload, R_OK) != 0)
		nsbt_fail("NSB_PRELOAD=%s: %s", preload, strerror(errno));
	kind = argv[4];
	kind_len = strcspn(kind, "-");
	for (int i = 5; i < argc; i++)
		if (strncmp(argv[i], kind, kind_len + 1) != 0)
			nsbt_fail("cases of one run must share a file system: %s, %s", kind, argv[i]);

	if (geteuid() != 0) {
		const char *why;

		if (strncmp(kind, "ext4-", 5) == 0)
			nsbt_skip("needs root: it mounts an ext4 on a loop device");
		/* A tmpfs or a FUSE fs mounts in a user namespace of our own. */
		why = enter_user_namespace();
		if (why)
			nsbt_skip("not root, and no user namespace to mount a %s in: %s",
				  strncmp(kind, "tmpfs-", 6) == 0 ? "tmpfs" : "FUSE fs", why);
		printf("# not root: in a user namespace of its own (uid %d is its root)\n",
		       (int)outside_uid);
	}
	/* Our own mount namespace: whatever happens, nothing stays mounted. */
	if (unshare(CLONE_NEWNS) != 0)
		nsbt_skip("cannot make a mount namespace: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		nsbt_skip("cannot make mounts private: %s", strerror(errno));
	atexit(cleanup);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, on_signal);
	make_dirs();

	if (strncmp(kind, "tmpfs-", 6) == 0)
		setup_tmpfs();
	else if (strncmp(kind, "ext4-", 5) == 0)
		setup_ext4();
	else if (strncmp(kind, "fuse-", 5) == 0)
		setup_fuse();
	else
		nsbt_fail("unknown case %s", kind);

	for (int i = 4; i < argc; i++) {
		const char *c = argv[i];

		printf("# %s, fills %s\n", c, fills);
		make_modes(strncmp(c, "tmpfs-", 6) == 0 ? tmpfs_policies
			   : strcmp(c, "fuse-received") == 0 ? received_policies
			   : disk_policies,
			   fills, strcmp(c, "tmpfs-log") == 0);
		if (strcmp(c, "tmpfs-write") == 0)
			case_write(c, false, false);
		else if (strcmp(c, "tmpfs-handler") == 0)
			case_write(c, true, false);
		else if (strcmp(c, "tmpfs-hole") == 0)
			case_hole();
		else if (strcmp(c, "tmpfs-eof") == 0)
			case_eof(false);
		else if (strcmp(c, "tmpfs-private") == 0)
			case_private();
		else if (strcmp(c, "tmpfs-log") == 0)
			case_log();
		else if (strcmp(c, "ext4-write") == 0)
			case_write(c, false, true);
		else if (strcmp(c, "ext4-mmap16") == 0)
			case_mmap16(false);
		else if (strcmp(c, "ext4-handler") == 0)
			case_mmap16(true);
		else if (strcmp(c, "ext4-eof") == 0)
			case_eof(true);
		else if (strncmp(c, "fuse-", 5) == 0 &&
			 (strcmp(c, "fuse-eio") == 0 || strcmp(c, "fuse-private") == 0 ||
			  strcmp(c, "fuse-eof") == 0 || strcmp(c, "fuse-handler") == 0))
			case_fuse(c);
		else if (strcmp(c, "fuse-received") == 0)
			case_fuse_received(c);
		else
			nsbt_fail("unknown case %s", c);
	}
	printf("%d runs, %d failed\n", runs, failed_runs);
	return failed_runs ? 1 : 0;
}
