/* heap.h — heaps: LA_HEAP_SIZE regions aligned to their size, carved into spans of pages.
 * A span is a run of pages that is FREE (in a size bin of its heap), SMALL (blocks of one
 * size class), LARGE (one block), PARKED (a large block freed and kept whole by its
 * arena for the next large allocation of its size: in use as far as the heap knows) or
 * META (the allocator's own memory: never a block free() accepts).
 * Span descriptors live in the heap header in a pool, one per span: spanidx[page] names
 * the descriptor of the span starting at that page (0, a SPAN_NONE descriptor, on every
 * other page). So the header pages a heap touches follow its spans, not its pages: with a
 * descriptor slot per page, the slots of span heads a few pages apart kept 48 bytes of
 * header resident per data page (1.2%); pagemap[page] names the first page
 * of the span covering it (all pages of SMALL spans, first and last page of the others);
 * on every page of a live SMALL span it also carries PM_SMALL and the class, so free's
 * fast path needs no span descriptor. The heap also carries the grow/shrink trend that
 * drives the madvise throttle. Everything here is guarded by the owning arena's lock,
 * except the registration bitmap (atomic) and the read-only fields set at creation.
 *
 * Accounting (liballoc_shm.h, LA_MEMORY): `resident` has a bit per data page that may be
 * resident, as far as the allocator knows: set for a large block's pages when it is
 * handed out (the program may write all of it), for a small span's pages as blocks are
 * carved from them, for free pages populated ahead (heap_populate_ahead), kept while the
 * page is free, cleared when the page is purged or measured not resident (heap_measure). A FREE span's `dirty` is the count of its set
 * bits, exactly: an allocation takes the dirty pages it really covers. The heap keeps
 * its arena's data_resident, free_resident, metadata and idle_metadata gauges. */
#ifndef LA_HEAP_H
#define LA_HEAP_H

#include "burst.h"
#include "common.h"
#include "sizeclass.h"

enum {
	SPAN_NONE = 0,
	SPAN_FREE = 1,
	SPAN_SMALL = 2,
	SPAN_LARGE = 3,
	SPAN_PARKED = 4,
	SPAN_META = 5, /* the allocator's own: a thread cache's slots, a transfer cache */
};

/* The offset of a freed large block that a thread cache keeps (tcache.h, the large slot):
 * no block starts there (blocks are LA_ALIGN-aligned), so span_lookup finds no block and
 * a second free of it is a double free (malloc.c, free_slow). */
#define SPAN_OFFSET_CACHED UINT32_MAX

struct span {
	uint8_t kind;       /* SPAN_*; SPAN_NONE on pages that are not a span's first */
	uint8_t cls;        /* SMALL: size class */
	uint8_t on_partial; /* SMALL: linked on the arena's partial list of its class */
	union {
		uint8_t warm;       /* SMALL: all its pages had been used before (may be
		                     * resident) */
		uint8_t unmeasured; /* FREE: holds pages freed since a measurement last read
		                     * it (heap_measure: the others' `resident` bits are what
		                     * mincore said, and only an allocator write sets them) */
	};
	uint32_t npages; /* pages in the span */
	uint32_t first;  /* the heap page it starts at */
	uint16_t used;   /* SMALL: blocks out (held by users or thread caches); a span
	                 * holds at most 23 pages of 16 bytes (sizeclass.c): 5888 blocks */
	uint16_t bump;   /* SMALL: blocks [bump, capacity) were never handed out */
	uint32_t dirty;  /* FREE: pages that may be resident (its set `resident` bits) */
	union {
		uint32_t offset;   /* LARGE: bytes from the span start to the block (aligned);
		                  * SPAN_OFFSET_CACHED while a thread cache holds it freed */
		uint32_t stamp;    /* FREE with dirty pages: heap_epoch when the oldest of them
		                  * was freed (the decay pass returns them by age) */
		uint32_t list_out; /* SMALL: a thread cache holds its whole free list (arena.c,
		                    * arena_take_list): free's double-free check looks there */
	};
	void *free;        /* SMALL: free blocks, safe-linked */
	struct span *next; /* FREE: size bin; SMALL: partial list */
	struct span *prev;
};

/* (span_at_grid) */
#define HEAP_GRID_PAGES      16u
#define HEAP_GRID_DESC       LA_HEAP_PAGES
#define HEAP_GRID_DESC_PAGES 12u /* pages of a large heap's grid descriptors */

#define HEAP_NBINS 84
#define HEAP_MAGIC 0x50414548434f4c4cULL /* "LLOCHEAP" */

struct arena;

/* The header's layout (struct heap): its fields, then the page map, the descriptor index and
 * the descriptors, each placed so that the part a heap writes first starts a page: the
 * entries of its first data page (HEAP_HDR_PAGES on) in the page map and in the index, and
 * the descriptors from desc[0]. A heap whose data pages stay below 4 MiB (1,024 page-map
 * entries) and 85 spans writes one page of each, and its fields' page: 4 header pages. At
 * their natural offsets the page map's first entries began 0.9 KiB before a page's end,
 * the index's 0.4 KiB, and desc[1] 48 bytes after one: python3 -c pass wrote 6 (pages 0-1,
 * 16-17, 24-25). HEAP_HDR_PAGES is the header's size in pages (asserted below). */
#define HEAP_HDR_PAGES    217u
#define HEAP_PAGE_MOD(x)  ((size_t)(x) & (LA_PAGE - 1))
/* bytes before the page map, so that its entry of page HEAP_HDR_PAGES starts a page: the
 * fields' room (a multiple of 64, the union's alignment at most), then padding */
