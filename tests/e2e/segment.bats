#!/usr/bin/env bats
# segment.bats — the segment and the control thread of a preloaded process (issue 5), seen
# through the ctld reader API (tests/helpers/segtool): file owner and mode, removal at exit,
# stale after SIGKILL and after exec of a program without liballoc, fork (own segment, own
# counters, own control thread), every mailbox command's effect on the statistics and on
# the allocator, refused command records, LIBALLOC_CONTROL=0, invalid LIBALLOC_<NAME>, and
# the reaping of stale segments (never of a live one): by the control thread a second after
# the start, by the start itself when there is no control thread.
# The process under test is tests/helpers/segwork, driven line by line through a FIFO.
# Needs the preloadable liballoc.so, which sanitizer builds do not produce.
# san: skip

bats_require_minimum_version 1.5.0
source "$ROOT/tests/helpers/wait.bash"

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	SEGTOOL="$TESTS_BIN/segtool"
	SEGWORK="$TESTS_BIN/segwork"
	mkdir -p "$BUILD/run"
	T=$(mktemp -d "$BUILD/run/segment.XXXXXX")
	SEGS="$T/segs"
	mkdir -m 700 "$SEGS"
	: >"$T/pids"
	: >"$T/out"
	: >"$T/err"
}

teardown() {
	local fd p
	for fd in ${FDS:-}; do eval "exec $fd>&-"; done
	if [ -f "$T/pids" ]; then
		while read -r p; do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null || true; done <"$T/pids"
		while read -r p; do
			wait_until -t 10 ended "$p" 2>/dev/null || true
			kill -9 "$p" 2>/dev/null || true
		done <"$T/pids"
	fi
	rm -rf "$T"
}

# start_work [VAR=VALUE...]: a preloaded segwork reading a FIFO of its own; sets WPID and WFD
# (the descriptor its commands are written to; closing it makes segwork exit normally), and
# waits for its segment (named LIBALLOC_PUBLISH_DELAY after the start) unless NOSEG=1.
# With NOWAITV=1 it runs where futex_waitv fails (tests/helpers/nowaitv).
start_work() {
	local fifo="$T/in.$RANDOM$RANDOM"
	mkfifo "$fifo"
	(
		for kv in "$@"; do export "${kv?}"; done
		export LIBALLOC_RUN_DIR="$SEGS"
		[ -z "${NOWAITV:-}" ] || exec "$TESTS_BIN/nowaitv" -p "$LIBALLOC_SO" "$SEGWORK"
		export LD_PRELOAD="$LIBALLOC_SO"
		exec "$SEGWORK"
	) <"$fifo" >>"$T/out" 2>>"$T/err" 3>&- &
	WPID=$!
	echo "$WPID" >>"$T/pids"
	exec {WFD}>"$fifo"
	FDS="${FDS:-} $WFD"
	wait_line "^$WPID ready$"
	[ -n "${NOSEG:-}" ] || wait_until test -e "$(seg "$WPID")"
}

# wait_line REGEX: until a line of $T/out matches.
wait_line() {
	wait_until grep -qE "$1" "$T/out" && return 0
	echo "output and errors of the processes:" >&2
	cat "$T/out" "$T/err" >&2
	return 1
}

answers() { grep -cE "^$1 (ok|error) " "$T/out" || true; }

# work PID FD COMMAND...: send one command and wait for its "ok" answer.
work() {
	local pid=$1 fd=$2
	shift 2
	local n
	n=$(answers "$pid")
	echo "$*" >&"$fd"
	wait_until eval '[ "$(answers '"$pid"')" -gt '"$n"' ]' || true
	grep -qE "^$pid ok $((n + 1)) $1\$" "$T/out" || {
		echo "command '$*' to $pid failed:" >&2
		cat "$T/out" "$T/err" >&2
		return 1
	}
}

seg() { echo "$SEGS/liballoc.$1.seg"; }


# fork_child: the workload forks; sets CPID (the child) and CFD (its command pipe) and
# waits for the child's segment
fork_child() {
	mkfifo "$T/child"
	echo "fork $T/child" >&"$WFD"
	exec {CFD}>"$T/child"
	FDS="$FDS $CFD"
	wait_line "^[0-9]+ child of $WPID$"
	CPID=$(sed -n "s/^\([0-9]*\) child of $WPID\$/\1/p" "$T/out")
	echo "$CPID" >>"$T/pids"
	wait_until test -e "$(seg "$CPID")"
}

# sv PID NAME: a counter total (or header field, or tunable.NAME) read by the reader.
sv() {
	"$SEGTOOL" info "$(seg "$1")" | sed -n "s/^$2=\([^ ]*\).*/\1/p"
}

# mb PID ARGS...: one mailbox command through the reader API; output in $T/mb.
mb() {
	local pid=$1
	shift
	"$SEGTOOL" cmd "$(seg "$pid")" "$@" >"$T/mb"
}
field() { sed -n "s/^$1=//p" "$T/mb"; }

