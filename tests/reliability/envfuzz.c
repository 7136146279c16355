/* SPDX-License-Identifier: MIT */
/*
 * envfuzz - NOSIGBUS_* values of any length and content (issue 7, item 6;
 * SPEC §9).  A small probe program runs under the preload with random
 * NOSIGBUS_POLICY, NOSIGBUS_FILL, NOSIGBUS_STRICT and NOSIGBUS_LOG values:
 * valid words, near misses, random printable text, random bytes (newlines,
 * escapes, high bytes) and values up to the kernel's limit for one
 * environment string.  For each run:
 *  - the probe must run and exit 0;
 *  - stderr holds exactly one line per invalid variable, of the shape
 *    "nosigbus: ignoring NOSIGBUS_X=... (expected ...); using DEFAULT",
 *    and nothing else but the rescue log when NOSIGBUS_LOG is a valid "on";
 *  - the probe behaves as the valid values say, and as the default for the
 *    invalid ones: which mappings are protected (policy), how many pages a
 *    rescue replaces (fill), whether MAP_SHARED|MAP_NOSIGBUS is refused
 *    (strict).
 *
 * Usage: envfuzz [--runs N] [--seed N]
 */
#include <inttypes.h>
#include <limits.h>
#include <sys/resource.h>
#include <time.h>

#include "nsbtest.h"

#define NVARS 4
static const char *const var_names[NVARS] = {
	"NOSIGBUS_POLICY", "NOSIGBUS_FILL", "NOSIGBUS_STRICT", "NOSIGBUS_LOG",
};
static const char *const words[NVARS][10] = {
	{ "flag", "shm", "files", NULL },
	{ "page", "range", NULL },
	{ "1", "yes", "true", "on", "0", "no", "false", "off", NULL },
	{ "1", "yes", "true", "on", "0", "no", "false", "off", "pages", NULL },
};
static const int defaults[NVARS] = { 1, 0, 0, 0 };	/* shm, page, 0, 0 */

static size_t ps;
static uint64_t rng;

static uint64_t
rnd64(void)
{
	return nsbt_random(&rng);
}

static int
rnd(int n)
{
	return (int)(rnd64() % (uint64_t)n);
}

/* The value a word stands for: index in words[] for policy/fill, 0/1 for booleans. */
static int
word_value(int var, int i)
{
	return var < 2 ? i : i < 4 || i == 8;	/* 8: LOG=pages */
}

/* -1 when value is not exactly one of the words. */
static int
parse(int var, const char *value)
{
	for (int i = 0; words[var][i]; i++)
		if (strcmp(words[var][i], value) == 0)
			return word_value(var, i);
	return -1;
}

/* Upper case is left out on purpose: the spec does not say whether
 * "FLAG" is valid.  So is the empty value. */
static bool
ambiguous(int var, const char *value)
{
	if (!*value)
		return true;
	for (int i = 0; words[var][i]; i++)
		if (strcasecmp(words[var][i], value) == 0 && strcmp(words[var][i], value) != 0)
			return true;
	return false;
}

static char *
gen_value(int var, char *buf, size_t cap)
{
	int kind = rnd(100), n;
	const char *w;
	int nw = 0;

	while (words[var][nw])
		nw++;
	w = words[var][rnd(nw)];
	if (kind < 25) {
		snprintf(buf, cap, "%s", w);
	} else if (kind < 45) {
		/* Near misses. */
		static const char *const affix[] = { " ", "\n", "x", "=", ";", "\t", "0", "\r", "\xc3\xa9" };
		const char *a = affix[rnd(sizeof(affix) / sizeof(affix[0]))];

		if (rnd(3) == 0)
			snprintf(buf, cap, "%s%s", a, w);
		else if (rnd(2))
			snprintf(buf, cap, "%s%s", w, a);
		else
			snprintf(buf, cap, "%.*s", (int)strlen(w) - 1 > 0 ? (int)strlen(w) - 1 : 1, w);
	} else if (kind < 65) {
		n = 1 + rnd(40);
		for (int i = 0; i < n; i++)
			buf[i] = (char)(32 + rnd(95));
		buf[n] = '\0';
	} else if (kind < 85) {
		/* Bytes, NUL excepted: newlines, escapes, high bytes. */
		n = 1 + rnd(300);
		for (int i = 0; i < n; i++)
			buf[i] = (char)(1 + rnd(255));
		buf[n] = '\0';
	} else {
		/* Long: up to MAX_ARG_STRLEN (32 pages) for "NAME=value". */
		size_t len = (size_t)1 + (size_t)rnd64() % (cap - 64);
		char c = rnd(2) ? 'A' : (char)(1 + rnd(255));

		memset(buf, c, len);
		if (rnd(2))
			memcpy(buf, w, strlen(w));
		buf[len] = '\0';
	}
	return buf;
}

