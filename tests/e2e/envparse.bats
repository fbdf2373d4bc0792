#!/usr/bin/env bats
# san: skip
# envparse.bats — what a process is told through its environment, and what liballoc tells
# back (issue 17): the same text means the same value in LIBALLOC_<NAME>, in `allocctl set`
# and in a profile of the daemon's configuration (one parser, liballoc_parse.h), and a bad
# one is refused by all three; an unknown LIBALLOC_ variable gets one line naming the
# closest known one; LIBALLOC_CONTROL takes every boolean spelling; an over-long
# LIBALLOC_RUN_DIR is an error, never another directory; the variables are the ones given
# at start, even after the program rewrote its environment; a program that maps another
# allocator (linked against jemalloc, tcmalloc/mimalloc loaded, or dlopen'ed later) is told so once on
# stderr, and its segment, allocctl ps/stats and /metrics say it; `allocctl get` shows where
# each value came from.
load ../policy/common

setup() {
	pol_setup
	SEGTOOL="$TESTS_BIN/segtool"
}
teardown() { pol_teardown; }

# seginfo PID KEY: a header field as segtool reads it from the process's segment.
seginfo() { "$SEGTOOL" info "$LIBALLOC_RUN_DIR/liballoc.$1.seg" | sed -n "s/^$2=//p"; }

# NAME TEXT VALUE: one text per tunable, each in another form of the grammar.
CASES=(
	"decay_ms 1.5s 1500"
	"tcache_max_bytes 1.5M 1572864"
	"trim_threshold 0.5G 536870912"
	"top_pad 64KiB 65536"
	"madvise_throttle Off 0"
	"mmap_max 42 42"
	"direct_cache_bytes 100m 104857600"
)

upper() { tr '[:lower:]' '[:upper:]' <<<"$1"; }

@test "the same text means the same value in the environment, allocctl set and a profile" {
	local c name text want envs=() sets=()
	{
		echo "[profile envparse]"
		echo "name = envparse-prof"
		for c in "${CASES[@]}"; do
			read -r name text want <<<"$c"
			echo "$name = $text"
		done
	} >"$P/conf"
	for c in "${CASES[@]}"; do
		read -r name text want <<<"$c"
		envs+=("LIBALLOC_$(upper "$name")=$text")
		sets+=("$name=$text")
	done
	# blanks around a value, as a shell script or a unit file may leave them
	envs+=("LIBALLOC_MMAP_THRESHOLD= 256 K ")
	start_daemon --config "$P/conf"
	start_sleeper "${envs[@]}"
	local from_env=$SP
	start_sleeper
	local from_cli=$SP
	run -0 "$ALLOCCTL" set "$from_cli" "${sets[@]}" "mmap_threshold= 256 K "
	ln -s "$(command -v sleep)" "$P/envparse-prof"
	env LD_PRELOAD="$LIBALLOC_SO" "$P/envparse-prof" 300 3>&- &
	local from_profile=$!
	POL_PIDS+=("$from_profile")
	wait_for listed "$from_profile"
	wait_for value_is "$from_profile" mmap_max 42
	# each process's values in one get; the profile leaves mmap_threshold alone
	local want_all="{" p
	for c in "${CASES[@]}"; do
		read -r name text want <<<"$c"
		want_all+="'$name': $want, "
	done
	want_all+="}"
	for p in "$from_env" "$from_cli" "$from_profile"; do
		"$ALLOCCTL" --json get "$p" >"$P/get.$p"
		json_check "all(d['results'][0]['tunables'][k]['value'] == v for k, v in $want_all.items())" <"$P/get.$p"
	done
	json_check "d['results'][0]['tunables']['mmap_threshold']['value'] == 262144" <"$P/get.$from_env"
	json_check "d['results'][0]['tunables']['mmap_threshold']['value'] == 262144" <"$P/get.$from_cli"
	run -0 "$ALLOCCTL" --json get "$from_env" decay_ms
	[[ "$output" == *'"source":"environment"'* ]]
}

