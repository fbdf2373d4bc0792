# common.bash — shared setup of tests/security/*.bats: the attacks of issue 18, each as an
# unprivileged local user would run them against a root allocctld. A private directory
# per test that every uid can reach, with copies of the daemon, the clients, fakeseg and
# liballoc.so in $T/bin (ctld_setup --other-uid, tests/helpers/crossuid.bash: the checkout
# may be in a 0700 home); the second uid is nobody, or a user created for the test
# (sec_user, removed at teardown), run with as_user/as_nobody or "$AS_USER" USER CMD &.
source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
ALLOCCTL="$BUILD/allocctl"
SEC_HELPER="$TESTS_BIN/sechelper"

sec_setup() {
	ctld_setup --other-uid || return 1
	SEC_SHARE="$T/bin"
	SEC_USERS=()
}

sec_teardown() {
	local rc=0
	ctld_teardown || rc=$?
	local u uid
	for u in "${SEC_USERS[@]}"; do
		uid=$(id -u "$u" 2>/dev/null) || continue
		pkill_uid "$uid"
		rm -rf "/dev/shm/liballoc-$uid" "/run/liballoc/$uid"
		userdel "$u" 2>/dev/null || true
	done
	return $rc
}

# pkill_uid UID: kill what the test's own user left running (by pid, one by one)
pkill_uid() {
	local p
	for p in $(ps -o pid= -u "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
}

# share FILE...: copies another uid can run or read, in $SEC_SHARE ($T/bin)
share() {
	xuid_copy "$T" "$@"
}

# sec_user: a fresh system user (no home, no login) for this test, in $SEC_U
sec_user() {
	SEC_U="lasec$$$RANDOM"
	SEC_U=${SEC_U:0:30}
	useradd --system --no-create-home --shell /usr/sbin/nologin "$SEC_U" >/dev/null 2>&1 ||
		return 1
	SEC_USERS+=("$SEC_U")
}

# peak_rss_kb PID: VmHWM of a process
peak_rss_kb() {
	awk '/^VmHWM:/ {print $2}' "/proc/$1/status"
}
