/* SPDX-License-Identifier: MIT */
/*
 * startup.c - loading libnosigbus into a process that never maps anything
 * costs what loading an empty library costs (SPEC §9, issue 13 part 1).
 *
 * Not timed (the benchmark times it): this counts what can be counted
 * exactly, in a process that does nothing (true.c), started once under
 * LD_PRELOAD=empty library and once under LD_PRELOAD=libnosigbus:
 *
 *  1. system calls (strace -f): the library's process makes the same calls,
 *     as many times, as the empty library's, apart from those in allowed[]
 *     with their reason.  A .bss that spills past the data segment's last
 *     file page shows up here too: the loader maps it, one mmap more.
 *  2. dladdr() and dladdr1() calls (spy.c, preloaded before the library):
 *     none.  Each scans a whole symbol table.
 *  3. dlsym lookups of the functions the library interposes (LD_DEBUG=
 *     bindings shows a lookup from the library of a name it defines
 *     itself, which only dlsym(RTLD_NEXT) makes): none.  Each real
 *     function is looked up on its first use.
 *  4. system calls per child a program starts (true.c's spawn mode: fork
 *     and vfork, each then exec, posix_spawn, exec), with and without
 *     handlers of the program's: at most 2 more than under the empty
 *     library, the child's own start-up included.
 *
 * Each part first shows that it can see what it counts (strace traces the
 * empty library's process; the spy counts a dladdr() call made on
 * purpose; LD_DEBUG prints the program's own bindings).  When one cannot,
 * the test is skipped with the reason.
 *
 *   nsb-startup-test EMPTY_SO SPY_SO TRUE_PROGRAM LIBNOSIGBUS_SYMS
 *
 * The library is $NSB_PRELOAD.  Exit 0 pass, 1 fail, 77 skip.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbtest.h"

/* Extra system calls the library may make at start-up, and why. */
static const struct {
	const char *name;
	int extra;
	const char *why;
} allowed[] = {
	{ "rt_sigprocmask", 1,
	  "reads the start-up signal mask once: a SIGBUS blocked across exec is the "
	  "program's, and must be unblocked in the kernel before any rescue (SPEC §6)" },
};

static char tmpdir[] = "/tmp/nsb-startup-XXXXXX";
static int failures;

/* Removes our mkdtemp directory and the plain files in it. */
static void
cleanup(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(tmpdir);
}

static void __attribute__((format(printf, 1, 2)))
fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nsbt_vsay(stderr, "FAIL: ", fmt, ap);
	va_end(ap);
	failures++;
}

/* The whole file, NUL-terminated; "" when it does not exist. */
static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	size_t cap = 65536, len = 0, n;
	char *buf = malloc(cap);

	if (!buf)
		nsbt_fail("out of memory");
	buf[0] = '\0';
	if (!f)
		return buf;
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len - 1 == 0) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				nsbt_fail("out of memory");
		}
	}
	buf[len] = '\0';
	fclose(f);
	return buf;
}

/*
 * Runs argv with exactly the environment envp, stdout to /dev/null and
 * stderr to err_path; returns the wait status.  A child still running
 * after 60 s is killed and the test fails.
 */
static int
run(char *const argv[], char *const envp[], const char *err_path)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	int status, waited = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
		int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 ||
		    dup2(err, STDERR_FILENO) < 0)
			_exit(126);
		/* The PATH searched is ours, not envp's. */
		execvpe(argv[0], argv, envp);
		dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			nsbt_fail("waitpid: %s", strerror(errno));
		if (++waited > 6000) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			nsbt_fail("%s did not finish in 60 s: killed", argv[0]);
		}
		nanosleep(&tick, NULL);
	}
}

static const char *
status_str(int status)
{
	static char buf[64];

	if (WIFEXITED(status))
		snprintf(buf, sizeof(buf), "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "killed by %s", strsignal(WTERMSIG(status)));
	else
		snprintf(buf, sizeof(buf), "status %#x", status);
	return buf;
}

/* ---- 1. system calls ----------------------------------------------------- */

#define MAX_NAMES 128

struct counts {
	int n;
	struct {
		char name[40];
		int count;
	} c[MAX_NAMES];
};

/* The syscall name a strace line starts with ("mmap(" ...), or NULL. */
static const char *
syscall_name(const char *line, char *name, size_t size)
{
	size_t i = 0;

	/* With -f and -o, each line starts with the pid ("1234 mmap(..."). */
	if (isdigit((unsigned char)*line)) {
		line += strspn(line, "0123456789");
		line += strspn(line, " ");
	}
	while ((islower((unsigned char)line[i]) || isdigit((unsigned char)line[i]) ||
		line[i] == '_') && i < size - 1) {
		name[i] = line[i];
		i++;
	}
	if (i == 0 || line[i] != '(')
		return NULL;
	name[i] = '\0';
	return name;
}

static void
count_syscalls(char *trace, struct counts *c)
{
	c->n = 0;
	for (char *line = strtok(trace, "\n"); line; line = strtok(NULL, "\n")) {
		char name[40];
		int i;

		if (!syscall_name(line, name, sizeof(name)))
			continue;
		for (i = 0; i < c->n; i++)
			if (strcmp(c->c[i].name, name) == 0)
				break;
		if (i == c->n) {
			if (c->n == MAX_NAMES)
				nsbt_fail("more than %d different system calls", MAX_NAMES);
			snprintf(c->c[c->n].name, sizeof(c->c[0].name), "%s", name);
			c->c[c->n++].count = 0;
		}
		c->c[i].count++;
	}
}

static int
count_of(const struct counts *c, const char *name)
{
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->c[i].name, name) == 0)
			return c->c[i].count;
	return 0;
}

