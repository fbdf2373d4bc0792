#!/usr/bin/env bats
# layouts.bats — issue 22: the two deployments of deploy/README.md, played with unshare(1)
# instead of a kubelet, and the per-service metrics mode.
#  - per-node: a root daemon provides <uid_dirs>/<uid> (provide_uid_dirs); a "pod" (own
#    pid and mount namespaces, a non-root uid) sees only that directory, bind-mounted where
#    its LIBALLOC_RUN_DIR points; the daemon finds the process under its host pid, shows its
#    namespace pid and cgroup in ps, stats and /metrics, and its trim reaches it;
#  - sidecar: the daemon and the service in one pid namespace, as one non-root uid, sharing
#    an in-memory volume (tmpfs) as run directory: no root, no host path;
#  - metrics_mode = service: one series set per service whatever the number of processes;
#    its counters never go down when processes exit.
# san: skip

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/tests/containers/common.bash"
	ns_setup
	unshare --pid --mount --fork --kill-child --mount-proc true 2>/dev/null ||
		skip "unshare cannot create pid and mount namespaces here"
}

teardown() {
	ns_teardown
}

@test "per-node layout: a pod's own uid directory from the host, found under its host pid" {
	ns_user || skip "cannot create a user"
	local uid
	uid=$(id -u "$NS_U")
	mkdir -m 755 "$T/node"
	cat >"$T/conf" <<-EOF
		[daemon]
		default_dirs = yes
		shm_root = $T/shm
		uid_dirs = $T/node
		provide_uid_dirs = $uid
	EOF
	mkdir -m 1777 "$T/shm"
	CTLD_DEFAULT_DIRS=1 start_daemon --config "$T/conf"
	# the daemon made the uid's directory, its own and private
	[ "$(stat -c '%u %a' "$T/node/$uid")" = "$uid 700" ]
	grep -q "provided $T/node/$uid for uid $uid" "$T/log"
	# the pod: its own pid and mount namespaces; only its directory, at the path it uses
	mkdir -m 755 "$NS_SHARE/run"
	unshare --pid --mount --fork --kill-child --mount-proc sh -c '
		mount --bind "$1" "$2/run" || exit 1
		exec setpriv --reuid="$3" --regid="$3" --clear-groups -- \
			env LIBALLOC_RUN_DIR="$2/run" LD_PRELOAD="$4" sleep 300' \
		sh "$T/node/$uid" "$NS_SHARE" "$uid" "$LIBALLOC_SO" >"$T/pod.out" 2>&1 3>&- &
	NSU=$!
	echo "$NSU" >>"$T/pids"
	wait_for 30 ns_find_host_pid ""
	[ "$(nspid_of "$NSH")" = 1 ]
	local ns
	ns=$(pidns_of "$NSH")
	wait_for 30 listed "$NSH"
	[ -f "$T/node/$uid/liballoc.1.ns$ns.seg" ]
	[ "$(field "$NSH" uid)" = "$uid" ]
	[ "$(field "$NSH" nspid)" = 1 ]
	# both pids and the cgroup, in ps, stats and /metrics
	local cg
	cg=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ || $1 == "0" {print $3; exit}' "/proc/$NSH/cgroup")
	run "$ALLOCCTL" --socket "$SOCK" ps
	[[ "$output" == *"pid 1 in its namespace"* ]]
	run "$ALLOCCTL" --socket "$SOCK" stats "$NSH"
	[[ "$output" == *"container: pid 1 in pid namespace $ns"* ]]
	[[ "$output" == *"cgroup: $cg"* ]]
	run "$ALLOCCTL" --socket "$SOCK" --json ps
	[[ "$output" == *"\"pid\":$NSH,\"ns_pid\":1,\"pid_namespace\":$ns,\"cgroup\":\"$cg\""* ]]
	run metrics
	[[ "$output" == *"liballoc_process_info{pid=\"$NSH\",uid=\"$uid\",exe=\"/usr/bin/sleep\",name=\"sleep\",owner_uid=\"$uid\",ns_pid=\"1\",pid_namespace=\"$ns\",cgroup=\"$cg\"} 1"* ]]
	# commands reach it
	run "$ALLOCCTL" --socket "$SOCK" trim "$NSH"
	[ "$status" -eq 0 ]
	[[ "$output" == "trim $NSH: released "* ]]
	! grep -q "removed stale" "$T/log"
}

