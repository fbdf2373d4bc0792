/* heap.c — the page allocator inside a heap: after any mix of splits (large and aligned
 * blocks, in-place shrinks), merges (frees, in-place growth) and small spans, the spans
 * tile the heap's data pages exactly, no two free spans touch, the page counts agree, and
 * every span has one descriptor from the pool (the rest are on its free list) or, a
 * block on the grid of a heap of large blocks, its grid page's own; and the header pages
 * a heap touches follow its spans, not its pages. Linked with liballoc.a; every test runs
 * in its own process. */
#include <criterion/criterion.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "arena.h"
#include "heap.h"
#include "pagemap.h"
#include "childerr.h"
#include "liballoc.h"
#include "os.h"
#include "procstatus.h"
#include "stackdepth.h"
#include "tcache.h"
#include "thpdir.h"

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
		uint32_t grid_spans = 0; /* with their grid page's descriptor, not the pool's */
		bool prev_free = false;
		while (pg < LA_HEAP_PAGES) {
			struct span *s = span_at(h, pg);
			cr_assert_neq(s->kind, SPAN_NONE, "heap %p: page %u starts no span",
			              (void *)h, pg);
			if (s - h->desc >= (ptrdiff_t)HEAP_GRID_DESC) {
				cr_assert(h->large && s == span_at_grid(h, pg),
				          "heap %p (large %d): the span at page %u has grid "
				          "descriptor %ld",
				          (void *)h, h->large, pg, (long)(s - h->desc));
				grid_spans++;
			}
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
		spans -= grid_spans;
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
		case 4: /* small spans between the large ones (at least the 64 bytes written
		         * below: 16 + x wrote past blocks of 16-48 bytes into their neighbours) */
			A(free)(slot[k]);
			slot[k] = A(malloc)(64 + (x >> 8) % 16000);
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

/* Resident pages of the pages pages from the one holding p (a block above LA_COLOUR_FROM
 * starts LA_COLOUR bytes into its span's first page). */
static unsigned resident_pages(void *p, size_t pages)
{
	static unsigned char v[1024];
	cr_assert_leq(pages, sizeof(v));
	p = (void *)((uintptr_t)p & ~(LA_PAGE - 1));
	cr_assert_eq(mincore(p, pages << LA_PAGE_SHIFT, v), 0);
	unsigned n = 0;
	for (size_t i = 0; i < pages; i++)
		n += v[i] & 1;
	return n;
}

/* n blocks of 2 KiB into p, every byte written; their heap */
static struct heap *written_2k(void **p, int n)
{
	for (int i = 0; i < n; i++) {
		p[i] = A(malloc)(2048);
		cr_assert_not_null(p[i]);
		memset(p[i], i, 2048);
	}
	return heap_of(p[0]);
}

Test(heap, header_pages_follow_spans_not_pages)
{
	/* 4000 blocks of 2 KiB: 125 spans of 16 pages, 2000 data pages, all touched */
	enum { N = 4000 };
	static void *p[N];
	struct heap *h = written_2k(p, N);
	unsigned header = resident_pages(h, h->first_page);
	/* the page map (4 bytes a page: 3 pages here, with the heap's own fields), the
	 * descriptor index (2 bytes a page: 2) and some 130 descriptors of 48 bytes (2), and
	 * room for what the test runner allocated. A descriptor slot per page would have
	 * touched 2200 * 48 bytes: 26 pages instead of 2. */
	cr_assert_leq(header, 10, "%u header pages resident", header);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
}

Test(heap, a_small_heap_writes_one_page_of_each_header_array)
{
	/* 400 blocks of 2 KiB: some 13 spans of 16 pages, ~200 data pages, all touched (below
	 * 4 MiB of data pages and 85 descriptors, with what the test runner allocated): the
	 * fields' page, and one page each of the page map, the index and the descriptors. At
	 * their natural offsets the first entries of the page map and of the index, and desc[1],
	 * straddled page boundaries: 6 pages */
	enum { N = 400 };
	static void *p[N];
	struct heap *h = written_2k(p, N);
	cr_assert_lt(h->hwm - h->first_page, 1024u);
	cr_assert_lt(h->desc_top, 85u);
	unsigned header = resident_pages(h, h->first_page);
	cr_assert_eq(header, 4, "%u header pages resident", header);
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

/* A small block realloc grows past its class by a few bytes (a string appended to) moves to
 * a block half as large again as its class, where the next steps keep their place: a string
 * grown 1-16 B a step to 2 KiB moved at each of its classes' boundaries (27) before. A block
 * that grows by more (an array doubling) or shrinks gets n's class, no more; near
 * REALLOC_LARGE_FROM (16 KiB) the room stops there (bench strbuild, strbuild32). */
Test(realloc_small, a_block_grown_by_a_few_bytes_moves_to_half_as_large_again)
{
	char *p = A(malloc)(100);
	cr_assert_not_null(p);
	size_t have = A(malloc_usable_size)(p);
	memset(p, 'x', have);
	char *q = A(realloc)(p, have + 1);
	cr_assert_not_null(q);
	cr_assert_geq(A(malloc_usable_size)(q), have + have / 2, "%zu bytes for %zu + 1",
	              A(malloc_usable_size)(q), have);
	for (size_t i = 0; i < have; i++)
		cr_assert_eq(q[i], 'x', "contents lost at %zu", i);
	cr_assert_eq(A(realloc)(q, have + have / 2), q, "the room kept no place");
	A(free)(q);

	char *d = A(malloc)(64);
	cr_assert_not_null(d);
	char *d2 = A(realloc)(d, 128); /* doubled: its own class */
	cr_assert_not_null(d2);
	cr_assert_eq(A(malloc_usable_size)(d2), 128);
	A(free)(d2);

	char *s = A(malloc)(2000);
	cr_assert_not_null(s);
	memset(s, 'y', 2000);
	char *s2 = A(realloc)(s, 100); /* a shrink: n's class */
	cr_assert_not_null(s2);
	cr_assert_eq(A(malloc_usable_size)(s2), 112u, "%zu", A(malloc_usable_size)(s2));
	for (size_t i = 0; i < 100; i++)
		cr_assert_eq(s2[i], 'y', "contents lost at %zu", i);
	A(free)(s2);

	char *b = A(malloc)(12000);
	cr_assert_not_null(b);
	size_t bh = A(malloc_usable_size)(b);
	cr_assert_gt(bh + bh / 2, 16384u);
	char *b2 = A(realloc)(b, bh + 1);
	cr_assert_not_null(b2);
	cr_assert_eq(A(malloc_usable_size)(b2), 16384u, "%zu", A(malloc_usable_size)(b2));
	A(free)(b2);
}

/* A shrink keeps a small block in place down to its class's sc_keep size and moves it one
 * byte below, to that size's class, its contents with it (realloc's fast path; realloc_slow
 * reads the same table in realloc_keeps). */
Test(realloc_small, a_shrink_keeps_the_block_down_to_its_keep_size)
{
	for (unsigned c = SC_KEEP_BELOW + 1; c < LA_NCLASSES; c++) {
		size_t have = sc_size[c], keep = sc_keep[c];
		unsigned char *p = A(malloc)(have);
		cr_assert_not_null(p);
		cr_assert_eq(A(malloc_usable_size)(p), have, "class %u", c);
		memset(p, (int)c, have);
		cr_assert_eq(A(realloc)(p, keep), p, "class %u (%zu B) moved for %zu", c, have,
		             keep);
		unsigned char *q = A(realloc)(p, keep - 1);
		cr_assert_not_null(q);
		cr_assert_neq(q, p, "class %u (%zu B) kept for %zu", c, have, keep - 1);
		cr_assert_eq(A(malloc_usable_size)(q), sc_size[sc_class_of(keep - 1)], "class %u",
		             c);
		for (size_t i = 0; i < keep - 1; i++)
			cr_assert_eq(q[i], (unsigned char)c, "class %u: contents lost at %zu", c,
			             i);
		A(free)(q);
	}
	for (unsigned c = 0; c <= SC_KEEP_BELOW; c++) {
		void *p = A(malloc)(sc_size[c]);
		cr_assert_not_null(p);
		cr_assert_eq(A(realloc)(p, 1), p, "class %u moved for 1 byte", c);
		A(free)(p);
	}
}

Test(realloc_small, a_string_grown_a_few_bytes_a_step_moves_a_few_times)
{
	char *s = NULL;
	unsigned moves = 0;
	size_t len = 0;
	while (len < 2000) {
		size_t add = 1 + len % 16;
		char *q = A(realloc)(s, len + add + 1);
		cr_assert_not_null(q);
		if (s && q != s)
			moves++;
		if (len)
			cr_assert_eq(q[len - 1], 'a', "contents lost");
		memset(q + len, 'a', add);
		len += add;
		q[len] = '\0';
		s = q;
	}
	cr_assert_leq(moves, 14, "moved %u times", moves);
	A(free)(s);
}

/* Blocks of n bytes until malloc fails, each holding the one before (a chain through their
 * first word): the list's head. */
static void *exhaust(size_t n, void *head)
{
	for (void **b; (b = A(malloc)(n)) != NULL; head = b)
		*b = head;
	return head;
}

static void free_chain(void *head)
{
	while (head) {
		void *next = *(void **)head;
		A(free)(head);
		head = next;
	}
}

/* Out of memory: RLIMIT_AS set to the process's size and 1 MiB (no new heap; *old the
 * limit to put back), then the heaps' free pages taken by blocks of 64 KiB and of the
 * largest class: the chain of those blocks (free_chain). */
static void *out_of_memory(struct rlimit *old)
{
	cr_assert_eq(getrlimit(RLIMIT_AS, old), 0);
	long vm_kib = status_kib("VmSize:");
	cr_assert_gt(vm_kib, 0);
	cr_assert_eq(setrlimit(RLIMIT_AS,
	                       &(struct rlimit){(rlim_t)(vm_kib + 1024) * 1024, old->rlim_max}),
	             0);
	return exhaust(LA_SMALL_MAX, exhaust(64 << 10, NULL));
}

/* Out of memory (RLIMIT_AS at the process's size: no new heap; the heaps' pages taken),
 * a block grown past its class by a byte whose block half as large again cannot be had
 * still grows into one of n's size, as malloc(n) would give, with its bytes and errno as
 * it was; where n's size cannot be had either, realloc fails with ENOMEM and the block is
 * left as it was. */
Test(realloc_small, out_of_memory_a_growth_falls_back_to_the_size_asked)
{
	set("mmap_threshold", 32 << 20);
	char *p = A(malloc)(100);
	cr_assert_not_null(p);
	size_t have = A(malloc_usable_size)(p), n = have + 1, m = have + have / 2;
	memset(p, 'x', have);
	char *pin = A(malloc)(n); /* n's class has a span with room: its other blocks */
	char *probe = A(malloc)(m);
	cr_assert(pin && probe, "(set-up)");
	cr_assert_lt(A(malloc_usable_size)(pin), m, "(set-up: n's class holds %zu bytes)", m);
	A(free)(probe);
	struct rlimit old;
	void *held = out_of_memory(&old);
	held = exhaust(m, held);
	errno = 4242;
	char *q = A(realloc)(p, n);
	int err = errno;
	/* then a growth of that block with neither its sizes to be had */
	size_t qhave = q ? A(malloc_usable_size)(q) : 0;
	void *more = q ? exhaust(qhave + qhave / 2, exhaust(qhave + 1, NULL)) : NULL;
	errno = 4242;
	char *r = q ? A(realloc)(q, qhave + 1) : NULL;
	int err2 = errno;
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	free_chain(more);
	free_chain(held);
	cr_assert_not_null(q, "realloc failed where malloc(%zu) would not: %s", n, strerror(err));
	cr_assert_eq(err, 4242, "errno %d after a realloc that succeeded", err);
	cr_assert_geq(qhave, n);
	cr_assert_lt(qhave, m, "%zu bytes: the block half as large again", qhave);
	for (size_t i = 0; i < have; i++)
		cr_assert_eq(q[i], 'x', "contents lost at %zu", i);
	cr_assert_null(r, "a growth with neither size to be had succeeded");
	cr_assert_eq(err2, ENOMEM, "errno %d", err2);
	cr_assert_eq(A(malloc_usable_size)(q), qhave);
	for (size_t i = 0; i < have; i++)
		cr_assert_eq(q[i], 'x', "the block's bytes changed at %zu", i);
	char *s = A(realloc)(q, qhave + 1); /* memory again: it grows */
	cr_assert_not_null(s);
	cr_assert_eq(s[have - 1], 'x');
	A(free)(s);
	A(free)(pin);
}

/* Out of memory as above, a realloc that shrinks a block to a class of its own (a small
 * block past four classes, a large block to a small size) keeps the block where it is,
 * its bytes and errno as they were: it failed, where the block it has holds n bytes. */
Test(realloc_small, out_of_memory_a_shrink_keeps_the_block)
{
	set("mmap_threshold", 32 << 20);
	char *s = A(malloc)(2000), *l = A(malloc)(64 << 10);
	cr_assert(s && l, "(set-up)");
	memset(s, 's', 2000);
	memset(l, 'l', 64 << 10);
	struct rlimit old;
	void *held = out_of_memory(&old);
	held = exhaust(100, held);
	errno = 4242;
	char *s2 = A(realloc)(s, 100);
	int err = errno;
	errno = 4242;
	char *l2 = A(realloc)(l, 100);
	int err2 = errno;
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	free_chain(held);
	cr_assert_eq(s2, s, "a small block's shrink: %p, not the block", (void *)s2);
	cr_assert_eq(err, 4242, "errno %d after a realloc that succeeded", err);
	cr_assert_eq(l2, l, "a large block's shrink: %p, not the block", (void *)l2);
	cr_assert_eq(err2, 4242, "errno %d after a realloc that succeeded", err2);
	for (size_t i = 0; i < 100; i++)
		cr_assert(s[i] == 's' && l[i] == 'l', "contents lost at %zu", i);
	A(free)(s);
	A(free)(l);
}

/* ---- populate-ahead ------------------------------------------------------------------- */

/* In every heap of arena a, the `resident` bits of free pages agree with the kernel
 * (mincore) page by page, and each free span's dirty count with its bits: pages populated
 * ahead are counted, none counted is missing. Returns the free resident pages. */
static uint64_t check_free_resident(struct arena *a)
{
	static unsigned char v[LA_HEAP_PAGES];
	uint64_t total = 0;
	arena_lock(a);
	for (struct heap *h = a->heaps; h; h = h->next) {
		cr_assert_eq(mincore(h, LA_HEAP_SIZE, v), 0);
		uint32_t dirty = 0;
		for (uint32_t pg = h->first_page; pg < LA_HEAP_PAGES;) {
			struct span *s = span_at(h, pg);
			if (s->kind == SPAN_FREE) {
				uint32_t in = 0;
				for (uint32_t i = pg; i < pg + s->npages; i++) {
					bool bit = h->resident[i >> 6] >> (i & 63) & 1;
					cr_assert_eq(bit, v[i] & 1,
					             "free page %u: counted %d, resident %d", i,
					             bit, v[i] & 1);
					in += bit;
				}
				cr_assert_eq(s->dirty, in, "span at %u: dirty %u, resident %u", pg,
				             s->dirty, in);
				dirty += in;
			}
			pg += s->npages;
		}
		cr_assert_eq(h->dirty_pages, dirty);
		total += dirty;
	}
	arena_unlock(a);
	return total;
}

/* check_free_resident for h's arena, then the free resident pages of h alone: the heap of
 * large blocks a growth of 64 KiB blocks populates (the arena's other heap holds what the
 * test runner freed, none of it populated). */
static uint32_t growth_free_resident(struct heap *h)
{
	check_free_resident(h->arena);
	arena_lock(h->arena);
	uint32_t d = h->dirty_pages;
	arena_unlock(h->arena);
	return d;
}

static struct la_counters counters(void)
{
	struct la_counters c;
	liballoc_stats(&c);
	return c;
}

/* Blocks of 9 to LARGE_HEAP_MAX_PAGES pages come from the arena's heap of large blocks from
 * here on, its first ones too (arena.h, LARGE_HEAP_AFTER): a growth of them in one heap. */
static void large_heaps_now(void)
{
	void *t = A(malloc)(16);
	struct arena *a = heap_of(t)->arena;
	A(free)(t);
	arena_lock(a);
	a->large_heap_wait = LARGE_HEAP_AFTER;
	arena_unlock(a);
}

/* n blocks of 64 KiB (16 pages), each written, pace_us apart (0: back to back), in the
 * arena's heap of large blocks (large_heaps_now) */
static void grow(void **b, int n, unsigned pace_us)
{
	large_heaps_now();
	for (int i = 0; i < n; i++) {
		b[i] = A(malloc)(64 << 10);
		cr_assert_not_null(b[i]);
		memset(b[i], 1, 64 << 10);
		if (pace_us)
			usleep(pace_us);
	}
}

/* The populate tests' setting with pages only (huge ranges have tests of their own):
 * blocks of 64 KiB come from heaps (mmap_threshold 1 MiB), decay_ms as given. */
static void pages_only(int64_t decay_ms)
{
	heap_huge_policy = -1;
	arena_large_grid = 0; /* blocks of 9-16 pages side by side, as the tests lay them */
	set("decay_ms", decay_ms);
	set("mmap_threshold", 1 << 20);
}

/* No decay pass (decay_ms 0) and no frees: every madvise call is a populate. */
Test(populate, a_heap_growing_fast_populates_ahead_and_counts_it)
{
	pages_only(0);
	enum { N = 2048 }; /* 128 MiB, 32768 pages: 16 per block */
	static void *b[N];
	struct la_counters before = counters();
	grow(b, N, 0);
	struct la_counters after = counters();
	uint64_t calls = after.madvise_calls - before.madvise_calls;
	uint64_t pages = (after.madvise_bytes - before.madvise_bytes) >> LA_PAGE_SHIFT;
	/* each call covers a block's fresh pages and up to 128 ahead (8 blocks): at 16 pages a block,
	 * most blocks are faulted in by some earlier block's call (a stall of a loaded
	 * machine between blocks slows the rate and costs a few blocks at most) */
	cr_assert_gt(calls, 0, "no populate while growing 128 MiB back to back");
	cr_assert_geq(pages, (uint64_t)N * 16 / 4, "%llu calls populated %llu pages",
	              (unsigned long long)calls, (unsigned long long)pages);
	cr_assert_leq(calls, (uint64_t)N / 4, "%llu calls for %d blocks: not ahead",
	              (unsigned long long)calls, N);
	/* the pages populated but not handed out yet are free resident memory, counted */
	uint64_t free_res = check_free_resident(heap_of(b[0])->arena);
	cr_assert_leq(free_res, 2 * HEAP_AHEAD_PAGES, "%llu free resident pages",
	              (unsigned long long)free_res);
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
}

Test(populate, a_trickle_or_a_growth_that_stopped_populates_nothing)
{
	pages_only(0);
	enum { FAST = 512, SLOW = 64 };
	static void *b[FAST + SLOW];
	large_heaps_now(); /* (grow's: the probe in the growth's heap) */
	void *probe = A(malloc)(64 << 10);
	struct heap *h = heap_of(probe);
	struct arena *a = h->arena;
	/* what the runner left free there, if anything (the arena's other heap may gain a page
	 * meanwhile, its metadata's: not the trickle's to take) */
	uint32_t base = growth_free_resident(h);
	struct la_counters before = counters();
	grow(b, FAST, 0);
	/* (the pages ahead may all be taken by its last block: count the calls) */
	cr_assert_gt(counters().madvise_calls, before.madvise_calls,
	             "the growth populated nothing");
	check_free_resident(a);
	/* the growth stops (two windows pass); then a trickle: 16 pages every 5 ms or
	 * slower, at most 64 + 16 in two windows of 20 ms, under the 256 of a fast heap.
	 * It first takes the pages the growth populated ahead, then faults in its own. */
	usleep(2 * HEAP_FAST_WINDOW_MS * 1000);
	before = counters();
	grow(b + FAST, SLOW, 5000);
	struct la_counters after = counters();
	cr_assert_eq(after.madvise_calls, before.madvise_calls,
	             "a trickle of 64 KiB every 5 ms populated pages");
	cr_assert_leq(growth_free_resident(h), base,
	              "the trickle took the pages populated ahead and gained none");
	A(free)(probe);
	for (int i = 0; i < FAST + SLOW; i++)
		A(free)(b[i]);
}

/* A forked child's populate-ahead counts its own growth only: the parent's fast growth
 * just before the fork (its windows, copied with the heap) made the fork loop's trim
 * children populate up to 139 pages at their first block, which their last trim then
 * purged. The child takes 12 blocks (192 pages, under the 256 of a fast heap): first the
 * pages its parent populated ahead, then fresh ones. */
static int child_takes_a_few_blocks(void *arg)
{
	(void)arg;
	void *b[12];
	struct la_counters before = counters();
	for (int i = 0; i < 12; i++) {
		b[i] = A(malloc)(64 << 10);
		if (!b[i])
			return 2;
		memset(b[i], 1, 64 << 10);
	}
	struct la_counters after = counters();
	if (after.madvise_calls != before.madvise_calls) {
		fprintf(stderr, "the child populated %llu pages in %llu calls",
		        (unsigned long long)((after.madvise_bytes - before.madvise_bytes) >>
		                             LA_PAGE_SHIFT),
		        (unsigned long long)(after.madvise_calls - before.madvise_calls));
		return 1;
	}
	return 0;
}

/* The throttle's back-off (purge_shift): each growth of a heap into pages the throttle
 * had just returned doubles the next batch, past 256 times (8: 32 MiB at the defaults,
 * less than one round of rptest-like frees, which without the decay pass then purged and
 * faulted in every round's pages: medsizes 2000 1000000 65536 1 1 with LIBALLOC_CONTROL=0,
 * 498,134 faults) up to HEAP_PURGE_SHIFT_MAX. Here each block takes fresh pages of the
 * heap of large blocks right after a purge is marked (madvise_throttle 0: no populate
 * ahead makes them resident first; no slot to serve them). */
Test(heap, the_throttles_back_off_doubles_past_256_times)
{
	pages_only(0);
	set("madvise_throttle", 0);
	set("tcache_max_bytes", 0);
	enum { N = HEAP_PURGE_SHIFT_MAX + 4 };
	static void *b[N];
	grow(b, 1, 0);
	struct heap *h = heap_of(b[0]);
	for (int i = 1; i < N; i++) {
		arena_lock(h->arena);
		h->purged_recently = 1;
		arena_unlock(h->arena);
		b[i] = A(malloc)(64 << 10);
		cr_assert_eq(heap_of(b[i]), h, "block %d from another heap", i);
	}
	arena_lock(h->arena);
	unsigned shift = h->purge_shift;
	arena_unlock(h->arena);
	cr_assert_eq(shift, HEAP_PURGE_SHIFT_MAX, "back-off at %u after %d growths", shift, N - 1);
	cr_assert_gt(shift, 8);
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
}

Test(populate, a_forked_child_counts_its_own_growth_not_its_parents)
{
	pages_only(0);
	enum { FAST = 512 };
	static void *b[FAST];
	struct la_counters before = counters();
	grow(b, FAST, 0);
	cr_assert_gt(counters().madvise_calls, before.madvise_calls,
	             "the parent's growth populated nothing");
	char err[256];
	int st = run_child_stderr(child_takes_a_few_blocks, NULL, err, sizeof(err));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x: %s", st, err);
	for (int i = 0; i < FAST; i++)
		A(free)(b[i]);
}

/* A populate that stops part way (here: a free page of the heap made unwritable, which the
 * kernel refuses with EINVAL after faulting in the pages before it, as it refuses the call
 * on kernels before 5.14) counts what came in, no more, and liballoc stops asking. The
 * populate is the refill of the pages ahead: the block that takes the last of them asks
 * for the next ones. That needs a growth that is fast when the last block comes: a stall
 * of a loaded machine longer than two windows (HEAP_FAST_WINDOW_MS) before it, or before
 * one of the blocks that take the pages ahead, makes it slow there (no pages ahead, or no
 * refill). Then the heap grows on, a batch of blocks back to back, and tries again. */
Test(populate, a_failed_populate_counts_what_came_in_and_stops)
{
	pages_only(0);
	enum { N = 512, BATCH = 32, TRIES = 5 };
	/* each try takes a batch and at most 9 blocks (HEAP_AHEAD_PAGES / 16 + 1); 48 after */
	static void *b[N + TRIES * (BATCH + 9) + 9 + 48];
	grow(b, N, 0);
	struct heap *h = heap_of(b[N - 1]);
	struct arena *a = h->arena;
	int n = N;
	uint32_t d, end, bad_pg;
	char *bad;
	struct la_counters before, after;
	for (int t = 0;; t++) {
		cr_assert_eq(heap_of(b[n - 1]), h, "the growth went on in another heap");
		arena_lock(a);
		uint32_t r = heap_page_of(h, b[n - 1]) + 16;
		struct span *rs = span_at(h, r);
		cr_assert_eq(rs->kind, SPAN_FREE);
		d = rs->dirty;
		arena_unlock(a);
		cr_assert_eq(d % 16, 0, "%u pages ahead", d);
		end = r;
		before = after = counters();
		if (d > 0) {
			/* the next populate runs into page r + d + 100: the refill asked by the
			 * block that takes the last of the d pages (a growth as fast as huge
			 * ranges want), or else the block after them, which takes fresh pages */
			bad_pg = r + d + 100;
			bad = (char *)h + ((size_t)bad_pg << LA_PAGE_SHIFT);
			cr_assert_eq(mprotect(bad, LA_PAGE, PROT_READ), 0);
			for (uint32_t k = 0;
			     k <= d / 16 && after.madvise_calls == before.madvise_calls; k++) {
				errno = 4321;
				b[n] = A(malloc)(64 << 10);
				int e = errno;
				cr_assert_eq(heap_page_of(h, b[n]), r + 16 * k);
				/* a malloc that succeeds leaves errno as it was, the populate
				 * refused or not */
				cr_assert_eq(e, 4321, "errno %d after a malloc that succeeded", e);
				end = r + 16 * (k + 1);
				after = counters();
				memset(b[n++], 1, 64 << 10);
			}
			cr_assert_eq(mprotect(bad, LA_PAGE, PROT_READ | PROT_WRITE), 0);
			if (after.madvise_calls != before.madvise_calls)
				break;
		}
		cr_assert_lt(t, TRIES,
		             "the growth was not fast: %d batches of %d blocks back to back left "
		             "%u pages ahead and made no refill",
		             TRIES + 1, BATCH, d);
		grow(b + n, BATCH, 0);
		n += BATCH;
	}
	cr_assert_eq(after.madvise_calls, before.madvise_calls + 1, "one populate, %llu calls",
	             (unsigned long long)(after.madvise_calls - before.madvise_calls));
	/* the pages before the unwritable one came in and count, the rest do not */
	cr_assert_eq(growth_free_resident(h), bad_pg - end);
	/* no more populating: blocks fault their pages in as they are written */
	before = counters();
	for (int k = 0; k < 48; k++, n++) {
		b[n] = A(malloc)(64 << 10);
		memset(b[n], 1, 64 << 10);
	}
	after = counters();
	cr_assert_eq(after.madvise_calls, before.madvise_calls);
	cr_assert_eq(growth_free_resident(h), 0);
	for (int i = 0; i < n; i++)
		A(free)(b[i]);
}

/* A heap with holes (resident free pages: a heap that breathes) populates nothing while it
 * grows past them: pages populated ahead would only add to what it holds free. */
Test(populate, an_arena_with_holes_populates_nothing)
{
	/* an hour's decay: the holes stay resident (with decay_ms 0 the frees' throttle may
	 * return them while the heap shrinks, as it did under ASan's slower frees) */
	pages_only(3600000);
	enum { N = 512, M = 128 };
	static void *b[N], *c[M];
	grow(b, N, 0);
	for (int i = 0; i < N; i += 2) /* 256 holes of 16 pages */
		A(free)(b[i]);
	cr_assert_geq(check_free_resident(heap_of(b[1])->arena), HEAP_HOLES_PAGES);
	struct la_counters before = counters();
	for (int i = 0; i < M; i++) { /* 32 pages each: no hole fits */
		c[i] = A(malloc)(128 << 10);
		cr_assert_not_null(c[i]);
		memset(c[i], 1, 128 << 10);
	}
	struct la_counters after = counters();
	cr_assert_eq(after.madvise_calls, before.madvise_calls, "%llu populates",
	             (unsigned long long)(after.madvise_calls - before.madvise_calls));
	for (int i = 0; i < M; i++)
		A(free)(c[i]);
	for (int i = 1; i < N; i += 2)
		A(free)(b[i]);
}

/* Blocks that may go on the grid (up to LARGE_GRID_MAX_PAGES pages) are populated ahead only
 * once the probes found the program writing them whole (arena.c, large_probe): a fast
 * growth of 64 KiB blocks written only at their start has only the first page of each
 * populated, the one the program writes (it would fault in 16 pages a block and as many
 * ahead: bench medsizes 1000 1000000 65536 took 3,588 faults and 17.3 MiB so, 2,370 and
 * 10.4 MiB now), and one of blocks written whole populates ahead from its first probes on. */
static void grid_growth(void **b, int n, size_t written)
{
	pages_only(0);
	arena_large_grid = LARGE_GRID_PAGES; /* the default: blocks that may go on the grid */
	large_heaps_now();
	for (int i = 0; i < n; i++) {
		b[i] = A(malloc)(64 << 10);
		cr_assert_not_null(b[i]);
		memset(b[i], 1, written);
	}
}

Test(populate, a_growth_of_blocks_written_at_their_start_populates_their_first_pages)
{
	enum { N = 1024 }; /* 64 MiB back to back */
	static void *b[N];
	struct la_counters before = counters();
	uint64_t calls = os_populate_calls, pages = os_populate_bytes;
	grid_growth(b, N, 64);
	struct la_counters after = counters();
	calls = os_populate_calls - calls;
	pages = (os_populate_bytes - pages) >> LA_PAGE_SHIFT;
	cr_assert_eq(after.madvise_calls - before.madvise_calls, calls,
	             "%llu madvise calls, %llu of them populates",
	             (unsigned long long)(after.madvise_calls - before.madvise_calls),
	             (unsigned long long)calls);
	cr_assert_eq(pages, calls, "%llu populates of %llu pages: more than first pages",
	             (unsigned long long)calls, (unsigned long long)pages);
	/* every block takes fresh pages (the arena's heap of large blocks is new) */
	cr_assert_geq(calls, (uint64_t)N / 2, "%llu first pages populated for %d blocks",
	              (unsigned long long)calls, N);
	cr_assert_leq(calls, (uint64_t)N);
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
}

Test(populate, a_growth_of_blocks_written_whole_populates_once_probed)
{
	enum { N = 2048 }; /* 128 MiB back to back */
	static void *b[N];
	struct la_counters before = counters();
	grid_growth(b, N, 64 << 10);
	struct la_counters after = counters();
	uint64_t pages = (after.madvise_bytes - before.madvise_bytes) >> LA_PAGE_SHIFT;
	/* the probes' first samples (one every LARGE_PROBE_EVERY blocks, six to reach
	 * LARGE_DENSE_AT) fault their blocks in page by page; most of the rest is populated */
	cr_assert_geq(pages, (uint64_t)N * 16 / 4, "%llu calls populated %llu pages",
	              (unsigned long long)(after.madvise_calls - before.madvise_calls),
	              (unsigned long long)pages);
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
}

/* ---- huge ranges ---------------------------------------------------------------------- */

static long status_kb(const char *file, const char *key)
{
	char buf[8192];
	int fd = open(file, O_RDONLY);
	cr_assert_geq(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(n, 0);
	buf[n] = 0;
	char *k = strstr(buf, key);
	cr_assert_not_null(k, "%s: no %s", file, key);
	return atol(k + strlen(key));
}

static void need_huge_pages(void)
{
	if (os_huge_size() != (size_t)HEAP_HUGE_PAGES << LA_PAGE_SHIFT)
		cr_skip_test("no transparent huge pages of 2 MiB for advised ranges here");
	heap_huge_policy = 1;
}

/* The huge ranges of every heap of arena a are whole in (512 resident pages each);
 * returns how many there are. */
static uint32_t huge_ranges_whole(struct arena *a)
{
	static unsigned char v[HEAP_HUGE_PAGES];
	uint32_t n = 0;
	arena_lock(a);
	for (struct heap *h = a->heaps; h; h = h->next)
		for (uint32_t k = 0; k < 32; k++) {
			if (!(h->huge >> k & 1))
				continue;
			cr_assert_eq(
			        mincore((char *)h + ((size_t)k * HEAP_HUGE_PAGES << LA_PAGE_SHIFT),
			                (size_t)HEAP_HUGE_PAGES << LA_PAGE_SHIFT, v),
			        0);
			for (uint32_t i = 0; i < HEAP_HUGE_PAGES; i++)
				cr_assert(v[i] & 1, "huge range %u of heap %p: page %u not in", k,
				          (void *)h, i);
			n++;
		}
	arena_unlock(a);
	return n;
}

/* A fast growth populates whole 2 MiB ranges the kernel backs with huge pages, counted
 * page by page as mincore sees them; a trim gives them back whole and advises them back
 * to pages: growing into them again brings pages, not huge pages. */
Test(populate, huge_ranges_come_in_whole_and_go_back_whole)
{
	need_huge_pages();
	set("decay_ms", 0);
	set("idle_heap_release", 0); /* the heaps stay: the second growth reuses their ranges */
	set("mmap_threshold", 1 << 20);
	enum { N = 2048 }; /* 128 MiB */
	static void *b[N];
	grow(b, N, 0);
	struct arena *a = heap_of(b[0])->arena;
	check_free_resident(a);
	uint32_t ranges = huge_ranges_whole(a);
	cr_assert_geq(ranges, 8, "%u huge ranges for 128 MiB grown back to back", ranges);
	long huge_kb = status_kb("/proc/self/smaps_rollup", "AnonHugePages:");
	cr_assert_geq(huge_kb, 2048, "the kernel gave no huge page (%ld kB)", huge_kb);
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
	liballoc_trim(0);
	check_free_resident(a);
	arena_lock(a);
	for (struct heap *h = a->heaps; h; h = h->next)
		cr_assert_eq(h->huge, 0, "heap %p kept huge ranges %#x", (void *)h, h->huge);
	arena_unlock(a);
	cr_assert_eq(status_kb("/proc/self/smaps_rollup", "AnonHugePages:"), 0);
	/* the same growth again with huge ranges off: no range is left advised, so the same
	 * pages come in as pages, no huge page among them */
	heap_huge_policy = -1;
	grow(b, N, 0);
	cr_assert_eq(status_kb("/proc/self/smaps_rollup", "AnonHugePages:"), 0);
	check_free_resident(a);
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
}

/* n blocks of 64 KiB grown into huge ranges (at least 8 of them whole), with frees that
 * return nothing on their own: the arena they are in. */
static struct arena *grown_in_huge_ranges(void **b, int n)
{
	need_huge_pages();
	set("decay_ms", 0);
	set("trim_threshold", 1LL << 40); /* frees return nothing on their own */
	set("mmap_threshold", 1 << 20);
	liballoc_trim(0);
	grow(b, n, 0);
	struct arena *a = heap_of(b[0])->arena;
	cr_assert_geq(huge_ranges_whole(a), 8);
	return a;
}

/* Free blocks inside huge ranges, the others still in use: a trim returns their pages
 * (the kernel splits the huge page; RssAnon drops by what the trim says), the bits
 * follow mincore, and those ranges are pages from then on. */
Test(populate, a_trim_inside_huge_ranges_returns_exactly_what_it_says)
{
	enum { N = 2048 };
	static void *b[N];
	(void)status_kb("/proc/self/status", "RssAnon:");
	struct arena *a = grown_in_huge_ranges(b, N);
	for (int i = 0; i < N; i += 2) /* half of every huge range */
		A(free)(b[i]);
	check_free_resident(a);
	long o0 = others_minflt();
	long r0 = status_kb("/proc/self/status", "RssAnon:");
	size_t trim = liballoc_trim(0);
	long r1 = status_kb("/proc/self/status", "RssAnon:");
	long others = others_minflt() - o0; /* faults in the window not this thread's */
	long gap = (long)trim - (r0 - r1) * 1024;
	cr_assert(gap == 0 || (gap > 0 && gap <= others * (long)LA_PAGE),
	          "trim: %zu bytes said, %ld kB left the RSS (other threads faulted %ld pages)",
	          trim, r0 - r1, others);
	cr_assert_geq(trim, (size_t)N / 2 * (64 << 10) * 3 / 4, "%zu bytes trimmed", trim);
	check_free_resident(a);
	arena_lock(a);
	for (struct heap *h = a->heaps; h; h = h->next)
		cr_assert_eq(h->huge, 0, "heap %p kept huge ranges %#x", (void *)h, h->huge);
	arena_unlock(a);
	for (int i = 1; i < N; i += 2) {
		cr_assert_eq(((unsigned char *)b[i])[65535], 1, "block %d lost its contents", i);
		A(free)(b[i]);
	}
}

/* A huge page a trim leaves partly in use is split now (MADV_COLD over its range), not
 * when memory pressure gets to it: until it is split the kernel keeps the whole huge page,
 * charged to the memory cgroup, though mincore and RSS say its free part went back (in a
 * cgroup at its limit, a neighbour's climb then waits for reclaim to split it). The
 * kernel counts each split in /proc/vmstat's thp_split_page (system-wide: others'
 * splits can only add to it). */
Test(populate, a_trim_inside_huge_ranges_splits_their_huge_pages_now)
{
	enum { N = 2048 };
	static void *b[N];
	grown_in_huge_ranges(b, N);
	long huge_kb = status_kb("/proc/self/smaps_rollup", "AnonHugePages:");
	if (huge_kb < 8 * 2048)
		cr_skip_test("the kernel gave %ld kB of huge pages (compaction): too few", huge_kb);
	for (int i = 0; i < N; i++) /* all but one block of 64 KiB in every huge range */
		if (i % 32)
			A(free)(b[i]);
	long s0 = status_kb("/proc/vmstat", "thp_split_page ");
	liballoc_trim(0);
	long s1 = status_kb("/proc/vmstat", "thp_split_page ");
	cr_assert_geq(s1 - s0, huge_kb / 2048 * 3 / 4,
	              "%ld huge pages split by the trim of %ld kB of them", s1 - s0, huge_kb);
	for (int i = 0; i < N; i += 32) {
		cr_assert_eq(((unsigned char *)b[i])[65535], 1, "block %d lost its contents", i);
		A(free)(b[i]);
	}
}

/* Huge ranges while they cost less than pages; when they cost more, one try a period. */
Test(populate, huge_ranges_only_while_they_cost_less)
{
	const uint64_t ms = 1000000, t = 1000 * 1000 * ms; /* a clock reading */
	heap_huge_policy = 0;
	heap_huge_cost = heap_page_cost = 0;
	cr_assert(heap_huge_worth(t), "nothing measured yet: try");
	heap_huge_cost = 300, heap_page_cost = 1000;
	cr_assert(heap_huge_worth(t), "cheaper: use them");
	heap_huge_cost = 5000;
	cr_assert(heap_huge_worth(t), "dearer, never tried: try once");
	cr_assert_not(heap_huge_worth(t + 1 * ms), "dearer, tried 1 ms ago");
	cr_assert_not(heap_huge_worth(t + (HEAP_HUGE_RETRY_MS - 1) * ms));
	cr_assert(heap_huge_worth(t + HEAP_HUGE_RETRY_MS * ms), "a period later: try again");
	cr_assert_not(heap_huge_worth(t + (HEAP_HUGE_RETRY_MS + 1) * ms));
	heap_huge_policy = -1;
	heap_huge_cost = 1;
	cr_assert_not(heap_huge_worth(t + 10 * HEAP_HUGE_RETRY_MS * ms), "never");
	heap_huge_policy = 1;
	heap_huge_cost = 5000;
	cr_assert(heap_huge_worth(t + 1), "always");
}

/* heap_touch sets the resident bits of a range and counts only the pages not set before:
 * a range inside one bitmap word (a refill's carving: its own path), partly set, all set,
 * ending at a word's last bit, and across words. Pages of the heap's free end, whose bits
 * the test restores. Checked after the lock is released (a failed assertion allocates). */
Test(heap, touch_counts_each_page_once)
{
	void *p = A(malloc)(64);
	cr_assert_not_null(p);
	struct heap *h = heap_of(p);
	struct arena *a = h->arena;
	const uint32_t base = (LA_HEAP_PAGES - 256) & ~63u; /* a word boundary */
	const uint32_t ranges[][2] = {
	        {base + 3, 2},                     /* inside a word */
	        {base + 2, 4},                     /* partly set: 2 new */
	        {base + 3, 2},                     /* all set */
	        {base + 60, 4},                    /* up to the word's last bit */
	        {base + 0, 1},                     /* the word's first bit */
	        {base + 62, 5},                    /* across words: 3 new */
	        {base + 64, 63}, {base + 100, 90}, /* several words */
	};
	enum { R = sizeof(ranges) / sizeof(ranges[0]) };
	uint32_t counted[R], set_before[R], set_after[R];
	arena_lock(a);
	uint32_t clear = heap_resident_in(h, base, 192), before = h->resident_pages;
	for (size_t i = 0; i < R; i++) {
		set_before[i] = heap_resident_in(h, ranges[i][0], ranges[i][1]);
		heap_touch(h, ranges[i][0], ranges[i][1]);
		set_after[i] = heap_resident_in(h, ranges[i][0], ranges[i][1]);
		counted[i] = h->resident_pages - before;
	}
	uint32_t all = heap_resident_in(h, base, 192);
	for (uint32_t w = base / 64; w < base / 64 + 3; w++)
		h->resident[w] = 0;
	h->resident_pages = before;
	arena_unlock(a);
	A(free)(p);
	cr_assert_eq(clear, 0, "the test's pages were resident");
	uint32_t expect = 0;
	for (size_t i = 0; i < R; i++) {
		expect += ranges[i][1] - set_before[i];
		cr_assert_eq(set_after[i], ranges[i][1], "range %zu: not all set", i);
		cr_assert_eq(counted[i], expect, "range %zu: %u counted, %u set", i, counted[i],
		             expect);
	}
	cr_assert_eq(all, expect);
	cr_assert_eq(expect, 1 + 4 + 130, "pages base, base + 2..5, base + 60..189");
}

/* ---- where a span is taken in a free run -------------------------------------------------- */

/* Pages of p..p + pages that are resident, by the kernel (mincore). */
static unsigned in_core(void *p, size_t pages)
{
	return resident_pages(p, pages);
}

/* Is there a free span of 9 pages or more in h other than its top (the one that reaches
 * the heap's end)? (arena lock held) */
static bool free_run_below_top(const struct heap *h)
{
	for (uint32_t q = h->first_page; q < h->hwm && q < LA_HEAP_PAGES; q++) {
		const struct span *s = span_at((struct heap *)h, q);
		if (h->spanidx[q] && s->kind == SPAN_FREE && s->npages >= 9 &&
		    s->first + s->npages < LA_HEAP_PAGES)
			return true;
	}
	return false;
}

/* The heap's free runs of 9 pages or more below its fresh top take a large block before
 * the top does: the tests that lay blocks side by side or move them to fresh pages need
 * the top. Such runs are the small spans that the test's start (the runner's and the
 * library's first allocations) used and gave back, where and how many as the thread
 * cache's refills and flushes fall. Blocks of 9 pages (the smallest large block) fill
 * them until one comes from the top and no such run is left: a top whose pages were
 * populated ahead (resident) serves them first, before a run returned lower down, which
 * the blocks then take once the top's resident pages are used up. All stay allocated for
 * the test's life. */
static void fill_free_runs(void)
{
	for (int i = 0; i < 1024; i++) {
		char *p = A(malloc)((size_t)9 << LA_PAGE_SHIFT);
		cr_assert_not_null(p);
		struct heap *h = heap_of(p);
		arena_lock(h->arena);
		bool top = heap_page_of(h, p) + 9 + 1 >= h->hwm && /* (hwm_update) */
		           !free_run_below_top(h);
		arena_unlock(h->arena);
		if (top)
			return;
	}
	cr_assert_fail("no block of 9 pages from the heap's top in 1024");
}

/* Blocks of `pages` pages each from the heap, side by side (the arena's fresh pages, in
 * address order); fails the test if they are not. Large blocks: more than 8 pages (32 KiB
 * and less is a size class's). */
static void side_by_side(char **b, const uint32_t *pages, int n)
{
	fill_free_runs();
	for (int i = 0; i < n; i++) {
		cr_assert_gt((size_t)pages[i] << LA_PAGE_SHIFT, LA_SMALL_MAX);
		b[i] = A(malloc)((size_t)pages[i] << LA_PAGE_SHIFT);
		cr_assert_not_null(b[i]);
		if (i)
			cr_assert_eq(b[i], b[i - 1] + ((size_t)pages[i - 1] << LA_PAGE_SHIFT),
			             "block %d not right after block %d", i, i - 1);
	}
}

/* The block realloc moves, of `pages` pages, and a guard of 9 pages after it (so that it
 * cannot grow in place), side by side at the heap's top; heap blocks only (no direct
 * mappings, no threshold moves). The heap's free pages are then given back (a trim): the
 * pages after the guard are fresh whatever the process freed there before (the test
 * runner's own blocks: 13 to 29 resident pages there, by how many pages the allocator's
 * own structures took before them). */
enum { MV_BLOCK, MV_GUARD, MV_N };
static void block_and_guard(char **b, uint32_t pages)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	side_by_side(b, (const uint32_t[MV_N]){pages, 9}, MV_N);
	liballoc_trim(0);
}

/* The free run of the two tests below, from blocks of pages[] pages side by side: X and Y
 * are the run, X's pages returned to the system (trimmed) and Y's written and freed
 * resident; G keeps the run from the heap's top; Z, freed last, is parked in Y's place (a
 * freed large block is kept whole for the next of its size until another takes it). */
enum { X, Y, G, Z, N_RUN };

static void free_run(char **b, const uint32_t *pages)
{
	side_by_side(b, pages, N_RUN);
	memset(b[Y], 1, (size_t)pages[Y] << LA_PAGE_SHIFT);
	A(free)(b[X]);
	liballoc_trim(0); /* X's pages go back: not resident, counted so */
	A(free)(b[Y]);
	A(free)(b[Z]);
	cr_assert_eq(in_core(b[X], pages[X]), 0, "X's pages still resident after a trim");
	cr_assert_eq(in_core(b[Y], pages[Y]), pages[Y], "Y's written pages not resident");
}

/* Allocate `pages` pages and write them: they must start at `at` (a free run's resident
 * pages) and writing them fault fewer than `max_faults` pages in. The faults counted are
 * this thread's, which allocates and writes (RUSAGE_THREAD): the process's would count
 * those of its other threads too (the control thread's decay pass, AddressSanitizer's). */
static char *take_resident(uint32_t pages, char *at, long max_faults)
{
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	char *p = A(malloc)((size_t)pages << LA_PAGE_SHIFT);
	cr_assert_not_null(p);
	memset(p, 2, (size_t)pages << LA_PAGE_SHIFT);
	getrusage(RUSAGE_THREAD, &r1);
	cr_assert_eq(p, at, "%u pages taken at %p, the run's resident pages start at %p", pages,
	             (void *)p, (void *)at);
	cr_assert_lt(r1.ru_minflt - r0.ru_minflt, max_faults, "writing %u pages faulted %ld in",
	             pages, r1.ru_minflt - r0.ru_minflt);
	return p;
}

/* The same for a request below WINDOW_MIN_PAGES (a small span's size): the first span
 * with resident pages serves it from them, not from its start. Taken from the start, a
 * small span split a large run freed partly purged, faulted its pages in and left the
 * resident ones for a later large request that then had to fault in its own (the CPython
 * slice's dict tables: ~300 faults). */
Test(heap, a_small_request_takes_the_resident_pages_of_a_free_run)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	const uint32_t pages[N_RUN] = {64, 12, 12, 14};
	char *b[N_RUN];
	free_run(b, pages);

	char *p = take_resident(10, b[Y], 3);
	check_arena(heap_of(p)->arena);
	A(free)(p);
	A(free)(b[G]);
	check_arena(heap_of(b[G])->arena);
}

/* A free run whose resident pages lie at its end (its first half was returned to the
 * system, its second half freed written): a large request of fewer pages (at least
 * WINDOW_MIN_PAGES, 40) is served from the resident end, and writing it faults nothing in.
 * Taken from the run's start, it would fault in as many pages as it has, and leave the
 * resident ones unused. */
Test(heap, a_span_takes_the_resident_end_of_a_free_run)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	const uint32_t pages[N_RUN] = {64, 64, 9, 10};
	char *b[N_RUN];
	free_run(b, pages);

	char *p = take_resident(48, b[Y], 8);
	check_arena(heap_of(p)->arena);
	/* the pages before it are a free span of their own, not resident, and serve the
	 * next request from its start */
	char *q = A(malloc)((size_t)40 << LA_PAGE_SHIFT);
	cr_assert_eq(q, b[X], "40 pages taken at %p, the run starts at %p", (void *)q,
	             (void *)b[X]);
	check_arena(heap_of(p)->arena);
	A(free)(q);
	A(free)(p);
	A(free)(b[G]);
	check_arena(heap_of(p)->arena);
}

