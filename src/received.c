/* SPDX-License-Identifier: MIT */
/*
 * received.c - the files another process handed over (SCM_RIGHTS), and
 * who handed them over (issue 22).
 *
 * A compositor maps whatever descriptor a client sends it, and the client
 * can shrink that file, whatever file system it is on: a pool in a file
 * on ext4 is as hostile as a memfd.  So under the shm policy a mapping of
 * a received regular file is protected like a memory-backed one (policy.c
 * asks nsb_received_is()); files the program opened itself keep the file
 * system rule.
 *
 * Tracked by file identity, not by descriptor number: a descriptor can be
 * dup()ed, passed to another thread, closed and its number reused for a
 * file the program opens itself, through calls we cannot all see
 * (io_uring, raw system calls).  An identity is the file whatever
 * descriptor names it.  It is (st_dev, st_ino) and, where the file system
 * has one, the birth time: an inode number freed and reused for a new file
 * of the program's own is then a different identity.  Every regular file
 * received is kept, memfds too (their sender names a rescue in the log):
 * the last RECEIVED_MAX of them, the oldest forgotten first; a file
 * received again is kept until at least RECEIVED_MAX / 2 other files
 * have arrived after it (remember()).  A file
 * forgotten before it is mapped is not protected by this rule; a
 * compositor maps a pool when the message that brought it arrives, and a
 * mapping already made stays protected (its record does not need this
 * table again).
 *
 * Cost: recvmsg without descriptors pays one branch; each received
 * descriptor one statx, which must be made while the number still names
 * what arrived (a later one could not tell a number closed and used
 * again), and a look in one hash bucket of the table (below).  The sender, named only in the log, costs two more system calls
 * with the log on, once per message that brings a regular file:
 * SO_PEERCRED and /proc/PID/comm.  A program that never received a
 * regular file never asks the table anything (nsb_received_any()).  A
 * descriptor whose statx is refused (below, "foreign") costs nothing more.
 *
 * The table is lock-free: an entry is written between two increments of
 * its sequence number (odd while it is written), and read only if the
 * number was even and unchanged around the read.  recvmsg may be called
 * from a signal handler (it is async-signal-safe), so nothing here takes a
 * lock, allocates or uses stdio.
 *
 * Signal context: recvmsg, recvmmsg (a program's handler may call them),
 * nsb_received_sender (the rescue log), nsb_received_hint_drop (the
 * interposed close).  nsb_received_is, nsb_received_hint_find (behind
 * nsb_received_hint_take, inline in nsb.h) and nsb_received_foreign run
 * under mmap, never in a handler of ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

#ifndef STATX_BTIME
#define STATX_BTIME 0x0800U
#endif

#define RECEIVED_MAX 256

struct received {
	atomic_uint seq;	/* odd while written; 0: never written */
	uint64_t dev;
	uint64_t ino;
	int64_t btime_sec;	/* birth time, where has_btime */
	uint32_t btime_nsec;
	bool has_btime;
	int32_t pid;		/* the sender, 0: unknown */
	char comm[16];		/* its command name, "" unknown */
};

/* Mapped when the first regular file arrives (a mapping of its own, made
 * with a system call, as recvmsg may run in a signal handler): not in
 * .bss, which would cost every process one more mapping at start-up. */
static _Atomic(struct received *) table_p;
#define table (atomic_load_explicit(&table_p, memory_order_acquire))
static atomic_uint next_slot;
atomic_uint nsb_received_written;	/* entries ever written: 0, nothing received (tested inline, nsb.h) */

/*
 * Which entries hold an identity of each hash bucket: one bit per entry,
 * in the same memory, after the entries.  A lookup reads the entries of
 * its bucket only (about one), not all RECEIVED_MAX: a compositor fed a
 * new pool per buffer looks twice per pool (recvmsg's remember() and the
 * mmap's nsb_received_is()), and a scan of the full table cost about
 * 1.5 us of user time per pool (nsb-cli-pool).  A writer clears the bit of the identity it overwrites
 * and sets its own while the entry is odd (claimed), before making it
 * even: a reader that misses a bit missed an entry being written, which
 * the scan skipped too; a bit set for an entry that is not (yet, or no
 * longer) its identity costs one compare.  The hash is of (dev, ino)
 * only: nsb_received_sender looks without the birth time.
 */
