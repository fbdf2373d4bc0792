#!/usr/bin/env bats
# ctld_hostile.bats — segments that must not be trusted: each broken or planted file is
# skipped with one log line naming the reason (not repeated by later rescans), never listed,
# and the daemon keeps serving the valid process beside it; a segment rewritten and
# truncated under the daemon's feet never crashes it.

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup --other-uid # one test runs a fake segment as nobody
	start_daemon --rescan-ms 100
	start_fake --exe /usr/bin/goodsvc
	GOOD=$FPID
	wait_listed "$GOOD"
}

teardown() {
	ctld_teardown
}

# refused MODE "log reason": the fake of MODE is skipped with that reason, logged once
refused() {
	local mode=$1 reason=$2
	start_fake --mode "$mode"
	local bad=$FPID
	wait_until grep -q "skipping segment .*liballoc.$bad.seg" "$T/log"
	wait_rescans 3 # later scans neither log it again nor list it
	run ctl list
	[[ "$output" == *"process pid=$GOOD "* ]]
	[[ "$output" != *"process pid=$bad "* ]]
	grep "skipping segment .*liballoc.$bad.seg" "$T/log" >"$T/lines" || true
	cat "$T/lines"
	[ "$(wc -l <"$T/lines")" -eq 1 ]
	grep -q -- "$reason" "$T/lines"
	kill -0 "$DPID"
	metrics | "$PROMCHECK" >/dev/null
}

@test "bad magic is refused" { refused bad-magic "bad magic"; }
@test "another ABI version is refused" { refused bad-version "unsupported ABI version (ABI version 7, this reader knows 2..6)"; }
@test "a wrong header size is refused" { refused bad-header "bad header size"; }
@test "a truncated file is refused" { refused truncated "size invalid or changed"; }
@test "an oversized file is refused" { refused oversized "size invalid or changed (file size 268435456)"; }
@test "a segment readable by others (0644) is refused" { refused wrong-mode "mode is not 0600 (mode 0644)"; }
@test "a symbolic link is refused" { refused symlink "is a symbolic link"; }
@test "an offset beyond the end is refused" { refused offsets-oob "offset or length outside the file (tunables at"; }
@test "arena_count above arena_slots is refused" { refused counts "counts out of bounds"; }
@test "a file owned by another user in our run directory is refused" { refused wrong-owner "wrong owner (owned by uid 65534, expected 0)"; }
@test "a header uid that differs from the file owner is refused" { refused uid-mismatch "wrong owner (header uid 1, file owner 0)"; }
@test "a header pid that differs from the file name is refused" { refused name-mismatch "file name does not match the header"; }
@test "a FIFO named like a segment is refused without blocking" { refused fifo "not a regular file"; }

@test "a segment claiming another user's process is refused" {
	# pid 1 runs as root; plant a segment for it owned by nobody in nobody's directory
	mkdir -m 700 "$T/nob" && chown nobody "$T/nob"
	kill -TERM "$DPID"; wait "$DPID" || true
	start_daemon --rescan-ms 100 --run-dir "$T/nob"
	"$AS_USER" nobody "$FAKESEG" --dir "$T/nob" \
		--mode foreign-pid --claim-pid 1 --ready "$T/nob/ready" >/dev/null 2>&1 3>&- &
	echo $! >>"$T/pids"
	wait_file "$T/nob/ready"
	wait_until grep -q "skipping segment $T/nob/liballoc.1.seg: wrong owner (pid 1 runs as uid 0, segment owned by 65534)" "$T/log"
	run ctl list
	[[ "$output" != *"process pid=1 "* ]]
}

@test "a segment rewritten and truncated under the daemon never crashes it" {
	start_fake --mode rewrite
	bad=$FPID
	local i
	for i in $(seq 40); do # rounds, not seconds: as many reads on a slow machine
		metrics >/dev/null
		ctl list >/dev/null
		ctl set all top_pad=1M >/dev/null || true
		ctl stats "$bad" >/dev/null || true
	done
	kill -0 "$DPID"
	run ctl list
	[[ "$output" == *"process pid=$GOOD "* ]]
	run ctl set "$GOOD" top_pad=2M
	[[ "$output" == *"result pid=$GOOD exe=goodsvc code=OK"* ]]
}

@test "a run directory writable by others is not watched" {
	mkdir -m 777 "$T/open"
	kill -TERM "$DPID"; wait "$DPID" || true
	start_daemon --run-dir "$T/open"
	FAKE_DIR="$T/open" start_fake
	wait_until grep -q "not watching run directory $T/open: writable by others (mode 0777)" "$T/log"
	wait_rescans 2
	run ctl list
	[[ "$output" != *"process pid=$FPID "* ]]
}
