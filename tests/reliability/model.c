/* SPDX-License-Identifier: MIT */
/*
 * model - a randomised model test of libnosigbus (issue 7, item 1).
 *
 * Random sequences of mapping calls, file size changes and memory accesses
 * run on a small window of address space, and a small model of the kernel
 * plus the library predicts the outcome of every one of them: the byte an
 * access reads (file data, zeros, private data written earlier), or the
 * signal it dies of; the result of every call; the VMA layout in
 * /proc/self/maps; the file's size and contents; the library's counters.
 * Any divergence fails, with the seed and the shortest sequence that still
 * reproduces it (found by deleting operations one at a time).
 *
 * Process layout.  The driver (main) runs one worker per configuration
 * (library absent, or preloaded with a given NOSIGBUS_POLICY/FILL/STRICT):
 * the library reads its environment once, so each worker is a fresh exec.
 * A worker forks one child per sequence; the child reserves the window,
 * runs the operations and checks everything after each one.  An access the
 * model expects to be fatal runs in a grandchild, so the death is observed,
 * not suffered; one it expects to survive runs in the sequence child itself
 * (rescues must change that process), and if it kills it the worker sees
 * that.  The operations live in shared memory, so the worker can print and
 * replay them.
 *
 * The window is placed at a low address (MAP_FIXED_NOREPLACE), far below
 * where the kernel hands out addresses top-down, so that nothing else (the
 * library's own table, malloc) is ever placed in its holes.
 *
 * Failure injection (issue 10): calls that fail, or fail part-way, are
 * part of the sequences - RLIMIT_AS set just above the process's size (so
 * mmap and mremap growth fail with ENOMEM, also for mappings that rescues
 * split), munmap/mprotect/mremap over ranges with unmapped holes,
 * MAP_FIXED_NOREPLACE collisions, a MAP_FIXED that the kernel refuses after
 * it has unmapped the old range - and every length is unaligned now and
 * then (the kernel rounds it up).  Where the machine has hugetlbfs, a
 * second window of huge pages gets the same kinds of calls, with lengths
 * that are not whole huge pages.  Where the test runs as root, one backing
 * is a file on a full tmpfs (mounted by the test in a private mount
 * namespace) for the rule of issue 12: with NOSIGBUS_ERRORS=pass only pages
 * at or past the end of the file are rescued; a shared write fault inside
 * the file's size dies of SIGBUS and the file is unchanged, a read of a
 * hole inside it is rescued.
 *
 * After every call, failed ones too, a forked probe checks the library's
 * records against the model (and so against /proc/self/maps): every page
 * the model says is past the end of its file, or a hole of the full
 * tmpfs, is read and must be rescued exactly when the model says it is
 * protected; every other page gets an empty file mapped over it with a
 * raw mmap(2) (unseen by the library) and is read: a page the model says
 * is unprotected must die of SIGBUS (a stale record would rescue it), one
 * it says is protected must be rescued with its recorded protection (with
 * NOSIGBUS_ERRORS=pass the library may instead judge the fault to be
 * inside its file and pass it on).  The probe also checks that the
 * counters start from zero in a forked child.  The output of every
 * sequence process on stderr is checked: the library prints nothing.
 *
 * Fork advice (issue 19): madvise(MADV_DONTFORK, DOFORK, WIPEONFORK,
 * KEEPONFORK) of window ranges, as the kernel applies them; accesses in
 * forked children and the probe predict from what a fork child has
 * (model_fork(): no DONTFORK pages, so no records of them either, and
 * WIPEONFORK pages zero and not replaced).  Threads (issue 19): a
 * self-contained operation, run in a fresh exec under NOSIGBUS_FILL=range
 * or auto, where threads fault at once on one truncated protected
 * mapping, each writing its own pages upwards: every write lands, every
 * page past the end is replaced exactly once, none inside the file's size.
 *
 * The mapping calls past mmap (doc/mappings.md), as modes of the madvise
 * operation: mlock and munlock (splits the program makes, which an mremap
 * must not move piece by piece: EFAULT), MADV_REMOVE (punches shared
 * files; a rescued page of a shared mapping is taken), remap_file_pages
 * (pages mapped again at other file offsets: the end-of-file judgement
 * follows) and shmat(SHM_REMAP) then shmdt (the records there go).
 *
 * Recovery (issue 22): after an mremap that resizes (a move alone
 * changes nothing), and on nosigbus_refresh() (an operation of its own,
 * aimed mostly at a rescued shared page its file covers again), pages
 * rescued in protected shared file mappings that the file covers now are
 * the file again, except under NOSIGBUS_ERRORS=zero; refresh returns how
 * many.  Shown to fail with the library's mapping in refresh.c left out
 * (every configuration with rescues of shared pages, 2 seeds of 1000
 * sequences).
 *
 * Usage: model [--seed N] [--sequences N] [--ops N] [--config NAME]
 *              [--first K] [--trace]
 * A long soak: build/tests/reliability/model --sequences 100000
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbtest.h"

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif

#define W		16	/* window pages */
#define HW		4	/* huge window: huge pages */
#define NF		2	/* files */
#define HF		NF	/* the hugetlbfs file (always empty) */
#define SLACK		32	/* pages the library may need for itself under RLIMIT_AS */
#define FP		8	/* largest file size, in pages */
#define MAX_OPS		4096
#define MAX_SHRINK_RUNS	4000
#define MAX_SHRINK_SECS	180	/* shrinking stops after this */
#define CHILD_SECS	20	/* the watchdog: an access or probe child hangs */
#define SEQ_SECS	120	/* the watchdog: a sequence hangs */
#define THREADS_MAX	8
#define THREAD_PAGES	4	/* each thread's pages, written upwards: auto's window grows */

/* ---- configurations ----------------------------------------------------- */

struct config {
	const char *name;
	const char *policy;	/* NULL: the library is not loaded; "": not set */
	const char *fill;	/* NULL: not set (and below) */
	const char *strict;
	const char *errors;
	const char *what;
};

static const struct config configs[] = {
	{ "none", NULL, NULL, NULL, NULL, "no library: checks the model against the kernel" },
	/* The model follows one fill for every record of a run, and the
	 * default fill differs by mapping (range for a memory-backed file the
	 * policy protects, page for the rest): "default" sets the fill alone.
	 * The per-mapping default is checked by cli/log.bats ("the default
	 * fill") and e2e/weston.bats. */
	{ "default", "", "page", NULL, NULL, "only NOSIGBUS_FILL=page set: policy shm, errors peer (as pass: none received)" },
	{ "flag", "flag", "page", "0", NULL, "NOSIGBUS_POLICY=flag" },
	{ "shm", "shm", "page", "0", "pass", "memfd/tmpfs/hugetlbfs mappings protected" },
	{ "files", "files", "page", "0", NULL, "every file mapping protected" },
	{ "range", "shm", "range", "0", NULL, "NOSIGBUS_FILL=range" },
	{ "strict", "files", "page", "1", NULL, "NOSIGBUS_STRICT=1 with policy files" },
	{ "zero", "shm", "page", "0", "zero", "NOSIGBUS_ERRORS=zero: every SIGBUS rescued" },
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

/* ---- operations --------------------------------------------------------- */

enum op_type {
	OP_READ, OP_WRITE, OP_MMAP, OP_MUNMAP, OP_MPROTECT, OP_MREMAP,
	OP_TRUNCATE, OP_PWRITE, OP_PROTECT, OP_UNPROTECT, OP_LIMIT, OP_MADVISE, OP_THREADS,
	OP_REFRESH,
	/* the huge window: a, n, o, t count huge pages */
	OP_HMMAP, OP_HMUNMAP, OP_HMPROTECT, OP_HMREMAP, OP_HREAD, OP_HPROTECT, OP_HUNPROTECT,
};
/* op.mode for OP_MMAP; MM_BADOFF (huge window) is MAP_FIXED at an offset
 * that is not a whole huge page: refused after the old range is unmapped. */
enum { MM_FIXED, MM_NOREPLACE, MM_HINT, MM_BADOFF };
/* op.mode for OP_MREMAP; MR_DUP is old_len 0 (a second mapping of the
 * same shared pages), MR_DONTUNMAP moves and leaves the old range mapped. */
enum { MR_SHRINK, MR_GROW, MR_MOVE, MR_DONTUNMAP, MR_DUP };
/* op.mode for OP_MADVISE: the advices that decide what a fork child gets,
 * MADV_REMOVE (which a rescued page must not refuse), mlock and munlock
 * (which split VMAs as the program's own mprotect does), remap_file_pages
 * (n pages from a, mapped again from file page off), and shmat with
 * SHM_REMAP of an n-page segment at a, detached at once (a hole). */
enum { MA_DONTFORK, MA_DOFORK, MA_WIPEONFORK, MA_KEEPONFORK, MA_REMOVE, MA_MLOCK, MA_MUNLOCK,
       MA_REMAP_FILE, MA_SHMAT, MA_COUNT };
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#define MADV_KEEPONFORK 19
#endif
static const int madv_advice[] = { MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK, MADV_KEEPONFORK,
				   MADV_REMOVE, 0, 0, 0, 0 };
static const char *const madv_names[] = {
	"MADV_DONTFORK", "MADV_DOFORK", "MADV_WIPEONFORK", "MADV_KEEPONFORK", "MADV_REMOVE",
	"mlock", "munlock", "remap_file_pages", "shmat",
};

struct op {
	uint8_t type;
	uint8_t mode;
	uint8_t prot;
	uint8_t shared;
	uint8_t flag;		/* MAP_NOSIGBUS */
	uint8_t alt;		/* mmap64 / pkey_mprotect */
	int8_t file;		/* -1: anonymous */
	uint8_t val;
	int16_t a, n, o, t, off;
	uint32_t d;		/* bytes short of n pages: lengths are unaligned */
	uint32_t d2;		/* the same for mremap's old length (of o pages) */
};

/* ---- the model ---------------------------------------------------------- */

enum { K_NONE, K_ANON, K_FILE };
/* B_FULL: a file on a tmpfs that is always full (see setup()). */
enum backing { B_MEMFD, B_TMPFS, B_DISK, B_FULL };

struct mpage {
	uint8_t kind;
	uint8_t prot;		/* 0, PROT_READ or PROT_READ|PROT_WRITE */
	uint8_t shared;		/* K_FILE only */
	uint8_t prot_d;		/* protected by the library */
	uint8_t file;
	uint8_t cow;		/* private file page written: holds val */
	uint8_t val;		/* K_ANON contents, or the private copy */
	uint8_t rescued;	/* K_ANON made by a rescue */
	uint8_t rfile;		/* ... of a file page: 1 private, 2 shared (file, pgoff kept) */
	int pgoff;
	uint8_t dontfork;	/* MADV_DONTFORK: not in a fork child */
	uint8_t wipe;		/* MADV_WIPEONFORK: zeros in a fork child */
};

struct mfile {
	int size;		/* pages */
	uint8_t val[FP];
	uint8_t alloc[FP];	/* B_FULL: the page has blocks (else it is a hole) */
	uint8_t backing;
};

struct model {
	struct mpage pg[W];
	struct mpage hu[HW];	/* the huge window; file HF is always empty */
	struct mfile f[NF];
	uint64_t rescues;
	uint64_t pages;		/* replaced, in system pages */
	bool limited;		/* RLIMIT_AS is set */
	bool protect_used;	/* nosigbus_protect() was called */
};

/* What the kernel shows, page by page (from /proc/self/maps). */
struct kpage {
	bool mapped;
	bool r, w, s;
	unsigned long ino;
	uint64_t off;		/* file offset of this page */
	int vma;		/* index of its VMA */
	int vstart, vend;	/* the VMA, in window pages (may exceed the window) */
	bool zfile;		/* the library's zero file (shown as ino 0) */
};

/* What the kernel shows over one huge page of the huge window. */
struct kunit {
	int vmas;		/* VMAs overlapping it */
	size_t covered;		/* bytes of it they cover */
	bool uniform;		/* all with the same perms, inode, sharing */
	bool r, w, s;
	unsigned long ino;
	int vma;		/* index of its first VMA */
	int vstart, vend;	/* that VMA, in huge pages */
};

/* ---- shared between the worker and the sequence child ------------------ */

enum fail_class { F_NONE, F_ACCESS, F_RESULT, F_MAPS, F_FILE, F_STATS, F_DIED, F_SETUP,
		  F_RECORDS, F_STDERR };
static const char *const fail_names[] = {
	"none", "access outcome", "call result", "VMA layout", "file contents",
	"counters", "sequence process died", "setup", "protected ranges (probe)",
	"output on stderr",
};

struct counts {
	uint64_t sequences, ops, skipped, reads, writes, segv, bus, rescues, calls;
	uint64_t forked;	/* accesses that survive, run in a forked child */
	uint64_t remap_ok, remap_pieces, remap_failed;
	uint64_t probes, probed, failed_calls, limited_calls, huge_calls, full_faults;
};

struct shared {
	uint64_t seq_seed;
	int nops;		/* ops in the list */
	bool replay;		/* run ops[] as given instead of generating */
	int cur;		/* op being executed */
	int fail_class;
	int fail_op;
	int fail_type;
	char expect[256];	/* what the model predicts for the current access */
	char msg[8192];
	char setup[512];	/* the initial files, for printing */
	uint8_t got[3];		/* an access child's result */
	struct counts c;
	struct op ops[MAX_OPS];
};

/* ---- globals of a worker ------------------------------------------------ */

static size_t ps;
static const struct config *cfg;
static int cfg_index;
static bool model_lib;
static bool trace;
static bool old_kernel;		/* before 5.13: no MREMAP_DONTUNMAP of file mappings */
static size_t hs;			/* huge page size, 0: no hugetlbfs */
static const char *full_dir;		/* the full tmpfs, NULL: none */
static int ops_per_seq = 40;
static struct shared *sh;
static int (*p_get_stats)(void *, size_t);
static int (*p_protect)(void *, size_t);
static int (*p_unprotect)(void *, size_t);
static long (*p_refresh)(void *, size_t);

/* ---- the sequence child's state ----------------------------------------- */

/* The library's counters, with the field issue 12 adds (older ones leave it 0). */
struct model_stats {
	uint64_t rescues, pages, failures, mappings, unverified;
};

struct seq {
	uint64_t rng;
	struct model m;
	struct kpage k[W];
	struct kunit hk[HW];
	unsigned char *base;
	unsigned char *hbase;	/* the huge window, NULL: none */
	int fd[NF];
	unsigned long ino[NF];
	int hfd;		/* the (empty) hugetlbfs file */
	unsigned long hino;
	int probe_fd;		/* an empty memfd, for probes */
	int filler_fd;		/* fills the full tmpfs, -1: none */
	size_t limit;		/* RLIMIT_AS when m.limited */
	struct model_stats base_stats;
	bool no_regrow;		/* fill=range: files only shrink */
	bool policy_shm, policy_files, strict, errors_zero;
};

static uint64_t
splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int
rnd(struct seq *s, int n)
{
	return n <= 1 ? 0 : (int)(splitmix(&s->rng) % (uint64_t)n);
}

static uint8_t
rnd_val(struct seq *s)
{
	return (uint8_t)(1 + rnd(s, 255));
}

static uint64_t
seq_seed_of(uint64_t seed, int config, uint64_t k)
{
	uint64_t x = seed ^ ((uint64_t)config << 56) ^ (k * 0x2545f4914f6cdd1dull);

	return splitmix(&x);
}

/* ---- printing ----------------------------------------------------------- */

static const char *
prot_str(int prot)
{
	return prot == 0 ? "---" : prot == PROT_READ ? "r--" : "rw-";
}

static const char *
backing_str(int b)
{
	return b == B_MEMFD ? "memfd" : b == B_TMPFS ? "tmpfs" : b == B_DISK ? "disk" : "full tmpfs";
}

/* " - d" when a length is d bytes short of whole pages. */
static const char *
short_str(uint32_t d, char *buf, size_t len)
{
	if (!d)
		return "";
	snprintf(buf, len, " - %u", d);
	return buf;
}

static void
op_str(const struct op *op, char *buf, size_t len)
{
	static const char *const mm_mode[] = { "|MAP_FIXED", "|MAP_FIXED_NOREPLACE", "", "|MAP_FIXED" };
	char what[64], sdb[24], sd2b[24];
	const char *sd = short_str(op->d, sdb, sizeof(sdb));
	const char *sd2 = short_str(op->d2, sd2b, sizeof(sd2b));
	switch (op->type) {
	case OP_READ:
		snprintf(buf, len, "read page %d%s", op->a, op->alt ? " in a forked child" : "");
		break;
	case OP_WRITE:
		snprintf(buf, len, "write page %d = 0x%02x%s", op->a, op->val,
			 op->alt ? " in a forked child" : "");
		break;
	case OP_THREADS:
		snprintf(buf, len, "threads: %d at once, each writing its %d pages upwards of a fresh "
			 "%d-page protected mapping of a %d-page memfd, NOSIGBUS_FILL=%s", op->n,
			 THREAD_PAGES, op->n * THREAD_PAGES, op->o, op->mode ? "auto" : "range");
		break;
	case OP_MADVISE:
		if (op->mode == MA_SHMAT)
			snprintf(buf, len, "shmat(%d-page segment, page %d, SHM_REMAP), then shmdt",
				 op->n, op->a);
		else if (op->mode == MA_REMAP_FILE)
			snprintf(buf, len, "remap_file_pages(page %d, %d pages, file page %d)", op->a,
				 op->n, op->off);
		else if (op->mode == MA_MLOCK || op->mode == MA_MUNLOCK)
			snprintf(buf, len, "%s(page %d, %d pages%s)", madv_names[op->mode], op->a,
				 op->n, sd);
		else
			snprintf(buf, len, "madvise(page %d, %d pages%s, %s)", op->a, op->n, sd,
				 madv_names[op->mode]);
		break;
	case OP_MMAP:
		if (op->file < 0)
			snprintf(what, sizeof(what), "-1 (anonymous)");
		else
			snprintf(what, sizeof(what), "file%d, offset %d pages", op->file, op->off);
		snprintf(buf, len, "%s(page %d, %d pages%s, %s, %s%s%s%s, %s)",
			 op->alt ? "mmap64" : "mmap", op->a, op->n, sd, prot_str(op->prot),
			 op->shared ? "MAP_SHARED" : "MAP_PRIVATE",
			 op->file < 0 ? "|MAP_ANONYMOUS" : "", mm_mode[op->mode],
			 op->flag ? "|MAP_NOSIGBUS" : "", what);
		break;
	case OP_MUNMAP:
		snprintf(buf, len, "munmap(page %d, %d pages%s)", op->a, op->n, sd);
		break;
	case OP_MPROTECT:
		snprintf(buf, len, "%s(page %d, %d pages%s, %s%s)",
			 op->alt ? "pkey_mprotect" : "mprotect", op->a, op->n, sd,
			 prot_str(op->prot), op->alt ? ", -1" : "");
		break;
	case OP_MREMAP:
		if (op->mode == MR_MOVE || op->mode == MR_DUP || op->mode == MR_DONTUNMAP)
			snprintf(buf, len, "mremap(page %d, %d pages%s, %d pages%s, MREMAP_MAYMOVE|MREMAP_FIXED%s, page %d)",
				 op->a, op->o, sd2, op->n, sd, op->mode == MR_DONTUNMAP ? "|MREMAP_DONTUNMAP" : "",
				 op->t);
		else
			snprintf(buf, len, "mremap(page %d, %d pages%s, %d pages%s, 0)", op->a, op->o, sd2,
				 op->n, sd);
		break;
	case OP_TRUNCATE:
		snprintf(buf, len, "ftruncate(file%d, %d pages)", op->file, op->n);
		break;
	case OP_PWRITE:
		snprintf(buf, len, "pwrite(file%d, page %d, 0x%02x)", op->file, op->a, op->val);
		break;
	case OP_PROTECT:
		snprintf(buf, len, "nosigbus_protect(page %d, %d pages%s)", op->a, op->n, sd);
		break;
	case OP_UNPROTECT:
		snprintf(buf, len, "nosigbus_unprotect(page %d, %d pages%s)", op->a, op->n, sd);
		break;
	case OP_REFRESH:
		snprintf(buf, len, "nosigbus_refresh(page %d, %d pages%s)", op->a, op->n, sd);
		break;
	case OP_LIMIT:
		if (op->n < 0)
			snprintf(buf, len, "setrlimit(RLIMIT_AS, unlimited)");
		else
			snprintf(buf, len, "setrlimit(RLIMIT_AS, VmSize + %d pages)", op->n);
		break;
	case OP_HMMAP:
		snprintf(buf, len, "mmap(huge page %d, %d huge pages%s, %s, %s|MAP_NORESERVE%s%s, "
			 "hugetlbfs file, offset %s)", op->a, op->n, sd, prot_str(op->prot),
			 op->shared ? "MAP_SHARED" : "MAP_PRIVATE", mm_mode[op->mode],
			 op->flag ? "|MAP_NOSIGBUS" : "", op->mode == MM_BADOFF ? "1 page" : "0");
		break;
	case OP_HMUNMAP:
		snprintf(buf, len, "munmap(huge page %d, %d huge pages%s)", op->a, op->n, sd);
		break;
	case OP_HMPROTECT:
		snprintf(buf, len, "mprotect(huge page %d, %d huge pages%s, %s)", op->a, op->n, sd,
			 prot_str(op->prot));
		break;
	case OP_HMREMAP:
		if (op->mode == MR_MOVE)
			snprintf(buf, len, "mremap(huge page %d, %d huge pages%s, %d huge pages%s, "
				 "MREMAP_MAYMOVE|MREMAP_FIXED, huge page %d)", op->a, op->o, sd2, op->n,
				 sd, op->t);
		else
			snprintf(buf, len, "mremap(huge page %d, %d huge pages%s, %d huge pages%s, 0)",
				 op->a, op->o, sd2, op->n, sd);
		break;
	case OP_HREAD:
		snprintf(buf, len, "read huge page %d, page %d of it%s", op->a, op->n,
			 op->alt ? " in a forked child" : "");
		break;
	case OP_HPROTECT:
		snprintf(buf, len, "nosigbus_protect(huge page %d, %d huge pages%s)", op->a, op->n, sd);
		break;
	case OP_HUNPROTECT:
		snprintf(buf, len, "nosigbus_unprotect(huge page %d, %d huge pages%s)", op->a, op->n, sd);
		break;
	default:
		snprintf(buf, len, "op %d?", op->type);
	}
}

static void
page_str(const struct seq *s, int i, char *buf, size_t len)
{
	const struct mpage *p = &s->m.pg[i];

	switch (p->kind) {
	case K_NONE:
		snprintf(buf, len, "unmapped");
		break;
	case K_ANON:
		snprintf(buf, len, "%s anonymous%s%s, contents 0x%02x", prot_str(p->prot),
			 p->rescued ? " (rescued)" : "", p->prot_d ? ", protected" : "", p->val);
		break;
	default:
		snprintf(buf, len, "%s %s file%d page %d (size %d)%s%s", prot_str(p->prot),
			 p->shared ? "shared" : "private", p->file, p->pgoff,
			 s->m.f[p->file].size, p->prot_d ? ", protected" : "",
			 p->cow ? ", private copy" : "");
	}
}

static void
unit_str(const struct seq *s, int i, char *buf, size_t len)
{
	const struct mpage *p = &s->m.hu[i];

	(void)s;
	if (p->kind == K_NONE)
		snprintf(buf, len, "unmapped");
	else if (p->kind == K_ANON)
		snprintf(buf, len, "%s anonymous%s%s", prot_str(p->prot), p->rescued ? " (rescued)" : "",
			 p->prot_d ? ", protected" : "");
	else
		snprintf(buf, len, "%s %s hugetlbfs file (empty)%s", prot_str(p->prot),
			 p->shared ? "shared" : "private", p->prot_d ? ", protected" : "");
}

/* ---- failing (in the sequence child) ------------------------------------ */

static void __attribute__((noreturn, format(printf, 3, 4)))
fail(struct seq *s, int cls, const char *fmt, ...)
{
	size_t len;
	va_list ap;

	sh->fail_class = cls;
	sh->fail_op = sh->cur;
	sh->fail_type = sh->cur < sh->nops ? sh->ops[sh->cur].type : -1;
	va_start(ap, fmt);
	vsnprintf(sh->msg, sizeof(sh->msg), fmt, ap);
	va_end(ap);
	/* The model's view of the window helps reading the failure. */
	len = strlen(sh->msg);
	for (int i = 0; i < W && len < sizeof(sh->msg) - 200; i++) {
		char b[160];

		page_str(s, i, b, sizeof(b));
		len += (size_t)snprintf(sh->msg + len, sizeof(sh->msg) - len,
					"\n      model page %2d: %s", i, b);
	}
	for (int i = 0; s->hbase && i < HW && len < sizeof(sh->msg) - 200; i++) {
		char b[160];

		unit_str(s, i, b, sizeof(b));
		len += (size_t)snprintf(sh->msg + len, sizeof(sh->msg) - len,
					"\n      model huge page %d: %s", i, b);
	}
	_exit(1);
}

/* ---- the kernel's view -------------------------------------------------- */

static char maps_buf[1 << 18];

static size_t
read_maps(void)
{
	size_t have = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	for (;;) {
		ssize_t n = read(fd, maps_buf + have, sizeof(maps_buf) - 1 - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have == sizeof(maps_buf) - 1)
			break;
	}
	close(fd);
	maps_buf[have] = '\0';
	return have;
}

/* The lines of /proc/self/maps that touch the windows, for messages. */
static void
window_maps(const struct seq *s, char *out, size_t len)
{
	uintptr_t lo = (uintptr_t)s->base, hi = lo + W * ps;
	uintptr_t hlo = (uintptr_t)s->hbase, hhi = hlo + (s->hbase ? HW * hs : 0);
	size_t used = 0;
	char *line = maps_buf;

	out[0] = '\0';
	read_maps();
	while (line && *line) {
		char *nl = strchr(line, '\n');
		unsigned long a, b;

		if (nl)
			*nl = '\0';
		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && b > lo && a < hi && used < len)
			used += (size_t)snprintf(out + used, len - used, "\n      %s  [pages %ld..%ld)",
						 line, (long)(a - lo) / (long)ps, (long)(b - lo) / (long)ps);
		else if (sscanf(line, "%lx-%lx", &a, &b) == 2 && b > hlo && a < hhi && used < len)
			used += (size_t)snprintf(out + used, len - used,
						 "\n      %s  [huge pages %.2f..%.2f)", line,
						 (double)((long)a - (long)hlo) / (double)hs,
						 (double)((long)b - (long)hlo) / (double)hs);
		line = nl ? nl + 1 : NULL;
	}
}

