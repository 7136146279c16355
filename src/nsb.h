/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces of libnosigbus.  Nothing here is exported.
 *
 * Signal context: functions marked [signal-safe] may be called from the
 * SIGBUS handler; everything else may not.
 */
#ifndef NSB_H
#define NSB_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NSB_INTERNAL __attribute__((visibility("hidden")))
#define NSB_EXPORT __attribute__((visibility("default")))

/* ---- real.c: the next definitions of what we interpose ---------------- */

void nsb_real_init(void);
void *nsb_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off); /* [signal-safe] */
int nsb_sys_munmap(void *addr, size_t len);
void *nsb_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr);
int nsb_sys_mprotect(void *addr, size_t len, int prot);
int nsb_sys_pkey_mprotect(void *addr, size_t len, int prot, int pkey); /* [signal-safe] */
int nsb_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old); /* [signal-safe] */
int nsb_sys_sigmask(int how, const sigset_t *set, sigset_t *old); /* [signal-safe] */

extern int (*real_sigprocmask)(int, const sigset_t *, sigset_t *);
extern int (*real_sigpending)(sigset_t *);
extern int (*real_sigsuspend)(const sigset_t *);
extern int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
extern int (*real_execve)(const char *, char *const[], char *const[]);
extern int (*real_execvpe)(const char *, char *const[], char *const[]);
extern int (*real_fexecve)(int, char *const[], char *const[]);
extern int (*real_posix_spawn)(pid_t *, const char *, const void *, const void *,
			       char *const[], char *const[]);
extern int (*real_posix_spawnp)(pid_t *, const char *, const void *, const void *,
				char *const[], char *const[]);
extern sighandler_t (*real_signal)(int, sighandler_t);
extern sighandler_t (*real_sigset)(int, sighandler_t);
extern sighandler_t (*real_sysv_signal)(int, sighandler_t);
extern int (*real_siginterrupt)(int, int);
extern int (*real_sighold)(int);
extern int (*real_sigrelse)(int);
extern int (*real_sigignore)(int);
struct __jmp_buf_tag;
typedef void (*nsb_jump_fn)(struct __jmp_buf_tag *, int) __attribute__((noreturn));
extern nsb_jump_fn real_longjmp;
extern nsb_jump_fn real_siglongjmp;
extern nsb_jump_fn real__longjmp;
extern nsb_jump_fn real___longjmp_chk;

/* ---- config.c: NOSIGBUS_* read once ------------------------------------ */

enum nsb_policy { NSB_POLICY_FLAG, NSB_POLICY_SHM, NSB_POLICY_FILES };
enum nsb_fill { NSB_FILL_PAGE, NSB_FILL_RANGE, NSB_FILL_AUTO };
/* What a SIGBUS inside the file's size (an I/O error) gets. */
enum nsb_errors { NSB_ERRORS_PASS, NSB_ERRORS_ZERO };

/* The defaults, also used before the constructor has read the variables. */
#define NSB_DEFAULT_POLICY	NSB_POLICY_SHM
#define NSB_DEFAULT_FILL	NSB_FILL_PAGE
#define NSB_DEFAULT_ERRORS	NSB_ERRORS_PASS

struct nsb_config {
	enum nsb_policy policy;
	enum nsb_fill fill;
	enum nsb_errors errors;
	bool strict;
	bool log;
	size_t page_size;	/* sysconf(_SC_PAGESIZE), read outside signals */
};

/* Read by the constructor; read-only afterwards (defaults before it). */
extern struct nsb_config nsb_config;
void nsb_config_init(void);	/* the page size, for shims called early */
void nsb_config_read(void);	/* the NOSIGBUS_* variables, once */
/* Parses one variable's value; returns false for an invalid value. */
bool nsb_config_parse(const char *name, const char *value, int *out);

/* Everything the interposed calls need, whether or not our constructor
 * has run yet.  Cheap after the first call. */
static inline void
nsb_init(void)
{
	if (__builtin_expect(nsb_config.page_size == 0, 0))
		nsb_config_init();
}

/* ---- ranges.c: the table of protected mappings ------------------------- */

/* meta: protection, sharing, page size and pkey of a protected range. */
#define NSB_META_PROT		0x0007u		/* PROT_READ|PROT_WRITE|PROT_EXEC */
#define NSB_META_SHARED		0x0008u
#define NSB_META_SHIFT(m)	(((m) >> 8) & 0x3fu)	/* log2 of the page size */
#define NSB_META_MKSHIFT(s)	((uint32_t)(s) << 8)
#define NSB_META_PKEY(m)	((int)(((m) >> 16) & 0x1fu) - 1) /* -1: none */
#define NSB_META_MKPKEY(k)	((uint32_t)((k) + 1) << 16)
#define NSB_META_PKEY_MASK	0x1f0000u
#define NSB_META_ANON		0x0010u

struct nsb_range {
	uintptr_t start;
	uintptr_t end;
	uint32_t meta;
	uint32_t path;		/* offset in the path pool, 0: unknown */
};

/* Writers: every function below except the [signal-safe] ones must be
 * called between nsb_ranges_lock() and nsb_ranges_unlock(). */
void nsb_ranges_lock(void);
void nsb_ranges_unlock(void);