/* A large block placed in a run of free pages starts at the first page of a large block
 * freed lately when a window there is as resident as any: that page is the one the
 * program surely wrote (a header, the start of a buffer), while a window that starts
 * wherever the run does may start on a page never written, counted resident only because
 * a freed large block counts whole (here the tail of A that a shorter request left, which
 * the program never wrote). glibc's blocks start on the header of the free chunk they
 * split. large_random 8 1000 1 8 1: heap blocks' first pages faulted 198 -> 115 times. */
Test(heap, a_large_block_starts_where_a_freed_one_started)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	set("mmap_threshold", 32 << 20);
	/* A, X and a guard side by side (above 1 MiB: past the thread cache's large slot,
	 * each a span of exactly its pages with the colour's bytes) */
	enum { BA, BX, BG, NB };
	const uint32_t pages[NB] = {600, 300, 280};
	char *b[NB];
	for (int i = 0; i < NB; i++) {
		b[i] = A(malloc)(((size_t)pages[i] << LA_PAGE_SHIFT) - LA_COLOUR);
		cr_assert_not_null(b[i]);
		b[i][0] = 1; /* the program writes each block's start only */
		if (i)
			cr_assert_eq(b[i], b[i - 1] + ((size_t)pages[i - 1] << LA_PAGE_SHIFT),
			             "block %d not right after block %d", i, i - 1);
	}
	A(free)(b[BX]); /* parked */
	A(free)(b[BA]); /* parked; X goes to the heap's free pages */
	/* A's first 300 pages in place; its other 300 (never written) join X's free pages */
	char *q = A(malloc)(((size_t)300 << LA_PAGE_SHIFT) - LA_COLOUR);
	cr_assert_eq(q, b[BA]);
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	char *r = A(malloc)(((size_t)300 << LA_PAGE_SHIFT) - LA_COLOUR);
	r[0] = 2;
	getrusage(RUSAGE_THREAD, &r1);
	cr_assert_eq(r, b[BX], "300 pages at %p, X started at %p (A's tail at %p)", (void *)r,
	             (void *)b[BX], (void *)(b[BA] + ((size_t)300 << LA_PAGE_SHIFT)));
	cr_assert_eq(r1.ru_minflt - r0.ru_minflt, 0, "its first page faulted in");
	check_arena(heap_of(r)->arena);
	A(free)(r);
	A(free)(q);
	A(free)(b[BG]);
}

