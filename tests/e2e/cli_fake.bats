#!/usr/bin/env bats
# allocctl against the stand-in daemon (tests/cli/fake/fake_ctld.c): every command's human
# output and --json shape, and the replies a real daemon gives only in rare situations
# (permission denied, protocol mismatch, an undecodable or missing reply), each with its
# exit status; top under a pseudo-terminal (tmux, and script(1)).
load ../cli/helpers

setup() { cli_tmp; }
teardown() {
	[ -S "${CLI_TMP:-/nonexistent}/tmux.sock" ] && tmux -S "$CLI_TMP/tmux.sock" kill-server 2>/dev/null
	cli_cleanup
}

@test "ps: one line per process sorted by pid, sizes in units" {
	start_fake
	run -0 --separate-stderr "$ALLOCCTL" ps
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[0]}" == *PID*UID*NAME*RSS*"IN USE"*CACHED*"FREE RES"*RECLAIM*"OTHER RSS"*THREADS*UPTIME*NOTES ]]
	[[ "${lines[1]}" == "    4242 "*" fake-service"*"1.1 GiB"*"300.0 MiB"*"1.0 MiB"*"812.0 MiB"*"812.0 MiB"*" 5 "*"1m0"* ]]
	[[ "${lines[2]}" == "    4343 "*" other-service"* ]]
}

@test "ps --bytes prints plain byte counts" {
	start_fake
	run -0 "$ALLOCCTL" --bytes ps
	[[ "${lines[1]}" == *" 314572800 "*" 851443712 "* ]]
	[[ "$output" != *MiB* ]]
}

@test "ps --json: the documented shape" {
	start_fake
	run -0 --separate-stderr "$ALLOCCTL" ps --json
	echo "$output" | json_check '
	  d["schema_version"] == 1 and list(d)[0] == "schema_version" and
	  [p["pid"] for p in d["processes"]] == [4242, 4343] and
	  all(set(p) == {"pid","ns_pid","pid_namespace","cgroup","exe","name","cmdline","uid","owner_uid","start_time_ns","uptime_s",
	                 "arenas","threads","allocator_threads","rss_bytes","memory",
	                 "foreign_allocators","version","control","unreadable","unreadable_reads",
	                 "profile"}
	      for p in d["processes"]) and
	  all(set(p["memory"]) == {"in_use_bytes","cached_bytes","fragmented_bytes",
	                           "free_resident_bytes","free_reserved_bytes","metadata_bytes",
	                           "reclaimable_bytes","resident_bytes","address_space_bytes",
	                           "rss_bytes","non_allocator_rss_bytes"}
	      for p in d["processes"]) and
	  d["processes"][0]["exe"] == "/usr/bin/fake-service" and
	  d["processes"][0]["memory"]["reclaimable_bytes"] == 812 * 2**20 and
	  isinstance(d["processes"][0]["uptime_s"], int) and d["processes"][0]["control"] == "running"'
}

@test "ps with no processes says so (and --json gives an empty list)" {
	start_fake --empty
	run -0 "$ALLOCCTL" ps
	[[ "$output" == "no processes:"* ]]
	run -0 "$ALLOCCTL" ps --json
	echo "$output" | json_check 'd == {"schema_version": 1, "processes": []}'
}

@test "stats PID: grouped report" {
	start_fake
	run -0 --separate-stderr "$ALLOCCTL" stats 4242
	[[ "${lines[0]}" == "process 4242 fake-service (/usr/bin/fake-service)" ]]
	for section in memory "system calls" "remote frees" arenas "size classes" tunables; do
		printf '%s\n' "${lines[@]}" | grep -qx "$section" || { echo "no $section"; false; }
	done
	printf '%s\n' "${lines[@]}" | grep -Eqx "  free resident +812.0 MiB"
	printf '%s\n' "${lines[@]}" | grep -Eqx "  reclaimable +812.0 MiB"
	printf '%s\n' "${lines[@]}" | grep -Eqx "  in use +300.0 MiB"
	[[ "$output" == *"mmap_threshold"*"128.0 KiB"*default*"0 B .. 32.0 MiB"*yes* ]]
	[[ "$output" == *"1 class without activity not shown"* ]]
}

