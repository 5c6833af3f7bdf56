package orchestrate

// The failover stages, one function each, walked by the stage engine (stage.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

func (r *Runner) foConfirming(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, op, ev, forced, v, creds, ss, now, opts := x.c, x.op, x.ev, x.forced, x.v, x.creds, x.ss, x.now, x.foOpts
	j, refused := r.confirm(ctx, c, v, ss, creds, opts)
	if refused != nil && !forced {
		// The path to the primary is refused, not the primary: nothing is known about it, and
		// nothing has changed yet (the stage engine withdraws the operation).
		return "", nil, refused
	}
	switch {
	case j.Verdict == failover.Alive:
		return "", nil, r.refuse(ctx, c, op, j.Reason, j.Evidence)
	case j.Verdict == failover.Unreachable && !forced:
		return "", nil, r.refuse(ctx, c, op, j.Reason+"; if you know it is dead, run failover --force --reason TEXT", j.Evidence)
	}
	detection := j.Evidence
	if j.Verdict == failover.Unreachable {
		detection = append(detection, "FORCED past an unconfirmed death: "+ev.Forced)
	}
	switch h := c.Status.HA; {
	case opts.Automatic:
		detection = append(detection, "started automatically by the supervisor "+r.Holder)
	case h != nil && h.LastFailover != nil && now.Sub(h.LastFailover.Time) < FailoverCooldown(c):
		detection = append(detection, fmt.Sprintf("started by a person %s after the last failover, inside failover.cooldown (%s), which binds only automatic failovers",
			now.Sub(h.LastFailover.Time).Round(time.Second), FailoverCooldown(c)))
	}
	r.Event(ctx, c, j.Verdict == failover.Unreachable, "PrimaryConfirmedDown", fmt.Sprintf("%s: %s", j.Verdict, j.Reason))
	return StageFencing, func(s *v1.MysqlClusterStatus) {
		e := evidenceOf(s)
		e.PrimaryVerdict, e.Detection = string(j.Verdict), detection
		e.SemiSyncProven = semiSyncProvenNow(c, x.old, now)
		if e.PrimaryCheckedAt == nil {
			e.PrimaryCheckedAt, e.PrimaryStartedAt = timeOrNil(opts.PrimaryCheckedAt), timeOrNil(opts.PrimaryStartedAt)
			e.PrimaryCheckedGTID = opts.PrimaryCheckedGTID
		}
		s.HA = NextHAStatus(s.HA, v1.HAFailoverInProgress, metav1.NewTime(now), detection, OperationFailover)
		s.Phase = v1.PhaseFailingOver
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "FailingOver", Message: "failover of " + x.old + " started: " + string(j.Verdict)})
	}, nil
}

