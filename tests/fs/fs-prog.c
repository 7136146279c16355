/* SPDX-License-Identifier: MIT */
/*
 * nsb-fs-prog - an unmodified program that writes and reads files on a
 * full or failing file system through mappings.  nsb-fs-test runs it
 * without the library (the reference) and with it preloaded, and compares
 * how it ends, what it prints and what the file holds afterwards.
 *
 * Not linked with libnosigbus: it only gets it through LD_PRELOAD.
 *
 * Usage: nsb-fs-prog [--flag] [--handler] STEP...
 *   --flag     map with MAP_NOSIGBUS
 *   --handler  install a SIGBUS handler (SA_SIGINFO) that records si_code
 *              and si_addr and jumps back out; the step is abandoned and
 *              "sigbus code=C map=M off=O" printed (O in bytes from the
 *              start of mapping M).  Without it a SIGBUS kills.
 * Steps (PAGE and PAGES count system pages; SIZE is PAGES[+BYTES]):
 *   create=PATH:SIZE    create (or empty) PATH, ftruncate it to SIZE; it
 *                       becomes the current file (as open= does)
 *   open=PATH           open PATH read-only
 *   recv                hand the current file to itself over a Unix
 *                       socket pair (SCM_RIGHTS): the descriptor it then
 *                       uses is a received one, as a compositor's
 *   pwrite=PAGE:C       pwrite() page PAGE full of the character C
 *   append=BYTES:C      write() BYTES bytes of C at the file position
 *   fill=PATH           write() PATH until the file system is full
 *   fill=PATH:PAGES     ... then give PAGES pages back (ftruncate)
 *   trunc=SIZE          ftruncate the current file
 *   map=PAGES[:ro][:private]  map the current file (default read-write,
 *                       MAP_SHARED), which becomes the current mapping
 *   mapat=BYTES:PAGES   map BYTES of the current file shared, at an
 *                       address with PAGES pages free (for mremap=)
 *   mremap=PAGES        grow the current mapping in place
 *   read=PAGE           read the whole page: "read P: XX*N", XX the first
 *                       byte in hex and N the length of its run
 *   write=PAGE:C        write the page full of C (byte 0 first)
 *   writeall=FROM:TO    write pages FROM..TO-1 full of fs_tag(page)
 *   poke=BYTE:C         store C at byte BYTE of the mapping
 *   msync               msync(MS_SYNC) the current mapping
 *   stats               the library's counters, if it is loaded
 * A line starting with "#" is information that differs between runs
 * (pid, addresses); the driver compares the others.  Output is written
 * with write(2) as it happens, so a run that dies has said how far it got.
 * A step that cannot be done (a bad argument, a failed call that is not
 * the point of the test) exits 2.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nosigbus.h"
#include "fs.h"

#define MAX_MAPS 8

static size_t page;
static bool use_flag;
static int cur_fd = -1;
static struct {
	unsigned char *base;
	size_t len;
} maps[MAX_MAPS];
static int nmaps;

static sigjmp_buf jump;
static volatile sig_atomic_t caught_code;
static void *volatile caught_addr;

static void __attribute__((format(printf, 1, 2)))
say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	for (char *p = buf; n > 0;) {
		ssize_t w = write(STDOUT_FILENO, p, (size_t)n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(2);
		p += w;
		n -= (int)w;
	}
}

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list ap;

	fputs("nsb-fs-prog: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* [signal context] Records the fault and abandons the step. */
static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	caught_code = si->si_code;
	caught_addr = si->si_addr;
	siglongjmp(jump, 1);
}

static size_t
number(const char *s, const char **end)
{
	char *e;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &e, 10);
	if (errno || e == s)
		die("bad number in '%s'", s);
	if (end)
		*end = e;
	else if (*e)
		die("trailing characters in '%s'", s);
	return (size_t)v;
}

/* PAGES[+BYTES] */
static size_t
size_arg(const char *s)
{
	const char *e;
	size_t v = number(s, &e) * page;

	if (*e == '+')
		v += number(e + 1, NULL);
	else if (*e)
		die("bad size '%s'", s);
	return v;
}

static unsigned char *
current_map(void)
{
	if (nmaps == 0)
		die("no mapping yet");
	return maps[nmaps - 1].base;
}

static void
add_map(void *p, size_t len)
{
	if (nmaps == MAX_MAPS)
		die("too many mappings");
	maps[nmaps].base = p;
	maps[nmaps].len = len;
	say("# map %d at %p, %zu bytes", nmaps, p, len);
	say("mapped %d", nmaps);
	nmaps++;
}

/* Splits "A:B:C" in place into at most n fields; returns how many. */
static int
fields(char *s, char **f, int n)
{
	int i = 0;

	while (i < n) {
		f[i++] = s;
		s = strchr(s, ':');
		if (!s)
			break;
		*s++ = '\0';
	}
	return i;
}

static void
write_fully(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		die("write: %s", strerror(errno));
}

