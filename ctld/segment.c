/* segment.c — validating reader of liballoc segments and client side of their mailbox.
 * Statistics are copied with pread() (never through a mapping) so a truncated or rewritten
 * file yields an error, not a SIGBUS; every block is read between two equal, even seqlock
 * values. The mailbox page is the only mapping; a fault on it is absorbed by the guard. */
#include "segment.h"

#include "procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *const seg_error_text[] = {
#define SEG_X_TEXT(name, text) text,
        SEG_ERRORS(SEG_X_TEXT)
#undef SEG_X_TEXT
};

const char *seg_control_name(uint32_t state)
{
	switch (state) {
	case LA_CONTROL_OFF:
		return "off";
	case LA_CONTROL_RUNNING:
		return "running";
	case LA_CONTROL_FAILED:
		return "failed";
	}
	return "unknown";
}

const char *seg_strerror(int err)
{
	if (err < 0 || err >= SEG_E_MAX)
		return "unknown error";
	return seg_error_text[err];
}

const char *seg_command_name(uint32_t id)
{
	switch (id) {
#define SEG_X_CMDNAME(name, id, help) \
	case id:                      \
		return #name;
		LA_COMMANDS(SEG_X_CMDNAME)
#undef SEG_X_CMDNAME
	}
	return NULL;
}

const char *seg_status_text(int32_t status)
{
	switch (status) {
#define SEG_X_STTEXT(name, v, text) \
	case v:                     \
		return text;
		LA_STATUSES(SEG_X_STTEXT)
#undef SEG_X_STTEXT
	}
	return "unknown status";
}

