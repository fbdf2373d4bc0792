/* policyconf.c — unit tests of the sectioned configuration (ctld/config.c through inih,
 * ctld/policy_conf.c) and of profile matching (ctld/profile.c): every refusal names its
 * line and what would be valid; a good file yields the profiles and policies it says. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "policy.h"
#include "pressure.h"
#include "units.h"

static char path[64];

static void write_conf(const char *text)
{
	snprintf(path, sizeof(path), "/tmp/ctld-policyconf.XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* Load text; returns the policy conf (NULL on error, with the error in err). */
static struct policy_conf *load(const char *text, char *err, size_t len)
{
	write_conf(text);
	struct config c;
	struct policy_conf *pc = NULL;
	int rc = config_build_all(&c, &pc, path, NULL, 0, err, len);
	unlink(path);
	return rc ? NULL : pc;
}

static void refused(const char *text, int line, const char *what)
{
	char err[512] = "";
	struct policy_conf *pc = load(text, err, sizeof(err));
	cr_assert_null(pc, "accepted:\n%s", text);
	char want[96];
	snprintf(want, sizeof(want), "%s:%d: ", path, line);
	cr_assert(strstr(err, want) == err, "'%s' does not start with '%s'", err, want);
	cr_assert(strstr(err, what), "'%s' does not say '%s'", err, what);
}

static int64_t tun(const char *name)
{
	return (int64_t)(tunable_find(name) - tunable_table);
}

Test(policyconf, a_good_file_gives_its_daemon_settings_profiles_and_policies)
{
	char err[512] = "";
	struct policy_conf *pc = load("# old-style settings before any section still work\n"
	                              "log_level = debug\n"
	                              "[daemon]\n"
	                              "rescan_ms = 700   # a comment after blank space\n"
	                              "policy_dry_run = no\n"
	                              "\n"
	                              "[profile redis]\n"
	                              "exe = */redis-server\n"
	                              "cgroup = /system.slice/redis*.service\n"
	                              "decay_ms = 1s\n"
	                              "tcache_max_bytes = 64K\n"
	                              "; another comment\n"
	                              "[profile batch]\n"
	                              "uid = 0\n"
	                              "cmdline = --batch( |$)\n"
	                              "madvise_throttle = off\n"
	                              "[policy guard]\n"
	                              "on = cgroup\n"
	                              "high = 85%\n"
	                              "actions = flush, release, trim, decay\n"
	                              "hold = 2m\n"
	                              "decay_ms = 200ms\n"
	                              "min_interval = 500ms\n"
	                              "cpu_budget = 5%\n"
	                              "[policy psi]\n"
	                              "on = psi\n"
	                              "psi = full 50ms 1s\n"
	                              "min_available = 1G\n"
	                              "profile = redis\n"
	                              "actions = trim\n"
	                              "dry_run = yes\n"
	                              "[policy idle]\n"
	                              "on = idle\n"
	                              "for = 30s\n"
	                              "actions = release trim\n",
	                              err, sizeof(err));
	cr_assert_not_null(pc, "%s", err);
	cr_assert_eq(pc->nprofiles, 2);
	cr_assert_str_eq(pc->profiles[0].name, "redis");
	cr_assert_eq(pc->profiles[0].nset, 2);
	cr_assert_eq(pc->profiles[0].set[0].tunable, tun("decay_ms"));
	cr_assert_eq(pc->profiles[0].set[0].value, 1000);
	cr_assert_eq(pc->profiles[0].set[1].value, 65536);
	cr_assert_eq(pc->profiles[0].line, 7);
	cr_assert_eq(pc->profiles[1].set[0].value, 0);
	cr_assert_eq(pc->npolicies, 3);
	const struct policy *g = &pc->policies[0];
	cr_assert_eq(g->on, POLICY_ON_CGROUP);
	cr_assert_eq(g->high.ppm, 850000);
	cr_assert_eq(g->low.ppm, 750000, "low defaults to 10 points under high");
	cr_assert_eq(g->nrungs, 4);
	cr_assert_eq(g->rungs[3], RUNG_DECAY);
	cr_assert_eq(g->hold_ms, 120000);
	cr_assert_eq(g->decay_ms, 200);
	cr_assert_eq(g->min_interval_ms, 500);
	cr_assert_eq(g->cpu_budget_ppm, 50000);
	const struct policy *p = &pc->policies[1];
	cr_assert(p->psi_full);
	cr_assert_eq(p->psi_stall_us, 50000);
	cr_assert_eq(p->psi_window_us, 1000000);
	cr_assert_eq(p->min_available, 1u << 30);
	cr_assert_str_eq(p->profile, "redis");
	cr_assert(p->dry_run);
	cr_assert_eq(pc->policies[2].nrungs, 2);
	cr_assert_eq(policy_level_bytes(&g->high, 1000000000), 850000000);
	policy_conf_free(pc);
}

