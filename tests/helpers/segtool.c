/* segtool.c — the segment suites' window on a liballoc segment through the ctld reader API
 * (ctld/segment.[ch], linked in).
 * Output is greppable "key=value" lines; nothing here trusts the segment more than the
 * reader does. It never allocates through liballoc (run it without LD_PRELOAD).
 *
 * usage: segtool info PATH           header, liveness, totals, tunables (key=value lines)
 *        segtool live PATH           "live" (exit 0) or "stale: why" (exit 3)
 *        segtool cmd PATH [-t MS] [-i ID] COMMAND [NAME|PAD] [VALUE]
 *                                    one mailbox command; COMMAND is a name or, with -i,
 *                                    any raw id; prints status/reason/value/bytes/syscalls
 *        segtool bench PATH N        N `set mmap_threshold` round trips two ways (the
 *                                    library's seg_command, and a spinning poll): p50/p99/max
 * exit: 0 ok, 1 error (reason on stderr), 2 usage, 3 stale, 4 command refused (status != OK),
 *       5 command timed out */
#include "segment.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sched.h>

static int usage(void)
{
	fprintf(stderr, "usage: segtool info|live|cmd|bench PATH [args]\n");
	return 2;
}

static int open_seg(struct seg *s, const char *path)
{
	int err = seg_open(s, path, getuid());
	if (err != SEG_E_OK)
		fprintf(stderr, "segtool: %s: %s (%s)\n", path, seg_strerror(err), s->why);
	return err;
}

static const char *const tunable_names[] = {
#define SEGTOOL_X_TNAME(name, ...) #name,
        LA_TUNABLES(SEGTOOL_X_TNAME)
#undef SEGTOOL_X_TNAME
};

static int cmd_info(struct seg *s)
{
	int err = seg_refresh(s);
	if (err != SEG_E_OK) {
		fprintf(stderr, "segtool: refresh: %s (%s)\n", seg_strerror(err), s->why);
		return 1;
	}
	const struct la_shm_header *h = &s->hdr;
	int live = seg_liveness(s, true);
	printf("pid=%d\nuid=%u\nstart_time=%llu\nexe=%s\ncontrol=%s\nthreads=%llu\n"
	       "version=%.15s\nforeign=%u\n",
	       h->pid, h->uid, (unsigned long long)h->start_time, h->exe,
	       seg_control_name(h->control_state), (unsigned long long)h->allocator_threads,
	       h->version, h->foreign_allocators);
	printf("arenas=%u\nliveness=%s\n", h->arena_count, live == SEG_E_OK ? "live" : "stale");
	struct la_counters c;
	err = seg_read_totals(s, &c);
	if (err != SEG_E_OK) {
		fprintf(stderr, "segtool: totals: %s (%s)\n", seg_strerror(err), s->why);
		return 1;
	}
#define SEGTOOL_X_PRINT(name, ...) printf("%s=%llu\n", #name, (unsigned long long)c.name);
	LA_COUNTERS(SEGTOOL_X_PRINT)
#undef SEGTOOL_X_PRINT
	struct la_shm_tunable t[LA_NTUNABLES];
	uint32_t n = 0;
	err = seg_read_tunables(s, t, &n);
	if (err != SEG_E_OK) {
		fprintf(stderr, "segtool: tunables: %s (%s)\n", seg_strerror(err), s->why);
		return 1;
	}
	for (uint32_t i = 0; i < n; i++)
		printf("tunable.%s=%lld source=%s\n", tunable_names[i], (long long)t[i].value,
		       la_source_name(t[i].source));
	return 0;
}

static int cmd_live(struct seg *s)
{
	int err = seg_liveness(s, true);
	if (err == SEG_E_OK) {
		printf("live\n");
		return 0;
	}
	printf("%s: %s\n", err == SEG_E_STALE ? "stale" : seg_strerror(err), s->why);
	return err == SEG_E_STALE ? 3 : 1;
}

