/* history.c — the two-tier sample rings and the event ring (history.h). */
#include "history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const hist_figure_name[HIST_NFIG] = {
#define HIST_X_NAME(name, label) #name,
        HIST_FIGURES(HIST_X_NAME)
#undef HIST_X_NAME
};
const char *const hist_figure_label[HIST_NFIG] = {
#define HIST_X_LABEL(name, label) label,
        HIST_FIGURES(HIST_X_LABEL)
#undef HIST_X_LABEL
};
const char *const hist_event_kind_name[HIST_NEV] = {
#define HIST_X_KNAME(name) #name,
        HIST_EVENT_KINDS(HIST_X_KNAME)
#undef HIST_X_KNAME
};

#define FINE_INIT_SLOTS 16u

static uint64_t tick_of(const struct history *h, int64_t t_ms)
{
	return t_ms > 0 ? (uint64_t)t_ms / h->sample_ms : 0;
}

int64_t history_period_ms(const struct history *h, bool coarse)
{
	return (int64_t)h->sample_ms * (coarse ? HIST_COARSE_TICKS : 1);
}

/* ---- memory accounting -------------------------------------------------------------------- */

static void charge(struct history *h, const struct hist_proc *p, size_t n)
{
	h->bytes += n;
	h->uids[p->uix].bytes += n;
}

static void refund(struct history *h, const struct hist_proc *p, size_t n)
{
	h->bytes -= n;
	h->uids[p->uix].bytes -= n;
}

static void live_changed(struct history *h, uint32_t u, int delta)
{
	struct hist_uid *e = &h->uids[u];
	if (delta > 0 && e->nlive++ == 0)
		h->nactive++;
	else if (delta < 0 && --e->nlive == 0)
		h->nactive--;
}

static void unlink_proc(struct history *h, struct hist_proc *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		h->head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		h->tail = p->prev;
	h->nprocs--;
	if (!p->exited_ms) {
		h->nlive--;
		live_changed(h, p->uix, -1);
	}
}

static size_t tier_bytes(const struct hist_tier *t)
{
	return (size_t)t->alloc * sizeof(struct hist_sample);
}

static void drop_proc(struct history *h, struct hist_proc *p)
{
	unlink_proc(h, p);
	refund(h, p, sizeof(*p) + tier_bytes(&p->fine) + tier_bytes(&p->coarse));
	free(p->fine.s);
	free(p->coarse.s);
	free(p);
}

/* The uid's entry (made when create), or -1. */
static int64_t uid_index(struct history *h, uint32_t uid, bool create)
{
	for (uint32_t i = 0; i < h->nuids; i++)
		if (h->uids[i].uid == uid)
			return i;
	if (!create)
		return -1;
	if (h->nuids == h->cap_uids) {
		uint32_t cap = h->cap_uids ? h->cap_uids * 2 : 8;
		struct hist_uid *u = realloc(h->uids, cap * sizeof(*u));
		if (!u)
			return -1;
		h->uids = u;
		h->cap_uids = cap;
	}
	h->uids[h->nuids] = (struct hist_uid){.uid = uid};
	return h->nuids++;
}

static size_t share_of(const struct history *h, uint32_t u)
{
	uint32_t n = h->nactive + (h->uids[u].nlive == 0);
	return h->max_bytes / (n ? n : 1);
}

size_t history_uid_share(const struct history *h, uint32_t uid)
{
	int64_t u = uid_index((struct history *)h, uid, false);
	if (u < 0)
		return h->max_bytes / (h->nactive + 1);
	return share_of(h, (uint32_t)u);
}

size_t history_uid_bytes(const struct history *h, uint32_t uid)
{
	int64_t u = uid_index((struct history *)h, uid, false);
	return u < 0 ? 0 : h->uids[u].bytes;
}

/* How far uid u is over its share (a uid without a live history has none); 0 if not. */
static size_t over_share(const struct history *h, uint32_t u)
{
	size_t share = h->uids[u].nlive ? h->max_bytes / h->nactive : 0;
	return h->uids[u].bytes > share ? h->uids[u].bytes - share : 0;
}

