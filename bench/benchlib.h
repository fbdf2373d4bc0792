/* benchlib.h — helpers shared by the benchmark workloads in bench/: a deterministic PRNG,
 * a monotonic clock, /proc/self/status readers and argument parsing. Workloads use only
 * the plain malloc API so that any preloaded allocator can be measured the same way. */
#ifndef BENCHLIB_H
#define BENCHLIB_H

#include <stddef.h>
#include <stdint.h>

/* xorshift64* generator: deterministic for a given seed, one per thread. */
struct bench_rng {
	uint64_t state; /* never 0 */
};

void bench_rng_seed(struct bench_rng *rng, uint64_t seed);
uint64_t bench_rng_next(struct bench_rng *rng);
/* Uniform in [lo, hi] (inclusive); hi >= lo. */
size_t bench_rng_range(struct bench_rng *rng, size_t lo, size_t hi);

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);

/* A field of /proc/self/status in kB ("VmHWM", "VmRSS", "VmSize"), or -1. */
long bench_status_kb(const char *field);
/* At exit, print "peak_rss_kb=N": the process's VmHWM then, as /proc/self/status sums the
 * kernel's per-CPU RSS counters (ru_maxrss reads them unsummed: hundreds of KiB off for a
 * program of a few MiB). Written with write(2), so it may come before buffered stdout. */
void bench_report_peak_at_exit(void);
/* Print "ops_per_sec=... elapsed=... ops=... peak_rss_kb=PEAK_KB": a workload that read its
 * peak (VmHWM) when its timed loop ended, before it frees what it built. */
void bench_report(long ops, double elapsed, long peak_kb);
/* Minor page faults of the whole process so far (getrusage RUSAGE_SELF). */
long bench_minflt(void);

/* Parse argv[index] as a whole number from 1 to BENCH_ARG_MAX (k/m/g suffixes: thousands,
 * millions, billions), or return def when the argument is absent. usage names the arguments
 * ("SLOTS OPS [MAX_B]": a word each). On bad input (not a number, out of range, more
 * arguments than usage has words) prints what was wrong, naming the argument, and the usage
 * line, and exits with status 2. */
#define BENCH_ARG_MAX (1L << 40) /* MiB and KiB arguments are shifted: no overflow */
long bench_arg(int argc, char **argv, int index, long def, const char *usage);
/* Exit with status 2, saying so and the usage line, when hi (named hi_name) is below lo
 * (lo_name): two arguments that bound a range. */
void bench_arg_order(char **argv, const char *usage, const char *lo_name, long lo,
                     const char *hi_name, long hi);
/* The same with the range [lo, hi] (lo may be 0: a flag). */
long bench_arg_range(int argc, char **argv, int index, long def, long lo, long hi,
                     const char *usage);

/* Touch one byte per page of [p, p + len) so the memory is really resident. */
void bench_touch(void *p, size_t len, unsigned char value);
/* malloc n blocks of size bytes into batch (writing each one's first and last byte, the
 * last with tag), then free them in allocation order. Dies if malloc fails. */
void bench_batch(void **batch, int n, size_t size, unsigned char tag);

/* Per-thread records that their threads write: each on cache lines of its own (declare the
 * type with BENCH_LINE_ALIGNED), so the harness does not measure false sharing between its
 * own workers, which would depend on where the allocator under test put the array.
 * Zeroed; dies on failure. */
#define BENCH_LINE         128 /* two lines: the adjacent-line prefetcher pairs them */
#define BENCH_LINE_ALIGNED __attribute__((aligned(BENCH_LINE)))
void *bench_workers(size_t n, size_t size);

/* Abort with a one-line message (workloads treat allocation failure as a failed run). */
void bench_die(const char *what) __attribute__((noreturn));

#endif
