/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: a FUSE peer that stops answering.  A fault past the end of
 * a file on a FUSE file system never reaches the file system's server: the
 * kernel compares the offset with the size it has cached and raises
 * SIGBUS at once (filemap_fault), as the kernel's MAP_NOSIGBUS would map
 * the zero page at once.  The library's rescue asks the size again
 * (rescue.c check -> files.c nsb_files_size -> fstat), and fstat of a
 * FUSE file whose attributes have expired (the server gave attr_valid 0)
 * is a GETATTR request to the server, which the faulting thread waits for
 * without a limit (only SIGKILL ends the wait: fuse's request_wait_answer).
 * A server that is another process (a client's FUSE mount, fusermount3 is
 * set-user-ID) and never answers thus stops the faulting thread for good:
 * SPEC section 5 "Progress" (no thread waits for one the program cannot
 * make progress), and libnosigbus(7) says nothing of it.
 *
 * The test is its own FUSE server (/dev/fuse spoken directly, no libfuse,
 * mounted with mount(2): needs root; skips otherwise).  Its one file "f"
 * has one page; a child maps two pages of it MAP_SHARED | MAP_NOSIGBUS,
 * reads page 0 (served), then page 1 (past the end).
 *
 * "answered": the server answers every GETATTR: the fault is rescued with
 * zeros (the control).  "silent": once page 0 was read, the server keeps
 * every GETATTR of the file unanswered.  The child must still read zeros
 * and exit; if the server received a GETATTR it keeps and the child has
 * not ended 10 s (scaled) later, the scenario fails naming where the
 * child waits, then aborts the connection (the server killed: the pending
 * request fails with ENOTCONN) so that the child can end.  "silent-mmap":
 * the server stops answering once the file is open, before the mmap
 * (mmap of a FUSE file makes no request: the library's decision's statx
 * does).
 *
 * "received-answered", "received-silent", "received-silent-mmap": the
 * same, the file handed over by another process (SCM_RIGHTS, the
 * descriptor closed once mapped, no flag: the default policy protects
 * it), as a compositor gets a client's buffer - the client's own FUSE
 * mount.  Under the default NOSIGBUS_ERRORS=peer the size asked at the
 * fault does not even change the verdict (a received file's fault is
 * rescued inside its size too).  "received-silent-recvmsg": the server
 * stops answering before the file is sent: the library's statx of each
 * regular file received (received.c nsb_identity_of) waits in recvmsg,
 * before the program has even decided to map it.
 *
 * "silent-close": the server stops answering once page 0 was read, and
 * the program closes the descriptor it mapped (close makes no request
 * of FUSE; the library's check of the number before it keeps a
 * descriptor of its own does).
 *
 * Fails today in every "silent" scenario: the child waits in
 * request_wait_answer (its kernel stack is shown) under fstat (the
 * fault: files.c size_by_descriptor), statx (mmap: policy.c; recvmsg:
 * received.c nsb_identity_of).
 *
 * Usage: core-atk6-fusestall [SCENARIO]   (hows[] below; all by default)
 */
#include <linux/fuse.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core.h"

#define BUF_SIZE (1U << 20)
#define FILE_INO 2

struct shared {
	atomic_int ready;	/* 1 mounted, -errno failed */
	atomic_int armed;	/* the server leaves GETATTR of the file unanswered */
	atomic_int asked;	/* GETATTRs (and LOOKUPs) of the file left unanswered */
	atomic_int done;	/* the child read both pages */
	atomic_int phase;	/* how far the reader got (phases[]) */
};

/* Where the server stops answering GETATTR of the file. */
enum arm { NEVER, AT_FAULT, AT_MAP, AT_SEND, AT_CLOSE };

struct how {
	const char *name;
	enum arm arm;
	bool received;	/* the reader gets the file over SCM_RIGHTS */
};

static const struct how hows[] = {
	{ "answered", NEVER, false },
	{ "silent", AT_FAULT, false },
	{ "silent-mmap", AT_MAP, false },
	{ "silent-close", AT_CLOSE, false },
	{ "received-answered", NEVER, true },
	{ "received-silent", AT_FAULT, true },
	{ "received-silent-mmap", AT_MAP, true },
	{ "received-silent-recvmsg", AT_SEND, true },
};

static const char *const phases[] = {
	"in open or recvmsg", "in mmap", "reading page 0", "reading page 1 (the fault past the end)",
	"done", "in close (of the descriptor mapped)",
};

static struct shared *sh;
static size_t ps;
static char dir[64];

static void
reply(int fd, uint64_t unique, int error, const void *arg, size_t len)
{
	char buf[sizeof(struct fuse_out_header) + 256];
	struct fuse_out_header *h = (void *)buf;

	h->len = (uint32_t)(sizeof(*h) + len);
	h->error = error;
	h->unique = unique;
	if (len)
		memcpy(buf + sizeof(*h), arg, len);
	(void)!write(fd, buf, h->len);
}

static void
fill_attr(struct fuse_attr *a, uint64_t ino)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->blksize = (uint32_t)ps;
	if (ino == FUSE_ROOT_ID) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0644;
		a->nlink = 1;
		a->size = ps;
		a->blocks = ps / 512;
	}
}

