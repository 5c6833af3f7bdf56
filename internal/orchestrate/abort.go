package orchestrate

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// abortable lists, per operation type, the stages before the point of no return: until the
// candidate is promoted, nothing has changed hands and the operation can be rolled back.
var abortable = map[string][]string{
	OperationSwitchover: {StageValidating, StageFencing, StageWaitingForCandidate},
	OperationFailover:   {StageConfirming, StageFencing, StageElecting, StageWaitingForRelayLog},
}

// Abort rolls back the operation recorded in the cluster's status, where a rollback is
// defined: a switchover un-fences the old primary and puts it back in the primary Service; a
// failover restarts the replicas' receivers it stopped and puts the old primary back in the
// primary Service (it stays read-only if it was fenced over SQL: it was not taking writes).
// Past promotion, or for other operation types, Abort refuses with outcome.ErrUnsafe.
func (r *Runner) Abort(ctx context.Context, key client.ObjectKey) (string, error) {
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return "", err
	}
	op := c.Status.Operation
	if op == nil {
		return "", fmt.Errorf("%w: no operation is in progress on %s", outcome.ErrUnsafe, key.Name)
	}
	stages, ok := abortable[op.Type]
	if !ok {
		return "", fmt.Errorf("%w: a %s has no rollback; run 'resume %s' to finish it", outcome.ErrUnsafe, op.Type, key.Name)
	}
	if !slices.Contains(stages, op.Stage) {
		return "", fmt.Errorf("%w: the %s is at stage %s, past promotion: the new primary may have taken writes, so it cannot be rolled back; run 'resume %s' to finish it", outcome.ErrUnsafe, op.Type, op.Stage, key.Name)
	}
	ev := op.Evidence
	if ev == nil {
		ev = &v1.OperationEvidence{}
	}
	old := ev.FencedPrimary
	if old == "" {
		old = c.Status.CurrentPrimary
	}
	creds, err := r.credentials(ctx, c)
	if err != nil {
		return "", err
	}
	var done []string
	switch op.Type {
	case OperationSwitchover:
		if op.Stage != StageValidating {
			members, err := r.members(ctx, c)
			if err != nil {
				return "", err
			}
			ss := r.openSessions(ctx, members, creds)
			defer ss.close()
			in, err := ss.connect(old)
			if err != nil {
				return "", err
			}
			if err := in.MakeWritable(ctx); err != nil {
				return "", err
			}
			done = append(done, old+" made writable again")
		}
	case OperationFailover:
		v, err := r.failoverView(ctx, c, old)
		if err != nil {
			return "", err
		}
		ss := r.openSessions(ctx, v.ready, creds)
		defer ss.close()
		members, _ := v.members(c, ss)
		for _, m := range members {
			if m.Quarantined || m.Snapshot.Replica == nil || m.Snapshot.Replica.IOThread != "No" {
				continue
			}
			in, err := ss.connect(m.Name)
			if err != nil {
				return "", err
			}
			if err := in.StartIOThread(ctx); err != nil {
				return "", err
			}
			done = append(done, m.Name+" receiver restarted")
		}
	}
	if err := r.labelRole(ctx, c, old, v1.RolePrimary); err != nil {
		return "", err
	}
	done = append(done, old+" back in the primary Service")
	msg := fmt.Sprintf("%s aborted at stage %s by %s: %v", op.Type, op.Stage, r.Holder, done)
	now := r.now()
	err = r.persist(ctx, c, op, op.Stage, func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Aborted", msg, 0)
		if op.Type == OperationFailover {
			// The primary was down when the failover began; nothing repaired it.
			s.Phase = v1.PhaseDegraded
			t := metav1.NewTime(now)
			s.HA = haState(s.HA, v1.HADegraded, t, []string{msg})
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "FailoverAborted", Message: msg})
		}
	})
	if err != nil {
		return "", err
	}
	r.event(ctx, c, true, "OperationAborted", msg)
	return msg, nil
}
