/* SPDX-License-Identifier: MIT */
/*
 * bench.c - the benchmark driver: runs every configuration in child
 * processes, round after round, and prints one table of medians.
 *
 *   nsb-bench [--quick] [--ops] [--rounds N] [--size MIB] [--preload PATH]
 *             [--empty PATH] [--true PATH]
 *
 * The library comes from --preload or $NSB_PRELOAD; the empty library and
 * the process that does nothing (for the start-up figure) from --empty and
 * --true, by default next to this program.  NOSIGBUS_FILL and
 * NOSIGBUS_ERRORS are read when the library starts, so each configuration
 * is its own child: this program re-executes itself with LD_PRELOAD and
 * those set, and reads the child's figures from a pipe.  In each round
 * every configuration runs once, in an order that rotates from round to
 * round; the interposition runs alternate with and without the library
 * (ABBA), so that drift of the machine cancels out of their ratio.
 *
 * A setting the library does not know yet (NOSIGBUS_FILL=auto before it
 * exists) costs one warning line in the child: it is taken out of the
 * child's stderr and said in the table, whose rows then measure what the
 * library did instead.
 *
 * report.c adds the rows against their exact floors (exact.c's children:
 * bare calls, floor and library in one process), system calls per child
 * process under strace, passes after a fill, the hostile frame's memory and
 * whole workloads, after the header.
 *
 * Timing never fails the run: targets are printed as pass/MISS for
 * information, and a nosigbus_protect() call still running after its time
 * limit is killed and printed as a MISS.  The exit status is 1 only when a
 * child failed (a crash is a bug, not a slow machine), 77 when there is no
 * library to measure.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#ifndef NSB_VERSION
#define NSB_VERSION "unknown"
#endif

#define MAX_ROUNDS 99
#define MAX_KEYS 96

enum child_id {
	C_PAGE, C_RANGE, C_AUTO, C_ZERO, C_SCALE, C_FLOOR, C_STARTUP,
	C_IP_LIB, C_IP_NOLIB, C_IP_LIB2, C_IP_NOLIB2,
	C_PROTECT,
	C_OPS_LIB, C_OPS_NOLIB, C_OPS_LIB2, C_OPS_NOLIB2, C_OPS_FILES, C_OPS_READ,
	C_OPS_MANY, C_OPS_MANY_NOLIB, C_OPS_PROBE, C_OPS_POPULATE,
	C_COUNT
};

static const struct child_spec {
	const char *kind;
	bool library;
	const char *fill;	/* NOSIGBUS_FILL, or NULL */
	const char *errors;	/* NOSIGBUS_ERRORS, or NULL */
	const char *env[2];	/* more of the environment, or NULL */
} specs[C_COUNT] = {
	[C_PAGE] = { "rescue", true, "page", NULL },
	[C_RANGE] = { "rescue", true, "range", NULL },
	[C_AUTO] = { "rescue", true, "auto", NULL },
	[C_ZERO] = { "rescue", true, "page", "zero" },
	[C_SCALE] = { "scale", true, "page", NULL },
	[C_FLOOR] = { "floor", false, NULL, NULL },
	[C_STARTUP] = { "startup", false, NULL, NULL },
	[C_IP_LIB] = { "interpose", true, NULL, NULL },
	[C_IP_NOLIB] = { "interpose", false, NULL, NULL },
	[C_IP_LIB2] = { "interpose", true, NULL, NULL },
	[C_IP_NOLIB2] = { "interpose", false, NULL, NULL },
	[C_PROTECT] = { "protect", true, NULL, NULL },
	[C_OPS_LIB] = { "ops", true, NULL, NULL },
	[C_OPS_NOLIB] = { "ops", false, NULL, NULL },
	[C_OPS_LIB2] = { "ops", true, NULL, NULL },
	[C_OPS_NOLIB2] = { "ops", false, NULL, NULL },
	/* Disk files under NOSIGBUS_POLICY=files; failing mprotect through
	 * the fallback that reads /proc/self/maps (maps.c's test switch). */
	[C_OPS_FILES] = { "ops", true, NULL, NULL,
			  { "NOSIGBUS_POLICY=files", "NSB_BENCH_OPS=disk" } },
	[C_OPS_READ] = { "ops", true, NULL, NULL,
			 { "NSB_TEST_MAPS=read", "NSB_BENCH_OPS=mprotect" } },
	/* As on a kernel without PROCMAP_QUERY: the bounded probe, then the
	 * read. */
	[C_OPS_PROBE] = { "ops", true, NULL, NULL,
			  { "NSB_TEST_MAPS=probe", "NSB_BENCH_OPS=mprotect" } },
	/* Many distinct files mapped, with and without the library. */
	[C_OPS_MANY] = { "ops", true, NULL, NULL, { "NSB_BENCH_OPS=files" } },
	[C_OPS_MANY_NOLIB] = { "ops", false, NULL, NULL, { "NSB_BENCH_OPS=files" } },
	/* Hostile frames with the rescued tail populated as on a kernel that
	 * maps the zero page (rescue.c asks; some guests never map it). */
	[C_OPS_POPULATE] = { "ops", true, NULL, NULL, { "NSB_TEST_ZERO_FILE=off", "NSB_BENCH_OPS=frame" } },
};

/* A measuring child gets this long; then it is killed (a failure, but for
 * nosigbus_protect(), whose time is the figure: a MISS). */
#define CHILD_LIMIT_S 600
#define PROTECT_LIMIT_S 20

struct result {
	bool ok;
	bool timed_out;
	int n;
	struct bench_kv kv[MAX_KEYS];
	char ignored[160];	/* the library's "ignoring NOSIGBUS_..." warning */
};

static struct result results[MAX_ROUNDS][C_COUNT];
static int rounds = 7;
static struct bench_params params;
static char preload[PATH_MAX];
static char empty_path[PATH_MAX];
static char true_path[PATH_MAX];
static size_t page;
static bool failed;

/* ---- running the children --------------------------------------------- */

/* The environment of a child: ours without any preload or NOSIGBUS_*
 * setting, plus those of its configuration. */