/* The server: one file of one page of 'a', every attribute expiring at
 * once.  Runs until the connection goes (unmounted) or it is killed. */
static void
serve(void)
{
	char opts[128];
	char *buf = malloc(BUF_SIZE), *data = malloc(BUF_SIZE);
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fd < 0 || !buf || !data) {
		sh->ready = -(errno ? errno : ENOMEM);
		_exit(0);
	}
	memset(data, 'a', ps);
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
	if (mount("nsb-atk6", dir, "fuse.nsb-atk6", MS_NOSUID | MS_NODEV, opts) != 0) {
		sh->ready = -errno;
		_exit(0);
	}
	sh->ready = 1;
	for (;;) {
		ssize_t n = read(fd, buf, BUF_SIZE);
		struct fuse_in_header *in = (void *)buf;
		void *arg = buf + sizeof(*in);

		if (n < 0 && (errno == EINTR || errno == ENOENT || errno == EAGAIN))
			continue;
		if (n < (ssize_t)sizeof(*in))
			_exit(0);	/* ENODEV: unmounted */
		switch (in->opcode) {
		case FUSE_INIT: {
			const struct fuse_init_in *ii = arg;
			struct fuse_init_out o;

			memset(&o, 0, sizeof(o));
			o.major = FUSE_KERNEL_VERSION;
			o.minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ? ii->minor
								       : FUSE_KERNEL_MINOR_VERSION;
			o.max_readahead = ii->max_readahead;
			o.max_write = 65536;
			o.max_background = 16;
			o.congestion_threshold = 12;
			o.time_gran = 1;
			reply(fd, in->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_LOOKUP: {
			struct fuse_entry_out e;

			if (in->nodeid != FUSE_ROOT_ID || strcmp(arg, "f") != 0) {
				reply(fd, in->unique, -ENOENT, NULL, 0);
				break;
			}
			if (sh->armed) {
				sh->asked++;	/* left unanswered, as GETATTR */
				break;
			}
			memset(&e, 0, sizeof(e));
			e.nodeid = FILE_INO;
			e.generation = 1;
			fill_attr(&e.attr, FILE_INO);
			reply(fd, in->unique, 0, &e, sizeof(e));
			break;
		}
		case FUSE_GETATTR: {
			struct fuse_attr_out a;

			if (in->nodeid == FILE_INO && sh->armed) {
				sh->asked++;	/* left unanswered */
				break;
			}
			memset(&a, 0, sizeof(a));
			fill_attr(&a.attr, in->nodeid);
			reply(fd, in->unique, 0, &a, sizeof(a));
			break;
		}
		case FUSE_OPEN:
		case FUSE_OPENDIR: {
			struct fuse_open_out o;

			memset(&o, 0, sizeof(o));
			o.fh = 1;
			reply(fd, in->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_READ: {
			const struct fuse_read_in *r = arg;
			size_t len = r->offset >= ps ? 0 : ps - r->offset;
			struct fuse_out_header h;
			struct iovec iov[2];

			if (len > r->size)
				len = r->size;
			h.len = (uint32_t)(sizeof(h) + len);
			h.error = 0;
			h.unique = in->unique;
			iov[0] = (struct iovec){ &h, sizeof(h) };
			iov[1] = (struct iovec){ data, len };
			(void)!writev(fd, iov, 2);
			break;
		}
		case FUSE_FLUSH:
		case FUSE_RELEASE:
		case FUSE_RELEASEDIR:
		case FUSE_DESTROY:
			reply(fd, in->unique, 0, NULL, 0);
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break;	/* no answer */
		default:
			reply(fd, in->unique, -ENOSYS, NULL, 0);
			break;
		}
	}
}

/*
 * From now on the server answers no GETATTR or LOOKUP of the file.  The
 * attributes it gave expire at once (attr_valid 0), but the kernel keeps
 * them until the jiffy they were given in has passed (fuse_update_get_attr:
 * time_before64(i_time, jiffies)): a nap of 20 ms (two jiffies at
 * HZ=100) makes every later stat of the file a request to the server.
 * Not a timing assertion: a longer nap changes nothing.
 */
static void
arm_server(void)
{
	struct timespec nap = { 0, 20 * 1000 * 1000 };

	sh->armed = 1;
	while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
		;
}

/* A grandchild opens the file and hands it over (SCM_RIGHTS), as a
 * compositor's client does; the reader receives it through recvmsg. */
static int
received(const char *path, bool arm)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { 0 };
	struct cmsghdr *c;
	char byte = 0;
	struct iovec iov = { &byte, 1 };
	int sv[2], fd = -1, status;
	pid_t pid;

	NSBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s",
		   strerror(errno));
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int f = open(path, O_RDONLY | O_CLOEXEC);

		if (f < 0)
			_exit(2);
		if (arm)
			arm_server();	/* from before the reader receives it */
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &f, sizeof(int));
		_exit(sendmsg(sv[1], &m, 0) == 1 ? 0 : 3);
	}
	close(sv[1]);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	NSBT_CHECK(recvmsg(sv[0], &m, MSG_CMSG_CLOEXEC) == 1, "recvmsg: %s", strerror(errno));
	c = CMSG_FIRSTHDR(&m);
	NSBT_CHECK(c && c->cmsg_type == SCM_RIGHTS, "no descriptor received");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	NSBT_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
			   WEXITSTATUS(status) == 0, "the sender failed");
	close(sv[0]);
	return fd;
}

