package metrics

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/supervisor"
)

var key = client.ObjectKey{Namespace: "db", Name: "shop"}

func cluster(state v1.HAState, phase v1.Phase, history ...v1.OperationRecord) *v1.MysqlCluster {
	c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	c.Spec.Replicas = 3
	c.Status.HA = &v1.HAStatus{State: state}
	c.Status.Phase = phase
	c.Status.History = history
	return c
}

func record(id, typ, result string, finished time.Time, took time.Duration) v1.OperationRecord {
	return v1.OperationRecord{ID: id, Type: typ, Result: result, StartedAt: metav1.NewTime(finished.Add(-took)), FinishedAt: metav1.NewTime(finished), DurationMilliseconds: took.Milliseconds()}
}

func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// populated returns a Recorder fed one of everything, so that every family has series.
func populated(t *testing.T) *Recorder {
	t.Helper()
	m := New()
	now := time.Now().Add(time.Second)
	c := cluster(v1.HAHealthy, v1.PhaseRunning,
		record("failover-2", orchestrate.OperationFailover, "Succeeded", now, 3*time.Second),
		record("switchover-1", orchestrate.OperationSwitchover, "Succeeded", now, time.Second))
	c.Spec.Backup = &v1.BackupSpec{Bucket: "b", Schedule: "@daily"}
	next := metav1.NewTime(now.Add(time.Hour))
	c.Status.Backup = &v1.BackupStatus{Running: &v1.BackupRun{ID: "b3"}, Last: backupRecord("b2", now, 8*time.Second), LastFailure: backupRecord("b1", now, time.Second),
		Schedule: &v1.BackupScheduleStatus{Schedule: "@daily", Next: &next, Missed: 1}}
	m.Cluster(c)
	m.Supervising(key, true)
	m.Checked(key, failover.Check{Reachable: false, Refused: true}, time.Millisecond)
	m.Checked(key, failover.Check{Reachable: true, Writable: true}, 3*time.Millisecond)
	m.Decided(key, 2500*time.Millisecond)
	m.Refused(key)
	lag := int64(4)
	m.Instances(key, []supervisor.InstanceView{
		{Name: "shop-0", Primary: true, Up: true, SemiSyncSourceActive: true},
		{Name: "shop-1", Up: true, Replicating: true, IORunning: true, SQLRunning: true, LagSeconds: &lag},
		{Name: "shop-2", Up: true, Replicating: true, IORunning: false, SQLRunning: true, Errant: true},
	})
	return m
}

func backupRecord(id string, finished time.Time, took time.Duration) *v1.BackupRecord {
	return &v1.BackupRecord{ID: id, StartedAt: metav1.NewTime(finished.Add(-took)), FinishedAt: metav1.NewTime(finished), StoredBytes: 1 << 20, RawBytes: 8 << 20}
}