@test "stats --json: process, totals keyed by counter, arenas, classes, tunables" {
	start_fake
	run -0 --separate-stderr "$ALLOCCTL" --json stats 4242
	# The counter names are exactly the segment ABI's list.
	names=$(sed -n '/^#define LA_COUNTERS(X)/,/^$/p' "$ROOT/liballoc/include/liballoc_shm.h" |
		grep -o 'X([a-z_]*' | cut -c3- | tr '\n' ' ')
	echo "$output" | json_check "
	  sorted(d) == sorted(['schema_version','process','totals','arenas','classes','tunables']) and d['schema_version'] == 1 and
	  sorted(d['totals']) == sorted('$names'.split()) and
	  d['process']['pid'] == 4242 and
	  all(set(a) == {'index','threads','counters'} for a in d['arenas']) and len(d['arenas']) == 2 and
	  all(set(c) == {'size','counters'} and set(c['counters']) == {'blocks_in_use','spans','refills','flushes'} for c in d['classes']) and
	  len(d['classes']) == 5 and
	  d['tunables']['mmap_threshold'] == {'value': 131072, 'source': 'default', 'type': 'size',
	                                      'min': 0, 'max': 33554432, 'live': True}"
}

@test "get: all tunables, or the ones named; --json keyed by name" {
	start_fake
	run -0 "$ALLOCCTL" get 4242
	[ "${#lines[@]}" -eq 16 ] # a header and the 15 tunables
	run -0 "$ALLOCCTL" get 4242 decay_ms mmap_dynamic
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[1]}" == "mmap_dynamic"*"on"*"default"*"0 or 1 (off/on)"* ]]
	[[ "${lines[2]}" == "decay_ms"*"10 s"*"default"*"0 ms .. 3600 s"* ]]
	run -0 "$ALLOCCTL" get 4242 decay_ms --json
	echo "$output" | json_check '
	  d["command"] == "get" and len(d["results"]) == 1 and
	  d["results"][0]["pid"] == 4242 and d["results"][0]["ok"] is True and
	  d["results"][0]["tunables"] == {"decay_ms": {"value": 10000, "source": "default",
	     "type": "ms", "min": 0, "max": 3600000, "live": True}}'
}

@test "set PID: prints new and old values; get then shows them as set" {
	start_fake
	run -0 --separate-stderr "$ALLOCCTL" set 4242 mmap_threshold=1M mmap_dynamic=off
	[ "$output" = "set 4242: mmap_threshold = 1.0 MiB (was 128.0 KiB), mmap_dynamic = off (was on) in 180.0 us" ]
	run -0 "$ALLOCCTL" get 4242 mmap_threshold
	[[ "${lines[1]}" == "mmap_threshold"*"1.0 MiB"*" command "* ]]
}

@test "set --exe and --all: one line per process, naming the executable" {
	start_fake
	run -0 "$ALLOCCTL" set --exe other-service decay_ms=2s
	[ "$output" = "set 4343 (other-service): decay_ms = 2 s in 180.0 us" ]
	run -0 "$ALLOCCTL" set --all tcache_max_bytes=256K
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[0]}" == "set 4242 (fake-service): tcache_max_bytes = 256.0 KiB"* ]]
	[[ "${lines[1]}" == "set 4343 (other-service): tcache_max_bytes = 256.0 KiB"* ]]
	run -0 "$ALLOCCTL" --json set --all decay_ms=1500ms
	echo "$output" | json_check '
	  d["command"] == "set" and [r["pid"] for r in d["results"]] == [4242, 4343] and
	  all(r["tunables"]["decay_ms"]["value"] == 1500 for r in d["results"])'
}

