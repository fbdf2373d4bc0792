/* control.c — the control thread and the maintenance operations it (and malloc_trim)
 * runs. The thread claims a request only by CAS REQUESTED -> RUNNING, so a request runs at
 * most once; a request the client cancelled (CANCELLED) is never run. */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include "arena.h"
#include "direct.h"
#include "exports.h"
#include "heap.h"
#include "lock.h"
#include "os.h"
#include "pressure.h"
#include "shm.h"
#include "tcache.h"
#include "tunables.h"

static uint32_t control_running; /* the control thread runs (or is starting) */

static struct la_counters totals(void)
{
	struct la_counters c;
	la_counters_read(&c, &shm_process_block()->c);
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		la_counters_add(&c, arenas[i].c);
	return c;
}

/* An operation measures what it releases: every range this thread purges or unmaps until
 * op_end is measured first (os_measure), so bytes_released is resident memory that left,
 * whichever path returned it (a purge, an idle heap, a cached mapping, an empty span a
 * flush freed). Unmeasured (glibc's malloc_trim, which tells its caller only whether
 * anything went back): no mincore, and bytes_released is what the free resident gauge
 * lost meanwhile, the pages the accounting counted resident in what went back (other
 * threads' frees and allocations meanwhile move the gauge too: 0 when it rose). */
static void op_begin(struct op_result *r, struct la_counters *before, bool measure)
{
	memset(r, 0, sizeof(*r));
	*before = totals();
	if (!measure)
		return;
	r->duration_ns = os_now_ns();
	os_measure = &r->bytes_released;
}

static void op_end(struct op_result *r, const struct la_counters *before, bool measure)
{
	os_measure = NULL;
	struct la_counters after = totals();
	if (!measure)
		r->bytes_released = la_sub0(before->free_resident_bytes, after.free_resident_bytes);
	STAT_ADD(&shm_process_block()->c, released_bytes, r->bytes_released);
	r->mmap = after.mmap_calls - before->mmap_calls;
	r->munmap = after.munmap_calls - before->munmap_calls;
	r->madvise = after.madvise_calls - before->madvise_calls;
	r->mprotect = after.mprotect_calls - before->mprotect_calls;
	if (measure)
		r->duration_ns = os_now_ns() - r->duration_ns;
}

static void trim(size_t pad, struct op_result *r, bool measure)
{
	struct la_counters before;
	if (!measure) {
		/* the large slots' blocks count cached, not free resident, until parked or back
		 * in their heaps, whole (arena_large_return asks for their measurement): the
		 * gauge's drop would leave them out, so the flush comes first and a measurement
		 * due after it (theirs, or a block freed before) has the trim measure */
		tcache_flush_large_all();
		measure = __atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED) != 0;
	}
	op_begin(r, &before, measure);
	tcache_flush_large_all(); /* the large slots' blocks, parked: the trim returns them */
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n && !os_goal_met(); i++) {
		arena_trim(&arenas[i], pad);
		pad = 0;
	}
	if (!os_goal_met())
		direct_trim();
	op_end(r, &before, measure);
}

void op_trim(size_t pad, struct op_result *r)
{
	trim(pad, r, true);
}

/* A trim whose releases are not measured (mincore over every purged span and cached
 * mapping: ~0.06 ms of a forked child's 0.7 ms in the fork loop, which ends each child
 * with malloc_trim), unless a large block or direct mapping freed since the last
 * measurement still counts resident whole (op_measure_soon asked for one): the gauge's
 * drop would count the pages the program never wrote released (an 8 MiB block written
 * 2 MiB: 8 MiB said, 2 MiB left the RSS). */
void op_trim_unmeasured(size_t pad, struct op_result *r)
{
	trim(pad, r, false);
}

void op_release_idle(struct op_result *r)
{
	struct la_counters before;
	op_begin(r, &before, true);
	tcache_flush_large_all(); /* a heap whose one block sits in a large slot is idle */
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n && !os_goal_met(); i++)
		arena_release_idle(&arenas[i], true);
	op_end(r, &before, true);
}

void op_flush_caches(struct op_result *r, uint32_t *skipped)
{
	struct la_counters before;
	op_begin(r, &before, true);
	tcache_flush_all(skipped);
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		arena_flush(&arenas[i]);
	direct_measure();
	op_end(r, &before, true);
}

uint64_t op_measure_due_ns;

void op_measure_soon_slow(void)
{
	uint64_t none = 0, due = os_now_ns() + MEASURE_SOON_NS;
	if (__atomic_compare_exchange_n(&op_measure_due_ns, &none, due, false, __ATOMIC_RELAXED,
	                                __ATOMIC_RELAXED))
		shm_kick_control(due); /* it sleeps until the next deadline it knows */
}

void op_measure(void)
{
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		arena_measure(&arenas[i]);
	direct_measure();
}

bool op_decay(uint32_t tick, uint32_t stale, uint32_t *due)
{
	/* what the last full pass left in thread caches and the mapping cache */
	static bool caches_held, mappings_left;
	bool full = tick % HEAP_PERIOD == 0; /* once per decay_ms */
	/* idle caches' blocks go back to spans first, which the arena pass can release. What
	 * the flush retains does not arm the next pass (shm_note_retained_slow): this pass
	 * looks at it below, and says whether it wants another. It armed one, and the thread
	 * woke at the next tick and at the next full pass for nothing where the flush left
	 * only free blocks among live ones (2 of a fork loop's decay child's 6 passes). */
	if (full) {
		shm_decay_flushing = 1;
		caches_held = tcache_flush_cold();
		shm_decay_flushing = 0;
	}
	bool more = caches_held;
	/* the next full pass, unless an arena wants one sooner */
	*due = tick + HEAP_PERIOD - tick % HEAP_PERIOD;
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		more |= arena_decay(&arenas[i], tick, stale, due);
	if (full)
		mappings_left = direct_decay();
	/* only a full pass looks at everything (caches, empty spans, mappings): the thread
	 * goes to sleep after one that found nothing left, never after a partial tick */
	return more || mappings_left || !full;
}

