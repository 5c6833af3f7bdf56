package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// Request types a supervising watch carries out for a command run elsewhere.
const (
	RequestSwitchover = OperationSwitchover
	RequestFailover   = OperationFailover
	RequestUpgrade    = OperationUpgrade
	RequestRebuild    = OperationRebuild
	RequestResume     = "resume"
	RequestAbort      = "abort"
)

// Outcome kinds recorded in status.request, each the failure class the requesting command
// exits with.
const (
	OutcomeTimedOut = "TimedOut"
	OutcomeUnsafe   = "Unsafe"
	OutcomeHeld     = "Held"
	OutcomeError    = "Error"
	// OutcomeConfig: a path the operation needs is refused by configuration (see
	// topology.ConfigError); exit code 6.
	OutcomeConfig = "Config"
)

// Supervision is what a cluster's supervisor Lease says: who supervises it, and when the
// record last changed as this process saw it.
type Supervision struct {
	Holder string
	// RenewedRecently judges the holder alive by its own timestamp: only ever used to decide
	// whether to hand a request over, or whether a watch stands behind the recorded HA state
	// (JudgeHA), never to take anything.
	RenewedRecently bool
	// RenewedAt is the record's last renewal by the holder's clock (zero when never renewed). A
	// released Lease keeps it: it is when the last watch last supervised the cluster.
	RenewedAt time.Time
	// Version changes with every renewal.
	Version string
}

// SupervisorOf reads the cluster's supervisor Lease. A missing or released Lease is an empty
// holder.
func SupervisorOf(ctx context.Context, kube client.Client, c *v1.MysqlCluster) (Supervision, error) {
	l := &coordinationv1.Lease{}
	err := kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: SupervisorLeaseName(c)}, l)
	if apierrors.IsNotFound(err) {
		return Supervision{}, nil
	}
	if err != nil {
		return Supervision{}, fmt.Errorf("read Lease %s/%s: %w", c.Namespace, SupervisorLeaseName(c), err)
	}
	sup := Supervision{Holder: holderOf(l), RenewedRecently: recentlyRenewed(l, time.Now()), Version: l.ResourceVersion}
	if l.Spec.RenewTime != nil {
		sup.RenewedAt = l.Spec.RenewTime.Time
	}
	return sup, nil
}

// requestOf returns the request left on the cluster, nil when there is none. A request that
// does not parse is answered as failed, so its command does not wait forever.
func requestOf(c *v1.MysqlCluster) (*v1.Request, error) {
	raw, ok := c.Annotations[v1.AnnotationRequest]
	if !ok {
		return nil, nil
	}
	req := &v1.Request{}
	if err := json.Unmarshal([]byte(raw), req); err != nil || req.ID == "" || req.ID == invalidRequest {
		return nil, fmt.Errorf("annotation %s is not a request: %q", v1.AnnotationRequest, raw)
	}
	return req, nil
}

// PostRequest leaves req on the cluster for its supervisor. It is refused (outcome.ErrHeld)
// while another request waits for an answer.
func PostRequest(ctx context.Context, kube client.Client, key client.ObjectKey, req v1.Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &v1.MysqlCluster{}
		if err := kube.Get(ctx, key, c); err != nil {
			return err
		}
		if other, err := requestOf(c); err == nil && other != nil && other.ID != req.ID && !answered(c, other.ID) {
			return fmt.Errorf("%w: %s's request %s (%s, asked at %s) waits for the supervisor of %s; follow it with 'mysqlctl status %s' or remove it with 'kubectl annotate mysqlcluster %s %s-'",
				outcome.ErrHeld, other.By, other.ID, other.Type, other.At.UTC().Format(time.RFC3339), key.Name, key.Name, key.Name, v1.AnnotationRequest)
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1.AnnotationRequest] = string(b)
		return kube.Update(ctx, c)
	})
}

// WithdrawRequest removes the request with this ID if it is still on the cluster and no
// supervisor has taken it. It reports whether this call withdrew it: false means it was taken
// (it runs, or ran) or it is gone for another reason, and then nothing may be assumed.
func WithdrawRequest(ctx context.Context, kube client.Client, key client.ObjectKey, id string) (bool, error) {
	withdrawn := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &v1.MysqlCluster{}
		if err := kube.Get(ctx, key, c); err != nil {
			return err
		}
		if r := c.Status.Request; r != nil && r.ID == id || historyOf(c, id) != nil {
			return nil // taken: it runs, or ran
		}
		if req, _ := requestOf(c); req == nil || req.ID != id {
			return nil
		}
		// A compare-and-swap on the object's resourceVersion, which status shares: a
		// supervisor's acceptance written meanwhile makes this fail, and the loop looks again.
		delete(c.Annotations, v1.AnnotationRequest)
		if err := kube.Update(ctx, c); err != nil {
			return err
		}
		withdrawn = true
		return nil
	})
	return withdrawn, err
}

