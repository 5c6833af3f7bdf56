// Command dashboard writes manifests/monitoring/grafana-dashboard.json, the Grafana dashboard for
// the metrics `mysqlctl watch --metrics-addr` serves: `go run ./hack/dashboard > FILE`. The
// panels are declared here, so that the JSON stays consistent (ids, grid positions, the
// datasource and the namespace and cluster variables on every query); the metrics package's
// TestGrafanaDashboard checks the file: every query parses and names only exported metrics.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// sel is the selector every query carries: the dashboard's namespace and cluster variables.
const sel = `namespace=~"$namespace", cluster=~"$cluster"`

type target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	RefID        string `json:"refId"`
}

type panel struct {
	title, kind, unit, help string
	targets                 [][2]string // expr, legend
	w, h                    int
}

func q(expr, legend string) [2]string { return [2]string{expr, legend} }

var panels = []panel{
	{title: "HA state", kind: "state-timeline", w: 24, h: 6, help: "status.ha.state of each cluster: Healthy, Suspected, FailoverRequired, FailoverInProgress, Degraded.",
		targets: [][2]string{q(`max by (namespace, cluster, state) (mysqlctl_cluster_ha_state{`+sel+`}) == 1`, "{{namespace}}/{{cluster}} {{state}}")}},
	{title: "Primary writable", kind: "stat", w: 6, h: 4, help: "1 when the supervisor's last check found the primary answering and writable.",
		targets: [][2]string{q(`min by (namespace, cluster) (mysqlctl_cluster_available{`+sel+`})`, "{{namespace}}/{{cluster}}")}},
	{title: "Instances up / wanted", kind: "stat", w: 6, h: 4, help: "Instances that answered the last observation, against spec.replicas.",
		targets: [][2]string{
			q(`max by (namespace, cluster) (mysqlctl_cluster_instances_up{`+sel+`})`, "{{namespace}}/{{cluster}} up"),
			q(`max by (namespace, cluster) (mysqlctl_cluster_instances{`+sel+`})`, "{{namespace}}/{{cluster}} wanted")}},
	{title: "Quarantined (errant) instances", kind: "stat", w: 6, h: 4, help: "Instances holding transactions the primary lacks: `rebuild`, or watch re-seeds a proven unacknowledged tail.",
		targets: [][2]string{q(`max by (namespace, cluster) (mysqlctl_cluster_errant_instances{`+sel+`})`, "{{namespace}}/{{cluster}}")}},
	{title: "Semi-sync active / required", kind: "stat", w: 6, h: 4, help: "The primary waits for acknowledgements (1) where the spec asks for semi-sync (1).",
		targets: [][2]string{
			q(`max by (namespace, cluster) (mysqlctl_semisync_source_active{`+sel+`})`, "{{namespace}}/{{cluster}} active"),
			q(`max by (namespace, cluster) (mysqlctl_cluster_semisync_required{`+sel+`})`, "{{namespace}}/{{cluster}} required")}},
	{title: "Failovers and switchovers (in the range)", kind: "bargauge", w: 8, h: 7, help: "Finished operations by result, counted once from each cluster's history.",
		targets: [][2]string{
			q(`sum by (namespace, cluster, result) (increase(mysqlctl_failovers_total{`+sel+`}[$__range]))`, "failover {{cluster}} {{result}}"),
			q(`sum by (namespace, cluster, result) (increase(mysqlctl_switchovers_total{`+sel+`}[$__range]))`, "switchover {{cluster}} {{result}}"),
			q(`sum by (namespace, cluster) (increase(mysqlctl_failovers_refused_total{`+sel+`}[$__range]))`, "refused {{cluster}}")}},
	{title: "Failover duration", kind: "timeseries", unit: "s", w: 8, h: 7, help: "p50 and p95 of finished failovers, and of the time from the first failed check to the decision.",
		targets: [][2]string{
			q(`histogram_quantile(0.5, sum by (le, namespace, cluster) (rate(mysqlctl_operation_duration_seconds_bucket{`+sel+`, type="failover"}[$__rate_interval])))`, "{{cluster}} failover p50"),
			q(`histogram_quantile(0.95, sum by (le, namespace, cluster) (rate(mysqlctl_operation_duration_seconds_bucket{`+sel+`, type="failover"}[$__rate_interval])))`, "{{cluster}} failover p95"),
			q(`histogram_quantile(0.95, sum by (le, namespace, cluster) (rate(mysqlctl_failover_decision_seconds_bucket{`+sel+`}[$__rate_interval])))`, "{{cluster}} decision p95")}},
	{title: "Operation duration by type", kind: "timeseries", unit: "s", w: 8, h: 7, help: "p95 of every finished operation type (switchover, upgrade, scale, rebuild, converge).",
		targets: [][2]string{q(`histogram_quantile(0.95, sum by (le, namespace, cluster, type) (rate(mysqlctl_operation_duration_seconds_bucket{`+sel+`}[$__rate_interval])))`, "{{cluster}} {{type}} p95")}},
	{title: "Check latency", kind: "timeseries", unit: "s", w: 12, h: 7, help: "Duration of one check of the primary: p50, p95, p99.",
		targets: [][2]string{
			q(`histogram_quantile(0.5, sum by (le, namespace, cluster) (rate(mysqlctl_check_duration_seconds_bucket{`+sel+`}[$__rate_interval])))`, "{{cluster}} p50"),
			q(`histogram_quantile(0.95, sum by (le, namespace, cluster) (rate(mysqlctl_check_duration_seconds_bucket{`+sel+`}[$__rate_interval])))`, "{{cluster}} p95"),
			q(`histogram_quantile(0.99, sum by (le, namespace, cluster) (rate(mysqlctl_check_duration_seconds_bucket{`+sel+`}[$__rate_interval])))`, "{{cluster}} p99")}},
	{title: "Failed checks and check staleness", kind: "timeseries", unit: "short", w: 12, h: 7, help: "Failed checks per second, and seconds since any process last checked the primary.",
		targets: [][2]string{
			q(`sum by (namespace, cluster) (rate(mysqlctl_check_errors_total{`+sel+`}[$__rate_interval]))`, "{{cluster}} failed checks/s"),
			q(`time() - max by (namespace, cluster) (mysqlctl_cluster_last_check_timestamp_seconds{`+sel+`})`, "{{cluster}} seconds since last check")}},
	{title: "Replication lag", kind: "timeseries", unit: "s", w: 12, h: 7, help: "Seconds_Behind_Master each replica reports; absent when unknown.",
		targets: [][2]string{q(`max by (namespace, cluster, instance) (mysqlctl_replication_lag_seconds{`+sel+`})`, "{{cluster}} {{instance}}")}},
	{title: "Replication threads", kind: "state-timeline", w: 12, h: 7, help: "1 when both the receiver (IO) and applier (SQL) threads of a replica run.",
		targets: [][2]string{q(`min by (namespace, cluster, instance) (mysqlctl_replication_io_running{`+sel+`}) * min by (namespace, cluster, instance) (mysqlctl_replication_sql_running{`+sel+`})`, "{{cluster}} {{instance}}")}},
	{title: "Primary and instances up", kind: "state-timeline", w: 12, h: 6, help: "Which instance is the recorded primary, and which answered the last observation.",
		targets: [][2]string{
			q(`max by (namespace, cluster, instance) (mysqlctl_instance_primary{`+sel+`}) == 1`, "{{cluster}} primary {{instance}}"),
			q(`max by (namespace, cluster, instance) (mysqlctl_instance_up{`+sel+`})`, "{{cluster}} {{instance}} up")}},
	{title: "Backup age", kind: "stat", unit: "s", w: 12, h: 6, help: "Seconds since each cluster's last successful backup finished (clusters that name a bucket), and backups running.",
		targets: [][2]string{
			q(`time() - max by (namespace, cluster) (mysqlctl_backup_last_success_timestamp_seconds{`+sel+`})`, "{{namespace}}/{{cluster}} last backup"),
			q(`max by (namespace, cluster) (mysqlctl_backup_running{`+sel+`})`, "{{namespace}}/{{cluster}} running")}},
	{title: "Supervision", kind: "stat", w: 12, h: 6, help: "Processes supervising each cluster (1 expected), and leaders of watch deployments.",
		targets: [][2]string{
			q(`sum by (namespace, cluster) (mysqlctl_cluster_supervised{`+sel+`})`, "{{namespace}}/{{cluster}} supervised by"),
			q(`sum(mysqlctl_leader)`, "leaders")}},
}

