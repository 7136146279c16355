/* SPDX-License-Identifier: MIT */
/*
 * fake-sysinfo - preloaded into stress-ng by stress-ng.sh, in every run
 * alike (with and without libnosigbus), so that stressors which size
 * themselves from the free memory (mmapfork: 32 children populating half
 * of it) stay small on a large CI machine and when tests run in parallel.
 * Reports at most 256 MiB free and no swap; everything else is the
 * kernel's.
 */
#include <sys/sysinfo.h>
#include <unistd.h>
#include <sys/syscall.h>

#define FREE_MAX (256ul << 20)

__attribute__((visibility("default"))) int
sysinfo(struct sysinfo *info)
{
	unsigned long unit;
	long r = syscall(SYS_sysinfo, info);

	if (r < 0)
		return -1;
	unit = info->mem_unit ? info->mem_unit : 1;
	if (info->freeram * unit > FREE_MAX)
		info->freeram = FREE_MAX / unit;
	if (info->bufferram * unit > FREE_MAX)
		info->bufferram = FREE_MAX / unit;
	info->freeswap = 0;
	info->totalswap = 0;
	return 0;
}
