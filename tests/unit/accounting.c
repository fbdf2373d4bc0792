/* accounting.c — the memory figures (liballoc_shm.h, LA_MEMORY) mean what they say: after
 * every kind of change (small and large blocks, aligned ones, in-place resizes, parked
 * blocks, empty spans, trims, idle-heap releases, the decay pass and a measurement) each
 * arena's published gauges equal what a walk of its heaps finds, every page the kernel
 * has resident in a heap is one the allocator counts, the header pages it counts as
 * metadata are exactly those mincore finds, and what trim, release and flush report
 * released is what left the process's RSS. Linked with liballoc.a; every test runs in
 * its own process. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/api.h"
#include "arena.h"
#include "control.h"
#include "direct.h"
#include "heap.h"
#include "childerr.h"
#include "grown.h"
#include "mincount.h"
#include "liballoc.h"
#include "os.h"
#include "procstatus.h"
#include "shm.h"
#include "sizeclass.h"
#include "tcache.h"

static void set(const char *name, int64_t v)
{
	char reason[160];
	cr_assert_eq(liballoc_set(name, v, reason, sizeof(reason)), 0, "%s: %s", name, reason);
}

/* Resident pages of [p, p + pages) by mincore, one flag per page into v (NULL: count). */
static uint32_t resident(const void *p, uint32_t pages, unsigned char *v)
{
	unsigned char local[LA_HEAP_PAGES];
	unsigned char *vec = v ? v : local;
	cr_assert_eq(mincore((void *)p, (size_t)pages << LA_PAGE_SHIFT, vec), 0);
	uint32_t n = 0;
	for (uint32_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	return n;
}

static bool bit(const struct heap *h, uint32_t pg)
{
	return h->resident[pg >> 6] >> (pg & 63) & 1;
}

/* cached_bytes: the transfer cache's blocks and the bins of the thread caches attached to
 * the arena as they last published them. A flusher (the decay pass) may publish during a
 * check, its add before its count: a difference that goes away is that; a lost update stays.
 * So read again, a millisecond apart, until both agree (at most 200 times). */
static void check_cached(struct arena *a)
{
	uint64_t cached = 0, xfer = 0, before = 0;
	for (int tries = 0; tries < 200; tries++) {
		if (tries)
			usleep(1000);
		before = tcache_published(a); /* (its lock before the arena's) */
		arena_lock(a);
		cached = a->c->cached_bytes;
		xfer = a->xfer_bytes;
		arena_unlock(a);
		if (tcache_published(a) == before && cached == xfer + before)
			return;
	}
	cr_assert_fail("arena %u: cached %llu, transfer cache %llu + thread caches %llu", a->index,
	               (unsigned long long)cached, (unsigned long long)xfer,
	               (unsigned long long)before);
}

/* Walk arena a under its lock and check every gauge it publishes against its heaps, and
 * its class statistics: the class's spans, its blocks out of the arena (out of their spans
 * and not in the transfer cache), one refill and one flush counted for each of the arena's
 * (a deferred flush's when it is drained: drained first). */
static void check_arena(struct arena *a)
{
	static unsigned char vec[LA_HEAP_PAGES];
	arena_lock(a);
	arena_drain(a);
	uint64_t allocated = 0, data = 0, free_res = 0, meta = 0, idle_meta = 0, parked = 0;
	uint64_t dirty_sum = 0;
	uint64_t cls_used[LA_NCLASSES] = {0}, cls_spans[LA_NCLASSES] = {0};
	uint64_t cls_empty[LA_NCLASSES] = {0}, empty_unflagged = 0;
	for (struct heap *h = a->heaps; h; h = h->next) {
		uint32_t bits = 0, dirty = 0, spare = 0;
		for (uint32_t pg = h->first_page; pg < LA_HEAP_PAGES; pg++)
			bits += bit(h, pg);
		cr_assert_eq(bits, h->resident_pages, "heap %p: %u bits set, %u counted", (void *)h,
		             bits, h->resident_pages);
		resident(h, LA_HEAP_PAGES, vec);
		/* the header: exactly the pages counted as metadata are resident */
		uint32_t hdr = 0;
		for (uint32_t pg = 0; pg < h->first_page; pg++)
			hdr += vec[pg] & 1;
		cr_assert_eq(hdr, h->meta_pages, "heap %p: %u header pages resident, %u counted",
		             (void *)h, hdr, h->meta_pages);
		for (uint32_t pg = h->first_page; pg < LA_HEAP_PAGES;) {
			struct span *s = span_at(h, pg);
			uint32_t set = heap_resident_in(h, s->first, s->npages);
			/* every data page the kernel holds is one the allocator knows may be
			 * resident (the allocator's own spans count whole as metadata) */
			for (uint32_t i = pg; s->kind != SPAN_META && i < pg + s->npages; i++)
				cr_assert(!(vec[i] & 1) || bit(h, i),
				          "heap %p: page %u is resident but not counted", (void *)h,
				          i);
			switch (s->kind) {
			case SPAN_FREE:
				cr_assert_eq(s->dirty, set, "free span at %u: dirty %u, %u bits",
				             pg, s->dirty, set);
				dirty += set;
				break;
			case SPAN_SMALL:
				allocated += (uint64_t)s->used * sc_size[s->cls];
				cls_used[s->cls] += s->used;
				cls_spans[s->cls]++;
				if (s->used == 0) {
					free_res += (uint64_t)set << LA_PAGE_SHIFT;
					spare += s->npages;
					cls_empty[s->cls]++;
					/* kept: on its partial list, flagged empty (arena.c,
					 * PARTIAL_EMPTY 2) */
					empty_unflagged += s->on_partial != 2;
				}
				break;
			case SPAN_LARGE:
				cr_assert_eq(set, s->npages, "a large block counts whole");
				allocated += (uint64_t)s->npages << LA_PAGE_SHIFT;
				break;
			case SPAN_PARKED:
				cr_assert_eq(s, a->parked);
				cr_assert_eq(set, a->parked_resident);
				parked++;
				free_res += (uint64_t)set << LA_PAGE_SHIFT;
				spare += s->npages;
				break;
			case SPAN_META: { /* a thread's cache slots, the transfer cache */
				cr_assert_eq(set, 0, "metadata is not data");
				/* slots count whole; the transfer cache the pages its chunks
				 * written reach and those resident when it was set up */
				uint64_t counted = span_base(h, s) == (void *)a->xfer
				                           ? xfer_meta_bytes(a->xfer_pages)
				                           : (uint64_t)s->npages << LA_PAGE_SHIFT;
				uint32_t held = 0;
				for (uint32_t i = pg; i < pg + s->npages; i++)
					held += vec[i] & 1;
				cr_assert_leq((uint64_t)held << LA_PAGE_SHIFT, counted,
				              "heap %p: metadata at %u holds %u resident pages, "
				              "counts %llu bytes",
				              (void *)h, pg, held, (unsigned long long)counted);
				meta += counted;
				break;
			}
			default:
				cr_assert_fail("page %u starts no span", pg);
			}
			pg += s->npages;
		}
		cr_assert_eq(dirty, h->dirty_pages);
		dirty_sum += dirty;
		cr_assert_eq(spare, h->spare_pages);
		cr_assert_eq((bool)h->idle, h->used_pages == spare);
		data += (uint64_t)bits << LA_PAGE_SHIFT;
		free_res += (uint64_t)dirty << LA_PAGE_SHIFT;
		meta += (uint64_t)h->meta_pages << LA_PAGE_SHIFT;
		if (h->idle)
			idle_meta += (uint64_t)h->meta_pages << LA_PAGE_SHIFT;
	}
	cr_assert_eq(parked, a->parked ? 1 : 0);
	/* each class's partial list: as long as its count (npartial: the refill's side-by-side
	 * walk needs POP_WAYS spans), linked both ways, every span on it flagged and of it */
	for (unsigned k = 0; k < LA_NCLASSES; k++) {
		uint32_t len = 0;
		for (struct span *s = a->partial[k], *prev = NULL; s; prev = s, s = s->next) {
			cr_assert(s->on_partial && s->cls == k && s->prev == prev,
			          "arena %u class %u: a span on the partial list out of place",
			          a->index, k);
			len++;
		}
		cr_assert_eq(len, a->npartial[k], "arena %u class %u: %u spans listed, npartial %u",
		             a->index, k, len, a->npartial[k]);
	}
	const struct la_counters *c = a->c;
	cr_assert_eq(c->allocated_bytes, allocated, "arena %u: allocated %llu, walk %llu", a->index,
	             (unsigned long long)c->allocated_bytes, (unsigned long long)allocated);
	cr_assert_eq(c->data_resident_bytes, data, "arena %u: data resident %llu, walk %llu",
	             a->index, (unsigned long long)c->data_resident_bytes,
	             (unsigned long long)data);
	cr_assert_eq(c->free_resident_bytes, free_res, "arena %u: free resident %llu, walk %llu",
	             a->index, (unsigned long long)c->free_resident_bytes,
	             (unsigned long long)free_res);
	cr_assert_eq(c->metadata_bytes, meta);
	cr_assert_eq(c->idle_metadata_bytes, idle_meta);
	cr_assert_eq(c->address_space_bytes, (uint64_t)a->nheaps * LA_HEAP_SIZE);
	cr_assert_eq(c->heaps, a->nheaps);
	/* the class statistics as they are now, checked after the unlock (a failed check
	 * with the lock held would leave the test's exit waiting for it) */
	struct la_class_stats cs[LA_NCLASSES];
	uint64_t out[LA_NCLASSES];
	for (unsigned k = 0; k < LA_NCLASSES; k++) {
		cs[k] = shm_arena_classes(a->index)[k];
		out[k] = cls_used[k] - a->xfer_n[k];
	}
	uint64_t cache_refills = c->cache_refills;
	uint64_t cache_flushes = c->cache_flushes + c->cache_flushes_deferred;
	uint32_t arena_dirty = a->dirty_pages;
	uint32_t nspans[LA_NCLASSES], nempty[LA_NCLASSES];
	memcpy(nspans, a->nspans, sizeof(nspans));
	memcpy(nempty, a->nempty, sizeof(nempty));
	arena_unlock(a);
	cr_assert_eq(empty_unflagged, 0, "arena %u: %llu empty small spans not flagged kept",
	             a->index, (unsigned long long)empty_unflagged);
	/* the sum a thread cache's refill reads without the lock (tcache.c, bin_alloc) */
	cr_assert_eq(arena_dirty, dirty_sum, "arena %u: dirty_pages %u, its heaps' %llu", a->index,
	             arena_dirty, (unsigned long long)dirty_sum);
	uint64_t refills = 0, flushes = 0;
	for (unsigned k = 0; k < LA_NCLASSES; k++) {
		cr_assert_eq(cs[k].spans, cls_spans[k], "arena %u class %u: spans %llu, walk %llu",
		             a->index, k, (unsigned long long)cs[k].spans,
		             (unsigned long long)cls_spans[k]);
		cr_assert_eq(nspans[k], cls_spans[k], "arena %u class %u: nspans %u, walk %llu",
		             a->index, k, nspans[k], (unsigned long long)cls_spans[k]);
		cr_assert_eq(nempty[k], cls_empty[k], "arena %u class %u: nempty %u, walk %llu",
		             a->index, k, nempty[k], (unsigned long long)cls_empty[k]);
		cr_assert_eq(cs[k].blocks_in_use, out[k],
		             "arena %u class %u: in use %llu, walk %llu", a->index, k,
		             (unsigned long long)cs[k].blocks_in_use, (unsigned long long)out[k]);
		refills += cs[k].refills;
		flushes += cs[k].flushes;
	}
	cr_assert_eq(refills, cache_refills);
	cr_assert_eq(flushes, cache_flushes, "arena %u: class flushes %llu, flushes %llu", a->index,
	             (unsigned long long)flushes, (unsigned long long)cache_flushes);
	check_cached(a);
}

static void check_all(void)
{
	for (uint32_t i = 0; i < arena_count; i++)
		check_arena(&arenas[i]);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A mix of everything a heap does: small blocks of every class, large ones (some aligned,
 * some touched only in part), in-place growth and shrinking, frees in random order. */
Test(accounting, every_gauge_matches_a_walk_of_the_heaps, .timeout = 120)
{
	set("mmap_threshold", 4 << 20); /* large blocks come from heaps */
	enum { N = 3000 };
	static void *p[N];
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < N; i++) {
			if (p[i] && xorshift(&rng) % 3 == 0) {
				A(free)(p[i]);
				p[i] = NULL;
			}
			if (p[i])
				continue;
			uint64_t r = xorshift(&rng);
			size_t n = r % 16 < 13 ? 16 + r % 4000 : 20000 + r % (512 << 10);
			if (r % 97 == 0) {
				cr_assert_eq(A(posix_memalign)(&p[i], 65536, n), 0);
			} else {
				p[i] = A(malloc)(n);
			}
			cr_assert_not_null(p[i]);
			/* touch all of a small block, the first half of a large one */
			memset(p[i], 7, n <= 16384 ? n : n / 2);
			if (n > 16384 && r % 5 == 0) { /* grow or shrink in place if it can */
				size_t m = r % 2 ? n + 40000 : n / 2 + 1;
				void *q = A(realloc)(p[i], m);
				cr_assert_not_null(q);
				p[i] = q;
			}
		}
		check_all();
		if (round == 2)
			liballoc_flush_caches();
		if (round == 3) {
			liballoc_trim(0);
			check_all();
			op_measure();
		}
		if (round == 4)
			liballoc_release_idle_heaps();
		check_all();
	}
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	check_all();
	liballoc_flush_caches();
	check_all();
	op_measure();
	check_all();
	liballoc_release_idle_heaps();
	check_all();
	liballoc_trim(0);
	check_all();
}

/* Threads on every arena, and more sharing them, allocate blocks of many classes and free
 * them, half in another thread (remote frees, drained by the owner): every arena's class
 * statistics still match its spans, and the process's figures (shm_class_totals, what
 * allocctld reads) are the arenas' sums. */
enum { MIX_THREADS = 6, MIX_BLOCKS = 4000 };
static void *mix_blocks[MIX_THREADS][MIX_BLOCKS];
static pthread_barrier_t mix_barrier;

