/* tcache.c — thread-cache slow paths: creation (arena attach, slot rows, limits), refill,
 * flush to the owning arenas (remote frees for blocks of other arenas), thread exit, the
 * flush of every cache by another thread, and fork handling of the cache list. */
#include "tcache.h"

#include <errno.h>

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "control.h"
#include "os.h"
#include "shm.h"
#include "tunables.h"

/* The one row every bin points at before its class's first use (reset_bins): slot 0,
 * NULL, never written (a limit of 0 sends every free to the slow path); its room words are
 * 0 (free's fast path reads the first, at TC_ROOM past slot 0, in the same page). */
static const struct {
	void *slot[1];
	char gap[TC_ROOM - sizeof(void *)];
	uint64_t room[1];
} tc_no_row __attribute__((aligned(4096)));
#define tc_no_slots ((void **)tc_no_row.slot)
/* The bins of a cache that a flusher holds, or that is not set up or has exited: top at
 * the NULL slot (a pop finds nothing), end NULL (below top: a push finds no room), a
 * reciprocal of 0 (free's block-start check fails), never written (read-only after
 * relocation). Only the fast paths read them; the first is bin_none's counterpart. */
const struct tbin tc_idle_bins[1 + LA_NCLASSES] = {[0 ... LA_NCLASSES] = {.top = tc_no_slots}};

/* tc_large_fit[w]: the mask bits of the exact bins of w to w + w / 4 pages (bit k: k + 1
 * pages; entry 0, no request, none) */
#define LARGE_FIT(w)   ((w) ? ((2ULL << ((w) / 4)) - 1) << ((w)-1) : 0)
#define LARGE_FIT4(w)  LARGE_FIT(w), LARGE_FIT((w) + 1), LARGE_FIT((w) + 2), LARGE_FIT((w) + 3)
#define LARGE_FIT16(w) LARGE_FIT4(w), LARGE_FIT4((w) + 4), LARGE_FIT4((w) + 8), LARGE_FIT4((w) + 12)
const uint64_t tc_large_fit[TC_LARGE_FIT_MAX + 1] = {LARGE_FIT16(0), LARGE_FIT16(16),
                                                     LARGE_FIT16(32), LARGE_FIT4(48)};
_Static_assert(TC_LARGE_FIT_MAX + 1 == 52, "the table's initialiser names every entry");

/* Point the fast paths of tc at its own bins (own) or at the idle bins (a flusher takes the
 * cache; not set up; exited; malloc's and free's, both through bins_at): SEQ_CST where a flusher
 * takes the cache (take_cache's half of the handshake), relaxed elsewhere (set-up and exit
 * happen before the cache is listed or after it left the list, fork leaves one thread, and
 * give-back orders them before its release of `steal`). */
LA_INLINE void route_fast_paths(struct tcache *tc, bool own, int order)
{
	if (own) {
		__atomic_store_n(&tc->bins_at, tc->bins, order);
		__atomic_store_n(&tc->divert, tc->lists_out, __ATOMIC_RELEASE);
	} else {
		/* (an owner that finds the idle bins finds every class diverted) */
		__atomic_store_n(&tc->divert, ~(uint64_t)0, __ATOMIC_RELAXED);
		__atomic_store_n(&tc->bins_at, TC_IDLE_BINS,
		                 order == __ATOMIC_RELAXED ? __ATOMIC_RELEASE : order);
	}
}

/* The owner's list-mode bits, and its fast paths' diversion with them (cache entered with
 * its own bins: no flusher holds it) */
LA_INLINE void lists_mode(struct tcache *tc, uint64_t mode)
{
	tc->lists_out = mode;
	__atomic_store_n(&tc->divert, mode, __ATOMIC_RELAXED);
}

/* A refill whose blocks came from `from` other than the cache's arena: another arena's
 * (lender: its own at the flush), or the cache's with ARENA_LISTS_DUE (the first refill
 * after a teardown: the class's next refills take its spans' lists whole, list_take) */
static LA_NOINLINE void refill_from(struct tcache *tc, unsigned cls, struct arena *from)
{
	if ((uintptr_t)from & ARENA_LISTS_DUE) {
		from = (struct arena *)((uintptr_t)from & ~ARENA_LISTS_DUE);
		lists_mode(tc, tc->lists_out | (uint64_t)1 << cls);
	}
	if (from != tc->arena)
		tc->foreign_bins |= (uint64_t)1 << cls;
}

__thread struct tcache la_tcache __attribute__((tls_model("initial-exec"))) = {
        .bins_at = TC_IDLE_BINS,
        .divert = ~(uint64_t)0,
        /* .bins: zero until the set-up (reset_bins); the fast paths use the idle bins
         * until then, the slow paths set the cache up first */
        .tag = LA_TAG_NONE,
        .small4 = SC_SMALL4_512_INIT,
};
uint32_t tcache_gen = 1;

#if LA_TSAN
LA_NOINLINE void tcache_tsan_enter(struct tcache *tc)
{
	la_lock(&tc->lock);
}
LA_NOINLINE void tcache_tsan_leave(struct tcache *tc)
{
	la_unlock(&tc->lock);
}
#endif

static struct la_lock tc_list_lock = LA_LOCK_INIT;
static struct tcache *tc_list;
static pthread_key_t tc_key;
static bool membarrier_ok;

void tcache_boot(void)
{
	pthread_key_create(&tc_key, tcache_thread_exit);
	membarrier_ok =
	        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* A cache's slot rows: pages of its own arena (no mapping of their own), given back when
 * the thread exits. Nothing is written here but `more`'s page: a bin takes the next row at its first use
 * (bin_take_row), so a thread touches the rows of the classes it uses, packed in the order
 * it first used them (a thread of one or two classes: one page, not the whole array). */
static struct tslots *slots_get(struct arena *a)
{
	return arena_alloc_meta(a, sizeof(struct tslots),
	                        la_align_up(sizeof(struct tslots), LA_PAGE), NULL);
}

static void rows_for_fork(struct tcache *tc, bool wipe);

/* The rows past the first tslots' (struct tmore), counted as metadata. */
#define TC_MORE_META la_align_up(sizeof(struct tmore), LA_PAGE)

/* Point every bin at the shared empty slot, empty, with no room: its first use takes the
 * slow path, which gives it a row. */
static void reset_bins(struct tcache *tc)
{
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		tc->bins[c].slot = tc_no_slots;
		tc->bins[c].top = tc_no_slots;
		tc->bins[c].end = tc_no_slots;
		tc->bins[c].limit = 0;
		tc->bins[c].recip = sc_recip[c];
	}
	tc->bin_none.top = tc_no_slots; /* free's fast path reads its room word: 0 */
	tc->rows = 0;
	tc->row_bins = 0;
	tc->refilled_bins = 0;
}

/* tcache_max_bytes per class, at most TC_MAX_BLOCKS blocks; 0 with check_free_lists (no
 * cache, so every block comes from a span list whose links are all validated) or without
 * slot rows. */
static uint64_t cache_max(const struct tcache *tc)
{
	return TUN(check_free_lists) || !tc->slots ? 0 : (uint64_t)TUN(tcache_max_bytes);
}

/* Bytes bin c may hold: max, a quarter of it above SC_EIGHTHS_FROM, where the classes are
 * twice as dense (a sweep through every size from 4 to 16 KiB kept 3.5 MiB more cached
 * and pinned with the eight classes per doubling and the whole max, 0.2 MiB less with a
 * quarter: bench sizes sweep 10, peak RSS; half of it: 49.0M instructions instead of
 * 53.4M, 10.1 MB instead of 9.5). Three quarters above SC_QUARTERS_FROM: a quarter is 2-3
 * blocks of 17-32 KiB, so a bin that streams them (a batch allocated, then freed) refilled
 * every 2 blocks and flushed every 1-2 (halves of its limit): 10,209 refills and 17,826
 * flushes for 20,480 blocks, ~1,000 instructions a malloc+free pair (mimalloc ~350);
 * 6-11 blocks: refills of up to 4-5, flushes of 3-4. The transfer cache keeps none of these
 * classes (arena.h, xfer_class), which held more of them than the bins gain. */
static uint64_t bin_max_bytes(unsigned c, uint64_t max)
{
	if (sc_size[c] > SC_QUARTERS_FROM)
		return max / 4 * 3;
	return sc_size[c] > SC_EIGHTHS_FROM ? max / 4 : max;
}

/* A bin's base limit: what bin_max_bytes allows, at most TC_MAX_BLOCKS. */
static uint32_t bin_base_limit(unsigned c, uint64_t max)
{
	return (uint32_t)LA_MIN(bin_max_bytes(c, max) / sc_size[c], TC_MAX_BLOCKS);
}

/* The limit of bin c while the thread has never allocated its class (a consumer of blocks
 * another thread of its arena allocates: its bin only fills and flushes, whole): at most
 * TC_FREE_ONLY_BYTES of blocks, at least TC_FREE_ONLY_BLOCKS, within the base limit; the
 * class's first refill raises it to the base limit (bin_alloc). */
static uint32_t bin_free_only_limit(unsigned c, uint64_t max)
{
	uint32_t n = LA_MAX(TC_FREE_ONLY_BYTES / sc_size[c], TC_FREE_ONLY_BLOCKS);
	return LA_MIN(n, bin_base_limit(c, max));
}

/* The limit bin c may grow to (bin_grow): TC_GROW_BYTES, within bin_max_bytes, at most a
 * wide row's blocks; the base limit for the other classes. */
static uint32_t bin_grown_limit(unsigned c, uint64_t max)
{
	if (c >= TC_WIDE_CLASSES)
		return bin_base_limit(c, max);
	uint64_t bytes = LA_MIN(bin_max_bytes(c, max), (uint64_t)TC_GROW_BYTES);
	return (uint32_t)LA_MAX(LA_MIN(bytes / sc_size[c], TC_WIDE_SLOTS - 1u),
	                        bin_base_limit(c, max));
}

/* Slots of bin c's row: TC_WIDE_SLOTS on its wide row, else TC_SLOTS. */
static uint32_t bin_row_slots(const struct tcache *tc, unsigned c)
{
	return c < TC_WIDE_CLASSES && tc->slots && (tc->slots->wide_bins >> c & 1) ? TC_WIDE_SLOTS
	                                                                           : TC_SLOTS;
}

/* Bin c may hold limit blocks now: its end and its row's room words (struct twide; a
 * bin above the new limit takes the slow path at its next free, which flushes it). whole:
 * all of the row's room words (a row the bin just took); else those between the old limit
 * and the new one, the others said so already (a growth or a shrink: a wide row's 256
 * words took ~590 instructions each time, CPython test_dict 53k in all). */
