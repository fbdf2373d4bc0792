/* history.h — the daemon's memory of the recent past: every discovered process sampled on a
 * fixed cadence into a bounded two-tier ring, and a bounded ring of events (commands,
 * policy actions, process start and exit) on the same timeline.
 *
 * Pure data structure: no libevent, no clock of its own (every call is given the time), so
 * the unit tests drive a whole day of retention in a second. The loop glue (timer, sampling
 * the segments, HTTP and protocol) lives in ctld/timeline.c.
 *
 * Tiers. Time is cut into ticks of sample_ms (default 1000 ms). The fine tier keeps one
 * sample per tick for HIST_FINE_SLOTS ticks (15 minutes at 1 s); the coarse tier keeps the
 * mean of every HIST_COARSE_TICKS ticks for HIST_COARSE_SLOTS periods (24 hours at 1 min).
 * A sample is HIST_NFIG figures of 32 bits in KiB (saturating at 4 TiB); a tick with no
 * sample (the daemon was busy, the process could not be read) is stored as a gap.
 *
 * Memory. A process's rings grow as it lives and never exceed HIST_PROC_MAX_BYTES; an exited
 * process keeps its samples (shrunk to what it has) for the coarse retention. The total of
 * every process's history is kept within max_bytes, and each uid's within its share: the
 * bound divided by the uids that have a live history (all of it while there is one), so
 * one user's thousands of processes cannot take the room of everyone else's. Every process
 * gets its history and the first 16 slots of each ring within the total alone; a ring
 * that would grow beyond that over its uid's share drops that uid's oldest exited
 * histories, else stops growing (that process keeps a shorter window, counted in hist_stats.truncated). One that
 * fits its share but not the total drops the oldest exited histories of the uids over
 * their share (a uid without a live history has none), else cuts the largest live
 * history of the uid furthest over its share to half (counted in hist_stats.cut). */
#ifndef CTLD_HISTORY_H
#define CTLD_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Figures of one sample: X(name, label), liballoc_shm.h's memory figures (la_memory_of)
 * and the kernel's RSS. The page stacks in use .. metadata (bottom to top) and non-allocator
 * RSS over them, draws RSS as a line and reclaimable (what flush, release and trim give back:
 * free resident + the metadata of empty heaps) as a hatch over the free resident band.
 * Figures up to HIST_NSTORED are stored; non_alloc (RSS beyond the allocator's resident
 * bytes: rss - in use - cached - fragmented - free resident - metadata, at least 0) is
 * derived when read, so a sample costs 7 x 4 bytes. */
#define HIST_FIGURES(X)                                                                   \
	X(in_use, "in use")               /* handed out to the program */                 \
	X(cached, "cached")               /* free blocks in thread caches */              \
	X(fragmented, "fragmented")       /* free bytes on pages that hold live blocks */ \
	X(free_resident, "free resident") /* free pages kept resident by the allocator */ \
	X(metadata, "metadata")           /* the allocator's own resident bookkeeping */  \
	X(reclaimable, "reclaimable")     /* what flush + release + trim give back now */ \
	X(rss, "RSS")                     /* resident set size (kernel) */                \
	X(non_alloc, "non-allocator RSS") /* RSS the allocator does not account (derived) */

enum hist_figure {
#define HIST_X_ENUM(name, label) HIST_F_##name,
	HIST_FIGURES(HIST_X_ENUM)
#undef HIST_X_ENUM
	        HIST_NFIG
};
#define HIST_NSTORED HIST_F_non_alloc /* the figures before it are stored */
extern const char *const hist_figure_name[HIST_NFIG];
extern const char *const hist_figure_label[HIST_NFIG];

#define HIST_FINE_SLOTS   900u  /* 15 min at 1 s */
#define HIST_COARSE_TICKS 60u   /* one coarse sample = 60 fine ticks (1 min at 1 s) */
#define HIST_COARSE_SLOTS 1440u /* 24 h at 1 min */
#define HIST_GAP          UINT32_MAX
#define HIST_KIB_MAX      (UINT32_MAX - 1u)

