/* timeline.c — the history on the daemon's loop: a timer aligned on the sample period
 * samples every discovered process into ctld/history.c's rings, in slices so a sweep of
 * many processes never holds the loop for long; discovery and commands report process
 * exits and actions as events; the control protocol's HistoryRequest is answered here.
 * The HTTP side (JSON and the page) is ctld/dashboard.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "audit.h"
#include "ctl.pb-c.h"
#include "ctld.h"
#include "log.h"
#include "policy.h"
#include "pool.h"
#include "procfs.h"
#include "timeline.h"
#include "units.h"
#include "wire.h"

/* Processes sampled per loop turn, and the loop time a turn may take: a sweep of thousands
 * is cut into slices with the loop's other work (control socket, HTTP) in between. */
#define SLICE    128
#define SLICE_NS 2000000ull

int64_t timeline_now_ms(void)
{
	return (int64_t)(seg_now_ns(CLOCK_REALTIME) / 1000000u);
}

/* The sample's figures from what the segment and /proc say: the memory figures of
 * liballoc_shm.h (la_memory_of, the one definition) and non-allocator RSS, what RSS holds
 * beyond the allocator's resident bytes. The stack sums to RSS where RSS is larger. */
void timeline_figures(const struct la_counters *c, uint64_t rss, uint64_t out[HIST_NFIG])
{
	struct la_memory m;
	la_memory_of(c, &m);
	memset(out, 0, sizeof(uint64_t) * HIST_NFIG);
	out[HIST_F_in_use] = m.in_use;
	out[HIST_F_cached] = m.cached;
	out[HIST_F_fragmented] = m.fragmented;
	out[HIST_F_free_resident] = m.free_resident;
	out[HIST_F_metadata] = m.metadata;
	out[HIST_F_reclaimable] = m.reclaimable;
	out[HIST_F_non_alloc] = la_sub0(rss, m.resident); /* derived again when read */
	out[HIST_F_rss] = rss;
}

/* "512 B", "2.6 MiB": the unit a person reads in an event. */
static void human_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double x = (double)v;
	int u = 0;
	while (x >= 1024 && u < 5) {
		x /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)v);
	else
		snprintf(buf, len, "%.1f %s", x, unit[u]);
}

static void event_for(struct ctld *d, enum hist_event_kind kind, const struct proc *p,
                      const struct hist_proc *hp, int64_t t_ms, const char *who, bool ok,
                      uint64_t bytes, const char *what)
{
	struct timeline *tl = d->tl;
	if (!tl)
		return;
	struct hist_event e;
	memset(&e, 0, sizeof(e));
	e.t_ms = t_ms;
	e.kind = (uint16_t)kind;
	e.ok = ok;
	e.bytes = bytes;
	if (p) {
		e.pid = p->seg.hdr.pid;
		e.uid = p->seg.uid;
		snprintf(e.exe, sizeof(e.exe), "%.63s", proc_name(p));
	} else if (hp) {
		e.pid = hp->pid;
		e.uid = hp->uid;
		snprintf(e.exe, sizeof(e.exe), "%.63s", hp->exe);
	}
	snprintf(e.who, sizeof(e.who), "%s", who ? who : "");
	snprintf(e.what, sizeof(e.what), "%s", what ? what : "");
	history_event(&tl->h, &e, timeline_now_ms());
}

/* ---- sampling ----------------------------------------------------------------------------- */

static struct hist_proc *open_history(struct ctld *d, struct proc *p, int64_t now_ms)
{
	struct timeline *tl = d->tl;
	int64_t started = (int64_t)(p->seg.hdr.created_ns / 1000000u);
	size_t before = tl->h.nprocs;
	struct hist_proc *hp = history_open(&tl->h, p->seg.hdr.pid, p->seg.hdr.start_time,
	                                    p->seg.uid, proc_name(p), started);
	if (!hp) {
		if (!tl->refused_logged)
			log_warn("history: no room for pid %d (history_max_bytes %zu reached); "
			         "it is not recorded",
			         p->seg.hdr.pid, tl->h.max_bytes);
		tl->refused_logged = true;
		return NULL;
	}
	if (tl->h.nprocs != before) {
		char what[96];
		snprintf(what, sizeof(what), "started (uid %u)", p->seg.uid);
		event_for(d, HIST_EV_start, p, NULL,
		          started > 0 && started <= now_ms ? started : now_ms, "", true, 0, what);
	}
	return hp;
}

