package orchestrate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// leasedRunner takes the cluster's Lease as "cfg-test" (released when the test ends) and returns
// its context and a Runner holding it that connects through dialer.
func leasedRunner(t *testing.T, ctx context.Context, kube client.Client, c *v1.MysqlCluster, dialer topology.Dialer) (context.Context, *Runner) {
	t.Helper()
	lctx, lease, err := AcquireLease(ctx, kube, c, "cfg-test", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lease.Release(ctx) })
	return lctx, &Runner{Kube: kube, Holder: "cfg-test", Epoch: lease.Epoch, Lease: lease, Poll: 50 * time.Millisecond, Connect: clustertest.ConnectVia(dialer)}
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
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	dialer := clustertest.ForbiddenDialer(t, env)

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
			c := clustertest.RunningCluster(t, ctx, kube, name, tc.bootstrapped)
			key := client.ObjectKeyFromObject(c)
			before := &v1.MysqlCluster{}
			if err := kube.Get(ctx, key, before); err != nil {
				t.Fatal(err)
			}
			lctx, r := leasedRunner(t, ctx, kube, before, dialer)
			dialer.N.Store(0)
			err := tc.run(lctx, r, key)
			t.Logf("%d dial(s); %v", dialer.N.Load(), err)

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
			if n := dialer.N.Load(); n < 1 || n > 3 {
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
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	dialer := clustertest.ForbiddenDialer(t, env)
	c := clustertest.RunningCluster(t, ctx, kube, "cfg-fencing", true)
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
	if n := dialer.N.Load(); n > 2 {
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

// TestConfigRefusalWithdrawsLeftSwitchover is the case a killed command used to leave behind:
// a switchover recorded at Validating (phase SwitchingOver) by an actor that is gone. Resumed
// (by resume, or a supervisor), the refusal withdraws it as well: its begin is known (a
// switchover begins only from Running), so the cluster is Running again with nothing recorded.
func TestConfigRefusalWithdrawsLeftSwitchover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	dialer := clustertest.ForbiddenDialer(t, env)
	c := clustertest.RunningCluster(t, ctx, kube, "cfg-left", true)
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
