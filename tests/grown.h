/* grown.h — buffers grown by realloc past the mmap threshold, for the tests of mappings
 * that realloc grew and that are kept where they are at their free (header only). */
#ifndef LA_TESTS_GROWN_H
#define LA_TESTS_GROWN_H

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "api/api.h"
#include "common.h"
#include "heap.h"
#include "liballoc.h"

/* Buffers grown by realloc a page at a time from `from` to `to` bytes, in turns (so that
 * none grows in place in a heap), each new page written with its page number (sz >> 12):
 * n of them, in b[]. */
static inline void grow_in_turns(unsigned char **b, int n, size_t from, size_t to)
{
	for (size_t sz = from + 4096; sz <= to; sz += 4096)
		for (int i = 0; i < n; i++) {
			b[i] = A(realloc)(b[i], sz);
			cr_assert_not_null(b[i]);
			memset(b[i] + sz - 4096, (int)(sz >> 12), 4096);
		}
}

/* Three buffers of the threshold's size grown by realloc to twice it (mappings of their
 * own, grown by mremap) into b[]; the first one freed, which raises the threshold past
 * their size; then twelve heap blocks of half their size written and freed, so that the
 * heap holds free resident pages for buffers that grow below the threshold (its growth
 * into memory it never used would take the kept ones). Returns their grown size. */
static inline size_t grown_past_threshold(unsigned char **b)
{
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	A(malloc_trim)(0);      /* (no free resident heap pages a mapping's request takes) */
	int64_t t = 0;
	liballoc_get("mmap_threshold", &t); /* (the test runner's frees may have raised it) */
	size_t start = la_align_up((size_t)t, 4096), big = 2 * start;
	for (int i = 0; i < 3; i++) {
		b[i] = A(malloc)(start);
		cr_assert(b[i] && !heap_registered(b[i]), "(set-up) buffer %d is a mapping", i);
		memset(b[i], 1, start);
	}
	grow_in_turns(b, 3, start, big);
	for (int i = 0; i < 3; i++)
		cr_assert(!heap_registered(b[i]), "(set-up) buffer %d is a mapping of its own", i);
	A(free)(b[0]); /* raises the threshold past big */
	liballoc_get("mmap_threshold", &t);
	cr_assert_gt(t, (int64_t)big, "threshold %lld", (long long)t);
	void *h[12];
	for (int i = 0; i < 12; i++) {
		h[i] = A(malloc)(big / 2);
		cr_assert(h[i] && heap_registered(h[i]), "(set-up) a heap block");
		memset(h[i], 2, big / 2);
	}
	for (int i = 0; i < 12; i++)
		A(free)(h[i]);
	return big;
}

#endif
