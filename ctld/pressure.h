/* pressure.h — memory-pressure watchers on the daemon's libevent loop, all event-driven (no
 * polling, no wake-up without a kernel event):
 *   - PSI triggers (/proc/pressure/memory for the host, <cgroup v2>/memory.pressure): the
 *     trigger "some|full STALL_US WINDOW_US" is written to the file, whose descriptor then
 *     reports POLLPRI when the stall threshold is exceeded within a window (at most once per
 *     window). libevent has no POLLPRI, so each PSI descriptor sits in an epoll set of its
 *     own (EPOLLPRI), and that epoll descriptor is what the loop watches (readable when
 *     the PSI file has an event).
 *   - cgroup v1: memory.usage_in_bytes thresholds through cgroup.event_control, one
 *     eventfd per threshold (the kernel signals it whenever usage crosses the threshold,
 *     upwards or downwards); the watcher reads usage and the limit on each signal.
 *   - cgroup v2: inotify on memory.events (the kernel modifies it when a high, max or oom
 *     event is counted) plus a PSI trigger on the cgroup's memory.pressure when one is
 *     given; memory.current against memory.high/memory.max on each event.
 * A watcher reports what it saw through one callback; what to do about it (hysteresis,
 * intervals, the ladder) is policy.c's business. */
#ifndef CTLD_PRESSURE_H
#define CTLD_PRESSURE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

#define PRESSURE_HOST_PSI "/proc/pressure/memory"
#define CGROUP_V1_MEMORY  "/sys/fs/cgroup/memory"
#define CGROUP_V2_ROOT    "/sys/fs/cgroup"

/* A cgroup's memory figures. */
struct cg_memory {
	int version;    /* 1 or 2 */
	uint64_t usage; /* v1 memory.usage_in_bytes, v2 memory.current */
	uint64_t limit; /* v1 memory.limit_in_bytes, v2 memory.max; UINT64_MAX: none */
	uint64_t high;  /* v2 memory.high; UINT64_MAX: none (v1: the limit) */
	/* v2 memory.events (v1: oom_kill of memory.oom_control; the others 0) */
	uint64_t ev_high, ev_max, ev_oom, ev_oom_kill;
};

/* What a watcher saw. */
enum pressure_source {
	PRESSURE_PSI,    /* a PSI trigger fired */
	PRESSURE_USAGE,  /* v1: usage crossed one of the thresholds (either way) */
	PRESSURE_EVENTS, /* v2: memory.events changed (a high/max/oom event was counted) */
	PRESSURE_GONE,   /* the cgroup or file went away: the watcher is dead */
};

struct pressure_event {
	enum pressure_source source;
	uint64_t time_ns;     /* CLOCK_MONOTONIC when the daemon saw it */
	bool have_memory;     /* cgroup watchers: mem is filled in */
	struct cg_memory mem; /* read right after the event */
	char why[160]; /* "psi some 150ms/1s on /proc/pressure/memory", "usage 800.0M >= ..." */
};

struct pressure_watch;
typedef void (*pressure_cb)(struct pressure_watch *w, const struct pressure_event *ev, void *arg);

/* A PSI trigger on path (a pressure file: the host's or a v2 cgroup's memory.pressure).
 * full: "full" rather than "some"; stall_us within window_us (the kernel's bounds: window
 * 500 ms .. 10 s, stall <= window). NULL with the reason in err (e.g. no PSI support). */
struct pressure_watch *pressure_watch_psi(struct event_base *base, const char *path, bool full,
                                          uint64_t stall_us, uint64_t window_us, pressure_cb cb,
                                          void *arg, char *err, size_t errlen);

/* A cgroup's memory, v1 or v2 as dir shows (memory.usage_in_bytes or memory.current).
 * v1: thresholds at each of the (non-zero) byte values given in thresholds[]. v2: events
 * of memory.events, and a PSI trigger on dir/memory.pressure when psi_stall_us is set
 * ("full" or "some" as psi_full says; without it, or where it cannot be set, only
 * memory.events: the watcher is returned and err says why). NULL with err on failure; on
 * success err is "" or that warning. */
struct pressure_watch *pressure_watch_cgroup(struct event_base *base, const char *dir,
                                             const uint64_t *thresholds, int nthresholds,
                                             bool psi_full, uint64_t psi_stall_us,
                                             uint64_t psi_window_us, pressure_cb cb, void *arg,
                                             char *err, size_t errlen);

void pressure_watch_free(struct pressure_watch *w);
const char *pressure_watch_path(const struct pressure_watch *w);
/* Events seen by this watcher (for the policy listing and /metrics). */
uint64_t pressure_watch_events(const struct pressure_watch *w);

/* Read a cgroup directory's memory figures; 0, or -1 with errno (ENOENT: not a memory
 * cgroup directory of either version). */
int cgroup_memory_read(const char *dir, struct cg_memory *m);
/* The directory of pid's memory cgroup (v1 memory controller, else the v2 unified path
 * when that hierarchy has the memory controller), e.g.
 * "/sys/fs/cgroup/memory/system.slice/redis.service"; rel receives the path inside the
 * hierarchy ("/system.slice/redis.service") when not NULL. 0, or -1 with errno. */
int cgroup_of_pid(int pid, char *dir, size_t dirlen, char *rel, size_t rellen);
/* The same from the text of /proc/<pid>/cgroup (for the tests). v1_root and v2_root are
 * where the hierarchies are mounted; a v2 path is used only when v2_has_memory. */
int cgroup_parse(const char *text, const char *v1_root, const char *v2_root, bool v2_has_memory,
                 char *dir, size_t dirlen, char *rel, size_t rellen);
/* The memory cgroup directory for a path inside the hierarchy ("/system.slice/x"). */
int cgroup_dir_of(const char *rel, char *dir, size_t dirlen);
/* /proc/meminfo's MemAvailable in bytes, or UINT64_MAX when unreadable. */
uint64_t mem_available(void);

#endif