static char **
child_env(const struct child_spec *c, char *buf_preload, char *buf_fill, char *buf_errors)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 6, sizeof(*env));
	if (!env) {
		perror("nsb-bench: calloc");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], "NOSIGBUS_", 9) && strncmp(environ[i], "NSB_TEST_", 9) &&
		    strncmp(environ[i], "NSB_BENCH_", 10))
			env[k++] = environ[i];
	for (int i = 0; i < 2; i++)
		if (c->env[i])
			env[k++] = (char *)c->env[i];
	if (c->library) {
		sprintf(buf_preload, "LD_PRELOAD=%s", preload);
		env[k++] = buf_preload;
	}
	if (c->fill) {
		sprintf(buf_fill, "NOSIGBUS_FILL=%s", c->fill);
		env[k++] = buf_fill;
	}
	if (c->errors) {
		sprintf(buf_errors, "NOSIGBUS_ERRORS=%s", c->errors);
		env[k++] = buf_errors;
	}
	return env;
}

/*
 * The child's stderr, passed on to ours, except the library's warning
 * about a setting it does not know (yet): that one is kept for the table.
 */
static void
pass_stderr(struct result *res, int fd)
{
	char buf[8192], *line, *next;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return;
	buf[n] = '\0';
	for (line = buf; *line; line = next) {
		next = strchr(line, '\n');
		next = next ? next + 1 : line + strlen(line);
		if (strstr(line, "nosigbus: ignoring NOSIGBUS_") && !res->ignored[0]) {
			snprintf(res->ignored, sizeof(res->ignored), "%.*s",
				 (int)(next - line - (next[-1] == '\n')), line);
			continue;
		}
		fwrite(line, 1, (size_t)(next - line), stderr);
	}
}

int
bench_parse(char *text, struct bench_kv *kv, int max)
{
	int n = 0;

	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strchr(line, ' ');

		if (!sp || n == max || (size_t)(sp - line) >= sizeof(kv[0].key))
			continue;
		memcpy(kv[n].key, line, (size_t)(sp - line));
		kv[n].key[sp - line] = '\0';
		kv[n].v = strtod(sp + 1, NULL);
		n++;
	}
	return n;
}

static void
run_child(enum child_id id, int round, const char *self, int limit_s)
{
	const struct child_spec *c = &specs[id];
	struct result *res = &results[round][id];
	char size_arg[32], round_arg[32], buf_preload[PATH_MAX + 16], buf_fill[64];
	char buf_errors[64];
	const char *argv[16];
	char out[16384];
	double deadline = bench_now() + limit_s * 1e9;
	size_t len = 0;
	ssize_t n;
	int fds[2], err_fd, status, a = 0;
	char **env;
	pid_t pid;

	snprintf(size_arg, sizeof(size_arg), "%zu", params.size);
	snprintf(round_arg, sizeof(round_arg), "%d", round);
	argv[a++] = self;
	argv[a++] = "--child";
	argv[a++] = c->kind;
	argv[a++] = "--size-bytes";
	argv[a++] = size_arg;
	argv[a++] = "--round";
	argv[a++] = round_arg;
	if (params.quick)
		argv[a++] = "--quick";
	argv[a++] = "--preload";
	argv[a++] = preload;
	argv[a++] = "--empty";
	argv[a++] = empty_path;
	argv[a++] = "--true";
	argv[a++] = true_path;
	argv[a] = NULL;

	env = child_env(c, buf_preload, buf_fill, buf_errors);
	err_fd = memfd_create("nsb-bench-stderr", MFD_CLOEXEC);
	if (pipe2(fds, O_CLOEXEC) < 0 || err_fd < 0) {
		perror("nsb-bench: pipe");
		exit(1);
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("nsb-bench: fork");
		exit(1);
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(err_fd, STDERR_FILENO);
		execve("/proc/self/exe", (char *const *)argv, env);
		perror("nsb-bench: execve /proc/self/exe");
		_exit(127);
	}
	free(env);
	close(fds[1]);
	for (;;) {
		struct pollfd pfd = { fds[0], POLLIN, 0 };
		double left = (deadline - bench_now()) / 1e6;
		int r;

		if (!res->timed_out && left <= 0) {
			kill(pid, SIGKILL);
			res->timed_out = true;
		}
		r = poll(&pfd, 1, res->timed_out ? -1 : (int)(left < INT_MAX ? left + 1 : INT_MAX));
		if (r == 0 || (r < 0 && errno == EINTR))
			continue;
		n = r < 0 ? -1 : read(fds[0], out + len, sizeof(out) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || len + (size_t)n >= sizeof(out) - 1)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("nsb-bench: waitpid");
			exit(1);
		}
	pass_stderr(res, err_fd);
	close(err_fd);
	res->ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (res->timed_out && id == C_PROTECT) {
		/* Slow, not broken: the table says how slow. */
	} else if (res->timed_out) {
		failed = true;
		fprintf(stderr, "nsb-bench: round %d: %s child still running after %d s: killed\n",
			round + 1, c->kind, limit_s);
	} else if (!res->ok) {
		failed = true;
		if (WIFSIGNALED(status))
			fprintf(stderr, "nsb-bench: round %d: %s child%s%s killed by %s\n",
				round + 1, c->kind, c->fill ? " fill=" : "",
				c->fill ? c->fill : "", strsignal(WTERMSIG(status)));
		else
			fprintf(stderr, "nsb-bench: round %d: %s child%s%s exited %d\n",
				round + 1, c->kind, c->fill ? " fill=" : "",
				c->fill ? c->fill : "", WEXITSTATUS(status));
	}
	res->n = bench_parse(out, res->kv, MAX_KEYS);
}

static bool protect_too_slow;
static bool ops_only;	/* --ops: the mapping-call rows alone */

