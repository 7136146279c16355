/* SPDX-License-Identifier: MIT *
 * (Written against a probe of VM_MAYWRITE at the first rescue, which it
 * found wrong and which was taken out again: the library asks the
 * descriptor at mmap, doc/performance.md "ripgrep under files"; this
 * test guards the answer, whichever way it is learnt.)
 */
/*
 * Adversarial: fork while the first rescue in a shared mapping not
 * writable is between its VM_MAYWRITE probe (rescue.c learn_write: an
 * mprotect of the faulting unit to its protection plus PROT_WRITE) and
 * the replacement.  As in atk-forkrescue.c, a seccomp filter with a
 * user-space listener (installed with a raw system call, unseen by the
 * library) holds the rescue's mmap of the replacement in the kernel; the
 * main thread then forks.  The child has the unit as the file's: the
 * claim is given back (nsb_rescue_after_fork_child), and its protection
 * must be the record's, PROT_READ, as the program made it: not the
 * probe's PROT_READ | PROT_WRITE, through which a write would reach the
 * file where the program gets SIGSEGV (the file grown back meanwhile).
 * The child checks /proc/self/maps, that a write to the unit of the file
 * grown back is SIGSEGV and leaves the file as it was, and that the unit
 * shrunk again is rescued; the parent's rescue then completes.  Stderr
 * checked; a SIGKILL watchdog ends a hang.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

#include "core.h"

static size_t ps;
static int zfd;
static char *prot;		/* 4 pages protected, PROT_READ shared, file of 1 */
static int lfd = -1;		/* the listener */
static atomic_int rescuer_tid;
static atomic_ullong held_id;	/* the rescue's notification, +1; 0 none yet */
static atomic_bool held;

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#define NATIVE_ARCH 0
#endif

static void
respond(unsigned long long id)
{
	struct seccomp_notif_resp r;

	memset(&r, 0, sizeof(r));
	r.id = id;
	r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	(void)ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &r);
}

/* Lets every held call go on at once, but the rescuer's of prot. */
static void *
supervisor(void *arg)
{
	(void)arg;
	for (;;) {
		struct seccomp_notif n;

		memset(&n, 0, sizeof(n));
		if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &n) != 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			return NULL;
		}
		if (!atomic_load(&held) && (int)n.pid == atomic_load(&rescuer_tid) &&
		    n.data.args[0] >= (uintptr_t)prot && n.data.args[0] < (uintptr_t)prot + 4 * ps) {
			atomic_store(&held_id, n.id + 1);
			atomic_store(&held, true);
			continue;
		}
		respond(n.id);
	}
}

static void *
rescuer(void *arg)
{
	(void)arg;
	atomic_store(&rescuer_tid, (int)syscall(SYS_gettid));
	if (prot[ps] != 0)
		nsbt_fail("the held rescue's page reads non-zero");
	return NULL;
}

/* The protection /proc/self/maps shows at p, in out[5]. */
static void
perms_at(const void *p, char out[5])
{
	const char *l = core_maps_line(p), *sp = strchr(l, ' ');

	memset(out, 0, 5);
	if (sp && strlen(sp) > 5)
		memcpy(out, sp + 1, 4);
}

/* In the fork child. */
static void
child_checks(void)
{
	char perms[5], c = 0;
	int status;

	perms_at(prot + ps, perms);
	if (strcmp(perms, "r--s") != 0) {
		fprintf(stderr, "child: the unit the parent was rescuing is %s, not r--s\n", perms);
		_exit(10);
	}
	/* The file grown back: a write to the read-only mapping is the
	 * program's SIGSEGV, and the file is unchanged. */
	if (ftruncate(zfd, (off_t)(2 * ps)) != 0 || pwrite(zfd, "f", 1, (off_t)ps) != 1)
		_exit(11);
	status = core_touch_status(prot + ps, true);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV) {
		fprintf(stderr, "child: a write to the unit: %s, not SIGSEGV\n",
			nsbt_status_str(status));
		_exit(12);
	}
	if (pread(zfd, &c, 1, (off_t)ps) != 1 || c != 'f') {
		fprintf(stderr, "child: the file's page reads %c after the refused write\n", c);
		_exit(13);
	}
	/* Shrunk again: the unit is rescued here (the claim given back). */
	if (ftruncate(zfd, (off_t)ps) != 0 || prot[ps] != 0)
		_exit(14);
	_exit(0);
}

static void
scenario(void *arg)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MAP_FIXED | MAP_PRIVATE, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog fp = { sizeof(f) / sizeof(f[0]), f };
	char perms[5];
	pthread_t s, r;
	pid_t pid;
	long ret;
	int st;

	(void)arg;
	zfd = memfd_create("atk5-forkprobe", MFD_CLOEXEC);
	if (zfd < 0 || ftruncate(zfd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	/* Read-only, shared, of a descriptor opened read-write: the probe
	 * succeeds.  No rescue in it before the held one (its first). */
	prot = core_map(NULL, 4 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		nsbt_skip("no_new_privs: %s", strerror(errno));
	ret = core_raw_seccomp(&fp, SECCOMP_FILTER_FLAG_NEW_LISTENER);
	if (ret < 0)
		nsbt_skip("a seccomp filter with a listener: %s", strerror((int)-ret));
	lfd = (int)ret;
	if (pthread_create(&s, NULL, supervisor, NULL) != 0 ||
	    pthread_create(&r, NULL, rescuer, NULL) != 0)
		nsbt_fail("pthread_create");
	core_nap_until(&held);
	/* The rescue is held in its mmap, after its probe. */
	perms_at(prot + ps, perms);
	printf("the unit while the rescue is held: %s\n", perms);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0)
		child_checks();
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		nsbt_fail("the child: %s (10 protection, 11 grow, 12 write, 13 file, 14 rescue)",
			  nsbt_status_str(st));
	respond(atomic_load(&held_id) - 1);
	pthread_join(r, NULL);
	perms_at(prot + ps, perms);
	if (strcmp(perms, "r--p") != 0)
		nsbt_fail("the parent's rescued unit is %s, not r--p", perms);
	if (munmap(prot, 4 * ps) != 0 || core_stats().mappings != 0)
		nsbt_fail("the parent's last unmap");
	printf("ok: fork during a held first rescue\n");
}

int
main(void)
{
	core_require_library();
	if (NATIVE_ARCH == 0)
		nsbt_skip("x86-64 and aarch64 only");
	ps = nsbt_page();
	if (core_run_case_watched(scenario, NULL, 30, "fork during a held first rescue") == 77)
		return 77;
	return 0;
}
