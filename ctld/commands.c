/* commands.c — runs one mailbox command on many processes at once without blocking the
 * loop: every target's doorbell is rung immediately, then a short timer polls the mailboxes
 * until each has answered or timed out (and was cancelled). One of our commands holds a
 * process's mailbox at a time (proc->busy); the others wait their turn within the timeout.
 * A job comes from a client (the reply goes back on its connection) or from the daemon
 * itself (profiles, policies: a callback gets the outcomes); either way every change and
 * command is recorded once in the audit trail when its target is done. */
#include <stdlib.h>
#include <string.h>

#include "ctl.pb-c.h"
#include "ctld.h"
#include "log.h"
#include "pool.h"
#include "units.h"
#include "wire.h"

/* Mailbox polling while commands are in flight: the first poll comes POLL_MIN_US after a
 * doorbell (a control thread usually answers within tens of microseconds), then the period
 * doubles up to POLL_MAX_US, so a slow process costs little CPU. */
#define POLL_MIN_US 40
#define POLL_MAX_US 250
static long poll_us = POLL_MIN_US;

enum target_state { T_LOCK, T_SUBMIT, T_WAIT, T_DONE };

struct target {
	struct proc *p;
	enum target_state state;
	int step;
	bool locked;
	uint64_t seq;
	uint64_t deadline_ns; /* CLOCK_MONOTONIC */
	Ctl__ErrorCode code;
	char message[LA_REASON_MAX + 96];
	struct seg_result sum;          /* bytes and syscalls summed over the steps */
	int64_t values[LA_NTUNABLES];   /* value_out per step (get/set) */
	uint32_t sources[LA_NTUNABLES]; /* and its source */
	int nvalues;
	int64_t old[LA_NTUNABLES]; /* set: every tunable's value before the job */
	bool has_old;
};

struct job {
	TAILQ_ENTRY(job) link;
	struct ctld *d;
	struct conn *conn; /* NULL once the client went away */
	uint64_t req_id;
	enum job_kind kind;
	struct job_step *steps;
	int nsteps;
	struct target *targets;
	int ntargets, remaining;
	struct job_origin origin; /* trigger and actor (operator: the peer's credentials) */
	int64_t peer_uid;
	int32_t peer_pid;
};

static enum audit_action job_action(enum job_kind k)
{
	switch (k) {
	case JOB_TRIM:
		return AUDIT_A_trim;
	case JOB_RELEASE:
		return AUDIT_A_release;
	case JOB_FLUSH:
		return AUDIT_A_flush;
	default:
		return AUDIT_A_set;
	}
}

/* One audit event per change (set: per tunable answered or refused) or per command. */
static void audit_target(struct job *j, const struct target *t)
{
	if (j->kind == JOB_GET)
		return;
	struct audit_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.trigger = j->origin.trigger;
	snprintf(ev.actor, sizeof(ev.actor), "%s", j->origin.actor);
	ev.peer_uid = j->peer_uid;
	ev.peer_pid = j->peer_pid;
	ev.action = job_action(j->kind);
	ev.pid = t->p->seg.hdr.pid;
	ev.target_uid = t->p->seg.uid;
	snprintf(ev.exe, sizeof(ev.exe), "%.*s", (int)sizeof(ev.exe) - 1, proc_name(t->p));
	ev.result = t->code == CTL__ERROR_CODE__OK ? AUDIT_R_ok : AUDIT_R_failed;
	if (j->kind != JOB_SET) {
		ev.arg = j->steps[0].cmd.arg;
		ev.bytes_released = t->sum.bytes_released;
		ev.duration_ns = t->sum.duration_ns;
		if (t->code != CTL__ERROR_CODE__OK)
			snprintf(ev.message, sizeof(ev.message), "%.*s",
			         (int)sizeof(ev.message) - 1, t->message);
		audit_record(&j->d->audit, &ev);
		return;
	}
	/* the steps that answered, then the one that failed (if any) */
	int n = t->nvalues + (t->code != CTL__ERROR_CODE__OK && t->nvalues < j->nsteps);
	for (int k = 0; k < n; k++) {
		const struct job_step *st = &j->steps[k];
		bool ok = k < t->nvalues;
		snprintf(ev.name, sizeof(ev.name), "%s", st->cmd.name);
		ev.has_values = true;
		ev.old_value = t->has_old && st->tunable >= 0 ? t->old[st->tunable] : 0;
		ev.new_value = ok ? t->values[k] : st->cmd.value;
		ev.hold_ms = st->cmd.arg;
		ev.result = ok ? AUDIT_R_ok : AUDIT_R_failed;
		snprintf(ev.message, sizeof(ev.message), "%.*s", (int)sizeof(ev.message) - 1,
		         ok ? "" : t->message);
		ev.duration_ns = k == n - 1 ? t->sum.duration_ns : 0;
		audit_record(&j->d->audit, &ev);
	}
}

