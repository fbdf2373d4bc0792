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

#include <ini.h>

#include "liballoc_parse.h"
#include "liballoc_shm.h"
#include "log.h"
#include "units.h"
#include "policy.h"
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
	c->history_max_bytes = 32LL << 20; /* with the rest, 5,000 processes stay within 64 MiB */
	c->history_events = 4096;
	c->check_interval_ms = 1000;
}

/* Numbers, durations and booleans are read by la_parse (liballoc_parse.h), as the
 * environment and allocctl read them. */
static int set_int(int *dst, const char *key, const char *v, long lo, long hi, char *err,
                   size_t len)
{
	int64_t x;
	if (la_parse(LA_T_INT, v, &x) || x < lo || x > hi) {
		snprintf(err, len, "%s: bad value '%s' (an integer in [%ld, %ld])", key, v, lo, hi);
		return -1;
	}
	*dst = (int)x;
	return 0;
}

/* A duration in milliseconds: "250", "250ms", "2s", "1.5m", "1h". */
static int set_ms(int *dst, const char *key, const char *v, long lo, long hi, char *err, size_t len)
{
	int64_t x;
	if (la_parse(LA_T_MS, v, &x) || x < lo || x > hi) {
		snprintf(err, len,
		         "%s: bad value '%s' (a duration from %ld ms to %ld ms: 250, 2s, 1.5m, 1h)",
		         key, v, lo, hi);
		return -1;
	}
	*dst = (int)x;
	return 0;
}

