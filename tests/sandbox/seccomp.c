/* SPDX-License-Identifier: MIT */
/*
 * The seccomp harness (SPEC §12 "System calls"): every situation under
 * every filter, each with the kill action and with EPERM, run without the
 * library and with it preloaded ($NSB_PRELOAD), and compared: the same
 * exit status, the same output, the same standard error - except where
 * the library rescues a fault that kills without it.  A process that dies
 * of SIGSYS with the library and not without it is the failure this is
 * for.
 *
 * Filters, as real sandboxes make them:
 *  - system-service: systemd's @system-service allow-list, as
 *    `systemd-analyze syscall-filter` prints it on this machine (asked at
 *    test time, groups expanded), installed before exec like a unit's;
 *  - chrony: Debian's chrony.service deny-list (~@cpu-emulation @debug
 *    @module @mount @obsolete @raw-io @reboot @swap), expanded the same way;
 *  - flatpak: flatpak's default deny-list (flatpak-run.c setup_seccomp:
 *    the keyring, NUMA policy, the new mount API, unshare, perf, ptrace...);
 *  - groups: system-service again, in a process with 4000 supplementary
 *    groups (a status file of some 20 KiB: "Seccomp:" after them);
 *  - renderer: an allow-list written from Chromium's and Firefox's content
 *    process policies - the calls a renderer makes allowed, statx,
 *    fstatfs, open_tree, mincore, ioctl and the rest refused, openat and
 *    newfstatat trapped to a SIGSYS handler that plays the broker (Firefox)
 *    - installed the way the browsers do, by the process itself through
 *    libseccomp once it runs (so after the library loaded);
 *  - raw: the same list installed with a seccomp system call instruction
 *    of the program's own, as a Go program (golang.org/x/sys/unix makes
 *    no C library call) or a static sandbox does: the library cannot see
 *    it, and has not looked yet when it comes; its first look, the open
 *    of /proc/self/status, is then trapped to the broker.
 * "kill" is SCMP_ACT_KILL_PROCESS for what the filter refuses; "eperm"
 * SCMP_ACT_ERRNO(EPERM).
 *
 * Usage: nsb-seccomp            the table (exit 0 all same, 1 a cell differs,
 *                               77 no libseccomp or no $NSB_PRELOAD)
 *        nsb-seccomp --only FILTER ACTION SITUATION   one cell, verbose
 *        nsb-seccomp --situation NAME                 (internal)
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <grp.h>
#include <ucontext.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "nosigbus.h"

extern char **environ;

/* ---- filters ------------------------------------------------------------ */

/* The flatpak deny-list (flatpak 1.14, common/flatpak-run.c). */
static const char *const flatpak_deny[] = {
	"syslog", "uselib", "acct", "modify_ldt", "quotactl", "add_key", "keyctl",
	"request_key", "move_pages", "mbind", "get_mempolicy", "set_mempolicy",
	"migrate_pages", "unshare", "setns", "mount", "umount", "umount2",
	"pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
	"fsconfig", "fsmount", "fspick", "mount_setattr", "perf_event_open",
	"ptrace", "personality", "userfaultfd", NULL,	/* clone3: ENOSYS, below */
};

/* A content process's allow-list, from Chromium's baseline and renderer
 * policies and Firefox's content policy: what a renderer makes once it
 * runs.  Everything else, statx, fstatfs, open_tree, mincore, openat and
 * ioctl among them, is refused; openat goes to the broker (below). */
static const char *const renderer_allow[] = {
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close", "dup",
	"dup2", "dup3", "fstat", "newfstatat", "lseek", "fcntl", "ftruncate",
	"mmap", "munmap", "mprotect", "mremap", "madvise", "brk",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"rt_sigtimedwait", "getpid", "gettid", "getppid", "tgkill",
	"rt_tgsigqueueinfo", "futex", "sched_yield", "exit", "exit_group",
	"clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday",
	"getrandom", "rseq", "set_robust_list", "restart_syscall",
	"sendmsg", "recvmsg", "recvfrom", "sendto", "socketpair", "shutdown",
	"memfd_create", "poll", "ppoll", "epoll_wait", "epoll_pwait",
	"clone", "wait4", "execve", "set_tid_address", "getuid", "geteuid",
	"getgid", "getegid", "prlimit64", "sched_getaffinity", NULL,
};

