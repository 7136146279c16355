/* SPDX-License-Identifier: MIT */
/*
 * A real program with its own SIGBUS handler: libwayland-server.
 *
 * One process is both a tiny compositor (libwayland-server, wl_shm) and its
 * client (libwayland-client over a socketpair), pumped by hand in one
 * thread.  The client makes a wl_shm pool on a memfd and a buffer in it; the
 * server reads the buffer between wl_shm_buffer_begin_access() and
 * wl_shm_buffer_end_access(), which installs libwayland's SIGBUS handler;
 * the client then truncates the memfd and the server reads again:
 *
 *   nolib        no library: libwayland's handler remaps the pool, the read
 *                gives 0 and the client gets "error accessing SHM buffer"
 *   shm          preloaded, NOSIGBUS_POLICY=shm: the pool mapping is
 *                protected, the library rescues the read first (0), the
 *                client gets no error
 *   flag-before  preloaded, policy flag, the library's handler installed
 *                before libwayland's: the fault is chained to libwayland,
 *                whose handler repairs it; the client gets the error
 *   flag-after   the same, the library's handler installed after libwayland's
 *
 * Each mode ends with an unprotected fault outside any buffer access:
 * libwayland's handler re-raises it with its saved (default) disposition,
 * and the process dies by SIGBUS in every mode.  The parent runs each mode
 * in a child (re-exec'd with the environment it needs) and checks.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <wayland-client.h>
#include <wayland-server.h>

#include "nsbtest.h"

#define KNOWN_RESTORER 0x04000000

static size_t pg;
static char wl_message[1024];

/* fmt comes from libwayland, which checks it against its arguments. */
static void __attribute__((format(printf, 1, 0)))
log_handler(const char *fmt, va_list ap)
{
	size_t n = strlen(wl_message);

	vsnprintf(wl_message + n, sizeof(wl_message) - n, fmt, ap);
}

struct ctx {
	struct wl_display *server;
	struct wl_event_loop *loop;
	struct wl_client *sclient;
	struct wl_display *client;
	struct wl_shm *shm;
};

static void
sync_done(void *data, struct wl_callback *cb, uint32_t serial)
{
	(void)serial;
	*(int *)data = 1;
	wl_callback_destroy(cb);
}

static const struct wl_callback_listener sync_listener = { sync_done };

/*
 * wl_display_roundtrip for a server in the same thread: flush the
 * client, let the server dispatch and flush, read.  Returns -1 once the
 * client display has an error.
 */
static int
roundtrip(struct ctx *c)
{
	struct wl_callback *cb = wl_display_sync(c->client);
	int done = 0;

	wl_callback_add_listener(cb, &sync_listener, &done);
	while (!done) {
		wl_display_flush(c->client);
		wl_event_loop_dispatch(c->loop, 0);
		wl_display_flush_clients(c->server);
		if (wl_display_dispatch(c->client) < 0)
			return -1;
	}
	return 0;
}

static void
global(void *data, struct wl_registry *reg, uint32_t name, const char *iface, uint32_t version)
{
	struct ctx *c = data;

	(void)version;
	if (strcmp(iface, wl_shm_interface.name) == 0)
		c->shm = wl_registry_bind(reg, name, &wl_shm_interface, 1);
}

static void
global_remove(void *data, struct wl_registry *reg, uint32_t name)
{
	(void)data;
	(void)reg;
	(void)name;
}

static const struct wl_registry_listener registry_listener = { global, global_remove };

static int NSBT_OUT_OF_LINE
touch(volatile char *p)
{
	return *p;
}

/* A protected mapping of a truncated memfd: the library must rescue it. */
static void
protected_fault(void)
{
	int fd = nsbt_file(NSBT_MEMFD, pg);
	char *p = mmap(NULL, pg, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);

	NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
	NSBT_CHECK(touch(p) == 0, "rescued read is not zero");
	close(fd);
}

static uint64_t
rescues(void)
{
	int (*get)(struct nosigbus_stats *, size_t) =
		(int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	struct nosigbus_stats st;

	if (!get || get(&st, sizeof(st)) != 0)
		return 0;
	return st.rescues;
}

static void
print_disposition(const char *label)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigaction(SIGBUS, NULL, &sa);
	printf("%s: handler=%s flags=%#x mask=%#lx\n", label,
	       sa.sa_handler == SIG_DFL ? "SIG_DFL" : sa.sa_handler == SIG_IGN ? "SIG_IGN" : "libwayland",
	       (unsigned)sa.sa_flags & ~(unsigned)KNOWN_RESTORER, *(unsigned long *)&sa.sa_mask);
}