static void sample_one(struct ctld *d, struct proc *p, int64_t tick_ms)
{
	struct timeline *tl = d->tl;
	if (!p->hist && !(p->hist = open_history(d, p, tick_ms)))
		return;
	/* a read since this tick began (by a list or a scrape) is this tick's sample; the
	 * sweep's own read is the one lists and scrapes take for the next second */
	struct proc_snap s;
	bool ok = proc_snapshot(d, p, &s, 0, seg_now_ns(CLOCK_MONOTONIC) - tl->tick_mono_ns);
	proc_snap_free(&s);
	if (!ok)
		return; /* a gap (torn, or re-examined by discovery) */
	/* profiles are matched at discovery and again on SIGHUP: the newest is the page's */
	const char *profile = policy_proc_profile(p);
	if (strcmp(p->hist->profile, profile ? profile : ""))
		snprintf(p->hist->profile, sizeof(p->hist->profile), "%s", profile ? profile : "");
	uint64_t fig[HIST_NFIG];
	timeline_figures(&s.total, s.rss_bytes, fig);
	history_sample(&tl->h, p->hist, fig, tick_ms);
}

/* a listed process the sweep has not reached yet (discovered since the last tick): its
 * history opens now, with this tick's sample when a tick has begun */
static struct hist_proc *history_now(struct ctld *d, int32_t pid)
{
	struct timeline *tl = d->tl;
	struct proc *p = discover_find(d, pid);
	if (!p)
		return NULL;
	if (!tl->tick)
		return p->hist ? p->hist : (p->hist = open_history(d, p, timeline_now_ms()));
	if (p->hist_tick != tl->tick) {
		p->hist_tick = tl->tick;
		sample_one(d, p, tl->tick_ms);
	}
	return p->hist;
}

static void on_slice(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	struct timeline *tl = d->tl;
	uint64_t t0 = seg_now_ns(CLOCK_MONOTONIC);
	int n = 0;
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	{
		if (p->hist_tick == tl->tick)
			continue;
		if (n == SLICE || ((n & 7) == 7 && seg_now_ns(CLOCK_MONOTONIC) - t0 > SLICE_NS)) {
			slice_again(d, tl->slice); /* the rest after other events */
			break;
		}
		p->hist_tick = tl->tick;
		sample_one(d, p, tl->tick_ms);
		n++;
	}
	tl->sampled += (uint64_t)n;
	tl->sample_ns += seg_now_ns(CLOCK_MONOTONIC) - t0;
}

static void arm_tick(struct timeline *tl)
{
	int64_t now = timeline_now_ms(), ms = tl->h.sample_ms;
	int64_t wait = ms - now % ms;
	struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
	evtimer_add(tl->timer, &tv);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	struct timeline *tl = d->tl;
	int64_t now = timeline_now_ms();
	tl->tick = (uint64_t)now / tl->h.sample_ms;
	tl->tick_ms = (int64_t)tl->tick * tl->h.sample_ms;
	tl->tick_mono_ns = seg_now_ns(CLOCK_MONOTONIC);
	tl->sweeps++;
	loop_lag_probe(d); /* the tick's first slice runs here */
	if (tl->sweeps % 64 == 0)
		history_expire(&tl->h, now);
	arm_tick(tl);
	on_slice(-1, 0, d);
}

/* ---- hooks -------------------------------------------------------------------------------- */

void timeline_proc_gone(struct ctld *d, struct proc *p, const char *why)
{
	struct timeline *tl = d->tl;
	if (!tl || !p->hist)
		return;
	int64_t now = timeline_now_ms();
	event_for(d, HIST_EV_exit, p, NULL, now, "", true, 0, why);
	history_close(&tl->h, p->hist, now, why);
	p->hist = NULL;
}

/* Every action of the audit trail (commands of operators, profiles, policies, reverts,
 * reloads) becomes an event of the timeline, told as a person reads it. */
