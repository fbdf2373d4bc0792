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
		/* a span's offsets stay below 2^20 (the test below checks every one) */
		cr_assert_lt((uint64_t)sc_pages[c] * LA_PAGE, 1u << 20, "class %u: %u pages", c,
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
		/* every offset of the span and of the page after it (free's fast path takes
		 * the offset from a page of the span), and all below 2^18 */
		uint32_t end = LA_MAX(1u << 18, (sc_pages[c] + 1) * (uint32_t)LA_PAGE);
		for (uint32_t off = 0; off < end; off++) {
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
	/* a power of two from 256 to 2,048 bytes plus a header of up to an eighth of it (a
	 * 256-byte string of redis, 262 bytes with its header and NUL): the class at
	 * 2^k + 2^k/8, where the next quarter wasted up to a fifth */
	for (uint32_t p = 256; p <= 2048; p *= 2) {
		cr_assert_eq(sc_size[sc_class_of(p + 1)], p + p / 8, "size %u", p + 1);
		cr_assert_eq(sc_size[sc_class_of(p + p / 8)], p + p / 8);
		cr_assert_eq(sc_size[sc_class_of(p + p / 8 + 1)], p + p / 4);
	}
	cr_assert_eq(sc_size[sc_class_of(262)], 288);
	cr_assert_eq(sc_size[sc_class_of(129)], 160, "no such class below 256");
	cr_assert_eq(sc_size[sc_class_of(4097)], 4368, "nor above 2,048: placed by span");
	/* from 16 to 32 KiB quarters: whole pages */
	cr_assert_eq(sc_size[sc_class_of(16384)], 16384);
	cr_assert_eq(sc_size[sc_class_of(16385)], 20480, "quarters from 16 KiB");
	cr_assert_eq(sc_size[sc_class_of(20481)], 24576);
	cr_assert_eq(sc_size[sc_class_of(28673)], 32768);
	cr_assert_eq(sc_size[sc_class_of(LA_SMALL_MAX)], LA_SMALL_MAX);
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
	cr_assert_eq(above, 20, "eight classes per doubling above 4 KiB, four above 16");
}

Test(sizeclass, classes_above_16k_are_whole_pages_4_to_a_span)
{
	sc_init();
	unsigned n = 0;
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		uint32_t s = sc_size[c];
		if (s <= 16384)
			continue;
		n++;
		cr_assert_eq(s % LA_PAGE, 0, "class %u (%u bytes)", c, s);
		cr_assert_eq(sc_blocks[c], 4, "class %u (%u bytes)", c, s);
		cr_assert_eq(sc_pages[c] * (uint32_t)LA_PAGE, 4 * s, "class %u (%u bytes)", c, s);
		cr_assert_leq(sc_pages[c] * (uint32_t)LA_PAGE, 1u << 17, "class %u (%u bytes)", c,
		              s);
	}
	cr_assert_eq(n, 4, "four classes between 16 and 32 KiB");
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
