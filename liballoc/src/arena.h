/* arena.h — arenas: a lock, a list of heaps, per-class lists of small spans with free
 * blocks, and a wait-free queue of frees made by threads that do not use the arena.
 * Threads attach to one arena (at most arena_max exist; one with no threads is reused
 * first). Everything is guarded by `lock` except: `threads` (atomic), the remote queue
 * (any thread enqueues wait-free; dequeuing happens only under `lock`), and the published
 * counters (individually atomic). */
#ifndef LA_ARENA_H
#define LA_ARENA_H

#include <string.h>
#include <urcu/wfcqueue.h>

#include "common.h"
#include "heap.h"
#include "lock.h"
#include "sizeclass.h"

/* The transfer cache: freed small blocks a thread cache flushed, kept for the next refill
 * of their class (by the same thread or another of the arena), so that a block that
 * leaves a cache and comes back costs a copy of its pointer instead of a trip through its
 * span's free list. An array of pointers per class in pages of the arena's own heaps, laid
 * out in chunks that hold the next XF_CHUNK slots of every class (so a class that keeps
 * few blocks touches a slice of a page, not a page of its own); a class keeps at most
 * XF_SLOTS blocks and
 * XF_CLASS_BYTES, the arena XF_ARENA_BYTES. A class's blocks go back to their spans when
 * a flush of the class does not fit (a teardown: kept, they would pin the spans it
 * empties) and the arena has fewer than XF_SPARE_PAGES free pages that may be resident;
 * when it went past the slots the class may fill, the class's later flushes go to the
 * spans directly until its next refill (xfer_past).
 * Emptied into the spans when the arena would map a new heap (its blocks may free whole
 * spans for reuse), by trims, idle-heap releases and the decay pass, and when a thread
 * leaves the arena (whether others remain or not). */
#define XF_SLOTS       512u
#define XF_CHUNK       64u
#define XF_CLASS_BYTES (256u << 10)
#define XF_ARENA_BYTES (1u << 20)
#define XF_SPARE_PAGES 1024u /* 4 MiB */
/* A class fills the first chunk of slots; the next ones are earned. A flush that would
 * write past the chunks earned goes to the spans (and marks its class); a refill of a
 * marked class that finds the transfer cache short of blocks is a depth miss (the deeper
 * cache would have served it), and every XF_EARN misses earn one more chunk. A program
 * that frees structures it never rebuilds (a teardown before exit) flushes without such
 * refills, so its flushes write no slot pages beyond the first chunk's: each chunk is
 * 6.6 pages of slots (53 classes x 64 pointers), the eight of them 212 KiB. */
#define XF_EARN        2u
/* Whether the transfer cache keeps blocks of class cls: not those above SC_QUARTERS_FROM
 * (17-32 KiB, spans of 4 blocks), whose thread-cache bins hold three times as many bytes
 * as the other classes above 4 KiB instead (tcache.c, bin_max_bytes): 256 KiB of such
 * blocks kept here pinned their spans past a sweep's batch and the next batch of another
 * size took pages beyond them (`sizes sweep 10`'s peak 9.8 -> 10.6 MB with the larger bins
 * and the transfer cache, 9.5 without it). */
LA_INLINE bool xfer_class(unsigned cls)
{
	return sc_size[cls] <= SC_QUARTERS_FROM;
}
struct xfer_slots {
	void *chunk[XF_SLOTS / XF_CHUNK][LA_NCLASSES][XF_CHUNK];
};
_Static_assert(sizeof(struct xfer_slots) <= 64 * LA_PAGE, "xfer_pages: a bit a page");
/* The pages (bit i: page i of the slots) that the first `chunks` chunks reach. */
LA_INLINE uint64_t xfer_chunk_pages(uint32_t chunks)
{
	uint64_t n = la_align_up((uint64_t)chunks * sizeof(((struct xfer_slots *)0)->chunk[0]),
	                         LA_PAGE) >>
	             LA_PAGE_SHIFT;
	return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}
/* Metadata bytes of a transfer cache whose pages `pages` (xfer_pages) are counted. */
LA_INLINE uint64_t xfer_meta_bytes(uint64_t pages)
{
	return (uint64_t)la_popcount64(pages) << LA_PAGE_SHIFT;
}

