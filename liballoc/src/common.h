/* common.h — limits, compiler helpers and the export macro shared by every liballoc module.
 * Reading order of the allocator: common.h, lock.h, os.h, tunables.h, sizeclass.h, heap.h,
 * arena.h, tcache.h, direct.h, shm.h, control.h; malloc.c holds the exported entry points. */
#ifndef LA_COMMON_H
#define LA_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "liballoc_shm.h"

/* Exported symbols. Sanitizer builds compile with LA_PREFIX=la_ so the sanitizer keeps
 * its own malloc and our entry points are la_malloc, la_free, ... */
#define LA_EXPORT __attribute__((visibility("default")))
/* liballoc's own data, declared extern in its headers: -fvisibility=hidden marks a
 * definition, not an extern declaration, and gcc addressed every such variable through the
 * GOT (GOTPCRELX, which ld relaxes to a lea: an instruction more at each read of a scalar).
 * Declared hidden, it is read at its own address. */
#define LA_HIDDEN __attribute__((visibility("hidden")))
#ifdef LA_PREFIX
#define LA_CAT2(a, b) a##b
#define LA_CAT(a, b)  LA_CAT2(a, b)
#define LA_API(name)  LA_CAT(LA_PREFIX, name)
#else
#define LA_API(name) name
#endif

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define LA_INLINE   static inline __attribute__((always_inline))
#define LA_NOINLINE __attribute__((noinline))
#define LA_COLD     __attribute__((cold, noinline))
#define barrier()   __asm__ __volatile__("" ::: "memory")
/* Zero-filled data a process touches little or not at all (the environment snapshot, a
 * forked child's copy of the statistics, the pressure watch's paths): placed after all
 * other zero-filled data (.lbss; the heap-owner table, heap.c, and LA_START_BSS's data
 * before it). What stays in .bss is the small variables every process writes at start;
 * they follow .data on its page, which the loader writes anyway (it clears the part of the
 * page past .data), so while .bss fits there (under ~3.9 KiB) they cost no page fault of
 * their own. Before, among the tables, they took 5 pages (`LD_PRELOAD=build/liballoc.so
 * /bin/true`: 9 faults in liballoc's .bss, now 4: the first arena, the heap's owner entry
 * and the segment's two pages). */
#define LA_BIG_BSS  __attribute__((section(".lbss")))

/* Zero-filled data of which every process touches a page or two at start (the first
 * arena, the control thread's stack top, the first direct-mapping table and the rings beside
 * it, the segment's first page): kept together right after the heap-owner table, in the
 * order of N (liballoc/owner.ld), so that they and the owner table's entries of the heaps
 * (its last 128 KiB) take one page table, with the library on a 2 MiB boundary: the arenas
 * (27 cache lines each, arena.h) end early enough that the segment's first page still falls
 * in those 2 MiB; its last page (the mailbox, touched once the file is named) is in the next.
 * Among the tables they sat 4 MiB apart, behind the 2 MiB copy of a forked child's
 * statistics, and took three; with the arenas after the segment, two. A page table costs
 * ~80-90 us of a process's CPU on this project's VM (bench/README.md, issue 23: the
 * per-process cost; tests/e2e/startup.bats checks the placement). */
#define LA_START_BSS(n) __attribute__((section(".lbss.start." #n)))
/* The earlier of two deadlines, where 0 means none. */
LA_INLINE uint64_t la_earlier(uint64_t due, uint64_t d)
{
	return d && (!due || d < due) ? d : due;
}
/* Functions that read span metadata of another arena without its lock. The fields they
 * read (kind, cls, npages; bump only grows) do not change while a block of the span is
 * live, so a valid pointer always reads them right; for an invalid pointer the reads are
 * best-effort validation. TSan is told not to instrument them. */
#if !defined(LA_NO_STATS)
#define LA_NO_STATS 0
#endif
#define LA_RACY_METADATA __attribute__((no_sanitize_thread))

#define LA_PAGE_SHIFT 12
#define LA_PAGE       ((size_t)1 << LA_PAGE_SHIFT)
#define LA_ALIGN      16 /* every block is at least 16-byte aligned */

/* Heaps: regions reserved at an alignment equal to their size, so the heap of any
 * pointer is found by masking. */
#define LA_HEAP_SHIFT 26
#define LA_HEAP_SIZE  ((size_t)1 << LA_HEAP_SHIFT) /* 64 MiB */
#define LA_HEAP_MASK  (LA_HEAP_SIZE - 1)
#define LA_HEAP_PAGES (LA_HEAP_SIZE >> LA_PAGE_SHIFT)

#define LA_ARENAS_MAX  LA_SHM_ARENAS_MAX /* arena slots; arena_max is at most this */
/* A request larger than this can never come from a heap (must be a direct mapping). */
#define LA_LARGE_MAX   ((size_t)48 << 20)
/* A heap block of a malloc or calloc of at least LA_COLOUR_FROM bytes starts LA_COLOUR
 * bytes into its first page (malloc.c, colour_span). */
#define LA_COLOUR_FROM (((size_t)1 << 20) + 1)
#define LA_COLOUR      256u

