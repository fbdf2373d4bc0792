/* malloc.c — the exported entry points. The small-block fast paths (malloc, free) are
 * inline here: a class lookup and a thread-cache pop or push, no lock, no system call.
 * Everything else goes to the slow paths, which also initialise the allocator on first
 * use (safe before main, inside dlsym, in thread destructors). glibc's error semantics:
 * ENOMEM, EINVAL, calloc overflow, realloc(p, 0) frees, free preserves errno. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "control.h"
#include "direct.h"
#include "exports.h"
#include "heap.h"
#include "liballoc.h"
#include "lock.h"
#include "os.h"
#include "shm.h"
#include "sizeclass.h"
#include "tcache.h"
#include "tunables.h"

static uint32_t la_ready;
static struct la_lock init_lock = LA_LOCK_INIT;

LA_COLD static void la_init(void)
{
	la_lock(&init_lock);
	if (!la_ready) {
		la_popcount_boot();
		shm_boot();
		tun_init_from_env();
		tun_publish();
		tcache_boot();
		arena_boot();
		__atomic_store_n(&la_ready, 1, __ATOMIC_RELEASE);
	}
	la_unlock(&init_lock);
}

#define ENSURE_INIT()                                                        \
	do {                                                                 \
		if (unlikely(!__atomic_load_n(&la_ready, __ATOMIC_ACQUIRE))) \
			la_init();                                           \
	} while (0)

/* ---- allocation ------------------------------------------------------------------------ */

/* A heap block of a plain malloc or calloc of more than 1 MiB (LA_COLOUR_FROM) starts
 * LA_COLOUR bytes into its span's first page (the span's offset), not at its start, as
 * glibc's blocks start past their chunk header. A program that writes such a block a page
 * at a time from its start (touching each page, prefaulting) then writes each page's
 * fifth line, not its first: on this machine's Intel cores a run of stores a page apart
 * costs 8.6-11.3 ns a store in a page's first or last two lines and 5.7-6.6 ns elsewhere
 * (bench m2-4mib: 3 us of its ~10 us an iteration; bench/README.md). Its span has one page
 * more when the size is within LA_COLOUR of a multiple of a page (under 0.4 % of it); free
 * and realloc find the block by the offset (free_slow, span_lookup, arena_resize_large).
 * Blocks up to 1 MiB, the large slot's at its default bound, keep free's shortest path
 * (free_large_mine: a block at its span's start). Aligned requests, the blocks realloc
 * moves with room to grow, and mappings of their own start on their page. p: the span's
 * first byte of a request given c (0 or LA_COLOUR) bytes more. */
LA_INLINE void *colour_span(void *p, size_t c)
{
	if (!c)
		return p;
	struct heap *h = heap_of(p);
	span_at(h, heap_page_of(h, p))->offset = (uint32_t)c;
	return (char *)p + c;
}

/* Large (or cache-bypassing) allocation of size bytes aligned to align (>= 16); room: see
 * arena_alloc_large. Inline in malloc_slow (align LA_ALIGN, no fresh, no room folded: one
 * frame and its checks fewer on malloc's large path, medsizes' half of its mallocs), a
 * function of its own for the others (alloc_large). */
LA_INLINE void *alloc_large_in(size_t size, size_t align, bool *fresh, bool room, bool colour)
{
	if (unlikely(size > PTRDIFF_MAX - 2 * LA_PAGE || align > PTRDIFF_MAX / 2 ||
	             size + align > PTRDIFF_MAX)) {
		errno = ENOMEM;
		return NULL;
	}
	ENSURE_INIT();
	/* colour (align LA_ALIGN): a heap block gets LA_COLOUR bytes more (colour_span) */
	size_t c = colour ? LA_COLOUR : 0;
	struct tcache *tc = &la_tcache;
	void *p = NULL;
	if (fresh)
		*fresh = false;
	/* for the cold-bin sweep: a thread whose requests went past the classes (a buffer
	 * realloc grows) sends back the blocks of the classes it left */
	tcache_large_event(tc);
	if ((int64_t)size >= TUN(mmap_threshold) && direct_count() < (uint64_t)TUN(mmap_max)) {
		/* a cached mapping, else a run of free heap pages at least half resident (the
		 * program freed them: a new mapping would fault in all its pages while those
		 * stay; CPython's 580 KiB dict tables found no run all resident, 145 faults
		 * each), else a new mapping */
		if (align <= LA_ALIGN && size <= LA_LARGE_MAX) {
			p = direct_alloc_cached(size, fresh);
			if (p)
				return p;
			p = arena_alloc_resident(tcache_arena(tc), size + c);
			if (!p) /* the cache was looked in just now */
				p = direct_alloc_mapped(size, align, fresh, room);
			else
				p = colour_span(p, c);
		} else {
			p = direct_alloc(size, align, fresh);
		}
	} else {
		/* a mapping above ADOPT_MAX_PAGES freed a moment ago, kept for the heaps: taken
		 * as it is (its pages need no fault nor move) */
		if (unlikely(size > (size_t)ADOPT_MAX_PAGES << LA_PAGE_SHIFT) && align <= LA_PAGE) {
			p = direct_alloc_kept(size);
			if (p)
				return p;
		}
		p = tcache_large_take(tc, size + c, align, room); /* the large slot */
		if (!p)
			p = tcache_alloc_large_slow(tc, size + c, align, room); /* the arena */
		if (p)
			p = colour_span(p, c);
		else
			p = direct_alloc(size, align, fresh);
	}
	if (!p)
		errno = ENOMEM;
	return p;
}

LA_NOINLINE static void *alloc_large(size_t size, size_t align, bool *fresh, bool room, bool colour)
{
	return alloc_large_in(size, align, fresh, room, colour);
}

LA_NOINLINE static void *malloc_slow(size_t n)
{
	ENSURE_INIT();
	if (n <= LA_SMALL_MAX) {
		void *p = tcache_alloc_slow(&la_tcache, sc_class_of(n));
		if (unlikely(!p))
			errno = ENOMEM;
		return p;
	}
	if (unlikely(n >= LA_COLOUR_FROM))
		return alloc_large(n, LA_ALIGN, NULL, false, true);
	return alloc_large_in(n, LA_ALIGN, NULL, false, false);
}

/* malloc_large's request when the large slot had no block for it, or the cold-bin sweep
 * was due (sweep: run it, then look in the slot again): the arena's, as alloc_large_in
 * goes on from the slot (the request is counted: tcache_large_event). */
LA_NOINLINE static void *malloc_large_rest(size_t n, bool sweep)
{
	struct tcache *tc = &la_tcache;
	void *p = NULL;
	if (sweep) {
		tcache_large_sweep(tc);
		p = tcache_large_take(tc, n, LA_ALIGN, false);
	}
	if (!p)
		p = tcache_alloc_large_slow(tc, n, LA_ALIGN, false);
	if (!p)
		p = direct_alloc(n, LA_ALIGN, NULL);
	if (!p)
		errno = ENOMEM;
	return p;
}

/* malloc of more than LA_SMALL_MAX bytes (malloc's last test). A live cache (set up after
 * la_init: the library is ready), up to 1 MiB (no colour: colour_span) and below the
 * mapping threshold: the request counted for the cold-bin sweep, then the large slot's
 * block, as malloc_slow's alloc_large_in takes it, with no frame and none of malloc_slow's
 * tests again (medsizes: half its mallocs, ~100 instructions a hit before); the slot had
 * none, or the sweep is due: malloc_large_rest. Anything else: malloc_slow. */
LA_NOINLINE static void *malloc_large(size_t n)
{
	struct tcache *tc = &la_tcache;
	if (likely(tc->state == TC_LIVE && n < LA_COLOUR_FROM &&
	           (int64_t)n < TUN(mmap_threshold))) {
		if (unlikely(tc_large_count(tc)))
			return malloc_large_rest(n, true);
		/* the slot's take for a cache seen live (n < LA_COLOUR_FROM <= LA_LARGE_MAX,
		 * LA_ALIGN): no second test of the state, no test of the address for NULL,
		 * and gcc 12 then builds malloc_large with no frame (8 instructions less a
		 * hit in all) */
		_Static_assert(LA_COLOUR_FROM <= LA_LARGE_MAX, "malloc_large's n fits the slot");
		struct span *s = tcache_large_take_live(tc, n, false);
		if (likely(s != NULL))
			return span_base(heap_of(s), s);
		return malloc_large_rest(n, false);
	}
	return malloc_slow(n);
}

