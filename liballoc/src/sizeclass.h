/* sizeclass.h — small size classes: 16-byte steps to 128, four per doubling up to 4 KiB
 * with a fifth at 2^k + 2^k/8 for 2^k from SC_FIFTH_FROM to SC_FIFTH_TO (288, 576, 1,152,
 * 2,304: a power of two plus a header of up to an eighth, as redis's 256-byte values
 * take 262 bytes, would lose up to a fifth in the next quarter class: 320 against
 * glibc's 272-byte chunks cost redis ~260 faults and 1.1 MiB), then eight per doubling up
 * to LA_SMALL_MAX. Between 4 and 8 KiB they are placed by span:
 * the largest multiple of 16 bytes of which k = 15, 14, ..., 8 fit in SC_FIT_PAGES pages
 * (4,368, 4,672, 5,040, 5,456, 5,952, 6,544, 7,280, 8,192), so a span leaves less than 16
 * bytes a block unused and a block of a 4 KiB page plus a header of up to 272 bytes takes
 * 4,368 bytes (sqlite's page cache allocates 4,368: 4,608 with classes at eighths there,
 * 5% more pages for the page cache). Above 8 KiB, eighths (9,216, 10,240, ...): placed by
 * span there, a class's span would be 32 pages, which a run of resident free pages serves
 * less often (the seeded CPython slice faulted 22 more pages). Above 16 KiB, quarters
 * (20, 24, 28 and 32 KiB), which round a request up to whole pages as the page runs of a
 * heap did before these classes (sizes of 16 to 32 KiB took a large block: 1,313
 * instructions a malloc+free pair in the bench's sizes sweep, mimalloc 347; with these
 * classes 982). Eighths there would keep each class's free blocks from twice as many
 * other sizes (bench frag 1000000 200000, peak RSS: quarters +1.3 MiB over the page runs,
 * eighths +2.3), and spans of 8 blocks (40 to 64 pages) find fewer runs of resident free
 * pages than spans of 4 (the quick CPython slice: 9,324 faults against 9,177, page runs
 * 9,155).
 * Class c's blocks are sc_size[c] bytes, carved from spans of sc_pages[c] pages (below
 * 4 KiB: at least 8 blocks, at most 1/8 waste). sc_compute builds the tables; the build
 * prints them, and the tables are those constants (sizeclass.c).
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

#define LA_SMALL_MAX      32768
#define LA_NCLASSES       53
#define SC_FIFTH_FROM     256u /* doublings from here to SC_FIFTH_TO: a class at 2^k + 2^k/8 */
#define SC_FIFTH_TO       2048u
#define SC_FIFTHS         4 /* of them */
#define SC_BATCH_BYTES    2048u
#define SC_EIGHTHS_FROM   4096u  /* classes above this size: eight per doubling... */
#define SC_QUARTERS_FROM  16384u /* ... and above this one four, whole pages */
#define SC_QUARTER_BLOCKS 4u     /* blocks of their spans (17 to 32 pages) */
#define SC_HEAD16K        1024u  /* a class at SC_QUARTERS_FROM + this, below the quarters */
#define SC_FIT_PAGES      16u    /* the span the classes up to 8 KiB are placed by */
/* Sizes above SC_UPPER_FROM (sc_small4's end) find their class in sc_upper by buckets of
 * SC_UPPER_STEP bytes, no wider than the gap between two classes there (128 bytes at
 * least): a bucket holds at most one class's end, so one comparison with that class's size
 * finishes. */
#define SC_UPPER_FROM     1024u
#define SC_UPPER_STEP     128u
#define SC_UPPER_BUCKETS  ((LA_SMALL_MAX - SC_UPPER_FROM) / SC_UPPER_STEP)

extern LA_HIDDEN const uint32_t sc_size[LA_NCLASSES];
extern LA_HIDDEN const uint32_t sc_pages[LA_NCLASSES];
extern LA_HIDDEN const uint32_t sc_blocks[LA_NCLASSES]; /* blocks per span */
/* ceil(2^32 / size) by class + 1, and 0 at 0: indexed by a page-map entry's class field
 * (0 on pages that are not small: a reciprocal of 0 makes no offset divisible) */
extern LA_HIDDEN const uint32_t sc_recip_pm[LA_NCLASSES + 1];
/* the same by class: offset / size by multiply (one table: the classes' tables and the
 * rest of .data and .bss share the page the heap-owner table starts on, owner.ld) */
