/* policy_conf.c — the [profile NAME] and [policy NAME] sections of allocctld's
 * configuration (see policy.h and allocctld.conf.example): every key is checked as it is
 * read, every section when it ends, so that an error names the line it comes from. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy.h"
#include "pressure.h"
#include "units.h"

static const char *const on_names[] = {"psi", "cgroup", "free", "idle"};
static const char *const rung_names[] = {"flush", "release", "trim", "decay"};

const char *policy_on_name(enum policy_on on)
{
	return (unsigned)on < 4 ? on_names[on] : "?";
}

const char *policy_rung_name(enum policy_rung r)
{
	return (unsigned)r < RUNG_MAX ? rung_names[r] : "?";
}

uint64_t policy_level_bytes(const struct policy_level *l, uint64_t limit)
{
	if (!l->ppm)
		return l->bytes;
	if (limit == UINT64_MAX)
		return 0;
	return (uint64_t)((unsigned __int128)limit * l->ppm / 1000000u);
}

struct policy_conf *policy_conf_new(void)
{
	struct policy_conf *pc = calloc(1, sizeof(*pc));
	if (pc)
		pc->check_interval_ms = 1000;
	return pc;
}

void policy_conf_free(struct policy_conf *pc)
{
	if (!pc)
		return;
	for (int i = 0; i < pc->nprofiles; i++)
		profile_free(&pc->profiles[i]);
	free(pc->profiles);
	free(pc->policies);
	free(pc);
}

/* "profile redis" -> type "profile", name "redis". */
static int split_section(const char *section, char *type, size_t tlen, char *name, size_t nlen)
{
	while (isspace((unsigned char)*section))
		section++;
	size_t tl = strcspn(section, " \t");
	const char *n = section + tl;
	while (isspace((unsigned char)*n))
		n++;
	if (tl >= tlen || strlen(n) >= nlen)
		return -1;
	memcpy(type, section, tl);
	type[tl] = 0;
	snprintf(name, nlen, "%s", n);
	size_t l = strlen(name);
	while (l && isspace((unsigned char)name[l - 1]))
		name[--l] = 0;
	return 0;
}

static bool name_ok(const char *name)
{
	if (!*name)
		return false;
	for (const char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("-_.:@", *c))
			return false;
	return true;
}

int policy_conf_section(struct policy_conf *pc, const char *section, int line, char *err,
                        size_t errlen)
{
	char type[32], name[PROFILE_NAME_MAX + 32];
	if (split_section(section, type, sizeof(type), name, sizeof(name)) < 0 ||
	    (strcmp(type, "profile") && strcmp(type, "policy") && strcmp(type, "daemon"))) {
		snprintf(err, errlen,
		         "unknown section [%.64s]: sections are [daemon], [profile NAME] and "
		         "[policy NAME]",
		         section);
		return -1;
	}
	if (!strcmp(type, "daemon")) {
		if (*name) {
			snprintf(err, errlen, "[daemon] takes no name");
			return -1;
		}
		return 0;
	}
	if (!name_ok(name) || strlen(name) >= PROFILE_NAME_MAX) {
		snprintf(err, errlen,
		         "[%s %.64s]: a %s needs a name of letters, digits and -_.:@ (at most %d)",
		         type, name, type, PROFILE_NAME_MAX - 1);
		return -1;
	}
	if (!strcmp(type, "profile")) {
		for (int i = 0; i < pc->nprofiles; i++)
			if (!strcmp(pc->profiles[i].name, name)) {
				snprintf(err, errlen,
				         "profile %s is defined twice (first on line %d)", name,
				         pc->profiles[i].line);
				return -1;
			}
		struct profile *a = realloc(pc->profiles, sizeof(*a) * (size_t)(pc->nprofiles + 1));
		if (!a) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		pc->profiles = a;
		struct profile *pr = &a[pc->nprofiles++];
		memset(pr, 0, sizeof(*pr));
		snprintf(pr->name, sizeof(pr->name), "%s", name);
		pr->line = line;
		return 0;
	}
	for (int i = 0; i < pc->npolicies; i++)
		if (!strcmp(pc->policies[i].name, name)) {
			snprintf(err, errlen, "policy %s is defined twice (first on line %d)", name,
			         pc->policies[i].line);
			return -1;
		}
	struct policy *a = realloc(pc->policies, sizeof(*a) * (size_t)(pc->npolicies + 1));
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pc->policies = a;
	struct policy *po = &a[pc->npolicies++];
	memset(po, 0, sizeof(*po));
	snprintf(po->name, sizeof(po->name), "%s", name);
	po->line = line;
	snprintf(po->psi_file, sizeof(po->psi_file), "%s", PRESSURE_HOST_PSI);
	po->psi_stall_us = 100000; /* 100 ms of stall in a 2 s window */
	po->psi_window_us = 2000000;
	po->min_interval_ms = 1000;
	po->hold_ms = 60000;
	po->decay_ms = 100;
	return 0;
}

