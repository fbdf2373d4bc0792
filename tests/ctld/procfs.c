/* procfs.c — unit tests of the daemon's /proc reader (ctld/procfs.c): the parsers on
 * hostile text, and live reads of this process and of a child run through a symlink. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procfs.h"

Test(procfs, stat_fields_follow_the_last_parenthesis)
{
	struct procfs_info pi;
	memset(&pi, 0, sizeof(pi));
	/* a comm with spaces and parentheses must not shift the fields */
	const char *line = "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 7 "
	                   "0 987654 1000000 25 18446744073709551615\n";
	cr_assert_eq(procfs_parse_stat(line, &pi), 0);
	cr_expect_eq(pi.threads, 7);
	cr_expect_eq(pi.start_time, 987654);
	cr_expect_eq(pi.vm_rss, 25 * (uint64_t)sysconf(_SC_PAGESIZE));
	cr_expect_str_eq(pi.stat_comm, "a) b) (c", "comm: between the first '(' and the last ')'");
	cr_expect_eq(procfs_parse_stat("4242 (x\033y) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 "
	                               "20 0 7 0 987654 1000000 25 0\n",
	                               &pi),
	             0);
	cr_expect_str_eq(pi.stat_comm, "x?y", "made printable");
	cr_expect_eq(procfs_parse_stat("4242 (x S 1 2", &pi), -1, "no closing parenthesis");
	cr_expect_eq(procfs_parse_stat("4242 (x) S 1 2 3", &pi), -1, "too few fields");
	cr_expect_eq(procfs_parse_stat(
	                     "1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 zz 18 19 20 21", &pi),
	             -1, "a field that is not a number");
}

Test(procfs, status_fields)
{
	struct procfs_info pi;
	memset(&pi, 0, sizeof(pi));
	const char *st = "Name:\tredis-server\nUmask:\t0022\nState:\tS (sleeping)\n"
	                 "Uid:\t999\t998\t997\t996\nGid:\t10\t11\t12\t13\n"
	                 "NSpid:\t4242\t17\t1\nVmRSS:\t   12288 kB\nRssAnon:\t    8192 kB\n"
	                 "RssFile:\t    4000 kB\nRssShmem:\t      96 kB\nThreads:\t6\n";
	cr_assert_eq(procfs_parse_status(st, &pi), 0);
	cr_expect_eq(pi.uid[0], 999);
	cr_expect_eq(pi.uid[1], 998);
	cr_expect_eq(pi.uid[3], 996);
	cr_expect_eq(pi.gid[2], 12);
	cr_expect_eq(pi.threads, 6);
	cr_expect_eq(pi.vm_rss, 12288ull * 1024);
	cr_expect_eq(pi.rss_anon, 8192ull * 1024);
	cr_expect_eq(pi.rss_file, 4000ull * 1024);
	cr_expect_eq(pi.rss_shmem, 96ull * 1024);
	cr_expect_eq(pi.n_nspid, 3);
	cr_expect_eq(pi.nspid[0], 4242);
	cr_expect_eq(pi.nspid[2], 1);
	cr_expect_eq(procfs_parse_status("Name:\tx\nThreads:\t1\n", &pi), -1, "no Uid line");
}

Test(procfs, cmdline_is_joined_printable_and_cut)
{
	struct procfs_info pi;
	memset(&pi, 0, sizeof(pi));
	const char args[] = "postgres: checkpointer \0\0";
	procfs_parse_cmdline(args, sizeof(args) - 1, &pi);
	cr_expect_str_eq(pi.cmdline, "postgres: checkpointer ");
	const char argv[] = "redis-server\0*:6379\0\x1b[31m\0";
	procfs_parse_cmdline(argv, sizeof(argv) - 1, &pi);
	cr_expect_str_eq(pi.cmdline, "redis-server *:6379 ?[31m");
	char big[4096];
	memset(big, 'a', sizeof(big));
	procfs_parse_cmdline(big, sizeof(big), &pi);
	cr_expect_eq(strlen(pi.cmdline), PROCFS_CMDLINE_MAX - 1);
	cr_expect_str_eq(pi.cmdline + PROCFS_CMDLINE_MAX - 4, "...");
}