/* Traces args (a program and its arguments, at most 8) under
 * LD_PRELOAD=preload; returns the trace. */
static char *
trace_args(const char *preload, char *const args[], const char *tag)
{
	char out[256], err[256], env_arg[4096];
	char *argv[16] = { "strace", "-f", "-qq", "-o", out, "-E", env_arg };
	char *envp[] = { NULL };
	int status, n = 7;

	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	snprintf(out, sizeof(out), "%s/%s.trace", tmpdir, tag);
	snprintf(err, sizeof(err), "%s/%s.strace-stderr", tmpdir, tag);
	snprintf(env_arg, sizeof(env_arg), "LD_PRELOAD=%s", preload);
	status = run(argv, envp, err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char *msg = slurp(err);

		if (strcmp(tag, "empty") == 0)
			nsbt_skip("strace cannot trace a process here (%s): %s", status_str(status),
			     msg[0] ? msg : "no message");
		nsbt_fail("strace of %s %s under LD_PRELOAD=%s: %s: %s", args[0],
			  args[1] ? args[1] : "", preload, status_str(status), msg);
	}
	return slurp(out);
}

/* Traces `true` under LD_PRELOAD=preload; returns the trace. */
static char *
trace(const char *preload, const char *program, const char *tag)
{
	char *args[] = { (char *)program, NULL };

	return trace_args(preload, args, tag);
}

/* Every line of the trace that calls name, for the failure message. */
static void
print_calls(const char *trace_text, const char *name)
{
	size_t len = strlen(name);

	for (const char *l = trace_text; *l; ) {
		const char *end = strchr(l, '\n');
		size_t n = end ? (size_t)(end - l) : strlen(l);
		char got[40];

		if (syscall_name(l, got, sizeof(got)) && strlen(got) == len &&
		    strncmp(got, name, len) == 0)
			fprintf(stderr, "    %.*s\n", (int)n, l);
		l += n + (end != NULL);
	}
}

static void
check_syscalls(const char *lib, const char *empty, const char *program)
{
	char *empty_trace = trace(empty, program, "empty");
	char *lib_trace = trace(lib, program, "library");
	char *lib_copy = strdup(lib_trace);
	struct counts e, l;
	bool ok = true;

	if (!lib_copy)
		nsbt_fail("out of memory");
	count_syscalls(empty_trace, &e);
	count_syscalls(lib_copy, &l);
	if (count_of(&e, "execve") != 1)
		nsbt_skip("strace printed no execve for the empty library's process: cannot "
		     "read its output");
	printf("system calls of %s: %d kinds under the empty library\n", program, e.n);
	for (int i = 0; i < l.n; i++) {
		const char *name = l.c[i].name;
		int extra = l.c[i].count - count_of(&e, name), may = 0;
		const char *why = NULL;

		if (extra <= 0)
			continue;
		for (size_t a = 0; a < sizeof(allowed) / sizeof(allowed[0]); a++)
			if (strcmp(allowed[a].name, name) == 0) {
				may = allowed[a].extra;
				why = allowed[a].why;
			}
		if (extra <= may) {
			printf("ok: %d more %s with the library (allowed: %s)\n", extra, name, why);
			continue;
		}
		ok = false;
		fail("%d more %s call%s with the library than with an empty library "
		     "(%d allowed); the library's:", extra, name, extra == 1 ? "" : "s", may);
		print_calls(lib_trace, name);
		if (strcmp(name, "mmap") == 0)
			fprintf(stderr, "  (an anonymous mapping right after the library's own "
				"is its .bss spilling past the data segment's last file page: "
				"see readelf -lW, and nm -S --size-sort for the big ones)\n");
	}
	for (int i = 0; i < e.n; i++)
		if (count_of(&l, e.c[i].name) < e.c[i].count)
			printf("note: %d fewer %s with the library\n",
			       e.c[i].count - count_of(&l, e.c[i].name), e.c[i].name);
	if (ok)
		printf("ok: no system call at start-up that an empty library does not make\n");
	free(empty_trace);
	free(lib_trace);
	free(lib_copy);
}

