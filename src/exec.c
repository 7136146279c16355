/* SPDX-License-Identifier: MIT */
/*
 * exec.c - the exec family, posix_spawn (and pidfd_spawn where the C
 * library has it), system, popen and wordexp.
 *
 * exec resets handled signals to SIG_DFL but keeps ignored ones and the
 * mask.  Since the kernel holds our handler and never a blocked SIGBUS,
 * the new program would lose the program's SIG_IGN and blocked SIGBUS:
 * dispositions.c gives this thread's kernel mask the program's SIGBUS bit
 * for the call, and an ignored SIGBUS is handed over through the new
 * program's environment (NSB_HANDOFF_VAR, read by our constructor there),
 * never by putting SIG_IGN into the kernel: a fault meanwhile, in another
 * thread or in a handler that runs during system(), would kill.
 *
 * The variable is added only for a new program that will load the library
 * (issue 20 item 8, SPEC §12 "Environment"): its environment preloads it
 * (LD_PRELOAD, or /etc/ld.so.preload names it), the file is dynamically
 * linked (a PT_INTERP, or a "#!" script whose interpreter is), and it does
 * not run with AT_SECURE (no set-user-ID or set-group-ID bit that changes
 * an id, no file capabilities), where the library reads no variable.  Its
 * value is this process's pid, which the library there checks (config.c).
 * POSIX_SPAWN_SETSIGDEF with SIGBUS in its set resets SIGBUS in the child,
 * as glibc does: no hand-off then.  A new program that does not load the
 * library starts with SIGBUS at its default (libnosigbus(7)).
 *
 * glibc's execvp, execl and friends call execve internally, not through
 * the PLT, so each is here.
 *
 * Not used in signal context (execve and fexecve may be called from a
 * handler: the checks below are system calls and memory of the stack,
 * apart from the copy of the environment, made only for a hand-off).
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <wordexp.h>
#include <elf.h>

#include "nsb.h"

extern char **environ;

/* ---- will the new program load the library? ---------------------------- */

/* Does a list of paths (LD_PRELOAD's, /etc/ld.so.preload's) name us? */
static bool
names_library(const char *list)
{
	static const char name[] = "libnosigbus";
	const char *p = list;

	for (;;) {
		size_t len;
		const char *base;

		p += strspn(p, " :\t\n");
		if (!*p)
			return false;
		len = strcspn(p, " :\t\n");
		base = p;
		for (const char *c = p; c < p + len; c++)
			if (*c == '/')
				base = c + 1;
		if ((size_t)(p + len - base) >= sizeof(name) - 1 &&
		    memcmp(base, name, sizeof(name) - 1) == 0)
			return true;
		p += len;
	}
}