@test "a text that is not a value is refused by the environment, allocctl set and a profile" {
	local bad="1.5x"
	# environment: one line, the default stays
	run --separate-stderr env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_DECAY_MS="$bad" /bin/echo hello
	[ "$status" -eq 0 ] && [ "$output" = hello ]
	[ "$stderr" = "liballoc: LIBALLOC_DECAY_MS=$bad: ignored: decay_ms: expected a duration such as 250 (ms), 250ms, 10s, 1.5m, 1h (valid: 0..3600000 ms)" ]
	# allocctl: a usage error naming the value and what was expected; nothing changed
	start_daemon
	start_sleeper
	run "$ALLOCCTL" set "$SP" decay_ms="$bad"
	echo "$output"
	[ "$status" -eq 2 ]
	[[ "$output" == *"invalid value '$bad' for decay_ms: expected a duration"* ]]
	[ "$(value "$SP" decay_ms)" = 10000 ]
	# a too-large number is a range error, never wrapped
	run "$ALLOCCTL" set "$SP" trim_threshold=9000P
	[ "$status" -eq 2 ]
	[[ "$output" == *"out of range for trim_threshold"* ]]
	stop_daemon
	# the daemon's configuration: refused with its line, the daemon does not start
	printf '[profile p]\nname = x\ndecay_ms = %s\n' "$bad" >"$P/conf"
	run "$CTLD" --config "$P/conf" --socket "$P/c2.sock" --listen off --no-default-dirs
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"conf:3: decay_ms: bad value '$bad': expected a duration"* ]]
	# the daemon's own durations: the same grammar on its command line
	run -0 "$CTLD" --rescan-ms 1.5s --check-config --socket "$P/c2.sock" --listen off --no-default-dirs
	run -2 "$CTLD" --rescan-ms "$bad" --check-config --socket "$P/c2.sock" --listen off --no-default-dirs
	[[ "$output" == *"--rescan-ms: bad value '$bad' (a duration from 50 ms to 3600000 ms"* ]]
}

@test "an unknown LIBALLOC_ variable gets one line naming the closest known one" {
	local var want
	while read -r var want; do
		run --separate-stderr env LD_PRELOAD="$LIBALLOC_SO" "$var" /bin/echo hello
		echo "$var: $stderr"
		[ "$status" -eq 0 ] && [ "$output" = hello ]
		[ "${#stderr_lines[@]}" -eq 1 ]
		[ "$stderr" = "liballoc: ${var%%=*} is not a liballoc setting and is ignored; did you mean LIBALLOC_$want?" ]
	done <<-EOF
		LIBALLOC_DECAY=5s DECAY_MS
		LIBALLOC_MMAP_TRESHOLD=1M MMAP_THRESHOLD
		LIBALLOC_RUNDIR=/tmp RUN_DIR
		LIBALLOC_CONTROLL=0 CONTROL
		LIBALLOC_decay_ms=5s DECAY_MS
		LIBALLOC_TCACHE_MAX=64K TCACHE_MAX_BYTES
	EOF
	# known ones (and LIBALLOC_SO, which liballoc's scripts use to name the library) print
	# nothing
	run --separate-stderr env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_SO="$LIBALLOC_SO" \
		LIBALLOC_DECAY_MS=5s LIBALLOC_CONTROL=on LIBALLOC_MMAP_THRESHOLD=1M /bin/echo hello
	[ "$status" -eq 0 ] && [ "$output" = hello ] && [ -z "$stderr" ]
	# the misspelled one set nothing: the default is in effect
	start_sleeper LIBALLOC_MMAP_TRESHOLD=1M 2>/dev/null
	"$SEGTOOL" info "$LIBALLOC_RUN_DIR/liballoc.$SP.seg" | grep -qx 'tunable.mmap_threshold=131072 source=default'
}

