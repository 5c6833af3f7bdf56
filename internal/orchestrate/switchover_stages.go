package orchestrate

// The switchover stages, one function each, walked by the stage engine (stage.go).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

func (r *Runner) swValidating(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, op, old, members, byName, opts, observe := x.c, x.op, x.old, x.members, x.byName, x.swOpts, x.ss.Observe
	e, refusal, err := switchoverCandidate(c, members, byName, observe, old, opts)
	if err != nil {
		return "", nil, err
	}
	if refusal != "" {
		return "", nil, r.failSwitchover(ctx, c, op, refusal)
	}
	r.Event(ctx, c, false, "CandidateChosen", fmt.Sprintf("%s chosen: %s; rejected: %s", e.Candidate, e.CandidateReason, strings.Join(e.Rejected, "; ")))
	return StageFencing, func(s *v1.MysqlClusterStatus) { s.Operation.Evidence = e }, nil
}

func (r *Runner) swFencing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, old, ss, connect := x.c, x.old, x.ss, x.ss.Connect
	fencedAt := metav1.NewTime(x.now)
	in, err := connect(old)
	if err != nil {
		return "", nil, err
	}
	// Out of the primary Service first: a client that reconnects no longer reaches it.
	if err := r.labelRole(ctx, c, old, v1.RoleUnknown); err != nil {
		return "", nil, err
	}
	fenced, method, err := fenceOverSQL(ctx, in, ss, old)
	if err != nil && x.overdue {
		// The fence cannot be verified within its bound: undo it rather than leave the
		// primary read-only and out of its Service until someone aborts.
		reason := fmt.Sprintf("the fence of %s was not verified within %s: %v", old, postPromotionBound, err)
		return StageRollingBack, func(s *v1.MysqlClusterStatus) {
			e := evidenceOf(s)
			e.RollbackReason, e.RollbackResult = reason, "Failed"
		}, nil
	}
	if err != nil {
		// Retried until the bound (a fence can wait behind commits hung for acknowledgements).
		return "", nil, notYet("fencing %s: %v", old, err)
	}
	r.Event(ctx, c, false, "FenceVerified", fmt.Sprintf("%s fenced: %s; its GTID set %s", old, method, fenced))
	return StageWaitingForCandidate, func(s *v1.MysqlClusterStatus) {
		e := s.Operation.Evidence
		e.FenceState, e.FenceMethod, e.FencedGTIDSet = v1.FenceVerified, method, fenced
		e.FenceStartedAt = &fencedAt
	}, nil
}

func (r *Runner) swWaitingForCandidate(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	ev, opts, connect := x.ev, x.swOpts, x.ss.Connect
	in, err := connect(ev.Candidate)
	if err != nil {
		return "", nil, err
	}
	if err := in.WaitForGTID(ctx, ev.FencedGTIDSet, opts.CatchUpTimeout); err != nil {
		if errors.Is(err, topology.ErrWaitTimeout) {
			// Roll back, persisted first: a crash half-way through resumes the rollback,
			// never the promotion of a candidate while the old primary is writable again.
			reason := fmt.Sprintf("%s did not apply the fenced primary's %s within %s", ev.Candidate, ev.FencedGTIDSet, opts.CatchUpTimeout)
			return StageRollingBack, func(s *v1.MysqlClusterStatus) {
				e := evidenceOf(s)
				e.RollbackReason, e.RollbackResult = reason, "Failed"
			}, nil
		}
		return "", nil, err
	}
	return StagePromoting, nil, nil
}

func (r *Runner) swRollingBack(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, old, now, connect := x.c, x.ev, x.old, x.now, x.ss.Connect
	// Nothing changed hands: the old primary takes writes again.
	in, err := connect(old)
	if err == nil {
		err = r.openPrimary(ctx, c, in, old)
	}
	if err != nil && x.overdue {
		// The old primary does not answer: it stays fenced (read-only, out of the primary
		// Service), and a failover replaces it. Never wait for it forever.
		msg := fmt.Sprintf("%s; the old primary %s does not answer (%v): it is out of the primary Service (fence %s), no instance is known writable; run 'failover %s'", ev.RollbackReason, old, err, ev.FenceState, c.Name)
		r.Event(ctx, c, true, "SwitchoverRolledBack", msg)
		t := metav1.NewTime(now)
		return "", func(s *v1.MysqlClusterStatus) {
			finish(s, now, ev.RollbackResult, msg, 0)
			s.Phase = v1.PhaseDegraded
			s.HA = NextHAStatus(s.HA, v1.HADegraded, t, []string{msg}, OperationSwitchover)
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "PrimaryUnreachable", Message: msg})
		}, nil
	}
	if err != nil {
		return "", nil, notYet("the old primary %s does not answer yet: %v", old, err)
	}
	msg := ev.RollbackReason + "; the fence on " + old + " was undone, it is the primary again"
	r.Event(ctx, c, true, "SwitchoverRolledBack", msg)
	return "", func(s *v1.MysqlClusterStatus) { finish(s, now, ev.RollbackResult, msg, 0) }, nil
}

