package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// postPromotionBound is how long Repointing and Verifying wait for a replica that does not
// answer or does not catch up: past it the replica is left for later repair (named in the
// result and the history) and the operation finishes; it never spins.
const postPromotionBound = 30 * time.Second

// refenceTimeout bounds the look at an old primary before every stage: connecting and reading
// read_only (the fence, when it is writable again, has refenceFenceTimeout). A server that
// answers at all answers this in milliseconds; one that misses it is looked at again at a later
// stage, its recorded fence holding meanwhile.
const refenceTimeout = 500 * time.Millisecond

// markSilent records that a look at the pod's server at time at got no answer.
func (r *Runner) markSilent(pod *corev1.Pod, at time.Time) {
	if pod == nil {
		return
	}
	if r.silent == nil {
		r.silent = map[string]time.Time{}
	}
	r.silent[string(pod.UID)+"/"+pod.Status.PodIP] = at
}

// refenceSilentFor is how long a run trusts that an old primary which did not answer the look
// is still silent.
const refenceSilentFor = 3 * time.Second

// refenceFenceTimeout bounds the fence statements on an old primary found writable.
const refenceFenceTimeout = 10 * time.Second

// Refence makes sure an old primary that answers is read-only. It uses a fresh connection with
// its own short timeout and reads nothing but the read_only flags before fencing: a primary
// whose commits hang waiting for semi-sync acknowledgements blocks a full observation (SHOW
// BINARY LOGS waits behind them), but neither the flags nor the fence (sessions are killed
// first) do. It reports whether it had to fence; an old primary that does not answer is left
// to the fence already in place.
func (r *Runner) Refence(ctx context.Context, c *v1.MysqlCluster, pod *corev1.Pod, creds Credentials, trustSilent bool) (bool, error) {
	if pod == nil || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
		return false, nil
	}
	// A silent old primary costs the whole look; with trustSilent it is looked at again only
	// refenceSilentFor after it was last found silent (the caller's recorded fence holds
	// meanwhile: it cannot commit).
	id := string(pod.UID) + "/" + pod.Status.PodIP
	if at, ok := r.silent[id]; trustSilent && ok && r.Clock().Sub(at) < refenceSilentFor {
		return false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, refenceTimeout)
	defer cancel()
	in, err := r.ConnectGuarded(cctx, pod, topology.Credentials{User: "root", Password: creds.Root})
	if err != nil {
		return false, nil //nolint:nilerr // it does not answer: the recorded fence holds
	}
	defer func() { _ = in.Close() }()
	// This actor's epoch is stored on the old primary at first contact, read-only or not, so
	// that an older actor's late read_only=OFF never lands on it. A server that does not take
	// it is judged by its flags alone, as before; one that stores a newer epoch ends this actor.
	err = in.ClaimEpoch(cctx)
	switch k := topology.KindOf(err); {
	case errors.Is(err, topology.ErrSuperseded):
		return false, err
	case k == topology.ErrorTimeout || k == topology.ErrorRefused:
		r.markSilent(pod, r.Clock())
		return false, nil
	}
	writable, err := in.Writable(cctx)
	if k := topology.KindOf(err); k == topology.ErrorTimeout || k == topology.ErrorRefused {
		r.markSilent(pod, r.Clock())
	}
	if err != nil || !writable {
		return false, nil //nolint:nilerr // it does not answer, or it is read-only already
	}
	fctx, fcancel := context.WithTimeout(ctx, refenceFenceTimeout)
	defer fcancel()
	killed, err := fence(fctx, in)
	if err != nil {
		// Retried at the next stage run: a fence that blocks (commits hung behind it) must
		// not end the command while the old primary may take writes.
		return true, notYet("the old primary %s answers and is writable again; fencing it failed, retrying: %v", pod.Name, err)
	}
	fs, err := in.VerifyFence(fctx, ReplicationUser)
	if err != nil {
		return true, err
	}
	if !fs.Verified {
		return true, notYet("the old primary %s answers and is writable again; its fence is not verified yet", pod.Name)
	}
	r.Event(ctx, c, true, "OldPrimaryRefenced", fmt.Sprintf("%s answered writable again and was fenced over SQL (%d session(s) killed)", pod.Name, killed))
	return true, nil
}

