# common.bash — shared setup of tests/containers/*.bats (issue 22): processes in other pid
# and user namespaces made with unshare(1), next to a daemon in the root namespace or in
# theirs. Every namespace is started with --kill-child, so ending the recorded unshare
# (ns_teardown SIGKILLs it: it ignores SIGTERM) ends everything inside it. What another uid
# runs comes from the copies tests/helpers/crossuid.bash makes in $T/bin.
source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
ALLOCCTL="$BUILD/allocctl"
WORKLOAD="$TESTS_BIN/workload"

ns_setup() {
	ctld_setup --other-uid # $T under /tmp: a user in a namespace reaches its run directory and the socket
	NS_USERS=()
}

ns_teardown() {
	local rc=0 u uid p
	# unshare --fork ignores SIGTERM (its child, a namespace's init, gets nothing): kill
	# it, and --kill-child ends everything inside, instead of ctld_teardown's 10 s wait
	if [ -n "${T:-}" ] && [ -f "$T/pids" ]; then
		while read -r p; do
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" = unshare ] && kill -9 "$p" 2>/dev/null
		done <"$T/pids"
	fi
	ctld_teardown || rc=$?
	for u in "${NS_USERS[@]}"; do
		uid=$(id -u "$u" 2>/dev/null) || continue
		for p in $(ps -o pid= -u "$uid" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		userdel "$u" 2>/dev/null || true
	done
	return $rc
}

# wait_for SECONDS CMD...: until CMD succeeds (the condition, not the time, is the point:
# SECONDS only bounds a failure on a machine loaded far beyond the usual)
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		if [ $SECONDS -ge $end ]; then
			echo "timed out after $1 s waiting for: $*" >&2
			return 1
		fi
		sleep 0.05
	done
}

# ns_start [--pid N] [--as USER] [--userns] OUT CMD...: run CMD preloaded (segments in
# $LIBALLOC_RUN_DIR, default $T/segs) as the first process of a new pid namespace with its
# own /proc (with --pid N: as pid N of it, the namespace's init being a shell that waits),
# stdout and stderr to OUT. Sets NSU (the unshare process, recorded in $T/pids) and NSH (the
# command's pid on the host), waits until the command runs.
ns_start() {
	local nspid= user= userns=
	while :; do
		case "$1" in
		--pid) nspid=$2; shift 2 ;;
		--as) user=$2; shift 2 ;;
		--userns) userns=1; shift ;;
		*) break ;;
		esac
	done
	local out=$1
	shift
	local -a pre=() un=(unshare --pid --fork --kill-child --mount-proc)
	[ -n "$user" ] && pre=(setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups --)
	[ -n "$userns" ] && un=(unshare --user --map-root-user --pid --fork --kill-child --mount-proc)
	local -a cmd=(env LIBALLOC_RUN_DIR="${LIBALLOC_RUN_DIR_NS:-$T/segs}" LD_PRELOAD="$LIBALLOC_SO" "$@")
	if [ -n "$nspid" ]; then
		# the next pid the namespace hands out is N: the shell's background child
		"${pre[@]}" "${un[@]}" sh -c 'echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid || exit 1
			shift; "$@" & wait' sh "$nspid" "${cmd[@]}" >"$out" 2>&1 3>&- &
	else
		"${pre[@]}" "${un[@]}" "${cmd[@]}" >"$out" 2>&1 3>&- &
	fi
	NSU=$!
	echo "$NSU" >>"$T/pids"
	# the host pid of the command: unshare's child, or (--pid) that child's child
	NSH=
	wait_for 30 ns_find_host_pid "$nspid" || return 1
}

ns_find_host_pid() {
	local c
	# (the pipeline's status is head's: an empty answer is "not yet")
	c=$(pgrep -P "$NSU" | head -n 1)
	[ -n "$c" ] || return 1
	if [ -n "$1" ]; then
		c=$(pgrep -P "$c" | head -n 1)
		[ -n "$c" ] || return 1
	fi
	# the program itself, not env or the shell before their exec
	[ "$(readlink "/proc/$c/exe" 2>/dev/null)" != "$(readlink -f /usr/bin/env)" ] || return 1
	NSH=$c
}

# nspid_of PID: the last NSpid of a host process (its pid in its own namespace)
nspid_of() {
	awk '/^NSpid:/ {print $NF}' "/proc/$1/status"
}

# pidns_of PID: the inode of its pid namespace
pidns_of() {
	stat -L -c %i "/proc/$1/ns/pid"
}

# field PID NAME: one field of a process in the daemon's list (ctlclient: name=value)
field() {
	ctl list | sed -n "s/^process pid=$1 .* $2=\([^ ]*\).*/\1/p"
}

# listed PID: the daemon lists it
listed() {
	ctl list | grep -q "^process pid=$1 "
}

# ns_user: a fresh system user for this test (removed at teardown, with its processes), in
# NS_U; NS_SHARE, a 0755 directory in $T for what the test gives that user (run
# directories, a socket directory). The programs it runs are the copies in $T/bin
# (tests/helpers/crossuid.bash: ctld_setup --other-uid shares the daemon and liballoc.so,
# this adds allocctl), reachable from a checkout in a 0700 home.
ns_user() {
	NS_U="lans$$$RANDOM"
	NS_U=${NS_U:0:30}
	useradd --system --no-create-home --shell /usr/sbin/nologin "$NS_U" >/dev/null 2>&1 || return 1
	NS_USERS+=("$NS_U")
	NS_SHARE="$T/share"
	mkdir -m 755 "$NS_SHARE"
	xuid_share "$T" ALLOCCTL
}
