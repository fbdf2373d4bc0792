/* segment.c — unit tests of ctld/segment.c, the segment reader: every corruption is refused
 * with its own reason, random headers never crash the validator, seqlocked reads are never
 * torn, liveness follows the owner's flock and identity, and the mailbox client runs a
 * command at most once (a timed-out request is cancelled) and survives a truncated file. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procfs.h"
#include "segment.h"

#define NSLOTS 4
#define NCLS   3

static char dir[PATH_MAX - 64], path[PATH_MAX];
static size_t size;

static uint64_t own_start(void)
{
	uint64_t st;
	cr_assert_eq(seg_proc_identity(getpid(), &st, NULL), 0);
	return st;
}

/* Build a valid header + layout for our pid in h; returns the file size. */
static size_t make_header(struct la_shm_header *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = LA_SHM_MAGIC;
	h->abi_version = LA_SHM_ABI_VERSION;
	h->header_size = sizeof(*h);
	h->generation = 1;
	h->pid = getpid();
	h->uid = getuid();
	h->start_time = own_start();
	strcpy(h->exe, "/usr/bin/unit\x01test");
	h->counter_count = LA_NCOUNTERS;
	h->tunable_count = LA_NTUNABLES;
	h->class_count = NCLS;
	h->arena_slots = NSLOTS;
	h->arena_count = 2;
	h->control_state = LA_CONTROL_RUNNING;
	uint64_t off = LA_SHM_PAGE;
	h->off_process = off;
	off += sizeof(struct la_shm_arena);
	h->off_arenas = off;
	h->arena_stride = sizeof(struct la_shm_arena);
	off += sizeof(struct la_shm_arena) * NSLOTS;
	h->off_tunables = off;
	off += 16 * LA_NTUNABLES;
	h->off_classes = off;
	h->class_stride = sizeof(struct la_shm_class);
	off += sizeof(struct la_shm_class) * NCLS;
	/* every slot's class statistics (5), a word apart */
	h->off_arena_classes = off;
	h->class_stats_size = sizeof(struct la_class_stats);
	h->arena_class_stride = sizeof(struct la_class_stats) * NCLS + 8;
	off += h->arena_class_stride * NSLOTS;
	off = (off + LA_SHM_PAGE - 1) / LA_SHM_PAGE * LA_SHM_PAGE;
	h->off_mailbox = off;
	h->total_size = off + LA_SHM_PAGE;
	return h->total_size;
}

/* Write a segment whose header went through mutate (may be NULL); returns the fd. */
static int write_segment(void (*mutate)(struct la_shm_header *))
{
	struct la_shm_header h;
	size = make_header(&h);
	if (mutate)
		mutate(&h);
	snprintf(path, sizeof(path), "%s/" LA_SHM_PREFIX "%d" LA_SHM_SUFFIX, dir, (int)getpid());
	unlink(path);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	/* recognisable counters: process block 1.., arena i: (i+1)*1000 + field index */
	struct la_shm_arena a;
	for (int i = -1; i < NSLOTS; i++) {
		memset(&a, 0, sizeof(a));
		a.index = i < 0 ? 0 : (uint32_t)i;
		a.threads = 1;
		uint64_t *c = (uint64_t *)&a.c;
		for (int k = 0; k < LA_NCOUNTERS; k++)
			c[k] = (uint64_t)(i + 1) * 1000 + (uint64_t)k;
		uint64_t off = i < 0 ? h.off_process : h.off_arenas + h.arena_stride * (uint64_t)i;
		if (off < size && sizeof(a) <= size - off)
			cr_assert_eq(pwrite(fd, &a, sizeof(a), (off_t)off), (ssize_t)sizeof(a));
	}
	struct la_shm_tunable t[LA_NTUNABLES];
	memset(t, 0, sizeof(t));
	for (int i = 0; i < LA_NTUNABLES; i++)
		t[i].value = 100 + i;
	if (h.off_tunables < size && sizeof(t) <= size - h.off_tunables)
		cr_assert_eq(pwrite(fd, t, sizeof(t), (off_t)h.off_tunables), (ssize_t)sizeof(t));
	struct la_shm_class cls[NCLS];
	memset(cls, 0, sizeof(cls));
	for (int i = 0; i < NCLS; i++) {
		cls[i].size = 16u << i;
		cls[i].s.blocks_in_use = 7u * (unsigned)(i + 1);
	}
	if (h.off_classes < size && sizeof(cls) <= size - h.off_classes)
		cr_assert_eq(pwrite(fd, cls, sizeof(cls), (off_t)h.off_classes),
		             (ssize_t)sizeof(cls));
	/* arena i's class c: (i+1)*100*(c+1) blocks in use, i+1 refills */
	struct la_class_stats acs[NCLS];
	for (int i = 0; i < NSLOTS; i++) {
		memset(acs, 0, sizeof(acs));
		for (int c = 0; c < NCLS; c++) {
			acs[c].blocks_in_use = 100u * (unsigned)((i + 1) * (c + 1));
			acs[c].refills = (unsigned)i + 1;
		}
		uint64_t off = h.off_arena_classes + h.arena_class_stride * (uint64_t)i;
		if (h.off_arena_classes && off < size && sizeof(acs) <= size - off)
			cr_assert_eq(pwrite(fd, acs, sizeof(acs), (off_t)off),
			             (ssize_t)sizeof(acs));
	}
	/* the header last: a mutated layout may point blocks into it */
	cr_assert_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	return fd;
}

