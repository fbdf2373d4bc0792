/* liballoc_shm.h — the shared-memory segment ABI between liballoc and its readers.
 *
 * The only liballoc header allocctld and allocctl may include. Every list (counters,
 * tunables, commands) is defined once here as an X-macro; the segment structs, the
 * aggregation, the Prometheus names and HELP text and the CLI tables are generated from it.
 *
 * Lifecycle of a segment:
 *   1. A process running liballoc creates "<run_dir>/liballoc.<pid>.tmp" with mode 0600,
 *      sizes it, fills the header and renames it to "<run_dir>/liballoc.<pid>.seg".
 *      run_dir is $LIBALLOC_RUN_DIR (its last component made 0700 when missing), else
 *      LA_SHM_DEFAULT_RUN_DIR-<uid> (made 0700). <pid> is the pid the process sees: in a pid
 *      namespace other than the initial one (a container) the name also carries that
 *      namespace, "liballoc.<pid>.ns<inode>.seg" (and .tmp), so processes of several
 *      containers sharing one run directory never take each other's name; the header holds
 *      the same inode (pidns_ino).
 *      The process keeps a shared flock(2) on the file for its whole life, through an
 *      O_CLOEXEC descriptor: a reader that can take LOCK_EX|LOCK_NB knows the owner is
 *      gone (exited, crashed, or exec'd into a program without liballoc): stale.
 *   2. While the process lives, allocator threads update the per-arena counter blocks
 *      (each under its arena lock, bracketed by the block's seqlock) and the control thread
 *      refreshes the tunables block; readers copy a block under its seqlock, retrying a
 *      bounded number of times, and never write anything but the mailbox.
 *   3. A client (allocctld) takes the mailbox lock, writes a request, rings the doorbell
 *      (a shared futex); the control thread claims the request by CAS, runs it and writes
 *      the result. See struct la_mailbox for the state machine.
 *   4. At normal exit the process unlinks its segment. A segment whose pid is gone, or
 *      whose pid now belongs to a process with another start time, is stale; the daemon
 *      removes it. After fork() the child creates its own segment; after exec() the new
 *      image creates one under the same name (the rename replaces the old file).
 *
 * Bump LA_SHM_ABI_VERSION on any incompatible change; readers refuse versions outside
 * LA_SHM_ABI_VERSION_MIN..LA_SHM_ABI_VERSION (the older ones they still read are listed
 * there).
 * Adding a counter, tunable or command at the end of its list is compatible only if the
 * header's counts are used by readers (they are): readers take names from their own
 * copy of this header and read only the fields both sides know.
 */
#ifndef LIBALLOC_SHM_H
#define LIBALLOC_SHM_H

#include <stddef.h>
#include <stdint.h>

#define LA_SHM_MAGIC            0x314d48534c4c414cULL /* "LALLSHM1": also the layout marker */
/* 3: up to 44 size classes (eight per doubling above 4 KiB), where 2 had at most 36; the
 * layout is 2's, so readers of 3 read segments of 2 (an older reader refuses 3 by its
 * version, not by its class count).
 * 4: up to 52 (a class at 2^k + 2^k/8 for 256 to 2,048, and four from 16 to 32 KiB), the
 * layout 3's: readers of 4 read segments of 2 and 3 (an older reader refuses 4 by its
 * version).
 * 5: the size classes' statistics are kept per arena (header.off_arena_classes), each
 * arena's written plainly under its lock instead of with a locked add per refill and flush
 * into one process-wide entry; a class entry may hold its size alone (class_stride 8).
 * Readers sum the entries' fields and every arena's (la_class_stats_add); a segment of 2-4
 * has no arena part (off_arena_classes 0) and reads as before.
 * 6: up to 53 classes (one at 16 KiB + 1 KiB), the layout 5's: readers of 6 read segments
 * of 2-5 (an older reader refuses 6 by its version). */
#define LA_SHM_ABI_VERSION      6u
#define LA_SHM_ABI_VERSION_MIN  2u      /* the oldest version readers still read */
#define LA_VERSION              "0.1.0" /* the project's version: liballoc, allocctld, allocctl */
#define LA_SHM_PREFIX           "liballoc."
#define LA_SHM_SUFFIX           ".seg"
#define LA_SHM_DEFAULT_RUN_DIR  "/dev/shm/liballoc"
/* When LA_SHM_DEFAULT_RUN_DIR-<uid> exists but is not that uid's own (another user created
 * it first), a process publishes in LA_SHM_FALLBACK_RUN_DIR/<uid> instead: a root-owned
 * parent (allocctld creates it and the per-uid directory, owned by the uid, mode 0700;
 * a root process creates its own) in which no other user can create anything. */
