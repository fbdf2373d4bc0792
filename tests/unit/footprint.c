/* footprint.c — what liballoc keeps resident for itself in every process: its segment
 * (the header, tunables, class sizes, process block and the first arena's block and class
 * statistics share one page; the mailbox has its own), the direct mappings' registry and
 * cache. A heap's header pages are in heap.c. Linked with liballoc.a; every test runs in
 * its own process. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "direct.h"
#include "liballoc.h"
#include "liballoc_shm.h"
#include "pagemap.h"
#include "shm.h"
#include "stackdepth.h"

Test(segment, a_process_keeps_the_first_page_of_it_the_pages_of_its_arenas_and_the_mailbox)
{
	void *p = A(malloc)(64); /* the allocator (and its segment) is up */
	cr_assert_not_null(p);
	A(free)(p);
	struct la_shm_header *h = shm_header();
	cr_assert_not_null(h);
	cr_assert_eq(h->magic, LA_SHM_MAGIC);
	cr_assert_leq(h->arena_count, 4);
	/* the first arena's block and class statistics are in the first page: a process with
	 * one arena keeps two pages (the test runner's threads may have taken a second) */
	cr_assert_leq(h->off_arenas + h->arena_stride, LA_SHM_PAGE);
	cr_assert_eq(h->off_arena_classes, h->off_arenas + sizeof(struct la_shm_arena));
	cr_assert_eq(h->arena_class_stride, h->arena_stride);
	uint64_t want =
	        (h->off_arenas + h->arena_count * h->arena_stride + LA_SHM_PAGE - 1) / LA_SHM_PAGE +
	        1;
	size_t pages = h->total_size / LA_SHM_PAGE;
	int fd = open("/proc/self/pagemap", O_RDONLY);
	cr_assert_geq(fd, 0);
	long resident = pagemap_present(fd, (uintptr_t)h, (uintptr_t)h + h->total_size);
	close(fd);
	cr_assert_geq(resident, 0, "pagemap: %s", strerror(errno));
	/* the first page (and the arenas' pages after it) and the mailbox; an older layout
	 * kept the header, the mailbox, the tunables and classes, and the process and arena
	 * blocks on four */
	cr_assert_leq((uint64_t)resident, want, "%ld of %zu segment pages resident (%u arenas)",
	              resident, pages, h->arena_count);
	cr_assert_eq(h->off_mailbox, h->total_size - LA_SHM_PAGE, "the mailbox is the last page");
}

/* This thread's minor faults so far. */
static long thread_faults(void)
{
	struct rusage r;
	cr_assert_eq(getrusage(RUSAGE_THREAD, &r), 0);
	return r.ru_minflt;
}

/* A process's first direct mappings (blocks above the mmap threshold; their own pages the
 * program never touches here) fault one page of the registry and one of the cache: the
 * first table is one page, written before a probe reads it, and the ring of mappings
 * dropped is not read while nothing was dropped. Before, the 256-slot table's two pages
 * that 8 mappings fell on were each read first (the zero page mapped) and then written,
 * and the empty ring's read mapped the zero page of the cache's page, which the first
 * free then wrote (a small preloaded program: 5 faults for the 8 mallocs, 1 for the frees;
 * here 2 and 1). */
Test(direct, the_first_mappings_fault_one_page_of_registry_and_one_of_cache)
{
	A(free)(A(malloc)(64)); /* the allocator is up */
	void *b[8];
	long before = thread_faults();
	for (int i = 0; i < 8; i++) {
		b[i] = A(malloc)(1 << 20);
		cr_assert_not_null(b[i]);
	}
	long mapped = thread_faults();
	for (int i = 0; i < 8; i++)
		A(free)(b[i]);
	long freed = thread_faults();
#if defined(__SANITIZE_ADDRESS__)
	cr_skip_test("ASan's shadow pages fault beside liballoc's");
#endif
	cr_assert_leq(mapped - before, 1, "8 direct mallocs: %ld faults", mapped - before);
	cr_assert_leq(freed - mapped, 1, "8 direct frees: %ld faults", freed - mapped);
}

/* Direct mappings made and freed with the threshold pinned (a program's mallopt: no
 * cache, each free dropped and remembered in the rings of mappings dropped and freed): one
 * page of the library's memory, which holds the first table, those rings and the first
 * cached mappings (direct.c, dfirst), where the table and the rings were a page each (2
 * faults). In a forked child of a parent that did the same, that page is the parent's: one
 * copy-on-write fault (2 before). */
/* The program's code, mapped in before a count: a forked child's first run of a code page
 * is a fault of its own (fork copies no page-table entries of file mappings; the kernel's
 * fault-around maps the pages near a fault only when they are ready), which the count of
 * the allocator's pages is not about: 1 in 20-40 forked children at load ~6 read 2 faults,
 * the second malloc_slow's code page (perf record -e page-faults). */