uint64_t seg_now_ns(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fail(char *why, size_t len, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t len, int err, const char *fmt, ...)
{
	if (why && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* off + len <= total without overflow. */
static bool range_ok(uint64_t off, uint64_t len, uint64_t total)
{
	uint64_t end;
	return !__builtin_add_overflow(off, len, &end) && end <= total;
}

static uint64_t block_bytes(uint32_t counter_count)
{
	return 16 + 8ull * counter_count; /* seq, index, threads, counters */
}

int seg_validate_header(const struct la_shm_header *h, uint64_t file_size, char *why, size_t whylen)
{
	if (h->magic != LA_SHM_MAGIC)
		return fail(why, whylen, SEG_E_MAGIC, "magic %#llx, expected %#llx",
		            (unsigned long long)h->magic, (unsigned long long)LA_SHM_MAGIC);
	if (h->abi_version < LA_SHM_ABI_VERSION_MIN || h->abi_version > LA_SHM_ABI_VERSION)
		return fail(why, whylen, SEG_E_VERSION, "ABI version %u, this reader knows %u..%u",
		            h->abi_version, LA_SHM_ABI_VERSION_MIN, LA_SHM_ABI_VERSION);
	if (h->header_size < sizeof(*h) || h->header_size > LA_SHM_PAGE)
		return fail(why, whylen, SEG_E_HEADER, "header_size %u, expected %zu..%u",
		            h->header_size, sizeof(*h), LA_SHM_PAGE);
	if (h->total_size != file_size)
		return fail(why, whylen, SEG_E_SIZE,
		            "header total_size %llu but file has %llu bytes",
		            (unsigned long long)h->total_size, (unsigned long long)file_size);
	if (h->total_size > SEG_MAX_SIZE || h->total_size < 2ull * LA_SHM_PAGE)
		return fail(why, whylen, SEG_E_SIZE, "total_size %llu outside %u..%u",
		            (unsigned long long)h->total_size, 2 * LA_SHM_PAGE, SEG_MAX_SIZE);
	if (h->pid <= 0)
		return fail(why, whylen, SEG_E_COUNTS, "pid %d", h->pid);
	if (h->counter_count == 0 || h->counter_count > SEG_MAX_COUNTERS ||
	    h->tunable_count > SEG_MAX_TUNABLES || h->class_count > SEG_MAX_CLASSES ||
	    h->arena_slots == 0 || h->arena_slots > SEG_MAX_ARENAS ||
	    h->arena_count > h->arena_slots)
		return fail(why, whylen, SEG_E_COUNTS,
		            "counters %u tunables %u classes %u arenas %u/%u", h->counter_count,
		            h->tunable_count, h->class_count, h->arena_count, h->arena_slots);
	uint64_t total = h->total_size, blk = block_bytes(h->counter_count);
	if (h->off_process < h->header_size || h->off_process % 8 ||
	    !range_ok(h->off_process, blk, total))
		return fail(why, whylen, SEG_E_LAYOUT, "process block at %llu (+%llu)",
		            (unsigned long long)h->off_process, (unsigned long long)blk);
	if (h->arena_stride < blk || h->arena_stride > LA_SHM_ARENA_STRIDE_MAX ||
	    h->arena_stride % 8 || h->off_arenas < h->header_size || h->off_arenas % 8 ||
	    !range_ok(h->off_arenas, h->arena_stride * h->arena_slots, total))
		return fail(why, whylen, SEG_E_LAYOUT, "arenas at %llu stride %llu x %u",
		            (unsigned long long)h->off_arenas, (unsigned long long)h->arena_stride,
		            h->arena_slots);
	if (h->off_tunables < h->header_size || h->off_tunables % 8 ||
	    !range_ok(h->off_tunables, sizeof(struct la_shm_tunable) * h->tunable_count, total))
		return fail(why, whylen, SEG_E_LAYOUT, "tunables at %llu x %u",
		            (unsigned long long)h->off_tunables, h->tunable_count);
	if (h->class_count &&
	    (h->class_stride < 8 || h->class_stride > LA_SHM_CLASS_STRIDE_MAX ||
	     h->class_stride % 8 || h->off_classes < h->header_size || h->off_classes % 8 ||
	     !range_ok(h->off_classes, h->class_stride * h->class_count, total)))
		return fail(why, whylen, SEG_E_LAYOUT, "classes at %llu stride %llu x %u",
		            (unsigned long long)h->off_classes, (unsigned long long)h->class_stride,
		            h->class_count);
	/* (5) every arena's class statistics: class_stats_size bytes per class */
	uint64_t per = h->class_stats_size * h->class_count;
	if (h->off_arena_classes && h->class_count &&
	    (h->class_stats_size < 8 || h->class_stats_size > 8 * LA_SHM_CLASS_STATS_MAX ||
	     h->class_stats_size % 8 || h->arena_class_stride < per ||
	     h->arena_class_stride > LA_SHM_ARENA_STRIDE_MAX || h->arena_class_stride % 8 ||
	     h->off_arena_classes < h->header_size || h->off_arena_classes % 8 ||
	     !range_ok(h->off_arena_classes, h->arena_class_stride * (h->arena_slots - 1) + per,
	               total)))
		return fail(why, whylen, SEG_E_LAYOUT, "arena classes at %llu stride %llu x %u",
		            (unsigned long long)h->off_arena_classes,
		            (unsigned long long)h->arena_class_stride, h->arena_slots);
	if (h->off_mailbox < LA_SHM_PAGE || h->off_mailbox % LA_SHM_PAGE ||
	    !range_ok(h->off_mailbox, LA_SHM_PAGE, total))
		return fail(why, whylen, SEG_E_LAYOUT, "mailbox at %llu",
		            (unsigned long long)h->off_mailbox);
	/* holds (0: a writer without them): in the mailbox's page, after the mailbox */
	if (h->off_holds &&
	    (h->off_holds % 8 || h->off_holds < h->off_mailbox + sizeof(struct la_mailbox) ||
	     !range_ok(h->off_holds, sizeof(struct la_shm_hold) * h->tunable_count,
	               h->off_mailbox + LA_SHM_PAGE) ||
	     !range_ok(h->off_holds, sizeof(struct la_shm_hold) * h->tunable_count, total)))
		return fail(why, whylen, SEG_E_LAYOUT, "holds at %llu",
		            (unsigned long long)h->off_holds);
	return SEG_E_OK;
}

/* The file name must be LA_SHM_PREFIX <pid> LA_SHM_SUFFIX with the header's pid, with
 * LA_SHM_NS_TAG <inode> before the suffix when the header's pid namespace is not the
 * initial one. */
static bool name_matches(const char *path, int32_t pid, uint64_t pidns)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	char want[80];
	if (pidns && pidns != LA_SHM_INIT_PIDNS)
		snprintf(want, sizeof(want), LA_SHM_PREFIX "%d" LA_SHM_NS_TAG "%llu" LA_SHM_SUFFIX,
		         pid, (unsigned long long)pidns);
	else
		snprintf(want, sizeof(want), LA_SHM_PREFIX "%d" LA_SHM_SUFFIX, pid);
	return strcmp(base, want) == 0;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int seg_open(struct seg *s, const char *path, uid_t expected_uid)
{
	return seg_openat(s, AT_FDCWD, path, expected_uid);
}

int seg_openat(struct seg *s, int dfd, const char *path, uid_t expected_uid)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	int fd = openat(dfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return fail(s->why, sizeof(s->why), SEG_E_SYMLINK, "%s", path);
		return fail(s->why, sizeof(s->why), SEG_E_OPEN, "%s: %s", path, strerror(e));
	}
	struct stat st;
	int err;
	if (fstat(fd, &st) < 0) {
		err = fail(s->why, sizeof(s->why), SEG_E_OPEN, "fstat: %s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = fail(s->why, sizeof(s->why), SEG_E_NOTREG, "file type %#o",
		           st.st_mode & S_IFMT);
		goto out;
	}
	if (expected_uid != SEG_ANY_UID && st.st_uid != expected_uid) {
		err = fail(s->why, sizeof(s->why), SEG_E_OWNER, "owned by uid %u, expected %u",
		           st.st_uid, expected_uid);
		goto out;
	}
	if ((st.st_mode & 07777) != 0600) {
		err = fail(s->why, sizeof(s->why), SEG_E_MODE, "mode %04o", st.st_mode & 07777);
		goto out;
	}
	if (st.st_size < (off_t)sizeof(struct la_shm_header) || st.st_size > SEG_MAX_SIZE) {
		err = fail(s->why, sizeof(s->why), SEG_E_SIZE, "file size %lld",
		           (long long)st.st_size);
		goto out;
	}
	if (pread_full(fd, &s->hdr, sizeof(s->hdr), 0) < 0) {
		err = fail(s->why, sizeof(s->why), SEG_E_IO, "reading the header");
		goto out;
	}
	err = seg_validate_header(&s->hdr, (uint64_t)st.st_size, s->why, sizeof(s->why));
	if (err)
		goto out;
	/* a process in another user namespace wrote its uid there: seg_liveness checks it
	 * through that process's uid_map */
	s->foreign_userns = s->hdr.userns_ino && procfs_self_userns() &&
	                    s->hdr.userns_ino != procfs_self_userns();
	if (!s->foreign_userns && s->hdr.uid != st.st_uid) {
		err = fail(s->why, sizeof(s->why), SEG_E_OWNER, "header uid %u, file owner %u",
		           s->hdr.uid, st.st_uid);
		goto out;
	}
	if (!name_matches(path, s->hdr.pid, s->hdr.pidns_ino)) {
		err = fail(s->why, sizeof(s->why), SEG_E_NAME, "header pid %d, pid namespace %llu",
		           s->hdr.pid, (unsigned long long)s->hdr.pidns_ino);
		goto out;
	}
	s->nspid = s->hdr.pid;
	/* the reader's own namespace needs no mapping (0: as the writer could not tell) */
	s->pidns = s->hdr.pidns_ino == procfs_self_pidns() ? 0 : s->hdr.pidns_ino;
	/* exe is shown and used in labels: keep it terminated and printable ASCII. */
	s->hdr.exe[LA_EXE_MAX - 1] = 0;
	for (char *c = s->hdr.exe; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	/* so is the version (a label value: no quote or backslash either) */
	s->hdr.version[sizeof(s->hdr.version) - 1] = 0;
	for (char *c = s->hdr.version; *c; c++)
		if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\')
			*c = '?';
	s->fd = fd;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->uid = st.st_uid;
	return SEG_E_OK;
out:
	close(fd);
	return err;
}

void seg_close(struct seg *s)
{
	if (s->mb) /* the shared page, or the anonymous one that replaced it */
		munmap(s->mb, LA_SHM_PAGE);
	s->mb = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

int seg_refresh(struct seg *s)
{
	if (s->fd < 0)
		return SEG_E_OPEN;
	struct stat st;
	if (fstat(s->fd, &st) < 0)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "fstat: %s", strerror(errno));
	if ((uint64_t)st.st_size != s->hdr.total_size || (st.st_mode & 07777) != 0600 ||
	    st.st_uid != s->uid)
		return fail(s->why, sizeof(s->why), SEG_E_SIZE,
		            "file now %lld bytes mode %04o uid %u", (long long)st.st_size,
		            st.st_mode & 07777, st.st_uid);
	struct la_shm_header h;
	if (pread_full(s->fd, &h, sizeof(h), 0) < 0)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "reading the header");
	const struct la_shm_header *o = &s->hdr;
	if (h.magic != o->magic || h.abi_version != o->abi_version ||
	    h.header_size != o->header_size || h.total_size != o->total_size ||
	    h.generation != o->generation || h.pid != s->nspid || h.uid != o->uid ||
	    h.pidns_ino != o->pidns_ino || h.userns_ino != o->userns_ino ||
	    h.counter_count != o->counter_count || h.tunable_count != o->tunable_count ||
	    h.class_count != o->class_count || h.arena_slots != o->arena_slots ||
	    h.off_process != o->off_process || h.off_arenas != o->off_arenas ||
	    h.arena_stride != o->arena_stride || h.off_tunables != o->off_tunables ||
	    h.off_classes != o->off_classes || h.class_stride != o->class_stride ||
	    h.off_arena_classes != o->off_arena_classes ||
	    h.arena_class_stride != o->arena_class_stride ||
	    h.class_stats_size != o->class_stats_size || h.off_mailbox != o->off_mailbox ||
	    h.off_holds != o->off_holds || h.start_time != o->start_time)
		return fail(s->why, sizeof(s->why), SEG_E_CHANGED,
		            "layout changed (generation %llu -> %llu)",
		            (unsigned long long)o->generation, (unsigned long long)h.generation);
	if (h.arena_count > o->arena_slots)
		return fail(s->why, sizeof(s->why), SEG_E_COUNTS, "arena_count %u > slots %u",
		            h.arena_count, o->arena_slots);
	s->hdr.arena_count = h.arena_count;
	s->hdr.control_state = h.control_state;
	s->hdr.allocator_threads = h.allocator_threads;
	s->hdr.foreign_allocators = h.foreign_allocators;
	s->hdr.heartbeat_ns = h.heartbeat_ns;
	/* the process's own pressure watch (it starts after the segment, counts as it acts) */
	s->hdr.pressure_watching = h.pressure_watching;
	s->hdr.pressure_events = h.pressure_events;
	s->hdr.pressure_released_bytes = h.pressure_released_bytes;
	s->hdr.pressure_response_ns = h.pressure_response_ns;
	return SEG_E_OK;
}

/* Between seqlock attempts: let a writer on another CPU finish (no sleeping: the loop must
 * not stall on a process that keeps its lock odd; the caller backs off from it instead). */
static void seq_backoff(int attempt)
{
	if (attempt >= 4)
		sched_yield();
}

/* Copy len bytes at off under the seqlock whose word is at seq_off: read seq, data, seq
 * again (three preads, so the kernel's copy order cannot matter); accept equal even values. */
static int seq_read(struct seg *s, uint64_t seq_off, void *buf, size_t len, uint64_t off)
{
	for (int attempt = 0; attempt < SEG_READ_RETRIES; attempt++) {
		uint64_t a, b;
		if (pread_full(s->fd, &a, 8, seq_off) < 0)
			return fail(s->why, sizeof(s->why), SEG_E_IO, "seq at %llu",
			            (unsigned long long)seq_off);
		if (a & 1) {
			seq_backoff(attempt);
			continue;
		}
		if (pread_full(s->fd, buf, len, off) < 0)
			return fail(s->why, sizeof(s->why), SEG_E_IO, "block at %llu",
			            (unsigned long long)off);
		if (pread_full(s->fd, &b, 8, seq_off) < 0)
			return fail(s->why, sizeof(s->why), SEG_E_IO, "seq at %llu",
			            (unsigned long long)seq_off);
		if (a == b)
			return SEG_E_OK;
		seq_backoff(attempt);
	}
	return fail(s->why, sizeof(s->why), SEG_E_TORN, "seqlock at %llu never settled",
	            (unsigned long long)seq_off);
}

int seg_read_block(struct seg *s, int arena, struct seg_block *out)
{
	uint64_t off;
	if (arena < 0)
		off = s->hdr.off_process;
	else if ((uint32_t)arena < s->hdr.arena_count)
		off = s->hdr.off_arenas + s->hdr.arena_stride * (uint64_t)arena;
	else
		return fail(s->why, sizeof(s->why), SEG_E_COUNTS, "arena %d of %u", arena,
		            s->hdr.arena_count);
	uint32_t n = s->hdr.counter_count < LA_NCOUNTERS ? s->hdr.counter_count : LA_NCOUNTERS;
	uint64_t raw[2 + LA_NCOUNTERS]; /* index+threads word, then counters (after the seq) */
	memset(raw, 0, sizeof(raw));
	int err = seq_read(s, off, raw, 8 + 8ull * n, off + 8);
	if (err)
		return err;
	memset(out, 0, sizeof(*out));
	memcpy(&out->index, (uint8_t *)raw, 4);
	memcpy(&out->threads, (uint8_t *)raw + 4, 4);
	memcpy(&out->c, &raw[1], 8ull * n);
	return SEG_E_OK;
}

/* Decode one raw block (seq word first) into out. */
static void decode_block(const uint8_t *raw, uint32_t n, struct seg_block *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(&out->index, raw + 8, 4);
	memcpy(&out->threads, raw + 12, 4);
	memcpy(&out->c, raw + 16, 8ull * n);
}

int seg_read_blocks(struct seg *s, uint32_t first, uint32_t count, struct seg_block *proc,
                    struct seg_block *arenas)
{
	const struct la_shm_header *h = &s->hdr;
	if (first > h->arena_count || count > h->arena_count - first)
		return fail(s->why, sizeof(s->why), SEG_E_COUNTS, "arenas %u+%u of %u", first,
		            count, h->arena_count);
	uint32_t n = h->counter_count < LA_NCOUNTERS ? h->counter_count : LA_NCOUNTERS;
	uint64_t blk = block_bytes(h->counter_count);
	/* one span covering the process block and the arena blocks asked for */
	uint64_t lo = UINT64_MAX, hi = 0;
	if (proc) {
		lo = h->off_process;
		hi = h->off_process + blk;
	}
	if (count) {
		uint64_t a0 = h->off_arenas + h->arena_stride * first;
		uint64_t a1 = h->off_arenas + h->arena_stride * (first + count - 1) + blk;
		lo = a0 < lo ? a0 : lo;
		hi = a1 > hi ? a1 : hi;
	}
	if (hi <= lo)
		return SEG_E_OK;
	size_t span = (size_t)(hi - lo);
	uint8_t *buf = span <= 3 * (size_t)SEG_MAX_SIZE ? malloc(3 * span) : NULL;
	if (!buf)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "out of memory");
	/* the seqlock's three reads, for every block at once: seqs, data, seqs again */
	int err = SEG_E_TORN;
	for (int attempt = 0; attempt < SEG_READ_RETRIES && err == SEG_E_TORN; attempt++) {
		if (pread_full(s->fd, buf, span, lo) < 0 ||
		    pread_full(s->fd, buf + span, span, lo) < 0 ||
		    pread_full(s->fd, buf + 2 * span, span, lo) < 0) {
			err = fail(s->why, sizeof(s->why), SEG_E_IO, "blocks at %llu",
			           (unsigned long long)lo);
			break;
		}
		err = SEG_E_OK;
		for (int64_t i = proc ? -1 : 0; i < (int64_t)count && !err; i++) {
			uint64_t off =
			        i < 0 ? h->off_process
			              : h->off_arenas + h->arena_stride * (first + (uint64_t)i);
			uint64_t a, b;
			memcpy(&a, buf + (off - lo), 8);
			memcpy(&b, buf + 2 * span + (off - lo), 8);
			if (a != b || (a & 1))
				err = SEG_E_TORN;
			else
				decode_block(buf + span + (off - lo), n, i < 0 ? proc : &arenas[i]);
		}
		if (err)
			seq_backoff(attempt);
	}
	free(buf);
	if (err == SEG_E_TORN)
		fail(s->why, sizeof(s->why), SEG_E_TORN, "a counter block's seqlock never settled");
	return err;
}

int seg_read_totals(struct seg *s, struct la_counters *total)
{
	struct seg_block p, *a = calloc(s->hdr.arena_count + 1, sizeof(*a));
	if (!a)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "out of memory");
	uint32_t n = s->hdr.arena_count;
	int err = seg_read_blocks(s, 0, n, &p, a);
	if (!err) {
		*total = p.c;
		for (uint32_t i = 0; i < n; i++)
			la_counters_add(total, &a[i].c);
	}
	free(a);
	return err;
}

