/* SPDX-License-Identifier: MIT */
/*
 * Files another process hands over (issue 22).  A sender process connects
 * to the receiver over a Unix socket and passes a descriptor of a file on
 * disk (SCM_RIGHTS), as a hostile Wayland client passes its pool; the
 * receiver maps it shared and closes its descriptor, the sender shrinks the
 * file, and the receiver reads past the new end.
 *
 * Under the default policy (shm) the receiver is rescued, whatever the
 * file system: by recvmsg and by recvmmsg, through a dup of the received
 * descriptor, truncated to 0 and to 12 bytes (the file's bytes stay
 * inside the size).  A disk file the receiver opened itself keeps the
 * file-system rule and dies of SIGBUS, as without the library; so does a
 * received one under the flag policy.  Each scenario runs in a child and
 * is judged by how it ended; the library must print nothing (stderr is
 * captured and checked).  With NOSIGBUS_LOG=1 the rescue line names the
 * sender: its pid and command name.
 *
 * A file handed over again counts as new: the sender hands over the file,
 * then 200 others, then the file again and 200 more; the library keeps
 * the last 256 files received, and the file must be among them (issue 37:
 * the soak's FUSE file, handed over again and again, was forgotten after
 * 256 others and its mapping left unprotected).
 *
 * The scenarios that depend on NOSIGBUS_POLICY or NOSIGBUS_LOG re-execute
 * this program with the variable set (the library reads them at start).
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core.h"

static size_t ps;

/* Files the sender hands over between the two of the same file, and
 * after: each count under the library's 256, both together over it. */
#define AGAIN_OTHERS 200

enum via { VIA_RECVMSG, VIA_RECVMMSG, VIA_DUP };

/* A listening abstract socket, unique to this process. */
static int
listener(struct sockaddr_un *addr, socklen_t *len)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	NSBT_CHECK(s >= 0, "socket: %s", strerror(errno));
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "nsbtest-received-%d",
		 (int)getpid());
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   strlen(addr->sun_path + 1));
	NSBT_CHECK(bind(s, (struct sockaddr *)addr, *len) == 0, "bind: %s", strerror(errno));
	NSBT_CHECK(listen(s, 1) == 0, "listen: %s", strerror(errno));
	return s;
}

/*
 * The sender: a child named "nsb-sender" that connects, sends fd and one
 * byte, then waits for the size to truncate trunc_fd's file to (a 4-byte
 * message), truncates, answers, and exits.
 */
static pid_t
start_sender(const struct sockaddr_un *addr, socklen_t len, int fd, int trunc_fd, bool again)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
		char byte = 'F';
		struct iovec iov = { &byte, 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		uint32_t size;
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		prctl(PR_SET_NAME, "nsb-sender");
		if (s < 0 || connect(s, (const struct sockaddr *)addr, len) != 0)
			_exit(10);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
		if (sendmsg(s, &msg, 0) != 1)
			_exit(11);
		/* Then others, the same file again, and others. */
		for (int k = 0; again && k < 2 * AGAIN_OTHERS + 1; k++) {
			int other = k == AGAIN_OTHERS ? fd : nsbt_file(NSBT_DISK, ps);

			if (nsbt_send_fd(s, other, 'F', 0) != 1)
				_exit(15);
			if (other != fd)
				close(other);
		}
		if (read(s, &size, sizeof(size)) != sizeof(size))
			_exit(12);
		if (ftruncate(trunc_fd, (off_t)size) != 0)
			_exit(13);
		if (write(s, &byte, 1) != 1)
			_exit(14);
		_exit(0);
	}
	return pid;
}

