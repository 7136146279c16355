/* SPDX-License-Identifier: MIT */
/*
 * hostile-client's FUSE backing (--backing fuse): the pool's file is the
 * one file of a FUSE file system of the client's own, served by a child
 * process, whose reads the client makes fail with EIO whenever it likes:
 * a file system the peer controls.  Debian installs fusermount3
 * set-user-ID, so any user can mount one; as root libfuse mounts it
 * directly.
 *
 *   fuse_pool_start()  before the client connects (the child must hold no
 *                      Wayland socket): forks the server, which mounts the
 *                      file system on a fresh directory in $TMPDIR or /tmp
 *                      and waits;
 *   fuse_pool_open()   sets the file's size and pixel, opens it read-write
 *                      (the compositor maps it shared, read-write), then
 *                      unmounts it lazily and removes the directory: the
 *                      file system lives as long as a descriptor of its
 *                      file, and the server ends after the last one;
 *   fuse_pool_fail()   from now on every read at or past the offset fails
 *                      with EIO (a request that touches such a page fails
 *                      as a whole, as in tests/fs/fs-fuse.c), and the
 *                      file's pages are dropped from the page cache and
 *                      from every mapping (fuse_invalidate_path: the kernel
 *                      unmaps them), so the compositor's next read of them
 *                      faults inside the file's size and gets SIGBUS.
 *
 * The file's contents are the pixel, repeated, after the text the client
 * may have put in shared->text (a keymap); writes are refused (the
 * compositor never writes a wl_shm buffer).  Each function returns 0, or
 * -1 having said why on stderr (its lines begin with FUSE_POOL_WHO,
 * "hostile-client" unless the includer defines another);
 * fuse_pool_start's reason is also in why[] (the test skips with it where
 * FUSE cannot be mounted).  tests/reliability/hostile.c's peer serves its
 * FUSE file with it too.
 */
#ifndef NSB_E2E_FUSE_POOL_H
#define NSB_E2E_FUSE_POOL_H

#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FUSE_POOL_NAME "pool"
#ifndef FUSE_POOL_WHO
#define FUSE_POOL_WHO "hostile-client"
#endif

/* Shared between the client and its server (an anonymous shared page). */
struct fuse_pool_shared {
	volatile uint64_t size;		/* the file's size */
	volatile uint32_t pixel;	/* its contents */
	volatile int64_t fail_from;	/* reads at or past it: EIO; -1 none */
	char text[512];			/* the file's first bytes, then pixels */
};

struct fuse_pool {
	struct fuse_pool_shared *shared;
	char dir[256];
	int ctl;	/* the client's end: a byte asks, a byte answers */
	pid_t server;
	char why[512];
};

static struct fuse_pool_shared *fuse_pool_data;
static struct fuse_pool *fuse_pool_mounted;	/* the client's, until opened */
static struct fuse *fuse_pool_fuse;
static size_t fuse_pool_page;

static int
fuse_pool_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(path, "/" FUSE_POOL_NAME) != 0)
		return -ENOENT;
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = 1;
	st->st_size = (off_t)fuse_pool_data->size;
	return 0;
}

static int
fuse_pool_open_op(const char *path, struct fuse_file_info *fi)
{
	(void)fi;
	return strcmp(path, "/" FUSE_POOL_NAME) == 0 ? 0 : -ENOENT;
}

static int
fuse_pool_read(const char *path, char *buf, size_t size, off_t off,
	       struct fuse_file_info *fi)
{
	uint64_t end = fuse_pool_data->size;
	int64_t fail_from = fuse_pool_data->fail_from;
	uint32_t pixel = fuse_pool_data->pixel;

	(void)fi;
	if (strcmp(path, "/" FUSE_POOL_NAME) != 0)
		return -ENOENT;
	if (off < 0 || (uint64_t)off >= end || size == 0)
		return 0;
	if (size > end - (uint64_t)off)
		size = (size_t)(end - (uint64_t)off);
	if (fail_from >= 0 && ((uint64_t)off + size - 1) / fuse_pool_page >=
				      (uint64_t)fail_from / fuse_pool_page)
		return -EIO;
	for (size_t i = 0; i < size; i++) {
		uint64_t at = (uint64_t)off + i;

		buf[i] = at < sizeof(fuse_pool_data->text) && fuse_pool_data->text[at] != '\0'
				 ? fuse_pool_data->text[at]
				 : (char)(pixel >> (8 * (at % 4)));
	}
	return (int)size;
}

static int
fuse_pool_write(const char *path, const char *buf, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	(void)path, (void)buf, (void)size, (void)off, (void)fi;
	return -EROFS;
}

/* The server's second thread: serves the client's requests to fail. */
static void *
fuse_pool_ctl_thread(void *arg)
{
	int ctl = *(int *)arg;
	char byte;

	while (read(ctl, &byte, 1) == 1) {
		byte = fuse_invalidate_path(fuse_pool_fuse, "/" FUSE_POOL_NAME) == 0;
		if (write(ctl, &byte, 1) != 1)
			break;
	}
	return NULL;
}

