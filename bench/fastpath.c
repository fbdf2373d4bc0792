/* fastpath.c — the warm fast path for callgrind: after a warm-up, PAIRS malloc(SIZE) +
 * free pairs in a loop. Run under `valgrind --tool=callgrind` with two values of PAIRS;
 * (Ir(N2) - Ir(N1)) / (N2 - N1) is the instruction count of one pair, startup cancelled.
 * usage: fastpath PAIRS [SIZE]
 * prints: pairs=... */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>

#define USAGE "PAIRS [SIZE]"

int main(int argc, char **argv)
{
	long pairs = bench_arg(argc, argv, 1, 100000, USAGE);
	size_t size = (size_t)bench_arg(argc, argv, 2, 32, USAGE);
	void *volatile sink;
	for (int i = 0; i < 1000; i++) {
		sink = malloc(size);
		free(sink);
	}
	for (long i = 0; i < pairs; i++) {
		sink = malloc(size);
		free(sink);
	}
	printf("pairs=%ld\n", pairs);
	return 0;
}
