#!/usr/bin/env bats
# namespaces.bats — issue 22: preloaded processes in other pid (and user) namespaces, made
# with unshare(1), sharing one run directory with the host. A daemon in the root namespace
# finds each under its host pid (NSpid, ns/pid, start time), reads the right figures, and
# its set and trim reach it; a namespace pid equal to an unrelated host pid is never taken
# for it; a daemon inside the namespace sees its processes too and nothing of the host's;
# root in a user namespace is its host uid for the daemon's permission checks.
# san: skip

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/tests/containers/common.bash"
	ns_setup
	unshare --pid --fork --kill-child --mount-proc true 2>/dev/null ||
		skip "unshare cannot create a pid namespace here"
}

teardown() {
	ns_teardown
}

# in_use_between PID LO HI: the daemon lists PID with LO <= in use < HI bytes
in_use_between() {
	local v
	v=$(field "$1" in_use)
	[ -n "$v" ] && [ "$v" -ge "$2" ] && [ "$v" -lt "$3" ]
}

# rss_as_kernel PID: the daemon lists PID with an RSS within 10% of the kernel's, read after
# it (both figures in $T/rss.last)
rss_as_kernel() {
	local rss kernel
	rss=$(field "$1" rss)
	kernel=$(($(awk '/^VmRSS:/ {print $2}' "/proc/$1/status") * 1024))
	echo "daemon's rss $rss, the kernel's VmRSS read after it $kernel" >"$T/rss.last"
	[ -n "$rss" ] && [ "$rss" -ge $((kernel * 9 / 10)) ] && [ "$rss" -le $((kernel * 11 / 10)) ]
}

@test "a process in a new pid namespace: discovered under its host pid; stats, set and trim reach it" {
	start_daemon
	ns_start "$T/w.out" "$WORKLOAD" -t 1 -s 4M -d 0 -k 4M -b 64K -n 256
	wait_for 30 grep -q '^quiet' "$T/w.out"
	[ "$(nspid_of "$NSH")" = 1 ]
	local ns
	ns=$(pidns_of "$NSH")
	# its segment carries its own pid and namespace; nothing else is in the directory
	wait_for 30 test -f "$T/segs/liballoc.1.ns$ns.seg" # named LIBALLOC_PUBLISH_DELAY after start
	wait_for 30 listed "$NSH"
	run ctl list
	[[ "$output" == *"process pid=$NSH name=workload exe=$WORKLOAD uid=0 owner=0"* ]]
	[ "$(field "$NSH" nspid)" = 1 ]
	[ "$(field "$NSH" pidns)" = "$ns" ]
	run "$ALLOCCTL" --socket "$SOCK" --json ps
	[[ "$output" == *"\"pid\":$NSH,\"ns_pid\":1,\"pid_namespace\":$ns,"* ]]
	# the figures are this process's: 4 MiB kept live, its RSS as the kernel has it (a list
	# takes figures read up to a second earlier, maybe still during the churn: wait for a
	# read after it; the RSS falls meanwhile as the decay returns the churn's free pages, so
	# wait for a read that agrees with the kernel's figure read after it)
	wait_for 30 in_use_between "$NSH" $((4 << 20)) $((5 << 20))
	wait_for 30 rss_as_kernel "$NSH" || { cat "$T/rss.last"; false; }
	# set reaches it (no decay, no trim threshold: what is freed stays until the trim)
	run "$ALLOCCTL" --socket "$SOCK" set "$NSH" decay_ms=0 trim_threshold=1G
	[ "$status" -eq 0 ]
	run "$ALLOCCTL" --socket "$SOCK" --bytes get "$NSH" decay_ms trim_threshold
	[[ "$output" == *"decay_ms "*" 0 "* ]]
	[[ "$output" == *"trim_threshold "*" 1073741824 "* ]]
	# 16 MiB in 64 KiB blocks, freed: the trim gives the resident part back
	kill -USR1 "$NSH"
	wait_for 30 grep -q '^burst' "$T/w.out"
	kill -USR2 "$NSH"
	wait_for 30 grep -q '^freed' "$T/w.out"
	local before after
	before=$(awk '/^VmRSS:/ {print $2}' "/proc/$NSH/status")
	run "$ALLOCCTL" --socket "$SOCK" --bytes trim "$NSH"
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^trim\ $NSH:\ released\ ([0-9]+) ]]
	local released=${BASH_REMATCH[1]}
	after=$(awk '/^VmRSS:/ {print $2}' "/proc/$NSH/status")
	[ "$released" -ge $((8 << 20)) ]
	[ $(((before - after) * 1024)) -ge $((released / 2)) ]
	# the live segment was never taken for a stale one
	! grep -q "removed stale" "$T/log"
	[ -f "$T/segs/liballoc.1.ns$ns.seg" ]
	grep -q "discovered pid $NSH (workload) uid 0 in $T/segs: pid 1 of pid namespace $ns" "$T/log"
}

