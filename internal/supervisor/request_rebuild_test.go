package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestRebuildRequests: `rebuild` typed while a watch supervises the cluster is handed to it as a
// request, like a scale. Against the real API server: a rebuild request whose rebuild already
// finished (its supervisor died before answering) is answered from the history and never run
// again, and one that names no instance is answered as failed, not left waiting.
func TestRebuildRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, key, get := clustertest.RequestCluster(t, ctx, env, "rebuild-req")
	w := &watcher{s: &Supervisor{Runner: orchestrate.Runner{Kube: c, Holder: "watch-b"}}, key: key, stopping: make(chan struct{}), wake: make(chan struct{}, 1), supEpoch: 2}
	later := metav1.NewTime(time.Now().Add(time.Hour))
	post := func(req v1.Request) *v1.Request {
		t.Helper()
		req.By, req.At, req.Deadline = "tester", metav1.Now(), &later
		if err := orchestrate.PostRequest(ctx, c, key, req); err != nil {
			t.Fatal(err)
		}
		return &req
	}

	done := post(v1.Request{ID: "r1", Type: orchestrate.RequestRebuild, Instance: "rebuild-req-2"})
	if err := orchestrate.UpdateStatus(ctx, c, get(), func(s *v1.MysqlClusterStatus) error {
		s.Request = &v1.RequestStatus{ID: "r1", Type: orchestrate.RequestRebuild, State: v1.RequestAccepted, Holder: "watch-dead", Epoch: 1, AcceptedAt: metav1.Now()}
		s.History = []v1.OperationRecord{{ID: "rebuild-1", RequestID: "r1", Type: orchestrate.OperationRebuild, Result: "Succeeded", Message: "rebuild-req-2 rebuilt", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.serveRequest(ctx, get(), done, nil); err != nil {
		t.Fatal(err)
	}
	cur := get()
	if r := cur.Status.Request; r == nil || r.ID != "r1" || r.State != v1.RequestSucceeded || r.Message != "rebuild-req-2 rebuilt" || cur.Status.Operation != nil || len(cur.Status.History) != 1 {
		t.Fatalf("a finished rebuild's request was not answered from the history: request %+v, operation %+v, %d history records", r, cur.Status.Operation, len(cur.Status.History))
	}

	nameless := post(v1.Request{ID: "r2", Type: orchestrate.RequestRebuild})
	if err := w.serveRequest(ctx, get(), nameless, nil); err != nil {
		t.Fatal(err)
	}
	cur = get()
	if r := cur.Status.Request; r == nil || r.ID != "r2" || r.State != v1.RequestFailed || !strings.Contains(r.Message, "names no instance") || cur.Status.Operation != nil {
		t.Fatalf("a rebuild request naming no instance: request %+v, operation %+v", r, cur.Status.Operation)
	}
	if _, ok := cur.Annotations[v1.AnnotationRequest]; ok {
		t.Errorf("the annotation stayed after r2 was answered")
	}
}
