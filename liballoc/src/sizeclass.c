/* sizeclass.c — the size-class tables. sc_compute builds them from the rules below; the
 * build runs it once (this file compiled with SC_GEN: a program that prints them,
 * build/gen/sc_tables.h), and the tables are those constants (.rodata: shared, written by
 * no process): the rules' 8,500 instructions (640 divisions) ran in every process's start
 * before, and a copy of them took 1.2 KiB of .bss on the page every start writes. */
#include "sizeclass.h"

/* 16-byte steps to 128, four per doubling to 4 KiB and the fifths, 8 + 8 above, one at
 * SC_QUARTERS_FROM + SC_HEAD16K and 4 from SC_QUARTERS_FROM */
_Static_assert(SC_FIFTH_TO == SC_FIFTH_FROM << (SC_FIFTHS - 1), "SC_FIFTHS doublings");
_Static_assert(LA_NCLASSES == 8 + 4 * 5 + SC_FIFTHS + 16 + 1 + 4, "the classes sc_compute makes");
_Static_assert(SC_QUARTER_BLOCKS *(SC_QUARTERS_FROM + SC_HEAD16K) % LA_PAGE == 0,
               "the class at 16 KiB + SC_HEAD16K fills its span");
_Static_assert(LA_SMALL_MAX == 2 * SC_QUARTERS_FROM && SC_QUARTERS_FROM == 4 * SC_EIGHTHS_FROM,
               "one doubling of quarters after two of eighths");

_Static_assert(SC_UPPER_FROM == 1024, "sc_small4 has 1024 + 1 entries");
_Static_assert(SC_FIFTH_FROM == 256, "sc_small4's fifths at 288 and 576");
const uint8_t sc_small4[SC_UPPER_FROM + 1] = SC_SMALL4_INIT;

/* Pages of a span of class size s: between 4 and 8 KiB the SC_FIT_PAGES the size was made
 * for; above SC_QUARTERS_FROM SC_QUARTER_BLOCKS blocks (whole pages: 17 for 4 of 17,408
 * bytes); else, of 16 to 23
 * pages (and at least 8 blocks) the one that leaves the smallest share unused. */
static uint32_t span_pages(uint32_t s)
{
	if (s > SC_EIGHTHS_FROM && s <= 2 * SC_EIGHTHS_FROM)
		return SC_FIT_PAGES;
	if (s > SC_QUARTERS_FROM)
		return SC_QUARTER_BLOCKS * s / (uint32_t)LA_PAGE;
	uint32_t n0 = LA_MAX(16u, (8u * s + (uint32_t)LA_PAGE - 1) / (uint32_t)LA_PAGE);
	uint32_t best = n0, best_waste = UINT32_MAX;
	for (uint32_t n = n0; n < n0 + 8; n++) {
		uint32_t waste = (uint32_t)((n * LA_PAGE) % s) * 1024u / (uint32_t)(n * LA_PAGE);
		if (waste < best_waste) {
			best = n;
			best_waste = waste;
		}
	}
	return best;
}

void sc_compute(struct sc_tables *t)
{
	unsigned c = 0;
	for (uint32_t s = 16; s <= 128; s += 16)
		t->size[c++] = s;
	for (uint32_t base = 128; base < SC_EIGHTHS_FROM; base *= 2) {
		if (base >= SC_FIFTH_FROM && base <= SC_FIFTH_TO)
			t->size[c++] = base + base / 8;
		for (uint32_t q = 1; q <= 4; q++)
			t->size[c++] = base + q * (base / 4);
	}
	/* up to 8 KiB: the largest multiple of 16 bytes of which k = 15, 14, ..., 8 fit in
	 * SC_FIT_PAGES pages; above, eighths, and quarters (whole pages) from
	 * SC_QUARTERS_FROM */
	for (uint32_t k = 15; k >= 8; k--)
		t->size[c++] = SC_FIT_PAGES * (uint32_t)LA_PAGE / k / LA_ALIGN * LA_ALIGN;
	for (uint32_t base = 2 * SC_EIGHTHS_FROM; base < SC_QUARTERS_FROM; base *= 2)
		for (uint32_t q = 1; q <= 8; q++)
			t->size[c++] = base + q * (base / 8);
	t->size[c++] = SC_QUARTERS_FROM + SC_HEAD16K;
	for (uint32_t q = 1; q <= 4; q++)
		t->size[c++] = SC_QUARTERS_FROM + q * (SC_QUARTERS_FROM / 4);
	t->recip_pm[0] = 0;
	for (c = 0; c < LA_NCLASSES; c++) {
		uint32_t s = t->size[c];
		t->pages[c] = span_pages(s);
		t->blocks[c] = (uint32_t)(t->pages[c] * LA_PAGE / s);
		t->recip_pm[c + 1] = (uint32_t)((((uint64_t)1 << 32) + s - 1) / s);
		t->batch[c] = (uint16_t)LA_MAX(4u, SC_BATCH_BYTES / s);
		t->grow[c] = (uint16_t)LA_MIN(s + s / 2, SC_GROW_MAX);
		/* the sizes of class c - SC_KEEP_BELOW and up, and those above half the
		 * largest class */
		uint32_t keep = c > SC_KEEP_BELOW ? t->size[c - SC_KEEP_BELOW - 1] + 1 : 1;
		t->keep[c] = (uint16_t)LA_MIN(keep, LA_SMALL_MAX / 2 + 1);
	}
	/* the first class that holds n, for growing n: k only moves up */
	unsigned k = sc_small4[SC_UPPER_FROM] >> 2;
	for (unsigned i = 0; i < SC_UPPER_BUCKETS; i++) {
		uint32_t n = SC_UPPER_FROM + 1 + i * SC_UPPER_STEP; /* the bucket's first size */
		while (t->size[k] < n)
			k++;
		t->upper[i] = (uint8_t)k;
	}
	/* the first class from c up whose size is a multiple of the row's alignment (the last
	 * class, LA_SMALL_MAX, is a multiple of every one); the rows' ends 0 */
	for (unsigned a = 0; a < SC_ALIGNS; a++) {
		uint32_t align = 1u << (SC_ALIGN_LG0 + a);
		for (c = 0; c < SC_ALIGN_ROW; c++) {
			unsigned up = c;
			while (up < LA_NCLASSES && t->size[up] % align)
				up++;
			t->aligned[a * SC_ALIGN_ROW + c] = (uint8_t)(c < LA_NCLASSES ? up : 0);
		}
	}
}

