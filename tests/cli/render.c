/* tests/cli/render.c — what allocctl prints for daemon replies: the ps table and its JSON,
 * the one-line reports of mutating commands, set's before/after, error explanations, and
 * top's ordering. Replies are built in memory; output goes to a memory stream. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "top.h"

/* A process whose RSS is its in-use and reclaimable (free resident) bytes plus 1 MiB of
 * its own. */
static Ctl__ProcessInfo proc(int32_t pid, const char *exe, uint64_t in_use, uint64_t reclaimable)
{
	Ctl__ProcessInfo p = CTL__PROCESS_INFO__INIT;
	Ctl__Memory *m = calloc(1, sizeof(*m));
	ctl__memory__init(m);
	p.pid = pid;
	p.exe = (char *)exe;
	p.uid = 1000;
	p.start_time_ns = 1000ULL * 1000000000ULL;
	p.arenas = 4;
	p.threads = 5;
	p.has_allocator_threads = 1;
	p.allocator_threads = 3;
	m->has_in_use_bytes = m->has_free_resident_bytes = m->has_reclaimable_bytes = 1;
	m->has_resident_bytes = m->has_rss_bytes = m->has_non_allocator_rss_bytes = 1;
	m->in_use_bytes = in_use;
	m->free_resident_bytes = m->reclaimable_bytes = reclaimable;
	m->resident_bytes = in_use + reclaimable;
	m->rss_bytes = in_use + reclaimable + (1 << 20);
	m->non_allocator_rss_bytes = 1 << 20;
	p.memory = m;
	p.has_rss_bytes = 1;
	p.rss_bytes = m->rss_bytes;
	p.control = "running";
	p.version = "0.1.0";
	return p;
}

static struct render_opts opts(bool json, bool raw)
{
	return (struct render_opts){.json = json, .raw = raw, .now_ns = 1062ULL * 1000000000ULL};
}

/* Runs body with a FILE and returns what it wrote (caller frees). */
#define CAPTURE(var, body)                             \
	do {                                           \
		size_t len_;                           \
		FILE *f = open_memstream(&var, &len_); \
		body;                                  \
		fclose(f);                             \
	} while (0)

Test(ps, table_is_sorted_by_pid_with_human_units_and_exe_basenames)
{
	Ctl__ProcessInfo a = proc(4343, "/usr/sbin/nginx", 20ULL << 20, 5ULL << 20);
	Ctl__ProcessInfo b = proc(4242, "/usr/bin/redis-server", 300ULL << 20, 812ULL << 20);
	Ctl__ProcessInfo *list[] = {&a, &b};
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_ps(f, list, 2, &o));
	char *first = strchr(out, '\n') + 1;
	cr_assert(strstr(out, "PID") < first, "header first:\n%s", out);
	cr_assert(strncmp(first, "    4242    1000  redis-server", 30) == 0, "4242 first:\n%s",
	          out);
	cr_assert(strstr(first, "300.0 MiB") && strstr(first, "812.0 MiB") &&
	                  strstr(first, "1.1 GiB") && strstr(first, "1.0 MiB") &&
	                  strstr(first, "1m02s"),
	          "%s", out);
	cr_assert(strstr(out, "/usr/bin") == NULL, "basenames only:\n%s", out);
	cr_assert(strstr(out, "also maps") == NULL, "no notes:\n%s", out);
	free(out);
}

Test(ps, notes_name_other_allocators_and_a_control_thread_off)
{
	Ctl__ProcessInfo a = proc(4242, "/usr/bin/redis-server", 1 << 20, 0);
	char *foreign[] = {"jemalloc"};
	a.foreign_allocators = foreign;
	a.n_foreign_allocators = 1;
	a.control = "off";
	Ctl__ProcessInfo *list[] = {&a};
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_ps(f, list, 1, &o));
	cr_assert(strstr(out, "  also maps jemalloc; control off\n"), "%s", out);
	free(out);
}

