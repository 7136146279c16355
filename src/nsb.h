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

/*
 * Every function is looked up with dlsym(RTLD_NEXT) on its first use, not
 * at start-up: loading the library must cost what loading an empty one
 * costs (SPEC §9).  A missing mandatory function, or a lookup that finds
 * the library itself, aborts with one line on stderr, at that first use.
 *
 * The mapping calls (nsb_sys_mmap ... nsb_sys_pkey_mprotect) go straight
 * to the kernel with syscall() when the real function is not known yet
 * and cannot be looked up now: before our constructor has run, or
 * re-entered from inside dlsym (which may allocate, and so map memory).
 *
 * Signal context: nsb_sys_sigaction() looks up, before it returns, every
 * function marked [signal-safe] below.  The library's handler is installed
 * through it, so the handler never runs a lookup (dlsym is not
 * async-signal-safe).
 */
void nsb_real_start(void);	/* our constructor has run: lookups are safe */
void *nsb_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off); /* [signal-safe] */
int nsb_sys_munmap(void *addr, size_t len); /* [signal-safe] */
void *nsb_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr); /* [signal-safe] */
int nsb_sys_mprotect(void *addr, size_t len, int prot); /* [signal-safe] */
int nsb_sys_pkey_mprotect(void *addr, size_t len, int prot, int pkey); /* [signal-safe] */
int nsb_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old); /* [signal-safe] */
int nsb_sys_sigmask(int how, const sigset_t *set, sigset_t *old); /* [signal-safe] */

/* The other real functions, by name: real_execve(path, argv, envp) calls
 * the next execve, looking it up the first time.  Optional ones
 * (real___longjmp_chk) are NULL when the C library lacks them. */
enum nsb_real_fn {
	NSB_REAL_MMAP,
	NSB_REAL_MUNMAP,
	NSB_REAL_MREMAP,
	NSB_REAL_MPROTECT,
	NSB_REAL_PKEY_MPROTECT,
	NSB_REAL_SIGACTION,
	NSB_REAL_PTHREAD_SIGMASK,
	NSB_REAL_SIGPROCMASK,
	NSB_REAL_SIGPENDING,
	NSB_REAL_SIGSUSPEND,
	NSB_REAL_PTHREAD_CREATE,
	NSB_REAL_EXECVE,
	NSB_REAL_EXECVPE,
	NSB_REAL_FEXECVE,
	NSB_REAL_POSIX_SPAWN,
	NSB_REAL_POSIX_SPAWNP,
	NSB_REAL_SIGNAL,
	NSB_REAL_SIGSET,
	NSB_REAL_SYSV_SIGNAL,
	NSB_REAL_SIGINTERRUPT,
	NSB_REAL_SIGHOLD,
	NSB_REAL_SIGRELSE,
	NSB_REAL_SIGIGNORE,
	NSB_REAL_LONGJMP,
	NSB_REAL_SIGLONGJMP,
	NSB_REAL__LONGJMP,
	NSB_REAL___LONGJMP_CHK,
	NSB_REAL_COUNT
};

/* Any function pointer; cast to the real type at the call. */
typedef void (*nsb_any_fn)(void);
extern _Atomic nsb_any_fn nsb_real_fns[NSB_REAL_COUNT];
nsb_any_fn nsb_real_find(enum nsb_real_fn fn);

/* Not in signal context (it may call dlsym), except for the functions the
 * first nsb_sys_sigaction() has looked up. */
static inline nsb_any_fn
nsb_real(enum nsb_real_fn fn)
{
	nsb_any_fn f = atomic_load_explicit(&nsb_real_fns[fn], memory_order_acquire);

	if (__builtin_expect(f != NULL, 1))
		return f;
	return nsb_real_find(fn);
}

/* Nothing to do any more: kept so that its callers need not change. */
static inline void
nsb_real_init(void)
{
}

struct __jmp_buf_tag;
typedef void (*nsb_jump_fn)(struct __jmp_buf_tag *, int) __attribute__((noreturn));

#define real_sigprocmask \
	((int (*)(int, const sigset_t *, sigset_t *))nsb_real(NSB_REAL_SIGPROCMASK))
#define real_sigpending ((int (*)(sigset_t *))nsb_real(NSB_REAL_SIGPENDING))
#define real_sigsuspend ((int (*)(const sigset_t *))nsb_real(NSB_REAL_SIGSUSPEND))
#define real_pthread_create \
	((int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)) \
	 nsb_real(NSB_REAL_PTHREAD_CREATE))
#define real_execve \
	((int (*)(const char *, char *const[], char *const[]))nsb_real(NSB_REAL_EXECVE))
#define real_execvpe \
	((int (*)(const char *, char *const[], char *const[]))nsb_real(NSB_REAL_EXECVPE))
#define real_fexecve ((int (*)(int, char *const[], char *const[]))nsb_real(NSB_REAL_FEXECVE))
#define real_posix_spawn \
	((int (*)(pid_t *, const char *, const void *, const void *, char *const[], \
		  char *const[]))nsb_real(NSB_REAL_POSIX_SPAWN))
#define real_posix_spawnp \
	((int (*)(pid_t *, const char *, const void *, const void *, char *const[], \
		  char *const[]))nsb_real(NSB_REAL_POSIX_SPAWNP))
#define real_signal ((sighandler_t (*)(int, sighandler_t))nsb_real(NSB_REAL_SIGNAL))
#define real_sigset ((sighandler_t (*)(int, sighandler_t))nsb_real(NSB_REAL_SIGSET))
#define real_sysv_signal ((sighandler_t (*)(int, sighandler_t))nsb_real(NSB_REAL_SYSV_SIGNAL))
#define real_siginterrupt ((int (*)(int, int))nsb_real(NSB_REAL_SIGINTERRUPT))
#define real_sighold ((int (*)(int))nsb_real(NSB_REAL_SIGHOLD))
#define real_sigrelse ((int (*)(int))nsb_real(NSB_REAL_SIGRELSE))
#define real_sigignore ((int (*)(int))nsb_real(NSB_REAL_SIGIGNORE))
#define real_longjmp ((nsb_jump_fn)nsb_real(NSB_REAL_LONGJMP))
#define real_siglongjmp ((nsb_jump_fn)nsb_real(NSB_REAL_SIGLONGJMP))
#define real__longjmp ((nsb_jump_fn)nsb_real(NSB_REAL__LONGJMP))
#define real___longjmp_chk ((nsb_jump_fn)nsb_real(NSB_REAL___LONGJMP_CHK))

/* ---- config.c: NOSIGBUS_* read once ------------------------------------ */

enum nsb_policy { NSB_POLICY_FLAG, NSB_POLICY_SHM, NSB_POLICY_FILES };
enum nsb_fill { NSB_FILL_PAGE, NSB_FILL_RANGE };

struct nsb_config {
	enum nsb_policy policy;
	enum nsb_fill fill;
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

/* ---- mman.c: shared with api.c ----------------------------------------- */

int nsb_protect_range(uintptr_t start, uintptr_t end, uint32_t meta, uint32_t path);

#endif /* NSB_H */
