/* tunables.c — live tunable changes against concurrent readers and writers: a thread cache
 * never misses a tcache_max_bytes change for good (its limits and the generation number
 * are read in an order that cannot record a change as seen before reading it); the
 * tunables block of the segment is never torn (one writer at a time: application threads
 * in liballoc_set, the control thread, frees raising the dynamic threshold); and a raise
 * of the dynamic threshold never overwrites an explicit mmap_threshold set meanwhile.
 * Linked with liballoc.a; reads the allocator's own state. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "liballoc.h"
#include "shm.h"
#include "sizeclass.h"
#include "tcache.h"
#include "tunables.h"

#include "parse_cases.h"

static void set(const char *name, int64_t v)
{
	char reason[160];
	cr_assert_eq(liballoc_set(name, v, reason, sizeof(reason)), 0, "%s: %s", name, reason);
}

static void spin_ns(uint64_t ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)(b.tv_nsec - a.tv_nsec) <
	       ns);
}

/* ---- the cache generation ------------------------------------------------------------ */

#define TRIALS 1000
#define LOW    (16 << 10)  /* tcache_max_bytes of the first change */
#define HIGH   (256 << 10) /* ... and of the second */

struct gen_race {
	uint32_t trial;   /* bumped by the setter for each trial (atomic) */
	uint32_t ready;   /* the cache thread applied the trial's first value (atomic) */
	uint32_t go;      /* the setter is done with the trial: look once more (atomic) */
	uint32_t checked; /* the cache thread finished trial n (atomic) */
	uint32_t delay_ns;
	uint16_t limit[TRIALS];
	unsigned cls;
};

/* A thread with a cache. In every trial it applies the value the trial starts from, then
 * waits for the next change and applies it after a random delay (so that, now and then,
 * its limits are being recomputed while the change after it lands), then looks once more,
 * as any later refill or flush would, and reports its limit. */
static void *cache_thread(void *arg)
{
	struct gen_race *r = arg;
	A(free)(A(malloc)(sc_size[r->cls])); /* a live cache, its bin of r->cls in use */
	for (uint32_t n = 1; n <= TRIALS; n++) {
		while (__atomic_load_n(&r->trial, __ATOMIC_ACQUIRE) < n)
			;
		tcache_check_self();
		uint32_t gen = __atomic_load_n(&la_tcache.gen, __ATOMIC_RELAXED);
		__atomic_store_n(&r->ready, n, __ATOMIC_RELEASE);
		while (__atomic_load_n(&tcache_gen, __ATOMIC_RELAXED) == gen)
			;
		spin_ns(__atomic_load_n(&r->delay_ns, __ATOMIC_RELAXED));
		tcache_check_self();
		while (__atomic_load_n(&r->go, __ATOMIC_ACQUIRE) < n)
			;
		tcache_check_self();
		r->limit[n - 1] = la_tcache.bins[r->cls].limit;
		__atomic_store_n(&r->checked, n, __ATOMIC_RELEASE);
	}
	return NULL;
}

Test(tunables, a_thread_cache_never_misses_a_tcache_max_bytes_change)
{
	static struct gen_race r;
	r.cls = sc_class_of(1024);
	unsigned expect = LA_MIN(HIGH / sc_size[r.cls], TC_MAX_BLOCKS);
	cr_assert_neq(LA_MIN(LOW / sc_size[r.cls], TC_MAX_BLOCKS), expect, "the changes differ");
	pthread_t t;
	pthread_create(&t, NULL, cache_thread, &r);
	uint64_t rng = 1;
	for (uint32_t n = 1; n <= TRIALS; n++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		r.delay_ns = (uint32_t)(rng >> 33) % 3000;
		set("tcache_max_bytes", 64 << 10);
		__atomic_store_n(&r.trial, n, __ATOMIC_RELEASE);
		while (__atomic_load_n(&r.ready, __ATOMIC_ACQUIRE) < n)
			;
		set("tcache_max_bytes", LOW);
		set("tcache_max_bytes", HIGH);
		__atomic_store_n(&r.go, n, __ATOMIC_RELEASE);
		while (__atomic_load_n(&r.checked, __ATOMIC_ACQUIRE) < n)
			;
	}
	pthread_join(t, NULL);
	int misses = 0;
	for (int i = 0; i < TRIALS; i++)
		misses += r.limit[i] != expect;
	cr_assert_eq(misses, 0,
	             "%d of %d trials left the cache with the limit of the first change (%u "
	             "blocks of %u B, not %u)",
	             misses, TRIALS, LA_MIN(LOW / sc_size[r.cls], TC_MAX_BLOCKS), sc_size[r.cls],
	             expect);
}

