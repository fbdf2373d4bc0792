#!/usr/bin/env bats
# faults.bats — liballoc and allocctld under faults, with real preloaded processes:
# the daemon or a service SIGKILLed in the middle of a command, a segment truncated or
# overwritten while the daemon reads it, the run directory missing, unwritable, full or deleted,
# a directory in the way of the segment's name,
# the control thread unable to start, and every allocation function failing under
# RLIMIT_AS. The service must keep running (its blocks verified by the soak workload), the
# daemon must report and clean up, and liballoc must say what happened in one line.
# san: skip

setup() {
	source "$BATS_TEST_DIRNAME/common.bash"
	rel_setup --other-uid # some tests run the service as nobody or as a uid of its own
}

# unpublished_run DIR: the verified workload, as nobody, with DIR as its run directory:
# it works (no corrupted block, no failure) and leaves nothing in DIR ($output: its output)
unpublished_run() {
	run as_nobody env LIBALLOC_RUN_DIR="$1" LD_PRELOAD="$LIBALLOC_SO" "$SOAK" 2 1 64
	[ "$status" -eq 0 ]
	[[ "$output" == *"corrupt=0 failed=0"* ]]
	[ -z "$(ls -A "$1")" ]
}

teardown() {
	# the full file system's test mounts one in $T
	if mountpoint -q "$T/full" 2>/dev/null; then umount "$T/full"; fi
	rel_teardown
}

# A command the daemon relays while the service's control thread cannot answer (the service
# is stopped): the request sits in the mailbox, the daemon waits for it.
@test "daemon SIGKILLed mid-command: the service keeps allocating, a restarted daemon takes the mailbox over" {
	preload "$SOAK" 2 0 256
	start_daemon --rescan-ms 200 --command-timeout-ms 30000
	wait_listed "$SPID"
	stop_process "$SPID"
	ctl --timeout 60000 set "$SPID" top_pad=256K >"$T/cmd.out" 2>&1 &
	local cpid=$!
	# the request is in the mailbox, the daemon polls for the answer
	wait_until eval '[ "$(metric liballoc_ctld_commands_total)" -ge 1 ]'
	kill -9 "$DPID"
	wait "$DPID" || true
	DPID=
	kill -CONT "$SPID"
	wait "$cpid" || true # the client lost its daemon: no reply
	# the service keeps running and allocating
	still_allocating
	# a new daemon picks the process up and its commands get through the recovered mailbox
	start_daemon --rescan-ms 200
	wait_listed "$SPID"
	# (the dead daemon's mailbox lock is displaced once it expires: a few seconds)
	wait_until sh -c "'$CTLCLIENT' --socket '$SOCK' set $SPID top_pad=512K | grep -q 'result pid=$SPID .*code=OK'"
	run ctl get "$SPID" top_pad
	echo "$output"
	[[ "$output" == *"value pid=$SPID name=top_pad value=524288"* ]]
	finish_soak
}

@test "service SIGKILLed mid-command: the daemon reports it and cleans up" {
	preload sleep 600
	start_daemon --rescan-ms 200 --command-timeout-ms 30000
	wait_listed "$SPID"
	stop_process "$SPID"
	ctl --timeout 60000 trim "$SPID" >"$T/cmd.out" 2>&1 &
	local cpid=$!
	wait_until eval '[ "$(metric liballoc_ctld_commands_total)" -ge 1 ]'
	kill -9 "$SPID"
	wait "$cpid" || true
	cat "$T/cmd.out"
	# the command is answered (not left hanging, nor by the timeout) with an error naming
	# the process
	grep -q "result pid=$SPID exe=sleep code=ERR_NO_PROCESS .*message=the process exited during the command" "$T/cmd.out"
	wait_listed "$SPID" absent
	wait_until test ! -e "$T/segs/liballoc.$SPID.seg"
	kill -0 "$DPID"
	run ctl list
	[ "$status" -eq 0 ]
}

# readers_start / readers_wait N / readers_stop: clients that read the daemon's view of
# every process (/metrics, stats, list) in a loop; readers_wait waits until they have done
# N more rounds
readers_start() {
	(
		while [ ! -e "$T/readers.stop" ]; do
			metrics >/dev/null || true
			ctl stats "$SPID" >/dev/null 2>&1 || true
			ctl list >/dev/null || true
			echo >>"$T/rounds"
		done
	) 3>&- &
	READERS=$!
	bg_record "$READERS"
}
rounds() { wc -l <"$T/rounds" 2>/dev/null || echo 0; }
readers_wait() {
	local want=$(($(rounds) + $1))
	wait_until eval '[ "$(rounds)" -ge '"$want"' ]'
}
readers_stop() {
	touch "$T/readers.stop"
	wait "$READERS"
}

