#!/usr/bin/env bats
# san: skip
# figures.bats — the memory figures (README "Memory figures") against what the kernel says,
# for an idle preloaded sleep, a workload that freed most of its memory, a process holding
# cached direct mappings it touched only in part, and nginx's master and workers: free
# resident <= RssAnon, the allocator's resident bytes within RSS, and after flush, release
# and trim the RSS drop is within 5% (or 256 KiB) of what reclaimable said and of what the
# three commands said they released (/proc/PID/status and /proc/PID/smaps_rollup). The
# workloads are sized by what they must leave behind (checked first), never by time.
load ../cli/helpers

CTLD="$BUILD/allocctld"
SEGWORK="$BUILD/tests/segwork"

setup_file() {
	[ -x "$CTLD" ] && [ -e "$LIBALLOC_SO" ] || return 0
	export FIG_DIR
	FIG_DIR=$(mktemp -d /tmp/allocctl-fig.XXXXXX)
	chmod 700 "$FIG_DIR"
	live_daemon "$FIG_DIR"
}

teardown_file() {
	[ -z "${FIG_DIR:-}" ] || live_daemon_stop "$FIG_DIR"
}

setup() {
	[ -x "$CTLD" ] || skip "allocctld is not built ($CTLD)"
	[ -e "$LIBALLOC_SO" ] || skip "liballoc.so is not built ($LIBALLOC_SO)"
	[ -s "$FIG_DIR/ready" ] || { cat "$FIG_DIR/ctld.log" >&2; false; }
	cli_tmp
	export ALLOCCTL_SOCKET="$FIG_DIR/ctl.sock"
	export LIBALLOC_RUN_DIR="$FIG_DIR/seg"
}

teardown() {
	if [ -n "${NGINX_PID:-}" ]; then
		kill -QUIT "$NGINX_PID" 2>/dev/null
		for _ in $(seq 200); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.05; done
		kill -9 "$NGINX_PID" 2>/dev/null || true
	fi
	cli_cleanup
}

listed() { "$ALLOCCTL" ps --json | json_check "$1 in [p['pid'] for p in d['processes']]" 2>/dev/null; }

# status PID KEY / rollup PID KEY: a /proc figure in bytes
status() { awk -v k="$2:" '$1 == k { print $2 * 1024 }' "/proc/$1/status"; }
rollup() { awk -v k="$2:" '$1 == k { print $2 * 1024 }' "/proc/$1/smaps_rollup"; }

# memory PID FIGURE: one memory figure of the process as allocctl reports it (bytes)
memory() {
	"$ALLOCCTL" --json stats "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['process']['memory']['$2'])"
}

# near A B WHAT: A and B within 5% of the larger, or 256 KiB
near() {
	local a=$1 b=$2 d m
	d=$((a > b ? a - b : b - a))
	m=$((a > b ? a : b))
	m=$((m * 5 / 100))
	[ "$m" -ge 262144 ] || m=262144
	echo "$3: $a vs $b (difference $d, allowed $m)" >&2
	[ "$d" -le "$m" ]
}

