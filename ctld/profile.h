/* profile.h — service profiles: a [profile NAME] section of the configuration matches
 * processes by the name they were run as, their resolved executable, their memory cgroup,
 * their uid or a pattern on their command line, and sets tunables. The first profile in
 * the file that matches a process is its profile. No libevent here: matching is pure. */
#ifndef CTLD_PROFILE_H
#define CTLD_PROFILE_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "liballoc_shm.h"

#define PROFILE_NAME_MAX 64

/* What a profile is matched against (filled from /proc by the caller). */
struct profile_subject {
	const char *name;    /* the name it was run as (argv[0]'s basename) */
	const char *comm;    /* the kernel's comm */
	const char *exe;     /* /proc/<pid>/exe, resolved */
	const char *cgroup;  /* memory cgroup path inside its hierarchy ("/system.slice/x") */
	const char *cmdline; /* arguments joined by spaces */
	uid_t uid;           /* real uid */
};

struct profile_setting {
	int tunable; /* index into tunable_table */
	int64_t value;
};

struct profile {
	char name[PROFILE_NAME_MAX];
	int line; /* of its [profile NAME] header */
	/* every match given must hold (at least one is given) */
	char *m_name;    /* glob on the run name or the comm */
	char *m_exe;     /* glob on the resolved executable (no '/' in it: on its basename) */
	char *m_cgroup;  /* glob on the cgroup path ('*' also crosses '/') */
	char *m_cmdline; /* POSIX extended regular expression, searched in the command line */
	regex_t cmdline_re;
	bool has_cmdline, has_uid;
	uid_t m_uid;
	struct profile_setting set[LA_NTUNABLES];
	int nset;
};

bool profile_matches(const struct profile *pr, const struct profile_subject *s);
/* The first of n profiles that matches, or NULL. */
const struct profile *profile_find(const struct profile *profiles, int n,
                                   const struct profile_subject *s);
/* Set one match key ("name", "exe", "cgroup", "uid", "cmdline"); 1 when key is not a match
 * key, 0 when set, -1 with a message in err. */
int profile_set_match(struct profile *pr, const char *key, const char *value, char *err,
                      size_t errlen);
/* "name=redis-* exe=/usr/bin/redis-server uid=999" for listings. */
size_t profile_describe_matches(const struct profile *pr, char *buf, size_t len);
void profile_free(struct profile *pr); /* what the matches own; not pr itself */

#endif