/* Records [start, end).  0, or -1 with errno ENOMEM (table full). */
int nsb_ranges_insert(uintptr_t start, uintptr_t end, uint32_t meta, uint32_t path);

/*
 * Removes [start, end) from every record, splitting as needed.  When
 * saved is not NULL, the removed pieces are kept there so that
 * nsb_ranges_restore() can put them back if the system call fails.
 * On return no rescue is using the removed pieces any more.
 */
struct nsb_saved {
	size_t n;
	size_t cap;
	struct nsb_range *r;
	struct nsb_range inline_r[8];
};
void nsb_saved_init(struct nsb_saved *s);
void nsb_saved_free(struct nsb_saved *s);
int nsb_saved_push(struct nsb_saved *s, const struct nsb_range *r);
int nsb_ranges_cut(uintptr_t start, uintptr_t end, struct nsb_saved *saved);
void nsb_ranges_restore(const struct nsb_saved *saved);

/* Sets the protection (and pkey, -1 to keep) of the recorded parts of [start, end). */
int nsb_ranges_set_prot(uintptr_t start, uintptr_t end, int prot, int pkey);

/* Copies the records overlapping [start, end) into saved (reader side). */
int nsb_ranges_collect(uintptr_t start, uintptr_t end, struct nsb_saved *saved);

/* Does any record overlap [start, end)?  Lock-free. */
bool nsb_ranges_overlap(uintptr_t start, uintptr_t end);
size_t nsb_ranges_count(void);	/* [signal-safe] */
unsigned long nsb_ranges_version(void);	/* [signal-safe] changes with every update */
size_t nsb_ranges_bytes(void);	/* memory the table holds */

/*
 * [signal-safe] Finds the record containing addr and keeps it alive (no
 * writer can finish removing it) until nsb_ranges_leave(ticket).
 * Returns false if there is none (then nothing is held).
 */
bool nsb_ranges_enter(uintptr_t addr, struct nsb_range *out, int *ticket);
void nsb_ranges_leave(int ticket);	/* [signal-safe] */

/* Path pool (only used when logging). */
uint32_t nsb_paths_intern(const char *path);
const char *nsb_paths_get(uint32_t off);	/* [signal-safe] */

/* Makes room for n more records now, so that the inserts after a system
 * call cannot fail.  Caller holds the lock. */
int nsb_ranges_reserve(size_t n);

/* Test hook: make the next table allocation fail. */
void nsb_ranges_fail_next_alloc(void);

/* ---- rescue.c: the SIGBUS handler -------------------------------------- */

void nsb_rescue_handler(int sig, siginfo_t *si, void *uc); /* [signal-safe] */

/* ---- dispositions.c: the program's SIGBUS disposition and mask --------- */

/* Installs the library's handler under the program's disposition (once). */
void nsb_disp_install(void);
bool nsb_disp_installed(void);
/* The program's view of SIGBUS; see dispositions.c. */
int nsb_disp_set(const struct sigaction *act, struct sigaction *old);
bool nsb_disp_blocked(void);		/* [signal-safe] this thread */
void nsb_disp_set_blocked(bool blocked);
void nsb_disp_deliver_held(void);
bool nsb_disp_held(void);
/* [signal-safe] Everything that is not rescued ends up here. */
void nsb_disp_chain(int sig, siginfo_t *si, void *uc);
/* The program jumps out of a signal handler (see dispositions.c). */
void nsb_disp_longjmp(bool mask_saved);
/* exec: make the kernel state what the program set, and back. */
void nsb_disp_before_exec(void);
void nsb_disp_after_exec(void);

/* ---- maps.c: /proc/self/maps (never in signal context) ----------------- */

struct nsb_vma {
	uintptr_t start;
	uintptr_t end;
	int prot;
	bool shared;
	bool anon;		/* no file behind it */
};
/* Calls fn for each VMA overlapping [lo, hi), in address order.
 * fn returns non-zero to stop.  Returns -1 with errno if the file
 * could not be read, else fn's last return value (0 when it never stopped). */
int nsb_maps_each(uintptr_t lo, uintptr_t hi,
		  int (*fn)(const struct nsb_vma *vma, void *arg), void *arg);
/* The kernel's page size for the VMA at addr (huge for hugetlbfs). */
size_t nsb_maps_page_size(uintptr_t addr);

/* ---- policy.c: which mappings are protected ---------------------------- */

/* Decides, at mmap() time, whether a mapping is protected and how.
 * Returns true and fills in meta and path when it is. */
bool nsb_policy_protect(int prot, int flags, int fd, uint32_t *meta, uint32_t *path);

/* ---- log.c: counters and messages -------------------------------------- */

struct nsb_counters {
	atomic_uint_least64_t rescues;
	atomic_uint_least64_t pages;
	atomic_uint_least64_t failures;
};
extern struct nsb_counters nsb_counters;

void nsb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* [signal-safe] */
void nsb_log_rescue(uintptr_t addr, const struct nsb_range *r, size_t pages);
void nsb_log_failure(uintptr_t addr, int err);	/* [signal-safe] */
void nsb_log_init(void);
/* Per-process counters: zeroes them in a fork child. */
void nsb_log_after_fork_child(void);

/* ---- mman.c: shared with api.c ----------------------------------------- */

int nsb_protect_range(uintptr_t start, uintptr_t end, uint32_t meta, uint32_t path);

#endif /* NSB_H */