/* ---- one writer for the tunables block ----------------------------------------------- */

/* Copy the segment's tunables block as a reader does (allocctld: seqlock, retried). A
 * writer preempted inside its write leaves the sequence odd until it runs again, which on
 * a busy machine can take longer than a count of tries lasts (100,000 yields took 0.2-0.4 s
 * at a load of 26 on 2 cores). So the reader gives up by time: the sequence stayed busy or
 * kept changing for 10 s (a writer that never finishes its write). */
static bool read_block(struct la_shm_tunable out[LA_NTUNABLES])
{
	struct la_shm_header *h = shm_header();
	const struct la_shm_tunable *t = (const void *)((char *)h + h->off_tunables);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned tries = 1;; tries++) {
		uint64_t s0 = __atomic_load_n(&h->tunables_seq, __ATOMIC_ACQUIRE);
		if (s0 & 1) {
			sched_yield(); /* a writer is at work (maybe preempted) */
		} else {
			/* acquire loads: the second read of the sequence cannot move before them
			 * (TSan builds refuse a fence) */
			for (int i = 0; i < LA_NTUNABLES; i++)
				out[i].value = __atomic_load_n(&t[i].value, __ATOMIC_ACQUIRE);
			if (__atomic_load_n(&h->tunables_seq, __ATOMIC_RELAXED) == s0)
				return true;
		}
		if (tries % 1024 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if ((now.tv_sec - t0.tv_sec) * 1000000000L + now.tv_nsec - t0.tv_nsec >
			    10 * 1000000000L)
				return false;
		}
	}
}

struct raiser {
	uint32_t stop; /* atomic */
	bool reset;    /* at the ceiling, start over */
	uint64_t raises;
};

/* Free direct mappings of the current threshold's size: each raises the dynamic
 * threshold by a page and the trim threshold to twice that, until the ceiling. */