#define LA_SHM_FALLBACK_RUN_DIR "/run/liballoc"
#define LA_SHM_PAGE             4096u
#define LA_SHM_NS_TAG           ".ns" /* liballoc.<pid>.ns<pid namespace inode>.seg */
/* The inode of the initial pid namespace (the kernel's PROC_PID_INIT_INO, fixed since
 * Linux 3.8): its processes' segments keep the short name. */
#define LA_SHM_INIT_PIDNS       0xEFFFFFFCu

/* ---- Limits both sides hold ------------------------------------------------------------
 * The library never writes a header beyond these, and readers refuse one that goes beyond
 * them, so a hostile segment costs a reader no more than the largest one liballoc makes.
 * Counters, tunables and class fields may grow at the end of their lists (see above) up to
 * their *_MAX; arena slots and size classes are the library's own numbers. */
#define LA_SHM_ARENAS_MAX        1024 /* arena slots (arena_max is at most this) */
#define LA_SHM_CLASSES_MAX       53   /* size classes published */
#define LA_SHM_COUNTERS_MAX      128  /* counters per block */
#define LA_SHM_TUNABLES_MAX      64   /* tunable entries */
#define LA_SHM_CLASS_STATS_MAX   16   /* statistics per size class */
/* bytes of a class entry (its size, its statistics), of one arena's class statistics
 * (every class's, without the sizes: header.class_stats_size each) and of one arena
 * block (seq, index+threads, counters, reserved; the arena's class statistics may follow
 * it within arena_stride) */
#define LA_SHM_CLASS_STRIDE_MAX  (8 + 8 * LA_SHM_CLASS_STATS_MAX)
#define LA_SHM_ARENA_CLASSES_MAX (8 * LA_SHM_CLASS_STATS_MAX * LA_SHM_CLASSES_MAX)
#define LA_SHM_ARENA_STRIDE_MAX  (16 + 8 * LA_SHM_COUNTERS_MAX + 64 + LA_SHM_ARENA_CLASSES_MAX)
/* the largest file: header page, tunables, classes, process + arena blocks (with their
 * class statistics), mailbox page */
#define LA_SHM_SIZE_MAX                                             \
	(2u * LA_SHM_PAGE + 16u * (unsigned)LA_SHM_TUNABLES_MAX +   \
	 (unsigned)(LA_SHM_CLASS_STRIDE_MAX * LA_SHM_CLASSES_MAX) + \
	 (unsigned)(LA_SHM_ARENA_STRIDE_MAX * (1 + LA_SHM_ARENAS_MAX)) + LA_SHM_PAGE)

/* ---- Counters -------------------------------------------------------------------------
 * X(name, kind, unit, scope, help). Names end in their unit, as Prometheus names do
 * (readers add "_total" to counters).
 * kind: LA_GAUGE (a level), LA_COUNTER (monotonic), or LA_INPUT: a gauge published only
 *       through the memory figures below (la_memory_of), not on its own.
 * scope: where the counter lives. LA_ARENA: in every arena block (the process total is
 *       their sum); LA_PROCESS: only in the process block (direct mappings, the control
 *       thread: readers publish no per-arena series of it); LA_BOTH: in both (each arena
 *       for its heaps, the process block for direct mappings and process-wide tables).
 * The process total is the sum of the process block and every arena (la_counters_add). */
#define LA_GAUGE   0
#define LA_COUNTER 1
#define LA_INPUT   2

#define LA_ARENA   1
#define LA_PROCESS 2
#define LA_BOTH    3