#define HEAP_FIELDS_BYTES HEAP_PAGE_MOD(0 - (size_t)HEAP_HDR_PAGES * 4)
#define HEAP_FIELDS_ROOM  (HEAP_FIELDS_BYTES & ~(size_t)63)
#define HEAP_PM_END       (HEAP_FIELDS_BYTES + (size_t)LA_HEAP_PAGES * 4)
/* padding after the page map: the index's entry of page HEAP_HDR_PAGES starts a page */
#define HEAP_PAD_SI       HEAP_PAGE_MOD(0 - (size_t)HEAP_HDR_PAGES * 2 - HEAP_PM_END)
#define HEAP_SI_END       (HEAP_PM_END + HEAP_PAD_SI + (size_t)LA_HEAP_PAGES * 2)
/* padding after the index: desc[0] starts a page */
#define HEAP_PAD_DE       HEAP_PAGE_MOD(0 - HEAP_SI_END)

/* Large blocks freed lately whose first pages a heap remembers, and from how many pages
 * (heap.c, best_window) */
#define HEAP_STARTS          16u
#define HEAP_START_MIN_PAGES 65u

struct heap {
	union {
		struct {
			uint64_t magic;
			struct arena *arena; /* owner, fixed at creation */
			struct heap *next;   /* arena's heap list (arena lock) */
			struct heap *prev;
			uint32_t first_page;  /* first data page (after this header) */
			uint32_t used_pages;  /* pages in SMALL and LARGE spans */
			uint32_t free_pages;  /* pages in FREE spans */
			uint32_t dirty_pages; /* FREE pages that may be resident */
			uint32_t grow_rate;   /* trend: decaying rate of span allocations (x256) */
			uint32_t shrink_rate; /* trend: decaying rate of span frees (x256) */
			uint8_t purge_shift; /* throttle back-off: batches are << this (pages the throttle
	                          * returned were soon faulted back in), at most
	                          * HEAP_PURGE_SHIFT_MAX */
			uint8_t purged_recently; /* the throttle purged; cleared by the next growth */
			uint8_t refaulted; /* grew back into pages a free returned, at refault_epoch */
			uint8_t low; /* breathing: used_pages fell to a quarter of peak_used */
			uint32_t refault_epoch;
			uint32_t peak_used; /* breathing: most pages in use since the last breath */
			uint32_t
			        breath_epoch; /* breathing: when it last grew back from low (if breathed) */
			uint64_t bin_mask[2]; /* non-empty bins */
			struct span *bins[HEAP_NBINS];
			struct span *desc_free; /* descriptors given back (linked by next) */
			uint32_t desc_top; /* desc[1, desc_top) were handed out at least once */
			uint32_t
			        hwm; /* page map and index entries [first_page, hwm) may be written */
			uint32_t resident_pages; /* set bits in `resident` */
			uint32_t meta_pages;     /* header pages written (heap_meta_pages) */
			uint32_t
			        spare_pages; /* pages of spans that hold no live block but stay (the
	                           * arena's parked block, empty small spans): with nothing
	                           * else in use the heap is idle (release unmaps it) */
			uint8_t idle;        /* used_pages == spare_pages, as last published */
			uint8_t breathed;    /* breath_epoch is set */
			uint8_t purge_due; /* left nearly empty: the throttle's purge waits for the
	                          * control thread (arena.c); a growth that ends it nearly
	                          * empty cancels it and counts as a refault */
			uint8_t fresh_forks; /* heap_forks when the populate-ahead window began */
			uint8_t moves; /* realloc's page moves from or into it (arena_move_large):
	                      * each may split its mapping (more mappings of the process) */
			uint8_t large; /* a heap of large blocks (heap_make_large; arena.h,
			                * LARGE_HEAP_MAX_PAGES): small spans only where
			                * arena.c's alloc_pages puts them */
			uint8_t reserved3[2];
			uint32_t
			        fresh_pages; /* populate-ahead: pages taken fresh in the current window... */
			uint32_t
			        fresh_prev; /* ... and in the one before (0 if that was not the last) */
			uint32_t huge;      /* bit k: pages [k, k + 1) * HEAP_HUGE_PAGES are advised
	                            * MADV_HUGEPAGE (heap_populate_ahead; purge_span clears).
	                            * Lock; stored atomic: heap_huge_in reads it without
	                            * the lock (arena_move_large, another arena's heap) */
			uint64_t fresh_ns;     /* when the current window began */
			struct la_counters *c; /* the owning arena's published counters */
			struct burst_watch
			        *watch; /* the owning arena's (NULL: none); set at creation */
			uint32_t *
			        arena_dirty; /* the owning arena's sum of dirty_pages over its heaps
	                            * (arena.h, dirty_pages; a heap of its own until the
	                            * arena links it) */
			uint32_t own_dirty;  /* (that sum for a heap no arena linked: tests) */
			uint32_t starts[HEAP_STARTS]; /* first pages of the large blocks of
	                                               * HEAP_START_MIN_PAGES or more freed
	                                               * last (a ring: heap_note_start) */
			uint32_t starts_next;
			uint32_t *arena_used; /* the owning arena's sum of used_pages over its
			                       * heaps (arena.h, used_pages), as arena_dirty */
			uint32_t own_used;
			uint16_t grid_lo; /* a large heap's grid descriptors [grid_lo, grid_hi) */
			uint16_t grid_hi; /* were handed out (span_at_grid; 0, 0: none) */
			uint64_t
			        resident[LA_HEAP_PAGES / 64]; /* page may be resident (see above) */
		};
		char fields_room[HEAP_FIELDS_ROOM]; /* (see HEAP_HDR_PAGES) */
	};
	char pad_pm[HEAP_FIELDS_BYTES - HEAP_FIELDS_ROOM];
	uint32_t pagemap[LA_HEAP_PAGES]; /* see pm_entry */
	char pad_si[HEAP_PAD_SI];
	uint16_t spanidx[LA_HEAP_PAGES]; /* descriptor of the span starting here, as its offset
	                                  * from desc[0] in 16 bytes (SPANIDX_UNIT); 0
	                                  * elsewhere */
	char pad_de[HEAP_PAD_DE];
	struct span desc[LA_HEAP_PAGES]; /* desc[0]: SPAN_NONE, never written */
	/* (a heap of large blocks: the grid's descriptors right after, span_at_grid) */
};
_Static_assert(offsetof(struct heap, resident) + sizeof(((struct heap *)0)->resident) <=
                       HEAP_FIELDS_ROOM,
               "the fields fit before the page map (HEAP_HDR_PAGES: its entries start a page)");
