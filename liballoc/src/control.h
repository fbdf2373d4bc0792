/* control.h — the in-process control thread: waits on the mailbox doorbell (a shared
 * futex), runs commands, writes results; also runs the decay pass (time-based return of
 * retained memory) when something was retained. Blocks every signal; no CPU while idle.
 * LIBALLOC_CONTROL=0 disables it. The same operations back malloc_trim and liballoc.h. */
#ifndef LA_CONTROL_H
#define LA_CONTROL_H

#include "common.h"

/* Mark the segment as controlled before it is published (unless LIBALLOC_CONTROL=0),
 * so readers never see a starting process as uncontrolled. */
void control_announce(void);
void control_start(void);
/* In a forked child: start its control thread; burst_look: an arena's burst watch wants a
 * tick at once (arena_reinit_child). */
void control_fork_child(bool burst_look);
/* The parent's prepare handler, before any lock: its children's thread attributes made once */
void control_fork_prepare(void);
/* A thread is exiting: the control thread checks, once it is gone, whether it is the
 * last one besides itself, and then ends, so the process ends as it would without
 * liballoc. */
void control_thread_exiting(void);
/* Application threads that have not started to exit (atomic; control.c) */
LA_HIDDEN extern uint32_t app_threads;

/* Result of a maintenance operation. */
struct op_result {
	uint64_t bytes_released;
	uint64_t mmap, munmap, madvise, mprotect;
	uint64_t duration_ns;
};

/* Each is callable from any thread. */
void op_trim(size_t pad, struct op_result *r);
void op_trim_unmeasured(size_t pad, struct op_result *r); /* (glibc's malloc_trim) */
void op_release_idle(struct op_result *r);
void op_flush_caches(struct op_result *r, uint32_t *skipped);
/* Measure what counts as free resident (mincore): the refresh command. */
void op_measure(void);
/* A large block or a direct mapping was freed: its pages count free resident whole until a
 * measurement. The control thread makes one (op_measure) MEASURE_SOON_NS after the first
 * such free since the last, so that the published figures say what the kernel holds within
 * that time, at a mincore pass per period at most, off the freeing thread (a mincore at
 * each free cost 2-35 us a 4 MiB run here, more than the step that freed it). Callable
 * with an arena's lock held: one clock read and a wake per period. */
#define MEASURE_SOON_NS 1000000000ull
extern LA_HIDDEN uint64_t op_measure_due_ns; /* atomic: the deadline (0: none asked) */
void op_measure_soon_slow(void);
LA_INLINE void op_measure_soon(void)
{
	if (!__atomic_load_n(&op_measure_due_ns, __ATOMIC_RELAXED))
		op_measure_soon_slow();
}
/* The decay pass at tick `tick` (heap_epoch, which the caller has set; ticks of decay_ms /
 * HEAP_DECAY_TICKS, HEAP_TICK apart): free pages go back once free for decay_ms; a full
 * pass (tick a multiple of HEAP_PERIOD, once per decay_ms) also takes idle cache bins,
 * empty spans, parked blocks and cached mappings unused for a period. Spans stamped `stale` take the tick first (stale = tick: none; see
 * heap_skip). True when something is left that a later pass may return (blocks in thread
 * caches, resident free pages, queued remote frees, cached mappings): the control thread
 * stays armed, and *due is the first tick at which a pass finds something to do (at the
 * latest the next full one). Otherwise it sleeps until a free arms it again. */
bool op_decay(uint32_t tick, uint32_t stale, uint32_t *due);
/* The in-process pressure watch signalled at `since` (CLOCK_MONOTONIC ns): flush, release,
 * trim, at most once a second; the time to the end is published in the segment. 0 when it
 * acted, else how long until it may: the caller keeps the event and calls again then (a
 * stall reported once within the second is answered late, not never). Called by the
 * watch's own thread only (pressure.c), beside the control thread's work. */
uint64_t op_pressure(uint64_t since);
/* The control thread runs and decay_ms is not 0: free pages go back by age, in the decay
 * pass (else the madvise throttle returns them on frees, by the heap's trend). */
bool control_decays(void);
/* Run one mailbox request record (validated) into its result fields. */
void control_execute(struct la_mailbox *mb);

#endif
