/* tcache.h — per-thread caches of small blocks in front of the arenas. Each size class has
 * a bin: an array of block pointers (a stack, the most recently freed on top), kept out of
 * the blocks themselves, so a write after free cannot corrupt a cache, and malloc and free
 * move one pointer and one count. The owner thread pushes and pops without a lock or
 * system call. Another thread (the control thread's flush-caches, the decay pass) may
 * empty a cache while its owner is blocked elsewhere: the owner brackets every cache
 * operation with `busy` and checks for a flusher; the flusher points the cache's `bins_at`
 * at the shared idle bins and sets `steal`, issues membarrier(PRIVATE_EXPEDITED) (a full
 * barrier on every running thread) and flushes only if `busy` is clear — an asymmetric
 * Dekker handshake. The fast paths reach their bin through `bins_at`, so the load that
 * finds the bin is the one that sees the flusher (the idle bins are empty with no room:
 * both fast paths fall to the slow path, which tests `steal`): they pay two plain stores
 * and no load of their own. Neither side ever waits for the other: a flusher that finds the
 * owner busy skips the cache (a later pass takes it), and an owner that finds its cache
 * taken allocates from or frees to its arena directly for that call (the flusher may be a
 * lower-priority thread that cannot run while the owner does). free's double-free check
 * takes a cache the same way to search a span's list it holds (tcache.c,
 * tcache_check_lists), and does not wait either: it marks the block for the owner. */
#ifndef LA_TCACHE_H
#define LA_TCACHE_H

#include "arena.h"
#include "common.h"
#include "lock.h"
#include "shm.h"
#include "sizeclass.h"
#include "tunables.h"

/* A bin: slot[1..count] hold its blocks, top points at slot[count] (popped next); slot[0]
 * is always NULL, so the pop of an empty bin reads NULL and needs no test of its own, and
 * end points at slot[limit], so a push tests top < end (the fast paths move one pointer,
 * no index). Before its class's first use in the thread (and after its thread exited) a
 * bin points at one shared NULL slot with a limit of 0: every operation takes the slow
 * path, whose first call gives it a row of the cache's slots. */
struct tbin {
	void **top;     /* &slot[count]: count = top - slot blocks held (tbin_count) */
	void **end;     /* &slot[limit] */
	void **slot;    /* this class's row of the cache's slot array (owner, or the flusher) */
	uint16_t limit; /* at most this many */
	uint16_t batch; /* next refill size: starts small, doubles up to limit/2 + 1, so a
	                 * program that uses few blocks of a class never touches many; of
	                 * never-used blocks a refill carves at most sc_batch */
	uint32_t recip; /* sc_recip of its class (0 in the idle bins and bin_none: no offset
	                 * divides): free's block-start check when the room word (tbin_room)
	                 * said no */
};

_Static_assert(sizeof(struct tbin) == 8u << PM_CLASS_SHIFT,
               "free's fast path finds its bin at 8 times the page-map entry's low byte (heap.h), "
               "malloc's at 8 times sc_small4[n]");

LA_INLINE uint32_t tbin_count(const struct tbin *b)
{
	return (uint32_t)(b->top - b->slot);
}

enum { TC_NONE = 0, TC_LIVE = 1, TC_DEAD = 2 };
#define TC_REMOTE_BATCH     64u             /* foreign frees handed over at a time */
#define TC_SLOTS            64u             /* slots of a bin's row, slot 0 included */
#define TC_MAX_BLOCKS       (TC_SLOTS - 1u) /* blocks one bin may hold on such a row */
/* A bin of one of the first TC_WIDE_CLASSES classes (16-48 bytes) that both refills and
 * flushes often grows past TC_MAX_BLOCKS (tcache.c, bin_grow): onto a wide row of
 * TC_WIDE_SLOTS slots, up to TC_GROW_BYTES of blocks (255 of 16 bytes, 127 of 32, 85 of
 * 48; from 64 bytes on, 63 blocks fill them already), and back to its base limit at the
 * first cold-bin sweep that finds it quiet. 8 KiB (255 blocks of 32 bytes) took logicmin
 * 60 0.6-0.8M instructions lower still, but its peak 4,492 -> 4,624 KiB (session 29), and
 * the cpython bench row's minor faults 8,730 -> 9,122, above glibc's 8,968 (session 41:
 * 7442c9e, reverted). */
/* A bin of a class the thread has never allocated (it frees blocks of the class that
 * other threads of its arena allocated: a consumer) holds at most TC_FREE_ONLY_BYTES of
 * blocks, at least TC_FREE_ONLY_BLOCKS (tcache.c, bin_free_only_limit), and flushes whole:
 * such blocks only wait there for the arena's refills (a consumer of a producer of
 * 16-4,096-byte blocks held ~0.8 MiB in bins of up to 63 blocks or 256 KiB each:
 * mech_remote 1 300000 7 16 4096, bench/README.md, remote frees) */
#define TC_FREE_ONLY_BYTES  16384u
#define TC_FREE_ONLY_BLOCKS 4u
#define TC_WIDE_SLOTS       256u
#define TC_WIDE_CLASSES     3u
#define TC_GROW_BYTES       4096u
/* Refills and flushes of a bin (at least one of each), with no cold-bin sweep finding it
 * quiet in between, for a step of growth: a class in steady use (logicmin's 32-byte blocks:
 * 7,000 refills and 4,300 flushes a run), not one batch of it (sizes sweep, 256 blocks of
 * each size in turn: some 16 a batch; at 16, its bins grew and its peak went 8,968 ->
 * 9,740 KiB). */