Test(policyconf, an_unknown_key_is_refused_with_its_line)
{
	refused("[profile a]\nname = x\ndecay_ms = 1s\nfrobnicate = 3\n", 4,
	        "unknown key 'frobnicate' in [profile a]");
	refused("[policy p]\non = idle\nfor = 1s\nactions = trim\nwhen = now\n", 5,
	        "unknown key 'when' in [policy p]");
	refused("log_level = info\nno_such_setting = 1\n", 2, "unknown key 'no_such_setting'");
	refused("[daemon]\nrescan_ms = 5\n", 2, "rescan_ms: bad value '5'");
	refused("[mystery]\n", 1, "unknown section [mystery]");
	refused("[profile]\nname = x\n", 1, "a profile needs a name");
	refused("[profile a]\nname = x\ndecay_ms = 1s\n[profile a]\nname = y\ndecay_ms = 1s\n", 4,
	        "profile a is defined twice (first on line 1)");
	refused("[profile a]\nthis is not a key\n", 2, "expected 'key = value' or a [section]");
}

/* A daemon setting given twice in the file is refused with both lines, as a profile's tunable
 * set twice is (the later one silently won, in one [daemon] section, two, or before any);
 * run_dir is repeatable: a directory each. */
Test(policyconf, a_daemon_setting_given_twice_is_refused_with_both_lines)
{
	refused("rescan_ms = 2s\nlog_level = info\nrescan_ms = 3s\n", 3,
	        "rescan_ms is set twice (first on line 1)");
	refused("[daemon]\nmax_connections = 8\n[daemon]\nmax_connections = 9\n", 4,
	        "max_connections is set twice (first on line 2)");
	refused("listen = off\n[daemon]\nlisten = 127.0.0.1:0\n", 3,
	        "listen is set twice (first on line 1)");
	refused("[profile a]\nname = x\ndecay_ms = 1s\ndecay_ms = 2s\n", 4,
	        "decay_ms is set twice");
	char err[512] = "";
	write_conf("run_dir = /tmp/a\nrun_dir = /tmp/b\nrescan_ms = 3s\n");
	struct config c;
	struct policy_conf *pc = NULL;
	int rc = config_build_all(&c, &pc, path, NULL, 0, err, sizeof(err));
	unlink(path);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(c.nrun_dirs, 2);
	cr_assert_eq(c.rescan_ms, 3000);
	policy_conf_free(pc);
}

/* So is a policy's key given twice (the later one silently won: for = 1s then for = 2s ran
 * with 2 s, on = idle then on = psi became a psi policy); two policies each give theirs. */
Test(policyconf, a_policy_key_given_twice_is_refused_with_both_lines)
{
	refused("[policy p]\non = idle\nfor = 1s\nactions = trim\nfor = 2s\n", 5,
	        "for is set twice in [policy p] (first on line 3)");
	refused("[policy p]\non = idle\non = psi\n", 3,
	        "on is set twice in [policy p] (first on line 2)");
	char err[512] = "";
	struct policy_conf *pc = load("[policy a]\non = idle\nfor = 1s\nactions = trim\n"
	                              "[policy b]\non = idle\nfor = 2s\nactions = trim\n",
	                              err, sizeof(err));
	cr_assert_not_null(pc, "%s", err);
	cr_assert_eq(pc->npolicies, 2);
	cr_assert_eq(pc->policies[0].for_ms, 1000);
	cr_assert_eq(pc->policies[1].for_ms, 2000);
	policy_conf_free(pc);
}