# refused_with_one_line VAR WANT VALUE...: a program run with VAR set to each VALUE runs as
# without it and prints one line on stderr, which holds WANT ({} is VAR, VALUE the value).
refused_with_one_line() {
	local var=$1 want=$2 v w
	shift 2
	for v in "$@"; do
		run --separate-stderr env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_RUN_DIR="$SEGS" \
			"$var=$v" /bin/echo hello
		echo "value '$v': status=$status out=$output err=$stderr"
		[ "$status" -eq 0 ]
		[ "$output" = hello ]
		[ "${#stderr_lines[@]}" -eq 1 ]
		w=${want//\{\}/$var}
		w=${w//VALUE/$v}
		[[ "$stderr" == *"$w"* ]]
	done
}

wait_gone() {
	wait_until test ! -e "$1"
}

@test "the segment is 0600, owned by the user, in a 0700 directory, and goes at exit" {
	start_work
	[ -f "$(seg "$WPID")" ]
	[ "$(stat -c '%u %a' "$(seg "$WPID")")" = "$(id -u) 600" ]
	[ "$(stat -c '%a' "$SEGS")" = 700 ]
	[ "$(sv "$WPID" pid)" = "$WPID" ]
	[ "$(sv "$WPID" uid)" = "$(id -u)" ]
	[ "$(sv "$WPID" liveness)" = live ]
	# created under a temporary name and renamed: nothing else is left in the directory
	[ "$(ls "$SEGS")" = "liballoc.$WPID.seg" ]
	work "$WPID" "$WFD" exit
	wait "$WPID"
	wait_gone "$(seg "$WPID")"
}

@test "a process killed with SIGKILL leaves a segment the reader reports as stale" {
	start_work
	run "$SEGTOOL" live "$(seg "$WPID")"
	[ "$status" -eq 0 ]
	[ "$output" = live ]
	kill -9 "$WPID"
	wait "$WPID" || true
	[ -f "$(seg "$WPID")" ]
	run "$SEGTOOL" live "$(seg "$WPID")"
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == stale:* ]]
	[ "$(sv "$WPID" liveness)" = stale ]
}

# stale_and_exec_ing: three processes without a control thread (they sweep at once, when
# nothing is stale yet) of which two are killed, and a live pid whose segment's lock is
# free; sets live1, dead, exec_ing.
stale_and_exec_ing() {
	start_work LIBALLOC_CONTROL=0
	live1=$WPID
	start_work LIBALLOC_CONTROL=0
	dead=$WPID
	start_work LIBALLOC_CONTROL=0
	local dead2=$WPID
	kill -9 "$dead" "$dead2"
	wait "$dead" || true
	wait "$dead2" || true
	[ -f "$(seg "$dead")" ]
	# a live pid whose segment's lock is free: what a process that is exec'ing leaves for
	# a moment (the old image's lock went with it, the new image has not renamed its new
	# segment over the name yet); here for good, under the name of a live process that
	# does not use liballoc. Only the pid tells it from a stale one, and it must stay.
	sleep 600 3>&- &
	exec_ing=$!
	echo "$exec_ing" >>"$T/pids"
	mv "$(seg "$dead2")" "$(seg "$exec_ing")"
}

@test "a new process removes stale segments of the user and never a live one" {
	local live1 dead exec_ing
	stale_and_exec_ing
	# its control thread sweeps once, a second after the start (SHM_REAP_AFTER_NS)
	start_work
	local live2=$WPID
	wait_gone "$(seg "$dead")"
	[ -e "$(seg "$exec_ing")" ]
	[ "$(sv "$live1" liveness)" = live ]
	[ "$(sv "$live2" liveness)" = live ]
	[ "$(ls "$SEGS" | wc -l)" -eq 3 ]
}

@test "without a control thread a process sweeps stale segments as it starts" {
	local live1 dead exec_ing
	stale_and_exec_ing
	start_work LIBALLOC_CONTROL=0
	local live2=$WPID
	[ ! -e "$(seg "$dead")" ]
	[ -e "$(seg "$exec_ing")" ]
	[ "$(sv "$live1" liveness)" = live ]
	[ "$(sv "$live2" liveness)" = live ]
	[ "$(ls "$SEGS" | wc -l)" -eq 3 ]
}

@test "a start in a directory holding more than 64 names sweeps at once" {
	local live1 dead exec_ing i
	stale_and_exec_ing
	# (names long enough that a directory of any file system grows past 4 KiB)
	for ((i = 0; i < 300; i++)); do
		: >"$SEGS/filler.$i.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	done
	LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$LIBALLOC_SO" /bin/true
	[ ! -e "$(seg "$dead")" ]
	[ -e "$(seg "$exec_ing")" ]
	[ "$(sv "$live1" liveness)" = live ]
	[ "$(ls "$SEGS" | wc -l)" -eq 302 ]
}

@test "a process that ends within a second of its start does not sweep; one that lives on does" {
	local live1 dead exec_ing
	stale_and_exec_ing
	# the start's own path: no look at the directory (a short-lived program pays nothing)
	LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$LIBALLOC_SO" /bin/true
	[ -e "$(seg "$dead")" ]
	start_work
	wait_gone "$(seg "$dead")"
	[ -e "$(seg "$exec_ing")" ]
}

