/* nbody_tree.c — a tree-building workload, single-threaded (the allocation pattern of
 * Barnes-Hut n-body codes): every step builds an octree over BODIES bodies (one block per
 * cell and one per leaf body record, 48..112 bytes), computes each cell's mass and centre
 * of mass, walks the tree once per body for the force on it (cells far enough away count
 * as one mass), moves the bodies and frees the whole tree. Each step also keeps a short
 * list of the closest encounters found during the walks (small records, freed with the
 * tree). The centre of mass after the last step is printed so that runs under different
 * allocators can be compared.
 * usage: nbody_tree BODIES STEPS
 * prints: ops_per_sec=... elapsed=... steps=... cells=... cx=... cy=... cz=... */
#include "benchlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define USAGE "BODIES STEPS"
#define THETA 0.5
#define EPS2  1e-4
#define DT    1e-3

struct nb_body {
	double pos[3], vel[3], acc[3], mass;
};

/* A leaf points at its body through a record of its own (codes keep per-leaf data). */
struct nb_leaf {
	struct nb_body *body;
	double pos[3], mass;
};

struct nb_cell {
	double centre[3], half; /* the cube this cell covers */
	double com[3], mass;    /* centre of mass and total mass below */
	void *child[8];         /* NULL, a cell, or a leaf (tagged in bit 0) */
};

struct nb_near {
	struct nb_near *next;
	unsigned a, b;
	double d2;
};

static unsigned long nb_cells;

#define NB_LEAF(p)    ((struct nb_leaf *)((uintptr_t)(p) & ~(uintptr_t)1))
#define NB_IS_LEAF(p) ((uintptr_t)(p)&1)

static struct nb_cell *nb_cell_new(const double centre[3], double half)
{
	struct nb_cell *c = calloc(1, sizeof(*c));
	if (!c)
		bench_die("calloc");
	for (int k = 0; k < 3; k++)
		c->centre[k] = centre[k];
	c->half = half;
	nb_cells++;
	return c;
}

static int nb_octant(const struct nb_cell *c, const double pos[3])
{
	return (pos[0] > c->centre[0]) | (pos[1] > c->centre[1]) << 1 |
	       (pos[2] > c->centre[2]) << 2;
}

static void nb_insert(struct nb_cell *c, struct nb_leaf *leaf, int depth)
{
	for (;;) {
		int o = nb_octant(c, leaf->pos);
		void *slot = c->child[o];
		if (!slot) {
			c->child[o] = (void *)((uintptr_t)leaf | 1);
			return;
		}
		double centre[3];
		for (int k = 0; k < 3; k++)
			centre[k] = c->centre[k] + ((o >> k & 1) ? 0.5 : -0.5) * c->half;
		if (NB_IS_LEAF(slot)) {
			struct nb_leaf *other = NB_LEAF(slot);
			if (depth > 40) { /* bodies at one point: keep them in one leaf slot */
				other->mass += leaf->mass;
				free(leaf);
				return;
			}
			struct nb_cell *sub = nb_cell_new(centre, c->half * 0.5);
			sub->child[nb_octant(sub, other->pos)] = slot;
			c->child[o] = sub;
		}
		c = c->child[o];
		depth++;
	}
}

static void nb_summarize(struct nb_cell *c)
{
	double m = 0, com[3] = {0, 0, 0};
	for (int o = 0; o < 8; o++) {
		void *ch = c->child[o];
		if (!ch)
			continue;
		const double *pos;
		double mass;
		if (NB_IS_LEAF(ch)) {
			pos = NB_LEAF(ch)->pos;
			mass = NB_LEAF(ch)->mass;
		} else {
			nb_summarize(ch);
			pos = ((struct nb_cell *)ch)->com;
			mass = ((struct nb_cell *)ch)->mass;
		}
		for (int k = 0; k < 3; k++)
			com[k] += pos[k] * mass;
		m += mass;
	}
	for (int k = 0; k < 3; k++)
		c->com[k] = m > 0 ? com[k] / m : c->centre[k];
	c->mass = m;
}

static void nb_pull(double acc[3], const double from[3], const double to[3], double mass)
{
	double d[3], r2 = EPS2;
	for (int k = 0; k < 3; k++) {
		d[k] = to[k] - from[k];
		r2 += d[k] * d[k];
	}
	double f = mass / (r2 * sqrt(r2));
	for (int k = 0; k < 3; k++)
		acc[k] += f * d[k];
}