func main() {
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}
	var out []map[string]any
	x, y, rowH := 0, 0, 0
	for i, p := range panels {
		if x+p.w > 24 {
			x, y, rowH = 0, y+rowH, 0
		}
		var ts []target
		for j, t := range p.targets {
			ts = append(ts, target{Expr: t[0], LegendFormat: t[1], RefID: string(rune('A' + j))})
		}
		unit := p.unit
		if unit == "" {
			unit = "none"
		}
		out = append(out, map[string]any{
			"id": i + 1, "type": p.kind, "title": p.title, "description": p.help, "datasource": ds, "targets": ts,
			"gridPos":     map[string]int{"x": x, "y": y, "w": p.w, "h": p.h},
			"fieldConfig": map[string]any{"defaults": map[string]any{"unit": unit}, "overrides": []any{}},
		})
		x += p.w
		rowH = max(rowH, p.h)
	}
	variable := func(name, query string) map[string]any {
		return map[string]any{"name": name, "label": name, "type": "query", "datasource": ds, "query": query,
			"definition": query, "refresh": 2, "includeAll": true, "multi": true, "allValue": ".*",
			"current": map[string]any{"text": "All", "value": "$__all"}}
	}
	d := map[string]any{
		"uid": "mysqlctl-clusters", "title": "mysqlctl: MySQL clusters", "schemaVersion": 39, "version": 1,
		"tags": []string{"mysqlctl", "mysql"}, "timezone": "utc", "editable": true, "refresh": "30s",
		"time":        map[string]string{"from": "now-6h", "to": "now"},
		"description": "HA state, failovers, checks and replication of the clusters `mysqlctl watch` supervises.",
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
			variable("namespace", `label_values(mysqlctl_cluster_ha_state, namespace)`),
			variable("cluster", `label_values(mysqlctl_cluster_ha_state{namespace=~"$namespace"}, cluster)`),
		}},
		"panels": out,
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}
