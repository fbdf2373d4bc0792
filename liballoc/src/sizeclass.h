/* sizeclass.h — small size classes: 16-byte steps to 128, four per doubling up to 4 KiB,
 * then eight per doubling up to LA_SMALL_MAX. Between 4 and 8 KiB they are placed by span:
 * the largest multiple of 16 bytes of which k = 15, 14, ..., 8 fit in SC_FIT_PAGES pages
 * (4,368, 4,672, 5,040, 5,456, 5,952, 6,544, 7,280, 8,192), so a span leaves less than 16
 * bytes a block unused and a block of a 4 KiB page plus a header of up to 272 bytes takes
 * 4,368 bytes (sqlite's page cache allocates 4,368: 4,608 with classes at eighths there,
 * 5% more pages for the page cache). Above 8 KiB, eighths (9,216, 10,240, ...): placed by
 * span there, a class's span would be 32 pages, which a run of resident free pages serves
 * less often (the seeded CPython slice faulted 22 more pages).
 * Class c's blocks are sc_size[c] bytes, carved from spans of sc_pages[c] pages (below
 * 4 KiB: at least 8 blocks, at most 1/8 waste). Tables are built once by sc_init.
 * A thread-cache refill carves at most SC_BATCH_BYTES of never-used blocks of a class, or
 * 4 blocks of the classes above SC_BATCH_BYTES / 4 (their first refills: SC_BATCH_BYTES,
 * at least one block); freed blocks it takes in larger batches. Carving writes nothing
 * into the blocks (a cache holds their pointers), so a carved block's page is touched
 * when the block is handed out; a class's blocks ever handed out are at most its peak of
 * live blocks plus one carving, so this bounds what the caches add to the resident size,
 * class by class: in a churn of random sizes each class's peak comes at a different time,
 * and pages a class touched stay with it. */
#ifndef LA_SIZECLASS_H
#define LA_SIZECLASS_H

#include "common.h"

#define LA_SMALL_MAX     16384
#define LA_NCLASSES      44
#define SC_BATCH_BYTES   2048u
#define SC_EIGHTHS_FROM  4096u /* classes above this size: eight per doubling */
#define SC_FIT_PAGES     16u   /* the span the classes up to 8 KiB are placed by */
/* Sizes above SC_EIGHTHS_FROM find their class in sc_upper by buckets of SC_UPPER_STEP
 * bytes, narrower than the gap between two classes there (304 bytes at least): a bucket
 * holds at most one class's end, so one comparison with that class's size finishes. */
#define SC_UPPER_STEP    128u
#define SC_UPPER_BUCKETS ((LA_SMALL_MAX - SC_EIGHTHS_FROM) / SC_UPPER_STEP)

extern uint32_t sc_size[LA_NCLASSES];
extern uint32_t sc_pages[LA_NCLASSES];
extern uint32_t sc_blocks[LA_NCLASSES]; /* blocks per span */
extern uint32_t sc_recip[LA_NCLASSES];  /* ceil(2^32 / size): offset / size by multiply */
/* sc_recip by class + 1, and 0 at 0: indexed by a page-map entry's class field (0 on pages
 * that are not small: a reciprocal of 0 makes no offset divisible) */
extern uint32_t sc_recip_pm[LA_NCLASSES + 1];
extern uint16_t sc_batch[LA_NCLASSES]; /* most never-used blocks one refill carves */
extern uint8_t sc_lookup[65];          /* (n+15)>>4 -> class, for n <= 1024 */
/* (n - SC_EIGHTHS_FROM - 1) / SC_UPPER_STEP -> the class of the bucket's first size */
extern uint8_t sc_upper[SC_UPPER_BUCKETS];

void sc_init(void);

LA_INLINE unsigned sc_class_of(size_t n)
{
	if (likely(n <= 1024))
		return sc_lookup[(n + 15) >> 4];
	if (n <= SC_EIGHTHS_FROM) { /* four classes per doubling up to 4 KiB: 20..27 */
		unsigned lg = 63u - (unsigned)__builtin_clzl(n - 1); /* n-1 in [2^lg, 2^(lg+1)) */
		unsigned quarter = (unsigned)((n - 1) >> (lg - 2)) & 3u;
		return 20u + (lg - 10u) * 4u + quarter;
	}
	/* eight per doubling above: 28..43 */
	unsigned c = sc_upper[(n - SC_EIGHTHS_FROM - 1) / SC_UPPER_STEP];
	return c + (n > sc_size[c]);
}

/* Is off a multiple of the class size? Lemire, Kaser and Kurz: with c = ceil(2^32 / d),
 * d divides n exactly when n * c mod 2^32 < c, for every n < 2^(32 - L) where 2^L >= d:
 * here offsets inside a span (< 2^18) and sizes up to 2^14. One multiply, no division. */
LA_INLINE bool sc_divisible(uint32_t off, unsigned cls)
{
	return off * sc_recip[cls] < sc_recip[cls];
}

/* The same test for a page-map entry's class field c1 (class + 1; 0: never divisible). */
LA_INLINE bool sc_divisible_pm(uint32_t off, unsigned c1)
{
	return off * sc_recip_pm[c1] < sc_recip_pm[c1];
}

/* Index of a block in its span from its byte offset; exact for offsets < 2^20. */
LA_INLINE uint32_t sc_index(uint32_t off, unsigned cls)
{
	return (uint32_t)(((uint64_t)off * sc_recip[cls]) >> 32);
}

#endif