/* Is the library preloaded in a process with this environment? */
static bool
preloads_library(char *const envp[])
{
	char buf[4096];
	ssize_t n;
	int fd;

	for (size_t i = 0; envp; i++) {	/* NULL: empty, for Linux */
		char *e;

		if (!nsb_read_word(&envp[i], &e) || !e)
			break;
		if (strncmp(e, "LD_PRELOAD=", 11) == 0) {
			if (names_library(e + 11))
				return true;
			break;	/* the loader reads the first one */
		}
	}
	/* Under a seccomp filter no file is opened (sandbox.c): as if the
	 * file could not be read. */
	fd = nsb_unfiltered() ? open("/etc/ld.so.preload", O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return names_library(buf);
}

/* Does the file open as fd run with AT_SECURE for us, or not load
 * anything (static)?  depth: "#!" interpreters followed. */
static bool loads_preloads_path(int dirfd, const char *path, int depth);

static bool
loads_preloads_fd(int fd, int depth)
{
	union {
		Elf64_Ehdr eh;
		char text[256];
	} h;
	Elf64_Phdr ph;
	struct stat st;
	ssize_t n;

	if (nsb_fstat(fd, &st) < 0)
		return true;	/* the exec will tell */
	if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
	    ((st.st_mode & S_ISGID) && st.st_gid != getegid()))
		return false;
	/* File capabilities make an exec secure unless the real user is
	 * root (the kernel's cap_bprm_creds_from_file: root gains nothing
	 * it lacks; issue 38, filecap_root_handoff). */
	if (getuid() != 0 && fgetxattr(fd, "security.capability", NULL, 0) >= 0)
		return false;
	n = pread(fd, &h, sizeof(h) - 1, 0);
	if (n < 4)
		return true;	/* unreadable (execute-only): most are dynamic */
	if (h.text[0] == '#' && h.text[1] == '!') {
		char *interp = h.text + 2, *end;

		h.text[n] = '\0';
		interp += strspn(interp, " \t");
		end = interp + strcspn(interp, " \t\n");
		*end = '\0';
		return depth < 4 && *interp && loads_preloads_path(AT_FDCWD, interp, depth + 1);
	}
	if ((size_t)n < sizeof(h.eh) || memcmp(h.eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    h.eh.e_ident[EI_CLASS] != ELFCLASS64)
		return true;	/* not ours to judge: as if it did */
	for (unsigned i = 0; i < h.eh.e_phnum; i++) {
		off_t at = (off_t)(h.eh.e_phoff + (uint64_t)i * h.eh.e_phentsize);

		if (pread(fd, &ph, sizeof(ph), at) != (ssize_t)sizeof(ph))
			return true;
		if (ph.p_type == PT_INTERP)
			return true;
	}
	return false;	/* static */
}

static bool
loads_preloads_path(int dirfd, const char *path, int depth)
{
	int fd = nsb_unfiltered() ? openat(dirfd, path, O_RDONLY | O_CLOEXEC) : -1;	/* sandbox.c */
	bool r;

	if (fd < 0)
		return true;
	r = loads_preloads_fd(fd, depth);
	syscall(SYS_close, fd);
	return r;
}

/* execvp's search, for the file it would run: in buf, or NULL. */
static const char *
search_path(const char *file, char *buf, size_t size)
{
	const char *path = getenv("PATH");

	if (strchr(file, '/'))
		return file;
	if (!path)
		path = "/bin:/usr/bin";
	for (const char *p = path;; p++) {
		size_t len = strcspn(p, ":");
		int n = snprintf(buf, size, "%.*s%s%s", (int)len, p, len ? "/" : "", file);

		if (n > 0 && (size_t)n < size && access(buf, X_OK) == 0)
			return buf;
		p += len;
		if (!*p)
			return NULL;
	}
}

/* What the new program is: a path (searched with PATH when `search`,
 * relative to dirfd), or an open file (fd >= 0). */
struct target {
	const char *path;
	int fd;
	bool search;
	int dirfd;
	bool empty_path;	/* execveat's AT_EMPTY_PATH: "" means dirfd */
};

static bool
will_load(const struct target *t, char *const envp[])
{
	char buf[4096];
	const char *path = t->path;

	if (!preloads_library(envp))
		return false;
	if (t->empty_path && !*path)
		return loads_preloads_fd(t->dirfd, 0);
	if (t->fd >= 0)
		return loads_preloads_fd(t->fd, 0);
	if (t->search && !(path = search_path(path, buf, sizeof(buf))))
		return true;	/* it fails anyway */
	return loads_preloads_path(t->dirfd, path, 0);
}

/* ---- the hand-off ------------------------------------------------------ */

struct handoff {
	struct nsb_exec x;
	char **copy;		/* the environment passed, when it changed */
	bool mapped;		/* copy is a mapping of its own, for env_free */
	size_t room;		/* bytes the caller's stack must give copy */
	char var[sizeof(NSB_HANDOFF_VAR) + 24];
};

/*
 * In a vfork child the copy is on the stack (the caller's frame, by
 * alloca in WITH_PROGRAM_SIGBUS): its memory is the parent's, and a
 * mapping made for an exec that succeeds was never unmapped, a page or
 * more left in the parent for ever per child (core-vforkexecleak).  The
 * stack is the parent's too, below its frames: the child's use of it
 * costs the parent nothing once it resumes.  Past ROOM_MAX bytes (an
 * environment of some 2 000 variables) the new program gets SIG_IGN from
 * the kernel instead, as one that does not load the library: in a vfork
 * child no other thread shares the actions.
 */
#define ROOM_MAX 16384

/*
 * The copy of the environment is anonymous memory of its own, not
 * malloc's: execve is async-signal-safe, and a handler that calls it may
 * have interrupted malloc, whose lock it would wait for for ever (issue
 * 38, exec_handler_malloc).  Its size is kept in the word before it.
 */
static void
env_unmap(char **copy)
{
	if (copy)
		nsb_sys_munmap(copy - 1, (size_t)(uintptr_t)copy[-1]);
}

static void
env_free(struct handoff *h)
{
	if (h->mapped)
		env_unmap(h->copy);
}

/* The number of variables in envp, or false if a pointer is bad.  Read
 * with care: a bad pointer must give the C library's EFAULT, not a crash
 * in here.  (Linux reads a NULL envp as an empty one.) */
static bool
env_count(char *const envp[], size_t *count)
{
	char *s;

	for (*count = 0; envp; (*count)++) {
		if (!nsb_read_word(&envp[*count], &s))
			return false;
		if (!s)
			break;
	}
	return true;
}

/* envp with our variable (and none other of that name), or NULL: in
 * room (h->room bytes) when given, else in a mapping of its own. */
static char **
with_handoff(struct handoff *h, char *const envp[], char **room)
{
	char **block, **copy;
	size_t count, n = 0, bytes;
	char *s;

	snprintf(h->var, sizeof(h->var), NSB_HANDOFF_VAR "=%ld", (long)nsb_getpid());
	if (!env_count(envp, &count))
		return NULL;	/* it fails anyway */
	if (room) {
		if ((count + 2) * sizeof(char *) > h->room)
			return NULL;	/* grew since: told neither way */
		copy = room;
	} else {
		bytes = (count + 3) * sizeof(char *);
		block = nsb_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (block == MAP_FAILED)
			return NULL;	/* told neither way */
		block[0] = (char *)(uintptr_t)bytes;
		copy = block + 1;
		h->mapped = true;
	}
	for (size_t i = 0; i < count; i++) {
		if (!nsb_read_word(&envp[i], &s) || !s)
			break;
		if (strncmp(s, NSB_HANDOFF_VAR "=", sizeof(NSB_HANDOFF_VAR)) != 0)
			copy[n++] = s;
	}
	copy[n] = h->var;
	copy[n + 1] = NULL;
	return copy;
}

/* Does the spawn reset SIGBUS to its default (POSIX_SPAWN_SETSIGDEF)?
 * Read with care: glibc reads a bad attr in the child, and fails there. */
static bool
spawn_resets_sigbus(const posix_spawnattr_t *attr)
{
	posix_spawnattr_t a;

	memset(&a, 0, sizeof(a));
	return attr && nsb_read_word(&attr->__flags, &a.__flags) &&
	       (a.__flags & POSIX_SPAWN_SETSIGDEF) && nsb_read_word(&attr->__sd, &a.__sd) &&
	       sigismember(&a.__sd, SIGBUS) == 1;
}

/*
 * Before the call: the kernel takes the program's SIGBUS mask bit.
 * Returns the environment to pass: envp, or a copy that tells the new
 * program to ignore SIGBUS, freed by finish().
 */
static char *const *
prepare(struct handoff *h, const struct target *t, const posix_spawnattr_t *attr,
	char *const envp[])
{
	int err = errno;

	nsb_disp_before_exec(&h->x);
	h->copy = NULL;
	h->mapped = false;
	h->room = 0;
	if (h->x.ignored && !spawn_resets_sigbus(attr)) {
		size_t count;

		if (!will_load(t, envp))
			nsb_disp_exec_ignore(&h->x);
		else if (!nsb_in_vfork_child())
			h->copy = with_handoff(h, envp, NULL);
		else if (env_count(envp, &count) && (count + 2) * sizeof(char *) <= ROOM_MAX)
			h->room = (count + 2) * sizeof(char *);	/* the caller gives it */
		else
			nsb_disp_exec_ignore(&h->x);
	}
	errno = err;
	return h->copy ? h->copy : envp;
}

/* The copy in the room the caller's stack gave (a vfork child). */
static char *const *
prepare_room(struct handoff *h, char *const envp[], char **room)
{
	int err = errno;

	h->copy = with_handoff(h, envp, room);
	errno = err;
	return h->copy ? h->copy : envp;
}

/* After the call: ours back; keeps the call's errno. */
static void
finish(struct handoff *h)
{
	int err = errno;

	nsb_disp_after_exec(&h->x);
	env_free(h);
	errno = err;
}

/* Runs `call` (which passes env) with the program's SIGBUS state handed
 * over, the environment prepared from envp; its result and errno.  The
 * room of a vfork child's copy is in the frame of the function that uses
 * this, which makes the call. */
#define WITH_PROGRAM_SIGBUS(target, attr, envp, call)			\
	({								\
		struct handoff h_;					\
		char *const *env = prepare(&h_, (target), (attr), (envp)); \
		if (h_.room)						\
			env = prepare_room(&h_, (envp),			\
					   __builtin_alloca(h_.room));	\
		int ret_ = (call);					\
									\
		finish(&h_);						\
		ret_;							\
	})
#define PATH_TARGET(p) (&(struct target){ (p), -1, false, AT_FDCWD, false })
#define SEARCH_TARGET(p) (&(struct target){ (p), -1, true, AT_FDCWD, false })
#define FD_TARGET(fd) (&(struct target){ NULL, (fd), false, AT_FDCWD, false })

NSB_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(PATH_TARGET(path), NULL, envp, real_execve(path, argv, env));
}

