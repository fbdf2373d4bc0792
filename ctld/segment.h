/* segment.h — the C reader API of a liballoc shared-memory segment (liballoc_shm.h).
 * Nothing read from a segment is trusted: the header is validated on open and re-checked
 * before every read; statistics are copied with pread() under their seqlocks (so a
 * truncated file can never fault the reader); only the mailbox page is mapped, read-write,
 * and accesses to it are guarded against SIGBUS. No libevent here: the CLI and fuzzers link it. */
#ifndef CTLD_SEGMENT_H
#define CTLD_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "liballoc_shm.h"

/* What a header may declare: the library's own limits (liballoc_shm.h), so a hostile
 * segment costs a reader no more than the largest one liballoc makes. */
#define SEG_MAX_SIZE     LA_SHM_SIZE_MAX /* bytes in one segment file */
#define SEG_MAX_COUNTERS LA_SHM_COUNTERS_MAX
#define SEG_MAX_TUNABLES LA_SHM_TUNABLES_MAX
#define SEG_MAX_CLASSES  LA_SHM_CLASSES_MAX
#define SEG_MAX_ARENAS   LA_SHM_ARENAS_MAX
/* Seqlock attempts before a read gives up (no sleeping: a writer holds a block for well
 * under a microsecond; one that stays odd is a hostile or stopped process, and the caller
 * backs off from it instead). */
#define SEG_READ_RETRIES 16
#define SEG_ANY_UID      ((uid_t)-1)

/* Reasons a segment is refused or an operation failed; seg_strerror() names them. */
#define SEG_ERRORS(X)                                         \
	X(OK, "ok")                                           \
	X(OPEN, "cannot open")                                \
	X(SYMLINK, "is a symbolic link")                      \
	X(NOTREG, "not a regular file")                       \
	X(OWNER, "wrong owner")                               \
	X(MODE, "mode is not 0600")                           \
	X(SIZE, "size invalid or changed")                    \
	X(MAGIC, "bad magic")                                 \
	X(VERSION, "unsupported ABI version")                 \
	X(HEADER, "bad header size")                          \
	X(NAME, "file name does not match the header")        \
	X(COUNTS, "counts out of bounds")                     \
	X(LAYOUT, "offset or length outside the file")        \
	X(IO, "read failed")                                  \
	X(CHANGED, "segment changed under the reader")        \
	X(TORN, "seqlock retries exhausted")                  \
	X(STALE, "owner process is gone")                     \
	X(HIDDEN, "process not found from this namespace")    \
	X(BUSY, "mailbox held by another client")             \
	X(TIMEOUT, "the process did not answer in time")      \
	X(RUNNING, "command still running after the timeout") \
	X(PROTOCOL, "mailbox protocol violation")             \
	X(EXECED, "its process lives on without its lock")

enum seg_error {
#define SEG_X_ENUM(name, text) SEG_E_##name,
	SEG_ERRORS(SEG_X_ENUM)
#undef SEG_X_ENUM
	        SEG_E_MAX
};

const char *seg_strerror(int err);
/* The header's control_state as a word: "off", "running", "failed" or "unknown". */
const char *seg_control_name(uint32_t state);

/* An open segment. Owned by one thread at a time. */
struct seg {
	int fd;    /* O_RDONLY, kept for pread/fstat/flock; -1 when closed */
	dev_t dev; /* identity of the file validated at open */
	ino_t ino; /* ... */
	uid_t uid; /* file owner (== header uid in the reader's user namespace) */
	/* Validated copy of the header (layout fields fixed), with one translation: once
	 * seg_liveness has found the process, hdr.pid is its pid in the reader's pid namespace
	 * (what /proc, kill and every reader of this struct use); the pid the process wrote
	 * is nspid. */
	struct la_shm_header hdr;
	pid_t nspid;           /* the header's pid: the process's own, in its pid namespace */
	uint64_t pidns;        /* that namespace's inode (hdr.pidns_ino; 0: the reader's own) */
	bool mapped;           /* hdr.pid is the reader's pid of the process */
	bool foreign_userns;   /* written in another user namespace: hdr.uid is checked through
	                        the process's uid_map, not against the file owner directly */
	bool look_again;       /* SEG_E_HIDDEN that may resolve in moments (seg_liveness) */
	struct la_mailbox *mb; /* shared mapping of the mailbox page, NULL until mapped */
	bool mb_broken;        /* the mailbox page faulted (file truncated): never use again */
	char why[192];         /* detail of the last error, for logs */
};

/* Validate a header copy against the file size it came from (pure; fuzzers call it).
 * Returns SEG_E_OK or the first reason it is refused, with details in why. */
int seg_validate_header(const struct la_shm_header *h, uint64_t file_size, char *why,
                        size_t whylen);

/* Open and validate path. expected_uid is the uid that must own it (SEG_ANY_UID: any uid,
 * still equal to the header's). On error s->fd is -1 and s->why explains. */
int seg_open(struct seg *s, const char *path, uid_t expected_uid);
/* The same, for path relative to the directory descriptor dfd (AT_FDCWD: as open). */
int seg_openat(struct seg *s, int dfd, const char *path, uid_t expected_uid);
void seg_close(struct seg *s);

/* Re-read the header and fstat the file: SEG_E_OK when the layout is still the validated
 * one (live fields of s->hdr such as arena_count, threads, heartbeat are refreshed). */