static void *raise_loop(void *arg)
{
	struct raiser *r = arg;
	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		size_t n = (size_t)TUN(mmap_threshold);
		if ((int64_t)n >= TUN(mmap_threshold_max) - (int64_t)LA_PAGE) {
			if (!r->reset) {
				sched_yield();
				continue;
			}
			/* start over, one thread at a time: the threshold first, which turns the
			 * raises off (every pair with it is valid), until mmap_dynamic is set */
			static pthread_mutex_t resetting = PTHREAD_MUTEX_INITIALIZER;
			if (pthread_mutex_trylock(&resetting) == 0) {
				liballoc_set("mmap_threshold", 128 << 10, NULL, 0);
				liballoc_set("trim_threshold", 256 << 10, NULL, 0);
				liballoc_set("mmap_dynamic", 1, NULL, 0);
				pthread_mutex_unlock(&resetting);
			}
			continue;
		}
		A(free)(A(malloc)(n));
		__atomic_fetch_add(&r->raises, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Other writers at the same time: liballoc_set of tunables the raise does not touch. */
static void *set_loop(void *arg)
{
	struct raiser *r = arg;
	for (int64_t i = 0; !__atomic_load_n(&r->stop, __ATOMIC_RELAXED); i++)
		liballoc_set("decay_ms", 10000 + i % 1000, NULL, 0);
	return NULL;
}

Test(tunables, readers_never_take_a_torn_table_from_concurrent_writers)
{
	set("mmap_max", 65536); /* explicit: turns mmap_dynamic off ... */
	set("mmap_dynamic", 1); /* ... until it is set again */
	set("mmap_threshold_max", 32 << 20);
	struct raiser r = {.reset = true};
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, i < 2 ? raise_loop : set_loop, &r);
	long copies = 0, torn = 0, failed = 0;
	struct la_shm_tunable b[LA_NTUNABLES];
	struct timespec a, now;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		if (!read_block(b)) {
			failed++;
		} else {
			copies++;
			int64_t thr = b[LA_TUNABLE_mmap_threshold].value;
			int64_t trim = b[LA_TUNABLE_trim_threshold].value;
			/* after the first raise, every published pair is one raise's pair */
			if (thr != 128 << 10 && trim != 2 * thr)
				torn++;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - a.tv_sec < 3);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	cr_log_info("%ld copies, %llu raising frees", copies, (unsigned long long)r.raises);
	cr_assert_gt(r.raises, 100, "the threshold was raised (%llu frees)",
	             (unsigned long long)r.raises);
	cr_assert_eq(failed, 0, "%ld reads found the seqlock busy or changing for 10 s", failed);
	cr_assert_eq(torn, 0,
	             "%ld of %ld copies held a raised mmap_threshold without its trim_threshold",
	             torn, copies);
}

/* An explicit mmap_threshold set while frees raise the dynamic threshold stays: the raise
 * checks and writes in one step, and the explicit setting turns the raises off. */
Test(tunables, a_raise_never_overwrites_an_explicit_threshold)
{
	int lost = 0;
	for (int trial = 0; trial < 300; trial++) {
		set("mmap_threshold", 128 << 10);
		set("mmap_dynamic", 1);
		struct raiser r = {0};
		pthread_t t[2];
		pthread_create(&t[0], NULL, raise_loop, &r);
		pthread_create(&t[1], NULL, raise_loop, &r);
		while (__atomic_load_n(&r.raises, __ATOMIC_RELAXED) < 20 + (unsigned)trial % 50)
			sched_yield();
		int64_t mine = (64 << 10) + (int64_t)(trial % 16) * LA_PAGE;
		set("mmap_threshold", mine);
		spin_ns(200000); /* raises in flight land now, if they can */
		__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
		pthread_join(t[0], NULL);
		pthread_join(t[1], NULL);
		lost += TUN(mmap_threshold) != mine;
	}
	cr_assert_eq(lost, 0, "%d of 300 explicit thresholds were overwritten by a raise", lost);
}

/* ---- the environment --------------------------------------------------------------------
 * LIBALLOC_<NAME> is read by la_parse, like the daemon's configuration and allocctl; a
 * LIBALLOC_ variable liballoc does not know gets one line naming the closest known one. */

Test(environment, every_text_of_the_shared_grammar)
{
	for (size_t i = 0; i < PARSE_NCASES; i++) {
		const struct parse_case *c = &parse_cases[i];
		int id = c->type == LA_T_SIZE   ? LA_TUNABLE_trim_threshold
		         : c->type == LA_T_MS   ? LA_TUNABLE_decay_ms
		         : c->type == LA_T_BOOL ? LA_TUNABLE_madvise_throttle
		                                : LA_TUNABLE_mmap_max;
		int64_t v = -12345;
		char reason[LA_REASON_MAX] = "";
		int st = tun_parse(id, c->text, &v, reason, sizeof(reason));
		if (c->status == LA_PARSE_OK) {
			cr_assert_eq(st, LA_ST_OK, "'%s': %s", c->text, reason);
			cr_assert_eq(v, c->value, "'%s': %lld", c->text, (long long)v);
		} else {
			cr_assert_neq(st, LA_ST_OK, "'%s' accepted", c->text);
			cr_assert_eq(v, -12345, "'%s': output untouched", c->text);
			cr_assert(strncmp(reason, tun_defs[id].name, strlen(tun_defs[id].name)) ==
			                  0,
			          "'%s': %s", c->text, reason);
		}
	}
}

extern char **environ;

/* Read env as the environment into the tunables; the lines printed on stderr in err. */
static void read_env(char **env, char *err, size_t cap)
{
	char path[] = "/tmp/liballoc-env.XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	int saved = dup(2);
	dup2(fd, 2);
	char **was = environ;
	environ = env;
	tun_init_from_env();
	environ = was;
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fd, err, cap - 1, 0);
	err[n > 0 ? n : 0] = 0;
	close(fd);
}

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

