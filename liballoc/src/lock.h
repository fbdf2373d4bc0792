/* lock.h — a small futex mutex (0 free, 1 held, 2 held with waiters) for arena and
 * global locks. Process-private; re-initialised in the child after fork. Spins briefly
 * before sleeping; reports whether the acquisition had to wait (for lock_contended). */
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

LA_COLD bool la_lock_slow(struct la_lock *l);

/* Returns true when the lock was contended. */
LA_INLINE bool la_lock(struct la_lock *l)
{
	uint32_t expected = 0;
	if (likely(__atomic_compare_exchange_n(&l->word, &expected, 1, false, __ATOMIC_ACQUIRE,
	                                       __ATOMIC_RELAXED)))
		return false;
	return la_lock_slow(l);
}

LA_INLINE bool la_trylock(struct la_lock *l)
{
	uint32_t expected = 0;
	return __atomic_compare_exchange_n(&l->word, &expected, 1, false, __ATOMIC_ACQUIRE,
	                                   __ATOMIC_RELAXED);
}

LA_INLINE void la_unlock(struct la_lock *l)
{
	if (unlikely(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2))
		la_futex(&l->word, FUTEX_WAKE_PRIVATE, 1, NULL);
}

static inline void la_lock_reinit(struct la_lock *l)
{
	l->word = 0;
}

#endif