static void
run_rounds(const char *self)
{
	static const enum child_id main_kinds[] = {
		C_FLOOR, C_PAGE, C_AUTO, C_RANGE, C_ZERO, C_SCALE, C_STARTUP,
	};
	static const enum child_id abba[2][4] = {
		{ C_IP_NOLIB, C_IP_LIB, C_IP_LIB2, C_IP_NOLIB2 },
		{ C_IP_LIB, C_IP_NOLIB, C_IP_NOLIB2, C_IP_LIB2 },
	};
	const int nmain = sizeof(main_kinds) / sizeof(main_kinds[0]);

	for (int r = 0; r < rounds; r++) {
		double t0 = bench_now();

		fprintf(stderr, "nsb-bench: round %d of %d ...", r + 1, rounds);
		for (int k = 0; k < nmain && !ops_only; k++) {
			run_child(main_kinds[(k + r) % nmain], r, self, CHILD_LIMIT_S);
			if (k < 4)
				run_child(abba[r % 2][k], r, self, CHILD_LIMIT_S);
		}
		{
			static const enum child_id ops[2][10] = {
				{ C_OPS_NOLIB, C_OPS_LIB, C_OPS_FILES, C_OPS_READ, C_OPS_PROBE,
				  C_OPS_POPULATE, C_OPS_MANY_NOLIB, C_OPS_MANY, C_OPS_LIB2, C_OPS_NOLIB2 },
				{ C_OPS_LIB, C_OPS_NOLIB, C_OPS_PROBE, C_OPS_POPULATE, C_OPS_READ,
				  C_OPS_FILES, C_OPS_MANY, C_OPS_MANY_NOLIB, C_OPS_NOLIB2, C_OPS_LIB2 },
			};

			for (int k = 0; k < 10; k++)
				run_child(ops[r % 2][k], r, self, CHILD_LIMIT_S);
		}
		/* Once it has run out of time, later rounds would only wait. */
		if (!protect_too_slow && !ops_only) {
			run_child(C_PROTECT, r, self, PROTECT_LIMIT_S);
			protect_too_slow = results[r][C_PROTECT].timed_out;
		}
		fprintf(stderr, " %.1f s\n", (bench_now() - t0) / 1e9);
	}
}

/* ---- reading the figures ---------------------------------------------- */