#define TC_GROW_EVENTS      64u
#define TC_SMALL4_MAX       512u  /* sizes malloc's fast path classes in TLS (small4) */
#define TC_LARGE_SLOTS      32u   /* blocks of the large slot (struct tcache, large) ... */
#define TC_LARGE_SLOTS_MAX  64u   /* ... and while its bound is raised (tcache.c, large_widen) */
#define TC_LARGE_RUN_MAX    1024u /* ... and while it keeps a learned run (tcache.c, large_run) */
/* The large slot's bins: blocks of 1 to TC_LARGE_EXACT pages in the bin of their page
 * count (bin np - 1: malloc's look is a mask and one list head), longer ones in one more
 * bin, looked through for the closest fit. Each bin is a list through its spans' next
 * (newest first) and prev (the head's: the oldest; a block in the slot is in no other
 * list), so that a malloc takes the newest and the bound sends back the oldest. */
#define TC_LARGE_EXACT      64u
_Static_assert(TC_LARGE_EXACT == 64, "a mask word has a bit per exact bin");

/* A bin's row: its slots, and TC_ROOM bytes past each slot the room word free's fast path
 * reads past its bin's top (tbin_room): the class's reciprocal while the bin has room for
 * one more block (count below the limit), 0 when it has none, so that one test (a block
 * start of the class, and room) covers both (a block start of no class: reciprocal 0
 * too). The row of no bin (tc_no_slots) has room words of 0. Written when the bin takes
 * the row and when its limit changes (bin_limit_to). A wide row (struct twide: a page,
 * its slots, then their room words) puts TC_ROOM at TC_WIDE_SLOTS words; the rows of
 * TC_SLOTS slots go four to a group of the same layout (struct tgroup: four rows' slots,
 * then their room words), as dense as rows of slots and room words side by side. */
struct twide {
	void *slot[TC_WIDE_SLOTS];
	uint64_t room[TC_WIDE_SLOTS]; /* low 32 bits: the reciprocal or 0 (little-endian) */
};
#define TC_ROOM       offsetof(struct twide, room)
#define TC_GROUP_ROWS (TC_WIDE_SLOTS / TC_SLOTS)
struct tgroup {
	void *slot[TC_GROUP_ROWS][TC_SLOTS];
	uint64_t room[TC_GROUP_ROWS][TC_SLOTS];
};
_Static_assert(offsetof(struct tgroup, room) == TC_ROOM, "a row's room words are TC_ROOM on");

/* The slot rows of one cache: pages of the thread's arena, taken at its first cache
 * operation and given back when it exits (outside TLS: glibc copies a thread's TLS
 * image and clears its zeroed part at every thread start, which would touch them all).
 * Rows go to bins in the order of their classes' first use (tcache.rows taken so far):
 * the first TC_ROWS_FIRST here, the others in `more`, taken when a bin first needs one
 * of them (a thread of fewer classes maps 7 pages of rows, as before the room words). */
#define TC_ROWS_FIRST 24u /* 6 groups: with the rest, 7 pages */
#define TC_ROWS_MORE  (LA_NCLASSES - TC_ROWS_FIRST)
struct tmore {
	struct tgroup group[(TC_ROWS_MORE + TC_GROUP_ROWS - 1) / TC_GROUP_ROWS];
};
struct tslots {
	/* rows TC_ROWS_FIRST and on (row r - TC_ROWS_FIRST there); NULL until then. First, on the
	 * page of the first rows, which the set-up touches anyway; the bins' growth beside
	 * it (owner, or a flusher that took the cache; in the first tslots only) */
	struct tmore *more __attribute__((aligned(64)));
	struct twide *wide;   /* the wide rows of classes 0 to TC_WIDE_CLASSES - 1; NULL
	                       * until a bin first grows */
	uint8_t wide_bins;    /* bins (bit c) on their wide row */
	uint8_t grown_bins;   /* bins above their base limit */
	uint8_t grow_pending; /* bins with refills or flushes counted in grow_events */
	uint8_t grow_events[TC_WIDE_CLASSES]; /* since the bin last grew or was quiet at a
	                                       * cold-bin sweep */
	uint8_t grow_both[TC_WIDE_CLASSES];   /* bit 0: a refill among them, bit 1: a flush */
	uint8_t wiped; /* rows left out of a forked child (bit 0: these, 1: more, 2: wide):
	                * tcache_fork_prepare and the thread's exit, under tc_list_lock */
	struct tgroup group[TC_ROWS_FIRST / TC_GROUP_ROWS] __attribute__((aligned(64)));
	/* the large slot's bins of 1 to TC_LARGE_EXACT pages (struct tcache, large_mask): here,
	 * not in the cache (TLS), whose initial image the loader reads at every start (a
	 * larger one reached into one more page of liballoc.so, startup.bats); those of the
	 * first tslots only */
	struct span *large_bin[TC_LARGE_EXACT];
	/* blocks in each of those bins and, last, in the long bin (large_long): meaningful
	 * while the bin holds blocks (its push onto an empty bin writes 1), so that the bound's
	 * victim (tcache.c, large_victim) is found without walking the bins' lists through
	 * their spans' descriptors (medsizes: ~70 % of free_large_slow's time) */
	uint8_t large_n[TC_LARGE_EXACT + 1]; /* (mod 256 past TC_LARGE_SLOTS_MAX: a learned run's
	                                      * bins; large_victim's choice, a hint) */
	/* blocks of 1 to TC_LARGE_EXACT pages the slot's bound sent back that no malloc asked
	 * for since, and the run it learned from them: its blocks and pages (tcache.c,
	 * large_run; owner, set while the cache's large_ghosts_on) */
	uint16_t large_ghost[TC_LARGE_EXACT];
	uint16_t large_ghost_hits; /* mallocs those counts served since the last cold-bin sweep */
	uint16_t large_run;
	uint32_t large_run_pages;
	uint8_t large_run_cold; /* sweeps in a row whose large mallocs met nothing the slot held */
};
_Static_assert(TC_LARGE_SLOTS_MAX <= UINT8_MAX, "a bin's count fits large_n");
_Static_assert(TC_LARGE_RUN_MAX <= UINT16_MAX, "the run's count fits large_slots");
_Static_assert(TC_LARGE_SLOTS_MAX <= TC_LARGE_RUN_MAX, "the run's bound is the larger");
_Static_assert(TC_ROWS_FIRST % TC_GROUP_ROWS == 0, "the first rows fill their groups");
_Static_assert(TC_WIDE_CLASSES <= 8, "a mask of wide bins is one byte");