/* ---- 4. children ---------------------------------------------------------- */

/*
 * What each child a program starts costs, in system calls made under the
 * library and not under the empty one, all processes counted (the child
 * is itself a process that loads the library): at most 2, by fork+exec,
 * vfork+exec, posix_spawn and exec, in a program with and without
 * signal handlers.  A shell pays it for every command it runs.  Each is
 * traced with 4 and with 12 children: the difference over the 8 children
 * more leaves the program's own start-up out.
 */
#define CHILD_CALLS_MAX 2

static const char *const hows[] = { "fork", "vfork", "posix_spawn", "exec" };

/* Counts under preload for `true spawn HOW N HANDLERS true`. */
static void
count_children(const char *preload, const char *program, const char *how, int n,
	       const char *handlers, const char *tag, struct counts *c)
{
	char count[16];
	char *args[] = { (char *)program, "spawn", (char *)how, count, (char *)handlers,
			 (char *)program, NULL };
	char *text;

	snprintf(count, sizeof(count), "%d", n);
	text = trace_args(preload, args, tag);
	count_syscalls(text, c);
	if (count_of(c, "execve") < 1)
		nsbt_skip("strace printed no execve for %s spawn %s: cannot read its output",
			  program, how);
	free(text);
}

static int
total_of(const struct counts *c)
{
	int t = 0;

	for (int i = 0; i < c->n; i++)
		t += c->c[i].count;
	return t;
}

static void
check_children(const char *lib, const char *empty, const char *program)
{
	static struct counts c[2][2];	/* [empty, library][4, 12 children] */
	static const int ns[2] = { 4, 12 };

	for (size_t h = 0; h < sizeof(hows) / sizeof(hows[0]); h++)
		for (int with = 0; with < 2; with++) {
			const char *handlers = with ? "handlers" : "none";
			char names[1024] = "";
			int extra;

			for (int k = 0; k < 2; k++) {
				count_children(empty, program, hows[h], ns[k], handlers, "empty",
					       &c[0][k]);
				count_children(lib, program, hows[h], ns[k], handlers, "library",
					       &c[1][k]);
			}
			extra = (total_of(&c[1][1]) - total_of(&c[0][1])) -
				(total_of(&c[1][0]) - total_of(&c[0][0]));
			/* Which calls: every name either trace has. */
			for (int t = 0; t < 4; t++) {
				const struct counts *in = &c[t / 2][t % 2];

				for (int i = 0; i < in->n; i++) {
					const char *name = in->c[i].name;
					char word[48];
					int d = (count_of(&c[1][1], name) - count_of(&c[0][1], name)) -
						(count_of(&c[1][0], name) - count_of(&c[0][0], name));

					snprintf(word, sizeof(word), " %s %+d", name, d);
					if (d != 0 && !strstr(names, word) &&
					    strlen(names) + strlen(word) < sizeof(names))
						strcat(names, word);
				}
			}
			if (extra > CHILD_CALLS_MAX * (ns[1] - ns[0]))
				fail("%s, %s: %.2f system calls more per child than under an empty "
				     "library (at most %d); over %d children:%s", hows[h],
				     with ? "with handlers" : "no handler",
				     (double)extra / (ns[1] - ns[0]), CHILD_CALLS_MAX,
				     ns[1] - ns[0], names);
			else
				printf("ok: %s, %s: %.2f system calls more per child (at most "
				       "%d); over %d children:%s\n", hows[h],
				       with ? "with handlers" : "no handler",
				       (double)extra / (ns[1] - ns[0]), CHILD_CALLS_MAX,
				       ns[1] - ns[0], names[0] ? names : " none");
		}
}

/* ---- 2. dladdr ----------------------------------------------------------- */

/* Runs program (with arg, when not NULL) under preload; the spy's count. */
static long
spied_dladdr(const char *preload, const char *program, const char *arg, const char *tag)
{
	char err[256], env_preload[4096];
	char *argv[] = { (char *)program, (char *)arg, NULL };
	char *envp[] = { env_preload, NULL };
	const char *line;
	char *text;
	int status;
	long n;

	snprintf(err, sizeof(err), "%s/%s.stderr", tmpdir, tag);
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload);
	status = run(argv, envp, err);
	text = slurp(err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("%s under LD_PRELOAD=%s: %s; stderr: %s", program, preload,
		      status_str(status), text);
	line = strstr(text, "nsb-spy: dladdr calls: ");
	n = line ? strtol(line + 23, NULL, 10) : -1;
	free(text);
	return n;
}