/* One VMA [a, b) over the huge window: what each huge page sees of it. */
static void
kernel_units(struct seq *s, unsigned long a, unsigned long b, const char *perms,
	     unsigned long ino, int nv)
{
	uintptr_t hlo = (uintptr_t)s->hbase;

	for (int u = 0; u < HW; u++) {
		uintptr_t ua = hlo + (size_t)u * hs, ub = ua + hs;
		struct kunit *k = &s->hk[u];
		bool r = perms[0] == 'r', w = perms[1] == 'w', sh_ = perms[3] == 's';

		if (b <= ua || a >= ub)
			continue;
		if (!k->vmas) {
			k->r = r;
			k->w = w;
			k->s = sh_;
			k->ino = ino;
			k->uniform = true;
			k->vma = nv;
			k->vstart = (int)(((long)a - (long)hlo) / (long)hs);
			k->vend = (int)(((long)b - (long)hlo + (long)hs - 1) / (long)hs);
		} else if (k->r != r || k->w != w || k->s != sh_ || k->ino != ino) {
			k->uniform = false;
		}
		k->vmas++;
		k->covered += (b < ub ? b : ub) - (a > ua ? a : ua);
	}
}

static void
read_kernel(struct seq *s)
{
	uintptr_t lo = (uintptr_t)s->base, hi = lo + W * ps;
	uintptr_t hlo = (uintptr_t)s->hbase, hhi = hlo + (s->hbase ? HW * hs : 0);
	char *line = maps_buf;
	int nv = 0;

	memset(s->k, 0, sizeof(s->k));
	memset(s->hk, 0, sizeof(s->hk));
	read_maps();
	while (line && *line) {
		char *nl = strchr(line, '\n');
		unsigned long a, b, off, ino;
		char perms[8];

		if (nl)
			*nl = '\0';
		/* A fill read first is mapped from the library's zero file:
		 * a rescue's page, anonymous memory to the model. */
		bool zero_file = strstr(line, "/memfd:nosigbus-zero") != NULL;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %lu", &a, &b, perms, &off, &ino) == 5 &&
		    b > lo && a < hi) {
			if (zero_file)
				ino = off = 0;
			for (uintptr_t x = a < lo ? lo : a; x < b && x < hi; x += ps) {
				struct kpage *k = &s->k[(x - lo) / ps];

				k->mapped = true;
				k->r = perms[0] == 'r';
				k->w = perms[1] == 'w';
				k->s = perms[3] == 's';
				k->ino = ino;
				k->zfile = zero_file;
				k->off = off + (x - a);
				k->vma = nv;
				k->vstart = (int)(((long)a - (long)lo) / (long)ps);
				k->vend = (int)(((long)b - (long)lo) / (long)ps);
			}
			nv++;
		} else if (s->hbase && sscanf(line, "%lx-%lx %7s %lx %*s %lu", &a, &b, perms, &off, &ino) == 5 &&
			   b > hlo && a < hhi) {
			kernel_units(s, a, b, perms, ino, nv++);
		}
		line = nl ? nl + 1 : NULL;
	}
}

/* ---- checks after every operation --------------------------------------- */

static bool
mpage_matches(const struct seq *s, const struct mpage *p, const struct kpage *k, bool as_anon)
{
	if (p->kind == K_NONE)
		return !k->mapped;
	if (!k->mapped || k->r != !!(p->prot & PROT_READ) || k->w != !!(p->prot & PROT_WRITE))
		return false;
	if (p->kind == K_ANON || as_anon)
		return k->ino == 0 && !k->s;
	return k->ino == s->ino[p->file] && k->s == !!p->shared &&
	       k->off == (uint64_t)p->pgoff * ps;
}

static bool
page_matches(const struct seq *s, int i, bool as_anon)
{
	return mpage_matches(s, &s->m.pg[i], &s->k[i], as_anon);
}

static bool
unit_matches(const struct seq *s, int u)
{
	const struct mpage *p = &s->m.hu[u];
	const struct kunit *k = &s->hk[u];

	if (p->kind == K_NONE)
		return k->vmas == 0;
	if (!k->uniform || k->covered != hs || k->r != !!(p->prot & PROT_READ) ||
	    k->w != !!(p->prot & PROT_WRITE))
		return false;
	if (p->kind == K_ANON)
		return k->ino == 0 && !k->s;
	return k->vmas == 1 && k->ino == s->hino && k->s == !!p->shared;
}

/* The kernel shows page i as the model has it; with fill=range a page that
 * would be rescued on its next access may be a zero page already. */
static bool
page_as_modelled(const struct seq *s, int i)
{
	const struct mpage *p = &s->m.pg[i];
	bool maybe_filled = s->no_regrow && p->kind == K_FILE && p->prot_d &&
			    p->pgoff >= s->m.f[p->file].size;

	return page_matches(s, i, false) || (maybe_filled && page_matches(s, i, true));
}

static void
check_layout(struct seq *s)
{
	read_kernel(s);
	for (int u = 0; s->hbase && u < HW; u++) {
		char mine[160], theirs[4096];

		if (unit_matches(s, u))
			continue;
		unit_str(s, u, mine, sizeof(mine));
		window_maps(s, theirs, sizeof(theirs));
		fail(s, F_MAPS, "huge page %d: the model has it %s; /proc/self/maps shows:%s",
		     u, mine, theirs);
	}
	for (int i = 0; i < W; i++) {
		char mine[160], theirs[4096];

		if (page_as_modelled(s, i))
			continue;
		page_str(s, i, mine, sizeof(mine));
		window_maps(s, theirs, sizeof(theirs));
		fail(s, F_MAPS, "page %d: the model has it %s; /proc/self/maps shows:%s",
		     i, mine, theirs);
	}
}

static void
check_files(struct seq *s)
{
	static unsigned char buf[FP * 65536];

	for (int f = 0; f < NF; f++) {
		const struct mfile *mf = &s->m.f[f];
		struct stat st;

		if (fstat(s->fd[f], &st) < 0 || st.st_size != (off_t)((size_t)mf->size * ps))
			fail(s, F_FILE, "file%d: size %lld, the model says %d pages (%zu bytes)",
			     f, (long long)st.st_size, mf->size, (size_t)mf->size * ps);
		if (mf->size == 0)
			continue;
		if (pread(s->fd[f], buf, (size_t)mf->size * ps, 0) != (ssize_t)((size_t)mf->size * ps))
			fail(s, F_FILE, "file%d: pread: %s", f, strerror(errno));
		for (int p = 0; p < mf->size; p++) {
			const unsigned char *b = buf + (size_t)p * ps;

			if (b[0] != mf->val[p] || b[ps / 2] != mf->val[p] || b[ps - 1] != mf->val[p])
				fail(s, F_FILE, "file%d page %d holds 0x%02x 0x%02x 0x%02x, the model says 0x%02x",
				     f, p, b[0], b[ps / 2], b[ps - 1], mf->val[p]);
		}
	}
}

static void
check_stats(struct seq *s)
{
	struct model_stats st = { 0 };
	uint64_t rescues, pages;

	if (!p_get_stats)
		return;
	if (p_get_stats(&st, sizeof(st)) < 0)
		fail(s, F_STATS, "nosigbus_get_stats: %s", strerror(errno));
	/* Rescues without knowing the file's size: only where the library
	 * was told about a mapping it did not make (nosigbus_protect). */
	if (st.unverified - s->base_stats.unverified > st.rescues - s->base_stats.rescues ||
	    (st.unverified != s->base_stats.unverified && !s->m.protect_used))
		fail(s, F_STATS, "nosigbus_get_stats: %" PRIu64 " unverified rescues of %" PRIu64
		     ", though every protected mapping was made through mmap() with its file",
		     st.unverified - s->base_stats.unverified, st.rescues - s->base_stats.rescues);
	rescues = st.rescues - s->base_stats.rescues;
	pages = st.pages - s->base_stats.pages;
	if (st.failures != s->base_stats.failures)
		fail(s, F_STATS, "nosigbus_get_stats: %" PRIu64 " failures", st.failures);
	if (s->no_regrow) {
		if (rescues > s->m.rescues || pages < rescues)
			fail(s, F_STATS, "fill=range: %" PRIu64 " rescues, %" PRIu64
			     " pages; the model saw %" PRIu64 " faults to rescue",
			     rescues, pages, s->m.rescues);
	} else if (rescues != s->m.rescues || pages != s->m.pages) {
		fail(s, F_STATS, "nosigbus_get_stats: %" PRIu64 " rescues, %" PRIu64
		     " pages; the model says %" PRIu64 " and %" PRIu64, rescues, pages,
		     s->m.rescues, s->m.pages);
	}
}

/* ---- model transitions -------------------------------------------------- */

/* A_EITHER: rescued (reads what was written) or SIGBUS; run in a child. */
enum { A_OK, A_SEGV, A_BUS, A_EITHER };

static bool
policy_covers(const struct seq *s, int file)
{
	int b = s->m.f[file].backing;

	return s->policy_files || (s->policy_shm && (b == B_MEMFD || b == B_TMPFS || b == B_FULL));
}

/* A rescue: the page becomes a private zero page, then takes the write. */
static uint8_t
model_rescue(struct seq *s, struct mpage *p, bool write, uint8_t val)
{
	p->rfile = p->kind == K_FILE ? (uint8_t)(1 + !!p->shared) : 0;
	p->kind = K_ANON;
	p->shared = 0;
	p->cow = 0;
	p->rescued = 1;
	p->val = write ? val : 0;
	s->m.rescues++;
	s->m.pages++;
	return p->val;
}

/* An access's outcome; changes the model only when it survives. */
static int
model_access(struct seq *s, int i, bool write, uint8_t val, uint8_t *out, char *why, size_t wlen)
{
	struct mpage *p = &s->m.pg[i];
	struct mfile *f;

	if (p->kind == K_NONE) {
		snprintf(why, wlen, "SIGSEGV (unmapped)");
		return A_SEGV;
	}
	if (!(p->prot & PROT_READ) || (write && !(p->prot & PROT_WRITE))) {
		snprintf(why, wlen, "SIGSEGV (%s page)", prot_str(p->prot));
		return A_SEGV;
	}
	if (p->kind == K_ANON || (!p->shared && p->cow)) {
		if (write)
			p->val = val;
		*out = p->val;
		snprintf(why, wlen, "0x%02x (%s)", *out,
			 p->kind == K_ANON ? (p->rescued ? "rescued page" : "anonymous page")
					   : "private copy");
		return A_OK;
	}
	f = &s->m.f[p->file];
	if (p->pgoff < f->size && f->backing == B_FULL && !f->alloc[p->pgoff]) {
		/* A hole of a full tmpfs: the file system cannot back the page,
		 * so the fault is inside the file's size (issue 12). */
		const char *what = write ? (p->shared ? "shared write" : "private write") : "read";

		sh->c.full_faults++;
		if (!p->prot_d) {
			snprintf(why, wlen, "SIGBUS (%s of a hole of file%d page %d on a full tmpfs, "
				 "unprotected)", what, p->file, p->pgoff);
			return A_BUS;
		}
		/* Inside the size: the program's, read or write, shared or
		 * private (issue 19 withdrew the "hole" exception). */
		if (!s->errors_zero) {
			snprintf(why, wlen, "SIGBUS (%s of a hole of file%d page %d on a full tmpfs: "
				 "an error inside the file's size reaches the program)", what,
				 p->file, p->pgoff);
			return A_BUS;
		}
		*out = model_rescue(s, p, write, val);
		snprintf(why, wlen, "0x%02x (rescue: %s of a hole of file%d page %d on a full tmpfs, "
			 "NOSIGBUS_ERRORS=zero)", *out, what, p->file, p->pgoff);
		return A_OK;
	}
	if (p->pgoff < f->size) {
		if (!write) {
			*out = f->val[p->pgoff];
		} else if (p->shared) {
			f->val[p->pgoff] = val;
			*out = val;
		} else {
			p->cow = 1;
			p->val = val;
			*out = val;
		}
		snprintf(why, wlen, "0x%02x (file%d page %d%s)", *out, p->file, p->pgoff,
			 write && !p->shared ? ", now a private copy" : "");
		return A_OK;
	}
	if (!p->prot_d) {
		snprintf(why, wlen, "SIGBUS (file%d page %d, past its end at %d, unprotected)",
			 p->file, p->pgoff, f->size);
		return A_BUS;
	}
	*out = model_rescue(s, p, write, val);
	snprintf(why, wlen, "0x%02x (rescue: file%d page %d is past its end at %d)",
		 *out, p->file, p->pgoff, f->size);
	return A_OK;
}

