/* strbuild.c — many strings built at once by appending (the pattern of text grouped by key,
 * per-connection buffers, a parser's fields): STRINGS strings start empty together; each
 * step appends 1..16 bytes to a random string by realloc (so strings grow at different
 * rates) and writes them; a string that reached its length (random, 8..MAXLEN) is freed and
 * starts again with a new length. All strings pass through the small sizes at the start
 * together, then drift apart.
 * usage: strbuild STRINGS OPS [MAXLEN]
 * prints: ops_per_sec=... elapsed=... ops=... peak_rss_kb=... */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "STRINGS OPS [MAXLEN]"

int main(int argc, char **argv)
{
	long nstr = bench_arg(argc, argv, 1, 1000, USAGE);
	long ops = bench_arg(argc, argv, 2, 2000000, USAGE);
	long maxlen = bench_arg(argc, argv, 3, 2000, USAGE);
	if (maxlen < 8) { /* lengths are drawn from 8..MAXLEN */
		fprintf(stderr, "%s: bad argument '%s' (MAXLEN is at least 8)\nusage: %s %s\n",
		        argv[0], argv[3], argv[0], USAGE);
		return 2;
	}
	struct bench_rng rng;
	bench_rng_seed(&rng, 11);
	char **str = calloc((size_t)nstr, sizeof(*str));
	size_t *len = calloc((size_t)nstr, sizeof(*len));
	size_t *want = calloc((size_t)nstr, sizeof(*want));
	if (!str || !len || !want)
		bench_die("calloc");
	for (long k = 0; k < nstr; k++)
		want[k] = bench_rng_range(&rng, 8, (size_t)maxlen);
	double t0 = bench_now();
	for (long i = 0; i < ops; i++) {
		size_t k = bench_rng_range(&rng, 0, (size_t)nstr - 1);
		if (len[k] >= want[k]) {
			free(str[k]);
			str[k] = NULL;
			len[k] = 0;
			want[k] = bench_rng_range(&rng, 8, (size_t)maxlen);
		}
		size_t add = bench_rng_range(&rng, 1, 16);
		char *p = realloc(str[k], len[k] + add + 1);
		if (!p)
			bench_die("realloc");
		if (len[k] && p[len[k] - 1] != (char)('a' + k % 26)) {
			fprintf(stderr, "strbuild: contents lost\n");
			abort();
		}
		memset(p + len[k], 'a' + (int)(k % 26), add);
		len[k] += add;
		p[len[k]] = '\0';
		str[k] = p;
	}
	double elapsed = bench_now() - t0;
	long peak = bench_status_kb("VmHWM");
	for (long k = 0; k < nstr; k++)
		free(str[k]);
	free(str);
	free(len);
	free(want);
	bench_report(ops, elapsed, peak);
	return 0;
}