/* A block of the sizes that heaps of large blocks serve (9-64 pages, past LARGE_HEAP_AFTER)
 * that finds no room in one does not map a new heap of large blocks while the arena's
 * other heaps hold at least HEAP_HOLES_PAGES resident free pages and a run of its pages
 * among them: it takes those pages, and the new heap's header and the block's pages are
 * not faulted in beside them (CPython's quick slice: a heap of large blocks made after a
 * teardown held 312-332 KiB at the peak while the main heap held 2-5 MiB free and
 * resident). */
Test(heap, a_first_large_heap_waits_while_other_heaps_hold_resident_free_runs)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	set("mmap_threshold", 32 << 20);
	set("trim_threshold", (int64_t)1 << 40); /* no free gives pages back here */
	void *keep = A(malloc)(16);
	struct arena *a = heap_of(keep)->arena;
	/* two blocks of 512 pages (past LARGE_HEAP_MAX_PAGES: the arena's other heaps),
	 * written whole; X's pages go to the heap's free pages when Y is parked */
	char *x = A(malloc)((size_t)512 << LA_PAGE_SHIFT);
	char *y = A(malloc)((size_t)512 << LA_PAGE_SHIFT);
	cr_assert(x && y);
	cr_assert(!heap_of(x)->large && !heap_of(y)->large);
	memset(x, 1, (size_t)512 << LA_PAGE_SHIFT);
	memset(y, 1, (size_t)512 << LA_PAGE_SHIFT);
	A(free)(x);
	A(free)(y);
	arena_lock(a);
	for (struct heap *h = a->heaps; h; h = h->next)
		cr_assert(!h->large, "a heap of large blocks before LARGE_HEAP_AFTER");
	cr_assert(arena_dirty_hint(a, HEAP_HOLES_PAGES),
	          "fewer than HEAP_HOLES_PAGES free pages that may be resident");
	arena_unlock(a);
	uint64_t heaps = counters().heaps;
	large_heaps_now();
	char *b = A(malloc)((size_t)16 << LA_PAGE_SHIFT);
	cr_assert_not_null(b);
	cr_assert(!heap_of(b)->large,
	          "a heap of large blocks mapped while %p's 512 resident free pages waited",
	          (void *)x);
	cr_assert_eq(counters().heaps, heaps, "a new heap mapped");
	check_arena(a);
	A(free)(b);
	A(free)(keep);
	check_arena(a);
}