/* The bin's top, which the caller loaded as top, moves by d slots (1 or -1). On x86-64 one
 * add to memory (`addq`/`subq $8`), where gcc computes top + d into the register and
 * stores it: one instruction fewer in malloc's and free's fast paths (the bin's cache line
 * is in L1 from the load of top; nothing else writes top meanwhile, the cache is entered). */
LA_INLINE void bin_top_step(struct tbin *b, void **top, int d)
{
#if defined(__x86_64__)
	(void)top;
	if (d > 0)
		__asm__ __volatile__("addq $8, %0" : "+m"(b->top));
	else
		__asm__ __volatile__("subq $8, %0" : "+m"(b->top));
#else
	b->top = top + d;
#endif
}

/* Pop the top block of the bin at 8 * ci bytes from bins, NULL when it is empty (cache
 * entered, and left by the caller; bins may be the idle bins: empty). slot[0] is NULL: an
 * empty bin (or the idle bins of a cache a flusher holds) goes to the slow path. */
LA_INLINE void *bin_take(struct tbin *bins, size_t ci)
{
	void **top = ((struct tbin *)((char *)bins + ci * 8))->top;
	void *p = *top;
#if defined(__x86_64__)
	/* p in the return register from its load (an empty asm): gcc 12 put top there and
	 * added a move at the return, one instruction of malloc's 18 */
	__asm__("" : "+a"(p));
#endif
	if (likely(p != NULL)) {
		/* bins and ci opaque: the store addresses the bin as the load did (base, index
		 * and scale), where gcc 12 computed the address into a register first */
		__asm__("" : "+r"(bins), "+r"(ci));
		bin_top_step((struct tbin *)((char *)bins + ci * 8), top, -1);
		((void **)p)[1] = NULL; /* no longer marked free */
	}
	return p;
}

/* bin_take, and the cache left */
LA_INLINE void *bin_pop(struct tcache *tc, struct tbin *bins, size_t ci)
{
	void *p = bin_take(bins, ci);
	tc_leave(tc);
	return p;
}

/* malloc's fast path: a block from this thread's cache, NULL when n is not small, the bin
 * is empty, a flusher holds the cache or it is not set up yet (the slow path). calloc pops
 * here too rather than call the exported malloc, which goes through the PLT (the library's
 * own calls to an exported function can be interposed), and so needs no frame: its memset
 * is a tail call. Up to 1 KiB the bin's offset is 8 times sc_small4[n] (tcache.h), one
 * load indexed by n. */
LA_INLINE void *malloc_pop(size_t n)
{
	struct tcache *tc = &la_tcache;
	if (likely(n <= SC_UPPER_FROM))
		return bin_pop(tc, tc_enter_fast(tc), sc_small4[n]);
	if (likely(n <= LA_SMALL_MAX))
		return bin_pop(tc, tc_enter_fast(tc), sc_class_of(n) * (sizeof(struct tbin) / 8));
	return NULL;
}

/* malloc of class cls (up to 1 KiB) when its fast path found the idle bins (a flusher
 * holds the cache, or it is not set up or has exited): the slow path's (cache left). */
static LA_NOINLINE void *malloc_idle(unsigned cls)
{
	ENSURE_INIT();
	void *p = tcache_alloc_slow(&la_tcache, cls);
	if (unlikely(!p))
		errno = ENOMEM;
	return p;
}

/* malloc of class cls whose empty bin the cache's divert mask sent here (cache entered;
 * left here): the idle bins to the slow path, a class in list mode to its list */
static LA_NOINLINE void *malloc_divert(struct tcache *tc, unsigned cls)
{
	/* the bins as the fast path found them, or its own again (a flusher gave the cache
	 * back since: a refill as the owner is safe then) */
	if (__atomic_load_n(&tc->bins_at, __ATOMIC_RELAXED) == TC_IDLE_BINS) {
		tc_leave(tc);
		return malloc_idle(cls);
	}
	if (tc->lists_out >> cls & 1)
		return tcache_alloc_list(cls);
	return tcache_alloc_refill(cls); /* (a flusher gave the cache back meanwhile) */
}

/* malloc's block from class cls's list (in list mode; bins: the cache's own, the idle bins
 * left before; cache entered; left here): tcache_alloc_list's pop inline in malloc, with no
 * call, no TLS base or list address computed again: the list is at a constant from bins
 * (growth 1000000 100000 96 32: 872k of its 1M mallocs, 8 instructions fewer each: 51 -> 43). The
 * same checks in the same order, each as strong: the next link inside the carved bytes of
 * the list's span (64 bits wide: NULL, the list's end, fails it) and at a block start of
 * its class (a double free's mark, decoded | 8, fails it), then the count not used up by a
 * valid link (a cycle). A NULL head (no list, or used up) or a link failing a check goes
 * to tcache_alloc_list, which reads the same head again and takes its cold paths
 * (list_take; list_last: the last block, or the report); the count used up stops the
 * process as its list_corrupt does. */
LA_INLINE void *malloc_list(struct tcache *tc, struct tbin *bins, unsigned cls)
{
	size_t at = offsetof(struct tcache, lists) - offsetof(struct tcache, bins);
	struct tlist *l = (struct tlist *)((char *)bins + at) + cls;
	void *p = l->head;
	if (unlikely(p == NULL))
		return tcache_alloc_list(cls);
	void *next = link_decode(*(void **)p, p);
	if (unlikely(!tlist_link_ok(l, next)))
		return tcache_alloc_list(cls);
	if (unlikely(--l->left == 0))
		arena_corrupt_list(); /* (tcache_alloc_list's list_corrupt) */
	l->head = next;
	((void **)p)[1] = NULL;
	tc_leave(tc);
	return p;
}

/* malloc of a size whose bin is at 8 * ci bytes (cache entered; left here); lists: pop a
 * class in list mode inline (malloc_list; malloc up to TC_SMALL4_MAX, where every class that
 * takes lists is), else call tcache_alloc_list (the larger sizes, aligned: less code) */
LA_INLINE void *malloc_bin(struct tcache *tc, struct tbin *bins, size_t ci, bool lists)
{
	void *p = bin_take(bins, ci);
	if (likely(p != NULL)) {
		tc_leave(tc);
		return p;
	}
	/* an empty bin: its own (the cache live, set up and held by no flusher) refills
	 * without leaving the cache; the idle bins go to the slow path (below), the
	 * classes in list mode to their list or malloc_divert */
	unsigned cls = (unsigned)(ci >> 2);
	/* the idle bins: the slow path, which tests `steal` (and pops a bin a flusher gave
	 * back meanwhile, which need not be empty). Not the divert mask alone: the owner's
	 * own list-mode store (lists_mode) during a flusher's take can land after the
	 * flusher's store of every class's bit, when the owner found its own bins before
	 * the flusher's store of bins_at and left before its look at `busy`: the take then
	 * holds the cache with classes not diverted, and their refill filled the bin the
	 * flusher was emptying (forkfree 200 4 commands, LIBALLOC_DECAY_MS=1: blocks handed
	 * out twice). Where loads may pass loads, the mask may also be read older than
	 * bins_at. */
	if (unlikely(bins == TC_IDLE_BINS)) {
		tc_leave(tc);
		return malloc_idle(cls);
	}
	if (unlikely(__atomic_load_n(&tc->divert, __ATOMIC_RELAXED) >> cls & 1)) {
		/* its own bins: the owner's (a flusher that took the cache since finds it
		 * busy and backs off), a class in list mode as a rule */
		if (likely(cls < TC_LIST_CLASSES)) /* (the idle bins left above) */
			return lists ? malloc_list(tc, bins, cls) : tcache_alloc_list(cls);
		return malloc_divert(tc, cls);
	}
	return tcache_alloc_refill(cls);
}

/* la_own_<name>: the hidden alias of entry point <name> that liballoc's own calls use
 * (exports.h: no PLT, nothing interposed between them) */
