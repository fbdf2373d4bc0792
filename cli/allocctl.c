/* allocctl.c — the operator's command-line tool: parses the command line, builds one
 * ctl.proto request per command, sends it to allocctld (client.c) and renders the reply
 * (render.c). Exit status: 0 success, 1 failure (daemon, process or command), 2 usage.
 * Values are validated here against liballoc_shm.h's tunable table before anything is
 * sent; the process remains the authority and its refusals are reported as they come. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "fmt.h"
#include "history.h"
#include "render.h"
#include "top.h"
#include "tunable.h"
#include "liballoc_shm.h"
#include "wire.h"

#define DEFAULT_TIMEOUT_MS 10000

struct ctx {
	struct client client;
	struct render_opts o;
	const struct command *cmd;
};

struct command {
	const char *name;
	int (*run)(struct ctx *, int argc, char **argv);
	const char *args;    /* usage after the command name */
	const char *summary; /* one line for the command list */
	const char *help;    /* further lines for COMMAND --help */
	bool json;           /* accepts --json */
};

static const struct command *find_command(const char *name);

/* ---- messages ----------------------------------------------------------------------- */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("allocctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int usage_error(const struct command *cmd, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static int usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("allocctl: ", stderr);
	if (cmd)
		fprintf(stderr, "%s: ", cmd->name);
	vfprintf(stderr, fmt, ap);
	if (cmd)
		fprintf(stderr, " (usage: allocctl %s%s%s)\n", cmd->name, *cmd->args ? " " : "",
		        cmd->args);
	else
		fputs(" (see allocctl --help)\n", stderr);
	va_end(ap);
	return EXIT_USAGE;
}

/* ---- command-line helpers ----------------------------------------------------------- */

/* Options of one command: "--name VALUE", "--name=VALUE" or a flag "--name". */
struct opt {
	const char *name;
	bool has_value;
	const char *value; /* out: the value, or "" for a flag that was given */
};

/* Splits argv into options (filled into opts) and positionals (compacted into argv).
 * Returns the number of positionals, or -1 after printing a usage error. */
