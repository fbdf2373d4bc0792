/* procfs.h — the daemon's one reader of /proc/<pid>: identity (uids, exe, the name it was
 * run as, its command line, start time) and the kernel's figures (threads, RSS and its
 * split, namespace pids). Every file of one call is read through one descriptor of the
 * /proc/<pid> directory, so they all describe the same process even if the pid is reused
 * meanwhile (a reused pid fails with ESRCH, or with a start time that does not match).
 * Text that comes from the process (comm, cmdline) is made printable here. No libevent,
 * no allocation: the CLI, the fuzzers and the daemon link it. */
#ifndef CTLD_PROCFS_H
#define CTLD_PROCFS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PROCFS_COMM_MAX    64  /* comm is at most 15 bytes; argv0's basename may be longer */
#define PROCFS_EXE_MAX     512 /* /proc/<pid>/exe, cut (with "...") beyond this */
#define PROCFS_CMDLINE_MAX 512 /* arguments joined by spaces, cut beyond this */
#define PROCFS_NSPID_MAX   8   /* pid in each nested pid namespace, outermost first */
#define PROCFS_IDMAP_MAX   8   /* uid_map ranges kept (containers have one or two) */

/* What to read (bits of `what`; `have` says what was read). */
enum {
	PROCFS_STAT = 1u << 0,    /* /proc/<pid>/stat: start_time, threads, rss, stat_comm
	                             (cheap: alone, one open, one read, one close) */
	PROCFS_STATUS = 1u << 1,  /* /proc/<pid>/status: uids, threads, VmRSS and its split,
	                             NSpid */
	PROCFS_EXE = 1u << 2,     /* readlink /proc/<pid>/exe */
	PROCFS_COMM = 1u << 3,    /* /proc/<pid>/comm, and the basename of argv[0] as `name` */
	PROCFS_CMDLINE = 1u << 4, /* /proc/<pid>/cmdline */
	PROCFS_NS = 1u << 5,      /* ns/pid, ns/user: inodes of its pid and user namespaces
	                             (ptrace read access needed: root, or the same uid) */
	PROCFS_UIDMAP = 1u << 6,  /* uid_map: its user namespace's uids in the reader's */
	PROCFS_IDENTITY = PROCFS_STATUS | PROCFS_EXE | PROCFS_COMM | PROCFS_CMDLINE,
};

struct procfs_info {
	uint32_t have;                          /* PROCFS_* read successfully */
	pid_t pid;                              /* as asked */
	uint64_t start_time;                    /* stat field 22: clock ticks since boot */
	uint32_t threads;                       /* stat field 20 / status Threads */
	uid_t uid[4];                           /* status Uid: real, effective, saved, filesystem */
	gid_t gid[4];                           /* status Gid */
	uint64_t vm_rss;                        /* bytes: status VmRSS (stat: rss x page size) */
	uint64_t rss_anon, rss_file, rss_shmem; /* bytes (status only) */
	int nspid[PROCFS_NSPID_MAX];            /* status NSpid: outermost (ours) first, the
	                                           process's own (in pidns) last */
	int n_nspid;
	uint64_t pidns, userns; /* inodes of ns/pid and ns/user */
	struct procfs_idmap {
		uint32_t inside, outside, count; /* uid_map: uids inside..+count are outside.. */
	} uid_map[PROCFS_IDMAP_MAX];
	int n_uid_map;
	char exe[PROCFS_EXE_MAX];   /* resolved binary as the kernel knows it; " (deleted)" kept */
	char comm[PROCFS_COMM_MAX]; /* the kernel's comm (15 bytes at most) */
	char stat_comm[PROCFS_COMM_MAX];  /* the same as stat field 2 has it (PROCFS_STAT): a
	                                    changed one says exec or prctl(PR_SET_NAME) */
	char name[PROCFS_COMM_MAX];       /* the name it was run as (argv[0], a script, comm) */
	char cmdline[PROCFS_CMDLINE_MAX]; /* arguments joined by spaces (process titles too) */
};

/* Read `what` of pid into *out (zeroed first). expected_start, when not 0, must equal the
 * process's start time (else the pid was reused: -1 with errno ESRCH). Returns 0 when
 * everything asked was read, -1 with errno otherwise (ESRCH: the process is gone); what
 * could be read is in out->have either way. */
int procfs_read(pid_t pid, unsigned what, uint64_t expected_start, struct procfs_info *out);

/* Read another directory instead of /proc (NULL: /proc again): tests give the reader a
 * stand-in whose files they write, to make a part fail and come back. */
void procfs_set_root(const char *root);

/* ---- namespaces ----------------------------------------------------------------------
 * A process in a container sees its own pid (and uid) in its own namespaces; a reader in
 * another namespace (a daemon on the host) finds it through /proc: the process whose
 * ns/pid is that namespace and whose last NSpid is that pid. */

/* Inodes of the reader's own pid and user namespaces (read once; 0 when /proc cannot tell). */
uint64_t procfs_self_pidns(void);
uint64_t procfs_self_userns(void);

/* The pid, in the reader's /proc, of the process that is nspid in the pid namespace pidns
 * (an inode; 0: the reader's own, the pid is taken as it is) and started at start_time
 * (stat field 22, the same in every namespace). PROCFS_NS_FOUND with *pid; or
 * PROCFS_NS_HIDDEN: no such process is visible from here (it runs in a namespace this
 * /proc does not show, or it is gone); or PROCFS_NS_LATER: not visible yet, look again
 * shortly (the processes of other namespaces were listed moments ago, before it started).
 * Processes of other namespaces are listed by one walk of /proc, again at most every
 * PROCFS_NS_RESCAN_MS when a lookup misses. */
enum { PROCFS_NS_FOUND, PROCFS_NS_HIDDEN, PROCFS_NS_LATER };
#define PROCFS_NS_RESCAN_MS 20
int procfs_find_nspid(uint64_t pidns, pid_t nspid, uint64_t start_time, pid_t *pid);
/* The same found through the flock its segment file (inode ino) holds: /proc/locks names
 * each holder by its pid in the reader's pid namespace (a holder not visible from there
 * is not listed). One read, no walk of /proc and nothing to wait for: a segment's owner
 * holds its lock before the file appears. PROCFS_NS_FOUND or PROCFS_NS_HIDDEN. */
int procfs_find_locker(uint64_t ino, uint64_t pidns, pid_t nspid, uint64_t start_time, pid_t *pid);

/* uid inside the process's user namespace as the reader sees it, through the uid_map read
 * with PROCFS_UIDMAP. False when the map does not cover it. */
bool procfs_uid_outside(const struct procfs_info *pi, uint32_t inside, uid_t *outside);

/* The part after the last '/' of a path ("" stays ""). */
const char *procfs_basename(const char *path);

/* Does NAME designate this process, as an operator would type it? True when it equals the
 * name it was run as, its comm, the basename of its resolved binary, or that binary's
 * full path. */
bool procfs_name_matches(const struct procfs_info *pi, const char *name);
/* The same on the strings alone (what the daemon keeps of a read): have (PROCFS_COMM,
 * PROCFS_EXE) says which of them were read. */
bool procfs_names_match(unsigned have, const char *run_name, const char *comm, const char *binary,
                        const char *name);

/* Parsers, exposed for the unit tests and the fuzzers (buf is NUL-terminated). */
int procfs_parse_stat(const char *buf, struct procfs_info *out);
int procfs_parse_status(const char *buf, struct procfs_info *out);
void procfs_parse_cmdline(const char *buf, size_t len, struct procfs_info *out);
int procfs_parse_uid_map(const char *buf, struct procfs_info *out);

#endif