#define LA_STR2(x) #x
#define LA_STR(x)  LA_STR2(x)
#define LA_OWN(name) \
	extern __typeof(la_own_##name) la_own_##name __attribute__((alias(LA_STR(LA_API(name)))))

LA_EXPORT void *LA_API(malloc)(size_t n)
{
	struct tcache *tc = &la_tcache;
	/* up to 512 bytes the cache's copy of sc_small4 (TLS, tcache.h): one instruction
	 * fewer than the shared table's, which 513 bytes to 1 KiB read */
	if (likely(n <= TC_SMALL4_MAX)) {
		struct tbin *bins = tc_enter_fast(tc);
		return malloc_bin(tc, bins, tc->small4[n], true);
	}
	if (likely(n <= SC_UPPER_FROM)) {
		struct tbin *bins = tc_enter_fast(tc);
		return malloc_bin(tc, bins, sc_small4[n], false);
	}
	/* 1-32 KiB: an empty bin refills as those below do (tcache_alloc_empty), not
	 * through malloc_slow and tcache_alloc_slow's tests (CPython test_dict: 573 such
	 * refills) */
	if (likely(n <= LA_SMALL_MAX)) {
		struct tbin *bins = tc_enter_fast(tc);
		return malloc_bin(tc, bins, sc_class_of(n) * (sizeof(struct tbin) / 8), false);
	}
	return malloc_large(n);
}
LA_OWN(malloc);

/* ---- free ------------------------------------------------------------------------------ */

LA_COLD static void invalid_pointer(const char *func)
{
	la_fatal(func, "invalid pointer");
}

LA_COLD static void double_free(const char *func)
{
	la_fatal(func, "double free detected");
}

/* p carries the free-block key: look for it where this thread can see free blocks (its
 * cache; the span's free list under the owner's lock; a thread cache's list taken from the
 * span: tcache_check_lists). A user word that merely equals the key (probability 2^-64 per
 * free) is not an error. True: p was left marked on a list whose owner was inside a cache
 * operation (that owner reports it), and free does nothing more. */
LA_COLD static bool check_double_free(const char *func, struct heap *h, struct span *s, void *p)
{
	struct tcache *tc = &la_tcache;
	unsigned cls = s->cls;
	if (tc_enter(tc)) { /* else a flusher is emptying the cache: its blocks go to spans */
		for (uint32_t i = 1; i <= tbin_count(&tc->bins[cls]); i++)
			if (tc->bins[cls].slot[i] == p)
				double_free(func);
		for (uint32_t i = 0; i < tc->rb_n; i++)
			if (tc->rb[i] == p)
				double_free(func);
		/* a list handed over (struct tlist) */
		if (cls < TC_LIST_CLASSES && tcache_list_holds(&tc->lists[cls], p))
			double_free(func);
	}
	tc_leave(tc);
	struct arena *a = h->arena;
	arena_lock(a);
	arena_drain(a);
	bool found = s->kind == SPAN_SMALL && arena_holds_free(a, s, p);
	bool out = !found && s->kind == SPAN_SMALL && s->list_out;
	arena_unlock(a);
	if (found)
		double_free(func);
	/* the span's list out: the caches that may hold it */
	return out && tcache_check_lists(a, h, s, p);
}

/* A large block of this thread's arena that the large slot declined: to its heap (errno
 * kept). */
LA_NOINLINE static void free_large_arena(struct heap *h, struct span *s)
{
	int saved = errno;
	arena_free_large(h->arena, h, s);
	errno = saved;
}

/* free_large_keep's s, which the slot may take only once blocks went out, or declines
 * (cache entered): the slot's slow path, else to its heap. */
LA_NOINLINE LA_RACY_METADATA static void free_large_entered(struct heap *h, struct span *s)
{
	if (!tcache_free_large_slow(&la_tcache, s)) /* (keeps errno) */
		free_large_arena(h, s);
}

/* free_large_keep's block when the slot grew past the bytes it published (cache entered) */
LA_NOINLINE static void free_large_publish(void)
{
	struct tcache *tc = &la_tcache;
	tcache_publish_large(tc);
	tc_leave(tc);
	shm_note_retained();
}

/* Free the large block of span s (live; h: its heap, of this thread's cache's arena,
 * validated by the caller) into the cache's large slot (struct tcache, large), else
 * (no live cache, larger than the slot's base, the madvise throttle off, a flusher holds
 * the cache) to its heap, the slot's blocks (but with a flusher) gone back to theirs, as
 * the block parked before a parking free does. The slot's hit inline with every other
 * way a tail call, so that free_in_large_heap keeps no register across a call (medsizes:
 * half its frees). Its callers are not seen by TSan: the hint reads the arena's parked
 * block without its lock, and the span's offset is the owner's to write while the program
 * holds the block (free_slow and realloc read it without a lock too). The slot itself is
 * ordered by tc_enter. */
LA_INLINE void free_large_keep(struct heap *h, struct span *s)
{
	struct tcache *tc = &la_tcache;
	if (unlikely(tc->state != TC_LIVE)) {
		free_large_arena(h, s);
		return;
	}
	if (unlikely(!tc_enter(tc))) {
		tc_leave(tc);
		free_large_arena(h, s);
		return;
	}
	if (unlikely(!large_fits(tc, s) || !TUN(madvise_throttle) ||
	             arena_parked_hint(tc->arena))) {
		free_large_entered(h, s);
		return;
	}
	s->offset = SPAN_OFFSET_CACHED; /* (large_keep) */
	large_push(tc, s);
	if (unlikely(((uint64_t)tc->large_pages << LA_PAGE_SHIFT) > tc->large_pub)) {
		free_large_publish();
		return;
	}
	tc_leave(tc);
	shm_note_retained(); /* the decay pass gives it back if no malloc takes it */
}

/* Free p, validated; func names the caller in error messages. */
LA_NOINLINE LA_RACY_METADATA static void free_slow(void *p, const char *func)
{
	if (!p)
		return; /* free(NULL): the fast path's owner check sent it here */
	int saved = errno;
	if (unlikely(!__atomic_load_n(&la_ready, __ATOMIC_ACQUIRE)))
		invalid_pointer(func);
	if (unlikely((uintptr_t)p & (LA_ALIGN - 1)))
		invalid_pointer(func);
	if (!heap_registered(p)) {
		int r = direct_free(p);
		if (r == 1)
			double_free(func);
		if (r < 0)
			invalid_pointer(func);
		errno = saved;
		return;
	}
	struct heap *h = heap_of(p);
	struct span *s = span_lookup(h, p);
	if (!s) {
		/* a large block freed before: its span is FREE or PARKED, or in a thread cache's
		 * large slot, and starts right here */
		uint32_t pg = heap_page_of(h, p);
		struct span *f = pg >= h->first_page ? span_at(h, pg) : NULL;
		uint8_t kind = f ? f->kind : SPAN_NONE;
		uintptr_t in_page = (uintptr_t)p & (LA_PAGE - 1);
		if ((kind == SPAN_FREE || kind == SPAN_PARKED ||
		     (kind == SPAN_LARGE && f->offset == SPAN_OFFSET_CACHED)) &&
		    (in_page == 0 || in_page == LA_COLOUR)) /* (colour_span) */
			double_free(func);
		invalid_pointer(func);
	}
	struct tcache *tc = &la_tcache;
	if (s->kind == SPAN_SMALL) {
		if (((void **)p)[1] == (void *)LA_KEY && check_double_free(func, h, s, p)) {
			errno = saved;
			return; /* left marked on another thread's list (tcache_check_lists) */
		}
		tcache_free_slow(tc, p, s->cls);
	} else {
		struct arena *owner = h->arena;
		struct arena *mine = tc->state == TC_NONE ? NULL : tc->arena;
		if (owner == mine)
			free_large_keep(h, s); /* the thread cache's large slot, else its heap */
		else if (!mine || __atomic_load_n(&owner->threads, __ATOMIC_RELAXED) == 0)
			arena_free_large(owner, h, s); /* s is p's large span (span_lookup) */
		else
			arena_free_remote(owner, p);
	}
	errno = saved;
}

/* free of a page-aligned p of this thread's arena whose page-map entry is p's own low 32
 * bits (free's fast path: class 0, p its span's first byte): a large block at its span's
 * start, the large slot's pair (medsizes: half its frees), validated as realloc's fast path
 * does (spanidx of a page that no longer heads a span is 0, SPAN_NONE) without free_slow's
 * page-map walk: the same span_lookup answer for such a p. Anything else (a freed block:
 * offset SPAN_OFFSET_CACHED, FREE or PARKED kinds; a cache not live) takes free_slow,
 * whose free_large_keep sends a dead cache's block to its heap as it did from here (the
 * live test alone: free_large_keep's own is then known true, one compare and branch less
 * a large free). large_tagged_take_span: the heap known to be this thread's arena's. */
LA_INLINE bool large_tagged_take_span(struct heap *h, struct span *s)
{
	if (likely(s->kind == SPAN_LARGE && s->offset == 0 && la_tcache.state == TC_LIVE)) {
		free_large_keep(h, s); /* keeps errno (its slow paths save it) */
		return true;
	}
	return false;
}

/* The same for a heap of any arena: only this thread's arena's blocks go to its slot.
 * free_in_large_heap takes large_tagged_take_span alone: p's owner-table entry carried
 * this thread's tag (entry_take_mine), and a tag is one arena's (heap_tag), as free's push
 * of a small block there takes for granted too (three instructions a large free). */
LA_INLINE bool large_mine_take_span(struct heap *h, struct span *s)
{
	return la_tcache.arena == h->arena && large_tagged_take_span(h, s);
}

LA_INLINE bool large_mine_take(void *p)
{
	struct heap *h = heap_of(p);
	return large_mine_take_span(h, span_at(h, heap_page_of(h, p)));
}

LA_NOINLINE LA_RACY_METADATA static void free_large_mine(void *p)
{
	if (!large_mine_take(p))
		free_slow(p, "free()");
}

/* free of a pointer that is not in a heap of this thread's arena (its owner-table entry
 * has another arena's tag, or 0 where no heap is). A small block of another arena whose threads live (what the
 * consumer of a producer/consumer pair frees) is validated by its page-map word, as free's
 * fast path validates one of ours, and joins the hand-over batch with no descriptor read;
 * everything else (direct mappings, invalid pointers, double frees, blocks of arenas
 * without threads) takes free_slow. free returned for NULL before. */
LA_NOINLINE LA_RACY_METADATA static void free_other(void *p)
{
	la_prefetch_w(p);
	if (heap_owner_tag(p) && __atomic_load_n(&la_ready, __ATOMIC_ACQUIRE) &&
	    !((uintptr_t)p & (LA_ALIGN - 1))) {
		uint32_t hoff = (uint32_t)((uintptr_t)p & LA_HEAP_MASK);
		struct heap *h = (struct heap *)((uintptr_t)p - hoff);
		uint32_t e = h->pagemap[hoff >> LA_PAGE_SHIFT];
		unsigned c1 = pm_class1(e);
		/* tcache_free_foreign takes it only while its arena has threads */
		if (c1 && sc_divisible_pm(hoff - (e & PM_OFF_MASK), c1) &&
		    ((void **)p)[1] != (void *)LA_KEY &&
		    (tcache_free_foreign_more(&la_tcache, h->arena, p) ||
		     tcache_free_foreign(&la_tcache, h->arena, p)))
			return;
	}
	free_slow(p, "free()");
}

/* Does the owner-table entry *oe carry the tag of tc's arena? Then *oe becomes the entry
 * less its tag: the page map's biased base (heap_owner_base), low 16 bits 0; else *oe is
 * spoilt (free_other reads the entry again). On x86-64 one 16-bit subtraction of the tag
 * in memory from the entry's register: 0 in the low 16 bits (the flag) leaves just the
 * base, where a compare and a clear of the low 16 bits took two instructions. */
LA_INLINE bool entry_take_mine(uint64_t *oe, const struct tcache *tc)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	bool eq;
	__asm__("subw %2, %w0" : "+r"(*oe), "=@ccz"(eq) : "m"(tc->tag));
	return eq;
#else
	if (heap_entry_tag(*oe) != tc->tag)
		return false;
	*oe &= HEAP_OWNER_ADDR_MASK;
	return true;
#endif
}