struct arena {
	struct la_lock lock;
	uint32_t index;
	uint32_t threads;                  /* attached threads (atomic) */
	uint32_t work;                     /* lock (others read it, atomic): refills, flushes
	                                    * and large blocks of its threads */
	uint32_t others_seen;              /* atomic: the other arenas' work when it last
	                                    * looked (other_arenas_active, arena_attach) */
	uint32_t nheaps;                   /* lock */
	struct heap *heaps;                /* lock; most recently grown first */
	struct span *partial[LA_NCLASSES]; /* lock; SMALL spans with free blocks */
	uint32_t npartial[LA_NCLASSES];    /* lock; spans on each partial list */
	uint32_t nspans[LA_NCLASSES];      /* lock; small spans of each class */
	uint32_t nempty[LA_NCLASSES];      /* lock; of those, empty ones kept (spare) */
	struct span *parked;               /* lock; the last large block freed, kept whole */
	uint32_t parked_resident;          /* lock; its pages counted resident */
	uint32_t large_frees;              /* lock; frees of blocks up to LARGE_GRID_MAX_PAGES
	                                    * (counted up to LARGE_SAMPLE_EVERY) */
	uint32_t large_dense;              /* lock (stored atomic: large_ghost_hit reads it
	                                    * without); probes read written whole */
	uint32_t dirty_pages;              /* lock (a thread cache reads it, atomic): free
	                                    * pages that may be resident, all its heaps' */
	uint32_t used_pages;               /* lock (a thread cache reads it, atomic): pages
	                                    * in small and large spans, all its heaps' */
	uint32_t large_heap_wait;          /* lock; requests for blocks of up to
	                                    * LARGE_HEAP_MAX_PAGES pages its other heaps
	                                    * served, up to LARGE_HEAP_AFTER */
	uint32_t large_allocs;             /* lock; allocations of such blocks (large_probe) */
	uint16_t probe_pages;              /* lock; the probe's pages */
	uint16_t probe_backoff;            /* lock; k: probes every LARGE_SAMPLE_EVERY << k
	                                    * such allocations (large_dense_note) */
	char *probe;                       /* lock; a block large_probe reads next, or NULL */
	struct xfer_slots *xfer;           /* lock; the transfer cache's slots, NULL until
	                                    * the first flush */
	uint64_t xfer_bytes;               /* lock; bytes it holds (counted cached) */
	uint32_t xfer_chunks;              /* lock; its chunks ever written */
	uint32_t joining;                  /* atomic: its threads that wait in pthread_join
	                                    * (arena_join_wait; idle_lender) */
	uint64_t xfer_pages;               /* lock; its pages counted as metadata (bit i: page
	                                    * i): those the chunks written reach, and those
	                                    * that may have been resident when it was set up */
	uint64_t xfer_over;                /* lock; classes (bit c) that had a flush sent to
	                                    * their spans for want of depth (xfer_put) */
	uint64_t batch_kept;               /* lock; classes (bit c) with empty spans kept
	                                    * for their next batch (arena.c, KEEP_BATCH_FROM)
	                                    * until the next alloc_pages */
	uint64_t xfer_past;                /* lock (written atomic: arena_teardown_hint);
	                                    * classes (bit c) a flush of which went past the
	                                    * slots or bytes they may fill (not the arena's
	                                    * bound, which other classes fill), with no
	                                    * refill of theirs since (a teardown under way):
	                                    * their flushes go to the spans directly
	                                    * (arena_free_blocks), whole bins at a time
	                                    * (tcache.c, bin_put), linked while the
	                                    * frees that flushed them left them in the CPU's
	                                    * cache; copied into slots instead, they were
	                                    * linked after the next flush that did not fit,
	                                    * up to 512 flushes of the class later, cold
	                                    * (growth 1000000 100000: 1.63M -> 0.79M L1 write
	                                    * misses, callgrind --cache-sim=yes) */
	uint8_t xfer_earned;               /* lock; chunks a class may fill beyond the first */
	uint8_t xfer_misses;               /* lock; depth misses towards the next chunk */
	uint8_t large_released;            /* lock; a free unmapped an emptied heap of large
	                                    * blocks without a decay pass (give_back_heap) */
	uint8_t large_remapped;            /* lock; one was mapped again after that: such
	                                    * heaps stay mapped at frees (give_back_heap) */
	uint16_t xfer_n[LA_NCLASSES];      /* lock; blocks it holds of each class */
	struct burst_watch burst;          /* lock; the pages in use and their bursts */
	uint32_t grown;                    /* lock; pages of new spans carved since the last
	                                    * growth_yield (arena.c) */
	uint32_t early_yields;             /* lock; growth_yield calls before its ring was set
	                                    * up (GROWTH_EARLY_YIELDS at most) */
	uint64_t empty_due_ns;             /* lock; its heaps' waiting nearly-empty purges
	                                    * (heap.purge_due) are due then (0: none) */
	/* remote frees: enqueued by anyone, drained under `lock` */
	struct __cds_wfcq_head rq_head __attribute__((aligned(64)));
	struct cds_wfcq_tail rq_tail __attribute__((aligned(64)));
	/* The remote ring: batches of remote frees as pointers (arena_free_remote_array), so
	 * that the drain reads them in order and fetches many blocks at once instead of
	 * chasing one link per block (a miss each: the blocks were written on another core).
	 * Set up by the first thread that needs it (atomic, then fixed); a freeing thread
	 * reserves slots [rr_head, rr_head + n) by one compare-and-swap (one try: on failure,
	 * or with too little room, its batch goes to the queue above, so a free stays
	 * wait-free) and then fills them; the drain takes filled slots in order from rr_tail
	 * (a slot still empty, its writer between the two steps, ends the drain there). */
	void **rr;           /* RR_SLOTS slots; NULL: empty */
	uint64_t rr_head;    /* slots reserved (atomic) */
	uint32_t rq_pending; /* set (atomic, release) by a thread once it handed frees over
	                      * (queue or ring), cleared by the drain: the owner's refills test
	                      * this one word instead of the queue and the ring */
	uint64_t rr_tail __attribute__((aligned(64))); /* slots drained (lock; atomic) */
	uint64_t rr_seen; /* lock; rr_head at the last decay pass (ring_return) */
	uint64_t rr_bare; /* lock; rr_head when the ring's pages were last returned */
	/* set when the arena is made, read after: on the drain's line */
	struct la_counters *c;     /* published counters (segment); atomic fields */
	struct la_class_stats *cs; /* lock; its size classes' statistics (segment,
	                            * written whole: shm_arena_classes) */
	struct la_shm_arena *pub;
} __attribute__((aligned(64)));
/* 27 cache lines: the fields, the queue's head (written by a thread that appends to an
 * empty queue), what the freeing threads write (the queue's tail, the ring's reservations
 * and the pending word), what the drain writes (the ring's tail) with the pointers read
 * after. With arenas[0]'s page beside the control thread's stack, the direct-mapping
 * tables and the segment's first page, it fits the 2 MiB after the heap-owner table
 * (owner.ld, LA_START_BSS): one page table for all the zero-filled memory a process
 * touches at start, not two (tests/e2e/startup.bats). */