@test "a process is named once it lived LIBALLOC_PUBLISH_DELAY; one that ends sooner names nothing" {
	command -v strace >/dev/null || skip "no strace"
	strace -o /dev/null /bin/true 2>/dev/null || skip "strace cannot trace here"
	# /bin/true ends within the delay (50 ms): its file (made unnamed, O_TMPFILE) never got
	# a name; nothing in the run directory was linked, renamed, locked or removed, and
	# /proc was not read (the identity is written when the file is named)
	run env LIBALLOC_RUN_DIR="$SEGS" strace -f -o "$T/trace" -E LD_PRELOAD="$LIBALLOC_SO" \
		-e trace=openat,linkat,renameat,renameat2,unlinkat,flock,newfstatat,readlink /bin/true
	[ "$status" -eq 0 ]
	cat "$T/trace"
	[ "$(grep -c 'O_TMPFILE' "$T/trace")" -eq 1 ]
	[ "$(grep -cE 'linkat|renameat|unlinkat|flock|/proc/' "$T/trace")" -eq 0 ]
	[ -z "$(ls -A "$SEGS")" ]
	# one that lives on is named by its control thread after the delay, not before
	local t0 t1
	t0=$(date +%s%N)
	NOSEG=1 start_work LIBALLOC_PUBLISH_DELAY=1s
	t1=$(date +%s%N)
	# (a look made 0.8 s or more after the start cannot tell)
	if [ $(((t1 - t0) / 1000000)) -lt 800 ]; then
		[ ! -e "$(seg "$WPID")" ]
		[ -z "$(ls -A "$SEGS")" ]
	fi
	wait_until test -e "$(seg "$WPID")"
	[ "$(sv "$WPID" pid)" = "$WPID" ]
	[ "$(sv "$WPID" liveness)" = live ]
	[ "$(sv "$WPID" exe)" = "$(readlink -f "$SEGWORK")" ]
	mb "$WPID" get mmap_threshold
	[ "$(field status_text)" = ok ]
	# forked children that exit at once name nothing either (each looks at once)
	work "$WPID" "$WFD" forks 20
	local counts
	counts=$(sed -n 's/^forks //p' "$T/out")
	echo "$counts"
	[[ "$counts" == *" named=0" ]]
	[[ "$counts" != "unnamed=0 "* ]]
	[ "$(ls -A "$SEGS")" = "liballoc.$WPID.seg" ]
	# and the counters were in the file from the start: what the process did before its
	# name was given is there
	[ "$(sv "$WPID" commands_executed)" -ge 1 ]
	[ "$(grep -c 'not published' "$T/err")" -eq 0 ]
}

@test "LIBALLOC_PUBLISH_DELAY=0 names the file at the start; a bad value is refused with one line" {
	command -v strace >/dev/null || skip "no strace"
	strace -o /dev/null /bin/true 2>/dev/null || skip "strace cannot trace here"
	run env LIBALLOC_RUN_DIR="$SEGS" LIBALLOC_PUBLISH_DELAY=0 strace -f -o "$T/trace" \
		-E LD_PRELOAD="$LIBALLOC_SO" -e trace=renameat,unlinkat /bin/true
	[ "$status" -eq 0 ]
	cat "$T/trace"
	grep -q 'renameat(.*liballoc\.[0-9]*\.seg"' "$T/trace"
	grep -q 'unlinkat(.*liballoc\.[0-9]*\.seg"' "$T/trace"
	refused_with_one_line LIBALLOC_PUBLISH_DELAY '{}=VALUE: ignored' soon 2s -1
}

@test "a process that drops its user or chroots before its name is given is named first" {
	[ "$(id -u)" -eq 0 ] || skip "needs root (setuid, chroot)"
	local id
	id=$(id -u nobody 2>/dev/null) || id=65534
	# the delay is long: the control thread would name the file after the drop, when the
	# process (nobody now) could not write root's 0700 run directory any more
	NOSEG=1 start_work LIBALLOC_PUBLISH_DELAY=1s
	local user=$WPID ufd=$WFD
	work "$user" "$ufd" setuid "$id"
	[ "$(stat -c %u "/proc/$user")" = "$id" ]
	# named before the call returned, with the identity it had
	[ -e "$(seg "$user")" ]
	[ "$(sv "$user" pid)" = "$user" ]
	[ "$(sv "$user" uid)" = 0 ]
	[ "$(sv "$user" liveness)" = live ]
	mb "$user" get mmap_threshold
	[ "$(field status_text)" = ok ]
	mkdir "$T/jail"
	NOSEG=1 start_work LIBALLOC_PUBLISH_DELAY=1s
	local jailed=$WPID jfd=$WFD
	work "$jailed" "$jfd" chroot "$T/jail"
	[ -e "$(seg "$jailed")" ]
	[ "$(sv "$jailed" liveness)" = live ]
	# the chrooted one removes its file at exit, through the directory it kept open
	work "$jailed" "$jfd" alloc 1M 1
	work "$jailed" "$jfd" exit
	wait "$jailed"
	[ ! -e "$(seg "$jailed")" ]
	# nobody cannot remove a name from root's 0700 directory: stale once it ended, as when
	# it was named at the start (allocctld, or the next start's sweep, removes it)
	work "$user" "$ufd" exit
	wait "$user"
	[ "$(sv "$user" liveness)" = stale ]
	[ "$(grep -c 'not published' "$T/err")" -eq 0 ]
}

