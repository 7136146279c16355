/* SPDX-License-Identifier: MIT */
/*
 * <nosigbus.h> - the MAP_NOSIGBUS flag and the small public API of
 * libnosigbus.  See libnosigbus(7) and nosigbus_protect(3).
 *
 * Compiles alone as C99 and as C++.
 */
#ifndef NOSIGBUS_H
#define NOSIGBUS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The value of Ming Lin's 2021 patches (asm-generic and parisc). */
#ifndef MAP_NOSIGBUS
#define MAP_NOSIGBUS 0x200000
#endif

#define NOSIGBUS_VERSION_MAJOR 0
#define NOSIGBUS_VERSION_MINOR 2

/* Counters since the process started (a fork child starts from zero). */
struct nosigbus_stats {
	uint64_t rescues;	/* faults answered with zero pages */
	uint64_t pages;		/* pages replaced, in units of the system page size */
	uint64_t failures;	/* replacements that failed (the fault was passed on) */
	uint64_t mappings;	/* protected mappings recorded right now */
	uint64_t unverified;	/* rescues made without knowing the file's size */
};

/*
 * Protect [addr, addr + len) as if it had been mapped with MAP_NOSIGBUS.
 * addr must be page aligned; the range must be mapped.  Returns 0, or -1
 * with errno set (EINVAL, ENOMEM).
 */
int nosigbus_protect(void *addr, size_t len);

/* Stop protecting [addr, addr + len); the mapping itself is untouched. */
int nosigbus_unprotect(void *addr, size_t len);

/*
 * Fill *stats with the counters.  size is sizeof(struct nosigbus_stats)
 * as the caller knows it, so that later versions can add fields.
 * Returns 0, or -1 with errno EINVAL.
 */
int nosigbus_get_stats(struct nosigbus_stats *stats, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* NOSIGBUS_H */