/* The low 32 bits of p + ci (x86-64: one `lea`, where gcc 12 made a copy of p, a
 * subtraction, the byte's extension again and an addition). */
LA_INLINE uint32_t lo_plus(const void *p, size_t ci)
{
#if defined(__x86_64__)
	uint32_t r;
	__asm__("leal (%1,%2), %0" : "=r"(r) : "r"(p), "r"(ci));
	return r;
#else
	return (uint32_t)((uintptr_t)p + ci);
#endif
}

/* Is off a multiple of the class size whose reciprocal is the room word beside top
 * (tbin_room)? False when that word is 0 (no room, or no class). (sc_divides_at: the
 * word read by the multiply and the compare themselves on x86-64) */
LA_INLINE bool room_divides(uint32_t off, void *const *top)
{
	return sc_divides_at(off, (const uint32_t *)((const char *)top + TC_ROOM));
}

/* free of a pointer in a heap of this thread's arena that holds large blocks (its
 * owner-table entry carries the arena's tag with HEAP_TAG_LARGE: free's fast path sent it
 * to free_other on that load alone, before the page map's): a large block at its span's
 * start (class 0) as free_large_mine takes it; a small block (a small span took resident
 * free pages there: arena.c, resident_from_heaps) pushed as free's fast path pushes it;
 * anything else takes free_slow. */
LA_NOINLINE LA_RACY_METADATA static void free_in_large_heap(void *p, uint64_t oe)
{
	struct tcache *tc = &la_tcache;
	uint32_t lo = (uint32_t)(uintptr_t)p;
	/* page-aligned: the descriptor of the span starting here (spanidx is 0, a SPAN_NONE
	 * descriptor, on a page that heads none), with no page-map read before it: a live
	 * large block at its span's start is taken on its kind and offset alone, as
	 * large_mine_take takes it after the page map said a span starts here (one dependent
	 * load fewer a large free: medsizes' page-map entry of a large block's page missed
	 * the first-level cache on 86 % of them). On the grid (all of medsizes' blocks of
	 * 9-64 pages: arena.h, LARGE_GRID_PAGES) the grid page's descriptor, no index load
	 * either: p's offset in the heap tested (its low 16 bits) and its descriptor's offset
	 * as off / grid bytes * descriptor size = off * descriptor size / grid bytes, exact
	 * for a multiple of the grid's bytes (a multiply by 3 and one shift, where gcc 12
	 * shifted the page number, multiplied and shifted again: 2 instructions a large free;
	 * a grid test of p before the page test saved 2 more, but gcc 12 then built
	 * free_large_keep twice, 256 bytes of .text) */
	enum { GRID_BYTES = HEAP_GRID_PAGES << LA_PAGE_SHIFT };
	_Static_assert((uint64_t)LA_HEAP_MASK * sizeof(struct span) <= UINT32_MAX,
	               "a heap's offset times a descriptor's size fits 32 bits");
	if (likely(!(lo & (LA_PAGE - 1)))) {
		struct heap *h = heap_of(p);
		uint32_t off = lo & LA_HEAP_MASK;
		struct span *s =
		        likely(!(lo & (GRID_BYTES - 1)))
		                ? (struct span *)((char *)heap_desc_at(h, HEAP_GRID_DESC) +
		                                  (uint32_t)(off * (uint32_t)sizeof(struct span)) /
		                                          GRID_BYTES)
		                : span_at(h, off >> LA_PAGE_SHIFT);
		if (large_tagged_take_span(h, s))
			return;
	}
	const uint32_t *pm =
	        (const uint32_t *)(uintptr_t)(oe - HEAP_TAG_LARGE + offsetof(struct heap, pagemap));
	uint32_t e = pm[lo >> LA_PAGE_SHIFT];
	size_t ci = (uint8_t)e;
	if (!ci) {
		/* a block at its span's start that the test above did not take (a coloured
		 * one: colour_span) by free_large_mine, out of line like free_slow: a second
		 * inline copy of the slot's free here cost 288 bytes of .text */
		if (e != lo)
			free_slow(p, "free()");
		else
			free_large_mine(p);
		return;
	}
	void *key = (void *)LA_KEY;
	struct tbin *b = (struct tbin *)((char *)tc_enter_fast(tc) + ci * 8) - 1;
	void **top = b->top;
	uint32_t off = lo_plus(p, ci) - e;
	if (room_divides(off, top) && ((void **)p)[1] != key) {
		top[1] = p;
		b->top = top + 1;
		((void **)p)[1] = key;
		tc_leave(tc);
		return;
	}
	uint32_t r = b->recip;
	if (top >= b->end && off * r < r && ((void **)p)[1] != key) {
		tcache_free_full(tc, p, ci);
		return;
	}
	tc_leave(tc);
	free_slow(p, "free()");
}

