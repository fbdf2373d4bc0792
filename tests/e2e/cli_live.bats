#!/usr/bin/env bats
# san: skip
# allocctl end to end: a real allocctld on a private socket and real processes running
# tests/helpers/workload under LD_PRELOAD=liballoc.so. Every command against them, their
# --json shapes, a live `set` whose effect shows in the next allocations' direct-mapping
# counters, `--exe` by every name a process answers to (run through a symlink: its run
# name, comm, the resolved binary and its path) and the no-match message, `release` whose
# reported bytes match the RSS drop read from /proc (within 5%),
# the daemon-side errors, and top under tmux. Skipped while the daemon or liballoc is not
# built.
load ../cli/helpers

CTLD="$BUILD/allocctld"

setup_file() {
	[ -x "$CTLD" ] && [ -e "$LIBALLOC_SO" ] || return 0
	export LIVE_DIR
	# reachable by nobody (0711): the daemon-permission test runs a copy of allocctl as
	# nobody against a 0666 socket
	LIVE_DIR=$(xuid_mkdir allocctl-live) || return 1
	live_daemon "$LIVE_DIR" --socket-mode 0666
}

teardown_file() {
	[ -z "${LIVE_DIR:-}" ] || live_daemon_stop "$LIVE_DIR"
}

setup() {
	[ -x "$CTLD" ] || skip "allocctld is not built ($CTLD)"
	[ -e "$LIBALLOC_SO" ] || skip "liballoc.so is not built ($LIBALLOC_SO)"
	[ -s "$LIVE_DIR/ready" ] || { cat "$LIVE_DIR/ctld.log" >&2; false; }
	cli_tmp
	export ALLOCCTL_SOCKET="$LIVE_DIR/ctl.sock"
	export LIBALLOC_RUN_DIR="$LIVE_DIR/seg"
}
teardown() { 
	[ -S "${CLI_TMP:-/nonexistent}/tmux.sock" ] && tmux -S "$CLI_TMP/tmux.sock" kill-server 2>/dev/null
	cli_cleanup
}

listed() { "$ALLOCCTL" ps --json | json_check "$1 in [p['pid'] for p in d['processes']]"; }

# start_workload [ENV=VALUE...] -- [workload args]: runs it preloaded, waits until it has
# gone quiet (up to 300 s) and the daemon lists it; sets WL (pid) and WL_OUT.
start_workload() {
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	WL_OUT="$CLI_TMP/workload.$RANDOM.out"
	env "${envs[@]}" LD_PRELOAD="$LIBALLOC_SO" "$WORKLOAD" "$@" >"$WL_OUT" 2>&1 3>&- &
	WL=$!
	CLI_PIDS+=("$WL")
	# the churn of 256 MiB (the release tests) takes 1.2 s of CPU: 48 s of wall time at a
	# load of 27 on 2 cores, past the default deadline at a little more
	wait_for -t 300 grep -q '^quiet' "$WL_OUT"
	wait_for listed "$WL"
}

