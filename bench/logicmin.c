/* logicmin.c — a logic-minimizer-like workload, single-threaded (the allocation pattern of
 * two-level minimizers such as espresso): each problem is a random boolean function of its
 * own number of variables, given as a cover of cubes (2 bits per variable: 01 the variable
 * is 0, 10 it is 1, 11 either). The cover is complemented by recursive Shannon expansion
 * on its most binate variable (cofactor covers at every level of the recursion, the two
 * halves' results merged where they differ only in the split variable), then duplicate
 * cubes and cubes contained in a cube with one literal fewer are dropped and cubes at
 * distance one are merged until none are left. Every cube is a block of its own (4..24
 * bytes, by the problem's variable count); covers are arrays of cube pointers grown by
 * realloc; the lookups go through hash tables of cubes (a table, a node per entry and a
 * scratch cube per probe, as minimizers do with their temporary sets). The answer (cube
 * and literal counts) is printed so that runs under different allocators can be compared.
 * usage: logicmin PROBLEMS [MAXVARS]
 * prints: ops_per_sec=... elapsed=... problems=... cubes=... literals=... */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "PROBLEMS [MAXVARS]"

struct lm_cover {
	unsigned n, cap;
	uint32_t **cube;
};

/* The problem being solved: variables and words per cube. */
static unsigned lm_vars, lm_words;

static uint32_t *lm_cube_new(void)
{
	uint32_t *c = malloc(lm_words * sizeof(uint32_t));
	if (!c)
		bench_die("malloc");
	return c;
}

static uint32_t *lm_cube_universe(void)
{
	uint32_t *c = lm_cube_new();
	for (unsigned w = 0; w < lm_words; w++)
		c[w] = 0xffffffffu;
	if (lm_vars % 16)
		c[lm_words - 1] = (1u << (2 * (lm_vars % 16))) - 1;
	return c;
}

static uint32_t *lm_cube_copy(const uint32_t *src)
{
	uint32_t *c = lm_cube_new();
	memcpy(c, src, lm_words * sizeof(uint32_t));
	return c;
}

static unsigned lm_get(const uint32_t *c, unsigned v)
{
	return (c[v / 16] >> (2 * (v % 16))) & 3u;
}

static void lm_set(uint32_t *c, unsigned v, unsigned lit)
{
	uint32_t shift = 2 * (v % 16);
	c[v / 16] = (c[v / 16] & ~(3u << shift)) | (lit << shift);
}

static void lm_cover_init(struct lm_cover *f)
{
	f->n = f->cap = 0;
	f->cube = NULL;
}

static void lm_cover_add(struct lm_cover *f, uint32_t *c)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 4;
		uint32_t **nc = realloc(f->cube, f->cap * sizeof(*nc));
		if (!nc)
			bench_die("realloc");
		f->cube = nc;
	}
	f->cube[f->n++] = c;
}

static void lm_cover_free(struct lm_cover *f)
{
	for (unsigned i = 0; i < f->n; i++)
		free(f->cube[i]);
	free(f->cube);
	lm_cover_init(f);
}

static int lm_is_universe(const uint32_t *c)
{
	for (unsigned v = 0; v < lm_vars; v++)
		if (lm_get(c, v) != 3)
			return 0;
	return 1;
}

/* The cubes of f that allow variable v to be lit, with v freed (a new cover). */
static void lm_cofactor(const struct lm_cover *f, unsigned v, unsigned lit, struct lm_cover *out)
{
	lm_cover_init(out);
	for (unsigned i = 0; i < f->n; i++) {
		if (!(lm_get(f->cube[i], v) & lit))
			continue;
		uint32_t *c = lm_cube_copy(f->cube[i]);
		lm_set(c, v, 3);
		lm_cover_add(out, c);
	}
}

/* The variable to split on: the one lit both ways in the most cubes, else the most lit. */
static unsigned lm_split_var(const struct lm_cover *f)
{
	unsigned best = 0, best_score = 0;
	for (unsigned v = 0; v < lm_vars; v++) {
		unsigned zeros = 0, ones = 0;
		for (unsigned i = 0; i < f->n; i++) {
			unsigned l = lm_get(f->cube[i], v);
			zeros += l == 1;
			ones += l == 2;
		}
		unsigned score = (zeros && ones ? 1000u * (zeros + ones) : 0) + zeros + ones;
		if (score > best_score) {
			best_score = score;
			best = v;
		}
	}
	return best;
}

