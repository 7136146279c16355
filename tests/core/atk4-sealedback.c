/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: a hostile peer grows its memfd back after a rescue and
 * seals it against writing (F_SEAL_FUTURE_WRITE) before the program
 * resizes its mapping (mremap) or calls nosigbus_refresh(): the kernel
 * refuses the writable shared mapping the library would show the file
 * again with (EPERM, Linux 6.18; 6.1 maps it).  libnosigbus(7), BUGS:
 * where refused, the page keeps its zeros, is not counted as shown again,
 * and stays writable (privately); where not, it is the file again.
 * Either way nothing dies, nothing is printed, and the records agree with
 * what the page shows.  Without the seal (the control), the page shows
 * the file again.
 *
 * Each case in a child with a watchdog and its stderr checked; the
 * default policy (a memfd is protected).
 */
#include "core.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

struct how {
	bool seal;
	bool by_mremap;
};

static void
grown_back(void *arg)
{
	const struct how *h = arg;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	int fd = memfd_create("atk4-sealedback", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	volatile char *p;
	char c = 0;
	long shown;
	bool again;

	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)(3 * ps)) == 0, "memfd: %s", strerror(errno));
	p = core_map(NULL, 3 * ps, CORE_PROT_RW, MAP_SHARED, fd, 0);
	memset((char *)p, 'a', 3 * ps);
	core_truncate(fd, (off_t)ps);
	NSBT_CHECK(p[2 * ps] == 0, "the page past the end reads %d", p[2 * ps]);
	core_truncate(fd, (off_t)(3 * ps));
	NSBT_CHECK(pwrite(fd, "b", 1, (off_t)(2 * ps)) == 1, "pwrite: %s", strerror(errno));
	if (h->seal)
		NSBT_CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0, "F_ADD_SEALS: %s",
			   strerror(errno));
	if (h->by_mremap) {
		void *q = mremap((void *)p, 3 * ps, 4 * ps, MREMAP_MAYMOVE);

		NSBT_CHECK(q != MAP_FAILED, "mremap: %s", strerror(errno));
		p = q;
		shown = -1;
	} else {
		shown = nosigbus_refresh((void *)p, 3 * ps);
		NSBT_CHECK(shown == 0 || shown == 1, "nosigbus_refresh: %ld (%s)", shown,
			   shown < 0 ? strerror(errno) : "");
	}
	/* Shown again (unsealed: always; sealed: where the kernel maps the
	 * file writable anyway, as Linux 6.1 does), or its zeros kept
	 * (sealed, where the kernel refuses: 6.18), consistently. */
	again = p[2 * ps] == 'b';
	NSBT_CHECK(again || (h->seal && p[2 * ps] == 0), "the page grown back reads %d",
		   p[2 * ps]);
	NSBT_CHECK(shown < 0 || shown == again, "nosigbus_refresh: %ld, the page %s", shown,
		   again ? "shown again" : "not shown again");
	p[2 * ps] = 'w';
	NSBT_CHECK(pread(fd, &c, 1, (off_t)(2 * ps)) == 1, "pread: %s", strerror(errno));
	NSBT_CHECK(c == (again ? 'w' : 'b'), "the file at the page reads %c", c);
	NSBT_CHECK(p[0] == 'a', "the first page reads %d", p[0]);
	/* A new truncation is a new rescue (or the replaced page as it was). */
	core_truncate(fd, 0);
	NSBT_CHECK(p[0] == 0 && p[ps] == 0, "after a new truncation: %d %d", p[0], p[ps]);
	NSBT_CHECK(p[2 * ps] == (again ? 0 : 'w'), "the grown-back page after a new "
		   "truncation reads %d", p[2 * ps]);
}

int
main(void)
{
	static const struct how hows[] = {
		{ false, false }, { true, false }, { false, true }, { true, true },
	};

	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++) {
		char what[64], err[4096];
		int status;

		snprintf(what, sizeof(what), "%s, %s", hows[i].seal ? "sealed" : "not sealed",
			 hows[i].by_mremap ? "mremap" : "nosigbus_refresh");
		status = core_run_watched(grown_back, (void *)&hows[i], nsbt_scaled(45), NULL, what,
					  err, sizeof(err));

		core_expect_quiet(err, what);
		nsbt_expect_exit(status, 0, what);
	}
	return 0;
}