LA_EXPORT LA_RACY_METADATA void LA_API(free)(void *p)
{
	struct tcache *tc = &la_tcache;
	/* only blocks of this thread's arena are cached (see tcache.h); one lookup tells
	 * that p lies in a heap of ours and that the heap is this arena's */
	uintptr_t u = heap_owner_slot_any(p); /* no bound test: NULL's slot has tag 0 */
	uint64_t oe = __atomic_load_n(&heap_owner[u], __ATOMIC_RELAXED);
	if (likely(entry_take_mine(&oe, tc))) {
		/* p's page-map entry, addressed from p alone (heap_pm_entry_at), not from oe:
		 * its load does not wait for the owner table's */
		uint32_t e = *heap_pm_entry_at(p, u);
		/* every page of a live small span carries its class + 1 and the span's start:
		 * no descriptor needed; a block of the class starts exactly here or the pointer
		 * is not ours (pages of other spans carry class 0: nothing divides there). The
		 * entry's low byte is (class + 1) * 4: times 8, its bin's offset from bin_none
		 * (heap.h) */
		size_t ci = (uint8_t)e;
		uint32_t off = lo_plus(p, ci) - e; /* e less ci: the span's start */
		void *key = (void *)LA_KEY;
		char *bins = (char *)tc_enter_fast(tc);
#define FREE_BIN ((struct tbin *)(bins + ci * 8) - 1)
		/* bins opaque before each use of the bin: each access addresses it from bins
		 * and ci (base, index, scale), where gcc 12 computed its address into a
		 * register first */
		__asm__("" : "+r"(bins), "+r"(ci));
		void **top = FREE_BIN->top;
		/* the room word TC_ROOM past the bin's top (struct twide): the class's reciprocal while
		 * the bin has room, else 0, as in bin_none's row (a page of no small span: class
		 * field 0) and the idle bins' (a flusher holds the cache): no offset divides */
		if (likely(room_divides(off, top) && ((void **)p)[1] != key)) {
			top[1] = p;
			__asm__("" : "+r"(bins), "+r"(ci));
			bin_top_step(FREE_BIN, top, 1);
			((void **)p)[1] = key; /* free */
			tc_leave(tc);
			return;
		}
		/* the bin's own reciprocal (0 in bin_none and the idle bins): a block start of
		 * its class, not marked free, and no room: the bin flushes and takes p (no
		 * validation again), the cache still entered (no flusher can have taken it) */
		/* off and the bin's address again here: no copies kept in the path above */
		__asm__("" : "+r"(p), "+r"(e), "+r"(bins), "+r"(ci));
		off = lo_plus(p, ci) - e;
		uint32_t r = FREE_BIN->recip;
		if (top >= FREE_BIN->end && off * r < r && ((void **)p)[1] != key) {
			tcache_free_full(tc, p, ci);
			return;
		}
#undef FREE_BIN
		tc_leave(tc);
		if (e == (uint32_t)(uintptr_t)p) {
			free_large_mine(p);
			return;
		}
		free_slow(p, "free()");
		return;
	}
	/* entry_take_mine left the entry less this thread's tag: HEAP_TAG_LARGE alone in the
	 * low 16 bits is a heap of large blocks of this thread's arena */
	if ((uint16_t)oe == HEAP_TAG_LARGE) {
		free_in_large_heap(p, oe);
		return;
	}
	/* in no heap of this arena's: free(NULL) returns here (slot 0, tag 0: logicmin frees
	 * NULL thousands of times) */
	if (p)
		free_other(p);
}
LA_OWN(free);

/* cfree, free_sized, free_aligned_sized and reallocarray are free and realloc by other
 * names: they call the exported free and realloc (through the PLT, on purpose), so that a
 * library interposing only malloc, free, calloc and realloc sees such a call as the free or
 * realloc it is, as under glibc, whose reallocarray calls realloc so (tests/e2e/
 * interpose.bats: it would otherwise see blocks it never saw made or freed). */
LA_EXPORT void LA_API(cfree)(void *p)
{
	LA_API(free)(p);
}

LA_EXPORT void LA_API(free_sized)(void *p, size_t size)
{
	(void)size;
	LA_API(free)(p);
}

LA_EXPORT void LA_API(free_aligned_sized)(void *p, size_t align, size_t size)
{
	(void)align;
	(void)size;
	LA_API(free)(p);
}

/* ---- usable size, calloc, realloc ------------------------------------------------------- */

/* Usable size of a live block, validated; aborts on a pointer we never returned. */
LA_RACY_METADATA static size_t usable_size(void *p, const char *func)
{
	if ((uintptr_t)p & (LA_ALIGN - 1))
		invalid_pointer(func);
	if (heap_registered(p)) {
		struct heap *h = heap_of(p);
		struct span *s = span_lookup(h, p);
		if (!s)
			invalid_pointer(func);
		return arena_usable(h, s, p);
	}
	size_t n = direct_usable(p);
	if (!n)
		invalid_pointer(func);
	return n;
}

LA_EXPORT size_t LA_API(malloc_usable_size)(void *p)
{
	if (!p)
		return 0;
	ENSURE_INIT();
	return usable_size(p, "malloc_usable_size()");
}

/* calloc when its fast path found no block. A small one takes malloc's way (its own alias:
 * no PLT): an empty bin of the cache's own refills at once (tcache_alloc_refill), a class in
 * list mode takes its list's next block, the idle bins go to the slow path; calloc went
 * through malloc_slow and tcache_alloc_slow, whose tests malloc's empty bin skips, and
 * whose refill filled the bin from the arena beside a list that was out. */
LA_NOINLINE static void *calloc_slow(size_t total)
{
	if (total <= LA_SMALL_MAX) {
		void *p = la_own_malloc(total);
		if (p)
			memset(p, 0, total);
		return p;
	}
	bool fresh = false;
	void *p = alloc_large(total, LA_ALIGN, &fresh, false, total >= LA_COLOUR_FROM);
	if (p && !fresh)
		memset(p, 0, total);
	return p;
}

LA_EXPORT void *LA_API(calloc)(size_t nmemb, size_t size)
{
	size_t total;
	if (unlikely(__builtin_mul_overflow(nmemb, size, &total))) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = malloc_pop(total);
	if (likely(p != NULL))
		return memset(p, 0, total); /* tail calls: calloc keeps no frame */
	return calloc_slow(total);
}

/* Whether a heap block of usable size `have` keeps its place for n bytes (0 < n <= have):
 * a small block whose class is not much larger than n's, a large one shrunk by less than
 * a quarter plus a page (the slack a move below adds): nothing to grow or give back. */
LA_INLINE bool realloc_keeps(const struct span *s, size_t have, size_t n)
{
	if (s->kind == SPAN_SMALL)
		return n >= sc_keep[s->cls];
	return have - n < LA_PAGE + have / 4;
}

static void *realloc_slow(void *p, size_t n);

/* realloc of a pointer in none of our heaps: a direct mapping that keeps its place is
 * answered without a lock (a buffer growing inside its mapping's slack); the rest (and
 * anything else: NULL's malloc went before) goes to realloc_slow. */
LA_NOINLINE static void *realloc_mapped(void *p, size_t n)
{
	if (likely(n - 1 < PTRDIFF_MAX) && direct_keeps(p, n))
		return p;
	return realloc_slow(p, n);
}

/* A block that realloc grows past REALLOC_LARGE_FROM becomes a large block with a quarter
 * more (realloc_slow), which grows in place from then on, as it did when the classes ended
 * there: through the eight classes from 16 to 32 KiB a growing block was copied eight more
 * times (bench realloc_growth 64 300000, callgrind: 133.4M instructions, 147.0M with the
 * copies, 12.7M of them in memcpy). A large block resizes in place above it too. */
#define REALLOC_LARGE_FROM 16384u
_Static_assert(REALLOC_LARGE_FROM < LA_SMALL_MAX, "classes serve sizes above it");
_Static_assert(SC_GROW_MAX == REALLOC_LARGE_FROM, "a small block realloc grows stays small");

