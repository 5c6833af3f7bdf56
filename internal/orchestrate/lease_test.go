package orchestrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// TestLeaseOneActor: a live holder refuses a second actor (outcome.ErrHeld naming it); after
// Release the second actor takes the lease with a higher epoch.
func TestLeaseOneActor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := countingClient(t)
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "lease", Namespace: "default"}}
	_, a, err := AcquireLease(ctx, c, cluster, "actor-a", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// A second actor keeps watching while A renews; bound it so the test is quick.
	bctx, bcancel := context.WithTimeout(ctx, LeaseDuration+LeaseDuration/2)
	_, _, err = AcquireLease(bctx, c, cluster, "actor-b", time.Now)
	bcancel()
	if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "actor-a holds cluster lease") {
		t.Fatalf("second actor: %v", err)
	}
	epochA := a.Epoch
	a.Release(ctx)
	_, b, err := AcquireLease(ctx, c, cluster, "actor-b", time.Now)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	defer b.Release(ctx)
	if b.Epoch <= epochA {
		t.Errorf("epoch %d after takeover, want more than %d", b.Epoch, epochA)
	}
}