_Static_assert(sizeof(struct arena) == 27 * 64, "struct arena is 27 cache lines");
/* 128 KiB of slots, touched only as far as blocks are in flight: a drain that empties the
 * ring starts the next batch at slot 0 (ring_drain), and a decay pass that finds the ring
 * empty and unmoved since the last pass returns its pages (ring_return) */
#define RR_SLOTS 16384u
/* Held while a ring is mapped, set and counted (arena.c, ring_get), and by a fork from its
 * snapshot of the gauges to the clone (arena_lock_all). */
extern LA_HIDDEN struct la_lock arena_ring_lock;
/* The low bit of a ring slot: a block of a full bin's flush by one of the arena's own
 * threads that found the lock taken (arena_free_blocks, FLUSH_FULL), not a remote free
 * (blocks are LA_ALIGN-aligned; the drain counts these apart) */
#define RR_DEFERRED 1u
/* ... and the first block of such a flush: the drain counts the class's flush there */
#define RR_FLUSH    2u

/* A producer (a thread that never flushed a full bin of its own arena's blocks) of an arena
 * that others share and whose blocks threads of other arenas free gives up its CPU once
 * per this many pages (64 KiB) its arena's carvings reach first (arena.c, growth_yield) */
#define GROWTH_YIELD_PAGES  16u
/* ... and before any block came back through its ring (no consumer has run yet, or there
 * is none), once per GROWTH_EARLY_PAGES (256 KiB), GROWTH_EARLY_YIELDS times at most (the
 * arena's first 16 MiB of such growth) */
#define GROWTH_EARLY_PAGES  64u
#define GROWTH_EARLY_YIELDS 64u

/* Is class cls marked xfer_past (a teardown under way: its flushes go to the spans
 * directly)? A hint without the lock (thread caches' full flushes, tcache.c bin_put). */
LA_INLINE bool arena_teardown_hint(const struct arena *a, unsigned cls)
{
	return __atomic_load_n(&a->xfer_past, __ATOMIC_RELAXED) >> cls & 1;
}

/* A refill's *from with this bit set (the arena's address otherwise): the refill was the
 * first after a teardown of a class that may take its spans' lists whole (arena.c,
 * xfer_refill_marks; tcache.c, refill_from) */
#define ARENA_LISTS_DUE ((uintptr_t)1)

/* Slots of the transfer cache a class may fill now: the first chunk and the chunks earned
 * (XF_EARN; lock held). */
LA_INLINE uint32_t xfer_depth(const struct arena *a)
{
	return ((uint32_t)a->xfer_earned + 1u) * XF_CHUNK;
}

extern LA_HIDDEN struct arena arenas[LA_ARENAS_MAX];
extern LA_HIDDEN uint32_t arena_count; /* arenas initialised (atomic, grows only) */

/* Safe-linking of free-list links (like glibc's): the stored value is the next pointer
 * xor the link's own address >> 12, so a stray overwrite rarely forms a valid pointer. */
LA_INLINE void *link_decode(void *stored, const void *at)
{
	return (void *)((uintptr_t)stored ^ ((uintptr_t)at >> 12));
}
LA_INLINE void *link_encode(void *next, const void *at)
{
	return (void *)((uintptr_t)next ^ ((uintptr_t)at >> 12));
}

void arena_boot(void);
/* Attach the calling thread to an arena: one no thread uses, else a new one up to
 * arena_max, else the one with the fewest threads. hint: the arena of the block whose free
 * is the thread's first call (NULL: it allocates first), which it takes when no thread
 * uses it, and joins instead of an arena no thread uses that holds ARENA_HELD_PAGES pages
 * in use while one thread at most uses it (arena.c). */