#define sc_recip (sc_recip_pm + 1)
/* the most never-used blocks one refill carves */
extern LA_HIDDEN const uint16_t sc_batch[LA_NCLASSES];
/* The size realloc moves a block of the class to when it grows past it by a few bytes:
 * half as large again, at most SC_GROW_MAX (malloc.c, realloc_small_move; a block that
 * grows by more, an array doubling, moves to n's class). A string appended to 1-16 B a
 * step crossed every class boundary on its way up, a copy each (27 to 2 KiB), and the
 * strings growing together left blocks spread over spans in every class they crossed
 * (bench strbuild, bench/README.md: spread31, strbuild32). */
extern LA_HIDDEN const uint16_t sc_grow[LA_NCLASSES];
#define SC_GROW_MAX 16384u
/* The least size a block of the class keeps its place for when realloc shrinks it (sizes
 * from this one to the class's own keep it): a size of its class or of the four below it,
 * or above LA_SMALL_MAX / 2 (malloc.c, realloc_keeps; a shrink to a class five or more
 * below moves). One load and one comparison on realloc's fast path, where
 * sc_class_of(n) + 4 >= class took a branch on n <= SC_UPPER_FROM that sizes on both sides
 * of it mispredict (bench strbuild, 8 B-2 KiB: callgrind --branch-sim, 117k mispredicts in
 * 455k tests in `strbuild 1000 500000 2000`). */
extern LA_HIDDEN const uint16_t sc_keep[LA_NCLASSES];
#define SC_KEEP_BELOW 4u /* classes below a block's own that keep it */
/* The class of each request size n <= SC_UPPER_FROM, times 4: a constant table (.rodata,
 * shared, written by no process), indexed by n itself, so that malloc's fast path finds its
 * bin with one load and no arithmetic (times 8, a thread cache's bin is 32 bytes: the bin's
 * offset, tcache.h). It restates the class rules below 1 KiB that sc_compute applies:
 * tests/unit/sizeclass.c checks every entry against sc_size. */
extern LA_HIDDEN const uint8_t sc_small4[SC_UPPER_FROM + 1];
/* sc_small4: the class of n <= 1024 (sc_compute's first classes: 16-byte steps to 128, then
 * four per doubling with a fifth at 2^k + 2^k/8 from 256), times 4 */
#define SC_CLS_(n)                               \
	((n) <= 16    ? 0                        \
	 : (n) <= 128 ? ((n) + 15) / 16 - 1      \
	 : (n) <= 256 ? 7 + ((n)-128 + 31) / 32  \
	 : (n) <= 288 ? 12                       \
	 : (n) <= 512 ? 12 + ((n)-256 + 63) / 64 \
	 : (n) <= 576 ? 17                       \
	              : 17 + ((n)-512 + 127) / 128)
#define SC_S1_(n)    (uint8_t)(4 * SC_CLS_(n))
#define SC_S4_(n)    SC_S1_(n), SC_S1_((n) + 1), SC_S1_((n) + 2), SC_S1_((n) + 3)
#define SC_S16_(n)   SC_S4_(n), SC_S4_((n) + 4), SC_S4_((n) + 8), SC_S4_((n) + 12)
#define SC_S64_(n)   SC_S16_(n), SC_S16_((n) + 16), SC_S16_((n) + 32), SC_S16_((n) + 48)
#define SC_S256_(n)  SC_S64_(n), SC_S64_((n) + 64), SC_S64_((n) + 128), SC_S64_((n) + 192)
#define SC_S1024_(n) SC_S256_(n), SC_S256_((n) + 256), SC_S256_((n) + 512), SC_S256_((n) + 768)
/* sc_small4's entries: an initializer (the table), and its first 513 (each thread cache's
 * copy: tcache.h, small4) */
#define SC_SMALL4_INIT                     \
	{                                  \
		SC_S1024_(0), SC_S1_(1024) \
	}
#define SC_SMALL4_512_INIT                              \
	{                                               \
		SC_S256_(0), SC_S256_(256), SC_S1_(512) \
	}
/* (n - SC_UPPER_FROM - 1) / SC_UPPER_STEP -> the class of the bucket's first size */
extern LA_HIDDEN const uint8_t sc_upper[SC_UPPER_BUCKETS];
/* Alignments of small aligned requests, 2 * LA_ALIGN to LA_PAGE (32 B to 4 KiB), and a row
 * of sc_aligned for each: row log2(align) - SC_ALIGN_LG0, entry c the first class from c up
 * whose size is a multiple of align, at row * SC_ALIGN_ROW + c (rows of 64: a shift) */
#define SC_ALIGN_LG0 5u
#define SC_ALIGNS    8u
#define SC_ALIGN_ROW 64u
extern LA_HIDDEN const uint8_t sc_aligned[SC_ALIGNS * SC_ALIGN_ROW];
_Static_assert(LA_NCLASSES <= SC_ALIGN_ROW, "a row of sc_aligned holds every class");

