package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// countingDialer counts the dials it passes on to the real dialer it wraps.
type countingDialer struct {
	topology.Dialer
	n atomic.Int32
}

func (d *countingDialer) DialContext(ctx context.Context, t topology.Target) (net.Conn, error) {
	d.n.Add(1)
	return d.Dialer.DialContext(ctx, t)
}

// connectVia connects to the pods through dialer.
func connectVia(dialer topology.Dialer) func(context.Context, *corev1.Pod, topology.Credentials) (*topology.Instance, error) {
	return func(_ context.Context, pod *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
		return topology.Connect(topology.Target{Name: pod.Name, Namespace: pod.Namespace, Pod: pod.Name, Host: pod.Status.PodIP, Port: specs.MySQLPort},
			topology.ConnectOptions{Dialer: dialer, Credentials: creds})
	}
}

// leasedRunner takes the cluster's Lease as "cfg-test" (released when the test ends) and returns
// its context and a Runner holding it that connects through dialer.
func leasedRunner(t *testing.T, ctx context.Context, kube client.Client, c *v1.MysqlCluster, dialer topology.Dialer) (context.Context, *Runner) {
	t.Helper()
	lctx, lease, err := AcquireLease(ctx, kube, c, "cfg-test", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lease.Release(ctx) })
	return lctx, &Runner{Kube: kube, Holder: "cfg-test", Epoch: lease.Epoch, Lease: lease, Poll: 50 * time.Millisecond, Connect: connectVia(dialer)}
}

// forbiddenDialer is the real port-forward dialer, as a user the test API server's RBAC grants
// nothing: every tunnel is refused with the API server's own 403, which the dialer classifies.
func forbiddenDialer(t *testing.T) *countingDialer {
	t.Helper()
	kubeconfig, err := env.AddUser("no-portforward")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := topology.NewPortForwardDialer(cfg, topology.PortForwardOptions{DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pf.Close() })
	return &countingDialer{Dialer: pf}
}

