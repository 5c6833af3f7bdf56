package orchestrate

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// EventSource names mysqlctl as the reporting component of its Events.
const EventSource = "mysqlctl"

// Event records a decision as a Kubernetes Event on the cluster, so that `kubectl describe` and
// `kubectl get events` tell the story next to the status. Events are best effort: a refused
// Event never stops an operation, whose persisted status remains the record.
func (r *Runner) Event(ctx context.Context, c *v1.MysqlCluster, warning bool, reason, message string) {
	if r.Kube == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	if len(message) > 1000 {
		message = message[:997] + "..."
	}
	now := metav1.NewTime(r.Clock())
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, GenerateName: c.Name + "."},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1.GroupVersion.String(), Kind: "MysqlCluster", Namespace: c.Namespace, Name: c.Name,
			UID: c.UID, ResourceVersion: c.ResourceVersion,
		},
		Reason: reason, Message: strings.TrimSpace(message), Type: typ,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source:              corev1.EventSource{Component: EventSource},
		ReportingController: "mysqlctl.io/" + EventSource, ReportingInstance: r.Holder,
	}
	kube := r.Kube
	r.background.Do(ctx, func(ctx context.Context) { _ = kube.Create(ctx, e) })
}

// Sidework runs best-effort API writes (Events, the disruption budget) one at a time and in
// order, off the critical path of the operation or check that asks for them: a failover does not
// wait for its Events to be stored before its next stage. A nil sidework runs them at once.
type Sidework struct {
	work chan func()
	done chan struct{}
	// mu orders do against stop: work asked for once s is stopped runs at once.
	mu     sync.Mutex
	closed bool
	// ctx outlives the contexts that ask for work (an operation's may end first); stop
	// cancels it when the work left takes too long.
	ctx    context.Context
	cancel context.CancelFunc
}

// sideworkTimeout bounds one piece of side work, and sideworkDrain what stop waits for the work
// left before it abandons it: a slow API server never holds up a process that is stopping (a
// watch's grace period and two drains stay well inside a pod's termination grace period).
const (
	sideworkTimeout = 10 * time.Second
	sideworkDrain   = 2 * time.Second
)

// StartSidework starts the worker that runs side work (Events, disruption budget updates) off
// the caller's path, one piece at a time, each bounded by sideworkTimeout.
func StartSidework() *Sidework {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sidework{work: make(chan func(), 64), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	go func() {
		defer close(s.done)
		for fn := range s.work {
			fn()
		}
	}()
	return s
}

// Do runs fn after the work asked for before it, or at once when s is nil.
func (s *Sidework) Do(ctx context.Context, fn func(context.Context)) {
	if s == nil {
		fn(ctx)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		fn(ctx)
		return
	}
	defer s.mu.Unlock()
	select {
	case s.work <- func() {
		cctx, cancel := context.WithTimeout(s.ctx, sideworkTimeout)
		defer cancel()
		fn(cctx)
	}:
	case <-ctx.Done(): // the queue is full and the caller gave up: best effort, dropped
	}
}

// Stop waits for the work asked for so far, at most sideworkDrain (then what is left is
// cancelled), and ends s.
func (s *Sidework) Stop() {
	s.mu.Lock()
	s.closed = true
	close(s.work)
	s.mu.Unlock()
	t := time.NewTimer(sideworkDrain)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.cancel()
		<-s.done
	}
	s.cancel()
}

// withSidework gives r what one operation run shares across its stages, unless it has it: a
// sidework, and the credentials read once. It returns what ends them: the operation returns
// only once its Events and budget updates are written.
func (r *Runner) withSidework() func() {
	if r.background != nil {
		return func() {}
	}
	r.background, r.creds = StartSidework(), map[string]Credentials{}
	return func() {
		r.background.Stop()
		r.background, r.creds = nil, nil
	}
}