Test(policyconf, an_impossible_threshold_is_refused_with_its_line)
{
	refused("[policy p]\non = cgroup\nhigh = 150%\nactions = trim\n", 3, "between 0% and 100%");
	refused("[policy p]\non = cgroup\nhigh = 80%\nlow = 90%\nactions = trim\n", 1,
	        "low must be below high");
	refused("[policy p]\non = cgroup\nhigh = 1G\nlow = 2G\nactions = trim\n", 1,
	        "low must be below high");
	refused("[policy p]\non = psi\npsi = some 3s 2s\nactions = trim\n", 3, "is impossible");
	refused("[policy p]\non = psi\npsi = some 10ms 100ms\nactions = trim\n", 3,
	        "window must be 500ms..10s");
	refused("[policy p]\non = free\nabove = 0\nfor = 1s\nactions = trim\n", 1, "needs above =");
	refused("[policy p]\non = cgroup\nhigh = 0\nactions = trim\n", 3,
	        "0 bytes is no threshold");
	refused("[profile a]\nname = x\nmmap_threshold = 64G\n", 3, "out of range");
	refused("[policy p]\non = idle\nfor = 1s\nactions = trim\ndecay_ms = 2h\n", 5,
	        "decay_ms: 7200000 ms is out of range");
}

Test(policyconf, a_cgroup_that_does_not_exist_is_refused_with_its_line)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "/no-such-cgroup-%d", (int)getpid());
	char text[512];
	snprintf(text, sizeof(text),
	         "[daemon]\nlog_level = info\n\n[policy p]\non = cgroup\ncgroup = %s\nhigh = "
	         "90%%\nactions = trim\n",
	         rel);
	refused(text, 6, "does not exist");
	refused("[policy p]\non = cgroup\ncgroup = relative/path\nhigh = 90%\nactions = trim\n", 3,
	        "must be auto or a path");
}

Test(policyconf, a_policy_with_no_action_is_refused_with_its_line)
{
	refused("[profile a]\nname = x\ndecay_ms = 1s\n\n[policy p]\non = idle\nfor = 10s\n", 5,
	        "policy p has no action");
	/* ... also when another section follows it */
	refused("[policy p]\non = idle\nfor = 10s\n[profile a]\nname = x\ndecay_ms = 1s\n", 1,
	        "policy p has no action");
	refused("[policy p]\non = idle\nfor = 10s\nactions = shred\n", 4, "unknown action 'shred'");
	refused("[policy p]\non = idle\nfor = 10s\nactions = trim, flush\n", 4,
	        "they escalate in the order");
	refused("[policy p]\nfor = 10s\nactions = trim\n", 1, "say what it acts on");
	refused("[profile a]\nname = x\n", 1, "profile a sets no tunable");
	refused("[profile a]\ndecay_ms = 1s\n", 1, "profile a matches nothing");
	refused("[policy p]\non = idle\nfor = 1s\nactions = trim\nprofile = nope\n", 1,
	        "profile 'nope' is not defined");
}

Test(policyconf, over_long_lines_and_missing_files_are_refused)
{
	char text[600] = "[profile a]\nname = ";
	size_t n = strlen(text);
	memset(text + n, 'x', 300);
	strcpy(text + n + 300, "\ndecay_ms = 1s\n");
	refused(text, 2, "line too long");
	char err[256];
	struct config c;
	cr_assert_eq(config_build_all(&c, NULL, "/nonexistent/allocctld.conf", NULL, 0, err,
	                              sizeof(err)),
	             -1);
	cr_assert_str_eq(err, "/nonexistent/allocctld.conf: No such file or directory");
}