NSB_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(SEARCH_TARGET(file), NULL, envp, real_execvpe(file, argv, env));
}

NSB_EXPORT int
fexecve(int fd, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(FD_TARGET(fd), NULL, envp, real_fexecve(fd, argv, env));
}

/* In glibc 2.34 and later. */
static int
sys_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	int (*f)(int, const char *, char *const[], char *const[], int) = real_execveat;

	return f ? f(dirfd, path, argv, envp, flags)
		 : (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
}

static int
our_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	struct target t = { path, -1, false, dirfd, (flags & AT_EMPTY_PATH) != 0 };

	return WITH_PROGRAM_SIGBUS(&t, NULL, envp, sys_execveat(dirfd, path, argv, env, flags));
}

NSB_EXPORT_SINCE(2, 34, execveat, our_execveat);

NSB_EXPORT int
execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

NSB_EXPORT int
execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

enum list_kind { LIST_PATH, LIST_SEARCH, LIST_ENV };

/* execl(path, arg0, ..., NULL[, envp]): the arguments go on the stack. */
static int
exec_list(enum list_kind kind, const char *file, const char *arg0, va_list ap)
{
	va_list count;
	size_t n = 1;

	va_copy(count, ap);
	while (va_arg(count, char *))
		n++;
	va_end(count);
	{
		char *argv[n + 1];
		char **envp = environ;

		argv[0] = (char *)arg0;
		for (size_t i = 1; i <= n; i++)
			argv[i] = va_arg(ap, char *);
		if (kind == LIST_ENV)
			envp = va_arg(ap, char **);
		if (kind == LIST_SEARCH)
			return execvpe(file, argv, envp);
		return execve(file, argv, envp);
	}
}

