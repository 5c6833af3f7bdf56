package supervisor

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestWatchReportsConfigRefusal: a supervisor whose checks of the primary are refused by the API
// server's RBAC keeps running and says so loudly, once (an error to print, a Warning Event, the
// HA state Suspected with the refusal and what to grant as its reason), and never counts the
// refused checks as failed ones: however many there are, no failover is called for.
func TestWatchReportsConfigRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	dialer := clustertest.ForbiddenDialer(t, env)
	c := clustertest.RunningCluster(t, ctx, kube, "cfg-watch", true)
	key := client.ObjectKeyFromObject(c)
	var mu sync.Mutex
	var reports []Transition
	w := &watcher{
		s: &Supervisor{
			Runner: orchestrate.Runner{Kube: kube, Holder: "cfg-supervisor", Connect: clustertest.ConnectVia(dialer)},
			Report: func(tr Transition) { mu.Lock(); reports = append(reports, tr); mu.Unlock() },
		},
		key: key, stopping: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	for range 5 { // more than failover.failureThreshold (3)
		_, err := w.tick(ctx)
		if !errors.Is(err, outcome.ErrConfig) || !strings.Contains(err.Error(), "create on pods/portforward") {
			t.Fatalf("tick: %v, want the configuration refusal reported", err)
		}
		w.lastErr = err.Error() // as the supervise loop does with what it printed
		if len(w.checks) != 0 {
			t.Fatalf("a refused check was counted: %+v", w.checks)
		}
	}
	after := &v1.MysqlCluster{}
	if err := kube.Get(ctx, key, after); err != nil {
		t.Fatal(err)
	}
	ha := after.Status.HA
	if after.Status.Operation != nil || ha == nil || ha.State != v1.HASuspected || ha.FailedChecks != 0 ||
		len(ha.Evidence) == 0 || !strings.Contains(ha.Evidence[0], "pods/portforward") {
		t.Errorf("operation %+v, HA %+v: want no operation, Suspected with the refusal and no failed check", after.Status.Operation, ha)
	}
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Name == key.Name && e.Reason == "PrimaryUncheckable" {
			n++
			if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "pods/portforward") {
				t.Errorf("event %s %q", e.Type, e.Message)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d PrimaryUncheckable Events for 5 refused checks, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || reports[0].To != string(v1.HASuspected) {
		t.Errorf("transitions %+v, want one to Suspected", reports)
	}
}
