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