/* The names a systemd group stands for, groups expanded, into names[]. */
static int
systemd_group(const char *group, char ***names, size_t *n, int depth)
{
	char cmd[256], line[256];
	FILE *f;

	if (depth > 8)
		return 0;
	snprintf(cmd, sizeof(cmd), "systemd-analyze syscall-filter --no-pager '%s' 2>/dev/null", group);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *s = line + strspn(line, " \t");

		s[strcspn(s, "\n")] = '\0';
		if (!*s || *s == '#' || !strcmp(s, group))
			continue;
		if (*s == '@') {
			systemd_group(s, names, n, depth + 1);
			continue;
		}
		*names = realloc(*names, (*n + 1) * sizeof(**names));
		(*names)[(*n)++] = strdup(s);
	}
	return pclose(f) == 0 || *n ? 0 : -1;
}

static void
add_names(scmp_filter_ctx ctx, uint32_t action, char **names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);

		if (nr != __NR_SCMP_ERROR)
			(void)seccomp_rule_add(ctx, action, nr, 0);
	}
}

/* The systemd lists, asked once (the parent asks before it forks). */
static char **svc_names, **chrony_names;
static size_t svc_n, chrony_n;

static bool
systemd_lists(void)
{
	static const char *const chrony_groups[] = { "@cpu-emulation", "@debug", "@module", "@mount",
						     "@obsolete", "@raw-io", "@reboot", "@swap" };

	if (!svc_n) {
		systemd_group("@system-service", &svc_names, &svc_n, 0);
		for (size_t g = 0; g < sizeof(chrony_groups) / sizeof(*chrony_groups); g++)
			systemd_group(chrony_groups[g], &chrony_names, &chrony_n, 0);
	}
	return svc_n >= 100 && chrony_n >= 20;
}

/*
 * The broker's side of a trapped call, as Firefox's SIGSYS handler does
 * it: newfstatat(fd, "", AT_EMPTY_PATH) is answered by fstat, an openat
 * is refused (its broker does not list what the harness's processes
 * open after the filter: /proc among them).
 */
static void
broker(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	long ret = -EACCES;
#if defined(__x86_64__)
	greg_t *g = uc->uc_mcontext.gregs;

	if (si->si_syscall == SCMP_SYS(newfstatat) && ((const char *)g[REG_RSI])[0] == '\0' &&
	    (g[REG_R10] & AT_EMPTY_PATH))
		ret = syscall(SYS_fstat, g[REG_RDI], g[REG_RDX]) < 0 ? -errno : 0;
	g[REG_RAX] = ret;
#elif defined(__aarch64__)
	unsigned long long *x = uc->uc_mcontext.regs;

	if (si->si_syscall == SCMP_SYS(newfstatat) && ((const char *)x[1])[0] == '\0' &&
	    (x[3] & AT_EMPTY_PATH))
		ret = syscall(SYS_fstat, x[0], x[2]) < 0 ? -errno : 0;
	x[0] = (unsigned long long)ret;
#endif
	(void)sig;
}

/*
 * The raw filter: no libseccomp in the process (whose probes go through
 * syscall(), where the library would see them),
 * the program made beforehand - here by the harness before the exec, into
 * a memfd the process inherits as descriptor NSB_SECCOMP_BPF - and loaded
 * with a system call instruction of the program's own.
 */