/* realloc_small_move's block of m bytes (a growth's: max(n, sc_grow), half as large again;
 * a shrink's: n) when its bin had none: malloc's own way (a refill, a new span). Where no
 * block of m bytes can be had (out of memory), one of n's size, as malloc(n) would give: a
 * realloc must not fail where malloc(n) would not. NULL where neither can be had; errno as
 * it was either way (the refused tries set ENOMEM: the caller says whether it fails). The
 * pop inline and errno saved here, before a refill only: the malloc called as before with
 * the fallback after it kept n in a register more (logicmin 60 +55k instructions,
 * callgrind); this way +8.5k (a move or two more a growth: 7,637 in logicmin). */
LA_NOINLINE static void *realloc_move_block(size_t n, size_t m)
{
	int saved = errno;
	void *q = la_own_malloc(m);
	if (unlikely(!q) && m != n)
		q = la_own_malloc(n);
	errno = saved;
	return q;
}

_Static_assert(LA_SMALL_MAX / 2 <= SC_GROW_MAX, "a shrink that moves asks for a small block");

/* realloc of a small block the fast path found a block start of its class (page-map entry
 * e, offset off in its span) that does not keep its place for n (0 < n <= PTRDIFF_MAX):
 * moved without realloc_slow's frame and lookups (heap_registered, span_lookup: ~80 of its
 * ~116 instructions of its own a call; CPython test_dict moves 4k blocks so). Its one test
 * left, as span_lookup's: a block the span handed out (below its bump); a freed one is
 * free's to find, as before. A shrink moves to n's class. A block that grows past its
 * class (n > its size) moves to sc_grow's size, half as large again, when n is below that
 * (a string appended to a few bytes a step crossed every class boundary, a copy each:
 * bench strbuild), else to n's class (an array doubling); one growing past
 * REALLOC_LARGE_FROM takes realloc_slow (a large block with slack). The block is popped
 * from its bin here, the rest is realloc_move_block's; out of memory a growth takes n's
 * class, and a shrink keeps the block where it is (it failed before, as malloc(n) did).
 * Two instances (a shrink's, a growth's) so that each knows the length it copies and the
 * growth test costs the realloc fast path's own comparison only. */
LA_INLINE LA_RACY_METADATA void *realloc_small_move(void *p, size_t n, uint32_t e, uint32_t off,
                                                    bool grows)
{
	unsigned cls = pm_class1(e) - 1;
	struct heap *h = heap_of(p);
	if (unlikely(sc_index(off, cls) >= span_at(h, pm_head(e))->bump))
		invalid_pointer("realloc()");
	if (grows && unlikely(n > REALLOC_LARGE_FROM))
		return realloc_slow(p, n);
	size_t m = grows ? LA_MAX(n, (size_t)sc_grow[cls]) : n;
	if (m > SC_GROW_MAX) /* (a growth's n: above; sc_grow: sc_compute; a shrink's n) */
		__builtin_unreachable();
	void *q = malloc_pop(m);
	if (!q)
		q = realloc_move_block(n, m);
	if (unlikely(!q)) {
		if (!grows)
			return p; /* out of memory: the block as it is holds n bytes */
		errno = ENOMEM;
		return NULL;
	}
	memcpy(q, p, grows ? sc_size[cls] : n);
	la_own_free(p);
	return q;
}

/* n below the block's class size, not kept: n's class (n <= LA_SMALL_MAX / 2) */
LA_NOINLINE LA_RACY_METADATA static void *realloc_small_shrink(void *p, size_t n, uint32_t e,
                                                               uint32_t off)
{
	return realloc_small_move(p, n, e, off, false);
}

/* n above the block's class size */
LA_NOINLINE LA_RACY_METADATA static void *realloc_small_grow(void *p, size_t n, uint32_t e,
                                                             uint32_t off)
{
	return realloc_small_move(p, n, e, off, true);
}

/* The common case in a frame of its own (no call, no saved register): a block of one of
 * our heaps (there are heaps only after la_init) that keeps its place. The owner entry
 * gives the page map as in free; the page's entry alone tells the two kinds apart:
 * - a large block at its span's first page (offset 0, page-aligned: the blocks realloc
 *   grows) has the entry equal to its own low 32 bits (the span's first byte, class 0).
 *   Its descriptor's index is at that page of spanidx, a load that needs only p, made
 *   beside the page map's (span_lookup's chain was the entry, then spanidx at its head,
 *   then the descriptor). A page whose entry says it heads a span it no longer heads has
 *   spanidx 0 there (SPAN_NONE): no keep, as span_lookup answers.
 * - a small block: the entry's class and span start (no descriptor), the offset divided by
 *   the class's reciprocal as free does. A block past the span's bump (never handed out)
 *   is not told from a live one here, as in free's fast path; realloc_small_move's test of
 *   the span's bump tells it for any realloc that does not keep its place.
 * Anything else (an aligned large block: offset > 0) takes realloc_slow, which validates. */
LA_EXPORT LA_RACY_METADATA void *LA_API(realloc)(void *p, size_t n)
{
	uint64_t oe = heap_owner_entry(p);
	if (likely(heap_entry_tag(oe) != 0 && n - 1 < PTRDIFF_MAX)) {
		uint32_t lo = (uint32_t)(uintptr_t)p;
		uint32_t e = heap_entry_pagemap(oe)[lo >> LA_PAGE_SHIFT];
		if (e == lo) {
			struct heap *h = heap_of(p);
			const struct span *s = span_at(h, heap_page_of(h, p));
			size_t have = (size_t)s->npages << LA_PAGE_SHIFT;
			if (likely(s->kind == SPAN_LARGE && s->offset == 0 && n <= have &&
			           have - n < LA_PAGE + have / 4))
				return p;
		} else {
			unsigned c1 = pm_class1(e);
			uint32_t off =
			        lo - (e & ~(uint32_t)PM_CLASS_MASK); /* the heap bits cancel */
			if (c1 && sc_divisible_pm(off, c1)) {
				unsigned cls = c1 - 1;
				if (unlikely(n > sc_size[cls]))
					return realloc_small_grow(p, n, e, off);
				if (likely(n >= sc_keep[cls]))
					return p;
				return realloc_small_shrink(p, n, e, off);
			}
		}
	}
	/* realloc(NULL, n), a growing array's first step (logicmin: 54k of its 62k calls),
	 * is malloc by a tail jump, not through realloc_slow's frame; it left on the owner
	 * table's bound test (heap_owner_entry_in), with no load of the table (malloc's body
	 * inline here cost the small blocks' keep path a register move: strbuild +0.5M) */
	if (!p)
		return la_own_malloc(n);
	if (!heap_entry_tag(oe))
		return realloc_mapped(p, n);
	return realloc_slow(p, n);
}

