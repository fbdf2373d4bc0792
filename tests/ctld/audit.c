/* audit.c — unit tests of ctld/audit.c: every event gets the next sequence number and a
 * time, the ring keeps the newest events and readers walk it by seq (skipping what was
 * overwritten), a resize keeps the newest, visibility by uid, the logfmt line quotes what
 * it must, listeners see each event once, and the counters behind /metrics. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "audit.h"
#include "log.h"

static struct audit_event make(enum audit_trigger t, enum audit_action a, enum audit_result r,
                               int pid, int64_t owner)
{
	struct audit_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.trigger = t;
	ev.action = a;
	ev.result = r;
	ev.pid = pid;
	ev.target_uid = owner;
	ev.peer_uid = -1;
	snprintf(ev.exe, sizeof(ev.exe), "svc");
	return ev;
}

static void quiet(void)
{
	log_level = -1; /* the log lines are not what these tests look at */
}

TestSuite(audit, .init = quiet);

Test(audit, events_get_increasing_seq_and_a_time)
{
	struct audit a;
	cr_assert_eq(audit_init(&a, 8, 0), 0);
	for (int i = 1; i <= 5; i++) {
		struct audit_event ev =
		        make(AUDIT_T_operator, AUDIT_A_trim, AUDIT_R_ok, 100 + i, 0);
		cr_assert_eq(audit_record(&a, &ev), (uint64_t)i);
		cr_assert_eq(ev.seq, (uint64_t)i);
		cr_assert_gt(ev.time_ns, 0);
	}
	cr_assert_eq(audit_first_seq(&a), 1);
	const struct audit_event *e = audit_next(&a, 0);
	for (int i = 1; i <= 5; i++, e = audit_next(&a, e->seq)) {
		cr_assert_not_null(e);
		cr_assert_eq(e->seq, (uint64_t)i);
		cr_assert_eq(e->pid, 100 + i);
	}
	cr_assert_null(e, "nothing after the last event");
	audit_free(&a);
}

Test(audit, the_ring_keeps_the_newest_and_readers_skip_what_was_overwritten)
{
	struct audit a;
	cr_assert_eq(audit_init(&a, 4, 0), 0);
	for (int i = 1; i <= 10; i++) {
		struct audit_event ev = make(AUDIT_T_pressure, AUDIT_A_trim, AUDIT_R_ok, i, 0);
		audit_record(&a, &ev);
	}
	cr_assert_eq(audit_first_seq(&a), 7);
	/* a reader that last saw seq 2 continues at the oldest still held */
	const struct audit_event *e = audit_next(&a, 2);
	cr_assert_not_null(e);
	cr_assert_eq(e->seq, 7);
	cr_assert_eq(e->pid, 7);
	cr_assert_eq(audit_next(&a, 9)->seq, 10);
	cr_assert_null(audit_next(&a, 10));
	cr_assert_null(audit_next(&a, 1000));
	audit_free(&a);
}

Test(audit, resizing_keeps_the_newest_events_in_order)
{
	struct audit a;
	cr_assert_eq(audit_init(&a, 8, 0), 0);
	for (int i = 1; i <= 6; i++) {
		struct audit_event ev = make(AUDIT_T_time, AUDIT_A_release, AUDIT_R_ok, i, 0);
		audit_record(&a, &ev);
	}
	cr_assert_eq(audit_configure(&a, 3, 0), 0);
	cr_assert_eq(audit_first_seq(&a), 4);
	uint64_t want = 4;
	for (const struct audit_event *e = audit_next(&a, 0); e; e = audit_next(&a, e->seq))
		cr_assert_eq(e->pid, (int)want++);
	cr_assert_eq(want, 7);
	cr_assert_eq(audit_configure(&a, 16, 0), 0); /* growing keeps all three */
	cr_assert_eq(audit_first_seq(&a), 4);
	struct audit_event ev = make(AUDIT_T_time, AUDIT_A_release, AUDIT_R_ok, 7, 0);
	cr_assert_eq(audit_record(&a, &ev), 7);
	cr_assert_eq(audit_next(&a, 6)->pid, 7);
	audit_free(&a);
}

