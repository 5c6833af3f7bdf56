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
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestConvergeGivesWayToFailover: a converge holding the cluster's Lease while it waits (here
// for pods that never become ready) would hold off the supervisor's failover until it timed
// out. Once a live supervisor records the primary dead and its failover waiting for the Lease
// (FailoverRequired, waitingForLease, the record rewritten at every check), the converge must
// end with ErrHeld, its stage kept for the failover to supersede. A record nobody rewrites (its
// supervisor may be gone), one without the wait (a supervisor backing off, or refused by its
// own checks: it holds no failover back) and one under failover.auto=false must not stop it.
func TestConvergeGivesWayToFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	on, off := true, false
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "give-way", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	cluster.Spec.Failover.Auto = &on
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
	// The supervisor's record; written by a clock an hour off the converge's on purpose.
	failed := int32(2)
	record := func(waiting bool) {
		t.Helper()
		failed++
		at := metav1.NewTime(time.Now().Add(time.Hour))
		if err := UpdateStatus(ctx, kube, cluster, func(s *v1.MysqlClusterStatus) error {
			s.HA = &v1.HAStatus{State: v1.HAFailoverRequired, FailedChecks: failed, LastFailedCheck: &at, Since: &at}
			if waiting {
				s.HA.WaitingForLease = &at
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// stillWaiting fails if the converge ends within d, rewriting the record every 300 ms when
	// rewrite is set.
	stillWaiting := func(why string, d time.Duration, rewrite, waiting bool) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			if rewrite {
				record(waiting)
			}
			select {
			case err := <-done:
				t.Fatalf("the converge ended %s: %v", why, err)
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
	setAuto := func(auto *bool) {
		t.Helper()
		if err := kube.Get(ctx, key, cluster); err != nil {
			t.Fatal(err)
		}
		cluster.Spec.Failover.Auto = auto
		if err := kube.Update(ctx, cluster); err != nil {
			t.Fatal(err)
		}
	}
	stillWaiting("with nothing recorded", time.Second, false, false)
	record(true)
	stillWaiting("on a record nobody rewrites (its supervisor may be gone)", 2500*time.Millisecond, false, false)
	stillWaiting("on a FailoverRequired whose failover does not wait for the Lease", 2*time.Second, true, false)
	setAuto(&off)
	stillWaiting("on a FailoverRequired with failover.auto=false (nobody fails over)", 2*time.Second, true, true)
	setAuto(&on)

	var gave error
	for end := time.Now().Add(5 * time.Second); gave == nil; {
		if time.Now().After(end) {
			t.Fatal("the converge kept the cluster while a live supervisor's failover waited for it")
		}
		record(true)
		select {
		case gave = <-done:
		case <-time.After(300 * time.Millisecond):
		}
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
