/* SPDX-License-Identifier: MIT */
/*
 * report.c - the driver of exact.c's rows: runs their children, round
 * after round, counts system calls under strace where a row needs it, and
 * prints the rows with their bare figure, exact floor, library figure,
 * both ratios, target and mark.  Timing never fails: a child that failed
 * does (the caller's exit status).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define XMAX_ROUNDS 99
#define XMAX_KEYS 160
#define XLIMIT_S 600

struct xres {
	int n;
	struct bench_kv kv[XMAX_KEYS];
};

static const struct bench_exact_args *A;
static int met, missed;
static bool xfailed;

static double
xget(const struct xres *r, const char *key)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->kv[i].key, key))
			return r->kv[i].v;
	return NAN;
}

/*
 * Runs argv (searched in PATH) with our environment less any preload and
 * NOSIGBUS_ and NSB_ test settings, plus extra; in dir when given; its
 * stdout into out (or /dev/null), its stderr to ours.  Killed after
 * XLIMIT_S.  Returns true when it exited 0 (or 1 when ok1); *cpu: the CPU
 * seconds of it and of the children it waited for.
 */
static bool
xrun(char *const argv[], const char *const extra[], char *out, size_t size, double *cpu,
     const char *dir, bool ok1)
{
	char **env;
	size_t n = 0, k = 0, len = 0;
	int fds[2], status;
	struct rusage ru;
	double deadline = bench_now() + XLIMIT_S * 1e9;
	bool killed = false;
	pid_t pid;

	while (environ[n])
		n++;
	env = calloc(n + 16, sizeof(*env));
	if (!env || pipe2(fds, O_CLOEXEC) < 0) {
		perror("nsb-bench: xrun");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "NOSIGBUS_", 9) &&
		    strncmp(environ[i], "NSB_TEST_", 9) && strncmp(environ[i], "NSB_BENCH_", 10))
			env[k++] = environ[i];
	for (size_t i = 0; extra && extra[i] && k < n + 15; i++)
		env[k++] = (char *)extra[i];
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("nsb-bench: fork");
		exit(1);
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(out ? fds[1] : null, STDOUT_FILENO);
		dup2(null, STDIN_FILENO);
		if (dir && chdir(dir) < 0)
			_exit(126);
		execvpe(argv[0], argv, env);
		fprintf(stderr, "nsb-bench: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	free(env);
	close(fds[1]);
	for (;;) {
		struct pollfd pfd = { fds[0], POLLIN, 0 };
		double left = (deadline - bench_now()) / 1e6;
		char sink[4096];
		ssize_t got;
		int r;

		if (!killed && left <= 0) {
			kill(pid, SIGKILL);
			killed = true;
		}
		r = poll(&pfd, 1, killed ? -1 : (int)left + 1);
		if (r == 0 || (r < 0 && errno == EINTR))
			continue;
		if (out && len + 1 < size)
			got = read(fds[0], out + len, size - 1 - len);
		else
			got = read(fds[0], sink, sizeof(sink));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		if (out && len + 1 < size)
			len += (size_t)got;
	}
	if (out)
		out[len] = '\0';
	close(fds[0]);
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR) {
			perror("nsb-bench: wait4");
			exit(1);
		}
	if (cpu)
		*cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
		       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
	if (killed)
		fprintf(stderr, "nsb-bench: %s still running after %d s: killed\n", argv[0], XLIMIT_S);
	return !killed && WIFEXITED(status) &&
	       (WEXITSTATUS(status) == 0 || (ok1 && WEXITSTATUS(status) == 1));
}