static void
reader(const struct how *h)
{
	char path[96];
	volatile char *p;
	int fd;

	snprintf(path, sizeof(path), "%s/f", dir);
	fd = h->received ? received(path, h->arm == AT_SEND) : open(path, O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(fd >= 0, "open(%s): %s", path, strerror(errno));
	sh->phase = 1;
	if (h->arm == AT_MAP)
		arm_server();
	/* A received file is protected by the default policy: no flag. */
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | (h->received ? 0 : MAP_NOSIGBUS), fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	sh->phase = 2;
	if (h->received)
		close(fd);	/* as a compositor does */
	NSBT_CHECK(p[0] == 'a', "page 0 reads %d, not 'a'", p[0]);
	if (h->arm == AT_CLOSE) {
		sh->phase = 5;
		arm_server();
		close(fd);
	}
	sh->phase = 3;
	if (h->arm == AT_FAULT)
		arm_server();	/* no GETATTR of the file answered from now on */
	NSBT_CHECK(p[ps] == 0, "page 1 (past the end) reads %d, not 0", p[ps]);
	sh->done = 1;
	sh->phase = 4;
	_exit(0);
}

/* Where the child waits, in the kernel (gdb could not stop it there). */
static void
kernel_stack(pid_t pid)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stack", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	fprintf(stderr, "the child's kernel stack (%s):\n%s", path, buf);
}