static void
model_truncate(struct seq *s, int file, int size)
{
	struct mfile *f = &s->m.f[file];

	for (int p = size; p < FP; p++)
		f->val[p] = f->alloc[p] = 0;
	/* Truncation drops the private copies past the end too (the kernel
	 * unmaps them: unmap_mapping_range(..., even_cows=1)). */
	for (int i = 0; i < W; i++) {
		struct mpage *p = &s->m.pg[i];

		if (p->kind == K_FILE && p->file == file && p->pgoff >= size)
			p->cow = 0;
	}
	f->size = size;
}

/*
 * What a fork child has: no MADV_DONTFORK pages (unmapped there, and so
 * without records), and MADV_WIPEONFORK pages as fresh zeros (nothing of
 * them replaced: the library clears their account in the child).
 */
static void
model_fork(struct model *m)
{
	for (int i = 0; i < W; i++) {
		struct mpage *p = &m->pg[i];

		if (p->kind == K_NONE)
			continue;
		if (p->dontfork) {
			memset(p, 0, sizeof(*p));
		} else if (p->wipe) {
			p->val = 0;
			p->cow = 0;
			p->rescued = 0;
		}
	}
}

/* ---- executing one operation -------------------------------------------- */

static unsigned char *
page_addr(const struct seq *s, int i)
{
	return s->base + (size_t)i * ps;
}

static void
touch(unsigned char *p, bool write, uint8_t val, uint8_t got[3])
{
	volatile unsigned char *v = p;

	if (write)
		memset(p, val, ps);
	got[0] = v[0];
	got[1] = v[ps / 2];
	got[2] = v[ps - 1];
}

/*
 * Waits for pid; after `secs` seconds it is killed (SIGKILL: a process
 * spinning in a fault never sees another signal) and -1 is returned.
 */
static int
wait_watchdog(pid_t pid, int secs, int *status)
{
	struct timespec t0, t, nap = { 0, 1000 * 1000 };
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid) {
			if (pfd >= 0)
				close(pfd);
			return 0;
		}
		if (r < 0 && errno != EINTR) {
			if (pfd >= 0)
				close(pfd);
			return -2;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= secs)
			break;
		/* A pidfd becomes readable when the child ends: no polling delay. */
		if (pfd >= 0) {
			struct pollfd pl = { pfd, POLLIN, 0 };

			poll(&pl, 1, 1000);
		} else {
			nanosleep(&nap, NULL);
		}
	}
	if (pfd >= 0)
		close(pfd);
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return -1;
}

/* Waits for an access or probe child; returns its status. */
static int
wait_child(struct seq *s, pid_t pid)
{
	int status, r = wait_watchdog(pid, nsbt_scaled(CHILD_SECS), &status);

	if (r == -2)
		fail(s, F_SETUP, "waitpid: %s", strerror(errno));
	if (r == -1)
		fail(s, F_DIED, "a child (an access, or the probe of the records) was still running "
		     "after %d s and was killed: a hang (a rescue that never ends?); the model "
		     "expects %s", nsbt_scaled(CHILD_SECS), sh->expect[0] ? sh->expect : "it to finish");
	return status;
}

static void
run_access(struct seq *s, const struct op *op)
{
	bool write = op->type == OP_WRITE;
	const char *what = write ? "write+read" : "read";
	uint8_t expect = 0, got[3];
	char why[200];
	int r, status;
	pid_t pid;

	/* Predict on a copy: only a surviving access changes the model. */
	struct model saved = s->m;

	r = model_access(s, op->a, write, op->val, &expect, why, sizeof(why));
	snprintf(sh->expect, sizeof(sh->expect), "%s", why);
	if (write)
		sh->c.writes++;
	else
		sh->c.reads++;
	if (r == A_OK && !op->alt) {
		/* Must survive: do it here, where a rescue has to stick. */
		touch(page_addr(s, op->a), write, op->val, got);
		if (got[0] != expect || got[1] != expect || got[2] != expect)
			fail(s, F_ACCESS, "%s page %d: got 0x%02x 0x%02x 0x%02x, the model expects %s",
			     what, op->a, got[0], got[1], got[2], why);
		return;
	}
	/* In a child: a death is observed, not suffered; a rescue there
	 * stays there, but what it writes to a shared file page does not.
	 * The child has what a fork gives it (MADV_DONTFORK, WIPEONFORK). */
	s->m = saved;
	model_fork(&s->m);
	r = model_access(s, op->a, write, op->val, &expect, why, sizeof(why));
	snprintf(sh->expect, sizeof(sh->expect), "%s (in a fork child)", why);
	{
		struct mfile files[NF];

		memcpy(files, s->m.f, sizeof(files));
		s->m = saved;
		if (r == A_OK)
			memcpy(s->m.f, files, sizeof(files));
	}
	memset(sh->got, 0, sizeof(sh->got));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail(s, F_SETUP, "fork: %s", strerror(errno));
	if (pid == 0) {
		touch(page_addr(s, op->a), write, op->val, sh->got);
		_exit(0);
	}
	status = wait_child(s, pid);
	if (r == A_EITHER) {
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) {
			sh->c.bus++;
			return;
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && sh->got[0] == expect &&
		    sh->got[1] == expect && sh->got[2] == expect) {
			sh->c.forked++;
			return;
		}
		fail(s, F_ACCESS, "%s page %d in a forked child: it %s and read 0x%02x 0x%02x 0x%02x; "
		     "the model expects %s", what, op->a, nsbt_status_str(status), sh->got[0],
		     sh->got[1], sh->got[2], why);
	}
	if (r == A_OK) {
		sh->c.forked++;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail(s, F_ACCESS, "%s page %d in a forked child: it %s; the model expects %s",
			     what, op->a, nsbt_status_str(status), why);
		if (sh->got[0] != expect || sh->got[1] != expect || sh->got[2] != expect)
			fail(s, F_ACCESS, "%s page %d in a forked child: got 0x%02x 0x%02x 0x%02x, "
			     "the model expects %s", what, op->a, sh->got[0], sh->got[1], sh->got[2], why);
		return;
	}
	if (WIFSIGNALED(status) && WTERMSIG(status) == (r == A_SEGV ? SIGSEGV : SIGBUS)) {
		if (r == A_SEGV)
			sh->c.segv++;
		else
			sh->c.bus++;
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		fail(s, F_ACCESS, "%s page %d survived and read 0x%02x 0x%02x 0x%02x; the model expects %s",
		     what, op->a, sh->got[0], sh->got[1], sh->got[2], why);
	fail(s, F_ACCESS, "%s page %d: the child %s; the model expects %s",
	     what, op->a, nsbt_status_str(status), why);
}

static void
expect_result(struct seq *s, bool ok, int err, long ret, int got_errno)
{
	char b[256];

	sh->c.calls++;
	if (!ok)
		sh->c.failed_calls++;
	if (ok && ret == 0)
		return;
	if (!ok && ret < 0 && (got_errno == err || err == 0))
		return;
	op_str(&sh->ops[sh->cur], b, sizeof(b));
	if (ok)
		fail(s, F_RESULT, "%s failed (%s); the model expects success", b, strerror(got_errno));
	if (ret == 0)
		fail(s, F_RESULT, "%s succeeded; the model expects %s", b, strerror(err));
	fail(s, F_RESULT, "%s failed with %s; the model expects %s", b, strerror(got_errno),
	     strerror(err));
}

/*
 * How a call must end.  EITHER: success (the model follows) or failure
 * with the expected errno, or ENOMEM (the library may need memory of its
 * own under RLIMIT_AS); on failure nothing may change, except what the
 * call's `resync` range allows (see resync()).
 */
enum { MUST_FAIL, MUST_SUCCEED, EITHER };

/* An EITHER call's result: true if it succeeded (then the model follows). */
static bool
either_result(struct seq *s, bool ok, int err, int err2, int got_errno)
{
	char b[256];

	sh->c.calls++;
	if (ok)
		return true;
	sh->c.failed_calls++;
	if (got_errno == ENOMEM || (err && got_errno == err) || (err2 && got_errno == err2))
		return false;
	op_str(&sh->ops[sh->cur], b, sizeof(b));
	fail(s, F_RESULT, "%s failed with %s; the model allows success%s%s%s%s or ENOMEM", b,
	     strerror(got_errno), err ? ", " : "", err ? strerror(err) : "", err2 ? ", " : "",
	     err2 ? strerror(err2) : "");
}

/*
 * After a call that failed: the kernel may have unmapped [lo, lo + n) of
 * a window (a MAP_FIXED refused in the file's mmap hook; MREMAP_FIXED's
 * destination, unmapped before some failures).  Pages the kernel shows
 * unmapped there are unmapped in the model too; nothing else may change,
 * and the probe then checks that nothing there is protected.
 */
static void
resync(struct seq *s, bool huge, int lo, int n)
{
	read_kernel(s);
	for (int i = lo; i < lo + n; i++) {
		if (huge && i < HW && s->hk[i].vmas == 0)
			memset(&s->m.hu[i], 0, sizeof(s->m.hu[i]));
		else if (!huge && i < W && !s->k[i].mapped)
			memset(&s->m.pg[i], 0, sizeof(s->m.pg[i]));
	}
}

/* VmSize in bytes, without malloc (the sequence may be at its RLIMIT_AS). */
static size_t
vm_size(void)
{
	char buf[4096], *v;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	v = strstr(buf, "VmSize:");
	return v ? (size_t)strtoull(v + 7, NULL, 10) * 1024 : 0;
}

/* Pages the address space may still grow by; a lot when there is no limit. */
static long
headroom(const struct seq *s)
{
	size_t now;

	if (!s->m.limited)
		return 1L << 40;
	now = vm_size();
	return now >= s->limit ? 0 : (long)((s->limit - now) / ps);
}

/*
 * Under RLIMIT_AS: growth by at least need_min pages (at most need_max,
 * depending on what the kernel counts first) must fail if it exceeds the
 * room left, may fail if it comes close, else is fine.
 */
static void
limit_outcome(const struct seq *s, long need_min, long need_max, int *how, int *err)
{
	long room;

	/* A call that fails anyway, or may, fails first for its own reason. */
	if (!s->m.limited || need_max <= 0 || *how != MUST_SUCCEED)
		return;
	room = headroom(s);
	if (need_min > room) {
		*how = MUST_FAIL;
		*err = ENOMEM;
	} else if (need_max + SLACK > room) {
		*how = EITHER;
	}
	sh->c.limited_calls++;
}

static bool
range_free(const struct seq *s, int a, int n)
{
	for (int i = a; i < a + n; i++)
		if (s->m.pg[i].kind != K_NONE)
			return false;
	return true;
}

static int
mapped_pages(const struct seq *s, int a, int n)
{
	int c = 0;

	for (int i = a; i < a + n && i < W; i++)
		c += s->m.pg[i].kind != K_NONE;
	return c;
}

static size_t
op_len(const struct op *op, int pages)
{
	return (size_t)pages * ps - op->d;
}

static void
run_mmap(struct seq *s, const struct op *op)
{
	int flags = (op->shared ? MAP_SHARED : MAP_PRIVATE) |
		    (op->file < 0 ? MAP_ANONYMOUS : 0) | (op->flag ? MAP_NOSIGBUS : 0);
	int fd = op->file < 0 ? -1 : s->fd[op->file];
	unsigned char *want = page_addr(s, op->a);
	int how = MUST_SUCCEED, err = 0;
	bool ok, prot_d;
	long need;
	void *p;

	if (op->mode == MM_FIXED)
		flags |= MAP_FIXED;
	else if (op->mode == MM_NOREPLACE)
		flags |= MAP_FIXED_NOREPLACE;

	prot_d = op->flag || (op->file >= 0 && policy_covers(s, op->file));
	if (!model_lib)
		prot_d = false;
	if (model_lib && s->strict && op->shared) {
		if (op->flag) {
			how = MUST_FAIL;
			err = EINVAL;
		}
		prot_d = false;		/* policies follow the v2 patch too */
	}
	if (how != MUST_FAIL && op->mode == MM_NOREPLACE && !range_free(s, op->a, op->n)) {
		how = MUST_FAIL;
		err = EEXIST;
	}
	need = op->n - (op->mode == MM_FIXED ? mapped_pages(s, op->a, op->n) : 0);
	limit_outcome(s, need, need, &how, &err);
	errno = 0;
	if (op->alt)
		p = mmap64(want, op_len(op, op->n), op->prot, flags, fd, (off64_t)op->off * (off64_t)ps);
	else
		p = mmap(want, op_len(op, op->n), op->prot, flags, fd, (off_t)op->off * (off_t)ps);
	if (p != MAP_FAILED && p != want) {
		char b[256], m[4096];

		op_str(op, b, sizeof(b));
		window_maps(s, m, sizeof(m));
		munmap(p, (size_t)op->n * ps);
		fail(s, F_RESULT, "%s returned %p, not page %d (%p); the window:%s",
		     b, p, op->a, (void *)want, m);
	}
	if (how == EITHER) {
		ok = either_result(s, p != MAP_FAILED, err, 0, errno);
		if (!ok && op->mode == MM_FIXED)
			resync(s, false, op->a, op->n);
	} else {
		expect_result(s, how == MUST_SUCCEED, err, p == MAP_FAILED ? -1 : 0, errno);
		ok = how == MUST_SUCCEED;
	}
	if (!ok)
		return;
	for (int j = 0; j < op->n; j++) {
		struct mpage *pg = &s->m.pg[op->a + j];

		memset(pg, 0, sizeof(*pg));
		pg->kind = op->file < 0 ? K_ANON : K_FILE;
		pg->prot = op->prot;
		pg->shared = op->file >= 0 && op->shared;
		pg->prot_d = prot_d;
		pg->file = op->file < 0 ? 0 : (uint8_t)op->file;
		pg->pgoff = op->off + j;
	}
}

static void
run_munmap(struct seq *s, const struct op *op)
{
	errno = 0;
	expect_result(s, true, 0, munmap(page_addr(s, op->a), op_len(op, op->n)), errno);
	for (int i = op->a; i < op->a + op->n; i++)
		memset(&s->m.pg[i], 0, sizeof(s->m.pg[i]));
}

static void read_locked(const struct seq *s, bool *locked);

static void
run_mprotect(struct seq *s, const struct op *op)
{
	bool ok, locked[W];
	int j, ret;

	/* The kernel changes every VMA up to the first hole, then fails. */
	for (j = 0; j < op->n && s->m.pg[op->a + j].kind != K_NONE; j++)
		;
	ok = j == op->n;
	if (op->prot & PROT_WRITE)
		read_locked(s, locked);
	else
		memset(locked, 0, sizeof(locked));
	errno = 0;
	if (op->alt) {
		ret = pkey_mprotect(page_addr(s, op->a), op_len(op, op->n), op->prot, -1);
		if (ret < 0 && errno == ENOSYS)
			return;
	} else {
		ret = mprotect(page_addr(s, op->a), op_len(op, op->n), op->prot);
	}
	expect_result(s, ok, ENOMEM, ret, errno);
	for (int i = 0; i < j; i++) {
		struct mpage *p = &s->m.pg[op->a + i];

		/* Write given to a locked private mapping of a file: the
		 * kernel copies its pages at once (mprotect_fixup populates
		 * it, breaking COW), so a later write to the file is not
		 * seen there.  Past the file's end there is nothing to copy. */
		if ((op->prot & PROT_WRITE) && !(p->prot & PROT_WRITE) && locked[op->a + i] &&
		    p->kind == K_FILE && !p->shared && !p->cow && p->pgoff < s->m.f[p->file].size) {
			p->cow = 1;
			p->val = s->m.f[p->file].val[p->pgoff];
		}
		p->prot = op->prot;
	}
}

/*
 * How an mremap must end.  The kernel moves one VMA (several at once on
 * newer kernels, if the size stays); the library moves a protected
 * mapping that rescues split into several VMAs piece by piece (as one
 * mapping, like the kernel patch would).  A range with holes may go either
 * way, as may anything else not covered here.
 */
static bool
single_vma(const struct seq *s, int a, int o)
{
	for (int i = a; i < a + o; i++)
		if (!s->k[i].mapped || s->k[i].vma != s->k[a].vma)
			return false;
	return true;
}

/*
 * Does the library move [a, a + o) piece by piece?  Only where its own
 * rescues alone split the mapping: every anonymous VMA there rescued
 * pages, no two VMAs of the file side by side, one protection.  A split
 * the program made (mprotect, madvise) is the kernel's EFAULT.
 */
static bool
rescue_split_only(const struct seq *s, int a, int o)
{
	bool last_file = false;

	for (int i = a; i < a + o;) {
		int v = s->k[i].vma, j = i;
		bool anon = s->k[i].ino == 0 && !s->k[i].s;

		if (!s->k[i].mapped || s->k[i].r != s->k[a].r || s->k[i].w != s->k[a].w ||
		    (!anon && last_file))
			return false;
		for (; j < a + o && s->k[j].mapped && s->k[j].vma == v; j++)
			if (anon && !(s->m.pg[j].kind == K_ANON && s->m.pg[j].rescued &&
				      s->m.pg[j].prot_d))
				return false;
		last_file = !anon;
		i = j;
	}
	return true;
}

static bool
no_holes(const struct seq *s, int a, int o)
{
	for (int i = a; i < a + o; i++)
		if (s->m.pg[i].kind == K_NONE)
			return false;
	return true;
}