Test(ps, profile_trend_and_notes_line_up_without_trailing_blanks)
{
	Ctl__ProcessInfo a = proc(4242, "/usr/bin/redis-server", 1 << 20, 0);
	Ctl__ProcessInfo b = proc(4343, "/usr/sbin/nginx", 1 << 20, 0);
	char *foreign[] = {"jemalloc"};
	b.foreign_allocators = foreign;
	b.n_foreign_allocators = 1;
	b.profile = "web";
	Ctl__ProcessInfo *list[] = {&a, &b};
	const char *trend[] = {"\u2581\u2582\u2583 +1.0 MiB", "-"};
	struct render_opts o = opts(false, false);
	o.show_profile = true;
	o.extra_title = "RSS, LAST MINUTE";
	o.extra = trend;
	char *out;
	CAPTURE(out, render_process_table(f, list, 2, 0, &o));
	char *l1 = strchr(out, '\n') + 1, *l2 = strchr(l1, '\n') + 1;
	cr_assert(strstr(out, " UPTIME  PROFILE       RSS, LAST MINUTE  NOTES\n"), "%s", out);
	cr_assert(strstr(l1, "  -             \u2581\u2582\u2583 +1.0 MiB\n"), "%s", out);
	/* the note starts in the NOTES column (counted in characters) */
	size_t col = (size_t)(strstr(out, "NOTES") - out);
	cr_assert_eq((size_t)(strstr(l2, "also maps jemalloc") - l2), col, "%s", out);
	cr_assert(strstr(l2, "  web           -                 also maps jemalloc\n"), "%s", out);
	for (char *p = out; (p = strchr(p, '\n')); p++)
		cr_assert(p == out || p[-1] != ' ', "a trailing blank:\n%s", out);
	free(out);
}

Test(ps, bytes_option_prints_plain_numbers)
{
	Ctl__ProcessInfo a = proc(7, "/bin/x", 300ULL << 20, 0);
	Ctl__ProcessInfo *list[] = {&a};
	struct render_opts o = opts(false, true);
	char *out;
	CAPTURE(out, render_ps(f, list, 1, &o));
	cr_assert(strstr(out, " 314572800 ") != NULL, "%s", out);
	cr_assert(strstr(out, "MiB") == NULL, "%s", out);
	free(out);
}

Test(ps, json_has_the_documented_keys)
{
	Ctl__ProcessInfo a = proc(4242, "/usr/bin/redis-server", 300ULL << 20, 812ULL << 20);
	Ctl__ProcessInfo *list[] = {&a};
	struct render_opts o = opts(true, false);
	char *out;
	CAPTURE(out, render_ps(f, list, 1, &o));
	cr_assert_str_eq(out, "{\"schema_version\":1,\"processes\":[{\"pid\":4242,\"ns_pid\":4242,"
	                      "\"pid_namespace\":0,\"cgroup\":null,"
	                      "\"exe\":\"/usr/bin/redis-server\","
	                      "\"name\":\"redis-server\",\"cmdline\":\"\","
	                      "\"uid\":1000,\"owner_uid\":1000,\"start_time_ns\":1000000000000,"
	                      "\"uptime_s\":62,\"arenas\":4,\"threads\":5,\"allocator_threads\":3,"
	                      "\"rss_bytes\":1167065088,\"memory\":{\"in_use_bytes\":314572800,"
	                      "\"free_resident_bytes\":851443712,\"reclaimable_bytes\":851443712,"
	                      "\"resident_bytes\":1166016512,\"rss_bytes\":1167065088,"
	                      "\"non_allocator_rss_bytes\":1048576},\"foreign_allocators\":[],"
	                      "\"version\":\"0.1.0\",\"control\":\"running\",\"unreadable\":false,"
	                      "\"unreadable_reads\":0,\"profile\":null}]}\n");
	free(out);
	a.profile = "redis";
	CAPTURE(out, render_ps(f, list, 1, &o));
	cr_assert(strstr(out, "\"unreadable_reads\":0,\"profile\":\"redis\"}"), "%s", out);
	free(out);
	o.json = false;
	CAPTURE(out, render_ps(f, list, 1, &o));
	cr_assert(strstr(out, " UPTIME  PROFILE       NOTES\n"), "%s", out);
	cr_assert(strstr(out, "  redis\n"), "%s", out);
	free(out);
}

Test(ps, run_name_and_a_segment_owner_that_differs)
{
	Ctl__ProcessInfo a = proc(4242, "/usr/bin/redis-check-rdb", 1ULL << 20, 0);
	a.name = "redis-server";
	a.cmdline = "redis-server *:6379";
	a.uid = 65534;
	a.has_owner_uid = true;
	a.owner_uid = 0;
	Ctl__ProcessInfo *list[] = {&a};
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_ps(f, list, 1, &o));
	char *first = strchr(out, '\n') + 1;
	cr_assert(strncmp(first, "    4242 65534/0  redis-server ", 31) == 0, "%s", out);
	free(out);
	Ctl__StatsReply s = CTL__STATS_REPLY__INIT;
	s.process = &a;
	CAPTURE(out, render_stats(f, &s, &o));
	cr_assert(strstr(out, "process 4242 redis-server (/usr/bin/redis-check-rdb)\n"
	                      "  command line: redis-server *:6379\n"
	                      "  uid 65534 (segment owned by uid 0), ") == out,
	          "%s", out);
	free(out);
}