# check PID: the figures against /proc, then flush, release and trim against the RSS drop.
# Sets RECLAIMABLE and RELEASED for the caller's own assertions.
check() {
	local pid=$1 fr res rec meta inuse rq rd ca fg
	read -r fr res rec meta inuse rq rd ca fg < <("$ALLOCCTL" --json stats "$pid" | python3 -c "
import json, sys
d = json.load(sys.stdin)
m, t = d['process']['memory'], d['totals']
print(m['free_resident_bytes'], m['resident_bytes'], m['reclaimable_bytes'], m['metadata_bytes'],
      m['in_use_bytes'], t['remote_frees_queued'], t['remote_frees_drained'],
      m['cached_bytes'], m['fragmented_bytes'])")
	local anon0 rss0 ranon0 rrss0
	anon0=$(status "$pid" RssAnon)
	rss0=$(status "$pid" VmRSS)
	ranon0=$(rollup "$pid" Anonymous)
	rrss0=$(rollup "$pid" Rss)
	echo "pid $pid: free resident $fr, reclaimable $rec, allocator resident $res (metadata $meta, in use $inuse, cached $ca, fragmented $fg, remote frees queued $rq drained $rd); RssAnon $anon0, VmRSS $rss0, smaps_rollup Anonymous $ranon0 Rss $rrss0" >&2
	[ "$fr" -le "$anon0" ]
	[ "$fr" -le "$ranon0" ]
	[ "$res" -le $((rrss0 + 262144)) ]
	local released=0 verb out
	for verb in flush release trim; do
		out=$("$ALLOCCTL" --json "$verb" "$pid")
		released=$((released + $(python3 -c "import json,sys; print(json.loads(sys.argv[1])['results'][0]['bytes_released'])" "$out")))
	done
	local anon1 rss1 rrss1
	anon1=$(status "$pid" RssAnon)
	rss1=$(status "$pid" VmRSS)
	rrss1=$(rollup "$pid" Rss)
	near $((anon0 - anon1)) "$rec" "pid $pid: RssAnon drop vs reclaimable"
	near $((rss0 - rss1)) "$rec" "pid $pid: VmRSS drop vs reclaimable"
	near $((rrss0 - rrss1)) "$rec" "pid $pid: smaps_rollup Rss drop vs reclaimable"
	near $((anon0 - anon1)) "$released" "pid $pid: RssAnon drop vs released"
	RECLAIMABLE=$rec
	RELEASED=$released
}

@test "an idle preloaded sleep: nothing reclaimable, free resident within RssAnon" {
	LD_PRELOAD="$LIBALLOC_SO" sleep 1000 3>&- &
	local pid=$!
	CLI_PIDS+=("$pid")
	wait_for listed "$pid"
	check "$pid"
	[ "$RECLAIMABLE" -le 262144 ]
	# what the allocator holds is a small part of what sleep's RSS is
	[ "$(memory "$pid" resident_bytes)" -le "$(status "$pid" RssAnon)" ]
}

@test "a workload that freed most of its memory: reclaimable is the RSS that leaves" {
	local out="$CLI_TMP/workload.out"
	LIBALLOC_DECAY_MS=0 LIBALLOC_TRIM_THRESHOLD=1G LIBALLOC_IDLE_HEAP_RELEASE=0 \
		LIBALLOC_MMAP_THRESHOLD=32M LD_PRELOAD="$LIBALLOC_SO" \
		"$WORKLOAD" -t 2 -s 96M -d 0.2 -k 4M >"$out" 2>&1 3>&- &
	local pid=$!
	CLI_PIDS+=("$pid")
	wait_for grep -q '^quiet' "$out"
	wait_for listed "$pid"
	# what it must leave behind: most of the 96 MiB free and resident
	[ "$(memory "$pid" reclaimable_bytes)" -ge $((48 << 20)) ]
	check "$pid"
	[ "$RELEASED" -ge $((48 << 20)) ]
}

# cache_figures PID WHEN FREE: the mapping cache holds 64 MiB and free resident memory is
# FREE bytes (up to 1 MiB more: the heaps' own free pages), as allocctl --json stats says
cache_figures() {
	python3 -c "
import json, sys
d = json.loads(sys.argv[1])
cache = d['totals']['direct_cache_bytes']
fr = d['process']['memory']['free_resident_bytes']
lo = int(sys.argv[3])
print('%s: mapping cache %d bytes, free resident %d' % (sys.argv[2], cache, fr), file=sys.stderr)
assert cache == 64 << 20, cache
assert lo <= fr <= lo + (1 << 20), fr
" "$("$ALLOCCTL" --json stats "$1")" "$2" "$3"
}

@test "cached direct mappings touched in part count whole, then what was touched once measured" {
	local in="$CLI_TMP/in" out="$CLI_TMP/out"
	mkfifo "$in"
	LIBALLOC_MMAP_THRESHOLD=1M LIBALLOC_DECAY_MS=0 LD_PRELOAD="$LIBALLOC_SO" \
		"$SEGWORK" <"$in" >"$out" 2>&1 3>&- &
	local pid=$!
	CLI_PIDS+=("$pid")
	exec 7>"$in"
	wait_for grep -q "^$pid ready" "$out"
	# one mapping freed (unmapped: nothing reuses mappings yet), then 16 of 4 MiB, the first
	# where it would have served (mappings are recycled from then on), 1 MiB of each
	# written, then freed into the mapping cache
	echo "alloc 4M 1" >&7
	echo "free" >&7
	echo "alloc 4M 16 1M" >&7
	echo "free" >&7
	wait_for grep -q "^$pid ok 4 free" "$out"
	wait_for listed "$pid"
	# counted whole until measured, and measured without a command or a decay pass (none
	# runs here): the control thread measures a second after the frees (MEASURE_SOON_NS),
	# so what the segment says is what was touched (the whole 64 MiB, which a process read
	# before that second shows, is not checked: whether the reader comes first is timing)
	wait_for cache_figures "$pid" measured $((16 << 20))
	# ... and the refresh command measures at once: the same
	local seg
	seg=$(ls "$LIBALLOC_RUN_DIR"/liballoc."$pid"*.seg)
	"$BUILD/tests/segtool" cmd "$seg" refresh | grep -qx 'status_text=ok'
	cache_figures "$pid" measured $((16 << 20))
	check "$pid"
	[ "$RELEASED" -ge $((16 << 20)) ]
	exec 7>&-
}

@test "nginx, master and workers: each process's figures hold" {
	command -v nginx >/dev/null || skip "nginx is not installed (nginx-light, scripts/deps.sh test)"
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$CLI_TMP/nginx/tmp" "$CLI_TMP/nginx/logs"
	local user=""
	[ "$(id -u)" = 0 ] && user="user nobody $(id -gn nobody);"
	cat >"$CLI_TMP/nginx/nginx.conf" <<EOF
$user
daemon off;
master_process on;
worker_processes 2;
pid $CLI_TMP/nginx/nginx.pid;
error_log $CLI_TMP/nginx/logs/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $CLI_TMP/nginx/tmp/body;
	proxy_temp_path $CLI_TMP/nginx/tmp/proxy;
	fastcgi_temp_path $CLI_TMP/nginx/tmp/fastcgi;
	uwsgi_temp_path $CLI_TMP/nginx/tmp/uwsgi;
	scgi_temp_path $CLI_TMP/nginx/tmp/scgi;
	server {
		listen 127.0.0.1:$port;
		location / { return 200 "hello\n"; }
	}
}
EOF
	LD_PRELOAD="$LIBALLOC_SO" nginx -p "$CLI_TMP/nginx" -c "$CLI_TMP/nginx/nginx.conf" \
		>"$CLI_TMP/nginx/out" 2>&1 3>&- &
	NGINX_PID=$!
	wait_for curl -sf "http://127.0.0.1:$port/" -o /dev/null
	for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/" -o /dev/null; done
	local pids
	pids="$NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' ')"
	[ "$(wc -w <<<"$pids")" -ge 3 ]
	for p in $pids; do wait_for listed "$p"; done
	for p in $pids; do check "$p"; done
}
