/* ctlclient.c — a minimal client of allocctld for the test suites: one request per run,
 * the reply printed as greppable "key=value" lines; raw-* commands send malformed input on
 * purpose and report whether an error reply came back and whether the connection closed.
 * Not the operator's tool (that is allocctl in cli/): no human formatting here.
 *
 * usage: ctlclient [--socket PATH] [--timeout MS] COMMAND [ARGS]
 *   version | list | stats PID | get PID [NAME...] | set TARGET NAME=VALUE...
 *   trim TARGET [PAD] | release TARGET | flush TARGET     (TARGET: PID, exe=NAME or all)
 *   raw-version N | raw-empty | raw-hex HEX | raw-len N | raw-partial MS | raw-garbage N
 *   latency PID N     N set requests on one connection: prints p50/p99/max round trip
 *   list-stream       list in one request, the pages following unasked (as allocctl ps)
 *   list-latency N    N whole lists (all pages, streamed) on one connection: p50/p99/max
 *   flood PID N SECS  pipeline up to N stats requests and never read, until the daemon
 *                     closes the connection (prints closed_by_daemon=1) or SECS pass
 *   hold N SECS       hold N idle connections for SECS
 * exit: 0 a reply was printed, 3 closed without a reply, 1 error, 2 usage */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctl.pb-c.h"
#include "wire.h"

static int timeout_ms = 5000;

static const char *code_name(Ctl__ErrorCode c)
{
	const ProtobufCEnumValue *v =
	        protobuf_c_enum_descriptor_get_value(&ctl__error_code__descriptor, c);
	return v ? v->name : "?";
}

static void print_tunable(const char *prefix, int pid, const Ctl__Tunable *t)
{
	printf("%s pid=%d name=%s value=%lld", prefix, pid, t->name, (long long)t->value);
	if (t->has_min)
		printf(" min=%lld max=%lld", (long long)t->min, (long long)t->max);
	if (t->has_explicitly_set)
		printf(" explicit=%d", t->explicitly_set);
	if (t->source)
		printf(" source=%s", t->source);
	printf("\n");
}

static void print_reply(const Ctl__Reply *r)
{
	printf("code=%s\n", code_name(r->code));
	if (r->message)
		printf("message=%s\n", r->message);
	printf("protocol=%u\n", r->protocol_version);
	if (r->has_id)
		printf("id=%llu\n", (unsigned long long)r->id);
	if (r->version)
		printf("daemon_version=%s protocol_version=%u abi=%u\n", r->version->daemon_version,
		       r->version->protocol_version, r->version->segment_abi_version);
	if (r->list)
		for (size_t i = 0; i < r->list->n_processes; i++) {
			const Ctl__ProcessInfo *p = r->list->processes[i];
			const Ctl__Memory *m = p->memory;
			printf("process pid=%d name=%s exe=%s uid=%u owner=%u arenas=%u "
			       "threads=%llu alloc_threads=%llu in_use=%llu cached=%llu "
			       "free_resident=%llu reclaimable=%llu address_space=%llu rss=%llu "
			       "control=%s nspid=%d pidns=%llu%s\n",
			       p->pid, p->name ? p->name : "-", p->exe, p->uid,
			       p->has_owner_uid ? p->owner_uid : p->uid, p->arenas,
			       (unsigned long long)p->threads,
			       (unsigned long long)p->allocator_threads,
			       (unsigned long long)(m ? m->in_use_bytes : 0),
			       (unsigned long long)(m ? m->cached_bytes : 0),
			       (unsigned long long)(m ? m->free_resident_bytes : 0),
			       (unsigned long long)(m ? m->reclaimable_bytes : 0),
			       (unsigned long long)(m ? m->address_space_bytes : 0),
			       (unsigned long long)p->rss_bytes, p->control ? p->control : "?",
			       p->has_ns_pid ? p->ns_pid : p->pid,
			       (unsigned long long)p->pid_namespace,
			       p->unreadable ? " unreadable" : "");
		}
	if (r->stats) {
		const Ctl__StatsReply *s = r->stats;
		printf("process pid=%d name=%s exe=%s arenas=%u\n", s->process->pid,
		       s->process->name ? s->process->name : "-", s->process->exe,
		       s->process->arenas);
		for (size_t i = 0; i < s->n_totals; i++)
			printf("total %s=%llu\n", s->totals[i]->name,
			       (unsigned long long)s->totals[i]->value);
		for (size_t i = 0; i < s->n_arenas; i++)
			for (size_t k = 0; k < s->arenas[i]->n_counters; k++)
				printf("arena %u %s=%llu\n", s->arenas[i]->index,
				       s->arenas[i]->counters[k]->name,
				       (unsigned long long)s->arenas[i]->counters[k]->value);
		for (size_t i = 0; i < s->n_classes; i++)
			for (size_t k = 0; k < s->classes[i]->n_counters; k++)
				printf("class %llu %s=%llu\n",
				       (unsigned long long)s->classes[i]->size,
				       s->classes[i]->counters[k]->name,
				       (unsigned long long)s->classes[i]->counters[k]->value);
		for (size_t i = 0; i < s->n_tunables; i++)
			print_tunable("tunable", s->process->pid, s->tunables[i]);
	}
	for (size_t i = 0; i < r->n_results; i++) {
		const Ctl__CommandResult *c = r->results[i];
		printf("result pid=%d exe=%s code=%s released=%llu mmap=%llu munmap=%llu "
		       "madvise=%llu mprotect=%llu message=%s\n",
		       c->pid, c->exe ? c->exe : "", code_name(c->code),
		       (unsigned long long)c->bytes_released, (unsigned long long)c->mmap_calls,
		       (unsigned long long)c->munmap_calls, (unsigned long long)c->madvise_calls,
		       (unsigned long long)c->mprotect_calls, c->message ? c->message : "");
		for (size_t k = 0; k < c->n_tunables; k++)
			print_tunable("value", c->pid, c->tunables[k]);
	}
	fflush(stdout);
}

