package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// The times of the status fixture: the watch that judged the cluster stopped renewing its
// supervisor Lease at fixtureRenewed, after it recorded Suspected at fixtureJudged.
var (
	fixtureJudged  = time.Date(2026, 11, 29, 10, 4, 40, 0, time.UTC)
	fixtureRenewed = time.Date(2026, 11, 29, 10, 4, 47, 0, time.UTC)
)

// fixtureWatch is the holder of the fixture's supervisor Lease.
const fixtureWatch = "mysqlctl@laptop/4242-0a1b2c"

// statusFixture stores a cluster named name with a recorded status (its HA state Suspected, as
// judged by a watch at fixtureJudged), the supervisor Lease of that watch (last renewed at
// fixtureRenewed) and three pods (one not ready) in the real API server.
func statusFixture(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := kubeClient(t)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	seen := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	judged, failedOver := metav1.NewTime(fixtureJudged), metav1.NewTime(fixtureJudged.Add(-55*time.Minute))
	cluster.Status = v1.MysqlClusterStatus{
		Phase: v1.PhaseRunning, CurrentPrimary: name + "-0", ObservedGeneration: cluster.Generation, Ready: "3/3", ReadyInstances: 3,
		Instances: []v1.InstanceStatus{
			{Name: name + "-0", Ordinal: 0, Role: v1.RolePrimary, Classification: "Primary", GTIDExecuted: "0-1000-42", Version: "10.11.19-MariaDB", LastSeen: &seen},
			{Name: name + "-1", Ordinal: 1, Role: v1.RoleReplica, Classification: "Replicating", GTIDExecuted: "0-1000-42", LagSeconds: ptr.To[int64](0), IOThread: "Yes", SQLThread: "Yes", Version: "10.11.19-MariaDB", LastSeen: &seen},
			{Name: name + "-2", Ordinal: 2, Role: v1.RoleReplica, Classification: "Lagging", GTIDExecuted: "0-1000-40", IOThread: "Connecting", SQLThread: "Yes", LastError: "error reconnecting to master", Version: "10.11.19-MariaDB", LastSeen: &seen},
		},
		HA: &v1.HAStatus{
			State: v1.HASuspected, Evidence: []string{"1 of 3 failed checks of " + name + "-0: connection refused"},
			SuspectedPodUID: "uid-0", FailedChecks: 1, LastFailedCheck: &judged, Since: &judged, JudgedAt: &judged, JudgedBy: orchestrate.JudgeWatch,
			LastFailover: &failedOver,
		},
	}
	if err := c.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	holder, renewed, seconds := fixtureWatch, metav1.NewMicroTime(fixtureRenewed), int32(orchestrate.LeaseDuration/time.Second)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: orchestrate.SupervisorLeaseName(cluster), Namespace: "default"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed, AcquireTime: &renewed, LeaseDurationSeconds: &seconds},
	}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	for i, ready := range []bool{true, true, false} {
		name := cluster.Name + "-" + string(rune('0'+i))
		labels := specs.SelectorLabels(cluster)
		labels[specs.LabelRole] = map[bool]string{true: "primary", false: "replica"}[i == 0]
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mariadb:10.11"}}},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionTrue
		if !ready {
			status = corev1.ConditionFalse
		}
		p.Status = corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "mysql", RestartCount: int32(i)}},
		}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusGolden checks the exact TTY and non-TTY output against files in testdata/
