#!/usr/bin/env bats
# permissions.bats — the second-uid matrix (uid nobody against root), beyond what
# tests/e2e/ctld_perm.bats (socket access, uid-scoped list/stats/get/set/trim through a
# shared daemon) and tests/e2e/ctld_hostile.bats (broken segments planted by root) cover:
#  - nobody cannot read root's segments or list root's run directory;
#  - nobody's own daemon, pointed at root's run directory, sees and controls nothing;
#  - nobody cannot reach a root daemon's default socket by guessing or by symlink;
#  - nothing nobody plants in a directory a root daemon watches is trusted: a symlink or a
#    hard link to root's segment, a copy claiming root's process, a wrong mode, an
#    oversized or undersized file; root's process is never acted on through them.
# san: skip

setup() {
	source "$BATS_TEST_DIRNAME/common.bash"
	rel_setup --other-uid
	mkdir -m 700 "$T/nob" && chown nobody "$T/nob"
}

teardown() {
	rel_teardown
}

@test "nobody cannot read root's segment or list root's run directory" {
	preload sleep 600
	local seg="$T/segs/liballoc.$SPID.seg"
	[ "$(stat -c %a "$seg")" = 600 ]
	[ "$(stat -c %a "$T/segs")" = 700 ]
	run as_nobody cat "$seg"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	run as_nobody ls "$T/segs"
	[ "$status" -ne 0 ]
	# even with the directory traversable, the file itself stays closed
	chmod 711 "$T/segs"
	run as_nobody head -c 8 "$seg"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	run as_nobody dd if=/dev/zero of="$seg" bs=1 count=8 conv=notrunc
	[ "$status" -ne 0 ]
	kill -0 "$SPID"
}

@test "nobody's own daemon watching root's run directory sees and controls nothing" {
	preload LIBALLOC_TOP_PAD=64K sleep 600
	chmod 711 "$T/segs" # traversable: the daemon gets as far as opening the files
	mkdir -m 700 "$T/nobsock" && chown nobody "$T/nobsock"
	"$AS_USER" nobody "$CTLD" --socket "$T/nobsock/ctl.sock" --listen off --run-dir "$T/segs" \
		--run-dir "$T/nob" --no-default-dirs --rescan-ms 100 \
		--ready-file "$T/nobsock/ready" >"$T/nob.log" 2>&1 3>&- &
	local nd=$!
	bg_record "$nd"
	wait_file "$T/nobsock/ready"
	# its first scan has met root's directory
	wait_until grep -q "$T/segs: Permission denied" "$T/nob.log"
	local c=(as_nobody "$CTLCLIENT" --socket "$T/nobsock/ctl.sock")
	run "${c[@]}" list
	[ "$status" -eq 0 ]
	[[ "$output" != *"pid=$SPID"* ]]
	run "${c[@]}" set "$SPID" top_pad=1M
	[[ "$output" == *"ERR_NO_PROCESS"* ]]
	run "${c[@]}" trim all
	[[ "$output" != *"result pid=$SPID"* ]]
	run "${c[@]}" stats "$SPID"
	[[ "$output" != *"code=OK"* ]]
	# it could not even list the directory, and root's process still has its own value
	grep -q "$T/segs: Permission denied" "$T/nob.log"
	start_daemon
	wait_listed "$SPID"
	run ctl get "$SPID" top_pad
	[[ "$output" == *"value pid=$SPID name=top_pad value=65536"* ]]
}

@test "nobody cannot reach root's daemon socket, directly or through a symlink" {
	start_daemon
	run as_nobody "$CTLCLIENT" --socket "$SOCK" list
	[ "$status" -ne 0 ]
	[[ "$output" == *"cannot connect to $SOCK: Permission denied"* ]]
	ln -s "$SOCK" "$T/nob/ctl.sock"
	run as_nobody "$CTLCLIENT" --socket "$T/nob/ctl.sock" list
	[ "$status" -ne 0 ]
	[[ "$output" == *"cannot connect to $T/nob/ctl.sock: Permission denied"* ]]
	run as_nobody env ALLOCCTL_SOCKET="$SOCK" "$ALLOCCTL" ps
	[ "$status" -eq 1 ]
	[[ "$output" == *"permission denied opening the daemon socket $SOCK"* ]]
}