#define EXEC_LIST(kind, file, arg)			\
	({						\
		va_list ap_;				\
		int ret_;				\
							\
		va_start(ap_, arg);			\
		ret_ = exec_list(kind, file, arg, ap_);	\
		va_end(ap_);				\
		ret_;					\
	})

NSB_EXPORT int
execl(const char *path, const char *arg, ...)
{
	return EXEC_LIST(LIST_PATH, path, arg);
}

NSB_EXPORT int
execlp(const char *file, const char *arg, ...)
{
	return EXEC_LIST(LIST_SEARCH, file, arg);
}

NSB_EXPORT int
execle(const char *path, const char *arg, ...)
{
	return EXEC_LIST(LIST_ENV, path, arg);
}

/* posix_spawn returns an error number and leaves errno alone.  The child
 * copies the kernel's dispositions when it is created, and its mask is
 * this thread's unless the attributes set one. */
NSB_EXPORT int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
	    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(PATH_TARGET(path), attr, envp,
				   real_posix_spawn(pid, path, actions, attr, argv, env));
}

NSB_EXPORT int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
	     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(SEARCH_TARGET(file), attr, envp,
				   real_posix_spawnp(pid, file, actions, attr, argv, env));
}

/*
 * pidfd_spawn and pidfd_spawnp (glibc 2.39): the same, with a pidfd.
 * Declared here, not taken from <spawn.h>, so that the library builds
 * against an older C library too.  Exported only where the running C
 * library has them (NSB_EXPORT_SINCE, issue 38: on Debian 12's 2.36,
 * dlsym found our ENOSYS stubs).
 */
