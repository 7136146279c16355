/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: a vfork child held in the middle of its rescue's reading
 * of the table while another thread of its parent changes the table
 * (ranges.c: reader_enter's ticket slots, the flag vfork_tickets_ever,
 * the writer's drain and vfork_tickets_held).
 *
 * vfork stops only the thread that calls it; the parent's other threads
 * go on in the memory the child shares.  A writer waits for the child's
 * ticket (a slot of its side) before it changes the copy the child may
 * be reading, and before it changes the mapping the child is rescuing.
 * The test, in a child with a watchdog, for each k: a process P traced
 * by the test (PTRACE_TRACEME, PTRACE_O_TRACEVFORK) maps one page of an
 * empty memfd (protected) with PROT_NONE room below it, starts a thread
 * W and vforks; its child C reads the page (a rescue).  The test
 * single-steps C to nsb_ranges_enter's first instruction, k
 * instructions further, and holds it there; it tells W (a shared page)
 * to map 64 protected one-page mappings in the room below (64 records
 * inserted before C's: C's moves 64 slots up in both copies), then a
 * protected mapping of its own file (bytes 0x5a) over C's page
 * (MAP_FIXED); gives W up to 50 ms (scaled) to say it is done (W waits
 * in the drain while C holds a ticket: then it is not), and lets C go
 * on.  C must read zeros, or W's bytes where W came first (SIGBUS
 * fails); P then joins W and finds W's bytes at the page (W's mapping
 * came last: a rescue that replaced the page after it, from the record
 * it read before, fails, exit 16), counts the records, and exits 0 (a
 * hang fails).
 * P is a new process each time: its flag vfork_tickets_ever is false
 * until C's first claim, so the window between C's store of the flag
 * and its claim is stepped through too, with W changing the table in
 * it.  Skipped without nm, or off x86_64 and aarch64.
 *
 * Fails with the wait for the tickets removed (vfork_tickets_held
 * returning false, a scratch build of 0.8.0 dev): C held 115
 * instructions past nsb_ranges_enter's first (x86_64, gcc, its ticket
 * held, the record read) replaces W's new page with zeros.
 */
#include <elf.h>
#include <stdint.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "core.h"

#define STEPS_MAX 200000
#define BELOW 64
#define KMAX 200

static size_t ps;
/* Shared with P (a page made before the fork). */
struct shared {
	atomic_int go, done;
};
static struct shared *sh;
static char *room;	/* P's: BELOW pages, then the reader's page */
static int wfd;

static void *
writer(void *arg)
{
	(void)arg;
	while (atomic_load(&sh->go) == 0)
		sched_yield();
	for (int i = BELOW - 1; i >= 0; i--)
		if (mmap(room + (size_t)i * ps, ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
			 wfd, 0) != room + (size_t)i * ps)
			_exit(17);
	/* Then over the reader's page itself: W's file, its bytes 0x5a. */
	if (mmap(room + BELOW * ps, ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, wfd, 0) !=
	    room + BELOW * ps)
		_exit(18);
	atomic_store(&sh->done, 1);
	return NULL;
}

/* P: traced by its parent; a rescue in a vfork child while W changes
 * the table. */
