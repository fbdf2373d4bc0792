/* fork.c — state a fork cuts in the middle. A fork does not stop the other threads: an
 * enqueue on a remote-free queue (tail exchanged first, the old tail's link written
 * second) that straddles it reaches the child without its link, and the thread that would
 * write the link does not exist there. These tests cut one exactly there, deterministically:
 * an atfork prepare handler registered before liballoc's (by a constructor of this file,
 * which runs first: prepare handlers run in reverse order of registration) exchanges the
 * tail of a queue after liballoc's own prepare handler has run, and the link is written
 * only after the fork returns in the parent. The child must neither hang nor lose its
 * way; the parent's queue must drain as usual. Linked with liballoc.a. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "arena.h"
#include "control.h"
#include "direct.h"
#include "liballoc.h"
#include "os.h"
#include "pagemap.h"
#include "shm.h"
#include "tcache.h"
#include "thpdir.h"
#include "../helpers/seccomp_one.h"

static struct arena *cut_arena;        /* the queue to cut at the next fork */
static struct cds_wfcq_node *cut_node; /* a block of cut_arena, enqueued half */
static struct cds_wfcq_node *cut_old;  /* the tail it displaced: its link is written late */
static bool prepare_saw_locks;

static void cut_prepare(void)
{
	if (!cut_arena)
		return;
	/* liballoc's prepare handler ran before this one: every arena is locked */
	prepare_saw_locks = __atomic_load_n(&cut_arena->lock.word, __ATOMIC_RELAXED) != 0;
	cds_wfcq_node_init(cut_node);
	cut_old = __atomic_exchange_n(&cut_arena->rq_tail.p, cut_node, __ATOMIC_SEQ_CST);
}

/* The same for a remote ring: a slot reserved (by a thread between its two steps) after
 * liballoc's prepare handler drained the ring, filled only after the fork in the parent. */
static struct arena *ring_cut_arena;
static uint64_t ring_cut_slot;

static void ring_cut_prepare(void)
{
	if (ring_cut_arena)
		ring_cut_slot = __atomic_fetch_add(&ring_cut_arena->rr_head, 1, __ATOMIC_SEQ_CST);
}

/* A burst preparation of arena 0 at the fork: stamped while liballoc's prepare handler
 * holds the arenas' locks, so that no control thread gives it back before the copy. */
static uint32_t stamp_at_fork;

static void stamp_prepare(void)
{
	if (stamp_at_fork)
		arenas[0].burst.stamp = stamp_at_fork;
}

/* A thread that takes arena 0's lock while a fork holds it: how it waits (read_task and
 * its helpers, below, are declared here for the prepare handler). */
static void lock_waiter_prepare(void);

/* A counter of the published segment written by the parent between the clone and the
 * child's handlers: the parent's handler below (registered before liballoc's: it runs
 * before liballoc's own parent handler) adds to one the child leaves alone (arena 0's munmap calls), and the child's (before liballoc's:
 * before the child copies its parent's file) waits until it did. */
static uint32_t *stats_flag;   /* shared with the child: 1 armed, 2 the parent wrote */
static uint64_t stats_at_fork; /* arena 0's munmap_calls in the prepare handler */

static void stats_prepare(void)
{
	if (stats_flag && *stats_flag == 1) /* after liballoc's: every arena locked */
		stats_at_fork = __atomic_load_n(&arenas[0].c->munmap_calls, __ATOMIC_RELAXED);
}

static void stats_parent(void)
{
	if (!stats_flag || *stats_flag != 1)
		return;
	__atomic_fetch_add(&arenas[0].c->munmap_calls, 1000, __ATOMIC_RELAXED);
	__atomic_store_n(stats_flag, 2, __ATOMIC_RELEASE);
	syscall(SYS_futex, stats_flag, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* A child's handler: until the parent's handler moved *flag past 1 (armed), at most 10 s */
static void wait_parent(const uint32_t *flag)
{
	if (!flag)
		return;
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 10000 && __atomic_load_n(flag, __ATOMIC_ACQUIRE) == 1; i++)
		syscall(SYS_futex, flag, FUTEX_WAIT, 1, &ms, NULL, 0);
}

static void stats_child(void)
{
	wait_parent(stats_flag);
}

/* The same for a field of the segment's header: the parent's handler writes another pid
 * namespace into its file after the clone, the child's waits until it did. */
static uint32_t *ident_flag; /* shared with the child: 1 armed, 2 the parent wrote */
static uint64_t ident_pidns; /* the parent's own (the test's, before the fork) */

static void ident_parent(void)
{
	if (!ident_flag || *ident_flag != 1)
		return;
	shm_header()->pidns_ino = ident_pidns + 1;
	__atomic_store_n(ident_flag, 2, __ATOMIC_RELEASE);
	syscall(SYS_futex, ident_flag, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void ident_child(void)
{
	wait_parent(ident_flag);
}

/* Set by a test: a prepare handler after liballoc's (its snapshot of the segment taken,
 * every arena locked) names this process's file, as the control thread may between that
 * snapshot and the clone; the identity the naming wrote into the header is kept here,
 * private memory the child gets a copy of. named_at_fork: the file was unnamed at the
 * snapshot and named in this handler. */
static bool name_at_fork, named_at_fork;
static uint64_t named_userns;
static pid_t named_pid;
static char named_exe[sizeof(((struct la_shm_header *)0)->exe)];

static void name_prepare(void)
{
	if (!name_at_fork)
		return;
	name_at_fork = false;
	if (__atomic_load_n(&shm_path()[0], __ATOMIC_ACQUIRE))
		return; /* named before the snapshot: not the case to test */
	shm_name_now(false);
	struct la_shm_header *h = shm_header();
	named_at_fork = __atomic_load_n(&shm_path()[0], __ATOMIC_ACQUIRE) != 0;
	named_userns = h->userns_ino;
	named_pid = h->pid;
	memcpy(named_exe, h->exe, sizeof(named_exe));
}

/* Set by a test: the child's first handlers (before liballoc's) make the parent's header
 * page, still mapped from the parent's file until liballoc's handler maps the child's own
 * over it, unreadable: a read of it there is a SIGSEGV. */
static bool header_guard;
static void header_guard_child(void)
{
	if (header_guard)
		mprotect(shm_header(), LA_SHM_PAGE, PROT_NONE);
}

/* The child's minor faults when its first fork handler runs (this file's: registered
 * before liballoc's, child handlers run in the order of registration) and, where a test
 * registered faults_child_last after liballoc's, when its last one does: the faults of
 * liballoc's handler in between, in faults_shared (a shared page the parent reads). */
static long faults_first;
static long *faults_shared;
static long minor_faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt;
}
static void faults_child_first(void)
{
	faults_first = minor_faults();
}
static void faults_child_last(void)
{
	if (faults_shared)
		*faults_shared = minor_faults() - faults_first;
}

__attribute__((constructor)) static void register_cut(void)
{
	pthread_atfork(stats_prepare, stats_parent, stats_child);
	pthread_atfork(NULL, ident_parent, ident_child);
	pthread_atfork(lock_waiter_prepare, NULL, NULL);
	pthread_atfork(cut_prepare, NULL, NULL);
	pthread_atfork(ring_cut_prepare, NULL, NULL);
	pthread_atfork(stamp_prepare, NULL, NULL);
	pthread_atfork(NULL, NULL, faults_child_first);
	pthread_atfork(NULL, NULL, header_guard_child);
	pthread_atfork(name_prepare, NULL, NULL);
}

static void set(const char *name, int64_t v)
{
	char reason[160];
	cr_assert_eq(liballoc_set(name, v, reason, sizeof(reason)), 0, "%s: %s", name, reason);
}

/* A thread with an arena of its own, which allocates blocks for the test (its fill) and
 * stays attached (idle) until released. */
enum { FOREIGN = 65 }; /* the 65th foreign free hands the first 64 over */
struct owner {
	pthread_barrier_t ready, done;
	struct arena *arena;
	void (*fill)(struct owner *);
	void *small, *large;       /* fill_small_large */
	void *blocks[FOREIGN + 1]; /* fill_foreign */
};

static void fill_small_large(struct owner *o)
{
	o->small = A(malloc)(64);
	o->large = A(malloc)(64 << 10); /* a large block of the arena's heap */
}

static void fill_foreign(struct owner *o)
{
	for (int i = 0; i <= FOREIGN; i++)
		o->blocks[i] = A(malloc)(48);
}

static void *owner_main(void *arg)
{
	struct owner *o = arg;
	o->fill(o);
	o->arena = la_tcache.arena;
	pthread_barrier_wait(&o->ready);
	pthread_barrier_wait(&o->done);
	return NULL;
}

static void start_owner(struct owner *o, void (*fill)(struct owner *), pthread_t *t)
{
	o->fill = fill;
	pthread_barrier_init(&o->ready, NULL, 2);
	pthread_barrier_init(&o->done, NULL, 2);
	pthread_create(t, NULL, owner_main, o);
	pthread_barrier_wait(&o->ready);
}

/* The child's wait status, or -1 when it did not end within 10 s (then it is killed). */
static int wait_child(pid_t pid)
{
	int status = -1;
	for (int ms = 0; ms < 10000; ms++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* Fork with o's queue cut at the fork; the child runs child_fn and exits with its
 * status. Returns the child's wait status, or -1 when it did not end within 10 s (then it
 * is killed). The parent completes the link and drains the queue. */
static int fork_cut(struct owner *o, void *node, int (*child_fn)(struct owner *))
{
	cut_arena = o->arena;
	cut_node = node;
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		_exit(child_fn(o));
	}
	cut_arena = NULL;
	cr_assert(prepare_saw_locks, "the cut happened after liballoc's fork handler locked the "
	                             "arenas (handler order)");
	__atomic_store_n(&cut_old->next, cut_node, __ATOMIC_RELEASE); /* the late link */
	int status = wait_child(pid);
	/* the parent's queue is whole: it drains, and the block is free again */
	struct la_counters before, after;
	liballoc_stats(&before);
	A(malloc_trim)(0);
	liballoc_stats(&after);
	cr_assert_geq(after.remote_frees_drained, before.remote_frees_drained + 1,
	              "the parent drained the block whose link came after the fork");
	return status;
}

static int child_trims(struct owner *o)
{
	A(malloc_trim)(0); /* drains every arena's queue */
	void *p = A(malloc)(100);
	A(free)(p);
	A(free)(o->large); /* the owner's arena lock */
	return 0;
}

static int child_idles(struct owner *o)
{
	/* no allocator call but a tunable: the child's control thread runs its decay pass,
	 * which drains the queues under each arena's lock */
	liballoc_set("decay_ms", 1, NULL, 0);
	nanosleep(&(struct timespec){0, 50000000}, NULL);
	A(free)(o->large); /* needs the owner's arena lock */
	return 0;
}

static void cut_and_check(int (*child_fn)(struct owner *), void *(*pick)(struct owner *))
{
	set("decay_ms", 0);     /* the parent's control thread stays out of the way */
	set("arena_max", 16);   /* a thread of its own per arena, whatever the machine's CPUs */
	A(free)(A(malloc)(64)); /* this thread has its own arena */
	A(free)(A(malloc)(64 << 10)); /* something retained: the decay pass is armed */
	struct owner o;
	pthread_t t;
	start_owner(&o, fill_small_large, &t);
	cr_assert_neq(o.arena, la_tcache.arena, "the owner has an arena of its own");
	int status = fork_cut(&o, pick(&o), child_fn);
	cr_assert_neq(status, -1,
	              "the child did not end within 10 s (it waits for a link that "
	              "no thread of the child will write)");
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with status %#x",
	          status);
	pthread_barrier_wait(&o.done);
	pthread_join(t, NULL);
}

static void *pick_small(struct owner *o)
{
	return o->small;
}

Test(fork, a_queue_cut_by_the_fork_does_not_hang_malloc_trim_in_the_child)
{
	cut_and_check(child_trims, pick_small);
}

Test(fork, a_queue_cut_by_the_fork_does_not_hang_the_childs_decay_pass)
{
	cut_and_check(child_idles, pick_small);
}

/* Blocks in the transfer cache at the fork go back to their spans in the parent, before
 * the copy: a child that trims (or whose decay pass sweeps the cache) would otherwise
 * write a free-list link into each of them, a copy-on-write fault per page only to give
 * it back (the fork loop's children took 280-420 faults each instead of ~125). */
Test(fork, a_child_trims_without_copying_the_parents_cached_blocks)
{
	set("decay_ms", 0); /* the control threads stay out of the way */
	/* ~900 KiB of blocks of four classes, each within what the transfer cache keeps of a
	 * class and all within what it keeps of an arena (XF_SLOTS, XF_CLASS_BYTES,
	 * XF_ARENA_BYTES): the thread's flushes put them there. Left there, the child's trim
	 * would write a link into each of their ~225 pages. */
	static const size_t size[] = {512, 768, 1024, 2048};
	enum { N = 480, K = sizeof size / sizeof size[0] };
	static void *b[K][N];
	/* a transfer cache that earned its whole depth (arena.h, XF_EARN): a teardown alone
	 * fills only its first chunk of slots */
	struct arena *a = tcache_arena(&la_tcache);
	arena_lock(a);
	a->xfer_earned = XF_SLOTS / XF_CHUNK - 1;
	arena_unlock(a);
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N && (i + 1) * size[k] <= (230u << 10); i++)
			b[k][i] = A(malloc)(size[k]);
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			A(free)(b[k][i]);
	arena_lock(a);
	uint64_t cached = a->xfer_bytes;
	arena_unlock(a);
	cr_assert_geq(cached, 512 << 10, "the transfer cache holds %llu bytes",
	              (unsigned long long)cached);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		/* this thread's faults, the trim's: the child's new control thread starts
		 * meanwhile and faults in pages of its own (its stack; under AddressSanitizer
		 * the runtime's thread state) */
		struct rusage r0, r1;
		getrusage(RUSAGE_THREAD, &r0);
		A(malloc_trim)(0);
		getrusage(RUSAGE_THREAD, &r1);
		long faults = r1.ru_minflt - r0.ru_minflt;
		_exit(faults > 250 ? 250 : (int)faults);
	}
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status), "the child ended with status %#x", status);
	/* (3-4 faults measured in both builds, against ~225 more without the parent's
	 * drain; the whole child's count was 3-40 under AddressSanitizer) */
	cr_assert_lt(WEXITSTATUS(status), 16,
	             "the child's trim faulted %d pages in (250: 250 or more) with %llu bytes of "
	             "blocks in the parent's transfer cache",
	             WEXITSTATUS(status), (unsigned long long)cached);
}

