/* forkfree.c — forks while threads free each other's blocks, so the arenas' wait-free
 * remote-free queues (and each thread's batch of foreign frees) are busy at every fork:
 * a fork can land between an enqueue's tail exchange and its link store, and the child
 * must never wait for a link that a thread which does not exist in the child would have
 * written. With "commands", a commander thread also drives the control thread through the
 * process's own mailbox (flush-caches, trim, release, live tunable changes: the real
 * cache handshake and the real queues, which the TSan build replaces with locks) and calls
 * the in-process API (run it with a short LIBALLOC_DECAY_MS: the decay pass then takes
 * idle cache bins at the same time).
 *
 * Workers: THREADS threads swap blocks (16 B-1 KiB, one in 8 of 16-66 KiB: small and
 * large paths) into a shared table; each block carries its size and a pattern that the
 * thread freeing it checks (a corrupted block fails the run). Every fork happens while
 * they run; the workers then pause while the child runs, so the child gets the CPU.
 * Children alternate: even ones call malloc_trim(0) at once (it drains every arena's
 * queue), odd ones only set decay_ms to 1 ms and wait 5 ms (the child's control thread
 * drains the queues in its decay pass, holding each arena's lock). Then both read and free
 * a block the parent wrote before the fork, allocate (a direct mapping too), free an
 * eighth of the table's blocks (blocks of every arena: they need its lock) and exit. A
 * child that does not end within WATCHDOG_S seconds is killed by its alarm and counted as
 * a hang; the run stops after MAX_HANGS of them.
 *
 * Once the parent wants to fork (32 blocks swapped since it woke the workers), each worker
 * yields the CPU every 16 blocks: four threads that never block otherwise kept the parent
 * off both CPUs for scheduler slices, and a fast allocator's workers swapped 20,000-100,000
 * blocks before each fork where glibc's, blocking on its arena locks, swapped 1,000-5,000
 * (make bench's fork-loop row then timed the workers, and the parent's copy-on-write
 * faults after each fork, more than the fork). The workers still run at the fork.
 *
 * usage: forkfree CHILDREN THREADS [plain|commands]
 * Prints "forkfree: N children (T threads, MODE): H hangs, F failures, C commands,
 * R children/s", then the same as key=value pairs (children= hangs= failures=
 * children_per_sec= faults_per_child=, the children's minor faults on average: make
 * bench's fork-loop row) with where the time went, per child on average: fork_ms (the
 * parent in fork()), trim_child_ms and decay_child_ms (from fork's return to the end of
 * wait4, for each kind of child), trim_child_cpu_ms and decay_child_cpu_ms (the child's
 * user+system time), parent_faults_per_child and ops_per_child (the parent's minor faults
 * and blocks swapped per fork cycle); exit status 0 when H and F are 0 and no block was
 * corrupted. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "liballoc.h"
#include "segment.h"

/* resolved at run time when liballoc is preloaded; linked in sanitizer builds */
#pragma weak liballoc_flush_caches
#pragma weak liballoc_set
#pragma weak liballoc_segment_path

#define NSLOTS     256
#define WATCHDOG_S 20
#define MAX_HANGS  3
#define MAX_THREAD 16

struct hdr {
	size_t size;
	uint64_t tag;
};

static void *slots[NSLOTS]; /* atomic exchanges */
static uint32_t paused = 1; /* workers park while the child runs (futex word) */
static uint32_t stop;
static uint64_t ops;                  /* blocks swapped, all workers */
static uint64_t fork_at = UINT64_MAX; /* ops at which the parent wants to fork */
static uint64_t corrupted;            /* blocks that failed their check */
static uint64_t commands;
static char *parent_block;
static uint64_t refused; /* commands that failed */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static void *make_block(uint64_t *rng)
{
	*rng = mix(*rng + 0x9e3779b97f4a7c15ULL);
	size_t size = (*rng & 7) == 0 ? 16384 + (*rng >> 8) % (50 * 1024) : 16 + (*rng >> 8) % 1008;
	if (size < sizeof(struct hdr) + 8)
		size = sizeof(struct hdr) + 8;
	struct hdr *h = A(malloc)(size);
	if (!h) {
		fprintf(stderr, "forkfree: malloc(%zu) failed\n", size);
		abort();
	}
	h->size = size;
	h->tag = mix((uintptr_t)h ^ size);
	memcpy((char *)h + size - 8, &h->tag, 8);
	return h;
}

