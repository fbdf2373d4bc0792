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
 * "reused=N of M".
 *   cancel:  the blocks are made by a thread C that then waits in pthread_join for a thread
 *            that waits for main, and is cancelled there; a new thread takes C's arena
 *            (its first call frees one of the blocks) and waits in a barrier; main then
 *            frees and allocates as the worker above: C's count in pthread_join must not
 *            outlive it (that arena's thread does not wait in pthread_join: no lending)
 * Exit status 0 unless something failed (a line on stderr then).
 * usage: joinlend join|barrier|cancel */
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
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

static char task_state(pid_t tid);

/* main's scheduler state, from /proc/self/task/TID/stat (the field after the name) */
static char main_state(void)
{
	return task_state(main_tid);
}

static char task_state(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	/* open and read, not stdio: no allocation (a look of idle_lender while three threads
	 * live would keep main from borrowing for good: cancel) */
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("cannot open a task's stat");
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static int cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* frees 3 of every 4 blocks, allocates TAKEN and prints how many it freed before */
static void free_and_take(void);

/* The calling thread allocates and writes the BLOCKS blocks */
static void make_blocks(void)
{
	for (size_t i = 0; i < BLOCKS; i++) {
		if (!(blocks[i] = malloc(SIZE)))
			die("malloc");
		memset(blocks[i], 1, SIZE);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	while (main_state() != 'S') /* main waits (join or barrier) */
		sched_yield();
	free_and_take();
	if (use_barrier)
		pthread_barrier_wait(&counted);
	return NULL;
}

static void free_and_take(void)
{
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
}

static sem_t go_on;
static pid_t c_tid;

static void *waits_for_main(void *arg)
{
	while (sem_wait(&go_on))
		;
	return arg;
}

static void *maker(void *arg)
{
	c_tid = (pid_t)syscall(SYS_gettid);
	make_blocks();
	pthread_t s;
	if (pthread_create(&s, NULL, waits_for_main, NULL))
		die("pthread_create");
	*(pthread_t *)arg = s;
	pthread_join(s, NULL); /* cancelled here */
	die("the maker was not cancelled");
	return NULL;
}

static void *takes_over(void *arg)
{
	(void)arg;
	free(blocks[3]); /* the first call: the maker's arena, which no thread uses */
	blocks[3] = NULL;
	pthread_barrier_wait(&counted);
	pthread_barrier_wait(&counted); /* main frees and allocates meanwhile */
	return NULL;
}

static void *blocks_forever(void *arg)
{
	for (;;)
		sem_wait(arg);
	return NULL;
}

static void cancel_mode(void)
{
	static pthread_t s;
	pthread_t c, n, d;
	sem_t never;
	/* glibc's first pthread_cancel loads its unwinder (libgcc_s), allocating in main: done
	 * while main has a single thread beside it, as a look of idle_lender with three alive
	 * (main, the maker and the thread it waits for) would keep main from borrowing */
	if (sem_init(&never, 0, 0) || pthread_create(&d, NULL, blocks_forever, &never) ||
	    pthread_cancel(d) || pthread_join(d, NULL))
		die("the first cancel");
	if (sem_init(&go_on, 0, 0) || pthread_create(&c, NULL, maker, &s))
		die("set-up");
	while (!__atomic_load_n(&c_tid, __ATOMIC_ACQUIRE) || task_state(c_tid) != 'S' || !s)
		sched_yield(); /* the maker waits in pthread_join */
	if (pthread_cancel(c) || pthread_join(c, NULL))
		die("cancel");
	sem_post(&go_on);
	if (pthread_join(s, NULL) || pthread_create(&n, NULL, takes_over, NULL))
		die("join");
	pthread_barrier_wait(&counted); /* it has the maker's arena */
	free_and_take();
	pthread_barrier_wait(&counted);
	pthread_join(n, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 2 ||
	    (strcmp(argv[1], "join") && strcmp(argv[1], "barrier") && strcmp(argv[1], "cancel")))
		die("usage: joinlend join|barrier|cancel");
	use_barrier = !strcmp(argv[1], "barrier");
	main_tid = (pid_t)syscall(SYS_gettid);
	if (pthread_barrier_init(&counted, NULL, 2))
		die("pthread_barrier_init");
	if (!strcmp(argv[1], "cancel")) {
		cancel_mode();
		for (size_t i = 3; i < BLOCKS; i += 4)
			free(blocks[i]);
		return 0;
	}
	make_blocks();
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
