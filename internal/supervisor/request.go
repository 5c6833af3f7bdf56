package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

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
		return w.answer(ctx, &v1.Request{ID: orchestrate.InvalidRequest, Type: "unknown"}, perr, "")
	}
	if orchestrate.Answered(c, req.ID) {
		return w.clearRequest(ctx, req.ID) // answered, but the annotation stayed (a crash)
	}
	if a, ok := w.unwritten[req.ID]; ok {
		return w.answer(ctx, req, a.err, a.msg) // carried out; only its answer is left to write
	}
	if orchestrate.RequestExpired(req, w.s.Runner.Clock()) && !orchestrate.StartedBy(c, req.ID) {
		return w.answer(ctx, req, fmt.Errorf("%w: the request expired at %s before it was carried out: nothing was done", outcome.ErrTimedOut, req.Deadline.UTC().Format(time.RFC3339)), "")
	}
	if err := w.accept(ctx, req); err != nil {
		if errors.Is(err, orchestrate.ErrRequestGone) {
			return nil
		}
		return err
	}
	if rec := orchestrate.RecordAnswering(c, req); rec != nil {
		return w.answer(ctx, req, orchestrate.RecordResult(*rec), rec.Message)
	}
	w.report(Transition{Action: "request", Reason: fmt.Sprintf("carrying out the %s %s asked by %s", req.Type, req.ID, req.By)})
	w.s.Runner.Event(ctx, c, false, "RequestAccepted", fmt.Sprintf("the supervisor %s carries out the %s %s asked by %s", w.s.Runner.Holder, req.Type, req.ID, req.By))
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
	case errors.Is(err, orchestrate.ErrStopped), errors.Is(err, orchestrate.ErrLeaseLost), errors.Is(err, orchestrate.ErrRequestGone):
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
	now := metav1.NewTime(w.s.Runner.Clock())
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
// request id and change agrees; orchestrate.ErrRequestGone otherwise.
func (w *watcher) writeRequest(ctx context.Context, id string, change func(live *v1.MysqlCluster) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if w.sup != nil {
			if err := w.sup.Check(); err != nil {
				return fmt.Errorf("%w: %w", orchestrate.ErrRequestGone, err) // no longer the supervisor
			}
		}
		live := &v1.MysqlCluster{}
		if err := w.s.Runner.Kube.Get(ctx, w.key, live); err != nil {
			return err
		}
		req, perr := orchestrate.RequestOf(live)
		if (id == orchestrate.InvalidRequest) != (perr != nil) || perr == nil && (req == nil || req.ID != id) || !change(live) {
			return orchestrate.ErrRequestGone
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
	err := w.withLease(ctx, c, true, func(ctx context.Context, r *orchestrate.Runner) error {
		cur := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, w.key, cur); err != nil {
			return err
		}
		// Still this supervisor's request, now that the Lease is held?
		if rs := cur.Status.Request; rs == nil || rs.ID != req.ID || rs.Holder != r.Holder || rs.State != v1.RequestAccepted {
			return orchestrate.ErrRequestGone
		}
		if rec := orchestrate.RecordAnswering(cur, req); rec != nil {
			msg = rec.Message
			return orchestrate.RecordResult(*rec)
		}
		op := cur.Status.Operation
		if op != nil && op.RequestID == req.ID {
			r.RequestID = req.ID
			return continueRecorded(ctx, r, w.key, op) // begun by a supervisor that stopped
		}
		if orchestrate.RequestExpired(req, r.Clock()) {
			return fmt.Errorf("%w: the request expired at %s before it was carried out: nothing was done", outcome.ErrTimedOut, req.Deadline.UTC().Format(time.RFC3339))
		}
		if op != nil && op.Type == orchestrate.OperationConverge && req.Type == orchestrate.RequestSwitchover {
			// A converge (the repairer's, cut short for this request) goes first: it never
			// changes the primary, and a switchover needs the cluster free. (A failover
			// supersedes a converge by itself.)
			if err := continueRecorded(ctx, r, w.key, op); err != nil {
				return err
			}
			op = nil
		}
		r.RequestID = req.ID
		var err error
		switch req.Type {
		case orchestrate.RequestSwitchover:
			err = r.Switchover(ctx, w.key, orchestrate.SwitchoverOptions{To: req.To, CatchUpTimeout: catchUp, ResumeOnly: op != nil && op.Type == orchestrate.OperationSwitchover})
		case orchestrate.RequestFailover:
			err = r.Failover(ctx, w.key, orchestrate.FailoverOptions{To: req.To, Force: req.Force, Reason: req.Reason, CatchUpTimeout: catchUp, ResumeOnly: op != nil && op.Type == orchestrate.OperationFailover})
		case orchestrate.RequestUpgrade:
			err = r.Upgrade(ctx, w.key, orchestrate.UpgradeOptions{ResumeOnly: op != nil && op.Type == orchestrate.OperationUpgrade})
		case orchestrate.RequestScale:
			if req.Replicas == nil {
				return fmt.Errorf("a scale request names no instance count")
			}
			err = r.Scale(ctx, w.key, orchestrate.ScaleOptions{Replicas: *req.Replicas, DeleteData: req.DeleteData, NoSwitchover: req.NoSwitchover, ResumeOnly: op != nil && op.Type == orchestrate.OperationScale})
		case orchestrate.RequestRebuild:
			if req.Instance == "" {
				return fmt.Errorf("a rebuild request names no instance")
			}
			err = r.Rebuild(ctx, w.key, orchestrate.RebuildOptions{Instance: req.Instance, Donor: req.Donor})
		case orchestrate.RequestResume:
			if sc := cur.Status.Scale; sc != nil && sc.Action == orchestrate.ScaleRebuild && (op == nil || op.Type == orchestrate.OperationRebuild) {
				err = r.Rebuild(ctx, w.key, orchestrate.RebuildOptions{ResumeOnly: true})
				break
			}
			if cur.Status.Scale != nil && (op == nil || op.Type == orchestrate.OperationScale) {
				err = r.Scale(ctx, w.key, orchestrate.ScaleOptions{ResumeOnly: true})
				break
			}
			if cur.Status.Upgrade != nil && (op == nil || op.Type == orchestrate.OperationUpgrade || orchestrate.IsHandoff(cur, op)) {
				err = r.Upgrade(ctx, w.key, orchestrate.UpgradeOptions{ResumeOnly: true})
				break
			}
			if op == nil {
				msg = "nothing to resume: no operation is recorded on " + w.key.Name
				return nil
			}
			err = continueRecorded(ctx, r, w.key, op)
		case orchestrate.RequestAbort:
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
	now := metav1.NewTime(w.s.Runner.Clock())
	rs := &v1.RequestStatus{ID: req.ID, Type: req.Type, State: v1.RequestSucceeded, Holder: w.s.Runner.Holder, AcceptedAt: now, FinishedAt: &now, Message: msg}
	if err != nil {
		rs.State, rs.Message, rs.Outcome = v1.RequestFailed, err.Error(), orchestrate.OutcomeKind(err)
	}
	var c *v1.MysqlCluster
	werr := w.writeRequest(ctx, req.ID, func(live *v1.MysqlCluster) bool {
		c = live
		if r := live.Status.Request; r != nil && r.ID == req.ID && req.ID != orchestrate.InvalidRequest {
			if r.State != v1.RequestAccepted || r.Holder != w.s.Runner.Holder || r.Epoch != w.supEpoch {
				return false
			}
			rs.AcceptedAt = r.AcceptedAt
		}
		rs.Epoch = w.supEpoch
		live.Status.Request = rs
		return true
	})
	if errors.Is(werr, orchestrate.ErrRequestGone) {
		delete(w.unwritten, req.ID)
		return nil
	}
	if werr != nil {
		return werr
	}
	delete(w.unwritten, req.ID)
	verb := map[v1.RequestState]string{v1.RequestSucceeded: "succeeded", v1.RequestFailed: "failed"}[rs.State]
	w.report(Transition{Action: "request", Reason: fmt.Sprintf("the %s %s %s: %s", req.Type, req.ID, verb, rs.Message)})
	w.s.Runner.Event(ctx, c, rs.State == v1.RequestFailed, "Request"+string(rs.State), fmt.Sprintf("the %s %s asked by %s: %s", req.Type, req.ID, req.By, rs.Message))
	return w.clearRequest(ctx, req.ID)
}

// clearRequest removes the annotation if it still holds request id (or one that does not parse).
func (w *watcher) clearRequest(ctx context.Context, id string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &v1.MysqlCluster{}
		if err := w.s.Runner.Kube.Get(ctx, w.key, c); err != nil {
			return err
		}
		if req, err := orchestrate.RequestOf(c); err == nil && (req == nil || req.ID != id) {
			return nil
		}
		delete(c.Annotations, v1.AnnotationRequest)
		return w.s.Runner.Kube.Update(ctx, c)
	})
}