struct arena *arena_attach(struct arena *hint);
#define ARENA_HELD_PAGES 16u
/* The calling thread starts to wait in pthread_join: its arena counts it in `joining`
 * until arena_join_done (the wrapper's return, or the thread's exit when it was cancelled
 * there: control.c). A thread that waits
 * there allocates nothing: its arena's threads all waiting is idle_lender's proof that
 * the arena is idle. Returns the arena counted, NULL when the thread has none yet. */
struct arena *arena_join_wait(void);
void arena_join_done(struct arena *a);
/* Does an arena no thread uses hold ARENA_HELD_PAGES pages in use (a guess, no lock)? */
bool arena_some_held(void);
/* The calling thread leaves a (its cache was flushed): a's transfer cache goes back to its
 * spans, and every arena's waiting remote frees are drained (they count in use until then). */
void arena_detach(struct arena *a);

LA_INLINE bool arena_lock(struct arena *a)
{
	bool contended = la_lock(&a->lock);
	if (unlikely(contended))
		STAT_ADD(a->c, lock_contended, 1);
	return contended;
}
LA_INLINE void arena_unlock(struct arena *a)
{
	la_unlock(&a->lock);
}

/* Take up to want blocks of class cls into out[0..]: freed ones when there are any, else
 * never-used ones, at most carve (>= 1) of them from spans that are not warm; returns how
 * many. out[got - 1] is the one to hand out first (the lowest address of a carving). In an
 * arena other threads share, the spans' free lists are taken whole under the lock and walked
 * after it (arena.c, refill_walk), then what was not taken goes back under it again.
 * from (NULL: a's blocks only): a refill that finds no freed block and would carve into
 * new pages while another arena holds free resident ones may take that arena's blocks
 * instead (arena.c, lender); *from receives the arena whose blocks they are. */
uint32_t arena_refill(struct arena *a, unsigned cls, void **out, uint32_t want, uint32_t carve,
                      struct arena **from);
/* Frees were handed over to a since its last drain (a hint: arena_drain itself looks at
 * the queue and the ring). */
LA_INLINE bool remote_pending(struct arena *a)
{
	return __atomic_load_n(&a->rq_pending, __ATOMIC_RELAXED) != 0;
}
/* arena_refill's parts out of line (arena.c): a shared arena's refill; an arena with one
 * thread, locked: the first partial span's freed blocks, or the general case; the span
 * a quick carving used up off the partial list */
uint32_t arena_refill_shared(struct arena *a, unsigned cls, void **out, uint32_t want,
                             uint32_t carve, struct arena **from);
uint32_t arena_refill_pop(struct arena *a, unsigned cls, void **out, uint32_t want);
/* A refill of want blocks of cls (want >= POP_WAYS_MIN, its thread cache's bin empty) in an
 * arena with one thread, after a teardown, down to its last span holding freed blocks: the
 * first partial span's whole free list into *l, its blocks counted out at once (tcache.h,
 * struct tlist); 0 (no list, nothing taken) when the refill should walk as before.
 * arena_return_list gives a list's blocks left back to its span. */
struct tlist;
uint32_t arena_take_list(struct arena *a, unsigned cls, uint32_t want, struct tlist *l);
void arena_return_list(struct arena *a, unsigned cls, struct tlist *l);
/* A link out of a list's span or past its count (the list was written after free) */
LA_COLD __attribute__((noreturn)) void arena_corrupt_list(void);
/* A list's link that free's double-free check marked (tcache_check_lists): it could not
 * take the cache holding the list (its owner inside a cache operation), and left the block
 * there, its decoded link with LIST_MARK set (no block start: blocks are 16-aligned), for
 * the owner's next look at it to report (malloc's pop, the list's return: a link that fails
 * their checks comes to list_link_marked). */
#define LIST_MARK ((uintptr_t)8)
LA_INLINE bool list_link_marked(uintptr_t base, uint32_t bytes, uint32_t recip, void *next)
{
	uintptr_t q = (uintptr_t)next, off = (q & ~LIST_MARK) - base;
	return (q & LIST_MARK) &&
	       ((q & ~LIST_MARK) == 0 || (off < bytes && sc_divides((uint32_t)off, recip)));
}
LA_COLD __attribute__((noreturn)) void arena_double_free_out(void);
/* A link of a list out that failed malloc's check: a double free's mark, or corruption */
LA_COLD __attribute__((noreturn)) void arena_bad_list_link(uintptr_t base, uint32_t bytes,
                                                           uint32_t recip, void *next);
uint32_t arena_refill_single_locked(struct arena *a, unsigned cls, void **out, uint32_t want,
                                    uint32_t carve, struct arena **from);
void arena_span_carved_out(struct arena *a, struct span *s);

/* The end of a quick refill of got blocks of cls (of size bytes) from the spans:
 * refill()'s counts, and the unlock. */