static int
run(const struct how *h)
{
	const char *what = h->name;
	pid_t server, child;
	int status = 0, limit = nsbt_scaled(10), efd;
	char err[4096];
	ssize_t n;
	double asked_at = 0, start = core_now();

	snprintf(dir, sizeof(dir), "/tmp/nsb-atk6-fuse-XXXXXX");
	NSBT_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	memset(sh, 0, sizeof(*sh));
	server = fork();
	NSBT_CHECK(server >= 0, "fork: %s", strerror(errno));
	if (server == 0)
		serve();
	while (!sh->ready && core_now() - start < 30)
		usleep(1000);
	if (sh->ready != 1) {
		printf("skip: cannot mount a FUSE file system: %s\n",
		       sh->ready ? strerror(-sh->ready) : "the server did not start");
		kill(server, SIGKILL);
		waitpid(server, NULL, 0);
		rmdir(dir);
		return 77;
	}
	fflush(NULL);
	efd = memfd_create("nsbtest-atk6-stderr", MFD_CLOEXEC);
	NSBT_CHECK(efd >= 0, "memfd_create: %s", strerror(errno));
	child = fork();
	NSBT_CHECK(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		dup2(efd, STDERR_FILENO);
		reader(h);
	}
	for (;;) {
		pid_t r = waitpid(child, &status, WNOHANG);

		if (r == child)
			break;
		if (sh->asked && asked_at == 0)
			asked_at = core_now();
		if ((asked_at != 0 && core_now() - asked_at > limit) ||
		    core_now() - start > 6 * limit) {
			int asked = sh->asked, phase = sh->phase;

			kernel_stack(child);
			kill(server, SIGKILL);	/* the connection aborts: ENOTCONN */
			waitpid(server, NULL, 0);
			waitpid(child, &status, 0);
			umount2(dir, MNT_DETACH);
			rmdir(dir);
			n = pread(efd, err, sizeof(err) - 1, 0);
			err[n > 0 ? n : 0] = '\0';
			close(efd);
			fprintf(stderr, "%s: the reader's stderr:\n%s", what, err);
			fprintf(stderr, "FAIL: %s: the reader was still %s %d s after the server got %d "
				  "GETATTR of its file that it leaves unanswered (the program "
				  "asked for none: a FUSE fault past the cached size, an mmap, "
				  "a recvmsg make no request without the library): a peer that "
				  "stops answering stops the thread for good (the child then %s)\n",
				  what, phases[phase], limit, asked,
				  WIFEXITED(status) && WEXITSTATUS(status) == 0 && sh->done
					  ? "ended once the connection was aborted"
					  : "did not end well either");
			return 1;
		}
		usleep(2000);
	}
	umount2(dir, MNT_DETACH);
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	rmdir(dir);
	n = pread(efd, err, sizeof(err) - 1, 0);
	err[n > 0 ? n : 0] = '\0';
	close(efd);
	if (n > 0)
		fprintf(stderr, "%s: the reader's stderr:\n%s", what, err);
	nsbt_expect_exit(status, 0, what);
	NSBT_CHECK(sh->done, "%s: the child did not read both pages", what);
	core_expect_quiet(err, what);
	printf("ok: %s: page 1 read zeros (%d GETATTR left unanswered)\n", what, sh->asked);
	return 0;
}

int
main(int argc, char **argv)
{
	int failed = 0;

	ps = (size_t)sysconf(_SC_PAGESIZE);
	if (geteuid() != 0) {
		printf("skip: mounting a FUSE file system needs root\n");
		return 77;
	}
	sh = mmap(NULL, sizeof(*sh), CORE_PROT_RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(sh != MAP_FAILED, "mmap: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++) {
		if (argc >= 2 && strcmp(argv[1], hows[i].name) != 0)
			continue;
		switch (run(&hows[i])) {
		case 77:
			return 77;
		case 1:
			failed++;
			break;
		}
	}
	if (failed)
		fprintf(stderr, "FAIL: %d scenarios stalled\n", failed);
	return failed ? 1 : 0;
}