#define BUCKETS 256
#define WORDS (RECEIVED_MAX / 64)
struct bucket {
	atomic_uint_least64_t bits[WORDS];
};
_Static_assert(RECEIVED_MAX % 64 == 0, "whole words");
#define buckets ((struct bucket *)(table + RECEIVED_MAX))

/*
 * The numbers regular files arrived at lately (number + 1, 0: free), until
 * the program maps them, or closes or replaces them through a call the
 * library sees.  Only a hint, for cost: a compositor closes a pool it has
 * mapped at once, so policy.c keeps the library's descriptor at the
 * mapping, from an O_PATH descriptor it decides on (one call fewer than
 * at the close, which must check the number again).  A number closed and
 * reused behind the library's back (a raw close, io_uring) costs only
 * that: the decision is made on the file the number names at mmap time,
 * never on what the hint says.
 */
#define HINTS 8
static atomic_int hint_fd[HINTS];
static atomic_uint hint_next;
atomic_uint nsb_received_hints;	/* ever given: 0, nothing to look at (tested inline, nsb.h) */

/*
 * Received descriptors whose file cannot be described (issue 37): a stat
 * of it fails, so it has no identity.  A FUSE file system mounted by
 * another user without allow_other refuses every fstat and statx of this
 * process's (fuse's per-process permission check on getattr: EACCES),
 * while a read or a mapping through the descriptor works, and so does its
 * fault that fails - a file system the peer controls.  It still came
 * over SCM_RIGHTS, so it is the peer's file: its number is kept here, as
 * (arrival << 32) | (number + 1), 0 free, with an arrival number of its
 * own that stands for its identity (received.c's table knows the sender
 * by it, with the log on: dev NSB_DEV_FOREIGN, ino the arrival).  Nothing
 * better is to be had: fstatfs answers only the file system's type,
 * and /proc/self/fdinfo's inode (Linux 5.14) would cost an open, a read
 * and a close per descriptor to tell apart what the number already does.
 * Unlike the hints above this is the only evidence the policy has (it
 * cannot ask the file), so a mapping does not take it: it stays until
 * the program closes or replaces the number through a call the library
 * sees, or a newer one takes its place.  A number closed behind the
 * library's back and reused for a file of the program's own that cannot
 * be described either would be taken for the peer's (libnosigbus(7),
 * BUGS).
 *
 * Kept by number, FOREIGN_WAYS to a set of numbers (number modulo
 * FOREIGN_SETS), in a page of the arena mapped when the first such
 * descriptor arrives: a new one takes a free entry of its set, else that
 * of the oldest arrival.  Numbers are given lowest first, so the batch of
 * one message (libwayland's: up to 28) spreads over the sets, and a
 * descriptor still open is put out only by FOREIGN_WAYS newer ones of its
 * set, all open at once: some FOREIGN_SETS * FOREIGN_WAYS descriptors.
 * (This was a ring of the last 8: a peer that sent 9 in one message had
 * the first one's mapping unprotected, and killed the compositor with its
 * fault; core-foreignmany.)  Until the page can be had (the arena is
 * busy, in a handler that interrupted its holder), a ring of
 * FOREIGN_SPARE in .bss keeps them; both are looked at.
 */
#define FOREIGN_WAYS 4
#define FOREIGN_SETS 128
#define FOREIGN_SPARE 8
static _Atomic(atomic_uint_least64_t *) foreign_table_p;
static atomic_uint_least64_t foreign_spare[FOREIGN_SPARE];
static atomic_uint foreign_next;
static atomic_uint foreign_arrivals;
atomic_uint nsb_received_foreign_given;	/* 0: nothing to look at (tested inline, nsb.h) */

/* [signal-safe] */
static void
hint_give(int fd)
{
	atomic_store_explicit(&hint_fd[atomic_fetch_add(&hint_next, 1) % HINTS], fd + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&nsb_received_hints, 1, memory_order_relaxed);
}

/* nsb_received_hint_take() (nsb.h) once a hint was ever given. */
bool
nsb_received_hint_find(int fd)
{
	if (fd < 0)
		return false;
	for (int i = 0; i < HINTS; i++) {
		int expected = fd + 1;

		if (atomic_load_explicit(&hint_fd[i], memory_order_relaxed) == fd + 1 &&
		    atomic_compare_exchange_strong(&hint_fd[i], &expected, 0))
			return true;
	}
	return false;
}