// stagesAfterFence are the stages at which the old primary must stay fenced.
var (
	swAfterFence = []string{StageWaitingForCandidate, StagePromoting, StageMovingPrimary, StageRepointing, StageVerifying}
	foAfterFence = []string{StageElecting, StageWaitingForRelayLog, StagePromoting, StageMovingPrimary, StageRepointing, StageVerifying}
	// foBeforePromotion are the stages at which a receiver fence must still hold.
	foBeforePromotion = []string{StageElecting, StageWaitingForRelayLog, StagePromoting}
)

// swGuard keeps a switchover's old primary fenced at every stage after Fencing.
func (r *Runner) swGuard(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	if !slices.Contains(swAfterFence, x.op.Stage) {
		return "", nil, nil
	}
	_, err := r.Refence(ctx, x.c, x.byName[x.old].Pod, x.creds, false)
	return "", nil, err
}

// foGuard keeps a failover's old primary fenced at every stage after Fencing, and stops the
// failover before promotion once a receiver fence has passed its deadline.
func (r *Runner) foGuard(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	if !slices.Contains(foAfterFence, x.op.Stage) {
		return "", nil, nil
	}
	// A silent old primary need not be looked at again within seconds while its recorded
	// fence is verified (it cannot commit); a forced run past a Blocked fence looks every time.
	trust := x.ev.FenceState == v1.FenceVerified && !x.forced
	if _, err := r.Refence(ctx, x.c, x.v.Pods[x.old], x.creds, trust); err != nil {
		return "", nil, err
	}
	d := x.ev.FenceDeadline
	if d == nil || x.ev.PromotedAt != nil || !slices.Contains(foBeforePromotion, x.op.Stage) || x.now.Before(d.Time) {
		return "", nil, nil
	}
	if x.op.Stage == StagePromoting {
		// Promoting may have acted before a crash kept it from recording so. A candidate that
		// is writable already was promoted: go forward. A read-only one (its replication may
		// have been reset: converge rejoins it) takes no writes, so the failover rolls back.
		// Past the deadline the old primary may commit without acknowledgements, so a
		// candidate found writable (a promotion that ran but was not recorded) is fenced
		// again before the rollback: it has served only in the replica Service.
		in, err := x.ss.Connect(x.ev.Candidate)
		if err != nil {
			return "", nil, err
		}
		// Claimed before it is read: a promotion sent by an older actor cannot land after.
		if err := in.ClaimEpoch(ctx); err != nil {
			return "", nil, err
		}
		if w, err := in.Writable(ctx); err != nil {
			return "", nil, err
		} else if w {
			if _, err := fence(ctx, in); err != nil {
				return "", nil, err
			}
			if w, err := in.Writable(ctx); err != nil || w {
				return "", nil, notYet("the candidate %s is not fenced yet (%v)", x.ev.Candidate, err)
			}
		}
	}
	reason := fmt.Sprintf("the receiver fence on %s passed its deadline %s (its semi-sync timeout, counted from before the failover began, minus a margin): it may commit without acknowledgements now, so nothing is promoted", x.old, d.UTC().Format(time.RFC3339))
	return StageRollingBack, func(s *v1.MysqlClusterStatus) {
		e := evidenceOf(s)
		e.RollbackReason, e.RollbackResult = reason, "Failed"
	}, nil
}

// receiverFenceDeadline is when a receiver fence on the old primary stops holding, or nil with
// the reason when no deadline can be proven. A commit on the old primary waits for an
// acknowledgement for at most its semi-sync timeout, then returns asynchronously; the earliest
// such a commit can have begun waiting is the last time the primary was observed healthy
// (status.instances[].lastSeen): from then on nobody knows when its replicas lost it. So the
// fence holds until lastSeen plus the observed timeout, minus a margin for clock rate and skew
// between the servers and this process. A primary never observed has no provable deadline.
func receiverFenceDeadline(c *v1.MysqlCluster, old string) (*metav1.Time, string) {
	var seen *metav1.Time
	timeout := time.Duration(0)
	for _, i := range c.Status.Instances {
		if i.Name == old {
			seen, timeout = i.LastSeen, time.Duration(i.SemiSyncTimeoutSeconds)*time.Second
		}
	}
	if seen == nil {
		return nil, old + " has no recorded observation (status.instances[].lastSeen), so when it may have begun committing without acknowledgements cannot be bounded"
	}
	if timeout == 0 {
		// Recorded by an older mysqlctl: the spec's timeout (its default is 24h).
		timeout = 24 * time.Hour
		if c.Spec.SemiSync.Timeout != nil {
			timeout = c.Spec.SemiSync.Timeout.Duration
		}
	}
	margin := max(timeout/10, 5*time.Minute)
	t := metav1.NewTime(seen.Add(timeout - margin))
	return &t, fmt.Sprintf("%s was last observed healthy at %s and waits at most %s for an acknowledgement (margin %s)", old, seen.UTC().Format(time.RFC3339), timeout, margin)
}

