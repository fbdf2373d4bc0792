/* corruption.c — misuse is detected and reported in one exact line, then SIGABRT. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/api.h"
#include "api/child.h"

static void expect_abort(void (*fn)(void), const char *message)
{
	struct child_result r = run_child(fn);
	assert_child_aborted_with(r, message);
	cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
}

static void *volatile sink;

static void small_double_free(void)
{
	void *p = A(malloc)(40);
	A(free)(p);
	A(free)(p);
}
Test(corruption, double_free_of_a_small_block)
{
	expect_abort(small_double_free, "liballoc: free(): double free detected");
}

static void double_free_after_flush(void)
{
	void *p[2000];
	for (int i = 0; i < 2000; i++)
		p[i] = A(malloc)(64);
	/* the cache overflows: most go back to their spans. p[2] and p[4], from the same
	 * refill as p[3], stay: its span keeps blocks in use and is not released (a block of
	 * a released span is an invalid pointer, not a double free) */
	for (int i = 0; i < 2000; i++)
		if (i != 2 && i != 4)
			A(free)(p[i]);
	A(free)(p[3]);
}
Test(corruption, double_free_after_the_cache_returned_the_block)
{
	expect_abort(double_free_after_flush, "liballoc: free(): double free detected");
}

/* Blocks of another thread's arena (the thread stays alive, so its arena stays owned and
 * this thread's frees of them are remote: handed over 64 at a time). */
enum { FOREIGN = 65 };
static void *foreign[FOREIGN];
static pthread_barrier_t foreign_made;

static void *foreign_owner(void *arg)
{
	for (int i = 0; i < FOREIGN; i++)
		foreign[i] = A(malloc)(48);
	pthread_barrier_wait(&foreign_made);
	for (;;)
		pause();
	return arg;
}

static void make_foreign_blocks(void)
{
	A(mallopt)(M_ARENA_MAX, 16); /* a thread of its own per arena, whatever the CPUs */
	sink = A(malloc)(48);        /* this thread's own cache and arena */
	pthread_t t;
	pthread_barrier_init(&foreign_made, NULL, 2);
	pthread_create(&t, NULL, foreign_owner, NULL);
	pthread_barrier_wait(&foreign_made);
}

static void remote_double_free_waiting(void)
{
	make_foreign_blocks();
	A(free)(foreign[0]); /* waits in this thread's batch for the owner */
	A(free)(foreign[0]);
}
Test(corruption, double_free_of_another_threads_block_waiting_to_be_handed_over)
{
	expect_abort(remote_double_free_waiting, "liballoc: free(): double free detected");
}

static void remote_double_free_handed_over(void)
{
	make_foreign_blocks();
	for (int i = 0; i < FOREIGN; i++)
		A(free)(foreign[i]); /* the 65th free hands the first 64 over to the owner */
	A(free)(foreign[0]);
}
Test(corruption, double_free_of_another_threads_block_handed_over_to_its_owner)
{
	expect_abort(remote_double_free_handed_over, "liballoc: free(): double free detected");
}

static void remote_interior_free(void)
{
	make_foreign_blocks();
	A(free)((char *)foreign[0] + 16); /* inside another thread's 48-byte block */
}
Test(corruption, free_of_an_interior_pointer_into_another_threads_block)
{
	expect_abort(remote_interior_free, "liballoc: free(): invalid pointer");
}

static void large_double_free(void)
{
	void *p = A(malloc)(100000);
	sink = A(malloc)(100000); /* keeps the heap from going idle */
	A(free)(p);
	A(free)(p);
}
Test(corruption, double_free_of_a_large_block)
{
	expect_abort(large_double_free, "liballoc: free(): double free detected");
}

/* the block is no longer the parked one: another large free sent it back to its heap */
static void large_double_free_unparked(void)
{
	void *p = A(malloc)(100000);
	sink = A(malloc)(100000);
	void *q = A(malloc)(300000);
	A(free)(p);
	A(free)(q);
	A(free)(p);
}
Test(corruption, double_free_of_a_large_block_no_longer_parked)
{
	expect_abort(large_double_free_unparked, "liballoc: free(): double free detected");
}

/* The block sits in the freeing thread's large slot (its thread cache keeps the last large
 * block it freed, to give it back to its next malloc of the size without a lock): a second
 * free by another thread finds it freed too. */
