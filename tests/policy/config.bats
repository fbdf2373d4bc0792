#!/usr/bin/env bats
# san: skip
# The configuration file's bad input through the daemon itself (issue 20): a config with an
# unknown key, an impossible threshold, a cgroup path that does not exist, a policy with no
# action — each refused by `allocctld --check-config` with its file and line (exit 2, the
# message on stderr), and by a SIGHUP reload with the same line while the running
# configuration stays whole (its policy still listed, the failed reload audited once).
# The parser's every refusal is unit-tested in tests/ctld/policyconf.c.
load common

setup() { pol_setup; }
teardown() { pol_teardown; }

# bad_file N: writes the Nth bad configuration to $P/bad; sets WANT ("LINE: message")
bad_file() {
	case $1 in
	1)
		printf '[policy keep]\non = idle\nfor = 1s\nactions = trim\nwhen = now\n' >"$P/bad"
		WANT="5: unknown key 'when' in [policy keep]"
		;;
	2)
		printf '# a comment\n[policy keep]\non = cgroup\nhigh = 150%%\nactions = trim\n' >"$P/bad"
		WANT="4: high: '150%' is not a share of the limit between 0% and 100%"
		;;
	3)
		printf '[policy keep]\non = cgroup\ncgroup = /no-such-cgroup-%s\nhigh = 90%%\nactions = trim\n' \
			"$$" >"$P/bad"
		WANT="3: cgroup: /no-such-cgroup-$$ does not exist"
		;;
	4)
		printf '[daemon]\nlog_level = info\n\n[policy keep]\non = idle\nfor = 10s\n' >"$P/bad"
		WANT="4: policy keep has no action"
		;;
	esac
}

# refused_times N: the daemon has logged N refused reloads (for wait_for: evaluated each time)
refused_times() { [ "$(grep -c 'reload failed, keeping the current settings' "$P/ctld.log")" -eq "$1" ]; }
policy_listed() { "$ALLOCCTL" --json policies | grep -q "\"$1\""; }

good_conf() {
	printf '[daemon]\ncheck_interval_ms = 1000\n[policy good]\non = idle\nfor = 1h\nactions = trim\n' >"$P/conf"
}

@test "config: --check-config refuses each bad file with its line; a good one passes" {
	good_conf
	run -0 "$CTLD" --config "$P/conf" --check-config
	for n in 1 2 3 4; do
		bad_file $n
		run -2 --separate-stderr "$CTLD" --config "$P/bad" --check-config
		echo "file $n: $stderr"
		[[ "$stderr" == *"$P/bad:$WANT"* ]]
	done
}

@test "config: a SIGHUP with each bad file keeps the running configuration whole" {
	good_conf
	start_daemon --config "$P/conf"
	for n in 1 2 3 4; do
		bad_file $n
		cp "$P/bad" "$P/conf"
		kill -HUP "$DPID"
		wait_for refused_times "$n"
		grep 'reload failed' "$P/ctld.log" | tail -1 | grep -q "$P/conf:[0-9]*: "
		# (no python in the loop: it starts slowly on a loaded machine)
		run -0 "$ALLOCCTL" --json policies
		[ "$(echo "$output" | grep -o '"name":"[^"]*"')" = '"name":"good"' ]
	done
	run -0 "$ALLOCCTL" --json log
	echo "$output" | json_check "
	  [(e['action'], e['result']) for e in d['events'] if e['trigger'] == 'config'] ==
	  [('reload', 'failed')] * 4"
	# the daemon is still whole: a good file is taken
	printf '[policy better]\non = idle\nfor = 1h\nactions = release, trim\n' >"$P/conf"
	kill -HUP "$DPID"
	wait_for policy_listed better
}