@test "a process named before it chroots still removes its file at exit" {
	[ "$(id -u)" -eq 0 ] || skip "needs root (chroot)"
	# named by its control thread at once, before the chroot: the chroot keeps the
	# directory open then too (the file was left behind for the next sweep before)
	mkdir "$T/jail2"
	start_work LIBALLOC_PUBLISH_DELAY=0
	local jailed=$WPID jfd=$WFD
	[ "$(sv "$jailed" liveness)" = live ]
	work "$jailed" "$jfd" chroot "$T/jail2"
	work "$jailed" "$jfd" alloc 1M 1
	work "$jailed" "$jfd" exit
	wait "$jailed"
	[ ! -e "$(seg "$jailed")" ]
	[ "$(grep -c 'not published' "$T/err")" -eq 0 ]
}

@test "a process that closes every descriptor before its name is given is still named" {
	[ "$(id -u)" -eq 0 ] || skip "needs root (/proc/PID/map_files)"
	# sshd's closefrom at its start closes liballoc's descriptors too: the file is found
	# again through its mapping (a root process may open /proc/self/map_files)
	NOSEG=1 start_work LIBALLOC_PUBLISH_DELAY=1s
	work "$WPID" "$WFD" closefrom
	wait_until test -e "$(seg "$WPID")"
	[ "$(sv "$WPID" pid)" = "$WPID" ]
	[ "$(sv "$WPID" liveness)" = live ]
	mb "$WPID" get mmap_threshold
	[ "$(field status_text)" = ok ]
	work "$WPID" "$WFD" alloc 1M 1
	[ "$(sv "$WPID" direct_mappings)" -ge 1 ]
	work "$WPID" "$WFD" exit
	wait "$WPID"
	wait_gone "$(seg "$WPID")"
	[ "$(grep -c 'not published' "$T/err")" -eq 0 ]
}

@test "exec after exec: other processes publishing meanwhile never remove the live segment" {
	# every exec drops the old image's lock for a moment; a process publishing in the same
	# directory then may take the old file for stale, and must not unlink the new one.
	# The reaper's rule that makes this safe (a live pid's segment is never taken, whatever
	# its lock) is checked deterministically in "a new process removes stale segments ...".
	# This is the real thing end to end, and a matter of chance: a reaper without that rule
	# missed here about once in 600 execs (one miss in two runs of 300 at a load of 7), so the long
	# form's 1,500 execs catch it most of the time; the short form's 200 check the path.
	local n=200
	[ "${TEST_LONG:-0}" = 1 ] && n=1500
	(
		export LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$LIBALLOC_SO"
		while :; do /bin/true; done
	) 3>&- &
	echo "$!" >>"$T/pids"
	(
		export LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$LIBALLOC_SO"
		while :; do /bin/true; done
	) 3>&- &
	echo "$!" >>"$T/pids"
	# (each image's name is given 1 ms after its start, over the name of the image before)
	run env LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_PUBLISH_DELAY=1ms \
		"$TESTS_BIN/execchain" "$n"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "done misses=0" ]
}

@test "fork: the child has its own segment, counters and control thread" {
	start_work
	work "$WPID" "$WFD" alloc 1M 2
	local parent_direct parent_mmaps
	parent_direct=$(sv "$WPID" direct_mappings)
	parent_mmaps=$(sv "$WPID" mmap_calls)
	[ "$parent_direct" -ge 2 ]
	fork_child
	wait_line "^$WPID ok 2 fork$"
	[ "$(sv "$CPID" pid)" = "$CPID" ]
	[ "$(sv "$CPID" liveness)" = live ]
	[ "$(sv "$CPID" control)" = running ]
	# the child's allocations count in its segment only
	local child_direct
	child_direct=$(sv "$CPID" direct_mappings)
	work "$CPID" "$CFD" alloc 1M 5
	[ "$(sv "$CPID" direct_mappings)" -eq $((child_direct + 5)) ]
	[ "$(sv "$WPID" direct_mappings)" -eq "$parent_direct" ]
	[ "$(sv "$WPID" mmap_calls)" -eq "$parent_mmaps" ]
	# the child's control thread answers, and a tunable set there stays there
	mb "$CPID" set mmap_threshold 300000
	[ "$(field value)" = 300000 ]
	[ "$(sv "$CPID" tunable.mmap_threshold)" = 300000 ]
	[ "$(sv "$WPID" tunable.mmap_threshold)" = 131072 ]
	mb "$WPID" get mmap_threshold
	[ "$(field value)" = 131072 ]
	# both exit normally: both segments go
	work "$CPID" "$CFD" exit
	work "$WPID" "$WFD" exit
	wait_gone "$(seg "$CPID")"
	wait_gone "$(seg "$WPID")"
}

@test "exec of a preloaded program replaces the segment cleanly" {
	start_work
	work "$WPID" "$WFD" exec /usr/bin/sleep 600
	wait_until eval '[ "$(sv '"$WPID"' exe)" = /usr/bin/sleep ]'
	"$SEGTOOL" info "$(seg "$WPID")" | grep -qx 'exe=/usr/bin/sleep'
	[ "$(sv "$WPID" liveness)" = live ]
	[ "$(sv "$WPID" pid)" = "$WPID" ]
	[ "$(ls "$SEGS")" = "liballoc.$WPID.seg" ]
	mb "$WPID" get mmap_threshold
	[ "$(field status_text)" = ok ]
}