Test(policyconf, the_example_in_the_tree_is_valid)
{
	char file[512], err[512] = "";
	snprintf(file, sizeof(file), "%s/ctld/allocctld.conf.example",
	         getenv("ROOT") ? getenv("ROOT") : ".");
	if (access(file, R_OK) < 0)
		cr_skip_test("no %s (run from the tree or with ROOT set)", file);
	struct config c;
	struct policy_conf *pc = NULL;
	cr_assert_eq(config_build_all(&c, &pc, file, NULL, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(pc->nprofiles + pc->npolicies, 0, "the example shows profiles and policies");
	policy_conf_free(pc);
}

/* ---- matching ---------------------------------------------------------------------------- */

static struct profile mk(void)
{
	struct profile p;
	memset(&p, 0, sizeof(p));
	snprintf(p.name, sizeof(p.name), "t");
	return p;
}

static void match(struct profile *p, const char *key, const char *v)
{
	char err[256];
	cr_assert_eq(profile_set_match(p, key, v, err, sizeof(err)), 0, "%s", err);
}

Test(profile, every_given_match_must_hold)
{
	struct profile_subject s = {.name = "redis-server",
	                            .comm = "redis-server",
	                            .exe = "/usr/bin/redis-check-rdb",
	                            .cgroup = "/system.slice/redis-server.service",
	                            .cmdline = "/usr/bin/redis-server 127.0.0.1:6379",
	                            .uid = 999};
	struct profile p = mk();
	match(&p, "name", "redis-*");
	cr_assert(profile_matches(&p, &s));
	match(&p, "exe", "redis-check-rdb"); /* no '/': the binary's basename */
	cr_assert(profile_matches(&p, &s));
	match(&p, "cgroup", "/system.slice/redis*");
	cr_assert(profile_matches(&p, &s));
	match(&p, "uid", "999");
	cr_assert(profile_matches(&p, &s));
	match(&p, "cmdline", ":6379$");
	cr_assert(profile_matches(&p, &s));
	s.uid = 1000;
	cr_assert_not(profile_matches(&p, &s), "one failing match is enough");
	char buf[256];
	profile_describe_matches(&p, buf, sizeof(buf));
	cr_assert_str_eq(buf, "name=redis-* exe=redis-check-rdb cgroup=/system.slice/redis* "
	                      "uid=999 cmdline=~:6379$");
	profile_free(&p);
}

Test(profile, patterns_and_their_errors)
{
	struct profile_subject s = {.name = "postgres",
	                            .comm = "postgres",
	                            .exe = "/usr/lib/postgresql/15/bin/postgres",
	                            .cgroup = "/system.slice/postgresql@15-main.service/x",
	                            .cmdline = "postgres: 15/main: checkpointer ",
	                            .uid = 105};
	struct profile p = mk();
	match(&p, "exe", "/usr/lib/postgresql/*/bin/postgres");
	match(&p, "cgroup", "/system.slice/postgresql@*"); /* '*' crosses '/' */
	match(&p, "cmdline", "checkpointer|walwriter");
	cr_assert(profile_matches(&p, &s));
	char err[256];
	cr_assert_eq(profile_set_match(&p, "exe", "x", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "exe is given twice");
	cr_assert_eq(profile_set_match(&p, "decay_ms", "1s", err, sizeof(err)), 1,
	             "not a match key");
	profile_free(&p);
	p = mk();
	cr_assert_eq(profile_set_match(&p, "cmdline", "([a-z", err, sizeof(err)), -1);
	cr_assert(strstr(err, "is not a regular expression"), "%s", err);
	cr_assert_eq(profile_set_match(&p, "uid", "no-such-user-xyz", err, sizeof(err)), -1);
	cr_assert(strstr(err, "neither a number nor a user name"), "%s", err);
	match(&p, "uid", "root");
	cr_assert_eq(p.m_uid, 0);
	cr_assert_eq(profile_set_match(&p, "cgroup", "system.slice", err, sizeof(err)), -1);
	profile_free(&p);
	/* the first match in file order wins */
	struct profile two[2] = {mk(), mk()};
	snprintf(two[1].name, sizeof(two[1].name), "second");
	match(&two[0], "name", "nginx");
	match(&two[1], "name", "*");
	cr_assert_str_eq(profile_find(two, 2, &s)->name, "second");
	s.name = "nginx";
	cr_assert_str_eq(profile_find(two, 2, &s)->name, "t");
	profile_free(&two[0]);
	profile_free(&two[1]);
}

/* ---- the knobs' decisions (policy.c's pure functions), on policies parsed from a file:
 * each test fails if its knob were parsed but ignored ---- */

static const struct policy *one_policy(struct policy_conf **pc, const char *text)
{
	char err[512] = "";
	*pc = load(text, err, sizeof(err));
	cr_assert_not_null(*pc, "%s", err);
	cr_assert_eq((*pc)->npolicies, 1);
	return &(*pc)->policies[0];
}

/* A cgroup policy (high 80%, low 60%, trim) with the lines extra added. */
static const struct policy *cg_policy(struct policy_conf **pc, const char *extra)
{
	char text[256];
	snprintf(text, sizeof(text),
	         "[policy g]\non = cgroup\nhigh = 80%%\nlow = 60%%\n"
	         "actions = trim\n%s",
	         extra);
	return one_policy(pc, text);
}

#define MS        1000000ull
#define LIMIT     (1000ull << 20)
#define USAGE(pc) ((uint64_t)(pc) * (LIMIT / 100)) /* a percentage of LIMIT */

Test(policydecide, hysteresis_acts_at_high_and_re_arms_only_under_low)
{
	struct policy_conf *pc;
	const struct policy *po = cg_policy(&pc, "min_interval = 0\n");
	struct policy_cg_state st = {.armed = true};
	uint64_t t = 10000 * MS;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(70), LIMIT, t, false, false), POLICY_NONE);
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(85), LIMIT, t, false, false), POLICY_ACT);
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(85), LIMIT, t, false, true), POLICY_NONE,
	             "a run is out: no second one");
	st.last_run_ns = t;
	/* the run left usage at 70%: above low, so crossing high again does nothing... */
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(70), LIMIT, t + MS, false, false),
	             POLICY_NONE);
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(89), LIMIT, t + 2 * MS, false, false),
	             POLICY_NONE, "acted again without going under low (in the same band)");
	/* ...until it went under low */
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(59), LIMIT, t + 3 * MS, false, false),
	             POLICY_REARMED);
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(81), LIMIT, t + 4 * MS, false, false),
	             POLICY_ACT);
	/* the min_interval re-check acts while usage stays high, armed or not */
	st.last_run_ns = t + 4 * MS;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(81), LIMIT, t + 5 * MS, true, false),
	             POLICY_ACT);
	policy_conf_free(pc);
}