LA_INLINE void arena_refill_done(struct arena *a, unsigned cls, uint32_t got, size_t size)
{
	struct la_counters *c = a->c;
	struct la_class_stats *cs = &a->cs[cls];
	STAT_ADD_LOCKED(c, allocated_bytes, (uint64_t)got * size);
	STAT_ADD_LOCKED(c, cache_refills, 1);
	STAT_ADD_LOCKED(cs, refills, 1);
	STAT_ADD_LOCKED(cs, blocks_in_use, got);
	__atomic_store_n(&a->work, a->work + 1, __ATOMIC_RELAXED);
	arena_unlock(a);
}

/* s->used += k (mod 2^16), in memory: one add on x86-64 (gcc 12 kept a copy of the count
 * in a register and loaded it again after each add; k a word: as 16 bits, it stored k's
 * low half to the stack at every change of span) */
LA_INLINE void span_used_add(struct span *s, uintptr_t k)
{
#if defined(__x86_64__)
	__asm__("addw %w1, %0" : "+m"(s->used) : "r"(k) : "cc");
#else
	s->used = (uint16_t)(s->used + (uint16_t)k);
#endif
}

/* Blocks p, p + size, ... (k of them) into out[k - 1], out[k - 2], ... (the lowest address
 * last: handed out first). */
LA_INLINE void carve_run(void **out, uintptr_t p, size_t size, uint32_t k)
{
	/* two blocks a step, their addresses in one vector register (SSE2 on x86-64: a
	 * store, an add and the count, 2 instructions a block where one at a time took 4) */
	typedef uintptr_t pair __attribute__((vector_size(2 * sizeof(uintptr_t))));
	pair v = {p + size, p}, step = {2 * size, 2 * size};
	size_t i = k;
	for (; i >= 2; i -= 2, v += step)
		memcpy(&out[i - 2], &v, sizeof(v)); /* out[i - 1] = p, out[i - 2] = p + size */
	if (i)
		out[0] = (void *)v[1];
}

/* arena_refill, inline in the thread cache's refill (tcache.c, bin_alloc): its most common
 * case, a class in growth in an arena with one thread, then costs no frame or arguments of
 * its own (CPython test_dict: 4,946 of its 6,236 refills). That case: nothing freed of
 * the class anywhere (the transfer cache holds none, its one partial span has no free
 * list, no remote frees wait) and that span holds the never-used blocks the refill
 * carves. refill()'s code, across all its cases, cost spills and reloads (~250
 * instructions a refill besides the carving's 2.5 a block); a refill of freed blocks in the
 * same state is arena_refill_pop's, the rest arena_refill_single_locked's. */
LA_INLINE uint32_t arena_refill_inline(struct arena *a, unsigned cls, void **out, uint32_t want,
                                       uint32_t carve, struct arena **from)
{
	if (from)
		*from = a;
	if (__atomic_load_n(&a->threads, __ATOMIC_RELAXED) > 1)
		return arena_refill_shared(a, cls, out, want, carve, from);
	arena_lock(a);
	struct span *s = a->partial[cls];
	if (likely(s && !a->xfer_n[cls] && !remote_pending(a) &&
	           !((a->xfer_over | a->xfer_past) >> cls & 1))) {
		if (s->free) /* freed blocks: from the spans' lists */
			return arena_refill_pop(a, cls, out, want);
		uint32_t k = s->warm ? want : LA_MIN(want, carve), bump = s->bump;
		/* refill() may take another arena's free pages for a carving that would
		 * touch new ones (lender): not here, but where the span is warm, there is no
		 * `from` or one arena only */
		if (!s->next && k <= sc_blocks[cls] - bump &&
		    (s->warm || !from || __atomic_load_n(&arena_count, __ATOMIC_RELAXED) <= 1)) {
			struct heap *h = heap_of(s);
			size_t size = sc_size[cls];
			/* the blocks' offsets in the heap: their pages with a shift */
			uintptr_t off = ((uintptr_t)s->first << LA_PAGE_SHIFT) + bump * size;
			uintptr_t last = off + k * size - 1;
			carve_run(out, (uintptr_t)h + off, size, k);
			s->bump = (uint16_t)(bump + k);
			/* (gcc 12 made the two 16-bit adds one of a vector register's: 9
			 * instructions) */
			span_used_add(s, k);
			uint32_t lo = (uint32_t)(off >> LA_PAGE_SHIFT);
			heap_touch_few(h, lo, (uint32_t)(last >> LA_PAGE_SHIFT) - lo + 1);
			/* no never-used block left, and no free list: off the list
			 * (partial_check) */
			if (bump + k >= sc_blocks[cls])
				arena_span_carved_out(a, s);
			arena_refill_done(a, cls, k, size);
			return k;
		}
	}
	return arena_refill_single_locked(a, cls, out, want, carve, from);
}
/* How a thread cache's flush returns its blocks (arena_free_blocks). */
enum flush_how {
	FLUSH_PLAIN, /* under the lock */
	FLUSH_COLD,  /* the class went unused in the caller's thread cache */
	FLUSH_FULL,  /* the owner's bin is full: if the lock is taken, maybe through a's ring */
};
/* Return n blocks of class cls, all owned by a (caller: not holding the lock): into the
 * transfer cache as far as it takes them, the rest to their spans. FLUSH_COLD: they all go
 * to their spans, with the blocks of the class the transfer cache holds and the class's
 * kept empty span. FLUSH_FULL (a thread of a, its own cache): when the lock is taken and
 * other threads use a, into a's ring if it has room (counted in cache_flushes_deferred,
 * and in use until the next drain, as remote frees are), else as FLUSH_PLAIN. */