// AbandonRequest removes request id, taken by a supervisor that stopped renewing its Lease,
// unless an operation of it is recorded or finished: a supervisor started later must not carry
// out, perhaps days later, a request its requester gave up on. It reports whether it did.
func AbandonRequest(ctx context.Context, kube client.Client, key client.ObjectKey, id string) (bool, error) {
	abandoned := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &v1.MysqlCluster{}
		if err := kube.Get(ctx, key, c); err != nil {
			return err
		}
		if req, _ := requestOf(c); req == nil || req.ID != id || answered(c, id) || startedBy(c, id) {
			return nil
		}
		delete(c.Annotations, v1.AnnotationRequest)
		if err := kube.Update(ctx, c); err != nil {
			return err
		}
		abandoned = true
		return nil
	})
	return abandoned, err
}

// RequestOutcome is what the cluster says about request id: its recorded status (taken, or
// answered), else the history record of the operation it started, else nil; pending is true
// while the annotation still holds it.
func RequestOutcome(c *v1.MysqlCluster, id string) (rs *v1.RequestStatus, pending bool) {
	if req, _ := requestOf(c); req != nil && req.ID == id {
		pending = true
	}
	if r := c.Status.Request; r != nil && r.ID == id {
		return r, pending
	}
	if rec := historyOf(c, id); rec != nil {
		// Answered, and its status.request replaced by a later request since.
		rs := &v1.RequestStatus{ID: id, Type: rec.Type, State: v1.RequestSucceeded, Message: rec.Message, FinishedAt: &rec.FinishedAt}
		if err := recordResult(*rec); err != nil {
			rs.State, rs.Outcome = v1.RequestFailed, outcomeKind(err)
		}
		return rs, pending
	}
	return nil, pending
}

// answered reports whether status holds the outcome of request id.
func answered(c *v1.MysqlCluster, id string) bool {
	r := c.Status.Request
	return r != nil && r.ID == id && r.State != v1.RequestAccepted
}

// RequestError turns a failed request's recorded outcome into the error its command exits with.
func RequestError(r *v1.RequestStatus) error {
	if r.State != v1.RequestFailed {
		return nil
	}
	kind := map[string]error{OutcomeTimedOut: outcome.ErrTimedOut, OutcomeUnsafe: outcome.ErrUnsafe, OutcomeHeld: outcome.ErrHeld, OutcomeConfig: outcome.ErrConfig}[r.Outcome]
	if kind == nil {
		return fmt.Errorf("the supervisor %s: %s", r.Holder, r.Message)
	}
	return fmt.Errorf("%w: the supervisor %s: %s", kind, r.Holder, r.Message)
}

func outcomeKind(err error) string {
	switch {
	case errors.Is(err, outcome.ErrConfig):
		return OutcomeConfig
	case errors.Is(err, outcome.ErrTimedOut), errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimedOut
	case errors.Is(err, outcome.ErrUnsafe):
		return OutcomeUnsafe
	case errors.Is(err, outcome.ErrHeld):
		return OutcomeHeld
	}
	return OutcomeError
}

// invalidRequest is the ID under which an annotation that does not parse is answered.
const invalidRequest = "invalid"

// errRequestGone means the request is no longer this supervisor's to carry out: it was
// withdrawn, answered, or taken by another supervisor meanwhile.
var errRequestGone = errors.New("the request is no longer this supervisor's")

// historyOf returns the history record of the operation request id started, if it finished.
func historyOf(c *v1.MysqlCluster, id string) *v1.OperationRecord {
	for i := range c.Status.History {
		if h := &c.Status.History[i]; h.RequestID == id && (h.Type == OperationSwitchover || h.Type == OperationFailover || h.Type == OperationUpgrade || h.Type == OperationScale || h.Type == OperationRebuild) {
			return h
		}
	}
	return nil
}