static void setup(void)
{
	const char *b = getenv("BUILD");
	snprintf(dir, sizeof(dir), "%s/ctld-unit.XXXXXX", b && *b ? b : "/tmp");
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof(dir), "/tmp/ctld-unit.XXXXXX");
		cr_assert(mkdtemp(dir));
	}
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(segment, .init = setup, .fini = teardown, .timeout = 20);

static int open_err(void (*mutate)(struct la_shm_header *))
{
	int fd = write_segment(mutate);
	struct seg s;
	int err = seg_open(&s, path, getuid());
	if (!err)
		seg_close(&s);
	cr_assert_eq(s.fd, err ? -1 : s.fd);
	close(fd);
	return err;
}

Test(segment, valid_segment_opens_and_reads_every_block)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK, "%s", s.why);
	cr_assert_str_eq(s.hdr.exe, "/usr/bin/unit?test", "non-printable bytes are replaced");
	struct seg_block b;
	cr_assert_eq(seg_read_block(&s, 1, &b), SEG_E_OK);
	cr_assert_eq(b.index, 1);
	cr_assert_eq(b.c.allocated_bytes, 2000);
	/* every counter, the last one too, at its own index */
	cr_assert_eq(((const uint64_t *)&b.c)[LA_NCOUNTERS - 1], 2000 + LA_NCOUNTERS - 1);
	cr_assert_eq(b.c.released_bytes,
	             2000 + offsetof(struct la_counters, released_bytes) / sizeof(uint64_t));
	cr_assert_eq(seg_read_block(&s, 2, &b), SEG_E_COUNTS, "arena 2 is beyond arena_count");
	struct la_counters tot;
	cr_assert_eq(seg_read_totals(&s, &tot), SEG_E_OK);
	cr_assert_eq(tot.allocated_bytes, 0 + 1000 + 2000);
	struct la_shm_tunable t[LA_NTUNABLES];
	uint32_t n;
	cr_assert_eq(seg_read_tunables(&s, t, &n), SEG_E_OK);
	cr_assert_eq(n, LA_NTUNABLES);
	cr_assert_eq(t[LA_TUNABLE_decay_ms].value, 100 + LA_TUNABLE_decay_ms);
	struct la_shm_class cls[8];
	cr_assert_eq(seg_read_classes(&s, cls, 8, &n), SEG_E_OK);
	cr_assert_eq(n, NCLS);
	cr_assert_eq(cls[2].size, 64);
	/* the entry's 21 and the two arenas' (the slots past arena_count are not read) */
	cr_assert_eq(cls[2].s.blocks_in_use, 21 + 300 + 600);
	cr_assert_eq(cls[2].s.refills, 1 + 2);
	cr_assert_eq(seg_read_classes(&s, cls, 1, &n), SEG_E_OK);
	cr_assert_eq(n, 1);
	cr_assert_eq(cls[0].s.blocks_in_use, 7 + 100 + 200, "the first class alone");
	cr_assert_eq(seg_refresh(&s), SEG_E_OK);
	seg_close(&s);
	close(fd);
}

