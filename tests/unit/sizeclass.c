/* sizeclass.c — the arithmetic free's fast path relies on, checked exhaustively: the
 * one-multiply divisibility test and block index of every class at every offset a span can
 * hold, and the heap-owner lookup that tells our heaps (and their arena) from everything
 * else. Linked with liballoc.a. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "arena.h"
#include "heap.h"
#include "liballoc.h"
#include "shm.h"
#include "sizeclass.h"
#include "tcache.h"

/* The tables are the constants the build printed (build/gen/sc_tables.h), not computed at
 * every start: they are sc_compute's, entry for entry (a table the build got wrong or left
 * stale would fail here). */
Test(sizeclass, the_tables_are_what_the_rules_compute)
{
	static struct sc_tables t;
	sc_compute(&t);
	cr_assert_eq(sc_recip_pm[0], 0, "no class: a reciprocal of 0");
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		cr_assert_eq(sc_size[c], t.size[c], "class %u", c);
		cr_assert_eq(sc_pages[c], t.pages[c], "class %u", c);
		cr_assert_eq(sc_blocks[c], t.blocks[c], "class %u", c);
		cr_assert_eq(sc_recip[c], t.recip_pm[c + 1], "class %u", c);
		cr_assert_eq(sc_batch[c], t.batch[c], "class %u", c);
		cr_assert_eq(sc_grow[c], t.grow[c], "class %u", c);
		cr_assert_eq(sc_keep[c], t.keep[c], "class %u", c);
	}
	for (unsigned i = 0; i < SC_UPPER_BUCKETS; i++)
		cr_assert_eq(sc_upper[i], t.upper[i], "bucket %u", i);
	for (unsigned i = 0; i < SC_ALIGNS * SC_ALIGN_ROW; i++)
		cr_assert_eq(sc_aligned[i], t.aligned[i], "aligned entry %u", i);
}

/* realloc's keep test (n >= sc_keep[class], malloc.c) is the rule it stands for, at every
 * size a block of each class can be shrunk to: kept for a size of its class or of the four
 * below it (the class of n by sc_class_of), or above half the largest class; moved below. */
Test(sizeclass, the_keep_table_is_the_shrink_rule_at_every_size)
{
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		for (size_t n = 1; n <= sc_size[c]; n++) {
			bool rule = n > LA_SMALL_MAX / 2 || sc_class_of(n) + SC_KEEP_BELOW >= c;
			if ((n >= sc_keep[c]) != rule)
				cr_assert_fail("class %u (size %u), n %zu: sc_keep %u says %d", c,
				               sc_size[c], n, sc_keep[c], !rule);
		}
	cr_assert_eq(sc_keep[SC_KEEP_BELOW], 1, "a block of class 4 keeps its place for 1 byte");
	cr_assert_eq(sc_keep[SC_KEEP_BELOW + 1], sc_size[0] + 1);
	cr_assert_eq(sc_keep[LA_NCLASSES - 1], LA_SMALL_MAX / 2 + 1);
}

Test(sizeclass, spans_stay_below_the_divisibility_bound)
{
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
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		for (uint32_t i = 0; i < sc_blocks[c]; i++)
			cr_assert_eq(sc_index(i * sc_size[c], c), i, "class %u block %u", c, i);
}