/* Force on body b (index i) from the tree; close leaves go on the encounter list. */
static void nb_walk(const struct nb_cell *c, struct nb_body *b, struct nb_body *bodies,
                    struct nb_near **near)
{
	for (int o = 0; o < 8; o++) {
		void *ch = c->child[o];
		if (!ch)
			continue;
		if (NB_IS_LEAF(ch)) {
			struct nb_leaf *l = NB_LEAF(ch);
			if (l->body == b)
				continue;
			nb_pull(b->acc, b->pos, l->pos, l->mass);
			double d2 = 0;
			for (int k = 0; k < 3; k++)
				d2 += (l->pos[k] - b->pos[k]) * (l->pos[k] - b->pos[k]);
			if (d2 < 1e-3) {
				struct nb_near *n = malloc(sizeof(*n));
				if (!n)
					bench_die("malloc");
				*n = (struct nb_near){*near, (unsigned)(b - bodies),
				                      (unsigned)(l->body - bodies), d2};
				*near = n;
			}
			continue;
		}
		const struct nb_cell *s = ch;
		double d2 = 0;
		for (int k = 0; k < 3; k++)
			d2 += (s->com[k] - b->pos[k]) * (s->com[k] - b->pos[k]);
		if (4 * s->half * s->half < THETA * THETA * d2)
			nb_pull(b->acc, b->pos, s->com, s->mass);
		else
			nb_walk(s, b, bodies, near);
	}
}

static void nb_free(struct nb_cell *c)
{
	for (int o = 0; o < 8; o++) {
		void *ch = c->child[o];
		if (!ch)
			continue;
		if (NB_IS_LEAF(ch))
			free(NB_LEAF(ch));
		else
			nb_free(ch);
	}
	free(c);
}

int main(int argc, char **argv)
{
	long n = bench_arg(argc, argv, 1, 20000, USAGE);
	long steps = bench_arg(argc, argv, 2, 10, USAGE);
	struct bench_rng rng;
	bench_rng_seed(&rng, 99);
	struct nb_body *bodies = calloc((size_t)n, sizeof(*bodies));
	if (!bodies)
		bench_die("calloc");
	/* a Plummer-like sphere: dense centre, thin halo */
	for (long i = 0; i < n; i++) {
		double r = 0;
		for (int k = 0; k < 3; k++) {
			double u = (double)(bench_rng_next(&rng) >> 11) / 9007199254740992.0 - 0.5;
			bodies[i].pos[k] = u;
			r += u * u;
		}
		double s = 0.2 + 2 * r;
		for (int k = 0; k < 3; k++) {
			bodies[i].pos[k] *= s;
			bodies[i].vel[k] = -0.1 * bodies[i].pos[(k + 1) % 3];
		}
		bodies[i].mass = 1.0 / (double)n;
	}
	unsigned long encounters = 0;
	double t0 = bench_now();
	for (long s = 0; s < steps; s++) {
		double lo[3] = {1e30, 1e30, 1e30}, hi[3] = {-1e30, -1e30, -1e30};
		for (long i = 0; i < n; i++)
			for (int k = 0; k < 3; k++) {
				lo[k] = fmin(lo[k], bodies[i].pos[k]);
				hi[k] = fmax(hi[k], bodies[i].pos[k]);
			}
		double centre[3], half = 0;
		for (int k = 0; k < 3; k++) {
			centre[k] = (lo[k] + hi[k]) / 2;
			half = fmax(half, (hi[k] - lo[k]) / 2 + 1e-9);
		}
		struct nb_cell *root = nb_cell_new(centre, half);
		for (long i = 0; i < n; i++) {
			struct nb_leaf *l = malloc(sizeof(*l));
			if (!l)
				bench_die("malloc");
			l->body = &bodies[i];
			for (int k = 0; k < 3; k++)
				l->pos[k] = bodies[i].pos[k];
			l->mass = bodies[i].mass;
			nb_insert(root, l, 0);
		}
		nb_summarize(root);
		struct nb_near *near = NULL;
		for (long i = 0; i < n; i++) {
			for (int k = 0; k < 3; k++)
				bodies[i].acc[k] = 0;
			nb_walk(root, &bodies[i], bodies, &near);
		}
		for (long i = 0; i < n; i++)
			for (int k = 0; k < 3; k++) {
				bodies[i].vel[k] += DT * bodies[i].acc[k];
				bodies[i].pos[k] += DT * bodies[i].vel[k];
			}
		while (near) {
			struct nb_near *next = near->next;
			encounters++;
			free(near);
			near = next;
		}
		nb_free(root);
	}
	double elapsed = bench_now() - t0;
	double com[3] = {0, 0, 0};
	for (long i = 0; i < n; i++)
		for (int k = 0; k < 3; k++)
			com[k] += bodies[i].pos[k] * bodies[i].mass;
	free(bodies);
	printf("ops_per_sec=%.2f elapsed=%.6f steps=%ld cells=%lu encounters=%lu cx=%.9f cy=%.9f "
	       "cz=%.9f\n",
	       (double)steps / elapsed, elapsed, steps, nb_cells, encounters, com[0], com[1],
	       com[2]);
	return 0;
}