static void *mix_thread(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ULL + (uint64_t)t;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < MIX_BLOCKS; i++) {
			size_t n = 8 + xorshift(&rng) % (round == 1 ? 40000 : 2000);
			mix_blocks[t][i] = A(malloc)(n);
			cr_assert_not_null(mix_blocks[t][i]);
			memset(mix_blocks[t][i], 1, 8);
		}
		pthread_barrier_wait(&mix_barrier);
		/* the even blocks of this thread, the odd ones of the next */
		int next = (t + 1) % MIX_THREADS;
		for (int i = 0; i < MIX_BLOCKS; i += 2) {
			A(free)(mix_blocks[t][i]);
			A(free)(mix_blocks[next][i + 1]);
		}
		pthread_barrier_wait(&mix_barrier);
	}
	for (int i = 0; i < MIX_BLOCKS; i += 3)
		mix_blocks[t][i] = A(malloc)(16 + (size_t)i % 900); /* kept past the exit */
	return NULL;
}

Test(accounting, every_arenas_class_statistics_match_its_spans, .timeout = 120)
{
	pthread_barrier_init(&mix_barrier, NULL, MIX_THREADS);
	pthread_t th[MIX_THREADS];
	for (int t = 0; t < MIX_THREADS; t++)
		pthread_create(&th[t], NULL, mix_thread, (void *)(intptr_t)t);
	for (int t = 0; t < MIX_THREADS; t++)
		pthread_join(th[t], NULL);
	cr_assert_geq(arena_count, 2, "the threads used several arenas");
	check_all();
	uint64_t in_use = 0;
	for (unsigned k = 0; k < LA_NCLASSES; k++) {
		struct la_class_stats tot, sum = {0};
		shm_class_totals(k, &tot);
		for (uint32_t i = 0; i < arena_count; i++)
			la_class_stats_add(&sum, &shm_arena_classes(i)[k]);
		cr_assert_eq(memcmp(&tot, &sum, sizeof(tot)), 0, "class %u: totals are the sums",
		             k);
		in_use += tot.blocks_in_use;
	}
	cr_assert_geq(in_use, MIX_THREADS * (MIX_BLOCKS / 3), "the blocks kept are in use");
	for (int t = 0; t < MIX_THREADS; t++)
		for (int i = 0; i < MIX_BLOCKS; i += 3)
			A(free)(mix_blocks[t][i]);
	liballoc_flush_caches();
	check_all();
}

/* Threads sharing one arena refill and flush their caches through its transfer cache:
 * each publishes its bins into the arena's cached_bytes outside the lock while another
 * moves blocks in and out of the transfer cache under it. Every update counts: cached is
 * still the transfer cache's blocks and the caches' bins (a plain read and write under
 * the lock lost a publish made between them, in 20 of 20 runs, and a quiet process then
 * read in use 0). */
enum { SHARE_THREADS = 8, SHARE_ROUNDS = 40000, SHARE_BURST = 96 };
static pthread_barrier_t share_barrier;
static void *share_thread(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL + (uint64_t)(intptr_t)arg;
	void *b[SHARE_BURST];
	pthread_barrier_wait(&share_barrier); /* all live at once: they share arenas */
	for (int r = 0; r < SHARE_ROUNDS; r++) {
		size_t n = 16 + xorshift(&rng) % 4 * 48; /* four classes */
		for (int i = 0; i < SHARE_BURST; i++)
			cr_assert_not_null(b[i] = A(malloc)(n));
		for (int i = 0; i < SHARE_BURST; i++)
			A(free)(b[i]);
	}
	pthread_barrier_wait(&share_barrier);
	return NULL;
}

Test(accounting, threads_of_one_arena_lose_no_cached_bytes, .timeout = 120)
{
	set("arena_max", 1);
	pthread_barrier_init(&share_barrier, NULL, SHARE_THREADS);
	pthread_t th[SHARE_THREADS];
	for (int t = 0; t < SHARE_THREADS; t++)
		pthread_create(&th[t], NULL, share_thread, (void *)(intptr_t)t);
	for (int t = 0; t < SHARE_THREADS; t++)
		pthread_join(th[t], NULL);
	/* arena_max 1: no arena beyond those the process had, fewer than the threads */
	cr_assert_lt(arena_count, SHARE_THREADS);
	check_all();
}

/* Generations of threads, each started after the last one left: its first call frees a
 * block of the thread that left, so it takes that thread's arena (arena_attach's hint) with
 * its tag, and frees the large blocks the thread before left in it (half of them, in heaps
 * of large blocks too: 64 such blocks make one) into its own large slot, as blocks of its
 * own arena by the owner entry's tag alone (free_in_large_heap, 5474ca4), then makes its
 * own and frees a third of them. Every gauge still matches the heaps, with the blocks
 * live, freed by the main thread and flushed. */
enum { GEN_THREADS = 6, GEN_BLOCKS = 96 };
static void *gen_blocks[GEN_THREADS][GEN_BLOCKS];
static uint32_t gen_arena[GEN_THREADS];
static void *gen_thread(void *arg)
{
	static const size_t sizes[] = {40000, 100000, 200000, 300000};
	int g = (int)(intptr_t)arg;
	for (int i = 0; g && i < GEN_BLOCKS; i += 2) {
		A(free)(gen_blocks[g - 1][i]);
		gen_blocks[g - 1][i] = NULL;
	}
	for (int i = 0; i < GEN_BLOCKS; i++) {
		size_t n = sizes[(i + g) % 4];
		gen_blocks[g][i] = A(malloc)(n);
		if (gen_blocks[g][i])
			memset(gen_blocks[g][i], g, n / 8);
	}
	for (int i = 1; i < GEN_BLOCKS; i += 3) {
		A(free)(gen_blocks[g][i]);
		gen_blocks[g][i] = NULL;
	}
	gen_arena[g] = la_tcache.arena->index;
	return NULL;
}

Test(accounting, a_threads_large_blocks_freed_by_the_next_thread_of_its_arena, .timeout = 120)
{
	set("mmap_threshold", 4 << 20); /* large blocks come from heaps */
	uint32_t in_large_heaps = 0;    /* the next generation frees those of even index */
	for (int g = 0; g < GEN_THREADS; g++) {
		pthread_t t;
		cr_assert_eq(pthread_create(&t, NULL, gen_thread, (void *)(intptr_t)g), 0);
		pthread_join(t, NULL);
		for (int i = 0; i < GEN_BLOCKS; i++) {
			cr_assert(gen_blocks[g][i] || i % 3 == 1);
			if (g + 1 < GEN_THREADS && i % 2 == 0 && gen_blocks[g][i] &&
			    heap_of(gen_blocks[g][i])->large)
				in_large_heaps++;
		}
		/* the thread before's arena, which no thread used any more */
		if (g)
			cr_assert_eq(gen_arena[g], gen_arena[g - 1],
			             "generation %d: arena %u, not %u", g, gen_arena[g],
			             gen_arena[g - 1]);
	}
	cr_assert_gt(in_large_heaps, 0);
	check_all();
	for (int g = 0; g < GEN_THREADS; g++)
		for (int i = 0; i < GEN_BLOCKS; i++)
			A(free)(gen_blocks[g][i]);
	check_all();
	liballoc_flush_caches();
	check_all();
	liballoc_trim(0);
	check_all();
}

/* The transfer cache's slots are set up on pages of a free span, which may still be
 * resident: those count as metadata from the set-up (they counted neither as data, which
 * the set-up un-counts, nor as metadata, which counted only the chunks written: RSS the
 * figures did not show). A thread fills its arena's transfer cache deep and leaves (the
 * slots go back to the heap, resident); the next thread of that arena sets up new ones. */
static void *xfer_deep(void *arg)
{
	(void)arg;
	enum { N = 512, K = 8 };
	static void *b[K][N];
	struct arena *a = tcache_arena(&la_tcache);
	arena_lock(a);
	a->xfer_earned = XF_SLOTS / XF_CHUNK - 1; /* the whole depth, as a long-lived one's */
	arena_unlock(a);
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			b[k][i] = A(malloc)(16 * (size_t)(k + 1));
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			A(free)(b[k][i]);
	arena_lock(a);
	uint32_t chunks = a->xfer_chunks;
	arena_unlock(a);
	return (void *)(uintptr_t)chunks;
}

struct xfer_next {
	struct arena *arena;
	pthread_barrier_t step;
};

static void *xfer_again(void *arg)
{
	struct xfer_next *x = arg;
	enum { N = 200 };
	static void *b[N];
	for (int i = 0; i < N; i++)
		b[i] = A(malloc)(64);
	for (int i = 0; i < N; i++)
		A(free)(b[i]); /* the bin fills: the arena's first flush sets the slots up */
	x->arena = la_tcache.arena;
	pthread_barrier_wait(&x->step); /* the main thread checks the arena */
	pthread_barrier_wait(&x->step);
	return NULL;
}

Test(accounting, the_transfer_caches_pages_resident_at_its_set_up_count_as_metadata)
{
	set("decay_ms", 600000); /* no pass purges the free slots' pages in between */
	set("arena_max", 4);     /* the thread takes an arena of its own */
	pthread_t t;
	void *chunks;
	pthread_create(&t, NULL, xfer_deep, NULL);
	pthread_join(t, &chunks);
	cr_assert_gt((uintptr_t)chunks, 4, "the slots were filled deep: %u chunks",
	             (unsigned)(uintptr_t)chunks);
	struct xfer_next x;
	pthread_barrier_init(&x.step, NULL, 2);
	pthread_create(&t, NULL, xfer_again, &x);
	pthread_barrier_wait(&x.step);
	struct arena *a = x.arena;
	arena_lock(a);
	struct xfer_slots *slots = a->xfer;
	uint64_t written = xfer_chunk_pages(a->xfer_chunks), pages = a->xfer_pages;
	arena_unlock(a);
	cr_assert_not_null(slots);
	uint32_t n = (uint32_t)(la_align_up(sizeof(*slots), LA_PAGE) >> LA_PAGE_SHIFT);
	unsigned char vec[64];
	uint32_t held = resident(slots, n, vec), beyond = 0;
	for (uint32_t i = 0; i < n; i++)
		beyond += (vec[i] & 1) && !(written >> i & 1);
	check_arena(a); /* metadata holds no more resident pages than it counts */
	pthread_barrier_wait(&x.step);
	pthread_join(t, NULL);
	cr_assert_gt(beyond, 0,
	             "the new slots' pages beyond the chunks written were resident (%u of %u "
	             "resident): the case this test is about",
	             beyond, held);
	cr_assert_geq((uint64_t)__builtin_popcountll(pages), held, "%u pages resident, %d counted",
	              held, __builtin_popcountll(pages));
}

/* A full bin's flush that finds its shared arena's lock taken goes through the ring
 * (cache_flushes_deferred): its class's flush is counted when the ring is drained. */
struct deferrer {
	struct arena *arena;
	pthread_barrier_t *step;
};

static void *defer_flush(void *arg)
{
	struct deferrer *d = arg;
	enum { K = 300 };
	static void *b[K];
	for (int i = 0; i < K; i++)
		b[i] = A(malloc)(96);
	d->arena = la_tcache.arena;
	pthread_barrier_wait(d->step); /* the main thread takes the lock */
	pthread_barrier_wait(d->step);
	for (int i = 0; i < K; i++)
		A(free)(b[i]); /* the bin fills: flushes with the lock taken */
	pthread_barrier_wait(d->step);
	return NULL;
}

Test(accounting, a_deferred_flush_counts_as_its_class_flush_at_the_drain)
{
	set("arena_max", 1);
	/* this thread has the arena the other one shares, and its transfer cache is set up
	 * (a first flush takes the lock for that) */
	static void *b[300];
	for (int i = 0; i < 300; i++)
		b[i] = A(malloc)(64);
	for (int i = 0; i < 300; i++)
		A(free)(b[i]);
	cr_assert_not_null(la_tcache.arena->xfer);
	pthread_barrier_t step;
	pthread_barrier_init(&step, NULL, 2);
	struct deferrer d = {.step = &step};
	pthread_t t;
	pthread_create(&t, NULL, defer_flush, &d);
	pthread_barrier_wait(&step);
	struct arena *a = d.arena;
	cr_assert_eq(a, la_tcache.arena, "one arena");
	unsigned cls = sc_class_of(96);
	arena_lock(a);
	uint64_t deferred0 = a->c->cache_flushes_deferred;
	uint64_t flushes0 = shm_arena_classes(a->index)[cls].flushes;
	pthread_barrier_wait(&step);
	pthread_barrier_wait(&step); /* its frees are done */
	uint64_t deferred = a->c->cache_flushes_deferred - deferred0;
	uint64_t before = shm_arena_classes(a->index)[cls].flushes;
	arena_drain(a);
	uint64_t after = shm_arena_classes(a->index)[cls].flushes;
	arena_unlock(a);
	pthread_join(t, NULL);
	cr_assert_gt(deferred, 0, "the flushes went through the ring");
	cr_assert_eq(before, flushes0, "not counted before the drain");
	cr_assert_eq(after, flushes0 + deferred, "one flush of the class for each deferred one");
	check_all();
}

/* Blocks of another thread's frees drained from the ring go into the transfer cache up to
 * the class's room, the rest to their spans: the earned depth (64 slots at first) for a
 * class of 96 bytes, whose flushes then count a depth miss (xfer_over); 256 KiB of blocks
 * (32) for one of 8 KiB, which is no depth miss. ring_drain keeps each class's room from
 * its first block (xthreads35): a room one slot too long, or one that left out the class's
 * bytes, kept 65 / 64 blocks here. */
static void ring_drain_keeps(size_t size, uint32_t n, uint32_t kept, bool over)
{
	void *b[200];
	cr_assert_leq(n, 200);
	struct arena *a = tcache_arena(&la_tcache);
	unsigned cls = sc_class_of(size);
	cr_assert_eq(sc_size[cls], size);
	cr_assert(xfer_class(cls));
	for (uint32_t i = 0; i < n; i++)
		cr_assert_not_null(b[i] = A(malloc)(size));
	arena_flush(a); /* the transfer cache empty: what the drain keeps is the ring's */
	arena_lock(a);
	cr_assert_not_null(a->xfer, "the transfer cache is set up");
	cr_assert_eq(a->xfer_n[cls], 0);
	a->xfer_over = 0;
	uint32_t depth = xfer_depth(a);
	arena_unlock(a);
	cr_assert_eq(depth, XF_CHUNK, "no chunk earned");
	arena_free_remote_array(a, NULL, b, n); /* as another arena's thread would */
	arena_lock(a);
	cr_assert(remote_pending(a), "the frees were handed over");
	arena_drain(a);
	uint32_t have = a->xfer_n[cls];
	bool marked = a->xfer_over >> cls & 1;
	arena_unlock(a);
	cr_assert_eq(have, kept, "%zu-byte blocks kept: %u of %u, expected %u", size, have, n,
	             kept);
	cr_assert_eq(marked, over, "the class marked for a depth miss: %d", marked);
	check_all();
}

