/* loop.c — the event base's configuration and the loop-lag probe.
 *
 * Long work (discovery's examinations and liveness sweep, the history sampler, scrapes,
 * streamed lists) runs in slices on events of priority CTLD_PRIO_SLICE, each re-activating
 * itself while work is left (slice_again). libevent runs an event activated from within a
 * callback in the same loop turn, so without a limit every slice of a job ran before the
 * next poll; the base is configured to run one callback of that priority per turn, so the
 * sockets are polled between any two slices, and the slices of different jobs take turns.
 *
 * The probe checks it from inside: while such work is pending, a timer of the highest
 * priority 1 ms ahead is armed (unless one is); how late it fires is how long the loop
 * went without polling, and the loop's CPU time from arming to firing the same without
 * the time the daemon was not scheduled. The longest of each is exported in /metrics. */
#include <event2/event.h>

#include "ctld.h"

#define LAG_PROBE_NS 1000000ull /* the probe's timer: 1 ms ahead */

struct event_base *loop_base_new(void)
{
	struct event_config *ecfg = event_config_new();
	if (!ecfg)
		return NULL;
	/* precise timers (timerfd): the command poller runs at sub-millisecond periods */
	event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	/* one callback of the slice priority per loop turn (no time limit: a slice bounds
	 * its own) */
	event_config_set_max_dispatch_interval(ecfg, NULL, 1, CTLD_PRIO_SLICE);
	struct event_base *base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	if (base && event_base_priority_init(base, CTLD_NPRIO) != 0) {
		event_base_free(base);
		return NULL;
	}
	return base;
}

static void on_lag_probe(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC), cpu = seg_now_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t late = now > d->lag_due_ns ? now - d->lag_due_ns : 0, busy = cpu - d->lag_cpu_ns;
	if (late > d->st.loop_lag_max_ns)
		d->st.loop_lag_max_ns = late;
	if (busy > d->st.loop_busy_max_ns)
		d->st.loop_busy_max_ns = busy;
	d->st.loop_lag_probes++;
}

int loop_probe_init(struct ctld *d)
{
	d->lag_probe = evtimer_new(d->base, on_lag_probe, d);
	if (!d->lag_probe || event_priority_set(d->lag_probe, 0) != 0)
		return -1;
	return 0;
}

void loop_probe_reset(struct ctld *d)
{
	if (d->lag_probe)
		event_del(d->lag_probe);
	d->st.loop_lag_max_ns = d->st.loop_busy_max_ns = 0;
}

void loop_probe_free(struct ctld *d)
{
	if (d->lag_probe)
		event_free(d->lag_probe);
	d->lag_probe = NULL;
}

void loop_lag_probe(struct ctld *d)
{
	if (!d->lag_probe || evtimer_pending(d->lag_probe, NULL))
		return;
	struct timeval tv = {0, LAG_PROBE_NS / 1000};
	d->lag_due_ns = seg_now_ns(CLOCK_MONOTONIC) + LAG_PROBE_NS;
	d->lag_cpu_ns = seg_now_ns(CLOCK_THREAD_CPUTIME_ID);
	evtimer_add(d->lag_probe, &tv);
}

void slice_again(struct ctld *d, struct event *ev)
{
	event_active(ev, EV_TIMEOUT, 0);
	loop_lag_probe(d);
}
