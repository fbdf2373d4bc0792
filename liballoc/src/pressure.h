/* pressure.h — the in-process memory pressure watch (see pressure.c): configured from the
 * environment at start, run by a thread of its own that gives memory back itself when the
 * kernel (or systemd's protocol) signals pressure. */
#ifndef LA_PRESSURE_H
#define LA_PRESSURE_H

#include "common.h"

#include <sys/types.h>

/* Read $MEMORY_PRESSURE_WATCH/WRITE and LIBALLOC_PRESSURE, open what is to be watched:
 * true when there is something (then pressure_start runs the thread). */
bool pressure_configure(void);
/* In a forked child, before configuring again: the parent's watch is not ours. */
void pressure_fork_child(void);
/* Start the watching thread (with the control thread; again in a forked child). */
void pressure_start(void);
/* The control thread ends (the program's last thread has gone): end the watch's too. */
void pressure_stop(void);
/* What the process should still give back for enough to be back (v1 cgroup watch: usage
 * under 75% of the limit; 0: it is), in *need; false when nothing says (PSI, systemd's
 * protocol, no limit). */
bool pressure_need(uint64_t *need);
/* Room the process's memory cgroup has below ROOM_SHARE % of its limit (v1
 * memory.limit_in_bytes against memory.usage_in_bytes; v2 the lower of memory.high and
 * memory.max against memory.current), in *room (0: none); false when it has no limit.
 * Read anew at each call (burst preparation asks before it populates). */
#define PRESSURE_ROOM_SHARE 75
bool pressure_room(uint64_t *room);
/* The watching thread's tid (0: none): it does not keep the process alive. */
pid_t pressure_tid(void);
/* What is watched, for messages (NULL: nothing). */
const char *pressure_watching(void);

#endif
