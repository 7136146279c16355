/* SPDX-License-Identifier: MIT */
/*
 * Many received files that no stat describes, in one message (a hostile
 * peer; issue 37's FUSE file, see core-foreignfuse).
 *
 * The peer mounts a FUSE file system of its own without allow_other: the
 * receiver's fstat of its file fails (EACCES), and the only evidence that
 * a descriptor is the peer's is that it arrived over SCM_RIGHTS
 * (received.c keeps its number).  libwayland reads up to 28 descriptors
 * with one recvmsg, and a compositor maps each pool when it dispatches
 * the request that brought it, after the whole batch arrived.  The peer
 * sends COUNT descriptors of its file in one message; the receiver maps
 * the first, the middle and the last, then reads a page whose read fails
 * in each: every one is rescued (zeros, unverified).  A second scenario
 * sends them one message each before the receiver maps any (a peer
 * that writes faster than the compositor dispatches).  Before the fix
 * the library kept the numbers of the last 8 such descriptors only: the
 * first mapping was not protected, and its fault killed the receiver
 * (SIGBUS).
 *
 * Needs root (to mount, and to become another user) and /dev/fuse; skips
 * and says why without them.  Each scenario in a child, killed (SIGKILL)
 * if it has not ended after 60 seconds (scaled); its stderr is checked.
 *
 * Usage: core-foreignmany NSB-FS-FUSE  (the parent)
 *        core-foreignmany child SOCKET MESSAGES  (the receiver, re-executed)
 */
#include <grp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "core.h"
#include "../fs/fs.h"

#define COUNT 28	/* libwayland's most per message */
#define LEN_PAGES FS_FUSE_PAGES
#define BAD_PAGE (FS_FUSE_BAD_FIRST + 1)

static size_t ps;
static char mnt[64], data[96];
static pid_t server;

