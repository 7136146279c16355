/* SPDX-License-Identifier: MIT */
/*
 * log.c - counters and every message the library prints.
 *
 * Nothing is printed unless NOSIGBUS_LOG=1, except one line for an invalid
 * NOSIGBUS_* value and one line when a rescue fails (the process is about
 * to die of the SIGBUS then, and should say why).
 *
 * The counters are per process: a fork child starts from zero, so that the
 * exit summaries of a process tree add up to what happened in it.
 *
 * Signal context: nsb_log_rescue, nsb_log_failure and nsb_log_write run
 * in the SIGBUS handler.  They format by hand into the thread's
 * handler_line and write(2) it once: no stdio, no malloc, no locks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nsb.h"

struct nsb_counters nsb_counters;

/* A line, written with one write(2).  A path takes at most PATH_ROOM of
 * it, so that the rest of the line always fits.  (376: the handler's is
 * thread-local, and the library's static TLS block stays within what the
 * dynamic loader places with no mmap of its own at start-up: the startup
 * test counts the calls.) */
struct line {
	char buf[376];
	size_t len;
};
#define PATH_ROOM 200

/* The handler's lines are not on its stack, which may be a small
 * alternate one: every path of the handler has 1 KiB of its own (SPEC
 * §5), and a line is 392 bytes.  One per thread: the handler blocks every
 * signal and calls out to nothing while it formats, so a thread never
 * has two such lines in the making. */
static __thread struct line handler_line __attribute__((tls_model("initial-exec")));

/* [signal-safe] */
static void
put(struct line *l, const char *s)
{
	while (*s && l->len < sizeof(l->buf) - 1)
		l->buf[l->len++] = *s++;
}

/* [signal-safe] */
static void
put_num(struct line *l, uint64_t v, unsigned base)
{
	char tmp[24];
	int i = 0;

	if (base == 16)
		put(l, "0x");
	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (i--) {
		char c[2] = { tmp[i], 0 };

		put(l, c);
	}
}

/* [signal-safe] "nosigbus: prog[pid]: " */
static void
put_prefix(struct line *l)
{
	l->len = 0;
	put(l, "nosigbus: ");
	put(l, program_invocation_short_name);
	put(l, "[");
	put_num(l, (uint64_t)getpid(), 10);
	put(l, "]: ");
}

/*
 * [signal-safe] stderr may be a pipe whose reader has gone: the write's
 * SIGPIPE would kill a program that never wrote there itself (issue 38,
 * log_sigpipe_rescue).  SIGPIPE is blocked in this thread for the write
 * (the rescue handler runs with it blocked anyway), and the one an EPIPE
 * left pending is discarded the way the kernel discards: the action set
 * to SIG_IGN and back, once, as the log then stops for good.  (A SIGPIPE
 * pending for the program at that moment goes with it.)
 */
static atomic_bool log_broken;

/* [signal-safe] Out of line: its frame is on the stack only then (the
 * handler's budget, SPEC §5). */
__attribute__((noinline)) static void
discard_sigpipe(void)
{
	struct sigaction ign, old;

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	if (nsb_sys_sigaction(SIGPIPE, &ign, &old) == 0)
		nsb_sys_sigaction(SIGPIPE, &old, NULL);
}

void
nsb_log_write(const char *p, size_t left)
{
	struct nsb_kset pipe_only, saved;
	int saved_errno = errno;
	bool broken = false;

	if (nsb_config.secure || atomic_load(&log_broken))
		return;	/* AT_SECURE: stderr is not ours to write (config.c) */
	memset(&pipe_only, 0, sizeof(pipe_only));
	nsb_kset_add(&pipe_only, SIGPIPE);
	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &pipe_only, &saved, sizeof(pipe_only)) < 0)
		return;
	while (left) {
		ssize_t n = write(STDERR_FILENO, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EPIPE)
			broken = true;
		if (n <= 0)
			break;
		p += n;
		left -= (size_t)n;
	}
	if (broken && !atomic_exchange(&log_broken, true))
		discard_sigpipe();
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &saved, NULL, sizeof(pipe_only));
	errno = saved_errno;
}

/* [signal-safe] */
static void
emit(struct line *l)
{
	l->buf[l->len++] = '\n';
	nsb_log_write(l->buf, l->len);
}

/* [signal-safe] "PATH from COMM[PID]": the file, and the process that
 * sent it where it was received (received.c). */