// runningCluster creates a cluster recorded Running with its primary name-0, its ready pods, their
// data volume claims and the credentials Secret, as a bootstrap leaves them (no server behind the
// pods: the dialer never gets that far).
func runningCluster(t *testing.T, ctx context.Context, kube client.Client, name string, bootstrapped bool) *v1.MysqlCluster {
	t.Helper()
	c := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	if err := kube.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	secret, err := specs.BuildSecret(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	for ord := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, ord), Namespace: "default", Labels: specs.SelectorLabels(c)},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: specs.ContainerName, Image: c.Spec.Image}}},
		}
		if err := kube.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.1.0.%d", ord+1),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		}
		if err := kube.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod.Name, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := kube.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	if !bootstrapped {
		return c
	}
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	if err := UpdateStatus(ctx, kube, c, func(s *v1.MysqlClusterStatus) error {
		s.Phase, s.CurrentPrimary = v1.PhaseRunning, name+"-0"
		for ord := range int32(3) {
			in := v1.InstanceStatus{Name: fmt.Sprintf("%s-%d", name, ord), Ordinal: ord, Role: v1.RoleReplica, Classification: "Replicating"}
			if ord == 0 {
				in.Role, in.Classification = v1.RolePrimary, "Primary"
			}
			s.Instances = append(s.Instances, in)
		}
		s.HA = &v1.HAStatus{State: v1.HAHealthy, Since: &then}
		s.History = []v1.OperationRecord{{ID: "bootstrap-1", Type: OperationBootstrap, Result: "Succeeded", StartedAt: then, FinishedAt: then, Message: "cluster is Running"}}
		s.Conditions = []metav1.Condition{
			{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Converged", Message: "replication proven", LastTransitionTime: then},
			{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: "cluster is Running", LastTransitionTime: then},
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConfigRefusalStopsOperation: when the API server refuses the port-forward (here its RBAC,
// for real: a user granted nothing, through the real port-forward dialer), an operation must not
// wait for members that "do not answer yet": it ends at once with the refusal (outcome.ErrConfig,
// naming what to grant), after one look at each member at most. Stopped before its first change,
// it leaves the status exactly as it found it: no operation, no history record, the phase and
// conditions as they were.
func TestConfigRefusalStopsOperation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := wrappedClient(t, func(*http.Request) {})
	dialer := forbiddenDialer(t)

	for _, tc := range []struct {
		name         string
		bootstrapped bool
		run          func(ctx context.Context, r *Runner, key client.ObjectKey) error
	}{
		{"switchover", true, func(ctx context.Context, r *Runner, key client.ObjectKey) error {
			return r.Switchover(ctx, key, SwitchoverOptions{})
		}},
		{"failover", true, func(ctx context.Context, r *Runner, key client.ObjectKey) error {
			return r.Failover(ctx, key, FailoverOptions{})
		}},
		{"reconcile", true, func(ctx context.Context, r *Runner, key client.ObjectKey) error {
			return r.Converge(ctx, key)
		}},
		{"upgrade", true, func(ctx context.Context, r *Runner, key client.ObjectKey) error {
			return r.Upgrade(ctx, key, UpgradeOptions{})
		}},
		{"scale", true, func(ctx context.Context, r *Runner, key client.ObjectKey) error {
			return r.Scale(ctx, key, ScaleOptions{Replicas: 4})
		}},
		{"rebuild", true, func(ctx context.Context, r *Runner, key client.ObjectKey) error {
			return r.Rebuild(ctx, key, RebuildOptions{Instance: key.Name + "-2"})
		}},
		{"create", false, func(ctx context.Context, r *Runner, key client.ObjectKey) error {
			return r.Bootstrap(ctx, key)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "cfg-" + tc.name
			c := runningCluster(t, ctx, kube, name, tc.bootstrapped)
			key := client.ObjectKeyFromObject(c)
			before := &v1.MysqlCluster{}
			if err := kube.Get(ctx, key, before); err != nil {
				t.Fatal(err)
			}
			lctx, r := leasedRunner(t, ctx, kube, before, dialer)
			dialer.n.Store(0)
			err := tc.run(lctx, r, key)
			t.Logf("%d dial(s); %v", dialer.n.Load(), err)

			var ce *topology.ConfigError
			if !errors.Is(err, outcome.ErrConfig) || !errors.As(err, &ce) {
				t.Fatalf("%s ended with %v, want the configuration refusal", tc.name, err)
			}
			if ce.Status != 403 || !strings.Contains(err.Error(), "create on pods/portforward in namespace default") || strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("the error is not one line saying what to grant: %v", err)
			}
			if lctx.Err() != nil {
				t.Errorf("the operation ran until its deadline: %v", lctx.Err())
			}
			// A look at each member at most: a stage that waited for them would dial every poll.
			if n := dialer.n.Load(); n < 1 || n > 3 {
				t.Errorf("%d dials, want one to three (one look at each member at most)", n)
			}
			after := &v1.MysqlCluster{}
			if err := kube.Get(ctx, key, after); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(before.Status, after.Status) {
				t.Errorf("the status changed:\nbefore %+v\nafter  %+v", before.Status, after.Status)
			}
		})
	}
}

// TestConfigRefusalAfterFirstChange: an operation past its first change is not withdrawn (what
// it changed stays recorded for resume or abort), but it stops at once all the same, the refusal
// and what to do recorded as its message.
func TestConfigRefusalAfterFirstChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := wrappedClient(t, func(*http.Request) {})
	dialer := forbiddenDialer(t)
	c := runningCluster(t, ctx, kube, "cfg-fencing", true)
	key := client.ObjectKeyFromObject(c)
	lctx, r := leasedRunner(t, ctx, kube, c, dialer)
	now := metav1.Now()
	if err := UpdateStatus(ctx, kube, c, func(s *v1.MysqlClusterStatus) error {
		s.Phase = v1.PhaseSwitchingOver
		s.Operation = &v1.OperationStatus{
			ID: "switchover-1", Type: OperationSwitchover, Stage: StageFencing, Holder: "cfg-test", Epoch: r.Epoch,
			StartedAt: now, UpdatedAt: &now, StageStartedAt: &now,
			Evidence: &v1.OperationEvidence{FencedPrimary: "cfg-fencing-0", FenceState: v1.FencePending, Candidate: "cfg-fencing-1"},
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err := r.Switchover(lctx, key, SwitchoverOptions{ResumeOnly: true})
	if !errors.Is(err, outcome.ErrConfig) || !strings.Contains(err.Error(), "stays recorded") {
		t.Fatalf("ended with %v, want the configuration refusal with the operation kept", err)
	}
	if n := dialer.n.Load(); n > 2 {
		t.Errorf("%d dials: the stage waited for the fence", n)
	}
	after := &v1.MysqlCluster{}
	if err := kube.Get(ctx, key, after); err != nil {
		t.Fatal(err)
	}
	op := after.Status.Operation
	if op == nil || op.Stage != StageFencing || !strings.Contains(op.Message, "pods/portforward") || !strings.Contains(op.Message, "resume cfg-fencing") {
		t.Errorf("operation %+v, want it kept at Fencing with the refusal as its message", op)
	}
	if after.Status.Phase != v1.PhaseSwitchingOver || len(after.Status.History) != 1 {
		t.Errorf("phase %s, %d history records: the stopped operation must stay as it is", after.Status.Phase, len(after.Status.History))
	}
}

// TestWatchReportsConfigRefusal: a supervisor whose checks of the primary are refused by the API
// server's RBAC keeps running and says so loudly, once (an error to print, a Warning Event, the
// HA state Suspected with the refusal and what to grant as its reason), and never counts the
// refused checks as failed ones: however many there are, no failover is called for.
func TestWatchReportsConfigRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := wrappedClient(t, func(*http.Request) {})
	dialer := forbiddenDialer(t)
	c := runningCluster(t, ctx, kube, "cfg-watch", true)
	key := client.ObjectKeyFromObject(c)
	var mu sync.Mutex
	var reports []Transition
	w := &watcher{
		s: &Supervisor{
			Runner: Runner{Kube: kube, Holder: "cfg-supervisor", Connect: connectVia(dialer)},
			Report: func(tr Transition) { mu.Lock(); reports = append(reports, tr); mu.Unlock() },
		},
		key: key, stopping: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	for range 5 { // more than failover.failureThreshold (3)
		_, err := w.tick(ctx)
		if !errors.Is(err, outcome.ErrConfig) || !strings.Contains(err.Error(), "create on pods/portforward") {
			t.Fatalf("tick: %v, want the configuration refusal reported", err)
		}
		w.lastErr = err.Error() // as the supervise loop does with what it printed
		if len(w.checks) != 0 {
			t.Fatalf("a refused check was counted: %+v", w.checks)
		}
	}
	after := &v1.MysqlCluster{}
	if err := kube.Get(ctx, key, after); err != nil {
		t.Fatal(err)
	}
	ha := after.Status.HA
	if after.Status.Operation != nil || ha == nil || ha.State != v1.HASuspected || ha.FailedChecks != 0 ||
		len(ha.Evidence) == 0 || !strings.Contains(ha.Evidence[0], "pods/portforward") {
		t.Errorf("operation %+v, HA %+v: want no operation, Suspected with the refusal and no failed check", after.Status.Operation, ha)
	}
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Name == key.Name && e.Reason == "PrimaryUncheckable" {
			n++
			if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "pods/portforward") {
				t.Errorf("event %s %q", e.Type, e.Message)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d PrimaryUncheckable Events for 5 refused checks, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || reports[0].To != string(v1.HASuspected) {
		t.Errorf("transitions %+v, want one to Suspected", reports)
	}
}

// TestConfigRefusalWithdrawsLeftSwitchover is the case a killed command used to leave behind:
// a switchover recorded at Validating (phase SwitchingOver) by an actor that is gone. Resumed
// (by resume, or a supervisor), the refusal withdraws it as well: its begin is known (a
// switchover begins only from Running), so the cluster is Running again with nothing recorded.
func TestConfigRefusalWithdrawsLeftSwitchover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := wrappedClient(t, func(*http.Request) {})
	dialer := forbiddenDialer(t)
	c := runningCluster(t, ctx, kube, "cfg-left", true)
	key := client.ObjectKeyFromObject(c)
	_, gone, err := AcquireLease(ctx, kube, c, "gone", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	if err := UpdateStatus(ctx, kube, c, func(s *v1.MysqlClusterStatus) error {
		s.Phase = v1.PhaseSwitchingOver
		s.Operation = &v1.OperationStatus{ID: "switchover-1", Type: OperationSwitchover, Stage: StageValidating, Holder: "gone", Epoch: gone.Epoch, StartedAt: now, UpdatedAt: &now, StageStartedAt: &now}
		s.Conditions = append(s.Conditions[:1], metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "SwitchingOver", Message: "switchover started", LastTransitionTime: now})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	gone.Release(ctx)
	lctx, r := leasedRunner(t, ctx, kube, c, dialer)
	if err := r.Switchover(lctx, key, SwitchoverOptions{ResumeOnly: true}); !errors.Is(err, outcome.ErrConfig) || !strings.Contains(err.Error(), "nothing is recorded") {
		t.Fatalf("ended with %v, want the refusal and the switchover withdrawn", err)
	}
	after := &v1.MysqlCluster{}
	if err := kube.Get(ctx, key, after); err != nil {
		t.Fatal(err)
	}
	p := meta.FindStatusCondition(after.Status.Conditions, v1.ConditionProgressing)
	if after.Status.Operation != nil || after.Status.Phase != v1.PhaseRunning || len(after.Status.History) != 1 || p == nil || p.Status != metav1.ConditionFalse {
		t.Errorf("phase %s, operation %+v, %d history records, Progressing %+v: want Running with nothing recorded", after.Status.Phase, after.Status.Operation, len(after.Status.History), p)
	}
}
