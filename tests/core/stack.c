/* SPDX-License-Identifier: MIT */
/*
 * The handler's stack (issue 19).  The library's SIGBUS handler runs on
 * the program's SA_ONSTACK alternate stack, which may be as small as the
 * kernel's own minimum: Rust gives every thread 8 KiB with a guard page.
 * Every path must use at most 1 KiB of its own beyond the kernel's signal
 * frame, and at most 512 bytes before the program's handler is entered.
 *
 * Each scenario runs in a child on an alternate stack of exactly
 * getauxval(AT_MINSIGSTKSZ) + 1 KiB with a PROT_NONE guard page below it
 * (going past it is SIGSEGV), painted first, so that the deepest byte
 * the handler wrote tells how much it used:
 *  - rescue: a read past the end of a truncated file, under the policy the
 *    test runs with (shm: a memfd; files: a disk file), with the
 *    library's kept descriptor, and without it (NOSIGBUS_ERRORS=zero keeps
 *    none; with NOSIGBUS_FILL=range the size is learnt, through
 *    /proc/self/map_files);
 *  - pass: a fault the library passes on to the program's handler (a
 *    mapping it does not protect), where the program's handler measures
 *    how much was used before it was entered;
 *  - hold: a SIGBUS sent to the process while the main thread blocks it,
 *    which the library's handler sends on to a thread that does not;
 *  - rust: the same on an 8 KiB alternate stack whose handler itself uses
 *    all but 512 bytes of what the kernel's frame leaves;
 *  - all of it again with NOSIGBUS_LOG=1 and =pages: the log's line, and
 *    the first call of each C library function it makes.
 * The kernel's frame is measured with a signal the library hands straight
 * on (raise()), whose ucontext lies at the bottom of that frame.
 *
 * Usage: core-stack shm|files
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <sys/auxv.h>

#include "core.h"

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

#define PAINT 0xa5
#define OWN_MAX 1024
#define CHAIN_MAX 512

static char *alt;		/* the alternate stack, above its guard page */
static size_t alt_size;
static volatile uintptr_t uc_at;	/* where the kernel put its ucontext */
static volatile uintptr_t handler_frame;	/* the program's handler's frame */
static volatile size_t rust_use;	/* bytes the "Rust" handler takes */
static sigjmp_buf out;

/* CORE_STACK_EXTRA: more room, to measure a handler that needs it. */
static size_t
extra(void)
{
	const char *e = getenv("CORE_STACK_EXTRA");

	return e ? (size_t)atol(e) : 1024;
}

static size_t
min_stack(void)
{
	unsigned long v = getauxval(AT_MINSIGSTKSZ);

	return v ? (size_t)v : (size_t)MINSIGSTKSZ;
}

static void
make_alt(size_t size)
{
	size_t ps = nsbt_page(), len = (size + ps - 1) & ~(ps - 1);
	char *g = core_map(NULL, len + ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	stack_t ss;

	NSBT_CHECK(mprotect(g, ps, PROT_NONE) == 0, "guard: %s", strerror(errno));
	/* The stack's bottom right above the guard page. */
	alt = g + ps;
	alt_size = size;
	memset(alt, PAINT, len);
	ss.ss_sp = alt;
	ss.ss_size = size;
	ss.ss_flags = 0;
	NSBT_CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack(%zu): %s", size, strerror(errno));
}

/* The lowest byte of the alternate stack written since it was painted. */
static uintptr_t
deepest(void)
{
	for (size_t i = 0; i < alt_size; i++)
		if ((unsigned char)alt[i] != PAINT)
			return (uintptr_t)alt + i;
	return (uintptr_t)alt + alt_size;
}

static void
repaint(void)
{
	/* Below where we are (not on the alternate stack now). */
	memset(alt, PAINT, alt_size);
}

__attribute__((noinline)) static void
use_stack(size_t n)
{
	char buf[n];
	volatile char *v = buf;

	for (size_t i = 0; i < n; i += 64)
		v[i] = 1;
	v[n - 1] = 1;
	__asm__ volatile("" : : "r"(v) : "memory");
}

static volatile pid_t sent_to;	/* the thread a sent SIGBUS reached */

static void
program_handler(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	if (sig == SIGBUS && si->si_code != BUS_ADRERR) {
		sent_to = (pid_t)syscall(SYS_gettid);
		return;
	}
	handler_frame = (uintptr_t)__builtin_frame_address(0);
	if (rust_use)
		use_stack(rust_use);
	if (sig == SIGBUS && si->si_code == BUS_ADRERR)
		siglongjmp(out, 1);
}

static void
install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = program_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGBUS, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
}