static int
load_raw(void)
{
	static struct sock_filter insns[4096];
	struct sock_fprog prog;
	struct sigaction sa = { .sa_sigaction = broker, .sa_flags = SA_SIGINFO };
	const char *var = getenv("NSB_SECCOMP_BPF");
	int fd = var ? atoi(var) : -1;
	long ret;
	ssize_t n;

	if (fd < 0 || (n = pread(fd, insns, sizeof(insns), 0)) <= 0 || n % (ssize_t)sizeof(*insns))
		return -1;
	close(fd);
	prog.len = (unsigned short)(n / (ssize_t)sizeof(*insns));
	prog.filter = insns;
	sigaction(SIGSYS, &sa, NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
#if defined(__x86_64__)
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_seccomp), "D"((long)SECCOMP_SET_MODE_FILTER), "S"(0L),
			   "d"(&prog)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_seccomp;
	register long x0 __asm__("x0") = SECCOMP_SET_MODE_FILTER;
	register long x1 __asm__("x1") = 0;
	register long x2 __asm__("x2") = (long)&prog;

	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#endif
	return ret < 0 ? -1 : 0;
}

/* Installs the named filter in this process (no_new_privs first). */
static int
install(const char *filter, const char *action)
{
	uint32_t refuse = !strcmp(action, "kill") ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM);
	scmp_filter_ctx ctx = NULL;
	bool raw = !strcmp(filter, "raw");
	int rc;

	if (raw)
		filter = "renderer";

	if (!strcmp(filter, "system-service") || !strcmp(filter, "chrony")) {
		if (!systemd_lists()) {
			fprintf(stderr, "nsb-seccomp: systemd-analyze gave %zu and %zu names\n",
				svc_n, chrony_n);
			return -1;
		}
		if (!strcmp(filter, "system-service")) {
			ctx = seccomp_init(refuse);
			add_names(ctx, SCMP_ACT_ALLOW, svc_names, svc_n);
		} else {
			ctx = seccomp_init(SCMP_ACT_ALLOW);
			add_names(ctx, refuse, chrony_names, chrony_n);
		}
	} else if (!strcmp(filter, "flatpak")) {
		ctx = seccomp_init(SCMP_ACT_ALLOW);
		add_names(ctx, refuse, (char **)flatpak_deny,
			  sizeof(flatpak_deny) / sizeof(*flatpak_deny) - 1);
		/* clone3 is ENOSYS in flatpak whatever else (glibc then uses
		 * clone), as in Chromium. */
		(void)seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	} else if (!strcmp(filter, "renderer")) {
		struct sigaction sa = { .sa_sigaction = broker, .sa_flags = SA_SIGINFO };

		sigaction(SIGSYS, &sa, NULL);
		ctx = seccomp_init(refuse);
		add_names(ctx, SCMP_ACT_ALLOW, (char **)renderer_allow,
			  sizeof(renderer_allow) / sizeof(*renderer_allow) - 1);
		/* A browser traps openat and newfstatat to its broker through
		 * SIGSYS (broker(), below): a trapped call made with SIGSYS
		 * blocked is a kill, whatever the action. */
		(void)seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(openat), 0);
		(void)seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(newfstatat), 0);
		(void)seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	}
	if (!ctx)
		return -1;
	if (raw) {
		/* Exported for load_raw(), in the process after the exec. */
		int fd = memfd_create("nsb-seccomp-bpf", 0);

		rc = fd < 0 ? -1 : seccomp_export_bpf(ctx, fd);
		seccomp_release(ctx);
		return rc < 0 ? -1 : fd;
	}
	rc = seccomp_load(ctx);	/* prctl(PR_SET_NO_NEW_PRIVS) included */
	seccomp_release(ctx);
	return rc;
}

/* ---- situations --------------------------------------------------------- */

static size_t page;

static int
make_memfd(size_t len)
{
	int fd = memfd_create("nsb-seccomp", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		perror("memfd");
		exit(3);
	}
	return fd;
}

/* In the build tree (NSB_BUILD_ROOT, or here), never in /tmp: where /tmp
 * is a tmpfs (Debian 13's default; the test machines'), its file is a
 * memory file, which the default policy protects (a machine with Linux
 * 5.10 showed own-handler's file rescued). */
