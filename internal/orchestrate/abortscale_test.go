package orchestrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestAbortStoppedScale, against the real API server: a stopped scale (a scale to 2 refused at
// DetachingInstance, its record keeping the budget closed) is backed out by abort: spec.replicas
// goes back to the instances there are and status.scale is cleared; one stopped with an instance
// half added is refused with the way out, and nothing changes.
func TestAbortStoppedScale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, key, get := clustertest.RequestCluster(t, ctx, env, "abort-scale")
	r := &Runner{Kube: c, Holder: "tester"}
	set := func(sc *v1.ScaleStatus, replicas int32) {
		t.Helper()
		cur := get()
		cur.Spec.Replicas = replicas
		if err := c.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if err := UpdateStatus(ctx, c, get(), func(s *v1.MysqlClusterStatus) error { s.Scale = sc; return nil }); err != nil {
			t.Fatal(err)
		}
	}

	set(&v1.ScaleStatus{ID: "scale-1", From: 3, To: 2, Replicas: 3, Action: scaleRemove, Ordinal: 2}, 2)
	msg, err := r.Abort(ctx, key)
	if err != nil || !strings.Contains(msg, "stays at 3 instances") {
		t.Fatalf("abort of a scale stopped before detaching: %q, %v", msg, err)
	}
	if cur := get(); cur.Status.Scale != nil || cur.Spec.Replicas != 3 {
		t.Fatalf("after the abort: scale %+v, spec.replicas %d, want none and 3", cur.Status.Scale, cur.Spec.Replicas)
	}

	adding := &v1.ScaleStatus{ID: "scale-2", From: 3, To: 4, Replicas: 4, Action: scaleAdd, Ordinal: 3}
	set(adding, 4)
	if _, err := r.Abort(ctx, key); !errors.Is(err, outcome.ErrUnsafe) || !strings.Contains(err.Error(), "--replicas 3") {
		t.Fatalf("abort of a scale stopped while adding an instance: %v, want a refusal naming 'scale --replicas 3'", err)
	}
	if cur := get(); cur.Status.Scale == nil || cur.Status.Scale.ID != "scale-2" || cur.Spec.Replicas != 4 {
		t.Fatalf("the refused abort changed the scale: %+v, spec.replicas %d", cur.Status.Scale, cur.Spec.Replicas)
	}
}