Test(policydecide, a_climb_to_a_higher_band_acts_again_without_going_under_low)
{
	struct policy_conf *pc;
	const struct policy *po = cg_policy(&pc, "min_interval = 0\n");
	/* high 80%: the bands' edges are 80, 85, 90 and 95% */
	uint64_t th[POLICY_CG_BANDS + 1];
	policy_cg_thresholds(po, LIMIT, th);
	cr_assert_eq(th[0], USAGE(80));
	cr_assert_eq(th[1], USAGE(60));
	cr_assert_eq(th[2], USAGE(80) + (LIMIT - USAGE(80)) / 4);
	cr_assert_eq(th[4], USAGE(80) + (LIMIT - USAGE(80)) / 4 * 3);
	cr_assert_eq(policy_cg_band(po, USAGE(79), LIMIT), 0);
	cr_assert_eq(policy_cg_band(po, USAGE(80), LIMIT), 1);
	cr_assert_eq(policy_cg_band(po, USAGE(86), LIMIT), 2);
	cr_assert_eq(policy_cg_band(po, USAGE(99), LIMIT), 4);
	cr_assert_eq(policy_cg_band(po, USAGE(99), UINT64_MAX), 0, "no limit, no bands");
	struct policy_cg_state st = {.armed = true};
	uint64_t t = 10000 * MS;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(81), LIMIT, t, false, false), POLICY_ACT);
	st.last_run_ns = t;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(84), LIMIT, t + MS, false, false), POLICY_NONE,
	             "the same band: hysteresis holds");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(86), LIMIT, t + 2 * MS, false, false),
	             POLICY_ACT, "usage climbed past where the policy acted");
	st.last_run_ns = t + 2 * MS;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(82), LIMIT, t + 3 * MS, false, false),
	             POLICY_NONE, "down a band is no climb");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(87), LIMIT, t + 4 * MS, false, false),
	             POLICY_NONE, "back in the band it acted in");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(96), LIMIT, t + 5 * MS, false, false),
	             POLICY_ACT);
	policy_conf_free(pc);
	/* within min_interval a climb acts at once: the OOM scenario's A crossed high with its
	 * own allocation, the run gave back 0.5 MiB of populated-ahead pages (so it started
	 * the interval) and B's climb through 81, 88 and 94% was deferred to the interval's
	 * end, after the limit (bench policy: 10-15/20 OOM-killed) */
	po = cg_policy(&pc, "min_interval = 1s\n");
	st = (struct policy_cg_state){.armed = true};
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(81), LIMIT, t, false, false), POLICY_ACT);
	st.last_run_ns = t;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(84), LIMIT, t + 5 * MS, true, false),
	             POLICY_DEFER, "the same band's re-check waits for the interval");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(86), LIMIT, t + 10 * MS, false, false),
	             POLICY_ACT, "a climb within min_interval waited for its end");
	st.last_run_ns = t + 10 * MS;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(88), LIMIT, t + 20 * MS, false, false),
	             POLICY_NONE, "no climb: the band it acted at");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(88), LIMIT, t + 20 * MS, true, false),
	             POLICY_DEFER);
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(96), LIMIT, t + 30 * MS, false, true),
	             POLICY_DEFER, "a climb while a run is out: looked at when it ends");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(89), LIMIT, t + 30 * MS, false, true),
	             POLICY_NONE, "a run is out, no climb: that run answers it");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(96), LIMIT, t + 40 * MS, false, false),
	             POLICY_ACT);
	policy_conf_free(pc);
}