// recheckPrimary checks, before an operation is called done, that the new primary is what it
// must be: writable and selected by the primary Service. A new primary that restarted (it comes
// back read-only) sends the operation back to Promoting; a lost label back to MovingPrimary.
func recheckPrimary(name string, pod *corev1.Pod, s topology.Snapshot) (string, func(*v1.MysqlClusterStatus)) {
	back := ""
	why := ""
	switch {
	case s.ReadOnly || s.SuperReadOnly != nil && *s.SuperReadOnly:
		back, why = StagePromoting, name+" is read-only (it restarted?): promoting it again"
	case pod == nil || pod.Labels[specs.LabelRole] != string(v1.RolePrimary):
		back, why = StageMovingPrimary, name+" is not labelled primary: moving the primary Service to it again"
	}
	if back == "" {
		return "", nil
	}
	return back, func(s *v1.MysqlClusterStatus) { s.Operation.Message = why }
}

// ancestor judges whether a replica's history is an ancestor of the primary's (see
// divergence). Under writes, a replica observed after the primary can hold transactions the
// primary committed after it was observed; before calling such a replica errant, the primary is
// observed again, after the replica, and judged against that.
func (ss *Sessions) ancestor(primary string, ps, rs topology.Snapshot) (v1.ErrantInstance, bool, error) {
	e, ok := Divergence(ps, rs)
	if ok {
		return e, true, nil
	}
	fresh, err := ss.Observe(primary)
	if err != nil {
		return e, false, err
	}
	e, ok = Divergence(fresh, rs)
	return e, ok, nil
}

// pendingReplicas lists the members other than the primary (and quarantined ones) not yet
// proven to replicate from the primary at ip and to have applied what ps holds, with the
// reason; a member that does not answer is listed too.
//
// refused is the first configuration refusal among the replicas that did not answer (see
// topology.ConfigError): such a replica is pending like any other, and the caller decides
// whether waiting for it can help.
func (ss *Sessions) pendingReplicas(c *v1.MysqlCluster, members []Instance, primary, ip string, ps topology.Snapshot) (pending []string, refused *topology.ConfigError, err error) {
	for _, m := range members {
		name := m.Pod.Name
		if name == primary || quarantined(c, name) {
			continue
		}
		s, err := ss.Observe(name)
		if err != nil {
			pending = append(pending, name+": "+err.Error())
			if refused == nil {
				refused = topology.AsConfigError(err)
			}
			continue
		}
		why, err := ss.caughtUp(name, s, primary, ip, ps)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			pending = append(pending, why)
		}
	}
	return pending, refused, nil
}