func (r *Runner) foFencing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, op, ev, forced, old, v, creds, ss := x.c, x.op, x.ev, x.forced, x.old, x.v, x.creds, x.ss
	fencedAt := metav1.NewTime(x.now)
	// Out of the primary Service first, whatever the path: no new client reaches it. The
	// members are observed meanwhile (nothing is changed on a server before the label is on).
	labelled := make(chan error, 1)
	go func(done chan<- error) { done <- r.labelRole(ctx, c, old, v1.RoleUnknown) }(labelled)
	if ev.PrimaryVerdict == string(failover.ReadOnly) {
		if err := <-labelled; err != nil {
			return "", nil, err
		}
		labelled = nil
		next, change, err := r.fenceAnswering(ctx, x, fencedAt, "")
		if err != nil || next != "" {
			return next, change, err
		}
		// It stopped answering since Confirming: fence it as an unreachable primary.
	}
	members, missing := v.Members(c, ss)
	if labelled != nil {
		if err := <-labelled; err != nil {
			return "", nil, err
		}
	}
	// A quarantined member had its replication stopped when it was quarantined (and replication
	// does not start at boot): silent, it cannot acknowledge anything, so it does not keep the
	// receiver fence from being proven. One that answers has its receiver stopped like any other.
	missing = slices.DeleteFunc(missing, func(n string) bool { return quarantined(c, n) })
	// Everything that makes the receiver fence unprovable is known before acting: a refused
	// failover must not leave a live primary starved of acknowledgements.
	blocked, deadline := receiverFenceBlockers(c, old, members, missing, x.now)
	if len(blocked) > 0 && !forced && len(missing) > 0 && len(blocked) == 1 {
		// Only members that do not answer keep the receiver fence from being proven. A killed
		// primary restarts (read-only) within seconds, and one that answers is fenced over
		// SQL, which needs no replica: it is looked at again, up to the stage's bound, before
		// the fence is called Blocked.
		next, change, err := r.fenceAnswering(ctx, x, fencedAt, blocked[0])
		if err != nil || next != "" || !x.overdue {
			if err == nil && next == "" {
				err = notYet("%s: waiting up to %s for the old primary %s to answer, to fence it over SQL", blocked[0], fenceWaitBound, old)
			}
			return next, change, err
		}
		blocked[0] += fmt.Sprintf("; the old primary %s did not answer within %s to be fenced over SQL", old, fenceWaitBound)
	}
	if len(blocked) > 0 && !forced {
		// As found: the (unreachable) primary goes back into its Service's selector.
		if err := r.labelRole(ctx, c, old, v1.RolePrimary); err != nil {
			return "", nil, err
		}
		reason := "fence Blocked: " + strings.Join(blocked, "; ")
		return "", nil, r.degrade(ctx, c, op, reason+"; nothing was stopped and nothing was promoted (failover --force --reason TEXT overrides)", func(s *v1.MysqlClusterStatus) {
			evidenceOf(s).FenceState = v1.FenceBlocked
		})
	}
	stopped, err := r.stopReceivers(ctx, ss, members, creds)
	if err != nil {
		return "", nil, err
	}
	until := "no deadline can be proven"
	if deadline != nil {
		until = "holds until " + deadline.UTC().Format(time.RFC3339)
	}
	method := fmt.Sprintf("%s (%s); %s", fenceByReceivers, strings.Join(stopped, ", "), until)
	state := v1.FenceVerified
	if len(blocked) > 0 {
		notes := []string{"fence Blocked: " + strings.Join(blocked, "; "), "FORCED past a Blocked fence: " + ev.Forced}
		r.Event(ctx, c, true, "FenceBlocked", strings.Join(notes, "; "))
		state, method = v1.FenceBlocked, method+"; "+strings.Join(notes, "; ")
	} else {
		r.Event(ctx, c, false, "FenceVerified", old+" fenced: "+method)
	}
	return StageElecting, func(s *v1.MysqlClusterStatus) {
		e := evidenceOf(s)
		e.FenceState, e.FenceMethod = state, method
		e.FenceStartedAt, e.FenceDeadline = &fencedAt, deadline
	}, nil
}

// fenceWaitBound is how long Fencing waits for an old primary that does not answer when only
// members that do not answer either keep the receiver fence from being proven.
const fenceWaitBound = 30 * time.Second

// fenceAnswering fences the old primary over SQL when it answers: the fence then needs no
// replica. It returns no next stage, and no error, when the old primary does not answer (refused
// or timed out): the caller falls back to, or waits before, the receiver fence. after names what
// kept the receiver fence from being proven, when the fence over SQL comes after a wait.
func (r *Runner) fenceAnswering(ctx context.Context, x *stageEnv, fencedAt metav1.Time, after string) (string, func(*v1.MysqlClusterStatus), error) {
	c, old, ss := x.c, x.old, x.ss
	if after != "" {
		// Looked at afresh: the stage's sessions were opened while it was silent.
		if p := x.v.Pods[old]; p == nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			return "", nil, nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, refenceFenceTimeout)
	defer cancel()
	in, err := ss.Connect(old)
	var fenced, method string
	if err == nil {
		fenced, method, err = fenceOverSQL(cctx, in, ss, old)
	}
	if err != nil {
		// Only an old primary that does not answer is waited for, or falls back to the
		// receiver fence; any other failure is reported, never silently replaced.
		if k := topology.KindOf(err); k != topology.ErrorRefused && k != topology.ErrorTimeout && after == "" {
			return "", nil, err
		}
		return "", nil, nil
	}
	if after != "" {
		method += "; it answered after its death was confirmed (it restarted), while " + after
	}
	r.Event(ctx, c, false, "FenceVerified", fmt.Sprintf("%s fenced: %s; its GTID set %s", old, method, fenced))
	return StageElecting, func(s *v1.MysqlClusterStatus) {
		e := evidenceOf(s)
		e.FenceState, e.FenceMethod, e.FencedGTIDSet = v1.FenceVerified, method, fenced
		e.FenceStartedAt = &fencedAt
		if after != "" {
			// It answers: re-pointed by the failover like a primary found read-only.
			e.PrimaryVerdict = string(failover.ReadOnly)
		}
	}, nil
}

