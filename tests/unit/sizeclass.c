/* sizeclass.c — the arithmetic free's fast path relies on, checked exhaustively: the
 * one-multiply divisibility test and block index of every class at every offset a span can
 * hold, and the heap-owner lookup that tells our heaps (and their arena) from everything
 * else. Linked with liballoc.a. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/api.h"
#include "heap.h"
#include "liballoc.h"
#include "sizeclass.h"

Test(sizeclass, spans_stay_below_the_divisibility_bound)
{
	sc_init();
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		cr_assert_leq(sc_size[c], LA_SMALL_MAX);
		/* sc_divisible is exact for offsets below 2^18 and sizes up to 2^14 */
		cr_assert_lt((uint64_t)sc_pages[c] * LA_PAGE, 1u << 18, "class %u: %u pages", c,
		             sc_pages[c]);
		/* a span counts its blocks in 16 bits */
		cr_assert_leq(sc_blocks[c], UINT16_MAX, "class %u: %u blocks", c, sc_blocks[c]);
	}
}

Test(sizeclass, divisibility_is_exact_at_every_offset)
{
	sc_init();
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		uint32_t s = sc_size[c];
		for (uint32_t off = 0; off < (1u << 18); off++) {
			bool want = off % s == 0;
			if (sc_divisible(off, c) != want)
				cr_assert_fail("class %u (size %u): sc_divisible(%u) is %d", c, s,
				               off, !want);
		}
	}
}

Test(sizeclass, block_index_is_exact_for_every_block)
{
	sc_init();
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		for (uint32_t i = 0; i < sc_blocks[c]; i++)
			cr_assert_eq(sc_index(i * sc_size[c], c), i, "class %u block %u", c, i);
}

Test(sizeclass, every_size_gets_the_smallest_class_that_fits)
{
	sc_init();
	cr_assert_eq(sc_size[LA_NCLASSES - 1], LA_SMALL_MAX, "the last class is the largest size");
	/* a 4 KiB page plus a header (sqlite's page cache allocates 4,368): the first class
	 * above 4 KiB, 15 of them to a span of 16 pages */
	cr_assert_eq(sc_size[sc_class_of(4368)], 4368);
	cr_assert_eq(sc_size[sc_class_of(4104)], 4368);
	cr_assert_eq(sc_size[sc_class_of(4369)], 4672);
	for (size_t n = 1; n <= LA_SMALL_MAX; n++) {
		unsigned c = sc_class_of(n);
		cr_assert_lt(c, LA_NCLASSES);
		cr_assert_geq(sc_size[c], n, "size %zu", n);
		if (c > 0)
			cr_assert_lt(sc_size[c - 1], n, "size %zu", n);
	}
}

Test(sizeclass, classes_from_4_to_8k_fill_their_spans)
{
	sc_init();
	unsigned fitted = 0, above = 0;
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		uint32_t s = sc_size[c], span = sc_pages[c] * (uint32_t)LA_PAGE;
		if (s <= 4096)
			continue;
		above++;
		if (s > 8192)
			continue;
		/* 15 - fitted blocks to a span of SC_FIT_PAGES, less than 16 bytes a block over */
		cr_assert_eq(sc_pages[c], SC_FIT_PAGES, "class %u (%u bytes)", c, s);
		cr_assert_eq(sc_blocks[c], 15 - fitted, "class %u (%u bytes)", c, s);
		cr_assert_lt(span - sc_blocks[c] * s, 16 * sc_blocks[c], "class %u (%u bytes)", c,
		             s);
		cr_assert_eq(s % LA_ALIGN, 0);
		fitted++;
	}
	cr_assert_eq(fitted, 8, "eight classes between 4 and 8 KiB");
	cr_assert_eq(above, 16, "eight classes per doubling above 4 KiB");
}

Test(heap_owner, tells_our_heaps_from_other_memory)
{
	int local = 0;
	void *p = A(malloc)(64);
	cr_assert_not_null(p);
	uint16_t tag = heap_owner_tag(p);
	cr_assert_neq(tag, 0, "a small block lies in one of our heaps");
	cr_assert_neq(tag, LA_TAG_NONE);
	cr_assert_eq(heap_owner_tag(&local), 0, "a stack address is in no heap");
	cr_assert_eq(heap_owner_tag((void *)(uintptr_t)16), 0);
	cr_assert_eq(heap_owner_tag((void *)~(uintptr_t)15), 0, "beyond the user address space");
	cr_assert_eq(heap_owner_tag((void *)((uintptr_t)1 << LA_ADDR_BITS)), 0);
	A(free)(p);
}
