/* pressure.c — unit tests of ctld/pressure.c against the kernel: a cgroup v1 usage
 * threshold signalled when a child in a memory cgroup made by the test crosses it (both
 * ways); the host PSI trigger firing while such a child thrashes its page cache; cgroup v2
 * memory.events through inotify (a stand-in directory: this kind of host has no v2 memory
 * controller); the parsing of /proc/<pid>/cgroup; bad PSI triggers refused with the reason.
 * The kernel tests need root and a memory cgroup hierarchy (v1 here; on a v2 host the
 * cgroup test runs on v2). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "policy.h"
#include "pressure.h"

struct seen {
	int n;
	struct pressure_event last;
	bool above, below, gone;
	uint64_t high, low;
};

static void on_event(struct pressure_watch *w, const struct pressure_event *ev, void *arg)
{
	struct seen *s = arg;
	s->n++;
	s->last = *ev;
	if (ev->source == PRESSURE_GONE)
		s->gone = true;
	if (ev->have_memory && s->high && ev->mem.usage >= s->high)
		s->above = true;
	if (ev->have_memory && s->above && s->low && ev->mem.usage < s->low)
		s->below = true;
}

/* Run the loop until cond holds or ms pass. */
static bool loop_until(struct event_base *b, bool (*cond)(struct seen *), struct seen *s, int ms)
{
	struct timeval tv = {0, 20000};
	for (int i = 0; i < ms / 20 && !cond(s); i++) {
		event_base_loopexit(b, &tv);
		event_base_dispatch(b);
	}
	return cond(s);
}

static bool got_any(struct seen *s)
{
	return s->n > 0;
}
static bool got_above(struct seen *s)
{
	return s->above;
}
static bool got_below(struct seen *s)
{
	return s->below;
}
static bool got_gone(struct seen *s)
{
	return s->gone;
}

Test(pressure, proc_cgroup_text_gives_the_memory_cgroup)
{
	char dir[256], rel[256];
	const char *v1 = "12:pids:/a\n4:memory:/process_api/x1\n0::/\n";
	cr_assert_eq(cgroup_parse(v1, "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", false, dir,
	                          sizeof(dir), rel, sizeof(rel)),
	             0);
	cr_assert_str_eq(dir, "/sys/fs/cgroup/memory/process_api/x1");
	cr_assert_str_eq(rel, "/process_api/x1");
	const char *both = "5:cpu,memory:/system.slice/redis.service\n";
	cr_assert_eq(cgroup_parse(both, "/m", NULL, false, dir, sizeof(dir), rel, sizeof(rel)), 0);
	cr_assert_str_eq(dir, "/m/system.slice/redis.service");
	/* the root cgroup is the hierarchy's directory itself */
	cr_assert_eq(cgroup_parse("4:memory:/\n", "/m", NULL, false, dir, sizeof(dir), NULL, 0), 0);
	cr_assert_str_eq(dir, "/m");
	/* v2 only where its hierarchy has the memory controller */
	const char *v2 = "0::/user.slice/app.scope\n";
	cr_assert_eq(
	        cgroup_parse(v2, "", "/sys/fs/cgroup", true, dir, sizeof(dir), rel, sizeof(rel)),
	        0);
	cr_assert_str_eq(dir, "/sys/fs/cgroup/user.slice/app.scope");
	errno = 0;
	cr_assert_eq(cgroup_parse(v2, "", "/sys/fs/cgroup", false, dir, sizeof(dir), NULL, 0), -1);
	cr_assert_eq(errno, ENOENT);
	/* "memoryx" is not "memory"; a v1 memory line wins over v2 */
	cr_assert_eq(cgroup_parse("3:memoryx:/a\n", "/m", NULL, false, dir, sizeof(dir), NULL, 0),
	             -1);
	cr_assert_eq(
	        cgroup_parse("0::/v2\n4:memory:/v1\n", "/m", "/u", true, dir, sizeof(dir), NULL, 0),
	        0);
	cr_assert_str_eq(dir, "/m/v1");
	cr_assert_eq(cgroup_parse("", "/m", "/u", true, dir, sizeof(dir), NULL, 0), -1);
}