/* A hash table of cubes: a bucket array sized for n entries, a node per entry. */
struct lm_node {
	struct lm_node *next;
	uint32_t *key;
	unsigned var, lit, index;
};

struct lm_table {
	unsigned nb;
	struct lm_node **b;
};

static uint32_t lm_hash(const uint32_t *c)
{
	uint32_t h = 2166136261u;
	for (unsigned w = 0; w < lm_words; w++)
		h = (h ^ c[w]) * 16777619u;
	return h ^ (h >> 15);
}

static void lm_table_init(struct lm_table *t, unsigned n)
{
	t->nb = 16;
	while (t->nb < 2 * n)
		t->nb *= 2;
	t->b = calloc(t->nb, sizeof(*t->b));
	if (!t->b)
		bench_die("calloc");
}

static struct lm_node **lm_table_slot(struct lm_table *t, const uint32_t *key)
{
	return &t->b[lm_hash(key) & (t->nb - 1)];
}

static struct lm_node *lm_table_find(struct lm_table *t, const uint32_t *key, unsigned var)
{
	for (struct lm_node *x = *lm_table_slot(t, key); x; x = x->next)
		if (x->var == var && memcmp(x->key, key, lm_words * sizeof(uint32_t)) == 0)
			return x;
	return NULL;
}

static struct lm_node *lm_table_add(struct lm_table *t, uint32_t *key, unsigned var, unsigned lit,
                                    unsigned index)
{
	struct lm_node **slot = lm_table_slot(t, key);
	struct lm_node *node = malloc(sizeof(*node));
	if (!node)
		bench_die("malloc");
	*node = (struct lm_node){*slot, key, var, lit, index};
	*slot = node;
	return node;
}

/* Free the nodes, and their keys when free_keys. */
static void lm_table_free(struct lm_table *t, int free_keys)
{
	for (unsigned b = 0; b < t->nb; b++)
		for (struct lm_node *x = t->b[b], *nx; x; x = nx) {
			nx = x->next;
			if (free_keys)
				free(x->key);
			free(x);
		}
	free(t->b);
}

static void lm_complement(const struct lm_cover *f, struct lm_cover *out)
{
	lm_cover_init(out);
	if (f->n == 0) {
		lm_cover_add(out, lm_cube_universe());
		return;
	}
	for (unsigned i = 0; i < f->n; i++)
		if (lm_is_universe(f->cube[i]))
			return;
	if (f->n == 1) { /* De Morgan: one cube per literal, that literal inverted */
		for (unsigned v = 0; v < lm_vars; v++) {
			unsigned l = lm_get(f->cube[0], v);
			if (l == 3)
				continue;
			uint32_t *c = lm_cube_universe();
			lm_set(c, v, l ^ 3u);
			lm_cover_add(out, c);
		}
		return;
	}
	unsigned v = lm_split_var(f);
	struct lm_cover f0, f1, c0, c1;
	lm_cofactor(f, v, 1, &f0);
	lm_cofactor(f, v, 2, &f1);
	lm_complement(&f0, &c0);
	lm_cover_free(&f0);
	lm_complement(&f1, &c1);
	lm_cover_free(&f1);
	/* a cube in both halves covers either value of v: keep one copy with v freed */
	struct lm_table t;
	lm_table_init(&t, c1.n);
	for (unsigned j = 0; j < c1.n; j++)
		lm_table_add(&t, c1.cube[j], 0, 0, j);
	for (unsigned i = 0; i < c0.n; i++) {
		uint32_t *a = c0.cube[i];
		struct lm_node *x = lm_table_find(&t, a, 0);
		if (x && c1.cube[x->index]) {
			free(c1.cube[x->index]);
			c1.cube[x->index] = NULL;
		} else {
			lm_set(a, v, 1);
		}
		lm_cover_add(out, a);
	}
	lm_table_free(&t, 0);
	for (unsigned j = 0; j < c1.n; j++) {
		if (!c1.cube[j])
			continue;
		lm_set(c1.cube[j], v, 2);
		lm_cover_add(out, c1.cube[j]);
	}
	free(c0.cube);
	free(c1.cube);
}

