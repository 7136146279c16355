/* SPDX-License-Identifier: MIT */
/*
 * A file another process handed over: its errors are the peer's (issue
 * 37).  A fault inside the size of a received file is rescued by default
 * (NOSIGBUS_ERRORS=peer) and logged naming the sender; the same fault in
 * the program's own file, or one the program arranged itself on the
 * received file (its own userfaultfd registration), goes to the program.
 *
 * The error inside the size is made with userfaultfd in SIGBUS mode: a
 * missing page of a registered range raises SIGBUS/BUS_ADRERR inside the
 * size exactly as a FUSE read failing with EIO does (tests/fs has that,
 * as root).  Registered with a raw system call, the library does not see
 * the registration (its documented limit), so the fault stands for an
 * error of the peer's file system; registered through ioctl(), it is the
 * program's own.  A child named "nsb-sender" hands the memfd over a Unix
 * socket (SCM_RIGHTS) and exits.
 *
 * Scenarios run in children judged by how they ended; those under
 * NOSIGBUS_ERRORS=pass, zero and NOSIGBUS_LOG=1 re-execute this program.
 */
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core.h"

#define NPAGES 4

static size_t ps;

struct scenario {
	const char *name;
	bool received;		/* false: the program's own memfd */
	bool seen;		/* registered through ioctl(): the program's own */
};

/* A memfd of NPAGES pages never written: every page is missing. */
static int
hole_memfd(void)
{
	int fd = memfd_create("nsbtest-holes", MFD_CLOEXEC);

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	core_truncate(fd, (off_t)(NPAGES * ps));
	return fd;
}

/* The sender connects (SO_PEERCRED then names it, not the process that
 * made a socket pair), sends the memfd, waits for an answer, exits. */
static int
received_memfd(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, byte = 'F';
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	socklen_t len;
	int l, s, fd, status;
	pid_t pid;

	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "nsbtest-peererror-%d",
		 (int)getpid());
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(addr.sun_path + 1));
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	NSBT_CHECK(l >= 0 && bind(l, (struct sockaddr *)&addr, len) == 0 && listen(l, 1) == 0,
		   "listening: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int mfd = hole_memfd();

		prctl(PR_SET_NAME, "nsb-sender");
		s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&addr, len) != 0)
			_exit(1);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &mfd, sizeof(int));
		_exit(sendmsg(s, &msg, 0) == 1 && read(s, &byte, 1) == 1 ? 0 : 1);
	}
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	NSBT_CHECK(s >= 0, "accept: %s", strerror(errno));
	NSBT_CHECK(recvmsg(s, &msg, MSG_CMSG_CLOEXEC) == 1, "recvmsg: %s", strerror(errno));
	c = CMSG_FIRSTHDR(&msg);
	NSBT_CHECK(c && c->cmsg_type == SCM_RIGHTS, "no descriptor arrived");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	NSBT_CHECK(write(s, &byte, 1) == 1, "write: %s", strerror(errno));
	NSBT_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		   WEXITSTATUS(status) == 0, "the sender failed");
	close(s);
	close(l);
	return fd;
}

/* The child says why userfaultfd cannot be used here, and the test skips. */
static void
unavailable(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	fflush(stdout);
	_exit(77);
}

static void
program(void *arg)
{
	const struct scenario *sc = arg;
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_SIGBUS };
	struct uffdio_register reg;
	volatile char *p;
	int fd, uffd;

	core_no_core();
	fd = sc->received ? received_memfd() : hole_memfd();
	p = core_map(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	uffd = core_userfaultfd();
	if (uffd < 0)
		unavailable("userfaultfd");
	if (syscall(SYS_ioctl, uffd, UFFDIO_API, &api) < 0)
		unavailable("UFFDIO_API with UFFD_FEATURE_SIGBUS");
	reg.range.start = (uintptr_t)p;
	reg.range.len = NPAGES * ps;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if ((sc->seen ? ioctl(uffd, UFFDIO_REGISTER, &reg)
		      : syscall(SYS_ioctl, uffd, UFFDIO_REGISTER, &reg)) < 0)
		unavailable("UFFDIO_REGISTER of a shared memfd mapping");
	/* Pages never touched are missing: inside the size, SIGBUS. */
	core_expect_bytes((const char *)p + ps, 0, ps, sc->name);
	printf("ok: %s: the page reads zeros\n", sc->name);
}

static void
expect(const struct scenario *sc, bool rescued)
{
	int status = nsbt_run(program, (void *)sc);

	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("userfaultfd in SIGBUS mode is not available (the reason is above; "
			  "needs root, vm.unprivileged_userfaultfd=1, or UFFD_USER_MODE_ONLY: "
			  "Linux 5.11)");
	if (rescued)
		nsbt_expect_exit(status, 0, sc->name);
	else
		nsbt_expect_signal(status, SIGBUS, sc->name);
}

static const struct scenario peer = {
	"an error inside a received memfd's size", true, false
};
static const struct scenario own = {
	"an error inside the program's own memfd's size", false, false
};
static const struct scenario registered = {
	"the program's own userfaultfd on a received memfd", true, true
};

int
main(int argc, char **argv)
{
	static const char *const pass[] = { "NOSIGBUS_ERRORS=pass", NULL };
	static const char *const zero[] = { "NOSIGBUS_ERRORS=zero", NULL };
	static const char *const peer_set[] = { "NOSIGBUS_ERRORS=peer", NULL };
	static const char *const log_on[] = { "NOSIGBUS_LOG=1", NULL };

	ps = nsbt_page();
	if (!nsbt_have_library())
		nsbt_skip("not linked with libnosigbus");
	if (argc > 1 && !strcmp(argv[1], "pass")) {
		expect(&peer, false);
		expect(&own, false);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "zero")) {
		expect(&peer, true);
		expect(&own, true);
		expect(&registered, true);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "peer")) {
		expect(&peer, true);
		expect(&own, false);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "log")) {
		int pfd[2], status;
		char err[4096];
		ssize_t n;
		size_t got = 0;
		pid_t pid;

		NSBT_CHECK(pipe2(pfd, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
		fflush(NULL);
		pid = fork();
		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			dup2(pfd[1], STDERR_FILENO);
			program((void *)&peer);
			_exit(0);
		}
		close(pfd[1]);
		while (got + 1 < sizeof(err) && (n = read(pfd[0], err + got, sizeof(err) - 1 - got)) > 0)
			got += (size_t)n;
		err[got] = '\0';
		NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			return 77;
		nsbt_expect_exit(status, 0, "NOSIGBUS_LOG=1: a received memfd's error");
		NSBT_CHECK(strstr(err, "from nsb-sender[") && strstr(err, "the sender's error"),
			   "the rescue line does not name the sender and the error:\n%s", err);
		printf("ok: the line names the sender: %s", err);
		return 0;
	}
	if (argc > 1)
		nsbt_fail("unknown scenario %s", argv[1]);
	unsetenv("NOSIGBUS_ERRORS");
	unsetenv("NOSIGBUS_LOG");
	expect(&peer, true);
	expect(&own, false);
	expect(&registered, false);
	nsbt_expect_exit(core_reexec("peer", peer_set), 0, "NOSIGBUS_ERRORS=peer");
	nsbt_expect_exit(core_reexec("pass", pass), 0, "NOSIGBUS_ERRORS=pass");
	nsbt_expect_exit(core_reexec("zero", zero), 0, "NOSIGBUS_ERRORS=zero");
	nsbt_expect_exit(core_reexec("log", log_on), 0, "NOSIGBUS_LOG=1");
	return 0;
}