Test(ps, empty_list_says_so)
{
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_ps(f, NULL, 0, &o));
	cr_assert(strstr(out, "no processes") == out, "%s", out);
	free(out);
	o.json = true;
	CAPTURE(out, render_ps(f, NULL, 0, &o));
	cr_assert_str_eq(out, "{\"schema_version\":1,\"processes\":[]}\n");
	free(out);
}

static Ctl__CommandResult action(int32_t pid, uint64_t released, uint64_t madv, uint64_t munm,
                                 uint64_t ns)
{
	Ctl__CommandResult r = CTL__COMMAND_RESULT__INIT;
	r.pid = pid;
	r.exe = "/usr/bin/redis-server";
	r.code = CTL__ERROR_CODE__OK;
	r.has_bytes_released = r.has_madvise_calls = r.has_munmap_calls = r.has_duration_ns = 1;
	r.bytes_released = released;
	r.madvise_calls = madv;
	r.munmap_calls = munm;
	r.duration_ns = ns;
	return r;
}

Test(action, trim_line_says_what_it_measurably_did)
{
	Ctl__CommandResult r = action(4242, 812ULL << 20, 1, 3, 3100000);
	Ctl__CommandResult *res[] = {&r};
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_action(f, "trim", res, 1, &o));
	cr_assert_str_eq(out, "trim 4242: released 812.0 MiB in 3.1 ms (1 madvise, 3 munmap)\n");
	free(out);
}

Test(action, nothing_released_says_no_system_calls_and_multi_targets_name_the_exe)
{
	Ctl__CommandResult r = action(4242, 0, 0, 0, 400000);
	Ctl__CommandResult *res[] = {&r};
	struct render_opts o = opts(false, false);
	o.show_exe = true;
	char *out;
	CAPTURE(out, render_action(f, "flush", res, 1, &o));
	cr_assert_str_eq(out, "flush 4242 (redis-server): released 0 B in 400.0 us "
	                      "(no system calls)\n");
	free(out);
}

Test(action, failed_results_print_nothing_on_stdout)
{
	Ctl__CommandResult ok = action(1, 4096, 1, 0, 1000);
	Ctl__CommandResult bad = action(2, 0, 0, 0, 0);
	bad.code = CTL__ERROR_CODE__ERR_PERMISSION;
	Ctl__CommandResult *res[] = {&bad, &ok};
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_action(f, "release", res, 2, &o));
	cr_assert_str_eq(out, "release 1: released 4.0 KiB in 1.0 us (1 madvise)\n");
	free(out);
}

Test(action, json_shape_is_shared_by_every_command)
{
	Ctl__CommandResult r = action(4242, 851443712ULL, 1, 3, 3100000);
	Ctl__CommandResult *res[] = {&r};
	char *out;
	CAPTURE(out, render_results_json(f, "trim", res, 1));
	cr_assert_str_eq(out,
	                 "{\"schema_version\":1,\"command\":\"trim\",\"results\":[{\"pid\":4242,"
	                 "\"exe\":\"/usr/bin/redis-server\",\"ok\":true,\"code\":\"OK\","
	                 "\"message\":\"\",\"bytes_released\":851443712,"
	                 "\"duration_ns\":3100000,\"syscalls\":{\"mmap\":0,\"munmap\":3,"
	                 "\"madvise\":1,\"mprotect\":0},\"tunables\":{}}]}\n");
	free(out);
}

static Ctl__Tunable tun(const char *name, int64_t v)
{
	Ctl__Tunable t = CTL__TUNABLE__INIT;
	t.name = (char *)name;
	t.value = v;
	return t;
}

Test(set, shows_new_and_previous_values_in_units)
{
	Ctl__Tunable now1 = tun("mmap_threshold", 1 << 20), now2 = tun("mmap_dynamic", 0);
	Ctl__Tunable old1 = tun("mmap_threshold", 128 << 10), old2 = tun("mmap_dynamic", 1);
	Ctl__Tunable *nowv[] = {&now1, &now2}, *oldv[] = {&old1, &old2};
	Ctl__CommandResult r = CTL__COMMAND_RESULT__INIT, before = CTL__COMMAND_RESULT__INIT;
	r.pid = before.pid = 4242;
	r.tunables = nowv;
	r.n_tunables = 2;
	r.has_duration_ns = 1;
	r.duration_ns = 200000;
	before.tunables = oldv;
	before.n_tunables = 2;
	Ctl__CommandResult *res[] = {&r};
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_set(f, res, 1, &before, &o));
	cr_assert_str_eq(out, "set 4242: mmap_threshold = 1.0 MiB (was 128.0 KiB), mmap_dynamic = "
	                      "off (was on) in 200.0 us\n");
	free(out);
}

