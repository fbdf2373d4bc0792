/* la_stubs.c — the allocator symbols liballoc/src/tunables.c refers to beyond fatal.c,
 * reduced to what a parser test may rely on: there is no segment to publish into, no
 * control thread to wake, no thread cache to refresh, and the CPU count is fixed. Linked
 * only into fuzz_units. */
#include <stdint.h>

#include "os.h"
#include "shm.h"
#include "tcache.h"

uint32_t tcache_gen;

void shm_publish_tunables(void)
{
}

void shm_wake_control(void)
{
}

void tcache_check_self(void)
{
}

int os_ncpus(void)
{
	return 2;
}

uint64_t os_now_ns(void)
{
	return 0; /* holds are not exercised by the parsers */
}