Test(accounting, a_ring_drain_keeps_a_class_up_to_its_room_in_the_transfer_cache)
{
	set("decay_ms", 600000); /* no pass drains the ring or the transfer cache meanwhile */
	static void *b[300];
	for (int i = 0; i < 300; i++)
		b[i] = A(malloc)(64);
	for (int i = 0; i < 300; i++)
		A(free)(b[i]); /* the bin fills: the arena's first flush sets the slots up */
	ring_drain_keeps(96, 150, XF_CHUNK, true);
	ring_drain_keeps(8192, 100, XF_CLASS_BYTES / 8192, false);
}

/* A large block the program touched in part counts whole until it is measured: the decay
 * pass's measurement (op_measure) brings the free figures down to what is resident. */
Test(accounting, a_measurement_finds_the_pages_never_touched)
{
	set("mmap_threshold", 4 << 20);
	set("trim_threshold", 64 << 20); /* keep freed pages */
	char *keep = A(malloc)(100000);
	/* a span of 1000 pages: the block starts LA_COLOUR bytes into its first (malloc.c) */
	char *big = A(malloc)(1000 * 4096 - LA_COLOUR);
	memset(big, 1, 100 * 4096 - LA_COLOUR); /* its first 100 pages */
	struct la_counters before;
	liballoc_stats(&before);
	A(free)(big); /* parked whole */
	struct la_counters parked;
	liballoc_stats(&parked);
	cr_assert_eq(parked.free_resident_bytes - before.free_resident_bytes, 1000 * 4096);
	op_measure();
	check_all();
	struct la_counters measured;
	liballoc_stats(&measured);
	cr_assert_eq(
	        measured.free_resident_bytes - before.free_resident_bytes, 100 * 4096,
	        "%llu bytes free resident after the measurement",
	        (unsigned long long)(measured.free_resident_bytes - before.free_resident_bytes));
	/* taken back whole: all of it counts again */
	char *again = A(malloc)(1000 * 4096 - LA_COLOUR);
	cr_assert_eq(again, big);
	check_all();
	A(free)(again);
	A(free)(keep);
}

/* A measurement reads the free spans freed since the last one, not every free page again
 * (op_measure held each arena's lock for a mincore over all of its free resident pages): a
 * span it measured keeps its figure, and a free that merges into it has the whole span
 * read again. Pages taken from the span behind the allocator's back (a madvise here;
 * swap-out in a real process) show which spans were read. */
Test(accounting, a_measurement_reads_only_what_was_freed_since)
{
	set("mmap_threshold", 4 << 20);
	set("trim_threshold", 64 << 20); /* keep freed pages */
	set("decay_ms", 0);
	if (os_thp_always())
		cr_skip("transparent huge pages always: free spans are read whole each time");
	enum { P = 200 };
	char *keep = A(malloc)(100000);
	char *c = A(malloc)(10 * 4096); /* freed last, to give b back */
	char *a = A(malloc)(P * 4096), *b = A(malloc)(P * 4096);
	cr_assert_eq(b, a + P * 4096, "b follows a (the test needs them to merge)");
	memset(a, 1, P * 4096);
	memset(b, 1, P * 4096);
	A(free)(a); /* kept whole (the thread's large slot, or parked) */
	A(free)(b); /* kept in its place: a goes to the heap, a free span not measured yet */
	op_measure();
	check_all();
	struct la_counters m1, m2, m3, m4;
	liballoc_stats(&m1);
	cr_assert_eq(madvise(a, P / 2 * 4096, MADV_DONTNEED), 0);
	op_measure(); /* a's span was measured: not read again */
	check_all();
	liballoc_stats(&m2);
	struct heap *h = heap_of(a);
	uint32_t pg = heap_page_of(h, a);
	cr_assert(bit(h, pg), "a measured span was read again");
	cr_assert_eq(m2.free_resident_bytes, m1.free_resident_bytes,
	             "a measured span was read again (%llu -> %llu)",
	             (unsigned long long)m1.free_resident_bytes,
	             (unsigned long long)m2.free_resident_bytes);
	A(free)(c); /* kept instead of b: b goes to the heap and merges with a's span */
	liballoc_stats(&m3);
	op_measure();
	check_all();
	cr_assert(!bit(h, pg), "the merged span was not read");
	liballoc_stats(&m4);
	cr_assert_eq(m3.free_resident_bytes - m4.free_resident_bytes, P / 2 * 4096,
	             "the merged span read: %lld bytes gone",
	             (long long)(m3.free_resident_bytes - m4.free_resident_bytes));
	A(free)(keep);
}

/* One case of the test below: a free span of P pages, a quarter of them written, stamped
 * `back` ticks before the full pass at `tick` (a multiple of HEAP_PERIOD) would return it;
 * that pass runs. 1: it measured the span (its last page's bit cleared), 0: not, -1: the
 * control thread's own measurement (due a second after a large block's free) may have run
 * meanwhile (a stalled run), so the case says nothing. */
enum { FP_PAGES = 200 };
static int full_pass_measures(char *a, char *b, uint32_t tick, uint32_t back)
{
	enum { P = FP_PAGES };
	cr_assert_eq(b, a + P * 4096, "b follows a (the test needs a alone in its span)");
	memset(a, 1, P / 4 * 4096);
	memset(b, 1, P * 4096);
	A(free)(a); /* kept whole (the thread's large slot, or parked) */
	A(free)(b); /* kept in its place: a goes to the heap, a free span not measured yet */
	uint64_t armed = __atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED);
	struct arena *ar = la_tcache.arena;
	struct heap *h = heap_of(a);
	uint32_t pg = heap_page_of(h, a), due;
	arena_lock(ar);
	struct span *s = span_at(h, pg);
	cr_assert(s->first == pg && s->npages == P && s->dirty <= P,
	          "a's span: first %u (%u), %u pages, %u dirty", s->first, pg, s->npages, s->dirty);
	if (!s->unmeasured) { /* only a measurement clears it */
		arena_unlock(ar);
		return -1;
	}
	cr_assert_eq(s->dirty, P);
	s->stamp = tick - HEAP_PERIOD - back;
	arena_unlock(ar);
	arena_decay(ar, tick, tick, &due);
	check_all();
	bool measured = !bit(h, pg + P - 1);
	if (armed && __atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED) != armed)
		return -1; /* (cleared as that measurement starts) */
	cr_assert(measured ? s->dirty < P && !s->unmeasured : s->dirty == P && s->unmeasured,
	          "%u dirty pages, unmeasured %u, measured %d", s->dirty, s->unmeasured, measured);
	/* the next tick returns the span, whether the pass measured it or not */
	arena_decay(ar, tick + HEAP_TICK, tick + HEAP_TICK, &due);
	check_all();
	cr_assert_eq(back == 0 ? s->dirty : 0u, 0u, "%u dirty pages left after the next tick",
	             s->dirty);
	return measured;
}

/* The decay pass's full measurement leaves out the spans its next tick returns: their
 * counts go with that purge whatever it found. A forked child's pass read its parent's last
 * freed spans with mincore at one tick and purged them at the next (the fork loop's decay
 * child). A span the pass returns later is measured. */
Test(accounting, the_full_pass_leaves_unmeasured_the_spans_its_next_tick_returns)
{
	set("mmap_threshold", 4 << 20);
	set("trim_threshold", 64 << 20); /* keep freed pages */
	set("decay_ms", 0);              /* the passes are the test's */
	if (os_thp_always())
		cr_skip("transparent huge pages always: free spans are read whole each time");
	enum { TRIES = 5, N = 2 * TRIES * 3 };
	char *keep = A(malloc)(100000), *p[N];
	/* each try: a block between a live one and the block that gives it back */
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(i % 3 ? FP_PAGES * 4096 : 10 * 4096);
	uint32_t tick = (__atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) & ~(HEAP_PERIOD - 1)) +
	                4 * HEAP_PERIOD;
	int next = 0, got = -1;
	for (int t = 0; t < TRIES && got < 0; t++, next += 3, tick += 4 * HEAP_PERIOD)
		got = full_pass_measures(p[next + 1], p[next + 2], tick, 0);
	cr_assert_eq(got, 0,
	             "a span due at the next tick was measured (%d: -1, no undisturbed try)", got);
	got = -1;
	for (int t = 0; t < TRIES && got < 0; t++, next += 3, tick += 4 * HEAP_PERIOD)
		got = full_pass_measures(p[next + 1], p[next + 2], tick, (uint32_t)-HEAP_TICK);
	cr_assert_eq(got, 1, "a span due two ticks later was not measured (%d)", got);
	for (int i = 0; i < next; i += 3)
		A(free)(p[i]);
	for (int i = next; i < N; i++)
		A(free)(p[i]);
	A(free)(keep);
}

/* The test skips where this process may not lock a page (RLIMIT_MEMLOCK) */
static void mlock_or_skip(void)
{
	char *t = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(t, MAP_FAILED);
	bool can_lock = syscall(SYS_mlock, t, 4096) == 0;
	int err = errno;
	munmap(t, 4096);
	if (!can_lock)
		cr_skip_test("mlock refused here (RLIMIT_MEMLOCK): %s", strerror(err));
}

/* A span whose purge the kernel refuses (a page of it mlocked: EINVAL) stays free and dirty,
 * with the stamp that made the pass try it; the full pass's measurement reads it all the
 * same. Skipped as one the next tick returns (its stamp is older than that tick's bound),
 * it was read by no later pass either, and a large block written in part counted whole as
 * long as its memory stayed locked. */
Test(accounting, the_full_pass_measures_a_span_whose_purge_was_refused)
{
	enum { P = FP_PAGES };
	set("mmap_threshold", 4 << 20);
	set("trim_threshold", 64 << 20); /* keep freed pages */
	set("decay_ms", 0);              /* the passes are the test's */
	if (os_thp_always())
		cr_skip("transparent huge pages always: free spans are read whole each time");
	mlock_or_skip();
	char *keep = A(malloc)(100000), *x = A(malloc)(10 * 4096);
	char *a = A(malloc)(P * 4096), *b = A(malloc)(P * 4096);
	cr_assert_eq(b, a + P * 4096, "b follows a (the test needs a alone in its span)");
	memset(a, 1, P / 4 * 4096);
	memset(b, 1, P * 4096);
	/* (the system call: AddressSanitizer's mlock locks nothing) */
	char *locked = (char *)((uintptr_t)a & ~(uintptr_t)4095);
	cr_assert_eq(syscall(SYS_mlock, locked, 4096), 0, "mlock: %s", strerror(errno));
	A(free)(a); /* kept whole (the thread's large slot, or parked) */
	A(free)(b); /* kept in its place: a goes to the heap, a free span not measured yet */
	struct arena *ar = la_tcache.arena;
	struct heap *h = heap_of(a);
	uint32_t pg = heap_page_of(h, a), due;
	uint32_t tick = (__atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) & ~(HEAP_PERIOD - 1)) +
	                4 * HEAP_PERIOD;
	arena_lock(ar);
	struct span *s = span_at(h, pg);
	cr_assert(s->first == pg && s->npages == P && s->dirty == P && s->unmeasured,
	          "a's span: first %u (%u), %u pages, %u dirty, unmeasured %u", s->first, pg,
	          s->npages, s->dirty, s->unmeasured);
	s->stamp = tick - HEAP_PERIOD - HEAP_TICK; /* due at this pass */
	arena_unlock(ar);
	uint64_t refused0 = ar->c->madvise_calls;
	arena_decay(ar, tick, tick, &due); /* a full pass: its purge is refused, it measures */
	check_all();
	cr_assert(s->dirty != 0 && ar->c->madvise_calls > refused0,
	          "(set-up) the span's purge went through: %u dirty pages", s->dirty);
	cr_assert(s->dirty < P && !s->unmeasured && !bit(h, pg + P - 1),
	          "the span whose purge was refused was not measured: %u of %u pages dirty, "
	          "unmeasured %u (%u written)",
	          s->dirty, P, s->unmeasured, P / 4);
	syscall(SYS_munlock, locked, 4096);
	A(free)(x);
	A(free)(keep);
}

/* A freed direct mapping kept in the cache counts whole until a measurement (the decay
 * pass, refresh, flush) finds what was touched. */
Test(accounting, a_cached_direct_mapping_counts_what_was_touched)
{
	set("mmap_dynamic", 0);
	set("decay_ms", 0);
	struct la_counters c0, c1, c2;
	/* mappings are cached once recycled: one freed (unmapped), the next where it served */
	A(free)(A(malloc)(8 << 20));
	char *m = A(malloc)(8 << 20);
	memset(m, 1, 3 << 20);
	liballoc_stats(&c0);
	A(free)(m);
	liballoc_stats(&c1);
	cr_assert_eq(c1.free_resident_bytes - c0.free_resident_bytes, 8 << 20, "whole, unmeasured");
	cr_assert_eq(c1.data_resident_bytes, c0.data_resident_bytes,
	             "resident data: the same pages");
	op_measure();
	check_all();
	liballoc_stats(&c1);
	cr_assert_eq(c1.free_resident_bytes - c0.free_resident_bytes, 3 << 20);
	cr_assert_eq(c0.allocated_bytes - c1.allocated_bytes, 8 << 20);
	cr_assert_eq(c1.address_space_bytes, c0.address_space_bytes, "still mapped (cached)");
	char *again = A(malloc)(8 << 20);
	cr_assert_eq(again, m, "reused from the cache");
	liballoc_stats(&c2);
	cr_assert_eq(c2.free_resident_bytes, c0.free_resident_bytes);
	cr_assert_eq(c2.allocated_bytes, c0.allocated_bytes);
	cr_assert_eq(c2.address_space_bytes, c0.address_space_bytes, "a hit maps nothing new");
	/* counted whole in use again: its untouched 5 MiB back as at c0 (direct.c's hit that
	 * serves as it is moves them in one update) */
	cr_assert_eq(c2.data_resident_bytes, c0.data_resident_bytes, "resident data %lld",
	             (long long)(c2.data_resident_bytes - c0.data_resident_bytes));
	check_all();
	A(free)(again);
}

/* RssAnon of /proc/self/status in bytes, read without stdio (whose buffer would be
 * allocated): the anonymous memory the allocator's pages are part of (file pages such as
 * code faulted in by a first call would blur RSS) */