static int set_bool(bool *dst, const char *key, const char *v, char *err, size_t len)
{
	int64_t b;
	if (la_parse(LA_T_BOOL, v, &b)) {
		snprintf(err, len, "%s: bad value '%s' (true or false)", key, v);
		return -1;
	}
	*dst = b != 0;
	return 0;
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
		return set_ms(&c->rescan_ms, key, v, 50, 3600000, err, len);
	if (!strcmp(key, "command_timeout_ms"))
		return set_ms(&c->command_timeout_ms, key, v, 10, 600000, err, len);
	if (!strcmp(key, "read_timeout_ms"))
		return set_ms(&c->read_timeout_ms, key, v, 10, 600000, err, len);
	if (!strcmp(key, "idle_timeout_ms"))
		return set_ms(&c->idle_timeout_ms, key, v, 10, 86400000, err, len);
	if (!strcmp(key, "max_connections"))
		return set_int(&c->max_connections, key, v, 1, 100000, err, len);
	if (!strcmp(key, "max_connections_per_uid"))
		return set_int(&c->max_connections_per_uid, key, v, 1, 100000, err, len);
	if (!strcmp(key, "http_request_timeout_ms"))
		return set_ms(&c->http_request_timeout_ms, key, v, 10, 600000, err, len);
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
	if (!strcmp(key, "metrics_mode")) {
		if (strcmp(v, "pid") && strcmp(v, "service")) {
			snprintf(err, len, "metrics_mode: bad value '%s' (pid or service)", v);
			return -1;
		}
		c->metrics_service = !strcmp(v, "service");
		return 0;
	}
	if (!strcmp(key, "provide_uid_dirs")) {
		/* uids separated by commas or blanks; "" or "none": none */
		c->nprovide_uids = 0;
		char list[512];
		if (snprintf(list, sizeof(list), "%s", v) >= (int)sizeof(list)) {
			snprintf(err, len, "provide_uid_dirs: too long");
			return -1;
		}
		for (char *save = NULL, *t = strtok_r(list, ", \t", &save); t;
		     t = strtok_r(NULL, ", \t", &save)) {
			if (!strcmp(t, "none"))
				continue;
			char *end;
			errno = 0;
			unsigned long u = strtoul(t, &end, 10);
			if (errno || end == t || *end || u > 0x7fffffffUL || *t == '-') {
				snprintf(err, len, "provide_uid_dirs: '%s' is not a uid", t);
				return -1;
			}
			if (c->nprovide_uids == CFG_MAX_DIRS) {
				snprintf(err, len, "provide_uid_dirs: at most %d uids",
				         CFG_MAX_DIRS);
				return -1;
			}
			c->provide_uids[c->nprovide_uids++] = (uint32_t)u;
		}
		return 0;
	}
	if (!strcmp(key, "remove_stale"))
		return set_bool(&c->remove_stale, key, v, err, len);
	if (!strcmp(key, "policy_dry_run"))
		return set_bool(&c->policy_dry_run, key, v, err, len);
	if (!strcmp(key, "check_interval_ms"))
		return set_ms(&c->check_interval_ms, key, v, 100, 3600000, err, len);
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
		return set_ms(&c->history_sample_ms, key, v, 100, 60000, err, len);
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

/* ---- the file: sections through inih ------------------------------------------------
 * inih (Debian's libinih) splits the file into [sections] and "key = value" (or "key:
 * value") lines, '#' or ';' comments at the start of a line. Its handler is not told line
 * numbers, so the file is fed to it through a reader that counts lines: each handler call
 * is for the line the reader gave last. The reader also sees section headers first, which
 * is where the section before is checked as a whole. The first error stops the parse. */
struct loader {
	FILE *f;
	const char *path;
	int line, section_line;
	struct config *c;
	struct policy_conf *pc;
	char section[INI_MAX_LINE]; /* as inih reports it; "" before any */
	bool in_section;
	char *err;
	size_t errlen;
	bool failed;
	/* the daemon settings the file gave, and their lines: one given twice is refused, as a
	 * profile's tunable is (the later one silently won) */
	struct {
		char key[32];
		int line;
	} seen[64];
	int nseen;
	/* the same for the keys of the current [policy NAME] section (a profile refuses its own) */
	struct {
		char key[32];
		int line;
	} pseen[32];
	int npseen;
};

static void fail_at(struct loader *l, int line, const char *msg)
{
	if (l->failed)
		return;
	l->failed = true;
	snprintf(l->err, l->errlen, "%s:%d: %s", l->path, line, msg);
}

/* The section that just ended is complete? */
static void end_section(struct loader *l)
{
	char why[512];
	if (l->in_section && policy_conf_end_section(l->pc, l->section, why, sizeof(why)))
		fail_at(l, l->line, why);
}

static char *reader(char *str, int num, void *stream)
{
	struct loader *l = stream;
	if (l->failed || !fgets(str, num, l->f))
		return NULL;
	l->line++;
	if (!strchr(str, '\n') && !feof(l->f)) {
		char msg[64];
		snprintf(msg, sizeof(msg), "line too long (at most %d characters)", num - 2);
		fail_at(l, l->line, msg);
		return NULL;
	}
	const char *s = str;
	while (isspace((unsigned char)*s))
		s++;
	if (*s == '[') {
		/* the section before ends here; its own line is where errors about it point */
		int line = l->line;
		l->line = l->section_line;
		end_section(l);
		l->line = line;
		const char *close = strchr(s, ']');
		char name[INI_MAX_LINE], why[512];
		if (!close) {
			fail_at(l, l->line, "a section header needs its closing ']'");
			return NULL;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(close - s - 1), s + 1);
		l->section_line = l->line;
		snprintf(l->section, sizeof(l->section), "%s", name);
		l->npseen = 0;
		if (policy_conf_section(l->pc, name, l->line, why, sizeof(why))) {
			fail_at(l, l->line, why);
			return NULL;
		}
		l->in_section = true;
	}
	return l->failed ? NULL : str;
}

static int handler(void *user, const char *section, const char *key, const char *value)
{
	struct loader *l = user;
	if (l->failed)
		return 0;
	/* "value   # comment": a '#' after blank space starts a comment, as at a line start */
	char v[INI_MAX_LINE];
	snprintf(v, sizeof(v), "%s", value);
	for (char *h = strchr(v, '#'); h; h = strchr(h + 1, '#'))
		if (h > v && isspace((unsigned char)h[-1])) {
			*h = 0;
			break;
		}
	size_t n = strlen(v);
	while (n && isspace((unsigned char)v[n - 1]))
		v[--n] = 0;
	char why[512];
	int rc;
	char type[16] = "";
	sscanf(section, " %15s", type);
	if (!section[0] || !strcmp(type, "daemon")) {
		for (int i = 0; i < l->nseen; i++)
			if (!strcmp(l->seen[i].key, key)) {
				snprintf(why, sizeof(why), "%s is set twice (first on line %d)",
				         key, l->seen[i].line);
				fail_at(l, l->line, why);
				return 0;
			}
		rc = config_set(l->c, key, v, why, sizeof(why));
		/* run_dir is repeatable: a directory each (the same one twice counts once) */
		if (!rc && strcmp(key, "run_dir") &&
		    l->nseen < (int)(sizeof(l->seen) / sizeof(l->seen[0])) &&
		    strlen(key) < sizeof(l->seen[0].key)) {
			snprintf(l->seen[l->nseen].key, sizeof(l->seen[0].key), "%s", key);
			l->seen[l->nseen++].line = l->line;
		}
		if (rc && !strncmp(why, "unknown setting", 15))
			snprintf(why, sizeof(why), "unknown key '%s'%s", key,
			         section[0] ? " in [daemon]"
			                    : " (daemon settings; or is a [section] "
			                      "missing?)");
	} else {
		bool policy = !strcmp(type, "policy");
		for (int i = 0; policy && i < l->npseen; i++)
			if (!strcmp(l->pseen[i].key, key)) {
				snprintf(why, sizeof(why),
				         "%s is set twice in [%s] (first on line %d)", key, section,
				         l->pseen[i].line);
				fail_at(l, l->line, why);
				return 0;
			}
		rc = policy_conf_key(l->pc, section, key, v, why, sizeof(why));
		if (!rc && policy && l->npseen < (int)(sizeof(l->pseen) / sizeof(l->pseen[0])) &&
		    strlen(key) < sizeof(l->pseen[0].key)) {
			snprintf(l->pseen[l->npseen].key, sizeof(l->pseen[0].key), "%s", key);
			l->pseen[l->npseen++].line = l->line;
		}
	}
	if (rc) {
		fail_at(l, l->line, why);
		return 0;
	}
	return 1;
}

int config_load_file(struct config *c, struct policy_conf *pc, const char *path, char *err,
                     size_t len)
{
	struct loader l = {.path = path, .c = c, .pc = pc, .err = err, .errlen = len};
	l.f = fopen(path, "re");
	if (!l.f) {
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	int rc = ini_parse_stream(reader, &l, handler, &l);
	if (!l.failed && rc > 0)
		fail_at(&l, rc, "expected 'key = value' or a [section] header");
	if (!l.failed && rc < 0)
		fail_at(&l, l.line, "cannot parse (out of memory)");
	if (!l.failed) {
		l.line = l.section_line;
		end_section(&l);
	}
	fclose(l.f);
	return l.failed ? -1 : 0;
}

int config_build_all(struct config *out, struct policy_conf **pcout, const char *file,
                     const struct config_override *ov, int nov, char *err, size_t len)
{
	static struct config c; /* large (run_dirs): keep it off the stack */
	config_defaults(&c);
	struct policy_conf *pc = policy_conf_new();
	if (!pc) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	if (file && config_load_file(&c, pc, file, err, len))
		goto fail;
	for (int i = 0; i < nov; i++) {
		char why[256];
		if (config_set(&c, ov[i].key, ov[i].value, why, sizeof(why))) {
			/* the flag as it was typed (--log-level), and the reason without the key
			 * it repeats ("--log_level: log_level: bad value" before) */
			char flag[64];
			snprintf(flag, sizeof(flag), "%s", ov[i].key);
			for (char *p = flag; *p; p++)
				if (*p == '_')
					*p = '-';
			size_t kl = strlen(ov[i].key);
			const char *w = why;
			if (!strncmp(why, ov[i].key, kl) && why[kl] == ':' && why[kl + 1] == ' ')
				w = why + kl + 2;
			snprintf(err, len, "--%s: %s", flag, w);
			goto fail;
		}
	}
	pc->dry_run = c.policy_dry_run;
	pc->check_interval_ms = (uint64_t)c.check_interval_ms;
	*out = c;
	if (pcout)
		*pcout = pc;
	else
		policy_conf_free(pc);
	return 0;
fail:
	policy_conf_free(pc);
	return -1;
}

int config_build(struct config *out, const char *file, const struct config_override *ov, int nov,
                 char *err, size_t len)
{
	return config_build_all(out, NULL, file, ov, nov, err, len);
}