/* ---- values ---------------------------------------------------------------------------- */

static int parse_size(const char *key, const char *v, uint64_t *out, char *err, size_t errlen)
{
	int64_t x;
	char why[160];
	if (units_parse(LA_T_SIZE, v, &x, why, sizeof(why)) != UNITS_OK || x < 0) {
		snprintf(err, errlen, "%s: '%s' is not a size (e.g. 64M, 1.5G)", key, v);
		return -1;
	}
	*out = (uint64_t)x;
	return 0;
}

static int parse_ms(const char *key, const char *v, uint64_t *out, char *err, size_t errlen)
{
	int64_t x;
	char why[160];
	if (units_parse(LA_T_MS, v, &x, why, sizeof(why)) != UNITS_OK || x < 0) {
		snprintf(err, errlen, "%s: '%s' is not a duration (e.g. 250ms, 10s, 5m)", key, v);
		return -1;
	}
	*out = (uint64_t)x;
	return 0;
}

static int parse_bool(const char *key, const char *v, bool *out, char *err, size_t errlen)
{
	int64_t x;
	char why[160];
	if (units_parse(LA_T_BOOL, v, &x, why, sizeof(why)) != UNITS_OK) {
		snprintf(err, errlen, "%s: '%s' is not a boolean (yes/no, on/off, true/false)", key,
		         v);
		return -1;
	}
	*out = x != 0;
	return 0;
}

/* "85%" (a share of the limit) or a size. */
static int parse_level(const char *key, const char *v, struct policy_level *l, char *err,
                       size_t errlen)
{
	size_t n = strlen(v);
	memset(l, 0, sizeof(*l));
	if (n && v[n - 1] == '%') {
		char *end;
		errno = 0;
		double pct = strtod(v, &end);
		if (errno || end != v + n - 1 || end == v || !(pct > 0) || pct > 100) {
			snprintf(err, errlen,
			         "%s: '%s' is not a share of the limit between 0%% and 100%%", key,
			         v);
			return -1;
		}
		l->ppm = (uint32_t)(pct * 10000 + 0.5);
		if (!l->ppm)
			l->ppm = 1;
		return 0;
	}
	if (parse_size(key, v, &l->bytes, err, errlen))
		return -1;
	if (!l->bytes) {
		snprintf(err, errlen, "%s: 0 bytes is no threshold", key);
		return -1;
	}
	return 0;
}

/* "some 100ms 2s" / "full 50ms 1s" */
static int parse_psi(struct policy *po, const char *v, char *err, size_t errlen)
{
	char kind[16], stall[32], window[32], extra[8];
	int n = sscanf(v, "%15s %31s %31s %7s", kind, stall, window, extra);
	uint64_t s, w;
	if (n != 3 || (strcmp(kind, "some") && strcmp(kind, "full")) ||
	    parse_ms("psi", stall, &s, err, errlen) || parse_ms("psi", window, &w, err, errlen)) {
		snprintf(err, errlen,
		         "psi: '%s' is not 'some|full STALL WINDOW' (e.g. some 100ms 2s)", v);
		return -1;
	}
	if (w < 500 || w > 10000 || s == 0 || s > w) {
		snprintf(err, errlen,
		         "psi: '%s' is impossible: the window must be 500ms..10s and the stall "
		         "more than 0 and at most the window",
		         v);
		return -1;
	}
	po->psi_full = !strcmp(kind, "full");
	po->psi_stall_us = s * 1000;
	po->psi_window_us = w * 1000;
	po->psi_given = true;
	return 0;
}