func (r *Runner) foElecting(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, op, ev, forced, v, ss := x.c, x.op, x.ev, x.forced, x.v, x.ss
	members, missing := v.Members(c, ss)
	d, err := failover.Elect(failover.ElectInput{
		Members: members, Missing: slices.DeleteFunc(missing, func(n string) bool { return quarantined(c, n) }), Absent: absences(c),
		History: knownHistory(c), MaxLag: maxCandidateLag(c), Requested: op.Target, Force: forced,
	})
	if err != nil {
		return "", nil, r.degrade(ctx, c, op, err.Error()+"; nothing was promoted", func(s *v1.MysqlClusterStatus) {
			evidenceOf(s).Rejected = d.Rejected
		})
	}
	reason := d.Reason
	if !d.Safe {
		reason += "; forced: " + ev.Forced
	}
	next := StageWaitingForRelayLog
	if relayLogApplied(d, members, ev.FencedGTIDSet) {
		// What WaitingForRelayLog waits for is applied already (nothing missing), so the
		// failover goes on to Promoting, which proves again that the candidate holds its
		// elected set.
		next = StagePromoting
		reason += "; it has applied everything it received"
		if ev.FencedGTIDSet != "" {
			reason += " and the fenced primary's set"
		}
		reason += ": WaitingForRelayLog is skipped"
	}
	r.Event(ctx, c, !d.Safe, "CandidateElected", fmt.Sprintf("%s elected: %s; rejected: %s", d.Candidate, reason, strings.Join(d.Rejected, "; ")))
	return next, func(s *v1.MysqlClusterStatus) {
		e := evidenceOf(s)
		e.Candidate, e.CandidateGTIDSet, e.CandidateReason, e.Rejected = d.Candidate, d.CandidateSet, reason, d.Rejected
		if next == StagePromoting {
			e.TransactionsMissing = 0
		}
	}, nil
}

// relayLogApplied reports whether the elected candidate, as Electing observed it, had applied
// everything it received and, when the old primary was fenced over SQL, every transaction of
// the fenced set: then WaitingForRelayLog has nothing to wait for.
func relayLogApplied(d failover.Decision, members []failover.Member, fenced string) bool {
	if !d.Drained {
		return false
	}
	if fenced == "" {
		return true
	}
	for _, m := range members {
		if m.Name == d.Candidate {
			return missing(m.Snapshot, fenced) == 0
		}
	}
	return false
}

func (r *Runner) foWaitingForRelayLog(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	ev, forced, ss, opts := x.ev, x.forced, x.ss, x.foOpts
	in, err := ss.Connect(ev.Candidate)
	if err != nil {
		return "", nil, err
	}
	if err := in.WaitForGTID(ctx, ev.CandidateGTIDSet, opts.CatchUpTimeout); err != nil {
		if errors.Is(err, topology.ErrWaitTimeout) {
			return "", nil, notYet("%s is still applying its relay log up to %s", ev.Candidate, ev.CandidateGTIDSet)
		}
		return "", nil, err
	}
	var missingN int64
	if ev.FencedGTIDSet != "" {
		// The old primary answered and was fenced over SQL: the candidate also waits for its
		// fenced set, bounded, while its receiver runs (a stopped one can never fetch it, and
		// waiting would only keep the cluster without a primary). What it still lacks then was
		// never acknowledged by a replica (semi-sync) and makes the old primary divergent: it
		// will be quarantined (and `watch` re-seeds a crashed one: see internal/supervisor's reseedTail).
		cs, err := ss.Observe(ev.Candidate)
		if err != nil {
			return "", nil, err
		}
		if cs.Replica != nil && cs.Replica.IOThread != topology.ThreadStopped {
			if err := in.WaitForGTID(ctx, ev.FencedGTIDSet, opts.CatchUpTimeout); err != nil && !errors.Is(err, topology.ErrWaitTimeout) {
				return "", nil, err
			}
			if cs, err = ss.Observe(ev.Candidate); err != nil {
				return "", nil, err
			}
		}
		missingN = missing(cs, ev.FencedGTIDSet)
		// Semi-sync's guarantee (what a replica acknowledged, a survivor holds) speaks for the
		// survivors only: an absent member the election passed on its recorded bound may be
		// the replica that acknowledged what the candidate lacks (it may have received more
		// since its bound was read). Then only the fenced primary's whole set bounds it.
		passed := AbsentPassed(ev.Rejected)
		if missingN != 0 && (!ev.SemiSyncProven || len(passed) > 0) && !forced {
			why := "semi-sync is not guaranteeing otherwise"
			if len(passed) > 0 {
				why = "the absent member(s) passed by the election, " + strings.Join(passed, ", ") + ", may have acknowledged them"
			}
			// Without that guarantee the transactions it lacks may have been acknowledged:
			// keep waiting (abort rolls back, --force overrides).
			return "", nil, notYet("%s still lacks %d transaction(s) of the fenced primary's %s, which may have been acknowledged (%s)", ev.Candidate, missingN, ev.FencedGTIDSet, why)
		}
	}
	return StagePromoting, func(s *v1.MysqlClusterStatus) { evidenceOf(s).TransactionsMissing = missingN }, nil
}

