/* SPDX-License-Identifier: MIT */
/*
 * A file another process handed over that no stat describes (issue 37).
 *
 * A FUSE file system mounted by root without allow_other refuses every
 * fstat and statx of another user's (fuse's per-process permission check
 * on getattr: EACCES), while a mapping and reads through a descriptor
 * already open work - and so do its faults.  This test mounts
 * tests/fs's nsb-fs-fuse (its file: FS_FUSE_PAGES pages, reads of pages
 * [FS_FUSE_BAD_FIRST, FS_FUSE_BAD_END) fail with EIO), and hands the
 * file's descriptor over a Unix socket (SCM_RIGHTS) to a child that drops
 * to uid 65534 and executes this program again (the library, linked,
 * reads its settings there).  The child maps more pages than the file
 * has, reads page 0, a page that fails, a page past the end and page 0
 * again, and the failing page in a second (private) mapping of the same
 * descriptor.  The peer's file: under the default (NOSIGBUS_ERRORS=peer) and
 * zero both faults read zeros, counted unverified (the size cannot be
 * learnt), the log names the sender; under pass the fault goes to the
 * program (SIGBUS), as without the library.  As under a seccomp filter
 * (NSB_TEST_SECCOMP=filtered: fstat alone) as by default.  Before the fix the default
 * died of SIGBUS too: the library protected nothing of such a file.
 *
 * Needs root (to mount, and to become another user) and /dev/fuse; skips
 * and says why without them.  Each scenario in a child, killed (SIGKILL)
 * if it has not ended after 60 seconds (scaled); its stderr is checked.
 *
 * Usage: core-foreignfuse NSB-FS-FUSE  (the parent)
 *        core-foreignfuse child SOCKET  (the receiver, re-executed)
 */
#include <grp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "core.h"
#include "../fs/fs.h"

#define LEN_PAGES (FS_FUSE_PAGES + 16)	/* the mapping: past the end too */
#define BAD_PAGE (FS_FUSE_BAD_FIRST + 8)
#define PAST_PAGE (FS_FUSE_PAGES + 6)
#define SENDER "nsb-fuse-peer"

static size_t ps;
static char mnt[64], data[96];
static pid_t server;