/* Receives one descriptor on the connection c, by recvmsg or recvmmsg. */
static int
receive_fd(int c, enum via via)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	char byte;
	struct iovec iov = { &byte, 1 };
	struct mmsghdr mm = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1,
					   .msg_control = cbuf,
					   .msg_controllen = sizeof(cbuf) } };
	struct cmsghdr *cm;
	int fd;

	if (via == VIA_RECVMMSG) {
		NSBT_CHECK(recvmmsg(c, &mm, 1, MSG_CMSG_CLOEXEC, NULL) == 1, "recvmmsg: %s",
			   strerror(errno));
	} else {
		errno = 12345;
		NSBT_CHECK(recvmsg(c, &mm.msg_hdr, MSG_CMSG_CLOEXEC) == 1, "recvmsg: %s",
			   strerror(errno));
		/* The library's work after the call leaves errno alone. */
		NSBT_CHECK(errno == 12345, "recvmsg changed errno to %d", errno);
	}
	cm = CMSG_FIRSTHDR(&mm.msg_hdr);
	NSBT_CHECK(cm && cm->cmsg_type == SCM_RIGHTS, "no descriptor arrived");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static void
truncate_by_sender(int c, pid_t sender, uint32_t size)
{
	char byte;
	int status;

	NSBT_CHECK(write(c, &size, sizeof(size)) == sizeof(size), "write: %s", strerror(errno));
	NSBT_CHECK(read(c, &byte, 1) == 1, "the sender did not answer");
	NSBT_CHECK(waitpid(sender, &status, 0) == sender, "waitpid: %s", strerror(errno));
	NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sender: %s",
		   nsbt_status_str(status));
}

struct scenario {
	enum via via;
	bool received;		/* false: the receiver opens the file itself */
	uint32_t truncate_to;
	bool reused;		/* the received number is made to name the
				 * receiver's own file with a raw dup3 (the
				 * library does not see it) before the mmap */
	bool again;		/* the file again, between 2 * AGAIN_OTHERS
				 * others (above) */
};

/*
 * The receiver: maps 4 pages of the file shared, closes every descriptor
 * of its own, lets the sender truncate, reads every page.  Exits 0 when
 * it read the file's bytes inside the size and zeros past it.
 */
static void
receiver(void *arg)
{
	const struct scenario *sc = arg;
	struct sockaddr_un addr;
	socklen_t len;
	int l = listener(&addr, &len), c, fd, own, decoy = -1;
	pid_t sender;
	volatile char *p;

	own = nsbt_file(NSBT_DISK, 4 * ps);
	/* Not received: the sender hands over another file, and shrinks ours. */
	if (!sc->received)
		decoy = nsbt_file(NSBT_DISK, ps);
	sender = start_sender(&addr, len, sc->received ? own : decoy, own, sc->again);
	if (decoy >= 0)
		close(decoy);
	c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	NSBT_CHECK(c >= 0, "accept: %s", strerror(errno));
	fd = receive_fd(c, sc->via);
	for (int k = 0; sc->again && k < 2 * AGAIN_OTHERS + 1; k++) {
		int other = receive_fd(c, sc->via);

		if (k == AGAIN_OTHERS) {
			close(fd);
			fd = other;	/* the same file, the second time */
		} else {
			close(other);
		}
	}
	if (sc->via == VIA_DUP) {
		int d = dup(fd);

		NSBT_CHECK(d >= 0, "dup: %s", strerror(errno));
		close(fd);
		fd = d;
	}
	if (sc->reused)
		NSBT_CHECK(syscall(SYS_dup3, own, fd, O_CLOEXEC) == fd, "dup3: %s", strerror(errno));
	p = core_map(NULL, 4 * ps, PROT_READ, MAP_SHARED, sc->received || sc->reused ? fd : own, 0);
	close(fd);
	close(own);
	core_expect_pattern((const char *)p, 0, 4 * ps, "before the truncation");
	truncate_by_sender(c, sender, sc->truncate_to);
	core_expect_pattern((const char *)p, 0, sc->truncate_to, "inside the new size");
	core_expect_bytes((const char *)p + sc->truncate_to, 0, 4 * ps - sc->truncate_to,
			  "past the new end");
}

