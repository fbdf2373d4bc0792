/* heap.c — the page allocator inside one heap: size bins of free spans, first fit from the
 * smallest bin (where resident pages are, the span and the window in it covering the most of
 * them), coalescing on free, purging of dirty free spans, and the grow/shrink trend.
 * Caller holds the owning arena's lock for everything but heap_create. */
#include "heap.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "direct.h"
#include "os.h"
#include "shm.h"

/* zero-filled like LA_BIG_BSS, but placed right after .bss (liballoc/owner.ld): its first
 * entries share the page the loader writes anyway (free(NULL) reads slot 0, the first 64
 * MiB's, in every program: on a page of its own, a read of the zero page was a fault,
 * `python3 -c pass`; realloc(NULL, n) leaves on its bound test) */
__attribute__((section(".lbss.owner"))) uint64_t heap_owner[LA_HEAP_SLOTS];
uint32_t heap_epoch; /* atomic: written by the decay pass, read when pages are freed */
uint32_t heap_skip;  /* atomic: the decay pass sleeps through ticks (heap.h) */

static uint32_t epoch_now(void)
{
	return __atomic_load_n(&heap_epoch, __ATOMIC_RELAXED);
}

/* The tick that dirty pages freed now carry. While the decay pass sleeps through ticks,
 * the first such stamp ends the sleep (the clock would go on without it), once, unless the
 * thread wakes by the next tick anyway (shm_kick_control): the
 * control thread, woken, counts the ticks it slept and gives the pages stamped meanwhile
 * the tick they belong to (control.c). The flag is read before the tick (both in one
 * total order with the pass's writes: the tick first, then the flag cleared). */
static uint32_t stamp_now(void)
{
	if (unlikely(__atomic_load_n(&heap_skip, __ATOMIC_SEQ_CST)) &&
	    __atomic_exchange_n(&heap_skip, 0, __ATOMIC_SEQ_CST))
		shm_kick_control(0); /* it then takes the next tick */
	return __atomic_load_n(&heap_epoch, __ATOMIC_SEQ_CST);
}