static void
put_mapping(struct line *l, uint32_t file, uint32_t meta)
{
	const char *path = nsb_files_path(file);
	size_t n = path ? strlen(path) : 0;
	uint64_t dev, ino;
	char comm[16];
	int pid;

	if (n > PATH_ROOM) {
		put(l, "...");
		path += n - PATH_ROOM;	/* its end: the file's name */
	}
	put(l, path ? path : (meta & NSB_META_ANON) ? "anonymous" : "unknown");
	if (nsb_files_identity(file, &dev, &ino) && nsb_received_sender(dev, ino, &pid, comm)) {
		put(l, " from ");
		if (pid > 0) {
			put(l, comm[0] ? comm : "pid");
			put(l, "[");
			put_num(l, (uint64_t)pid, 10);
			put(l, "]");
		} else {
			put(l, "another process");
		}
	}
}

/* [signal-safe] */
static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* [signal-safe] The first rescue in a mapping (in this process). */
static bool
first_in_process(struct nsb_maplog *m, const struct nsb_range *r)
{
	int me = getpid(), owner = atomic_load(&m->pid);

	if (owner == me)
		return false;
	if (!atomic_compare_exchange_strong(&m->pid, &owner, me))
		return false;	/* another thread of ours was first */
	if (owner) {
		/* A fork child: what is counted is its parent's. */
		atomic_store(&m->faults, 0);
		atomic_store(&m->pages, 0);
		atomic_store(&m->reported, 0);
	}
	atomic_store(&m->next_ns, INT64_MAX);	/* until the first line is out */
	atomic_store(&m->file, r->file);
	atomic_store(&m->meta, r->meta);
	return true;
}

/* [signal-safe] */
void
nsb_log_rescue(uintptr_t addr, const struct nsb_range *r, size_t pages,
	       enum nsb_rescue_kind kind, int ticket)
{
	static const char *const fills[] = { " (fill=page, ", " (fill=range, ", " (fill=auto, " };
	struct nsb_maplog *m = nsb_account_log(r->acct);
	uint64_t total, faults;
	int64_t next, now;
	struct line *l = &handler_line;

	if (!nsb_config.log || !m) {
		nsb_ranges_leave(ticket);
		return;
	}
	/* The counts, while the record (and so its account) is held. */
	if (first_in_process(m, r) || nsb_config.log == NSB_LOG_PAGES) {
		atomic_fetch_add(&m->faults, 1);
		atomic_fetch_add(&m->pages, pages);
		atomic_fetch_add(&m->reported, pages);
		put_prefix(l);
		put(l, "rescued ");
		put_num(l, addr, 16);
		put(l, " in ");
		put_mapping(l, r->file, r->meta);
		nsb_ranges_leave(ticket);
		put(l, fills[nsb_fill_of(r->meta)]);
		put_num(l, pages, 10);
		put(l, pages == 1 ? " page" : " pages");
		/* The file's size could not be learnt: perhaps not past its end;
		 * or inside it, an error of the sender's file. */
		put(l, kind == NSB_RESCUE_UNVERIFIED ? ", unverified)"
			: kind == NSB_RESCUE_PEERS_ERROR ? ", inside the file: the sender's error)"
			: ")");
		atomic_store(&m->next_ns, now_ns() + 1000000000);
		emit(l);
		return;
	}
	faults = atomic_fetch_add(&m->faults, 1) + 1;
	total = atomic_fetch_add(&m->pages, pages) + pages;
	next = atomic_load(&m->next_ns);
	now = now_ns();
	/* At most one line a second, by whoever moves the deadline. */
	if (now < next || !atomic_compare_exchange_strong(&m->next_ns, &next, now + 1000000000)) {
		nsb_ranges_leave(ticket);
		return;
	}
	put_prefix(l);
	put(l, "rescued ");
	pages = (size_t)(total - atomic_exchange(&m->reported, total));
	put_num(l, pages, 10);
	put(l, pages == 1 ? " more page in " : " more pages in ");
	put_mapping(l, r->file, r->meta);
	nsb_ranges_leave(ticket);
	put(l, " (");
	put_num(l, total, 10);
	put(l, " pages in ");
	put_num(l, faults, 10);
	put(l, faults == 1 ? " fault so far)" : " faults so far)");
	emit(l);
}

/* Lines for mappings unmapped under the table lock, written after it
 * (not in .bss: the library's would spill into one more mapping). */
static char *queue;
size_t nsb_log_queued;	/* nsb_log_take() tests it inline (nsb.h) */