/* The room word of a bin whose top is top: the reciprocal of its class while it has room
 * for a push, else 0 (struct twide). */
LA_INLINE uint32_t tbin_room(void *const *top)
{
	return *(const uint32_t *)((const char *)top + TC_ROOM);
}

#if defined(__SANITIZE_THREAD__)
#define LA_TSAN 1 /* TSan cannot see the membarrier handshake: use a lock instead */
#else
#define LA_TSAN 0
#endif

/* A span's whole free list that a refill after a teardown handed over (arena_take_list;
 * tcache.c, list_pop): malloc takes its blocks one at a time, reading each link as it hands
 * the block out, instead of a refill walking 32 links into the bin. Its blocks are counted
 * out of the span and cached by the thread (as a bin's); the owner, or a flusher that took
 * the cache, gives what is left back (arena_return_list). */
struct tlist {
	void *head;     /* the next block to hand out; NULL: none (left may still count some:
	                 * the span counted more than its list held) */
	uintptr_t base; /* the span's first byte (0: no list) and its length: each link's */
	uint32_t bytes; /* range check, as the refill's walk makes it (with its class's */
	uint32_t recip; /* sc_recip) */
	uint32_t left;  /* blocks counted out to the list and not handed out yet */
	uint32_t pub;   /* blocks it added to cached_bytes (all it held when taken) */
};
#define TC_LIST_CLASSES        12u /* classes that may take a list: up to 256 bytes */
#define TC_LIST_MASK           (((uint64_t)1 << TC_LIST_CLASSES) - 1)
/* Classes whose refills of freed blocks take up to 3/4 of the bin's limit (the others half
 * + 1): up to 48 bytes (tcache.c, bin_alloc). Every class: realloc_growth 64 1000000's peak
 * 19.88 -> 20.76 MiB; up to 128 bytes: the cpython row's faults 8,730 -> 8,851 (up to 48:
 * 8,573; bench/README.md, session 42, instr42) */
#define TC_DEEP_REFILL_CLASSES 3u

/* Is next, the decoded link of list l's head, a block of the list: inside the carved bytes
 * of its span (64 bits wide: NULL, the list's end, fails) and at a block start of its
 * class (a double free's mark, decoded | 8, fails)? (tcache_alloc_list; malloc.c,
 * malloc_list, its pop inline in malloc) */
LA_INLINE bool tlist_link_ok(const struct tlist *l, const void *next)
{
	uintptr_t off = (uintptr_t)next - l->base;
	return off < l->bytes && sc_divides_at((uint32_t)off, &l->recip);
}

