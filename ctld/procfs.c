/* procfs.c — reads /proc/<pid> through one directory descriptor (procfs.h). */
#include "procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t page_size(void)
{
	static uint64_t ps;
	if (!ps) {
		long v = sysconf(_SC_PAGESIZE);
		ps = v > 0 ? (uint64_t)v : 4096;
	}
	return ps;
}

const char *procfs_basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Replace what a terminal or a label should not carry. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
}

/* Read a whole small file relative to dfd; returns its length or -1. */
static ssize_t read_at(int dfd, const char *name, char *buf, size_t cap)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < cap - 1) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

int procfs_parse_stat(const char *buf, struct procfs_info *out)
{
	/* comm may hold spaces and parentheses: the fields restart after the last ')' */
	const char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	p++;
	uint64_t f[25] = {0};
	/* field 3 (state) is a letter; fields 4..24 are numbers (some negative) */
	int field = 2;
	while (*p && field < 24) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		field++;
		const char *start = p;
		while (*p && *p != ' ')
			p++;
		if (field >= 4) {
			char *end;
			long long v = strtoll(start, &end, 10);
			if (end != p)
				return -1;
			f[field] = (uint64_t)v;
		}
	}
	if (field < 24)
		return -1;
	out->threads = (uint32_t)f[20];
	out->start_time = f[22];
	out->vm_rss = f[24] * page_size();
	return 0;
}

static uint64_t kb_value(const char *v)
{
	return strtoull(v, NULL, 10) * 1024;
}