static int parse_actions(struct policy *po, const char *v, char *err, size_t errlen)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", v);
	po->nrungs = 0;
	bool seen[RUNG_MAX] = {false};
	for (char *save, *tok = strtok_r(buf, ", \t", &save); tok;
	     tok = strtok_r(NULL, ", \t", &save)) {
		int r = -1;
		for (int i = 0; i < RUNG_MAX; i++)
			if (!strcmp(tok, rung_names[i]))
				r = i;
		if (r < 0) {
			snprintf(err, errlen,
			         "actions: unknown action '%s' (flush, release, trim, decay)", tok);
			return -1;
		}
		if (seen[r]) {
			snprintf(err, errlen, "actions: %s is listed twice", tok);
			return -1;
		}
		if (po->nrungs && (int)po->rungs[po->nrungs - 1] > r) {
			snprintf(err, errlen,
			         "actions: they escalate in the order flush, release, trim, decay "
			         "(%s cannot come after %s)",
			         tok, rung_names[po->rungs[po->nrungs - 1]]);
			return -1;
		}
		seen[r] = true;
		po->rungs[po->nrungs++] = (enum policy_rung)r;
	}
	return 0;
}

static int profile_key(struct profile *pr, const char *key, const char *v, char *err, size_t errlen)
{
	int rc = profile_set_match(pr, key, v, err, errlen);
	if (rc <= 0)
		return rc;
	const struct tunable_info *ti = tunable_find(key);
	if (!ti) {
		snprintf(err, errlen,
		         "unknown key '%s' in [profile %s]: matches are name, exe, cgroup, uid, "
		         "cmdline; settings are tunable names (allocctl help tunables)",
		         key, pr->name);
		return -1;
	}
	if (!ti->live) {
		snprintf(err, errlen, "%s cannot change while a process runs", key);
		return -1;
	}
	for (int i = 0; i < pr->nset; i++)
		if (pr->set[i].tunable == (int)(ti - tunable_table)) {
			snprintf(err, errlen, "%s is set twice", key);
			return -1;
		}
	char why[256];
	int64_t value;
	if (units_parse_tunable(ti, v, &value, why, sizeof(why))) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	pr->set[pr->nset].tunable = (int)(ti - tunable_table);
	pr->set[pr->nset].value = value;
	pr->nset++;
	return 0;
}