struct tcache {
	/* The bins the fast paths use: `bins` while the cache is live and no flusher holds it;
	 * else tc_idle_bins (empty, no room), so that every call takes the slow path. Written
	 * by the owner (set-up, exit) and by a flusher that takes and gives back the cache. */
	struct tbin *bins_at;
	/* Classes (bit c) whose empty bin malloc's fast path sends to malloc_divert rather
	 * than to the refill: every class while bins_at is the idle bins (set before bins_at
	 * goes idle, cleared after it comes back: route_fast_paths), else those in list mode
	 * (lists_out). One test where two were (the idle bins' and the list mode's). */
	uint64_t divert;
	/* bins_at[-1] for free's fast path: the bin of a page-map class field of 0 (a page
	 * that is not a small span's), whose reciprocal of 0 makes no offset a block start */
	struct tbin bin_none;
	struct tbin bins[LA_NCLASSES];
	struct tslots *slots; /* the rows the bins point into; NULL before the first use */
#if LA_TSAN
	struct la_lock lock;
#endif
	uint8_t busy;          /* owner: inside a cache operation */
	uint8_t steal;         /* flusher: wants this cache (atomic) */
	uint8_t state;         /* TC_*; owner only */
	uint8_t rows;          /* owner: rows of slots given to bins */
	uint32_t gen;          /* tcache_gen the limits were computed for */
	uint64_t foreign_bins; /* owner: bins (bit c: class c) that took blocks of another
	                        * arena (one no thread uses): their flushes sort by arena */
	struct arena *arena;   /* the arena this thread allocates from */
	uint16_t tag;          /* heap_tag of arena; LA_TAG_NONE without one (free's fast path) */
	uint16_t pub_count[LA_NCLASSES];   /* each bin's count as last published */
	uint16_t slow_events[LA_NCLASSES]; /* owner: refills and flushes of each bin (wraps) */
	uint16_t decay_seen[LA_NCLASSES];  /* the decay pass: slow_events at its last look */
	uint8_t gc_level[LA_NCLASSES];     /* owner: the sweep emptied the bin too early, k
	                                    * times in a row (it skips it 2^k - 1 times) */
	uint8_t gc_skip[LA_NCLASSES];      /* owner: sweeps still to skip the bin */
	uint8_t gc_when[LA_NCLASSES];      /* owner: gc_sweeps when a sweep last emptied it */
	uint32_t gc_events;                /* owner: refills and flushes since that sweep */
	uint8_t gc_large;                  /* owner: large allocations since the last refill,
	                                    * flush or sweep, TC_GC_LARGE_STEP each (mod 256:
	                                    * tc_large_count) */
	uint8_t gc_sweeps;                 /* owner: sweeps so far (wraps) */
	uint8_t own_flushes;               /* owner: TC_OWN_FLUSH_SWEEPS at a flush of a bin
	                                    * full of frees (bin_put), one less at each
	                                    * cold-bin sweep: nonzero, the thread gave
	                                    * blocks back to its own arena within its last
	                                    * 224-256 refills and flushes, no producer whose
	                                    * blocks other threads free (arena.c,
	                                    * growth_yield) */
	uint8_t gc_large_level;            /* owner: the large trigger's backoff, k: it
	                                    * skips 2^k - 1 sweeps (tcache_large_sweep) */
	uint8_t gc_large_skip;             /* owner: its sweeps still to skip */
	uint8_t gc_large_missed;           /* owner: a bin a sweep emptied refilled within
	                                    * TC_GC_WINDOW sweeps since the trigger's last
	                                    * sweep (gc_missed) */
	uint64_t gc_active;                /* owner: bins (bit c) that refilled or flushed since
	                                    * the last cold-bin sweep */
	uint64_t gc_flushed;               /* owner: bins the last sweep emptied, not refilled
	                                    * since */
	uint64_t row_bins;                 /* owner: bins given a row (bit c: class c): the
	                                    * only ones that can hold blocks or see events */
	uint64_t refilled_bins;            /* owner: bins that ever refilled, or took their row
	                                    * at a malloc (bit c: classes it allocates); a full
	                                    * bin of another class (the thread only frees
	                                    * blocks of that class: a consumer) flushes whole */
	/* The large slot: the last TC_LARGE_SLOTS large blocks of the arena's heaps the thread
	 * freed (in bins by page count; one block only until a malloc took one back since the
	 * sweep before the last; more while large_max is raised: tcache.c, large_widen, or while
 * it keeps a run it learned: tcache.c, large_run),
	 * large_pages pages in all, at most large_max bytes, each
	 * kept whole for the next malloc of its page count or up to a quarter fewer (the
	 * closest: mimalloc's bins round as much; a realloc's move, which asks for a quarter
	 * more already, up to an eighth fewer), which takes it back with no lock
	 * (the arena's parked block costs two lock pairs a free+malloc, and holds one block:
	 * a program whose sizes above the classes vary - buffers of 32 KiB-1 MiB, uniform -
	 * met the lock and a page-run search at 9 of 10 pairs). A free that finds the slot full
	 * (blocks or bytes) gives blocks back to their heap's free pages under the lock
	 * (arena_large_return), the oldest of the page count the slot holds most of first
	 * (tcache.c, large_victim), and one that finds a block parked in the arena gives
	 * that one back too, as a free that parks a block gives back the one parked before;
	 * a malloc of another page count leaves the blocks alone, but one of
	 * PARKED_SPLIT_PAGES or more parks the shortest that holds it, else the newest, first
	 * (the arena may take it in place); a refill whose arena holds fewer free resident
	 * pages than its span takes (the blocks' pages may serve it), the cold-bin sweep (no
	 * malloc took one since the last), flushes, thread exit, trim,
	 * release, a fork and every full decay pass park the newest and give the others back
	 * to their heap. Their spans' offset is SPAN_OFFSET_CACHED meanwhile (a second free
	 * is a double free). Counted cached from their free (large_pub, published when it
	 * differs); a malloc that takes a block back leaves the figure until the slot's next
	 * slow path, flush or decay pass, as a bin's pops leave theirs until its next refill.
	 * Owner, or a flusher that took the cache. */
	uint64_t large_mask;       /* bit k: slots->large_bin[k] holds blocks (else the entry
	                            * means nothing: never written, no page touched) */
	struct span *large_long;   /* the bin of blocks longer than TC_LARGE_EXACT pages */
	struct span *large_newest; /* the last block freed into it, while there */
	uint32_t nlarge;           /* blocks in all (peeked at by flushers) */
	uint32_t large_pages;      /* their pages */
	uint64_t large_max;        /* the bound (set_limits): 0 without thread caches */
	uint64_t large_pub;        /* bytes of the slot counted in cached_bytes */
	uint32_t large_uses;       /* owner: blocks the slot gave back to malloc (wraps) */
	uint32_t large_seen;       /* owner: large_uses at the last cold-bin sweep */
	bool large_hot;            /* owner: a malloc took a block back between the last two
	                        * sweeps, or the slot keeps a learned run (tcache.c, large_run) */
	bool large_ghosts_on;      /* owner: tslots' large_ghost counts and the run are set */
	uint16_t large_slots;      /* the bound in blocks: TC_LARGE_SLOTS, more while large_max is
	                        * raised (set_limits, large_widen) or a run learned (large_run) */
	uint16_t large_misses;     /* owner: mallocs the slot had no block for since the last
	                        * cold-bin sweep (saturates) */
	struct tcache *next;       /* list of live caches (tcache_list_lock) */
	struct tcache *prev;
	/* Frees of blocks of another arena collect here (one owner at a time) and go to
	 * the owner in one hand-over (its remote ring, else its queue): blocks return to the
	 * arena whose threads allocate from their spans, so two threads never share a span's
	 * cache lines. */
	struct arena *rb_owner;
	uint32_t rb_n;
	/* The arena the last hand-over went to, and its work when a refill that would carve
	 * new pages last looked at it (arena.c, idle_lender): a thread that frees an idle
	 * arena's blocks takes that arena's freed blocks before it carves */
	uint32_t freed_to_work;
	bool crowded; /* idle_lender found a third application thread alive: none lends */
	struct arena *freed_to;
	struct arena *freed_to_seen;
	void *rb[TC_REMOTE_BATCH];
	/* sc_small4 (sizeclass.h) up to TC_SMALL4_MAX in the thread's TLS, for malloc's fast
	 * path: it addresses the entry from the register that holds the cache's TLS offset
	 * (%fs: base, index n), where the shared table took an instruction more for its
	 * address (14 instructions a malloc instead of 15). Never written; part of the TLS
	 * image, which glibc copies at each thread's start. Not the whole table: with its
	 * 1,025 bytes the image and the rest of the relro data took 0x2020 bytes, a third page,
	 * which every start touched (tests/e2e/startup.bats, five pages). */
	/* the lists handed over (struct tlist), and the classes in list mode (bit c: the first
	 * refill after a teardown set it, refill_from; the class's refills take lists,
	 * list_take) */
	struct tlist lists[TC_LIST_CLASSES];
	uint64_t lists_out;
	uint8_t small4[TC_SMALL4_MAX + 1];
	/* The thread's errno (__errno_location's answer, set at tcache_init, the same for
	 * the thread's life and, after a fork, in the child), which a full bin's flush
	 * keeps (tcache_free_full): a load where the call to libc through the PLT, and the
	 * pointer kept across the flush, took ~7.5 instructions a flush (logicmin 60: 2,255
	 * flushes, -17k). Last: no other field moves. */
	int *errp;
};
/* The cold-bin sweep (tcache.c, tcache_gc): every TC_GC_EVENTS refills and flushes of a
 * cache, or large allocations of its thread with none of those between them; a bin it
 * emptied that refills within TC_GC_WINDOW sweeps was emptied too early: after k such times
 * in a row, the next 2^k - 1 sweeps skip it, k at most TC_GC_BACKOFF. */
