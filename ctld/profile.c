/* profile.c — matching processes against profiles (see profile.h). Globs are fnmatch(3)
 * patterns without FNM_PATHNAME, so '*' also matches '/' (a cgroup pattern such as
 * "/system.slice/redis*" covers the unit's sub-cgroups); the command line is searched with
 * a POSIX extended regular expression. */
#include "profile.h"

#include <errno.h>
#include <fnmatch.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool glob_ok(const char *pattern, const char *s)
{
	return s && fnmatch(pattern, s, 0) == 0;
}

static const char *base_of(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}

bool profile_matches(const struct profile *pr, const struct profile_subject *s)
{
	if (pr->m_name && !glob_ok(pr->m_name, s->name) && !glob_ok(pr->m_name, s->comm))
		return false;
	if (pr->m_exe) {
		const char *exe = strchr(pr->m_exe, '/') ? s->exe : base_of(s->exe);
		if (!glob_ok(pr->m_exe, exe))
			return false;
	}
	if (pr->m_cgroup && !glob_ok(pr->m_cgroup, s->cgroup))
		return false;
	if (pr->has_uid && pr->m_uid != s->uid)
		return false;
	if (pr->has_cmdline && (!s->cmdline || regexec(&pr->cmdline_re, s->cmdline, 0, NULL, 0)))
		return false;
	return true;
}

const struct profile *profile_find(const struct profile *profiles, int n,
                                   const struct profile_subject *s)
{
	for (int i = 0; i < n; i++)
		if (profile_matches(&profiles[i], s))
			return &profiles[i];
	return NULL;
}

static int set_glob(char **dst, const char *key, const char *v, char *err, size_t errlen)
{
	if (*dst) {
		snprintf(err, errlen, "%s is given twice", key);
		return -1;
	}
	if (!*v) {
		snprintf(err, errlen, "%s: an empty pattern", key);
		return -1;
	}
	if (!(*dst = strdup(v))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int profile_set_match(struct profile *pr, const char *key, const char *v, char *err, size_t errlen)
{
	if (!strcmp(key, "name"))
		return set_glob(&pr->m_name, key, v, err, errlen);
	if (!strcmp(key, "exe"))
		return set_glob(&pr->m_exe, key, v, err, errlen);
	if (!strcmp(key, "cgroup")) {
		if (v[0] != '/' && v[0] != '*') {
			snprintf(
			        err, errlen,
			        "cgroup: '%s' must be a path inside the cgroup hierarchy, starting "
			        "with '/' (e.g. /system.slice/redis.service)",
			        v);
			return -1;
		}
		return set_glob(&pr->m_cgroup, key, v, err, errlen);
	}
	if (!strcmp(key, "uid")) {
		if (pr->has_uid) {
			snprintf(err, errlen, "uid is given twice");
			return -1;
		}
		char *end;
		errno = 0;
		unsigned long u = strtoul(v, &end, 10);
		if (*v && !*end && !errno && u < (uid_t)-1) {
			pr->m_uid = (uid_t)u;
		} else {
			struct passwd *pw = getpwnam(v);
			if (!pw) {
				snprintf(err, errlen,
				         "uid: '%s' is neither a number nor a user name", v);
				return -1;
			}
			pr->m_uid = pw->pw_uid;
		}
		pr->has_uid = true;
		return 0;
	}
	if (!strcmp(key, "cmdline")) {
		if (pr->has_cmdline) {
			snprintf(err, errlen, "cmdline is given twice");
			return -1;
		}
		int rc = regcomp(&pr->cmdline_re, v, REG_EXTENDED | REG_NOSUB);
		if (rc) {
			char why[128];
			regerror(rc, &pr->cmdline_re, why, sizeof(why));
			snprintf(err, errlen, "cmdline: '%s' is not a regular expression: %s", v,
			         why);
			return -1;
		}
		pr->has_cmdline = true;
		if (!(pr->m_cmdline = strdup(v))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	}
	return 1;
}

size_t profile_describe_matches(const struct profile *pr, char *buf, size_t len)
{
	size_t o = 0;
	if (len)
		buf[0] = 0;
#define DESCRIBE(...)                                                     \
	do {                                                              \
		if (o < len) {                                            \
			int n_ = snprintf(buf + o, len - o, __VA_ARGS__); \
			o += n_ > 0 ? (size_t)n_ : 0;                     \
		}                                                         \
	} while (0)
	if (pr->m_name)
		DESCRIBE("%sname=%s", o ? " " : "", pr->m_name);
	if (pr->m_exe)
		DESCRIBE("%sexe=%s", o ? " " : "", pr->m_exe);
	if (pr->m_cgroup)
		DESCRIBE("%scgroup=%s", o ? " " : "", pr->m_cgroup);
	if (pr->has_uid)
		DESCRIBE("%suid=%u", o ? " " : "", (unsigned)pr->m_uid);
	if (pr->has_cmdline)
		DESCRIBE("%scmdline=~%s", o ? " " : "", pr->m_cmdline);
#undef DESCRIBE
	return o < len ? o : (len ? len - 1 : 0);
}

void profile_free(struct profile *pr)
{
	free(pr->m_name);
	free(pr->m_exe);
	free(pr->m_cgroup);
	free(pr->m_cmdline);
	if (pr->has_cmdline)
		regfree(&pr->cmdline_re);
	pr->m_name = pr->m_exe = pr->m_cgroup = pr->m_cmdline = NULL;
	pr->has_cmdline = false;
}