int seg_read_tunables(struct seg *s, struct la_shm_tunable out[LA_NTUNABLES], uint32_t *n)
{
	uint32_t k = s->hdr.tunable_count < LA_NTUNABLES ? s->hdr.tunable_count : LA_NTUNABLES;
	*n = 0;
	/* the array's seqlock word lives in the header (tunables_seq) */
	int err = seq_read(s, offsetof(struct la_shm_header, tunables_seq), out, sizeof(out[0]) * k,
	                   s->hdr.off_tunables);
	if (!err)
		*n = k;
	return err;
}

int seg_read_holds(struct seg *s, struct la_shm_hold out[LA_NTUNABLES], uint32_t *n)
{
	uint32_t k = s->hdr.tunable_count < LA_NTUNABLES ? s->hdr.tunable_count : LA_NTUNABLES;
	*n = 0;
	memset(out, 0, sizeof(out[0]) * LA_NTUNABLES);
	if (!s->hdr.off_holds)
		return SEG_E_OK; /* a writer without holds: nothing is held */
	int err = seq_read(s, offsetof(struct la_shm_header, tunables_seq), out, sizeof(out[0]) * k,
	                   s->hdr.off_holds);
	if (!err)
		*n = k;
	return err;
}

/* Add every arena's statistics of the first k classes into out (a segment of 5: the class
 * entries hold their sizes, the arenas their statistics). */