struct hist_sample {
	uint32_t v[HIST_NSTORED]; /* KiB; v[0] == HIST_GAP marks a tick without a sample */
};

/* One tier: a vector that grows until cap, then a ring. */
struct hist_tier {
	struct hist_sample *s;
	uint32_t alloc;     /* slots allocated */
	uint32_t len;       /* slots holding data (<= alloc <= cap) */
	uint32_t head;      /* index of the oldest slot */
	uint32_t cap;       /* HIST_FINE_SLOTS or HIST_COARSE_SLOTS */
	uint64_t last_tick; /* tick (of this tier's period) of the newest slot */
};

/* The history of one process (pid + start time: a reused pid is another process). */
struct hist_proc {
	struct hist_proc *next, *prev; /* all histories, newest start last */
	int32_t pid;
	uint32_t uid;
	uint64_t start_time;  /* /proc start time of the process (identity) */
	int64_t started_ms;   /* CLOCK_REALTIME ms when the segment was created */
	int64_t exited_ms;    /* 0 while it lives */
	char exe[256];        /* basename */
	char profile[64];     /* the profile the daemon applied ("": none), as last sampled */
	char exit_reason[64]; /* why the daemon forgot it */
	bool truncated;       /* a ring was kept shorter than its cap by the total bound */
	uint32_t uix;         /* its entry in history.uids */
	struct hist_tier fine, coarse;
	uint64_t acc[HIST_NSTORED]; /* sums of the coarse period in progress */
	uint32_t acc_n;             /* samples in acc */
	uint64_t acc_tick;          /* coarse tick acc belongs to */
};

/* Worst case for one process: both rings full. */
#define HIST_PROC_MAX_BYTES         \
	(sizeof(struct hist_proc) + \
	 (size_t)(HIST_FINE_SLOTS + HIST_COARSE_SLOTS) * sizeof(struct hist_sample))

/* ---- events ------------------------------------------------------------------------------ */
/* start/exit: the daemon found the process or forgot it; the others are the audit trail's
 * actions (ctld/audit.h: set, trim, release, flush, revert of a held value, reload), and
 * the daemon's own start. */
#define HIST_EVENT_KINDS(X) \
	X(start)            \
	X(exit)             \
	X(set)              \
	X(trim)             \
	X(release)          \
	X(flush)            \
	X(revert)           \
	X(reload)           \
	X(daemon)

enum hist_event_kind {
#define HIST_X_KIND(name) HIST_EV_##name,
	HIST_EVENT_KINDS(HIST_X_KIND)
#undef HIST_X_KIND
	        HIST_NEV
};
extern const char *const hist_event_kind_name[HIST_NEV];

struct hist_event {
	uint64_t seq;   /* 1, 2, ...: clients fetch what came after the last they saw */
	int64_t t_ms;   /* CLOCK_REALTIME */
	int32_t pid;    /* 0: not about one process */
	uint32_t uid;   /* the process's uid */
	uint16_t kind;  /* enum hist_event_kind */
	bool ok;        /* the command (or action) succeeded */
	uint64_t bytes; /* bytes released, or the value set; 0 if none */
	char exe[64];
	char trigger[16]; /* the audit trail's: operator, profile, pressure, time, expiry, config */
	char who[64];     /* "uid 0 pid 1234", "profile NAME", "policy NAME", "daemon" */
	char what[160];   /* "released 12.0 MiB (3 madvise)", "mmap_threshold = 1048576" */
};

struct hist_stats {
	uint64_t samples;        /* samples stored */
	uint64_t gaps;           /* ticks stored as gaps */
	uint64_t evicted;        /* exited histories dropped for the total bound */
	uint64_t expired;        /* exited histories dropped after the retention */
	uint64_t truncated;      /* rings that stopped growing at the total bound or the uid's
	                            share */
	uint64_t cut;            /* live histories cut to half for another uid's share */
	uint64_t refused;        /* processes without any history (out of memory / bound) */
	uint64_t events;         /* events recorded */
	uint64_t events_dropped; /* events overwritten by newer ones */
};