_Static_assert(HEAP_PAGE_MOD(offsetof(struct heap, pagemap) + 4 * HEAP_HDR_PAGES) == 0 &&
                       HEAP_PAGE_MOD(offsetof(struct heap, spanidx) + 2 * HEAP_HDR_PAGES) == 0 &&
                       HEAP_PAGE_MOD(offsetof(struct heap, desc)) == 0,
               "the first data page's entries and desc[0] start pages");
_Static_assert((sizeof(struct heap) + LA_PAGE - 1) / LA_PAGE == HEAP_HDR_PAGES,
               "HEAP_HDR_PAGES is the header's size in pages");
_Static_assert(sizeof(struct span) == 48, "span descriptors pack 85 to a page");
/* A transparent huge page: 2 MiB, 512 pages, at 2 MiB-aligned addresses (a heap's are: it
 * is aligned to its size). The heap's `huge` mask has a bit per such range. */
#define HEAP_HUGE_PAGES 512u
_Static_assert(LA_HEAP_PAGES / HEAP_HUGE_PAGES <= 32, "a bit per huge range in `huge`");
/* spanidx holds a descriptor's offset from desc[0] in units of 16 bytes (index * 3), not
 * its index: the descriptor is then the heap plus a constant plus the entry shifted, with
 * no multiply by 48 (a `lea` fewer at each lookup: the flush's change of span, span_at) */
#define SPANIDX_UNIT 16u
_Static_assert(sizeof(struct span) % SPANIDX_UNIT == 0, "a descriptor is whole units");
_Static_assert((LA_HEAP_PAGES + LA_HEAP_PAGES / HEAP_GRID_PAGES - 1) *
                               (sizeof(struct span) / SPANIDX_UNIT) <=
                       65535,
               "spanidx holds any descriptor's offset, the grid's too");
_Static_assert(offsetof(struct heap, desc) + sizeof(((struct heap *)0)->desc) ==
                               (size_t)HEAP_HDR_PAGES * LA_PAGE &&
                       HEAP_GRID_DESC_PAGES * LA_PAGE >=
                               LA_HEAP_PAGES / HEAP_GRID_PAGES * sizeof(struct span),
               "a large heap's grid descriptors follow the pool, on the pages before its data");

/* pagemap entries: the low 32 bits of the covering span's first byte (page-aligned: bits
 * 12-25 its first page in the heap, bits 26-31 the heap's own address bits, the same in
 * every entry of a heap); on every page of a live small span (and only there) bits 2-7
 * hold its class + 1, so free's fast path reads the class and the span's start in one
 * word. The class sits there so that the entry's low byte is the class + 1 times 4: times
 * 8 (an address scale) the byte offset of the class's bin from the bin before the first (a
 * thread cache's bin is 32 bytes, tcache.h), and the pointer's low 32 bits less the entry
 * with that byte cleared are the offset in the span (the heap's bits cancel), with no
 * shift and no mask of the pointer or of the span's start. */
#define PM_OFF_MASK    0x3fff000u
#define PM_HEAP_MASK   0xfc000000u /* the heap's address bits 26-31 */
#define PM_CLASS_SHIFT 2
#define PM_CLASS_MASK  0xfcu
_Static_assert(LA_HEAP_SIZE - LA_PAGE <= PM_OFF_MASK, "a heap's page offsets fit the entry");
_Static_assert(PM_HEAP_MASK == (uint32_t)~LA_HEAP_MASK, "the heap's bits above the offset");
_Static_assert(LA_NCLASSES < 64, "class + 1 fits in the entry's class field");
_Static_assert((PM_CLASS_MASK & PM_OFF_MASK) == 0 && PM_CLASS_MASK >> PM_CLASS_SHIFT == 63 &&
                       PM_CLASS_MASK <= 0xff,
               "the class field is the entry's low byte, below the page offset");
LA_INLINE uint32_t pm_entry(const struct heap *h, uint32_t first)
{
	return (uint32_t)(uintptr_t)h | first << LA_PAGE_SHIFT;
}
LA_INLINE uint32_t pm_small_entry(const struct heap *h, uint32_t first, unsigned cls)
{
	return pm_entry(h, first) | (uint32_t)(cls + 1) << PM_CLASS_SHIFT;
}
/* The span's first byte less the heap's address (the entry's heap bits cleared) */
LA_INLINE uint32_t pm_off(uint32_t e)
{
	return e & PM_OFF_MASK;
}
LA_INLINE uint32_t pm_head(uint32_t e)
{
	return (e & PM_OFF_MASK) >> LA_PAGE_SHIFT;
}
/* class + 1 of a small span's page, 0 on any other */
LA_INLINE unsigned pm_class1(uint32_t e)
{
	return (e & PM_CLASS_MASK) >> PM_CLASS_SHIFT;
}
LA_INLINE bool pm_small(uint32_t e)
{
	return pm_class1(e) != 0;
}
LA_INLINE unsigned pm_class(uint32_t e)
{
	return pm_class1(e) - 1;
}