/* Burst preparation and the waiting nearly-empty purges for every arena (arena_burst_look,
 * arena_empty_tick), and the measurement op_measure_soon asked for: the earliest time one
 * wants to run again (0: none). kicked: another thread kicked since the last run. */
static uint64_t op_burst(uint64_t now, bool kicked)
{
	uint64_t due = __atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED);
	if (due && now >= due) {
		/* cleared first: a free during the pass asks for the next one */
		__atomic_store_n(&op_measure_due_ns, 0, __ATOMIC_RELAXED);
		op_measure();
		due = 0;
	}
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++) {
		due = la_earlier(due, arena_burst_look(&arenas[i], now, kicked));
		due = la_earlier(due, arena_empty_tick(&arenas[i], now));
	}
	/* (a look without a call: the function sits with the rare code) */
	if (__atomic_load_n(&direct_lend_due_ns, __ATOMIC_RELAXED))
		due = la_earlier(due, direct_lend_tick(now));
	return due;
}

bool control_decays(void)
{
	return __atomic_load_n(&control_running, __ATOMIC_RELAXED) && TUN(decay_ms) != 0;
}

/* Memory pressure seen by the in-process watch (pressure.c): give back what can be given,
 * at most once a second (a watch may signal every window while pressure lasts); an event
 * within that second waits for its end (see control.h). */
#define PRESSURE_INTERVAL_NS 1000000000u
uint64_t op_pressure(uint64_t since)
{
	static uint64_t last;
	uint64_t now = os_now_ns();
	if (last && now - last < PRESSURE_INTERVAL_NS)
		return PRESSURE_INTERVAL_NS - (now - last);
	/* a kept event: its response counts from when it could be acted on */
	if (last && since < last + PRESSURE_INTERVAL_NS)
		since = last + PRESSURE_INTERVAL_NS;
	last = now;
	struct op_result r, t;
	uint32_t skipped = 0;
	op_flush_caches(&r, &skipped);
	uint64_t released = r.bytes_released, back = 0, need = 0;
	/* where the watch knows when enough is back (v1: usage under its share), the
	 * release and trim give that first and the response is measured there; then the
	 * rest, as without */
	bool known = pressure_need(&need);
	if (known) {
		os_goal = need;
		if (need) {
			op_release_idle(&t);
			released += t.bytes_released;
			os_goal = need > t.bytes_released ? need - t.bytes_released : 0;
			if (os_goal)
				op_trim(0, &t);
			released += os_goal ? t.bytes_released : 0;
		}
		os_goal = 0;
		back = os_now_ns();
	}
	op_release_idle(&t);
	released += t.bytes_released;
	op_trim(0, &t);
	released += t.bytes_released;
	struct la_shm_header *h = shm_header();
	/* the response is that of the last event that needed memory back: one that found
	 * usage under its share already (v1 thresholds fire both ways, so the crossing back
	 * down after a release is an event too) or, where the watch cannot tell, released
	 * nothing, is counted and keeps it. Stored before the event is counted: a reader
	 * that sees the count sees its response */
	if (known ? need != 0 : released != 0)
		__atomic_store_n(&h->pressure_response_ns, (back ? back : os_now_ns()) - since,
		                 __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->pressure_released_bytes, released, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->pressure_events, 1, __ATOMIC_RELEASE);
	return 0;
}

/* ---- commands --------------------------------------------------------------------------- */

static void set_reason(struct la_mailbox *mb, const char *a, const char *b)
{
	size_t n = la_strlcpy(mb->reason, a, sizeof(mb->reason));
	if (b)
		la_strlcpy(mb->reason + n, b, sizeof(mb->reason) - n);
}

void control_execute(struct la_mailbox *mb)
{
	char name[LA_NAME_MAX + 1];
	memcpy(name, mb->name, LA_NAME_MAX);
	name[LA_NAME_MAX] = 0;
	mb->status = LA_ST_OK;
	mb->reason[0] = 0;
	mb->value_out = 0;
	mb->source_out = 0;
	mb->bytes_released = 0;
	mb->syscalls_mmap = mb->syscalls_munmap = mb->syscalls_madvise = mb->syscalls_mprotect = 0;
	uint64_t t0 = os_now_ns();
	struct op_result r = {0};
	bool has_result = false;
	os_goal = mb->flags & LA_MB_GOAL && mb->value > 0 ? (uint64_t)mb->value : 0;
	switch (mb->command) {
	case LA_CMD_get:
	case LA_CMD_set: {
		int id = tun_find(name);
		if (id < 0) {
			mb->status = LA_ST_EINVAL_NAME;
			set_reason(mb, "unknown tunable: ", name);
			break;
		}
		if (mb->command == LA_CMD_set) {
			if (!tun_defs[id].live) {
				mb->status = LA_ST_EREADONLY;
				set_reason(mb, name, ": cannot change while the process runs");
				break;
			}
			char reason[LA_REASON_MAX];
			/* arg: a hold in ms (the value reverts by itself then), 0: none */
			uint64_t hold_ns = mb->arg > UINT64_MAX / 1000000u ? UINT64_MAX / 2
			                                                   : mb->arg * 1000000u;
			uint32_t source =
			        mb->flags & LA_MB_FROM_POLICY ? LA_SRC_policy : LA_SRC_command;
			int st = tun_set_held(id, mb->value, source, hold_ns, reason,
			                      sizeof(reason));
			if (st != LA_ST_OK) {
				mb->status = st;
				set_reason(mb, reason, NULL);
				break;
			}
		}
		mb->value_out = TUN_ID(id);
		mb->source_out = __atomic_load_n(&tun_source[id], __ATOMIC_RELAXED);
		break;
	}
	case LA_CMD_trim:
		op_trim(mb->arg, &r);
		has_result = true;
		break;
	case LA_CMD_release_idle_heaps:
		op_release_idle(&r);
		has_result = true;
		break;
	case LA_CMD_flush_caches: {
		uint32_t skipped = 0;
		op_flush_caches(&r, &skipped);
		has_result = true;
		if (skipped) {
			char num[24];
			la_fmt_u64(num, skipped);
			set_reason(mb, num, " thread caches stayed busy and were not flushed");
		}
		break;
	}
	case LA_CMD_refresh:
		tun_publish();
		op_measure();
		break;
	default:
		mb->status = LA_ST_EBADCMD;
		set_reason(mb, "unknown command", NULL);
		break;
	}
	os_goal = 0;
	if (has_result) {
		mb->bytes_released = r.bytes_released;
		mb->syscalls_mmap = r.mmap;
		mb->syscalls_munmap = r.munmap;
		mb->syscalls_madvise = r.madvise;
		mb->syscalls_mprotect = r.mprotect;
	}
	mb->duration_ns = os_now_ns() - t0;
	STAT_ADD(&shm_process_block()->c, commands_executed, 1);
}

