#!/usr/bin/env bats
# ctld_dashboard.bats — the page served by allocctld, in headless Chromium (Debian's
# chromium, driven over the DevTools protocol by tests/browser/cdp.py: python3 alone, no npm).
# One scenario (tests/browser/dashboard_test.py, ~20 s) runs once for the file: a private
# daemon with one profile (caches: cache-svc), two services under the preload (cache-svc,
# web-svc), the page loaded, grouped by profile, a trim issued with allocctl, a reload, the
# daemon stopped and started again. Each check below is one of
# its results; screenshots are left in $BUILD/browser/ (dashboard-1..4-*.png).
# san: skip

setup_file() {
	: "${BUILD:?run through make test}"
	export RESULTS="$BATS_FILE_TMPDIR/results.jsonl"
	python3 "$BATS_TEST_DIRNAME/../browser/dashboard_test.py" "$RESULTS" \
		>"$BATS_FILE_TMPDIR/scenario.log" 2>&1 || true
}

# result NAME: the check passed (its detail is printed either way).
result() {
	local rc=0
	python3 - "$RESULTS" "$1" <<'EOF' || rc=$?
import json, sys
path, name = sys.argv[1], sys.argv[2]
try:
    rows = [json.loads(l) for l in open(path)]
except OSError as e:
    print("no results (%s): the scenario did not run" % e)
    sys.exit(1)
harness = [r for r in rows if r["name"] == "harness"]
for r in harness:
    print("the scenario stopped early:", r["detail"])
mine = [r for r in rows if r["name"] == name]
if not mine:
    print("check %s did not run" % name)
    sys.exit(1)
for r in mine:
    print(("ok: " if r["ok"] else "FAILED: ") + r["detail"])
sys.exit(0 if all(r["ok"] for r in mine) else 1)
EOF
	# (rc is taken by '||' above: a plain failing command would end the test under bats's
	# errexit before the scenario's log is shown)
	[ $rc -eq 0 ] || sed 's/^/  scenario: /' "$BATS_FILE_TMPDIR/scenario.log" | tail -40
	return $rc
}

@test "the page loads with no console error, exception or failed request" {
	result page_loads
	result no_console_errors_on_load
}

@test "each of two processes gets a chart of its memory split, legend and title" {
	for s in cache-svc web-svc; do
		result "chart_$s"
		result "series_$s"
		result "legend_$s"
		result "title_$s"
	done
}

@test "the stacked figures and the RSS line are drawn on each canvas, with each process's own values" {
	result drawn_cache-svc
	result drawn_web-svc
	result values_per_process
	result reclaimable_values
}

@test "the table groups the processes by service, sorts by a column and filters" {
	result grouped_by_service
	result sortable
	result filterable
}

@test "grouped by profile; the profile's action is a marker on its process's chart, hover says which profile did what" {
	result grouped_by_profile
	result profile_marker
	result profile_marker_hover
}

@test "a trim through allocctl is a marker within two sample periods; hover says who, what, how much; reclaimable falls" {
	result allocctl_trim
	result trim_marker_in_two_periods
	result trim_marker_position
	result trim_marker_hover
	result trim_empties_reclaimable
}

@test "a reload keeps the history and the markers" {
	result reload_keeps_history
	result reload_keeps_markers
	result no_console_errors_after_reload
}

@test "the page says when the daemon is down, keeps its charts, and recovers when it is back (the restart marked, the outage a gap)" {
	result down_keeps_charts
	result recovers_after_restart
	result charts_go_on_after_restart
	result restart_noticed
	result no_exceptions_across_restart
}

@test "screenshots are saved under build/browser" {
	for n in 1-two-services 1b-by-profile 2-trim-marker 3-daemon-down 4-after-restart; do
		[ -s "$BUILD/browser/dashboard-$n.png" ] || { echo "missing dashboard-$n.png"; false; }
	done
}