static void
check_dladdr(const char *lib, const char *spy, const char *program)
{
	char both[8192];
	long n;

	n = spied_dladdr(spy, program, "dladdr", "spy-control");
	if (n != 1)
		nsbt_skip("the dladdr spy counted %ld calls of a program that makes one: it cannot "
		     "see dladdr calls here", n);
	snprintf(both, sizeof(both), "%s:%s", spy, lib);
	n = spied_dladdr(both, program, NULL, "spy");
	if (n < 0)
		fail("the dladdr spy did not report in the library's process");
	else if (n > 0)
		fail("the library called dladdr()/dladdr1() %ld times while the process "
		     "started; each scans a whole symbol table", n);
	else
		printf("ok: no dladdr()/dladdr1() call while the process starts\n");
}

/* ---- 3. dlsym lookups ---------------------------------------------------- */

/* The names the library exports, from its version script. */
static char *
exported_names(const char *syms_path)
{
	char *text = slurp(syms_path), *names = calloc(1, strlen(text) + 2);
	size_t len = 1;

	if (!names)
		nsbt_fail("out of memory");
	if (!text[0])
		nsbt_fail("cannot read %s", syms_path);
	names[0] = ' ';
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		size_t n;

		line += strspn(line, " \t");
		n = strspn(line, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		if (n == 0 || line[n] != ';')
			continue;
		memcpy(names + len, line, n);
		len += n;
		names[len++] = ' ';
	}
	names[len] = '\0';
	free(text);
	return names;	/* " mmap munmap ... " */
}

static void
check_lookups(const char *lib, const char *program, const char *syms_path)
{
	char err[256], env_preload[4096], prefix[4200];
	char *argv[] = { (char *)program, NULL };
	char *envp[] = { env_preload, "LD_DEBUG=bindings", NULL };
	char *names = exported_names(syms_path), *text;
	int status, lookups = 0, bindings = 0;
	char others[1024] = "", own[1024] = "";

	snprintf(err, sizeof(err), "%s/bindings.stderr", tmpdir);
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", lib);
	snprintf(prefix, sizeof(prefix), "binding file %s [", lib);
	status = run(argv, envp, err);
	text = slurp(err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("%s under the library with LD_DEBUG=bindings: %s", program,
		      status_str(status));
	if (!strstr(text, "binding file "))
		nsbt_skip("LD_DEBUG=bindings printed no binding: this C library does not say "
		     "which symbols it looks up");
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *sym = strstr(line, "normal symbol `"), *end, word[80];

		if (!strstr(line, prefix) || !sym)
			continue;
		sym += 15;
		end = strchr(sym, '\'');
		if (!end || end - sym >= (long)sizeof(word) - 2)
			continue;
		bindings++;
		snprintf(word, sizeof(word), " %.*s ", (int)(end - sym), sym);
		if (strstr(names, word)) {
			lookups++;
			if (strlen(own) + strlen(word) < sizeof(own))
				strcat(own, word + 1);	/* "name " */
		} else if (strlen(others) + strlen(word) < sizeof(others)) {
			strcat(others, word + 1);
		}
	}
	if (lookups)
		fail("the library looked up %d of its own names while the process started "
		     "(dlsym(RTLD_NEXT)), instead of on their first use: %s", lookups, own);
	else
		printf("ok: no dlsym lookup of a real function while the process starts\n");
	printf("note: %d other symbols bound for the library at start-up: %s\n",
	       bindings - lookups, others);
	free(text);
	free(names);
}

int
main(int argc, char **argv)
{
	const char *lib = getenv("NSB_PRELOAD");
	struct stat st;

	nsbt_on_exit = cleanup;
	if (argc != 5) {
		fprintf(stderr, "usage: %s EMPTY_SO SPY_SO TRUE_PROGRAM LIBNOSIGBUS_SYMS\n",
			argv[0]);
		return 2;
	}
	if (!lib || !*lib || stat(lib, &st) != 0 || !(lib = realpath(lib, NULL)))
		nsbt_fail("NSB_PRELOAD does not name the built library (%s)",
			  getenv("NSB_PRELOAD") ? getenv("NSB_PRELOAD") : "unset");
	/* Absolute paths: a relative LD_PRELOAD costs the loader a getcwd. */
	for (int i = 1; i < argc; i++) {
		char *abs = realpath(argv[i], NULL);

		if (!abs)
			nsbt_fail("%s: %s", argv[i], strerror(errno));
		argv[i] = abs;
	}
	if (!mkdtemp(tmpdir))
		nsbt_fail("mkdtemp: %s", strerror(errno));

	check_syscalls(lib, argv[1], argv[3]);
	check_dladdr(lib, argv[2], argv[3]);
	check_lookups(lib, argv[3], argv[4]);
	check_children(lib, argv[1], argv[3]);

	cleanup();
	if (failures)
		return 1;
	printf("ok: start-up under libnosigbus does what an empty library does\n");
	return 0;
}