#define LA_COUNTERS(X)                                                                          \
	X(allocated_bytes, LA_INPUT, "bytes", LA_BOTH,                                          \
	  "Bytes of blocks out of the allocator: held by the program or in caches")             \
	X(cached_bytes, LA_INPUT, "bytes", LA_ARENA,                                            \
	  "Bytes of free blocks in thread caches (as of each bin's last refill or flush) and "  \
	  "the arena's transfer cache")                                                         \
	X(data_resident_bytes, LA_INPUT, "bytes", LA_BOTH,                                      \
	  "Bytes of heap pages and direct mappings that may be resident (metadata excluded)")   \
	X(free_resident_bytes, LA_INPUT, "bytes", LA_BOTH,                                      \
	  "Resident free pages that release and trim return")                                   \
	X(metadata_bytes, LA_INPUT, "bytes", LA_BOTH,                                           \
	  "Resident bytes of the allocator's own data")                                         \
	X(idle_metadata_bytes, LA_INPUT, "bytes", LA_ARENA,                                     \
	  "Metadata of heaps that hold no block (release unmaps them)")                         \
	X(address_space_bytes, LA_GAUGE, "bytes", LA_BOTH,                                      \
	  "Address space reserved from the kernel (64 MiB heaps, direct mappings, tables); "    \
	  "mostly not resident")                                                                \
	X(heaps, LA_GAUGE, "", LA_ARENA, "Heaps currently mapped")                              \
	X(heaps_released, LA_COUNTER, "", LA_ARENA, "Idle heaps unmapped")                      \
	X(direct_mappings, LA_GAUGE, "", LA_PROCESS, "Direct mappings currently live")          \
	X(direct_bytes, LA_GAUGE, "bytes", LA_PROCESS, "Bytes in live direct mappings")         \
	X(direct_cache_bytes, LA_GAUGE, "bytes", LA_PROCESS,                                    \
	  "Bytes of freed direct mappings kept for reuse")                                      \
	X(direct_cache_hits, LA_COUNTER, "", LA_PROCESS,                                        \
	  "Large allocations served from the direct-mapping cache")                             \
	X(mmap_calls, LA_COUNTER, "", LA_BOTH, "mmap and mremap system calls")                  \
	X(mmap_bytes, LA_COUNTER, "bytes", LA_BOTH, "Bytes covered by mmap and mremap calls")   \
	X(munmap_calls, LA_COUNTER, "", LA_BOTH, "munmap system calls")                         \
	X(munmap_bytes, LA_COUNTER, "bytes", LA_BOTH, "Bytes covered by munmap calls")          \
	X(madvise_calls, LA_COUNTER, "", LA_BOTH, "madvise and process_madvise system calls")   \
	X(madvise_bytes, LA_COUNTER, "bytes", LA_BOTH, "Bytes covered by madvise calls")        \
	X(mprotect_calls, LA_COUNTER, "", LA_BOTH, "mprotect system calls")                     \
	X(mprotect_bytes, LA_COUNTER, "bytes", LA_BOTH, "Bytes covered by mprotect calls")      \
	X(madvise_deferred, LA_COUNTER, "", LA_ARENA,                                           \
	  "Page returns deferred by the madvise throttle")                                      \
	X(threshold_raises, LA_COUNTER, "", LA_PROCESS, "Dynamic mmap threshold adjustments")   \
	X(remote_frees_queued, LA_COUNTER, "", LA_ARENA,                                        \
	  "Frees enqueued on an arena by threads that do not use it")                           \
	X(remote_frees_drained, LA_COUNTER, "", LA_ARENA, "Remote frees drained by the arena")  \
	X(remote_frees_locked, LA_COUNTER, "", LA_ARENA,                                        \
	  "Frees by other threads that took the lock of an arena no thread uses")               \
	X(cache_refills, LA_COUNTER, "", LA_ARENA, "Thread-cache refills from the arena")       \
	X(cache_flushes, LA_COUNTER, "", LA_ARENA, "Thread-cache flushes to the arena")         \
	X(lock_contended, LA_COUNTER, "", LA_ARENA, "Arena lock acquisitions that had to wait") \
	X(commands_executed, LA_COUNTER, "", LA_PROCESS, "Mailbox commands executed")           \
	X(released_bytes, LA_COUNTER, "bytes", LA_PROCESS,                                      \
	  "Resident bytes returned to the system by trim, release and flush (measured)")        \
	X(burst_prepared_bytes, LA_GAUGE, "bytes", LA_ARENA,                                    \
	  "Free pages populated for a predicted burst and not taken yet (in free resident; "    \
	  "time policies leave them)")                                                          \
	X(burst_hits, LA_COUNTER, "", LA_ARENA, "Predicted bursts that came in their window")   \
	X(burst_misses, LA_COUNTER, "", LA_ARENA,                                               \
	  "Predicted bursts that did not come: pages given back, the pattern forgotten")        \
	X(cache_flushes_deferred, LA_COUNTER, "", LA_ARENA,                                     \
	  "Thread-cache flushes that found the arena locked and handed their blocks to its "    \
	  "ring for the next refill to take, instead of waiting")

#define LA_X_COUNT(name, ...) +1
enum { LA_NCOUNTERS = 0 LA_COUNTERS(LA_X_COUNT) };

struct la_counters {
#define LA_X_FIELD(name, kind, unit, scope, help) uint64_t name;
	LA_COUNTERS(LA_X_FIELD)
#undef LA_X_FIELD
};