static void
unmount_all(void)
{
	if (server > 0) {
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

/* Up to COUNT descriptors of one message into fds; how many. */
static int
receive(int s, int *fds, int room)
{
	char cbuf[CMSG_SPACE(COUNT * sizeof(int))] = { 0 }, byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int n;

	NSBT_CHECK(recvmsg(s, &msg, MSG_CMSG_CLOEXEC) == 1, "recvmsg: %s", strerror(errno));
	NSBT_CHECK(!(msg.msg_flags & MSG_CTRUNC), "control data truncated");
	c = CMSG_FIRSTHDR(&msg);
	NSBT_CHECK(c && c->cmsg_type == SCM_RIGHTS, "no descriptor arrived");
	n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	NSBT_CHECK(n <= room, "%d descriptors, room for %d", n, room);
	memcpy(fds, CMSG_DATA(c), (size_t)n * sizeof(int));
	return n;
}

static int
receiver(int s, int messages)
{
	static const int which[] = { 0, COUNT / 2, COUNT - 1 };
	const volatile unsigned char *p[3];
	struct nosigbus_stats st;
	struct stat sb;
	int fds[COUNT], n = 0;

	core_no_core();
	for (int m = 0; m < messages; m++)
		n += receive(s, fds + n, COUNT - n);
	NSBT_CHECK(n == COUNT, "%d descriptors arrived, expected %d", n, COUNT);
	if (fstat(fds[0], &sb) == 0) {
		printf("fstat of the received file works here (uid %d): not the case tested\n",
		       (int)getuid());
		return 77;
	}
	NSBT_CHECK(errno == EACCES, "fstat of the received file: %s, expected EACCES",
		   strerror(errno));
	/* Mapped in the order the requests are dispatched, each descriptor
	 * closed once mapped, as a compositor does. */
	for (int i = 0; i < 3; i++) {
		p[i] = core_map(NULL, LEN_PAGES * ps, PROT_READ, MAP_SHARED, fds[which[i]], 0);
		close(fds[which[i]]);
	}
	for (int i = 0; i < 3; i++) {
		printf("descriptor %d of %d: reading page %d\n", which[i] + 1, COUNT, BAD_PAGE);
		fflush(stdout);
		for (size_t b = 0; b < ps; b++)
			NSBT_CHECK(p[i][BAD_PAGE * ps + b] == 0, "byte %zu is %#x, expected 0", b,
				   p[i][BAD_PAGE * ps + b]);
		NSBT_CHECK(p[i][0] == fs_tag(0), "page 0 reads %#x", p[i][0]);
	}
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
	snprintf(mnt, sizeof(mnt), "/tmp/nsbt-foreignmany-XXXXXX");
	NSBT_CHECK(mkdtemp(mnt), "mkdtemp: %s", strerror(errno));
	snprintf(data, sizeof(data), "%s/%s", mnt, FS_FUSE_NAME);
	fflush(NULL);
	server = fork();
	NSBT_CHECK(server >= 0, "fork: %s", strerror(errno));
	if (server == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
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

static pid_t
start_receiver(const char *self, int s, int errfd, int messages)
{
	char num[16], msgs[16];
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
	if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
	    setresuid(65534, 65534, 65534) != 0) {
		fprintf(stderr, "dropping to uid 65534: %s\n", strerror(errno));
		_exit(126);
	}
	snprintf(num, sizeof(num), "%d", s);
	snprintf(msgs, sizeof(msgs), "%d", messages);
	execl(self, self, "child", num, msgs, (char *)NULL);
	fprintf(stderr, "exec %s as uid 65534: %s\n", self, strerror(errno));
	_exit(127);
}

/* n copies of fd in one message. */
static void
send_fds(int s, int fd, int n)
{
	char cbuf[CMSG_SPACE(COUNT * sizeof(int))] = { 0 }, byte = 'F';
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	for (int i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
	NSBT_CHECK(sendmsg(s, &msg, 0) == 1, "sendmsg: %s", strerror(errno));
}

static void
scenario(const char *self, const char *name, int messages)
{
	int sv[2], ep[2], fd, status = 0;
	char err[8192];
	size_t got = 0;
	double deadline;
	ssize_t n;
	pid_t pid;

	/* SOCK_SEQPACKET: one message a recvmsg, as sent. */
	NSBT_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair: %s",
		   strerror(errno));
	NSBT_CHECK(pipe2(ep, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fcntl(sv[0], F_SETFD, FD_CLOEXEC);
	pid = start_receiver(self, sv[1], ep[1], messages);
	close(sv[1]);
	close(ep[1]);
	fd = open(data, O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(fd >= 0, "open %s: %s", data, strerror(errno));
	for (int m = 0; m < messages; m++)
		send_fds(sv[0], fd, COUNT / messages);
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
	while (got + 1 < sizeof(err) && (n = read(ep[0], err + got, sizeof(err) - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(ep[0]);
	close(sv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("%s: the received file's fstat worked as uid 65534", name);
	printf("%s: %s\n", name, nsbt_status_str(status));
	nsbt_expect_exit(status, 0, nsbt_fmt("%s: every received FUSE descriptor protected", name));
	NSBT_CHECK(!err[0], "%s: stderr not empty:\n%s", name, err);
}

int
main(int argc, char **argv)
{
	char self[4096];
	ssize_t n;

	ps = nsbt_page();
	if (argc == 4 && !strcmp(argv[1], "child"))
		return receiver(atoi(argv[2]), atoi(argv[3]));
	if (argc != 2)
		nsbt_fail("usage: %s NSB-FS-FUSE", argv[0]);
	if (!nsbt_have_library())
		nsbt_skip("not linked with libnosigbus");
	if (geteuid() != 0)
		nsbt_skip("needs root: mounts a FUSE file system and hands its file to uid 65534");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	NSBT_CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	atexit(unmount_all);
	mount_fuse(argv[1]);
	scenario(self, "one message", 1);
	scenario(self, "one a message", COUNT);
	return 0;
}
