package orchestrate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// TestConvergeGivesWayToFailover: a converge holding the cluster's Lease while it waits (here
// for pods that never become ready) would hold off the supervisor's failover until it timed
// out. Once a live supervisor records the primary dead (FailoverRequired at a recent check,
// failover.auto on), the converge must end with ErrHeld, its stage kept for the failover to
// supersede, and release nothing else; a stale record (a supervisor that may be gone) or one
// under failover.auto=false must not stop it.
func TestConvergeGivesWayToFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := wrappedClient(t, func(*http.Request) {})
	off := false
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "give-way", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	cluster.Spec.Failover.Auto = &off
	cluster.Spec.Failover.DetectionInterval = &metav1.Duration{Duration: time.Second}
	if err := kube.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	lctx, lease, err := AcquireLease(ctx, kube, cluster, "reconciler", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if err := UpdateStatus(ctx, kube, cluster, func(s *v1.MysqlClusterStatus) error {
		s.Phase, s.CurrentPrimary = v1.PhaseRunning, "give-way-0"
		s.Operation = &v1.OperationStatus{ID: "converge-1", Type: OperationConverge, Stage: StageWaitingForPods, Holder: "reconciler", Epoch: lease.Epoch, StartedAt: metav1.Now()}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Kube: kube, Holder: "reconciler", Epoch: lease.Epoch, Lease: lease, Poll: 100 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- r.Converge(lctx, key) }()
	stillWaiting := func(why string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the converge ended %s: %v", why, err)
		case <-time.After(2 * time.Second):
		}
	}
	recordDead := func(at time.Time) {
		t.Helper()
		if err := UpdateStatus(ctx, kube, cluster, func(s *v1.MysqlClusterStatus) error {
			t := metav1.NewTime(at)
			s.HA = &v1.HAStatus{State: v1.HAFailoverRequired, FailedChecks: 3, LastFailedCheck: &t, Since: &t}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	stillWaiting("with nothing recorded")

	recordDead(time.Now())
	stillWaiting("on a FailoverRequired with failover.auto=false (nobody fails over)")

	if err := kube.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	on := true
	cluster.Spec.Failover.Auto = &on
	if err := kube.Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	recordDead(time.Now().Add(-time.Minute))
	stillWaiting("on a FailoverRequired recorded a minute ago (its supervisor may be gone)")

	recordDead(time.Now())
	var gave error
	select {
	case gave = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the converge kept the cluster after a live supervisor recorded its primary dead")
	}
	if !errors.Is(gave, outcome.ErrHeld) || !strings.Contains(gave.Error(), "gave way to a failover of its primary give-way-0") {
		t.Errorf("the converge ended with %v, want ErrHeld naming the failover", gave)
	}
	if err := kube.Get(ctx, key, cluster); err != nil {
		t.Fatal(err)
	}
	if op := cluster.Status.Operation; op == nil || op.Type != OperationConverge || op.Stage != StageWaitingForPods {
		t.Errorf("the converge is not kept at its stage for the failover to supersede: %+v", op)
	}
}
