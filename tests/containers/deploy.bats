#!/usr/bin/env bats
# deploy.bats — issue 22: deploy/ checked against the real thing. The Prometheus rules pass
# promtool's check and its unit tests (series in, which alerts fire); the manifests parse,
# pass only flags `allocctld --help` lists and a configuration `--check-config` accepts,
# and agree on their paths; every metric the rules and the dashboard name is one a live
# allocctld exports (scraped in both metrics modes, with a profile, a policy and an action
# so that their families exist); the dashboard's queries are valid PromQL. The checker is
# shown to fail on a broken copy.
# san: skip

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/tests/containers/common.bash"
	ns_setup
	DEPLOY="$ROOT/deploy"
	CHECK="$ROOT/tests/containers/deploycheck.py"
	command -v promtool >/dev/null || skip "promtool missing (scripts/deps.sh test installs prometheus)"
}

teardown() {
	ns_teardown
}

@test "alerting and recording rules: promtool check and unit tests" {
	run promtool check rules "$DEPLOY/prometheus/liballoc-rules.yml"
	[ "$status" -eq 0 ]
	[[ "$output" == *"SUCCESS: 21 rules found"* ]]
	# promtool resolves rule_files relative to the test file
	run promtool test rules "$DEPLOY/prometheus/liballoc-rules.test.yml"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *SUCCESS* ]]
	# and the tests can fail: an alert expected that does not fire
	mkdir "$T/p"
	cp "$DEPLOY/prometheus/liballoc-rules.yml" "$T/p/"
	sed 's/eval_time: 45m/eval_time: 25m/' "$DEPLOY/prometheus/liballoc-rules.test.yml" >"$T/p/t.yml"
	run promtool test rules "$T/p/t.yml"
	[ "$status" -ne 0 ]
	[[ "$output" == *LiballocFreeResidentHigh* ]]
	# the scrape configuration (Debian's promtool has no Kubernetes discovery: the same job
	# with a static target stands in for it) loads the rules
	python3 - "$DEPLOY/prometheus/scrape-allocctld.yml" "$T/p/scrape.yml" <<-'PY'
		import sys, yaml
		c = yaml.safe_load(open(sys.argv[1]))
		for j in c["scrape_configs"]:
		    assert j.pop("kubernetes_sd_configs")[0]["role"] == "pod"
		    j["static_configs"] = [{"targets": ["127.0.0.1:9467"]}]
		yaml.safe_dump(c, open(sys.argv[2], "w"))
	PY
	run promtool check config "$T/p/scrape.yml"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"SUCCESS: 1 rule files found"* ]]
}

@test "manifests: flags, configuration and paths the daemon and the pods agree on" {
	"$CTLD" --help >"$T/help" 2>&1
	run python3 "$CHECK" manifests "$DEPLOY" "$T/help" "$T/allocctld.conf"
	echo "$output"
	[ "$status" -eq 0 ]
	run "$CTLD" --config "$T/allocctld.conf" --check-config
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "configuration ok: socket /run/ctl/allocctld/ctl.sock"* ]]
	# a broken copy is caught: a flag the daemon does not have, a uid it does not provide
	cp -r "$DEPLOY" "$T/d"
	sed -i 's/- --no-default-dirs/- --no-such-flag/' "$T/d/kubernetes/sidecar.yaml"
	sed -i 's/provide_uid_dirs = 0, 1000, 65532/provide_uid_dirs = 0, 65532/' \
		"$T/d/kubernetes/allocctld-daemonset.yaml"
	run python3 "$CHECK" manifests "$T/d" "$T/help" "$T/c2"
	[ "$status" -eq 1 ]
	[[ "$output" == *"allocctld flag --no-such-flag is not in allocctld --help"* ]]
	[[ "$output" == *"uid 1000 is not in provide_uid_dirs"* ]]
	# a configuration key the daemon does not know is refused by --check-config
	printf '[daemon]\nmetrics_mode = service\nno_such_key = 1\n' >"$T/bad.conf"
	run "$CTLD" --config "$T/bad.conf" --check-config
	[ "$status" -ne 0 ]
	[[ "$output" == *"no_such_key"* ]]
}

@test "rules and dashboard name only metrics a live allocctld exports, in both modes" {
	cat >"$T/conf" <<-EOF
		[profile sleepers]
		name = sleep
		decay_ms = 5s
		[policy idle-guard]
		on = idle
		for = 1h
		actions = trim
		dry_run = yes
	EOF
	local names="$T/names"
	: >"$names"
	for mode in pid service; do
		start_daemon --config "$T/conf" --metrics-mode "$mode"
		LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" sleep 300 >/dev/null 2>&1 3>&- &
		local p=$!
		echo "$p" >>"$T/pids"
		wait_listed "$p" present 30
		# an action, so that liballoc_ctld_actions_total has a series
		"$ALLOCCTL" --socket "$SOCK" trim "$p" >/dev/null
		metrics >"$T/m.$mode"
		promtool check metrics <"$T/m.$mode"
		sed -n 's/^\([a-z_:][a-z0-9_:]*\)[{ ].*/\1/p' "$T/m.$mode" >>"$names"
		kill "$p"
		kill "$DPID"
		wait "$DPID" || true
		DPID=
	done
	grep -q '^liballoc_service_processes{exe="/usr/bin/sleep",profile="sleepers"} 1$' "$T/m.service"
	grep -q '^liballoc_control_failed{pid=' "$T/m.pid"
	run python3 "$CHECK" names "$DEPLOY" "$names"
	echo "$output"
	[ "$status" -eq 0 ]
	# the checker fails on a name that does not exist
	cp -r "$DEPLOY" "$T/d"
	sed -i 's/liballoc_reclaimable_bytes{/liballoc_reclaimable{/' "$T/d/grafana/liballoc-dashboard.json"
	run python3 "$CHECK" names "$T/d" "$names"
	[ "$status" -eq 1 ]
	[[ "$output" == *"liballoc_reclaimable is not a metric allocctld exports"* ]]
	# the dashboard's queries are valid PromQL (as recording rules, for promtool)
	run python3 "$CHECK" dashboard-rules "$DEPLOY" "$T/dash-rules.yml"
	[ "$status" -eq 0 ]
	run promtool check rules "$T/dash-rules.yml"
	echo "$output"
	[ "$status" -eq 0 ]
}
