package orchestrate

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// judgedCluster is a small snapshot builder: a cluster whose HA state was recorded by, at.
func judgedCluster(state v1.HAState, by string, at time.Time, mutate ...func(*v1.MysqlCluster)) *v1.MysqlCluster {
	t := metav1.NewTime(at)
	c := &v1.MysqlCluster{Status: v1.MysqlClusterStatus{HA: &v1.HAStatus{State: state, Since: &t, JudgedAt: &t, JudgedBy: by}}}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// TestJudgeHA: a judgement is current while a watch renews its supervisor Lease (each renewal
// confirms the record) and for HAStaleAfter after the newer of the record and the last renewal;
// older, it is stale. The Lease confirms nothing while an operation other than a converge owns
// status.ha, and a record written before judgedAt existed is dated by its newest time.
func TestJudgeHA(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	watch := "mysqlctl@host/1-abc"
	live := Supervision{Holder: watch, RenewedAt: ago(time.Second)}
	gone := Supervision{Holder: watch, RenewedAt: ago(5 * time.Minute)}   // killed: its record stays
	released := Supervision{Holder: "", RenewedAt: ago(20 * time.Second)} // stopped: holder cleared
	slow := func(c *v1.MysqlCluster) { c.Spec.Failover.DetectionInterval = &metav1.Duration{Duration: time.Minute} }
	switchover := func(c *v1.MysqlCluster) { c.Status.Operation = &v1.OperationStatus{Type: OperationSwitchover} }
	converging := func(c *v1.MysqlCluster) { c.Status.Operation = &v1.OperationStatus{Type: OperationConverge} }
	for _, tc := range []struct {
		name       string
		c          *v1.MysqlCluster
		sup        Supervision
		current    bool
		by         string
		at         time.Time // zero: no time known
		supervisor string
	}{
		{"nothing recorded", &v1.MysqlCluster{}, Supervision{}, false, "", time.Time{}, ""},
		{"nothing recorded, supervised", &v1.MysqlCluster{}, live, false, "", time.Time{}, watch},
		{"a live watch stands behind an old record", judgedCluster(v1.HAHealthy, JudgeWatch, ago(72*time.Hour)), live, true, JudgeWatch, ago(time.Second), watch},
		{"a killed watch's record, 5m after its last renewal", judgedCluster(v1.HASuspected, JudgeWatch, ago(6*time.Minute)), gone, false, JudgeWatch, ago(5 * time.Minute), ""},
		{"a released Lease still dates the watch's last look", judgedCluster(v1.HAHealthy, JudgeWatch, ago(time.Hour)), released, true, JudgeWatch, ago(20 * time.Second), ""},
		{"a converge's judgement, fresh", judgedCluster(v1.HAHealthy, OperationConverge, ago(30*time.Second)), gone, true, OperationConverge, ago(30 * time.Second), ""},
		{"a converge's judgement at the bound", judgedCluster(v1.HAHealthy, OperationConverge, ago(HAFresh)), Supervision{}, true, OperationConverge, ago(HAFresh), ""},
		{"a converge's judgement past the bound", judgedCluster(v1.HAHealthy, OperationConverge, ago(HAFresh+time.Second)), Supervision{}, false, OperationConverge, ago(HAFresh + time.Second), ""},
		{"three slow detection intervals bound it", judgedCluster(v1.HAHealthy, OperationConverge, ago(2*time.Minute), slow), Supervision{}, true, OperationConverge, ago(2 * time.Minute), ""},
		{"a switchover owns status.ha: the Lease confirms nothing", judgedCluster(v1.HAHealthy, JudgeWatch, ago(10*time.Minute), switchover), live, false, JudgeWatch, ago(10 * time.Minute), watch},
		{"a converge does not stop the checks", judgedCluster(v1.HAHealthy, JudgeWatch, ago(10*time.Minute), converging), live, true, JudgeWatch, ago(time.Second), watch},
		{"a judge's clock ahead of this one", judgedCluster(v1.HAHealthy, OperationConverge, now.Add(time.Hour)), Supervision{}, true, OperationConverge, now.Add(time.Hour), ""},
		{"a record without judgedAt, dated by its last failed check", judgedCluster(v1.HASuspected, "", ago(time.Hour), func(c *v1.MysqlCluster) {
			c.Status.HA.JudgedAt = nil
			last := metav1.NewTime(ago(30 * time.Second))
			c.Status.HA.LastFailedCheck = &last
		}), Supervision{}, true, "", ago(30 * time.Second), ""},
		{"a record with no time at all", &v1.MysqlCluster{Status: v1.MysqlClusterStatus{HA: &v1.HAStatus{State: v1.HAHealthy}}}, Supervision{}, false, "", time.Time{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := JudgeHA(tc.c, tc.sup, now)
			var at time.Time
			if j.JudgedAt != nil {
				at = j.JudgedAt.Time
			}
			if j.Current != tc.current || j.JudgedBy != tc.by || !at.Equal(tc.at) || j.Supervisor != tc.supervisor {
				t.Errorf("JudgeHA = %+v (at %s)\nwant current %v, by %q, at %s, supervisor %q", j, at, tc.current, tc.by, tc.at, tc.supervisor)
			}
			if tc.c.Status.HA != nil && j.State != tc.c.Status.HA.State {
				t.Errorf("state %q, want the recorded %q", j.State, tc.c.Status.HA.State)
			}
		})
	}
}

// TestObservedChange: what a converge that found the replicas converged records from its look
// at the primary. A writable primary refreshes a stale judgement to Healthy (a stopped watch's
// failed checks and a withheld failover's Degraded cleared); a read-only or unreachable one
// records nothing; and the write leaves the record alone when an operation, another primary or
// a newer judgement appeared meanwhile.
func TestObservedChange(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	old, failedOver := metav1.NewTime(now.Add(-10*time.Minute)), metav1.NewTime(now.Add(-time.Hour))
	stale := func() *v1.MysqlCluster {
		c := &v1.MysqlCluster{Status: v1.MysqlClusterStatus{
			Phase: v1.PhaseDegraded, CurrentPrimary: "db-0",
			HA: &v1.HAStatus{State: v1.HADegraded, Since: &old, JudgedAt: &old, JudgedBy: JudgeWatch, Evidence: []string{"withheld"},
				FailedChecks: 7, SuspectedPodUID: "uid-0", LastFailedCheck: &old, WaitingForLease: &old, LastFailover: &failedOver},
			Conditions: []metav1.Condition{{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonFailoverWithheld, Message: "withheld"}},
		}}
		return c
	}
	writable := topology.Snapshot{Name: "db-0", ObservedAt: now, Reachable: true}
	readOnly := writable
	readOnly.ReadOnly = true
	unreachable := topology.Snapshot{Name: "db-0", ObservedAt: now}

	c := stale()
	change := observedChange(c, "db-0", writable, false, true)
	if change == nil {
		t.Fatal("a writable primary with every replica replicating from it records no judgement")
	}
	if err := change(&c.Status); err != nil {
		t.Fatal(err)
	}
	h := c.Status.HA
	if h.State != v1.HAHealthy || h.JudgedBy != OperationConverge || h.JudgedAt == nil || !h.JudgedAt.Time.Equal(now) || !h.Since.Time.Equal(now) {
		t.Errorf("judged %+v, want Healthy since now, judged by a converge now", h)
	}
	if h.FailedChecks != 0 || h.SuspectedPodUID != "" || h.LastFailedCheck != nil || h.WaitingForLease != nil || !h.LastFailover.Equal(&failedOver) {
		t.Errorf("counts %+v: want a stopped watch's checks forgotten and the last failover kept", h)
	}
	if d := meta.FindStatusCondition(c.Status.Conditions, v1.ConditionDegraded); c.Status.Phase != v1.PhaseRunning || d.Status != metav1.ConditionFalse {
		t.Errorf("phase %s, Degraded %+v: a withheld failover's Degraded outlived a healthy primary", c.Status.Phase, d)
	}
	if !JudgeHA(c, Supervision{}, now.Add(30*time.Second)).Current {
		t.Error("the converge's judgement is not current 30s later")
	}

	for _, tc := range []struct {
		name string
		s    topology.Snapshot
	}{{"read-only", readOnly}, {"unreachable", unreachable}} {
		if observedChange(stale(), "db-0", tc.s, true, true) != nil {
			t.Errorf("a %s primary: something to record", tc.name)
		}
	}
	if observedChange(stale(), "db-0", writable, true, false) != nil {
		t.Error("lastSeen recorded for a primary not proven to wait for semi-sync acknowledgements")
	}
	for _, tc := range []struct {
		name string
		mut  func(*v1.MysqlClusterStatus)
	}{
		{"an operation began", func(s *v1.MysqlClusterStatus) { s.Operation = &v1.OperationStatus{Type: OperationFailover} }},
		{"another primary", func(s *v1.MysqlClusterStatus) { s.CurrentPrimary = "db-1" }},
		{"a newer judgement", func(s *v1.MysqlClusterStatus) { t := metav1.NewTime(now.Add(time.Second)); s.HA.JudgedAt = &t }},
	} {
		c := stale()
		change := observedChange(c, "db-0", writable, false, true)
		tc.mut(&c.Status)
		before := c.Status.HA.DeepCopy()
		if err := change(&c.Status); err != nil {
			t.Fatal(err)
		}
		if c.Status.HA.State != before.State || c.Status.HA.JudgedBy != before.JudgedBy {
			t.Errorf("%s meanwhile: the record was rewritten to %+v", tc.name, c.Status.HA)
		}
	}
}

// TestConvergeRefreshesAStaleJudgement runs a converge (what `reconcile` runs) on a converged
// one-instance cluster whose primary is a real MariaDB server, against the real API server.
// The HA state recorded by a watch that stopped long ago (Suspected) is replaced by the
// converge's own judgement (Healthy, now), which `status` then shows as current; a second
// converge writes nothing; and a record a live watch stands behind is left alone.
func TestConvergeRefreshesAStaleJudgement(t *testing.T) {
	srv := mariadbtest.Start(t, mariadbtest.Options{Name: "judged-0"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube, writes := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "judged", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 1},
	}
	if err := kube.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	if _, err := EnsureSecret(ctx, kube, cluster); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: specs.SecretName(cluster)}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[specs.SecretRootPassword] = []byte(mariadbtest.RootPassword)
	if err := kube.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	labels := specs.SelectorLabels(cluster)
	labels[specs.LabelRole] = string(v1.RolePrimary)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "judged-0", Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mariadb:10.11"}}},
	}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: srv.Host, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	recordStale := func() {
		t.Helper()
		seen, long := metav1.Now(), metav1.NewTime(time.Now().Add(-10*time.Minute))
		if err := UpdateStatus(ctx, kube, cluster, func(s *v1.MysqlClusterStatus) error {
			s.Phase, s.CurrentPrimary, s.ObservedGeneration = v1.PhaseRunning, "judged-0", cluster.Generation
			// Observed recently: only the judgement needs refreshing.
			s.Instances = []v1.InstanceStatus{{Name: "judged-0", Role: v1.RolePrimary, LastSeen: &seen}}
			s.HA = &v1.HAStatus{State: v1.HASuspected, Since: &long, JudgedAt: &long, JudgedBy: JudgeWatch, Evidence: []string{"1 of 3 failed checks"},
				FailedChecks: 1, SuspectedPodUID: "uid-0", LastFailedCheck: &long}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	recordStale()
	connect := func(_ context.Context, p *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
		return topology.Connect(topology.Target{Name: p.Name}, topology.ConnectOptions{Dialer: topology.StaticDialer{Addrs: map[string]string{p.Name: srv.Addr()}}, Credentials: creds})
	}
	r := &Runner{Kube: kube, Connect: connect, Holder: "reconciler"}
	if err := r.Converge(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	h := cluster.Status.HA
	j := JudgeHA(cluster, Supervision{}, time.Now())
	if h.State != v1.HAHealthy || h.JudgedBy != OperationConverge || !j.Current || h.FailedChecks != 0 || cluster.Status.Operation != nil {
		t.Fatalf("after the converge: ha %+v, judgement %+v, operation %+v; want Healthy judged now by the converge", h, j, cluster.Status.Operation)
	}
	if !strings.Contains(strings.Join(h.Evidence, " "), "judged-0 answered writable") {
		t.Errorf("evidence %q", h.Evidence)
	}

	before := writes.Load()
	if err := r.Converge(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load() - before; n != 0 {
		t.Errorf("a converge of a converged cluster with a current judgement wrote %d time(s)", n)
	}

	// A watch that renews its supervisor Lease stands behind even an old record.
	recordStale()
	_, lease, err := AcquireLease(ctx, kube, cluster, "watcher", LeaseOptions{Supervisor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if err := r.Converge(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	if h := cluster.Status.HA; h.State != v1.HASuspected || h.JudgedBy != JudgeWatch {
		t.Errorf("a converge overwrote the judgement of a live watch: %+v", h)
	}
}
