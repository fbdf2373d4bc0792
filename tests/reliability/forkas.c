/* forkas.c — a child forked with no address space to spare leaves its parent's segment
 * alone. Run preloaded (LD_PRELOAD=liballoc.so, LIBALLOC_RUN_DIR=DIR): with two more
 * threads that allocated (so that its thread count is not the child's 1), it lowers
 * RLIMIT_AS to what it maps now, forks a child that allocates, frees and exits, and reads
 * its own segment file in DIR before and after: its pid and thread count must stay its
 * own, and so must its arenas' thread counts and its process block's metadata bytes.
 * (A child that could not map a copy of the segment used to stay on its parent's file and
 * wrote its pid, its thread count and a cleared mailbox there. And every child wrote its
 * arenas' thread counts, and took its parent's other threads' caches off the cached and
 * metadata bytes, in its parent's file before it moved to a copy.) Prints one
 * "ok NAME" or "FAIL NAME: ..." line per check; exit 0 when all passed.
 * usage: forkas DIR */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "liballoc_shm.h"
#include "vmsize.h"

static int failures;
static pthread_barrier_t started, done;

static void check(int ok, const char *name, const char *detail)
{
	printf("%s %s%s%s\n", ok ? "ok" : "FAIL", name, detail ? ": " : "", detail ? detail : "");
	if (!ok)
		failures++;
}

static void *worker(void *arg)
{
	free(malloc(100));
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&done);
	return arg;
}

/* The start of this process's segment, read from its file in dir (liballoc.<pid>...seg):
 * the header, the process block and the arena blocks. */
union segment {
	struct la_shm_header h;
	char bytes[16384];
};

static int read_segment(const char *dir, union segment *s)
{
	char stem[32], path[512];
	snprintf(stem, sizeof(stem), "liballoc.%d", (int)getpid());
	size_t n = strlen(stem);
	DIR *d = opendir(dir);
	struct dirent *e;
	int ok = -1;
	memset(s, 0, sizeof(*s));
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, stem, n) && (e->d_name[n] == '.' || e->d_name[n] == '@') &&
		    strstr(e->d_name, ".seg") && !strstr(e->d_name, ".tmp")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			int fd = open(path, O_RDONLY);
			ok = fd >= 0 && pread(fd, s, sizeof(*s), 0) >= (ssize_t)sizeof(s->h) &&
			                     s->h.off_arenas + (uint64_t)s->h.arena_count *
			                                               s->h.arena_stride <=
			                             sizeof(*s)
			             ? 0
			             : -1;
			if (fd >= 0)
				close(fd);
		}
	if (d)
		closedir(d);
	return ok;
}

static const struct la_shm_arena *arena_block(const union segment *s, uint32_t i)
{
	return (const struct la_shm_arena *)(s->bytes + s->h.off_arenas + i * s->h.arena_stride);
}

static const struct la_shm_arena *process_block(const union segment *s)
{
	return (const struct la_shm_arena *)(s->bytes + s->h.off_process);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: forkas DIR\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_t t[2];
	pthread_barrier_init(&started, NULL, 3);
	pthread_barrier_init(&done, NULL, 3);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	pthread_barrier_wait(&started);
	free(malloc(100));
	static union segment sb, sa;
	const struct la_shm_header *before = &sb.h, *after = &sa.h;
	/* the segment is named LIBALLOC_PUBLISH_DELAY after the start (50 ms): waited for */
	for (int i = 0; i < 10000 && read_segment(argv[1], &sb) != 0; i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	if (read_segment(argv[1], &sb) != 0) {
		check(0, "segment-published", "no segment of this process in DIR");
		return 1;
	}
	check(before->pid == getpid() && before->allocator_threads >= 3, "segment-published", NULL);
	/* no room for anything new: the child's copy of the segment must not need any */
	struct rlimit rl = {vm_size(), vm_size()}, old;
	getrlimit(RLIMIT_AS, &old);
	if (setrlimit(RLIMIT_AS, &rl) != 0) {
		perror("setrlimit");
		return 1;
	}
	pid_t kid = fork();
	if (kid == 0) {
		for (int i = 0; i < 100; i++)
			free(malloc(64));
		_exit(0);
	}
	int st = 0;
	waitpid(kid, &st, 0);
	setrlimit(RLIMIT_AS, &old);
	check(kid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child-exited", NULL);
	check(read_segment(argv[1], &sa) == 0, "segment-still-there", NULL);
	char why[128];
	snprintf(why, sizeof(why), "pid %d (the parent is %d)", (int)after->pid, (int)getpid());
	check(after->pid == getpid(), "parent-pid-kept", why);
	snprintf(why, sizeof(why), "%llu allocator threads (%llu before the fork)",
	         (unsigned long long)after->allocator_threads,
	         (unsigned long long)before->allocator_threads);
	check(after->allocator_threads == before->allocator_threads, "parent-threads-kept", why);
	/* the parent's threads wait at a barrier: nothing of theirs changes these meanwhile */
	int kept = after->arena_count == before->arena_count;
	snprintf(why, sizeof(why), "%u arenas (%u before the fork)", after->arena_count,
	         before->arena_count);
	for (uint32_t i = 0; kept && i < after->arena_count; i++)
		if (arena_block(&sa, i)->threads != arena_block(&sb, i)->threads) {
			kept = 0;
			snprintf(why, sizeof(why), "arena %u: %u threads (%u before the fork)", i,
			         arena_block(&sa, i)->threads, arena_block(&sb, i)->threads);
		}
	check(kept, "parent-arena-threads-kept", why);
	snprintf(why, sizeof(why), "%llu metadata bytes (%llu before the fork)",
	         (unsigned long long)process_block(&sa)->c.metadata_bytes,
	         (unsigned long long)process_block(&sb)->c.metadata_bytes);
	check(process_block(&sa)->c.metadata_bytes == process_block(&sb)->c.metadata_bytes,
	      "parent-metadata-kept", why);
	pthread_barrier_wait(&done);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