@test "set --exe with no such executable fails with exit 1" {
	start_fake
	run -1 --separate-stderr "$ALLOCCTL" set --exe nginx decay_ms=1s
	one_line "$stderr"
	[[ "$stderr" == *"no process named nginx that you may act on runs under liballoc"* ]]
}

@test "trim: released bytes, time and system calls; --pad keeps memory" {
	start_fake
	run -0 "$ALLOCCTL" trim 4343 --pad 12M
	[ "$output" = "trim 4343: released 800.0 MiB in 3.1 ms (1 madvise, 3 munmap)" ]
	run -0 "$ALLOCCTL" trim 4242
	[ "$output" = "trim 4242: released 812.0 MiB in 3.1 ms (1 madvise, 3 munmap)" ]
	run -0 "$ALLOCCTL" ps --json
	echo "$output" | json_check 'd["processes"][0]["memory"]["reclaimable_bytes"] == 0'
}

@test "trim/release/flush --json: one result per process with bytes, time, system calls" {
	start_fake
	for verb in trim release flush; do
		run -0 "$ALLOCCTL" --json "$verb" 4242
		echo "$output" | json_check "
		  d['command'] == '$verb' and len(d['results']) == 1 and
		  set(d['results'][0]) == {'pid','exe','ok','code','message','bytes_released',
		                           'duration_ns','syscalls','tunables'} and
		  set(d['results'][0]['syscalls']) == {'mmap','munmap','madvise','mprotect'} and
		  d['results'][0]['ok'] is True and d['results'][0]['code'] == 'OK'"
	done
}

@test "release and flush print what they did" {
	start_fake
	run -0 "$ALLOCCTL" release 4242
	[ "$output" = "release 4242: released 406.0 MiB in 1.2 ms (2 munmap)" ]
	run -0 "$ALLOCCTL" flush --all
	[ "${lines[0]}" = "flush 4242 (fake-service): released 0 B in 400.0 us (no system calls)" ]
}

@test "version: client and daemon, human and --json" {
	start_fake
	run -0 "$ALLOCCTL" version
	[ "${lines[1]}" = "allocctld fake-0 (protocol 2, segment ABI 6) at $ALLOCCTL_SOCKET" ]
	run -0 "$ALLOCCTL" version --json
	echo "$output" | json_check 'd["daemon"]["version"] == "fake-0" and d["daemon"]["socket"] and d["client"]["segment_abi_version"] == 6'
}

@test "no such process: exit 1, one line pointing at allocctl ps" {
	start_fake
	for cmd in "stats 999" "get 999" "set 999 decay_ms=1s" "trim 999" "release 999" "flush 999"; do
		run -1 --separate-stderr "$ALLOCCTL" $cmd
		[ -z "$output" ]
		one_line "$stderr"
		[[ "$stderr" == "allocctl: no such process: 999 is not running under liballoc (see \`allocctl ps\`"* ]] || { echo "$cmd: $stderr"; false; }
	done
}

@test "permission denied: exit 1, one line naming the process and the rule" {
	start_fake
	for cmd in "stats 1" "get 1" "set 1 decay_ms=1s" "trim 1" "release 1" "flush 1"; do
		run -1 --separate-stderr "$ALLOCCTL" $cmd
		one_line "$stderr"
		[[ "$stderr" == "allocctl: permission denied: process 1 belongs to another user; uid $(id -u) may act only on its own processes (root on all)" ]] || { echo "$cmd: $stderr"; false; }
	done
}

@test "a daemon of another protocol version: exit 1, says which" {
	start_fake --mismatch
	run -1 --separate-stderr "$ALLOCCTL" ps
	one_line "$stderr"
	[[ "$stderr" == *"protocol version mismatch: allocctl speaks protocol 2, daemon says: daemon speaks protocol 3"* ]]
}

@test "an undecodable reply: exit 1" {
	start_fake --garbage
	run -1 --separate-stderr "$ALLOCCTL" ps
	[[ "$stderr" == *"sent a reply that does not decode"* ]]
}