/* Every live heap by address: its page map's base (heap_owner_base) with the tag of its
 * owning arena (heap_tag) in the low 16 bits, whose tag is 0 where no heap is (lock-free
 * lookups on free). One load tells free that a pointer lies in one of our heaps, whether
 * the calling thread's arena owns it, and where its page map is: the entry with its low
 * bits cleared, indexed by the pointer's low 32 bits over the page size (one instruction
 * for the base and two for the index, where the heap's address and the pointer's offset in
 * it took five). A slot whose heap went holds HEAP_OWNER_GONE (tag 0). The first slot on
 * each memory page of the table is not 0 once the page was counted as metadata (set once,
 * kept: the page stays resident). The slot of the 64 MiB at a is a >> LA_HEAP_SHIFT
 * (heap_owner_index); slot 0, the first 64 MiB's (NULL's), never holds a heap (a heap is a
 * mapping aligned to its size, and none is at NULL): its tag is 0, so that free's fast
 * path reads a slot for every pointer with no bound test (heap_owner_slot_any). */
#define LA_ADDR_BITS  47
#define LA_HEAP_SLOTS (1ULL << (LA_ADDR_BITS - LA_HEAP_SHIFT))
extern LA_HIDDEN uint64_t heap_owner[LA_HEAP_SLOTS];

/* The owner-table index of the 64 MiB around address a (a below 1 << LA_ADDR_BITS) */
LA_INLINE uintptr_t heap_owner_index(uintptr_t a)
{
	return a >> LA_HEAP_SHIFT;
}
#define HEAP_OWNER_TAG_MASK  0xffffu
#define HEAP_OWNER_ADDR_MASK (~(uint64_t)HEAP_OWNER_TAG_MASK)
#define HEAP_OWNER_GONE      ((uint64_t)1 << 16) /* no heap (tag 0), the page counted */

/* The address part of heap h's owner entry: h less 4 times the page number of its bits
 * 26-31 (PM_HEAP_MASK), so that the page map entry of p, a pointer into h, is at that plus
 * offsetof(pagemap) plus 4 times (uint32_t)p >> LA_PAGE_SHIFT. Its low 16 bits are 0 (the
 * tag's), and h is that rounded up to the heap size (it is less than h by under 4 MiB). */
LA_INLINE uint64_t heap_owner_base(const void *h)
{
	uintptr_t a = (uintptr_t)h;
	return a - ((a & PM_HEAP_MASK) >> (LA_PAGE_SHIFT - 2));
}
_Static_assert((PM_HEAP_MASK >> (LA_PAGE_SHIFT - 2) & HEAP_OWNER_TAG_MASK) == 0 &&
                       (PM_HEAP_MASK >> (LA_PAGE_SHIFT - 2)) < LA_HEAP_SIZE,
               "the base's low 16 bits are the tag's; the heap is the base rounded up");

/* An arena's tag: never 0 (no heap) and never LA_TAG_NONE (a thread without a cache). */
#define LA_TAG_NONE    0xffffu
/* the tag of an arena's heaps of large blocks: its tag with this bit */
#define HEAP_TAG_LARGE 0x4000u
_Static_assert(LA_ARENAS_MAX < HEAP_TAG_LARGE - 1, "an arena's tag has no HEAP_TAG_LARGE bit");
LA_INLINE uint16_t heap_tag(uint32_t arena_index)
{
	return (uint16_t)(arena_index + 1);
}

/* The tag of the arena owning the heap around p: 0 when p is in no heap of ours. */
/* The first slot of the owner table on the memory page of slot's entry (the table starts
 * right after .bss, not on a page boundary: owner.ld) */
LA_INLINE uintptr_t heap_owner_page_first(uintptr_t slot)
{
	uintptr_t base = (uintptr_t)heap_owner;
	uintptr_t page = (uintptr_t)&heap_owner[slot] & ~(uintptr_t)(LA_PAGE - 1);
	return page <= base ? 0 : (page - base) / sizeof(heap_owner[0]);
}

/* Is p in a slot of the owner table other than the first, and then *oe its owner-table
 * entry (the 64 MiB around p)? NULL and the pointers of the first 64 MiB (slot 0, no heap)
 * wrap round above the table and fail the one bound test that also rejects pointers above
 * it, with no more instructions than an index from p itself and its bound test take (a
 * `lea` where a `mov` copied p; the load's displacement 8 bytes on): realloc(NULL, n)
 * leaves on that branch, without a load of the table or a test of its own before it
 * (logicmin: 54k realloc(NULL, n)). */
LA_INLINE bool heap_owner_entry_in(const void *p, uint64_t *oe)
{
	uintptr_t u = ((uintptr_t)p - LA_HEAP_SIZE) >> LA_HEAP_SHIFT;
	if (unlikely(u >= LA_HEAP_SLOTS - 1))
		return false;
#if defined(__x86_64__)
	/* slot u + 1 by the load's displacement: gcc 12 added 1 to u (or 8 to the address)
	 * in an instruction of its own */
	__asm__("movq 8(%1,%2,8), %0"
	        : "=r"(*oe)
	        : "r"(heap_owner), "r"(u), "m"(*(const uint64_t(*)[LA_HEAP_SLOTS])heap_owner));
#else
	*oe = __atomic_load_n(&heap_owner[u + 1], __ATOMIC_RELAXED);
#endif
	return true;
}

/* free's fast path: the owner-table index of p's 64 MiB, p's address bits 26-46 (a shift
 * left and one right, where a bound test took a compare and a branch more): every pointer
 * has a slot. NULL and the first 64 MiB read slot 0 (tag 0: not ours, free_other takes
 * them), a pointer at or past 1 << LA_ADDR_BITS the slot of the same address less its top
 * bits: none that a program can pass is one (the kernel maps user memory below it unless
 * asked for more with an address hint, LA_ADDR_BITS), and such a pointer whose low bits
 * are a live block of ours faults on free's read of its word (non-canonical with 4-level
 * paging) where free_other reported it invalid; any other is reported as before. */
LA_INLINE uintptr_t heap_owner_slot_any(const void *p)
{
	return (uintptr_t)p << (64 - LA_ADDR_BITS) >> (64 - LA_ADDR_BITS + LA_HEAP_SHIFT);
}