/* Runs this program as a child of the given kind; false when it failed. */
static bool
xchild(const char *kind, int round, const char *const extra[], struct xres *res,
       const char *strace_out, bool count)
{
	static char out[65536];
	char round_arg[16], size_arg[32], pre[4200];
	char *argv[32];
	const char *env[12];
	int a = 0, e = 0;
	bool ok;

	snprintf(round_arg, sizeof(round_arg), "%d", round);
	snprintf(size_arg, sizeof(size_arg), "%zu", A->params->size);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", A->preload);
	for (int i = 0; extra && extra[i] && e < 10; i++) {
		if (!strncmp(extra[i], "LD_PRELOAD=", 11))
			snprintf(pre, sizeof(pre), "%s", extra[i]);
		else
			env[e++] = extra[i];
	}
	if (strace_out) {
		argv[a++] = "strace";
		argv[a++] = "-f";
		if (count)
			argv[a++] = "-c";
		argv[a++] = "-o";
		argv[a++] = (char *)strace_out;
		argv[a++] = "-E";
		argv[a++] = pre;
		argv[a++] = "--";
	} else if (strcmp(pre, "LD_PRELOAD=")) {
		env[e++] = pre;
	}
	env[e] = NULL;
	argv[a++] = (char *)A->self;
	argv[a++] = "--child";
	argv[a++] = (char *)kind;
	argv[a++] = "--size-bytes";
	argv[a++] = size_arg;
	argv[a++] = "--round";
	argv[a++] = round_arg;
	if (A->params->quick)
		argv[a++] = "--quick";
	argv[a++] = "--true";
	argv[a++] = (char *)A->program;
	argv[a] = NULL;
	out[0] = '\0';
	ok = xrun(argv, env, out, sizeof(out), NULL, NULL, false);
	if (!ok && strace_out) {
		/* No ptrace here (a container), or strace broken: the rows
		 * that need it say so; the same children run without it. */
		fprintf(stderr, "nsb-bench: %s child under strace failed: its counts are n/a\n",
			kind);
	} else if (!ok) {
		fprintf(stderr, "nsb-bench: round %d: %s child failed\n", round + 1, kind);
		xfailed = true;
	}
	if (res)
		res->n = bench_parse(out, res->kv, XMAX_KEYS);
	return ok;
}

static const char *
xjudge(double v, double limit)
{
	if (isnan(v))
		return "n/a";
	if (v <= limit) {
		met++;
		return "pass";
	}
	missed++;
	return "MISS";
}

static double
xmedian(double *v, int n)
{
	double s[XMAX_ROUNDS];
	int k = 0;

	for (int i = 0; i < n; i++)
		if (!isnan(v[i]))
			s[k++] = v[i];
	if (!k)
		return NAN;
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
			double t = s[j];

			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	return k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
}

static double
xmed_key(struct xres *res, int n, const char *key)
{
	double v[XMAX_ROUNDS];

	for (int i = 0; i < n; i++)
		v[i] = xget(&res[i], key);
	return xmedian(v, n);
}

static bool
have_program(const char *name)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t len = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, name);
		if (access(buf, X_OK) == 0)
			return true;
		path += len + (path[len] == ':');
	}
	return false;
}

/* ---- system calls per op, as strace shows them -------------------------- */

#define XMAX_SEG 128	/* rows x 3 handler sets x 3 variants */
#define XMAX_NAMES 24

struct seg {
	char key[64];
	int n;
	struct {
		char name[24];
		int count;
	} c[XMAX_NAMES];
};

static struct seg segs[XMAX_SEG];
static int nsegs;

static void
parse_marks(const char *log)
{
	FILE *f = fopen(log, "re");
	char line[1024];
	struct seg *cur = NULL;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *s = line, name[24];
		size_t len;

		while (*s >= '0' && *s <= '9')
			s++;
		while (*s == ' ')
			s++;
		if (!strncmp(s, "[pid", 4)) {
			s = strchr(s, ']');
			if (!s)
				continue;
			s++;
			while (*s == ' ')
				s++;
		}
		len = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_");
		if (!len || s[len] != '(' || len >= sizeof(name))
			continue;
		memcpy(name, s, len);
		name[len] = '\0';
		if (!strcmp(name, "openat") && strstr(s, "\"/nsb-bench-mark/")) {
			char *k = strstr(s, "\"/nsb-bench-mark/") + 17, *q = strchr(k, '"');

			cur = NULL;
			if (q && nsegs < XMAX_SEG && strncmp(q - 4, "/end", 4)) {
				cur = &segs[nsegs++];
				snprintf(cur->key, sizeof(cur->key), "%.*s", (int)(q - k), k);
				cur->n = 0;
			}
			continue;
		}
		if (!cur)
			continue;
		for (int i = 0; i <= cur->n && i < XMAX_NAMES; i++) {
			if (i == cur->n) {
				snprintf(cur->c[i].name, sizeof(cur->c[i].name), "%s", name);
				cur->c[i].count = 1;
				cur->n++;
				break;
			}
			if (!strcmp(cur->c[i].name, name)) {
				cur->c[i].count++;
				break;
			}
		}
	}
	fclose(f);
}