static void *free_again(void *p)
{
	A(free)(p);
	return NULL;
}
static void large_double_free_other_thread(void)
{
	void *p = A(malloc)(64 << 10);
	sink = A(malloc)(100000);
	A(free)(p);
	pthread_t t;
	pthread_create(&t, NULL, free_again, p);
	pthread_join(t, NULL);
}
Test(corruption, double_free_of_a_large_block_by_another_thread)
{
	expect_abort(large_double_free_other_thread, "liballoc: free(): double free detected");
}

/* ... and after a malloc of that size took it back and freed it again, twice */
static void large_double_free_after_reuse(void)
{
	void *p = A(malloc)(64 << 10);
	A(free)(p);
	void *q = A(malloc)(64 << 10);
	A(free)(q);
	A(free)(q);
}
Test(corruption, double_free_of_a_large_block_taken_back_and_freed_again)
{
	expect_abort(large_double_free_after_reuse, "liballoc: free(): double free detected");
}

/* A block above 1 MiB starts 256 bytes into its first page (malloc.c, colour_span): its
 * second free is told from a wild pointer all the same, parked or back in its heap, and the
 * start of its first page, which it does not start at, is no block. */
static void coloured_double_free(void)
{
	A(mallopt)(M_MMAP_THRESHOLD, 16 << 20); /* from a heap */
	char *p = A(malloc)(2 << 20);
	sink = A(malloc)(100000);
	A(free)(p);
	A(free)(p);
}
Test(corruption, double_free_of_a_block_past_its_pages_start)
{
	expect_abort(coloured_double_free, "liballoc: free(): double free detected");
}

static void coloured_double_free_unparked(void)
{
	A(mallopt)(M_MMAP_THRESHOLD, 16 << 20);
	char *p = A(malloc)(2 << 20);
	sink = A(malloc)(100000);
	void *q = A(malloc)(3 << 20);
	A(free)(p);
	A(free)(q);
	A(free)(p);
}
Test(corruption, double_free_of_a_block_past_its_pages_start_no_longer_parked)
{
	expect_abort(coloured_double_free_unparked, "liballoc: free(): double free detected");
}

static void coloured_page_start_free(void)
{
	A(mallopt)(M_MMAP_THRESHOLD, 16 << 20);
	char *p = A(malloc)(2 << 20);
	A(free)((void *)((uintptr_t)p & ~(uintptr_t)4095));
}
Test(corruption, free_of_the_page_start_before_a_block_past_it)
{
	expect_abort(coloured_page_start_free, "liballoc: free(): invalid pointer");
}

static void large_realloc_in_slot(void)
{
	char *p = A(malloc)(64 << 10);
	A(free)(p);
	sink = A(realloc)(p, 32 << 10);
}
Test(corruption, realloc_of_a_large_block_in_the_thread_caches_slot)
{
	expect_abort(large_realloc_in_slot, "liballoc: realloc(): invalid pointer");
}

static void direct_double_free(void)
{
	void *p = A(malloc)(8 << 20);
	A(free)(p);
	A(free)(p);
}
Test(corruption, double_free_of_a_direct_mapping)
{
	expect_abort(direct_double_free, "liballoc: free(): double free detected");
}

/* realloc and malloc_usable_size look a mapping up without the lock: a freed one (here
 * still mapped, in the mapping cache: mappings are being recycled) is not taken for live */
static char *freed_cached_mapping(void)
{
	A(free)(A(malloc)(40 << 20));
	sink = A(malloc)(40 << 20); /* a cache hit: freed mappings are cached from now on */
	char *p = A(malloc)(8 << 20);
	p[0] = 1;
	A(free)(p);
	unsigned char v;
	if (mincore(p, 4096, &v) != 0)
		_exit(3); /* (not cached: the test would not test what it says) */
	return p;
}
static void realloc_of_a_freed_mapping(void)
{
	char *p = freed_cached_mapping();
	sink = A(realloc)(p, (8 << 20) - 100);
}
Test(corruption, realloc_of_a_freed_direct_mapping_still_mapped)
{
	expect_abort(realloc_of_a_freed_mapping, "liballoc: realloc(): invalid pointer");
}
static void usable_size_of_a_freed_mapping(void)
{
	char *p = freed_cached_mapping();
	sink = (void *)A(malloc_usable_size)(p);
}
Test(corruption, usable_size_of_a_freed_direct_mapping_still_mapped)
{
	expect_abort(usable_size_of_a_freed_mapping,
	             "liballoc: malloc_usable_size(): invalid pointer");
}