static void foreign_drop(unsigned first, unsigned last);

/* [signal-safe] */
void
nsb_received_hint_drop(unsigned first, unsigned last)
{
	/* Foreign numbers too when no hint was ever given (only files no
	 * stat describes arrived): they were kept past their close. */
	if (nsb_received_foreign_any())
		foreign_drop(first, last);
	if (!atomic_load_explicit(&nsb_received_hints, memory_order_relaxed))
		return;
	for (int i = 0; i < HINTS; i++) {
		int v = atomic_load_explicit(&hint_fd[i], memory_order_relaxed) - 1;

		if (v >= 0 && (unsigned)v >= first && (unsigned)v <= last)
			atomic_compare_exchange_strong(&hint_fd[i], &(int){ v + 1 }, 0);
	}
}

/* [signal-safe] The table of foreign numbers, or NULL. */
static atomic_uint_least64_t *
foreign_table(void)
{
	return atomic_load_explicit(&foreign_table_p, memory_order_acquire);
}

/* [signal-safe] The table, mapped the first time; NULL if it cannot be
 * (table_ready's rule: the arena's lock is only tried). */
static atomic_uint_least64_t *
foreign_table_ready(void)
{
	atomic_uint_least64_t *t = foreign_table(), *none = NULL;

	if (t)
		return t;
	t = nsb_memory_try(sizeof(*t) * FOREIGN_SETS * FOREIGN_WAYS);
	if (!t)
		return NULL;
	if (!atomic_compare_exchange_strong(&foreign_table_p, &none, t))
		return none;	/* another thread's is there (ours stays unused) */
	return t;
}

/* [signal-safe] The entries fd may be kept in: its set of the table
 * (when there is one) in sets[0], and the spare ring; how many lists. */
static int
foreign_lists(int fd, atomic_uint_least64_t *lists[2], unsigned count[2])
{
	atomic_uint_least64_t *t = foreign_table();
	int n = 0;

	if (t) {
		lists[n] = t + ((unsigned)fd % FOREIGN_SETS) * FOREIGN_WAYS;
		count[n++] = FOREIGN_WAYS;
	}
	lists[n] = foreign_spare;
	count[n++] = FOREIGN_SPARE;
	return n;
}

/* [signal-safe] Forgets every entry of a number in [first, last]. */
static void
foreign_drop(unsigned first, unsigned last)
{
	atomic_uint_least64_t *t = foreign_table();
	struct {
		atomic_uint_least64_t *e;
		unsigned n;
	} span[2] = { { foreign_spare, FOREIGN_SPARE }, { NULL, 0 } };

	/* The table: all of it for a wide range (close_range), else the sets
	 * of the numbers in it. */
	if (t && last - first >= FOREIGN_SETS - 1)
		span[1] = (typeof(span[1])){ t, FOREIGN_SETS * FOREIGN_WAYS };
	for (int k = 0; k < 2; k++) {
		for (unsigned i = 0; i < span[k].n; i++) {
			uint64_t v = atomic_load_explicit(&span[k].e[i], memory_order_relaxed);
			unsigned n = (uint32_t)v;

			if (n && n - 1 >= first && n - 1 <= last)
				atomic_compare_exchange_strong(&span[k].e[i], &v, 0);
		}
	}
	if (!t || last - first >= FOREIGN_SETS - 1)
		return;
	for (unsigned fd = first;; fd++) {
		atomic_uint_least64_t *set = t + (fd % FOREIGN_SETS) * FOREIGN_WAYS;

		for (unsigned i = 0; i < FOREIGN_WAYS; i++) {
			uint64_t v = atomic_load_explicit(&set[i], memory_order_relaxed);

			if (v && (uint32_t)v == fd + 1)
				atomic_compare_exchange_strong(&set[i], &v, 0);
		}
		if (fd == last)
			break;
	}
}

/* [signal-safe] A descriptor just arrived at fd: whatever was kept of
 * that number before names a file gone (closed behind our back). */
static void
foreign_forget(int fd)
{
	foreign_drop((unsigned)fd, (unsigned)fd);
}