@test "segment overwritten while the daemon reads it: refused and logged, the daemon and the service live on" {
	preload "$SOAK" 2 0 256
	start_daemon --rescan-ms 100
	wait_listed "$SPID"
	local seg="$T/segs/liballoc.$SPID.seg"
	readers_start
	readers_wait 3
	# overwrite the header (the service only writes counters and the mailbox page)
	head -c 512 /dev/urandom | dd of="$seg" conv=notrunc status=none
	wait_listed "$SPID" absent
	# later scans (not logged again) while the readers go on
	wait_rescans 3
	readers_wait 3
	readers_stop
	kill -0 "$DPID"
	grep -q "skipping segment $T/segs/liballoc.$SPID.seg: bad magic" "$T/log"
	[ "$(grep -c "skipping segment $T/segs/liballoc.$SPID.seg" "$T/log")" -eq 1 ] # once
	finish_soak
}

@test "segment truncated while the daemon reads it: the daemon survives and drops it" {
	start_daemon --rescan-ms 100
	preload sleep 600
	wait_listed "$SPID"
	local seg="$T/segs/liballoc.$SPID.seg"
	readers_start
	readers_wait 3
	truncate -s 100 "$seg"
	readers_wait 3
	truncate -s 0 "$seg"
	wait_listed "$SPID" absent
	readers_wait 3
	readers_stop
	kill -0 "$DPID"
	run ctl list
	[ "$status" -eq 0 ]
}

# Its statistics are written through a shared mapping of the file: past the new end, a
# write faults with SIGBUS; liballoc moves the segment to private memory (tests/e2e/
# sigbus.bats: the application's own SIGBUS handling around that)
@test "a preloaded service survives its own segment being truncated, and says so once" {
	start_daemon --rescan-ms 100
	preload "$SOAK" 4 0 64
	wait_listed "$SPID"
	local seg="$T/segs/liballoc.$SPID.seg"
	truncate -s 0 "$seg"
	still_allocating
	wait_until test ! -e "$seg" # unpublished
	wait_listed "$SPID" absent
	finish_soak
	[ "$(grep -c . "$T/svc.err")" -eq 1 ]
	grep -qx "liballoc: statistics no longer published: $seg was truncated to 0 bytes by another process; they are kept in private memory" "$T/svc.err"
	kill -0 "$DPID"
}

@test "a segment truncated to a part of its first page: the service lives on, the daemon drops it" {
	start_daemon --rescan-ms 100
	preload "$SOAK" 2 0 64
	wait_listed "$SPID"
	truncate -s 100 "$T/segs/liballoc.$SPID.seg"
	wait_listed "$SPID" absent
	still_allocating
	finish_soak
	kill -0 "$DPID"
}

# unpublished [VAR=VALUE...] CMD...: CMD runs to completion, prints the right thing, and
# liballoc says exactly once why it does not publish
@test "run directory missing (its parent too): the service runs unpublished, one line says why" {
	# (a missing last component alone is created, mode 0700: see the next test)
	run env LIBALLOC_RUN_DIR="$T/missing/dir" LD_PRELOAD="$LIBALLOC_SO" "$SOAK" 2 1 64
	[ "$status" -eq 0 ]
	[[ "$output" == *"corrupt=0 failed=0"* ]]
	[ "$(grep -c '^liballoc:' <<<"$output")" -eq 1 ]
	[[ "$output" == *"liballoc: statistics not published: run directory $T/missing/dir: No such file or directory"* ]]
	[ ! -e "$T/missing" ]
}

@test "run directory whose last component is missing: created mode 0700, the service publishes" {
	mkdir -m 1777 "$T/shared"
	# (the segment is named 50 ms after the start: LIBALLOC_PUBLISH_DELAY)
	run env LIBALLOC_RUN_DIR="$T/shared/pod" LD_PRELOAD="$LIBALLOC_SO" sh -c \
		'for i in $(seq 200); do ls "$LIBALLOC_RUN_DIR" | grep -q "^liballoc\.$$" && break; sleep 0.05; done
		ls "$LIBALLOC_RUN_DIR"; stat -c "%a %u" "$LIBALLOC_RUN_DIR"'
	[ "$status" -eq 0 ]
	[[ "$output" != *liballoc:* ]]
	[[ "$output" == *"liballoc."*".seg"* ]]
	[ "${lines[-1]}" = "700 $(id -u)" ]
}

