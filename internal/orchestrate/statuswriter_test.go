package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// TestUpdateStatusUnderContention: concurrent writers each append one history record; the
// compare-and-swap with retry loses none of them, and a no-op change writes nothing.
func TestUpdateStatusUnderContention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, writes := countingClient(t)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "status-cas", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11"},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := cluster.DeepCopy()
			errs <- UpdateStatus(ctx, c, own, func(s *v1.MysqlClusterStatus) error {
				now := metav1.Now()
				s.History = append(s.History, v1.OperationRecord{ID: fmt.Sprint(i), Type: "test", Result: "Succeeded", StartedAt: now, FinishedAt: now})
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	final := cluster.DeepCopy()
	if err := UpdateStatus(ctx, c, final, func(*v1.MysqlClusterStatus) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(final.Status.History) != writers {
		t.Fatalf("%d history records survived, want %d: lost updates", len(final.Status.History), writers)
	}
	writes.Store(0)
	if err := UpdateStatus(ctx, c, final, func(s *v1.MysqlClusterStatus) error { s.History = s.History[:writers]; return nil }); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("no-op change sent %d writes", n)
	}
	// An aborting change writes nothing and returns its error.
	want := fmt.Errorf("precondition gone")
	if err := UpdateStatus(ctx, c, final, func(s *v1.MysqlClusterStatus) error { s.Phase = v1.PhaseDegraded; return want }); !errors.Is(err, want) {
		t.Errorf("abort: %v", err)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("aborted change sent %d writes", n)
	}
}