func (r *Runner) foRollingBack(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, old, v, ss, now := x.c, x.ev, x.old, x.v, x.ss, x.now
	// Nothing was promoted: the receivers the fence stopped run again and the old primary
	// is back in the primary Service (still read-only if it was fenced over SQL: it was
	// not taking writes). The primary is still down, so the cluster stays Degraded.
	members, missing := v.Members(c, ss)
	var done []string
	for _, m := range members {
		if m.Snapshot.Replica == nil || m.Snapshot.Replica.IOThread != topology.ThreadStopped || m.Quarantined {
			continue
		}
		in, err := ss.Connect(m.Name)
		if err != nil {
			return "", nil, err
		}
		if err := in.StartIOThread(ctx); err != nil {
			return "", nil, err
		}
		done = append(done, m.Name+" receiver restarted")
	}
	if err := r.labelRole(ctx, c, old, v1.RolePrimary); err != nil {
		return "", nil, err
	}
	done = append(done, old+" back in the primary Service")
	msg := ev.RollbackReason + ": " + strings.Join(done, "; ")
	if len(missing) > 0 {
		msg += "; unreachable, check their receivers when they return: " + strings.Join(missing, ", ")
	}
	r.Event(ctx, c, true, "FailoverRolledBack", msg)
	t := metav1.NewTime(now)
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, ev.RollbackResult, msg, 0)
		s.Phase = v1.PhaseDegraded
		s.HA = NextHAStatus(s.HA, v1.HADegraded, t, []string{msg}, OperationFailover)
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "FailoverRolledBack", Message: msg})
	}, nil
}

func (r *Runner) foPromoting(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, old, v, ss := x.c, x.ev, x.old, x.v, x.ss
	in, err := r.promotionTarget(ctx, x)
	if err != nil {
		return "", nil, err
	}
	// Only replicas that Repointing will join can acknowledge: an errant or unreachable one
	// would leave a semi-sync source waiting forever.
	names := []string{ev.Candidate}
	for _, m := range v.Ready {
		if m.Pod.Name != ev.Candidate && m.Pod.Name != old && !quarantined(c, m.Pod.Name) {
			names = append(names, m.Pod.Name)
		}
	}
	snaps, errs := ss.observeAll(names)
	if errs[0] != nil {
		return "", nil, errs[0]
	}
	others := 0
	for k := 1; k < len(names); k++ {
		if errs[k] == nil {
			if _, ok := Divergence(snaps[0], snaps[k]); ok {
				others++
			}
		}
	}
	return r.promoteAt(ctx, x, in, others, v1.RoleUnknown)
}

func (r *Runner) foMovingPrimary(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, old := x.c, x.ev, x.old
	change, err := r.movePrimary(ctx, c, old, v1.RoleUnknown, ev.Candidate)
	return StageRepointing, change, err
}