int procfs_parse_status(const char *buf, struct procfs_info *out)
{
	int found = 0;
	for (const char *line = buf; line && *line;) {
		const char *nl = strchr(line, '\n');
		const char *colon = memchr(line, ':', nl ? (size_t)(nl - line) : strlen(line));
		if (colon) {
			size_t klen = (size_t)(colon - line);
			const char *v = colon + 1;
#define KEY(k) (klen == sizeof(k) - 1 && !memcmp(line, k, klen))
			if (KEY("Uid")) {
				unsigned u[4];
				if (sscanf(v, "%u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
					for (int i = 0; i < 4; i++)
						out->uid[i] = u[i];
					found |= 1;
				}
			} else if (KEY("Gid")) {
				unsigned g[4];
				if (sscanf(v, "%u %u %u %u", &g[0], &g[1], &g[2], &g[3]) == 4)
					for (int i = 0; i < 4; i++)
						out->gid[i] = g[i];
			} else if (KEY("Threads")) {
				out->threads = (uint32_t)strtoul(v, NULL, 10);
				found |= 2;
			} else if (KEY("VmRSS")) {
				out->vm_rss = kb_value(v);
			} else if (KEY("RssAnon")) {
				out->rss_anon = kb_value(v);
			} else if (KEY("RssFile")) {
				out->rss_file = kb_value(v);
			} else if (KEY("RssShmem")) {
				out->rss_shmem = kb_value(v);
			} else if (KEY("NSpid")) {
				const char *s = v;
				out->n_nspid = 0;
				while (out->n_nspid < PROCFS_NSPID_MAX) {
					char *end;
					long x = strtol(s, &end, 10);
					if (end == s || x <= 0)
						break;
					out->nspid[out->n_nspid++] = (int)x;
					s = end;
				}
			}
#undef KEY
		}
		line = nl ? nl + 1 : NULL;
	}
	return found == 3 ? 0 : -1;
}

void procfs_parse_cmdline(const char *buf, size_t len, struct procfs_info *out)
{
	size_t o = 0;
	/* arguments are NUL-separated (a process title may also be one string with spaces) */
	while (len && buf[len - 1] == 0)
		len--;
	for (size_t i = 0; i < len && o + 1 < sizeof(out->cmdline); i++)
		out->cmdline[o++] = buf[i] ? buf[i] : ' ';
	if (o + 1 == sizeof(out->cmdline) && len > o)
		memcpy(out->cmdline + o - 3, "...", 3);
	out->cmdline[o] = 0;
	printable(out->cmdline);
}

/* The name it was run as: comm, unless comm was cut at 15 bytes and argv[0]'s basename
 * continues it (comm of a program run through a symlink is already the symlink's name). */
static void derive_name(const char *argv0, struct procfs_info *out)
{
	snprintf(out->name, sizeof(out->name), "%s", out->comm);
	if (!argv0 || strlen(out->comm) < 15)
		return;
	char first[PROCFS_COMM_MAX * 4];
	snprintf(first, sizeof(first), "%s", argv0);
	first[strcspn(first, " ")] = 0;
	const char *base = procfs_basename(first);
	if (!strncmp(base, out->comm, strlen(out->comm)) && strlen(base) < sizeof(out->name))
		snprintf(out->name, sizeof(out->name), "%s", base);
	printable(out->name);
}

bool procfs_name_matches(const struct procfs_info *pi, const char *name)
{
	if (!name || !*name)
		return false;
	if ((pi->have & PROCFS_COMM) && (!strcmp(name, pi->name) || !strcmp(name, pi->comm)))
		return true;
	if (pi->have & PROCFS_EXE) {
		char exe[PROCFS_EXE_MAX];
		snprintf(exe, sizeof(exe), "%s", pi->exe);
		/* a binary replaced since the process started still answers to its name */
		size_t n = strlen(exe);
		const char *del = " (deleted)";
		if (n > strlen(del) && !strcmp(exe + n - strlen(del), del))
			exe[n - strlen(del)] = 0;
		if (!strcmp(name, exe) || !strcmp(name, procfs_basename(exe)))
			return true;
	}
	return false;
}

static const char *proc_root = "/proc";

int procfs_read(pid_t pid, unsigned what, uint64_t expected_start, struct procfs_info *out)
{
	memset(out, 0, sizeof(*out));
	out->pid = pid;
	if (pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	char path[64];
	snprintf(path, sizeof(path), "%s/%d", proc_root, (int)pid);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			errno = ESRCH;
		return -1;
	}
	char buf[4096];
	int err = 0;
	/* the start time is always read first: it proves which process the rest describes */
	if (read_at(dfd, "stat", buf, sizeof(buf)) > 0 && procfs_parse_stat(buf, out) == 0) {
		out->have |= PROCFS_STAT;
		if (expected_start && out->start_time != expected_start) {
			out->have = 0;
			close(dfd);
			errno = ESRCH;
			return -1;
		}
	} else {
		err = errno ? errno : EIO;
	}
	if ((what & PROCFS_STATUS) && read_at(dfd, "status", buf, sizeof(buf)) > 0 &&
	    procfs_parse_status(buf, out) == 0)
		out->have |= PROCFS_STATUS;
	if (what & PROCFS_EXE) {
		ssize_t n = readlinkat(dfd, "exe", out->exe, sizeof(out->exe) - 1);
		if (n > 0) {
			out->exe[n] = 0;
			if ((size_t)n == sizeof(out->exe) - 1)
				memcpy(out->exe + n - 3, "...", 3);
			printable(out->exe);
			out->have |= PROCFS_EXE;
		}
	}
	char argv0[PROCFS_CMDLINE_MAX] = "";
	if (what & (PROCFS_CMDLINE | PROCFS_COMM)) {
		ssize_t n = read_at(dfd, "cmdline", buf, sizeof(buf));
		if (n >= 0) {
			size_t k = strnlen(buf, sizeof(argv0) - 1);
			memcpy(argv0, buf, k);
			argv0[k] = 0;
			if (what & PROCFS_CMDLINE) {
				procfs_parse_cmdline(buf, (size_t)n, out);
				out->have |= PROCFS_CMDLINE;
			}
		}
	}
	if (what & PROCFS_COMM) {
		ssize_t n = read_at(dfd, "comm", out->comm, sizeof(out->comm));
		if (n > 0) {
			while (n && out->comm[n - 1] == '\n')
				out->comm[--n] = 0;
			printable(out->comm);
			derive_name(argv0[0] ? argv0 : NULL, out);
			out->have |= PROCFS_COMM;
		}
	}
	close(dfd);
	/* a process that exited meanwhile reads as empty files: judge by the start time */
	if (err || (what & ~out->have)) {
		errno = err ? err : ESRCH;
		/* still there? then the missing part is unreadable (kernel thread, perms) */
		if (!err && access(path, F_OK) == 0)
			errno = EACCES;
		return -1;
	}
	return 0;
}