static void
unmount_all(void)
{
	if (server > 0) {
		/* SIGTERM makes libfuse unmount and exit. */
		kill(server, SIGTERM);
		for (int i = 0; i < 500 && waitpid(server, NULL, WNOHANG) == 0; i++)
			usleep(10000);
		kill(server, SIGKILL);
		waitpid(server, NULL, 0);
		server = 0;
	}
	if (mnt[0]) {
		if (umount2(mnt, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
			fprintf(stderr, "umount %s: %s\n", mnt, strerror(errno));
		rmdir(mnt);
		mnt[0] = '\0';
	}
}

/* ---- the receiver (uid 65534) ------------------------------------------ */

static int
receive(int s)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int fd;

	NSBT_CHECK(recvmsg(s, &msg, MSG_CMSG_CLOEXEC) == 1, "recvmsg: %s", strerror(errno));
	c = CMSG_FIRSTHDR(&msg);
	NSBT_CHECK(c && c->cmsg_type == SCM_RIGHTS, "no descriptor arrived");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static void
expect_page(const volatile unsigned char *p, size_t page, unsigned char v)
{
	printf("reading page %zu\n", page);
	fflush(stdout);
	for (size_t i = 0; i < ps; i++)
		NSBT_CHECK(p[page * ps + i] == v, "page %zu byte %zu is %#x, expected %#x", page,
			   i, p[page * ps + i], v);
	printf("page %zu reads %02x*%zu\n", page, v, ps);
}

static int
receiver(int s)
{
	const volatile unsigned char *p, *q;
	struct nosigbus_stats st;
	struct stat sb;
	int fd;

	core_no_core();
	fd = receive(s);
	if (fstat(fd, &sb) == 0) {
		printf("fstat of the received file works here (uid %d): not the case tested\n",
		       (int)getuid());
		return 77;
	}
	NSBT_CHECK(errno == EACCES, "fstat of the received file: %s, expected EACCES",
		   strerror(errno));
	p = core_map(NULL, LEN_PAGES * ps, PROT_READ, MAP_SHARED, fd, 0);
	/* The same descriptor mapped again is the peer's file too. */
	q = core_map(NULL, LEN_PAGES * ps, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);	/* as a compositor does, once mapped */
	expect_page(p, 0, fs_tag(0));
	expect_page(p, BAD_PAGE, 0);
	expect_page(p, PAST_PAGE, 0);
	expect_page(p, 0, fs_tag(0));
	expect_page(q, BAD_PAGE, 0);
	st = core_stats();
	printf("rescues %llu, unverified %llu\n", (unsigned long long)st.rescues,
	       (unsigned long long)st.unverified);
	NSBT_CHECK(st.rescues == 3 && st.unverified == 3,
		   "rescues %llu, unverified %llu: expected 3 and 3",
		   (unsigned long long)st.rescues, (unsigned long long)st.unverified);
	return 0;
}

/* ---- the parent (root) -------------------------------------------------- */

static void
mount_fuse(const char *fuse_prog)
{
	struct stat st;
	double deadline;

	if (access(fuse_prog, X_OK) != 0)
		nsbt_skip("nsb-fs-fuse was not built (%s: %s): libfuse3 missing "
			  "(Debian: libfuse3-dev fuse3)", fuse_prog, strerror(errno));
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		nsbt_skip("no /dev/fuse: %s", strerror(errno));
	snprintf(mnt, sizeof(mnt), "/tmp/nsbt-foreignfuse-XXXXXX");
	NSBT_CHECK(mkdtemp(mnt), "mkdtemp: %s", strerror(errno));
	snprintf(data, sizeof(data), "%s/%s", mnt, FS_FUSE_NAME);
	fflush(NULL);
	server = fork();
	NSBT_CHECK(server >= 0, "fork: %s", strerror(errno));
	if (server == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Not under the library: the server is not what is tested. */
		unsetenv("LD_PRELOAD");
		execl(fuse_prog, fuse_prog, mnt, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", fuse_prog, strerror(errno));
		_exit(127);
	}
	/* A readiness wait, not a timing test. */
	deadline = nsbt_now() + nsbt_scaled(20);
	while (stat(data, &st) != 0 || (size_t)st.st_size != FS_FUSE_PAGES * ps) {
		int status;

		if (waitpid(server, &status, WNOHANG) == server) {
			server = 0;
			nsbt_skip("the FUSE file system did not mount (%s)",
				  nsbt_status_str(status));
		}
		NSBT_CHECK(nsbt_now() < deadline, "the FUSE file system did not come up");
		usleep(10000);
	}
}

/* The scenario's child: the receiver, as uid 65534, with env set. */
static pid_t
start_receiver(const char *self, int s, int errfd, const char *const *env)
{
	char num[16];
	pid_t pid;

	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	dup2(errfd, STDERR_FILENO);
	unsetenv("NOSIGBUS_ERRORS");
	unsetenv("NOSIGBUS_LOG");
	unsetenv("NSB_TEST_SECCOMP");
	for (int i = 0; env[i]; i++)
		putenv((char *)env[i]);
	if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
	    setresuid(65534, 65534, 65534) != 0) {
		fprintf(stderr, "dropping to uid 65534: %s\n", strerror(errno));
		_exit(126);
	}
	snprintf(num, sizeof(num), "%d", s);
	execl(self, self, "child", num, (char *)NULL);
	fprintf(stderr, "exec %s as uid 65534: %s\n", self, strerror(errno));
	_exit(127);
}

static void
send_fd(int s, int fd)
{
	NSBT_CHECK(nsbt_send_fd(s, fd, 'F', 0) == 1, "sendmsg: %s", strerror(errno));
}

/* Runs one scenario; its status, and its stderr in err. */
static int
scenario(const char *self, const char *name, const char *const *env, char *err, size_t errsz)
{
	int sv[2], ep[2], fd, status = 0;
	size_t got = 0;
	double deadline;
	ssize_t n;
	pid_t pid;

	NSBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair: %s",
		   strerror(errno));
	NSBT_CHECK(pipe2(ep, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fcntl(sv[0], F_SETFD, FD_CLOEXEC);
	pid = start_receiver(self, sv[1], ep[1], env);
	close(sv[1]);
	close(ep[1]);
	fd = open(data, O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(fd >= 0, "open %s: %s", data, strerror(errno));
	send_fd(sv[0], fd);
	close(fd);
	/* The watchdog: a receiver that hangs is killed. */
	deadline = nsbt_now() + nsbt_scaled(60);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (nsbt_now() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			nsbt_fail("%s: the receiver hung (killed)", name);
		}
		usleep(10000);
	}
	fcntl(ep[0], F_SETFL, O_NONBLOCK);
	while (got + 1 < errsz && (n = read(ep[0], err + got, errsz - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(ep[0]);
	close(sv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("%s: the received file's fstat worked as uid 65534", name);
	printf("%s: %s\n", name, nsbt_status_str(status));
	return status;
}

int
main(int argc, char **argv)
{
	static const char *const dflt[] = { NULL };
	static const char *const peer[] = { "NOSIGBUS_ERRORS=peer", NULL };
	static const char *const zero[] = { "NOSIGBUS_ERRORS=zero", NULL };
	static const char *const pass[] = { "NOSIGBUS_ERRORS=pass", NULL };
	static const char *const logged[] = { "NOSIGBUS_LOG=1", NULL };
	static const char *const filtered[] = { "NSB_TEST_SECCOMP=filtered", NULL };
	char err[8192], self[4096];
	ssize_t n;
	int status;

	ps = nsbt_page();
	if (argc == 3 && !strcmp(argv[1], "child"))
		return receiver(atoi(argv[2]));
	if (argc != 2)
		nsbt_fail("usage: %s NSB-FS-FUSE", argv[0]);
	if (!nsbt_have_library())
		nsbt_skip("not linked with libnosigbus");
	if (geteuid() != 0)
		nsbt_skip("needs root: mounts a FUSE file system and hands its file to uid 65534");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	NSBT_CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	/* The sender the log names (SO_PEERCRED of a socket pair: its maker). */
	prctl(PR_SET_NAME, SENDER);
	atexit(unmount_all);
	mount_fuse(argv[1]);

	status = scenario(self, "default", dflt, err, sizeof(err));
	nsbt_expect_exit(status, 0, "default: a received FUSE file no stat describes");
	NSBT_CHECK(!err[0], "default: stderr not empty:\n%s", err);

	status = scenario(self, "NOSIGBUS_ERRORS=peer", peer, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NOSIGBUS_ERRORS=peer");
	NSBT_CHECK(!err[0], "peer: stderr not empty:\n%s", err);

	status = scenario(self, "NOSIGBUS_ERRORS=zero", zero, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NOSIGBUS_ERRORS=zero");
	NSBT_CHECK(!err[0], "zero: stderr not empty:\n%s", err);

	/* As under a seccomp filter (fstat alone, sandbox.c). */
	status = scenario(self, "NSB_TEST_SECCOMP=filtered", filtered, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NSB_TEST_SECCOMP=filtered");
	NSBT_CHECK(!err[0], "filtered: stderr not empty:\n%s", err);

	/* Pass: every error to the program; without the size every fault
	 * may be one, so the first (the failing page) kills it. */
	status = scenario(self, "NOSIGBUS_ERRORS=pass", pass, err, sizeof(err));
	nsbt_expect_signal(status, SIGBUS, "NOSIGBUS_ERRORS=pass");
	NSBT_CHECK(!err[0], "pass: stderr not empty:\n%s", err);

	status = scenario(self, "NOSIGBUS_LOG=1", logged, err, sizeof(err));
	nsbt_expect_exit(status, 0, "NOSIGBUS_LOG=1");
	NSBT_CHECK(strstr(err, nsbt_fmt("in %s from " SENDER "[%d]", data, (int)getpid())) &&
		   strstr(err, "unverified)"),
		   "NOSIGBUS_LOG=1: no rescue line naming the file, the sender and "
		   "unverified:\n%s", err);
	printf("ok: the log: %s", err);
	return 0;
}