static Ctl__ErrorCode code_of_status(int32_t st)
{
	switch (st) {
	case LA_ST_OK:
		return CTL__ERROR_CODE__OK;
	case LA_ST_EINVAL_NAME:
		return CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE;
	case LA_ST_ERANGE:
		return CTL__ERROR_CODE__ERR_RANGE;
	case LA_ST_EREADONLY:
		return CTL__ERROR_CODE__ERR_READONLY;
	case LA_ST_ECANCELLED:
		return CTL__ERROR_CODE__ERR_TIMEOUT;
	default:
		return CTL__ERROR_CODE__ERR_FAILED;
	}
}

static void target_finish(struct job *j, struct target *t, Ctl__ErrorCode code, const char *msg)
{
	if (t->state == T_DONE)
		return;
	if (t->locked) {
		seg_mb_unlock(&t->p->seg, j->d->token);
		t->locked = false;
		t->p->busy = false;
	}
	t->state = T_DONE;
	t->code = code;
	if (msg)
		snprintf(t->message, sizeof(t->message), "%s", msg);
	j->remaining--;
	if (code == CTL__ERROR_CODE__ERR_TIMEOUT)
		j->d->st.command_timeouts++;
	if (code != CTL__ERROR_CODE__OK)
		log_info("%s on pid %d: %s", seg_command_name(j->steps[0].cmd.command),
		         t->p->seg.hdr.pid, t->message);
	audit_target(j, t);
	if (j->kind == JOB_SET)
		policy_holds_check(j->d, t->p); /* a hold made or ended: its revert is audited */
}

static void target_fail_seg(struct job *j, struct target *t, int err)
{
	char msg[sizeof(t->message)];
	snprintf(msg, sizeof(msg), "%s (%s)", seg_strerror(err), t->p->seg.why);
	target_finish(j, t,
	              err == SEG_E_BUSY      ? CTL__ERROR_CODE__ERR_BUSY
	              : err == SEG_E_TIMEOUT ? CTL__ERROR_CODE__ERR_TIMEOUT
	                                     : CTL__ERROR_CODE__ERR_FAILED,
	              msg);
}

/* Move one target as far as it can go now. */
/* After a mailbox step: true when the target must wait (mailbox busy, deadline not yet
 * passed) or has failed; false when the step succeeded. */
static bool step_blocked(struct job *j, struct target *t, int err, uint64_t now)
{
	if (!err)
		return false;
	if (err != SEG_E_BUSY || now > t->deadline_ns)
		target_fail_seg(j, t, err);
	return true;
}