func (r *Runner) foRepointing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, ev, old, v, creds, ss, now, oldAnswers := x.c, x.ev, x.old, x.v, x.creds, x.ss, x.now, x.oldAnswers
	ns, ok, next, change, err := r.observeNewPrimary(ctx, x)
	if !ok {
		return next, change, err
	}
	newIP := specs.PodHost(c, ev.Candidate)
	var errant []v1.ErrantInstance
	for _, m := range v.Ready {
		name := m.Pod.Name
		if name == ev.Candidate || quarantined(c, name) || name == old && !oldAnswers {
			continue // a dead old primary is checked by reconcile when it returns
		}
		s, err := ss.Observe(name)
		if err != nil {
			if name == old || x.overdue || RecordedAbsent(c, name) {
				continue // Verifying names it; reconcile repairs it when it answers
			}
			return "", nil, err
		}
		if replicatesFrom(s, newIP) {
			continue
		}
		e, ok, err := ss.ancestor(ev.Candidate, ns, s)
		if err != nil {
			return "", nil, err
		}
		if !ok {
			errant = append(errant, v1.ErrantInstance{Name: name, Reason: e.Reason, ErrantGTIDs: e.ErrantGTIDs, Count: e.Count})
			continue
		}
		in, err := ss.Connect(name)
		if err == nil {
			err = r.joinReplica(ctx, c, in, s, newIP, ss.port(ev.Candidate), creds)
		}
		if err != nil && !x.overdue {
			return "", nil, err
		}
	}
	if err := r.quarantine(ctx, c, ss, errant); err != nil {
		return "", nil, err
	}
	return StageVerifying, func(s *v1.MysqlClusterStatus) {
		for _, e := range errant {
			addErrant(s, e, now)
		}
	}, nil
}