/* The exited history that goes first: the longest gone, of uid u only when u >= 0. */
static struct hist_proc *oldest_exited(struct history *h, int64_t u, const struct hist_proc *keep)
{
	struct hist_proc *old = NULL;
	for (struct hist_proc *p = h->head; p; p = p->next)
		if (p->exited_ms && p != keep && (u < 0 || p->uix == u) &&
		    (!old || p->exited_ms < old->exited_ms))
			old = p;
	return old;
}

static void tier_shrink(struct history *h, struct hist_proc *p, struct hist_tier *t);

/* Keep the newer half of each of p's rings; they grow no more. */
static void cut_half(struct history *h, struct hist_proc *p)
{
	struct hist_tier *ts[2] = {&p->coarse, &p->fine};
	for (int i = 0; i < 2; i++) {
		struct hist_tier *t = ts[i];
		uint32_t keep = t->len / 2;
		t->head = (t->head + (t->len - keep)) % (t->alloc ? t->alloc : 1);
		t->len = keep;
		tier_shrink(h, p, t);
	}
	if (!p->truncated) {
		p->truncated = true;
		h->st.truncated++;
	}
}

/* Make room for need more bytes of uid u's history (keep: the one growing, never dropped).
 * Within u's share first (unless !shared: a new history and its first slots, which every
 * process gets): u's own exited histories go, the longest gone first. Then within the
 * total: exited histories of the uid furthest over its share (else u's own), else that
 * uid's largest live history is cut to half. True when the room is there. */
static bool make_room(struct history *h, size_t need, const struct hist_proc *keep, uint32_t u,
                      bool shared)
{
	while (shared && h->uids[u].bytes + need > share_of(h, u)) {
		struct hist_proc *old = oldest_exited(h, u, keep);
		if (!old)
			return false;
		drop_proc(h, old);
		h->st.evicted++;
	}
	while (h->bytes + need > h->max_bytes) {
		int64_t v = -1;
		size_t most = 0;
		for (uint32_t i = 0; i < h->nuids; i++)
			if (i != u && over_share(h, i) > most) {
				most = over_share(h, i);
				v = i;
			}
		struct hist_proc *old = oldest_exited(h, v >= 0 ? v : u, keep);
		if (old) {
			drop_proc(h, old);
			h->st.evicted++;
			continue;
		}
		if (v < 0)
			return false; /* nobody is over the share (rounding): nothing to take */
		struct hist_proc *big = NULL;
		size_t big_bytes = 0;
		for (struct hist_proc *p = h->head; p; p = p->next) {
			size_t b = tier_bytes(&p->fine) + tier_bytes(&p->coarse);
			if (p->uix == v && !p->exited_ms && b > big_bytes) {
				big = p;
				big_bytes = b;
			}
		}
		size_t before = h->bytes;
		if (big)
			cut_half(h, big);
		if (h->bytes == before)
			return false;
		h->st.cut++;
	}
	return true;
}

/* ---- tiers -------------------------------------------------------------------------------- */

static struct hist_sample *tier_slot(struct hist_tier *t, uint32_t i)
{
	uint32_t k = t->head + i;
	return &t->s[k >= t->alloc ? k - t->alloc : k];
}

/* Room for one more slot: grow while below cap (within the total bound), else overwrite the
 * oldest. False only when a tier with no slot at all cannot get one. */
static bool tier_reserve(struct history *h, struct hist_proc *p, struct hist_tier *t)
{
	if (t->len < t->alloc)
		return true;
	if (t->alloc < t->cap && !(p->truncated && t->alloc)) {
		uint32_t n = t->alloc ? t->alloc * 2 : FINE_INIT_SLOTS;
		if (n > t->cap)
			n = t->cap;
		size_t more = (size_t)(n - t->alloc) * sizeof(struct hist_sample);
		struct hist_sample *s = NULL;
		if (make_room(h, more, p, p->uix, t->alloc > 0))
			s = malloc((size_t)n * sizeof(*s));
		if (s) {
			/* linearize: oldest first */
			for (uint32_t i = 0; i < t->len; i++)
				s[i] = *tier_slot(t, i);
			free(t->s);
			t->s = s;
			t->alloc = n;
			t->head = 0;
			charge(h, p, more);
			return true;
		}
		if (!p->truncated) {
			p->truncated = true;
			h->st.truncated++;
		}
	}
	return t->alloc > 0;
}