@test "run directory not writable by the service's user: it runs unpublished, one line says why" {
	mkdir -m 755 "$T/rootdir"
	unpublished_run "$T/rootdir"
	[ "$(grep -c '^liballoc:' <<<"$output")" -eq 1 ]
	[[ "$output" == *"liballoc: statistics not published: run directory $T/rootdir must be owned by this user with mode 0700"* ]]
}

@test "run directory made unwritable (owner's directory, mode 0500): it runs unpublished, one line says why" {
	mkdir -m 700 "$T/nob" && chown nobody "$T/nob" && chmod 500 "$T/nob"
	unpublished_run "$T/nob"
	[ "$(grep -c '^liballoc:' <<<"$output")" -le 1 ]
	[[ "$output" == *"liballoc: statistics not published: cannot create $T/nob/liballoc."*".tmp: Permission denied"* ]]
}

@test "run directory on a full file system: it runs unpublished, one line says why, no file left" {
	mkdir -m 700 "$T/full"
	mount -t tmpfs -o size=64k,mode=0700 liballoc-full "$T/full"
	# fill it (the segment's file is still created, sparse: its first write fails)
	dd if=/dev/zero of="$T/full/fill" bs=4k 2>/dev/null || true
	run env LIBALLOC_RUN_DIR="$T/full" LD_PRELOAD="$LIBALLOC_SO" "$SOAK" 2 1 64
	[ "$status" -eq 0 ]
	[[ "$output" == *"corrupt=0 failed=0"* ]]
	[ "$(grep -c '^liballoc:' <<<"$output")" -eq 1 ]
	# (the file is made unnamed, to be named later: nothing to name in the line)
	[[ "$output" == *"liballoc: statistics not published: cannot make a file in $T/full: No space left on device"* ]]
	[ "$(ls -A "$T/full")" = fill ]
}

