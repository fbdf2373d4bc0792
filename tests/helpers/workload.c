/* workload.c — the demo service and the CLI suites' preloaded process: THREADS threads
 * fill a live set of SIZE bytes of mixed block sizes (16 B .. 64 KiB, and a few
 * 256 KiB .. 1 MiB blocks), touching every page they get, and then churn it for DURATION
 * (0: not at all). The fill is not bound by the duration: however slow the machine, the
 * whole SIZE is allocated, so what the tests and the demo release afterwards is there.
 * Then each thread frees everything but the KEEP bytes it allocated first and exits, and
 * the process goes quiet.
 * Quiet, it waits for signals only:
 *   SIGUSR1  allocate BURST_COUNT blocks of BURST_SIZE (touched) and hold them
 *   SIGUSR2  free every held burst block
 *   SIGTERM, SIGINT  exit 0
 * Progress lines on stdout (flushed): "ready PID", "quiet", "burst N", "freed N".
 * Randomness is deterministic (xorshift seeded per thread), so runs are repeatable.
 *
 * usage: workload [-t THREADS] [-s SIZE] [-d SECONDS] [-k KEEP] [-b BURST_SIZE]
 *                 [-n BURST_COUNT]    sizes take K/M/G suffixes; SECONDS may be fractional */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

struct config {
	int threads;
	size_t size, keep, burst_size;
	int burst_count;
	double seconds;
};

static struct config cfg = {4, 256u << 20, 8u << 20, 512u << 10, 8, 3.0};

struct block {
	void *p;
	size_t size;
};

struct worker {
	pthread_t thread;
	int index;
	uint64_t rng;
	struct block *keep; /* held until exit */
	size_t nkeep;
	uint64_t allocs, frees;
	size_t peak; /* live bytes when the fill ended */
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Mostly small blocks, a tail of medium ones, and 1 in 256 large (direct-mapped). */
static size_t pick_size(uint64_t *rng)
{
	uint64_t r = rng_next(rng);
	unsigned bucket = (unsigned)(r & 255);
	r >>= 8;
	if (bucket == 0)
		return 256u * 1024 + (size_t)(r % (768u * 1024));
	if (bucket < 32)
		return 4096 + (size_t)(r % (60u * 1024));
	if (bucket < 96)
		return 512 + (size_t)(r % 3584);
	return 16 + (size_t)(r % 496);
}

/* Write one byte per page so the memory is resident. */
static void touch(void *p, size_t n)
{
	volatile char *c = p;
	for (size_t i = 0; i < n; i += PAGE)
		c[i] = (char)i;
	c[n - 1] = 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *alloc_touched(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "workload: malloc(%zu) failed: %s\n", n, strerror(errno));
		exit(1);
	}
	touch(p, n);
	return p;
}

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	size_t share = cfg.size / (size_t)cfg.threads;
	size_t keep_share = cfg.keep / (size_t)cfg.threads;

	/* The blocks this thread keeps for its whole life come first. */
	size_t cap = 64, held = 0;
	w->keep = malloc(cap * sizeof(*w->keep));
	while (held < keep_share) {
		if (w->nkeep == cap)
			w->keep = realloc(w->keep, (cap *= 2) * sizeof(*w->keep));
		size_t n = 64 + (size_t)(rng_next(&w->rng) % 4032);
		w->keep[w->nkeep++] = (struct block){alloc_touched(n), n};
		held += n;
	}

	/* Fill slots up to the share (a block that no longer fits ends the fill: the live set
	 * is within a block of the share), then replace random slots until the deadline. */
	size_t nslots = share / 2048 + 16;
	struct block *slots = calloc(nslots, sizeof(*slots));
	size_t live = 0;
	bool filled = false;
	double end = 0;
	for (uint64_t it = 0;; it++) {
		if (filled && (it & 255) == 0 && now_s() >= end)
			break;
		struct block *b = &slots[rng_next(&w->rng) % nslots];
		if (b->p && filled) {
			live -= b->size;
			free(b->p);
			w->frees++;
			b->p = NULL;
		}
		if (b->p)
			continue;
		size_t n = pick_size(&w->rng);
		if (live + n > share) {
			if (!filled) {
				filled = true;
				end = now_s() + cfg.seconds;
				if (live > w->peak)
					w->peak = live;
			}
			continue;
		}
		b->p = alloc_touched(n);
		b->size = n;
		live += n;
		w->allocs++;
	}
	for (size_t i = 0; i < nslots; i++)
		if (slots[i].p) {
			free(slots[i].p);
			w->frees++;
		}
	free(slots);
	return NULL;
}

static size_t parse_size(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);
	size_t mult = 1;
	switch (*end) {
	case 'k':
	case 'K':
		mult = 1u << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mult = 1u << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mult = 1u << 30;
		end++;
		break;
	default:
		break;
	}
	if (end == s || *end || v < 0) {
		fprintf(stderr, "workload: invalid %s '%s' (bytes, or with K/M/G)\n", what, s);
		exit(2);
	}
	return (size_t)(v * (double)mult);
}

static void usage(void)
{
	fprintf(stderr, "usage: workload [-t THREADS] [-s SIZE] [-d SECONDS] [-k KEEP] "
	                "[-b BURST_SIZE] [-n BURST_COUNT]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "t:s:d:k:b:n:h")) != -1) {
		switch (opt) {
		case 't':
			cfg.threads = atoi(optarg);
			break;
		case 's':
			cfg.size = parse_size(optarg, "size");
			break;
		case 'd':
			cfg.seconds = strtod(optarg, NULL);
			break;
		case 'k':
			cfg.keep = parse_size(optarg, "keep");
			break;
		case 'b':
			cfg.burst_size = parse_size(optarg, "burst size");
			break;
		case 'n':
			cfg.burst_count = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc || cfg.threads < 1 || cfg.threads > 256 || cfg.seconds < 0 ||
	    cfg.burst_count < 1 || cfg.burst_size < 1)
		usage();

	/* Every thread inherits the blocked set; the main thread takes signals with sigwait. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);

	struct worker *w = calloc((size_t)cfg.threads, sizeof(*w));
	for (int i = 0; i < cfg.threads; i++) {
		w[i].index = i;
		w[i].rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
		if (pthread_create(&w[i].thread, NULL, worker_run, &w[i]) != 0) {
			fprintf(stderr, "workload: pthread_create failed\n");
			return 1;
		}
	}
	uint64_t allocs = 0;
	size_t filled = 0;
	for (int i = 0; i < cfg.threads; i++) {
		pthread_join(w[i].thread, NULL);
		allocs += w[i].allocs;
		filled += w[i].peak;
	}
	printf("quiet %llu allocations, filled %zu bytes\n", (unsigned long long)allocs, filled);
	fflush(stdout);

	void **burst = NULL;
	size_t nburst = 0;
	for (;;) {
		int sig;
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGUSR1) {
			burst = realloc(burst, (nburst + (size_t)cfg.burst_count) * sizeof(*burst));
			for (int i = 0; i < cfg.burst_count; i++)
				burst[nburst++] = alloc_touched(cfg.burst_size);
			printf("burst %zu\n", nburst);
		} else if (sig == SIGUSR2) {
			for (size_t i = 0; i < nburst; i++)
				free(burst[i]);
			printf("freed %zu\n", nburst);
			nburst = 0;
		} else {
			break;
		}
		fflush(stdout);
	}
	for (int i = 0; i < cfg.threads; i++) {
		for (size_t k = 0; k < w[i].nkeep; k++)
			free(w[i].keep[k].p);
		free(w[i].keep);
	}
	free(burst);
	free(w);
	return 0;
}