Test(policydecide, min_interval_spaces_the_runs)
{
	struct policy_conf *pc;
	const struct policy *po = cg_policy(&pc, "min_interval = 2s\n");
	struct policy_cg_state st = {.armed = true};
	uint64_t t = 10000 * MS;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(85), LIMIT, t, false, false), POLICY_ACT);
	st.last_run_ns = t;
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(50), LIMIT, t + 100 * MS, false, false),
	             POLICY_REARMED);
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(85), LIMIT, t + 1999 * MS, false, false),
	             POLICY_DEFER, "acted 1.999 s after the last run with min_interval 2 s");
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(85), LIMIT, t + 1999 * MS, true, false),
	             POLICY_DEFER);
	cr_assert_eq(policy_cg_decide(po, &st, USAGE(85), LIMIT, t + 2000 * MS, false, false),
	             POLICY_ACT);
	/* psi policies: the same interval, from the same clock */
	struct policy_conf *pc2;
	const struct policy *psi = one_policy(&pc2, "[policy p]\non = psi\npsi = some 150ms 2s\n"
	                                            "actions = trim\nmin_interval = 2s\n");
	cr_assert_eq(policy_interval_wait(psi, t, t + 1500 * MS), 500 * MS);
	cr_assert_eq(policy_interval_wait(psi, t, t + 2000 * MS), 0);
	cr_assert_eq(policy_interval_wait(psi, 0, t), 0, "no run yet: no interval");
	uint64_t goal = 0, pending = 0;
	cr_assert_eq(
	        policy_psi_decide(psi, t, &pending, false, t + 2000 * MS, UINT64_MAX, false, &goal),
	        POLICY_ACT);
	cr_assert_eq(goal, UINT64_MAX, "no goal, no min_available: all reclaimable");
	policy_conf_free(pc);
	policy_conf_free(pc2);
}