/* ---- Memory figures -------------------------------------------------------------------
 * The one definition of each figure liballoc reports (README "Memory figures", allocctl(1)),
 * derived from the LA_INPUT counters of one block or of the process total. X(name, help);
 * readers publish each as <name>_bytes. What is exact and what is an estimate:
 *   - allocated, free_resident (heap part), metadata and address space are kept exactly
 *     by the allocator (it knows every page it touched, handed out and returned);
 *   - cached is published at each cache bin's refill and flush, not by the fast path,
 *     so cached and in_use may be off by what the fast path moved since (their sum is
 *     exact);
 *   - pages of large blocks and direct mappings handed out are counted resident whole:
 *     the allocator cannot see what the program touched. A freed direct mapping kept in
 *     the cache is measured (mincore) when it enters the cache, and free heap pages,
 *     empty spans and the parked block are measured by each decay pass.
 * resident = in_use + cached + fragmented + free_resident + metadata. */
#define LA_MEMORY(X)                                                                               \
	X(in_use, "Bytes handed out to the program and not freed (thread caches excluded)")        \
	X(cached, "Bytes of free blocks in thread caches and the arenas' transfer caches (flush "  \
	          "returns them to their spans)")                                                  \
	X(fragmented, "Free bytes on resident pages that also hold live blocks: no command can "   \
	              "return them until those blocks are freed")                                  \
	X(free_resident, "Free pages kept resident that release and trim return now (free heap "   \
	                 "pages, empty spans, the parked block, the direct-mapping cache)")        \
	X(free_reserved, "Address space held but not resident (costs no memory)")                  \
	X(metadata, "The allocator's own resident data: heap headers, span descriptors, tables, "  \
	            "the segment, thread-cache structures")                                        \
	X(reclaimable, "Resident bytes flush, release and trim give back now: free resident plus " \
	               "the metadata of heaps that hold no block")                                 \
	X(resident, "Bytes the allocator holds resident: in use + cached + fragmented + free "     \
	            "resident + metadata (an upper bound: handed-out pages count whole)")

struct la_memory {
#define LA_X_MEM(name, help) uint64_t name;
	LA_MEMORY(LA_X_MEM)
#undef LA_X_MEM
};

static inline uint64_t la_sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* The memory figures of a counter block (one arena, the process block, or the total). A
 * gauge updated without a lock may briefly lag another: differences are clamped at 0. */
static inline void la_memory_of(const struct la_counters *c, struct la_memory *m)
{
	uint64_t cached =
	        c->cached_bytes < c->allocated_bytes ? c->cached_bytes : c->allocated_bytes;
	m->cached = cached;
	m->in_use = c->allocated_bytes - cached;
	m->free_resident = c->free_resident_bytes;
	m->fragmented =
	        la_sub0(c->data_resident_bytes, c->allocated_bytes + c->free_resident_bytes);
	m->metadata = c->metadata_bytes;
	m->resident = m->in_use + m->cached + m->fragmented + m->free_resident + m->metadata;
	m->free_reserved =
	        la_sub0(c->address_space_bytes, c->data_resident_bytes + c->metadata_bytes);
	m->reclaimable = m->free_resident + c->idle_metadata_bytes;
}

/* ---- Tunables -------------------------------------------------------------------------
 * X(name, type, default, min, max, live, mallopt, help)
 * type: LA_T_SIZE (bytes; human units accepted), LA_T_BOOL (0/1), LA_T_INT, LA_T_MS.
 * default LA_DEFAULT_AUTO (-1) means "computed at start" (arena_max: the CPUs the process
 * may run on).
 * live: 1 if a change through the mailbox takes effect while the process runs.
 * mallopt: glibc's M_* number, or 0 where glibc has none. */
#define LA_T_SIZE       0
#define LA_T_BOOL       1
#define LA_T_INT        2
#define LA_T_MS         3
#define LA_DEFAULT_AUTO (-1)
#define LA_MIB          (1024LL * 1024LL)