static void on_audit(const struct audit_event *a, void *arg)
{
	struct ctld *d = arg;
	struct timeline *tl = d->tl;
	if (!tl)
		return;
	struct hist_event e;
	memset(&e, 0, sizeof(e));
	e.t_ms = (int64_t)(a->time_ns / 1000000u);
	switch (a->action) {
	case AUDIT_A_set:
		e.kind = HIST_EV_set;
		break;
	case AUDIT_A_trim:
		e.kind = HIST_EV_trim;
		break;
	case AUDIT_A_release:
		e.kind = HIST_EV_release;
		break;
	case AUDIT_A_flush:
		e.kind = HIST_EV_flush;
		break;
	case AUDIT_A_revert:
		e.kind = HIST_EV_revert;
		break;
	default:
		e.kind = HIST_EV_reload;
		break;
	}
	e.ok = a->result == AUDIT_R_ok;
	e.pid = a->pid;
	e.uid = a->target_uid >= 0 ? (uint32_t)a->target_uid : 0;
	snprintf(e.exe, sizeof(e.exe), "%.63s", a->exe);
	snprintf(e.trigger, sizeof(e.trigger), "%s", audit_trigger_name(a->trigger));
	/* an operator ("uid 0 pid 1234"), "profile NAME", "policy NAME", "hold expired": the
	 * trigger (pressure, time, ...) is its own field */
	snprintf(e.who, sizeof(e.who), "%.63s", a->actor);
	char what[160] = "", v0[32], v1[32];
	if (a->has_values) {
		const struct tunable_info *ti = tunable_find(a->name);
		units_format(ti ? ti->type : LA_T_INT, a->old_value, v0, sizeof(v0));
		units_format(ti ? ti->type : LA_T_INT, a->new_value, v1, sizeof(v1));
		size_t o = (size_t)snprintf(what, sizeof(what), "%.64s %s -> %s", a->name, v0, v1);
		if (a->hold_ms && o < sizeof(what)) {
			units_format(LA_T_MS, (int64_t)a->hold_ms, v0, sizeof(v0));
			snprintf(what + o, sizeof(what) - o, " for %s", v0);
		}
		e.bytes = 0;
	} else if (a->action == AUDIT_A_trim || a->action == AUDIT_A_release ||
	           a->action == AUDIT_A_flush) {
		human_bytes(a->bytes_released, v0, sizeof(v0));
		snprintf(what, sizeof(what), "released %s", v0);
		e.bytes = a->bytes_released;
	} else {
		snprintf(what, sizeof(what), "%s", audit_action_name(a->action));
	}
	if (a->result != AUDIT_R_ok)
		snprintf(e.what, sizeof(e.what), "%.8s%s%.60s%s%.80s", audit_result_name(a->result),
		         a->message[0] ? ": " : "", a->message, what[0] ? " | " : "", what);
	else
		snprintf(e.what, sizeof(e.what), "%s", what);
	history_event(&tl->h, &e, timeline_now_ms());
}

void timeline_write_metrics(struct ctld *d, struct evbuffer *b)
{
	struct timeline *tl = d->tl;
	if (!tl)
		return;
	const struct {
		const char *name, *type, *help;
		double v;
	} m[] = {
	        {"liballoc_ctld_history_bytes", "gauge",
	         "Memory held by the history of every process (bounded by history_max_bytes)",
	         (double)tl->h.bytes},
	        {"liballoc_ctld_history_processes", "gauge",
	         "Processes with a history, exited ones included", (double)tl->h.nprocs},
	        {"liballoc_ctld_history_samples_total", "counter", "Samples stored",
	         (double)tl->h.st.samples},
	        {"liballoc_ctld_history_sample_seconds_total", "counter",
	         "Time spent sampling processes", (double)tl->sample_ns / 1e9},
	        {"liballoc_ctld_history_evicted_total", "counter",
	         "Exited histories dropped to stay within history_max_bytes",
	         (double)tl->h.st.evicted},
	        {"liballoc_ctld_history_truncated_total", "counter",
	         "Histories kept shorter than their window by history_max_bytes or their "
	         "uid's share of it",
	         (double)tl->h.st.truncated},
	        {"liballoc_ctld_history_cut_total", "counter",
	         "Live histories cut to half to give another uid its share of "
	         "history_max_bytes",
	         (double)tl->h.st.cut},
	        {"liballoc_ctld_history_events_total", "counter", "Events put on the timeline",
	         (double)tl->h.st.events},
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.9g\n", m[i].name,
		                    m[i].help, m[i].name, m[i].type, m[i].name, m[i].v);
}