/* ---- the thread ------------------------------------------------------------------------- */

static uint32_t control_stop; /* futex-free flag; the thread checks it on every wake */
static uint32_t thread_exits; /* bumped by every exiting thread (see control_thread_exiting) */

static pid_t control_tid;

/* Where the thread's burst preparation starts (set before it is started): the kicks it has
 * seen, and whether it looks at the arenas at once. A new process starts from no kick; a
 * forked child from its parent's count, looking only where the parent left something
 * (arena_reinit_child): the fork loop's children took every arena's lock for nothing at
 * their control thread's first turn, which waited (spinning in the kernel: PI locks) while
 * the child's malloc_trim held one. */
static uint32_t start_kicks;
static bool start_look;

/* A forked child's control thread starts on the CPU of the thread that forked, and only
 * there until it first wakes (start_pinned; start_mask: the CPUs it gets then, the forking
 * thread's). Started on the other CPU, it ran beside the child's first work, and every
 * copy-on-write fault and madvise of that work sent it a TLB-shootdown interrupt, which
 * the child waited for: ~5 % of a trim child's CPU in the fork loop (perf, forkfree 400 4
 * plain: smp_call_function_many_cond and the interrupt's MSR write 0.6-1.0 of ~12 samples
 * a child). On the child's CPU it takes turns with the child instead (it has started by
 * the end of a trim child's malloc_trim in 193-198 of 200 children; 48-57 when started
 * anywhere, at load 12, the other CPU busy). Set before the thread starts, read by it. */
static cpu_set_t start_mask;
static bool start_pinned;

/* Threads of this process, from /proc/self/status (no allocation). */
static long count_threads(void)
{
	char buf[2048];
	if (os_read_small("/proc/self/status", buf, sizeof(buf)) < 0)
		return -1;
	char *p = strstr(buf, "\nThreads:");
	return p ? la_parse_long(p + 9) : -1;
}

struct alive_scan {
	pid_t self;
	bool alive;
};

