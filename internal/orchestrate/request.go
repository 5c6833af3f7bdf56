package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// RequestOf returns the request left on the cluster, nil when there is none. A request that
// does not parse is answered as failed, so its command does not wait forever.
func RequestOf(c *v1.MysqlCluster) (*v1.Request, error) {
	raw, ok := c.Annotations[v1.AnnotationRequest]
	if !ok {
		return nil, nil
	}
	req := &v1.Request{}
	if err := json.Unmarshal([]byte(raw), req); err != nil || req.ID == "" || req.ID == InvalidRequest {
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
		if other, err := RequestOf(c); err == nil && other != nil && other.ID != req.ID && !Answered(c, other.ID) {
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
		if req, _ := RequestOf(c); req == nil || req.ID != id {
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
		if req, _ := RequestOf(c); req == nil || req.ID != id || Answered(c, id) || StartedBy(c, id) {
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
	if req, _ := RequestOf(c); req != nil && req.ID == id {
		pending = true
	}
	if r := c.Status.Request; r != nil && r.ID == id {
		return r, pending
	}
	if rec := historyOf(c, id); rec != nil {
		// Answered, and its status.request replaced by a later request since.
		rs := &v1.RequestStatus{ID: id, Type: rec.Type, State: v1.RequestSucceeded, Message: rec.Message, FinishedAt: &rec.FinishedAt}
		if err := RecordResult(*rec); err != nil {
			rs.State, rs.Outcome = v1.RequestFailed, OutcomeKind(err)
		}
		return rs, pending
	}
	return nil, pending
}

// Answered reports whether status holds the outcome of request id.
func Answered(c *v1.MysqlCluster, id string) bool {
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

// OutcomeKind is the outcome a request's error is recorded as (OutcomeConfig, OutcomeTimedOut, …).
func OutcomeKind(err error) string {
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

// InvalidRequest is the ID under which an annotation that does not parse is answered.
const InvalidRequest = "invalid"

// ErrRequestGone means the request is no longer this supervisor's to carry out: it was
// withdrawn, answered, or taken by another supervisor meanwhile.
var ErrRequestGone = errors.New("the request is no longer this supervisor's")

// historyOf returns the history record of the operation request id started, if it finished.
func historyOf(c *v1.MysqlCluster, id string) *v1.OperationRecord {
	for i := range c.Status.History {
		if h := &c.Status.History[i]; h.RequestID == id && (h.Type == OperationSwitchover || h.Type == OperationFailover || h.Type == OperationUpgrade || h.Type == OperationScale || h.Type == OperationRebuild) {
			return h
		}
	}
	return nil
}

// RecordAnswering returns the history record that answers the request: for a scale, its own
// record, never the handoff switchover it ran first under the same request.
func RecordAnswering(c *v1.MysqlCluster, req *v1.Request) *v1.OperationRecord {
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

// StartedBy reports whether request id began an operation that is recorded or finished.
func StartedBy(c *v1.MysqlCluster, id string) bool {
	return c.Status.Operation != nil && c.Status.Operation.RequestID == id || historyOf(c, id) != nil
}

// RequestExpired reports whether the requester stopped waiting for req (its deadline passed,
// with a minute's allowance for clocks that disagree).
func RequestExpired(req *v1.Request, now time.Time) bool {
	return req.Deadline != nil && now.After(req.Deadline.Add(time.Minute))
}