static __attribute__((noreturn)) void
traced(void)
{
	volatile char *p;
	pthread_t t;
	int fd, status;
	pid_t c;

	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
		_exit(10);
	raise(SIGSTOP);
	fd = memfd_create("vforkstall", MFD_CLOEXEC);
	wfd = memfd_create("vforkstall-w", MFD_CLOEXEC);
	if (fd < 0 || wfd < 0 || ftruncate(wfd, (off_t)ps) != 0)
		_exit(11);
	{
		char *w = mmap(NULL, ps, CORE_PROT_RW, MAP_SHARED, wfd, 0);

		if (w == MAP_FAILED)
			_exit(11);
		memset(w, 0x5a, ps);
		munmap(w, ps);
	}
	room = mmap(NULL, (BELOW + 1) * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (room == MAP_FAILED)
		_exit(11);
	p = mmap(room + BELOW * ps, ps, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
	if (p != (volatile char *)(room + BELOW * ps))
		_exit(12);
	if (pthread_create(&t, NULL, writer, NULL) != 0)
		_exit(13);
	c = vfork();
	if (c == 0)
		/* The rescue: zeros, or W's bytes where W came first. */
		_exit((p[0] == 0 && p[ps - 1] == 0) || (p[0] == 0x5a && p[ps - 1] == 0x5a) ? 0 : 3);
	if (c < 0 || waitpid(c, &status, 0) != c)
		_exit(14);
	pthread_join(t, NULL);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		_exit(WIFSIGNALED(status) ? 40 + WTERMSIG(status) : 30 + WEXITSTATUS(status));
	/* The records: W's 64 and the reader's. */
	{
		struct nosigbus_stats st;

		if (nosigbus_get_stats(&st, sizeof(st)) != 0 || st.mappings != BELOW + 1)
			_exit(15);
	}
	/* W's mapping, made last, is there: not a rescue's zero page over it. */
	if (p[0] != 0x5a || p[ps - 1] != 0x5a)
		_exit(16);
	_exit(0);
}

static uintptr_t
pc_of(pid_t pid)
{
	struct user_regs_struct r;
	struct iovec io = { &r, sizeof(r) };

	if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_PRSTATUS, &io) != 0)
		return 0;
#if defined(__x86_64__)
	return (uintptr_t)r.rip;
#else
	return (uintptr_t)r.pc;
#endif
}

/* The library's load address in pid and its path. */
static uintptr_t
library_base(pid_t pid, char *path, size_t size)
{
	char name[64], line[4096];
	uintptr_t base = 0;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	f = fopen(name, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, off;
		char *s = strchr(line, '/');

		if (!s || !strstr(s, "libnosigbus") ||
		    sscanf(line, "%lx-%*x %*s %lx", &lo, &off) != 2 || off != 0)
			continue;
		base = lo;
		s[strcspn(s, "\n")] = '\0';
		snprintf(path, size, "%s", s);
		break;
	}
	fclose(f);
	return base;
}

/* A symbol's value in the library at path (nm), or 0. */
static uintptr_t
symbol(const char *path, const char *sym)
{
	char cmd[4200], line[512];
	uintptr_t v = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a;
		char type, name[256];

		if (sscanf(line, "%lx %c %255s", &a, &type, name) == 3 && strcmp(name, sym) == 0)
			v = a;
	}
	pclose(f);
	return v;
}

/* One trial: C held k instructions past nsb_ranges_enter's first while
 * W changes the table.  1: done; -1: C never got there. */