/* Applies a successful mremap to pages (or huge pages) of one window. */
static void
model_mremap(struct mpage *pg, int nwin, const struct op *op)
{
	struct mpage src[W], last;
	int keep = op->n < op->o ? op->n : op->o;
	bool moves = op->mode == MR_MOVE || op->mode == MR_DONTUNMAP || op->mode == MR_DUP;
	int dest = moves ? op->t : op->a;

	(void)nwin;
	if (op->mode == MR_DUP) {
		/* A second mapping of the same shared pages, protected if the
		 * first page was. */
		last = pg[op->a];
		for (int j = 0; j < op->n; j++) {
			struct mpage *p = &pg[dest + j];

			*p = last;
			p->pgoff = last.pgoff + j;
		}
		return;
	}
	memcpy(src, &pg[op->a], sizeof(src[0]) * (size_t)op->o);
	last = src[op->o - 1];
	for (int j = 0; j < op->o; j++) {
		struct mpage *p = &pg[op->a + j];

		if (op->mode != MR_DONTUNMAP) {
			memset(p, 0, sizeof(*p));
			continue;
		}
		/* Still mapped, its pages gone: anonymous memory reads zeros,
		 * a file mapping shows the file again.  Still protected. */
		p->val = 0;
		p->cow = 0;
	}
	for (int j = 0; j < op->n; j++) {
		struct mpage *p = &pg[dest + j];

		/* Several VMAs moved at once (Linux 6.17 on) leave what was at
		 * the destination of a hole between them in place. */
		if (j < keep && src[j].kind == K_NONE)
			continue;
		if (j < keep) {
			*p = src[j];
			continue;
		}
		/* The grown part extends the last VMA; after a rescue of the
		 * last page of a file's mapping it is the file again (issue
		 * 19), as with the kernel's own flag - while it is protected. */
		*p = last;
		p->cow = 0;
		p->val = 0;
		p->rescued = 0;
		p->rfile = 0;
		if (last.rescued && last.rfile && last.prot_d) {
			p->kind = K_FILE;
			p->shared = last.rfile == 2;
		}
		if (p->kind == K_FILE)
			p->pgoff = last.pgoff + (j - op->o + 1);
	}
}

/*
 * Recovery (issue 22, SPEC §5): after an mremap that resizes, the library
 * maps the file again over every page it replaced in a protected shared
 * file mapping of the destination that the file covers now (a pool
 * resized after its file grew back).  The model's files are open in the
 * process, so the library always finds a descriptor.  What was written
 * into the zero page is gone.  Not under NOSIGBUS_ERRORS=zero, whose page
 * fill replaces without asking the size: such a page may be inside it,
 * and what was written there stays.
 */
static int
model_refresh(struct seq *s, int a, int n)
{
	int shown = 0;

	for (int i = a; i < a + n && i < W; i++) {
		struct mpage *p = &s->m.pg[i];

		if (!model_lib || s->errors_zero || p->kind != K_ANON || !p->rescued || p->rfile != 2 ||
		    !p->prot_d ||
		    p->pgoff >= s->m.f[p->file].size)
			continue;
		p->kind = K_FILE;
		p->shared = 1;
		p->rescued = 0;
		p->rfile = 0;
		p->val = 0;
		p->cow = 0;
		shown++;
	}
	return shown;
}

/* nosigbus_refresh(): the same, and it says how many pages it showed. */
static void
run_refresh(struct seq *s, const struct op *op)
{
	int want = model_refresh(s, op->a, op->n);
	long ret;

	errno = 0;
	ret = p_refresh(page_addr(s, op->a), op_len(op, op->n));
	if (ret != want) {
		char b[128];

		op_str(op, b, sizeof(b));
		fail(s, F_RESULT, "%s returned %ld (%s), the model expects %d pages shown again", b,
		     ret, ret < 0 ? strerror(errno) : "no error", want);
	}
}

/*
 * Where the maps cannot tell (a readable anonymous page moved onto one
 * that looked the same), the contents can: did the source page, holding
 * what *moved says, arrive at window page d?
 */
static bool
moved_here(const struct seq *s, int d, const struct mpage *moved)
{
	const struct mpage *here = &s->m.pg[d];

	return here->kind == K_ANON && moved->kind == K_ANON && (here->prot & PROT_READ) &&
	       (moved->prot & PROT_READ) && here->val != moved->val &&
	       *(volatile unsigned char *)page_addr(s, d) == moved->val;
}

/*
 * A move of several VMAs at once that failed: newer kernels move them one
 * by one, so some may have moved (MREMAP_DONTUNMAP runs out of RLIMIT_AS
 * half-way, say).  Each destination page is then unmapped, unchanged, or
 * its source page moved there (which then left its place, or with
 * MREMAP_DONTUNMAP stayed, emptied); the model follows what the kernel
 * shows, page by page, and the probe checks the records against it.
 */
static void
resync_move(struct seq *s, const struct op *op, const struct kpage *before)
{
	read_kernel(s);
	for (int j = 0; j < op->n; j++) {
		int d = op->t + j, a = op->a + j;
		struct mpage moved;

		if (!s->k[d].mapped) {
			memset(&s->m.pg[d], 0, sizeof(s->m.pg[d]));
			continue;
		}
		if (j >= op->o || s->m.pg[a].kind == K_NONE)
			continue;
		moved = s->m.pg[a];
		/* A protected file page past the end looks like the fill
		 * that would replace it (fill=range): anonymous memory.  But
		 * nothing accessed it during the call, so where the kernel
		 * showed its file there before the call and shows anonymous
		 * memory now, a VMA moved onto it (a failed
		 * MREMAP_DONTUNMAP over several VMAs moves the first ones
		 * and then fails with ENOMEM under RLIMIT_AS, Linux 6.18). */
		if (page_as_modelled(s, d) && !moved_here(s, d, &moved) &&
		    !(before[d].mapped && before[d].ino != 0 && s->k[d].ino == 0))
			continue;
		if (!mpage_matches(s, &moved, &s->k[d], false))
			continue;
		s->m.pg[d] = moved;
		if (op->mode == MR_DONTUNMAP) {
			s->m.pg[a].val = 0;
			s->m.pg[a].cow = 0;
		} else if (!s->k[a].mapped) {
			memset(&s->m.pg[a], 0, sizeof(s->m.pg[a]));
		}
	}
}

static void
run_mremap(struct seq *s, const struct op *op)
{
	static struct kpage kbefore[W];	/* the kernel's VMAs before the call */
	bool moves = op->mode == MR_MOVE || op->mode == MR_DONTUNMAP || op->mode == MR_DUP;
	int flags = moves ? MREMAP_MAYMOVE | MREMAP_FIXED : 0;
	unsigned char *dest = page_addr(s, moves ? op->t : op->a);
	size_t old_len = op->o ? (size_t)op->o * ps - op->d2 : 0;
	int how, err = 0;
	long need = 0, dest_mapped = moves ? mapped_pages(s, op->t, op->n) : 0;
	bool ok;
	void *p;

	if (op->mode == MR_DONTUNMAP)
		flags |= MREMAP_DONTUNMAP;
	read_kernel(s);		/* its VMAs now: a read may have rescued since */
	memcpy(kbefore, s->k, sizeof(kbefore));
	if (op->mode == MR_DUP) {
		/* Only a shared mapping can be duplicated. */
		const struct mpage *pg = &s->m.pg[op->a];

		how = pg->kind == K_FILE && pg->shared ? MUST_SUCCEED : MUST_FAIL;
		err = pg->kind == K_NONE ? EFAULT : EINVAL;
		/* fill=range may have made it a private zero page already. */
		if (how == MUST_SUCCEED && s->no_regrow && pg->prot_d &&
		    pg->pgoff >= s->m.f[pg->file].size)
			how = EITHER;
		need = op->n;
	} else if (s->m.pg[op->a].kind == K_NONE) {
		how = MUST_FAIL;
		err = EFAULT;
	} else if (!no_holes(s, op->a, op->o)) {
		/* Holes: newer kernels move several VMAs, keeping the holes. */
		how = EITHER;
		err = EFAULT;
	} else if (op->mode == MR_DONTUNMAP && !single_vma(s, op->a, op->o)) {
		/* The library moves pieces only when the old range goes away. */
		how = EITHER;
		err = EFAULT;
	} else if (single_vma(s, op->a, op->o)) {
		how = MUST_SUCCEED;
		if (op->mode == MR_GROW &&
		    (s->k[op->a].vend != op->a + op->o || op->a + op->n > W ||
		     !range_free(s, op->a + op->o, op->n - op->o))) {
			how = MUST_FAIL;
			err = ENOMEM;
		}
	} else if (model_lib && s->m.pg[op->a].prot_d && s->m.pg[op->a + op->o - 1].prot_d &&
		   rescue_split_only(s, op->a, op->o)) {
		how = MUST_SUCCEED;
		if (op->mode == MR_GROW &&
		    (op->a + op->n > W || !range_free(s, op->a + op->o, op->n - op->o))) {
			how = MUST_FAIL;
			err = ENOMEM;
		}
	} else {
		/* Several VMAs: one resize needs one VMA (EFAULT); moves vary. */
		how = EITHER;
		err = EFAULT;
	}
	if (moves && op->mode != MR_DUP && op->a < op->t + op->n && op->t < op->a + op->o) {
		how = MUST_FAIL;
		err = EINVAL;
	}
	if (op->mode == MR_GROW || op->mode == MR_MOVE)
		need = op->n - op->o;
	else if (op->mode == MR_DONTUNMAP)
		need = op->o;
	/* A destination is unmapped before some checks (and may not be). */
	limit_outcome(s, need - dest_mapped, need, &how, &err);
	errno = 0;
	p = mremap(page_addr(s, op->a), old_len, op_len(op, op->n), flags, dest);
	/* MREMAP_DONTUNMAP takes file mappings from Linux 5.13 on. */
	if (op->mode == MR_DONTUNMAP && p == MAP_FAILED && errno == EINVAL && old_kernel)
		how = EITHER;
	if (p != MAP_FAILED && p != dest)
		fail(s, F_RESULT, "mremap returned %p, not %p", p, (void *)dest);
	if (how == EITHER) {
		ok = either_result(s, p != MAP_FAILED, err, 0, errno);
		if (ok)
			sh->c.remap_ok++;
		else
			sh->c.remap_failed++;
	} else {
		expect_result(s, how == MUST_SUCCEED, err, p == MAP_FAILED ? -1 : 0, errno);
		ok = how == MUST_SUCCEED;
		if (ok && (op->mode == MR_DUP || single_vma(s, op->a, op->o)))
			sh->c.remap_ok++;
		else if (ok)
			sh->c.remap_pieces++;
		else
			sh->c.remap_failed++;
	}
	if (ok) {
		model_mremap(s->m.pg, W, op);
		/* A resize, not a move alone. */
		if (op->mode != MR_DUP && op->n != op->o)
			model_refresh(s, moves ? op->t : op->a, op->n);
		return;
	}
	/* Only the destination may have changed: older kernels (and, for
	 * some failures, newer ones) unmap it before they fail. */
	if (moves && how == EITHER && op->mode != MR_DUP)
		resync_move(s, op, kbefore);
	else if (moves)
		resync(s, false, op->t, op->n);
}

static void
run_protect(struct seq *s, const struct op *op)
{
	bool mapped = no_holes(s, op->a, op->n), shared = false;
	int ret, err;

	for (int i = op->a; i < op->a + op->n; i++)
		shared |= s->m.pg[i].kind == K_FILE && s->m.pg[i].shared;
	errno = 0;
	if (op->type == OP_UNPROTECT) {
		ret = p_unprotect(page_addr(s, op->a), op_len(op, op->n));
		if (s->m.limited && ret < 0 && errno == ENOMEM) {
			either_result(s, false, 0, 0, errno);
			return;
		}
		expect_result(s, true, 0, ret, errno);
		for (int i = op->a; i < op->a + op->n; i++)
			s->m.pg[i].prot_d = 0;
		return;
	}
	s->m.protect_used = true;
	ret = p_protect(page_addr(s, op->a), op_len(op, op->n));
	err = !mapped ? ENOMEM : shared && s->strict ? EINVAL : 0;
	if (!mapped && shared && s->strict && ret < 0 && errno == EINVAL)
		err = EINVAL;
	/* Under RLIMIT_AS the library may lack memory of its own. */
	if (!err && s->m.limited && ret < 0 && errno == ENOMEM) {
		either_result(s, false, 0, 0, errno);
		return;
	}
	expect_result(s, err == 0, err, ret, errno);
	if (err)
		return;
	/* New records, with a new account, where there were none: nothing
	 * replaced in them yet.  The records there are kept as they are
	 * (what they replaced, of which file), as the man page says. */
	for (int i = op->a; i < op->a + op->n; i++) {
		if (s->m.pg[i].prot_d)
			continue;
		s->m.pg[i].prot_d = 1;
		s->m.pg[i].rescued = 0;
		s->m.pg[i].rfile = 0;
	}
}

/* The full tmpfs stays full: whatever a truncation freed, the filler takes. */
static void
refill(struct seq *s)
{
	static unsigned char zeros[65536];

	while (s->filler_fd >= 0 && write(s->filler_fd, zeros, ps) > 0)
		;
}

static void
run_file_op(struct seq *s, const struct op *op)
{
	struct mfile *f = &s->m.f[op->file];
	unsigned char buf[65536];
	int ret;

	errno = 0;
	if (op->type == OP_TRUNCATE) {
		ret = ftruncate(s->fd[op->file], (off_t)((size_t)op->n * ps));
		expect_result(s, true, 0, ret, errno);
		model_truncate(s, op->file, op->n);
		if (f->backing == B_FULL)
			refill(s);
		return;
	}
	memset(buf, op->val, ps);
	ret = pwrite(s->fd[op->file], buf, ps, (off_t)((size_t)op->a * ps)) == (ssize_t)ps ? 0 : -1;
	if (f->backing == B_FULL && !(op->a < f->size && f->alloc[op->a])) {
		/* A hole, or past the end: no block for it. */
		expect_result(s, false, ENOSPC, ret, errno);
		return;
	}
	expect_result(s, true, 0, ret, errno);
	f->val[op->a] = op->val;
	f->alloc[op->a] = 1;
	if (op->a >= f->size)
		f->size = op->a + 1;
}

/*
 * Threads under range and auto fill (issue 19): op->n threads fault at once
 * on the same truncated protected mapping, each writing a distinct byte to
 * a distinct page; self-contained, so the model's state after it is known.
 * It runs in a fresh exec of this program (the fill is read once per
 * process: threads_main()), which checks that every write landed, that
 * every page past the end was replaced exactly once (the counters, in
 * pages) and nothing inside the file's size was (/proc/self/maps).
 */

struct thread_arg {
	pthread_barrier_t *bar;
	unsigned char *p;	/* its first page */
	size_t off[THREAD_PAGES];
	uint8_t val[THREAD_PAGES];
	uint8_t got[THREAD_PAGES];
};

static void *
thread_write(void *v)
{
	struct thread_arg *t = v;

	pthread_barrier_wait(t->bar);
	for (int q = 0; q < THREAD_PAGES; q++) {
		volatile unsigned char *b = t->p + (size_t)q * ps + t->off[q];

		*b = t->val[q];
		t->got[q] = *b;
	}
	return NULL;
}

static int __attribute__((format(printf, 1, 2)))
threads_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	return 1;
}

static int
threads_main(int nt, int k)
{
	int n = nt * THREAD_PAGES;	/* pages */
	const char *st = getenv("NOSIGBUS_STRICT");
	bool priv = st && strcmp(st, "1") == 0;	/* MAP_NOSIGBUS with MAP_SHARED: EINVAL */
	struct thread_arg ta[THREADS_MAX];
	pthread_t th[THREADS_MAX];
	pthread_barrier_t bar;
	struct model_stats stats = { 0 };
	int (*get_stats)(void *, size_t) = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	struct stat sb;
	unsigned char *p;
	char *maps;
	int fd;

	ps = nsbt_page();
	if (nt < 1 || nt > THREADS_MAX || k < 0 || k > n)
		return threads_fail("threads: bad arguments %d %d", n, k);
	if (!get_stats)
		return threads_fail("threads: the library is not loaded");
	fd = memfd_create("model-threads", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)k * (off_t)ps) < 0 || fstat(fd, &sb) < 0)
		return threads_fail("threads: memfd: %s", strerror(errno));
	p = mmap(NULL, (size_t)n * ps, PROT_READ | PROT_WRITE,
		 (priv ? MAP_PRIVATE : MAP_SHARED) | MAP_NOSIGBUS, fd, 0);
	if (p == MAP_FAILED)
		return threads_fail("threads: mmap: %s", strerror(errno));
	pthread_barrier_init(&bar, NULL, (unsigned)nt);
	for (int t = 0; t < nt; t++) {
		ta[t].bar = &bar;
		ta[t].p = p + (size_t)t * THREAD_PAGES * ps;
		for (int q = 0; q < THREAD_PAGES; q++) {
			int j = t * THREAD_PAGES + q;

			ta[t].off[q] = (size_t)(j * 61 + 7) % ps;
			ta[t].val[q] = (uint8_t)(0x41 + j);
		}
		if (pthread_create(&th[t], NULL, thread_write, &ta[t]) != 0)
			return threads_fail("threads: pthread_create failed");
	}
	for (int t = 0; t < nt; t++)
		pthread_join(th[t], NULL);
	for (int j = 0; j < n; j++) {
		const struct thread_arg *a = &ta[j / THREAD_PAGES];
		int t = j / THREAD_PAGES, q = j % THREAD_PAGES;
		unsigned char fb = 0;

		if (a->got[q] != a->val[q])
			return threads_fail("thread %d read back 0x%02x from page %d, it wrote 0x%02x",
					    t, a->got[q], j, a->val[q]);
		for (size_t b = 0; b < ps; b++)
			if (p[(size_t)j * ps + b] != (b == a->off[q] ? a->val[q] : 0))
				return threads_fail("page %d (%s) byte %zu is 0x%02x after the threads; "
						    "thread %d wrote 0x%02x at byte %zu (a lost write?)",
						    j, j < k ? "inside the file" : "past its end", b,
						    p[(size_t)j * ps + b], t, a->val[q], a->off[q]);
		if (j < k && !priv && (pread(fd, &fb, 1, (off_t)j * (off_t)ps + (off_t)a->off[q]) != 1 ||
				       fb != a->val[q]))
			return threads_fail("page %d is inside the file, but the file has 0x%02x where "
					    "thread %d wrote 0x%02x", j, fb, t, a->val[q]);
	}
	if (fstat(fd, &sb) < 0 || sb.st_size != (off_t)k * (off_t)ps)
		return threads_fail("the file's size changed to %lld bytes", (long long)sb.st_size);
	/* Nothing inside the file's size was replaced; all past it was. */
	read_maps();
	maps = maps_buf;
	for (int j = 0; j < n; j++) {
		uintptr_t a = (uintptr_t)p + (size_t)j * ps;
		unsigned long lo, hi, ino = 1;
		bool found = false;

		for (char *line = maps; line && *line;) {
			char *nl = strchr(line, '\n');

			if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &ino) == 3 &&
			    a >= lo && a < hi) {
				found = true;
				break;
			}
			line = nl ? nl + 1 : NULL;
		}
		if (!found || (j < k ? ino != sb.st_ino : ino != 0))
			return threads_fail("page %d (%s) is %s in /proc/self/maps%s", j,
					    j < k ? "inside the file's size" : "past the end of the file",
					    !found ? "not mapped" : ino ? "the file" : "anonymous",
					    j < k ? ": replaced" : ": not replaced");
	}
	if (get_stats(&stats, sizeof(stats)) < 0)
		return threads_fail("nosigbus_get_stats: %s", strerror(errno));
	if (stats.pages != (uint64_t)(n - k) || stats.failures ||
	    (n > k && (stats.rescues < 1 || stats.rescues > (uint64_t)(n - k))) ||
	    (n == k && stats.rescues))
		return threads_fail("nosigbus_get_stats: %" PRIu64 " rescues, %" PRIu64 " pages, %" PRIu64
				    " failures; %d pages past the end must be replaced exactly once "
				    "each, by 1 to %d rescues", stats.rescues, stats.pages,
				    stats.failures, n - k, n - k);
	return 0;
}