static void bin_limit_to(struct tcache *tc, unsigned c, uint32_t limit, bool whole)
{
	struct tbin *b = &tc->bins[c];
	uint32_t from = whole ? 0 : LA_MIN(limit, b->limit);
	uint32_t to = whole ? bin_row_slots(tc, c) : LA_MAX(limit, b->limit);
	b->limit = (uint16_t)limit;
	b->end = b->slot + limit; /* below top when the limit fell: frees take the slow path */
	uint64_t *room = (uint64_t *)(void *)((char *)b->slot + TC_ROOM);
	for (uint32_t k = from; k < to; k++)
		room[k] = k < limit ? sc_recip[c] : 0;
}

static void bin_set_limit(struct tcache *tc, unsigned c, uint64_t max)
{
	struct tbin *b = &tc->bins[c];
	bin_limit_to(tc, c,
	             tc->refilled_bins >> c & 1 ? bin_base_limit(c, max)
	                                        : bin_free_only_limit(c, max),
	             true);
	/* the first refill takes at most SC_BATCH_BYTES (one block of the larger classes);
	 * refills double from there */
	uint32_t first = LA_MAX(1u, SC_BATCH_BYTES / sc_size[c]);
	b->batch = (uint16_t)LA_MIN(LA_MIN(4u, b->limit), first);
}

/* The large slot's bound: this many times tcache_max_bytes (1 MiB by default: the sizes
 * above the classes that stay below the mmap threshold unless the dynamic threshold rose) */
#define TC_LARGE_TIMES 4u
/* A slot that mallocs take blocks back from (TC_LARGE_HITS of them a miss since the last
 * cold-bin sweep) and that is full when a block comes in has its bound raised
 * (large_widen), up to TC_LARGE_GROW times the base, within a TC_LARGE_SHARE-th of the
 * pages in use in the freed block's heap; the cold-bin sweeps bring it back down
 * (large_narrow). medsizes 1000 1000000 65536 (sizes of 1 B-64 KiB at random): 338.0M ->
 * 299.9M instructions, peak 18.9 -> 16.9 MiB. The hits: realloc_growth's slot serves
 * 1 malloc in 16 it misses, and raised there its peak went +3 %. The share: an eighth put
 * medsizes 100 3000000 131072's peak +3.1 % and 300 2000000 131072's +5.4 % (blocks held
 * that other sizes could not take: new pages carved), a twelfth -1 % and +2.5 %, a
 * sixteenth 1000 3000000 131072's +7 %. */
#define TC_LARGE_GROW  4u
#define TC_LARGE_SHARE 12u
#define TC_LARGE_HITS  4u

/* Bin c's growth counted anew (owner, or a flusher holding the cache). */
static void grow_forget(struct tslots *t, unsigned c)
{
	t->grow_events[c] = 0;
	t->grow_both[c] = 0;
	t->grow_pending &= (uint8_t) ~(1u << c);
}

/* Every bin back to its base limit's growth state: none grown, nothing counted. */
static void grow_reset(struct tslots *t)
{
	t->grown_bins = t->grow_pending = 0;
	memset(t->grow_events, 0, sizeof(t->grow_events));
	memset(t->grow_both, 0, sizeof(t->grow_both));
}

/* Limits of the bins that have a row (the others keep 0 until their first use). */
static void set_limits(struct tcache *tc)
{
	/* the generation first, then the values it covers (tun_set writes them the other way
	 * round): a change after this read moves the generation again and the next check
	 * sees it. Read after the values, a change landing in between was recorded as seen
	 * with the old limits, for good. */
	uint32_t gen = __atomic_load_n(&tcache_gen, __ATOMIC_ACQUIRE);
	uint64_t max = cache_max(tc);
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		if (tc->bins[c].slot != tc_no_slots)
			bin_set_limit(tc, c, max);
	/* grown bins start over from their base limits (the bound may have fallen) */
	if (tc->slots)
		grow_reset(tc->slots);
	tc->large_max = max * TC_LARGE_TIMES;
	tc->large_slots = TC_LARGE_SLOTS;
	tc->large_ghosts_on = false; /* (a learned run starts over) */
	tc->gen = gen;
}

/* The first use of bin c (owner, cache entered, limits current): give it the next row,
 * if the cache may hold blocks of its class at all. */
static void bin_take_row(struct tcache *tc, unsigned c)
{
	struct tbin *b = &tc->bins[c];
	uint64_t max = cache_max(tc);
	if (b->slot != tc_no_slots || bin_max_bytes(c, max) < sc_size[c])
		return;
	struct tslots *t = tc->slots;
	struct tgroup *g = t->group;
	unsigned r = tc->rows;
	if (r >= TC_ROWS_FIRST) {
		if (!t->more) {
			struct tmore *m =
			        arena_alloc_meta(tc->arena, TC_MORE_META, TC_MORE_META, NULL);
			if (!m)
				return; /* no memory: the bin goes without a row, as uncached */
			/* (a forking thread reads it: rows_for_fork) */
			__atomic_store_n(&t->more, m, __ATOMIC_RELEASE);
		}
		g = t->more->group;
		r -= TC_ROWS_FIRST;
	}
	tc->rows++;
	void **row = g[r / TC_GROUP_ROWS].slot[r % TC_GROUP_ROWS];
	row[0] = NULL; /* the empty bin's pop reads it */
	b->slot = row;
	b->top = row;
	tc->row_bins |= (uint64_t)1 << c;
	bin_set_limit(tc, c, max);
}

/* What is left of class c's list back to its span, and the list's blocks out of
 * cached_bytes (owner, or a flusher that took the cache) */
static void list_return(struct tcache *tc, unsigned c)
{
	struct tlist *l = &tc->lists[c];
	if (l->pub) {
		STAT_SUB(tc->arena->c, cached_bytes, (uint64_t)l->pub * sc_size[c]);
		__atomic_store_n(&l->pub, 0, __ATOMIC_RELAXED); /* (tcache_published) */
	}
	arena_return_list(tc->arena, c, l);
}

/* Does cache tc hold a list out (struct tlist)? (a flusher's peek, as at the bins' counts) */
LA_INLINE bool lists_held(const struct tcache *tc, uint64_t mask)
{
	for (uint64_t m = tc->lists_out & mask & TC_LIST_MASK; m; m &= m - 1)
		if (tc->lists[__builtin_ctzll(m)].base)
			return true;
	return false;
}

/* The arena's cached_bytes follows each bin as of its last refill or flush (publish_bin,
 * one bin: refills stay O(1)); publish brings every bin up to date (flushes of the whole
 * cache, thread exit, tunable changes), so the gauge is exact whenever a cache was
 * emptied. */
LA_INLINE void publish_count(struct tcache *tc, unsigned c, uint32_t count)
{
	uint32_t pub = tc->pub_count[c];
	/* the count as published, as a rule: no product to form */
	if (count != pub && tc->arena) {
		STAT_ADD(tc->arena->c, cached_bytes,
		         (uint64_t)(((int64_t)count - pub) * (int64_t)sc_size[c]));
		tc->pub_count[c] = (uint16_t)count;
	}
}

/* The bin's count read from it; a refill and a full bin's flush know it (publish_count:
 * the bin's address and count were computed anew from the TLS base, ~8 instructions) */
LA_INLINE void publish_bin(struct tcache *tc, unsigned c)
{
	publish_count(tc, c, tbin_count(&tc->bins[c]));
}

void tcache_publish_large(struct tcache *tc)
{
	uint64_t now = (uint64_t)tc->large_pages << LA_PAGE_SHIFT;
	if (now != tc->large_pub && tc->arena) {
		STAT_ADD(tc->arena->c, cached_bytes, now - tc->large_pub); /* mod 2^64 */
		__atomic_store_n(&tc->large_pub, now, __ATOMIC_RELAXED);   /* tcache_published */
	}
}

static void publish(struct tcache *tc)
{
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		publish_bin(tc, c);
	tcache_publish_large(tc);
}

/* The block the bound sends back first: the oldest of the bin holding the most blocks
 * (of equals, the longer blocks'): the page count the slot can spare best. The bins'
 * counts (large_n), not their lists: a walk read every cached span's descriptor. */
static struct span *large_victim(const struct tcache *tc)
{
	const struct tslots *t = tc->slots;
	unsigned best = 0;
	uint32_t most = 0;
	for (uint64_t m = tc->large_mask; m; m &= m - 1) {
		unsigned k = (unsigned)__builtin_ctzll(m);
		if (t->large_n[k] >= most) {
			best = k;
			most = t->large_n[k];
		}
	}
	if (tc->large_long && t->large_n[TC_LARGE_EXACT] >= most)
		return tc->large_long->prev;
	return t->large_bin[best]->prev;
}

/* Take every block out of the slot into v, the newest last (it is the one parked). */
static uint32_t large_take_all(struct tcache *tc, struct span **v)
{
	struct span *newest = tc->large_newest;
	uint32_t n = 0;
	for (uint64_t m = tc->large_mask;; m &= m - 1) {
		struct span *s = m ? tc->slots->large_bin[__builtin_ctzll(m)] : tc->large_long;
		for (struct span *next; s; s = next) {
			next = s->next;
			s->next = s->prev = NULL;
			if (s != newest)
				v[n++] = s;
		}
		if (!m)
			break;
	}
	if (newest)
		v[n++] = newest;
	tc->large_mask = 0;
	tc->large_long = NULL;
	tc->nlarge = 0;
	tc->large_pages = 0;
	tc->large_newest = NULL;
	return n;
}

static void large_ghost_note(struct tcache *tc, const struct span *t);

/* Send the slot's oldest blocks (large_victim's) back to their heap, in batches of
 * TC_LARGE_SLOTS_MAX, until it holds at most keep blocks and np pages more are at most max
 * bytes with its own (owner, or a flusher that took the cache); each counted
 * (large_ghost) when ghost. Returns the blocks sent back. */
static LA_NOINLINE uint32_t large_send_back(struct tcache *tc, uint32_t keep, uint32_t np,
                                            uint64_t max, bool ghost)
{
	struct span *v[TC_LARGE_SLOTS_MAX];
	uint32_t n = 0, k = 0;
	while (tc->nlarge &&
	       (tc->nlarge > keep || (uint64_t)(tc->large_pages + np) << LA_PAGE_SHIFT > max)) {
		struct span *t = large_victim(tc);
		large_unlink(tc, t);
		if (ghost)
			large_ghost_note(tc, t);
		v[k++] = t;
		if (k == TC_LARGE_SLOTS_MAX) {
			arena_large_return(tc->arena, v, k, false);
			n += k;
			k = 0;
		}
	}
	if (k)
		arena_large_return(tc->arena, v, k, false);
	return n + k;
}

/* Empty the large slot: its newest block is parked in the arena, the others go back to
 * their heap (cache entered by its owner, or taken). Returns the blocks flushed. */