/* ---- life ----------------------------------------------------------------------------------- */

int timeline_init(struct ctld *d)
{
	struct timeline *tl = calloc(1, sizeof(*tl));
	if (!tl ||
	    history_init(&tl->h, (uint32_t)d->cfg.history_sample_ms,
	                 (size_t)d->cfg.history_max_bytes, (uint32_t)d->cfg.history_events)) {
		free(tl);
		log_error("history: out of memory");
		return -1;
	}
	tl->started_ms = timeline_now_ms();
	if (gethostname(tl->host, sizeof(tl->host) - 1) < 0)
		snprintf(tl->host, sizeof(tl->host), "localhost");
	tl->timer = evtimer_new(d->base, on_tick, d);
	tl->slice = event_new(d->base, -1, 0, on_slice, d);
	if (tl->slice)
		event_priority_set(tl->slice, CTLD_PRIO_SLICE);
	if (!tl->timer || !tl->slice) {
		history_free(&tl->h);
		free(tl);
		return -1;
	}
	d->tl = tl;
	if (audit_listen(&d->audit, on_audit, d))
		log_warn("history: cannot listen to the audit trail; commands are not on the "
		         "timeline");
	char what[96];
	snprintf(what, sizeof(what), "allocctld %s started (pid %d)", CTLD_VERSION, (int)getpid());
	event_for(d, HIST_EV_daemon, NULL, NULL, tl->started_ms, "daemon", true, 0, what);
	arm_tick(tl);
	return 0;
}

void timeline_reconfigure(struct ctld *d)
{
	struct timeline *tl = d->tl;
	if (!tl)
		return;
	uint32_t old_ms = tl->h.sample_ms;
	if (history_reconfigure(&tl->h, (uint32_t)d->cfg.history_sample_ms,
	                        (size_t)d->cfg.history_max_bytes, (uint32_t)d->cfg.history_events))
		log_warn("history: out of memory resizing the event ring; keeping %u events",
		         tl->h.ev_cap);
	tl->refused_logged = false;
	if (old_ms != tl->h.sample_ms) {
		log_info("history: sample period %u ms -> %u ms: samples so far dropped", old_ms,
		         tl->h.sample_ms);
		evtimer_del(tl->timer);
		arm_tick(tl);
	}
}

void timeline_shutdown(struct ctld *d)
{
	struct timeline *tl = d->tl;
	if (!tl)
		return;
	audit_unlisten(&d->audit, on_audit, d);
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	p->hist = NULL;
	event_free(tl->timer);
	event_free(tl->slice);
	history_free(&tl->h);
	free(tl);
	d->tl = NULL;
}

/* ---- the control protocol ------------------------------------------------------------------ */

struct series_build {
	struct pool *pl;
	uint64_t *kib[HIST_NFIG];
	size_t n, cap;
	uint32_t group; /* samples averaged into one value */
	uint64_t sum[HIST_NFIG];
	uint32_t in_sum, gaps_in_sum;
	int64_t first_ms;
};

static void series_put(struct series_build *b)
{
	if (!b->in_sum && !b->gaps_in_sum)
		return;
	for (int f = 0; f < HIST_NFIG; f++)
		b->kib[f][b->n] = b->in_sum ? (b->sum[f] + b->in_sum / 2) / b->in_sum : UINT64_MAX;
	b->n++;
	memset(b->sum, 0, sizeof(b->sum));
	b->in_sum = b->gaps_in_sum = 0;
}

static void series_cb(void *arg, int64_t t_ms, const uint32_t *kib)
{
	struct series_build *b = arg;
	if (b->n == 0 && !b->in_sum && !b->gaps_in_sum)
		b->first_ms = t_ms;
	if (kib) {
		for (int f = 0; f < HIST_NFIG; f++)
			b->sum[f] += kib[f];
		b->in_sum++;
	} else {
		b->gaps_in_sum++;
	}
	if (b->in_sum + b->gaps_in_sum == b->group && b->n < b->cap)
		series_put(b);
}

