/* os.h — every system call the allocator makes on memory goes through here, and is
 * counted into a counter block of the segment (the caller names which one).
 * Contract (like mimalloc's prim.h): functions return 0 on success or an errno value;
 * mappings are MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, read-write, never PROT_NONE —
 * heap growth therefore never costs an mprotect per page. */
#ifndef LA_OS_H
#define LA_OS_H

#include <pthread.h>
#include <sys/types.h>

#include "common.h"

/* Map size bytes (page multiple). Returns NULL on failure (errno kept). */
void *os_map(size_t size, struct la_counters *c);
/* Map size bytes aligned to align (a power of two >= page). */
void *os_map_aligned(size_t size, size_t align, struct la_counters *c);
int os_unmap(void *p, size_t size, struct la_counters *c);
/* Return pages to the system (MADV_DONTNEED); contents read back as zero. */
int os_purge(void *p, size_t size, struct la_counters *c);
/* Purge the n ranges of iov in one system call (process_madvise MADV_DONTNEED on the
 * calling thread, PIDFD_SELF: one TLB flush for them all, where a madvise per range flushes
 * each range's pages one by one: 20 ranges of 10 pages in a forked child, 78 us -> 16 us).
 * Returns how many leading ranges went back whole (the caller advises the others alone);
 * 0 at once where the kernel refused it before (before 6.13 it takes no MADV_DONTNEED,
 * before 6.14 no PIDFD_SELF; a sandbox, an mlocked range). Counted as one madvise call. */
struct iovec;
uint32_t os_purge_many(const struct iovec *iov, uint32_t n, struct la_counters *c);
/* Deactivate [p, p+size) (MADV_COLD, Linux 5.4): here, so that the kernel splits a huge
 * page a purge left partly mapped, and the purged part is freed (and uncharged from the
 * memory cgroup) now instead of when memory pressure splits it; the pages still mapped
 * keep their contents. 0 or an errno value (EINVAL on an older kernel). */
int os_cold(void *p, size_t size, struct la_counters *c);
/* Fault pages in, writable, in one call (MADV_POPULATE_WRITE, Linux 5.14): 0 or an errno
 * value (EINVAL where the kernel lacks it: the caller stops asking). */
int os_populate(void *p, size_t size, struct la_counters *c);
/* The process's os_populate calls and their bytes (atomic), apart from the purges and other
 * advice they are counted with in madvise_calls/madvise_bytes: so that a test of the throttle
 * counts the calls that give pages back, not a growth's populates (populate-ahead, a fresh
 * first page: heap.c). Not published (the segment's counters stay as they are). */
extern LA_HIDDEN uint64_t os_populate_calls, os_populate_bytes;
/* Transparent huge pages on [p, p+size) (2 MiB-aligned, whole 2 MiB ranges) from its next
 * faults on (MADV_HUGEPAGE), or off again (MADV_NOHUGEPAGE: its faults are a page each and
 * khugepaged leaves it alone): 0 or an errno value (EINVAL: a kernel without THP). */
int os_huge(void *p, size_t size, bool on, struct la_counters *c);
/* Pages [p, p+size) left out of a forked child (MADV_WIPEONFORK: the fork neither copies
 * nor write-protects them, the child reads zeros there), or copied again (MADV_KEEPONFORK):
 * 0 or an errno value (EINVAL: a kernel before 4.14). Counted with the other advice. */
int os_wipe_on_fork(void *p, size_t size, bool wipe, struct la_counters *c);
/* The size of a transparent huge page when the kernel gives them to ranges advised with
 * os_huge (THP `enabled` is `always` or `madvise`), 0 if not (`never`, no THP, unknown). */
size_t os_huge_size(void);
/* Transparent huge pages back ranges nobody advised (mode "always", a multi-size THP's
 * hugepages-<size>kB/enabled "always", or the mode unknown): then pages no allocator write
 * touched may be resident. */
bool os_thp_always(void);
/* Transparent huge pages of 2 MiB back ranges nobody advised (`enabled` "always", or
 * hugepages-2048kB/enabled "always", or the mode unknown): a mapping placed on a 2 MiB
 * boundary would take one for its first bytes. Two files read at its first call (where
 * os_thp_always reads every size's: ~40 system calls, ~90 us on session 25's machine), one
 * when os_thp_always has read `enabled` already, none when it said no. */
bool os_thp_pmd_always(void);
/* Where the three above read the kernel's THP modes (tests point it at a directory of their
 * own, then call os_huge_reread: all are read again at their next call). */