/* realloc of a non-NULL p (realloc took NULL to malloc) that the fast path did not keep. */
__attribute__((noinline)) LA_RACY_METADATA static void *realloc_slow(void *p, size_t n)
{
	if (n == 0) {
		la_own_free(p);
		return NULL;
	}
	ENSURE_INIT();
	if (unlikely(n > PTRDIFF_MAX)) {
		(void)usable_size(p, "realloc()");
		errno = ENOMEM;
		return NULL;
	}
	size_t have;
	if (heap_registered(p)) {
		struct heap *h = heap_of(p);
		struct span *s = (uintptr_t)p & (LA_ALIGN - 1) ? NULL : span_lookup(h, p);
		if (!s)
			invalid_pointer("realloc()");
		have = arena_usable(h, s, p);
		if (n <= have && realloc_keeps(s, have, n))
			return p; /* the fast path's case, met after all (a racy read there) */
		if (s->kind != SPAN_SMALL && n > REALLOC_LARGE_FROM &&
		    (int64_t)n < TUN(mmap_threshold) && arena_resize_large(h->arena, p, n)) {
			return p;
		}
	} else {
		bool was_direct = false;
		if ((uintptr_t)p & (LA_ALIGN - 1))
			invalid_pointer("realloc()");
		/* A mapping that keeps its place for n keeps it whatever the threshold: one
		 * raised past n since this mapping was made (another mapping's free) sends new
		 * blocks of n's size to the heaps, not a live block that has the room already.
		 * Moved, it was copied whole into a heap at its next realloc (the buffers still
		 * growing when the first of their size is freed: `realloc_growth 256 3000000`
		 * 27.0k -> 19.1k faults, bench/README.md). Remapped only from the threshold on. */
		void *q = direct_realloc(p, n, (int64_t)n >= TUN(mmap_threshold), &was_direct);
		if (q)
			return q;
		have = direct_usable(p);
		if (!have)
			invalid_pointer("realloc()");
	}
	void *q = NULL;
	/* a buffer realloc grew past the threshold and freed, kept where it is: the next one
	 * that grows to about its size moves there, and grows on in place (its pages are
	 * resident, none moved) */
	if (n > have && n > REALLOC_LARGE_FROM)
		q = direct_alloc_grown(n);
	if (!q && n > have && n > REALLOC_LARGE_FROM) {
		/* a large block that cannot grow where it is: move it with a quarter more, so
		 * that a block growing step by step moves a logarithmic number of times (the
		 * slack's pages are not touched here; the rule above keeps them), to resident
		 * free pages or else where it can go on growing in place (arena_alloc_large) */
		size_t slack = n + n / 4;
		int64_t thr = TUN(mmap_threshold);
		if ((int64_t)n < thr && (int64_t)slack >= thr)
			slack = (size_t)thr - 1; /* grow by mremap only from the threshold on */
		int saved = errno;
		q = alloc_large(slack, LA_ALIGN, NULL, true, false);
		/* a heap block's pages are moved, not copied, where the copy would fault most
		 * of them in (arena_move_large; its first look at the THP mode or a refused
		 * mremap sets errno: restored after it, as after alloc_large) */
		bool moved =
		        q && heap_registered(p) && heap_registered(q) && arena_move_large(p, q);
		errno = saved;
		if (moved)
			return q;
	}
	if (!q) {
		int saved = errno;
		q = la_own_malloc(n);
		if (!q && n <= have) {
			errno = saved;
			return p; /* a shrink out of memory: the block as it is holds n bytes */
		}
	}
	if (!q)
		return NULL;
	memcpy(q, p, LA_MIN(have, n));
	la_own_free(p);
	return q;
}