// TestBackupMetrics: the last successful backup's time, duration and sizes follow the status; a
// failure is counted once however often the cluster is seen, and not when it ended before the
// process started; a cluster without a bucket or a backup has no such series.
func TestBackupMetrics(t *testing.T) {
	m := New()
	l := []string{key.Namespace, key.Name}
	c := cluster(v1.HAHealthy, v1.PhaseRunning)
	c.Status.Backup = &v1.BackupStatus{LastFailure: backupRecord("before-start", m.start.Add(-time.Minute), time.Second)}
	m.Cluster(c)
	if got := value(t, m.backupConfigured.WithLabelValues(l...)); got != 0 {
		t.Errorf("configured %v without spec.backup", got)
	}
	if n := testutil.CollectAndCount(m.backupLastSuccess); n != 0 {
		t.Errorf("%d last-success series without a successful backup", n)
	}
	if got := value(t, m.backupFailures.WithLabelValues(l...)); got != 0 {
		t.Errorf("a failure that ended before the process started was counted: %v", got)
	}

	done := time.Now().Add(time.Second).Truncate(time.Second)
	c.Spec.Backup = &v1.BackupSpec{Bucket: "b"}
	c.Status.Backup = &v1.BackupStatus{Running: &v1.BackupRun{ID: "b3"}, Last: backupRecord("b2", done, 8*time.Second), LastFailure: backupRecord("b1", done, time.Second)}
	for range 3 {
		m.Cluster(c)
	}
	for name, want := range map[string]float64{
		"configured": 1, "running": 1, "last success": float64(done.Unix()), "duration": 8,
		"stored": 1 << 20, "read": 8 << 20, "failures": 1, "last failure": float64(done.Unix()),
	} {
		g := map[string]prometheus.Collector{
			"configured": m.backupConfigured.WithLabelValues(l...), "running": m.backupRunning.WithLabelValues(l...),
			"last success": m.backupLastSuccess.WithLabelValues(l...), "duration": m.backupDuration.WithLabelValues(l...),
			"stored": m.backupStored.WithLabelValues(l...), "read": m.backupRead.WithLabelValues(l...),
			"failures": m.backupFailures.WithLabelValues(l...), "last failure": m.backupLastFailure.WithLabelValues(l...),
		}[name]
		if got := value(t, g); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.backupScheduleNext) + testutil.CollectAndCount(m.backupScheduleMissed); n != 0 {
		t.Errorf("%d schedule series without a schedule", n)
	}
	// A kept schedule: its next time and missed count; one the status keeps for another
	// schedule (the spec changed, no watch recorded it yet) has none.
	next := metav1.NewTime(done.Add(time.Hour))
	c.Spec.Backup.Schedule = "@hourly"
	c.Status.Backup.Schedule = &v1.BackupScheduleStatus{Schedule: "@hourly", Next: &next, Missed: 3}
	m.Cluster(c)
	if got := value(t, m.backupScheduleNext.WithLabelValues(l...)); got != float64(next.Unix()) {
		t.Errorf("schedule next = %v, want %v", got, next.Unix())
	}
	if got := value(t, m.backupScheduleMissed.WithLabelValues(l...)); got != 3 {
		t.Errorf("schedule missed = %v, want 3", got)
	}
	c.Spec.Backup.Schedule = "@daily"
	m.Cluster(c)
	if n := testutil.CollectAndCount(m.backupScheduleNext) + testutil.CollectAndCount(m.backupScheduleMissed); n != 0 {
		t.Errorf("%d schedule series for a schedule not kept yet", n)
	}
	c.Status.Backup.LastFailure = backupRecord("b4", done.Add(time.Minute), time.Second)
	c.Status.Backup.Running = nil
	m.Cluster(c)
	if got := value(t, m.backupFailures.WithLabelValues(l...)); got != 2 {
		t.Errorf("failures %v after a second failure, want 2", got)
	}
	if got := value(t, m.backupRunning.WithLabelValues(l...)); got != 0 {
		t.Errorf("running %v after the backup ended", got)
	}
	m.Forget(key)
	if n := testutil.CollectAndCount(m.backupLastSuccess) + testutil.CollectAndCount(m.backupFailures); n != 0 {
		t.Errorf("%d backup series left after Forget", n)
	}
}