func (r *Runner) swPromoting(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, members := x.c, x.ev, x.members
	in, err := r.promotionTarget(ctx, x)
	if err != nil {
		return "", nil, err
	}
	acks := 0
	for _, m := range members {
		if m.Pod.Name != ev.Candidate && !quarantined(c, m.Pod.Name) {
			acks++
		}
	}
	return r.promoteAt(ctx, x, in, acks, v1.RoleReplica)
}

func (r *Runner) swMovingPrimary(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, old := x.c, x.ev, x.old
	change, err := r.movePrimary(ctx, c, old, v1.RoleReplica, ev.Candidate)
	return StageRepointing, change, err
}

func (r *Runner) swRepointing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, members, creds, connect, observe := x.c, x.ev, x.members, x.creds, x.ss.Connect, x.ss.Observe
	newIP := specs.PodHost(c, ev.Candidate)
	for _, m := range members {
		name := m.Pod.Name
		if name == ev.Candidate || quarantined(c, name) {
			continue
		}
		in, err := connect(name)
		if err == nil {
			var s topology.Snapshot
			if s, err = observe(name); err == nil && !replicatesFrom(s, newIP) {
				err = r.joinReplica(ctx, c, in, s, newIP, x.ss.port(ev.Candidate), creds)
			}
		}
		if err != nil {
			if x.overdue {
				continue // past the bound: Verifying names it, reconcile repairs it later
			}
			return "", nil, err
		}
	}
	return StageVerifying, nil, nil
}

func (r *Runner) swVerifying(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, op, ev, old, members, byName, ss, now, observe := x.c, x.op, x.ev, x.old, x.members, x.byName, x.ss, x.now, x.ss.Observe
	ns, ok, next, change, err := r.observeNewPrimary(ctx, x)
	if !ok {
		return next, change, err
	}
	if back, change := recheckPrimary(ev.Candidate, byName[ev.Candidate].Pod, ns); back != "" {
		return back, change, nil
	}
	newIP := specs.PodHost(c, ev.Candidate)
	// A replica refused by configuration is waited for like one that is down: past the
	// promotion, the bound leaves it for later repair rather than keep the cluster waiting.
	pending, _, err := ss.pendingReplicas(c, members, ev.Candidate, newIP, ns)
	if err != nil {
		return "", nil, err
	}
	if len(pending) > 0 && !x.overdue {
		return "", nil, notYet("%s", strings.Join(pending, "; "))
	}
	// Transactions the fenced primary had that the new primary lacks: 0 after
	// WaitingForCandidate proved the catch-up; computed again here and recorded, never assumed.
	lost := missing(ns, ev.FencedGTIDSet)
	dur := now.Sub(opStart(op)).Round(time.Millisecond)
	msg := fmt.Sprintf("primary moved from %s to %s in %s; every transaction of the fenced primary is on the new one", old, ev.Candidate, dur)
	if lost != 0 {
		msg = fmt.Sprintf("primary moved from %s to %s in %s; %d transaction(s) of the fenced primary are NOT on the new one", old, ev.Candidate, dur, lost)
	}
	if len(pending) > 0 {
		msg += fmt.Sprintf("; left for repair after %s (run reconcile when they answer): %s", postPromotionBound, strings.Join(pending, "; "))
	}
	if absent := absentMembers(c, members); len(absent) > 0 {
		msg += "; not serving (no ready pod; run reconcile when they return): " + strings.Join(absent, ", ")
	}
	oldReplicates := false
	if os, err := observe(old); err == nil {
		oldReplicates = replicatesFrom(os, specs.PodHost(c, ev.Candidate))
	}
	semi, err := r.settleSemiSync(ctx, x, ev.Candidate, ns, len(members)-1-len(pending)-quarantinedCount(c))
	if err != nil {
		return "", nil, err
	}
	r.Event(ctx, c, lost != 0, "SwitchoverSucceeded", msg)
	return "", func(s *v1.MysqlClusterStatus) {
		markPrimary(s, ev.Candidate, ns, old, v1.RoleReplica)
		for i := range s.Instances {
			if s.Instances[i].Name == old && oldReplicates {
				s.Instances[i].Classification = string(topology.ClassReplicating)
			}
		}
		finish(s, now, "Succeeded", msg, lost)
		s.History[0].FormerPrimary = old
		semi(s)
	}, nil
}