static void
run_threads(struct seq *s, const struct op *op)
{
	char out[512] = "", na[16], ka[16];
	int pfd[2], status;
	ssize_t got;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		fail(s, F_SETUP, "pipe: %s", strerror(errno));
	snprintf(sh->expect, sizeof(sh->expect), "every write to land, %d pages replaced",
		 op->n * THREAD_PAGES - op->o);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail(s, F_SETUP, "fork: %s", strerror(errno));
	if (pid == 0) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

		setrlimit(RLIMIT_AS, &rl);
		dup2(pfd[1], STDOUT_FILENO);
		setenv("NOSIGBUS_FILL", op->mode ? "auto" : "range", 1);
		snprintf(na, sizeof(na), "%d", op->n);
		snprintf(ka, sizeof(ka), "%d", op->o);
		execl("/proc/self/exe", "model", "--threads", na, ka, (char *)NULL);
		printf("exec: %s", strerror(errno));
		fflush(stdout);
		_exit(1);
	}
	close(pfd[1]);
	status = wait_child(s, pid);
	got = read(pfd[0], out, sizeof(out) - 1);
	close(pfd[0]);
	out[got > 0 ? got : 0] = '\0';
	sh->c.writes += (uint64_t)op->n * THREAD_PAGES;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail(s, F_ACCESS, "threads (NOSIGBUS_FILL=%s): the process %s: %s",
		     op->mode ? "auto" : "range", nsbt_status_str(status), out);
}

/*
 * madvise(2) of a fork advice: the kernel walks the VMAs in order, notes a
 * hole (ENOMEM at the end) and stops at the first VMA MADV_WIPEONFORK
 * refuses (a file's: EINVAL), the ones before it changed.
 */
/* Which window pages the kernel shows locked (smaps VmFlags "lo"). */
static void
read_locked(const struct seq *s, bool *locked)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	uintptr_t base = (uintptr_t)page_addr(s, 0), vs = 0, ve = 0;
	char line[512];

	memset(locked, 0, W * sizeof(*locked));
	if (!f)
		fail((struct seq *)s, F_SETUP, "smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
			vs = a;
			ve = b;
		} else if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " lo")) {
			for (int i = 0; i < W; i++) {
				uintptr_t at = base + (uintptr_t)i * ps;

				if (at >= vs && at < ve)
					locked[i] = true;
			}
		}
	}
	fclose(f);
}

/* mlock, munlock: they split VMAs (and fail over a hole); what they lock
 * shows only in smaps, which MADV_REMOVE asks. */
static void
run_mlock(struct seq *s, const struct op *op)
{
	bool hole = !no_holes(s, op->a, op->n);
	int ret;

	errno = 0;
	ret = op->mode == MA_MLOCK ? mlock(page_addr(s, op->a), op_len(op, op->n))
				   : munlock(page_addr(s, op->a), op_len(op, op->n));
#if defined(__SANITIZE_ADDRESS__)
	/* ASan's mlock and munlock do nothing and return 0 (its shadow
	 * memory cannot be locked): nothing to compare, nothing locked. */
	(void)hole;
	(void)ret;
	return;
#endif
	if (hole)
		expect_result(s, false, ENOMEM, ret, errno);
	else if (op->mode == MA_MUNLOCK)
		expect_result(s, true, 0, ret, errno);
	else
		/* Populating pages past the end of a file fails (ENOMEM),
		 * and so may RLIMIT_MEMLOCK (EPERM, EAGAIN). */
		(void)either_result(s, ret == 0, EPERM, EAGAIN, errno);
}

/*
 * MADV_REMOVE: the kernel walks the VMAs in order, notes a hole (ENOMEM
 * at the end), punches the file under shared ones and stops at the first
 * it refuses (EINVAL: a locked VMA, anonymous memory; EACCES: a private
 * mapping of a file).  A page the library
 * rescued in a shared mapping is taken as the kernel flag's VMA would be:
 * it reads zeros after.
 */
static void
run_remove(struct seq *s, const struct op *op)
{
	bool locked[W];
	int err = 0, j, ret;

	read_locked(s, locked);
	read_kernel(s);
	for (j = op->a; j < op->a + op->n; j++) {
		const struct mpage *p = &s->m.pg[j];

		if (p->kind == K_NONE) {
			err = ENOMEM;
			continue;
		}
		/* A private file page that a range or auto fill replaced past
		 * the end of its file (the model keeps it as the file's: it
		 * reads the same) is anonymous memory to the kernel: EINVAL. */
		if (model_lib && p->kind == K_FILE && !p->shared && s->k[j].mapped && !s->k[j].ino) {
			err = EINVAL;
			break;
		}
		if (!locked[j] && ((p->kind == K_FILE && p->shared) ||
				   (model_lib && p->kind == K_ANON && p->rescued && p->rfile == 2 &&
				    p->prot_d)))
			continue;
		/* Locked, or no file: EINVAL; a private file mapping: EACCES. */
		err = !locked[j] && p->kind == K_FILE ? EACCES : EINVAL;
		break;
	}
	errno = 0;
	ret = madvise(page_addr(s, op->a), op_len(op, op->n), MADV_REMOVE);
	expect_result(s, err == 0, err, ret, errno);
	for (int i = op->a; i < j; i++) {
		struct mpage *p = &s->m.pg[i];

		if (p->kind == K_FILE) {
			struct mfile *f = &s->m.f[p->file];

			if (p->pgoff < f->size)
				f->val[p->pgoff] = f->alloc[p->pgoff] = 0;
		} else if (p->kind == K_ANON) {
			p->val = 0;
			p->cow = 0;
		}
	}
}

/*
 * remap_file_pages: the pages must lie in shared VMAs of one file with
 * the same flags, without holes (else EINVAL); the kernel maps them anew
 * (Linux 4.0 on) from file page off, one fresh VMA with the first one's
 * flags and without the old ones' advice.  The records must follow: a
 * page past the end is rescued, one inside is the file's.
 */
static void
run_remap_file(struct seq *s, const struct op *op)
{
	const struct mpage *first = &s->m.pg[op->a];
	bool ok, locked[W];
	int ret;

	read_kernel(s);

	/* The kernel's VMAs (a range fill may have replaced a page the
	 * model still has as the file's): from Linux 6.1 the range may run
	 * over several, without holes, of the same file and flags. */
	read_locked(s, locked);
	ok = first->kind == K_FILE && first->shared && s->k[op->a].s;
	for (int i = op->a + 1; ok && i < op->a + op->n; i++) {
		const struct mpage *p = &s->m.pg[i];
		const struct kpage *k = &s->k[i], *k0 = &s->k[op->a];

		ok = k->mapped && p->kind == K_FILE && p->file == first->file && k->s &&
		     k->ino == k0->ino && k->r == k0->r && k->w == k0->w &&
		     locked[i] == locked[op->a] && p->dontfork == first->dontfork &&
		     p->wipe == first->wipe;
	}
	errno = 0;
	ret = remap_file_pages(page_addr(s, op->a), (size_t)op->n * ps, 0, (size_t)op->off,
			       MAP_NONBLOCK);
	expect_result(s, ok, EINVAL, ret, errno);
	if (!ok)
		return;
	for (int i = op->a; i < op->a + op->n; i++) {
		struct mpage *p = &s->m.pg[i];

		p->pgoff = op->off + (i - op->a);
		p->cow = 0;
		p->dontfork = 0;
		p->wipe = 0;
		/* One new mapping, as the first VMA was (with the kernel's
		 * flag, its flags must all be the same). */
		p->prot_d = first->prot_d;
	}
}

/*
 * shmat(SHM_REMAP) replaces whatever is mapped there, as MAP_FIXED does,
 * and shmdt leaves a hole: no record may stay there (the probe checks).
 */
static void
run_shmat(struct seq *s, const struct op *op)
{
	int id = shmget(IPC_PRIVATE, (size_t)op->n * ps, IPC_CREAT | 0600);
	void *p;

	if (id < 0)
		fail(s, F_SETUP, "shmget: %s", strerror(errno));
	errno = 0;
	p = shmat(id, page_addr(s, op->a), SHM_REMAP);
	(void)shmctl(id, IPC_RMID, NULL);
	expect_result(s, p != (void *)-1, 0, p == (void *)-1 ? -1 : 0, errno);
	if (p == (void *)-1)
		return;
	if (p != page_addr(s, op->a))
		fail(s, F_RESULT, "shmat returned %p, not %p", p, (void *)page_addr(s, op->a));
	expect_result(s, true, 0, shmdt(p), errno);
	memset(&s->m.pg[op->a], 0, (size_t)op->n * sizeof(s->m.pg[0]));
}

static void
run_madvise(struct seq *s, const struct op *op)
{
	int err = 0, j, ret;

	if (op->mode == MA_SHMAT) {
		run_shmat(s, op);
		return;
	}

	if (op->mode == MA_REMAP_FILE) {
		run_remap_file(s, op);
		return;
	}

	if (op->mode == MA_MLOCK || op->mode == MA_MUNLOCK) {
		run_mlock(s, op);
		return;
	}
	if (op->mode == MA_REMOVE) {
		run_remove(s, op);
		return;
	}

	/* A rescued page mapped from the library's zero file (a fill read
	 * first) is a file's page to the kernel, which refuses it. */
	if (op->mode == MA_WIPEONFORK && model_lib)
		read_kernel(s);
	for (j = op->a; j < op->a + op->n; j++) {
		const struct mpage *p = &s->m.pg[j];

		if (p->kind == K_NONE) {
			err = ENOMEM;
			continue;
		}
		if (op->mode == MA_WIPEONFORK &&
		    (p->kind == K_FILE || p->shared || (model_lib && s->k[j].zfile))) {
			err = EINVAL;
			break;
		}
	}
	errno = 0;
	ret = madvise(page_addr(s, op->a), op_len(op, op->n), madv_advice[op->mode]);
	expect_result(s, err == 0, err, ret, errno);
	for (int i = op->a; i < j; i++) {
		struct mpage *p = &s->m.pg[i];

		if (p->kind == K_NONE)
			continue;
		if (op->mode == MA_DONTFORK || op->mode == MA_DOFORK)
			p->dontfork = op->mode == MA_DONTFORK;
		else
			p->wipe = op->mode == MA_WIPEONFORK;
	}
}

static void
run_limit(struct seq *s, const struct op *op)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	int ret;

	if (op->n >= 0) {
		s->limit = vm_size() + (size_t)op->n * ps;
		rl.rlim_cur = s->limit;
	}
	errno = 0;
	ret = setrlimit(RLIMIT_AS, &rl);
	expect_result(s, true, 0, ret, errno);
	s->m.limited = op->n >= 0;
}

/* ---- the huge window ------------------------------------------------------ */

static unsigned char *
unit_addr(const struct seq *s, int u)
{
	return s->hbase + (size_t)u * hs;
}

static size_t
unit_len(uint32_t d, int units)
{
	return (size_t)units * hs - d;
}

/* A length d bytes short of whole huge pages, rounded up to the system
 * page as munmap and mprotect do: does it end inside a huge page? */
static bool
huge_partial(uint32_t d)
{
	return d >= ps;
}

static bool
units_free(const struct seq *s, int a, int n)
{
	for (int i = a; i < a + n; i++)
		if (s->m.hu[i].kind != K_NONE)
			return false;
	return true;
}

static void
run_hmmap(struct seq *s, const struct op *op)
{
	int flags = (op->shared ? MAP_SHARED : MAP_PRIVATE) | MAP_NORESERVE |
		    (op->mode == MM_NOREPLACE ? MAP_FIXED_NOREPLACE : MAP_FIXED) |
		    (op->flag ? MAP_NOSIGBUS : 0);
	bool prot_d = model_lib && (op->flag || s->policy_shm || s->policy_files), ok;
	int how = MUST_SUCCEED, err = 0;
	long need = 0;
	void *p;

	sh->c.huge_calls++;
	if (model_lib && s->strict && op->shared) {
		if (op->flag) {
			how = MUST_FAIL;
			err = EINVAL;
		}
		prot_d = false;
	}
	if (how != MUST_FAIL && op->mode == MM_NOREPLACE && !units_free(s, op->a, op->n)) {
		how = MUST_FAIL;
		err = EEXIST;
	}
	for (int i = op->a; i < op->a + op->n; i++)
		need += s->m.hu[i].kind == K_NONE ? (long)(hs / ps) : 0;
	limit_outcome(s, need, need, &how, &err);
	/* The file's hook refuses the offset, after RLIMIT_AS is checked. */
	if (how != MUST_FAIL && op->mode == MM_BADOFF) {
		how = how == EITHER ? EITHER : MUST_FAIL;
		err = EINVAL;
	}
	errno = 0;
	p = mmap(unit_addr(s, op->a), unit_len(op->d, op->n), op->prot, flags, s->hfd,
		 op->mode == MM_BADOFF ? (off_t)ps : 0);
	/* A writable mapping extends a hugetlbfs file to its end: keep it empty. */
	if (ftruncate(s->hfd, 0) != 0)
		fail(s, F_SETUP, "ftruncate(hugetlbfs file): %s", strerror(errno));
	if (p != MAP_FAILED && p != unit_addr(s, op->a))
		fail(s, F_RESULT, "huge mmap returned %p, not %p", p, (void *)unit_addr(s, op->a));
	if (how == EITHER) {
		ok = either_result(s, p != MAP_FAILED, err, 0, errno);
	} else {
		expect_result(s, how == MUST_SUCCEED, err, p == MAP_FAILED ? -1 : 0, errno);
		ok = how == MUST_SUCCEED;
	}
	if (!ok) {
		/* The offset is checked in the file's mmap hook, after the unmap. */
		if (op->mode == MM_BADOFF || how == EITHER)
			resync(s, true, op->a, op->n);
		return;
	}
	for (int j = 0; j < op->n; j++) {
		struct mpage *u = &s->m.hu[op->a + j];

		memset(u, 0, sizeof(*u));
		u->kind = K_FILE;
		u->prot = op->prot;
		u->shared = op->shared;
		u->prot_d = prot_d;
		u->file = HF;
	}
}

/*
 * munmap/mprotect whose length is not whole huge pages: the kernel cannot
 * split a huge page (EINVAL, nothing changes), but splits anything else
 * at the system page (op_valid() keeps such calls out).
 */
static void
run_hmunmap(struct seq *s, const struct op *op)
{
	int last = op->a + op->n - 1, ret;
	bool split_huge = huge_partial(op->d) && s->m.hu[last].kind == K_FILE;

	sh->c.huge_calls++;
	errno = 0;
	ret = munmap(unit_addr(s, op->a), unit_len(op->d, op->n));
	expect_result(s, !split_huge, EINVAL, ret, errno);
	if (split_huge)
		return;
	for (int i = op->a; i <= last; i++)
		memset(&s->m.hu[i], 0, sizeof(s->m.hu[i]));
}

static void
run_hmprotect(struct seq *s, const struct op *op)
{
	int j, ret, err = ENOMEM;
	bool ok;

	sh->c.huge_calls++;
	for (j = 0; j < op->n && s->m.hu[op->a + j].kind != K_NONE; j++)
		;
	ok = j == op->n;
	/* op_valid(): a partial huge page only as the one huge page of the
	 * call; the kernel splits nothing if the protection stays. */
	if (ok && huge_partial(op->d) && s->m.hu[op->a].kind == K_FILE &&
	    s->m.hu[op->a].prot != op->prot) {
		ok = false;
		err = EINVAL;
		j = 0;
	}
	errno = 0;
	ret = mprotect(unit_addr(s, op->a), unit_len(op->d, op->n), op->prot);
	expect_result(s, ok, err, ret, errno);
	for (int i = 0; i < j; i++)
		s->m.hu[op->a + i].prot = op->prot;
}

static bool
single_huge_vma(const struct seq *s, int a, int o)
{
	for (int i = a; i < a + o; i++)
		if (s->m.hu[i].kind != K_FILE || s->hk[i].vmas != 1 || s->hk[i].vma != s->hk[a].vma)
			return false;
	return true;
}

static void
run_hmremap(struct seq *s, const struct op *op)
{
	bool moves = op->mode == MR_MOVE, ok;
	int flags = moves ? MREMAP_MAYMOVE | MREMAP_FIXED : 0, how, err = 0;
	unsigned char *dest = unit_addr(s, moves ? op->t : op->a);
	void *p;

	sh->c.huge_calls++;
	read_kernel(s);
	if (s->m.hu[op->a].kind == K_NONE) {
		how = MUST_FAIL;
		err = EFAULT;
	} else if (single_huge_vma(s, op->a, op->o)) {
		/* hugetlbfs: lengths rounded up to huge pages; no growing. */
		how = op->mode == MR_GROW ? MUST_FAIL : MUST_SUCCEED;
		err = EINVAL;
	} else {
		how = EITHER;
		err = EFAULT;	/* several VMAs; one anonymous VMA may grow */
	}
	if (moves && op->a < op->t + op->n && op->t < op->a + op->o) {
		how = MUST_FAIL;
		err = EINVAL;
	}
	errno = 0;
	p = mremap(unit_addr(s, op->a), unit_len(op->d2, op->o), unit_len(op->d, op->n), flags, dest);
	if (p != MAP_FAILED && p != dest)
		fail(s, F_RESULT, "huge mremap returned %p, not %p", p, (void *)dest);
	if (how == EITHER) {
		ok = either_result(s, p != MAP_FAILED, err, EINVAL, errno);
	} else {
		expect_result(s, how == MUST_SUCCEED, err, p == MAP_FAILED ? -1 : 0, errno);
		ok = how == MUST_SUCCEED;
	}
	if (ok)
		model_mremap(s->m.hu, HW, op);
	else if (moves)
		resync(s, true, op->t, op->n);
}

static void
run_hprotect(struct seq *s, const struct op *op)
{
	bool mapped = true, shared = false;
	int ret, err;

	sh->c.huge_calls++;
	for (int i = op->a; i < op->a + op->n; i++) {
		mapped &= s->m.hu[i].kind != K_NONE;
		shared |= s->m.hu[i].kind == K_FILE && s->m.hu[i].shared;
	}
	errno = 0;
	if (op->type == OP_HUNPROTECT) {
		ret = p_unprotect(unit_addr(s, op->a), unit_len(op->d, op->n));
		expect_result(s, true, 0, ret, errno);
		for (int i = op->a; i < op->a + op->n; i++)
			s->m.hu[i].prot_d = 0;
		return;
	}
	s->m.protect_used = true;
	ret = p_protect(unit_addr(s, op->a), unit_len(op->d, op->n));
	err = !mapped ? ENOMEM : shared && s->strict ? EINVAL : 0;
	if (!mapped && shared && s->strict && ret < 0 && errno == EINVAL)
		err = EINVAL;
	if (!err && s->m.limited && ret < 0 && errno == ENOMEM) {
		either_result(s, false, 0, 0, errno);
		return;
	}
	expect_result(s, err == 0, err, ret, errno);
	/* Recorded as the kernel has it now where there were no records
	 * (a rescued huge page is anonymous memory in system pages there);
	 * the records there are kept as they are. */
	for (int i = op->a; !err && i < op->a + op->n; i++) {
		if (s->m.hu[i].prot_d)
			continue;
		s->m.hu[i].prot_d = 1;
		s->m.hu[i].rescued = 0;
		s->m.hu[i].rfile = 0;
	}
}