static uint32_t command_id(const char *name)
{
#define SEGTOOL_X_CMDID(cname, id, help) \
	if (strcmp(name, #cname) == 0)   \
		return id;
	LA_COMMANDS(SEGTOOL_X_CMDID)
#undef SEGTOOL_X_CMDID
	return 0;
}

static int cmd_command(struct seg *s, int argc, char **argv)
{
	int timeout_ms = 60000; /* generous: a busy machine is slow (tests pass -t for less) */
	long long raw_id = -1;
	int opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+t:i:")) != -1) {
		if (opt == 't')
			timeout_ms = atoi(optarg);
		else if (opt == 'i')
			raw_id = strtoll(optarg, NULL, 0);
		else
			return usage();
	}
	struct seg_cmd c;
	memset(&c, 0, sizeof(c));
	const char *cname = optind < argc ? argv[optind++] : NULL;
	if (raw_id >= 0) {
		c.command = (uint32_t)raw_id;
	} else {
		if (!cname)
			return usage();
		c.command = command_id(cname);
		if (!c.command) {
			fprintf(stderr, "segtool: unknown command %s\n", cname);
			return 2;
		}
		cname = optind < argc ? argv[optind++] : NULL;
	}
	/* the next words: tunable name and value (get/set), or the pad (trim) */
	if (cname && (c.command == LA_CMD_trim)) {
		c.arg = strtoull(cname, NULL, 0);
	} else if (cname) {
		snprintf(c.name, sizeof(c.name), "%s", cname);
		if (optind < argc)
			c.value = strtoll(argv[optind++], NULL, 0);
	}
	struct seg_result r;
	memset(&r, 0, sizeof(r));
	int err = seg_command(s, &c, &r, (uint32_t)getpid(), timeout_ms);
	if (err != SEG_E_OK) {
		printf("error=%s\nwhy=%s\n", seg_strerror(err), s->why);
		return err == SEG_E_TIMEOUT || err == SEG_E_RUNNING ? 5 : 1;
	}
	printf("status=%d\nstatus_text=%s\nreason=%s\nvalue=%lld\nbytes_released=%llu\n", r.status,
	       seg_status_text(r.status), r.reason, (long long)r.value_out,
	       (unsigned long long)r.bytes_released);
	printf("mmap=%llu\nmunmap=%llu\nmadvise=%llu\nmprotect=%llu\nduration_ns=%llu\n",
	       (unsigned long long)r.syscalls_mmap, (unsigned long long)r.syscalls_munmap,
	       (unsigned long long)r.syscalls_madvise, (unsigned long long)r.syscalls_mprotect,
	       (unsigned long long)r.duration_ns);
	return r.status == LA_ST_OK ? 0 : 4;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *how, uint64_t *ns, int n)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	printf("%s n=%d p50_us=%.1f p99_us=%.1f max_us=%.1f\n", how, n, (double)ns[n / 2] / 1e3,
	       (double)ns[(n * 99) / 100] / 1e3, (double)ns[n - 1] / 1e3);
}

/* One round trip without the library's 200 us poll sleeps: lock, submit and poll, yielding
 * the CPU between tries. */
static int spin_round_trip(struct seg *s, const struct seg_cmd *c, uint64_t seq)
{
	uint32_t token = (uint32_t)getpid();
	struct seg_result r;
	uint64_t deadline = seg_now_ns(CLOCK_MONOTONIC) + 60000000000ull; /* a busy machine */
	int err;
	while ((err = seg_mb_lock(s, token, 60000000000ull)) == SEG_E_BUSY &&
	       seg_now_ns(CLOCK_MONOTONIC) < deadline)
		sched_yield(); /* another client holds it: wait for our turn */
	if (err)
		return err;
	while ((err = seg_mb_submit(s, c, seq)) == SEG_E_BUSY &&
	       seg_now_ns(CLOCK_MONOTONIC) < deadline)
		sched_yield();
	while (err == SEG_E_OK) {
		err = seg_mb_poll(s, seq, &r);
		if (err != SEG_E_TIMEOUT)
			break;
		if (seg_now_ns(CLOCK_MONOTONIC) > deadline) {
			seg_mb_cancel(s);
			break;
		}
		err = SEG_E_OK;
		sched_yield();
	}
	seg_mb_unlock(s, token);
	if (err == SEG_E_OK && r.status != LA_ST_OK)
		err = SEG_E_PROTOCOL;
	return err;
}

static int cmd_bench(struct seg *s, int n)
{
	if (n < 1)
		return usage();
	uint64_t *ns = malloc((size_t)n * sizeof(*ns));
	if (!ns)
		return 1;
	int err = seg_map_mailbox(s);
	struct seg_cmd c;
	memset(&c, 0, sizeof(c));
	c.command = LA_CMD_set;
	snprintf(c.name, sizeof(c.name), "mmap_threshold");
	for (int way = 0; way < 2 && !err; way++) {
		for (int i = 0; i < n && !err; i++) {
			c.value = (i & 1) ? 131072 : 262144;
			uint64_t t0 = seg_now_ns(CLOCK_MONOTONIC);
			if (way == 0) {
				struct seg_result r;
				err = seg_command(s, &c, &r, (uint32_t)getpid(), 60000);
				if (!err && r.status != LA_ST_OK)
					err = SEG_E_PROTOCOL;
			} else {
				err = spin_round_trip(s, &c,
				                      ((uint64_t)getpid() << 32) + (uint64_t)i);
			}
			ns[i] = seg_now_ns(CLOCK_MONOTONIC) - t0;
		}
		if (!err)
			report(way == 0 ? "seg_command" : "spin_poll", ns, n);
	}
	free(ns);
	if (err)
		fprintf(stderr, "segtool: bench: %s (%s)\n", seg_strerror(err), s->why);
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	seg_install_sigbus_guard();
	struct seg s;
	if (open_seg(&s, argv[2]) != SEG_E_OK)
		return 1;
	int rc;
	if (strcmp(argv[1], "info") == 0)
		rc = cmd_info(&s);
	else if (strcmp(argv[1], "live") == 0)
		rc = cmd_live(&s);
	else if (strcmp(argv[1], "cmd") == 0)
		rc = cmd_command(&s, argc - 2, argv + 2);
	else if (strcmp(argv[1], "bench") == 0 && argc == 4)
		rc = cmd_bench(&s, atoi(argv[3]));
	else
		rc = usage();
	seg_close(&s);
	return rc;
}