int seg_refresh(struct seg *s);

/* A counter block as read: index, threads and the counters both sides know. */
struct seg_block {
	uint32_t index;
	uint32_t threads;
	struct la_counters c;
};
/* arena -1: the process block; else 0 <= arena < hdr.arena_count. */
int seg_read_block(struct seg *s, int arena, struct seg_block *out);
/* The process block (when proc is not NULL) and arena blocks first..first+count-1 (into
 * arenas[0..count-1]), all under their seqlocks with three reads in all. */
int seg_read_blocks(struct seg *s, uint32_t first, uint32_t count, struct seg_block *proc,
                    struct seg_block *arenas);
/* Process total = process block + every arena block in use. */
int seg_read_totals(struct seg *s, struct la_counters *total);
/* Effective tunables (min(tunable_count, LA_NTUNABLES) entries); *n receives the count. */
int seg_read_tunables(struct seg *s, struct la_shm_tunable out[LA_NTUNABLES], uint32_t *n);
/* The holds of the tunables (liballoc_shm.h: la_shm_hold), under the same seqlock; all
 * zero (nothing held) for a writer without them. */
int seg_read_holds(struct seg *s, struct la_shm_hold out[LA_NTUNABLES], uint32_t *n);
/* Up to max size-class entries; *n receives how many were copied. */
int seg_read_classes(struct seg *s, struct la_shm_class *out, uint32_t max, uint32_t *n);

/* Liveness: SEG_E_OK when the owner lives; SEG_E_STALE only when no process holds the
 * file's lock (the one proof that the owner is gone: only then may the file be removed).
 * While the lock is held, the process is looked up in the reader's /proc: first by the
 * pid it wrote, then, for a process of another pid namespace (a container), by that
 * namespace and its NSpid (procfs_find_nspid), always with the start time it wrote; found,
 * hdr.pid becomes its pid here. SEG_E_HIDDEN when it is not found (a namespace this /proc
 * does not show, a pid that went while something still holds the lock): never removed;
 * look_again is set when a second look in a few tens of milliseconds may find it.
 * check_owner also requires the process to run as the segment's owner (SEG_E_OWNER
 * otherwise; for a writer in another user namespace, its uid_map must map the header's
 * uid to the file's owner): done once at discovery; a later change of identity shows as a
 * new start time. */
int seg_liveness(struct seg *s, bool check_owner);
/* Its first step alone: SEG_E_OK while a process holds the file's lock, SEG_E_STALE when
 * none does (for a process just seen alive in /proc with its start time). SEG_E_EXECED
 * when none does but the process that wrote it still runs (same pid and start time): it
 * exec'd (the lock's descriptor is close-on-exec; a preloaded new image renames its own
 * segment over this name) or closed the descriptor: the file is left to it, not removed. */
int seg_lock_held(struct seg *s);
/* /proc/<pid>/stat start time (field 22) and owner uid; 0 on success, -1 if gone. */
int seg_proc_identity(pid_t pid, uint64_t *start_time, uid_t *uid);

/* ---- the mailbox ------------------------------------------------------------------------ */
struct seg_cmd {
	uint32_t command; /* la_command_id */
	uint32_t flags;   /* LA_MB_* request flags */
	char name[LA_NAME_MAX];
	int64_t value;
	uint64_t arg;
};

struct seg_result {
	int32_t status; /* la_status */
	char reason[LA_REASON_MAX];
	int64_t value_out;
	uint32_t source; /* get/set: la_source of value_out */
	uint64_t bytes_released;
	uint64_t syscalls_mmap, syscalls_munmap, syscalls_madvise, syscalls_mprotect;
	uint64_t duration_ns;
};

/* Map the mailbox page read-write (opens the file O_RDWR once, checks it is the same file). */
int seg_map_mailbox(struct seg *s);
/* Take the mailbox lock with token (a pid), holding it at most hold_ns; an expired holder
 * is displaced. SEG_E_BUSY when another live client holds it. */
int seg_mb_lock(struct seg *s, uint32_t token, uint64_t hold_ns);
/* Holding the lock: write the request, set REQUESTED, wake the control thread.
 * SEG_E_BUSY while a previous command is still RUNNING (try again later). */
int seg_mb_submit(struct seg *s, const struct seg_cmd *c, uint64_t seq);
/* SEG_E_OK with *r filled when the request seq is DONE; SEG_E_TIMEOUT while pending. */
int seg_mb_poll(struct seg *s, uint64_t seq, struct seg_result *r);
/* Give up on a pending request: REQUESTED -> CANCELLED, so it never runs.
 * SEG_E_OK when cancelled (or already finished), SEG_E_RUNNING when it is executing. */
int seg_mb_cancel(struct seg *s);
void seg_mb_unlock(struct seg *s, uint32_t token);
/* Blocking round trip (lock, submit, wait with short sleeps, cancel on timeout, unlock). */
int seg_command(struct seg *s, const struct seg_cmd *c, struct seg_result *r, uint32_t token,
                int timeout_ms);

/* Install the SIGBUS guard for mailbox accesses (idempotent; the daemon calls it once). */
void seg_install_sigbus_guard(void);

uint64_t seg_now_ns(int clock);
/* Command name from its id ("trim"), NULL if unknown; status text from la_status. */
const char *seg_command_name(uint32_t id);
const char *seg_status_text(int32_t status);

#endif