static const struct seg *
seg_find(const char *key, const char *variant)
{
	char want[80];

	snprintf(want, sizeof(want), "%s/%s", key, variant);
	for (int i = 0; i < nsegs; i++)
		if (!strcmp(segs[i].key, want))
			return &segs[i];
	return NULL;
}

static int
seg_count(const struct seg *s, const char *name)
{
	for (int i = 0; s && i < s->n; i++)
		if (!strcmp(s->c[i].name, name))
			return s->c[i].count;
	return 0;
}

/* The calls of variant beyond bare's, per op: "statx, 2 ioctl". */
static void
seg_adds(const char *key, const char *variant, int ops, char *buf, size_t size)
{
	const struct seg *v = seg_find(key, variant), *b = seg_find(key, "bare");
	size_t len = 0;

	buf[0] = '\0';
	if (!v || !b) {
		snprintf(buf, size, "?");
		return;
	}
	for (int i = 0; i < v->n; i++) {
		double per = (double)(v->c[i].count - seg_count(b, v->c[i].name)) / ops;

		if (fabs(per) < 0.05)
			continue;
		if (fabs(per - 1) < 0.05)
			len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
						v->c[i].name);
		else
			len += (size_t)snprintf(buf + len, size - len, "%s%.3g %s", len ? ", " : "",
						per, v->c[i].name);
		if (len >= size)
			break;
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

/* ---- the table ---------------------------------------------------------- */

static void
exact_rows(struct xres *res, int n, bool traced, int ops)
{
	static const struct {
		const char *key, *label;
	} rows[] = {
		{ "memfd", "memfd mmap+munmap, 1 page" },
		{ "devshm", "/dev/shm mmap+munmap, 1 page" },
		{ "disk", "disk file pair, default policy" },
		{ "pool", "pool cycle, 16 pages" },
		{ "recv", "recvmsg of one memfd" },
		{ "cpool", "received pool: recv, mmap, close, munmap" },
		{ "mprotect", "mprotect x2 of a record" },
		{ "mprotect.fail", "failed mprotect x2 by a record" },
	};

	printf("\nExact floors: CPU time per op in one process with the library, median over rounds\n"
	       "of each round's ABBA (bare, floor, library, library, floor, bare) batches of %zu.\n"
	       "bare: the raw system calls, which the library does not see; floor: bare plus exactly\n"
	       "the calls an exact decision needs, with the library's arguments (the \"floor adds\"\n"
	       "column); library: the interposed libc calls.  Calls per op beyond bare counted by\n"
	       "strace -f over %d ops of each.  Targets: library <= 1.05x floor (1.05f); the memfd\n"
	       "pair with a handler also <= 1.3x bare (1.3b): fault handlers are SIGSEGV's and\n"
	       "SIGBUS's (Rust's std), a handler SIGUSR1's.  Pool cycle: memfd_create, ftruncate,\n"
	       "mmap, munmap, close; recvmsg: sendmsg, recvmsg, close of what arrived; received\n"
	       "pool: a new memfd of 4 pages sent, recvmsg, mmap, close, munmap (a compositor fed a\n"
	       "new pool per buffer); failed mprotect: over a protected memfd page and the free page\n"
	       "above it (ENOMEM).\n"
	       "User-space instructions per op: %s\n",
	       A->params->quick ? (size_t)100 : (size_t)2000, ops,
	       xmed_key(res, n, "ex.pmu") > 0.5
		       ? "after the calls (bare/floor/library)"
		       : "not printed (no hardware\n"
			 "  counters on this machine; count them with valgrind --tool=callgrind)");
	printf("  %-44s %8s %8s %8s %8s %8s %-7s %-4s  %s\n", "row", "bare ns", "floor ns",
	       "lib ns", "lib/bare", "lib/flr", "target", "met", "floor adds | library adds (strace)");
	for (int h = 0; h < 3; h++)
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
			static const char *const suffix[3] = { "", ".f", ".h" };
			static const char *const prefix[3] = { "", "  + fault handlers, ", "  + handler, " };
			char key[64], k2[96], label[96], fadd[160], ladd[160];
			double lb, lf;
			const char *mark;

			snprintf(key, sizeof(key), "%s%s", rows[i].key, suffix[h]);
			snprintf(k2, sizeof(k2), "ex.%s.lb", key);
			lb = xmed_key(res, n, k2);
			if (isnan(lb))
				continue;	/* no such file here: said below */
			snprintf(k2, sizeof(k2), "ex.%s.lf", key);
			lf = xmed_key(res, n, k2);
			snprintf(label, sizeof(label), "%s%s", prefix[h], rows[i].label);
			if (traced) {
				seg_adds(key, "floor", ops, fadd, sizeof(fadd));
				seg_adds(key, "lib", ops, ladd, sizeof(ladd));
			} else {
				snprintf(fadd, sizeof(fadd), "(no counts: strace missing or failed)");
				ladd[0] = '\0';
			}
			mark = xjudge(lf, 1.05);
			printf("  %-44.44s", label);
			for (int v = 0; v < 3; v++) {
				static const char *const fig[] = { "bare", "floor", "lib" };

				snprintf(k2, sizeof(k2), "ex.%s.%s", key, fig[v]);
				printf(" %8.1f", xmed_key(res, n, k2));
			}
			printf(" %7.3fx %7.3fx %-7s %-4s  %s | %s", lb, lf, "<=1.05f", mark, fadd, ladd);
			snprintf(k2, sizeof(k2), "ex.%s.ins.lib", key);
			if (!isnan(xmed_key(res, n, k2))) {
				double ib, ifl, il = xmed_key(res, n, k2);

				snprintf(k2, sizeof(k2), "ex.%s.ins.bare", key);
				ib = xmed_key(res, n, k2);
				snprintf(k2, sizeof(k2), "ex.%s.ins.floor", key);
				ifl = xmed_key(res, n, k2);
				printf("; user instructions %.0f/%.0f/%.0f", ib, ifl, il);
			}
			putchar('\n');
			if (h && !strcmp(rows[i].key, "memfd"))
				printf("  %-44s %8s %8s %8s %7.3fx %8s %-7s %-4s  %s\n",
				       h == 1 ? "  + fault handlers, memfd pair against bare"
					      : "  + handler, memfd pair against bare",
				       "", "", "", lb, "", "<=1.3b", xjudge(lb, 1.3),
				       "(as without a handler: no call more)");
		}
}