static void m_no_arena_classes(struct la_shm_header *h)
{
	h->off_arena_classes = 0;
}

/* A segment of 2-4 has no arena part: the class entries are the whole figures. */
Test(segment, class_statistics_without_an_arena_part_are_the_entries)
{
	int fd = write_segment(m_no_arena_classes);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK, "%s", s.why);
	struct la_shm_class cls[8];
	uint32_t n;
	cr_assert_eq(seg_read_classes(&s, cls, 8, &n), SEG_E_OK);
	cr_assert_eq(n, NCLS);
	cr_assert_eq(cls[2].s.blocks_in_use, 21);
	cr_assert_eq(cls[2].s.refills, 0);
	seg_close(&s);
	close(fd);
}

static void m_magic(struct la_shm_header *h)
{
	h->magic++;
}
static void m_version(struct la_shm_header *h)
{
	h->abi_version = 99;
}
static void m_version_old(struct la_shm_header *h)
{
	h->abi_version = LA_SHM_ABI_VERSION_MIN - 1;
}
/* the oldest version readers still read: the same layout, at most 36 classes */
static void m_version_min(struct la_shm_header *h)
{
	h->abi_version = LA_SHM_ABI_VERSION_MIN;
}
/* the version before this one: the same layout, at most 52 classes */
static void m_version_prev(struct la_shm_header *h)
{
	h->abi_version = LA_SHM_ABI_VERSION - 1;
}
static void m_header_small(struct la_shm_header *h)
{
	h->header_size = 8;
}
static void m_header_big(struct la_shm_header *h)
{
	h->header_size = LA_SHM_PAGE + 8;
}
static void m_total(struct la_shm_header *h)
{
	h->total_size += LA_SHM_PAGE;
}
static void m_counters0(struct la_shm_header *h)
{
	h->counter_count = 0;
}
static void m_counters_huge(struct la_shm_header *h)
{
	h->counter_count = 1u << 31;
}
static void m_arena_count(struct la_shm_header *h)
{
	h->arena_count = NSLOTS + 1;
}
static void m_slots0(struct la_shm_header *h)
{
	h->arena_slots = 0;
	h->arena_count = 0;
}
static void m_classes(struct la_shm_header *h)
{
	h->class_count = 1u << 30;
}
static void m_pid0(struct la_shm_header *h)
{
	h->pid = 0;
}
static void m_off_process(struct la_shm_header *h)
{
	h->off_process = h->total_size - 8;
}
static void m_off_process_hdr(struct la_shm_header *h)
{
	h->off_process = 16;
}
static void m_off_overflow(struct la_shm_header *h)
{
	h->off_arenas = UINT64_MAX - 7;
}
static void m_stride(struct la_shm_header *h)
{
	h->arena_stride = 16;
}
static void m_stride_mul(struct la_shm_header *h)
{
	h->arena_stride = 1ull << 40;
}
static void m_tunables(struct la_shm_header *h)
{
	h->off_tunables = h->total_size - 16;
}
/* the library's own limits (liballoc_shm.h), one past each */
static void m_lim_slots(struct la_shm_header *h)
{
	h->arena_slots = LA_SHM_ARENAS_MAX + 1;
}
static void m_classes_max(struct la_shm_header *h)
{
	h->class_count = LA_SHM_CLASSES_MAX;
	h->off_arena_classes = 0; /* (the arenas' part holds NCLS classes) */
}
static void m_lim_classes(struct la_shm_header *h)
{
	h->class_count = LA_SHM_CLASSES_MAX + 1;
}
static void m_lim_tunables(struct la_shm_header *h)
{
	h->tunable_count = LA_SHM_TUNABLES_MAX + 1;
}
static void m_lim_counters(struct la_shm_header *h)
{
	h->counter_count = LA_SHM_COUNTERS_MAX + 1;
}
static void m_lim_stride(struct la_shm_header *h)
{
	h->arena_stride = LA_SHM_ARENA_STRIDE_MAX + 8;
	h->arena_slots = 1;
	h->arena_count = 1;
}
static void m_class_stride(struct la_shm_header *h)
{
	h->class_stride = 12;
}
static void m_arena_classes_end(struct la_shm_header *h)
{
	h->off_arena_classes = h->total_size - 8;
}
static void m_arena_classes_stride(struct la_shm_header *h)
{
	h->arena_class_stride = 8; /* less than one arena's classes */
}
static void m_arena_classes_size(struct la_shm_header *h)
{
	h->class_stats_size = 12;
}
static void m_mailbox_align(struct la_shm_header *h)
{
	h->off_mailbox += 8;
}
static void m_mailbox_end(struct la_shm_header *h)
{
	h->off_mailbox = h->total_size;
}
static void m_mailbox_hdr(struct la_shm_header *h)
{
	h->off_mailbox = 0;
}
static void m_unaligned(struct la_shm_header *h)
{
	h->off_tunables += 4;
}
static void m_name(struct la_shm_header *h)
{
	h->pid = 1;
}
static void m_uid(struct la_shm_header *h)
{
	h->uid += 1;
}

