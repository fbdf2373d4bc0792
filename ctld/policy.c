/* policy.c — profiles and policies on the daemon's loop (see policy.h).
 *
 * Profiles: when discover.c finds a process, the first matching profile is applied through
 * a set job (trigger "profile"); a tunable someone set explicitly (the environment,
 * mallopt, the program, an operator) is never overwritten: it is skipped and the skip is
 * audited. The delay from the process's exec to the profile being in effect is measured.
 *
 * Policies: pressure watchers (pressure.c) call back here; hysteresis (a cgroup policy acts
 * when usage reaches `high` and again only once it fell below `low`, or when it stays high
 * past `min_interval`), the minimum interval, the CPU budget and dry-run are decided here,
 * then a ladder run walks the covered processes largest reclaimable first, one rung at a
 * time (flush, release, trim), and stops as soon as enough came back (the goal in bytes,
 * or a cgroup usage back under `low`). The decay rung (decay_ms lowered for `hold`, which
 * the process reverts by itself) comes last, when the others were not enough or pressure
 * came back within the hold. Each step is one mailbox job; its answer schedules the next
 * step through an event, so a run never blocks the loop.
 *
 * Free/idle policies look at the processes every check_interval_ms; the timer exists only
 * while such a policy and a process exist. Pressure policies and profiles add no timer. */
#include "policy.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "ctl.pb-c.h"
#include "ctld.h"
#include "log.h"
#include "pool.h"
#include "pressure.h"
#include "units.h"

static uint64_t mono_ns(void)
{
	return seg_now_ns(CLOCK_MONOTONIC);
}

/* ---- state ----------------------------------------------------------------------------- */

struct run;
struct polstate;

/* A look deferred to the end of min_interval (or of the run out): the one mechanism of
 * cgroup policies (v1 and v2: a crossing, a band climb or usage still above high) and PSI
 * policies (a stall reported within the interval). */
struct deferral {
	struct event *ev;
	uint64_t due; /* CLOCK_MONOTONIC when it is pending */
};

/* Look again in delay_ns, unless a look is already due sooner. */
static void defer_arm(struct deferral *df, uint64_t delay_ns)
{
	uint64_t due = mono_ns() + delay_ns;
	if (!df->ev || (evtimer_pending(df->ev, NULL) && df->due <= due))
		return;
	df->due = due;
	struct timeval tv = {(time_t)(delay_ns / 1000000000u),
	                     (suseconds_t)(delay_ns % 1000000000u / 1000u)};
	evtimer_add(df->ev, &tv);
}

/* One watched cgroup of a cgroup policy. */
struct cgwatch {
	struct cgwatch *next;
	struct polstate *ps;
	char dir[PATH_MAX], rel[PATH_MAX];
	struct pressure_watch *w;
	int nprocs;     /* auto: covered processes in it; explicit: kept while configured */
	bool explicit_; /* named by the policy */
	struct policy_cg_state st; /* hysteresis and the last run */
	uint64_t high_b, low_b;
	struct deferral recheck; /* after min_interval while usage stays high */
	uint64_t climb_ns;       /* a climb while a run was out: its event's time (0: none) */
	struct run *run;
};

#define LAT_BUCKETS 12
static const double lat_bounds[LAT_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                               0.1,   0.25,   0.5,   1,    2.5,   5};

struct histogram {
	uint64_t b[LAT_BUCKETS + 1];
	uint64_t count;
	double sum;
};

static void hist_add(struct histogram *h, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;
	while (i < LAT_BUCKETS && s > lat_bounds[i])
		i++;
	h->b[i]++;
	h->count++;
	h->sum += s;
}

struct polstate {
	struct ctld *d;
	struct policy def; /* a copy: the engine's conf may be replaced while a run ends */
	struct pressure_watch *psi;
	struct cgwatch *cgs;
	struct run *run; /* psi / free / idle: one at a time */
	uint64_t last_run_ns;
	/* psi: an event deferred by min_interval or a run (its time, 0: none), what it said,
	 * and the look when that ends */
	uint64_t psi_pending_ns;
	char psi_pending_why[160];
	struct deferral psi_later;
	uint64_t escalate_until_ns; /* pressure again before this: add the decay rung */
	struct policy_budget budget;
	/* figures */
	uint64_t events, runs, released, deferred, last_latency_ns;
	struct histogram latency;
	char last_why[200];
	bool dead; /* reconfigured away; freed when its last run ends */
};

struct pol_proc {
	const struct profile *profile; /* in the engine's current conf */
	char profile_name[PROFILE_NAME_MAX];
	char *cg_dir, *cg_rel; /* one allocation of the two paths (NULL without have_cg): two
	                          PATH_MAX arrays made 5,000 processes cost 40 MB */
	bool have_cg;
	struct cgwatch *cg_refs[8]; /* auto cgroup watches this process counts in */
	int ncg_refs;
	/* time policies */
	uint64_t free_since_ns, idle_since_ns;
	uint64_t sig[6];
	bool sig_ok, idle_acted;
	/* the profile's application */
	bool applying;
	uint64_t applied_delay_ns; /* exec -> in effect */
	/* holds seen in its segment, with the value each held tunable had: when one ends in
	 * its revert, that is audited (trigger expiry) */
	struct la_shm_hold holds[LA_NTUNABLES];
	int64_t held_value[LA_NTUNABLES];
	struct event *hold_ev;
	struct proc *p;
	struct ctld *d;
};

struct policy_engine {
	struct policy_conf *conf;
	struct polstate **ps;
	int nps;
	struct event *tick;
	struct run *runs;       /* every run in flight (freed at shutdown if still there) */
	struct proc **applying; /* processes with a profile job in flight (one ref each) */
	int napplying, capplying;
	struct histogram apply_delay;
	uint64_t profile_applied, profile_skipped;
	uint64_t delays[256]; /* the last exec -> applied delays (allocctl policies) */
	int ndelays, delay_at;
};

/* ---- helpers ---------------------------------------------------------------------------- */

uint64_t policy_reclaimable(const struct proc_snap *s)
{
	return s->mem.reclaimable; /* liballoc_shm.h's one definition (la_memory_of) */
}

uint64_t policy_time_reclaimable(const struct proc_snap *s)
{
	/* pages populated for the process's predicted burst are about to be used: a time
	 * policy trimming them would only make the burst fault them in again */
	return la_sub0(s->mem.reclaimable, s->total.burst_prepared_bytes);
}

const char *policy_proc_profile(const struct proc *p)
{
	return p->pol && p->pol->profile_name[0] ? p->pol->profile_name : NULL;
}

/* Is the process covered by a run of this policy over cgroup cg (NULL: everywhere)? */
static bool covers(const struct polstate *ps, const struct proc *p, const struct cgwatch *cg)
{
	if (!p->pol || p->gone || p->seg.hdr.control_state != LA_CONTROL_RUNNING)
		return false;
	if (ps->def.profile[0] && strcmp(p->pol->profile_name, ps->def.profile))
		return false;
	return policy_cg_covers(&ps->def, p->pol->have_cg ? p->pol->cg_dir : NULL,
	                        cg ? cg->dir : NULL);
}

bool policy_cg_covers(const struct policy *def, const char *proc_cg, const char *dir)
{
	if (!dir || def->scope_all)
		return true;
	if (!proc_cg)
		return false;
	size_t n = strlen(dir);
	return !strncmp(proc_cg, dir, n) && (proc_cg[n] == 0 || proc_cg[n] == '/');
}

/* "385.0 MiB" (logs and messages) */
static void fmt_size(char *buf, size_t len, uint64_t v)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double x = (double)v;
	int u = 0;
	while (x >= 1024 && u < 4) {
		x /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", x, unit[u]);
}

/* ---- ladder runs ------------------------------------------------------------------------- */

struct cand {
	struct proc *p;
	uint64_t reclaimable, cached;
};

struct run {
	struct run *next_run, **prev_run; /* the engine's list */
	struct polstate *ps;
	struct cgwatch *cg;
	enum audit_trigger trigger;
	uint64_t t_event, t_start;
	uint64_t prev_run_ns; /* cgroup: the last fruitful run's start before this one */
	uint64_t goal, released;
	uint64_t target_usage; /* cgroup: enough once usage is at or below this (0: unused) */
	struct cand *c;
	int n, cur, rung;  /* rung: index into def.rungs */
	int acted;         /* processes a step was sent to */
	struct proc *last; /* ... the last of them */
	bool decay;        /* the decay rung is due after the others */
	bool waiting;      /* a job of ours is out */
	bool finished;
	/* A release or trim step asks first for what is still needed (step_goal), so that the
	 * run knows when enough is back (t_back); when the process gave all of that, the same
	 * step runs again for the rest it holds (rest): a rung is never cut short on a process
	 * under pressure, only measured. */
	int step_cur, step_rung;
	uint64_t step_goal;
	bool rest;
	uint64_t t_back; /* CLOCK_MONOTONIC: when enough had come back (0: not yet) */
	struct event *next;
	uint64_t cpu_at;  /* thread CPU time when the current step began */
	uint64_t sent_at; /* CLOCK_MONOTONIC when the current step was sent */
	char why[200];
};

