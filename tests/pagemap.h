/* pagemap.h — how many pages of a range of this process are present (their page-table
 * entry, /proc/self/pagemap bit 63: brought in by a fault or a populate of this process),
 * or this process's alone (bit 56: written since a fork, or never shared),
 * for the test programs (header only; no allocation, no stdio: the helpers that count a
 * heap's pages must not add blocks to it). */
#ifndef LA_TESTS_PAGEMAP_H
#define LA_TESTS_PAGEMAP_H

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

/* pagemap's bits: the page is present; it is mapped by this process alone (a page shared
 * with a forked parent or child is not, until a write copies it) */
#define PAGEMAP_PRESENT   63
#define PAGEMAP_EXCLUSIVE 56

/* Pages of [lo, hi) (lo rounded down to its page) whose pagemap entry has bit `bit`, read
 * from pm (an open /proc/self/pagemap); -1 with errno when pagemap cannot be read there. */
static inline long pagemap_count(int pm, uintptr_t lo, uintptr_t hi, unsigned bit)
{
	static uint64_t e[512];
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	long n = 0;
	for (uintptr_t a = lo - lo % page; a < hi;) {
		size_t want = (size_t)((hi - a + page - 1) / page);
		if (want > sizeof(e) / sizeof(e[0]))
			want = sizeof(e) / sizeof(e[0]);
		ssize_t got = pread(pm, e, want * sizeof(e[0]), (off_t)(a / page * sizeof(e[0])));
		if (got <= 0) {
			if (got == 0)
				errno = EIO;
			return -1;
		}
		size_t k = (size_t)got / sizeof(e[0]);
		for (size_t i = 0; i < k; i++)
			n += (long)(e[i] >> bit & 1);
		a += k * page;
	}
	return n;
}

/* Present pages of [lo, hi): pagemap_count's of PAGEMAP_PRESENT */
static inline long pagemap_present(int pm, uintptr_t lo, uintptr_t hi)
{
	return pagemap_count(pm, lo, hi, PAGEMAP_PRESENT);
}

#endif