/* Is tick a older than tick b (the clock wraps)? */
static bool older(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

#define HEADER_PAGES ((uint32_t)((sizeof(struct heap) + LA_PAGE - 1) >> LA_PAGE_SHIFT))

uint32_t heap_data_pages(void)
{
	return (uint32_t)LA_HEAP_PAGES - HEADER_PAGES;
}

/* ---- accounting --------------------------------------------------------------------- */

/* Bits [first, first + n) of a page bitmap, a word at a time: each word becomes NEW (an
 * expression of `word` and the range's `mask` in it); `before` (declared by the caller)
 * adds how many bits of the range were set. */
#define BITS_FOR(m, first, n, NEW)                                                      \
	do {                                                                            \
		uint32_t i_ = (first), end_ = (first) + (n);                            \
		while (i_ < end_) {                                                     \
			uint32_t w_ = i_ >> 6, lo_ = i_ & 63;                           \
			if (lo_ == 0 && end_ - i_ >= 64) { /* whole words */            \
				const uint64_t mask = ~0ULL;                            \
				uint32_t wend_ = w_ + ((end_ - i_) >> 6);               \
				for (; w_ < wend_; w_++) {                              \
					uint64_t word = (m)[w_];                        \
					before += heap_bits_set(word, mask, 64);        \
					(m)[w_] = (NEW);                                \
				}                                                       \
				i_ = wend_ << 6;                                        \
				continue;                                               \
			}                                                               \
			uint32_t k_ = LA_MIN(64 - lo_, end_ - i_);                      \
			uint64_t mask = (k_ == 64 ? ~0ULL : ((1ULL << k_) - 1)) << lo_; \
			uint64_t word = (m)[w_];                                        \
			before += heap_bits_set(word, mask, k_);                        \
			(m)[w_] = (NEW);                                                \
			i_ += k_;                                                       \
		}                                                                       \
	} while (0)

uint32_t heap_resident_in(const struct heap *h, uint32_t first, uint32_t n)
{
	uint32_t before = 0;
	uint32_t i = first, end = first + n;
	while (i < end) {
		uint32_t w = i >> 6, lo = i & 63;
		if (lo == 0 && end - i >= 64) { /* whole words */
			uint32_t wend = w + ((end - i) >> 6);
			for (; w < wend; w++)
				before += heap_bits_set(h->resident[w], ~0ULL, 64);
			i = wend << 6;
			continue;
		}
		uint32_t k = LA_MIN(64 - lo, end - i);
		uint64_t mask = (k == 64 ? ~0ULL : ((1ULL << k) - 1)) << lo;
		before += heap_bits_set(h->resident[w], mask, k);
		i += k;
	}
	return before;
}

static void resident_add(struct heap *h, int64_t pages)
{
	h->resident_pages = (uint32_t)((int64_t)h->resident_pages + pages);
	STAT_ADD_LOCKED(h->c, data_resident_bytes, (uint64_t)(pages * (int64_t)LA_PAGE));
}

/* Pages in SMALL and LARGE spans: the heap's and its arena's sum (a thread cache reads the
 * sum without the lock: the large slot's bound, tcache.c large_bound_for). */
static void used_add(struct heap *h, int64_t pages)
{
	h->used_pages = (uint32_t)((int64_t)h->used_pages + pages);
	__atomic_store_n(h->arena_used, (uint32_t)((int64_t)*h->arena_used + pages),
	                 __ATOMIC_RELAXED);
}

/* FREE pages that may be resident are free resident memory. */
static void dirty_add(struct heap *h, int64_t pages)
{
	h->dirty_pages = (uint32_t)((int64_t)h->dirty_pages + pages);
	/* (atomic: a thread cache reads the arena's sum without the lock, tcache.c bin_alloc) */
	__atomic_store_n(h->arena_dirty, (uint32_t)((int64_t)*h->arena_dirty + pages),
	                 __ATOMIC_RELAXED);
	STAT_ADD_LOCKED(h->c, free_resident_bytes, (uint64_t)(pages * (int64_t)LA_PAGE));
}

void heap_touch(struct heap *h, uint32_t first, uint32_t n)
{
	if ((first & 63) + n <= 63) { /* within a word (a refill's carving: a page or a few) */
		heap_touch_few(h, first, n);
		return;
	}
	uint32_t before = 0;
	BITS_FOR(h->resident, first, n, word | mask);
	resident_add(h, (int64_t)n - before);
}

void heap_untouch(struct heap *h, uint32_t first, uint32_t n)
{
	uint32_t before = 0;
	BITS_FOR(h->resident, first, n, word & ~mask);
	resident_add(h, -(int64_t)before);
}

/* Header pages written: the fields and the resident bitmap, the page map and the
 * descriptor index entries of pages [first_page, hwm), descriptors [1, desc_top), and a
 * large heap's grid descriptors handed out (desc_grid). The header is never purged, so
 * these are its resident pages for the heap's life. */
static uint32_t meta_pages(const struct heap *h)
{
	const size_t pm = offsetof(struct heap, pagemap), si = offsetof(struct heap, spanidx),
	             de = offsetof(struct heap, desc);
	const size_t range[4][2] = {
	        {0, pm},
	        {pm + 4 * (size_t)h->first_page, pm + 4 * (size_t)h->hwm},
	        {si + 2 * (size_t)h->first_page, si + 2 * (size_t)h->hwm},
	        {de + sizeof(struct span), de + sizeof(struct span) * h->desc_top},
	};
	uint32_t pages = 0;
	size_t next = 0; /* first page not counted yet */
	for (int r = 0; r < 4; r++) {
		if (range[r][1] <= range[r][0])
			continue;
		size_t lo = range[r][0] >> LA_PAGE_SHIFT, hi = (range[r][1] - 1) >> LA_PAGE_SHIFT;
		if (lo < next)
			lo = next;
		if (hi >= lo)
			pages += (uint32_t)(hi - lo + 1);
		if (hi + 1 > next)
			next = hi + 1;
	}
	if (h->grid_hi) { /* past the pool's pages (heap.h, span_at_grid) */
		size_t g = de + sizeof(struct span) * HEAP_GRID_DESC;
		pages += (uint32_t)(((g + sizeof(struct span) * h->grid_hi - 1) >> LA_PAGE_SHIFT) -
		                    ((g + sizeof(struct span) * h->grid_lo) >> LA_PAGE_SHIFT) + 1);
	}
	return pages;
}

static void meta_update(struct heap *h)
{
	uint32_t now = meta_pages(h);
	if (now == h->meta_pages)
		return;
	uint64_t delta = (uint64_t)((int64_t)now - h->meta_pages) * LA_PAGE;
	h->meta_pages = now;
	STAT_ADD_LOCKED(h->c, metadata_bytes, delta);
	if (h->idle)
		STAT_ADD_LOCKED(h->c, idle_metadata_bytes, delta);
}

void heap_idle_flip(struct heap *h)
{
	bool idle = !h->idle;
	h->idle = idle;
	uint64_t bytes = (uint64_t)h->meta_pages << LA_PAGE_SHIFT;
	if (idle)
		STAT_ADD_LOCKED(h->c, idle_metadata_bytes, bytes);
	else
		STAT_SUB_LOCKED(h->c, idle_metadata_bytes, bytes);
}

/* Entries of pages below from + n (and the head of the free span there) may be written,
 * pages [from, from + n) just taken; fresh: how many of them were not resident. Returns
 * how many of them a mapping kept for the heaps moved under them (direct_heaps_grew). */
LA_INLINE uint32_t hwm_update(struct heap *h, uint32_t from, uint32_t n, uint32_t fresh)
{
	uint32_t w = LA_MIN(from + n + 1, (uint32_t)LA_HEAP_PAGES);
	if (w > h->hwm) {
		h->hwm = w;
		meta_update(h);
		/* mappings kept on trial serve no heap; one kept for the heaps may serve this */
		return direct_heaps_grew(h, from, n, fresh);
	}
	/* below it: pages purged or never used inside it fault in, which a buffer kept for
	 * the heaps may serve as its free would have (direct_heaps_refill) */
	return fresh ? direct_heaps_refill(h, from, n, fresh) : 0;
}

/* Pages [at, at + k) as mincore's vec has them: the bits of those not resident cleared
 * (*cleared counted), of those resident but unmarked set (*set counted). */
static void measure_vec(struct heap *h, uint32_t at, uint32_t k, const unsigned char *vec,
                        uint32_t *cleared, int64_t *set)
{
	/* a bitmap word's pages at a time: vec's bits packed 8 bytes to a byte (a multiply
	 * gathers the low bit of each byte), then compared with the word whole (a page at a
	 * time took ~12 instructions: CPython test_dict's measurements, ~58 pages a call) */
	while (k) {
		uint32_t lo = at & 63, m = LA_MIN(k, 64 - lo), j = 0;
		uint64_t res = 0;
		for (; __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && j + 8 <= m; j += 8) {
			uint64_t x;
			memcpy(&x, vec + j, sizeof(x));
			res |= (((x & 0x0101010101010101ULL) * 0x0102040810204080ULL) >> 56) << j;
		}
		for (; j < m; j++)
			res |= (uint64_t)(vec[j] & 1) << j;
		uint64_t mask = (m == 64 ? ~0ULL : (1ULL << m) - 1) << lo,
		         *w = &h->resident[at >> 6];
		res <<= lo;
		uint64_t known = *w & mask, gone = known & ~res, found = res & ~known;
		if (gone | found) {
			*cleared += gone ? la_popcount64(gone) : 0;
			/* resident though no allocator write made it so (a huge page the kernel
			 * backed a span with): counted */
			*set += found ? la_popcount64(found) : 0;
			*w = (*w & ~mask) | res;
		}
		at += m;
		vec += m;
		k -= m;
	}
}

uint32_t heap_measure_range(struct heap *h, uint32_t first, uint32_t n)
{
	unsigned char vec[512];
	uint32_t cleared = 0;
	int64_t set = 0;
	for (uint32_t at = first, end = first + n; at < end;) {
		uint32_t k = LA_MIN(end - at, (uint32_t)sizeof(vec));
		if (mincore((char *)h + ((size_t)at << LA_PAGE_SHIFT), (size_t)k << LA_PAGE_SHIFT,
		            vec) == 0)
			measure_vec(h, at, k, vec, &cleared, &set);
		at += k;
	}
	if (set != (int64_t)cleared) /* (heap_measure: no write where nothing changed) */
		resident_add(h, set - (int64_t)cleared);
	return (uint32_t)((int64_t)cleared - set);
}

static bool bitmap_bounds(const struct heap *h, const struct span *s);
static uint32_t next_bit(const struct heap *h, uint32_t i, uint32_t end, bool set);

/* The span after s in a free bin, the walk's *steps counted: a walk that passes more
 * spans than a heap can hold has met a list a corruption made circular (a span linked in
 * twice), which would spin a trim or the decay pass forever with the arena's lock held,
 * and every thread of the arena behind it. The process stops, saying so. */
static inline struct span *bin_next(const struct span *s, uint32_t *steps)
{
	if (unlikely(++*steps > LA_HEAP_PAGES))
		la_fatal("heap", "corrupted free span list detected (a cycle)");
	return s->next;
}

/* ---- measuring many free spans at once ----------------------------------------------
 * A pass that measures every free span (heap_measure) or what each span it purges held
 * (a purge under os_measure: a trim, a release) asked mincore once per run of marked pages,
 * ~23 calls in a forked child's malloc_trim, whose spans lie within a few MiB of each
 * other. Such a pass reads the heap's residency through a window instead: one mincore over
 * the pages its spans can hold resident when they fit in RWIN_PAGES, and another call
 * only for a page outside the window. The window is read before the purges: a purge
 * changes only its own span's pages, which the pass does not look at again. */
#define RWIN_PAGES 1024u
struct rwin {
	uint32_t lo, hi;   /* the pages the pass may look at: [lo, hi) (a hint) */
	uint32_t first, n; /* the window: pages [first, first + n), residency in vec */
	unsigned char vec[RWIN_PAGES];
};

/* The last page of [first, end) whose `resident` bit is set, plus one; first if none. */
static uint32_t last_bit_end(const struct heap *h, uint32_t first, uint32_t end)
{
	while (end > first) {
		uint32_t i = end - 1;
		uint64_t w = h->resident[i >> 6] & (~0ULL >> (63 - (i & 63)));
		if (w) {
			uint32_t at = ((i >> 6) << 6) + 63u - (uint32_t)__builtin_clzll(w) + 1;
			return LA_MAX(at, first);
		}
		end = (i >> 6) << 6;
	}
	return first;
}

/* Does a measurement read free span s? One whose pages were freed since the last (their
 * bits are the allocation's guess), and one the kernel may have filled with a huge page
 * (its bits bound nothing). A span measured since holds bits mincore set or cleared, and
 * free pages become resident again only by an allocation's write, which takes them out of
 * the span (or, unseen, by a huge page: the second case). Re-reading every free page of
 * every arena at each measurement held the arena locks as long as mincore over all of
 * them took. Not one stamped from gone_by[0] up to before gone_by[1] (not NULL:
 * heap_measure's caller, the decay pass, returns it at its next tick, and its count goes
 * with it then). One stamped before gone_by[0], the bound of the pass's own purge, is still
 * free because that purge was refused (locked memory): the next tick's is refused too, and
 * no later pass's measurement would read it; its count stood as it was freed (whole, for
 * a large block written in part) for as long as the memory stayed locked. */
static bool measure_wants(const struct heap *h, const struct span *s, const uint32_t *gone_by)
{
	return s->dirty && (s->unmeasured || !bitmap_bounds(h, s)) &&
	       !(gone_by && !older(s->stamp, gone_by[0]) && older(s->stamp, gone_by[1]));
}

/* The window of a pass over h's dirty free spans (for_measure: those a measurement
 * reads): none read yet, the hint set. */
static void win_init(struct heap *h, struct rwin *w, bool for_measure, const uint32_t *gone_by)
{
	uint32_t lo = LA_HEAP_PAGES, hi = 0, steps = 0;
	for (int b = 0; b < HEAP_NBINS; b++)
		for (struct span *s = h->bins[b]; s; s = bin_next(s, &steps)) {
			if (!s->dirty || (for_measure && !measure_wants(h, s, gone_by)))
				continue;
			uint32_t first = s->first, end = s->first + s->npages;
			if (bitmap_bounds(h, s)) {
				first = next_bit(h, first, end, true);
				end = last_bit_end(h, first, end);
				if (first >= end)
					continue;
			}
			lo = LA_MIN(lo, first);
			hi = LA_MAX(hi, end);
		}
	w->lo = lo;
	w->hi = hi;
	w->first = w->n = 0;
}

/* Read the window that holds page i (not in the current one); false if mincore failed
 * (the window is then empty). */
static bool win_fill(struct heap *h, struct rwin *w, uint32_t i)
{
	uint32_t start = i;
	if (i >= w->lo && i < w->hi && w->hi - w->lo <= RWIN_PAGES)
		start = w->lo; /* the whole pass in this one */
	uint32_t end = LA_MIN(start + RWIN_PAGES, (uint32_t)LA_HEAP_PAGES);
	if (i < w->hi && w->hi < end)
		end = w->hi;
	w->first = w->n = 0;
	if (mincore((char *)h + ((size_t)start << LA_PAGE_SHIFT),
	            (size_t)(end - start) << LA_PAGE_SHIFT, w->vec) != 0)
		return false;
	w->first = start;
	w->n = end - start;
	return true;
}

static inline bool win_has(const struct rwin *w, uint32_t i)
{
	return i - w->first < w->n;
}

/* heap_measure_range through window w. */
static uint32_t win_measure(struct heap *h, struct rwin *w, uint32_t first, uint32_t n)
{
	uint32_t cleared = 0, other = 0;
	int64_t set = 0;
	for (uint32_t at = first, end = first + n; at < end;) {
		if (!win_has(w, at) && !win_fill(h, w, at)) {
			other = heap_measure_range(h, at, end - at); /* one by one, as before */
			break;
		}
		uint32_t k = LA_MIN(end, w->first + w->n) - at;
		measure_vec(h, at, k, w->vec + (at - w->first), &cleared, &set);
		at += k;
	}
	if (set != (int64_t)cleared) /* (heap_measure) */
		resident_add(h, set - (int64_t)cleared);
	return (uint32_t)((int64_t)cleared - set) + other;
}

/* Resident pages of [first, end) by window w (NULL: mincore on the range). */
static size_t win_resident(struct heap *h, struct rwin *w, uint32_t first, uint32_t end)
{
	char *base = (char *)h;
	if (!w)
		return os_resident(base + ((size_t)first << LA_PAGE_SHIFT),
		                   (size_t)(end - first) << LA_PAGE_SHIFT);
	size_t pages = 0;
	for (uint32_t at = first; at < end;) {
		if (!win_has(w, at) && !win_fill(h, w, at))
			return (pages << LA_PAGE_SHIFT) +
			       os_resident(base + ((size_t)at << LA_PAGE_SHIFT),
			                   (size_t)(end - at) << LA_PAGE_SHIFT);
		uint32_t k = LA_MIN(end, w->first + w->n) - at;
		for (const unsigned char *v = w->vec + (at - w->first), *e = v + k; v < e; v++)
			pages += *v & 1;
		at += k;
	}
	return pages << LA_PAGE_SHIFT;
}

void heap_measure(struct heap *h, const uint32_t *gone_by)
{
	struct rwin w;
	win_init(h, &w, true, gone_by);
	uint32_t steps = 0;
	for (int b = 0; b < HEAP_NBINS; b++)
		for (struct span *s = h->bins[b]; s; s = bin_next(s, &steps)) {
			if (!measure_wants(h, s, gone_by))
				continue;
			if (s->unmeasured) /* (no write where nothing changed, below) */
				s->unmeasured = 0;
			int32_t gone = 0;
			uint32_t end = s->first + s->npages;
			if (!bitmap_bounds(h, s))
				gone = (int32_t)win_measure(h, &w, s->first, s->npages);
			else /* only pages the bitmap marks can be resident: they are looked at */
				for (uint32_t i = next_bit(h, s->first, end, true); i < end;) {
					uint32_t j = next_bit(h, i, end, false);
					gone += (int32_t)win_measure(h, &w, i, j - i);
					i = next_bit(h, j, end, true);
				}
			/* written only where a page went or came: a pass that finds what it
			 * counted writes no page of the header (its fields', the descriptors'). A
			 * forked child's decay pass, whose measurement found its parent's counts,
			 * took a copy-on-write fault for the fields' page alone (`resident_add(h,
			 * 0)`, `dirty_add(h, 0)`: bench/README.md, fork33) */
			if (gone) {
				s->dirty = (uint32_t)((int32_t)s->dirty - gone);
				dirty_add(h, -gone);
			}
		}
}

static unsigned bin_of(uint32_t n)
{
	if (n <= 64)
		return n - 1;
	unsigned lg = 31u - (unsigned)__builtin_clz(n); /* n in [2^lg, 2^(lg+1)) */
	/* two bins per doubling above 64 pages */
	unsigned half = (n >> (lg - 1)) & 1u;
	return 64u + (lg - 6u) * 2u + half;
}

static void bin_insert(struct heap *h, struct span *s)
{
	unsigned b = bin_of(s->npages);
	s->prev = NULL;
	s->next = h->bins[b];
	if (s->next)
		s->next->prev = s;
	h->bins[b] = s;
	h->bin_mask[b >> 6] |= 1ULL << (b & 63);
}

static void bin_remove(struct heap *h, struct span *s)
{
	unsigned b = bin_of(s->npages);
	if (s->prev)
		s->prev->next = s->next;
	else
		h->bins[b] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	if (!h->bins[b])
		h->bin_mask[b >> 6] &= ~(1ULL << (b & 63));
}

/* Entries [first, first + n) of h's page map set to e, four to a store (16 bytes, no
 * alignment needed): a small span's 16-32 entries took five instructions each, written at
 * its making and again at its unmaking (`sizes sweep 10` makes and unmakes some 11,000
 * spans of 16-32 pages: 45.22M -> 43.56M instructions). */
typedef uint32_t pm_quad __attribute__((vector_size(16)));
static void pm_fill(struct heap *h, uint32_t first, uint32_t n, uint32_t e)
{
	uint32_t *m = h->pagemap + first;
	pm_quad q = {e, e, e, e};
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4)
		memcpy(m + i, &q, sizeof(q));
	for (; i < n; i++)
		m[i] = e;
}

