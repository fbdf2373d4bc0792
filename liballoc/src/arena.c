/* arena.c — small spans and blocks, large blocks, remote-free draining, idle heap release,
 * the madvise throttle's decisions and trims. Locking: every function that touches an
 * arena's spans or heaps holds its lock; the remote queue and ring are the only ways
 * another thread gives memory back without that lock. */
#include "arena.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "control.h"
#include "os.h"
#include "pressure.h"
#include "shm.h"
#include "tcache.h"
#include "tunables.h"

/* TSan cannot model liburcu's queue (volatile accesses and its own fences), so TSan
 * builds hand remote frees over under the owner's lock instead: everything else is then
 * checked with exact happens-before. Counters stay as in the real build. */
#if defined(__SANITIZE_THREAD__)
#define LA_REMOTE_LOCKED 1
#else
#define LA_REMOTE_LOCKED 0
#endif

/* Are remote frees waiting for a's drain (its queue or its ring)? */
LA_INLINE bool ring_pending(struct arena *a)
{
	return __atomic_load_n(&a->rr, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&a->rr_head, __ATOMIC_ACQUIRE) !=
	               __atomic_load_n(&a->rr_tail, __ATOMIC_RELAXED);
}

/* After a hand-over to a (the queue or the ring): its next refill drains. */
LA_INLINE void remote_note(struct arena *a)
{
	if (!__atomic_load_n(&a->rq_pending, __ATOMIC_RELAXED))
		__atomic_store_n(&a->rq_pending, 1, __ATOMIC_RELEASE);
}

LA_START_BSS(1) struct arena arenas[LA_ARENAS_MAX];
uint32_t arena_count;
static struct la_lock arenas_lock = LA_LOCK_INIT; /* attaching threads, creating arenas */

static void arena_init(struct arena *a, uint32_t i)
{
	STAT_ADD(&shm_process_block()->c, metadata_bytes, sizeof(*a));
	a->index = i;
	a->pub = shm_arena_block(i);
	a->c = &a->pub->c;
	a->cs = shm_arena_classes(i);
	a->pub->index = i;
	a->burst.c = a->c;
	__cds_wfcq_init(&a->rq_head, &a->rq_tail);
}

void arena_boot(void)
{
	arena_init(&arenas[0], 0);
	__atomic_store_n(&arena_count, 1, __ATOMIC_RELEASE);
	shm_set_arena_count(1);
}

/* The published count of threads attached to a (arenas_lock held: threads sharing an
 * arena attach and leave at once; the segment's readers load it without a lock). */
static void publish_threads(struct arena *a, uint32_t n)
{
	__atomic_store_n(&a->pub->threads, n, __ATOMIC_RELAXED);
}

static uint32_t others_work(const struct arena *a, bool *any);

/* Does a, an arena no thread uses, still have ARENA_HELD_PAGES pages of its heaps in use:
 * blocks of the threads that left, which others hold (read without a's lock: a guess that
 * only orders arena_attach's choices). */
LA_RACY_METADATA static bool arena_held(const struct arena *a)
{
	return __atomic_load_n(&a->burst.used, __ATOMIC_RELAXED) >= ARENA_HELD_PAGES;
}

LA_RACY_METADATA bool arena_some_held(void)
{
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&arenas[i].threads, __ATOMIC_RELAXED) == 0 &&
		    arena_held(&arenas[i]))
			return true;
	return false;
}

struct arena *arena_attach(struct arena *hint)
{
	la_lock(&arenas_lock);
	uint32_t n = arena_count, best = 0;
	uint32_t max = (uint32_t)TUN(arena_max);
	struct arena *a = NULL, *held = NULL;
	bool live_hint = hint && __atomic_load_n(&hint->threads, __ATOMIC_RELAXED) != 0;
	/* a thread whose first call frees a block of an arena no thread uses takes that one:
	 * it goes on with the blocks of the thread that left (a connection handed over) */
	if (hint && !live_hint)
		a = hint;
	/* else an arena no thread uses (a thread exited) is reused first; a thread whose first
	 * call frees a block of an arena in use passes over those that still hold blocks of
	 * the threads that left, which their successors will free (below) */
	for (uint32_t i = 0; !a && i < n; i++)
		if (__atomic_load_n(&arenas[i].threads, __ATOMIC_RELAXED) == 0) {
			if (!live_hint || !arena_held(&arenas[i]))
				a = &arenas[i];
			else if (!held)
				held = &arenas[i];
		}
	/* it joins the arena of that block instead while one thread at most uses it (a main
	 * thread that waits for its workers): a successor that took the arena of another's
	 * blocks would hand all of them, and its own to come, to the other's arena and back */
	if (!a && held)
		a = __atomic_load_n(&hint->threads, __ATOMIC_RELAXED) <= 1 ? hint : held;
	if (!a && n < max && n < LA_ARENAS_MAX) {
		a = &arenas[n];
		arena_init(a, n);
		__atomic_store_n(&arena_count, n + 1, __ATOMIC_RELEASE);
		shm_set_arena_count(n + 1);
	}
	if (!a) {
		for (uint32_t i = 1; i < n; i++)
			if (arenas[i].threads < arenas[best].threads)
				best = i;
		a = &arenas[best];
	}
	publish_threads(a, __atomic_add_fetch(&a->threads, 1, __ATOMIC_RELAXED));
	bool any;
	__atomic_store_n(&a->others_seen, others_work(a, &any), __ATOMIC_RELAXED);
	la_unlock(&arenas_lock);
	return a;
}

static void xfer_drain(struct arena *a);
static void free_meta_locked(struct arena *a, void *p, uint64_t counted);
static bool ring_put(struct arena *owner, void *const *blocks, uint32_t n, uintptr_t tag);

void arena_detach(struct arena *a)
{
	/* The leaving thread's cache went into the transfer cache: its blocks go back to
	 * their spans now, whether threads remain or not. Kept, they would pin the spans the
	 * thread emptied while the arena's remaining threads (an idle main thread, a pool
	 * sharing the arena) may never refill those classes; the spans' pages then serve the
	 * next span of any class. Without threads the slots go back to the heap too (an
	 * arena without threads keeps nothing that pins a heap; the next flush of a thread
	 * that attaches makes new slots). */
	la_lock(&arenas_lock); /* the count and its published copy change together */
	publish_threads(a, __atomic_sub_fetch(&a->threads, 1, __ATOMIC_RELAXED));
	la_unlock(&arenas_lock);
	arena_lock(a);
	struct xfer_slots *x = a->xfer;
	if (x && a->xfer_bytes)
		xfer_drain(a);
	if (x && __atomic_load_n(&a->threads, __ATOMIC_RELAXED) == 0) {
		__atomic_store_n(&a->xfer, NULL, __ATOMIC_RELAXED);
		free_meta_locked(a, x, xfer_meta_bytes(a->xfer_pages));
		a->xfer_chunks = 0;
		a->xfer_pages = 0;
		a->xfer_over = 0; /* the next slots earn their depth anew */
		__atomic_store_n(&a->xfer_past, 0, __ATOMIC_RELAXED);
		a->xfer_earned = a->xfer_misses = 0;
	}
	arena_unlock(a);
	/* The frees the leaving thread handed to other arenas' rings and queues (blocks it
	 * borrowed from them, or that their threads allocated), and those waiting in its own,
	 * go back to their spans now too: they count in use until drained, and the owners'
	 * next refill may never come (an idle main thread; without the decay pass, decay_ms
	 * 0, nothing else drains them). So a process whose workers have ended holds no
	 * waiting frees, and reclaimable says what flush + release + trim give back. */
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++) {
		struct arena *o = &arenas[i];
		if (!remote_pending(o))
			continue;
		arena_lock(o);
		arena_drain(o);
		/* the drain put small blocks into the transfer cache (cached, pinning their
		 * spans): they go back to their spans too, as the leaver's own did above */
		if (o->xfer && o->xfer_bytes)
			xfer_drain(o);
		arena_unlock(o);
	}
}

/* ---- pages ------------------------------------------------------------------------ */

static void release_heap(struct arena *a, struct heap *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		a->heaps = h->next;
	if (h->next)
		h->next->prev = h->prev;
	a->nheaps--;
	STAT_SUB_LOCKED(a->c, heaps, 1);
	STAT_ADD_LOCKED(a->c, heaps_released, 1);
	heap_destroy(h);
}

/* Does the arena hold another heap of h's kind (large blocks or not)? An idle heap goes
 * at a free, a trim or a burst's end only then: the last of each kind stays for the next
 * span of its kind (a heap of large blocks emptied by a free was unmapped and mapped again
 * at the next malloc of its size: a munmap a cycle of a loop that empties it). */
static bool heap_has_sibling(const struct arena *a, const struct heap *h)
{
	for (const struct heap *x = a->heaps; x; x = x->next)
		if (x != h && x->large == h->large)
			return true;
	return false;
}

/* Map a heap for the arena, first in its list (the newest); a heap of large blocks right
 * after the newest small heap, which stays first (maybe_release_span's h == a->heaps). */
static struct heap *new_heap(struct arena *a, bool large)
{
	struct heap *h = heap_create(a, a->index, a->c);
	if (!h)
		return NULL;
	if (large && a->large_released)
		a->large_remapped = 1; /* (give_back_heap) */
	if (large)
		heap_make_large(h, a->index);
	h->watch = &a->burst;
	h->arena_dirty = &a->dirty_pages; /* (a new heap holds no dirty page) */
	h->arena_used = &a->used_pages;   /* (nor used one) */
	struct heap *after = large && a->heaps && !a->heaps->large ? a->heaps : NULL;
	h->prev = after;
	h->next = after ? after->next : a->heaps;
	if (h->next)
		h->next->prev = h;
	if (after)
		after->next = h;
	else
		a->heaps = h;
	a->nheaps++;
	STAT_ADD_LOCKED(a->c, heaps, 1);
	return h;
}

/* The first of the arena's heaps (newest first, or oldest first) with a free span of n
 * pages (dirty_only: one holding resident free pages; room: see heap_alloc_pages). */
static struct span *from_heaps(struct arena *a, uint32_t n, uint32_t grid, bool oldest_first,
                               bool dirty_only, bool room, bool large, struct heap **hp,
                               uint32_t *dirty)
{
	struct heap *first = a->heaps;
	while (oldest_first && first && first->next)
		first = first->next;
	for (struct heap *h = first; h; h = oldest_first ? h->prev : h->next) {
		if (h->large != large)
			continue;
		struct span *s = heap_alloc_pages(h, n, grid, dirty_only, room, dirty);
		if (s) {
			*hp = h;
			return s;
		}
	}
	return NULL;
}

LA_INLINE void unpark(struct arena *a);

/* from_heaps' resident free pages: in heaps of the request's kind first; a small span then
 * takes those of a heap of large blocks that grows (heap_growing: its resident free pages
 * are the ones its growth passes by or populated ahead, growshrink's regrowth, which small
 * spans faulted in anew without them: 8 1 64, 230 faults a cycle for 80), never those of a
 * steady one: they are the holes its own blocks come back to, and a small span there splits
 * the run they need (medsizes 100 3000000 131072: peak 12.3 -> 18.9 MiB). */
LA_INLINE struct span *resident_from_heaps(struct arena *a, uint32_t n, uint32_t grid, bool large,
                                           struct heap **hp, uint32_t *dirty)
{
	struct span *s = from_heaps(a, n, grid, false, true, false, large, hp, dirty);
	if (s || (large && !a->burst.prepared) || a->large_heap_wait < LARGE_HEAP_AFTER)
		return s; /* (no heap of large blocks before LARGE_HEAP_AFTER) */
	/* the pages prepared for a predicted burst are in small heaps (burst_prepare_chunk:
	 * the prediction counts pages, not kinds): its large blocks take them too (else
	 * tests/policy/burst.bats' bursts of 1-64 KiB blocks faulted 6,300 of 8,600 pages in) */
	if (large)
		return from_heaps(a, n, grid, false, true, false, false, hp, dirty);
	for (struct heap *h = a->heaps; h; h = h->next) {
		if (!h->large || !heap_growing(h))
			continue;
		s = heap_alloc_pages(h, n, grid, true, false, dirty);
		if (s) {
			*hp = h;
			return s;
		}
	}
	return NULL;
}

/* n pages from a heap of the arena of the request's kind (large: a heap of large blocks,
 * arena_alloc_large), mapping a new heap if none has room; *dirty receives how many of
 * them may already be resident. Resident free pages come first (resident_from_heaps): the
 * newest heap's untouched pages must not be faulted in while an older heap holds resident
 * free ones. Then any room, heaps tried newest first, or oldest first for
 * metadata (slot rows, the transfer cache), which lives as long as its thread or arena: in
 * the heap the arena keeps longest it pins no newer heap that may empty and be released
 * (metadata skips the resident-first look for the same reason). A small span (small) takes
 * the parked large block's pages when no heap has resident free pages for it: kept for the
 * next block of its size, they would stay resident and free while new ones are faulted in
 * (the teardown of a structure empties spans into a run that a large request takes,
 * parked at its free). A large request leaves the parked block alone here: it has taken
 * it already where it can (arena_alloc_large, PARKED_SPLIT_PAGES). room: pages not
 * resident come, in a heap with fewer free resident pages than n, from the start of its
 * largest free span (heap_alloc_pages). */
static void release_batch_kept(struct arena *a);
static bool arena_dirty_at_least(struct arena *a, uint64_t pages);
static struct span *alloc_pages(struct arena *a, uint32_t n, uint32_t grid, bool oldest_first,
                                bool small, bool room, bool large, struct heap **hp,
                                uint32_t *dirty)
{
	if (n > heap_data_pages())
		return NULL;
	if (unlikely(a->batch_kept))
		release_batch_kept(a);
	for (int pass = 0; pass < 2; pass++) {
		struct span *s =
		        oldest_first ? NULL : resident_from_heaps(a, n, grid, large, hp, dirty);
		if (!s && small && a->parked) {
			/* the parked large block's pages are resident and free too: a small
			 * span takes them before new pages are faulted in (in a heap of large
			 * blocks too: the block they held is gone, which no steady heap's hole
			 * is; unless the heap went with them) */
			const struct heap *ph = heap_of(a->parked);
			unpark(a);
			s = resident_from_heaps(a, n, grid, large, hp, dirty);
			for (struct heap *h = a->heaps; h && !s; h = h->next)
				if (h == ph && h->large &&
				    (s = heap_alloc_pages(h, n, grid, true, false, dirty)))
					*hp = h;
		}
		if (!s)
			s = from_heaps(a, n, grid, oldest_first, false, room, large, hp, dirty);
		if (s)
			return s;
		/* no heap has room: blocks waiting in the transfer cache may free whole spans */
		if (!a->xfer_bytes)
			break;
		xfer_drain(a);
	}
	/* a block for a heap of large blocks that no such heap has room for does not map a
	 * new one (its header, and fresh pages for the block) while the arena's other heaps
	 * hold HEAP_HOLES_PAGES free pages that may be resident: a resident run of n among
	 * them serves it (CPython's quick slice: a heap of large blocks mapped after a
	 * teardown held 312-332 KiB at the peak, the main heap 2-5 MiB free and resident) */
	if (large && arena_dirty_at_least(a, HEAP_HOLES_PAGES)) {
		struct span *s = from_heaps(a, n, grid, false, true, false, false, hp, dirty);
		if (s)
			return s;
	}
	struct heap *h = new_heap(a, large);
	if (!h)
		return NULL;
	*hp = h;
	return heap_alloc_pages(h, n, grid, false, room, dirty);
}

/* The throttle with a decay pass (NEARLY_EMPTY: heap.h): a refault is remembered for this
 * many periods, a breath (heap_breathing) for this many. */
#define REFAULT_MEMORY 8u
#define BREATH_MEMORY  2u

/* The work of the arenas other than a that have threads (their work counts, plus one each
 * so that an arena a thread attached to counts as a change); *any: some has threads. */
static uint32_t others_work(const struct arena *a, bool *any)
{
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE), sum = 0;
	*any = false;
	for (uint32_t i = 0; i < n; i++)
		if (&arenas[i] != a && __atomic_load_n(&arenas[i].threads, __ATOMIC_RELAXED)) {
			sum += __atomic_load_n(&arenas[i].work, __ATOMIC_RELAXED) + 1u;
			*any = true;
		}
	return sum;
}

/* Whether another arena is in use: its threads refilled from it, flushed to it or took a
 * large block from it since a last looked, or since a thread attached to a (lock held). An
 * arena whose threads only wait (a main thread in pthread_join while its workers run in
 * arenas of their own) neither grows nor gives back: its use does not make a's purge
 * worth its refaults. */
static bool other_arenas_active(struct arena *a)
{
	bool any;
	uint32_t now = others_work(a, &any);
	uint32_t seen = __atomic_exchange_n(&a->others_seen, now, __ATOMIC_RELAXED);
	return any && now != seen;
}

static bool give_back_heap(struct arena *a, struct heap *h, bool wait);

/* After pages went back to heap h: idle heap release and the madvise throttle. */
static void after_free_pages(struct arena *a, struct heap *h)
{
	/* pages populated for a predicted burst wait for it (a heap of them holds no block):
	 * the control thread gives them back if it does not come (arena_burst_tick) */
	if (a->burst.holding && !a->burst.active) {
		STAT_ADD_LOCKED(a->c, madvise_deferred, 1);
		return;
	}
	/* a predicted burst came: its frees leave the returns below to the control thread
	 * (burst_defer_give_back), system time on the program's thread inside its burst
	 * otherwise (a 1 GiB burst: hundreds of madvise and several munmap) */
	if (a->burst.defer) {
		STAT_ADD_LOCKED(a->c, madvise_deferred, 1);
		return;
	}
	give_back_heap(a, h, true);
}

/* after_free_pages' returns for heap h (lock held): true when pages went back. wait: a free
 * left the heap (the control thread's look at it does not wait again). */