@test "exec of a program without liballoc: the segment is not stale while it lives, stale after" {
	start_work
	work "$WPID" "$WFD" exec-bare /usr/bin/sleep 600
	wait_until grep -q '^sleep' "/proc/$WPID/comm"
	kill -0 "$WPID"
	[ "$(ls "$SEGS")" = "liballoc.$WPID.seg" ]
	# the lock went with the old image (close-on-exec); the writer (same pid, start time)
	# still runs, so the segment is left alone (c95d0f2), not called stale
	run "$SEGTOOL" live "$(seg "$WPID")"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"lives on without its lock"* ]]
	kill "$WPID"
	wait "$WPID" || true # reaped: a zombie still has its /proc entry
	run "$SEGTOOL" live "$(seg "$WPID")"
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == stale:* ]]
}

@test "set mmap_threshold: the next block of that size is a direct mapping" {
	start_work
	work "$WPID" "$WFD" alloc 100000 1
	local d0
	d0=$(sv "$WPID" direct_mappings)
	work "$WPID" "$WFD" alloc 100000 1
	[ "$(sv "$WPID" direct_mappings)" -eq "$d0" ]
	mb "$WPID" set mmap_threshold 65536
	cat "$T/mb"
	[ "$(field status_text)" = ok ]
	[ "$(field value)" = 65536 ]
	[ "$(sv "$WPID" tunable.mmap_threshold)" = 65536 ]
	work "$WPID" "$WFD" alloc 100000 1
	[ "$(sv "$WPID" direct_mappings)" -eq $((d0 + 1)) ]
	[ "$(sv "$WPID" commands_executed)" -ge 1 ]
}