#ifdef SC_GEN
#include <stdio.h>

static void row(const char *name, const uint32_t *v, unsigned n)
{
	printf("#define SC_GEN_%s", name);
	for (unsigned i = 0; i < n; i++)
		printf("%s%u%s", i % 12 ? " " : " \\\n\t", v[i], i + 1 < n ? "," : "");
	printf("\n");
}

/* build/gen/sc_tables.h: sc_compute's tables as initializers */
int main(void)
{
	struct sc_tables t;
	sc_compute(&t);
	uint32_t batch[LA_NCLASSES], grow[LA_NCLASSES], keep[LA_NCLASSES];
	uint32_t upper[SC_UPPER_BUCKETS];
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		batch[c] = t.batch[c];
		grow[c] = t.grow[c];
		keep[c] = t.keep[c];
	}
	for (unsigned i = 0; i < SC_UPPER_BUCKETS; i++)
		upper[i] = t.upper[i];
	printf("/* generated by liballoc/src/sizeclass.c (SC_GEN): sc_compute's tables */\n");
	row("SIZE", t.size, LA_NCLASSES);
	row("PAGES", t.pages, LA_NCLASSES);
	row("BLOCKS", t.blocks, LA_NCLASSES);
	row("RECIP_PM", t.recip_pm, LA_NCLASSES + 1);
	row("BATCH", batch, LA_NCLASSES);
	row("GROW", grow, LA_NCLASSES);
	row("KEEP", keep, LA_NCLASSES);
	row("UPPER", upper, SC_UPPER_BUCKETS);
	printf("#define SC_GEN_ALIGNED");
	for (unsigned a = 0; a < SC_ALIGNS; a++) { /* a row each, its zeros written out */
		printf(" \\\n\t");
		for (unsigned c = 0; c < SC_ALIGN_ROW; c++)
			printf("%u%s", t.aligned[a * SC_ALIGN_ROW + c],
			       c + 1 < SC_ALIGN_ROW || a + 1 < SC_ALIGNS ? "," : "");
	}
	printf("\n");
	return 0;
}
#else
#include "sc_tables.h"

const uint32_t sc_size[LA_NCLASSES] = {SC_GEN_SIZE};
const uint32_t sc_pages[LA_NCLASSES] = {SC_GEN_PAGES};
const uint32_t sc_blocks[LA_NCLASSES] = {SC_GEN_BLOCKS};
const uint32_t sc_recip_pm[LA_NCLASSES + 1] = {SC_GEN_RECIP_PM};
const uint16_t sc_batch[LA_NCLASSES] = {SC_GEN_BATCH};
const uint16_t sc_grow[LA_NCLASSES] = {SC_GEN_GROW};
const uint16_t sc_keep[LA_NCLASSES] = {SC_GEN_KEEP};
const uint8_t sc_upper[SC_UPPER_BUCKETS] = {SC_GEN_UPPER};
const uint8_t sc_aligned[SC_ALIGNS * SC_ALIGN_ROW] = {SC_GEN_ALIGNED};
#endif
