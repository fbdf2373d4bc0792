/* ctld.h — the daemon's shared state and the interfaces between its modules.
 * Everything here is owned by the one event-loop thread: no locks, no atomics (the only
 * shared memory is the segments, handled by segment.c). Processes (struct proc) are
 * reference-counted because an in-flight command may outlive their discovery entry. */
#ifndef CTLD_CTLD_H
#define CTLD_CTLD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/event.h>

#include "audit.h"
#include "config.h"
#include "policy.h"
#include "procfs.h"
#include "segment.h"

#define CTLD_VERSION LA_VERSION

/* Event priorities: I/O and timers first; long work (discovery, history sampling, scrapes,
 * streamed lists) runs in slices of a few milliseconds at the lowest, one slice per loop
 * turn (loop.c configures the event base so), so a request never waits behind it for long. */
#define CTLD_NPRIO      3
#define CTLD_PRIO_SLICE 2

#ifndef TAILQ_FOREACH_SAFE /* glibc's sys/queue.h lacks it */
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)                                     \
	for ((var) = TAILQ_FIRST(head); (var) && ((tvar) = TAILQ_NEXT(var, field), 1); \
	     (var) = (tvar))
#endif

struct ctld;

/* A run directory being watched. */
struct rundir {
	TAILQ_ENTRY(rundir) link;
	char path[PATH_MAX];
	uid_t uid; /* owner: every segment inside must be owned by it */
	int fd;    /* the directory, opened O_NOFOLLOW and checked: every file operation
	                    inside goes through it; -1 while missing or refused */
	dev_t dev; /* identity of fd (a path now naming another directory is reopened) */
	ino_t ino;
	int wd;          /* inotify watch of fd, -1 if none */
	int parent_wd;   /* watch of the parent while the directory is missing, -1 if none */
	bool is_default; /* liballoc-<uid> under shm_root, or <uid> under uid_dirs */
	bool seen;       /* mark for the rescan sweep */
	bool refused;    /* unsafe (logged once) */
	bool squatted;   /* a default directory that is not its uid's own */
	bool unwatched;  /* inotify refused (logged once; rescans cover it) */
	bool recheck;    /* an event of this read named it: checked once after the read */
	char why[160];   /* the last reason it was refused (logged again when it changes) */
};

/* What a process's identity read from /proc kept: its strings packed in one allocation
 * (buf; every pointer is "" until read) instead of a struct procfs_info, whose fixed arrays
 * made 1.3 KB a process, 6 MB at 5,000 processes. */
struct proc_id {
	uint32_t have; /* PROCFS_* read */
	uid_t uid;     /* real uid (when have & PROCFS_STATUS) */
	const char *exe, *comm, *name, *cmdline;
	char *buf;
};

/* A discovered, validated segment and the process it describes. */
struct proc {
	TAILQ_ENTRY(proc) link;
	struct proc *hnext; /* pid hash chain (its pid here: seg.hdr.pid) */
	struct proc *nnext; /* file name hash chain */
	struct rundir *dir; /* where its file is (valid while !gone) */
	char name[48];      /* its file's name in dir */
	uint64_t seen_pass; /* last rescan pass that saw its file */
	struct seg seg;
	/* identity from /proc (never from the segment, which its owner writes): exe, the name
	 * it was run as, command line, real uid; read again when older than a quarter of the process's age (1-30 s) or
	 * when /proc/<pid>/stat shows another comm, and id_retry_ms after a read that missed a
	 * part (10 ms, doubling) */
	struct proc_id id;
	uint64_t id_ns;       /* CLOCK_MONOTONIC of the last identity read */
	uint32_t id_retry_ms; /* 0: the last read had every part */
	/* its figures as last read (proc_snapshot): the header's live fields in seg.hdr, the
	 * totals in last_total, RSS and threads from /proc/<pid>/stat; a list or a scrape takes
	 * them while younger than PROC_RECENT_NS instead of reading again */
	uint64_t fig_ns;   /* CLOCK_MONOTONIC of that read (0: none to take) */
	uint64_t alive_ns; /* of the last stat read that found it (pid and start time) */
	uint64_t rss_bytes;
	uint32_t threads;
	int refs;               /* the list holds one; each command target holds one */
	bool gone;              /* removed from the list (exited or stale) */
	bool busy;              /* a command of ours holds its mailbox */
	struct pol_proc *pol;   /* policy.c: its profile, cgroup, time-policy state */
	struct hist_proc *hist; /* its history (timeline.c), NULL until the first sample */
	uint64_t hist_tick;     /* the sample tick it was last swept in */
	/* a process whose seqlock stays odd: listed as unreadable with its last good totals,
	 * read again after backoff_ms (doubling up to 30 s) */
	bool unreadable;
	uint32_t backoff_ms;
	uint64_t retry_ns;
	uint64_t unreadable_reads;
	struct la_counters last_total;
	char cgroup[256]; /* its memory cgroup (path in the hierarchy; "" unknown), with id */
};