static int
run(const char *mode)
{
	bool lib = strcmp(mode, "nolib") != 0;
	struct wl_resource *res;
	struct wl_shm_buffer *sb;
	struct wl_shm_pool *pool;
	struct wl_buffer *buffer;
	struct wl_registry *reg;
	struct ctx c = { 0 };
	const struct wl_interface *iface = NULL;
	uint32_t id = 0;
	uint64_t before;
	char *data;
	int sv[2], fd, code, r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	wl_log_set_handler_client(log_handler);
	wl_log_set_handler_server(log_handler);
	NSBT_CHECK(nsbt_have_library() == lib, "library present: %d, expected %d", nsbt_have_library(), lib);
	if (strcmp(mode, "flag-before") == 0)
		protected_fault();

	c.server = wl_display_create();
	NSBT_CHECK(c.server && wl_display_init_shm(c.server) == 0, "wl_display_init_shm");
	c.loop = wl_display_get_event_loop(c.server);
	NSBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	c.sclient = wl_client_create(c.server, sv[0]);
	c.client = wl_display_connect_to_fd(sv[1]);
	NSBT_CHECK(c.sclient && c.client, "wl_client_create/wl_display_connect_to_fd");
	reg = wl_display_get_registry(c.client);
	wl_registry_add_listener(reg, &registry_listener, &c);
	NSBT_CHECK(roundtrip(&c) == 0 && c.shm, "no wl_shm global");

	fd = nsbt_file(NSBT_MEMFD, 2 * pg);
	pool = wl_shm_create_pool(c.shm, fd, (int32_t)(2 * pg));
	buffer = wl_shm_pool_create_buffer(pool, 0, (int32_t)(pg / 4), 2, (int32_t)pg,
					   WL_SHM_FORMAT_ARGB8888);
	NSBT_CHECK(roundtrip(&c) == 0, "creating the buffer: %s", wl_message);

	res = wl_client_get_object(c.sclient, wl_proxy_get_id((struct wl_proxy *)buffer));
	sb = res ? wl_shm_buffer_get(res) : NULL;
	NSBT_CHECK(sb != NULL, "the server has no wl_shm_buffer for the client's buffer");
	data = wl_shm_buffer_get_data(sb);

	/* The first access installs libwayland's handler. */
	print_disposition("before libwayland");
	wl_shm_buffer_begin_access(sb);
	NSBT_CHECK(data[1] == nsbt_pattern(1) && data[pg + 1] == nsbt_pattern(pg + 1), "pattern");
	wl_shm_buffer_end_access(sb);
	print_disposition("after libwayland");
	if (strcmp(mode, "flag-after") == 0) {
		protected_fault();
		print_disposition("after the library's handler");
	}
	if (lib)
		protected_fault();	/* under libwayland's handler */
	printf("first access: ok\n");

	before = rescues();
	NSBT_CHECK(ftruncate(fd, 0) == 0, "ftruncate");	/* the client misbehaves */
	wl_shm_buffer_begin_access(sb);
	r = touch(data + pg + 1);
	wl_shm_buffer_end_access(sb);
	printf("read after truncation: %d\n", r);
	printf("rescued by the library: %d\n", rescues() > before);

	if (roundtrip(&c) < 0) {
		code = wl_display_get_protocol_error(c.client, &iface, &id);
		printf("client: error code=%d interface=%s accessing=%d\n", code,
		       iface ? iface->name : "none", strstr(wl_message, "error accessing SHM buffer") != NULL);
	} else {
		printf("client: no error\n");
	}

	/* Outside any access: libwayland re-raises with the default action. */
	printf("unprotected fault outside an access\n");
	fflush(stdout);
	{
		int dfd = nsbt_file(NSBT_DISK, pg);
		char *p = mmap(NULL, pg, PROT_READ, MAP_SHARED, dfd, 0);

		NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
		NSBT_CHECK(ftruncate(dfd, 0) == 0, "ftruncate");
		touch(p);
	}
	printf("survived\n");
	return 0;
}