static int
make_disk_file(size_t len)
{
	const char *dir = getenv("NSB_BUILD_ROOT");
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/nsb-seccomp-XXXXXX", dir ? dir : ".");
	fd = mkstemp(path);

	if (fd < 0 || unlink(path) < 0 || ftruncate(fd, (off_t)len) < 0) {
		perror("disk file");
		exit(3);
	}
	return fd;
}

static unsigned
sum(const volatile unsigned char *p, size_t len)
{
	unsigned s = 0;

	for (size_t i = 0; i < len; i += 64)
		s += p[i];
	return s;
}

/* A peer: makes the file (memfd or disk), sends it over sv, waits for a
 * byte, truncates it to 0, answers with a byte, and exits. */
struct peer {
	pid_t pid;
	int sock;
};

static struct peer
start_peer(bool memfd, size_t len)
{
	int sv[2];
	struct peer p;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(3);
	}
	p.pid = fork();
	if (p.pid == 0) {
		int fd = memfd ? make_memfd(len) : make_disk_file(len);
		char c = 'f', buf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { &c, 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
				    .msg_controllen = sizeof(buf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

		close(sv[0]);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
		if (sendmsg(sv[1], &m, 0) != 1)
			_exit(4);
		if (read(sv[1], &c, 1) == 1 && c == 't') {
			if (ftruncate(fd, 0) < 0)
				_exit(4);
			(void)!write(sv[1], "d", 1);
		}
		_exit(0);
	}
	close(sv[1]);
	p.sock = sv[0];
	return p;
}

static int
receive_fd(int sock)
{
	char c, buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			    .msg_controllen = sizeof(buf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1 || !(cm = CMSG_FIRSTHDR(&m))) {
		fprintf(stderr, "recvmsg failed\n");
		exit(3);
	}
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static void
peer_truncate(struct peer *p)
{
	char c = 't';

	if (write(p->sock, &c, 1) != 1 || read(p->sock, &c, 1) != 1) {
		fprintf(stderr, "peer gone\n");
		exit(3);
	}
}

static void
peer_end(struct peer *p)
{
	int st;

	close(p->sock);
	waitpid(p->pid, &st, 0);
}

static sigjmp_buf jump;
static volatile sig_atomic_t handler_code;

static void
on_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	handler_code = si->si_code;
	siglongjmp(jump, 1);
}

static void *
thread_main(void *arg)
{
	return arg;
}

/* Setup that must come before a late filter (a peer, made by fork). */
struct setup {
	struct peer peer;
	bool has_peer;
	int file;	/* own-handler's disk file, made before a late filter */
	int flag_fd;	/* flag-first's memfd and its MAP_NOSIGBUS mapping, */
	unsigned char *flag_map;	/* made before a late filter */
};

static struct setup
situation_setup(const char *name)
{
	struct setup s = { .has_peer = false, .file = -1, .flag_fd = -1 };

	if (!strncmp(name, "recv-", 5) || !strncmp(name, "rescue-", 7)) {
		s.peer = start_peer(!strstr(name, "disk"), 4 * page);
		s.has_peer = true;
	}
	if (!strcmp(name, "own-handler"))
		s.file = make_disk_file(page);
	if (!strcmp(name, "flag-first") || !strcmp(name, "poll-sent") ||
	    !strcmp(name, "ppoll-sent")) {
		/* MAP_NOSIGBUS needs no look at the sandbox: the library's
		 * first look comes in its handler, at the fault (below). */
		s.flag_fd = make_memfd(4 * page);
		s.flag_map = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, s.flag_fd, 0);
		if (s.flag_map == MAP_FAILED) {
			perror("mmap");
			exit(3);
		}
	}
	return s;
}

static pthread_t main_thread;

/* Three SIGBUS to the main thread, 20 ms apart (some land in its poll). */
static void *
send_bus_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++) {
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
		pthread_kill(main_thread, SIGBUS);
	}
	return NULL;
}

