#!/usr/bin/env bats
# programs.bats — real programs under LD_PRELOAD=$LIBALLOC_SO give the same output as
# without it (issue 3): Debian's python3 running a slice of CPython's own test suite, git,
# sqlite3, perl, bash, and a parallel build of this project by preloaded make/gcc/ld whose
# result must work. Every preloaded process publishes its segment in a private run
# directory; what is left there afterwards is checked with the reader (tests/helpers/segtool).
# The default is a short form (the whole of make test stays within 10 minutes on 2 cores):
# six of CPython's test modules run preloaded, two at a time, beside the file's other tests
# (and again without the preload only if they fail there, to tell whose failure it is), 30
# git commits, the build of the library and allocctl. TEST_LONG=1 runs eleven modules one
# after the other, with and without the preload, 90 commits and builds allocctld too:
#   TEST_LONG=1 make test TESTS=tests/e2e/programs.bats
# san: skip

source "$ROOT/tests/helpers/wait.bash"

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	SEGTOOL="$TESTS_BIN/segtool"
	mkdir -p "$BUILD/run"
	T=$(mktemp -d "$BUILD/run/programs.XXXXXX")
	SEGS="$T/segs"
	mkdir -m 700 "$SEGS"
	# the same fixed identity and clock for both runs, so that outputs can be compared
	export GIT_AUTHOR_NAME=liballoc GIT_AUTHOR_EMAIL=tests@liballoc.invalid
	export GIT_COMMITTER_NAME=liballoc GIT_COMMITTER_EMAIL=tests@liballoc.invalid
	export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null LC_ALL=C TZ=UTC
	LONG=${TEST_LONG:-0}
}

teardown() {
	[ -n "${T:-}" ] && rm -rf "$T"
}

# pre CMD...: CMD with liballoc preloaded, its segments (and its children's) in $SEGS.
pre() {
	LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$LIBALLOC_SO" "$@"
}

# both TAG CMD...: CMD without and with the preload, side by side (each is one process
# on one CPU); outputs in $T/TAG.plain, $T/TAG.pre. Fails if either does.
both() {
	"${@:2}" >"$T/$1.plain" 2>&1 3>&- &
	local plain=$!
	pre "${@:2}" >"$T/$1.pre" 2>&1
	wait "$plain"
}

# same_output TAG OP N: the plain run printed OP N lines (a test operator: -eq, -ge, -gt)
# and the preloaded run printed exactly the same.
same_output() {
	[ "$(wc -l <"$T/$1.plain")" "$2" "$3" ] || {
		echo "$1: $(wc -l <"$T/$1.plain") lines without the preload, expected $2 $3" >&2
		return 1
	}
	diff -u "$T/$1.plain" "$T/$1.pre"
}

# no_segments_left [EXE...]: every preloaded process has exited normally, so nothing may
# remain. Stale segments whose executable is /usr/bin/EXE are tolerated: Debian's /bin/sh
# (dash) always ends with _exit(2), which runs no exit handler (see the test "a preloaded
# /bin/sh removes its segment at exit" for that case on its own); a sort whose reader (head)
# stopped early dies of SIGPIPE. Nothing removes such a file at once: a process sweeps
# stale segments a second after its start, or at its start in a directory holding many
# names (shm.c), and the daemon does.
no_segments_left() {
	local f info e ok bad=0
	for f in "$SEGS"/* "$SEGS"/.[!.]*; do
		[ -e "$f" ] || continue
		info=$("$SEGTOOL" info "$f" 2>&1 | grep -E '^(exe|liveness|threads)=' | tr '\n' ' ')
		ok=0
		for e in "$@"; do
			[[ "$info" == "exe=/usr/bin/$e threads="*" liveness=stale " ]] && ok=1
		done
		[ "$ok" = 0 ] || continue
		echo "left behind: ${f##*/}: $info" >&2
		bad=1
	done
	return $bad
}

