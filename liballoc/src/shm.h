/* shm.h — the process's statistics segment (layout in liballoc_shm.h). At the first
 * allocation it exists as anonymous memory; shm_publish_file (from the library
 * constructor) gives it a file in the run directory by copying it into the file and
 * mapping the file over the same addresses, so every pointer into it stays valid. The
 * same happens in a forked child, under the child's pid. When the constructor runs before
 * any allocation (the usual case), shm_prepare_file maps the file first. */
#ifndef LA_SHM_H
#define LA_SHM_H

#include "common.h"
#include "sizeclass.h"

void shm_boot(void);
struct la_shm_header *shm_header(void);
struct la_shm_arena *shm_arena_block(uint32_t i);
struct la_shm_arena *shm_process_block(void);
/* The segment's memory (shm.c: the file is mapped over it, at the same address) and its
 * layout: the header, the tunables, the class entries (their sizes alone), the process
 * block, then every arena's block followed by its class statistics (one stride each). */
extern LA_HIDDEN char shm_seg_area[];
#define SHM_OFF_TUNABLES (((sizeof(struct la_shm_header)) + 7) & ~(size_t)7)
#define SHM_OFF_CLASSES  (SHM_OFF_TUNABLES + LA_NTUNABLES * sizeof(struct la_shm_tunable))
#define SHM_CLASS_STRIDE sizeof(uint64_t)
#define SHM_OFF_PROCESS  ((SHM_OFF_CLASSES + LA_NCLASSES * SHM_CLASS_STRIDE + 63) & ~(size_t)63)
#define SHM_OFF_ARENAS   (SHM_OFF_PROCESS + sizeof(struct la_shm_arena))
#define SHM_ARENA_STRIDE (sizeof(struct la_shm_arena) + LA_NCLASSES * sizeof(struct la_class_stats))
/* Arena i's class statistics (struct la_class_stats[LA_NCLASSES]): written by that arena
 * only, under its lock, plainly (STAT_ADD_LOCKED); readers sum the arenas. */
LA_INLINE struct la_class_stats *shm_arena_classes(uint32_t i)
{
	return (struct la_class_stats *)(shm_seg_area + SHM_OFF_ARENAS + i * SHM_ARENA_STRIDE +
	                                 sizeof(struct la_shm_arena));
}
/* A class's statistics for the whole process (the sum of the arenas'), as readers see
 * them. */
void shm_class_totals(unsigned cls, struct la_class_stats *out);
struct la_mailbox *shm_mailbox(void);
void shm_set_arena_count(uint32_t n);
/* Write the tunables block (caller: holding the tunables' lock, see tunables.c). */
void shm_publish_tunables(void);
void shm_thread_count(int delta);
/* Before the first allocation (the constructor, when nothing ran shm_boot yet): create the
 * file under its temporary name and map it where the segment's memory is, so that the
 * start writes the segment in the file's pages, not in anonymous ones it would copy there
 * (a page fault of every process's start). False after a warning: nothing to publish. */
bool shm_prepare_file(void);
/* Create the file (constructor, or child after fork), or complete the prepared one, and
 * give it its name. Failure is reported once. */
void shm_publish_file(void);
void shm_unpublish(void);
/* Naming later (shm.c): with a control thread, the start's file and a forked child's are
 * made unnamed and named LIBALLOC_PUBLISH_DELAY (default LA_PUBLISH_DELAY_MS, at most
 * LA_PUBLISH_DELAY_MAX_MS; 0: at once, as a process without a control thread does) after
 * the control thread started, or at once before the process changes its credentials, root
 * or namespaces. shm_name_now names it if that is still to be done (any thread; waits for
 * another thread naming it; keep: the run directory stays open for the removal at exit,
 * before such a change); shm_name_pending: it is. */
#define LA_PUBLISH_DELAY_MS     50
#define LA_PUBLISH_DELAY_MAX_MS 1000
uint64_t shm_publish_delay_ms(void);
bool shm_name_pending(void);
/* The word shm_name_pending reads (a private futex): it changes when a
 * thread names the file or the naming fails, which wake its waiters, or when the exit
 * gives the name up (no wake: nothing is left to look at). The control thread waits on it
 * instead of the mailbox's doorbell while the name is pending (no one outside can ring
 * before the file has a name), so that a process that ends sooner never faults the
 * mailbox's page in. */