static LA_NOINLINE uint32_t flush_large(struct tcache *tc)
{
	if (!tc->nlarge)
		return 0;
	uint32_t n = tc->nlarge;
	/* (a learned run's blocks: large_run) */
	large_send_back(tc, TC_LARGE_SLOTS_MAX, 0, UINT64_MAX, false);
	struct span *v[TC_LARGE_SLOTS_MAX];
	arena_large_return(tc->arena, v, large_take_all(tc, v), true); /* offsets back to 0 */
	tcache_publish_large(tc);
	return n;
}

/* The slot's base bound in bytes (set_limits' large_max). */
LA_INLINE uint64_t large_base(const struct tcache *tc)
{
	return cache_max(tc) * TC_LARGE_TIMES;
}

/* The slot's bound for a block of heap h: a TC_LARGE_SHARE-th of its arena's pages in use
 * (small and large spans in all its heaps, the slot's blocks among them: a heap of large
 * blocks counts no small span of its own), at least the base, at most TC_LARGE_GROW times
 * it. The page count is the arena's (its lock): read without it, a hint. */
static uint64_t large_bound_for(const struct tcache *tc, const struct heap *h)
{
	uint64_t base = large_base(tc);
	uint64_t used = (uint64_t)__atomic_load_n(h->arena_used, __ATOMIC_RELAXED) << LA_PAGE_SHIFT;
	return LA_MIN(LA_MAX(used / TC_LARGE_SHARE, base), base * TC_LARGE_GROW);
}

/* large_max and the count that goes with it (TC_LARGE_SLOTS per base, at most
 * TC_LARGE_SLOTS_MAX). */
static void large_bound_to(struct tcache *tc, uint64_t bound)
{
	uint64_t base = large_base(tc);
	uint32_t slots = (uint32_t)(bound > base ? LA_MIN(TC_LARGE_SLOTS * bound / base,
	                                                  (uint64_t)TC_LARGE_SLOTS_MAX)
	                                         : TC_LARGE_SLOTS);
	if (tc->large_ghosts_on) { /* a learned run (large_run) is kept besides */
		const struct tslots *t = tc->slots;
		bound = LA_MAX(bound, (uint64_t)t->large_run_pages << LA_PAGE_SHIFT);
		slots = LA_MAX(slots, t->large_run);
	}
	tc->large_max = bound;
	tc->large_slots = (uint16_t)slots;
}

/* A free found the slot full (cache entered): while mallocs take its blocks back (the
 * sizes above the classes come and go, each taking a page-run search under the arena's
 * lock when the slot has none: medsizes, buffers sized by their input), its bound rises
 * with the arena's pages in use (large_bound_for). A program that frees each size once
 * (a buffer grown by realloc) keeps one block (large_fits), and a slot of an arena of few
 * pages in use stays at the base. */
static void large_widen(struct tcache *tc, const struct span *s)
{
	if (tc->large_uses - tc->large_seen < TC_LARGE_HITS * (tc->large_misses + 1u))
		return;
	uint64_t bound = large_bound_for(tc, heap_of(s));
	if (bound > tc->large_max)
		large_bound_to(tc, bound);
}

/* The cold-bin sweep (slot in use since the last one): a raised bound follows the heap's
 * pages in use back down once they fell below half of what it stands for, and the
 * blocks above it go back to their heap. Half, not any fall: the figure moves with every
 * eviction and differs from heap to heap (the newest block's heap is read), and each
 * fall sent blocks back that the next full free took the bound up for again (medsizes
 * 1000 300000 131072: 930 of 3,438 sweeps sent 7,352 blocks back; 129.3M -> 120.7M
 * instructions with the half). */
static void large_narrow(struct tcache *tc)
{
	uint64_t base = large_base(tc);
	if (tc->large_max <= base)
		return;
	struct span *any = tc->large_newest;
	if (!any && tc->nlarge)
		any = large_victim(tc);
	uint64_t bound = any ? large_bound_for(tc, heap_of(any)) : base;
	if (bound > tc->large_max / 2)
		return;
	large_bound_to(tc, bound);
	if (large_send_back(tc, tc->large_slots, 0, tc->large_max, false))
		tcache_publish_large(tc);
}

/* The learned run (tslots, large_run). A program that frees a run of large blocks
 * and then allocates the same sizes again (rounds that fill, then free in any order:
 * rptest-like, bench's batchfree) meets a slot that keeps one block (large_fits: no malloc
 * took one back) and sends the others back to their heap, where each malloc of the next
 * round searches the free pages again (batchfree: every large malloc and free under the
 * arena's lock). The blocks its bound sends back are counted by page count (large_ghost);
 * a malloc the slot has no block for that one of them would have served (the same closest
 * fit) widens the slot by that block: it keeps up to large_run blocks of large_run_pages
 * pages in all past its own bound, at most TC_LARGE_RUN_MAX blocks and TC_LARGE_RUN_TIMES
 * times its base bound (folded into large_slots and large_max: free's inline test and
 * malloc's take stay as they were). Its blocks go back as the slot's do (flushes, the decay
 * pass); the cold-bin sweep leaves them while the thread makes no large malloc (the run's
 * frees: the sweeps of the small frees' flushes emptied the slot mid-round), and the run
 * starts over when the sizes moved on (large_run_sweep). None is learned while the arena's
 * probes read its blocks written whole (large_dense): a kept block holds all its pages
 * there (mechanisms' breathing-heap tests: the slot kept 40 MiB the heap's bottom keeps).
 * Not learned from a realloc's move (room), which frees each size once as it grows:
 * realloc_growth 64 1000000's peak went 20.2 -> 22.8 MiB with it (its buffers' freed
 * sizes are those others grow to, kept from the heap's coalescing). batchfree (medsizes
 * 2000 200000 65536 1 1): 254.2M -> 93.9M instructions (bench/README.md, large36). */
#define TC_LARGE_RUN_TIMES 64u
#define TC_LARGE_RUN_COLD  2u /* (the last sweep of a round, then the next's) */

/* The counts' first use in this cache (tslots' pages are not cleared for it), or a start
 * over (large_run_sweep) */
static LA_NOINLINE void large_ghosts_start(struct tcache *tc)
{
	struct tslots *t = tc->slots;
	memset(t->large_ghost, 0, sizeof(t->large_ghost));
	t->large_ghost_hits = 0;
	t->large_run = 0;
	t->large_run_pages = 0;
	t->large_run_cold = 0;
	tc->large_ghosts_on = true;
}

/* The bound sent t back: counted by its page count. */
static void large_ghost_note(struct tcache *tc, const struct span *t)
{
	if (!tc->large_ghosts_on)
		large_ghosts_start(tc);
	if (t->npages <= TC_LARGE_EXACT && tc->slots->large_ghost[t->npages - 1] < UINT16_MAX)
		tc->slots->large_ghost[t->npages - 1]++;
}

/* A malloc of want pages (up to over more) the slot had no block for: was one the bound
 * sent back its fit? Then the run keeps one more block of that page count. */
static bool large_ghost_hit(struct tcache *tc, uint32_t want, uint32_t over)
{
	struct tslots *t = tc->slots;
	if (!tc->large_ghosts_on || want > TC_LARGE_EXACT)
		return false;
	/* blocks its arena's probes read written whole hold all their pages: no run (a lock
	 * hint: read without the lock) */
	bool dense = __atomic_load_n(&tc->arena->large_dense, __ATOMIC_RELAXED) >= LARGE_DENSE_AT;
	for (uint32_t k = want - 1; k < LA_MIN(want + over, TC_LARGE_EXACT); k++)
		if (t->large_ghost[k]) {
			t->large_ghost[k]--;
			t->large_ghost_hits++;
			if (!dense && t->large_run < TC_LARGE_RUN_MAX &&
			    (uint64_t)(t->large_run_pages + k + 1) << LA_PAGE_SHIFT <=
			            large_base(tc) * TC_LARGE_RUN_TIMES) {
				t->large_run++;
				t->large_run_pages += k + 1;
				large_bound_to(tc, tc->large_max);
			}
			return true;
		}
	return false;
}

/* The cold-bin sweep's look at the counts (used: the slot served a malloc since the last
 * one): after TC_LARGE_RUN_COLD sweeps in a row whose large mallocs neither took a block
 * back nor met a count while the slot held blocks (the sizes moved on), the counts and the
 * run start over. True while a run is kept. */
static LA_NOINLINE bool large_run_sweep(struct tcache *tc, bool used)
{
	struct tslots *t = tc->slots;
	bool forget = false;
	if (used || t->large_ghost_hits)
		t->large_run_cold = 0;
	else if (tc->large_misses && tc->nlarge && ++t->large_run_cold >= TC_LARGE_RUN_COLD)
		forget = true;
	t->large_ghost_hits = 0;
	if (forget && t->large_run) {
		large_ghosts_start(tc);
		/* (its blocks above go at the sweep's flush, else at the next free's bound) */
		large_bound_to(tc, large_base(tc));
	}
	return t->large_run != 0;
}

/* hint: the arena of the block the thread's first call frees (NULL: a malloc) */
static void tcache_init(struct tcache *tc, struct arena *hint)
{
	tc->rb_n = 0;
	tc->rb_owner = NULL;
	tc->errp = &errno;
	tc->arena = arena_attach(hint);
	tc->tag = heap_tag(tc->arena->index);
	tc->slots = slots_get(tc->arena); /* without (no memory) the cache stays disabled */
	if (tc->slots) {
		struct tslots *t = tc->slots;
		t->more = NULL;
		t->wide = NULL;
		t->wide_bins = 0;
		grow_reset(t);
	}
	reset_bins(tc);
	set_limits(tc);
	/* no flusher can reach the cache before it is listed */
	route_fast_paths(tc, true, __ATOMIC_RELAXED);
	la_lock(&tc_list_lock);
	tc->prev = NULL;
	tc->next = tc_list;
	if (tc_list)
		tc_list->prev = tc;
	tc_list = tc;
	tc->state = TC_LIVE;
	/* counted with its listing, under the lock a fork holds from its prepare handler's
	 * snapshot of the gauges to the clone: a forked child takes every listed cache but
	 * its own off the gauge (tcache_fork_child), so each it took off was counted */
	STAT_ADD(&shm_process_block()->c, metadata_bytes, sizeof(*tc));
	la_unlock(&tc_list_lock);
	pthread_setspecific(tc_key, tc);
	shm_thread_count(1);
}

struct arena *tcache_arena(struct tcache *tc)
{
	if (unlikely(tc->state == TC_NONE))
		tcache_init(tc, NULL);
	return tc->arena;
}

/* Blocks of other arenas leave a flush in one chain per owner, spliced into the owner's
 * queue with a single wait-free operation. */
#define FLUSH_OWNERS 4
struct remote_batch {
	struct arena *owner;
	struct __cds_wfcq_head head;
	struct cds_wfcq_tail tail;
	uint64_t n;
};

/* flush_bin_to of a bin that took blocks of other arenas (foreign_bins): they leave in
 * chains per owner, this arena's blocks go to its spans (count > keep). */