/* A handler the kernel calls directly (installed behind the library's
 * back): where the kernel put its ucontext. */
static void
raw_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	uc_at = (uintptr_t)uc;
	siglongjmp(out, 1);
}

/* Never run: the handler above jumps out.  (x86_64 wants one.) */
static void
no_restorer(void)
{
	abort();
}

/*
 * The kernel's frame: from the top of the stack down to the ucontext the
 * kernel wrote (and the return address below it), measured with a signal
 * of its own whose handler the kernel calls directly: the frame of a
 * fault is the same size.
 */
static size_t
kernel_frame(void)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} k = { (void *)raw_handler, SA_SIGINFO | SA_ONSTACK | 0x04000000 /* SA_RESTORER */,
		(void *)no_restorer, 0 };

	NSBT_CHECK(syscall(SYS_rt_sigaction, SIGUSR2, &k, NULL, 8) == 0, "rt_sigaction: %s",
		   strerror(errno));
	uc_at = 0;
	if (sigsetjmp(out, 1) == 0) {
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGUSR2);
		nsbt_fail("SIGUSR2 was not delivered");
	}
	NSBT_CHECK(uc_at > (uintptr_t)alt && uc_at < (uintptr_t)alt + alt_size,
		   "the handler did not run on the alternate stack");
	return (uintptr_t)alt + alt_size - uc_at + sizeof(void *);
}

/* Four pages of a file mapped shared, the file then cut to one page. */
static volatile char *
truncated(bool disk)
{
	size_t ps = nsbt_page();
	volatile char *p;
	int fd;

	if (disk) {
		char path[] = "core-stack-XXXXXX";

		fd = mkstemp(path);
		NSBT_CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
		unlink(path);
	} else {
		fd = memfd_create("core-stack", MFD_CLOEXEC);
		NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	}
	core_truncate(fd, (off_t)(4 * ps));
	p = core_map(NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED, fd, 0);
	core_truncate(fd, (off_t)ps);
	close(fd);
	return p;
}

/* An empty memfd mapped behind the library's back: a fault there is
 * not the library's, and goes to the program's handler. */
static volatile char *
unrecorded(void)
{
	int fd = memfd_create("core-stack-raw", MFD_CLOEXEC);
	void *p;

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	p = (void *)syscall(SYS_mmap, NULL, nsbt_page(), PROT_READ, MAP_SHARED, fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "raw mmap: %s", strerror(errno));
	close(fd);
	return p;
}

static bool on_disk, kept;

/* Does the library keep a descriptor (an O_PATH one, below the soft limit)? */
static bool
library_keeps_one(void)
{
	/* Kept descriptors are O_PATH, the program's never are here
	 * (libnosigbus(7), "What the library adds to a process"). */
	for (int fd = 3; fd < 1024; fd++) {
		int fl = fcntl(fd, F_GETFL);

		if (fl >= 0 && (fl & O_PATH))
			return true;
	}
	return false;
}

/* A rescue past the end: the deepest byte is the library's. */
static void
rescue_child(void *arg)
{
	const char *what = arg;
	size_t ps = nsbt_page(), frame, own;
	struct nosigbus_stats before;
	volatile char *p;

	make_alt(min_stack() + extra());
	install();
	frame = kernel_frame();
	p = truncated(on_disk);
	NSBT_CHECK(library_keeps_one() == kept, "%s: the library %s a descriptor", what,
		   kept ? "keeps no" : "keeps");
	before = core_stats();
	repaint();
	(void)p[2 * ps + 5];
	own = (uintptr_t)alt + alt_size - frame - deepest();
	NSBT_CHECK(core_stats().rescues == before.rescues + 1, "%s: the read was not rescued", what);
	printf("%s: kernel frame %zu bytes, the library's own %zu bytes\n", what, frame, own);
	NSBT_CHECK(own <= OWN_MAX, "%s: the handler used %zu bytes of its own, more than %d", what,
		   own, OWN_MAX);
}

