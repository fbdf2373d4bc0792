/* sizeclass.c — builds the size-class tables once, before the first allocation. */
#include "sizeclass.h"

uint32_t sc_size[LA_NCLASSES];
uint32_t sc_pages[LA_NCLASSES];
uint32_t sc_blocks[LA_NCLASSES];
uint32_t sc_recip[LA_NCLASSES];
uint32_t sc_recip_pm[LA_NCLASSES + 1];
uint16_t sc_batch[LA_NCLASSES];
uint8_t sc_lookup[65];
uint8_t sc_upper[SC_UPPER_BUCKETS];

/* Pages of a span of class size s: between 4 and 8 KiB the SC_FIT_PAGES the size was made
 * for; else, of 16 to 23 pages (and at least 8 blocks) the one that leaves the smallest
 * share unused. */
static uint32_t span_pages(uint32_t s)
{
	if (s > SC_EIGHTHS_FROM && s <= 2 * SC_EIGHTHS_FROM)
		return SC_FIT_PAGES;
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

void sc_init(void)
{
	unsigned c = 0;
	for (uint32_t s = 16; s <= 128; s += 16)
		sc_size[c++] = s;
	for (uint32_t base = 128; base < SC_EIGHTHS_FROM; base *= 2)
		for (uint32_t q = 1; q <= 4; q++) /* as sc_class_of */
			sc_size[c++] = base + q * (base / 4);
	/* up to 8 KiB: the largest multiple of 16 bytes of which k = 15, 14, ..., 8 fit in
	 * SC_FIT_PAGES pages; above, eighths */
	for (uint32_t k = 15; k >= 8; k--)
		sc_size[c++] = SC_FIT_PAGES * (uint32_t)LA_PAGE / k / LA_ALIGN * LA_ALIGN;
	for (uint32_t base = 2 * SC_EIGHTHS_FROM; base < LA_SMALL_MAX; base *= 2)
		for (uint32_t q = 1; q <= 8; q++)
			sc_size[c++] = base + q * (base / 8);
	for (c = 0; c < LA_NCLASSES; c++) {
		uint32_t s = sc_size[c];
		sc_pages[c] = span_pages(s);
		sc_blocks[c] = (uint32_t)(sc_pages[c] * LA_PAGE / s);
		sc_recip[c] = (uint32_t)((((uint64_t)1 << 32) + s - 1) / s);
		sc_recip_pm[c + 1] = sc_recip[c];
		sc_batch[c] = (uint16_t)LA_MAX(4u, SC_BATCH_BYTES / s);
	}
	/* the first class that holds n, for growing n: k only moves up */
	unsigned k = 0;
	for (unsigned i = 0; i <= 64; i++) {
		size_t n = (size_t)i * 16;
		while (sc_size[k] < n)
			k++;
		sc_lookup[i] = (uint8_t)k;
	}
	for (unsigned i = 0; i < SC_UPPER_BUCKETS; i++) {
		uint32_t n = SC_EIGHTHS_FROM + 1 + i * SC_UPPER_STEP; /* the bucket's first size */
		while (sc_size[k] < n)
			k++;
		sc_upper[i] = (uint8_t)k;
	}
}