extern const char __executable_start[], etext[];
static void code_mapped(void)
{
	uintptr_t from = (uintptr_t)__executable_start & ~(uintptr_t)4095;
	uintptr_t to = ((uintptr_t)etext + 4095) & ~(uintptr_t)4095;
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
	cr_assert_eq(madvise((void *)from, to - from, MADV_POPULATE_READ), 0,
	             "(set-up) MADV_POPULATE_READ of the code: %s", strerror(errno));
}

static long direct_round_faults(void)
{
	A(free)(A(malloc)(64)); /* (a forked child's first malloc: its own faults) */
	code_mapped();
	void *b[2];
	long before = thread_faults();
	for (int i = 0; i < 2; i++) {
		b[i] = A(malloc)(1 << 20);
		cr_assert_not_null(b[i]);
	}
	for (int i = 0; i < 2; i++)
		A(free)(b[i]);
	return thread_faults() - before;
}

Test(direct, mappings_made_and_dropped_fault_one_page_in_a_process_and_its_forked_child)
{
#if defined(__SANITIZE_ADDRESS__)
	cr_skip_test("ASan's shadow pages fault beside liballoc's");
#endif
	cr_assert_eq(A(mallopt)(M_MMAP_THRESHOLD, 64 << 10), 1);
	long first = direct_round_faults();
	cr_assert_leq(first, 1, "2 direct mallocs and frees: %ld faults", first);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		long f = direct_round_faults();
		_exit(f > 9 ? 9 : (int)f);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	cr_assert_leq(WEXITSTATUS(st), 1, "a forked child's 2 direct mallocs and frees: %d faults",
	              WEXITSTATUS(st));
}

/* A drop of the cached direct mappings (a trim's, the decay pass's) takes little stack:
 * drop_cache kept the entries it unmaps after its lock whole (64 of 96 bytes: a 6 KiB
 * frame), which with the measured unmap's mincore buffer under it took a trim ~7 KiB
 * below its caller, a page or two under what a program's stack had used: a fork loop's
 * child faulted those in at its malloc_trim (copies of its parent's pages), ~1.6 faults a
 * child (perf page-faults on [stack], forkfree 40 4 plain). The drop now keeps an
 * address and a length a mapping. Measured on a thread of our own stack, painted below
 * the call (stackdepth.h). */
static size_t trim_depth;
static uint64_t trim_cached; /* bytes of mappings cached when the drop ran */

static void drop_cached(void *arg)
{
	(void)arg;
	direct_trim();
}

static void cache_mappings(void)
{
	void *b[4];
	for (int i = 0; i < 4; i++) {
		b[i] = A(malloc)((size_t)(i + 1) << 20);
		cr_assert_not_null(b[i]);
		memset(b[i], 1, 4096); /* a resident page each: the drop's measurement counts it */
	}
	for (int i = 0; i < 4; i++)
		A(free)(b[i]); /* cached */
}

/* The libc calls a drop makes, bound: this test's PLT binds lazily, and ld.so's resolver
 * saves the vector registers on the stack (~3 KiB here; the preloaded library binds at
 * load, -z now) */
static void bind_trims_calls(void)
{
	unsigned char vec[1];
	struct timespec ts;
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	cr_assert_eq(mincore(p, 4096, vec), 0);
	cr_assert_eq(madvise(p, 4096, MADV_DONTNEED), 0);
	cr_assert_eq(munmap(p, 4096), 0);
	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	cr_assert_gt(syscall(SYS_getpid), 0);
	errno = 0;
}

static void *trim_thread(void *arg)
{
	(void)arg;
	bind_trims_calls();
	cache_mappings();
	struct la_counters c = {0};
	liballoc_stats(&c);
	trim_cached = c.direct_cache_bytes;
	trim_depth = painted_depth(drop_cached, NULL);
	return NULL;
}

Test(direct, a_drop_of_cached_mappings_takes_under_2_kib_of_stack)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	cr_skip_test("the sanitizers' frames are not liballoc's");
#endif
	A(free)(A(malloc)(64)); /* the allocator is up */
	cr_assert_eq(run_on_own_stack(trim_thread, NULL), 0, "a thread on a stack of our own");
	cr_log_info("a drop of %llu bytes of cached mappings: %zu bytes of stack",
	            (unsigned long long)trim_cached, trim_depth);
	cr_assert_gt(trim_cached, 0, "mappings cached for the drop");
	cr_assert_gt(trim_depth, 0, "the drop ran on the painted stack");
	cr_assert_lt(trim_depth, 2048, "the drop went %zu bytes below its caller", trim_depth);
}

/* The look for other allocators at the start and after each dlopen (shm.c, foreign_one)
 * passes over every loaded object whose name does not start "lib", and tells the table's
 * names apart by their fourth byte before it compares the rest: every name of LA_FOREIGN
 * starts "lib" and goes on past it. */
Test(footprint, every_foreign_allocators_library_name_starts_lib)
{
#define T_FOREIGN(name, bit, lib)                                                        \
	cr_assert(strncmp(lib, "lib", 3) == 0 && strlen(lib) > 3, "%s: %s", #name, lib); \
	cr_assert_eq(sizeof(lib) - 1, strlen(lib));
	LA_FOREIGN(T_FOREIGN)
#undef T_FOREIGN
}
