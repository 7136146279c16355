/* SPDX-License-Identifier: MIT */
/*
 * sigsend - a SIGBUS sent by another process is never taken for a fault
 * (issue 7, item 6; SPEC §5).
 *
 * The target, under the preload, has a protected mapping of an empty file
 * that it never touches.  This process sends it SIGBUS in every way another
 * process can: kill (SI_USER), tgkill (SI_TKILL), sigqueue (SI_QUEUE), and
 * rt_sigqueueinfo, rt_tgsigqueueinfo and pidfd_send_signal with every
 * negative si_code the kernel lets through, with si_addr pointing into the
 * protected mapping.  After each, the target reports: its own handler must
 * have run with exactly the si_code and si_addr sent, the library must have
 * rescued nothing (rescues 0), and the page must still be the file's (not
 * replaced by a zero page).  The kernel refuses a si_code >= 0 (the fault
 * codes among them) and SI_TKILL from another process: that is checked too,
 * since the library relies on it.
 *
 * Then with SIG_DFL a sent SIGBUS must kill the target (as without the
 * library), and with SIG_IGN it must be ignored.
 */
#include <inttypes.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "nsbtest.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static size_t ps;

/* ---- the target (under the preload) -------------------------------------- */

static volatile sig_atomic_t got_count;
static volatile int got_code;
static void *volatile got_addr;

static void
on_bus(int sig, siginfo_t *si, void *uc)
{
	got_code = si->si_code;
	got_addr = si->si_addr;
	got_count++;
}

struct report {
	int count;
	int code;
	uintptr_t addr;
	uint64_t rescues;
	uint64_t failures;
	int file_backed;	/* the protected page is still the file's */
};

static bool
still_file(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	bool file = false;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long a, b, ino;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &a, &b, &ino) == 3 && addr >= a && addr < b)
			file = ino != 0;
	}
	if (f)
		fclose(f);
	return file;
}

static int
target(const char *mode, int cmd_fd, int ack_fd)
{
	int (*get_stats)(struct nosigbus_stats *, size_t);
	struct sigaction sa = { .sa_sigaction = on_bus, .sa_flags = SA_SIGINFO | SA_RESTART };
	int fd = nsbt_file(NSBT_MEMFD, 0);
	unsigned char *p;
	char cmd;

	NSBT_CHECK(nsbt_have_library(), "the library is not loaded");
	get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	p = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	if (strcmp(mode, "handler") == 0)
		sigaction(SIGBUS, &sa, NULL);
	else if (strcmp(mode, "ignore") == 0)
		signal(SIGBUS, SIG_IGN);
	NSBT_CHECK(write(ack_fd, &p, sizeof(p)) == (ssize_t)sizeof(p), "write");
	while (read(cmd_fd, &cmd, 1) == 1) {
		struct nosigbus_stats st;
		struct report r;

		get_stats(&st, sizeof(st));
		r.count = got_count;
		r.code = got_code;
		r.addr = (uintptr_t)got_addr;
		r.rescues = st.rescues;
		r.failures = st.failures;
		r.file_backed = still_file((uintptr_t)p + ps);
		NSBT_CHECK(write(ack_fd, &r, sizeof(r)) == (ssize_t)sizeof(r), "write");
		if (cmd == 'q')
			break;
	}
	return 0;
}

/* ---- the sender ----------------------------------------------------------- */

struct target_proc {
	pid_t pid;
	int cmd, ack;
	uintptr_t addr;		/* inside the protected mapping */
};