Test(sizeclass, every_size_gets_the_smallest_class_that_fits)
{
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
	/* 16 KiB plus a header of up to 1 KiB (redis's 16 KiB values: strings of 16,390 and
	 * 16,400 bytes): 17,408, where the next quarter wasted a fifth; above, from 16 to 32 KiB
	 * quarters: whole pages */
	cr_assert_eq(sc_size[sc_class_of(16384)], 16384);
	cr_assert_eq(sc_size[sc_class_of(16385)], 17408, "16 KiB plus a header");
	cr_assert_eq(sc_size[sc_class_of(16390)], 17408);
	cr_assert_eq(sc_size[sc_class_of(16400)], 17408);
	cr_assert_eq(sc_size[sc_class_of(17408)], 17408);
	cr_assert_eq(sc_size[sc_class_of(17409)], 20480, "quarters from 16 KiB");
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

/* An aligned request of up to 32 KiB at 32 B to 4 KiB takes the smallest class that holds it
 * and is a multiple of the alignment, sc_aligned's entry for the size's class (no division,
 * no search): every size at every alignment, against a search up from the size's class. */
Test(sizeclass, an_aligned_request_takes_the_smallest_aligned_class_that_holds_it)
{
	for (size_t align = 2 * LA_ALIGN; align <= LA_PAGE; align *= 2) {
		for (size_t n = 1; n <= LA_SMALL_MAX; n++) {
			unsigned want = sc_class_of(n);
			while (sc_size[want] % align)
				want++;
			unsigned c = sc_class_aligned(n, align);
			cr_assert_eq(c, want, "size %zu align %zu: class %u, not %u", n, align, c,
			             want);
		}
	}
	/* through the API: an 8-byte block at 4 KiB is a 4 KiB class's, aligned */
	void *p = NULL;
	cr_assert_eq(A(posix_memalign)(&p, 4096, 8), 0);
	cr_assert_eq((uintptr_t)p % 4096, 0);
	cr_assert_eq(A(malloc_usable_size)(p), 4096);
	A(free)(p);
	p = A(aligned_alloc)(256, 4352);
	cr_assert_not_null(p);
	cr_assert_eq((uintptr_t)p % 256, 0);
	cr_assert_eq(A(malloc_usable_size)(p), 8192, "4,368 to 7,280 are not multiples of 256");
	A(free)(p);
}

/* sc_aligned (aligned requests' classes, one load): in each alignment's row, each class's
 * entry is the first class from it up whose size is a multiple of the alignment, and the
 * row's end past the classes is 0. Through the API, every entry point (posix_memalign's
 * cache pop and its refill, aligned_alloc, memalign) hands out that class's block, aligned,
 * and leaves errno as it was. */
Test(sizeclass, the_aligned_table_names_the_first_aligned_class_from_each_class)
{
	for (unsigned a = 0; a < SC_ALIGNS; a++) {
		size_t align = (size_t)1 << (SC_ALIGN_LG0 + a);
		cr_assert_eq(align, (size_t)(2 * LA_ALIGN) << a);
		for (unsigned c = 0; c < SC_ALIGN_ROW; c++) {
			unsigned want = c;
			while (want < LA_NCLASSES && sc_size[want] % align)
				want++;
			if (c >= LA_NCLASSES)
				want = 0;
			cr_assert_lt(want, LA_NCLASSES);
			cr_assert_eq(sc_aligned[a * SC_ALIGN_ROW + c], want,
			             "align %zu class %u: %u", align, c,
			             sc_aligned[a * SC_ALIGN_ROW + c]);
		}
	}
	static void *p[3 * 300];
	for (size_t align = 2 * LA_ALIGN; align <= LA_PAGE; align *= 2) {
		for (size_t n = 0; n <= LA_SMALL_MAX; n += n < 256 ? 8 : n / 8) {
			unsigned want = sc_class_of(n ? n : 1);
			while (sc_size[want] % align)
				want++;
			/* 300 of each: the first from a refill, the rest from the bin */
			for (unsigned i = 0; i < 3 * 300; i++) {
				errno = 4321;
				if (i % 3 == 0)
					cr_assert_eq(A(posix_memalign)(&p[i], align, n), 0);
				else if (i % 3 == 1)
					p[i] = A(aligned_alloc)(align,
					                        (n + align - 1) & ~(align - 1));
				else
					p[i] = A(memalign)(align, n);
				cr_assert_eq(errno, 4321, "size %zu align %zu: errno %d", n, align,
				             errno);
				cr_assert_not_null(p[i]);
				cr_assert_eq((uintptr_t)p[i] % align, 0, "size %zu align %zu", n,
				             align);
				cr_assert_eq(A(malloc_usable_size)(p[i]), sc_size[want],
				             "size %zu align %zu: %zu bytes, not class %u's", n,
				             align, A(malloc_usable_size)(p[i]), want);
			}
			for (unsigned i = 0; i < 3 * 300; i++)
				A(free)(p[i]);
		}
	}
}

/* sc_small4 (malloc's fast path, a constant table restating sc_compute's rules below 1 KiB):
 * each size's smallest class that fits, times 4 (times 8 more, the bin's byte offset) */
Test(sizeclass, the_table_of_sizes_up_to_1k_names_the_smallest_class_times_4)
{
	for (size_t n = 0; n <= SC_UPPER_FROM; n++) {
		unsigned v = sc_small4[n], c = v / 4;
		cr_assert_eq(v % 4, 0, "size %zu: %u is not a class times 4", n, v);
		cr_assert_lt(c, LA_NCLASSES);
		cr_assert_geq(sc_size[c], n, "size %zu: class %u of %u bytes", n, c, sc_size[c]);
		if (c > 0)
			cr_assert_lt(sc_size[c - 1], n, "size %zu: class %u fits too", n, c - 1);
	}
	cr_assert_eq(sc_small4[0], 0, "malloc(0): the smallest class");
	cr_assert_eq(sc_size[sc_small4[SC_UPPER_FROM] / 4], SC_UPPER_FROM);
}

/* malloc's fast path reads the copy of its first TC_SMALL4_MAX + 1 entries in its thread's
 * cache (TLS): the same, in this thread and in another */
static void *small4_differs(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)(memcmp(la_tcache.small4, sc_small4, sizeof(la_tcache.small4)) !=
	                           0);
}

