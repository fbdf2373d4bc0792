/* units.h — tunable metadata (generated from LA_TUNABLES) and the parser/formatter of
 * human-unit values ("64K", "1.5G", "true", "250ms"). Pure functions, no allocation, no
 * libevent: the daemon, the CLI and the fuzzers link units.o alone. */
#ifndef CTLD_UNITS_H
#define CTLD_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "liballoc_shm.h"

struct tunable_info {
	const char *name;
	int type; /* LA_T_SIZE, LA_T_BOOL, LA_T_INT, LA_T_MS */
	int64_t def, min, max;
	int live;
	int mallopt;
	const char *help;
};

/* Indexed by enum la_tunable_id. */
extern const struct tunable_info tunable_table[LA_NTUNABLES];
const struct tunable_info *tunable_find(const char *name);
const char *units_type_name(int type); /* "size", "bool", "int", "ms" */

enum units_error { UNITS_OK = 0, UNITS_E_SYNTAX = 1, UNITS_E_RANGE = 2 };

/* Parse text as a value of type with la_parse (liballoc_parse.h: the one grammar of the
 * library, the daemon and the CLI). Returns UNITS_OK, or UNITS_E_SYNTAX / UNITS_E_RANGE
 * (a number too large) with a one-line message in err. */
int units_parse(int type, const char *text, int64_t *out, char *err, size_t errlen);
/* Parse a value for the named tunable, checking its range: the message names the tunable,
 * the value and the valid range ("mmap_threshold = 64G is out of range [0, 32M]"). */
int units_parse_tunable(const struct tunable_info *t, const char *text, int64_t *out, char *err,
                        size_t errlen);
/* Format v the way a human writes it for type: "64K", "1.5G", "true", "10s". */
void units_format(int type, int64_t v, char *buf, size_t len);
/* The Prometheus family of a tunable, in its base unit: "liballoc_tunable_" + the name,
 * sizes ending in _bytes, durations in _seconds (decay_ms: liballoc_tunable_decay_seconds),
 * booleans and counts bare. */
void units_metric_name(const struct tunable_info *t, char *buf, size_t len);
/* v in that unit ("10", "0.25" seconds). */
void units_metric_value(const struct tunable_info *t, int64_t v, char *buf, size_t len);

#endif
