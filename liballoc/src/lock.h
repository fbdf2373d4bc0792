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

/* In the child after fork, before any lock: the forking thread has a new id. */
static inline void la_lock_fork_child(void)
{
	la_tid = 0;
}

#endif