static int add_arena_classes(struct seg *s, struct la_shm_class *out, uint32_t k)
{
	const struct la_shm_header *h = &s->hdr;
	uint32_t arenas = h->arena_count;
	if (!h->off_arena_classes || !arenas)
		return SEG_E_OK;
	size_t entry = h->class_stats_size, per = entry * k;
	size_t copy = entry < sizeof(out[0].s) ? entry : sizeof(out[0].s);
	size_t bytes = h->arena_class_stride * (arenas - 1) + per;
	uint8_t *buf = malloc(bytes);
	if (!buf)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "out of memory");
	int err = SEG_E_OK;
	if (pread_full(s->fd, buf, bytes, h->off_arena_classes) < 0) {
		err = fail(s->why, sizeof(s->why), SEG_E_IO, "arena classes at %llu",
		           (unsigned long long)h->off_arena_classes);
	} else {
		for (uint32_t a = 0; a < arenas; a++)
			for (uint32_t i = 0; i < k; i++) {
				struct la_class_stats one = {0};
				memcpy(&one, buf + h->arena_class_stride * a + entry * i, copy);
				la_class_stats_add(&out[i].s, &one);
			}
	}
	free(buf);
	return err;
}

int seg_read_classes(struct seg *s, struct la_shm_class *out, uint32_t max, uint32_t *n)
{
	uint32_t k = s->hdr.class_count < max ? s->hdr.class_count : max;
	*n = 0;
	if (k == 0)
		return SEG_E_OK;
	/* no seqlock: every field is written whole on its own; a writer with a shorter entry
	 * (class_stride) leaves our extra fields zero. A class's figures are its entry's
	 * fields plus every arena's (5; a gauge's parts read at slightly different moments) */
	size_t stride = s->hdr.class_stride, bytes = stride * k;
	size_t copy = stride < sizeof(out[0]) ? stride : sizeof(out[0]);
	uint8_t *buf = malloc(bytes);
	if (!buf)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "out of memory");
	int err = SEG_E_OK;
	if (pread_full(s->fd, buf, bytes, s->hdr.off_classes) < 0) {
		err = fail(s->why, sizeof(s->why), SEG_E_IO, "classes at %llu",
		           (unsigned long long)s->hdr.off_classes);
	} else {
		for (uint32_t i = 0; i < k; i++) {
			memset(&out[i], 0, sizeof(out[i]));
			memcpy(&out[i], buf + stride * i, copy);
		}
		err = add_arena_classes(s, out, k);
		if (!err)
			*n = k;
	}
	free(buf);
	return err;
}