static void tier_push(struct history *h, struct hist_proc *p, struct hist_tier *t,
                      const struct hist_sample *v, uint64_t tick)
{
	if (!tier_reserve(h, p, t))
		return;
	if (t->len < t->alloc) {
		*tier_slot(t, t->len) = *v;
		t->len++;
	} else {
		t->s[t->head] = *v;
		t->head = t->head + 1 == t->alloc ? 0 : t->head + 1;
	}
	t->last_tick = tick;
}

/* Ticks between the tier's newest slot and tick: store gaps (at most a ring's worth). */
static void tier_fill_gaps(struct history *h, struct hist_proc *p, struct hist_tier *t,
                           uint64_t tick, bool count)
{
	if (!t->len || tick <= t->last_tick + 1)
		return;
	uint64_t missing = tick - t->last_tick - 1;
	if (missing >= t->cap) {
		/* nothing of the old window would remain: restart the tier */
		t->len = t->head = 0;
		return;
	}
	struct hist_sample gap;
	memset(&gap, 0, sizeof(gap));
	gap.v[0] = HIST_GAP;
	for (uint64_t k = t->last_tick + 1; k < tick; k++)
		tier_push(h, p, t, &gap, k);
	if (count)
		h->st.gaps += missing;
}

static void tier_shrink(struct history *h, struct hist_proc *p, struct hist_tier *t)
{
	if (t->alloc == t->len)
		return;
	struct hist_sample *s = t->len ? malloc((size_t)t->len * sizeof(*s)) : NULL;
	if (t->len && !s)
		return; /* keep the larger array */
	for (uint32_t i = 0; i < t->len; i++)
		s[i] = *tier_slot(t, i);
	refund(h, p, (size_t)(t->alloc - t->len) * sizeof(struct hist_sample));
	free(t->s);
	t->s = s;
	t->alloc = t->len;
	t->head = 0;
}

/* ---- processes ---------------------------------------------------------------------------- */

int history_init(struct history *h, uint32_t sample_ms, size_t max_bytes, uint32_t ev_cap)
{
	memset(h, 0, sizeof(*h));
	h->sample_ms = sample_ms ? sample_ms : 1000;
	h->max_bytes = max_bytes;
	h->ev_cap = ev_cap ? ev_cap : 1;
	h->ev = calloc(h->ev_cap, sizeof(*h->ev));
	return h->ev ? 0 : -1;
}

void history_free(struct history *h)
{
	while (h->head)
		drop_proc(h, h->head);
	free(h->ev);
	h->ev = NULL;
	h->ev_len = h->ev_cap = 0;
	free(h->uids);
	h->uids = NULL;
	h->nuids = h->cap_uids = h->nactive = 0;
}

int history_reconfigure(struct history *h, uint32_t sample_ms, size_t max_bytes, uint32_t ev_cap)
{
	if (ev_cap && ev_cap != h->ev_cap) {
		struct hist_event *ev = calloc(ev_cap, sizeof(*ev));
		if (!ev)
			return -1;
		/* keep the newest events that fit */
		uint32_t keep = h->ev_len < ev_cap ? h->ev_len : ev_cap;
		for (uint32_t i = 0; i < keep; i++)
			ev[i] = h->ev[(h->ev_head + h->ev_len - keep + i) % h->ev_cap];
		free(h->ev);
		h->ev = ev;
		h->ev_cap = ev_cap;
		h->ev_len = keep;
		h->ev_head = 0;
	}
	if (sample_ms && sample_ms != h->sample_ms) {
		h->sample_ms = sample_ms;
		for (struct hist_proc *p = h->head; p; p = p->next) {
			p->fine.len = p->fine.head = 0;
			p->coarse.len = p->coarse.head = 0;
			p->acc_n = 0;
		}
	}
	h->max_bytes = max_bytes;
	/* over the new bound: exited histories go first, then live rings are cut */
	for (struct hist_proc *old;
	     h->bytes > h->max_bytes && (old = oldest_exited(h, -1, NULL));) {
		drop_proc(h, old);
		h->st.evicted++;
	}
	for (struct hist_proc *p = h->tail; p && h->bytes > h->max_bytes; p = p->prev)
		cut_half(h, p);
	return 0;
}