static long rss_anon(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	cr_assert_geq(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(n, 0);
	buf[n] = 0;
	char *k = strstr(buf, "RssAnon:");
	cr_assert_not_null(k);
	return atol(k + 8) * 1024;
}

/* A thread that fills its own arena's heap and frees it all before it exits: the heap
 * stays (the arena's only one) and is idle. */
static void *fill_and_leave(void *arg)
{
	enum { N = 4000 };
	void **p = arg;
	for (int i = 0; i < N; i++) {
		p[i] = A(malloc)(2048);
		memset(p[i], 2, 2048);
	}
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	return NULL;
}

/* The working set of the trim tests: WS_SMALL small blocks of 16-1024 B and WS_BIG of
 * 100000 B, each written whole. */
enum { WS_SMALL = 40000, WS_BIG = 64 };
static void working_set_written(void **p, void **big)
{
	for (int i = 0; i < WS_SMALL; i++) {
		p[i] = A(malloc)(16 + (size_t)(i % 64) * 16);
		memset(p[i], 1, 16 + (size_t)(i % 64) * 16);
	}
	for (int i = 0; i < WS_BIG; i++) {
		big[i] = A(malloc)(100000);
		memset(big[i], 1, 100000);
	}
}

/* What trim and release say they released is what left the RSS, to the page; and it is
 * what reclaimable promised, an idle heap's header included. */
Test(accounting, released_is_what_left_the_rss)
{
	set("trim_threshold", 1LL << 40); /* nothing goes back on its own */
	set("decay_ms", 0);
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	/* every path once, so that the stack and data they touch are resident before */
	liballoc_release_idle_heaps();
	liballoc_trim(0);
	(void)rss_anon();
	enum { N = WS_SMALL };
	static void *p[N];
	void *big[WS_BIG];
	working_set_written(p, big);
	/* the thread first: a refill that would carve new pages takes another arena's free
	 * resident ones (arena.c, lender), and after the frees below this arena's would serve
	 * it, leaving its own arena no heap to fill */
	static void *slots[4000];
	pthread_t t;
	pthread_create(&t, NULL, fill_and_leave, slots);
	pthread_join(t, NULL);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	for (int i = 0; i < WS_BIG; i++)
		A(free)(big[i]);
	/* others_minflt's opendir takes a block of 9 pages, from a heap of large blocks by now
	 * (arena.h, LARGE_HEAP_AFTER: the WS_BIG blocks above count), which may hold no free
	 * page resident: once here, so that the call after the figures below takes that block
	 * back, not a page faulted in after them */
	(void)others_minflt();
	liballoc_flush_caches();
	check_all();
	struct la_counters c;
	liballoc_stats(&c);
	struct la_memory m;
	la_memory_of(&c, &m);
	long o0 = others_minflt();
	long r0 = rss_anon();
	size_t rel = liballoc_release_idle_heaps();
	long r1 = rss_anon();
	size_t trim = liballoc_trim(0);
	long r2 = rss_anon();
	/* to the page, but for pages the process's other threads faulted in meanwhile */
	long others = (others_minflt() - o0) * (long)LA_PAGE, gap = (long)(rel + trim) - (r0 - r2);
	cr_assert((long)rel - (r0 - r1) == 0 || others, "release: %zu bytes said, %ld left the RSS",
	          rel, r0 - r1);
	cr_assert((long)trim - (r1 - r2) == 0 || others, "trim: %zu bytes said, %ld left the RSS",
	          trim, r1 - r2);
	cr_assert(gap >= 0 && gap <= others,
	          "%zu bytes said, %ld left the RSS, %ld faulted by others", rel + trim, r0 - r2,
	          others);
	/* (8 MiB of blocks, less what it took of this arena's free resident pages while 256
	 * KiB or more were left: ~1.6 MiB) */
	cr_assert_gt(rel, 5 << 20, "the idle heap of the thread's arena: %zu bytes", rel);
	cr_assert_gt(trim, 4 << 20);
	/* exact in every build: the flush measured what its unused blocks left (an ASan build,
	 * where liballoc's arenas see only this test, counted one page of blocks carved into a
	 * cache and flushed back unwritten) */
	cr_assert_eq(rel + trim, m.reclaimable, "released %zu, reclaimable was %llu", rel + trim,
	             (unsigned long long)m.reclaimable);
	check_all();
}

/* Large blocks written in part and freed count as free resident what the kernel holds of
 * them once the control thread has measured them, MEASURE_SOON_NS after the free, not their
 * whole length until a decay pass: large_random's 2-7 MiB loop (the first and last byte of
 * each block written) left 85 MiB counted against 7 MiB resident for the decay period. What
 * release and trim then take off the RSS is what the figures said, within 5 % or 256 KiB. */
Test(accounting, freed_large_blocks_count_what_the_kernel_holds_within_a_second)
{
	set("mmap_threshold", 16 << 20);  /* 2-7 MiB blocks from the heaps */
	set("trim_threshold", 1LL << 40); /* nothing goes back on its own */
	set("decay_ms", 600000);          /* no decay pass measures meanwhile */
	liballoc_release_idle_heaps();
	liballoc_trim(0);
	(void)rss_anon();
	uint64_t s = 88172645463325252ull;
	void *b[8] = {0};
	for (int i = 0; i < 600; i++) {
		unsigned k = (unsigned)(xorshift(&s) % 8);
		A(free)(b[k]);
		size_t sz = (2 << 20) + (size_t)(xorshift(&s) % (5 << 20));
		b[k] = A(malloc)(sz);
		cr_assert_not_null(b[k]);
		((char *)b[k])[0] = 1;
		((char *)b[k])[sz - 1] = 1;
	}
	for (int k = 0; k < 8; k++)
		A(free)(b[k]);
	struct la_counters c0, c;
	liballoc_stats(&c0);
	usleep((useconds_t)(2 * MEASURE_SOON_NS / 1000 + 500000));
	liballoc_stats(&c);
	check_all();
	struct la_memory m;
	la_memory_of(&c, &m);
	long r0 = rss_anon();
	size_t rel = liballoc_release_idle_heaps();
	size_t trim = liballoc_trim(0);
	long left = r0 - rss_anon();
	uint64_t idle_meta = m.reclaimable - c.free_resident_bytes; /* idle heaps' headers */
	long said = (long)c.free_resident_bytes, gone = left - (long)idle_meta;
	long tol = LA_MAX(256L << 10, said / 20);
	cr_log_info("free resident %llu KiB after the frees, %ld KiB measured; %ld KiB left the "
	            "RSS",
	            (unsigned long long)c0.free_resident_bytes >> 10, said >> 10, gone >> 10);
	cr_assert(labs(said - gone) <= tol,
	          "free resident %ld KiB (%llu KiB right after the frees), %ld KiB of it left "
	          "the RSS (release %zu + trim %zu bytes, idle headers %llu KiB)",
	          said >> 10, (unsigned long long)c0.free_resident_bytes >> 10, gone >> 10, rel,
	          trim, (unsigned long long)idle_meta >> 10);
	cr_assert_gt(c0.free_resident_bytes, 4 * c.free_resident_bytes,
	             "the whole blocks were counted before the measurement");
}

/* the mincore calls of one thread: mincount.h, included above */

/* glibc's malloc_trim does not measure (1737c74): it adds to released_bytes what the free
 * resident gauge lost meanwhile. That is what left the RSS, within 5 % or 256 KiB, for a
 * working set the program wrote whole; a second call with nothing left adds ~0. */
Test(accounting, malloc_trim_counts_what_left_the_rss)
{
	set("trim_threshold", 1LL << 40); /* nothing goes back on its own */
	set("decay_ms", 600000);          /* no decay pass meanwhile */
	A(malloc_trim)(0);
	(void)rss_anon();
	enum { N = WS_SMALL };
	static void *p[N];
	void *big[WS_BIG];
	working_set_written(p, big);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	for (int i = 0; i < WS_BIG; i++)
		A(free)(big[i]);
	tcache_flush_large_all(); /* (blocks in the large slot: a trim would measure) */
	/* the measurement the large frees asked for (the control thread's, a second later):
	 * until then a trim measures */
	for (int i = 0; i < 300 && __atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED); i++)
		usleep(10000);
	cr_assert_eq(op_measure_due_ns, 0, "the control thread measured");
	struct la_counters c0, c1, c2;
	liballoc_stats(&c0);
	long r0 = rss_anon();
	mincount_start();
	cr_assert_eq(A(malloc_trim)(0), 1);
	int trim_calls = mincount_stop();
	long r1 = rss_anon();
	liballoc_stats(&c1);
	cr_assert_eq(trim_calls, 0, "unmeasured");
	long said = (long)(c1.released_bytes - c0.released_bytes), left = r0 - r1;
	long tol = LA_MAX(256L << 10, left / 20);
	cr_assert_gt(left, 4 << 20, "the blocks' pages left: %ld bytes", left);
	cr_assert(labs(said - left) <= tol,
	          "malloc_trim: %ld bytes counted released, %ld left the RSS", said, left);
	A(malloc_trim)(0);
	liballoc_stats(&c2);
	cr_assert_leq(c2.released_bytes - c1.released_bytes, 256 << 10,
	              "nothing to release: %llu bytes counted",
	              (unsigned long long)(c2.released_bytes - c1.released_bytes));
	check_all();
}

/* An 8 MiB block from a heap, its first 2 MiB written (the set-up of the two tests below;
 * slot: the thread cache's large slot may hold it). */
static char *block_written_in_part(bool slot)
{
	set("mmap_threshold", 16 << 20); /* the block from a heap */
	set("mmap_dynamic", 0);
	if (slot)
		set("tcache_max_bytes", 4 << 20); /* the large slot holds up to 16 MiB */
	set("trim_threshold", 1LL << 40);
	set("decay_ms", 600000);
	A(malloc_trim)(0);
	(void)rss_anon();
	/* a span of 8 MiB: the block starts LA_COLOUR bytes into its first page (malloc.c) */
	char *b = A(malloc)((8 << 20) - LA_COLOUR);
	cr_assert_not_null(b);
	memset(b, 1, 2 << 20);
	return b;
}

/* A malloc_trim now returns the freed block's written pages and counts released what left
 * the RSS (within 5 % or 256 KiB), not the block's unwritten pages. */
static void malloc_trim_counts_what_was_written(void)
{
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	long r0 = rss_anon();
	cr_assert_eq(A(malloc_trim)(0), 1);
	long r1 = rss_anon();
	liballoc_stats(&c1);
	long said = (long)(c1.released_bytes - c0.released_bytes), left = r0 - r1;
	cr_assert_gt(left, 1 << 20, "the written pages left: %ld bytes", left);
	cr_assert(labs(said - left) <= LA_MAX(256L << 10, left / 20),
	          "malloc_trim: %ld bytes counted released, %ld left the RSS", said, left);
}

/* A block in a thread cache's large slot counts cached, not free resident; the trim parks
 * it (whole in the gauge) and returns it: a malloc_trim that found no measurement due
 * before it flushed the slot counted none of it released (the gauge rose and fell by it). */
Test(accounting, malloc_trim_counts_a_large_slot_block_written_in_part_as_written)
{
	char *b = block_written_in_part(true);
	for (int i = 0; i < 300 && __atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED); i++)
		usleep(10000);
	cr_assert_eq(op_measure_due_ns, 0, "(set-up: no measurement due)");
	A(free)(b); /* into the large slot: no measurement asked */
	cr_assert_eq(tcache_large_bytes(), 8 << 20, "(set-up: in the slot)");
	malloc_trim_counts_what_was_written();
}

/* A large block written in part and freed counts whole in the free resident gauge until
 * measured (a second later): a malloc_trim right after the free must not count its
 * unwritten pages released. */
Test(accounting, malloc_trim_counts_a_large_block_written_in_part_as_written)
{
	char *b = block_written_in_part(false);
	A(free)(b); /* (asks for a measurement a second later) */
	malloc_trim_counts_what_was_written();
}

/* A trim's figure against what left the RSS over a window in which other threads took
 * `others` faults: equal, or short of it by at most those pages (RssAnon is the whole
 * process's: a forked child's control thread starting, or a thread's first sweep, fault
 * pages in beside the trim; the ASan child's trim read 3 "said != left" in a CI run). */
static bool said_is_left(long said, long left, long others)
{
	long gap = said - left;
	return gap == 0 || (gap > 0 && gap <= others * 4096);
}

/* The set-up of the three tests below: 40 large blocks in one heap, touched only at their
 * ends, every other one freed, leave 20 free spans apart with a few resident pages each
 * (*spans: those of the blocks' heap with dirty pages), nothing going back on its own;
 * false if the blocks could not be made in one heap. The caller frees the odd ones. */
enum { SPANS_APART_BLOCKS = 40 };
static bool spans_apart(char *p[SPANS_APART_BLOCKS], uint32_t *spans)
{
	set("mmap_threshold", 4 << 20);
	set("mmap_dynamic", 0);
	set("trim_threshold", 1LL << 40); /* nothing goes back on its own */
	set("decay_ms", 0);
	liballoc_trim(0);
	(void)rss_anon();
	/* all of them from the arena's heap of large blocks (arena.h, LARGE_HEAP_AFTER: not
	 * the first ones from its other heap) */
	A(free)(A(malloc)(16)); /* (the thread's arena) */
	struct arena *a = tcache_arena(&la_tcache);
	arena_lock(a);
	a->large_heap_wait = LARGE_HEAP_AFTER;
	arena_unlock(a);
	for (int i = 0; i < SPANS_APART_BLOCKS; i++) {
		/* 9-21 pages: large blocks (32 KiB is a size class's) */
		size_t n = (size_t)(9 + i % 13) * 4096;
		p[i] = A(malloc)(n);
		if (!p[i])
			return false;
		memset(p[i], 1, 64);
		memset(p[i] + n - 64, 1, 64);
	}
	struct heap *h = heap_of(p[0]);
	for (int i = 0; i < SPANS_APART_BLOCKS; i++)
		if (heap_of(p[i]) != h)
			return false;
	for (int i = 0; i < SPANS_APART_BLOCKS; i += 2)
		A(free)(p[i]);
	*spans = 0;
	for (int b = 0; b < HEAP_NBINS; b++)
		for (struct span *s = h->bins[b]; s; s = s->next)
			*spans += s->dirty != 0;
	return true;
}

/* A trim measures what it returns, and the decay pass's measurement what stays, with one
 * mincore per heap whose free spans lie within 4 MiB (a forked child's malloc_trim made one
 * per free span: ~23), to the page still (spans_apart's 20 free spans apart). */