#define LA_TUNABLES(X)                                                                             \
	X(mmap_threshold, LA_T_SIZE, 128 * 1024, 0, 32 * LA_MIB, 1, -3,                            \
	  "Requests at or above this size get their own mapping")                                  \
	X(mmap_threshold_max, LA_T_SIZE, 4 * LA_MIB, 4096, 32 * LA_MIB, 1, 0,                      \
	  "Ceiling of the dynamic mmap threshold")                                                 \
	X(mmap_dynamic, LA_T_BOOL, 1, 0, 1, 1, 0,                                                  \
	  "Raise the mmap threshold when direct mappings are freed (off once a threshold is set)") \
	X(trim_threshold, LA_T_SIZE, 128 * 1024, 0, 1LL << 50, 1, -1,                              \
	  "Free resident bytes a heap may keep before returning them to the system")               \
	X(top_pad, LA_T_SIZE, 128 * 1024, 0, 1LL << 40, 1, -2,                                     \
	  "Free bytes kept resident in each heap when it is trimmed")                              \
	X(mmap_max, LA_T_INT, 65536, 0, 2147483647, 1, -4,                                         \
	  "Maximum number of live direct mappings (0: serve from heaps when the size fits)")       \
	X(arena_max, LA_T_INT, LA_DEFAULT_AUTO, 1, LA_SHM_ARENAS_MAX, 1, -8,                       \
	  "Maximum number of arenas (default: one per CPU)")                                       \
	X(arena_test, LA_T_INT, 8, 1, 1024, 1, -7,                                                 \
	  "Accepted for glibc compatibility (mallopt M_ARENA_TEST)")                               \
	X(tcache_max_bytes, LA_T_SIZE, 256 * 1024, 0, 64 * LA_MIB, 1, 0,                           \
	  "Bytes of free blocks a thread cache may hold per size class (at most 63 blocks; a "     \
	  "quarter of it above 4 KiB; 0: off)")                                                    \
	X(madvise_throttle, LA_T_BOOL, 1, 0, 1, 1, 0,                                              \
	  "Defer returning pages while a heap is steady or growing")                               \
	X(idle_heap_release, LA_T_BOOL, 1, 0, 1, 1, 0,                                             \
	  "Unmap any heap of an arena that holds no live block")                                   \
	X(decay_ms, LA_T_MS, 10000, 0, 3600000, 1, 0,                                              \
	  "Free memory unused this long is returned by the control thread (0: never)")             \
	X(direct_cache_bytes, LA_T_SIZE, 256 * LA_MIB, 0, 1LL << 40, 1, 0,                         \
	  "Bytes of freed direct mappings kept for reuse")                                         \
	X(check_free_lists, LA_T_BOOL, 0, 0, 1, 1, 0,                                              \
	  "Validate every free-list link: thread caches are bypassed (slower)")                    \
	X(burst_predict, LA_T_BOOL, 1, 0, 1, 1, 0,                                                 \
	  "Learn periodic bursts and populate their pages shortly before the next one")

enum la_tunable_id {
#define LA_X_ENUM(name, ...) LA_TUNABLE_##name,
	LA_TUNABLES(LA_X_ENUM)
#undef LA_X_ENUM
	        LA_NTUNABLES
};

/* Where a tunable's effective value came from. X(name, id, text); ids are wire values. */
#define LA_SOURCES(X)                                                                  \
	X(default, 0, "default")         /* never set */                               \
	X(environment, 1, "environment") /* LIBALLOC_<NAME> at start */                \
	X(mallopt, 2, "mallopt")         /* mallopt(3) */                              \
	X(command, 3, "command")         /* set live through the mailbox (allocctl) */ \
	X(api, 4, "api")                 /* liballoc_set() */                          \
	X(dynamic, 5, "dynamic")         /* adjusted by the allocator itself */        \
	X(policy, 6, "policy")           /* set live by allocctld's profile or policy */

enum la_source {
#define LA_X_SRC(name, id, text) LA_SRC_##name = id,
	LA_SOURCES(LA_X_SRC)
#undef LA_X_SRC
	        LA_SRC_MAX
};

static inline const char *la_source_name(uint32_t src)
{
	switch (src) {
#define LA_X_SRC_NAME(name, id, text) \
	case id:                      \
		return text;
		LA_SOURCES(LA_X_SRC_NAME)
#undef LA_X_SRC_NAME
	}
	return "unknown";
}

/* One published tunable: the effective value, as the process uses it now, and where it
 * came from (la_source). Setting mmap_threshold, trim_threshold, top_pad or mmap_max
 * turns mmap_dynamic off: mmap_dynamic then carries the source of that setting. */
struct la_shm_tunable {
	int64_t value;
	uint32_t source; /* la_source */
	uint32_t reserved;
};

/* ---- Commands -------------------------------------------------------------------------
 * X(name, id, help). Ids are wire values: never renumber. */