static void stack_pointer(void)
{
	char buf[64];
	sink = buf;
	A(free)(sink);
}
Test(corruption, free_of_a_stack_pointer)
{
	expect_abort(stack_pointer, "liballoc: free(): invalid pointer");
}

static void interior_small(void)
{
	char *p = A(malloc)(100);
	A(free)(p + 16);
}
Test(corruption, free_of_an_interior_pointer)
{
	expect_abort(interior_small, "liballoc: free(): invalid pointer");
}

/* ... in every small class, at a block's second 16 bytes and in its last 16, on whichever
 * page of its span that falls (free's fast path reads the class and the span's start from
 * the page-map word of the pointer's page) */
static size_t interior_size, interior_at;
static void interior_of_class(void)
{
	char *p[8];
	for (int i = 0; i < 8; i++)
		p[i] = A(malloc)(interior_size);
	A(free)(p[7] + interior_at);
}
Test(corruption, free_of_an_interior_pointer_in_every_small_class)
{
	for (size_t n = 17; n <= 16384;) {
		void *p = A(malloc)(n);
		size_t size = A(malloc_usable_size)(p);
		A(free)(p);
		interior_size = size;
		interior_at = 16;
		expect_abort(interior_of_class, "liballoc: free(): invalid pointer");
		interior_at = size - 16;
		expect_abort(interior_of_class, "liballoc: free(): invalid pointer");
		n = size + 1;
	}
}

static void interior_large(void)
{
	char *p = A(malloc)(200000);
	A(free)(p + 8192);
}
Test(corruption, free_of_an_interior_pointer_into_a_large_block)
{
	expect_abort(interior_large, "liballoc: free(): invalid pointer");
}

static void unaligned(void)
{
	char *p = A(malloc)(100);
	A(free)(p + 3);
}
Test(corruption, free_of_an_unaligned_pointer)
{
	expect_abort(unaligned, "liballoc: free(): invalid pointer");
}

/* The last page of the heap holding a fresh block: free pages no block ever used (the
 * page map does not even record the free span's end there). Heaps are 64 MiB regions
 * aligned to their size (LA_HEAP_SIZE). */
static void heap_last_page(void)
{
	uintptr_t p = (uintptr_t)A(malloc)(64);
	uintptr_t heap = p & ~(((uintptr_t)1 << 26) - 1);
	A(free)((void *)(heap + ((uintptr_t)1 << 26) - 4096));
}
Test(corruption, free_of_a_pointer_into_the_unused_end_of_a_heap)
{
	expect_abort(heap_last_page, "liballoc: free(): invalid pointer");
}

static char static_area[256] __attribute__((aligned(64)));
static void static_pointer(void)
{
	A(free)(static_area + 64);
}
Test(corruption, free_of_a_pointer_never_allocated)
{
	expect_abort(static_pointer, "liballoc: free(): invalid pointer");
}

/* Pointers with no slot in the heap-owner table: in the first 64 MiB (a non-PIE program's
 * static data starts at 4 MiB) and past the 47 address bits. free and realloc leave their
 * fast path on the table's bound test for them as for NULL (heap_owner_entry_in): they are
 * still reported, as any pointer never allocated, not taken for NULL. */
static void *volatile wild;
static void free_wild(void)
{
	A(free)(wild);
}
static void realloc_wild(void)
{
	sink = A(realloc)(wild, 100);
}
Test(corruption, free_and_realloc_of_a_pointer_outside_the_owner_tables_range)
{
	void *outside[] = {(void *)(uintptr_t)0x400040, (void *)(uintptr_t)((64u << 20) - 64),
	                   (void *)(((uintptr_t)1 << 47) + 64)};
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
		wild = outside[i];
		expect_abort(free_wild, "liballoc: free(): invalid pointer");
		expect_abort(realloc_wild, "liballoc: realloc(): invalid pointer");
	}
}

