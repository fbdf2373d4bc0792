#!/usr/bin/env bats
# san: skip
# demo.bats — `make demo` (scripts/demo.sh, the README's first command) end to end on this
# build: it passes, and each memory line it prints is one moment's figures: RSS from
# /proc beside the allocator's own, free resident never above that RSS. (Read from `ps`,
# whose figures may be up to 1 s old, the lines right after release and trim showed the
# memory from before them: "after RSS 28.4 MiB ... free resident 669.8 MiB".)
load ../cli/helpers

@test "make demo runs end to end, and its before/after lines agree with the kernel" {
	[ -x "$BUILD/allocctld" ] || skip "allocctld is not built"
	[ -e "$LIBALLOC_SO" ] || skip "liballoc.so is not built"
	run env BUILD="$BUILD" bash "$ROOT/scripts/demo.sh"
	echo "$output" | grep -E 'allocator: in use|demo:' >&3 || true
	[ "$status" -eq 0 ]
	local n=0 line rss fr
	while IFS= read -r line; do
		rss=$(sed -E 's/.* RSS ([0-9.]+) MiB.*/\1/' <<<"$line")
		fr=$(sed -E 's/.*free resident ([0-9.]+) MiB.*/\1/' <<<"$line")
		awk -v r="$rss" -v f="$fr" 'BEGIN { exit !(f <= r) }' ||
			{ echo "free resident $fr MiB above RSS $rss MiB: $line"; false; }
		n=$((n + 1))
	done < <(grep 'allocator: in use' <<<"$output")
	# flush and release, then trim: a line before and after each
	[ "$n" -eq 4 ]
	# after the trim nothing free stays resident
	grep 'allocator: in use' <<<"$output" | tail -1 | grep -q 'free resident 0.0 MiB'
}
