#!/usr/bin/env bats
# san: skip
# cli_json.bats — every allocctl --json document (ps, stats, get, set, trim, release, flush,
# a failed command, profiles, policies, log, history, version) from a real daemon with a
# profile and a policy, checked against its definition in
# cli/schema/allocctl-json-1.schema.json by tests/helpers/jsonschema_check.py (Debian's
# python3-jsonschema; strict: a key the schema does not describe fails). The process is
# started with `exec -a`: it is listed under the name it was given and its profile applies.
# A process that exec'd a program without liballoc keeps its old segment while it lives.
bats_require_minimum_version 1.5.0

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ALLOCCTL="$BUILD/allocctl"
	SCHEMA="$ROOT/cli/schema/allocctl-json-1.schema.json"
	CHECK="$ROOT/tests/helpers/jsonschema_check.py"
	ctld_setup
}

teardown() {
	ctld_teardown
}

# j NAME ARGS...: allocctl --json ARGS into $T/NAME.json
j() {
	local name=$1
	shift
	"$ALLOCCTL" --socket "$SOCK" --json "$@" >"$T/$name.json"
}

check() {
	python3 "$CHECK" "$SCHEMA" "$@"
}

@test "every --json document matches its schema definition" {
	cat >"$T/conf" <<-EOF
		[profile json-prof]
		name = json-prof
		decay_ms = 2s

		[policy idle-release]
		on = idle
		for = 1h
		actions = flush, release, trim
	EOF
	start_daemon --config "$T/conf"
	LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" bash -c 'exec -a json-prof sleep 300' \
		>/dev/null 2>&1 3>&- &
	local p=$!
	echo "$p" >>"$T/pids"
	wait_listed "$p"
	# the profile applies to the name exec -a gave it; the segment of the image before the
	# exec (its lock went with it) was replaced by the new image's, never removed as stale
	wait_until grep -q "profile json-prof applied to pid $p (json-prof)" "$T/log"
	! grep -q "removed stale" "$T/log"
	j ps ps
	j stats stats "$p"
	j get get "$p"
	j set set "$p" decay_ms=3s --for 1m
	j trim trim "$p" --pad 64K
	j release release "$p"
	j flush flush "$p"
	j profiles profiles
	j policies policies
	j log log
	j history history "$p"
	j version version
	run j failed trim 2147483000
	[ "$status" -eq 1 ]
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=[x for x in d["processes"] if x["pid"]=='"$p"'][0]; assert p["name"] == "json-prof" and p["profile"] == "json-prof", p' "$T/ps.json"
	for d in ps stats profiles policies log history version; do
		run -0 check "$d" "$T/$d.json"
	done
	run -0 check command "$T"/{get,set,trim,release,flush}.json
	if [ -s "$T/failed.json" ]; then
		run -0 check command "$T/failed.json"
	fi
}

@test "the checker fails on a document that does not match, naming where" {
	cat >"$T/ps.json" <<-'EOF'
		{"schema_version":1,"processes":[{"pid":"12","surprise":1}]}
	EOF
	run check ps "$T/ps.json"
	[ "$status" -eq 1 ]
	[[ "$output" == *"processes/0/pid: '12' is not of type 'integer'"* ]]
	[[ "$output" == *"'memory' is a required property"* ]]
	[[ "$output" == *"'surprise' was unexpected"* ]]
	echo '{"schema_version":2,"processes":[]}' >"$T/v2.json"
	run check ps "$T/v2.json"
	[ "$status" -eq 1 ]
	[[ "$output" == *"schema_version: 1 was expected"* ]]
	run check nosuch "$T/v2.json"
	[ "$status" -eq 2 ]
}

@test "a process that exec'd a program without liballoc: its segment stays while it lives, then goes" {
	start_daemon --rescan-ms 200
	mkfifo "$T/go"
	LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" bash -c \
		'read -r _ <"$1"; exec env -u LD_PRELOAD sleep 300' _ "$T/go" >/dev/null 2>&1 3>&- &
	local p=$!
	echo "$p" >>"$T/pids"
	wait_listed "$p"
	echo >"$T/go"
	# (named as last read: bash, or env or sleep when the daemon read a young process's
	# identity again after the exec, as a loaded machine's timing makes it)
	wait_until grep -Eq "forgetting pid $p \((bash|env|sleep)\): no process holds its lock but pid $p lives on" "$T/log"
	wait_rescans 2
	[ -f "$T/segs/liballoc.$p.seg" ]
	! grep -q "removed stale" "$T/log"
	! listed "$p"
	kill "$p"
	wait_until eval "! test -e '$T/segs/liballoc.$p.seg'"
	grep -q "removed stale segment $T/segs/liballoc.$p.seg (no process holds its lock)" "$T/log"
}
