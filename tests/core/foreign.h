/* SPDX-License-Identifier: MIT */
/*
 * The FUSE peer of the tests of received files that no stat describes
 * (issue 37: core-foreignfuse, core-foreignmany).
 *
 * The parent (root) mounts tests/fs's nsb-fs-fuse without allow_other
 * (foreign_setup()), and runs each scenario: foreign_begin() starts the
 * receiver - this program again, as uid 65534, with `child SOCKET
 * [ARG]` - and opens the file; the test sends descriptors of it over the
 * socket; foreign_end() waits for the receiver (killed, SIGKILL, if it
 * has not ended after 60 seconds, scaled) and gives its status and
 * stderr.  The receiver's fstat of the file fails (EACCES: fuse's
 * per-process permission check on getattr), while mappings and reads of
 * it work - and so do its faults.
 */
#ifndef FOREIGN_H
#define FOREIGN_H

#include <grp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "core.h"
#include "../fs/fs.h"

#define FOREIGN_MOST 28		/* descriptors a message at the most (libwayland's) */

static char foreign_mnt[64], foreign_data[96];	/* the mount point, the file */
static pid_t foreign_server;

/* At exit (and on nsbt_fail/nsbt_skip): the server ended, unmounted. */
static void
foreign_unmount(void)
{
	if (foreign_server > 0) {
		/* SIGTERM makes libfuse unmount and exit. */
		kill(foreign_server, SIGTERM);
		for (int i = 0; i < 500 && waitpid(foreign_server, NULL, WNOHANG) == 0; i++)
			usleep(10000);
		kill(foreign_server, SIGKILL);
		waitpid(foreign_server, NULL, 0);
		foreign_server = 0;
	}
	if (foreign_mnt[0]) {
		if (umount2(foreign_mnt, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
			fprintf(stderr, "umount %s: %s\n", foreign_mnt, strerror(errno));
		rmdir(foreign_mnt);
		foreign_mnt[0] = '\0';
	}
}

/* The parent's start (argv: NAME NSB-FS-FUSE): the library, root and
 * /dev/fuse there (skips and says why if not), this program's path in
 * self, the FUSE file system mounted (/tmp/nsbt-NAME-XXXXXX) and its file
 * (FS_FUSE_PAGES pages) up. */
static void
foreign_setup(int argc, char **argv, const char *name, char *self, size_t selfsz)
{
	const char *fuse_prog = argv[1];
	struct stat st;
	double deadline;
	ssize_t n;

	if (argc != 2)
		nsbt_fail("usage: %s NSB-FS-FUSE", argv[0]);
	if (!nsbt_have_library())
		nsbt_skip("not linked with libnosigbus");
	if (geteuid() != 0)
		nsbt_skip("needs root: mounts a FUSE file system and hands its file to uid 65534");
	n = readlink("/proc/self/exe", self, selfsz - 1);
	NSBT_CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	atexit(foreign_unmount);
	if (access(fuse_prog, X_OK) != 0)
		nsbt_skip("nsb-fs-fuse was not built (%s: %s): libfuse3 missing "
			  "(Debian: libfuse3-dev fuse3)", fuse_prog, strerror(errno));
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		nsbt_skip("no /dev/fuse: %s", strerror(errno));
	snprintf(foreign_mnt, sizeof(foreign_mnt), "/tmp/nsbt-%s-XXXXXX", name);
	NSBT_CHECK(mkdtemp(foreign_mnt), "mkdtemp: %s", strerror(errno));
	snprintf(foreign_data, sizeof(foreign_data), "%s/%s", foreign_mnt, FS_FUSE_NAME);
	fflush(NULL);
	foreign_server = fork();
	NSBT_CHECK(foreign_server >= 0, "fork: %s", strerror(errno));
	if (foreign_server == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Not under the library: the server is not what is tested. */
		unsetenv("LD_PRELOAD");
		execl(fuse_prog, fuse_prog, foreign_mnt, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", fuse_prog, strerror(errno));
		_exit(127);
	}
	/* A readiness wait, not a timing test. */
	deadline = nsbt_now() + nsbt_scaled(20);
	while (stat(foreign_data, &st) != 0 || (size_t)st.st_size != FS_FUSE_PAGES * nsbt_page()) {
		int status;

		if (waitpid(foreign_server, &status, WNOHANG) == foreign_server) {
			foreign_server = 0;
			nsbt_skip("the FUSE file system did not mount (%s)",
				  nsbt_status_str(status));
		}
		NSBT_CHECK(nsbt_now() < deadline, "the FUSE file system did not come up");
		usleep(10000);
	}
}

/* One scenario's receiver and the parent's ends. */
struct foreign_run {
	int sock;	/* the parent's end of the socket pair */
	int err;	/* the receiver's stderr (a pipe) */
	int fd;		/* the file, open, for the test to send */
	pid_t pid;
};

/* Starts the receiver (socket type type; env: NAME=VALUE settings, the
 * library's others unset; arg: a second argument, or NULL) and opens the
 * file. */
static void
foreign_begin(struct foreign_run *r, int type, const char *self, const char *const *env,
	      const char *arg)
{
	int sv[2], ep[2];
	char num[16];

	NSBT_CHECK(socketpair(AF_UNIX, type, 0, sv) == 0, "socketpair: %s", strerror(errno));
	NSBT_CHECK(pipe2(ep, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fcntl(sv[0], F_SETFD, FD_CLOEXEC);
	fflush(NULL);
	r->pid = fork();
	NSBT_CHECK(r->pid >= 0, "fork: %s", strerror(errno));
	if (r->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(ep[1], STDERR_FILENO);
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
		snprintf(num, sizeof(num), "%d", sv[1]);
		execl(self, self, "child", num, arg, (char *)NULL);
		fprintf(stderr, "exec %s as uid 65534: %s\n", self, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	close(ep[1]);
	r->sock = sv[0];
	r->err = ep[0];
	r->fd = open(foreign_data, O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(r->fd >= 0, "open %s: %s", foreign_data, strerror(errno));
}

/* The file closed, the receiver waited for (the watchdog kills a hang):
 * its status, its stderr in err.  Skips if the receiver could fstat the
 * file (exit 77: not the case tested). */
static int
foreign_end(struct foreign_run *r, const char *name, char *err, size_t errsz)
{
	int status = 0;
	size_t got = 0;
	double deadline;
	ssize_t n;

	close(r->fd);
	deadline = nsbt_now() + nsbt_scaled(60);
	while (waitpid(r->pid, &status, WNOHANG) == 0) {
		if (nsbt_now() > deadline) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &status, 0);
			nsbt_fail("%s: the receiver hung (killed)", name);
		}
		usleep(10000);
	}
	fcntl(r->err, F_SETFL, O_NONBLOCK);
	while (got + 1 < errsz && (n = read(r->err, err + got, errsz - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(r->err);
	close(r->sock);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("%s: the received file's fstat worked as uid 65534", name);
	printf("%s: %s\n", name, nsbt_status_str(status));
	return status;
}

/* ---- the receiver (uid 65534) ------------------------------------------ */

/* Up to FOREIGN_MOST descriptors of one message into fds; how many. */
static int
foreign_receive(int s, int *fds, int room)
{
	char cbuf[CMSG_SPACE(FOREIGN_MOST * sizeof(int))] = { 0 }, byte;
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

/* The case tested: fstat of the received fd fails with EACCES.  False
 * (said on stdout) if it works here: the receiver then exits 77. */
static bool
foreign_unstattable(int fd)
{
	struct stat sb;

	if (fstat(fd, &sb) == 0) {
		printf("fstat of the received file works here (uid %d): not the case tested\n",
		       (int)getuid());
		return false;
	}
	NSBT_CHECK(errno == EACCES, "fstat of the received file: %s, expected EACCES",
		   strerror(errno));
	return true;
}

/* The receiver's counts at its end: 3 rescues, all 3 unverified. */
static void
foreign_expect_three(void)
{
	struct nosigbus_stats st = core_stats();

	printf("rescues %llu, unverified %llu\n", (unsigned long long)st.rescues,
	       (unsigned long long)st.unverified);
	NSBT_CHECK(st.rescues == 3 && st.unverified == 3,
		   "rescues %llu, unverified %llu: expected 3 and 3",
		   (unsigned long long)st.rescues, (unsigned long long)st.unverified);
}

#endif /* FOREIGN_H */
