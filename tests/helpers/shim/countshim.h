/* countshim.h — the counts of tests/helpers/shim/countshim.c (one thread's calls) */
#ifndef COUNTSHIM_H
#define COUNTSHIM_H

struct countshim_counts {
	unsigned long malloc, free, calloc, realloc, posix_memalign, aligned_alloc, memalign;
};

void countshim_get(struct countshim_counts *out);

#endif
