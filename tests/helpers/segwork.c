/* segwork.c — a scriptable preloaded process for the segment suite: it reads one command
 * per line on stdin and answers each with "PID ok SEQ WORD" on stdout (flushed), so the
 * test decides exactly when it allocates, frees, forks or execs. Between commands the main
 * thread sits in read(2). Allocation goes through tests/api/api.h (A(malloc)).
 *
 *   alloc SIZE N [T]  allocate N blocks of SIZE bytes, touch every page (or the first T
 *                     bytes of each), hold them
 *   free              free every held block (and the list that held them)
 *   reserve N         size the list of held blocks for N entries now (so that later allocs
 *                     allocate nothing but their blocks)
 *   churn SIZE N      allocate N blocks of SIZE then free them all (fills the thread cache)
 *   sleeper SIZE N    start a thread that churns N blocks of SIZE, then blocks in read(2)
 *                     on a pipe nobody writes; answered once it is about to block
 *   fork FIFO         fork; the child reads its commands from FIFO (opened after the fork)
 *                     and announces itself with "PID child of PPID"
 *   forks N           fork N children one after the other, each of which looks at once
 *                     whether its segment is named (liballoc_segment_path) and exits;
 *                     prints "forks unnamed=U late=L named=K" (late: the look came 40 ms
 *                     or more after the fork, too late to tell) before the answer
 *   setuid ID         setgid(ID) then setuid(ID) (as root: drops to that user)
 *   chroot DIR        chroot(DIR) and chdir("/")
 *   closefrom         close every descriptor from 3 up (liballoc's too, as sshd does)
 *   exec PROG [ARG..] execv PROG keeping the environment (LD_PRELOAD included)
 *   exec-bare PROG..  execv PROG without LD_PRELOAD
 *   exit | _exit      exit(0) | _exit(0)
 * An unknown or malformed command answers "PID error SEQ ..." and the loop goes on. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "liballoc.h"

#pragma weak liballoc_segment_path /* resolved at run time: liballoc is preloaded */

#define PAGE       4096
#define MAX_ARGS   16
#define LINE_BYTES 1024

static void **held;
static size_t nheld, capheld;
static unsigned long seq;

static void say(const char *what, const char *word)
{
	printf("%d %s %lu %s\n", (int)getpid(), what, seq, word);
	fflush(stdout);
}

static void touch(char *p, size_t n)
{
	for (size_t i = 0; i < n; i += PAGE)
		p[i] = (char)i;
	if (n)
		p[n - 1] = 1;
}

static void *must_alloc(size_t n)
{
	void *p = A(malloc)(n);
	if (!p) {
		fprintf(stderr, "segwork: malloc(%zu): %s\n", n, strerror(errno));
		exit(1);
	}
	return p;
}

static void reserve(size_t cap)
{
	void **n = A(realloc)(held, cap * sizeof(*held));
	if (!n) {
		fprintf(stderr, "segwork: realloc: %s\n", strerror(errno));
		exit(1);
	}
	held = n;
	capheld = cap;
}

static void hold(void *p)
{
	if (nheld == capheld)
		reserve(capheld ? capheld * 2 : 256);
	held[nheld++] = p;
}

static void churn(size_t size, size_t n)
{
	void **v = must_alloc(n * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		v[i] = must_alloc(size);
		touch(v[i], size);
	}
	for (size_t i = 0; i < n; i++)
		A(free)(v[i]);
	A(free)(v);
}

struct sleeper {
	size_t size, n;
	int ready[2]; /* the thread writes its tid here before it blocks */
	int never[2]; /* nobody writes here: the thread blocks reading it */
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	churn(s->size, s->n);
	pid_t tid = (pid_t)syscall(SYS_gettid);
	char c;
	if (write(s->ready[1], &tid, sizeof(tid)) != sizeof(tid))
		return NULL;
	while (read(s->never[0], &c, 1) < 0 && errno == EINTR) {
	}
	return NULL;
}

static int start_sleeper(size_t size, size_t n)
{
	static struct sleeper s; /* one per process is enough for the suite */
	if (s.n)
		return -1;
	s.size = size;
	s.n = n;
	if (pipe(s.ready) < 0 || pipe(s.never) < 0)
		return -1;
	pthread_t t;
	if (pthread_create(&t, NULL, sleeper_main, &s) != 0)
		return -1;
	pthread_detach(t);
	pid_t tid;
	if (read(s.ready[0], &tid, sizeof(tid)) != sizeof(tid))
		return -1;
	/* it never touches the allocator again; wait until it sleeps in read(2) */
	char path[64], st[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	for (;;) {
		FILE *f = fopen(path, "r");
		size_t got = f ? fread(st, 1, sizeof(st) - 1, f) : 0;
		if (f)
			fclose(f);
		st[got] = 0;
		const char *paren = strrchr(st, ')');
		if (!paren || (paren[1] == ' ' && paren[2] == 'S'))
			return 0;
		usleep(1000);
	}
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'K':
		v <<= 10, end++;
		break;
	case 'M':
		v <<= 20, end++;
		break;
	case 'G':
		v <<= 30, end++;
		break;
	}
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}