@test "a directory in the way of the segment's name: the service runs unpublished, one line says why, no file left" {
	# the name a process publishes under here ("liballoc.PID.seg", with the pid namespace's
	# tag when it is not the first one's): a preloaded process shows it
	mkdir -m 700 "$T/probe" "$T/rn"
	run env LIBALLOC_RUN_DIR="$T/probe" LD_PRELOAD="$LIBALLOC_SO" sh -c 'echo $$
		for i in $(seq 200); do ls "$LIBALLOC_RUN_DIR" | grep -q "^liballoc\.$$" && break; sleep 0.05; done
		ls "$LIBALLOC_RUN_DIR"'
	[ "$status" -eq 0 ]
	local tag=${lines[1]#liballoc.${lines[0]}}
	tag=${tag%.seg}
	[ "${lines[1]}" = "liballoc.${lines[0]}$tag.seg" ]
	# the service's pid is known before it starts (it waits for the directory to be made):
	# a directory of that name is where its file would go, so the naming of its file fails
	# (shm.c name_file: the name taken, the file linked under its temporary name, the
	# rename over the directory refused; the temporary name removed)
	mkfifo "$T/go"
	(
		read -r _ <"$T/go"
		exec env LIBALLOC_RUN_DIR="$T/rn" LD_PRELOAD="$LIBALLOC_SO" "$SOAK" 2 1 64
	) >"$T/rn.out" 2>&1 3>&- &
	local pid=$!
	mkdir -p "$T/rn/liballoc.$pid$tag.seg/in"
	echo go >"$T/go"
	local rc=0
	wait "$pid" || rc=$?
	cat "$T/rn.out"
	[ "$rc" -eq 0 ]
	grep -q "corrupt=0 failed=0" "$T/rn.out"
	[ "$(grep -c '^liballoc:' "$T/rn.out")" -eq 1 ]
	grep -qF "liballoc: statistics not published: $T/rn/liballoc.$pid$tag.tmp: Is a directory" "$T/rn.out"
	[ "$(ls -A "$T/rn")" = "liballoc.$pid$tag.seg" ]
	[ "$(ls -A "$T/rn/liballoc.$pid$tag.seg")" = in ]
}

@test "run directory deleted while the service runs: it keeps running and exits cleanly" {
	preload "$SOAK" 2 0 128
	still_allocating 1
	rm -rf "$T/segs"
	still_allocating
	finish_soak
	[ "$(grep -c . "$T/svc.err" || true)" -le 1 ]
}

@test "control thread unable to start (RLIMIT_NPROC=1): the service runs, the reason is logged once" {
	# a uid of its own: RLIMIT_NPROC counts every process of the real uid (execve fails with
	# EAGAIN when other processes of that uid exist, e.g. nobody's in parallel suites)
	local uid=61234
	while ps -o pid= -u "$uid" | grep -q .; do uid=$((uid + 1)); done
	mkdir -m 700 "$T/own" && chown "$uid:$uid" "$T/own"
	start_daemon --rescan-ms 100 --run-dir "$T/own"
	prlimit --nproc=1:1 "$AS_USER" "$uid" env LIBALLOC_RUN_DIR="$T/own" LD_PRELOAD="$LIBALLOC_SO" \
		python3 -c '
import os, sys, time
x = [bytes(100) for _ in range(100000)]
while not os.path.exists(sys.argv[1]):  # alive until the test is done with it
    time.sleep(0.05)
print(len(x))' "$T/py.stop" >"$T/py.out" 2>"$T/py.err" 3>&- &
	local py=$!
	bg_record "$py"
	wait_file "$T/own/liballoc.$py.seg" || cat "$T/py.err"
	wait_listed "$py"
	run ctl list
	[[ "$output" == *"process pid=$py "*"control=failed"* ]]
	# a command to it fails at once with the reason, it does not hang
	run ctl trim "$py"
	[[ "$output" == *"result pid=$py "*"code=ERR_FAILED"*"control thread failed to start"* ]]
	touch "$T/py.stop"
	wait "$py"
	[ "$(cat "$T/py.out")" = 100000 ]
	cat "$T/py.err"
	[ "$(grep -c . "$T/py.err")" -eq 1 ]
	grep -q '^liballoc: control thread not started: Resource temporarily unavailable$' "$T/py.err"
}

@test "RLIMIT_AS: every allocation function fails cleanly with ENOMEM" {
	run env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_RUN_DIR="$T/segs" "$REL_BIN/enomem" 64
	echo "$output"
	[ "$status" -eq 0 ]
	for f in malloc calloc calloc-elements memalign aligned_alloc valloc pvalloc posix_memalign \
		realloc reallocarray reallocarray-null small-blocks-until-limit reuse-after-free; do
		[[ "$output" == *"ok $f"* ]]
	done
	[[ "$output" == *"PASS: 0 failure(s)"* ]]
}

@test "RLIMIT_AS set from outside (prlimit) before start: allocations fail with ENOMEM, no crash" {
	run prlimit --as=$((256 << 20)) env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_RUN_DIR="$T/segs" \
		python3 -c '
try:
    x = bytearray(512 << 20)
    print("allocated")
except MemoryError:
    print("MemoryError")
y = [bytes(1000) for _ in range(1000)]
print("still allocating", len(y))'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"MemoryError"* ]]
	[[ "$output" == *"still allocating 1000"* ]]
}

@test "a request pipelined behind a command that finishes at once is answered" {
	# flush --all with no process visible finishes inside the request handler; the
	# connection must go on reading (here: the second flush must be answered too)
	start_daemon
	run python3 - "$SOCK" "$ROOT/tests/fuzz/corpus/fuzz_frame/flush" <<'PY'
import socket, struct, sys
frame = open(sys.argv[2], "rb").read()[1:]  # a framed FlushRequest{all}, after the fuzzer's flag byte
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(2)
s.sendall(frame * 2)
buf, got = b"", 0
try:
    while got < 2:
        d = s.recv(65536)
        if not d:
            break
        buf += d
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
            buf = buf[4 + struct.unpack(">I", buf[:4])[0]:]
            got += 1
except socket.timeout:
    pass
print("replies=%d" % got)
PY
	echo "$output"
	kill -0 "$DPID"
	[ "$output" = "replies=2" ]
}

@test "a child forked with no address space to spare leaves its parent's segment alone" {
	mkdir -m 700 "$T/fas"
	run env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_RUN_DIR="$T/fas" "$REL_BIN/forkas" "$T/fas"
	echo "$output"
	[ "$status" -eq 0 ]
	for c in segment-published child-exited segment-still-there parent-pid-kept \
		parent-threads-kept parent-arena-threads-kept parent-metadata-kept; do
		[[ "$output" == *"ok $c"* ]]
	done
	[[ "$output" == *"PASS: 0 failure(s)"* ]]
}
