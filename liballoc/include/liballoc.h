/* liballoc.h — liballoc's public C API beyond the malloc family, for programs that link
 * or preload liballoc and want to tune or drain it from inside (resolve these with
 * dlsym(RTLD_DEFAULT, ...) when liballoc is only preloaded). Tunable names, types and
 * ranges are the LA_TUNABLES list of liballoc_shm.h. All functions are thread-safe. */
#ifndef LIBALLOC_H
#define LIBALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "liballoc_shm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a tunable's effective value. 0, or -1 for an unknown name. */
int liballoc_get(const char *name, int64_t *value);
/* Set a tunable (validated; never clamped). 0, or -1 with a reason naming the valid
 * range written to reason[len] (when reason is not NULL). */
int liballoc_set(const char *name, int64_t value, char *reason, size_t len);
/* Return free memory to the system, bypassing the throttle, keeping pad bytes per
 * process. Returns the bytes that were resident and are now released. */
size_t liballoc_trim(size_t pad);
/* Unmap every heap that holds no live block. Returns resident bytes released. */
size_t liballoc_release_idle_heaps(void);
/* Return every thread cache to its arena, idle threads included. */
void liballoc_flush_caches(void);
/* Process totals of the counters (all arenas plus direct mappings). */
int liballoc_stats(struct la_counters *out);
/* Path of this process's statistics segment, or "" when it is not published (yet: it is
 * named LIBALLOC_PUBLISH_DELAY, 50 ms, after the start or the fork). */
const char *liballoc_segment_path(void);

#ifdef __cplusplus
}
#endif

#endif