/* Writes until ENOSPC (or EDQUOT) in shrinking chunks, down to a byte. */
static void
fill(const char *path, size_t give_back)
{
	static char buf[1 << 16];
	size_t chunk = sizeof(buf);
	off_t size = 0;
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	memset(buf, 0x5a, sizeof(buf));
	while (chunk) {
		ssize_t n = write(fd, buf, chunk);

		if (n > 0) {
			size += n;
			continue;
		}
		if (n < 0 && errno != ENOSPC && errno != EDQUOT && errno != EINTR)
			die("filling %s: %s", path, strerror(errno));
		chunk /= 2;
	}
	if (give_back && ftruncate(fd, size > (off_t)give_back ? size - (off_t)give_back : 0) != 0)
		die("ftruncate %s: %s", path, strerror(errno));
	close(fd);
	say("filled");
}

static void
read_page(size_t p)
{
	const volatile unsigned char *m = current_map() + p * page;
	unsigned char first = m[0];
	size_t run = page;

	/* Read every byte: a page that is only partly there must show it. */
	for (size_t i = 1; i < page; i++)
		if (m[i] != first && run == page)
			run = i;
	say("read %zu: %02x*%zu", p, first, run);
}

static void
write_page(size_t p, unsigned char c)
{
	volatile unsigned char *m = current_map() + p * page;

	m[0] = c;
	memset((unsigned char *)m + 1, c, page - 1);
	say("wrote %zu", p);
}

static void
stats(void)
{
	/* The five fields of issue 12; the last one stays all ones when the
	 * library is older and copies only four. */
	struct {
		uint64_t rescues, pages, failures, mappings, unverified;
	} st;
	int (*get)(void *, size_t);

	*(void **)&get = dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	if (!get) {
		say("stats none");
		return;
	}
	memset(&st, 0xff, sizeof(st));
	if (get(&st, sizeof(st)) != 0)
		die("nosigbus_get_stats: %s", strerror(errno));
	if (st.unverified == UINT64_MAX)
		say("stats rescues=%" PRIu64 " pages=%" PRIu64 " failures=%" PRIu64
		    " mappings=%" PRIu64 " unverified=absent",
		    st.rescues, st.pages, st.failures, st.mappings);
	else
		say("stats rescues=%" PRIu64 " pages=%" PRIu64 " failures=%" PRIu64
		    " mappings=%" PRIu64 " unverified=%" PRIu64,
		    st.rescues, st.pages, st.failures, st.mappings, st.unverified);
}

/* fd sent through a socket pair and received (recvmsg, which the library
 * watches); the original is closed. */
static int
pass_over(int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, byte = 'F';
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int sv[2], got;

	if (fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		die("recv: %s", strerror(errno));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sv[0], &msg, 0) != 1)
		die("recv: sendmsg: %s", strerror(errno));
	memset(cbuf, 0, sizeof(cbuf));
	msg.msg_controllen = sizeof(cbuf);
	if (recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC) != 1 || !(c = CMSG_FIRSTHDR(&msg)) ||
	    c->cmsg_type != SCM_RIGHTS)
		die("recv: recvmsg: %s", strerror(errno));
	memcpy(&got, CMSG_DATA(c), sizeof(int));
	close(sv[0]);
	close(sv[1]);
	close(fd);
	return got;
}