/* The parked large block goes back to its heap's free pages in the parent, before the
 * copy, like the transfer cache's blocks above: a child's trim or decay pass gives it back
 * there, writing its descriptor, its neighbours' and the heap's free bins, each a
 * copy-on-write fault of a page it shares with its parent (5.4 a child in the fork loop;
 * perf page-faults under unpark_slow 5.8 -> 1.6 a child, forkfree 100 4 plain). */
/* A fork that copies the parent's control thread in its cold-cache flush (the flag that
 * keeps that flush from arming the next pass) leaves the child's control thread free to
 * arm its own: the child starts with the flag down. */
Test(fork, a_fork_during_the_decay_passs_flush_leaves_the_childs_flag_down)
{
	shm_decay_flushing = 1; /* as the control thread sets it before it takes the lock */
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		_exit(shm_decay_flushing ? 1 : 0);
	}
	shm_decay_flushing = 0;
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status), "the child ended with status %#x", status);
	cr_assert_eq(WEXITSTATUS(status), 0, "the child's flag was up");
}

/* A first fork, out of the way: a process's first fork makes its children's control
 * thread attributes (control.c, control_fork_prepare: an allocation in the parent, which
 * may take free pages a test counts). */
static void fork_once(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	cr_assert_eq(wait_child(pid), 0, "the first child exited");
}

Test(fork, the_parked_large_block_goes_back_to_its_heap_before_the_copy)
{
	fork_once();
	set("decay_ms", 0); /* no decay pass returns it meanwhile */
	struct arena *a = tcache_arena(&la_tcache);
	char *p = A(malloc)(64 << 10); /* a large block of the arena's heap */
	cr_assert_not_null(p);
	memset(p, 1, 64 << 10);
	A(free)(p);
	tcache_flush_large_all(); /* from the thread cache's large slot to the arena */
	arena_lock(a);
	bool parked = a->parked != NULL;
	arena_unlock(a);
	cr_assert(parked, "the freed 64 KiB block is parked (set-up)");
	struct la_counters before, after;
	liballoc_stats(&before);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		arena_lock(a);
		bool still = a->parked != NULL;
		arena_unlock(a);
		_exit(still ? 1 : 0);
	}
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status), "the child ended with status %#x", status);
	cr_assert_eq(WEXITSTATUS(status), 0, "the child found the parent's parked block parked");
	arena_lock(a);
	parked = a->parked != NULL;
	arena_unlock(a);
	cr_assert(!parked, "the parent gave its parked block back at the fork");
	/* its pages stay free and resident, counted as before */
	liballoc_stats(&after);
	cr_assert_eq(after.free_resident_bytes, before.free_resident_bytes,
	             "free resident bytes %llu before the fork, %llu after",
	             (unsigned long long)before.free_resident_bytes,
	             (unsigned long long)after.free_resident_bytes);
	char *q = A(malloc)(64 << 10);
	cr_assert_not_null(q);
	A(free)(q);
}

/* The same for the forking thread's large slot (tcache.h), the block its free would have
 * parked: back to its heap's free pages before the copy, counted free resident there and
 * no longer cached; the child finds neither a slot nor a parked block to give back. */
Test(fork, the_large_slot_goes_back_to_its_heap_before_the_copy)
{
	fork_once();
	set("decay_ms", 0);
	struct arena *a = tcache_arena(&la_tcache);
	char *p = A(malloc)(64 << 10);
	cr_assert_not_null(p);
	memset(p, 1, 64 << 10);
	liballoc_flush_caches();
	struct la_counters before, after;
	liballoc_stats(&before);
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 64 << 10, "in the slot (set-up)");
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		arena_lock(a);
		bool still = a->parked != NULL || la_tcache.nlarge != 0;
		arena_unlock(a);
		_exit(still ? 1 : 0);
	}
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status), "the child ended with status %#x", status);
	cr_assert_eq(WEXITSTATUS(status), 0, "the child found the block in the slot or parked");
	cr_assert_eq(tcache_large_bytes(), 0);
	arena_lock(a);
	bool parked = a->parked != NULL;
	arena_unlock(a);
	cr_assert(!parked);
	liballoc_stats(&after);
	cr_assert_eq(after.free_resident_bytes, before.free_resident_bytes + (64 << 10));
	cr_assert_eq(after.allocated_bytes, before.allocated_bytes - (64 << 10));
	cr_assert_lt(after.cached_bytes, before.cached_bytes + 4096, "no longer cached");
}

static uint64_t ring_used(struct arena *a)
{
	return __atomic_load_n(&a->rr_head, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(&a->rr_tail, __ATOMIC_ACQUIRE);
}

/* In the child: new threads take arenas no thread uses until one has the arena whose ring
 * the fork cut; this thread's frees of its blocks go through that arena's ring and drain. */
static int child_frees_through_the_ring(struct arena *cut)
{
	enum { TRIES = 8 };
	static struct owner o[TRIES];
	pthread_t t[TRIES];
	int n = 0, status = 0;
	while (n < TRIES) {
		start_owner(&o[n], fill_foreign, &t[n]);
		if (o[n++].arena == cut)
			break;
	}
	struct owner *c = &o[n - 1];
	if (c->arena != cut)
		status = 2;
	for (int i = 0; i < FOREIGN && !status; i++)
		A(free)(c->blocks[i]);
	if (!status && ring_used(c->arena) != 64)
		status = 3; /* the batch did not go through the ring */
	A(malloc_trim)(0);  /* drains every arena */
	if (!status && ring_used(c->arena) != 0)
		status = 4; /* the drain stopped at the slot reserved in the parent */
	for (int i = 0; i < n; i++) {
		pthread_barrier_wait(&o[i].done);
		pthread_join(t[i], NULL);
	}
	return status;
}

Test(fork, a_ring_slot_reserved_at_the_fork_stops_neither_the_childs_drains_nor_the_parents)
{
	set("decay_ms", 0);     /* the parent's control thread stays out of the way */
	set("arena_max", 16);   /* a thread of its own per arena, whatever the machine's CPUs */
	A(free)(A(malloc)(64)); /* this thread has its own arena */
	struct owner o;
	pthread_t t;
	start_owner(&o, fill_foreign, &t);
	cr_assert_neq(o.arena, la_tcache.arena, "the owner has an arena of its own");
	for (int i = 0; i < FOREIGN; i++)
		A(free)(o.blocks[i]);
	cr_assert_not_null(o.arena->rr, "a batch set the owner's ring up");
	cr_assert_eq(ring_used(o.arena), 64);
	ring_cut_arena = o.arena;
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		_exit(child_frees_through_the_ring(o.arena));
	}
	ring_cut_arena = NULL;
	cr_assert_eq(ring_used(o.arena), 1,
	             "liballoc's prepare handler drained the ring, then "
	             "the cut reserved one slot");
	/* the reserving thread fills its slot after the fork: the parent's drain takes it */
	__atomic_store_n(&o.arena->rr[ring_cut_slot % RR_SLOTS], o.blocks[FOREIGN],
	                 __ATOMIC_RELEASE);
	A(malloc_trim)(0);
	cr_assert_eq(ring_used(o.arena), 0, "the parent drained the late slot");
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	          "the child ended with status %#x (2: another arena, 3: no ring, 4: the drain "
	          "stopped short)",
	          status);
	pthread_barrier_wait(&o.done);
	pthread_join(t, NULL);
}

/* The one thread of this process besides the caller (the child's control thread): its id,
 * or 0 while there is none or more than one. No allocation (the caller may hold an arena's
 * lock): getdents64 into a buffer on the stack. */
static pid_t other_thread(void)
{
	pid_t found = 0, self = (pid_t)syscall(SYS_gettid);
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	int n = 0;
	for (long got; (got = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0;)
		for (long off = 0; off < got;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			off += e->d_reclen;
			if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && atoi(e->d_name) != self) {
				found = atoi(e->d_name);
				n++;
			}
		}
	close(fd);
	return n == 1 ? found : 0;
}

/* The text of a small /proc file, NUL-terminated in buf; false if unreadable. No
 * allocation (the caller may hold an arena's lock). */
static bool read_proc(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0;
}

/* /proc/self/task/<tid>/<file> into buf. */
static bool read_task(pid_t tid, const char *file, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, file);
	return read_proc(path, buf, size);
}