/* A read in huge page a (page op->n of it): the file is empty, so every
 * page of a hugetlbfs mapping is past its end. */
static void
run_hread(struct seq *s, const struct op *op)
{
	struct mpage *u = &s->m.hu[op->a];
	volatile unsigned char *p = unit_addr(s, op->a) + (size_t)op->n * ps;
	char why[160];
	int r, status;
	pid_t pid;

	sh->c.reads++;
	if (u->kind == K_NONE || !(u->prot & PROT_READ)) {
		r = A_SEGV;
		snprintf(why, sizeof(why), "SIGSEGV (%s)", u->kind == K_NONE ? "unmapped" : prot_str(u->prot));
	} else if (u->kind == K_ANON) {
		r = A_OK;
		snprintf(why, sizeof(why), "0 (anonymous)");
	} else if (u->prot_d) {
		r = A_OK;
		snprintf(why, sizeof(why), "0 (rescue of a whole huge page: past the file's end)");
	} else {
		r = A_BUS;
		snprintf(why, sizeof(why), "SIGBUS (past the end of the file, unprotected)");
	}
	snprintf(sh->expect, sizeof(sh->expect), "%s", why);
	if (r == A_OK && !op->alt) {
		if (*p != 0)
			fail(s, F_ACCESS, "read huge page %d: got 0x%02x; the model expects %s",
			     op->a, *p, why);
		if (u->kind == K_FILE) {
			/* Of the file still: a growth by mremap is the file
			 * again (model_mremap). */
			u->rfile = (uint8_t)(1 + !!u->shared);
			u->kind = K_ANON;
			u->shared = 0;
			u->rescued = 1;
			s->m.rescues++;
			s->m.pages += hs / ps;
		}
		return;
	}
	memset(sh->got, 0, sizeof(sh->got));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail(s, F_SETUP, "fork: %s", strerror(errno));
	if (pid == 0) {
		sh->got[0] = *p;
		_exit(0);
	}
	status = wait_child(s, pid);
	if (r == A_OK ? WIFEXITED(status) && WEXITSTATUS(status) == 0 && sh->got[0] == 0
		      : WIFSIGNALED(status) && WTERMSIG(status) == (r == A_SEGV ? SIGSEGV : SIGBUS)) {
		if (r == A_OK)
			sh->c.forked++;
		else if (r == A_SEGV)
			sh->c.segv++;
		else
			sh->c.bus++;
		return;
	}
	fail(s, F_ACCESS, "read huge page %d in a child: it %s (read 0x%02x); the model expects %s",
	     op->a, nsbt_status_str(status), sh->got[0], why);
}

/* ---- the probe: the library's records against the model ------------------- */

enum { P_RESCUE, P_BUS, P_SEGV, P_ANY };
static const char *const probe_names[] = { "rescued", "SIGBUS", "SIGSEGV", "any" };

static __thread sigjmp_buf probe_jb;
static volatile sig_atomic_t in_probe;

static void
probe_fault(int sig)
{
	if (in_probe) {
		in_probe = 0;
		siglongjmp(probe_jb, sig);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Reads p: P_RESCUE (it read, the byte in *val), P_BUS or P_SEGV. */
static int
probe_read(volatile unsigned char *p, unsigned char *val)
{
	int sig = sigsetjmp(probe_jb, 1);

	if (sig)
		return sig == SIGBUS ? P_BUS : P_SEGV;
	in_probe = 1;
	*val = *p;
	in_probe = 0;
	return P_RESCUE;
}

/*
 * What a probe of a page should show.  natural: read it as it is (it is
 * past its file's end, or a hole of the full tmpfs: the fault is the
 * kernel's own, and protection decides).  Otherwise an empty file is
 * mapped over it first.
 */
static int
probe_expect(const struct seq *s, const struct mpage *p, bool huge, bool *natural)
{
	*natural = false;
	if (p->kind == K_FILE && (p->prot & PROT_READ) && !(p->cow && !p->shared)) {
		const struct mfile *f = huge ? NULL : &s->m.f[p->file];

		if (huge || p->pgoff >= f->size) {
			*natural = true;
			return p->prot_d ? P_RESCUE : P_BUS;
		}
		/* A hole of the full tmpfs is inside the size: the program's. */
		if (f->backing == B_FULL && !f->alloc[p->pgoff]) {
			*natural = true;
			return p->prot_d && s->errors_zero ? P_RESCUE : P_BUS;
		}
	}
	if (!p->prot_d)
		return P_BUS;
	/* A unit is replaced at most once while its mapping lives (issue
	 * 19): an empty file mapped over a replaced one behind the library's
	 * back faults as without it. */
	if (p->rescued)
		/* (fill=range replaces more than the model follows, and a
		 * page it replaced may take its write without a fault.) */
		return s->no_regrow ? P_ANY : P_BUS;
	/*
	 * An empty file under a record.  With NOSIGBUS_ERRORS=pass the library
	 * may judge the fault by the file it recorded (inside that file's end:
	 * passed on), or rescue without knowing a size (an anonymous record);
	 * the huge window's file is always empty, so its records must rescue.
	 */
	if (!s->errors_zero && (!huge || (p->kind == K_ANON && !p->rescued)))
		return P_ANY;
	return p->prot & PROT_READ ? P_RESCUE : P_SEGV;
}

static void __attribute__((noreturn))
probe_child(struct seq *s)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	struct model_stats st = { 0 };
	struct sigaction sa;
	int got[W + HW];
	bool natural;

	/* The records of a fork child are those of the mappings it has. */
	model_fork(&s->m);
	setrlimit(RLIMIT_AS, &rl);
	/* Raw mappings under records make states no program can (they bypass
	 * the library, SPEC §11): what the library says about them is not
	 * checked, only what the probes read. */
	{
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null >= 0)
			dup2(null, STDERR_FILENO);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = probe_fault;
	sa.sa_flags = SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	/* Counters are per process: a forked child starts from zero (read
	 * now, checked after the records, which matter more). */
	if (p_get_stats)
		p_get_stats(&st, sizeof(st));
	/* From the top down: a range fill reaches up, never down. */
	for (int u = HW - 1; s->hbase && u >= 0; u--) {
		const struct mpage *p = &s->m.hu[u];
		int want = probe_expect(s, p, true, &natural);
		unsigned char v = 0;

		if (!natural &&
		    (void *)syscall(SYS_mmap, unit_addr(s, u), hs, PROT_READ, MAP_SHARED | MAP_FIXED,
				    s->probe_fd, 0) != unit_addr(s, u))
			fail(s, F_SETUP, "probe: mmap: %s", strerror(errno));
		got[W + u] = probe_read(unit_addr(s, u) + hs - ps, &v);
		if ((want != P_ANY && got[W + u] != want) || (got[W + u] == P_RESCUE && v != 0)) {
			char b[160];

			unit_str(s, u, b, sizeof(b));
			fail(s, F_RECORDS, "probe of huge page %d (%s, %s): %s%s; the model expects %s",
			     u, b, natural ? "read as it is" : "an empty file mapped over it",
			     probe_names[got[W + u]], v ? " but not zero" : "", probe_names[want]);
		}
	}
	for (int i = W - 1; i >= 0; i--) {
		const struct mpage *p = &s->m.pg[i];
		int want = probe_expect(s, p, false, &natural);
		unsigned char v = 0;

		if (!natural &&
		    (void *)syscall(SYS_mmap, page_addr(s, i), ps, PROT_READ, MAP_SHARED | MAP_FIXED,
				    s->probe_fd, 0) != page_addr(s, i))
			fail(s, F_SETUP, "probe: mmap: %s", strerror(errno));
		got[i] = probe_read(page_addr(s, i), &v);
		if ((want != P_ANY && got[i] != want) || (got[i] == P_RESCUE && v != 0)) {
			char b[160];

			page_str(s, i, b, sizeof(b));
			fail(s, F_RECORDS, "probe of page %d (%s, %s): %s%s; the model expects %s",
			     i, b, natural ? "read as it is" : "an empty file mapped over it",
			     probe_names[got[i]], v ? " but not zero" : "", probe_names[want]);
		}
	}
	/* A rescued page has the recorded protection: the model's. */
	read_kernel(s);
	for (int i = 0; i < W; i++) {
		const struct mpage *p = &s->m.pg[i];
		const struct kpage *k = &s->k[i];

		if (got[i] == P_RESCUE && (k->ino != 0 || k->r != !!(p->prot & PROT_READ) ||
					   k->w != !!(p->prot & PROT_WRITE))) {
			char b[160], m[4096];

			page_str(s, i, b, sizeof(b));
			window_maps(s, m, sizeof(m));
			fail(s, F_RECORDS, "probe of page %d (%s): rescued, but not as a private page with "
			     "its protection %s:%s", i, b, prot_str(p->prot), m);
		}
	}
	for (int u = 0; s->hbase && u < HW; u++) {
		const struct mpage *p = &s->m.hu[u];
		const struct kunit *k = &s->hk[u];

		/* A record of hugetlbfs is rescued a whole huge page at a time;
		 * one of the anonymous reservation (nosigbus_protect) a page. */
		if (p->kind == K_ANON && !p->rescued)
			continue;
		if (got[W + u] == P_RESCUE && (!k->uniform || k->ino != 0 || k->covered != hs ||
					       k->r != !!(p->prot & PROT_READ) ||
					       k->w != !!(p->prot & PROT_WRITE))) {
			char b[160], m[4096];

			unit_str(s, u, b, sizeof(b));
			window_maps(s, m, sizeof(m));
			fail(s, F_RECORDS, "probe of huge page %d (%s): rescued, but not as a whole huge "
			     "page of private memory with protection %s:%s", u, b, prot_str(p->prot), m);
		}
	}
	if (st.rescues || st.pages || st.failures || st.unverified)
		fail(s, F_STATS, "a forked child starts with counters %" PRIu64 " rescues, %" PRIu64
		     " pages, %" PRIu64 " failures, %" PRIu64 " unverified; they are per process and "
		     "must start from zero", st.rescues, st.pages, st.failures, st.unverified);
	_exit(0);
}

/* After a call: the records, probed in a child (which may change anything). */
static void
probe(struct seq *s)
{
	int status;
	pid_t pid;

	if (!model_lib)
		return;
	sh->c.probes++;
	sh->c.probed += W + (s->hbase ? HW : 0);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail(s, F_SETUP, "fork: %s", strerror(errno));
	if (pid == 0)
		probe_child(s);
	status = wait_child(s, pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	if (sh->fail_class != F_NONE)
		_exit(1);	/* the child said why */
	fail(s, F_RECORDS, "the probe %s", nsbt_status_str(status));
}

/* Can op run in this state?  Replays skip the ones that cannot. */
static bool
op_valid(const struct seq *s, const struct op *op)
{
	switch (op->type) {
	case OP_MMAP:
		return op->mode != MM_HINT || range_free(s, op->a, op->n);
	case OP_REFRESH:
		/* Under RLIMIT_AS the library may lack room for its work. */
		return p_refresh && !s->m.limited;
	case OP_PROTECT:
	case OP_UNPROTECT:
		if (!p_protect)
			return false;
		if (op->type == OP_UNPROTECT)
			return !s->no_regrow;
		/* fill=range replaces to the end of a record: keep records
		 * to one file mapping, as the kernel patch would have them. */
		for (int i = op->a; s->no_regrow && i < op->a + op->n; i++) {
			const struct mpage *p = &s->m.pg[i], *q = &s->m.pg[op->a];

			if (p->kind != K_FILE || p->file != q->file || p->shared != q->shared ||
			    p->pgoff != q->pgoff + (i - op->a))
				return false;
		}
		return true;
	case OP_TRUNCATE:
		return !s->no_regrow || op->n <= s->m.f[op->file].size;
	case OP_THREADS:
		return model_lib;
	case OP_MADVISE:
		/* mlock populates a writable private mapping of a file by
		 * writing: copies the model does not follow. */
		for (int i = op->a; op->mode == MA_MLOCK && i < op->a + op->n; i++) {
			const struct mpage *p = &s->m.pg[i];

			if (p->kind == K_FILE && !p->shared && (p->prot & PROT_WRITE))
				return false;
		}
		/* MADV_REMOVE punches holes: not in a file on a disk, whose
		 * file system may not (EOPNOTSUPP, after the pages before),
		 * nor on the full tmpfs, which must stay full. */
		for (int i = op->a; op->mode == MA_REMOVE && i < op->a + op->n; i++) {
			const struct mpage *p = &s->m.pg[i];

			if ((p->kind == K_FILE || p->rfile) && (s->m.f[p->file].backing == B_DISK ||
								s->m.f[p->file].backing == B_FULL))
				return false;
		}
		/* fill=range may have made a page past the end anonymous
		 * already: MADV_WIPEONFORK's outcome is then the kernel's. */
		for (int i = op->a; s->no_regrow && op->mode == MA_WIPEONFORK && i < op->a + op->n; i++) {
			const struct mpage *p = &s->m.pg[i];

			if (p->kind == K_FILE && p->prot_d && p->pgoff >= s->m.f[p->file].size)
				return false;
		}
		return true;
	case OP_PWRITE:
		return !s->no_regrow || op->a < s->m.f[op->file].size;
	case OP_HMMAP:
	case OP_HREAD:
		return s->hbase != NULL;
	case OP_HMREMAP:
		/* Partial huge pages only of hugetlbfs (the rest would split). */
		if (!s->hbase)
			return false;
		for (int i = op->a; (huge_partial(op->d) || huge_partial(op->d2)) && i < op->a + op->o; i++)
			if (s->m.hu[i].kind != K_FILE)
				return false;
		return true;
	case OP_HMUNMAP:
		/* A partial huge page of anything but hugetlbfs would be split. */
		return s->hbase && (!huge_partial(op->d) || s->m.hu[op->a + op->n - 1].kind != K_ANON);
	case OP_HMPROTECT:
		return s->hbase && (!huge_partial(op->d) ||
				    (op->n == 1 && s->m.hu[op->a].kind != K_ANON));
	case OP_HPROTECT:
	case OP_HUNPROTECT:
		return s->hbase && p_protect && !s->no_regrow;
	default:
		return true;
	}
}

/* Runs op; returns true for a mapping call (then the records are probed). */
static bool
run_op(struct seq *s, const struct op *op)
{
	switch (op->type) {
	case OP_READ:
	case OP_WRITE:
		run_access(s, op);
		return false;
	case OP_TRUNCATE:
	case OP_PWRITE:
		run_file_op(s, op);
		return false;
	case OP_LIMIT:
		run_limit(s, op);
		return false;
	case OP_HREAD:
		run_hread(s, op);
		return false;
	case OP_MMAP:
		run_mmap(s, op);
		break;
	case OP_MUNMAP:
		run_munmap(s, op);
		break;
	case OP_MPROTECT:
		run_mprotect(s, op);
		break;
	case OP_MADVISE:
		run_madvise(s, op);
		break;
	case OP_THREADS:
		run_threads(s, op);
		return false;
	case OP_MREMAP:
		run_mremap(s, op);
		break;
	case OP_PROTECT:
	case OP_UNPROTECT:
		run_protect(s, op);
		break;
	case OP_REFRESH:
		run_refresh(s, op);
		break;
	case OP_HMMAP:
		run_hmmap(s, op);
		break;
	case OP_HMUNMAP:
		run_hmunmap(s, op);
		break;
	case OP_HMPROTECT:
		run_hmprotect(s, op);
		break;
	case OP_HMREMAP:
		run_hmremap(s, op);
		break;
	case OP_HPROTECT:
	case OP_HUNPROTECT:
		run_hprotect(s, op);
		break;
	}
	return true;
}

/* ---- generating operations ---------------------------------------------- */

static int
pick_prot(struct seq *s)
{
	int r = rnd(s, 100);

	return r < 70 ? PROT_READ | PROT_WRITE : r < 90 ? PROT_READ : PROT_NONE;
}

static int
pick_page(struct seq *s)
{
	int cand[W], n = 0;

	for (int i = 0; i < W; i++)
		if (s->m.pg[i].kind != K_NONE && s->m.pg[i].prot)
			cand[n++] = i;
	if (n && rnd(s, 100) < 85)
		return cand[rnd(s, n)];
	return rnd(s, W);
}

/* Now and then a length short of whole pages (of `unit` bytes): the kernel rounds it up. */
static uint32_t
pick_short(struct seq *s, size_t unit)
{
	return rnd(s, 100) < 30 ? (uint32_t)(1 + rnd(s, (int)unit - 1)) : 0;
}

static int
pick_len(struct seq *s, int a, int max)
{
	int room = W - a;

	return 1 + rnd(s, room < max ? room : max);
}

/* A destination that does not overlap the source; false if none found. */
static bool
pick_target(struct seq *s, struct op *op, int nwin)
{
	int o = op->o ? op->o : 1;

	for (int tries = 0; tries < 8; tries++) {
		op->t = (int16_t)rnd(s, nwin - op->n + 1);
		if (!(op->a < op->t + op->n && op->t < op->a + o))
			return true;
	}
	return false;
}

static bool
gen_mremap(struct seq *s, struct op *op)
{
	int cand[W], n = 0, i, lo, hi, r;

	for (i = 0; i < W; i++)
		if (s->m.pg[i].kind != K_NONE)
			cand[n++] = i;
	if (!n)
		return false;
	i = cand[rnd(s, n)];
	/* Mostly within one VMA; sometimes a mapping that rescues split. */
	lo = s->k[i].vstart > 0 ? s->k[i].vstart : 0;
	hi = s->k[i].vend < W ? s->k[i].vend : W;
	r = rnd(s, 100);
	if (r < 40) {
		while (lo > 0 && s->m.pg[lo - 1].kind != K_NONE)
			lo--;
		while (hi < W && s->m.pg[hi].kind != K_NONE)
			hi++;
	} else if (r < 55) {
		/* Across holes: the kernel may refuse, or move the pieces. */
		hi = W;
	}
	op->type = OP_MREMAP;
	op->a = (int16_t)(lo + rnd(s, i - lo + 1));
	op->o = (int16_t)(1 + rnd(s, hi - op->a < 5 ? hi - op->a : 5));
	switch (rnd(s, 100) < 12 ? 3 + rnd(s, 2) : rnd(s, op->o > 1 ? 3 : 2)) {
	case 3:
		op->mode = MR_DONTUNMAP;
		op->n = op->o;
		if (!pick_target(s, op, W))
			op->mode = MR_SHRINK, op->n = op->o;
		break;
	case 4:
		/* old_len 0: mostly from a shared file page, which works. */
		op->mode = MR_DUP;
		op->o = 0;
		op->n = (int16_t)(1 + rnd(s, 3));
		if (!pick_target(s, op, W))
			op->mode = MR_SHRINK, op->o = 1, op->n = 1;
		break;
	case 0:
		op->mode = MR_GROW;
		op->n = (int16_t)(op->o + 1 + rnd(s, 2));
		if (op->a + op->n <= W)
			break;
		/* fall through */
	case 1:
		op->mode = MR_MOVE;
		op->n = (int16_t)(op->o + rnd(s, 3) - 1);
		if (op->n < 1)
			op->n = 1;
		if (op->n > W / 2)
			op->n = W / 2;
		if (!pick_target(s, op, W) && rnd(s, 100) < 5)
			break;	/* an overlapping target now and then: EINVAL */
		break;
	default:
		op->mode = MR_SHRINK;
		op->n = (int16_t)(1 + rnd(s, op->o - 1));
	}
	op->d = pick_short(s, ps);
	if (op->o)
		op->d2 = pick_short(s, ps);
	return true;
}

static void
gen_main(struct seq *s, struct op *op)
{
	int r = rnd(s, 100);

	if (r >= 86 && r < 90 && !p_protect)
		r = 0;
	if (r < 38) {
		op->type = rnd(s, 100) < 55 ? OP_READ : OP_WRITE;
		op->a = (int16_t)pick_page(s);
		op->alt = (uint8_t)(rnd(s, 100) < 20);
	} else if (r == 38 && rnd(s, 4) == 0) {
		op->type = OP_THREADS;
		op->mode = (uint8_t)rnd(s, 2);
		op->n = (int16_t)(2 + rnd(s, THREADS_MAX - 1));
		op->o = (int16_t)rnd(s, op->n * THREAD_PAGES);
	} else if (r < 42) {
		op->type = OP_MADVISE;
		op->mode = (uint8_t)rnd(s, MA_COUNT);
		op->a = (int16_t)pick_page(s);
		op->n = (int16_t)pick_len(s, op->a, 4);
		op->d = op->mode == MA_REMAP_FILE ? 0 : pick_short(s, ps);
		op->off = (int16_t)rnd(s, FP);
	} else if (r < 57) {
		op->type = OP_MMAP;
		op->n = (int16_t)(1 + rnd(s, 4));
		op->a = (int16_t)rnd(s, W - op->n + 1);
		op->file = (int8_t)(rnd(s, 100) < 85 ? rnd(s, NF) : -1);
		op->off = (int16_t)(op->file < 0 ? 0 : rnd(s, FP));
		op->prot = (uint8_t)pick_prot(s);
		op->shared = (uint8_t)(op->file >= 0 && rnd(s, 2));
		op->flag = (uint8_t)(model_lib && rnd(s, 100) < 65);
		op->alt = (uint8_t)(rnd(s, 100) < 20);
		op->d = pick_short(s, ps);
		r = rnd(s, 100);
		op->mode = r < 60 ? MM_FIXED : r < 80 ? MM_NOREPLACE : MM_HINT;
		if (op->mode == MM_HINT) {
			int cand[W], n = 0;

			for (int a = 0; a + op->n <= W; a++)
				if (range_free(s, a, op->n))
					cand[n++] = a;
			if (n)
				op->a = (int16_t)cand[rnd(s, n)];
			else
				op->mode = MM_FIXED;
		}
	} else if (r < 63) {
		op->type = OP_MUNMAP;
		op->a = (int16_t)rnd(s, W);
		op->n = (int16_t)pick_len(s, op->a, 4);
		op->d = pick_short(s, ps);
	} else if (r < 70) {
		op->type = OP_MPROTECT;
		op->a = (int16_t)pick_page(s);
		op->n = (int16_t)pick_len(s, op->a, 5);
		op->prot = (uint8_t)pick_prot(s);
		op->alt = (uint8_t)(rnd(s, 100) < 15);
		op->d = pick_short(s, ps);
	} else if (r < 78) {
		if (!gen_mremap(s, op)) {
			op->type = OP_READ;
			op->a = (int16_t)pick_page(s);
		}
	} else if (r < 86) {
		op->type = OP_TRUNCATE;
		op->file = (int8_t)rnd(s, NF);
		if (s->no_regrow)
			op->n = (int16_t)(s->m.f[op->file].size - rnd(s, 3));
		else
			op->n = (int16_t)rnd(s, FP + 1);
		if (op->n < 0)
			op->n = 0;
	} else if (r < 90) {
		op->type = rnd(s, 100) < 75 || s->no_regrow ? OP_PROTECT : OP_UNPROTECT;
		op->a = (int16_t)pick_page(s);
		/* A refresh, mostly where a shared page was rescued that its
		 * file covers again. */
		for (int i = 0, at = rnd(s, W); p_refresh && !s->m.limited && i < W; i++) {
			const struct mpage *p = &s->m.pg[(at + i) % W];

			if (p->rescued && p->rfile == 2 && p->pgoff < s->m.f[p->file].size &&
			    rnd(s, 100) < 70) {
				op->type = OP_REFRESH;
				op->a = (int16_t)((at + i) % W);
				break;
			}
		}
		if (rnd(s, 100) < 10 && p_refresh && !s->m.limited)
			op->type = OP_REFRESH;
		op->n = (int16_t)pick_len(s, op->a, 4);
		if (s->no_regrow && op->type == OP_PROTECT) {
			/* One file mapping at most: see op_valid(). */
			int n = 1;

			while (n < op->n && op_valid(s, &(struct op){ .type = OP_PROTECT,
					.a = op->a, .n = (int16_t)(n + 1) }))
				n++;
			op->n = (int16_t)n;
		}
		op->d = pick_short(s, ps);
	} else {
		op->type = OP_PWRITE;
		op->file = (int8_t)rnd(s, NF);
		if (s->no_regrow) {
			int size = s->m.f[op->file].size;

			op->a = (int16_t)(size ? rnd(s, size) : 0);
			if (!size)
				op->type = OP_TRUNCATE, op->n = 0;
		} else {
			op->a = (int16_t)rnd(s, FP);
		}
	}
}

/* The huge window: lengths short of whole huge pages half the time. */
static void
gen_huge(struct seq *s, struct op *op)
{
	int r = rnd(s, 100), units = (int)(hs / ps);

	op->a = (int16_t)rnd(s, HW);
	op->n = (int16_t)(1 + rnd(s, HW - op->a < 2 ? HW - op->a : 2));
	op->prot = (uint8_t)pick_prot(s);
	if (r < 35) {
		op->type = OP_HREAD;
		op->n = (int16_t)(rnd(s, 2) ? 0 : units - 1);
		op->alt = (uint8_t)(rnd(s, 100) < 10);
	} else if (r < 60) {
		op->type = OP_HMMAP;
		op->shared = (uint8_t)rnd(s, 2);
		op->flag = (uint8_t)(model_lib && rnd(s, 100) < 50);
		r = rnd(s, 100);
		op->mode = r < 70 ? MM_FIXED : r < 85 ? MM_NOREPLACE : MM_BADOFF;
		op->d = pick_short(s, hs);
	} else if (r < 70) {
		op->type = OP_HMUNMAP;
		op->d = pick_short(s, hs);
	} else if (r < 80) {
		op->type = OP_HMPROTECT;
		if (rnd(s, 2))
			op->n = 1, op->d = pick_short(s, hs);
	} else if (r < 92) {
		op->type = OP_HMREMAP;
		op->o = (int16_t)(1 + rnd(s, HW - op->a < 3 ? HW - op->a : 3));
		r = rnd(s, 100);
		if (r < 35 && op->o > 1) {
			op->mode = MR_SHRINK;
			op->n = (int16_t)(1 + rnd(s, op->o - 1));
		} else if (r < 50 && op->a + op->o < HW) {
			op->mode = MR_GROW;
			op->n = (int16_t)(op->o + 1);
		} else {
			op->mode = MR_MOVE;
			op->n = (int16_t)(1 + rnd(s, op->o));
			if (!pick_target(s, op, HW))
				op->mode = MR_SHRINK, op->n = op->o;
		}
		op->d = pick_short(s, hs);
		op->d2 = pick_short(s, hs);
	} else {
		op->type = rnd(s, 100) < 75 ? OP_HPROTECT : OP_HUNPROTECT;
		op->d = pick_short(s, ps);
	}
}

static void
gen_op(struct seq *s, struct op *op)
{
	int r = rnd(s, 100);

	memset(op, 0, sizeof(*op));
	op->val = rnd_val(s);
	if (r < 3) {
		static const int16_t room[] = { -1, -1, -1, 0, 1, 2, 4, 8, 64 };

		op->type = OP_LIMIT;
		op->n = room[rnd(s, (int)(sizeof(room) / sizeof(room[0])))];
	} else if (r >= 88 && s->hbase) {
		gen_huge(s, op);
	} else {
		gen_main(s, op);
	}
}

/* ---- one sequence (in its own process) ---------------------------------- */

static unsigned char *
reserve_window(void)
{
	/* Low addresses, below anything the kernel hands out top-down, and
	 * outside ASan's shadow on x86_64 and aarch64. */
	static const uintptr_t where[] = { 1ul << 30, 3ul << 28, 1ul << 33, 1ul << 35 };
	size_t len = W * ps;
	void *p;

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		p = mmap((void *)where[i], len, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == (void *)where[i])
			return p;
		if (p != MAP_FAILED)
			munmap(p, len);
	}
	p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The huge window, huge-page aligned and low. */
static unsigned char *
reserve_huge_window(void)
{
	static const uintptr_t where[] = { 1ul << 34, 3ul << 33, 1ul << 36 };
	size_t len = HW * hs;

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		void *p = mmap((void *)where[i], len, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);

		if (p == (void *)where[i])
			return p;
		if (p != MAP_FAILED)
			munmap(p, len);
	}
	return NULL;
}

/* A file on the full tmpfs, unlinked: its blocks go when the sequence ends. */
static int
full_file(struct seq *s, const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", full_dir, name);
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		fail(s, F_SETUP, "%s: %s", path, strerror(errno));
	unlink(path);
	return fd;
}

static void
setup(struct seq *s)
{
	unsigned char buf[65536];
	size_t used = 0;
	bool full = false;

	s->no_regrow = cfg->fill && strcmp(cfg->fill, "range") == 0;
	s->policy_shm = cfg->policy && (strcmp(cfg->policy, "shm") == 0 || !*cfg->policy);
	s->policy_files = cfg->policy && strcmp(cfg->policy, "files") == 0;
	s->strict = cfg->strict && strcmp(cfg->strict, "1") == 0;
	s->errors_zero = cfg->errors && strcmp(cfg->errors, "zero") == 0;
	s->filler_fd = -1;
	for (int f = 0; f < NF; f++) {
		struct mfile *mf = &s->m.f[f];
		int r = rnd(s, 100);
		struct stat st;

		mf->backing = (uint8_t)(r < 45 ? B_MEMFD : r < 70 ? B_TMPFS : r < 85 ? B_DISK : B_FULL);
		/* fill=range fills past holes too: no full tmpfs there. */
		if (mf->backing == B_FULL && (!full_dir || s->no_regrow))
			mf->backing = B_MEMFD;
		if (mf->backing == B_FULL)
			s->fd[f] = full_file(s, f ? "model-file1" : "model-file0");
		else
			s->fd[f] = nsbt_file(mf->backing == B_MEMFD ? NSBT_MEMFD :
					     mf->backing == B_TMPFS ? NSBT_TMPFS : NSBT_DISK, 0);
		full |= mf->backing == B_FULL;
		mf->size = rnd(s, 100) < 70 ? FP / 2 + rnd(s, FP / 2 + 1) : rnd(s, FP + 1);
		for (int p = 0; p < mf->size; p++) {
			mf->val[p] = rnd_val(s);
			/* On the full tmpfs some pages stay holes. */
			if (mf->backing == B_FULL && rnd(s, 100) < 40) {
				mf->val[p] = 0;
				continue;
			}
			mf->alloc[p] = 1;
			memset(buf, mf->val[p], ps);
			if (pwrite(s->fd[f], buf, ps, (off_t)((size_t)p * ps)) != (ssize_t)ps)
				fail(s, F_SETUP, "pwrite: %s", strerror(errno));
		}
		if (ftruncate(s->fd[f], (off_t)((size_t)mf->size * ps)) != 0)
			fail(s, F_SETUP, "ftruncate: %s", strerror(errno));
		if (fstat(s->fd[f], &st) < 0)
			fail(s, F_SETUP, "fstat: %s", strerror(errno));
		s->ino[f] = (unsigned long)st.st_ino;
		used += (size_t)snprintf(sh->setup + used, sizeof(sh->setup) - used,
					 "%sfile%d: %s, %d pages [", f ? "; " : "", f,
					 backing_str(mf->backing), mf->size);
		for (int p = 0; p < mf->size && used < sizeof(sh->setup); p++)
			used += (size_t)snprintf(sh->setup + used, sizeof(sh->setup) - used,
						 "%s%02x", p ? " " : "", mf->val[p]);
		if (used < sizeof(sh->setup))
			used += (size_t)snprintf(sh->setup + used, sizeof(sh->setup) - used, "]");
	}
	/* The rest of the tmpfs is taken: it is full, and stays full. */
	if (full) {
		s->filler_fd = full_file(s, "model-filler");
		refill(s);
	}
	s->base = reserve_window();
	if (!s->base)
		fail(s, F_SETUP, "cannot reserve the window: %s", strerror(errno));
	for (int i = 0; i < W; i++)
		s->m.pg[i].kind = K_ANON;	/* PROT_NONE, unprotected */
	s->probe_fd = memfd_create("model-probe", MFD_CLOEXEC);
	if (s->probe_fd < 0)
		fail(s, F_SETUP, "memfd_create: %s", strerror(errno));
	/* The huge window: an empty hugetlbfs file, MAP_NORESERVE mappings
	 * only, so no huge page is ever allocated.  Not with fill=range (it
	 * would fill whole huge pages beyond what the model follows). */
	s->hfd = -1;
	if (hs && !s->no_regrow) {
		struct stat st;

		s->hfd = memfd_create("model-huge", MFD_HUGETLB | MFD_CLOEXEC);
		if (s->hfd >= 0 && fstat(s->hfd, &st) == 0) {
			s->hino = (unsigned long)st.st_ino;
			s->hbase = reserve_huge_window();
		}
		for (int u = 0; s->hbase && u < HW; u++)
			s->m.hu[u].kind = K_ANON;	/* PROT_NONE, unprotected */
	}
	/* The library makes its table with the first record: now, not under
	 * a tight RLIMIT_AS later. */
	if (p_get_stats) {
		void *warm = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NOSIGBUS, -1, 0);

		if (warm == MAP_FAILED || munmap(warm, ps) != 0)
			fail(s, F_SETUP, "warming the library up: %s", strerror(errno));
	}
	if (p_get_stats && p_get_stats(&s->base_stats, sizeof(s->base_stats)) < 0)
		fail(s, F_SETUP, "nosigbus_get_stats: %s", strerror(errno));
}