#define TC_GC_EVENTS        32u
#define TC_GC_WINDOW        8u
#define TC_GC_BACKOFF       7u
/* A thread that flushed a full bin of its own frees counts as no producer for this many
 * cold-bin sweeps (TC_GC_EVENTS refills and flushes each) after: one that stopped freeing
 * what it allocates (an initialization that freed, then production) yields again as it
 * grows (arena.c, growth_yield). At 2 (64 slow paths) sizemix 4 300's workers, which
 * allocate a round's blocks before they free them, yielded 52-252 times a run (0 at 8) */
#define TC_OWN_FLUSH_SWEEPS 8u

/* Enter the owner's side of the cache. False: a flusher holds it — call tc_leave and do
 * without the cache (the slow paths go to the arena directly). */
#if LA_TSAN
/* Out of line, so that TSan sees the lock also from the fast paths, which are compiled
 * without its instrumentation (LA_RACY_METADATA): otherwise a flusher's writes to the
 * blocks a cache holds look unordered with the owner's last use of them. */
void tcache_tsan_enter(struct tcache *tc);
void tcache_tsan_leave(struct tcache *tc);
#endif

LA_INLINE bool tc_enter(struct tcache *tc)
{
#if LA_TSAN
	tcache_tsan_enter(tc);
	return true;
#else
	tc->busy = 1;
	barrier();
	return !__atomic_load_n(&tc->steal, __ATOMIC_RELAXED);
#endif
}

/* Enter the owner's side for a fast path: the bins to use (tc_idle_bins when a flusher
 * holds the cache, or before its set-up and after its exit: their pops find NULL and
 * their pushes no room, so the call goes to its slow path, which tests `steal`). The
 * load of bins_at after the store of busy is the other half of take_cache's handshake.
 * Leave with tc_leave in every case. */
LA_INLINE struct tbin *tc_enter_fast(struct tcache *tc)
{
#if LA_TSAN
	tcache_tsan_enter(tc);
	return tc->bins_at;
#else
	tc->busy = 1;
	barrier();
	return __atomic_load_n(&tc->bins_at, __ATOMIC_RELAXED);
#endif
}

LA_INLINE void tc_leave(struct tcache *tc)
{
#if LA_TSAN
	tcache_tsan_leave(tc);
#else
	barrier();
	tc->busy = 0;
#endif
}

extern __thread struct tcache la_tcache __attribute__((tls_model("initial-exec")));
/* The bins of a cache that a flusher holds, or that is not set up or has exited: top at
 * a NULL slot (a pop finds nothing), end NULL (below top: a push finds no room), a
 * reciprocal of 0 (free's block-start check fails), never written. The fast paths' bins_at
 * is either TC_IDLE_BINS or the cache's own bins; the first is bin_none's counterpart. */
extern LA_HIDDEN const struct tbin tc_idle_bins[1 + LA_NCLASSES];
#define TC_IDLE_BINS ((struct tbin *)&tc_idle_bins[1])
/* Word 1 of a block sitting free in a cache, a span's free list or a hand-over batch holds
 * this; malloc clears it. A free that finds it looks for the block where it could be free
 * (free_slow: this thread's cache, the span's free list) before it reports a double free,
 * so a user word that merely equals it is not an error (one slow free). A constant, so the
 * fast paths compare and store it as an immediate (no load): not a user-space address (so
 * no pointer a program stores), odd (no aligned pointer), as an integer an arbitrary
 * negative one, as a double a NaN; free compares it as a sign-extended 32-bit immediate. */
#define LA_KEY       0xffffffffa3b5c7e9ull
extern LA_HIDDEN uint32_t tcache_gen; /* bumped when tcache_max_bytes changes */

void tcache_boot(void);
/* Slow paths of the owner. */
void *tcache_alloc_slow(struct tcache *tc, unsigned cls);
void tcache_free_slow(struct tcache *tc, void *p, unsigned cls);
/* free's fast path found no room in p's bin after every check passed (a block start of
 * its page-map entry's class in a heap of this cache's arena, not marked free), inside the
 * cache operation it entered with tc_enter_fast, which found the cache's own bins (live,
 * set up, held by no flusher): the bin flushes and takes p, without free_slow's
 * validation again, and the cache is left; errno is kept. ci: the page-map entry's low
 * byte, (class + 1) * 4 (free's register for its bin); free jumps here directly, with no
 * frame of its own between (once every 32 frees at most). */