/* The address of p's page-map entry, p in a heap of ours, from p's own address bits (0-46,
 * as heap_owner_slot_any takes them) and u, its owner-table index (heap_owner_index or
 * heap_owner_slot_any: free computes it anyway), with no load: free's fast path loads the
 * entry from here, not from the owner entry's base (heap_entry_pagemap), so that the
 * page-map load does not wait for the owner-table load. It is &h->pagemap[page] because a
 * heap h is aligned to its size: p in h gives h = u * LA_HEAP_SIZE and p >> LA_PAGE_SHIFT
 * = h >> LA_PAGE_SHIFT plus p's page in h, so 4 times that is h / 1024 + 4 * page, and h
 * less h / 1024 is u * HEAP_PM_STEP: one multiply, the constant part in the load's
 * displacement. The same address as heap_entry_pagemap's from h's owner entry
 * (tests/unit/sizeclass.c checks both, from the first slot's heap to the last's). */
#define HEAP_PM_STEP (LA_HEAP_SIZE - (LA_HEAP_SIZE >> (LA_PAGE_SHIFT - 2)))
_Static_assert(offsetof(struct heap, pagemap) < 0x80000000u && HEAP_PM_STEP < 0x80000000u,
               "the multiplier is an imm32 and the constant part a load's displacement");
_Static_assert(2 * HEAP_PM_STEP + offsetof(struct heap, pagemap) +
                               4 * ((2 * LA_HEAP_SIZE + 5 * LA_PAGE + 48) >> LA_PAGE_SHIFT) ==
                       2 * LA_HEAP_SIZE + offsetof(struct heap, pagemap) + 4 * 5,
               "slot 2's heap: page 5's entry");
LA_INLINE const uint32_t *heap_pm_entry_at(const void *p, uintptr_t u)
{
	uintptr_t hb;
#if defined(__x86_64__)
	/* one imul: gcc 12 makes the multiply by this constant shl, sub, shl and two movs */
	__asm__("imulq %2, %1, %0" : "=r"(hb) : "r"(u), "i"(HEAP_PM_STEP));
#else
	hb = u * HEAP_PM_STEP;
#endif
	return (const uint32_t *)(hb + offsetof(struct heap, pagemap) +
	                          4 * ((uintptr_t)p << (64 - LA_ADDR_BITS) >>
	                               (64 - LA_ADDR_BITS + LA_PAGE_SHIFT)));
}

/* The owner-table entry of the 64 MiB around p: tag 0 when p is in no heap of ours. */
LA_INLINE uint64_t heap_owner_entry(const void *p)
{
	uint64_t oe;
	return heap_owner_entry_in(p, &oe) ? oe : 0;
}

LA_INLINE uint16_t heap_entry_tag(uint64_t e)
{
	return (uint16_t)(e & HEAP_OWNER_TAG_MASK);
}

/* The heap an entry of a tag other than 0 names. */
LA_INLINE struct heap *heap_entry_heap(uint64_t e)
{
	return (struct heap *)(uintptr_t)(((e & HEAP_OWNER_ADDR_MASK) + LA_HEAP_MASK) &
	                                  ~(uint64_t)LA_HEAP_MASK);
}

/* The page map of the heap an entry of a tag other than 0 names, biased: the entry of p,
 * a pointer into that heap, is at index (uint32_t)p >> LA_PAGE_SHIFT (heap_owner_base). */
LA_INLINE const uint32_t *heap_entry_pagemap(uint64_t e)
{
	return (const uint32_t *)(uintptr_t)((e & HEAP_OWNER_ADDR_MASK) +
	                                     offsetof(struct heap, pagemap));
}

LA_INLINE uint16_t heap_owner_tag(const void *p)
{
	return heap_entry_tag(heap_owner_entry(p));
}

LA_INLINE struct heap *heap_of(const void *p)
{
	return (struct heap *)((uintptr_t)p & ~(uintptr_t)LA_HEAP_MASK);
}

LA_INLINE bool heap_registered(const void *p)
{
	return heap_owner_tag(p) != 0;
}

LA_INLINE uint32_t heap_page_of(const struct heap *h, const void *p)
{
	return (uint32_t)(((uintptr_t)p - (uintptr_t)h) >> LA_PAGE_SHIFT);
}

/* The page-map entry of p's page in h, its heap: the heap is aligned to its size, so p's
 * page index is its own address bits (one instruction fewer than heap_page_of's) */
LA_INLINE uint32_t heap_pm_entry_of(const struct heap *h, const void *p)
{
	return h->pagemap[((uintptr_t)p >> LA_PAGE_SHIFT) & (LA_HEAP_PAGES - 1)];
}

/* Descriptor i of h, the pool's (i < LA_HEAP_PAGES) or a large heap's grid's (span_at_grid):
 * not &h->desc[i], as the grid's lie past the array */
LA_INLINE struct span *heap_desc_at(const struct heap *h, uint32_t i)
{
	return (struct span *)((char *)(uintptr_t)h + offsetof(struct heap, desc)) + i;
}

/* spanidx's entry for descriptor s of h, and back (SPANIDX_UNIT) */
LA_INLINE uint16_t spanidx_of(const struct heap *h, const struct span *s)
{
	return (uint16_t)(((uintptr_t)s - (uintptr_t)heap_desc_at(h, 0)) / SPANIDX_UNIT);
}
LA_INLINE struct span *spanidx_desc(const struct heap *h, uint16_t v)
{
	uintptr_t o = (uintptr_t)v * SPANIDX_UNIT;
	/* o opaque: gcc 12 folded the array's offset into v (an add, the shift, an add where
	 * a shift and one `lea` do) */
	__asm__("" : "+r"(o));
	return (struct span *)((char *)(uintptr_t)h + offsetof(struct heap, desc) + o);
}

/* The descriptor of the span starting at page pg: a SPAN_NONE one (npages 0) if none does. */
LA_INLINE struct span *span_at(struct heap *h, uint32_t pg)
{
	return spanidx_desc(h, h->spanidx[pg]);
}

