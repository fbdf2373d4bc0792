/* sizeclass.c — builds the size-class tables once, before the first allocation. */
#include "sizeclass.h"

uint32_t sc_size[LA_NCLASSES];
uint32_t sc_pages[LA_NCLASSES];
uint32_t sc_blocks[LA_NCLASSES];
uint32_t sc_recip[LA_NCLASSES];
uint32_t sc_recip_pm[LA_NCLASSES + 1];
uint16_t sc_batch[LA_NCLASSES];
uint8_t sc_lookup[65];

void sc_init(void)
{
	unsigned c = 0;
	for (uint32_t s = 16; s <= 128; s += 16)
		sc_size[c++] = s;
	for (uint32_t base = 128; base < LA_SMALL_MAX; base *= 2) {
		uint32_t steps = base < 4096 ? 4 : 8; /* as sc_class_of */
		for (uint32_t q = 1; q <= steps; q++)
			sc_size[c++] = base + q * (base / steps);
	}
	for (c = 0; c < LA_NCLASSES; c++) {
		uint32_t s = sc_size[c];
		uint32_t n0 = LA_MAX(16u, (8u * s + (uint32_t)LA_PAGE - 1) / (uint32_t)LA_PAGE);
		uint32_t best = n0, best_waste = UINT32_MAX;
		for (uint32_t n = n0; n < n0 + 8; n++) {
			uint32_t waste =
			        (uint32_t)((n * LA_PAGE) % s) * 1024u / (uint32_t)(n * LA_PAGE);
			if (waste < best_waste) {
				best = n;
				best_waste = waste;
			}
		}
		sc_pages[c] = best;
		sc_blocks[c] = (uint32_t)(best * LA_PAGE / s);
		sc_recip[c] = (uint32_t)((((uint64_t)1 << 32) + s - 1) / s);
		sc_recip_pm[c + 1] = sc_recip[c];
		sc_batch[c] = (uint16_t)LA_MAX(4u, SC_BATCH_BYTES / s);
	}
	for (unsigned i = 0; i <= 64; i++) {
		size_t n = (size_t)i * 16;
		unsigned k = 0;
		while (sc_size[k] < n)
			k++;
		sc_lookup[i] = (uint8_t)k;
	}
}
