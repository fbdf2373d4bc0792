/* tunable.h — the tunable table (ctld/units.h, generated from LA_TUNABLES in
 * liballoc_shm.h, shared with the daemon), value parsing by type with the range check,
 * and formatting of values and ranges for people. The process stays the authority: values the
 * daemon reports (and its min/max/type when present) win over this table. */
#ifndef ALLOCCTL_TUNABLE_H
#define ALLOCCTL_TUNABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "units.h" /* struct tunable_info, tunable_table[], tunable_find() */

#define tunable_count ((size_t)LA_NTUNABLES)

/* "size", "bool", "int", "ms" (the strings of ctl.proto's Tunable.type); -1 if unknown. */
const char *tunable_type_name(int type);
int tunable_type_from_name(const char *name);
/* "mmap_threshold, mmap_threshold_max, ..." */
char *tunable_names(char *buf, size_t n);

/* Parse text as a value of t, check its range. On failure returns -1 and writes one
 * sentence naming the value and what would be valid into err. */
int tunable_parse(const struct tunable_info *t, const char *text, int64_t *out, char *err,
                  size_t errlen);
/* A value for people: "128.0 KiB" (raw: "131072"), "on"/"off", "10 s", "65536". */
char *tunable_format(char *buf, size_t n, int type, int64_t value, bool raw);
/* "0 .. 32.0 MiB", "0 or 1 (off/on)", "0 .. 3600 s". */
char *tunable_format_range(char *buf, size_t n, int type, int64_t min, int64_t max, bool raw);

#endif
