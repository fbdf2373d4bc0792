/* forks.c — FORKS forks from a process whose THREADS threads keep allocating; each child
 * allocates, frees blocks of the parent and exits. A child that does not finish within
 * 10 s counts as a hang (the run fails). Usage: forks [FORKS [THREADS]] */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"

static int stop; /* atomic */

static void *churn(void *arg)
{
	unsigned s = (unsigned)(size_t)arg;
	void *keep[64] = {0};
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int i = (int)(rand_r(&s) % 64);
		A(free)(keep[i]);
		keep[i] = A(malloc)(rand_r(&s) % 3 ? rand_r(&s) % 2048 : rand_r(&s) % 300000);
	}
	for (int i = 0; i < 64; i++)
		A(free)(keep[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	int forks = argc > 1 ? atoi(argv[1]) : 1000;
	int nthreads = argc > 2 ? atoi(argv[2]) : 4;
	pthread_t t[64];
	for (int i = 0; i < nthreads && i < 64; i++)
		pthread_create(&t[i], NULL, churn, (void *)(size_t)(i + 1));
	int hangs = 0, bad = 0;
	char *parent_block = A(malloc)(1000);
	strcpy(parent_block, "parent");
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(10);
			char *p = A(malloc)(100 + (size_t)i);
			void *big = A(malloc)(1 << 20);
			int ok = strcmp(parent_block, "parent") == 0;
			A(free)(parent_block); /* a block of the parent's arena */
			A(free)(p);
			A(free)(big);
			exit(ok ? 0 : 3);
		}
		int st;
		if (waitpid(pid, &st, 0) < 0)
			bad++;
		else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
			hangs++;
		else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads && i < 64; i++)
		pthread_join(t[i], NULL);
	A(free)(parent_block);
	printf("forks: %d forks with %d threads allocating: %d hangs, %d failures\n", forks,
	       nthreads, hangs, bad);
	return hangs || bad ? 1 : 0;
}