static int policy_key(struct policy *po, const char *key, const char *v, char *err, size_t errlen)
{
	if (!strcmp(key, "on")) {
		for (int i = 0; i < 4; i++)
			if (!strcmp(v, on_names[i])) {
				po->on = (enum policy_on)i;
				po->on_given = true;
				return 0;
			}
		snprintf(err, errlen, "on: '%s' is not psi, cgroup, free or idle", v);
		return -1;
	}
	if (!strcmp(key, "psi"))
		return parse_psi(po, v, err, errlen);
	if (!strcmp(key, "psi_file")) {
		if (v[0] != '/') {
			snprintf(err, errlen, "psi_file: '%s' must be an absolute path", v);
			return -1;
		}
		snprintf(po->psi_file, sizeof(po->psi_file), "%s", v);
		return 0;
	}
	if (!strcmp(key, "min_available"))
		return parse_size(key, v, &po->min_available, err, errlen);
	if (!strcmp(key, "cgroup")) {
		if (!strcmp(v, "auto")) {
			po->cgroup[0] = 0;
			return 0;
		}
		if (v[0] != '/') {
			snprintf(err, errlen,
			         "cgroup: '%s' must be auto or a path inside the memory cgroup "
			         "hierarchy (e.g. /system.slice/redis.service)",
			         v);
			return -1;
		}
		/* checked here, so that the error names this line */
		char dir[PATH_MAX];
		struct cg_memory m;
		if (cgroup_dir_of(v, dir, sizeof(dir)) < 0 || cgroup_memory_read(dir, &m) < 0) {
			snprintf(err, errlen,
			         "cgroup: %s does not exist (no memory cgroup directory %s)", v,
			         dir[0] ? dir : "(no memory hierarchy)");
			return -1;
		}
		snprintf(po->cgroup, sizeof(po->cgroup), "%s", v);
		return 0;
	}
	if (!strcmp(key, "high")) {
		po->high_given = true;
		return parse_level(key, v, &po->high, err, errlen);
	}
	if (!strcmp(key, "low")) {
		po->low_given = true;
		return parse_level(key, v, &po->low, err, errlen);
	}
	if (!strcmp(key, "above"))
		return parse_size(key, v, &po->above, err, errlen);
	if (!strcmp(key, "for"))
		return parse_ms(key, v, &po->for_ms, err, errlen);
	if (!strcmp(key, "profile")) {
		snprintf(po->profile, sizeof(po->profile), "%s", v);
		return 0;
	}
	if (!strcmp(key, "scope")) {
		if (strcmp(v, "all") && strcmp(v, "cgroup")) {
			snprintf(err, errlen, "scope: '%s' is not cgroup or all", v);
			return -1;
		}
		po->scope_all = !strcmp(v, "all");
		return 0;
	}
	if (!strcmp(key, "actions"))
		return parse_actions(po, v, err, errlen);
	if (!strcmp(key, "decay_ms")) {
		uint64_t ms;
		const struct tunable_info *ti = tunable_find("decay_ms");
		if (parse_ms(key, v, &ms, err, errlen))
			return -1;
		if (ti && ((int64_t)ms < ti->min || (int64_t)ms > ti->max)) {
			snprintf(err, errlen,
			         "decay_ms: %" PRIu64 " ms is out of range (%" PRId64 "..%" PRId64
			         " ms)",
			         ms, ti->min, ti->max);
			return -1;
		}
		po->decay_ms = (int64_t)ms;
		return 0;
	}
	if (!strcmp(key, "hold"))
		return parse_ms(key, v, &po->hold_ms, err, errlen);
	if (!strcmp(key, "goal"))
		return parse_size(key, v, &po->goal, err, errlen);
	if (!strcmp(key, "min_interval"))
		return parse_ms(key, v, &po->min_interval_ms, err, errlen);
	if (!strcmp(key, "cpu_budget")) {
		struct policy_level l;
		if (parse_level(key, v, &l, err, errlen) || !l.ppm) {
			snprintf(err, errlen,
			         "cpu_budget: '%s' is not a share of one core (e.g. 5%%)", v);
			return -1;
		}
		po->cpu_budget_ppm = l.ppm;
		return 0;
	}
	if (!strcmp(key, "dry_run"))
		return parse_bool(key, v, &po->dry_run, err, errlen);
	snprintf(err, errlen,
	         "unknown key '%s' in [policy %s] (on, psi, psi_file, min_available, cgroup, "
	         "high, low, above, for, profile, scope, actions, decay_ms, hold, goal, "
	         "min_interval, cpu_budget, dry_run)",
	         key, po->name);
	return -1;
}

int policy_conf_key(struct policy_conf *pc, const char *section, const char *key, const char *value,
                    char *err, size_t errlen)
{
	char type[32], name[PROFILE_NAME_MAX + 32];
	if (split_section(section, type, sizeof(type), name, sizeof(name)) < 0) {
		snprintf(err, errlen, "bad section");
		return -1;
	}
	if (!strcmp(type, "profile") && pc->nprofiles)
		return profile_key(&pc->profiles[pc->nprofiles - 1], key, value, err, errlen);
	if (!strcmp(type, "policy") && pc->npolicies)
		return policy_key(&pc->policies[pc->npolicies - 1], key, value, err, errlen);
	snprintf(err, errlen, "'%s' is outside a [profile] or [policy] section", key);
	return -1;
}

static int end_profile(struct profile *pr, char *err, size_t errlen)
{
	if (!pr->m_name && !pr->m_exe && !pr->m_cgroup && !pr->has_uid && !pr->has_cmdline) {
		snprintf(err, errlen,
		         "profile %s matches nothing: give name, exe, cgroup, uid or cmdline "
		         "(name = * for every process)",
		         pr->name);
		return -1;
	}
	if (!pr->nset) {
		snprintf(err, errlen, "profile %s sets no tunable", pr->name);
		return -1;
	}
	return 0;
}