/* In a heap of large blocks a block placed on the grid has its grid page's own descriptor
 * (heap.h, span_at_grid; free finds it from the block's address alone), through splits and
 * merges, and every other span one of the pool (check_arena). */
Test(heap, blocks_on_a_large_heaps_grid_have_their_grid_pages_descriptors, .timeout = 60)
{
	set("mmap_threshold", 32 << 20);
	set("mmap_dynamic", 0);
	large_heaps_now();
	enum { SLOTS = 96, ROUNDS = 4000 };
	static char *slot[SLOTS];
	uint64_t rng = 0x2545f4914f6cdd1dULL;
	struct heap *lh = NULL;
	unsigned on_grid = 0;
	for (int r = 0; r < ROUNDS; r++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		uint32_t x = (uint32_t)(rng >> 33);
		unsigned k = x % SLOTS;
		A(free)(slot[k]);
		slot[k] = NULL;
		if ((x >> 8) % 4 == 0)
			continue; /* some slots empty: merges */
		size_t pages = 9 + (x >> 12) % (LARGE_HEAP_MAX_PAGES - 8); /* 9-64 */
		char *p = A(malloc)(pages << LA_PAGE_SHIFT);
		cr_assert_not_null(p);
		memset(p, 1, 64); /* written at its start: the grid's blocks */
		slot[k] = p;
		struct heap *h = heap_of(p);
		if (!h->large)
			continue;
		lh = h;
		uint32_t pg = heap_page_of(h, p);
		if (pg % HEAP_GRID_PAGES == 0 && !((uintptr_t)p & (LA_PAGE - 1))) {
			on_grid++;
			cr_assert_eq(span_at(h, pg), span_at_grid(h, pg),
			             "block %p on grid page %u: descriptor %ld from the pool",
			             (void *)p, pg, (long)(span_at(h, pg) - h->desc));
		}
		if (r % 200 == 0)
			check_arena(h->arena);
	}
	cr_assert_not_null(lh, "no heap of large blocks");
	cr_assert_gt(on_grid, ROUNDS / 4, "%u blocks on the grid", on_grid);
	check_arena(lh->arena);
	for (int k = 0; k < SLOTS; k++)
		A(free)(slot[k]);
	check_arena(lh->arena);
}