static long
strace_total(const char *log)
{
	FILE *f = fopen(log, "re");
	char line[512];
	long calls = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		double pct, secs;
		long usecs, n;

		if (strstr(line, " total") &&
		    sscanf(line, "%lf %lf %ld %ld", &pct, &secs, &usecs, &n) == 4)
			calls = n;
	}
	fclose(f);
	return calls;
}

static void
spawn_rows(const char *tmp)
{
	static const char *const hows[] = { "fork", "vfork", "spawn", "exec" };
	static const char *const labels[] = { "fork, child _exit", "vfork, child _exit",
					       "posix_spawn of nsb-true", "fork+execve of nsb-true" };
	long n1 = A->params->quick ? 1 : 10, n2 = A->params->quick ? 3 : 50;
	char log[4200];

	printf("\nProcess creation: system calls per child over an empty preloaded library\n"
	       "(strace -f -c of a parent making %ld and %ld children; the difference per child)\n",
	       n1, n2);
	if (!have_program("strace")) {
		printf("  skipped: strace is not installed\n");
		return;
	}
	printf("  %-44s %10s %10s %10s %-7s %-4s\n", "how", "empty", "library", "added", "target",
	       "met");
	snprintf(log, sizeof(log), "%s/spawn.strace", tmp);
	for (int h = 0; h < 2; h++)
		for (int i = 0; i < 4; i++) {
			double per[2];
			char label[96];

			for (int lib = 0; lib < 2; lib++) {
				long c[2];

				for (int k = 0; k < 2; k++) {
					char how[48], nn[32], pre[4200];
					const char *env[] = { how, nn, pre, h ? "NSB_BENCH_HANDLER=1" : NULL,
							      NULL };

					snprintf(how, sizeof(how), "NSB_BENCH_SPAWN=%s", hows[i]);
					snprintf(nn, sizeof(nn), "NSB_BENCH_N=%ld", k ? n2 : n1);
					snprintf(pre, sizeof(pre), "LD_PRELOAD=%s",
						 lib ? A->preload : A->empty);
					c[k] = xchild("spawn", 0, env, NULL, log, true) ? strace_total(log)
											: -1;
				}
				per[lib] = c[0] < 0 || c[1] < 0 ? NAN
						  : (double)(c[1] - c[0]) / (double)(n2 - n1);
			}
			snprintf(label, sizeof(label), "%s%s", labels[i],
				 h ? ", handler in the parent" : "");
			printf("  %-44s %10.1f %10.1f %+10.1f %-7s %-4s\n", label, per[0], per[1],
			       per[1] - per[0], "<=2", xjudge(per[1] - per[0], 2));
		}
}

