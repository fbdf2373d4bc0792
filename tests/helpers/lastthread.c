/* lastthread.c — processes that end because their last thread exits (glibc calls exit(0)
 * then), which liballoc's control thread must not keep alive. Each round forks a child
 * that ends that way; the parent reaps it within a deadline and checks its status.
 *   main-exit:  the child's main thread starts two threads that allocate, then all three
 *               exit at the same moment (main through pthread_exit)
 *   fork-thread: the child is forked from a non-main thread; there it starts a thread,
 *               and both exit at the same moment (the case of CPython's test_threading)
 *   idle-thread: the child's main thread allocates, starts a thread that never calls the
 *               allocator and only sleeps IDLE_MS, then leaves through pthread_exit: the
 *               child ends when that thread does (not before it)
 *   idle-term:  the same, but the thread sleeps a minute and the parent sends SIGTERM
 *               once main has left: the child must die of it at once
 *   idle-blocked: the sleeping thread (IDLE_MS) blocks SIGTERM, which the parent sends once
 *               main has left: nobody can take it until the thread is gone; the child
 *               must then end (of the signal, or with status 0 as without liballoc)
 *   generations: the child's main thread starts GENERATIONS allocating threads one after
 *               another, joins each and pauses GAP_MS before the next (a thread exit while
 *               main runs: the control thread has nothing to look for), then asks
 *               access("lastthread-generations-done") (a marker for strace) and leaves
 *               with one more thread as in main-exit
 * usage: lastthread main-exit|fork-thread|idle-thread|idle-term|idle-blocked|generations ROUNDS
 * Exit status 0 when every child ended with status 0 in time; 1 (with a line on stderr)
 * otherwise. */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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

#define IDLE_MS 2500 /* longer than the control thread's old 1 + 2 + ... + 1024 ms watch */

static void *sleeping_thread(void *arg)
{
	long ms = (long)(intptr_t)arg;
	if (ms < 0) { /* idle-blocked */
		sigset_t term;
		sigemptyset(&term);
		sigaddset(&term, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &term, NULL);
		ms = -ms;
	}
	/* no allocator call: nanosleep only */
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0)
		;
	return NULL;
}

static pid_t start_idle_child(long sleep_ms)
{
	pid_t pid = fork();
	if (pid == 0) {
		churn();
		pthread_t t;
		if (pthread_create(&t, NULL, sleeping_thread, (void *)(intptr_t)sleep_ms) != 0)
			_exit(3);
		pthread_exit(NULL);
	}
	return pid;
}

/* Has pid's main thread left (a zombie leader)? */
static bool main_left(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'Z';
}

#define GENERATIONS 20
#define GAP_MS      5 /* past the control thread's old checks 1 and 2 ms after an exit */

static void *churning_thread(void *arg)
{
	(void)arg;
	churn();
	return NULL;
}

static void generations(void)
{
	for (int g = 0; g < GENERATIONS; g++) {
		pthread_t t;
		if (pthread_create(&t, NULL, churning_thread, NULL) != 0 ||
		    pthread_join(t, NULL) != 0)
			_exit(3);
		nanosleep(&(struct timespec){0, GAP_MS * 1000000}, NULL);
	}
	(void)access("lastthread-generations-done", F_OK);
	leave_with(1);
}

static pid_t start_child(const char *mode)
{
	if (strcmp(mode, "idle-thread") == 0)
		return start_idle_child(IDLE_MS);
	if (strcmp(mode, "idle-term") == 0 || strcmp(mode, "idle-blocked") == 0) {
		pid_t pid = start_idle_child(strcmp(mode, "idle-term") == 0 ? 60000 : -IDLE_MS);
		for (int i = 0; i < 10000 && pid > 0 && !main_left(pid); i++)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
		if (pid > 0)
			kill(pid, SIGTERM);
		return pid;
	}
	if (strcmp(mode, "main-exit") == 0 || strcmp(mode, "generations") == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			if (strcmp(mode, "generations") == 0)
				generations();
			leave_with(2);
		}
		return pid;
	}
	pthread_t t;
	void *ret;
	if (pthread_create(&t, NULL, forking_thread, NULL) != 0 || pthread_join(t, &ret) != 0)
		return -1;
	return (pid_t)(intptr_t)ret;
}

/* Reap pid within the deadline: its status, or -1 (killed after the deadline). */
static int reap(pid_t pid, int deadline_ms)
{
	for (int waited = 0; waited < deadline_ms; waited++) {
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
	static const char *const modes[] = {"main-exit", "fork-thread",  "idle-thread",
	                                    "idle-term", "idle-blocked", "generations"};
	int mode = -1;
	for (int m = 0; argc == 3 && m < 6; m++)
		if (strcmp(argv[1], modes[m]) == 0)
			mode = m;
	if (mode < 0 || atoi(argv[2]) <= 0) {
		fprintf(stderr, "usage: lastthread main-exit|fork-thread|idle-thread|idle-term|"
		                "idle-blocked|generations ROUNDS\n");
		return 2;
	}
	int rounds = atoi(argv[2]);
	churn();
	for (int i = 0; i < rounds; i++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		pid_t pid = start_child(argv[1]);
		if (pid < 0) {
			fprintf(stderr, "round %d: cannot start the child\n", i);
			return 1;
		}
		int deadline = DEADLINE_MS + (mode == 2 || mode == 4 ? IDLE_MS : 0);
		int status = reap(pid, deadline);
		if (status == -1) {
			fprintf(stderr, "round %d: the child did not end within %d ms\n", i,
			        deadline);
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (mode == 3) {
			if (status < 0 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) {
				fprintf(stderr,
				        "round %d: the child ended with status %#x, not SIGTERM\n",
				        i, status);
				return 1;
			}
			continue;
		}
		if (mode == 4 && status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)
			continue;
		if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "round %d: the child ended with status %#x\n", i, status);
			return 1;
		}
		if (mode == 2 && ms < IDLE_MS) {
			fprintf(stderr,
			        "round %d: the child ended after %ld ms, before its thread\n", i,
			        ms);
			return 1;
		}
	}
	return 0;
}