@test "provide_uid_dirs: a provided directory removed while the daemon runs is made again" {
	mkdir -m 755 "$T/node" && mkdir -m 1777 "$T/shm"
	cat >"$T/conf" <<-EOF
		[daemon]
		default_dirs = yes
		shm_root = $T/shm
		uid_dirs = $T/node
		provide_uid_dirs = 4242, 4343
	EOF
	# hours between rescans: only the watch of uid_dirs can see the removal
	CTLD_DEFAULT_DIRS=1 start_daemon --config "$T/conf" --rescan-ms 3600000
	[ "$(stat -c '%u %a' "$T/node/4242")" = "4242 700" ]
	rmdir "$T/node/4242"
	wait_for 30 test -d "$T/node/4242"
	[ "$(stat -c '%u %a' "$T/node/4242")" = "4242 700" ]
	[ "$(grep -c "provided $T/node/4242 for uid 4242" "$T/log")" -eq 2 ]
	# moved away: made again too; the other one was never touched
	mv "$T/node/4343" "$T/node/old"
	wait_for 30 test -d "$T/node/4343"
	[ "$(grep -c "provided $T/node/4343 for uid 4343" "$T/log")" -eq 2 ]
}

@test "sidecar layout: daemon and service in one pid namespace, one uid, a tmpfs run directory" {
	ns_user || skip "cannot create a user"
	local uid
	uid=$(id -u "$NS_U")
	mkdir -m 755 "$NS_SHARE/vol"
	install -d -m 700 -o "$uid" "$NS_SHARE/sock"
	# the pod: the volume (tmpfs, 1777 like an emptyDir), the service and the sidecar
	unshare --pid --mount --fork --kill-child --mount-proc sh -c '
		mount -t tmpfs -o mode=1777,size=16m pod "$1/vol" || exit 1
		setpriv --reuid="$2" --regid="$2" --clear-groups -- \
			env LIBALLOC_RUN_DIR="$1/vol/app" LD_PRELOAD="$3" sleep 300 &
		setpriv --reuid="$2" --regid="$2" --clear-groups -- "$4" \
			--no-default-dirs --run-dir "$1/vol/app" --socket "$1/sock/ctl.sock" \
			--listen off --ready-file "$1/sock/ready" &
		wait' sh "$NS_SHARE" "$uid" "$LIBALLOC_SO" "$CTLD" >"$T/pod.out" 2>&1 3>&- &
	echo $! >>"$T/pids"
	wait_file "$NS_SHARE/sock/ready"
	SOCK="$NS_SHARE/sock/ctl.sock"
	# the service, under the pid the sidecar sees (its pid in the pod), of its uid
	wait_for 30 bash -c "'$CTLCLIENT' --socket '$SOCK' list | grep -q ' name=sleep '"
	run ctl list
	[ "$(grep -c '^process ' <<<"$output")" -eq 1 ]
	[[ "$output" =~ process\ pid=([0-9]+)\ name=sleep\ exe=/usr/bin/sleep\ uid=$uid\ owner=$uid ]]
	local pp=${BASH_REMATCH[1]}
	[[ "$output" == *" nspid=$pp "* ]]
	[ "$pp" -lt 10 ]
	# its uid acts on it through the sidecar
	run setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
		"$ALLOCCTL" --socket "$SOCK" trim "$pp"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "trim $pp: released "* ]]
	# the sidecar may start before the service has made the run directory: "not watching
	# ...: No such file or directory" until it appears is expected; any other refusal is not
	[ -z "$(grep "skipping segment" "$T/pod.out")" ]
	[ -z "$(grep "not watching" "$T/pod.out" | grep -v "No such file or directory")" ]
}