static void
pass_rows(struct xres (*res)[6], int n)
{
	static const char *const fills[] = { "range", "auto" };
	static const char *const pops[] = { "default", "zero file off", "zero file on" };

	printf("\nA rescue costs readers and writers nothing: after a fill of a truncated %zu MiB\n"
	       "MAP_SHARED|MAP_NOSIGBUS memfd mapping, a first pass (one touch a page, in order)\n"
	       "against the same pass over fresh anonymous memory, CPU time, ABBA in one process;\n"
	       "zero file: the library's NSB_TEST_ZERO_FILE (off: every fill anonymous memory)\n",
	       A->params->size >> 20);
	printf("  %-44s %10s %10s %8s %-7s %-4s\n", "fill, zero file, pass", "anon ns/pg",
	       "rescue ns", "ratio", "target", "met");
	for (int f = 0; f < 2; f++)
		for (int p = 0; p < 3; p++)
			for (int w = 0; w < 2; w++) {
				const char *what = w ? "write" : "read";
				char label[96], k[48];
				double v[XMAX_ROUNDS], a[XMAX_ROUNDS], r[XMAX_ROUNDS], ratio;

				for (int i = 0; i < n; i++) {
					snprintf(k, sizeof(k), "pass.%s.ratio", what);
					v[i] = xget(&res[i][f * 3 + p], k);
					snprintf(k, sizeof(k), "pass.%s.anon", what);
					a[i] = xget(&res[i][f * 3 + p], k);
					snprintf(k, sizeof(k), "pass.%s.rescue", what);
					r[i] = xget(&res[i][f * 3 + p], k);
				}
				ratio = xmedian(v, n);
				snprintf(label, sizeof(label), "%s, %s, %s-first", fills[f],
					 pops[p], what);
				printf("  %-44s %10.1f %10.1f %7.3fx %-7s %-4s\n", label, xmedian(a, n),
				       xmedian(r, n), ratio, "<=1.05", xjudge(ratio, 1.05));
			}
}

static void
frame_rows(struct xres (*res)[3], int n)
{
	static const char *const pops[] = { "default", "zero file off", "zero file on" };
	static const char *const names[] = { "4k", "clipped" };
	static const char *const labels[] = { "3840x2160 read whole", "8192-wide clipped" };

	printf("\nThe hostile frame (a new pool each frame, truncated after the compositor mapped\n"
	       "it) against the legitimate frame (the same, not truncated), in one process, CPU time,\n"
	       "fastest of the frames of each round; memory: growth over hostile frames after a\n"
	       "warm-up\n");
	printf("  %-44s %10s %10s %8s %-7s %-4s\n", "frame, zero file", "legit ms", "hostile ms",
	       "ratio", "target", "met");
	for (int i = 0; i < 2; i++)
		for (int p = 0; p < 3; p++) {
			char label[96], h[64], l[64];
			double v[XMAX_ROUNDS], ratio;

			snprintf(h, sizeof(h), "ops.frame.%s.hostile", names[i]);
			snprintf(l, sizeof(l), "ops.frame.%s.legit", names[i]);
			for (int r = 0; r < n; r++)
				v[r] = xget(&res[r][p], h) / xget(&res[r][p], l);
			ratio = xmedian(v, n);
			snprintf(label, sizeof(label), "%s, %s", labels[i], pops[p]);
			{
				double lv[XMAX_ROUNDS], hv[XMAX_ROUNDS];

				for (int r = 0; r < n; r++) {
					lv[r] = xget(&res[r][p], l);
					hv[r] = xget(&res[r][p], h);
				}
				printf("  %-44s %10.2f %10.2f %7.3fx %-7s %-4s\n", label,
				       xmedian(lv, n), xmedian(hv, n), ratio, "<=1.2",
				       xjudge(ratio, 1.2));
			}
		}
	for (int p = 0; p < 3; p++) {
		double frames = xget(&res[0][p], "ops.frame.mem.frames");

		if (isnan(frames))
			continue;
		printf("  memory over %.0f more hostile frames, %-13s VmRSS %+.0f KiB, "
		       "VmSize %+.0f KiB, library records %+.0f\n",
		       frames, pops[p], xget(&res[0][p], "ops.frame.mem.rss"),
		       xget(&res[0][p], "ops.frame.mem.size"),
		       xget(&res[0][p], "ops.frame.mem.records"));
	}
}