static void *idle_thread(void *arg)
{
	pause();
	return arg;
}

Test(procfs, this_process)
{
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, idle_thread, NULL), 0);
	struct procfs_info pi;
	cr_assert_eq(procfs_read(getpid(), PROCFS_IDENTITY, 0, &pi), 0, "%s", strerror(errno));
	cr_expect_eq(pi.have & PROCFS_IDENTITY, (unsigned)PROCFS_IDENTITY);
	cr_expect_eq(pi.uid[0], getuid());
	cr_expect_geq(pi.threads, 2, "the idle thread counts");
	cr_expect_gt(pi.vm_rss, 0);
	cr_expect_geq(pi.vm_rss, pi.rss_anon);
	cr_expect_eq(pi.nspid[0], getpid());
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = 0;
	cr_expect_str_eq(pi.exe, exe);
	cr_expect(procfs_name_matches(&pi, exe), "full path of the binary");
	cr_expect(procfs_name_matches(&pi, procfs_basename(exe)), "basename of the binary");
	cr_expect(procfs_name_matches(&pi, pi.comm), "comm");
	cr_expect_not(procfs_name_matches(&pi, "nosuch"));
	cr_expect_not(procfs_name_matches(&pi, ""));
	struct procfs_info again;
	cr_expect_eq(procfs_read(getpid(), 0, pi.start_time, &again), 0, "same start time");
	cr_expect_eq(procfs_read(getpid(), 0, pi.start_time + 1, &again), -1,
	             "another start time is another process");
	cr_expect_eq(errno, ESRCH);
	/* stat alone (by path, one read): the same figures and the kernel's comm */
	cr_assert_eq(procfs_read(getpid(), PROCFS_STAT, pi.start_time, &again), 0);
	cr_expect_eq(again.have, (unsigned)PROCFS_STAT);
	cr_expect_eq(again.start_time, pi.start_time);
	cr_expect_geq(again.threads, 2);
	cr_expect_gt(again.vm_rss, 0);
	cr_expect_str_eq(again.stat_comm, pi.comm, "stat's comm is /proc/<pid>/comm");
	cr_expect_eq(procfs_read(getpid(), PROCFS_STAT, pi.start_time + 1, &again), -1);
	cr_expect_eq(errno, ESRCH);
	cr_expect_eq(again.have, 0u);
	pthread_cancel(t);
	pthread_join(t, NULL);
}

Test(procfs, a_program_run_through_a_symlink_answers_to_both_names)
{
	char dir[] = "/tmp/procfs-test.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char link[PATH_MAX];
	snprintf(link, sizeof(link), "%s/my-sleeper-with-a-long-name", dir);
	cr_assert_eq(symlink("/bin/sleep", link), 0);
	pid_t pid = fork();
	if (pid == 0) {
		execl(link, link, "30", (char *)NULL);
		_exit(127);
	}
	/* wait for the exec: comm changes from ours to the symlink's name, and the new command
	 * line is there (the kernel sets comm before the new arguments can be read) */
	struct procfs_info pi;
	for (int i = 0; i < 3000; i++) { /* 30 s: a loaded machine may take long to exec */
		if (procfs_read(pid, PROCFS_IDENTITY, 0, &pi) == 0 &&
		    !strncmp(pi.comm, "my-sleeper", 10) && !strncmp(pi.cmdline, link, strlen(link)))
			break;
		usleep(10000);
	}
	cr_expect_str_eq(pi.comm, "my-sleeper-with", "comm is cut at 15 bytes");
	cr_expect_str_eq(pi.name, "my-sleeper-with-a-long-name", "argv[0] completes it");
	cr_expect(procfs_name_matches(&pi, "my-sleeper-with-a-long-name"), "the run name");
	char real[PATH_MAX];
	cr_assert_not_null(realpath("/bin/sleep", real));
	cr_expect_str_eq(pi.exe, real, "exe is resolved by the kernel");
	cr_expect(procfs_name_matches(&pi, "sleep"), "the resolved name");
	char want[PATH_MAX + 8];
	snprintf(want, sizeof(want), "%s 30", link);
	cr_expect_str_eq(pi.cmdline, want);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_expect_eq(procfs_read(pid, PROCFS_STAT, 0, &pi), -1, "a reaped process is gone");
	cr_expect_eq(errno, ESRCH);
	unlink(link);
	rmdir(dir);
}