/* ---- the probe (under the preload) --------------------------------------- */

static int (*get_stats)(struct nosigbus_stats *, size_t);

static int
child_read(volatile unsigned char *p)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(*p == 0 ? 0 : 3);
	waitpid(pid, &status, 0);
	return status;
}

static int
probe(int policy, int fill, int strict)
{
	struct rlimit no_core = { 0, 0 };
	struct nosigbus_stats st;
	int mem = nsbt_file(NSBT_MEMFD, 0), disk = nsbt_file(NSBT_DISK, 0), status;
	volatile unsigned char *p;
	void *q;

	setrlimit(RLIMIT_CORE, &no_core);
	NSBT_CHECK(nsbt_have_library(), "the library is not loaded");
	get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");

	/* A flagged mapping is protected whatever the policy; fill decides
	 * how many pages one rescue replaces. */
	p = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NOSIGBUS, mem, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(p[0] == 0, "rescued page not zero");
	NSBT_CHECK(get_stats(&st, sizeof(st)) == 0 && st.rescues == 1, "%" PRIu64 " rescues", st.rescues);
	NSBT_CHECK(st.pages == (fill ? 2u : 1u), "fill=%s: a rescue replaced %" PRIu64 " pages",
		   words[1][fill], st.pages);

	/* Strict refuses a shared flagged mapping. */
	q = mmap(NULL, ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, mem, 0);
	if (strict)
		NSBT_CHECK(q == MAP_FAILED && errno == EINVAL, "strict: MAP_SHARED|MAP_NOSIGBUS: %s",
			   q == MAP_FAILED ? strerror(errno) : "succeeded");
	else
		NSBT_CHECK(q != MAP_FAILED, "not strict: MAP_SHARED|MAP_NOSIGBUS: %s", strerror(errno));

	/* Unflagged: memfd protected from policy shm on, disk files with files. */
	p = mmap(NULL, ps, PROT_READ, MAP_PRIVATE, mem, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap");
	status = child_read(p);
	if (policy >= 1)
		NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			   "policy %s: an unflagged memfd mapping: %s", words[0][policy], nsbt_status_str(status));
	else
		NSBT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
			   "policy flag: an unflagged memfd mapping: %s", nsbt_status_str(status));
	p = mmap(NULL, ps, PROT_READ, MAP_PRIVATE, disk, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap");
	status = child_read(p);
	if (policy == 2)
		NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			   "policy files: an unflagged disk mapping: %s", nsbt_status_str(status));
	else
		NSBT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
			   "policy %s: an unflagged disk mapping: %s", words[0][policy], nsbt_status_str(status));
	return 0;
}

/* ---- the fuzzer ---------------------------------------------------------- */

static bool
starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void
show(const char *what, const char *v)
{
	size_t len = strlen(v);

	printf("    %s (%zu bytes): \"", what, len);
	for (size_t i = 0; i < len && i < 400; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c >= 32 && c < 127 && c != '"' && c != '\\')
			putchar(c);
		else
			printf("\\x%02x", c);
	}
	printf("%s\"\n", len > 400 ? "..." : "");
}

