package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// stageFunc runs one stage of an operation: it checks the stage's precondition from fresh
// observations and the recorded evidence, performs one idempotent action, and returns the next
// stage ("" ends the operation) with the status change that records it and its evidence. A
// precondition that does not hold yet is a notYet error; the engine waits and runs it again.
type stageFunc func(r *Runner, ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error)

// namedStage is one stage of an operation kind.
type namedStage struct {
	name string
	run  stageFunc
}

// operationKind is one kind of persisted operation: its stages, and how the environment every
// stage of the kind reads is gathered before each stage.
type operationKind struct {
	stages  []namedStage
	prepare func(r *Runner, ctx context.Context, x *stageEnv) error
	// guard, when set, runs before every stage: it upholds what must hold whatever the stage
	// (an old primary that answers again is fenced again), and may divert the operation to
	// another stage with the reason (a fence past its deadline rolls back).
	guard stageFunc
	// bounds limit how long a stage may wait for a member before it is overdue; a stage
	// decides what it does then (leave an unreachable replica for later repair, or stop).
	bounds map[string]time.Duration
}

// stageEnv is what a stage reads: the cluster and operation as recorded, the credentials, one
// session per instance for the length of the stage, and what the kind's prepare gathered.
type stageEnv struct {
	c     *v1.MysqlCluster
	op    *v1.OperationStatus
	ev    *v1.OperationEvidence
	now   time.Time
	creds Credentials
	ss    *Sessions

	// bootstrap and switchover: every member (all ready), by name.
	members []Instance
	byName  map[string]Instance
	// bootstrap: the primary it configures; converge: the members left out because they do
	// not answer (name: why), recorded absent when it finishes.
	primary     Instance
	primaryName string
	absent      map[string]string
	// switchover and failover: the old primary.
	old string
	// overdue is true once the stage has waited past its bound; bound is that bound (set by
	// the caller to replace the kind's own, for the stages the kind bounds).
	overdue bool
	bound   time.Duration
	// failover: the pods as the failover sees them, whether the run was forced, and whether
	// the old primary answered and was fenced over SQL.
	v          FailoverView
	forced     bool
	oldAnswers bool

	swOpts SwitchoverOptions
	foOpts FailoverOptions
}

// runStage gathers the kind's environment and runs the operation's recorded stage.
func (r *Runner) runStage(ctx context.Context, k *operationKind, c *v1.MysqlCluster, op *v1.OperationStatus, x stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	var run stageFunc
	for _, s := range k.stages {
		if s.name == op.Stage {
			run = s.run
		}
	}
	if run == nil {
		return "", nil, fmt.Errorf("unknown %s stage %q recorded in status (written by a newer mysqlctl?)", op.Type, op.Stage)
	}
	x.c, x.op, x.now, x.ev = c, op, r.Clock(), op.Evidence
	if x.ev == nil {
		x.ev = &v1.OperationEvidence{}
	}
	if b, ok := k.bounds[op.Stage]; ok && op.StageStartedAt != nil {
		if x.bound > 0 {
			b = x.bound
		}
		x.bound = b
		// The bound counts from when the stage began, but never from before this run first
		// tried it: a run resumed long after gets the whole bound too.
		began := op.StageStartedAt.Time
		key := op.ID + "/" + op.Stage
		if r.attempts == nil {
			r.attempts = map[string]time.Time{}
		}
		if _, ok := r.attempts[key]; !ok {
			r.attempts[key] = x.now
		}
		if first := r.attempts[key]; first.After(began) {
			began = first
		}
		x.overdue = x.now.Sub(began) > b
	}
	if k.prepare != nil {
		err := k.prepare(r, ctx, &x)
		if x.ss != nil {
			defer x.ss.Close()
		}
		if err != nil {
			return "", nil, err
		}
	}
	if k.guard != nil {
		next, change, err := k.guard(r, ctx, &x)
		if err != nil || next != "" {
			return next, change, err
		}
	}
	return run(r, ctx, &x)
}