@test "a daemon that never answers: exit 1 after --timeout" {
	start_fake --hang
	# it gave up (rather than waiting for ever) after the --timeout it was given
	run -1 --separate-stderr "$ALLOCCTL" --timeout 300ms stats 4242
	[[ "$stderr" == *"did not answer within 300 ms"* ]]
}

@test "top without a terminal: --iterations prints plain frames sorted by reclaimable" {
	start_fake
	"$ALLOCCTL" trim 4343 --pad 100M >/dev/null
	run -0 "$ALLOCCTL" top --iterations 2 --interval 100ms
	[ "$(grep -c '^allocctl top' <<<"$output")" -eq 2 ]
	[[ "$output" != *$'\e'* ]]
	first=$(grep -m1 -A3 '^allocctl top' <<<"$output")
	[[ "$first" == *"2 processes"*"sorted by reclaimable"* ]]
	# 4242 retains 812 MiB, 4343 only the 100 MiB pad: 4242 comes first.
	[ "$(grep -E '^ +(4242|4343) ' <<<"$output" | head -1 | awk '{print $1}')" = 4242 ]
}

@test "top under tmux: live view, sort key, q quits and restores the terminal" {
	start_fake
	T=(tmux -S "$CLI_TMP/tmux.sock")
	"${T[@]}" new-session -d -x 120 -y 20 \
		"ALLOCCTL_SOCKET=$ALLOCCTL_SOCKET $ALLOCCTL top --interval 200ms; echo \$? > $CLI_TMP/rc; sleep 600"
	wait_for bash -c "${T[*]} capture-pane -p | grep -q 'sorted by reclaimable'"
	"${T[@]}" capture-pane -p > "$CLI_TMP/screen"
	grep -q '^allocctl top .* 2 processes' "$CLI_TMP/screen"
	grep -Eq '^ +4242 +[0-9]+  fake-service' "$CLI_TMP/screen"
	"${T[@]}" send-keys u
	wait_for bash -c "${T[*]} capture-pane -p | grep -q 'sorted by in use'"
	"${T[@]}" send-keys q
	wait_for test -s "$CLI_TMP/rc"
	[ "$(cat "$CLI_TMP/rc")" = 0 ]
	# Back on the normal screen: the view is gone.
	! "${T[@]}" capture-pane -p | grep -q 'sorted by'
}

@test "top under script(1): alternate screen entered and left, exit 0 on q" {
	start_fake
	# script feeds its stdin to the pseudo-terminal: q once a frame is on the screen
	(wait_for grep -q 'sorted by reclaimable' "$CLI_TMP/out"; printf q) |
		script -qfec "$ALLOCCTL top --interval 200ms" /dev/null > "$CLI_TMP/out"
	grep -q $'\e\\[?1049h' "$CLI_TMP/out"
	grep -q $'\e\\[?1049l' "$CLI_TMP/out"
	grep -q 'sorted by reclaimable' "$CLI_TMP/out"
}

@test "top reports a daemon that goes away and keeps running" {
	start_fake
	T=(tmux -S "$CLI_TMP/tmux.sock")
	"${T[@]}" new-session -d -x 140 -y 20 "ALLOCCTL_SOCKET=$ALLOCCTL_SOCKET $ALLOCCTL top --interval 200ms; sleep 600"
	wait_for bash -c "${T[*]} capture-pane -p | grep -q 'sorted by reclaimable'"
	kill "${CLI_PIDS[0]}"
	wait_for bash -c "${T[*]} capture-pane -p | grep -q '(retrying) no daemon at'"
	"${T[@]}" send-keys q
}

# complete WORDS...: COMPREPLY of the bash completion for the line "WORDS" (the last word
# being completed), one per line.
complete_line() {
	PATH="$BUILD:$PATH" bash -c '
		source "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_allocctl
		printf "%s\n" "${COMPREPLY[@]}"' _ "$ROOT/cli/allocctl.bash-completion" "$@"
}