static void target_advance(struct job *j, struct target *t, uint64_t now)
{
	struct seg *s = &t->p->seg;
	for (;;) {
		if (t->state == T_DONE)
			return;
		if (t->p->gone && t->state != T_WAIT) {
			target_finish(j, t, CTL__ERROR_CODE__ERR_NO_PROCESS, "the process exited");
			return;
		}
		int err;
		switch (t->state) {
		case T_LOCK:
			if (t->p->busy) {
				if (now > t->deadline_ns)
					target_finish(j, t, CTL__ERROR_CODE__ERR_BUSY,
					              "mailbox busy with another command");
				return;
			}
			if ((err = seg_map_mailbox(s))) {
				target_fail_seg(j, t, err);
				return;
			}
			err = seg_mb_lock(s, j->d->token,
			                  (uint64_t)j->d->cfg.command_timeout_ms * 1000000ull +
			                          1000000000ull);
			if (step_blocked(j, t, err, now))
				return;
			t->locked = true;
			t->p->busy = true;
			t->state = T_SUBMIT;
			break;
		case T_SUBMIT:
			t->seq = ++j->d->next_seq;
			err = seg_mb_submit(s, &j->steps[t->step].cmd, t->seq);
			if (step_blocked(j, t, err, now))
				return;
			j->d->st.commands++;
			t->state = T_WAIT;
			poll_us = POLL_MIN_US; /* a fresh doorbell: look again soon */
			return;                /* the answer comes later */
		case T_WAIT: {
			struct seg_result r;
			err = seg_mb_poll(s, t->seq, &r);
			if (err == SEG_E_TIMEOUT) {
				if (now <= t->deadline_ns && !t->p->gone)
					return;
				int c = seg_mb_cancel(s);
				if (seg_mb_poll(s, t->seq, &r) != SEG_E_OK) {
					char msg[128];
					snprintf(msg, sizeof(msg),
					         t->p->gone
					                 ? "the process exited during the command"
					         : c == SEG_E_RUNNING
					                 ? "no answer within %d ms (still running)"
					                 : "no answer within %d ms (cancelled)",
					         j->d->cfg.command_timeout_ms);
					target_finish(j, t,
					              t->p->gone ? CTL__ERROR_CODE__ERR_NO_PROCESS
					                         : CTL__ERROR_CODE__ERR_TIMEOUT,
					              msg);
					return;
				}
			} else if (err) {
				target_fail_seg(j, t, err);
				return;
			}
			t->sum.bytes_released += r.bytes_released;
			t->sum.syscalls_mmap += r.syscalls_mmap;
			t->sum.syscalls_munmap += r.syscalls_munmap;
			t->sum.syscalls_madvise += r.syscalls_madvise;
			t->sum.syscalls_mprotect += r.syscalls_mprotect;
			t->sum.duration_ns += r.duration_ns;
			if (r.status != LA_ST_OK) {
				char msg[sizeof(t->message)];
				snprintf(msg, sizeof(msg), "%s%s%s", seg_status_text(r.status),
				         r.reason[0] ? ": " : "", r.reason);
				target_finish(j, t, code_of_status(r.status), msg);
				return;
			}
			if (t->nvalues < LA_NTUNABLES) {
				t->sources[t->nvalues] = r.source;
				t->values[t->nvalues++] = r.value_out;
			}
			if (++t->step == j->nsteps) {
				target_finish(j, t, CTL__ERROR_CODE__OK, NULL);
				return;
			}
			t->state = T_SUBMIT;
			break;
		}
		case T_DONE:
			return;
		}
	}
}

static Ctl__Tunable *make_tunable(struct pool *pl, int idx, int64_t value, uint32_t source)
{
	const struct tunable_info *ti = &tunable_table[idx];
	Ctl__Tunable *tu = pool_alloc(pl, sizeof(*tu));
	if (!tu)
		return NULL;
	ctl__tunable__init(tu);
	tu->name = (char *)ti->name;
	tu->value = value;
	tu->has_explicitly_set = true;
	tu->explicitly_set = source != LA_SRC_default;
	tu->source = (char *)la_source_name(source);
	tu->has_min = tu->has_max = tu->has_live = true;
	tu->min = ti->min;
	tu->max = ti->max;
	tu->live = ti->live;
	tu->type = (char *)units_type_name(ti->type);
	tu->help = (char *)ti->help;
	return tu;
}

void tunable_add_hold(struct Ctl__Tunable *tu, const struct la_shm_hold *h, uint64_t now)
{
	if (!h->expires_ns)
		return;
	tu->has_expires_in_ms = tu->has_revert_value = true;
	tu->expires_in_ms = h->expires_ns > now ? (h->expires_ns - now + 999999) / 1000000 : 0;
	tu->revert_value = h->revert_value;
	tu->revert_source = (char *)la_source_name(h->revert_source);
}