Test(pressure, psi_triggers_outside_the_kernel_bounds_are_refused_with_the_reason)
{
	struct event_base *b = event_base_new();
	char err[256];
	struct seen s = {0};
	cr_assert_null(pressure_watch_psi(b, PRESSURE_HOST_PSI, false, 1000, 100000, on_event, &s,
	                                  err, sizeof(err)));
	cr_assert(strstr(err, "window must be 500ms..10s"), "%s", err);
	cr_assert_null(pressure_watch_psi(b, PRESSURE_HOST_PSI, false, 2000000, 1000000, on_event,
	                                  &s, err, sizeof(err)));
	cr_assert(strstr(err, "stall at most the window"), "%s", err);
	cr_assert_null(pressure_watch_psi(b, "/nonexistent/memory.pressure", false, 100000, 1000000,
	                                  on_event, &s, err, sizeof(err)));
	cr_assert(strstr(err, "/nonexistent/memory.pressure: No such file"), "%s", err);
	event_base_free(b);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* A stand-in cgroup v2 directory: memory.current, memory.max, memory.high and memory.events
 * (all counts 0) with the given texts; fake_v2_remove takes away whatever of the watched
 * files a test made, and the directory. */
static void fake_v2(const char *dir, const char *current, const char *max, const char *high)
{
	write_file(dir, "memory.current", current);
	write_file(dir, "memory.max", max);
	write_file(dir, "memory.high", high);
	write_file(dir, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
}

static void fake_v2_remove(const char *dir)
{
	static const char *const names[] = {"memory.current", "memory.max", "memory.high",
	                                    "memory.events", "memory.pressure"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

Test(pressure, cgroup_v2_memory_events_are_reported_with_the_figures)
{
	char dir[] = "/tmp/ctld-pressure-v2.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	fake_v2(dir, "734003200\n", "1073741824\n", "max\n");
	struct event_base *b = event_base_new();
	struct seen s = {0};
	char err[256];
	struct pressure_watch *w =
	        pressure_watch_cgroup(b, dir, NULL, 0, false, 0, 0, on_event, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	cr_assert_str_eq(err, "");
	struct cg_memory m;
	cr_assert_eq(cgroup_memory_read(dir, &m), 0);
	cr_assert_eq(m.version, 2);
	cr_assert_eq(m.limit, 1073741824);
	cr_assert_eq(m.high, UINT64_MAX);
	/* nothing happens without an event */
	cr_assert_not(loop_until(b, got_any, &s, 200));
	write_file(dir, "memory.current", "1073000000\n");
	write_file(dir, "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
	cr_assert(loop_until(b, got_any, &s, 5000));
	cr_assert_eq(s.last.source, PRESSURE_EVENTS);
	cr_assert(s.last.have_memory);
	cr_assert_eq(s.last.mem.usage, 1073000000);
	cr_assert_eq(s.last.mem.ev_max, 3);
	cr_assert_eq(s.last.mem.ev_oom_kill, 1);
	cr_assert(strstr(s.last.why, "max 3"), "%s", s.last.why);
	cr_assert_eq(pressure_watch_events(w), (uint64_t)s.n);
	/* the cgroup goes away: one last event, then nothing */
	char path[512];
	snprintf(path, sizeof(path), "%s/memory.events", dir);
	unlink(path);
	cr_assert(loop_until(b, got_gone, &s, 5000));
	pressure_watch_free(w);
	fake_v2_remove(dir);
	event_base_free(b);
}

Test(pressure, cgroup_v2_psi_trigger_is_the_one_the_policy_asked_for)
{
	char dir[] = "/tmp/ctld-pressure-v2p.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	fake_v2(dir, "1000\n", "1073741824\n", "max\n");
	write_file(dir, "memory.pressure", "");
	struct event_base *b = event_base_new();
	struct seen s = {0};
	char err[256], path[512], got[64] = "";
	/* a stand-in memory.pressure takes the trigger's text, but a regular file cannot be
	 * polled for POLLPRI: the watcher goes on with memory.events and says why */
	struct pressure_watch *w = pressure_watch_cgroup(b, dir, NULL, 0, true, 100000, 2000000,
	                                                 on_event, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	cr_assert(strstr(err, "(watching memory.events only)"), "%s", err);
	snprintf(path, sizeof(path), "%s/memory.pressure", dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(got, sizeof(got), f));
	fclose(f);
	cr_assert_str_eq(got, "full 100000 2000000", "psi = full gave the trigger '%s'", got);
	pressure_watch_free(w);
	fake_v2_remove(dir);
	event_base_free(b);
}

static bool got_more(struct seen *s)
{
	return s->n > (int)s->high; /* high: the count to pass (this test's use of it) */
}

static void write_u64(const char *dir, const char *name, uint64_t v)
{
	char text[32];
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)v);
	write_file(dir, name, text);
}

/* One memory.events change as the kernel makes it when a charge goes over memory.high
 * (the 'high' count), memory.current at usage: the figures the watcher delivered. */
static struct cg_memory v2_throttled(struct event_base *b, struct seen *s, const char *dir,
                                     uint64_t usage, int high_events)
{
	char text[96];
	write_u64(dir, "memory.current", usage);
	snprintf(text, sizeof(text), "low 0\nhigh %d\nmax 0\noom 0\noom_kill 0\n", high_events);
	s->high = (uint64_t)s->n;
	write_file(dir, "memory.events", text);
	cr_assert(loop_until(b, got_more, s, 5000), "no event for memory.events 'high %d'",
	          high_events);
	cr_assert(s->last.have_memory);
	cr_assert_eq(s->last.mem.usage, usage, "memory.current was not read again on the event");
	return s->last.mem;
}

Test(pressure, cgroup_v2_a_climb_between_memory_high_and_max_acts_again)
{
	char dir[] = "/tmp/ctld-pressure-v2b.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	const uint64_t max = 1000ull << 20, mib = 1ull << 20;
	/* the policy: high 80% (at memory.high), low 60%; bands from 80, 85, 90, 95% of max */
	struct policy def;
	memset(&def, 0, sizeof(def));
	def.on = POLICY_ON_CGROUP;
	def.high.ppm = 800000;
	def.low.ppm = 600000;
	write_u64(dir, "memory.current", 700 * mib);
	write_u64(dir, "memory.max", max);
	write_u64(dir, "memory.high", max / 10 * 8);
	write_file(dir, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
	struct cg_memory m;
	cr_assert_eq(cgroup_memory_read(dir, &m), 0);
	uint64_t th[POLICY_CG_BANDS + 1];
	policy_cg_thresholds(&def, policy_cg_limit(&m), th);
	cr_assert_eq(th[0], max / 10 * 8);
	cr_assert_eq(policy_cg_v2_signal_from(&m), th[0],
	             "memory.high at the policy's high: every climb above it is signalled");
	struct event_base *b = event_base_new();
	struct seen s = {0};
	char err[256];
	struct pressure_watch *w = pressure_watch_cgroup(b, dir, th, POLICY_CG_BANDS + 1, false, 0,
	                                                 0, on_event, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	struct policy_cg_state st = {.armed = true};
	uint64_t t = 10000000000ull;
	/* over memory.high: throttled, counted, the policy acts (band 1) */
	m = v2_throttled(b, &s, dir, max / 100 * 81, 1);
	cr_assert_eq(policy_cg_decide(&def, &st, m.usage, policy_cg_limit(&m), t, false, false),
	             POLICY_ACT);
	st.last_run_ns = t;
	/* the memory was still in use: usage goes on climbing, each throttled charge counted */
	m = v2_throttled(b, &s, dir, max / 100 * 84, 4);
	cr_assert_eq(policy_cg_decide(&def, &st, m.usage, policy_cg_limit(&m), t + 1, false, false),
	             POLICY_NONE, "the same band: hysteresis holds");
	m = v2_throttled(b, &s, dir, max / 100 * 91, 9);
	cr_assert_eq(policy_cg_decide(&def, &st, m.usage, policy_cg_limit(&m), t + 2, false, false),
	             POLICY_ACT, "a climb to a higher band on v2 was not acted on");
	cr_assert_eq(st.band, 3);
	/* memory.high unset, or above the policy's high: nothing until it (or memory.max) */
	write_file(dir, "memory.high", "max\n");
	cr_assert_eq(cgroup_memory_read(dir, &m), 0);
	cr_assert_eq(policy_cg_limit(&m), max);
	cr_assert_eq(policy_cg_v2_signal_from(&m), max);
	write_u64(dir, "memory.high", max / 100 * 90);
	cr_assert_eq(cgroup_memory_read(dir, &m), 0);
	cr_assert_eq(policy_cg_v2_signal_from(&m), max / 100 * 90);
	m.version = 1;
	cr_assert_eq(policy_cg_v2_signal_from(&m), 0, "v1 has usage thresholds");
	pressure_watch_free(w);
	fake_v2_remove(dir);
	event_base_free(b);
}

/* ---- against the kernel: a memory cgroup of our own -------------------------------------- */

static char cg[600];

static bool make_cgroup(uint64_t limit)
{
	if (geteuid() != 0)
		return false;
	char mine[512];
	if (cgroup_of_pid(getpid(), mine, sizeof(mine), NULL, 0) < 0)
		return false;
	snprintf(cg, sizeof(cg), "%s/ctld-pressure-test.%d", mine, (int)getpid());
	if (mkdir(cg, 0755) < 0 && errno != EEXIST)
		return false;
	char path[700], num[32];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)limit);
	struct cg_memory m;
	if (cgroup_memory_read(cg, &m) < 0)
		return false;
	snprintf(path, sizeof(path), "%s/%s", cg,
	         m.version == 1 ? "memory.limit_in_bytes" : "memory.max");
	int fd = open(path, O_WRONLY);
	bool ok = fd >= 0 && write(fd, num, strlen(num)) > 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static void remove_cgroup(void)
{
	for (int i = 0; i < 100 && rmdir(cg) < 0 && errno == EBUSY; i++)
		usleep(20000);
}

static void enter_cgroup(void)
{
	/* a child dies with the test: one whose test failed would otherwise wait for ever and
	 * hold the test runner's output pipe open (the whole run hung) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	char path[700];
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, "0", 1) != 1)
		_exit(3);
	close(fd);
}

/* A child in the cgroup: touch `mb` MiB, wait for SIGUSR1, free it, then wait to be killed. */
static pid_t toucher(size_t mb)
{
	pid_t pid = fork();
	if (pid == 0) {
		enter_cgroup();
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		size_t n = mb << 20;
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			_exit(4);
		for (size_t i = 0; i < n; i += 4096)
			p[i] = 1;
		int sig;
		sigwait(&set, &sig);
		munmap(p, n);
		pause();
		_exit(0);
	}
	return pid;
}

Test(pressure, cgroup_usage_thresholds_signal_both_ways)
{
	if (!make_cgroup(256u << 20))
		cr_skip_test("needs root and a memory cgroup hierarchy");
	struct cg_memory m;
	cr_assert_eq(cgroup_memory_read(cg, &m), 0);
	if (m.version != 1) {
		remove_cgroup();
		cr_skip_test("usage thresholds are a cgroup v1 feature (v2: memory.events)");
	}
	struct event_base *b = event_base_new();
	struct seen s = {.high = 48u << 20, .low = 16u << 20};
	uint64_t th[] = {s.high, s.low};
	char err[256];
	struct pressure_watch *w =
	        pressure_watch_cgroup(b, cg, th, 2, false, 0, 0, on_event, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	cr_assert_not(loop_until(b, got_any, &s, 100), "no event before anything happened");
	pid_t child = toucher(64);
	/* 30 s: a loaded machine may be slow to fault the child's pages in; the wait ends as
	 * soon as the event is seen */
	cr_assert(loop_until(b, got_above, &s, 30000),
	          "usage never reported above 48 MiB (%d events, last usage %llu, child %s)", s.n,
	          (unsigned long long)s.last.mem.usage,
	          waitpid(child, NULL, WNOHANG) == 0 ? "running" : "gone");
	cr_assert_eq(s.last.source, PRESSURE_USAGE);
	cr_assert_eq(s.last.mem.version, 1);
	cr_assert_eq(s.last.mem.limit, 256u << 20);
	cr_assert(strstr(s.last.why, "crossed a threshold"), "%s", s.last.why);
	kill(child, SIGUSR1); /* frees its memory: usage falls below the low threshold */
	cr_assert(loop_until(b, got_below, &s, 30000),
	          "usage never reported below 16 MiB (%d events, last usage %llu)", s.n,
	          (unsigned long long)s.last.mem.usage);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	pressure_watch_free(w);
	remove_cgroup();
	event_base_free(b);
}

Test(pressure, the_host_psi_trigger_fires_while_a_cgroup_thrashes)
{
	if (access(PRESSURE_HOST_PSI, W_OK) < 0)
		cr_skip_test("no PSI on this kernel (%s)", PRESSURE_HOST_PSI);
	if (!make_cgroup(16u << 20))
		cr_skip_test("needs root and a memory cgroup hierarchy");
	struct event_base *b = event_base_new();
	struct seen s = {0};
	char err[256];
	/* a 2 s window: without CAP_SYS_RESOURCE (a container's root) it must be a multiple */
	struct pressure_watch *w = pressure_watch_psi(b, PRESSURE_HOST_PSI, false, 20000, 2000000,
	                                              on_event, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	/* page cache written and read back in a 16 MiB cgroup: reclaim stalls the writer */
	char file[600];
	snprintf(file, sizeof(file), "/var/tmp/ctld-pressure-thrash.%d", (int)getpid());
	pid_t child = fork();
	if (child == 0) {
		enter_cgroup();
		static char buf[1 << 20];
		memset(buf, 7, sizeof(buf));
		for (int round = 0; round < 200; round++) {
			int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
			if (fd < 0)
				_exit(5);
			for (int i = 0; i < 64; i++)
				if (write(fd, buf, sizeof(buf)) < 0)
					_exit(6);
			lseek(fd, 0, SEEK_SET);
			while (read(fd, buf, sizeof(buf)) > 0)
				;
			close(fd);
		}
		_exit(0);
	}
	bool fired = loop_until(b, got_any, &s, 20000);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	unlink(file);
	pressure_watch_free(w);
	remove_cgroup();
	event_base_free(b);
	cr_assert(fired, "no PSI event in 20 s of page-cache thrashing");
	cr_assert_eq(s.last.source, PRESSURE_PSI);
	cr_assert(strstr(s.last.why, "psi some 20ms/2000ms on /proc/pressure/memory"), "%s",
	          s.last.why);
}

Test(pressure, mem_available_reads_meminfo)
{
	uint64_t a = mem_available();
	cr_assert_neq(a, UINT64_MAX);
	cr_assert_gt(a, 1u << 20);
}
