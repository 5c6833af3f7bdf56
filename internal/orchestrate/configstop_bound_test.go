package orchestrate

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// oneRefusedDialer refuses one pod by configuration (as for a node whose kubelet certificate the
// API server does not trust); every other pod's port is closed.
type oneRefusedDialer struct {
	refused string
	mu      sync.Mutex
	dials   map[string]int
}

func (d *oneRefusedDialer) DialContext(_ context.Context, t topology.Target) (net.Conn, error) {
	d.mu.Lock()
	d.dials[t.Pod]++
	d.mu.Unlock()
	if t.Pod == d.refused {
		return nil, &topology.ConfigError{Target: "default/" + t.Pod, Status: 500, Reason: "error dialing backend: x509: certificate signed by unknown authority", Fix: "trust the kubelet's certificate"}
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// TestConfigRefusalPastPromotionWaitsOutTheBound: a replica refused by configuration at a stage
// past the switchover's point of no return (Repointing) is waited for as a silent one, until the
// stage's bound leaves it for repair. It never stops the operation there: a stop could only be
// resumed, would stop again at every resume, and leaves the new primary without its replicas
// (found by an attack review: the operation stuck at Repointing, the old primary never re-pointed).
func TestConfigRefusalPastPromotionWaitsOutTheBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	c := clustertest.RunningCluster(t, ctx, kube, "cfg-repoint", true)
	key := client.ObjectKeyFromObject(c)
	d := &oneRefusedDialer{refused: "cfg-repoint-1", dials: map[string]int{}}
	lctx, r := leasedRunner(t, ctx, kube, c, d)
	now := metav1.Now()
	if err := UpdateStatus(ctx, kube, c, func(s *v1.MysqlClusterStatus) error {
		s.Phase = v1.PhaseSwitchingOver
		s.CurrentPrimary = "cfg-repoint-0" // MovingPrimary is done: the candidate is the primary
		s.Operation = &v1.OperationStatus{
			ID: "switchover-1", Type: OperationSwitchover, Stage: StageRepointing, Holder: "cfg-test", Epoch: r.Epoch,
			StartedAt: now, UpdatedAt: &now, StageStartedAt: &now,
			Evidence: &v1.OperationEvidence{FencedPrimary: "cfg-repoint-2", FenceState: v1.FenceVerified, Candidate: "cfg-repoint-0"},
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(lctx, postPromotionBound/2)
	defer scancel()
	start := time.Now()
	err := r.Switchover(sctx, key, SwitchoverOptions{ResumeOnly: true})
	if errors.Is(err, outcome.ErrConfig) {
		t.Fatalf("stopped by the refusal after %s at Repointing (bound %s): %v", time.Since(start).Round(time.Millisecond), postPromotionBound, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dials["cfg-repoint-1"] < 2 {
		t.Errorf("the refused replica was dialed %d times: not waited for", d.dials["cfg-repoint-1"])
	}
}
