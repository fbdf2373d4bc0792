/* heap.c — the page allocator inside a heap: after any mix of splits (large and aligned
 * blocks, in-place shrinks), merges (frees, in-place growth) and small spans, the spans
 * tile the heap's data pages exactly, no two free spans touch, the page counts agree, and
 * every span has one descriptor from the pool (the rest are on its free list); and the
 * header pages a heap touches follow its spans, not its pages. Linked with liballoc.a;
 * every test runs in its own process. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "api/api.h"
#include "arena.h"
#include "heap.h"
#include "liballoc.h"

static void set(const char *name, int64_t v)
{
	char reason[160];
	cr_assert_eq(liballoc_set(name, v, reason, sizeof(reason)), 0, "%s: %s", name, reason);
}

/* Walk every heap of arena a, under its lock, and check the invariants above. */
static void check_arena(struct arena *a)
{
	arena_lock(a);
	for (struct heap *h = a->heaps; h; h = h->next) {
		uint32_t pg = h->first_page, spans = 0, free_pages = 0, used_pages = 0;
		bool prev_free = false;
		while (pg < LA_HEAP_PAGES) {
			struct span *s = span_at(h, pg);
			cr_assert_neq(s->kind, SPAN_NONE, "heap %p: page %u starts no span",
			              (void *)h, pg);
			cr_assert_eq(s->first, pg, "descriptor of page %u names page %u", pg,
			             s->first);
			cr_assert_gt(s->npages, 0, "empty span at page %u", pg);
			cr_assert_leq(pg + s->npages, LA_HEAP_PAGES,
			              "span at %u runs past the heap", pg);
			for (uint32_t i = pg + 1; i < pg + s->npages; i++)
				cr_assert_eq(h->spanidx[i], 0,
				             "page %u inside the span at %u has a "
				             "descriptor",
				             i, pg);
			bool is_free = s->kind == SPAN_FREE;
			cr_assert(!(is_free && prev_free), "free spans meet at page %u", pg);
			if (is_free)
				free_pages += s->npages;
			else
				used_pages += s->npages;
			prev_free = is_free;
			spans++;
			pg += s->npages;
		}
		cr_assert_eq(free_pages, h->free_pages);
		cr_assert_eq(used_pages, h->used_pages);
		uint32_t given_back = 0;
		for (struct span *d = h->desc_free; d; d = d->next) {
			cr_assert_eq(d->kind, SPAN_NONE);
			given_back++;
		}
		cr_assert_eq(h->desc_top - 1 - given_back, spans,
		             "%u descriptors handed out, %u given back, %u spans", h->desc_top - 1,
		             given_back, spans);
	}
	arena_unlock(a);
}

/* a broken descriptor pool can link a span into a list twice: fail, do not hang */
Test(heap, spans_tile_the_heap_through_splits_and_merges, .timeout = 60)
{
	/* every size here stays in the heap: no direct mappings, no threshold moves */
	set("mmap_threshold", 32 << 20);
	set("mmap_dynamic", 0);
	enum { SLOTS = 48, ROUNDS = 3000 };
	void *slot[SLOTS] = {0};
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	struct arena *a = NULL;
	for (int r = 0; r < ROUNDS; r++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		uint32_t x = (uint32_t)(rng >> 33);
		unsigned k = x % SLOTS;
		size_t n = (size_t)(4 + (x >> 8) % 160) * 4096; /* 16 KiB .. 652 KiB */
		switch ((x >> 20) % 6) {
		case 0: /* aligned: a lead split and a tail shrink */
			A(free)(slot[k]);
			slot[k] = A(aligned_alloc)((size_t)1 << (16 + (x >> 24) % 5), n);
			break;
		case 1: /* in place if the neighbour allows: growth merges, shrink splits */
			if (slot[k]) {
				void *p = A(realloc)(slot[k], n);
				cr_assert_not_null(p);
				slot[k] = p;
				break;
			}
			/* fall through */
		case 2:
		case 3:
			A(free)(slot[k]);
			slot[k] = A(malloc)(n);
			break;
		case 4: /* small spans between the large ones */
			A(free)(slot[k]);
			slot[k] = A(malloc)(16 + (x >> 8) % 16000);
			break;
		default:
			A(free)(slot[k]);
			slot[k] = NULL;
			break;
		}
		if (slot[k]) {
			memset(slot[k], (int)r, 64);
			if (!a)
				a = heap_of(slot[k])->arena;
		}
		if (a && r % 50 == 0)
			check_arena(a);
	}
	cr_assert_not_null(a);
	for (unsigned k = 0; k < SLOTS; k++)
		A(free)(slot[k]);
	check_arena(a);
}

static unsigned resident_pages(void *p, size_t pages)
{
	static unsigned char v[1024];
	cr_assert_leq(pages, sizeof(v));
	cr_assert_eq(mincore(p, pages << LA_PAGE_SHIFT, v), 0);
	unsigned n = 0;
	for (size_t i = 0; i < pages; i++)
		n += v[i] & 1;
	return n;
}

Test(heap, header_pages_follow_spans_not_pages)
{
	/* 4000 blocks of 2 KiB: 125 spans of 16 pages, 2000 data pages, all touched */
	enum { N = 4000 };
	static void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = A(malloc)(2048);
		cr_assert_not_null(p[i]);
		memset(p[i], i, 2048);
	}
	struct heap *h = heap_of(p[0]);
	unsigned header = resident_pages(h, h->first_page);
	/* the page map (4 bytes a page: 3 pages here, with the heap's own fields), the
	 * descriptor index (2 bytes a page: 2) and some 130 descriptors of 48 bytes (2), and
	 * room for what the test runner allocated. A descriptor slot per page would have
	 * touched 2200 * 48 bytes: 26 pages instead of 2. */
	cr_assert_leq(header, 10, "%u header pages resident", header);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
}

/* Eight large blocks that grow by 64 bytes a step, side by side, so none can grow where it
 * is for long: a block that has to move takes a quarter more than asked, so from 20 KiB to
 * 1 MiB each moves 12-16 times (without the slack: 39-60); a shrink by more than a quarter
 * still gives pages back. */
Test(heap, growing_large_block_moves_logarithmically)
{
	set("mmap_threshold", 32 << 20);
	set("mmap_dynamic", 0);
	enum { K = 8 };
	unsigned char *b[K] = {0};
	unsigned moves[K] = {0};
	for (size_t n = 20 << 10; n <= 1 << 20; n += 64)
		for (int k = 0; k < K; k++) {
			unsigned char *q = A(realloc)(b[k], n);
			cr_assert_not_null(q);
			if (b[k] && q != b[k])
				moves[k]++;
			if (b[k])
				cr_assert_eq(q[n - 65], (unsigned char)(n - 65), "contents lost");
			for (size_t i = n - 64; i < n; i++)
				q[i] = (unsigned char)i;
			q[n - 65] = (unsigned char)(n - 65);
			b[k] = q;
		}
	for (int k = 0; k < K; k++) {
		cr_assert_leq(moves[k], 24, "block %d moved %u times", k, moves[k]);
		size_t have = A(malloc_usable_size)(b[k]);
		unsigned char *q = A(realloc)(b[k], have / 2);
		cr_assert_not_null(q);
		cr_assert_lt(A(malloc_usable_size)(q), have * 3 / 4,
		             "a shrink by half kept it all");
		A(free)(q);
	}
}
