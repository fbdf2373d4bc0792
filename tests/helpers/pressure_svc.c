/* pressure_svc.c — the two services of the memory-pressure scenario (issue 20), for the
 * tests (tests/policy/pressure.bats) and the benchmark (bench/policy-oom.sh), under any
 * allocator (the one preloaded, or the process's own):
 *
 *   pressure_svc hold BYTES [KEEP]   service A: allocates BYTES in blocks of 1..64 KiB
 *                                    (touched), frees them all but every KEEP-th (default
 *                                    32: the state a service keeps), prints "quiet" and
 *                                    waits, idle, until killed
 *   pressure_svc grab BYTES [HOLD_MS [MIB_PER_S]]
 *                                    service B: allocates BYTES the same way (touched; at
 *                                    most MIB_PER_S when given, else as fast as it can),
 *                                    prints "grabbed", keeps it HOLD_MS (default 200),
 *                                    frees it and exits 0
 *   pressure_svc burst BYTES PERIOD_MS SECONDS
 *                                    the bursty service: every PERIOD_MS allocates BYTES
 *                                    in blocks, touches them, frees them, then idles;
 *                                    for SECONDS. Prints one line per burst with its
 *                                    throughput, time and the minor faults this thread
 *                                    took in it ("burst N X MiB/s T s F faults"), then
 *                                    "done".
 *
 * Sizes take K/M/G. Blocks come from a fixed pseudo-random sequence, so every allocator
 * sees the same requests. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static uint64_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end | 0x20) {
	case 'k':
		v *= 1024;
		break;
	case 'm':
		v *= 1024 * 1024;
		break;
	case 'g':
		v *= 1024.0 * 1024 * 1024;
		break;
	}
	return (uint64_t)v;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static size_t size_min = 1024, size_max = 64 * 1024; /* PRESSURE_SVC_SIZES=MIN-MAX */
static size_t next_size(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return size_min + (size_t)(rng % (size_max - size_min + 1));
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Minor faults the calling thread took so far (a populate by another thread is not
 * counted here: only what the burst itself had to fault in). */
static long thread_faults(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt : 0;
}

static double pace_mib_s; /* grab: at most this fast (0: no limit) */

/* Allocate about bytes in blocks, each written; returns the array of blocks. */
static char **fill(uint64_t bytes, size_t *n)
{
	double t0 = now_s();
	size_t cap = (size_t)(bytes / 1024) + 16, k = 0;
	char **b = malloc(cap * sizeof(*b));
	if (!b) {
		perror("malloc");
		exit(1);
	}
	for (uint64_t got = 0; got < bytes && k < cap; k++) {
		size_t sz = next_size();
		b[k] = malloc(sz);
		if (!b[k]) {
			perror("malloc");
			exit(1);
		}
		memset(b[k], (int)(k & 0xff) | 1, sz);
		got += sz;
		if (pace_mib_s > 0) {
			double due = t0 + (double)got / (1 << 20) / pace_mib_s;
			double left = due - now_s();
			if (left > 0.001)
				usleep((useconds_t)(left * 1e6));
		}
	}
	*n = k;
	return b;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *sizes = getenv("PRESSURE_SVC_SIZES");
	if (sizes && strchr(sizes, '-')) {
		size_min = parse_size(sizes);
		size_max = parse_size(strchr(sizes, '-') + 1);
		if (size_min < 16 || size_max < size_min) {
			fprintf(stderr, "pressure_svc: bad PRESSURE_SVC_SIZES '%s'\n", sizes);
			return 2;
		}
	}
	if (argc >= 3 && !strcmp(argv[1], "hold")) {
		size_t n, keep = argc > 3 ? (size_t)atoi(argv[3]) : 32;
		char **b = fill(parse_size(argv[2]), &n);
		for (size_t i = 0; i < n; i++)
			if (!keep || i % keep)
				free(b[i]);
		printf("quiet\n");
		for (;;)
			pause();
	}
	if (argc >= 3 && !strcmp(argv[1], "grab")) {
		size_t n;
		long hold = argc > 3 ? atol(argv[3]) : 200;
		pace_mib_s = argc > 4 ? atof(argv[4]) : 0;
		char **b = fill(parse_size(argv[2]), &n);
		printf("grabbed\n");
		usleep((useconds_t)hold * 1000);
		for (size_t i = 0; i < n; i++)
			free(b[i]);
		free(b);
		return 0;
	}
	if (argc >= 5 && !strcmp(argv[1], "burst")) {
		uint64_t bytes = parse_size(argv[2]);
		double period = atof(argv[3]) / 1000, total = atof(argv[4]);
		double t0 = now_s();
		for (int k = 0; now_s() - t0 < total; k++) {
			double start = now_s();
			long faults = thread_faults();
			size_t n;
			char **b = fill(bytes, &n);
			for (size_t i = 0; i < n; i++)
				free(b[i]);
			free(b);
			double took = now_s() - start;
			printf("burst %d %.1f MiB/s %.3f s %ld faults\n", k,
			       (double)bytes / (1 << 20) / took, took, thread_faults() - faults);
			double next = t0 + (k + 1) * period;
			while (now_s() < next && now_s() - t0 < total) {
				double left = next - now_s();
				usleep((useconds_t)(left > 0.2 ? 200000 : left * 1e6 + 1));
			}
		}
		printf("done\n");
		return 0;
	}
	fprintf(stderr, "usage: pressure_svc hold BYTES [KEEP] | grab BYTES [HOLD_MS] | burst "
	                "BYTES PERIOD_MS SECONDS\n");
	return 2;
}