Test(sizeclass, each_thread_cache_holds_the_table_of_sizes_up_to_1k)
{
	cr_assert_eq(sizeof(la_tcache.small4), TC_SMALL4_MAX + 1);
	cr_assert_null(small4_differs(NULL), "this thread's copy differs");
	pthread_t t;
	void *differs = NULL;
	cr_assert_eq(pthread_create(&t, NULL, small4_differs, NULL), 0);
	cr_assert_eq(pthread_join(t, &differs), 0);
	cr_assert_null(differs, "another thread's copy differs");
}

Test(sizeclass, classes_from_4_to_8k_fill_their_spans)
{
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
	cr_assert_eq(above, 21,
	             "eight classes per doubling above 4 KiB, one at 16 KiB + 1 KiB, four above");
}

Test(sizeclass, classes_above_16k_are_whole_pages_4_to_a_span)
{
	unsigned n = 0;
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		uint32_t s = sc_size[c];
		if (s <= 17408)
			continue;
		n++;
		cr_assert_eq(s % LA_PAGE, 0, "class %u (%u bytes)", c, s);
		cr_assert_eq(sc_grid(c), s / LA_PAGE, "class %u (%u bytes): on the block's grid", c,
		             s);
		cr_assert_eq(sc_blocks[c], 4, "class %u (%u bytes)", c, s);
		cr_assert_eq(sc_pages[c] * (uint32_t)LA_PAGE, 4 * s, "class %u (%u bytes)", c, s);
		cr_assert_leq(sc_pages[c] * (uint32_t)LA_PAGE, 1u << 17, "class %u (%u bytes)", c,
		              s);
	}
	cr_assert_eq(n, 4, "four quarters between 16 and 32 KiB");
}

/* The class just above 16 KiB: four blocks fill a span of 17 pages (no byte unused), which
 * starts on a grid of 17 pages (its blocks' starts fall on the same pages wherever its spans
 * go); a 16 KiB request plus a header of up to 1 KiB loses at most 1 KiB (6 %), where the
 * 20 KiB class lost a fifth; 16-byte aligned as every class */
Test(sizeclass, the_class_above_16k_holds_16k_plus_a_header_and_fills_17_pages)
{
	unsigned c = sc_class_of(16385);
	cr_assert_eq(sc_size[c], 17408);
	cr_assert_eq(sc_size[c - 1], 16384);
	cr_assert_eq(sc_size[c + 1], 20480);
	cr_assert_eq(sc_blocks[c], 4);
	cr_assert_eq(sc_pages[c], 17);
	cr_assert_eq(sc_pages[c] * (uint32_t)LA_PAGE, sc_blocks[c] * sc_size[c], "no byte unused");
	cr_assert_eq(sc_grid(c), 17);
	cr_assert_eq(sc_size[c] % LA_ALIGN, 0);
	for (size_t n = 16385; n <= 17408; n++)
		cr_assert_leq((sc_size[sc_class_of(n)] - n) * 16, n, "size %zu: at most 1/16 lost",
		              n);
}