Test(accounting, a_trim_and_a_measurement_read_a_heap_in_one_mincore)
{
	if (os_thp_always())
		cr_skip_test("transparent huge pages in mode always: whole spans are measured");
	enum { N = SPANS_APART_BLOCKS };
	char *p[N];
	uint32_t spans;
	cr_assert(spans_apart(p, &spans), "40 large blocks in one heap");
	cr_assert_geq(spans, 12, "%u free spans with dirty pages", spans);
	mincount_start();
	op_measure();
	int measure_calls = mincount_stop();
	check_all();
	long o0 = others_minflt();
	long r0 = rss_anon();
	mincount_start();
	size_t trim = liballoc_trim(0);
	int trim_calls = mincount_stop();
	long r1 = rss_anon();
	long others = others_minflt() - o0;
	cr_assert(said_is_left((long)trim, r0 - r1, others),
	          "trim: %zu bytes said, %ld left the RSS (other threads faulted %ld pages)", trim,
	          r0 - r1, others);
	cr_assert_geq(trim, (size_t)N / 2 * 2 * 4096, "the free blocks' two touched pages");
	cr_assert_gt(measure_calls, 0, "liballoc's mincore calls are counted here");
	cr_assert_gt(trim_calls, 0, "liballoc's mincore calls are counted here");
	/* the heap's spans in one call; the arenas' other heaps, if any, one each */
	cr_assert_leq(measure_calls, (int)arena_count + 1, "measure: %d mincore calls for %u spans",
	              measure_calls, spans);
	cr_assert_leq(trim_calls, (int)arena_count + 1, "trim: %d mincore calls for %u spans",
	              trim_calls, spans);
	check_all();
	for (int i = 1; i < N; i += 2)
		A(free)(p[i]);
}

/* Does this kernel take MADV_DONTNEED from process_madvise on the calling thread (6.14)? */
static bool purge_many_offered(void)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	p[0] = 1;
	struct iovec v = {p, 4096};
	bool ok = syscall(SYS_process_madvise, -10000 /* PIDFD_SELF_THREAD */, &v, 1, MADV_DONTNEED,
	                  0) == 4096;
	munmap(p, 4096);
	return ok;
}

/* The batch tests' conditions: whole spans advised, and process_madvise taking
 * MADV_DONTNEED on the calling thread; else the test is skipped, saying which. */
static void purge_many_or_skip(void)
{
	if (os_thp_always())
		cr_skip_test("transparent huge pages in mode always: huge ranges are advised too");
	if (!purge_many_offered())
		cr_skip_test(
		        "process_madvise(PIDFD_SELF, MADV_DONTNEED) refused here (Linux < 6.14?)");
}

/* The two tests below: spans_apart, then a trim: the madvise calls it made, the bytes it
 * said it released and those that left the RSS. The other blocks are freed after. */
struct many_spans {
	int lock; /* (in) the freed block one page of which is mlocked before the trim; -1 none */
	uint32_t spans;
	uint64_t calls;
	long said, left;
	long others; /* minor faults of the other threads (control, ASan's) in the window */
	int still;   /* the locked page resident after the trim (mincore), -1 not locked */
};

static bool trim_many_spans(struct many_spans *m)
{
	enum { N = SPANS_APART_BLOCKS };
	char *p[N];
	if (!spans_apart(p, &m->spans))
		return false;
	/* (the page a freed block starts on, which it touched; the system call: AddressSanitizer's
	 * mlock locks nothing) */
	char *locked = m->lock >= 0 ? (char *)((uintptr_t)p[m->lock] & ~(uintptr_t)4095) : NULL;
	if (locked && syscall(SYS_mlock, locked, 4096) != 0)
		return false;
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	long o0 = others_minflt();
	long r0 = rss_anon();
	m->said = (long)liballoc_trim(0);
	m->left = r0 - rss_anon();
	m->others = others_minflt() - o0;
	liballoc_stats(&c1);
	m->calls = c1.madvise_calls - c0.madvise_calls;
	m->still = -1;
	if (locked) {
		unsigned char v = 0;
		m->still = mincore(locked, 4096, &v) == 0 && (v & 1);
		syscall(SYS_munlock, locked, 4096);
	}
	for (int i = 1; i < N; i += 2)
		A(free)(p[i]);
	return true;
}

/* A trim that purges many free spans advises them back in one system call for up to 16
 * (process_madvise), not a madvise each (whose TLB flushes went page by page), and still
 * returns, and reports, to the page what left the RSS. */
Test(accounting, a_trim_purges_many_spans_in_few_calls)
{
	purge_many_or_skip();
	struct many_spans m = {.lock = -1};
	cr_assert(trim_many_spans(&m), "(set-up: 40 blocks of one heap)");
	cr_assert_geq(m.spans, 12, "%u free spans with dirty pages", m.spans);
	cr_assert(said_is_left(m.said, m.left, m.others),
	          "trim: %ld bytes said, %ld left the RSS (other threads faulted %ld pages)",
	          m.said, m.left, m.others);
	cr_assert_geq(m.said, 20 * 2 * 4096, "the free blocks' two touched pages");
	/* this heap's spans in two calls (16 a call); the arenas' other heaps, if any, one
	 * or two each; a madvise a span: one per free span */
	cr_assert_leq(m.calls, 2 + 2 * (uint64_t)arena_count, "%llu madvise calls for %u spans",
	              (unsigned long long)m.calls, m.spans);
	check_all();
}

/* A batch the kernel stops part-way (a range it refuses: mlocked pages, EINVAL): the ranges
 * before it went back in the call (process_madvise returns their bytes), the refused one
 * stays resident and counted, and those after it go back a madvise each; the trim reports
 * to the page what left the RSS. Block 10 (18 pages) is among the first batch's largest
 * spans, not its first: spans come after it in the batch. */
Test(accounting, a_batch_the_kernel_stops_part_way_counts_what_went_back)
{
	purge_many_or_skip();
	mlock_or_skip();
	struct many_spans m = {.lock = 10};
	cr_assert(trim_many_spans(&m), "(set-up: 40 blocks of one heap, a page mlocked)");
	cr_assert_geq(m.spans, 12, "%u free spans with dirty pages", m.spans);
	cr_assert_eq(m.still, 1, "the mlocked page left the RSS");
	cr_assert(said_is_left(m.said, m.left, m.others),
	          "trim: %ld bytes said, %ld left the RSS (other threads faulted %ld pages)",
	          m.said, m.left, m.others);
	cr_assert_geq(m.said, 19 * 2 * 4096, "the other free blocks' two touched pages");
	check_all();
}

/* The audit architecture a seccomp filter of this build checks (0: none known here) */
#if defined(__x86_64__)
#define SECCOMP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_ARCH AUDIT_ARCH_AARCH64
#else
#define SECCOMP_ARCH 0
#endif

/* What a forked child returns where it set no seccomp filter: this build knows no
 * architecture to filter (SECCOMP_ARCH 0) */
#define NO_FILTER 98

/* The one skip of the error-path tests below that a seccomp filter makes: set says whether
 * the filter was set (refuse_fixed_moves' answer, refuse_remaps' not NO_FILTER, a forked
 * child's status not NO_FILTER). It is not set only where SECCOMP_ARCH is 0, a build for an
 * architecture other than x86_64 and aarch64 (a filter must check the calls' architecture:
 * their numbers differ): a property of the build, not of the machine, so on those two the
 * tests never skip. A kernel without seccomp filters (CONFIG_SECCOMP_FILTER off: prctl
 * fails, EINVAL) or a sandbox whose policy refuses PR_SET_NO_NEW_PRIVS or PR_SET_SECCOMP
 * does not skip: the filter's set-up fails the test with its errno (refuse_fixed asserts,
 * refuse_remaps returns 99, a child exits 99 or 97), as a skip there would leave the error
 * paths untested without a word. The kernel these tests were last run on (6.18, its
 * /proc/config.gz with CONFIG_SECCOMP_FILTER=y) sets them. */
static void skip_unless_filtered(bool set)
{
	if (!set)
		cr_skip_test("no seccomp filter for this architecture");
}

/* (in a forked child) the same trim where a seccomp filter refuses process_madvise (EPERM,
 * as a sandbox may): NO_FILTER where this build knows no architecture to filter, 99 where
 * the kernel refused the filter, 0 when the trim still returned and reported to the page
 * what left the RSS with a madvise per span, else 1-4 */
static int refused_purge_many_child(void)
{
	const uint32_t arch = SECCOMP_ARCH;
	struct sock_filter f[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	if (!arch)
		return NO_FILTER;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		fprintf(stderr, "child: seccomp: %s\n", strerror(errno));
		return 99;
	}
	struct many_spans m = {.lock = -1};
	if (!trim_many_spans(&m))
		return 1;
	if (m.spans < 12)
		return 2;
	if (!said_is_left(m.said, m.left, m.others) || m.said < 20 * 2 * 4096) {
		fprintf(stderr,
		        "child: trim said %ld bytes, %ld left the RSS (others: %ld faults)\n",
		        m.said, m.left, m.others);
		return 3;
	}
	return m.calls >= m.spans ? 0 : 4; /* a madvise each (and the refused call) */
}

/* A kernel or sandbox that refuses process_madvise: the spans go back a madvise each, all
 * of them, and the trim reports to the page what left the RSS. */
Test(accounting, a_refused_batch_purges_each_span_alone)
{
	purge_many_or_skip();
	A(malloc_trim)(0); /* the batches work here: a refusal is not the first call's */
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(refused_purge_many_child());
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "the child ended with status %#x", st);
	skip_unless_filtered(WEXITSTATUS(st) != NO_FILTER);
	cr_assert_eq(WEXITSTATUS(st), 0,
	             "child: 1 set-up, 2 too few spans, 3 said != left the RSS, 4 fewer madvise "
	             "calls than spans, 99 the kernel refused the filter: %d",
	             WEXITSTATUS(st));
}

/* A mapping of 1 MiB served below the dynamic threshold, whose free comes after a larger
 * mapping's free raised the threshold past it: the free moves it into a heap
 * (heap_adopt, mremap MREMAP_FIXED). Returns it, written, with the counters before its
 * free in *c0 (the free is the caller's). */
static char *mapping_to_adopt(size_t n, struct la_counters *c0)
{
	set("decay_ms", 0);     /* nothing moves the gauges but the test */
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	A(free)(A(malloc)(2 * n)); /* raises the threshold past 2 MiB */
	check_all();
	liballoc_stats(c0);
	cr_assert_eq(c0->direct_mappings, 1, "the 1 MiB block is a mapping of its own");
	return p;
}

/* mremap fails with ENOMEM (as the kernel's does at the limit of mappings) when asked to
 * move to a fixed address, and with maps_too so does mmap at a fixed address (either
 * flag), in this test's process only (a seccomp filter; the other system calls and other
 * mremap and mmap calls pass). False where this build knows no architecture to filter
 * (skip_unless_filtered); asserts (a criterion test's own process) or exits 99 (a forked
 * child) when the kernel refuses the filter. */
static bool refuse_fixed(bool maps_too, bool child)
{
	const uint32_t arch = SECCOMP_ARCH;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint32_t flags_low = offsetof(struct seccomp_data, args[3]);
#else
	const uint32_t flags_low = offsetof(struct seccomp_data, args[3]) + 4;
#endif
	/* (mremap's and mmap's flags are both their fourth argument) */
	struct sock_filter f[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mremap, 0, 2),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, flags_low),
	        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MREMAP_FIXED, 3, 4),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, maps_too ? SYS_mmap : 0xffffffffu, 0, 3),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, flags_low),
	        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED | MAP_FIXED_NOREPLACE, 0, 1),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	if (!arch)
		return false;
	bool ok = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	          prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
	if (child && !ok)
		_exit(99);
	cr_assert(ok, "seccomp: %s", strerror(errno));
	if (child)
		return true;
	/* the filter answers as meant: a fixed move fails, the rest of mremap works */
	char *a = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(a, MAP_FAILED);
	cr_assert_eq(mremap(a, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, a + 4096), MAP_FAILED);
	cr_assert_eq(errno, ENOMEM);
	cr_assert_eq(mremap(a, 8192, 4096, 0), a, "a shrink in place still works");
	munmap(a, 4096);
	return true;
}

static bool refuse_fixed_moves(void)
{
	return refuse_fixed(false, false);
}

/* Two pages moved by os_move into the middle of 4 pages, the move refused (the filter
 * above, before the kernel touched anything), the middle unmapped first where
 * target_unmapped (as older kernels do before they refuse): the call returns the refusal,
 * the middle is mapped (mapped again fresh, or left as it was, bytes and all), the 4 pages
 * are writable, and the source stays where it was, contents and all. */
static void refused_move_into_the_middle(bool target_unmapped)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *src = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                 -1, 0);
	char *dst = mmap(NULL, 4 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                 -1, 0);
	cr_assert(src != MAP_FAILED && dst != MAP_FAILED);
	memset(src, 7, 2 * (size_t)pg);
	memset(dst, 9, 4 * (size_t)pg);
	skip_unless_filtered(refuse_fixed_moves());
	if (target_unmapped)
		cr_assert_eq(munmap(dst + pg, 2 * (size_t)pg), 0);
	struct la_counters c = {0};
	cr_assert_eq(os_move(src, 2 * (size_t)pg, dst + pg, &c), ENOMEM);
	cr_assert_eq(c.mmap_calls, target_unmapped ? 2 : 1, "the move%s: %llu calls",
	             target_unmapped ? ", then the range mapped again"
	                             : " only, nothing mapped over it",
	             (unsigned long long)c.mmap_calls);
	unsigned char v[2];
	cr_assert_eq(mincore(dst + pg, 2 * (size_t)pg, v), 0, "the target range is mapped");
	for (long i = 0; i < 4 * pg; i++) {
		int want = target_unmapped && i >= pg && i < 3 * pg ? 0 : 9;
		cr_assert_eq(dst[i], want, "byte %ld of the 4 pages is %d", i, dst[i]);
	}
	memset(dst, 1, 4 * (size_t)pg); /* writable, with its neighbours */
	for (long i = 0; i < 2 * pg; i++)
		cr_assert_eq(src[i], 7, "the source's byte %ld is %d", i, src[i]);
	munmap(src, 2 * (size_t)pg);
	munmap(dst, 4 * (size_t)pg);
}

/* A move the kernel refuses after it unmapped the target range (older kernels check the
 * source after that, Debian 12's 6.1 among them; the filter above refuses before, so the
 * test unmaps the range itself, as those kernels do): os_move maps the range again, fresh
 * and writable. Without that, a heap would hand out blocks in a hole. */
Test(accounting, a_refused_move_leaves_its_target_range_mapped)
{
	refused_move_into_the_middle(true);
}

/* A move refused before the kernel touched the target range (every refusal but the two that
 * come after its unmapping): the range, still mapped whole, is left as it was, its bytes
 * and all, with no mapping made over it (os_move tells it by msync, 8d5517a). */
Test(accounting, a_move_refused_before_its_target_was_touched_leaves_the_range_as_it_was)
{
	refused_move_into_the_middle(false);
}