static uint64_t thread_cpu_ns(void)
{
	return seg_now_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t policy_budget_wait(const struct policy *def, struct policy_budget *b, uint64_t now)
{
	if (!def->cpu_budget_ppm)
		return 0;
	double rate = def->cpu_budget_ppm / 1e6;
	double cap = rate * 1e9 > 5e7 ? rate * 1e9 : 5e7; /* a second's worth, 50 ms at least */
	if (b->at_ns)
		b->tokens_ns += (double)(now - b->at_ns) * rate;
	else
		b->tokens_ns = cap;
	if (b->tokens_ns > cap)
		b->tokens_ns = cap;
	b->at_ns = now;
	/* in debt: until it is paid back, and a millisecond more */
	return b->tokens_ns < 0 ? (uint64_t)(-b->tokens_ns / rate) + 1000000u : 0;
}

void policy_budget_spend(const struct policy *def, struct policy_budget *b, uint64_t ns)
{
	if (def->cpu_budget_ppm)
		b->tokens_ns -= (double)ns;
}

static void run_schedule(struct run *r, uint64_t delay_ns)
{
	struct timeval tv = {(time_t)(delay_ns / 1000000000u),
	                     (suseconds_t)(delay_ns % 1000000000u / 1000u)};
	evtimer_add(r->next, &tv);
}

uint64_t policy_cg_limit(const struct cg_memory *m)
{
	/* v2: memory.high is where throttling starts, memory.max where OOM waits */
	if (m->version == 2 && m->limit == UINT64_MAX)
		return m->high;
	return m->limit;
}

static void polstate_maybe_free(struct polstate *ps);
static void cg_recheck_arm(struct cgwatch *cg, uint64_t delay_ns);
static void cg_evaluate(struct cgwatch *cg, const struct cg_memory *m, uint64_t t_event,
                        const char *note, bool recheck);
static void psi_later_arm(struct polstate *ps);

static void run_free(struct run *r)
{
	for (int i = 0; i < r->n; i++)
		proc_unref(r->c[i].p);
	free(r->c);
	event_free(r->next);
	if ((*r->prev_run = r->next_run))
		r->next_run->prev_run = r->prev_run;
	free(r);
}

static void run_finish(struct run *r)
{
	struct polstate *ps = r->ps;
	uint64_t now = mono_ns();
	/* the response: from the event to enough memory back (the run's end when it never
	 * was enough) */
	uint64_t lat = (r->t_back ? r->t_back : now) - r->t_event;
	ps->last_latency_ns = lat;
	hist_add(&ps->latency, lat);
	ps->released += r->released;
	char rel[32], goal[32], back[48] = "";
	fmt_size(rel, sizeof(rel), r->released);
	if (r->goal == UINT64_MAX)
		snprintf(goal, sizeof(goal), "all");
	else
		fmt_size(goal, sizeof(goal), r->goal);
	if (r->t_back)
		snprintf(back, sizeof(back), "enough back in %.1f ms, ",
		         (double)(r->t_back - r->t_event) / 1e6);
	log_info("policy %s: %s %s from %d process%s, %sdone in %.1f ms after the event (goal "
	         "%s; %s)",
	         ps->def.name,
	         ps->def.dry_run || ps->d->policy->conf->dry_run ? "would release" : "released",
	         rel, r->acted, r->acted == 1 ? "" : "es", back, (double)(now - r->t_event) / 1e6,
	         goal, r->why);
	struct cgwatch *cg = r->cg;
	struct cg_memory m;
	bool have_m = cg && cgroup_memory_read(cg->dir, &m) == 0;
	if (cg) {
		/* usage back under low: re-armed (cgroup v2's memory.events signal no
		 * decrease) */
		if (have_m && m.usage < policy_level_bytes(&ps->def.low, policy_cg_limit(&m)))
			cg->st.armed = true;
		/* a run that found nothing to give back (the memory was still in use) does not
		 * start min_interval: the next climb acts at once */
		if (!r->released)
			cg->st.last_run_ns = r->prev_run_ns;
		cg->run = NULL;
		cg_recheck_arm(cg, ps->def.min_interval_ms * 1000000u);
	} else {
		ps->run = NULL;
		psi_later_arm(ps); /* an event that came during the run */
	}
	run_free(r);
	if (have_m && !ps->dead) {
		/* usage that climbed to a higher band while the run was out (its event got
		 * DEFER) acts now, not at the re-check min_interval from now; the response
		 * counts from that event */
		uint64_t t = cg->climb_ns ? cg->climb_ns : now;
		cg->climb_ns = 0;
		cg_evaluate(cg, &m, t, " (climbed during the last run)", false);
	}
	polstate_maybe_free(ps);
}

static bool dry(const struct run *r)
{
	return r->ps->def.dry_run || r->ps->d->policy->conf->dry_run;
}

static bool enough(struct run *r)
{
	if (r->released >= r->goal)
		return true;
	if (r->target_usage && r->cg) {
		struct cg_memory m;
		if (cgroup_memory_read(r->cg->dir, &m) == 0 && m.usage <= r->target_usage)
			return true;
	}
	return false;
}

/* A dry run's step: audited as such, counted as what it would give back. */
static void dry_step(struct run *r, struct proc *p, enum policy_rung rung, uint64_t estimate)
{
	struct audit_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.trigger = r->trigger;
	snprintf(ev.actor, sizeof(ev.actor), "policy %s", r->ps->def.name);
	ev.peer_uid = -1;
	ev.action = rung == RUNG_FLUSH     ? AUDIT_A_flush
	            : rung == RUNG_RELEASE ? AUDIT_A_release
	            : rung == RUNG_TRIM    ? AUDIT_A_trim
	                                   : AUDIT_A_set;
	ev.result = AUDIT_R_dry_run;
	ev.pid = p->seg.hdr.pid;
	ev.target_uid = p->seg.uid;
	snprintf(ev.exe, sizeof(ev.exe), "%.*s", (int)sizeof(ev.exe) - 1, proc_name(p));
	if (rung == RUNG_DECAY) {
		snprintf(ev.name, sizeof(ev.name), "decay_ms");
		ev.has_values = true;
		ev.new_value = r->ps->def.decay_ms;
		ev.hold_ms = r->ps->def.hold_ms;
	}
	char est[32];
	fmt_size(est, sizeof(est), estimate);
	snprintf(ev.message, sizeof(ev.message), "would %s: %s reclaimable (%.140s)",
	         policy_rung_name(rung), est, r->why);
	audit_record(&r->ps->d->audit, &ev);
}

static void on_step_done(struct ctld *d, const struct job_outcome *out, int n, void *arg)
{
	struct run *r = arg;
	uint64_t spent = thread_cpu_ns() - r->cpu_at;
	uint64_t step = 0, in_procs = 0;
	for (int i = 0; i < n; i++) {
		step += out[i].sum.bytes_released;
		in_procs += out[i].sum.duration_ns;
	}
	spent += in_procs;
	r->released += step;
	uint64_t now = mono_ns();
	log_debug("policy %s: step +%.2f ms -> +%.2f ms after the event: %.1f ms in the "
	          "process(es), %" PRIu64 " bytes",
	          r->ps->def.name, (double)(r->sent_at - r->t_event) / 1e6,
	          (double)(now - r->t_event) / 1e6, (double)in_procs / 1e6, step);
	r->rest = r->step_goal && step >= r->step_goal;
	r->step_goal = 0;
	policy_budget_spend(&r->ps->def, &r->ps->budget, spent);
	r->waiting = false;
	run_schedule(r, 0); /* the next step from the loop, never from inside commands.c */
}

static int start_job(struct run *r, enum job_kind kind, struct proc **targets, int n,
                     const struct job_step *steps, int nsteps)
{
	struct job_origin o;
	memset(&o, 0, sizeof(o));
	o.trigger = r->trigger;
	snprintf(o.actor, sizeof(o.actor), "policy %s", r->ps->def.name);
	o.done = on_step_done;
	o.arg = r;
	r->waiting = true;
	r->cpu_at = thread_cpu_ns();
	r->sent_at = mono_ns();
	if (commands_run(r->ps->d, &o, kind, targets, n, steps, nsteps)) {
		r->waiting = false;
		return -1;
	}
	return 0;
}

/* What a release or trim should still give back (0: everything there is): what is left of
 * the goal in bytes, or what takes the cgroup's usage under the target, whichever is less. */
static uint64_t still_needed(struct run *r)
{
	uint64_t need = r->goal == UINT64_MAX   ? 0
	                : r->goal > r->released ? r->goal - r->released
	                                        : 0;
	struct cg_memory m;
	if (r->target_usage && r->cg && cgroup_memory_read(r->cg->dir, &m) == 0 &&
	    m.usage > r->target_usage) {
		uint64_t u = m.usage - r->target_usage;
		need = need && need < u ? need : u;
	}
	return need;
}

static void decay_step(struct run *r)
{
	struct job_step st;
	memset(&st, 0, sizeof(st));
	st.cmd.command = LA_CMD_set;
	st.cmd.flags = LA_MB_FROM_POLICY;
	snprintf(st.cmd.name, sizeof(st.cmd.name), "decay_ms");
	st.cmd.value = r->ps->def.decay_ms;
	st.cmd.arg = r->ps->def.hold_ms; /* held: the process reverts it by itself */
	const struct tunable_info *ti = tunable_find("decay_ms");
	st.tunable = ti ? (int)(ti - tunable_table) : -1;
	struct proc **t = calloc((size_t)r->n + 1, sizeof(*t));
	int k = 0;
	for (int i = 0; t && i < r->n; i++)
		if (!r->c[i].p->gone)
			t[k++] = r->c[i].p;
	if (dry(r)) {
		for (int i = 0; i < k; i++)
			dry_step(r, t[i], RUNG_DECAY, 0);
	} else if (k) {
		start_job(r, JOB_SET, t, k, &st, 1);
	}
	free(t);
}

static void run_advance(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	struct polstate *ps = r->ps;
	if (r->waiting)
		return;
	for (;;) {
		if (r->finished || (r->rung < 0 && !r->decay)) {
			run_finish(r);
			return;
		}
		if (r->rung < 0) { /* the decay rung: once, over every candidate */
			r->decay = false;
			decay_step(r);
			if (r->waiting)
				return;
			continue;
		}
		bool met = enough(r);
		if (met && !r->t_back)
			r->t_back = mono_ns();
		bool rest = r->rest;
		r->rest = false;
		if (rest) { /* the same step again, for the rest */
			r->cur = r->step_cur;
			r->rung = r->step_rung;
		} else if (met || r->cur >= r->n) {
			bool short_of_goal = !met;
			r->rung = -1;
			r->decay = r->decay && (short_of_goal || mono_ns() < ps->escalate_until_ns);
			if (!r->decay)
				r->finished = true;
			continue;
		}
		enum policy_rung rung = ps->def.rungs[r->rung];
		if (rung == RUNG_DECAY) { /* past the last release rung: next process */
			r->rung = 0;
			r->cur++;
			continue;
		}
		uint64_t wait = policy_budget_wait(&ps->def, &ps->budget, mono_ns());
		if (wait) {
			ps->deferred++;
			log_debug("policy %s: CPU budget spent, next step in %.1f ms", ps->def.name,
			          (double)wait / 1e6);
			run_schedule(r, wait);
			return;
		}
		struct cand *c = &r->c[r->cur];
		r->step_cur = r->cur;
		r->step_rung = r->rung;
		/* next rung of this process, or the first of the next one */
		if (++r->rung >= ps->def.nrungs || ps->def.rungs[r->rung] == RUNG_DECAY) {
			r->rung = 0;
			r->cur++;
		}
		if (c->p->gone)
			continue;
		if (r->last != c->p) {
			r->last = c->p;
			r->acted++;
		}
		if (dry(r)) {
			uint64_t est = rung == RUNG_FLUSH  ? 0
			               : rung == RUNG_TRIM ? c->reclaimable
			                                   : 0;
			dry_step(r, c->p, rung, rung == RUNG_FLUSH ? c->cached : c->reclaimable);
			r->released += est;
			continue;
		}
		struct job_step st;
		memset(&st, 0, sizeof(st));
		st.tunable = -1;
		st.cmd.command = rung == RUNG_FLUSH     ? LA_CMD_flush_caches
		                 : rung == RUNG_RELEASE ? LA_CMD_release_idle_heaps
		                                        : LA_CMD_trim;
		enum job_kind kind = rung == RUNG_FLUSH     ? JOB_FLUSH
		                     : rung == RUNG_RELEASE ? JOB_RELEASE
		                                            : JOB_TRIM;
		if (rung != RUNG_FLUSH && !rest && (r->step_goal = still_needed(r)) != 0) {
			/* first what is still needed: the run learns when enough is back */
			st.cmd.flags = LA_MB_GOAL;
			st.cmd.value = r->step_goal > INT64_MAX ? INT64_MAX : (int64_t)r->step_goal;
		}
		if (start_job(r, kind, &c->p, 1, &st, 1) == 0 && r->waiting)
			return;
	}
}

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	return (x->reclaimable < y->reclaimable) - (x->reclaimable > y->reclaimable);
}