/* The state letter of thread tid ("S": asleep), 0 if unreadable. */
static char thread_state(pid_t tid)
{
	char buf[512];
	char *p = read_task(tid, "stat", buf, sizeof(buf)) ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Waits (up to 5 s: the parent waits 10) until the child's control thread sleeps, in
 * its wait or queued on a lock. False if it does not. */
static bool control_thread_asleep(void)
{
	pid_t tid = 0;
	char st = 0;
	for (int ms = 0; ms < 5000 && st != 'S'; ms++) {
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		if (!tid)
			tid = other_thread();
		if (tid)
			st = thread_state(tid);
	}
	return st == 'S';
}

/* Holds arena 0's lock until the child's control thread sleeps; 0: it sleeps without
 * having waited for the lock, 1: it waits for it, 2: it never slept. */
static int child_holds_an_arena(void)
{
	struct arena *a = &arenas[0];
	arena_lock(a);
	bool asleep = control_thread_asleep();
	bool waited = __atomic_load_n(&a->lock.word, __ATOMIC_RELAXED) & FUTEX_WAITERS;
	arena_unlock(a);
	return !asleep ? 2 : waited ? 1 : 0;
}

/* voluntary_ctxt_switches of thread tid (how many times it went to sleep), -1 if
 * unreadable. */
static long thread_sleeps(pid_t tid)
{
	char buf[2048];
	char *p = read_task(tid, "status", buf, sizeof(buf))
	                  ? strstr(buf, "\nvoluntary_ctxt_switches:")
	                  : NULL;
	return p ? strtol(p + 26, NULL, 10) : -1;
}

/* Kicks the control thread tid (its burst look takes every arena) and waits (5 s at most)
 * until it has gone to sleep again; false if it did not. */
static bool kick_until_asleep_again(pid_t tid)
{
	long before = thread_sleeps(tid), now = before;
	shm_wake_control();
	for (int ms = 0; ms < 5000 && (now <= before || thread_state(tid) != 'S'); ms++) {
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		now = thread_sleeps(tid);
	}
	return before >= 0 && now > before;
}

/* Holds arena 0's lock and kicks the child's control thread until it has gone to sleep
 * again; 0: it did without waiting for the lock, 1: it waits for it, 2: it never slept. */
static int child_kicks_while_holding_an_arena(void)
{
	if (!control_thread_asleep())
		return 2;
	struct arena *a = &arenas[0];
	arena_lock(a);
	bool slept = kick_until_asleep_again(other_thread());
	bool waited = __atomic_load_n(&a->lock.word, __ATOMIC_RELAXED) & FUTEX_WAITERS;
	arena_unlock(a);
	return !slept ? 2 : waited ? 1 : 0;
}

/* Stamps a preparation in arena 0 while holding its lock, kicks the control thread and
 * lets it sleep again (it passes the arena by), then lets go of the lock; 0: the control
 * thread gave the preparation back within 5 s, 1: it did not, 2: it never slept. */
static int child_leaves_a_busy_arena_for_later(void)
{
	if (!control_thread_asleep())
		return 2;
	struct arena *a = &arenas[0];
	arena_lock(a);
	a->burst.stamp = __atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) + 1000;
	bool slept = kick_until_asleep_again(other_thread());
	arena_unlock(a);
	if (!slept)
		return 2;
	uint32_t stamp = 1;
	for (int ms = 0; ms < 5000 && stamp; ms++) {
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		arena_lock(a);
		stamp = a->burst.stamp;
		arena_unlock(a);
	}
	return stamp ? 1 : 0;
}

/* 0: the child's control thread ended the preparation its parent left in arena 0 before
 * it first slept, 1: it did not, 2: it never slept. */
static int child_waits_for_the_give_back(void)
{
	if (!control_thread_asleep())
		return 2;
	arena_lock(&arenas[0]);
	uint32_t stamp = arenas[0].burst.stamp;
	arena_unlock(&arenas[0]);
	return stamp ? 1 : 0;
}

/* Forks a child that runs child_fn and exits with its result; that result. */
static int fork_run(int (*child_fn)(void))
{
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		_exit(child_fn());
	}
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status), "the child ended with status %#x", status);
	return WEXITSTATUS(status);
}

/* The same for a child_fn that waits for the child's control thread (2: it never slept). */
static int fork_and_wait(int (*child_fn)(void))
{
	int got = fork_run(child_fn);
	cr_assert_neq(got, 2, "the child's control thread never slept");
	return got;
}

/* A forked child's control thread starts without taking the arenas' locks when its parent
 * left no burst preparation behind: it took every one at its first turn (the parent had
 * kicked its own control thread, and the child's started from no kick), and the fork
 * loop's children spent ~6 % of their CPU in it waiting for the one their malloc_trim
 * held, spinning in the kernel (lock.h: FUTEX_LOCK_PI). */
Test(fork, a_childs_control_thread_leaves_the_arenas_alone_at_its_start)
{
	set("decay_ms", 0);      /* no decay pass, in the parent or the child */
	set("burst_predict", 0); /* no preparation begins meanwhile */
	A(free)(A(malloc)(64));  /* arena 0 exists */
	shm_wake_control();      /* the parent's control thread was kicked */
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++) {
		struct burst_watch *w = &arenas[i].burst;
		arena_lock(&arenas[i]);
		bool idle = !w->stamp && !w->prepared && !w->active;
		arena_unlock(&arenas[i]);
		cr_assert(idle, "arena %u's burst watch is idle before the fork", i);
	}
	cr_assert_eq(fork_and_wait(child_holds_an_arena), 0,
	             "the child's control thread waited for an arena's lock at its start");
}

/* Nor does it wait for an arena the program holds when a kick makes it look at the
 * arenas' bursts (after each decay pass, a burst's start or end): it looks at that one
 * again BURST_BUSY_NS later. It took the lock (op_burst), and the fork loop's children
 * whose decay pass ran spent ~1.5 % of their CPU in its wait, spinning in the kernel while
 * their main thread freed and trimmed. */
Test(fork, the_control_thread_leaves_a_busy_arena_for_later)
{
	set("decay_ms", 0);
	set("burst_predict", 0);
	A(free)(A(malloc)(64));
	cr_assert_eq(fork_and_wait(child_kicks_while_holding_an_arena), 0,
	             "the control thread waited for the arena's lock when kicked");
}

/* ... and comes back to it: a preparation stamped while the program held the arena is
 * given back once it lets go. */
Test(fork, the_control_thread_comes_back_to_a_busy_arena)
{
	set("decay_ms", 0);
	A(free)(A(malloc)(64));
	cr_assert_eq(fork_and_wait(child_leaves_a_busy_arena_for_later), 0,
	             "the preparation stamped in a busy arena was never given back");
}

/* ... but where the parent left pages prepared for a burst (stamped), the child's first
 * turn still gives them back. */
Test(fork, a_childs_control_thread_gives_back_what_its_parent_prepared)
{
	set("decay_ms", 0);
	A(free)(A(malloc)(64));
	shm_wake_control();
	stamp_at_fork = __atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) + 1000;
	int got = fork_and_wait(child_waits_for_the_give_back);
	stamp_at_fork = 0;
	arena_lock(&arenas[0]);
	arenas[0].burst.stamp = 0; /* the parent's own is not a preparation */
	arena_unlock(&arenas[0]);
	cr_assert_eq(got, 0, "the child's control thread left its parent's preparation stamped");
}

/* ---- a lock held by the fork ------------------------------------------------------------ */

static uint32_t waiter_go;     /* futex word: the waiter takes arena 0's lock */
static pid_t waiter_tid;       /* the waiting thread (0: no such test at this fork) */
static uintptr_t waiter_futex; /* where it waited (its futex call's first argument) */
static long waiter_op;         /* and how (the second) */

static void *lock_waiter(void *arg)
{
	(void)arg;
	__atomic_store_n(&waiter_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&waiter_go, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &waiter_go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	arena_lock(&arenas[0]); /* held by the forking thread until the fork is over */
	arena_unlock(&arenas[0]);
	return NULL;
}

/* After liballoc's prepare handler (every arena locked): lets the waiter go and notes the
 * futex call it sleeps in (5 s at most), then lets the fork go on. No allocation. */
static void lock_waiter_prepare(void)
{
	pid_t tid = __atomic_load_n(&waiter_tid, __ATOMIC_ACQUIRE);
	if (!tid)
		return;
	__atomic_store_n(&waiter_go, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &waiter_go, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	char buf[256];
	for (int ms = 0; ms < 5000; ms++) {
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		if (read_task(tid, "syscall", buf, sizeof(buf)) &&
		    strncmp(buf, "202 ", 4) == 0) { /* futex */
			char *end;
			waiter_futex = (uintptr_t)strtoull(buf + 4, &end, 16);
			waiter_op = strtol(end, NULL, 16) & FUTEX_CMD_MASK;
			return;
		}
	}
}

/* Forks while a thread (with attr) takes arena 0's lock, which the fork holds; the futex
 * call it waited in. */
static void fork_with_a_lock_waiter(const pthread_attr_t *attr)
{
	A(free)(A(malloc)(64)); /* arena 0 exists */
	waiter_go = 0;
	waiter_futex = 0;
	waiter_op = -1;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, attr, lock_waiter, NULL), 0);
	while (!__atomic_load_n(&waiter_tid, __ATOMIC_ACQUIRE))
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	__atomic_store_n(&waiter_tid, 0, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with %#x",
	          status);
	cr_assert_neq(waiter_futex, 0, "the waiter never slept in a futex call");
}

/* A thread of normal priority that finds an arena locked by a fork in progress sleeps until
 * the fork is over, on la_forker: in FUTEX_LOCK_PI the kernel spins a waiter for as long as
 * the owner runs, and the forking thread runs for the whole copy of the address space (the
 * fork loop's workers spun ~2 of the ~26 samples of each fork cycle so, and the parent's
 * copy-on-write faults after the fork sent their CPU TLB-shootdown interrupts). */
Test(fork, a_thread_waiting_for_a_lock_the_fork_holds_sleeps_until_the_fork_is_over)
{
	fork_with_a_lock_waiter(NULL);
	cr_assert_eq(waiter_futex, (uintptr_t)&la_forker,
	             "the waiter slept on %#lx (op %ld), not on the fork's word (arena 0's lock "
	             "is %p)",
	             (unsigned long)waiter_futex, waiter_op, (void *)&arenas[0].lock.word);
	cr_assert_eq(waiter_op, FUTEX_WAIT);
}

/* ... but a real-time thread waits in FUTEX_LOCK_PI still, lending the forking thread its
 * priority. */
Test(fork, a_real_time_thread_waiting_for_a_lock_the_fork_holds_lends_it_its_priority)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	pthread_attr_setschedparam(&attr, &(struct sched_param){.sched_priority = 1});
	pthread_t t;
	if (pthread_create(&t, &attr, lock_waiter, NULL) != 0)
		cr_skip_test("no real-time priority here");
	__atomic_store_n(&waiter_go, 1, __ATOMIC_RELEASE); /* that one was a probe */
	syscall(SYS_futex, &waiter_go, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(t, NULL);
	waiter_tid = 0;
	fork_with_a_lock_waiter(&attr);
	pthread_attr_destroy(&attr);
	cr_assert_eq(waiter_futex, (uintptr_t)&arenas[0].lock.word,
	             "the real-time waiter slept on %#lx (op %ld), not on arena 0's lock",
	             (unsigned long)waiter_futex, waiter_op);
	cr_assert_eq(waiter_op, FUTEX_LOCK_PI);
}

/* A waiter that found the lock held by a thread not forking, and gives its CPU up between
 * spins (la_lock_slow's yields), sees a fork that takes the lock meanwhile: it sleeps on
 * la_forker as one that came later does, not in FUTEX_LOCK_PI, where the kernel spins it
 * for as long as the forking thread copies the address space. The test thread is the lock's
 * owner, then the forker (la_fork_begin, as malloc.c's prepare handler once it holds every
 * lock), which it becomes while the waiter is in its first sched_yield: a seccomp filter of
 * the waiter's thread traps the call (SIGSYS), and the handler waits for the fork's start. */