func (r *Runner) foVerifying(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, op, ev, forced, old, v, ss, now, oldAnswers := x.c, x.op, x.ev, x.forced, x.old, x.v, x.ss, x.now, x.oldAnswers
	ns, ok, next, change, err := r.observeNewPrimary(ctx, x)
	if !ok {
		return next, change, err
	}
	if back, change := recheckPrimary(ev.Candidate, v.Pods[ev.Candidate], ns); back != "" {
		return back, change, nil
	}
	newIP := specs.PodHost(c, ev.Candidate)
	var pending, down []string
	snaps := map[string]topology.Snapshot{ev.Candidate: ns}
	for _, m := range v.Ready {
		name := m.Pod.Name
		if name == ev.Candidate || quarantined(c, name) {
			continue
		}
		if name == old && !oldAnswers {
			down = append(down, name)
			continue
		}
		s, err := ss.Observe(name)
		if err != nil {
			if name == old || x.overdue || RecordedAbsent(c, name) {
				down = append(down, name)
				continue
			}
			return "", nil, err
		}
		snaps[name] = s
		why, err := ss.caughtUp(name, s, ev.Candidate, newIP, ns)
		if err != nil {
			return "", nil, err
		}
		if why != "" {
			pending = append(pending, why)
		}
	}
	if len(pending) > 0 && x.overdue {
		// Past the bound: the new primary is verified; the replicas that did not catch up
		// are named and left for reconcile.
		down, pending = append(down, pending...), nil
	}
	if len(pending) > 0 {
		return "", nil, notYet("%s", strings.Join(pending, "; "))
	}
	if _, ok := v.Pods[old]; !ok || !slices.ContainsFunc(v.Ready, func(i Instance) bool { return i.Pod.Name == old }) {
		down = append(down, old)
	}
	down = append(down, v.missing...)
	// Counted when the candidate was promoted, not now: the new primary has taken writes since.
	lost := int64(0)
	lostWhy := "every acknowledged transaction is on the new primary"
	switch {
	case forced:
		lost = -1
		lostWhy = "unknown: the failover was forced (" + ev.Forced + ")"
	case ev.FencedGTIDSet == "" && !ev.SemiSyncProven:
		lost = -1
		lostWhy = "unknown: the old primary was not last observed as a semi-synchronous source that waits for acknowledgements, so it may have acknowledged commits no replica received"
	case ev.TransactionsMissing > 0 && ev.SemiSyncProven:
		// A commit is acknowledged only once a replica received it, and the candidate
		// held every replica's transactions: the ones it lacks were never acknowledged.
		lostWhy = fmt.Sprintf("%d transaction(s) of the fenced primary are not on the new primary; none was acknowledged to a client (no replica received them)", ev.TransactionsMissing)
	case ev.TransactionsMissing > 0:
		lost = -1
		lostWhy = fmt.Sprintf("unknown, at most %d: that many transaction(s) of the fenced primary are not on the new primary, and the old primary was not observed waiting for semi-sync acknowledgements, so they may have been acknowledged", ev.TransactionsMissing)
	}
	dur := now.Sub(opStart(op)).Round(time.Millisecond)
	msg := fmt.Sprintf("primary failed over from %s to %s in %s; %s", old, ev.Candidate, dur, lostWhy)
	if len(down) > 0 {
		msg += "; not serving: " + strings.Join(unique(down), ", ") + " (run reconcile when they return; a returning old primary rejoins only if its GTID set is contained in the new primary's)"
	}
	if passed := AbsentPassed(ev.Rejected); len(passed) > 0 {
		msg += "; absent, passed because " + ev.Candidate + " held the bound recorded on what each received: " + strings.Join(passed, ", ")
	}
	members := slices.DeleteFunc(slices.Clone(v.Ready), func(i Instance) bool { _, ok := snaps[i.Pod.Name]; return !ok })
	instances := r.instanceStatuses(c, members, snaps, ev.Candidate)
	semi, err := r.settleSemiSync(ctx, x, ev.Candidate, ns, len(snaps)-1)
	if err != nil {
		return "", nil, err
	}
	// Labels follow the observed role: every replica proven to replicate from the new
	// primary (a re-pointed old primary included) is in the replica Service.
	for name, rs := range snaps {
		if p := v.Pods[name]; name != ev.Candidate && p != nil && replicatesFrom(rs, newIP) && p.Labels[specs.LabelRole] != string(v1.RoleReplica) {
			if err := r.labelRole(ctx, c, name, v1.RoleReplica); err != nil {
				return "", nil, err
			}
		}
	}
	r.Event(ctx, c, lost != 0, "FailoverSucceeded", msg)
	t := metav1.NewTime(now)
	seenAt, until := unacknowledgedWindow(c, old, ev, forced, lost)
	return "", func(s *v1.MysqlClusterStatus) {
		s.Instances = mergeInstances(s.Instances, instances, old)
		finish(s, now, "Succeeded", msg, lost)
		s.History[0].FormerPrimary, s.History[0].FormerPrimarySeenAt, s.History[0].UnacknowledgedUntil = old, seenAt, until
		if until != nil {
			s.History[0].FormerPrimaryCheckedAt, s.History[0].FormerPrimaryStartedAt = ev.PrimaryCheckedAt, ev.PrimaryStartedAt
			s.History[0].FormerPrimaryCheckedGTID = ev.PrimaryCheckedGTID
		}
		s.HA = NextHAStatus(s.HA, v1.HAHealthy, t, []string{msg}, OperationFailover)
		s.HA.LastFailover = &t
		ready := int32(len(snaps))
		s.ReadyInstances, s.Ready = ready, fmt.Sprintf("%d/%d", ready, c.Spec.Replicas)
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "PrimaryWritable", Message: "primary " + ev.Candidate + " is writable"})
		readyCond := metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "ReplicationProven", Message: msg}
		if ready < c.Spec.Replicas {
			readyCond.Status, readyCond.Reason = metav1.ConditionFalse, "InstancesDown"
		}
		meta.SetStatusCondition(&s.Conditions, readyCond)
		if len(s.ErrantInstances) > 0 {
			s.Phase = v1.PhaseDegraded
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "Quarantined", Message: fmt.Sprintf("%d instance(s) quarantined", len(s.ErrantInstances))})
		} else {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "FailoverSucceeded", Message: msg})
		}
		semi(s)
	}, nil
}

// unacknowledgedWindow is, for a failover that proved under semi-sync that no acknowledged
// transaction was lost, when the old primary was last seen healthy and until when none of its
// commits could return without an acknowledgement (see receiverFenceDeadline); nil otherwise.
// A crash of the old primary inside the window ended every commit still waiting: what no
// replica received was never acknowledged (failover.ProveUnacknowledgedTail).
func unacknowledgedWindow(c *v1.MysqlCluster, old string, ev *v1.OperationEvidence, forced bool, lost int64) (*metav1.Time, *metav1.Time) {
	if forced || lost != 0 || !ev.SemiSyncProven {
		return nil, nil
	}
	until, _ := receiverFenceDeadline(c, old)
	for _, i := range c.Status.Instances {
		if i.Name == old && i.LastSeen != nil && until != nil {
			seen := *i.LastSeen
			return &seen, until
		}
	}
	return nil, nil
}