/* ---- whole workloads ---------------------------------------------------- */

static void
workload(const char *label, char *const argv[], const char *const lib_env[], const char *dir,
	 bool ok1, double limit)
{
	int pairs = A->params->quick ? 1 : 3;
	double ratio[XMAX_ROUNDS], none[XMAX_ROUNDS], with[XMAX_ROUNDS];
	char pre[4200];
	const char *env[8];
	int e = 0;

	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", A->preload);
	env[e++] = pre;
	for (int i = 0; lib_env && lib_env[i] && e < 7; i++)
		env[e++] = lib_env[i];
	env[e] = NULL;
	for (int r = 0; r < pairs; r++) {
		double t[4];

		for (int k = 0; k < 4; k++) {
			bool lib = (k == 1 || k == 2) ^ (r % 2);

			if (!xrun(argv, lib ? env : NULL, NULL, 0, &t[k], dir, ok1)) {
				fprintf(stderr, "nsb-bench: workload %s failed%s\n", label,
					lib ? " under the preload" : "");
				xfailed = true;
				return;
			}
		}
		none[r] = r % 2 ? (t[1] + t[2]) / 2 : (t[0] + t[3]) / 2;
		with[r] = r % 2 ? (t[0] + t[3]) / 2 : (t[1] + t[2]) / 2;
		ratio[r] = with[r] / none[r];
	}
	{
		double m = xmedian(ratio, pairs);
		char tbuf[16] = "";

		if (limit > 0)
			snprintf(tbuf, sizeof(tbuf), "<=%g", limit);
		printf("  %-44.44s %10.3f %10.3f %7.3fx %-7s %-4s\n", label, xmedian(none, pairs),
		       xmedian(with, pairs), m, tbuf, limit > 0 ? xjudge(m, limit) : "");
	}
}

static void
workload_rows(const char *tmp)
{
	const char *src = getenv("NSB_SOURCE_ROOT"), *build = getenv("NSB_BUILD_ROOT");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char loop[160], inc1[4200], inc2[4200], f[4][4200], jn[24];
	static const char *const files[] = { "policy.c", "ranges.c", "maps.c", "config.c" };
	int nfiles = A->params->quick ? 1 : 4;
	const char *rgdir = A->params->quick ? "/usr/include/linux" : "/usr/include";
	const char *const files_env[] = { "NOSIGBUS_POLICY=files", NULL };

	printf("\nWhole workloads: CPU time (user+system, with waited-for children), library in the\n"
	       "environment against none, ABBA, %d pair%s; ripgrep (if installed) under\n"
	       "NOSIGBUS_POLICY=files, counting the lines with \"struct\" in each file\n",
	       A->params->quick ? 1 : 3, A->params->quick ? "" : "s");
	printf("  %-44s %10s %10s %8s %-7s %-4s\n", "workload", "none s", "library s", "ratio",
	       "target", "met");
	snprintf(loop, sizeof(loop), "i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done",
		 A->params->quick ? 20 : 2000);
	{
		char *argv[] = { "sh", "-c", loop, NULL };
		char label[64];

		snprintf(label, sizeof(label), "sh: %d x /bin/true", A->params->quick ? 20 : 2000);
		workload(label, argv, NULL, NULL, false, 0);
	}
	if (src && build && have_program("cc")) {
		char *argv[16];
		int a = 0;

		snprintf(inc1, sizeof(inc1), "-I%s/src", src);
		snprintf(inc2, sizeof(inc2), "-I%s/src", build);
		argv[a++] = "cc";
		argv[a++] = "-O2";
		argv[a++] = "-D_GNU_SOURCE";
		argv[a++] = "-fvisibility=hidden";
		argv[a++] = inc1;
		argv[a++] = inc2;
		argv[a++] = "-c";
		for (int i = 0; i < nfiles; i++) {
			snprintf(f[i], sizeof(f[i]), "%s/src/%s", src, files[i]);
			argv[a++] = f[i];
		}
		argv[a] = NULL;
		workload(nfiles == 1 ? "cc -O2 -c of src/policy.c"
				     : "cc -O2 -c of 4 files of src/", argv, NULL, tmp, false, 0);
	} else {
		printf("  C build skipped: %s\n", src && build ? "no cc in PATH"
				: "NSB_SOURCE_ROOT/NSB_BUILD_ROOT unset (run it through meson)");
	}
	if (!have_program("rg")) {
		printf("  ripgrep skipped: rg is not installed\n");
		return;
	}
	for (int t = 0; t < 2; t++) {
		char label[96];
		char *argv[] = { "rg", "--mmap", "-c", "--no-messages", "-j", jn, "struct",
				 (char *)rgdir, NULL };

		snprintf(jn, sizeof(jn), "%ld", t ? (cpus > 1 ? cpus : 2) : 1);
		snprintf(label, sizeof(label), "rg --mmap -j%s %s (files)", jn, rgdir);
		workload(label, argv, files_env, NULL, true, 1.05);
	}
}