/* [signal-safe] Keeps fd as a foreign descriptor; its arrival number. */
static uint32_t
foreign_give(int fd)
{
	uint32_t arrival = atomic_fetch_add(&foreign_arrivals, 1) + 1;
	atomic_uint_least64_t *list;
	unsigned count;

	if (!arrival)	/* wrapped: 0 is "free" */
		arrival = atomic_fetch_add(&foreign_arrivals, 1) + 1;
	if ((list = foreign_table_ready())) {
		list += ((unsigned)fd % FOREIGN_SETS) * FOREIGN_WAYS;
		count = FOREIGN_WAYS;
	} else {
		/* The spare ring: its next entry, as the ring always was. */
		list = &foreign_spare[atomic_fetch_add(&foreign_next, 1) % FOREIGN_SPARE];
		count = 1;
	}
	/* A free entry, else the oldest arrival's (the lowest, counted back
	 * from this one across a wrap); another thread's write meanwhile
	 * makes it look again. */
	for (int tries = 0; tries < 8; tries++) {
		unsigned pick = 0;
		uint32_t age = 0;
		uint64_t v;

		for (unsigned i = 0; i < count; i++) {
			uint32_t a;

			v = atomic_load_explicit(&list[i], memory_order_relaxed);
			a = v ? arrival - (uint32_t)(v >> 32) : UINT32_MAX;
			if (a > age || i == 0) {
				age = a;
				pick = i;
			}
		}
		v = atomic_load_explicit(&list[pick], memory_order_relaxed);
		if (atomic_compare_exchange_strong(&list[pick], &v,
						   ((uint64_t)arrival << 32) | (uint32_t)(fd + 1)))
			break;
	}
	atomic_store_explicit(&nsb_received_foreign_given, 1, memory_order_relaxed);
	return arrival;
}

bool
nsb_received_foreign(int fd, uint32_t *arrival)
{
	atomic_uint_least64_t *lists[2];
	unsigned count[2];
	int n;

	if (fd < 0 || !nsb_received_foreign_any())
		return false;
	n = foreign_lists(fd, lists, count);
	for (int k = 0; k < n; k++) {
		for (unsigned i = 0; i < count[k]; i++) {
			uint64_t v = atomic_load_explicit(&lists[k][i], memory_order_relaxed);

			if (v && (uint32_t)v == (uint32_t)(fd + 1)) {
				*arrival = (uint32_t)(v >> 32);
				return true;
			}
		}
	}
	return false;
}

/* [signal-safe] Does a failed stat of a descriptor that just arrived
 * (err) say its file system refuses to describe it, rather than that the
 * call or the number is wrong (or statx missing)? */
static bool
refused(int err)
{
	return err != ENOSYS && err != EBADF && err != EINVAL && err != EFAULT;
}


/* [signal-safe] A consistent copy of entry i, or false while it is written. */
static bool
read_entry(unsigned i, struct received *out)
{
	unsigned s1 = atomic_load_explicit(&table[i].seq, memory_order_acquire);

	if (s1 == 0 || (s1 & 1))
		return false;
	out->dev = table[i].dev;
	out->ino = table[i].ino;
	out->btime_sec = table[i].btime_sec;
	out->btime_nsec = table[i].btime_nsec;
	out->has_btime = table[i].has_btime;
	out->pid = table[i].pid;
	memcpy(out->comm, table[i].comm, sizeof(out->comm));
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&table[i].seq, memory_order_relaxed) == s1;
}

static bool
same_identity(const struct received *e, const struct nsb_identity *id)
{
	return e->dev == id->dev && e->ino == id->ino &&
	       (!e->has_btime || !id->has_btime ||
		(e->btime_sec == id->btime_sec && e->btime_nsec == id->btime_nsec));
}

/* [signal-safe] The bucket of an identity. */
static unsigned
bucket_of(uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;

	return (unsigned)(h >> 32) % BUCKETS;
}

/* [signal-safe] The entry of this identity, its copy in *out, or -1. */
static int
find(const struct nsb_identity *id, struct received *out)
{
	struct bucket *b;

	if (!atomic_load_explicit(&nsb_received_written, memory_order_acquire))
		return -1;
	b = &buckets[bucket_of(id->dev, id->ino)];
	for (unsigned w = 0; w < WORDS; w++) {
		uint64_t bits = atomic_load_explicit(&b->bits[w], memory_order_acquire);

		while (bits) {
			unsigned i = w * 64 + (unsigned)__builtin_ctzll(bits);

			bits &= bits - 1;
			if (read_entry(i, out) && same_identity(out, id))
				return (int)i;
		}
	}
	return -1;
}