static bool give_back_heap(struct arena *a, struct heap *h, bool wait)
{
	if (h->used_pages == 0 && heap_has_sibling(a, h) && TUN(idle_heap_release)) {
		if (!h->large || !wait) {
			release_heap(a, h);
			return true;
		}
		if (!control_decays()) {
			/* without a decay pass a heap of large blocks a free empties goes at
			 * once, until the arena maps one again after that (new_heap): then
			 * its large blocks come and go in rounds, and such a heap stays, its
			 * pages left to the throttle below like any heap's (medsizes' BATCH
			 * shape at 4,000 slots, ~96 MiB of blocks a round: a second heap
			 * emptied and unmapped at each round's end, mapped and faulted in
			 * again at the next one's start) */
			if (!a->large_remapped) {
				a->large_released = 1;
				release_heap(a, h);
				return true;
			}
			goto throttle;
		}
		/* a heap of large blocks a free emptied waits EMPTY_WAIT_NS for the control
		 * thread, which releases it if it is still idle then: a heap that the top of a
		 * load needs and its bottom empties (growshrink 8 1 64: a second heap of large
		 * blocks at each cycle's top) was unmapped at every bottom and mapped and faulted
		 * in again at the next top */
		h->purge_due = 1;
		if (!a->empty_due_ns) {
			uint64_t due = os_now_ns() + EMPTY_WAIT_NS;
			__atomic_store_n(&a->empty_due_ns, due, __ATOMIC_RELAXED);
			shm_kick_control(due);
		}
		return false;
	}
throttle:
	shm_note_retained(); /* the decay pass returns what stays retained */
	uint64_t dirty = (uint64_t)h->dirty_pages << LA_PAGE_SHIFT;
	uint64_t trim = (uint64_t)TUN(trim_threshold);
	if (dirty <= trim)
		return false;
	uint32_t keep = (uint32_t)((uint64_t)TUN(top_pad) >> LA_PAGE_SHIFT);
	if (TUN(madvise_throttle) && control_decays()) {
		/* The decay pass returns free pages once they stay free for decay_ms: in
		 * general none goes back here, where the heap's next growth would fault it in
		 * again. But a heap the program left nearly empty (16 times more free resident
		 * pages than pages in use: a load that dropped, not a heap that breathes) gives
		 * them back now, in batches of at least the mmap threshold, unless it grew back
		 * into pages returned that way within the last 8 periods, or it breathes (grew
		 * back from a quarter of its peak within the last 2 periods: its bottom is a
		 * trough) and no other arena is in use: only its own next growth can take the
		 * pages then, and it would fault them in again. With other arenas in use their
		 * growth takes what goes back (the process's peak is what the arenas hold at
		 * once, not the sum of each one's peak). (Keeping only what the growth back to
		 * the top takes does not work with heap_purge: largest spans first, the excess
		 * goes with the one large free run.) The decay pass still returns what stays
		 * free for decay_ms. With no other arena in use, the purge of a heap a free
		 * left nearly empty waits EMPTY_WAIT_NS for the control thread, and is off if
		 * the heap grows back out of nearly empty meanwhile (heap.c take_pages: then
		 * it counts as a refault); with other arenas in use their growth takes what
		 * goes back, at once. "In use" is an arena whose threads refilled, flushed or took a large
		 * block since the last look (other_arenas_active): an idle main thread waiting
		 * for its workers does not count, where the purge at the end of each of their rounds made the
		 * next round fault the pages in again (sizemix 1 1200: 6,744 faults, 3,745 with
		 * the arenas shared). */
		uint64_t batch = LA_MAX(trim, (uint64_t)TUN(mmap_threshold));
		uint32_t since = __atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) - h->refault_epoch;
		if ((uint64_t)h->dirty_pages < (uint64_t)NEARLY_EMPTY * h->used_pages ||
		    dirty < batch + ((uint64_t)keep << LA_PAGE_SHIFT) ||
		    (h->refaulted && since < REFAULT_MEMORY * HEAP_PERIOD)) {
			STAT_ADD_LOCKED(a->c, madvise_deferred, 1);
			return false;
		}
		bool others = other_arenas_active(a); /* (one look: it moves the mark) */
		if (heap_breathing(h, BREATH_MEMORY * HEAP_PERIOD) && !others) {
			STAT_ADD_LOCKED(a->c, madvise_deferred, 1);
			return false;
		}
		if (wait && !others) {
			h->purge_due = 1;
			if (!a->empty_due_ns) {
				/* (atomic: arena_empty_tick looks before it locks) */
				uint64_t due = os_now_ns() + EMPTY_WAIT_NS;
				__atomic_store_n(&a->empty_due_ns, due, __ATOMIC_RELAXED);
				/* it sleeps until the next deadline it knows */
				shm_kick_control(due);
			}
			STAT_ADD_LOCKED(a->c, madvise_deferred, 1);
			return false;
		}
	} else if (TUN(madvise_throttle)) {
		/* no decay pass (LIBALLOC_CONTROL=0, decay_ms=0): the heap's trend decides */
		/* steady or growing: keep the pages for reuse; shrinking: return them in
		 * batches of at least the mmap threshold */
		/* a batch is at least the mmap threshold, and at least a quarter of what the
		 * heap still holds: a heap that shrinks in bursts and regrows is not made to
		 * fault its pages back in after every burst */
		uint64_t batch = LA_MAX(trim, (uint64_t)TUN(mmap_threshold));
		batch = LA_MAX(batch, ((uint64_t)h->used_pages << LA_PAGE_SHIFT) / 4);
		batch <<= h->purge_shift;
		/* an empty heap of large blocks (one give_back_heap keeps mapped, large_remapped,
		 * or the arena's only one) is at its bottom whatever its rates say: its batches
		 * go back, and purge_shift's back-off bounds what the next round faults in again */
		bool bottom = h->large && h->used_pages == 0;
		if ((!bottom && !heap_shrinking(h)) ||
		    dirty < batch + ((uint64_t)keep << LA_PAGE_SHIFT)) {
			STAT_ADD_LOCKED(a->c, madvise_deferred, 1);
			return false;
		}
	}
	uint32_t n = heap_purge(h, keep);
	h->purged_recently = TUN(madvise_throttle) != 0;
	return n != 0;
}

static void free_pages(struct arena *a, struct heap *h, struct span *s)
{
	heap_free_pages(h, s);
	after_free_pages(a, h);
}

/* Spans that hold no live block but stay in their heap: the parked large block and empty
 * small spans (SPAN_PARKED, or SPAN_SMALL with used == 0). Their resident pages (their set
 * `resident` bits) are free resident memory that release and trim return, and a heap
 * holding nothing else is as good as idle (release unmaps it). */
/* on_partial of an empty small span kept (spare_add): still on its class's partial list */
#define PARTIAL_EMPTY 2

LA_INLINE void spare_add(struct arena *a, struct heap *h, struct span *s, uint32_t resident)
{
	h->spare_pages += s->npages;
	if (s->kind == SPAN_SMALL) {
		a->nempty[s->cls]++;
		s->on_partial = PARTIAL_EMPTY;
	}
	STAT_ADD_LOCKED(a->c, free_resident_bytes, (uint64_t)resident << LA_PAGE_SHIFT);
	heap_idle_update(h);
}

LA_INLINE void spare_sub(struct arena *a, struct heap *h, struct span *s, uint32_t resident)
{
	h->spare_pages -= s->npages;
	if (s->kind == SPAN_SMALL) {
		a->nempty[s->cls]--;
		s->on_partial = 1;
	}
	STAT_SUB_LOCKED(a->c, free_resident_bytes, (uint64_t)resident << LA_PAGE_SHIFT);
	heap_idle_update(h);
}

static uint32_t span_resident(struct heap *h, struct span *s)
{
	return heap_resident_in(h, s->first, s->npages);
}

/* ---- small spans --------------------------------------------------------------------- */

static void partial_push(struct arena *a, struct span *s)
{
	s->prev = NULL;
	s->next = a->partial[s->cls];
	if (s->next)
		s->next->prev = s;
	a->partial[s->cls] = s;
	a->npartial[s->cls]++;
	s->on_partial = 1;
}

static void partial_remove(struct arena *a, struct span *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		a->partial[s->cls] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	a->npartial[s->cls]--;
	s->on_partial = 0;
	s->next = s->prev = NULL;
}

LA_INLINE struct span *new_small_span(struct arena *a, unsigned cls)
{
	struct heap *h;
	uint32_t dirty;
	struct span *s =
	        alloc_pages(a, sc_pages[cls], sc_grid(cls), false, true, false, false, &h, &dirty);
	if (!s)
		return NULL;
	s->kind = SPAN_SMALL;
	s->cls = (uint8_t)cls;
	/* pages some other span used and gave back: carving them touches no new memory */
	s->warm = dirty == sc_pages[cls];
	s->used = 0;
	s->bump = 0;
	s->free = NULL;
	s->offset = 0;
	heap_map_span(h, s, true);
	partial_push(a, s);
	a->nspans[cls]++;
	STAT_ADD_LOCKED(&a->cs[cls], spans, 1);
	return s;
}

static void unmake_span(struct arena *a, struct heap *h, struct span *s);

/* Empty spans kept for their class (maybe_release_span) beyond the only one: for the
 * classes above KEEP_EMPTY_FROM (spans of 4-8 blocks of 9-32 KiB, that empty every few
 * frees while the class is in steady use), one per KEEP_EMPTY_RATIO spans of the class in
 * use, at most KEEP_EMPTY_MAX. Unmade, such a span's pages went to the next span or large
 * block wherever it fitted, and the class's next span started elsewhere: its blocks'
 * first pages (all a program that writes a header of its blocks touches) fell on pages
 * not touched before, until every page of the heap's extent was resident (bench
 * medsizes 1000 1000000 65536: 5.07k -> 4.01k faults, peak 23.5 -> 19.2 MB; 3000000
 * ops 35.8 -> 27.1 MB, one per 8 spans 29.3). Kept, the class's next refill takes its
 * blocks at the pages they had. One per 4 spans kept made sizes-sweep peak 9.0 -> 9.5 MB
 * (its batches empty every span of a class: the kept ones go back one a free as the
 * class's spans in use fall, but later than unmade); the
 * classes up to 8 KiB (spans of 8-15 blocks and more) gain little (churn-1t-100k +3 %
 * peak when they kept too). */
#define KEEP_EMPTY_FROM  8192u
#define KEEP_EMPTY_RATIO 5u
#define KEEP_EMPTY_MAX   8u

/* An empty span (spare from now on) goes back to its heap unless it is the only one left
 * for its class in the arena's newest heap (kept to avoid remapping a span per block), or
 * one of those kept for its class in use (KEEP_EMPTY_FROM, same heap); any other empty
 * span must go, or it would pin an otherwise idle heap. True when it went back (and its
 * heap, released with it, may be gone); then also one of the kept ones in its heap when
 * the class's spans in use fell below what they keep. One that goes back at once is never
 * counted spare (its resident pages are not counted twice: a span of 4 blocks of 20-32
 * KiB empties every 4 frees of a sweep). */
static void release_span(struct arena *a, struct heap *h, struct span *s);

/* The classes above KEEP_BATCH_FROM (17-32 KiB: spans of 4 blocks) keep every span that
 * empties in the arena's newest heap (maybe_release_span, keep_batches) until the next
 * span or large block takes pages (alloc_pages, which first sends them back down to what
 * the rules above keep), a trim, the decay pass or the class's cold-bin sweep: the next
 * batch of the class (sizes-sweep: each of those classes takes two sizes in a row) takes
 * its blocks from the spans the last one emptied instead of a span unmade and made again
 * per 4 blocks (`sizes sweep 10`: 11,088 -> 8,649 spans made, 43.42M -> 41.39M
 * instructions). Held only while nothing else takes pages, they cost no peak: any new
 * span or large block gets their pages back first. KEEP_BATCH_WALK bounds the walk of the
 * class's partial list at such a release; the rest go at the next one. */
#define KEEP_BATCH_FROM SC_QUARTERS_FROM
#define KEEP_BATCH_WALK 256u

/* Only while the decay pass runs: without it, a heap that shrinks gives its free pages
 * back at once (give_back_heap), and kept spans would not be among them. (Another arena's
 * growth takes neither those spans nor, but through a lender, the free pages they would
 * have gone back to.) Nor around a predicted burst (the arena holds pages prepared for it,
 * or its frees leave the give-back to the control thread, burst_defer_give_back): its
 * spans take the prepared pages, and what it frees goes back when it is over. */
LA_INLINE bool keep_batches(const struct arena *a)
{
	return control_decays() && !a->burst.holding && !a->burst.defer;
}

static LA_NOINLINE void release_batch_kept(struct arena *a)
{
	uint64_t mask = a->batch_kept;
	a->batch_kept = 0;
	for (; mask; mask &= mask - 1) {
		unsigned c = (unsigned)__builtin_ctzll(mask);
		uint32_t in_use = a->nspans[c] - a->nempty[c];
		uint32_t allowed = LA_MAX(1u, LA_MIN(KEEP_EMPTY_MAX, in_use / KEEP_EMPTY_RATIO));
		unsigned steps = 0;
		for (struct span *t = a->partial[c], *next; t && a->nempty[c] > allowed; t = next) {
			next = t->next;
			if (++steps > KEEP_BATCH_WALK) {
				a->batch_kept |= (uint64_t)1 << c; /* the rest at the next one */
				break;
			}
			if (t->on_partial == PARTIAL_EMPTY)
				release_span(a, heap_of(t), t);
		}
	}
}

static bool maybe_release_span(struct arena *a, struct heap *h, struct span *s)
{
	unsigned c = s->cls;
	if (h == a->heaps && a->partial[c] == s && !s->next) {
		spare_add(a, h, s, span_resident(h, s));
		return false;
	}
	if (sc_size[c] > KEEP_BATCH_FROM && h == a->heaps && keep_batches(a)) {
		spare_add(a, h, s, span_resident(h, s));
		a->batch_kept |= (uint64_t)1 << c;
		return false;
	}
	if (sc_size[c] > KEEP_EMPTY_FROM) {
		uint32_t in_use = a->nspans[c] - a->nempty[c] - 1; /* s aside */
		uint32_t allowed = LA_MIN(KEEP_EMPTY_MAX, in_use / KEEP_EMPTY_RATIO);
		if (h == a->heaps && a->nempty[c] < allowed) {
			spare_add(a, h, s, span_resident(h, s));
			return false;
		}
		/* (the span the first rule keeps stays, as before: not below one) */
		if (a->nempty[c] > LA_MAX(allowed, 1u)) {
			unsigned steps = 0;
			for (struct span *t = a->partial[c]; t && steps < 64; t = t->next, steps++)
				if (t->on_partial == PARTIAL_EMPTY && t != s && heap_of(t) == h) {
					release_span(a, h, t); /* s keeps h in use */
					break;
				}
		}
	}
	unmake_span(a, h, s);
	return true;
}

/* An empty (spare) small span goes back to its heap. */
static void release_span(struct arena *a, struct heap *h, struct span *s)
{
	spare_sub(a, h, s, span_resident(h, s));
	unmake_span(a, h, s);
}

/* An empty small span, not counted spare, goes back to its heap. */
static void unmake_span(struct arena *a, struct heap *h, struct span *s)
{
	unsigned cls = s->cls;
	partial_remove(a, s);
	a->nspans[cls]--;
	STAT_SUB_LOCKED(&a->cs[cls], spans, 1);
	heap_unmap_small(h, s);
	s->kind = SPAN_LARGE; /* heap_free_pages takes any in-use span */
	free_pages(a, h, s);
}

/* A thread cache's class went cold (arena_free_blocks, cold): the empty span kept for the
 * class (maybe_release_span) goes back to its heap too. Lock held. */
static void release_spare(struct arena *a, unsigned cls)
{
	struct span *s = a->partial[cls];
	if (s && s->used == 0 && !s->next) {
		release_span(a, heap_of(s), s); /* descriptors live in their heap */
		return;
	}
	for (struct span *next; s && a->nempty[cls]; s = next) {
		next = s->next;
		if (s->on_partial == PARTIAL_EMPTY)
			release_span(a, heap_of(s), s);
	}
}

/* The next block after free block p on its list (link_decode of its link): on x86-64 a
 * copy, a shift and an xor from memory. gcc 12 kept the link and the shifted address in
 * registers of their own, for the test of the list's end that follows (link == address >>
 * 12), three register moves a block more. */
LA_INLINE uintptr_t link_next(uintptr_t p)
{
#if defined(__x86_64__)
	uintptr_t n = p;
	__asm__("shrq $12, %0\n\txorq %1, %0" : "+&r"(n) : "m"(*(const uintptr_t *)p) : "cc");
	return n;
#else
	return (uintptr_t)link_decode(*(void **)p, (void *)p);
#endif
}

LA_COLD static void corrupt_span_list(void)
{
	la_fatal("malloc()", "corrupted free list detected");
}

/* A link's offset in its span out of it or not on a block start (span_pop_many) */
LA_INLINE bool pop_link_bad(uintptr_t off, uintptr_t bytes, uint32_t recip)
{
	return off >= bytes || !sc_divides((uint32_t)off, recip);
}

/* Pop up to k freed blocks from a span into out[0..] in list order (lock held); returns
 * how many (0: it has none). Each link must name a block start of the same span
 * (sc_divisible is exact over a span: sizeclass.h). The list head, the span's range and the
 * class's reciprocal stay in registers: a block costs its link's load, decode and checks
 * and its store (the span's fields are written once). */
static inline uint32_t span_pop_many(struct heap *h, struct span *s, void **out, uint32_t k)
{
	uintptr_t p = (uintptr_t)s->free;
	if (!p)
		return 0;
	uintptr_t nbase = 0 - (uintptr_t)span_base(h, s);
	/* opaque: an addition (lea) for the offset, where gcc 12 made it a copy and a
	 * subtraction */
	__asm__("" : "+r"(nbase));
	const uintptr_t bytes = (uintptr_t)s->npages << LA_PAGE_SHIFT;
	const uint32_t recip = sc_recip[s->cls];
	/* the next link out of the span, or not on a block start: the list ends there (NULL
	 * fails the range check too: no test of its own), or it is corrupt */
#define POP_BAD(p) unlikely(pop_link_bad((p) + nbase, bytes, recip))
	void **o = out, **end = out + k; /* no count kept: got is o - out at the end */
	if (k & 1) {
		*o++ = (void *)p;
		p = link_next(p);
		if (POP_BAD(p))
			goto ended;
	}
	/* two blocks a step: the loop's test and index once for both */
	while (o < end) {
		o[0] = (void *)p;
		p = link_next(p);
		if (POP_BAD(p)) {
			o++;
			goto ended;
		}
		o[1] = (void *)p;
		p = link_next(p);
		o += 2;
		if (POP_BAD(p))
			goto ended;
	}
	goto done;
#undef POP_BAD
ended:
	if (p)
		corrupt_span_list();
done:;
	uint32_t got = (uint32_t)(o - out);
	s->free = (void *)p;
	s->used = (uint16_t)(s->used + got);
	return got;
}

/* Carve up to k never-used blocks from a span into out[0..], the lowest address last
 * (handed out first); returns how many (lock held). */
static inline uint32_t span_carve(struct heap *h, struct span *s, void **out, uint32_t k)
{
	uint32_t left = sc_blocks[s->cls] - s->bump;
	k = LA_MIN(k, left);
	size_t size = sc_size[s->cls];
	carve_run(out, (uintptr_t)span_base(h, s) + (size_t)s->bump * size, size, k);
	s->bump = (uint16_t)(s->bump + k);
	s->used = (uint16_t)(s->used + k);
	return k;
}

/* A span with nothing left to give leaves the partial list. */
static inline void partial_check(struct arena *a, struct span *s)
{
	if (!s->free && s->bump >= sc_blocks[s->cls])
		partial_remove(a, s);
}

/* The spans whose free lists one refill walks side by side (pop_ways). */
#define POP_WAYS 4u

/* A link out of its span in pop_ways' walk (cold): NULL, the end of a list (before its q-th
 * block when its span counts more than its list holds while another thread's refill has
 * the rest out: refill_take_chain's pin, a lender's, or a fork's; the walk stops after the
 * row), or corruption. */
LA_COLD static void way_ended(const void *p)
{
	if (p)
		corrupt_span_list();
}

#define POP_WAYS_MIN 16u
/* Spans of a class holding freed blocks after a teardown from which its refills take whole
 * lists (xfer_refill_marks): 16, a teardown past the L2 cache (1 MiB of 64-byte blocks),
 * whose blocks went cold: there a list's pop, which reads each link as it hands the block
 * out, waits less than a refill's walk, though it takes ~15 instructions a block more (a
 * call from malloc's empty bin). Below, the bins' pops: CPython test_dict's teardowns on
 * 4-12 spans took lists in some runs, +30-46k instructions (growth's: 20-38 spans). */
#define LISTS_SPANS  16u
/* pop_ways' side-by-side walk of the first POP_WAYS spans on cls's partial list that hold
 * freed blocks, q of each, q the least of want / POP_WAYS and each one's count (bump -
 * used): span sp[i]'s q blocks to out[i * q] on (fewer when a list ends early: then r of
 * each, to out[i * r] on); returns how many, 0 (nothing taken) when fewer spans hold freed
 * blocks or one holds none by its count. A way's step is its store, its link's load and
 * decode, and the range and divisibility tests of the link's offset (the span's start
 * negated: an addition). The rows run on two output pointers (ways 0-1 and 2-3) up to an
 * end pointer, a list's early end (way_ended, cold) stops them after its row, and one pass
 * after the walk does each span's spare count, count and partial test: growth 1000000
 * 100000 (24,100 walks, 8.3 rows each) ~13.7 -> ~12.6 instructions a block and ~230 ->
 * ~200 a walk, 193.19M -> 191.38M in all. Out of line: the refills that do not take it
 * keep their registers (callgrind). */