static void __attribute__((noreturn))
run_sequence(void)
{
	struct seq s;
	bool call;
	int n;

	memset(&s, 0, sizeof(s));
	s.rng = sh->seq_seed;
	sh->cur = -1;
	setup(&s);
	check_layout(&s);
	check_files(&s);
	n = sh->replay ? sh->nops : ops_per_seq;
	for (int i = 0; i < n; i++) {
		struct op *op = &sh->ops[i];
		char b[256];

		sh->cur = i;
		sh->expect[0] = '\0';
		if (!sh->replay) {
			gen_op(&s, op);
			sh->nops = i + 1;
		}
		if (!op_valid(&s, op)) {
			sh->c.skipped++;
			continue;
		}
		if (trace) {
			op_str(op, b, sizeof(b));
			printf("  %3d: %s\n", i, b);
			fflush(stdout);
		}
		call = run_op(&s, op);
		sh->c.ops++;
		check_layout(&s);
		check_files(&s);
		check_stats(&s);
		/* Every mapping call, failed or not: are the records right? */
		if (call)
			probe(&s);
	}
	/* Everything unmapped: no record may outlive its mapping. */
	sh->cur = n;
	if (munmap(s.base, W * ps) < 0 || (s.hbase && munmap(s.hbase, HW * hs) < 0))
		fail(&s, F_RESULT, "munmap of the whole window at the end failed: %s%s", strerror(errno),
		     s.m.limited ? " (under RLIMIT_AS: munmap needs no address space)" : "");
	if (p_get_stats) {
		struct model_stats st;

		p_get_stats(&st, sizeof(st));
		if (st.mappings != s.base_stats.mappings)
			fail(&s, F_STATS, "after unmapping the window, %" PRIu64
			     " protected mappings are left (%" PRIu64 " before the sequence)",
			     st.mappings, s.base_stats.mappings);
		sh->c.rescues += st.rescues - s.base_stats.rescues;
	}
	for (int f = 0; f < NF; f++)
		close(s.fd[f]);
	_exit(0);
}

/* ---- the worker: sequences, and shrinking a failing one ----------------- */

/* Runs the sequence described by sh in a child; returns its fail class. */
static int
run_child(void)
{
	static int err_fd = -1;
	char err[1024];
	ssize_t elen;
	int status;
	pid_t pid;

	/* The sequence's stderr (and its children's), to check it stays empty. */
	if (err_fd < 0) {
		err_fd = memfd_create("model-stderr", MFD_CLOEXEC);
		if (err_fd < 0)
			nsbt_fail("memfd_create: %s", strerror(errno));
	}
	if (ftruncate(err_fd, 0) != 0)
		nsbt_fail("ftruncate: %s", strerror(errno));
	sh->fail_class = F_NONE;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(err_fd, STDERR_FILENO);
		fcntl(STDERR_FILENO, F_SETFL, O_APPEND);
		run_sequence();
	}
	switch (wait_watchdog(pid, nsbt_scaled(SEQ_SECS), &status)) {
	case -2:
		nsbt_fail("waitpid: %s", strerror(errno));
	case -1:
		if (sh->fail_class == F_NONE) {
			char b[256] = "setting up";

			if (sh->cur >= 0 && sh->cur < sh->nops)
				op_str(&sh->ops[sh->cur], b, sizeof(b));
			sh->fail_class = F_DIED;
			sh->fail_op = sh->cur;
			sh->fail_type = sh->cur >= 0 && sh->cur < sh->nops ? sh->ops[sh->cur].type : -1;
			snprintf(sh->msg, sizeof(sh->msg), "the sequence process was still running after "
				 "%d s, at op %d (%s), and was killed: a hang", nsbt_scaled(SEQ_SECS), sh->cur, b);
		}
		return sh->fail_class;
	}
	elen = pread(err_fd, err, sizeof(err) - 1, 0);
	err[elen > 0 ? elen : 0] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		if (!strstr(err, "nosigbus:"))
			return F_NONE;
		sh->fail_class = F_STDERR;
		sh->fail_op = sh->nops;
		sh->fail_type = -1;
		snprintf(sh->msg, sizeof(sh->msg), "the library printed (nothing is printed by "
			 "default): %s", err);
		return F_STDERR;
	}

	if (sh->fail_class == F_NONE || WIFSIGNALED(status)) {
		char b[256] = "setting up";

		if (sh->cur >= 0 && sh->cur < sh->nops)
			op_str(&sh->ops[sh->cur], b, sizeof(b));
		sh->fail_class = F_DIED;
		sh->fail_op = sh->cur;
		sh->fail_type = sh->cur >= 0 && sh->cur < sh->nops ? sh->ops[sh->cur].type : -1;
		snprintf(sh->msg, sizeof(sh->msg), "the sequence process %s during op %d (%s)%s%s",
			 nsbt_status_str(status), sh->cur, b,
			 sh->expect[0] ? "; the model expects " : "", sh->expect);
	}
	if (err[0] && strlen(sh->msg) < sizeof(sh->msg) - 64)
		snprintf(sh->msg + strlen(sh->msg), sizeof(sh->msg) - strlen(sh->msg),
			 "\n      stderr: %.900s", err);
	return sh->fail_class;
}