void heap_map_span(struct heap *h, struct span *s, bool all)
{
	uint32_t first = s->first, last = first + s->npages - 1;
	if (all) {
		pm_fill(h, first, s->npages, pm_small_entry(h, first, s->cls));
	} else {
		h->pagemap[first] = pm_entry(h, first);
		h->pagemap[last] = pm_entry(h, first);
	}
}

void heap_unmap_small(struct heap *h, struct span *s)
{
	pm_fill(h, s->first, s->npages, pm_entry(h, s->first));
}

/* A descriptor for a span starting at page first (kind SPAN_NONE until the caller sets
 * it): a given-back one, else the next never-used one, so the pool's touched pages follow
 * the most spans the heap ever had at once. */
static struct span *desc_new(struct heap *h, uint32_t first)
{
	struct span *s = h->desc_free;
	if (s) {
		h->desc_free = s->next;
	} else {
		s = &h->desc[h->desc_top++];
		meta_update(h); /* the pool may reach into a new page */
	}
	memset(s, 0, sizeof(*s));
	s->first = first;
	h->spanidx[first] = spanidx_of(h, s);
	return s;
}

/* The descriptor of grid page first of a large heap (heap.h, span_at_grid), for a span
 * starting there (kind SPAN_NONE until the caller sets it): no span heads the page now. */
static struct span *desc_grid(struct heap *h, uint32_t first)
{
	struct span *s = span_at_grid(h, first);
	uint16_t k = (uint16_t)(first / HEAP_GRID_PAGES);
	if (h->grid_hi == 0 || k < h->grid_lo || k >= h->grid_hi) {
		h->grid_lo = h->grid_hi == 0 || k < h->grid_lo ? k : h->grid_lo;
		h->grid_hi = (uint16_t)LA_MAX(h->grid_hi, k + 1u);
		meta_update(h); /* the grid's descriptors may reach into a new page */
	}
	memset(s, 0, sizeof(*s));
	s->first = first;
	h->spanidx[first] = spanidx_of(h, s);
	return s;
}

/* The span s ends (merged into a neighbour): its first page starts no span now. */
static void desc_drop(struct heap *h, struct span *s)
{
	h->spanidx[s->first] = 0;
	s->kind = SPAN_NONE;
	s->npages = 0;
	if (s - h->desc >= (ptrdiff_t)HEAP_GRID_DESC)
		return; /* the grid page's own: stays there */
	s->next = h->desc_free;
	h->desc_free = s;
}

/* Make descriptor s (its first page set) a FREE span of n pages, d dirty (freed at tick
 * stamp), in its bin. */
static struct span *make_free(struct heap *h, struct span *s, uint32_t n, uint32_t d,
                              uint32_t stamp, bool unmeasured)
{
	uint32_t first = s->first;
	s->kind = SPAN_FREE;
	s->unmeasured = unmeasured && d;
	s->npages = n;
	s->dirty = d;
	s->stamp = stamp;
	s->used = s->bump = 0;
	s->free = NULL;
	/* the last page's entry serves only the left-coalescing of the span to its right:
	 * at the heap's end there is none, and not writing it leaves the page map's last
	 * page untouched (4 KiB of every heap's resident size) */
	h->pagemap[first] = pm_entry(h, first);
	if (first + n < LA_HEAP_PAGES)
		h->pagemap[first + n - 1] = pm_entry(h, first);
	bin_insert(h, s);
	return s;
}