# ctl_sleeps_on_doorbell PID: the control thread sleeps in futex(2) on a word of the
# segment's mapping (the doorbell), not in futex_waitv (/proc/PID/task/TID/syscall)
ctl_sleeps_on_doorbell() {
	local pid=$1 t tid='' nr addr lo='' hi='' range inode path
	for t in /proc/"$pid"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = liballoc-ctl ] && tid=${t##*/}
	done
	[ -n "$tid" ] || return 1
	read -r nr addr _ <"/proc/$pid/task/$tid/syscall" || return 1
	case $(uname -m) in
	x86_64) [ "$nr" = 202 ] || return 1 ;;
	aarch64) [ "$nr" = 98 ] || return 1 ;;
	esac
	# (the mapping's path is the file's name when it was made: "#<inode> (deleted)" for a
	# file made unnamed and named later; its inode is the segment's)
	local ino
	ino=$(stat -c %i "$(seg "$pid")") || return 1
	while read -r range _ _ _ inode path; do
		[ "$inode" = "$ino" ] && lo=$((0x${range%-*})) hi=$((0x${range#*-}))
	done <"/proc/$pid/maps"
	[ -n "$lo" ] && [ $((addr)) -ge "$lo" ] && [ $((addr)) -lt "$hi" ]
}

@test "without futex_waitv (Linux < 5.16, seccomp) commands are still answered at once" {
	NOWAITV=1 start_work
	# the fallback sleeps on the doorbell word itself (a command wakes it at once, not at
	# its once-a-second poll): seen in the kernel, not timed
	wait_until ctl_sleeps_on_doorbell "$WPID"
	local v
	for v in 65536 81920 98304 114688 131072; do
		mb "$WPID" set mmap_threshold "$v"
		cat "$T/mb"
		[ "$(field status_text)" = ok ]
		[ "$(sv "$WPID" tunable.mmap_threshold)" = "$v" ]
	done
	wait_until ctl_sleeps_on_doorbell "$WPID"
	work "$WPID" "$WFD" churn 64 100
}

@test "trim: free resident bytes drop and the syscall counters rise by what it reported" {
	start_work LIBALLOC_DECAY_MS=0 LIBALLOC_TRIM_THRESHOLD=1G
	work "$WPID" "$WFD" alloc 36K 1024 # large blocks (above 32 KiB): freed, free resident pages
	work "$WPID" "$WFD" free
	# the last block freed waits in the thread cache's large slot, counted cached, and trim
	# returns it too: parked in the arena first, it is free resident like the others
	mb "$WPID" flush_caches
	[ "$(field status_text)" = ok ]
	local r0 ma0 mu0 mab0 mub0
	r0=$(sv "$WPID" free_resident_bytes)
	ma0=$(sv "$WPID" madvise_calls)
	mu0=$(sv "$WPID" munmap_calls)
	mab0=$(sv "$WPID" madvise_bytes)
	mub0=$(sv "$WPID" munmap_bytes)
	echo "free resident before: $r0"
	[ "$r0" -ge $((16 << 20)) ]
	mb "$WPID" trim 0
	cat "$T/mb"
	[ "$(field status_text)" = ok ]
	local released
	released=$(field bytes_released)
	[ "$released" -ge $((16 << 20)) ]
	# released is measured (mincore) and may hold a few resident pages that no counter
	# had (populated ahead or backed by a huge page: heap.c measure_vec counts such pages
	# only when it meets them): with blocks of 9-16 pages on their grid of 16 (heap.c
	# fit_on_grid) 5 pages of 38.9 MB here, and on main 8be8d8a with blocks of 68K 7 pages
	# of 71.8 MB. 64 pages of slack
	[ "$(sv "$WPID" free_resident_bytes)" -le $((r0 - released + (64 << 12))) ]
	[ "$(sv "$WPID" madvise_calls)" -eq $((ma0 + $(field madvise))) ]
	[ "$(sv "$WPID" munmap_calls)" -eq $((mu0 + $(field munmap))) ]
	[ $(($(field madvise) + $(field munmap))) -ge 1 ]
	# the bytes the calls covered include everything reported released
	[ $(($(sv "$WPID" madvise_bytes) - mab0 + $(sv "$WPID" munmap_bytes) - mub0)) -ge "$released" ]
}

# release_heaps_after SETUP...: 100 MiB of 64 KiB blocks (two heaps) after SETUP commands,
# all freed and the caches flushed; then release_idle_heaps must unmap the idle heap.
release_heaps_after() {
	start_work LIBALLOC_IDLE_HEAP_RELEASE=0 LIBALLOC_DECAY_MS=0 LIBALLOC_TRIM_THRESHOLD=1G
	local c
	# shellcheck disable=SC2086 # each argument is a command line
	for c in "$@"; do work "$WPID" "$WFD" $c; done
	work "$WPID" "$WFD" alloc 64K 1600
	local h1
	h1=$(sv "$WPID" heaps)
	echo "heaps with 100 MiB live: $h1"
	[ "$h1" -ge 2 ]
	work "$WPID" "$WFD" free
	# idle_heap_release=0: nothing went on its own
	[ "$(sv "$WPID" heaps)" -eq "$h1" ]
	mb "$WPID" flush_caches
	local rel0
	rel0=$(sv "$WPID" heaps_released)
	mb "$WPID" release_idle_heaps
	cat "$T/mb"
	[ "$(field status_text)" = ok ]
	local h2
	h2=$(sv "$WPID" heaps)
	echo "heaps after release: $h2"
	[ "$h2" -lt "$h1" ]
	[ "$(field bytes_released)" -gt 0 ]
	[ "$(field munmap)" -ge 1 ]
	[ "$(sv "$WPID" heaps_released)" -eq $((rel0 + h1 - h2)) ]
	# the process goes on allocating in what is left
	work "$WPID" "$WFD" alloc 64K 16
	work "$WPID" "$WFD" exit
}

@test "release_idle_heaps unmaps a heap whose blocks were all freed" {
	release_heaps_after "reserve 4096"
}

@test "release_idle_heaps unmaps a heap where small blocks were freed too" {
	# the list of held blocks grows by realloc while the second heap fills: its 16 KiB
	# step is a small block in that heap
	release_heaps_after
}

@test "flush_caches empties the cache of a thread blocked in read(2)" {
	start_work LIBALLOC_DECAY_MS=0
	# from an empty start, so what is cached next is the sleeper's
	mb "$WPID" flush_caches
	[ "$(sv "$WPID" cached_bytes)" -eq 0 ]
	work "$WPID" "$WFD" sleeper 64 4000
	local cached flushes
	cached=$(sv "$WPID" cached_bytes)
	flushes=$(sv "$WPID" cache_flushes)
	echo "cached with the sleeper idle: $cached"
	[ "$cached" -gt 0 ]
	mb "$WPID" flush_caches
	cat "$T/mb"
	[ "$(field status_text)" = ok ]
	[ -z "$(field reason)" ]
	[ "$(sv "$WPID" cached_bytes)" -eq 0 ]
	[ "$(sv "$WPID" cache_flushes)" -gt "$flushes" ]
	# the blocked thread is still there and the process is healthy
	[ "$(sv "$WPID" threads)" -ge 2 ]
	work "$WPID" "$WFD" churn 64 100
}

@test "set tcache_max_bytes 0 and mmap_max 0 change what the allocator does next" {
	start_work LIBALLOC_DECAY_MS=0
	work "$WPID" "$WFD" churn 64 500
	[ "$(sv "$WPID" cached_bytes)" -gt 0 ]
	mb "$WPID" set tcache_max_bytes 0
	[ "$(field status_text)" = ok ]
	mb "$WPID" flush_caches
	work "$WPID" "$WFD" churn 64 500
	[ "$(sv "$WPID" cached_bytes)" -eq 0 ]
	# no direct mapping allowed: a 1 MiB block comes from a heap
	local d0
	d0=$(sv "$WPID" direct_mappings)
	mb "$WPID" set mmap_max 0
	[ "$(field value)" = 0 ]
	work "$WPID" "$WFD" alloc 1M 2
	[ "$(sv "$WPID" direct_mappings)" -eq "$d0" ]
	mb "$WPID" set mmap_max 65536
	work "$WPID" "$WFD" alloc 1M 2
	[ "$(sv "$WPID" direct_mappings)" -eq $((d0 + 2)) ]
}

@test "a command to a stopped process times out and does not run when it continues" {
	start_work
	local c0
	c0=$(sv "$WPID" commands_executed)
	stop_process "$WPID"
	run "$SEGTOOL" cmd "$(seg "$WPID")" -t 300 set mmap_threshold 65536
	echo "$output"
	[ "$status" -eq 5 ]
	kill -CONT "$WPID"
	work "$WPID" "$WFD" churn 64 10
	# the mailbox works again, and the command that timed out never ran: it would have
	# run before this one
	mb "$WPID" set mmap_threshold 98304
	[ "$(field value)" = 98304 ]
	[ "$(sv "$WPID" commands_executed)" -eq $((c0 + 1)) ]
	[ "$(sv "$WPID" tunable.mmap_threshold)" = 98304 ]
}

@test "two clients racing for the mailbox are serialized" {
	start_work
	local c0
	c0=$(sv "$WPID" commands_executed)
	"$SEGTOOL" bench "$(seg "$WPID")" 300 >"$T/b1" 2>&1 &
	local b1=$!
	"$SEGTOOL" bench "$(seg "$WPID")" 300 >"$T/b2" 2>&1 &
	local b2=$!
	wait "$b1" || { cat "$T/b1"; return 1; }
	wait "$b2" || { cat "$T/b2"; return 1; }
	# each ran 2 x 300 set commands, every one answered for itself, none lost
	[ "$(sv "$WPID" commands_executed)" -eq $((c0 + 1200)) ]
}

@test "a child that ends with _exit removes its segment (liballoc interposes _exit)" {
	start_work
	fork_child
	[ -e "$(seg "$CPID")" ]
	work "$CPID" "$CFD" _exit
	wait_until ended "$CPID"
	[ ! -e "$(seg "$CPID")" ]
	# the parent is not affected
	[ "$(sv "$WPID" liveness)" = live ]
}

@test "a forked child that ends before its name looks nothing up at its exit: its pid is new" {
	# the parent (a bash, LIBALLOC_PUBLISH_DELAY 1s) is not named when it forks the
	# subshell: the subshell's pid had no earlier image here, so at its exit it leaves the
	# run directory alone (it looked for its earlier image's file, five system calls in each
	# of the fork loop's children, and removed what it found: here a stale file, no lock
	# held, under its pid, which the subshell makes itself to see the lookup)
	run env LIBALLOC_RUN_DIR="$SEGS" LIBALLOC_PUBLISH_DELAY=1s LD_PRELOAD="$LIBALLOC_SO" bash -c '
		(
			: > "$LIBALLOC_RUN_DIR/liballoc.$BASHPID.seg"
			echo "child $BASHPID"
		)
		for f in "$LIBALLOC_RUN_DIR"/*; do echo "left: ${f##*/}"; done'
	echo "$output"
	[ "$status" -eq 0 ]
	local child
	child=$(sed -n 's/^child //p' <<<"$output")
	[ -n "$child" ]
	[[ "$output" == *"left: liballoc.$child.seg"* ]]
}

@test "a start that finds no earlier image's file looks nothing up at its exit; one that finds it removes it" {
	# a bash (LIBALLOC_PUBLISH_DELAY 1s: never named; started by exec, so its pid may
	# have had an earlier image) whose pid had no file when it started makes a stale one
	# under its pid, as only an earlier image of it could have before its start: its exit
	# leaves it, having looked nothing up (it looked, four system calls in every process
	# that ended before its name). A bash that makes one and execs /bin/true: true finds
	# it at its start (its earlier image's) and removes it at its exit.
	run env LIBALLOC_RUN_DIR="$SEGS" LIBALLOC_PUBLISH_DELAY=1s LD_PRELOAD="$LIBALLOC_SO" bash -c '
		bash -c ": > \"\$LIBALLOC_RUN_DIR/liballoc.\$\$.seg\"; echo made \$\$"
		bash -c ": > \"\$LIBALLOC_RUN_DIR/liballoc.\$\$.seg\"; echo exec \$\$; exec /bin/true"
		for f in "$LIBALLOC_RUN_DIR"/*; do echo "left: ${f##*/}"; done'
	echo "$output"
	[ "$status" -eq 0 ]
	local made execd
	made=$(sed -n 's/^made //p' <<<"$output")
	execd=$(sed -n 's/^exec //p' <<<"$output")
	[ -n "$made" ] && [ -n "$execd" ]
	[[ "$output" == *"left: liballoc.$made.seg"* ]]
	[[ "$output" != *"liballoc.$execd.seg"* ]]
}