Test(segment, a_segment_of_an_older_abi_version_still_read_opens)
{
	cr_assert_eq(open_err(m_version_min), SEG_E_OK);
	cr_assert_eq(open_err(m_version_prev), SEG_E_OK);
}

Test(segment, a_header_with_as_many_classes_as_liballoc_has_opens)
{
	cr_assert_eq(open_err(m_classes_max), SEG_E_OK);
}

Test(segment, each_header_corruption_is_refused_with_its_reason)
{
	cr_expect_eq(open_err(m_magic), SEG_E_MAGIC);
	cr_expect_eq(open_err(m_version), SEG_E_VERSION);
	cr_expect_eq(open_err(m_version_old), SEG_E_VERSION);
	cr_expect_eq(open_err(m_header_small), SEG_E_HEADER);
	cr_expect_eq(open_err(m_header_big), SEG_E_HEADER);
	cr_expect_eq(open_err(m_total), SEG_E_SIZE);
	cr_expect_eq(open_err(m_counters0), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_counters_huge), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_arena_count), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_slots0), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_classes), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_pid0), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_lim_slots), SEG_E_COUNTS, "more arena slots than liballoc has");
	cr_expect_eq(open_err(m_lim_classes), SEG_E_COUNTS, "more classes than liballoc has");
	cr_expect_eq(open_err(m_lim_tunables), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_lim_counters), SEG_E_COUNTS);
	cr_expect_eq(open_err(m_lim_stride), SEG_E_LAYOUT, "arena blocks larger than any");
	cr_expect_eq(open_err(m_off_process), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_off_process_hdr), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_off_overflow), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_stride), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_stride_mul), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_tunables), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_class_stride), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_arena_classes_end), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_arena_classes_stride), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_arena_classes_size), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_mailbox_align), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_mailbox_end), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_mailbox_hdr), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_unaligned), SEG_E_LAYOUT);
	cr_expect_eq(open_err(m_name), SEG_E_NAME);
	cr_expect_eq(open_err(m_uid), SEG_E_OWNER);
}

Test(segment, file_level_problems_are_refused_with_their_reason)
{
	struct seg s;
	int fd = write_segment(NULL);
	cr_assert_eq(seg_open(&s, path, getuid() + 1), SEG_E_OWNER, "expected uid differs");
	cr_assert(strstr(s.why, "expected"));
	fchmod(fd, 0640);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_MODE);
	cr_assert_str_eq(s.why, "mode 0640");
	fchmod(fd, 0600);
	cr_assert_eq(ftruncate(fd, (off_t)size - LA_SHM_PAGE), 0);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_SIZE, "truncated");
	cr_assert_eq(ftruncate(fd, 100), 0);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_SIZE, "shorter than a header");
	cr_assert_eq(ftruncate(fd, (off_t)SEG_MAX_SIZE + 4096), 0);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_SIZE, "larger than any segment");
	close(fd);
	/* a symbolic link to a valid segment */
	fd = write_segment(NULL);
	char real[PATH_MAX + 8];
	snprintf(real, sizeof(real), "%s.real", path);
	cr_assert_eq(rename(path, real), 0);
	cr_assert_eq(symlink(real, path), 0);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_SYMLINK);
	unlink(path);
	close(fd);
	/* a FIFO must not block the reader */
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_NOTREG);
	unlink(path);
	cr_assert_eq(mkdir(path, 0700), 0);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_NOTREG);
	rmdir(path);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OPEN);
}