// recordAnswering returns the history record that answers the request: for a scale, its own
// record, never the handoff switchover it ran first under the same request.
func recordAnswering(c *v1.MysqlCluster, req *v1.Request) *v1.OperationRecord {
	if req.Type != RequestScale {
		return historyOf(c, req.ID)
	}
	for i := range c.Status.History {
		if h := &c.Status.History[i]; h.RequestID == req.ID && h.Type == OperationScale {
			return h
		}
	}
	return nil
}

// startedBy reports whether request id began an operation that is recorded or finished.
func startedBy(c *v1.MysqlCluster, id string) bool {
	return c.Status.Operation != nil && c.Status.Operation.RequestID == id || historyOf(c, id) != nil
}

// requestExpired reports whether the requester stopped waiting for req (its deadline passed,
// with a minute's allowance for clocks that disagree).
func requestExpired(req *v1.Request, now time.Time) bool {
	return req.Deadline != nil && now.After(req.Deadline.Add(time.Minute))
}

// serveRequest carries out a request left on the cluster: it records the request as accepted
// (only while the annotation still holds it: a withdrawn request is never taken), runs it under
// the cluster's Lease, records the outcome and removes the annotation. A request whose
// operation already finished (this or an earlier supervisor stopped before answering) is
// answered from the history, never run again.
func (w *watcher) serveRequest(ctx context.Context, c *v1.MysqlCluster, req *v1.Request, perr error) error {
	select {
	case <-w.stopping:
		return nil // no longer supervising: the next supervisor takes it
	default:
	}
	if w.unwritten == nil {
		w.unwritten = map[string]answerOf{}
	}
	if perr != nil {
		return w.answer(ctx, &v1.Request{ID: invalidRequest, Type: "unknown"}, perr, "")
	}
	if answered(c, req.ID) {
		return w.clearRequest(ctx, req.ID) // answered, but the annotation stayed (a crash)
	}
	if a, ok := w.unwritten[req.ID]; ok {
		return w.answer(ctx, req, a.err, a.msg) // carried out; only its answer is left to write
	}
	if requestExpired(req, w.s.Runner.now()) && !startedBy(c, req.ID) {
		return w.answer(ctx, req, fmt.Errorf("%w: the request expired at %s before it was carried out: nothing was done", outcome.ErrTimedOut, req.Deadline.UTC().Format(time.RFC3339)), "")
	}
	if err := w.accept(ctx, req); err != nil {
		if errors.Is(err, errRequestGone) {
			return nil
		}
		return err
	}
	if rec := recordAnswering(c, req); rec != nil {
		return w.answer(ctx, req, recordResult(*rec), rec.Message)
	}
	w.report(Transition{Action: "request", Reason: fmt.Sprintf("carrying out the %s %s asked by %s", req.Type, req.ID, req.By)})
	w.s.Runner.event(ctx, c, false, "RequestAccepted", fmt.Sprintf("the supervisor %s carries out the %s %s asked by %s", w.s.Runner.Holder, req.Type, req.ID, req.By))
	w.failing.Store(true) // the repairer stands aside while the request runs
	defer w.failing.Store(false)
	w.stopRepair()
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if req.Deadline != nil {
		// Bounded: a request never holds the supervisor (and its failure detection) past
		// its requester's patience; an operation cut short stays recorded and is resumed.
		rctx, cancel = context.WithDeadline(ctx, req.Deadline.Add(30*time.Second))
	}
	msg, err := w.runRequest(rctx, req)
	cancel()
	w.act.Unlock()
	var na errNotAcquired
	switch {
	case errors.Is(err, ErrStopped), errors.Is(err, ErrLeaseLost), errors.Is(err, errRequestGone):
		return nil // not answered here: whoever supervises next continues or answers it
	case errors.As(err, &na):
		cur := &v1.MysqlCluster{}
		if gerr := w.s.Runner.Kube.Get(ctx, w.key, cur); gerr != nil {
			return gerr
		}
		if op := cur.Status.Operation; op != nil && op.RequestID == req.ID {
			return nil // its operation runs under another actor: answered once it finishes
		}
		err = na.err
	}
	w.unwritten[req.ID] = answerOf{err: err, msg: msg}
	return w.answer(ctx, req, err, msg)
}

// answerOf is an outcome not yet recorded (its write failed): it is written again, never
// found again by running the request a second time.
type answerOf struct {
	err error
	msg string
}

