/* SPDX-License-Identifier: MIT */
/*
 * A call that splits a record succeeds at a tight RLIMIT_AS with the
 * table full, as without the library (SPEC §12: RLIMIT_AS never turns a
 * call that would succeed into a failure).  The kernel splits a VMA
 * without address space; the library's table needs room for the pieces,
 * and where its chunks were full and no memory could be had it refused
 * the call with ENOMEM before making it.
 *
 * How the table gets full: a protected mapping of an empty memfd of
 * PAGES pages, RLIMIT_AS set to what the process uses (and what stdio
 * gave back taken, a page at a time), then mprotect of pages 1, 3, 5 ...:
 * two more records each, until the table has no room and a split loses
 * protection (nosigbus_get_stats' lost) - or, before the fix, mprotect
 * failed with ENOMEM.  Then, each in a window of three pages of the
 * mapping's last record, the table filled again before each (a call
 * that gives address space back gives the table room):
 * mprotect, munmap, mmap(MAP_FIXED) of anonymous
 * memory, mremap (MREMAP_FIXED onto a page of our own, mapped raw
 * before the limit) and
 * madvise(MADV_DONTDUMP) of the middle page.  Each must succeed with
 * errno untouched (a call refused is made again raw: the kernel allows
 * it).  Then every page of the window, and the destination, is probed in
 * a child that raises its RLIMIT_AS: a page still recorded is rescued
 * with the protection /proc/self/maps shows for it in the parent; one
 * whose protection was lost dies of SIGBUS; where nothing is, or
 * anonymous memory is, no record may be (an empty memfd mapped there
 * raw dies of SIGBUS).
 *
 * The scenario runs in a child with a SIGKILL watchdog, its stderr kept:
 * empty without NOSIGBUS_LOG, and with NOSIGBUS_LOG=1 (run again, by
 * re-executing) one line saying protection was lost.
 */
#include <sys/resource.h>

#include "core.h"

#define PAGES 32768
#define LOST_LINE "no memory for the records of a mapping a call split"

static size_t ps;
static int fails;

static void __attribute__((format(printf, 1, 2)))
failed(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("FAIL: ", stdout);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	fails++;
}

/* In a probe child: the limit raised, so that a rescue or the raw probe
 * finds address space (the records are the parent's, inherited). */
static void
unlimit(void)
{
	struct rlimit rl;

	core_no_core();
	if (getrlimit(RLIMIT_AS, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_AS, &rl);
	}
}

struct probe {
	char *p;
	char perms[4];	/* rwx as the parent's maps show the page */
};

/* Reads the page (past the end of the empty file): rescued by a record,
 * the new page must have the protection the kernel showed. */
static void
read_fn(void *arg)
{
	struct probe *pr = arg;
	const char *l;

	unlimit();
	(void)*(volatile char *)pr->p;
	l = core_maps_line(pr->p);
	l = strchr(l, ' ');
	if (!l || strncmp(l + 1, pr->perms, 3) != 0) {
		printf("the page at %p was rescued as %.4s, the kernel showed %s\n", (void *)pr->p,
		       l ? l + 1 : "(nothing)", pr->perms);
		_exit(4);
	}
	_exit(0);
}

/* An empty memfd mapped raw over the page, and read: no record may be
 * there. */
static void
raw_fn(void *arg)
{
	struct probe *pr = arg;
	int fd;

	unlimit();
	fd = memfd_create("core-splitroom-probe", MFD_CLOEXEC);
	if (fd < 0 || (void *)syscall(SYS_mmap, pr->p, ps, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) !=
			      (void *)pr->p)
		_exit(5);
	(void)*(volatile char *)pr->p;
	_exit(3);
}

/* The page at p as recorded: rescued with the kernel's protection, or
 * (protection lost, counted) not rescued. */
