/* holds.c — tunables set for a limited time (issue 20: allocctl set --for, a policy's decay
 * rung): the value before and where it came from come back when the hold expires (the
 * control thread calls tun_holds_expire at the earliest expiry), a second held set moves
 * the expiry but keeps the first value to return to, an explicit set without a hold ends
 * it, pinning a threshold holds mmap_dynamic too, and the segment publishes every hold.
 * Linked with liballoc.a; reads the allocator's own state. */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "liballoc.h"
#include "os.h"
#include "shm.h"
#include "tunables.h"

#define SEC 1000000000ull

static void held(int id, int64_t v, uint64_t hold_ns)
{
	char reason[160];
	cr_assert_eq(tun_set_held(id, v, LA_SRC_command, hold_ns, reason, sizeof(reason)), LA_ST_OK,
	             "%s", reason);
}

static const struct la_shm_hold *published(int id)
{
	const struct la_shm_header *h = shm_header();
	cr_assert_neq(h->off_holds, 0);
	return (const struct la_shm_hold *)((const char *)h + h->off_holds) + id;
}

Test(holds, a_held_value_returns_with_its_source_when_the_hold_expires)
{
	A(free)(A(malloc)(16)); /* the allocator is up */
	int id = LA_TUNABLE_decay_ms;
	int64_t before = TUN(decay_ms);
	uint32_t source_before = tun_source[id];
	uint64_t now = os_now_ns();
	held(id, 123, 60 * SEC);
	cr_assert_eq(TUN(decay_ms), 123);
	cr_assert_eq(tun_source[id], LA_SRC_command);
	uint64_t due = tun_holds_next();
	cr_assert(due >= now + 60 * SEC && due < os_now_ns() + 61 * SEC, "due %llu",
	          (unsigned long long)due);
	cr_assert_eq(published(id)->expires_ns, due);
	cr_assert_eq(published(id)->revert_value, before);
	cr_assert_eq(published(id)->revert_source, source_before);
	/* not yet: nothing changes, the next expiry is reported */
	cr_assert_eq(tun_holds_expire(due - 1), due);
	cr_assert_eq(TUN(decay_ms), 123);
	/* due: back, with the source it had; nothing held any more */
	cr_assert_eq(tun_holds_expire(due), 0);
	cr_assert_eq(TUN(decay_ms), before);
	cr_assert_eq(tun_source[id], source_before);
	cr_assert_eq(tun_holds_next(), 0);
	cr_assert_eq(published(id)->expires_ns, 0);
	const struct la_shm_tunable *t =
	        (const struct la_shm_tunable *)((const char *)shm_header() +
	                                        shm_header()->off_tunables);
	cr_assert_eq(t[id].value, before, "the segment shows the value back");
}

Test(holds, a_second_held_set_extends_and_keeps_the_first_value_to_return_to)
{
	A(free)(A(malloc)(16));
	int id = LA_TUNABLE_tcache_max_bytes;
	int64_t before = TUN(tcache_max_bytes);
	held(id, 64 << 10, 10 * SEC);
	uint64_t first = tun_holds_next();
	held(id, 32 << 10, 20 * SEC);
	uint64_t second = tun_holds_next();
	cr_assert_gt(second, first + 9 * SEC);
	cr_assert_eq(tun_holds[id].revert_value, before);
	tun_holds_expire(second);
	cr_assert_eq(TUN(tcache_max_bytes), before);
}

Test(holds, an_explicit_set_without_a_hold_ends_it)
{
	A(free)(A(malloc)(16));
	int id = LA_TUNABLE_decay_ms;
	held(id, 500, 10 * SEC);
	char reason[160];
	cr_assert_eq(tun_set(id, 700, LA_SRC_command, reason, sizeof(reason)), LA_ST_OK);
	cr_assert_eq(tun_holds_next(), 0, "the operator decided: nothing reverts");
	cr_assert_eq(tun_holds_expire(os_now_ns() + 100 * SEC), 0);
	cr_assert_eq(TUN(decay_ms), 700);
}

Test(holds, a_held_threshold_brings_mmap_dynamic_back_too)
{
	A(free)(A(malloc)(16));
	cr_assert_eq(TUN(mmap_dynamic), 1);
	int64_t thr = TUN(mmap_threshold);
	uint32_t thr_src = tun_source[LA_TUNABLE_mmap_threshold];
	held(LA_TUNABLE_mmap_threshold, 1 << 20, 5 * SEC);
	cr_assert_eq(TUN(mmap_dynamic), 0, "pinning a threshold turns the dynamic one off");
	cr_assert_neq(tun_holds[LA_TUNABLE_mmap_dynamic].expires_ns, 0);
	tun_holds_expire(os_now_ns() + 6 * SEC);
	cr_assert_eq(TUN(mmap_threshold), thr);
	cr_assert_eq(TUN(mmap_dynamic), 1);
	cr_assert_eq(tun_source[LA_TUNABLE_mmap_threshold], thr_src);
	cr_assert_eq(tun_source[LA_TUNABLE_mmap_dynamic], LA_SRC_default);
}

Test(holds, the_control_thread_reverts_by_itself)
{
	A(free)(A(malloc)(16));
	int64_t before = TUN(decay_ms);
	/* as a held set through the mailbox does: the control thread sleeps until it is due */
	held(LA_TUNABLE_decay_ms, 4242, SEC / 5);
	shm_wake_control();
	struct timespec ts = {0, 20 * 1000 * 1000};
	for (int i = 0; i < 500 && TUN(decay_ms) != before; i++)
		nanosleep(&ts, NULL);
	cr_assert_eq(TUN(decay_ms), before, "not reverted within 10 s");
}
