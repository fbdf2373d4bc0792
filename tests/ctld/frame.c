/* frame.c — unit tests of the framing the daemon relies on and of its settings parser:
 * frame lengths are checked before allocation (0 and > CTL_MAX_FRAME refused), every
 * truncation or corruption of a valid request fails to decode cleanly, and configuration
 * keys and files are validated with messages naming the key (and file:line). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "pool.h"
#include "wire.h"

Test(frame, lengths_outside_1_to_the_cap_are_refused)
{
	uint8_t h[4];
	uint32_t n = 0;
	struct {
		uint32_t len;
		int ok;
	} cases[] = {{0, 0},
	             {1, 1},
	             {4096, 1},
	             {CTL_MAX_FRAME, 1},
	             {CTL_MAX_FRAME + 1, 0},
	             {0x7fffffff, 0},
	             {0xffffffff, 0}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wire_frame_header(h, cases[i].len);
		int r = wire_frame_length(h, &n);
		cr_assert_eq(r == 0, cases[i].ok, "length %u", cases[i].len);
		if (r == 0)
			cr_assert_eq(n, cases[i].len);
	}
	wire_frame_header(h, 0x01020304);
	cr_assert(h[0] == 1 && h[1] == 2 && h[2] == 3 && h[3] == 4, "big-endian");
}

static size_t pack_set(uint8_t *buf)
{
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	Ctl__SetRequest set = CTL__SET_REQUEST__INIT;
	Ctl__Target t = CTL__TARGET__INIT;
	Ctl__SetRequest__Assignment a = CTL__SET_REQUEST__ASSIGNMENT__INIT, *ap = &a;
	t.exe = "redis-server";
	a.name = "mmap_threshold";
	a.value = "64K";
	set.target = &t;
	set.n_assignments = 1;
	set.assignments = &ap;
	env.protocol_version = CTL_PROTOCOL_VERSION;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_SET;
	env.set = &set;
	return ctl__envelope__pack(&env, buf);
}

Test(frame, every_truncation_of_a_request_fails_cleanly)
{
	uint8_t buf[256];
	size_t n = pack_set(buf);
	Ctl__Envelope *e = ctl__envelope__unpack(NULL, n, buf);
	cr_assert_not_null(e);
	cr_assert_eq(e->payload_case, CTL__ENVELOPE__PAYLOAD_SET);
	cr_assert_str_eq(e->set->assignments[0]->value, "64K");
	ctl__envelope__free_unpacked(e, NULL);
	for (size_t k = 0; k < n; k++) {
		e = ctl__envelope__unpack(NULL, k, buf);
		/* a prefix may happen to be a complete shorter message; it must then be sane */
		if (e) {
			cr_assert_eq(e->protocol_version, CTL_PROTOCOL_VERSION);
			ctl__envelope__free_unpacked(e, NULL);
		}
	}
}

Test(frame, corrupted_requests_never_crash_the_decoder)
{
	uint8_t buf[256], mut[256];
	size_t n = pack_set(buf);
	uint32_t x = 2463534242u;
	for (int i = 0; i < 100000; i++) {
		memcpy(mut, buf, n);
		for (int k = 0; k < 1 + i % 3; k++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			mut[x % n] = (uint8_t)(x >> 8);
		}
		Ctl__Envelope *e = ctl__envelope__unpack(NULL, n, mut);
		if (e)
			ctl__envelope__free_unpacked(e, NULL);
	}
}

Test(frame, blocking_helpers_refuse_oversize_frames_from_a_peer)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	uint8_t h[4];
	wire_frame_header(h, CTL_MAX_FRAME + 1);
	cr_assert_eq(write(sv[0], h, 4), 4);
	uint8_t *buf = NULL;
	uint32_t len;
	cr_assert_eq(wire_recv(sv[1], &buf, &len, 500), -1);
	cr_assert_eq(errno, EMSGSIZE);
	cr_assert_null(buf);
	/* a frame that never completes times out */
	wire_frame_header(h, 10);
	cr_assert_eq(write(sv[0], h, 4), 4);
	cr_assert_eq(wire_recv(sv[1], &buf, &len, 100), -1);
	cr_assert_eq(errno, ETIMEDOUT);
	close(sv[0]);
	close(sv[1]);
}

