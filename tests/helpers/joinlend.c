/* joinlend.c — a thread that frees the blocks of a thread waiting for it in pthread_join
 * takes those blocks back before it carves new pages (liballoc/src/arena.c, idle_lender;
 * larson's shape: main allocates the working set, each generation's worker frees it and
 * allocates its own). The main thread allocates BLOCKS blocks of SIZE bytes (4 MiB: more
 * than the 2 MiB an arena needs in spans to lend), starts a worker and waits for it:
 *   join:    in pthread_join
 *   barrier: in a pthread barrier (not a proof that it allocates nothing: no lending),
 *            and joins once the worker has counted
 * The worker first waits until main sleeps (its /proc state 'S'), then frees 3 of every 4
 * of main's blocks (every span keeps blocks: freed blocks, no free pages) and allocates a
 * quarter as many blocks of SIZE; it prints how many of them are blocks it freed:
 * "reused=N of M". Exit status 0 unless something failed (a line on stderr then).
 * usage: joinlend join|barrier */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { BLOCKS = 4096, SIZE = 1024, TAKEN = BLOCKS / 4 };

static void *blocks[BLOCKS];
static uintptr_t freed[BLOCKS];
static size_t nfreed;
static void *taken[TAKEN];
static pid_t main_tid;
static bool use_barrier;
static pthread_barrier_t counted;

static void die(const char *what)
{
	fprintf(stderr, "joinlend: %s\n", what);
	exit(1);
}

/* main's scheduler state, from /proc/self/task/TID/stat (the field after the name) */
static char main_state(void)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)main_tid);
	FILE *f = fopen(path, "r");
	if (!f)
		die("cannot open main's stat");
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static int cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static void *worker(void *arg)
{
	(void)arg;
	while (main_state() != 'S') /* main waits (join or barrier) */
		sched_yield();
	for (size_t i = 0; i < BLOCKS; i++)
		if (i % 4 != 3) {
			freed[nfreed++] = (uintptr_t)blocks[i];
			free(blocks[i]);
		}
	qsort(freed, nfreed, sizeof(freed[0]), cmp);
	int reused = 0;
	for (int i = 0; i < TAKEN; i++) {
		if (!(taken[i] = malloc(SIZE)))
			die("malloc");
		memset(taken[i], 2, SIZE);
		uintptr_t key = (uintptr_t)taken[i];
		reused += bsearch(&key, freed, nfreed, sizeof(freed[0]), cmp) != NULL;
	}
	printf("reused=%d of %d\n", reused, TAKEN);
	fflush(stdout);
	for (int i = 0; i < TAKEN; i++)
		free(taken[i]);
	if (use_barrier)
		pthread_barrier_wait(&counted);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "join") && strcmp(argv[1], "barrier")))
		die("usage: joinlend join|barrier");
	use_barrier = !strcmp(argv[1], "barrier");
	main_tid = (pid_t)syscall(SYS_gettid);
	for (size_t i = 0; i < BLOCKS; i++) {
		if (!(blocks[i] = malloc(SIZE)))
			die("malloc");
		memset(blocks[i], 1, SIZE);
	}
	if (pthread_barrier_init(&counted, NULL, 2))
		die("pthread_barrier_init");
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL))
		die("pthread_create");
	if (use_barrier)
		pthread_barrier_wait(&counted);
	if (pthread_join(t, NULL))
		die("pthread_join");
	for (size_t i = 3; i < BLOCKS; i += 4)
		free(blocks[i]);
	return 0;
}