Test(environment, unknown_variables_get_one_line_naming_the_closest)
{
	char *env[] = {"LIBALLOC_DECAY=5s",
	               "LIBALLOC_MMAP_TRESHOLD=1M",
	               "LIBALLOC_RUNDIR=/x",
	               "LIBALLOC_CONTROLL=0",
	               "LIBALLOC_decay_ms=7",
	               "LIBALLOC_SO=/x/liballoc.so",
	               "LIBALLOC_DECAY_MS=1.5s",
	               "LIBALLOC_RUN_DIR=/nonexistent",
	               "LIBALLOCDECAY_MS=3",
	               "LIBALLOC_TCACHE_MAX=1",
	               "HOME=/root",
	               NULL};
	char err[4096];
	int64_t threshold = TUN(mmap_threshold);
	read_env(env, err, sizeof(err));
	cr_assert_eq(lines(err), 6, "%s", err);
	cr_assert(strstr(err, "LIBALLOC_TCACHE_MAX is not a liballoc setting and is ignored; did "
	                      "you mean LIBALLOC_TCACHE_MAX_BYTES?\n"),
	          "%s", err);
	cr_assert(strstr(err, "liballoc: LIBALLOC_DECAY is not a liballoc setting and is ignored; "
	                      "did you mean LIBALLOC_DECAY_MS?\n"),
	          "%s", err);
	cr_assert(strstr(err, "LIBALLOC_MMAP_TRESHOLD is not a liballoc setting and is ignored; "
	                      "did you mean LIBALLOC_MMAP_THRESHOLD?\n"),
	          "%s", err);
	cr_assert(strstr(err, "LIBALLOC_RUNDIR is not a liballoc setting and is ignored; did you "
	                      "mean LIBALLOC_RUN_DIR?\n"),
	          "%s", err);
	cr_assert(strstr(err, "LIBALLOC_CONTROLL is not a liballoc setting and is ignored; did you "
	                      "mean LIBALLOC_CONTROL?\n"),
	          "%s", err);
	cr_assert(strstr(err, "LIBALLOC_decay_ms is not a liballoc setting and is ignored; did you "
	                      "mean LIBALLOC_DECAY_MS?\n"),
	          "%s", err);
	cr_assert_eq(TUN(decay_ms), 1500, "the known one is read");
	cr_assert_eq(tun_source[LA_TUNABLE_decay_ms], LA_SRC_environment);
	cr_assert_eq(TUN(mmap_threshold), threshold, "a misspelled one sets nothing");
}

Test(environment, known_variables_alone_print_nothing)
{
	char *env[] = {"LIBALLOC_TRIM_THRESHOLD= 1.5 GiB ", "LIBALLOC_MADVISE_THROTTLE=off",
	               "LIBALLOC_CONTROL=yes", "LIBALLOC_SO=x", NULL};
	char err[1024];
	read_env(env, err, sizeof(err));
	cr_assert_str_eq(err, "");
	cr_assert_eq(TUN(trim_threshold), 1610612736LL);
	cr_assert_eq(TUN(madvise_throttle), 0);
}

/* A value the grammar reads but outside the tunable's range (tun_set refuses it), or too
 * large for the grammar: one line each naming the variable, the value and the range; the
 * tunable keeps its value and its source; the good variable beside them is read. */
