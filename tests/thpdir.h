/* thpdir.h — a fake transparent huge page directory for os_thp_dir, for the tests of how
 * liballoc reads the kernel's THP modes (header only; criterion tests). */
#ifndef LA_TESTS_THPDIR_H
#define LA_TESTS_THPDIR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void thp_dir_file(const char *dir, const char *name, const char *text)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* Make dir (a mkdtemp template) as the kernel's directory: `enabled` (the 2 MiB size's
 * mode, unless its own file says other than "inherit"), hpage_pmd_size, and the
 * directories hugepages-2048kB and hugepages-64kB (a multi-size THP, Linux 6.8) with their
 * `enabled` holding pmd2m and m64; NULL leaves that file out (a read of it fails). */
static inline void thp_dir_make(char *dir, const char *enabled, const char *pmd2m, const char *m64)
{
	cr_assert_not_null(mkdtemp(dir));
	char sub[256];
	snprintf(sub, sizeof(sub), "%s/hugepages-64kB", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	snprintf(sub, sizeof(sub), "%s/hugepages-2048kB", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	thp_dir_file(dir, "enabled", enabled);
	thp_dir_file(dir, "hpage_pmd_size", "2097152\n");
	if (pmd2m)
		thp_dir_file(dir, "hugepages-2048kB/enabled", pmd2m);
	if (m64)
		thp_dir_file(dir, "hugepages-64kB/enabled", m64);
}

/* Remove what thp_dir_make made. */
static inline void thp_dir_remove(const char *dir)
{
	static const char *const names[] = {"hugepages-64kB/enabled",
	                                    "hugepages-2048kB/enabled",
	                                    "hugepages-64kB",
	                                    "hugepages-2048kB",
	                                    "enabled",
	                                    "hpage_pmd_size"};
	char path[256];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (unlink(path) != 0)
			rmdir(path);
	}
	rmdir(dir);
}

#endif