#define LA_COMMANDS(X)                                                                      \
	X(get, 1, "Read a tunable (name) into value_out")                                   \
	X(set, 2, "Set a tunable (name, value)")                                            \
	X(trim, 3, "Return free memory to the system, bypassing the throttle (arg: pad)")   \
	X(release_idle_heaps, 4, "Unmap every heap that holds no live block")               \
	X(flush_caches, 5, "Return every thread cache to its arena, idle threads included") \
	X(refresh, 6, "Republish all statistics now")

enum la_command_id {
#define LA_X_CMD(name, id, help) LA_CMD_##name = id,
	LA_COMMANDS(LA_X_CMD)
#undef LA_X_CMD
	        LA_CMD_MAX
};

/* Result status of a command (negative errno style kept out: these are wire values). */
#define LA_STATUSES(X)                                \
	X(OK, 0, "ok")                                \
	X(EINVAL_NAME, 1, "unknown tunable")          \
	X(ERANGE, 2, "value out of range")            \
	X(EREADONLY, 3, "tunable cannot change live") \
	X(EBADCMD, 4, "unknown command")              \
	X(EFAILED, 5, "command failed")               \
	X(ECANCELLED, 6, "request cancelled by the client")

enum la_status {
#define LA_X_ST(name, v, text) LA_ST_##name = v,
	LA_STATUSES(LA_X_ST)
#undef LA_X_ST
};

#define LA_NAME_MAX   64
#define LA_REASON_MAX 160

/* Mailbox state machine (field `state`, a futex word):
 *   IDLE/DONE/CANCELLED --client holding `lock` writes request, then--> REQUESTED
 *   REQUESTED --control thread CAS--> RUNNING --writes result--> DONE
 *   REQUESTED --client CAS on timeout--> CANCELLED (the command will not run)
 * A command therefore runs at most once: only the CAS from REQUESTED claims it.
 * `lock` holds the owning client's token (its pid) and `lock_expires_ns`
 * (CLOCK_REALTIME); a holder past its expiry may be displaced, so a client killed with
 * the lock held cannot wedge the mailbox. */
enum la_mailbox_state {
	LA_MB_IDLE = 0,
	LA_MB_REQUESTED = 1,
	LA_MB_RUNNING = 2,
	LA_MB_DONE = 3,
	LA_MB_CANCELLED = 4,
};

/* A tunable set for a limited time (a set whose mailbox arg is a hold in ms: allocctl set
 * --for, a policy's decay rung) is reverted by the process's own control thread when the
 * hold expires, whether a daemon runs or not: the value it had before and where that came
 * from are kept here, one entry per tunable (header.off_holds). Setting a held tunable
 * again with a hold extends it (the value to revert to stays the first one); an explicit
 * setting without one ends it. */
struct la_shm_hold {
	uint64_t expires_ns; /* CLOCK_MONOTONIC (the same for every process); 0: not held */
	int64_t revert_value;
	uint32_t revert_source; /* la_source of the value before */
	uint32_t reserved;
};

/* Request flags (la_mailbox.flags). */
#define LA_MB_FROM_POLICY 1u /* set: on behalf of allocctld's profile or policy */
/* trim, release_idle_heaps: stop once `value` bytes came back (largest first), not all
 * there is: a policy asks for what brings usage under its target. A library that does not
 * know the flag releases everything, as before. */
#define LA_MB_GOAL        2u

struct la_mailbox {
	uint32_t state;           /* la_mailbox_state; futex word the control thread waits on */
	uint32_t lock;            /* 0 free, else the token of the client that owns the request */
	uint64_t lock_expires_ns; /* CLOCK_REALTIME after which `lock` may be taken over */
	uint64_t seq;             /* client-chosen request number, echoed in result_seq */
	/* request: written by the lock holder before state := REQUESTED */
	uint32_t command; /* la_command_id */
	uint32_t flags;
	char name[LA_NAME_MAX]; /* tunable name for get/set */
	int64_t value;          /* set: new value; trim/release with LA_MB_GOAL: bytes wanted */
	uint64_t arg;           /* trim: pad bytes */
	/* result: written by the control thread before state := DONE */
	uint64_t result_seq;
	int32_t status;             /* la_status */
	uint32_t source_out;        /* get/set: the value's la_source */
	char reason[LA_REASON_MAX]; /* human text on failure (names the valid range) */
	int64_t value_out;          /* get/set: the (new) effective value */
	uint64_t bytes_released;
	uint64_t syscalls_mmap, syscalls_munmap, syscalls_madvise, syscalls_mprotect;
	uint64_t duration_ns;
	uint64_t reserved[16];
};

