/* interpose_seq.c — a known sequence of allocator calls, for tests/e2e/interpose.bats: run
 * under LD_PRELOAD="libcountshim.so <allocator>", it makes the sequence twice (the first
 * sets everything up) and prints what the shim counted of the second (this thread's calls)
 * beside what the program made; exits 0 when they are the same. Reallocs that move a small
 * block, grow one past the classes, shrink a large one, start from NULL and free (size 0);
 * reallocarray (not interposed by the shim: seen as the realloc it is, as glibc's calls
 * realloc), calloc and the three aligned allocations. `interpose_seq thread` creates and
 * joins a thread twice and prints the second's counts, the creating thread's and the new
 * thread's at its start (the allocator's pthread_create is not the program's malloc; the
 * test compares them with glibc's, whose own are its TLS's). */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/shim/countshim.h"

static void *volatile sink[8];

static void use(int i, void *p, size_t n)
{
	if (!p) {
		fprintf(stderr, "allocation %d failed\n", i);
		exit(3);
	}
	memset(p, i, n);
	sink[i] = p;
}

static void sequence(void)
{
	void *a = malloc(24);
	use(0, a, 24);
	a = realloc(a, 200); /* a small block moved */
	use(0, a, 200);
	a = realloc(a, 20000); /* past the classes */
	use(0, a, 20000);
	a = realloc(a, 100); /* a large block shrunk */
	use(0, a, 100);
	void *b = realloc(NULL, 50);
	use(1, b, 50);
	b = reallocarray(b, 30, 10);
	use(1, b, 300);
	void *c = calloc(10, 100);
	use(2, c, 1000);
	void *d = NULL;
	if (posix_memalign(&d, 64, 100))
		d = NULL;
	use(3, d, 100);
	void *e = aligned_alloc(256, 512);
	use(4, e, 512);
	void *f = memalign(4096, 10);
	use(5, f, 10);
	if (realloc(b, 0) != NULL)
		exit(4);
	free(a);
	free(c);
	free(d);
	free(e);
	free(f);
	free(NULL);
}

#define FMT                                                                                \
	"malloc %lu free %lu calloc %lu realloc %lu posix_memalign %lu aligned_alloc %lu " \
	"memalign %lu"
#define ARGS(c) c.malloc, c.free, c.calloc, c.realloc, c.posix_memalign, c.aligned_alloc, c.memalign

static void (*get)(struct countshim_counts *);
static struct countshim_counts at_start;

static void *thread_fn(void *arg)
{
	get(&at_start);
	return arg;
}

/* The calls counted between before and after. */
static struct countshim_counts counted(const struct countshim_counts *before,
                                       const struct countshim_counts *after)
{
	return (struct countshim_counts){
	        after->malloc - before->malloc,
	        after->free - before->free,
	        after->calloc - before->calloc,
	        after->realloc - before->realloc,
	        after->posix_memalign - before->posix_memalign,
	        after->aligned_alloc - before->aligned_alloc,
	        after->memalign - before->memalign,
	};
}

static int threads(void)
{
	struct countshim_counts before, after;
	for (int i = 0; i < 2; i++) {
		pthread_t t;
		get(&before);
		if (pthread_create(&t, NULL, thread_fn, NULL) || pthread_join(t, NULL))
			return 3;
		get(&after);
	}
	struct countshim_counts n = counted(&before, &after);
	printf("creator " FMT "\n", ARGS(n));
	printf("thread  " FMT "\n", ARGS(at_start));
	return 0;
}

int main(int argc, char **argv)
{
	get = (void (*)(struct countshim_counts *))dlsym(RTLD_DEFAULT, "countshim_get");
	if (!get) {
		printf("no countshim_get: preload libcountshim.so\n");
		return 2;
	}
	printf("liballoc %s\n", dlsym(RTLD_DEFAULT, "liballoc_stats") ? "yes" : "no");
	fflush(stdout);
	if (argc > 1 && !strcmp(argv[1], "thread"))
		return threads();
	sequence();
	struct countshim_counts before, after,
	        made = {
	                .malloc = 1,
	                .free = 6,
	                .calloc = 1,
	                .realloc = 6, /* five and reallocarray's */
	                .posix_memalign = 1,
	                .aligned_alloc = 1,
	                .memalign = 1,
	        };
	get(&before);
	sequence();
	get(&after);
	struct countshim_counts n = counted(&before, &after);
	printf("counted " FMT "\n", ARGS(n));
	printf("made    " FMT "\n", ARGS(made));
	return memcmp(&n, &made, sizeof(n)) != 0;
}