@test "LIBALLOC_CONTROL takes 0/1, true/false, yes/no, on/off; anything else keeps it on" {
	# every spelling is read by la_parse (tests/unit/tunables.c checks them all); one of
	# each kind in a live process
	start_sleeper LIBALLOC_CONTROL=Off
	[ "$(seginfo "$SP" control)" = off ]
	local off=$SP
	start_sleeper LIBALLOC_CONTROL=yes
	wait_for test "$(seginfo "$SP" control)" = running
	start_sleeper LIBALLOC_CONTROL=maybe 2>"$P/err"
	wait_for test "$(seginfo "$SP" control)" = running
	[ "$(cat "$P/err")" = "liballoc: LIBALLOC_CONTROL=maybe: not a boolean (1/0, true/false, yes/no, on/off); the control thread runs" ]
	# off means off: a command is never answered
	run "$SEGTOOL" cmd "$LIBALLOC_RUN_DIR/liballoc.$off.seg" -t 300 trim
	[ "$status" -eq 5 ]
}

@test "an over-long LIBALLOC_RUN_DIR is an error, never another directory" {
	# paths of exactly 199 bytes (the longest a run directory may be) and 200 bytes, whose
	# first 199 bytes name another directory that exists
	local base="$P/r" fit long cut
	mkdir -m 700 "$base"
	fit="$base/$(printf 'a%.0s' $(seq $((199 - ${#base} - 1))))"
	long="$base/$(printf 'b%.0s' $(seq $((200 - ${#base} - 1))))"
	cut=${long:0:199}
	[ "${#fit}" -eq 199 ] && [ "${#long}" -eq 200 ] && [ "${#cut}" -eq 199 ]
	mkdir -m 700 "$fit" "$long" "$cut"
	LIBALLOC_RUN_DIR="$fit" start_sleeper
	[ -e "$fit/liballoc.$SP.seg" ]
	run --separate-stderr env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_RUN_DIR="$long" /bin/echo hello
	echo "$stderr"
	[ "$status" -eq 0 ] && [ "$output" = hello ]
	[ "$stderr" = "liballoc: statistics not published: LIBALLOC_RUN_DIR is 200 bytes long; a run directory may have at most 199" ]
	# a live process too: nothing in either directory
	env LIBALLOC_RUN_DIR="$long" LD_PRELOAD="$LIBALLOC_SO" sleep 300 2>"$P/err" 3>&- &
	POL_PIDS+=($!)
	wait_for test -s "$P/err"
	[ -z "$(ls -A "$long")" ] && [ -z "$(ls -A "$cut")" ]
	kill -0 "${POL_PIDS[-1]}"
}

@test "a program that rewrites its environment (as setproctitle does): liballoc keeps what it was given at start" {
	# the old strings written over and LIBALLOC_RUN_DIR unset before a fork: the child
	# still publishes in the run directory given at start (its variables were copied at
	# init; reading environ while a program rewrote it crashed redis-server at start)
	LD_PRELOAD="$LIBALLOC_SO" "$TESTS_BIN/envclobber" "$P/child.pid" 3>&- &
	POL_PIDS+=($!)
	wait_for test -s "$P/child.pid"
	local c
	c=$(cat "$P/child.pid")
	POL_PIDS+=("$c")
	wait_for test -e "$LIBALLOC_RUN_DIR/liballoc.$c.seg"
	[ "$(seginfo "$c" pid)" = "$c" ]
}

@test "LIBALLOC_ variables over 16 KiB together: the one that does not fit is ignored, said in one line" {
	local big
	big=$(printf '9%.0s' $(seq 17000))
	run --separate-stderr env LD_PRELOAD="$LIBALLOC_SO" LIBALLOC_DECAY_MS="$big" /bin/echo hello
	echo "$stderr"
	[ "$status" -eq 0 ] && [ "$output" = hello ]
	[ "$stderr" = "liballoc: LIBALLOC_DECAY_MS: ignored: the LIBALLOC_ and MEMORY_PRESSURE_ variables take more than 16 KiB together" ]
	# the others are still read: the segment is published in the run directory given
	start_sleeper LIBALLOC_DECAY_MS="$big"
	[ "$(seginfo "$SP" pid)" = "$SP" ]
}