/* Start a ladder run over the processes this policy covers in cg (NULL: psi/time scope;
 * only: just these, for time policies). Returns false when nothing was started. */
static bool run_start(struct polstate *ps, struct cgwatch *cg, enum audit_trigger trigger,
                      uint64_t t_event, uint64_t goal, uint64_t target_usage, struct proc **only,
                      int nonly, bool escalate, const char *why)
{
	struct ctld *d = ps->d;
	struct run *r = calloc(1, sizeof(*r));
	if (!r)
		return false;
	r->c = calloc((size_t)d->nprocs + 1, sizeof(*r->c));
	r->next = evtimer_new(d->base, run_advance, r);
	if (!r->c || !r->next) {
		free(r->c);
		if (r->next)
			event_free(r->next);
		free(r);
		return false;
	}
	struct policy_engine *e = d->policy;
	if ((r->next_run = e->runs))
		e->runs->prev_run = &r->next_run;
	e->runs = r;
	r->prev_run = &e->runs;
	r->ps = ps;
	r->cg = cg;
	r->trigger = trigger;
	r->t_event = t_event;
	r->t_start = mono_ns();
	r->goal = goal;
	r->target_usage = target_usage;
	snprintf(r->why, sizeof(r->why), "%s", why);
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	{
		if (only) {
			bool in = false;
			for (int i = 0; i < nonly; i++)
				in |= only[i] == p;
			if (!in)
				continue;
		} else if (!covers(ps, p, cg)) {
			continue;
		}
		struct proc_snap s;
		if (!proc_snapshot(d, p, &s, 0, 0))
			continue;
		uint64_t rc = policy_reclaimable(&s);
		uint64_t cached = s.mem.cached;
		proc_snap_free(&s);
		/* nothing reclaimable by its figures: last, still tried (a figure may lag) */
		r->c[r->n].p = p;
		r->c[r->n].reclaimable = rc;
		r->c[r->n].cached = cached;
		proc_ref(p);
		r->n++;
	}
	qsort(r->c, (size_t)r->n, sizeof(*r->c), cand_cmp);
	bool has_decay = false;
	for (int i = 0; i < ps->def.nrungs; i++)
		has_decay |= ps->def.rungs[i] == RUNG_DECAY;
	r->decay = has_decay;
	r->rung = ps->def.rungs[0] == RUNG_DECAY ? -1 : 0;
	if (escalate && has_decay)
		ps->escalate_until_ns = mono_ns() + ps->def.hold_ms * 1000000u;
	ps->runs++;
	ps->last_run_ns = r->t_start;
	snprintf(ps->last_why, sizeof(ps->last_why), "%s", why);
	if (cg) {
		cg->run = r;
		r->prev_run_ns = cg->st.last_run_ns;
		cg->st.last_run_ns = r->t_start;
	} else {
		ps->run = r;
	}
	log_debug("policy %s: run over %d process(es), +%.2f ms after the event: %s", ps->def.name,
	          r->n, (double)(mono_ns() - t_event) / 1e6, why);
	run_schedule(r, 0);
	return true;
}

/* ---- cgroup policies ------------------------------------------------------------------------ */