const reasonCandidateUnreachable = "CandidateUnreachable"

// promotionTarget connects to the candidate at Promoting and proves it is the server that was
// elected: it must still hold what it held then (the fenced primary's set for a switchover, its
// elected set for a failover), so a pod that came back on an empty volume is never promoted.
// A candidate that stops answering there may already be writable (the promotion may have run
// before it froze), so neither another instance nor the old primary can be opened without
// risking two writable primaries: the stage waits out its bound, then takes the candidate out
// of every Service, marks the cluster Degraded with what a person can do, and stops, the
// operation kept at its stage for resume (or abort, once the candidate answers read-only).
func (r *Runner) promotionTarget(ctx context.Context, x *stageEnv) (*topology.Instance, error) {
	cand := x.ev.Candidate
	in, err := x.ss.Connect(cand)
	if err != nil {
		return nil, r.candidateUnreachable(ctx, x, err)
	}
	s := in.Observe(ctx, topology.ObserveOptions{Now: r.Clock, Timeout: 2 * time.Second, Secrets: []string{string(x.creds.Root)}})
	if !s.Complete() {
		return nil, r.candidateUnreachable(ctx, x, s.Err)
	}
	want := x.ev.CandidateGTIDSet
	if x.op.Type == OperationSwitchover {
		want = x.ev.FencedGTIDSet
	}
	if want != "" {
		if n := missing(s, want); n != 0 {
			msg := fmt.Sprintf("the candidate %s answers but no longer holds the transactions it held when it was chosen (%s; missing %d, -1: unknown): its volume may have been replaced, so it is not promoted; run 'abort %s' to roll back (it answers read-only)", cand, want, n, x.c.Name)
			return nil, r.stopAtPromoting(ctx, x, "CandidateDiverged", msg)
		}
	}
	return in, nil
}

// candidateUnreachable waits for a candidate that does not answer at Promoting, up to the bound.
func (r *Runner) candidateUnreachable(ctx context.Context, x *stageEnv, err error) error {
	if !x.overdue {
		// Only the text: a configuration refusal is waited out here like any silence (see
		// stopForConfig), since what the bound does next (the candidate out of every Service,
		// Degraded) is what keeps a candidate that may be writable from serving.
		return notYet("the candidate %s does not answer: %s", x.ev.Candidate, fmt.Sprint(err))
	}
	// It may be writable: out of the replica Service, at least (an API write, no SQL needed).
	if lerr := r.labelRole(ctx, x.c, x.ev.Candidate, v1.RoleUnknown); lerr != nil {
		return lerr
	}
	msg := fmt.Sprintf("the candidate %s stopped answering at stage %s (%v); it may already be writable, so no other instance may be promoted: when it answers again run 'resume %s'; if its pod cannot come back, delete the pod (it restarts read-only) and run 'resume %s' or 'abort %s'",
		x.ev.Candidate, x.op.Stage, err, x.c.Name, x.c.Name, x.c.Name)
	return r.stopAtPromoting(ctx, x, reasonCandidateUnreachable, msg)
}

// stopAtPromoting marks the cluster Degraded with the reason and ends the run, the operation
// kept at its stage.
func (r *Runner) stopAtPromoting(ctx context.Context, x *stageEnv, reason, msg string) error {
	if perr := r.persist(ctx, x.c, x.op, x.op.Stage, func(s *v1.MysqlClusterStatus) {
		s.Phase = v1.PhaseDegraded
		s.Operation.Message = msg
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	}); perr != nil {
		return perr
	}
	r.Event(ctx, x.c, true, reason, msg)
	return fmt.Errorf("%w: %s", outcome.ErrUnsafe, msg)
}