static pid_t yield_waiter_tid;
static uint32_t yield_waiter_go; /* futex words: the waiter takes arena 0's lock, */
static uint32_t yield_seen;      /* it is in its first sched_yield, */
static uint32_t yield_release;   /* it may go on */
static int yield_filtered;       /* 1: the filter is set, -1: it could not be */

static void on_yield(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	if (__atomic_exchange_n(&yield_seen, 1, __ATOMIC_SEQ_CST))
		return;
	syscall(SYS_futex, &yield_seen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	while (!__atomic_load_n(&yield_release, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &yield_release, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

static bool trap_yields(void)
{
	return seccomp_one(SYS_sched_yield, SECCOMP_RET_TRAP) == 0;
}

static void *yield_waiter(void *arg)
{
	(void)arg;
	__atomic_store_n(&yield_filtered, trap_yields() ? 1 : -1, __ATOMIC_RELEASE);
	__atomic_store_n(&yield_waiter_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	if (yield_filtered < 0)
		return NULL;
	while (!__atomic_load_n(&yield_waiter_go, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &yield_waiter_go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	arena_lock(&arenas[0]);
	arena_unlock(&arenas[0]);
	return NULL;
}

/* The system call thread tid sleeps in (-1: none, or not readable), with its first two
 * arguments. */
static long task_syscall(pid_t tid, uintptr_t *a0, long *a1)
{
	char buf[256];
	if (!read_task(tid, "syscall", buf, sizeof(buf)) || buf[0] == '-' || buf[0] == 'r')
		return -1;
	char *end;
	long nr = strtol(buf, &end, 10);
	*a0 = (uintptr_t)strtoull(end, &end, 16);
	*a1 = strtol(end, NULL, 16);
	return nr;
}

Test(fork, a_waiter_between_its_yields_sees_a_fork_take_the_lock)
{
	A(free)(A(malloc)(64)); /* arena 0 exists */
	struct sigaction sa = {0}, old;
	sa.sa_sigaction = on_yield;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGSYS, &sa, &old), 0);
	yield_waiter_tid = 0;
	yield_waiter_go = yield_seen = yield_release = 0;
	yield_filtered = 0;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, yield_waiter, NULL), 0);
	pid_t tid;
	while (!(tid = __atomic_load_n(&yield_waiter_tid, __ATOMIC_ACQUIRE)))
		nanosleep(&(struct timespec){0, 100000}, NULL);
	if (yield_filtered < 0) {
		pthread_join(t, NULL);
		sigaction(SIGSYS, &old, NULL);
		cr_skip_test("no seccomp filter here");
	}
	/* no allocation from here until the unlock (the lock is arena 0's) */
	arena_lock(&arenas[0]);
	__atomic_store_n(&yield_waiter_go, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &yield_waiter_go, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	struct timespec five = {5, 0};
	while (!__atomic_load_n(&yield_seen, __ATOMIC_ACQUIRE) &&
	       syscall(SYS_futex, &yield_seen, FUTEX_WAIT_PRIVATE, 0, &five, NULL, 0) == 0)
		;
	bool yielded = __atomic_load_n(&yield_seen, __ATOMIC_ACQUIRE);
	la_fork_begin(); /* the lock is the forker's from here */
	__atomic_store_n(&yield_release, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &yield_release, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	uintptr_t a0 = 0;
	long a1 = 0, nr = -1;
	for (int ms = 0; ms < 5000; ms++) {
		nr = task_syscall(tid, &a0, &a1);
		if (nr == SYS_futex)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	la_fork_end();
	arena_unlock(&arenas[0]);
	pthread_join(t, NULL);
	sigaction(SIGSYS, &old, NULL);
	cr_assert(yielded, "the waiter never gave its CPU up");
	cr_assert_eq(nr, SYS_futex, "the waiter never slept in a futex call");
	cr_assert_eq(a0, (uintptr_t)&la_forker,
	             "the waiter slept on %#lx (op %ld), not on the fork's word (arena 0's lock "
	             "is %p)",
	             (unsigned long)a0, a1 & FUTEX_CMD_MASK, (void *)&arenas[0].lock.word);
	cr_assert_eq(a1 & FUTEX_CMD_MASK, FUTEX_WAIT);
}

/* The CPUs the parent of the child below may run on (read before the fork). */
static cpu_set_t parent_cpus;

/* Whether thread tid (0: the caller) may run on exactly the CPUs of want. */
static bool runs_on(pid_t tid, const cpu_set_t *want)
{
	cpu_set_t got;
	return sched_getaffinity(tid, sizeof(got), &got) == 0 && CPU_EQUAL(&got, want);
}

/* 0: the child's control thread first slept on one CPU only, one of the child's, and
 * after a wake-up may run on all of them, the child's being its parent's; 1: it first
 * slept free to run on any; 3: the child's own CPUs were not its parent's; 4: after the
 * wake-up it was still pinned; 2: it never slept. */
static int child_control_thread_starts_here(void)
{
	if (!control_thread_asleep())
		return 2;
	pid_t tid = other_thread();
	cpu_set_t ctl;
	if (sched_getaffinity(tid, sizeof(ctl), &ctl) != 0 || CPU_COUNT(&ctl) != 1)
		return 1;
	CPU_AND(&ctl, &ctl, &parent_cpus);
	if (CPU_COUNT(&ctl) != 1 || !runs_on(0, &parent_cpus))
		return 3;
	if (!kick_until_asleep_again(tid))
		return 2;
	return runs_on(tid, &parent_cpus) ? 0 : 4;
}

/* A forked child's control thread starts on the CPU of the thread that forked, and only
 * there until it first wakes: started on another, it ran beside the child's first work,
 * and each copy-on-write fault and madvise of that work sent it a TLB-shootdown interrupt
 * the child waited for (~5 % of a trim child's CPU in the fork loop). The thread that
 * forked keeps its CPUs; the control thread gets them at its first wake-up. */
Test(fork, a_childs_control_thread_starts_on_the_forking_cpu)
{
	cr_assert_eq(sched_getaffinity(0, sizeof(parent_cpus), &parent_cpus), 0);
	if (CPU_COUNT(&parent_cpus) < 2)
		cr_skip_test("one CPU: nothing to start elsewhere");
	set("decay_ms", 0);      /* no decay tick wakes the child's control thread meanwhile */
	set("burst_predict", 0); /* nor a burst preparation's look */
	int got = fork_and_wait(child_control_thread_starts_here);
	cr_assert_neq(got, 1, "the child's control thread started free to run on any CPU");
	cr_assert_neq(got, 3, "the child does not run on its parent's CPUs");
	cr_assert_eq(got, 0, "the child's control thread stayed on one CPU after a wake-up");
}

/* 0: the child's control thread, asleep until its name is due, slept on through a decay
 * pass armed and a measurement asked for (both due later than that) and was woken by a
 * kick due at once; 1: the first two woke it; 4: the last did not; 2: it never slept; 3:
 * the name came due before the child could tell (a loaded machine: the parent tries
 * again). */
static int child_kicks_before_its_name(void)
{
	uint64_t forked = os_now_ns();
	if (!control_thread_asleep())
		return 2;
	pid_t tid = other_thread();
	long before = thread_sleeps(tid);
	__atomic_store_n(&shm_decay_armed, 0, __ATOMIC_RELAXED);
	shm_note_retained(); /* armed: the pass is due at the thread's next tick */
	__atomic_store_n(&op_measure_due_ns, 0, __ATOMIC_RELAXED);
	op_measure_soon(); /* due in a second */
	nanosleep(&(struct timespec){0, 5000000}, NULL);
	long after = thread_sleeps(tid);
	char st = thread_state(tid);
	if (os_now_ns() - forked >= shm_publish_delay_ms() * 1000000u * 4 / 5)
		return 3;
	if (before < 0 || after != before || st != 'S')
		return 1;
	shm_kick_control(os_now_ns()); /* due now: wakes it */
	for (int ms = 0; ms < 5000 && thread_sleeps(tid) == before; ms++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	return thread_sleeps(tid) > before ? 0 : 4;
}

/* A kick that needs the control thread no sooner than it wakes anyway wakes no one: a
 * process's thread sleeps until its name is due (LIBALLOC_PUBLISH_DELAY), and a short
 * program's first large free (which arms the decay pass and asks for a measurement a
 * second later) woke it twice before: each an interrupt to the other CPU, where it then
 * ran beside the program (large_random 8 400 2 32 1: two FUTEX_WAKEs a run, none now). */
Test(fork, kicks_due_after_the_control_threads_wake_up_do_not_wake_it)
{
	if (shm_publish_delay_ms() < 20)
		cr_skip_test("LIBALLOC_PUBLISH_DELAY under 20 ms: no sleep to tell from");
	set("decay_ms", 10000);  /* a pass armed is due 2.5 s after the thread's last look */
	set("burst_predict", 0); /* no preparation kicks meanwhile */
	int got = 3;
	for (int i = 0; i < 20 && got == 3; i++)
		got = fork_and_wait(child_kicks_before_its_name);
	if (got == 3)
		cr_skip_test("the machine is too loaded to fork, look and kick within 40 ms");
	cr_assert_neq(got, 1, "a kick due after the thread's wake-up woke it");
	cr_assert_eq(got, 0, "a kick due at once did not wake the thread");
}

/* The mailbox's page mapped in this process (its page-table entry present,
 * /proc/self/pagemap bit 63: a fault of this process brought it in; mincore would tell the
 * file's page cache, which holds the page from the start where the run directory is on
 * disk, its zeros written): 1, 0, or -1 if unknown. */
static int mailbox_mapped(void)
{
	uintptr_t va = (uintptr_t)&shm_mailbox()->state;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long r = pagemap_present(fd, va, va + 1);
	close(fd);
	return (int)r;
}

/* 0: the child's control thread, asleep while the child's file waits for its name, left the
 * mailbox's page alone, and waited on the doorbell (the page came in) once this thread had
 * named the file; 1: the page came in before the name; 4: it did not come in after it
 * (the thread did not come to the doorbell); 5: no file waiting for its name here (or no
 * pagemap); 3: the name came due before the child could tell (a loaded machine: the parent
 * tries again); 2: the thread never slept. */
static int child_mailbox_before_its_name(void)
{
	uint64_t forked = os_now_ns();
	int first = mailbox_mapped();
	if (!shm_name_pending() || first < 0)
		return 5;
	if (first != 0)
		return 1; /* (the child's segment is fresh: nothing else writes the page) */
	if (!control_thread_asleep())
		return 2;
	pid_t tid = other_thread();
	long before = thread_sleeps(tid);
	nanosleep(&(struct timespec){0, 2000000}, NULL);
	int early = mailbox_mapped();
	if (!shm_name_pending() ||
	    os_now_ns() - forked >= shm_publish_delay_ms() * 1000000u * 4 / 5)
		return 3;
	if (early != 0)
		return 1;
	shm_name_now(false); /* as a set*id call does: the thread must come to the doorbell */
	for (int ms = 0; ms < 5000 && (thread_sleeps(tid) <= before || mailbox_mapped() != 1); ms++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	int got = mailbox_mapped() == 1 ? 0 : 4;
	shm_unpublish(); /* (the child ends by _exit: no stale file left in the run directory) */
	return got;
}

/* The control thread waits on the mailbox's doorbell only once the segment's file has a
 * name: before, nothing outside sees the process, and waiting on the doorbell (a shared
 * futex) faulted its page in, one fault of every process and forked child that ends
 * before its name is due (large_random 8 2 2 32 1: 93.9 -> 93.0 faults a process). */
Test(fork, the_control_thread_leaves_the_mailbox_alone_until_the_file_has_a_name)
{
	if (shm_publish_delay_ms() < 20)
		cr_skip_test(
		        "LIBALLOC_PUBLISH_DELAY under 20 ms: no wait for the name to tell from");
	set("decay_ms", 0);      /* no decay pass wakes the child's thread meanwhile */
	set("burst_predict", 0); /* nor a burst preparation's look */
	int got = 3;
	for (int i = 0; i < 20 && got == 3; i++)
		got = fork_and_wait(child_mailbox_before_its_name);
	if (got == 3)
		cr_skip_test("the machine is too loaded to fork and look within 40 ms");
	if (got == 5)
		cr_skip_test("no segment file waiting for its name here");
	cr_assert_neq(got, 1, "the control thread faulted the mailbox in before the name");
	cr_assert_eq(got, 0, "the control thread did not come to the doorbell once named");
}

/* The transparent huge page mode as this process can read it: 1 "always" (or unknown),
 * 0 otherwise, as os_thp_always answers. */
static int thp_always_here(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (!f)
		return 1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (n == 0 || strstr(buf, "[always]") != NULL)
		return 1;
	/* a multi-size THP size of mode "always" (Linux 6.8) fills unadvised ranges too */
	glob_t g;
	int always = 0;
	if (glob("/sys/kernel/mm/transparent_hugepage/hugepages-*/enabled", 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc && !always; i++) {
			f = fopen(g.gl_pathv[i], "r");
			if (!f)
				continue;
			n = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
			buf[n] = 0;
			always = strstr(buf, "[always]") != NULL;
		}
		globfree(&g);
	}
	return always;
}

/* 0/1: the mode the child knows with no file left to open (RLIMIT_NOFILE 0). */
static int child_thp_mode(void)
{
	setrlimit(RLIMIT_NOFILE, &(struct rlimit){0, 0});
	return os_thp_always() ? 1 : 0;
}

/* A forked child knows the huge page mode from its parent: the parent reads it once at
 * its first fork, not every child that trims or runs its decay pass (`enabled`, the
 * hugepages-* directory and each size's file, hpage_pmd_size). A child that could not read them
 * took the careful answer ("always": measure every page). */
/* Direct mappings across a fork: a thread of the parent grows, sizes and remaps its
 * mappings (lookups without the lock, and with it) while the main thread forks; each child
 * finds the parent's mappings in the table it inherited, resizes and frees them, and
 * makes enough of its own for the table to be rehashed. */
enum { FORK_MAPS = 16 };
static char *fork_maps[FORK_MAPS];
static size_t fork_len[FORK_MAPS];
static int fork_maps_stop;

static void *grow_mappings(void *arg)
{
	(void)arg;
	char *m[8];
	size_t len[8];
	for (int i = 0; i < 8; i++) {
		len[i] = 200 << 10;
		m[i] = A(malloc)(len[i]);
		memset(m[i], i, len[i]);
	}
	for (unsigned n = 0; !__atomic_load_n(&fork_maps_stop, __ATOMIC_RELAXED); n++) {
		int i = (int)(n % 8);
		len[i] = n % 512 == 0 ? 200 << 10 : len[i] + 40;
		m[i] = A(realloc)(m[i], len[i]);
		m[i][len[i] - 1] = (char)i;
		if (A(malloc_usable_size)(m[i]) < len[i] || m[i][0] != (char)i)
			abort();
	}
	for (int i = 0; i < 8; i++)
		A(free)(m[i]);
	return NULL;
}

static int child_uses_mappings(void)
{
	for (int i = 0; i < FORK_MAPS; i++) {
		if (A(malloc_usable_size)(fork_maps[i]) < fork_len[i])
			return 10;
		char *q = A(realloc)(fork_maps[i], fork_len[i] - 100);
		if (q != fork_maps[i] || q[fork_len[i] - 101] != (char)i)
			return 11;
		q = A(realloc)(q, 4 * fork_len[i]); /* remapped */
		if (!q || q[fork_len[i] - 101] != (char)i)
			return 12;
		A(free)(q);
	}
	A(mallopt)(M_MMAP_THRESHOLD, 128 << 10); /* (pinned: the frees above raised it) */
	static char *mine[400];
	for (int i = 0; i < 400; i++)
		if (!(mine[i] = A(malloc)(132 << 10)))
			return 13;
	for (int i = 0; i < 400; i++) {
		if (A(realloc)(mine[i], 132 << 10) != mine[i])
			return 14;
		A(free)(mine[i]);
	}
	return 0;
}

Test(fork, a_child_resizes_and_frees_the_mappings_its_parent_made)
{
	A(malloc_trim)(0);
	for (int i = 0; i < FORK_MAPS; i++) {
		fork_len[i] = (size_t)(150 + 10 * i) << 10;
		fork_maps[i] = A(malloc)(fork_len[i]);
		memset(fork_maps[i], i, fork_len[i]);
	}
	pthread_t t;
	pthread_create(&t, NULL, grow_mappings, NULL);
	for (int k = 0; k < 20; k++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(child_uses_mappings());
		int st = 0;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", k, st);
	}
	__atomic_store_n(&fork_maps_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	for (int i = 0; i < FORK_MAPS; i++)
		A(free)(fork_maps[i]);
}

Test(fork, a_child_knows_the_huge_page_mode_from_its_parent)
{
	set("decay_ms", 0); /* no decay pass (which measures) before the child looks */
	cr_assert_eq(fork_run(child_thp_mode), thp_always_here(),
	             "the child's huge page mode (1: always or unknown) is not its parent's");
}

/* 0/1: the 2 MiB size's mode (os_thp_pmd_always) the child knows with no file left to open
 * (RLIMIT_NOFILE 0: a read fails, and the answer is the careful one, 1). */
static int child_pmd_mode(void)
{
	setrlimit(RLIMIT_NOFILE, &(struct rlimit){0, 0});
	return os_thp_pmd_always() ? 1 : 0;
}

/* ... and the 2 MiB size's mode too (mappings from the ceiling up are rounded to whole page
 * tables unless it is "always"): where a smaller size is "always" (os_thp_always says yes,
 * which does not settle the 2 MiB size), a child would read its two files again at its first
 * such mapping. A fake THP directory: `enabled` madvise, 64 KiB "always", 2 MiB "inherit". */
Test(fork, a_child_knows_the_2mib_huge_page_mode_from_its_parent)
{
	set("decay_ms", 0); /* no decay pass (which measures) before the child looks */
	char dir[] = "/tmp/la-thp-XXXXXX";
	thp_dir_make(dir, "always [madvise] never\n", "always [inherit] madvise never\n",
	             "[always] inherit madvise never\n");
	const char *was = os_thp_dir;
	os_thp_dir = dir;
	os_huge_reread();
	int got = fork_run(child_pmd_mode);
	bool parent_always = os_thp_always(), parent_pmd = os_thp_pmd_always();
	thp_dir_remove(dir);
	os_thp_dir = was;
	os_huge_reread();
	cr_assert(parent_always && !parent_pmd, "the fake directory's modes were not read");
	cr_assert_eq(got, 0,
	             "the child read the 2 MiB size's mode again (1: the careful answer "
	             "with no file to open)");
}

/* Field 22 of /proc/self/stat (the start time in clock ticks since boot), 0 if
 * unreadable. */
static uint64_t own_start_time(void)
{
	char buf[1024];
	char *p = read_proc("/proc/self/stat", buf, sizeof(buf)) ? strrchr(buf, ')') : NULL;
	for (int field = 2; p && *p && field < 22; p++)
		if (*p == ' ')
			field++;
	return p ? strtoull(p, NULL, 10) : 0;
}

/* The bytes this process read so far (rchar, /proc/self/io), UINT64_MAX if unreadable. */
static uint64_t bytes_read(void)
{
	char buf[512];
	char *p = read_proc("/proc/self/io", buf, sizeof(buf)) ? strstr(buf, "rchar:") : NULL;
	return p ? strtoull(p + 6, NULL, 10) : UINT64_MAX;
}

/* This process's segment is named LIBALLOC_PUBLISH_DELAY (50 ms) after its start: waited
 * for, up to 10 s. */
static void wait_named(void)
{
	for (int i = 0; i < 10000 && !__atomic_load_n(&shm_path()[0], __ATOMIC_ACQUIRE); i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	cr_assert_neq(shm_path()[0], 0, "this process published its segment");
}

/* 0: the start time the child published is its own and it did not read /proc/self/stat
 * for it, 1: it read it, 2: the published one is not its own. The child's reads before
 * this are whole pages of its parent's segment (shm_fork_child), so a read of
 * /proc/self/stat (a line of a few hundred bytes) leaves rchar off a page multiple. */
static int child_start_time(void)
{
	uint64_t rchar = bytes_read();
	shm_name_now(false); /* the identity is written when the file is named (50 ms later) */
	if (shm_header()->start_time != own_start_time())
		return 2;
	return rchar % 4096 != 0;
}

/* A forked child publishes its start time (the daemon tells a reused pid by it) without
 * reading /proc/self/stat, which took ~3 % of the fork loop's children's CPU: the clone
 * happened between the parent's prepare handler and the child's handler, and when both
 * readings of CLOCK_BOOTTIME fall in the same clock tick, that tick is the start time.
 * When a tick begins between them the child still reads /proc: of 20 children, at least
 * one must not have (and each must publish its own start time). */
Test(fork, a_child_publishes_its_start_time_without_reading_proc)
{
	wait_named();
	int without = 0;
	for (int i = 0; i < 20; i++) {
		int got = fork_run(child_start_time);
		cr_assert_neq(got, 2, "a child published a start time that is not its own");
		without += got == 0;
	}
	cr_assert_gt(without, 0, "every child read /proc/self/stat for its start time");
	cr_log_info("%d of 20 children published their start time without /proc", without);
}

/* 0: the child's arena 0 counts what it had at the clone; 1: what its parent wrote after */
static int child_stats(void)
{
	return __atomic_load_n(&arenas[0].c->munmap_calls, __ATOMIC_RELAXED) != stats_at_fork;
}

/* A child's statistics are those of the clone, not what its parent wrote into the shared
 * file after it and before the child's handler copied the file: the child got counters that
 * no state of its own matched, and its gauges went below zero (forkfree: free resident
 * bytes after the first trim in 117-177 of 400 children, cached bytes at the start in
 * 31-38). */
Test(fork, a_child_counts_what_it_held_at_the_fork_not_what_its_parent_wrote_after)
{
	wait_named();
	set("decay_ms", 0); /* no decay pass moves arena 0's counters meanwhile */
	stats_flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(stats_flag, MAP_FAILED);
	*stats_flag = 1;
	int got = fork_run(child_stats);
	cr_assert_eq(*stats_flag, 2, "the parent wrote the counter after the clone");
	stats_flag = NULL;
	__atomic_fetch_sub(&arenas[0].c->munmap_calls, 1000, __ATOMIC_RELAXED);
	cr_assert_eq(got, 0, "the child counts the 1000 calls its parent added after the fork");
}

/* A forked child's cached_bytes is what its own cache holds in each arena (the others'
 * caches are lost to it), whatever the other threads were publishing at the fork: a
 * publish adds to the gauge and stores its cache's count, two steps, and the prepare
 * handler's snapshot of the gauges or the clone's copy of that cache could fall between
 * them (the child took the snapshot less the lost caches' counts: 7-11 of 300 children
 * read a wrong gauge, below zero in most). Workers churn blocks beside every fork; each
 * child checks every arena against its transfer cache and its own cache, as
 * tests/unit/accounting.c checks a live process. */
enum { PUB_WORKERS = 3, PUB_SLOTS = 4096, PUB_FORKS = 300 };
static int pub_stop;
static void *pub_worker(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
	static void *slots[PUB_WORKERS][PUB_SLOTS];
	void **slot = slots[(uintptr_t)arg];
	while (!__atomic_load_n(&pub_stop, __ATOMIC_RELAXED)) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		unsigned i = (unsigned)(s % PUB_SLOTS);
		A(free)(slot[i]);
		slot[i] = A(malloc)(16 + (s >> 20) % 1000);
	}
	for (int i = 0; i < PUB_SLOTS; i++)
		A(free)(slot[i]);
	return NULL;
}
static int child_cached_is_its_own(void)
{
	for (uint32_t i = 0; i < arena_count; i++) {
		struct arena *a = &arenas[i];
		uint64_t cached = __atomic_load_n(&a->c->cached_bytes, __ATOMIC_RELAXED);
		if (cached != a->xfer_bytes + tcache_published(a))
			return 1;
	}
	return 0;
}
Test(fork, a_childs_cached_bytes_are_its_own_caches_whatever_the_others_were_publishing,
     .timeout = 120)
{
	set("decay_ms", 0); /* no decay pass takes a cache in the child meanwhile */
	pthread_t t[PUB_WORKERS];
	for (uintptr_t i = 0; i < PUB_WORKERS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, pub_worker, (void *)i), 0);
	int wrong = 0;
	for (int f = 0; f < PUB_FORKS; f++)
		wrong += fork_run(child_cached_is_its_own) != 0;
	__atomic_store_n(&pub_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < PUB_WORKERS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(wrong, 0, "%d of %d children read a cached_bytes not their own caches'", wrong,
	             PUB_FORKS);
}

/* A forked child's metadata_bytes counts the one thread cache it holds (its own) and none
 * of the others, whatever threads were starting or exiting at the fork: the child takes
 * each cache on its copy of the list off the gauge but its own (tcache_fork_child), and a
 * thread counted its cache after listing it and took it off after unlisting it, outside the
 * list's lock, which a fork holds from its snapshot of the gauges to the clone. A fork
 * between the two left a cache on the gauge that no list held (an exiting thread's flush
 * lies between: 15-29 of 300 children here one cache over) or took off one never counted.
 * Threads start, fill a few bins, free and exit beside every fork; each child's figure is
 * compared with that of a child forked while none ran (the rest of the process block's
 * metadata: the arenas, their rings, the heaps' owner pages, which a first round of the
 * same threads makes). */
enum { META_SPAWNERS = 2, META_FORKS = 300, META_ROUNDS = 12, META_BLOCKS = 24 };
static int meta_stop;
static uint64_t meta_want;
static void *meta_thread(void *arg)
{
	void *p[META_BLOCKS];
	for (int i = 0; i < META_BLOCKS; i++)
		p[i] = A(malloc)(16 + 40 * (size_t)i);
	for (int i = 0; i < META_BLOCKS; i++)
		A(free)(p[i]); /* cached: its exit flushes them */
	return arg;
}
static void *meta_spawner(void *arg)
{
	uintptr_t *rounds = arg;
	while (!__atomic_load_n(&meta_stop, __ATOMIC_RELAXED)) {
		pthread_t t;
		if (pthread_create(&t, NULL, meta_thread, NULL) == 0)
			pthread_join(t, NULL);
		__atomic_fetch_add(rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}
static void meta_spawn(pthread_t *t, uintptr_t *rounds)
{
	__atomic_store_n(&meta_stop, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < META_SPAWNERS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, meta_spawner, rounds), 0);
}
static void meta_join(pthread_t *t)
{
	__atomic_store_n(&meta_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < META_SPAWNERS; i++)
		pthread_join(t[i], NULL);
}
static uint64_t *meta_seen; /* a shared page: the reference child's figure */
static int child_metadata_delta(void)
{
	uint64_t m = __atomic_load_n(&shm_process_block()->c.metadata_bytes, __ATOMIC_RELAXED);
	return m == meta_want ? 0 : m > meta_want ? 1 : 2;
}
static int child_metadata_tell(void)
{
	*meta_seen = __atomic_load_n(&shm_process_block()->c.metadata_bytes, __ATOMIC_RELAXED);
	return 0;
}
static uint64_t child_metadata(void)
{
	*meta_seen = 0;
	cr_assert_eq(fork_run(child_metadata_tell), 0);
	return *meta_seen;
}
Test(fork, a_childs_metadata_bytes_count_its_own_cache_whatever_threads_start_or_exit,
     .timeout = 120)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* (ASan: a child forked while another thread starts or ends one hangs in the start of
	 * its control thread, on the sanitizer's thread registry lock, which the fork copied
	 * held: 2 of 3 runs) */
	cr_skip_test("the sanitizer's thread registry is not forked with the threads' starts");
#endif
	set("decay_ms", 0);
	meta_seen = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(meta_seen, MAP_FAILED);
	A(free)(A(malloc)(64)); /* this thread's cache: the children's one */
	pthread_t t[META_SPAWNERS];
	uintptr_t rounds = 0;
	meta_spawn(t, &rounds);
	while (__atomic_load_n(&rounds, __ATOMIC_RELAXED) < 200)
		sched_yield();
	meta_join(t);
	/* Rounds of forks between two children forked while no thread ran: a round whose two
	 * read different figures made more of the other metadata meanwhile (a ring, which an
	 * arena maps at its first remote frees, once; that metadata only grows) and is not
	 * counted. */
	int over = 0, under = 0, forks = 0, round;
	for (round = 0; round < META_ROUNDS && forks < META_FORKS; round++) {
		meta_want = child_metadata();
		meta_spawn(t, &rounds);
		int o = 0, u = 0;
		for (int f = 0; f < META_FORKS / 3; f++) {
			int got = fork_run(child_metadata_delta);
			o += got == 1;
			u += got == 2;
		}
		meta_join(t);
		if (child_metadata() != meta_want)
			continue;
		over += o;
		under += u;
		forks += META_FORKS / 3;
	}
	cr_assert_geq(forks, META_FORKS, "(set-up) %d rounds of %d, %d forks counted", round,
	              META_ROUNDS, forks);
	cr_assert(over + under == 0,
	          "%d of %d children counted more metadata than their own, %d less (%llu bytes "
	          "a cache)",
	          over, forks, under, (unsigned long long)sizeof(struct tcache));
}

/* A forked child holds an arena's ring of remote frees exactly when its gauges count it:
 * the first remote free to an arena maps the ring, sets it and counts it (metadata and
 * address space), and a fork between the mapping and the count left the child the mapping
 * uncounted. Here the freeing thread's mapping of the ring (this file's mmap, below) waits
 * for a fork of another thread, until that fork is over or waits for the lock under which
 * a ring is mapped and counted now (arena_ring_lock); the child says whether the ring's
 * mapping is there and what its gauges count beyond a child's forked just before. */
static pid_t ring_tid; /* the thread whose ring mapping waits for a fork */
static void *ring_mapped;
static int ring_state; /* 1: mapped, waiting; 2: the fork is over */
static bool ring_lock_waited(void)
{
	return __atomic_load_n(&arena_ring_lock.word, __ATOMIC_RELAXED) & FUTEX_WAITERS;
}
/* (the direct mappings' test, below: this file's mmap and munmap count the calls made, and
 * stop the one it names on its way) */
static void dm_stop(void *p, size_t len, int op);
static uint64_t dm_mmaps, dm_mmap_bytes, dm_munmaps, dm_munmap_bytes;
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
	static mmap_fn real;
	if (!real)
		real = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
	void *p = real(addr, len, prot, flags, fd, off);
	__atomic_fetch_add(&dm_mmaps, 1, __ATOMIC_SEQ_CST);
	if (p != MAP_FAILED) {
		__atomic_fetch_add(&dm_mmap_bytes, len, __ATOMIC_SEQ_CST);
		dm_stop(p, len, 0);
	}
	if (p != MAP_FAILED && len == RR_SLOTS * sizeof(void *) &&
	    __atomic_load_n(&ring_tid, __ATOMIC_ACQUIRE) == (pid_t)syscall(SYS_gettid) &&
	    !__atomic_load_n(&ring_state, __ATOMIC_ACQUIRE)) {
		ring_mapped = p;
		__atomic_store_n(&ring_state, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&ring_state, __ATOMIC_ACQUIRE) != 2 && !ring_lock_waited())
			sched_yield();
	}
	return p;
}
struct ring_seen {
	uint64_t meta, space;
	int mapped;
};
static struct ring_seen *ring_seen; /* a shared page: [0] before, [1] at the ring */
static int ring_slot;
static int child_ring_seen(void)
{
	struct ring_seen *s = &ring_seen[ring_slot];
	s->meta = shm_process_block()->c.metadata_bytes;
	s->space = shm_process_block()->c.address_space_bytes;
	unsigned char v;
	s->mapped = ring_mapped && mincore(ring_mapped, 4096, &v) == 0;
	return 0;
}
static void *ring_freer(void *arg)
{
	struct owner *o = arg;
	A(free)(A(malloc)(48)); /* its arena, before the first child */
	__atomic_store_n(&ring_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	__atomic_store_n(&ring_state, 0, __ATOMIC_RELEASE);
	pthread_barrier_wait(&o->done); /* (the first child forked) */
	for (int i = 0; i < FOREIGN; i++)
		A(free)(o->blocks[i]); /* the 65th hands the first 64 over: the ring */
	__atomic_store_n(&ring_tid, 0, __ATOMIC_RELEASE);
	return NULL;
}
Test(fork, a_child_holds_an_arenas_ring_exactly_when_its_gauges_count_it)
{
	set("decay_ms", 0);   /* no decay pass meanwhile */
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	ring_seen = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(ring_seen, MAP_FAILED);
	A(free)(A(malloc)(64));
	struct owner o;
	pthread_t ot, ft;
	start_owner(&o, fill_foreign, &ot);
	for (uint32_t i = 0; i < arena_count; i++)
		cr_assert_null(arenas[i].rr, "(set-up) arena %u has a ring already", i);
	/* the freer's barrier with the owner's `done` comes first: the owner stays */
	struct owner f = o;
	pthread_barrier_init(&f.done, NULL, 2);
	cr_assert_eq(pthread_create(&ft, NULL, ring_freer, &f), 0);
	while (!__atomic_load_n(&ring_tid, __ATOMIC_ACQUIRE))
		sched_yield();
	ring_slot = 0;
	cr_assert_eq(fork_run(child_ring_seen), 0);
	pthread_barrier_wait(&f.done);
	while (__atomic_load_n(&ring_state, __ATOMIC_ACQUIRE) != 1)
		sched_yield();
	ring_slot = 1;
	cr_assert_eq(fork_run(child_ring_seen), 0);
	__atomic_store_n(&ring_state, 2, __ATOMIC_RELEASE);
	pthread_join(ft, NULL);
	pthread_barrier_wait(&o.done);
	pthread_join(ot, NULL);
	struct ring_seen *b = &ring_seen[0], *r = &ring_seen[1];
	cr_assert(!b->mapped, "(set-up) the first child held the ring");
	uint64_t want = r->mapped ? RR_SLOTS * sizeof(void *) : 0;
	cr_assert_eq(r->meta - b->meta, want,
	             "the child %s the ring's %zu bytes, its metadata counts %lld more",
	             r->mapped ? "holds" : "does not hold", RR_SLOTS * sizeof(void *),
	             (long long)(r->meta - b->meta));
	cr_assert_eq(r->space - b->space, want,
	             "the child %s the ring's %zu bytes, its address space counts %lld more",
	             r->mapped ? "holds" : "does not hold", RR_SLOTS * sizeof(void *),
	             (long long)(r->space - b->space));
}

/* One of the child's mmap/munmap counters against the calls the hooks saw made */
static void dm_counted(uint64_t counted, uint64_t made, const char *what, const char *done)
{
	cr_assert_eq(counted, made, "the child counts %llu %s more, %llu were %s",
	             (unsigned long long)counted, what, (unsigned long long)made, done);
}

/* A forked child holds a direct mapping exactly when its address space counts it, and its
 * mmap and munmap counters count the calls it saw made. A direct mapping is made, and unmapped,
 * outside direct_lock, and it was counted after its mmap and before its munmap (the calls
 * after each): a fork of another thread between the two left the child a mapping its address
 * space did not count (or one it counted gone), and an mmap its counters did not count. Here
 * a thread's new 600 KiB mapping (its mmap, this file's, after the call) or its unmapping
 * (its munmap, before the call) waits for another thread's fork until that fork is over or
 * waits for it (direct_fork_waits: the calls are made in windows, direct.c); the child says
 * whether it holds the mapping and what its counters count beyond a child's forked just
 * before, and whether its table lists the mapping as a live one (the new mapping's entry,
 * which its thread makes once it holds direct_lock again, is the child's to make: the
 * thread waits for the lock the fork holds). */
#define DM_LEN ((size_t)600 << 10)
static pid_t dm_tid;   /* the thread whose call waits for a fork */
static int dm_op;      /* 0: its mmap waits (after the call), 1: its munmap (before it) */
static int dm_state;   /* 1: at the call, waiting; 2: the fork is over */
static void *dm_addr;  /* the mapping */
static void *dm_block; /* the thread's block, for its free */
static void dm_stop(void *p, size_t len, int op)
{
	if ((op == 2 ? len < 2 * DM_LEN : len != DM_LEN) ||
	    op != __atomic_load_n(&dm_op, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&dm_tid, __ATOMIC_ACQUIRE) != (pid_t)syscall(SYS_gettid) ||
	    __atomic_load_n(&dm_state, __ATOMIC_ACQUIRE))
		return;
	dm_addr = p;
	__atomic_store_n(&dm_state, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&dm_state, __ATOMIC_ACQUIRE) != 2 && !direct_fork_waits())
		sched_yield();
}
/* (op 2: a realloc's growth of the mapping, its mremap stopped after the call) */
void *mremap(void *old, size_t old_len, size_t len, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	void *to = flags & MREMAP_FIXED ? va_arg(ap, void *) : NULL;
	va_end(ap);
	void *q = (void *)syscall(SYS_mremap, old, old_len, len, flags, to);
	if ((long)q < 0 && (long)q > -4096) {
		errno = (int)-(long)q;
		return MAP_FAILED;
	}
	dm_stop(q, len, 2);
	return q;
}
int munmap(void *addr, size_t len)
{
	dm_stop(addr, len, 1);
	int r = (int)syscall(SYS_munmap, addr, len);
	__atomic_fetch_add(&dm_munmaps, 1, __ATOMIC_SEQ_CST);
	if (r == 0)
		__atomic_fetch_add(&dm_munmap_bytes, len, __ATOMIC_SEQ_CST);
	return r;
}
struct dm_seen {
	uint64_t space, mmaps, mmap_bytes, munmaps, munmap_bytes; /* the counters */
	uint64_t made, made_bytes, unmade, unmade_bytes;          /* the calls this file saw */
	int mapped;
	uint64_t dmaps, dbytes, live; /* direct_mappings, direct_bytes; the table's live entries */
	int listed;                   /* the table lists the mapping */
};
static struct dm_seen *dm_seen; /* a shared page: [0] before, [1] at the call */
static int dm_slot;
static int child_dm_seen(void)
{
	struct dm_seen *s = &dm_seen[dm_slot];
	struct la_counters *c = &shm_process_block()->c;
	s->space = c->address_space_bytes;
	s->mmaps = c->mmap_calls;
	s->mmap_bytes = c->mmap_bytes;
	s->munmaps = c->munmap_calls;
	s->munmap_bytes = c->munmap_bytes;
	s->made = dm_mmaps;
	s->made_bytes = dm_mmap_bytes;
	s->unmade = dm_munmaps;
	s->unmade_bytes = dm_munmap_bytes;
	unsigned char v;
	s->mapped = dm_addr && mincore(dm_addr, 4096, &v) == 0;
	s->dmaps = c->direct_mappings;
	s->dbytes = c->direct_bytes;
	s->live = direct_count();
	s->listed = dm_addr && direct_usable(dm_addr) != 0;
	return 0;
}
static void *dm_thread(void *arg)
{
	pthread_barrier_t *go = arg;
	A(free)(A(malloc)(48)); /* its cache and arena, before the first child */
	if (dm_op >= 1)
		dm_block = A(malloc)(DM_LEN); /* mapped before the first child */
	__atomic_store_n(&dm_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	pthread_barrier_wait(go); /* (the first child forked) */
	if (dm_op == 0)
		dm_block = A(malloc)(DM_LEN);
	else if (dm_op == 1)
		A(free)(dm_block);
	else
		dm_block = A(realloc)(dm_block, 2 * DM_LEN);
	__atomic_store_n(&dm_tid, 0, __ATOMIC_RELEASE);
	return NULL;
}
static void dm_run(int op)
{
	set("decay_ms", 0);     /* no decay pass meanwhile */
	set("mmap_dynamic", 0); /* a free unmaps it at once (nothing recycled: not cached) */
	dm_seen = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(dm_seen, MAP_FAILED);
	A(free)(A(malloc)(64));
	A(malloc_trim)(0); /* no mapping cached or kept for the heaps: the thread's is new */
	dm_op = op;
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, 2);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, dm_thread, &go), 0);
	while (!__atomic_load_n(&dm_tid, __ATOMIC_ACQUIRE))
		sched_yield();
	if (op >= 1)
		dm_addr = dm_block; /* (page-aligned: its mapping's start) */
	dm_slot = 0;
	cr_assert_eq(fork_run(child_dm_seen), 0);
	pthread_barrier_wait(&go);
	while (__atomic_load_n(&dm_state, __ATOMIC_ACQUIRE) != 1)
		sched_yield();
	dm_slot = 1;
	cr_assert_eq(fork_run(child_dm_seen), 0);
	__atomic_store_n(&dm_state, 2, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	if (op != 1)
		A(free)(dm_block);
	struct dm_seen *b = &dm_seen[0], *r = &dm_seen[1];
	cr_assert(b->mapped == (op >= 1), "(set-up) the first child %s the mapping",
	          b->mapped ? "held" : "did not hold");
	if (op == 2) {
		/* the grown mapping, moved or not, is the child's live block, of the length its
		 * address space grew to */
		cr_assert(r->mapped && b->listed, "(set-up) both children held the mapping");
		cr_assert(r->listed,
		          "the child holds the grown mapping, its table does not list it");
		cr_assert_eq(r->live, b->live, "the child's table has %lld more live entries",
		             (long long)(r->live - b->live));
		cr_assert_eq(r->dmaps, b->dmaps, "the child's direct_mappings counts %lld more",
		             (long long)(r->dmaps - b->dmaps));
		cr_assert_gt(r->space, b->space, "(set-up) the child's address space grew");
		cr_assert_eq(
		        r->dbytes - b->dbytes, r->space - b->space,
		        "the child's direct_bytes counts %lld more, its address space %lld more",
		        (long long)(r->dbytes - b->dbytes), (long long)(r->space - b->space));
		return;
	}
	long long want = (long long)r->mapped - b->mapped;
	cr_assert_eq((long long)(r->space - b->space), want * (long long)DM_LEN,
	             "the child %s the mapping's %zu bytes, its address space counts %lld more",
	             r->mapped ? "holds" : "does not hold", DM_LEN,
	             (long long)(r->space - b->space));
	dm_counted(r->mmaps - b->mmaps, r->made - b->made, "mmap calls", "made");
	dm_counted(r->mmap_bytes - b->mmap_bytes, r->made_bytes - b->made_bytes, "mmap bytes",
	           "mapped");
	dm_counted(r->munmaps - b->munmaps, r->unmade - b->unmade, "munmap calls", "made");
	dm_counted(r->munmap_bytes - b->munmap_bytes, r->unmade_bytes - b->unmade_bytes,
	           "munmap bytes", "unmapped");
	/* and its table lists it, and counts it live, exactly then: the thread's new mapping,
	 * made and counted as address space, waits for direct_lock (which the fork holds) to
	 * be entered; the child makes its entry (direct_fork_child). It held one that no
	 * table listed, nor direct_mappings, direct_bytes or allocated_bytes counted. */
	cr_assert_eq(r->listed, r->mapped, "the child %s the mapping, its table %s it",
	             r->mapped ? "holds" : "does not hold", r->listed ? "lists" : "does not list");
	cr_assert_eq((long long)(r->live - b->live), want,
	             "the child %s the mapping, its table has %lld more live entries",
	             r->mapped ? "holds" : "does not hold", (long long)(r->live - b->live));
	cr_assert_eq((long long)(r->dmaps - b->dmaps), want,
	             "the child %s the mapping, direct_mappings counts %lld more",
	             r->mapped ? "holds" : "does not hold", (long long)(r->dmaps - b->dmaps));
	cr_assert_eq((long long)(r->dbytes - b->dbytes), want * (long long)DM_LEN,
	             "the child %s the mapping's %zu bytes, direct_bytes counts %lld more",
	             r->mapped ? "holds" : "does not hold", DM_LEN,
	             (long long)(r->dbytes - b->dbytes));
}
Test(fork, a_child_holds_a_new_direct_mapping_exactly_when_its_counts_say_so)
{
	dm_run(0);
}
Test(fork, a_child_holds_an_unmapped_direct_mapping_exactly_when_its_counts_say_so)
{
	dm_run(1);
}
/* A realloc that grows a direct mapping (its mremap, after the call) while another thread
 * forks: the child's table lists the grown mapping as its live block, counted at its new
 * length. The thread's realloc takes the mapping out of the table, remaps it and enters it
 * again once it holds direct_lock (which the fork holds): the child listed no mapping there
 * (the block's free in the child was an invalid pointer) and counted it live still. */
Test(fork, a_child_lists_a_direct_mapping_another_threads_realloc_grows)
{
	dm_run(2);
}

/* A forked child of a published process does not read its parent's header (a fault for
 * nothing, the page the child maps its own file over at once: 5fdcb25): the header's fields
 * it needs come from the prepare handler's snapshot, and the child, its parent's header
 * page made unreadable before liballoc's handler runs, starts and exits. */
Test(fork, a_child_does_not_read_its_parents_header)
{
	wait_named();
	header_guard = true;
	pid_t pid = fork();
	if (pid == 0)
		_exit(shm_header()->magic == LA_SHM_MAGIC ? 0 : 3); /* its own file's */
	header_guard = false;
	cr_assert_gt(pid, 0);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child: %s %d",
	          WIFSIGNALED(st) ? "signal" : "exit status",
	          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* 0: the child named its file in the pid namespace its parent's was named in; 1: in the
 * one its parent's file said after the clone */
static int child_pidns(void)
{
	shm_name_now(false);
	return shm_header()->pidns_ino != ident_pidns;
}

/* The header's fields a forked child reads before it moves to a file of its own (the pid
 * namespace its file is named in, whether its parent's control thread ran) come from the
 * parent's prepare handler, not from the parent's file: the fork copies no page-table
 * entry of a shared mapping, so that read faulted the parent's header page in (and the
 * cached pages around it) just before the child mapped its own file over it, a fault in
 * every forked child of a published process (forkfree 20 4 plain: shm_fork_child's read
 * of arena_count, 20 faults in 20 children). */
Test(fork, a_child_reads_its_parents_header_fields_from_before_the_clone)
{
	wait_named();
	ident_flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(ident_flag, MAP_FAILED);
	*ident_flag = 1;
	ident_pidns = shm_header()->pidns_ino;
	int got = fork_run(child_pidns);
	cr_assert_eq(*ident_flag, 2, "the parent wrote the header after the clone");
	ident_flag = NULL;
	shm_header()->pidns_ino = ident_pidns;
	cr_assert_eq(got, 0,
	             "the child took the pid namespace its parent's file said after the "
	             "fork");
}

/* 0: the child's file, before and after its own naming, holds the identity its parent's
 * file was named with (pid, executable, user namespace); 1: before its naming, it does
 * not; 2: after; 3: the child's segment is not a file waiting for its name (its control
 * thread named it first, or it has none); 4: that thread named it while the child looked
 * (both: a loaded machine). */
static int child_identity(void)
{
	struct la_shm_header *h = shm_header();
	if (!shm_name_pending())
		return 3;
	bool kept = h->pid == named_pid && h->userns_ino == named_userns &&
	            memcmp(h->exe, named_exe, sizeof(named_exe)) == 0;
	if (!shm_name_pending()) /* (the naming writes the identity while it is not) */
		return 4;
	int got = kept ? 0 : 1;
	shm_name_now(false);
	if (!got &&
	    (h->pid != getpid() || h->userns_ino != named_userns || strcmp(h->exe, named_exe) != 0))
		got = 2;
	shm_unpublish(); /* (the child ends by _exit: no file left in the run directory) */
	return got;
}

/* A forked child's file is written from the prepare handler's copy of the segment (one
 * pwrite), unless the parent's file was named between that copy and the clone: the copy
 * then lacks the identity the naming wrote (pid, executable, user namespace), which the
 * child keeps from its parent's file (seg_forked: write_identity keeps the executable, and
 * the user namespace where the parent's control thread ran), so that file is copied
 * instead (fork_file: fork_named != seg_forked). Here a handler after liballoc's names
 * the file at the fork: the child must find the identity in its own file, and keep the
 * user namespace through its naming (its parent's control thread ran: it is not read
 * again). */
Test(fork, a_child_of_a_file_named_after_the_snapshot_keeps_the_identity_from_the_file)
{
	if (!shm_name_pending())
		cr_skip_test("this process's file was named before the test (or has no file)");
	/* what the naming does after it, here first: the SIGBUS handler and its dlsym lookups
	 * (they may allocate, and the prepare handler holds every arena's lock) */
	sigbus_install();
	name_at_fork = true;
	int got = fork_run(child_identity);
	name_at_fork = false;
	if (!named_at_fork)
		cr_skip_test("the file was named before the fork's snapshot (a loaded machine)");
	if (got == 3 || got == 4)
		cr_skip_test("the child's file was named before the child looked (a loaded "
		             "machine), or it has none");
	cr_assert_neq(named_exe[0], 0, "the naming wrote the executable");
	cr_assert_neq(got, 1, "the child's file lacks the identity its parent's was named with");
	cr_assert_eq(got, 0, "the child's naming lost the identity from its parent's file");
}

static int child_exits(void)
{
	return 0;
}

/* The faults liballoc's child handler took in a child forked now (median of 5). */
static long handler_faults(void)
{
	long got[5];
	for (int i = 0; i < 5; i++) {
		*faults_shared = -1;
		cr_assert_eq(fork_run(child_exits), 0);
		cr_assert_geq(*faults_shared, 0, "the last child handler ran");
		got[i] = *faults_shared;
	}
	for (int i = 1; i < 5; i++)
		for (int j = i; j > 0 && got[j] < got[j - 1]; j--) {
			long t = got[j];
			got[j] = got[j - 1];
			got[j - 1] = t;
		}
	return got[2];
}

/* The pages of its parent's statistics a child copies, in its segment (its first pages). */
static size_t copied_pages(void)
{
	struct la_shm_header *h = shm_header();
	return (h->off_arenas + h->arena_count * h->arena_stride + 4095) / 4096;
}

/* A forked child maps the pages of the segment it copied from its parent's file (the
 * statistics of every arena, ~2 KiB each) a fault for up to 16 of them, not one a page:
 * its handler reads them in turn, and the kernel maps the cached pages around each fault
 * (tmpfs), before the handler writes them. Two children, forked before and after the
 * parent's arenas grew by 40: the later one copies 20 pages of statistics more, and its
 * handler takes more faults for the arenas' own structures (which it writes, ~1.8 KiB
 * each) and at most two windows of those pages (a fault a page without the reads, a
 * window's worth more with a read of the first page only). */
Test(fork, a_child_maps_the_segment_it_copied_in_one_fault)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	cr_skip_test("the sanitizer's shadow pages fault beside liballoc's");
#endif
	wait_named();
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", shm_path());
	struct statfs fs;
	if (statfs(dirname(dir), &fs) != 0 || fs.f_type != TMPFS_MAGIC)
		cr_skip_test("the run directory is not on tmpfs (its file is advised MADV_RANDOM)");
	set("decay_ms", 0); /* no decay pass meanwhile */
	set("arena_max", 64);
	A(free)(A(malloc)(64)); /* this thread has its own arena */
	faults_shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(faults_shared, MAP_FAILED);
	pthread_atfork(NULL, NULL, faults_child_last); /* after liballoc's */
	size_t pages_before = copied_pages();
	uint32_t arenas_before = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	long before = handler_faults();
	enum { OWNERS = 40 };
	struct owner o[OWNERS];
	pthread_t t[OWNERS];
	for (int i = 0; i < OWNERS; i++)
		start_owner(&o[i], fill_small_large, &t[i]);
	size_t pages_after = copied_pages();
	uint32_t arenas_after = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	cr_assert_geq(pages_after, pages_before + 18, "40 arenas more: %zu -> %zu pages copied",
	              pages_before, pages_after);
	long after = handler_faults();
	for (int i = 0; i < OWNERS; i++) {
		pthread_barrier_wait(&o[i].done);
		pthread_join(t[i], NULL);
	}
	/* the new arenas' structures, which the handler writes (arena_reinit_child) */
	long structs =
	        (long)(((arenas_after - arenas_before) * sizeof(struct arena) + 4095) / 4096) + 1;
	cr_log_info("child handler: %ld faults with %zu pages copied, %ld with %zu (arenas' "
	            "structures: %ld pages more)",
	            before, pages_before, after, pages_after, structs);
	cr_assert_leq(after - before, structs + 2,
	              "the child's handler took %ld faults with %zu pages of statistics to copy, "
	              "%ld with %zu (%ld pages of arena structures more): a fault a page",
	              before, pages_before, after, pages_after, structs);
}

/* pthread_attr_setsigmask_np calls (os_thread_attr makes a thread's attributes with it),
 * counted on their way to libc's */
static uint32_t sigmask_attrs, sigmask_attrs_at_fork;

int pthread_attr_setsigmask_np(pthread_attr_t *attr, const sigset_t *set)
{
	typedef int (*set_fn)(pthread_attr_t *, const sigset_t *);
	static set_fn real;
	if (!real)
		real = (set_fn)dlsym(RTLD_NEXT, "pthread_attr_setsigmask_np");
	__atomic_fetch_add(&sigmask_attrs, 1, __ATOMIC_RELAXED);
	return real ? real(attr, set) : ENOSYS;
}

/* 0: the child's control thread runs, started without its attributes made again; 1: they
 * were made again; 2: it does not run */
static int child_made_attributes(void)
{
	if (shm_header()->control_state != LA_CONTROL_RUNNING)
		return 2;
	return __atomic_load_n(&sigmask_attrs, __ATOMIC_RELAXED) != sigmask_attrs_at_fork;
}

/* A forked child starts its control thread with the attributes its parent made before its
 * first fork (control.c, control_fork_prepare): made anew in each child, their signal mask's
 * allocation and its free wrote two pages of the heap the child shares with its parent, ~2
 * copy-on-write faults in every child of the fork loop. The second child of this process
 * makes none. */
Test(fork, a_child_starts_its_control_thread_with_the_attributes_its_parent_made)
{
	if (shm_header()->control_state != LA_CONTROL_RUNNING)
		cr_skip_test("no control thread in this process");
	sigmask_attrs_at_fork = UINT32_MAX; /* the first child: any */
	cr_assert_neq(fork_run(child_made_attributes), 2,
	              "the child's control thread does not run");
	sigmask_attrs_at_fork = __atomic_load_n(&sigmask_attrs, __ATOMIC_RELAXED);
	int got = fork_run(child_made_attributes);
	cr_assert_neq(got, 2, "the child's control thread does not run");
	cr_assert_eq(got, 0, "the child made its control thread's attributes again");
}

/* Another thread's cache rows are left out of a forked child (MADV_WIPEONFORK, tcache.c
 * rows_for_fork): the child reads zeros there, so the fork neither copied nor
 * write-protected them (the parent's next free into them would fault, after every fork),
 * while the forking thread's own cache works in the child; the thread's exit copies its
 * rows again before they go back to its arena. */
static struct {
	void *block;  /* the block the worker freed into its cache */
	void **slotp; /* the row slot that holds it */
	void *rows;   /* its cache's slot rows (struct tslots) */
	int stage;    /* 1: ready, 2: may exit (futex word) */
} rows_w;

static void stage_wait(int want)
{
	while (__atomic_load_n(&rows_w.stage, __ATOMIC_ACQUIRE) != want)
		syscall(SYS_futex, &rows_w.stage, FUTEX_WAIT_PRIVATE,
		        __atomic_load_n(&rows_w.stage, __ATOMIC_RELAXED), NULL, NULL, 0);
}

static void stage_set(int v)
{
	__atomic_store_n(&rows_w.stage, v, __ATOMIC_RELEASE);
	syscall(SYS_futex, &rows_w.stage, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static void *rows_worker(void *arg)
{
	(void)arg;
	void *p = A(malloc)(64);
	A(free)(p); /* on its bin's row, at the top */
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		struct tbin *b = &la_tcache.bins[c];
		if (b->top != b->slot && *b->top == p)
			rows_w.slotp = b->top;
	}
	rows_w.block = p;
	rows_w.rows = la_tcache.slots;
	stage_set(1);
	stage_wait(2);
	return NULL;
}

/* The VmFlags of the mapping that holds p include "wf" (MADV_WIPEONFORK). */
static bool wipe_on_fork(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	cr_assert(f);
	char line[512];
	bool in = false, wf = false;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = lo <= (uintptr_t)p && (uintptr_t)p < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0)
			wf = strstr(line, " wf") != NULL;
	}
	fclose(f);
	return wf;
}

Test(fork, another_threads_cache_rows_are_left_out_of_a_child)
{
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, rows_worker, NULL), 0);
	stage_wait(1);
	cr_assert(rows_w.slotp, "the worker's freed block is on a row");
	cr_assert_eq(*rows_w.slotp, rows_w.block);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		int bad = *(void *volatile *)rows_w.slotp != NULL;
		void *q = A(malloc)(64); /* this thread's own cache, copied */
		A(free)(q);
		q = A(malloc)(64);
		bad |= (q == NULL) << 1;
		A(free)(q);
		_exit(bad);
	}
	int status = wait_child(pid);
	cr_assert(WIFEXITED(status), "the child ended with status %#x", status);
	cr_assert_eq(WEXITSTATUS(status) & 2, 0, "the child's own cache failed it");
	cr_assert_eq(WEXITSTATUS(status), 0,
	             "the child read the worker's row slot as its parent wrote it (%p): copied",
	             rows_w.block);
	cr_assert_eq(*rows_w.slotp, rows_w.block, "the parent's row is as it was");
	cr_assert(wipe_on_fork(rows_w.rows));
	stage_set(2);
	pthread_join(t, NULL);
	cr_assert(!wipe_on_fork(rows_w.rows), "the worker's rows, given back, are copied again");
}