static int
trial(uintptr_t off, int k)
{
	char path[4096];
	uintptr_t base, at;
	int status, sig = 0, steps = 0, after = -1;
	long c = 0;
	double deadline;
	pid_t p;

	atomic_store(&sh->go, 0);
	atomic_store(&sh->done, 0);
	fflush(NULL);
	p = fork();
	NSBT_CHECK(p >= 0, "fork: %s", strerror(errno));
	if (p == 0)
		traced();
	NSBT_CHECK(waitpid(p, &status, 0) == p && WIFSTOPPED(status), "P's first stop: %s",
		   nsbt_status_str(status));
	NSBT_CHECK(ptrace(PTRACE_SETOPTIONS, p, NULL,
			  (void *)(long)(PTRACE_O_TRACEVFORK | PTRACE_O_EXITKILL)) == 0,
		   "PTRACE_SETOPTIONS: %s", strerror(errno));
	base = library_base(p, path, sizeof(path));
	NSBT_CHECK(base != 0, "the library in P's maps");
	at = base + off;
	NSBT_CHECK(ptrace(PTRACE_CONT, p, NULL, NULL) == 0, "PTRACE_CONT");
	for (;;) {
		NSBT_CHECK(waitpid(p, &status, 0) == p, "waitpid P: %s", strerror(errno));
		NSBT_CHECK(WIFSTOPPED(status), "P before its vfork: %s", nsbt_status_str(status));
		if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_VFORK << 8))) {
			NSBT_CHECK(ptrace(PTRACE_GETEVENTMSG, p, NULL, &c) == 0, "GETEVENTMSG");
			break;
		}
		ptrace(PTRACE_CONT, p, NULL, (void *)(long)(WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status)));
	}
	NSBT_CHECK(waitpid((pid_t)c, &status, __WALL) == (pid_t)c && WIFSTOPPED(status),
		   "the vfork child's first stop");
	ptrace(PTRACE_CONT, p, NULL, NULL);	/* P waits in vfork */
	for (;;) {
		if (after < 0 && pc_of((pid_t)c) == at)
			after = 0;
		if (after >= 0 && after++ == k)
			break;
		NSBT_CHECK(++steps <= STEPS_MAX, "C never reached nsb_ranges_enter");
		NSBT_CHECK(ptrace(PTRACE_SINGLESTEP, (pid_t)c, NULL, (void *)(long)sig) == 0,
			   "SINGLESTEP: %s", strerror(errno));
		NSBT_CHECK(waitpid((pid_t)c, &status, __WALL) == (pid_t)c, "waitpid child");
		if (!WIFSTOPPED(status))
			break;	/* it ended before k */
		sig = WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status);
	}
	if (WIFSTOPPED(status)) {
		/* C held here: W changes the table meanwhile, or waits. */
		atomic_store(&sh->go, 1);
		deadline = nsbt_now() + 0.05 * nsbt_scaled(1);
		while (!atomic_load(&sh->done) && nsbt_now() < deadline)
			sched_yield();
		/* C goes on, its signals passed on, until it ends. */
		for (;;) {
			NSBT_CHECK(ptrace(PTRACE_CONT, (pid_t)c, NULL, (void *)(long)sig) == 0,
				   "PTRACE_CONT C: %s", strerror(errno));
			NSBT_CHECK(waitpid((pid_t)c, &status, __WALL) == (pid_t)c, "waitpid C");
			if (!WIFSTOPPED(status))
				break;
			sig = WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status);
		}
	} else {
		atomic_store(&sh->go, 1);
	}
	/* P: its signals passed on, until it ends (the case's watchdog
	 * fails a hang). */
	for (;;) {
		NSBT_CHECK(waitpid(p, &status, __WALL) == p, "waitpid P: %s", strerror(errno));
		if (WIFSTOPPED(status)) {
			ptrace(PTRACE_CONT, p, NULL,
			       (void *)(long)(WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status)));
			continue;
		}
		break;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) >= 40)
		nsbt_fail("C held %d instructions past nsb_ranges_enter while another thread changed "
			  "the table: its rescue failed, it died of signal %d (%s)", k,
			  WEXITSTATUS(status) - 40, strsignal(WEXITSTATUS(status) - 40));
	NSBT_CHECK(!WIFEXITED(status) || WEXITSTATUS(status) != 16,
		   "C held %d instructions past nsb_ranges_enter while another thread changed the table: "
		   "its rescue replaced a page of the mapping the other thread made there since (zeros "
		   "where the file has 0x5a)", k);
	NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "P (nsb_ranges_enter + %d): %s", k,
		   nsbt_status_str(status));
	return after > k ? 1 : -1;
}

static void
body(void *arg)
{
	char path[4096];
	uintptr_t off;
	int tried = 0;

	(void)arg;
	ps = nsbt_page();
	sh = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!library_base(getpid(), path, sizeof(path)))
		nsbt_skip("the library is not in our maps");
	off = symbol(path, "nsb_ranges_enter");
	if (!off)
		nsbt_skip("nm gave no nsb_ranges_enter in %s", path);
	for (int k = 0; k < KMAX; k++)
		tried += trial(off, k) > 0;
	NSBT_CHECK(tried > 0, "no trial reached nsb_ranges_enter");
	printf("%d points in the vfork child's rescue held while the table changed: rescued each time\n",
	       tried);
	fflush(NULL);
	_exit(0);
}

int
main(void)
{
#if !defined(__x86_64__) && !defined(__aarch64__)
	nsbt_skip("no register set known here");
#endif
	core_require_library();
	if (core_run_case_watched(body, NULL, 600, "a vfork child's rescue held while the table changes") == 77)
		return 77;
	printf("ok\n");
	return 0;
}
