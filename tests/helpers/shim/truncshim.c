/* truncshim.c — libtruncshim.so, preloaded beside the allocator (tests/e2e/sigbus.bats): it
 * interposes linkat, and when the allocator's link gives its segment file its name (a
 * name ending in ".seg"), it truncates that file to 0 bytes and reads the first byte of the
 * file's mapping, right there, in the thread that names the file, before linkat returns:
 * the first moment another process could find the file and truncate it. The read faults
 * (SIGBUS, past the end of the file): the process survives only if the allocator's handler
 * is in place before the name is. It then creates the file $TRUNCSHIM_DONE, which the
 * program waits for. Only open, read, ftruncate and close: no allocation in the allocator's
 * naming thread.
 * With TRUNCSHIM_PREPARED set, it interposes dl_iterate_phdr instead, which liballoc's
 * constructor calls (shm_detect_foreign) between the preparation of a named segment file
 * (liballoc.<pid>.tmp, mapped: LIBALLOC_PUBLISH_DELAY=0) and its publication: the first
 * call that finds a ".tmp" file in $LIBALLOC_RUN_DIR truncates it and reads its mapping
 * (the process survives only if the handler is in place before the file is mapped, and
 * moves a mapping not yet published), then creates $TRUNCSHIM_DONE. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static int done;

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* The start address of a mapping of inode ino (0: none). By inode, not by path: the maps
 * show an unnamed file (O_TMPFILE, named later by linkat) by the name it was made with. */
static uintptr_t mapping_of(ino_t ino)
{
	static char buf[1 << 16]; /* (only the naming thread, once) */
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t n = 0;
	for (ssize_t r; n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0;)
		n += (size_t)r;
	close(fd);
	buf[n] = 0;
	for (char *line = buf; *line;) {
		/* start-end perms offset dev inode path */
		char *f = line, *end = strchr(line, '\n');
		for (int i = 0; i < 4 && f; i++)
			f = strchr(f, ' ') ? strchr(f, ' ') + 1 : NULL;
		if (f && strtoull(f, NULL, 10) == (unsigned long long)ino)
			return (uintptr_t)strtoull(line, NULL, 16);
		if (!end)
			break;
		line = end + 1;
	}
	return 0;
}

EXPORT int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
	int (*next)(int, const char *, int, const char *, int) =
	        (int (*)(int, const char *, int, const char *, int))dlsym(RTLD_NEXT, "linkat");
	int rc = next(olddirfd, oldpath, newdirfd, newpath, flags);
	const char *mark = getenv("TRUNCSHIM_DONE");
	if (rc != 0 || done || !mark || !ends_with(newpath, ".seg"))
		return rc;
	done = 1;
	struct stat st;
	uintptr_t at = fstatat(newdirfd, newpath, &st, 0) == 0 ? mapping_of(st.st_ino) : 0;
	int fd = openat(newdirfd, newpath, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (ftruncate(fd, 0) == 0 && at) {
			volatile const char *p = (const char *)at;
			(void)*p; /* past the end of the file now: SIGBUS */
			static const char msg[] =
			        "truncshim: read the segment after truncating it\n";
			(void)!write(2, msg, sizeof(msg) - 1);
		}
		close(fd);
	}
	int m = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (m >= 0)
		close(m);
	return rc;
}

/* Truncate the first ".tmp" file in dir and read its mapping (getdents64: no allocation).
 * True when one was found. */
static bool truncate_tmp(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return false;
	static char buf[8192];
	bool found = false;
	long n;
	while (!found && (n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0)
		for (long o = 0; o < n && !found;) {
			struct dirent64 *d = (struct dirent64 *)(buf + o);
			o += d->d_reclen;
			if (!ends_with(d->d_name, ".tmp"))
				continue;
			found = true;
			struct stat st;
			uintptr_t at =
			        fstatat(dfd, d->d_name, &st, 0) == 0 ? mapping_of(st.st_ino) : 0;
			int fd = openat(dfd, d->d_name, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				if (ftruncate(fd, 0) == 0 && at) {
					volatile const char *p = (const char *)at;
					(void)*p; /* past the end of the file now: SIGBUS */
					static const char msg[] = "truncshim: read the prepared "
					                          "segment after truncating it\n";
					(void)!write(2, msg, sizeof(msg) - 1);
				}
				close(fd);
			}
		}
	close(dfd);
	return found;
}

EXPORT int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	int (*next)(int (*)(struct dl_phdr_info *, size_t, void *), void *) =
	        (int (*)(int (*)(struct dl_phdr_info *, size_t, void *), void *))dlsym(
	                RTLD_NEXT, "dl_iterate_phdr");
	const char *mark = getenv("TRUNCSHIM_DONE"), *dir = getenv("LIBALLOC_RUN_DIR");
	if (!done && mark && dir && getenv("TRUNCSHIM_PREPARED") && truncate_tmp(dir)) {
		done = 1;
		int m = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (m >= 0)
			close(m);
	}
	return next(cb, data);
}