static LA_NOINLINE uint32_t pop_ways_first(struct arena *a, unsigned cls, void **out, uint32_t want)
{
	struct span *sp[POP_WAYS];
	uint32_t n = 0, q = want / POP_WAYS;
	for (struct span *s = a->partial[cls];; s = s->next) {
		if (!s)
			return 0;
		if (!s->free)
			continue;
		sp[n] = s;
		q = LA_MIN(q, (uint32_t)(s->bump - s->used));
		if (++n == POP_WAYS)
			break;
	}
	if (!q)
		return 0;
	const uintptr_t bytes = (uintptr_t)sc_pages[cls] << LA_PAGE_SHIFT;
	const uint32_t recip = sc_recip[cls];
	void *h0 = sp[0]->free, *h1 = sp[1]->free, *h2 = sp[2]->free, *h3 = sp[3]->free;
	const uintptr_t n0 = 0 - (uintptr_t)span_base(heap_of(sp[0]), sp[0]);
	const uintptr_t n1 = 0 - (uintptr_t)span_base(heap_of(sp[1]), sp[1]);
	const uintptr_t n2 = 0 - (uintptr_t)span_base(heap_of(sp[2]), sp[2]);
	const uintptr_t n3 = 0 - (uintptr_t)span_base(heap_of(sp[3]), sp[3]);
	const size_t qs = q;
	void **o = out, **o2 = out + 2 * qs, **end = out + qs;
	bool ended = false;
#define POP_WAY(h, nb, at)                                                       \
	do {                                                                     \
		at = h;                                                          \
		h = link_decode(*(void **)h, h);                                 \
		uintptr_t off = (uintptr_t)h + (nb);                             \
		if (unlikely(off >= bytes || !sc_divides((uint32_t)off, recip))) \
			way_ended(h), ended = true;                              \
	} while (0)
	do {
		POP_WAY(h0, n0, o[0]);
		POP_WAY(h1, n1, o[qs]);
		POP_WAY(h2, n2, o2[0]);
		POP_WAY(h3, n3, o2[qs]);
		o++;
		o2++;
	} while (o < end && !ended);
#undef POP_WAY
	uint32_t r = (uint32_t)(o - out);
	if (unlikely(r < q)) /* a list ended early: the runs move up to r blocks each */
		for (uint32_t i = 1; i < POP_WAYS; i++)
			memmove(out + i * r, out + i * q, r * sizeof(void *));
	sp[0]->free = h0;
	sp[1]->free = h1;
	sp[2]->free = h2;
	sp[3]->free = h3;
	for (uint32_t i = 0; i < POP_WAYS; i++) {
		struct span *s = sp[i];
		if (s->used == 0) { /* an empty span in use again */
			struct heap *h = heap_of(s);
			spare_sub(a, h, s, span_resident(h, s));
		}
		s->used = (uint16_t)(s->used + r);
		partial_check(a, s);
	}
	return POP_WAYS * r;
}

/* Up to want freed blocks of class cls from the arena's partial spans into out[0..] (lock
 * held, an arena with one thread), span after span in list order; returns how many. A
 * span's free list is a chain of dependent loads through its blocks: after a bulk free
 * they went cold (a program that frees most of what it built, then builds again: bench
 * growth), and the walk of one span waits for memory once a block (perf of `growth 3000000
 * 100000`: 94 % of the refill's samples on the link's load, the refill half of the run).
 * So a refill of POP_WAYS_MIN blocks or more, of a class with POP_WAYS spans or more on its
 * partial list, at the first span holding freed blocks walks the first POP_WAYS spans that
 * hold some (those the walk of one span at a time takes next) side by side, q blocks of
 * each in turn (pop_ways_first): the loads of the four lists do not depend on each other,
 * and their misses overlap. Each span's blocks go to a run of out of their own (a flush
 * frees them by span again: push_blocks finds one span for a run). The rest of want comes
 * from the spans one after the other as before, from the head of the list (the same spans
 * first). No test for a list's end in either walk: NULL fails the range check, whose cold
 * path tells it from corruption (way_ended, span_pop_many). */
LA_INLINE uint32_t pop_ways(struct arena *a, unsigned cls, void **out, uint32_t want)
{
	uint32_t got = 0;
	for (struct span *s = a->partial[cls], *next; s && got < want; s = next) {
		next = s->next;
		if (s->free) {
			struct heap *h = heap_of(s);
			if (unlikely(!got && want >= POP_WAYS_MIN &&
			             a->npartial[cls] >= POP_WAYS)) {
				got = pop_ways_first(a, cls, out, want);
				if (got) { /* the rest from the head of the list again */
					next = a->partial[cls];
					continue;
				}
			}
			if (s->used == 0) /* an empty span in use again */
				spare_sub(a, h, s, span_resident(h, s));
			got += span_pop_many(h, s, out + got, want - got);
		}
		partial_check(a, s);
	}
	return got;
}

/* ---- the transfer cache (lock held) ----------------------------------------------------- */

/* The C library's memcpy, called: gcc 12 inlined memcpy of a size it knows bounded (a
 * chunk's 64 slots at most) as `rep movsq`, whose start-up costs tens of cycles */
extern void *libc_memcpy(void *restrict, const void *restrict, size_t) __asm__("memcpy");

/* Copy n slots of class cls from slot i on, to (in) or from (!in) blocks. */
static void xfer_copy(struct xfer_slots *x, unsigned cls, uint32_t i, void **blocks, uint32_t n,
                      bool in)
{
	while (n) {
		uint32_t k = LA_MIN(n, XF_CHUNK - i % XF_CHUNK);
		void **slot = &x->chunk[i / XF_CHUNK][cls][i % XF_CHUNK];
		if (in)
			libc_memcpy(slot, blocks, k * sizeof(void *));
		else
			libc_memcpy(blocks, slot, k * sizeof(void *));
		i += k;
		blocks += k;
		n -= k;
	}
}

/* A refill of cls found the transfer cache short after a flush of cls went to the spans
 * for want of depth: count the miss, and earn a chunk every XF_EARN of them. */
static LA_NOINLINE void xfer_depth_miss(struct arena *a, unsigned cls)
{
	a->xfer_over &= ~((uint64_t)1 << cls);
	if (a->xfer_earned < XF_SLOTS / XF_CHUNK - 1 && ++a->xfer_misses >= XF_EARN) {
		a->xfer_misses = 0;
		a->xfer_earned++;
	}
}

/* A refill of cls (want blocks of it short after the transfer cache's) with the class
 * marked: over (a flush went to the spans for want of depth) and the transfer cache
 * short, a depth miss; past (the class's flushes go to the spans directly), the mark
 * clears: the class allocates again, its next flushes may be kept. */
static LA_NOINLINE void xfer_refill_marks(struct arena *a, unsigned cls, uint32_t want,
                                          struct arena **from)
{
	/* the first refill after a teardown of a class up to 256 bytes (xfer_past) in an arena
	 * with one thread, LISTS_SPANS spans of the class or more holding freed blocks: the
	 * caller's thread cache takes the class's lists from the next refill on (tcache.c,
	 * refill_from). Here, not at the teardown's flushes: logicmin's 40 teardowns of
	 * classes on fewer spans each paid a test at each flush and a list take refused
	 * (+4.8k instructions), where the refill's mark costs nothing more. */
	if (from && (a->xfer_past >> cls & 1) && cls < TC_LIST_CLASSES && want >= POP_WAYS_MIN &&
	    a->npartial[cls] >= LISTS_SPANS && __atomic_load_n(&a->threads, __ATOMIC_RELAXED) <= 1)
		*from = (struct arena *)((uintptr_t)*from | ARENA_LISTS_DUE);
	__atomic_store_n(&a->xfer_past, a->xfer_past & ~((uint64_t)1 << cls), __ATOMIC_RELAXED);
	if (want && a->xfer_over >> cls & 1)
		xfer_depth_miss(a, cls);
}

/* cached_bytes is the one arena counter written outside the lock too: each thread cache
 * publishes its bins' bytes into its arena's (tcache.c, publish_bin) with an atomic add,
 * while the transfer cache's blocks move in and out here under the lock. A plain read and
 * write under the lock (STAT_ADD_LOCKED) would lose a publish made between them, and the
 * gauge would drift for good (in_use read 0 on a quiet process whose arena a lender's
 * refill and its own thread's flushes had both written): atomic here as well, and only
 * when there is something to add. */
LA_INLINE void cached_add(struct arena *a, uint64_t bytes)
{
	if (bytes)
		STAT_ADD(a->c, cached_bytes, bytes);
}

LA_INLINE void cached_sub(struct arena *a, uint64_t bytes)
{
	if (bytes)
		STAT_SUB(a->c, cached_bytes, bytes);
}

/* Take up to want blocks of class cls, the most recently put on top (out[k - 1]). */
LA_INLINE uint32_t xfer_take(struct arena *a, unsigned cls, void **out, uint32_t want)
{
	uint32_t n = a->xfer_n[cls], k = LA_MIN(n, want);
	if (!k)
		return 0;
	xfer_copy(a->xfer, cls, n - k, out, k, false);
	a->xfer_n[cls] = (uint16_t)(n - k);
	a->xfer_bytes -= (uint64_t)k * sc_size[cls];
	return k;
}

/* The slots of the transfer cache's first `chunks` chunks were written: their pages count
 * as metadata, those not counted yet (lock held; chunks > xfer_chunks). */
static LA_NOINLINE void xfer_chunk_written(struct arena *a, uint32_t chunks)
{
	uint64_t pages = xfer_chunk_pages(chunks);
	STAT_ADD_LOCKED(a->c, metadata_bytes, xfer_meta_bytes(pages & ~a->xfer_pages));
	a->xfer_pages |= pages;
	a->xfer_chunks = chunks;
}

/* Whether class cls may hold `have` blocks while the arena takes `add` bytes more: the
 * slots' and the class's and arena's byte bounds (the earned depth aside). */
LA_INLINE bool xfer_fits(const struct arena *a, unsigned cls, uint32_t have, uint64_t add)
{
	return have <= XF_SLOTS && xfer_class(cls) &&
	       (uint64_t)have * sc_size[cls] <= XF_CLASS_BYTES &&
	       a->xfer_bytes + add <= XF_ARENA_BYTES;
}

/* Keep the n blocks if the class's and the arena's bounds allow; returns how many kept
 * (all or none: a flush goes one way). */
static uint32_t xfer_put(struct arena *a, unsigned cls, void *const *blocks, uint32_t n)
{
	uint32_t have = a->xfer_n[cls];
	uint64_t bytes = (uint64_t)n * sc_size[cls];
	uint64_t bit = (uint64_t)1 << cls;
	bool fits = xfer_fits(a, cls, have + n, bytes);
	if (!fits || have + n > xfer_depth(a)) {
		if (fits) /* a chunk not earned yet */
			a->xfer_over |= bit;
		/* past the slots or the bytes the class may fill (not the arena's bound,
		 * which other classes' blocks fill): a teardown, whose next flushes go to
		 * the spans directly (xfer_past) */
		if (xfer_class(cls) && (have + n > xfer_depth(a) ||
		                        (uint64_t)(have + n) * sc_size[cls] > XF_CLASS_BYTES))
			__atomic_store_n(&a->xfer_past, a->xfer_past | bit, __ATOMIC_RELAXED);
		return 0;
	}
	xfer_copy(a->xfer, cls, have, (void **)blocks, n, true);
	a->xfer_n[cls] = (uint16_t)(have + n);
	a->xfer_bytes += bytes;
	uint32_t chunks = (have + n - 1) / XF_CHUNK + 1;
	if (chunks > a->xfer_chunks) /* pages of the slots written for the first time */
		xfer_chunk_written(a, chunks);
	return n;
}

LA_INLINE bool span_push(struct arena *a, struct heap *h, struct span *s, void *p);

/* Blocks of class cls back to their spans (emptied spans go back to their heaps), each
 * as span_push would. A block inside the span of the one before (its range: the start,
 * negated, and the class's span bytes) is on that span; else its page map entry names its
 * span's first page (and the span's start). A span joins the partial list when it is
 * found (not tested again for each of its blocks), and its count of blocks out moves at
 * the changes of span only (below): a block on the span of the one before costs its load,
 * the range test, its link and the index's step (10 instructions; the loop's test once
 * for four blocks), one on another span the counts, the entry, the span's descriptor and
 * the partial test too (~31). Counted a block at a time (a decrement and a test of each
 * block: ~12 a block, ~29 on another span, with the same unrolling), CPython test_dict,
 * whose full flushes push 164k blocks and change span at 6 % of them, took 0.22M
 * instructions more, logicmin 60 (31 %) 0.14M more, nbody_tree 3000 2 (29 %) 12k more,
 * churn 100000 1000000 (random frees: 83 %) 94k fewer. The range test replaced a page
 * test (13 a block on the page of the one before): it also keeps the span of a block on
 * another of its pages, as when a teardown frees the runs a refill took of each span
 * (pop_ways) in the order they were handed out: growth 1000000 100000 pushes 999k blocks,
 * 40 % on another page than the one before, 18 % on another span (200.67M -> 198.78M
 * instructions; logicmin -0.64M, churn-1t -55k, sizes sweep 10 -0.4M; churn-1t-100k
 * +0.22M). No test whether that span is the one before (it was, on the heap or-ed with the
 * entry): the test cost 5 instructions a block that changes span. The loop is unrolled
 * four times (the loop's test once for four blocks): growth 1000000 100000 194.91M ->
 * 193.18M, logicmin 60 255.71M -> 255.28M, churn-1t-100k 61.41M -> 61.23M, nbody 3000 2
 * 351.68M -> 351.65M with the count of each block (eight times: growth 192.86M, twice
 * the code). */
/* The span of block p (its page-map entry), put on the partial list if it is not there;
 * *nbase receives its start negated (push_blocks' range test) */
LA_INLINE struct span *push_span_of(struct arena *a, void *p, uintptr_t *nbase)
{
	struct heap *h = heap_of(p);
	uintptr_t off = pm_off(heap_pm_entry_of(h, p));
	/* The head page from the start's offset, which the range test needs anyway (a copy
	 * and its shift; pm_head(e) was a copy, a shift and a mask); off opaque, a word: gcc
	 * 12 went back to the entry's shift and mask, and a 32-bit off cost a zero-extending
	 * copy. With spanidx in 16-byte units (heap.h, SPANIDX_UNIT) and s no longer opaque
	 * (its copy from one register to another is gone) a change of span costs 20
	 * instructions, was 24: logicmin 60 254.156M -> 253.955M, nbody_tree 3000 2 -15.7k,
	 * churn 100000 1000000 -252k, CPython test_dict (LIBALLOC_CONTROL=0) -41.5k. */
	__asm__("" : "+r"(off));
	struct span *s = spanidx_desc(h, h->spanidx[off >> LA_PAGE_SHIFT]);
	*nbase = 0 - ((uintptr_t)h + off);
	if (unlikely(!s->on_partial))
		partial_push(a, s);
	return s;
}

/* Span s's count of blocks out went down by the blocks pushed to it: emptied, it may go
 * back to its heap (then its descriptor, and the heap, may be gone). */
LA_INLINE void push_span_done(struct arena *a, struct span *s)
{
	if (unlikely(s->used == 0))
		maybe_release_span(a, heap_of(s), s); /* descriptors live in their heap */
}

/* s->used -= k (mod 2^16); whether it reached 0 (a subtraction and its flag) */
LA_INLINE bool span_used_sub_zero(struct span *s, uintptr_t k)
{
#if defined(__x86_64__)
	__asm__ goto("subw %w1, %0\n\tje %l[zero]" : "+m"(s->used) : "r"(k) : "cc" : zero);
	return false;
zero:
	return true;
#else
	s->used = (uint16_t)(s->used - (uint16_t)k);
	return s->used == 0;
#endif
}

LA_INLINE void push_blocks(struct arena *a, unsigned cls, void *const *blocks, uint32_t n)
{
	if (!n)
		return;
	/* the span's start negated (an addition: one `lea` on x86-64 for the offset) */
	uintptr_t nbase;
	const uintptr_t bytes = (uintptr_t)sc_pages[cls] << LA_PAGE_SHIFT;
	/* blocks by a negative index up to the end: its increment is the loop's test, and
	 * -i the blocks left from i on */
	void *const *end = blocks + n;
	intptr_t i = -(intptr_t)n;
	/* A span's count drops by all the blocks left when its run starts, and goes back
	 * up by those left after it when the next block is on another span: exact at the
	 * end of its run (all its blocks of this call are on its list by then, so that it
	 * empties there if it empties at all), with no count of the run's own. */
	struct span *s = push_span_of(a, end[i], &nbase);
	span_used_add(s, (uintptr_t)i);
	/* The span's list head in a register while the run lasts (stored at its end), and
	 * two blocks a step, the first the second's link: gcc kept a head local in one
	 * register and copied each block into it (a move a block, as the store it replaced);
	 * two named blocks need neither (9 instructions a block on the same span, was 10:
	 * logicmin 60 255.12M -> 254.90M, CPython test_dict -0.24M). */
	void *head = s->free;
	if (n & 1) {
		void *p = end[i];
		*(void **)p = link_encode(head, p);
		head = p;
		i++;
	}
#pragma GCC unroll 2
	while (i) {
		void *p = end[i], *q;
		if ((uintptr_t)p + nbase >= bytes) {
			s->free = head;
			if (unlikely(span_used_sub_zero(s, (uintptr_t)i)))
				maybe_release_span(a, heap_of(s), s);
			s = push_span_of(a, p, &nbase);
			span_used_add(s, (uintptr_t)i);
			head = s->free;
		}
		*(void **)p = link_encode(head, p);
		q = end[i + 1];
		if ((uintptr_t)q + nbase >= bytes) {
			s->free = p;
			if (unlikely(span_used_sub_zero(s, (uintptr_t)i + 1)))
				maybe_release_span(a, heap_of(s), s);
			s = push_span_of(a, q, &nbase);
			span_used_add(s, (uintptr_t)i + 1);
			p = s->free;
		}
		*(void **)q = link_encode(p, q);
		head = q;
		i += 2;
	}
	s->free = head;
	push_span_done(a, s);
}

/* The blocks of class cls the transfer cache holds back to their spans, the most recently
 * put first: pushed from their slots, a chunk's row of the class at a time (no copy). */
static void xfer_drain_class(struct arena *a, unsigned cls)
{
	uint32_t n = a->xfer_n[cls];
	if (!n)
		return;
	uint64_t bytes = (uint64_t)n * sc_size[cls];
	a->xfer_n[cls] = 0;
	a->xfer_bytes -= bytes;
	STAT_SUB_LOCKED(a->c, allocated_bytes, bytes);
	cached_sub(a, bytes);
	for (uint32_t c = (n - 1) / XF_CHUNK + 1; c-- > 0;) {
		push_blocks(a, cls, a->xfer->chunk[c][cls], n - c * XF_CHUNK);
		n = c * XF_CHUNK;
	}
}

/* Everything the transfer cache holds back to the spans. */
static void xfer_drain(struct arena *a)
{
	for (unsigned c = 0; c < LA_NCLASSES && a->xfer_bytes; c++)
		xfer_drain_class(a, c);
}

static void measure_locked(struct arena *a, const uint32_t *gone_by);

