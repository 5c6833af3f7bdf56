package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// abortable lists, per operation type, the stages before the point of no return: until the
// candidate is promoted, nothing has changed hands and the operation can be rolled back.
var abortable = map[string][]string{
	OperationSwitchover: {StageValidating, StageFencing, StageWaitingForCandidate, StageRollingBack},
	OperationFailover:   {StageConfirming, StageFencing, StageElecting, StageWaitingForRelayLog, StageRollingBack},
}

// provenReadOnly observes the instance and proves it read-only, for good: no older actor's
// statement can make it writable afterwards.
func (r *Runner) provenReadOnly(ctx context.Context, c *v1.MysqlCluster, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Any running pod will do (readiness lags a restart): only its answer counts.
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return err
	}
	var members []Instance
	for ord, p := range pods {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			members = append(members, Instance{ordinal: ord, Pod: p})
		}
	}
	creds, err := r.Credentials(ctx, c)
	if err != nil {
		return err
	}
	ss := r.OpenSessions(ctx, members, creds)
	defer ss.Close()
	in, err := ss.Connect(name)
	if err != nil {
		return err
	}
	// The epoch first, the read after: an older actor's late read_only=OFF (a promotion sent
	// before it was paused) cannot land once the server stores this actor's epoch, so what is
	// read stays true.
	if err := in.ClaimEpoch(ctx); err != nil {
		return err
	}
	w, err := in.Writable(ctx)
	if err != nil {
		return err
	}
	if w {
		return errors.New("it answers writable")
	}
	return nil
}

// nothingToAbort is Abort's answer when no operation is recorded: nothing was asked that could
// be refused, so it is not an error.
func nothingToAbort(key client.ObjectKey) string {
	return "nothing to abort: no operation is in progress on " + key.Name
}

// Abort rolls back the operation recorded in the cluster's status, where a rollback is
// defined. It first persists the RollingBack stage (so that a crash resumes the rollback, never
// the operation), then runs it: a switchover's old primary is made writable again; a failover's
// stopped receivers are restarted and the old primary put back in the primary Service. Past
// promotion, or for other operation types, Abort refuses with outcome.ErrUnsafe; with no
// operation recorded it changes nothing and says so. It returns the
// message recorded in the history.
func (r *Runner) Abort(ctx context.Context, key client.ObjectKey) (string, error) {
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return "", err
	}
	op := c.Status.Operation
	if op == nil && c.Status.Upgrade != nil {
		return r.abortUpgrade(ctx, c)
	}
	if sc := c.Status.Scale; sc != nil && sc.Action == ScaleRebuild && (op == nil || op.Type == OperationRebuild) {
		return r.abortRebuild(ctx, c)
	}
	if op == nil && c.Status.Scale != nil {
		return r.abortScale(ctx, c)
	}
	if op == nil {
		return nothingToAbort(key), nil
	}
	if op.Holder != r.Holder || op.Epoch != r.Epoch {
		// Left by an actor that is gone: take it over first (a compare-and-swap on its holder
		// and epoch), so that the rollback's writes are this actor's.
		if err := r.adopt(ctx, c, op); err != nil {
			return "", err
		}
		if err := r.Kube.Get(ctx, key, c); err != nil {
			return "", err
		}
		if op = c.Status.Operation; op == nil {
			return nothingToAbort(key), nil
		}
	}
	if op.Type == OperationUpgrade {
		return r.abortUpgrade(ctx, c)
	}
	if op.Type == OperationConverge {
		// A converge never changes the primary: ending it undoes nothing and loses nothing.
		now := r.Clock()
		msg := fmt.Sprintf("converge aborted at stage %s by %s", op.Stage, r.Holder)
		if err := r.persist(ctx, c, op, op.Stage, func(s *v1.MysqlClusterStatus) {
			phase := s.Phase
			finish(s, now, "Aborted", msg, 0)
			s.Phase = phase // nothing was repaired: the cluster is as it was
		}); err != nil {
			return "", err
		}
		return msg, nil
	}
	stages, ok := abortable[op.Type]
	if !ok {
		return "", fmt.Errorf("%w: a %s has no rollback; run 'resume %s' to finish it", outcome.ErrUnsafe, op.Type, key.Name)
	}
	promoting := op.Stage == StagePromoting && op.Evidence != nil && op.Evidence.PromotedAt == nil && op.Evidence.Candidate != ""
	if promoting {
		// Stopped at Promoting (its candidate stopped answering, or came back without its data):
		// a rollback is safe once the candidate is proven read-only, as a restarted or replaced
		// server is; this actor's lease keeps any stale promotion from running after the proof.
		if err := r.provenReadOnly(ctx, c, op.Evidence.Candidate); err != nil {
			return "", fmt.Errorf("%w: the %s stopped at stage Promoting and its candidate %s cannot be proven read-only (%v): it may have been promoted already, so nothing is rolled back; bring it back (delete its pod: it restarts read-only) and run 'abort %s' or 'resume %s' again",
				outcome.ErrUnsafe, op.Type, op.Evidence.Candidate, err, key.Name, key.Name)
		}
	}
	if !slices.Contains(stages, op.Stage) && !promoting {
		return "", fmt.Errorf("%w: the %s is at stage %s, past promotion: the new primary may have taken writes, so it cannot be rolled back; run 'resume %s' to finish it", outcome.ErrUnsafe, op.Type, op.Stage, key.Name)
	}
	if op.Stage != StageRollingBack {
		reason := fmt.Sprintf("%s aborted at stage %s by %s", op.Type, op.Stage, r.Holder)
		if err := r.persist(ctx, c, op, StageRollingBack, func(s *v1.MysqlClusterStatus) {
			e := evidenceOf(s)
			e.RollbackReason, e.RollbackResult = reason, "Aborted"
		}); err != nil {
			return "", err
		}
	}
	var err error
	if op.Type == OperationSwitchover {
		err = r.Switchover(ctx, key, SwitchoverOptions{ResumeOnly: true})
	} else {
		err = r.Failover(ctx, key, FailoverOptions{ResumeOnly: true})
	}
	if err != nil && !errors.Is(err, ErrAborted) {
		return "", err
	}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return "", err
	}
	if c.Status.Upgrade != nil && c.Status.Operation == nil {
		// The handoff switchover of an upgrade was rolled back: the upgrade ends too.
		return r.abortUpgrade(ctx, c)
	}
	for _, h := range c.Status.History {
		if h.Type == op.Type {
			return h.Message, nil
		}
	}
	return "rolled back", nil
}
