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
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbtest.h"

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define W		16	/* window pages */
#define NF		2	/* files */
#define FP		8	/* largest file size, in pages */
#define MAX_OPS		4096
#define MAX_SHRINK_RUNS	4000

/* ---- configurations ----------------------------------------------------- */

struct config {
	const char *name;
	const char *policy;	/* NULL: the library is not loaded */
	const char *fill;
	const char *strict;
	const char *what;
};

static const struct config configs[] = {
	{ "none", NULL, NULL, NULL, "no library: checks the model against the kernel" },
	{ "flag", "flag", "page", "0", "default policy, page fill" },
	{ "shm", "shm", "page", "0", "memfd/tmpfs mappings protected" },
	{ "files", "files", "page", "0", "every file mapping protected" },
	{ "range", "shm", "range", "0", "NOSIGBUS_FILL=range" },
	{ "strict", "files", "page", "1", "NOSIGBUS_STRICT=1 with policy files" },
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

/* ---- operations --------------------------------------------------------- */

enum op_type {
	OP_READ, OP_WRITE, OP_MMAP, OP_MUNMAP, OP_MPROTECT, OP_MREMAP,
	OP_TRUNCATE, OP_PWRITE, OP_PROTECT, OP_UNPROTECT,
};
enum { MM_FIXED, MM_NOREPLACE, MM_HINT };		/* op.mode for OP_MMAP */
/* op.mode for OP_MREMAP; MR_DUP is old_len 0 (a second mapping of the
 * same shared pages), MR_DONTUNMAP moves and leaves the old range mapped. */
enum { MR_SHRINK, MR_GROW, MR_MOVE, MR_DONTUNMAP, MR_DUP };

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
};

/* ---- the model ---------------------------------------------------------- */

enum { K_NONE, K_ANON, K_FILE };
enum backing { B_MEMFD, B_TMPFS, B_DISK };

struct mpage {
	uint8_t kind;
	uint8_t prot;		/* 0, PROT_READ or PROT_READ|PROT_WRITE */
	uint8_t shared;		/* K_FILE only */
	uint8_t prot_d;		/* protected by the library */
	uint8_t file;
	uint8_t cow;		/* private file page written: holds val */
	uint8_t val;		/* K_ANON contents, or the private copy */
	uint8_t rescued;	/* K_ANON made by a rescue */
	int pgoff;
};

struct mfile {
	int size;		/* pages */
	uint8_t val[FP];
	uint8_t backing;
};

struct model {
	struct mpage pg[W];
	struct mfile f[NF];
	uint64_t rescues;
};

/* What the kernel shows, page by page (from /proc/self/maps). */
struct kpage {
	bool mapped;
	bool r, w, s;
	unsigned long ino;
	uint64_t off;		/* file offset of this page */
	int vma;		/* index of its VMA */
	int vstart, vend;	/* the VMA, in window pages (may exceed the window) */
};

/* ---- shared between the worker and the sequence child ------------------ */

enum fail_class { F_NONE, F_ACCESS, F_RESULT, F_MAPS, F_FILE, F_STATS, F_DIED, F_SETUP };
static const char *const fail_names[] = {
	"none", "access outcome", "call result", "VMA layout", "file contents",
	"counters", "sequence process died", "setup",
};