void tcache_free_full(struct tcache *tc, void *p, size_t ci);
/* malloc's fast path found bin cls of the calling thread's cache empty in the cache's own
 * bins (not TC_IDLE_BINS: so the cache is live, set up and held by no flusher), inside the
 * cache operation it entered with tc_enter_fast: the bin refills without the slow path's
 * tests of the cache's state, and the cache is left. NULL with errno ENOMEM when the arena
 * has no memory. */
void *tcache_alloc_refill(unsigned cls);
/* The same for a class in list mode (lists_out): its list's next block, or a new list, or
 * a refill when none is left to take. */
void *tcache_alloc_list(unsigned cls);
/* A validated small block p of owner, another arena with threads, into the hand-over
 * batch of a live cache (what tcache_free_slow does for it); false, nothing done, when
 * that does not apply or a flusher holds the cache. */
bool tcache_free_foreign(struct tcache *tc, struct arena *owner, void *p);
/* The same when the batch collects owner's blocks already and has room (the consumer of a
 * producer: 63 frees of every 64): p joins it with no call and none of the first block's
 * tests, which held when the batch began (a cache that collects is live; an owner that
 * lost its threads since gets the batch under its lock, arena_free_remote_array). */
LA_INLINE bool tcache_free_foreign_more(struct tcache *tc, struct arena *owner, void *p)
{
	bool ok = tc_enter(tc) && tc->rb_owner == owner && tc->rb_n < TC_REMOTE_BATCH;
	if (likely(ok)) {
		((void **)p)[1] = (void *)LA_KEY; /* free, for double-free detection */
		tc->rb[tc->rb_n++] = p;
	}
	tc_leave(tc);
	return ok;
}
struct arena *tcache_arena(struct tcache *tc);
/* Blocks bin cls of the calling thread's cache holds (tests). */
LA_INLINE uint32_t tcache_count(unsigned cls)
{
	return tbin_count(&la_tcache.bins[cls]);
}
/* Bytes the live caches attached to arena a last published as cached (tests: with the
 * arena's transfer cache, what its cached_bytes must read). */
uint64_t tcache_published(const struct arena *a);
/* Flush every cache of the process, idle threads included. Returns blocks flushed;
 * *skipped receives caches that stayed busy (retried a few times first). */
uint64_t tcache_flush_all(uint32_t *skipped);
/* The decay pass: return every bin that neither refilled nor flushed since the last pass
 * (its blocks are of a size the thread no longer allocates or frees in numbers), and
 * foreign frees waiting for their batch. Caches whose owner is inside a cache operation
 * wait for the next pass. True when caches still hold blocks a later pass may return. */
bool tcache_flush_cold(void);
void tcache_thread_exit(void *arg);
/* Make the calling thread's exit run tcache_thread_exit (and so tell the control thread)
 * even if it never allocates. */
void tcache_watch_exit(void);
/* Apply changed cache tunables to the calling thread's cache now (others: at their next
 * refill or flush). */
/* free's double-free check of p in span s of arena a, its whole list out (span.list_out):
 * tcache.c. True when p was left marked on a list to its owner (free does nothing more). */
bool tcache_check_lists(struct arena *a, struct heap *h, struct span *s, void *p);
bool tcache_list_holds(const struct tlist *l, const void *p);
void tcache_check_self(void);
/* The owner made a large allocation (malloc.c, alloc_large): TC_GC_EVENTS of them in a
 * row, with no refill or flush between, run the cold-bin sweep (fewer of them while the
 * thread's large slot serves and swept bins refill: tcache.c), so that a thread that
 * moved on from small blocks to large ones (a buffer realloc grows past the classes, step
 * by step) sends the blocks of the classes it left back to their spans, whose pages then
 * serve its large blocks, rather than keep them cached until the decay pass. A thread
 * that mixes both (grow-shrink) sweeps as before, on its refills and flushes. */
void tcache_large_sweep(struct tcache *tc);
/* gc_large counts a large allocation as TC_GC_LARGE_STEP in a byte: the TC_GC_EVENTS-th
 * since its reset (to 0) carries out of it. True then: the sweep is due. On x86-64 one
 * add to memory and the branch on its carry (medsizes: malloc_large loaded, added, stored
 * and compared, 5 instructions a large malloc) */
#define TC_GC_LARGE_STEP (256u / TC_GC_EVENTS)
_Static_assert(TC_GC_LARGE_STEP *TC_GC_EVENTS == 256u, "TC_GC_EVENTS large steps wrap a byte");
LA_INLINE bool tc_large_count(struct tcache *tc)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	bool carry;
	__asm__("addb %2, %0" : "+m"(tc->gc_large), "=@ccc"(carry) : "i"(TC_GC_LARGE_STEP));
	return carry;
#else
	tc->gc_large = (uint8_t)(tc->gc_large + TC_GC_LARGE_STEP);
	return tc->gc_large == 0;
#endif
}
LA_INLINE void tcache_large_event(struct tcache *tc)
{
	if (tc->state == TC_LIVE && unlikely(tc_large_count(tc)))
		tcache_large_sweep(tc);
}
/* The large slot (struct tcache, large): a free keeps its block there with malloc.c's
 * free_large_keep (large_fits, large_keep below; tcache_free_large_slow). */
/* The head of the large slot's bin of blocks of np pages (an exact bin's means nothing
 * while its mask bit is clear). The exact bins are in the slot rows'
 * block (tslots), there whenever a block is in the slot (the bound is 0 without it). */
LA_INLINE struct span **large_bin_of(struct tcache *tc, uint32_t np)
{
	return np <= TC_LARGE_EXACT ? &tc->slots->large_bin[np - 1] : &tc->large_long;
}

