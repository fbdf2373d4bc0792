/* mech_madvise.c — mechanism 1 (madvise throttling), issue 4: a second thread does
 * malloc(48 * 4096), touches every page, frees it, ITER times (1024 in the issue). Run it
 * with the thresholds pinned (GLIBC_TUNABLES / LIBALLOC_*) and count madvise calls with
 * strace -f -c; the program itself reports time and page faults.
 * usage: mech_madvise [ITER] [PAGES]
 * prints: ops_per_sec=... elapsed=... minflt=... */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define USAGE "[ITER] [PAGES]"

struct madv_args {
	long iter;
	size_t size;
};

static void *madv_run(void *arg)
{
	struct madv_args *a = arg;
	for (long i = 0; i < a->iter; i++) {
		void *p = malloc(a->size);
		if (!p)
			bench_die("malloc");
		bench_touch(p, a->size, (unsigned char)i);
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct madv_args a;
	a.iter = bench_arg(argc, argv, 1, 1024, USAGE);
	a.size = (size_t)bench_arg(argc, argv, 2, 48, USAGE) * 4096;
	pthread_t tid;
	long flt0 = bench_minflt();
	double t0 = bench_now();
	if (pthread_create(&tid, NULL, madv_run, &a) != 0)
		bench_die("pthread_create");
	pthread_join(tid, NULL);
	double elapsed = bench_now() - t0;
	printf("ops_per_sec=%.0f elapsed=%.6f minflt=%ld\n", (double)a.iter / elapsed, elapsed,
	       bench_minflt() - flt0);
	return 0;
}
