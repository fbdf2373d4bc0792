/* lock.h — a small priority-inheriting futex mutex for arena and global locks: the word is
 * 0 when free, else the owner's thread id (with FUTEX_WAITERS once the kernel queued a
 * waiter). An uncontended lock and unlock are one compare-and-swap each; a contended lock
 * spins briefly, then sleeps in FUTEX_LOCK_PI, which lends the waiter's priority to the
 * owner: a real-time thread that finds an arena locked by a normal-priority one (the
 * control thread flushing caches, say) waits only for the owner's critical section, even
 * while other threads keep the CPU busy. Process-private; re-initialised in the child
 * after fork (la_lock_fork_child: the forking thread's id changes). Reports whether the
 * acquisition had to wait (for lock_contended). */
#ifndef LA_LOCK_H
#define LA_LOCK_H

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

struct la_lock {
	uint32_t word;
};

#define LA_LOCK_INIT \
	{            \
		0    \
	}

static inline long la_futex(uint32_t *uaddr, int op, uint32_t val, const void *timeout)
{
	return syscall(SYS_futex, uaddr, op, val, timeout, NULL, 0);
}

/* The calling thread's id, cached (0 until its first lock). */
extern __thread uint32_t la_tid __attribute__((tls_model("initial-exec")));
LA_COLD uint32_t la_tid_slow(void);
LA_COLD bool la_lock_slow(struct la_lock *l);
LA_COLD void la_unlock_slow(struct la_lock *l);

LA_INLINE uint32_t la_self(void)
{
	uint32_t t = la_tid;
	return likely(t != 0) ? t : la_tid_slow();
}

LA_INLINE bool la_trylock(struct la_lock *l)
{
	uint32_t expected = 0;
	return __atomic_compare_exchange_n(&l->word, &expected, la_self(), false, __ATOMIC_ACQUIRE,
	                                   __ATOMIC_RELAXED);
}

/* Returns true when the lock was contended. */
LA_INLINE bool la_lock(struct la_lock *l)
{
	if (likely(la_trylock(l)))
		return false;
	return la_lock_slow(l);
}

LA_INLINE void la_unlock(struct la_lock *l)
{
	uint32_t self = la_tid; /* set: this thread took the lock */
	if (unlikely(!__atomic_compare_exchange_n(&l->word, &self, 0, false, __ATOMIC_RELEASE,
	                                          __ATOMIC_RELAXED)))
		la_unlock_slow(l); /* waiters: the kernel hands the lock over */
}

static inline void la_lock_reinit(struct la_lock *l)
{
	l->word = 0;
}

/* A fork in progress: the forking thread's id from the moment it holds every arena's lock
 * (malloc.c's prepare handler) until it let them go in the parent, else 0. A thread of
 * normal priority that finds a lock held by it sleeps on this word until the fork is over
 * (la_lock_slow): in FUTEX_LOCK_PI the kernel spins a waiter as long as the owner runs, and
 * the forking thread runs for the whole copy of the address space. la_fork_waiting counts
 * the sleepers (la_fork_end wakes them only then). */
extern LA_HIDDEN uint32_t la_forker, la_fork_waiting;

static inline void la_fork_begin(void)
{
	__atomic_store_n(&la_forker, la_self(), __ATOMIC_SEQ_CST);
}

static inline void la_fork_end(void)
{
	__atomic_store_n(&la_forker, 0, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&la_fork_waiting, __ATOMIC_SEQ_CST))
		la_futex(&la_forker, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
}

/* In the child after fork, before any lock: the forking thread has a new id, and the fork
 * is over (no other thread is there to wait for it). */
static inline void la_lock_fork_child(void)
{
	la_tid = 0;
	la_forker = 0;
	la_fork_waiting = 0;
}

#endif