bool
nsb_received_is(const struct nsb_identity *id)
{
	struct received e;

	return nsb_received_any() && find(id, &e) >= 0;
}

/* [signal-safe] */
bool
nsb_received_sender(uint64_t dev, uint64_t ino, int *pid, char comm[16])
{
	struct nsb_identity id = { .dev = dev, .ino = ino };
	struct received e;

	if (!nsb_received_any() || find(&id, &e) < 0 || e.pid <= 0)
		return false;
	*pid = e.pid;
	memcpy(comm, e.comm, 16);
	return true;
}

/* [signal-safe] /proc/PID/comm, without its newline, or "". */
static void
read_comm(int pid, char comm[16])
{
	char path[32];
	ssize_t n;
	int fd;

	comm[0] = '\0';
	nsb_proc_path(path, sizeof(path), "/proc/", (unsigned long)pid, "/comm");
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = syscall(SYS_read, fd, comm, 15);
	syscall(SYS_close, fd);
	if (n <= 0)
		return;
	if (comm[n - 1] == '\n')
		n--;
	comm[n] = '\0';
}

/* [signal-safe] The table, mapped the first time; NULL if it cannot be. */
static struct received *
table_ready(void)
{
	size_t len = sizeof(struct received) * RECEIVED_MAX + sizeof(struct bucket) * BUCKETS;
	struct received *t = table, *none = NULL;

	if (t)
		return t;
	/* From the library's arena, never a mapping wherever the kernel would
	 * put it now: that is an address the program may just have freed
	 * and may take back with MAP_FIXED, and our writes would land in its
	 * memory (memory.c).  Its lock is only tried (we may be in a handler
	 * that interrupted a holder): busy, this file is not remembered, as
	 * if out of memory, and the next one tries again. */
	t = nsb_memory_try(len);
	if (!t)
		return NULL;
	if (!atomic_compare_exchange_strong(&table_p, &none, t))
		return none;	/* another thread's is there (ours stays unused) */
	return t;
}

/* [signal-safe] */
static void
remember(const struct nsb_identity *id, int pid, const char comm[16])
{
	struct received old;
	struct received *e;
	int i;
	unsigned s;

	if (!table_ready())
		return;	/* out of memory: not protected for this, as if forgotten */
	i = find(id, &old);

	/* Known already, from the same sender: kept, unless the entry found
	 * is among the older half, which the next files received overwrite
	 * first.  Then it is written anew in the next slot (the old entry,
	 * the same identity, goes in its turn): a file received again stays
	 * until at least RECEIVED_MAX / 2 newer ones have arrived, so a peer
	 * that keeps handing over the same file (the same pool again) is not
	 * forgotten behind newer ones.  (The hostile-peer soak's FUSE file,
	 * the one file of its file system, handed over again and again, was
	 * mapped unprotected once 256 other files had arrived since its
	 * first arrival, and its next fault killed the program.) */
	if (i >= 0 && old.pid == pid &&
	    (atomic_load_explicit(&next_slot, memory_order_relaxed) - 1u - (unsigned)i) %
			    RECEIVED_MAX < RECEIVED_MAX / 2)
		return;
	if (i < 0 || old.pid == pid)
		i = (int)(atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) % RECEIVED_MAX);
	e = &table[i];
	/* Claim it: even -> odd.  An entry another thread is writing is left
	 * to it (this file is then forgotten, as if it were older). */
	s = atomic_load_explicit(&e->seq, memory_order_relaxed);
	if ((s & 1) || !atomic_compare_exchange_strong(&e->seq, &s, s + 1))
		return;
	atomic_thread_fence(memory_order_release);
	/* Claimed (odd): the bucket of what it held no longer names it, the
	 * new identity's does (head comment). */
	if (s)
		atomic_fetch_and(&buckets[bucket_of(e->dev, e->ino)].bits[i / 64],
				 ~(1ull << (i % 64)));
	atomic_fetch_or(&buckets[bucket_of(id->dev, id->ino)].bits[i / 64], 1ull << (i % 64));
	e->dev = id->dev;
	e->ino = id->ino;
	e->btime_sec = id->btime_sec;
	e->btime_nsec = id->btime_nsec;
	e->has_btime = id->has_btime;
	e->pid = pid;
	memcpy(e->comm, comm, sizeof(e->comm));
	atomic_store_explicit(&e->seq, s + 2, memory_order_release);
	/* Published: readers scan up to min(written, RECEIVED_MAX). */
	unsigned w = atomic_load_explicit(&nsb_received_written, memory_order_relaxed);

	while (w < RECEIVED_MAX && w <= (unsigned)i &&
	       !atomic_compare_exchange_weak(&nsb_received_written, &w, (unsigned)i + 1))
		;
}