void arena_flush(struct arena *a)
{
	arena_lock(a);
	arena_drain(a);
	xfer_drain(a);
	/* blocks that came back unused leave pages never written: what is free resident now
	 * is measured (a few mincore calls per heap, on this command only) */
	measure_locked(a, NULL);
	arena_unlock(a);
}

/* Is p, a block of span s of class cls, free in the transfer cache or in s's list? */
bool arena_holds_free(struct arena *a, struct span *s, const void *p)
{
	unsigned cls = s->cls;
	for (uint32_t i = 0; i < a->xfer_n[cls]; i++)
		if (a->xfer->chunk[i / XF_CHUNK][cls][i % XF_CHUNK] == p)
			return true;
	uint32_t n = 0;
	for (void *q = s->free; q && n <= sc_blocks[cls]; n++) {
		if (q == p)
			return true;
		q = link_decode(*(void **)q, q);
	}
	return false;
}

/* A span whose whole free list a refill of an arena shared by several threads took under
 * the lock, to walk it after the unlock (refill_walk) and give back what it did not take
 * (refill_return). The walk is a load per block, each a miss when another core pushed the
 * block (the arena's other threads flush to the same spans): under the lock, that wait
 * held up every other thread of the arena (perf of `sizemix 4 300`: 63 % of arena_refill's
 * samples on the link's load; with more threads than CPUs the holder is also preempted
 * mid-walk). The span is pinned meanwhile (one block more counted out), so pushes of its
 * other blocks cannot empty and release it; blocks pushed to it meanwhile start a new list,
 * which the rest is put behind. What the walk needs of the span (its range and class) is
 * copied under the lock: nothing of the span is read outside it. An arena with one thread
 * walks under the lock (span_pop_many: no second lock, and no one waits). A fork while
 * another thread's list is out leaves the child that span pinned, its blocks lost as the
 * other threads' cached blocks are. */
struct refill_chain {
	struct heap *h;
	struct span *s;
	void *head;      /* the list taken; after the walk, what is left of it */
	uintptr_t base;  /* the span's first byte, its length and its class's reciprocal */
	uintptr_t bytes; /* (span_pop_many's checks of each link) */
	uint32_t recip;
	uint32_t got; /* blocks the walk took */
};
#define REFILL_CHAINS 4u

/* The checks of span_pop_many for a link to next on the span of c. */
LA_INLINE void chain_check(const struct refill_chain *c, const void *next)
{
	uintptr_t off = (uintptr_t)next - c->base;
	if (unlikely(off >= c->bytes || !sc_divides((uint32_t)off, c->recip)))
		corrupt_span_list();
}

/* Take span s's whole free list into *c, pinning s (lock held; s->free set). Returns the
 * blocks the list should hold (span_pop_many counts as it pops; here only the decision how
 * many spans to take uses it). */
static uint32_t refill_take_chain(struct arena *a, struct heap *h, struct span *s,
                                  struct refill_chain *c)
{
	if (s->used == 0)
		spare_sub(a, h, s, span_resident(h, s)); /* an empty span in use again */
	uint32_t listed = (uint32_t)(s->bump - s->used);
	*c = (struct refill_chain){.h = h,
	                           .s = s,
	                           .head = s->free,
	                           .base = (uintptr_t)span_base(h, s),
	                           .bytes = (uintptr_t)s->npages << LA_PAGE_SHIFT,
	                           .recip = sc_recip[s->cls]};
	s->free = NULL;
	s->used++; /* the pin */
	partial_check(a, s);
	return listed;
}

/* Up to want blocks from the chains into out[0..] in list order (no lock held). */
static uint32_t refill_walk(struct refill_chain *ch, uint32_t nch, void **out, uint32_t want)
{
	uint32_t got = 0;
	for (uint32_t i = 0; i < nch; i++) {
		struct refill_chain *c = &ch[i];
		void *p = c->head;
		uint32_t got0 = got;
		while (p && got < want) {
			void *next = link_decode(*(void **)p, p);
			if (next)
				chain_check(c, next);
			out[got++] = p;
			p = next;
		}
		c->head = p;
		c->got = got - got0;
	}
	return got;
}

/* The chains' spans take back what the walk left, behind the blocks pushed to them
 * meanwhile, and lose their pins (lock held). */
static void refill_return(struct arena *a, struct refill_chain *ch, uint32_t nch)
{
	for (uint32_t i = 0; i < nch; i++) {
		struct refill_chain *c = &ch[i];
		struct span *s = c->s;
		if (c->head) {
			if (!s->free) {
				s->free = c->head;
			} else {
				/* pushed while the list was out: few, at most a span's worth */
				void *t = s->free, *q;
				uint32_t n = 0;
				while ((q = link_decode(*(void **)t, t)) != NULL) {
					chain_check(c, q);
					if (++n > sc_blocks[s->cls])
						corrupt_span_list();
					t = q;
				}
				*(void **)t = link_encode(c->head, t);
			}
		}
		s->used = (uint16_t)(s->used - 1 + c->got);
		if (!s->on_partial && (s->free || s->bump < sc_blocks[s->cls]))
			partial_push(a, s);
		/* none of its blocks taken and none out: empty again (a spare, or back to its
		 * heap), as a push that empties it */
		if (unlikely(s->used == 0))
			maybe_release_span(a, c->h, s);
	}
}

static void reverse_blocks(void **p, uint32_t n)
{
	for (uint32_t i = 0, j = n; i + 1 < j; i++, j--) {
		void *t = p[i];
		p[i] = p[j - 1];
		p[j - 1] = t;
	}
}

/* out[0..a) and out[a..a+b) change places, each keeping its order. */
static void rotate_blocks(void **out, uint32_t a, uint32_t b)
{
	if (!a || !b)
		return;
	reverse_blocks(out, a);
	reverse_blocks(out + a, b);
	reverse_blocks(out, a + b);
}

/* How many of pages [first, first + n) of h are not marked as possibly resident (a
 * carving's few pages: one word of the bitmap as a rule, counted inline; heap_bits_set
 * tests all-resident and all-new before the popcount, then libgcc's: idle_sweep 4 10,
 * 43,151 calls from the shared arenas' refills, 0.9M instructions). */
LA_INLINE uint32_t pages_new(const struct heap *h, uint32_t first, uint32_t n)
{
	return n - heap_resident_few(h, first, n);
}

/* The refills of an arena that other threads share have carved, since the last time,
 * GROWTH_YIELD_PAGES pages no carving had reached (the arena's growth: page faults to
 * come as its threads write them), the last of them for the calling thread. When threads
 * of other arenas free this arena's blocks (its remote ring is set up) and the calling
 * thread gave no blocks back to its arena from a full bin within its last 224-256 refills
 * and flushes (a producer: it allocates what others free; own_flushes, which the cold-bin
 * sweeps count down, so that a thread that freed its own blocks once, then only produces,
 * is one), it gives up its CPU once, the lock released (sched_yield).
 * With more threads than CPUs the consumers of its blocks, woken by the program and
 * waiting for a CPU, then run before it grows the heap further, and their frees come back
 * to the arena's next refills instead of new pages being faulted in beside them; with a
 * CPU free, or no other thread runnable, it returns at once (a system call). A producer
 * otherwise runs its whole time slice ahead of its consumers, one run of new pages after
 * another: the peak, and the page faults that are most of such a program's CPU, follow
 * the blocks in flight (bench/README.md, "Remote frees: the consumers' turn"). A thread
 * that frees what it allocates, or what the arena's other threads do (sizemix's workers,
 * a consumer), is no producer: it keeps its CPU.
 * Before the ring is set up (no block has come back yet) it is no different: a producer
 * whose consumers have not run yet is one too, and the consumers that wait for a CPU then
 * are what it should let run. Without the yield, remote-6p2c-4k's runs split in two: in
 * about half of them the producers ran 30-70 MiB ahead before the first consumer freed a
 * block (its ring set up 18 ms into a 23 ms run, 7,575 of 7,631 new pages carved before
 * it), 80-137 batches in flight, 13-19k faults, 33-50 ms of CPU, against 3-30 batches and
 * 12-20 ms in the others. Yet a thread that only grows (a pool building its data, more
 * threads than CPUs) would then give its CPU to the next such thread at every 64 KiB, a
 * context switch (~3 us here) per 16 faults: 8 threads x 50,000 blocks of 512-1,023 B,
 * +8 % CPU. So before the ring, once per GROWTH_EARLY_PAGES (256 KiB) and for the first
 * GROWTH_EARLY_YIELDS of them only (16 MiB of growth): the consumers take their first
 * batches within those (8-12 such yields an arena in 6p2c), and a thread that grows on
 * without any remote free pays 64 yields an arena once. Decided under the lock (true:
 * yield after the unlock). */
static bool growth_due(struct arena *a, uint32_t grew)
{
	a->grown += grew;
	if (__atomic_load_n(&a->rr, __ATOMIC_RELAXED)) {
		if (a->grown < GROWTH_YIELD_PAGES)
			return false;
	} else if (a->grown < GROWTH_EARLY_PAGES || a->early_yields >= GROWTH_EARLY_YIELDS ||
	           la_tcache.own_flushes) {
		return false;
	} else {
		a->early_yields++;
	}
	a->grown = 0;
	return true;
}

static void growth_yield(void)
{
	if (!la_tcache.own_flushes)
		sched_yield();
}

static bool carve_is_new(struct arena *a, unsigned cls);
static uint32_t refill_locked(struct arena *a, unsigned cls, void **out, uint32_t want,
                              uint32_t carve);
static struct arena *lender(struct arena *a);
static struct arena *idle_lender(struct arena *a);
static uint32_t idle_refill(struct arena *b, unsigned cls, void **out, uint32_t want,
                            uint32_t carve);

/* arena_refill's body; shared: other threads use the arena; locked: the caller holds the
 * lock (a borrowed refill, lender); from: where a refill that would touch new
 * pages may take blocks of another arena instead (NULL: never). Constants in each caller. */
LA_INLINE uint32_t refill(struct arena *a, unsigned cls, void **out, uint32_t want, uint32_t carve,
                          bool shared, bool locked, struct arena **from)
{
	if (!locked)
		arena_lock(a);
	if (remote_pending(a))
		arena_drain(a);
	/* the transfer cache's blocks go on top (handed out first: the most recently used);
	 * the rest of the refill comes from the spans */
	uint32_t from_xfer = LA_MIN((uint32_t)a->xfer_n[cls], want);
	want -= from_xfer;
	if (unlikely((a->xfer_over | a->xfer_past) >> cls & 1))
		xfer_refill_marks(a, cls, want, shared ? NULL : from);
	uint32_t got = 0;
	/* Freed blocks first, from any span on the list. Only a refill that finds none
	 * carves, and at most carve never-used blocks (any number from a warm span, whose
	 * pages are resident already): so the blocks of the class ever touched exceed its
	 * live ones (caches included) by at most one carving. An arena that other threads
	 * share takes the spans' lists whole and walks them after the unlock. */
	struct refill_chain ch[REFILL_CHAINS];
	uint32_t nch = 0;
	if (shared) {
		uint32_t listed = 0;
		for (struct span *s = a->partial[cls], *next; s && listed < want; s = next) {
			next = s->next;
			if (s->free) {
				listed += refill_take_chain(a, heap_of(s), s, &ch[nch]);
				if (++nch == REFILL_CHAINS)
					break;
			} else {
				partial_check(a, s);
			}
		}
	} else {
		got = pop_ways(a, cls, out, want);
	}
	/* none freed: the spans left on the list hold only never-used blocks. Carve from
	 * the first; when it runs out, from the next (or a new span) while budget is left.
	 * Carved blocks go in descending order: the lowest address is handed out first. */
	bool recycled = got != 0 || from_xfer != 0 || nch != 0;
	if (from && !recycled && __atomic_load_n(&arena_count, __ATOMIC_RELAXED) > 1 &&
	    unlikely(carve_is_new(a, cls))) {
		/* nothing freed here, and the carving would touch new pages: another arena's
		 * free resident pages first (lender); none: carve here after all */
		struct arena *b = lender(a);
		if (b) {
			arena_unlock(a);
			uint32_t n = refill_locked(b, cls, out, want, carve);
			if (likely(n)) {
				*from = b;
				return n;
			}
			arena_lock(a); /* b could not map a span: carve here after all */
		} else if ((b = idle_lender(a))) {
			/* or the freed blocks of an idle arena this thread frees into */
			arena_unlock(a);
			uint32_t n = idle_refill(b, cls, out, want, carve);
			if (n) {
				*from = b;
				return n;
			}
			arena_lock(a); /* none of cls there: carve here */
		}
	}
	uint32_t grew = 0; /* pages the carvings reached first (shared arenas only) */
	for (struct span *s = a->partial[cls]; !recycled && got < want;) {
		if (!s && !(s = new_small_span(a, cls)))
			break;
		struct heap *h = heap_of(s);
		uint32_t bump0 = s->bump;
		uint32_t k = span_carve(h, s, out + got,
		                        s->warm ? want - got : LA_MIN(want - got, carve));
		got += k;
		if (!s->warm)
			carve -= k;
		if (k) { /* the pages of the blocks carved may be resident now */
			uint32_t lo = (uint32_t)(((size_t)bump0 * sc_size[cls]) >> LA_PAGE_SHIFT);
			uint32_t hi =
			        (uint32_t)(((size_t)s->bump * sc_size[cls] - 1) >> LA_PAGE_SHIFT);
			if (shared)
				grew += pages_new(h, s->first + lo, hi - lo + 1);
			heap_touch_few(h, s->first + lo, hi - lo + 1);
		}
		struct span *next = s->next;
		bool more = s->bump < sc_blocks[cls]; /* it stopped for want or the budget */
		partial_check(a, s);
		if (more || (!carve && !(next && next->warm)))
			break;
		s = next;
	}
	/* blocks from the spans are allocated from now on; the transfer cache's were
	 * counted allocated (and cached) all along */
	STAT_ADD_LOCKED(a->c, allocated_bytes, (uint64_t)got * sc_size[cls]);
	uint32_t taken = xfer_take(a, cls, out + got, from_xfer);
	cached_sub(a, (uint64_t)taken * sc_size[cls]);
	STAT_ADD_LOCKED(a->c, cache_refills, 1);
	STAT_ADD_LOCKED(&a->cs[cls], refills, 1);
	STAT_ADD_LOCKED(&a->cs[cls], blocks_in_use, got + taken);
	bool yield = shared && !locked && grew && growth_due(a, grew);
	/* a lent refill (refill_locked) is the borrower's work, not a's threads' (idle_lender) */
	if (!(shared && locked))
		__atomic_store_n(&a->work, a->work + 1, __ATOMIC_RELAXED);
	arena_unlock(a);
	if (yield)
		growth_yield();
	if (nch) {
		/* (got == 0: nothing carved) the chains' blocks go below the transfer
		 * cache's, which are handed out first */
		uint32_t walked = refill_walk(ch, nch, out + taken, want);
		rotate_blocks(out, taken, walked);
		arena_lock(a);
		refill_return(a, ch, nch);
		STAT_ADD_LOCKED(a->c, allocated_bytes, (uint64_t)walked * sc_size[cls]);
		STAT_ADD_LOCKED(&a->cs[cls], blocks_in_use, walked);
		arena_unlock(a);
		got = walked;
	}
	got += taken;
	return got;
}

/* A refill of a whose lock the caller holds (a lender), for another arena's thread: its
 * lists walked after the unlock, as in an arena threads share (the lender's own threads do
 * not wait for the walk), no further arena's blocks taken. */
static LA_NOINLINE uint32_t refill_locked(struct arena *a, unsigned cls, void **out, uint32_t want,
                                          uint32_t carve)
{
	return refill(a, cls, out, want, carve, true, true, NULL);
}

/* Would a carving of class cls touch pages not resident (lock held; no freed block of cls
 * left)? A span whose pages were new when it was made, or a new span where the arena has
 * no parked block and its heaps too few free resident pages for it. */
static bool carve_is_new(struct arena *a, unsigned cls)
{
	struct span *s = a->partial[cls];
	if (s)
		return !s->warm;
	return !a->parked && !arena_dirty_at_least(a, sc_pages[cls]);
}

/* Another arena's free resident pages, for a refill of a whose carving would touch new
 * ones (a's lock held): the first of the next BORROW_TRIES arenas whose lock is free (a
 * try: a thread holding one arena's lock never waits for another's, so no order between
 * them is needed) and that holds BORROW_PAGES free pages that may be resident, returned
 * locked; NULL if none. The refill then takes that arena's blocks and pages instead (a
 * plain refill of it, taking no further turn) and tells the caller whose they are. A
 * producer whose blocks its consumers free into its own arena, while the producers of the
 * other arena run ahead, otherwise faults new pages in beside the other arena's free ones:
 * the peak is the sum of the arenas' peaks (bench/README.md, remote-6p2c-4k: in 8 runs,
 * 0-6,071 of 7,461-15,770 new pages, 5,878 of 10,337 in one, were taken while the other
 * arena held 256 KiB or more free, up to 19 MiB). The blocks go back to their arena when
 * freed (remote frees, or the flush of a bin that holds them, tcache.c foreign_bins).
 * BORROW_PAGES is 4 MiB, not less: an arena whose threads free a batch and allocate the
 * next (idle_sweep: 256 blocks of one size, then the next size) holds that batch's pages
 * free for a moment, and its threads take them back at once; lent, they made its next
 * batch fault new pages in while the borrower's arena had faulted its own in already
 * (idle_sweep 2 10: peak 9.7 MiB in every run without the lender, 9.7-16.8 with it at
 * 256 KiB; its lenders held 256 KiB-4 MiB free at each loan, bench/README.md). */
#define BORROW_PAGES 1024u /* 4 MiB */
#define BORROW_TRIES 2u
static LA_NOINLINE struct arena *lender(struct arena *a)
{
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t k = 1; k < n && k <= BORROW_TRIES; k++) {
		struct arena *b = &arenas[(a->index + k) % n];
		if (!la_trylock(&b->lock))
			continue;
		if (arena_dirty_at_least(b, BORROW_PAGES))
			return b;
		arena_unlock(b);
	}
	return NULL;
}

/* Does a hold freed blocks of cls, in its transfer cache or on a span of its partial list
 * (lock held)? */
static bool holds_freed(const struct arena *a, unsigned cls)
{
	if (a->xfer_n[cls])
		return true;
	for (const struct span *s = a->partial[cls]; s; s = s->next)
		if (s->free)
			return true;
	return false;
}

/* For a refill of a whose carving would touch new pages (a's lock held): the arena the
 * calling thread's frees of other arenas' blocks last went to, when each of its threads
 * waits in pthread_join (`joining`: it allocates nothing meanwhile; none left counts too),
 * IDLE_LEND_PAGES pages or more in spans, and its threads did no work (refills, flushes,
 * large blocks) since this thread's previous such refill looked; NULL otherwise, and
 * always once such a look of this thread found more than two application threads alive
 * (`crowded`): a worker among others (larson 2: main waits in pthread_join only once it
 * started both, and the first worker then borrowed main's arena's blocks whenever the
 * second ended first, which the next generation frees as remote frees: 2,000-4,300 lent
 * refills a run of `larson 2 10000 200000 5`, CPU +9 %).
 * The refill then takes that arena's freed blocks (idle_refill). A thread handed the
 * blocks of one that now only waits (larson: each generation a new thread frees the slots
 * main allocated, main in pthread_join) so takes back the blocks it frees, rather than
 * faulting a copy of the working set in beside them (larson 1 10000 200000 5: peak 7.8 ->
 * 5.1 MiB). A busy arena's freed blocks are its threads' next refills; an arena this thread
 * never freed into is not asked (idle_sweep's next batch, lender); and below
 * IDLE_LEND_PAGES the pages saved do not pay for the round trips: the blocks taken go back
 * to their arena when freed, as remote frees (~120 instructions an operation more in the
 * generation that borrows: larson 1 1000 200000 5 102M -> 149M at any bound). */
