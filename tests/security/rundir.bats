#!/usr/bin/env bats
# rundir.bats — issue 18: run directories no local user can squat or redirect.
#  - another user creates /dev/shm/liballoc-<uid> first: the process still publishes (in
#    /run/liballoc/<uid>, which the daemon provides: root-owned parent, the uid's own 0700
#    directory) and the daemon still finds it;
#  - the library's own publication refuses a run directory that is a symlink.
# The victim is a user created for the test (a fresh uid: no real directory is touched);
# the squatter is nobody.
# san: skip

setup() {
	source "$BATS_TEST_DIRNAME/common.bash"
	sec_setup
}

teardown() {
	sec_teardown
}

@test "a squatted default run directory: the process publishes in /run/liballoc/<uid> and is found" {
	sec_user
	local uid
	uid=$(id -u "$SEC_U")
	# nobody squats the victim's default directory before anything of the victim runs
	as_nobody mkdir -m 700 "/dev/shm/liballoc-$uid"
	[ "$(stat -c %u "/dev/shm/liballoc-$uid")" = "$(id -u nobody)" ]
	# the daemon watches the default directories (touching nothing of others': no stale
	# removal); it sees the squat and provides the victim's directory
	printf 'remove_stale = false\n' >"$T/conf"
	CTLD_DEFAULT_DIRS=1 start_daemon --config "$T/conf"
	wait_file "/run/liballoc/$uid"
	[ "$(stat -c '%u %a' "/run/liballoc/$uid")" = "$uid 700" ]
	[ "$(stat -c '%u %a' /run/liballoc)" = "0 755" ]
	grep -q "/dev/shm/liballoc-$uid is not uid $uid's own (squatted): its processes publish in /run/liballoc/$uid" "$T/log"
	# the victim's process publishes there, says so once, and the daemon lists it
	"$AS_USER" "$SEC_U" env -u LIBALLOC_RUN_DIR LD_PRELOAD="$LIBALLOC_SO" sleep 30 \
		>"$T/victim.out" 2>"$T/victim.err" 3>&- &
	local v=$!
	echo "$v" >>"$T/pids"
	wait_file "/run/liballoc/$uid/liballoc.$v.seg" || { cat "$T/victim.err"; ls -la /run/liballoc/ "/dev/shm/liballoc-$uid"; false; }
	[ "$(cat "$T/victim.err")" = "liballoc: statistics published in /run/liballoc/$uid: /dev/shm/liballoc-$uid is not this user's own" ]
	wait_listed "$v" present 5
	run ctl list
	[[ "$output" == *"process pid=$v name=sleep exe=/usr/bin/sleep uid=$uid owner=$uid "* ]]
	# nothing was written into the squatter's directory
	[ -z "$(ls -A "/dev/shm/liballoc-$uid")" ]
}

@test "a run directory that is a symlink is refused by the library (nothing published through it)" {
	mkdir -m 700 "$T/real"
	ln -s "$T/real" "$T/link"
	LIBALLOC_RUN_DIR="$T/link" LD_PRELOAD="$LIBALLOC_SO" sleep 0.2 2>"$T/err"
	[ "$(cat "$T/err")" = "liballoc: statistics not published: run directory $T/link is not a directory" ]
	[ -z "$(ls -A "$T/real")" ]
}