typedef int (*nsb_pidfd_spawn_fn)(int *, const char *, const posix_spawn_file_actions_t *,
				  const posix_spawnattr_t *, char *const[], char *const[]);

static int
sys_pidfd_spawn(enum nsb_real_fn which, int *pidfd, const char *path,
		const posix_spawn_file_actions_t *actions, const posix_spawnattr_t *attr,
		char *const argv[], char *const envp[])
{
	nsb_pidfd_spawn_fn f = (nsb_pidfd_spawn_fn)nsb_real(which);

	return f ? f(pidfd, path, actions, attr, argv, envp) : ENOSYS;
}

static int
our_pidfd_spawn(int *pidfd, const char *path, const posix_spawn_file_actions_t *actions,
		const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(PATH_TARGET(path), attr, envp,
				   sys_pidfd_spawn(NSB_REAL_PIDFD_SPAWN, pidfd, path, actions,
						   attr, argv, env));
}

static int
our_pidfd_spawnp(int *pidfd, const char *file, const posix_spawn_file_actions_t *actions,
		 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return WITH_PROGRAM_SIGBUS(SEARCH_TARGET(file), attr, envp,
				   sys_pidfd_spawn(NSB_REAL_PIDFD_SPAWNP, pidfd, file, actions,
						   attr, argv, env));
}

NSB_EXPORT_SINCE(2, 39, pidfd_spawn, our_pidfd_spawn);
NSB_EXPORT_SINCE(2, 39, pidfd_spawnp, our_pidfd_spawnp);

/*
 * system, popen and wordexp spawn /bin/sh through the C library's internal
 * posix_spawn, with the process's environment: for a hand-off, environ
 * is that environment with our variable for the duration of the call (the
 * shell, started by glibc, exec's it, and the library there removes it).
 * A thread that reads environ meanwhile reads the same variables and
 * ours.  One that changes it (setenv is not safe against other threads
 * anyway) keeps its change: environ is put back only if it is still ours,
 * and the copy is freed at once only when no other thread can be reading
 * it, else at the next such call.
 */
struct env_swap {
	struct handoff h;
	char **saved;
};

static char **retired_env;

static void
swap_begin(struct env_swap *w)
{
	char **env = environ;
	int err = errno;

	nsb_disp_before_exec(&w->h.x);
	w->h.copy = NULL;
	w->h.mapped = false;
	if (w->h.x.ignored && env && will_load(PATH_TARGET("/bin/sh"), env) &&
	    (w->h.copy = with_handoff(&w->h, env, NULL))) {
		w->saved = env;
		__atomic_store_n(&environ, w->h.copy, __ATOMIC_RELEASE);
	}
	errno = err;
}