# metric NAME FILE: the value of the one series of NAME for sleep's service
svc_value() {
	sed -n "s/^$1{exe=\"\/usr\/bin\/sleep\",profile=\"\"} //p" "$2"
}

@test "metrics_mode = service: one series set per service; its counters survive exits" {
	start_daemon --metrics-mode service --rescan-ms 200
	local p i
	for i in 1 2 3; do
		LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" sleep 300 >/dev/null 2>&1 3>&- &
		p[$i]=$!
		echo "${p[$i]}" >>"$T/pids"
	done
	for i in 1 2 3; do wait_for 30 listed "${p[$i]}"; done
	metrics >"$T/m1"
	[ "$(svc_value liballoc_service_processes "$T/m1")" = 3 ]
	# one series of each family for the three, none per pid
	[ "$(grep -c '^liballoc_in_use_bytes{' "$T/m1")" -eq 1 ]
	! grep -q 'pid="' "$T/m1"
	! grep -q '^liballoc_arena_\|^liballoc_tunable_\|^liballoc_process_info' "$T/m1"
	local r1 in1
	r1=$(svc_value liballoc_cache_refills_total "$T/m1")
	in1=$(svc_value liballoc_in_use_bytes "$T/m1")
	[ "$r1" -gt 0 ]
	# two exit: the level drops, the counter keeps what they counted
	kill "${p[1]}" "${p[2]}"
	wait_for 30 bash -c "! '$CTLCLIENT' --socket '$SOCK' list | grep -q 'pid=${p[1]} \|pid=${p[2]} '"
	metrics >"$T/m2"
	[ "$(svc_value liballoc_service_processes "$T/m2")" = 1 ]
	[ "$(svc_value liballoc_in_use_bytes "$T/m2")" -lt "$in1" ]
	[ "$(svc_value liballoc_cache_refills_total "$T/m2")" -ge "$r1" ]
	promtool check metrics <"$T/m2"
	# forgotten while it lives (its segment looked damaged) and found again: counted once
	local seg3="$T/segs/liballoc.${p[3]}.seg" r2
	r2=$(svc_value liballoc_cache_refills_total "$T/m2")
	chmod 0644 "$seg3"
	wait_for 30 grep -q "forgetting pid ${p[3]} " "$T/log"
	chmod 0600 "$seg3"
	touch "$seg3" # a refused file is examined again once its mtime moves
	wait_for 30 listed "${p[3]}"
	metrics >"$T/m2b"
	[ "$(svc_value liballoc_service_processes "$T/m2b")" = 1 ]
	[ "$(svc_value liballoc_cache_refills_total "$T/m2b")" = "$r2" ]
	# the same processes in per-pid mode: one series each
	kill "$DPID"
	wait "$DPID" || true
	start_daemon
	LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" sleep 300 >/dev/null 2>&1 3>&- &
	echo $! >>"$T/pids"
	wait_for 30 listed $!
	metrics >"$T/m3"
	[ "$(grep -c '^liballoc_in_use_bytes{pid=' "$T/m3")" -eq 2 ]
	! grep -q '^liballoc_service_processes' "$T/m3"
	# a bad mode is refused with the valid ones
	run "$CTLD" --metrics-mode exe --check-config
	[ "$status" -ne 0 ]
	[[ "$output" == *"--metrics-mode: bad value 'exe' (pid or service)"* ]]
	run "$CTLD" --config /dev/null --check-config
	printf '[daemon]\nprovide_uid_dirs = 1000, -1\n' >"$T/bad.conf"
	run "$CTLD" --config "$T/bad.conf" --check-config
	[ "$status" -ne 0 ]
	[[ "$output" == *"provide_uid_dirs: '-1' is not a uid"* ]]
}