/* Internal fragmentation by range, as README.md states it: less than 16 bytes up to 128,
 * at most a fifth of the block up to 256 bytes (129 in 160), a sixth from 256 bytes to
 * 17,408 (321 in 384; 16,400 in 17,408 loses 1,008 where the 20 KiB class lost 4,080), and
 * every class a multiple of 16 bytes (malloc's alignment) */
Test(sizeclass, a_request_loses_at_most_a_fifth_then_a_sixth_of_its_block)
{
	for (size_t n = 1; n <= 17408; n++) {
		uint32_t s = sc_size[sc_class_of(n)];
		if (n <= 128)
			cr_assert_lt(s - n, 16, "size %zu (class %u)", n, s);
		else if (n <= 256)
			cr_assert_leq((s - n) * 5, s, "size %zu (class %u)", n, s);
		else
			cr_assert_leq((s - n) * 6, s, "size %zu (class %u)", n, s);
	}
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		cr_assert_eq(sc_size[c] % LA_ALIGN, 0, "class %u", c);
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

/* The first 64 MiB (NULL's) have slot 0, which never holds a heap: heap_owner_entry_in
 * takes NULL, the pointers below LA_HEAP_SIZE and those past the table out of range on its
 * one bound test (its index wraps them round), and reads the slot of p's 64 MiB else. */
Test(heap_owner, entry_in_takes_the_first_64_mib_out_of_range)
{
	uint64_t oe = 1;
	cr_assert_eq(heap_owner_index(LA_HEAP_SIZE - 1), 0);
	cr_assert_eq(heap_owner_index(LA_HEAP_SIZE), 1);
	cr_assert_eq(heap_owner_index(2 * LA_HEAP_SIZE - 1), 1);
	cr_assert_eq(heap_owner_index(2 * LA_HEAP_SIZE), 2);
	cr_assert_not(heap_owner_entry_in(NULL, &oe));
	cr_assert_not(heap_owner_entry_in((void *)(uintptr_t)(LA_HEAP_SIZE - 16), &oe));
	cr_assert_eq(oe, 1, "no entry read");
	cr_assert(heap_owner_entry_in((void *)(uintptr_t)LA_HEAP_SIZE, &oe));
	cr_assert(heap_owner_entry_in((void *)(((uintptr_t)1 << LA_ADDR_BITS) - 16), &oe));
	cr_assert_eq(&heap_owner[heap_owner_index(((uintptr_t)1 << LA_ADDR_BITS) - 16)],
	             &heap_owner[LA_HEAP_SLOTS - 1], "the last slot is the table's last entry");
	cr_assert_not(heap_owner_entry_in((void *)((uintptr_t)1 << LA_ADDR_BITS), &oe));
	cr_assert_not(heap_owner_entry_in((void *)~(uintptr_t)15, &oe));
	void *p = A(malloc)(64);
	cr_assert_not_null(p);
	cr_assert(heap_owner_entry_in(p, &oe));
	cr_assert_eq(heap_entry_heap(oe), heap_of(p));
	cr_assert_eq(oe, heap_owner[heap_owner_index((uintptr_t)p)], "p's own slot");
	A(free)(p);
}

/* free's fast path reads a slot for every pointer, with no bound test
 * (heap_owner_slot_any): p's address bits 26-46, the slot heap_owner_index gives every
 * pointer below 1 << LA_ADDR_BITS; NULL, the first 64 MiB and the pointers with only bits
 * above 46 set read slot 0, whose tag is 0 (no heap) however the table's first page was
 * counted. free(NULL) does nothing and keeps errno; free of a pointer in the first 64 MiB
 * or at 1 << LA_ADDR_BITS is reported (corruption.c), not taken for NULL. */
Test(heap_owner, free_reads_a_slot_for_every_pointer_and_slot_0_has_no_heap)
{
	void *p = A(malloc)(64);
	cr_assert_not_null(p);
	uintptr_t a = (uintptr_t)p;
	cr_assert_eq(heap_owner_slot_any(p), heap_owner_index(a));
	cr_assert_eq(heap_owner_slot_any((void *)(a | ((uintptr_t)1 << LA_ADDR_BITS))),
	             heap_owner_index(a), "the top bits dropped");
	cr_assert_eq(heap_owner_slot_any(NULL), 0);
	cr_assert_eq(heap_owner_slot_any((void *)(uintptr_t)(LA_HEAP_SIZE - 1)), 0);
	cr_assert_eq(heap_owner_slot_any((void *)((uintptr_t)1 << LA_ADDR_BITS)), 0);
	cr_assert_eq(heap_owner_slot_any((void *)~(uintptr_t)(LA_HEAP_SIZE - 1)), LA_HEAP_SLOTS - 1,
	             "in the table");
	cr_assert_eq(heap_owner_slot_any((void *)(((uintptr_t)1 << LA_ADDR_BITS) - 16)),
	             LA_HEAP_SLOTS - 1);
	cr_assert_eq(heap_entry_tag(heap_owner[0]), 0, "slot 0 holds no heap");
	errno = 1234;
	A(free)(NULL);
	cr_assert_eq(errno, 1234);
	A(free)(p);
	void *q = A(malloc)(64);
	cr_assert_eq(q, p, "p went to the cache, and NULL's free changed nothing there");
	A(free)(q);
}

/* realloc(NULL, n) leaves on the owner table's bound test: it reads no entry. NULL's slot
 * (slot 0) made to carry this thread's tag and a page map at address 0 (realloc followed
 * it to a load at 0xc9c: SIGSEGV) is not read. free(NULL) reads that slot (its tag 0:
 * free_reads_a_slot_for_every_pointer_and_slot_0_has_no_heap above). */
Test(heap_owner, realloc_of_null_reads_no_entry)
{
	void *p = A(malloc)(64); /* the cache set up: la_tcache.tag is the arena's */
	cr_assert_not_null(p);
	uint64_t saved = __atomic_load_n(&heap_owner[0], __ATOMIC_RELAXED);
	__atomic_store_n(&heap_owner[0], (uint64_t)la_tcache.tag, __ATOMIC_RELAXED);
	void *q = A(realloc)(NULL, 48);
	__atomic_store_n(&heap_owner[0], saved, __ATOMIC_RELAXED);
	cr_assert_not_null(q);
	cr_assert_eq(heap_owner_tag(q), la_tcache.tag, "a block of the thread's arena");
	A(free)(q);
	A(free)(p);
}

/* free's fast path takes the heap's page map from the owner-table entry (its low bits
 * cleared, biased by the heap's address bits 26-31: heap_owner_base) and indexes it by the
 * pointer's low 32 bits, not by its offset in the heap; the entry names the heap and the
 * tag of its arena. Checked for a heap at every value of those six bits (the entries of a
 * page the test writes itself, as heap_map_span would), and for the heap of a block. */
Test(heap_owner, an_entry_names_its_heap_its_page_map_and_its_arena)
{
	void *p = A(malloc)(64);
	cr_assert_not_null(p);
	uint64_t e = heap_owner_entry(p);
	cr_assert_eq(heap_entry_heap(e), heap_of(p));
	cr_assert_eq(heap_entry_tag(e), la_tcache.tag, "the calling thread's arena's heap");
	cr_assert_eq(heap_entry_tag(e), heap_tag(heap_of(p)->arena->index));
	struct heap *h = heap_of(p);
	uint32_t lo = (uint32_t)(uintptr_t)p;
	cr_assert_eq(&heap_entry_pagemap(e)[lo >> LA_PAGE_SHIFT], &h->pagemap[heap_page_of(h, p)]);
	uint32_t pe = h->pagemap[heap_page_of(h, p)];
	cr_assert_eq(pm_class(pe), sc_class_of(64));
	cr_assert_eq((uintptr_t)h + pm_off(pe), (uintptr_t)span_base(h, span_lookup(h, p)));
	cr_assert_eq(lo - (pe & ~PM_CLASS_MASK),
	             (uint32_t)((uintptr_t)p - (uintptr_t)span_base(h, span_lookup(h, p))),
	             "the pointer's low bits less the entry's are the offset in the span");
	for (uint64_t v = 0; v < 64; v++) {
		/* a heap at bits 26-31 = v, in the 4 GiB of p's and in the next: the base
		 * rounds up to the heap, and every page's entry is found where it lies */
		for (uint64_t hi = 0; hi < 2; hi++) {
			uintptr_t hv = (((uintptr_t)p >> 32) + hi) << 32 | v << LA_HEAP_SHIFT;
			uint64_t ent = heap_owner_base((void *)hv) | 7;
			cr_assert_eq(ent & HEAP_OWNER_TAG_MASK, 7, "the base leaves the tag alone");
			cr_assert_eq((uintptr_t)heap_entry_heap(ent), hv);
			for (uint32_t pg = 0; pg < LA_HEAP_PAGES; pg += 1111) {
				uint32_t q = (uint32_t)(hv + ((uintptr_t)pg << LA_PAGE_SHIFT) + 48);
				cr_assert_eq(
				        (uintptr_t)&heap_entry_pagemap(ent)[q >> LA_PAGE_SHIFT],
				        hv + offsetof(struct heap, pagemap) + 4 * pg,
				        "heap %#lx page %u", (unsigned long)hv, pg);
				cr_assert_eq(pm_head(pm_entry((struct heap *)hv, pg)), pg);
			}
		}
	}
	uint32_t held = tcache_count(sc_class_of(64));
	A(free)(p);
	cr_assert_eq(tcache_count(sc_class_of(64)), held + 1, "freed into its bin");
	cr_assert_eq(A(malloc)(64), p);
	A(free)(p);
}

/* free's fast path addresses p's page-map entry from p's bits and its owner-table index
 * (heap_pm_entry_at), not from the owner entry: that is &h->pagemap[page] only while a heap
 * is aligned to its size and the multiplier is (1 - 1/1024) of it. Checked for a block of
 * ours, and for heaps at the first slot (the 64 MiB above the first 64 MiB, which have no
 * slot) and the next, at each value of bits 26-31 and on into the next 4 GiB (every 997th
 * page), and at the table's last slot: at a page's first byte, inside it and at its last,
 * against the heap's own page map and the owner entry's (heap_entry_pagemap). */
static void check_pm_entry_at(uintptr_t h, uint32_t pg, uintptr_t in)
{
	uintptr_t q = h + ((uintptr_t)pg << LA_PAGE_SHIFT) + in;
	uintptr_t u = heap_owner_index(q);
	cr_assert_eq(u, heap_owner_index(h), "p's slot is its heap's");
	cr_assert_eq(heap_owner_slot_any((void *)q), u, "free's slot is the same");
	cr_assert_eq((uintptr_t)heap_pm_entry_at((void *)q, u),
	             (uintptr_t)(((struct heap *)h)->pagemap + pg), "heap %#lx page %u +%lu",
	             (unsigned long)h, pg, (unsigned long)in);
	cr_assert_eq(heap_pm_entry_at((void *)q, u),
	             &heap_entry_pagemap(heap_owner_base((void *)h))[(uint32_t)q >> LA_PAGE_SHIFT],
	             "the owner entry's address: heap %#lx page %u", (unsigned long)h, pg);
}

Test(heap_owner, free_addresses_the_page_map_entry_from_the_pointer)
{
	void *p = A(malloc)(64);
	cr_assert_not_null(p);
	struct heap *h = heap_of(p);
	cr_assert_eq(heap_pm_entry_at(p, heap_owner_index((uintptr_t)p)),
	             &h->pagemap[heap_page_of(h, p)]);
	cr_assert_eq(*heap_pm_entry_at(p, heap_owner_index((uintptr_t)p)), heap_pm_entry_of(h, p));
	A(free)(p);
	uintptr_t heaps[] = {LA_HEAP_SIZE, 2 * LA_HEAP_SIZE, (uintptr_t)h};
	for (unsigned i = 0; i < sizeof heaps / sizeof heaps[0]; i++)
		for (uint32_t pg = 0; pg < LA_HEAP_PAGES; pg++) {
			check_pm_entry_at(heaps[i], pg, 0);
			check_pm_entry_at(heaps[i], pg, LA_PAGE - 1);
		}
	for (uintptr_t v = 1; v < 70; v++) /* bits 26-31 wrap at 64: into the next 4 GiB */
		for (uint32_t pg = 0; pg < LA_HEAP_PAGES; pg += 997)
			check_pm_entry_at(v << LA_HEAP_SHIFT, pg, 48);
	uintptr_t last = (uintptr_t)(LA_HEAP_SLOTS - 1) << LA_HEAP_SHIFT; /* the last slot's heap */
	cr_assert_eq(heap_owner_index(last), LA_HEAP_SLOTS - 1);
	cr_assert_eq(heap_owner_slot_any((void *)(last + 48)), LA_HEAP_SLOTS - 1);
	for (uint32_t pg = 0; pg < LA_HEAP_PAGES; pg++)
		check_pm_entry_at(last, pg, pg % LA_PAGE);
}

/* A heap's slot holds its page map's base and tag while it lives and no tag after (a
 * pointer into its old range is in no heap); each page of the table counts as metadata
 * once, when a heap is first registered on it (its first slot is not 0 from then on): a
 * heap created again on a page whose heap went does not count the page a second time (the
 * page stayed resident). */
Test(heap_owner, a_page_of_the_table_counts_once_and_a_destroyed_heap_is_no_heap)
{
	struct arena *a = tcache_arena(&la_tcache);
	struct la_counters *pc = &shm_process_block()->c;
	/* under the arena's lock (heap_create and heap_destroy count under it), asserted
	 * after it (a failed assertion with the lock held would hang the exit) */
	arena_lock(a);
	uint64_t m0 = __atomic_load_n(&pc->metadata_bytes, __ATOMIC_RELAXED);
	struct heap *h = heap_create(a, a->index, a->c);
	uint64_t m1 = __atomic_load_n(&pc->metadata_bytes, __ATOMIC_RELAXED);
	uintptr_t slot = h ? heap_owner_index((uintptr_t)h) : 0;
	uint64_t e = h ? heap_owner[slot] : 0, first = heap_owner[heap_owner_page_first(slot)];
	if (h)
		heap_destroy(h);
	uint16_t tag_after = heap_owner_tag(h);
	uint64_t first_after = heap_owner[heap_owner_page_first(slot)];
	struct heap *h2 = heap_create(a, a->index, a->c);
	uint64_t m2 = __atomic_load_n(&pc->metadata_bytes, __ATOMIC_RELAXED);
	if (h2)
		heap_destroy(h2);
	arena_unlock(a);
	cr_assert_not_null(h);
	cr_assert_not_null(h2);
	cr_assert_eq(heap_entry_heap(e), h);
	cr_assert_eq(heap_entry_tag(e), heap_tag(a->index));
	cr_assert_neq(first, 0, "the page is counted");
	cr_assert_leq(m1 - m0, LA_PAGE, "a page at most");
	cr_assert_eq(tag_after, 0, "a destroyed heap is no heap");
	cr_assert_neq(first_after, 0, "the mark stays");
	uintptr_t slot2 = h2 ? heap_owner_index((uintptr_t)h2) : 0;
	bool same_page = ((uintptr_t)&heap_owner[slot2] ^ (uintptr_t)&heap_owner[slot]) < LA_PAGE;
	cr_assert_eq(heap_owner_page_first(slot) <= slot, true);
	cr_assert_eq((uintptr_t)&heap_owner[heap_owner_page_first(slot)] / LA_PAGE,
	             (uintptr_t)&heap_owner[slot] / LA_PAGE, "the mark is on the slot's page");
	cr_assert_eq(m2 - m1, same_page ? 0 : LA_PAGE, "heap at %p, then at %p", (void *)h,
	             (void *)h2);
}