int seg_proc_identity(pid_t pid, uint64_t *start_time, uid_t *uid)
{
	struct procfs_info pi;
	if (procfs_read(pid, uid ? PROCFS_STATUS : 0, 0, &pi) < 0)
		return -1;
	*start_time = pi.start_time;
	if (uid)
		memcpy(uid, pi.uid, sizeof(pi.uid));
	return 0;
}

int seg_lock_held(struct seg *s)
{
	if (s->fd < 0)
		return SEG_E_OPEN;
	/* The owner holds LOCK_SH for its whole life: if we can take LOCK_EX it is gone. */
	if (flock(s->fd, LOCK_EX | LOCK_NB) == 0) {
		flock(s->fd, LOCK_UN);
		/* the pid that wrote it, here: known once mapped, else its own pid in our
		 * namespace, else looked up (pid namespace, NSpid and start time agree) */
		pid_t pid = s->mapped ? s->hdr.pid : s->pidns ? 0 : s->nspid;
		pid_t here;
		if (!pid && procfs_find_nspid(s->pidns, s->nspid, s->hdr.start_time, &here) ==
		                    PROCFS_NS_FOUND)
			pid = here;
		struct procfs_info pi;
		if (pid > 0 && procfs_read(pid, 0, s->hdr.start_time, &pi) == 0)
			return fail(s->why, sizeof(s->why), SEG_E_EXECED,
			            "no process holds its lock but pid %d lives on (it exec'd, or "
			            "closed the descriptor)",
			            pid);
		return fail(s->why, sizeof(s->why), SEG_E_STALE, "no process holds its lock");
	}
	if (errno != EWOULDBLOCK)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "flock: %s", strerror(errno));
	return SEG_E_OK;
}