static void
swap_end(struct env_swap *w)
{
	int err = errno;
	char **ours = w->h.copy;

	nsb_disp_after_exec(&w->h.x);
	if (ours) {
		char **expected = ours;

		__atomic_compare_exchange_n(&environ, &expected, w->saved, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		if (expected == ours && !nsb_other_threads())
			env_unmap(ours);
		else
			env_unmap(__atomic_exchange_n(&retired_env, ours, __ATOMIC_ACQ_REL));
	}
	errno = err;
}

#define WITH_PROGRAM_SIGBUS_NO_ENV(type, call)				\
	({								\
		struct env_swap w_;					\
		type ret_;						\
									\
		swap_begin(&w_);					\
		ret_ = (call);						\
		swap_end(&w_);						\
		ret_;							\
	})

/*
 * system() while the program blocks SIGBUS.  glibc's blocks SIGCHLD with
 * its own sigprocmask and gives the child the mask it read back: for the
 * child to inherit a blocked SIGBUS, this thread's kernel mask had to
 * hold it for the whole call, and a handler that ran while system()
 * waited (SIGCHLD aside, every signal is delivered there) died of its
 * next fault (issue 38, system_blocked_handler_fault).  So the call is
 * made here as glibc makes it (sysdeps/posix/system.c): SIGINT and
 * SIGQUIT ignored and SIGCHLD blocked while the child runs, the child
 * spawned with the mask from before (the view's SIGBUS bit in it) and
 * SIGINT and SIGQUIT at their defaults unless ignored, "sh -c COMMAND",
 * 127 if it cannot start.  What differs from glibc's: two threads in
 * system() at once each ignore and restore SIGINT and SIGQUIT (glibc
 * counts them), and a thread cancelled in the wait does not kill the
 * child.
 */
static int
system_blocked(const char *line)
{
	char *argv[] = { (char *)"sh", (char *)"-c", (char *)line, NULL };
	struct sigaction ign, intr, quit;
	posix_spawnattr_t attr;
	sigset_t chld, omask, reset;
	int status = -1, err;
	pid_t pid;

	if (!line)
		return system_blocked("exit 0") == 0;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	if (sigaction(SIGINT, &ign, &intr) < 0)
		return -1;
	if (sigaction(SIGQUIT, &ign, &quit) < 0) {
		sigaction(SIGINT, &intr, NULL);
		return -1;
	}
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (pthread_sigmask(SIG_BLOCK, &chld, &omask) != 0)
		goto out_actions;
	sigemptyset(&reset);
	if (intr.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGINT);
	if (quit.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGQUIT);
	/* What posix_spawnattr_init and its setters write (glibc's
	 * <spawn.h> fields, as spawn_resets_sigbus reads them): no more
	 * C library symbols bound for the library (startup test). */
	memset(&attr, 0, sizeof(attr));
	attr.__ss = omask;
	attr.__sd = reset;
	attr.__flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
	err = real_posix_spawn(&pid, "/bin/sh", NULL, &attr, argv, environ);
	if (err == 0) {
		long r;

		while ((r = syscall(SYS_wait4, pid, &status, 0, NULL)) < 0 && errno == EINTR)
			;
		if (r != pid)
			status = -1;
	} else {
		status = 127 << 8;	/* W_EXITCODE(127, 0) */
	}
	pthread_sigmask(SIG_SETMASK, &omask, NULL);
	if (err)
		errno = err;
out_actions:
	{
		int saved = errno;

		sigaction(SIGINT, &intr, NULL);
		sigaction(SIGQUIT, &quit, NULL);
		errno = saved;
	}
	return status;
}

NSB_EXPORT int
system(const char *command)
{
	if (nsb_disp_installed() && nsb_disp_blocked() && !nsb_in_vfork_child()) {
		struct env_swap w;
		int ret;

		/* The hand-off of an ignored SIGBUS in environ, as below, but
		 * SIGBUS never blocked in this thread's kernel mask. */
		swap_begin(&w);
		nsb_disp_after_exec(&w.h.x);
		w.h.x.blocked = false;
		ret = system_blocked(command);
		swap_end(&w);
		return ret;
	}
	return WITH_PROGRAM_SIGBUS_NO_ENV(int, real_system(command));
}

/* Command substitution runs a shell the same way. */
NSB_EXPORT int
wordexp(const char *words, wordexp_t *we, int flags)
{
	return WITH_PROGRAM_SIGBUS_NO_ENV(int, real_wordexp(words, we, flags));
}

NSB_EXPORT FILE *
popen(const char *command, const char *mode)
{
	return WITH_PROGRAM_SIGBUS_NO_ENV(FILE *, real_popen(command, mode));
}