/* Table lock held. */
void
nsb_log_unmapped(struct nsb_maplog *m)
{
	uint64_t faults = atomic_load(&m->faults), pages = atomic_load(&m->pages);
	struct line l;

	if (!nsb_config.log || atomic_load(&m->pid) != getpid())
		return;
	put_prefix(&l);
	put(&l, "unmapped ");
	put_mapping(&l, atomic_load(&m->file), atomic_load(&m->meta));
	put(&l, ": ");
	put_num(&l, pages, 10);
	put(&l, pages == 1 ? " page rescued in " : " pages rescued in ");
	put_num(&l, faults, 10);
	put(&l, faults == 1 ? " fault" : " faults");
	l.buf[l.len++] = '\n';
	if (!queue && !(queue = nsb_memory(NSB_LOG_QUEUE))) {
		nsb_log_write(l.buf, l.len);
		return;
	}
	if (nsb_log_queued + l.len > NSB_LOG_QUEUE) {
		nsb_log_write(queue, nsb_log_queued);	/* rare: many at once */
		nsb_log_queued = 0;
	}
	memcpy(queue + nsb_log_queued, l.buf, l.len);
	nsb_log_queued += l.len;
	atomic_store(&m->faults, 0);
}

/* Table lock held, lines queued (nsb_log_take). */
size_t
nsb_log_take_queued(char *out)
{
	size_t n = nsb_log_queued;

	memcpy(out, queue, n);
	nsb_log_queued = 0;
	return n;
}

/* [signal-safe] Printed whether or not logging is on: see the top. */
void
nsb_log_failure(uintptr_t addr, int err)
{
	struct line *l = &handler_line;

	put_prefix(l);
	put(l, "cannot replace the page at ");
	put_num(l, addr, 16);
	put(l, err == ENOMEM ? " (out of memory or vm.max_map_count reached)"
			      : " (mmap failed)");
	put(l, "; passing SIGBUS on");
	emit(l);
}

/* [signal-safe] With NOSIGBUS_LOG=1, once (sandbox.c). */
void
nsb_log_unchecked(bool filtered)
{
	struct line l;

	put_prefix(&l);
	if (filtered)
		put(&l, "a seccomp filter is in force: mappings the library cannot check "
			"with the calls it allows stay unprotected");
	else
		put(&l, "no descriptor free to learn whether a seccomp filter is in force: "
			"mappings made until one is stay unprotected");
	emit(&l);
}

/* Once, after the table lock is let go (ranges.c). */
void
nsb_log_lost(void)
{
	struct line l;

	put_prefix(&l);
	put(&l, "no memory for the records of a mapping a call split (RLIMIT_AS?): "
		"parts of protected mappings stay unprotected");
	emit(&l);
}

void
nsb_warn(const char *fmt, ...)
{
	struct line l;
	va_list ap;
	int n;

	l.len = 0;
	put(&l, "nosigbus: ");
	va_start(ap, fmt);
	n = vsnprintf(l.buf + l.len, sizeof(l.buf) - l.len - 1, fmt, ap);
	va_end(ap);
	if (n > 0)
		l.len += (size_t)n < sizeof(l.buf) - l.len - 1 ? (size_t)n : sizeof(l.buf) - l.len - 2;
	emit(&l);
}

/* At exit, with NOSIGBUS_LOG=1: only a process that rescued or failed
 * something has anything to say (a process tree of shells and helpers
 * would otherwise print a line of zeros each). */
static void
summary(void)
{
	uint64_t rescues = atomic_load(&nsb_counters.rescues);
	uint64_t failures = atomic_load(&nsb_counters.failures);
	struct line l;

	if (!rescues && !failures)
		return;
	put_prefix(&l);
	put_num(&l, rescues, 10);
	put(&l, " rescues, ");
	put_num(&l, atomic_load(&nsb_counters.pages), 10);
	put(&l, " pages replaced, ");
	put_num(&l, failures, 10);
	put(&l, " failures");
	if (atomic_load(&nsb_counters.unverified)) {
		put(&l, ", ");
		put_num(&l, atomic_load(&nsb_counters.unverified), 10);
		put(&l, " unverified");
	}
	if (atomic_load(&nsb_counters.unchecked)) {
		put(&l, ", ");
		put_num(&l, atomic_load(&nsb_counters.unchecked), 10);
		put(&l, " unchecked");
	}
	if (atomic_load(&nsb_counters.lost)) {
		put(&l, ", ");
		put_num(&l, atomic_load(&nsb_counters.lost), 10);
		put(&l, " lost");
	}
	emit(&l);
}

/*
 * In the child of fork(): what the parent rescued is the parent's to
 * report.  The child runs this before fork() returns in it, when it has
 * one thread and no handler of ours can be running.
 */
void
nsb_log_after_fork_child(void)
{
	atomic_store(&nsb_counters.rescues, 0);
	atomic_store(&nsb_counters.pages, 0);
	atomic_store(&nsb_counters.failures, 0);
	atomic_store(&nsb_counters.unverified, 0);
	atomic_store(&nsb_counters.unchecked, 0);
	atomic_store(&nsb_counters.lost, 0);
}

void
nsb_log_init(void)
{
	if (nsb_config.log)
		atexit(summary);
}