static int parse_options(const struct command *cmd, int argc, char **argv, struct opt *opts,
                         size_t nopts)
{
	int npos = 0;
	bool only_pos = false;
	for (int i = 0; i < argc; i++) {
		char *a = argv[i];
		if (only_pos || a[0] != '-' || a[1] == 0) {
			argv[npos++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_pos = true;
			continue;
		}
		const char *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		struct opt *o = NULL;
		for (size_t k = 0; k < nopts; k++)
			if (strlen(opts[k].name) == len && strncmp(opts[k].name, a, len) == 0)
				o = &opts[k];
		if (!o) {
			char valid[256] = "";
			size_t off = 0;
			for (size_t k = 0; k < nopts && off < sizeof(valid); k++)
				off += (size_t)snprintf(valid + off, sizeof(valid) - off, "%s%s%s",
				                        k ? ", " : "", opts[k].name,
				                        opts[k].has_value ? " VALUE" : "");
			usage_error(cmd, "unknown option '%.*s'%s%s", (int)len, a,
			            nopts ? "; valid here: " : "; this command takes no options",
			            valid);
			return -1;
		}
		if (!o->has_value) {
			if (eq) {
				usage_error(cmd, "option %s takes no value", o->name);
				return -1;
			}
			o->value = "";
		} else if (eq) {
			o->value = eq + 1;
		} else if (i + 1 < argc) {
			o->value = argv[++i];
		} else {
			usage_error(cmd, "option %s needs a value", o->name);
			return -1;
		}
	}
	return npos;
}

static int parse_pid_arg(const struct command *cmd, const char *s, int32_t *pid)
{
	if (fmt_parse_pid(s, pid) == 0)
		return 0;
	return usage_error(cmd,
	                   "invalid PID '%s': expected a process id from 1 to %d (see "
	                   "allocctl ps)",
	                   s, INT32_MAX);
}

/* PID | --exe NAME | --all, for set/trim/release/flush. Consumes one positional for PID.
 * Returns 0, or EXIT_USAGE after printing. */
static int parse_target(const struct command *cmd, struct opt *exe, struct opt *all, int *npos,
                        char **pos, Ctl__Target *t, bool *multi)
{
	int32_t pid;
	int given = (exe->value != NULL) + (all->value != NULL) +
	            (*npos > 0 && fmt_parse_pid(pos[0], &pid) == 0);
	if (given > 1)
		return usage_error(cmd, "give one target: a PID, --exe NAME or --all");
	*multi = exe->value || all->value;
	if (exe->value) {
		if (!*exe->value)
			return usage_error(cmd, "--exe needs an executable name, e.g. --exe nginx");
		t->exe = (char *)exe->value;
		return 0;
	}
	if (all->value) {
		t->has_all = 1;
		t->all = 1;
		return 0;
	}
	if (*npos < 1 || strchr(pos[0], '='))
		return usage_error(cmd, "missing target: give a PID, --exe NAME or --all");
	if (parse_pid_arg(cmd, pos[0], &pid))
		return EXIT_USAGE;
	t->has_pid = 1;
	t->pid = pid;
	memmove(pos, pos + 1, (size_t)(*npos - 1) * sizeof(*pos));
	(*npos)--;
	return 0;
}

static int check_tunable_name(const struct command *cmd, const char *name,
                              const struct tunable_info **out)
{
	const struct tunable_info *t = tunable_find(name);
	if (t) {
		*out = t;
		return 0;
	}
	char names[1024];
	return usage_error(cmd, "unknown tunable '%s'; valid tunables: %s", name,
	                   tunable_names(names, sizeof(names)));
}

/* ---- replies ------------------------------------------------------------------------ */

/* Sends env; on transport failure or a request-level error prints one line and returns
 * NULL. */
static Ctl__Reply *checked(struct ctx *c, Ctl__Reply *r, int32_t pid);
static Ctl__Reply *call(struct ctx *c, Ctl__Envelope *env, int32_t pid)
{
	return checked(c, client_call(&c->client, env), pid);
}

/* A reply, or NULL after one line on stderr (transport failure or an error code). */
static Ctl__Reply *checked(struct ctx *c, Ctl__Reply *r, int32_t pid)
{
	if (!r) {
		fail("%s", c->client.error);
		return NULL;
	}
	if (r->code != CTL__ERROR_CODE__OK) {
		char buf[1536];
		fail("%s", render_error(buf, sizeof(buf), r->code, r->message, pid, getuid()));
		ctl__reply__free_unpacked(r, NULL);
		return NULL;
	}
	return r;
}

/* Reports every failed per-process result on stderr. Returns EXIT_OK if all succeeded. */
static int check_results(const Ctl__Reply *r, const Ctl__Target *t)
{
	if (r->n_results == 0) {
		if (t && t->exe)
			fail("no process named %s that you may act on runs under liballoc (see "
			     "`allocctl ps`)",
			     t->exe);
		else if (t && t->has_all)
			fail("no process you may act on runs under liballoc (see allocctl ps)");
		else
			fail("the daemon returned no result (is it the same protocol version, %u?)",
			     CTL_PROTOCOL_VERSION);
		return EXIT_FAIL;
	}
	int status = EXIT_OK;
	for (size_t i = 0; i < r->n_results; i++) {
		const Ctl__CommandResult *x = r->results[i];
		if (x->code == CTL__ERROR_CODE__OK)
			continue;
		char buf[1536];
		fail("%s", render_error(buf, sizeof(buf), x->code, x->message, x->pid, getuid()));
		status = EXIT_FAIL;
	}
	return status;
}

/* ---- commands ----------------------------------------------------------------------- */

/* Commands that take options only: -1 when the line is fine, else the exit status. */
static int no_arguments(struct ctx *c, int argc, char **argv)
{
	int npos = parse_options(c->cmd, argc, argv, NULL, 0);
	if (npos < 0)
		return EXIT_USAGE;
	if (npos > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);
	return -1;
}

static int cmd_ps(struct ctx *c, int argc, char **argv)
{
	int bad = no_arguments(c, argc, argv);
	if (bad >= 0)
		return bad;
	Ctl__Reply *r = checked(c, client_list(&c->client), 0);
	if (!r)
		return EXIT_FAIL;
	render_ps(stdout, r->list ? r->list->processes : NULL, r->list ? r->list->n_processes : 0,
	          &c->o);
	ctl__reply__free_unpacked(r, NULL);
	return EXIT_OK;
}

static int cmd_stats(struct ctx *c, int argc, char **argv)
{
	int npos = parse_options(c->cmd, argc, argv, NULL, 0);
	if (npos < 0)
		return EXIT_USAGE;
	if (npos != 1)
		return usage_error(c->cmd, npos ? "too many arguments" : "missing PID");
	Ctl__StatsRequest req = CTL__STATS_REQUEST__INIT;
	if (parse_pid_arg(c->cmd, argv[0], &req.pid))
		return EXIT_USAGE;
	Ctl__Reply *r = checked(c, client_stats(&c->client, req.pid), req.pid);
	if (!r)
		return EXIT_FAIL;
	int status = EXIT_OK;
	if (!r->stats || !r->stats->process) {
		fail("the daemon's reply to stats %" PRId32 " carries no statistics", req.pid);
		status = EXIT_FAIL;
	} else {
		render_stats(stdout, r->stats, &c->o);
	}
	ctl__reply__free_unpacked(r, NULL);
	return status;
}

/* GetRequest for pid and names; returns the reply (results checked) or NULL. */
static Ctl__Reply *get_tunables(struct ctx *c, int32_t pid, char **names, size_t n, bool quiet)
{
	Ctl__GetRequest req = CTL__GET_REQUEST__INIT;
	req.pid = pid;
	req.names = names;
	req.n_names = n;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_GET;
	env.get = &req;
	if (quiet) {
		Ctl__Reply *r = client_call(&c->client, &env);
		if (r && (r->code != CTL__ERROR_CODE__OK || r->n_results != 1 ||
		          r->results[0]->code != CTL__ERROR_CODE__OK)) {
			ctl__reply__free_unpacked(r, NULL);
			r = NULL;
		}
		return r;
	}
	return call(c, &env, pid);
}

static int cmd_get(struct ctx *c, int argc, char **argv)
{
	int npos = parse_options(c->cmd, argc, argv, NULL, 0);
	if (npos < 0)
		return EXIT_USAGE;
	if (npos < 1)
		return usage_error(c->cmd, "missing PID");
	int32_t pid;
	if (parse_pid_arg(c->cmd, argv[0], &pid))
		return EXIT_USAGE;
	const struct tunable_info *t = NULL;
	for (int i = 1; i < npos; i++)
		if (check_tunable_name(c->cmd, argv[i], &t))
			return EXIT_USAGE;
	Ctl__Reply *r = get_tunables(c, pid, argv + 1, (size_t)(npos - 1), false);
	if (!r)
		return EXIT_FAIL;
	int status = check_results(r, NULL);
	render_get(stdout, r->results, r->n_results, &c->o);
	ctl__reply__free_unpacked(r, NULL);
	return status;
}

static int cmd_set(struct ctx *c, int argc, char **argv)
{
	struct opt opts[] = {{"--exe", true, NULL}, {"--all", false, NULL}, {"--for", true, NULL}};
	int npos = parse_options(c->cmd, argc, argv, opts, 3);
	if (npos < 0)
		return EXIT_USAGE;
	int64_t hold_ms = 0;
	if (opts[2].value && (fmt_parse_ms(opts[2].value, &hold_ms) < 0 || hold_ms < 1 ||
	                      hold_ms > 30LL * 24 * 3600 * 1000))
		return usage_error(c->cmd,
		                   "invalid --for '%s': expected a duration from 1ms to 30 days, "
		                   "e.g. 15m, 2h",
		                   opts[2].value);
	Ctl__Target target = CTL__TARGET__INIT;
	bool multi;
	if (parse_target(c->cmd, &opts[0], &opts[1], &npos, argv, &target, &multi))
		return EXIT_USAGE;
	if (npos < 1)
		return usage_error(c->cmd, "missing NAME=VALUE (e.g. mmap_threshold=1M)");

	size_t n = (size_t)npos;
	Ctl__SetRequest__Assignment *as = calloc(n, sizeof(*as));
	Ctl__SetRequest__Assignment **asp = calloc(n, sizeof(*asp));
	char **names = calloc(n, sizeof(*names));
	char(*values)[32] = calloc(n, sizeof(*values));
	int status = EXIT_FAIL;
	Ctl__Reply *before = NULL, *r = NULL;
	if (!as || !asp || !names || !values) {
		fail("out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i]) {
			status = usage_error(c->cmd, "expected NAME=VALUE, got '%s'", argv[i]);
			goto out;
		}
		*eq = 0;
		const struct tunable_info *t = NULL;
		if (check_tunable_name(c->cmd, argv[i], &t)) {
			status = EXIT_USAGE;
			goto out;
		}
		for (size_t k = 0; k < i; k++)
			if (strcmp(names[k], argv[i]) == 0) {
				status = usage_error(c->cmd, "%s is assigned twice", argv[i]);
				goto out;
			}
		int64_t v;
		char err[512];
		if (tunable_parse(t, eq + 1, &v, err, sizeof(err)) < 0) {
			status = usage_error(c->cmd, "%s", err);
			goto out;
		}
		names[i] = argv[i];
		snprintf(values[i], sizeof(values[i]), "%" PRId64, v);
		ctl__set_request__assignment__init(&as[i]);
		as[i].name = argv[i];
		as[i].value = values[i];
		asp[i] = &as[i];
	}

	/* Read the current values first so the change can be shown as before -> after. */
	if (target.has_pid)
		before = get_tunables(c, target.pid, names, n, true);

	Ctl__SetRequest req = CTL__SET_REQUEST__INIT;
	req.target = &target;
	req.assignments = asp;
	req.n_assignments = n;
	req.has_hold_ms = hold_ms > 0;
	req.hold_ms = (uint64_t)hold_ms;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_SET;
	env.set = &req;
	r = call(c, &env, target.pid);
	if (!r)
		goto out;
	status = check_results(r, &target);
	c->o.show_exe = multi;
	render_set(stdout, r->results, r->n_results, before ? before->results[0] : NULL, &c->o);
out:
	if (before)
		ctl__reply__free_unpacked(before, NULL);
	if (r)
		ctl__reply__free_unpacked(r, NULL);
	free(as);
	free(asp);
	free(names);
	free(values);
	return status;
}

/* trim, release, flush: a target, trim also --pad. */
static int cmd_action(struct ctx *c, int argc, char **argv)
{
	bool is_trim = strcmp(c->cmd->name, "trim") == 0;
	struct opt opts[] = {{"--exe", true, NULL}, {"--all", false, NULL}, {"--pad", true, NULL}};
	int npos = parse_options(c->cmd, argc, argv, opts, is_trim ? 3 : 2);
	if (npos < 0)
		return EXIT_USAGE;
	Ctl__Target target = CTL__TARGET__INIT;
	bool multi;
	if (parse_target(c->cmd, &opts[0], &opts[1], &npos, argv, &target, &multi))
		return EXIT_USAGE;
	if (npos > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);

	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	Ctl__TrimRequest trim = CTL__TRIM_REQUEST__INIT;
	Ctl__ReleaseRequest release = CTL__RELEASE_REQUEST__INIT;
	Ctl__FlushRequest flush = CTL__FLUSH_REQUEST__INIT;
	if (is_trim) {
		if (opts[2].value) {
			if (fmt_parse_size(opts[2].value, &trim.pad) < 0)
				return usage_error(
				        c->cmd,
				        "invalid --pad '%s': expected a size in bytes, e.g. "
				        "0, 64K, 1.5M",
				        opts[2].value);
			trim.has_pad = 1;
		}
		trim.target = &target;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_TRIM;
		env.trim = &trim;
	} else if (strcmp(c->cmd->name, "release") == 0) {
		release.target = &target;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_RELEASE;
		env.release = &release;
	} else {
		flush.target = &target;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_FLUSH;
		env.flush = &flush;
	}
	Ctl__Reply *r = call(c, &env, target.pid);
	if (!r)
		return EXIT_FAIL;
	int status = check_results(r, &target);
	c->o.show_exe = multi;
	render_action(stdout, c->cmd->name, r->results, r->n_results, &c->o);
	ctl__reply__free_unpacked(r, NULL);
	return status;
}

static int cmd_top(struct ctx *c, int argc, char **argv)
{
	struct opt opts[] = {{"--interval", true, NULL}, {"--iterations", true, NULL}};
	int npos = parse_options(c->cmd, argc, argv, opts, 2);
	if (npos < 0)
		return EXIT_USAGE;
	if (npos > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);
	int64_t interval = 1000, iterations = 0;
	if (opts[0].value &&
	    (fmt_parse_ms(opts[0].value, &interval) < 0 || interval < 100 || interval > 3600000))
		return usage_error(c->cmd,
		                   "invalid --interval '%s': expected a duration from 100ms to 1h, "
		                   "e.g. 2s, 500ms",
		                   opts[0].value);
	if (opts[1].value && (fmt_parse_int(opts[1].value, &iterations) < 0 || iterations < 1))
		return usage_error(c->cmd, "invalid --iterations '%s': expected a count >= 1",
		                   opts[1].value);
	if (iterations == 0 && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
		return usage_error(c->cmd, "top needs a terminal; without one give --iterations N "
		                           "for N plain snapshots (or use allocctl ps --json)");
	return top_run(&c->client, &c->o, (int)interval, (long)iterations);
}

static int cmd_history(struct ctx *c, int argc, char **argv)
{
	struct opt opts[] = {
	        {"--since", true, NULL}, {"--res", true, NULL}, {"--points", true, NULL}};
	int npos = parse_options(c->cmd, argc, argv, opts, 3);
	if (npos < 0)
		return EXIT_USAGE;
	if (npos != 1)
		return usage_error(c->cmd, npos ? "too many arguments" : "missing PID");
	int32_t pid;
	if (parse_pid_arg(c->cmd, argv[0], &pid))
		return EXIT_USAGE;
	int64_t since = 15 * 60 * 1000, points = 60;
	if (opts[0].value && (fmt_parse_ms(opts[0].value, &since) < 0 || since < 1000 ||
	                      since > 7LL * 24 * 3600 * 1000))
		return usage_error(c->cmd,
		                   "invalid --since '%s': expected a duration from 1s to 7 days, "
		                   "e.g. 5m, 2h, 24h",
		                   opts[0].value);
	const char *res = opts[1].value;
	if (res && strcmp(res, "fine") && strcmp(res, "coarse") && strcmp(res, "auto"))
		return usage_error(c->cmd, "invalid --res '%s': expected fine, coarse or auto",
		                   res);
	if (opts[2].value &&
	    (fmt_parse_int(opts[2].value, &points) < 0 || points < 1 || points > 100000))
		return usage_error(c->cmd,
		                   "invalid --points '%s': expected a count from 1 to 100000",
		                   opts[2].value);
	Ctl__HistoryRequest req = CTL__HISTORY_REQUEST__INIT;
	req.n_pids = 1;
	req.pids = &pid;
	req.has_since_ms = true;
	req.since_ms = (int64_t)(c->o.now_ns / 1000000ULL) - since;
	req.resolution = (char *)res;
	req.has_max_points = true;
	req.max_points = (uint32_t)points;
	req.has_events = req.events = true;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_HISTORY;
	env.history = &req;
	Ctl__Reply *r = call(c, &env, pid);
	if (!r)
		return EXIT_FAIL;
	int status = EXIT_OK;
	if (!r->history || !history_of(r->history, pid)) {
		fail("the daemon's reply to history %" PRId32 " carries no history (is it older "
		     "than this allocctl?)",
		     pid);
		status = EXIT_FAIL;
	} else {
		render_history(stdout, r->history, &c->o);
	}
	ctl__reply__free_unpacked(r, NULL);
	return status;
}

static int cmd_version(struct ctx *c, int argc, char **argv)
{
	int bad = no_arguments(c, argc, argv);
	if (bad >= 0)
		return bad;
	Ctl__VersionRequest req = CTL__VERSION_REQUEST__INIT;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_VERSION;
	env.version = &req;
	Ctl__Reply *r = call(c, &env, 0);
	/* The client's own version is printed even when the daemon cannot be reached. */
	render_version(stdout, r ? r->version : NULL, c->client.socket, &c->o);
	if (!r)
		return EXIT_FAIL;
	int status = EXIT_OK;
	if (!r->version) {
		fail("the daemon's reply carries no version");
		status = EXIT_FAIL;
	}
	ctl__reply__free_unpacked(r, NULL);
	return status;
}

/* profiles, policies: one PolicyRequest, two views. */
static int cmd_policy(struct ctx *c, int argc, char **argv)
{
	int bad = no_arguments(c, argc, argv);
	if (bad >= 0)
		return bad;
	Ctl__PolicyRequest req = CTL__POLICY_REQUEST__INIT;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_POLICY;
	env.policy = &req;
	Ctl__Reply *r = call(c, &env, 0);
	if (!r)
		return EXIT_FAIL;
	int status = EXIT_OK;
	if (!r->policy) {
		fail("the daemon's reply carries no policies (is it older than this allocctl?)");
		status = EXIT_FAIL;
	} else if (strcmp(c->cmd->name, "profiles") == 0) {
		render_profiles(stdout, r->policy, &c->o);
	} else {
		render_policies(stdout, r->policy, &c->o);
	}
	ctl__reply__free_unpacked(r, NULL);
	return status;
}

/* log: the audit trail, fetched in pages of the daemon's reply size. */
static int cmd_log(struct ctx *c, int argc, char **argv)
{
	struct opt opts[] = {{"--since", true, NULL}, {"--last", true, NULL}};
	int npos = parse_options(c->cmd, argc, argv, opts, 2);
	if (npos < 0)
		return EXIT_USAGE;
	if (npos > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);
	int64_t since = 0, last = 0;
	if (opts[0].value && (fmt_parse_int(opts[0].value, &since) < 0 || since < 0))
		return usage_error(c->cmd, "invalid --since '%s': expected a sequence number >= 0",
		                   opts[0].value);
	if (opts[1].value && (fmt_parse_int(opts[1].value, &last) < 0 || last < 1))
		return usage_error(c->cmd, "invalid --last '%s': expected a count >= 1",
		                   opts[1].value);
	Ctl__AuditEvent **all = NULL;
	size_t n = 0;
	Ctl__Reply **replies = NULL;
	size_t nreplies = 0;
	int status = EXIT_OK;
	uint64_t after = (uint64_t)since;
	for (;;) {
		Ctl__LogRequest req = CTL__LOG_REQUEST__INIT;
		req.has_after_seq = true;
		req.after_seq = after;
		Ctl__Envelope env = CTL__ENVELOPE__INIT;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_LOG;
		env.log = &req;
		Ctl__Reply *r = call(c, &env, 0);
		if (!r) {
			status = EXIT_FAIL;
			break;
		}
		Ctl__Reply **rr = realloc(replies, (nreplies + 1) * sizeof(*rr));
		if (!rr) {
			ctl__reply__free_unpacked(r, NULL);
			fail("out of memory");
			status = EXIT_FAIL;
			break;
		}
		replies = rr;
		replies[nreplies++] = r;
		if (!r->log) {
			fail("the daemon's reply to log carries no events (is it older than this "
			     "allocctl?)");
			status = EXIT_FAIL;
			break;
		}
		size_t k = r->log->n_events;
		Ctl__AuditEvent **a = realloc(all, (n + k + 1) * sizeof(*a));
		if (!a) {
			fail("out of memory");
			status = EXIT_FAIL;
			break;
		}
		all = a;
		memcpy(all + n, r->log->events, k * sizeof(*a));
		n += k;
		/* the daemon scanned up to next_seq unless it stopped at its page size */
		if (k == 0 || r->log->events[k - 1]->seq + 1 >= r->log->next_seq)
			break;
		after = r->log->events[k - 1]->seq;
	}
	if (status == EXIT_OK) {
		size_t skip = last && (size_t)last < n ? n - (size_t)last : 0;
		render_log(stdout, all + skip, n - skip, &c->o);
		if (n == 0 && !c->o.json)
			printf("no events%s\n",
			       getuid() ? " about your processes" : " (nothing was changed yet)");
	}
	for (size_t i = 0; i < nreplies; i++)
		ctl__reply__free_unpacked(replies[i], NULL);
	free(replies);
	free(all);
	return status;
}

static int cmd_help(struct ctx *c, int argc, char **argv);

static const struct command commands[] = {
        {"ps", cmd_ps, "", "list the processes running under liballoc",
         "One line per process: pid, executable, RSS, in use, cached, free resident,\n"
         "reclaimable, non-allocator (other) RSS, threads, uptime and notes (another\n"
         "allocator mapped, control thread off). The figures: allocctl(1), MEMORY FIGURES.\n",
         true},
        {"stats", cmd_stats, "PID", "every statistic of one process",
         "Memory figures, system calls, remote frees, per arena, per size class, tunables.\n",
         true},
        {"get", cmd_get, "PID [NAME...]", "show tunables of one process (all without NAME)",
         "Value, its source (default, environment, mallopt, command, api, dynamic,\n"
         "policy), its valid range and whether it can change live.\n",
         true},
        {"set", cmd_set, "PID|--exe NAME|--all NAME=VALUE... [--for DURATION]",
         "change tunables live in one process, all of an executable, or all",
         "Sizes take units (64K, 1.5M, 2G), booleans on/off, durations 250ms/10s.\n"
         "Prints each new value, and the old one for a PID target.\n"
         "--for DURATION: for a limited time: the process puts each value back by itself\n"
         "then (with or without the daemon); get shows what is held and for how long.\n",
         true},
        {"trim", cmd_action, "PID|--exe NAME|--all [--pad BYTES]",
         "return free memory to the system now, bypassing the throttle",
         "--pad BYTES keeps that much free memory resident in each heap.\n"
         "Prints what was released, how long it took and the system calls made.\n",
         true},
        {"release", cmd_action, "PID|--exe NAME|--all", "unmap every heap that holds no live block",
         "Prints what was released, how long it took and the system calls made.\n", true},
        {"flush", cmd_action, "PID|--exe NAME|--all",
         "return every thread cache to its arena (idle threads included)",
         "Prints what was released, how long it took and the system calls made.\n", true},
        {"history", cmd_history, "PID [--since DURATION] [--res fine|coarse|auto] [--points N]",
         "memory of one process over time, and the events on it",
         "One line per figure (in use, cached, fragmented, free resident, metadata,\n"
         "reclaimable, RSS, non-allocator RSS) with its minimum, maximum, last value and a\n"
         "sparkline, then the events (commands, policy actions, start and exit).\n"
         "--since (default 15m) picks the window: the daemon keeps 15 minutes at 1 s and\n"
         "24 hours at 1 min; --res chooses (auto, the default: fine when the window lies\n"
         "within it); --points (default 60) averages the samples down to that many.\n",
         true},
        {"top", cmd_top, "[--interval DURATION] [--iterations N]",
         "live view sorted by reclaimable memory (q quits)",
         "Keys: q quit; r, u, o, s, p sort by reclaimable, in use, other RSS, RSS, pid.\n"
         "--interval sets the refresh period (default 1s); --iterations N stops after N\n"
         "refreshes (needed when stdout is not a terminal: plain snapshots).\n",
         false},
        {"profiles", cmd_policy, "", "the daemon's profiles: matches, tunables, processes",
         "Each [profile NAME] of the daemon's configuration: what it matches (name, exe,\n"
         "cgroup, uid, cmdline), the tunables it sets, the processes it is the profile of\n"
         "(yours; root: all), and how soon after a process starts it was in effect.\n",
         true},
        {"policies", cmd_policy, "", "the daemon's policies: conditions, actions, what they did",
         "Each [policy NAME]: what it watches (PSI, a cgroup's usage, free or idle\n"
         "processes), its actions (flush, release, trim, decay), the events it saw, the runs\n"
         "it made, what they released and how long the last took from event to end.\n",
         true},
        {"log", cmd_log, "[--since SEQ] [--last N]",
         "the audit trail: every change and command, by whom, with its result",
         "Operators (uid and pid), profiles, policies and expiring changes, oldest first:\n"
         "time, sequence number, trigger, who, action, process, the change (old -> new)\n"
         "or what was released, and the result. The daemon keeps the last audit_ring\n"
         "events (default 2048). --since SEQ: only events after SEQ; --last N: the last N.\n"
         "A user sees the events about their own processes and those they caused.\n",
         true},
        {"version", cmd_version, "", "versions of allocctl and of the daemon", NULL, true},
        {"help", cmd_help, "[COMMAND|tunables]", "this help, a command's, or the tunables",
         "help tunables lists every tunable with its type, default and range.\n", false},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void print_command_help(FILE *f, const struct command *cmd)
{
	fprintf(f, "usage: allocctl [GLOBAL OPTIONS] %s%s%s\n\n%s.\n", cmd->name,
	        *cmd->args ? " " : "", cmd->args, cmd->summary);
	if (cmd->help)
		fprintf(f, "%s", cmd->help);
	fprintf(f,
	        "\nGlobal options: --socket PATH, %s--bytes, --timeout DURATION. See "
	        "allocctl(1).\n",
	        cmd->json ? "--json, " : "");
}

static void print_help(FILE *f)
{
	fprintf(f, "usage: allocctl [--socket PATH] [--json] [--bytes] [--timeout DURATION] "
	           "COMMAND [ARGS]\n\n"
	           "Inspect and tune processes running under liballoc, through allocctld.\n\n"
	           "Commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++) {
		/* the whole usage, however long: the summaries line up after the short ones */
		int w = fprintf(f, "  %s %s", commands[i].name, commands[i].args);
		fprintf(f, "%*s %s\n", w >= 0 && w < 46 ? 46 - w : 0, "", commands[i].summary);
	}
	fprintf(f,
	        "\nGlobal options (anywhere on the line; --version only in place of COMMAND):\n"
	        "  --socket PATH        daemon socket (default $%s, else %s)\n"
	        "  --json               machine-readable output (every command but top and help)\n"
	        "  --bytes              plain byte counts instead of units like 812.0 MiB\n"
	        "  --timeout DURATION   wait this long for each reply (default 10s)\n"
	        "  -h, --help           help; COMMAND --help for one command\n"
	        "  --version            in place of COMMAND: the version command\n\n"
	        "Exit status: 0 success, 1 failure, 2 usage error. See allocctl(1).\n",
	        CTL_SOCKET_ENV, CTL_DEFAULT_SOCKET);
}

/* `help tunables`: the tunable table this allocctl was built with (names, types, defaults,
 * ranges), for reference without a daemon and for shell completion. */
static void print_tunables(FILE *f)
{
	fprintf(f, "%-20s %-5s %10s  %-24s %-4s %s\n", "NAME", "TYPE", "DEFAULT", "RANGE", "LIVE",
	        "DESCRIPTION");
	for (size_t i = 0; i < tunable_count; i++) {
		const struct tunable_info *t = &tunable_table[i];
		char def[FMT_BUF], range[2 * FMT_BUF + 16];
		if (t->def == LA_DEFAULT_AUTO)
			snprintf(def, sizeof(def), "auto");
		else
			tunable_format(def, sizeof(def), t->type, t->def, false);
		tunable_format_range(range, sizeof(range), t->type, t->min, t->max, false);
		fprintf(f, "%-20s %-5s %10s  %-24s %-4s %s\n", t->name, tunable_type_name(t->type),
		        def, range, t->live ? "yes" : "no", t->help);
	}
}

static int cmd_help(struct ctx *c, int argc, char **argv)
{
	if (argc == 0) {
		print_help(stdout);
		return EXIT_OK;
	}
	if (argc == 1 && strcmp(argv[0], "tunables") == 0) {
		print_tunables(stdout);
		return EXIT_OK;
	}
	const struct command *cmd = find_command(argv[0]);
	if (!cmd || argc > 1)
		return usage_error(c->cmd, "unknown command '%s' (commands, or tunables)", argv[0]);
	print_command_help(stdout, cmd);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	const char *socket = NULL;
	bool json = false, raw = false, help = false;
	int64_t timeout_ms = DEFAULT_TIMEOUT_MS;
	const struct command *cmd = NULL;
	/* The command's arguments are compacted in place: rest[k] is written only after
	 * argv[k + 1] has been read. */
	char **rest = argv + 1;
	int nrest = 0;

	/* Global options may appear anywhere before "--"; the first other word is the
	 * command; everything else belongs to the command. */
	bool dashdash = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (dashdash) {
			rest[nrest++] = argv[i];
			continue;
		}
		if (strcmp(a, "--") == 0) {
			dashdash = true;
			rest[nrest++] = argv[i];
		} else if (strcmp(a, "--json") == 0) {
			json = true;
		} else if (strcmp(a, "--bytes") == 0) {
			raw = true;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			help = true;
		} else if (strcmp(a, "--socket") == 0 || strncmp(a, "--socket=", 9) == 0) {
			if (a[8] == '=')
				socket = a + 9;
			else if (i + 1 < argc)
				socket = argv[++i];
			else
				return usage_error(NULL, "--socket needs a path");
			if (!*socket)
				return usage_error(NULL, "--socket needs a non-empty path");
		} else if (strcmp(a, "--timeout") == 0 || strncmp(a, "--timeout=", 10) == 0) {
			const char *v = a[9] == '=' ? a + 10 : i + 1 < argc ? argv[++i] : NULL;
			if (!v)
				return usage_error(NULL, "--timeout needs a duration, e.g. 5s");
			if (fmt_parse_ms(v, &timeout_ms) < 0 || timeout_ms < 1 ||
			    timeout_ms > 3600000)
				return usage_error(
				        NULL,
				        "invalid --timeout '%s': expected a duration from 1ms "
				        "to 1h, e.g. 500ms, 5s",
				        v);
		} else if (!cmd && strcmp(a, "--version") == 0) {
			cmd = find_command("version");
		} else if (!cmd && a[0] != '-') {
			cmd = find_command(a);
			if (!cmd) {
				char names[256] = "";
				size_t off = 0;
				for (size_t k = 0; k < NCOMMANDS; k++)
					off += (size_t)snprintf(names + off, sizeof(names) - off,
					                        "%s%s", k ? ", " : "",
					                        commands[k].name);
				return usage_error(NULL, "unknown command '%s'; commands: %s", a,
				                   names);
			}
		} else if (!cmd) {
			return usage_error(NULL, "unknown option '%s' before the command", a);
		} else {
			rest[nrest++] = argv[i];
		}
	}

	if (!cmd) {
		if (help) {
			print_help(stdout);
			return EXIT_OK;
		}
		print_help(stderr);
		return EXIT_USAGE;
	}
	if (help) {
		print_command_help(stdout, cmd);
		return EXIT_OK;
	}
	if (json && !cmd->json)
		return usage_error(cmd, "--json is not available for %s%s", cmd->name,
		                   strcmp(cmd->name, "top") == 0 ? "; use allocctl ps --json" : "");

	struct ctx c = {.cmd = cmd};
	client_init(&c.client, socket, (int)timeout_ms);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	c.o.json = json;
	c.o.raw = raw;
	c.o.now_ns = (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
	int status = cmd->run(&c, nrest, rest);
	client_close(&c.client);
	if (fflush(stdout) != 0 && status == EXIT_OK) {
		fail("writing the output: %s", strerror(errno));
		status = EXIT_FAIL;
	}
	return status;
}
