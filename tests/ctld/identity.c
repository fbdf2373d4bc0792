/* identity.c — unit tests of a process's identity as the daemon keeps it (proc_identity in
 * ctld/discover.c), read from a stand-in /proc (procfs_set_root) whose files the test
 * writes: a part that could not be read is read again on the next scan, not kept as "?". */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctld.h"
#include "procfs.h"

#define FAKE_PID   4242
#define FAKE_START 987654ull

static char root[64];

static void put(const char *name, const char *text, size_t len)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%d/%s", root, FAKE_PID, name);
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(text, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

/* a process as /proc shows it: everything but exe, which the test adds */
static void fake_process(void)
{
	snprintf(root, sizeof(root), "/tmp/ctld-identity-XXXXXX");
	cr_assert(mkdtemp(root));
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/%d", root, FAKE_PID);
	cr_assert_eq(mkdir(dir, 0755), 0);
	const char stat[] = "4242 (fakesvc) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 "
	                    "987654 1000000 25 0\n";
	const char status[] = "Name:\tfakesvc\nUid:\t1234\t1234\t1234\t1234\n"
	                      "Gid:\t1234\t1234\t1234\t1234\nThreads:\t1\n";
	const char cmdline[] = "/opt/svc/fakesvc\0--port\0"
	                       "8080";
	put("stat", stat, sizeof(stat) - 1);
	put("status", status, sizeof(status) - 1);
	put("comm", "fakesvc\n", 8);
	put("cmdline", cmdline, sizeof(cmdline) - 1);
	procfs_set_root(root);
}

static void remove_fake(void)
{
	procfs_set_root(NULL);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_expect_eq(system(cmd), 0);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The daemon's entry for the fake process, its identity not read yet. */
static void fake_proc(struct proc *p)
{
	memset(p, 0, sizeof(*p));
	p->id.exe = p->id.comm = p->id.name = p->id.cmdline = "";
	p->seg.hdr.pid = FAKE_PID;
	p->seg.hdr.start_time = FAKE_START;
}

TestSuite(identity, .init = fake_process, .fini = remove_fake);

Test(identity, a_part_that_could_not_be_read_is_read_again_on_the_next_scan)
{
	struct proc p;
	fake_proc(&p);
	/* discovered while its exe cannot be read (mid-exec, exiting: readlink fails) */
	cr_assert(proc_identity(&p, true), "the process is there: kept");
	cr_expect_str_eq(proc_exe(&p), "?");
	cr_expect_str_eq(proc_name(&p), "fakesvc");
	cr_expect_str_eq(p.id.cmdline, "/opt/svc/fakesvc --port 8080");
	cr_expect_eq(proc_uid(&p), 1234);
	/* then it can: a scan (not forced; the identity is far younger than the 1 s it is
	 * otherwise kept) reads it again within tens of milliseconds */
	char link[128];
	snprintf(link, sizeof(link), "%s/%d/exe", root, FAKE_PID);
	cr_assert_eq(symlink("/opt/svc/fakesvc", link), 0);
	uint64_t deadline = mono_ms() + 500;
	for (;;) {
		cr_assert(proc_identity(&p, false));
		if (strcmp(proc_exe(&p), "?") || mono_ms() > deadline)
			break;
		usleep(1000);
	}
	cr_expect_str_eq(proc_exe(&p), "/opt/svc/fakesvc",
	                 "a missed exe is read again on the next scan, not kept as \"?\"");
	cr_expect(proc_name_matches(&p, "fakesvc"));
	cr_expect_eq(p.id_retry_ms, 0, "complete: read again only when old");
	free(p.id.buf);
}

Test(identity, a_part_that_stays_unreadable_is_tried_less_and_less_often)
{
	struct proc p;
	fake_proc(&p);
	cr_assert(proc_identity(&p, true));
	cr_expect_eq(p.id_retry_ms, 10);
	/* each read that misses it again doubles the wait, up to 30 s */
	uint32_t want = 10;
	for (int i = 0; i < 14; i++) {
		cr_assert(proc_identity(&p, true));
		want = want * 2 > 30000 ? 30000 : want * 2;
		cr_expect_eq(p.id_retry_ms, want, "read %d: wait %u ms, want %u", i + 2,
		             p.id_retry_ms, want);
	}
	/* not read again before the wait is over */
	uint64_t read_at = p.id_ns;
	cr_assert(proc_identity(&p, false));
	cr_expect_eq(p.id_ns, read_at, "read again before its wait was over");
	free(p.id.buf);
}

Test(identity, a_process_that_is_gone_is_not_kept)
{
	struct proc p;
	fake_proc(&p);
	cr_assert(proc_identity(&p, true));
	cr_expect_str_eq(proc_exe(&p), "?");
	/* it exits while its exe is being retried: the next scan finds it gone */
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/%d'", root, FAKE_PID);
	cr_assert_eq(system(cmd), 0);
	uint64_t deadline = mono_ms() + 500;
	bool kept;
	while ((kept = proc_identity(&p, false)) && mono_ms() <= deadline)
		usleep(1000);
	cr_expect_not(kept, "a process gone while its identity was retried must read as gone");
	free(p.id.buf);
}