/* What one uid's histories hold (the uid of the segment's owner). */
struct hist_uid {
	uint32_t uid;
	uint32_t nlive; /* its live histories */
	size_t bytes;   /* its histories' structs and sample arrays */
};

struct history {
	uint32_t sample_ms;
	size_t max_bytes;      /* bound on the sum of all process histories */
	size_t bytes;          /* current sum (structs + sample arrays) */
	struct hist_uid *uids; /* every uid seen (never removed: one per user of the host) */
	uint32_t nuids, cap_uids;
	uint32_t nactive; /* uids with a live history: each may hold max_bytes / nactive */
	struct hist_proc *head, *tail;
	uint32_t nprocs, nlive;
	struct hist_event *ev; /* ring of ev_cap */
	uint32_t ev_cap, ev_len, ev_head;
	uint64_t ev_seq;
	struct hist_stats st;
};

/* sample_ms >= 1; max_bytes >= HIST_PROC_MAX_BYTES; ev_cap >= 1. -1 when out of memory. */
int history_init(struct history *h, uint32_t sample_ms, size_t max_bytes, uint32_t ev_cap);
void history_free(struct history *h);
/* Change the bounds (SIGHUP); sample_ms changes drop every sample (ticks change meaning). */
int history_reconfigure(struct history *h, uint32_t sample_ms, size_t max_bytes, uint32_t ev_cap);

/* A process appeared: its (empty) history, or the one already open for pid+start_time.
 * NULL when even an empty history does not fit (counted in st.refused). */
struct hist_proc *history_open(struct history *h, int32_t pid, uint64_t start_time, uint32_t uid,
                               const char *exe, int64_t started_ms);
/* The share of the bound uid may hold now (its own when it has no live history yet). */
size_t history_uid_share(const struct history *h, uint32_t uid);
/* What uid's histories hold (0 for a uid never seen). */
size_t history_uid_bytes(const struct history *h, uint32_t uid);
/* The newest history of pid (live first, else the most recently exited), or NULL. */
struct hist_proc *history_find(struct history *h, int32_t pid);
/* Record one sample (bytes per figure) at time now_ms. Ticks skipped since the last
 * sample are stored as gaps. */
void history_sample(struct history *h, struct hist_proc *p, const uint64_t bytes[HIST_NFIG],
                    int64_t now_ms);
/* The process is gone: its rings shrink to what they hold; kept until they expire. */
void history_close(struct history *h, struct hist_proc *p, int64_t now_ms, const char *why);
/* Drop exited histories whose newest sample is older than the coarse retention. */
void history_expire(struct history *h, int64_t now_ms);

/* Iterate over the samples of a tier from the oldest at or after since_ms: cb gets each
 * sample's time (the start of its tick) and values in KiB (NULL for a gap). */
typedef void (*hist_sample_cb)(void *arg, int64_t t_ms, const uint32_t *kib);
void history_walk(const struct history *h, const struct hist_proc *p, bool coarse, int64_t since_ms,
                  hist_sample_cb cb, void *arg);
/* Period of a tier in ms; first time the tier covers (0 if empty). */
int64_t history_period_ms(const struct history *h, bool coarse);
int64_t history_first_ms(const struct history *h, const struct hist_proc *p, bool coarse);

/* Record an event (e->seq and e->t_ms are set here when 0: t_ms = now_ms). */
const struct hist_event *history_event(struct history *h, const struct hist_event *e,
                                       int64_t now_ms);
/* Events with seq > after_seq and t_ms >= since_ms, oldest first; cb returns false to stop. */
typedef bool (*hist_event_cb)(void *arg, const struct hist_event *e);
void history_events(const struct history *h, uint64_t after_seq, int64_t since_ms, hist_event_cb cb,
                    void *arg);

#endif