Test(environment, a_value_out_of_range_is_ignored_with_its_range)
{
	char *env[] = {"LIBALLOC_MMAP_THRESHOLD=64M", "LIBALLOC_ARENA_MAX=0",
	               "LIBALLOC_DECAY_MS=2h",        "LIBALLOC_TOP_PAD=9000P",
	               "LIBALLOC_MMAP_MAX=42",        NULL};
	static const char *const want[] = {
	        "liballoc: LIBALLOC_MMAP_THRESHOLD=64M: ignored: mmap_threshold: out of range "
	        "(valid: 0..32M bytes)\n",
	        "liballoc: LIBALLOC_ARENA_MAX=0: ignored: arena_max: out of range (valid: "
	        "1..1024)\n",
	        "liballoc: LIBALLOC_DECAY_MS=2h: ignored: decay_ms: out of range (valid: "
	        "0..3600000 ms)\n",
	        "liballoc: LIBALLOC_TOP_PAD=9000P: ignored: top_pad: too large (valid: 0..1T "
	        "bytes)\n"};
	static const int ids[] = {LA_TUNABLE_mmap_threshold, LA_TUNABLE_arena_max,
	                          LA_TUNABLE_decay_ms, LA_TUNABLE_top_pad};
	int64_t was[4];
	uint32_t src[4];
	for (int i = 0; i < 4; i++) {
		was[i] = tun_values[ids[i]];
		src[i] = tun_source[ids[i]];
	}
	char err[2048];
	read_env(env, err, sizeof(err));
	cr_assert_eq(lines(err), 4, "%s", err);
	for (int i = 0; i < 4; i++) {
		cr_assert(strstr(err, want[i]), "no line '%s' in:\n%s", want[i], err);
		cr_assert_eq(tun_values[ids[i]], was[i], "%s: %lld -> %lld", tun_defs[ids[i]].name,
		             (long long)was[i], (long long)tun_values[ids[i]]);
		cr_assert_eq(tun_source[ids[i]], src[i], "%s's source changed",
		             tun_defs[ids[i]].name);
	}
	cr_assert_eq(TUN(mmap_max), 42, "the good variable beside them is read");
	cr_assert_eq(tun_source[LA_TUNABLE_mmap_max], LA_SRC_environment);
}

/* Every tunable of the table (not only the four above): a text that is not its kind, and
 * the values just past each end of its range, get one line each naming the variable and
 * the tunable, and change neither value nor source. */
Test(environment, every_tunable_refuses_a_bad_text_and_values_past_its_range)
{
	static char text[LA_NTUNABLES][96];
	int64_t was[LA_NTUNABLES];
	uint32_t src[LA_NTUNABLES];
	int total = 0;
	for (int id = 0; id < LA_NTUNABLES; id++) {
		was[id] = tun_values[id];
		src[id] = tun_source[id];
	}
	/* a variable is read once (the first of its name): one pass per kind of bad value */
	for (int pass = 0; pass < 3; pass++) {
		char *env[LA_NTUNABLES + 1];
		int of[LA_NTUNABLES];
		int n = 0;
		for (int id = 0; id < LA_NTUNABLES; id++) {
			const struct tun_def *d = &tun_defs[id];
			char up[64];
			size_t k = 0;
			for (; d->name[k] && k < sizeof(up) - 1; k++)
				up[k] = (char)(d->name[k] >= 'a' && d->name[k] <= 'z'
				                       ? d->name[k] - 32
				                       : d->name[k]);
			up[k] = 0;
			if (pass == 0)
				snprintf(text[n], sizeof(text[n]), "LIBALLOC_%s=%s", up,
				         d->type == LA_T_BOOL ? "2" : "12q");
			else if (pass == 1 && d->max < INT64_MAX && d->type != LA_T_BOOL)
				snprintf(text[n], sizeof(text[n]), "LIBALLOC_%s=%lld", up,
				         (long long)d->max + 1);
			else if (pass == 2 && d->min > 0 && d->type != LA_T_BOOL)
				snprintf(text[n], sizeof(text[n]), "LIBALLOC_%s=%lld", up,
				         (long long)d->min - 1);
			else
				continue;
			of[n] = id;
			env[n] = text[n];
			n++;
		}
		env[n] = NULL;
		char err[8192];
		read_env(env, err, sizeof(err));
		cr_assert_eq(lines(err), n, "pass %d: %d variables, %d lines:\n%s", pass, n,
		             lines(err), err);
		for (int i = 0; i < n; i++) {
			char want[160];
			snprintf(want, sizeof(want), "liballoc: %s: ignored: %s: %s", env[i],
			         tun_defs[of[i]].name,
			         pass ? "out of range (valid: " : "expected a");
			cr_assert(strstr(err, want), "no line '%s' in:\n%s", want, err);
		}
		for (int id = 0; id < LA_NTUNABLES; id++) {
			cr_assert_eq(tun_values[id], was[id], "%s: %lld -> %lld", tun_defs[id].name,
			             (long long)was[id], (long long)tun_values[id]);
			cr_assert_eq(tun_source[id], src[id], "%s's source changed",
			             tun_defs[id].name);
		}
		total += n;
	}
	cr_assert_gt(total, LA_NTUNABLES, "%d refusals: none past a range", total);
}