#define LA_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LA_MAX(a, b) ((a) > (b) ? (a) : (b))

static inline size_t la_align_up(size_t n, size_t a)
{
	return (n + a - 1) & ~(a - 1);
}

/* Prefetch the line at p for writing: asks for it exclusive, in one transfer where a
 * load followed by a store of a line another core holds modified takes two (the block a
 * thread frees or takes back was written last on the other thread's core). gcc emits
 * __builtin_prefetch(p, 1) as a plain prefetcht0 unless built for a CPU with prefetchw;
 * the opcode (0F 0D /1) is a hint that x86-64 processors without the feature execute as a
 * no-op. */
LA_INLINE void la_prefetch_w(const void *p)
{
#if defined(__x86_64__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1);
#endif
}

/* The set bits of x. The build targets baseline x86-64, where __builtin_popcountll is a
 * call of libgcc's __popcountdi2 (21 instructions, and the call's own); the popcnt
 * instruction where the CPU has it (la_popcnt: la_popcount_boot, at the start, before any
 * heap exists; libgcc's count until then). A whole run of logicmin 60 counts ~610 words
 * (heap_bits_set in the refills' carvings, heap_resident_in), CPython test_dict ~1,800. */
extern LA_HIDDEN bool la_popcnt;
void la_popcount_boot(void);
LA_INLINE uint32_t la_popcount64(uint64_t x)
{
#if defined(__x86_64__) && !defined(__POPCNT__)
	if (likely(__atomic_load_n(&la_popcnt, __ATOMIC_RELAXED))) {
		uint64_t n;
		__asm__("popcnt %1, %0" : "=r"(n) : "rm"(x) : "cc");
		return (uint32_t)n;
	}
#endif
	return (uint32_t)__builtin_popcountll(x);
}

/* Relaxed atomic counter updates: statistics are read by other processes through the
 * segment; each field is individually atomic (see liballoc_shm.h). */
#if defined(LA_NO_STATS) && \
        LA_NO_STATS /* the build that measures what statistics cost (make bench) */
#define STAT_ADD(blk, field, n)        ((void)(blk), (void)(n))
#define STAT_SUB(blk, field, n)        ((void)(blk), (void)(n))
#define STAT_ADD_LOCKED(blk, field, n) ((void)(blk), (void)(n))
#define STAT_SUB_LOCKED(blk, field, n) ((void)(blk), (void)(n))
#else
/* A counter only ever written under one lock (an arena's own counters in arena.c): a
 * plain read and write instead of a locked instruction; readers still see whole values.
 * x86-64: one add to memory (an aligned single store, so readers see whole values), where
 * gcc 12 made the relaxed load and store three instructions and reloaded the block's
 * pointer after each (the refill's five counters, the flush's four). */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define STAT_ADD_LOCKED(blk, field, n) \
	__asm__("add%z0 %1, %0" : "+m"((blk)->field) : "er"((__typeof__((blk)->field))(n)))
#define STAT_SUB_LOCKED(blk, field, n) \
	__asm__("sub%z0 %1, %0" : "+m"((blk)->field) : "er"((__typeof__((blk)->field))(n)))
#else
#define STAT_ADD_LOCKED(blk, field, n)                                                     \
	__atomic_store_n(&(blk)->field,                                                    \
	                 __atomic_load_n(&(blk)->field, __ATOMIC_RELAXED) + (uint64_t)(n), \
	                 __ATOMIC_RELAXED)
#define STAT_SUB_LOCKED(blk, field, n)                                                     \
	__atomic_store_n(&(blk)->field,                                                    \
	                 __atomic_load_n(&(blk)->field, __ATOMIC_RELAXED) - (uint64_t)(n), \
	                 __ATOMIC_RELAXED)
#endif
#define STAT_ADD(blk, field, n) __atomic_fetch_add(&(blk)->field, (uint64_t)(n), __ATOMIC_RELAXED)
#define STAT_SUB(blk, field, n) __atomic_fetch_sub(&(blk)->field, (uint64_t)(n), __ATOMIC_RELAXED)
#endif

/* Report heap corruption or misuse in one line (no allocation) and abort. */
__attribute__((noreturn, cold)) void la_fatal(const char *func, const char *problem);
/* One line on stderr, no allocation: "liballoc: " + the strings up to NULL + "\n". */
void la_warn(const char *first, ...) __attribute__((sentinel));

/* Small formatting helpers that never allocate. */
/* v in base 10 or 16 (lower case) into buf; returns the length; buf >= 21 bytes */
size_t la_fmt_base(char *buf, uint64_t v, unsigned base);
static inline size_t la_fmt_u64(char *buf, uint64_t v)
{
	return la_fmt_base(buf, v, 10);
}
size_t la_strlcpy(char *dst, const char *src, size_t n);
/* The decimal number at s after blanks (what /proc and our file names hold), or -1 when
 * there is none or it overflows. Not strtol: that reads the locale's tables, 64 KiB of
 * libc a program may never touch otherwise. */
long la_parse_long(const char *s);

#endif
