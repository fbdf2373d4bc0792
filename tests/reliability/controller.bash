#!/bin/bash
# controller.bash SOCKET PID STOPFILE OUT — the live operator of the soak suite: every
# 100 ms, until STOPFILE exists or PID is gone, it sets a mix of tunables on PID
# (mmap_threshold, trim_threshold, tcache_max_bytes, madvise_throttle, idle_heap_release,
# decay_ms, mmap_dynamic, direct_cache_bytes) and asks for a trim, a release of idle heaps
# and a flush of the thread caches, all through allocctl and the daemon. Each tunable
# steps through its values from a random start, so every value of every tunable is set
# within 5 rounds (the longest list) and again every 5 rounds after, while the mix of
# values changes from round to round (the lists' lengths differ). It samples PID's VmRSS
# each round. Writes the rounds done so far to OUT.rounds after each round, and
# "rounds=N commands=N failures=N max_rss_kb=N" to OUT at the end; every failed allocctl
# call is appended to OUT.fail with its output.
set -u
sock=$1 pid=$2 stop=$3 out=$4
allocctl=${ALLOCCTL:-$BUILD/allocctl}
rounds=0 commands=0 failures=0 max_rss=0
# pick K VALUES...: tunable K's value this round: the next one after last round's
# (start[K], drawn once below, is where tunable K begins)
pick() {
	local k=$1
	shift
	local a=("$@")
	echo "${a[(start[k] + rounds) % ${#a[@]}]}"
}
call() {
	local o rc=0 try
	commands=$((commands + 1))
	for try in 1 2 3; do
		rc=0
		# a minute to answer: a busy machine is slow (a failure is a wrong answer)
		o=$("$allocctl" --socket "$sock" --timeout 60s "$@" 2>&1) || rc=$?
		# 126/127: allocctl itself could not be executed (e.g. being relinked by a
		# parallel build): not a result of the command, try again
		[ $rc -eq 126 ] || [ $rc -eq 127 ] || break
		sleep 0.2
	done
	if [ $rc -ne 0 ]; then
		# the process exiting at the end of the run is not a failure of the command (it
		# removes its segment at exit, a moment before it is gone)
		local i
		for i in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || return 0
			sleep 0.1
		done
		failures=$((failures + 1))
		printf '%s: allocctl %s\n%s\n' "$(date +%T.%N)" "$*" "$o" >>"$out.fail"
	fi
}
RANDOM=$$
start=()
for k in 0 1 2 3 4 5 6 7; do start[k]=$RANDOM; done
while [ ! -e "$stop" ] && kill -0 "$pid" 2>/dev/null; do
	rounds=$((rounds + 1))
	call set "$pid" \
		"mmap_threshold=$(pick 0 64K 128K 256K 1M 4M)" \
		"trim_threshold=$(pick 1 64K 128K 1M 16M)" \
		"tcache_max_bytes=$(pick 2 0 16K 64K 256K)" \
		"madvise_throttle=$(pick 3 on off)" \
		"idle_heap_release=$(pick 4 on off)" \
		"decay_ms=$(pick 5 0 100 1000 10000)" \
		"mmap_dynamic=$(pick 6 on off)" \
		"direct_cache_bytes=$(pick 7 0 16M 64M)"
	call trim "$pid"
	call release "$pid"
	call flush "$pid"
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
	[ "${rss:-0}" -gt "$max_rss" ] && max_rss=$rss
	echo "$rounds" >"$out.rounds"
	sleep 0.1
done
echo "rounds=$rounds commands=$commands failures=$failures max_rss_kb=$max_rss" >"$out"