static LA_NOINLINE uint32_t flush_bin_mixed(struct tcache *tc, unsigned cls, uint32_t keep,
                                            enum flush_how how)
{
	struct tbin *b = &tc->bins[cls];
	uint32_t count = tbin_count(b);
	struct arena *own = tc->arena;
	struct remote_batch rb[FLUSH_OWNERS];
	unsigned nrb = 0;
	void **slot = b->slot + 1; /* the blocks, oldest first */
	uint32_t n = count - keep, nmine = 0;
	for (uint32_t i = 0; i < n; i++) {
		void *p = slot[i];
		struct arena *owner = heap_of(p)->arena;
		if (owner == own) {
			slot[nmine++] = p; /* compacted in place: i >= nmine */
			continue;
		}
		unsigned k = 0;
		while (k < nrb && rb[k].owner != owner)
			k++;
		if (k == nrb && nrb < FLUSH_OWNERS) {
			rb[k].owner = owner;
			rb[k].n = 0;
			__cds_wfcq_init(&rb[k].head, &rb[k].tail);
			nrb++;
		}
		if (k < nrb) {
			struct cds_wfcq_node *node = p;
			cds_wfcq_node_init(node);
			cds_wfcq_enqueue(&rb[k].head, &rb[k].tail, node);
			rb[k].n++;
		} else {
			arena_free_any(owner, own, p);
		}
	}
	for (unsigned k = 0; k < nrb; k++)
		arena_free_remote_batch(rb[k].owner, own, &rb[k].head, &rb[k].tail, rb[k].n);
	if (nmine)
		arena_free_blocks(own, slot, nmine, cls, how);
	/* the most recent blocks stay, at the bottom now */
	memmove(slot, slot + n, keep * sizeof(void *));
	b->top = b->slot + keep;
	if (!keep)
		tc->foreign_bins &= ~((uint64_t)1 << cls);
	return n;
}

/* Flush the oldest blocks of bin cls (the bottom of its stack) until `keep` remain. Caller
 * owns the cache (busy or flusher). A bin of this arena's blocks only (the common case)
 * hands them over without the per-owner chains' stack and loop (~40 instructions a full
 * bin's flush); a full bin's flush (bin_put) does the same with the count it knows. */
/* After the oldest count - keep blocks of bin b (its slots from b->slot + 1, oldest
 * first) went to their arena: the keep most recent ones move to the bottom (none: no
 * call). */
LA_INLINE void bin_keep_newest(struct tbin *b, uint32_t count, uint32_t keep)
{
	void **slot = b->slot + 1;
	if (keep)
		memmove(slot, slot + (count - keep), keep * sizeof(void *));
	b->top = b->slot + keep;
}

static uint32_t flush_bin_to(struct tcache *tc, unsigned cls, uint32_t keep, enum flush_how how)
{
	struct tbin *b = &tc->bins[cls];
	uint32_t count = tbin_count(b);
	if (count <= keep)
		return 0;
	if (unlikely(tc->foreign_bins >> cls & 1))
		return flush_bin_mixed(tc, cls, keep, how);
	uint32_t n = count - keep;
	arena_free_blocks(tc->arena, b->slot + 1, n, cls, how);
	bin_keep_newest(b, count, keep);
	return n;
}

static uint32_t flush_bin(struct tcache *tc, unsigned cls, uint32_t keep)
{
	return flush_bin_to(tc, cls, keep, FLUSH_PLAIN);
}

/* The wide rows' block: one page each (struct twide), counted as metadata. */
#define TC_WIDE_META la_align_up(TC_WIDE_CLASSES * sizeof(struct twide), LA_PAGE)

/* Bin c (c < TC_WIDE_CLASSES) moves to its wide row, its blocks with it (owner, cache
 * entered; or a flusher). False without memory for the rows: it stays where it is. */
static bool bin_take_wide(struct tcache *tc, unsigned c)
{
	struct tslots *t = tc->slots;
	if (!t->wide) {
		struct twide *w = arena_alloc_meta(tc->arena, TC_WIDE_META, TC_WIDE_META, NULL);
		if (!w)
			return false;
		__atomic_store_n(&t->wide, w, __ATOMIC_RELEASE); /* (rows_for_fork reads it) */
	}
	struct tbin *b = &tc->bins[c];
	void **row = t->wide[c].slot;
	uint32_t count = tbin_count(b);
	row[0] = NULL; /* the empty bin's pop reads it */
	memcpy(row + 1, b->slot + 1, count * sizeof(void *));
	b->slot = row;
	b->top = row + count;
	t->wide_bins |= (uint8_t)(1u << c);
	return true; /* (the row's room words: bin_limit_to) */
}

/* Bin c both refilled and flushed TC_GROW_EVENTS times or more (counting both) since it
 * last grew or was found quiet: a class whose blocks go to and come back from the arena
 * in runs longer than the bin holds (a structure built, torn down and built again), each
 * run a refill or a flush of half its limit, each with its fixed cost. It doubles its
 * limit, up to bin_grown_limit (on its wide row), so that the same runs take half as
 * many. Its refills double up to half the new limit + 1 (3/4 of it up to 48 bytes:
 * TC_DEEP_REFILL_CLASSES), and never-used blocks still come sc_batch at a time. Back to
 * the base limit at a cold-bin sweep that finds it quiet and does not skip it
 * (bin_shrink): the bytes it may hold are TC_GROW_BYTES, per class and thread, only while
 * the class is in use. logicmin 60 (its cubes and table nodes: 32-byte blocks, 446,000
 * allocated, up to 79,000 live, in runs of thousands each way): 7,159 refills and 4,300
 * flushes of 32 blocks and more, 10.7M instructions, now half as many; 257.80M -> 255.91M
 * instructions in all (bench/README.md). */
static LA_NOINLINE void bin_grow(struct tcache *tc, unsigned c)
{
	struct tslots *t = tc->slots;
	grow_forget(t, c);
	struct tbin *b = &tc->bins[c];
	uint32_t most = bin_grown_limit(c, cache_max(tc));
	if (b->limit >= most || b->limit == 0)
		return;
	bool moved = !(t->wide_bins >> c & 1);
	if (moved && !bin_take_wide(tc, c))
		return;
	bin_limit_to(tc, c, LA_MIN(2u * b->limit + 1u, most), moved);
	t->grown_bins |= (uint8_t)(1u << c);
}

/* Count a refill (1) or flush (2) of bin c towards its growth (slow paths, owner). */
LA_INLINE void bin_grow_note(struct tcache *tc, unsigned c, unsigned what)
{
	if (c >= TC_WIDE_CLASSES)
		return;
	struct tslots *t = tc->slots;
	t->grow_both[c] |= (uint8_t)what;
	t->grow_pending |= (uint8_t)(1u << c);
	if (unlikely(++t->grow_events[c] >= TC_GROW_EVENTS) && t->grow_both[c] == 3)
		bin_grow(tc, c);
}

/* The cold-bin sweep found bin c quiet (no refill or flush since the last one): back to
 * its base limit, its blocks above it to their spans, its growth counted anew. */
static void bin_shrink(struct tcache *tc, unsigned c)
{
	struct tslots *t = tc->slots;
	grow_forget(t, c);
	if (!(t->grown_bins >> c & 1))
		return;
	t->grown_bins &= (uint8_t) ~(1u << c);
	struct tbin *b = &tc->bins[c];
	uint32_t base = bin_base_limit(c, cache_max(tc));
	if (tbin_count(b) > base) {
		flush_bin_to(tc, c, base, FLUSH_COLD);
		publish_bin(tc, c);
	}
	bin_limit_to(tc, c, base, false);
	b->batch = (uint16_t)LA_MIN(b->batch, base / 2u + 1u);
}

/* The cold-bin sweep, run by the owner every TC_GC_EVENTS refills and flushes of its
 * cache (slow paths only), and every TC_GC_EVENTS large allocations in a row with none of
 * those between them (tcache_large_event): every bin that holds blocks but neither
 * refilled nor flushed since the last sweep belongs to a class the thread stopped using (a
 * sweep through sizes, a phase of the program that ended, a buffer grown past the
 * classes). Its blocks go back to their spans past the transfer
 * cache (arena_free_blocks, cold), so that the spans they would pin empty and their pages
 * serve the next span of any class: the decay pass does the same once per decay_ms, too
 * late for a run of a second. A bin emptied by a sweep that refills within TC_GC_WINDOW
 * sweeps was not cold (a class the program comes back to every few hundred refills and
 * flushes): the next 2^k - 1 sweeps (k: how often that happened in a row, at most
 * TC_GC_BACKOFF) leave it alone; a bin that stays cold for the window after a sweep
 * emptied it lowers k again. */
/* The lists of the classes in mask (quiet since the last sweep) back, out of list mode */
static LA_NOINLINE void lists_quiet(struct tcache *tc, uint64_t mask)
{
	for (uint64_t m = mask; m; m &= m - 1)
		list_return(tc, (unsigned)__builtin_ctzll(m));
	lists_mode(tc, tc->lists_out & ~mask);
}

static LA_NOINLINE void tcache_gc(struct tcache *tc)
{
	tc->gc_events = 0;
	uint8_t now = ++tc->gc_sweeps;
	/* a full bin's flush of its own frees this many sweeps ago at most: no producer */
	if (tc->own_flushes)
		tc->own_flushes--;
	/* a large slot no malloc took from since the last sweep: parked, as without it */
	bool used = tc->large_uses != tc->large_seen;
	bool run = false;
	if (tc->large_ghosts_on)
		run = large_run_sweep(tc, used);
	/* (a learned run's slot stays while no large malloc came: the run's frees) */
	if (tc->nlarge && !used && !(run && !tc->large_misses))
		flush_large(tc);
	large_narrow(tc); /* (emptied: back to the base) */
	tc->large_misses = 0;
	tc->large_hot = used || run;
	tc->large_seen = tc->large_uses;
	/* bins emptied TC_GC_WINDOW sweeps ago that no refill took back: rightly so */
	for (uint64_t m = tc->gc_flushed; m; m &= m - 1) {
		unsigned c = (unsigned)__builtin_ctzll(m);
		if ((uint8_t)(now - tc->gc_when[c]) >= TC_GC_WINDOW) {
			tc->gc_flushed &= ~((uint64_t)1 << c);
			if (tc->gc_level[c])
				tc->gc_level[c]--;
		}
	}
	/* bins without a row hold nothing and see no refill or flush; those with a refill or
	 * flush since the last sweep are in use (gc_active, set by bin_event: the walk visits
	 * only the others, where comparing each bin's event count with a copy taken at the
	 * last sweep cost ~17 instructions a bin, CPython test_dict's sweeps 0.55M -> 0.42M) */
	uint64_t quiet = tc->row_bins & ~tc->gc_active;
	tc->gc_active = 0;
	/* lists of quiet classes go back (struct tlist), out of list mode */
	if (unlikely(tc->lists_out & quiet))
		lists_quiet(tc, tc->lists_out & quiet);
	/* quiet bins grown or counting towards it start over (bin_shrink), but for those this
	 * sweep leaves alone (gc_skip: a class the program came back to within TC_GC_WINDOW
	 * sweeps after one emptied it): their growth stays with them, as their blocks do */
	if (tc->slots)
		for (uint64_t m = quiet & (tc->slots->grown_bins | tc->slots->grow_pending); m;
		     m &= m - 1) {
			unsigned c = (unsigned)__builtin_ctzll(m);
			if (!tc->gc_skip[c])
				bin_shrink(tc, c);
		}
	/* most quiet bins are empty (CPython test_dict: ~42 a sweep): the test is top against
	 * slot, the bin's address computed once from a 64-bit index (an int index was
	 * sign-extended and the address computed twice: 17 instructions an empty bin, now 11) */
	for (uint64_t m = quiet; m; m &= m - 1) {
		size_t c = (uint32_t)__builtin_ctzll(m);
		const struct tbin *b = &tc->bins[c];
		if (b->top == b->slot)
			continue;
		if (tc->gc_skip[c]) {
			tc->gc_skip[c]--;
		} else {
			flush_bin_to(tc, (unsigned)c, 0, FLUSH_COLD);
			publish_bin(tc, (unsigned)c);
			tc->gc_flushed |= (uint64_t)1 << c;
			tc->gc_when[c] = now;
		}
	}
}