// (UPDATE_GOLDEN=1 rewrites them), 5m13s after the watch that judged the cluster stopped: its
// judgement is shown as a past one, not as the state now.
func TestStatusGolden(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	statusFixture(t, "golden")
	now := fixtureRenewed.Add(5*time.Minute + 13*time.Second)
	for _, tc := range []struct {
		name string
		opts runOpts
		args []string
	}{
		{"status-plain", runOpts{now: now}, nil},
		{"status-tty", runOpts{tty: true, now: now}, nil},
		{"status-wide-plain", runOpts{now: now}, []string{"-o", "wide"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"status", "golden", "-n", "default", "--kubeconfig", env.Kubeconfig}, tc.args...)
			r := runCommand(t, tc.opts, args...)
			if r.code != cmdutil.ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if os.Getenv("UPDATE_GOLDEN") != "" {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(r.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if r.stdout != string(want) {
				t.Errorf("output differs from %s:\n got %q\nwant %q", golden, r.stdout, want)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	base := func() *v1.MysqlCluster {
		return &v1.MysqlCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "v", Generation: 1},
			Spec:       v1.MysqlClusterSpec{Replicas: 2},
			Status: v1.MysqlClusterStatus{
				Phase: v1.PhaseRunning, CurrentPrimary: "v-0", ObservedGeneration: 1,
				Instances: []v1.InstanceStatus{{Name: "v-0", Role: v1.RolePrimary}, {Name: "v-1", Role: v1.RoleReplica}},
			},
		}
	}
	ready := func() *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	pods := map[string]*corev1.Pod{"v-0": ready(), "v-1": ready()}
	for _, tc := range []struct {
		name  string
		mut   func(*v1.MysqlCluster, map[string]*corev1.Pod)
		level string
	}{
		{"healthy", func(*v1.MysqlCluster, map[string]*corev1.Pod) {}, "healthy"},
		{"pod missing", func(_ *v1.MysqlCluster, p map[string]*corev1.Pod) { delete(p, "v-1") }, "attention"},
		{"spec changed", func(c *v1.MysqlCluster, _ map[string]*corev1.Pod) { c.Generation = 2 }, "attention"},
		{"absent member, its pod ready", func(c *v1.MysqlCluster, _ map[string]*corev1.Pod) {
			c.Status.AbsentInstances = []v1.AbsentInstance{{Name: "v-1", Bound: "0-1-5"}}
		}, "attention"},
		{"operation", func(c *v1.MysqlCluster, _ map[string]*corev1.Pod) {
			c.Status.Operation = &v1.OperationStatus{Type: "bootstrap", Stage: "JoiningReplicas"}
		}, "busy"},
		{"degraded", func(c *v1.MysqlCluster, _ map[string]*corev1.Pod) { c.Status.Phase = v1.PhaseDegraded }, "degraded"},
		{"never bootstrapped", func(c *v1.MysqlCluster, _ map[string]*corev1.Pod) { c.Status = v1.MysqlClusterStatus{} }, "pending"},
	} {
		c := base()
		p := map[string]*corev1.Pod{}
		for k, v := range pods {
			p[k] = v
		}
		tc.mut(c, p)
		if level, s := Verdict(c, p); level != tc.level {
			t.Errorf("%s: %s (%s), want %s", tc.name, level, s, tc.level)
		}
	}
}

// TestStatusJudgement reads one recorded judgement at three times: while the watch that made it
// still renews its Lease (current, supervised), 30s after it stopped (current, with its age),
// and past the bound (stale: a past judgement, not the state now). Plain rows and -o json say
// the same for scripts, and -o json still decodes as a MysqlCluster.
func TestStatusJudgement(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	statusFixture(t, "judged")
	for _, tc := range []struct {
		name               string
		after              time.Duration
		ha                 string
		current, supervise bool
	}{
		{"supervised", 5 * time.Second, "Suspected for 12s (1 of 3 failed checks of judged-0: connection refused); last failover 55m ago; supervised by " + fixtureWatch, true, true},
		{"watch stopped moments ago", 30 * time.Second, "Suspected for 37s (1 of 3 failed checks of judged-0: connection refused), judged by a watch 30s ago; last failover 55m ago; no watch supervises it", true, false},
		{"stale", 5 * time.Minute, "last judged Suspected by a watch 5m ago (1 of 3 failed checks of judged-0: connection refused), not current; last failover 60m ago; no watch supervises it", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := fixtureRenewed.Add(tc.after)
			args := []string{"status", "judged", "-n", "default", "--kubeconfig", env.Kubeconfig}
			r := runCommand(t, runOpts{now: now}, args...)
			if r.code != cmdutil.ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			supervisor := "-"
			if tc.supervise {
				supervisor = fixtureWatch
			}
			for _, row := range []string{"ha\t" + tc.ha + "\n", "ha-judged\t2026-11-29T10:04:47Z\n", "ha-judged-by\twatch\n", fmt.Sprintf("ha-current\t%t\n", tc.current), "supervisor\t" + supervisor + "\n"} {
				if !strings.Contains(r.stdout, row) {
					t.Errorf("no row %q in\n%s", row, r.stdout)
				}
			}
			js := runCommand(t, runOpts{now: now}, append(args, "-o", "json")...)
			var doc struct {
				v1.MysqlCluster
				Supervision orchestrate.HAJudgement `json:"supervision"`
			}
			if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil || js.code != cmdutil.ExitOK {
				t.Fatalf("status -o json: exit %d, %v\n%s", js.code, err, js.stdout)
			}
			got := doc.Supervision
			if got.Current != tc.current || got.JudgedBy != orchestrate.JudgeWatch || got.JudgedAt == nil || !got.JudgedAt.Time.Equal(fixtureRenewed) ||
				got.State != v1.HASuspected || (got.Supervisor != "") != tc.supervise || got.StaleAfter.Duration != orchestrate.HAFresh {
				t.Errorf("supervision %+v", got)
			}
			var plain v1.MysqlCluster
			if err := json.Unmarshal([]byte(js.stdout), &plain); err != nil || plain.Status.CurrentPrimary != "judged-0" || plain.Kind != "MysqlCluster" {
				t.Errorf("-o json no longer decodes as a MysqlCluster: %v %+v", err, plain.TypeMeta)
			}
		})
	}
}

func TestHALine(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(-ago)); return &m }
	watch := "mysqlctl@host/1-abc"
	judged := func(ago time.Duration, by string, current bool, supervisor string) orchestrate.HAJudgement {
		return orchestrate.HAJudgement{JudgedAt: at(ago), JudgedBy: by, Current: current, Supervisor: supervisor}
	}
	for _, tc := range []struct {
		name string
		st   v1.MysqlClusterStatus
		j    orchestrate.HAJudgement
		want string
	}{
		{"never supervised", v1.MysqlClusterStatus{}, orchestrate.HAJudgement{}, "no watch supervises it; no HA state recorded yet"},
		{"never judged, supervised", v1.MysqlClusterStatus{}, orchestrate.HAJudgement{Supervisor: watch}, "supervised by mysqlctl@host/1-abc; no HA state recorded yet"},
		{"healthy, supervised", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HAHealthy, Since: at(3 * time.Minute), Evidence: []string{"fine"}}},
			judged(time.Second, orchestrate.JudgeWatch, true, watch),
			"Healthy for 3m; supervised by mysqlctl@host/1-abc"},
		{"suspected, the watch stopped moments ago", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HASuspected, Since: at(20 * time.Second), Evidence: []string{"1 of 3 failed checks"}, LastFailover: at(time.Hour)}},
			judged(8*time.Second, orchestrate.JudgeWatch, true, ""),
			"Suspected for 20s (1 of 3 failed checks), judged by a watch 8s ago; last failover 60m ago; no watch supervises it"},
		{"suspected, stale", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HASuspected, Since: at(5*time.Minute + 20*time.Second), Evidence: []string{"1 of 3 failed checks"}}},
			judged(5*time.Minute+13*time.Second, orchestrate.JudgeWatch, false, ""),
			"last judged Suspected by a watch 5m13s ago (1 of 3 failed checks), not current; no watch supervises it"},
		{"healthy, judged by a converge", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HAHealthy, Since: at(48 * time.Hour), Evidence: []string{"converged"}}},
			judged(12*time.Second, orchestrate.OperationConverge, true, ""),
			"Healthy for 2d, judged by a converge 12s ago; no watch supervises it"},
		{"healthy, stale, judged by an older mysqlctl", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HAHealthy}},
			orchestrate.HAJudgement{},
			"last judged Healthy at an unknown time, not current; no watch supervises it"},
		{"request", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HAHealthy}, Request: &v1.RequestStatus{ID: "req-1", Type: "switchover", State: v1.RequestAccepted}},
			judged(0, orchestrate.JudgeWatch, true, watch),
			"Healthy; carrying out the switchover request req-1; supervised by mysqlctl@host/1-abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := haLine(&v1.MysqlCluster{Status: tc.st}, tc.j, now); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestBackupLine: nothing for a cluster without a bucket or backups; otherwise the running backup,