/* Decide on the figures of one event (or a re-check). */
static void cg_evaluate(struct cgwatch *cg, const struct cg_memory *m, uint64_t t_event,
                        const char *note, bool recheck)
{
	struct polstate *ps = cg->ps;
	uint64_t limit = policy_cg_limit(m);
	uint64_t high = policy_level_bytes(&ps->def.high, limit),
	         low = policy_level_bytes(&ps->def.low, limit);
	bool was_armed = cg->st.armed;
	switch (policy_cg_decide(&ps->def, &cg->st, m->usage, limit, mono_ns(), recheck,
	                         cg->run != NULL)) {
	case POLICY_REARMED:
		if (!was_armed)
			log_debug("policy %s: %s back under low, re-armed", ps->def.name, cg->rel);
		return;
	case POLICY_DEFER:
		if (cg->run) {
			/* a climb while a run is out: run_finish looks again at its end; the
			 * response counts from the first such event */
			if (!cg->climb_ns) {
				cg->climb_ns = t_event;
				log_debug(
				        "policy %s: %s climbed to band %d during a run: looked at "
				        "when it ends",
				        ps->def.name, cg->rel,
				        policy_cg_band(&ps->def, m->usage, limit));
			}
			return;
		}
		/* look again as soon as the interval ends: what was deferred then runs */
		cg_recheck_arm(cg, policy_interval_wait(&ps->def, cg->st.last_run_ns, mono_ns()));
		return;
	case POLICY_NONE:
		return;
	case POLICY_ACT:
		break;
	}
	char u[32], l[32], h[32], text[260];
	fmt_size(u, sizeof(u), m->usage);
	fmt_size(l, sizeof(l), limit);
	fmt_size(h, sizeof(h), high);
	snprintf(text, sizeof(text), "%.80s: usage %s >= high %s of limit %s%.40s", cg->rel, u, h,
	         l, note);
	uint64_t goal = ps->def.goal ? ps->def.goal : m->usage - low;
	run_start(ps, cg, AUDIT_T_pressure, t_event, goal, low, NULL, 0, recheck, text);
}

enum policy_verdict policy_cg_decide(const struct policy *def, struct policy_cg_state *st,
                                     uint64_t usage, uint64_t limit, uint64_t now, bool recheck,
                                     bool running)
{
	uint64_t high = policy_level_bytes(&def->high, limit),
	         low = policy_level_bytes(&def->low, limit);
	if (!high)
		return POLICY_NONE; /* no limit to take a share of */
	if (usage < low) {
		st->armed = true;
		return POLICY_REARMED;
	}
	if (usage < high)
		return POLICY_NONE;
	int band = policy_cg_band(def, usage, limit);
	bool climb = !st->armed && band > st->band;
	/* one run at a time: a climb while one is out is acted on the moment it ends (the
	 * caller looks then), the rest is what that run answers */
	if (running)
		return climb ? POLICY_DEFER : POLICY_NONE;
	if (!st->armed && !recheck && !climb)
		return POLICY_NONE; /* hysteresis: above high again, but it never went under low */
	/* min_interval spaces the runs at a crossing of high and the re-checks; a climb to a
	 * higher band is pressure growing past where the policy acted, towards the limit: it
	 * acts at once (at most POLICY_CG_BANDS - 1 times before usage goes under low) */
	if (!climb && policy_interval_wait(def, st->last_run_ns, now))
		return POLICY_DEFER;
	st->armed = false;
	st->band = band;
	return POLICY_ACT;
}

void policy_cg_thresholds(const struct policy *def, uint64_t limit,
                          uint64_t th[POLICY_CG_BANDS + 1])
{
	uint64_t high = policy_level_bytes(&def->high, limit);
	th[0] = high;
	th[1] = policy_level_bytes(&def->low, limit);
	for (int k = 1; k < POLICY_CG_BANDS; k++)
		th[k + 1] = high && limit != UINT64_MAX && limit > high
		                    ? high + (limit - high) / POLICY_CG_BANDS * (uint64_t)k
		                    : 0;
}

int policy_cg_band(const struct policy *def, uint64_t usage, uint64_t limit)
{
	uint64_t th[POLICY_CG_BANDS + 1];
	policy_cg_thresholds(def, limit, th);
	if (!th[0] || usage < th[0])
		return 0;
	int band = 1;
	for (int k = 2; k <= POLICY_CG_BANDS; k++)
		if (th[k] && usage >= th[k])
			band = k;
	return band;
}

static void on_cg_recheck(evutil_socket_t fd, short what, void *arg)
{
	struct cgwatch *cg = arg;
	struct cg_memory m;
	if (cgroup_memory_read(cg->dir, &m) == 0)
		cg_evaluate(cg, &m, mono_ns(), " (still, after min_interval)", true);
}

/* While usage stays above high, look again in delay_ns (after a run: min_interval; a
 * deferred crossing: when the interval ends): v1 thresholds only signal crossings, so
 * nothing else would. */
static void cg_recheck_arm(struct cgwatch *cg, uint64_t delay_ns)
{
	struct cg_memory m;
	if (cg->ps->dead || cgroup_memory_read(cg->dir, &m) < 0)
		return;
	uint64_t high = policy_level_bytes(&cg->ps->def.high, policy_cg_limit(&m));
	if (high && m.usage >= high)
		defer_arm(&cg->recheck, delay_ns);
}

uint64_t policy_cg_v2_signal_from(const struct cg_memory *m)
{
	if (m->version != 2)
		return 0; /* v1: usage thresholds, no blind range */
	/* memory.high (when set) is where the kernel starts counting 'high' events (each
	 * throttled charge over it); without it, memory.max's 'max' events */
	return m->high < m->limit ? m->high : m->limit;
}

uint64_t policy_interval_wait(const struct policy *def, uint64_t last_run_ns, uint64_t now)
{
	uint64_t end = last_run_ns + def->min_interval_ms * 1000000u;
	return last_run_ns && now < end ? end - now : 0;
}

static void cg_free(struct cgwatch *cg)
{
	pressure_watch_free(cg->w);
	if (cg->recheck.ev)
		event_free(cg->recheck.ev);
	if (cg->run)
		cg->run->cg = NULL; /* the run ends on its own */
	free(cg);
}

static void on_cg_event(struct pressure_watch *w, const struct pressure_event *ev, void *arg)
{
	struct cgwatch *cg = arg;
	struct polstate *ps = cg->ps;
	ps->events++;
	if (ev->source == PRESSURE_GONE) {
		log_info("policy %s: %s", ps->def.name, ev->why);
		pressure_watch_free(cg->w);
		cg->w = NULL;
		return;
	}
	log_debug("policy %s: %s", ps->def.name, ev->why);
	if (ev->have_memory)
		cg_evaluate(cg, &ev->mem, ev->time_ns, "", false);
}

static struct cgwatch *cg_watch(struct polstate *ps, const char *dir, const char *rel,
                                bool explicit_)
{
	for (struct cgwatch *cg = ps->cgs; cg; cg = cg->next)
		if (!strcmp(cg->dir, dir))
			return cg;
	struct cg_memory m;
	if (cgroup_memory_read(dir, &m) < 0) {
		log_warn("policy %s: cannot read cgroup %s: %s", ps->def.name, dir,
		         strerror(errno));
		return NULL;
	}
	uint64_t limit = policy_cg_limit(&m);
	uint64_t th[POLICY_CG_BANDS + 1];
	policy_cg_thresholds(&ps->def, limit, th);
	if (!th[0]) {
		log_debug("policy %s: cgroup %s has no memory limit; not watched", ps->def.name,
		          rel);
		return NULL;
	}
	struct cgwatch *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return NULL;
	cg->ps = ps;
	snprintf(cg->dir, sizeof(cg->dir), "%s", dir);
	snprintf(cg->rel, sizeof(cg->rel), "%s", rel);
	cg->explicit_ = explicit_;
	cg->st.armed = true;
	cg->high_b = th[0];
	cg->low_b = th[1];
	char err[512];
	cg->w = pressure_watch_cgroup(ps->d->base, dir, th, POLICY_CG_BANDS + 1, ps->def.psi_full,
	                              ps->def.psi_given ? ps->def.psi_stall_us : 0,
	                              ps->def.psi_window_us, on_cg_event, cg, err, sizeof(err));
	cg->recheck.ev = evtimer_new(ps->d->base, on_cg_recheck, cg);
	if (!cg->w || !cg->recheck.ev) {
		log_warn("policy %s: cannot watch %s: %s", ps->def.name, dir, err);
		cg_free(cg);
		return NULL;
	}
	if (err[0])
		log_warn("policy %s: %s", ps->def.name, err);
	uint64_t blind = policy_cg_v2_signal_from(&m);
	if (blind > th[0]) {
		char from[32], at[32];
		fmt_size(from, sizeof(from), th[0]);
		fmt_size(at, sizeof(at), blind);
		log_warn("policy %s: cgroup %s (v2) gives no event between high %s and %s (the "
		         "kernel counts memory.events only over memory.high or at memory.max, and "
		         "PSI reports stalls, which come near that limit): set its memory.high at "
		         "most %s for the policy to see usage climb",
		         ps->def.name, rel, from, at, from);
	}
	char h[32], l[32];
	fmt_size(h, sizeof(h), th[0]);
	fmt_size(l, sizeof(l), th[1]);
	log_info("policy %s: watching cgroup %s (v%d): high %s, low %s", ps->def.name, rel,
	         m.version, h, l);
	cg->next = ps->cgs;
	ps->cgs = cg;
	/* already above high when we start watching: no crossing will come */
	cg_evaluate(cg, &m, mono_ns(), "", false);
	return cg;
}

