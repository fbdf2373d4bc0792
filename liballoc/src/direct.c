/* direct.c — registry, cache and dynamic threshold of direct mappings. The registry is an
 * open-addressing hash table (linear probing, tombstones) in memory mapped here; it grows
 * by doubling, and a table full of tombstones is rehashed at its size. Writers hold
 * direct_lock; realloc's and malloc_usable_size's lookups of a live mapping read it
 * without (peek): a table a rehash replaces is purged but never unmapped (the next rehash
 * into its size takes it again), and a lookup that saw the generation move meanwhile
 * takes the lock. The cache is a small array of freed mappings, evicted oldest first.
 * Accounting (process block): a live mapping counts as allocated and resident whole (the
 * program may write all of it); a freed one that enters the cache stays counted whole, as
 * free resident, until direct_measure finds what the program touched of it (mincore, once,
 * outside the lock: the decay pass, refresh and flush call it, and the control thread a
 * second after a free, op_measure_soon). The table is metadata.
 * A request takes a cached mapping of at most 1.25 x its size or, when both are at or above
 * the dynamic threshold's ceiling, of any size (the smallest large enough, else the
 * largest): a longer one is handed out whole (its part beyond the request purged now and
 * then), a shorter one grown by mremap (with up to a quarter more, no further than the
 * largest request lately). realloc grows a mapping by mremap with a quarter
 * more (untouched address space) and keeps it for a shrink by less than a quarter.
 * Admission: a freed mapping enters the cache only while mappings are being recycled:
 * since a request took a cached mapping, or had to map where a mapping freed lately and
 * not admitted would have served, in this or the last decay period (a trim forgets it).
 * Until then a freed mapping is unmapped at once, and one from the ceiling up to glibc's
 * 32 MiB raises the dynamic threshold past its size like a smaller one, so that heaps
 * serve the next block of its size: a program that frees one big buffer and grows its
 * heaps after neither holds the buffer resident until the decay pass nor faults its next
 * one into a fresh mapping whose pages the heaps cannot reuse. Once mappings are
 * recycled, the threshold comes back down to the ceiling and freed mappings are cached:
 * the recycling program pays one mapping more. From glibc's 32 MiB up (blocks whose size
 * no threshold raise sends to the heaps: the next one is a mapping either way) a freed
 * mapping is kept at once, on trial: it leaves the cache when any heap grows into memory
 * it never used (direct_heaps_grew: the program now builds from heaps, which cannot use
 * its pages) or with the decay pass; a request that takes it starts the recycling.
 * Below glibc's 32 MiB and above ADOPT_MAX_PAGES, a freed mapping whose size the heaps serve
 * now is kept for them only a short while (direct_free, LEND_WAIT_NS_PAGE), for the next
 * block of about its size, which takes it as it is (direct_alloc_kept); the control thread
 * unmaps it after that wait (direct_lend_tick). */
#include "direct.h"

#include "arena.h"
#include "control.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

#include "lock.h"
#include "os.h"
#include "shm.h"
#include "tunables.h"

struct dmap {
	uintptr_t user; /* 0: empty, 1: tombstone */
	void *base;
	size_t len;
	uint32_t uses;  /* reuses for shorter requests since its tail was purged */
	uint32_t asked; /* pages of the largest size realloc asked (0: the whole mapping) */
	uint64_t
	        link; /* the cached rest of its mapping right after it has tail_of this (0: none) */
};

struct dcached {
	void *base;
	size_t len;
	uintptr_t user; /* the pointer it was last handed out as (double-free detection) */
	uint64_t epoch;
	uint64_t id;     /* which entry a measurement made outside the lock was for */
	size_t resident; /* counted resident: len until measured */
	bool measured;
	bool trial;             /* kept before mappings were recycled (see the top) */
	bool lend;              /* on trial for a heap's growth (direct_free, direct_heaps_grew) */
	uint32_t uses;          /* as in struct dmap */
	size_t grow;            /* (cache_take's answer) the length a shorter one grows to */
	bool grown;             /* lend: a buffer realloc grew (direct_alloc_grown may take it) */
	uint64_t link, tail_of; /* as struct dmap's link; the link of what it continues */
	uint64_t due;           /* lend above ADOPT_MAX_PAGES: when the control thread unmaps it */
};

#define DCACHE_SLOTS       64
/* a mapping reused for shorter requests has the part beyond the request purged every
 * this many such reuses (fit_cached) */
#define DCACHE_PURGE_EVERY 16
static struct la_lock direct_lock = LA_LOCK_INIT;
static struct dmap *dtab;
static size_t dcap, dused, dlive; /* slots, non-empty slots (incl. tombstones), live */
static unsigned dshift;           /* dcap is 2^dshift */
/* Lock-free readers (peek): the table as published (its address | log2 of its slots) and
 * the generation, bumped before a table that a reader may hold is rewritten or purged.
 * Tables replaced by a rehash stay mapped (purged), kept for a later rehash into their
 * size: never unmapped while a reader may probe them. */
static uintptr_t dpub;
static uint64_t dgen;
struct dtable {
	struct dmap *t;
	size_t cap;
};
#define DSPARE_MAX 128
LA_START_BSS(3) static struct dtable dspare[DSPARE_MAX];
static unsigned dspare_n;
static unsigned dcached_n;
static uint64_t dcache_bytes, decay_epoch, dcache_ids;
/* decay_epoch + 1 when mappings were last seen recycled (0: not since the start or the
 * last trim), and the last mappings freed but not admitted for want of that sign */
static uint64_t recycled_at;
#define DROPPED_RING 8
static unsigned dropped_next;
/* the largest request at or above the ceiling since the start or the last trim (lock
 * held): a cached mapping grown for a request is grown towards it (fit_cached) */
static size_t dbig;
/* bytes of the cached mappings on trial (atomic: heaps that grow read it without the lock),
 * and whether a heap grew while direct_lock was busy (they go at the next request or free) */
static uint64_t trial_bytes;
static bool trial_stale;
/* bytes of them kept for the heaps (lend; atomic, as trial_bytes) */
uint64_t direct_lend_bytes;
/* what a heap's growth into memory it never used takes of them at a time (lend_to) */
#define LEND_CHUNK     ((size_t)LEND_CHUNK_PAGES << LA_PAGE_SHIFT)
#define LEND_MIN_PAGES 16u
/* the earliest due of the mappings above ADOPT_MAX_PAGES kept for the heaps (0: none; atomic:
 * the control thread looks without the lock, direct_lend_tick) */
uint64_t direct_lend_due_ns;
/* how long such a mapping waits for the heaps' growth or a new mapping, a page: about twice
 * what a fault costs on a shadow-paged guest (~10-16 us, bench/README), so that it is held at
 * most about as long as faulting its pages in again would take the program (a thread that
 * writes its own block of that size meanwhile, before it makes the next: mech_bigblock 2 16) */
#define LEND_WAIT_NS_PAGE 25000u
/* Which cached mappings drop_cache unmaps. */
enum { DROP_ALL, DROP_OLD, DROP_TRIAL, DROP_LEND };
static void drop_cache(int which);

/* A heap grew while the mappings on trial could not be dropped: drop them now. */
static void drop_stale_trial(void)
{
	if (unlikely(__atomic_load_n(&trial_stale, __ATOMIC_RELAXED)))
		drop_cache(DROP_TRIAL);
}
/* the last freed direct mappings that were unmapped, to tell a double free from a wild
 * pointer */
#define DFREED_RING 64
static unsigned dfreed_next;

static struct la_counters *pc(void)
{
	return &shm_process_block()->c;
}

/* Windows. The system calls that make, grow, move or unmap a direct mapping are made outside
 * direct_lock, and their counts (address_space_bytes here; mmap_calls, mmap_bytes,
 * munmap_calls, munmap_bytes in os.c) go with the call, before or after it: a fork of another
 * thread between the two left the child a mapping its address space did not count (or
 * counted one it did not hold), and a call its counters did not count. Each such call and
 * its counts are made in a window, which the thread opens while it holds direct_lock (before
 * it lets the lock go) and closes after the counts, taking neither direct_lock nor the
 * tunables' lock meanwhile (an arena's lock it may: adopt, move under). The fork's prepare
 * handler, once it holds direct_lock (no window opens then), waits until every window is
 * closed (direct_fork_prepare): what the child holds of the direct mappings is what its
 * counts say. dwin: the windows open; dwin_waits: a fork waits for them (the closer wakes
 * it); dwin_self: this thread is in one (a fork from a signal handler that interrupted its
 * window does not wait for it, which would never close). A window that makes, grows or
 * moves a mapping leaves its entry in the table to make once the thread holds direct_lock
 * again: what it leaves is written down (struct dpend) before the window closes, and a
 * fork between that close and the entry has the child make the other threads' entries
 * (direct_fork_child), as they would have: a fork there left the child a mapping counted
 * as address space that no table listed and no other count knew (a cached one grown there
 * had its resident pages in neither data_resident_bytes nor free_resident_bytes). */
static uint32_t dwin, dwin_waits;
static __thread uint32_t dwin_self __attribute__((tls_model("initial-exec")));
/* the prepare handler waited for the other threads' windows (not a signal handler's fork
 * from inside one) */
static bool dfork_waited;

/* Lock held: open a window (see above). */
static void window_open(void)
{
	__atomic_fetch_add(&dwin, 1, __ATOMIC_RELAXED); /* (the fork reads it under the lock) */
	dwin_self++;
}