// TestRecorder: each source moves the series it should, counts every finished operation once,
// and leaves no stale series behind.
func TestRecorder(t *testing.T) {
	m := New()
	start := m.start
	old := record("failover-1", orchestrate.OperationFailover, "Succeeded", start.Add(-time.Hour), 2*time.Second)
	m.Cluster(cluster(v1.HAHealthy, v1.PhaseRunning, old))
	if v := value(t, m.failovers.WithLabelValues("db", "shop", "Succeeded")); v != 0 {
		t.Errorf("a failover finished before the process started was counted (%v)", v)
	}
	// Every result's counter exists from 0, so that increase() sees the first one (an alert
	// on the first failed failover must fire).
	if n := testutil.CollectAndCount(m.failovers) + testutil.CollectAndCount(m.refused); n != 4 {
		t.Errorf("%d failover counter series before any failover, want 4 (Succeeded, Failed, Aborted, refused)", n)
	}
	if v := value(t, m.healthy.WithLabelValues("db", "shop")); v != 1 {
		t.Errorf("healthy %v", v)
	}

	// A failover, then the same history seen again (every status write delivers the object).
	fo := record("failover-2", orchestrate.OperationFailover, "Succeeded", time.Now().Add(time.Second), 3*time.Second)
	refused := record("failover-3", orchestrate.OperationFailover, "Refused", time.Now().Add(2*time.Second), time.Second)
	for range 3 {
		m.Cluster(cluster(v1.HADegraded, v1.PhaseDegraded, refused, fo, old))
	}
	if v := value(t, m.failovers.WithLabelValues("db", "shop", "Succeeded")); v != 1 {
		t.Errorf("failovers_total{result=Succeeded} = %v, want 1", v)
	}
	if v := value(t, m.failovers.WithLabelValues("db", "shop", "Refused")); v != 1 {
		t.Errorf("failovers_total{result=Refused} = %v, want 1", v)
	}
	if n := testutil.CollectAndCount(m.opDuration); n != 2 {
		t.Errorf("%d operation duration series, want 2", n)
	}
	if value(t, m.degraded.WithLabelValues("db", "shop")) != 1 || value(t, m.healthy.WithLabelValues("db", "shop")) != 0 ||
		value(t, m.haState.WithLabelValues("db", "shop", "Degraded")) != 1 || value(t, m.haState.WithLabelValues("db", "shop", "Healthy")) != 0 {
		t.Error("Degraded not reflected in cluster_degraded, cluster_healthy and cluster_ha_state")
	}

	// Checks: available follows the last one; errors count the failed ones.
	m.Supervising(key, true)
	m.Checked(key, failover.Check{Reachable: true, Writable: true}, time.Millisecond)
	m.Checked(key, failover.Check{Reachable: false, Refused: true}, time.Millisecond)
	if value(t, m.available.WithLabelValues("db", "shop")) != 0 || value(t, m.checks.WithLabelValues("db", "shop")) != 2 || value(t, m.checkErrors.WithLabelValues("db", "shop")) != 1 {
		t.Error("checks not counted as they happened")
	}

	// Instances: an instance that disappears leaves no series.
	m.Instances(key, []supervisor.InstanceView{{Name: "shop-0", Primary: true, Up: true}, {Name: "shop-1", Up: true, Replicating: true, IORunning: true, SQLRunning: true}})
	// A replica that stops answering keeps instance_up (at 0) and loses its thread series.
	m.Instances(key, []supervisor.InstanceView{{Name: "shop-0", Primary: true, Up: true}, {Name: "shop-1"}})
	if value(t, m.instanceUp.WithLabelValues("db", "shop", "shop-1")) != 0 || testutil.CollectAndCount(m.ioRunning) != 0 {
		t.Error("a replica that does not answer must show instance_up 0 and no replication thread series")
	}
	m.Instances(key, []supervisor.InstanceView{{Name: "shop-0", Primary: true, Up: true}})
	if n := testutil.CollectAndCount(m.ioRunning) + testutil.CollectAndCount(m.instanceUp); n != 1 {
		t.Errorf("%d io_running and instance_up series after shop-1 went away, want 1 (shop-0's instance_up)", n)
	}
	if value(t, m.semiSyncActive.WithLabelValues("db", "shop")) != 0 {
		t.Error("semi-sync active without the primary reporting it")
	}

	// A supervisor that stops checking is reported stalled (/healthz), one that checks is not.
	if st := m.Stalled(time.Hour); st != "" {
		t.Errorf("stalled %q right after a check", st)
	}
	m.mu.Lock()
	m.supervising[key], m.checked[key] = time.Now().Add(-2*time.Minute), time.Now().Add(-2*time.Minute)
	m.mu.Unlock()
	if st := m.Stalled(time.Minute); st != "db/shop" {
		t.Errorf("Stalled = %q after two minutes without a check, want db/shop", st)
	}

	// No longer supervising: what only the supervisor observes goes.
	m.Supervising(key, false)
	if n := testutil.CollectAndCount(m.instanceUp) + testutil.CollectAndCount(m.available); n != 0 {
		t.Errorf("%d observed series kept after the supervisor Lease was lost", n)
	}
	if value(t, m.supervised.WithLabelValues("db", "shop")) != 0 {
		t.Error("cluster_supervised still 1")
	}
	if m.Stalled(time.Minute) != "" {
		t.Error("a cluster no longer supervised is reported stalled")
	}
	if testutil.CollectAndCount(m.lastCheck) != 1 {
		t.Error("the last check's time must outlive supervision (max over processes goes stale when nobody checks)")
	}
	m.Forget(key)
	if n := testutil.CollectAndCount(m.haState) + testutil.CollectAndCount(m.supervised); n != 0 {
		t.Errorf("%d series of a deleted cluster kept", n)
	}
}