/* ---- psi policies ----------------------------------------------------------------------------- */

/* An event (or, recheck, the look when the interval or run it waited for ended). */
static void psi_consider(struct polstate *ps, uint64_t t_event, const char *why, bool recheck)
{
	uint64_t now = mono_ns(), goal = 0, since = ps->psi_pending_ns;
	uint64_t avail = ps->def.min_available ? mem_available() : UINT64_MAX;
	switch (policy_psi_decide(&ps->def, ps->last_run_ns, &ps->psi_pending_ns, ps->run != NULL,
	                          now, avail, recheck, &goal)) {
	case POLICY_ACT:
		break;
	case POLICY_DEFER:
		if (!since)
			snprintf(ps->psi_pending_why, sizeof(ps->psi_pending_why), "%s", why);
		log_debug("policy %s: %s within %s: acted on when it ends", ps->def.name, why,
		          ps->run ? "a run" : "min_interval");
		psi_later_arm(ps);
		return;
	default:
		if (recheck && since)
			log_debug("policy %s: %s (deferred) dropped: MemAvailable is above "
			          "min_available now",
			          ps->def.name, why);
		else if (!recheck)
			log_debug("policy %s: %s, but MemAvailable is above min_available",
			          ps->def.name, why);
		return;
	}
	bool again = ps->last_run_ns && now - ps->last_run_ns < ps->def.hold_ms * 1000000u;
	char text[200];
	if (recheck)
		snprintf(text, sizeof(text), "%.140s (%.1f ms ago; deferred to min_interval's end)",
		         why, (double)(now - since) / 1e6);
	else
		snprintf(text, sizeof(text), "%s", why);
	run_start(ps, NULL, AUDIT_T_pressure, t_event, goal, 0, NULL, 0, again, text);
}

/* A deferred event: look when the interval ends (a run out: run_finish calls again). */
static void psi_later_arm(struct polstate *ps)
{
	if (ps->psi_pending_ns && !ps->run && !ps->dead)
		defer_arm(&ps->psi_later,
		          policy_interval_wait(&ps->def, ps->last_run_ns, mono_ns()));
}

static void on_psi_later(evutil_socket_t fd, short what, void *arg)
{
	struct polstate *ps = arg;
	psi_consider(ps, mono_ns(), ps->psi_pending_why, true);
}

static void on_psi_event(struct pressure_watch *w, const struct pressure_event *ev, void *arg)
{
	struct polstate *ps = arg;
	ps->events++;
	if (ev->source == PRESSURE_GONE) {
		log_warn("policy %s: %s", ps->def.name, ev->why);
		pressure_watch_free(ps->psi);
		ps->psi = NULL;
		return;
	}
	psi_consider(ps, ev->time_ns, ev->why, false);
}

enum policy_verdict policy_psi_decide(const struct policy *def, uint64_t last_run_ns,
                                      uint64_t *pending_ns, bool running, uint64_t now,
                                      uint64_t avail, bool recheck, uint64_t *goal)
{
	if (recheck && !*pending_ns)
		return POLICY_NONE; /* nothing was deferred */
	if (def->min_available && avail >= def->min_available) {
		if (recheck)
			*pending_ns = 0; /* memory is no longer short: the deferred event is moot */
		return POLICY_NONE;
	}
	if (running || policy_interval_wait(def, last_run_ns, now)) {
		if (!*pending_ns)
			*pending_ns = now;
		return POLICY_DEFER;
	}
	*pending_ns = 0; /* this run answers every event deferred until now */
	*goal = def->goal            ? def->goal
	        : def->min_available ? def->min_available - avail
	                             : UINT64_MAX;
	return POLICY_ACT;
}

/* ---- time policies ------------------------------------------------------------------------------ */

static void activity_sig(const struct proc_snap *s, uint64_t sig[6])
{
	sig[0] = s->total.allocated_bytes;
	sig[1] = s->total.cache_refills;
	sig[2] = s->total.mmap_calls;
	sig[3] = s->total.remote_frees_queued;
	sig[4] = s->total.direct_cache_hits;
	sig[5] = s->total.direct_mappings;
}

static bool has_time_policies(const struct policy_engine *e)
{
	for (int i = 0; i < e->nps; i++)
		if (e->ps[i]->def.on == POLICY_ON_FREE || e->ps[i]->def.on == POLICY_ON_IDLE)
			return true;
	return false;
}

static void tick_arm(struct ctld *d)
{
	struct policy_engine *e = d->policy;
	if (!e || !e->tick)
		return;
	if (!has_time_policies(e) || d->nprocs == 0) {
		evtimer_del(e->tick); /* nothing to look at: no wake-ups */
		return;
	}
	if (evtimer_pending(e->tick, NULL))
		return;
	uint64_t ms = e->conf->check_interval_ms;
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
	evtimer_add(e->tick, &tv);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	struct policy_engine *e = d->policy;
	uint64_t now = mono_ns();
	struct proc **due = calloc((size_t)d->nprocs + 1, sizeof(*due));
	for (int i = 0; due && i < e->nps; i++) {
		struct polstate *ps = e->ps[i];
		if (ps->def.on != POLICY_ON_FREE && ps->def.on != POLICY_ON_IDLE)
			continue;
		int n = 0;
		struct proc *p;
		TAILQ_FOREACH(p, &d->procs, link)
		{
			if (!covers(ps, p, NULL))
				continue;
			struct proc_snap s;
			if (!proc_snapshot(d, p, &s, 0, 0))
				continue;
			struct pol_proc *pp = p->pol;
			if (ps->def.on == POLICY_ON_FREE) {
				uint64_t free_b = policy_time_reclaimable(&s);
				if (free_b <= ps->def.above) {
					pp->free_since_ns = 0;
				} else if (!pp->free_since_ns) {
					pp->free_since_ns = now;
				} else if (now - pp->free_since_ns >= ps->def.for_ms * 1000000u) {
					due[n++] = p;
					pp->free_since_ns = 0;
				}
			} else {
				uint64_t sig[6];
				activity_sig(&s, sig);
				if (!pp->sig_ok || memcmp(sig, pp->sig, sizeof(sig))) {
					memcpy(pp->sig, sig, sizeof(sig));
					pp->sig_ok = true;
					pp->idle_since_ns = now;
					pp->idle_acted = false;
				} else if (!pp->idle_acted &&
				           now - pp->idle_since_ns >= ps->def.for_ms * 1000000u &&
				           policy_time_reclaimable(&s)) {
					due[n++] = p;
					pp->idle_acted = true;
				}
			}
			proc_snap_free(&s);
		}
		if (n && !ps->run) {
			char why[200];
			if (ps->def.on == POLICY_ON_FREE)
				snprintf(why, sizeof(why),
				         "%d process%s held more than %" PRIu64
				         " free bytes for %" PRIu64 " ms",
				         n, n == 1 ? "" : "es", ps->def.above, ps->def.for_ms);
			else
				snprintf(why, sizeof(why), "%d process%s idle for %" PRIu64 " ms",
				         n, n == 1 ? "" : "es", ps->def.for_ms);
			ps->events++;
			run_start(ps, NULL, AUDIT_T_time, now, UINT64_MAX, 0, due, n, false, why);
		}
	}
	free(due);
	tick_arm(d);
}

/* ---- profiles ------------------------------------------------------------------------------------ */

/* CLOCK_REALTIME of the process's exec, from its start time (clock ticks since boot). */
static uint64_t exec_realtime_ns(const struct proc *p)
{
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		return 0;
	uint64_t boot_rt = seg_now_ns(CLOCK_REALTIME) - seg_now_ns(CLOCK_BOOTTIME);
	return boot_rt + p->seg.hdr.start_time * (1000000000u / (uint64_t)hz);
}

static void applying_drop(struct policy_engine *e, struct proc *p)
{
	for (int i = 0; i < e->napplying; i++)
		if (e->applying[i] == p) {
			e->applying[i] = e->applying[--e->napplying];
			proc_unref(p);
			return;
		}
}

