/* fatal.c — error reporting that never allocates: one line on stderr with write(2). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

size_t la_fmt_u64(char *buf, uint64_t v)
{
	char tmp[21];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
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

bool la_lock_slow(struct la_lock *l)
{
	for (int i = 0; i < 100; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		if (__atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 && la_trylock(l))
			return true;
	}
	uint32_t c = __atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		la_futex(&l->word, FUTEX_WAIT_PRIVATE, 2, NULL);
		c = __atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE);
	}
	return true;
}