// receiverFenceBlockers lists what keeps stopping the replicas' receivers from proving that
// the old primary can no longer commit, and the deadline until which it holds. It is judged
// from what the servers were observed to do, before anything is stopped.
func receiverFenceBlockers(c *v1.MysqlCluster, old string, members []failover.Member, missing []string, now time.Time) ([]string, *metav1.Time) {
	var blocked []string
	switch {
	case !c.Spec.SemiSync.SemiSyncEnabled():
		blocked = append(blocked, "semi-synchronous replication is off, so stopping the replicas' receivers does not stop the primary from committing")
	case c.Spec.SemiSync.Timeout != nil && c.Spec.SemiSync.Timeout.Duration < MinFenceSemiSyncTimeout:
		blocked = append(blocked, fmt.Sprintf("spec.semiSync.timeout is %s: after it the primary commits without any acknowledgement (the receiver fence needs at least %s)", c.Spec.SemiSync.Timeout.Duration, MinFenceSemiSyncTimeout))
	case !semiSyncProven(c, old):
		blocked = append(blocked, old+" was not last observed as a semi-synchronous source that waits for acknowledgements (with too few replicas to acknowledge, or restarted), so it may commit without them")
	}
	deadline, why := receiverFenceDeadline(c, old)
	switch {
	case deadline == nil:
		blocked = append(blocked, why)
	case !now.Before(deadline.Time):
		blocked = append(blocked, fmt.Sprintf("the receiver fence's deadline %s has passed: %s", deadline.UTC().Format(time.RFC3339), why))
	}
	if len(missing) > 0 {
		blocked = append(blocked, "cannot stop the receivers of "+strings.Join(missing, ", ")+" (unreachable): they may still acknowledge the primary's commits")
	}
	if !slices.ContainsFunc(members, func(m failover.Member) bool { return m.Snapshot.Replica != nil }) {
		blocked = append(blocked, "no replica receiver to stop")
	}
	return blocked, deadline
}

// stopReceivers stops every replica's IO thread, quarantined replicas' included (any of them
// could acknowledge), and proves each stopped.
func (r *Runner) stopReceivers(ctx context.Context, ss *Sessions, members []failover.Member, creds Credentials) ([]string, error) {
	// In parallel: a receiver stuck connecting to a silent primary takes up to the replicas'
	// net timeout to stop, and each would add its wait to the outage.
	var stopped []string
	var ins []*topology.Instance
	for _, m := range members {
		if m.Snapshot.Replica == nil {
			continue
		}
		in, err := ss.Connect(m.Name)
		if err != nil {
			return nil, err
		}
		stopped, ins = append(stopped, m.Name), append(ins, in)
	}
	errs := make([]error, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = in.StopIOThread(ctx) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Proven stopped, every replica at once.
	proven := make([]bool, len(ins))
	for i, in := range ins {
		wg.Go(func() {
			s := in.Observe(ctx, topology.ObserveOptions{Now: r.Clock, Secrets: []string{string(creds.Root)}})
			proven[i] = s.Complete() && s.Replica != nil && s.Replica.IOThread == topology.ThreadStopped
		})
	}
	wg.Wait()
	for i, name := range stopped {
		if !proven[i] {
			return nil, notYet("IO thread of %s not proven stopped yet", name)
		}
	}
	return stopped, nil
}

// AbsentPassed lists the absent members the election passed, each with its recorded bound, from
// the election's rejections (see failover.Elect), for the failover's record.
func AbsentPassed(rejected []string) []string {
	var out []string
	for _, r := range rejected {
		name, rest, ok := strings.Cut(r, ": ")
		if !ok {
			continue
		}
		if _, bound, ok := strings.Cut(rest, "harmless: the candidate holds its recorded bound "); ok {
			bound, _, _ = strings.Cut(bound, ", so it holds")
			out = append(out, name+" (bound "+bound+")")
		}
	}
	return out
}