/* Runs the receiver with stderr captured; *err gets what it printed. */
static int
run_captured(const struct scenario *sc, char *err, size_t errlen)
{
	int pfd[2], status;
	pid_t pid;
	ssize_t n;
	size_t got = 0;

	NSBT_CHECK(pipe2(pfd, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(pfd[1], STDERR_FILENO);
		receiver((void *)sc);
		_exit(0);
	}
	close(pfd[1]);
	while (got + 1 < errlen && (n = read(pfd[0], err + got, errlen - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(pfd[0]);
	NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	return status;
}

static void
expect(const char *what, const struct scenario *sc, int sig, const char *in_stderr)
{
	char err[4096];
	int status = run_captured(sc, err, sizeof(err));

	if (err[0] && (!in_stderr || !strstr(err, in_stderr)))
		nsbt_fail("%s: unexpected stderr:\n%s", what, err);
	if (in_stderr && !strstr(err, in_stderr))
		nsbt_fail("%s: stderr lacks \"%s\":\n%s", what, in_stderr, err);
	if (sig)
		nsbt_expect_signal(status, sig, what);
	else {
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fprintf(stderr, "%s", err);
		nsbt_expect_exit(status, 0, what);
	}
}

static const char *const policy_flag[] = { "NOSIGBUS_POLICY=flag", NULL };
static const char *const log_on[] = { "NOSIGBUS_LOG=1", NULL };

int
main(int argc, char **argv)
{
	static const struct scenario by_recvmsg = { VIA_RECVMSG, true, 0 };
	static const struct scenario by_recvmmsg = { VIA_RECVMMSG, true, 0 };
	static const struct scenario by_dup = { VIA_DUP, true, 12 };
	static const struct scenario mid_page = { VIA_RECVMSG, true, 12 };
	static const struct scenario own_file = { VIA_RECVMSG, false, 0 };
	static const struct scenario reused = { VIA_RECVMSG, false, 0, true };
	static const struct scenario again = { VIA_RECVMSG, true, 0, false, true };

	ps = nsbt_page();
	if (!nsbt_have_library())
		nsbt_skip("not linked with libnosigbus");
	unsetenv("NOSIGBUS_POLICY");
	unsetenv("NOSIGBUS_LOG");
	if (argc > 1 && strcmp(argv[1], "flag") == 0) {
		expect("policy flag: a received disk file is not protected", &by_recvmsg,
		       SIGBUS, NULL);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "log") == 0) {
		char want[64];

		/* The sender is our child; the line names it by command name. */
		snprintf(want, sizeof(want), "from nsb-sender[");
		expect("NOSIGBUS_LOG=1: the rescue line names the sender", &by_recvmsg, 0, want);
		return 0;
	}
	if (argc > 1) {
		/* Run as core-reexec: the scenario's exit status is ours. */
		nsbt_fail("unknown scenario %s", argv[1]);
	}

	expect("a received disk file truncated to 0, by recvmsg: rescued", &by_recvmsg, 0, NULL);
	expect("a received disk file truncated to 0, by recvmmsg: rescued", &by_recvmmsg, 0, NULL);
	expect("a dup of a received descriptor, truncated to 12 bytes: rescued", &by_dup, 0, NULL);
	expect("a received disk file truncated to 12 bytes: its bytes, then zeros", &mid_page, 0,
	       NULL);
	expect("a file handed over again, then 200 others after 200 before: still received, "
	       "rescued", &again, 0, NULL);
	expect("a disk file the program opened itself: SIGBUS, as without the library",
	       &own_file, SIGBUS, NULL);
	/* The library remembers the number a file arrived at, as a hint:
	 * the decision is still the file's the number names at mmap time. */
	expect("the received number made the program's own file behind the library's back: "
	       "SIGBUS, as without the library", &reused, SIGBUS, NULL);
	nsbt_expect_exit(core_reexec("flag", policy_flag), 0, "under NOSIGBUS_POLICY=flag");
	nsbt_expect_exit(core_reexec("log", log_on), 0, "under NOSIGBUS_LOG=1");
	return 0;
}