/* Pointers into a heap's own header (its fields, page map, descriptor index and
 * descriptors: a heap's first 217 pages; a heap of large blocks keeps 12 pages of grid
 * descriptors after them, its data from page 229 on): free's fast path reads the
 * owner-table slot from the pointer's address bits alone (no bound test) and the header
 * pages' page-map entries, and a heap of large blocks takes a page-aligned pointer's grid
 * descriptor (page 0, 224: multiples of 16) before its page map (free_in_large_heap). None
 * is a block: each is reported, in the thread's own heaps and in another thread's
 * (free_other), not pushed into a bin or the large slot. */
static const unsigned header_pages[] = {0, 1, 100, 216, 217, 224, 228};
static unsigned header_at;
static int header_heap; /* 0: the small blocks' heap, 1: a heap of large blocks, 2: another
                         * thread's small blocks' heap */
static int header_call; /* 0: free, 1: realloc */
static void *small_from_thread(void *arg)
{
	(void)arg;
	return A(malloc)(64);
}
static void free_into_a_header(void)
{
	uintptr_t mask = ((uintptr_t)1 << 26) - 1;
	uintptr_t heap = (uintptr_t)A(malloc)(64) & ~mask;
	if (header_heap == 1) {
		/* past 64 blocks of 9-64 pages an arena serves them from heaps of large blocks
		 * (README Limits): the first one in another heap is in such a heap */
		uintptr_t first = heap;
		for (int i = 0; i < 200 && heap == first; i++)
			heap = (uintptr_t)A(malloc)(40000) & ~mask;
		if (heap == first)
			_exit(3);
	} else if (header_heap == 2) {
		pthread_t t;
		void *q;
		if (pthread_create(&t, NULL, small_from_thread, NULL) || pthread_join(t, &q))
			_exit(3);
		heap = (uintptr_t)q & ~mask;
	}
	wild = (void *)(heap + ((uintptr_t)header_pages[header_at] << 12));
	if (header_call)
		sink = A(realloc)(wild, 100);
	else
		A(free)(wild);
}
Test(corruption, free_and_realloc_of_pointers_into_a_heaps_header)
{
	for (header_heap = 0; header_heap < 3; header_heap++)
		for (header_at = 0; header_at < sizeof(header_pages) / sizeof(header_pages[0]);
		     header_at++) {
			if (header_heap != 1 && header_pages[header_at] >= 217)
				continue; /* a heap of small blocks' data */
			header_call = 0;
			expect_abort(free_into_a_header, "liballoc: free(): invalid pointer");
			header_call = 1;
			expect_abort(free_into_a_header, "liballoc: realloc(): invalid pointer");
		}
}

/* A pointer past the 47 address bits whose low bits are a live block of ours (README
 * Limits): free reads the owner-table slot of its low bits (d0ffdec) and may take it for
 * that block as far as the page map goes; it must still never return as if it freed it
 * (the read of the block's word faults: non-canonical with 4-level paging), so a later
 * malloc never hands the block out twice. Small blocks, a large one in a heap of small
 * blocks (the first 40000 B) and in a heap of large blocks (the 101st: above), a direct
 * mapping (300000 B: above the mmap threshold). */
static size_t alias_size, alias_count;
static void free_an_alias_above_the_address_bits(void)
{
	char *p = NULL;
	for (size_t i = 0; i < alias_count; i++)
		p = A(malloc)(alias_size);
	A(free)((void *)((uintptr_t)p | (uintptr_t)1 << 47));
	_exit(0); /* returned: the block now looks free */
}
Test(corruption, free_of_a_live_blocks_alias_above_the_address_bits_does_not_return)
{
	static const size_t cases[][2] = {{16, 1},    {64, 1},      {1000, 1},  {20000, 1},
	                                  {40000, 1}, {40000, 101}, {300000, 1}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		alias_size = cases[i][0];
		alias_count = cases[i][1];
		struct child_result r = run_child(free_an_alias_above_the_address_bits);
		cr_assert(!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0,
		          "free of the alias of the %zu-th block of %zu B returned (status %#x, "
		          "stderr: %s)",
		          alias_count, alias_size, r.status, r.err);
	}
}

static void realloc_invalid(void)
{
	char buf[32];
	sink = buf;
	sink = A(realloc)(sink, 100);
}
Test(corruption, realloc_of_an_invalid_pointer)
{
	expect_abort(realloc_invalid, "liballoc: realloc(): invalid pointer");
}

/* realloc's fast path takes a large heap block from the page map's entry of its first page
 * and the descriptor spanidx names there (no span_lookup): a freed block's span (parked,
 * or given back to its heap) and a page that headed a span that grew over it are not
 * taken for a live block's. Sizes keep the block in place, where a live one returns p. */