// the last success with its size, source, duration and position, and a failure newer than it.
func TestBackupLine(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	c := &v1.MysqlCluster{}
	c.Name = "demo"
	if line, ok := backupLine(c, now); ok {
		t.Errorf("a cluster without a bucket: %q", line)
	}
	c.Spec.Backup = &v1.BackupSpec{Bucket: "b"}
	if line, _ := backupLine(c, now); line != "no successful backup yet ('backup create demo' takes one)" {
		t.Errorf("no backup yet: %q", line)
	}
	c.Status.Backup = &v1.BackupStatus{
		Running:     &v1.BackupRun{ID: "20261207-115800-ab12", Stage: "Copying", Source: "demo-2", StartedAt: at(2 * time.Minute)},
		Last:        &v1.BackupRecord{ID: "20261206-115800-cd34", Source: "demo-2", GTIDPosition: "0-1-42", StartedAt: at(24*time.Hour + 9*time.Second), FinishedAt: at(24 * time.Hour), StoredBytes: 3 << 20},
		LastFailure: &v1.BackupRecord{ID: "20261207-100000-ef56", FinishedAt: at(2 * time.Hour), Message: "the Job failed"},
	}
	want := "20261207-115800-ab12 running for 2m, stage Copying from demo-2; last 20261206-115800-cd34 24h ago: 3.0 MiB stored from demo-2 in 9s, at GTID 0-1-42; failed since: 20261207-100000-ef56 120m ago: the Job failed"
	if line, _ := backupLine(c, now); line != want {
		t.Errorf("backupLine =\n %q\nwant\n %q", line, want)
	}
	c.Status.Backup.LastFailure.FinishedAt = at(48 * time.Hour)
	if line, _ := backupLine(c, now); strings.Contains(line, "failed since") {
		t.Errorf("a failure older than the last success is shown: %q", line)
	}

	// The schedule: not kept before a watch records it; then the next time and the missed.
	c.Spec.Backup.Schedule = "0 3 * * *"
	if line, _ := backupLine(c, now); !strings.HasSuffix(line, `; schedule "0 3 * * *" not kept yet (a running 'watch demo' keeps it)`) {
		t.Errorf("a schedule no watch keeps: %q", line)
	}
	next, missed := metav1.NewTime(time.Date(2026, 12, 8, 3, 0, 0, 0, time.UTC)), at(33*time.Hour)
	c.Status.Backup.Schedule = &v1.BackupScheduleStatus{Schedule: "0 3 * * *", Next: &next, Missed: 2, LastMissed: &missed, LastMissedReason: "no watch"}
	if line, _ := backupLine(c, now); !strings.HasSuffix(line, `; schedule "0 3 * * *", next 2026-12-08 03:00 UTC (in 15h), 2 missed (last 33h ago: no watch)`) {
		t.Errorf("a kept schedule: %q", line)
	}
	// The retention rule, in words.
	c.Spec.Backup.Retention = &v1.BackupRetention{KeepLast: 7, MaxAge: &metav1.Duration{Duration: 720 * time.Hour}, MinKeep: 2}
	if line, _ := backupLine(c, now); !strings.HasSuffix(line, `; retention: keep the newest 7 and those finished within 720h0m0s, and at least the newest 2`) {
		t.Errorf("a retention rule: %q", line)
	}
	c.Spec.Backup.Encryption = &v1.BackupEncryption{Recipients: []string{"age1a", "age1b"}}
	if line, _ := backupLine(c, now); !strings.HasSuffix(line, `; encrypted to 2 age key(s)`) {
		t.Errorf("encrypted backups: %q", line)
	}
}

func TestScaleLine(t *testing.T) {
	c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	c.Status.Operation = &v1.OperationStatus{Type: "scale", Stage: "Seeding"}
	sc := &v1.ScaleStatus{From: 3, To: 5, Action: "add", Ordinal: 3, SeedMethod: "copy", Donor: "demo-1"}
	if got, want := scaleLine(c, sc), "scale 3 -> 5 instances, adding demo-3 in flight, seeded by copy from demo-1"; got != want {
		t.Errorf("scaleLine = %q, want %q", got, want)
	}
	c.Status.Operation = nil
	sc = &v1.ScaleStatus{From: 5, To: 2, Action: "remove", Ordinal: 4}
	if got, want := scaleLine(c, sc), "scale 5 -> 2 instances, removing demo-4 in flight (stopped: 'resume demo' continues it)"; got != want {
		t.Errorf("scaleLine = %q, want %q", got, want)
	}
}