Test(policydecide, a_psi_event_within_min_interval_is_acted_on_when_it_ends)
{
	struct policy_conf *pc;
	const struct policy *psi = one_policy(&pc, "[policy p]\non = psi\npsi = some 150ms 2s\n"
	                                           "actions = trim\nmin_interval = 2s\n");
	uint64_t t = 10000 * MS, goal = 0, pending = 0;
	/* a short stall fires once, 0.3 s after the last run began: remembered, not dropped */
	cr_assert_eq(
	        policy_psi_decide(psi, t, &pending, false, t + 300 * MS, UINT64_MAX, false, &goal),
	        POLICY_DEFER);
	cr_assert_eq(pending, t + 300 * MS, "the deferred event was not remembered");
	/* another within the interval: the same pending event (one run answers both) */
	cr_assert_eq(
	        policy_psi_decide(psi, t, &pending, false, t + 1900 * MS, UINT64_MAX, false, &goal),
	        POLICY_DEFER);
	cr_assert_eq(pending, t + 300 * MS);
	/* the look when the interval ends acts on it, though no event came since */
	cr_assert_eq(
	        policy_psi_decide(psi, t, &pending, false, t + 2000 * MS, UINT64_MAX, true, &goal),
	        POLICY_ACT, "the stall reported within min_interval was never acted on");
	cr_assert_eq(goal, UINT64_MAX);
	cr_assert_eq(pending, 0, "acted on: nothing pending any more");
	/* a look with nothing deferred does nothing */
	cr_assert_eq(
	        policy_psi_decide(psi, t, &pending, false, t + 2100 * MS, UINT64_MAX, true, &goal),
	        POLICY_NONE);
	/* an event while a run is out waits for it (and then for the interval) */
	cr_assert_eq(policy_psi_decide(psi, t + 2000 * MS, &pending, true, t + 2050 * MS,
	                               UINT64_MAX, false, &goal),
	             POLICY_DEFER, "a run is out");
	cr_assert_eq(pending, t + 2050 * MS);
	cr_assert_eq(policy_psi_decide(psi, t + 2000 * MS, &pending, false, t + 3000 * MS,
	                               UINT64_MAX, true, &goal),
	             POLICY_DEFER, "the run ended, but its interval did not");
	cr_assert_eq(policy_psi_decide(psi, t + 2000 * MS, &pending, false, t + 4000 * MS,
	                               UINT64_MAX, true, &goal),
	             POLICY_ACT);
	policy_conf_free(pc);
	/* with min_available the deferred event acts only if memory is still short then, with
	 * the goal of that moment */
	psi = one_policy(&pc, "[policy p]\non = psi\npsi = some 150ms 2s\nmin_available = 512M\n"
	                      "actions = trim\nmin_interval = 2s\n");
	pending = 0;
	cr_assert_eq(policy_psi_decide(psi, t, &pending, false, t + 300 * MS, 100ull << 20, false,
	                               &goal),
	             POLICY_DEFER);
	cr_assert_eq(policy_psi_decide(psi, t, &pending, false, t + 2000 * MS, 500ull << 20, true,
	                               &goal),
	             POLICY_ACT);
	cr_assert_eq(goal, 12ull << 20, "the goal is what is short when it acts");
	cr_assert_eq(policy_psi_decide(psi, t + 2000 * MS, &pending, false, t + 2100 * MS,
	                               100ull << 20, false, &goal),
	             POLICY_DEFER);
	cr_assert_eq(policy_psi_decide(psi, t + 2000 * MS, &pending, false, t + 4000 * MS,
	                               600ull << 20, true, &goal),
	             POLICY_NONE, "acted though MemAvailable was back above min_available");
	cr_assert_eq(pending, 0, "a moot event stays pending");
	policy_conf_free(pc);
}