static void realloc_of_a_parked_block(void)
{
	char *p = A(malloc)(40000);
	p[0] = 1;
	A(free)(p); /* parked whole (madvise_throttle's default) */
	sink = A(realloc)(p, 39000);
}
Test(corruption, realloc_of_a_freed_large_heap_block)
{
	expect_abort(realloc_of_a_parked_block, "liballoc: realloc(): invalid pointer");
}
static void realloc_of_a_returned_block(void)
{
	char *p = A(malloc)(40000), *q = A(malloc)(48000);
	A(free)(p);
	A(free)(q); /* q parked, p back to its heap's free spans */
	sink = A(realloc)(p, 39000);
}
Test(corruption, realloc_of_a_large_heap_block_given_back)
{
	expect_abort(realloc_of_a_returned_block, "liballoc: realloc(): invalid pointer");
}
static void realloc_inside_a_grown_block(void)
{
	char *a = A(malloc)(81920);
	/* halved in place: its second half becomes a span of its own, freed */
	if (A(realloc)(a, 40960) != a)
		_exit(3); /* (not in place: the test would not test what it says) */
	/* and grown in place again over it */
	if (A(realloc)(a, 81920) != a)
		_exit(3);
	sink = A(realloc)(a + 40960, 40000); /* that span's first page is inside a now */
}
Test(corruption, realloc_of_a_page_inside_a_block_grown_over_it)
{
	expect_abort(realloc_inside_a_grown_block, "liballoc: realloc(): invalid pointer");
}

/* A write after free into a block in a thread cache or the transfer cache cannot corrupt
 * them (they keep their pointers outside the blocks); in a span's free list the link is
 * checked when the block is taken. So: free blocks while one of their span stays live,
 * flush the caches and trim (which empties the transfer cache into the spans), overwrite
 * the first block's link, and allocate until refills have taken every freed block. */
enum { CORRUPT_N = 300 };

void liballoc_flush_caches(void) __attribute__((weak)); /* liballoc.h, preloaded or linked */

/* CORRUPT_N blocks of 48 B into p[], all but the last freed back onto their span's list
 * (caches flushed); returns p[0]. */
static char *free_into_span(char **p)
{
	for (int i = 0; i < CORRUPT_N; i++)
		p[i] = A(malloc)(48);
	for (int i = 0; i + 1 < CORRUPT_N; i++) /* the last one keeps the span in use */
		A(free)(p[i]);
	if (!liballoc_flush_caches)
		abort();
	liballoc_flush_caches();
	A(malloc_trim)(0);
	return p[0];
}

static void allocate_past_it(void)
{
	for (int i = 0; i < 2 * CORRUPT_N; i++)
		sink = A(malloc)(48);
}
static void corrupt_link(void)
{
	char *blocks[CORRUPT_N];
	char *p = free_into_span(blocks);
	memset(p, 0x41, 8); /* use after free: overwrite the free-list link */
	allocate_past_it();
}
Test(corruption, corrupted_free_list_link)
{
	expect_abort(corrupt_link, "liballoc: malloc(): corrupted free list detected");
}

static void corrupt_link_low_bits(void)
{
	char *blocks[CORRUPT_N];
	char *p = free_into_span(blocks);
	p[0] ^= 0x08; /* the link still points into the same heap, but between blocks */
	allocate_past_it();
}
Test(corruption, free_list_link_pointing_between_blocks)
{
	expect_abort(corrupt_link_low_bits, "liballoc: malloc(): corrupted free list detected");
}

/* The link of any freed block is checked when its block is taken, wherever it lies in the
 * list: a refill takes blocks from a span's list several at a time (two a step, the first
 * of an odd count alone), and each position has its own check. */
static int corrupt_at;

static void corrupt_link_at(void)
{
	char *blocks[CORRUPT_N];
	free_into_span(blocks);
	memset(blocks[corrupt_at], 0x41, 8);
	allocate_past_it();
}
Test(corruption, a_corrupted_link_is_caught_wherever_it_lies_in_the_list)
{
	for (corrupt_at = 0; corrupt_at < 8; corrupt_at++)
		expect_abort(corrupt_link_at, "liballoc: malloc(): corrupted free list detected");
}
