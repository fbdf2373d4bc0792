# crossuid.bash — what a test runs as another uid (nobody, or a uid of its own) must be
# reachable by that uid, wherever the checkout is. A new user's checkout sits under /root
# (mode 0700): a program run as nobody cannot execute build/allocctl, preload
# build/liballoc.so or reach a directory under build/run. So a test that runs anything as
# another uid keeps its private directory where every uid can traverse (xuid_mkdir), and
# points the variables of the programs and libraries that uid runs at copies in that
# directory (xuid_share). The copies go with the directory, which the test's teardown
# removes as before.
#
#   T=$(xuid_mkdir NAME)        a new directory /tmp/liballoc-NAME.XXXXXX (or under
#                               $LIBALLOC_XUID_BASE), mode 0711: others may traverse it to
#                               what they are given, not list it; fails with the reason if
#                               nobody cannot reach it
#   xuid_share DIR VAR...       copy the file each VAR names into DIR/bin (0755) and set VAR
#                               to the copy (e.g. xuid_share "$T" LIBALLOC_SO CTLCLIENT)
#   xuid_copy DIR FILE...       copy each FILE into DIR/bin (0755), as DIR/bin/BASENAME (a
#                               FILE already there is left as it is)
#   xuid_check USER PATH...     fail, naming the first directory in the way, unless USER
#                               can reach each PATH
#   as_user USER CMD...         run CMD as USER (a name or a bare uid) with USER's group
#                               and no supplementary groups
#   as_nobody CMD...            as_user nobody CMD...
#   "$AS_USER" USER CMD... &     the same as a command: in the background (or under prlimit,
#                               timeout...) $! is CMD itself, not a subshell running it
# Sourced by ctld/tools/e2e.bash (ctld_setup --other-uid; tests/security/common.bash
# builds on it), tests/reliability/common.bash (rel_setup --other-uid) and
# tests/cli/helpers.bash (tests/e2e/cli_live.bats, tests/policy/common.bash), and by
# ctld/tools/bench-common.sh (the attack bench runs its clients as nobody).
AS_USER="$ROOT/tests/helpers/as-user"

as_user() {
	"$AS_USER" "$@"
}

as_nobody() {
	"$AS_USER" nobody "$@"
}

# xuid_check USER PATH...
xuid_check() {
	local user=$1 p d
	shift
	for p in "$@"; do
		as_user "$user" test -e "$p" && continue
		# name the first ancestor USER cannot traverse
		d=$p
		while [ "$d" != / ] && [ -n "$d" ]; do
			d=$(dirname "$d")
			if ! as_user "$user" test -x "$d"; then
				echo "xuid_check: $user cannot reach $p: $d is $(stat -c '%A %U' "$d")" >&2
				return 1
			fi
		done
		echo "xuid_check: $user cannot reach $p" >&2
		return 1
	done
}

# xuid_mkdir NAME: prints the new directory
xuid_mkdir() {
	local base=${LIBALLOC_XUID_BASE:-/tmp} d
	d=$(mktemp -d "$base/liballoc-$1.XXXXXX") || return 1
	chmod 0711 "$d"
	xuid_check nobody "$d" || {
		rm -rf "$d"
		echo "xuid_mkdir: $base must be traversable by every uid (set LIBALLOC_XUID_BASE)" >&2
		return 1
	}
	echo "$d"
}

# xuid_copy DIR FILE...
xuid_copy() {
	local dir=$1 src
	shift
	mkdir -p "$dir/bin"
	chmod 0755 "$dir/bin"
	for src in "$@"; do
		[ -f "$src" ] || {
			echo "xuid_copy: $src is not a file" >&2
			return 1
		}
		[ "$src" -ef "$dir/bin/${src##*/}" ] && continue
		install -m 0755 "$src" "$dir/bin/" || return 1
	done
}

# xuid_share DIR VAR...
xuid_share() {
	local dir=$1 var src
	shift
	for var in "$@"; do
		src=${!var:?xuid_share: $var is not set}
		xuid_copy "$dir" "$src" || return 1
		printf -v "$var" '%s' "$dir/bin/${src##*/}"
	done
}
