#!/usr/bin/env bats
# foreignfree.bats — the code of a free of another thread's block (free_other in
# liballoc/src/malloc.c: the consumer of a producer/consumer pair, bench/xmalloc.c). The
# block was written last on its producer's core; the free reads its second word (the
# double-free mark) and then writes the mark: a load and then a store of a line another
# core holds modified are two transfers of it, a prefetch for writing first is one
# (bench/README.md, session 40, xmalloc40: with the two threads on two CPUs, 64 such frees
# 5,087 -> 4,417 TSC ticks, the run's CPU 0.285 -> 0.225 s). gcc compiles
# __builtin_prefetch(p, 1) to a plain prefetcht0 unless built for a CPU with prefetchw,
# hence la_prefetch_w (common.h), and this test of what was built.
# san: skip

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	command -v objdump >/dev/null || skip "no objdump"
	readelf -h "$LIBALLOC_SO" | grep -q 'X86-64' || skip "not x86-64"
}

@test "a free of another thread's block asks for the block's line for writing before it reads it" {
	local T="$BATS_TEST_TMPDIR/free_other.s"
	objdump -d --no-show-raw-insn --disassemble=free_other "$LIBALLOC_SO" |
		awk '/<free_other>:$/ { on = 1; next } on && /^$/ { exit } on' >"$T"
	cat "$T"
	[ -s "$T" ] # (the function is there, by its name)
	# the prefetch comes before the function's first branch: before the checks of the
	# page-map word and the read of the block's mark, on every path
	awk '$2 ~ /^j/ { exit } { print }' "$T" >"$T.head"
	echo "up to the first branch:"
	cat "$T.head"
	grep -qE 'prefetchw +\(%r[a-z0-9]+\)' "$T.head"
}
