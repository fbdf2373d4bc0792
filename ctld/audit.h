/* audit.h — the audit trail: every change and every command allocctld makes or relays,
 * whether an operator asked (peer credentials from SO_PEERCRED) or a profile, a policy or
 * an expiring change did it (its name), is recorded once: as one structured log line (or
 * journald fields when the daemon runs under systemd), in a bounded in-memory ring that
 * `allocctl log` and other modules read, and in the action/released-bytes counters of
 * /metrics. Owned by the event-loop thread (no locks).
 *
 * Readers of the ring (allocctl log, the history timeline) iterate by sequence number:
 * audit_next(a, after) returns the oldest event with seq > after still in the ring; events
 * that were overwritten meanwhile are simply skipped (audit_first_seq says where the ring
 * starts). Listeners registered with audit_listen see each event as it is recorded. */
#ifndef CTLD_AUDIT_H
#define CTLD_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "liballoc_shm.h"

/* What caused an action ("trigger" label of liballoc_ctld_actions_total). */
#define AUDIT_TRIGGERS(X)                                                       \
	X(operator, "a client of the control socket (allocctl)")                \
	X(profile, "a profile applied to a process it matches")                 \
	X(pressure, "a memory-pressure policy (PSI, cgroup usage or events)")   \
	X(time, "a time-based policy (free memory held, or idle, for a while)") \
	X(expiry, "a change made for a limited time reverted by the process")   \
	X(config, "the configuration file (start, SIGHUP)")

/* What was done ("action" label). set covers every tunable change, held or not. */
#define AUDIT_ACTIONS(X)                                          \
	X(set, "change a tunable")                                \
	X(trim, "return free memory to the system")               \
	X(release, "unmap idle heaps")                            \
	X(flush, "return thread caches to their arenas")          \
	X(revert, "a held tunable went back to its value before") \
	X(reload, "configuration loaded or reloaded")

/* How it ended ("result" label). */
#define AUDIT_RESULTS(X)                                                      \
	X(ok, "done")                                                         \
	X(failed, "refused by the process, timed out, or the process exited") \
	X(denied, "the client may not act on the process")                    \
	X(dry_run, "a policy in dry-run mode: logged, not done")              \
	X(skipped, "not done: a value set live by an operator, or a CPU budget")

enum audit_trigger {
#define AUDIT_X_T(n, help) AUDIT_T_##n,
	AUDIT_TRIGGERS(AUDIT_X_T) AUDIT_NTRIGGERS
#undef AUDIT_X_T
};
enum audit_action {
#define AUDIT_X_A(n, help) AUDIT_A_##n,
	AUDIT_ACTIONS(AUDIT_X_A) AUDIT_NACTIONS
#undef AUDIT_X_A
};
enum audit_result {
#define AUDIT_X_R(n, help) AUDIT_R_##n,
	AUDIT_RESULTS(AUDIT_X_R) AUDIT_NRESULTS
#undef AUDIT_X_R
};

#define AUDIT_ACTOR_MAX   80 /* "profile " or "policy " and a name */
#define AUDIT_EXE_MAX     64
#define AUDIT_MESSAGE_MAX 200

struct audit_event {
	uint64_t seq;     /* 1, 2, ...: assigned by audit_record */
	uint64_t time_ns; /* CLOCK_REALTIME: assigned by audit_record */
	enum audit_trigger trigger;
	enum audit_action action;
	enum audit_result result;
	/* who: an operator ("uid 1000 pid 4242") or the profile/policy name */
	char actor[AUDIT_ACTOR_MAX];
	int64_t peer_uid; /* the operator's uid (SO_PEERCRED), -1 when not an operator */
	int32_t peer_pid; /* the operator's pid, 0 when not an operator */
	/* the target: one process, or none (pid 0: e.g. a reload) */
	int32_t pid;
	int64_t target_uid; /* owner of the target process, -1 when none */
	char exe[AUDIT_EXE_MAX];
	/* set/revert: the tunable with its value before and after */
	char name[LA_NAME_MAX];
	bool has_values;
	int64_t old_value, new_value;
	uint64_t hold_ms; /* set for a limited time: reverts after this long */
	uint64_t arg;     /* trim: the pad */
	/* the result */
	uint64_t bytes_released;
	uint64_t duration_ns;
	char message[AUDIT_MESSAGE_MAX];
};

typedef void (*audit_listener)(const struct audit_event *ev, void *arg);

#define AUDIT_MAX_LISTENERS 4
#define AUDIT_DEFAULT_RING  2048

struct audit {
	struct audit_event *ring;
	size_t cap;        /* events the ring holds */
	uint64_t next_seq; /* seq of the next event (first is 1) */
	uint64_t oldest;   /* seq of the oldest event held (next_seq when none) */
	uint64_t actions[AUDIT_NTRIGGERS][AUDIT_NACTIONS][AUDIT_NRESULTS];
	uint64_t released[AUDIT_NTRIGGERS];
	int journal; /* -1 auto (under systemd's journal), 0 off, 1 on */
	bool journal_active;
	struct {
		audit_listener fn;
		void *arg;
	} listeners[AUDIT_MAX_LISTENERS];
	int nlisteners;
};

const char *audit_trigger_name(enum audit_trigger t);
const char *audit_action_name(enum audit_action a);
const char *audit_result_name(enum audit_result r);

/* cap events in the ring (at least 1); journal: -1 auto, 0 off, 1 on. 0 or -1 on ENOMEM. */
int audit_init(struct audit *a, size_t cap, int journal);
/* Change the ring size or journal mode (config reload): the newest events are kept. */
int audit_configure(struct audit *a, size_t cap, int journal);
void audit_free(struct audit *a);

/* Record one event (seq and time are filled in): log line or journald entry, ring,
 * counters, listeners. Returns its seq. */
uint64_t audit_record(struct audit *a, struct audit_event *ev);

/* The oldest event in the ring with seq > after, or NULL. */
const struct audit_event *audit_next(const struct audit *a, uint64_t after);
/* seq of the oldest event still held (next_seq when empty). */
uint64_t audit_first_seq(const struct audit *a);
/* May a client of this uid read the event? Root: all; others: events about their own
 * processes and those they caused. */
bool audit_visible(const struct audit_event *ev, uid_t uid);

/* Be told about every event as it is recorded (history, tests). 0, or -1 when full. */
int audit_listen(struct audit *a, audit_listener fn, void *arg);
void audit_unlisten(struct audit *a, audit_listener fn, void *arg);

/* The event as one line of logfmt ("key=value ..."), for the log and tests. */
size_t audit_format(const struct audit_event *ev, char *buf, size_t len);

/* Fill actor/peer fields for an operator. */
void audit_set_operator(struct audit_event *ev, uid_t uid, pid_t pid);

/* liballoc_ctld_actions_total{trigger,action,result} (the combinations seen so far) and
 * liballoc_ctld_released_bytes_total{trigger} (every trigger), in Prometheus text. */
struct evbuffer;
void audit_write_metrics(const struct audit *a, struct evbuffer *b);

#endif
