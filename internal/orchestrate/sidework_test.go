package orchestrate

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestBudgetFollowsTheLiveStatus: a budget update runs later than it was asked for (behind other
// side work), so it derives the budget from the status as it is when it runs, never from the copy
// the asker held. A copy that says "converged" must not open the budget of a cluster whose
// operation began meanwhile, and a copy from inside an operation must not keep it closed after
// the cluster converged.
func TestBudgetFollowsTheLiveStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "budget-live", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	if err := kube.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	healthy := func(s *v1.MysqlClusterStatus) error {
		*s = v1.MysqlClusterStatus{
			Phase: v1.PhaseRunning, ObservedGeneration: cluster.Generation, ReadyInstances: 3, CurrentPrimary: "budget-live-0",
			HA: &v1.HAStatus{State: v1.HAHealthy},
			Instances: []v1.InstanceStatus{
				{Name: "budget-live-0", Role: v1.RolePrimary}, {Name: "budget-live-1", Role: v1.RoleReplica}, {Name: "budget-live-2", Role: v1.RoleReplica},
			},
		}
		return nil
	}
	operating := func(s *v1.MysqlClusterStatus) error {
		s.Operation = &v1.OperationStatus{ID: "op-1", Type: "switchover", Stage: "Fencing", StartedAt: metav1.Now()}
		return nil
	}
	maxUnavailable := func() int32 {
		t.Helper()
		pdb := &policyv1.PodDisruptionBudget{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "budget-live"}, pdb); err != nil {
			t.Fatal(err)
		}
		return pdb.Spec.MaxUnavailable.IntVal
	}
	// ask queues a budget update from held behind a job that waits until the live status is set.
	ask := func(held *v1.MysqlCluster, live func(*v1.MysqlClusterStatus) error) {
		t.Helper()
		r := &Runner{Kube: kube}
		end := r.withSidework()
		release := make(chan struct{})
		r.background.Do(ctx, func(context.Context) { <-release })
		r.syncPDB(ctx, held)
		now := cluster.DeepCopy()
		if err := UpdateStatus(ctx, kube, now, live); err != nil {
			t.Fatal(err)
		}
		close(release)
		end()
	}

	// Asked from a converged copy; an operation began before the update ran.
	converged := cluster.DeepCopy()
	if err := UpdateStatus(ctx, kube, converged, healthy); err != nil {
		t.Fatal(err)
	}
	if !specs.ConvergenceFromStatus(converged, true).Converged() {
		t.Fatalf("the test's healthy status is not converged: %+v", specs.ConvergenceFromStatus(converged, true))
	}
	ask(converged, operating)
	if got := maxUnavailable(); got != 0 {
		t.Errorf("maxUnavailable %d while an operation runs: the budget was opened from a stale copy", got)
	}

	// Asked from inside the operation; the cluster converged before the update ran.
	inside := cluster.DeepCopy()
	if err := UpdateStatus(ctx, kube, inside, func(*v1.MysqlClusterStatus) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if inside.Status.Operation == nil {
		t.Fatal("the operation is not recorded")
	}
	ask(inside, func(s *v1.MysqlClusterStatus) error { s.Operation = nil; return nil })
	if got := maxUnavailable(); got != 1 {
		t.Errorf("maxUnavailable %d on a converged cluster: the budget stayed closed from a stale copy", got)
	}
}

// TestSideworkStopAbandonsHungWork: stopping waits for the work asked so far only a bounded
// time, then cancels what is left: a hung API server never holds up an operation's return or a
// supervisor's shutdown.
func TestSideworkStopAbandonsHungWork(t *testing.T) {
	s := StartSidework()
	cancelled := make(chan struct{})
	s.Do(context.Background(), func(ctx context.Context) {
		<-ctx.Done() // a write the API server never answers
		close(cancelled)
	})
	ran := false
	s.Do(context.Background(), func(context.Context) { ran = true })
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(sideworkTimeout / 2):
		// Each job's own timeout would end it at sideworkTimeout: stop must not wait for that.
		t.Fatal("stop still waits for hung side work")
	}
	select {
	case <-cancelled:
	default:
		t.Error("stop returned before the hung work's context was cancelled")
	}
	if !ran {
		// The work after the hung job runs with an ended context: cancelled writes fail fast.
		t.Error("the work queued behind the hung job never ran")
	}
}

// TestPodsByNameAsListed: the failover's by-name reads see the pods the cluster's list sees:
// missing ordinals, pods being deleted and pods that do not carry the cluster's selector are
// absent from both.
func TestPodsByNameAsListed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "byname", Namespace: "default"}}
	pod := func(ord int32, lbl map[string]string, finalizers ...string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ScalePod(c, ord), Labels: lbl, Finalizers: finalizers},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: specs.ContainerName, Image: "mariadb:10.11"}}},
		}
		if err := kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.Patch(context.Background(), p, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
			_ = kube.Delete(context.Background(), p)
		})
	}
	sel := specs.SelectorLabels(c)
	pod(0, sel)
	// 1 is missing.
	pod(2, map[string]string{"app": "someone-else"}) // a foreign pod with the cluster's naming
	pod(3, sel, "mysqlctl.io/test-hold")             // deleted below, held by its finalizer
	pod(4, sel)
	if err := kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ScalePod(c, 3)}}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Kube: kube}
	keys := func(m map[int32]*corev1.Pod) []int32 { return slices.Sorted(maps.Keys(m)) }
	listed, err := r.Pods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	named, err := r.podsByName(ctx, c, 5)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{0, 4}; !slices.Equal(keys(listed), want) || !slices.Equal(keys(named), want) {
		t.Errorf("listed %v, read by name %v, want %v in both", keys(listed), keys(named), want)
	}
	for ord, p := range named {
		if listed[ord] == nil || listed[ord].UID != p.UID {
			t.Errorf("ordinal %d: by name %s, listed %v", ord, p.UID, listed[ord])
		}
	}
}