struct counts {
	uint64_t sequences, ops, skipped, reads, writes, segv, bus, rescues, calls;
	uint64_t forked;	/* accesses that survive, run in a forked child */
	uint64_t remap_ok, remap_pieces, remap_failed;
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
static int ops_per_seq = 40;
static struct shared *sh;
static int (*p_get_stats)(struct nosigbus_stats *, size_t);
static int (*p_protect)(void *, size_t);
static int (*p_unprotect)(void *, size_t);

/* ---- the sequence child's state ----------------------------------------- */

struct seq {
	uint64_t rng;
	struct model m;
	struct kpage k[W];
	unsigned char *base;
	int fd[NF];
	unsigned long ino[NF];
	struct nosigbus_stats base_stats;
	bool no_regrow;		/* fill=range: files only shrink */
	bool policy_shm, policy_files, strict;
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
	return b == B_MEMFD ? "memfd" : b == B_TMPFS ? "tmpfs" : "disk";
}

static void
op_str(const struct op *op, char *buf, size_t len)
{
	static const char *const mm_mode[] = { "|MAP_FIXED", "|MAP_FIXED_NOREPLACE", "" };
	char what[64];

	switch (op->type) {
	case OP_READ:
		snprintf(buf, len, "read page %d%s", op->a, op->alt ? " in a forked child" : "");
		break;
	case OP_WRITE:
		snprintf(buf, len, "write page %d = 0x%02x%s", op->a, op->val,
			 op->alt ? " in a forked child" : "");
		break;
	case OP_MMAP:
		if (op->file < 0)
			snprintf(what, sizeof(what), "-1 (anonymous)");
		else
			snprintf(what, sizeof(what), "file%d, offset %d pages", op->file, op->off);
		snprintf(buf, len, "%s(page %d, %d pages, %s, %s%s%s%s, %s)",
			 op->alt ? "mmap64" : "mmap", op->a, op->n, prot_str(op->prot),
			 op->shared ? "MAP_SHARED" : "MAP_PRIVATE",
			 op->file < 0 ? "|MAP_ANONYMOUS" : "", mm_mode[op->mode],
			 op->flag ? "|MAP_NOSIGBUS" : "", what);
		break;
	case OP_MUNMAP:
		snprintf(buf, len, "munmap(page %d, %d pages)", op->a, op->n);
		break;
	case OP_MPROTECT:
		snprintf(buf, len, "%s(page %d, %d pages, %s%s)",
			 op->alt ? "pkey_mprotect" : "mprotect", op->a, op->n,
			 prot_str(op->prot), op->alt ? ", -1" : "");
		break;
	case OP_MREMAP:
		if (op->mode == MR_MOVE || op->mode == MR_DUP || op->mode == MR_DONTUNMAP)
			snprintf(buf, len, "mremap(page %d, %d pages, %d pages, MREMAP_MAYMOVE|MREMAP_FIXED%s, page %d)",
				 op->a, op->o, op->n, op->mode == MR_DONTUNMAP ? "|MREMAP_DONTUNMAP" : "", op->t);
		else
			snprintf(buf, len, "mremap(page %d, %d pages, %d pages, 0)", op->a, op->o, op->n);
		break;
	case OP_TRUNCATE:
		snprintf(buf, len, "ftruncate(file%d, %d pages)", op->file, op->n);
		break;
	case OP_PWRITE:
		snprintf(buf, len, "pwrite(file%d, page %d, 0x%02x)", op->file, op->a, op->val);
		break;
	case OP_PROTECT:
		snprintf(buf, len, "nosigbus_protect(page %d, %d pages)", op->a, op->n);
		break;
	case OP_UNPROTECT:
		snprintf(buf, len, "nosigbus_unprotect(page %d, %d pages)", op->a, op->n);
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

/* The lines of /proc/self/maps that touch the window, for messages. */
static void
window_maps(const struct seq *s, char *out, size_t len)
{
	uintptr_t lo = (uintptr_t)s->base, hi = lo + W * ps;
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
		line = nl ? nl + 1 : NULL;
	}
}

static void
read_kernel(struct seq *s)
{
	uintptr_t lo = (uintptr_t)s->base, hi = lo + W * ps;
	char *line = maps_buf;
	int nv = 0;

	memset(s->k, 0, sizeof(s->k));
	read_maps();
	while (line && *line) {
		char *nl = strchr(line, '\n');
		unsigned long a, b, off, ino;
		char perms[8];

		if (nl)
			*nl = '\0';
		if (sscanf(line, "%lx-%lx %7s %lx %*s %lu", &a, &b, perms, &off, &ino) == 5 &&
		    b > lo && a < hi) {
			for (uintptr_t x = a < lo ? lo : a; x < b && x < hi; x += ps) {
				struct kpage *k = &s->k[(x - lo) / ps];

				k->mapped = true;
				k->r = perms[0] == 'r';
				k->w = perms[1] == 'w';
				k->s = perms[3] == 's';
				k->ino = ino;
				k->off = off + (x - a);
				k->vma = nv;
				k->vstart = (int)(((long)a - (long)lo) / (long)ps);
				k->vend = (int)(((long)b - (long)lo) / (long)ps);
			}
			nv++;
		}
		line = nl ? nl + 1 : NULL;
	}
}

/* ---- checks after every operation --------------------------------------- */

static bool
page_matches(const struct seq *s, int i, bool as_anon)
{
	const struct mpage *p = &s->m.pg[i];
	const struct kpage *k = &s->k[i];

	if (p->kind == K_NONE)
		return !k->mapped;
	if (!k->mapped || k->r != !!(p->prot & PROT_READ) || k->w != !!(p->prot & PROT_WRITE))
		return false;
	if (p->kind == K_ANON || as_anon)
		return k->ino == 0 && !k->s;
	return k->ino == s->ino[p->file] && k->s == !!p->shared &&
	       k->off == (uint64_t)p->pgoff * ps;
}

static void
check_layout(struct seq *s)
{
	read_kernel(s);
	for (int i = 0; i < W; i++) {
		const struct mpage *p = &s->m.pg[i];
		/* fill=range replaces the rest of a record early: a page that
		 * would be rescued on its next access may be a zero page now. */
		bool maybe_filled = s->no_regrow && p->kind == K_FILE && p->prot_d &&
				    p->pgoff >= s->m.f[p->file].size;
		char mine[160], theirs[4096];

		if (page_matches(s, i, false) || (maybe_filled && page_matches(s, i, true)))
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
	struct nosigbus_stats st;
	uint64_t rescues, pages;

	if (!p_get_stats)
		return;
	if (p_get_stats(&st, sizeof(st)) < 0)
		fail(s, F_STATS, "nosigbus_get_stats: %s", strerror(errno));
	rescues = st.rescues - s->base_stats.rescues;
	pages = st.pages - s->base_stats.pages;
	if (st.failures != s->base_stats.failures)
		fail(s, F_STATS, "nosigbus_get_stats: %" PRIu64 " failures", st.failures);
	if (s->no_regrow) {
		if (rescues > s->m.rescues || pages < rescues)
			fail(s, F_STATS, "fill=range: %" PRIu64 " rescues, %" PRIu64
			     " pages; the model saw %" PRIu64 " faults to rescue",
			     rescues, pages, s->m.rescues);
	} else if (rescues != s->m.rescues || pages != s->m.rescues) {
		fail(s, F_STATS, "nosigbus_get_stats: %" PRIu64 " rescues, %" PRIu64
		     " pages; the model says %" PRIu64 " of each", rescues, pages, s->m.rescues);
	}
}

/* ---- model transitions -------------------------------------------------- */

enum { A_OK, A_SEGV, A_BUS };

static bool
policy_covers(const struct seq *s, int file)
{
	int b = s->m.f[file].backing;

	return s->policy_files || (s->policy_shm && (b == B_MEMFD || b == B_TMPFS));
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
	p->kind = K_ANON;
	p->shared = 0;
	p->cow = 0;
	p->rescued = 1;
	p->val = write ? val : 0;
	*out = p->val;
	s->m.rescues++;
	snprintf(why, wlen, "0x%02x (rescue: file%d page %d is past its end at %d)",
		 *out, p->file, p->pgoff, f->size);
	return A_OK;
}

static void
model_truncate(struct seq *s, int file, int size)
{
	struct mfile *f = &s->m.f[file];

	for (int p = size; p < FP; p++)
		f->val[p] = 0;
	/* Truncation drops the private copies past the end too (the kernel
	 * unmaps them: unmap_mapping_range(..., even_cows=1)). */
	for (int i = 0; i < W; i++) {
		struct mpage *p = &s->m.pg[i];

		if (p->kind == K_FILE && p->file == file && p->pgoff >= size)
			p->cow = 0;
	}
	f->size = size;
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

/* Waits for an access child; returns its status. */
static int
wait_child(struct seq *s, pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			fail(s, F_SETUP, "waitpid: %s", strerror(errno));
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
	 * stays there, but what it writes to a shared file page does not. */
	if (r == A_OK) {
		struct mfile files[NF];

		memcpy(files, s->m.f, sizeof(files));
		s->m = saved;
		memcpy(s->m.f, files, sizeof(files));
	} else {
		s->m = saved;
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

static bool
range_free(const struct seq *s, int a, int n)
{
	for (int i = a; i < a + n; i++)
		if (s->m.pg[i].kind != K_NONE)
			return false;
	return true;
}

static void
run_mmap(struct seq *s, const struct op *op)
{
	int flags = (op->shared ? MAP_SHARED : MAP_PRIVATE) |
		    (op->file < 0 ? MAP_ANONYMOUS : 0) | (op->flag ? MAP_NOSIGBUS : 0);
	int fd = op->file < 0 ? -1 : s->fd[op->file];
	unsigned char *want = page_addr(s, op->a);
	bool ok = true, prot_d;
	int err = 0;
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
			ok = false;
			err = EINVAL;
		}
		prot_d = false;		/* policies follow the v2 patch too */
	}
	if (ok && op->mode == MM_NOREPLACE && !range_free(s, op->a, op->n)) {
		ok = false;
		err = EEXIST;
	}
	errno = 0;
	if (op->alt)
		p = mmap64(want, (size_t)op->n * ps, op->prot, flags, fd, (off64_t)op->off * (off64_t)ps);
	else
		p = mmap(want, (size_t)op->n * ps, op->prot, flags, fd, (off_t)op->off * (off_t)ps);
	if (p != MAP_FAILED && p != want) {
		char b[256], m[4096];

		op_str(op, b, sizeof(b));
		window_maps(s, m, sizeof(m));
		munmap(p, (size_t)op->n * ps);
		fail(s, F_RESULT, "%s returned %p, not page %d (%p); the window:%s",
		     b, p, op->a, (void *)want, m);
	}
	expect_result(s, ok, err, p == MAP_FAILED ? -1 : 0, errno);
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
run_mprotect(struct seq *s, const struct op *op)
{
	int j, ret;
	bool ok;

	/* The kernel changes every VMA up to the first hole, then fails. */
	for (j = 0; j < op->n && s->m.pg[op->a + j].kind != K_NONE; j++)
		;
	ok = j == op->n;
	errno = 0;
	if (op->alt) {
		ret = pkey_mprotect(page_addr(s, op->a), (size_t)op->n * ps, op->prot, -1);
		if (ret < 0 && errno == ENOSYS)
			return;
	} else {
		ret = mprotect(page_addr(s, op->a), (size_t)op->n * ps, op->prot);
	}
	expect_result(s, ok, ENOMEM, ret, errno);
	for (int i = 0; i < j; i++)
		s->m.pg[op->a + i].prot = op->prot;
}

/*
 * How an mremap must end.  The kernel moves one VMA; the library moves a
 * protected mapping that rescues split into several VMAs piece by piece
 * (as one mapping, like the kernel patch would).  Anything else may go
 * either way: newer kernels move several VMAs at once.
 */
enum { MUST_FAIL, MUST_SUCCEED, EITHER };

static bool
single_vma(const struct seq *s, int a, int o)
{
	for (int i = a; i < a + o; i++)
		if (!s->k[i].mapped || s->k[i].vma != s->k[a].vma)
			return false;
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

static void
model_mremap(struct seq *s, const struct op *op)
{
	struct mpage src[W], last;
	int keep = op->n < op->o ? op->n : op->o;
	bool moves = op->mode == MR_MOVE || op->mode == MR_DONTUNMAP || op->mode == MR_DUP;
	int dest = moves ? op->t : op->a;

	if (op->mode == MR_DUP) {
		/* A second mapping of the same shared pages, protected if the
		 * first page was. */
		last = s->m.pg[op->a];
		for (int j = 0; j < op->n; j++) {
			struct mpage *p = &s->m.pg[dest + j];

			*p = last;
			p->pgoff = last.pgoff + j;
		}
		return;
	}
	memcpy(src, &s->m.pg[op->a], sizeof(src[0]) * (size_t)op->o);
	last = src[op->o - 1];
	for (int j = 0; j < op->o; j++) {
		struct mpage *p = &s->m.pg[op->a + j];

		if (op->mode != MR_DONTUNMAP) {
			p->kind = K_NONE;
			continue;
		}
		/* Still mapped, its pages gone: anonymous memory reads zeros,
		 * a file mapping shows the file again.  Still protected. */
		p->val = 0;
		p->cow = 0;
	}
	for (int j = 0; j < op->n; j++) {
		struct mpage *p = &s->m.pg[dest + j];

		if (j < keep) {
			*p = src[j];
			continue;
		}
		/* The grown part extends the last VMA. */
		*p = last;
		p->cow = 0;
		p->val = 0;
		p->rescued = 0;
		if (last.kind == K_FILE)
			p->pgoff = last.pgoff + (j - op->o + 1);
	}
}

static void
run_mremap(struct seq *s, const struct op *op)
{
	bool moves = op->mode == MR_MOVE || op->mode == MR_DONTUNMAP || op->mode == MR_DUP;
	int flags = moves ? MREMAP_MAYMOVE | MREMAP_FIXED : 0;
	unsigned char *dest = page_addr(s, moves ? op->t : op->a);
	int how, err = 0;
	void *p;

	if (op->mode == MR_DONTUNMAP)
		flags |= MREMAP_DONTUNMAP;
	if (op->mode == MR_DUP) {
		/* Only a shared mapping can be duplicated. */
		const struct mpage *pg = &s->m.pg[op->a];

		how = pg->kind == K_FILE && pg->shared ? MUST_SUCCEED : MUST_FAIL;
		err = pg->kind == K_NONE ? EFAULT : EINVAL;
		/* fill=range may have made it a private zero page already. */
		if (how == MUST_SUCCEED && s->no_regrow && pg->prot_d &&
		    pg->pgoff >= s->m.f[pg->file].size)
			how = EITHER;
	} else if (op->mode == MR_DONTUNMAP && !single_vma(s, op->a, op->o)) {
		/* The library moves pieces only when the old range goes away. */
		how = EITHER;
	} else if (single_vma(s, op->a, op->o)) {
		how = MUST_SUCCEED;
		if (op->mode == MR_GROW &&
		    (s->k[op->a].vend != op->a + op->o || op->a + op->n > W ||
		     !range_free(s, op->a + op->o, op->n - op->o))) {
			how = MUST_FAIL;
			err = ENOMEM;
		}
	} else if (model_lib && no_holes(s, op->a, op->o) && s->m.pg[op->a].prot_d &&
		   s->m.pg[op->a + op->o - 1].prot_d) {
		how = MUST_SUCCEED;
		if (op->mode == MR_GROW &&
		    (op->a + op->n > W || !range_free(s, op->a + op->o, op->n - op->o))) {
			how = MUST_FAIL;
			err = ENOMEM;
		}
	} else {
		how = EITHER;
	}
	if (moves && op->mode != MR_DUP && op->a < op->t + op->n && op->t < op->a + op->o) {
		how = MUST_FAIL;
		err = EINVAL;
	}
	errno = 0;
	p = mremap(page_addr(s, op->a), (size_t)op->o * ps, (size_t)op->n * ps, flags, dest);
	/* MREMAP_DONTUNMAP takes file mappings from Linux 5.13 on. */
	if (op->mode == MR_DONTUNMAP && p == MAP_FAILED && errno == EINVAL && old_kernel)
		how = EITHER;
	if (p != MAP_FAILED && p != dest)
		fail(s, F_RESULT, "mremap returned %p, not %p", p, (void *)dest);
	if (how == EITHER) {
		sh->c.calls++;
		if (p != MAP_FAILED) {
			sh->c.remap_ok++;
			model_mremap(s, op);
			return;
		}
		sh->c.remap_failed++;
		/* Older kernels unmap the destination before they find out
		 * that the source is not one VMA. */
		read_kernel(s);
		for (int j = 0; moves && j < op->n; j++)
			if (!s->k[op->t + j].mapped)
				s->m.pg[op->t + j].kind = K_NONE;
		return;
	}
	expect_result(s, how == MUST_SUCCEED, err, p == MAP_FAILED ? -1 : 0, errno);
	if (how == MUST_SUCCEED) {
		if (op->mode == MR_DUP || single_vma(s, op->a, op->o))
			sh->c.remap_ok++;
		else
			sh->c.remap_pieces++;
		model_mremap(s, op);
	} else {
		sh->c.remap_failed++;
	}
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
		ret = p_unprotect(page_addr(s, op->a), (size_t)op->n * ps);
		expect_result(s, true, 0, ret, errno);
		for (int i = op->a; i < op->a + op->n; i++)
			s->m.pg[i].prot_d = 0;
		return;
	}
	ret = p_protect(page_addr(s, op->a), (size_t)op->n * ps);
	err = !mapped ? ENOMEM : shared && s->strict ? EINVAL : 0;
	if (!mapped && shared && s->strict && ret < 0 && errno == EINVAL)
		err = EINVAL;
	expect_result(s, err == 0, err, ret, errno);
	if (err)
		return;
	for (int i = op->a; i < op->a + op->n; i++)
		s->m.pg[i].prot_d = 1;
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
		return;
	}
	memset(buf, op->val, ps);
	ret = pwrite(s->fd[op->file], buf, ps, (off_t)((size_t)op->a * ps)) == (ssize_t)ps ? 0 : -1;
	expect_result(s, true, 0, ret, errno);
	f->val[op->a] = op->val;
	if (op->a >= f->size)
		f->size = op->a + 1;
}

/* Can op run in this state?  Replays skip the ones that cannot. */
static bool
op_valid(const struct seq *s, const struct op *op)
{
	switch (op->type) {
	case OP_MMAP:
		return op->mode != MM_HINT || range_free(s, op->a, op->n);
	case OP_MREMAP:
		return op->mode == MR_DUP || no_holes(s, op->a, op->o);
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
	case OP_PWRITE:
		return !s->no_regrow || op->a < s->m.f[op->file].size;
	default:
		return true;
	}
}

static void
run_op(struct seq *s, const struct op *op)
{
	switch (op->type) {
	case OP_READ:
	case OP_WRITE:
		run_access(s, op);
		break;
	case OP_MMAP:
		run_mmap(s, op);
		break;
	case OP_MUNMAP:
		errno = 0;
		expect_result(s, true, 0, munmap(page_addr(s, op->a), (size_t)op->n * ps), errno);
		for (int i = op->a; i < op->a + op->n; i++)
			s->m.pg[i].kind = K_NONE;
		break;
	case OP_MPROTECT:
		run_mprotect(s, op);
		break;
	case OP_MREMAP:
		run_mremap(s, op);
		break;
	case OP_TRUNCATE:
	case OP_PWRITE:
		run_file_op(s, op);
		break;
	case OP_PROTECT:
	case OP_UNPROTECT:
		run_protect(s, op);
		break;
	}
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

static int
pick_len(struct seq *s, int a, int max)
{
	int room = W - a;

	return 1 + rnd(s, room < max ? room : max);
}

/* A destination that does not overlap the source; false if none found. */
static bool
pick_target(struct seq *s, struct op *op)
{
	int o = op->o ? op->o : 1;

	for (int tries = 0; tries < 8; tries++) {
		op->t = (int16_t)rnd(s, W - op->n + 1);
		if (!(op->a < op->t + op->n && op->t < op->a + o))
			return true;
	}
	return false;
}

static bool
gen_mremap(struct seq *s, struct op *op)
{
	int cand[W], n = 0, i, lo, hi;

	for (i = 0; i < W; i++)
		if (s->m.pg[i].kind != K_NONE)
			cand[n++] = i;
	if (!n)
		return false;
	i = cand[rnd(s, n)];
	/* Mostly within one VMA; sometimes a mapping that rescues split. */
	lo = s->k[i].vstart > 0 ? s->k[i].vstart : 0;
	hi = s->k[i].vend < W ? s->k[i].vend : W;
	if (rnd(s, 100) < 40) {
		while (lo > 0 && s->m.pg[lo - 1].kind != K_NONE)
			lo--;
		while (hi < W && s->m.pg[hi].kind != K_NONE)
			hi++;
	}
	op->type = OP_MREMAP;
	op->a = (int16_t)(lo + rnd(s, i - lo + 1));
	op->o = (int16_t)(1 + rnd(s, hi - op->a < 5 ? hi - op->a : 5));
	switch (rnd(s, 100) < 12 ? 3 + rnd(s, 2) : rnd(s, op->o > 1 ? 3 : 2)) {
	case 3:
		op->mode = MR_DONTUNMAP;
		op->n = op->o;
		if (!pick_target(s, op))
			op->mode = MR_SHRINK, op->n = op->o;
		break;
	case 4:
		/* old_len 0: mostly from a shared file page, which works. */
		op->mode = MR_DUP;
		op->o = 0;
		op->n = (int16_t)(1 + rnd(s, 3));
		if (!pick_target(s, op))
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
		if (!pick_target(s, op) && rnd(s, 100) < 5)
			break;	/* an overlapping target now and then: EINVAL */
		break;
	default:
		op->mode = MR_SHRINK;
		op->n = (int16_t)(1 + rnd(s, op->o - 1));
	}
	return true;
}

static void
gen_op(struct seq *s, struct op *op)
{
	int r = rnd(s, 100);

	memset(op, 0, sizeof(*op));
	op->val = rnd_val(s);
	if (r >= 86 && r < 90 && !p_protect)
		r = 0;
	if (r < 42) {
		op->type = rnd(s, 100) < 55 ? OP_READ : OP_WRITE;
		op->a = (int16_t)pick_page(s);
		op->alt = (uint8_t)(rnd(s, 100) < 12);
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
	} else if (r < 70) {
		op->type = OP_MPROTECT;
		op->a = (int16_t)pick_page(s);
		op->n = (int16_t)pick_len(s, op->a, 5);
		op->prot = (uint8_t)pick_prot(s);
		op->alt = (uint8_t)(rnd(s, 100) < 15);
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
		op->n = (int16_t)pick_len(s, op->a, 4);
		if (s->no_regrow && op->type == OP_PROTECT) {
			/* One file mapping at most: see op_valid(). */
			int n = 1;

			while (n < op->n && op_valid(s, &(struct op){ .type = OP_PROTECT,
					.a = op->a, .n = (int16_t)(n + 1) }))
				n++;
			op->n = (int16_t)n;
		}
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

static void
setup(struct seq *s)
{
	unsigned char buf[65536];
	size_t used = 0;

	s->no_regrow = cfg->fill && strcmp(cfg->fill, "range") == 0;
	s->policy_shm = cfg->policy && strcmp(cfg->policy, "shm") == 0;
	s->policy_files = cfg->policy && strcmp(cfg->policy, "files") == 0;
	s->strict = cfg->strict && strcmp(cfg->strict, "1") == 0;
	for (int f = 0; f < NF; f++) {
		struct mfile *mf = &s->m.f[f];
		int r = rnd(s, 100);
		struct stat st;

		mf->backing = (uint8_t)(r < 50 ? B_MEMFD : r < 80 ? B_TMPFS : B_DISK);
		s->fd[f] = nsbt_file(mf->backing == B_MEMFD ? NSBT_MEMFD :
				     mf->backing == B_TMPFS ? NSBT_TMPFS : NSBT_DISK, 0);
		mf->size = rnd(s, 100) < 70 ? FP / 2 + rnd(s, FP / 2 + 1) : rnd(s, FP + 1);
		for (int p = 0; p < mf->size; p++) {
			mf->val[p] = rnd_val(s);
			memset(buf, mf->val[p], ps);
			if (pwrite(s->fd[f], buf, ps, (off_t)((size_t)p * ps)) != (ssize_t)ps)
				fail(s, F_SETUP, "pwrite: %s", strerror(errno));
		}
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
	s->base = reserve_window();
	if (!s->base)
		fail(s, F_SETUP, "cannot reserve the window: %s", strerror(errno));
	for (int i = 0; i < W; i++)
		s->m.pg[i].kind = K_ANON;	/* PROT_NONE, unprotected */
	if (p_get_stats && p_get_stats(&s->base_stats, sizeof(s->base_stats)) < 0)
		fail(s, F_SETUP, "nosigbus_get_stats: %s", strerror(errno));
}

static void __attribute__((noreturn))
run_sequence(void)
{
	struct seq s;
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
		run_op(&s, op);
		sh->c.ops++;
		check_layout(&s);
		check_files(&s);
		check_stats(&s);
	}
	/* Everything unmapped: no record may outlive its mapping. */
	sh->cur = n;
	if (munmap(s.base, W * ps) < 0)
		fail(&s, F_SETUP, "munmap(window): %s", strerror(errno));
	if (p_get_stats) {
		struct nosigbus_stats st;

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
	int status;
	pid_t pid;

	sh->fail_class = F_NONE;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0)
		run_sequence();
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			nsbt_fail("waitpid: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return F_NONE;
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

	memcpy(best, sh->ops, sizeof(best[0]) * (size_t)len);
	*runs = 0;
	while (changed && *runs < MAX_SHRINK_RUNS) {
		changed = false;
		for (int i = len - 1; i >= 0 && *runs < MAX_SHRINK_RUNS; i--) {
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
		p_get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
		p_protect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_protect");
		p_unprotect = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_unprotect");
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
	static char ld[8192], pol[64], fill[64], strict[64];
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
	if (c->policy) {
		snprintf(pol, sizeof(pol), "NOSIGBUS_POLICY=%s", c->policy);
		snprintf(fill, sizeof(fill), "NOSIGBUS_FILL=%s", c->fill);
		snprintf(strict, sizeof(strict), "NOSIGBUS_STRICT=%s", c->strict);
		env[n++] = pol;
		env[n++] = fill;
		env[n++] = strict;
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
	int report_fd = -1, nconf = 0, failed = 0;
	struct timespec t0, t1;

	ps = nsbt_page();
	setvbuf(stdout, NULL, _IOLBF, 0);
	seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ ((uint64_t)clock() << 40);
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
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0, done = 0; i < NCONFIGS; i++) {
		uint64_t share;
		struct counts c;
		int r;

		if (only && strcmp(configs[i].name, only) != 0)
			continue;
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
		printf("model: config %-6s (%s): %" PRIu64 " sequences, %" PRIu64 " operations: "
		       "%" PRIu64 " reads, %" PRIu64 " writes (%" PRIu64 " in forked children), "
		       "%" PRIu64 " SIGSEGV and %" PRIu64 " SIGBUS deaths, %" PRIu64 " rescues, "
		       "%" PRIu64 " calls, mremap %" PRIu64 " moved/%" PRIu64 " moved in pieces/%"
		       PRIu64 " failed%s\n",
		       configs[i].name, configs[i].what, c.sequences, c.ops, c.reads, c.writes,
		       c.forked, c.segv, c.bus, c.rescues, c.calls, c.remap_ok, c.remap_pieces,
		       c.remap_failed, r ? "  FAILED" : "");
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
	printf("model: %s: %" PRIu64 " sequences, %" PRIu64 " operations (%" PRIu64
	       " accesses, %" PRIu64 " deaths observed, %" PRIu64 " rescues), %.1f s, seed %" PRIu64 "\n",
	       failed ? "FAILED" : "passed", total.sequences, total.ops, total.reads + total.writes,
	       total.segv + total.bus, total.rescues,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, seed);
	return failed ? 1 : 0;
}
