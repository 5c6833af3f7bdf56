package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// TestStepSupersededEndsAsLostLease: a stage whose statement a server refused as older than
// the epoch it keeps (topology.ErrSuperseded) ends the run as a lost lease (exit 5), neither
// a wait for the stage's precondition nor a configuration stop, and records nothing.
func TestStepSupersededEndsAsLostLease(t *testing.T) {
	r := &Runner{Holder: "actor-a", Epoch: 3}
	op := &v1.OperationStatus{ID: "switchover-1", Type: OperationSwitchover, Stage: StagePromoting, Holder: "actor-a", Epoch: 3}
	refusal := &topology.OpError{Instance: "db-1", Op: "make writable", Kind: topology.ErrorOther,
		Err: fmt.Errorf("%w: db-1 was touched under lease epoch 5, this actor holds epoch 4", topology.ErrSuperseded)}
	last := ""
	_, advanced, err := r.step(context.Background(), client.ObjectKey{Namespace: "db", Name: "c"}, &v1.MysqlCluster{}, op, &last,
		func() (string, func(*v1.MysqlClusterStatus), error) { return "", nil, refusal })
	var ny errNotYet
	if advanced || errors.As(err, &ny) || !errors.Is(err, ErrLeaseLost) || !errors.Is(err, topology.ErrSuperseded) || !errors.Is(err, outcome.ErrHeld) {
		t.Fatalf("step after a server's refusal: advanced %v, %v; want a lost lease", advanced, err)
	}
}