Test(policydecide, min_available_gates_a_psi_policy_and_sets_its_goal)
{
	struct policy_conf *pc;
	const struct policy *po = one_policy(&pc, "[policy p]\non = psi\npsi = some 150ms 2s\n"
	                                          "min_available = 512M\nactions = trim\n");
	uint64_t goal = 0, t = 10000 * MS;
	uint64_t none = 0;
	cr_assert_eq(policy_psi_decide(po, 0, &none, false, t, 1ull << 30, false, &goal),
	             POLICY_NONE, "acted with 1 GiB available, min_available 512 MiB");
	cr_assert_eq(policy_psi_decide(po, 0, &none, false, t, 512ull << 20, false, &goal),
	             POLICY_NONE);
	cr_assert_eq(policy_psi_decide(po, 0, &none, false, t, 400ull << 20, false, &goal),
	             POLICY_ACT);
	cr_assert_eq(goal, 112ull << 20, "the goal is what brings MemAvailable back to 512 MiB");
	policy_conf_free(pc);
}

Test(policydecide, scope_all_covers_processes_outside_the_cgroup)
{
	struct policy_conf *pc, *pc2;
	const struct policy *own = cg_policy(&pc, "");
	const struct policy *all = cg_policy(&pc2, "scope = all\n");
	cr_assert(policy_cg_covers(own, "/svc/a", "/svc/a"));
	cr_assert(policy_cg_covers(own, "/svc/a/worker", "/svc/a"));
	cr_assert_not(policy_cg_covers(own, "/svc/ab", "/svc/a"), "a name prefix is not a child");
	cr_assert_not(policy_cg_covers(own, "/other", "/svc/a"));
	cr_assert_not(policy_cg_covers(own, NULL, "/svc/a"));
	cr_assert(policy_cg_covers(all, "/other", "/svc/a"), "scope = all ignored");
	cr_assert(policy_cg_covers(all, NULL, "/svc/a"));
	cr_assert(policy_cg_covers(own, "/other", NULL), "no cgroup (psi/time): everyone");
	policy_conf_free(pc);
	policy_conf_free(pc2);
}

Test(policydecide, cpu_budget_makes_steps_wait_until_the_time_is_paid_back)
{
	struct policy_conf *pc, *pc2;
	const struct policy *po = cg_policy(&pc, "cpu_budget = 10%\n");
	const struct policy *free_ = cg_policy(&pc2, "");
	struct policy_budget b = {0}, nb = {0};
	uint64_t t = 10000 * MS;
	/* full at start: a second's worth of 10% (100 ms) */
	cr_assert_eq(policy_budget_wait(po, &b, t), 0);
	policy_budget_spend(po, &b, 150 * MS); /* 50 ms in debt: 500 ms at 10%, 1 ms more */
	cr_assert_eq(policy_budget_wait(po, &b, t), 501 * MS, "waits %" PRIu64 " ns",
	             policy_budget_wait(po, &b, t));
	cr_assert_gt(policy_budget_wait(po, &b, t + 400 * MS), 0);
	cr_assert_eq(policy_budget_wait(po, &b, t + 500 * MS), 0);
	/* it never holds more than a second's worth */
	cr_assert_eq(policy_budget_wait(po, &b, t + 100000 * MS), 0);
	policy_budget_spend(po, &b, 101 * MS);
	cr_assert_gt(policy_budget_wait(po, &b, t + 100000 * MS), 0);
	/* no budget: never waits */
	cr_assert_eq(policy_budget_wait(free_, &nb, t), 0);
	policy_budget_spend(free_, &nb, 10000 * MS);
	cr_assert_eq(policy_budget_wait(free_, &nb, t), 0);
	policy_conf_free(pc);
	policy_conf_free(pc2);
}