static void job_reply(struct job *j)
{
	if (!j->conn)
		return; /* the daemon's own job, or the client went away */
	struct pool pl;
	pool_init(&pl);
	Ctl__Reply reply = CTL__REPLY__INIT;
	reply.protocol_version = CTL_PROTOCOL_VERSION;
	reply.has_id = true;
	reply.id = j->req_id;
	reply.code = CTL__ERROR_CODE__OK;
	reply.n_results = (size_t)j->ntargets;
	reply.results = pool_alloc(&pl, sizeof(*reply.results) * (size_t)(j->ntargets + 1));
	for (int i = 0; reply.results && i < j->ntargets; i++) {
		struct target *t = &j->targets[i];
		Ctl__CommandResult *r = pool_alloc(&pl, sizeof(*r));
		if (!r) {
			reply.results = NULL;
			break;
		}
		ctl__command_result__init(r);
		r->pid = t->p->seg.hdr.pid;
		r->exe = (char *)proc_name(t->p);
		r->code = t->code;
		if (t->message[0])
			r->message = t->message;
		r->has_bytes_released = r->has_mmap_calls = r->has_munmap_calls =
		        r->has_madvise_calls = r->has_mprotect_calls = r->has_duration_ns = true;
		r->bytes_released = t->sum.bytes_released;
		r->mmap_calls = t->sum.syscalls_mmap;
		r->munmap_calls = t->sum.syscalls_munmap;
		r->madvise_calls = t->sum.syscalls_madvise;
		r->mprotect_calls = t->sum.syscalls_mprotect;
		r->duration_ns = t->sum.duration_ns;
		if ((j->kind == JOB_GET || j->kind == JOB_SET) && t->nvalues) {
			struct la_shm_hold holds[LA_NTUNABLES];
			uint32_t nh = 0;
			if (seg_read_holds(&t->p->seg, holds, &nh) != SEG_E_OK)
				nh = 0;
			uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
			r->tunables = pool_alloc(&pl, sizeof(*r->tunables) * (size_t)t->nvalues);
			for (int k = 0; r->tunables && k < t->nvalues; k++) {
				int ti = j->steps[k].tunable;
				if (!(r->tunables[k] =
				              make_tunable(&pl, ti, t->values[k], t->sources[k])))
					continue;
				if (ti >= 0 && (uint32_t)ti < nh)
					tunable_add_hold(r->tunables[k], &holds[ti], now);
				r->n_tunables++;
			}
		}
		reply.results[i] = r;
	}
	if (!reply.results && j->ntargets) {
		reply.n_results = 0;
		reply.code = CTL__ERROR_CODE__ERR_INTERNAL;
		reply.message = "out of memory";
	}
	if (j->conn) {
		conn_send_reply(j->conn, &reply);
		conn_job_done(j->conn);
	}
	pool_free(&pl);
}

static void job_done(struct job *j)
{
	if (!j->origin.done)
		return;
	struct job_outcome *out = calloc((size_t)j->ntargets + 1, sizeof(*out));
	for (int i = 0; out && i < j->ntargets; i++) {
		const struct target *t = &j->targets[i];
		out[i].p = t->p;
		out[i].code = t->code;
		out[i].message = t->message;
		out[i].sum = t->sum;
		out[i].nvalues = t->nvalues;
		out[i].values = t->values;
	}
	j->origin.done(j->d, out, out ? j->ntargets : 0, j->origin.arg);
	free(out);
}

static void job_free(struct job *j)
{
	for (int i = 0; i < j->ntargets; i++)
		proc_unref(j->targets[i].p);
	free(j->targets);
	free(j->steps);
	free(j);
}

static void arm_timer(struct ctld *d)
{
	if (!TAILQ_EMPTY(&d->jobs) && !evtimer_pending(d->job_timer, NULL)) {
		struct timeval tv = {0, poll_us};
		evtimer_add(d->job_timer, &tv);
		poll_us = poll_us * 2 > POLL_MAX_US ? POLL_MAX_US : poll_us * 2;
	}
}

static void poll_jobs(struct ctld *d)
{
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	struct job *j, *tmp;
	TAILQ_FOREACH_SAFE(j, &d->jobs, link, tmp)
	{
		for (int i = 0; i < j->ntargets; i++)
			target_advance(j, &j->targets[i], now);
		if (j->remaining == 0) {
			TAILQ_REMOVE(&d->jobs, j, link);
			job_reply(j);
			job_done(j);
			job_free(j);
		}
	}
	arm_timer(d);
}

static void on_job_timer(evutil_socket_t fd, short what, void *arg)
{
	poll_jobs(arg);
}