# planted NAME REASON: a root daemon watching nobody's directory skips $T/nob/NAME with
# REASON (logged), does not list it, and keeps serving root's own process
planted_refused() {
	local name=$1 reason=$2
	wait_until grep -q "skipping segment $T/nob/$name" "$T/log"
	wait_rescans 3 # later scans neither log it again nor list it
	run ctl list
	[[ "$output" == *"process pid=$SPID "* ]]
	local n
	n=$(grep -c "process pid=$SPID " <<<"$output")
	[ "$n" -eq 1 ]
	grep "skipping segment $T/nob/$name" "$T/log" >"$T/lines" || true
	cat "$T/lines" "$T/log" >&2
	[ "$(wc -l <"$T/lines")" -eq 1 ]
	grep -q -- "$reason" "$T/lines"
	kill -0 "$DPID"
}

start_root_and_daemon() {
	preload LIBALLOC_TOP_PAD=64K sleep 600
	start_daemon --rescan-ms 100 --run-dir "$T/nob"
	wait_listed "$SPID"
}

@test "planted by nobody: a symlink to root's segment is not trusted" {
	start_root_and_daemon
	as_nobody ln -s "$T/segs/liballoc.$SPID.seg" "$T/nob/liballoc.$SPID.seg"
	planted_refused "liballoc.$SPID.seg" "is a symbolic link"
}

@test "planted by nobody: a hard link to root's segment is impossible or not trusted" {
	start_root_and_daemon
	chmod 711 "$T/segs"
	if as_nobody ln "$T/segs/liballoc.$SPID.seg" "$T/nob/liballoc.$SPID.seg" 2>/dev/null; then
		planted_refused "liballoc.$SPID.seg" "wrong owner"
	else
		[ ! -e "$T/nob/liballoc.$SPID.seg" ] # fs.protected_hardlinks refused it
	fi
}

@test "planted by nobody: a copy of root's segment claiming root's process is not trusted" {
	start_root_and_daemon
	# made aside and renamed into place, as an attacker would (atomic, owner nobody)
	cp "$T/segs/liballoc.$SPID.seg" "$T/copy.seg"
	chown nobody "$T/copy.seg"
	chmod 600 "$T/copy.seg"
	mv "$T/copy.seg" "$T/nob/liballoc.$SPID.seg"
	planted_refused "liballoc.$SPID.seg" "wrong owner"
	# and a set through the daemon reaches root's real process only
	run ctl set "$SPID" top_pad=128K
	[ "$(grep -c "result pid=$SPID " <<<"$output")" -eq 1 ]
}

# plant MODE: a fakeseg of MODE run as nobody in $T/nob; sets FPID
plant() {
	"$AS_USER" nobody "$FAKESEG" --dir "$T/nob" --mode "$1" --ready "$T/nob/ready.$1" >/dev/null 2>&1 3>&- &
	FPID=$!
	bg_record "$FPID"
	wait_file "$T/nob/ready.$1"
}

@test "planted by nobody: a segment readable by others (0644) is not trusted" {
	start_root_and_daemon
	plant wrong-mode
	planted_refused "liballoc.$FPID.seg" "mode is not 0600"
}

@test "planted by nobody: an oversized segment is not trusted" {
	start_root_and_daemon
	plant oversized
	planted_refused "liballoc.$FPID.seg" "size invalid or changed"
}

@test "planted by nobody: an undersized (truncated) segment is not trusted" {
	start_root_and_daemon
	plant truncated
	planted_refused "liballoc.$FPID.seg" "size invalid or changed"
}

@test "planted by nobody: a file owned by root in nobody's directory is not trusted" {
	start_root_and_daemon
	plant valid
	wait_listed "$FPID"
	# root's file where nobody's should be (e.g. planted through a privileged helper)
	cp "$T/nob/liballoc.$FPID.seg" "$T/nob/liballoc.$FPID.tmp2"
	chown root "$T/nob/liballoc.$FPID.tmp2"
	mv -f "$T/nob/liballoc.$FPID.tmp2" "$T/nob/liballoc.$FPID.seg"
	wait_until grep -q "skipping segment $T/nob/liballoc.$FPID.seg: wrong owner" "$T/log"
	run ctl list
	[[ "$output" != *"process pid=$FPID "* ]]
}