@test "bash completion: commands, PIDs and executables from the daemon, tunable names" {
	start_fake
	[ "$(complete_line allocctl st)" = stats ]
	[ "$(complete_line allocctl trim "" | sort | tr '\n' ' ')" = "4242 4343 " ]
	[ "$(complete_line allocctl set --exe oth)" = other-service ]
	[ "$(complete_line allocctl set 4242 mmap_t | tr '\n' ' ')" = "mmap_threshold= mmap_threshold_max= " ]
	[ "$(complete_line allocctl get 4242 deca)" = decay_ms ]
	[ "$(complete_line allocctl trim 4242 --p)" = --pad ]
}

@test "bash completion asks allocctl for the tunable names only where it offers them" {
	# an allocctl in front of the real one notes each call: a TAB ran it for the names
	# every time (and readme.bats' completion check, ~150 lines, twice as many programs)
	start_fake
	local stub="$CLI_TMP/stub"
	mkdir "$stub"
	printf '#!/bin/sh\necho "$*" >>"%s/calls"\nexec "%s" "$@"\n' "$stub" "$ALLOCCTL" >"$stub/allocctl"
	chmod +x "$stub/allocctl"
	[ "$(BUILD=$stub complete_line allocctl st)" = stats ]
	[ "$(BUILD=$stub complete_line allocctl trim 4242 --p)" = --pad ]
	[ "$(BUILD=$stub complete_line allocctl trim "" | sort | tr '\n' ' ')" = "4242 4343 " ]
	cat "$stub/calls"
	[ "$(grep -c ' ps --json$' "$stub/calls")" -eq 1 ]
	[ "$(grep -c '^help tunables$' "$stub/calls")" -eq 0 ]
	[ "$(BUILD=$stub complete_line allocctl get 4242 deca)" = decay_ms ]
	[ "$(BUILD=$stub complete_line allocctl set 4242 mmap_t | tr '\n' ' ')" = "mmap_threshold= mmap_threshold_max= " ]
	[ "$(grep -c '^help tunables$' "$stub/calls")" -eq 2 ]
}

@test "top: ^Z gives the terminal back to the shell, fg resumes the live view" {
	start_fake
	T=(tmux -S "$CLI_TMP/tmux.sock")
	"${T[@]}" new-session -d -x 120 -y 20 "bash --norc --noprofile"
	"${T[@]}" send-keys "ALLOCCTL_SOCKET=$ALLOCCTL_SOCKET $ALLOCCTL top --interval 200ms" Enter
	wait_for bash -c "${T[*]} capture-pane -p | grep -q 'sorted by reclaimable'"
	"${T[@]}" send-keys C-z
	wait_for bash -c "${T[*]} capture-pane -p | grep -q 'Stopped'"
	! "${T[@]}" capture-pane -p | grep -q 'sorted by reclaimable'
	"${T[@]}" send-keys fg Enter
	wait_for bash -c "${T[*]} capture-pane -p | grep -q 'sorted by reclaimable'"
	# Keys work again without Enter: the terminal is back in non-canonical mode.
	"${T[@]}" send-keys o
	wait_for bash -c "${T[*]} capture-pane -p | grep -q 'sorted by other RSS'"
	"${T[@]}" send-keys q
	# top flushes typeahead when it gives the terminal back (keys meant for it must not
	# reach the shell), so type the next line once the shell is the pane's foreground.
	wait_for bash -c "[ \"\$(${T[*]} display-message -p '#{pane_current_command}')\" = bash ]"
	"${T[@]}" send-keys 'echo "rc=$?"' Enter
	wait_for bash -c "${T[*]} capture-pane -p | grep -q '^rc=0'"
}

