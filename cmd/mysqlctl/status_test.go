package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// statusFixture stores a cluster with a recorded status and three pods (one not ready) in the
// real API server.
func statusFixture(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := kubeClient(t)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "golden", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	seen := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	cluster.Status = v1.MysqlClusterStatus{
		Phase: v1.PhaseRunning, CurrentPrimary: "golden-0", ObservedGeneration: cluster.Generation, Ready: "3/3", ReadyInstances: 3,
		Instances: []v1.InstanceStatus{
			{Name: "golden-0", Ordinal: 0, Role: v1.RolePrimary, Classification: "Primary", GTIDExecuted: "0-1000-42", Version: "10.11.19-MariaDB", LastSeen: &seen},
			{Name: "golden-1", Ordinal: 1, Role: v1.RoleReplica, Classification: "Replicating", GTIDExecuted: "0-1000-42", LagSeconds: ptr.To[int64](0), IOThread: "Yes", SQLThread: "Yes", Version: "10.11.19-MariaDB", LastSeen: &seen},
			{Name: "golden-2", Ordinal: 2, Role: v1.RoleReplica, Classification: "Lagging", GTIDExecuted: "0-1000-40", IOThread: "Connecting", SQLThread: "Yes", LastError: "error reconnecting to master", Version: "10.11.19-MariaDB", LastSeen: &seen},
		},
	}
	if err := c.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	for i, ready := range []bool{true, true, false} {
		name := cluster.Name + "-" + string(rune('0'+i))
		labels := orchestrate.SelectorLabels(cluster)
		labels[orchestrate.LabelRole] = map[bool]string{true: "primary", false: "replica"}[i == 0]
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
// (UPDATE_GOLDEN=1 rewrites them).
func TestStatusGolden(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	statusFixture(t)
	for _, tc := range []struct {
		name string
		opts runOpts
		args []string
	}{
		{"status-plain", runOpts{}, nil},
		{"status-tty", runOpts{tty: true}, nil},
		{"status-wide-plain", runOpts{}, []string{"-o", "wide"}},
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

func TestHALine(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(-ago)); return &m }
	live := orchestrate.Supervision{Holder: "mysqlctl@host/1-abc", RenewedRecently: true}
	for _, tc := range []struct {
		name string
		st   v1.MysqlClusterStatus
		sup  orchestrate.Supervision
		want string
	}{
		{"never supervised", v1.MysqlClusterStatus{}, orchestrate.Supervision{}, "no watch supervises it; no HA state recorded yet"},
		{"healthy", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HAHealthy, Since: at(3 * time.Minute), Evidence: []string{"fine"}}}, live,
			"Healthy for 3m; supervised by mysqlctl@host/1-abc"},
		{"suspected, stale supervisor", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HASuspected, Since: at(2 * time.Second), Evidence: []string{"1 of 3 failed checks"}, LastFailover: at(time.Hour)}},
			orchestrate.Supervision{Holder: "gone", RenewedRecently: false},
			"Suspected for 2s (1 of 3 failed checks); last failover 60m ago; no watch supervises it"},
		{"request", v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HAHealthy}, Request: &v1.RequestStatus{ID: "req-1", Type: "switchover", State: v1.RequestAccepted}}, live,
			"Healthy; carrying out the switchover request req-1; supervised by mysqlctl@host/1-abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := haLine(&v1.MysqlCluster{Status: tc.st}, tc.sup, now); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
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