LA_EXPORT void *LA_API(reallocarray)(void *p, size_t nmemb, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(nmemb, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return LA_API(realloc)(p, total); /* the exported one: see cfree */
}

/* ---- aligned allocation ----------------------------------------------------------------- */

/* An aligned request's block: up to LA_ALIGN any block; up to 32 KiB at up to a page a
 * class whose size is a multiple of align (its blocks are aligned: sc_class_aligned), from
 * its bin as malloc takes it (malloc_bin: its class found once, not again by malloc from
 * the class's size); else a large block. One copy that the entry points jump to: inlined
 * into aligned_alloc and posix_memalign_slow as well, the text grew past a page boundary
 * and .rodata's tail into the next 64 KiB fault-around window (`sizes aligned 1`: a fault
 * more, peak RSS +68 KiB of the library's pages). */
static LA_NOINLINE void *aligned(size_t align, size_t size)
{
	if (align <= LA_ALIGN)
		return la_own_malloc(size);
	if (likely(size <= LA_SMALL_MAX && align <= LA_PAGE)) {
		struct tcache *tc = &la_tcache;
		struct tbin *bins = tc_enter_fast(tc);
		return malloc_bin(tc, bins,
		                  sc_class_aligned(size, align) * (sizeof(struct tbin) / 8), false);
	}
	return alloc_large(LA_MAX(size, LA_SMALL_MAX + 1), align, NULL, false, false);
}

/* posix_memalign's fast path: a block from the cache's bin (malloc_pop's for align up to
 * LA_ALIGN), NULL when the request is not small or the bin is empty (errno untouched) */
LA_INLINE void *aligned_pop(size_t align, size_t size)
{
	if (align <= LA_ALIGN)
		return malloc_pop(size);
	if (likely(size <= LA_SMALL_MAX && align <= LA_PAGE)) {
		struct tcache *tc = &la_tcache;
		return bin_pop(tc, tc_enter_fast(tc),
		               sc_class_aligned(size, align) * (sizeof(struct tbin) / 8));
	}
	return NULL;
}

/* posix_memalign past its fast path: a refill or a large block, which may set errno (kept
 * as the caller had it when they fail: the result says ENOMEM) */
static LA_NOINLINE int posix_memalign_slow(void **out, size_t align, size_t size)
{
	int saved = errno;
	void *p = aligned(align, size);
	if (!p) {
		errno = saved;
		return ENOMEM;
	}
	*out = p;
	return 0;
}

LA_EXPORT void *LA_API(memalign)(size_t align, size_t size)
{
	if (align > PTRDIFF_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if (align & (align - 1)) { /* glibc rounds a non-power of two up */
		size_t a = 1;
		while (a < align)
			a <<= 1;
		align = a;
	}
	return aligned(align, size);
}

LA_EXPORT int LA_API(posix_memalign)(void **out, size_t align, size_t size)
{
	if (align < sizeof(void *) || (align & (align - 1)) || align > PTRDIFF_MAX / 2 + 1)
		return EINVAL;
	/* a block from the cache: errno is not read (saved around every request, errno's
	 * address and value kept across the call made posix_memalign's own frame ~38
	 * instructions a call: `sizes aligned 21`) */
	void *p = aligned_pop(align, size);
	if (likely(p != NULL)) {
		*out = p;
		return 0;
	}
	return posix_memalign_slow(out, align, size);
}

LA_EXPORT void *LA_API(aligned_alloc)(size_t align, size_t size)
{
	if (align == 0 || (align & (align - 1)) || align > PTRDIFF_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(align, size);
}

LA_EXPORT void *LA_API(valloc)(size_t size)
{
	return aligned(LA_PAGE, size);
}

LA_EXPORT void *LA_API(pvalloc)(size_t size)
{
	if (size > PTRDIFF_MAX - LA_PAGE) {
		errno = ENOMEM;
		return NULL;
	}
	return aligned(LA_PAGE, la_align_up(size ? size : 1, LA_PAGE));
}

/* ---- glibc extras ----------------------------------------------------------------------- */

LA_EXPORT int LA_API(malloc_trim)(size_t pad)
{
	ENSURE_INIT();
	struct op_result r;
	op_trim_unmeasured(pad, &r);
	return r.madvise + r.munmap > 0;
}

LA_EXPORT int LA_API(mallopt)(int param, int value)
{
	ENSURE_INIT();
	for (int i = 0; i < LA_NTUNABLES; i++) {
		if (tun_defs[i].mallopt != param || param == 0)
			continue;
		int st = tun_set(i, value, LA_SRC_mallopt, NULL, 0);
		return st == LA_ST_OK;
	}
	/* parameters glibc knows that have no meaning here (M_CHECK_ACTION, M_PERTURB...) */
	return 1;
}

static void sum_counters(struct la_counters *heaps, struct la_counters *process)
{
	memset(heaps, 0, sizeof(*heaps));
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		la_counters_add(heaps, arenas[i].c);
	la_counters_read(process, &shm_process_block()->c);
}

LA_EXPORT struct mallinfo2 LA_API(mallinfo2)(void)
{
	ENSURE_INIT();
	struct la_counters h, p;
	sum_counters(&h, &p);
	/* glibc's fields from the heaps' memory figures (liballoc_shm.h); direct mappings
	 * are its "mmapped" regions */
	struct la_memory m;
	la_memory_of(&h, &m);
	struct mallinfo2 mi = {0};
	mi.arena = m.resident;
	mi.ordblks = 1;
	mi.hblks = p.direct_mappings;
	mi.hblkhd = p.direct_bytes;
	mi.uordblks = m.in_use;
	mi.fsmblks = m.cached;
	mi.fordblks = m.cached + m.fragmented + m.free_resident;
	mi.keepcost = m.free_resident;
	return mi;
}
LA_OWN(mallinfo2);

LA_EXPORT struct mallinfo LA_API(mallinfo)(void)
{
	struct mallinfo2 m2 = la_own_mallinfo2();
	struct mallinfo mi = {0};
#define LA_CLAMP_INT(v) ((int)((v) > 0x7fffffff ? 0x7fffffff : (v)))
	mi.arena = LA_CLAMP_INT(m2.arena);
	mi.ordblks = LA_CLAMP_INT(m2.ordblks);
	mi.hblks = LA_CLAMP_INT(m2.hblks);
	mi.hblkhd = LA_CLAMP_INT(m2.hblkhd);
	mi.uordblks = LA_CLAMP_INT(m2.uordblks);
	mi.fsmblks = LA_CLAMP_INT(m2.fsmblks);
	mi.fordblks = LA_CLAMP_INT(m2.fordblks);
	mi.keepcost = LA_CLAMP_INT(m2.keepcost);
#undef LA_CLAMP_INT
	return mi;
}

/* The figures glibc's malloc_info prints for a heap and for the whole (direct: the direct
 * mappings, for the totals only). */
static void info_figures(FILE *fp, const struct la_counters *c, const struct la_counters *direct)
{
	struct la_memory m;
	la_memory_of(c, &m);
	unsigned long long mapped =
	        c->address_space_bytes + (direct ? direct->address_space_bytes : 0);
	fprintf(fp, "<total type=\"fast\" count=\"0\" size=\"%llu\"/>\n",
	        (unsigned long long)m.cached);
	fprintf(fp, "<total type=\"rest\" count=\"0\" size=\"%llu\"/>\n",
	        (unsigned long long)(m.fragmented + m.free_resident));
	if (direct)
		fprintf(fp, "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n",
		        (unsigned long long)direct->direct_mappings,
		        (unsigned long long)direct->direct_bytes);
	static const char *const rows[] = {"system type=\"current\"", "system type=\"max\"",
	                                   "aspace type=\"total\"", "aspace type=\"mprotect\""};
	for (unsigned i = 0; i < 4; i++)
		fprintf(fp, "<%s size=\"%llu\"/>\n", rows[i], mapped);
}

LA_EXPORT int LA_API(malloc_info)(int options, FILE *fp)
{
	if (options != 0) {
		errno = EINVAL;
		return -1;
	}
	ENSURE_INIT();
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	struct la_counters tot = {0}, p;
	la_counters_read(&p, &shm_process_block()->c);
	fputs("<malloc version=\"1\">\n", fp);
	for (uint32_t i = 0; i < n; i++) {
		struct la_counters c; /* a copy: fprintf may allocate */
		la_counters_read(&c, arenas[i].c);
		la_counters_add(&tot, &c);
		fprintf(fp, "<heap nr=\"%u\">\n<sizes>\n</sizes>\n", i);
		info_figures(fp, &c, NULL);
		fputs("</heap>\n", fp);
	}
	info_figures(fp, &tot, &p);
	fputs("</malloc>\n", fp);
	return 0;
}

LA_EXPORT void LA_API(malloc_stats)(void)
{
	ENSURE_INIT();
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	struct la_counters tot = {0}, p;
	la_counters_read(&p, &shm_process_block()->c);
	for (uint32_t i = 0; i < n; i++) {
		struct la_counters c;
		la_counters_read(&c, arenas[i].c);
		la_counters_add(&tot, &c);
		struct la_memory m;
		la_memory_of(&c, &m);
		fprintf(stderr, "Arena %u:\nsystem bytes     = %10llu\nin use bytes     = %10llu\n",
		        i, (unsigned long long)m.resident, (unsigned long long)m.in_use);
	}
	la_counters_add(&tot, &p);
	struct la_memory m;
	la_memory_of(&tot, &m);
	fprintf(stderr,
	        "Total (incl. mmap):\nsystem bytes     = %10llu\nin use bytes     = %10llu\n"
	        "max mmap regions = %10llu\nmax mmap bytes   = %10llu\n",
	        (unsigned long long)m.resident, (unsigned long long)m.in_use,
	        (unsigned long long)p.direct_mappings, (unsigned long long)p.direct_bytes);
}

/* ---- liballoc.h ------------------------------------------------------------------------- */

LA_EXPORT int liballoc_get(const char *name, int64_t *value)
{
	ENSURE_INIT();
	int id = tun_find(name);
	if (id < 0)
		return -1;
	*value = TUN_ID(id);
	return 0;
}

LA_EXPORT int liballoc_set(const char *name, int64_t value, char *reason, size_t len)
{
	ENSURE_INIT();
	int id = tun_find(name);
	if (id < 0) {
		if (reason && len)
			la_strlcpy(reason, "unknown tunable", len);
		return -1;
	}
	int st = tun_set(id, value, LA_SRC_api, reason, len);
	return st == LA_ST_OK ? 0 : -1;
}

LA_EXPORT size_t liballoc_trim(size_t pad)
{
	ENSURE_INIT();
	struct op_result r;
	op_trim(pad, &r);
	return r.bytes_released;
}

LA_EXPORT size_t liballoc_release_idle_heaps(void)
{
	ENSURE_INIT();
	struct op_result r;
	op_release_idle(&r);
	return r.bytes_released;
}

LA_EXPORT void liballoc_flush_caches(void)
{
	ENSURE_INIT();
	struct op_result r;
	op_flush_caches(&r, NULL);
}

LA_EXPORT int liballoc_stats(struct la_counters *out)
{
	ENSURE_INIT();
	struct la_counters h, p;
	sum_counters(&h, &p);
	la_counters_add(&h, &p);
	*out = h;
	return 0;
}

LA_EXPORT const char *liballoc_segment_path(void)
{
	return shm_path();
}

/* ---- process lifecycle ------------------------------------------------------------------ */

static void fork_prepare(void)
{
	if (!LA_NO_STATS)
		control_fork_prepare(); /* it allocates: before any lock is taken */
	/* the transparent huge page modes, read once here rather than in every child that
	 * trims or decays (`enabled`, the hugepages-* directory and each size's file,
	 * hpage_pmd_size: ~35 system calls and a libc page), or that maps from the ceiling up
	 * (the 2 MiB size's: two files, none when the first said no) */
	os_thp_always();
	os_thp_pmd_always();
	tun_fork_prepare(); /* no writer of the segment's tunables is half-way at the fork */
	direct_fork_prepare();
	tcache_fork_prepare();
	arena_lock_all();
	la_fork_begin();     /* waiters for the locks it holds sleep until fork_parent */
	shm_fork_snapshot(); /* the statistics, with every arena locked */
	shm_fork_prepare();  /* last: its clock reading is the clone's lower bound */
}

static void fork_parent(void)
{
	arena_unlock_all();
	la_fork_end();
	tcache_fork_parent();
	direct_fork_parent();
	tun_fork_parent();
}

static void fork_child(void)
{
	la_lock_fork_child(); /* before any lock: this thread's id changed */
	/* first: the segment is still the parent's file, which the handlers below would write
	 * (the arenas' thread counts, the dead threads' caches off the counters) */
	shm_fork_child();
	heap_forks++; /* the parent's populate-ahead windows are not the child's */
	struct tcache *tc = &la_tcache;
	bool burst_look = arena_reinit_child(tc->state == TC_LIVE ? tc->arena : NULL);
	direct_fork_child();
	tun_fork_child();
	tcache_fork_child();
	if (LA_NO_STATS)
		return;
	control_announce();
	shm_publish_file();
	shm_header()->allocator_threads = tc->state == TC_LIVE ? 1 : 0;
	control_fork_child(burst_look);
}

/* Map the segment's file before the start writes the segment (shm_prepare_file), unless an
 * allocation before the constructor did already. False: it failed and said so. */
static bool la_prepare_segment(void)
{
	la_lock(&init_lock);
	/* the variables its reads want (LIBALLOC_CONTROL, _PUBLISH_DELAY, _RUN_DIR) from the
	 * copy la_init would take: one walk of environ, not one for each */
	tun_env_snapshot();
	bool ok = __atomic_load_n(&la_ready, __ATOMIC_ACQUIRE) || shm_prepare_file();
	la_unlock(&init_lock);
	return ok;
}

__attribute__((constructor)) static void liballoc_ctor(void)
{
	bool publish = !LA_NO_STATS && la_prepare_segment();
	ENSURE_INIT();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	if (LA_NO_STATS)
		return; /* statistics compiled out: no segment, no control thread */
	control_announce();
	shm_detect_foreign();
	if (publish)
		shm_publish_file();
	control_start();
}

__attribute__((destructor)) static void liballoc_dtor(void)
{
	shm_unpublish();
}
