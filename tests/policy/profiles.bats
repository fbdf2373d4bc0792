#!/usr/bin/env bats
# san: skip
# Profiles (issue 20): a [profile NAME] of the daemon's configuration is applied to each
# process it matches as the daemon finds it (started after the daemon, or running before a
# daemon (re)start), never over a value set explicitly in the process (environment, an
# operator's live set); it shows in ps, stats, allocctl profiles and /metrics; every
# application and skip is audited.
load common

setup() { pol_setup; }
teardown() { pol_teardown; }


profile_conf() {
	cat >"$P/conf" <<EOC
[profile sleepers]
name = sleep
decay_ms = ${1:-2s}
tcache_max_bytes = ${2:-64K}
[profile everyone]
name = *
decay_ms = 9s
EOC
}

@test "profiles: applied to a process started after the daemon, shown everywhere" {
	profile_conf
	start_daemon --config "$P/conf"
	start_sleeper
	wait_for value_is "$SP" tcache_max_bytes 65536
	[ "$(value "$SP" decay_ms)" = 2000 ]
	run -0 "$ALLOCCTL" ps
	[[ "$output" == *" $SP "*" sleepers"* ]]
	run -0 "$ALLOCCTL" --json ps
	echo "$output" | json_check "[p['profile'] for p in d['processes'] if p['pid'] == $SP] == ['sleepers']"
	run -0 "$ALLOCCTL" stats "$SP"
	[[ "$output" == *"profile: sleepers"* ]]
	run -0 "$ALLOCCTL" --json profiles
	echo "$output" | json_check "
	  d['profiles'][0]['name'] == 'sleepers' and d['profiles'][0]['pids'] == [$SP] and
	  d['profiles'][0]['settings'] == {'decay_ms': 2000, 'tcache_max_bytes': 65536} and
	  d['profiles'][0]['matches'] == ['name=sleep'] and d['profiles'][1]['pids'] == [] and
	  d['applied'] == 1 and d['delay_p50_ns'] > 0"
	run -0 "$ALLOCCTL" profiles
	[[ "$output" == *"sleepers (line 1)"*"matches: name=sleep"*"processes: $SP"* ]]
	metrics | grep -qx "liballoc_process_profile_info{pid=\"$SP\",uid=\"0\",exe=\"/usr/bin/sleep\",profile=\"sleepers\"} 1"
	metrics | grep -q '^liballoc_ctld_profile_apply_delay_seconds_count 1$'
	run -0 "$ALLOCCTL" --json log
	echo "$output" | json_check "
	  [(e['trigger'], e['actor'], e['tunable'], e['new_value'], e['result']) for e in d['events']] ==
	  [('profile', 'profile sleepers', 'decay_ms', 2000, 'ok'),
	   ('profile', 'profile sleepers', 'tcache_max_bytes', 65536, 'ok')]"
	grep -q "profile sleepers applied to pid $SP (sleep): .* ms after exec" "$P/ctld.log"
}

@test "profiles: a value from the environment is kept, and the skip is audited" {
	profile_conf
	start_daemon --config "$P/conf"
	start_sleeper LIBALLOC_DECAY_MS=4s
	wait_for value_is "$SP" tcache_max_bytes 65536
	[ "$(value "$SP" decay_ms)" = 4000 ]
	run -0 "$ALLOCCTL" --json log
	echo "$output" | json_check "
	  [(e['tunable'], e['result']) for e in d['events']] ==
	  [('decay_ms', 'skipped'), ('tcache_max_bytes', 'ok')] and
	  'kept' in d['events'][0]['message']"
}

@test "profiles: applied to processes running before the daemon started" {
	profile_conf
	start_sleeper
	run -1 "$ALLOCCTL" get "$SP" decay_ms # no daemon yet
	start_daemon --config "$P/conf"
	wait_for value_is "$SP" decay_ms 2000
	[ "$(value "$SP" tcache_max_bytes)" = 65536 ]
}

@test "profiles: after a daemon restart, reapplied to those running, never over a live set" {
	profile_conf 2s 64K
	start_daemon --config "$P/conf"
	start_sleeper
	wait_for value_is "$SP" tcache_max_bytes 65536
	run -0 "$ALLOCCTL" set "$SP" decay_ms=7s # an operator, live
	stop_daemon
	profile_conf 3s 32K # the profile changed while the daemon was down
	start_daemon --config "$P/conf"
	wait_for value_is "$SP" tcache_max_bytes 32768
	[ "$(value "$SP" decay_ms)" = 7000 ]
	run -0 "$ALLOCCTL" --json log
	echo "$output" | json_check "
	  [(e['tunable'], e['result'], e['new_value']) for e in d['events']] ==
	  [('decay_ms', 'skipped', 3000), ('tcache_max_bytes', 'ok', 32768)]"
}

@test "profiles: SIGHUP re-matches and applies a changed profile; a bad file keeps the old one" {
	profile_conf 2s 64K
	start_daemon --config "$P/conf"
	start_sleeper
	wait_for value_is "$SP" tcache_max_bytes 65536
	printf '[profile sleepers]\nname = sleep\ndecay_ms = 1s\nbogus_key = 1\n' >"$P/conf"
	kill -HUP "$DPID"
	wait_for grep -q "reload failed, keeping the current settings: $P/conf:4: unknown key 'bogus_key'" "$P/ctld.log"
	run -0 "$ALLOCCTL" --json profiles
	echo "$output" | json_check "d['profiles'][0]['settings']['decay_ms'] == 2000 and len(d['profiles']) == 2"
	profile_conf 2s 128K
	kill -HUP "$DPID"
	wait_for value_is "$SP" tcache_max_bytes 131072
	run -0 "$ALLOCCTL" --json log
	echo "$output" | json_check "
	  [(e['action'], e['result']) for e in d['events'] if e['trigger'] == 'config'] ==
	  [('reload', 'failed'), ('reload', 'ok')]"
}

@test "profiles: matched by uid, cgroup and command line" {
	nobody_setup
	cat >"$P/conf" <<EOC
[profile by-uid]
uid = nobody
decay_ms = 3s
[profile by-cmdline]
cmdline = ^sleep 30[0-9]\$
decay_ms = 4s
EOC
	start_daemon --config "$P/conf" --run-dir "$P/seg-nobody"
	start_nobody_sleeper
	start_sleeper # sleep 300: by its command line
	wait_for value_is "$NSP" decay_ms 3000
	wait_for value_is "$SP" decay_ms 4000
	run -0 "$ALLOCCTL" --json profiles
	echo "$output" | json_check "[p['pids'] for p in d['profiles']] == [[$NSP], [$SP]]"
	# nobody sees its own process in the listing, not root's
	run -0 as_nobody "$NB_ALLOCCTL" --json profiles
	echo "$output" | json_check "[p['pids'] for p in d['profiles']] == [[$NSP], []]"
}