@test "a forked child named before its exec: the exec'd program that ends sooner removes its file" {
	# a subshell (a forked bash) lives past LIBALLOC_PUBLISH_DELAY, so its file is named,
	# then execs /bin/true, which ends within the delay (its own file is never named, so
	# it does not rename over the bash's): the bash's file, whose lock went with its image,
	# goes at true's exit, not at some later process's sweep (a loaded make test left two
	# such segments of bash behind after the build in programs.bats). (What is left is
	# listed by the shell itself: a program's start, ls's, may sweep stale files.)
	run env LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$LIBALLOC_SO" bash -c '
		(
			s="$LIBALLOC_RUN_DIR/liballoc.$BASHPID.seg"
			for i in {1..300}; do [ -e "$s" ] && break; sleep 0.02; done
			[ -e "$s" ] && echo "named $BASHPID"
			exec /bin/true
		)
		echo "parent $$"
		for f in "$LIBALLOC_RUN_DIR"/*; do echo "left: ${f##*/}"; done'
	echo "$output"
	[ "$status" -eq 0 ]
	local child parent
	child=$(sed -n 's/^named //p' <<<"$output")
	parent=$(sed -n 's/^parent //p' <<<"$output")
	[ -n "$child" ] && [ -n "$parent" ]
	[[ "$output" != *"liballoc.$child.seg"* ]]
}