static int
situation(const char *name, struct setup *s)
{
	if (!strcmp(name, "startup")) {
		puts("started");
	} else if (!strcmp(name, "api-probe")) {
		/* libseccomp's probes install nothing: the process's own
		 * memfd stays protected where no filter is in force. */
		int fd = make_memfd(4 * page);
		unsigned char *p;

		printf("api %u\n", seccomp_api_get() > 0);
		p = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED || ftruncate(fd, 0) < 0)
			return perror("mmap"), 3;
		fflush(stdout);
		printf("rescued %u\n", sum(p, 4 * page));
	} else if (!strcmp(name, "flag-first")) {
		if (ftruncate(s->flag_fd, 0) < 0)
			return perror("ftruncate"), 3;
		fflush(stdout);
		/* Without the library (the flag unknown): SIGBUS. */
		printf("rescued %u\n", sum(s->flag_map, 4 * page));
	} else if (!strcmp(name, "poll-sent")) {
		/* SIGBUS sent during a poll while the program ignores it, then
		 * while it blocks it: the library's handler swallows or holds
		 * it and asks whether a signal of the program's came with it -
		 * never in /proc under a filter (a trapped openat there, every
		 * signal blocked, killed).  The poll times out as without it. */
		pthread_t t;
		sigset_t bus;

		signal(SIGBUS, SIG_IGN);
		main_thread = pthread_self();
		if (pthread_create(&t, NULL, send_bus_thread, NULL) != 0)
			return perror("pthread_create"), 3;
		printf("ignored: poll %d\n", poll(NULL, 0, 300));
		pthread_join(t, NULL);
		sigemptyset(&bus);
		sigaddset(&bus, SIGBUS);
		pthread_sigmask(SIG_BLOCK, &bus, NULL);
		signal(SIGBUS, SIG_DFL);
		if (pthread_create(&t, NULL, send_bus_thread, NULL) != 0)
			return perror("pthread_create"), 3;
		printf("blocked: poll %d\n", poll(NULL, 0, 300));
		pthread_join(t, NULL);
		/* Pending, taken (rt_sigpending is not every filter's). */
		printf("took %d\n", sigtimedwait(&bus, NULL, &(struct timespec){ 0, 0 }));
		pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
		puts("done");
	} else if (!strcmp(name, "ppoll-sent")) {
		/* As poll-sent, with the masked waits, given no mask and their
		 * own: a parked retry is the program's own call, the one the
		 * filter lets through (or not) as without the library; each
		 * times out as without it. */
		struct timespec ts = { 0, 300000000 };
		pthread_t t;
		sigset_t m;

		signal(SIGBUS, SIG_IGN);
		main_thread = pthread_self();
		pthread_sigmask(SIG_BLOCK, NULL, &m);
		if (pthread_create(&t, NULL, send_bus_thread, NULL) != 0)
			return perror("pthread_create"), 3;
		printf("ppoll %d\n", ppoll(NULL, 0, &ts, NULL));
		pthread_join(t, NULL);
		if (pthread_create(&t, NULL, send_bus_thread, NULL) != 0)
			return perror("pthread_create"), 3;
		printf("ppoll with a mask %d\n", ppoll(NULL, 0, &ts, &m));
		pthread_join(t, NULL);
		puts("done");
	} else if (!strcmp(name, "memfd")) {
		int fd = make_memfd(2 * page);
		unsigned char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED)
			return perror("mmap"), 3;
		memset(p, 1, 2 * page);
		printf("sum %u\n", sum(p, 2 * page));
		printf("munmap %d\n", munmap(p, 2 * page));
		close(fd);
	} else if (!strcmp(name, "closed")) {
		int fd = make_memfd(2 * page);
		unsigned char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED)
			return perror("mmap"), 3;
		printf("close %d\n", close(fd));
		memset(p, 2, 2 * page);
		printf("sum %u\n", sum(p, 2 * page));
		printf("munmap %d\n", munmap(p, 2 * page));
	} else if (!strcmp(name, "devshm")) {
		char path[64];
		int fd;
		unsigned char *p;

		snprintf(path, sizeof(path), "/nsb-seccomp-%d", (int)getpid());
		fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd < 0) {
			puts("no /dev/shm");	/* the same without the library */
			return 0;
		}
		shm_unlink(path);
		if (ftruncate(fd, (off_t)page) < 0)
			return perror("ftruncate"), 3;
		p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			return perror("mmap"), 3;
		memset(p, 3, page);
		printf("sum %u\n", sum(p, page));
		close(fd);
		printf("munmap %d\n", munmap(p, page));
	} else if (!strcmp(name, "recv-disk") || !strcmp(name, "recv-memfd")) {
		int fd = receive_fd(s->peer.sock);
		unsigned char *p = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED)
			return perror("mmap"), 3;
		printf("sum %u\n", sum(p, 4 * page));
		close(fd);
		printf("munmap %d\n", munmap(p, 4 * page));
		peer_end(&s->peer);
	} else if (!strcmp(name, "rescue-kept") || !strcmp(name, "rescue-open") ||
		   !strcmp(name, "rescue-disk")) {
		int fd = receive_fd(s->peer.sock);
		unsigned char *p = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED)
			return perror("mmap"), 3;
		if (strcmp(name, "rescue-open"))
			close(fd);	/* the library keeps one, where it may */
		peer_truncate(&s->peer);
		fflush(stdout);
		/* Without the library: SIGBUS.  With it: zeros. */
		printf("rescued %u\n", sum(p, 4 * page));
		printf("munmap %d\n", munmap(p, 4 * page));
		peer_end(&s->peer);
	} else if (!strcmp(name, "own-handler")) {
		struct sigaction sa = { .sa_sigaction = on_bus, .sa_flags = SA_SIGINFO };
		int fd = s->file;
		volatile unsigned char *p = mmap(NULL, 2 * page, PROT_READ, MAP_PRIVATE, fd, 0);

		if (p == MAP_FAILED)
			return perror("mmap"), 3;
		sigaction(SIGBUS, &sa, NULL);
		if (sigsetjmp(jump, 1) == 0)
			printf("read %u\n", p[page]);	/* past the end of a file of its own */
		else
			printf("handler si_code %d\n", (int)handler_code);
		sa.sa_handler = SIG_DFL;
		sa.sa_flags = 0;
		sigaction(SIGBUS, &sa, NULL);
		close(fd);
	} else if (!strcmp(name, "block-all")) {
		sigset_t all, old;
		pthread_t t;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		if (pthread_create(&t, NULL, thread_main, NULL) == 0)
			pthread_join(t, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		puts("joined");
	} else if (!strcmp(name, "raise")) {
		fflush(stdout);
		raise(SIGBUS);
		puts("raise returned");
	} else if (!strcmp(name, "fork-exec")) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			return perror("fork"), 3;
		printf("child status %d\n", st);
	} else if (!strcmp(name, "syscall")) {
		/* The interposed syscall() as glibc's: results, errno, six
		 * arguments, a fork made through it. */
		long r = syscall(SYS_close, -1);
		int e = errno, st = 0;
		void *p = (void *)syscall(SYS_mmap, 0, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		long pid;

		printf("close(-1) %ld errno %d\n", r, e);
		printf("getpid %d\n", syscall(SYS_getpid) == getpid());
		printf("mmap %d munmap %ld\n", p != MAP_FAILED, syscall(SYS_munmap, p, page));
		fflush(stdout);
		pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (pid == 0)
			_exit(7);
		waitpid((pid_t)pid, &st, 0);
		printf("clone child %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	} else {
		fprintf(stderr, "unknown situation %s\n", name);
		return 2;
	}
	return 0;
}

static int
run_situation(const char *name)
{
	const char *late = getenv("NSB_SECCOMP_LATE");
	struct setup s;
	int ret;

	page = (size_t)sysconf(_SC_PAGESIZE);
	s = situation_setup(name);
	if (late) {
		char filter[64], action[16];

		/* A file mapped before the filter: the library has looked and
		 * found none, and must see the one installed now (the
		 * interposed syscall and prctl).  The raw filter is not seen: the
		 * library must not have looked yet. */
		if (strncmp(late, "raw:", 4)) {
			int fd = make_memfd(page);
			void *p = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);

			if (p == MAP_FAILED)
				return perror("mmap"), 3;
			munmap(p, page);
			close(fd);
		}
		if (sscanf(late, "%63[^:]:%15s", filter, action) != 2 ||
		    (!strcmp(filter, "raw") ? load_raw() : install(filter, action)) < 0) {
			fprintf(stderr, "cannot install %s\n", late);
			return 3;
		}
	}
	ret = situation(name, &s);
	fflush(stdout);
	return ret;
}