// accept records the request as taken by this supervisor, in one compare-and-swap with the
// annotation: status and metadata share the object's resourceVersion, so a request withdrawn
// meanwhile is never taken.
func (w *watcher) accept(ctx context.Context, req *v1.Request) error {
	now := metav1.NewTime(w.s.Runner.now())
	return w.writeRequest(ctx, req.ID, func(live *v1.MysqlCluster) bool {
		if r := live.Status.Request; r != nil && r.ID == req.ID {
			if r.State != v1.RequestAccepted || r.Epoch >= w.supEpoch && r.Holder != w.s.Runner.Holder {
				return false // answered, or held by a supervisor at least as new as this one
			}
			r.Holder, r.Epoch = w.s.Runner.Holder, w.supEpoch // taken over from one that stopped
			return true
		}
		live.Status.Request = &v1.RequestStatus{ID: req.ID, Type: req.Type, State: v1.RequestAccepted, Holder: w.s.Runner.Holder, Epoch: w.supEpoch, AcceptedAt: now}
		return true
	})
}

// writeRequest changes the live object's status.request when the annotation still holds
// request id and change agrees; errRequestGone otherwise.
func (w *watcher) writeRequest(ctx context.Context, id string, change func(live *v1.MysqlCluster) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if w.sup != nil {
			if err := w.sup.Check(); err != nil {
				return fmt.Errorf("%w: %w", errRequestGone, err) // no longer the supervisor
			}
		}
		live := &v1.MysqlCluster{}
		if err := w.s.Runner.Kube.Get(ctx, w.key, live); err != nil {
			return err
		}
		req, perr := requestOf(live)
		if (id == invalidRequest) != (perr != nil) || perr == nil && (req == nil || req.ID != id) || !change(live) {
			return errRequestGone
		}
		return w.s.Runner.Kube.Status().Update(ctx, live)
	})
}

// runRequest runs the request's operation on a Runner holding the Lease, and returns the
// message to record.
func (w *watcher) runRequest(ctx context.Context, req *v1.Request) (string, error) {
	catchUp := time.Duration(0)
	if req.CatchUpTimeout != nil {
		catchUp = req.CatchUpTimeout.Duration
	}
	var msg string
	c := &v1.MysqlCluster{}
	if err := w.s.Runner.Kube.Get(ctx, w.key, c); err != nil {
		return "", err
	}
	err := w.withLease(ctx, c, true, func(ctx context.Context, r *Runner) error {
		cur := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, w.key, cur); err != nil {
			return err
		}
		// Still this supervisor's request, now that the Lease is held?
		if rs := cur.Status.Request; rs == nil || rs.ID != req.ID || rs.Holder != r.Holder || rs.State != v1.RequestAccepted {
			return errRequestGone
		}
		if rec := recordAnswering(cur, req); rec != nil {
			msg = rec.Message
			return recordResult(*rec)
		}
		op := cur.Status.Operation
		if op != nil && op.RequestID == req.ID {
			r.RequestID = req.ID
			return r.continueRecorded(ctx, w.key, op) // begun by a supervisor that stopped
		}
		if requestExpired(req, r.now()) {
			return fmt.Errorf("%w: the request expired at %s before it was carried out: nothing was done", outcome.ErrTimedOut, req.Deadline.UTC().Format(time.RFC3339))
		}
		if op != nil && op.Type == OperationConverge && req.Type == RequestSwitchover {
			// A converge (the repairer's, cut short for this request) goes first: it never
			// changes the primary, and a switchover needs the cluster free. (A failover
			// supersedes a converge by itself.)
			if err := r.continueRecorded(ctx, w.key, op); err != nil {
				return err
			}
			op = nil
		}
		r.RequestID = req.ID
		var err error
		switch req.Type {
		case RequestSwitchover:
			err = r.Switchover(ctx, w.key, SwitchoverOptions{To: req.To, CatchUpTimeout: catchUp, ResumeOnly: op != nil && op.Type == OperationSwitchover})
		case RequestFailover:
			err = r.Failover(ctx, w.key, FailoverOptions{To: req.To, Force: req.Force, Reason: req.Reason, CatchUpTimeout: catchUp, ResumeOnly: op != nil && op.Type == OperationFailover})
		case RequestUpgrade:
			err = r.Upgrade(ctx, w.key, UpgradeOptions{ResumeOnly: op != nil && op.Type == OperationUpgrade})
		case RequestScale:
			if req.Replicas == nil {
				return fmt.Errorf("a scale request names no instance count")
			}
			err = r.Scale(ctx, w.key, ScaleOptions{Replicas: *req.Replicas, DeleteData: req.DeleteData, NoSwitchover: req.NoSwitchover, ResumeOnly: op != nil && op.Type == OperationScale})
		case RequestRebuild:
			if req.Instance == "" {
				return fmt.Errorf("a rebuild request names no instance")
			}
			err = r.Rebuild(ctx, w.key, RebuildOptions{Instance: req.Instance, Donor: req.Donor})
		case RequestResume:
			if sc := cur.Status.Scale; sc != nil && sc.Action == scaleRebuild && (op == nil || op.Type == OperationRebuild) {
				err = r.Rebuild(ctx, w.key, RebuildOptions{ResumeOnly: true})
				break
			}
			if cur.Status.Scale != nil && (op == nil || op.Type == OperationScale) {
				err = r.Scale(ctx, w.key, ScaleOptions{ResumeOnly: true})
				break
			}
			if cur.Status.Upgrade != nil && (op == nil || op.Type == OperationUpgrade || isHandoff(cur, op)) {
				err = r.Upgrade(ctx, w.key, UpgradeOptions{ResumeOnly: true})
				break
			}
			if op == nil {
				msg = "nothing to resume: no operation is recorded on " + w.key.Name
				return nil
			}
			err = r.continueRecorded(ctx, w.key, op)
		case RequestAbort:
			msg, err = r.Abort(ctx, w.key)
		default:
			return fmt.Errorf("unknown request type %q (sent by a newer mysqlctl?)", req.Type)
		}
		if err == nil && msg == "" {
			after := &v1.MysqlCluster{}
			if gerr := r.Kube.Get(ctx, w.key, after); gerr == nil && len(after.Status.History) > 0 {
				msg = after.Status.History[0].Message
			}
		}
		return err
	})
	return msg, err
}

