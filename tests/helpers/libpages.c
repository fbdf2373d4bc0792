/* libpages.c — which pages of a preloaded library's image this process touched, for
 * tests/e2e/startup.bats: usage `libpages LIB OFFSET...` (offsets in hex, as nm prints
 * them). It first does what nearly every program does early (free(NULL), realloc(NULL, n),
 * a small malloc), then prints "OFFSET present" or "OFFSET absent" for the page holding
 * each offset of LIB's image (its first mapping with file offset 0 is the base; .bss and
 * the tables after it follow it), read from /proc/self/pagemap: a page the process never
 * touched has no entry (a read maps the zero page, which counts). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uintptr_t image_base(const char *lib)
{
	const char *name = strrchr(lib, '/') ? strrchr(lib, '/') + 1 : lib;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	char line[512];
	uintptr_t base = 0;
	while (!base && fgets(line, sizeof(line), f)) {
		unsigned long lo, off;
		char path[256] = "";
		if (sscanf(line, "%lx-%*x %*s %lx %*s %*s %255s", &lo, &off, path) < 2)
			continue;
		const char *slash = strrchr(path, '/');
		if (off == 0 && slash && strcmp(slash + 1, name) == 0)
			base = lo;
	}
	fclose(f);
	return base;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: libpages LIB OFFSET...\n");
		return 2;
	}
	free(NULL);
	void *p = realloc(NULL, 24);
	void *q = malloc(100);
	free(q);
	free(p);
	uintptr_t base = image_base(argv[1]);
	int fd = open("/proc/self/pagemap", O_RDONLY);
	if (!base || fd < 0) {
		fprintf(stderr, "libpages: %s not mapped, or no pagemap\n", argv[1]);
		return 2;
	}
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 2; i < argc; i++) {
		uintptr_t at = base + (uintptr_t)strtoull(argv[i], NULL, 16);
		uint64_t e = 0;
		if (pread(fd, &e, sizeof(e), (off_t)(at / (uintptr_t)page * sizeof(e))) !=
		    (ssize_t)sizeof(e))
			return 2;
		printf("%s %s\n", argv[i], e >> 63 ? "present" : "absent");
	}
	close(fd);
	return 0;
}
