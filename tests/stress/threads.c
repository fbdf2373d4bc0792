/* threads.c — creates and joins COUNT threads (each allocating and freeing a few blocks,
 * one of them cross-thread) and checks that resident memory grows by at most LIMIT_KIB
 * after a warm-up of 1000 threads: thread caches and arenas must be reused, not leaked.
 * Usage: threads [COUNT [LIMIT_KIB]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "procstatus.h"

static void *handed;

static void *worker(void *arg)
{
	void *p[8];
	for (int i = 0; i < 8; i++)
		p[i] = A(malloc)((size_t)16 << i);
	for (int i = 0; i < 8; i++)
		A(free)(p[i]);
	return A(malloc)(200); /* freed by the main thread */
}

static void run(int n)
{
	for (int i = 0; i < n; i++) {
		pthread_t t;
		void *ret;
		if (pthread_create(&t, NULL, worker, NULL) != 0) {
			perror("pthread_create");
			exit(1);
		}
		pthread_join(t, &ret);
		A(free)(ret);
	}
}

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 100000;
	long limit = argc > 2 ? atol(argv[2]) : 1024;
	(void)handed;
	run(1000);
	long before = status_kib("VmRSS:");
	run(count);
	long after = status_kib("VmRSS:");
	printf("threads: %d created and joined, RSS %ld -> %ld KiB (growth %ld KiB, limit %ld)\n",
	       count, before, after, after - before, limit);
	return after - before <= limit ? 0 : 1;
}