static void
expect_kept_or_lost(char *p, const char *what)
{
	const char *l = strchr(core_maps_line(p), ' ');
	struct probe pr = { p, "" };
	int status;

	if (!l) {
		failed("%s: nothing mapped at %p", what, (void *)p);
		return;
	}
	memcpy(pr.perms, l + 1, 3);
	status = nsbt_run(read_fn, &pr);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS && core_stats().lost > 0) {
		printf("%s: the page at %p lost its protection\n", what, (void *)p);
		return;
	}
	failed("%s: a read of %p (%s) past the end of the file: %s", what, (void *)p, pr.perms,
	       nsbt_status_str(status));
}

static void
expect_no_record(char *p, const char *what)
{
	struct probe pr = { p, "" };
	int status = nsbt_run(raw_fn, &pr);

	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGBUS)
		failed("%s: an empty memfd mapped raw at %p and read: %s (a record is left there)",
		       what, (void *)p, nsbt_status_str(status));
}

enum call { MPROTECT, MUNMAP, MMAP_FIXED, MREMAP, MADVISE, CALLS };
static const char *const call_name[CALLS] = {
	"mprotect", "munmap", "mmap(MAP_FIXED)", "mremap(MREMAP_FIXED)", "madvise(MADV_DONTDUMP)",
};

/* The call, through the library (raw: straight to the kernel). */
static long
make_call(enum call c, char *m, char *dest, bool raw)
{
	switch (c) {
	case MPROTECT:
		return raw ? syscall(SYS_mprotect, m, ps, PROT_READ) : mprotect(m, ps, PROT_READ);
	case MUNMAP:
		return raw ? syscall(SYS_munmap, m, ps) : munmap(m, ps);
	case MMAP_FIXED: {
		int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
		void *r = raw ? (void *)syscall(SYS_mmap, m, ps, CORE_PROT_RW, fl, -1, 0)
			      : mmap(m, ps, CORE_PROT_RW, fl, -1, 0);

		return r == m ? 0 : -1;
	}
	case MREMAP: {
		int fl = MREMAP_MAYMOVE | MREMAP_FIXED;
		void *r = raw ? (void *)syscall(SYS_mremap, m, ps, ps, fl, dest)
			      : mremap(m, ps, ps, fl, dest);

		return r == dest ? 0 : -1;
	}
	case MADVISE:
		return raw ? syscall(SYS_madvise, m, ps, MADV_DONTDUMP) : madvise(m, ps, MADV_DONTDUMP);
	default:
		return -1;
	}
}

/*
 * Fills the table: mprotect of pages *i, *i + 2 ... of p, two more
 * records each, until one loses protection (the table full: its chunks
 * hold no more and no memory can be had).  False where one fails instead
 * (before the fix), which is a failure where the kernel allows it.
 */
static bool
fill(char *p, size_t *i)
{
	uint64_t lost = core_stats().lost;
	size_t splits = 0;

	for (; *i < PAGES / 2; *i += 2) {
		errno = EDOM;
		if (mprotect(p + *i * ps, ps, PROT_READ) != 0) {
			int err = errno;

			if (syscall(SYS_mprotect, p + *i * ps, ps, PROT_READ) != 0)
				nsbt_skip("the kernel refuses mprotect of page %zu: %s "
					  "(vm.max_map_count?)", *i, strerror(errno));
			failed("mprotect of page %zu (splitting a record) at RLIMIT_AS with the "
			       "table full: %s, although the kernel allows it",
			       *i, strerror(err));
			*i += 2;
			return false;
		}
		if (errno != EDOM)
			failed("mprotect of page %zu succeeded with errno changed to %s", *i,
			       strerror(errno));
		splits++;
		if (core_stats().lost > lost) {
			*i += 2;
			printf("the table full after %zu more splits\n", splits);
			return true;
		}
	}
	nsbt_skip("the table never ran out of room in %d pages (more memory than expected "
		  "under the limit)", PAGES / 2);
}