/* In a heap of large blocks (heap_make_large) a block placed on the large blocks' grid
 * (a page that is a multiple of HEAP_GRID_PAGES: arena.h, LARGE_GRID_PAGES; heap.c,
 * grid_own) has that grid page's own descriptor, desc[HEAP_GRID_DESC + page /
 * HEAP_GRID_PAGES], not one of the pool (spanidx names it as it names any; it stays with
 * the span when freed, until the span merges into its left neighbour): free_in_large_heap
 * finds a large block's descriptor from its address, without the index's load before it
 * (medsizes: the index entry missed the first-level cache on 0.75 of the large frees, the
 * descriptor right after it on 0.92). The grid's descriptors follow the pool's
 * LA_HEAP_PAGES slots (struct heap, desc), which it never leaves (a span per data page at
 * most), on the HEAP_GRID_DESC_PAGES pages a large heap keeps before its data
 * (heap_make_large; spanidx names them past the array). A grid page whose
 * span has none of them (or that heads no span) has a SPAN_NONE descriptor there (never
 * written, or desc_drop's), as span_at's desc[0]. */
LA_INLINE struct span *span_at_grid(struct heap *h, uint32_t pg)
{
	return heap_desc_at(h, HEAP_GRID_DESC + pg / HEAP_GRID_PAGES);
}

LA_INLINE void *span_base(struct heap *h, const struct span *s)
{
	return (char *)h + ((size_t)s->first << LA_PAGE_SHIFT);
}

/* The decay clock: ticks of decay_ms / HEAP_DECAY_TICKS, advanced by the decay pass, in
 * steps of HEAP_TICK. A free span's dirty pages carry the tick they were freed in (merged
 * spans: the oldest), and the pass returns those free for HEAP_DECAY_TICKS whole ticks, at
 * least decay_ms: whatever else the heap does, and never pages freed more recently (they
 * may be reused soon: returning them would only make the program fault them back in). */
#define HEAP_DECAY_TICKS 4u
#define HEAP_TICK        2u
#define HEAP_PERIOD      (HEAP_DECAY_TICKS * HEAP_TICK) /* decay_ms in heap_epoch units */
extern LA_HIDDEN uint32_t heap_epoch;
/* The decay pass may sleep through ticks in which nothing can come of age (control.c).
 * Then heap_epoch is the last pass's tick + 1: odd, so that pages freed during the sleep
 * are told apart (they age as that tick's until the pass mends them), and this is 1 until
 * the first page stamp after it (which wakes the thread) or the pass clears it. */
extern LA_HIDDEN uint32_t heap_skip;

/* The throttle with a decay pass: a heap is nearly empty when it holds this many times more
 * free resident pages than pages in use (arena.c give_back_heap). */
#define NEARLY_EMPTY 16u

struct heap *heap_create(struct arena *a, uint32_t arena_index, struct la_counters *c);
void heap_make_large(struct heap *h, uint32_t arena_index);
/* Move the n pages of the mapping at p into free pages of h that are not resident (the
 * largest free span's first such run, outside huge ranges), as free resident pages: true
 * when they moved (lock held). */
bool heap_adopt(struct heap *h, void *p, uint32_t n);
/* Move the n pages of the mapping at p onto pages [from, from + n) of h, which a block
 * just took and none of which is resident (outside huge ranges), counted resident: true
 * when they moved (lock held). */
bool heap_move_under(struct heap *h, void *p, uint32_t from, uint32_t n);
/* The first run of pages of [first, first + n) that are not resident: its length (0 when
 * all are), its first page in *at. */
uint32_t heap_fresh_run(const struct heap *h, uint32_t first, uint32_t n, uint32_t *at);
/* Whether pages [first, first + n) of h may be in a transparent huge page: a range advised
 * for them (h->huge), or anywhere in THP mode "always". */
bool heap_huge_in(const struct heap *h, uint32_t first, uint32_t n);
void heap_destroy(struct heap *h);
/* Take n pages; returns the span (kind still FREE's caller to set) or NULL. Resident free
 * pages are taken first; dirty_only: only a span with some (NULL if none fits). Else the
 * first fit, smallest bin first, or (room, in a heap holding fewer free resident pages than
 * n) the start of a span of the largest bin: a block that grows takes fresh pages where it
 * can go on growing in place. grid > 1: pages not resident start on a multiple of grid pages
 * from the heap's start where the span chosen has room for that (heap.c, on_grid); grid with
 * HEAP_GRID_ALWAYS: the n pages start on the grid wherever they come from, resident or not,
 * while any of the spans find_fit looks at has room for that (heap.c, fit_on_grid).
 * *dirty_used receives how many of them may have been resident. */
#define HEAP_GRID_ALWAYS 0x80000000u
struct span *heap_alloc_pages(struct heap *h, uint32_t n, uint32_t grid, bool dirty_only, bool room,
                              uint32_t *dirty_used);
/* Take n pages of which at least half are resident: of the first FIT_SCAN free spans that
 * fit, the window covering the most resident pages (heap_alloc_pages' search); the span
 * (its kind the caller's to set), or NULL when that window covers fewer than half of n. A
 * request at or above the mmap threshold comes here before a new mapping, which would
 * fault in all n pages while the heap's freed ones stayed resident. */
struct span *heap_alloc_resident(struct heap *h, uint32_t n);
/* Large block s (in use until now) is about to be freed into h's free pages: its first
 * page, which the program wrote, is remembered as a start for a later block (best_window).
 * Blocks of fewer than HEAP_START_MIN_PAGES pages are not. */
LA_INLINE void heap_note_start(struct heap *h, const struct span *s)
{
	if (s->npages >= HEAP_START_MIN_PAGES)
		h->starts[h->starts_next++ % HEAP_STARTS] = s->first;
}
/* Give a span back; coalesces; returns the resulting free span. Its pages keep their
 * `resident` bits: the caller sets them first for pages the program had (heap_touch). */