/* A fault the library passes on to the program's handler, which runs. */
static void
fault_passed_on(const char *what)
{
	volatile char *p = unrecorded();

	handler_frame = 0;
	if (sigsetjmp(out, 1) == 0) {
		(void)p[5];
		nsbt_fail("%s: the read past the end did not fault", what);
	}
	NSBT_CHECK(handler_frame != 0, "%s: the program's handler did not run", what);
}

/* A fault passed on: how much was used before the program's handler. */
static void
pass_child(void *arg)
{
	const char *what = arg;
	size_t frame, before_handler;

	make_alt(min_stack() + extra());
	install();
	frame = kernel_frame();
	/* A protected mapping: the library's handler is in place. */
	(void)truncated(on_disk);
	fault_passed_on(what);
	/* From the frame's bottom to the program's handler's frame (less
	 * the call's return address and the frame pointer). */
	before_handler = (uintptr_t)alt + alt_size - frame - handler_frame - 2 * sizeof(void *);
	printf("%s: kernel frame %zu bytes, %zu bytes before the program's handler\n", what, frame,
	       before_handler);
	NSBT_CHECK(before_handler <= CHAIN_MAX, "%s: %zu bytes before the program's handler, more "
		   "than %d", what, before_handler, CHAIN_MAX);
}

/* A thread whose view of SIGBUS is open, for hold_child's signal. */
static void *
open_thread(void *arg)
{
	*(volatile pid_t *)arg = (pid_t)syscall(SYS_gettid);
	while (!sent_to)
		sched_yield();
	return NULL;
}

/*
 * A SIGBUS sent to the process while the main thread blocks it (in the
 * program's view; the kernel's mask never holds it): the library's handler
 * runs on the main thread's alternate stack and sends it on to a thread
 * that does not block it, as the kernel would have chosen.
 */
static void
hold_child(void *arg)
{
	const char *what = arg;
	volatile pid_t other = 0;
	size_t frame, own;
	pthread_t t;
	sigset_t bus;

	make_alt(min_stack() + extra());
	install();
	frame = kernel_frame();
	(void)truncated(on_disk);	/* the library's handler is in place */
	sent_to = 0;
	NSBT_CHECK(pthread_create(&t, NULL, open_thread, (void *)&other) == 0, "pthread_create");
	while (!other)
		sched_yield();
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	NSBT_CHECK(sigprocmask(SIG_BLOCK, &bus, NULL) == 0, "sigprocmask: %s", strerror(errno));
	repaint();
	NSBT_CHECK(kill(getpid(), SIGBUS) == 0, "kill: %s", strerror(errno));
	NSBT_CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	NSBT_CHECK(sent_to == other, "%s: the sent SIGBUS reached thread %d, not the open one %d",
		   what, (int)sent_to, (int)other);
	own = (uintptr_t)alt + alt_size - frame - deepest();
	printf("%s: kernel frame %zu bytes, the library's own %zu bytes\n", what, frame, own);
	NSBT_CHECK(deepest() < (uintptr_t)alt + alt_size, "%s: the signal did not run on the "
		   "alternate stack", what);
	NSBT_CHECK(own <= OWN_MAX, "%s: the handler used %zu bytes of its own, more than %d", what,
		   own, OWN_MAX);
}

/* Rust's 8 KiB: the program's handler takes all that the library may
 * leave it (the frame, 512 bytes, and some for its own frames). */
