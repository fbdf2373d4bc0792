/* fuzz_segment.c — libFuzzer target for the segment reader (ctld/segment.c): the input is
 * written as a segment file of exactly its own size (named after the pid its header
 * claims, mode 0600, owned by us, so the name/owner/mode checks pass and the content
 * checks are what is exercised), then opened, validated and read the way allocctld and
 * allocctl do: header re-check, every counter block, totals, tunables, classes, liveness,
 * and the mailbox (map, lock, submit, poll, cancel, unlock). Byte 0 of the input selects
 * an extra size change applied after the open (shrink or grow the file under the reader),
 * the rest is the file.
 * Invariants checked besides the sanitizers: an accepted header lies within the file; a
 * reader never reports more tunables or classes than it was given room for. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "segment.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[PATH_MAX];

/* The reader's seqlock backoff pauses a microsecond between attempts, for a live writer to
 * finish. Here no one writes: a seqlock that never settles only costs wall-clock time, and
 * on a loaded machine each pause became a lost time slice (hundreds of inputs per second
 * instead of thousands). Pauses under a millisecond return at once (every retry still
 * runs); longer ones (libFuzzer's own threads) really sleep. */
int nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (req && req->tv_sec == 0 && req->tv_nsec < 1000000)
		return 0;
	return (int)syscall(SYS_nanosleep, req, rem);
}

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (dir[0] && system(cmd) != 0)
		fprintf(stderr, "fuzz_segment: cannot remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* tmpfs; run.sh passes a directory of its own (FUZZ_TMP) and removes it afterwards */
	const char *base = getenv("FUZZ_TMP") ? getenv("FUZZ_TMP") : "/dev/shm";
	if (snprintf(dir, sizeof(dir), "%s/fuzz_segment.XXXXXX", base) >= (int)sizeof(dir))
		abort();
	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	seg_install_sigbus_guard();
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	return 0;
}

static void exercise_mailbox(struct seg *s)
{
	if (seg_map_mailbox(s) != SEG_E_OK)
		return;
	uint32_t token = (uint32_t)getpid();
	if (seg_mb_lock(s, token, 1000000) != SEG_E_OK)
		return;
	struct seg_cmd c;
	memset(&c, 0, sizeof(c));
	c.command = LA_CMD_get;
	snprintf(c.name, sizeof(c.name), "mmap_threshold");
	struct seg_result r;
	if (seg_mb_submit(s, &c, 7) == SEG_E_OK) {
		int st = seg_mb_poll(s, 7, &r);
		if (st == SEG_E_OK && strnlen(r.reason, sizeof(r.reason)) == sizeof(r.reason))
			abort(); /* a result's reason must come back NUL-terminated */
		seg_mb_cancel(s);
	}
	seg_mb_unlock(s, token);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	data++;
	size--;

	int32_t pid = 1;
	if (size >= offsetof(struct la_shm_header, pid) + sizeof(int32_t))
		memcpy(&pid, data + offsetof(struct la_shm_header, pid), sizeof(pid));
	char path[160];
	snprintf(path, sizeof(path), "%s/" LA_SHM_PREFIX "%d" LA_SHM_SUFFIX, dir, (int)pid);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
	if (fd < 0)
		abort();
	if (size && write(fd, data, size) != (ssize_t)size)
		abort();

	if (size >= sizeof(struct la_shm_header)) {
		struct la_shm_header h;
		memcpy(&h, data, sizeof(h));
		char why[192];
		if (seg_validate_header(&h, size, why, sizeof(why)) == SEG_E_OK &&
		    (h.total_size != size || h.off_mailbox > size))
			abort();
	}

	struct seg s;
	if (seg_open(&s, path, SEG_ANY_UID) == SEG_E_OK) {
		if (s.hdr.total_size != size)
			abort();
		/* the file changes under the reader: shrink or grow it */
		switch (mode & 3) {
		case 1:
			if (ftruncate(fd, (off_t)(size / 2)) != 0)
				abort();
			break;
		case 2:
			if (ftruncate(fd, (off_t)size + 4096) != 0)
				abort();
			break;
		default:
			break;
		}
		seg_refresh(&s);
		struct seg_block b;
		seg_read_block(&s, -1, &b);
		uint32_t arenas = s.hdr.arena_count < 8 ? s.hdr.arena_count : 8;
		for (uint32_t a = 0; a < arenas; a++)
			seg_read_block(&s, (int)a, &b);
		seg_read_block(&s, (int)s.hdr.arena_count, &b); /* one past the end: refused */
		struct la_counters tot;
		seg_read_totals(&s, &tot);
		struct la_shm_tunable tun[LA_NTUNABLES];
		uint32_t n = 0;
		if (seg_read_tunables(&s, tun, &n) == SEG_E_OK && n > LA_NTUNABLES)
			abort();
		struct la_shm_class cls[64];
		n = 0;
		if (seg_read_classes(&s, cls, 64, &n) == SEG_E_OK && n > 64)
			abort();
		seg_liveness(&s, (mode & 4) != 0);
		if (mode & 8)
			exercise_mailbox(&s);
		seg_close(&s);
	}
	close(fd);
	unlink(path);
	return 0;
}