/* Fork and exec path with argv; wait until the exec is visible (comm starts with comm and
 * the command line with cmd), then read the child's identity into *pi. */
static pid_t run_named(const char *path, char *const argv[], const char *comm, const char *cmd,
                       struct procfs_info *pi)
{
	pid_t pid = fork();
	if (pid == 0) {
		execv(path, argv);
		_exit(127);
	}
	cr_assert_gt(pid, 0);
	for (int i = 0; i < 3000; i++) { /* 30 s: a loaded machine may take long to exec */
		if (procfs_read(pid, PROCFS_IDENTITY, 0, pi) == 0 &&
		    !strncmp(pi->comm, comm, strlen(comm)) &&
		    !strncmp(pi->cmdline, cmd, strlen(cmd)))
			return pid;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	cr_assert_fail("pid %d never showed comm %s and command line %s", pid, comm, cmd);
	return -1;
}

static void end_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* `exec -a NAME prog` (and any program told another argv[0]): the run name is argv[0], the
 * process still answers to comm and to its binary; a login shell's '-' is dropped; a
 * script is named after itself, not its interpreter; a process title stays comm. */
Test(procfs, the_run_name_comes_from_argv0_a_script_or_comm)
{
	struct procfs_info pi;
	pid_t pid = run_named("/bin/sleep", (char *[]){"envparse-prof", "30", NULL}, "sleep",
	                      "envparse-prof", &pi);
	cr_expect_str_eq(pi.comm, "sleep");
	cr_expect_str_eq(pi.name, "envparse-prof", "exec -a's name");
	cr_expect(procfs_name_matches(&pi, "envparse-prof"));
	cr_expect(procfs_name_matches(&pi, "sleep"), "comm still matches");
	end_child(pid);

	pid = run_named("/bin/sleep", (char *[]){"-sleep", "30", NULL}, "sleep", "-sleep", &pi);
	cr_expect_str_eq(pi.name, "sleep", "a login shell's '-' is not part of the name");
	end_child(pid);

	pid = run_named("/bin/sleep", (char *[]){"sleep: a process title", "30", NULL}, "sleep",
	                "sleep: a", &pi);
	cr_expect_str_eq(pi.name, "sleep", "a title with spaces is not a name");
	end_child(pid);

	char dir[] = "/tmp/procfs-test.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char script[PATH_MAX];
	snprintf(script, sizeof(script), "%s/a-script-with-a-long-name", dir);
	FILE *f = fopen(script, "w");
	cr_assert_not_null(f);
	fputs("#!/bin/sh\nwhile :; do sleep 1; done\n", f); /* sh stays (no exec) */
	fclose(f);
	chmod(script, 0700);
	/* the interpreter's argv: "/bin/sh", the script, ...; comm is the script's name */
	pid = run_named(script, (char *[]){script, NULL}, "a-script-with", "/bin/sh", &pi);
	cr_expect_str_eq(pi.name, "a-script-with-a-long-name", "%s", pi.cmdline);
	end_child(pid);
	unlink(script);
	rmdir(dir);
}

Test(procfs, uid_map_ranges_translate_uids)
{
	struct procfs_info pi;
	memset(&pi, 0, sizeof(pi));
	cr_assert_eq(procfs_parse_uid_map("         0     100000      65536\n"
	                                  "     65536      65534          1\n",
	                                  &pi),
	             0);
	pi.have |= PROCFS_UIDMAP;
	cr_assert_eq(pi.n_uid_map, 2);
	uid_t out;
	cr_assert(procfs_uid_outside(&pi, 0, &out));
	cr_assert_eq(out, 100000);
	cr_assert(procfs_uid_outside(&pi, 65535, &out));
	cr_assert_eq(out, 165535);
	cr_assert(procfs_uid_outside(&pi, 65536, &out));
	cr_assert_eq(out, 65534);
	cr_assert(!procfs_uid_outside(&pi, 65537, &out), "outside every range");
	cr_assert_neq(procfs_parse_uid_map("", &pi), 0, "an empty map maps nothing");
	cr_assert_neq(procfs_parse_uid_map("0 1\n", &pi), 0, "malformed");
	cr_assert_neq(procfs_parse_uid_map("0 1 0\n", &pi), 0, "an empty range");
}

Test(procfs, this_process_namespaces)
{
	struct procfs_info pi;
	cr_assert_eq(procfs_read(getpid(), PROCFS_NS | PROCFS_UIDMAP, 0, &pi), 0);
	cr_assert_eq(pi.pidns, procfs_self_pidns());
	cr_assert_eq(pi.userns, procfs_self_userns());
	uid_t out;
	cr_assert(procfs_uid_outside(&pi, getuid(), &out));
	cr_assert_eq(out, getuid(), "the reader's own namespace maps each uid to itself");
}

/* A segment's owner found by the flock it holds on the file (/proc/locks), checked as the
 * walk's candidates are (namespace, pid in it, start time). */
Test(procfs, find_the_process_holding_a_files_lock)
{
	char path[] = "/tmp/procfs-lock.XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t child = fork();
	if (child == 0) {
		int f = open(path, O_RDONLY);
		char c = 1;
		if (f < 0 || flock(f, LOCK_SH) != 0 || write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	cr_assert_eq(read(ready[0], &c, 1), 1);
	struct procfs_info pi;
	cr_assert_eq(procfs_read(child, 0, 0, &pi), 0);
	pid_t pid = 0;
	uint64_t ns = procfs_self_pidns();
	cr_expect_eq(procfs_find_locker((uint64_t)st.st_ino, ns, child, pi.start_time, &pid),
	             PROCFS_NS_FOUND);
	cr_expect_eq(pid, child);
	pid = 0;
	cr_expect_eq(procfs_find_locker((uint64_t)st.st_ino, ns, child, pi.start_time + 1, &pid),
	             PROCFS_NS_HIDDEN, "another start time is another process");
	cr_expect_eq(procfs_find_locker((uint64_t)st.st_ino, ns + 1, child, pi.start_time, &pid),
	             PROCFS_NS_HIDDEN, "another namespace");
	cr_expect_eq(procfs_find_locker((uint64_t)st.st_ino + 1, ns, child, pi.start_time, &pid),
	             PROCFS_NS_HIDDEN, "another file");
	cr_expect_eq(pid, 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	cr_expect_eq(procfs_find_locker((uint64_t)st.st_ino, ns, child, pi.start_time, &pid),
	             PROCFS_NS_HIDDEN, "its lock went with it");
	close(fd);
	unlink(path);
}

Test(procfs, find_nspid_in_the_readers_namespace_and_not_elsewhere)
{
	struct procfs_info self;
	cr_assert_eq(procfs_read(getpid(), 0, 0, &self), 0);
	pid_t pid = 0;
	cr_assert_eq(procfs_find_nspid(procfs_self_pidns(), getpid(), self.start_time, &pid),
	             PROCFS_NS_FOUND);
	cr_assert_eq(pid, getpid());
	cr_assert_eq(procfs_find_nspid(0, getpid(), self.start_time, &pid), PROCFS_NS_FOUND,
	             "an unknown namespace is the reader's own");
	/* another start time: not this process */
	cr_assert_neq(procfs_find_nspid(procfs_self_pidns(), getpid(), self.start_time + 1, &pid),
	              PROCFS_NS_FOUND);
	/* a namespace no process is in: not found, and never our own pid */
	pid = 0;
	cr_assert_neq(procfs_find_nspid(1, getpid(), self.start_time, &pid), PROCFS_NS_FOUND);
	cr_assert_eq(pid, 0);
}

/* An exec that lands in the middle of a read: a stand-in /proc whose comm is a FIFO. The
 * writer waits for the reader to open comm (exe and the command line are read by then), and
 * only then makes the process the new image (stat's comm, exe, a plain comm file) before it
 * answers with the new comm. The reader must not keep the old exe beside the new comm. */
struct exec_midread {
	char dir[64];
};

static void put_file(const char *dir, const char *name, const char *text)
{
	char path[128], tmp[140];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	FILE *f = fopen(tmp, "w");
	cr_assert(f);
	cr_assert_eq(fputs(text, f) >= 0, 1);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(rename(tmp, path), 0);
}

static void *exec_while_reading(void *arg)
{
	struct exec_midread *m = arg;
	char path[128];
	snprintf(path, sizeof(path), "%s/comm", m->dir);
	int fd = open(path, O_WRONLY); /* returns once the reader has opened comm */
	if (fd < 0)
		return (void *)1;
	put_file(m->dir, "stat",
	         "4242 (newimg) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 "
	         "987654 1000000 25 0\n");
	char exe[128], tmp[140];
	snprintf(exe, sizeof(exe), "%s/exe", m->dir);
	snprintf(tmp, sizeof(tmp), "%s.new", exe);
	int bad = symlink("/usr/bin/newimg", tmp) || rename(tmp, exe);
	put_file(m->dir, "cmdline", "newimg");
	put_file(m->dir, "comm", "newimg\n"); /* over the FIFO's name: the next read finds it */
	bad |= write(fd, "newimg\n", 7) != 7;
	close(fd);
	return (void *)(intptr_t)bad;
}

Test(procfs, an_exec_during_a_read_is_read_again_not_mixed)
{
	char root[] = "/tmp/procfs-exec.XXXXXX";
	cr_assert_not_null(mkdtemp(root));
	struct exec_midread m;
	snprintf(m.dir, sizeof(m.dir), "%s/4242", root);
	cr_assert_eq(mkdir(m.dir, 0755), 0);
	put_file(m.dir, "stat",
	         "4242 (oldimg) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 "
	         "987654 1000000 25 0\n");
	put_file(m.dir, "status",
	         "Name:\toldimg\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nThreads:\t1\n");
	put_file(m.dir, "cmdline", "/usr/bin/oldimg");
	char path[128];
	snprintf(path, sizeof(path), "%s/exe", m.dir);
	cr_assert_eq(symlink("/usr/bin/oldimg", path), 0);
	snprintf(path, sizeof(path), "%s/comm", m.dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, exec_while_reading, &m), 0);
	procfs_set_root(root);
	struct procfs_info pi;
	int r = procfs_read(4242, PROCFS_IDENTITY, 987654, &pi);
	procfs_set_root(NULL);
	void *bad;
	pthread_join(t, &bad);
	cr_assert_null(bad, "the stand-in exec failed");
	cr_expect_eq(r, 0);
	cr_expect_str_eq(pi.comm, "newimg");
	cr_expect_str_eq(pi.exe, "/usr/bin/newimg", "the old image's exe beside the new comm");
	cr_expect_str_eq(pi.cmdline, "newimg");
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_expect_eq(system(cmd), 0);
}