int
bench_exact(const struct bench_exact_args *args, int *met_out, int *missed_out)
{
	static struct xres ex[XMAX_ROUNDS], pass[XMAX_ROUNDS][6], fr[XMAX_ROUNDS][3];
	char tmp[] = "/tmp/nsb-bench-XXXXXX", log[64];
	bool traced = false;
	int rounds = args->rounds;

	static char self[4096];
	static struct bench_exact_args a;
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (len <= 0) {
		perror("nsb-bench: /proc/self/exe");
		return 1;
	}
	self[len] = '\0';
	a = *args;
	a.self = self;
	A = &a;
	if (!mkdtemp(tmp)) {
		perror("nsb-bench: mkdtemp");
		return 1;
	}
	snprintf(log, sizeof(log), "%s/marks.strace", tmp);
	if (have_program("strace")) {
		const char *env[] = { "NSB_BENCH_MARKS=1", NULL };

		if (xchild("exact", 0, env, NULL, log, false)) {
			parse_marks(log);
			traced = nsegs > 0;
		}
		unlink(log);
	}
	for (int r = 0; r < rounds; r++) {
		static const char *const fills[] = { "NOSIGBUS_FILL=range", "NOSIGBUS_FILL=auto" };
		static const char *const pops[] = { NULL, "NSB_TEST_ZERO_FILE=off",
						    "NSB_TEST_ZERO_FILE=on" };
		double t0 = bench_now();

		fprintf(stderr, "nsb-bench: exact rows, round %d of %d ...", r + 1, rounds);
		xchild("exact", r, NULL, &ex[r], NULL, false);
		if (!args->ops_only)
			for (int k = 0; k < 6; k++) {
				int i = (k + r) % 6;
				const char *env[] = { fills[i / 3], pops[i % 3], NULL };

				xchild("pass", r, env, &pass[r][i], NULL, false);
			}
		for (int p = 0; p < 3; p++) {
			const char *env[] = { "NSB_BENCH_OPS=frame", r == 0 ? "NSB_BENCH_FRAME_MEM=1"
								     : "NSB_BENCH_X=1",
					      pops[p], NULL };

			xchild("ops", r, env, &fr[r][p], NULL, false);
		}
		fprintf(stderr, " %.1f s\n", (bench_now() - t0) / 1e9);
	}
	exact_rows(ex, rounds, traced, 20);
	if (!args->ops_only)
		pass_rows(pass, rounds);
	frame_rows(fr, rounds);
	if (!args->ops_only) {
		fprintf(stderr, "nsb-bench: process creation under strace ...\n");
		spawn_rows(tmp);
		fprintf(stderr, "nsb-bench: whole workloads ...\n");
		workload_rows(tmp);
	}
	{
		char cmd[128];

		/* What the C build left, and the strace logs. */
		snprintf(cmd, sizeof(cmd), "%s/spawn.strace", tmp);
		unlink(cmd);
		for (int i = 0; i < 4; i++) {
			static const char *const o[] = { "policy.o", "ranges.o", "maps.o", "config.o" };

			snprintf(cmd, sizeof(cmd), "%s/%s", tmp, o[i]);
			unlink(cmd);
		}
		rmdir(tmp);
	}
	*met_out += met;
	*missed_out += missed;
	return xfailed ? 1 : 0;
}