static double
get(int round, enum child_id id, const char *key)
{
	const struct result *res = &results[round][id];

	for (int i = 0; i < res->n; i++)
		if (!strcmp(res->kv[i].key, key))
			return res->kv[i].v;
	return NAN;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median, minimum and maximum of the figures that are there (not NaN). */
struct stat3 {
	double med, min, max;
};

static struct stat3
summarise(double *v)
{
	struct stat3 s = { NAN, NAN, NAN };
	int n = 0;

	for (int r = 0; r < rounds; r++)
		if (!isnan(v[r]))
			v[n++] = v[r];
	if (n == 0)
		return s;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	s.med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	s.min = v[0];
	s.max = v[n - 1];
	return s;
}

static struct stat3
med_value(enum child_id id, const char *key)
{
	double v[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++)
		v[r] = get(r, id, key);
	return summarise(v);
}

/* figure / baseline per round, both from the same child. */
static struct stat3
med_ratio(enum child_id id, const char *key, const char *base)
{
	double v[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++)
		v[r] = get(r, id, key) / get(r, id, base);
	return summarise(v);
}

/* The library's two interposition children over the two without it. */
static struct stat3
ip_ratio(const char *key)
{
	double v[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++)
		v[r] = (get(r, C_IP_LIB, key) + get(r, C_IP_LIB2, key)) /
		       (get(r, C_IP_NOLIB, key) + get(r, C_IP_NOLIB2, key));
	return summarise(v);
}

static struct stat3
ip_value(bool library, const char *key)
{
	double v[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++)
		v[r] = library ? (get(r, C_IP_LIB, key) + get(r, C_IP_LIB2, key)) / 2
			       : (get(r, C_IP_NOLIB, key) + get(r, C_IP_NOLIB2, key)) / 2;
	return summarise(v);
}

/*
 * Two processes of the same round, each figure over its own process's
 * baseline first, so that the machine's drift between them cancels.
 */
static struct stat3
cross_ratio(enum child_id a, const char *akey, const char *abase,
	    enum child_id b, const char *bkey, const char *bbase)
{
	double v[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++)
		v[r] = (get(r, a, akey) / get(r, a, abase)) / (get(r, b, bkey) / get(r, b, bbase));
	return summarise(v);
}

/* The library's warning about a setting of this child, if it gave one. */
static const char *
ignored(enum child_id id)
{
	for (int r = 0; r < rounds; r++)
		if (results[r][id].ignored[0])
			return results[r][id].ignored;
	return NULL;
}

/* ---- the table -------------------------------------------------------- */

static int targets_met, targets_missed;

static void
section(const char *title)
{
	printf("\n%s\n", title);
}

/* Counts and returns the mark of a figure against its limit. */
static const char *
judge(double figure, double limit)
{
	if (isnan(figure))
		return "n/a";
	if (figure <= limit) {
		targets_met++;
		return "pass";
	}
	targets_missed++;
	return "MISS";
}

/* A ratio as the table prints it: three decimals near 1, where the
 * targets are a few percent. */
static void
format_ratio(struct stat3 ratio, char *rbuf, size_t rsize, char *sbuf, size_t ssize)
{
	rbuf[0] = sbuf[0] = '\0';
	if (!isnan(ratio.med) && ratio.max < 2) {
		snprintf(rbuf, rsize, "%.3fx", ratio.med);
		snprintf(sbuf, ssize, "%.3f-%.3f", ratio.min, ratio.max);
	} else if (!isnan(ratio.med)) {
		snprintf(rbuf, rsize, "%.2fx", ratio.med);
		snprintf(sbuf, ssize, "%.2f-%.2f", ratio.min, ratio.max);
	}
}

/* The second comparison of a line: against the floor measured in the
 * same run (the minimal handler), where there is one. */
struct versus {
	struct stat3 ratio;
	double limit;
};

/*
 * One line: label, median figure, ratio with its spread over rounds, what
 * the ratio is against, the target and its mark, the ratio to the floor
 * with its target and mark, notes.
 */
static void
line(const char *label, double value, const char *unit, struct stat3 ratio,
     const char *against, const char *target, const char *mark,
     const struct versus *floor, const char *extra)
{
	char rbuf[16], sbuf[32], fbuf[16], fsbuf[32], ftbuf[16] = "";
	const char *fmark = "";

	format_ratio(ratio, rbuf, sizeof(rbuf), sbuf, sizeof(sbuf));
	fbuf[0] = '\0';
	if (floor) {
		format_ratio(floor->ratio, fbuf, sizeof(fbuf), fsbuf, sizeof(fsbuf));
		snprintf(ftbuf, sizeof(ftbuf), "<=%gx", floor->limit);
		fmark = judge(floor->ratio.med, floor->limit);
	}
	if (isnan(value))
		printf("  %-38s %9s %-8s", label, "n/a", unit);
	else
		printf("  %-38s %9.1f %-8s", label, value, unit);
	printf(" %7s %-11s %-16s %-7s %-4s %7s %-7s %-4s %s\n", rbuf, sbuf, against, target,
	       mark, fbuf, ftbuf, fmark, extra ? extra : "");
}

/* A line whose target (limit > 0; none otherwise) applies to the ratio. */
static void
row_vs(const char *label, double value, const char *unit, struct stat3 ratio,
       const char *against, double limit, const struct versus *floor, const char *extra)
{
	char tbuf[16] = "";
	const char *mark = "";

	if (limit > 0) {
		snprintf(tbuf, sizeof(tbuf), "<=%gx", limit);
		mark = judge(ratio.med, limit);
	}
	line(label, value, unit, ratio, against, tbuf, mark, floor, extra);
}

static void
row(const char *label, double value, const char *unit, struct stat3 ratio,
    const char *against, double limit, const char *extra)
{
	row_vs(label, value, unit, ratio, against, limit, NULL, extra);
}

static const struct stat3 no_ratio = { NAN, NAN, NAN };

static const char *
order_label(const char *o)
{
	return !strcmp(o, "seq") ? "sequential" : "random";
}

static const char *const maps[] = { "private", "shared" };
static const char *const accesses[] = { "read", "write" };
static const char *const orders[] = { "seq", "rand" };

static const char *
map_label(int m)
{
	return m ? "MAP_SHARED " : "MAP_PRIVATE";
}

/* The signals, and any write that did not stick, of one rescue figure. */
static void
rescue_notes(enum child_id id, const char *key, char *extra, size_t size)
{
	char nkey[64];
	struct stat3 signals, lost;

	snprintf(nkey, sizeof(nkey), "n.%s", key);
	signals = med_value(id, nkey);
	snprintf(nkey, sizeof(nkey), "lost.%s", key);
	lost = med_value(id, nkey);
	if (!isnan(lost.max) && lost.max > 0)
		snprintf(extra, size, "%.0f signals, %.0f WRITES LOST", signals.med, lost.max);
	else
		snprintf(extra, size, "%.0f signals", signals.med);
}

/* When the library ignored this child's setting, the section says so. */
static void
say_ignored(enum child_id id, const char *measured)
{
	const char *warning = ignored(id);

	if (warning)
		printf("  (the library does not know this setting yet: \"%s\";\n"
		       "   these rows measure %s)\n", warning, measured);
}

/*
 * One table per fill: each rescue against the anonymous fault of the same
 * access and order (fixed targets), and, when floor_limit > 0, against
 * the minimal handler of the same run (the floor: what any user-space
 * rescue pays; issue 13 part 3).
 */
static void
print_rescues(enum child_id id, const char *fill, double read_limit, double write_limit,
	      double floor_limit)
{
	char title[256];

	snprintf(title, sizeof(title),
		 "Rescue, NOSIGBUS_FILL=%s: memfd mapped MAP_NOSIGBUS, truncated to 0, one touch per page",
		 fill);
	section(title);
	say_ignored(id, "the library's default fill");
	for (int m = 0; m < 2; m++)
		for (int o = 0; o < 2; o++)
			for (int a = 0; a < 2; a++) {
				char key[48], base[48], fkey[64], label[64], against[32], extra[64];
				struct versus floor;

				snprintf(key, sizeof(key), "%s.%s.%s", maps[m], accesses[a], orders[o]);
				snprintf(base, sizeof(base), "base.%s.%s", accesses[a], orders[o]);
				snprintf(fkey, sizeof(fkey), "minimal.%s", key);
				snprintf(label, sizeof(label), "%s %-5s %s", map_label(m),
					 accesses[a], order_label(orders[o]));
				snprintf(against, sizeof(against), "anon %s %s", accesses[a], orders[o]);
				rescue_notes(id, key, extra, sizeof(extra));
				floor.ratio = cross_ratio(id, key, base, C_FLOOR, fkey, base);
				floor.limit = floor_limit;
				row_vs(label, med_value(id, key).med, "ns/page", med_ratio(id, key, base),
				       against, a ? write_limit : read_limit,
				       floor_limit > 0 ? &floor : NULL, extra);
			}
}

static void
print_floor(void)
{
	section("Floor, no library: what any user-space rescue pays (minimal handler: one mmap)");
	row("failed fault + SIGBUS + sigreturn", med_value(C_FLOOR, "signal").med, "ns/page",
	    med_ratio(C_FLOOR, "signal", "base.read.seq"), "anon read seq", 0, NULL);
	row("mmap(MAP_FIXED) of one anon page", med_value(C_FLOOR, "mmap").med, "ns/page",
	    med_ratio(C_FLOOR, "mmap", "base.read.seq"), "anon read seq", 0, NULL);
	for (int m = 0; m < 2; m++)
		for (int o = 0; o < 2; o++)
			for (int a = 0; a < 2; a++) {
				char key[80], base[64], lkey[64], label[64], against[32], extra[64];
				double lib, min;

				snprintf(lkey, sizeof(lkey), "%s.%s.%s", maps[m], accesses[a], orders[o]);
				snprintf(key, sizeof(key), "minimal.%s", lkey);
				snprintf(base, sizeof(base), "base.%s.%s", accesses[a], orders[o]);
				snprintf(label, sizeof(label), "minimal %s %-5s %s", m ? "shared " : "private",
					 accesses[a], order_label(orders[o]));
				snprintf(against, sizeof(against), "anon %s %s", accesses[a], orders[o]);
				lib = med_value(C_PAGE, lkey).med;
				min = med_value(C_FLOOR, key).med;
				snprintf(extra, sizeof(extra), "page fill: %+.0f ns", lib - min);
				row(label, min, "ns/page", med_ratio(C_FLOOR, key, base), against, 0, extra);
			}
	row("anon read fault, sequential (unit)", med_value(C_FLOOR, "base.read.seq").med,
	    "ns/page", no_ratio, "", 0, NULL);
}

/*
 * NOSIGBUS_FILL=auto against the fill it must match (issue 13 part 2):
 * page fill for scattered faults, range fill for scans and for the
 * compositor's first frame.  Each ratio is of figures over their own
 * process's baseline, auto's process over the other's, per round.
 */
static void
print_auto(void)
{
	section("NOSIGBUS_FILL=auto against page fill (random order) and range fill (sequential, compositor);\n"
		"each figure over its own process's anonymous baseline, auto over the other, per round");
	say_ignored(C_AUTO, "the library's default fill");
	{
		char extra[96];
		struct stat3 r = cross_ratio(C_AUTO, "compositor", "compositor.base",
					     C_RANGE, "compositor", "compositor.base");

		snprintf(extra, sizeof(extra), "%.0f signals; range %.2f ms, page %.2f ms",
			 med_value(C_AUTO, "n.compositor").med, med_value(C_RANGE, "compositor").med,
			 med_value(C_PAGE, "compositor").med);
		row("compositor: first read of a 4K buffer", med_value(C_AUTO, "compositor").med,
		    "ms", r, "range fill", 1.5, extra);
	}
	for (int o = 1; o >= 0; o--)
		for (int m = 0; m < 2; m++)
			for (int a = 0; a < 2; a++) {
				char key[48], base[48], label[64], extra[64];
				enum child_id other = o ? C_PAGE : C_RANGE;

				snprintf(key, sizeof(key), "%s.%s.%s", maps[m], accesses[a], orders[o]);
				snprintf(base, sizeof(base), "base.%s.%s", accesses[a], orders[o]);
				snprintf(label, sizeof(label), "%s %-5s %s", map_label(m), accesses[a],
					 order_label(orders[o]));
				rescue_notes(C_AUTO, key, extra, sizeof(extra));
				row(label, med_value(C_AUTO, key).med, "ns/page",
				    cross_ratio(C_AUTO, key, base, other, key, base),
				    o ? "page fill" : "range fill", o ? 1.05 : 1.5, extra);
			}
}

/* The end-of-file check of issue 12 must not slow the compositor's rescues. */
static void
print_eof_check(void)
{
	section("End-of-file check: page fill with it (default) against NOSIGBUS_ERRORS=zero (without);\n"
		"each figure over its own process's anonymous baseline, per round");
	printf("  (the same thing twice while the library does not read NOSIGBUS_ERRORS)\n");
	say_ignored(C_ZERO, "the library's defaults");
	for (int m = 0; m < 2; m++)
		for (int o = 0; o < 2; o++)
			for (int a = 0; a < 2; a++) {
				char key[48], base[48], label[64], extra[64];

				snprintf(key, sizeof(key), "%s.%s.%s", maps[m], accesses[a], orders[o]);
				snprintf(base, sizeof(base), "base.%s.%s", accesses[a], orders[o]);
				snprintf(label, sizeof(label), "%s %-5s %s", map_label(m), accesses[a],
					 order_label(orders[o]));
				snprintf(extra, sizeof(extra), "without the check: %.1f ns",
					 med_value(C_ZERO, key).med);
				row(label, med_value(C_PAGE, key).med, "ns/page",
				    cross_ratio(C_PAGE, key, base, C_ZERO, key, base),
				    "ERRORS=zero", 1.05, extra);
			}
}

static void
print_scale(void)
{
	section("Lookup scaling: page fill, MAP_PRIVATE read sequential, with N other protected mappings");
	for (int i = 0; i < BENCH_SCALE_STEPS; i++) {
		char key[32], base[32], rkey[32], label[64], extra[64];

		snprintf(key, sizeof(key), "lookup.%d", i);
		snprintf(base, sizeof(base), "lookup.%d.base", i);
		snprintf(rkey, sizeof(rkey), "lookup.%d.records", i);
		snprintf(label, sizeof(label), "N = %zu", params.scale[i]);
		snprintf(extra, sizeof(extra), "%.2fx anon read; %.0f records",
			 med_ratio(C_SCALE, key, base).med, med_value(C_SCALE, rkey).med);
		row(label, med_value(C_SCALE, key).med, "ns/page",
		    med_ratio(C_SCALE, key, "lookup.0"), i ? "N = 1" : "",
		    i == BENCH_SCALE_STEPS - 1 ? 1.05 : 0, extra);
	}
}

static void
print_interposition(void)
{
	static const char *const ops[] = { "mmap", "mprotect", "mremap" };
	static const char *const labels[] = { "mmap+munmap", "mprotect x2", "mremap grow+shrink" };
	char title[256];

	snprintf(title, sizeof(title),
		 "Interposition: one-page (%zu B) call pairs with N protected mappings live, no rescue;\n"
		 "library vs none, in processes that alternate (ABBA) in each round;\n"
		 "each process counts its fastest of %d batches of %zu pairs", page,
		 params.ip_batches, params.ip_pairs);
	section(title);
	for (int o = 0; o < 3; o++)
		for (int l = 0; l < 2; l++) {
			char key[32], label[64], extra[64];

			snprintf(key, sizeof(key), "ip.%d.%s", l, ops[o]);
			snprintf(label, sizeof(label), "%s, N = %zu", labels[o],
				 l ? params.ip_live : 0);
			snprintf(extra, sizeof(extra), "no library: %.1f ns",
				 ip_value(false, key).med);
			row(label, ip_value(true, key).med, "ns/pair", ip_ratio(key),
			    "no library", o == 0 ? (l ? 1.10 : 1.03) : 0, extra);
		}
}

/* An ops figure of child a (or the two library children) over the two
 * children without the library, per round. */
static struct stat3
ops_ratio(enum child_id a, const char *key, const char *base_key)
{
	double v[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++) {
		double lib = a == C_OPS_LIB ? (get(r, C_OPS_LIB, key) + get(r, C_OPS_LIB2, key)) / 2
					    : get(r, a, key);

		v[r] = lib / (a == C_OPS_MANY ? get(r, C_OPS_MANY_NOLIB, base_key)
					      : (get(r, C_OPS_NOLIB, base_key) +
						 get(r, C_OPS_NOLIB2, base_key)) / 2);
	}
	return summarise(v);
}

static struct stat3
ops_value(enum child_id a, const char *key)
{
	double v[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++)
		v[r] = a == C_OPS_LIB ? (get(r, C_OPS_LIB, key) + get(r, C_OPS_LIB2, key)) / 2 :
		       a == C_OPS_NOLIB ? (get(r, C_OPS_NOLIB, key) + get(r, C_OPS_NOLIB2, key)) / 2 :
		       get(r, a, key);
	return summarise(v);
}

static void
ops_row(const char *label, enum child_id a, const char *key, double limit, const char *unit)
{
	char extra[96];

	snprintf(extra, sizeof(extra), "no library: %.1f %s",
		 ops_value(a == C_OPS_MANY ? C_OPS_MANY_NOLIB : C_OPS_NOLIB, key).med, unit);
	row(label, ops_value(a, key).med, unit, ops_ratio(a, key, key), "no library", limit, extra);
}

/* Issue 24: the price of everything around the rescue. */
static void
print_ops(void)
{
	static const char *const fail_labels[] = { "40", "1 000", "10 000" };
	bool query = ops_value(C_OPS_LIB, "ops.procmap_query").med > 0.5;
	char title[512];

	snprintf(title, sizeof(title),
		 "Mapping calls of protected mappings (default policy unless said), library vs none,\n"
		 "in processes that alternate (ABBA) in each round; fastest of %d batches of %zu;\n"
		 "a failed mprotect: over a protected memfd page and the free page above it (ENOMEM)",
		 params.ops_batches, params.ops_pairs);
	section(title);
	ops_row("mmap+munmap memfd, 1 page", C_OPS_LIB, "ops.memfd.page", 1.3, "ns");
	ops_row("  ... with a signal handler installed", C_OPS_LIB, "ops.handler.memfd", 1.3, "ns");
	ops_row("mmap+munmap memfd, 1 MiB", C_OPS_LIB, "ops.memfd.mib", 1.3, "ns");
	ops_row("mmap+munmap /dev/shm file, 1 page", C_OPS_LIB, "ops.devshm.page", 1.3, "ns");
	ops_row("mmap+munmap /dev/shm file, 1 MiB", C_OPS_LIB, "ops.devshm.mib", 1.3, "ns");
	ops_row("pool: memfd_create..close, 16 pages", C_OPS_LIB, "ops.pool", 1.15, "ns");
	ops_row("  ... closed once mapped (libwayland)", C_OPS_LIB, "ops.pool.closed", 1.15, "ns");
	ops_row("mmap+munmap disk file, 1 page", C_OPS_LIB, "ops.disk.page", 1.05, "ns");
	ops_row("  ... under NOSIGBUS_POLICY=files", C_OPS_FILES, "ops.disk.page", 1.5, "ns");
	ops_row("recvmsg, no descriptor", C_OPS_LIB, "ops.recv.0", 1.05, "ns");
	ops_row("recvmsg, one memfd", C_OPS_LIB, "ops.recv.1", 1.05, "ns");
	for (int i = 0; i < 3; i++) {
		char key[32], nkey[32], label[64];

		snprintf(key, sizeof(key), "ops.files.%d", i);
		snprintf(nkey, sizeof(nkey), "ops.files.%d.n", i);
		snprintf(label, sizeof(label), "memfd pair, %.0f other files mapped",
			 ops_value(C_OPS_MANY, nkey).med);
		ops_row(label, C_OPS_MANY, key, 1.3, "ns");
	}
	ops_row("mprotect x2 of a protected page", C_OPS_LIB, "ops.mprotect.ok", 1.3, "ns");
	printf("  (failed mprotect: over the protected page and the free page above, or the free\n"
	       "   page below and it; the library asks the kernel %s;\n"
	       "   the probe: one mincore() over the range below the records, enough for the second)\n",
	       query ? "with ioctl(PROCMAP_QUERY) about the records' pages only"
		     : "by reading /proc/self/maps: the kernel lacks PROCMAP_QUERY");
	for (int k = 0; k < 8; k++) {
		/* Paths: query (default), probe then read, read alone. */
		static const char *const kinds[2] = { "fail", "below" };
		static const char *const what[2] = { "above", "below" };
		static const enum child_id by[4] = { C_OPS_LIB, C_OPS_PROBE, C_OPS_PROBE, C_OPS_READ };
		int path = k / 2, kind = k % 2;
		enum child_id c = by[path];
		char key[32], vkey[32], label[64], extra[128];

		if (path == 1 && kind == 0)
			continue;	/* the probe cannot tell: read, as below */
		if (path == 2 && kind == 1)
			continue;
		for (int i = 0; i < 3; i++) {
			const char *how = path == 0 ? (kind ? "probe" : query ? "query" : "read")
					: path == 1 ? "probe" : path == 2 ? "probe, then read"
					: "read alone";

			snprintf(key, sizeof(key), "ops.%s.%d", kinds[kind], i);
			snprintf(vkey, sizeof(vkey), "ops.fail.%d.vmas", i);
			snprintf(label, sizeof(label), "%sfailed mprotect x2, free page %s, %s",
				 path ? "  ... " : "", what[kind],
				 params.quick ? "(quick)" : fail_labels[i]);
			snprintf(extra, sizeof(extra), "%s; %.0f VMAs below%s", how,
				 ops_value(c, vkey).med,
				 c == C_OPS_PROBE ? "; NSB_TEST_MAPS=probe"
				 : c == C_OPS_READ ? "; NSB_TEST_MAPS=read" : "");
			row(label, ops_value(c, key).med, "ns", ops_ratio(c, key, key), "no library",
			    path == 0 ? 2 : 0, extra);
		}
	}
	for (int i = 0; i < 2; i++) {
		static const char *const names[] = { "4k", "clipped" };
		static const char *const labels[] = { "hostile frame, 3840x2160 read whole",
						      "hostile frame, 8192-wide clipped" };
		char key[48], base[48], nkey[64], extra[128];
		double v[MAX_ROUNDS];

		snprintf(key, sizeof(key), "ops.frame.%s.hostile", names[i]);
		snprintf(base, sizeof(base), "ops.frame.%s.legit", names[i]);
		snprintf(nkey, sizeof(nkey), "n.%s", key);
		for (int r = 0; r < rounds; r++)
			v[r] = (get(r, C_OPS_LIB, key) + get(r, C_OPS_LIB2, key)) /
			       (get(r, C_OPS_LIB, base) + get(r, C_OPS_LIB2, base));
		snprintf(extra, sizeof(extra), "%.0f signals; not truncated %.2f ms, no library %.2f ms",
			 ops_value(C_OPS_LIB, nkey).med, ops_value(C_OPS_LIB, base).med,
			 ops_value(C_OPS_NOLIB, base).med);
		row(labels[i], ops_value(C_OPS_LIB, key).med, "ms", summarise(v), "not truncated",
		    1.2, extra);
		/* The same with every fill anonymous (no zero file): against
		 * its own process's legitimate frame in the same round. */
		for (int r = 0; r < rounds; r++)
			v[r] = get(r, C_OPS_POPULATE, key) / get(r, C_OPS_POPULATE, base);
		snprintf(extra, sizeof(extra), "%.0f signals; NSB_TEST_ZERO_FILE=off",
			 ops_value(C_OPS_POPULATE, nkey).med);
		row("  ... anonymous fill (no zero file)", ops_value(C_OPS_POPULATE, key).med, "ms",
		    summarise(v), "not truncated", 1.2, extra);
	}
}

/* Loading the library costs what loading an empty one costs (SPEC §9). */
static void
print_startup(void)
{
	char title[PATH_MAX + 256], extra[64];
	const char *prog = strrchr(true_path, '/');

	snprintf(title, sizeof(title),
		 "Start-up: %s (does nothing) started %zu times per round under each preload,\n"
		 "taking turns in one process; median wall time per process start",
		 prog ? prog + 1 : true_path, params.startup_n);
	section(title);
	snprintf(extra, sizeof(extra), "CPU time: %.3fx",
		 med_ratio(C_STARTUP, "startup.cpu.none", "startup.cpu.empty").med);
	row("no preload", med_value(C_STARTUP, "startup.none").med, "us",
	    med_ratio(C_STARTUP, "startup.none", "startup.empty"), "empty library", 0, extra);
	row("LD_PRELOAD=empty library (unit)", med_value(C_STARTUP, "startup.empty").med, "us",
	    no_ratio, "", 0, NULL);
	snprintf(extra, sizeof(extra), "CPU time: %.3fx",
		 med_ratio(C_STARTUP, "startup.cpu.library", "startup.cpu.empty").med);
	row("LD_PRELOAD=libnosigbus", med_value(C_STARTUP, "startup.library").med, "us",
	    med_ratio(C_STARTUP, "startup.library", "startup.empty"), "empty library", 1.03, extra);
	/* The wrapper (issue 23): at most 5 ms of CPU over env LD_PRELOAD=. */
	if (isnan(med_value(C_STARTUP, "startup.cpu.wrapper").med))
		return;
	row("env LD_PRELOAD=libnosigbus true (unit)", med_value(C_STARTUP, "startup.env").med, "us",
	    no_ratio, "", 0, NULL);
	{
		double over = (med_value(C_STARTUP, "startup.cpu.wrapper").med -
			       med_value(C_STARTUP, "startup.cpu.env").med) / 1e3;

		snprintf(extra, sizeof(extra), "CPU time: %.2fx, %+.2f ms (<=5 ms %s)",
			 med_ratio(C_STARTUP, "startup.cpu.wrapper", "startup.cpu.env").med, over,
			 over <= 5 ? "ok" : "MISS");
	}
	row("nosigbus true (the wrapper)", med_value(C_STARTUP, "startup.wrapper").med, "us",
	    med_ratio(C_STARTUP, "startup.wrapper", "startup.env"), "env LD_PRELOAD", 0, extra);
}

/* One call over a region of many VMAs, with the table lock held and
 * signals blocked: it must not take seconds (issue 10). */
static void
print_protect(void)
{
	double vmas = med_value(C_PROTECT, "protect.vmas").med;
	bool slow = false;
	char label[64];

	for (int r = 0; r < rounds; r++)
		slow |= results[r][C_PROTECT].timed_out;
	section("nosigbus_protect(): one call over a memfd mapping split into many VMAs");
	snprintf(label, sizeof(label), "%.0f VMAs", isnan(vmas) ? (double)params.protect_vmas : vmas);
	if (slow) {
		char extra[64];

		snprintf(extra, sizeof(extra), "still running after %d s: killed", PROTECT_LIMIT_S);
		targets_missed++;
		line(label, NAN, "ms", no_ratio, "", "<1000 ms", "MISS", NULL, extra);
		return;
	}
	line(label, med_value(C_PROTECT, "protect.ms").med, "ms", no_ratio, "", "<1000 ms",
	     judge(med_value(C_PROTECT, "protect.ms").med, 1000), NULL, NULL);
}

static void
print_memory(void)
{
	struct stat3 bytes = med_value(C_SCALE, "mem.bytes");
	char extra[64];

	section("Memory: growth of anonymous memory (smaps_rollup) per untouched protected mapping");
	snprintf(extra, sizeof(extra), "%.0f records", med_value(C_SCALE, "mem.records").med);
	line("table per protected mapping", bytes.med, "B", no_ratio, "", "<=64 B",
	     judge(bytes.med, 64), NULL, extra);
}

/* What the first frame after a client truncates its 4K buffer costs. */
static void
print_compositor(void)
{
	double pages = med_value(C_PAGE, "compositor.pages").med;

	section("Compositor: reading a truncated 3840x2160x4 buffer once (the first frame after truncation)");
	printf("  %.0f bytes = %.0f pages%s: NOSIGBUS_FILL=page %.2f ms, range %.2f ms, auto %.2f ms%s,\n"
	       "  fresh anonymous memory %.2f ms; one frame at 60 Hz is 16.67 ms\n",
	       pages * (double)page, pages, params.quick ? " (--quick: not 4K)" : "",
	       med_value(C_PAGE, "compositor").med,
	       med_value(C_RANGE, "compositor").med, med_value(C_AUTO, "compositor").med,
	       ignored(C_AUTO) ? " (the library ignored auto)" : "",
	       med_value(C_PAGE, "compositor.base").med);
}

/* ---- the machine ------------------------------------------------------ */

static void
cpu_model(char *buf, size_t size)
{
	static const char *const keys[] = { "model name", "Hardware", "cpu model", "Model", "cpu" };
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(buf, size, "unknown CPU");
	if (!f)
		return;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		rewind(f);
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');
			size_t kl = strlen(keys[k]);

			if (!colon || strncmp(line, keys[k], kl) ||
			    (line[kl] != ' ' && line[kl] != '\t' && line[kl] != ':'))
				continue;
			colon += 1 + strspn(colon + 1, " \t");
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(buf, size, "%s", colon);
			fclose(f);
			return;
		}
	}
	fclose(f);
}

