/* direct.c — registry, cache and dynamic threshold of direct mappings. The registry is an
 * open-addressing hash table (linear probing, tombstones) in memory mapped here; it grows
 * by doubling. The cache is a small array of freed mappings, evicted oldest first.
 * Accounting (process block): a live mapping counts as allocated and resident whole (the
 * program may write all of it); a freed one that enters the cache is measured then
 * (mincore, once, outside the lock): its resident bytes are free resident until it is
 * reused or unmapped. The table is metadata. */
#include "direct.h"

#include <errno.h>
#include <string.h>

#include "lock.h"
#include "os.h"
#include "shm.h"
#include "tunables.h"

struct dmap {
	uintptr_t user; /* 0: empty, 1: tombstone */
	void *base;
	size_t len;
};

struct dcached {
	void *base;
	size_t len;
	uintptr_t user; /* the pointer it was last handed out as (double-free detection) */
	uint64_t epoch;
	size_t resident; /* measured when it entered the cache */
};

#define DCACHE_SLOTS 64
static struct la_lock direct_lock = LA_LOCK_INIT;
static struct dmap *dtab;
static size_t dcap, dused, dlive; /* slots, non-empty slots (incl. tombstones), live */
static struct dcached dcache[DCACHE_SLOTS];
static unsigned dcached_n;
static uint64_t dcache_bytes, decay_epoch;
/* the last freed direct mappings that were unmapped, to tell a double free from a wild
 * pointer */
#define DFREED_RING 64
static uintptr_t dfreed[DFREED_RING];
static unsigned dfreed_next;

static struct la_counters *pc(void)
{
	return &shm_process_block()->c;
}

/* Bytes of a mapping that leave the cache (reused or unmapped): no longer free resident. */
static void uncache(size_t len, size_t resident, bool unmapped)
{
	STAT_SUB(pc(), direct_cache_bytes, len);
	STAT_SUB(pc(), free_resident_bytes, resident);
	STAT_SUB(pc(), data_resident_bytes, resident);
	if (unmapped)
		STAT_SUB(pc(), address_space_bytes, len);
}

static size_t table_bytes(size_t cap)
{
	return la_align_up(cap * sizeof(struct dmap), LA_PAGE);
}

static size_t hash_ptr(uintptr_t u, size_t cap)
{
	u >>= LA_PAGE_SHIFT;
	u *= 0x9e3779b97f4a7c15ULL;
	return (size_t)(u >> 20) & (cap - 1);
}

static struct dmap *find_slot(uintptr_t user)
{
	if (!dcap)
		return NULL;
	for (size_t i = hash_ptr(user, dcap), n = 0; n < dcap; i = (i + 1) & (dcap - 1), n++) {
		if (dtab[i].user == user)
			return &dtab[i];
		if (dtab[i].user == 0)
			return NULL;
	}
	return NULL;
}

/* Insert (lock held). Grows the table when 3/4 full; returns false without memory. */
static bool insert(uintptr_t user, void *base, size_t len)
{
	if ((dused + 1) * 4 > dcap * 3) {
		size_t ncap = dcap ? dcap * 2 : 256;
		if (dlive * 4 < dcap)
			ncap = dcap ? dcap : 256; /* mostly tombstones: rehash in place size */
		struct dmap *nt = os_map(ncap * sizeof(*nt), pc());
		if (!nt)
			return false;
		STAT_ADD(pc(), metadata_bytes, table_bytes(ncap));
		STAT_ADD(pc(), address_space_bytes, table_bytes(ncap));
		for (size_t i = 0; i < dcap; i++) {
			if (dtab[i].user <= 1)
				continue;
			size_t j = hash_ptr(dtab[i].user, ncap);
			while (nt[j].user)
				j = (j + 1) & (ncap - 1);
			nt[j] = dtab[i];
		}
		if (dtab) {
			os_unmap(dtab, dcap * sizeof(*dtab), pc());
			STAT_SUB(pc(), metadata_bytes, table_bytes(dcap));
			STAT_SUB(pc(), address_space_bytes, table_bytes(dcap));
		}
		dtab = nt;
		dcap = ncap;
		dused = dlive;
	}
	size_t j = hash_ptr(user, dcap);
	while (dtab[j].user > 1)
		j = (j + 1) & (dcap - 1);
	if (dtab[j].user == 0)
		dused++;
	dtab[j].user = user;
	dtab[j].base = base;
	dtab[j].len = len;
	__atomic_store_n(&dlive, dlive + 1, __ATOMIC_RELAXED);
	return true;
}