/* A file that was refused, remembered so it is logged once until it changes. */
struct rejected {
	TAILQ_ENTRY(rejected) link;
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns;
	bool seen;
	bool hidden; /* its lock is held by a process not found from here (SEG_E_HIDDEN): never
	                removed while held; only the lock is probed again */
};

TAILQ_HEAD(proc_list, proc);
TAILQ_HEAD(rundir_list, rundir);
TAILQ_HEAD(rejected_list, rejected);
TAILQ_HEAD(conn_list, conn);
TAILQ_HEAD(job_list, job);

struct ctld_stats {
	uint64_t segments_rejected, segments_stale_removed, requests, requests_denied,
	        requests_malformed, commands, command_timeouts, connections_refused, scrapes,
	        segments_over_cap, unreadable_reads, http_requests, http_refused, http_timeouts,
	        rescans;
	/* the loop-lag probe (loop.c): how late it fired (wall) and the loop's CPU time from
	 * arming it to its firing, the longest of each; and how many times it fired */
	uint64_t loop_lag_max_ns, loop_busy_max_ns, loop_lag_probes;
};

struct ctld {
	struct event_base *base;
	struct config cfg;
	const char *config_file;
	const struct config_override *overrides;
	int noverrides;
	uint32_t token; /* our mailbox lock token: the daemon's pid */
	uint64_t next_seq;
	struct ctld_stats st;
	struct event *lag_probe; /* loop.c: armed while sliced work is pending */
	uint64_t lag_due_ns, lag_cpu_ns;

	/* discover.c */
	struct proc_list procs;
	int nprocs;
	struct rundir_list dirs;
	struct rejected_list rejected;
	int inotify_fd;
	int shm_root_wd;
	struct event *inotify_ev, *rescan_ev;

	/* control.c */
	struct evconnlistener *listener;
	struct conn_list conns;
	int nconns;
	char socket_path[108];

	/* commands.c */
	struct job_list jobs;
	struct event *job_timer;

	/* http.c */
	char http_addr[160];

	/* audit.c */
	struct audit audit;
	/* timeline.c: history and events (NULL when history is off) */
	struct timeline *tl;

	/* policy.c */
	struct policy_engine *policy;
};

/* loop.c: the event base (precise timers, CTLD_NPRIO priorities, one slice per turn); the
 * next slice of a job (re-activates ev, at CTLD_PRIO_SLICE); and the loop-lag probe, armed
 * by slice_again and by work that starts a job: a highest-priority timer 1 ms ahead whose
 * lateness is how long the loop went without polling while work was pending
 * (liballoc_ctld_loop_lag_max_seconds, and the CPU time of it: ..._loop_busy_max_seconds). */
struct event_base *loop_base_new(void);
int loop_probe_init(struct ctld *d);
void loop_probe_reset(struct ctld *d); /* forget what was measured so far */
void loop_probe_free(struct ctld *d);
void slice_again(struct ctld *d, struct event *ev);
void loop_lag_probe(struct ctld *d);

/* discover.c */
int discover_init(struct ctld *d);
void discover_reconfigure(struct ctld *d); /* run dirs or intervals changed */
void discover_rescan(struct ctld *d);
bool discover_busy(struct ctld *d); /* names still queued for examination */
int discover_segment_cap(void);     /* max_segments_per_uid in force */
void discover_shutdown(struct ctld *d);
struct proc *discover_find(struct ctld *d, pid_t pid);
void proc_ref(struct proc *p);
void proc_unref(struct proc *p);

/* A consistent copy of one process's statistics. */
struct proc_snap {
	struct proc *p;
	bool ok;
	bool unreadable; /* its seqlock did not settle (total: the last good figures) */
	struct la_counters total;
	uint32_t narenas;
	struct seg_block *arenas; /* malloc'd, narenas entries */
	struct la_shm_tunable tun[LA_NTUNABLES];
	uint32_t ntun;
	uint64_t rss_bytes;
	uint32_t threads;                 /* the process's threads (/proc) */
	struct la_memory mem;             /* la_memory_of(total) */
	uint64_t non_allocator_rss_bytes; /* rss_bytes - mem.resident, at least 0 */
};
/* What proc_snapshot reads besides the totals, RSS and threads. */
enum {
	SNAP_ARENAS = 1u << 0,   /* every arena's block (the totals are then their sum) */
	SNAP_TUNABLES = 1u << 1, /* the tunables' values */
};
/* How old the figures of a list and a scrape may be: the history sampler reads every
 * process every history_sample_ms (1 s by default), so they seldom read anything. */
#define PROC_RECENT_NS 1000000000ull
/* Refresh the header and read the totals, RSS and threads, plus what `what` asks; figures
 * read less than max_age_ns ago are taken as they are (0: read now; never with
 * SNAP_ARENAS). False on error, logged; a segment whose layout changed is dropped and
 * rediscovered. */