// answer records the request's outcome (as a compare-and-swap: only while the annotation holds
// the request and no other supervisor took it), then removes the annotation.
func (w *watcher) answer(ctx context.Context, req *v1.Request, err error, msg string) error {
	now := metav1.NewTime(w.s.Runner.now())
	rs := &v1.RequestStatus{ID: req.ID, Type: req.Type, State: v1.RequestSucceeded, Holder: w.s.Runner.Holder, AcceptedAt: now, FinishedAt: &now, Message: msg}
	if err != nil {
		rs.State, rs.Message, rs.Outcome = v1.RequestFailed, err.Error(), outcomeKind(err)
	}
	var c *v1.MysqlCluster
	werr := w.writeRequest(ctx, req.ID, func(live *v1.MysqlCluster) bool {
		c = live
		if r := live.Status.Request; r != nil && r.ID == req.ID && req.ID != invalidRequest {
			if r.State != v1.RequestAccepted || r.Holder != w.s.Runner.Holder || r.Epoch != w.supEpoch {
				return false
			}
			rs.AcceptedAt = r.AcceptedAt
		}
		rs.Epoch = w.supEpoch
		live.Status.Request = rs
		return true
	})
	if errors.Is(werr, errRequestGone) {
		delete(w.unwritten, req.ID)
		return nil
	}
	if werr != nil {
		return werr
	}
	delete(w.unwritten, req.ID)
	verb := map[v1.RequestState]string{v1.RequestSucceeded: "succeeded", v1.RequestFailed: "failed"}[rs.State]
	w.report(Transition{Action: "request", Reason: fmt.Sprintf("the %s %s %s: %s", req.Type, req.ID, verb, rs.Message)})
	w.s.Runner.event(ctx, c, rs.State == v1.RequestFailed, "Request"+string(rs.State), fmt.Sprintf("the %s %s asked by %s: %s", req.Type, req.ID, req.By, rs.Message))
	return w.clearRequest(ctx, req.ID)
}

// clearRequest removes the annotation if it still holds request id (or one that does not parse).
func (w *watcher) clearRequest(ctx context.Context, id string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &v1.MysqlCluster{}
		if err := w.s.Runner.Kube.Get(ctx, w.key, c); err != nil {
			return err
		}
		if req, err := requestOf(c); err == nil && (req == nil || req.ID != id) {
			return nil
		}
		delete(c.Annotations, v1.AnnotationRequest)
		return w.s.Runner.Kube.Update(ctx, c)
	})
}