struct hist_proc *history_find(struct history *h, int32_t pid)
{
	struct hist_proc *best = NULL;
	for (struct hist_proc *p = h->tail; p; p = p->prev) {
		if (p->pid != pid)
			continue;
		if (!p->exited_ms)
			return p;
		if (!best || p->exited_ms > best->exited_ms)
			best = p;
	}
	return best;
}

struct hist_proc *history_open(struct history *h, int32_t pid, uint64_t start_time, uint32_t uid,
                               const char *exe, int64_t started_ms)
{
	for (struct hist_proc *p = h->tail; p; p = p->prev)
		if (p->pid == pid && p->start_time == start_time && !p->exited_ms)
			return p;
	struct hist_proc *p = NULL;
	int64_t u = uid_index(h, uid, true);
	if (u >= 0 && make_room(h, sizeof(*p), NULL, (uint32_t)u, false))
		p = calloc(1, sizeof(*p));
	if (!p) {
		h->st.refused++;
		return NULL;
	}
	p->pid = pid;
	p->start_time = start_time;
	p->uid = uid;
	p->uix = (uint32_t)u;
	p->started_ms = started_ms;
	snprintf(p->exe, sizeof(p->exe), "%s", exe ? exe : "");
	p->fine.cap = HIST_FINE_SLOTS;
	p->coarse.cap = HIST_COARSE_SLOTS;
	p->prev = h->tail;
	if (h->tail)
		h->tail->next = p;
	else
		h->head = p;
	h->tail = p;
	h->nprocs++;
	h->nlive++;
	live_changed(h, p->uix, +1);
	charge(h, p, sizeof(*p));
	return p;
}

static uint32_t to_kib(uint64_t bytes)
{
	uint64_t k = (bytes + 1023) / 1024;
	return k > HIST_KIB_MAX ? HIST_KIB_MAX : (uint32_t)k;
}

/* Close the coarse period in progress (if any) into the coarse tier. */
static void coarse_flush(struct history *h, struct hist_proc *p)
{
	if (!p->acc_n)
		return;
	struct hist_sample m;
	for (int f = 0; f < HIST_NSTORED; f++) {
		uint64_t v = (p->acc[f] + p->acc_n / 2) / p->acc_n;
		m.v[f] = v > HIST_KIB_MAX ? HIST_KIB_MAX : (uint32_t)v;
	}
	tier_fill_gaps(h, p, &p->coarse, p->acc_tick, false);
	tier_push(h, p, &p->coarse, &m, p->acc_tick);
	memset(p->acc, 0, sizeof(p->acc));
	p->acc_n = 0;
}

void history_sample(struct history *h, struct hist_proc *p, const uint64_t bytes[HIST_NFIG],
                    int64_t now_ms)
{
	if (p->exited_ms)
		return;
	uint64_t tick = tick_of(h, now_ms);
	if (p->fine.len && tick <= p->fine.last_tick)
		return; /* this tick has its sample (or the clock went back) */
	struct hist_sample s;
	for (int f = 0; f < HIST_NSTORED; f++)
		s.v[f] = to_kib(bytes[f]);
	tier_fill_gaps(h, p, &p->fine, tick, true);
	tier_push(h, p, &p->fine, &s, tick);
	h->st.samples++;
	uint64_t ctick = tick / HIST_COARSE_TICKS;
	if (p->acc_n && ctick != p->acc_tick)
		coarse_flush(h, p);
	p->acc_tick = ctick;
	for (int f = 0; f < HIST_NSTORED; f++)
		p->acc[f] += s.v[f];
	p->acc_n++;
}