static void on_profile_applied(struct ctld *d, const struct job_outcome *out, int n, void *arg)
{
	struct proc *p = arg;
	if (p->pol) {
		p->pol->applying = false;
		if (n == 1 && out[0].code == CTL__ERROR_CODE__OK) {
			uint64_t now = seg_now_ns(CLOCK_REALTIME), exec = exec_realtime_ns(p);
			p->pol->applied_delay_ns = exec && now > exec ? now - exec : 0;
			struct policy_engine *e = d->policy;
			hist_add(&e->apply_delay, p->pol->applied_delay_ns);
			e->profile_applied++;
			e->delays[e->delay_at] = p->pol->applied_delay_ns;
			e->delay_at = (e->delay_at + 1) % 256;
			if (e->ndelays < 256)
				e->ndelays++;
			uint64_t since_seg =
			        now > p->seg.hdr.created_ns ? now - p->seg.hdr.created_ns : 0;
			log_info("profile %s applied to pid %d (%s): %.1f ms after exec, %.2f ms "
			         "after "
			         "its segment appeared",
			         p->pol->profile_name, p->seg.hdr.pid, proc_name(p),
			         (double)p->pol->applied_delay_ns / 1e6, (double)since_seg / 1e6);
		}
	}
	applying_drop(d->policy, p);
}

/* The tunables of pr this process does not have yet, skipping any someone set explicitly. */
static void apply_profile(struct ctld *d, struct proc *p, const struct profile *pr)
{
	struct la_shm_tunable tun[LA_NTUNABLES];
	uint32_t ntun = 0;
	if (seg_read_tunables(&p->seg, tun, &ntun) != SEG_E_OK)
		return;
	struct job_step steps[LA_NTUNABLES];
	int n = 0;
	for (int i = 0; i < pr->nset; i++) {
		int t = pr->set[i].tunable;
		if ((uint32_t)t >= ntun || tun[t].value == pr->set[i].value)
			continue;
		uint32_t src = tun[t].source;
		if (src != LA_SRC_default && src != LA_SRC_dynamic && src != LA_SRC_policy) {
			/* set by the environment, mallopt, the program or an operator: theirs */
			struct audit_event ev;
			memset(&ev, 0, sizeof(ev));
			ev.trigger = AUDIT_T_profile;
			snprintf(ev.actor, sizeof(ev.actor), "profile %s", pr->name);
			ev.peer_uid = -1;
			ev.action = AUDIT_A_set;
			ev.result = AUDIT_R_skipped;
			ev.pid = p->seg.hdr.pid;
			ev.target_uid = p->seg.uid;
			snprintf(ev.exe, sizeof(ev.exe), "%.*s", (int)sizeof(ev.exe) - 1,
			         proc_name(p));
			snprintf(ev.name, sizeof(ev.name), "%s", tunable_table[t].name);
			ev.has_values = true;
			ev.old_value = tun[t].value;
			ev.new_value = pr->set[i].value;
			snprintf(ev.message, sizeof(ev.message),
			         "kept: set explicitly in the process (not by this profile)");
			audit_record(&d->audit, &ev);
			d->policy->profile_skipped++;
			continue;
		}
		memset(&steps[n], 0, sizeof(steps[n]));
		steps[n].cmd.command = LA_CMD_set;
		steps[n].cmd.flags = LA_MB_FROM_POLICY; /* a later restart may set it again */
		snprintf(steps[n].cmd.name, sizeof(steps[n].cmd.name), "%s", tunable_table[t].name);
		steps[n].cmd.value = pr->set[i].value;
		steps[n].tunable = t;
		n++;
	}
	struct policy_engine *e = d->policy;
	if (!n || p->seg.hdr.control_state != LA_CONTROL_RUNNING)
		return;
	if (e->napplying == e->capplying) {
		int cap = e->capplying ? 2 * e->capplying : 16;
		struct proc **a = realloc(e->applying, sizeof(*a) * (size_t)cap);
		if (!a)
			return;
		e->applying = a;
		e->capplying = cap;
	}
	e->applying[e->napplying++] = p;
	proc_ref(p);
	struct job_origin o;
	memset(&o, 0, sizeof(o));
	o.trigger = AUDIT_T_profile;
	snprintf(o.actor, sizeof(o.actor), "profile %s", pr->name);
	o.done = on_profile_applied;
	o.arg = p;
	p->pol->applying = true;
	if (commands_run(d, &o, JOB_SET, &p, 1, steps, n)) {
		p->pol->applying = false;
		applying_drop(e, p);
	}
}

static void match_profile(struct ctld *d, struct proc *p, bool apply)
{
	struct pol_proc *pp = p->pol;
	struct policy_conf *pc = d->policy->conf;
	struct profile_subject s = {
	        .name = p->id.name,
	        .comm = p->id.comm,
	        .exe = p->id.exe,
	        .cgroup = pp->have_cg ? pp->cg_rel : "",
	        .cmdline = p->id.cmdline,
	        .uid = proc_uid(p),
	};
	const struct profile *pr = pc ? profile_find(pc->profiles, pc->nprofiles, &s) : NULL;
	pp->profile = pr;
	snprintf(pp->profile_name, sizeof(pp->profile_name), "%s", pr ? pr->name : "");
	if (pr && apply)
		apply_profile(d, p, pr);
}

/* ---- holds: reverts audited ------------------------------------------------------------------ */

static void on_hold_timer(evutil_socket_t fd, short what, void *arg);

void policy_holds_check(struct ctld *d, struct proc *p)
{
	struct pol_proc *pp = p->pol;
	if (!pp || p->gone)
		return;
	struct la_shm_hold h[LA_NTUNABLES];
	struct la_shm_tunable tun[LA_NTUNABLES];
	uint32_t nh = 0, nt = 0;
	if (seg_read_holds(&p->seg, h, &nh) != SEG_E_OK ||
	    seg_read_tunables(&p->seg, tun, &nt) != SEG_E_OK)
		return;
	uint64_t next = 0;
	for (uint32_t i = 0; i < nh && i < nt; i++) {
		const struct la_shm_hold *was = &pp->holds[i];
		if (was->expires_ns && !h[i].expires_ns && tun[i].value == was->revert_value) {
			struct audit_event ev;
			memset(&ev, 0, sizeof(ev));
			ev.trigger = AUDIT_T_expiry;
			ev.peer_uid = -1;
			snprintf(ev.actor, sizeof(ev.actor), "hold expired");
			ev.action = AUDIT_A_revert;
			ev.result = AUDIT_R_ok;
			ev.pid = p->seg.hdr.pid;
			ev.target_uid = p->seg.uid;
			snprintf(ev.exe, sizeof(ev.exe), "%.*s", (int)sizeof(ev.exe) - 1,
			         proc_name(p));
			snprintf(ev.name, sizeof(ev.name), "%s", tunable_table[i].name);
			ev.has_values = true;
			ev.old_value = pp->held_value[i];
			ev.new_value = tun[i].value;
			audit_record(&d->audit, &ev);
		}
		if (h[i].expires_ns) {
			pp->held_value[i] = tun[i].value;
			if (!next || h[i].expires_ns < next)
				next = h[i].expires_ns;
		}
		pp->holds[i] = h[i];
	}
	if (!next) {
		if (pp->hold_ev)
			evtimer_del(pp->hold_ev);
		return;
	}
	if (!pp->hold_ev && !(pp->hold_ev = evtimer_new(d->base, on_hold_timer, pp)))
		return;
	/* a little after the expiry: the process's control thread reverts at it */
	uint64_t now = mono_ns(), wait = (next > now ? next - now : 0) + 20000000u;
	struct timeval tv = {(time_t)(wait / 1000000000u),
	                     (suseconds_t)(wait % 1000000000u / 1000)};
	evtimer_add(pp->hold_ev, &tv);
}

static void on_hold_timer(evutil_socket_t fd, short what, void *arg)
{
	struct pol_proc *pp = arg;
	policy_holds_check(pp->d, pp->p);
}

/* ---- processes -------------------------------------------------------------------------------- */

static void cg_attach(struct ctld *d, struct proc *p)
{
	struct policy_engine *e = d->policy;
	struct pol_proc *pp = p->pol;
	for (int i = 0; i < e->nps; i++) {
		struct polstate *ps = e->ps[i];
		if (ps->def.on != POLICY_ON_CGROUP || ps->def.cgroup[0] || !pp->have_cg ||
		    pp->ncg_refs == (int)(sizeof(pp->cg_refs) / sizeof(pp->cg_refs[0])))
			continue;
		if (ps->def.profile[0] && strcmp(pp->profile_name, ps->def.profile))
			continue;
		struct cgwatch *cg = cg_watch(ps, pp->cg_dir, pp->cg_rel, false);
		if (cg) {
			cg->nprocs++;
			pp->cg_refs[pp->ncg_refs++] = cg;
		}
	}
}