/* A block realloc moves is growing: with no resident free pages for it, it takes fresh
 * pages at the start of the heap's largest free span (its top), where its next growth is
 * in place, not the first gap that fits, which it would outgrow at once and leave behind,
 * its pages faulted in, as a hole (sqlite's sorter grows its list so, 6, 11, 21 pages ...). */
Test(heap, a_block_realloc_moves_takes_room_to_grow_in_place)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	/* A, the block that grows; a 15-page gap between two guards, returned to the system */
	enum { A, G1, GAP, G2, N_BLK };
	const uint32_t pages[N_BLK] = {10, 9, 15, 9};
	char *b[N_BLK];
	side_by_side(b, pages, N_BLK);
	memset(b[A], 3, (size_t)10 << LA_PAGE_SHIFT);
	A(free)(b[GAP]);
	liballoc_trim(0);
	cr_assert_eq(in_core(b[GAP], 15), 0, "the gap's pages still resident after a trim");
	/* 12 pages do not fit after A: moved with a quarter more (15 pages), as many as the
	 * gap has */
	char *p = A(realloc)(b[A], (size_t)12 << LA_PAGE_SHIFT);
	cr_assert_not_null(p);
	cr_assert(p < b[GAP] || p >= b[GAP] + ((size_t)15 << LA_PAGE_SHIFT),
	          "the moved block took the 15-page gap at %p", (void *)p);
	cr_assert_eq(p[0], 3, "contents lost");
	check_arena(heap_of(p)->arena);
	for (size_t n = 16; n <= 64; n *= 2) {
		char *q = A(realloc)(p, n << LA_PAGE_SHIFT);
		cr_assert_eq(q, p, "moved again at %zu pages", n);
		cr_assert_eq(q[(10 << LA_PAGE_SHIFT) - 1], 3, "contents lost");
	}
	check_arena(heap_of(p)->arena);
	A(free)(p);
	A(free)(b[G1]);
	A(free)(b[G2]);
	check_arena(heap_of(b[G1])->arena);
}

/* A large block realloc moves to pages not resident (here the heap's fresh top: a guard
 * after it leaves no room in place) has its pages moved there (mremap), not copied: the
 * copy would fault in as many pages as it has, and leave its old ones resident and free
 * (CPython's test_re: a buffer grown to 4.3 MiB, ~1,000 faults and as many resident pages
 * more than glibc's). Its old pages are no longer resident, and the heap counts them so. */
Test(heap, a_large_block_realloc_moves_to_fresh_pages_takes_its_pages_along)
{
	char *b[MV_N];
	block_and_guard(b, 100);
	for (size_t i = 0; i < 100; i++)
		memset(b[MV_BLOCK] + (i << LA_PAGE_SHIFT), (int)(i + 1), LA_PAGE);
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	char *p = A(realloc)(b[MV_BLOCK], (size_t)160 << LA_PAGE_SHIFT);
	getrusage(RUSAGE_THREAD, &r1);
	cr_assert_not_null(p);
	cr_assert_neq(p, b[MV_BLOCK], "the block grew in place past its guard");
	cr_assert_lt(r1.ru_minflt - r0.ru_minflt, 16, "the move faulted %ld pages in",
	             r1.ru_minflt - r0.ru_minflt);
	for (size_t i = 0; i < 100; i++)
		cr_assert(p[i << LA_PAGE_SHIFT] == (char)(i + 1) &&
		                  p[(i << LA_PAGE_SHIFT) + LA_PAGE - 1] == (char)(i + 1),
		          "page %zu's contents lost", i);
	cr_assert_eq(in_core(b[MV_BLOCK], 100), 0, "%u of the old pages still resident",
	             in_core(b[MV_BLOCK], 100));
	struct heap *h = heap_of(b[MV_BLOCK]);
	arena_lock(h->arena);
	uint32_t marked = heap_resident_in(h, heap_page_of(h, b[MV_BLOCK]), 100);
	arena_unlock(h->arena);
	cr_assert_eq(marked, 0, "%u of the old pages counted resident", marked);
	check_arena(h->arena);
	A(free)(p);
	A(free)(b[MV_GUARD]);
	check_arena(h->arena);
}

/* A block of `pages` pages written with `fill`, a guard of 9 pages after it, then grown by
 * realloc to 32 pages more: it cannot grow in place (unless the guard went elsewhere) and
 * moves to the heap's fresh top (fresh: the heap's free pages given back, as in
 * block_and_guard). The faults the realloc took (a copy faults the new pages in, a move
 * does not), -1 when it grew in place; *moved: the block's new place. */
static long grow_past_guard(size_t pages, int fill, char **moved)
{
	char *a = A(malloc)(pages << LA_PAGE_SHIFT);
	cr_assert_not_null(a);
	cr_assert_not_null(A(malloc)((size_t)9 << LA_PAGE_SHIFT));
	memset(a, fill, pages << LA_PAGE_SHIFT);
	liballoc_trim(0);
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	char *p = A(realloc)(a, (pages + 32) << LA_PAGE_SHIFT);
	getrusage(RUSAGE_THREAD, &r1);
	cr_assert_not_null(p);
	cr_assert_eq(p[(pages << LA_PAGE_SHIFT) - 1], fill, "contents lost");
	*moved = p;
	return p == a ? -1 : r1.ru_minflt - r0.ru_minflt;
}