static void
start(struct target_proc *t, const char *mode)
{
	int cmd[2], ack[2];
	char a_cmd[16], a_ack[16];
	void *p;

	NSBT_CHECK(pipe(cmd) == 0 && pipe(ack) == 0, "pipe");
	snprintf(a_cmd, sizeof(a_cmd), "%d", cmd[0]);
	snprintf(a_ack, sizeof(a_ack), "%d", ack[1]);
	fflush(NULL);
	t->pid = fork();
	NSBT_CHECK(t->pid >= 0, "fork");
	if (t->pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		struct rlimit no_core = { 0, 0 };
		char ld[8192];

		setrlimit(RLIMIT_CORE, &no_core);
		snprintf(ld, sizeof(ld), "%s%s%s", old && *old ? old : "", old && *old ? ":" : "",
			 getenv("NSB_PRELOAD"));
		setenv("LD_PRELOAD", ld, 1);
		close(cmd[1]);
		close(ack[0]);
		execl("/proc/self/exe", "sigsend", "--target", mode, a_cmd, a_ack, (char *)NULL);
		_exit(127);
	}
	close(cmd[0]);
	close(ack[1]);
	t->cmd = cmd[1];
	t->ack = ack[0];
	NSBT_CHECK(read(t->ack, &p, sizeof(p)) == (ssize_t)sizeof(p), "the target did not start");
	t->addr = (uintptr_t)p + ps + 123;
}

static struct report
ask(struct target_proc *t, char cmd)
{
	struct report r;

	NSBT_CHECK(write(t->cmd, &cmd, 1) == 1, "write");
	NSBT_CHECK(read(t->ack, &r, sizeof(r)) == (ssize_t)sizeof(r), "the target did not answer");
	return r;
}

static int
finish(struct target_proc *t)
{
	int status;

	close(t->cmd);
	close(t->ack);
	while (waitpid(t->pid, &status, 0) < 0)
		NSBT_CHECK(errno == EINTR, "waitpid");
	return status;
}

static siginfo_t
info(int code, uintptr_t addr)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = SIGBUS;
	si.si_code = code;
	si.si_addr = (void *)addr;
	return si;
}

enum how { KILL, TGKILL, SIGQUEUE, QUEUEINFO, TGQUEUEINFO, PIDFD };
static const char *const how_names[] = {
	"kill", "tgkill", "sigqueue", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal",
};

/* Sends one SIGBUS; returns 0 or the errno of the refusal. */
static int
send_bus(struct target_proc *t, enum how how, int code)
{
	siginfo_t si = info(code, t->addr);
	union sigval v = { .sival_ptr = (void *)t->addr };
	long r = 0;
	int pidfd;

	switch (how) {
	case KILL:
		r = kill(t->pid, SIGBUS);
		break;
	case TGKILL:
		r = syscall(SYS_tgkill, t->pid, t->pid, SIGBUS);
		break;
	case SIGQUEUE:
		r = sigqueue(t->pid, SIGBUS, v);
		break;
	case QUEUEINFO:
		r = syscall(SYS_rt_sigqueueinfo, t->pid, SIGBUS, &si);
		break;
	case TGQUEUEINFO:
		r = syscall(SYS_rt_tgsigqueueinfo, t->pid, t->pid, SIGBUS, &si);
		break;
	case PIDFD:
		pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
		if (pidfd < 0)
			return errno == ENOSYS ? ENOSYS : errno;
		r = syscall(SYS_pidfd_send_signal, pidfd, SIGBUS, &si, 0);
		if (r < 0 && errno == ENOSYS)
			r = -1;
		close(pidfd);
		break;
	}
	return r < 0 ? errno : 0;
}