int seg_liveness(struct seg *s, bool check_owner)
{
	s->look_again = false;
	int err = seg_lock_held(s);
	if (err)
		return err;
	/* Someone holds the lock: from here on nothing says the file is stale. */
	if (!s->mapped) {
		pid_t here = 0;
		/* another namespace's: its lock names it (no walk of /proc) */
		int found = s->pidns ? procfs_find_locker((uint64_t)s->ino, s->pidns, s->nspid,
		                                          s->hdr.start_time, &here)
		                     : PROCFS_NS_HIDDEN;
		if (found != PROCFS_NS_FOUND)
			found = procfs_find_nspid(s->pidns, s->nspid, s->hdr.start_time, &here);
		if (found != PROCFS_NS_FOUND) {
			s->look_again = found == PROCFS_NS_LATER;
			if (s->pidns)
				return fail(s->why, sizeof(s->why), SEG_E_HIDDEN,
				            "pid %d of pid namespace %llu (start time %llu) is not "
				            "visible from this one",
				            s->nspid, (unsigned long long)s->pidns,
				            (unsigned long long)s->hdr.start_time);
			return fail(s->why, sizeof(s->why), SEG_E_HIDDEN,
			            "its lock is held but pid %d is gone or was reused (start "
			            "time %llu expected)",
			            s->nspid, (unsigned long long)s->hdr.start_time);
		}
		s->hdr.pid = here;
		s->mapped = true;
	}
	struct procfs_info pi;
	unsigned what = check_owner ? PROCFS_STATUS : 0;
	if (check_owner && s->foreign_userns)
		what |= PROCFS_NS | PROCFS_UIDMAP;
	if (procfs_read(s->hdr.pid, what, s->hdr.start_time, &pi) < 0 && !(pi.have & PROCFS_STAT))
		return fail(s->why, sizeof(s->why), SEG_E_HIDDEN,
		            "its lock is held but pid %d is gone or was reused", s->hdr.pid);
	if (!check_owner)
		return SEG_E_OK;
	if (!(pi.have & PROCFS_STATUS))
		return fail(s->why, sizeof(s->why), SEG_E_OWNER, "cannot read pid %d's uids",
		            s->hdr.pid);
	/* Written in another user namespace (root in a container): its uid there must map to
	 * the file's owner here, in the user namespace the process runs in. */
	uid_t outside;
	if (s->foreign_userns &&
	    (!(pi.have & PROCFS_NS) || pi.userns != s->hdr.userns_ino ||
	     !procfs_uid_outside(&pi, s->hdr.uid, &outside) || outside != s->uid))
		return fail(
		        s->why, sizeof(s->why), SEG_E_OWNER,
		        "header uid %u of user namespace %llu does not map to the file owner %u",
		        s->hdr.uid, (unsigned long long)s->hdr.userns_ino, s->uid);
	/* A segment may only describe a process running as its owner (any of its uids, so
	 * set-uid programs still count): nobody may plant a segment for another's pid. Only
	 * root can own a root-owned file, so root's segments may describe a process that has
	 * since dropped to another uid (a server's workers forked as root). The uids /proc
	 * shows are the reader's view: a container's root is its host uid here. */
	if (s->uid != 0 && pi.uid[0] != s->uid && pi.uid[1] != s->uid && pi.uid[2] != s->uid &&
	    pi.uid[3] != s->uid)
		return fail(s->why, sizeof(s->why), SEG_E_OWNER,
		            "pid %d runs as uid %u, segment owned by %u", s->hdr.pid, pi.uid[0],
		            s->uid);
	return SEG_E_OK;
}