Test(segment, random_headers_never_crash_the_validator)
{
	uint64_t x = 88172645463325252ull;
	struct la_shm_header good, h;
	size_t sz = make_header(&good);
	int accepted = 0;
	for (int i = 0; i < 200000; i++) {
		if (i % 2) {
			/* flip a few random bytes of a valid header */
			h = good;
			for (int k = 0; k < 1 + i % 4; k++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				((uint8_t *)&h)[x % sizeof(h)] ^= (uint8_t)(x >> 32);
			}
		} else {
			for (size_t k = 0; k < sizeof(h); k += 8) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				memcpy((uint8_t *)&h + k, &x,
				       sizeof(h) - k < 8 ? sizeof(h) - k : 8);
			}
			h.magic = LA_SHM_MAGIC;
			h.abi_version = LA_SHM_ABI_VERSION;
		}
		char why[192];
		int err = seg_validate_header(&h, i % 3 ? sz : x % (2 * SEG_MAX_SIZE), why,
		                              sizeof(why));
		cr_assert(err >= 0 && err < SEG_E_MAX);
		if (err == SEG_E_OK) {
			accepted++;
			/* whatever passes must keep every region inside the file */
			cr_assert(h.off_mailbox + LA_SHM_PAGE <= h.total_size);
			cr_assert(h.off_arenas + h.arena_stride * h.arena_slots <= h.total_size);
			cr_assert(h.off_tunables + 16ull * h.tunable_count <= h.total_size);
		}
	}
	cr_assert(accepted > 0, "some single-byte flips (e.g. in exe) stay valid");
}

Test(segment, refresh_notices_truncation_and_relayout)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	uint32_t count = 3;
	cr_assert_eq(pwrite(fd, &count, 4, offsetof(struct la_shm_header, arena_count)), 4);
	cr_assert_eq(seg_refresh(&s), SEG_E_OK);
	cr_assert_eq(s.hdr.arena_count, 3, "live fields are refreshed");
	uint64_t gen = 2;
	cr_assert_eq(pwrite(fd, &gen, 8, offsetof(struct la_shm_header, generation)), 8);
	cr_assert_eq(seg_refresh(&s), SEG_E_CHANGED);
	gen = 1;
	cr_assert_eq(pwrite(fd, &gen, 8, offsetof(struct la_shm_header, generation)), 8);
	count = NSLOTS + 1;
	cr_assert_eq(pwrite(fd, &count, 4, offsetof(struct la_shm_header, arena_count)), 4);
	cr_assert_eq(seg_refresh(&s), SEG_E_COUNTS);
	cr_assert_eq(ftruncate(fd, LA_SHM_PAGE), 0);
	cr_assert_eq(seg_refresh(&s), SEG_E_SIZE);
	struct seg_block b;
	cr_assert_neq(seg_read_block(&s, 0, &b), SEG_E_OK, "reads past the end fail, no SIGBUS");
	seg_close(&s);
	close(fd);
}

Test(segment, a_seqlock_held_odd_forever_gives_up_boundedly)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	uint64_t odd = 7;
	cr_assert_eq(pwrite(fd, &odd, 8, (off_t)s.hdr.off_arenas), 8);
	struct seg_block b;
	cr_assert_eq(seg_read_block(&s, 0, &b), SEG_E_TORN);
	cr_assert_eq(seg_read_block(&s, -1, &b), SEG_E_OK, "other blocks still read");
	cr_assert_eq(pwrite(fd, &odd, 8, offsetof(struct la_shm_header, tunables_seq)), 8);
	struct la_shm_tunable t[LA_NTUNABLES];
	uint32_t n;
	cr_assert_eq(seg_read_tunables(&s, t, &n), SEG_E_TORN, "tunables_seq guards the array");
	seg_close(&s);
	close(fd);
}

struct writer {
	struct la_shm_arena *a;
	volatile int stop;
};

static void *seq_writer(void *arg)
{
	struct writer *w = arg;
	uint64_t v = 0;
	while (!w->stop) {
		__atomic_fetch_add(&w->a->seq, 1, __ATOMIC_ACQ_REL); /* odd: writing */
		v++;
		uint64_t *c = (uint64_t *)&w->a->c;
		for (int k = 0; k < LA_NCOUNTERS; k++)
			__atomic_store_n(&c[k], v, __ATOMIC_RELAXED);
		__atomic_fetch_add(&w->a->seq, 1, __ATOMIC_RELEASE); /* even: done */
		/* a writer that never pauses would starve the reader's bounded retries on an
		 * idle 2-core machine; a short pause keeps writes overlapping reads often */
		for (volatile int spin = 0; spin < 200; spin++)
			;
	}
	return NULL;
}