/* The count of the bin of blocks of np pages (tslots, large_n). */
LA_INLINE uint8_t *large_n_of(struct tcache *tc, uint32_t np)
{
	return &tc->slots->large_n[np <= TC_LARGE_EXACT ? np - 1 : TC_LARGE_EXACT];
}

/* Take s out of its bin. */
LA_INLINE void large_unlink(struct tcache *tc, struct span *s)
{
	uint32_t np = s->npages;
	struct span **bin = large_bin_of(tc, np);
	struct span *head = *bin, *next = s->next;
	--*large_n_of(tc, np); /* (meaningless once the bin is empty) */
	if (s == head) {
		*bin = next;
		if (next)
			next->prev = s->prev;
		else if (np <= TC_LARGE_EXACT)
			tc->large_mask &= ~((uint64_t)1 << (np - 1));
	} else {
		s->prev->next = next;
		if (next)
			next->prev = s->prev;
		else
			head->prev = s->prev; /* s was the oldest */
	}
	s->next = s->prev = NULL;
	tc->nlarge--;
	tc->large_pages -= np;
	if (tc->large_newest == s)
		tc->large_newest = NULL;
}

/* Take the newest block of exact bin k (k + 1 pages; it holds blocks) out of it: large_unlink
 * of a bin's head, its page count known (malloc's take: no bin address from the page
 * count, no search for s in the bin). */
LA_INLINE struct span *large_pop_exact(struct tcache *tc, unsigned k)
{
	struct tslots *t = tc->slots;
	struct span *s = t->large_bin[k], *next = s->next;
	t->large_bin[k] = next;
	t->large_n[k]--; /* (meaningless once the bin is empty) */
	if (next)
		next->prev = s->prev;
	else
		tc->large_mask &= ~((uint64_t)1 << k);
	s->next = s->prev = NULL;
	tc->nlarge--;
	tc->large_pages -= k + 1;
	if (tc->large_newest == s)
		tc->large_newest = NULL;
	return s;
}

/* The large slot's blocks in cached_bytes as they are now (its slow paths, flushes). */
void tcache_publish_large(struct tcache *tc);

/* Put s at the head of its bin (the newest). The bin, its count and whether it is empty
 * (an exact bin's mask bit clear, the long bin's head NULL) from one test of the page
 * count, not large_bin_of's and large_n_of's tests again (gcc 12 computed the count's
 * address with a cmov after the branches joined: ~2.5 instructions a large free, medsizes).
 * The count by the bin's index k where it is written (a pointer to it took a `lea` and a
 * copy of the index for the mask's `bt`: 2 more) */
LA_INLINE void large_push(struct tcache *tc, struct span *s)
{
	uint32_t np = s->npages;
	struct tslots *t = tc->slots;
	struct span **bin;
	size_t k;
	bool empty;
	if (likely(np <= TC_LARGE_EXACT)) {
		k = np - 1;
		bin = &t->large_bin[k];
		empty = !(tc->large_mask >> k & 1);
		if (empty)
			tc->large_mask |= (uint64_t)1 << k;
	} else {
		k = TC_LARGE_EXACT;
		bin = &tc->large_long;
		empty = !*bin;
	}
	if (unlikely(empty)) {
		s->next = NULL;
		s->prev = s;
		t->large_n[k] = 1;
	} else {
		struct span *head = *bin;
		s->next = head;
		s->prev = head->prev;
		head->prev = s;
		t->large_n[k]++;
	}
	*bin = s;
	tc->nlarge++;
	tc->large_pages += np;
	tc->large_newest = s;
}

/* The slot's bound in blocks now: one block, as the arena parks one, until a malloc takes
 * one back: a program that frees each size once (a buffer grown by realloc) keeps no more */
LA_INLINE uint32_t large_slots_now(const struct tcache *tc)
{
	return tc->large_hot || tc->large_uses != tc->large_seen ? tc->large_slots : 1;
}

/* The slot's bound: may s go in with no block going out (nor the arena's parked one)? */
LA_INLINE bool large_fits(const struct tcache *tc, const struct span *s)
{
	return tc->nlarge < large_slots_now(tc) &&
	       (uint64_t)(tc->large_pages + s->npages) << LA_PAGE_SHIFT <= tc->large_max;
}

/* s into the slot (cache entered, the bound checked). */
LA_INLINE void large_keep(struct tcache *tc, struct span *s)
{
	s->offset = SPAN_OFFSET_CACHED; /* a second free finds no block here */
	large_push(tc, s);
	/* counted cached from here, when the slot holds more than it published: a malloc
	 * that takes a block back leaves the figure as it is, and a free that only takes
	 * the slot back to it too (no locked instruction a pair: in use and cached trade
	 * their bytes until the slot's next slow path, a flush or the decay pass's look, as
	 * a bin's do until its refill) */
	if (unlikely(((uint64_t)tc->large_pages << LA_PAGE_SHIFT) > tc->large_pub))
		tcache_publish_large(tc);
}

/* free_large_keep when blocks must go out first, or s is declined (cache entered; left
 * here): false when declined (the slot's blocks sent back; s not taken, the caller frees
 * it to its heap). */
bool tcache_free_large_slow(struct tcache *tc, struct span *s);

/* The newest block of the fewest pages from want on (want <= TC_LARGE_EXACT) in the exact
 * bins `bins` selects (bit k: want + k pages); NULL if they are empty. */
LA_INLINE struct span *large_exact_from(const struct tcache *tc, uint32_t want, uint64_t bins)
{
	uint64_t m = tc->large_mask >> (want - 1) & bins;
	return m ? tc->slots->large_bin[want - 1 + (unsigned)__builtin_ctzll(m)] : NULL;
}

/* The slot's block for a request of want pages: the closest fit of want to want + over
 * pages, the newest of equals; NULL if none. */