/* One run; returns 0 when everything is as expected. */
static int
fuzz_one(int run, char vals[NVARS][131072], const bool set[NVARS])
{
	int expect[NVARS], pfd[2], status, warnings[NVARS] = { 0 };
	char arg[NVARS][8], *out = NULL, *copy, *line, *save = NULL;
	size_t len = 0, cap = 0;
	const char *problem = NULL;
	char why[256] = "";
	bool bad[NVARS];
	pid_t pid;

	for (int v = 0; v < NVARS; v++) {
		int x = set[v] ? parse(v, vals[v]) : defaults[v];

		bad[v] = set[v] && x < 0;
		expect[v] = x < 0 ? defaults[v] : x;
		snprintf(arg[v], sizeof(arg[v]), "%d", expect[v]);
	}
	NSBT_CHECK(pipe(pfd) == 0, "pipe");
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		static char ld[8192];

		snprintf(ld, sizeof(ld), "%s%s%s", old && *old ? old : "", old && *old ? ":" : "",
			 getenv("NSB_PRELOAD"));
		setenv("LD_PRELOAD", ld, 1);
		for (int v = 0; v < NVARS; v++) {
			if (set[v])
				setenv(var_names[v], vals[v], 1);
			else
				unsetenv(var_names[v]);
		}
		dup2(pfd[1], STDERR_FILENO);
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execl("/proc/self/exe", "envfuzz", "--probe", arg[0], arg[1], arg[2], (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t n;

		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			out = realloc(out, cap);
			NSBT_CHECK(out != NULL, "realloc");
		}
		n = read(pfd[0], out + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(pfd[0]);
	copy = strdup(out);
	NSBT_CHECK(copy != NULL, "strdup");
	while (waitpid(pid, &status, 0) < 0)
		NSBT_CHECK(errno == EINTR, "waitpid");

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(why, sizeof(why), "the probe %s", nsbt_status_str(status));
		problem = why;
	}
	/* Every line: a warning for an invalid variable (once each), or,
	 * with logging on, the rescue log. */
	for (line = strtok_r(out, "\n", &save); line && !problem; line = strtok_r(NULL, "\n", &save)) {
		bool known = false;

		for (int v = 0; v < NVARS; v++) {
			char prefix[64];

			snprintf(prefix, sizeof(prefix), "nosigbus: ignoring %s=", var_names[v]);
			if (starts(line, prefix)) {
				char tail[128];

				/* The fill's default depends on the mapping: "the default". */
				snprintf(tail, sizeof(tail), "; using %s",
					 v == 1 ? "the default" : words[v][v < 2 ? defaults[v] : 4]);
				if (!bad[v] || warnings[v]++ || !strstr(line, tail) || !strstr(line, " (expected ")) {
					snprintf(why, sizeof(why), "an unexpected or second warning for %s",
						 var_names[v]);
					problem = why;
				}
				known = true;
			}
		}
		if (!known && expect[3] && starts(line, "nosigbus: envfuzz[") &&
		    (strstr(line, "]: rescued ") || strstr(line, " rescues, ") ||
		     strstr(line, "]: unmapped ")))
			known = true;
		if (!known && !problem) {
			snprintf(why, sizeof(why), "an unexpected line on stderr: \"%.120s\"", line);
			problem = why;
		}
	}
	for (int v = 0; v < NVARS && !problem; v++) {
		if (bad[v] && warnings[v] != 1) {
			snprintf(why, sizeof(why), "no warning for the invalid %s", var_names[v]);
			problem = why;
		}
	}
	if (problem) {
		printf("FAIL: envfuzz run %d: %s\n", run, problem);
		for (int v = 0; v < NVARS; v++)
			if (set[v])
				show(var_names[v], vals[v]);
		show("the probe's output", copy);
		fflush(stdout);
	}
	free(copy);
	free(out);
	return problem ? 1 : 0;
}

int
main(int argc, char **argv)
{
	static char vals[NVARS][131072];
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	int runs = 300, failed = 0, invalid_total = 0, long_total = 0;

	ps = nsbt_page();
	if (argc == 5 && strcmp(argv[1], "--probe") == 0)
		return probe(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--runs") == 0)
			runs = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 0);
	}
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("envfuzz: seed %" PRIu64 ", %d runs\n", seed, runs);
	rng = seed;
	for (int r = 0; r < runs && failed < 5; r++) {
		bool set[NVARS];

		for (int v = 0; v < NVARS; v++) {
			set[v] = rnd(100) < 80;
			do
				gen_value(v, vals[v], 32 * 4096 - 32);
			while (ambiguous(v, vals[v]));
			invalid_total += set[v] && parse(v, vals[v]) < 0;
			long_total += set[v] && strlen(vals[v]) > 4096;
		}
		failed += fuzz_one(r, vals, set);
	}
	printf("envfuzz: %d runs of the probe, %d invalid values (%d longer than a page), %d failed; "
	       "seed %" PRIu64 "\n", runs, invalid_total, long_total, failed, seed);
	return failed ? 1 : 0;
}