uint32_t *shm_name_word(void);
void shm_name_now(bool keep);
/* The sweep of stale segments in the run directory the start left to the control thread
 * (once; nothing when it was not left, or this is not the process that published). */
#define SHM_REAP_AFTER_NS 1000000000ull
void shm_reap_stale(void);
bool shm_reap_pending(void);
/* Look for other allocators' libraries mapped into the process (jemalloc, tcmalloc,
 * mimalloc): record them in the header and say so once on stderr (each once: called at
 * start and again by the control thread after dlopen calls). */
void shm_detect_foreign(void);
/* dlopen calls so far (the control thread looks again after each: control.c) */
extern LA_HIDDEN uint32_t shm_dlopens;
const char *shm_path(void);
/* In a forked child, before anything writes the segment: move off the parent's file to a
 * file of the child's own holding a copy (private memory where it cannot be made), which
 * shm_publish_file then publishes (or leaves to be named later). */
void shm_fork_child(void);
/* In the fork's prepare handler: what the child needs to know of the clone's time. */
void shm_fork_prepare(void);
/* The statistics at the fork (every arena locked), which the child takes over (a published
 * segment is a shared file the parent goes on writing). */
void shm_fork_snapshot(void);
/* SIGBUS at addr (sigbus.c): if addr is in the segment, whose file was truncated, the
 * segment moves to private memory (and is unpublished) and true is returned: the faulting
 * access can be retried. Async-signal-safe. */
bool shm_fault(const void *addr);
/* Install liballoc's SIGBUS handler (once; sigbus.c). sigbus_install_handler: the handler
 * only, without looking up libc's signal() family (dlsym, which may allocate): callable
 * under the allocator's locks. */
void sigbus_install(void);
void sigbus_install_handler(void);
/* Free memory was retained: make sure the control thread will run a decay pass (the
 * call only when it is not armed yet). */
void shm_note_retained_slow(void);
extern LA_HIDDEN uint32_t shm_decay_armed;
LA_INLINE void shm_note_retained(void)
{
	if (unlikely(!__atomic_load_n(&shm_decay_armed, __ATOMIC_RELAXED)))
		shm_note_retained_slow();
}
/* Wake the control thread to look at its deadlines again (the decay pass was armed, or
 * decay_ms changed and its current wait may have been set by the old period). It bumps
 * shm_kicks, which the control thread reads before it looks and sleeps on: a wake-up
 * between the two is not lost. */
void shm_wake_control(void);
/* The same for something that needs the thread's attention no sooner than due_ns
 * (CLOCK_MONOTONIC; 0: its next decay tick, shm_control_tick_ns): where the thread sleeps
 * until due_ns or sooner anyway (it publishes when its sleep ends, shm_control_wake_ns; the
 * start's naming, LIBALLOC_PUBLISH_DELAY after it, is such a deadline), the kick wakes no
 * one: the thread finds it when it wakes and acts on it as it would have at once (a decay
 * pass armed runs at its tick, a measurement at its time). A process that ends within its
 * first 50 ms (a shell utility) sent its control thread a wake-up at its first large free,
 * and another at its first measurement asked for, each an interrupt to wake the other CPU,
 * which then ran beside the program and received a TLB-shootdown interrupt with each of its
 * munmap, madvise and mremap calls. */
void shm_kick_control(uint64_t due_ns);
/* When the control thread's sleep ends by itself (0: never), and the earliest a decay
 * pass armed now would run (UINT64_MAX: none: decay_ms 0). The thread writes the pass's
 * first, the sleep's last, before it sleeps; a kicker reads them in the other order,
 * after its kick (shm_kick_control). */
extern LA_HIDDEN uint64_t shm_control_wake_ns, shm_control_tick_ns;
extern LA_HIDDEN uint32_t shm_kicks;
/* set on the control thread: its own kicks bump shm_kicks and wake no one */
extern __thread uint8_t shm_is_control __attribute__((tls_model("initial-exec")));
/* the control thread's own kicks (only it reads and writes it) */
extern LA_HIDDEN uint32_t shm_own_kicks;
/* set while the control thread's decay pass flushes cold thread caches (only it reads and
 * writes it): what the flush retains does not arm the next pass, which the rest of that
 * pass decides (control.c op_decay) */
extern LA_HIDDEN uint8_t shm_decay_flushing;

#endif