/* The same refusal where the range cannot be mapped again either (fixed maps refused too:
 * the limit of mappings): the process stops, saying so, rather than let a heap hand out
 * blocks in a hole. */
struct refused_move {
	char *src, *dst;
	long pg;
};

/* (in a forked child) the move refused and the target range unmapped, as an older kernel
 * does; NO_FILTER where no seccomp filter can be set */
static int refused_move_child(void *arg)
{
	struct refused_move *m = arg;
	if (!refuse_fixed(true, true))
		return NO_FILTER;
	munmap(m->dst + m->pg, (size_t)m->pg); /* what an older kernel does before refusing */
	struct la_counters c = {0};
	os_move(m->src, (size_t)m->pg, m->dst + m->pg, &c);
	return 0;
}

/* src_pages pages at src, one of them moved into the second page of a 2-page dst by child
 * (os_move or os_move_out), refused where the target range cannot be mapped again: the
 * child stops (SIGABRT), saying so in a message that begins with who and gives why;
 * skipped where the child returns NO_FILTER. */
static void refused_move_stops(int (*child)(void *), long src_pages, const char *who,
                               const char *why)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *src = mmap(NULL, (size_t)(src_pages * pg), PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *dst = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                 -1, 0);
	cr_assert(src != MAP_FAILED && dst != MAP_FAILED);
	src[0] = 1;
	char out[512];
	int st = run_child_stderr(child, &(struct refused_move){src, dst, pg}, out, sizeof(out));
	cr_assert_neq(st, -1, "the child could not be run");
	skip_unless_filtered(!(WIFEXITED(st) && WEXITSTATUS(st) == NO_FILTER));
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the child ended with status %#x: %s",
	          (unsigned)st, out);
	cr_assert(strstr(out, who) && strstr(out, "could not be mapped again") && strstr(out, why),
	          "its message: %s", out);
	munmap(src, (size_t)(src_pages * pg));
	munmap(dst, 2 * (size_t)pg);
}

Test(accounting, a_refused_move_whose_target_cannot_be_mapped_again_stops_the_process)
{
	refused_move_stops(refused_move_child, 1, "liballoc: os_move: ", "a hole in the heap");
}

/* (in a forked child) the move refused and the target range unmapped, as an older kernel
 * does, and another thread's new mapping made in that moment in the range's second page */
static int refused_move_raced_child(void *arg)
{
	struct refused_move *m = arg;
	if (!refuse_fixed(false, true))
		return NO_FILTER;
	munmap(m->dst, 2 * (size_t)m->pg); /* what an older kernel does before refusing */
	char *other = mmap(m->dst + m->pg, (size_t)m->pg, PROT_READ | PROT_WRITE,
	                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (other != m->dst + m->pg)
		return 97;
	other[0] = 5;
	struct la_counters c = {0};
	os_move(m->src, 2 * (size_t)m->pg, m->dst, &c);
	return other[0] == 5 ? 0 : 96; /* (without the stop: its mapping replaced, or not) */
}

/* A refused move whose target range another thread mapped into in the moment between the
 * kernel's unmapping and the refusal (the kernel places a new mapping in any hole that
 * fits): that mapping is not replaced by the heap's pages (they would be two owners' then),
 * and the process stops, saying so. */
Test(accounting, a_refused_move_does_not_replace_a_mapping_made_in_its_hole)
{
	refused_move_stops(refused_move_raced_child, 2,
	                   "liballoc: os_move: ", "another mapping is in it");
}

/* (in a forked child) a move that keeps its source (os_move_out: realloc's page moves) in
 * a process over its address-space limit: the kernel unmaps the target range, then
 * refuses the move (ENOMEM), and the range cannot be mapped again either */
static int refused_move_out_child(void *arg)
{
	struct refused_move *m = arg;
	/* the abort's signal handling of a sanitizer build maps an alternate signal stack
	 * unless one is set: under the limit that mapping failed (ASan: "failed to allocate
	 * ... SetAlternateSignalStack", exit 1, 2 runs in 150) after liballoc's message */
	static char altstack[64 * 1024];
	if (sigaltstack(&(stack_t){.ss_sp = altstack, .ss_size = sizeof(altstack)}, NULL) != 0)
		return 96;
	/* so does ASan at the start of each thread, the control thread the fork started
	 * among them (1 run in 200 still failed so): it has started once it named itself */
	char path[300];
	if (shm_header()->control_state == LA_CONTROL_RUNNING &&
	    !control_task_status(path, sizeof(path), 3000))
		return 95;
	long vm_kib = status_kib("VmSize:");
	if (vm_kib <= 0 || setrlimit(RLIMIT_AS, &(struct rlimit){(rlim_t)vm_kib * 1024 - 4096,
	                                                         RLIM_INFINITY}) != 0)
		return 97;
	struct la_counters c = {0};
	os_move_out(m->src, (size_t)m->pg, m->dst + m->pg, &c);
	return 0; /* the hole left where the caller copies next */
}

/* A refused move that keeps its source stops the process, saying so, where the target
 * range went and cannot be mapped again: an ENOMEM is no sign that nothing changed. */
Test(accounting, a_refused_move_out_that_left_a_hole_stops_the_process)
{
	refused_move_stops(refused_move_out_child, 1,
	                   "liballoc: os_move_out: ", "a hole in the heap");
}

/* The adoption itself: the heap counts the pages it took, as a walk of it finds them, and
 * a calloc that takes them reads zeros (they held the program's data). */
Test(accounting, a_mapping_moved_into_a_heap_counts_as_its_free_resident_pages)
{
	size_t n = 1 << 20;
	struct la_counters c0, c1;
	char *p = mapping_to_adopt(n, &c0);
	A(free)(p);
	liballoc_stats(&c1);
	cr_assert_eq(c1.munmap_calls, c0.munmap_calls, "moved, not unmapped");
	cr_assert_eq(c1.direct_mappings, 0);
	cr_assert_eq(c0.direct_bytes - c1.direct_bytes, c0.direct_bytes);
	cr_assert_eq(c1.free_resident_bytes - c0.free_resident_bytes, c0.direct_bytes,
	             "its pages are a heap's free resident pages: %llu of %llu",
	             (unsigned long long)(c1.free_resident_bytes - c0.free_resident_bytes),
	             (unsigned long long)c0.direct_bytes);
	check_all();
	unsigned char *q = A(calloc)(1, n);
	cr_assert_not_null(q);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(q[i], 0, "byte %zu of a calloc'd block is %u", i, q[i]);
	check_all();
	A(free)(q);
	check_all();
}

/* After a measurement: every page of every free span counts resident as mincore finds it. */
static void check_free_pages_measured(void)
{
	static unsigned char vec[LA_HEAP_PAGES];
	for (uint32_t i = 0; i < arena_count; i++) {
		struct arena *a = &arenas[i];
		arena_lock(a);
		uint32_t wrong = 0, where = 0;
		for (struct heap *h = a->heaps; h; h = h->next) {
			resident(h, LA_HEAP_PAGES, vec);
			for (uint32_t pg = h->first_page; pg < LA_HEAP_PAGES;) {
				struct span *s = span_at(h, pg);
				for (uint32_t j = pg; s->kind == SPAN_FREE && j < pg + s->npages;
				     j++)
					if (bit(h, j) != (vec[j] & 1) && !wrong++)
						where = j;
				pg += s->npages;
			}
		}
		arena_unlock(a);
		cr_assert_eq(
		        wrong, 0,
		        "arena %u: %u free pages count resident unlike mincore (the first: %u)", i,
		        wrong, where);
	}
}

/* A mapping the program wrote in part, moved into a heap: it counts whole (as the mapping
 * did) until a measurement, which then finds what is resident, though the free span it went
 * into had been measured before (heap_measure reads only the spans not measured since). */
Test(accounting, a_measurement_finds_the_pages_of_a_moved_mapping_never_touched)
{
	enum { N = 1 << 20, TOUCHED = 16 };
	set("decay_ms", 0);
	if (os_thp_always())
		cr_skip("transparent huge pages always: free spans are read whole each time");
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	char *p = A(malloc)(N);
	cr_assert_not_null(p);
	memset(p, 1, TOUCHED * 4096);
	A(free)(A(malloc)(2 * N)); /* raises the threshold past 2 MiB */
	op_measure();
	check_all();
	struct la_counters c0, c1, c2;
	liballoc_stats(&c0);
	cr_assert_eq(c0.direct_mappings, 1, "the 1 MiB block is a mapping of its own");
	A(free)(p);
	liballoc_stats(&c1);
	cr_assert_eq(c1.direct_mappings, 0);
	cr_assert_eq(c1.munmap_calls, c0.munmap_calls, "moved, not unmapped");
	cr_assert_eq(c1.free_resident_bytes - c0.free_resident_bytes, N, "counted whole");
	op_measure();
	check_all();
	liballoc_stats(&c2);
	cr_assert_lt(c2.free_resident_bytes - c0.free_resident_bytes, N / 2,
	             "after the measurement %llu bytes of it count free resident, %d written",
	             (unsigned long long)(c2.free_resident_bytes - c0.free_resident_bytes),
	             TOUCHED * 4096);
	check_free_pages_measured();
}

/* Every page of [p, p + len) is unmapped (mincore: ENOMEM), p rounded down to its page. */
static void assert_unmapped(const char *p, size_t len, const char *what)
{
	unsigned char v;
	for (const char *pg = p - ((uintptr_t)p & 4095); pg < p + len; pg += 4096)
		cr_assert(mincore((void *)pg, 4096, &v) == -1 && errno == ENOMEM,
		          "page %p of %s is still mapped", (const void *)pg, what);
}

/* The kernel refuses the move (the fallback of heap_adopt): the mapping is unmapped as
 * before adoption existed, nothing of it stays mapped, the heap counts none of it, and the
 * heap's pages it was to go into serve the next block of its size. */
Test(accounting, a_mapping_the_kernel_refuses_to_move_into_a_heap_is_unmapped)
{
	size_t n = 1 << 20;
	struct la_counters c0, c1;
	char *p = mapping_to_adopt(n, &c0);
	skip_unless_filtered(refuse_fixed_moves());
	A(free)(p);
	liballoc_stats(&c1);
	cr_assert_geq(c1.mmap_calls - c0.mmap_calls, 1, "a move was tried");
	cr_assert_eq(c1.munmap_calls - c0.munmap_calls, 1, "then the mapping was unmapped");
	assert_unmapped(p, n, "the freed block");
	cr_assert_eq(c1.direct_mappings, 0);
	cr_assert_eq(c0.direct_bytes - c1.direct_bytes, c0.direct_bytes);
	cr_assert_eq(c0.address_space_bytes - c1.address_space_bytes, c0.direct_bytes);
	cr_assert_eq(c1.free_resident_bytes, c0.free_resident_bytes, "nothing adopted");
	cr_assert_eq(c0.data_resident_bytes - c1.data_resident_bytes, c0.direct_bytes);
	check_all();
	char *q = A(malloc)(n);
	cr_assert_not_null(q);
	memset(q, 2, n);
	for (size_t i = 0; i < n; i += 4096)
		cr_assert_eq(q[i], 2);
	liballoc_stats(&c1);
	cr_assert_eq(c1.direct_mappings, 0, "the block came from a heap");
	check_all();
	A(free)(q);
	check_all();
}

/* ---- error paths of the mappings above ADOPT_MAX_PAGES kept a while for the heaps ------ */
/* (direct.c, direct_free: a mapping above 4 MiB and below 32 MiB whose own free raised the
 * threshold past its size is kept for the heaps 25 us a page, then the control thread
 * unmaps it; the next block of about its size takes it, direct_alloc_kept, and a heap's
 * small growth takes its pages under the growth's, lend_to) */

/* (in a forked child) a check that fails: says which and what, and ends the child with
 * code, which the test reports with this message */
#define CHILD_CHECK(cond, code, ...)                  \
	do {                                          \
		if (!(cond)) {                        \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr);          \
			return code;                  \
		}                                     \
	} while (0)

/* the child's answer when more than this passed between a kept mapping's free and the
 * step that takes it (the test descheduled: its wait may have ended, 25 us a page): run
 * again */
#define KEPT_LATE     90
#define KEPT_LATE_NS  50000000u
#define KEPT_TRIES    5
#define KEPT_FILL     (256u << 10) /* a block above the first threshold: a mapping of its own */
#define KEPT_FILL_MAX 4096

/* The timed step of a kept-mapping child (its free to its check, KEPT_LATE_NS at most) runs
 * in the real-time class where the system allows it (root, no container without
 * CAP_SYS_NICE): a loaded machine then cannot preempt it past the keep (make test with two
 * CPU burners, load ~17: 5 tries, each more than 50 ms, in 1 run of 6). The control thread
 * stays in the class it was started in: that its wake-up at the keep's end comes late only
 * lengthens the keep. kept_step_end returns the thread to its class. */
static int kept_step_begin(void)
{
	int was = sched_getscheduler(0);
	struct sched_param rt = {.sched_priority = 1};
	if (was == SCHED_OTHER && sched_setscheduler(0, SCHED_FIFO, &rt) == 0)
		return SCHED_OTHER;
	return -1;
}

static void kept_step_end(int was)
{
	if (was == SCHED_OTHER)
		sched_setscheduler(0, SCHED_OTHER, &(struct sched_param){0});
}

/* child, KEPT_TRIES times while it answers KEPT_LATE (a fresh fork of this process's state
 * each time), and its other answers: 0 passes, NO_FILTER skips (skip_unless_filtered),
 * any other fails with what the child wrote */
static void kept_in_child(int (*child)(void *), void *arg)
{
	A(malloc_trim)(0);      /* no free resident pages: a freed mapping is kept for heaps */
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	char out[1024];
	int st = -1;
	for (int t = 0; t < KEPT_TRIES; t++) {
		st = run_child_stderr(child, arg, out, sizeof(out));
		cr_assert_neq(st, -1, "the child could not be run");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != KEPT_LATE)
			break;
	}
	cr_assert(WIFEXITED(st), "the child ended with status %#x: %s", (unsigned)st, out);
	skip_unless_filtered(WEXITSTATUS(st) != NO_FILTER);
	cr_assert_neq(WEXITSTATUS(st), KEPT_LATE,
	              "%d tries: more than 50 ms passed between the free and the next step "
	              "each time",
	              KEPT_TRIES);
	cr_assert_eq(WEXITSTATUS(st), 0, "child (exit %d): %s", WEXITSTATUS(st), out);
}

/* (in a forked child) the control thread the fork started runs (the keep needs it, and a
 * thread started under an address-space limit may fail) */
static bool child_control_runs(void)
{
	char path[300];
	return shm_header()->control_state == LA_CONTROL_RUNNING &&
	       control_task_status(path, sizeof(path), 3000);
}