struct outcome {
	int status;
	char out[8192];
};

static void
spawn(const char *self, const char *mode, struct outcome *o)
{
	const char *preload = getenv("NSB_PRELOAD");
	int p[2];
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	NSBT_CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(p[1], 1);
		unsetenv("LD_PRELOAD");
		unsetenv("NOSIGBUS_POLICY");
		if (strcmp(mode, "nolib") != 0) {
			if (!preload)
				_exit(125);
			setenv("LD_PRELOAD", preload, 1);
			setenv("NOSIGBUS_POLICY", strcmp(mode, "shm") == 0 ? "shm" : "flag", 1);
		}
		execl(self, self, "run", mode, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], o->out + len, sizeof(o->out) - 1 - len)) > 0)
		len += (size_t)n;
	o->out[len] = '\0';
	close(p[0]);
	waitpid(pid, &o->status, 0);
	printf("---- %s: %s\n%s", mode, nsbt_status_str(o->status), o->out);
}

static void
expect_line(const char *mode, const struct outcome *o, const char *line)
{
	if (!strstr(o->out, line))
		nsbt_fail("%s: expected the line \"%s\"", mode, line);
}

static const char *
line_starting(const struct outcome *o, const char *prefix, char *buf, size_t size)
{
	const char *l = strstr(o->out, prefix);

	if (!l)
		return "";
	snprintf(buf, size, "%.*s", (int)strcspn(l, "\n"), l);
	return buf;
}

int
main(int argc, char **argv)
{
	static const char *const modes[] = { "nolib", "shm", "flag-before", "flag-after" };
	struct outcome o[4];
	struct rlimit rl;
	char ref[256], got[256];

	pg = nsbt_page();
	if (argc == 3 && strcmp(argv[1], "run") == 0)
		return run(argv[2]);
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	getrlimit(RLIMIT_CORE, &rl);
	rl.rlim_cur = 0;
	setrlimit(RLIMIT_CORE, &rl);

	for (int i = 0; i < 4; i++)
		spawn("/proc/self/exe", modes[i], &o[i]);
	for (int i = 0; i < 4; i++) {
		nsbt_expect_signal(o[i].status, SIGBUS, modes[i]);
		expect_line(modes[i], &o[i], "first access: ok\n");
		expect_line(modes[i], &o[i], "read after truncation: 0\n");
		expect_line(modes[i], &o[i], "unprotected fault outside an access\n");
		/* Every mode sees libwayland's handler exactly as without the library. */
		line_starting(&o[0], "after libwayland:", ref, sizeof(ref));
		line_starting(&o[i], "after libwayland:", got, sizeof(got));
		if (!ref[0] || strcmp(ref, got) != 0)
			nsbt_fail("%s: \"%s\" without the library, \"%s\" with it", modes[i], ref, got);
		line_starting(&o[0], "before libwayland:", ref, sizeof(ref));
		line_starting(&o[i], "before libwayland:", got, sizeof(got));
		if (!ref[0] || strcmp(ref, got) != 0)
			nsbt_fail("%s: \"%s\" without the library, \"%s\" with it", modes[i], ref, got);
	}
	expect_line("nolib", &o[0], "client: error code=2 interface=wl_buffer accessing=1\n");
	expect_line("nolib", &o[0], "rescued by the library: 0\n");
	expect_line("shm", &o[1], "client: no error\n");
	expect_line("shm", &o[1], "rescued by the library: 1\n");
	for (int i = 2; i < 4; i++) {
		expect_line(modes[i], &o[i], "client: error code=2 interface=wl_buffer accessing=1\n");
		expect_line(modes[i], &o[i], "rescued by the library: 0\n");
	}
	/* Installing the library's handler under libwayland's changes nothing it sees. */
	line_starting(&o[3], "after libwayland:", ref, sizeof(ref));
	line_starting(&o[3], "after the library's handler:", got, sizeof(got));
	if (!ref[0] || !got[0] || strcmp(strchr(ref, ':'), strchr(got, ':')) != 0)
		nsbt_fail("flag-after: \"%s\", then \"%s\"", ref, got);
	printf("ok: libwayland-server's SIGBUS handling with and without the library\n");
	return 0;
}