#define IDLE_LEND_PAGES 512u /* 2 MiB */
static LA_NOINLINE struct arena *idle_lender(struct arena *a)
{
	struct tcache *tc = &la_tcache;
	struct arena *b = tc->freed_to;
	if (tc->crowded || (tc->crowded = __atomic_load_n(&app_threads, __ATOMIC_RELAXED) > 2))
		return NULL;
	if (!b || b == a ||
	    __atomic_load_n(&b->joining, __ATOMIC_RELAXED) <
	            __atomic_load_n(&b->threads, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&b->used_pages, __ATOMIC_RELAXED) < IDLE_LEND_PAGES)
		return NULL;
	uint32_t w = __atomic_load_n(&b->work, __ATOMIC_RELAXED);
	bool idle = tc->freed_to_seen == b && tc->freed_to_work == w;
	tc->freed_to_seen = b;
	tc->freed_to_work = w;
	return idle ? b : NULL;
}

struct arena *arena_join_wait(void)
{
	struct arena *a = la_tcache.arena;
	if (a)
		__atomic_fetch_add(&a->joining, 1, __ATOMIC_RELAXED);
	return a;
}

void arena_join_done(struct arena *a)
{
	if (a)
		__atomic_fetch_sub(&a->joining, 1, __ATOMIC_RELAXED);
}

/* A refill of cls from idle_lender's arena b (no lock held): its waiting remote frees
 * drained, then its freed blocks; 0 when its lock is taken or it holds none of cls. */
static LA_NOINLINE uint32_t idle_refill(struct arena *b, unsigned cls, void **out, uint32_t want,
                                        uint32_t carve)
{
	if (!la_trylock(&b->lock))
		return 0;
	if (remote_pending(b))
		arena_drain(b);
	if (!holds_freed(b, cls)) {
		arena_unlock(b);
		return 0;
	}
	return refill_locked(b, cls, out, want, carve);
}

/* arena_refill_inline's quick refill of freed blocks (the first span on cls's partial list
 * holds some, and none wait in the transfer cache or the remote frees): what refill() does
 * then (no carving: the spans' lists hold at least one), in a frame of its own. */
LA_NOINLINE uint32_t arena_refill_pop(struct arena *a, unsigned cls, void **out, uint32_t want)
{
	uint32_t got = pop_ways(a, cls, out, want);
	arena_refill_done(a, cls, got, sc_size[cls]);
	return got;
}

void arena_corrupt_list(void)
{
	la_fatal("malloc()", "corrupted free list detected");
}

void arena_double_free_out(void)
{
	la_fatal("free()", "double free detected");
}

void arena_bad_list_link(uintptr_t base, uint32_t bytes, uint32_t recip, void *next)
{
	if (list_link_marked(base, bytes, recip, next))
		arena_double_free_out();
	arena_corrupt_list();
}

/* Ask for the cache lines of bytes [base, base + len) (rounded up to 256 bytes: within the
 * span), without waiting for them */
static void list_prefetch(uintptr_t base, uintptr_t len)
{
	for (uintptr_t a = base, e = base + len; a < e; a += 256) {
		__builtin_prefetch((void *)a);
		__builtin_prefetch((void *)(a + 64));
		__builtin_prefetch((void *)(a + 128));
		__builtin_prefetch((void *)(a + 192));
	}
}

/* A teardown's refills (bench growth: ~6 MiB of 32-96 B blocks freed in bulk, then taken
 * back) walked 32 links at a time into the bin, four spans side by side (pop_ways_first):
 * a chain of dependent loads through blocks that went cold, and ~40 instructions a block
 * for the round trip through the bin and the span. The span's list handed over whole is
 * one step under the lock: its count is bump - used (a list shorter than that, a span a
 * fork left pinned, gives the rest back at the return), and malloc reads each link as it
 * hands its block out (tcache.c, list_pop), as the program goes on with the block before. */
uint32_t arena_take_list(struct arena *a, unsigned cls, uint32_t want, struct tlist *l)
{
	if (want < POP_WAYS_MIN || __atomic_load_n(&a->threads, __ATOMIC_RELAXED) > 1)
		return 0;
	arena_lock(a);
	struct span *s = a->partial[cls];
	/* (also fewer than POP_WAYS spans on the partial list: a teardown's last spans give
	 * their lists too, where a refill walked them 32 cold links in a row, arena_refill_pop:
	 * growth 1000000 100000 96 32, 84k of its 1.94M D1 read misses, ~10 % of its CPU) */
	if (!s || !s->free || a->xfer_n[cls] || remote_pending(a) ||
	    __atomic_load_n(&a->threads, __ATOMIC_RELAXED) > 1) {
		arena_unlock(a);
		return 0;
	}
	if (unlikely((a->xfer_over | a->xfer_past) >> cls & 1))
		xfer_refill_marks(a, cls, want, NULL); /* as the refill it replaces */
	struct heap *h = heap_of(s);
	if (s->used == 0) /* an empty span in use again */
		spare_sub(a, h, s, span_resident(h, s));
	uint32_t n = (uint32_t)(s->bump - s->used);
	uint32_t carved = s->bump;
	l->head = s->free;
	l->base = (uintptr_t)span_base(h, s);
	l->bytes = s->npages << LA_PAGE_SHIFT;
	l->recip = sc_recip[cls];
	l->left = n;
	s->free = NULL;
	s->used = s->bump;
	s->list_out = 1;
	partial_check(a, s);
	arena_refill_done(a, cls, n, sc_size[cls]);
	/* The list is a chain of dependent loads (each link read as its block is handed out:
	 * one memory latency a malloc once the blocks went cold), and its blocks are most of
	 * the span's carved bytes when they are half its blocks or more: those lines asked
	 * for at once, so that the chain's loads, and the program's writes of the blocks,
	 * find them in the cache. growth 3000000 100000 96 32: malloc's phase 64 -> 35 ns
	 * a block under load (median over its periods, thread CPU), the row's CPU ~0.91 of
	 * before (bench/README.md, growth). */
	if (n * 2 >= carved)
		list_prefetch(l->base, (uintptr_t)carved * sc_size[cls]);
	return n;
}

/* What is left of list l of class cls back to its span, behind the blocks pushed to it
 * since (as refill_return), and the list emptied. */
void arena_return_list(struct arena *a, unsigned cls, struct tlist *l)
{
	uint32_t left = l->left;
	void *head = l->head;
	uintptr_t base = l->base;
	uintptr_t len = l->bytes;
	if (!left && head) /* more links than the count */
		corrupt_span_list();
	if (!base)
		return;
	struct heap *h = heap_of((void *)base);
	struct span *s = span_at(h, heap_page_of(h, (void *)base));
	uint32_t recip = sc_recip[cls];
	arena_lock(a);
	/* the span's mark and the list cleared under the lock: free's check of another thread
	 * (tcache_check_lists), which holds it, finds the list in its cache while the span
	 * says it is out, also a list used up */
	s->list_out = 0;
	l->head = NULL;
	l->base = 0;
	l->left = 0;
	if (!left) {
		arena_unlock(a);
		return;
	}
	if (head) {
		void *t = head, *q;
		uint32_t n = 1;
		while ((q = link_decode(*(void **)t, t)) != NULL) {
			uintptr_t off = (uintptr_t)q - base;
			if (off >= len || !sc_divides((uint32_t)off, recip) || ++n > left) {
				if (list_link_marked(base, (uint32_t)len, recip, q))
					arena_double_free_out();
				corrupt_span_list();
			}
			t = q;
		}
		*(void **)t = link_encode(s->free, t);
		s->free = head;
	}
	if (!s->on_partial)
		partial_push(a, s);
	s->used = (uint16_t)(s->used - left);
	uint64_t bytes = (uint64_t)left * sc_size[cls];
	STAT_SUB_LOCKED(a->c, allocated_bytes, bytes);
	STAT_SUB_LOCKED(&a->cs[cls], blocks_in_use, left);
	__atomic_store_n(&a->work, a->work + 1, __ATOMIC_RELAXED);
	if (s->used == 0)
		maybe_release_span(a, h, s);
	arena_unlock(a);
}

/* The refill of an arena with one thread, its lock taken (arena_refill_inline's quick
 * carving did not apply). */
LA_NOINLINE uint32_t arena_refill_single_locked(struct arena *a, unsigned cls, void **out,
                                                uint32_t want, uint32_t carve, struct arena **from)
{
	return refill(a, cls, out, want, carve, false, true, from);
}

LA_NOINLINE uint32_t arena_refill_shared(struct arena *a, unsigned cls, void **out, uint32_t want,
                                         uint32_t carve, struct arena **from)
{
	return refill(a, cls, out, want, carve, true, false, from);
}

LA_NOINLINE void arena_span_carved_out(struct arena *a, struct span *s)
{
	partial_remove(a, s);
}

uint32_t arena_refill(struct arena *a, unsigned cls, void **out, uint32_t want, uint32_t carve,
                      struct arena **from)
{
	return arena_refill_inline(a, cls, out, want, carve, from);
}

void *arena_alloc_small(struct arena *a, unsigned cls)
{
	void *p;
	if (arena_refill(a, cls, &p, 1, 1, NULL) != 1)
		return NULL;
	return p;
}

/* Return one small block to its span (lock held). */
/* True when the span emptied and went back to its heap (which may have been released with
 * it: nothing of s or h may be read after). */
LA_INLINE bool span_push(struct arena *a, struct heap *h, struct span *s, void *p)
{
	*(void **)p = link_encode(s->free, p);
	s->free = p;
	s->used--;
	if (unlikely(!s->on_partial))
		partial_push(a, s);
	return unlikely(s->used == 0) && maybe_release_span(a, h, s);
}

/* The parked span goes back to its heap's free pages (lock held); its heap. */
static struct heap *unpark_pages(struct arena *a)
{
	struct span *s = a->parked;
	struct heap *h = heap_of(s);
	a->parked = NULL;
	spare_sub(a, h, s, a->parked_resident);
	heap_note_start(h, s);
	s->kind = SPAN_LARGE; /* heap_free_pages takes any in-use span */
	heap_free_pages(h, s);
	return h;
}

/* The parked span goes back to its heap (lock held). */
static LA_NOINLINE void unpark_slow(struct arena *a)
{
	after_free_pages(a, unpark_pages(a));
}

LA_INLINE void unpark(struct arena *a)
{
	if (a->parked)
		unpark_slow(a);
}

/* What the program writes of its blocks of up to LARGE_GRID_MAX_PAGES pages: a probe
 * (large_probe), a block whose pages after the first were not all resident when it was
 * allocated, is read (mincore, up to 63 pages) at its free or at the next probe: all of
 * those pages resident (a program that writes its blocks whole), or not. a->large_dense
 * counts the first kind, +32 a sample and decaying by an eighth (LARGE_DENSE_AT: half of
 * the recent samples). Blocks written only at their start go on the grid (fit_on_grid):
 * they touch again pages touched before. Blocks written whole fill the heap's holes
 * instead, anywhere, as before the grid: on it they left the pages after them up to the
 * next grid line (up to 15 of 16) to no one (bench frag 1000000 200000: peak RSS 31.0 ->
 * 33.0 MiB with the grid for every block, 31.0 so). Pages the heap populated ahead of a
 * fast growth or backed by a huge page read as written too: the grid is then off, the
 * placement as it was before it. Only probes are read: any freed block read so (every
 * 32nd free, as before) lay, in time, over pages earlier blocks' starts and small spans
 * had made resident, read as written whole, and turned the grid off for a program that
 * writes only the start of its blocks: medsizes 1000 3000000 262144 went from 84 MiB
 * at 1M operations to 169 MiB at 3M, every page of its heaps resident (glibc 140). */
uint32_t arena_large_grid = LARGE_GRID_PAGES;

/* How many of the npages - 1 pages after the first of the large block at base (up to
 * LARGE_GRID_MAX_PAGES pages) are resident (mincore), or -1. */
static int resident_after_first(char *base, uint32_t npages)
{
	unsigned char vec[LARGE_GRID_MAX_PAGES];
	uint32_t k = npages - 1, res = 0;
	if (mincore(base + LA_PAGE, (size_t)k << LA_PAGE_SHIFT, vec) != 0)
		return -1;
	for (uint32_t i = 0; i < k; i++)
		res += vec[i] & 1;
	return (int)res;
}

/* One sample of a block of npages pages, res of those after its first resident (-1: none):
 * large_dense, a moving count of the samples that say the block was written whole. A
 * sample that agrees with the placement in use (written whole with the grid off, at the
 * start only with it on) makes the probes after LARGE_SAMPLE_EVERY rarer, up to
 * 2^LARGE_PROBE_BACKOFF times; one that does not brings them back at once. Each probe is
 * two mincore calls under the arena lock, 4-13 us each on this host (a loop of them):
 * `medsizes 1000 1000000 262144`, every sample of which says the start only, made 5,142
 * (2,163 so; its system time 0.028-0.042 -> 0.021-0.028 s). */
static void large_dense_note(struct arena *a, int res, uint32_t npages)
{
	if (res < 0)
		return;
	bool whole = (uint32_t)res == npages - 1;
	if (whole == (a->large_dense >= LARGE_DENSE_AT))
		a->probe_backoff += a->probe_backoff < LARGE_PROBE_BACKOFF;
	else
		a->probe_backoff = 0;
	/* stored whole: large_ghost_hit reads it without the lock */
	uint32_t d = a->large_dense - a->large_dense / 8 + (whole ? 32 : 0);
	__atomic_store_n(&a->large_dense, d, __ATOMIC_RELAXED);
}

/* A free of a block of up to LARGE_GRID_MAX_PAGES pages: counted (large_probe's rate),
 * and read if it is the probe. */
static void large_sample(struct arena *a, struct heap *h, const struct span *s)
{
	if (s->npages > LARGE_GRID_MAX_PAGES || s->npages < 2)
		return;
	if (a->large_frees < LARGE_SAMPLE_EVERY)
		a->large_frees++;
	if (!a->probe || span_base(h, s) != a->probe || s->npages != a->probe_pages)
		return;
	large_dense_note(a, resident_after_first(a->probe, s->npages), s->npages);
	a->probe = NULL;
}

/* The probe's pages after its first, when it is still the block large_probe chose (a live
 * or parked large block of probe_pages pages starting there, in a heap of a): mincore's
 * figure, or -1. */
static int probe_read(struct arena *a)
{
	struct heap *h = heap_of(a->probe), *x = a->heaps;
	while (x && x != h)
		x = x->next;
	if (!x)
		return -1;
	struct span *s = span_at(h, heap_page_of(h, a->probe));
	if ((s->kind != SPAN_LARGE && s->kind != SPAN_PARKED) || s->npages != a->probe_pages)
		return -1;
	return resident_after_first(a->probe, s->npages);
}

/* Every LARGE_PROBE_EVERY-th allocation of a block that may go on the grid (every
 * LARGE_SAMPLE_EVERY-th once as many were freed) first reads what the program wrote of the
 * probe chosen at the one before, if it was not freed (large_sample read it then), then
 * takes the new block s as the next probe if some of its pages after the first are not
 * resident yet: only the program's writes can then make them so. Pages populated ahead or
 * in a range advised for huge pages are resident before the program writes (at most after
 * its first write): no probe there. So a program that writes its blocks whole while its
 * heap grows (bench growshrink's first cycle) turns the grid off before its blocks have
 * spread over the grid's holes, and one that writes only their start (bench medsizes)
 * keeps it on. Two mincore calls under the arena lock every 8 blocks cost medsizes, all of
 * whose blocks take this path, 45 % more CPU: every 32 once the frees began (medsizes
 * 1000 300000 65536: 114.11M -> 114.42M instructions against a read of every 32nd free). */
static LA_NOINLINE void large_probe(struct arena *a, struct heap *h, const struct span *s)
{
	uint32_t every = a->large_frees < LARGE_SAMPLE_EVERY
	                         ? LARGE_PROBE_EVERY
	                         : LARGE_SAMPLE_EVERY << a->probe_backoff;
	if (s->npages > LARGE_GRID_MAX_PAGES || s->npages < 2 || ++a->large_allocs % every)
		return;
	if (a->probe) {
		large_dense_note(a, probe_read(a), a->probe_pages);
		a->probe = NULL;
	}
	uint32_t k = s->npages - 1;
	uint32_t h0 = s->first / HEAP_HUGE_PAGES, h1 = (s->first + k) / HEAP_HUGE_PAGES;
	if ((h->huge >> h0 | h->huge >> h1) & 1)
		return;
	char *base = span_base(h, s);
	int res = resident_after_first(base, s->npages);
	if (res >= 0 && (uint32_t)res < k) {
		a->probe = base;
		a->probe_pages = s->npages;
	}
}

/* A freed large block is parked whole; the one parked before goes back to its heap. A
 * program that frees and allocates a buffer of one size (an I/O buffer, a frame) takes
 * the same span back without splitting, coalescing or the throttle, whose work would
 * cancel out; a request of another size may take it in place (PARKED_SPLIT_PAGES).
 * Trims, idle-heap releases and the decay pass give it back; with the
 * throttle turned off nothing is kept (pages go back at every shrink, as asked). */
static void free_large_locked(struct arena *a, struct heap *h, struct span *s)
{
	large_sample(a, h, s);
	STAT_SUB_LOCKED(a->c, allocated_bytes, (uint64_t)s->npages << LA_PAGE_SHIFT);
	s->offset = 0;
	op_measure_soon(); /* its pages count resident whole: what did the program write? */
	unpark(a);         /* one block is kept at a time (none once the throttle is off) */
	if (!TUN(madvise_throttle)) {
		heap_note_start(h, s);
		free_pages(a, h, s);
		return;
	}
	s->kind = SPAN_PARKED;
	a->parked = s;
	a->parked_resident = s->npages; /* a large block's pages are all counted resident */
	spare_add(a, h, s, s->npages);
	shm_note_retained(); /* the decay pass returns it if no allocation takes it */
}

/* Statistics of many small frees, applied once (draining a remote queue frees hundreds
 * of blocks under the lock: one atomic per counter instead of three per block). Only the
 * classes in mask have a count (set when the class is first seen). */
struct free_tally {
	uint64_t bytes;  /* back to their spans: no longer allocated */
	uint64_t cached; /* into the transfer cache: allocated still, as cached */
	uint64_t mask;
	uint32_t blocks[LA_NCLASSES];
	uint16_t room[LA_NCLASSES]; /* a ring drain's (ring_drain), set with blocks[] */
};

static void tally_apply(struct arena *a, struct free_tally *t)
{
	if (!t->bytes && !t->cached)
		return;
	STAT_SUB_LOCKED(a->c, allocated_bytes, t->bytes);
	cached_add(a, t->cached);
	shm_note_retained(); /* the decay pass releases spans that empty and cold caches */
	for (uint64_t m = t->mask; m; m &= m - 1) {
		unsigned c = (unsigned)__builtin_ctzll(m);
		STAT_SUB_LOCKED(&a->cs[c], blocks_in_use, t->blocks[c]);
	}
}

LA_INLINE void tally_block(struct free_tally *t, unsigned cls)
{
	if (!(t->mask >> cls & 1)) {
		t->mask |= (uint64_t)1 << cls;
		t->blocks[cls] = 0;
	}
	t->blocks[cls]++;
}