void history_close(struct history *h, struct hist_proc *p, int64_t now_ms, const char *why)
{
	if (p->exited_ms)
		return;
	coarse_flush(h, p);
	p->exited_ms = now_ms > 0 ? now_ms : 1;
	snprintf(p->exit_reason, sizeof(p->exit_reason), "%s", why ? why : "");
	h->nlive--;
	live_changed(h, p->uix, -1);
	tier_shrink(h, p, &p->fine);
	tier_shrink(h, p, &p->coarse);
}

void history_expire(struct history *h, int64_t now_ms)
{
	int64_t keep_ms = history_period_ms(h, true) * HIST_COARSE_SLOTS;
	struct hist_proc *p = h->head, *next;
	for (; p; p = next) {
		next = p->next;
		if (p->exited_ms && now_ms - p->exited_ms > keep_ms) {
			drop_proc(h, p);
			h->st.expired++;
		}
	}
}

int64_t history_first_ms(const struct history *h, const struct hist_proc *p, bool coarse)
{
	const struct hist_tier *t = coarse ? &p->coarse : &p->fine;
	if (!t->len)
		return 0;
	return (int64_t)(t->last_tick - (t->len - 1)) * history_period_ms(h, coarse);
}

void history_walk(const struct history *h, const struct hist_proc *p, bool coarse, int64_t since_ms,
                  hist_sample_cb cb, void *arg)
{
	struct hist_tier *t = (struct hist_tier *)(coarse ? &p->coarse : &p->fine);
	if (!t->len)
		return;
	int64_t period = history_period_ms(h, coarse);
	uint64_t first = t->last_tick - (t->len - 1);
	uint32_t i = 0;
	if (since_ms > (int64_t)first * period) {
		uint64_t want = (uint64_t)((since_ms + period - 1) / period);
		if (want > t->last_tick)
			return;
		i = (uint32_t)(want - first);
	}
	uint32_t v[HIST_NFIG];
	for (; i < t->len; i++) {
		const struct hist_sample *s = tier_slot(t, i);
		if (s->v[0] == HIST_GAP) {
			cb(arg, (int64_t)(first + i) * period, NULL);
			continue;
		}
		memcpy(v, s->v, sizeof(s->v));
		uint64_t resident = (uint64_t)v[HIST_F_in_use] + v[HIST_F_cached] +
		                    v[HIST_F_fragmented] + v[HIST_F_free_resident] +
		                    v[HIST_F_metadata];
		v[HIST_F_non_alloc] =
		        v[HIST_F_rss] > resident ? (uint32_t)(v[HIST_F_rss] - resident) : 0;
		cb(arg, (int64_t)(first + i) * period, v);
	}
}

/* ---- events ------------------------------------------------------------------------------- */

const struct hist_event *history_event(struct history *h, const struct hist_event *e,
                                       int64_t now_ms)
{
	struct hist_event *slot;
	if (h->ev_len < h->ev_cap) {
		slot = &h->ev[(h->ev_head + h->ev_len) % h->ev_cap];
		h->ev_len++;
	} else {
		slot = &h->ev[h->ev_head];
		h->ev_head = (h->ev_head + 1) % h->ev_cap;
		h->st.events_dropped++;
	}
	*slot = *e;
	slot->seq = ++h->ev_seq;
	if (!slot->t_ms)
		slot->t_ms = now_ms;
	h->st.events++;
	return slot;
}

void history_events(const struct history *h, uint64_t after_seq, int64_t since_ms, hist_event_cb cb,
                    void *arg)
{
	for (uint32_t i = 0; i < h->ev_len; i++) {
		const struct hist_event *e = &h->ev[(h->ev_head + i) % h->ev_cap];
		if (e->seq <= after_seq || e->t_ms < since_ms)
			continue;
		if (!cb(arg, e))
			return;
	}
}
