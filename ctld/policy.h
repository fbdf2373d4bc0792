/* policy.h — allocctld acting on its own: profiles applied to processes as they are found,
 * and [policy NAME] sections that release memory when the kernel reports pressure (PSI,
 * a cgroup's usage against its limit, cgroup v2 memory events) or when a process has held
 * free memory, or been idle, for a while. A policy runs an escalation ladder (flush,
 * release, trim, then optionally a lower decay_ms for a hold period) on the processes it
 * covers, largest reclaimable first, and stops when enough came back. Every action goes
 * through commands.c (so it is audited) under the policy's or profile's name.
 *
 * policy_conf.c parses and validates the sections; policy.c runs them on the loop. */
#ifndef CTLD_POLICY_H
#define CTLD_POLICY_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile.h"

struct ctld;
struct proc;
struct proc_snap;

enum policy_on {
	POLICY_ON_PSI,    /* a PSI trigger (host, or a cgroup v2 memory.pressure) */
	POLICY_ON_CGROUP, /* a cgroup's usage against its limit (v1 thresholds, v2 events) */
	POLICY_ON_FREE,   /* a process holding more than `above` free resident for `for` */
	POLICY_ON_IDLE,   /* a process with no allocator activity for `for` */
};

enum policy_rung { RUNG_FLUSH, RUNG_RELEASE, RUNG_TRIM, RUNG_DECAY, RUNG_MAX };

/* A threshold: bytes, or a share of the cgroup's limit in parts per million. */
struct policy_level {
	uint64_t bytes;
	uint32_t ppm;
};

struct policy {
	char name[PROFILE_NAME_MAX];
	int line; /* of its [policy NAME] header */
	enum policy_on on;
	bool on_given;
	/* psi */
	char psi_file[PATH_MAX]; /* default /proc/pressure/memory */
	bool psi_full, psi_given;
	uint64_t psi_stall_us, psi_window_us;
	uint64_t min_available; /* psi: act only while MemAvailable is below this (0: always) */
	/* cgroup */
	char cgroup[PATH_MAX]; /* "" (auto): each covered process's own memory cgroup */
	struct policy_level high, low;
	bool high_given, low_given;
	/* free / idle */
	uint64_t above;  /* free: free resident bytes */
	uint64_t for_ms; /* free / idle: how long */
	/* which processes */
	char profile[PROFILE_NAME_MAX]; /* "": any */
	bool scope_all;                 /* pressure: every process, not only the cgroup's */
	/* the ladder */
	enum policy_rung rungs[RUNG_MAX];
	int nrungs;
	int64_t decay_ms; /* the decay rung's value */
	uint64_t hold_ms; /* ... held this long, then reverted by the process itself */
	uint64_t goal;    /* release this much (0: psi all reclaimable; cgroup: down to low) */
	uint64_t min_interval_ms;
	uint32_t cpu_budget_ppm; /* of one core, for the commands' time; 0: no budget */
	bool dry_run;
};

struct policy_conf {
	struct profile *profiles;
	int nprofiles;
	struct policy *policies;
	int npolicies;
	bool dry_run;               /* [daemon] policy_dry_run: every policy only logs */
	uint64_t check_interval_ms; /* free/idle policies: how often processes are looked at */
};

/* ---- policy_conf.c --------------------------------------------------------------------- */
struct policy_conf *policy_conf_new(void);
void policy_conf_free(struct policy_conf *pc);
/* A section header's contents ("profile redis", "policy oom-guard"): begin that section.
 * 0, or -1 with a message (unknown section type, duplicate name). */
int policy_conf_section(struct policy_conf *pc, const char *section, int line, char *err,
                        size_t errlen);
/* One key of the current [profile]/[policy] section. 0, or -1 with a message. */
int policy_conf_key(struct policy_conf *pc, const char *section, const char *key, const char *value,
                    char *err, size_t errlen);
/* The section just ended: check it is complete and consistent (a policy with no action,
 * low above high, a cgroup that does not exist...). 0, or -1 with a message. */
int policy_conf_end_section(struct policy_conf *pc, const char *section, char *err, size_t errlen);
const char *policy_on_name(enum policy_on on);
const char *policy_rung_name(enum policy_rung r);
/* Resolve a level against a limit (UINT64_MAX: none -> 0 for shares). */
uint64_t policy_level_bytes(const struct policy_level *l, uint64_t limit);

/* ---- policy.c ---------------------------------------------------------------------------- */
/* Start with a configuration (taken over; NULL: none). 0, or -1. */
int policy_init(struct ctld *d, struct policy_conf *pc);
/* A new configuration (SIGHUP): watchers are rebuilt, profiles re-matched and applied
 * (never over a value set live since). pc is taken over; the old one is freed. */
void policy_reconfigure(struct ctld *d, struct policy_conf *pc);
void policy_shutdown(struct ctld *d);
/* discover.c: a process was found (apply its profile), or is gone. */
void policy_proc_added(struct ctld *d, struct proc *p);
void policy_proc_removed(struct ctld *d, struct proc *p);
/* A set finished on p (commands.c), or p was found: look at its holds, so that the
 * revert of each is audited when its hold expires. */
void policy_holds_check(struct ctld *d, struct proc *p);
/* The profile of a process (NULL: none), for ps, stats and /metrics. */
const char *policy_proc_profile(const struct proc *p);
/* The daemon's policy families for /metrics: profile applications and their delay from
 * exec, per policy events, runs, deferrals, bytes and the time from event to enough memory back. */
struct evbuffer;
void policy_write_metrics(struct ctld *d, struct evbuffer *b);
/* The PolicyReply of `allocctl profiles/policies` for a client of this uid (the pids it
 * may see), allocated from pl. 0, or -1 when out of memory. */