void arena_free_blocks(struct arena *a, void *const *blocks, uint32_t n, unsigned cls,
                       enum flush_how how);
/* arena_free_blocks(a, blocks, n, cls, FLUSH_FULL) (a copy without its tests of how) */
void arena_free_blocks_full(struct arena *a, void *const *blocks, uint32_t n, unsigned cls);
/* Lock held: is p, a block of span s, free in the transfer cache or in s's free list? */
bool arena_holds_free(struct arena *a, struct span *s, const void *p);
/* One block, no thread cache (dead or disabled caches). */
void *arena_alloc_small(struct arena *a, unsigned cls);
/* Free one block (small or large) of arena a, taking its lock. */
void arena_free_local(struct arena *a, void *p);
/* Free large block s of heap h, a heap of arena a, taking its lock: what arena_free_local
 * does for it, without finding the span again (free found it, span_lookup). */
void arena_free_large(struct arena *a, struct heap *h, struct span *s);
/* Large blocks: whole pages, optionally aligned (align > LA_PAGE). room: a block realloc
 * moves, which takes pages not resident, in a heap with fewer free resident pages than it
 * needs, from the start of the heap's largest free span (room to grow in place:
 * heap_alloc_pages). give (NULL: none): a large block of a that a thread cache's large
 * slot held freed, parked first under the same lock, where its free would have parked it
 * without the slot. */
void *arena_alloc_large(struct arena *a, size_t size, size_t align, bool room, struct span *give);
/* A thread cache's large slot (tcache.h) gives the n blocks v back (oldest first): under
 * a's lock the parked block and each of them go back to their heap's free pages, as a free
 * that parks a block gives back the one parked before it; but the last, which is parked
 * when park_last (the slot's flush: the newest block is parked, as a free without the
 * slot would have left it). n = 0: the parked block only. */
void arena_large_return(struct arena *a, struct span *const *v, uint32_t n, bool park_last);
/* A large request of at least this many pages (160 KiB) may take the parked block in
 * place (arena.c, arena_alloc_large); a smaller one leaves it parked. */
/* Large blocks of 9 to LARGE_HEAP_MAX_PAGES pages (up to 256 KiB: the large slot's exact
 * sizes) come from heaps of large blocks (heap.h, HEAP_TAG_LARGE: free tells them from the
 * owner-table entry alone), once the arena served LARGE_HEAP_AFTER of them from its other
 * heaps: a program with a few dozen such blocks maps no second heap (its header pages) for
 * them, and its small spans never take a large heap's pages, whose frees cost more
 * (free_in_large_heap: cpython-dict, 61 such blocks, +0.17M instructions with 16). Larger
 * blocks, blocks that grow (realloc) and aligned ones stay in the others. */
#define LARGE_HEAP_MAX_PAGES 64u
#define LARGE_HEAP_AFTER     64u
#define PARKED_SPLIT_PAGES   40u
/* Large blocks of 2 to LARGE_GRID_MAX_PAGES pages (up to 256 KiB: blocks of 32-256 KiB
 * written only at their start, bench medsizes 1000 1000000 262144, spread over every page
 * of the heap when placed anywhere) start on a grid of LARGE_GRID_PAGES pages from their
 * heap's start (heap.c, fit_on_grid); arena_large_grid holds the grid (tests whose blocks
 * must lie side by side set it to 0: no grid) */
#define LARGE_GRID_PAGES     16u
#define LARGE_GRID_MAX_PAGES 64u
extern LA_HIDDEN uint32_t arena_large_grid;
_Static_assert((LARGE_GRID_PAGES & (LARGE_GRID_PAGES - 1)) == 0, "fit_on_grid masks by it");
_Static_assert(LARGE_GRID_PAGES == HEAP_GRID_PAGES,
               "a large heap's blocks on the grid have their grid page's descriptor");
/* ... unless the program writes them whole (arena.c, large_probe): every LARGE_PROBE_EVERY-th
 * allocation of such a block, once LARGE_SAMPLE_EVERY of them were freed every
 * LARGE_SAMPLE_EVERY-th, takes the block as the probe if pages after its first are not
 * resident yet, and reads the probe it took before */
#define LARGE_SAMPLE_EVERY  32u
#define LARGE_DENSE_AT      128u
#define LARGE_PROBE_EVERY   8u
/* ... and up to 2^LARGE_PROBE_BACKOFF times as seldom while the samples agree with the
 * placement in use (large_dense_note) */
