/* vmsize.h — the reliability helpers' reading of their own address-space size, for the
 * RLIMIT_AS they set (enomem.c, forkas.c). */
#ifndef LA_TESTS_VMSIZE_H
#define LA_TESTS_VMSIZE_H
#include <stdio.h>

/* VmSize of /proc/self/status in bytes (0 when unreadable). */
static inline size_t vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}
#endif