Test(segment, seqlocked_reads_are_never_torn_under_a_busy_writer)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(map != MAP_FAILED);
	struct writer w = {.a = (struct la_shm_arena *)((char *)map + s.hdr.off_arenas)};
	w.a->seq = 0;
	memset(&w.a->c, 0, sizeof(w.a->c));
	pthread_t th;
	pthread_create(&th, NULL, seq_writer, &w);
	int ok = 0;
	for (int i = 0; i < 5000; i++) {
		struct seg_block b;
		int err = seg_read_block(&s, 0, &b);
		cr_assert(err == SEG_E_OK || err == SEG_E_TORN);
		if (err)
			continue;
		ok++;
		uint64_t *c = (uint64_t *)&b.c;
		for (int k = 1; k < LA_NCOUNTERS; k++)
			cr_assert_eq(c[k], c[0], "torn read: field %d = %llu, field 0 = %llu", k,
			             (unsigned long long)c[k], (unsigned long long)c[0]);
	}
	w.stop = 1;
	pthread_join(th, NULL);
	cr_assert(ok > 0);
	munmap(map, size);
	seg_close(&s);
	close(fd);
}

Test(segment, liveness_follows_the_owners_lock_and_identity)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	/* nobody holds the lock, but the process that wrote it (this one) runs: it exec'd or
	 * closed the descriptor; the file is left to it */
	cr_assert_eq(seg_liveness(&s, true), SEG_E_EXECED, "%s", s.why);
	cr_assert(strstr(s.why, "lives on"), "%s", s.why);
	s.hdr.start_time += 1; /* its writer gone (the pid reused): stale */
	cr_assert_eq(seg_liveness(&s, true), SEG_E_STALE, "nobody holds the lock");
	cr_assert(strstr(s.why, "lock"));
	s.hdr.start_time -= 1;
	cr_assert_eq(flock(fd, LOCK_SH), 0);
	cr_assert_eq(seg_liveness(&s, true), SEG_E_OK, "%s", s.why);
	s.uid = 12345; /* a segment of another user claiming our pid */
	cr_assert_eq(seg_liveness(&s, true), SEG_E_OWNER);
	cr_assert(strstr(s.why, "runs as uid"), "%s", s.why);
	cr_assert_eq(seg_liveness(&s, false), SEG_E_OK, "the owner check is only done on demand");
	s.uid = getuid();
	s.hdr.start_time += 1; /* as if the pid had been reused */
	cr_assert_eq(seg_liveness(&s, true), SEG_E_HIDDEN,
	             "a held lock is never stale, whatever its pid says");
	cr_assert(strstr(s.why, "reused"), "%s", s.why);
	seg_close(&s);
	close(fd);
}

static uint64_t other_ns = 4026530000u; /* no process is in it */
static void in_other_ns(struct la_shm_header *h)
{
	h->pidns_ino = other_ns;
}

