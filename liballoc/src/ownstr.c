/* ownstr.c — liballoc's own definitions of the C string functions it calls on a few bytes at
 * a time, hidden as sysraw.c's wrappers are (see there: each import is a symbol look-up at
 * every process start under -z now, ~790 instructions here): names of environment
 * variables and files, words of small /sys files. strlen and strrchr stay libc's (they run
 * over whole names and /proc/self/stat: a byte loop there cost more instructions than the
 * look-up saves, bench/README.md, session 41, start41), and so do memcpy, memmove and
 * memset (realloc and calloc copy and clear whole blocks with them). Not in the sanitizer
 * builds (LA_PREFIX), whose interceptors check the string functions' calls. */
#ifndef LA_PREFIX
#include <string.h>

#include "common.h"

int strcmp(const char *a, const char *b)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
	while (*x && *x == *y) {
		x++;
		y++;
	}
	return *x - *y;
}

int strncmp(const char *a, const char *b, size_t n)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
	for (; n; n--, x++, y++)
		if (*x != *y || !*x)
			return *x - *y;
	return 0;
}

char *strchr(const char *s, int c)
{
	for (;; s++) {
		if (*s == (char)c)
			return (char *)s;
		if (!*s)
			return NULL;
	}
}

/* the length of s's first run of bytes that are in set (in: true) or not in set */
static size_t span(const char *s, const char *set, bool in)
{
	size_t n = 0;
	for (; s[n]; n++) {
		const char *m = set;
		while (*m && *m != s[n])
			m++;
		if ((*m != 0) != in)
			break;
	}
	return n;
}

size_t strspn(const char *s, const char *accept)
{
	return span(s, accept, true);
}

size_t strcspn(const char *s, const char *reject)
{
	return span(s, reject, false);
}

char *strstr(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	if (!n)
		return (char *)hay;
	for (; *hay; hay++)
		if (*hay == *needle && strncmp(hay, needle, n) == 0)
			return (char *)hay;
	return NULL;
}
#endif