/* The tables as sc_compute builds them (the build's program prints them as constants) */
struct sc_tables {
	uint32_t size[LA_NCLASSES];
	uint32_t pages[LA_NCLASSES];
	uint32_t blocks[LA_NCLASSES];
	uint32_t recip_pm[LA_NCLASSES + 1];
	uint16_t batch[LA_NCLASSES];
	uint16_t grow[LA_NCLASSES];
	uint16_t keep[LA_NCLASSES];
	uint8_t upper[SC_UPPER_BUCKETS];
	uint8_t aligned[SC_ALIGNS * SC_ALIGN_ROW];
};
void sc_compute(struct sc_tables *t);
/* Fill the tables (sc_size ...) from the build's constants, before the first allocation */

LA_INLINE unsigned sc_class_of(size_t n)
{
	if (likely(n <= SC_UPPER_FROM))
		return sc_small4[n] >> 2;
	unsigned c = sc_upper[(n - SC_UPPER_FROM - 1) / SC_UPPER_STEP];
	return c + (n > sc_size[c]);
}

/* The class an aligned request of n bytes (n <= LA_SMALL_MAX; 0 takes 1's) takes: the
 * smallest one that holds n and whose size is a multiple of align (a power of two,
 * LA_ALIGN < align <= LA_PAGE: spans start on a page, so its blocks are aligned); one exists
 * (LA_SMALL_MAX is a multiple of LA_PAGE). Every class that holds n is n's class or above,
 * so it is sc_aligned's entry for n's class in align's row: n's class as malloc finds it,
 * and one load (tzcnt, shift, add). The search it replaces started at the class of n
 * rounded up to align and tested classes with a mask, a loop of up to 8 loads (session 33);
 * before that a 64-bit division a class from n's own (22 % of `sizes aligned 20`). */
LA_INLINE unsigned sc_class_aligned(size_t n, size_t align)
{
	/* (one index: the rows' - SC_ALIGN_LG0 folds into the load's displacement) */
	size_t lg = (unsigned)__builtin_ctzl(align);
	return sc_aligned[lg * SC_ALIGN_ROW + sc_class_of(n) - SC_ALIGN_LG0 * SC_ALIGN_ROW];
}

/* The grid (pages) a span of class cls made of fresh pages starts on, counted from its
 * heap's start (heap.c, on_grid): the block's pages for the classes above SC_QUARTERS_FROM
 * that are whole pages (blocks of 5-8 pages, spans of 4), the span's for the one of 17,408
 * bytes (its blocks start at the same four offsets of every 17 pages), 1 (anywhere) for
 * the others. */
LA_INLINE uint32_t sc_grid(unsigned cls)
{
	if (sc_size[cls] <= SC_QUARTERS_FROM)
		return 1;
	return sc_size[cls] % LA_PAGE ? sc_pages[cls] : sc_size[cls] / (uint32_t)LA_PAGE;
}

/* Is off a multiple of the class size? Lemire, Kaser and Kurz: with c = ceil(2^32 / d),
 * d divides n exactly when n * c mod 2^32 < c, for every n < 2^(32 - L) where 2^L >= d:
 * offsets inside a span (< 2^18) and sizes up to 2^14; above 16 KiB (sizes up to 2^15)
 * spans of at most 2^17 bytes (32 KiB, a power of two, is exact at any offset).
 * tests/unit/sizeclass.c checks every offset of every span. One multiply, no division. */
LA_INLINE bool sc_divides(uint32_t off, uint32_t recip)
{
	return off * recip < recip;
}

/* sc_divides(off, *w) with the multiply and the compare reading *w from memory on x86-64,
 * where gcc 12 loads it into a register first (one instruction fewer: free's room test,
 * malloc's list pop) */
LA_INLINE bool sc_divides_at(uint32_t off, const uint32_t *w)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	bool below;
	__asm__("imull %2, %0\n\tcmpl %2, %0" : "+r"(off), "=@ccb"(below) : "m"(*w));
	return below;
#else
	return sc_divides(off, *w);
#endif
}

LA_INLINE bool sc_divisible(uint32_t off, unsigned cls)
{
	return sc_divides(off, sc_recip[cls]);
}

/* The same test for a page-map entry's class field c1 (class + 1; 0: never divisible). */
LA_INLINE bool sc_divisible_pm(uint32_t off, unsigned c1)
{
	return sc_divides(off, sc_recip_pm[c1]);
}

/* Index of a block in its span from its byte offset: exact at every block start (for
 * k * d, k + k * (c * d - 2^32) / 2^32), which is where span_lookup takes it. */
LA_INLINE uint32_t sc_index(uint32_t off, unsigned cls)
{
	return (uint32_t)(((uint64_t)off * sc_recip[cls]) >> 32);
}

#endif
