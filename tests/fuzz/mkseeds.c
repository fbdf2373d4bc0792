/* mkseeds.c — writes the seed corpus of fuzz_frame: one file per request type and target
 * form (framed exactly as a client sends it, behind the fuzzer's flags byte), plus a few
 * pipelined and malformed streams. The pid used is 1: fuzz_frame's fake process claims it.
 * usage: mkseeds DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.pb-c.h"
#include "wire.h"

static const char *dir;
static int nfiles;

static size_t frame(uint8_t *out, Ctl__Envelope *e)
{
	size_t n = ctl__envelope__pack(e, out + 4);
	wire_frame_header(out, (uint32_t)n);
	return n + 4;
}

static void put(const char *name, uint8_t flags, const uint8_t *a, size_t na)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(&flags, 1, 1, f) != 1 || (na && fwrite(a, 1, na, f) != na) || fclose(f)) {
		perror(path);
		exit(1);
	}
	nfiles++;
}

static void one(const char *name, Ctl__Envelope *e)
{
	uint8_t buf[4096];
	e->protocol_version = CTL_PROTOCOL_VERSION;
	e->has_id = 1;
	e->id = 7;
	size_t n = frame(buf, e);
	put(name, 0xfe, buf, n); /* root, whole stream in the first read */
	char other[128];
	snprintf(other, sizeof(other), "%s-nobody", name);
	put(other, 0xff, buf, n); /* uid 65534: sees nothing */
	snprintf(other, sizeof(other), "%s-split", name);
	put(other, 0x40, buf, n); /* delivered in two reads */
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: mkseeds DIR\n");
		return 2;
	}
	dir = argv[1];
	Ctl__Envelope e = CTL__ENVELOPE__INIT;
	Ctl__VersionRequest ver = CTL__VERSION_REQUEST__INIT;
	Ctl__ListRequest list = CTL__LIST_REQUEST__INIT;
	Ctl__StatsRequest stats = CTL__STATS_REQUEST__INIT;
	Ctl__GetRequest get = CTL__GET_REQUEST__INIT;
	Ctl__SetRequest set = CTL__SET_REQUEST__INIT;
	Ctl__TrimRequest trim = CTL__TRIM_REQUEST__INIT;
	Ctl__ReleaseRequest rel = CTL__RELEASE_REQUEST__INIT;
	Ctl__FlushRequest flush = CTL__FLUSH_REQUEST__INIT;
	Ctl__Target by_pid = CTL__TARGET__INIT, by_exe = CTL__TARGET__INIT, all = CTL__TARGET__INIT;
	by_pid.has_pid = 1;
	by_pid.pid = 1;
	by_exe.exe = "init";
	all.has_all = 1;
	all.all = 1;

	e.payload_case = CTL__ENVELOPE__PAYLOAD_VERSION;
	e.version = &ver;
	one("version", &e);
	e.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
	e.list = &list;
	one("list", &e);
	e.payload_case = CTL__ENVELOPE__PAYLOAD_STATS;
	stats.pid = 1;
	e.stats = &stats;
	one("stats", &e);

	char *names[] = {"mmap_threshold", "decay_ms", "no_such_tunable"};
	e.payload_case = CTL__ENVELOPE__PAYLOAD_GET;
	get.pid = 1;
	e.get = &get;
	one("get-all", &e);
	get.n_names = 3;
	get.names = names;
	one("get-names", &e);

	Ctl__SetRequest__Assignment a1 = CTL__SET_REQUEST__ASSIGNMENT__INIT,
	                            a2 = CTL__SET_REQUEST__ASSIGNMENT__INIT,
	                            a3 = CTL__SET_REQUEST__ASSIGNMENT__INIT;
	a1.name = "mmap_threshold";
	a1.value = "64K";
	a2.name = "madvise_throttle";
	a2.value = "off";
	a3.name = "decay_ms";
	a3.value = "99h";
	Ctl__SetRequest__Assignment *as[] = {&a1, &a2, &a3};
	e.payload_case = CTL__ENVELOPE__PAYLOAD_SET;
	set.n_assignments = 2;
	set.assignments = as;
	e.set = &set;
	set.target = &by_pid;
	one("set-pid", &e);
	set.target = &by_exe;
	one("set-exe", &e);
	set.target = &all;
	set.n_assignments = 3;
	one("set-all-range", &e);

	e.payload_case = CTL__ENVELOPE__PAYLOAD_TRIM;
	trim.target = &by_pid;
	trim.has_pad = 1;
	trim.pad = 4096;
	e.trim = &trim;
	one("trim", &e);
	e.payload_case = CTL__ENVELOPE__PAYLOAD_RELEASE;
	rel.target = &by_exe;
	e.release = &rel;
	one("release", &e);
	e.payload_case = CTL__ENVELOPE__PAYLOAD_FLUSH;
	flush.target = &all;
	e.flush = &flush;
	one("flush", &e);
	Ctl__LogRequest log = CTL__LOG_REQUEST__INIT;
	e.payload_case = CTL__ENVELOPE__PAYLOAD_LOG;
	e.log = &log;
	one("log", &e);
	log.has_after_seq = log.has_limit = 1;
	log.after_seq = 2;
	log.limit = 1;
	one("log-after", &e);

	Ctl__HistoryRequest hist = CTL__HISTORY_REQUEST__INIT;
	int32_t hist_pids[] = {1, 2};
	e.payload_case = CTL__ENVELOPE__PAYLOAD_HISTORY;
	e.history = &hist;
	one("history-all", &e);
	hist.n_pids = 1;
	hist.pids = hist_pids;
	hist.has_events = hist.events = 1;
	hist.has_max_points = 1;
	hist.max_points = 3;
	one("history-pid-events", &e);
	hist.n_pids = 2;
	hist.resolution = "coarse";
	hist.has_since_ms = 1;
	hist.since_ms = -1;
	hist.has_samples = 1;
	hist.samples = 0;
	one("history-coarse-nosamples", &e);

	/* a pipelined stream: list, trim, stats in one write */
	uint8_t buf[8192];
	size_t n = 0;
	e.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
	n += frame(buf + n, &e);
	e.payload_case = CTL__ENVELOPE__PAYLOAD_TRIM;
	n += frame(buf + n, &e);
	e.payload_case = CTL__ENVELOPE__PAYLOAD_STATS;
	n += frame(buf + n, &e);
	put("pipelined", 0x80, buf, n);
	/* a wrong protocol version, then a request without a payload */
	e.protocol_version = 99;
	e.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
	n = frame(buf, &e);
	e.protocol_version = CTL_PROTOCOL_VERSION;
	e.payload_case = CTL__ENVELOPE__PAYLOAD__NOT_SET;
	n += frame(buf + n, &e);
	put("version-then-empty", 0xfe, buf, n);
	/* framing errors: zero length, oversize length, garbage body */
	static const uint8_t zero[] = {0, 0, 0, 0}, big[] = {0x7f, 0xff, 0xff, 0xff},
	                     junk[] = {0, 0, 0, 3, 0xff, 0xff, 0xff};
	put("frame-zero", 0xfe, zero, sizeof(zero));
	put("frame-oversize", 0xfe, big, sizeof(big));
	put("frame-junk", 0xfe, junk, sizeof(junk));
	printf("mkseeds: %d files in %s\n", nfiles, dir);
	return 0;
}