#define LARGE_PROBE_BACKOFF 2u
_Static_assert(LARGE_GRID_MAX_PAGES <= UINT16_MAX, "probe_pages holds a probe's pages");
/* Do a's heaps hold at least `pages` free pages that may be resident? A guess without the
 * lock (tcache.c bin_alloc: may a refill's new span do without the large slot's pages?). */
LA_INLINE bool arena_dirty_hint(const struct arena *a, uint32_t pages)
{
	return __atomic_load_n(&a->dirty_pages, __ATOMIC_RELAXED) >= pages;
}
/* Is a large block parked in a? A guess without the lock (the large slot's free). */
LA_INLINE bool arena_parked_hint(const struct arena *a)
{
	return a->parked != NULL;
}
/* A large block of free heap pages of a, at least half of them resident (a run the
 * program freed: heap_alloc_resident), or NULL when no heap has such a window: a request
 * at or above the mmap threshold takes them before a new mapping, which would fault in all
 * its pages while those stayed resident until the decay pass. */
void *arena_alloc_resident(struct arena *a, size_t size);
/* Enqueue a free on the owning arena without taking its lock (wait-free). */
void arena_free_remote(struct arena *a, void *p);
/* Free p of arena owner from a thread using arena mine (NULL: none): locally when they
 * are the same or no thread uses owner (counted in remote_frees_locked; nobody would
 * drain a queue there but the control thread), else through the remote queue. */
void arena_free_any(struct arena *owner, struct arena *mine, void *p);
/* Give owner n (<= RR_SLOTS) of its blocks, freed by a thread of mine: through its remote
 * ring when there is room (else in one splice onto its queue); when no thread uses owner,
 * under its lock instead (like arena_free_any). The blocks' first words may be written
 * (a queue's links). */
void arena_free_remote_array(struct arena *owner, struct arena *mine, void *const *blocks,
                             uint32_t n);
/* Give owner a whole local queue of its blocks (n of them) in one splice; when no thread
 * uses owner, free them under its lock instead (like arena_free_any). */
void arena_free_remote_batch(struct arena *owner, struct arena *mine, struct __cds_wfcq_head *head,
                             struct cds_wfcq_tail *tail, uint64_t n);
/* The allocator's own memory from the arena's heaps (whole pages, not counted as in use,
 * never a block free() accepts): thread caches' slots, the transfer cache. `counted`
 * bytes of it count as metadata at once (the caller counts the rest as it writes it);
 * freeing takes back what was counted in all. *was_resident (when not NULL; at most 64
 * pages) gets the pages that may have been resident already (bit i: page i), which the
 * caller counts: they no longer count as data or free pages. */
void *arena_alloc_meta(struct arena *a, size_t size, uint64_t counted, uint64_t *was_resident);
void arena_free_meta(struct arena *a, void *p, uint64_t counted);
/* In-place resize of a large block; false if it must move. */
bool arena_resize_large(struct arena *a, void *p, size_t size);
/* realloc's move of large heap block p (at its span's start) to q, a heap block just
 * allocated with at least p's pages (at its page's start): p's pages move there (mremap,
 * MREMAP_DONTUNMAP) instead of being copied, when they are at least MOVE_FROM_PAGES, at
 * most a quarter of q's pages they would cover are resident (a copy would fault the
 * others in, and leave p's resident and free), neither range may be in a huge page, and
 * the address space is not limited (os_address_space_limited).
 * p's span then goes back to its heap's free pages, none of them resident. Each heap takes
 * part in at most MOVE_MAX_PER_HEAP moves. false: nothing moved (the caller copies and
 * frees p). */
#define MOVE_FROM_PAGES      64u
/* Moves from or into a heap at most (heap.h, moves): each splits the heap's mapping where
 * its pages land, a mapping or two more of the process's (vm.max_map_count, 65,530 by
 * default), so a heap adds at most 4 x this; a moved-from range stays one mapping. */
#define MOVE_MAX_PER_HEAP    32u
/* and a process at most (arena_moves): with a few hundred heaps (tens of GiB), the heaps'
 * bound alone would leave room for tens of thousands of mappings, all of them taken from
 * what the program's own mmap calls may use */
#define MOVE_MAX_PER_PROCESS 1024u
/* moves tried in this process (forked children inherit them) */
extern LA_HIDDEN uint32_t arena_moves;
bool arena_move_large(void *p, void *q);
/* Usable bytes of a heap block (validated by the caller). */
LA_INLINE size_t arena_usable(struct heap *h, struct span *s, void *p)
{
	(void)h;
	(void)p;
	if (s->kind == SPAN_SMALL)
		return sc_size[s->cls];
	return ((size_t)s->npages << LA_PAGE_SHIFT) - s->offset;
}

/* Maintenance (each takes the arena lock). What they release is measured by the caller
 * (os_measure). */