static void
rust_child(void *arg)
{
	const char *what = arg;
	size_t frame;
	volatile char *p;

	make_alt(8192);
	install();
	frame = kernel_frame();
	NSBT_CHECK(frame + CHAIN_MAX + 512 < 8192, "%s: the kernel's frame (%zu bytes) leaves no "
		   "room in 8 KiB", what, frame);
	rust_use = 8192 - frame - CHAIN_MAX - 512;
	(void)truncated(on_disk);
	fault_passed_on(what);
	rust_use = 0;
	/* And a rescue on the same stack. */
	p = truncated(on_disk);
	(void)p[3 * nsbt_page()];
	printf("ok: %s: the program's handler had its %zu bytes, and a rescue ran\n", what,
	       8192 - frame - CHAIN_MAX - 512);
}

static void
run(void (*fn)(void *), const char *what)
{
	char err[4096];
	int status = core_run_watched(fn, (void *)what, nsbt_scaled(45), NULL, what, err, sizeof(err));

	/* Asked to log, it says what it rescued, and nothing else. */
	if (getenv("NOSIGBUS_LOG")) {
		for (const char *l = strstr(err, "nosigbus:"); l; l = strstr(l + 1, "nosigbus:"))
			if (strncmp(strchr(l, ' ') ? strchr(l, ' ') + 1 : l, "core-reexec[", 12) != 0 ||
			    !strstr(l, ": rescued ") || strstr(l, ": rescued ") > strchr(l, '\n'))
				nsbt_fail("%s: the library printed: %.*s", what, (int)strcspn(l, "\n"), l);
	} else {
		core_expect_quiet(err, what);
	}
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		nsbt_fail("%s: SIGSEGV: the handler ran past the alternate stack's guard page", what);
	nsbt_expect_exit(status, 0, what);
}

int
main(int argc, char **argv)
{
	const char *policy = argc > 1 ? argv[1] : "shm";
	const char *errors = getenv("NOSIGBUS_ERRORS");
	kept = !errors || strcmp(errors, "zero") != 0;
	/* NOSIGBUS_ERRORS=zero keeps no descriptor; with fill=range the size
	 * is still learnt (a fill goes on only past the end). */
	static const char *const nokeep_env[] = { "NOSIGBUS_ERRORS=zero", "NOSIGBUS_FILL=range",
						  NULL };
	static const char *const log_env[] = { "NOSIGBUS_LOG=1", NULL };
	static const char *const pages_env[] = { "NOSIGBUS_LOG=pages", NULL };
	char what[128];

	core_require_library();
	/* A sanitizer's frames carry red zones: the budget is the library's
	 * as built for use, not under a sanitizer. */
	if (dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init") ||
	    dlsym(RTLD_DEFAULT, "__msan_init"))
		nsbt_skip("a sanitizer is loaded: its stack frames are larger by design");
	on_disk = strcmp(policy, "files") == 0;
	snprintf(what, sizeof(what), "policy %s, %s: a rescue on AT_MINSIGSTKSZ + 1 KiB", policy,
		 kept ? "kept descriptor" : "no descriptor");
	run(rescue_child, strdup(what));
	snprintf(what, sizeof(what), "policy %s, %s: a fault passed on, AT_MINSIGSTKSZ + 1 KiB",
		 policy, kept ? "kept descriptor" : "no descriptor");
	run(pass_child, strdup(what));
	snprintf(what, sizeof(what), "policy %s, %s: a sent SIGBUS held and sent on, "
		 "AT_MINSIGSTKSZ + 1 KiB", policy, kept ? "kept descriptor" : "no descriptor");
	run(hold_child, strdup(what));
	snprintf(what, sizeof(what), "policy %s, %s: a Rust-style 8 KiB stack", policy,
		 kept ? "kept descriptor" : "no descriptor");
	run(rust_child, strdup(what));
	if (kept && !getenv("NOSIGBUS_LOG")) {
		nsbt_expect_exit(core_reexec(policy, nokeep_env), 0, "without a kept descriptor");
		/* The log's first line and its clock (bound lazily, the first
		 * call would take the loader's resolver's 3 KiB). */
		nsbt_expect_exit(core_reexec(policy, log_env), 0, "NOSIGBUS_LOG=1");
		nsbt_expect_exit(core_reexec(policy, pages_env), 0, "NOSIGBUS_LOG=pages");
	}
	return 0;
}