# only_stale_segments_left PID: the top process's segment is gone, and what remains (from
# children that ended with _exit or were killed: no exit handler runs there) is stale.
only_stale_segments_left() {
	[ ! -e "$SEGS/liballoc.$1.seg" ] || {
		echo "the segment of $1, which exited normally, is still there" >&2
		return 1
	}
	local f
	for f in "$SEGS"/liballoc.*; do
		[ -e "$f" ] || continue
		case "$f" in
		*.seg) ;;
		*)
			echo "temporary file left behind: $f" >&2
			return 1
			;;
		esac
		"$SEGTOOL" live "$f" >/dev/null && {
			echo "$f belongs to a live process" >&2
			return 1
		}
	done
	echo "# $(ls -A "$SEGS" | wc -l) stale segments of _exit-ed children" >&3
}

# python_plain DIR MODS...: the same modules without the preload (the baseline), in DIR
python_plain() {
	local d=$1
	shift
	(cd "$d" && PYTHONMALLOC=malloc exec /usr/bin/python3 -m test "$@" >"$d/py.plain" 2>&1)
}

python_mods() {
	# test_threading: threads, fork from a thread, the last thread leaving
	if [ "${TEST_LONG:-0}" = 1 ]; then
		echo test_threading test_dict test_list test_re test_bytes test_unicode \
			test_set test_json test_gc test_deque test_array
	else
		echo test_threading test_dict test_list test_re test_bytes test_unicode
	fi
}

# python_start: the preloaded slice of CPython's test suite, started by setup_file in a
# directory of its own ($PY_T, segments in $PY_T/segs), runs while the file's other tests
# do: test_threading spends most of its time waiting out its own timeouts and child
# interpreters, the other tests are work. Writes the interpreter's pid to $PY_T/pid and its
# exit status to $PY_T/rc (the long form runs the modules without the preload first:
# $PY_T/plain.rc). The python3 test, last in the file, checks them.
python_start() {
	mkdir -p "$BUILD/run"
	PY_T=$(mktemp -d "$BUILD/run/programs-py.XXXXXX")
	mkdir -m 700 "$PY_T/segs"
	export PY_T
	[ -x /usr/bin/python3 ] && [ -d /usr/lib/python3.11/test ] || return 0
	local mods jobs=(-j2)
	mods=$(python_mods)
	# two at a time (-j2: each module in a worker process, preloaded too): test_threading
	# takes most of the time (27 s of 37 s alone), so the other five run beside it; the long
	# form runs them one after the other
	[ "${TEST_LONG:-0}" = 1 ] && jobs=()
	(
		rc=0
		if [ "${TEST_LONG:-0}" = 1 ]; then
			# shellcheck disable=SC2086
			python_plain "$PY_T" $mods || rc=$?
			echo "$rc" >"$PY_T/plain.rc"
		fi
		(
			cd "$PY_T" || exit 1
			export PYTHONMALLOC=malloc LIBALLOC_RUN_DIR="$PY_T/segs" LD_PRELOAD="$LIBALLOC_SO"
			# shellcheck disable=SC2086
			exec /usr/bin/python3 -m test "${jobs[@]}" $mods >"$PY_T/py.pre" 2>&1
		) &
		preloaded=$! # the subshell execs the interpreter: this is its pid
		echo "$preloaded" >"$PY_T/pid"
		rc=0
		wait "$preloaded" || rc=$?
		echo "$rc" >"$PY_T/rc.tmp" && mv "$PY_T/rc.tmp" "$PY_T/rc"
	) </dev/null >/dev/null 2>&1 3>&- &
	echo "$!" >"$PY_T/runner"
}

setup_file() {
	[ -f "${LIBALLOC_SO:-}" ] || return 0
	python_start
}