/* Free one block of this arena, lock held; small blocks are counted into t. */
static void free_block_tallied(struct arena *a, void *p, struct free_tally *t)
{
	struct heap *h = heap_of(p);
	uint32_t pg = heap_page_of(h, p);
	struct span *s = span_at(h, pm_head(h->pagemap[pg]));
	if (s->kind == SPAN_SMALL) {
		unsigned cls = s->cls;
		span_push(a, h, s, p);
		t->bytes += sc_size[cls];
		tally_block(t, cls);
	} else {
		free_large_locked(a, h, s);
	}
}

static void free_block_locked(struct arena *a, void *p)
{
	struct free_tally t;
	t.bytes = t.cached = t.mask = 0;
	free_block_tallied(a, p, &t);
	tally_apply(a, &t);
}

/* The transfer cache's slots: a large block of the arena's own heap (its rows touched as
 * classes use them). NULL without memory: flushes then go to the spans. */
static void xfer_setup(struct arena *a)
{
	uint64_t resident;
	struct xfer_slots *x = arena_alloc_meta(a, sizeof(*x), 0, &resident);
	if (!x)
		return;
	arena_lock(a);
	if (!a->xfer) {
		/* pages of free spans reused may be resident before a slot is written: the
		 * kernel holds them, so they count (as the chunks written will) */
		STAT_ADD_LOCKED(a->c, metadata_bytes, xfer_meta_bytes(resident));
		a->xfer_pages = resident;
		__atomic_store_n(&a->xfer, x, __ATOMIC_RELAXED);
		x = NULL;
	}
	if (x)
		free_meta_locked(a, x, 0);
	arena_unlock(a);
}

/* The free pages that may be resident the arena's heaps hold, counted up to enough at
 * most (lock held). */
static uint64_t arena_dirty_upto(struct arena *a, uint64_t enough)
{
	uint64_t dirty = 0;
	for (struct heap *h = a->heaps; h && dirty < enough; h = h->next)
		dirty += h->dirty_pages;
	return dirty;
}

/* Does the arena hold at least pages free pages that may be resident (lock held)? The
 * transfer cache's send-back (XF_SPARE_PAGES) and populate-ahead (HEAP_HOLES_PAGES) ask.
 * The arena's sum of its heaps' counts (dirty_pages, kept with them: the accounting tests
 * check it against the walk), not a walk of its heaps (a flush the transfer cache did not
 * keep asked each time: CPython test_dict, 1,056 times) */
static bool arena_dirty_at_least(struct arena *a, uint64_t pages)
{
	return arena_dirty_hint(a, (uint32_t)LA_MIN(pages, (uint64_t)UINT32_MAX));
}

/* A cold flush's blocks (the bin's, oldest first) that start with the untaken tail of the
 * bin's last carving: blocks[0] the block just below its span's bump, each next one a size
 * lower. When a page lies wholly above the byte below the run (no block handed out reaches
 * it), the run goes back under the bump instead of on the free list: the list's links would
 * be written on pages no one touched. Blocks handed out and freed back in that same order
 * (descending addresses) look the same: free too, they go back as well (small calloc
 * always clears), only the page it was to spare may be written already. Returns the blocks
 * taken back (lock held). */
LA_INLINE uint32_t uncarve_tail(struct arena *a, unsigned cls, void *const *blocks, uint32_t n)
{
	char *p = blocks[0];
	struct heap *h = heap_of(p);
	if (h->arena != a)
		return 0;
	uint32_t e = heap_pm_entry_of(h, p);
	struct span *s = span_at(h, pm_head(e));
	size_t size = sc_size[cls];
	char *base = (char *)h + pm_off(e);
	if (s->kind != SPAN_SMALL || s->cls != cls || s->list_out || !s->bump ||
	    p != base + (size_t)(s->bump - 1) * size)
		return 0;
	/* a link is written at a block's start: worth it when the top block starts on a
	 * clean page (the longest run there can be reaches one, or no run does) */
	uint32_t most = LA_MIN(n, (uint32_t)s->bump);
	if ((uintptr_t)p < ((((uintptr_t)p - (size_t)(most - 1) * size) - 1) | (LA_PAGE - 1)) + 1)
		return 0;
	const char *q = p - size;
	void *const *b = blocks + 1, *const *stop = blocks + most;
	while (b < stop && *b == q) {
		b++;
		q -= size;
	}
	uint32_t m = (uint32_t)(b - blocks);
	uintptr_t low = (uintptr_t)q + size;
	if ((uintptr_t)p < ((low - 1) | (LA_PAGE - 1)) + 1)
		return 0;
	s->bump = (uint16_t)(s->bump - m);
	s->used = (uint16_t)(s->used - m);
	if (!s->on_partial)
		partial_push(a, s);
	if (s->used == 0)
		maybe_release_span(a, h, s);
	return m;
}

/* arena_free_blocks' body, in a copy for a full bin's flush (arena_free_blocks_full: how
 * a constant, its tests gone) and one for the others */
LA_INLINE void free_blocks(struct arena *a, void *const *blocks, uint32_t n, unsigned cls,
                           enum flush_how how)
{
	bool cold = how == FLUSH_COLD;
	if (unlikely(!__atomic_load_n(&a->xfer, __ATOMIC_RELAXED)))
		xfer_setup(a); /* the arena's first flush */
	/* A full bin's flush that finds the lock taken while other threads share the arena
	 * (one of them refilling or flushing) hands its blocks to the arena's ring instead of
	 * sleeping in the lock: the next drain (a refill by any thread of the arena, the decay
	 * pass) takes them. With more threads than CPUs a thread asleep in the lock waits for
	 * the holder, then for a CPU: the kernel hands the lock to it at the unlock
	 * (FUTEX_UNLOCK_PI), and the arena's other threads queue behind it meanwhile. The only
	 * thread of an arena waits (the holder is the control thread's maintenance, brief),
	 * so that its flushes return their blocks at once. */
	bool locked = how == FLUSH_FULL && la_trylock(&a->lock);
	if (!locked && how == FLUSH_FULL && __atomic_load_n(&a->threads, __ATOMIC_RELAXED) > 1 &&
	    ring_put(a, blocks, n, RR_DEFERRED)) {
		STAT_ADD(a->c, cache_flushes_deferred, 1); /* the class's at the drain */
		return;
	}
	if (!locked)
		arena_lock(a);
	/* A cold class (its thread cache's bin went unused for a while: tcache.c, tcache_gc)
	 * keeps nothing: its blocks, those the transfer cache kept of it and the empty span
	 * kept for it go back, so that its spans' pages serve the next span of any class. */
	/* A class whose flush did not fit, with no refill of it since (xfer_past: a teardown
	 * under way), sends its flushes to the spans directly, while the blocks are in the
	 * CPU's cache (the frees just wrote their keys) */
	uint64_t bit = (uint64_t)1 << cls;
	bool offer = a->xfer && !cold && !(a->xfer_past & bit);
	uint32_t kept = offer ? xfer_put(a, cls, blocks, n) : 0;
	if (cold && a->xfer && a->xfer_n[cls])
		xfer_drain_class(a, cls);
	/* A flush the transfer cache cannot keep: the class frees more than it allocates
	 * (a structure torn down). Kept, the blocks it holds would be the class's next
	 * allocations, scattered over the spans the teardown empties, and would keep them in
	 * use. While the arena has resident free pages to spare, that costs no memory (the
	 * next span of another class takes those) and the blocks serve the class's next
	 * burst; short of them, they go back to their spans with the flush, so that the
	 * emptied spans' pages serve the next span of any class instead of new ones. */
	if (!kept && a->xfer && a->xfer_n[cls] && !arena_dirty_at_least(a, XF_SPARE_PAGES))
		xfer_drain_class(a, cls);
	uint32_t back = cold && (size_t)n * sc_size[cls] >= LA_PAGE
	                        ? uncarve_tail(a, cls, blocks, n)
	                        : 0; /* (cold: none kept) */
	push_blocks(a, cls, blocks + kept + back, n - kept - back);
	if (cold)
		release_spare(a, cls);
	/* the transfer cache's blocks stay allocated, as cached (a trim or release returns
	 * them to their spans) */
	STAT_SUB_LOCKED(a->c, allocated_bytes, (uint64_t)(n - kept) * sc_size[cls]);
	cached_add(a, (uint64_t)kept * sc_size[cls]);
	STAT_ADD_LOCKED(a->c, cache_flushes, 1);
	STAT_SUB_LOCKED(&a->cs[cls], blocks_in_use, n);
	STAT_ADD_LOCKED(&a->cs[cls], flushes, 1);
	__atomic_store_n(&a->work, a->work + 1, __ATOMIC_RELAXED);
	arena_unlock(a);
	shm_note_retained(); /* the decay pass releases spans that empty and cold caches */
}

void arena_free_blocks(struct arena *a, void *const *blocks, uint32_t n, unsigned cls,
                       enum flush_how how)
{
	free_blocks(a, blocks, n, cls, how);
}

void arena_free_blocks_full(struct arena *a, void *const *blocks, uint32_t n, unsigned cls)
{
	free_blocks(a, blocks, n, cls, FLUSH_FULL);
}

void arena_free_local(struct arena *a, void *p)
{
	arena_lock(a);
	free_block_locked(a, p);
	arena_unlock(a);
}

void arena_free_large(struct arena *a, struct heap *h, struct span *s)
{
	arena_lock(a);
	free_large_locked(a, h, s);
	arena_unlock(a);
}

void arena_large_return(struct arena *a, struct span *const *v, uint32_t n, bool park_last)
{
	arena_lock(a);
	unpark(a);
	for (uint32_t i = 0; i < n; i++) {
		struct span *s = v[i];
		if (park_last && i == n - 1) {
			free_large_locked(a, heap_of(s), s);
			break;
		}
		STAT_SUB_LOCKED(a->c, allocated_bytes, (uint64_t)s->npages << LA_PAGE_SHIFT);
		s->offset = 0;
		large_sample(a, heap_of(s), s);
		heap_note_start(heap_of(s), s);
		free_pages(a, heap_of(s), s); /* kind SPAN_LARGE: in use until now */
	}
	if (n)
		op_measure_soon(); /* their pages count resident whole (free_large_locked) */
	arena_unlock(a);
}

void arena_free_remote(struct arena *a, void *p)
{
	struct cds_wfcq_node *node = p;
	if (LA_REMOTE_LOCKED) {
		arena_lock(a);
		free_block_locked(a, p);
		arena_unlock(a);
		STAT_ADD(a->c, remote_frees_queued, 1);
		STAT_ADD(a->c, remote_frees_drained, 1);
		return;
	}
	cds_wfcq_node_init(node);
	cds_wfcq_enqueue(&a->rq_head, &a->rq_tail, node);
	remote_note(a);
	STAT_ADD(a->c, remote_frees_queued, 1);
	shm_note_retained(); /* a decay pass drains it if the owner's threads stay idle */
}

void arena_free_any(struct arena *owner, struct arena *mine, void *p)
{
	if (owner == mine) {
		arena_free_local(owner, p);
	} else if (__atomic_load_n(&owner->threads, __ATOMIC_RELAXED) == 0) {
		STAT_ADD(owner->c, remote_frees_locked, 1);
		arena_free_local(owner, p);
	} else {
		arena_free_remote(owner, p);
	}
}

/* Do n frees of owner's blocks by this thread (arena mine) go under owner's lock rather
 * than to its queue or ring? So when owner is this thread's own arena, has no threads left
 * to drain them, or remote frees are built locked (LA_REMOTE_LOCKED); counted here. */
static bool remote_frees_here(struct arena *owner, struct arena *mine, uint64_t n)
{
	bool unowned = __atomic_load_n(&owner->threads, __ATOMIC_RELAXED) == 0;
	if (owner != mine && !unowned && !LA_REMOTE_LOCKED)
		return false;
	if (owner != mine && unowned)
		STAT_ADD(owner->c, remote_frees_locked, n);
	else if (owner != mine) { /* LA_REMOTE_LOCKED */
		STAT_ADD(owner->c, remote_frees_queued, n);
		STAT_ADD(owner->c, remote_frees_drained, n);
	}
	return true;
}

void arena_free_remote_batch(struct arena *owner, struct arena *mine, struct __cds_wfcq_head *head,
                             struct cds_wfcq_tail *tail, uint64_t n)
{
	struct cds_wfcq_node *node, *next;
	if (remote_frees_here(owner, mine, n)) {
		struct free_tally t;
		t.bytes = t.cached = t.mask = 0; /* blocks[] counts from a class's first free */
		arena_lock(owner);
		__cds_wfcq_for_each_blocking_safe(head, tail, node, next)
		        free_block_tallied(owner, node, &t);
		tally_apply(owner, &t);
		arena_unlock(owner);
		return;
	}
	__cds_wfcq_splice_blocking(&owner->rq_head, &owner->rq_tail, head, tail);
	remote_note(owner);
	STAT_ADD(owner->c, remote_frees_queued, n);
	shm_note_retained(); /* a decay pass drains it if the owner's threads stay idle */
}

/* The rings' mapping (ring_get): a leaf lock, taken last by a fork (arena_lock_all). */
struct la_lock arena_ring_lock = LA_LOCK_INIT;

/* The ring's slots, mapped by the first thread that needs them (NULL without memory: the
 * queue serves). Never unmapped while the process lives (arenas are never destroyed).
 * Mapped, set and counted under arena_ring_lock, which a fork holds from its snapshot of
 * the gauges to the clone: a child holds a ring's mapping exactly when its gauges count it
 * (mapped and set with no lock, a fork between the mapping and the count left the child a
 * mapping neither its metadata nor its address space counted). Not the arena's lock: a
 * full flush that found it taken hands its blocks to the ring without waiting for it. */
static void **ring_get(struct arena *a)
{
	void **r = __atomic_load_n(&a->rr, __ATOMIC_ACQUIRE);
	if (likely(r != NULL))
		return r;
	struct la_counters *pc = &shm_process_block()->c;
	la_lock(&arena_ring_lock);
	r = __atomic_load_n(&a->rr, __ATOMIC_RELAXED);
	if (!r) {
		r = os_map(RR_SLOTS * sizeof(void *), pc);
		if (r) {
			STAT_ADD(pc, metadata_bytes, RR_SLOTS * sizeof(void *));
			STAT_ADD(pc, address_space_bytes, RR_SLOTS * sizeof(void *));
			__atomic_store_n(&a->rr, r, __ATOMIC_RELEASE);
		}
	}
	la_unlock(&arena_ring_lock);
	return r;
}

/* Reserve n slots of owner's ring and fill them with blocks; false (nothing done) when
 * the ring has no room or another thread reserved at the same moment. */
static bool ring_put(struct arena *owner, void *const *blocks, uint32_t n, uintptr_t tag)
{
	void **r = ring_get(owner);
	if (!r)
		return false;
	uint64_t h = __atomic_load_n(&owner->rr_head, __ATOMIC_RELAXED);
	uint64_t t = __atomic_load_n(&owner->rr_tail, __ATOMIC_ACQUIRE);
	/* slots below rr_tail were emptied by the drain before it moved rr_tail past them */
	if (h - t + n > RR_SLOTS ||
	    !__atomic_compare_exchange_n(&owner->rr_head, &h, h + n, false, __ATOMIC_RELAXED,
	                                 __ATOMIC_RELAXED))
		return false;
	/* a deferred flush's first block also carries RR_FLUSH (the class's flush counted
	 * at the drain) */
	for (uint32_t i = 0; i < n; i++)
		__atomic_store_n(
		        &r[(h + i) & (RR_SLOTS - 1)],
		        (void *)((uintptr_t)blocks[i] | tag | (i == 0 && tag ? RR_FLUSH : 0)),
		        __ATOMIC_RELEASE);
	remote_note(owner);
	return true;
}

void arena_free_remote_array(struct arena *owner, struct arena *mine, void *const *blocks,
                             uint32_t n)
{
	if (!n)
		return;
	if (remote_frees_here(owner, mine, n)) {
		struct free_tally t;
		t.bytes = t.cached = t.mask = 0; /* blocks[] counts from a class's first free */
		arena_lock(owner);
		for (uint32_t i = 0; i < n; i++)
			free_block_tallied(owner, blocks[i], &t);
		tally_apply(owner, &t);
		arena_unlock(owner);
		return;
	}
	if (ring_put(owner, blocks, n, 0)) {
		STAT_ADD(owner->c, remote_frees_queued, n);
		shm_note_retained(); /* a decay pass drains it if the owner's threads stay idle */
		return;
	}
	/* linked into a queue of their own, newest last, and handed over as one */
	struct __cds_wfcq_head head;
	struct cds_wfcq_tail tail;
	__cds_wfcq_init(&head, &tail);
	for (uint32_t i = 0; i < n; i++) {
		struct cds_wfcq_node *node = blocks[i];
		cds_wfcq_node_init(node);
		cds_wfcq_enqueue(&head, &tail, node);
	}
	arena_free_remote_batch(owner, mine, &head, &tail, n);
}

/* Blocks drained from the ring at a time: those that go to their spans are freed after
 * the batch's slots are taken and handed back to the writers */
#define RR_DRAIN 32u

/* The slots of the transfer cache a block of class cls may take in a drain: it does while
 * the class holds fewer (lock held; the earned depth, the slots, the class's byte bound:
 * xfer_fits less the arena's bytes; 0 for a class it does not keep or without slots). */
static uint32_t xfer_room(const struct arena *a, unsigned cls)
{
	if (!a->xfer || !xfer_class(cls))
		return 0;
	uint32_t room = LA_MIN(xfer_depth(a), XF_SLOTS);
	return LA_MIN(room, XF_CLASS_BYTES / sc_size[cls]);
}

/* The filled slots of a's ring, in order, freed (lock held); how many, *deferred of them
 * flushes of a's own threads (RR_DEFERRED). A small block goes into the transfer cache as
 * its slot is read, while the cache takes it (xfer_room and the arena's bytes; the next
 * refills hand it out as a pointer: no span push now, no pop then); the class's room is
 * looked up once a drain (t->room, set with the class's tally at its first block: every
 * small block of the ring passes here before free_block_tallied may see it). The rest go
 * to their spans once the batch's slots are handed back. Each block is prefetched (for
 * the span's link, or for the write of the malloc that takes it from the cache). A slot
 * with RR_FLUSH began a deferred flush, counted as its class's flush. The drain was two
 * passes, a batch's pointers gathered then put one by one with the bounds' tests each
 * time: ~87 instructions a block, ~61 so (xthreads35's entry in bench/README.md). */