// promoteAt runs the promotion; a candidate that stops answering during it is waited for like
// one that did not answer before it.
func (r *Runner) promoteAt(ctx context.Context, x *stageEnv, in *topology.Instance, acks int, oldRole v1.Role) (string, func(*v1.MysqlClusterStatus), error) {
	change, err := r.promoteCandidate(ctx, x.c, x.ss, in, x.ev.Candidate, acks, x.old, oldRole)
	if k := topology.KindOf(err); k == topology.ErrorRefused || k == topology.ErrorTimeout || topology.AsConfigError(err) != nil {
		return "", nil, r.candidateUnreachable(ctx, x, err)
	}
	return StageMovingPrimary, change, err
}

// readyMembers returns the pods of the cluster's ordinals whose readiness the API reports.
func (r *Runner) readyMembers(ctx context.Context, c *v1.MysqlCluster) ([]Instance, error) {
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []Instance
	for ord := int32(0); ord < MemberCount(c); ord++ {
		if p, ok := pods[ord]; ok && PodReady(p) {
			out = append(out, Instance{ordinal: ord, Pod: p})
		}
	}
	return out, nil
}

// bootstrapKind runs a new cluster's bootstrap, and the converge of a running one.
var bootstrapKind = &operationKind{
	stages: []namedStage{
		{StageRestoringData, (*Runner).bsRestoringData},
		{StageStartingInstance, (*Runner).bsStartingInstance},
		{StageWaitingForPods, (*Runner).bsWaitingForPods},
		{StageContinuingHistory, (*Runner).bsContinuingHistory},
		{StageRecordingProvenance, (*Runner).bsRecordingProvenance},
		{StageCreatingUsers, (*Runner).bsCreatingUsers},
		{StageConfiguringPrimary, (*Runner).bsConfiguringPrimary},
		{StageJoiningReplicas, (*Runner).bsJoiningReplicas},
		{StageOpeningPrimary, (*Runner).bsOpeningPrimary},
		{StageVerifyingConvergence, (*Runner).bsVerifyingConvergence},
	},
	guard:  (*Runner).bsGuard,
	bounds: map[string]time.Duration{StageVerifyingConvergence: postPromotionBound},
	prepare: func(r *Runner, ctx context.Context, x *stageEnv) error {
		if x.op.Stage == StageRestoringData || x.op.Stage == StageStartingInstance {
			return nil // before the first instance exists
		}
		members, err := r.members(ctx, x.c)
		if err != nil || x.op.Stage == StageWaitingForPods {
			return err
		}
		if x.creds, err = r.Credentials(ctx, x.c); err != nil {
			return err
		}
		x.members = members
		x.ss = r.OpenSessions(ctx, members, x.creds)
		x.primaryName = x.c.Status.CurrentPrimary
		if x.primaryName == "" {
			x.primaryName = x.c.Name + "-0"
		}
		for _, m := range members {
			if m.Pod.Name == x.primaryName {
				x.primary = m
			}
		}
		if x.op.Type == OperationConverge {
			x.members, x.absent = answering(x.ss, members, x.primaryName)
		}
		return nil
	},
}

// answering splits a converge's members into those that answer and those that do not (name:
// why): a converge repairs what answers and does not wait on a member that may never come back
// (a lost pod stays Running and Ready until a person deletes it). The primary is always kept: a
// converge needs it. A member whose path is refused by configuration is kept too (the stages
// report the refusal: it is the path, not the member).
func answering(ss *Sessions, members []Instance, primary string) ([]Instance, map[string]string) {
	var names []string
	for _, m := range members {
		if m.Pod.Name != primary {
			names = append(names, m.Pod.Name)
		}
	}
	_, errs := ss.observeAll(names)
	absent := map[string]string{}
	for i, name := range names {
		if errs[i] != nil && topology.AsConfigError(errs[i]) == nil {
			absent[name] = errs[i].Error()
		}
	}
	out := slices.DeleteFunc(slices.Clone(members), func(m Instance) bool { _, gone := absent[m.Pod.Name]; return gone })
	return out, absent
}