static bool block_ok(const struct hdr *h)
{
	uint64_t end;
	memcpy(&end, (const char *)h + h->size - 8, 8);
	return h->tag == mix((uintptr_t)h ^ h->size) && end == h->tag;
}

static void check_and_free(void *p)
{
	if (!block_ok(p))
		__atomic_fetch_add(&corrupted, 1, __ATOMIC_RELAXED);
	A(free)(p);
}

static void futex(uint32_t *word, int op, uint32_t val)
{
	syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

static void park(void)
{
	while (__atomic_load_n(&paused, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&stop, __ATOMIC_RELAXED))
		futex(&paused, FUTEX_WAIT_PRIVATE, 1);
}

static void *worker(void *arg)
{
	uint64_t rng = (uintptr_t)arg * 0x2545f4914f6cdd1dULL, mine = 0;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (__atomic_load_n(&paused, __ATOMIC_ACQUIRE)) {
			park();
			continue;
		}
		void *p = make_block(&rng);
		void *old = __atomic_exchange_n(&slots[(rng >> 40) % NSLOTS], p, __ATOMIC_ACQ_REL);
		if (old)
			check_and_free(old); /* most were allocated by another thread */
		uint64_t n = __atomic_add_fetch(&ops, 1, __ATOMIC_RELAXED);
		if (n >= __atomic_load_n(&fork_at, __ATOMIC_RELAXED) && ++mine % 16 == 0)
			sched_yield();
	}
	return NULL;
}

/* ---- commands ----------------------------------------------------------------------- */

static struct seg seg;
static bool seg_ok;

