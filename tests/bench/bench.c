/* SPDX-License-Identifier: MIT */
/*
 * bench.c - the benchmark driver: runs every configuration in child
 * processes, round after round, and prints one table of medians.
 *
 *   nsb-bench [--quick] [--rounds N] [--size MIB] [--preload PATH]
 *
 * The library comes from --preload or $NSB_PRELOAD.  The fill mode is read
 * from the environment when the library starts, so each configuration is
 * its own child: this program re-executes itself with LD_PRELOAD and
 * NOSIGBUS_FILL set and reads the child's figures from a pipe.  In each
 * round every configuration runs once, in an order that rotates from round
 * to round; the interposition runs alternate with and without the library
 * (ABBA), so that drift of the machine cancels out of their ratio.
 *
 * Timing never fails the run: targets are printed as pass/MISS for
 * information.  The exit status is 1 only when a child failed (a crash is
 * a bug, not a slow machine), 77 when there is no library to measure.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	C_PAGE, C_RANGE, C_SCALE, C_FLOOR,
	C_IP_LIB, C_IP_NOLIB, C_IP_LIB2, C_IP_NOLIB2,
	C_COUNT
};

static const struct child_spec {
	const char *kind;
	bool library;
	const char *fill;	/* NOSIGBUS_FILL, or NULL */
} specs[C_COUNT] = {
	[C_PAGE] = { "rescue", true, "page" },
	[C_RANGE] = { "rescue", true, "range" },
	[C_SCALE] = { "scale", true, "page" },
	[C_FLOOR] = { "floor", false, NULL },
	[C_IP_LIB] = { "interpose", true, NULL },
	[C_IP_NOLIB] = { "interpose", false, NULL },
	[C_IP_LIB2] = { "interpose", true, NULL },
	[C_IP_NOLIB2] = { "interpose", false, NULL },
};

struct result {
	bool ok;
	int n;
	struct {
		char key[48];
		double v;
	} kv[MAX_KEYS];
};

static struct result results[MAX_ROUNDS][C_COUNT];
static int rounds = 7;
static struct bench_params params;
static char preload[PATH_MAX];
static size_t page;
static bool failed;

/* ---- running the children --------------------------------------------- */

/* The environment of a child: ours without any preload or NOSIGBUS_*
 * setting, plus those of its configuration. */
static char **
child_env(const struct child_spec *c, char *buf_preload, char *buf_fill)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(*env));
	if (!env) {
		perror("nsb-bench: calloc");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], "NOSIGBUS_", 9))
			env[k++] = environ[i];
	if (c->library) {
		sprintf(buf_preload, "LD_PRELOAD=%s", preload);
		env[k++] = buf_preload;
	}
	if (c->fill) {
		sprintf(buf_fill, "NOSIGBUS_FILL=%s", c->fill);
		env[k++] = buf_fill;
	}
	return env;
}

static void
parse_output(struct result *res, char *text)
{
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strchr(line, ' ');

		if (!sp || res->n == MAX_KEYS || (size_t)(sp - line) >= sizeof(res->kv[0].key))
			continue;
		memcpy(res->kv[res->n].key, line, (size_t)(sp - line));
		res->kv[res->n].key[sp - line] = '\0';
		res->kv[res->n].v = strtod(sp + 1, NULL);
		res->n++;
	}
}