/* A bin refilled or flushed: it is in use (the decay pass and the cold-bin sweep leave it
 * alone). Owner only; the decay pass reads the counter. */
static inline void bin_event(struct tcache *tc, unsigned cls)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	/* one add to memory, a whole 16-bit value for the decay pass's read (gcc 12 loaded,
	 * added and stored, with two address computations: 5 instructions) */
	__asm__("addw $1, %0" : "+m"(tc->slow_events[cls]));
#else
	__atomic_store_n(&tc->slow_events[cls], (uint16_t)(tc->slow_events[cls] + 1),
	                 __ATOMIC_RELAXED);
#endif
	tc->gc_active |= (uint64_t)1 << cls;
	tc->gc_large = 0;
#if defined(__x86_64__)
	__asm__("addl $1, %0" : "+m"(tc->gc_events)); /* (and the test reads it: 3, not 5) */
	if (unlikely(tc->gc_events >= TC_GC_EVENTS))
#else
	if (unlikely(++tc->gc_events >= TC_GC_EVENTS))
#endif
		tcache_gc(tc);
}

/* Bin cls refills after the last cold-bin sweep emptied it: sweeps skip it for a while. */
static LA_NOINLINE void gc_missed(struct tcache *tc, unsigned cls)
{
	tc->gc_flushed &= ~((uint64_t)1 << cls);
	if ((uint8_t)(tc->gc_sweeps - tc->gc_when[cls]) >= TC_GC_WINDOW)
		return;
	if (tc->gc_level[cls] < TC_GC_BACKOFF)
		tc->gc_level[cls]++;
	tc->gc_skip[cls] = (uint8_t)((1u << tc->gc_level[cls]) - 1u);
	tc->gc_large_missed = 1;
}

/* The cache tunables changed since tc's limits were set: apply them. */
static LA_NOINLINE void new_gen(struct tcache *tc)
{
	set_limits(tc);
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		if (tbin_count(&tc->bins[c]) > tc->bins[c].limit)
			flush_bin(tc, c, tc->bins[c].limit);
	if (((uint64_t)tc->large_pages << LA_PAGE_SHIFT) > tc->large_max)
		flush_large(tc);
}

/* Inline: every refill and flush asks (a call of its own cost ~5 instructions each) */
LA_INLINE void check_gen(struct tcache *tc)
{
	if (unlikely(tc->gen != __atomic_load_n(&tcache_gen, __ATOMIC_RELAXED)))
		new_gen(tc);
}

void tcache_large_sweep(struct tcache *tc)
{
	tc->gc_large = 0;
	if (tc_enter(tc)) { /* else a flusher holds the cache: the next ones sweep */
		/* a bound lowered since (tcache_max_bytes, check_free_lists: by any thread)
		 * applies here too, as at a bin's refill or flush: a thread that loops large
		 * blocks through its large slot meets no refill or flush */
		check_gen(tc);
		/* a thread whose large slot serves its large mallocs (TC_LARGE_HITS a miss, as
		 * large_widen asks) while bins a sweep emptied refill (gc_missed) mixes sizes,
		 * it did not move on from the small ones (medsizes: half its mallocs above the
		 * classes, the trigger every ~64 operations emptied bins in use, ~1,800
		 * instructions a sweep at 100 slots): the trigger skips 2^k - 1 of its sweeps,
		 * k one more each such time (at most TC_GC_BACKOFF), 0 again at a sweep without
		 * both (realloc_growth: a buffer frees each size once, the slot misses) */
		if (tc->gc_large_skip) {
			tc->gc_large_skip--;
		} else {
			if (tc->gc_large_missed &&
			    tc->large_uses - tc->large_seen >=
			            TC_LARGE_HITS * (tc->large_misses + 1u)) {
				if (tc->gc_large_level < TC_GC_BACKOFF)
					tc->gc_large_level++;
			} else {
				tc->gc_large_level = 0;
			}
			tc->gc_large_missed = 0;
			tc->gc_large_skip = (uint8_t)((1u << tc->gc_large_level) - 1u);
			tcache_gc(tc);
		}
	}
	tc_leave(tc);
}

void tcache_check_self(void)
{
	struct tcache *tc = &la_tcache;
	if (tc->state != TC_LIVE)
		return;
	if (tc_enter(tc)) { /* else a flusher holds it: the next refill or flush applies it */
		check_gen(tc);
		publish(tc);
	}
	tc_leave(tc);
}

/* (a call the compiler may make a jump: no frame in list_pop's callers for it) */
static LA_COLD void *list_corrupt(void)
{
	arena_corrupt_list();
}

/* The next block of list l (l->head set), its link checked as the refill's
 * walk checks it (a block of the list's span, no more than its count), marked in use */
LA_INLINE void *list_pop(struct tlist *l)
{
	void *p = l->head;
	void *next = link_decode(*(void **)p, p);
	uint32_t left = --l->left;
	if (next) {
		uintptr_t off = (uintptr_t)next - l->base;
		if (unlikely(off >= l->bytes || !sc_divides((uint32_t)off, l->recip) || !left))
			return list_corrupt();
	}
	l->head = next;
	((void **)p)[1] = NULL;
	return p;
}

/* A refill of bin cls whose batch (want) is below most: the next batch doubles. Where the
 * class has not refilled before and its bin took its row at a free (a consumer that now
 * allocates the class too: bin_free_only_limit), the bin takes its base limit. Such a bin's
 * batch is bin_set_limit's, below most wherever that limit is below the base one (a limit
 * of 8 or more: most 5 or more, the batch 4 at most; of 4 to 7: blocks above 2 KiB, a
 * batch of 1, most 3 or more), so its first refill comes here; out of line, so that a
 * refill pays only the test of the batch (logicmin 60: a test of the class's mark on every
 * refill took 8k-17k instructions more). */
static LA_NOINLINE void bin_batch_grows(struct tcache *tc, unsigned cls, uint32_t want,
                                        uint32_t most)
{
	struct tbin *b = &tc->bins[cls];
	b->batch = (uint16_t)LA_MIN(want * 2, most);
	if (tc->refilled_bins >> cls & 1)
		return;
	uint32_t base = bin_base_limit(cls, cache_max(tc));
	if (b->limit < base)
		bin_limit_to(tc, cls, base, false);
}

/* A block of class cls from its bin, refilled from the arena when empty (cache entered by
 * its owner: live, set up, no flusher); leaves the cache. empty: the caller found the bin
 * empty in the cache's own bins (malloc's fast path: tcache_alloc_empty), which no flusher
 * can have filled since (a constant: no test of the bin's top). */
LA_INLINE void *bin_alloc(struct tcache *tc, unsigned cls, bool empty)
{
	check_gen(tc);
	struct tbin *b = &tc->bins[cls];
	__asm__("" : "+r"(b)); /* kept in a register, not recomputed from the TLS base */
	/* a bin without a row has a limit of 0 (reset_bins): the test of the limit, which
	 * the refill makes anyway, leads to its first row, where a test of the row came
	 * first (with the top's: logicmin 60 -43k instructions, CPython test_dict -64k); a
	 * class the thread allocates, whose row takes the base limit */
	if (unlikely(b->limit == 0) && b->slot == tc_no_slots) {
		tc->refilled_bins |= (uint64_t)1 << cls;
		bin_take_row(tc, cls);
	}
	void *p;
	if (!empty && b->top != b->slot) {
		/* the fast path found a flush in progress */
		p = *b->top--;
	} else if (b->limit == 0) {
		p = arena_alloc_small(tc->arena, cls);
	} else {
		/* freed blocks come back in batches of up to half the limit + 1, three quarters
		 * of it in the classes up to 48 bytes (a refill's fixed cost over more blocks:
		 * nbody_tree 3000 2 -30k instructions; logicmin 60 -46k);
		 * never-used ones (which touch memory) at most sc_batch at a time */
		uint32_t want = b->batch, most = cls < TC_DEEP_REFILL_CLASSES
		                                         ? b->limit - b->limit / 4u
		                                         : b->limit / 2u + 1;
		if (unlikely(want < most)) /* (batch <= most: at most once it got there) */
			bin_batch_grows(tc, cls, want, most);
		if (unlikely(tc->gc_flushed >> cls & 1)) /* the last sweep emptied it too early */
			gc_missed(tc, cls);
		tc->refilled_bins |= (uint64_t)1 << cls;
		bin_grow_note(tc, cls, 1);
		bin_event(tc, cls);
		/* a refill may take the parked block's pages (arena.c, alloc_pages): the slot
		 * holds the blocks their frees would have parked (the newest parked, the
		 * others back to their heap's free pages, where the refill finds them too),
		 * given back when the arena's heaps hold fewer free resident pages than a new
		 * span of the class takes (else the refill takes those: medsizes, whose
		 * refills emptied a slot of 16 blocks 7,000 times in 300,000 operations,
		 * 44,500 blocks that its next mallocs then took from the heap under the lock) */
		if (unlikely(tc->nlarge) && !arena_dirty_hint(tc->arena, sc_pages[cls]))
			flush_large(tc);
		struct arena *from;
		uint32_t got = arena_refill_inline(tc->arena, cls, b->slot + 1, want,
		                                   LA_MIN(want, sc_batch[cls]), &from);
		if (unlikely(from != tc->arena))
			refill_from(tc, cls, from);
		if (got == 0) {
			p = NULL;
		} else {
			p = b->slot[got];
			b->top = b->slot + got - 1;
			publish_count(tc, cls, got - 1);
		}
	}
	if (p)
		((void **)p)[1] = NULL;
	tc_leave(tc);
	return p;
}