static void
tight(void)
{
	int fd = nsbt_file(NSBT_MEMFD, 0);
	char *p = core_map(NULL, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	char *end = p + PAGES * ps, *dest = NULL;
	size_t i = 1;

	/* mremap's destination: a page of our own, raw (no record). */
	dest = (char *)syscall(SYS_mmap, NULL, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(dest != MAP_FAILED, "mmap: %s", strerror(errno));
	core_tight_as();
	/* Each call on the middle page of a window of three at the top of
	 * the mapping's last record, one window under the other. */
	for (int c = 0; c < CALLS; c++) {
		char *m = end - (size_t)(3 * c + 2) * ps, *at = m;
		const char *what = call_name[c];
		uint64_t lost;

		/* Full again: the call before may have given memory back. */
		(void)fill(p, &i);
		lost = core_stats().lost;

		errno = EDOM;
		if (make_call((enum call)c, m, dest, false) != 0) {
			int err = errno;

			if (make_call((enum call)c, m, dest, true) == 0)
				failed("%s of a record's middle page at RLIMIT_AS with the table full: "
				       "%s, although the kernel allows it (the library refused "
				       "before making the call)",
				       what, strerror(err));
			else
				printf("%s: the kernel refuses it too (%s): not the library's\n", what,
				       strerror(errno));
			continue;
		}
		if (errno != EDOM)
			failed("%s succeeded with errno changed to %s", what, strerror(errno));
		expect_kept_or_lost(m - ps, what);
		expect_kept_or_lost(m + ps, what);
		if (c == MREMAP) {
			expect_kept_or_lost(dest, what);
			at = NULL;
		}
		if (c == MUNMAP || c == MMAP_FIXED || c == MREMAP)
			expect_no_record(m, what);
		else if (at)
			expect_kept_or_lost(m, what);
		if (!fails)
			printf("ok: %s of a record's middle page at RLIMIT_AS, table full (%s)\n",
			       what, core_stats().lost > lost ? "protection lost" : "records split");
	}
	printf("%llu calls lost protection\n", (unsigned long long)core_stats().lost);
	fflush(stdout);
	if (fails)
		_exit(1);
}

/* Runs tight() in a child whose stderr is kept, under a SIGKILL
 * watchdog; checks how it ended and what it said. */
static void
watched(bool logged)
{
	FILE *err = tmpfile();
	int budget = nsbt_scaled(120), status = 0;
	char buf[4096];
	size_t n;
	pid_t pid;

	NSBT_CHECK(err, "tmpfile: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(fileno(err), 2);
		tight();
		fflush(NULL);
		_exit(0);
	}
	for (int t = 0;; t++) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		NSBT_CHECK(w == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
		if (t >= budget * 10) {
			nsbt_show_stacks(pid);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			nsbt_fail("the scenario did not end in %d s: killed", budget);
		}
		usleep(100000);
	}
	rewind(err);
	n = fread(buf, 1, sizeof(buf) - 1, err);
	buf[n] = 0;
	fclose(err);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		exit(77);	/* the reason is on stdout (nsbt_skip) */
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		nsbt_fail("splitting calls at RLIMIT_AS%s: %s; its stderr:\n%s",
			  logged ? " (NOSIGBUS_LOG=1)" : "", nsbt_status_str(status), buf);
	if (!logged && n)
		nsbt_fail("stderr without NOSIGBUS_LOG is not empty:\n%s", buf);
	if (logged) {
		const char *a = strstr(buf, LOST_LINE);

		if (!a || strstr(a + 1, LOST_LINE))
			nsbt_fail("NOSIGBUS_LOG=1: expected one line '%s ...', stderr:\n%s", LOST_LINE,
				  buf);
	}
	printf("ok: splitting calls at RLIMIT_AS with the table full%s\n",
	       logged ? ", lost protection said once" : ", stderr empty");
}

int
main(int argc, char **argv)
{
	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	ps = nsbt_page();
	if (argc > 1 && strcmp(argv[1], "logged") == 0) {
		watched(true);
		return 0;
	}
	watched(false);
	{
		const char *settings[] = { "NOSIGBUS_LOG=1", "NOSIGBUS_POLICY=flag", NULL };

		int status = core_reexec("logged", settings);

		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			return 77;
		nsbt_expect_exit(status, 0, "the same with NOSIGBUS_LOG=1");
	}
	return 0;
}