/* ---- the table ---------------------------------------------------------- */

static const char *const situations[] = {
	"startup", "memfd", "closed", "devshm", "recv-disk", "recv-memfd", "rescue-kept",
	"rescue-open", "rescue-disk", "own-handler", "block-all", "raise", "fork-exec",
	"syscall", "flag-first", "api-probe", "poll-sent", "ppoll-sent",
};
static const char *const filters[] = { "none", "system-service", "chrony", "flatpak", "renderer",
				       "raw", "groups" };
static const char *const actions[] = { "kill", "eperm" };

struct outcome {
	int status;
	char out[4096];
	char err[4096];
};

static void
slurp(int fd, char *buf, size_t size)
{
	size_t have = 0;
	ssize_t n;

	while ((n = read(fd, buf + have, size - 1 - have)) > 0 && have + (size_t)n < size - 1)
		have += (size_t)n;
	if (n > 0)
		have += (size_t)n;
	buf[have] = '\0';
}

/* One run: the situation in a child, under the filter, with or without
 * the library; killed after 30 s (a hang is a failure too). */
static void
run_cell(const char *self, const char *filter, const char *action, const char *sit,
	 const char *preload, struct outcome *o)
{
	int out[2], err[2];
	pid_t pid;

	if (pipe(out) < 0 || pipe(err) < 0) {
		perror("pipe");
		exit(2);
	}
	pid = fork();
	if (pid == 0) {
		char late[96], pre[4096], bpf[64];
		char *env[9];
		int e = 0;

		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]);
		close(err[0]);
		env[e++] = "PATH=/usr/bin:/bin";
		if (preload) {
			snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload);
			env[e++] = pre;
		}
		if (!strcmp(filter, "renderer") || !strcmp(filter, "raw")) {
			snprintf(late, sizeof(late), "NSB_SECCOMP_LATE=%s:%s", filter, action);
			env[e++] = late;
		}
		if (!strcmp(filter, "raw")) {
			int fd = install(filter, action);

			if (fd < 0)
				_exit(111);
			snprintf(bpf, sizeof(bpf), "NSB_SECCOMP_BPF=%d", fd);
			env[e++] = bpf;
		}
		if (getenv("NOSIGBUS_LOG"))
			env[e++] = "NOSIGBUS_LOG=1";
		env[e] = NULL;
		alarm(30);	/* the exec keeps it: SIGALRM ends a hang */
		if (!strcmp(filter, "groups")) {
			/* A user in many groups: "Seccomp:" comes after a
			 * Groups line of some 20 KiB (a fixed-size read of
			 * the status would miss it).  Under systemd's filter. */
			static gid_t g[4000];

			for (size_t i = 0; i < sizeof(g) / sizeof(*g); i++)
				g[i] = (gid_t)(100000 + i);
			if (setgroups(sizeof(g) / sizeof(*g), g) < 0)
				_exit(110);
			filter = "system-service";
		}
		if (strcmp(filter, "none") && strcmp(filter, "renderer") && strcmp(filter, "raw") &&
		    install(filter, action) < 0)
			_exit(111);
		execve(self, (char *[]){ (char *)self, "--situation", (char *)sit, NULL }, env);
		_exit(112);
	}
	close(out[1]);
	close(err[1]);
	slurp(out[0], o->out, sizeof(o->out));
	slurp(err[0], o->err, sizeof(o->err));
	close(out[0]);
	close(err[0]);
	if (waitpid(pid, &o->status, 0) != pid) {
		perror("waitpid");
		exit(2);
	}
}