Test(segment, a_segment_of_another_pid_namespace_is_named_for_it_and_never_taken_for_ours)
{
	/* the plain name with a namespace in the header: refused (names never collide) */
	cr_assert_eq(open_err(in_other_ns), SEG_E_NAME);
	struct la_shm_header h;
	size = make_header(&h);
	in_other_ns(&h);
	char named[PATH_MAX + 64];
	snprintf(named, sizeof(named), "%s/" LA_SHM_PREFIX "%d" LA_SHM_NS_TAG "%llu" LA_SHM_SUFFIX,
	         dir, (int)getpid(), (unsigned long long)other_ns);
	int fd = open(named, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	cr_assert_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	struct seg s;
	cr_assert_eq(seg_open(&s, named, getuid()), SEG_E_OK, "%s", s.why);
	cr_assert_eq(s.nspid, getpid());
	cr_assert_eq(s.pidns, other_ns);
	cr_assert_eq(seg_liveness(&s, true), SEG_E_STALE, "a free lock is stale in any namespace");
	cr_assert_eq(flock(fd, LOCK_SH), 0);
	/* our pid, our start time, but another namespace: not us, and not removable */
	cr_assert_eq(seg_liveness(&s, true), SEG_E_HIDDEN, "%s", s.why);
	cr_assert(strstr(s.why, "not visible"), "%s", s.why);
	cr_assert(!s.mapped);
	seg_close(&s);
	/* our own namespace named: the same as the plain name */
	h.pidns_ino = procfs_self_pidns();
	cr_assert_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	cr_assert_eq(seg_open(&s, named, getuid()), SEG_E_NAME, "the name says another namespace");
	close(fd);
	if (h.pidns_ino != LA_SHM_INIT_PIDNS)
		return;
	fd = write_segment(NULL);
	cr_assert_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	cr_assert_eq(flock(fd, LOCK_SH), 0);
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK, "%s", s.why);
	cr_assert_eq(seg_liveness(&s, true), SEG_E_OK, "%s", s.why);
	cr_assert(s.mapped);
	cr_assert_eq(s.hdr.pid, getpid());
	seg_close(&s);
	close(fd);
}

/* ---- mailbox ---------------------------------------------------------------------------- */
struct answerer {
	struct la_mailbox *mb;
	volatile int stop;
	int executed;
	int looks; /* times it looked at the mailbox (atomic) */
};

static void *answer(void *arg)
{
	struct answerer *a = arg;
	while (!a->stop) {
		uint32_t st = __atomic_load_n(&a->mb->state, __ATOMIC_ACQUIRE);
		__atomic_fetch_add(&a->looks, 1, __ATOMIC_RELEASE);
		if (st != LA_MB_REQUESTED) {
			struct timespec ts = {0, 1000000};
			syscall(SYS_futex, &a->mb->state, FUTEX_WAIT, st, &ts, NULL, 0);
			continue;
		}
		if (!__atomic_compare_exchange_n(&a->mb->state, &st, LA_MB_RUNNING, false,
		                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue;
		a->executed++;
		a->mb->status = a->mb->command == LA_CMD_trim ? LA_ST_OK : LA_ST_ERANGE;
		snprintf(a->mb->reason, sizeof(a->mb->reason), "%s", "range is [0, 1]\n");
		a->mb->bytes_released = 4242;
		a->mb->value_out = a->mb->value * 2;
		a->mb->result_seq = a->mb->seq;
		__atomic_store_n(&a->mb->state, LA_MB_DONE, __ATOMIC_RELEASE);
	}
	return NULL;
}

static struct la_mailbox *map_mb(int fd, const struct seg *s)
{
	void *p = mmap(NULL, LA_SHM_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	               (off_t)s->hdr.off_mailbox);
	cr_assert(p != MAP_FAILED);
	return p;
}

Test(segment, a_command_round_trips_through_the_mailbox)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	struct answerer a = {.mb = map_mb(fd, &s)};
	pthread_t th;
	pthread_create(&th, NULL, answer, &a);
	struct seg_cmd c = {.command = LA_CMD_trim, .value = 21};
	struct seg_result r;
	cr_assert_eq(seg_command(&s, &c, &r, 77, 2000), SEG_E_OK, "%s", s.why);
	cr_assert_eq(r.status, LA_ST_OK);
	cr_assert_eq(r.bytes_released, 4242);
	cr_assert_eq(r.value_out, 42);
	cr_assert_str_eq(r.reason, "range is [0, 1]?", "control characters are neutralised");
	c.command = LA_CMD_set;
	cr_assert_eq(seg_command(&s, &c, &r, 77, 2000), SEG_E_OK);
	cr_assert_eq(r.status, LA_ST_ERANGE);
	cr_assert_eq(a.mb->lock, 0, "the lock is released");
	a.stop = 1;
	pthread_join(th, NULL);
	cr_assert_eq(a.executed, 2);
	seg_close(&s);
	close(fd);
}

Test(segment, a_timed_out_request_is_cancelled_and_never_runs)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	struct la_mailbox *mb = map_mb(fd, &s);
	struct seg_cmd c = {.command = LA_CMD_trim};
	struct seg_result r;
	cr_assert_eq(seg_command(&s, &c, &r, 77, 50), SEG_E_TIMEOUT);
	cr_assert_eq(mb->state, LA_MB_CANCELLED);
	cr_assert_eq(mb->lock, 0);
	/* the control thread wakes up late: nothing to claim */
	struct answerer a = {.mb = mb};
	pthread_t th;
	pthread_create(&th, NULL, answer, &a);
	/* it has looked at the mailbox a few times (however slow the machine) */
	while (__atomic_load_n(&a.looks, __ATOMIC_ACQUIRE) < 5)
		usleep(1000);
	a.stop = 1;
	pthread_join(th, NULL);
	cr_assert_eq(a.executed, 0);
	seg_close(&s);
	close(fd);
}