static void mailbox(uint32_t cmd, const char *name, int64_t value, uint64_t arg)
{
	if (!seg_ok)
		return;
	struct seg_cmd c = {.command = cmd, .value = value, .arg = arg};
	if (name)
		strncpy(c.name, name, sizeof(c.name) - 1);
	struct seg_result r;
	int err = seg_command(&seg, &c, &r, (uint32_t)getpid(), 10000);
	if (err != SEG_E_OK || r.status != LA_ST_OK) {
		fprintf(stderr, "forkfree: command %u %s: %s (status %d: %s)\n", cmd,
		        name ? name : "", seg_strerror(err), err == SEG_E_OK ? r.status : -1,
		        err == SEG_E_OK ? r.reason : "");
		__atomic_fetch_add(&refused, 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&commands, 1, __ATOMIC_RELAXED);
}

static void *commander(void *arg)
{
	uint64_t rng = 77;
	(void)arg;
	/* the segment is named LIBALLOC_PUBLISH_DELAY after the start (50 ms): waited for, up
	 * to 5 s */
	const char *path = liballoc_segment_path ? liballoc_segment_path() : "";
	/* (its first byte is stored last, by the control thread: an acquire load) */
	for (int i = 0;
	     liballoc_segment_path && i < 5000 && !__atomic_load_n(path, __ATOMIC_ACQUIRE); i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	if (path && *path && seg_open(&seg, path, getuid()) == SEG_E_OK &&
	    seg_map_mailbox(&seg) == SEG_E_OK)
		seg_ok = true;
	else
		fprintf(stderr, "forkfree: no segment (%s): in-process commands only\n",
		        path && *path ? seg.why : "not published");
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (__atomic_load_n(&paused, __ATOMIC_ACQUIRE)) {
			park();
			continue;
		}
		rng = mix(rng + 1);
		switch (rng % 9) {
		case 0:
			mailbox(LA_CMD_flush_caches, NULL, 0, 0);
			break;
		case 1:
			mailbox(LA_CMD_trim, NULL, 0, (rng >> 8) % 2 ? 0 : 1 << 20);
			break;
		case 2:
			mailbox(LA_CMD_release_idle_heaps, NULL, 0, 0);
			break;
		case 3:
			mailbox(LA_CMD_set, "tcache_max_bytes", (int64_t)((rng >> 8) % 5) << 16, 0);
			break;
		case 4:
			mailbox(LA_CMD_set, "check_free_lists", (rng >> 8) % 4 == 0, 0);
			break;
		case 5:
			mailbox(LA_CMD_set, "mmap_threshold",
			        16384 + (int64_t)((rng >> 8) % 8) * 16384, 0);
			mailbox(LA_CMD_set, "mmap_dynamic", 1, 0);
			break;
		case 6:
			mailbox(LA_CMD_set, "madvise_throttle", (rng >> 8) % 2, 0);
			break;
		case 7:
			if (liballoc_flush_caches)
				liballoc_flush_caches();
			__atomic_fetch_add(&commands, 1, __ATOMIC_RELAXED);
			break;
		default:
			if (liballoc_set)
				liballoc_set("tcache_max_bytes", (int64_t)((rng >> 8) % 5) << 15,
				             NULL, 0);
			__atomic_fetch_add(&commands, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	return NULL;
}

/* ---- the child ---------------------------------------------------------------------- */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void child(int i)
{
	alarm(WATCHDOG_S);
	if (i % 2 == 0) {
		A(malloc_trim)(0);
	} else {
		/* the child's control thread runs its decay pass within a millisecond or two
		 * (decay_ms is not a queue operation: it only wakes that thread) */
		if (liballoc_set)
			liballoc_set("decay_ms", 1, NULL, 0);
		sleep_ms(5);
	}
	void *mine[16];
	uint64_t rng = (uint64_t)i + 1;
	for (int k = 0; k < 16; k++)
		mine[k] = make_block(&rng);
	char *big = A(malloc)(1 << 20); /* a direct mapping */
	if (!big)
		exit(4);
	big[0] = big[(1 << 20) - 1] = 1;
	A(free)(big);
	int bad = strcmp(parent_block, "written by the parent") != 0;
	A(free)(parent_block); /* a block of this thread's own arena, from before the fork */
	/* the table's blocks: the child's own copy, written by the parent's threads up to the
	 * fork (a block published during the fork's copy may read as torn: not checked) */
	for (int s = i % 8; s < NSLOTS; s += 8)
		if (slots[s])
			A(free)(slots[s]);
	for (int k = 0; k < 16; k++) {
		bad += !block_ok(mine[k]);
		A(free)(mine[k]);
	}
	A(malloc_trim)(0);
	exit(bad ? 3 : 0);
}

int main(int argc, char **argv)
{
	if (argc < 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0 || atoi(argv[2]) > MAX_THREAD ||
	    (argc > 3 && strcmp(argv[3], "plain") && strcmp(argv[3], "commands"))) {
		fprintf(stderr, "usage: forkfree CHILDREN THREADS [plain|commands]\n");
		return 2;
	}
	int nchildren = atoi(argv[1]), nthreads = atoi(argv[2]);
	bool with_commands = argc > 3 && strcmp(argv[3], "commands") == 0;
	parent_block = A(malloc)(64);
	strcpy(parent_block, "written by the parent");
	pthread_t t[MAX_THREAD + 1];
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	if (with_commands)
		pthread_create(&t[nthreads], NULL, commander, NULL);
	int hangs = 0, failures = 0, done = 0;
	long child_faults = 0;                 /* minor faults of the children, summed */
	double fork_s = 0, wait_s[2] = {0, 0}; /* in fork() and in wait4 (trim, decay children) */
	double child_cpu[2] = {0, 0};          /* the children's user+system time */
	struct timespec a, b;
	struct rusage self_start, self_end;
	getrusage(RUSAGE_SELF, &self_start);
	uint64_t ops_start = __atomic_load_n(&ops, __ATOMIC_RELAXED);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < nchildren && hangs < MAX_HANGS; i++, done++) {
		/* let the threads run until blocks are moving, and fork in the middle of it */
		uint64_t start = __atomic_load_n(&ops, __ATOMIC_RELAXED);
		__atomic_store_n(&fork_at, start + 32, __ATOMIC_RELAXED);
		__atomic_store_n(&paused, 0, __ATOMIC_RELEASE);
		futex(&paused, FUTEX_WAKE_PRIVATE, INT32_MAX);
		while (__atomic_load_n(&ops, __ATOMIC_RELAXED) - start < 32)
			sched_yield();
		double t0 = now_s();
		pid_t pid = fork();
		if (pid == 0)
			child(i);
		__atomic_store_n(&paused, 1, __ATOMIC_RELEASE);
		double t1 = now_s();
		int st;
		struct rusage ru;
		pid_t w = pid < 0 ? -1 : wait4(pid, &st, 0, &ru);
		fork_s += t1 - t0;
		wait_s[i % 2] += now_s() - t1;
		if (w != pid) {
			fprintf(stderr, "forkfree: fork/wait: %s\n", strerror(errno));
			failures++;
			continue;
		}
		child_faults += ru.ru_minflt;
		child_cpu[i % 2] += (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
			fprintf(stderr, "forkfree: child %d (%s) hung\n", i,
			        i % 2 ? "decay pass" : "malloc_trim");
			hangs++;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "forkfree: child %d ended with status %#x\n", i, st);
			failures++;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	getrusage(RUSAGE_SELF, &self_end);
	uint64_t ops_in_loop = __atomic_load_n(&ops, __ATOMIC_RELAXED) - ops_start;
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&paused, 0, __ATOMIC_RELEASE);
	futex(&paused, FUTEX_WAKE_PRIVATE, INT32_MAX);
	for (int i = 0; i < nthreads + with_commands; i++)
		pthread_join(t[i], NULL);
	for (int s = 0; s < NSLOTS; s++)
		if (slots[s])
			check_and_free(slots[s]);
	A(free)(parent_block);
	double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	printf("forkfree: %d children (%d threads, %s): %d hangs, %d failures, %llu corrupted, "
	       "%llu commands (%llu failed), %.0f children/s\n",
	       done, nthreads, with_commands ? "commands" : "plain", hangs, failures,
	       (unsigned long long)corrupted, (unsigned long long)commands,
	       (unsigned long long)refused, done / secs);
	printf("children=%d hangs=%d failures=%d children_per_sec=%.1f faults_per_child=%.0f "
	       "fork_ms=%.3f trim_child_ms=%.3f decay_child_ms=%.3f parent_faults_per_child=%.0f "
	       "ops_per_child=%.0f trim_child_cpu_ms=%.3f decay_child_cpu_ms=%.3f\n",
	       done, hangs, failures, done / secs, done ? (double)child_faults / done : 0.0,
	       done ? fork_s * 1e3 / done : 0.0, done ? wait_s[0] * 1e3 / ((done + 1) / 2) : 0.0,
	       done > 1 ? wait_s[1] * 1e3 / (done / 2) : 0.0,
	       done ? (double)(self_end.ru_minflt - self_start.ru_minflt) / done : 0.0,
	       done ? (double)ops_in_loop / done : 0.0,
	       done ? child_cpu[0] * 1e3 / ((done + 1) / 2) : 0.0,
	       done > 1 ? child_cpu[1] * 1e3 / (done / 2) : 0.0);
	return hangs || failures || corrupted || refused ? 1 : 0;
}