void *tcache_alloc_slow(struct tcache *tc, unsigned cls)
{
	if (unlikely(tc->state == TC_NONE))
		tcache_init(tc, NULL);
	if (unlikely(tc->state == TC_DEAD))
		return arena_alloc_small(tc->arena, cls);
	if (unlikely(!tc_enter(tc))) {
		/* a flusher holds the cache (allocctl flush, the decay pass): take the block
		 * from the arena rather than wait for the flusher, which may not run while this
		 * thread does (a real-time thread on its CPU: that wait was a livelock) */
		tc_leave(tc);
		void *p = arena_alloc_small(tc->arena, cls);
		if (p)
			((void **)p)[1] = NULL;
		return p;
	}
	return bin_alloc(tc, cls, false);
}

void *tcache_alloc_refill(unsigned cls)
{
	void *p = bin_alloc(&la_tcache, cls, true);
	if (unlikely(!p))
		errno = ENOMEM;
	return p;
}

/* The last block of list l, or a link out of its span (cold) */
static LA_NOINLINE void *list_last(struct tcache *tc, struct tlist *l, void *p, void *next)
{
	if (next)
		arena_bad_list_link(l->base, l->bytes, l->recip, next);
	l->head = NULL;
	l->left--;
	((void **)p)[1] = NULL;
	tc_leave(tc);
	return p;
}

/* An empty bin of class cls in list mode (the first refill after a teardown set it:
 * refill_from): the next span's list whole (arena_take_list), counted cached while it is
 * out (its blocks the thread's, as a bin's); none to take (the teardown's blocks are taken
 * back), a refill, out of list mode (cache entered; left here). A class the divert mask
 * sent here out of list mode takes no list: the mask a flusher's failed take restored from
 * a lists_out the owner was changing (take_cache) may keep the bit lists_mode cleared, and
 * a list taken then was one no flush, sweep or exit gives back (they go by lists_out);
 * lists_mode below sets the mask from lists_out again. */
static LA_NOINLINE void *list_take(struct tcache *tc, unsigned cls)
{
	struct tlist *l = &tc->lists[cls];
	struct tbin *b = &tc->bins[cls];
	if (l->base)
		list_return(tc, cls);
	if ((tc->lists_out >> cls & 1) && b->limit &&
	    arena_take_list(tc->arena, cls, b->batch, l)) {
		STAT_ADD(tc->arena->c, cached_bytes, (uint64_t)l->left * sc_size[cls]);
		__atomic_store_n(&l->pub, l->left, __ATOMIC_RELAXED); /* (tcache_published) */
		tc->refilled_bins |= (uint64_t)1 << cls;
		bin_event(tc, cls);
		return tcache_alloc_list(cls);
	}
	lists_mode(tc, tc->lists_out & ~((uint64_t)1 << cls));
	return tcache_alloc_refill(cls);
}

/* malloc's block from class cls's list (cache entered; left here): the next one, its link
 * checked as the refill's walk checks it (a block of the list's span, NULL failing the
 * range check too, and no more than its count), or a refill when it is used up (out of
 * line: the refill's frame is not the pop's). malloc pops inline (malloc.c, malloc_list)
 * and comes here for every case but a valid link: the checks of both are alike */
void *tcache_alloc_list(unsigned cls)
{
	struct tcache *tc = &la_tcache;
	struct tlist *l = &tc->lists[cls];
	__asm__("" : "+r"(l)); /* its address once */
	void *p = l->head;
	if (unlikely(p == NULL))
		return list_take(tc, cls);
	void *next = link_decode(*(void **)p, p);
	if (unlikely(!tlist_link_ok(l, next)))
		return list_last(tc, l, p, next);
	if (unlikely(--l->left == 0))
		return list_corrupt();
	l->head = next;
	((void **)p)[1] = NULL;
	tc_leave(tc);
	return p;
}

/* Hand the collected foreign frees to their owner (cache entered or owned). */
static void flush_remote(struct tcache *tc)
{
	if (!tc->rb_n)
		return;
	arena_free_remote_array(tc->rb_owner, tc->arena, tc->rb, tc->rb_n);
	tc->freed_to = tc->rb_owner;
	tc->rb_n = 0;
	tc->rb_owner = NULL;
}

/* The hand-over batch takes p, a block of owner (another arena, with threads); the cache
 * is entered. */
LA_INLINE void foreign_put(struct tcache *tc, struct arena *owner, void *p)
{
	if (tc->rb_owner != owner || tc->rb_n >= TC_REMOTE_BATCH) {
		int saved = errno; /* the hand-over may lock or map: free keeps errno */
		flush_remote(tc);
		errno = saved;
	}
	tc->rb_owner = owner;
	((void **)p)[1] = (void *)LA_KEY; /* free, for double-free detection */
	tc->rb[tc->rb_n++] = p;
}

bool tcache_free_foreign(struct tcache *tc, struct arena *owner, void *p)
{
	if (unlikely(tc->state != TC_LIVE) || owner == tc->arena ||
	    __atomic_load_n(&owner->threads, __ATOMIC_RELAXED) == 0)
		return false;
	bool ok = tc_enter(tc);
	if (likely(ok))
		foreign_put(tc, owner, p);
	tc_leave(tc);
	return ok;
}

/* Free p, a block of class cls of owner (this cache's arena, or one no thread uses), into
 * its bin, which flushes half of its blocks first when it is full (cache entered; left
 * here). own: owner is the cache's arena, known to the caller (tcache_free_full: free's
 * fast path matched p's heap to it, and a cache's arena is set once, tcache_init), so no
 * test of it after the flush, whose call it no longer has to outlive in a register or on
 * the stack (logicmin 60 -12.9k instructions, ~6 a flush). */
LA_INLINE void bin_put(struct tcache *tc, struct arena *owner, void *p, unsigned cls, bool own)
{
	struct tbin *b = &tc->bins[cls];
	__asm__("" : "+r"(b)); /* kept in a register (bin_alloc) */
	/* a bin without a row: the test of the limit first (bin_alloc) */
	if (unlikely(b->limit == 0) && b->slot == tc_no_slots)
		bin_take_row(tc, cls);
	if (b->limit == 0) {
		tc_leave(tc);
		arena_free_any(owner, tc->arena, p);
		return;
	}
	uint32_t count = tbin_count(b);
	bool flushed = count >= b->limit;
	if (flushed) {
		/* half of its blocks stay for the thread's next mallocs of the class; a bin
		 * that never refilled belongs to a class the thread only frees (a consumer of
		 * blocks other threads of its arena allocate), whose blocks would only wait
		 * there: all go, for the arena's refills */
		uint32_t keep = tc->refilled_bins >> cls & 1 ? b->limit / 2u : 0;
		/* so do they while the class's flushes go past the transfer cache (a teardown
		 * larger than its slots, until the class's next refill: arena.h, xfer_past):
		 * the bin holds the blocks the thread freed last, its flushes link whole bins,
		 * half as many flushes (growth 1000000 100000: 209.5M -> 204.7M instructions) */
		if (arena_teardown_hint(tc->arena, cls))
			keep = 0;
		/* flush_bin_to's work, with the count known (count > keep): written out
		 * here, fewer values live across the flush's call (through an inline copy
		 * of flush_bin_to, the bin, its count and the block were spilled around it
		 * and loaded back: cpython test_dict, 2,414 flushes, -45k instructions) */
		if (unlikely(tc->foreign_bins >> cls & 1)) {
			flush_bin_mixed(tc, cls, keep, FLUSH_FULL);
		} else {
			arena_free_blocks_full(tc->arena, b->slot + 1, count - keep, cls);
			bin_keep_newest(b, count, keep);
		}
		count = keep;
		bin_grow_note(tc, cls, 2);
		bin_event(tc, cls);
		tc->own_flushes = TC_OWN_FLUSH_SWEEPS;
	}
	/* after the flush: one that keeps nothing (a bin of limit 1) clears the mark, and a
	 * block of another arena marked before it would then sit unmarked in the bin, to go
	 * back to this arena's spans, under this arena's lock, at the next flush */
	if (!own && owner != tc->arena)
		tc->foreign_bins |= (uint64_t)1 << cls;
	*++b->top = p;
	((void **)p)[1] = (void *)LA_KEY;
	if (flushed) /* cached_bytes is published at refills and flushes, not per free */
		publish_count(tc, cls, count + 1);
	tc_leave(tc);
}

void tcache_free_slow(struct tcache *tc, void *p, unsigned cls)
{
	struct arena *owner = heap_of(p)->arena;
	if (unlikely(tc->state == TC_NONE))
		tcache_init(tc, owner);
	if (unlikely(tc->state == TC_DEAD)) {
		arena_free_any(owner, tc->arena, p);
		return;
	}
	if (unlikely(!tc_enter(tc))) { /* a flusher holds the cache: bypass it, never wait */
		tc_leave(tc);
		arena_free_any(owner, tc->arena, p);
		return;
	}
	check_gen(tc);
	/* a block of an arena no thread uses is kept like our own: no thread allocates
	 * beside it (a connection handed over from an exited thread) */
	if (owner != tc->arena && __atomic_load_n(&owner->threads, __ATOMIC_RELAXED) != 0) {
		foreign_put(tc, owner, p);
		tc_leave(tc);
		return;
	}
	bin_put(tc, owner, p, cls, false);
}

void tcache_free_full(struct tcache *tc, void *p, size_t ci)
{
	/* a flush may lock, map or advise: free keeps errno (the thread's, through the
	 * pointer its cache keeps: a live cache, as free's fast path found it) */
	int saved = *tc->errp;
	unsigned cls = (unsigned)(ci >> 2) - 1; /* (the page map is not read again) */
	check_gen(tc);
	bin_put(tc, tc->arena, p, cls, true);
	*tc->errp = saved;
}

/* Empty the bins in mask (bit c: class c) and hand over the foreign frees waiting for
 * their batch, the blocks as `how` says (FLUSH_PLAIN, or FLUSH_COLD: bins the decay pass
 * found unused). Caller owns the cache (busy, or took it). */
static uint64_t flush_bins(struct tcache *tc, uint64_t mask, enum flush_how how)
{
	uint64_t n = tc->rb_n;
	flush_remote(tc);
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		if ((mask >> c & 1) && tbin_count(&tc->bins[c]))
			n += flush_bin_to(tc, c, 0, how);
	/* (list mode stays: the class's next refill takes the next list) */
	for (uint64_t m = tc->lists_out & mask & TC_LIST_MASK; m; m &= m - 1) {
		unsigned c = (unsigned)__builtin_ctzll(m);
		n += tc->lists[c].left;
		list_return(tc, c);
	}
	if (mask & TC_LARGE_BIT)
		n += flush_large(tc);
	publish(tc);
	return n;
}
_Static_assert(LA_NCLASSES <= 64, "a bin mask is one word");

