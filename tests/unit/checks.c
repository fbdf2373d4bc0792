/* checks.c — the heavier validation behind check_free_lists. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/child.h"
#include "arena.h"
#include "liballoc.h"
#include "sizeclass.h"

static void *volatile sink;

static void overwrite_a_span_link(void)
{
	char reason[160];
	liballoc_set("check_free_lists", 1, reason, sizeof(reason));
	char *a = A(malloc)(96), *b = A(malloc)(96);
	A(free)(a);
	A(free)(b);         /* no thread cache: both go back to their span's list */
	memset(b, 0x41, 8); /* a use after free overwrites the list link */
	sink = A(malloc)(96);
	sink = A(malloc)(96);
}

Test(check_free_lists, a_corrupted_span_link_is_detected)
{
	struct child_result r = run_child(overwrite_a_span_link);
	assert_child_aborted_with(r, "liballoc: malloc(): corrupted free list detected");
}

Test(check_free_lists, blocks_still_work_without_caches)
{
	char reason[160];
	cr_assert_eq(liballoc_set("check_free_lists", 1, reason, sizeof(reason)), 0);
	struct la_counters c0, c;
	liballoc_stats(&c0);
	void *p[1000];
	for (int i = 0; i < 1000; i++)
		memset(p[i] = A(malloc)(16 + i), i & 0xff, 16 + (size_t)i);
	for (int i = 0; i < 1000; i++)
		A(free)(p[i]);
	liballoc_stats(&c);
	/* refills may take blocks the transfer cache held before (less cached) */
	cr_assert_leq(c.cached_bytes, c0.cached_bytes, "nothing more cached: %llu -> %llu",
	              (unsigned long long)c0.cached_bytes, (unsigned long long)c.cached_bytes);
}

/* realloc moves a small block without realloc_slow's span_lookup (malloc.c,
 * realloc_small_move): a block start of a span's class that the span never handed out
 * (past its bump) is still an invalid pointer, not a live block copied and freed. */
static void realloc_past_the_bump(void)
{
	char *p = A(malloc)(96);
	struct heap *h = heap_of(p);
	struct span *s = span_lookup(h, p);
	if (!s || s->bump >= sc_blocks[s->cls])
		_exit(3); /* (no block past the bump: the test would not test what it says) */
	char *q = (char *)span_base(h, s) + (size_t)s->bump * sc_size[s->cls];
	sink = A(realloc)(q, 4000); /* a size it does not keep: moved */
}

Test(realloc_checks, a_block_its_span_never_handed_out_is_an_invalid_pointer)
{
	struct child_result r = run_child(realloc_past_the_bump);
	assert_child_aborted_with(r, "liballoc: realloc(): invalid pointer");
}