static void
step(char *arg)
{
	char *eq = strchr(arg, '=');
	char *f[4] = { 0 };
	const char *name = arg;
	int n = 0;

	if (eq) {
		*eq = '\0';
		n = fields(eq + 1, f, 4);
	}
	if (strcmp(name, "create") == 0 && n == 2) {
		if (cur_fd >= 0)
			close(cur_fd);
		cur_fd = open(f[0], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (cur_fd < 0 || ftruncate(cur_fd, (off_t)size_arg(f[1])) != 0)
			die("create %s: %s", f[0], strerror(errno));
		say("created");
	} else if (strcmp(name, "open") == 0 && n == 1) {
		if (cur_fd >= 0)
			close(cur_fd);
		cur_fd = open(f[0], O_RDONLY | O_CLOEXEC);
		if (cur_fd < 0)
			die("open %s: %s", f[0], strerror(errno));
		say("opened");
	} else if (strcmp(name, "recv") == 0 && n == 0) {
		cur_fd = pass_over(cur_fd);
		say("received");
	} else if (strcmp(name, "pwrite") == 0 && n == 2) {
		unsigned char *buf = malloc(page);
		size_t p = number(f[0], NULL);

		if (!buf)
			die("malloc");
		memset(buf, f[1][0], page);
		if (pwrite(cur_fd, buf, page, (off_t)(p * page)) != (ssize_t)page)
			die("pwrite page %zu: %s", p, strerror(errno));
		free(buf);
		say("pwrote %zu", p);
	} else if (strcmp(name, "append") == 0 && n == 2) {
		size_t len = number(f[0], NULL);
		char *buf = malloc(len);

		if (!buf)
			die("malloc");
		memset(buf, f[1][0], len);
		write_fully(cur_fd, buf, len);
		free(buf);
		say("appended %zu", len);
	} else if (strcmp(name, "fill") == 0 && (n == 1 || n == 2)) {
		fill(f[0], n == 2 ? number(f[1], NULL) * page : 0);
	} else if (strcmp(name, "trunc") == 0 && n == 1) {
		if (ftruncate(cur_fd, (off_t)size_arg(f[0])) != 0)
			die("ftruncate: %s", strerror(errno));
		say("truncated");
	} else if (strcmp(name, "map") == 0 && n >= 1) {
		size_t len = number(f[0], NULL) * page;
		int prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED;
		void *p;

		for (int i = 1; i < n; i++) {
			if (strcmp(f[i], "ro") == 0)
				prot = PROT_READ;
			else if (strcmp(f[i], "private") == 0)
				flags = MAP_PRIVATE;
			else
				die("bad map option '%s'", f[i]);
		}
		p = mmap(NULL, len, prot, flags | (use_flag ? MAP_NOSIGBUS : 0), cur_fd, 0);
		if (p == MAP_FAILED)
			die("mmap: %s", strerror(errno));
		add_map(p, len);
	} else if (strcmp(name, "mapat") == 0 && n == 2) {
		size_t len = number(f[0], NULL), room = number(f[1], NULL) * page;
		void *p = mmap(NULL, room, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		/* Reserve room, then map at its start: mremap can grow in place. */
		if (p == MAP_FAILED || munmap(p, room) != 0)
			die("reserving address space: %s", strerror(errno));
		p = mmap(p, len, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED_NOREPLACE | (use_flag ? MAP_NOSIGBUS : 0), cur_fd, 0);
		if (p == MAP_FAILED)
			die("mmap: %s", strerror(errno));
		add_map(p, (len + page - 1) / page * page);
	} else if (strcmp(name, "mremap") == 0 && n == 1) {
		size_t len = number(f[0], NULL) * page;
		void *p = mremap(current_map(), maps[nmaps - 1].len, len, 0);

		if (p == MAP_FAILED)
			die("mremap: %s", strerror(errno));
		maps[nmaps - 1].len = len;
		say("mremapped");
	} else if (strcmp(name, "read") == 0 && n == 1) {
		read_page(number(f[0], NULL));
	} else if (strcmp(name, "write") == 0 && n == 2) {
		write_page(number(f[0], NULL), (unsigned char)f[1][0]);
	} else if (strcmp(name, "writeall") == 0 && n == 2) {
		size_t to = number(f[1], NULL);

		for (size_t p = number(f[0], NULL); p < to; p++)
			write_page(p, fs_tag(p));
	} else if (strcmp(name, "poke") == 0 && n == 2) {
		size_t b = number(f[0], NULL);

		((volatile unsigned char *)current_map())[b] = (unsigned char)f[1][0];
		say("poked %zu", b);
	} else if (strcmp(name, "msync") == 0 && n == 0) {
		if (msync(current_map(), maps[nmaps - 1].len, MS_SYNC) == 0)
			say("msync ok");
		else
			say("msync failed: %s", strerror(errno));
	} else if (strcmp(name, "stats") == 0 && n == 0) {
		stats();
	} else {
		die("bad step '%s'", arg);
	}
}

/* Where the fault was: which mapping, how far in. */
static void
report_fault(void)
{
	uintptr_t a = (uintptr_t)caught_addr;

	for (int i = 0; i < nmaps; i++) {
		uintptr_t b = (uintptr_t)maps[i].base;

		if (a >= b && a < b + maps[i].len) {
			say("sigbus code=%d map=%d off=%zu", (int)caught_code, i,
			    (size_t)(a - b));
			return;
		}
	}
	say("sigbus code=%d outside every mapping (%p)", (int)caught_code, caught_addr);
}

int
main(int argc, char **argv)
{
	struct rlimit no_core = { 0, 0 };
	static int next;
	bool handler = false;
	int i = 1;

	page = (size_t)sysconf(_SC_PAGESIZE);
	/* A death by SIGBUS is the point of many runs: no core files. */
	setrlimit(RLIMIT_CORE, &no_core);
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--flag") == 0)
			use_flag = true;
		else if (strcmp(argv[i], "--handler") == 0)
			handler = true;
		else
			die("unknown option %s", argv[i]);
	}
	if (handler) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO;
		if (sigaction(SIGBUS, &sa, NULL) != 0)
			die("sigaction: %s", strerror(errno));
	}
	say("# pid %d", (int)getpid());
	/* static: the step counter must survive the jump back. */
	for (next = i; next < argc; next++) {
		if (sigsetjmp(jump, 1)) {
			report_fault();
			continue;
		}
		step(argv[next]);
	}
	return 0;
}
