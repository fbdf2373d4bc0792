/* libpages.c — which pages of a preloaded library's image this process touched, for
 * tests/e2e/startup.bats: usage `libpages LIB OFFSET...` (offsets in hex, as nm prints
 * them). It first does what nearly every program does early (free(NULL), realloc(NULL, n),
 * a small malloc), then prints "OFFSET present" or "OFFSET absent" for the page holding
 * each offset of LIB's image (its first mapping with file offset 0 is the base; .bss and
 * the tables after it follow it), read from /proc/self/pagemap: a page the process never
 * touched has no entry (a read maps the zero page, which counts). With --count FROM TO it
 * prints how many pages of [FROM, TO) are present instead. With --stack FROM TO (a stack
 * that ends at TO, zero-filled memory before it was used) it prints "PAGES DEPTH TOP":
 * the pages present of its own, [FROM, TO's page), then how far below TO the lowest byte
 * not zero is, and how many bytes not zero lie on TO's page below TO (the stack's top
 * there), the pages counted first (the scan reads every page: a page never touched maps
 * the zero page). --after MS, first, waits MS ms before it looks (the control thread's
 * work 50 ms and 1 s into a process: its naming, its sweep). With --one-read OFFSET LEN
 * it maps LEN bytes of LIB's file from OFFSET (hex) apart from the loaded image, reads
 * their first byte only and prints how many of those pages are present: what the kernel
 * maps for one read fault on that file as its page cache holds it now: a 64 KiB
 * fault-around window, or a whole large folio (a freshly written or read-ahead file on a
 * kernel with large page-cache folios may be mapped whole by one fault). LIB need not be
 * preloaded for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pagemap.h"

/* The next line of /proc/self/maps: its range, file offset and path ("" for anonymous
 * memory); false at the end. */
static bool next_map(FILE *f, unsigned long *lo, unsigned long *hi, unsigned long *off,
                     char path[256])
{
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		path[0] = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %255s", lo, hi, off, path) >= 3)
			return true;
	}
	return false;
}

/* Is path LIB's file (same last component)? */
static bool is_lib(const char *path, const char *lib)
{
	const char *name = strrchr(lib, '/') ? strrchr(lib, '/') + 1 : lib;
	const char *slash = strrchr(path, '/');
	return slash && strcmp(slash + 1, name) == 0;
}

/* Is the page holding address a present: 1 or 0, -1 when unreadable */
static int page_present(int pm, uintptr_t a)
{
	return (int)pagemap_present(pm, a, a + 1);
}

static uintptr_t image_base(const char *lib)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	unsigned long lo, hi, off;
	char path[256];
	uintptr_t base = 0;
	while (!base && next_map(f, &lo, &hi, &off, path))
		if (off == 0 && is_lib(path, lib))
			base = lo;
	fclose(f);
	return base;
}

/* Pages of [base + from, base + to) present and mapped from LIB or anonymous memory (not
 * another file mapped into the range, as the segment is into .lbss). */
static unsigned count_present(const char *lib, uintptr_t base, uintptr_t from, uintptr_t to, int pm)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	unsigned long lo, hi, off;
	char path[256];
	unsigned n = 0;
	long page = sysconf(_SC_PAGESIZE);
	while (next_map(f, &lo, &hi, &off, path)) {
		if (path[0] && !is_lib(path, lib))
			continue;
		for (uintptr_t a = lo < base + from ? base + from : lo; a < hi && a < base + to;
		     a += (uintptr_t)page)
			n += page_present(pm, a) == 1;
	}
	fclose(f);
	return n;
}

/* --one-read: see the head comment */
static int print_one_read(const char *lib, uintptr_t off, size_t len, int pm)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	if (len == 0 || off % page) {
		fprintf(stderr,
		        "libpages: --one-read %#lx %#zx: the offset must be a multiple of "
		        "the page size and the length above 0\n",
		        (unsigned long)off, len);
		return 2;
	}
	int fd = open(lib, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "libpages: %s: %s\n", lib, strerror(errno));
		return 2;
	}
	if (off >= (uintptr_t)st.st_size) { /* (a read past the file's end: SIGBUS) */
		fprintf(stderr, "libpages: --one-read %#lx: past the end of %s (%lld bytes)\n",
		        (unsigned long)off, lib, (long long)st.st_size);
		close(fd);
		return 2;
	}
	const volatile unsigned char *m =
	        mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)off);
	int err = errno;
	close(fd);
	if (m == MAP_FAILED) {
		fprintf(stderr, "libpages: mapping %#zx bytes of %s at %#lx: %s\n", len, lib,
		        (unsigned long)off, strerror(err));
		return 2;
	}
	(void)m[0];
	long n = pagemap_present(pm, (uintptr_t)m, (uintptr_t)m + len);
	munmap((void *)(uintptr_t)m, len);
	if (n < 0)
		return 2;
	printf("%ld\n", n);
	return 0;
}

/* --stack: see the head comment */
static int print_stack(const char *lib, uintptr_t base, uintptr_t from, uintptr_t to, int pm)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), top_page = (base + to) & ~(page - 1);
	if (to <= from || top_page < base + from)
		return 2;
	unsigned own = count_present(lib, base, from, top_page - base, pm);
	const volatile unsigned char *b = (const volatile unsigned char *)(base + from);
	size_t len = to - from, low = len, top = 0;
	for (size_t i = 0; i < len; i++) {
		if (!b[i])
			continue;
		if (low == len)
			low = i;
		top += (uintptr_t)&b[i] >= top_page;
	}
	printf("%u %zu %zu\n", own, len - low, top);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && strcmp(argv[2], "--after") == 0) {
		struct timespec ts = {atoi(argv[3]) / 1000, atoi(argv[3]) % 1000 * 1000000L};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		argv[3] = argv[1];
		argv += 2;
		argc -= 2;
	}
	if (argc < 3) {
		fprintf(stderr,
		        "usage: libpages LIB [--after MS] OFFSET... | libpages LIB [--after MS] "
		        "--count FROM TO | libpages LIB [--after MS] --stack FROM TO | "
		        "libpages LIB --one-read OFFSET LEN\n");
		return 2;
	}
	if (strcmp(argv[2], "--one-read") == 0 && argc == 5) {
		int pm = open("/proc/self/pagemap", O_RDONLY);
		return pm < 0 ? 2
		              : print_one_read(argv[1], (uintptr_t)strtoull(argv[3], NULL, 16),
		                               (size_t)strtoull(argv[4], NULL, 16), pm);
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
	if (strcmp(argv[2], "--stack") == 0 && argc == 5)
		return print_stack(argv[1], base, (uintptr_t)strtoull(argv[3], NULL, 16),
		                   (uintptr_t)strtoull(argv[4], NULL, 16), fd);
	if (strcmp(argv[2], "--count") == 0 && argc == 5) {
		printf("%u\n", count_present(argv[1], base, (uintptr_t)strtoull(argv[3], NULL, 16),
		                             (uintptr_t)strtoull(argv[4], NULL, 16), fd));
		return 0;
	}
	for (int i = 2; i < argc; i++) {
		uintptr_t at = base + (uintptr_t)strtoull(argv[i], NULL, 16);
		int present = page_present(fd, at);
		if (present < 0)
			return 2;
		printf("%s %s\n", argv[i], present ? "present" : "absent");
	}
	close(fd);
	return 0;
}