struct span *heap_free_pages(struct heap *h, struct span *s);
/* Pages [first, first + n) may be resident from now on (handed out, or carved). */
void heap_touch(struct heap *h, uint32_t first, uint32_t n);
/* Pages [first, first + n) are no data page from now on (the allocator's own metadata). */
void heap_untouch(struct heap *h, uint32_t first, uint32_t n);
/* Set `resident` bits among pages [first, first + n). */
uint32_t heap_resident_in(const struct heap *h, uint32_t first, uint32_t n);
/* Set bits of the k bits of x under mask: ranges of pages are mostly all resident or all
 * not, so those two cases are tested first (la_popcount64 is libgcc's count, 20-30
 * instructions a word, on a CPU without popcnt). */
LA_INLINE uint32_t heap_bits_set(uint64_t x, uint64_t mask, uint32_t k)
{
	x &= mask;
	return x == mask ? k : x ? la_popcount64(x) : 0;
}
/* heap_touch for a few pages (a refill's carving), with no call: none when their bits are
 * set already (a page of small blocks takes two or more carvings), and the update of one
 * word of the bitmap inline (heap_touch's first case: CPython test_dict's carvings met new
 * pages 1,543 times, ~60 instructions a call with its frame, 94k in all). */
LA_INLINE void heap_touch_few(struct heap *h, uint32_t first, uint32_t n)
{
	uint32_t lo = first & 63;
	if (likely(lo + n <= 63)) {
		uint64_t mask = ((1ULL << n) - 1) << lo, *w = &h->resident[first >> 6], old = *w;
		if ((old & mask) == mask)
			return;
		uint32_t added = n - heap_bits_set(old, mask, n); /* pages not resident before */
		h->resident_pages += added;
		STAT_ADD_LOCKED(h->c, data_resident_bytes, (uint64_t)added << LA_PAGE_SHIFT);
		*w = old | mask;
		return;
	}
	heap_touch(h, first, n);
}
/* heap_resident_in inline for a range inside one word of the bitmap, as a rule (a
 * carving's few pages: arena.c pages_new; a grid window of up to 16 pages: heap.c
 * fit_on_grid); another range is heap_resident_in's. */
LA_INLINE uint32_t heap_resident_few(const struct heap *h, uint32_t first, uint32_t n)
{
	uint32_t lo = first & 63;
	if (lo + n > 64)
		return heap_resident_in(h, first, n);
	uint64_t mask = (n == 64 ? ~0ULL : (1ULL << n) - 1) << lo;
	return heap_bits_set(h->resident[first >> 6], mask, n);
}
/* Measure pages [first, first + n) (mincore) and clear the bits of those not resident;
 * returns how many were cleared. The caller adjusts what counts them (FREE: heap_measure
 * does; others: their owner). */
uint32_t heap_measure_range(struct heap *h, uint32_t first, uint32_t n);
/* Measure every FREE span holding dirty pages (the decay pass, a refresh command), but
 * those stamped from gone_by[0] up to before gone_by[1] (not NULL: the decay pass's purge
 * bound and its next tick's, which returns them). One stamped before gone_by[0] is still
 * there because the pass's purge was refused: measured. */
void heap_measure(struct heap *h, const uint32_t *gone_by);
/* The heap's spare pages changed (the caller updated spare_pages): publish whether it is
 * idle. Also called by heap.c when used_pages changes. */
void heap_idle_flip(struct heap *h);
LA_INLINE void heap_idle_update(struct heap *h)
{
	if ((h->used_pages == h->spare_pages) != (bool)h->idle)
		heap_idle_flip(h);
}
/* Split span s (in use, not SMALL) at `lead` pages: s keeps the first lead pages; returns
 * the new span of the rest, of the same kind, with offset 0. Both are mapped (first and
 * last page). */
struct span *heap_split_span(struct heap *h, struct span *s, uint32_t lead);
/* Split the tail of a LARGE span off and free it (in-place shrink). */
void heap_shrink_span(struct heap *h, struct span *s, uint32_t keep_pages);
/* Grow a LARGE span in place by taking the free span right after it; false if not possible
 * (resident_only: nor when some of the pages it would take are not counted resident). */
bool heap_grow_span(struct heap *h, struct span *s, uint32_t want_pages, bool resident_only,
                    uint32_t *dirty_used);
/* Set pagemap entries of a span (every page, with PM_SMALL and the class, when all; else
 * first and last). */
void heap_map_span(struct heap *h, struct span *s, bool all);
/* A small span is given back: clear PM_SMALL from all its pages. */
void heap_unmap_small(struct heap *h, struct span *s);
/* Return dirty free pages to the system until at most keep_pages remain dirty. Returns the
 * pages purged. */
uint32_t heap_purge(struct heap *h, uint32_t keep_pages);
/* Return the dirty pages of free spans stamped before epoch `before` (wrapping compare).
 * Spans stamped `stale` are stamped before + HEAP_PERIOD (the current tick) first (stale =
 * that tick: none; see heap_skip). *oldest is lowered to the stamp of the oldest dirty
 * span left. Returns the pages purged; younger ones stay
 * (dirty_pages). */
