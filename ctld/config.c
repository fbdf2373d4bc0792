/* config.c — parsing of allocctld's settings (file and flags share one key namespace:
 * --rescan-ms 500 is "rescan_ms = 500"). Every value is range-checked; an unknown key or
 * a bad value is an error naming the key, so a typo never silently falls back. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "liballoc_shm.h"
#include "log.h"
#include "units.h"
#include "wire.h"

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->socket, sizeof(c->socket), "%s", CTL_DEFAULT_SOCKET);
	c->socket_mode = 0600;
	snprintf(c->listen, sizeof(c->listen), "%s", CFG_DEFAULT_LISTEN);
	c->default_dirs = true;
	snprintf(c->shm_root, sizeof(c->shm_root), "/dev/shm");
	c->rescan_ms = 2000;
	c->command_timeout_ms = 2000;
	c->read_timeout_ms = 5000;
	c->idle_timeout_ms = 300000;
	c->max_connections = 64;
	c->max_connections_per_uid = 16;
	c->http_max_connections = 64;
	c->http_request_timeout_ms = 5000;
	c->max_segments_per_uid = 4096;
	snprintf(c->uid_dirs, sizeof(c->uid_dirs), "%s", LA_SHM_FALLBACK_RUN_DIR);
	c->log_level = LOGL_INFO;
	c->metrics_arenas = true;
	c->remove_stale = true;
	c->audit_ring = 2048;
	c->audit_journal = -1;
	c->history_sample_ms = 1000;
	c->history_max_bytes = 64LL << 20;
	c->history_events = 4096;
}

static int set_int(int *dst, const char *key, const char *v, long lo, long hi, char *err,
                   size_t len)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi) {
		snprintf(err, len, "%s: bad value '%s' (an integer in [%ld, %ld])", key, v, lo, hi);
		return -1;
	}
	*dst = (int)x;
	return 0;
}

static int set_bool(bool *dst, const char *key, const char *v, char *err, size_t len)
{
	if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
	    !strcasecmp(v, "on")) {
		*dst = true;
		return 0;
	}
	if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
	    !strcasecmp(v, "off")) {
		*dst = false;
		return 0;
	}
	snprintf(err, len, "%s: bad value '%s' (true or false)", key, v);
	return -1;
}

static int set_str(char *dst, size_t cap, const char *key, const char *v, char *err, size_t len)
{
	if (strlen(v) >= cap) {
		snprintf(err, len, "%s: value too long (at most %zu bytes)", key, cap - 1);
		return -1;
	}
	snprintf(dst, cap, "%s", v);
	return 0;
}

static int set_path(char *dst, size_t cap, const char *key, const char *v, char *err, size_t len)
{
	if (v[0] != '/') {
		snprintf(err, len, "%s: '%s' must be an absolute path", key, v);
		return -1;
	}
	return set_str(dst, cap, key, v, err, len);
}

int config_set(struct config *c, const char *key, const char *v, char *err, size_t len)
{
	if (!strcmp(key, "socket"))
		return set_path(c->socket, sizeof(c->socket), key, v, err, len);
	if (!strcmp(key, "socket_mode")) {
		char *end;
		errno = 0;
		unsigned long m = strtoul(v, &end, 8);
		if (errno || end == v || *end || m > 0777) {
			snprintf(err, len, "socket_mode: bad value '%s' (octal, e.g. 0600)", v);
			return -1;
		}
		c->socket_mode = (unsigned)m;
		return 0;
	}
	if (!strcmp(key, "listen")) {
		if (strcmp(v, "off") && !strrchr(v, ':')) {
			snprintf(err, len, "listen: '%s' is not host:port, unix:PATH or off", v);
			return -1;
		}
		return set_str(c->listen, sizeof(c->listen), key, v, err, len);
	}
	if (!strcmp(key, "run_dir")) {
		if (c->nrun_dirs >= CFG_MAX_DIRS) {
			snprintf(err, len, "run_dir: at most %d directories", CFG_MAX_DIRS);
			return -1;
		}
		for (int i = 0; i < c->nrun_dirs; i++)
			if (!strcmp(c->run_dirs[i], v))
				return 0;
		if (set_path(c->run_dirs[c->nrun_dirs], PATH_MAX, key, v, err, len))
			return -1;
		c->nrun_dirs++;
		return 0;
	}
	if (!strcmp(key, "default_dirs"))
		return set_bool(&c->default_dirs, key, v, err, len);
	if (!strcmp(key, "shm_root"))
		return set_path(c->shm_root, sizeof(c->shm_root), key, v, err, len);
	if (!strcmp(key, "rescan_ms"))
		return set_int(&c->rescan_ms, key, v, 50, 3600000, err, len);
	if (!strcmp(key, "command_timeout_ms"))
		return set_int(&c->command_timeout_ms, key, v, 10, 600000, err, len);
	if (!strcmp(key, "read_timeout_ms"))
		return set_int(&c->read_timeout_ms, key, v, 10, 600000, err, len);
	if (!strcmp(key, "idle_timeout_ms"))
		return set_int(&c->idle_timeout_ms, key, v, 10, 86400000, err, len);
	if (!strcmp(key, "max_connections"))
		return set_int(&c->max_connections, key, v, 1, 100000, err, len);
	if (!strcmp(key, "max_connections_per_uid"))
		return set_int(&c->max_connections_per_uid, key, v, 1, 100000, err, len);
	if (!strcmp(key, "http_request_timeout_ms"))
		return set_int(&c->http_request_timeout_ms, key, v, 10, 600000, err, len);
	if (!strcmp(key, "http_allowed_hosts"))
		return set_str(c->http_allowed_hosts, sizeof(c->http_allowed_hosts), key, v, err,
		               len);
	if (!strcmp(key, "http_max_connections"))
		return set_int(&c->http_max_connections, key, v, 1, 100000, err, len);
	if (!strcmp(key, "max_segments_per_uid"))
		return set_int(&c->max_segments_per_uid, key, v, 1, 1000000, err, len);
	if (!strcmp(key, "uid_dirs")) {
		if (!strcmp(v, "off")) {
			c->uid_dirs[0] = 0;
			return 0;
		}
		return set_path(c->uid_dirs, sizeof(c->uid_dirs), key, v, err, len);
	}
	if (!strcmp(key, "log_level")) {
		int l = log_level_parse(v);
		if (l < 0) {
			snprintf(err, len, "log_level: bad value '%s' (error, warn, info, debug)",
			         v);
			return -1;
		}
		c->log_level = l;
		return 0;
	}
	if (!strcmp(key, "metrics_arenas"))
		return set_bool(&c->metrics_arenas, key, v, err, len);
	if (!strcmp(key, "metrics_classes"))
		return set_bool(&c->metrics_classes, key, v, err, len);
	if (!strcmp(key, "remove_stale"))
		return set_bool(&c->remove_stale, key, v, err, len);
	if (!strcmp(key, "audit_ring"))
		return set_int(&c->audit_ring, key, v, 16, 1000000, err, len);
	if (!strcmp(key, "audit_journal")) {
		bool b;
		if (!strcasecmp(v, "auto")) {
			c->audit_journal = -1;
			return 0;
		}
		if (set_bool(&b, key, v, err, len)) {
			snprintf(err, len, "audit_journal: bad value '%s' (auto, on or off)", v);
			return -1;
		}
		c->audit_journal = b;
		return 0;
	}
	if (!strcmp(key, "ready_file"))
		return set_path(c->ready_file, sizeof(c->ready_file), key, v, err, len);
	if (!strcmp(key, "history_sample_ms")) {
		if (!strcmp(v, "0") || !strcasecmp(v, "off")) {
			c->history_sample_ms = 0;
			return 0;
		}
		return set_int(&c->history_sample_ms, key, v, 100, 60000, err, len);
	}
	if (!strcmp(key, "history_max_bytes")) {
		int64_t b;
		char why[160];
		if (units_parse(LA_T_SIZE, v, &b, why, sizeof(why)) || b < (int64_t)(1 << 20) ||
		    b > (1LL << 40)) {
			snprintf(err, len,
			         "history_max_bytes: bad value '%s' (a size from 1M to 1T)", v);
			return -1;
		}
		c->history_max_bytes = b;
		return 0;
	}
	if (!strcmp(key, "history_events"))
		return set_int(&c->history_events, key, v, 16, 1000000, err, len);
	snprintf(err, len, "unknown setting '%s'", key);
	return -1;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

int config_load_file(struct config *c, const char *path, char *err, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	char line[PATH_MAX + 128];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, len, "%s:%d: line too long", path, lineno);
			rc = -1;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, len, "%s:%d: expected 'key = value'", path, lineno);
			rc = -1;
			break;
		}
		*eq = 0;
		char *key = trim(s), *val = trim(eq + 1), why[256];
		if (config_set(c, key, val, why, sizeof(why))) {
			snprintf(err, len, "%s:%d: %s", path, lineno, why);
			rc = -1;
			break;
		}
	}
	fclose(f);
	return rc;
}

int config_build(struct config *out, const char *file, const struct config_override *ov, int nov,
                 char *err, size_t len)
{
	static struct config c; /* large (run_dirs): keep it off the stack */
	config_defaults(&c);
	if (file && config_load_file(&c, file, err, len))
		return -1;
	for (int i = 0; i < nov; i++) {
		char why[256];
		if (config_set(&c, ov[i].key, ov[i].value, why, sizeof(why))) {
			snprintf(err, len, "--%s: %s", ov[i].key, why);
			return -1;
		}
	}
	*out = c;
	return 0;
}
