/* mech_idle_heaps.c — mechanism 3 (release of idle heaps), issue 4: THREADS threads each
 * allocate MB MiB in BLOCK-byte blocks, then free all but the last block, and stay alive
 * while the main thread reads RSS and VSZ: at the start, at the peak, after the frees, and
 * after malloc_trim(0). malloc_trim is called only when the preloaded allocator itself
 * provides it (the symbol comes from the same object as malloc); otherwise "n/a".
 * usage: mech_idle_heaps THREADS MB [BLOCK]
 * prints: start_rss_kb=... peak_rss_kb=... freed_rss_kb=... freed_vsz_kb=...
 *         trim_rss_kb=... trim_vsz_kb=... start_vsz_kb=... elapsed=... */
#include "benchlib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define USAGE "THREADS MB [BLOCK]"

struct idle_shared {
	size_t bytes;              /* per thread */
	size_t block;              /* block size */
	pthread_barrier_t done;    /* allocations and frees finished */
	pthread_barrier_t release; /* main thread finished measuring */
	pthread_barrier_t peak;    /* every thread reached its peak */
};

static void *idle_run(void *arg)
{
	struct idle_shared *s = arg;
	size_t n = s->bytes / s->block;
	/* the pointer array comes from mmap so it does not disturb the measured heap */
	void **blocks = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
	                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (blocks == MAP_FAILED)
		bench_die("mmap");
	for (size_t i = 0; i < n; i++) {
		blocks[i] = malloc(s->block);
		if (!blocks[i])
			bench_die("malloc");
		memset(blocks[i], (int)(i & 0xff), s->block);
	}
	pthread_barrier_wait(&s->peak);
	pthread_barrier_wait(&s->peak);
	for (size_t i = 0; i + 1 < n; i++)
		free(blocks[i]);
	pthread_barrier_wait(&s->done);
	pthread_barrier_wait(&s->release);
	free(blocks[n - 1]);
	munmap(blocks, n * sizeof(void *));
	return NULL;
}

/* malloc_trim of the allocator that serves malloc, or NULL when it has none. */
static int (*idle_find_trim(void))(size_t)
{
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	void *t = dlsym(RTLD_DEFAULT, "malloc_trim");
	Dl_info mi, ti;
	if (!m || !t || !dladdr(m, &mi) || !dladdr(t, &ti))
		return NULL;
	if (!mi.dli_fname || !ti.dli_fname || strcmp(mi.dli_fname, ti.dli_fname) != 0)
		return NULL;
	int (*fn)(size_t);
	memcpy(&fn, &t, sizeof(fn));
	return fn;
}

int main(int argc, char **argv)
{
	long threads = bench_arg(argc, argv, 1, 2, USAGE);
	long mb = bench_arg(argc, argv, 2, 256, USAGE);
	long block = bench_arg(argc, argv, 3, 4000, USAGE);
	struct idle_shared s = {.bytes = (size_t)mb << 20, .block = (size_t)block};
	unsigned parties = (unsigned)threads + 1;
	pthread_barrier_init(&s.done, NULL, parties);
	pthread_barrier_init(&s.release, NULL, parties);
	pthread_barrier_init(&s.peak, NULL, parties);
	pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
	if (!tid)
		bench_die("calloc");
	long start_rss = bench_status_kb("VmRSS");
	long start_vsz = bench_status_kb("VmSize");
	double t0 = bench_now();
	for (long i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, idle_run, &s) != 0)
			bench_die("pthread_create");
	pthread_barrier_wait(&s.peak);
	long peak_rss = bench_status_kb("VmRSS");
	long peak_vsz = bench_status_kb("VmSize");
	pthread_barrier_wait(&s.peak);
	pthread_barrier_wait(&s.done);
	double elapsed = bench_now() - t0;
	long freed_rss = bench_status_kb("VmRSS");
	long freed_vsz = bench_status_kb("VmSize");
	int (*trim)(size_t) = idle_find_trim();
	char trim_rss[32] = "n/a", trim_vsz[32] = "n/a";
	if (trim) {
		trim(0);
		snprintf(trim_rss, sizeof(trim_rss), "%ld", bench_status_kb("VmRSS"));
		snprintf(trim_vsz, sizeof(trim_vsz), "%ld", bench_status_kb("VmSize"));
	}
	printf("start_rss_kb=%ld start_vsz_kb=%ld peak_rss_kb=%ld peak_vsz_kb=%ld "
	       "freed_rss_kb=%ld freed_vsz_kb=%ld trim_rss_kb=%s trim_vsz_kb=%s elapsed=%.6f\n",
	       start_rss, start_vsz, peak_rss, peak_vsz, freed_rss, freed_vsz, trim_rss, trim_vsz,
	       elapsed);
	pthread_barrier_wait(&s.release);
	for (long i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	free(tid);
	return 0;
}