@test "a program linked against jemalloc: said once on stderr, in its segment, ps, stats and /metrics" {
	start_daemon
	local jfifo="$P/jin"
	mkfifo "$jfifo"
	env LD_PRELOAD="$LIBALLOC_SO" "$TESTS_BIN/jemalloc_user" <"$jfifo" >"$P/jout" 2>"$P/jerr" 3>&- &
	local jp=$!
	POL_PIDS+=("$jp")
	exec {jfd}>"$jfifo"
	wait_for grep -q '^child ' "$P/jout"
	local child
	child=$(sed -n 's/^child //p' "$P/jout")
	POL_PIDS+=("$child")
	grep -q '^jemalloc [0-9]' "$P/jout"
	# one line, from the process (its forked child says nothing more)
	[ "$(wc -l <"$P/jerr")" -eq 1 ]
	grep -q "^liballoc: this process also maps .*/libjemalloc.so.2: liballoc serves its malloc, so jemalloc's own statistics and controls" "$P/jerr"
	# (each segment is named 50 ms after its start: LIBALLOC_PUBLISH_DELAY)
	wait_for test -e "$LIBALLOC_RUN_DIR/liballoc.$jp.seg"
	wait_for test -e "$LIBALLOC_RUN_DIR/liballoc.$child.seg"
	[ "$(seginfo "$jp" foreign)" = 1 ]
	[ "$(seginfo "$child" foreign)" = 1 ]
	wait_for listed "$jp"
	run -0 "$ALLOCCTL" ps
	[[ "$(grep -E "^ *$jp " <<<"$output")" == *"also maps jemalloc"* ]]
	run -0 "$ALLOCCTL" stats "$jp"
	[[ "$output" == *"also maps jemalloc: liballoc serves its malloc; jemalloc's own statistics and controls no longer describe this process"* ]]
	run -0 "$ALLOCCTL" --json ps
	echo "$output" | json_check "[p['foreign_allocators'] for p in d['processes'] if p['pid'] == $jp] == [['jemalloc']]"
	metrics | grep -q "^liballoc_foreign_allocator_info{pid=\"$jp\",.*allocator=\"jemalloc\"} 1$"
	# a process without another allocator shows none of it
	start_sleeper
	[ "$(seginfo "$SP" foreign)" = 0 ]
	run -0 "$ALLOCCTL" stats "$SP"
	[[ "$output" != *"also maps"* ]]
	! metrics | grep -q "^liballoc_foreign_allocator_info{pid=\"$SP\","
	exec {jfd}>&-
}

@test "tcmalloc and mimalloc loaded into a process are named the same way" {
	local so lib name bit
	while read -r so name bit; do
		lib=$(/sbin/ldconfig -p | awk -v so="$so" '$1 == so {print $NF; exit}')
		[ -n "$lib" ] || skip "$so is missing (scripts/deps.sh test installs it)"
		env LD_PRELOAD="$LIBALLOC_SO $lib" sleep 300 2>"$P/err.$name" 3>&- &
		POL_PIDS+=($!)
		wait_for test -e "$LIBALLOC_RUN_DIR/liballoc.$!.seg"
		[ "$(seginfo "$!" foreign)" = "$bit" ]
		[ "$(wc -l <"$P/err.$name")" -eq 1 ]
		grep -q "also maps $lib: liballoc serves its malloc, so $name's own" "$P/err.$name"
	done <<-EOF
		libtcmalloc_minimal.so.4 tcmalloc 2
		libmimalloc.so.2 mimalloc 4
	EOF
}