// exported lists every metric name a scrape can show (histograms with their _bucket, _sum and
// _count series), from a Recorder fed one of everything.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	mfs, err := populated(t).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		if mf.GetType().String() == "HISTOGRAM" {
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		}
	}
	return names
}

// TestEverySeriesHasNamespaceAndCluster: every mysqlctl series but the process's own leader
// gauge is labelled with its cluster.
func TestEverySeriesHasNamespaceAndCluster(t *testing.T) {
	mfs, err := populated(t).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "mysqlctl_") || mf.GetName() == "mysqlctl_leader" {
			continue
		}
		seen++
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != "db" || labels["cluster"] != "shop" {
				t.Errorf("%s series without namespace and cluster: %v", mf.GetName(), labels)
			}
		}
	}
	if seen < 20 {
		t.Errorf("only %d mysqlctl families gathered", seen)
	}
}

// TestAlertRules: the rules parse with Prometheus' own rule parser, every expression names only
// metrics mysqlctl exports, the PrometheusRule carries exactly the same groups, and the rules
// cover what the README promises.
func TestAlertRules(t *testing.T) {
	dir := filepath.Join("..", "..", "manifests", "monitoring")
	promql := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(filepath.Join(dir, "rules.yaml"), false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("rules.yaml: %v", errs)
	}
	names := exported(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			expr, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			used := 0
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					used++
					if !names[vs.Name] {
						t.Errorf("%s uses %s, which mysqlctl does not export", r.Alert, vs.Name)
					}
				}
				return nil
			})
			if used == 0 {
				t.Errorf("%s selects no metric", r.Alert)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s lacks a severity, summary or description", r.Alert)
			}
		}
	}
	for _, want := range []string{"MysqlctlPrimaryDown", "MysqlctlFailoverFailed", "MysqlctlFailoverRefused", "MysqlctlClusterDegraded",
		"MysqlctlReplicaNotReplicating", "MysqlctlReplicationLagHigh", "MysqlctlErrantInstance", "MysqlctlSemiSyncOff",
		"MysqlctlSupervisorAbsent", "MysqlctlNoLeader", "MysqlctlClusterUnsupervised", "MysqlctlChecksStale"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}

	// The series' own namespace and instance labels survive only with honorLabels.
	sm, err := os.ReadFile(filepath.Join(dir, "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sm), "honorLabels: true") {
		t.Error("servicemonitor.yaml does not honor mysqlctl's namespace and instance labels")
	}

	var plain, operator struct {
		Spec   map[string]any `json:"spec"`
		Groups []any          `json:"groups"`
		Kind   string         `json:"kind"`
	}
	for file, into := range map[string]any{"rules.yaml": &plain, "prometheusrule.yaml": &operator} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if operator.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml holds a %q", operator.Kind)
	}
	a, _ := yaml.Marshal(plain.Groups)
	b, _ := yaml.Marshal(operator.Spec["groups"])
	if string(a) != string(b) {
		t.Errorf("prometheusrule.yaml's groups differ from rules.yaml's:\n%s\n---\n%s", a, b)
	}
}

// TestReadmeDocumentsEveryMetric: the manual's metrics table (docs/reference/metrics-and-alerts.md)
// lists exactly the metrics exported.
func TestReadmeDocumentsEveryMetric(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", "metrics-and-alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(mysqlctl_[a-z_]+)`").FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	mfs, err := populated(t).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if n := mf.GetName(); strings.HasPrefix(n, "mysqlctl_") && !documented[n] {
			t.Errorf("docs/reference/metrics-and-alerts.md does not document %s", n)
		}
		delete(documented, mf.GetName())
	}
	for n := range documented {
		t.Errorf("docs/reference/metrics-and-alerts.md documents %s, which is not exported", n)
	}
}