/* ---- the mailbox ------------------------------------------------------------------------ */

/* The segment whose mailbox this thread is touching; the SIGBUS handler swaps a faulting
 * page of it (the file was truncated) for an anonymous one and marks the segment broken. */
static _Thread_local struct seg *volatile seg_guarded;

static void seg_sigbus(int sig, siginfo_t *si, void *ctx)
{
	struct seg *s = seg_guarded;
	uintptr_t a = (uintptr_t)si->si_addr, base = s ? (uintptr_t)s->mb : 0;
	if (s && base && a >= base && a < base + LA_SHM_PAGE) {
		void *p = mmap((void *)base, LA_SHM_PAGE, PROT_READ | PROT_WRITE,
		               MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED) {
			s->mb_broken = true;
			return; /* the access retries on the zero page */
		}
	}
	signal(SIGBUS, SIG_DFL); /* not ours: let it kill us as it would have */
}

void seg_install_sigbus_guard(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = seg_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

static int guard_begin(struct seg *s)
{
	if (!s->mb)
		return fail(s->why, sizeof(s->why), SEG_E_PROTOCOL, "mailbox not mapped");
	if (s->mb_broken)
		return fail(s->why, sizeof(s->why), SEG_E_CHANGED, "mailbox page was truncated");
	seg_guarded = s;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return SEG_E_OK;
}

static int guard_end(struct seg *s, int err)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	seg_guarded = NULL;
	if (s->mb_broken)
		return fail(s->why, sizeof(s->why), SEG_E_CHANGED, "mailbox page was truncated");
	return err;
}

int seg_map_mailbox(struct seg *s)
{
	if (s->mb)
		return SEG_E_OK;
	/* Reopen the very file we validated (not its path, which may now name another). */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->fd);
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(s->why, sizeof(s->why), SEG_E_OPEN, "mailbox: %s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_dev != s->dev || st.st_ino != s->ino ||
	    !S_ISREG(st.st_mode) ||
	    !range_ok(s->hdr.off_mailbox, LA_SHM_PAGE, (uint64_t)st.st_size)) {
		close(fd);
		return fail(s->why, sizeof(s->why), SEG_E_CHANGED, "mailbox: file changed");
	}
	void *p = mmap(NULL, LA_SHM_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	               (off_t)s->hdr.off_mailbox);
	close(fd);
	if (p == MAP_FAILED)
		return fail(s->why, sizeof(s->why), SEG_E_IO, "mmap mailbox: %s", strerror(errno));
	s->mb = p;
	s->mb_broken = false;
	return SEG_E_OK;
}