/* Take a cached mapping of at least len bytes and at most 1.25 x len (lock held). */
static bool cache_take(size_t len, void **base, size_t *got, size_t *resident)
{
	int best = -1;
	for (unsigned i = 0; i < dcached_n; i++) {
		size_t l = dcache[i].len;
		if (l >= len && l - len <= len / 4 && (best < 0 || l < dcache[best].len))
			best = (int)i;
	}
	if (best < 0)
		return false;
	*base = dcache[best].base;
	*got = dcache[best].len;
	*resident = dcache[best].resident;
	dcache_bytes -= dcache[best].len;
	dcache[best] = dcache[--dcached_n];
	return true;
}

void *direct_alloc(size_t size, size_t align, bool *fresh)
{
	size_t extra = align > LA_PAGE ? align - LA_PAGE : 0;
	if (size > PTRDIFF_MAX - extra - LA_PAGE) {
		errno = ENOMEM;
		return NULL;
	}
	size_t len = la_align_up(size + extra, LA_PAGE);
	void *base = NULL;
	size_t got = 0, resident = 0;
	la_lock(&direct_lock);
	bool hit = !extra && cache_take(len, &base, &got, &resident);
	la_unlock(&direct_lock);
	if (hit) {
		uncache(got, resident, false);
		STAT_ADD(pc(), direct_cache_hits, 1);
	} else {
		base = os_map(len, pc());
		if (!base)
			return NULL;
		got = len;
		STAT_ADD(pc(), address_space_bytes, got);
	}
	if (fresh)
		*fresh = !hit;
	uintptr_t user = la_align_up((uintptr_t)base, align > LA_PAGE ? align : LA_PAGE);
	la_lock(&direct_lock);
	bool ok = insert(user, base, got);
	la_unlock(&direct_lock);
	if (!ok) {
		STAT_SUB(pc(), address_space_bytes, got);
		os_unmap(base, got, pc());
		errno = ENOMEM;
		return NULL;
	}
	STAT_ADD(pc(), direct_mappings, 1);
	STAT_ADD(pc(), direct_bytes, got);
	STAT_ADD(pc(), allocated_bytes, got);
	STAT_ADD(pc(), data_resident_bytes, got);
	return (void *)user;
}

/* glibc's rule: a freed mapping larger than the threshold (and not above the ceiling)
 * raises the threshold past its size and the trim threshold to twice that. */
static void raise_threshold(size_t len)
{
	/* the common case (nothing to raise) without the tunables' lock; tun_raise_threshold
	 * checks again under it */
	if (!TUN(mmap_dynamic) || (int64_t)len < TUN(mmap_threshold) ||
	    (int64_t)len >= TUN(mmap_threshold_max))
		return;
	if (tun_raise_threshold((int64_t)len))
		STAT_ADD(pc(), threshold_raises, 1);
}

int direct_free(void *p)
{
	uintptr_t user = (uintptr_t)p;
	void *evict[DCACHE_SLOTS];
	size_t evict_len[DCACHE_SLOTS], evict_res[DCACHE_SLOTS];
	unsigned nevict = 0;
	la_lock(&direct_lock);
	struct dmap *m = find_slot(user);
	if (!m) {
		int was = -1;
		for (unsigned i = 0; i < dcached_n; i++)
			if (dcache[i].user == user)
				was = 1;
		for (unsigned i = 0; i < DFREED_RING; i++)
			if (dfreed[i] == user)
				was = 1;
		la_unlock(&direct_lock);
		return was;
	}
	void *base = m->base;
	size_t len = m->len;
	m->user = 1; /* tombstone */
	__atomic_store_n(&dlive, dlive - 1, __ATOMIC_RELAXED);
	raise_threshold(len);
	/* below the ceiling of a dynamic threshold, blocks of this size now come from heaps:
	 * keeping the mapping would only hold memory */
	bool recycles = !TUN(mmap_dynamic) || (int64_t)len >= TUN(mmap_threshold_max);
	bool cached = len <= (uint64_t)TUN(direct_cache_bytes) && recycles;
	if (!cached)
		dfreed[dfreed_next++ % DFREED_RING] = user;
	la_unlock(&direct_lock);
	STAT_SUB(pc(), direct_mappings, 1);
	STAT_SUB(pc(), direct_bytes, len);
	STAT_SUB(pc(), allocated_bytes, len);
	STAT_SUB(pc(), data_resident_bytes, len);
	if (!cached) {
		STAT_SUB(pc(), address_space_bytes, len);
		os_unmap(base, len, pc());
		return 0;
	}
	/* what the program touched of it: free resident while it is cached */
	size_t resident = os_resident(base, len);
	la_lock(&direct_lock);
	uint64_t limit = (uint64_t)TUN(direct_cache_bytes);
	while (dcached_n && (dcache_bytes + len > limit || dcached_n == DCACHE_SLOTS)) {
		unsigned old = 0; /* evict the oldest */
		for (unsigned i = 1; i < dcached_n; i++)
			if (dcache[i].epoch < dcache[old].epoch)
				old = i;
		evict[nevict] = dcache[old].base;
		evict_len[nevict] = dcache[old].len;
		evict_res[nevict++] = dcache[old].resident;
		dcache_bytes -= dcache[old].len;
		dcache[old] = dcache[--dcached_n];
	}
	dcache[dcached_n++] = (struct dcached){base, len, user, decay_epoch, resident};
	dcache_bytes += len;
	la_unlock(&direct_lock);
	STAT_ADD(pc(), direct_cache_bytes, len);
	STAT_ADD(pc(), free_resident_bytes, resident);
	STAT_ADD(pc(), data_resident_bytes, resident);
	for (unsigned i = 0; i < nevict; i++) {
		uncache(evict_len[i], evict_res[i], true);
		os_unmap(evict[i], evict_len[i], pc());
	}
	shm_note_retained();
	return 0;
}