static int end_policy(const struct policy_conf *pc, struct policy *po, char *err, size_t errlen)
{
	if (!po->on_given) {
		snprintf(err, errlen,
		         "policy %s: say what it acts on (on = psi, cgroup, free or idle)",
		         po->name);
		return -1;
	}
	if (!po->nrungs) {
		snprintf(err, errlen,
		         "policy %s has no action (actions = flush, release, trim, decay: one or "
		         "more)",
		         po->name);
		return -1;
	}
	if (po->profile[0]) {
		bool found = false;
		for (int i = 0; i < pc->nprofiles; i++)
			found |= !strcmp(pc->profiles[i].name, po->profile);
		if (!found) {
			snprintf(err, errlen,
			         "policy %s: profile '%s' is not defined (profiles come before the "
			         "policies that name them)",
			         po->name, po->profile);
			return -1;
		}
	}
	switch (po->on) {
	case POLICY_ON_PSI:
		if (po->cgroup[0] || po->high_given || po->low_given || po->above || po->for_ms) {
			snprintf(err, errlen,
			         "policy %s (on = psi) takes psi, psi_file, min_available, not "
			         "cgroup, high, low, above or for",
			         po->name);
			return -1;
		}
		break;
	case POLICY_ON_CGROUP: {
		if (!po->high_given) {
			snprintf(err, errlen,
			         "policy %s (on = cgroup) needs high = (a share of the limit, e.g. "
			         "85%%, or bytes)",
			         po->name);
			return -1;
		}
		if (!po->low_given) { /* 10 points of hysteresis below a share, 10% below bytes */
			po->low = po->high;
			if (po->high.ppm)
				po->low.ppm = po->high.ppm > 100000 ? po->high.ppm - 100000
				                                    : po->high.ppm / 2;
			else
				po->low.bytes = po->high.bytes - po->high.bytes / 10;
		}
		if ((po->high.ppm != 0) == (po->low.ppm != 0) &&
		    (po->high.ppm ? po->low.ppm >= po->high.ppm
		                  : po->low.bytes >= po->high.bytes)) {
			snprintf(err, errlen,
			         "policy %s: low must be below high (it is the goal and "
			         "where the policy re-arms)",
			         po->name);
			return -1;
		}
		break;
	}
	case POLICY_ON_FREE:
	case POLICY_ON_IDLE:
		if (!po->for_ms) {
			snprintf(err, errlen, "policy %s (on = %s) needs for = (a duration)",
			         po->name, on_names[po->on]);
			return -1;
		}
		if (po->on == POLICY_ON_FREE && !po->above) {
			snprintf(err, errlen,
			         "policy %s (on = free) needs above = (free resident bytes, more "
			         "than "
			         "0)",
			         po->name);
			return -1;
		}
		if (po->cgroup[0] || po->high_given || po->low_given || po->psi_given) {
			snprintf(err, errlen,
			         "policy %s (on = %s) takes above, for, profile, not psi, "
			         "cgroup, high or low",
			         po->name, on_names[po->on]);
			return -1;
		}
		break;
	}
	bool decay = false;
	for (int i = 0; i < po->nrungs; i++)
		decay |= po->rungs[i] == RUNG_DECAY;
	if (decay && !po->hold_ms) {
		snprintf(err, errlen, "policy %s: the decay action needs a hold time (hold = 60s)",
		         po->name);
		return -1;
	}
	return 0;
}

int policy_conf_end_section(struct policy_conf *pc, const char *section, char *err, size_t errlen)
{
	char type[32], name[PROFILE_NAME_MAX + 32];
	if (split_section(section, type, sizeof(type), name, sizeof(name)) < 0)
		return 0;
	if (!strcmp(type, "profile") && pc->nprofiles)
		return end_profile(&pc->profiles[pc->nprofiles - 1], err, errlen);
	if (!strcmp(type, "policy") && pc->npolicies)
		return end_policy(pc, &pc->policies[pc->npolicies - 1], err, errlen);
	return 0;
}