@test "history PID: its profile, min, max, last and a sparkline per figure (a gap shows), then the events with who did them" {
	start_fake
	run -0 --separate-stderr "$ALLOCCTL" history 4242
	[ -z "$stderr" ]
	[[ "${lines[0]}" == "4242 (fake-service), profile web: 10 samples every 1 s, "*" (10s)" ]]
	[[ "${lines[1]}" == *FIGURE*MIN*MAX*LAST*TREND* ]]
	# in use climbs 100 -> 190 MiB with the sixth sample missing
	[[ "${lines[2]}" == "  in use               100.0 MiB   190.0 MiB   190.0 MiB  ▁▁▂▃▄ ▅▆▇█" ]]
	[[ "${lines[8]}" == "  RSS                  150.0 MiB   240.0 MiB   240.0 MiB  ▁▁▂▃▄ ▅▆▇█" ]]
	for f in cached fragmented "free resident" metadata reclaimable "non-allocator RSS"; do
		printf '%s\n' "${lines[@]}" | grep -q "^  $f " || { echo "no $f"; false; }
	done
	[[ "$output" == *"events"*"4242  set      profile web          decay_ms 10s -> 2s"*"4242  trim     uid 0 (pid 99)       released 12.0 MiB (3 madvise, 0 munmap)"*"4242  release  policy oom-guard (pressure) released 1.0 MiB"* ]]
}

@test "history --json: series in bytes with null for a gap, and the events" {
	start_fake
	run -0 --separate-stderr "$ALLOCCTL" --json history 4242
	echo "$output" | json_check '
	  len(d["processes"]) == 1 and d["sample_ms"] == 1000 and
	  set(d["processes"][0]) == {"pid","exe","profile","uid","started_ms","exited_ms",
	                             "exit_reason","resolution_ms","first_ms","truncated","series"} and
	  d["processes"][0]["profile"] == "web" and
	  list(d["processes"][0]["series"]) == ["in_use","cached","fragmented","free_resident",
	                                        "metadata","reclaimable","rss","non_alloc"] and
	  d["processes"][0]["series"]["in_use"][0] == 100 * 2**20 and
	  d["processes"][0]["series"]["in_use"][5] is None and
	  d["processes"][0]["series"]["rss"][9] == 240 * 2**20 and
	  d["processes"][0]["resolution_ms"] == 1000 and d["processes"][0]["exited_ms"] is None and
	  [e["kind"] for e in d["events"]] == ["set", "trim", "release"] and
	  d["events"][1]["bytes"] == 12 * 2**20 and d["events"][1]["who"] == "uid 0 (pid 99)" and
	  [e["trigger"] for e in d["events"]] == ["profile", "operator", "pressure"]'
}

@test "history: another user's process, an unknown one, bad options" {
	start_fake
	run -1 --separate-stderr "$ALLOCCTL" history 1
	[[ "$stderr" == "allocctl: permission denied: process 1 belongs to another user"* ]]
	run -1 --separate-stderr "$ALLOCCTL" history 77
	[[ "$stderr" == "allocctl: no such process: 77"* ]]
	run -2 --separate-stderr "$ALLOCCTL" history 4242 --since 1ms
	[[ "$stderr" == *"invalid --since '1ms': expected a duration from 1s to 7 days"* ]]
	run -2 --separate-stderr "$ALLOCCTL" history 4242 --res daily
	[[ "$stderr" == *"invalid --res 'daily': expected fine, coarse or auto"* ]]
	run -2 --separate-stderr "$ALLOCCTL" history 4242 --points 0
	[[ "$stderr" == *"invalid --points '0'"* ]]
	run -2 --separate-stderr "$ALLOCCTL" history
	[[ "$stderr" == *"missing PID"* ]]
}

@test "top: each row ends with its RSS trend over the last minute" {
	start_fake
	run -0 "$ALLOCCTL" top --iterations 1
	[[ "${lines[2]}" == *" UPTIME  RSS, LAST MINUTE "*" NOTES" ]]
	[[ "${lines[3]}" == "    4242 "*" fake-service "*"▁▁▂▃▄ ▅▆▇█ +90.0 MiB" ]]
	[[ "${lines[4]}" == "    4343 "*" other-service "*"▁▁▁▁▁▁▁▁▁▁ +0 B" ]]
}