static void __attribute__((noreturn))
fuse_pool_serve(struct fuse_pool *p, int ctl)
{
	static const struct fuse_operations ops = {
		.getattr = fuse_pool_getattr,
		.open = fuse_pool_open_op,
		.read = fuse_pool_read,
		.write = fuse_pool_write,
	};
	char *argv[] = { "nsb-hostile-fuse", "-o", "fsname=nsb-hostile,subtype=nsbhostile", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	pthread_t thread;
	char byte = 0;

	fuse_pool_data = p->shared;
	fuse_pool_fuse = fuse_new(&args, &ops, sizeof(ops), NULL);
	if (fuse_pool_fuse == NULL || fuse_mount(fuse_pool_fuse, p->dir) != 0) {
		/* libfuse said why on stderr. */
		(void)!write(ctl, &byte, 1);
		_exit(1);
	}
	byte = 1;
	if (pthread_create(&thread, NULL, fuse_pool_ctl_thread, &ctl) != 0 ||
	    write(ctl, &byte, 1) != 1)
		_exit(1);
	/* What libfuse says as the file system goes ("fuse: reading device:
	 * Software caused connection abort", when the kernel ends the
	 * connection while the server reads: once in a compositors run, kwin
	 * with the preload) is not the client's: the cells check the
	 * client's standard error, which this child shares. */
	{
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null >= 0) {
			dup2(null, 2);
			close(null);
		}
	}
	fuse_loop(fuse_pool_fuse);
	_exit(0);
}

/* Lazily unmounts the file system (the server ends after the last
 * descriptor of its file) and removes the directory. */
static void
fuse_pool_unmount(struct fuse_pool *p)
{
	if (umount2(p->dir, MNT_DETACH) < 0) {
		/* Not root: fusermount3 unmounts for the user. */
		pid_t pid = fork();

		if (pid == 0) {
			execlp("fusermount3", "fusermount3", "-u", "-z", p->dir, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	rmdir(p->dir);
	fuse_pool_mounted = NULL;
}

/* At exit: a file system whose file was never opened is unmounted too. */
static void
fuse_pool_at_exit(void)
{
	if (fuse_pool_mounted != NULL)
		fuse_pool_unmount(fuse_pool_mounted);
}

static inline int
fuse_pool_start(struct fuse_pool *p)
{
	const char *tmp = getenv("TMPDIR");
	int sv[2];
	char byte = 0;

	fuse_pool_page = (size_t)sysconf(_SC_PAGESIZE);
	p->why[0] = '\0';
	p->shared = mmap(NULL, sizeof(*p->shared), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p->shared == MAP_FAILED) {
		snprintf(p->why, sizeof(p->why), "mmap: %s", strerror(errno));
		goto fail;
	}
	p->shared->fail_from = -1;
	if ((size_t)snprintf(p->dir, sizeof(p->dir), "%s/nsb-hostile-fuse-XXXXXX",
			     tmp != NULL && *tmp != '\0' ? tmp : "/tmp") >= sizeof(p->dir)) {
		snprintf(p->why, sizeof(p->why), "TMPDIR too long");
		goto fail;
	}
	if (mkdtemp(p->dir) == NULL) {
		snprintf(p->why, sizeof(p->why), "mkdtemp %s: %s", p->dir, strerror(errno));
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(p->why, sizeof(p->why), "socketpair: %s", strerror(errno));
		goto fail_dir;
	}
	fflush(stdout);
	p->server = fork();
	if (p->server < 0) {
		snprintf(p->why, sizeof(p->why), "fork: %s", strerror(errno));
		goto fail_dir;
	}
	if (p->server == 0) {
		close(sv[0]);
		fuse_pool_serve(p, sv[1]);
	}
	close(sv[1]);
	p->ctl = sv[0];
	if (read(p->ctl, &byte, 1) != 1 || byte != 1) {
		snprintf(p->why, sizeof(p->why), "cannot mount a FUSE file system on %s (libfuse said why above)",
			 p->dir);
		goto fail_dir;
	}
	fuse_pool_mounted = p;
	atexit(fuse_pool_at_exit);
	return 0;
fail_dir:
	rmdir(p->dir);
fail:
	fprintf(stderr, FUSE_POOL_WHO ": FUSE: %s\n", p->why);
	return -1;
}

static inline int
fuse_pool_open(struct fuse_pool *p, size_t size, uint32_t pixel)
{
	char path[300];
	int fd;

	p->shared->size = size;
	p->shared->pixel = pixel;
	snprintf(path, sizeof(path), "%s/" FUSE_POOL_NAME, p->dir);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fprintf(stderr, FUSE_POOL_WHO ": open %s: %m\n", path);
	fuse_pool_unmount(p);
	return fd;
}

static inline int
fuse_pool_fail(struct fuse_pool *p, off_t from)
{
	char byte = 1;

	p->shared->fail_from = from;
	if (write(p->ctl, &byte, 1) != 1 || read(p->ctl, &byte, 1) != 1 || byte != 1) {
		fprintf(stderr, FUSE_POOL_WHO ": FUSE: the server could not drop the file's pages\n");
		return -1;
	}
	return 0;
}

#endif