teardown_file() {
	[ -n "${PY_T:-}" ] || return 0
	local p
	# an interrupted run: its runner and the interpreter (whose workers end with it)
	for p in $(cat "$PY_T/runner" "$PY_T/pid" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
	rm -rf "$PY_T"
}

# The git workload: N commits (a multiple of 3) on a generated tree, then history, gc and
# fsck.
git_workload() {
	local dir=$1 n=$2 i
	local t=$((n / 3))
	git init -q -b main "$dir"
	cd "$dir"
	for i in $(seq 1 "$n"); do
		export GIT_AUTHOR_DATE="@$((1700000000 + i * 60)) +0000"
		export GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"
		mkdir -p "d$((i % 7))"
		seq "$i" $((i * 37)) | sed "s/^/line $i: /" >"d$((i % 7))/f$((i % 13)).txt"
		printf '%s\n' "$(seq -s ' ' "$i")" >>log.txt
		[ $((i % 10)) -eq 0 ] && git rm -q --cached "d$((i % 7))/f$((i % 13)).txt" &&
			rm "d$((i % 7))/f$((i % 13)).txt"
		git add -A
		git commit -q -m "commit $i" -m "$(seq -s, "$i")"
		[ $((i % t)) -eq 0 ] && git tag "v$i"
	done
	git log --stat --format='%H %an %ad %s' --date=raw
	git log --graph --oneline --decorate >"$dir.graph" # not into head: no SIGPIPE
	head -50 "$dir.graph"
	git show --stat "v$((2 * t))"
	git diff "v$t" "v$n" --stat
	git gc -q --aggressive
	git count-objects -v | grep -v -e size -e prune
	git fsck --full --strict 2>&1
	git rev-list --all --objects | sort | sha256sum
	git archive "v$n" | sha256sum
	git grep -c "line 7" "v$n" -- | sort
}

@test "git: init, many commits, log, gc and fsck print the same with the preload" {
	local n=30 lines=150
	[ "$LONG" = 1 ] && n=90 lines=500
	# without the preload beside the preloaded run (each a chain of one process at a time)
	(git_workload "$T/plain" "$n" >"$T/git.plain" 2>&1) 3>&- &
	local plain=$!
	# bash, git and every git sub-process (pack-objects, repack, ...) preloaded
	export -f git_workload
	pre bash -c 'git_workload "$1" "$2"' git "$T/pre" "$n" >"$T/git.pre" 2>&1
	wait "$plain"
	same_output git -gt "$lines"
	no_segments_left
}

@test "sqlite3: a generated workload prints the same with the preload" {
	command -v sqlite3 >/dev/null || { echo "no sqlite3 (scripts/deps.sh test installs it)"; false; }
	cat >"$T/work.sql" <<'EOF'
PRAGMA journal_mode=DELETE;
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, price REAL, note BLOB);
CREATE TABLE tag(item INTEGER REFERENCES item(id), tag TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO item SELECT i, 'item-' || i || '-' || hex(i * 7919), i % 97, (i * 37 % 1000) / 10.0,
       zeroblob(i % 300) FROM n;
INSERT INTO tag SELECT id, 't' || (id % 13) FROM item WHERE id % 3 = 0;
COMMIT;
CREATE INDEX item_grp ON item(grp, price);
CREATE INDEX tag_tag ON tag(tag);
UPDATE item SET price = price * 1.5, name = upper(name) WHERE grp % 5 = 1;
UPDATE item SET note = zeroblob(2000) WHERE id % 101 = 0;
DELETE FROM item WHERE id % 11 = 0;
DELETE FROM tag WHERE item NOT IN (SELECT id FROM item);
SELECT count(*), sum(price), min(name), max(name), sum(length(note)) FROM item;
SELECT grp, count(*), round(avg(price), 3), group_concat(id % 10, '') FROM item
 GROUP BY grp ORDER BY grp LIMIT 20;
SELECT t.tag, count(*), round(sum(i.price), 2) FROM tag t JOIN item i ON i.id = t.item
 GROUP BY t.tag ORDER BY 2 DESC, 1;
SELECT id, name FROM item WHERE grp = 42 AND price > 50 ORDER BY price DESC, id LIMIT 15;
SELECT substr(group_concat(name, ','), 1, 200) FROM (SELECT name FROM item ORDER BY name DESC LIMIT 500);
VACUUM;
PRAGMA integrity_check;
SELECT count(*) FROM item;
DROP INDEX item_grp;
SELECT count(*), sum(grp) FROM item WHERE price BETWEEN 10 AND 20;
EOF
	sqlite3 "$T/plain.db" <"$T/work.sql" >"$T/sql.plain" 2>&1 3>&- &
	local plain=$!
	pre sqlite3 "$T/pre.db" <"$T/work.sql" >"$T/sql.pre" 2>&1
	wait "$plain"
	grep -qx ok "$T/sql.plain"
	same_output sql -gt 40
	cmp <(sqlite3 "$T/plain.db" .dump) <(sqlite3 "$T/pre.db" .dump)
	no_segments_left
}

@test "perl: big hashes, strings and regexes print the same with the preload" {
	cat >"$T/work.pl" <<'EOF'
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
my %h;
for my $i (1 .. 200000) {
	$h{"key$i"} = join('-', $i, $i * 3, scalar reverse("$i"));
}
delete $h{"key$_"} for grep { $_ % 7 == 0 } 1 .. 200000;
my @keys = sort keys %h;
print scalar(@keys), " ", md5_hex(join(',', @keys[0 .. 999])), "\n";
my $s = '';
$s .= sprintf("%08x:%s;", $_, 'x' x ($_ % 50)) for 1 .. 100000;
print length($s), " ", md5_hex($s), "\n";
my @m = ($s =~ /([0-9a-f]{6}1f):(x{40,})/g);
print scalar(@m), " ", md5_hex(join('', @m)), "\n";
(my $t = $s) =~ s/(x+)/length($1)/ge;
print length($t), " ", md5_hex($t), "\n";
my %count;
$count{length $_}++ for split /;/, $s;
print join(' ', map { "$_=$count{$_}" } (sort { $a <=> $b } keys %count)[0 .. 9]), "\n";
my @big = map { [$_, "v" x ($_ % 100)] } 1 .. 50000;
@big = sort { length($b->[1]) <=> length($a->[1]) or $a->[0] <=> $b->[0] } @big;
print join(',', map { $_->[0] } @big[0 .. 9]), "\n";
my $re = join('|', map { "w$_" } 1 .. 500);
my $n = () = join(' ', map { "w$_" } 1 .. 20000) =~ /\b(?:$re)\b/g;
print "$n\n";
EOF
	both pl perl "$T/work.pl"
	same_output pl -eq 7
	no_segments_left
}

@test "bash: arrays, strings, subshells and pipelines print the same with the preload" {
	cat >"$T/work.sh" <<'EOF'
declare -a arr
declare -A map
for ((i = 0; i < 20000; i++)); do
	arr+=("item$i")
	map["k$((i % 997))"]+="$i,"
done
echo "${#arr[@]} ${#map[@]} ${arr[12345]} ${#map[k5]}"
s=""
for ((i = 0; i < 3000; i++)); do s+="${arr[i]}:"; done
echo "${#s} ${s:100:40} ${s//item/I}" | cut -c1-200
x=${s^^}; y=${x,,}; z=${y//:/ }
echo "${#x} ${x:0:30} ${#z}"
words=($z)
echo "${#words[@]} ${words[-1]} ${words[@]:10:3}"
echo "$(for i in {1..200}; do (echo "$((i * i))"); done | sort -n | tail -3 | tr '\n' ' ')"
printf '%s\n' "${arr[@]}" | grep -c '7' | (read -r n; echo "sevens $n")
result=$( (for k in "${!map[@]}"; do echo "$k ${#map[$k]}"; done) | sort -k2,2n -k1,1 | head -5)
echo "$result"
f() { local -a a=("$@"); echo "${#a[@]}:${a[*]: -2}"; }
f "${arr[@]:0:5000}"
echo "$(seq 1 5000 | paste -sd+ | bc 2>/dev/null || seq 1 5000 | awk '{s+=$1} END {print s}')"
mapfile -t lines < <(printf 'l%d\n' {1..3000})
echo "${#lines[@]} ${lines[2999]}"
unset 'arr[5]' 'map[k3]'
echo "${#arr[@]} ${#map[@]}"
EOF
	both sh bash "$T/work.sh"
	same_output sh -ge 15
	# (its sort ... | head pipelines)
	no_segments_left sort
}

@test "a parallel build of this project by preloaded make, gcc and ld works" {
	local b="$T/build" daemon=()
	# the daemon (half of the sources) in the long form: the library and allocctl already
	# take every tool (make -j2, gcc, as, ld, ar, protoc-c) through the preload
	[ "$LONG" = 1 ] && daemon=("$b/allocctld")
	pre make -C "$ROOT" -j2 BUILD="$b" DEPS=0 "$b/liballoc.so" "$b/liballoc.a" \
		"$b/allocctl" "${daemon[@]}" >"$T/make.log" 2>&1 || {
		tail -30 "$T/make.log"
		return 1
	}
	[ -f "$b/liballoc.so" ] && [ -f "$b/liballoc.a" ] && [ -x "$b/allocctl" ]
	# make runs its $(shell ...) through /bin/sh
	no_segments_left dash
	# the library built that way works as a preload: a segment appears and goes
	SEGS="$T/segs.built"
	mkdir -m 700 "$SEGS"
	LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$b/liballoc.so" true
	no_segments_left
	# (named 50 ms after its start: LIBALLOC_PUBLISH_DELAY)
	run env LIBALLOC_RUN_DIR="$SEGS" LD_PRELOAD="$b/liballoc.so" bash -c \
		'for i in {1..200}; do [ -e "$LIBALLOC_RUN_DIR/liballoc.$$.seg" ] && break; sleep 0.05; done
		ls "$LIBALLOC_RUN_DIR"; echo hello | sort'
	[ "$status" -eq 0 ]
	[[ "$output" == *"liballoc."*".seg"* ]]
	[[ "${lines[-1]}" == hello ]]
	no_segments_left
	# and the programs built by the preloaded toolchain run
	run "$b/allocctl" version
	[[ "$output" == *"protocol"* ]]
	if [ "$LONG" = 1 ]; then
		run "$b/allocctld" --help
		[ "$status" -eq 0 ]
	fi
}

@test "a preloaded /bin/sh removes its segment at exit" {
	# Debian's /bin/sh (dash) ends with _exit(2) even on a normal exit; system(3) and
	# popen(3) of every preloaded service run it
	run pre /bin/sh -c 'echo hello'
	[ "$status" -eq 0 ]
	[ "$output" = hello ]
	no_segments_left
}

# (last: the slice started by setup_file ran beside the tests above)
@test "python3: a slice of CPython's test suite passes with the preload (and without)" {
	[ -x /usr/bin/python3 ] && [ -d /usr/lib/python3.11/test ] ||
		{ echo "Debian's python3 and libpython3.11-testsuite are needed (scripts/deps.sh test)"; false; }
	local mods n preloaded rc
	mods=$(python_mods)
	n=$(wc -w <<<"$mods")
	# the deadline bounds a run that hangs (the long form's take several minutes)
	wait_until -t 1500 test -e "$PY_T/rc"
	preloaded=$(cat "$PY_T/pid")
	rc=$(cat "$PY_T/rc")
	if [ "$LONG" = 1 ] && [ "$(cat "$PY_T/plain.rc")" -ne 0 ]; then
		tail -30 "$PY_T/py.plain"
		return 1
	fi
	if [ "$rc" -ne 0 ]; then
		tail -50 "$PY_T/py.pre"
		# shellcheck disable=SC2086
		if [ "$LONG" = 1 ] || python_plain "$PY_T" $mods; then
			echo "(without the preload the same modules pass)"
		else
			echo "(they fail without the preload too:)"
			tail -30 "$PY_T/py.plain"
		fi
		return 1
	fi
	grep -qx 'Tests result: SUCCESS' "$PY_T/py.pre"
	grep -qx "All $n tests OK." "$PY_T/py.pre"
	if [ "$LONG" = 1 ]; then
		grep -qx 'Tests result: SUCCESS' "$PY_T/py.plain"
		grep -qx "All $n tests OK." "$PY_T/py.plain"
	fi
	SEGS="$PY_T/segs" only_stale_segments_left "$preloaded"
}