/* Count the samples a walk would give (for the averaging group). */
static void count_cb(void *arg, int64_t t_ms, const uint32_t *kib)
{
	(*(size_t *)arg)++;
}

bool timeline_pick_coarse(const struct history *h, const struct hist_proc *p, const char *res,
                          int64_t since_ms)
{
	if (res && !strcmp(res, "coarse"))
		return true;
	if (res && !strcmp(res, "fine"))
		return false;
	/* coarse only when it reaches back at least one coarse period further than the fine
	 * tier and the request wants that far back */
	int64_t fine_first = history_first_ms(h, p, false);
	if (!p->coarse.len || (p->fine.len && since_ms >= fine_first))
		return false;
	return !p->fine.len ||
	       fine_first - history_first_ms(h, p, true) >= history_period_ms(h, true) * 2;
}

static Ctl__ProcessHistory *process_history(struct pool *pl, const struct history *h,
                                            const struct hist_proc *p, const Ctl__HistoryRequest *q)
{
	Ctl__ProcessHistory *ph = pool_alloc(pl, sizeof(*ph));
	if (!ph)
		return NULL;
	ctl__process_history__init(ph);
	ph->pid = p->pid;
	ph->exe = pool_strdup(pl, p->exe);
	ph->uid = p->uid;
	ph->has_started_ms = true;
	ph->started_ms = p->started_ms;
	if (p->exited_ms) {
		ph->has_exited_ms = true;
		ph->exited_ms = p->exited_ms;
		ph->exit_reason = pool_strdup(pl, p->exit_reason);
	}
	ph->has_truncated = true;
	ph->truncated = p->truncated;
	if (p->profile[0] && !(ph->profile = pool_strdup(pl, p->profile)))
		return NULL;
	int64_t since = q->has_since_ms ? q->since_ms : 0;
	bool coarse = timeline_pick_coarse(h, p, q->resolution, since);
	struct series_build b = {.pl = pl, .group = 1};
	size_t total = 0;
	if (!q->has_samples || q->samples)
		history_walk(h, p, coarse, since, count_cb, &total);
	if (q->has_max_points && q->max_points && total > q->max_points)
		b.group = (uint32_t)((total + q->max_points - 1) / q->max_points);
	b.cap = (total + b.group - 1) / b.group;
	ph->resolution_ms = (uint32_t)(history_period_ms(h, coarse) * b.group);
	ph->series = pool_alloc(pl, sizeof(*ph->series) * HIST_NFIG);
	if (!ph->exe || !ph->series)
		return NULL;
	for (int f = 0; f < HIST_NFIG; f++)
		if (!(b.kib[f] = pool_alloc(pl, sizeof(uint64_t) * (b.cap + 1))))
			return NULL;
	if (total)
		history_walk(h, p, coarse, since, series_cb, &b);
	if (b.n < b.cap)
		series_put(&b);
	if (b.n) {
		ph->has_first_ms = true;
		ph->first_ms = b.first_ms;
	}
	for (int f = 0; f < HIST_NFIG; f++) {
		Ctl__FigureSeries *s = pool_alloc(pl, sizeof(*s));
		if (!s)
			return NULL;
		ctl__figure_series__init(s);
		s->name = (char *)hist_figure_name[f];
		s->kib = b.kib[f];
		s->n_kib = b.n;
		ph->series[ph->n_series++] = s;
	}
	return ph;
}

static bool wanted(const Ctl__HistoryRequest *q, int32_t pid)
{
	if (!q->n_pids)
		return true;
	for (size_t i = 0; i < q->n_pids; i++)
		if (q->pids[i] == pid)
			return true;
	return false;
}

struct event_collect {
	struct pool *pl;
	const Ctl__HistoryRequest *q;
	uid_t uid;
	Ctl__HistoryEvent **ev;
	size_t n, cap;
};