/* A heap takes part in MOVE_MAX_PER_HEAP moves at most (each may split its mapping): the
 * next block realloc moves out of it is copied (its new pages faulted in). Nothing is
 * freed but the moved blocks' old pages (not resident): every move lands on fresh pages
 * (no populate-ahead, which would make the heap's next pages resident). */
Test(heap, a_heap_moves_pages_a_bounded_number_of_times)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	set("madvise_throttle", 0); /* no populate-ahead: the fresh pages stay so */
	const size_t pages = MOVE_FROM_PAGES;
	struct heap *h = NULL;
	unsigned moves = 0;
	for (unsigned i = 0; i < 4 * MOVE_MAX_PER_HEAP && moves <= MOVE_MAX_PER_HEAP; i++) {
		char *p;
		long faults = grow_past_guard(pages, 7, &p);
		if (!h)
			h = heap_of(p);
		cr_assert_eq(heap_of(p), h, "a second heap after %u moves", moves);
		if (faults < 0)
			continue; /* grew in place: the guard went elsewhere */
		if (moves < MOVE_MAX_PER_HEAP)
			cr_assert_lt(faults, 16, "move %u faulted %ld pages in", moves, faults);
		else
			cr_assert_geq(faults, (long)pages / 2,
			              "move %u, past the bound: %ld faults, not a copy", moves,
			              faults);
		moves++;
		check_arena(h->arena);
	}
	cr_assert_eq(moves, MOVE_MAX_PER_HEAP + 1, "%u moves seen", moves);
	cr_assert_eq(h->moves, MOVE_MAX_PER_HEAP);
}

/* A process takes part in MOVE_MAX_PER_PROCESS moves at most (its heaps' bounds alone
 * would allow tens of thousands of mappings in a process of a few hundred heaps): the last
 * move allowed moves, the next is copied (its old pages left resident, the new faulted in). */
Test(heap, a_process_moves_pages_a_bounded_number_of_times)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	set("madvise_throttle", 0); /* no populate-ahead: the fresh pages stay so */
	const size_t pages = MOVE_FROM_PAGES;
	arena_moves = MOVE_MAX_PER_PROCESS - 1;
	unsigned moved = 0;
	for (unsigned i = 0; i < 8 && moved < 2; i++) {
		char *p;
		long faults = grow_past_guard(pages, 3, &p);
		if (faults < 0)
			continue; /* grew in place: the guard went elsewhere */
		if (moved == 0)
			cr_assert_lt(faults, 16, "the last move allowed faulted %ld pages in",
			             faults);
		else
			cr_assert_geq(faults, (long)pages / 2,
			              "past the process's bound: %ld faults, not a copy", faults);
		cr_assert_eq(arena_moves, MOVE_MAX_PER_PROCESS);
		moved++;
		check_arena(heap_of(p)->arena);
	}
	cr_assert_eq(moved, 2, "%u blocks moved", moved);
}

/* A process over its address-space limit (RLIMIT_AS lowered under what it maps: prlimit
 * on a running service) would have the move refused after the kernel unmapped the target
 * range, which it could not map again: a hole where the block is copied then (SIGSEGV).
 * With the address space limited at all, the block is copied: its contents there, the
 * new pages faulted in. */
Test(heap, a_realloc_over_the_address_space_limit_copies)
{
	set("madvise_throttle", 0); /* no populate-ahead: the pages realloc moves to stay fresh */
	char *b[MV_N];
	block_and_guard(b, 100);
	memset(b[MV_BLOCK], 6, (size_t)100 << LA_PAGE_SHIFT);
	char *more = A(malloc)((size_t)200 << LA_PAGE_SHIFT); /* the room realloc moves to */
	cr_assert_not_null(more);
	A(free)(more);
	struct rlimit old;
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	FILE *f = fopen("/proc/self/status", "r");
	cr_assert_not_null(f);
	char line[256];
	long vm_kib = 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmSize:", 7))
			vm_kib = atol(line + 7);
	fclose(f);
	cr_assert_gt(vm_kib, 0);
	cr_assert_eq(
	        setrlimit(RLIMIT_AS, &(struct rlimit){(rlim_t)vm_kib * 1024 - 4096, old.rlim_max}),
	        0);
	struct rusage r0, r1; /* the copy faults the new pages in, the move does not */
	getrusage(RUSAGE_THREAD, &r0);
	char *p = A(realloc)(b[MV_BLOCK], (size_t)160 << LA_PAGE_SHIFT);
	int err = errno;
	getrusage(RUSAGE_THREAD, &r1);
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_not_null(p, "realloc failed: %s", strerror(err));
	cr_assert_neq(p, b[MV_BLOCK], "the block grew in place past its guard");
	for (size_t i = 0; i < 100; i++)
		cr_assert_eq(p[i << LA_PAGE_SHIFT], 6, "page %zu's contents lost", i);
	cr_assert_geq(r1.ru_minflt - r0.ru_minflt, 50, "%ld faults: a move, not a copy",
	              r1.ru_minflt - r0.ru_minflt);
	check_arena(heap_of(p)->arena);
	A(free)(p);
	A(free)(b[MV_GUARD]);
}

/* Under MOVE_FROM_PAGES pages a block is copied (a copy of a few pages costs less than the
 * two system calls): its old pages stay resident, free. */
Test(heap, a_small_large_block_realloc_moves_is_copied)
{
	const uint32_t pages = MOVE_FROM_PAGES - 1;
	char *b[MV_N];
	block_and_guard(b, pages);
	memset(b[MV_BLOCK], 5, (size_t)pages << LA_PAGE_SHIFT);
	char *p = A(realloc)(b[MV_BLOCK], (size_t)(pages + 40) << LA_PAGE_SHIFT);
	cr_assert_not_null(p);
	cr_assert_neq(p, b[MV_BLOCK], "the block grew in place past its guard");
	cr_assert_eq(p[((size_t)pages << LA_PAGE_SHIFT) - 1], 5, "contents lost");
	cr_assert_eq(in_core(b[MV_BLOCK], pages), pages, "the old pages were not left resident");
	check_arena(heap_of(p)->arena);
	A(free)(p);
	A(free)(b[MV_GUARD]);
}

/* The same for a request at or above the mmap threshold, which takes a run of resident
 * heap pages before a new mapping: the run need not start where its free span does. */
Test(heap, a_request_above_the_threshold_takes_a_resident_window_inside_a_free_run)
{
	pages_only(0); /* blocks up to 1 MiB from the heaps while the run is laid out */
	set("mmap_dynamic", 0);
	const uint32_t pages[N_RUN] = {100, 140, 9, 10};
	char *b[N_RUN];
	free_run(b, pages);

	set("mmap_threshold", 512 << 10); /* 128 pages: the request is above it */
	struct rusage r0, r1;             /* this thread's faults, as in take_resident */
	getrusage(RUSAGE_THREAD, &r0);
	char *p = A(malloc)((size_t)130 << LA_PAGE_SHIFT);
	cr_assert_not_null(p);
	memset(p, 2, (size_t)130 << LA_PAGE_SHIFT);
	getrusage(RUSAGE_THREAD, &r1);
	cr_assert_eq(p, b[Y], "130 pages at %p, the resident run starts at %p", (void *)p,
	             (void *)b[Y]);
	cr_assert_lt(r1.ru_minflt - r0.ru_minflt, 8, "writing 130 pages faulted %ld in",
	             r1.ru_minflt - r0.ru_minflt);
	check_arena(heap_of(p)->arena);
	A(free)(p);
	A(free)(b[G]);
	check_arena(heap_of(b[G])->arena);
}

/* ---- a corrupted free list --------------------------------------------------------------- */

/* Six large blocks side by side (no decay pass meanwhile, no direct mappings), the second
 * and fourth written and freed: two free spans of resident pages (FREED_PAGES), blocks kept
 * between them. A freed large block is parked whole until the next is freed: the last one
 * freed, b[5], takes that place. b[0], b[2] and b[4] stay allocated. */
enum { FREED_PAGES = 64 + 40 };
static void two_resident_free_spans(char *b[6])
{
	static const uint32_t pages[] = {9, 64, 9, 40, 9, 12};
	pages_only(3600000);
	set("mmap_dynamic", 0);
	side_by_side(b, pages, 6);
	memset(b[1], 1, (size_t)pages[1] << LA_PAGE_SHIFT);
	memset(b[3], 1, (size_t)pages[3] << LA_PAGE_SHIFT);
	A(free)(b[1]);
	A(free)(b[3]);
	A(free)(b[5]);
}

/* A free span linked to itself (a span inserted twice into its bin: what a forked child's
 * trim met when a block of another arena reached the wrong arena's spans, 862e05f) stops
 * the process with a message, where the trim spun forever over it, holding the arena's
 * lock: after the span's own pages went back, the heap still held other free resident
 * pages, so the walk never ended. Two blocks written and freed apart (blocks kept between
 * them) leave free spans with resident pages; in a forked child the first of them a purge
 * walks is made circular. */
/* (in a forked child) the first span with resident pages a purge of heap arg walks linked
 * to itself, and the heap trimmed; 97 where no other free resident pages are left after it */
static int circular_trim_child(void *arg)
{
	struct heap *h = arg;
	alarm(30); /* a walk that spins ends the child (SIGALRM), and the test fails */
	arena_lock(h->arena);
	struct span *s = NULL;
	for (int k = HEAP_NBINS - 1; k >= 0 && !s; k--)
		for (struct span *t = h->bins[k]; t && !s; t = t->next)
			if (t->dirty)
				s = t;
	if (!s || h->dirty_pages <= s->dirty)
		return 97;
	s->next = s;
	heap_purge(h, 0);
	return 0;
}

Test(heap, a_free_span_list_made_circular_stops_a_trim_rather_than_spin_in_it, .timeout = 60)
{
	char *b[6];
	two_resident_free_spans(b);
	struct heap *h = heap_of(b[1]);
	char out[512];
	int st = run_child_stderr(circular_trim_child, h, out, sizeof(out));
	cr_assert_neq(st, -1, "the child could not be run");
	cr_assert(!(WIFEXITED(st) && WEXITSTATUS(st) == 97),
	          "the heap holds no two free spans with resident pages");
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the child ended with status %#x",
	          (unsigned)st);
	cr_assert(strstr(out, "liballoc: heap: corrupted free span list detected"),
	          "its message: %s", out);
	A(free)(b[0]);
	A(free)(b[2]);
	A(free)(b[4]);
}

/* The decay pass's purge of aged spans (heap_purge_aged) takes little stack: its 1 KiB
 * window of residency, which only a measured purge uses, was on its frame (1,696 bytes),
 * and on the control thread the pass reached one page deeper into its stack, a
 * copy-on-write fault in every forked child that decays (the fork loop: 0.5 a child, perf
 * page-faults by address). The window is now on the measured purge's own frame. Measured
 * on a thread of the test's own stack, painted below the call (stackdepth.h), the purge's
 * system calls bound first. */
static size_t aged_depth;
static uint32_t aged_purged;
static struct heap *aged_heap;

static void purge_aged_before(void *arg)
{
	uint32_t before = *(uint32_t *)arg, oldest = before;
	arena_lock(aged_heap->arena);
	aged_purged = heap_purge_aged(aged_heap, before, before + HEAP_PERIOD, &oldest);
	arena_unlock(aged_heap->arena);
}

static void *aged_thread(void *arg)
{
	(void)arg;
	/* the purge's libc calls bound: madvise (a span's own purge), syscall (the
	 * process_madvise of several), clock_gettime (the stamps) */
	struct timespec ts;
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	p[0] = 1;
	cr_assert_eq(madvise(p, 4096, MADV_DONTNEED), 0);
	munmap(p, 4096);
	cr_assert_gt(syscall(SYS_getpid), 0);
	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	/* and the transparent huge page modes read, once a process (a forking parent reads
	 * them before its fork: malloc.c, fork_prepare) */
	os_thp_always();
	os_thp_pmd_always();
	/* the free spans' stamp: the purge takes those stamped before the next epoch */
	uint32_t stamp = 0;
	arena_lock(aged_heap->arena);
	for (int k = HEAP_NBINS - 1; k >= 0; k--)
		for (struct span *t = aged_heap->bins[k]; t; t = t->next)
			if (t->dirty)
				stamp = t->stamp;
	arena_unlock(aged_heap->arena);
	uint32_t before = stamp + 1;
	aged_depth = painted_depth(purge_aged_before, &before);
	return NULL;
}