struct pool;
struct Ctl__PolicyReply;
int policy_reply(struct ctld *d, uid_t uid, struct pool *pl, struct Ctl__PolicyReply *r);
/* The bytes flush, release and trim would give back now, from a snapshot: the memory
 * figure "reclaimable" (la_memory_of). */
uint64_t policy_reclaimable(const struct proc_snap *s);
/* What a time policy (on = free, on = idle) counts: reclaimable less the pages the process
 * populated for a predicted burst (burst_prepared_bytes, liballoc's burst preparation). */
uint64_t policy_time_reclaimable(const struct proc_snap *s);

/* ---- decisions (pure: policy.c acts on them, tests/ctld/policydecide.c checks each knob) -- */
enum policy_verdict {
	POLICY_NONE,    /* nothing to do */
	POLICY_ACT,     /* start a ladder run */
	POLICY_DEFER,   /* would act, but within min_interval or a run: looked at again after */
	POLICY_REARMED, /* cgroup usage under low: the next crossing of high acts */
};
/* A cgroup policy's hysteresis over one cgroup. */
struct policy_cg_state {
	bool armed;           /* usage went under low since the last run (initially true) */
	int band;             /* policy_cg_band of the usage the last run acted on */
	uint64_t last_run_ns; /* CLOCK_MONOTONIC start of the last run that gave memory back
	                       * (0: none) */
};
/* Between high and the limit, usage climbs through bands: 0 under high, 1 from high,
 * then 2, 3 and 4 from a quarter, a half and three quarters of the way from high to the
 * limit. Their lower edges are watched as thresholds besides high and low. */
#define POLICY_CG_BANDS 4
int policy_cg_band(const struct policy *def, uint64_t usage, uint64_t limit);
/* The thresholds a cgroup policy watches: high, low and the bands' edges above high
 * (0: none, no limit). */
void policy_cg_thresholds(const struct policy *def, uint64_t limit,
                          uint64_t th[POLICY_CG_BANDS + 1]);
/* Usage against the policy's high/low of limit at now (recheck: the min_interval timer's
 * look while usage stayed high, which needs no re-arming); running: a run is out. Above
 * high, a disarmed policy acts again when usage climbed to a higher band than the one its
 * last run acted on (pressure growing past the point where it acted), at once: min_interval
 * defers the other verdicts, not a climb. A climb while a run is out is DEFER: one run at a
 * time, the caller looks again the moment it ends. ACT disarms st and records the band; the caller records last_run_ns when the run gave memory back (a run
 * that found nothing to give re-arms and does not start the interval). */
enum policy_verdict policy_cg_decide(const struct policy *def, struct policy_cg_state *st,
                                     uint64_t usage, uint64_t limit, uint64_t now, bool recheck,
                                     bool running);
/* How long until min_interval since a run that began at last_run_ns (0: none) is over at
 * now: 0 when it is. The one clock of every deferral: a cgroup crossing and a PSI event
 * that come within it are looked at again when it ends. */
uint64_t policy_interval_wait(const struct policy *def, uint64_t last_run_ns, uint64_t now);
/* The limit a cgroup policy's shares and bands are of: the limit (v1), memory.max (v2),
 * else memory.high (v2 without a max). */
struct cg_memory;
uint64_t policy_cg_limit(const struct cg_memory *m);
/* cgroup v2 signals usage only through memory.events, which the kernel changes when a
 * charge goes over memory.high (a 'high' event each time a task is throttled, at most
 * every 10 ms: while usage climbs there, each change brings a fresh memory.current, so a
 * climb to a higher band acts as on v1) or hits memory.max; a PSI trigger on
 * memory.pressure re-reads memory.current too, but reports stalls, which come near a limit.
 * The usage from which a v2 cgroup gives events (0: v1, whose thresholds are the policy's
 * own); when it is above the policy's high, the range between is blind. */
uint64_t policy_cg_v2_signal_from(const struct cg_memory *m);
/* A PSI event at now, or (recheck) the look when min_interval or the run it waited for
 * ended. ACT (with *goal: bytes to release, UINT64_MAX: all reclaimable); NONE
 * (MemAvailable avail is not under min_available: a pending event is dropped then, memory
 * is no longer short); DEFER (a run is out, or the last began less than min_interval ago):
 * the event is remembered in *pending_ns (the first such event's time) and acted on at the
 * recheck, once for every event deferred. A stall the kernel reported is a real event,
 * not a level that can be read again: a short stall that fired once within the interval
 * is acted on when the interval ends (unless min_available says memory is back). */
enum policy_verdict policy_psi_decide(const struct policy *def, uint64_t last_run_ns,
                                      uint64_t *pending_ns, bool running, uint64_t now,
                                      uint64_t avail, bool recheck, uint64_t *goal);
/* Does a run over cgroup dir (NULL: not a cgroup's run) cover a process whose memory
 * cgroup is proc_cg (NULL: unknown)? scope = all: every process. */
bool policy_cg_covers(const struct policy *def, const char *proc_cg, const char *dir);
/* The CPU budget (cpu_budget: a share of one core for the commands' time; a token bucket
 * holding a second's worth, 50 ms at least, full at start). */
struct policy_budget {
	double tokens_ns;
	uint64_t at_ns; /* 0: not started */
};
/* 0 when a step may go at now, else how long to wait (ns). */
uint64_t policy_budget_wait(const struct policy *def, struct policy_budget *b, uint64_t now);
void policy_budget_spend(const struct policy *def, struct policy_budget *b, uint64_t ns);

#endif
