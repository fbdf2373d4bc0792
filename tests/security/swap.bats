#!/usr/bin/env bats
# swap.bats — issue 18, finding 1: a user who owns a watched run directory plants a stale
# segment and swaps the directory with a symlink to a victim's directory (root's, 0700,
# holding a live segment and a file of the same name as the stale one) in a loop, while
# re-planting the stale file, for SECURITY_SWAP_SECONDS (default 5; SECURITY_LONG=1: 30 s,
# the issue's reproduction took ~16 s). The daemon removes stale files only through the
# descriptor of the directory it checked: nothing outside the attacker's directory goes.
# san: skip

setup() {
	source "$BATS_TEST_DIRNAME/common.bash"
	sec_setup
	share "$TESTS_BIN/swapper"
}

teardown() {
	sec_teardown
}

@test "the symlink-swap race removes nothing outside the attacker's directory" {
	local secs=${SECURITY_SWAP_SECONDS:-5}
	[ "$SECURITY_LONG" = 1 ] && secs=${SECURITY_SWAP_SECONDS:-30}
	# the attacker's parent directory, its run directory (watched by root's daemon) and a
	# symlink to the victim's directory
	mkdir -m 755 "$T/att"
	chown nobody "$T/att"
	as_nobody mkdir -m 700 "$T/att/run" "$T/att/tmpl"
	mkdir -m 700 "$T/victim"
	# root's live process publishes in the victim directory
	env LIBALLOC_RUN_DIR="$T/victim" LD_PRELOAD="$LIBALLOC_SO" sleep 600 >/dev/null 2>&1 3>&- &
	local live=$!
	echo "$live" >>"$T/pids"
	wait_file "$T/victim/liballoc.$live.seg"
	# a stale segment of nobody's: a fake killed without cleaning up
	"$AS_USER" nobody "$FAKESEG" --dir "$T/att/tmpl" --ready "$T/att/tmpl/ready" \
		>/dev/null 2>&1 3>&- &
	local f=$!
	wait_file "$T/att/tmpl/ready"
	kill -9 "$f"
	wait "$f" 2>/dev/null || true
	local stale=liballoc.$f.seg
	[ -f "$T/att/tmpl/$stale" ]
	# the victim holds a file of the same name (root's, as a live one would be)
	cp "$T/att/tmpl/$stale" "$T/victim/$stale"
	chown root "$T/victim/$stale"
	as_nobody ln -s "$T/victim" "$T/att/link"
	start_daemon --run-dir "$T/att/run" --rescan-ms 50
	# the attacker: swap, and keep re-planting the stale file in its directory
	as_nobody "$SEC_SHARE/swapper" "$T/att/run" "$T/att/link" "$secs" "$T/att/tmpl/$stale" \
		"$stale" >"$T/swap.out" 2>&1 3>&-
	cat "$T/swap.out"
	echo "removals=$(grep -c 'removed stale segment' "$T/log")"
	grep -q '^exchanges=[1-9]' "$T/swap.out"
	# nothing of the victim's went
	[ -f "$T/victim/liballoc.$live.seg" ]
	[ -f "$T/victim/$stale" ]
	kill -0 "$live"
	kill -0 "$DPID"
	# the attack was on: the stale file planted many times, removed by the daemon in the
	# attacker's directory (the only place it may), the directory refused while a symlink
	grep -q '^exchanges=[1-9][0-9]* planted=[1-9]' "$T/swap.out"
	grep -q "removed stale segment $T/att/run/$stale" "$T/log"
	grep -q "not watching run directory $T/att/run: not a directory" "$T/log"
}