// switchoverKind moves the primary role to a replica with zero data loss.
var switchoverKind = &operationKind{
	stages: []namedStage{
		{StageValidating, (*Runner).swValidating},
		{StageFencing, (*Runner).swFencing},
		{StageWaitingForCandidate, (*Runner).swWaitingForCandidate},
		{StagePromoting, (*Runner).swPromoting},
		{StageMovingPrimary, (*Runner).swMovingPrimary},
		{StageRepointing, (*Runner).swRepointing},
		{StageVerifying, (*Runner).swVerifying},
		{StageRollingBack, (*Runner).swRollingBack},
	},
	guard:  (*Runner).swGuard,
	bounds: map[string]time.Duration{StageFencing: postPromotionBound, StagePromoting: postPromotionBound, StageRepointing: postPromotionBound, StageVerifying: postPromotionBound, StageRollingBack: postPromotionBound},
	prepare: func(r *Runner, ctx context.Context, x *stageEnv) error {
		// Validating wants every member ready; later stages go on with the members that are,
		// so that a replica that dies mid-switchover never blocks it.
		members, err := r.members(ctx, x.c)
		var ny errNotYet
		if errors.As(err, &ny) && x.op.Stage != StageValidating {
			members, err = r.readyMembers(ctx, x.c)
		}
		if err != nil {
			return err
		}
		if x.creds, err = r.Credentials(ctx, x.c); err != nil {
			return err
		}
		x.members, x.byName = members, map[string]Instance{}
		for _, m := range members {
			x.byName[m.Pod.Name] = m
		}
		x.ss = r.OpenSessions(ctx, members, x.creds)
		// The old primary: the recorded current primary until MovingPrimary hands the role
		// over, the fenced primary of the evidence from then on.
		x.old = x.c.Status.CurrentPrimary
		if x.ev.FencedPrimary != "" {
			x.old = x.ev.FencedPrimary
		}
		return nil
	},
}

// failoverKind replaces a dead primary.
var failoverKind = &operationKind{
	stages: []namedStage{
		{StageConfirming, (*Runner).foConfirming},
		{StageFencing, (*Runner).foFencing},
		{StageElecting, (*Runner).foElecting},
		{StageWaitingForRelayLog, (*Runner).foWaitingForRelayLog},
		{StagePromoting, (*Runner).foPromoting},
		{StageMovingPrimary, (*Runner).foMovingPrimary},
		{StageRepointing, (*Runner).foRepointing},
		{StageVerifying, (*Runner).foVerifying},
		{StageRollingBack, (*Runner).foRollingBack},
	},
	guard:  (*Runner).foGuard,
	bounds: map[string]time.Duration{StageFencing: fenceWaitBound, StagePromoting: postPromotionBound, StageRepointing: postPromotionBound, StageVerifying: postPromotionBound},
	prepare: func(r *Runner, ctx context.Context, x *stageEnv) error {
		if x.op.Evidence == nil {
			x.ev.FencedPrimary = x.c.Status.CurrentPrimary
		}
		x.forced = x.ev.Forced != ""
		x.old = x.ev.FencedPrimary
		var err error
		if x.v, err = r.FailoverView(ctx, x.c, x.old); err != nil {
			return err
		}
		if x.creds, err = r.Credentials(ctx, x.c); err != nil {
			return err
		}
		x.ss = r.OpenSessions(ctx, x.v.Ready, x.creds)
		// Only an old primary that answered (it restarted read-only and was fenced over SQL) is
		// re-pointed by the failover itself; a dead one is not waited for.
		x.oldAnswers = x.ev.PrimaryVerdict == string(failover.ReadOnly) && x.ev.FencedGTIDSet != ""
		return nil
	},
}

// microOf is t with sub-second precision, for fields whose whole-second twin is kept for
// compatibility.
func microOf(t metav1.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t.Time)
	return &m
}

// opStart is when the operation started, as precisely as it was recorded.
func opStart(op *v1.OperationStatus) time.Time {
	if op.StartedAtMicro != nil {
		return op.StartedAtMicro.Time
	}
	return op.StartedAt.Time
}
