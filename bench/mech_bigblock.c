/* mech_bigblock.c — mechanism 2 (dynamic mmap threshold and the large-mapping cache),
 * issue 4: THREADS threads each do ITER times { malloc(MB MiB), touch every page,
 * free }. Reports time and minor page faults in total and per iteration after the first
 * (warm-up) iteration of every thread.
 * usage: mech_bigblock THREADS MB ITER
 * prints: ops_per_sec=... elapsed=... minflt=... faults_per_iter=... peak_rss_kb=... */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define USAGE "THREADS MB ITER"

struct big_args {
	size_t size;
	long iter;
	pthread_barrier_t *warm; /* every thread finished its first iteration */
};

static long big_warm_faults;

static void *big_run(void *arg)
{
	struct big_args *a = arg;
	for (long i = 0; i < a->iter; i++) {
		void *p = malloc(a->size);
		if (!p)
			bench_die("malloc");
		bench_touch(p, a->size, (unsigned char)(i + 1));
		free(p);
		if (i == 0 && pthread_barrier_wait(a->warm) == PTHREAD_BARRIER_SERIAL_THREAD)
			big_warm_faults = bench_minflt();
		if (i == 0)
			pthread_barrier_wait(a->warm);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = bench_arg(argc, argv, 1, 2, USAGE);
	long mb = bench_arg(argc, argv, 2, 4, USAGE);
	long iter = bench_arg(argc, argv, 3, 100, USAGE);
	pthread_barrier_t warm;
	pthread_barrier_init(&warm, NULL, (unsigned)threads);
	struct big_args a = {.size = (size_t)mb << 20, .iter = iter, .warm = &warm};
	pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
	if (!tid)
		bench_die("calloc");
	long flt0 = bench_minflt();
	double t0 = bench_now();
	for (long i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, big_run, &a) != 0)
			bench_die("pthread_create");
	for (long i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	double elapsed = bench_now() - t0;
	long flt = bench_minflt();
	double per_iter =
	        iter > 1 ? (double)(flt - big_warm_faults) / ((double)threads * (double)(iter - 1))
	                 : 0.0;
	printf("ops_per_sec=%.1f elapsed=%.6f minflt=%ld faults_per_iter=%.1f peak_rss_kb=%ld\n",
	       (double)threads * (double)iter / elapsed, elapsed, flt - flt0, per_iter,
	       bench_status_kb("VmHWM"));
	free(tid);
	pthread_barrier_destroy(&warm);
	return 0;
}