static void
read_first_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");

	snprintf(buf, size, "unknown");
	if (!f)
		return;
	if (fgets(buf, (int)size, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static void
print_header(void)
{
	char cpu[256], date[64], thp[128];
	struct utsname u;
	time_t now = time(NULL);

	uname(&u);
	cpu_model(cpu, sizeof(cpu));
	read_first_line("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof(thp));
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	printf("libnosigbus %s benchmark, %s\n", NSB_VERSION, date);
	printf("machine: %s, %s, %ld CPUs, Linux %s\n", u.machine, cpu,
	       sysconf(_SC_NPROCESSORS_ONLN), u.release);
	printf("setup:   %zu MiB mappings (%zu pages of %zu B), %d round%s%s; THP %s\n",
	       params.size >> 20, params.size / page, page, rounds, rounds == 1 ? "" : "s",
	       params.quick ? " (--quick)" : "", thp);
	printf("figures: medians over rounds.  ratio: median over rounds of figure / its baseline\n"
	       "         in the same process and round; min-max: the ratio's spread over rounds\n"
	       "floor:   where there is one, the figure against the minimal handler of the same\n"
	       "         round (each over its own process's baseline), with its own target\n");
	printf("\n  %-38s %9s %-8s %7s %-11s %-16s %-7s %-4s %7s %-7s %-4s %s\n", "measurement",
	       "median", "unit", "ratio", "min-max", "against", "target", "met", "floor", "target",
	       "met", "notes");
}

/* ---- options ---------------------------------------------------------- */

/* path, or name in the directory of this program; resolved into out. */
static bool
find_beside(const char *path, const char *name, char *out)
{
	char self[PATH_MAX], want[PATH_MAX + 64];
	ssize_t n;

	if (!path) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0) {
			perror("nsb-bench: /proc/self/exe");
			return false;
		}
		self[n] = '\0';
		*strrchr(self, '/') = '\0';
		snprintf(want, sizeof(want), "%s/%s", self, name);
		path = want;
	}
	if (!realpath(path, out)) {
		fprintf(stderr, "nsb-bench: %s: %s (see --empty and --true)\n", path, strerror(errno));
		return false;
	}
	return true;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: nsb-bench [--quick] [--ops] [--rounds N] [--size MIB] [--preload PATH]\n"
		"                 [--empty PATH] [--true PATH]\n"
		"Measures libnosigbus against the kernel's own page faults and prints a table.\n"
		"  --quick         1 round, 1 MiB, small counts (a smoke test, not a measurement)\n"
		"  --ops           only the mapping-call rows (mmap, mprotect, recvmsg, frames)\n"
		"  --rounds N      rounds of every measurement (default 7)\n"
		"  --size MIB      size of each measured mapping (default 64; random page-by-page\n"
		"                  rescues of more than ~120 MiB reach vm.max_map_count)\n"
		"  --preload PATH  the library (default: $NSB_PRELOAD)\n"
		"  --empty PATH    an empty library, for the start-up figure\n"
		"                  (default: libnsb-empty.so next to this program)\n"
		"  --true PATH     a program that does nothing, for the start-up figure\n"
		"                  (default: nsb-true next to this program)\n");
}