/* Whether none of the pages of [p, p + n) outside [q, q + qn) is mapped. */
static bool unmapped_but(const char *p, size_t n, const char *q, size_t qn)
{
	unsigned char v;
	for (const char *pg = p; pg < p + n; pg += 4096)
		if (!(pg >= q && pg < q + qn) &&
		    !(mincore((void *)pg, 4096, &v) == -1 && errno == ENOMEM))
			return false;
	return true;
}

static void *kept_fill[KEPT_FILL_MAX];

/* (in a forked child) the table of direct mappings made to grow at the next registration but
 * one: mappings of their own made until the table is rehashed (then its non-empty slots
 * are its live entries, no tombstones), and on until it holds one entry fewer than the
 * 3/4 of its slots from which the next one grows it. False when the table did not behave
 * so. */
static bool table_one_below_growth(void)
{
	size_t slots;
	const void *t0 = direct_table(&slots);
	int k = 0;
	for (bool rehashed = false; !rehashed; k++) {
		if (k == KEPT_FILL_MAX)
			return false;
		kept_fill[k] = A(malloc)(KEPT_FILL);
		if (!kept_fill[k] || heap_registered(kept_fill[k]))
			return false;
		rehashed = direct_table(&slots) != t0;
	}
	while (direct_count() + 1 < slots * 3 / 4) {
		if (k == KEPT_FILL_MAX)
			return false;
		kept_fill[k] = A(malloc)(KEPT_FILL);
		if (!kept_fill[k] || heap_registered(kept_fill[k++]))
			return false;
	}
	return direct_count() + 1 == slots * 3 / 4;
}

/* (in a forked child) a 16 MiB block freed, kept, and taken by the next block of its size
 * while the table of direct mappings cannot grow to register it (its new table refused by
 * the address-space limit) */
static int kept_unregistered_child(void *arg)
{
	(void)arg;
	size_t n = 16 << 20;
	CHILD_CHECK(child_control_runs(), 95, "no control thread in the child");
	CHILD_CHECK(table_one_below_growth(), 94, "set-up: the table of direct mappings");
	char *p = A(malloc)(n); /* the last entry before the table grows */
	CHILD_CHECK(p && !heap_registered(p), 93, "set-up: %zu bytes, not a mapping", n);
	memset(p, 1, n);
	uint64_t live = direct_count();
	size_t slots;
	const void *t = direct_table(&slots);
	/* no new table (a page or more), nor any other mapping */
	struct rlimit was;
	long vm_kib = status_kib("VmSize:");
	CHILD_CHECK(vm_kib > 0 && getrlimit(RLIMIT_AS, &was) == 0 &&
	                    setrlimit(RLIMIT_AS, &(struct rlimit){(rlim_t)vm_kib * 1024 + 4096,
	                                                          was.rlim_max}) == 0,
	            97, "set-up: RLIMIT_AS: %s", strerror(errno));
	struct la_counters c0, c1;
	int cls = kept_step_begin();
	uint64_t t0 = os_now_ns();
	A(free)(p);
	liballoc_stats(&c0);
	errno = 4242;
	char *q = A(malloc)(n);
	int err = errno;
	uint64_t t1 = os_now_ns();
	kept_step_end(cls);
	liballoc_stats(&c1);
	CHILD_CHECK(setrlimit(RLIMIT_AS, &was) == 0, 97, "RLIMIT_AS: %s", strerror(errno));
	if (t1 - t0 > KEPT_LATE_NS)
		return KEPT_LATE;
	CHILD_CHECK(c0.direct_cache_bytes == n, 10, "not kept at its free: %llu bytes kept",
	            (unsigned long long)c0.direct_cache_bytes);
	CHILD_CHECK(q, 11, "the malloc failed: %s", strerror(err));
	CHILD_CHECK(err == 4242, 12, "errno %d after a malloc that succeeded", err);
	CHILD_CHECK(heap_registered(q), 13, "the block is not a heap's (%p, the kept one %p)",
	            (void *)q, (void *)p);
	CHILD_CHECK(c1.mmap_calls > c0.mmap_calls && direct_table(&slots) == t, 14,
	            "the table's growth was not tried, or it grew");
	CHILD_CHECK(direct_count() == live - 1 && c1.direct_mappings == c0.direct_mappings &&
	                    c1.direct_bytes == c0.direct_bytes &&
	                    c1.direct_cache_hits == c0.direct_cache_hits,
	            15, "registered: %llu live mappings, %llu counted (%llu before), hits %llu",
	            (unsigned long long)direct_count(), (unsigned long long)c1.direct_mappings,
	            (unsigned long long)c0.direct_mappings,
	            (unsigned long long)(c1.direct_cache_hits - c0.direct_cache_hits));
	CHILD_CHECK(c1.direct_cache_bytes == 0, 16, "still kept: %llu bytes",
	            (unsigned long long)c1.direct_cache_bytes);
	CHILD_CHECK(unmapped_but(p, n, q, n), 17, "the kept mapping's pages are still mapped");
	CHILD_CHECK(c0.address_space_bytes - c1.address_space_bytes == n, 18,
	            "address space %llu -> %llu: the kept %zu bytes not uncounted",
	            (unsigned long long)c0.address_space_bytes,
	            (unsigned long long)c1.address_space_bytes, n);
	memset(q, 2, n);
	A(free)(q);
	char *r = A(malloc)(n); /* (the limit lifted) */
	CHILD_CHECK(r, 19, "the next malloc failed");
	memset(r, 3, n);
	A(free)(r);
	return 0;
}

/* The next block of a kept mapping's size takes it, but the table of direct mappings must
 * grow to register it and cannot (its new table refused: the address-space limit): the
 * mapping is unmapped, uncounted, and the block comes from a heap, with errno as it was
 * (direct_alloc_kept_slow, hit_register's refusal). */
Test(accounting, a_kept_mapping_the_table_cannot_register_is_unmapped_and_a_heap_serves)
{
	kept_in_child(kept_unregistered_child, NULL);
}

/* (in a forked child) a 20 MiB block freed and kept, then 2 MiB of small blocks, whose
 * heap's growths would take the kept pages in place of their faults (lend_to), each move
 * refused (a seccomp filter: mremap to a fixed address fails, as at the limit of mappings) */
static int kept_refused_move_child(void *arg)
{
	(void)arg;
	size_t n = 20 << 20;
	enum { N = 8192, SIZE = 256 }; /* 2 MiB: growths of less than a chunk each */
	static char *blocks[N];
	CHILD_CHECK(child_control_runs(), 95, "no control thread in the child");
	if (!refuse_fixed(false, true))
		return NO_FILTER;
	char *p = A(malloc)(n);
	CHILD_CHECK(p && !heap_registered(p), 93, "set-up: %zu bytes, not a mapping", n);
	memset(p, 1, n);
	struct la_counters c0, c1;
	int cls = kept_step_begin();
	uint64_t t0 = os_now_ns();
	A(free)(p);
	liballoc_stats(&c0);
	errno = 4242;
	for (int i = 0; i < N; i++) {
		blocks[i] = A(malloc)(SIZE);
		CHILD_CHECK(blocks[i], 11, "malloc %d failed: %s", i, strerror(errno));
		memset(blocks[i], 2, SIZE);
	}
	int err = errno;
	uint64_t t1 = os_now_ns();
	kept_step_end(cls);
	liballoc_stats(&c1);
	if (t1 - t0 > KEPT_LATE_NS)
		return KEPT_LATE;
	CHILD_CHECK(c0.direct_cache_bytes == n, 10, "not kept at its free: %llu bytes kept",
	            (unsigned long long)c0.direct_cache_bytes);
	CHILD_CHECK(err == 4242, 12, "errno %d after mallocs that succeeded", err);
	CHILD_CHECK(c1.mmap_calls > c0.mmap_calls, 14, "no move was tried");
	CHILD_CHECK(c1.direct_cache_bytes == n && c1.address_space_bytes == c0.address_space_bytes,
	            15, "kept %llu bytes of %zu, address space %llu -> %llu",
	            (unsigned long long)c1.direct_cache_bytes, n,
	            (unsigned long long)c0.address_space_bytes,
	            (unsigned long long)c1.address_space_bytes);
	for (size_t o = 0; o < n; o += 4096)
		CHILD_CHECK(p[o] == 1 && p[o + 4095] == 1, 16, "the kept page at %zu changed", o);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < SIZE; j++)
			CHILD_CHECK(blocks[i][j] == 2, 17, "block %d's byte %d is %d", i, j,
			            blocks[i][j]);
	/* it goes at the end of its wait (the control thread), whole */
	uint64_t deadline = os_now_ns() + 60000000000u;
	struct la_counters c2;
	for (liballoc_stats(&c2); c2.direct_cache_bytes && os_now_ns() < deadline;
	     liballoc_stats(&c2))
		usleep(1000);
	CHILD_CHECK(c2.direct_cache_bytes == 0, 18, "still kept after 60 s: %llu bytes",
	            (unsigned long long)c2.direct_cache_bytes);
	CHILD_CHECK(unmapped_but(p, n, NULL, 0), 19, "the kept mapping's pages are still mapped");
	CHILD_CHECK(c1.address_space_bytes - c2.address_space_bytes == n, 20,
	            "address space %llu -> %llu after its unmapping",
	            (unsigned long long)c1.address_space_bytes,
	            (unsigned long long)c2.address_space_bytes);
	for (int i = 0; i < N; i++)
		A(free)(blocks[i]);
	return 0;
}

/* A heap's small growths meet a kept mapping's pages, and the kernel refuses each move of
 * them under the growth (lend_to's kept-a-while branch): the heap faults its pages in as
 * without the keep, the blocks hold what the program wrote, the kept mapping stays kept
 * whole, counted as it was, with its bytes, until the control thread unmaps it at the end
 * of its wait, and errno is as it was. */
Test(accounting, a_kept_mapping_whose_moves_under_a_heaps_growth_are_refused_stays_whole)
{
	kept_in_child(kept_refused_move_child, NULL);
}

/* The process block's figures of direct mappings (direct.c writes them alone), against
 * the kernel: what is allocated is the live mappings' bytes; the cache holds the pages of
 * ranges r[0..2) (where the kept mappings were) that are still mapped and in no live
 * mapping, and after a measurement counts free resident those mincore finds resident. */
static void check_direct(unsigned char **live, int n, unsigned char **r, const size_t *rlen)
{
	struct la_counters *c = &shm_process_block()->c;
	uint64_t bytes = 0, mapped = 0, res = 0;
	for (int i = 0; i < n; i++)
		if (!heap_registered(live[i]))
			bytes += A(malloc_usable_size)(live[i]);
	for (int k = 0; k < 2; k++)
		for (size_t o = 0; o < rlen[k]; o += 4096) {
			unsigned char *pg = r[k] + o, v;
			bool in_live = false;
			for (int i = 0; i < n; i++)
				in_live |= !heap_registered(live[i]) && pg >= live[i] &&
				           pg < live[i] + A(malloc_usable_size)(live[i]);
			if (in_live || mincore(pg, 4096, &v) != 0)
				continue;
			mapped += 4096;
			res += (v & 1) * 4096u;
		}
	cr_assert_eq(c->direct_bytes, bytes, "direct_bytes %llu, the live mappings %llu",
	             (unsigned long long)c->direct_bytes, (unsigned long long)bytes);
	cr_assert_eq(c->allocated_bytes, bytes);
	cr_assert_eq(c->direct_cache_bytes, mapped, "cached %llu, mapped and not live %llu",
	             (unsigned long long)c->direct_cache_bytes, (unsigned long long)mapped);
	cr_assert_eq(c->free_resident_bytes, res, "cached free resident %llu, mincore %llu",
	             (unsigned long long)c->free_resident_bytes, (unsigned long long)res);
	cr_assert_eq(c->data_resident_bytes, bytes + res);
}

/* A buffer realloc grew, freed below a risen threshold, is kept where it is (not moved into
 * a heap); the next growing buffer takes its start in place and grows into the rest; a
 * heap's growth takes what is left. At each step the figures are what the kernel has. */
Test(accounting, a_grown_buffer_kept_in_place_counts_what_the_kernel_holds)
{
	set("decay_ms", 0);
	unsigned char *b[3];
	grown_past_threshold(b);
	op_measure();
	check_all();
	unsigned char *r[2] = {b[1], b[2]};
	size_t klen[2];
	for (int i = 0; i < 2; i++) {
		klen[i] = A(malloc_usable_size)(r[i]);
		A(free)(r[i]);
	}
	struct la_counters *pb = &shm_process_block()->c;
	cr_assert_eq(pb->direct_cache_bytes, klen[0] + klen[1], "(set-up) kept: %llu bytes cached",
	             (unsigned long long)pb->direct_cache_bytes);
	op_measure();
	check_all();
	check_direct(NULL, 0, r, klen);
	/* a small block realloc moves to a size whose quarter more is just over half a kept
	 * one's length takes its start in place, then grows into the rest in place */
	unsigned char *c[1] = {A(malloc)(64)};
	cr_assert_not_null(c[0]);
	size_t n = la_align_up(LA_MAX(klen[0], klen[1]) * 2 / 5 + 4096, 4096);
	c[0] = A(realloc)(c[0], n);
	cr_assert(c[0] == r[0] || c[0] == r[1], "(set-up) moved to a kept one in place");
	op_measure();
	check_all();
	check_direct(c, 1, r, klen);
	grow_in_turns(c, 1, n, n + (n / 2 & ~(size_t)4095));
	op_measure();
	check_all();
	check_direct(c, 1, r, klen);
	/* small blocks: the heap grows past what it holds and takes what is left */
	struct la_counters all;
	liballoc_stats(&all);
	size_t want = (size_t)all.free_resident_bytes + (1 << 20);
	void **x = A(malloc)(want / 1024 * sizeof(void *));
	cr_assert_not_null(x);
	for (size_t i = 0; i < want / 1024; i++) {
		x[i] = A(malloc)(1024);
		cr_assert_not_null(x[i]);
		memset(x[i], 9, 1024);
	}
	op_measure();
	check_all();
	cr_assert_eq(pb->direct_cache_bytes, 0);
	check_direct(c, 1, r, klen);
	for (size_t i = 0; i < want / 1024; i++)
		A(free)(x[i]);
	A(free)(x);
	A(free)(c[0]);
	op_measure();
	check_all();
	check_direct(NULL, 0, r, klen);
	A(malloc_trim)(0);
	check_all();
	check_direct(NULL, 0, r, klen);
	cr_assert_eq(pb->direct_cache_bytes, 0);
}