static void
describe(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exit %d", WEXITSTATUS(status));
	else
		snprintf(buf, size, "%s", sigabbrev_np(WTERMSIG(status)) ?: "signal");
}

static bool
cell(const char *self, const char *preload, const char *filter, const char *action,
     const char *sit, bool verbose)
{
	static struct outcome without, with;
	char a[32], b[32];
	bool same, rescued, ok;

	run_cell(self, filter, action, sit, NULL, &without);
	run_cell(self, filter, action, sit, preload, &with);
	describe(without.status, a, sizeof(a));
	describe(with.status, b, sizeof(b));
	same = without.status == with.status && !strcmp(without.out, with.out) &&
	       !strcmp(without.err, with.err);
	/* A fault that kills without the library, rescued with it. */
	rescued = WIFSIGNALED(without.status) && WTERMSIG(without.status) == SIGBUS &&
		  WIFEXITED(with.status) && WEXITSTATUS(with.status) == 0 &&
		  !strncmp(with.out, without.out, strlen(without.out)) &&
		  strstr(with.out, "rescued 0\n") && !with.err[0];
	ok = same || rescued;
	/* Where no filter is in force, a probe must leave protection on. */
	if (!strcmp(filter, "none") && !strcmp(sit, "api-probe"))
		ok = rescued;
	printf("%-15s %-6s %-12s without: %-8s with: %-8s %s\n", filter, action, sit, a, b,
	       same ? "same" : rescued ? "rescued" : "DIFFERENT");
	if (!ok || verbose) {
		printf("  without, stdout:\n%s  without, stderr:\n%s", without.out, without.err);
		printf("  with, stdout:\n%s  with, stderr:\n%s", with.out, with.err);
	}
	return ok;
}