@test "allocators dlopen'ed after start are found and said once; dlopen keeps the caller's \$ORIGIN" {
	local lib d="$P/dl"
	lib=$(/sbin/ldconfig -p | awk '$1 == "libtcmalloc_minimal.so.4" {print $NF; exit}')
	[ -n "$lib" ] || skip "libtcmalloc_minimal.so.4 is missing (scripts/deps.sh test installs it)"
	# tcmalloc copied next to the program and named by $ORIGIN: the loader resolves it from
	# the caller, which liballoc's dlopen must leave the program (not liballoc's directory)
	mkdir "$d"
	cp "$TESTS_BIN/dlopen_late" "$lib" "$d/"
	mkfifo "$P/dlin"
	env LD_PRELOAD="$LIBALLOC_SO" "$d/dlopen_late" '$ORIGIN/libtcmalloc_minimal.so.4' \
		libmimalloc.so.2 <"$P/dlin" >"$P/dlout" 2>"$P/dlerr" 3>&- &
	local dp=$!
	POL_PIDS+=("$dp")
	exec {dfd}>"$P/dlin"
	wait_for grep -q '^ready' "$P/dlout"
	wait_for test -e "$LIBALLOC_RUN_DIR/liballoc.$dp.seg"
	[ "$(seginfo "$dp" foreign)" = 0 ] && [ ! -s "$P/dlerr" ]
	echo >&$dfd
	wait_for grep -q '^loaded \|^failed ' "$P/dlout"
	grep -q '^loaded $ORIGIN/libtcmalloc_minimal.so.4' "$P/dlout"
	wait_for eval '[ "$(seginfo "$dp" foreign)" = 2 ]'
	grep -q "^liballoc: this process also maps $d/libtcmalloc_minimal.so.4: liballoc serves its malloc, so tcmalloc's own" "$P/dlerr"
	echo >&$dfd
	wait_for grep -q '^loaded libmimalloc.so.2' "$P/dlout"
	wait_for eval '[ "$(seginfo "$dp" foreign)" = 6 ]'
	grep -q "also maps .*/libmimalloc.so.2: liballoc serves its malloc, so mimalloc's own" "$P/dlerr"
	[ "$(wc -l <"$P/dlerr")" -eq 2 ] # each once
	exec {dfd}>&-
}

@test "get shows where each value came from: default, environment, mallopt, the program, allocctl" {
	start_daemon
	# a preloaded python3 calls mallopt(M_TRIM_THRESHOLD) and liballoc_set itself
	env LIBALLOC_DECAY_MS=2s LD_PRELOAD="$LIBALLOC_SO" python3 -c '
import ctypes, sys, time
c = ctypes.CDLL(None)
assert c.mallopt(-1, 262144) == 1                                   # M_TRIM_THRESHOLD
assert c.liballoc_set(b"tcache_max_bytes", ctypes.c_int64(65536), None, ctypes.c_size_t(0)) == 0
open(sys.argv[1], "w").write("ready\n")
time.sleep(300)' "$P/py.ready" 3>&- &
	local py=$!
	POL_PIDS+=("$py")
	wait_for test -s "$P/py.ready"
	wait_for listed "$py"
	run -0 "$ALLOCCTL" set "$py" top_pad=1M
	run -0 "$ALLOCCTL" get "$py" decay_ms trim_threshold tcache_max_bytes top_pad mmap_max
	echo "$output"
	[[ "${lines[0]}" == "NAME"*"VALUE"*"SOURCE"* ]]
	[[ "${lines[1]}" =~ ^decay_ms\ +2\ s\ +environment\  ]]
	[[ "${lines[2]}" =~ ^trim_threshold\ +256.0\ KiB\ +mallopt\  ]]
	[[ "${lines[3]}" =~ ^tcache_max_bytes\ +64.0\ KiB\ +api\  ]]
	[[ "${lines[4]}" =~ ^top_pad\ +1.0\ MiB\ +command\  ]]
	[[ "${lines[5]}" =~ ^mmap_max\ +65536\ +default\  ]]
	run -0 "$ALLOCCTL" --json get "$py"
	echo "$output" | json_check "
	  {k: v['source'] for k, v in d['results'][0]['tunables'].items() if k in
	   ('decay_ms', 'trim_threshold', 'tcache_max_bytes', 'top_pad', 'mmap_max')} ==
	  {'decay_ms': 'environment', 'trim_threshold': 'mallopt', 'tcache_max_bytes': 'api',
	   'top_pad': 'command', 'mmap_max': 'default'}"
}
