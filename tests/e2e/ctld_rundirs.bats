#!/usr/bin/env bats
# ctld_rundirs.bats — run directories that appear, disappear and reappear while the daemon
# runs (the daemon started first, as at boot), found through inotify on the parent: the
# rescan period is an hour here, so only the watch can find them in time.

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup
}

teardown() {
	ctld_teardown
}

@test "a run directory created after the daemon started is watched, and again after it is removed and recreated" {
	local rd="$T/later/run"
	start_daemon --run-dir "$rd" --rescan-ms 3600000
	grep -q "not watching run directory $rd: No such file or directory" "$T/log"
	mkdir -p -m 700 "$T/later"
	mkdir -m 700 "$rd"
	FAKE_DIR=$rd start_fake
	local a=$FPID
	wait_listed "$a" present 5
	# removed with the process in it: forgotten
	kill "$a"
	rm -rf "$rd"
	wait_listed "$a" absent 5
	# and created again: watched again
	mkdir -m 700 "$rd"
	FAKE_DIR=$rd start_fake
	wait_listed "$FPID" present 5 || { cat "$T/log"; false; }
	[ "$(grep -c "not watching run directory $rd" "$T/log")" -le 2 ]
}

@test "a run directory replaced by a symlink is dropped, not followed" {
	local rd="$T/swap/run"
	mkdir -p -m 700 "$T/swap" "$rd" "$T/other"
	start_daemon --run-dir "$rd" --rescan-ms 200
	FAKE_DIR=$rd start_fake
	wait_listed "$FPID"
	FAKE_DIR="$T/other" start_fake
	local other=$FPID
	mv "$rd" "$T/swap/old"
	ln -s "$T/other" "$rd"
	wait_listed "$other" absent
	wait_rescans 2
	run ctl list
	[[ "$output" != *"pid=$other "* ]]
	grep -q "not watching run directory $rd: not a directory (symbolic links are refused)" "$T/log" || { cat "$T/log"; false; }
}