size_t direct_usable(const void *p)
{
	la_lock(&direct_lock);
	struct dmap *m = find_slot((uintptr_t)p);
	size_t n = m ? m->len - ((uintptr_t)p - (uintptr_t)m->base) : 0;
	la_unlock(&direct_lock);
	return n;
}

void *direct_realloc(void *p, size_t size, bool *was_direct)
{
	la_lock(&direct_lock);
	struct dmap *m = find_slot((uintptr_t)p);
	*was_direct = m != NULL;
	if (!m || m->base != p || size > PTRDIFF_MAX - LA_PAGE) {
		la_unlock(&direct_lock);
		return NULL;
	}
	size_t old = m->len, len = la_align_up(size, LA_PAGE);
	if (len == old) { /* the same pages: nothing to remap or register again */
		la_unlock(&direct_lock);
		return p;
	}
	m->user = 1;
	__atomic_store_n(&dlive, dlive - 1, __ATOMIC_RELAXED);
	la_unlock(&direct_lock);
	void *q = len == old ? p : os_remap(p, old, len, pc());
	la_lock(&direct_lock);
	bool ok = insert((uintptr_t)(q ? q : p), q ? q : p, q ? len : old);
	la_unlock(&direct_lock);
	if (!ok)
		la_fatal("realloc()", "cannot register a direct mapping");
	if (q && len != old) {
		STAT_ADD(pc(), direct_bytes, len - old);
		STAT_ADD(pc(), address_space_bytes, len - old);
		STAT_ADD(pc(), allocated_bytes, len - old);
		STAT_ADD(pc(), data_resident_bytes, len - old);
	}
	return q;
}

static void drop_cache(bool only_old)
{
	struct dcached gone[DCACHE_SLOTS];
	unsigned n = 0;
	la_lock(&direct_lock);
	for (unsigned i = 0; i < dcached_n;) {
		if (only_old && dcache[i].epoch == decay_epoch) {
			i++;
			continue;
		}
		gone[n++] = dcache[i];
		dcache_bytes -= dcache[i].len;
		dcache[i] = dcache[--dcached_n];
	}
	decay_epoch++;
	la_unlock(&direct_lock);
	for (unsigned i = 0; i < n; i++) {
		uncache(gone[i].len, gone[i].resident, true);
		os_unmap(gone[i].base, gone[i].len, pc());
	}
}

void direct_trim(void)
{
	drop_cache(false);
}

bool direct_decay(void)
{
	drop_cache(true);
	la_lock(&direct_lock);
	bool left = dcached_n != 0;
	la_unlock(&direct_lock);
	return left;
}

uint64_t direct_count(void)
{
	return __atomic_load_n(&dlive, __ATOMIC_RELAXED); /* written under direct_lock */
}

void direct_fork_prepare(void)
{
	la_lock(&direct_lock);
}

void direct_fork_parent(void)
{
	la_unlock(&direct_lock);
}

void direct_fork_child(void)
{
	la_lock_reinit(&direct_lock);
}