int
main(int argc, char **argv)
{
	/* Every negative code but SI_TKILL, which the kernel keeps for tgkill. */
	static const int negative[] = { SI_QUEUE, SI_TIMER, SI_MESGQ, SI_ASYNCIO, SI_SIGIO,
					-7 /* SI_DETHREAD */, SI_ASYNCNL, -100, -4096, INT_MIN };
	/* The fault codes and the rest of the codes a sender cannot use. */
	static const int refused[] = { SI_USER, BUS_ADRALN, BUS_ADRERR, BUS_OBJERR, BUS_MCEERR_AR,
				       BUS_MCEERR_AO, SI_KERNEL, 1000, INT_MAX, SI_TKILL };
	struct target_proc t;
	struct report r;
	int sent = 0, refusals = 0, expected = 0, status;

	ps = nsbt_page();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && strcmp(argv[1], "--target") == 0)
		return target(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");

	/* The program's own handler sees every sent SIGBUS, as sent. */
	start(&t, "handler");
	for (int how = KILL; how <= PIDFD; how++) {
		bool with_info = how == QUEUEINFO || how == TGQUEUEINFO || how == PIDFD;
		size_t ncodes = with_info ? sizeof(negative) / sizeof(negative[0]) : 1;

		for (size_t i = 0; i < ncodes; i++) {
			int code = with_info ? negative[i] : how == KILL ? SI_USER :
				   how == TGKILL ? SI_TKILL : SI_QUEUE;
			int err = send_bus(&t, (enum how)how, code);

			if (err == ENOSYS) {
				printf("skip: %s is not available\n", how_names[how]);
				break;
			}
			NSBT_CHECK(err == 0, "%s(SIGBUS, si_code %d): %s", how_names[how], code, strerror(err));
			sent++;
			expected++;
			r = ask(&t, 'c');
			NSBT_CHECK(r.count == expected, "%s si_code %d: the program's handler ran %d times, "
				   "expected %d", how_names[how], code, r.count, expected);
			NSBT_CHECK(r.code == code, "%s: the handler saw si_code %d, not %d", how_names[how],
				   r.code, code);
			NSBT_CHECK(!with_info || r.addr == t.addr, "%s: the handler saw si_addr 0x%lx, not 0x%lx",
				   how_names[how], (unsigned long)r.addr, (unsigned long)t.addr);
			NSBT_CHECK(r.rescues == 0 && r.failures == 0, "%s si_code %d: %" PRIu64 " rescues, %"
				   PRIu64 " failures: a sent signal was taken for a fault", how_names[how], code,
				   r.rescues, r.failures);
			NSBT_CHECK(r.file_backed, "%s si_code %d: the protected page was replaced",
				   how_names[how], code);
		}
	}
	/* What the kernel refuses from another process (SPEC §5 relies on it). */
	for (int how = QUEUEINFO; how <= PIDFD; how++) {
		for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
			int err = send_bus(&t, (enum how)how, refused[i]);

			if (err == ENOSYS)
				break;
			NSBT_CHECK(err == EPERM, "%s(SIGBUS, si_code %d) from another process: %s, "
				   "expected EPERM", how_names[how], refused[i],
				   err ? strerror(err) : "accepted");
			refusals++;
		}
	}
	r = ask(&t, 'q');
	NSBT_CHECK(r.count == expected && r.rescues == 0, "after the refused ones: %d signals, %" PRIu64
		   " rescues", r.count, r.rescues);
	status = finish(&t);
	nsbt_expect_exit(status, 0, "target with a SIGBUS handler");
	printf("ok: sigsend: %d SIGBUS sent (kill, tgkill, sigqueue, and %zu negative si_codes with "
	       "si_addr in the protected mapping through 3 calls): each reached the program's handler "
	       "as sent, none rescued\n", sent, sizeof(negative) / sizeof(negative[0]));
	printf("ok: sigsend: %d sends with si_code >= 0 or SI_TKILL refused with EPERM\n", refusals);

	/* Default action: dies, as without the library. */
	for (int how = KILL; how <= TGQUEUEINFO; how++) {
		start(&t, "default");
		NSBT_CHECK(send_bus(&t, (enum how)how, SI_QUEUE) == 0, "%s", how_names[how]);
		status = finish(&t);
		NSBT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
			   "SIG_DFL, SIGBUS by %s: the target %s, expected death by SIGBUS",
			   how_names[how], nsbt_status_str(status));
		sent++;
	}
	printf("ok: sigsend: with SIG_DFL a sent SIGBUS kills (kill, tgkill, sigqueue, rt_sigqueueinfo, "
	       "rt_tgsigqueueinfo)\n");

	/* SIG_IGN: ignored, nothing rescued. */
	start(&t, "ignore");
	for (int how = KILL; how <= TGQUEUEINFO; how++, sent++)
		NSBT_CHECK(send_bus(&t, (enum how)how, SI_QUEUE) == 0, "%s", how_names[how]);
	r = ask(&t, 'q');
	NSBT_CHECK(r.rescues == 0 && r.file_backed, "SIG_IGN: %" PRIu64 " rescues, page %s", r.rescues,
		   r.file_backed ? "intact" : "replaced");
	nsbt_expect_exit(finish(&t), 0, "target ignoring SIGBUS");
	printf("sigsend: %d signals sent, %d refusals checked\n", sent, refusals);
	return 0;
}