/* The set-up of the refused moves below: the thread's arena and its heap, then a mapping
 * of n bytes of its own, written with 1s and freed, kept for the heaps (its own free raised
 * the threshold); the counters then into *c0. Returns where the mapping lies. */
static char *kept_for_the_heaps(size_t n, struct la_counters *c0)
{
	set("decay_ms", 0); /* nothing moves the gauges but the test */
	A(malloc_trim)(0);
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	char *p = A(malloc)(n);
	cr_assert(p && !heap_registered(p), "(set-up) a mapping of its own");
	memset(p, 1, n);
	A(free)(p);
	liballoc_stats(c0);
	cr_assert_eq(c0->direct_cache_bytes, n, "(set-up) kept for the heaps: %llu bytes",
	             (unsigned long long)c0->direct_cache_bytes);
	return p;
}

/* A malloc of n that succeeds and leaves errno as it was (a value no call sets, put there
 * before it), the counters after it in *c. */
static char *malloc_keeps_errno(size_t n, struct la_counters *c)
{
	errno = 4242;
	char *q = A(malloc)(n);
	int err = errno;
	liballoc_stats(c);
	cr_assert_not_null(q);
	cr_assert_eq(err, 4242, "errno %d after a malloc that succeeded", err);
	return q;
}

/* A mapping of at most 4 MiB kept for the heaps (its own free raised the threshold), then a
 * block of its size from a heap: the heap's growth ends the keep, and the kept pages would
 * move under the block's (lend_to); the kernel refuses the move (refuse_fixed): the mapping
 * is unmapped whole, uncounted, none of its pages left mapped, the block is the heap's on
 * pages it faulted in, and errno is as it was. */
Test(accounting, a_kept_mapping_whose_move_under_a_block_of_its_size_is_refused_is_unmapped)
{
	size_t n = 4 << 20;
	struct la_counters c0, c1;
	char *p = kept_for_the_heaps(n, &c0);
	skip_unless_filtered(refuse_fixed_moves());
	char *q = malloc_keeps_errno(n, &c1);
	cr_assert(heap_registered(q), "a block of its size comes from a heap now");
	cr_assert_geq(c1.mmap_calls - c0.mmap_calls, 1, "a move was tried");
	cr_assert_eq(c1.direct_cache_bytes, 0, "still kept: %llu bytes",
	             (unsigned long long)c1.direct_cache_bytes);
	cr_assert_eq(c1.munmap_calls - c0.munmap_calls, 1, "unmapped whole, in one call");
	cr_assert_eq(c0.address_space_bytes - c1.address_space_bytes, n);
	assert_unmapped(p, n, "the kept mapping");
	check_all();
	memset(q, 2, n);
	for (size_t i = 0; i < n; i += 4096)
		cr_assert_eq(q[i], 2);
	check_all();
	A(free)(q);
	check_all();
}

/* A mapping of 1 MiB kept for the heaps (its own free raised the threshold), then a small
 * block whose heap grows into memory it never used: a chunk of the kept mapping would move
 * into the heap's free pages (lend_to, heap_adopt); the kernel refuses the move
 * (refuse_fixed): that chunk is unmapped, uncounted, the rest stays kept as it was, bytes
 * and all, and errno is as it was. */
Test(accounting, a_kept_chunk_whose_move_into_a_heap_is_refused_is_unmapped_the_rest_kept)
{
	size_t n = 1 << 20;
	struct la_counters c0, c1;
	char *p = kept_for_the_heaps(n, &c0);
	skip_unless_filtered(refuse_fixed_moves());
	char *q = malloc_keeps_errno(4096, &c1); /* the heap grows a few pages */
	cr_assert_geq(c1.mmap_calls - c0.mmap_calls, 1, "a move was tried");
	cr_assert_eq(c1.munmap_calls - c0.munmap_calls, 1, "the chunk was unmapped");
	size_t cut = n - c1.direct_cache_bytes;
	cr_assert(cut > 0 && cut < n, "kept %llu bytes of %zu: a chunk went",
	          (unsigned long long)c1.direct_cache_bytes, n);
	cr_assert_eq(c0.address_space_bytes - c1.address_space_bytes, cut);
	assert_unmapped(p, cut, "the chunk");
	for (char *pg = p + cut; pg < p + n; pg += 4096)
		cr_assert(pg[0] == 1 && pg[4095] == 1, "kept page %p changed", (void *)pg);
	memset(q, 2, 4096);
	check_all();
	A(free)(q);
	A(malloc_trim)(0); /* the rest goes */
	liballoc_stats(&c1);
	cr_assert_eq(c1.direct_cache_bytes, 0);
	cr_assert_eq(c0.address_space_bytes - c1.address_space_bytes, n);
	check_all();
}

/* A sum of n bytes at p (what a kept buffer held). */
static uint64_t bytes_sum(const unsigned char *p, size_t n)
{
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s = s * 31 + p[i];
	return s;
}

/* Buffers realloc grew, kept in place at their free below a risen threshold; a heap's
 * growth would take their pages under its own (lend_grown), and the kernel refuses each
 * move (refuse_fixed): the small blocks hold what was written on pages the heap faulted
 * in, the kept buffers stay kept as they were, bytes and all, counted as the kernel holds
 * them, errno is as it was, and a trim unmaps them. */
Test(accounting, grown_buffers_kept_whose_moves_under_a_heaps_growth_are_refused_stay_as_they_were)
{
	set("decay_ms", 0);
	unsigned char *b[3];
	grown_past_threshold(b);
	unsigned char *r[2] = {b[1], b[2]};
	size_t klen[2];
	uint64_t sum[2];
	for (int i = 0; i < 2; i++) {
		klen[i] = A(malloc_usable_size)(r[i]);
		sum[i] = bytes_sum(r[i], klen[i]);
		A(free)(r[i]);
	}
	struct la_counters *pb = &shm_process_block()->c;
	cr_assert_eq(pb->direct_cache_bytes, klen[0] + klen[1], "(set-up) kept: %llu bytes cached",
	             (unsigned long long)pb->direct_cache_bytes);
	skip_unless_filtered(refuse_fixed_moves());
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	/* small blocks: the heap grows past what it holds, into memory it never used */
	size_t want = (size_t)c0.free_resident_bytes + (1 << 20);
	void **x = A(malloc)(want / 1024 * sizeof(void *));
	cr_assert_not_null(x);
	errno = 4242;
	for (size_t i = 0; i < want / 1024; i++) {
		x[i] = A(malloc)(1024);
		cr_assert_not_null(x[i]);
		memset(x[i], 9, 1024);
	}
	int err = errno;
	liballoc_stats(&c1);
	cr_assert_eq(err, 4242, "errno %d after mallocs that succeeded", err);
	cr_assert_gt(c1.mmap_calls, c0.mmap_calls, "no move was tried");
	cr_assert_eq(c1.direct_cache_bytes, klen[0] + klen[1], "kept %llu bytes, %zu before",
	             (unsigned long long)c1.direct_cache_bytes, klen[0] + klen[1]);
	cr_assert_eq(c1.address_space_bytes, c0.address_space_bytes);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(bytes_sum(r[i], klen[i]), sum[i], "kept buffer %d changed", i);
	for (size_t i = 0; i < want / 1024; i++)
		for (int j = 0; j < 1024; j++)
			cr_assert_eq(((unsigned char *)x[i])[j], 9);
	op_measure();
	check_all();
	check_direct(NULL, 0, r, klen);
	for (size_t i = 0; i < want / 1024; i++)
		A(free)(x[i]);
	A(free)(x);
	A(malloc_trim)(0);
	check_all();
	check_direct(NULL, 0, r, klen);
	cr_assert_eq(pb->direct_cache_bytes, 0);
}

/* ---- a mapping kept for the heaps taken by a new mapping, its remap refused ------------- */
/* (direct.c, direct_get: a request at or above the threshold that no cached mapping nor
 * heap run serves takes the largest mapping kept for the heaps, grown by mremap to its
 * size; where the kernel refuses that, the kept mapping is unmapped and a new one made) */

/* Every mremap fails with ENOMEM (as the kernel's does at the limit of mappings or of the
 * address space), and with maps_too every mmap, in this process only (a seccomp filter).
 * 0 when it is set, NO_FILTER where this build knows no architecture to filter,
 * 99 when the kernel refused the filter (errno says why). */
static int refuse_remaps(bool maps_too)
{
	const uint32_t arch = SECCOMP_ARCH;
	struct sock_filter f[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mremap, 2, 0),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, maps_too ? SYS_mmap : 0xffffffffu, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	if (!arch)
		return NO_FILTER;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return 99;
	return 0;
}

/* A mapping of 1 MiB kept for the heaps (its own free raised the threshold past it), then a
 * block of 2 MiB, above the threshold: no cached mapping nor heap run serves it, so the kept
 * one is taken and grown to its size (os_remap); the kernel refuses every mremap: the kept
 * mapping is unmapped (none of its pages mapped but where the new block lies), uncounted,
 * and the block is a new mapping of its own, counted live once, with errno as it was; its
 * free and a trim leave the address space as before the kept mapping. */
Test(accounting, a_kept_mapping_a_larger_block_cannot_grow_is_unmapped_and_a_new_one_made)
{
	size_t n = 1 << 20, m = 2 << 20;
	struct la_counters c0, c1;
	char *p = kept_for_the_heaps(n, &c0);
	int filter = refuse_remaps(false);
	skip_unless_filtered(filter != NO_FILTER);
	cr_assert_eq(filter, 0, "seccomp: %s", strerror(errno));
	char *q = malloc_keeps_errno(m, &c1);
	cr_assert(!heap_registered(q), "a block of 2 MiB is a mapping of its own");
	cr_assert_eq(A(malloc_usable_size)(q), m);
	cr_assert_geq(c1.mmap_calls - c0.mmap_calls, 2, "the refused remap, then a new mapping");
	cr_assert_eq(c1.direct_cache_bytes, 0, "still kept: %llu bytes",
	             (unsigned long long)c1.direct_cache_bytes);
	cr_assert_eq(c1.direct_mappings - c0.direct_mappings, 1);
	cr_assert_eq(c1.direct_bytes - c0.direct_bytes, m);
	cr_assert_eq(c1.allocated_bytes - c0.allocated_bytes, m);
	cr_assert_eq(c1.direct_cache_hits, c0.direct_cache_hits, "counted as a hit");
	cr_assert_eq(c0.free_resident_bytes - c1.free_resident_bytes, n,
	             "the kept mapping's free resident bytes not uncounted");
	cr_assert_eq(c1.data_resident_bytes - c0.data_resident_bytes, m - n);
	cr_assert_eq(c1.address_space_bytes - c0.address_space_bytes, m - n,
	             "address space %llu -> %llu: the kept %zu bytes out, %zu in",
	             (unsigned long long)c0.address_space_bytes,
	             (unsigned long long)c1.address_space_bytes, n, m);
	cr_assert(unmapped_but(p, n, q, m), "the kept mapping's pages are still mapped");
	check_all();
	memset(q, 2, m);
	for (size_t i = 0; i < m; i += 4096)
		cr_assert_eq(q[i], 2);
	A(free)(q);
	A(malloc_trim)(0);
	liballoc_stats(&c1);
	cr_assert_eq(c1.direct_cache_bytes, 0);
	cr_assert_eq(c1.direct_mappings, c0.direct_mappings);
	cr_assert_eq(c0.address_space_bytes - c1.address_space_bytes, n);
	check_all();
}

/* (in a forked child) the same with every mmap refused too: no new mapping either */
static int kept_remap_refused_child(void *arg)
{
	(void)arg;
	size_t n = 1 << 20, m = 2 << 20;
	char *p = A(malloc)(n);
	CHILD_CHECK(p && !heap_registered(p), 93, "set-up: %zu bytes, not a mapping", n);
	memset(p, 1, n);
	A(free)(p);
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	CHILD_CHECK(c0.direct_cache_bytes == n, 10, "not kept at its free: %llu bytes kept",
	            (unsigned long long)c0.direct_cache_bytes);
	int filter = refuse_remaps(true);
	if (filter == NO_FILTER)
		return NO_FILTER;
	CHILD_CHECK(filter == 0, 97, "seccomp: %s", strerror(errno));
	errno = 4242;
	char *q = A(malloc)(m);
	int err = errno;
	liballoc_stats(&c1);
	CHILD_CHECK(!q && err == ENOMEM, 11, "the malloc returned %p, errno %d", (void *)q, err);
	CHILD_CHECK(c1.mmap_calls - c0.mmap_calls >= 2, 12,
	            "%llu calls: not the remap and a new mapping tried",
	            (unsigned long long)(c1.mmap_calls - c0.mmap_calls));
	CHILD_CHECK(c1.direct_cache_bytes == 0, 13, "still kept: %llu bytes",
	            (unsigned long long)c1.direct_cache_bytes);
	CHILD_CHECK(unmapped_but(p, n, NULL, 0), 14, "the kept mapping's pages are still mapped");
	CHILD_CHECK(c0.address_space_bytes - c1.address_space_bytes == n, 15,
	            "address space %llu -> %llu: the kept %zu bytes not uncounted",
	            (unsigned long long)c0.address_space_bytes,
	            (unsigned long long)c1.address_space_bytes, n);
	CHILD_CHECK(c1.direct_mappings == c0.direct_mappings &&
	                    c1.direct_bytes == c0.direct_bytes &&
	                    c1.allocated_bytes == c0.allocated_bytes &&
	                    c1.direct_cache_hits == c0.direct_cache_hits,
	            16, "counted live: %llu mappings (%llu before), %llu bytes (%llu)",
	            (unsigned long long)c1.direct_mappings, (unsigned long long)c0.direct_mappings,
	            (unsigned long long)c1.direct_bytes, (unsigned long long)c0.direct_bytes);
	CHILD_CHECK(c0.free_resident_bytes - c1.free_resident_bytes == n &&
	                    c0.data_resident_bytes - c1.data_resident_bytes == n,
	            17, "resident: free %llu -> %llu, data %llu -> %llu",
	            (unsigned long long)c0.free_resident_bytes,
	            (unsigned long long)c1.free_resident_bytes,
	            (unsigned long long)c0.data_resident_bytes,
	            (unsigned long long)c1.data_resident_bytes);
	return 0;
}

/* The same where no new mapping can be made either (every mmap refused too): the malloc
 * fails with ENOMEM, and the kept mapping is unmapped and uncounted all the same, nothing
 * of it counted live, cached or resident. */
Test(accounting, a_kept_mapping_a_larger_block_cannot_grow_nor_replace_fails_cleanly)
{
	set("decay_ms", 0);
	kept_in_child(kept_remap_refused_child, NULL);
}