bool proc_snapshot(struct ctld *d, struct proc *p, struct proc_snap *s, unsigned what,
                   uint64_t max_age_ns);
void proc_snap_free(struct proc_snap *s);
/* Re-read the identity from /proc when older than a quarter of the process's age, 1-30 s (or force): false when the
 * process is gone. */
bool proc_identity(struct proc *p, bool force);
/* The label and display name of a process: the name it was run as ("?" if unknown). */
const char *proc_name(const struct proc *p);
/* Its real uid as the kernel knows it (the segment's owner if /proc could not be read). */
uid_t proc_uid(const struct proc *p);
/* Its binary as the kernel knows it (/proc/<pid>/exe; "?" if unknown). */
const char *proc_exe(const struct proc *p);
/* Does NAME designate it (procfs_name_matches on what was read)? */
bool proc_name_matches(const struct proc *p, const char *name);

/* control.c */
int control_init(struct ctld *d);
void control_shutdown(struct ctld *d);
struct conn;
uid_t conn_uid(const struct conn *c);
pid_t conn_pid(const struct conn *c);
/* Called by commands.c when a job finishes: send the packed reply and resume reading. */
struct Ctl__Reply;
void conn_send_reply(struct conn *c, const struct Ctl__Reply *r);
void conn_job_done(struct conn *c);
/* Replies the client has not read fill its output cap (no more requests are taken). */
bool conn_output_full(const struct conn *c);
/* Bytes of replies the client has not read yet. */
size_t conn_output_len(const struct conn *c);

/* requests.c: handle one decoded request; returns true if a job now owns the reply. */
struct Ctl__Envelope;
bool requests_handle(struct ctld *d, struct conn *c, const struct Ctl__Envelope *env);
/* From control.c: the connection's output drained (a streamed list may go on); the
 * connection is being freed (its stream ends). */
void requests_conn_drained(struct ctld *d, struct conn *c);
void requests_conn_closed(struct ctld *d, struct conn *c);
bool may_see(uid_t client, const struct proc *p);

/* commands.c */
enum job_kind { JOB_GET, JOB_SET, JOB_TRIM, JOB_RELEASE, JOB_FLUSH };
struct job_step {
	struct seg_cmd cmd;
	int tunable; /* index into tunable_table for get/set, else -1 */
};
/* How a command ended on one process (given to a job's done callback). */
struct job_outcome {
	struct proc *p;
	int code; /* Ctl__ErrorCode */
	const char *message;
	struct seg_result sum; /* bytes released and system calls, summed over the steps */
	int nvalues;           /* get/set: steps that answered */
	const int64_t *values; /* value_out per answered step */
};
/* Who starts a job that no client waits for (profiles, policies), and what to call when
 * every target has answered. Each change and command is recorded in the audit trail with
 * this trigger and actor. */
struct job_origin {
	enum audit_trigger trigger;
	char actor[AUDIT_ACTOR_MAX];
	void (*done)(struct ctld *d, const struct job_outcome *out, int n, void *arg);
	void *arg;
};
/* Start a command on every target (references are taken); the reply goes to conn (which
 * may disconnect meanwhile). steps are copied. */
void commands_start(struct ctld *d, struct conn *c, uint64_t req_id, enum job_kind kind,
                    struct proc **targets, int ntargets, const struct job_step *steps, int nsteps);
/* The same for the daemon's own jobs: no reply; origin->done (if any) gets the outcomes,
 * possibly before commands_run returns (every target refused at once). Returns -1
 * (nothing started, done not called) when out of memory. */
int commands_run(struct ctld *d, const struct job_origin *origin, enum job_kind kind,
                 struct proc **targets, int ntargets, const struct job_step *steps, int nsteps);
void commands_conn_closed(struct ctld *d, struct conn *c);
/* A tunable held for a limited time: expires_in_ms and revert_value of the reply. */
struct Ctl__Tunable;
void tunable_add_hold(struct Ctl__Tunable *tu, const struct la_shm_hold *h, uint64_t now);
void commands_shutdown(struct ctld *d);

/* timeline.c: history on the loop, and the hooks that put events on it */
int timeline_init(struct ctld *d);
void timeline_reconfigure(struct ctld *d);
void timeline_shutdown(struct ctld *d);
/* discovery forgets p (exited, stale, refused): its history closes with an exit event */
void timeline_proc_gone(struct ctld *d, struct proc *p, const char *why);
/* liballoc_ctld_history_* families (memory, samples, the time sampling took) on /metrics */
struct evbuffer;
void timeline_write_metrics(struct ctld *d, struct evbuffer *b);
/* the control protocol's HistoryRequest (replies at once; returns false) */
bool timeline_request(struct ctld *d, struct conn *c, const struct Ctl__Envelope *env);

/* dashboard.c: /, the page's assets, /api/history and /api/events; false if path is not
 * one of them */
struct http_req;
bool dashboard_http(struct ctld *d, struct http_req *req, const char *path);

#endif
