/* heap.c — the page allocator inside one heap: size bins of free spans, first fit from the
 * smallest bin, coalescing on free, purging of dirty free spans, and the grow/shrink trend.
 * Caller holds the owning arena's lock for everything but heap_create. */
#include "heap.h"

#include <string.h>

#include "os.h"

uint16_t heap_owner[LA_HEAP_SLOTS];

#define HEADER_PAGES ((uint32_t)((sizeof(struct heap) + LA_PAGE - 1) >> LA_PAGE_SHIFT))

uint32_t heap_data_pages(void)
{
	return (uint32_t)LA_HEAP_PAGES - HEADER_PAGES;
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

void heap_map_span(struct heap *h, struct span *s, bool all)
{
	uint32_t first = s->first, last = first + s->npages - 1;
	if (all) {
		uint32_t e = first | PM_SMALL | (uint32_t)s->cls << 24;
		for (uint32_t i = first; i <= last; i++)
			h->pagemap[i] = e;
	} else {
		h->pagemap[first] = first;
		h->pagemap[last] = first;
	}
}

void heap_unmap_small(struct heap *h, struct span *s)
{
	uint32_t first = s->first, last = first + s->npages - 1;
	for (uint32_t i = first; i <= last; i++)
		h->pagemap[i] = first;
}

/* A descriptor for a span starting at page first (kind SPAN_NONE until the caller sets
 * it): a given-back one, else the next never-used one, so the pool's touched pages follow
 * the most spans the heap ever had at once. */
static struct span *desc_new(struct heap *h, uint32_t first)
{
	struct span *s = h->desc_free;
	if (s)
		h->desc_free = s->next;
	else
		s = &h->desc[h->desc_top++];
	memset(s, 0, sizeof(*s));
	s->first = first;
	h->spanidx[first] = (uint16_t)(s - h->desc);
	return s;
}

/* The span s ends (merged into a neighbour): its first page starts no span now. */
static void desc_drop(struct heap *h, struct span *s)
{
	h->spanidx[s->first] = 0;
	s->kind = SPAN_NONE;
	s->npages = 0;
	s->next = h->desc_free;
	h->desc_free = s;
}

/* Make descriptor s (its first page set) a FREE span of n pages, d dirty, in its bin. */
static struct span *make_free(struct heap *h, struct span *s, uint32_t n, uint32_t d)
{
	uint32_t first = s->first;
	s->kind = SPAN_FREE;
	s->npages = n;
	s->dirty = d;
	s->used = s->bump = s->offset = 0;
	s->free = NULL;
	/* the last page's entry serves only the left-coalescing of the span to its right:
	 * at the heap's end there is none, and not writing it leaves the page map's last
	 * page untouched (4 KiB of every heap's resident size) */
	h->pagemap[first] = first;
	if (first + n < LA_HEAP_PAGES)
		h->pagemap[first + n - 1] = first;
	bin_insert(h, s);
	return s;
}

struct heap *heap_create(struct arena *a, uint32_t arena_index, struct la_counters *c)
{
	struct heap *h = os_map_aligned(LA_HEAP_SIZE, LA_HEAP_SIZE, c);
	if (!h)
		return NULL;
	h->magic = HEAP_MAGIC;
	h->arena = a;
	h->first_page = HEADER_PAGES;
	h->free_pages = heap_data_pages();
	h->desc_top = 1; /* desc[0] stays SPAN_NONE */
	make_free(h, desc_new(h, HEADER_PAGES), heap_data_pages(), 0);
	__atomic_store_n(&heap_owner[(uintptr_t)h >> LA_HEAP_SHIFT], heap_tag(arena_index),
	                 __ATOMIC_RELEASE);
	return h;
}

void heap_destroy(struct heap *h, struct la_counters *c)
{
	__atomic_store_n(&heap_owner[(uintptr_t)h >> LA_HEAP_SHIFT], 0, __ATOMIC_RELEASE);
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

/* Find the first free span of at least n pages, smallest bin first. */
static struct span *find_fit(struct heap *h, uint32_t n)
{
	unsigned b = bin_of(n);
	/* the bin of n may hold smaller spans (log bins): scan it first */
	for (struct span *s = h->bins[b]; s; s = s->next)
		if (s->npages >= n)
			return s;
	for (unsigned w = (b + 1) >> 6; w < 2; w++) {
		uint64_t m = h->bin_mask[w];
		if (w == (b + 1) >> 6)
			m &= ~0ULL << ((b + 1) & 63);
		while (m) {
			unsigned k = (w << 6) + (unsigned)__builtin_ctzll(m);
			/* every span in a higher bin is large enough; prefer dirty ones */
			struct span *best = h->bins[k];
			for (struct span *s = best; s; s = s->next)
				if (s->dirty) {
					best = s;
					break;
				}
			return best;
		}
	}
	return NULL;
}

struct span *heap_alloc_pages(struct heap *h, uint32_t n, uint32_t *dirty_used)
{
	if (n > h->free_pages)
		return NULL;
	struct span *s = find_fit(h, n);
	if (!s)
		return NULL;
	bin_remove(h, s);
	uint32_t first = s->first, total = s->npages, d = s->dirty;
	uint32_t take_dirty = LA_MIN(d, n);
	if (total > n)
		make_free(h, desc_new(h, first + n), total - n, d - take_dirty);
	s->kind = SPAN_NONE; /* the caller sets SMALL or LARGE */
	s->npages = n;
	s->dirty = 0;
	h->free_pages -= n;
	h->used_pages += n;
	h->dirty_pages -= take_dirty;
	h->alloc_events++;
	trend(h, true);
	if (take_dirty < n && h->purged_recently) {
		/* the heap grows back into pages the throttle just returned: return less
		 * eagerly from now on (the decay pass lowers this again) */
		if (h->purge_shift < 8)
			h->purge_shift++;
		h->purged_recently = 0;
	}
	*dirty_used = take_dirty;
	return s;
}

struct span *heap_free_pages(struct heap *h, struct span *s)
{
	uint32_t first = s->first, n = s->npages, d = n;
	h->used_pages -= n;
	h->free_pages += n;
	h->dirty_pages += n;
	trend(h, false);
	/* coalesce with the right neighbour */
	uint32_t r = first + n;
	struct span *rs = r < LA_HEAP_PAGES ? span_at(h, r) : NULL;
	if (rs && rs->kind == SPAN_FREE) {
		bin_remove(h, rs);
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
			n += ls->npages;
			d += ls->dirty;
			desc_drop(h, s);
			s = ls;
		}
	}
	return make_free(h, s, n, d);
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

bool heap_grow_span(struct heap *h, struct span *s, uint32_t want, uint32_t *dirty_used)
{
	uint32_t first = s->first, r = first + s->npages;
	uint32_t need = want - s->npages;
	if (r >= LA_HEAP_PAGES)
		return false;
	struct span *rs = span_at(h, r);
	if (rs->kind != SPAN_FREE || rs->npages < need)
		return false;
	bin_remove(h, rs);
	uint32_t total = rs->npages, d = rs->dirty, take_dirty = LA_MIN(d, need);
	desc_drop(h, rs);
	if (total > need)
		make_free(h, desc_new(h, r + need), total - need, d - take_dirty);
	h->free_pages -= need;
	h->used_pages += need;
	h->dirty_pages -= take_dirty;
	h->alloc_events++;
	trend(h, true);
	s->npages = want;
	heap_map_span(h, s, false);
	*dirty_used = take_dirty;
	return true;
}

uint32_t heap_purge(struct heap *h, uint32_t keep, struct la_counters *c, size_t *resident)
{
	uint32_t purged = 0;
	/* largest spans first: fewest system calls for the most memory */
	for (int b = HEAP_NBINS - 1; b >= 0 && h->dirty_pages > keep; b--) {
		for (struct span *s = h->bins[b]; s && h->dirty_pages > keep; s = s->next) {
			if (!s->dirty)
				continue;
			void *base = span_base(h, s);
			size_t len = (size_t)s->npages << LA_PAGE_SHIFT;
			if (resident)
				*resident += os_resident(base, len);
			if (os_purge(base, len, c) != 0)
				continue;
			h->dirty_pages -= s->dirty;
			purged += s->dirty;
			s->dirty = 0;
		}
	}
	return purged;
}
