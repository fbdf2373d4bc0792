#!/usr/bin/env bats
# segments.bats — issue 18: hostile and numerous segments (tests/helpers/massseg.c):
#  - the largest segment the library's limits allow (1024 arenas): ps, stats (every arena,
#    in pages) and /metrics answer correctly;
#  - a header beyond those limits (65536 arena slots) is refused with its reason;
#  - a seqlock held odd: listed as unreadable with a counter, not dropped;
#  - many small segments (1,000; 5,000 with SECURITY_LONG=1): ps, stats and /metrics all
#    correct;
#  - a uid over max_segments_per_uid: the rest left out, one log line.

bats_require_minimum_version 1.5.0

setup() {
	source "$BATS_TEST_DIRNAME/common.bash"
	sec_setup
	MASSSEG="$TESTS_BIN/massseg"
}

teardown() {
	sec_teardown
}

# mass ARGS...: run massseg in $T/segs, wait until it published; sets MPID
mass() {
	"$MASSSEG" --dir "$T/segs" --ready "$T/mass.ready" "$@" >"$T/mass.out" 2>&1 3>&- &
	MPID=$!
	echo "$MPID" >>"$T/pids"
	wait_file "$T/mass.ready" 60
}

# listed_count: processes the daemon lists (every page)
listed_count() {
	ctl --timeout 20000 list | grep -c '^process '
}

@test "the largest legal segment (1024 arenas): ps, stats in pages and /metrics answer" {
	start_daemon
	mass --arenas 1024
	wait_until eval '[ "$(ctl list | grep -c "^process .*arenas=1024 ")" -eq 1 ]'
	local pid
	pid=$(ctl list | sed -n 's/^process pid=\([0-9]*\) .*arenas=1024 .*/\1/p')
	run -0 "$ALLOCCTL" --socket "$SOCK" --json stats "$pid"
	echo "$output" | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert len(d['arenas']) == 1024, len(d['arenas'])
assert [a['index'] for a in d['arenas']] == list(range(1024))
assert d['totals']['heaps'] == 1024
assert d['totals']['allocated_bytes'] == 4096"
	metrics >"$T/m"
	"$PROMCHECK" "$T/m"
	[ "$(grep -c "^liballoc_arena_heaps{pid=\"$pid\"" "$T/m")" -eq 1024 ]
}

@test "a segment beyond the library's limits (65536 arena slots) is refused with its reason" {
	start_daemon
	mass --arenas 1 --slots 65536
	local kid
	kid=$(ls "$T/segs" | sed -n 's/^liballoc\.\([0-9]*\)\.seg$/\1/p')
	wait_until grep -Eq "skipping segment $T/segs/liballoc.$kid.seg: (size invalid or changed \(file size [0-9]+\)|counts out of bounds)" "$T/log"
	run ctl list
	[[ "$output" != *"pid=$kid "* ]]
}

@test "a seqlock held odd: listed as unreadable with a counter, not dropped" {
	start_daemon
	mass --torn
	local kid
	kid=$(ls "$T/segs" | sed -n 's/^liballoc\.\([0-9]*\)\.seg$/\1/p')
	wait_listed "$kid"
	run ctl list
	[[ "$output" == *"process pid=$kid "*" unreadable"* ]]
	run -0 "$ALLOCCTL" --socket "$SOCK" ps
	[[ "$output" == *" $kid "*"unreadable"* ]]
	run -0 "$ALLOCCTL" --socket "$SOCK" --json ps
	echo "$output" | python3 -c "
import json, sys
p = [p for p in json.load(sys.stdin)['processes'] if p['pid'] == $kid][0]
assert p['unreadable'] is True and p['unreadable_reads'] >= 1, p"
	run -1 --separate-stderr "$ALLOCCTL" --socket "$SOCK" stats "$kid"
	[[ "$stderr" == *"unreadable"* ]]
	# one log line, however often it is asked for
	for _ in 1 2 3; do ctl list >/dev/null; done
	[ "$(grep -c "pid $kid .*shown as unreadable" "$T/log")" -eq 1 ]
}

@test "many small segments (1,000; 5,000 with SECURITY_LONG=1): ps, stats and /metrics all correct" {
	local n=1000
	[ "$SECURITY_LONG" = 1 ] && n=5000
	printf 'max_segments_per_uid = 6000\n' >"$T/conf"
	start_daemon --config "$T/conf"
	mass --count "$n"
	[ "$(cat "$T/mass.ready")" -eq "$n" ]
	wait_until -t $((TEST_DEADLINE * n / 1000)) eval '[ "$(listed_count)" -eq '"$n"' ]'
	run -0 "$ALLOCCTL" --socket "$SOCK" --timeout 30s --json ps
	echo "$output" >"$T/ps.json"
	python3 - "$T/ps.json" "$n" <<'PY'
import json, sys
ps, n = json.load(open(sys.argv[1]))["processes"], int(sys.argv[2])
assert len(ps) == n, len(ps)
pids = [p["pid"] for p in ps]
assert pids == sorted(pids) and len(set(pids)) == n
# massseg's child i has 4096 * (i + 1) bytes in use: every figure appears once
assert sorted(p["memory"]["in_use_bytes"] for p in ps) == [4096 * (i + 1) for i in range(n)]
assert all(p["name"] == "massseg" and p["exe"].endswith("/massseg") for p in ps)
PY
	local pid
	pid=$(python3 -c "import json; print(json.load(open('$T/ps.json'))['processes'][-1]['pid'])")
	run -0 ctl stats "$pid"
	[[ "$output" == *"code=OK"* ]]
	curl -sf --max-time 60 "http://$HTTP/metrics" >"$T/m"
	"$PROMCHECK" "$T/m"
	[ "$(grep -c '^liballoc_in_use_bytes{' "$T/m")" -eq "$n" ]
	run curl -sf "http://$HTTP/healthz"
	[ "$output" = "ok $n processes" ]
	# allocctl ps asks once and the pages follow unasked (ListRequest.stream): the same
	# processes, in more than one page, as a list asked page by page
	ctl --timeout 20000 list >"$T/asked"
	ctl --timeout 20000 list-stream >"$T/streamed"
	[ "$(grep -c '^process ' "$T/streamed")" -eq "$n" ]
	[ "$(sed -n 's/^pages=//p' "$T/streamed")" -ge 2 ]
	diff <(sed -n 's/^process \(pid=[0-9]*\) .*/\1/p' "$T/asked") \
		<(sed -n 's/^process \(pid=[0-9]*\) .*/\1/p' "$T/streamed")
	# a client gone in the middle of a stream (it dies at its first page): the daemon ends
	# the stream and serves the next client
	for _ in 1 2 3; do
		"$CTLCLIENT" --socket "$SOCK" --timeout 20000 list-stream | head -n 1 >/dev/null
	done
	[ "$(listed_count)" -eq "$n" ]
	kill -0 "$DPID"
}

@test "a uid over max_segments_per_uid: the rest are left out, with one log line" {
	printf 'max_segments_per_uid = 20\n' >"$T/conf"
	start_daemon --config "$T/conf"
	mass --count 30
	wait_until eval '[ "$(listed_count)" -eq 20 ]'
	wait_until grep -q "uid 0 has 20 segments tracked (max_segments_per_uid)" "$T/log"
	# the daemon scans the directory again without saying it again
	wait_rescans 2
	[ "$(grep -c 'max_segments_per_uid' "$T/log")" -eq 1 ]
	[ "$(listed_count)" -eq 20 ]
}