void arena_trim(struct arena *a, size_t pad);
void arena_release_idle(struct arena *a, bool all);
/* Measure the arena's free resident pages (mincore), the decay pass's refinement. */
void arena_measure(struct arena *a);
/* The decay pass over a at tick `tick` (heap_epoch): drains its remote frees and returns
 * the free pages of every heap that stayed free for decay_ms; a full pass (a tick that is
 * a multiple of HEAP_PERIOD, once per decay_ms) also gives back empty spans and the
 * parked block, whose pages then age, and measures what stays. Spans stamped `stale` take
 * the tick first (heap_purge_aged; stale = tick: none; then the arena is waited for, not
 * skipped when busy). True when it left something a later pass may return (free pages
 * still resident, the parked block, a throttle still backing off, frees queued meanwhile)
 * or the arena was busy; then *due is lowered to the first tick at which a pass finds
 * something to do here. Free blocks inside spans in use are not such a thing: no pass
 * can return them. */
bool arena_decay(struct arena *a, uint32_t tick, uint32_t stale, uint32_t *due);
void arena_drain(struct arena *a);
/* The control thread's burst preparation (burst.h) for arena a at time now (takes the
 * lock): predict the next burst, populate its pages in chunks from a lead before it, give
 * them back when it does not come. Returns when it wants to run again: 0 never (a burst's
 * end or start wakes the control thread), a time not after now: at once (more chunks). */
uint64_t arena_burst_tick(struct arena *a, uint64_t now);
/* The same for the control thread (op_burst), which does not wait for a lock the program
 * holds (as a PI-futex waiter it spun in the kernel beside the owner: the fork loop's
 * children spent ~1.5 % of their CPU there, their control thread waiting out the program's
 * frees and trim after each decay pass). It looks at that arena again BURST_BUSY_NS later
 * where a look is wanted by then: the arena's last look wanted one, or another thread
 * kicked (`kicked`: a burst's start or end may want one its last look did not know of).
 * The look after each decay pass alone waits for the next where the last wanted none, or
 * keeps the time it wanted: at each pass that found the program in an arena it woke the
 * thread again 1 ms later, and again while the program held it (tests/unit/mechanisms.c,
 * decay::aging_pages_wake_..., read 6 wake-ups where 5 are due, under load). */
uint64_t arena_burst_look(struct arena *a, uint64_t now, bool kicked);
/* With one arena in use, the purge of a heap a free left nearly empty (the madvise
 * throttle's rule with a decay pass) waits this long for the control thread: a heap that
 * grows back out of nearly empty meanwhile (a loop that frees a batch and builds the next,
 * back to back) keeps its pages, where the purge would have made the next batch fault them
 * all in again. */
#define EMPTY_WAIT_NS 20000000ull
/* The control thread's turn at arena a's waiting nearly-empty purges (heap.purge_due; takes
 * the lock): made once due, if the heap is still nearly empty. Returns when they are due
 * (0: none waits). */
uint64_t arena_empty_tick(struct arena *a, uint64_t now);
/* the largest mapping a heap adopts (4 MiB): what a wrong guess keeps until a decay pass */
#define ADOPT_MAX_PAGES  1024u
/* direct.c: a mapping kept for the heaps goes to them in chunks of at most these pages */
#define LEND_CHUNK_PAGES 256u
/* A freed mapping of len bytes (at most ADOPT_MAX_PAGES) whose size came from the heaps
 * already before its free (direct.c): its pages move into a heap of this thread's arena as
 * free resident pages, which that heap's growth takes before it faults in new ones; false
 * if none has room (the caller unmaps it). */
bool arena_adopt(void *p, size_t len);
/* Do the heaps of this thread's arena hold fewer than len bytes of free pages that may be
 * resident (takes the lock)? False without a live cache. */
bool arena_short_of(size_t len);
/* Drain the remote frees and return the transfer cache's blocks to their spans. */
void arena_flush(struct arena *a);

/* Fork: lock every arena and drain its remote frees (parent); unlock (parent); reset the
 * locks, thread counts and remote queues (child: a queue the fork cut is never walked).
 * arena_reinit_child tells whether an arena's burst watch still wants a tick (pages the
 * parent prepared, a burst under way): without one the child's control thread leaves the
 * arenas alone until something kicks it. */
void arena_lock_all(void);
void arena_unlock_all(void);
bool arena_reinit_child(struct arena *keep);

/* Find the span of p in its heap and check that p is a block start; NULL if not. Inline:
 * realloc asks on every call (its callers read the metadata racily, LA_RACY_METADATA). */
LA_INLINE struct span *span_lookup(struct heap *h, const void *p)
{
	uint32_t pg = heap_page_of(h, p);
	if (pg < h->first_page)
		return NULL;
	uint32_t head = pm_head(h->pagemap[pg]);
	if (head < h->first_page || head > pg)
		return NULL;
	struct span *s = span_at(h, head);
	if (pg - head >= s->npages)
		return NULL;
	uint32_t off = (uint32_t)((uintptr_t)p - (uintptr_t)span_base(h, s));
	if (s->kind == SPAN_SMALL) {
		uint32_t idx = sc_index(off, s->cls);
		if (idx * sc_size[s->cls] != off || idx >= s->bump)
			return NULL;
		return s;
	}
	if (s->kind == SPAN_LARGE && off == s->offset)
		return s;
	return NULL;
}

#endif