static void cg_detach(struct ctld *d, struct proc *p)
{
	struct pol_proc *pp = p->pol;
	for (int i = 0; i < pp->ncg_refs; i++) {
		struct cgwatch *cg = pp->cg_refs[i];
		if (--cg->nprocs > 0 || cg->explicit_)
			continue;
		struct polstate *ps = cg->ps;
		for (struct cgwatch **pp2 = &ps->cgs; *pp2; pp2 = &(*pp2)->next)
			if (*pp2 == cg) {
				*pp2 = cg->next;
				break;
			}
		log_info("policy %s: no process left in cgroup %s; not watched", ps->def.name,
		         cg->rel);
		cg_free(cg);
	}
	pp->ncg_refs = 0;
}

void policy_proc_added(struct ctld *d, struct proc *p)
{
	if (!d->policy || p->pol)
		return;
	struct pol_proc *pp = calloc(1, sizeof(*pp));
	if (!pp)
		return;
	p->pol = pp;
	pp->p = p;
	pp->d = d;
	char dir[PATH_MAX], rel[PATH_MAX];
	if (cgroup_of_pid(p->seg.hdr.pid, dir, sizeof(dir), rel, sizeof(rel)) == 0) {
		size_t nd = strlen(dir) + 1, nr = strlen(rel) + 1;
		if ((pp->cg_dir = malloc(nd + nr))) {
			memcpy(pp->cg_dir, dir, nd);
			pp->cg_rel = memcpy(pp->cg_dir + nd, rel, nr);
			pp->have_cg = true;
		}
	}
	match_profile(d, p, true);
	cg_attach(d, p);
	tick_arm(d);
	policy_holds_check(d, p); /* holds made before we saw it: their reverts are audited */
}

void policy_proc_removed(struct ctld *d, struct proc *p)
{
	if (!p->pol)
		return;
	if (d->policy)
		cg_detach(d, p);
	if (p->pol->hold_ev)
		event_free(p->pol->hold_ev);
	free(p->pol->cg_dir);
	free(p->pol);
	p->pol = NULL;
	if (d->policy)
		tick_arm(d);
}

/* ---- configuration ------------------------------------------------------------------------------- */

static void polstate_maybe_free(struct polstate *ps)
{
	if (!ps->dead || ps->run)
		return;
	for (struct cgwatch *cg = ps->cgs; cg; cg = cg->next)
		if (cg->run)
			return;
	while (ps->cgs) {
		struct cgwatch *cg = ps->cgs;
		ps->cgs = cg->next;
		cg_free(cg);
	}
	pressure_watch_free(ps->psi);
	if (ps->psi_later.ev)
		event_free(ps->psi_later.ev);
	free(ps);
}

static void polstate_retire(struct polstate *ps)
{
	ps->dead = true;
	pressure_watch_free(ps->psi);
	ps->psi = NULL;
	if (ps->psi_later.ev)
		evtimer_del(ps->psi_later.ev);
	for (struct cgwatch *cg = ps->cgs; cg; cg = cg->next) {
		pressure_watch_free(cg->w);
		cg->w = NULL;
		if (cg->recheck.ev)
			evtimer_del(cg->recheck.ev);
	}
	polstate_maybe_free(ps);
}

static struct polstate *polstate_new(struct ctld *d, const struct policy *def)
{
	struct polstate *ps = calloc(1, sizeof(*ps));
	if (!ps)
		return NULL;
	ps->d = d;
	ps->def = *def;
	char err[512];
	if (def->on == POLICY_ON_PSI) {
		ps->psi_later.ev = evtimer_new(d->base, on_psi_later, ps);
		ps->psi =
		        pressure_watch_psi(d->base, def->psi_file, def->psi_full, def->psi_stall_us,
		                           def->psi_window_us, on_psi_event, ps, err, sizeof(err));
		if (!ps->psi)
			log_warn("policy %s: not watching PSI: %s", def->name, err);
		else
			log_info("policy %s: watching %s (%s %" PRIu64 "ms/%" PRIu64 "ms)",
			         def->name, def->psi_file, def->psi_full ? "full" : "some",
			         def->psi_stall_us / 1000, def->psi_window_us / 1000);
	} else if (def->on == POLICY_ON_CGROUP && def->cgroup[0]) {
		char dir[PATH_MAX];
		if (cgroup_dir_of(def->cgroup, dir, sizeof(dir)) == 0)
			cg_watch(ps, dir, def->cgroup, true);
	}
	return ps;
}

static void engine_build(struct ctld *d, struct policy_conf *pc)
{
	struct policy_engine *e = d->policy;
	e->conf = pc;
	e->ps = pc && pc->npolicies ? calloc((size_t)pc->npolicies, sizeof(*e->ps)) : NULL;
	e->nps = 0;
	for (int i = 0; e->ps && i < pc->npolicies; i++)
		if ((e->ps[e->nps] = polstate_new(d, &pc->policies[i])))
			e->nps++;
}

static void engine_clear(struct ctld *d)
{
	struct policy_engine *e = d->policy;
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	if (p->pol)
		cg_detach(d, p);
	for (int i = 0; i < e->nps; i++)
		polstate_retire(e->ps[i]);
	free(e->ps);
	e->ps = NULL;
	e->nps = 0;
}

int policy_init(struct ctld *d, struct policy_conf *pc)
{
	struct policy_engine *e = calloc(1, sizeof(*e));
	if (!e) {
		policy_conf_free(pc);
		return -1;
	}
	d->policy = e;
	e->tick = evtimer_new(d->base, on_tick, d);
	engine_build(d, pc ? pc : policy_conf_new());
	return e->tick ? 0 : -1;
}

void policy_reconfigure(struct ctld *d, struct policy_conf *pc)
{
	struct policy_engine *e = d->policy;
	if (!e) {
		policy_conf_free(pc);
		return;
	}
	engine_clear(d);
	struct policy_conf *old = e->conf;
	engine_build(d, pc);
	/* profiles re-matched by the new rules and applied where they now differ */
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	{
		if (!p->pol)
			continue;
		match_profile(d, p, true);
		cg_attach(d, p);
	}
	policy_conf_free(old);
	tick_arm(d);
}

void policy_shutdown(struct ctld *d)
{
	struct policy_engine *e = d->policy;
	if (!e)
		return;
	/* commands_shutdown ran first: no job will call back; drop what waited for one */
	while (e->runs) {
		struct run *r = e->runs;
		struct polstate *ps = r->ps;
		if (r->cg)
			r->cg->run = NULL;
		else
			ps->run = NULL;
		run_free(r);
		polstate_maybe_free(ps); /* one retired by a reload that waited for this run */
	}
	while (e->napplying)
		applying_drop(e, e->applying[e->napplying - 1]);
	free(e->applying);
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	policy_proc_removed(d, p);
	engine_clear(d);
	if (e->tick)
		event_free(e->tick);
	policy_conf_free(e->conf);
	free(e);
	d->policy = NULL;
}