Test(config, keys_are_validated_with_the_key_named)
{
	struct config c;
	char err[256];
	config_defaults(&c);
	cr_assert_eq(config_set(&c, "rescan_ms", "500", err, sizeof(err)), 0);
	cr_assert_eq(c.rescan_ms, 500);
	cr_assert_eq(config_set(&c, "rescan_ms", "5", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "rescan_ms: bad value '5' (a duration from 50 ms to 3600000 ms: 250, "
	                      "2s, 1.5m, 1h)");
	/* durations, counts and booleans in the one grammar of liballoc_parse.h */
	cr_assert_eq(config_set(&c, "rescan_ms", "1.5s", err, sizeof(err)), 0);
	cr_assert_eq(c.rescan_ms, 1500);
	cr_assert_eq(config_set(&c, "rescan_ms", " 2m ", err, sizeof(err)), 0);
	cr_assert_eq(c.rescan_ms, 120000);
	cr_assert_eq(config_set(&c, "rescan_ms", "2h", err, sizeof(err)), -1);
	cr_assert_eq(c.rescan_ms, 120000, "a refused value leaves the setting alone");
	cr_assert_eq(config_set(&c, "max_connections", "5 ", err, sizeof(err)), 0);
	cr_assert_eq(c.max_connections, 5);
	cr_assert_eq(config_set(&c, "max_connections", "5s", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "metrics_arenas", "Off", err, sizeof(err)), 0);
	cr_assert_eq(c.metrics_arenas, false);
	cr_assert_eq(config_set(&c, "metrics_arenas", "yes", err, sizeof(err)), 0);
	cr_assert_eq(c.metrics_arenas, true);
	cr_assert_eq(config_set(&c, "socket_mode", "0666", err, sizeof(err)), 0);
	cr_assert_eq(c.socket_mode, 0666);
	cr_assert_eq(config_set(&c, "socket_mode", "999", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "socket", "relative.sock", err, sizeof(err)), -1);
	cr_assert(strstr(err, "absolute"));
	cr_assert_eq(config_set(&c, "listen", "localhost", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "listen", "off", err, sizeof(err)), 0);
	cr_assert_eq(config_set(&c, "run_dir", "/a", err, sizeof(err)), 0);
	cr_assert_eq(config_set(&c, "run_dir", "/a", err, sizeof(err)), 0);
	cr_assert_eq(c.nrun_dirs, 1, "duplicates collapse");
	cr_assert_eq(config_set(&c, "metrics_arenas", "maybe", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "nonsense", "1", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "unknown setting 'nonsense'");
}

/* Every kind of refusal config_set makes, in a file, a flag or a reload: the message names
 * the key, the value and what is valid; the configuration is left as it was, byte for
 * byte (a reload that fails keeps the running one whole: main.c on_reload). */
Test(config, every_refusal_names_the_key_and_leaves_the_settings_alone)
{
	static const struct {
		const char *key, *value, *err;
	} bad[] = {
	        {"max_connections", "0",
	         "max_connections: bad value '0' (an integer in [1, 100000])"},
	        {"audit_ring", "15", "audit_ring: bad value '15' (an integer in [16, 1000000])"},
	        {"command_timeout_ms", "11m",
	         "command_timeout_ms: bad value '11m' (a duration from 10 ms to 600000 ms: 250, "
	         "2s, 1.5m, 1h)"},
	        {"check_interval_ms", "50",
	         "check_interval_ms: bad value '50' (a duration from 100 ms to 3600000 ms: 250, "
	         "2s, 1.5m, 1h)"},
	        {"history_sample_ms", "61s",
	         "history_sample_ms: bad value '61s' (a duration from 100 ms to 60000 ms: 250, "
	         "2s, 1.5m, 1h)"},
	        {"remove_stale", "perhaps", "remove_stale: bad value 'perhaps' (true or false)"},
	        {"socket_mode", "0800", "socket_mode: bad value '0800' (octal, e.g. 0600)"},
	        {"socket_mode", "01000", "socket_mode: bad value '01000' (octal, e.g. 0600)"},
	        {"shm_root", "dev/shm", "shm_root: 'dev/shm' must be an absolute path"},
	        {"ready_file", "", "ready_file: '' must be an absolute path"},
	        {"log_level", "loud", "log_level: bad value 'loud' (error, warn, info, debug)"},
	        {"metrics_mode", "uid", "metrics_mode: bad value 'uid' (pid or service)"},
	        {"audit_journal", "maybe", "audit_journal: bad value 'maybe' (auto, on or off)"},
	        {"history_max_bytes", "512K",
	         "history_max_bytes: bad value '512K' (a size from 1M to 1T)"},
	        {"history_max_bytes", "2T",
	         "history_max_bytes: bad value '2T' (a size from 1M to 1T)"},
	        {"history_max_bytes", "lots",
	         "history_max_bytes: bad value 'lots' (a size from 1M to 1T)"},
	        {"provide_uid_dirs", "-1", "provide_uid_dirs: '-1' is not a uid"},
	        {"provide_uid_dirs", "2147483648", "provide_uid_dirs: '2147483648' is not a uid"},
	};
	static struct config c, was;
	char err[256];
	config_defaults(&c);
	was = c;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		cr_assert_eq(config_set(&c, bad[i].key, bad[i].value, err, sizeof(err)), -1,
		             "%s = '%s' accepted", bad[i].key, bad[i].value);
		cr_assert_str_eq(err, bad[i].err);
		cr_assert(!memcmp(&c, &was, sizeof(c)), "%s = '%s' changed the configuration",
		          bad[i].key, bad[i].value);
	}
	/* a value longer than its field */
	char long_text[600];
	memset(long_text, 'h', sizeof(long_text) - 1);
	long_text[sizeof(long_text) - 1] = 0;
	cr_assert_eq(config_set(&c, "http_allowed_hosts", long_text, err, sizeof(err)), -1);
	cr_assert(strstr(err, "http_allowed_hosts: value too long (at most "), "%s", err);
	cr_assert(!memcmp(&c, &was, sizeof(c)));
	cr_assert_eq(config_set(&c, "provide_uid_dirs", long_text, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "provide_uid_dirs: too long");
	/* more directories than it holds: the first CFG_MAX_DIRS stay, the next is refused */
	for (int i = 0; i < CFG_MAX_DIRS; i++) {
		char dir[32];
		snprintf(dir, sizeof(dir), "/run/d%d", i);
		cr_assert_eq(config_set(&c, "run_dir", dir, err, sizeof(err)), 0, "%s", err);
	}
	was = c;
	cr_assert_eq(config_set(&c, "run_dir", "/run/one-more", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "run_dir: at most 32 directories");
	cr_assert(!memcmp(&c, &was, sizeof(c)));
	cr_assert_eq(c.nrun_dirs, CFG_MAX_DIRS);
	cr_assert_str_eq(c.run_dirs[CFG_MAX_DIRS - 1], "/run/d31");
}

Test(config, files_and_overrides_layer_in_order)
{
	char path[] = "/tmp/ctld-conf.XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	const char *text = "# comment\n\n  log_level = debug   # trailing\nrun_dir=/x\n"
	                   "command_timeout_ms = 750\n";
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	struct config c;
	char err[256];
	struct config_override ov[] = {{"command_timeout_ms", "900"}, {"run_dir", "/y"}};
	cr_assert_eq(config_build(&c, path, ov, 2, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.log_level, 3);
	cr_assert_eq(c.command_timeout_ms, 900, "flags win over the file");
	cr_assert_eq(c.nrun_dirs, 2);
	cr_assert_str_eq(c.run_dirs[0], "/x");
	FILE *f = fopen(path, "w");
	fputs("log_level = info\nthis line has no equals\n", f);
	fclose(f);
	cr_assert_eq(config_build(&c, path, NULL, 0, err, sizeof(err)), -1);
	cr_assert(strstr(err, ":2: expected 'key = value'"), "%s", err);
	unlink(path);
	cr_assert_eq(config_build(&c, path, NULL, 0, err, sizeof(err)), -1, "missing file");
}

Test(pool, allocations_are_zeroed_aligned_and_freed_together)
{
	struct pool p;
	pool_init(&p);
	for (int i = 1; i < 3000; i += 7) {
		uint8_t *m = pool_alloc(&p, (size_t)i);
		cr_assert_not_null(m);
		cr_assert_eq((uintptr_t)m % 16, 0);
		for (int k = 0; k < i; k++)
			cr_assert_eq(m[k], 0);
		memset(m, 0xab, (size_t)i);
	}
	cr_assert_not_null(pool_alloc(&p, 3u << 20), "larger than a chunk");
	cr_assert_str_eq(pool_strdup(&p, "abc"), "abc");
	pool_free(&p);
	cr_assert_null(p.head);
}