uint32_t heap_purge_aged(struct heap *h, uint32_t before, uint32_t stale, uint32_t *oldest);
/* Populate-ahead: large span s (just taken, `dirty` of its pages resident already, their
 * `resident` bits not set yet for the others: the caller calls heap_touch after) is about
 * to be written whole. While the heap takes fresh (not resident) pages fast (at least
 * HEAP_FAST_PAGES, before s, within the last one or two HEAP_FAST_WINDOW_MS windows), the
 * fresh pages of s (when it is at most HEAP_AHEAD_PAGES: a larger block faults in only
 * what the program writes) and up to as many again of the free span after it, at most
 * HEAP_AHEAD_PAGES, are faulted in by one MADV_POPULATE_WRITE instead of a fault per page;
 * the pages populated ahead are counted resident (dirty in their free span) from then on.
 * Where the kernel gives transparent huge pages to advised ranges (os_huge_size: 2 MiB),
 * the range is extended to the end of the huge range its last page falls in, and every
 * whole huge range in it (none of its pages resident, all in s and the free span after
 * it) is advised MADV_HUGEPAGE first: the populate faults it in as one huge page.
 * purge_span advises a huge range back (MADV_NOHUGEPAGE) when any of its pages is
 * purged: a page faulted in there later is one page, not 512, and khugepaged never fills
 * its holes (the `resident` bits stay exact). Huge ranges only while they come in faster
 * than pages: each successful populate's time per page goes into a moving average
 * (heap_huge_cost: of the calls with huge ranges; heap_page_cost: of those without), and
 * while huge pages cost more, they are tried again once every HEAP_HUGE_RETRY_MS (a VM
 * whose host takes freed memory back, free page reporting, refaults a huge page freed a
 * second ago several times slower than 512 pages). Returns the pages populated ahead. */
#define HEAP_FAST_WINDOW_MS 20u
#define HEAP_FAST_PAGES     256u
#define HEAP_AHEAD_PAGES    128u
#define HEAP_HOLES_PAGES    256u
#define HEAP_HUGE_RETRY_MS  1000u
#define HEAP_HUGE_RATE      1024u /* pages the last windows took, at least, for huge ranges */
/* ns per page of populates with huge ranges and without, moving averages (atomics, 0:
 * none yet) */
extern LA_HIDDEN uint32_t heap_huge_cost, heap_page_cost;
/* 0: huge ranges while they cost less (above); 1: always, at any fast growth (above
 * HEAP_FAST_PAGES), -1: never (tests set it) */
extern LA_HIDDEN int heap_huge_policy;
/* Forks this process descends from, modulo 256 (the child's handler adds one): a heap's
 * populate-ahead window begun under another count (h->fresh_forks) is the parent's growth,
 * not this process's, and counts nothing (heap_populate_ahead). */
extern LA_HIDDEN uint8_t heap_forks;
/* May a populate at time now (os_now_ns) use huge ranges? A try after they lost counts:
 * the next one is HEAP_HUGE_RETRY_MS later. */
bool heap_huge_worth(uint64_t now);
/* The caller asks only while the arena holds fewer than HEAP_HOLES_PAGES resident free
 * pages in all its heaps: it grows into new memory, not into its holes (a heap that
 * breathes takes those, and pages populated ahead would add to them). */
uint32_t heap_populate_ahead(struct heap *h, struct span *s, uint32_t dirty);
/* The first page of large span s (just taken, its `resident` bits not set yet), when it is
 * not resident, faulted in by one MADV_POPULATE_WRITE: a block the program writes only at
 * its start, placed on fresh pages, takes no trap (on this project's VM a trap costs ~20 us
 * of CPU, a one-page populate ~4 us: bench medsizes 1000 1000000 65536, 1,895 -> 1,845
 * traps with populate-ahead off for such blocks, 2,489 without this). */
void heap_populate_first(struct heap *h, const struct span *s);
/* Whether heap_populate_ahead may do anything for s, without the clock: s takes fresh
 * pages, or it took pages populated ahead and the heap grew fast enough for huge ranges
 * lately (the refill). */
LA_INLINE bool heap_populate_may(const struct heap *h, const struct span *s, uint32_t dirty)
{
	if (dirty < s->npages)
		return true;
	uint32_t r = s->first + s->npages;
	if (h->fresh_pages + h->fresh_prev < HEAP_HUGE_RATE || r >= LA_HEAP_PAGES)
		return false;
	const struct span *rs = spanidx_desc(h, h->spanidx[r]);
	return rs->kind == SPAN_FREE && rs->dirty < s->npages;
}
/* Burst preparation (burst.h, arena_burst_tick): populate up to max pages of one free
 * span from its first page not resident: first a span with some resident pages (an
 * allocation takes such a span first, and its first pages: its holes are filled), else
 * the largest. They count resident and dirty, and the span is stamped `stamp` (a tick in
 * the future: the decay pass keeps it until then). Returns the pages that came in;
 * *failed is set when the kernel refused (what came in is counted). */
uint32_t heap_prepare(struct heap *h, uint32_t max, uint32_t stamp, bool *failed);
/* Return the dirty pages of free spans stamped `stamp` (prepared pages a burst did not
 * take); returns the pages purged. */
uint32_t heap_purge_stamped(struct heap *h, uint32_t stamp);
/* The throttle: may this heap return pages now? */
bool heap_shrinking(const struct heap *h);
/* The reverse: at least 4 span allocations to 1 free lately (a heap that grows). */
bool heap_growing(const struct heap *h);
/* Breathing: the heap's pages in use fell to a quarter of their peak (of at least
 * HEAP_BREATH_PAGES) and grew back to half of it, within the last `ticks` of the decay
 * clock: a load that comes back, whose pages its next growth would fault in again. */
#define HEAP_BREATH_PAGES 1024u
bool heap_breathing(const struct heap *h, uint32_t ticks);
uint32_t heap_data_pages(void);
/* The throttle's back-off (struct heap, purge_shift): batches up to 2^9 times their base,
 * 64 MiB at the defaults, what glibc's dynamic trim threshold reaches at most (twice its
 * 32 MiB mmap threshold ceiling): nothing lowers it without the decay pass, so a
 * decay-less heap keeps that much free at most. 8 (32 MiB) was less than one round of
 * rptest-like frees (bench/README.md, batchfree35); 12 (512 MiB, as f0675f9 had it) kept
 * as many faults on that row at 2,000 and 4,000 slots. */
#define HEAP_PURGE_SHIFT_MAX 9u

#endif