static void
run_child(enum child_id id, int round, const char *self)
{
	const struct child_spec *c = &specs[id];
	struct result *res = &results[round][id];
	char size_arg[32], round_arg[32], buf_preload[PATH_MAX + 16], buf_fill[64];
	const char *argv[10];
	char out[16384];
	size_t len = 0;
	ssize_t n;
	int fds[2], status, a = 0;
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
	argv[a] = NULL;

	env = child_env(c, buf_preload, buf_fill);
	if (pipe2(fds, O_CLOEXEC) < 0) {
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
		execve("/proc/self/exe", (char *const *)argv, env);
		perror("nsb-bench: execve /proc/self/exe");
		_exit(127);
	}
	free(env);
	close(fds[1]);
	while ((n = read(fds[0], out + len, sizeof(out) - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || len + (size_t)n >= sizeof(out) - 1)
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
	res->ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (!res->ok) {
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
	parse_output(res, out);
}

static void
run_rounds(const char *self)
{
	static const enum child_id main_kinds[] = { C_FLOOR, C_PAGE, C_RANGE, C_SCALE };
	static const enum child_id abba[2][4] = {
		{ C_IP_NOLIB, C_IP_LIB, C_IP_LIB2, C_IP_NOLIB2 },
		{ C_IP_LIB, C_IP_NOLIB, C_IP_NOLIB2, C_IP_LIB2 },
	};

	for (int r = 0; r < rounds; r++) {
		double t0 = bench_now();

		fprintf(stderr, "nsb-bench: round %d of %d ...", r + 1, rounds);
		for (int k = 0; k < 4; k++) {
			run_child(main_kinds[(k + r) % 4], r, self);
			run_child(abba[r % 2][k], r, self);
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

/*
 * One line: label, median figure, ratio with its spread over rounds, what
 * the ratio is against, the target and its mark, notes.
 */
static void
line(const char *label, double value, const char *unit, struct stat3 ratio,
     const char *against, const char *target, const char *mark, const char *extra)
{
	char rbuf[16] = "", sbuf[32] = "";

	/* Three decimals near 1, where the targets are a few percent. */
	if (!isnan(ratio.med) && ratio.max < 2) {
		snprintf(rbuf, sizeof(rbuf), "%.3fx", ratio.med);
		snprintf(sbuf, sizeof(sbuf), "%.3f-%.3f", ratio.min, ratio.max);
	} else if (!isnan(ratio.med)) {
		snprintf(rbuf, sizeof(rbuf), "%.2fx", ratio.med);
		snprintf(sbuf, sizeof(sbuf), "%.2f-%.2f", ratio.min, ratio.max);
	}
	if (isnan(value))
		printf("  %-38s %9s %-8s", label, "n/a", unit);
	else
		printf("  %-38s %9.1f %-8s", label, value, unit);
	printf(" %7s %-11s %-16s %-7s %-4s %s\n", rbuf, sbuf, against, target, mark,
	       extra ? extra : "");
}

/* A line whose target (limit > 0; none otherwise) applies to the ratio. */
static void
row(const char *label, double value, const char *unit, struct stat3 ratio,
    const char *against, double limit, const char *extra)
{
	char tbuf[16] = "";
	const char *mark = "";

	if (limit > 0) {
		snprintf(tbuf, sizeof(tbuf), "<=%gx", limit);
		mark = judge(ratio.med, limit);
	}
	line(label, value, unit, ratio, against, tbuf, mark, extra);
}

static const char *
order_label(const char *o)
{
	return !strcmp(o, "seq") ? "sequential" : "random";
}

static void
print_rescues(enum child_id id, const char *fill, double read_limit, double write_limit)
{
	static const char *const maps[] = { "private", "shared" };
	static const char *const accesses[] = { "read", "write" };
	static const char *const orders[] = { "seq", "rand" };
	char title[256];

	snprintf(title, sizeof(title),
		 "Rescue, NOSIGBUS_FILL=%s: memfd mapped MAP_NOSIGBUS, truncated to 0, one touch per page",
		 fill);
	section(title);
	for (int m = 0; m < 2; m++)
		for (int o = 0; o < 2; o++)
			for (int a = 0; a < 2; a++) {
				char key[48], base[48], nkey[64], label[64], against[32], extra[64];
				struct stat3 signals, lost;

				snprintf(key, sizeof(key), "%s.%s.%s", maps[m], accesses[a], orders[o]);
				snprintf(base, sizeof(base), "base.%s.%s", accesses[a], orders[o]);
				snprintf(label, sizeof(label), "MAP_%s %-5s %s", m ? "SHARED " : "PRIVATE",
					 accesses[a], order_label(orders[o]));
				snprintf(against, sizeof(against), "anon %s %s", accesses[a], orders[o]);
				snprintf(nkey, sizeof(nkey), "n.%s", key);
				signals = med_value(id, nkey);
				snprintf(nkey, sizeof(nkey), "lost.%s", key);
				lost = med_value(id, nkey);
				if (!isnan(lost.max) && lost.max > 0)
					snprintf(extra, sizeof(extra), "%.0f signals, %.0f WRITES LOST",
						 signals.med, lost.max);
				else
					snprintf(extra, sizeof(extra), "%.0f signals", signals.med);
				row(label, med_value(id, key).med, "ns/page", med_ratio(id, key, base),
				    against, a ? write_limit : read_limit, extra);
			}
}

static void
print_floor(void)
{
	static const char *const accesses[] = { "read", "write" };
	static const char *const orders[] = { "seq", "rand" };
	const struct stat3 none = { NAN, NAN, NAN };

	section("Floor, no library: what any user-space rescue pays (minimal handler: one mmap)");
	row("failed fault + SIGBUS + sigreturn", med_value(C_FLOOR, "signal").med, "ns/page",
	    med_ratio(C_FLOOR, "signal", "base.read.seq"), "anon read seq", 0, NULL);
	row("mmap(MAP_FIXED) of one anon page", med_value(C_FLOOR, "mmap").med, "ns/page",
	    med_ratio(C_FLOOR, "mmap", "base.read.seq"), "anon read seq", 0, NULL);
	for (int o = 0; o < 2; o++)
		for (int a = 0; a < 2; a++) {
			char key[64], base[64], lkey[64], label[64], against[32], extra[64];
			double lib, min;

			snprintf(key, sizeof(key), "minimal.%s.%s", accesses[a], orders[o]);
			snprintf(base, sizeof(base), "base.%s.%s", accesses[a], orders[o]);
			snprintf(lkey, sizeof(lkey), "private.%s.%s", accesses[a], orders[o]);
			snprintf(label, sizeof(label), "minimal rescue %-5s %s", accesses[a],
				 order_label(orders[o]));
			snprintf(against, sizeof(against), "anon %s %s", accesses[a], orders[o]);
			lib = med_value(C_PAGE, lkey).med;
			min = med_value(C_FLOOR, key).med;
			snprintf(extra, sizeof(extra), "page fill MAP_PRIVATE: %+.0f ns", lib - min);
			row(label, min, "ns/page", med_ratio(C_FLOOR, key, base), against, 0, extra);
		}
	row("anon read fault, sequential (unit)", med_value(C_FLOOR, "base.read.seq").med,
	    "ns/page", none, "", 0, NULL);
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

static void
print_memory(void)
{
	const struct stat3 none = { NAN, NAN, NAN };
	struct stat3 bytes = med_value(C_SCALE, "mem.bytes");
	char extra[64];

	section("Memory: growth of anonymous memory (smaps_rollup) per untouched protected mapping");
	snprintf(extra, sizeof(extra), "%.0f records", med_value(C_SCALE, "mem.records").med);
	line("table per protected mapping", bytes.med, "B", none, "", "<=64 B",
	     judge(bytes.med, 64), extra);
}

/* What the first frame after a client truncates its 4K buffer costs. */
static void
print_compositor(void)
{
	const double bytes = 3840.0 * 2160 * 4;
	double pages = ceil(bytes / (double)page);
	double pf = med_value(C_PAGE, "private.read.seq").med;
	double rf = med_value(C_RANGE, "private.read.seq").med;
	double base = med_value(C_PAGE, "base.read.seq").med;

	section("Compositor: reading a truncated 3840x2160x4 buffer once (the first frame after truncation)");
	printf("  %.0f bytes = %.0f pages: NOSIGBUS_FILL=page %.2f ms, NOSIGBUS_FILL=range %.2f ms,\n"
	       "  fresh anonymous memory %.2f ms; one frame at 60 Hz is 16.67 ms\n",
	       bytes, pages, pf * pages / 1e6, rf * pages / 1e6, base * pages / 1e6);
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
	       "         in the same process and round; min-max: the ratio's spread over rounds\n");
	printf("\n  %-38s %9s %-8s %7s %-11s %-16s %-7s %-4s %s\n", "measurement", "median", "unit",
	       "ratio", "min-max", "against", "target", "met", "notes");
}

/* ---- options ---------------------------------------------------------- */

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: nsb-bench [--quick] [--rounds N] [--size MIB] [--preload PATH]\n"
		"Measures libnosigbus against the kernel's own page faults and prints a table.\n"
		"  --quick         1 round, 1 MiB, small counts (a smoke test, not a measurement)\n"
		"  --rounds N      rounds of every measurement (default 7)\n"
		"  --size MIB      size of each measured mapping (default 64; random page-by-page\n"
		"                  rescues of more than ~120 MiB reach vm.max_map_count)\n"
		"  --preload PATH  the library (default: $NSB_PRELOAD)\n");
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
	enum { OPT_CHILD = 256, OPT_SIZE_BYTES, OPT_ROUND };
	static const struct option longopts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "preload", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "child", required_argument, NULL, OPT_CHILD },
		{ "size-bytes", required_argument, NULL, OPT_SIZE_BYTES },
		{ "round", required_argument, NULL, OPT_ROUND },
		{ NULL, 0, NULL, 0 },
	};
	const char *child = NULL, *lib = getenv("NSB_PRELOAD");
	long size_mib = -1, size_bytes = -1;
	bool quick = false;
	int opt;

	page = (size_t)sysconf(_SC_PAGESIZE);
	while ((opt = getopt_long(argc, argv, "qr:s:p:h", longopts, NULL)) != -1) {
		switch (opt) {
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
	if (child)
		return bench_child(child, &params);

	if (!lib || !*lib) {
		printf("SKIP: no library to measure: set NSB_PRELOAD or pass --preload PATH\n");
		return 77;
	}
	if (!realpath(lib, preload)) {
		fprintf(stderr, "nsb-bench: %s: %s\n", lib, strerror(errno));
		return 1;
	}

	run_rounds(argv[0]);
	print_header();
	section("Baseline: first-touch faults on fresh anonymous private memory (madvise NOHUGEPAGE)");
	{
		static const char *const keys[] = { "base.read.seq", "base.write.seq",
						     "base.read.rand", "base.write.rand" };
		static const char *const labels[] = { "read, sequential (zero page)", "write, sequential",
						      "read, random", "write, random" };
		const struct stat3 none = { NAN, NAN, NAN };

		for (int i = 0; i < 4; i++)
			row(labels[i], med_value(C_PAGE, keys[i]).med, "ns/page", none, "", 0,
			    "measured next to each rescue");
	}
	print_rescues(C_PAGE, "page", 12, 6.5);
	print_rescues(C_RANGE, "range", 1.15, 1.15);
	print_floor();
	print_scale();
	print_interposition();
	print_memory();
	print_compositor();
	printf("\ntargets (informational, never a failure): %d met, %d missed\n",
	       targets_met, targets_missed);
	if (failed)
		fprintf(stderr, "nsb-bench: a measuring child failed; its figures are n/a\n");
	return failed ? 1 : 0;
}