// newPrimaryLost ends an operation whose new primary stopped answering after it was promoted
// and made the current primary: nothing can be verified, the operation cannot be rolled back,
// and waiting would block the failover the cluster now needs. Its death is a new failure of
// another instance, not the same one flapping, so the operation waits no longer than the
// supervisor's detector takes to declare a primary dead (newPrimaryBudget, counted from its
// first failed look in this run), or not at all when its pod is gone; then the supervisor
// judges the new primary as any other and fails over again at once. Before, it returns err, so
// the stage is retried: a new primary that restarts and answers read-only is promoted again
// (recheckPrimary).
func (r *Runner) newPrimaryLost(ctx context.Context, x *stageEnv, err error) (string, func(*v1.MysqlClusterStatus), error) {
	if x.c.Status.CurrentPrimary != x.ev.Candidate {
		return "", nil, err
	}
	if r.lostSince == nil {
		r.lostSince = map[string]time.Time{}
	}
	first, seen := r.lostSince[x.op.ID]
	if !seen {
		first, r.lostSince[x.op.ID] = x.now, x.now
	}
	// Gone only as the failover's own list of every pod says (a switchover lists ready
	// members only: a candidate that is merely not Ready is not gone).
	pod, listed := x.v.Pods[x.ev.Candidate]
	gone := x.v.Pods != nil && (!listed || pod == nil || pod.DeletionTimestamp != nil)
	// Silent from the start of the first look that failed (this run's start) to the end of
	// this one, with no answer between: a look that timed out was silent all along. A
	// configuration refusal is no silence: it waits for the stage's bound.
	silent := r.Clock().Sub(first)
	silence := topology.AsConfigError(err) == nil
	if !x.overdue && !gone && (!silence || silent < newPrimaryBudget(x.c)) {
		return "", nil, notYet("the new primary %s does not answer (for %s): %v", x.ev.Candidate, silent.Round(time.Millisecond), err)
	}
	delete(r.lostSince, x.op.ID)
	why := fmt.Sprintf("silent for %s, past the detector's budget of %s", silent.Round(time.Millisecond), newPrimaryBudget(x.c))
	switch {
	case gone:
		why = "its pod is gone"
	case x.overdue:
		why = fmt.Sprintf("silent for %s, past the stage's bound", silent.Round(time.Millisecond))
	}
	msg := fmt.Sprintf("the new primary %s "+NewPrimaryLostMark+" (%v; %s): the supervisor judges it as any primary and fails over again if it is dead; without one, run 'failover %s'", x.ev.Candidate, err, why, x.c.Name)
	r.Event(ctx, x.c, true, ReasonNewPrimaryLost, msg)
	now := x.now
	t := metav1.NewTime(now)
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Failed", msg, -1)
		s.Phase = v1.PhaseDegraded
		s.HA = NextHAStatus(s.HA, v1.HADegraded, t, []string{msg}, x.op.Type)
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonNewPrimaryLost, Message: msg})
	}, nil
}

// observeNewPrimary observes an operation's promoted candidate. When it does not answer, the
// stage's result is newPrimaryLost's: ok is false, and the stage returns next, change and err
// as they are.
func (r *Runner) observeNewPrimary(ctx context.Context, x *stageEnv) (ns topology.Snapshot, ok bool, next string, change func(*v1.MysqlClusterStatus), err error) {
	ns, err = x.ss.Observe(x.ev.Candidate)
	if err != nil {
		next, change, err = r.newPrimaryLost(ctx, x, err)
		return ns, false, next, change, err
	}
	delete(r.lostSince, x.op.ID)
	return ns, true, "", nil, nil
}

// ReasonNewPrimaryLost is the Degraded reason (and Event) of an operation whose new primary
// died before it was verified.
const ReasonNewPrimaryLost = "NewPrimaryLost"

// NewPrimaryLostMark is in the message (and so the history) of every such operation.
const NewPrimaryLostMark = "stopped answering after its promotion"

// newPrimaryBudget is how long a promoted primary may stay silent before its operation ends:
// the supervisor's own budget to declare a primary dead (failureThreshold checks,
// detectionInterval apart), so that ending the operation never waits longer than detecting
// the death would.
func newPrimaryBudget(c *v1.MysqlCluster) time.Duration {
	return time.Duration(max(c.Spec.Failover.FailureThreshold, 1)) * DetectionInterval(c)
}

// bsGuard keeps every instance but the primary read-only while a converge runs: a former
// primary that came back writable (thawed, or its network healed) is fenced before any stage
// touches it, CreatingUsers included. Before each stage of a bootstrap it deletes a restore's
// private key once the data is in place (dropRestoreIdentity).
func (r *Runner) bsGuard(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	if x.op.Type != OperationConverge {
		// A restore's private key goes as soon as the data is in place.
		return "", nil, r.dropRestoreIdentity(ctx, x.c)
	}
	if x.ss == nil {
		return "", nil, nil
	}
	for _, m := range x.members {
		if m.Pod.Name == x.primaryName {
			continue
		}
		if _, err := r.Refence(ctx, x.c, m.Pod, x.creds, false); err != nil {
			return "", nil, err
		}
	}
	return "", nil, nil
}

// absentMembers lists the cluster's ordinals, other than quarantined ones, that have no ready
// member: an operation that went on without them names them.
func absentMembers(c *v1.MysqlCluster, members []Instance) []string {
	var out []string
	for ord := int32(0); ord < MemberCount(c); ord++ {
		name := fmt.Sprintf("%s-%d", c.Name, ord)
		if quarantined(c, name) || slices.ContainsFunc(members, func(m Instance) bool { return m.Pod.Name == name }) {
			continue
		}
		out = append(out, name)
	}
	return out
}
