/* direct.h — direct mappings: requests at or above the mmap threshold get their own
 * mapping, registered in an open-addressing table (so free can tell them from foreign
 * pointers). Freed mappings go to a bounded cache with decay and are reused by later
 * requests of any size (cut down, or grown by mremap); freeing one also raises the dynamic mmap threshold.
 * All state is guarded by direct_lock; system calls are made outside it. The lookups of a
 * live mapping (direct_keeps, direct_usable) read the table without it. */
#ifndef LA_DIRECT_H
#define LA_DIRECT_H

#include "common.h"

/* *fresh (if not NULL) tells whether the memory is a new mapping (known zero). */
void *direct_alloc(size_t size, size_t align, bool *fresh);
/* The same from the mapping cache only: NULL (errno untouched) when no cached mapping fits. */
void *direct_alloc_cached(size_t size, bool *fresh);
/* The same from a new mapping, for a caller that has just looked in the cache; room: for a
 * block realloc grows (address space left free after it: direct.c, room_after). */
void *direct_alloc_mapped(size_t size, size_t align, bool *fresh, bool room);
/* For a block realloc moves to size bytes: a mapping kept for the heaps (a buffer realloc
 * grew, freed below a risen threshold) of 1 to 2 times want = size + size / 4 (in pages),
 * where it is, with no system call: its first want bytes (all of it when the rest is under
 * 16 pages; the rest stays kept, linked, and the block grows into it in place); size's
 * pages count as asked. NULL (errno untouched) when none fits. */
void *direct_alloc_grown(size_t size);
/* Returns 0 when p was a live direct mapping (now freed), 1 if p was freed already and is
 * still in the cache (a double free), -1 if unknown. */
int direct_free(void *p);
/* Usable size of a live direct mapping, 0 if p is not one. */
size_t direct_usable(const void *p);
/* Without a lock: whether p is a live direct mapping that keeps its place for size
 * (0 < size <= PTRDIFF_MAX) with nothing to record (direct_realloc would return p). False
 * when not sure: direct_realloc tells. */
bool direct_keeps(void *p, size_t size);
/* Resize in place or (remap) by mremap; NULL if p is not a direct mapping, on failure, or
 * (!remap) when the mapping does not keep its place for size. */
void *direct_realloc(void *p, size_t size, bool remap, bool *was_direct);
/* Measure (mincore) the cached mappings not measured yet: until then each counts whole as
 * free resident. */
void direct_measure(void);
/* Unmap every cached mapping. */
void direct_trim(void);
/* A heap grew into memory it never used, taking pages [from, from + n) of which fresh were
 * not resident: the mappings kept on trial (freed before any was recycled) are unmapped,
 * those kept for the heaps serve it (direct.c, lend_to). Returns how many of those n
 * pages are now resident pages a kept mapping gave (0 mostly). Cheap when there are none
 * (one load). */
struct heap;
uint32_t direct_heaps_grew(struct heap *h, uint32_t from, uint32_t n, uint32_t fresh);
/* The same for a heap that takes pages below its high-water mark, fresh of them not
 * resident: only a buffer realloc grew, kept where it is (direct_free), serves them. */
uint32_t direct_heaps_refill_slow(struct heap *h, uint32_t from, uint32_t n, uint32_t fresh);
/* bytes of the cached mappings kept for the heaps (atomic; direct_lock's to write) */
extern LA_HIDDEN uint64_t direct_lend_bytes;
LA_INLINE uint32_t direct_heaps_refill(struct heap *h, uint32_t from, uint32_t n, uint32_t fresh)
{
	if (likely(!__atomic_load_n(&direct_lend_bytes, __ATOMIC_RELAXED)))
		return 0;
	return direct_heaps_refill_slow(h, from, n, fresh);
}
/* A block of size bytes (above ADOPT_MAX_PAGES, below the threshold: a heap's) taken from a
 * mapping above ADOPT_MAX_PAGES kept for the heaps a while (direct_free), the shortest at
 * least that long: as it is when at most a quarter longer (no system call), else its start,
 * the rest unmapped. The program writes its next block on the pages it wrote, none moved.
 * NULL when none is kept. */
void *direct_alloc_kept_slow(size_t size);
/* the earliest time the control thread unmaps one of those (0: none kept; atomic) */
extern LA_HIDDEN uint64_t direct_lend_due_ns;
LA_INLINE void *direct_alloc_kept(size_t size)
{
	if (likely(!__atomic_load_n(&direct_lend_due_ns, __ATOMIC_RELAXED)))
		return NULL;
	return direct_alloc_kept_slow(size);
}
/* The control thread's turn at the mappings above ADOPT_MAX_PAGES kept for the heaps
 * (direct_free): unmaps those whose wait ended; returns when the next is due (0: none). */
uint64_t direct_lend_tick(uint64_t now);
/* Unmap cached mappings not reused during the last decay period and measure the others;
 * true while the cache still holds some (a later pass may unmap them). */
bool direct_decay(void);
uint64_t direct_count(void);
/* The table of mappings the lookups without the lock read now (NULL before the first
 * mapping), and its slots: for tests. */
const void *direct_table(size_t *slots);
/* Whether a fork's prepare handler waits for a system call on a direct mapping and its
 * counts to be over (direct.c, the windows): for tests. */
bool direct_fork_waits(void);
/* The fork's handlers: the prepare handler takes direct_lock, then waits for those calls. */
void direct_fork_prepare(void);
void direct_fork_parent(void);
void direct_fork_child(void);

#endif