/* ---- allocctl profiles / policies -------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static char *describe_policy(struct pool *pl, const struct policy *po)
{
	char buf[512], h[32], l[32];
	switch (po->on) {
	case POLICY_ON_PSI:
		snprintf(buf, sizeof(buf), "%s %" PRIu64 "ms in %" PRIu64 "ms on %.300s%s%s",
		         po->psi_full ? "full" : "some", po->psi_stall_us / 1000,
		         po->psi_window_us / 1000, po->psi_file,
		         po->min_available ? ", while MemAvailable < " : "", "");
		if (po->min_available) {
			fmt_size(h, sizeof(h), po->min_available);
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s", h);
		}
		break;
	case POLICY_ON_CGROUP:
		if (po->high.ppm)
			snprintf(h, sizeof(h), "%g%%", po->high.ppm / 1e4);
		else
			fmt_size(h, sizeof(h), po->high.bytes);
		if (po->low.ppm)
			snprintf(l, sizeof(l), "%g%%", po->low.ppm / 1e4);
		else
			fmt_size(l, sizeof(l), po->low.bytes);
		snprintf(buf, sizeof(buf), "usage reaches %s (re-armed under %s) of %.300s", h, l,
		         po->cgroup[0] ? po->cgroup : "each process's memory cgroup");
		break;
	case POLICY_ON_FREE:
		fmt_size(h, sizeof(h), po->above);
		snprintf(buf, sizeof(buf), "more than %s reclaimable for %" PRIu64 " ms", h,
		         po->for_ms);
		break;
	case POLICY_ON_IDLE:
		snprintf(buf, sizeof(buf), "no allocator activity for %" PRIu64 " ms", po->for_ms);
		break;
	}
	return pool_strdup(pl, buf);
}

int policy_reply(struct ctld *d, uid_t uid, struct pool *pl, Ctl__PolicyReply *r)
{
	struct policy_engine *e = d->policy;
	struct policy_conf *pc = e ? e->conf : NULL;
	if (!pc)
		return 0;
	r->has_dry_run = true;
	r->dry_run = pc->dry_run;
	r->has_profiles_applied = true;
	r->profiles_applied = e->profile_applied;
	if (e->ndelays) {
		uint64_t v[256];
		memcpy(v, e->delays, sizeof(v[0]) * (size_t)e->ndelays);
		qsort(v, (size_t)e->ndelays, sizeof(v[0]), cmp_u64);
		r->has_profile_delay_p50_ns = r->has_profile_delay_max_ns = true;
		r->profile_delay_p50_ns = v[e->ndelays / 2];
		r->profile_delay_max_ns = v[e->ndelays - 1];
	}
	r->profiles = pool_alloc(pl, sizeof(*r->profiles) * ((size_t)pc->nprofiles + 1));
	r->policies = pool_alloc(pl, sizeof(*r->policies) * ((size_t)e->nps + 1));
	if (!r->profiles || !r->policies)
		return -1;
	for (int i = 0; i < pc->nprofiles; i++) {
		const struct profile *pr = &pc->profiles[i];
		Ctl__ProfileInfo *pi = pool_alloc(pl, sizeof(*pi));
		if (!pi)
			return -1;
		ctl__profile_info__init(pi);
		pi->name = pool_strdup(pl, pr->name);
		pi->has_line = true;
		pi->line = (uint32_t)pr->line;
		pi->matches = pool_alloc(pl, sizeof(char *) * 6);
		char m[PATH_MAX];
#define ADD_MATCH(...)                                                     \
	do {                                                               \
		snprintf(m, sizeof(m), __VA_ARGS__);                       \
		if (pi->matches)                                           \
			pi->matches[pi->n_matches++] = pool_strdup(pl, m); \
	} while (0)
		if (pr->m_name)
			ADD_MATCH("name=%s", pr->m_name);
		if (pr->m_exe)
			ADD_MATCH("exe=%s", pr->m_exe);
		if (pr->m_cgroup)
			ADD_MATCH("cgroup=%s", pr->m_cgroup);
		if (pr->has_uid)
			ADD_MATCH("uid=%u", (unsigned)pr->m_uid);
		if (pr->has_cmdline)
			ADD_MATCH("cmdline=~%s", pr->m_cmdline);
#undef ADD_MATCH
		pi->settings = pool_alloc(pl, sizeof(*pi->settings) * ((size_t)pr->nset + 1));
		for (int k = 0; pi->settings && k < pr->nset; k++) {
			const struct tunable_info *ti = &tunable_table[pr->set[k].tunable];
			Ctl__Tunable *tu = pool_alloc(pl, sizeof(*tu));
			if (!tu)
				return -1;
			ctl__tunable__init(tu);
			tu->name = (char *)ti->name;
			tu->value = pr->set[k].value;
			tu->type = (char *)units_type_name(ti->type);
			pi->settings[pi->n_settings++] = tu;
		}
		pi->pids = pool_alloc(pl, sizeof(int32_t) * ((size_t)d->nprocs + 1));
		struct proc *p;
		TAILQ_FOREACH(p, &d->procs, link)
		if (pi->pids && p->pol && p->pol->profile == pr && may_see(uid, p))
			pi->pids[pi->n_pids++] = p->seg.hdr.pid;
		if (!pi->name || !pi->matches || !pi->settings || !pi->pids)
			return -1;
		r->profiles[r->n_profiles++] = pi;
	}
	for (int i = 0; i < e->nps; i++) {
		const struct polstate *ps = e->ps[i];
		const struct policy *po = &ps->def;
		Ctl__PolicyInfo *pi = pool_alloc(pl, sizeof(*pi));
		if (!pi)
			return -1;
		ctl__policy_info__init(pi);
		pi->name = pool_strdup(pl, po->name);
		pi->on = (char *)policy_on_name(po->on);
		pi->condition = describe_policy(pl, po);
		pi->actions = pool_alloc(pl, sizeof(char *) * RUNG_MAX);
		for (int k = 0; pi->actions && k < po->nrungs; k++)
			pi->actions[pi->n_actions++] = (char *)policy_rung_name(po->rungs[k]);
		if (po->profile[0])
			pi->profile = pool_strdup(pl, po->profile);
		pi->has_dry_run = true;
		pi->dry_run = po->dry_run || pc->dry_run;
		int nw = ps->psi ? 1 : 0;
		for (const struct cgwatch *cg = ps->cgs; cg; cg = cg->next)
			nw += cg->w != NULL;
		pi->watching = pool_alloc(pl, sizeof(char *) * ((size_t)nw + 1));
		if (pi->watching && ps->psi)
			pi->watching[pi->n_watching++] =
			        pool_strdup(pl, pressure_watch_path(ps->psi));
		for (const struct cgwatch *cg = ps->cgs; pi->watching && cg; cg = cg->next)
			if (cg->w)
				pi->watching[pi->n_watching++] = pool_strdup(pl, cg->rel);
		pi->has_events = pi->has_runs = pi->has_released_bytes = pi->has_deferred = true;
		pi->events = ps->events;
		pi->runs = ps->runs;
		pi->released_bytes = ps->released;
		pi->deferred = ps->deferred;
		if (ps->runs) {
			pi->has_last_response_ns = true;
			pi->last_response_ns = ps->last_latency_ns;
			pi->last_reason = pool_strdup(pl, ps->last_why);
		}
		pi->has_line = true;
		pi->line = (uint32_t)po->line;
		if (!pi->name || !pi->condition || !pi->actions || !pi->watching)
			return -1;
		r->policies[r->n_policies++] = pi;
	}
	return 0;
}

/* ---- figures -------------------------------------------------------------------------------------- */

static void hist_write(struct evbuffer *b, const char *name, const char *labels,
                       const struct histogram *h)
{
	uint64_t cum = 0;
	for (int i = 0; i <= LAT_BUCKETS; i++) {
		cum += h->b[i];
		if (i < LAT_BUCKETS)
			evbuffer_add_printf(b, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name,
			                    labels, *labels ? "," : "", lat_bounds[i], cum);
		else
			evbuffer_add_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name,
			                    labels, *labels ? "," : "", cum);
	}
	const char *open = *labels ? "{" : "", *close = *labels ? "}" : "";
	evbuffer_add_printf(b, "%s_sum%s%s%s %.9f\n%s_count%s%s%s %" PRIu64 "\n", name, open,
	                    labels, close, h->sum, name, open, labels, close, h->count);
}

void policy_write_metrics(struct ctld *d, struct evbuffer *b)
{
	struct policy_engine *e = d->policy;
	if (!e)
		return;
	evbuffer_add_printf(b, "# HELP liballoc_ctld_profile_apply_delay_seconds Time from a "
	                       "process's exec to its profile being in effect\n"
	                       "# TYPE liballoc_ctld_profile_apply_delay_seconds histogram\n");
	hist_write(b, "liballoc_ctld_profile_apply_delay_seconds", "", &e->apply_delay);
	static const struct {
		const char *name, *help;
		size_t off;
	} fam[] = {
	        {"liballoc_ctld_policy_events_total", "Events a policy saw (pressure, time)",
	         offsetof(struct polstate, events)},
	        {"liballoc_ctld_policy_runs_total", "Ladder runs a policy started",
	         offsetof(struct polstate, runs)},
	        {"liballoc_ctld_policy_released_bytes_total",
	         "Bytes a policy's runs released (dry run: would release)",
	         offsetof(struct polstate, released)},
	        {"liballoc_ctld_policy_deferred_total",
	         "Steps a policy deferred for its CPU budget", offsetof(struct polstate, deferred)},
	};
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s counter\n", fam[f].name,
		                    fam[f].help, fam[f].name);
		for (int i = 0; i < e->nps; i++)
			evbuffer_add_printf(
			        b, "%s{policy=\"%s\",on=\"%s\"} %" PRIu64 "\n", fam[f].name,
			        e->ps[i]->def.name, policy_on_name(e->ps[i]->def.on),
			        *(const uint64_t *)((const char *)e->ps[i] + fam[f].off));
	}
	evbuffer_add_printf(
	        b, "# HELP liballoc_ctld_policy_response_seconds Time from a "
	           "policy's event to enough memory back (its run's end when never enough)\n"
	           "# TYPE liballoc_ctld_policy_response_seconds histogram\n");
	for (int i = 0; i < e->nps; i++) {
		char labels[128];
		snprintf(labels, sizeof(labels), "policy=\"%s\"", e->ps[i]->def.name);
		hist_write(b, "liballoc_ctld_policy_response_seconds", labels, &e->ps[i]->latency);
	}
}