static long
number(const char *s, const char *what, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "nsb-bench: %s must be a number from %ld to %ld\n", what, lo, hi);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	enum { OPT_CHILD = 256, OPT_SIZE_BYTES, OPT_ROUND, OPT_EMPTY, OPT_TRUE };
	static const struct option longopts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "ops", no_argument, NULL, 'o' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "preload", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "child", required_argument, NULL, OPT_CHILD },
		{ "size-bytes", required_argument, NULL, OPT_SIZE_BYTES },
		{ "round", required_argument, NULL, OPT_ROUND },
		{ "empty", required_argument, NULL, OPT_EMPTY },
		{ "true", required_argument, NULL, OPT_TRUE },
		{ NULL, 0, NULL, 0 },
	};
	const char *child = NULL, *lib = getenv("NSB_PRELOAD"), *empty = NULL, *prog = NULL;
	long size_mib = -1, size_bytes = -1;
	bool quick = false;
	int opt;

	page = (size_t)sysconf(_SC_PAGESIZE);
	while ((opt = getopt_long(argc, argv, "qor:s:p:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			ops_only = true;
			break;
		case 'q':
			quick = true;
			break;
		case 'r':
			rounds = (int)number(optarg, "--rounds", 1, MAX_ROUNDS);
			break;
		case 's':
			size_mib = number(optarg, "--size", 1, 4096);
			break;
		case 'p':
			lib = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_CHILD:
			child = optarg;
			break;
		case OPT_SIZE_BYTES:
			size_bytes = number(optarg, "--size-bytes", 1, LONG_MAX);
			break;
		case OPT_ROUND:
			params.round = (int)number(optarg, "--round", 0, MAX_ROUNDS);
			break;
		case OPT_EMPTY:
			empty = optarg;
			break;
		case OPT_TRUE:
			prog = optarg;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	bench_params_init(&params, quick);
	if (quick) {
		rounds = 1;
		if (size_mib < 0)
			size_mib = 1;
	}
	params.size = size_bytes > 0 ? (size_t)size_bytes
				     : (size_t)(size_mib > 0 ? size_mib : 64) << 20;
	if (child) {
		params.library = lib;
		params.empty = empty;
		params.program = prog;
		return bench_child(child, &params);
	}

	if (!lib || !*lib) {
		printf("SKIP: no library to measure: set NSB_PRELOAD or pass --preload PATH\n");
		return 77;
	}
	if (!realpath(lib, preload)) {
		fprintf(stderr, "nsb-bench: %s: %s\n", lib, strerror(errno));
		return 1;
	}
	if (!find_beside(empty, "libnsb-empty.so", empty_path) ||
	    !find_beside(prog, "nsb-true", true_path))
		return 1;

	run_rounds(argv[0]);
	print_header();
	{
		/* The rows against their exact floors, and the costs outside
		 * single calls (report.c): their own children and rounds. */
		struct bench_exact_args ea = { argv[0], &params, rounds, ops_only, preload,
					       empty_path, true_path };

		if (bench_exact(&ea, &targets_met, &targets_missed))
			failed = true;
	}
	if (ops_only) {
		print_ops();
		goto done;
	}
	section("Baseline: first-touch faults on fresh anonymous private memory (madvise NOHUGEPAGE)");
	{
		static const char *const keys[] = { "base.read.seq", "base.write.seq",
						     "base.read.rand", "base.write.rand" };
		static const char *const labels[] = { "read, sequential (zero page)", "write, sequential",
						      "read, random", "write, random" };
		for (int i = 0; i < 4; i++)
			row(labels[i], med_value(C_PAGE, keys[i]).med, "ns/page", no_ratio, "", 0,
			    "measured next to each rescue");
	}
	print_rescues(C_PAGE, "page", 12, 6.5, 1.15);
	print_rescues(C_RANGE, "range", 1.15, 1.15, 0);
	print_rescues(C_AUTO, "auto", 0, 0, 0);
	print_floor();
	print_auto();
	print_eof_check();
	print_scale();
	print_interposition();
	print_startup();
	print_protect();
	print_ops();
	print_memory();
	print_compositor();
done:
	printf("\ntargets (informational, never a failure): %d met, %d missed\n",
	       targets_met, targets_missed);
	if (failed)
		fprintf(stderr, "nsb-bench: a measuring child failed; its figures are n/a\n");
	return failed ? 1 : 0;
}