Test(segment, the_mailbox_lock_is_exclusive_until_it_expires)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	cr_assert_eq(seg_map_mailbox(&s), SEG_E_OK);
	struct la_mailbox *mb = map_mb(fd, &s);
	mb->lock = (uint32_t)getppid(); /* tokens are pids: a live holder */
	mb->lock_expires_ns = seg_now_ns(CLOCK_REALTIME) + 10000000000ull;
	cr_assert_eq(seg_mb_lock(&s, 77, 1000000000ull), SEG_E_BUSY);
	mb->lock_expires_ns = seg_now_ns(CLOCK_REALTIME) - 1;
	cr_assert_eq(seg_mb_lock(&s, 77, 1000000000ull), SEG_E_OK,
	             "an expired holder is displaced");
	cr_assert_eq(mb->lock, 77);
	/* a REQUESTED left by the dead holder is cancelled before ours is written */
	mb->state = LA_MB_REQUESTED;
	struct seg_cmd c = {.command = LA_CMD_refresh};
	cr_assert_eq(seg_mb_submit(&s, &c, 5), SEG_E_OK);
	cr_assert_eq(mb->seq, 5);
	cr_assert_eq(mb->state, LA_MB_REQUESTED);
	mb->state = LA_MB_RUNNING;
	cr_assert_eq(seg_mb_submit(&s, &c, 6), SEG_E_BUSY, "never overwrite a running request");
	cr_assert_eq(seg_mb_cancel(&s), SEG_E_RUNNING);
	mb->state = LA_MB_DONE;
	mb->result_seq = 4;
	struct seg_result r;
	cr_assert_eq(seg_mb_poll(&s, 5, &r), SEG_E_PROTOCOL, "a result for another request");
	seg_mb_unlock(&s, 12345);
	cr_assert_eq(mb->lock, 77, "only the holder unlocks");
	seg_mb_unlock(&s, 77);
	cr_assert_eq(mb->lock, 0);
	seg_close(&s);
	close(fd);
}

Test(segment, a_mailbox_lock_whose_holder_is_gone_is_taken_over_at_once)
{
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	cr_assert_eq(seg_map_mailbox(&s), SEG_E_OK);
	struct la_mailbox *mb = map_mb(fd, &s);
	pid_t dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	mb->lock = (uint32_t)dead;
	mb->lock_expires_ns = seg_now_ns(CLOCK_REALTIME) + 10000000000ull;
	cr_assert_eq(seg_mb_lock(&s, 77, 1000000000ull), SEG_E_OK, "%s", s.why);
	cr_assert_eq(mb->lock, 77u);
	seg_close(&s);
	close(fd);
}

Test(segment, a_truncated_mailbox_page_is_an_error_not_a_crash)
{
	seg_install_sigbus_guard();
	int fd = write_segment(NULL);
	struct seg s;
	cr_assert_eq(seg_open(&s, path, getuid()), SEG_E_OK);
	cr_assert_eq(seg_map_mailbox(&s), SEG_E_OK);
	cr_assert_eq(ftruncate(fd, LA_SHM_PAGE), 0);
	struct seg_result r;
	cr_assert_eq(seg_mb_poll(&s, 1, &r), SEG_E_CHANGED, "the SIGBUS was absorbed");
	cr_assert(s.mb_broken);
	cr_assert_eq(seg_mb_lock(&s, 77, 1), SEG_E_CHANGED);
	struct seg_cmd c = {.command = LA_CMD_trim};
	cr_assert_neq(seg_command(&s, &c, &r, 77, 50), SEG_E_OK);
	seg_close(&s);
	close(fd);
}
