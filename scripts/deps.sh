#!/bin/sh
# deps.sh GROUP... — install the Debian packages a make target needs, only when missing.
# Groups: build (liballoc, allocctld, allocctl), demo (make demo: what demo.sh runs),
# test (make test: every program a suite runs, checked against a fresh debootstrap of
# Debian 12), bench (make bench), fuzz (clang + libFuzzer runtime). One apt-get step,
# announced with the packages and their number, apt's own progress shown.
set -eu

pkgs_build="gcc make pkg-config clang-format libc6-dev libevent-dev libprotobuf-c-dev protobuf-c-compiler liburcu-dev libsystemd-dev libinih-dev libjansson-dev"
pkgs_demo="python3"
pkgs_test="libcriterion-dev libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 bats perl procps util-linux curl tmux python3 python3-yaml python3-jsonschema libpython3.11-testsuite git sqlite3 bash man-db redis-server redis-tools clang libclang-rt-14-dev llvm chromium prometheus nginx-light strace"
pkgs_bench="libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 gnuplot-nox redis-server redis-tools sqlite3 python3 libpython3.11-testsuite valgrind strace time"
pkgs_fuzz="clang libclang-rt-14-dev llvm"

want=""
for g in "$@"; do
	case "$g" in
	build) want="$want $pkgs_build" ;;
	demo) want="$want $pkgs_demo" ;;
	test) want="$want $pkgs_test" ;;
	bench) want="$want $pkgs_bench" ;;
	fuzz) want="$want $pkgs_fuzz" ;;
	*) echo "deps.sh: unknown group '$g' (build, demo, test, bench, fuzz)" >&2; exit 2 ;;
	esac
done

missing=""
for p in $want; do
	case " $missing " in *" $p "*) continue ;; esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

n=$(echo $missing | wc -w)
echo "==> installing $n missing Debian package(s) and what they depend on:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: need root to install:$missing (run: sudo apt-get install$missing)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# One installer at a time: parallel builds (or several checkouts) may call this at once.
exec 9>/var/lock/liballoc-deps.lock
flock 9
# Refresh the package lists once if they are absent or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
	echo "==> apt-get update"
	apt-get update -q
fi
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 $missing
echo "==> installed:$missing"