static void do_exec(char **argv, int bare)
{
	if (bare)
		unsetenv("LD_PRELOAD");
	say("ok", bare ? "exec-bare" : "exec");
	execv(argv[0], argv);
	fprintf(stderr, "segwork: exec %s: %s\n", argv[0], strerror(errno));
	exit(127);
}

static void do_fork(const char *fifo)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		say("error", "fork");
		return;
	}
	if (pid > 0) {
		say("ok", "fork");
		return;
	}
	int fd = open(fifo, O_RDONLY);
	if (fd < 0 || dup2(fd, 0) < 0) {
		fprintf(stderr, "segwork: child: %s: %s\n", fifo, strerror(errno));
		_exit(1);
	}
	close(fd);
	seq = 0;
	printf("%d child of %d\n", (int)getpid(), (int)getppid());
	fflush(stdout);
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Children that exit at once: exit status 0 unnamed, 1 named, 2 looked too late. */
static void do_forks(size_t n)
{
	unsigned long count[3] = {0, 0, 0};
	fflush(stdout);
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		pid_t pid = fork();
		if (pid == 0) {
			const char *path = liballoc_segment_path ? liballoc_segment_path() : NULL;
			bool named = path && *path;
			_exit(now_ns() - t0 >= 40000000u ? 2 : named ? 1 : 0);
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) > 2) {
			say("error", "forks");
			return;
		}
		count[WEXITSTATUS(st)]++;
	}
	printf("forks unnamed=%lu late=%lu named=%lu\n", count[0], count[2], count[1]);
}

static void run(char **argv, int argc)
{
	const char *w = argv[0];
	size_t size, n, part;
	if (strcmp(w, "alloc") == 0 && (argc == 3 || argc == 4) && !parse_size(argv[1], &size) &&
	    !parse_size(argv[2], &n) && (argc == 3 || !parse_size(argv[3], &part))) {
		for (size_t i = 0; i < n; i++) {
			void *p = must_alloc(size);
			touch(p, argc == 4 && part < size ? part : size);
			hold(p);
		}
	} else if (strcmp(w, "free") == 0 && argc == 1) {
		for (size_t i = 0; i < nheld; i++)
			A(free)(held[i]);
		A(free)(held);
		held = NULL;
		nheld = capheld = 0;
	} else if (strcmp(w, "reserve") == 0 && argc == 2 && !parse_size(argv[1], &n) &&
	           n >= nheld && n) {
		reserve(n);
	} else if (strcmp(w, "churn") == 0 && argc == 3 && !parse_size(argv[1], &size) &&
	           !parse_size(argv[2], &n)) {
		churn(size, n);
	} else if (strcmp(w, "sleeper") == 0 && argc == 3 && !parse_size(argv[1], &size) &&
	           !parse_size(argv[2], &n)) {
		if (start_sleeper(size, n) < 0) {
			say("error", w);
			return;
		}
	} else if (strcmp(w, "fork") == 0 && argc == 2) {
		do_fork(argv[1]);
		return;
	} else if (strcmp(w, "forks") == 0 && argc == 2 && !parse_size(argv[1], &n)) {
		do_forks(n);
	} else if (strcmp(w, "setuid") == 0 && argc == 2 && !parse_size(argv[1], &n)) {
		if (setgid((gid_t)n) != 0 || setuid((uid_t)n) != 0) {
			say("error", w);
			return;
		}
	} else if (strcmp(w, "closefrom") == 0 && argc == 1) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	} else if (strcmp(w, "chroot") == 0 && argc == 2) {
		if (chroot(argv[1]) != 0 || chdir("/") != 0) {
			say("error", w);
			return;
		}
	} else if ((strcmp(w, "exec") == 0 || strcmp(w, "exec-bare") == 0) && argc >= 2) {
		do_exec(argv + 1, w[4] == '-');
	} else if (strcmp(w, "exit") == 0 && argc == 1) {
		say("ok", w);
		exit(0);
	} else if (strcmp(w, "_exit") == 0 && argc == 1) {
		say("ok", w);
		_exit(0);
	} else {
		say("error", w);
		return;
	}
	say("ok", w);
}

int main(void)
{
	char line[LINE_BYTES];
	printf("%d ready\n", (int)getpid());
	fflush(stdout);
	/* stdin through read(2) in small steps: no stdio buffer, so a forked child and its
	 * parent never share unread input */
	size_t len = 0;
	for (;;) {
		ssize_t r = read(0, line + len, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (line[len] != '\n') {
			if (++len == sizeof(line) - 1)
				len = 0; /* overlong line: dropped */
			continue;
		}
		line[len] = 0;
		len = 0;
		char *argv[MAX_ARGS + 1];
		int argc = 0;
		for (char *tok = strtok(line, " \t"); tok && argc < MAX_ARGS;
		     tok = strtok(NULL, " \t"))
			argv[argc++] = tok;
		argv[argc] = NULL;
		if (argc == 0)
			continue;
		seq++;
		run(argv, argc);
	}
	return 0;
}