@test "a namespace pid equal to a host pid: two processes, each with its own figures and tunables" {
	start_daemon
	# a preloaded host process, and a namespace process given the same pid number
	LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" sleep 300 >/dev/null 2>&1 3>&- &
	local host=$!
	echo "$host" >>"$T/pids"
	ns_start --pid "$host" "$T/w.out" "$WORKLOAD" -t 1 -s 8M -d 0 -k 8M
	wait_for 30 grep -q '^quiet' "$T/w.out"
	[ "$(nspid_of "$NSH")" = "$host" ]
	[ "$NSH" != "$host" ]
	local ns
	ns=$(pidns_of "$NSH")
	wait_for 30 test -f "$T/segs/liballoc.$host.seg"
	wait_for 30 test -f "$T/segs/liballoc.$host.ns$ns.seg"
	wait_for 30 listed "$host"
	wait_for 30 listed "$NSH"
	run ctl list
	[[ "$output" == *"process pid=$host name=sleep "* ]]
	[[ "$output" == *"process pid=$NSH name=workload "* ]]
	[ "$(field "$host" nspid)" = "$host" ]
	[ "$(field "$NSH" nspid)" = "$host" ]
	# each its own figures: 8 MiB live in the workload, nearly nothing in sleep (the
	# workload's figure is waited for, as the first test's is: read once, it was 6.6 MB
	# while the workload's counts were not yet all published, at load ~17)
	wait_for 30 in_use_between "$NSH" $((8 << 20)) $((9 << 20))
	[ "$(field "$host" in_use)" -lt $((1 << 20)) ]
	[ "$(field "$NSH" rss)" -gt "$(field "$host" rss)" ]
	# a set on one leaves the other alone, both ways
	"$ALLOCCTL" --socket "$SOCK" set "$NSH" mmap_threshold=1M
	"$ALLOCCTL" --socket "$SOCK" set "$host" mmap_threshold=64K
	run "$ALLOCCTL" --socket "$SOCK" --bytes get "$NSH" mmap_threshold
	[[ "$output" == *" 1048576 "* ]]
	run "$ALLOCCTL" --socket "$SOCK" --bytes get "$host" mmap_threshold
	[[ "$output" == *" 65536 "* ]]
	# the host process goes: its own segment only; the namespace's stays listed
	kill "$host"
	wait_for 30 bash -c "! test -e '$T/segs/liballoc.$host.seg'"
	wait_for 30 bash -c "! $CTLCLIENT --socket '$SOCK' list | grep -q '^process pid=$host '"
	listed "$NSH"
	[ -f "$T/segs/liballoc.$host.ns$ns.seg" ]
	! grep -q "removed stale segment $T/segs/liballoc.$host.ns" "$T/log"
}

@test "pid 1 of a namespace is not the host's pid 1; a killed namespace's segment is stale" {
	start_daemon
	ns_start "$T/w.out" sleep 300
	local ns
	ns=$(pidns_of "$NSH")
	wait_for 30 listed "$NSH"
	run ctl list
	[[ "$output" == *"process pid=$NSH name=sleep exe=/usr/bin/sleep uid=0"* ]]
	[[ "$output" != *"process pid=1 "* ]]
	# the whole namespace killed (its init: SIGKILL, no exit path): the lock is free, so
	# the daemon removes the file and forgets the process
	kill -9 "$NSH"
	wait_for 30 bash -c "! test -e '$T/segs/liballoc.1.ns$ns.seg'"
	wait_for 30 bash -c "! $CTLCLIENT --socket '$SOCK' list | grep -q '^process pid=$NSH '"
}

