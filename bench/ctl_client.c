/* ctl_client.c — measures the control path through allocctld (issues 5 and 6) over the
 * protocol of proto/ctl.proto, on one connection, so the figures exclude process start-up.
 *   ctl_client SOCKET set PID NAME VALUE COUNT   COUNT `set` round trips: p50/p99/max (ms)
 *   ctl_client SOCKET trim PID                   one `trim`: wall time, bytes released
 *   ctl_client SOCKET list                       processes the daemon lists now
 *   ctl_client SOCKET setall NAME VALUE          one `set` on every process: time, ok count
 * prints one key=value line; exit status 1 when the daemon refuses or is unreachable. */
#include "benchlib.h"
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CTL_TIMEOUT_MS 10000

static Ctl__Reply *ctl_roundtrip(int fd, Ctl__Envelope *env)
{
	Ctl__Reply *r = wire_call(fd, env, CTL_TIMEOUT_MS);
	if (!r) {
		fprintf(stderr, "ctl_client: round trip failed: %s\n", strerror(errno));
		return NULL;
	}
	if (r->code != CTL__ERROR_CODE__OK) {
		fprintf(stderr, "ctl_client: daemon replied %d: %s\n", (int)r->code,
		        r->message ? r->message : "");
		ctl__reply__free_unpacked(r, NULL);
		return NULL;
	}
	return r;
}

/* Send one set request; returns the number of per-process results with code OK, or -1. */
static long ctl_set(int fd, Ctl__Target *target, const char *name, const char *value,
                    size_t *nresults)
{
	Ctl__SetRequest__Assignment a = CTL__SET_REQUEST__ASSIGNMENT__INIT;
	Ctl__SetRequest__Assignment *ap = &a;
	Ctl__SetRequest req = CTL__SET_REQUEST__INIT;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	a.name = (char *)name;
	a.value = (char *)value;
	req.target = target;
	req.n_assignments = 1;
	req.assignments = &ap;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_SET;
	env.set = &req;
	Ctl__Reply *r = ctl_roundtrip(fd, &env);
	if (!r)
		return -1;
	long ok = 0;
	for (size_t i = 0; i < r->n_results; i++)
		if (r->results[i]->code == CTL__ERROR_CODE__OK)
			ok++;
		else if (i == 0)
			fprintf(stderr, "ctl_client: set on %d: %s\n", (int)r->results[i]->pid,
			        r->results[i]->message ? r->results[i]->message : "failed");
	*nresults = r->n_results;
	ctl__reply__free_unpacked(r, NULL);
	return ok;
}

static int ctl_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int ctl_cmd_set(int fd, int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: %s SOCKET set PID NAME VALUE COUNT\n", argv[0]);
		return 2;
	}
	Ctl__Target target = CTL__TARGET__INIT;
	target.has_pid = 1;
	target.pid = (int32_t)bench_arg(argc, argv, 3, 1, "SOCKET set PID NAME VALUE COUNT");
	long count = bench_arg(argc, argv, 6, 100, "SOCKET set PID NAME VALUE COUNT");
	double *ms = calloc((size_t)count, sizeof(double));
	if (!ms)
		bench_die("calloc");
	for (long i = 0; i < count; i++) {
		size_t n = 0;
		double t0 = bench_now();
		long ok = ctl_set(fd, &target, argv[4], argv[5], &n);
		ms[i] = (bench_now() - t0) * 1e3;
		if (ok != 1 || n != 1) {
			fprintf(stderr, "ctl_client: set %s=%s refused\n", argv[4], argv[5]);
			free(ms);
			return 1;
		}
	}
	qsort(ms, (size_t)count, sizeof(double), ctl_cmp_double);
	printf("p50_ms=%.3f p99_ms=%.3f max_ms=%.3f count=%ld\n", ms[count / 2],
	       ms[(size_t)((double)count * 0.99) < (size_t)count ? (size_t)((double)count * 0.99)
	                                                         : (size_t)count - 1],
	       ms[count - 1], count);
	free(ms);
	return 0;
}

static int ctl_cmd_trim(int fd, int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s SOCKET trim PID\n", argv[0]);
		return 2;
	}
	Ctl__Target target = CTL__TARGET__INIT;
	Ctl__TrimRequest req = CTL__TRIM_REQUEST__INIT;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	target.has_pid = 1;
	target.pid = (int32_t)bench_arg(argc, argv, 3, 1, "SOCKET trim PID");
	req.target = &target;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_TRIM;
	env.trim = &req;
	double t0 = bench_now();
	Ctl__Reply *r = ctl_roundtrip(fd, &env);
	double ms = (bench_now() - t0) * 1e3;
	if (!r)
		return 1;
	if (r->n_results != 1 || r->results[0]->code != CTL__ERROR_CODE__OK) {
		fprintf(stderr, "ctl_client: trim failed: %s\n",
		        r->n_results && r->results[0]->message ? r->results[0]->message : "");
		ctl__reply__free_unpacked(r, NULL);
		return 1;
	}
	Ctl__CommandResult *c = r->results[0];
	printf("wall_ms=%.3f duration_ms=%.3f bytes_released=%llu madvise=%llu munmap=%llu\n", ms,
	       (double)c->duration_ns / 1e6, (unsigned long long)c->bytes_released,
	       (unsigned long long)c->madvise_calls, (unsigned long long)c->munmap_calls);
	ctl__reply__free_unpacked(r, NULL);
	return 0;
}

static int ctl_cmd_list(int fd)
{
	Ctl__ListRequest req = CTL__LIST_REQUEST__INIT;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
	env.list = &req;
	Ctl__Reply *r = ctl_roundtrip(fd, &env);
	if (!r)
		return 1;
	printf("processes=%zu\n", r->list ? r->list->n_processes : (size_t)0);
	ctl__reply__free_unpacked(r, NULL);
	return 0;
}

static int ctl_cmd_setall(int fd, int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s SOCKET setall NAME VALUE\n", argv[0]);
		return 2;
	}
	Ctl__Target target = CTL__TARGET__INIT;
	target.has_all = 1;
	target.all = 1;
	size_t n = 0;
	double t0 = bench_now();
	long ok = ctl_set(fd, &target, argv[3], argv[4], &n);
	double ms = (bench_now() - t0) * 1e3;
	if (ok < 0)
		return 1;
	printf("wall_ms=%.3f results=%zu ok=%ld\n", ms, n, ok);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s SOCKET set|trim|list|setall ...\n", argv[0]);
		return 2;
	}
	int fd = wire_connect(argv[1]);
	if (fd < 0) {
		fprintf(stderr, "ctl_client: cannot connect to %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	int rc;
	if (strcmp(argv[2], "set") == 0)
		rc = ctl_cmd_set(fd, argc, argv);
	else if (strcmp(argv[2], "trim") == 0)
		rc = ctl_cmd_trim(fd, argc, argv);
	else if (strcmp(argv[2], "list") == 0)
		rc = ctl_cmd_list(fd);
	else if (strcmp(argv[2], "setall") == 0)
		rc = ctl_cmd_setall(fd, argc, argv);
	else {
		fprintf(stderr, "ctl_client: unknown command '%s' (set, trim, list, setall)\n",
		        argv[2]);
		rc = 2;
	}
	close(fd);
	return rc;
}
