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
 * Signal context: nsb_log_rescue and nsb_log_failure run in the SIGBUS
 * handler.  They format by hand into a stack buffer and write(2) it once:
 * no stdio, no malloc, no locks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nsb.h"

struct nsb_counters nsb_counters;

struct line {
	char buf[512];
	size_t len;
};

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

/* [signal-safe] */
static void
emit(struct line *l)
{
	const char *p = l->buf;
	size_t left;

	if (nsb_config.secure)
		return;	/* AT_SECURE: stderr is not ours to write (config.c) */
	l->buf[l->len++] = '\n';
	left = l->len;
	while (left) {
		ssize_t n = write(STDERR_FILENO, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		left -= (size_t)n;
	}
}

/* [signal-safe] */
void
nsb_log_rescue(uintptr_t addr, const struct nsb_range *r, size_t pages, bool verified)
{
	static const char *const fills[] = { " (fill=page, ", " (fill=range, ", " (fill=auto, " };
	const char *path = nsb_files_path(r->file);
	struct line l;

	if (!nsb_config.log)
		return;
	put_prefix(&l);
	put(&l, "rescued ");
	put_num(&l, addr, 16);
	put(&l, " in ");
	put(&l, path ? path : (r->meta & NSB_META_ANON) ? "anonymous" : "unknown");
	put(&l, fills[nsb_fill_of(r->meta)]);
	put_num(&l, pages, 10);
	put(&l, pages == 1 ? " page" : " pages");
	/* The file's size could not be learnt: perhaps not past its end. */
	put(&l, verified ? ")" : ", unverified)");
	emit(&l);
}

/* [signal-safe] Printed whether or not logging is on: see the top. */
void
nsb_log_failure(uintptr_t addr, int err)
{
	struct line l;

	put_prefix(&l);
	put(&l, "cannot replace the page at ");
	put_num(&l, addr, 16);
	put(&l, err == ENOMEM ? " (out of memory or vm.max_map_count reached)"
			      : " (mmap failed)");
	put(&l, "; passing SIGBUS on");
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
}

void
nsb_log_init(void)
{
	if (nsb_config.log)
		atexit(summary);
}
