/* realloc_growth.c — realloc growth: BUFS buffers grow round-robin by 1..64 bytes per
 * realloc (the pattern of string builders and growing arrays), each written at its new
 * end; a buffer that reaches MAXBYTES is freed and restarts empty.
 * usage: realloc_growth BUFS OPS [MAXBYTES]
 * prints: ops_per_sec=... elapsed=... ops=... peak_rss_kb=... */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>

#define USAGE "BUFS OPS [MAXBYTES]"

int main(int argc, char **argv)
{
	long nbufs = bench_arg(argc, argv, 1, 64, USAGE);
	long ops = bench_arg(argc, argv, 2, 1000000, USAGE);
	long maxbytes = bench_arg(argc, argv, 3, 262144, USAGE);
	struct bench_rng rng;
	bench_rng_seed(&rng, 3);
	unsigned char **buf = calloc((size_t)nbufs, sizeof(*buf));
	size_t *len = calloc((size_t)nbufs, sizeof(*len));
	if (!buf || !len)
		bench_die("calloc");
	double t0 = bench_now();
	for (long i = 0; i < ops; i++) {
		size_t k = (size_t)(i % nbufs);
		size_t grow = bench_rng_range(&rng, 1, 64);
		if (len[k] + grow > (size_t)maxbytes) {
			free(buf[k]);
			buf[k] = NULL;
			len[k] = 0;
		}
		unsigned char *p = realloc(buf[k], len[k] + grow);
		if (!p)
			bench_die("realloc");
		if (len[k] && p[len[k] - 1] != (unsigned char)(len[k] - 1)) {
			fprintf(stderr, "realloc_growth: contents lost\n");
			abort();
		}
		for (size_t j = len[k]; j < len[k] + grow; j++)
			p[j] = (unsigned char)j;
		buf[k] = p;
		len[k] += grow;
	}
	double elapsed = bench_now() - t0;
	long peak = bench_status_kb("VmHWM");
	for (long k = 0; k < nbufs; k++)
		free(buf[k]);
	free(buf);
	free(len);
	bench_report(ops, elapsed, peak);
	return 0;
}
