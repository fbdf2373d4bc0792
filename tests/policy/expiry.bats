#!/usr/bin/env bats
# san: skip
# Expiring changes (issue 20): `allocctl set PID k=v --for D` reverts by itself — the
# process's own control thread puts the value back, so it does with the daemon stopped in
# between — `get` shows what is held and for how long, and the revert is audited when a
# daemon sees it. A second held set extends the hold; an explicit set ends it.
load common

setup() { pol_setup; }
teardown() { pol_teardown; }

# seg_value_is PID NAME VALUE: the tunable's value in the process's segment, read without
# a daemon (tests/helpers/segtool)
seg_value_is() {
	"$TESTS_BIN/segtool" info "$LIBALLOC_RUN_DIR/liballoc.$1.seg" | grep -q "^tunable\.$2=$3 "
}


@test "expiry: a --for 2s change reverts with the daemon stopped in between" {
	start_daemon
	start_sleeper
	run -0 "$ALLOCCTL" set "$SP" decay_ms=100ms mmap_threshold=1M --for 2s
	[[ "$output" == "set $SP: decay_ms = 100 ms (was 10 s) for "*", then back to 10 s, mmap_threshold = 1.0 MiB (was 128.0 KiB) for "*", then back to 128.0 KiB in "* ]]
	run -0 "$ALLOCCTL" get "$SP" decay_ms
	[[ "${lines[1]}" == "decay_ms"*"100 ms"*"held: back to 10 s (default) in "* ]]
	run -0 "$ALLOCCTL" --json get "$SP" decay_ms mmap_dynamic
	echo "$output" | json_check "
	  0 < d['results'][0]['tunables']['decay_ms']['expires_in_ms'] <= 2000 and
	  d['results'][0]['tunables']['decay_ms']['revert_value'] == 10000 and
	  d['results'][0]['tunables']['mmap_dynamic']['value'] == 0 and
	  d['results'][0]['tunables']['mmap_dynamic']['revert_value'] == 1"
	stop_daemon
	# the hold expires while no daemon runs: the process's control thread reverts on its
	# own (later than 2 s on a loaded machine)
	wait_for seg_value_is "$SP" decay_ms 10000
	wait_for seg_value_is "$SP" mmap_threshold 131072
	seg_value_is "$SP" mmap_dynamic 1
	start_daemon
	wait_for listed "$SP"
	[ "$(value "$SP" decay_ms)" = 10000 ]
	# back to the default, as it was: not set explicitly, not held
	run -0 "$ALLOCCTL" --json stats "$SP"
	echo "$output" | json_check "
	  d['tunables']['decay_ms']['source'] == 'default' and
	  'expires_in_ms' not in d['tunables']['decay_ms']"
}

@test "expiry: the revert is audited once; a second --for extends, a plain set ends the hold" {
	start_daemon
	start_sleeper
	run -0 "$ALLOCCTL" set "$SP" decay_ms=1s --for 1s
	wait_for value_is "$SP" decay_ms 10000
	wait_for grep -q 'trigger=expiry actor="hold expired" action=revert' "$P/ctld.log"
	run -0 "$ALLOCCTL" --json log
	echo "$output" | json_check "
	  [(e['trigger'], e['action'], e.get('old_value'), e.get('new_value'), e.get('hold_ms'))
	   for e in d['events']] ==
	  [('operator', 'set', 10000, 1000, 1000), ('expiry', 'revert', 1000, 10000, None)]"
	# extended: set again with a longer hold, the first value still comes back
	run -0 "$ALLOCCTL" set "$SP" decay_ms=2s --for 1s
	run -0 "$ALLOCCTL" set "$SP" decay_ms=3s --for 30s
	run -0 "$ALLOCCTL" --json get "$SP" decay_ms
	echo "$output" | json_check "
	  d['results'][0]['tunables']['decay_ms']['revert_value'] == 10000 and
	  d['results'][0]['tunables']['decay_ms']['expires_in_ms'] > 20000"
	sleep 1.2
	[ "$(value "$SP" decay_ms)" = 3000 ]
	# ended: an explicit set without --for is for good
	run -0 "$ALLOCCTL" set "$SP" decay_ms=4s
	run -0 "$ALLOCCTL" --json get "$SP" decay_ms
	echo "$output" | json_check "'expires_in_ms' not in d['results'][0]['tunables']['decay_ms']"
}

@test "expiry: --for out of range is a usage error, and nothing changes" {
	start_daemon
	start_sleeper
	for bad in 0 31d forever -5s; do
		run -2 --separate-stderr "$ALLOCCTL" set "$SP" decay_ms=1s --for "$bad"
		[[ "$stderr" == "allocctl: set: invalid --for '$bad': expected a duration from 1ms to 30 days"* ]] || { echo "$bad: $stderr"; false; }
	done
	[ "$(value "$SP" decay_ms)" = 10000 ]
}
