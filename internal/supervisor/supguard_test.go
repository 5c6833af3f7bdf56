package supervisor

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestStaleSupervisorWritesNoHA attacks the supervisor's own status writes against the real API
// server: a watch paused past its supervisor Lease (another took over meanwhile) that wakes
// with a verdict in hand writes no HA state. Control: the same write with a Lease renewed just
// now lands.
func TestStaleSupervisorWritesNoHA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, key, get := clustertest.RequestCluster(t, ctx, env, "supguard")
	watcherWith := func(lastRenew time.Time) *watcher {
		return &watcher{s: &Supervisor{Runner: orchestrate.Runner{Kube: c, Holder: "watch-a"}}, key: key, stopping: make(chan struct{}),
			wake: make(chan struct{}, 1), supEpoch: 1, sup: orchestrate.HeldLease(1, lastRenew)}
	}
	verdict := failover.Assessment{State: failover.HAFailoverRequired, Reason: "the primary failed 3 of the 3 consecutive checks required"}
	check := failover.Check{At: time.Now()}

	stale := watcherWith(time.Now().Add(-orchestrate.LeaseDuration))
	err := stale.record(ctx, get(), verdict, failover.Judgement{Verdict: failover.Dead}, check)
	if !errors.Is(err, orchestrate.ErrLeaseLost) {
		t.Fatalf("a supervisor past its Lease recorded HA: err %v", err)
	}
	if h := get().Status.HA; h != nil {
		t.Fatalf("HA written by a supervisor past its Lease: %+v", h)
	}
	if err := stale.withhold(ctx, get(), metav1.NewTime(check.At), "a failed failover"); !errors.Is(err, orchestrate.ErrLeaseLost) {
		t.Fatalf("a supervisor past its Lease withheld failover: err %v", err)
	}
	if h := get().Status.HA; h != nil {
		t.Fatalf("HA written by a supervisor past its Lease: %+v", h)
	}

	fresh := watcherWith(time.Now())
	if err := fresh.record(ctx, get(), verdict, failover.Judgement{Verdict: failover.Dead}, check); err != nil {
		t.Fatalf("control: a supervisor holding its Lease: %v", err)
	}
	if h := get().Status.HA; h == nil || string(h.State) != verdict.State {
		t.Fatalf("control: HA %+v, want %s", h, verdict.State)
	}
}
