/* pagemap.h — how many pages of a range of this process are present (their page-table
 * entry, /proc/self/pagemap bit 63: brought in by a fault or a populate of this process),
 * for the test programs (header only; no allocation, no stdio: the helpers that count a
 * heap's pages must not add blocks to it). */
#ifndef LA_TESTS_PAGEMAP_H
#define LA_TESTS_PAGEMAP_H

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

/* Present pages of [lo, hi) (lo rounded down to its page), read from pm (an open
 * /proc/self/pagemap); -1 with errno when pagemap cannot be read there. */
static inline long pagemap_present(int pm, uintptr_t lo, uintptr_t hi)
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
			n += (long)(e[i] >> 63);
		a += k * page;
	}
	return n;
}

#endif