@test "a daemon inside the namespace sees its processes, and never the host's" {
	# a host process whose pid the namespace gives its own process too
	LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" sleep 300 >/dev/null 2>&1 3>&- &
	local host=$!
	echo "$host" >>"$T/pids"
	wait_for 30 test -f "$T/segs/liballoc.$host.seg"
	# one namespace: the daemon (pid 1's child) and, as pid $host of it, a workload
	mkdir -m 700 "$T/in"
	unshare --pid --fork --kill-child --mount-proc sh -c '
		echo $(($3 - 1)) >/proc/sys/kernel/ns_last_pid
		LIBALLOC_RUN_DIR="$2/segs" LD_PRELOAD="$4" "$5" -t 1 -s 4M -d 0 -k 4M >"$2/w.out" 2>&1 &
		"$1" --socket "$2/in/ctl.sock" --listen 127.0.0.1:0 --run-dir "$2/segs" \
			--no-default-dirs --ready-file "$2/in/ready" >>"$2/in/log" 2>&1 &
		wait' sh "$CTLD" "$T" "$host" "$LIBALLOC_SO" "$WORKLOAD" >/dev/null 2>&1 3>&- &
	echo $! >>"$T/pids"
	wait_file "$T/in/ready"
	wait_for 30 grep -q '^quiet' "$T/w.out"
	local isock="$T/in/ctl.sock"
	wait_for 30 bash -c "$CTLCLIENT --socket '$isock' list | grep -q '^process pid=$host name=workload '"
	# its own pid $host is the workload; the host's pid $host (sleep) is not visible there
	run "$CTLCLIENT" --socket "$isock" list
	[ "$(grep -c '^process ' <<<"$output")" -eq 1 ]
	[[ "$output" != *"name=sleep"* ]]
	run "$ALLOCCTL" --socket "$isock" --bytes trim "$host"
	[ "$status" -eq 0 ]
	[[ "$output" == "trim $host: released "* ]]
	# the host's segment was refused (not visible from there), never removed
	grep -q "skipping segment $T/segs/liballoc.$host.seg: process not found from this namespace" "$T/in/log"
	! grep -q "removed stale" "$T/in/log"
	[ -f "$T/segs/liballoc.$host.seg" ]
	kill -0 "$host"
}

@test "user namespace: root in the container is its host uid to the daemon" {
	ns_user || skip "cannot create a user"
	setpriv --reuid="$NS_U" --regid="$(id -g "$NS_U")" --clear-groups -- \
		unshare --user --map-root-user true 2>/dev/null ||
		skip "unprivileged user namespaces are not permitted here"
	local uid
	uid=$(id -u "$NS_U")
	chmod 755 "$T"
	install -d -m 700 -o "$NS_U" "$T/user"
	mkdir -m 755 "$T/pub"
	SOCK_PATH="$T/pub/ctl.sock" start_daemon --socket-mode 0666 --run-dir "$T/user"
	LIBALLOC_RUN_DIR_NS="$T/user" ns_start --as "$NS_U" --userns "$T/u.out" sleep 300
	# inside, the process is root with pid 1
	[ "$(awk '/^Uid:/ {print $2}' "/proc/$NSH/status")" = "$uid" ]
	[ "$(nspid_of "$NSH")" = 1 ]
	wait_for 30 listed "$NSH"
	run ctl list
	[[ "$output" == *"process pid=$NSH name=sleep exe=/usr/bin/sleep uid=$uid owner=$uid"* ]]
	# that uid sees and acts on it through the shared daemon; nobody else does
	run setpriv --reuid="$NS_U" --regid="$(id -g "$NS_U")" --clear-groups -- \
		"$ALLOCCTL" --socket "$SOCK" trim "$NSH"
	[ "$status" -eq 0 ]
	[[ "$output" == "trim $NSH: released "* ]]
	run setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
		"$ALLOCCTL" --socket "$SOCK" trim "$NSH"
	[ "$status" -ne 0 ]
	[[ "$output" == *"permission denied"* ]]
	# nothing of that directory was refused
	! grep -q "skipping segment $T/user" "$T/log"
}
