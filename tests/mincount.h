/* mincount.h — the mincore calls one thread makes, counted: liballoc.a's calls land in
 * the mincore this defines (include it in one file of a test binary). Only the counting
 * thread's: the control thread measures on its own schedule (its calls can fall in the
 * window of a trim that found no measurement due: 1 in 12 runs with 3 ms between the two;
 * a make test at load 27 in session 34). */
#ifndef LA_TESTS_MINCOUNT_H
#define LA_TESTS_MINCOUNT_H

#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

static long mincount_tid; /* the thread counted (0: none) */
static int mincount_calls;

int mincore(void *addr, size_t len, unsigned char *vec)
{
	long t = __atomic_load_n(&mincount_tid, __ATOMIC_RELAXED);
	if (t && t == syscall(SYS_gettid))
		__atomic_fetch_add(&mincount_calls, 1, __ATOMIC_RELAXED);
	return (int)syscall(SYS_mincore, addr, len, vec);
}

/* count the calling thread's calls from 0 */
static inline void mincount_start(void)
{
	__atomic_store_n(&mincount_calls, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&mincount_tid, syscall(SYS_gettid), __ATOMIC_RELAXED);
}

/* stop counting: the calls since mincount_start */
static inline int mincount_stop(void)
{
	__atomic_store_n(&mincount_tid, 0, __ATOMIC_RELAXED);
	return __atomic_load_n(&mincount_calls, __ATOMIC_RELAXED);
}

#endif