static long futex_wake(uint32_t *word)
{
	return syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int seg_mb_lock(struct seg *s, uint32_t token, uint64_t hold_ns)
{
	int err = guard_begin(s);
	if (err)
		return err;
	struct la_mailbox *mb = s->mb;
	uint64_t now = seg_now_ns(CLOCK_REALTIME);
	uint32_t cur = __atomic_load_n(&mb->lock, __ATOMIC_ACQUIRE);
	bool ok;
	if (cur == 0 || cur == token) {
		ok = __atomic_compare_exchange_n(&mb->lock, &cur, token, false, __ATOMIC_ACQ_REL,
		                                 __ATOMIC_ACQUIRE);
	} else if (__atomic_load_n(&mb->lock_expires_ns, __ATOMIC_ACQUIRE) < now ||
	           (kill((pid_t)cur, 0) != 0 && errno == ESRCH)) {
		/* expired, or its holder (tokens are pids) is gone: take the lock over */
		ok = __atomic_compare_exchange_n(&mb->lock, &cur, token, false, __ATOMIC_ACQ_REL,
		                                 __ATOMIC_ACQUIRE);
	} else {
		ok = false;
	}
	if (ok)
		__atomic_store_n(&mb->lock_expires_ns, now + hold_ns, __ATOMIC_RELEASE);
	else
		err = fail(s->why, sizeof(s->why), SEG_E_BUSY, "mailbox held by %u", cur);
	return guard_end(s, err);
}

void seg_mb_unlock(struct seg *s, uint32_t token)
{
	if (guard_begin(s))
		return;
	uint32_t cur = token;
	__atomic_compare_exchange_n(&s->mb->lock, &cur, 0, false, __ATOMIC_RELEASE,
	                            __ATOMIC_RELAXED);
	guard_end(s, 0);
}

int seg_mb_submit(struct seg *s, const struct seg_cmd *c, uint64_t seq)
{
	/* A truncated file would fault: check the size first (the guard covers the race). */
	struct stat st;
	if (fstat(s->fd, &st) < 0 ||
	    !range_ok(s->hdr.off_mailbox, LA_SHM_PAGE, (uint64_t)st.st_size))
		return fail(s->why, sizeof(s->why), SEG_E_SIZE, "segment truncated");
	int err = guard_begin(s);
	if (err)
		return err;
	struct la_mailbox *mb = s->mb;
	uint32_t st_word = __atomic_load_n(&mb->state, __ATOMIC_ACQUIRE);
	if (st_word == LA_MB_RUNNING) {
		err = fail(s->why, sizeof(s->why), SEG_E_BUSY, "previous command still running");
		return guard_end(s, err);
	}
	if (st_word == LA_MB_REQUESTED) {
		/* left by a client that died holding the lock: make sure it never runs */
		if (!__atomic_compare_exchange_n(&mb->state, &st_word, LA_MB_CANCELLED, false,
		                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			err = fail(s->why, sizeof(s->why), SEG_E_BUSY, "previous command started");
			return guard_end(s, err);
		}
	}
	mb->seq = seq;
	mb->command = c->command;
	mb->flags = c->flags;
	memset(mb->name, 0, sizeof(mb->name));
	memcpy(mb->name, c->name, strnlen(c->name, LA_NAME_MAX - 1));
	mb->value = c->value;
	mb->arg = c->arg;
	__atomic_store_n(&mb->state, LA_MB_REQUESTED, __ATOMIC_RELEASE);
	futex_wake(&mb->state); /* shared futex: the control thread is another process */
	return guard_end(s, SEG_E_OK);
}

int seg_mb_poll(struct seg *s, uint64_t seq, struct seg_result *r)
{
	int err = guard_begin(s);
	if (err)
		return err;
	struct la_mailbox *mb = s->mb;
	uint32_t st = __atomic_load_n(&mb->state, __ATOMIC_ACQUIRE);
	if (st == LA_MB_REQUESTED || st == LA_MB_RUNNING)
		return guard_end(s, SEG_E_TIMEOUT);
	if (st != LA_MB_DONE) {
		err = fail(s->why, sizeof(s->why), SEG_E_PROTOCOL, "mailbox state %u while waiting",
		           st);
		return guard_end(s, err);
	}
	if (__atomic_load_n(&mb->result_seq, __ATOMIC_ACQUIRE) != seq) {
		err = fail(s->why, sizeof(s->why), SEG_E_PROTOCOL,
		           "result for request %llu, not %llu", (unsigned long long)mb->result_seq,
		           (unsigned long long)seq);
		return guard_end(s, err);
	}
	memset(r, 0, sizeof(*r));
	r->status = mb->status;
	memcpy(r->reason, mb->reason, sizeof(r->reason));
	r->reason[sizeof(r->reason) - 1] = 0;
	for (char *c = r->reason; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = '?';
	r->value_out = mb->value_out;
	r->source = mb->source_out;
	r->bytes_released = mb->bytes_released;
	r->syscalls_mmap = mb->syscalls_mmap;
	r->syscalls_munmap = mb->syscalls_munmap;
	r->syscalls_madvise = mb->syscalls_madvise;
	r->syscalls_mprotect = mb->syscalls_mprotect;
	r->duration_ns = mb->duration_ns;
	return guard_end(s, SEG_E_OK);
}

int seg_mb_cancel(struct seg *s)
{
	int err = guard_begin(s);
	if (err)
		return err;
	uint32_t st = LA_MB_REQUESTED;
	if (!__atomic_compare_exchange_n(&s->mb->state, &st, LA_MB_CANCELLED, false,
	                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
	    st == LA_MB_RUNNING)
		err = SEG_E_RUNNING;
	return guard_end(s, err);
}

int seg_command(struct seg *s, const struct seg_cmd *c, struct seg_result *r, uint32_t token,
                int timeout_ms)
{
	static uint64_t seq_counter;
	uint64_t deadline = seg_now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull;
	uint64_t seq = (seg_now_ns(CLOCK_REALTIME) << 8) + (++seq_counter & 0xff);
	struct timespec pause = {0, 200000};
	int err = seg_map_mailbox(s);
	if (err)
		return err;
	while ((err = seg_mb_lock(s, token, (uint64_t)timeout_ms * 1000000ull + 1000000000ull)) ==
	       SEG_E_BUSY) {
		if (seg_now_ns(CLOCK_MONOTONIC) > deadline)
			return err;
		nanosleep(&pause, NULL);
	}
	if (err)
		return err;
	while ((err = seg_mb_submit(s, c, seq)) == SEG_E_BUSY) {
		if (seg_now_ns(CLOCK_MONOTONIC) > deadline)
			goto unlock;
		nanosleep(&pause, NULL);
	}
	if (err)
		goto unlock;
	for (;;) {
		err = seg_mb_poll(s, seq, r);
		if (err != SEG_E_TIMEOUT)
			break;
		if (seg_now_ns(CLOCK_MONOTONIC) > deadline) {
			err = seg_mb_cancel(s) == SEG_E_RUNNING ? SEG_E_RUNNING : SEG_E_TIMEOUT;
			/* it may have finished between the last poll and the cancel */
			if (seg_mb_poll(s, seq, r) == SEG_E_OK)
				err = SEG_E_OK;
			break;
		}
		nanosleep(&pause, NULL);
	}
unlock:
	seg_mb_unlock(s, token);
	if (err == SEG_E_TIMEOUT || err == SEG_E_RUNNING)
		fail(s->why, sizeof(s->why), err, "no answer from pid %d within %d ms", s->hdr.pid,
		     timeout_ms);
	return err;
}
