/* render.h — how allocctl shows daemon replies: human tables and lines, or the --json
 * shapes documented in allocctl(1). Everything writes to a FILE the caller gives, reads
 * only the reply structs and the options, and keeps no state (so tests can render into a
 * memory stream). */
#ifndef ALLOCCTL_RENDER_H
#define ALLOCCTL_RENDER_H

#include <stdbool.h>
#include <stddef.h>

/* The version of the --json documents' shapes (allocctl(1), JSON OUTPUT;
 * cli/allocctl.schema.json). Every document carries it as "schema_version" (its first key).
 * Within a version keys are only added; a key removed, or changed in meaning or type, makes
 * a new version. */
#define ALLOCCTL_JSON_SCHEMA_VERSION 1
#include <stdint.h>
#include <stdio.h>

#include "ctl.pb-c.h"

struct render_opts {
	bool json;         /* --json */
	bool raw;          /* --bytes: plain numbers instead of human units */
	bool show_exe;     /* command lines name the executable (for --exe / --all targets) */
	bool show_profile; /* the process table has the PROFILE column (ps) */
	uint64_t now_ns;   /* CLOCK_REALTIME, for uptimes */
	/* a column of the process table before NOTES (top: the RSS trend): its title and
	 * one text per row (UTF-8; aligned by characters) */
	const char *extra_title;
	const char *const *extra;
};

/* The basename of an executable path ("/usr/bin/redis-server" -> "redis-server"). */
const char *render_exe_name(const char *exe);
/* "ERR_NO_PROCESS" etc. (the ctl.proto enum names), "UNKNOWN" if out of range. */
const char *render_code_name(int code);
/* The name a process was run as (its binary's basename when the daemon sent none). */
const char *render_proc_name(const Ctl__ProcessInfo *p);
/* "UID", or "UID/OWNER" when the segment belongs to another uid than the process's. */
char *render_uid(char *buf, size_t n, const Ctl__ProcessInfo *p);

/* ps: one line per process (sorted by pid), or {"processes":[...]}. */
void render_ps(FILE *f, Ctl__ProcessInfo *const *procs, size_t n, const struct render_opts *o);
/* The process table alone (header + rows, at most max_rows rows; 0: all), as in ps/top. */
void render_process_table(FILE *f, Ctl__ProcessInfo *const *procs, size_t n, size_t max_rows,
                          const struct render_opts *o);
/* stats: grouped human report, or the JSON object. */
void render_stats(FILE *f, const Ctl__StatsReply *s, const struct render_opts *o);
/* get: a tunable table per process. */
void render_get(FILE *f, Ctl__CommandResult *const *res, size_t n, const struct render_opts *o);
/* set: "set PID: NAME = NEW (was OLD), ... in T"; before (may be NULL) holds the values
 * read just before the change, for single-process targets. */
void render_set(FILE *f, Ctl__CommandResult *const *res, size_t n, const Ctl__CommandResult *before,
                const struct render_opts *o);
/* trim/release/flush: "VERB PID: released X in T (k madvise, m munmap)". */
void render_action(FILE *f, const char *verb, Ctl__CommandResult *const *res, size_t n,
                   const struct render_opts *o);
/* JSON shape shared by get/set/trim/release/flush: {"command":verb,"results":[...]}. */
void render_results_json(FILE *f, const char *verb, Ctl__CommandResult *const *res, size_t n);
/* log: the audit trail, one line per event (time, seq, who, what, on which process, the
 * change or what came back, the result), or {"events":[...]} (JSON). */
void render_log(FILE *f, Ctl__AuditEvent *const *ev, size_t n, const struct render_opts *o);
/* profiles: each [profile] with its matches, the tunables it sets and the processes it
 * applies to; policies: each [policy], what it watches and what it did. */
void render_profiles(FILE *f, const Ctl__PolicyReply *r, const struct render_opts *o);
void render_policies(FILE *f, const Ctl__PolicyReply *r, const struct render_opts *o);
/* version: client and (if d is not NULL) daemon versions. */
void render_version(FILE *f, const Ctl__VersionReply *d, const char *socket,
                    const struct render_opts *o);

/* One-line explanation of a failed request or per-process result (no trailing newline):
 * what was wrong and what would be valid. pid is 0 when the request named no process;
 * uid is the caller's uid (for permission messages). */
char *render_error(char *buf, size_t n, int code, const char *message, int32_t pid, unsigned uid);

#endif