rss_bytes() { awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$1/status"; }
total() { "$ALLOCCTL" --json stats "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['$2'])"; }

@test "live: ps lists the preloaded process, human and --json" {
	start_workload -- -t 2 -s 8M -d 0
	run -0 --separate-stderr "$ALLOCCTL" ps
	grep -Eq "^ +$WL +$(id -u)  workload " <<<"$output"
	run -0 "$ALLOCCTL" ps --json
	echo "$output" | json_check "
	  [p for p in d['processes'] if p['pid'] == $WL][0]['exe'].endswith('/workload') and
	  all(isinstance(p[k], int) for p in d['processes'] for k in
	      ('rss_bytes','arenas','threads','allocator_threads','uptime_s')) and
	  all(isinstance(p['memory'][k], int) for p in d['processes'] for k in
	      ('in_use_bytes','cached_bytes','fragmented_bytes','free_resident_bytes',
	       'free_reserved_bytes','metadata_bytes','reclaimable_bytes','resident_bytes',
	       'address_space_bytes','rss_bytes','non_allocator_rss_bytes')) and
	  [p for p in d['processes'] if p['pid'] == $WL][0]['control'] == 'running'"
}

@test "live: stats shows every counter of the segment ABI and every tunable" {
	start_workload -- -t 2 -s 8M -d 0
	run -0 "$ALLOCCTL" stats "$WL"
	[[ "${lines[0]}" == "process $WL workload ("*"/workload)" ]]
	[[ "$output" == *"system calls"*"arenas"*"size classes"*"tunables"* ]]
	counters=$(sed -n '/^#define LA_COUNTERS(X)/,/^$/p' "$ROOT/liballoc/include/liballoc_shm.h" | grep -o 'X([a-z_]*' | cut -c3- | tr '\n' ' ')
	tunables=$(sed -n '/^#define LA_TUNABLES(X)/,/^$/p' "$ROOT/liballoc/include/liballoc_shm.h" | grep -o 'X([a-z_]*' | cut -c3- | tr '\n' ' ')
	run -0 "$ALLOCCTL" --json stats "$WL"
	echo "$output" | json_check "
	  d['process']['pid'] == $WL and
	  set('$counters'.split()) <= set(d['totals']) and
	  set('$tunables'.split()) == set(d['tunables']) and
	  len(d['arenas']) >= 1 and all('allocated_bytes' in a['counters'] for a in d['arenas'])"
}

@test "live: the size classes' figures are the arenas' sums: one refill and flush each" {
	# two threads on two arenas, quiet: every refill and flush is counted once in its class
	start_workload -- -t 2 -s 8M -d 0
	run -0 "$ALLOCCTL" --json stats "$WL"
	echo "$output" | json_check "
	  len(d['arenas']) >= 1 and
	  sum(c['counters']['refills'] for c in d['classes']) == d['totals']['cache_refills'] and
	  sum(c['counters']['flushes'] for c in d['classes']) ==
	      d['totals']['cache_flushes'] + d['totals']['cache_flushes_deferred'] and
	  sum(c['counters']['refills'] for c in d['classes']) > 0 and
	  any(c['counters']['blocks_in_use'] > 0 and c['counters']['spans'] > 0
	      for c in d['classes']) and
	  all(c['counters']['blocks_in_use'] < 1 << 40 for c in d['classes'])"
}

@test "live: get reads what the environment set" {
	start_workload LIBALLOC_MMAP_THRESHOLD=256K LIBALLOC_DECAY_MS=0 -- -t 1 -s 4M -d 0
	run -0 "$ALLOCCTL" get "$WL" mmap_threshold decay_ms
	[[ "${lines[1]}" == "mmap_threshold"*"256.0 KiB"* ]]
	[[ "${lines[2]}" == "decay_ms"*"0 ms"* ]]
	run -0 "$ALLOCCTL" get "$WL" mmap_threshold --json
	echo "$output" | json_check "d['results'][0]['pid'] == $WL and d['results'][0]['tunables']['mmap_threshold']['value'] == 262144"
}

@test "live: set lowers the mmap threshold and the next allocations become direct mappings" {
	start_workload LIBALLOC_MMAP_THRESHOLD=1M -- -t 1 -s 4M -d 0 -b 512K -n 8
	d0=$(total "$WL" direct_mappings)
	# 512 KiB is below the 1 MiB threshold: served from a heap.
	kill -USR1 "$WL"
	wait_for grep -q '^burst 8$' "$WL_OUT"
	d1=$(total "$WL" direct_mappings)
	[ "$d1" -eq "$d0" ]
	run -0 --separate-stderr "$ALLOCCTL" set "$WL" mmap_threshold=256K
	[[ "$output" == "set $WL: mmap_threshold = 256.0 KiB (was 1.0 MiB) in "* ]]
	run -0 "$ALLOCCTL" get "$WL" mmap_threshold --json
	echo "$output" | json_check "d['results'][0]['tunables']['mmap_threshold']['value'] == 262144"
	# Now each 512 KiB block gets its own mapping. A block at or above the threshold takes
	# a heap's free run when at least half of it is resident (aac3f40): the trim returns
	# the pages the workload's live set left free at its end, which 512 KiB windows of
	# them would otherwise serve.
	run -0 "$ALLOCCTL" trim "$WL"
	kill -USR1 "$WL"
	wait_for grep -q '^burst 16$' "$WL_OUT"
	d2=$(total "$WL" direct_mappings)
	[ "$((d2 - d1))" -eq 8 ]
}

@test "live: set --exe and --all reach the process and name it" {
	start_workload -- -t 1 -s 4M -d 0
	run -0 "$ALLOCCTL" set --exe workload decay_ms=5s
	grep -qx "set $WL (workload): decay_ms = 5 s in .*" <<<"$output"
	run -0 "$ALLOCCTL" --json set --all decay_ms=6s
	echo "$output" | json_check "[r for r in d['results'] if r['pid'] == $WL][0]['tunables']['decay_ms']['value'] == 6000"
	run -0 "$ALLOCCTL" get "$WL" decay_ms
	[[ "${lines[1]}" == "decay_ms"*"6 s"* ]]
}

@test "live: --exe by the name run through a symlink, its comm, the resolved binary and its path; no match says so" {
	mkdir "$CLI_TMP/bin"
	ln -s "$WORKLOAD" "$CLI_TMP/bin/my-service-with-a-long-name"
	WORKLOAD="$CLI_TMP/bin/my-service-with-a-long-name" start_workload -- -t 1 -s 4M -d 0
	local name real
	real=$(readlink -f "$WORKLOAD")
	# the run name (argv[0] through the symlink) and comm (its first 15 bytes): only ours
	for name in my-service-with-a-long-name my-service-with; do
		run -0 "$ALLOCCTL" set --exe "$name" decay_ms=5s
		grep -qx "set $WL (my-service-with-a-long-name): decay_ms = 5 s in .*" <<<"$output" ||
			{ echo "--exe $name: $output"; false; }
	done
	# the binary as the kernel resolved it, by basename and by path (other tests' workloads
	# may still be listed while they exit: only our line is asserted)
	for name in "$(basename "$real")" "$real"; do
		run "$ALLOCCTL" set --exe "$name" decay_ms=5s
		grep -qx "set $WL (my-service-with-a-long-name): decay_ms = 5 s in .*" <<<"$output" ||
			{ echo "--exe $name: $output"; false; }
	done
	run -1 --separate-stderr "$ALLOCCTL" set --exe no-such-service decay_ms=5s
	[ -z "$output" ]
	one_line "$stderr"
	[ "$stderr" = "allocctl: no process named no-such-service runs under liballoc (see \`allocctl ps\`)" ]
}

@test "live: release on a process that freed most of its memory drops RSS by what it reported (5%)" {
	# Keep freed memory resident (no decay, no automatic idle-heap release, a high trim
	# threshold), and keep blocks off direct mappings, so release has whole idle heaps.
	start_workload LIBALLOC_IDLE_HEAP_RELEASE=0 LIBALLOC_DECAY_MS=0 LIBALLOC_TRIM_THRESHOLD=1G \
		LIBALLOC_MMAP_THRESHOLD=32M -- -t 1 -s 256M -d 0 -k 2M
	before=$(rss_bytes "$WL")
	run -0 "$ALLOCCTL" --json release "$WL"
	after=$(rss_bytes "$WL")
	released=$(echo "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["bytes_released"])')
	echo "rss before $before after $after, reported $released" >&3
	[ "$released" -gt $((32 << 20)) ]
	drop=$((before - after))
	diff=$((drop > released ? drop - released : released - drop))
	[ $((diff * 100)) -le $((released * 5)) ]
}

@test "live: release, trim and flush print what they measurably did" {
	start_workload LIBALLOC_IDLE_HEAP_RELEASE=0 LIBALLOC_DECAY_MS=0 LIBALLOC_TRIM_THRESHOLD=1G \
		LIBALLOC_MMAP_THRESHOLD=32M -- -t 1 -s 256M -d 0 -k 2M
	run -0 "$ALLOCCTL" release "$WL"
	grep -Eqx "release $WL: released [0-9.]+ MiB in [0-9.]+ (ns|us|ms|s) \(([0-9]+ (madvise|munmap|mmap|mprotect)(, )?)+\)" <<<"$output"
	before=$(rss_bytes "$WL")
	run -0 "$ALLOCCTL" trim "$WL"
	grep -Eqx "trim $WL: released [0-9.]+ (KiB|MiB) in [0-9.]+ (ns|us|ms|s) \(.*\)" <<<"$output"
	# The heaps' retained free pages are returned: RSS falls.
	[ "$(rss_bytes "$WL")" -lt "$before" ]
	run -0 "$ALLOCCTL" flush "$WL"
	grep -Eqx "flush $WL: released .* in .* \(.*\)" <<<"$output"
	run -0 "$ALLOCCTL" --json trim "$WL" --pad 64K
	echo "$output" | json_check "d['command'] == 'trim' and d['results'][0]['ok'] and d['results'][0]['pid'] == $WL"
}

@test "live: version names the daemon" {
	run -0 "$ALLOCCTL" version
	[[ "${lines[1]}" == "allocctld "*"(protocol 2, segment ABI 6) at $ALLOCCTL_SOCKET" ]]
	run -0 "$ALLOCCTL" --json version
	echo "$output" | json_check "d['daemon']['protocol_version'] == d['client']['protocol_version']"
}

@test "live: no such process, exit 1" {
	for cmd in "stats" "get" "trim" "release" "flush"; do
		run -1 --separate-stderr "$ALLOCCTL" $cmd 4194000
		one_line "$stderr"
		[[ "$stderr" == "allocctl: no such process: 4194000 "* ]] || { echo "$cmd: $stderr"; false; }
	done
}

@test "live: another user cannot see or act on root's process (permission denied, exit 1)" {
	[ "$(id -u)" = 0 ] || skip "needs root to run allocctl as nobody"
	xuid_share "$LIVE_DIR" ALLOCCTL # a copy nobody can run, wherever the checkout is
	xuid_check nobody "$ALLOCCTL"
	start_workload -- -t 1 -s 4M -d 0
	run -0 as_nobody "$ALLOCCTL" --socket "$ALLOCCTL_SOCKET" --json ps
	echo "$output" | json_check "$WL not in [p['pid'] for p in d['processes']]"
	decay() { "$ALLOCCTL" get "$WL" decay_ms --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["tunables"]["decay_ms"]["value"])'; }
	before=$(decay)
	[ "$before" != 1000 ]
	for cmd in "stats $WL" "get $WL" "set $WL decay_ms=1s" "trim $WL" "release $WL" "flush $WL"; do
		run -1 --separate-stderr as_nobody "$ALLOCCTL" --socket "$ALLOCCTL_SOCKET" $cmd
		[ -z "$output" ]
		[ "$stderr" = "allocctl: permission denied: process $WL belongs to another user; uid $(id -u nobody) may act only on its own processes (root on all)" ] || { echo "$cmd: $stderr"; false; }
	done
	# The process is untouched: its tunable is what it was.
	[ "$(decay)" = "$before" ]
}

@test "live: top under tmux shows the process and quits on q" {
	start_workload -- -t 1 -s 4M -d 0
	T=(tmux -S "$CLI_TMP/tmux.sock")
	"${T[@]}" new-session -d -x 130 -y 30 \
		"ALLOCCTL_SOCKET=$ALLOCCTL_SOCKET $ALLOCCTL top --interval 200ms; echo \$? > $CLI_TMP/rc; sleep 600"
	wait_for bash -c "${T[*]} capture-pane -p | grep -Eq '^ +$WL +[0-9]+  workload '"
	"${T[@]}" send-keys q
	wait_for test -s "$CLI_TMP/rc"
	[ "$(cat "$CLI_TMP/rc")" = 0 ]
}