/* One entry of /proc/self/task: a running thread other than self and the control thread? */
static bool task_alive(void *ctx, int dfd, const char *name)
{
	struct alive_scan *scan = ctx;
	(void)dfd;
	if (name[0] < '0' || name[0] > '9')
		return true;
	pid_t tid = (pid_t)la_parse_long(name);
	if (tid == scan->self || tid == control_tid || tid == pressure_tid())
		return true;
	char path[64], stat[512];
	size_t k = la_strlcpy(path, "/proc/self/task/", sizeof(path));
	k += la_strlcpy(path + k, name, sizeof(path) - k);
	la_strlcpy(path + k, "/stat", sizeof(path) - k);
	if (os_read_small(path, stat, sizeof(stat)) < 0)
		return true;
	char *p = strrchr(stat, ')');
	if (p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X')
		scan->alive = true;
	return !scan->alive;
}

/* Control thread: is any other thread still running? A zombie thread-group leader (main
 * returned through pthread_exit) still counts in "Threads:", so the tasks are read one by
 * one (getdents64 and read: no allocation). */
static bool others_alive(void)
{
	long n = count_threads();
	/* the pressure watch's thread, like this one, keeps no process alive */
	if (n < 0 || n > 2 + (pressure_tid() != 0))
		return true;
	int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return true;
	struct alive_scan scan = {control_tid, false};
	os_dir_each(dir, task_alive, &scan);
	close(dir);
	return scan.alive;
}

/* Application threads that have not started to exit: main, and every thread started
 * through pthread_create (counted by its creator before it exists, so the count never
 * dips to 0 while one is being created). A thread leaves the count in its exit handler
 * (tcache_thread_exit), once. */
uint32_t app_threads = 1;
static __thread uint8_t counted __attribute__((tls_model("initial-exec")));
/* The arena that counts the calling thread in pthread_join (the wrapper below), or NULL */
static __thread struct arena *join_arena __attribute__((tls_model("initial-exec")));

/* The calling thread counts in app_threads (its creator added it) and tells the control
 * thread when it exits, allocating or not. */
static void thread_counted(void)
{
	counted = 1;
	tcache_watch_exit();
}

/* The exiting thread cannot tell whether it is the last: another may be exiting at the
 * same moment, each still seeing the other alive. So it only tells the control thread,
 * which looks again once they are gone (see exit_watch). A counted thread that leaves
 * others counted tells it nothing: the control thread looks only once none is left
 * (exit_watch_alone), and the last of them will tell it. A program that starts a thread
 * per task woke the control thread at every exit (a futex wake, a context switch, its
 * clock read): `shapes tchurn 1 20000 500` (20,000 threads of 500 allocations) 0.73 s
 * against glibc's 0.60. */
void control_thread_exiting(void)
{
	if (join_arena) { /* cancelled in pthread_join */
		arena_join_done(join_arena);
		join_arena = NULL;
	}
	if (counted) {
		counted = 0;
		if (__atomic_sub_fetch(&app_threads, 1, __ATOMIC_RELEASE) != 0)
			return;
	}
	if (!__atomic_load_n(&control_running, __ATOMIC_ACQUIRE))
		return;
	__atomic_fetch_add(&thread_exits, 1, __ATOMIC_RELEASE);
	la_futex(&thread_exits, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* ---- every thread's exit ------------------------------------------------------------------
 * A thread that never calls the allocator has no cache, so nothing of ours ran at its exit,
 * and the control thread kept a process alive whose last thread had gone (and, blocking
 * every signal, left a SIGTERM pending for good). So liballoc interposes pthread_create:
 * the new thread runs a small start routine that registers its exit (a thread-specific
 * value whose destructor is tcache_thread_exit) and then the program's. Sanitizer builds
 * (the sanitizer has its own pthread_create) and the build without statistics (no control
 * thread) leave pthread_create alone (LA_WRAP_THREADS, os.h). liballoc's own threads
 * (os_thread_start) are started through libc's. */
#if LA_WRAP_THREADS
struct thread_start {
	union {
		void *(*fn)(void *);
		struct thread_start *next; /* on starts_done */
	};
	void *arg;
};

/* Records of started threads, which the next pthread_create frees: a new thread that
 * freed its record itself took a cache, its slots and an arena (one per CPU: a second
 * arena and heap) whether it allocated or not; redis's idle background threads faulted
 * 7-8 pages in for that at the start. Now a thread's arena and cache come at its own
 * first call, chosen by the block that call frees if it frees first (arena_attach: the
 * successor of a thread that left takes the arena of the blocks it goes on with). */
static struct thread_start *starts_done;

static void *thread_main(void *p)
{
	struct thread_start *rec = p, st = *rec;
	rec->next = __atomic_load_n(&starts_done, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&starts_done, &rec->next, rec, true, __ATOMIC_RELEASE,
	                                    __ATOMIC_RELAXED))
		;
	thread_counted();
	return st.fn(st.arg);
}

LA_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
	os_create_fn real = os_real_pthread_create();
	if (!real)
		return EAGAIN;
	for (struct thread_start *d = __atomic_exchange_n(&starts_done, NULL, __ATOMIC_ACQUIRE),
	                         *next;
	     d; d = next) {
		next = d->next;
		la_own_free(d);
	}
	struct thread_start *st = la_own_malloc(sizeof(*st));
	if (!st)
		return EAGAIN;
	st->fn = fn;
	st->arg = arg;
	__atomic_fetch_add(&app_threads, 1, __ATOMIC_RELAXED);
	int err = real(t, attr, thread_main, st);
	if (err) {
		__atomic_fetch_sub(&app_threads, 1, __ATOMIC_RELAXED);
		la_own_free(st);
	}
	return err;
}

/* A thread that waits in pthread_join allocates nothing until it returns: its arena
 * counts it meanwhile (arena_join_wait), so a thread that frees that arena's blocks may
 * take them back rather than carve new pages (arena.c, idle_lender; larson's main thread
 * waits there while each generation's worker frees the slots it allocated). A thread
 * cancelled there (pthread_join is a cancellation point) leaves the count at its exit
 * (control_thread_exiting): pthread_cleanup_push would import __pthread_register_cancel,
 * __pthread_unregister_cancel, __sigsetjmp and __pthread_unwind_next, symbol look-ups
 * every process pays at start (/bin/true 223,102 -> 226,465-227,103 instructions). */
LA_EXPORT int pthread_join(pthread_t t, void **ret)
{
	os_join_fn real = os_real_pthread_join();
	if (!real)
		return ESRCH;
	join_arena = arena_join_wait();
	int err = real(t, ret);
	arena_join_done(join_arena);
	join_arena = NULL;
	return err;
}
#endif

/* After a thread exit that left no application thread (app_threads), the control thread
 * checks whether it is alone at 1, 2, 4 ... 1024 ms, then every 1024 ms; alone, it ends,
 * and the process ends as it would without liballoc (glibc exits when its last thread
 * does). Returns the wait before the next check, 0 when none is due. */
struct exit_watch {
	uint32_t seen;     /* thread_exits already handled */
	uint32_t delay_ms; /* next check in; 0: not watching */
	uint64_t due_ns;
};
#define EXIT_WATCH_MAX_MS 1024u

static bool exit_watch_alone(struct exit_watch *w, uint64_t now, uint64_t *wait_ns)
{
	uint32_t exits = __atomic_load_n(&thread_exits, __ATOMIC_ACQUIRE);
	if (exits != w->seen) { /* a new exit: start over */
		w->seen = exits;
		w->delay_ms = 1;
		w->due_ns = now + 1000000u;
	}
	/* An application thread that has not started to exit (an exiting one left the count
	 * before it bumped thread_exits, read above) will tell us when it does: not alone,
	 * and nothing to look at in /proc until then. A program whose threads come and go
	 * while main runs (larson: a generation of threads every few ms) read
	 * /proc/self/status at 1, 2, 4 ... ms after every exit. Threads not counted (started
	 * before liballoc, by clone, or in sanitizer builds, which do not wrap
	 * pthread_create) leave the count at 0 once main left: those are looked for. */
	if (w->delay_ms && __atomic_load_n(&app_threads, __ATOMIC_ACQUIRE) != 0)
		w->delay_ms = 0;
	if (!w->delay_ms) {
		*wait_ns = 0;
		return false;
	}
	if (now >= w->due_ns) {
		if (!others_alive())
			return true;
		w->delay_ms *= 2;
		/* no application thread left (above): the threads still seen are on their way
		 * out (destructors of other libraries may keep them a while) or were never ours
		 * to count: keep looking, once a second */
		if (w->delay_ms > EXIT_WATCH_MAX_MS)
			w->delay_ms = EXIT_WATCH_MAX_MS;
		w->due_ns = now + (uint64_t)w->delay_ms * 1000000u;
	}
	*wait_ns = w->due_ns - now;
	return false;
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
static bool waitv_broken; /* futex_waitv missing (Linux < 5.16) or filtered (seccomp) */

/* What the control thread waits for, each word as it read it before looking. */
struct wake_words {
	uint32_t *bell; /* &mb->state (shared: the doorbell), or while the segment's name is
	                 * pending the name's word (private: shm_name_word), which no one
	                 * outside can see before it has a name */
	uint32_t st;    /* *bell */
	uint32_t exits; /* thread_exits: a thread exits */
	uint32_t kicks; /* shm_kicks: decay armed or its period changed */
};

/* Sleep until one of the words changes or wait_ns pass from now (0: no deadline). Waiting
 * on all three at once loses no wake-up; without futex_waitv, thread exits and kicks are
 * noticed within a second. */
static void control_wait(const struct wake_words *ww, bool bell_shared, uint64_t now,
                         uint64_t wait_ns)
{
	if (!waitv_broken) {
		struct futex_waitv w[3] = {
		        {.val = ww->st,
		         .uaddr = (uintptr_t)ww->bell,
		         .flags = FUTEX_32 | (bell_shared ? 0 : FUTEX_PRIVATE_FLAG)},
		        {.val = ww->exits,
		         .uaddr = (uintptr_t)&thread_exits,
		         .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
		        {.val = ww->kicks,
		         .uaddr = (uintptr_t)&shm_kicks,
		         .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
		};
		struct timespec abs, *tp = NULL;
		if (wait_ns) {
			uint64_t t = now + wait_ns;
			abs.tv_sec = (time_t)(t / 1000000000u);
			abs.tv_nsec = (long)(t % 1000000000u);
			tp = &abs;
		}
		if (syscall(SYS_futex_waitv, w, 3u, 0u, tp, CLOCK_MONOTONIC) >= 0 ||
		    errno == EAGAIN || errno == ETIMEDOUT || errno == EINTR)
			return;
		waitv_broken = true;
	}
	if (!wait_ns || wait_ns > 1000000000u)
		wait_ns = 1000000000u;
	struct timespec ts = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
	la_futex(ww->bell, bell_shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, ww->st, &ts);
}

/* Alone: the process ends when this thread returns (exit(0), as glibc's last thread
 * does). A terminating signal sent meanwhile, which no thread could take (this one blocks
 * them all), takes its default action now instead of being dropped: the process dies of
 * it, as it would have with a thread left to take it. Only where the program left the
 * default action in place: a handler of the program never runs on this thread. */
static void honour_pending_terminations(void)
{
	static const int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};
	sigset_t pending, deliver;
	sigemptyset(&deliver);
	if (sigpending(&pending) != 0)
		return;
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa;
		if (sigismember(&pending, sigs[i]) && sigaction(sigs[i], NULL, &sa) == 0 &&
		    !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL)
			sigaddset(&deliver, sigs[i]);
	}
	pthread_sigmask(SIG_UNBLOCK, &deliver, NULL);
}

/* This thread may run on the CPUs of mask; where the kernel takes none of them (the CPUs
 * allowed changed meanwhile), on every CPU it allows. (Here and in start_here the system
 * calls are made directly: libc's wrappers sit on text pages a forked child would fault
 * in, 2 faults a child.) */
static void set_cpus(const cpu_set_t *mask)
{
	if (syscall(SYS_sched_setaffinity, 0, sizeof(*mask), mask) != 0) {
		cpu_set_t all;
		memset(&all, 0xff, sizeof(all));
		syscall(SYS_sched_setaffinity, 0, sizeof(all), &all);
	}
}

/* arg: thread_exits when the thread was created (exits from then on are watched, even
 * those that happen before the thread first runs) */
static void *control_main(void *arg)
{
	bool pinned = start_pinned; /* to the forking thread's CPU, until the first wake-up */
	shm_is_control = 1;
	syscall(SYS_prctl, PR_SET_NAME, "liballoc-ctl", 0, 0, 0); /* (no prctl wrapper: sysraw.c) */
	/* la_self: the thread id its locks take too (one gettid, not two) */
	__atomic_store_n(&control_tid, (pid_t)la_self(), __ATOMIC_RELEASE);
	struct la_mailbox *mb = shm_mailbox();
	uint64_t last_decay = os_now_ns();
	/* The decay pass's ticks (HEAP_TICK apart in heap_epoch). A pass runs `skip` ticks
	 * after the last one: the next tick, or, when that pass found nothing that could come
	 * of age before a later tick (due, at most the next full pass), that one: the thread
	 * sleeps through the ticks between (skipping: heap_skip set, and heap_epoch `base` +
	 * 1, odd, so that pages freed meanwhile are told apart; they age as base's). A page
	 * stamped meanwhile ends the sleep (heap.c stamp_now, which wakes the thread): the
	 * pass then runs at the next tick due by the clock, and pages stamped meanwhile take
	 * that pass's tick if two ticks or more went by unseen. An idle process with pages
	 * that age woke 4 times a decay_ms for them: idle-after-sweep (4 s idle, decay_ms
	 * 1000) 17 wake-ups, 9 now, with the same returns at the same times. */
	uint32_t base = __atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) & ~(HEAP_TICK - 1);
	uint32_t skip = 1, planned = 1;
	bool skipping = false;
	/* a forked child's copy may be a sleep's: its pages age as the tick before */
	__atomic_store_n(&heap_skip, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&heap_epoch, base, __ATOMIC_SEQ_CST);
	struct exit_watch watch = {(uint32_t)(uintptr_t)arg, 0, 0};
	/* other allocators dlopen'ed after start: looked for 1 ms, 11 ms, 111 ms and 1.1 s
	 * after a dlopen call (the call wakes this thread as it begins; the loading is over by
	 * one of these) */
	static const uint64_t look_ns[] = {1000000, 10000000, 100000000, 1000000000};
	enum { LOOKS = sizeof(look_ns) / sizeof(look_ns[0]) };
	uint32_t seen_dlopens = __atomic_load_n(&shm_dlopens, __ATOMIC_ACQUIRE);
	unsigned look = LOOKS;
	uint64_t look_due = 0;
	/* the start's sweep of stale segments, once the process has lived a while */
	uint64_t reap_due = shm_reap_pending() ? last_decay + SHM_REAP_AFTER_NS : 0;
	/* the segment's file is named once the process lived a while (shm.c; before the
	 * sweep: the delay is at most SHM_REAP_AFTER_NS, and its turn comes first) */
	uint64_t name_due = shm_name_pending() ? last_decay + shm_publish_delay_ms() * 1000000u : 0;
	uint64_t burst_due = 0;             /* op_burst's next run (0: at the next kick) */
	uint32_t burst_kicks = start_kicks; /* shm_kicks when op_burst last ran */
	uint32_t burst_own = shm_own_kicks; /* and this thread's own kicks of them */
	bool burst_look = start_look;       /* a decay pass ran since op_burst last did */
	uint64_t now = last_decay;
	/* the optional pressure watch (pressure.c) is set up here, off the program's path */
	if (pressure_configure()) {
		if (pinned) { /* its thread would be pinned with this one, for good */
			pinned = false;
			set_cpus(&start_mask);
		}
		pressure_start();
		now = os_now_ns(); /* (its setup reads files) */
	}
	/* one reading of the clock per turn (a system call: os.c), which every deadline below
	 * is measured from: the wait ends at the earliest of them whatever ran in between (a
	 * deadline that passed meanwhile ends it at once). A turn that runs a command, a decay
	 * pass, a foreign look or held tunables' expiry goes round again (`continue` reads the
	 * clock anew). It was read up to 7 times a turn: a decay child of the fork loop made
	 * 32-85 clock_gettime calls in its 5 ms. The first turn takes the start's reading
	 * (read twice in a row before: one system call in every process and forked child). */
	for (;; now = os_now_ns()) {
		/* read before the deadlines are computed: a kick after it wakes the wait */
		uint32_t kicks = __atomic_load_n(&shm_kicks, __ATOMIC_ACQUIRE);
		uint32_t own = shm_own_kicks;
		uint64_t watch_ns = 0;
		if (exit_watch_alone(&watch, now, &watch_ns)) {
			honour_pending_terminations();
			__atomic_store_n(&control_stop, 1, __ATOMIC_RELEASE);
		}
		if (__atomic_load_n(&control_stop, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&control_running, 0, __ATOMIC_RELEASE);
			/* (atomic: a forking thread reads it, shm_fork_snapshot) */
			__atomic_store_n(&shm_header()->control_state, LA_CONTROL_OFF,
			                 __ATOMIC_RELAXED);
			pressure_stop(); /* its thread would keep the process alive */
			return NULL;
		}
		/* the doorbell only once the file has a name: before, no one outside sees the
		 * process, and the thread waits on the name's word instead (a naming by any
		 * thread, or its failure, wakes it), so that a process that ends sooner (and a
		 * forked child, whose segment is fresh) never faults the mailbox's page in:
		 * reading or waiting on the doorbell did, a fault of every such process */
		bool unnamed = shm_name_pending();
		uint32_t *bell = unnamed ? shm_name_word() : &mb->state;
		uint32_t st =
		        __atomic_load_n(bell, __ATOMIC_ACQUIRE); /* (a naming since: no wait) */
		if (!unnamed && st == LA_MB_REQUESTED) {
			uint32_t expect = LA_MB_REQUESTED;
			if (__atomic_compare_exchange_n(&mb->state, &expect, LA_MB_RUNNING, false,
			                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				control_execute(mb);
				mb->result_seq = mb->seq;
				__atomic_store_n(&mb->state, LA_MB_DONE, __ATOMIC_RELEASE);
				la_futex(&mb->state, FUTEX_WAKE, INT32_MAX, NULL);
			}
			continue;
		}
		/* the pass runs once per tick: HEAP_DECAY_TICKS per decay_ms */
		uint64_t decay_ns = (uint64_t)TUN(decay_ms) * (1000000u / HEAP_DECAY_TICKS);
		bool armed = __atomic_load_n(&shm_decay_armed, __ATOMIC_RELAXED) && decay_ns;
		uint64_t wait_ns = watch_ns; /* 0: no deadline */
		/* held tunables revert when their hold expires (only this thread sets holds,
		 * from the mailbox, so the next expiry is known before it sleeps) */
		uint64_t hold_due = tun_holds_next();
		if (hold_due) {
			if (now >= hold_due) {
				tun_holds_expire(now);
				continue;
			}
			if (!wait_ns || hold_due - now < wait_ns)
				wait_ns = hold_due - now;
		}
		if (name_due) {
			if (now >= name_due) {
				name_due = 0;
				shm_name_now(false);
				continue;
			}
			if (!wait_ns || name_due - now < wait_ns)
				wait_ns = name_due - now;
		}
		if (reap_due) {
			if (now >= reap_due) {
				reap_due = 0;
				shm_reap_stale();
				continue;
			}
			if (!wait_ns || reap_due - now < wait_ns)
				wait_ns = reap_due - now;
		}
		/* burst preparation: when an arena asked for it, a burst ended or began
		 * while pages were prepared (they kick), and after each decay pass (a
		 * "burst" that never ended is a new level: arena_burst_tick rebases it) */
		if (kicks != burst_kicks || burst_look || (burst_due && now >= burst_due)) {
			/* its own kicks (a pass that re-arms decay, a command) are no thread's
			 * burst wanting a look */
			bool kicked = kicks - burst_kicks != own - burst_own;
			burst_look = false;
			burst_kicks = kicks;
			burst_own = own;
			burst_due = op_burst(now, kicked);
			if (burst_due && burst_due <= now)
				continue; /* more chunks: round the loop (the mailbox first) */
		}
		if (burst_due) {
			uint64_t left = burst_due > now ? burst_due - now : 1;
			if (!wait_ns || left < wait_ns)
				wait_ns = left;
		}
		uint32_t dlopens = __atomic_load_n(&shm_dlopens, __ATOMIC_ACQUIRE);
		if (dlopens != seen_dlopens) {
			seen_dlopens = dlopens;
			look = 0;
			look_due = now + look_ns[0];
		}
		if (look < LOOKS) {
			if (now >= look_due) {
				shm_detect_foreign();
				if (++look < LOOKS)
					look_due = now + look_ns[look];
				continue;
			}
			if (!wait_ns || look_due - now < wait_ns)
				wait_ns = look_due - now;
		}
		if (armed) {
			/* a page stamped while the thread slept through ticks: the next tick */
			if (skipping && !__atomic_load_n(&heap_skip, __ATOMIC_SEQ_CST))
				skip = 1;
			uint64_t span = (uint64_t)skip * decay_ns;
			if (now - last_decay >= span) {
				uint32_t ticks = 1, stale;
				if (skipping) {
					uint64_t went = (now - last_decay) / decay_ns;
					ticks = went < 1         ? 1
					        : went > planned ? planned
					                         : (uint32_t)went;
				}
				uint32_t tick = base + ticks * HEAP_TICK;
				/* the tick first, then the flag: a stamp that saw the flag set
				 * either cleared it (below: the pages it stamped, base + 1,
				 * take this tick if two ticks or more went by unseen: one may
				 * have been made after the first) or reads this tick */
				__atomic_store_n(&heap_epoch, tick, __ATOMIC_SEQ_CST);
				stale = tick;
				if (skipping &&
				    !__atomic_exchange_n(&heap_skip, 0, __ATOMIC_SEQ_CST) &&
				    ticks > 1)
					stale = base + 1;
				skipping = false;
				/* disarm first: a free racing with the pass re-arms */
				__atomic_store_n(&shm_decay_armed, 0, __ATOMIC_RELAXED);
				uint32_t due = tick + HEAP_TICK;
				bool more = op_decay(tick, stale, &due);
				if (more)
					__atomic_store_n(&shm_decay_armed, 1, __ATOMIC_RELAXED);
				base = tick;
				skip = 1;
				uint32_t k = (due - tick) / HEAP_TICK;
				if (more && k > 1 && k <= HEAP_DECAY_TICKS) {
					__atomic_store_n(&heap_skip, 1, __ATOMIC_SEQ_CST);
					__atomic_store_n(&heap_epoch, tick + 1, __ATOMIC_SEQ_CST);
					skipping = true;
					skip = planned = k;
				}
				burst_look = true;
				last_decay = now;
				shm_header()->heartbeat_ns = now;
				continue;
			}
			uint64_t left = span - (now - last_decay);
			if (!wait_ns || left < wait_ns)
				wait_ns = left;
		}
		/* when this sleep ends by itself, and when a pass armed meanwhile would run:
		 * a kick due no sooner wakes no one (shm_kick_control) */
		__atomic_store_n(&shm_control_tick_ns,
		                 decay_ns ? last_decay + decay_ns : UINT64_MAX, __ATOMIC_SEQ_CST);
		__atomic_store_n(&shm_control_wake_ns, wait_ns ? now + wait_ns : 0,
		                 __ATOMIC_SEQ_CST);
		struct wake_words ww = {bell, st, watch.seen, kicks};
		control_wait(&ww, !unnamed, now, wait_ns);
		if (pinned) {
			pinned = false;
			set_cpus(&start_mask);
		}
	}
	return NULL;
}

/* The control thread's stack: in the library's zero-filled memory (.lbss), not a mapping
 * libc makes for it. libc's first thread takes an mmap, an mprotect for the guard page and a
 * VMA of its own, made at the start and torn down at exit: ~0.013 ms of every process's CPU
 * (medians of 301 interleaved runs, three batches: `tiny` 0.762 / 0.788 / 0.769 -> 0.749 /
 * 0.773 / 0.763 ms, `large_random 8 1 2 32 1` 0.845 / 0.878 / 0.897 -> 0.828 / 0.861 /
 * 0.884; one fault fewer; bench/README.md, the fixed cost). It touches the same pages as it
 * did on the mapping. One control thread lives at a time in a process (the constructor's,
 * or a forked child's, started where no other thread of the child exists: the parent's
 * thread on this memory is not in the child), so one stack serves. Its size is what the
 * mapping gave (64 KiB and the guard's page; libc puts the thread's TLS at the top of
 * either) less the first arena's bytes; no guard page below it, the depth being what it
 * was on the mapping.
 * It ends inside the first arena's page, right where arenas[0] starts (liballoc/owner.ld
 * puts it before the arenas, its size ends it 2,368 bytes into a page): libc puts the
 * thread's `struct pthread` (2,304 bytes in glibc 2.36) at the top of a given stack, on
 * the page that arenas[0] takes in every process anyway; the static TLS and the frames
 * below it take two pages of its own instead of three. One page and one fault fewer a
 * process, and one copy-on-write fault fewer a forked child, whose start writes both
 * (tests/e2e/startup.bats). A second arena, on the next page now, shares it with the
 * third: never more pages than before, whatever the number of arenas. */
#define CONTROL_STACK (68 * 1024 - sizeof(struct arena))
_Static_assert((68 * 1024 - CONTROL_STACK) % 64 == 0 && CONTROL_STACK % LA_PAGE >= 2304,
               "the stack ends on a cache line, with room for struct pthread on its last page");
/* Sanitizer builds keep libc's mapping: TSan refuses a given stack smaller than ~900 KiB
 * ("pre-allocated stack size is insufficient": the control thread did not start in
 * tests/policy/inprocess.bats under TSan). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
static void *control_stack_mem(void)
{
	return NULL;
}
#else
LA_START_BSS(0) static char control_stack[CONTROL_STACK] __attribute__((aligned(4096)));
static void *control_stack_mem(void)
{
	return control_stack;
}
#endif

/* A forked child's thread's attributes: made in the parent before its first fork
 * (control_fork_prepare) and kept, each child starts its thread with its copy. Made anew in
 * each child, their signal mask's allocation (pthread_attr_setsigmask_np) and its free wrote,
 * in the fork loop's children, two pages of the heap they share with their parent, and ran
 * libc code of their own: ~2 copy-on-write faults a child (bench/README.md, the fork loop).
 * One control thread lives at a time, so one stack and one set of attributes serve. A
 * process that never forks makes them at each start, as before (a kept block in every
 * process moved the heap's layout). */
static pthread_attr_t control_attr;
static uint32_t control_attr_state; /* 0: not made, 1: being made (a fork), 2: made */

void control_fork_prepare(void)
{
	uint32_t none = 0;
	if (!tun_control_enabled() || __atomic_load_n(&control_attr_state, __ATOMIC_ACQUIRE) ||
	    !__atomic_compare_exchange_n(&control_attr_state, &none, 1, false, __ATOMIC_ACQ_REL,
	                                 __ATOMIC_ACQUIRE))
		return; /* made, or being made by another fork: its child makes its own */
	bool made = os_thread_attr(&control_attr, CONTROL_STACK, control_stack_mem()) == 0;
	__atomic_store_n(&control_attr_state, made ? 2 : 0, __ATOMIC_RELEASE);
}

static int start_control(void *arg, bool forked)
{
	void *mem = control_stack_mem();
	int err = forked && __atomic_load_n(&control_attr_state, __ATOMIC_ACQUIRE) == 2
	                  ? os_thread_start_attr(control_main, arg, &control_attr)
	                  : os_thread_start(control_main, arg, CONTROL_STACK, mem);
	if (err && mem) /* a libc that wants more of a stack it is given: its own mapping */
		err = os_thread_start(control_main, arg, CONTROL_STACK, NULL);
	return err;
}

/* Start the control thread on this thread's CPU only (start_pinned, above): it inherits
 * this thread's CPUs, narrowed to that one for the creation and given back after. Where
 * this thread has one CPU, or its CPUs cannot be read or set, it starts as anywhere. */
static int start_here(void *arg)
{
	unsigned cpu = 0, cpus = 0;
	memset(&start_mask, 0, sizeof(start_mask));
	if (syscall(SYS_getcpu, &cpu, NULL, NULL) != 0 || cpu >= CPU_SETSIZE ||
	    syscall(SYS_sched_getaffinity, 0, sizeof(start_mask), &start_mask) <= 0 ||
	    !CPU_ISSET(cpu, &start_mask))
		return start_control(arg, true);
	for (size_t i = 0; i < sizeof(start_mask) / sizeof(uint64_t); i++)
		cpus += (unsigned)__builtin_popcountll(((const uint64_t *)(void *)&start_mask)[i]);
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (cpus < 2 || syscall(SYS_sched_setaffinity, 0, sizeof(one), &one) != 0)
		return start_control(arg, true);
	start_pinned = true;
	int err = start_control(arg, true);
	set_cpus(&start_mask);
	return err;
}

static void start_thread(bool forked)
{
	struct la_shm_header *h = shm_header();
	if (!tun_control_enabled()) {
		h->control_state = LA_CONTROL_OFF;
		return;
	}
	control_stop = 0;
	control_running = 0;
	control_tid = 0;
	/* no sleep of it known yet (a forked child's copy is its parent thread's) */
	__atomic_store_n(&shm_control_wake_ns, 0, __ATOMIC_SEQ_CST);
	/* running before it runs: a thread exiting meanwhile must already count */
	__atomic_store_n(&control_running, 1, __ATOMIC_RELEASE);
	uintptr_t exits = __atomic_load_n(&thread_exits, __ATOMIC_ACQUIRE);
	start_pinned = false;
	int err = forked ? start_here((void *)exits) : start_control((void *)exits, false);
	if (err) {
		__atomic_store_n(&control_running, 0, __ATOMIC_RELEASE);
		h->control_state = LA_CONTROL_FAILED;
		la_warn("control thread not started: ", strerror(err), (char *)NULL);
		shm_name_now(false); /* what it would have done */
		shm_reap_stale();
		return;
	}
	h->control_state = LA_CONTROL_RUNNING;
}

void control_announce(void)
{
	shm_header()->control_state = tun_control_enabled() ? LA_CONTROL_RUNNING : LA_CONTROL_OFF;
}

void control_start(void)
{
	thread_counted(); /* main: the constructor runs on it */
	start_thread(false);
}

void control_fork_child(bool burst_look)
{
	pressure_fork_child();
	/* the forking thread is the child's only thread */
	__atomic_store_n(&app_threads, 1, __ATOMIC_RELAXED);
	thread_counted();
	start_kicks = __atomic_load_n(&shm_kicks, __ATOMIC_RELAXED);
	/* a measurement the parent had asked for is the child's to make (its frees would not
	 * ask again while one is due) */
	start_look = burst_look || __atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED);
	/* a fork while the parent's control thread was about to flush cold caches (it waits
	 * for the caches' lock the fork holds) copied its flag: the child's thread would not
	 * arm its own next pass until its first full pass */
	shm_decay_flushing = 0;
	start_thread(true);
}
