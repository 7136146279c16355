/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what the benchmark driver (bench.c) and its measuring child
 * processes (children.c) agree on.
 *
 * The driver re-executes itself once per configuration and round with
 * "--child KIND" and the environment of that configuration (LD_PRELOAD,
 * NOSIGBUS_FILL, NOSIGBUS_ERRORS); the child prints "key value" lines on
 * its stdout, which is a pipe to the driver, and exits 0.  Every ratio the driver prints is
 * formed from figures of the same child and round (or, for the
 * interposition figures, of children run next to each other).
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>

/* Rows of the lookup-scaling measurement: other protected mappings live. */
#define BENCH_SCALE_STEPS 3

struct bench_params {
	size_t size;		/* bytes of each measured mapping */
	int round;		/* rotates the order of measurements */
	bool quick;		/* smoke-test sizes */
	size_t scale[BENCH_SCALE_STEPS];	/* other protected mappings live */
	size_t mem_records;	/* protected mappings for the memory figure */
	size_t ip_live;		/* protected mappings live, interposition */
	size_t ip_pairs;	/* call pairs per timed batch */
	int ip_batches;		/* timed batches per figure (the fastest counts) */
	size_t startup_n;	/* processes per configuration, start-up figure */
	size_t protect_vmas;	/* VMAs of the region nosigbus_protect() covers */
	size_t ops_pairs;	/* operations per timed batch, ops child */
	int ops_batches;	/* timed batches per figure (the fastest counts) */
	int ops_frames;		/* timed frames per figure (the fastest counts) */
	const char *library;	/* libnosigbus, for the start-up figure */
	const char *empty;	/* the empty library (empty.c) */
	const char *program;	/* the process that does nothing (true.c) */
};

/* Fills the sizes that follow from quick; size and round are left alone. */
void bench_params_init(struct bench_params *p, bool quick);

/* Runs one child measurement of the given kind; returns the exit status. */
int bench_child(const char *kind, const struct bench_params *p);

/* exact.c's children: exact, spawn, pass; -1 for another kind, else the
 * exit status. */
int bench_exact_child(const char *kind, const struct bench_params *p);

/* What report.c's driver needs to run them. */
struct bench_exact_args {
	const char *self;	/* this program */
	const struct bench_params *params;
	int rounds;
	bool ops_only;		/* the mapping-call rows and frames alone */
	const char *preload;	/* libnosigbus */
	const char *empty;	/* the empty library */
	const char *program;	/* the process that does nothing */
};

/* Runs exact.c's children and prints their rows; adds the targets met and
 * missed; returns 1 when a child failed, else 0. */
int bench_exact(const struct bench_exact_args *args, int *met, int *missed);

/* CLOCK_MONOTONIC in nanoseconds. */
double bench_now(void);

/* children.c: a file of len bytes on a disk file system (not tmpfs), or -1. */
int bench_disk_file(size_t len);

/* children.c, for every child: a message on stderr, exit 1. */
void bench_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* children.c: this process's CPU time in nanoseconds. */
double bench_cpu_ns(void);
/* children.c: the median of v (sorted in place); NaN for none. */
double bench_median(double *v, size_t n);

/* A child's figures, "key value" lines of its stdout. */
struct bench_kv {
	char key[48];
	double v;
};
/* bench.c: the lines of text (changed) into kv, at most max; how many. */
int bench_parse(char *text, struct bench_kv *kv, int max);

#endif /* BENCH_H */