void tcache_watch_exit(void)
{
	if (!pthread_getspecific(tc_key))
		pthread_setspecific(tc_key, &la_tcache);
}

void tcache_thread_exit(void *arg)
{
	struct tcache *tc = arg;
	if (!tc)
		return;
	if (tc->state != TC_LIVE) {
		control_thread_exiting(); /* a thread that never allocated (tcache_watch_exit) */
		return;
	}
	la_lock(&tc_list_lock);
	if (tc->prev)
		tc->prev->next = tc->next;
	else
		tc_list = tc->next;
	if (tc->next)
		tc->next->prev = tc->prev;
	/* rows a fork left out of its child are copied again before their pages go back to
	 * the arena, which may hand them out as blocks (a fork cannot mark them now: the
	 * cache is off the list) */
	rows_for_fork(tc, false);
	/* off the gauge with its unlisting (tcache_init): a fork meanwhile neither counts it
	 * nor takes it off */
	STAT_SUB(&shm_process_block()->c, metadata_bytes, sizeof(*tc));
	la_unlock(&tc_list_lock);
	/* no flusher can reach this cache now */
	flush_bins(tc, ~(uint64_t)0, FLUSH_PLAIN);
	if (tc->slots) {
		/* (rows still left out of a child, where the advice failed: kept, not reused) */
		uint8_t kept = tc->slots->wiped;
		if (tc->slots->more && !(kept & 2))
			arena_free_meta(tc->arena, tc->slots->more, TC_MORE_META);
		if (tc->slots->wide && !(kept & 4))
			arena_free_meta(tc->arena, tc->slots->wide, TC_WIDE_META);
		if (!kept)
			arena_free_meta(tc->arena, tc->slots,
			                la_align_up(sizeof(*tc->slots), LA_PAGE));
	}
	tc->slots = NULL;
	reset_bins(tc); /* limit 0: every later call takes the slow path */
	route_fast_paths(tc, false, __ATOMIC_RELAXED);
	tc->state = TC_DEAD;
	tc->tag = LA_TAG_NONE;
	arena_detach(tc->arena);
	shm_thread_count(-1);
	control_thread_exiting();
}

/* Take another thread's cache: the asymmetric Dekker of tcache.h (our stores of `steal`
 * for its slow paths and of `bins_at` for its fast paths, a barrier on every running
 * thread, their `busy`). False when its owner is inside a cache operation. A cache taken
 * is released with give_back. Only live caches are taken (the list's), under
 * tc_list_lock, so bins_at goes back to the cache's own bins. */
static bool take_cache(struct tcache *tc)
{
#if LA_TSAN
	tcache_tsan_enter(tc);
	return true;
#else
	__atomic_exchange_n(&tc->steal, 1, __ATOMIC_SEQ_CST);
	route_fast_paths(tc, false, __ATOMIC_SEQ_CST);
	/* a barrier refused (a registration not inherited, see tcache_fork_child) takes no
	 * cache, now or later */
	if (membarrier_ok && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		membarrier_ok = false;
	if (membarrier_ok && !__atomic_load_n(&tc->busy, __ATOMIC_SEQ_CST))
		return true;
	route_fast_paths(tc, true, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->steal, 0, __ATOMIC_RELEASE);
	return false;
#endif
}

static void give_back(struct tcache *tc)
{
#if LA_TSAN
	tcache_tsan_leave(tc);
#else
	/* the bins first: an owner that sees `steal` clear finds its own bins */
	route_fast_paths(tc, true, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->steal, 0, __ATOMIC_RELEASE);
#endif
}

/* Does list l hold block p? Its blocks up to its count, each link checked (a walk that
 * meets a link out of the list's span stops there; one that free's check marked goes on:
 * LIST_MARK). The caller holds the list: its owner, or a checker that took the cache. */
bool tcache_list_holds(const struct tlist *l, const void *p)
{
	void *q = l->head;
	for (uint32_t n = 0; q && n < l->left; n++) {
		if (q == p)
			return true;
		uintptr_t next = (uintptr_t)link_decode(*(void **)q, q) & ~LIST_MARK;
		if (next - l->base >= l->bytes || !sc_divides((uint32_t)(next - l->base), l->recip))
			return false; /* (NULL fails the range check too) */
		q = (void *)next;
	}
	return false;
}

/* Enter cache tc for free's double-free check (tcache_check_lists): the caller's own as its
 * owner, another as a flusher takes it; false, without waiting, when a flusher holds the
 * own or the owner is inside a cache operation (under TSan, whose cache lock replaces the
 * handshake: when that lock is held). leave_for_check undoes a true. */
static bool enter_for_check(struct tcache *tc)
{
#if LA_TSAN
	return la_trylock(&tc->lock);
#else
	if (tc != &la_tcache)
		return take_cache(tc);
	if (tc_enter(tc))
		return true;
	tc_leave(tc);
	return false;
#endif
}

static void leave_for_check(struct tcache *tc)
{
#if LA_TSAN
	la_unlock(&tc->lock);
#else
	if (tc != &la_tcache)
		give_back(tc);
	else
		tc_leave(tc);
#endif
}

/* p's link marked for the owner of the list p may be on (tcache_check_lists: it could not
 * look): its decoded link | LIST_MARK, if p is still free (word 1 the key) and word 0 still
 * what was read (the owner may hand p out meanwhile, and the program write it: a race of
 * the double free with that malloc, where the mark may also be lost). True: p left there. */
static bool list_mark(void *p)
{
	void *old = __atomic_load_n((void **)p, __ATOMIC_RELAXED);
	if (__atomic_load_n((void **)p + 1, __ATOMIC_RELAXED) != (void *)LA_KEY)
		return false;
	void *next = link_encode((void *)((uintptr_t)link_decode(old, p) | LIST_MARK), p);
	return __atomic_compare_exchange_n((void **)p, &old, next, false, __ATOMIC_RELAXED,
	                                   __ATOMIC_RELAXED);
}

/* free's double-free check of p (word 1 the key, class cls, in a span whose whole free list
 * a thread cache held: list_out) once this thread's cache and the span's free list did not
 * hold it: under tc_list_lock and the arena's lock (no list taken or given back meanwhile),
 * the span's list and the caches again, and the cache holding the list (at most one) taken
 * and searched. A double free found stops the process. Neither side waits: when that cache
 * cannot be taken (its owner inside a cache operation), or no listed cache holds the list
 * (its thread exiting, or gone in a fork's child), p stays where it is, its link marked
 * (list_mark), and the owner's malloc or the list's return reports it (true: free leaves p
 * alone). A p on no list (in a bin: README's limit, or a user word equal to the key) is
 * then never reused, one block. False: free goes on. (tc_list_lock taken inside free: a
 * signal handler's double free of such a block while its thread holds that lock - thread
 * start or exit, a flush - would wait for ever; the check runs only for a block whose
 * second word is the free mark.) */
LA_RACY_METADATA bool tcache_check_lists(struct arena *a, struct heap *h, struct span *s, void *p)
{
	unsigned cls = s->cls;
	uintptr_t base = (uintptr_t)span_base(h, s);
	bool left = false, found = false;
	la_lock(&tc_list_lock);
	arena_lock(a);
	arena_drain(a);
	if (s->kind == SPAN_SMALL && arena_holds_free(a, s, p))
		found = true;
	else if (s->kind == SPAN_SMALL && s->list_out && cls < TC_LIST_CLASSES) {
		struct tcache *tc = tc_list;
		for (; tc; tc = tc->next) {
			/* a peek at another thread's list, made safe by the handshake (as
			 * tcache_flush_all's) */
			if (__atomic_load_n(&tc->lists[cls].base, __ATOMIC_RELAXED) != base)
				continue;
			if (enter_for_check(tc)) {
				const struct tlist *l = &tc->lists[cls];
				found = l->base == base && tcache_list_holds(l, p);
				leave_for_check(tc);
			} else {
				left = list_mark(p);
			}
			break;
		}
		/* out, in no listed cache: its thread exiting (off the list, its lists going
		 * back), or gone in a fork's child (the span pinned): left alone too */
		if (!tc)
			left = list_mark(p);
	}
	arena_unlock(a);
	la_unlock(&tc_list_lock);
	if (found)
		arena_double_free_out();
	return left;
}

/* Flush the bins in mask of tc (the caller's own cache, or another taken for the time of
 * the flush) into *n; false when its owner is inside a cache operation. */
static bool flush_cache(struct tcache *tc, uint64_t mask, uint64_t *n, enum flush_how how)
{
	if (tc == &la_tcache) {
		*n += flush_bins(tc, mask, how);
		return true;
	}
	if (!take_cache(tc))
		return false;
	*n += flush_bins(tc, mask, how);
	give_back(tc);
	return true;
}

uint64_t tcache_flush_all(uint32_t *skipped)
{
	uint64_t n = 0;
	uint32_t busy_left = 0;
	la_lock(&tc_list_lock);
	for (int round = 0; round < 50; round++) {
		busy_left = 0;
		for (struct tcache *tc = tc_list; tc; tc = tc->next) {
			/* a peek at another thread's counts, made safe by the handshake, which
			 * TSan cannot see: there every cache goes through flush_cache's lock */
			bool any = LA_TSAN || tc->rb_n != 0 || tc->nlarge || tc->large_pub ||
			           lists_held(tc, ~(uint64_t)0);
			for (unsigned c = 0; c < LA_NCLASSES && !any; c++)
				any = tbin_count(&tc->bins[c]) != 0;
			if (any && !flush_cache(tc, ~(uint64_t)0, &n, FLUSH_PLAIN))
				busy_left++;
		}
		if (!busy_left)
			break;
		la_unlock(&tc_list_lock);
		usleep(1000);
		la_lock(&tc_list_lock);
	}
	la_unlock(&tc_list_lock);
	if (skipped)
		*skipped = busy_left;
	return n;
}

/* Bins of tc that hold blocks and saw no refill or flush since the last pass (bit c: class
 * c), noting what it saw for the next pass; false when there is nothing to flush (no such
 * bin, no foreign frees waiting). *held is set when a bin holds blocks that saw one (a
 * later pass may take them). Read without the owner's cooperation: a bin misjudged either
 * way is flushed a pass late or refilled once more. */
LA_RACY_METADATA static bool cold_bins(struct tcache *tc, uint64_t *cold, bool *held)
{
	/* the large slot goes back at every full pass, used or not, as the parked block
	 * does (arena_decay): then both age as free pages */
	*cold = tc->nlarge || tc->large_pub ? TC_LARGE_BIT : 0; /* (or publish its figure) */
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		uint16_t ev = __atomic_load_n(&tc->slow_events[c], __ATOMIC_RELAXED);
		if (tbin_count(&tc->bins[c]) || lists_held(tc, (uint64_t)1 << c)) {
			if (ev == tc->decay_seen[c])
				*cold |= (uint64_t)1 << c;
			else
				*held = true;
		}
		tc->decay_seen[c] = ev;
	}
	return *cold || tc->rb_n;
}