static uint64_t ring_drain(struct arena *a, struct free_tally *t, uint64_t *deferred)
{
	void **r = __atomic_load_n(&a->rr, __ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&a->rr_tail, __ATOMIC_RELAXED);
	uint64_t head = __atomic_load_n(&a->rr_head, __ATOMIC_ACQUIRE);
	struct xfer_slots *x = a->xfer;
	uint64_t count = 0, cached = 0;
	while (tail != head) {
		void *spans[RR_DRAIN];
		uint32_t k = 0, n = 0;
		while (k < RR_DRAIN && tail != head) {
			void **slot = &r[tail & (RR_SLOTS - 1)];
			void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
			if (!p) /* reserved, not filled yet: the next drain takes it */
				break;
			__atomic_store_n(slot, NULL, __ATOMIC_RELAXED);
			tail++;
			k++;
			uintptr_t tag = (uintptr_t)p & (RR_DEFERRED | RR_FLUSH);
			p = (void *)((uintptr_t)p ^ tag);
			__builtin_prefetch(p, 1);
			struct heap *h = heap_of(p);
			uint32_t e = h->pagemap[heap_page_of(h, p)];
			if (unlikely(tag)) {
				*deferred += tag & RR_DEFERRED;
				if ((tag & RR_FLUSH) && pm_small(e))
					STAT_ADD_LOCKED(&a->cs[pm_class(e)], flushes, 1);
			}
			if (likely(pm_small(e))) {
				unsigned cls = pm_class(e);
				if (unlikely(!(t->mask >> cls & 1))) {
					t->mask |= (uint64_t)1 << cls;
					t->blocks[cls] = 0;
					t->room[cls] = (uint16_t)xfer_room(a, cls);
				}
				uint32_t have = a->xfer_n[cls], size = sc_size[cls];
				if (likely(have < t->room[cls] &&
				           a->xfer_bytes + size <= XF_ARENA_BYTES)) {
					x->chunk[have / XF_CHUNK][cls][have % XF_CHUNK] = p;
					a->xfer_n[cls] = (uint16_t)(have + 1);
					a->xfer_bytes += size;
					cached += size;
					t->blocks[cls]++;
					if (unlikely(have % XF_CHUNK == 0 &&
					             have / XF_CHUNK >= a->xfer_chunks))
						xfer_chunk_written(a, have / XF_CHUNK + 1);
					continue;
				}
				if (x && xfer_fits(a, cls, have + 1, size)) /* a chunk not earned */
					a->xfer_over |= (uint64_t)1 << cls;
			}
			spans[n++] = p;
		}
		/* the slots are free for the writers once rr_tail has passed them */
		__atomic_store_n(&a->rr_tail, tail, __ATOMIC_RELEASE);
		for (uint32_t i = 0; i < n; i++)
			free_block_tallied(a, spans[i], t);
		count += k;
		if (k < RR_DRAIN)
			break;
	}
	t->cached += cached;
	/* emptied: the next batch starts at slot 0 (the slots up to there reserved and left
	 * empty), so the pages touched are those of the most blocks in flight, not the whole
	 * ring. One try: a writer that reserved meanwhile keeps its place. A writer that read
	 * rr_head before this and rr_tail after sees no room (queue). */
	if (count && tail == head && (head & (RR_SLOTS - 1)) != 0) {
		uint64_t next = (head | (RR_SLOTS - 1)) + 1;
		if (__atomic_compare_exchange_n(&a->rr_head, &head, next, false, __ATOMIC_RELAXED,
		                                __ATOMIC_RELAXED))
			__atomic_store_n(&a->rr_tail, next, __ATOMIC_RELEASE);
	}
	return count;
}

/* A decay pass's look at a's ring (lock held, drained): empty and unmoved since the last
 * pass, its pages go back to the system (a service gone idle, a program past its threaded
 * phase hold none of it). The writers are kept out meanwhile by reserving the whole ring
 * (they find no room and use the queue); its slots are all empty, and read back as such.
 * True while the ring may hold pages to return at a later pass. */
static bool ring_return(struct arena *a)
{
	void **r = __atomic_load_n(&a->rr, __ATOMIC_ACQUIRE);
	if (!r)
		return false;
	uint64_t head = __atomic_load_n(&a->rr_head, __ATOMIC_ACQUIRE);
	if (head == a->rr_bare)
		return false; /* nothing written since the last return */
	if (head != a->rr_seen || head != __atomic_load_n(&a->rr_tail, __ATOMIC_RELAXED)) {
		a->rr_seen = head; /* in use: the next pass looks again */
		return true;
	}
	uint64_t next = (head | (RR_SLOTS - 1)) + 1 + RR_SLOTS; /* the whole ring */
	if (!__atomic_compare_exchange_n(&a->rr_head, &head, next, false, __ATOMIC_ACQUIRE,
	                                 __ATOMIC_RELAXED))
		return true;
	os_purge(r, RR_SLOTS * sizeof(void *), &shm_process_block()->c);
	a->rr_seen = a->rr_bare = next;
	__atomic_store_n(&a->rr_tail, next, __ATOMIC_RELEASE);
	return false;
}

void arena_drain(struct arena *a)
{
	struct __cds_wfcq_head head;
	struct cds_wfcq_tail tail;
	struct cds_wfcq_node *node, *n;
	/* cleared first (a full barrier): a hand-over after this sets it again, one before it
	 * is seen below */
	if (__atomic_load_n(&a->rq_pending, __ATOMIC_RELAXED))
		__atomic_exchange_n(&a->rq_pending, 0, __ATOMIC_ACQ_REL);
	bool ring = ring_pending(a);
	if (!ring && cds_wfcq_empty(&a->rq_head, &a->rq_tail))
		return;
	uint64_t count = 0, deferred = 0;
	struct free_tally t;
	t.bytes = t.cached = t.mask = 0; /* blocks[] counts from a class's first free */
	if (ring)
		count = ring_drain(a, &t, &deferred);
	__cds_wfcq_init(&head, &tail);
	if (__cds_wfcq_splice_blocking(&head, &tail, &a->rq_head, &a->rq_tail) !=
	    CDS_WFCQ_RET_SRC_EMPTY) {
		__cds_wfcq_for_each_blocking_safe(&head, &tail, node, n)
		{
			free_block_tallied(a, node, &t);
			count++;
		}
	}
	if (!count)
		return;
	if (count > deferred)
		STAT_ADD(a->c, remote_frees_drained, count - deferred);
	tally_apply(a, &t);
}

/* ---- large blocks -------------------------------------------------------------------- */

/* A large request of at least this many pages (160 KiB) that the parked block does not fit
 * exactly takes its first pages when it is longer, or grows it into the free pages right
 * after it when those are all counted resident; a smaller one leaves it parked for the
 * next block of its size, and takes a free span's resident pages (heap.c's find_fit).
 * The first page of a freed large block is the one page of it that the program surely
 * wrote: its pages count resident whole, but a program may write only the start of a
 * large block (a buffer sized for the worst case), and a block placed elsewhere would
 * start on a page never written, faulted in while the parked one's stays resident and
 * free (under glibc a block split from a free chunk starts on the chunk's header, which
 * glibc wrote).
 * `large_random 8 3000 2 32 1`: first pages not resident when handed out 352 -> 158 of 595
 * heap blocks, faults 3,589 -> 3,379 (glibc 3,236). (PARKED_SPLIT_PAGES: arena.h) */

void *arena_alloc_large(struct arena *a, size_t size, size_t align, bool room, struct span *give)
{
	size_t extra = align > LA_PAGE ? align - LA_PAGE : 0;
	if (size > LA_LARGE_MAX || extra > LA_LARGE_MAX) {
		if (give)
			arena_free_large(a, heap_of(give), give);
		return NULL;
	}
	uint32_t n = (uint32_t)((la_align_up(size, LA_PAGE) + extra) >> LA_PAGE_SHIFT);
	arena_lock(a);
	if (give)
		free_large_locked(a, heap_of(give), give); /* where its free would have put it */
	if (remote_pending(a))
		arena_drain(a);
	struct heap *h;
	struct span *s = a->parked;
	uint32_t had = s ? s->npages : 0, dirty; /* the parked block's pages before a growth */
	if (s && !extra &&
	    (had == n || (n >= PARKED_SPLIT_PAGES &&
	                  (had > n || heap_grow_span(heap_of(s), s, n, true, &dirty))))) {
		/* the parked block becomes this one in place: when it fits exactly, its pages
		 * and page map are as it left them; a longer one gives its first n pages and
		 * the rest goes back to its heap; a shorter one has grown into the free pages
		 * after it, all counted resident (see PARKED_SPLIT_PAGES) */
		h = heap_of(s);
		a->parked = NULL;
		h->spare_pages -= had;
		STAT_SUB_LOCKED(a->c, free_resident_bytes,
		                (uint64_t)a->parked_resident << LA_PAGE_SHIFT);
		heap_idle_update(h);
		s->kind = SPAN_LARGE;
		if (s->npages > n) {
			heap_shrink_span(h, s, n);
			after_free_pages(a, h);
		}
		if (a->parked_resident != had)
			heap_touch(h, s->first, n); /* pages a measurement found not resident */
		STAT_ADD_LOCKED(a->c, allocated_bytes, (uint64_t)n << LA_PAGE_SHIFT);
		arena_unlock(a);
		return span_base(h, s);
	}
	/* up to LARGE_GRID_MAX_PAGES pages on that grid (heap.c, fit_on_grid); not a block
	 * that grows (room: the start of the largest free span), nor an aligned one (extra) */
	uint32_t g = arena_large_grid;
	bool gridded = !room && !extra && g && n <= LARGE_GRID_MAX_PAGES;
	uint32_t grid = gridded && a->large_dense < LARGE_DENSE_AT ? g | HEAP_GRID_ALWAYS : 1;
	/* blocks of up to LARGE_HEAP_MAX_PAGES pages from heaps of large blocks (not a block
	 * that grows, nor an aligned one), once the arena took LARGE_HEAP_AFTER of them from
	 * the others */
	bool large = !room && !extra && n <= LARGE_HEAP_MAX_PAGES;
	if (large && a->large_heap_wait < LARGE_HEAP_AFTER) {
		a->large_heap_wait++;
		large = false;
	}
	int saved = errno;
	s = alloc_pages(a, n, grid, false, false, room, large, &h, &dirty);
	if (!s && large) {
		/* no heap of large blocks could be mapped (an address-space limit): the other
		 * heaps' room, as before LARGE_HEAP_AFTER, errno kept; the next LARGE_HEAP_AFTER
		 * requests go there before the mapping is tried again (not three refused mmaps
		 * at every malloc) */
		a->large_heap_wait = 0;
		errno = saved;
		s = alloc_pages(a, n, grid, false, false, room, false, &h, &dirty);
	}
	if (!s) {
		arena_unlock(a);
		return NULL;
	}
	s->kind = SPAN_LARGE;
	s->offset = 0;
	char *base = span_base(h, s);
	if (extra) {
		/* give the pages before the aligned start and after the block back */
		uintptr_t aligned = la_align_up((uintptr_t)base, align);
		uint32_t lead = (uint32_t)((aligned - (uintptr_t)base) >> LA_PAGE_SHIFT);
		uint32_t keep = (uint32_t)(la_align_up(size, LA_PAGE) >> LA_PAGE_SHIFT);
		if (lead) {
			struct span *t = heap_split_span(h, s, lead);
			free_pages(a, h, s);
			s = t;
		}
		heap_shrink_span(h, s, keep);
		base = span_base(h, s);
	}
	heap_map_span(h, s, false);
	/* a block that may go on the grid is populated ahead only once the probes found the
	 * program writing such blocks whole (large_probe): one that writes only their start
	 * would have every page of them faulted in for nothing. Otherwise its first page, if
	 * fresh, is (the page the program surely writes: heap_populate_first). */
	if (!extra && heap_populate_may(h, s, dirty) && TUN(madvise_throttle) &&
	    (!gridded || a->large_dense >= LARGE_DENSE_AT) &&
	    !arena_dirty_at_least(a, HEAP_HOLES_PAGES)) /* no holes a growth could take */
		heap_populate_ahead(h, s, dirty);
	else if (gridded && dirty < s->npages && TUN(madvise_throttle))
		heap_populate_first(h, s);
	if (gridded)
		large_probe(a, h, s);
	heap_touch(h, s->first, s->npages); /* the program may write all of it */
	STAT_ADD_LOCKED(a->c, allocated_bytes, (uint64_t)s->npages << LA_PAGE_SHIFT);
	__atomic_store_n(&a->work, a->work + 1, __ATOMIC_RELAXED);
	arena_unlock(a);
	return base;
}

void *arena_alloc_resident(struct arena *a, size_t size)
{
	if (size > LA_LARGE_MAX)
		return NULL;
	uint32_t n = (uint32_t)(la_align_up(size, LA_PAGE) >> LA_PAGE_SHIFT);
	arena_lock(a);
	struct span *s = NULL;
	struct heap *h;
	for (h = a->heaps; h; h = h->next)
		if ((s = heap_alloc_resident(h, n)) != NULL)
			break;
	if (!s) {
		arena_unlock(a);
		return NULL;
	}
	s->kind = SPAN_LARGE;
	s->offset = 0;
	heap_map_span(h, s, false);
	heap_touch(h, s->first, s->npages);
	STAT_ADD_LOCKED(a->c, allocated_bytes, (uint64_t)n << LA_PAGE_SHIFT);
	arena_unlock(a);
	return span_base(h, s);
}

void *arena_alloc_meta(struct arena *a, size_t size, uint64_t counted, uint64_t *was_resident)
{
	uint32_t n = (uint32_t)(la_align_up(size, LA_PAGE) >> LA_PAGE_SHIFT), dirty;
	struct heap *h;
	arena_lock(a);
	struct span *s = alloc_pages(a, n, 1, true, false, false, false, &h, &dirty);
	if (s) {
		s->kind = SPAN_META;
		s->offset = 0;
		heap_map_span(h, s, false);
		if (was_resident) {
			*was_resident = 0;
			for (uint32_t i = 0; i < n && i < 64; i++) {
				uint32_t pg = s->first + i;
				*was_resident |= (h->resident[pg >> 6] >> (pg & 63) & 1) << i;
			}
		}
		/* the allocator's own data: metadata as the caller counts it, not data pages */
		heap_untouch(h, s->first, n);
		STAT_ADD_LOCKED(a->c, metadata_bytes, counted);
	}
	arena_unlock(a);
	return s ? span_base(h, s) : NULL;
}

static void free_meta_locked(struct arena *a, void *p, uint64_t counted)
{
	struct heap *h = heap_of(p);
	struct span *s = span_at(h, heap_page_of(h, p));
	STAT_SUB_LOCKED(a->c, metadata_bytes, counted);
	/* data pages from now on: those it wrote count resident (a measurement says which) */
	heap_measure_range(h, s->first, s->npages);
	s->kind = SPAN_LARGE; /* heap_free_pages takes any in-use span */
	free_pages(a, h, s);
}

void arena_free_meta(struct arena *a, void *p, uint64_t counted)
{
	arena_lock(a);
	free_meta_locked(a, p, counted);
	arena_unlock(a);
}

uint32_t arena_moves;

bool arena_move_large(void *p, void *q)
{
	struct heap *h = heap_of(p), *hq = heap_of(q);
	struct span *s = span_at(h, heap_page_of(h, p));
	uint32_t n = s->npages;
	if (n < MOVE_FROM_PAGES || s->offset || ((uintptr_t)q & (LA_PAGE - 1)) ||
	    __atomic_load_n(&h->moves, __ATOMIC_RELAXED) >= MOVE_MAX_PER_HEAP ||
	    __atomic_load_n(&hq->moves, __ATOMIC_RELAXED) >= MOVE_MAX_PER_HEAP ||
	    __atomic_load_n(&arena_moves, __ATOMIC_RELAXED) >= MOVE_MAX_PER_PROCESS ||
	    heap_huge_in(h, s->first, n) || heap_huge_in(hq, heap_page_of(hq, q), n))
		return false;
	size_t bytes = (size_t)n << LA_PAGE_SHIFT;
	if (os_resident(q, bytes) > bytes / 4 || os_address_space_limited())
		return false;
	/* counted whether it moved or not (a refused move may have split the mappings too);
	 * atomic: q's heap may be another arena's */
	__atomic_fetch_add(&h->moves, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&arena_moves, 1, __ATOMIC_RELAXED);
	if (hq != h)
		__atomic_fetch_add(&hq->moves, 1, __ATOMIC_RELAXED);
	if (os_move_out(p, bytes, q, h->c) != 0)
		return false;
	struct arena *a = h->arena;
	arena_lock(a);
	large_sample(a, h, s);
	STAT_SUB_LOCKED(a->c, allocated_bytes, bytes);
	heap_untouch(h, s->first, n); /* (q's were counted resident when it was allocated) */
	free_pages(a, h, s);
	arena_unlock(a);
	return true;
}

bool arena_resize_large(struct arena *a, void *p, size_t size)
{
	struct heap *h = heap_of(p);
	if (size > LA_LARGE_MAX)
		return false;
	bool ok = false;
	arena_lock(a);
	struct span *s = span_at(h, pm_head(h->pagemap[heap_page_of(h, p)]));
	/* (a block coloured by malloc starts s->offset bytes into its first page) */
	uint32_t want = (uint32_t)(la_align_up(size + s->offset, LA_PAGE) >> LA_PAGE_SHIFT);
	uint32_t have = s->npages;
	if (s->offset < LA_PAGE && want <= have) {
		if (want < have && want * 4 >= have) { /* shrink in place, keep the tail if small */
			heap_shrink_span(h, s, want);
			op_measure_soon(); /* the tail counts resident whole */
			STAT_SUB_LOCKED(a->c, allocated_bytes,
			                (uint64_t)(have - want) << LA_PAGE_SHIFT);
			after_free_pages(a, h);
			ok = true;
		} else {
			ok = want == have;
		}
	} else if (s->offset < LA_PAGE) {
		uint32_t dirty;
		if (heap_grow_span(h, s, want, false, &dirty)) {
			heap_touch(h, s->first + have, want - have);
			STAT_ADD_LOCKED(a->c, allocated_bytes,
			                (uint64_t)(want - have) << LA_PAGE_SHIFT);
			ok = true;
		}
	}
	arena_unlock(a);
	return ok;
}

/* ---- maintenance --------------------------------------------------------------------- */

/* Give back the transfer cache's blocks, the empty spans and the parked large block kept
 * for reuse (lock held): trims, releases and the decay pass must not find a heap pinned by
 * a span nobody uses. */
static void release_empty_spans(struct arena *a)
{
	xfer_drain(a);
	unpark(a);
	a->batch_kept = 0; /* all of them go */
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		for (struct span *s = a->partial[c], *next; s; s = next) {
			next = s->next;
			if (s->used == 0)
				release_span(a, heap_of(s), s);
		}
}

/* A trim or a release (an operator's, a pressure policy's) gives back what was prepared for
 * a predicted burst like any free page (lock held): the preparation stops for this burst,
 * the pages no longer count as prepared nor hold the throttle back; the burst still counts
 * as a hit if it comes, a miss if not. */
static void burst_cancel(struct arena *a)
{
	struct burst_watch *w = &a->burst;
	if (!w->holding)
		return;
	burst_unprepare(w);
	w->holding = 0;
	w->want = w->done;
}

void arena_trim(struct arena *a, size_t pad)
{
	arena_lock(a);
	burst_cancel(a);
	arena_drain(a);
	release_empty_spans(a);
	uint32_t keep = (uint32_t)(pad >> LA_PAGE_SHIFT);
	for (struct heap *h = a->heaps, *next; h && !os_goal_met(); h = next) {
		next = h->next;
		if (h->used_pages == 0 && heap_has_sibling(a, h) && TUN(idle_heap_release)) {
			release_heap(a, h);
			continue;
		}
		heap_purge(h, keep);
		keep = 0; /* the pad is kept once per arena */
	}
	arena_unlock(a);
}

void arena_release_idle(struct arena *a, bool all)
{
	arena_lock(a);
	burst_cancel(a);
	arena_drain(a);
	release_empty_spans(a);
	for (struct heap *h = a->heaps, *next; h && !os_goal_met(); h = next) {
		next = h->next;
		if (h->used_pages != 0 || (!all && !heap_has_sibling(a, h)))
			continue;
		release_heap(a, h);
	}
	arena_unlock(a);
}

/* Measure what the arena counts as free resident (lock held): its heaps' free pages, the
 * parked block, whose pages the program may have touched only in part, and empty small
 * spans, whose pages count from the carving of their blocks: blocks carved into a thread
 * cache and flushed back unused were never written. */
