/* tunables.h — the single table of tunables (LA_TUNABLES in liballoc_shm.h) and their
 * current values. Values are read lock-free (relaxed) on allocation paths and written
 * only through tun_set (and the dynamic threshold's tun_raise_threshold), which validates:
 * an out-of-range value is refused with a reason, never clamped. Writers hold one lock,
 * and every change is republished into the segment under it. */
#ifndef LA_TUNABLES_H
#define LA_TUNABLES_H

#include "common.h"

struct tun_def {
	const char *name;
	int type; /* LA_T_* */
	int64_t def, min, max;
	int live;
	int mallopt;
	const char *help;
};

extern LA_HIDDEN const struct tun_def tun_defs[LA_NTUNABLES];
extern LA_HIDDEN int64_t tun_values[LA_NTUNABLES];
extern LA_HIDDEN uint32_t tun_source[LA_NTUNABLES]; /* la_source of each value */

#define TUN(name)  __atomic_load_n(&tun_values[LA_TUNABLE_##name], __ATOMIC_RELAXED)
#define TUN_ID(id) __atomic_load_n(&tun_values[id], __ATOMIC_RELAXED)

/* Look a tunable up by name; -1 if unknown. */
int tun_find(const char *name);
/* Validate and set. Returns LA_ST_OK or a status with a human reason in reason[len].
 * source (la_source) says who set it (LA_SRC_policy: allocctld's profile or policy);
 * setting a threshold turns off the dynamic mmap threshold, like glibc. */
int tun_set(int id, int64_t value, uint32_t source, char *reason, size_t len);
/* tun_set, and when hold_ns is not 0, held: the value before and its source are restored
 * hold_ns from now by tun_holds_expire (la_shm_hold). A setting without a hold ends the
 * tunable's hold. */
int tun_set_held(int id, int64_t value, uint32_t source, uint64_t hold_ns, char *reason,
                 size_t len);
/* The holds: the earliest expiry (CLOCK_MONOTONIC, 0: none), and the reverting of those
 * due by now (returns the next expiry). The control thread calls them. */
uint64_t tun_holds_next(void);
uint64_t tun_holds_expire(uint64_t now);
struct tun_hold {
	uint64_t expires_ns;
	int64_t revert_value;
	uint32_t revert_source;
};
extern LA_HIDDEN struct tun_hold tun_holds[LA_NTUNABLES];
/* Parse a value for tunable id from text (human units for sizes, true/false for bools). */
int tun_parse(int id, const char *text, int64_t *out, char *reason, size_t len);
/* Read LIBALLOC_<NAME> from the environment (no allocation; before main is fine).
 * An invalid value prints one line to stderr and is ignored; so does a LIBALLOC_
 * variable liballoc does not know (the line names the closest known one). */
void tun_init_from_env(void);
/* LIBALLOC_CONTROL: off (0/false/no/off) or not; a value that is not a boolean leaves the
 * thread on (tun_init_from_env said so). */
bool tun_control_enabled(void);
/* The dynamic threshold (glibc's rule): a freed direct mapping of size bytes, at or above
 * mmap_threshold and below mmap_threshold_max, raises mmap_threshold past it and
 * trim_threshold to twice that (source: dynamic). Checked and written in one step
 * with every other writer excluded; false when nothing was raised (also when another
 * writer holds the table: the caller does not wait). */
bool tun_raise_threshold(int64_t size, int64_t max);
/* The dynamic threshold back down to max when it is above it (not when another thread
 * holds the tunables' lock: the caller tries again later). */
void tun_cap_threshold(int64_t max);
/* Republish the whole table into the segment (start, the refresh command). */
void tun_publish(void);
void tun_fork_prepare(void);
void tun_fork_parent(void);
void tun_fork_child(void);
/* Copy the LIBALLOC_ and MEMORY_PRESSURE_ variables unless a copy was taken: the
 * constructor's reads before la_init (under the init lock) use it, and la_init then takes
 * it as its own (a later tun_init_from_env copies again). */
void tun_env_snapshot(void);
/* Value of environment variable name, or NULL, without allocating. LIBALLOC_* and
 * MEMORY_PRESSURE_* come from that copy once it is taken (safe on any thread while the
 * program rewrites its environment); other names from environ as it is now. */
const char *tun_getenv(const char *name);

#endif