LA_INLINE struct span *large_fit(const struct tcache *tc, uint32_t want, uint32_t over)
{
	if (want <= TC_LARGE_EXACT) {
		/* over <= want / 4 <= 16: the bins of want .. want + over (none past the mask) */
		struct span *s = large_exact_from(tc, want, (2ULL << over) - 1);
		if (s || want + over <= TC_LARGE_EXACT)
			return s;
	}
	struct span *s = NULL;
	uint32_t best = over + 1;
	for (struct span *t = tc->large_long; t; t = t->next) {
		uint32_t d = t->npages - want; /* wraps when shorter */
		if (d < best) {
			s = t;
			best = d;
			if (!d)
				break;
		}
	}
	return s;
}

/* A malloc's request of want pages up to TC_LARGE_FIT_MAX takes from the exact bins alone,
 * those of want to want + want / 4 pages (no bin past the mask): tc_large_fit[want] is
 * their mask bits (tcache.c), the bins of large_mask to look at with one `and`, the bin of
 * the lowest bit left the closest fit (medsizes: the bins' mask from the page count took
 * ~10 instructions more a hit: two shifts by a count, the index added back). */
#define TC_LARGE_FIT_MAX 51u
_Static_assert(TC_LARGE_FIT_MAX + TC_LARGE_FIT_MAX / 4 <= TC_LARGE_EXACT &&
                       (TC_LARGE_FIT_MAX + 1) + (TC_LARGE_FIT_MAX + 1) / 4 > TC_LARGE_EXACT,
               "the fit table covers the page counts whose quarter more is an exact bin");
extern LA_HIDDEN const uint64_t tc_large_fit[TC_LARGE_FIT_MAX + 1];

/* arena_alloc_large for the calling thread's cache, its first half: the slot's closest
 * block of the page count or up to a quarter more (room, a realloc's move: an eighth;
 * align at most LA_PAGE), with no lock, or NULL: then tcache_alloc_large_slow. Inline in
 * malloc's large path (medsizes: half its mallocs), with no frame of its own. This part
 * for a cache its caller saw live (malloc.c, malloc_large: no second load and test of the
 * state, which gcc 12 made again after the gc_large count's store) and a request of at
 * most LA_LARGE_MAX bytes, align at most LA_PAGE; it returns the block's span, left to the
 * caller to address (no test of the address for NULL: a span's base never is). */
LA_INLINE struct span *tcache_large_take_live(struct tcache *tc, size_t size, bool room)
{
	/* no test of nlarge first: an empty slot's mask is 0 and its long bin NULL, the
	 * lookups below find no block in it (medsizes: ~4 instructions less a hit, the count's
	 * decrement one subtraction in memory) */
	if (likely(tc_enter(tc))) { /* (a flusher may empty it: entered) */
		size_t np = la_align_up(size, LA_PAGE) >> LA_PAGE_SHIFT; /* (no extension) */
		uint32_t want = (uint32_t)np;
		/* a malloc takes a block up to a quarter longer, as a realloc's move asks
		 * for a quarter more (malloc.c: its slack), which takes one up to an eighth
		 * longer than that (sizes at random over the 8 page counts above the classes,
		 * medsizes 1000 1000000 65536: a malloc in 11 went to the arena at an eighth,
		 * one in 17 at a quarter; 373.8M -> 350.4M instructions, and less RSS: the
		 * slot's blocks serve, not new runs of the heap) */
		uint32_t over = room ? want / 8 : want / 4;
		struct span *s = NULL;
		if (!room && np <= TC_LARGE_FIT_MAX) { /* (want + over <= TC_LARGE_EXACT) */
			uint64_t m = tc->large_mask & tc_large_fit[np];
			if (m)
				s = large_pop_exact(tc, (unsigned)__builtin_ctzll(m));
		} else if (want + over <= TC_LARGE_EXACT) { /* the exact bins alone */
			uint64_t m = tc->large_mask >> (want - 1) & ((2ULL << over) - 1);
			if (m)
				s = large_pop_exact(tc, want - 1 + (unsigned)__builtin_ctzll(m));
		} else if ((s = large_fit(tc, want, over))) {
			large_unlink(tc, s);
		}
		if (s) {
			tc->large_uses++;
			s->offset = 0;
			tc_leave(tc);
			return s;
		}
	}
	tc_leave(tc);
	return NULL;
}
/* The same for any cache, request and alignment: the block, or NULL. */
LA_INLINE void *tcache_large_take(struct tcache *tc, size_t size, size_t align, bool room)
{
	if (likely(tc->state == TC_LIVE) && align <= LA_PAGE && size <= LA_LARGE_MAX) {
		struct span *s = tcache_large_take_live(tc, size, room);
		if (s)
			return span_base(heap_of(s), s);
	}
	return NULL;
}
/* ... its second half: the arena, which parks one of the slot's blocks first under the
 * same lock when the request has PARKED_SPLIT_PAGES or more. */
void *tcache_alloc_large_slow(struct tcache *tc, size_t size, size_t align, bool room);
/* Bytes of the calling thread's large slot (tests). */
LA_INLINE uint64_t tcache_large_bytes(void)
{
	return (uint64_t)la_tcache.large_pages << LA_PAGE_SHIFT;
}
/* Park every cache's large slot in its arena (trim, release: the blocks then go back as
 * parked blocks do); busy caches are skipped. */
void tcache_flush_large_all(void);
/* The mask bit of the large slot in flush masks (above the classes' bits). */
#define TC_LARGE_BIT ((uint64_t)1 << 63)
_Static_assert(LA_NCLASSES < 64, "the large slot has the mask's top bit");
void tcache_fork_prepare(void);
void tcache_fork_parent(void);
void tcache_fork_child(void);

#endif
