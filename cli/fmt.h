/* fmt.h — human units in and out for allocctl: sizes ("64K", "1.5G" <-> "812.0 MiB"),
 * durations, uptimes, plain numbers. Pure functions without I/O or global state.
 * Parsers return 0, or -1 with errno EINVAL (not a number of that kind) or ERANGE (does
 * not fit); they never clamp. Formatters write into a caller buffer and return it. */
#ifndef ALLOCCTL_FMT_H
#define ALLOCCTL_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FMT_BUF 48 /* enough for any formatted value below */

/* The parsers are la_parse's (liballoc_parse.h: the grammar of the environment, the
 * daemon and the CLI alike; blanks around a value are ignored).
 * "4096", "64K", "64k", "64KiB", "64KB", "1.5G", "2 M": binary multiples
 * (K = 1024), at most INT64_MAX. A fractional result is rounded to the nearest byte. */
int fmt_parse_size(const char *s, uint64_t *out);
/* Milliseconds: "250", "250ms", "10s", "1.5s", "2m", "1h". */
int fmt_parse_ms(const char *s, int64_t *out);
/* 0/1, on/off, true/false, yes/no (any case) -> 0 or 1. */
int fmt_parse_bool(const char *s, int64_t *out);
/* A decimal integer, optionally negative. */
int fmt_parse_int(const char *s, int64_t *out);
/* A process id: a decimal integer in 1..INT32_MAX. */
int fmt_parse_pid(const char *s, int32_t *out);

/* Bytes as "812.0 MiB" ("512 B" below 1 KiB), or the plain number when raw. */
char *fmt_size(char *buf, size_t n, uint64_t bytes, bool raw);
/* Nanoseconds as "850 ns", "12.4 us", "3.1 ms", "2.50 s". */
char *fmt_duration_ns(char *buf, size_t n, uint64_t ns);
/* Seconds as "45s", "12m03s", "3h07m", "2d04h". */
char *fmt_uptime(char *buf, size_t n, uint64_t seconds);
/* Milliseconds as "250 ms", "10 s", "1.5 s". */
char *fmt_ms(char *buf, size_t n, int64_t ms);
char *fmt_u64(char *buf, size_t n, uint64_t v);

#endif