static struct op best[MAX_OPS];

static void
print_ops(const struct op *ops, int n, int fail_op)
{
	for (int i = 0; i < n; i++) {
		char b[256];

		op_str(&ops[i], b, sizeof(b));
		printf("    %3d: %s%s\n", i, b, i == fail_op ? "   <-- diverges here" : "");
	}
}

/* Deletes operations one at a time while the same kind of failure stays. */
static int
shrink(int *runs)
{
	int len = sh->fail_op < 0 ? 0 : sh->fail_op < sh->nops ? sh->fail_op + 1 : sh->nops;
	int cls = sh->fail_class, type = sh->fail_type;
	bool changed = true;

	struct timespec t0, t;

	memcpy(best, sh->ops, sizeof(best[0]) * (size_t)len);
	*runs = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (changed && *runs < MAX_SHRINK_RUNS) {
		changed = false;
		for (int i = len - 1; i >= 0 && *runs < MAX_SHRINK_RUNS; i--) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > MAX_SHRINK_SECS) {
				changed = false;
				break;
			}
			int m = 0;

			for (int j = 0; j < len; j++)
				if (j != i)
					sh->ops[m++] = best[j];
			sh->nops = m;
			sh->replay = true;
			(*runs)++;
			if (run_child() == cls && sh->fail_type == type) {
				int keep = sh->fail_op >= 0 && sh->fail_op < m ? sh->fail_op + 1 : m;

				memcpy(best, sh->ops, sizeof(best[0]) * (size_t)keep);
				len = keep;
				changed = true;
				if (i > len)
					i = len;
			}
		}
	}
	/* Run the shortest once more for its message. */
	memcpy(sh->ops, best, sizeof(best[0]) * (size_t)len);
	sh->nops = len;
	sh->replay = true;
	run_child();
	return len;
}

static int
worker_main(uint64_t seed, uint64_t first, uint64_t count, int report_fd)
{
	struct rlimit no_core = { 0, 0 };
	int ret = 0;

	/* Expected deaths must not write core files. */
	setrlimit(RLIMIT_CORE, &no_core);
	prctl(PR_SET_DUMPABLE, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		nsbt_fail("mmap: %s", strerror(errno));
	if (model_lib && nsbt_have_library()) {
		p_get_stats = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
		p_protect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_protect");
		p_unprotect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_unprotect");
		p_refresh = (long (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_refresh");
	}
	for (uint64_t k = first; k < first + count; k++) {
		uint64_t seq_seed = seq_seed_of(seed, cfg_index, k);
		char first_msg[sizeof(sh->msg)];
		int cls, fail_op, len, runs;

		sh->seq_seed = seq_seed;
		sh->replay = false;
		sh->nops = 0;
		cls = run_child();
		sh->c.sequences++;
		if (cls == F_NONE)
			continue;

		fail_op = sh->fail_op;
		snprintf(first_msg, sizeof(first_msg), "%s", sh->msg);
		printf("FAIL: model divergence: config %s (%s), seed %" PRIu64 ", sequence %" PRIu64
		       ": %s at op %d\n", cfg->name, cfg->what, seed, k, fail_names[cls], fail_op);
		printf("  %s\n", first_msg);
		printf("  the sequence (%d operations):\n", sh->nops);
		printf("    files: %s\n", sh->setup);
		print_ops(sh->ops, sh->nops, fail_op);
		fflush(stdout);
		len = shrink(&runs);
		printf("  shortest sequence that still fails (%d operations, %d replays):\n", len, runs);
		printf("    window: %d pages of %zu bytes, all PROT_NONE; files: %s\n", W, ps, sh->setup);
		print_ops(sh->ops, len, sh->fail_op);
		printf("  %s: %s\n", fail_names[sh->fail_class], sh->msg);
		printf("  reproduce: model --config %s --seed %" PRIu64 " --first %" PRIu64
		       " --sequences 1 --ops %d --trace\n", cfg->name, seed, k, ops_per_seq);
		fflush(stdout);
		sh->c.skipped = (uint64_t)len;	/* the driver reads the shrunk length here */
		ret = 1;
		break;
	}
	if (report_fd >= 0) {
		if (write(report_fd, &sh->c, sizeof(sh->c)) != (ssize_t)sizeof(sh->c))
			nsbt_fail("report: %s", strerror(errno));
		close(report_fd);
	}
	return ret;
}

/* ---- the driver --------------------------------------------------------- */

/* The huge page size if hugetlbfs works here, else 0. */
static size_t
huge_page_size(void)
{
	int fd = memfd_create("model-huge-probe", MFD_HUGETLB | MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	close(fd);
	return nsbt_huge_page_size();
}

static char full_mount[64];

/*
 * A small tmpfs, mounted in a mount namespace of our own (so nobody else
 * sees it, and it goes away with us), for the B_FULL backing.  Needs root;
 * skipped with the reason otherwise.
 */
static void
mount_full_tmpfs(void)
{
	if (unshare(CLONE_NEWNS) != 0) {
		printf("model: cannot make a mount namespace (%s; not root?): no full tmpfs, the "
		       "issue-12 cases are skipped\n", strerror(errno));
		return;
	}
	snprintf(full_mount, sizeof(full_mount), "/tmp/nsb-model-full-XXXXXX");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 || !mkdtemp(full_mount) ||
	    mount("nsb-model-full", full_mount, "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0700") != 0) {
		printf("model: cannot mount a small tmpfs (%s): no full tmpfs, the issue-12 cases "
		       "are skipped\n", strerror(errno));
		if (full_mount[0] && strchr(full_mount, 'X') == NULL)
			rmdir(full_mount);
		full_mount[0] = '\0';
		return;
	}
	setenv("NSB_MODEL_FULL_DIR", full_mount, 1);
	printf("model: a 256 KiB tmpfs at %s, kept full: one backing of the files\n", full_mount);
}

static void
unmount_full_tmpfs(void)
{
	if (!full_mount[0])
		return;
	umount2(full_mount, MNT_DETACH);
	rmdir(full_mount);
}

static const char *
preload_path(void)
{
	static char path[PATH_MAX + 64];
	const char *env = getenv("NSB_PRELOAD");
	char exe[PATH_MAX];
	ssize_t n;

	if (env && *env)
		return env;
	/* build/tests/reliability/model -> build/src/libnosigbus.so.0 */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(path, sizeof(path), "%s/../../src/libnosigbus.so.0", exe);
	return path;
}

static char **
worker_env(const struct config *c, const char *preload)
{
	extern char **environ;
	static char *env[4096];
	static char ld[8192], pol[64], fill[64], strict[64], errs[64];
	const char *old = getenv("LD_PRELOAD");
	size_t n = 0;

	for (char **e = environ; *e && n < 4000; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && strncmp(*e, "NOSIGBUS_", 9) != 0)
			env[n++] = *e;
	/* Keep what is preloaded already (a sanitizer runtime must stay
	 * first), but never the library itself when it must be absent. */
	snprintf(ld, sizeof(ld), "LD_PRELOAD=");
	if (old) {
		char copy[8192], *save = NULL;

		snprintf(copy, sizeof(copy), "%s", old);
		for (char *t = strtok_r(copy, ": ", &save); t; t = strtok_r(NULL, ": ", &save)) {
			if (strstr(t, "libnosigbus"))
				continue;
			snprintf(ld + strlen(ld), sizeof(ld) - strlen(ld), "%s%s",
				 ld[11] ? ":" : "", t);
		}
	}
	if (c->policy && preload)
		snprintf(ld + strlen(ld), sizeof(ld) - strlen(ld), "%s%s", ld[11] ? ":" : "", preload);
	env[n++] = ld;
	/* Only what the configuration sets: "default" sets nothing. */
	if (c->policy && *c->policy) {
		snprintf(pol, sizeof(pol), "NOSIGBUS_POLICY=%s", c->policy);
		env[n++] = pol;
	}
	if (c->policy && c->fill) {
		snprintf(fill, sizeof(fill), "NOSIGBUS_FILL=%s", c->fill);
		env[n++] = fill;
	}
	if (c->policy && c->strict) {
		snprintf(strict, sizeof(strict), "NOSIGBUS_STRICT=%s", c->strict);
		env[n++] = strict;
	}
	if (c->policy && c->errors) {
		snprintf(errs, sizeof(errs), "NOSIGBUS_ERRORS=%s", c->errors);
		env[n++] = errs;
	}
	env[n] = NULL;
	return env;
}

static int
spawn_worker(int ci, const char *preload, uint64_t seed, uint64_t first, uint64_t count,
	     bool selftest, struct counts *c)
{
	char a_seed[32], a_first[32], a_count[32], a_ops[32], a_fd[16];
	const struct config *conf = &configs[ci];
	struct config bare = *conf;
	int pfd[2], status;
	ssize_t got = 0;
	pid_t pid;

	if (pipe(pfd) < 0)
		nsbt_fail("pipe: %s", strerror(errno));
	snprintf(a_seed, sizeof(a_seed), "%" PRIu64, seed);
	snprintf(a_first, sizeof(a_first), "%" PRIu64, first);
	snprintf(a_count, sizeof(a_count), "%" PRIu64, count);
	snprintf(a_ops, sizeof(a_ops), "%d", ops_per_seq);
	snprintf(a_fd, sizeof(a_fd), "%d", pfd[1]);
	if (selftest)
		bare.policy = NULL;	/* the model expects the library; it is not there */
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		char *argv[] = { "model", "--worker", (char *)conf->name, "--seed", a_seed,
				 "--first", a_first, "--sequences", a_count, "--ops", a_ops,
				 "--report-fd", a_fd, selftest ? "--selftest" : NULL,
				 trace ? "--trace" : NULL, NULL };

		if (!selftest && trace) {
			argv[13] = "--trace";
			argv[14] = NULL;
		}
		close(pfd[0]);
		execve("/proc/self/exe", argv, worker_env(&bare, preload));
		fprintf(stderr, "exec /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	memset(c, 0, sizeof(*c));
	while (got < (ssize_t)sizeof(*c)) {
		ssize_t n = read(pfd[0], (char *)c + got, sizeof(*c) - (size_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			nsbt_fail("waitpid: %s", strerror(errno));
	if (got != (ssize_t)sizeof(*c))
		printf("FAIL: worker for config %s: %s, no report\n", conf->name, nsbt_status_str(status));
	return got == (ssize_t)sizeof(*c) && WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

static uint64_t
parse_u64(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || !*s || *end)
		nsbt_fail("bad %s: %s", what, s);
	return v;
}

static void __attribute__((noreturn))
usage(void)
{
	printf("usage: model [--seed N] [--sequences N] [--ops N] [--config NAME] [--first K] [--trace]\n"
	       "  --sequences N  sequences in all, shared out over the configurations (default 600)\n"
	       "  --ops N        operations per sequence (default 40, at most %d)\n"
	       "  --config NAME  only this configuration:", MAX_OPS);
	for (size_t i = 0; i < NCONFIGS; i++)
		printf(" %s", configs[i].name);
	printf("\n  --first K      start at sequence K of each configuration (to reproduce one)\n"
	       "  --selftest     run config flag without the library: a divergence must be found\n"
	       "  --budget S     skip, too slow under load, when S seconds (scaled by\n"
	       "                 NSB_TIMEOUT_MULTIPLIER) are spent before the last configuration\n"
	       "A long soak: model --sequences 100000\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	uint64_t seed, sequences = 600, first = 0;
	const char *only = NULL, *worker = NULL, *preload;
	bool selftest = false, seed_given = false;
	struct counts total = { 0 };
	int report_fd = -1, nconf = 0, failed = 0, budget_secs = 0;
	struct nsbt_budget budget;
	struct timespec t0, t1;

	ps = nsbt_page();
	setvbuf(stdout, NULL, _IOLBF, 0);
	seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ ((uint64_t)clock() << 40);
	if (argc == 4 && strcmp(argv[1], "--threads") == 0)
		return threads_main(atoi(argv[2]), atoi(argv[3]));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--trace") == 0) {
			trace = true;
			continue;
		}
		if (strcmp(a, "--selftest") == 0) {
			selftest = true;
			continue;
		}
		if (strcmp(a, "--help") == 0 || !v)
			usage();
		i++;
		if (strcmp(a, "--seed") == 0)
			seed = parse_u64(v, a), seed_given = true;
		else if (strcmp(a, "--sequences") == 0)
			sequences = parse_u64(v, a);
		else if (strcmp(a, "--ops") == 0)
			ops_per_seq = (int)parse_u64(v, a);
		else if (strcmp(a, "--budget") == 0)
			budget_secs = (int)parse_u64(v, a);
		else if (strcmp(a, "--first") == 0)
			first = parse_u64(v, a);
		else if (strcmp(a, "--config") == 0)
			only = v;
		else if (strcmp(a, "--worker") == 0)
			worker = v;
		else if (strcmp(a, "--report-fd") == 0)
			report_fd = (int)parse_u64(v, a);
		else
			usage();
	}
	if (ops_per_seq < 1 || ops_per_seq > MAX_OPS)
		nsbt_fail("--ops must be 1..%d", MAX_OPS);

	if (worker) {
		for (size_t i = 0; i < NCONFIGS; i++)
			if (strcmp(configs[i].name, worker) == 0)
				cfg = &configs[i], cfg_index = (int)i;
		if (!cfg)
			nsbt_fail("unknown config %s", worker);
		model_lib = cfg->policy != NULL;
		{
			struct utsname u;
			int major = 0, minor = 0;

			if (uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2)
				old_kernel = major < 5 || (major == 5 && minor < 13);
		}
		if (model_lib && !selftest && !nsbt_have_library())
			nsbt_fail("config %s: libnosigbus is not loaded (LD_PRELOAD=%s)", cfg->name,
				  getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
		if ((!model_lib || selftest) && nsbt_have_library())
			nsbt_fail("config %s: libnosigbus is loaded but must not be", cfg->name);
		if (selftest)
			cfg_index = 1000;
		hs = huge_page_size();
		full_dir = getenv("NSB_MODEL_FULL_DIR");
		return worker_main(seed, first, sequences, report_fd);
	}

	preload = preload_path();
	if (!preload || access(preload, R_OK) != 0)
		nsbt_skip("the library is not at %s (set NSB_PRELOAD)", preload ? preload : "?");
	if (selftest) {
		only = "flag";
		printf("model: selftest: config flag runs WITHOUT the library on purpose; the divergence "
		       "reported below is what this test expects\n");
	}
	for (size_t i = 0; i < NCONFIGS; i++)
		nconf += !only || strcmp(configs[i].name, only) == 0;
	if (!nconf)
		usage();

	printf("model: seed %" PRIu64 "%s, %" PRIu64 " sequences of %d operations over %d configuration%s, "
	       "window %d pages of %zu bytes, %d files of up to %d pages\n",
	       seed, seed_given ? "" : " (fresh; rerun with --seed)", sequences, ops_per_seq,
	       nconf, nconf > 1 ? "s" : "", W, ps, NF, FP);
	printf("model: library %s\n", preload);
	hs = huge_page_size();
	if (hs)
		printf("model: hugetlbfs: a window of %d huge pages of %zu bytes\n", HW, hs);
	else
		printf("model: no hugetlbfs here (memfd_create(MFD_HUGETLB) fails): no huge window\n");
	nsbt_require_tmpfs();	/* the tmpfs backing: skip, saying why */
	if (!selftest)
		mount_full_tmpfs();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	budget = nsbt_budget_start(budget_secs);
	for (size_t i = 0, done = 0; i < NCONFIGS; i++) {
		uint64_t share;
		struct counts c;
		int r;

		if (only && strcmp(configs[i].name, only) != 0)
			continue;
		/* Work-bounded; the budget only tells a slow machine (issue 23). */
		if (budget_secs && done > 0 && !failed && nsbt_budget_spent(&budget)) {
			unmount_full_tmpfs();
			nsbt_too_slow("model: configurations", done, (unsigned long)nconf,
				      budget.seconds);
		}
		share = sequences / (uint64_t)nconf + (done < sequences % (uint64_t)nconf);
		done++;
		if (!share)
			continue;
		r = spawn_worker((int)i, preload, seed, first, share, selftest, &c);
		if (selftest) {
			if (r == 1 && c.skipped >= 1 && c.skipped <= 6) {
				printf("ok: without the library the model test fails, and shrinks the "
				       "failure to %" PRIu64 " operations\n", c.skipped);
				return 0;
			}
			printf("FAIL: selftest: expected a divergence shrunk to at most 6 operations; "
			       "worker exited %d, shrunk length %" PRIu64 "\n", r, c.skipped);
			return 1;
		}
		printf("model: config %-7s (%s): %" PRIu64 " sequences, %" PRIu64 " operations: "
		       "%" PRIu64 " reads, %" PRIu64 " writes (%" PRIu64 " in forked children), "
		       "%" PRIu64 " SIGSEGV and %" PRIu64 " SIGBUS deaths, %" PRIu64 " rescues, "
		       "%" PRIu64 " calls (%" PRIu64 " failed, %" PRIu64 " under RLIMIT_AS, %" PRIu64
		       " on huge pages), mremap %" PRIu64 " moved/%" PRIu64 " moved in pieces/%"
		       PRIu64 " failed, %" PRIu64 " faults in holes of the full tmpfs, %" PRIu64
		       " probes of the records (%" PRIu64 " pages)%s\n",
		       configs[i].name, configs[i].what, c.sequences, c.ops, c.reads, c.writes,
		       c.forked, c.segv, c.bus, c.rescues, c.calls, c.failed_calls, c.limited_calls,
		       c.huge_calls, c.remap_ok, c.remap_pieces, c.remap_failed, c.full_faults,
		       c.probes, c.probed, r ? "  FAILED" : "");
		total.sequences += c.sequences;
		total.ops += c.ops;
		total.reads += c.reads;
		total.writes += c.writes;
		total.segv += c.segv;
		total.bus += c.bus;
		total.rescues += c.rescues;
		total.calls += c.calls;
		failed |= r != 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	unmount_full_tmpfs();
	printf("model: %s: %" PRIu64 " sequences, %" PRIu64 " operations (%" PRIu64
	       " accesses, %" PRIu64 " deaths observed, %" PRIu64 " rescues), %.1f s, seed %" PRIu64 "\n",
	       failed ? "FAILED" : "passed", total.sequences, total.ops, total.reads + total.writes,
	       total.segv + total.bus, total.rescues,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, seed);
	return failed ? 1 : 0;
}
