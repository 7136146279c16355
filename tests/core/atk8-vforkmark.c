/* SPDX-License-Identifier: MIT */
/*
 * atk8: a vfork child that dies inside a policy mapping's window leaves
 * the window's mark (nsb_map_window, 0.8.0) on the TLS it shares with its
 * parent, pointing into its dead frame; settle() gives the parent its own
 * mark back, but only once the library is entered (nsb_vfork_back, after
 * the clone returns).  A signal sent to the parent while it waits in
 * the vfork (held: the wait is killable only) is delivered as the clone
 * returns, before that: a handler of the program's that leaves there by
 * siglongjmp to a sigsetjmp made before the vfork (outside every window)
 * must not make the library act on the child's dead frame - close a
 * descriptor of the program's found there, or write into its stack.
 *
 * The child maps a memfd (NOSIGBUS_POLICY=shm protects it: a policy
 * mapping) from 64 KiB down its stack; a seccomp filter (raw system call,
 * unseen by the library) traps its kernel mmap (3 pages), and the SIGSYS
 * handler sends SIGUSR1 to the parent and ends the child there (_exit).
 * The parent's SIGUSR1 handler fills 256 KiB of its own locals (where the
 * child's frames were) with the number of a file the program opened, then
 * jumps: the file must stay open.  x86-64 and aarch64; skipped elsewhere.
 */
#include "core.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <sys/prctl.h>

#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#else
#define ARCH AUDIT_ARCH_AARCH64
#endif

static size_t ps;
static int fd;
static pid_t parent;
static volatile int victim = -1;
static volatile sig_atomic_t armed, jumped;
static volatile void *volatile seen;	/* (the locals below are used) */
static sigjmp_buf old;
#define FILL (64 * 1024)

static void
on_sys(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	if (si->si_syscall == SYS_mmap && getpid() != parent) {
		/* The vfork child, in its window: a signal for its parent
		 * (held while it waits, delivered as the clone returns),
		 * then its end. */
		kill(parent, SIGUSR1);
		_exit(0);
	}
	_exit(2);
}

static __attribute__((noinline)) void
fill_and_jump(void)
{
	volatile int locals[FILL];

	for (int i = 0; i < FILL; i++)
		locals[i] = victim;
	seen = locals;
	jumped = 1;
	siglongjmp(old, 1);
}

static void
on_usr1(int sig)
{
	(void)sig;
	if (armed) {
		armed = 0;
		fill_and_jump();
	}
}

static void
filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)(3 * ps), 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || core_raw_seccomp(&prog, 0) != 0)
		nsbt_skip("seccomp filters cannot be installed here");
}

static void
protected_map(const char *who)
{
	char *p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("%s's mapping failed or was not rescued", who);
}

/* The child's mapping, 64 KiB down its stack. */
static __attribute__((noinline)) void
child_deep(void)
{
	volatile char pad[64 * 1024];

	pad[0] = 0;
	seen = pad;
	(void)mmap(NULL, 3 * ps, PROT_READ, MAP_SHARED, fd, 0);
	_exit(3);	/* (not reached: the trap ends the child) */
}

static __attribute__((noinline)) void
vfork_child_in_window(void)
{
	pid_t pid;

	armed = 1;
	pid = vfork();
	if (pid == 0)
		child_deep();
	/* (Reached only if the handler did not run or did not jump.) */
	armed = 0;
	if (pid < 0)
		nsbt_fail("vfork: %s", strerror(errno));
}

static void
scenario(void *arg)
{
	struct sigaction sa;
	int st;
	pid_t pid;

	(void)arg;
	parent = getpid();
	fd = memfd_create("atk8-vforkmark", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	protected_map("the first");
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sys;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) != 0)
		nsbt_fail("sigaction SIGSYS");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		nsbt_fail("sigaction SIGUSR1");
	victim = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (victim < 0)
		nsbt_fail("open /dev/null: %s", strerror(errno));
	filter();
	if (sigsetjmp(old, 1) == 0)
		vfork_child_in_window();
	if (!jumped)
		nsbt_fail("SIGUSR1 was not delivered as the vfork returned");
	if (fcntl(victim, F_GETFD) == -1)
		nsbt_fail("the program's descriptor %d was closed by the library at a "
			  "siglongjmp from a SIGUSR1 handler as a vfork returned (its child "
			  "died in a mapping's window): %s", victim, strerror(errno));
	while ((pid = waitpid(-1, &st, 0)) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			nsbt_fail("the vfork child: status %#x", st);
	protected_map("the last");
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		nsbt_fail("fork after: %s", strerror(errno));
	if (fcntl(victim, F_GETFD) == -1)
		nsbt_fail("the program's descriptor %d closed later", victim);
}

int
main(void)
{
	core_require_library();
	ps = nsbt_page();
	if (core_run_case_watched(scenario, NULL, 45,
				  "a vfork child dead in its window, its parent's handler jumps") == 77)
		return 77;
	printf("ok: a vfork child's dead window is not acted on by its parent's jump\n");
	return 0;
}
#else
int
main(void)
{
	nsbt_skip("the filter's architecture: x86-64 and aarch64 only");
}
#endif