/* Create and start a job; NULL when out of memory (nothing started). */
static struct job *job_start(struct ctld *d, struct conn *c, uint64_t req_id,
                             const struct job_origin *origin, enum job_kind kind,
                             struct proc **targets, int ntargets, const struct job_step *steps,
                             int nsteps)
{
	if (!d->job_timer) {
		TAILQ_INIT(&d->jobs);
		d->job_timer = evtimer_new(d->base, on_job_timer, d);
	}
	struct job *j = calloc(1, sizeof(*j));
	if (j) {
		j->targets = calloc((size_t)ntargets + 1, sizeof(*j->targets));
		j->steps = calloc((size_t)nsteps + 1, sizeof(*j->steps));
	}
	if (!j || !j->targets || !j->steps || !d->job_timer) {
		if (j) {
			free(j->targets);
			free(j->steps);
			free(j);
		}
		return NULL;
	}
	j->d = d;
	j->conn = c;
	j->req_id = req_id;
	j->kind = kind;
	j->peer_uid = -1;
	if (origin) {
		j->origin = *origin;
	} else {
		j->origin.trigger = AUDIT_T_operator;
		j->peer_uid = conn_uid(c);
		j->peer_pid = conn_pid(c);
		snprintf(j->origin.actor, sizeof(j->origin.actor), "uid %u pid %d",
		         (unsigned)conn_uid(c), (int)conn_pid(c));
	}
	memcpy(j->steps, steps, sizeof(*steps) * (size_t)nsteps);
	j->nsteps = nsteps;
	j->ntargets = j->remaining = ntargets;
	uint64_t deadline =
	        seg_now_ns(CLOCK_MONOTONIC) + (uint64_t)d->cfg.command_timeout_ms * 1000000ull;
	for (int i = 0; i < ntargets; i++) {
		struct target *t = &j->targets[i];
		t->p = targets[i];
		proc_ref(t->p);
		t->deadline_ns = deadline;
		t->state = T_LOCK;
		if (kind == JOB_SET) { /* the values before, for the audit trail */
			struct la_shm_tunable tun[LA_NTUNABLES];
			uint32_t n = 0;
			if (seg_read_tunables(&t->p->seg, tun, &n) == SEG_E_OK) {
				for (uint32_t k = 0; k < n; k++)
					t->old[k] = tun[k].value;
				t->has_old = true;
			}
		}
		if (t->p->seg.hdr.control_state != LA_CONTROL_RUNNING)
			target_finish(j, t, CTL__ERROR_CODE__ERR_FAILED,
			              t->p->seg.hdr.control_state == LA_CONTROL_OFF
			                      ? "the process runs without its control thread "
			                        "(LIBALLOC_CONTROL=0)"
			                      : "the process's control thread failed to start");
		else if (nsteps == 0)
			target_finish(j, t, CTL__ERROR_CODE__OK, NULL);
	}
	TAILQ_INSERT_TAIL(&d->jobs, j, link);
	/* ring every doorbell now; answers are collected by the timer, soon */
	poll_us = POLL_MIN_US;
	if (evtimer_pending(d->job_timer, NULL))
		evtimer_del(d->job_timer);
	poll_jobs(d);
	return j;
}

void commands_start(struct ctld *d, struct conn *c, uint64_t req_id, enum job_kind kind,
                    struct proc **targets, int ntargets, const struct job_step *steps, int nsteps)
{
	if (job_start(d, c, req_id, NULL, kind, targets, ntargets, steps, nsteps))
		return;
	Ctl__Reply reply = CTL__REPLY__INIT;
	reply.protocol_version = CTL_PROTOCOL_VERSION;
	reply.has_id = true;
	reply.id = req_id;
	reply.code = CTL__ERROR_CODE__ERR_INTERNAL;
	reply.message = "out of memory";
	conn_send_reply(c, &reply);
	conn_job_done(c);
}

int commands_run(struct ctld *d, const struct job_origin *origin, enum job_kind kind,
                 struct proc **targets, int ntargets, const struct job_step *steps, int nsteps)
{
	return job_start(d, NULL, 0, origin, kind, targets, ntargets, steps, nsteps) ? 0 : -1;
}

void commands_conn_closed(struct ctld *d, struct conn *c)
{
	if (!d->job_timer)
		return;
	struct job *j;
	TAILQ_FOREACH(j, &d->jobs, link)
	if (j->conn == c)
		j->conn = NULL; /* finish the mailbox protocol anyway, drop the reply */
}

void commands_shutdown(struct ctld *d)
{
	if (!d->job_timer)
		return;
	struct job *j;
	while ((j = TAILQ_FIRST(&d->jobs))) {
		for (int i = 0; i < j->ntargets; i++) {
			struct target *t = &j->targets[i];
			if (t->state == T_WAIT)
				seg_mb_cancel(&t->p->seg);
			if (t->state != T_DONE)
				target_finish(j, t, CTL__ERROR_CODE__ERR_INTERNAL,
				              "daemon shutting down");
		}
		TAILQ_REMOVE(&d->jobs, j, link);
		j->conn = NULL;
		job_free(j);
	}
	event_free(d->job_timer);
	d->job_timer = NULL;
}
