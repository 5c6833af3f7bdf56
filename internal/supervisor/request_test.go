package supervisor

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestRequestNeverRunTwice attacks the hand-over of requests against the real API server: a
// watch that read a request and froze must not take it once it was withdrawn; a request whose
// operation already finished is answered from the history, never run again; a supervisor that
// lost the request to another never overwrites its outcome; an expired request is refused; an
// annotation that does not parse is answered and removed, every time.
func TestRequestNeverRunTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, key, get := clustertest.RequestCluster(t, ctx, env, "req")
	epochs := map[string]int32{"watch-a": 1, "watch-b": 2} // watch-b took over from watch-a
	watcherOf := func(holder string) *watcher {
		return &watcher{s: &Supervisor{Runner: orchestrate.Runner{Kube: c, Holder: holder}}, key: key, stopping: make(chan struct{}), wake: make(chan struct{}, 1), supEpoch: epochs[holder]}
	}
	setStatus := func(f func(*v1.MysqlClusterStatus)) {
		t.Helper()
		if err := orchestrate.UpdateStatus(ctx, c, get(), func(s *v1.MysqlClusterStatus) error { f(s); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	post := func(id string, deadline time.Time) *v1.Request {
		t.Helper()
		d := metav1.NewTime(deadline)
		req := v1.Request{ID: id, Type: orchestrate.RequestSwitchover, By: "tester", At: metav1.Now(), Deadline: &d}
		if err := orchestrate.PostRequest(ctx, c, key, req); err != nil {
			t.Fatal(err)
		}
		return &req
	}
	later := time.Now().Add(time.Hour)

	// 1. Read by a watch that then froze; withdrawn meanwhile; the thawed watch takes nothing.
	q1 := post("q1", later)
	stale := get()
	if ok, err := orchestrate.WithdrawRequest(ctx, c, key, "q1"); err != nil || !ok {
		t.Fatalf("withdraw q1: %v %v", ok, err)
	}
	if err := watcherOf("watch-a").serveRequest(ctx, stale, q1, nil); err != nil {
		t.Fatal(err)
	}
	if cur := get(); cur.Status.Request != nil || cur.Status.Operation != nil {
		t.Fatalf("a withdrawn request was taken: request %+v, operation %+v", cur.Status.Request, cur.Status.Operation)
	}

	// 1b. Withdrawn between the supervisor's read and its write: the write carries the
	// object's old resourceVersion and is refused; the request is not taken.
	post("q1b", later)
	var armed atomic.Bool
	armed.Store(true)
	racing := clustertest.WrappedClient(t, env, func(r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status") && armed.CompareAndSwap(true, false) {
			if ok, err := orchestrate.WithdrawRequest(context.Background(), c, key, "q1b"); err != nil || !ok {
				t.Errorf("withdraw q1b mid-write: %v %v", ok, err)
			}
		}
	})
	wr := watcherOf("watch-a")
	wr.s.Runner.Kube = racing
	if err := wr.accept(ctx, &v1.Request{ID: "q1b", Type: orchestrate.RequestSwitchover}); err == nil || armed.Load() {
		t.Fatalf("accept of a request withdrawn mid-write: %v (race armed: %v)", err, armed.Load())
	}
	if cur := get(); cur.Status.Request != nil {
		t.Fatalf("a request withdrawn mid-write was taken: %+v", cur.Status.Request)
	}

	// 2. Taken by a supervisor that finished its operation and died before answering: the
	// next one answers from the history and runs nothing.
	q2 := post("q2", later)
	setStatus(func(s *v1.MysqlClusterStatus) {
		s.Request = &v1.RequestStatus{ID: "q2", Type: orchestrate.RequestSwitchover, State: v1.RequestAccepted, Holder: "watch-dead", AcceptedAt: metav1.Now()}
		s.History = []v1.OperationRecord{{ID: "switchover-1", RequestID: "q2", Type: orchestrate.OperationSwitchover, Result: "Succeeded", Message: "primary moved", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
	})
	if err := watcherOf("watch-b").serveRequest(ctx, get(), q2, nil); err != nil {
		t.Fatal(err)
	}
	cur := get()
	if r := cur.Status.Request; r == nil || r.ID != "q2" || r.State != v1.RequestSucceeded || r.Message != "primary moved" || cur.Status.Operation != nil || len(cur.Status.History) != 1 {
		t.Fatalf("q2 not answered from the history: request %+v, operation %+v, %d history records", r, cur.Status.Operation, len(cur.Status.History))
	}
	if _, ok := cur.Annotations[v1.AnnotationRequest]; ok {
		t.Errorf("the annotation stayed after q2 was answered")
	}
	if ok, err := orchestrate.WithdrawRequest(ctx, c, key, "q2"); err != nil || ok {
		t.Errorf("withdrawing an answered request: %v %v, want false", ok, err)
	}

	// 3. A supervisor that lost the request to another never records an outcome for it.
	q3 := post("q3", later)
	setStatus(func(s *v1.MysqlClusterStatus) {
		s.Request = &v1.RequestStatus{ID: "q3", Type: orchestrate.RequestSwitchover, State: v1.RequestAccepted, Holder: "watch-b", Epoch: 2, AcceptedAt: metav1.Now()}
	})
	if err := watcherOf("watch-a").answer(ctx, q3, orchestrate.ErrLeaseLost, ""); err != nil {
		t.Fatal(err)
	}
	// Nor takes it back: watch-a's supervisor Lease is older than watch-b's.
	if err := watcherOf("watch-a").accept(ctx, q3); err == nil {
		t.Errorf("a supervisor with an older Lease took q3 back from a newer one")
	}
	if cur := get(); cur.Status.Request.State != v1.RequestAccepted || cur.Status.Request.Holder != "watch-b" || cur.Annotations[v1.AnnotationRequest] == "" {
		t.Fatalf("a displaced supervisor overwrote q3: %+v (annotation %q)", cur.Status.Request, cur.Annotations[v1.AnnotationRequest])
	}
	// The requester, whose status.request was since replaced, still finds q2's outcome.
	if rs, pending := orchestrate.RequestOutcome(get(), "q2"); rs == nil || rs.State != v1.RequestSucceeded || pending {
		t.Errorf("q2's outcome after status.request moved on: %+v pending %v", rs, pending)
	}
	if ok, err := orchestrate.WithdrawRequest(ctx, c, key, "q3"); err != nil || ok {
		t.Errorf("withdrawing a taken request: %v %v, want false", ok, err)
	}
	if err := watcherOf("watch-b").clearRequest(ctx, "q3"); err != nil {
		t.Fatal(err)
	}

	// 4. A request nobody took before its requester gave up is refused, not run.
	q4 := post("q4", time.Now().Add(-2*time.Minute))
	if err := watcherOf("watch-b").serveRequest(ctx, get(), q4, nil); err != nil {
		t.Fatal(err)
	}
	if r := get().Status.Request; r == nil || r.ID != "q4" || r.State != v1.RequestFailed || r.Outcome != orchestrate.OutcomeTimedOut || get().Status.Operation != nil {
		t.Fatalf("expired q4: %+v", r)
	}

	// 5. An annotation that does not parse is answered and removed, the second time too.
	for i := range 2 {
		cur := get()
		cur.Annotations = map[string]string{v1.AnnotationRequest: "not a request"}
		if err := c.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		cur = get()
		req, perr := orchestrate.RequestOf(cur)
		if err := watcherOf("watch-b").serveRequest(ctx, cur, req, perr); err != nil {
			t.Fatal(err)
		}
		if cur := get(); cur.Annotations[v1.AnnotationRequest] != "" || cur.Status.Request == nil || cur.Status.Request.State != v1.RequestFailed {
			t.Fatalf("invalid annotation, round %d: annotation %q, request %+v", i, cur.Annotations[v1.AnnotationRequest], cur.Status.Request)
		}
	}

	// 6. A request whose holder stopped before beginning anything, abandoned by its requester,
	// is gone: a supervisor started later finds nothing to carry out.
	post("q7", later)
	setStatus(func(s *v1.MysqlClusterStatus) {
		s.Request = &v1.RequestStatus{ID: "q7", Type: orchestrate.RequestSwitchover, State: v1.RequestAccepted, Holder: "watch-dead", AcceptedAt: metav1.Now()}
	})
	if ok, err := orchestrate.AbandonRequest(ctx, c, key, "q7"); err != nil || !ok {
		t.Fatalf("abandon q7: %v %v", ok, err)
	}
	if _, pending := orchestrate.RequestOutcome(get(), "q7"); pending {
		t.Errorf("q7 still pending after it was abandoned")
	}
	// An annotation claiming the reserved ID is an invalid request, answered and removed.
	cur = get()
	cur.Annotations = map[string]string{v1.AnnotationRequest: `{"id":"invalid","type":"switchover"}`}
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	cur = get()
	req, perr := orchestrate.RequestOf(cur)
	if err := watcherOf("watch-b").serveRequest(ctx, cur, req, perr); err != nil || get().Annotations[v1.AnnotationRequest] != "" {
		t.Fatalf("the reserved request ID stayed: %v %q", err, get().Annotations[v1.AnnotationRequest])
	}

	// 7. A second request while one waits is refused, naming the first.
	post("q5", later)
	b, _ := json.Marshal(v1.Request{ID: "q6", Type: orchestrate.RequestFailover, At: metav1.Now()})
	if err := orchestrate.PostRequest(ctx, c, key, v1.Request{ID: "q6", Type: orchestrate.RequestFailover, At: metav1.Now()}); err == nil {
		t.Errorf("a second request %s was accepted while q5 waits", b)
	}
}
