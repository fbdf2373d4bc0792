/* config.h — allocctld settings: defaults, then the config file (key = value), then the
 * command-line overrides, in that order, at start and again on SIGHUP. Plain values, no
 * allocation: a config can be copied and compared. */
#ifndef CTLD_CONFIG_H
#define CTLD_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFG_MAX_DIRS       32
#define CFG_MAX_OVERRIDES  64
#define CFG_DEFAULT_LISTEN "127.0.0.1:9467"

struct config {
	char socket[108];                      /* control socket path */
	unsigned socket_mode;                  /* mode of the socket file (default 0600) */
	char listen[128];                      /* "host:port" for HTTP, or "off" */
	char run_dirs[CFG_MAX_DIRS][PATH_MAX]; /* explicit run directories */
	int nrun_dirs;
	bool default_dirs;       /* also watch every /dev/shm/liballoc-<uid>/ */
	char shm_root[PATH_MAX]; /* where the default dirs live (/dev/shm) */
	int rescan_ms;           /* periodic rescan + liveness check */
	int command_timeout_ms;  /* per process, all steps of one command */
	int read_timeout_ms;     /* a started frame must complete within this */
	int idle_timeout_ms;     /* an idle connection is closed after this */
	int max_connections;
	int max_connections_per_uid; /* control connections of one non-root uid */
	int http_max_connections;
	int http_request_timeout_ms;  /* the whole request (and its response) within this */
	char http_allowed_hosts[512]; /* more Host names than the listen address, localhost */
	int max_segments_per_uid;     /* segments tracked per uid (lowered to fit the fd limit) */
	char uid_dirs[PATH_MAX];      /* root-owned parent of per-uid fallback run dirs, "" off */
	int log_level;
	bool metrics_arenas;  /* per-arena families on /metrics */
	bool metrics_classes; /* per-size-class families on /metrics (many series) */
	bool metrics_service; /* metrics_mode = service: series per service, not per pid */
	uint32_t provide_uids[CFG_MAX_DIRS]; /* <uid> directories made under uid_dirs at start */
	int nprovide_uids;
	bool remove_stale;         /* unlink stale segments we may remove */
	char ready_file[PATH_MAX]; /* written once listening (tests, supervisors) */
	int audit_ring;            /* events the audit ring keeps for `allocctl log` */
	int audit_journal;         /* -1 auto (under systemd's journal), 0 off, 1 on */
	int history_sample_ms;     /* sample period of the history (0: no history) */
	int64_t history_max_bytes; /* bound on the memory of every process's history */
	int history_events;        /* events kept on the timeline */
	bool policy_dry_run;       /* every policy only logs what it would do */
	int check_interval_ms;     /* free/idle policies look at processes this often */
};

/* One "key = value" setting, as given on the command line. */
struct config_override {
	const char *key;
	const char *value;
};

void config_defaults(struct config *c);
/* Apply one setting; returns 0, or -1 with a message in err. */
int config_set(struct config *c, const char *key, const char *value, char *err, size_t errlen);
/* Read a configuration file: daemon settings ("key = value" before any section or in
 * [daemon]), [profile NAME] and [policy NAME] sections into pc ('#' or ';' comments).
 * -1 with "file:line: message" in err. */
struct policy_conf;
int config_load_file(struct config *c, struct policy_conf *pc, const char *path, char *err,
                     size_t errlen);
/* defaults + file (if any) + overrides, into c and a new *pc (both left untouched on
 * error; pc may be NULL: the profiles and policies are checked, then dropped). */
int config_build_all(struct config *c, struct policy_conf **pc, const char *file,
                     const struct config_override *ov, int nov, char *err, size_t errlen);
int config_build(struct config *c, const char *file, const struct config_override *ov, int nov,
                 char *err, size_t errlen);

#endif