extern LA_HIDDEN const char *os_thp_dir;
void os_huge_reread(void);
/* Bytes of [p, p+size) that are resident, via mincore. */
size_t os_resident(void *p, size_t size);
/* While a thread has this set, every range it purges or unmaps is measured first (mincore)
 * and its resident bytes added here: what a command really released, the kernel's word. */
extern __thread uint64_t *os_measure __attribute__((tls_model("initial-exec")));
/* ... and while this is non-zero too, the operation stops once that many bytes came back
 * (a trim or release asked for only what is needed: allocctld's policies, LA_MB_GOAL). */
extern __thread uint64_t os_goal __attribute__((tls_model("initial-exec")));
static inline bool os_goal_met(void)
{
	return os_measure != NULL && os_goal != 0 && *os_measure >= os_goal;
}
void *os_remap(void *p, size_t old_size, size_t new_size, struct la_counters *c);
/* os_remap without moving: NULL (errno ENOMEM) when the address space after p is taken. */
void *os_remap_in_place(void *p, size_t old_size, size_t new_size, struct la_counters *c);
/* Move the pages of mapping [p, p + size) to [to, to + size), replacing what was mapped
 * there (mremap MREMAP_FIXED): 0 or an errno value (the mapping stays where it was, and
 * the target range is mapped: as it was, or fresh pages where the kernel unmapped it
 * before refusing). */
int os_move(void *p, size_t size, void *to, struct la_counters *c);
/* os_move within a mapping (MREMAP_DONTUNMAP): [p, p + size) stays mapped, with no pages
 * (fresh zero pages where it is written again); 0 or an errno value (the pages stay at p;
 * the target range is mapped, as os_move's). */
int os_move_out(void *p, size_t size, void *to, struct la_counters *c);
/* Whether the process's address space is limited (RLIMIT_AS not infinite): a move that
 * keeps its source mapped (os_move_out) needs its size again, and a process that is over
 * the limit (lowered under it, prlimit) has it refused after the kernel unmapped the
 * target range, which it cannot map again either. */
bool os_address_space_limited(void);

/* Read a small file (a /proc entry) into buf, NUL-terminated; its length, or -1. */
ssize_t os_read_small(const char *path, char *buf, size_t len);

/* Call fn(ctx, dfd, name) for each entry of the open directory dfd (getdents64: no
 * allocation) until fn returns false. */
void os_dir_each(int dfd, bool (*fn)(void *ctx, int dfd, const char *name), void *ctx);

uint64_t os_now_ns(void);  /* CLOCK_MONOTONIC */
uint64_t os_wall_ns(void); /* CLOCK_REALTIME */
uint64_t os_boot_ns(void); /* CLOCK_BOOTTIME */
int os_ncpus(void);        /* CPUs this process may run on */
/* Direct system calls for what the segment needs (see os.c: no libc pages pulled in). */
pid_t os_getpid(void);
uid_t os_getuid(void);
uid_t os_geteuid(void);
int os_rename(const char *from, const char *to); /* 0 or an errno value */
/* A detached thread of STACK bytes running fn(arg), started with every signal blocked (the
 * program's handlers never run on it), through libc's pthread_create (not liballoc's, which
 * counts application threads: control.c): 0 or an errno value. Its stack is mem (STACK
 * bytes, page-aligned, used by no other live thread) when given, else libc's mapping. The
 * mask is this thread's for the creation (two system calls), which allocates nothing. */
int os_thread_start(void *(*fn)(void *), void *arg, size_t stack, void *mem);
/* The same in two steps, for a thread started again with the same attributes (the control
 * thread of each forked child): attr made once (every signal but SIGBUS blocked, detached,
 * the stack as above: pthread_attr_setsigmask_np, one allocation kept with attr; 0 or an
 * errno value, attr then not made), each start with it. */
int os_thread_attr(pthread_attr_t *attr, size_t stack, void *mem);
int os_thread_start_attr(void *(*fn)(void *), void *arg, const pthread_attr_t *attr);

/* liballoc interposes pthread_create where it is the process's allocator (control.c). */
#if !defined(LA_PREFIX) && !LA_NO_STATS
#define LA_WRAP_THREADS 1
#else
#define LA_WRAP_THREADS 0
#endif
typedef int (*os_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
/* libc's pthread_create (NULL if it cannot be found). */
os_create_fn os_real_pthread_create(void);
typedef int (*os_join_fn)(pthread_t, void **);
/* libc's pthread_join (NULL if it cannot be found). */
os_join_fn os_real_pthread_join(void);

#endif