int
main(int argc, char **argv)
{
	const char *preload = getenv("NSB_PRELOAD");
	char self[4096];
	ssize_t n;
	int bad = 0, cells = 0;

	if (argc == 3 && !strcmp(argv[1], "--situation"))
		return run_situation(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!preload || access(preload, R_OK) < 0) {
		printf("SKIP: NSB_PRELOAD names no library\n");
		return 77;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		printf("SKIP: no /proc/self/exe\n");
		return 77;
	}
	self[n] = '\0';
	if (argc == 5 && !strcmp(argv[1], "--only"))
		return systemd_lists(), cell(self, preload, argv[2], argv[3], argv[4], true) ? 0 : 1;
	if (!systemd_lists())
		printf("note: systemd-analyze gave no lists here: the system-service and chrony rows are skipped\n");
	for (size_t f = 0; f < sizeof(filters) / sizeof(*filters); f++) {
		if ((!strcmp(filters[f], "system-service") || !strcmp(filters[f], "chrony") ||
		     !strcmp(filters[f], "groups")) &&
		    !systemd_lists())
			continue;
		for (size_t a = 0; a < sizeof(actions) / sizeof(*actions); a++) {
			if (!strcmp(filters[f], "none") && a > 0)
				break;
			for (size_t s = 0; s < sizeof(situations) / sizeof(*situations); s++) {
				/* A renderer never execs (and its broker would
				 * refuse the loader its libraries). */
				if ((!strcmp(filters[f], "renderer") || !strcmp(filters[f], "raw")) &&
				    !strcmp(situations[s], "fork-exec"))
					continue;
				if (!strcmp(filters[f], "groups") &&
				    (a > 0 || (strcmp(situations[s], "memfd") &&
					       strcmp(situations[s], "block-all") &&
					       strcmp(situations[s], "rescue-kept"))))
					continue;
				if (!strcmp(filters[f], "groups") && getuid() != 0) {
					printf("groups: not root, cannot set 4000 groups: skipped\n");
					continue;
				}
				cells++;
				if (!cell(self, preload, filters[f], actions[a], situations[s], false))
					bad++;
			}
		}
	}
	printf("%d cells, %d different\n", cells, bad);
	return bad ? 1 : 0;
}