static void window_close(void)
{
	__atomic_fetch_sub(&dwin, 1, __ATOMIC_SEQ_CST);
	dwin_self--;
	if (unlikely(__atomic_load_n(&dwin_waits, __ATOMIC_SEQ_CST)))
		la_futex(&dwin, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* The entry a window leaves to make (see the windows), on its thread's stack: listed in
 * dpend_list (under direct_lock) from the window's open until the thread holds the lock
 * again and makes it (or finds nothing to make). Its fields are written in the window: a
 * fork, which waits for the windows to close, reads them whole. */
struct dpend {
	struct dpend *next;
	const void *owner; /* its thread's (the address of its dwin_self) */
	void *base;        /* the mapping; NULL: nothing to enter (yet, or the call failed) */
	uintptr_t user;
	size_t len;
	size_t add; /* what it adds to direct_bytes, allocated_bytes, data_resident_bytes */
	uint64_t link;
	uint32_t uses, asked;
	bool listed;
	bool mapping; /* a live mapping more (direct_mappings; not a realloc's) */
	bool hit;     /* a cache hit */
};
static struct dpend *dpend_list;

/* Lock held: open a window that leaves d an entry to make (listed once). */
static __attribute__((noinline)) void window_open_pend(struct dpend *d)
{
	window_open();
	if (!d->listed) {
		d->owner = &dwin_self;
		d->listed = true;
		d->next = dpend_list;
		dpend_list = d;
	}
}

/* Lock held: d out of the list. */
static __attribute__((noinline)) void pend_unlist(struct dpend *d)
{
	if (!d->listed)
		return;
	for (struct dpend **pp = &dpend_list; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	d->listed = false;
}

/* Lock not held: d out of the list, when a window leaves no entry after all. */
static void pend_drop(struct dpend *d)
{
	if (!d->listed)
		return;
	la_lock(&direct_lock);
	pend_unlist(d);
	la_unlock(&direct_lock);
}

/* The counters of the process block that only this file writes, and only under
 * direct_lock: direct_mappings, direct_bytes, direct_cache_bytes, direct_cache_hits, and
 * allocated_bytes, free_resident_bytes, data_resident_bytes (the heaps count theirs in their
 * arenas' blocks). A plain add to memory each (STAT_ADD_LOCKED), not a locked instruction:
 * a cached mapping's reuse and its free made twelve locked adds and subtracts between them,
 * most of the ~70 ns each took beside the lock (bench/README.md, session 23). The address
 * space and system-call counts, which other files write too, stay atomic. */

/* Lock held: the pages of a mapping that leaves the cache (reused or unmapped) are no
 * longer free resident, nor resident data until it is handed out again. */
static void uncache_locked(size_t resident)
{
	STAT_SUB_LOCKED(pc(), free_resident_bytes, resident);
	STAT_SUB_LOCKED(pc(), data_resident_bytes, resident);
}

/* Lock held: a live mapping of len bytes freed (direct_mappings, direct_bytes; the caller
 * counts allocated_bytes and the pages: unmapped, adopted or cached) */
static void count_freed_locked(struct la_counters *sc, size_t len)
{
	STAT_SUB_LOCKED(sc, direct_mappings, 1);
	STAT_SUB_LOCKED(sc, direct_bytes, len);
}

static size_t table_bytes(size_t cap)
{
	return la_align_up(cap * sizeof(struct dmap), LA_PAGE);
}

/* The slot a pointer's probe starts at in a table of 2^shift slots (the product's top
 * bits). */
static size_t hash_ptr(uintptr_t u, unsigned shift)
{
	u >>= LA_PAGE_SHIFT;
	u *= 0x9e3779b97f4a7c15ULL;
	return (size_t)(u >> (64 - shift));
}

static struct dmap *find_slot(uintptr_t user)
{
	if (!dcap)
		return NULL;
	for (size_t i = hash_ptr(user, dshift), n = 0; n < dcap; i = (i + 1) & (dcap - 1), n++) {
		if (dtab[i].user == user)
			return &dtab[i];
		if (dtab[i].user == 0)
			return NULL;
	}
	return NULL;
}

/* Lock held: a field of an entry written (release: a reader that sees the value sees the
 * generation bumped before it, see peek). */
#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)

/* The first table's slots: one page (a process that maps a few blocks directly touches
 * one page of table; the 256 slots it had were 2.5 pages, and its first mappings' slots
 * fell on two or three of them) */
#define DTAB_FIRST 64
_Static_assert(DTAB_FIRST * sizeof(struct dmap) <= LA_PAGE, "the first table is one page");

/* The first table itself: a page of the library's zero-filled memory (.lbss), not a
 * mapping of its own, which took an mmap and one more VMA (made, and torn down at exit)
 * in every process and forked child that maps a block directly (each child of the fork
 * loop maps one). Taken once; retired like the others and kept for reuse, but zeroed
 * slot by slot rather than purged: the rest of its page holds the rings of mappings
 * dropped and freed and the first cached mappings, which a purge of the page would zero
 * (it did once, when the table first grew past 48 mappings). A process that maps a few
 * blocks directly and frees them (cached, or dropped and remembered) writes this one
 * page, where the table and the cache were a page each: a fault fewer in it, and in each
 * forked child that does so (its copy-on-write or zero-fill fault). The slots take 2.5
 * KiB, the rings 640 bytes, the cache's first nine entries the rest; it goes on past the
 * page. */
LA_START_BSS(3) static struct {
	struct dmap t[DTAB_FIRST];
	struct {
		size_t len;
		uint64_t epoch;
	} dropped[DROPPED_RING];
	uintptr_t freed[DFREED_RING];
	struct dcached cache[DCACHE_SLOTS];
} dfirst __attribute__((aligned(LA_PAGE)));
_Static_assert(offsetof(__typeof__(dfirst), cache) + 9 * sizeof(struct dcached) <= LA_PAGE,
               "the rings and the first nine cached mappings share the first table's page");
static bool dtab_first_taken;

/* Lock held: a table of cap slots, all empty: the first table, a retired one of that size
 * (purged or, the first, zeroed: zero) or a new mapping. NULL without memory. */
static struct dmap *table_take(size_t cap)
{
	if (cap == DTAB_FIRST && !dtab_first_taken) {
		dtab_first_taken = true;
		STAT_ADD(pc(), metadata_bytes, table_bytes(cap));
		return dfirst.t;
	}
	for (unsigned i = 0; i < dspare_n; i++)
		if (dspare[i].cap == cap) {
			struct dmap *t = dspare[i].t;
			dspare[i] = dspare[--dspare_n];
			STAT_ADD(pc(), metadata_bytes, table_bytes(cap));
			return t;
		}
	struct dmap *t = os_map(table_bytes(cap), pc());
	if (t) {
		STAT_ADD(pc(), metadata_bytes, table_bytes(cap));
		STAT_ADD(pc(), address_space_bytes, table_bytes(cap));
	}
	return t;
}

/* Lock held: table t, no longer published, is purged and kept mapped (a reader may still
 * probe it: it reads zeros, or entries that peek's generation check rejects), for a later
 * rehash into its size. The tables kept: at most two of each size, each size half the
 * next (the table doubles): less than four times the live table's address space, none
 * of it resident. */
static void table_retire(struct dmap *t, size_t cap)
{
	if (t == dfirst.t) /* (its page is not its own) */
		for (size_t i = 0; i < cap; i++) {
			SET(t[i].user, 0);
			SET(t[i].base, NULL);
			SET(t[i].len, 0);
			SET(t[i].uses, 0);
			SET(t[i].asked, 0);
			SET(t[i].link, 0);
		}
	else
		os_purge(t, table_bytes(cap), pc());
	STAT_SUB(pc(), metadata_bytes, table_bytes(cap));
	if (dspare_n < DSPARE_MAX)
		dspare[dspare_n++] = (struct dtable){t, cap};
}

/* Insert (lock held). Grows the table when 3/4 full; returns false without memory. */
static bool insert(uintptr_t user, void *base, size_t len, uint32_t uses, uint32_t asked,
                   uint64_t link)
{
	if ((dused + 1) * 4 > dcap * 3) {
		size_t ncap = dcap ? dcap * 2 : DTAB_FIRST;
		if (dlive * 4 < dcap) /* mostly tombstones: rehash in place size */
			ncap = dcap ? dcap : DTAB_FIRST;
		struct dmap *nt = table_take(ncap);
		if (!nt)
			return false;
		/* each page written before the probes read it (new or purged, it is zeros): a
		 * read of a page never written maps the zero page, and the store into the slot
		 * found then faults again to replace it (two faults a page; a grown table is
		 * 3/8 full after the rehash, so it has entries on its every page anyway). A
		 * zero into the first slot that starts on the page: what a reader of a retired
		 * table reads there already */
		for (size_t o = 0; o < table_bytes(ncap); o += LA_PAGE) {
			size_t k = (o + sizeof(*nt) - 1) / sizeof(*nt);
			if (k < ncap)
				SET(nt[k].user, 0);
		}
		unsigned shift = (unsigned)__builtin_ctzl(ncap);
		/* readers that probe nt from its earlier life see its rewrite */
		__atomic_store_n(&dgen, dgen + 1, __ATOMIC_RELEASE);
		for (size_t i = 0; i < dcap; i++) {
			if (dtab[i].user <= 1)
				continue;
			size_t j = hash_ptr(dtab[i].user, shift);
			while (nt[j].user)
				j = (j + 1) & (ncap - 1);
			SET(nt[j].base, dtab[i].base);
			SET(nt[j].len, dtab[i].len);
			SET(nt[j].uses, dtab[i].uses);
			SET(nt[j].asked, dtab[i].asked);
			SET(nt[j].link, dtab[i].link);
			SET(nt[j].user, dtab[i].user);
		}
		__atomic_store_n(&dpub, (uintptr_t)nt | shift, __ATOMIC_RELEASE);
		/* readers of the old table, which is purged now, see it retired (a reader that
		 * reads this generation reads nt) */
		__atomic_store_n(&dgen, dgen + 1, __ATOMIC_RELEASE);
		if (dtab)
			table_retire(dtab, dcap);
		dtab = nt;
		dcap = ncap;
		dshift = shift;
		dused = dlive;
	}
	size_t j = hash_ptr(user, dshift);
	while (dtab[j].user > 1)
		j = (j + 1) & (dcap - 1);
	if (dtab[j].user == 0)
		dused++;
	SET(dtab[j].base, base);
	SET(dtab[j].len, len);
	SET(dtab[j].uses, uses);
	SET(dtab[j].asked, asked);
	SET(dtab[j].link, link);
	SET(dtab[j].user, user);
	__atomic_store_n(&dlive, dlive + 1, __ATOMIC_RELAXED);
	return true;
}

/* Without the lock: the entry of user as the table holds it (base, len, asked), true only
 * when it was read whole from one table that nothing rewrote or purged meanwhile (the
 * generation did not move). An entry changes only by its owner's free or realloc (the
 * caller itself, for a live pointer) or by a rehash, so an answer that passes is the one
 * the lock would give. False (not found, a rehash meanwhile) sends the caller to the
 * lock. */
LA_INLINE bool peek(uintptr_t user, struct dmap *e)
{
	uint64_t g = __atomic_load_n(&dgen, __ATOMIC_ACQUIRE);
	uintptr_t w = __atomic_load_n(&dpub, __ATOMIC_ACQUIRE);
	struct dmap *t = (struct dmap *)(w & ~(uintptr_t)63);
	unsigned shift = (unsigned)(w & 63);
	if (unlikely(!t))
		return false;
	size_t mask = ((size_t)1 << shift) - 1;
	/* (at most one round: a table is never more than 3/4 full, but one rewritten while
	 * it is probed might show no empty slot) */
	for (size_t i = hash_ptr(user, shift), n = 0; n <= mask; i = (i + 1) & mask, n++) {
		uintptr_t u = __atomic_load_n(&t[i].user, __ATOMIC_ACQUIRE);
		if (likely(u == user)) {
			e->base = __atomic_load_n(&t[i].base, __ATOMIC_ACQUIRE);
			e->len = __atomic_load_n(&t[i].len, __ATOMIC_ACQUIRE);
			e->asked = __atomic_load_n(&t[i].asked, __ATOMIC_ACQUIRE);
			/* (after the acquire loads above, which nothing later passes) */
			return __atomic_load_n(&dgen, __ATOMIC_RELAXED) == g;
		}
		if (!u)
			return false;
	}
	return false;
}

/* Whether a cached mapping of l bytes may serve a request of len bytes (cache_take). */
static bool serves(size_t l, size_t len)
{
	size_t ceiling = (size_t)TUN(mmap_threshold_max);
	bool large = len >= ceiling && l >= ceiling;
	return large || (l >= len && l - len <= len / 4);
}

/* Mappings the cache may grow (from the ceiling up) start on a page table's 2 MiB boundary
 * and keep the length asked: a growth that has to move one (most do: new mappings sit right
 * below the one made before) moves it to that boundary too, and the kernel then moves a
 * page table's worth of pages with one entry, where it copies every page's entry and
 * allocates tables at the new place when the two ends lie at other offsets in a table's
 * reach (a 20 -> 30 MiB move: 10-20 us, 2.5-4 us so). The kernel places an anonymous
 * mapping (or mremap's new place) on that boundary when its length is whole tables: the
 * mapping is made or moved with its length rounded up to them, and the part beyond the
 * length asked unmapped at once (never written: address space for a moment, no figure
 * counts it). Not where 2 MiB THP is "always" (an aligned mapping's first 2 MiB would be one
 * huge page for a program that writes its first bytes), nor when the rounding is refused; a
 * smaller size's "always" (multi-size THP) fills its folios wherever the mapping starts. */
static size_t table_round(size_t len)
{
	size_t table = (size_t)HEAP_HUGE_PAGES << LA_PAGE_SHIFT;
	if (len < (size_t)TUN(mmap_threshold_max) || len > PTRDIFF_MAX - table)
		return len;
	int saved = errno; /* (its first call reads the kernel's setting from files) */
	bool always = os_thp_pmd_always();
	errno = saved;
	return always ? len : la_align_up(len, table);
}

/* A new mapping of len bytes (table_round): NULL without memory. */
static void *map_on_table(size_t len)
{
	size_t r = table_round(len);
	int saved = errno;
	void *p = os_map(r, pc());
	if (!p && r > len) {
		errno = saved; /* (a malloc that succeeds keeps errno) */
		return os_map(len, pc());
	}
	if (p && r > len)
		os_unmap((char *)p + len, r - len, pc());
	return p;
}

/* Mapping p of old bytes grown to len: in place where the address space after it is free,
 * else moved (table_round); NULL when it cannot grow (it is as it was then). In place
 * first: a mapping that grows into the room its last growth's rounding left (a program whose
 * largest request creeps up grows each mapping again by a few pages) takes one mremap, not
 * one and a munmap of the rounding. */
static void *grow_on_table(void *p, size_t old, size_t len)
{
	size_t r = table_round(len);
	int saved = errno;
	void *q = r > len ? os_remap_in_place(p, old, len, pc()) : NULL;
	if (q)
		return q;
	errno = saved;
	q = os_remap(p, old, r, pc());
	if (!q && r > len) {
		errno = saved;
		return os_remap(p, old, len, pc());
	}
	if (q && r > len)
		os_unmap((char *)q + len, r - len, pc());
	return q;
}

/* Room after the mapping of a block realloc grows. On a shadow-paged guest (PVM) a page
 * an mremap moves costs ~7 us at its next touch, with no fault counted (bench/README), and
 * the kernel places a new mapping right below the one it made before, so that a mapping
 * grown by mremap has to move, all its pages with it, unless the address space after it
 * is free. A mapping made for a growing block (realloc_slow's move of a large block past
 * the threshold) or moved by its growth is made with as much address space again after
 * it, unmapped at once: its next growths (a quarter more each, direct_realloc) find it
 * free and stay in place. The kernel's top-down search takes the highest gap that fits
 * (so the next such mapping, with its own room, does not fit in an older one's room of
 * a like size, and goes below); a later mapping of at most the room's size may take it,
 * and the growth then moves as before. Only below the ceiling (table_round's 2 MiB
 * placement serves the longer ones). */
static size_t room_after(size_t len)
{
	return len < (size_t)TUN(mmap_threshold_max) ? len : 0;
}

/* A new mapping of len bytes with room after it (room_after), or (none below the ceiling)
 * one placed as map_on_table places it: NULL when the room is refused (RLIMIT_AS), and
 * the caller maps the block without it (realloc_slow's malloc of the size asked). */
static void *map_with_room(size_t len)
{
	size_t room = room_after(len);
	if (!room)
		return map_on_table(len);
	char *p = os_map(len + room, pc());
	if (p)
		os_unmap(p + len, room, pc());
	return p;
}

/* Mapping p of old bytes grown to len: in place, else moved where it has room after it
 * (room_after) by one mremap to len and the room, whose tail is unmapped again (the
 * kernel places the whole where it fits, and no other mapping is ever in the range
 * unmapped); NULL when neither (beyond the ceiling, or refused: direct_realloc remaps it
 * without the room). */
static void *grow_with_room(void *p, size_t old, size_t len)
{
	size_t room = room_after(len);
	if (!room)
		return NULL;
	char *q = os_remap_in_place(p, old, len, pc());
	if (q)
		return q;
	q = os_remap(p, old, len + room, pc());
	if (q)
		os_unmap(q + len, room, pc());
	return q;
}

/* Lock held: mappings are being recycled (see the top). */
static bool recycling(void)
{
	return recycled_at && recycled_at >= decay_epoch;
}

/* Lock held: a request of len bytes had to map: one freed lately (not admitted) would
 * have served it, so mappings are being recycled. */
static void note_miss(size_t len)
{
	/* (nothing dropped yet: the ring is zeros, and reading them would map its page) */
	for (unsigned i = 0; i < LA_MIN(dropped_next, DROPPED_RING); i++)
		if (dfirst.dropped[i].len && dfirst.dropped[i].epoch + 1 >= decay_epoch &&
		    serves(dfirst.dropped[i].len, len))
			recycled_at = decay_epoch + 1;
	/* blocks from the ceiling up keep mappings of their own again */
	if (recycling() && TUN(mmap_dynamic) && TUN(mmap_threshold) > TUN(mmap_threshold_max))
		tun_cap_threshold(TUN(mmap_threshold_max));
}

/* Lock held: a mapping of len bytes freed or dropped without a place in the cache, which
 * a later request may show was worth one (note_miss). */
static void remember_dropped(size_t len)
{
	dfirst.dropped[dropped_next % DROPPED_RING].len = len;
	dfirst.dropped[dropped_next++ % DROPPED_RING].epoch = decay_epoch;
}

/* Lock held: entry i leaves the cache (its bytes, its resident pages, and its trial bytes,
 * uncounted); the last entry takes its place. Returns it. */
static struct dcached cache_remove(unsigned i)
{
	struct dcached e = dfirst.cache[i];
	dcache_bytes -= e.len;
	STAT_SUB_LOCKED(pc(), direct_cache_bytes, e.len);
	uncache_locked(e.resident);
	if (e.trial)
		__atomic_store_n(&trial_bytes, trial_bytes - e.len, __ATOMIC_RELAXED);
	if (e.lend)
		__atomic_store_n(&direct_lend_bytes, direct_lend_bytes - e.len, __ATOMIC_RELAXED);
	dfirst.cache[i] = dfirst.cache[--dcached_n];
	return e;
}

/* Lock held: cache_remove for a mapping kept for the heaps that leaves the cache for good
 * (moved into a heap, taken by a new mapping, unmapped): its user address is remembered
 * as freed (a double free of it, later). */
static struct dcached lend_remove(unsigned i)
{
	struct dcached e = cache_remove(i);
	dfirst.freed[dfreed_next++ % DFREED_RING] = e.user;
	return e;
}

/* Take a cached mapping for a request of len bytes (lock held). One of at most 1.25 x len
 * bytes fits as it is. When both are at or above the dynamic threshold's ceiling (blocks
 * that keep mappings of their own), any size serves: the smallest of at least len bytes,
 * else the largest smaller one, which the caller grows (fit_cached): it saves the mmap and
 * the faults on its resident pages. */
static bool cache_take(size_t len, struct dcached *out)
{
	size_t ceiling = (size_t)TUN(mmap_threshold_max);
	if (len >= ceiling && len > dbig)
		dbig = len;
	int above = -1, below = -1;
	for (unsigned i = 0; i < dcached_n; i++) {
		size_t l = dfirst.cache[i].len;
		if (dfirst.cache[i].lend) /* the heaps' (a request here is above its size) */
			continue;
		bool large = len >= ceiling && l >= ceiling;
		if (l >= len && (large || l - len <= len / 4)) {
			if (above < 0 || l < dfirst.cache[above].len)
				above = (int)i;
		} else if (l < len && large && (below < 0 || l > dfirst.cache[below].len)) {
			below = (int)i;
		}
	}
	int best = above >= 0 ? above : below;
	if (best < 0)
		return false;
	*out = cache_remove((unsigned)best);
	recycled_at = decay_epoch + 1;
	/* a shorter one grows by up to a quarter more, towards the largest request lately
	 * (fit_cached): untouched address space, which the next longer request takes without
	 * another mremap (most of those move the mapping: ~14 us, six page faults' worth) */
	out->grow = LA_MAX(len, LA_MIN(dbig, la_align_up(len + len / 4, LA_PAGE)));
	return true;
}

/* Whether a mapping taken from the cache for len bytes is handed out as it is, with no
 * system call (lock held; fit_cached makes the rest ready): at least len bytes long, and
 * not the reuse whose part beyond len is purged (every DCACHE_PURGE_EVERY-th one for a
 * request shorter by more than a quarter, or at once when that part is larger than a heap:
 * *purge). Counts the reuse. */
static bool fits_as_is(struct dcached *m, size_t len, bool *purge)
{
	*purge = false;
	if (m->len < len)
		return false;
	size_t tail = m->len - len;
	if (tail > len / 4 && (++m->uses >= DCACHE_PURGE_EVERY || tail > LA_HEAP_SIZE)) {
		m->uses = 0;
		*purge = true;
	}
	return !*purge;
}

/* Purges [p, p + n) in ranges none of which covers a page table's reach whole (from the
 * second page of one table's 2 MiB to the second of the next: one range a table), so that
 * the kernel frees the pages but keeps the tables (with CONFIG_PT_RECLAIM it frees each
 * table a madvise range covers whole once it is empty, and the next write there faults a
 * table in again): one process_madvise a batch, madvise where it is refused. (Ranges of
 * half a table each, two a table, cost the kernel's look-up of the mapping twice as often:
 * large_random 16 3000's loop 4,074 -> 3,964 us, 8 3000's 3,451 -> 3,313.) */
static void purge_keeping_tables(char *p, size_t n)
{
	size_t table = (size_t)HEAP_HUGE_PAGES << LA_PAGE_SHIFT;
	struct iovec iov[64];
	char *end = p + n;
	while (p < end) {
		uint32_t k = 0;
		char *from = p;
		for (; p < end && k < 64; k++) {
			char *stop =
			        (char *)(la_align_up((uintptr_t)p + 1 - LA_PAGE, table) + LA_PAGE);
			if (stop > end || stop < p)
				stop = end;
			iov[k] = (struct iovec){p, (size_t)(stop - p)};
			p = stop;
		}
		if (os_purge_many(iov, k, pc()) != k)
			os_purge(from, (size_t)(p - from), pc());
	}
}

/* A mapping taken from the cache made ready for len bytes (its accounting already moved
 * out of the cache). A longer one is handed out whole, with no system call: what the
 * earlier users wrote beyond len stays resident, so every DCACHE_PURGE_EVERY-th time it is
 * reused for a request shorter by more than a quarter (or at once when that part is larger
 * than a heap), its pages beyond len are purged (purge: fits_as_is's answer, which counted
 * the reuse). A shorter one is grown by mremap (which may move it) to up to a quarter more
 * than len, as far as the largest request at or above the ceiling since the last trim
 * (cache_take): a program whose requests vary grows each mapping a few times, not at every
 * longer request. NULL when it cannot grow: the mapping is gone then. */
static void *fit_cached(struct dcached *m, size_t len, bool purge)
{
	if (m->len >= len) {
		if (purge)
			purge_keeping_tables((char *)m->base + len, m->len - len);
		return m->base;
	}
	size_t to = LA_MAX(m->grow, len);
	int saved = errno; /* the room refused (os_remap's ENOMEM), a malloc that succeeds */
	void *q = grow_on_table(m->base, m->len, to);
	if (!q && to > len) {
		errno = saved;
		q = grow_on_table(m->base, m->len, to = len);
	}
	if (!q) {
		STAT_SUB(pc(), address_space_bytes, m->len);
		os_unmap(m->base, m->len, pc());
		return NULL;
	}
	STAT_ADD(pc(), address_space_bytes, to - m->len);
	m->len = to;
	return q;
}

/* Lock held: the first k bytes (fewer than its length) of cached entry e leave the cache
 * (their bytes, resident pages and trial bytes uncounted); returns the resident bytes they
 * took with them. */
static size_t cache_cut(struct dcached *e, size_t k)
{
	size_t res = LA_MIN(k, e->resident);
	e->base = (char *)e->base + k;
	e->len -= k;
	e->resident -= res;
	dcache_bytes -= k;
	STAT_SUB_LOCKED(pc(), direct_cache_bytes, k);
	uncache_locked(res);
	if (e->trial)
		__atomic_store_n(&trial_bytes, trial_bytes - k, __ATOMIC_RELAXED);
	if (e->lend)
		__atomic_store_n(&direct_lend_bytes, direct_lend_bytes - k, __ATOMIC_RELAXED);
	return res;
}

/* Lock held: the mapping kept for the heaps that serves a new mapping of len bytes (the
 * largest; one shorter only when its contents need not be zero: a calloc's memset would
 * write the grown part), taken out of the cache into *out. */
static bool lend_take(size_t len, bool zero, struct dcached *out)
{
	int best = -1;
	for (unsigned i = 0; i < dcached_n; i++)
		if (dfirst.cache[i].lend && (!zero || dfirst.cache[i].len >= len) &&
		    (best < 0 || dfirst.cache[i].len > dfirst.cache[best].len))
			best = (int)i;
	if (best < 0)
		return false;
	*out = lend_remove((unsigned)best);
	return true;
}

/* Lock held, released here: cached mapping e, a buffer realloc grew and that is kept where
 * it is (direct_free), serves a heap's growth into pages [from, from + n): its first pages
 * move under the growth's first run of pages that are not resident (heap_move_under), and
 * what is left of it into the heap's free pages that are not resident (heap_adopt), as
 * its free would have moved it whole (the heap's next growths take them, one system call
 * for all). When the heap has no room for them, they stay cached (the next growth or
 * request takes them, the decay pass unmaps them): unmapped, they would be pages the
 * growths fault in anew. The lock is held across the moves, so that what did not move
 * stays in the cache as it was (lend_to's caller holds an arena's lock and took this one
 * without waiting, as the fork handler takes them the other way round). */
static uint32_t lend_grown(struct heap *h, struct dcached *e, uint32_t from, uint32_t n)
{
	uint32_t at, cnt = heap_fresh_run(h, from, n, &at);
	size_t len = e->len, m = LA_MIN(len, (size_t)cnt << LA_PAGE_SHIFT), k = len - m;
	char *p = e->base;
	int saved = errno; /* a move refused (mremap's errno), a malloc that succeeds */
	if (!cnt || !heap_move_under(h, p, at, (uint32_t)(m >> LA_PAGE_SHIFT))) {
		la_unlock(&direct_lock);
		errno = saved;
		return 0;
	}
	size_t res = LA_MIN(len, e->resident);
	bool whole = !k || k < (size_t)LEND_MIN_PAGES << LA_PAGE_SHIFT;
	bool adopted = k && heap_adopt(h, p + m, (uint32_t)(k >> LA_PAGE_SHIFT));
	if (whole || adopted)
		lend_remove((unsigned)(e - dfirst.cache));
	else
		cache_cut(e, m);
	window_open();
	la_unlock(&direct_lock);
	STAT_SUB(pc(), address_space_bytes, whole || adopted ? len : m);
	if (whole && k && !adopted)
		os_unmap(p + m, k, pc());
	window_close();
	if (adopted && res < len)
		op_measure_soon(); /* counted resident whole in the heap until then */
	errno = saved;
	return (uint32_t)(m >> LA_PAGE_SHIFT);
}

/* A heap h grows into memory it never used, fresh pages of it not resident (its arena's
 * lock held): as many bytes of a mapping kept for the heaps (at least LEND_MIN_PAGES, at
 * most LEND_CHUNK) move into it as free resident pages (heap_adopt), which its next
 * growth takes instead of faulting in new ones. A chunk at a time: pages the heaps hold
 * that their growth has not taken are memory the process would not hold without them
 * (the rest stays in the cache, which a new mapping or the decay pass unmaps). The growth
 * took pages [from, from + n): returns how many of them the mapping's pages replaced (a
 * growth of about its size, below). A buffer realloc grew goes as lend_grown says; only
 * those serve a growth below the heap's high-water mark (only_grown). */
static uint32_t lend_to(struct heap *h, uint32_t from, uint32_t n, uint32_t fresh, bool only_grown)
{
	if (!la_trylock(&direct_lock)) /* (the next growth looks again) */
		return 0;
	struct dcached *e = NULL;
	for (unsigned i = 0; i < dcached_n && !e; i++)
		if (dfirst.cache[i].lend &&
		    (dfirst.cache[i].grown || dfirst.cache[i].due || !only_grown))
			e = &dfirst.cache[i];
	if (!e) {
		la_unlock(&direct_lock);
		return 0;
	}
	if (e->grown)
		return lend_grown(h, e, from, n);
	/* one growth that faulted in at least half as many pages as the mapping holds, more
	 * than a chunk: a block of about its size came from the heap (its size is below the
	 * threshold now), and a chunk at a time would serve no growth before the decay pass
	 * unmaps the rest (two threads each making a 4 MiB block again and again, bench
	 * m2-4mib: peak 9.7 -> 13.7 MiB with it kept): all of it goes. When none of the
	 * block's pages was resident, the mapping's pages (as many as the block has) move
	 * under its first pages (heap_move_under), the rest is unmapped: the program writes
	 * its new block on the pages it wrote before, not on pages it faults in while those
	 * are unmapped (m2-4mib: each thread's second block, 1,025 faults). When its first
	 * pages were resident (a small growth just before took a chunk of the mapping, which
	 * the block's run starts on: a printf's buffer between the free and the next block),
	 * they move under the block's first run of pages that are not (heap_fresh_run), as
	 * lend_grown's do; unmapped, that block faulted in all its other pages */
	bool drop = fresh > LEND_CHUNK_PAGES && fresh >= (e->len >> LA_PAGE_SHIFT) / 2;
	/* one above ADOPT_MAX_PAGES kept a while (direct_free): any growth of more than a chunk
	 * ends it (the program writes its next big block on its pages, the rest is unmapped:
	 * kept, it would be resident beside the pages the heap faults in meanwhile) */
	if (e->due && fresh > LEND_CHUNK_PAGES)
		drop = true;
	if (e->due && !drop) {
		/* a smaller growth takes as many of its pages, moved under the growth's first run of
		 * pages that are not resident, in place of the faults; the rest stays kept (a chunk
		 * adopted for the next growth would leave this one's faults beside the kept pages:
		 * freed 20 MiB, then 8 MiB of small blocks, peak +19 %) */
		uint32_t at0, cnt = heap_fresh_run(h, from, n, &at0);
		size_t m = LA_MIN(e->len, (size_t)cnt << LA_PAGE_SHIFT);
		int saved0 = errno; /* a move refused (mremap's errno), a malloc that succeeds */
		bool moved =
		        cnt && heap_move_under(h, e->base, at0, (uint32_t)(m >> LA_PAGE_SHIFT));
		if (moved && m == e->len)
			lend_remove((unsigned)(e - dfirst.cache));
		else if (moved)
			cache_cut(e, m);
		/* (moved under the lock: counted under it too) */
		if (moved)
			STAT_SUB(pc(), address_space_bytes, m);
		la_unlock(&direct_lock);
		errno = saved0;
		return moved ? (uint32_t)(m >> LA_PAGE_SHIFT) : 0;
	}
	uint32_t at = from, run = drop ? heap_fresh_run(h, from, n, &at) : 0;
	bool under = run != 0;
	void *p = e->base;
	size_t want = (size_t)LA_MAX(fresh, LEND_MIN_PAGES) << LA_PAGE_SHIFT;
	size_t k = drop ? e->len : LA_MIN(e->len, LA_MIN(want, LEND_CHUNK));
	size_t res = LA_MIN(k, e->resident);
	if (k == e->len)
		lend_remove((unsigned)(e - dfirst.cache));
	else
		cache_cut(e, k); /* (a mapping kept for the heaps is on trial: trial bytes too) */
	window_open();
	la_unlock(&direct_lock);
	STAT_SUB(pc(), address_space_bytes, k);
	size_t m = LA_MIN(k, (size_t)run << LA_PAGE_SHIFT);
	int saved = errno; /* a move refused (mremap's errno), a malloc that succeeds */
	if (under && heap_move_under(h, p, at, (uint32_t)(m >> LA_PAGE_SHIFT))) {
		if (k > m)
			os_unmap((char *)p + m, k - m, pc());
		window_close();
		return (uint32_t)(m >> LA_PAGE_SHIFT);
	}
	bool adopted = !drop && heap_adopt(h, p, (uint32_t)(k >> LA_PAGE_SHIFT));
	if (!adopted)
		os_unmap(p, k, pc());
	window_close();
	if (adopted && res < k)
		op_measure_soon(); /* counted resident whole in the heap until then */
	errno = saved;
	return 0;
}

/* Where direct_get may take the memory from: the mapping cache, a new mapping, or both. */
enum { DIRECT_CACHE = 1, DIRECT_MAP = 2, DIRECT_ROOM = 4 };

static void *direct_get(size_t size, size_t align, bool *fresh, unsigned from);

void *direct_alloc(size_t size, size_t align, bool *fresh)
{
	return direct_get(size, align, fresh, DIRECT_CACHE | DIRECT_MAP);
}

void *direct_alloc_cached(size_t size, bool *fresh)
{
	return direct_get(size, LA_ALIGN, fresh, DIRECT_CACHE);
}

void *direct_alloc_mapped(size_t size, size_t align, bool *fresh, bool room)
{
	return direct_get(size, align, fresh, DIRECT_MAP | (room ? DIRECT_ROOM : 0));
}

/* Lock held: the entry d leaves made, with its counts (the hit counted either way). False
 * when the table cannot grow: the caller unmaps it. */
static bool pend_enter(const struct dpend *d)
{
	bool ok = insert(d->user, d->base, d->len, d->uses, d->asked, d->link);
	if (d->hit)
		STAT_ADD_LOCKED(pc(), direct_cache_hits, 1);
	if (ok) {
		if (d->mapping)
			STAT_ADD_LOCKED(pc(), direct_mappings, 1);
		STAT_ADD_LOCKED(pc(), direct_bytes, d->add);
		STAT_ADD_LOCKED(pc(), allocated_bytes, d->add);
		STAT_ADD_LOCKED(pc(), data_resident_bytes, d->add);
	}
	return ok;
}

/* Lock held, released here: cached mapping c, out of the cache, registered as a live one
 * that serves as it is (asked: as struct dmap's), counted in use and resident whole and as
 * a cache hit. When the table cannot grow, it is unmapped instead and false returned. */
static bool hit_register(const struct dcached *c, uint32_t asked, struct la_counters *sc)
{
	bool ok = insert((uintptr_t)c->base, c->base, c->len, c->uses, asked, c->link);
	if (ok) {
		STAT_ADD_LOCKED(sc, direct_cache_hits, 1);
		STAT_ADD_LOCKED(sc, direct_mappings, 1);
		STAT_ADD_LOCKED(sc, direct_bytes, c->len);
		STAT_ADD_LOCKED(sc, allocated_bytes, c->len);
		STAT_ADD_LOCKED(sc, data_resident_bytes, c->len);
	}
	if (!ok)
		window_open();
	la_unlock(&direct_lock);
	if (!ok) {
		STAT_SUB(sc, address_space_bytes, c->len);
		os_unmap(c->base, c->len, sc);
		window_close();
	}
	return ok;
}

void *direct_alloc_grown(size_t size)
{
	if (likely(!__atomic_load_n(&direct_lend_bytes, __ATOMIC_RELAXED)) ||
	    size > PTRDIFF_MAX / 4)
		return NULL;
	size_t want = la_align_up(size + size / 4, LA_PAGE);
	la_lock(&direct_lock);
	int best = -1;
	for (unsigned i = 0; i < dcached_n; i++) {
		size_t l = dfirst.cache[i].len;
		if (dfirst.cache[i].grown && l >= want && l / 2 <= want &&
		    (best < 0 || l < dfirst.cache[best].len))
			best = (int)i;
	}
	if (best < 0) {
		la_unlock(&direct_lock);
		return NULL;
	}
	/* its first want bytes; the rest stays kept (the block grows into it in place,
	 * direct_realloc, or the heaps' growth takes it) unless it is shorter than a
	 * heap's growth would take */
	struct dcached c = dfirst.cache[best];
	if (c.len - want >= (size_t)LEND_MIN_PAGES << LA_PAGE_SHIFT) {
		c.len = want;
		cache_cut(&dfirst.cache[best], want);
		/* (a new link: the two are one mapping; a link never names two of them) */
		c.link = dfirst.cache[best].tail_of = ++dcache_ids;
	} else {
		c = cache_remove((unsigned)best);
	}
	int saved = errno; /* (a table that cannot grow: the caller goes on without it) */
	uint32_t asked = (uint32_t)(la_align_up(size, LA_PAGE) >> LA_PAGE_SHIFT);
	if (!hit_register(&c, asked, pc())) {
		errno = saved;
		return NULL;
	}
	return c.base;
}

/* Lock held: the earliest due of the mappings kept for the heaps for a while (0: none). */
static uint64_t lend_next_due(void)
{
	uint64_t due = 0;
	for (unsigned i = 0; i < dcached_n; i++)
		if (dfirst.cache[i].lend && dfirst.cache[i].due)
			due = la_earlier(due, dfirst.cache[i].due);
	return due;
}

void *direct_alloc_kept_slow(size_t size)
{
	if (size > PTRDIFF_MAX / 2)
		return NULL;
	size_t len = la_align_up(size, LA_PAGE);
	la_lock(&direct_lock);
	int best = -1;
	for (unsigned i = 0; i < dcached_n; i++) {
		size_t l = dfirst.cache[i].len;
		if (dfirst.cache[i].lend && dfirst.cache[i].due && l >= len &&
		    (best < 0 || l < dfirst.cache[best].len))
			best = (int)i;
	}
	if (best < 0) {
		la_unlock(&direct_lock);
		return NULL;
	}
	/* (not a sign of recycling: the threshold stays where it is, and so does the wait of
	 * the next free of it) */
	struct dcached c = cache_remove((unsigned)best);
	__atomic_store_n(&direct_lend_due_ns, lend_next_due(), __ATOMIC_RELAXED);
	/* a shorter block takes its start: the rest beyond a quarter more is unmapped now, not
	 * held resident beside the pages the program writes next (a 20 MiB buffer freed, an 8
	 * MiB one made; one with a cached rest right after it is not cut: link) */
	size_t tail = c.len - len > len / 4 && !c.link ? c.len - len : 0;
	c.len -= tail;
	int saved = errno; /* (a table that cannot grow: the caller goes on without it) */
	if (tail)
		window_open(); /* (hit_register lets the lock go) */
	bool ok = hit_register(&c, 0, pc());
	if (tail) {
		STAT_SUB(pc(), address_space_bytes, tail);
		os_unmap((char *)c.base + c.len, tail, pc());
		window_close();
	}
	errno = saved;
	return ok ? c.base : NULL;
}

static void *direct_get(size_t size, size_t align, bool *fresh, unsigned from)
{
	drop_stale_trial();
	size_t extra = align > LA_PAGE ? align - LA_PAGE : 0;
	if (size > PTRDIFF_MAX - extra - LA_PAGE) {
		errno = ENOMEM;
		return NULL;
	}
	size_t len = la_align_up(size + extra, LA_PAGE);
	void *base = NULL;
	size_t got = 0;
	struct dcached c = {0};
	bool hit = false, purge = false;
	bool win = false;        /* a window open (see the windows) */
	struct dpend pend = {0}; /* the entry it leaves to make */
	struct la_counters *sc = pc();
	if (!extra && (from & DIRECT_CACHE)) {
		la_lock(&direct_lock);
		hit = cache_take(len, &c);
		/* one that serves as it is (no purge, no growth: no system call) is registered in
		 * the same hold of the lock, one lock round trip a malloc, not two */
		if (hit && fits_as_is(&c, len, &purge)) {
			if (!hit_register(&c, 0, sc)) {
				errno = ENOMEM;
				return NULL;
			}
			if (fresh)
				*fresh = false;
			return c.base;
		}
		/* the system calls that follow (the one taken purged or grown, or a new mapping
		 * when no mapping kept for the heaps is to be looked at) in a window opened in
		 * this hold of the lock */
		if (hit || ((from & DIRECT_MAP) &&
		            !__atomic_load_n(&direct_lend_bytes, __ATOMIC_RELAXED))) {
			window_open_pend(&pend);
			win = true;
		}
		la_unlock(&direct_lock);
	}
	if (hit) {
		base = fit_cached(&c, len, purge);
		hit = base != NULL;
		got = c.len;
		if (!hit) { /* (gone: the lock is taken again below) */
			window_close();
			win = false;
		}
	}
	/* the program maps anew rather than grow its heaps: a mapping kept for them that their
	 * growth has not taken serves this one, cut or grown to its size (pages the process
	 * held before that free); a calloc takes only one that covers it, and the rest is
	 * unmapped */
	bool lent = false;
	if (!hit && !win && !extra && (from & DIRECT_MAP) &&
	    __atomic_load_n(&direct_lend_bytes, __ATOMIC_RELAXED)) {
		la_lock(&direct_lock);
		lent = lend_take(len, fresh != NULL, &c);
		if (lent) {
			window_open_pend(&pend);
			win = true;
		}
		la_unlock(&direct_lock);
		if (lent) {
			int saved = errno; /* a remap refused, a new mapping that succeeds */
			base = os_remap(c.base, c.len, len, pc());
			if (base) {
				STAT_ADD(pc(), address_space_bytes, len);
				hit = true;
			} else {
				os_unmap(c.base, c.len, pc());
				errno = saved;
			}
			STAT_SUB(pc(), address_space_bytes, c.len);
			got = len;
		} else { /* (a calloc, longer than they are: the rest goes) */
			drop_cache(DROP_LEND);
		}
	}
	if (!hit) {
		if (!(from &
		      DIRECT_MAP)) { /* (no window open: one is opened for a hit or a mapping) */
			pend_drop(&pend);
			return NULL;
		}
		if (!win) {
			la_lock(&direct_lock);
			window_open_pend(&pend);
			win = true;
			la_unlock(&direct_lock);
		}
		base = extra                  ? os_map(len, pc())
		       : (from & DIRECT_ROOM) ? map_with_room(len)
		                              : map_on_table(len);
		if (base) {
			got = len;
			STAT_ADD(pc(), address_space_bytes, got);
		}
	}
	uintptr_t user = 0;
	if (base) { /* the entry to make (grown by mremap, or new: nothing of the cache lies
		     * right after it as its own) */
		user = la_align_up((uintptr_t)base, align > LA_PAGE ? align : LA_PAGE);
		pend.base = base;
		pend.user = user;
		pend.len = pend.add = got;
		pend.uses = hit ? c.uses : 0;
		pend.mapping = true;
		pend.hit = hit;
	}
	if (win)
		window_close();
	if (!base) {
		pend_drop(&pend);
		return NULL;
	}
	if (fresh)
		*fresh = !hit;
	la_lock(&direct_lock);
	if ((!hit || lent) && !extra)
		note_miss(len);
	pend_unlist(&pend);
	bool ok = pend_enter(&pend);
	if (!ok)
		window_open();
	la_unlock(&direct_lock);
	if (!ok) {
		STAT_SUB(pc(), address_space_bytes, got);
		os_unmap(base, got, pc());
		window_close();
		errno = ENOMEM;
		return NULL;
	}
	return (void *)user;
}

/* glibc's ceiling of the dynamic threshold, which applies while mappings are not being
 * recycled (see the top) */
#define BEYOND_MAX ((int64_t)32 << 20)

/* glibc's rule: a freed mapping larger than the threshold (and below the ceiling) raises
 * the threshold past its size and the trim threshold to twice that. Lock held. */
static void raise_threshold(size_t len)
{
	int64_t max = recycling() ? TUN(mmap_threshold_max) : BEYOND_MAX;
	/* the common case (nothing to raise) without the tunables' lock; tun_raise_threshold
	 * checks again under it */
	if (!TUN(mmap_dynamic) || (int64_t)len < TUN(mmap_threshold) || (int64_t)len >= max)
		return;
	if (tun_raise_threshold((int64_t)len, max))
		STAT_ADD(pc(), threshold_raises, 1);
}

/* A cached mapping taken out under the lock, to unmap after it: its address and length
 * only. The whole entries (struct dcached, 96 bytes) made drop_cache's frame 6 KiB: a
 * trim's call went a page or two below what the program's stack used, pages a forked
 * child's main thread (malloc_trim) or control thread (the decay pass) then faulted in,
 * copies of its parent's, ~1 a fork loop's child (perf page-faults on [stack]). */
struct dgone {
	void *base;
	size_t len;
};

static void gone_add(struct dgone *g, struct dcached e)
{
	g->base = e.base;
	g->len = e.len;
}

/* direct_lock held: let it go and unmap the n mappings taken out of the tables (gone), with
 * their address space, in a window (see the windows) */
static void unlock_unmap(const struct dgone *gone, unsigned n)
{
	if (n)
		window_open();
	la_unlock(&direct_lock);
	for (unsigned i = 0; i < n; i++) {
		STAT_SUB(pc(), address_space_bytes, gone[i].len);
		os_unmap(gone[i].base, gone[i].len, pc());
	}
	if (n)
		window_close();
}

int direct_free(void *p)
{
	drop_stale_trial();
	uintptr_t user = (uintptr_t)p;
	struct dgone evict[DCACHE_SLOTS];
	unsigned nevict = 0;
	la_lock(&direct_lock);
	struct dmap *m = find_slot(user);
	if (!m) {
		int was = -1;
		for (unsigned i = 0; i < dcached_n; i++)
			if (dfirst.cache[i].user == user)
				was = 1;
		for (unsigned i = 0; i < DFREED_RING; i++)
			if (dfirst.freed[i] == user)
				was = 1;
		la_unlock(&direct_lock);
		return was;
	}
	void *base = m->base;
	size_t len = m->len;
	uint32_t uses = m->uses;
	bool m_asked = m->asked != 0; /* realloc grew or kept it */
	uint64_t link = m->link;
	size_t asked = m_asked ? LA_MIN((size_t)m->asked << LA_PAGE_SHIFT, len) : len;
	SET(m->user, 1); /* tombstone */
	__atomic_store_n(&dlive, dlive - 1, __ATOMIC_RELAXED);
	struct la_counters *sc = pc();
	count_freed_locked(sc, len);
	bool served = (int64_t)asked < TUN(mmap_threshold); /* before this free raises it */
	/* by the largest size asked: a realloc's slack (address space, written only if the
	 * program grew into it) sends no larger blocks to the heaps than the program made */
	raise_threshold(asked);
	/* below the ceiling of a dynamic threshold, blocks of this size now come from heaps:
	 * keeping the mapping would only hold memory */
	bool recycles = !TUN(mmap_dynamic) || (int64_t)len >= TUN(mmap_threshold_max);
	bool fits = len <= (uint64_t)TUN(direct_cache_bytes);
	bool trial = fits && recycles && !recycling() && (int64_t)len >= BEYOND_MAX;
	bool cached = fits && recycles && (recycling() || trial);
	if (fits && recycles && !cached) /* not admitted: remembered (note_miss) */
		remember_dropped(len);
	/* one whose own free raised the threshold, while the heaps, which serve its size from
	 * now on, hold fewer free pages than it and the others kept for them: kept on trial
	 * for their growth (lend_to; the arena's lock is taken after direct_lock, as the
	 * fork handler takes them) */
	bool lend = !cached && !served && fits && TUN(mmap_dynamic) &&
	            len <= (size_t)ADOPT_MAX_PAGES << LA_PAGE_SHIFT &&
	            arena_short_of(len + direct_lend_bytes);
	/* one above ADOPT_MAX_PAGES, up to glibc's 32 MiB, whose size the heaps serve now (its
	 * own free raised the threshold, or another's did before): kept for them the same way,
	 * but only as long as LEND_WAIT_NS_PAGE says, with the control thread to unmap it then
	 * (direct_lend_tick):
	 * the program that makes its next block of that size at once (a loop of big buffers)
	 * writes it on the pages it wrote before, where that block faulted every page in again
	 * (and the first block faulted them in once), and one that does not holds it a fraction
	 * of a second (0.2 s at 32 MiB), not until the decay pass */
	bool big = len > (size_t)ADOPT_MAX_PAGES << LA_PAGE_SHIFT;
	if (big && !cached && fits && TUN(mmap_dynamic) && (int64_t)len < BEYOND_MAX &&
	    (int64_t)asked < TUN(mmap_threshold) && control_decays() &&
	    arena_short_of(len + direct_lend_bytes))
		lend = true;
	/* one that realloc grew (a buffer built past the threshold), of a size the heaps serve
	 * now: kept for them too, in place, rather than moved into a heap at once. The next
	 * buffer that realloc grows to about its size takes it where it is (direct_alloc_grown),
	 * and the heap's growth takes it only when it needs the pages (lend_to). Pages moved by
	 * mremap cost on their next touch what a fault's page-table fill costs (~7 us a page on
	 * a shadow-paged guest, bench/README: realloc-growth), pages reused in place nothing */
	bool grown = !cached && served && m_asked && fits && TUN(mmap_dynamic) &&
	             len <= (size_t)ADOPT_MAX_PAGES << LA_PAGE_SHIFT;
	if (grown)
		lend = true;
	if (lend)
		trial = cached = true;
	uint64_t until = 0, kick = 0;
	if (lend && big) {
		until = os_now_ns() + (uint64_t)LEND_WAIT_NS_PAGE * (len >> LA_PAGE_SHIFT);
		/* (one due earlier already: the control thread wakes for it, and looks again) */
		if (!direct_lend_due_ns || until < direct_lend_due_ns) {
			kick = until;
			__atomic_store_n(&direct_lend_due_ns, until, __ATOMIC_RELAXED);
		}
	}
	STAT_SUB_LOCKED(sc, allocated_bytes, len);
	if (!cached) {
		dfirst.freed[dfreed_next++ % DFREED_RING] = user;
		STAT_SUB_LOCKED(sc, data_resident_bytes, len);
		window_open();
		la_unlock(&direct_lock);
		STAT_SUB(sc, address_space_bytes, len);
		/* blocks of its size came from the heaps before this free (a larger mapping's
		 * free raised the threshold past it: a program whose blocks grew, realloc-growth's
		 * second round): its pages go to a heap, whose growth takes them instead of
		 * faulting in new pages. One whose own free raises the threshold is unmapped:
		 * nothing says the heaps will grow by its size (adopting those too kept
		 * fragmentation's last freed mapping in a heap, and raised cpython's peak) */
		bool adopted = served && arena_adopt(base, len);
		if (!adopted)
			os_unmap(base, len, sc);
		window_close();
		if (adopted)
			op_measure_soon(); /* counted resident whole in its heap until then */
		return 0;
	}
	/* Cached: entered in the same hold of the lock (one lock round trip a free, not two).
	 * Free resident while it is cached: whole (the program may have written all of it)
	 * until a measurement (direct_measure) says what it touched; measuring here would
	 * cost a mincore pass over every freed mapping, most of which the next request
	 * takes back at once */
	size_t resident = len;
	uint64_t limit = (uint64_t)TUN(direct_cache_bytes);
	while (dcached_n && (dcache_bytes + len > limit || dcached_n == DCACHE_SLOTS)) {
		unsigned old = 0; /* evict the oldest */
		for (unsigned i = 1; i < dcached_n; i++)
			if (dfirst.cache[i].epoch < dfirst.cache[old].epoch)
				old = i;
		gone_add(&evict[nevict++], cache_remove(old));
	}
	dfirst.cache[dcached_n++] = (struct dcached){.base = base,
	                                             .len = len,
	                                             .user = user,
	                                             .epoch = decay_epoch,
	                                             .id = ++dcache_ids,
	                                             .resident = resident,
	                                             .trial = trial,
	                                             .lend = lend,
	                                             .uses = uses,
	                                             .grown = grown,
	                                             .link = link,
	                                             .due = until};
	dcache_bytes += len;
	STAT_ADD_LOCKED(sc, direct_cache_bytes, len);
	/* live -> free resident: its data_resident_bytes (len, counted whole live and cached)
	 * stay as they are */
	STAT_ADD_LOCKED(sc, free_resident_bytes, resident);
	if (trial)
		__atomic_store_n(&trial_bytes, trial_bytes + len, __ATOMIC_RELAXED);
	if (lend)
		__atomic_store_n(&direct_lend_bytes, direct_lend_bytes + len, __ATOMIC_RELAXED);
	unlock_unmap(evict, nevict);
	shm_note_retained();
	if (kick)
		shm_kick_control(kick); /* it sleeps until the next deadline it knows */
	op_measure_soon();              /* counted whole until then */
	return 0;
}

size_t direct_usable(const void *p)
{
	struct dmap e;
	uintptr_t u = (uintptr_t)p;
	if (likely(peek(u, &e) && u - (uintptr_t)e.base < e.len)) /* (a read torn by a purge) */
		return e.len - (u - (uintptr_t)e.base);
	la_lock(&direct_lock);
	struct dmap *m = find_slot((uintptr_t)p);
	size_t n = m ? m->len - ((uintptr_t)p - (uintptr_t)m->base) : 0;
	la_unlock(&direct_lock);
	return n;
}

bool direct_keeps(void *p, size_t size)
{
	/* it has been asked that many pages already, so that nothing is written (a buffer
	 * growing a few bytes a call inside its mapping's slack asks a new page once in
	 * ~100 calls); then its length is at least size's pages (asked never passes it) */
	struct dmap e;
	size_t pages = (size + LA_PAGE - 1) >> LA_PAGE_SHIFT;
	return peek((uintptr_t)p, &e) && e.base == p && pages <= e.asked &&
	       (pages == e.asked || e.len - (pages << LA_PAGE_SHIFT) < LA_PAGE + e.len / 4);
}

void *direct_realloc(void *p, size_t size, bool remap, bool *was_direct)
{
	la_lock(&direct_lock);
	struct dmap *m = find_slot((uintptr_t)p);
	*was_direct = m != NULL;
	if (!m || m->base != p || size > PTRDIFF_MAX - LA_PAGE) {
		la_unlock(&direct_lock);
		return NULL;
	}
	size_t old = m->len, len = la_align_up(size, LA_PAGE);
	uint32_t asked = LA_MAX(m->asked, (uint32_t)LA_MIN(len >> LA_PAGE_SHIFT, UINT32_MAX));
	size_t was = m->asked ? (size_t)m->asked << LA_PAGE_SHIFT : old;
	if (len <= old && (len > was || old - len < LA_PAGE + old / 4)) {
		/* the same pages, a growth into pages it has (one taken whole for a shorter
		 * request: direct_alloc_grown), or a shrink by less than a quarter (the slack
		 * below): nothing to remap or register again */
		SET(m->asked, asked);
		la_unlock(&direct_lock);
		return p;
	}
	/* a growth into a kept mapping right after it (the rest of one direct_alloc_grown
	 * took the start of): that many of its pages join it, where they are */
	if (len > old && __atomic_load_n(&direct_lend_bytes, __ATOMIC_RELAXED)) {
		size_t to = size <= (PTRDIFF_MAX - LA_PAGE) / 5 * 4
		                    ? la_align_up(size + size / 4, LA_PAGE)
		                    : len;
		for (unsigned i = 0; i < dcached_n; i++) {
			struct dcached *e = &dfirst.cache[i];
			/* (the rest of the mapping p was cut from: its link. Mappings that lie
			 * side by side by chance are not joined: a range over two of them is one
			 * that mremap refuses to move or grow) */
			if (!m->link || e->tail_of != m->link || e->base != (char *)p + old ||
			    e->len < len - old)
				continue;
			size_t k = LA_MIN(e->len, to - old);
			if (e->len - k < (size_t)LEND_MIN_PAGES << LA_PAGE_SHIFT)
				k = e->len;
			if (k == e->len) {
				SET(m->link, e->link);
				cache_remove(i);
			} else {
				cache_cut(e, k);
			}
			SET(m->len, old + k);
			SET(m->asked, asked);
			STAT_ADD_LOCKED(pc(), direct_bytes, k);
			STAT_ADD_LOCKED(pc(), allocated_bytes, k);
			STAT_ADD_LOCKED(pc(), data_resident_bytes, k);
			la_unlock(&direct_lock);
			return p;
		}
	}
	if (!remap) {
		la_unlock(&direct_lock);
		return NULL;
	}
	/* a growth maps a quarter more, so that a block growing step by step is remapped a
	 * logarithmic number of times, not at every page; the slack's pages stay untouched
	 * until the program writes them. If that much address space is refused, the size
	 * asked. */
	size_t slack = len;
	if (len > old && size <= (PTRDIFF_MAX - LA_PAGE) / 5 * 4)
		slack = la_align_up(size + size / 4, LA_PAGE);
	else
		asked = 0; /* a shrink that remaps: the mapping is what was asked */
	uint32_t was_asked = m->asked;
	uint64_t was_link = m->link;
	SET(m->user, 1);
	__atomic_store_n(&dlive, dlive - 1, __ATOMIC_RELAXED);
	struct dpend pend = {0}; /* the entry it leaves to make: the mapping, moved or not */
	window_open_pend(&pend);
	la_unlock(&direct_lock);
	/* a growth in place or with room after it, else where the kernel puts it, else (the
	 * quarter more refused) the size asked; errno as it was (when all are refused, the
	 * caller's copy sets it, or succeeds) */
	int saved = errno;
	void *q = len > old ? grow_with_room(p, old, slack) : NULL;
	if (!q)
		q = os_remap(p, old, slack, pc());
	if (q)
		len = slack;
	else if (slack != len)
		q = os_remap(p, old, len, pc());
	if (q && len != old)
		STAT_ADD(pc(), address_space_bytes, len - old);
	pend.base = q ? q : p;
	pend.user = (uintptr_t)pend.base;
	pend.len = q ? len : old;
	pend.add = q ? len - old : 0; /* (a shrink: less) */
	pend.asked = q ? asked : was_asked;
	pend.link = q ? 0 : was_link;
	window_close();
	errno = saved;
	la_lock(&direct_lock);
	pend_unlist(&pend);
	bool ok = pend_enter(&pend);
	la_unlock(&direct_lock);
	if (!ok)
		la_fatal("realloc()", "cannot register a direct mapping");
	return q;
}

static void drop_cache(int which)
{
	struct dgone gone[DCACHE_SLOTS];
	unsigned n = 0;
	bool only_old = which == DROP_OLD;
	if (which == DROP_TRIAL) {
		/* called under an arena's lock (heaps_grew): the fork handler takes direct_lock
		 * before the arenas' locks, so no waiting for it here; when it is busy, the
		 * next request or free of a mapping drops them */
		if (!la_trylock(&direct_lock)) {
			__atomic_store_n(&trial_stale, true, __ATOMIC_RELAXED);
			return;
		}
		__atomic_store_n(&trial_stale, false, __ATOMIC_RELAXED);
	} else {
		la_lock(&direct_lock);
	}
	for (unsigned i = 0; i < dcached_n;) {
		if ((only_old && dfirst.cache[i].epoch == decay_epoch) ||
		    (which == DROP_TRIAL && (!dfirst.cache[i].trial || dfirst.cache[i].lend)) ||
		    (which == DROP_LEND && !dfirst.cache[i].lend)) {
			i++;
			continue;
		}
		if (dfirst.cache[i].trial &&
		    !dfirst.cache[i].lend)                     /* remembered as one not admitted */
			remember_dropped(dfirst.cache[i].len); /* (note_miss) */
		gone_add(&gone[n++], cache_remove(i));
	}
	if (which != DROP_TRIAL && which != DROP_LEND) {
		decay_epoch++;
		if (!only_old) { /* trimmed: start over */
			recycled_at = 0;
			dbig = 0;
			memset(dfirst.dropped, 0, sizeof(dfirst.dropped));
		}
	}
	unlock_unmap(gone, n);
}

void direct_measure(void)
{
	for (;;) {
		la_lock(&direct_lock);
		unsigned i = 0;
		while (i < dcached_n && dfirst.cache[i].measured)
			i++;
		if (i == dcached_n) {
			la_unlock(&direct_lock);
			return;
		}
		struct dcached m = dfirst.cache[i];
		dfirst.cache[i].measured =
		        true; /* taken or not, the next round looks at the others */
		la_unlock(&direct_lock);
		/* the mapping may be taken (even unmapped) meanwhile: mincore on it is harmless,
		 * and the figure is applied only to the entry it was made for */
		size_t res = os_resident(m.base, m.len);
		la_lock(&direct_lock);
		for (unsigned j = 0; j < dcached_n; j++)
			if (dfirst.cache[j].id == m.id && dfirst.cache[j].resident > res) {
				uncache_locked(dfirst.cache[j].resident - res);
				dfirst.cache[j].resident = res;
			}
		la_unlock(&direct_lock);
	}
}

void direct_trim(void)
{
	drop_cache(DROP_ALL);
}

uint32_t direct_heaps_grew(struct heap *h, uint32_t from, uint32_t n, uint32_t fresh)
{
	uint64_t trial = __atomic_load_n(&trial_bytes, __ATOMIC_RELAXED);
	if (likely(!trial))
		return 0;
	uint64_t lend = __atomic_load_n(&direct_lend_bytes, __ATOMIC_RELAXED);
	uint32_t moved = lend && fresh ? lend_to(h, from, n, fresh, false) : 0;
	if (trial > lend)
		drop_cache(DROP_TRIAL);
	return moved;
}

uint32_t direct_heaps_refill_slow(struct heap *h, uint32_t from, uint32_t n, uint32_t fresh)
{
	return lend_to(h, from, n, fresh, true);
}

uint64_t direct_lend_tick(uint64_t now)
{
	uint64_t due = __atomic_load_n(&direct_lend_due_ns, __ATOMIC_RELAXED);
	if (!due || now < due)
		return due;
	struct dgone gone[DCACHE_SLOTS];
	unsigned n = 0;
	la_lock(&direct_lock);
	for (unsigned i = 0; i < dcached_n;) {
		if (!dfirst.cache[i].lend || !dfirst.cache[i].due || dfirst.cache[i].due > now)
			i++;
		else
			gone_add(&gone[n++], lend_remove(i));
	}
	due = lend_next_due();
	__atomic_store_n(&direct_lend_due_ns, due, __ATOMIC_RELAXED);
	unlock_unmap(gone, n);
	return due;
}

bool direct_decay(void)
{
	drop_cache(DROP_OLD);
	direct_measure(); /* what stays: the resident pages it holds */
	la_lock(&direct_lock);
	bool left = dcached_n != 0;
	la_unlock(&direct_lock);
	return left;
}

uint64_t direct_count(void)
{
	return __atomic_load_n(&dlive, __ATOMIC_RELAXED); /* written under direct_lock */
}

const void *direct_table(size_t *slots)
{
	uintptr_t w = __atomic_load_n(&dpub, __ATOMIC_ACQUIRE);
	*slots = w ? (size_t)1 << (w & 63) : 0;
	return (const void *)(w & ~(uintptr_t)63);
}

bool direct_fork_waits(void)
{
	return __atomic_load_n(&dwin_waits, __ATOMIC_ACQUIRE) != 0;
}

void direct_fork_prepare(void)
{
	la_lock(&direct_lock);
	dfork_waited = !dwin_self;
	if (dwin_self) /* (a signal handler's fork: see the windows) */
		return;
	__atomic_store_n(&dwin_waits, 1, __ATOMIC_SEQ_CST);
	for (uint32_t v; (v = __atomic_load_n(&dwin, __ATOMIC_SEQ_CST)) != 0;)
		la_futex(&dwin, FUTEX_WAIT_PRIVATE, v, NULL);
	__atomic_store_n(&dwin_waits, 0, __ATOMIC_RELAXED);
}

void direct_fork_parent(void)
{
	la_unlock(&direct_lock);
}

void direct_fork_child(void)
{
	la_lock_reinit(&direct_lock);
	dwin = dwin_self; /* (the other threads' windows are not the child's) */
	dwin_waits = 0;
	/* the entries the other threads' windows left to make (see the windows): made here, as
	 * those threads would have made them (or, when the table cannot grow, unmapped as they
	 * would have); a signal handler's fork from inside its own window did not wait for the
	 * others' windows (what they left may be half written): their mappings stay as they
	 * are, counted as address space only. This thread's own stays: it makes it. */
	for (struct dpend **pp = &dpend_list; *pp;) {
		struct dpend *d = *pp;
		if (d->owner == &dwin_self) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		if (dfork_waited && d->base && !pend_enter(d)) {
			STAT_SUB(pc(), address_space_bytes, d->len);
			os_unmap(d->base, d->len, pc());
		}
	}
}