/* ---- Per-size-class statistics --------------------------------------------------------- */
#define LA_CLASS_STATS(X)                                                 \
	X(blocks_in_use, LA_GAUGE, "", "Blocks of this class handed out") \
	X(spans, LA_GAUGE, "", "Spans carved into blocks of this class")  \
	X(refills, LA_COUNTER, "", "Thread-cache refills of this class")  \
	X(flushes, LA_COUNTER, "", "Thread-cache flushes of this class")

struct la_class_stats {
#define LA_X_FIELD(name, kind, unit, help) uint64_t name;
	LA_CLASS_STATS(LA_X_FIELD)
#undef LA_X_FIELD
};

/* A block of statistics guarded by a seqlock: the writer makes `seq` odd, writes, makes
 * it even (release). A reader copies the block between two equal, even reads of `seq`. */
struct la_shm_arena {
	uint64_t seq;
	uint32_t index;
	uint32_t threads; /* threads currently attached */
	struct la_counters c;
	/* a counter added at the end of the list takes a word of these: the block keeps its
	 * size (readers step by arena_stride; shm.c keeps three blocks in the first page) */
	uint64_t reserved[7];
};

/* ---- The header ------------------------------------------------------------------------ */
#define LA_EXE_MAX 256

struct la_shm_header {
	uint64_t magic;       /* LA_SHM_MAGIC */
	uint32_t abi_version; /* LA_SHM_ABI_VERSION */
	uint32_t header_size; /* sizeof(struct la_shm_header) */
	uint64_t total_size;  /* size of the whole file */
	uint64_t generation;  /* bumped when the layout below moves (readers remap) */
	int32_t pid;
	uint32_t uid;
	uint64_t start_time;    /* /proc/<pid>/stat field 22 (clock ticks since boot) */
	uint64_t created_ns;    /* CLOCK_REALTIME at creation */
	char exe[LA_EXE_MAX];   /* /proc/self/exe at creation, NUL-terminated */
	uint32_t counter_count; /* LA_NCOUNTERS of the writer */
	uint32_t tunable_count; /* LA_NTUNABLES of the writer */
	uint32_t class_count;   /* size classes published */
	uint32_t arena_slots;   /* arena blocks reserved */
	uint32_t arena_count;   /* arena blocks in use (atomic, grows only) */
	uint32_t control_state; /* la_control_state */
	uint64_t off_process;   /* struct la_shm_arena: process-level counters */
	uint64_t off_arenas;    /* struct la_shm_arena[arena_slots] */
	uint64_t arena_stride;
	uint64_t off_tunables; /* struct la_shm_tunable[tunable_count], guarded by tunables_seq */
	uint64_t off_classes;  /* struct la_shm_class[class_count]; each field atomic */
	uint64_t class_stride; /* bytes of an entry (8: the size alone; 5 keeps the
	                        * statistics per arena, off_arena_classes) */
	uint64_t off_mailbox;  /* struct la_mailbox, page aligned, its own page */
	uint64_t allocator_threads;  /* threads that used the allocator and have not exited (not
	                             * the process's thread count: see /proc/<pid>/status) */
	uint64_t heartbeat_ns;       /* CLOCK_MONOTONIC of the last control-thread pass */
	uint64_t tunables_seq;       /* seqlock of the tunables block */
	uint64_t off_holds;          /* struct la_shm_hold[tunable_count] (0: none), in the
	                             * mailbox's page after the mailbox, guarded by tunables_seq */
	uint32_t foreign_allocators; /* LA_FOREIGN bits: other allocators mapped at start */
	uint32_t reserved0;
	char version[16]; /* LA_VERSION of the writer */
	/* The namespaces the process saw when it published (inodes of /proc/self/ns/pid and
	 * /proc/self/ns/user; 0: unknown). pid and uid above are the values in those namespaces:
	 * a reader in another namespace maps them (NSpid and ns/pid of /proc/<pid>, uid_map). */
	uint64_t pidns_ino;
	uint64_t userns_ino;
	/* the in-process pressure watch (LIBALLOC_PRESSURE, $MEMORY_PRESSURE_WATCH): events
	 * acted on and the bytes the control thread released for them (atomic) */
	uint32_t pressure_watching; /* 1 while a watch runs */
	uint32_t reserved1;
	uint64_t pressure_events;
	uint64_t pressure_released_bytes;
	uint64_t pressure_response_ns; /* the last event that needed memory back (0: none
	                                * yet; v1 usage watch: usage was over 75% of the
	                                * limit, else: it released some): from the watch's
	                                * wake-up to enough back (v1: usage under 75%) or
	                                * the end of the release */
	/* (5) The size classes' statistics of each arena: struct la_class_stats[class_count]
	 * (class_stats_size bytes each, the fields of LA_CLASS_STATS in order) at
	 * off_arena_classes + i * arena_class_stride for arena i < arena_count, each field
	 * written whole (no seqlock) by that arena only. A class's figure is its entry's field
	 * plus every arena's (a gauge's parts may be read at different moments). 0: none
	 * (2-4). */
	uint64_t off_arena_classes;
	uint64_t arena_class_stride;
	uint64_t class_stats_size;
	uint64_t reserved[17];
};

