/* SPDX-License-Identifier: MIT */
/*
 * held.h - a rescue held in the kernel, for the tests that fork while one
 * is under way (atk-forkrescue.c, atk5-forkprobe.c).
 *
 * A seccomp filter with a user-space listener (installed with a raw
 * system call, unseen by the library) sends every mmap of MAP_FIXED |
 * MAP_PRIVATE (a rescue's replacement) to a supervisor thread, which lets
 * every one go on at once but the rescuer thread's over prot: that one
 * is held until held_release().  The test sets ps, zfd and prot (its
 * protected mapping, whose page ps is past the end of the file) first.
 */
#ifndef NSB_TEST_HELD_H
#define NSB_TEST_HELD_H

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

#include "core.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#define NATIVE_ARCH 0
#endif

static size_t ps;
static int zfd;
static char *prot;		/* 4 pages protected, the test's */
static int lfd = -1;		/* the listener */
static atomic_int rescuer_tid;
static atomic_ullong held_id;	/* the rescue's notification, +1; 0 none yet */
static atomic_bool held;
static pthread_t held_rescuer;

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

/* Installs the filter and returns once the rescuer's rescue of prot + ps
 * is held in its mmap (skips where no listener can be had). */
static void
held_start(void)
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
	pthread_t s;
	long ret;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		nsbt_skip("no_new_privs: %s", strerror(errno));
	ret = core_raw_seccomp(&fp, SECCOMP_FILTER_FLAG_NEW_LISTENER);
	if (ret < 0)
		nsbt_skip("a seccomp filter with a listener: %s", strerror((int)-ret));
	lfd = (int)ret;
	if (pthread_create(&s, NULL, supervisor, NULL) != 0 ||
	    pthread_create(&held_rescuer, NULL, rescuer, NULL) != 0)
		nsbt_fail("pthread_create");
	core_nap_until(&held);
}

/* Lets the held rescue go on, and waits for it to complete. */
static void
held_release(void)
{
	respond(atomic_load(&held_id) - 1);
	pthread_join(held_rescuer, NULL);
}

#endif