bool tcache_flush_cold(void)
{
	bool held = false;
	uint64_t n = 0;
	la_lock(&tc_list_lock);
	for (struct tcache *tc = tc_list; tc; tc = tc->next) {
		uint64_t cold;
		/* cold (arena.h, FLUSH_COLD): the blocks to their spans, not through the
		 * transfer cache, which this full pass empties next (arena_decay) anyway: a
		 * copy of each pointer into its slots and out again, and in a forked child a
		 * copy-on-write fault on each slot page the parent had written (the fork
		 * loop's decay children: 2-3 of them) */
		if (cold_bins(tc, &cold, &held) && !flush_cache(tc, cold, &n, FLUSH_COLD))
			held = true; /* its owner is inside a cache operation: the next pass */
	}
	la_unlock(&tc_list_lock);
	return held;
}

/* What cache tc last published into its arena's cached_bytes: its bins and its large slot */
static uint64_t published_bytes(const struct tcache *tc)
{
	uint64_t bytes = __atomic_load_n(&tc->large_pub, __ATOMIC_RELAXED);
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		bytes +=
		        (uint64_t)__atomic_load_n(&tc->pub_count[c], __ATOMIC_RELAXED) * sc_size[c];
	for (unsigned c = 0; c < TC_LIST_CLASSES; c++)
		bytes +=
		        (uint64_t)__atomic_load_n(&tc->lists[c].pub, __ATOMIC_RELAXED) * sc_size[c];
	return bytes;
}

uint64_t tcache_published(const struct arena *a)
{
	uint64_t bytes = 0;
	la_lock(&tc_list_lock);
	for (struct tcache *tc = tc_list; tc; tc = tc->next)
		if (tc->arena == a)
			bytes += published_bytes(tc);
	la_unlock(&tc_list_lock);
	return bytes;
}

/* malloc.c's free_large_keep when blocks must go out first, or s is declined (cache
 * entered). Not seen by TSan, as free_large_keep: the hint reads the arena's parked block
 * unlocked. */
LA_RACY_METADATA LA_NOINLINE bool tcache_free_large_slow(struct tcache *tc, struct span *s)
{
	int saved = errno; /* free keeps errno: malloc.c's free_large_mine saves it only
	                    * around the arena's free, not around the slot's hit */
	/* declined: s goes to the arena (parked, or to its heap with the throttle off), and
	 * the slot's blocks back to their heap, as the block parked before a parking free */
	bool decline =
	        ((uint64_t)s->npages << LA_PAGE_SHIFT) > large_base(tc) || !TUN(madvise_throttle);
	/* what a free that parks s gives back: the block parked before it, here the slot's
	 * (all when declined, else the oldest of its most plentiful page count, counted:
	 * large_run) and, taken, the arena's */
	uint32_t k;
	if (decline) {
		k = large_send_back(tc, 0, 0, 0, false);
	} else {
		if (!large_fits(tc, s))
			large_widen(tc, s);
		k = large_send_back(tc, large_slots_now(tc) - 1, s->npages, tc->large_max, true);
		if (!k && arena_parked_hint(tc->arena))
			arena_large_return(tc->arena, NULL, 0, false);
	}
	if (decline) {
		tcache_publish_large(tc);
		tc_leave(tc);
		errno = saved;
		return false;
	}
	large_keep(tc, s);
	tc_leave(tc);
	shm_note_retained();
	errno = saved;
	return true;
}

/* When the slot holds no block for the request (tcache_large_take): the arena's. */
LA_NOINLINE void *tcache_alloc_large_slow(struct tcache *tc, size_t size, size_t align, bool room)
{
	struct arena *a = tcache_arena(tc);
	if (unlikely(tc->state != TC_LIVE))
		return arena_alloc_large(a, size, align, room, NULL);
	if (unlikely(!tc_enter(tc))) {
		tc_leave(tc);
		return arena_alloc_large(a, size, align, room, NULL);
	}
	/* another page count: the blocks stay for theirs, but a request the arena may serve
	 * from the parked block in place gets one parked first (under the lock the
	 * allocation takes), as its free would have parked it: the shortest that holds it,
	 * else the newest (which may grow in place) */
	struct span *give = NULL;
	uint64_t want = la_align_up(size, LA_PAGE) >> LA_PAGE_SHIFT;
	/* (a miss one of the blocks the bound sent back would have served: the run widens; not
	 * a realloc's move, which frees each size once as it grows) */
	if ((room || !large_ghost_hit(tc, (uint32_t)want, (uint32_t)want / 4)) &&
	    tc->large_misses < UINT16_MAX)
		tc->large_misses++;
	if (tc->nlarge && want >= PARKED_SPLIT_PAGES) {
		if (want <= TC_LARGE_EXACT)
			give = large_exact_from(tc, (uint32_t)want, ~0ULL);
		if (!give)
			for (struct span *t = tc->large_long; t; t = t->next)
				if (t->npages >= want && (!give || t->npages < give->npages))
					give = t;
		if (!give)
			give = tc->large_newest;
		if (!give) /* (the newest was taken since): the longest */
			give = tc->large_long
			               ? tc->large_long
			               : tc->slots->large_bin[63 - __builtin_clzll(tc->large_mask)];
		large_unlink(tc, give);
	}
	void *p = arena_alloc_large(a, size, align, room, give);
	tcache_publish_large(tc);
	tc_leave(tc);
	return p;
}

void tcache_flush_large_all(void)
{
	uint64_t n = 0;
	la_lock(&tc_list_lock);
	for (struct tcache *tc = tc_list; tc; tc = tc->next)
		if (LA_TSAN || tc->nlarge) /* a peek, as in tcache_flush_all */
			flush_cache(tc, TC_LARGE_BIT, &n, FLUSH_PLAIN);
	la_unlock(&tc_list_lock);
}

/* Caches whose rows are left out of forked children (tc_list_lock): a bound, so that a
 * process of thousands of threads does not split its heaps' mappings into thousands of
 * pieces (vm.max_map_count); the caches past it are copied as before. */
#define TC_WIPED_MAX 64u
static uint32_t tc_wiped;

/* A cache's slot rows left out of a forked child (wipe), or copied again (tc_list_lock
 * held). A child never uses the rows of a thread other than the one that forked (their
 * caches are lost to it: tcache_fork_child), and every page of rows the fork copies is
 * write-protected in the parent: its thread's next free into that row page faults
 * (~16 us here, even once the child is gone), after every fork (the fork loop: 14.4
 * such faults a cycle, bench/README.md). MADV_WIPEONFORK makes the fork skip them: the
 * child reads zeros there, the parent keeps writing. The forking thread's own rows are
 * copied again first (tcache_fork_prepare); a thread's exit copies them again before
 * its rows go back to the arena as free pages. */
static void rows_for_fork(struct tcache *tc, bool wipe)
{
	struct tslots *t = tc->slots;
	if (!t || (wipe && !t->wiped && tc_wiped >= TC_WIPED_MAX))
		return;
	void *r[3] = {t, __atomic_load_n(&t->more, __ATOMIC_ACQUIRE),
	              __atomic_load_n(&t->wide, __ATOMIC_ACQUIRE)};
	size_t len[3] = {la_align_up(sizeof(struct tslots), LA_PAGE), TC_MORE_META, TC_WIDE_META};
	bool was = t->wiped != 0;
	for (unsigned k = 0; k < 3; k++) {
		uint8_t bit = (uint8_t)(1u << k);
		if (r[k] && !(t->wiped & bit) == wipe &&
		    os_wipe_on_fork(r[k], len[k], wipe, tc->arena->c) == 0)
			t->wiped ^= bit;
	}
	tc_wiped += (uint32_t)(t->wiped != 0) - (uint32_t)was;
}

void tcache_fork_prepare(void)
{
	/* the forking thread's large slot goes back to its arena, as its free would have
	 * parked it there: arena_lock_all gives the parked block back to its heap before the
	 * copy (a child's trim or decay pass would write its descriptors in pages it shares
	 * with this process). Other threads' slots are lost to a child with their caches. */
	struct tcache *self = &la_tcache;
	if (self->state == TC_LIVE && self->nlarge) {
		if (tc_enter(self))
			flush_large(self);
		tc_leave(self);
	}
	la_lock(&tc_list_lock);
	/* (where this thread's rows cannot be copied again — MADV_KEEPONFORK refused at
	 * vm.max_map_count — the child reads zeros there: its bins find no block and refill,
	 * the cached blocks are lost to it, as another thread's are, and stay counted cached) */
	for (struct tcache *tc = tc_list; tc; tc = tc->next)
		rows_for_fork(tc, tc != self);
}

void tcache_fork_parent(void)
{
	la_unlock(&tc_list_lock);
}

void tcache_fork_child(void)
{
	/* only the forking thread survives; the other caches' blocks are lost, as in glibc */
	la_lock_reinit(&tc_list_lock);
	struct tcache *self = &la_tcache;
	/* the other threads' caches are gone: their blocks stay allocated (lost, as in glibc),
	 * no longer cached, and their structures are no longer the allocator's */
	for (struct tcache *tc = tc_list; tc; tc = tc->next)
		if (tc != self)
			STAT_SUB(&shm_process_block()->c, metadata_bytes, sizeof(*tc));
	/* So each arena's cached_bytes is what this thread's cache published into it (the
	 * transfer caches were drained at the fork: arena_lock_all), set here. Not the
	 * prepare handler's figure less what the lost caches published: another thread's
	 * publish is an add to the gauge and a store of its cache's count, two steps, and the
	 * snapshot (shm_fork_snapshot) or the clone's copy of that cache's page can fall
	 * between them (a worker churning beside each fork: the gauge wrong in 7-11 of 300
	 * children, below zero in most; tests/unit/fork.c). */
	uint64_t mine = self->arena ? published_bytes(self) : 0;
	for (uint32_t i = 0; !LA_NO_STATS && i < arena_count; i++) {
		struct arena *a = &arenas[i];
		__atomic_store_n(&a->c->cached_bytes, a->xfer_bytes + (self->arena == a ? mine : 0),
		                 __ATOMIC_RELAXED);
	}
	tc_list = NULL;
	tc_wiped = 0; /* (the forking thread's rows were copied: tcache_fork_prepare) */
	if (self->state == TC_LIVE) {
		self->next = self->prev = NULL;
		self->busy = self->steal = 0;
		route_fast_paths(self, true, __ATOMIC_RELAXED);
		tc_list = self;
	}
	/* membarrier's registration is the address space's: fork copies it (only exec clears
	 * it), so the child does not register again (one system call a forked child) */
}
