/* fatal.c — error reporting that never allocates: one line on stderr with write(2). */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "lock.h"

static void write_all(const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(2, s, n);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return;
		}
		s += w;
		n -= (size_t)w;
	}
}

void la_warn(const char *first, ...)
{
	char line[512];
	size_t n = la_strlcpy(line, "liballoc: ", sizeof(line));
	va_list ap;
	va_start(ap, first);
	for (const char *s = first; s; s = va_arg(ap, const char *))
		n += la_strlcpy(line + n, s, sizeof(line) - n);
	va_end(ap);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	int saved = errno;
	write_all(line, n);
	errno = saved;
}

void la_fatal(const char *func, const char *problem)
{
	char line[256];
	size_t n = la_strlcpy(line, "liballoc: ", sizeof(line));
	n += la_strlcpy(line + n, func, sizeof(line) - n);
	n += la_strlcpy(line + n, ": ", sizeof(line) - n);
	n += la_strlcpy(line + n, problem, sizeof(line) - n);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	write_all(line, n);
	abort();
}

long la_parse_long(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -1;
	long v = 0;
	for (; *s >= '0' && *s <= '9'; s++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s - '0', &v))
			return -1;
	return v;
}

size_t la_fmt_base(char *buf, uint64_t v, unsigned base)
{
	char tmp[21];
	size_t n = 0;
	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = 0;
	return n;
}

size_t la_strlcpy(char *dst, const char *src, size_t n)
{
	size_t len = strlen(src);
	if (n) {
		size_t c = len < n - 1 ? len : n - 1;
		memcpy(dst, src, c);
		dst[c] = 0;
		return c;
	}
	return 0;
}

__thread uint32_t la_tid __attribute__((tls_model("initial-exec")));

uint32_t la_tid_slow(void)
{
	la_tid = (uint32_t)syscall(SYS_gettid);
	return la_tid;
}

/* FUTEX_LOCK_PI failed for good (kernels without PI futexes, a seccomp filter): wait by
 * polling. Never the case on the kernels liballoc supports; kept so that a lock never
 * spins at full speed. */
static bool pi_missing;

uint32_t la_forker, la_fork_waiting;

/* Whether this thread runs at a real-time priority (FIFO, RR, deadline): it waits for a
 * lock in FUTEX_LOCK_PI even during a fork, which lends its priority to the forking thread
 * (a normal-priority waiter lends it nothing: the kernel boosts only to real-time
 * priorities). */
#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif
#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
static bool waits_with_priority(void)
{
	long policy = syscall(SYS_sched_getscheduler, 0);
	policy &= ~(long)SCHED_RESET_ON_FORK;
	return policy == SCHED_FIFO || policy == SCHED_RR || policy == SCHED_DEADLINE;
}

/* l is held by a fork in progress (la_forker, not this thread): sleep until the fork is
 * over, unless this thread waits with its priority. False when it did not sleep. */
static bool wait_for_fork(struct la_lock *l)
{
	uint32_t forker = __atomic_load_n(&la_forker, __ATOMIC_SEQ_CST);
	if (!forker || forker == la_tid ||
	    (__atomic_load_n(&l->word, __ATOMIC_RELAXED) & FUTEX_TID_MASK) != forker ||
	    waits_with_priority())
		return false;
	__atomic_fetch_add(&la_fork_waiting, 1, __ATOMIC_SEQ_CST);
	la_futex(&la_forker, FUTEX_WAIT_PRIVATE, forker, NULL); /* (returns at once if over) */
	__atomic_fetch_sub(&la_fork_waiting, 1, __ATOMIC_SEQ_CST);
	return true;
}

/* Spin while the lock is held, taking it once it is free (about 2 us: 100 pauses). */
static bool spin_for(struct la_lock *l)
{
	for (int i = 0; i < 100; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		if (__atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 && la_trylock(l))
			return true;
	}
	return false;
}

/* Before a waiter sleeps in FUTEX_LOCK_PI it gives its CPU up (sched_yield, the system
 * call: not the program's symbol) and spins again, this many times. A sleeper makes a
 * convoy: the kernel hands the lock over at the unlock to the sleeping waiter, which owns
 * it from then on but runs only once it is woken and scheduled; meanwhile every other
 * thread that wants the lock finds it held by a thread that is not running, and sleeps too.
 * With more threads than CPUs an owner preempted in its critical section starts one (4
 * threads on 2 arenas and 2 CPUs, `sizemix 4 300`: ~200 sleeps a run, 68 % of its context
 * switches, in refill_shared's lock), and the owner waiting on this CPU's run queue runs
 * at the yield. A real-time waiter yields only to its peers: it spends these few
 * microseconds (each round one system call and 100 pauses), then lends its priority in
 * FUTEX_LOCK_PI as before. */
#define LOCK_YIELDS 16

bool la_lock_slow(struct la_lock *l)
{
	/* a fork may take the lock during the yields: each spin that fails looks for one, as
	 * the first does (a waiter that went on to FUTEX_LOCK_PI then was spun by the kernel
	 * for the whole copy of the address space) */
	for (int y = 0;;) {
		if (spin_for(l))
			return true;
		if (wait_for_fork(l))
			continue;
		if (y++ == LOCK_YIELDS)
			break;
		syscall(SYS_sched_yield);
	}
	while (!__atomic_load_n(&pi_missing, __ATOMIC_RELAXED)) {
		/* the kernel takes the lock for us (word 0 -> our id) or queues us, raising the
		 * owner to our priority until it unlocks and hands the lock over */
		if (la_futex(&l->word, FUTEX_LOCK_PI_PRIVATE, 0, NULL) == 0) {
			/* the kernel handed the lock over: pair with la_unlock_slow's release for
			 * the memory model (and TSan), as a user-space acquisition would */
			(void)__atomic_load_n(&l->word, __ATOMIC_ACQUIRE);
			return true;
		}
		if (errno != EINTR && errno != EAGAIN)
			__atomic_store_n(&pi_missing, true, __ATOMIC_RELAXED);
	}
	struct timespec ts = {0, 50000};
	while (!la_trylock(l))
		nanosleep(&ts, NULL);
	return true;
}

void la_unlock_slow(struct la_lock *l)
{
	__atomic_fetch_or(&l->word, 0, __ATOMIC_RELEASE); /* see la_lock_slow */
	la_futex(&l->word, FUTEX_UNLOCK_PI_PRIVATE, 0, NULL);
}