Test(audit, a_user_sees_events_about_their_processes_and_those_they_caused)
{
	struct audit_event mine = make(AUDIT_T_pressure, AUDIT_A_trim, AUDIT_R_ok, 10, 1000);
	struct audit_event theirs = make(AUDIT_T_pressure, AUDIT_A_trim, AUDIT_R_ok, 11, 1001);
	struct audit_event tried = make(AUDIT_T_operator, AUDIT_A_set, AUDIT_R_denied, 12, 0);
	audit_set_operator(&tried, 1000, 4242);
	cr_assert(audit_visible(&mine, 1000));
	cr_assert_not(audit_visible(&theirs, 1000));
	cr_assert(audit_visible(&tried, 1000), "a refusal is shown to whom it was refused");
	cr_assert_not(audit_visible(&tried, 1001));
	cr_assert(audit_visible(&theirs, 0), "root sees everything");
	cr_assert_str_eq(tried.actor, "uid 1000 pid 4242");
	cr_assert_eq(tried.trigger, AUDIT_T_operator);
}

Test(audit, the_log_line_is_logfmt_with_quoted_values)
{
	struct audit_event ev = make(AUDIT_T_operator, AUDIT_A_set, AUDIT_R_failed, 4242, 1000);
	audit_set_operator(&ev, 1000, 77);
	snprintf(ev.name, sizeof(ev.name), "decay_ms");
	ev.has_values = true;
	ev.old_value = 10000;
	ev.new_value = 1000;
	ev.hold_ms = 900000;
	snprintf(ev.message, sizeof(ev.message), "value \"x\" out of range");
	ev.seq = 3;
	char line[512];
	audit_format(&ev, line, sizeof(line));
	cr_assert_str_eq(line, "seq=3 trigger=operator actor=\"uid 1000 pid 77\" peer_uid=1000 "
	                       "peer_pid=77 action=set pid=4242 uid=1000 exe=svc "
	                       "tunable=decay_ms old=10000 new=1000 hold_ms=900000 "
	                       "result=failed message=\"value \\\"x\\\" out of range\"");
	/* a short buffer is cut, still terminated */
	char small[24];
	size_t n = audit_format(&ev, small, sizeof(small));
	cr_assert_lt(n, sizeof(small));
	cr_assert_eq(strlen(small), n);
}

struct seen {
	int calls;
	uint64_t last;
};
static void listener(const struct audit_event *ev, void *arg)
{
	struct seen *s = arg;
	s->calls++;
	s->last = ev->seq;
}

Test(audit, listeners_see_each_event_once)
{
	struct audit a;
	struct seen s1 = {0}, s2 = {0};
	cr_assert_eq(audit_init(&a, 4, 0), 0);
	cr_assert_eq(audit_listen(&a, listener, &s1), 0);
	cr_assert_eq(audit_listen(&a, listener, &s2), 0);
	struct audit_event ev = make(AUDIT_T_profile, AUDIT_A_set, AUDIT_R_ok, 5, 0);
	audit_record(&a, &ev);
	audit_unlisten(&a, listener, &s2);
	audit_record(&a, &ev);
	cr_assert_eq(s1.calls, 2);
	cr_assert_eq(s1.last, 2);
	cr_assert_eq(s2.calls, 1);
	for (int i = 0; i < AUDIT_MAX_LISTENERS - 1; i++)
		cr_assert_eq(audit_listen(&a, listener, &s2), 0);
	cr_assert_eq(audit_listen(&a, listener, &s2), -1, "the listener table is bounded");
	audit_free(&a);
}

Test(audit, counters_by_trigger_action_and_result)
{
	struct audit a;
	cr_assert_eq(audit_init(&a, 4, 0), 0);
	struct audit_event ev = make(AUDIT_T_pressure, AUDIT_A_trim, AUDIT_R_ok, 5, 0);
	ev.bytes_released = 1 << 20;
	audit_record(&a, &ev);
	audit_record(&a, &ev);
	ev = make(AUDIT_T_pressure, AUDIT_A_trim, AUDIT_R_dry_run, 5, 0);
	audit_record(&a, &ev);
	struct evbuffer *b = evbuffer_new();
	audit_write_metrics(&a, b);
	size_t len = evbuffer_get_length(b);
	char *text = calloc(1, len + 1);
	evbuffer_remove(b, text, len);
	cr_assert(strstr(text, "liballoc_ctld_actions_total{trigger=\"pressure\",action=\"trim\","
	                       "result=\"ok\"} 2\n"),
	          "%s", text);
	cr_assert(strstr(text, "result=\"dry_run\"} 1\n"), "%s", text);
	cr_assert(strstr(text, "liballoc_ctld_released_bytes_total{trigger=\"pressure\"} "
	                       "2097152\n"),
	          "%s", text);
	cr_assert(strstr(text, "liballoc_ctld_released_bytes_total{trigger=\"operator\"} 0\n"));
	cr_assert_null(strstr(text, "trigger=\"operator\",action="), "no zero action series");
	free(text);
	evbuffer_free(b);
	audit_free(&a);
}
