#!/usr/bin/env bats
# readme.bats — README.md stays true (the project's rule: every CLI command, every tunable,
# the metrics, the environment, the daemon's flags and settings). Each test asks the built
# programs for the truth — `allocctl help tunables`, `allocctl --help` and each command's
# usage, the `# TYPE` lines of a live daemon's /metrics in both metrics modes, `allocctld
# --help` and its `--check-config` refusals, the library's answer to a LIBALLOC_ variable
# — and compares it with README.md both ways (tests/helpers/readme_check.py) where the
# programs can say what exists; the daemon's configuration keys and the variables read by
# getenv are taken from the sources' literal calls. A failure names the README line to fix.
# The same for the other documents: allocctl(1) (cli/allocctl.1) and the bash completion
# against allocctl's usages and tunables, ctld/README.md's synopsis and metric names against
# allocctld, and the figures README's Limits section and ctld/README.md take from liballoc's
# headers and sources (readme_check.py's LIMITS).

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup
	README="$ROOT/README.md"
	CHECK="$ROOT/tests/helpers/readme_check.py"
	ALLOCCTL="$BUILD/allocctl"
}

teardown() {
	ctld_teardown
}

# section HEADING: the text of one README section
section() {
	"$CHECK" section "$README" "$1"
}

@test "every tunable is in README's table with allocctl's default and range, and no other" {
	"$ALLOCCTL" help tunables >"$T/tunables"
	[ "$(wc -l <"$T/tunables")" -gt 10 ]
	run "$CHECK" tunables "$README" "$T/tunables"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "every allocctl command is in README's CLI block with its usage, every option named, nothing else" {
	"$ALLOCCTL" --help >"$T/help"
	local cmds
	cmds=$(sed -n '/^Commands:/,/^$/p' "$T/help" | awk 'NR > 1 && NF { print $1 }')
	[ "$(echo "$cmds" | wc -l)" -gt 10 ]
	for c in $cmds; do
		"$ALLOCCTL" "$c" --help | head -n 1
	done >"$T/usages"
	run "$CHECK" cli "$README" "$T/help" "$T/usages"
	echo "$output"
	[ "$status" -eq 0 ]
}

# scrape_families [allocctld options]: a daemon's /metrics families (its # TYPE lines),
# appended to $T/families; the daemon is stopped again
scrape_families() {
	start_daemon "$@"
	metrics | awk '$1 == "#" && $2 == "TYPE" { print $3 }' >>"$T/families"
	kill -TERM "$DPID"
	wait_until -t 30 ended "$DPID"
	DPID=
}

@test "every family /metrics exports is in README's Metrics section, and every name there is exported" {
	# per process (with the per-class families, off by default) and per service: together
	# every family the daemon can export; each is declared whether or not a process is seen
	printf 'metrics_classes = yes\n' >"$T/classes.conf"
	: >"$T/families"
	scrape_families --config "$T/classes.conf"
	scrape_families --metrics-mode service
	grep -qx liballoc_class_spans "$T/families"
	grep -qx liballoc_service_processes "$T/families"
	grep -qx liballoc_ctld_rescans_total "$T/families"
	"$ALLOCCTL" help tunables >"$T/tunables"
	run "$CHECK" metrics "$README" "$T/families" "$T/tunables"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "every variable the library, the daemon and allocctl read is in README" {
	# the sources' getenv calls name their variable literally; allocctl names its own in --help
	local vars missing=
	vars=$(grep -rhoE '(tun_)?getenv\("[A-Z_]+"\)' "$ROOT/liballoc/src" "$ROOT/ctld" "$ROOT/cli" |
		sed -E 's/.*"([A-Z_]+)".*/\1/' | sort -u)
	vars+=" $("$ALLOCCTL" --help | grep -oE '\$[A-Z_]+' | tr -d '$' | sort -u)"
	[[ "$vars" == *LIBALLOC_RUN_DIR* && "$vars" == *ALLOCCTL_SOCKET* ]]
	for v in $vars; do
		grep -q "\b$v\b" "$README" || missing+=" $v"
	done
	[ -z "$missing" ] || { echo "not in README.md:$missing"; false; }
}

@test "every LIBALLOC_ variable README names is one the library knows" {
	[ -z "${SAN:-}" ] || skip "preloads liballoc.so"
	# the library names an unknown LIBALLOC_ variable on stderr ("... is not a liballoc
	# setting"); README's own example of that line is left out
	local names bad=
	names=$(grep -v 'is not a liballoc setting' "$README" | grep -oE 'LIBALLOC_[A-Z][A-Z_]*[A-Z]' |
		sort -u)
	[[ "$names" == *LIBALLOC_PUBLISH_DELAY* ]]
	for n in $names; do
		# a value that names the test's directory: LIBALLOC_RUN_DIR would create it
		env "$n=$T/v" LD_PRELOAD="$LIBALLOC_SO" /bin/true 2>"$T/err"
		if grep -q 'is not a liballoc setting' "$T/err"; then bad+=" $n"; fi
	done
	[ -z "$bad" ] || { echo "README names variables liballoc does not know:$bad"; false; }
}

@test "allocctld's flags and settings are in README's daemon section, and its flags exist" {
	local sec flags missing= bad= f k
	sec=$(section "## The daemon: allocctld")
	flags=$("$CTLD" --help | grep -oE '(^|[ ,])--[a-z][a-z-]*' | tr -d ' ,' | sort -u)
	[[ "$flags" == *--check-config* ]]
	for f in $flags; do
		grep -q -- "\`$f[\` ]" <<<"$sec" || missing+=" $f"
	done
	for f in $(grep -oE '(^|[^a-z-])--[a-z][a-z-]*' <<<"$sec" | grep -oE -- '--[a-z-]+' | sort -u); do
		grep -qx -- "$f" <<<"$flags" || bad+=" $f"
	done
	# README: each flag but these is a setting of the file under its name with underscores
	local flagkeys=" "
	for f in $flags; do
		case $f in --config | --daemon | --check-config | --help | --version) continue ;; esac
		k=${f#--}
		k=${k#no-}
		k=${k//-/_}
		flagkeys+="$k "
		printf '%s = ?\n' "$k" >"$T/one.conf"
		if "$CTLD" --config "$T/one.conf" --check-config 2>&1 | grep -q 'unknown key'; then
			bad+=" $f(no setting $k)"
		fi
	done
	# the [daemon] settings the configuration parser knows (ctld/config.c)
	for k in $(grep -ohE 'strcmp\(key, "[a-z_]+"\)' "$ROOT/ctld/config.c" | sed -E 's/.*"(.*)".*/\1/'); do
		[[ "$flagkeys" == *" $k "* ]] || grep -q "\`$k\b" <<<"$sec" || missing+=" $k"
	done
	[ -z "$missing$bad" ] || { echo "not in README's daemon section:$missing; not allocctld's:$bad"; false; }
}

@test "every key of a profile and of a policy allocctld accepts is in README's sections on them" {
	local keys missing= sec
	printf '[profile p]\nname = x\nnot_a_key = 1\n' >"$T/p.conf"
	run "$CTLD" --config "$T/p.conf" --check-config
	[[ "$output" == *"matches are name, exe, cgroup, uid, cmdline"* ]] || { echo "$output"; false; }
	keys=$(sed -E 's/.*matches are ([a-z, _]+);.*/\1/' <<<"$output" | tr -d ,)
	sec=$(section "### Profiles")
	for k in $keys; do
		grep -q "\`$k = " <<<"$sec" || missing+=" profile:$k"
	done
	printf '[policy p]\nnot_a_key = 1\n' >"$T/p.conf"
	run "$CTLD" --config "$T/p.conf" --check-config
	keys=$(sed -nE 's/.*unknown key .* in \[policy p\] \(([a-z_, ]+)\).*/\1/p' <<<"$output" | tr -d ,)
	[[ "$keys" == *cpu_budget* ]] || { echo "$output"; false; }
	sec=$(section "### Policies: release without being asked")
	for k in $keys; do
		grep -q "\`$k\b" <<<"$sec" || missing+=" policy:$k"
	done
	[ -z "$missing" ] || { echo "not in README:$missing"; false; }
}

# allocctl_helps: `allocctl --help` in $T/help, each command's whole --help in $T/cmdhelp,
# `allocctl help tunables` in $T/tunables
allocctl_helps() {
	"$ALLOCCTL" --help >"$T/help"
	local c
	for c in $(sed -n '/^Commands:/,/^$/p' "$T/help" | awk 'NR > 1 && NF { print $1 }'); do
		"$ALLOCCTL" "$c" --help
	done >"$T/cmdhelp"
	[ "$(grep -c '^usage: ' "$T/cmdhelp")" -gt 10 ]
	"$ALLOCCTL" help tunables >"$T/tunables"
}

@test "allocctl.1 has every command with its usage, every global option, tunable and variable, and no other" {
	command -v man >/dev/null || { echo "man is not installed (scripts/deps.sh test installs man-db)"; false; }
	allocctl_helps
	# as man renders it, a paragraph a line (cli_usage.bats checks the warnings); the
	# entries' tags from the page itself
	LC_ALL=C.UTF-8 MANWIDTH=1000 man -l "$ROOT/cli/allocctl.1" >"$T/man" 2>/dev/null
	grep -q '^COMMANDS$' "$T/man"
	run "$CHECK" man "$T/man" "$ROOT/cli/allocctl.1" "$T/help" "$T/cmdhelp" "$T/tunables"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "the bash completion offers every command and each command's options, and no other" {
	allocctl_helps
	# run by bash with the built allocctl on PATH (its tunables), the daemon's list stubbed
	PATH="$BUILD:$PATH" run "$CHECK" completion "$ROOT/cli/allocctl.bash-completion" \
		"$T/help" "$T/cmdhelp"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "allocctl's --help and usages name every option and choice its parser takes" {
	allocctl_helps
	# the options from cli/allocctl.c's comparisons; the choices (--res fine|coarse|auto)
	# each given to allocctl, and another value's refusal, which lists what it expects
	run "$CHECK" parser "$ROOT/cli/allocctl.c" "$T/help" "$T/cmdhelp" "$ALLOCCTL"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "README's Limits and ctld/README.md state the figures liballoc's #defines give" {
	run "$CHECK" limits "$README" "$ROOT/ctld/README.md" "$ROOT"
	echo "$output"
	[ "$status" -eq 0 ]
}

# sources_copy DIR: the headers and sources readme_check.py's limits reads, copied under DIR
sources_copy() {
	local d
	for d in liballoc/include liballoc/src proto ctld; do
		mkdir -p "$1/$d"
		cp "$ROOT/$d"/*.[ch] "$1/$d/"
	done
}

@test "a figure of a #define the tree has twice comes from its own file's, or is refused" {
	# ctld/metrics.c's scrapes in 3 ms slices: ctld/README.md's "2 ms slices" must fail,
	# though discovery and the history keep their own SLICE_NS at 2 ms
	sources_copy "$T/a"
	sed -i -E 's/^(#define SLICE_NS[[:space:]]+)2000000ull/\13000000ull/' "$T/a/ctld/metrics.c"
	grep -q '^#define SLICE_NS *3000000ull' "$T/a/ctld/metrics.c"
	run "$CHECK" limits "$README" "$ROOT/ctld/README.md" "$T/a"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == "ctld/README.md says '2' in 'response is produced in"*"; the code's #define gives '3'" ]]
	# a second definition of a name LIMITS takes by its bare name: refused, whatever its value
	sources_copy "$T/b"
	printf '#define TC_GC_EVENTS %s\n' "$(grep -hoE '^#define TC_GC_EVENTS +[0-9]+' \
		"$ROOT"/liballoc/src/*.[ch] | awk '{ print $3 }')" >>"$T/b/ctld/pool.c"
	run "$CHECK" limits "$README" "$ROOT/ctld/README.md" "$T/b"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == "TC_GC_EVENTS is defined 2 times ("*"ctld/pool.c): readme_check.py's LIMITS must"* ]]
}

@test "ctld/README.md's synopsis has allocctld's flags and no other, its metric names are exported" {
	local flags listed names missing= bad= f n
	flags=$("$CTLD" --help | grep -oE '(^|[ ,])--[a-z][a-z-]*' | tr -d ' ,' | sort -u)
	[[ "$flags" == *--metrics-mode* ]]
	# the synopsis: the first ``` block
	listed=$(awk '/^```/ { n++; next } n == 1' "$ROOT/ctld/README.md" | grep -oE -- '--[a-z][a-z-]*' |
		sort -u)
	for f in $flags; do
		grep -qx -- "$f" <<<"$listed" || missing+=" $f"
	done
	for f in $listed; do
		grep -qx -- "$f" <<<"$flags" || bad+=" $f"
	done
	[ -z "$missing$bad" ] || {
		echo "not in ctld/README.md's synopsis:$missing; not allocctld's:$bad"
		false
	}
	# every name there a family of a daemon's /metrics (the per-pid mode has the ctld_ ones)
	: >"$T/families"
	scrape_families
	names=$("$CHECK" names "$ROOT/ctld/README.md")
	[[ "$names" == *liballoc_ctld_loop_lag_max_seconds* ]]
	for n in $names; do
		grep -qx "$n" "$T/families" || bad+=" $n"
	done
	[ -z "$bad" ] || { echo "ctld/README.md names metrics allocctld does not export:$bad"; false; }
}
