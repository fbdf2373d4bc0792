/* benchlib.c — see benchlib.h. Nothing here allocates through malloc but bench_batch, a
 * workload step: bench_status_kb reads /proc/self/status into a stack buffer, so reading
 * a peak adds nothing to it. */
#include "benchlib.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

void bench_rng_seed(struct bench_rng *rng, uint64_t seed)
{
	/* splitmix64 scrambles small seeds into a well-mixed non-zero state */
	uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	rng->state = z ? z : 0x2545f4914f6cdd1dULL;
}

uint64_t bench_rng_next(struct bench_rng *rng)
{
	uint64_t x = rng->state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng->state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

size_t bench_rng_range(struct bench_rng *rng, size_t lo, size_t hi)
{
	return lo + (size_t)(bench_rng_next(rng) % (uint64_t)(hi - lo + 1));
}

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

long bench_status_kb(const char *field)
{
	char buf[8192];
	size_t len = 0, flen = strlen(field);
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = 0;
	for (char *line = buf; *line; line++) {
		if (strncmp(line, field, flen) == 0 && line[flen] == ':')
			return strtol(line + flen + 1, NULL, 10);
		line = strchr(line, '\n');
		if (!line)
			break;
	}
	return -1;
}

static void report_peak(void)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "peak_rss_kb=%ld\n", bench_status_kb("VmHWM"));
	if (write(STDOUT_FILENO, line, (size_t)n) != n)
		_exit(1);
}

void bench_report_peak_at_exit(void)
{
	if (atexit(report_peak) != 0)
		bench_die("atexit");
}

long bench_minflt(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ru.ru_minflt;
}

static void copy_word(char *dst, size_t cap, const char *src, size_t n)
{
	size_t i = 0;
	for (; i < n && i < cap - 1; i++)
		dst[i] = src[i];
	dst[i] = 0;
}

/* The number of words of USAGE (brackets left out): the most arguments the program takes;
 * with name, the INDEX-th word (1-based) into it, or "argument". Plain loops, no libc call
 * (the bench's whole-program instruction rows count the program's own); the name is
 * looked up only for a message. */
static int usage_word(const char *usage, int index, char *name, size_t cap)
{
	int words = 0;
	if (name)
		copy_word(name, cap, "argument", 8);
	for (const char *p = usage; *p;) {
		while (*p == ' ' || *p == '[' || *p == ']')
			p++;
		if (!*p)
			break;
		size_t n = 0;
		while (p[n] && p[n] != ' ' && p[n] != '[' && p[n] != ']')
			n++;
		if (++words == index && name)
			copy_word(name, cap, p, n);
		p += n;
	}
	return words;
}

long bench_arg_range(int argc, char **argv, int index, long def, long lo, long hi,
                     const char *usage)
{
	char name[64];
	char *end;
	long v, mult = 1;
	int words = usage_word(usage, index, NULL, 0);
	if (argc - 1 > words) {
		fprintf(stderr, "%s: too many arguments (%d; at most %d)\nusage: %s %s\n", argv[0],
		        argc - 1, words, argv[0], usage);
		exit(2);
	}
	if (index >= argc)
		return def;
	errno = 0;
	v = strtol(argv[index], &end, 10);
	if (*end == 'k' || *end == 'K')
		mult = 1000, end++;
	else if (*end == 'm' || *end == 'M')
		mult = 1000000, end++;
	else if (*end == 'g' || *end == 'G')
		mult = 1000000000, end++;
	if (argv[index][0] < '0' || argv[index][0] > '9' || *end != '\0') {
		usage_word(usage, index, name, sizeof(name));
		fprintf(stderr,
		        "%s: bad %s '%s': a whole number (k, m, g: thousands, millions, "
		        "billions)\nusage: %s %s\n",
		        argv[0], name, argv[index], argv[0], usage);
		exit(2);
	}
	if (errno == ERANGE || v > LONG_MAX / mult || v * mult < lo || v * mult > hi) {
		usage_word(usage, index, name, sizeof(name));
		fprintf(stderr, "%s: %s '%s' out of range: %ld to %ld\nusage: %s %s\n", argv[0],
		        name, argv[index], lo, hi, argv[0], usage);
		exit(2);
	}
	return v * mult;
}

void bench_arg_order(char **argv, const char *usage, const char *lo_name, long lo,
                     const char *hi_name, long hi)
{
	if (hi >= lo)
		return;
	fprintf(stderr, "%s: %s %ld is below %s %ld\nusage: %s %s\n", argv[0], hi_name, hi, lo_name,
	        lo, argv[0], usage);
	exit(2);
}

long bench_arg(int argc, char **argv, int index, long def, const char *usage)
{
	return bench_arg_range(argc, argv, index, def, 1, BENCH_ARG_MAX, usage);
}

void bench_batch(void **batch, int n, size_t size, unsigned char tag)
{
	for (int i = 0; i < n; i++) {
		unsigned char *p = malloc(size);
		if (!p)
			bench_die("malloc");
		p[0] = (unsigned char)i;
		p[size - 1] = tag;
		batch[i] = p;
	}
	for (int i = 0; i < n; i++)
		free(batch[i]);
}

void bench_touch(void *p, size_t len, unsigned char value)
{
	volatile unsigned char *b = p;
	for (size_t off = 0; off < len; off += 4096)
		b[off] = value;
	if (len)
		b[len - 1] = value;
}

void *bench_workers(size_t n, size_t size)
{
	size_t bytes;
	if (size % BENCH_LINE || __builtin_mul_overflow(n, size, &bytes))
		bench_die("bench_workers");
	void *p = aligned_alloc(BENCH_LINE, bytes);
	if (!p)
		bench_die("aligned_alloc");
	memset(p, 0, bytes);
	return p;
}

void bench_die(const char *what)
{
	fprintf(stderr, "bench: %s failed\n", what);
	abort();
}

void bench_report(long ops, double elapsed, long peak_kb)
{
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%ld peak_rss_kb=%ld\n", (double)ops / elapsed,
	       elapsed, ops, peak_kb);
}