/* liballoc_set (liballoc.h), a program's own call: an unknown name and a value out of range
 * return -1 with the reason, and change nothing (value and source); a NULL reason is
 * allowed; a good value returns 0 and counts as the program's. */
Test(tunables, liballoc_set_refuses_with_a_reason_and_changes_nothing)
{
	char reason[LA_REASON_MAX] = "";
	int64_t was = TUN(mmap_threshold);
	uint32_t src = tun_source[LA_TUNABLE_mmap_threshold];
	cr_assert_eq(liballoc_set("mmap_treshold", 1 << 20, reason, sizeof(reason)), -1);
	cr_assert_str_eq(reason, "unknown tunable");
	cr_assert_eq(liballoc_set("mmap_threshold", 64LL << 20, reason, sizeof(reason)), -1);
	cr_assert_str_eq(reason, "mmap_threshold: out of range (valid: 0..32M bytes)");
	cr_assert_eq(liballoc_set("mmap_threshold", -1, NULL, 0), -1);
	cr_assert_eq(liballoc_set("nope", 1, NULL, 0), -1);
	cr_assert_eq(TUN(mmap_threshold), was);
	cr_assert_eq(tun_source[LA_TUNABLE_mmap_threshold], src);
	cr_assert_eq(liballoc_set("mmap_threshold", 1 << 20, reason, sizeof(reason)), 0, "%s",
	             reason);
	cr_assert_eq(TUN(mmap_threshold), 1 << 20);
	cr_assert_eq(tun_source[LA_TUNABLE_mmap_threshold], LA_SRC_api);
}

Test(environment, control_is_a_boolean)
{
	static const struct {
		const char *text;
		bool on, warned;
	} cases[] = {{"0", false, false},   {"off", false, false},   {"false", false, false},
	             {"No", false, false},  {" OFF ", false, false}, {"1", true, false},
	             {"on", true, false},   {"yes", true, false},    {"TRUE", true, false},
	             {"maybe", true, true}, {"", true, true},        {"2", true, true}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char var[64] = "LIBALLOC_CONTROL=";
		strcat(var, cases[i].text);
		char *env[] = {var, NULL}, err[512];
		read_env(env, err, sizeof(err));
		char **was = environ;
		environ = env;
		bool on = tun_control_enabled();
		environ = was;
		cr_assert_eq(on, cases[i].on, "'%s'", cases[i].text);
		if (cases[i].warned)
			cr_assert(lines(err) == 1 && strstr(err, var) &&
			                  strstr(err, "not a boolean") &&
			                  strstr(err, "the control thread runs"),
			          "'%s': %s", cases[i].text, err);
		else
			cr_assert_str_eq(err, "", "'%s'", cases[i].text);
	}
	char *none[] = {NULL};
	char **was = environ;
	environ = none;
	cr_assert(tun_control_enabled(), "unset: on");
	environ = was;
}

/* The copy of the environment is made again on each read: a variable gone since the last
 * copy, and one whose entry was longer then, leave nothing behind (the fuzzer found a
 * variable of an earlier, longer copy still read after the copy was made again). */
Test(environment, a_new_copy_forgets_the_old_one)
{
	char *first[] = {"LIBALLOC_RUN_DIR=/a/long/directory/name/that/outlasts/the/next",
	                 "LIBALLOC_DECAY_MS=7", NULL};
	char *second[] = {"LIBALLOC_SO=/x", NULL};
	char err[1024];
	read_env(first, err, sizeof(err));
	cr_assert_str_eq(tun_getenv("LIBALLOC_DECAY_MS"), "7");
	read_env(second, err, sizeof(err));
	cr_assert_null(tun_getenv("LIBALLOC_DECAY_MS"), "a variable of the old copy is read");
	cr_assert_null(tun_getenv("LIBALLOC_RUN_DIR"), "a variable of the old copy is read");
	cr_assert_str_eq(tun_getenv("LIBALLOC_SO"), "/x");
}
