/* lastthread.c — processes that end because their last thread exits (glibc calls exit(0)
 * then), which liballoc's control thread must not keep alive. Each round forks a child
 * that ends that way; the parent reaps it within a deadline and checks its status.
 *   main-exit:  the child's main thread starts two threads that allocate, then all three
 *               exit at the same moment (main through pthread_exit)
 *   fork-thread: the child is forked from a non-main thread; there it starts a thread,
 *               and both exit at the same moment (the case of CPython's test_threading)
 * usage: lastthread main-exit|fork-thread ROUNDS
 * Exit status 0 when every child ended with status 0 in time; 1 (with a line on stderr)
 * otherwise. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_MS 60000 /* generous: a loaded machine is slow; a kept-alive child never ends */

static pthread_barrier_t together;
static void *volatile sink;

static void churn(void)
{
	for (int i = 0; i < 1000; i++) {
		void *p = malloc(16 + (size_t)i % 512);
		if (!p)
			abort();
		sink = p;
		free(p);
	}
}

static void *allocating_thread(void *arg)
{
	(void)arg;
	churn();
	pthread_barrier_wait(&together);
	return NULL;
}

/* Start n allocating threads, then leave with them (detached: nobody joins). */
static void leave_with(unsigned n)
{
	pthread_barrier_init(&together, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, allocating_thread, NULL) != 0)
			_exit(3);
		pthread_detach(t);
	}
	churn();
	pthread_barrier_wait(&together);
	pthread_exit(NULL);
}

static void *forking_thread(void *arg)
{
	(void)arg;
	pid_t pid = fork();
	if (pid == 0)
		leave_with(1); /* the child's only thread is this one */
	return (void *)(intptr_t)pid;
}

static pid_t start_child(const char *mode)
{
	if (strcmp(mode, "main-exit") == 0) {
		pid_t pid = fork();
		if (pid == 0)
			leave_with(2);
		return pid;
	}
	pthread_t t;
	void *ret;
	if (pthread_create(&t, NULL, forking_thread, NULL) != 0 || pthread_join(t, &ret) != 0)
		return -1;
	return (pid_t)(intptr_t)ret;
}

/* Reap pid within the deadline: its status, or -1 (killed after the deadline). */
static int reap(pid_t pid)
{
	for (int waited = 0; waited < DEADLINE_MS; waited++) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		if (r < 0)
			return -2;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "main-exit") && strcmp(argv[1], "fork-thread")) ||
	    atoi(argv[2]) <= 0) {
		fprintf(stderr, "usage: lastthread main-exit|fork-thread ROUNDS\n");
		return 2;
	}
	int rounds = atoi(argv[2]);
	churn();
	for (int i = 0; i < rounds; i++) {
		pid_t pid = start_child(argv[1]);
		if (pid < 0) {
			fprintf(stderr, "round %d: cannot start the child\n", i);
			return 1;
		}
		int status = reap(pid);
		if (status == -1) {
			fprintf(stderr, "round %d: the child did not end within %d ms\n", i,
			        DEADLINE_MS);
			return 1;
		}
		if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "round %d: the child ended with status %#x\n", i, status);
			return 1;
		}
	}
	return 0;
}