static bool collect_event(void *arg, const struct hist_event *e)
{
	struct event_collect *c = arg;
	if (e->pid && (!wanted(c->q, e->pid) || (c->uid != 0 && c->uid != e->uid)))
		return true;
	if (!e->pid && c->q->n_pids)
		return true;
	if (c->n == c->cap)
		return false;
	Ctl__HistoryEvent *m = pool_alloc(c->pl, sizeof(*m));
	if (!m)
		return false;
	ctl__history_event__init(m);
	m->seq = e->seq;
	m->t_ms = e->t_ms;
	if (e->pid) {
		m->has_pid = true;
		m->pid = e->pid;
		m->exe = pool_strdup(c->pl, e->exe);
	}
	m->kind = (char *)hist_event_kind_name[e->kind < HIST_NEV ? e->kind : HIST_EV_daemon];
	m->who = pool_strdup(c->pl, e->who);
	if (e->trigger[0])
		m->trigger = pool_strdup(c->pl, e->trigger);
	m->what = pool_strdup(c->pl, e->what);
	m->has_bytes = m->has_ok = true;
	m->bytes = e->bytes;
	m->ok = e->ok;
	c->ev[c->n++] = m;
	return true;
}

bool timeline_request(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	const Ctl__HistoryRequest *q = env->history;
	struct timeline *tl = d->tl;
	struct pool pl;
	pool_init(&pl);
	Ctl__Reply r;
	ctl__reply__init(&r);
	r.protocol_version = CTL_PROTOCOL_VERSION;
	r.has_id = env->has_id;
	r.id = env->id;
	r.code = CTL__ERROR_CODE__OK;
	Ctl__HistoryReply hr = CTL__HISTORY_REPLY__INIT;
	uid_t uid = conn_uid(c);
	if (!tl) {
		r.code = CTL__ERROR_CODE__ERR_FAILED;
		r.message = "history is off in this daemon (history_sample_ms = 0)";
		goto send;
	}
	hr.sample_ms = tl->h.sample_ms;
	hr.now_ms = timeline_now_ms();
	r.history = &hr;
	/* a named pid that has no history (or is another user's) is an error, as for stats */
	for (size_t i = 0; i < q->n_pids; i++) {
		struct hist_proc *p = history_find(&tl->h, q->pids[i]);
		static char msg[128];
		if (!p)
			p = history_now(d, q->pids[i]);
		if (!p) {
			snprintf(msg, sizeof(msg),
			         "no history of pid %d: the daemon has not seen it", q->pids[i]);
			r.code = CTL__ERROR_CODE__ERR_NO_PROCESS;
			r.message = msg;
			r.history = NULL;
			goto send;
		}
		if (uid != 0 && uid != p->uid) {
			snprintf(msg, sizeof(msg),
			         "permission denied: pid %d belongs to another user", q->pids[i]);
			d->st.requests_denied++;
			r.code = CTL__ERROR_CODE__ERR_PERMISSION;
			r.message = msg;
			r.history = NULL;
			goto send;
		}
	}
	hr.processes = pool_alloc(&pl, sizeof(*hr.processes) * (tl->h.nprocs + 1));
	size_t budget = CTL_MAX_FRAME - 64 * 1024, used = 0;
	for (struct hist_proc *p = tl->h.head; hr.processes && p; p = p->next) {
		if (!wanted(q, p->pid) || (uid != 0 && uid != p->uid))
			continue;
		/* with several processes of one pid (reused), a named pid gets the newest */
		if (q->n_pids && history_find(&tl->h, p->pid) != p)
			continue;
		Ctl__ProcessHistory *ph = process_history(&pl, &tl->h, p, q);
		if (!ph) {
			hr.processes = NULL;
			break;
		}
		size_t sz = protobuf_c_message_get_packed_size(&ph->base);
		if (used + sz > budget) {
			hr.has_cut = hr.cut = true;
			break;
		}
		used += sz;
		hr.processes[hr.n_processes++] = ph;
	}
	if (q->has_events && q->events) {
		struct event_collect ec = {.pl = &pl, .q = q, .uid = uid, .cap = tl->h.ev_len};
		ec.ev = pool_alloc(&pl, sizeof(*ec.ev) * (ec.cap + 1));
		if (ec.ev)
			history_events(&tl->h, 0, q->has_since_ms ? q->since_ms : 0, collect_event,
			               &ec);
		hr.events = ec.ev;
		hr.n_events = ec.n;
	}
	if (!hr.processes) {
		r.code = CTL__ERROR_CODE__ERR_INTERNAL;
		r.message = "out of memory";
		r.history = NULL;
	}
send:
	conn_send_reply(c, &r);
	pool_free(&pl);
	return false;
}
