#!/usr/bin/env bats
# allocctl without a daemon: usage errors (exit 2) with one line naming what is valid,
# --help on every command (exit 0), and the "no daemon" failure (exit 1) that says how to
# start one. Runs in every build, sanitizers included: nothing is preloaded.
load ../cli/helpers

setup() {
	cli_tmp
	export ALLOCCTL_SOCKET="$CLI_TMP/absent.sock"
}
teardown() { cli_cleanup; }

@test "no arguments prints the usage on stderr and exits 2" {
	run -2 --separate-stderr "$ALLOCCTL"
	[ -z "$output" ]
	[[ "$stderr" == *"usage: allocctl"* ]]
	[[ "$stderr" == *"Commands:"* ]]
}

@test "--help lists every command and exits 0" {
	run -0 "$ALLOCCTL" --help
	for c in ps stats get set trim release flush history top version; do
		[[ "$output" == *"  $c "* ]] || { echo "missing $c"; false; }
	done
	[[ "$output" == *"ALLOCCTL_SOCKET"* ]]
}

@test "--help gives each command's whole usage, however long" {
	run -0 "$ALLOCCTL" --help
	local c usage
	for c in $(sed -n '/^Commands:/,/^$/p' <<<"$output" | awk 'NR > 1 && NF { print $1 }'); do
		usage=$("$ALLOCCTL" "$c" --help | head -n 1)
		usage=${usage#usage: allocctl \[GLOBAL OPTIONS\] }
		[[ "$output" == *"  $usage "* ]] || { echo "--help cuts the usage of $c: $usage"; false; }
	done
}

@test "every command has --help, help COMMAND too, exit 0" {
	for c in ps stats get set trim release flush history top version help; do
		run -0 --separate-stderr "$ALLOCCTL" "$c" --help
		[[ "$output" == "usage: allocctl [GLOBAL OPTIONS] $c"* ]] || { echo "$c: $output"; false; }
		[ -z "$stderr" ]
		run -0 "$ALLOCCTL" help "$c"
		[[ "$output" == "usage: allocctl [GLOBAL OPTIONS] $c"* ]]
	done
}

@test "an unknown command exits 2 and lists the commands" {
	run -2 --separate-stderr "$ALLOCCTL" frobnicate
	one_line "$stderr"
	[[ "$stderr" == *"unknown command 'frobnicate'; commands: ps, stats, get, set, trim"* ]]
}

@test "an unknown option exits 2 and names the valid ones" {
	run -2 --separate-stderr "$ALLOCCTL" trim 42 --frob
	one_line "$stderr"
	[[ "$stderr" == *"unknown option '--frob'; valid here: --exe VALUE, --all, --pad VALUE"* ]]
	run -2 --separate-stderr "$ALLOCCTL" ps --pad 1
	[[ "$stderr" == *"this command takes no options (usage: allocctl ps)" ]]
}

@test "a malformed PID exits 2 and says what a PID is" {
	for bad in abc 0 -5 99999999999 12x; do
		run -2 --separate-stderr "$ALLOCCTL" stats -- "$bad"
		one_line "$stderr"
		[[ "$stderr" == *"invalid PID '$bad': expected a process id from 1 to 2147483647"* ]]
	done
}

@test "missing arguments exit 2" {
	run -2 --separate-stderr "$ALLOCCTL" stats
	[[ "$stderr" == *"stats: missing PID (usage: allocctl stats PID)"* ]]
	run -2 --separate-stderr "$ALLOCCTL" get
	[[ "$stderr" == *"missing PID"* ]]
	run -2 --separate-stderr "$ALLOCCTL" set 42
	[[ "$stderr" == *"missing NAME=VALUE"* ]]
	run -2 --separate-stderr "$ALLOCCTL" trim
	[[ "$stderr" == *"missing target: give a PID, --exe NAME or --all"* ]]
	run -2 --separate-stderr "$ALLOCCTL" release --exe
	[[ "$stderr" == *"option --exe needs a value"* ]]
	run -2 --separate-stderr "$ALLOCCTL" flush 42 --all
	[[ "$stderr" == *"give one target"* ]]
}

@test "every other usage error exits 2 with one line, before any daemon is asked" {
	# exit 2, not 1: the socket (absent) was never tried, nothing was sent
	local args want
	while IFS='|' read -r args want; do
		eval "run -2 --separate-stderr \"\$ALLOCCTL\" $args"
		echo "allocctl $args: $stderr"
		one_line "$stderr"
		[ -z "$output" ]
		[[ "$stderr" == "allocctl: $want"* ]]
	done <<-'EOF'
		--socket|--socket needs a path (see allocctl --help)
		--socket= ps|--socket needs a non-empty path (see allocctl --help)
		ps --timeout|--timeout needs a duration, e.g. 5s (see allocctl --help)
		--timeout 0 ps|invalid --timeout '0': expected a duration from 1ms to 1h, e.g. 500ms, 5s
		--timeout=2h ps|invalid --timeout '2h': expected a duration from 1ms to 1h
		--timeout soon ps|invalid --timeout 'soon': expected a duration
		--frob ps|unknown option '--frob' before the command (see allocctl --help)
		trim 42 --all=yes|trim: option --all takes no value (usage: allocctl trim
		trim --exe ''|trim: --exe needs an executable name, e.g. --exe nginx (usage:
		trim 42 43|trim: unexpected argument '43' (usage:
		ps extra|ps: unexpected argument 'extra' (usage: allocctl ps)
		stats 42 43|stats: too many arguments (usage: allocctl stats PID)
		history 42 43|history: too many arguments (usage:
		top --iterations 0|top: invalid --iterations '0': expected a count >= 1
		top --iterations many|top: invalid --iterations 'many': expected a count >= 1
		log --since -1|log: invalid --since '-1': expected a sequence number >= 0
		log --since 5m|log: invalid --since '5m': expected a sequence number >= 0
		log --last 0|log: invalid --last '0': expected a count >= 1
		log extra|log: unexpected argument 'extra'
		help nope|help: unknown command 'nope' (commands, or tunables)
		help ps extra|help: unknown command 'ps' (commands, or tunables)
	EOF
}

@test "set: an unknown tunable exits 2 with the list of tunables" {
	run -2 --separate-stderr "$ALLOCCTL" set 42 mmap_treshold=1M
	one_line "$stderr"
	[[ "$stderr" == *"unknown tunable 'mmap_treshold'; valid tunables: mmap_threshold, mmap_threshold_max,"*decay_ms* ]]
	run -2 --separate-stderr "$ALLOCCTL" get 42 nope
	[[ "$stderr" == *"unknown tunable 'nope'; valid tunables: mmap_threshold"* ]]
}

@test "set: a value out of range exits 2 and names the range" {
	run -2 --separate-stderr "$ALLOCCTL" set 42 mmap_threshold=64G
	one_line "$stderr"
	[[ "$stderr" == *"value '64G' out of range for mmap_threshold: valid range is 0 B .. 32.0 MiB"* ]]
	run -2 --separate-stderr "$ALLOCCTL" set --all arena_max=0
	[[ "$stderr" == *"valid range is 1 .. 1024"* ]]
}

@test "set: a value of the wrong kind exits 2 and names the syntax" {
	run -2 --separate-stderr "$ALLOCCTL" set 42 mmap_dynamic=maybe
	[[ "$stderr" == *"invalid value 'maybe' for mmap_dynamic: expected a boolean: 1/0, on/off"* ]]
	run -2 --separate-stderr "$ALLOCCTL" set 42 mmap_threshold=lots
	[[ "$stderr" == *"expected a size in bytes, e.g. 4096, 64K"* ]]
	run -2 --separate-stderr "$ALLOCCTL" set 42 mmap_threshold
	[[ "$stderr" == *"expected NAME=VALUE, got 'mmap_threshold'"* ]]
	run -2 --separate-stderr "$ALLOCCTL" set 42 decay_ms=1s decay_ms=2s
	[[ "$stderr" == *"decay_ms is assigned twice"* ]]
}

@test "trim --pad takes human units and refuses others" {
	run -2 --separate-stderr "$ALLOCCTL" trim 42 --pad 12Q
	[[ "$stderr" == *"invalid --pad '12Q': expected a size in bytes"* ]]
	# A valid pad gets as far as the (absent) daemon: exit 1, not 2.
	run -1 "$ALLOCCTL" trim 42 --pad=1.5M
}

@test "top refuses --json and, without a terminal, asks for --iterations" {
	run -2 --separate-stderr "$ALLOCCTL" top --json
	[[ "$stderr" == *"--json is not available for top; use allocctl ps --json"* ]]
	run -2 --separate-stderr "$ALLOCCTL" top </dev/null
	[[ "$stderr" == *"top needs a terminal"* ]]
	run -2 --separate-stderr "$ALLOCCTL" top --interval 1ms --iterations 1
	[[ "$stderr" == *"invalid --interval '1ms'"* ]]
}

@test "no daemon: exit 1, one line naming the socket and how to start a daemon" {
	for cmd in "ps" "stats 42" "get 42" "set 42 decay_ms=1s" "trim 42" "release 42" "flush 42" "top --iterations 1"; do
		run -1 --separate-stderr "$ALLOCCTL" $cmd
		one_line "$stderr"
		[[ "$stderr" == "allocctl: no daemon at $CLI_TMP/absent.sock ("*"start one with \`allocctld --socket $CLI_TMP/absent.sock\`"* ]] || { echo "$cmd: $stderr"; false; }
	done
}

@test "--socket beats ALLOCCTL_SOCKET, and the default path is used without either" {
	run -1 --separate-stderr "$ALLOCCTL" --socket "$CLI_TMP/other.sock" ps
	[[ "$stderr" == *"no daemon at $CLI_TMP/other.sock"* ]]
	run -1 --separate-stderr "$ALLOCCTL" ps --socket="$CLI_TMP/third.sock"
	[[ "$stderr" == *"no daemon at $CLI_TMP/third.sock"* ]]
	run -1 --separate-stderr env -u ALLOCCTL_SOCKET "$ALLOCCTL" ps
	[[ "$stderr" == *"no daemon at /run/allocctld/ctl.sock"* || "$stderr" == *"/run/allocctld/ctl.sock"* ]]
}

@test "a socket that is not a daemon's: refused connection is reported as no daemon" {
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$CLI_TMP/dead.sock"
	run -1 --separate-stderr "$ALLOCCTL" --socket "$CLI_TMP/dead.sock" ps
	[[ "$stderr" == *"no daemon at $CLI_TMP/dead.sock (Connection refused)"* ]]
}

@test "version prints the client's version even without a daemon, then fails" {
	run -1 --separate-stderr "$ALLOCCTL" version
	[[ "$output" == "allocctl "*" (protocol 2, segment ABI 6)" ]]
	[[ "$stderr" == *"no daemon at"* ]]
	run -1 --separate-stderr "$ALLOCCTL" --json version
	echo "$output" | json_check '"daemon" not in d and d["client"]["protocol_version"] == 2'
}

@test "help tunables lists every tunable of the segment ABI with type and range" {
	run -0 "$ALLOCCTL" help tunables
	names=$(sed -n '/^#define LA_TUNABLES(X)/,/^$/p' "$ROOT/liballoc/include/liballoc_shm.h" | grep -o 'X([a-z_]*' | cut -c3-)
	[ "$(awk 'NR > 1 {print $1}' <<<"$output")" = "$names" ]
	grep -Eq '^mmap_threshold +size +128.0 KiB +0 B \.\. 32.0 MiB +yes ' <<<"$output"
	grep -Eq '^arena_max +int +auto +1 \.\. 1024 ' <<<"$output"
	# the thread cache's bound in blocks is its row's slots but one (tcache.h TC_MAX_BLOCKS)
	slots=$(sed -n 's/^#define TC_SLOTS *\([0-9]*\)u.*/\1/p' "$ROOT/liballoc/src/tcache.h")
	[ -n "$slots" ]
	grep -Eq "^tcache_max_bytes .*\(at most $((slots - 1)) blocks;" <<<"$output"
}

@test "get --help names every source a tunable's value can come from" {
	run -0 "$ALLOCCTL" get --help
	sources=$(sed -n '/^#define LA_SOURCES(X)/,/^$/p' "$ROOT/liballoc/include/liballoc_shm.h" |
		grep -o 'X([a-z]*, [0-9]*, "[a-z]*")' | sed 's/.*"\([a-z]*\)")/\1/')
	[ "$(wc -w <<<"$sources")" -ge 7 ]
	text=$(tr '\n' ' ' <<<"$output")
	for s in $sources; do
		[[ "$text" == *"$s"[,\)]* ]] || { echo "get --help does not name the source $s"; false; }
	done
}

@test "the man page renders without warnings and documents every command" {
	command -v man >/dev/null || { echo "man is not installed (scripts/deps.sh test installs man-db)"; false; }
	run -0 --separate-stderr env MANWIDTH=100 man --warnings -l "$ROOT/cli/allocctl.1"
	[ -z "$stderr" ]
	for c in ps stats get set trim release flush history top version; do
		grep -Eq "^       $c( |$)" <<<"$output" || { echo "no $c"; false; }
	done
	[[ "$output" == *"JSON OUTPUT"* && "$output" == *"EXIT STATUS"* ]]
}
