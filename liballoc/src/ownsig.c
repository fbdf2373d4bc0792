/* ownsig.c — liballoc's own definitions of the signal-set functions it calls, hidden as
 * sysraw.c's wrappers are (see there: each import is a symbol look-up at every process start
 * under -z now). They follow glibc 2.36's: signal n is bit n - 1 of sigset_t, of which they
 * read and write the kernel's 64 signals' word only;
 * sigfillset leaves out, and sigaddset and sigdelset refuse, the two signals glibc keeps for
 * itself (SIGCANCEL, 32, and SIGSETXID, 33: thread cancellation and set*id across threads).
 * Not in the sanitizer builds (LA_PREFIX), whose interceptors see the calls. */
#ifndef LA_PREFIX
#include <errno.h>
#include <signal.h>

#include "common.h"

#define WORD_BITS (8 * sizeof(unsigned long))
/* the words of the kernel's signals (1): glibc's functions read and write only those */
#define SET_WORDS ((NSIG - 1 + WORD_BITS - 1) / WORD_BITS)

static bool libc_own(int sig)
{
	return sig == 32 || sig == 33;
}

/* a signal of the set's range (1 to NSIG - 1), or EINVAL */
static bool in_range(int sig)
{
	if (sig > 0 && sig < NSIG)
		return true;
	errno = EINVAL;
	return false;
}

int sigemptyset(sigset_t *set)
{
	for (size_t i = 0; i < SET_WORDS; i++)
		set->__val[i] = 0;
	return 0;
}

int sigfillset(sigset_t *set)
{
	for (size_t i = 0; i < SET_WORDS; i++)
		set->__val[i] = ~0UL;
	set->__val[(32 - 1) / WORD_BITS] &= ~(3UL << ((32 - 1) % WORD_BITS));
	return 0;
}

static int set_bit(sigset_t *set, int sig, bool on)
{
	if (!in_range(sig))
		return -1;
	if (libc_own(sig)) {
		errno = EINVAL;
		return -1;
	}
	unsigned long bit = 1UL << ((unsigned)(sig - 1) % WORD_BITS);
	unsigned long *w = &set->__val[(unsigned)(sig - 1) / WORD_BITS];
	*w = on ? *w | bit : *w & ~bit;
	return 0;
}

int sigaddset(sigset_t *set, int sig)
{
	return set_bit(set, sig, true);
}

int sigdelset(sigset_t *set, int sig)
{
	return set_bit(set, sig, false);
}

int sigismember(const sigset_t *set, int sig)
{
	if (!in_range(sig))
		return -1;
	return (set->__val[(unsigned)(sig - 1) / WORD_BITS] >> ((unsigned)(sig - 1) % WORD_BITS)) &
	       1;
}

int sigorset(sigset_t *dst, const sigset_t *left, const sigset_t *right)
{
	for (size_t i = 0; i < SET_WORDS; i++)
		dst->__val[i] = left->__val[i] | right->__val[i];
	return 0;
}
#endif