Test(heap, the_decay_passs_purge_of_aged_spans_takes_under_1_5_kib_of_stack)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	cr_skip_test("the sanitizers' frames are not liballoc's");
#endif
	char *b[6];
	two_resident_free_spans(b);
	aged_heap = heap_of(b[1]);
	cr_assert_eq(run_on_own_stack(aged_thread, NULL), 0, "a thread on a stack of our own");
	A(free)(b[0]);
	A(free)(b[2]);
	A(free)(b[4]);
	cr_log_info("a purge of %u aged pages: %zu bytes of stack", aged_purged, aged_depth);
	cr_assert_geq(aged_purged, FREED_PAGES, "the purge took %u pages", aged_purged);
	cr_assert_lt(aged_depth, 1536, "the purge went %zu bytes below its caller", aged_depth);
}

/* Is the block at p, of a class whose blocks are `grid` whole pages, on its class's grid:
 * its first page a multiple of grid pages from its heap's start? */
static bool on_the_grid(const void *p, uint32_t grid)
{
	uintptr_t off = (uintptr_t)p & LA_HEAP_MASK;
	return (off & (LA_PAGE - 1)) == 0 && (off >> LA_PAGE_SHIFT) % grid == 0;
}

/* The classes of 20-32 KiB (blocks of 5-8 whole pages, spans of 4 blocks) start a span made
 * of fresh pages on a multiple of the block's pages from the heap's start (sc_grid),
 * wherever the heap's top lies (here after a large block of 9-16 pages). Then a block's
 * first and last pages are the same pages wherever its span goes: `sizes sweep 10`, which
 * writes only its blocks' ends, laid these classes' spans at other offsets from round to
 * round and faulted in pages no earlier block's end had touched (bench/README.md). */
Test(heap, fresh_spans_of_whole_page_blocks_start_on_their_grid)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	set("tcache_max_bytes", 0); /* every block from its span, every free back to it */
	static const uint32_t grids[] = {5, 6, 7, 8};
	for (uint32_t shift = 0; shift < 8; shift++) {
		/* the heap's top moved by a large block of 9 + shift pages */
		char *big = A(malloc)((size_t)(9 + shift) << LA_PAGE_SHIFT);
		cr_assert_not_null(big);
		for (unsigned g = 0; g < sizeof(grids) / sizeof(grids[0]); g++) {
			liballoc_trim(0); /* no free page resident: spans of fresh pages */
			/* sizes below the class's (18-30 KiB): the sweep's */
			size_t size = ((size_t)grids[g] << LA_PAGE_SHIFT) - 2048;
			char *b[12];
			for (int i = 0; i < 12; i++) {
				b[i] = A(malloc)(size);
				cr_assert_not_null(b[i]);
				b[i][0] = 1;
				b[i][size - 1] = 1;
				cr_assert(on_the_grid(b[i], grids[g]),
				          "a block of %zu bytes at page %zu of its heap, not on "
				          "the grid of %u pages (after %u pages)",
				          size, ((uintptr_t)b[i] & LA_HEAP_MASK) >> LA_PAGE_SHIFT,
				          grids[g], 9 + shift);
			}
			for (int i = 0; i < 12; i++)
				A(free)(b[i]);
		}
		check_arena(heap_of(big)->arena);
	}
}

/* ---- what a purge advises ----------------------------------------------------------------- */

/* A purge advises a measured free span from its first page that can be resident to the end
 * of its last (the resident bitmap bounds them), not the whole span: the kernel walks every
 * page table of an advised range, and a forked child's trim advised the parent's large free
 * spans whole (21-25k pages a child of the fork loop, ~450 with this). A span with no such
 * page costs no call. Where the kernel may fill any range with huge pages (mode "always")
 * the bitmap bounds nothing and the whole span goes. */
Test(heap, a_purge_advises_only_the_pages_of_a_free_span_that_can_be_resident)
{
	pages_only(0); /* no decay pass takes the pages meanwhile */
	set("mmap_dynamic", 0);
	set("mmap_threshold", 8 << 20);
	enum { PAGES = 400, LO = 10, HI = 300 };
	liballoc_trim(0); /* no other free page resident: the block's span is the one purged */
	char *b = A(malloc)((size_t)PAGES << LA_PAGE_SHIFT);
	char *guard = A(malloc)((size_t)64 << LA_PAGE_SHIFT); /* a neighbour kept in use */
	cr_assert_not_null(b);
	cr_assert_not_null(guard);
	b[(size_t)LO << LA_PAGE_SHIFT] = 1;
	b[(size_t)(LO + 1) << LA_PAGE_SHIFT] = 1;
	b[(size_t)HI << LA_PAGE_SHIFT] = 1;
	struct heap *h = heap_of(b);
	struct arena *a = h->arena;
	A(free)(b);
	arena_lock_all(); /* the block, parked whole by its free, back to its heap's free pages */
	arena_unlock_all();
	arena_lock(a);
	heap_measure(h, NULL); /* its pages the program never wrote: not resident */
	struct la_counters before = counters();
	heap_purge(h, 0);
	struct la_counters after = counters();
	uint32_t dirty = h->dirty_pages;
	arena_unlock(a);
	unsigned resident = resident_pages(b, PAGES);
	uint64_t advised = (after.madvise_bytes - before.madvise_bytes) >> LA_PAGE_SHIFT;
	cr_assert_eq(resident, 0, "%u of the block's pages still resident", resident);
	cr_assert_eq(dirty, 0, "%u dirty pages left", dirty);
	cr_assert_eq(after.madvise_calls - before.madvise_calls, 1);
	if (os_thp_always())
		cr_assert_geq(advised, PAGES, "%llu pages advised", (unsigned long long)advised);
	else
		cr_assert_eq(advised, HI + 1 - LO,
		             "%llu pages advised, pages %u-%u can be resident",
		             (unsigned long long)advised, LO, HI);
	A(free)(guard);
}

/* The two tests below: a 400-page block written every other page, freed, parked whole and
 * back to its heap's free pages, the heap measured (the counts right); *guard a neighbour
 * kept in use. Returns the heap. */
static struct heap *freed_block_measured(char **guard)
{
	pages_only(0);
	set("mmap_dynamic", 0);
	set("mmap_threshold", 8 << 20);
	enum { PAGES = 400 };
	liballoc_trim(0);
	char *b = A(malloc)((size_t)PAGES << LA_PAGE_SHIFT);
	*guard = A(malloc)((size_t)64 << LA_PAGE_SHIFT);
	cr_assert_not_null(b);
	cr_assert_not_null(*guard);
	for (unsigned i = 0; i < PAGES; i += 2)
		b[(size_t)i << LA_PAGE_SHIFT] = 1;
	struct heap *h = heap_of(b);
	A(free)(b);
	arena_lock_all(); /* the block, parked whole by its free, back to its heap's free pages */
	arena_unlock_all();
	arena_lock(h->arena);
	heap_measure(h, NULL);
	arena_unlock(h->arena);
	return h;
}

/* The two tests below: freed_block_measured's heap, then in a forked child, the heap's
 * arena locked, pick(h) marks or picks the free spans with dirty pages (their count) and
 * measure(h) measures them again as the parent counted them (the pages that went: none);
 * the measurement must write no page of the header the child still shares with its parent
 * (a copy-on-write fault in a real child). Counted from pagemap: header pages that became
 * the child's own (PAGEMAP_EXCLUSIVE) during the measurement. The child's page faults
 * counted it before (getrusage), which counted the stack too: a kernel copy into a stack
 * page the child had not written yet (mincore's vector or a struct crossing a page
 * boundary, by where ASLR put the stack) failed 6 runs in 40 ('took 1 faults'). */
static void child_measures_without_a_fault(uint32_t (*pick)(struct heap *),
                                           uint32_t (*measure)(struct heap *))
{
	char *guard;
	struct heap *h = freed_block_measured(&guard);
	struct arena *a = h->arena;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		arena_lock(a);
		uint32_t spans = pick(h);
		int pm = open("/proc/self/pagemap", O_RDONLY);
		uintptr_t lo = (uintptr_t)h, hi = lo + ((size_t)h->meta_pages << LA_PAGE_SHIFT);
		long own0 = pagemap_count(pm, lo, hi, PAGEMAP_EXCLUSIVE);
		uint32_t gone = measure(h);
		long own1 = pagemap_count(pm, lo, hi, PAGEMAP_EXCLUSIVE);
		arena_unlock(a);
		long f = pm < 0 || own0 < 0 || own1 < 0 ? 98 : spans && !gone ? own1 - own0 : 99;
		_exit(f > 99 || f < 0 ? 97 : (int)f);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	cr_assert_neq(WEXITSTATUS(st), 99, "no dirty free span, or a page went");
	cr_assert_lt(WEXITSTATUS(st), 97, "pagemap unreadable (98) or counts odd (97): %d",
	             WEXITSTATUS(st));
	cr_assert_eq(WEXITSTATUS(st), 0, "the child's measurement wrote %d shared header pages",
	             WEXITSTATUS(st));
	A(free)(guard);
}

/* the heap's free spans with dirty pages (up to 64) */
static struct span *dirty_spans[64];
static uint32_t ndirty_spans;

static uint32_t pick_dirty_spans(struct heap *h)
{
	ndirty_spans = 0;
	for (int i = 0; i < HEAP_NBINS; i++)
		for (struct span *s = h->bins[i]; s && ndirty_spans < 64; s = s->next)
			if (s->dirty)
				dirty_spans[ndirty_spans++] = s;
	return ndirty_spans;
}

/* the free spans with dirty pages marked unmeasured, as a free in the child marks them
 * (their descriptors' pages the child's from here) */
static uint32_t mark_dirty_spans(struct heap *h)
{
	uint32_t spans = 0;
	for (int i = 0; i < HEAP_NBINS; i++)
		for (struct span *s = h->bins[i]; s; s = s->next)
			if (s->dirty) {
				s->unmeasured = 1;
				spans++;
			}
	return spans;
}

static uint32_t measure_heap(struct heap *h)
{
	heap_measure(h, NULL);
	return 0;
}

static uint32_t measure_spans(struct heap *h)
{
	uint32_t gone = 0;
	for (uint32_t i = 0; i < ndirty_spans; i++)
		gone += heap_measure_range(h, dirty_spans[i]->first, dirty_spans[i]->npages);
	return gone;
}

/* A measurement that finds what the heap counted writes no page of its header: its free
 * spans' residency and dirty counts stand, and the heap's fields are not rewritten with
 * themselves. A forked child's decay pass measured spans its parent had measured and took a
 * copy-on-write fault for the fields' page (resident_add(h, 0), dirty_add(h, 0)). */
Test(heap, a_measurement_that_finds_nothing_changed_writes_no_header_page)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	cr_skip_test("the sanitizer's shadow pages fault beside liballoc's");
#endif
	child_measures_without_a_fault(mark_dirty_spans, measure_heap);
}

/* The same for a measurement of a range (heap_measure_range: the decay pass's of the parked
 * span and of empty partial spans, arena.c measure_locked): the free spans' pages measured
 * again in a forked child, as their parent counted them, write no page of the header (the
 * heap's resident count rewritten with itself took a copy-on-write fault). */
Test(heap, a_range_measured_with_nothing_changed_writes_no_header_page)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	cr_skip_test("the sanitizer's shadow pages fault beside liballoc's");
#endif
	child_measures_without_a_fault(pick_dirty_spans, measure_spans);
}

/* The arena's empty spans kept on its partial lists. */
static uint32_t empty_partial_spans(struct arena *a)
{
	uint32_t n = 0;
	for (unsigned cls = 0; cls < LA_NCLASSES; cls++)
		for (struct span *s = a->partial[cls]; s; s = s->next)
			n += s->used == 0;
	return n;
}

/* in the child: a batch of 28 KiB blocks freed (its spans kept empty on the class's partial
 * list, arena.c KEEP_BATCH_FROM), a 400-page block written every other page and freed
 * (parked whole), the arena measured; then measured again with the arena's counters
 * unwritable (a write there: SIGSEGV); then the parked block's pages taken away and the
 * arena measured a third time: the counts fall by what the parked block held. */