/* Other allocators liballoc recognises in its process (their libraries mapped at start):
 * the program's own allocator statistics and controls then describe nothing.
 * X(name, bit, library prefix). */
#define LA_FOREIGN(X)                     \
	X(jemalloc, 1u, "libjemalloc.so") \
	X(tcmalloc, 2u, "libtcmalloc")    \
	X(mimalloc, 4u, "libmimalloc.so")

/* The name of one LA_FOREIGN bit ("jemalloc"), NULL if unknown. */
static inline const char *la_foreign_name(uint32_t bit)
{
#define LA_X_FOREIGN_NAME(name, b, lib) \
	if (bit == (b))                 \
		return #name;
	LA_FOREIGN(LA_X_FOREIGN_NAME)
#undef LA_X_FOREIGN_NAME
	return NULL;
}

enum la_control_state {
	LA_CONTROL_OFF = 0, /* LIBALLOC_CONTROL=0 */
	LA_CONTROL_RUNNING = 1,
	LA_CONTROL_FAILED = 2, /* the thread could not start; commands time out */
};

/* A class entry in the classes block: its size, then the statistics the writer keeps for
 * the whole process (none in liballoc's segments since 5: class_stride 8; readers add the
 * arenas' parts, header.off_arena_classes). */
struct la_shm_class {
	uint64_t size;
	struct la_class_stats s;
};

_Static_assert(sizeof(struct la_counters) == 8 * LA_NCOUNTERS, "counters are packed u64");
_Static_assert(sizeof(struct la_mailbox) % 8 == 0, "mailbox is 8-aligned");
_Static_assert(sizeof(struct la_mailbox) <= LA_SHM_PAGE, "mailbox fits its page");
_Static_assert(offsetof(struct la_mailbox, state) == 0, "doorbell first");
_Static_assert(offsetof(struct la_shm_header, magic) == 0, "magic first");
_Static_assert(offsetof(struct la_shm_header, abi_version) == 8, "version at 8");
_Static_assert(offsetof(struct la_shm_header, total_size) == 16, "size at 16");
_Static_assert(sizeof(struct la_shm_header) <= LA_SHM_PAGE, "header fits one page");
_Static_assert(sizeof(struct la_shm_tunable) == 16, "tunable entry");
_Static_assert(sizeof(struct la_shm_hold) == 24, "hold entry");
_Static_assert(LA_NCOUNTERS <= LA_SHM_COUNTERS_MAX, "counters within the shared limit");
_Static_assert(LA_NTUNABLES <= LA_SHM_TUNABLES_MAX, "tunables within the shared limit");
_Static_assert(sizeof(struct la_shm_arena) <= LA_SHM_ARENA_STRIDE_MAX, "arena block limit");
_Static_assert(sizeof(struct la_shm_class) <= LA_SHM_CLASS_STRIDE_MAX, "class entry limit");

/* Sum one counter block into another (process total = process block + every arena). The
 * source may be a live block other threads update (with relaxed atomics): each field is
 * read with a relaxed atomic load, a whole value, never torn. */
static inline void la_counters_add(struct la_counters *dst, const struct la_counters *src)
{
#define LA_X_ADD(name, ...) dst->name += __atomic_load_n(&src->name, __ATOMIC_RELAXED);
	LA_COUNTERS(LA_X_ADD)
#undef LA_X_ADD
}

/* Sum one class's statistics into another (an entry's and every arena's: the class's
 * figures); the source may be live, each field read whole (see la_counters_add). */
static inline void la_class_stats_add(struct la_class_stats *dst, const struct la_class_stats *src)
{
#define LA_X_CADD(name, ...) dst->name += __atomic_load_n(&src->name, __ATOMIC_RELAXED);
	LA_CLASS_STATS(LA_X_CADD)
#undef LA_X_CADD
}

/* A copy of a live counter block, each field read whole (see la_counters_add). */
static inline void la_counters_read(struct la_counters *dst, const struct la_counters *src)
{
	*dst = (struct la_counters){0};
	la_counters_add(dst, src);
}

#endif