/* Drop duplicates and cubes contained in a cube of the cover with one literal fewer. */
static void lm_reduce(struct lm_cover *f)
{
	struct lm_table t;
	lm_table_init(&t, f->n);
	for (unsigned i = 0; i < f->n; i++) {
		if (lm_table_find(&t, f->cube[i], 0)) {
			free(f->cube[i]);
			f->cube[i] = NULL;
		} else {
			lm_table_add(&t, f->cube[i], 0, 0, i);
		}
	}
	char *drop = calloc(f->n ? f->n : 1, 1);
	if (!drop)
		bench_die("calloc");
	for (unsigned i = 0; i < f->n; i++) {
		if (!f->cube[i])
			continue;
		for (unsigned v = 0; v < lm_vars && !drop[i]; v++) {
			if (lm_get(f->cube[i], v) == 3)
				continue;
			uint32_t *key = lm_cube_copy(f->cube[i]);
			lm_set(key, v, 3);
			drop[i] = lm_table_find(&t, key, 0) != NULL;
			free(key);
		}
	}
	lm_table_free(&t, 0);
	unsigned k = 0;
	for (unsigned i = 0; i < f->n; i++) {
		if (drop[i])
			free(f->cube[i]);
		else if (f->cube[i])
			f->cube[k++] = f->cube[i];
	}
	free(drop);
	f->n = k;
}

/* One pass of distance-1 merging: two cubes that differ only in one variable, lit one way
 * in each, make one cube with it freed. Each literal of each cube is looked up under its
 * cube with that variable freed (a scratch cube per literal). Returns the merges made; f
 * becomes the merged cubes plus those that merged with none. */
static unsigned lm_merge_pass(struct lm_cover *f)
{
	struct lm_table t;
	lm_table_init(&t, 2 * f->n);
	char *used = calloc(f->n ? f->n : 1, 1);
	if (!used)
		bench_die("calloc");
	struct lm_cover next;
	lm_cover_init(&next);
	unsigned merges = 0;
	for (unsigned i = 0; i < f->n; i++) {
		for (unsigned v = 0; v < lm_vars; v++) {
			unsigned lit = lm_get(f->cube[i], v);
			if (lit == 3)
				continue;
			uint32_t *key = lm_cube_copy(f->cube[i]);
			lm_set(key, v, 3);
			struct lm_node *x = lm_table_find(&t, key, v);
			if (x && x->lit != lit) { /* the merged cube is the key */
				lm_cover_add(&next, key);
				used[i] = used[x->index] = 1;
				merges++;
			} else {
				lm_table_add(&t, key, v, lit, i);
			}
		}
	}
	lm_table_free(&t, 1);
	for (unsigned i = 0; i < f->n; i++) {
		if (used[i])
			free(f->cube[i]);
		else
			lm_cover_add(&next, f->cube[i]);
	}
	free(used);
	free(f->cube);
	*f = next;
	return merges;
}

int main(int argc, char **argv)
{
	long problems = bench_arg(argc, argv, 1, 200, USAGE);
	long maxvars = bench_arg_range(argc, argv, 2, 96, 8, 65536, USAGE);
	struct bench_rng rng;
	bench_rng_seed(&rng, 2024);
	unsigned long cubes = 0, literals = 0;
	double t0 = bench_now();
	for (long p = 0; p < problems; p++) {
		lm_vars = (unsigned)bench_rng_range(&rng, 8, (size_t)maxvars);
		lm_words = (lm_vars + 15) / 16;
		struct lm_cover f, c;
		lm_cover_init(&f);
		unsigned n = (unsigned)bench_rng_range(&rng, 3, 7);
		for (unsigned i = 0; i < n; i++) {
			uint32_t *cube = lm_cube_universe();
			unsigned lits = (unsigned)bench_rng_range(&rng, 2, 4);
			for (unsigned k = 0; k < lits; k++)
				lm_set(cube, (unsigned)bench_rng_range(&rng, 0, lm_vars - 1),
				       1u + (unsigned)(bench_rng_next(&rng) & 1));
			lm_cover_add(&f, cube);
		}
		lm_complement(&f, &c);
		lm_reduce(&c);
		while (lm_merge_pass(&c))
			lm_reduce(&c);
		cubes += c.n;
		for (unsigned i = 0; i < c.n; i++)
			for (unsigned v = 0; v < lm_vars; v++)
				literals += lm_get(c.cube[i], v) != 3;
		lm_cover_free(&c);
		lm_cover_free(&f);
	}
	double elapsed = bench_now() - t0;
	printf("ops_per_sec=%.1f elapsed=%.6f problems=%ld cubes=%lu literals=%lu\n",
	       (double)problems / elapsed, elapsed, problems, cubes, literals);
	return 0;
}