/* [signal-safe] The identity of a regular file open as fd, or false:
 * with errno that of the stat that failed, or 0 (not a regular file). */
bool
nsb_identity_of(int fd, struct nsb_identity *id)
{
	struct statx sx;

	errno = 0;
	/* Under a seccomp filter, fstat (every filter allows it; a browser's
	 * refuses statx): the identity without the birth time. */
	if (!nsb_unfiltered()) {
		struct stat st;

		if (nsb_fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			return false;
		*id = (struct nsb_identity){ .dev = (uint64_t)st.st_dev,
					     .ino = (uint64_t)st.st_ino };
		return true;
	}
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH,
		    STATX_TYPE | STATX_INO | STATX_BTIME, &sx) < 0 ||
	    !(sx.stx_mask & STATX_TYPE) || !S_ISREG(sx.stx_mode))
		return false;
	nsb_identity_from(&sx, id);
	return true;
}

void
nsb_identity_from(const struct statx *sx, struct nsb_identity *id)
{
	id->dev = nsb_dev_of(sx->stx_dev_major, sx->stx_dev_minor);
	id->ino = sx->stx_ino;
	id->has_btime = (sx->stx_mask & STATX_BTIME) != 0;
	id->btime_sec = id->has_btime ? sx->stx_btime.tv_sec : 0;
	id->btime_nsec = id->has_btime ? sx->stx_btime.tv_nsec : 0;
}

/* [signal-safe] Every regular file a message brought, with its sender. */
static void
note_message(int sock, const struct msghdr *msg)
{
	int pid = -1;	/* not asked yet */
	char comm[16] = "";

	if (!msg->msg_control || msg->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t k = 0; k < n; k++) {
			struct nsb_identity id;
			bool foreign = false;
			int fd;

			memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(fd));
			if (nsb_received_foreign_any())
				foreign_forget(fd);
			if (!nsb_identity_of(fd, &id)) {
				/* Not described (above): the peer's all the same.
				 * Its arrival is its identity, for the log only. */
				if (!errno || !refused(errno))
					continue;
				id = (struct nsb_identity){ .dev = NSB_DEV_FOREIGN,
							    .ino = foreign_give(fd) };
				if (!nsb_config.log)
					continue;
				foreign = true;
			}
			if (!foreign)
				hint_give(fd);
			/* The sender is only ever named in the log. */
			/* (SO_PEERCRED and /proc/PID/comm: not under a filter.) */
			if (pid < 0 && (!nsb_config.log || !nsb_unfiltered())) {
				pid = 0;
			} else if (pid < 0) {
				struct ucred cred;
				socklen_t len = sizeof(cred);

				pid = syscall(SYS_getsockopt, sock, SOL_SOCKET, SO_PEERCRED,
					      &cred, &len) == 0 ? cred.pid : 0;
				if (pid > 0)
					read_comm(pid, comm);
			}
			remember(&id, pid, comm);
		}
	}
}

/* Does anything here need to know?  Not under the flag policy without the
 * log: there no mapping is protected for where its file came from. */
static inline bool
wanted(void)
{
	return nsb_config.policy != NSB_POLICY_FLAG || nsb_config.log;
}

NSB_EXPORT ssize_t
recvmsg(int sock, struct msghdr *msg, int flags)
{
	ssize_t ret = real_recvmsg(sock, msg, flags);

	if (ret >= 0 && msg && msg->msg_controllen && wanted()) {
		int saved_errno = errno;

		note_message(sock, msg);
		errno = saved_errno;
	}
	return ret;
}

NSB_EXPORT int
recvmmsg(int sock, struct mmsghdr *vec, unsigned vlen, int flags, struct timespec *timeout)
{
	int ret = real_recvmmsg(sock, vec, vlen, flags, timeout);

	if (ret > 0 && vec && wanted()) {
		int saved_errno = errno;

		for (int i = 0; i < ret; i++)
			if (vec[i].msg_hdr.msg_controllen)
				note_message(sock, &vec[i].msg_hdr);
		errno = saved_errno;
	}
	return ret;
}