static void measure_locked(struct arena *a, const uint32_t *gone_by)
{
	for (struct heap *h = a->heaps; h; h = h->next)
		heap_measure(h, gone_by);
	struct span *s = a->parked;
	if (s) {
		int32_t gone = (int32_t)heap_measure_range(heap_of(s), s->first, s->npages);
		if (gone) { /* (no write where nothing changed: heap_measure) */
			a->parked_resident = (uint32_t)((int32_t)a->parked_resident - gone);
			STAT_SUB_LOCKED(a->c, free_resident_bytes,
			                (uint64_t)((int64_t)gone * LA_PAGE));
		}
	}
	for (unsigned cls = 0; cls < LA_NCLASSES; cls++)
		for (s = a->partial[cls]; s; s = s->next) {
			if (s->used)
				continue;
			int32_t gone = (int32_t)heap_measure_range(heap_of(s), s->first, s->npages);
			if (gone)
				STAT_SUB_LOCKED(a->c, free_resident_bytes,
				                (uint64_t)((int64_t)gone * LA_PAGE));
		}
}

void arena_measure(struct arena *a)
{
	arena_lock(a);
	measure_locked(a, NULL);
	arena_unlock(a);
}

bool arena_decay(struct arena *a, uint32_t tick, uint32_t stale, uint32_t *due)
{
	bool full = tick % HEAP_PERIOD == 0;
	if (stale != tick)
		arena_lock(a); /* the stamps must be mended before a pass reads them */
	else if (!la_trylock(&a->lock)) {
		*due = tick + HEAP_TICK; /* busy: the next pass looks */
		return true;
	}
	arena_drain(a);
	if (full)
		release_empty_spans(a); /* their pages age from now on */
	/* pages free since before the tick HEAP_DECAY_TICKS ago: free for decay_ms */
	uint32_t before = tick - HEAP_PERIOD, oldest = tick;
	for (struct heap *h = a->heaps; h; h = h->next) {
		heap_purge_aged(h, before, stale, &oldest);
		if (full && h->purge_shift)
			h->purge_shift--;
	}
	/* what stays is measured once a period: large blocks the program touched in part.
	 * Not the spans the next tick returns (stamped from `before` up to before + HEAP_TICK):
	 * their counts go with their purge a tick later, whatever the measurement found (an
	 * older one still here is one whose purge was refused just now: measured). A forked
	 * child's pass read its parent's last freed spans with mincore at one tick and purged
	 * them at the next (the fork loop's decay child: 2 of its ~5.5 mincore calls) */
	uint32_t gone_by[2] = {before, before + HEAP_TICK};
	if (full)
		measure_locked(a, gone_by);
	bool aging = false, held = a->parked != NULL, queued = remote_pending(a);
	held |= ring_return(a);
	for (struct heap *h = a->heaps; h; h = h->next) {
		aging |= h->dirty_pages != 0; /* younger pages */
		held |= h->purge_shift != 0;  /* a purge refused */
	}
	arena_unlock(a);
	/* the first tick at which a pass finds something to do here: the next full pass (what
	 * only it returns), the oldest page left coming of age (one a purge refused: the next
	 * tick), frees queued meanwhile (the next tick) */
	uint32_t next = tick + HEAP_PERIOD - tick % HEAP_PERIOD;
	uint32_t ripe = (oldest + HEAP_PERIOD + HEAP_TICK) & ~(HEAP_TICK - 1);
	if ((int32_t)(ripe - tick) <= 0 || queued)
		ripe = tick + HEAP_TICK;
	if ((aging || queued) && (int32_t)(ripe - next) < 0)
		next = ripe;
	if ((aging || held || queued) && (int32_t)(next - *due) < 0)
		*due = next;
	return aging || held || queued;
}

/* Fork. A fork does not stop the other threads, and it copies the address space page by
 * page while they run: whatever they change without a lock during the copy reaches the
 * child torn. An enqueue on a remote-free queue exchanges the tail (in this library's
 * data) and then writes the old tail's link (in a heap page); the child can see the first
 * without the second, and a node's own link as it was before its free. No walk of the
 * child's copy can be trusted, and a wait for a missing link never ends there: the thread
 * that would write it does not exist in the child. So the queues are drained here, in
 * the parent, under each arena's lock (every link is written in time here), and reset
 * in the child: it loses only the frees enqueued between this drain and the copy (blocks
 * of the parent's other threads, like the blocks in their caches). */
void arena_lock_all(void)
{
	la_lock(&arenas_lock);
	uint32_t n = arena_count;
	for (uint32_t i = 0; i < n; i++) {
		la_lock(&arenas[i].lock);
		arena_drain(&arenas[i]);
		/* the transfer cache's blocks go back to their spans here too, in the parent's
		 * own pages: a child that trims, or whose decay pass sweeps the cache, would
		 * otherwise write a link into each, a copy-on-write fault per page to give it
		 * back (the fork loop's children: 280-420 faults each, ~125 with this) */
		xfer_drain(&arenas[i]);
		/* and the parked large block to its heap's free pages: the child's trim or
		 * decay pass would give it back there, writing its descriptor, its neighbours'
		 * and the heap's free bins in pages it shares with this process, a copy-on-write
		 * fault each (5.4 a child in the fork loop). Without the throttle's look
		 * (after_free_pages: it may unmap a heap or wake the control thread, with every
		 * arena locked): the next free of the heap or the decay pass makes it. */
		if (arenas[i].parked)
			unpark_pages(&arenas[i]);
	}
	la_lock(&arena_ring_lock); /* (ring_get: no ring mapped and not yet counted) */
}

void arena_unlock_all(void)
{
	la_unlock(&arena_ring_lock);
	uint32_t n = arena_count;
	for (uint32_t i = 0; i < n; i++)
		la_unlock(&arenas[i].lock);
	la_unlock(&arenas_lock);
}

bool arena_reinit_child(struct arena *keep)
{
	bool tick = false;
	uint32_t n = arena_count;
	la_lock_reinit(&arena_ring_lock);
	for (uint32_t i = 0; i < n; i++) {
		la_lock_reinit(&arenas[i].lock);
		__cds_wfcq_init(&arenas[i].rq_head, &arenas[i].rq_tail); /* see arena_lock_all */
		/* the ring as the copy found it: slots filled after the drain, or reserved and
		 * never to be filled here; the child starts without one (its copy stays mapped,
		 * never touched again) */
		arenas[i].rr = NULL;
		arenas[i].rr_head = arenas[i].rr_tail = 0;
		arenas[i].rr_seen = arenas[i].rr_bare = 0;
		arenas[i].rq_pending = 0;
		arenas[i].threads = &arenas[i] == keep ? 1 : 0;
		arenas[i].joining = 0; /* the forking thread was not in pthread_join */
		arenas[i].pub->threads = arenas[i].threads;
		/* the parent's bursts are not the child's: a prediction starts over (pages
		 * prepared for it, still stamped, go back at the child's first tick) */
		struct burst_watch *w = &arenas[i].burst;
		burst_forget(&w->pat);
		w->predicted_ns = w->deadline_ns = 0;
		w->want = w->done = 0;
		w->hit = w->holding = w->defer = 0;
		/* what arena_burst_tick still has to do here: the pages prepared and stamped
		 * go back, a burst under way ends (and rebases the level); the child's first
		 * look wants it at once, even where the program holds the arena then */
		bool todo = w->stamp || w->prepared || w->active;
		__atomic_store_n(&w->next_look_ns, todo ? 1 : 0, __ATOMIC_RELAXED);
		tick |= todo;
	}
	la_lock_reinit(&arenas_lock);
	return tick;
}

/* ---- burst preparation (burst.h) ----------------------------------------------------- */

/* A heap_epoch stamp the decay pass leaves alone until `until` (CLOCK_MONOTONIC): the
 * ticks to then, and two more. */
static uint32_t burst_stamp(uint64_t now, uint64_t until)
{
	uint64_t tick = (uint64_t)TUN(decay_ms) * (1000000u / HEAP_DECAY_TICKS), ticks = 2;
	if (tick && until > now)
		ticks += LA_MIN((until - now) / tick, (uint64_t)1 << 20);
	/* a tick's (even: no page freed while the pass sleeps carries it, see heap_skip) */
	uint32_t at = __atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) & ~(HEAP_TICK - 1);
	return at + (uint32_t)ticks * HEAP_TICK;
}

/* The preparation is over (lock held): its pages no longer count as prepared, and no
 * prediction is held. */
static void burst_end_preparation(struct burst_watch *w)
{
	burst_unprepare(w);
	w->stamp = 0;
	w->holding = 0;
	w->predicted_ns = w->deadline_ns = 0;
	w->want = w->done = 0;
	w->hit = 0;
}

/* Give back what is left of the pages prepared (lock held): spans still stamped for the
 * prediction, and heaps that hold nothing. */
static void burst_give_back(struct arena *a)
{
	struct burst_watch *w = &a->burst;
	for (struct heap *h = a->heaps, *next; h; h = next) {
		next = h->next;
		if (h->used_pages == 0 && heap_has_sibling(a, h) && TUN(idle_heap_release))
			release_heap(a, h);
		else if (w->stamp)
			heap_purge_stamped(h, w->stamp);
	}
	burst_end_preparation(w);
}

/* Populate up to BURST_CHUNK_PAGES for the prediction (lock held): in the heap that has
 * fresh free pages, newest first, else in a new heap. False when no more can come in. */
static bool burst_prepare_chunk(struct arena *a)
{
	struct burst_watch *w = &a->burst;
	uint32_t max = LA_MIN(BURST_CHUNK_PAGES, w->want - w->done), k = 0;
	bool failed = false;
	for (struct heap *h = a->heaps; h && !k && !failed; h = h->next)
		k = heap_prepare(h, max, w->stamp, &failed);
	if (!k && !failed) {
		struct heap *h = new_heap(a, false);
		if (!h)
			return false;
		k = heap_prepare(h, max, w->stamp, &failed);
	}
	w->done += k;
	w->prepared += k;
	STAT_ADD_LOCKED(a->c, burst_prepared_bytes, (uint64_t)k << LA_PAGE_SHIFT);
	return k && !failed;
}

/* One chunk; at the end of the preparation (all in, or no more could come) its time per
 * page is the rate the next lead is computed from: measured from its start to its end,
 * waits for the lock and a burst populating beside it included (the lead is then
 * longer: a busy machine populates slower). */
static void burst_prepare_step(struct arena *a)
{
	struct burst_watch *w = &a->burst;
	bool more = burst_prepare_chunk(a);
	if (more && w->done < w->want)
		return;
	uint64_t ns = (os_now_ns() - w->prep_ns) / (w->done ? w->done : 1);
	w->cost_ns = (uint32_t)LA_MIN(LA_MAX(ns, 100u), 1000000u);
	w->want = w->done; /* what could come in */
}

/* May the arena populate `pages` for a prediction? Not while memory pressure is watched
 * in the process, a policy holds a tunable (allocctld's pressure ladder lowers decay_ms),
 * or the memory cgroup would come within PRESSURE_ROOM_SHARE of its limit. */
static bool burst_room(uint32_t pages)
{
	if (pressure_watching())
		return false;
	for (int i = 0; i < LA_NTUNABLES; i++)
		if (__atomic_load_n(&tun_source[i], __ATOMIC_RELAXED) == LA_SRC_policy &&
		    tun_holds[i].expires_ns)
			return false;
	uint64_t room;
	return !pressure_room(&room) || room >= (uint64_t)pages << LA_PAGE_SHIFT;
}

/* A burst that lasts this long is a new level the arena stays at, not a burst. */
#define BURST_LONGEST_NS 20000000000ull

/* The returns a hit burst's frees left (after_free_pages, burst.defer), made once it is
 * over: one heap per hold of the arena lock (a heap unmapped, or its free pages purged as
 * the throttle would have), so a thread still freeing is not held up for the whole
 * give-back; then what is left of the pages prepared for it. Stops if a new preparation
 * or a new deferring burst began meanwhile. */
static void burst_defer_give_back(struct arena *a)
{
	struct burst_watch *w = &a->burst;
	for (bool acted = true; acted;) {
		acted = false;
		arena_lock(a);
		if (w->holding || w->defer) {
			arena_unlock(a);
			return;
		}
		if (a->batch_kept)
			release_batch_kept(a); /* spans kept before the burst */
		for (struct heap *h = a->heaps, *next; h && !acted; h = next) {
			next = h->next; /* h may be unmapped */
			if (w->stamp && heap_purge_stamped(h, w->stamp))
				acted = true;
			else
				acted = give_back_heap(a, h, false);
		}
		if (!acted && w->stamp && !w->predicted_ns)
			burst_end_preparation(w); /* (nothing held: holding was 0) */
		arena_unlock(a);
	}
}

/* The calling thread's arena: NULL without a live cache. */
static struct arena *own_arena(void)
{
	struct tcache *tc = &la_tcache;
	return tc->state == TC_LIVE ? tc->arena : NULL;
}

bool arena_adopt(void *p, size_t len)
{
	struct arena *a = own_arena();
	uint32_t n = (uint32_t)(len >> LA_PAGE_SHIFT);
	if (!a || n > ADOPT_MAX_PAGES)
		return false;
	bool done = false;
	arena_lock(a);
	for (struct heap *h = a->heaps; h && !done; h = h->next)
		done = heap_adopt(h, p, n);
	arena_unlock(a);
	return done;
}

bool arena_short_of(size_t len)
{
	struct arena *a = own_arena();
	if (!a)
		return false;
	arena_lock(a);
	bool is_short = !arena_dirty_at_least(a, len >> LA_PAGE_SHIFT);
	arena_unlock(a);
	return is_short;
}

uint64_t arena_empty_tick(struct arena *a, uint64_t now)
{
	if (!__atomic_load_n(&a->empty_due_ns, __ATOMIC_RELAXED))
		return 0; /* (a racy look: a free that sets it kicks the thread again) */
	arena_lock(a);
	uint64_t due = a->empty_due_ns;
	if (due && now >= due) {
		due = 0;
		__atomic_store_n(&a->empty_due_ns, 0, __ATOMIC_RELAXED);
		for (struct heap *h = a->heaps, *next; h; h = next) {
			next = h->next; /* h may be unmapped */
			if (h->purge_due) {
				h->purge_due = 0;
				give_back_heap(a, h, false); /* the rule looks again */
			}
		}
	}
	arena_unlock(a);
	return due;
}

/* arena_burst_tick with the lock held (it releases it). */
static uint64_t burst_tick(struct arena *a, uint64_t now)
{
	struct burst_watch *w = &a->burst;
	uint64_t due = 0;
	bool give = false;
	if (!TUN(burst_predict)) {
		give = w->defer;
		w->defer = 0;
		if (w->stamp || w->predicted_ns || w->prepared)
			burst_give_back(a);
		burst_forget(&w->pat);
		goto out;
	}
	if (w->defer && !w->active && w->defer_ns) {
		/* the deferring burst is over: once the arena is back near its level before it
		 * and its frees settled (a look BURST_SETTLE_NS after the last saw it fall by
		 * less than BURST_SETTLE_PAGES), or its time is up, the give-backs are due */
		bool settled = w->defer_look_ns && now >= w->defer_look_ns + BURST_SETTLE_NS &&
		               w->used + BURST_SETTLE_PAGES >= w->defer_seen;
		if (now >= w->defer_ns || (w->used <= w->defer_pages && settled)) {
			w->defer = 0;
			give = true;
		} else if (w->used <= w->defer_pages &&
		           (!w->defer_look_ns || now >= w->defer_look_ns + BURST_SETTLE_NS)) {
			w->defer_seen = w->used;
			w->defer_look_ns = now;
		}
	}
	if (w->stamp && !w->holding && !w->predicted_ns && !w->defer && !give)
		burst_give_back(a); /* a burst took what it took: the rest goes back */
	if (w->active) {
		if (now - w->start_ns >= BURST_LONGEST_NS) {
			w->active = 0; /* not a burst: the level it idles at from now on */
			w->base = w->used;
			give |= w->defer;
			w->defer = 0;
		} else if (w->holding && w->done < w->want) {
			/* the burst came before the pages were all in: populate beside it */
			burst_prepare_step(a);
			due = w->done < w->want ? now : w->start_ns + BURST_LONGEST_NS;
		} else {
			due = w->start_ns + BURST_LONGEST_NS;
		}
		goto out;
	}
	if (!w->predicted_ns) {
		struct burst_guess g;
		if (!burst_predict(&w->pat, &g))
			goto out;
		uint64_t window = burst_window_ns(&g);
		if (now > g.next_ns + window) {
			/* its time went by with no burst (no wake-up came in time to prepare):
			 * the pattern is broken */
			burst_forget(&w->pat);
			goto out;
		}
		uint64_t lead = burst_lead_ns(&g, w->cost_ns ? w->cost_ns : w->seen_cost_ns);
		if (now + lead < g.next_ns) {
			due = g.next_ns - lead;
			goto out;
		}
		w->guess = g;
		w->predicted_ns = g.next_ns;
		w->deadline_ns = g.next_ns + window;
		w->done = 0;
		w->hit = 0;
		/* the burst takes the resident free pages the arena holds first (those the
		 * decay pass has not returned yet, for a burst that comes within decay_ms):
		 * only the rest is to come */
		uint64_t held = arena_dirty_upto(a, g.pages);
		uint32_t need = held >= g.pages ? 0 : g.pages - (uint32_t)held;
		w->want = need && burst_room(need) ? need : 0;
		if (w->want) {
			w->holding = 1;
			w->stamp = burst_stamp(now, w->deadline_ns);
			w->prep_ns = now;
		}
	}
	if (w->holding && w->done < w->want) {
		burst_prepare_step(a);
		due = now;
	} else if (now >= w->deadline_ns) {
		/* no burst came: its pages go back, and predictions wait for the pattern to
		 * be learnt again. The miss counts once they are back, so that a reader of
		 * the counters that sees it sees burst_prepared_bytes without them. */
		bool missed = w->want != 0;
		burst_give_back(a);
		burst_forget(&w->pat);
		if (missed)
			STAT_ADD_LOCKED(a->c, burst_misses, 1);
	} else {
		due = w->deadline_ns;
	}
out:
	if (w->defer && w->defer_ns && !w->active) {
		/* the next look at a deferring burst's frees, or its time bound. A look is due
		 * only while the arena is back near its level (the block above made it then, so
		 * it is in the future); above that level no look is made, and burst_shrank wakes
		 * the thread when it falls back. While a burst is under way nothing of the
		 * deferral is looked at and its end wakes the thread. A look taken before either
		 * was due again at once: the thread went round its loop without a wait until the
		 * level fell or the burst ended (under callgrind, `trickle 10 40 60 5 6`: 398k
		 * turns, 124M instructions) */
		uint64_t d = w->defer_ns;
		if (w->defer_look_ns && w->used <= w->defer_pages)
			d = LA_MIN(d, w->defer_look_ns + BURST_SETTLE_NS);
		due = la_earlier(due, d);
	}
	__atomic_store_n(&w->next_look_ns, due, __ATOMIC_RELAXED);
	arena_unlock(a);
	if (give)
		burst_defer_give_back(a);
	return due;
}

uint64_t arena_burst_tick(struct arena *a, uint64_t now)
{
	arena_lock(a);
	return burst_tick(a, now);
}

uint64_t arena_burst_look(struct arena *a, uint64_t now, bool kicked)
{
	if (la_trylock(&a->lock))
		return burst_tick(a, now);
	uint64_t next = __atomic_load_n(&a->burst.next_look_ns, __ATOMIC_RELAXED);
	if (kicked) /* wanted until a look gets in (burst_tick stores its own) */
		__atomic_store_n(&a->burst.next_look_ns, next = now + BURST_BUSY_NS,
		                 __ATOMIC_RELAXED);
	if (next && next <= now + BURST_BUSY_NS)
		return now + BURST_BUSY_NS;
	return next; /* what its last look wanted (0: nothing; the next pass looks again) */
}