Test(get, table_fills_range_and_type_from_the_local_table)
{
	Ctl__Tunable t = tun("decay_ms", 2000);
	t.source = "environment";
	Ctl__Tunable *tv[] = {&t};
	Ctl__CommandResult r = CTL__COMMAND_RESULT__INIT;
	r.pid = 9;
	r.tunables = tv;
	r.n_tunables = 1;
	Ctl__CommandResult *res[] = {&r};
	struct render_opts o = opts(false, false);
	char *out;
	CAPTURE(out, render_get(f, res, 1, &o));
	char *row = strchr(out, '\n') + 1;
	cr_assert(strncmp(row, "decay_ms", 8) == 0, "%s", out);
	cr_assert(strstr(row, "2 s") && strstr(row, " environment ") &&
	                  strstr(row, "0 ms .. 3600 s"),
	          "%s", out);
	free(out);
	o.json = true;
	CAPTURE(out, render_get(f, res, 1, &o));
	cr_assert(strstr(out,
	                 "\"tunables\":{\"decay_ms\":{\"value\":2000,\"source\":\"environment\","
	                 "\"type\":\"ms\",\"min\":0,\"max\":3600000,\"live\":true}}") != NULL,
	          "%s", out);
	free(out);
	/* a protocol-1 daemon only said whether it was set */
	t.source = NULL;
	t.has_explicitly_set = 1;
	t.explicitly_set = 1;
	o.json = false;
	CAPTURE(out, render_get(f, res, 1, &o));
	cr_assert(strstr(strchr(out, '\n') + 1, " set "), "%s", out);
	free(out);
}

Test(errors, each_code_explains_what_was_wrong_and_what_is_valid)
{
	char b[1536];
	render_error(b, sizeof(b), CTL__ERROR_CODE__ERR_NO_PROCESS, NULL, 999, 0);
	cr_assert(strstr(b, "no such process: 999") && strstr(b, "allocctl ps"), "%s", b);
	render_error(b, sizeof(b), CTL__ERROR_CODE__ERR_PERMISSION, NULL, 1, 65534);
	cr_assert(strstr(b, "permission denied: process 1") && strstr(b, "uid 65534"), "%s", b);
	render_error(b, sizeof(b), CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE, "frob", 1, 0);
	cr_assert(strstr(b, "unknown tunable: frob; valid tunables: mmap_threshold,"), "%s", b);
	render_error(b, sizeof(b), CTL__ERROR_CODE__ERR_RANGE, "mmap_threshold: 0..33554432", 1, 0);
	cr_assert_str_eq(b, "value out of range: mmap_threshold: 0..33554432");
	render_error(b, sizeof(b), CTL__ERROR_CODE__ERR_TIMEOUT, NULL, 7, 0);
	cr_assert(strstr(b, "process 7 did not answer in time") && strstr(b, "LIBALLOC_CONTROL"),
	          "%s", b);
	render_error(b, sizeof(b), CTL__ERROR_CODE__ERR_VERSION, "v2", 0, 0);
	cr_assert(strstr(b, "protocol version mismatch: allocctl speaks protocol 2"), "%s", b);
	cr_assert(strchr(b, '\n') == NULL, "one line");
}

Test(top, sorts_by_reclaimable_then_by_the_chosen_key)
{
	Ctl__ProcessInfo a = proc(1, "/a", 50, 10), b = proc(2, "/b", 10, 30),
	                 c = proc(3, "/c", 30, 20);
	Ctl__ProcessInfo *l[] = {&a, &b, &c};
	top_sort(l, 3, TOP_SORT_RECLAIMABLE);
	cr_assert(l[0]->pid == 2 && l[1]->pid == 3 && l[2]->pid == 1);
	top_sort(l, 3, (enum top_sort)top_sort_key('u'));
	cr_assert(l[0]->pid == 1 && l[1]->pid == 3 && l[2]->pid == 2);
	top_sort(l, 3, (enum top_sort)top_sort_key('p'));
	cr_assert(l[0]->pid == 1 && l[1]->pid == 2 && l[2]->pid == 3);
	cr_assert_eq(top_sort_key('x'), -1);
}