@test "refresh and get answer; get reports the effective value" {
	start_work LIBALLOC_TOP_PAD=1M
	mb "$WPID" get top_pad
	[ "$(field status_text)" = ok ]
	[ "$(field value)" = 1048576 ]
	mb "$WPID" refresh
	[ "$(field status_text)" = ok ]
	"$SEGTOOL" info "$(seg "$WPID")" | grep -qx 'tunable.top_pad=1048576 source=environment'
}

@test "bad command records are refused with a reason" {
	start_work
	local c0
	c0=$(sv "$WPID" tunable.mmap_threshold)
	run "$SEGTOOL" cmd "$(seg "$WPID")" -i 99
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"status_text=unknown command"* ]]
	[[ "$output" == *"reason=unknown command"* ]]
	run "$SEGTOOL" cmd "$(seg "$WPID")" -i 0
	[ "$status" -eq 4 ]
	[[ "$output" == *"status_text=unknown command"* ]]
	run "$SEGTOOL" cmd "$(seg "$WPID")" set no_such_tunable 1
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"status_text=unknown tunable"* ]]
	[[ "$output" == *"reason=unknown tunable: no_such_tunable"* ]]
	run "$SEGTOOL" cmd "$(seg "$WPID")" get ""
	[ "$status" -eq 4 ]
	[[ "$output" == *"status_text=unknown tunable"* ]]
	run "$SEGTOOL" cmd "$(seg "$WPID")" set mmap_threshold 33554433
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"status_text=value out of range"* ]]
	[[ "$output" == *"reason="*"mmap_threshold"*"0..32M"* ]]
	run "$SEGTOOL" cmd "$(seg "$WPID")" set mmap_threshold -1
	[ "$status" -eq 4 ]
	[[ "$output" == *"status_text=value out of range"* ]]
	run "$SEGTOOL" cmd "$(seg "$WPID")" set mmap_dynamic 2
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"status_text=value out of range"* ]]
	[[ "$output" == *"reason="*"0 or 1"* ]]
	run "$SEGTOOL" cmd "$(seg "$WPID")" set arena_max 0
	[ "$status" -eq 4 ]
	[[ "$output" == *"reason="*"1..1024"* ]]
	# nothing refused changed anything
	[ "$(sv "$WPID" tunable.mmap_threshold)" = "$c0" ]
	[ "$(sv "$WPID" tunable.mmap_dynamic)" = 1 ]
	# every tunable in the table is live: a set of each one's current value is accepted
	local name value
	while IFS='=' read -r name value; do
		name=${name#tunable.}
		value=${value%% *}
		run "$SEGTOOL" cmd "$(seg "$WPID")" set "$name" "$value"
		[ "$status" -eq 0 ] || { echo "set $name $value: $output"; return 1; }
	done < <("$SEGTOOL" info "$(seg "$WPID")" | grep '^tunable\.')
}

@test "LIBALLOC_CONTROL=0: control is off, a command times out and never runs" {
	start_work LIBALLOC_CONTROL=0
	[ "$(sv "$WPID" control)" = off ]
	[ "$(sv "$WPID" liveness)" = live ]
	run "$SEGTOOL" cmd "$(seg "$WPID")" -t 300 set mmap_threshold 65536
	echo "$output"
	[ "$status" -eq 5 ]
	[[ "$output" == *"error=the process did not answer in time"* ]]
	[ "$(sv "$WPID" tunable.mmap_threshold)" = 131072 ]
	[ "$(sv "$WPID" commands_executed)" = 0 ]
	# the process itself runs on: statistics still move, a second command times out too
	local m0
	m0=$(sv "$WPID" direct_mappings)
	work "$WPID" "$WFD" alloc 1M 1
	[ "$(sv "$WPID" direct_mappings)" -eq $((m0 + 1)) ]
	run "$SEGTOOL" cmd "$(seg "$WPID")" -t 200 trim
	[ "$status" -eq 5 ]
	work "$WPID" "$WFD" exit
	wait_gone "$(seg "$WPID")"
}

@test "an invalid LIBALLOC_<NAME> value prints one line on stderr and is ignored" {
	refused_with_one_line LIBALLOC_MMAP_THRESHOLD '{}' banana 12Q -5 1G ""
	# the out-of-range one names the range
	run --separate-stderr env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_RUN_DIR="$SEGS" \
		LIBALLOC_MMAP_THRESHOLD=1G /bin/true
	[[ "$stderr" == *"0..32M"* ]]
	# the default stays in effect
	start_work LIBALLOC_MMAP_THRESHOLD=banana
	"$SEGTOOL" info "$(seg "$WPID")" | grep -qx 'tunable.mmap_threshold=131072 source=default'
	[ "$(grep -c LIBALLOC_MMAP_THRESHOLD "$T/err")" -eq 1 ]
}