/* After a raw send: print the reply if one comes, then whether the peer closed. */
static int await(int fd)
{
	int rc = 3;
	uint8_t *buf;
	uint32_t len;
	if (wire_recv(fd, &buf, &len, timeout_ms) == 0) {
		Ctl__Reply *r = ctl__reply__unpack(NULL, len, buf);
		free(buf);
		if (r) {
			print_reply(r);
			ctl__reply__free_unpacked(r, NULL);
			rc = 0;
		} else {
			printf("undecodable reply\n");
			rc = 1;
		}
	} else {
		printf("no reply (%s)\n", strerror(errno));
	}
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;
	if (poll(&p, 1, 1000) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0)
		printf("closed\n");
	else
		printf("open\n");
	return rc;
}

static int send_raw(int fd, const void *buf, size_t len)
{
	if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) {
		perror("ctlclient: send");
		return -1;
	}
	return 0;
}

static int parse_target(const char *s, Ctl__Target *t)
{
	if (!strcmp(s, "all")) {
		t->has_all = true;
		t->all = true;
	} else if (!strncmp(s, "exe=", 4)) {
		t->exe = (char *)s + 4;
	} else {
		t->has_pid = true;
		t->pid = atoi(s);
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: see the comment at the top of ctld/tools/ctlclient.c\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	int i = 1;
	for (; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
		if (i + 1 >= argc)
			return usage();
		if (!strcmp(argv[i], "--socket"))
			sock = argv[i + 1];
		else if (!strcmp(argv[i], "--timeout"))
			timeout_ms = atoi(argv[i + 1]);
		else
			return usage();
	}
	if (i >= argc)
		return usage();
	const char *cmd = argv[i++];
	int nargs = argc - i;
	char **args = argv + i;
	int fd = wire_connect(sock);
	if (fd < 0) {
		fprintf(stderr, "ctlclient: cannot connect to %s: %s\n", wire_socket_path(sock),
		        strerror(errno));
		return 1;
	}
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.has_id = true;
	env.id = 42;
	Ctl__VersionRequest vr = CTL__VERSION_REQUEST__INIT;
	Ctl__ListRequest lr = CTL__LIST_REQUEST__INIT;
	Ctl__StatsRequest sr = CTL__STATS_REQUEST__INIT;
	Ctl__GetRequest gr = CTL__GET_REQUEST__INIT;
	Ctl__SetRequest setr = CTL__SET_REQUEST__INIT;
	Ctl__TrimRequest tr = CTL__TRIM_REQUEST__INIT;
	Ctl__ReleaseRequest rr = CTL__RELEASE_REQUEST__INIT;
	Ctl__FlushRequest fr = CTL__FLUSH_REQUEST__INIT;
	Ctl__Target target = CTL__TARGET__INIT;
	Ctl__SetRequest__Assignment as[32], *asp[32];

	if (!strcmp(cmd, "version")) {
		env.payload_case = CTL__ENVELOPE__PAYLOAD_VERSION;
		env.version = &vr;
	} else if (!strcmp(cmd, "list") || !strcmp(cmd, "list-stream")) {
		/* every page (pid order); one reply's lines per page, "pages=N" at the end;
		 * list-stream: one request, the pages following unasked (ListRequest.stream) */
		int pages = 0;
		bool streamed = false;
		lr.has_stream = lr.stream = !strcmp(cmd, "list-stream");
		for (;;) {
			env.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
			env.list = &lr;
			Ctl__Reply *r = streamed ? wire_reply(fd, timeout_ms)
			                         : wire_call(fd, &env, timeout_ms);
			if (!r) {
				fprintf(stderr, "ctlclient: list: %s\n", strerror(errno));
				return errno == ECONNRESET ? 3 : 1;
			}
			print_reply(r);
			pages++;
			bool more = r->list && r->list->has_next_pid;
			streamed = more && r->list->streamed;
			if (more) {
				lr.has_after_pid = true;
				lr.after_pid = r->list->next_pid;
			}
			ctl__reply__free_unpacked(r, NULL);
			if (!more)
				break;
		}
		printf("pages=%d\n", pages);
		return 0;
	} else if (!strcmp(cmd, "stats") && nargs == 1) {
		env.payload_case = CTL__ENVELOPE__PAYLOAD_STATS;
		sr.pid = atoi(args[0]);
		env.stats = &sr;
	} else if (!strcmp(cmd, "get") && nargs >= 1) {
		env.payload_case = CTL__ENVELOPE__PAYLOAD_GET;
		gr.pid = atoi(args[0]);
		gr.n_names = (size_t)nargs - 1;
		gr.names = args + 1;
		env.get = &gr;
	} else if (!strcmp(cmd, "set") && nargs >= 2 && nargs <= 33) {
		parse_target(args[0], &target);
		for (int k = 1; k < nargs; k++) {
			ctl__set_request__assignment__init(&as[k - 1]);
			char *eq = strchr(args[k], '=');
			if (!eq)
				return usage();
			*eq = 0;
			as[k - 1].name = args[k];
			as[k - 1].value = eq + 1;
			asp[k - 1] = &as[k - 1];
		}
		setr.target = &target;
		setr.n_assignments = (size_t)nargs - 1;
		setr.assignments = asp;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_SET;
		env.set = &setr;
	} else if (!strcmp(cmd, "trim") && nargs >= 1) {
		parse_target(args[0], &target);
		tr.target = &target;
		if (nargs > 1) {
			tr.has_pad = true;
			tr.pad = strtoull(args[1], NULL, 0);
		}
		env.payload_case = CTL__ENVELOPE__PAYLOAD_TRIM;
		env.trim = &tr;
	} else if (!strcmp(cmd, "release") && nargs == 1) {
		parse_target(args[0], &target);
		rr.target = &target;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_RELEASE;
		env.release = &rr;
	} else if (!strcmp(cmd, "flush") && nargs == 1) {
		parse_target(args[0], &target);
		fr.target = &target;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_FLUSH;
		env.flush = &fr;
	} else if (!strcmp(cmd, "latency") && nargs == 2) {
		int n = atoi(args[1]);
		if (n <= 0 || n > 1000000)
			return usage();
		uint64_t *us = calloc((size_t)n, sizeof(*us));
		char val[32];
		ctl__set_request__assignment__init(&as[0]);
		as[0].name = "top_pad";
		as[0].value = val;
		asp[0] = &as[0];
		target.has_pid = true;
		target.pid = atoi(args[0]);
		setr.target = &target;
		setr.n_assignments = 1;
		setr.assignments = asp;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_SET;
		env.set = &setr;
		for (int k = 0; us && k < n; k++) {
			snprintf(val, sizeof(val), "%d", 4096 * (k % 64 + 1));
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			Ctl__Reply *r = wire_call(fd, &env, timeout_ms);
			clock_gettime(CLOCK_MONOTONIC, &b);
			if (!r || r->code || r->n_results != 1 || r->results[0]->code) {
				fprintf(stderr, "ctlclient: latency: request %d failed\n", k);
				return 1;
			}
			ctl__reply__free_unpacked(r, NULL);
			us[k] = (uint64_t)((b.tv_sec - a.tv_sec) * 1000000 +
			                   (b.tv_nsec - a.tv_nsec) / 1000);
		}
		if (!us)
			return 1;
		for (int x = 1; x < n; x++) /* insertion sort: n is small */
			for (int y = x; y > 0 && us[y - 1] > us[y]; y--) {
				uint64_t t = us[y];
				us[y] = us[y - 1];
				us[y - 1] = t;
			}
		printf("set round trip over %d requests: p50 %llu us, p99 %llu us, max %llu us\n",
		       n, (unsigned long long)us[n / 2], (unsigned long long)us[(n * 99) / 100],
		       (unsigned long long)us[n - 1]);
		free(us);
		return 0;
	} else if (!strcmp(cmd, "list-latency") && nargs == 1) {
		/* N whole lists (every page) on this connection: the daemon's side of ps */
		int n = atoi(args[0]);
		if (n <= 0 || n > 100000)
			return usage();
		uint64_t *us = calloc((size_t)n, sizeof(*us));
		for (int k = 0; us && k < n; k++) {
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			lr.has_after_pid = false;
			lr.has_stream = lr.stream = true; /* as allocctl ps asks */
			bool streamed = false;
			for (;;) {
				env.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
				env.list = &lr;
				Ctl__Reply *r = streamed ? wire_reply(fd, timeout_ms)
				                         : wire_call(fd, &env, timeout_ms);
				if (!r || r->code || !r->list) {
					fprintf(stderr, "ctlclient: list-latency: list %d failed\n",
					        k);
					return 1;
				}
				bool more = r->list->has_next_pid;
				streamed = more && r->list->streamed;
				lr.has_after_pid = more;
				lr.after_pid = r->list->next_pid;
				ctl__reply__free_unpacked(r, NULL);
				if (!more)
					break;
			}
			clock_gettime(CLOCK_MONOTONIC, &b);
			us[k] = (uint64_t)((b.tv_sec - a.tv_sec) * 1000000 +
			                   (b.tv_nsec - a.tv_nsec) / 1000);
		}
		if (!us)
			return 1;
		for (int x = 1; x < n; x++)
			for (int y = x; y > 0 && us[y - 1] > us[y]; y--) {
				uint64_t t = us[y];
				us[y] = us[y - 1];
				us[y - 1] = t;
			}
		printf("list_p50_ms=%.1f list_p99_ms=%.1f list_max_ms=%.1f\n", us[n / 2] / 1000.0,
		       us[(n * 99) / 100] / 1000.0, us[n - 1] / 1000.0);
		free(us);
		return 0;
	} else if (!strcmp(cmd, "raw-version") && nargs == 1) {
		env.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
		env.list = &lr;
		env.protocol_version = (uint32_t)atoi(args[0]);
		if (wire_send(fd, &env.base, timeout_ms) < 0)
			return 1;
		return await(fd);
	} else if (!strcmp(cmd, "raw-empty")) {
		env.protocol_version = CTL_PROTOCOL_VERSION;
		if (wire_send(fd, &env.base, timeout_ms) < 0)
			return 1;
		return await(fd);
	} else if (!strcmp(cmd, "raw-hex") && nargs == 1) {
		size_t n = strlen(args[0]) / 2;
		uint8_t *b = malloc(n + 1);
		for (size_t k = 0; b && k < n; k++)
			sscanf(args[0] + 2 * k, "%2hhx", &b[k]);
		if (!b || send_raw(fd, b, n) < 0)
			return 1;
		free(b);
		return await(fd);
	} else if (!strcmp(cmd, "raw-len") && nargs == 1) {
		uint8_t hdr[4];
		uint32_t n = (uint32_t)strtoul(args[0], NULL, 0);
		hdr[0] = (uint8_t)(n >> 24), hdr[1] = (uint8_t)(n >> 16),
		hdr[2] = (uint8_t)(n >> 8), hdr[3] = (uint8_t)n;
		if (send_raw(fd, hdr, 4) < 0)
			return 1;
		return await(fd);
	} else if (!strcmp(cmd, "raw-partial") && nargs == 1) {
		/* start a 100-byte frame, send 10 bytes of it, then stall */
		uint8_t b[14] = {0, 0, 0, 100, 8, 1};
		if (send_raw(fd, b, sizeof(b)) < 0)
			return 1;
		timeout_ms = atoi(args[0]);
		return await(fd);
	} else if (!strcmp(cmd, "flood") && nargs == 3) {
		/* an attacker that never reads: pipeline up to N stats requests for PID (as fast
		 * as the daemon takes them) and keep the connection, reading nothing, until the
		 * daemon closes it (the peer's close shows as POLLHUP/POLLRDHUP even with replies
		 * unread) or SECONDS pass; prints how many were sent and which came first */
		int pid = atoi(args[0]), secs = atoi(args[2]);
		long n = atol(args[1]), sent = 0;
		sr.pid = pid;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_STATS;
		env.stats = &sr;
		env.protocol_version = CTL_PROTOCOL_VERSION;
		size_t len = ctl__envelope__get_packed_size(&env);
		uint8_t *frame = malloc(len + 4);
		if (!frame)
			return 1;
		wire_frame_header(frame, (uint32_t)len);
		ctl__envelope__pack(&env, frame + 4);
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		bool closed = false;
		long ms = 0;
		size_t off = 0;
		for (;;) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
			if (ms >= secs * 1000L)
				break;
			struct pollfd p = {.fd = fd,
			                   .events = POLLRDHUP | (sent < n ? POLLOUT : 0)};
			if (poll(&p, 1, 100) != 1)
				continue;
			if (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) {
				closed = true;
				break;
			}
			if ((p.revents & POLLOUT) && sent < n) {
				/* a frame the socket took in part is finished first */
				ssize_t w = send(fd, frame + off, len + 4 - off,
				                 MSG_NOSIGNAL | MSG_DONTWAIT);
				if (w > 0 && (off += (size_t)w) == len + 4) {
					off = 0;
					sent++;
				} else if (w < 0 && errno != EAGAIN) {
					closed = errno == EPIPE || errno == ECONNRESET;
					break;
				}
			}
		}
		printf("flood sent=%ld closed_by_daemon=%d after_ms=%ld\n", sent, closed, ms);
		free(frame);
		return 0;
	} else if (!strcmp(cmd, "hold") && nargs == 2) {
		/* hold N more connections (this one included) open, idle, for SECONDS */
		int n = atoi(args[0]), secs = atoi(args[1]), open_ok = 1;
		for (int k = 1; k < n; k++)
			open_ok += wire_connect(sock) >= 0;
		printf("hold open=%d\n", open_ok);
		fflush(stdout);
		sleep((unsigned)secs);
		return 0;
	} else if (!strcmp(cmd, "raw-garbage") && nargs == 1) {
		/* a well-framed body of pseudo-random bytes that is no Envelope */
		uint32_t n = (uint32_t)atoi(args[0]);
		uint8_t *b = malloc(n + 4);
		if (!b)
			return 1;
		wire_frame_header(b, n);
		uint32_t x = 2463534242u;
		for (uint32_t k = 0; k < n; k++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			b[4 + k] =
			        (uint8_t)(x | 0x80); /* continuation bits: never a valid varint */
		}
		if (send_raw(fd, b, n + 4) < 0)
			return 1;
		free(b);
		return await(fd);
	} else {
		return usage();
	}
	Ctl__Reply *r = wire_call(fd, &env, timeout_ms);
	if (!r) {
		fprintf(stderr, "ctlclient: %s: %s\n", cmd, strerror(errno));
		return errno == ECONNRESET ? 3 : 1;
	}
	print_reply(r);
	ctl__reply__free_unpacked(r, NULL);
	close(fd);
	return 0;
}