struct heap *heap_create(struct arena *a, uint32_t arena_index, struct la_counters *c)
{
	struct heap *h = os_map_aligned(LA_HEAP_SIZE, LA_HEAP_SIZE, c);
	if (!h)
		return NULL;
	h->magic = HEAP_MAGIC;
	/* a store reaches the fresh header page first: a load there (desc_new's read of
	 * desc_free, hoisted above the stores) mapped the shared zero page, and the first
	 * store then faulted a second time (2 faults where 1 does) */
	__asm__ volatile("" ::: "memory");
	h->arena = a;
	h->c = c;
	h->arena_dirty = &h->own_dirty;
	h->arena_used = &h->own_used;
	h->first_page = HEADER_PAGES;
	h->free_pages = heap_data_pages();
	h->desc_top = 1; /* desc[0] stays SPAN_NONE */
	h->hwm = HEADER_PAGES + 1;
	h->idle = 1;
	STAT_ADD_LOCKED(c, address_space_bytes, LA_HEAP_SIZE);
	make_free(h, desc_new(h, HEADER_PAGES), heap_data_pages(), 0, 0, false);
	meta_update(h);
	uintptr_t slot = heap_owner_index((uintptr_t)h);
	/* the owner table's page of this slot is resident from now on: metadata, counted once
	 * (by the call that finds the page's first slot 0 and makes it no longer so; the first
	 * slot is not page-aligned: owner.ld) */
	uint64_t zero = 0;
	if (__atomic_compare_exchange_n(&heap_owner[heap_owner_page_first(slot)], &zero,
	                                HEAP_OWNER_GONE, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		STAT_ADD(&shm_process_block()->c, metadata_bytes, LA_PAGE);
	/* the slot held 0 or HEAP_OWNER_GONE: no heap */
	__atomic_store_n(&heap_owner[slot], heap_owner_base(h) | heap_tag(arena_index),
	                 __ATOMIC_RELEASE);
	return h;
}

void heap_make_large(struct heap *h, uint32_t arena_index)
{
	h->large = 1;
	/* its data pages start HEAP_GRID_DESC_PAGES later: the grid's descriptors there
	 * (span_at_grid), written as blocks take them; the one free span made again */
	struct span *s = span_at(h, h->first_page);
	bin_remove(h, s);
	h->pagemap[h->first_page] = 0;
	desc_drop(h, s);
	h->first_page += HEAP_GRID_DESC_PAGES;
	h->free_pages -= HEAP_GRID_DESC_PAGES;
	h->hwm = h->first_page + 1;
	make_free(h, desc_new(h, h->first_page), h->free_pages, 0, 0, false);
	meta_update(h);
	__atomic_store_n(&heap_owner[heap_owner_index((uintptr_t)h)],
	                 heap_owner_base(h) | (heap_tag(arena_index) | HEAP_TAG_LARGE),
	                 __ATOMIC_RELEASE);
}

void heap_destroy(struct heap *h)
{
	struct la_counters *c = h->c;
	uint64_t meta = (uint64_t)h->meta_pages << LA_PAGE_SHIFT;
	STAT_SUB_LOCKED(c, address_space_bytes, LA_HEAP_SIZE);
	STAT_SUB_LOCKED(c, data_resident_bytes, (uint64_t)h->resident_pages << LA_PAGE_SHIFT);
	STAT_SUB_LOCKED(c, free_resident_bytes, (uint64_t)h->dirty_pages << LA_PAGE_SHIFT);
	__atomic_store_n(h->arena_dirty, *h->arena_dirty - h->dirty_pages, __ATOMIC_RELAXED);
	__atomic_store_n(h->arena_used, *h->arena_used - h->used_pages, __ATOMIC_RELAXED);
	STAT_SUB_LOCKED(c, metadata_bytes, meta);
	if (h->idle)
		STAT_SUB_LOCKED(c, idle_metadata_bytes, meta);
	__atomic_store_n(&heap_owner[heap_owner_index((uintptr_t)h)], HEAP_OWNER_GONE,
	                 __ATOMIC_RELEASE); /* not 0: the first slot of a page says it is counted */
	os_unmap(h, LA_HEAP_SIZE, c);
}

/* Trend: both rates decay by 1/32 per span event; an event adds 256 to its own rate, so
 * each rate is a moving count of its events among the last ~32. */
static void trend(struct heap *h, bool grow)
{
	h->grow_rate -= h->grow_rate >> 5;
	h->shrink_rate -= h->shrink_rate >> 5;
	if (grow)
		h->grow_rate += 256;
	else
		h->shrink_rate += 256;
}

bool heap_shrinking(const struct heap *h)
{
	/* clearly more frees than allocations lately: at least 4 to 1 */
	return h->shrink_rate > 4 * h->grow_rate + 1024;
}

bool heap_growing(const struct heap *h)
{
	/* clearly more allocations than frees lately: at least 4 to 1 */
	return h->grow_rate > 4 * h->shrink_rate + 1024;
}

/* Breathing (heap.h), tracked on pages in use: a growth raises the peak, or, after a shrink
 * to a quarter of it, completes a breath at half of it (and the peak starts again there). */
static void breath_grow(struct heap *h)
{
	if (h->used_pages > h->peak_used)
		h->peak_used = h->used_pages;
	if (h->low && h->used_pages >= h->peak_used / 2) {
		h->low = 0;
		h->breathed = 1;
		h->breath_epoch = epoch_now();
		h->peak_used = h->used_pages;
	}
}

static void breath_shrink(struct heap *h)
{
	if (h->peak_used >= HEAP_BREATH_PAGES && h->used_pages <= h->peak_used / 4)
		h->low = 1;
}

bool heap_breathing(const struct heap *h, uint32_t ticks)
{
	return h->breathed && epoch_now() - h->breath_epoch < ticks;
}

/* The first non-empty bin at or above k; HEAP_NBINS if none. */
static unsigned next_bin(const struct heap *h, unsigned k)
{
	for (unsigned w = k >> 6; w < 2; w++) {
		uint64_t m = h->bin_mask[w];
		if (w == k >> 6)
			m &= ~0ULL << (k & 63);
		if (m)
			return (w << 6) + (unsigned)__builtin_ctzll(m);
	}
	return HEAP_NBINS;
}

/* Spans find_fit looks at for dirty pages before it settles for the first fit. */
#define FIT_SCAN         64
/* Requests of this many pages (160 KiB) and more look for the window of a free span that
 * covers the most resident pages among the first FIT_SCAN spans; smaller ones, small spans
 * among them, take the first span with resident pages, at its best window (for them the
 * search over spans cost more instructions than the faults it saved, bench/README.md; the
 * window within the first span costs a bitmap word when its start is resident). */
#define WINDOW_MIN_PAGES 40u
/* Runs of resident pages best_window tries as window starts in one span, within its first
 * WINDOW_REACH pages (the heap's top span runs for thousands of pages: a bitmap word per
 * 64 of them). */
#define WINDOW_TRIES     16
#define WINDOW_REACH     1024u

/* The first page in [i, end) whose resident bit is set (set) or clear (!set); end if none. */
static uint32_t next_bit(const struct heap *h, uint32_t i, uint32_t end, bool set)
{
	while (i < end) {
		uint64_t w = h->resident[i >> 6];
		if (!set)
			w = ~w;
		w &= ~0ULL << (i & 63);
		if (w)
			return LA_MIN(((i >> 6) << 6) + (uint32_t)__builtin_ctzll(w), end);
		i = ((i >> 6) + 1) << 6;
	}
	return end;
}

/* The n-page window of free span s (npages >= n, some pages dirty) that covers the most
 * resident pages: its offset in *at, the count returned. The head first; a free span's
 * dirty pages lie anywhere in it (a block freed in the middle of pages never used, the
 * first pages of a purged run faulted back in), so if the head misses some, the windows
 * starting at the span's next runs of resident pages (a best window can always be moved
 * right onto one) and the tail window. */
static uint32_t best_window(const struct heap *h, const struct span *s, uint32_t n, uint32_t *at)
{
	*at = 0;
	if (s->dirty == s->npages)
		return n;
	uint32_t best = heap_resident_in(h, s->first, n), want = LA_MIN(n, s->dirty);
	if (best == want || s->npages == n)
		return best;
	uint32_t last = s->first + s->npages - n; /* the tail window's start */
	uint32_t stop = LA_MIN(last, s->first + WINDOW_REACH);
	uint32_t i = next_bit(h, s->first, stop, false);
	for (unsigned tries = 0; tries < WINDOW_TRIES; tries++) {
		i = next_bit(h, i, stop, true); /* the next run's first page */
		if (i >= stop)
			break;
		uint32_t r = heap_resident_in(h, i, n);
		if (r > best) {
			best = r;
			*at = i - s->first;
			if (r == want)
				return r;
		}
		i = next_bit(h, i, stop, false);
	}
	uint32_t r = heap_resident_in(h, last, n);
	if (r > best) {
		best = r;
		*at = last - s->first;
	}
	return best;
}

/* best_window for a block of HEAP_START_MIN_PAGES or more (find_fit): first a window
 * starting where a large block freed lately started (heap_note_start), if it covers as many
 * resident pages as any can. That page is the one the program surely wrote (a header, the
 * start of a buffer); the pages counted resident after it may never have been (a freed
 * large block counts resident whole until measured), so a window chosen by their count
 * alone, the span's head first, may start on a page never written and fault it in while
 * the written one stays free (glibc's blocks start on the header of the free chunk they
 * split). large_random 8 1000 1 8 1: first pages of heap blocks faulted 198 -> 78 times,
 * 16 3000 2 32 1 137 -> 46 (bench/README.md, session 22). */
static uint32_t start_window(const struct heap *h, const struct span *s, uint32_t n, uint32_t *at)
{
	uint32_t all = LA_MIN(n, s->dirty), end = s->first + s->npages;
	for (unsigned k = 0; k < HEAP_STARTS; k++) {
		uint32_t st = h->starts[k];
		if (st >= s->first && st <= end - n && (h->resident[st >> 6] >> (st & 63) & 1) &&
		    heap_resident_in(h, st, n) >= all) {
			*at = st - s->first;
			return all;
		}
	}
	return best_window(h, s, n, at);
}

/* Where in free span s n pages not resident start on the grid (pages; sc_grid): the first
 * multiple of it from the heap's start at or after s's start, in *at; false when that leaves
 * no room. The classes whose blocks are 5-8 whole pages start a span made of fresh pages so:
 * their blocks' first and last pages then fall on the same few pages of a region wherever
 * their spans go in it, and a program that writes only its blocks' ends (a header, a last
 * field) touches again pages it touched, where spans laid 3-10 pages apart from one round
 * to the next touched new ones in between (bench/README.md, sizes-sweep). Only fresh
 * pages: moved inside a span of resident pages, a window would leave fewer than grid
 * resident pages before it, too few for any span (growshrink 8 16 64 peaked 0.7 MiB
 * higher so, 8 1 64 1.8). */
static bool on_grid(const struct span *s, uint32_t n, uint32_t grid, uint32_t *at)
{
	uint32_t r = s->first % grid, up = r ? grid - r : 0;
	if (up + n > s->npages)
		return false;
	*at = up;
	return true;
}

/* find_fit for grid | HEAP_GRID_ALWAYS (large blocks of up to LARGE_GRID_PAGES pages,
 * arena.c; grid a power of two): the n pages start on a multiple of grid pages from the heap's start, so that
 * blocks of these sizes start on the same few pages wherever they go: among the first
 * FIT_SCAN spans with room on the grid (smallest bin first), the first whose grid window
 * starts on a resident page (a block started there before), else the first such window
 * (none when dirty_only). A program that writes only the start of its large blocks (a
 * header, a buffer sized for the worst case) then touches again the pages it touched:
 * placed anywhere in runs of free pages, a block's first page fell in time on every page of
 * the heap (bench medsizes, 1000 slots of 1 B-64 KiB, first 64 B written: peak RSS 45.4 ->
 * 23.4 MiB; bench/README.md). NULL when no span looked at (at most GRID_SCAN) has room on
 * the grid: the caller takes the first fit then. */
#define GRID_SCAN (4 * FIT_SCAN) /* spans fit_on_grid passes at most */

static struct span *fit_on_grid(struct heap *h, uint32_t n, uint32_t grid, bool dirty_only,
                                uint32_t *at, uint32_t *resident)
{
	struct span *fresh = NULL;
	uint32_t fresh_at = 0, steps = 0;
	unsigned looked = 0;
	for (unsigned k = next_bin(h, bin_of(n)); k < HEAP_NBINS; k = next_bin(h, k + 1)) {
		for (struct span *s = h->bins[k]; s; s = bin_next(s, &steps)) {
			if (steps >= GRID_SCAN)
				goto done;
			uint32_t a = (grid - (s->first & (grid - 1))) & (grid - 1); /* on_grid's */
			if (a + n > s->npages)
				continue;
			uint32_t pg = s->first + a;
			if (s->dirty && (h->resident[pg >> 6] >> (pg & 63) & 1)) {
				*at = a;
				*resident = heap_resident_few(h, pg, n);
				return s;
			}
			if (!fresh) {
				fresh = s;
				fresh_at = a;
			}
			if (++looked >= FIT_SCAN)
				goto done;
		}
	}
done:
	if (!fresh || dirty_only)
		return NULL;
	*at = fresh_at;
	*resident = fresh->dirty ? heap_resident_few(h, fresh->first + fresh_at, n) : 0;
	return fresh;
}

/* A free span with room for n pages, in *at where in it to take them and in *resident how
 * many of those are resident (0: not counted). Resident (dirty) pages first, from the
 * smallest bin up: the first span holding some, at its best window; or for a request of
 * WINDOW_MIN_PAGES or more, of the first FIT_SCAN spans that fit, the one whose best window
 * (best_window) covers the most resident pages (the first that covers as many as can be).
 * Every resident page a span leaves unused is one a later growth faults in anew, and one
 * the decay pass has to return. Else (unless dirty_only) the first span that fits,
 * smallest bin first, from its start; but (room) in a heap holding fewer free resident
 * pages than n (one that grows into fresh pages, with no holes to fill), the first span
 * of the largest bin, from its start: a block realloc moved is growing, and in a gap
 * between spans in use its next growth would move it again, leaving the pages it faulted
 * in as a hole (sqlite's sorter: 6, 11, 21 ... pages), while at the start of the largest
 * span (the heap's top, as a rule) it grows in place. */
static struct span *find_fit(struct heap *h, uint32_t n, uint32_t grid, bool dirty_only, bool room,
                             uint32_t *at, uint32_t *resident)
{
	struct span *first = NULL, *best = NULL;
	uint32_t best_r = 0, best_at = 0, can = LA_MIN(n, h->dirty_pages);
	bool starts = n >= HEAP_START_MIN_PAGES;
	unsigned looked = 0;
	uint32_t steps = 0;
	*at = 0;
	*resident = 0;
	if (grid & HEAP_GRID_ALWAYS) {
		grid &= ~HEAP_GRID_ALWAYS;
		struct span *s = fit_on_grid(h, n, grid, dirty_only, at, resident);
		if (s || dirty_only)
			return s;
		grid = 1;
	}
	if (dirty_only && !h->dirty_pages)
		return NULL;
	for (unsigned k = next_bin(h, bin_of(n)); k < HEAP_NBINS; k = next_bin(h, k + 1)) {
		for (struct span *s = h->bins[k]; s; s = bin_next(s, &steps)) {
			if (s->npages < n) /* only in n's own bin (log bins above 64 pages) */
				continue;
			if (s->dirty && n < WINDOW_MIN_PAGES) {
				/* the first span with resident pages, at its window with the
				 * most of them: its start when resident (one bitmap word);
				 * a run freed partly purged (a table's pages returned, or never
				 * written) keeps its resident pages anywhere */
				*resident = best_window(h, s, n, at);
				return s;
			}
			if (s->dirty && LA_MIN(n, s->dirty) > best_r) {
				uint32_t off, r = starts ? start_window(h, s, n, &off)
				                         : best_window(h, s, n, &off);
				if (r > best_r) {
					best = s;
					best_r = r;
					best_at = off;
					if (r == can)
						goto done;
				}
			}
			if (!first)
				first = s;
			if (!h->dirty_pages || ++looked >= FIT_SCAN)
				goto done;
		}
	}
done:
	if (best) {
		*at = best_at;
		*resident = best_r;
		return best;
	}
	if (dirty_only)
		return NULL;
	if (room && h->dirty_pages < n) {
		unsigned k = h->bin_mask[1]   ? 64 + 63 - (unsigned)__builtin_clzll(h->bin_mask[1])
		             : h->bin_mask[0] ? 63 - (unsigned)__builtin_clzll(h->bin_mask[0])
		                              : HEAP_NBINS;
		if (k < HEAP_NBINS && h->bins[k]->npages >= n)
			return h->bins[k];
	}
	if (first && grid > 1 && !on_grid(first, n, grid, at))
		*at = 0;
	return first;
}

static struct span *take_pages(struct heap *h, struct span *s, uint32_t at, uint32_t n,
                               uint32_t resident, uint32_t *dirty_used);

/* Span s (kind SPAN_NONE), just taken by a block placed on the grid (fit_on_grid,
 * HEAP_GRID_ALWAYS) of large heap h: at a grid page it has the page's own descriptor
 * (heap.h, span_at_grid: free finds it without the index), its pool one given back.
 * Other spans keep the pool's: a page of the grid's descriptors serves 85 grid pages (5.3
 * MiB of the heap), and spans that start on one by chance (blocks written whole leave the
 * grid: fragmentation's) would write a page of them each where the pool packs theirs. */
LA_NOINLINE static struct span *grid_own(struct heap *h, struct span *s)
{
	uint32_t first = s->first;
	if (first % HEAP_GRID_PAGES || s == span_at_grid(h, first))
		return s;
	struct span *t = desc_grid(h, first); /* (names it in the index) */
	*t = *s;
	s->kind = SPAN_NONE; /* the pool's again (desc_drop, the index aside) */
	s->npages = 0;
	s->next = h->desc_free;
	h->desc_free = s;
	return t;
}

LA_INLINE struct span *alloc_pages(struct heap *h, uint32_t n, uint32_t grid, bool dirty_only,
                                   bool room, uint32_t *dirty_used)
{
	uint32_t at, resident;
	struct span *s = find_fit(h, n, grid, dirty_only, room, &at, &resident);
	return s ? take_pages(h, s, at, n, resident, dirty_used) : NULL;
}

/* heap_alloc_pages in a large heap (grid_own: the test kept off the others' path) */
LA_NOINLINE static struct span *alloc_pages_large(struct heap *h, uint32_t n, uint32_t grid,
                                                  bool dirty_only, bool room, uint32_t *dirty_used)
{
	struct span *s = alloc_pages(h, n, grid, dirty_only, room, dirty_used);
	return s && (grid & HEAP_GRID_ALWAYS) ? grid_own(h, s) : s;
}

struct span *heap_alloc_pages(struct heap *h, uint32_t n, uint32_t grid, bool dirty_only, bool room,
                              uint32_t *dirty_used)
{
	if (n > h->free_pages)
		return NULL;
	if (unlikely(h->large))
		return alloc_pages_large(h, n, grid, dirty_only, room, dirty_used);
	return alloc_pages(h, n, grid, dirty_only, room, dirty_used);
}

struct span *heap_alloc_resident(struct heap *h, uint32_t n)
{
	uint32_t dirty, at, resident;
	if (n > h->free_pages || h->dirty_pages < n - n / 2)
		return NULL;
	struct span *s = find_fit(h, n, 1, true, false, &at, &resident);
	if (!s || resident < n - n / 2)
		return NULL;
	return take_pages(h, s, at, n, resident, &dirty);
}

/* Free span s gives its pages [at, at + n) (the caller sets the kind); the pages before
 * and after stay free, as spans of their own. resident: how many of the n are (as the
 * search counted them; 0 if it did not). */
static struct span *take_pages(struct heap *h, struct span *s, uint32_t at, uint32_t n,
                               uint32_t resident, uint32_t *dirty_used)
{
	bin_remove(h, s);
	uint32_t first = s->first, total = s->npages, d = s->dirty, stamp = s->stamp;
	bool unmeasured = s->unmeasured;
	if (at) {
		uint32_t lead_dirty = d == 0 ? 0 : d == total ? at : heap_resident_in(h, first, at);
		struct span *t = desc_new(h, first + at);
		make_free(h, s, at, lead_dirty, stamp, unmeasured);
		s = t;
		first += at;
		total -= at;
		d -= lead_dirty;
	}
	/* the dirty pages these n really are: a free span's dirty pages lie anywhere in it */
	uint32_t take_dirty = d == 0       ? 0
	                      : d == total ? n
	                      : resident   ? resident
	                                   : heap_resident_in(h, first, n);
	if (total > n)
		make_free(h, desc_new(h, first + n), total - n, d - take_dirty, stamp, unmeasured);
	s->kind = SPAN_NONE; /* the caller sets SMALL or LARGE */
	s->npages = n;
	s->dirty = 0;
	h->free_pages -= n;
	used_add(h, n);
	dirty_add(h, -(int64_t)take_dirty);
	if (h->watch)
		burst_grew(h->watch, n, take_dirty);
	uint32_t moved = hwm_update(h, first, n, n - take_dirty);
	heap_idle_update(h);
	trend(h, true);
	breath_grow(h);
	if (h->purge_due && take_dirty &&
	    (uint64_t)h->dirty_pages < (uint64_t)NEARLY_EMPTY * h->used_pages) {
		/* the heap grew back out of nearly empty into the pages a purge waiting for
		 * the control thread would have returned: that purge is off, and the heap
		 * remembers it as the refault it would have been (no other purge by the
		 * rule for REFAULT_MEMORY periods) */
		h->purge_due = 0;
		h->refaulted = 1;
		h->refault_epoch = epoch_now();
	}
	if (take_dirty < n && h->purged_recently) {
		/* the heap grows back into pages the throttle just returned: return less
		 * eagerly from now on (the decay pass lowers this again), up to
		 * HEAP_PURGE_SHIFT_MAX: at 8 (256 times the mmap threshold, 32 MiB at the
		 * defaults) a heap that each round of frees empties of more (rptest's and
		 * medsizes' BATCH shape: ~48 MiB of large blocks) purged and faulted every
		 * round's pages in again without the decay pass */
		if (h->purge_shift < HEAP_PURGE_SHIFT_MAX)
			h->purge_shift++;
		h->purged_recently = 0;
		h->refaulted = 1;
		h->refault_epoch = epoch_now();
	}
	*dirty_used = take_dirty + moved;
	return s;
}

static bool populate_missing; /* the kernel has no MADV_POPULATE_WRITE (atomic) */
static bool huge_missing;     /* no transparent huge pages for advised ranges (atomic) */

uint32_t heap_huge_cost, heap_page_cost; /* atomic: see heap.h */
int heap_huge_policy;                    /* atomic: see heap.h */
static uint64_t huge_tried_ns;           /* atomic: when huge ranges were last populated */
uint8_t heap_forks;                      /* see heap.h */

/* Bits of the huge ranges [c0, c1) (pages, multiples of HEAP_HUGE_PAGES) in `huge`. */
static uint32_t huge_bits(uint32_t c0, uint32_t c1)
{
	uint32_t k0 = c0 / HEAP_HUGE_PAGES, k1 = c1 / HEAP_HUGE_PAGES;
	return (k1 - k0 >= 32 ? ~0u : (1u << (k1 - k0)) - 1) << k0;
}

/* Bits of the huge ranges the pages [first, end) touch, whole ranges or in part. */
static uint32_t huge_touched(uint32_t first, uint32_t end)
{
	const uint32_t H = HEAP_HUGE_PAGES;
	return huge_bits(first / H * H, (end + H - 1) / H * H);
}

/* Advise the huge ranges of `bits` back to pages (MADV_NOHUGEPAGE), a call per run of
 * them; a range the kernel refuses stays in `huge` (the next purge there tries again). */
static void huge_drop(struct heap *h, uint32_t bits)
{
	while (bits) {
		uint32_t k0 = (uint32_t)__builtin_ctz(bits), k1 = k0;
		while (k1 < 32 && bits >> k1 & 1)
			k1++;
		uint32_t run = huge_bits(k0 * HEAP_HUGE_PAGES, k1 * HEAP_HUGE_PAGES);
		bits &= ~run;
		if (os_huge((char *)h + ((size_t)k0 * HEAP_HUGE_PAGES << LA_PAGE_SHIFT),
		            (size_t)(k1 - k0) * HEAP_HUGE_PAGES << LA_PAGE_SHIFT, false, h->c) == 0)
			__atomic_store_n(&h->huge, h->huge & ~run, __ATOMIC_RELAXED);
	}
}

bool heap_huge_worth(uint64_t now)
{
	int policy = __atomic_load_n(&heap_huge_policy, __ATOMIC_RELAXED);
	if (policy)
		return policy > 0;
	uint32_t hc = __atomic_load_n(&heap_huge_cost, __ATOMIC_RELAXED);
	uint32_t pc = __atomic_load_n(&heap_page_cost, __ATOMIC_RELAXED);
	if (!hc || !pc || hc <= pc)
		return true;
	/* huge pages came in slower than pages: try them again once a period */
	uint64_t last = __atomic_load_n(&huge_tried_ns, __ATOMIC_RELAXED);
	if (now - last < (uint64_t)HEAP_HUGE_RETRY_MS * 1000000u)
		return false;
	__atomic_store_n(&huge_tried_ns, now, __ATOMIC_RELAXED);
	return true;
}

/* The huge ranges to advise before populating pages [from, base + *ahead) for a growth
 * that took `rate` pages in the last windows, where pages
 * [base, ...) are the free span rs's fresh ones (its first `base - r` are resident) and
 * pages [from, base) those of the block before it: whole ranges, from the first that
 * starts at or after `from` with none of its pages resident, to the end of the one the
 * last page falls in, within rs; extends *ahead to their end. Returns their bits (0:
 * none). */
static uint32_t huge_plan(struct heap *h, uint32_t from, uint32_t base, const struct span *rs,
                          uint32_t *ahead, uint32_t rate, uint64_t now)
{
	/* a huge range ahead only for a growth that took twice as much lately (4 MiB in 20
	 * to 40 ms): like the pages ahead, what is populated is at most what the last
	 * windows took (a growth spurt of a few MiB, sizes-sweep's, gets none) */
	bool always = __atomic_load_n(&heap_huge_policy, __ATOMIC_RELAXED) > 0;
	if ((rate < HEAP_HUGE_RATE && !always) ||
	    __atomic_load_n(&huge_missing, __ATOMIC_RELAXED) || !heap_huge_worth(now))
		return 0;
	if (os_huge_size() != (size_t)HEAP_HUGE_PAGES << LA_PAGE_SHIFT) {
		__atomic_store_n(&huge_missing, true, __ATOMIC_RELAXED);
		return 0;
	}
	const uint32_t H = HEAP_HUGE_PAGES;
	uint32_t c0 = (from + H - 1) / H * H;
	if (c0 < base && heap_resident_in(h, c0, base - c0)) /* the block took resident pages */
		c0 += H;
	uint32_t c1 = LA_MIN((base + *ahead + H - 1) / H * H, (rs->first + rs->npages) / H * H);
	if (c1 < c0 + H)
		return 0;
	*ahead = c1 - base;
	return huge_bits(c0, c1);
}

uint32_t heap_populate_ahead(struct heap *h, struct span *s, uint32_t dirty)
{
	uint32_t fresh = s->npages - dirty;
	if (__atomic_load_n(&populate_missing, __ATOMIC_RELAXED))
		return 0;
	if (s->npages > HEAP_AHEAD_PAGES)
		return 0; /* a block this large faults in only what the program writes */
	/* what to populate: s's fresh pages and pages ahead of it, in the free span right
	 * after s when none of it is resident (else the next growth takes those first); or,
	 * for a growth fast enough for huge ranges, when s took only resident pages and
	 * those left ahead of it, populated before (a prefix of that span), are fewer than s
	 * took, pages after them (the refill: no span takes the first page of the next huge
	 * range on its own, fault by fault, before a block asks for it) */
	uint32_t r = s->first + s->npages, d = 0;
	struct span *rs = r < LA_HEAP_PAGES ? span_at(h, r) : NULL;
	if (rs && rs->kind != SPAN_FREE)
		rs = NULL;
	if (!fresh) {
		if (!rs || rs->dirty >= s->npages || heap_resident_in(h, r, rs->dirty) != rs->dirty)
			return 0;
		d = rs->dirty;
	} else if (rs && rs->dirty) {
		rs = NULL;
	}
	/* the rate of fresh pages: this window's and the previous one's, if it was the last.
	 * In a forked child a window begun before the fork is the parent's growth: the child's
	 * own begins at its first large block (the fork loop's trim children populated up to
	 * 139 pages at their first block after the trim, for their last trim to purge) */
	uint64_t now = os_now_ns(), window = (uint64_t)HEAP_FAST_WINDOW_MS * 1000000u;
	bool inherited = h->fresh_forks != heap_forks;
	if (now - h->fresh_ns >= window || inherited) {
		h->fresh_prev = now - h->fresh_ns < 2 * window && !inherited ? h->fresh_pages : 0;
		h->fresh_pages = 0;
		h->fresh_ns = now;
		h->fresh_forks = heap_forks;
	}
	/* the rate before this block: one large block alone is no fast growth */
	uint32_t rate = h->fresh_pages + h->fresh_prev;
	h->fresh_pages += fresh;
	if (rate < (fresh ? HEAP_FAST_PAGES : HEAP_HUGE_RATE) ||
	    (!fresh && (!rs || d == rs->npages)))
		return 0;
	/* ahead: as many pages as the growth took lately, bounded (to the end of a huge
	 * range where those come) */
	uint32_t base = r + d, ahead = 0, huge = 0;
	if (rs) {
		ahead = LA_MIN(LA_MIN(rate, HEAP_AHEAD_PAGES), rs->npages - d);
		uint32_t want = ahead;
		huge = huge_plan(h, fresh ? s->first : base, base, rs, &want, rate, now);
		if (huge) {
			uint32_t k0 = (uint32_t)__builtin_ctz(huge);
			uint32_t n = la_popcount64(huge) * HEAP_HUGE_PAGES;
			int e = os_huge((char *)h + ((size_t)k0 * HEAP_HUGE_PAGES << LA_PAGE_SHIFT),
			                (size_t)n << LA_PAGE_SHIFT, true, h->c);
			if (e == 0) {
				__atomic_store_n(&h->huge, h->huge | huge, __ATOMIC_RELAXED);
				ahead = want;
			} else {
				if (e == EINVAL) /* a kernel without THP */
					__atomic_store_n(&huge_missing, true, __ATOMIC_RELAXED);
				huge = 0;
			}
		}
	}
	uint32_t from = fresh ? s->first : base, pages = base + ahead - from;
	int err = os_populate((char *)h + ((size_t)from << LA_PAGE_SHIFT),
	                      (size_t)pages << LA_PAGE_SHIFT, h->c);
	if (err == EINVAL) /* the kernel lacks it (or a page was made unwritable): no more */
		__atomic_store_n(&populate_missing, true, __ATOMIC_RELAXED);
	if (!err) {
		/* what it cost a page, into the moving average of calls with huge ranges or
		 * of those without (a quarter each call: a huge page the host must give back
		 * costs 30 times a hot one, and both come from the same free lists) */
		uint64_t ns = (os_now_ns() - now) / pages;
		uint32_t cost = ns > UINT32_MAX / 2 ? UINT32_MAX / 2 : ns ? (uint32_t)ns : 1;
		uint32_t *avg = huge ? &heap_huge_cost : &heap_page_cost;
		uint32_t c = __atomic_load_n(avg, __ATOMIC_RELAXED);
		c = c ? c - c / 4 + cost / 4 : cost;
		__atomic_store_n(avg, c ? c : 1, __ATOMIC_RELAXED);
		if (huge)
			__atomic_store_n(&huge_tried_ns, now, __ATOMIC_RELAXED);
	}
	if (err && huge)
		huge_drop(h, huge); /* not all in: khugepaged must not fill the rest */
	if (!ahead)
		return 0;
	if (err) {
		/* it stopped at some page (ENOMEM, EINVAL, ...): those before it are in */
		int32_t gone = (int32_t)heap_measure_range(h, base, ahead);
		rs->dirty = (uint32_t)((int32_t)rs->dirty - gone);
		dirty_add(h, -gone);
		ahead = rs->dirty - d;
	} else {
		heap_touch(h, base, ahead);
		rs->dirty += ahead;
		dirty_add(h, ahead);
	}
	if (rs->dirty)
		rs->stamp = stamp_now();
	h->fresh_pages += ahead;
	return ahead;
}

void heap_populate_first(struct heap *h, const struct span *s)
{
	if (__atomic_load_n(&populate_missing, __ATOMIC_RELAXED) ||
	    heap_resident_in(h, s->first, 1))
		return;
	if (os_populate(span_base(h, s), LA_PAGE, h->c) == EINVAL)
		__atomic_store_n(&populate_missing, true, __ATOMIC_RELAXED);
}

/* The stamp of dirty pages merged from two spans: the older one (a span's pages go back
 * together, so the oldest of them decides), ignoring a span with nothing dirty. */
static uint32_t merged_stamp(uint32_t stamp, uint32_t d, const struct span *o)
{
	if (!o->dirty)
		return stamp;
	return !d || older(o->stamp, stamp) ? o->stamp : stamp;
}

struct span *heap_free_pages(struct heap *h, struct span *s)
{
	uint32_t first = s->first, n = s->npages, d = heap_resident_in(h, first, n);
	uint32_t stamp = stamp_now();
	/* its pages count resident as the allocation marked them, written or not: the next
	 * measurement reads the span (and what it merges with) */
	bool unmeasured = d != 0;
	used_add(h, -(int64_t)n);
	h->free_pages += n;
	dirty_add(h, d);
	if (h->watch)
		burst_shrank(h->watch, n);
	heap_idle_update(h);
	trend(h, false);
	breath_shrink(h);
	/* coalesce with the right neighbour */
	uint32_t r = first + n;
	struct span *rs = r < LA_HEAP_PAGES ? span_at(h, r) : NULL;
	if (rs && rs->kind == SPAN_FREE) {
		bin_remove(h, rs);
		stamp = merged_stamp(stamp, d, rs);
		unmeasured |= rs->dirty && rs->unmeasured;
		n += rs->npages;
		d += rs->dirty;
		desc_drop(h, rs);
	}
	/* coalesce with the left neighbour (its last page maps to its first) */
	if (first > h->first_page) {
		uint32_t l = pm_head(h->pagemap[first - 1]);
		struct span *ls = span_at(h, l);
		if (l < first && ls->kind == SPAN_FREE && l + ls->npages == first) {
			bin_remove(h, ls);
			stamp = merged_stamp(stamp, d, ls);
			unmeasured |= ls->dirty && ls->unmeasured;
			n += ls->npages;
			d += ls->dirty;
			desc_drop(h, s);
			s = ls;
		}
	}
	return make_free(h, s, n, d, stamp, unmeasured);
}

struct span *heap_split_span(struct heap *h, struct span *s, uint32_t lead)
{
	struct span *t = desc_new(h, s->first + lead);
	t->kind = s->kind;
	t->npages = s->npages - lead;
	s->npages = lead;
	heap_map_span(h, s, false);
	heap_map_span(h, t, false);
	return t;
}

void heap_shrink_span(struct heap *h, struct span *s, uint32_t keep)
{
	uint32_t tail = s->npages - keep;
	if (!tail)
		return;
	heap_free_pages(h, heap_split_span(h, s, keep));
}

bool heap_grow_span(struct heap *h, struct span *s, uint32_t want, bool resident_only,
                    uint32_t *dirty_used)
{
	uint32_t first = s->first, r = first + s->npages;
	uint32_t need = want - s->npages;
	if (r >= LA_HEAP_PAGES)
		return false;
	struct span *rs = span_at(h, r);
	if (rs->kind != SPAN_FREE || rs->npages < need)
		return false;
	uint32_t total = rs->npages, d = rs->dirty, stamp = rs->stamp;
	bool unmeasured = rs->unmeasured;
	uint32_t take_dirty = d == 0 ? 0 : d == total ? need : heap_resident_in(h, r, need);
	if (resident_only && take_dirty < need)
		return false;
	bin_remove(h, rs);
	desc_drop(h, rs);
	if (total > need)
		make_free(h, desc_new(h, r + need), total - need, d - take_dirty, stamp,
		          unmeasured);
	h->free_pages -= need;
	used_add(h, need);
	dirty_add(h, -(int64_t)take_dirty);
	if (h->watch)
		burst_grew(h->watch, need, take_dirty);
	uint32_t moved = hwm_update(h, r, need, need - take_dirty);
	trend(h, true);
	breath_grow(h);
	s->npages = want;
	heap_map_span(h, s, false);
	*dirty_used = take_dirty + moved;
	return true;
}

/* The resident bitmap bounds what of free span s can be resident: it marks every page an
 * allocator write made resident, and the kernel makes others resident only with a
 * transparent huge page, in a range advised for one (h->huge) or, in mode "always",
 * anywhere. Then mincore need look at the marked runs only. */
static bool bitmap_bounds(const struct heap *h, const struct span *s)
{
	return !os_thp_always() && !(h->huge & huge_touched(s->first, s->first + s->npages));
}

/* Resident bytes of free span s, for an operation that measures what it returns
 * (os_measure). A trim in a forked child measured a 64 MiB free span with a few resident
 * pages in 16 calls of 4 MiB, as long as its madvise took. */
static size_t span_resident(struct heap *h, const struct span *s, struct rwin *w)
{
	uint32_t end = s->first + s->npages;
	if (!bitmap_bounds(h, s))
		return win_resident(h, w, s->first, end);
	size_t total = 0;
	for (uint32_t i = next_bit(h, s->first, end, true); i < end;) {
		uint32_t j = next_bit(h, i, end, false);
		total += win_resident(h, w, i, j);
		i = next_bit(h, j, end, true);
	}
	return total;
}

/* What of free span s a purge advises: where the bitmap bounds what can be resident
 * (bitmap_bounds), from its first marked page to the end of its last, else all of it;
 * [*lo, *hi), empty when no page can be resident (no call then). The kernel walks every
 * page table in an advised range, entry by entry, resident or not: a forked child's trim
 * advised the parent's free spans whole, 21-25k pages a child of the fork loop (its
 * madvise time mostly in unmap_page_range), ~450 this way in as many calls. */
static void purge_range(const struct heap *h, const struct span *s, uint32_t *lo, uint32_t *hi)
{
	uint32_t first = s->first, end = s->first + s->npages;
	if (bitmap_bounds(h, s)) {
		first = next_bit(h, first, end, true);
		end = first < end ? last_bit_end(h, first, end) : first;
	}
	*lo = first;
	*hi = end;
}

/* Advise pages [lo, hi) of h back (none: nothing to do); 0 or the errno. */
static int purge_pages(struct heap *h, uint32_t lo, uint32_t hi)
{
	if (lo >= hi)
		return 0;
	return os_purge((char *)h + ((size_t)lo << LA_PAGE_SHIFT),
	                (size_t)(hi - lo) << LA_PAGE_SHIFT, h->c);
}

/* What follows a purge of free span s that went through: the huge ranges it touched, its
 * bits and counts. */
static void purge_done(struct heap *h, struct span *s)
{
	/* huge ranges it touches: a whole one went back at once; a part of one split its
	 * mapping, and the kernel keeps the whole huge page — charged to the memory cgroup,
	 * though no longer resident to mincore — until the rest goes too or memory pressure
	 * splits it (at a cgroup's limit: reclaim a climbing neighbour must wait for).
	 * MADV_COLD over such a range splits it now, which frees the purged part. Either
	 * way the range faults a page at a time from now on. */
	const uint32_t H = HEAP_HUGE_PAGES;
	uint32_t end = s->first + s->npages;
	uint32_t huge = h->huge & huge_touched(s->first, end);
	if (huge) {
		uint32_t k0 = s->first / H, k1 = (end - 1) / H;
		if ((s->first % H || (k0 == k1 && end % H)) && huge >> k0 & 1)
			os_cold((char *)h + ((size_t)k0 * H << LA_PAGE_SHIFT),
			        (size_t)H << LA_PAGE_SHIFT, h->c);
		if (k1 != k0 && end % H && huge >> k1 & 1)
			os_cold((char *)h + ((size_t)k1 * H << LA_PAGE_SHIFT),
			        (size_t)H << LA_PAGE_SHIFT, h->c);
		huge_drop(h, huge);
	}
	uint32_t before = 0;
	BITS_FOR(h->resident, s->first, s->npages, word & ~mask);
	resident_add(h, -(int64_t)before);
	dirty_add(h, -(int64_t)s->dirty);
	s->dirty = 0;
	s->unmeasured = 0;
}

/* Advise pages [lo, hi) of h back, not measured (the caller measured them); 0 or the
 * errno. */
static int purge_pages_measured(struct heap *h, uint32_t lo, uint32_t hi)
{
	uint64_t *m = os_measure;
	os_measure = NULL;
	int rc = purge_pages(h, lo, hi);
	os_measure = m;
	return rc;
}

/* The window of a purge that measures what it returns (os_measure), else NULL. */
static struct rwin *purge_window(struct heap *h, struct rwin *w)
{
	if (likely(os_measure == NULL))
		return NULL;
	win_init(h, w, false, NULL);
	return w;
}

/* ---- purges of many spans at once -----------------------------------------------------
 * A pass that purges many free spans (a trim, the decay pass, a throttled return) queues
 * them and advises up to PURGE_BATCH ranges in one system call (os_purge_many): a madvise
 * per span flushed the TLB page by page for each (the kernel's ceiling: 33 pages), ~4 us a
 * call of 10 shared pages in a forked child. Each span's bits and counts follow its purge
 * (purge_done), so the pass counts the queued spans' dirty pages (pending) as gone; under
 * os_measure a span is measured when queued (its resident bytes added then, taken back if
 * its purge is refused). Fewer than PURGE_MANY_MIN ranges, or a kernel without it: a
 * madvise each, as before. */
#define PURGE_BATCH    16u
#define PURGE_MANY_MIN 3u
struct pbatch {
	uint32_t n, pending; /* spans queued, their dirty pages */
	uint32_t purged;     /* dirty pages of the spans purged */
	uint32_t *oldest;    /* (heap_purge_aged) a refused span's stamp, if older */
	struct span *s[PURGE_BATCH];
	uint64_t res[PURGE_BATCH]; /* (under os_measure) what each held resident */
	struct iovec iov[PURGE_BATCH];
};

static void purge_refused(struct pbatch *pb, const struct span *s)
{
	if (pb->oldest && older(s->stamp, *pb->oldest))
		*pb->oldest = s->stamp;
}

static void purge_flush(struct heap *h, struct pbatch *pb)
{
	uint32_t done = pb->n >= PURGE_MANY_MIN ? os_purge_many(pb->iov, pb->n, h->c) : 0;
	for (uint32_t i = 0; i < pb->n; i++) {
		struct span *s = pb->s[i];
		if (i >= done) {
			char *p = pb->iov[i].iov_base;
			uint32_t lo = (uint32_t)((size_t)(p - (char *)h) >> LA_PAGE_SHIFT);
			uint32_t hi = lo + (uint32_t)(pb->iov[i].iov_len >> LA_PAGE_SHIFT);
			if (purge_pages_measured(h, lo, hi) != 0) {
				if (os_measure)
					*os_measure -= pb->res[i];
				purge_refused(pb, s);
				continue;
			}
		}
		pb->purged += s->dirty;
		purge_done(h, s);
	}
	pb->n = pb->pending = 0;
}

/* Purge free span s (dirty) with the others of the pass. */
static void purge_queue(struct heap *h, struct span *s, struct rwin *w, struct pbatch *pb)
{
	uint32_t lo, hi;
	purge_range(h, s, &lo, &hi);
	if (lo >= hi) { /* nothing resident: no system call */
		pb->purged += s->dirty;
		purge_done(h, s);
		return;
	}
	uint64_t res = 0;
	if (unlikely(os_measure != NULL)) {
		res = span_resident(h, s, w);
		*os_measure += res;
	}
	uint32_t i = pb->n++;
	pb->s[i] = s;
	pb->res[i] = res;
	pb->iov[i].iov_base = (char *)h + ((size_t)lo << LA_PAGE_SHIFT);
	pb->iov[i].iov_len = (size_t)(hi - lo) << LA_PAGE_SHIFT;
	pb->pending += s->dirty;
	if (pb->n == PURGE_BATCH)
		purge_flush(h, pb);
}

uint32_t heap_purge(struct heap *h, uint32_t keep)
{
	struct rwin win, *w = purge_window(h, &win);
	struct pbatch pb = {0};
	uint32_t steps = 0;
	/* largest spans first: fewest system calls for the most memory */
	for (int b = HEAP_NBINS - 1; b >= 0 && h->dirty_pages - pb.pending > keep && !os_goal_met();
	     b--) {
		for (struct span *s = h->bins[b];
		     s && h->dirty_pages - pb.pending > keep && !os_goal_met();
		     s = bin_next(s, &steps))
			if (s->dirty)
				purge_queue(h, s, w, &pb);
	}
	purge_flush(h, &pb);
	return pb.purged;
}

/* heap_purge_aged's pass; w: the window of a measured purge (NULL: none). The window (1 KiB
 * of residency) is on the measured pass's own frame (purge_aged_measured), not on this one:
 * on the control thread, whose decay pass runs this, a frame of 1,696 bytes reached one
 * page deeper into its stack (a copy-on-write fault in every forked child that decays:
 * bench/README.md, the fork loop). */
static LA_NOINLINE uint32_t purge_aged(struct heap *h, uint32_t before, uint32_t stale,
                                       uint32_t *oldest, struct rwin *w)
{
	struct pbatch pb = {.oldest = oldest};
	uint32_t steps = 0, tick = before + HEAP_PERIOD;
	for (int b = HEAP_NBINS - 1; b >= 0 && h->dirty_pages - pb.pending; b--) {
		for (struct span *s = h->bins[b]; s; s = bin_next(s, &steps)) {
			if (!s->dirty)
				continue;
			if (s->stamp == stale)
				s->stamp = tick;
			if (older(s->stamp, before))
				purge_queue(h, s, w, &pb); /* (refused: its stamp to *oldest) */
			else if (older(s->stamp, *oldest))
				*oldest = s->stamp;
		}
	}
	purge_flush(h, &pb);
	return pb.purged;
}

static LA_NOINLINE uint32_t purge_aged_measured(struct heap *h, uint32_t before, uint32_t stale,
                                                uint32_t *oldest)
{
	struct rwin win;
	return purge_aged(h, before, stale, oldest, purge_window(h, &win));
}

uint32_t heap_purge_aged(struct heap *h, uint32_t before, uint32_t stale, uint32_t *oldest)
{
	if (unlikely(os_measure != NULL))
		return purge_aged_measured(h, before, stale, oldest);
	return purge_aged(h, before, stale, oldest, NULL);
}

/* The first page of [first, end) whose `resident` bit is clear; end if none. */
static uint32_t first_fresh(const struct heap *h, uint32_t first, uint32_t end)
{
	for (uint32_t i = first; i < end;) {
		uint64_t w = ~h->resident[i >> 6] >> (i & 63);
		if (w) {
			uint32_t at = i + (uint32_t)__builtin_ctzll(w);
			return LA_MIN(at, end);
		}
		i = (i | 63) + 1;
	}
	return end;
}

/* Populate pages [from, from + k) of free span s (some may be resident already: the
 * kernel skips those); false when the kernel refused (what came in is counted). */
static bool prepare_range(struct heap *h, struct span *s, uint32_t from, uint32_t k, uint32_t stamp,
                          uint32_t *got)
{
	int err = os_populate((char *)h + ((size_t)from << LA_PAGE_SHIFT),
	                      (size_t)k << LA_PAGE_SHIFT, h->c);
	uint32_t before = s->dirty;
	if (err) {
		if (err == EINVAL)
			__atomic_store_n(&populate_missing, true, __ATOMIC_RELAXED);
		/* it stopped at some page: those before it are in */
		int32_t gone = (int32_t)heap_measure_range(h, s->first, s->npages);
		s->dirty = (uint32_t)((int32_t)s->dirty - gone);
		dirty_add(h, -gone);
	} else {
		uint32_t fresh = k - heap_resident_in(h, from, k);
		heap_touch(h, from, k);
		s->dirty += fresh;
		dirty_add(h, fresh);
	}
	if (s->dirty)
		s->stamp = stamp;
	*got = s->dirty > before ? s->dirty - before : 0;
	return err == 0;
}

bool heap_huge_in(const struct heap *h, uint32_t first, uint32_t n)
{
	return os_thp_always() ||
	       (__atomic_load_n(&h->huge, __ATOMIC_RELAXED) & huge_touched(first, first + n));
}

bool heap_adopt(struct heap *h, void *p, uint32_t n)
{
	for (int b = HEAP_NBINS - 1; b >= 0; b--) {
		for (struct span *s = h->bins[b]; s; s = s->next) {
			if (s->npages < n)
				break; /* (only the bin's first span is looked at) */
			uint32_t end = s->first + s->npages;
			uint32_t from = first_fresh(h, s->first, end);
			if (from + n > end || heap_resident_in(h, from, n) ||
			    (h->huge & huge_touched(from, from + n)))
				break;
			if (os_move(p, (size_t)n << LA_PAGE_SHIFT,
			            (char *)h + ((size_t)from << LA_PAGE_SHIFT), h->c))
				return false;
			heap_touch(h, from, n);
			if (!s->dirty) /* (else the stamp stays the oldest's) */
				s->stamp = stamp_now();
			s->dirty += n;
			/* counted resident whole, as the mapping was: the next measurement reads
			 * what the program wrote of it (measure_wants) */
			s->unmeasured = 1;
			dirty_add(h, n);
			return true;
		}
	}
	return false;
}

uint32_t heap_fresh_run(const struct heap *h, uint32_t first, uint32_t n, uint32_t *at)
{
	uint32_t end = first + n, i = first_fresh(h, first, end);
	*at = i;
	for (uint32_t j = i; j < end;) {
		uint64_t w = h->resident[j >> 6] >> (j & 63);
		if (w)
			return LA_MIN(j + (uint32_t)__builtin_ctzll(w), end) - i;
		j = (j | 63) + 1;
	}
	return end - i;
}

bool heap_move_under(struct heap *h, void *p, uint32_t from, uint32_t n)
{
	if (h->huge & huge_touched(from, from + n))
		return false;
	if (os_move(p, (size_t)n << LA_PAGE_SHIFT, (char *)h + ((size_t)from << LA_PAGE_SHIFT),
	            h->c))
		return false;
	heap_touch(h, from, n);
	return true;
}

uint32_t heap_prepare(struct heap *h, uint32_t max, uint32_t stamp, bool *failed)
{
	*failed = __atomic_load_n(&populate_missing, __ATOMIC_RELAXED);
	if (*failed)
		return 0;
	/* spans with resident pages first (an allocation takes a span with some before any
	 * other, and its first pages: their holes are filled), then the largest */
	for (int pass = 0; pass < 2; pass++) {
		uint32_t steps = 0;
		for (int b = HEAP_NBINS - 1; b >= 0; b--) {
			for (struct span *s = h->bins[b]; s; s = bin_next(s, &steps)) {
				if (s->dirty == s->npages || (pass == 0) != (s->dirty != 0))
					continue;
				uint32_t end = s->first + s->npages;
				uint32_t from = first_fresh(h, s->first, end), got = 0;
				if (from == end)
					continue;
				*failed = !prepare_range(h, s, from, LA_MIN(max, end - from), stamp,
				                         &got);
				return got;
			}
		}
	}
	return 0;
}

uint32_t heap_purge_stamped(struct heap *h, uint32_t stamp)
{
	struct rwin win, *w = purge_window(h, &win);
	struct pbatch pb = {0};
	uint32_t steps = 0;
	for (int b = HEAP_NBINS - 1; b >= 0 && h->dirty_pages - pb.pending; b--) {
		for (struct span *s = h->bins[b]; s; s = bin_next(s, &steps))
			if (s->dirty && s->stamp == stamp)
				purge_queue(h, s, w, &pb);
	}
	purge_flush(h, &pb);
	return pb.purged;
}