static int measure_parked_and_empty_spans(void *arg)
{
	(void)arg;
	enum { N = 64, SIZE = 28672, PAGES = 400 };
	static void *p[N];
	for (int i = 0; i < N; i++)
		if (!(p[i] = A(malloc)(SIZE)))
			return 10;
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	char *b = A(malloc)((size_t)PAGES << LA_PAGE_SHIFT);
	char *guard = A(malloc)((size_t)64 << LA_PAGE_SHIFT);
	if (!b || !guard)
		return 10;
	for (unsigned i = 0; i < PAGES; i += 2)
		b[(size_t)i << LA_PAGE_SHIFT] = 1;
	struct arena *a = heap_of(b)->arena;
	A(free)(b);
	arena_measure(a);
	arena_lock(a);
	bool parked = a->parked != NULL;
	uint32_t held = a->parked_resident, empty = empty_partial_spans(a);
	arena_unlock(a);
	if (!parked || held < PAGES / 2 || !empty) {
		fprintf(stderr, "parked %d (%u pages resident), %u empty spans\n", parked, held,
		        empty);
		return 11;
	}
	uintptr_t lo = (uintptr_t)a->c & ~(uintptr_t)(LA_PAGE - 1);
	uintptr_t hi = ((uintptr_t)(a->c + 1) + LA_PAGE - 1) & ~(uintptr_t)(LA_PAGE - 1);
	if (mprotect((void *)lo, hi - lo, PROT_READ) != 0)
		return 12;
	arena_measure(a); /* nothing changed: nothing written */
	if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE) != 0)
		return 12;
	uint64_t before = a->c->free_resident_bytes;
	madvise(b - ((uintptr_t)b & (LA_PAGE - 1)), (size_t)PAGES << LA_PAGE_SHIFT, MADV_DONTNEED);
	arena_measure(a);
	arena_lock(a);
	uint32_t left = a->parked_resident;
	uint64_t after = a->c->free_resident_bytes;
	arena_unlock(a);
	if (left != 0 || before - after != (uint64_t)held << LA_PAGE_SHIFT) {
		fprintf(stderr, "parked pages resident %u -> %u, free resident %llu -> %llu\n",
		        held, left, (unsigned long long)before, (unsigned long long)after);
		return 13;
	}
	A(free)(guard);
	return 0;
}

/* A measurement of the arena (arena.c measure_locked: the decay pass's, once a period) that
 * finds its parked block's and its empty partial spans' pages as it counted them writes
 * none of its counters: a forked child's pass over what its parent measured took a
 * copy-on-write fault on the counters' page (or the segment file's page) for a subtraction
 * of 0. Each of measure_locked's two `if (gone)` is seen here: without it, the unwritable
 * counters stop the child (SIGSEGV). Where pages went, the counts fall by them. In a child:
 * one thread of the program's, and its control thread has nothing to count meanwhile. */
Test(heap, an_arena_measured_with_nothing_changed_writes_no_counter)
{
	pages_only(0); /* (decay_ms 0: the child's control thread runs no pass meanwhile) */
	set("burst_predict", 0); /* nor prepares a burst */
	set("mmap_dynamic", 0);
	set("mmap_threshold", 8 << 20);
	char err[512];
	int st = run_child_stderr(measure_parked_and_empty_spans, NULL, err, sizeof(err));
	cr_assert_neq(st, -1);
	cr_assert(!WIFSIGNALED(st), "the child stopped by signal %d (a write to its counters)",
	          WTERMSIG(st));
	cr_assert(WIFEXITED(st));
	cr_assert_eq(WEXITSTATUS(st), 0, "the child exited %d: %s", WEXITSTATUS(st), err);
}

/* A fake THP directory (thpdir.h) read from now on: `enabled` pmd, hugepages-64kB m64,
 * hugepages-2048kB in "inherit" (thp_dir_remove takes its files away; the modes stay read:
 * os_huge_reread is not called). */
static void fake_thp_dir(char *dir, const char *pmd, const char *m64)
{
	thp_dir_make(dir, pmd, "always [inherit] madvise never\n", m64);
	os_thp_dir = dir;
	os_huge_reread();
}

/* A realloc that moves a large block's pages (arena_move_large) and succeeds leaves errno
 * as it was, whatever the move's system calls set: here its first look at the THP mode
 * (a fake directory whose hugepages-64kB holds no `enabled`: ENOENT), as a refused mremap
 * would on a kernel that refuses it. */
Test(heap, a_realloc_that_moves_a_blocks_pages_keeps_errno)
{
	char *b[MV_N];
	block_and_guard(b, 100);
	memset(b[MV_BLOCK], 3, (size_t)100 << LA_PAGE_SHIFT);
	/* hugepages-64kB holds no `enabled` */
	char dir[] = "/tmp/la-thp-XXXXXX";
	thp_dir_make(dir, "always [madvise] never\n", NULL, NULL);
	const char *was = os_thp_dir;
	os_thp_dir = dir;
	os_huge_reread();
	errno = 4242;
	char *p = A(realloc)(b[MV_BLOCK], (size_t)160 << LA_PAGE_SHIFT);
	int err = errno;
	os_thp_dir = was;
	os_huge_reread();
	thp_dir_remove(dir);
	cr_assert_not_null(p);
	cr_assert_neq(p, b[MV_BLOCK]);
	cr_assert_eq(in_core(b[MV_BLOCK], 100), 0, "the pages moved (%u of the old ones resident)",
	             in_core(b[MV_BLOCK], 100));
	cr_assert_eq(p[((size_t)100 << LA_PAGE_SHIFT) - 1], 3);
	cr_assert_eq(err, 4242, "errno %d after a realloc that succeeded", err);
	A(free)(p);
	A(free)(b[MV_GUARD]);
}

/* A multi-size THP size in "always" (hugepages-64kB/enabled, Linux 6.8) fills ranges nobody
 * advised with folios of that size, whatever the PMD size's `enabled` says: pages no
 * allocator write touched are resident then, as in mode "always" (os_thp_always). */
Test(heap, a_multi_size_thp_of_mode_always_counts_as_mode_always)
{
	char d1[] = "/tmp/la-thp-XXXXXX", d2[] = "/tmp/la-thp-XXXXXX", d3[] = "/tmp/la-thp-XXXXXX";
	fake_thp_dir(d1, "always [madvise] never\n", "always inherit madvise [never]\n");
	cr_assert(!os_thp_always(), "madvise, 64 KiB never: not always");
	cr_assert_eq(os_huge_size(), (size_t)2 << 20);
	fake_thp_dir(d2, "always [madvise] never\n", "[always] inherit madvise never\n");
	cr_assert(os_thp_always(), "64 KiB folios in any range: always");
	cr_assert_eq(os_huge_size(), (size_t)2 << 20, "the PMD size's mode is still madvise");
	fake_thp_dir(d3, "always madvise [never]\n", "always [inherit] madvise never\n");
	cr_assert(!os_thp_always(), "never, 64 KiB inherits it: not always");
	cr_assert_eq(os_huge_size(), 0);
	thp_dir_remove(d1);
	thp_dir_remove(d2);
	thp_dir_remove(d3);
}

/* ... and a purge then advises a free span whole (the bitmap bounds nothing): here a page
 * past the last one the allocator marked was made resident behind its back (as the kernel's
 * 64 KiB folio around a page a carving wrote is) after the span was measured; a purge
 * bounded by the bitmap (e69ab62) left it resident for good. */
Test(heap, a_purge_where_a_multi_size_thp_is_always_advises_the_whole_span)
{
	char dir[] = "/tmp/la-thp-XXXXXX";
	fake_thp_dir(dir, "always [madvise] never\n", "[always] inherit madvise never\n");
	(void)os_thp_always(); /* read now */
	thp_dir_remove(dir);
	pages_only(0);
	set("mmap_dynamic", 0);
	set("mmap_threshold", 8 << 20);
	enum { PAGES = 400, LO = 10, HI = 300, BEHIND = 303 };
	liballoc_trim(0);
	char *b = A(malloc)((size_t)PAGES << LA_PAGE_SHIFT);
	char *guard = A(malloc)((size_t)64 << LA_PAGE_SHIFT);
	cr_assert_not_null(b);
	cr_assert_not_null(guard);
	b[(size_t)LO << LA_PAGE_SHIFT] = 1;
	b[(size_t)HI << LA_PAGE_SHIFT] = 1;
	struct heap *h = heap_of(b);
	struct arena *a = h->arena;
	A(free)(b);
	arena_lock_all();
	arena_unlock_all();
	arena_lock(a);
	heap_measure(h, NULL);
	b[(size_t)BEHIND << LA_PAGE_SHIFT] = 1; /* the kernel's, not the allocator's */
	heap_purge(h, 0);
	arena_unlock(a);
	unsigned resident = resident_pages(b, PAGES);
	cr_assert_eq(resident, 0, "%u of the span's pages still resident after its purge",
	             resident);
	A(free)(guard);
}

/* A heap's creation writes the header pages of its first free span's entries: the fields'
 * page, and one page each of the page map, the index and the descriptors (a heap_create
 * measured alone, under the arena's lock, its own minor faults). One fault each: the
 * fields' page was read (the zero page mapped) before its first write, 5 faults; with the
 * arrays' first entries straddling pages, 7. */
Test(heap, creating_a_heap_faults_each_header_page_once)
{
	struct arena *a = tcache_arena(&la_tcache);
	arena_lock(a);
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	struct heap *h = heap_create(a, a->index, a->c);
	getrusage(RUSAGE_THREAD, &r1);
	if (h)
		heap_destroy(h);
	arena_unlock(a);
	cr_assert_not_null(h);
	long faults = r1.ru_minflt - r0.ru_minflt;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* The header's writes also read ASan's shadow of each page (CI's ASan stage: 7 faults,
	 * 4 header pages and the 3 shadow pages they map), and TSan writes its shadow of each
	 * (4 stores to 4 fresh pages of a TSan build: 10 faults); the plain build counts the
	 * header. */
	cr_skip_test("the sanitizer's shadow pages fault beside liballoc's (%ld faults)", faults);
#endif
	cr_assert_leq(faults, 4, "%ld minor faults", faults);
}

/* A small block realloc'd to its usable size, or to the size it was asked for, keeps its
 * place and its size: no move, no room added. Every request size up to 16 KiB
 * (REALLOC_LARGE_FROM). (review32: realloc's fast path taking n equal to the block's size
 * for a growth, which moved these blocks to larger ones, passed every other suite.) */
Test(heap, a_small_block_realloced_to_its_usable_size_keeps_its_place)
{
	for (size_t n = 1; n <= 16384; n++) {
		char *p = A(malloc)(n);
		cr_assert_not_null(p);
		size_t have = A(malloc_usable_size)(p);
		p[have - 1] = 7;
		cr_assert_eq(A(realloc)(p, have), p, "realloc of a %zu-byte block to %zu moved it",
		             have, have);
		cr_assert_eq(A(realloc)(p, n), p, "realloc of a %zu-byte block to %zu moved it",
		             have, n);
		cr_assert_eq(A(malloc_usable_size)(p), have, "malloc(%zu): %zu bytes, now %zu", n,
		             have, A(malloc_usable_size)(p));
		cr_assert_eq(p[have - 1], 7);
		A(free)(p);
	}
}

/* la_popcount64 counts as libgcc's count does, with the popcnt instruction (la_popcnt, set
 * at the start where the CPU has it: cpuid's leaf 1) and without it. */
Test(heap, popcount_uses_the_instruction_where_the_cpu_has_it)
{
	A(free)(A(malloc)(32)); /* (the start: la_init) */
#if defined(__x86_64__) && !defined(__POPCNT__)
	unsigned a, b, c, d;
	bool has = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_POPCNT);
	cr_assert_eq(la_popcnt, has, "la_popcnt %d, cpuid's popcnt bit %d", la_popcnt, has);
#endif
	bool was = la_popcnt;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (int pass = 0; pass < 2; pass++) {
		la_popcnt = pass == 0 ? was : false;
		cr_assert_eq(la_popcount64(0), 0);
		cr_assert_eq(la_popcount64(~0ULL), 64);
		for (int i = 0; i < 1000; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			cr_assert_eq(la_popcount64(x), (uint32_t)__builtin_popcountll(x), "%#llx",
			             (unsigned long long)x);
		}
	}
	la_popcnt = was;
}
