/* SPDX-License-Identifier: MIT */
/*
 * Secure execution (issue 20, SPEC §12): in a process with AT_SECURE
 * (here: file capabilities, run by an unprivileged user) the library reads
 * no NOSIGBUS_* variable - the defaults apply, the hand-off is not taken -
 * and prints nothing.  The same program without the capability, as the
 * same user, reads them all: the control run, which shows that the
 * variables would change what happens.
 *
 *   nsb-secure-test LIBRARY	as root: copies itself and LIBRARY to a
 *				directory of its own, gives one copy a file
 *				capability (setcap), runs both as nobody
 *				(setpriv), and checks what they printed
 *   nsb-secure-test --body LIBRARY
 *				prints AT_SECURE and the SIGBUS disposition,
 *				loads LIBRARY (dlopen: its constructor reads
 *				the environment), maps a memfd through it,
 *				truncates it and reads it
 *
 * The environment sets NOSIGBUS_POLICY=flag (the memfd is then not
 * protected, and the read kills), NOSIGBUS_LOG=1, NOSIGBUS_FILL=bogus
 * (a warning) and a hand-off with the value the library writes (the
 * parent's pid).  Exit 0 pass, 1 fail, 77 skip (not root, no setcap or
 * setpriv, a file system that ignores capabilities).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int
body(const char *lib)
{
	void *(*lib_mmap)(void *, size_t, int, int, int, off_t);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct sigaction sa;
	volatile char *p;
	void *h;
	int fd;

	sigaction(SIGBUS, NULL, &sa);
	printf("AT_SECURE=%lu\n", getauxval(AT_SECURE));
	fflush(stdout);
	h = dlopen(lib, RTLD_NOW);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	sigaction(SIGBUS, NULL, &sa);
	printf("SIGBUS %s\n", sa.sa_handler == SIG_IGN ? "ignored" : "default");
	fflush(stdout);
	*(void **)&lib_mmap = dlsym(h, "mmap");
	fd = memfd_create("nsb-secure", MFD_CLOEXEC);
	if (!lib_mmap || fd < 0 || ftruncate(fd, (off_t)pg) < 0)
		return 1;
	p = lib_mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED || ftruncate(fd, 0) < 0)
		return 1;
	printf("read %d\n", p[1]);
	return 0;
}

/* Runs `copy --body lib` as nobody; its stdout and stderr in out/err. */
static int
run_as_nobody(const char *copy, const char *lib, char *out, char *err, size_t size)
{
	char pid[32], *argv[] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
				  "--", (char *)copy, "--body", (char *)lib, NULL };
	int po[2], pe[2], status;
	pid_t child;

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	if (pipe(po) < 0 || pipe(pe) < 0)
		return -1;
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		setenv("NOSIGBUS_POLICY", "flag", 1);
		setenv("NOSIGBUS_LOG", "1", 1);
		setenv("NOSIGBUS_FILL", "bogus", 1);
		/* setpriv exec's the copy: same pid, whose parent is us. */
		setenv("NOSIGBUS_INHERIT_IGNORED", pid, 1);
		unsetenv("LD_PRELOAD");
		execvp("setpriv", argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	for (int i = 0; i < 2; i++) {
		int fd = i ? pe[0] : po[0];
		char *buf = i ? err : out;
		size_t len = 0;
		ssize_t n;

		while (len + 1 < size && (n = read(fd, buf + len, size - len - 1)) > 0)
			len += (size_t)n;
		buf[len] = '\0';
		close(fd);
	}
	waitpid(child, &status, 0);
	return status;
}

static int
copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0)
		return -1;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			return -1;
	close(in);
	return close(out);
}

int
main(int argc, char **argv)
{
	char dir[] = "/tmp/nsb-secure-XXXXXX", secure[256], plain[256], lib[256], cmd[600];
	char out[4096], err[4096];
	int status, failures = 0;

	if (argc == 3 && strcmp(argv[1], "--body") == 0)
		return body(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
		return 2;
	}
	if (geteuid() != 0) {
		printf("SKIP: not root (needs setcap, and a user to drop to)\n");
		return 77;
	}
	if (system("command -v setcap >/dev/null && command -v setpriv >/dev/null") != 0) {
		printf("SKIP: setcap (libcap2-bin) or setpriv (util-linux) is missing\n");
		return 77;
	}
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0)
		return 1;
	snprintf(secure, sizeof(secure), "%s/secure", dir);
	snprintf(plain, sizeof(plain), "%s/plain", dir);
	snprintf(lib, sizeof(lib), "%s/libnosigbus.so", dir);
	if (copy_file("/proc/self/exe", secure) < 0 || copy_file("/proc/self/exe", plain) < 0 ||
	    copy_file(argv[1], lib) < 0) {
		printf("FAIL: copying into %s: %s\n", dir, strerror(errno));
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "setcap cap_net_bind_service+ep '%s'", secure);
	if (system(cmd) != 0) {
		printf("SKIP: setcap failed (a file system without capabilities?)\n");
		failures = -1;
		goto out;
	}

	status = run_as_nobody(secure, lib, out, err, sizeof(out));
	printf("---- with a file capability: status %#x\n%s---- stderr\n%s----\n", status, out, err);
	if (!strstr(out, "AT_SECURE=1")) {
		printf("SKIP: the capability did not give AT_SECURE (nosuid mount?)\n");
		failures = -1;
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !strstr(out, "read 0")) {
		printf("FAIL: the secure process did not run with the defaults "
		       "(NOSIGBUS_POLICY=flag was read: the memfd was not protected)\n");
		failures++;
	}
	if (!strstr(out, "SIGBUS default")) {
		printf("FAIL: the secure process took the hand-off variable\n");
		failures++;
	}
	if (err[0]) {
		printf("FAIL: the secure process printed on stderr\n");
		failures++;
	}

	status = run_as_nobody(plain, lib, out, err, sizeof(out));
	printf("---- without: status %#x\n%s---- stderr\n%s----\n", status, out, err);
	if (!strstr(out, "AT_SECURE=0") || !WIFSIGNALED(status) || WTERMSIG(status) != SIGBUS ||
	    !strstr(out, "SIGBUS ignored") || !strstr(err, "nosigbus: ignoring NOSIGBUS_FILL=bogus")) {
		printf("FAIL: the control run did not read the variables (policy flag, "
		       "the hand-off, the warning): the test shows nothing\n");
		failures++;
	}
out:
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", dir);
	if (failures < 0)
		return 77;
	printf("%s\n", failures ? "FAIL" : "ok: secure execution reads no variable and prints nothing");
	return failures ? 1 : 0;
}
