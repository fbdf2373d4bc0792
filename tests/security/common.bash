# common.bash — shared setup of tests/security/*.bats: the attacks of issue 18, each as an
# unprivileged local user would run them against a root allocctld. A private directory
# under $BUILD/run per test (from ctld/tools/e2e.bash); the second uid is nobody, or a user
# created for the test (sec_user, removed at teardown). Other uids get copies of what they
# run in $SEC_SHARE, a 0755 directory under /tmp, since the checkout may be in a 0700 home.
source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
ALLOCCTL="$BUILD/allocctl"
SEC_HELPER="$TESTS_BIN/sechelper"
# SECURITY_LONG=1: the long forms (the symlink race for 30 s instead of 5)
SECURITY_LONG=${SECURITY_LONG:-0}

sec_setup() {
	ctld_setup
	chmod 755 "$T"
	SEC_SHARE=$(mktemp -d /tmp/liballoc-sec.XXXXXX)
	chmod 755 "$SEC_SHARE"
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
	[ -n "${SEC_SHARE:-}" ] && rm -rf "$SEC_SHARE"
	return $rc
}

# pkill_uid UID: kill what the test's own user left running (by pid, one by one)
pkill_uid() {
	local p
	for p in $(ps -o pid= -u "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
}

# share FILE...: copies another uid can run or read, in $SEC_SHARE
share() {
	local f
	for f in "$@"; do cp "$f" "$SEC_SHARE/" && chmod a+rx "$SEC_SHARE/$(basename "$f")"; done
}

# sec_user: a fresh system user (no home, no login) for this test, in $SEC_U
sec_user() {
	SEC_U="lasec$$$RANDOM"
	SEC_U=${SEC_U:0:30}
	useradd --system --no-create-home --shell /usr/sbin/nologin "$SEC_U" >/dev/null 2>&1 ||
		return 1
	SEC_USERS+=("$SEC_U")
}

# as USER CMD...: run CMD as USER (setpriv execs: $! is the command itself)
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups -- "$@"
}

# retry SECONDS CMD...: run CMD until it succeeds, at most SECONDS
retry() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.1
	done
}

# peak_rss_kb PID: VmHWM of a process
peak_rss_kb() {
	awk '/^VmHWM:/ {print $2}' "/proc/$1/status"
}
