package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// OperationScale is the type of a scale: instances added (seeded, joined, verified) or removed
// (detached, then their pods deleted) one at a time.
const OperationScale = "scale"

// RequestScale asks a supervising watch to scale (the Request carries the instance count).
const RequestScale = OperationScale

// Scale stages. Planning decides the first step from the pods as they are; an added instance
// passes AddingInstance (its pod created and Ready), Seeding (its data: replayed from the
// primary's binary logs, or copied from a donor), JoiningInstance (its provenance recorded, its
// history proven an ancestor of the primary's) and VerifyingInstance (replicating and caught up,
// then in the replica Service); a removed one passes DetachingInstance (out of the replica
// Service, replication stopped) and RemovingInstance (its pod deleted).
const (
	StageScalePlanning     = "Planning"
	StageAddingInstance    = "AddingInstance"
	StageSeeding           = "Seeding"
	StageJoiningInstance   = "JoiningInstance"
	StageVerifyingInstance = "VerifyingInstance"
	StageDetachingInstance = "DetachingInstance"
	StageRemovingInstance  = "RemovingInstance"
)

// scaleBound is how long an added pod may take to become Ready, a copy to finish, or a new
// replica to catch up, before the scale stops with the reason.
const scaleBound = 10 * time.Minute

// ScaleOptions tune a scale.
type ScaleOptions struct {
	// Replicas is the instance count asked for (0: spec.replicas).
	Replicas int32
	// DeleteData deletes the data volume of each removed instance.
	DeleteData bool
	// NoSwitchover refuses a scale that would remove the primary instead of switching over.
	NoSwitchover bool
	// ResumeOnly continues the recorded scale and never starts one.
	ResumeOnly bool
}

// scaleKind adds or removes instances one at a time.
var scaleKind = &operationKind{
	stages: []namedStage{
		{StageScalePlanning, (*Runner).scPlanning},
		{StageAddingInstance, (*Runner).scAdding},
		{StageSeeding, (*Runner).scSeeding},
		{StageJoiningInstance, (*Runner).scJoining},
		{StageVerifyingInstance, (*Runner).scVerifying},
		{StageDetachingInstance, (*Runner).scDetaching},
		{StageRemovingInstance, (*Runner).scRemoving},
	},
	guard: (*Runner).scGuard,
	bounds: map[string]time.Duration{
		StageScalePlanning: scaleBound, StageAddingInstance: scaleBound, StageSeeding: scaleBound, StageJoiningInstance: scaleBound,
		StageVerifyingInstance: scaleBound, StageDetachingInstance: scaleBound, StageRemovingInstance: scaleBound,
	},
	prepare: prepareScale,
}

// prepareScale gathers what a scale or rebuild stage reads.
func prepareScale(r *Runner, ctx context.Context, x *stageEnv) error {
	// Every ready pod the StatefulSet holds now, the one in flight included; a replica that is
	// down never blocks a scale (the primary must answer, which each stage checks).
	pods, err := r.Pods(ctx, x.c)
	if err != nil {
		return err
	}
	x.byName = map[string]Instance{}
	for ord, p := range pods {
		if PodReady(p) && ord < x.c.Status.Scale.Replicas {
			m := Instance{ordinal: ord, Pod: p}
			x.members = append(x.members, m)
			x.byName[p.Name] = m
		}
	}
	if x.creds, err = r.Credentials(ctx, x.c); err != nil {
		return err
	}
	x.ss = r.OpenSessions(ctx, x.members, x.creds)
	x.primaryName = x.c.Status.CurrentPrimary
	x.primary = x.byName[x.primaryName]
	return nil
}

// Scale adds or removes instances until the cluster has opts.Replicas, one at a time behind
// persisted stages, or resumes the scale recorded in status. When the primary's ordinal would
// go, its role first moves to the lowest ordinal that stays, by a switchover of its own (refused
// with NoSwitchover).
func (r *Runner) Scale(ctx context.Context, key client.ObjectKey, opts ScaleOptions) error {
	started, retargeted := false, false
	lastReported := ""
	for {
		c := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, key, c); err != nil {
			return err
		}
		op := c.Status.Operation
		switch {
		case op == nil && (started || opts.ResumeOnly && c.Status.Scale == nil):
			_ = SyncPDB(ctx, r.Kube, c)
			return r.lastResult(c, OperationScale)
		case op == nil && c.Status.Scale != nil && c.Status.Scale.Action == ScaleRebuild:
			return fmt.Errorf("%w: the rebuild of %s is recorded (stopped): run 'resume %s' to finish it before a scale", outcome.ErrUnsafe, ScalePod(c, c.Status.Scale.Ordinal), c.Name)
		case op == nil:
			to := opts.Replicas // a new count replaces a recorded one (a stopped scale is backed out)
			if sc := c.Status.Scale; to == 0 && sc != nil {
				to = sc.To // a stopped scale, or one a failover superseded, continues
			}
			if to == 0 {
				to = c.Spec.Replicas
			}
			if sc := c.Status.Scale; sc == nil || sc.To != to || opts.DeleteData && !sc.DeleteData {
				// Recorded before anything moves, also before a handoff switchover: from here
				// the StatefulSet's pods, not spec.replicas, are the cluster's members.
				if err := r.recordScale(ctx, c, to, opts); err != nil {
					return err
				}
				continue
			}
			switched, err := r.scaleHandoff(ctx, c, to, opts.NoSwitchover)
			if err != nil || switched {
				if err != nil {
					return err
				}
				continue
			}
			if err := r.beginScale(ctx, c); err != nil {
				return err
			}
			started = true
			continue
		case op.Type != OperationScale:
			return r.otherOperation(c, op)
		case !retargeted && op.Holder == r.Holder && op.Epoch == r.Epoch:
			// Once this actor holds the recorded scale: a new count given to an interrupted
			// scale is re-planned from Planning, which backs out an add in flight above it.
			retargeted = true
			if !opts.ResumeOnly && opts.Replicas != 0 && c.Status.Scale != nil && c.Status.Scale.To != opts.Replicas {
				if err := r.retargetScale(ctx, c, op, opts); err != nil {
					return err
				}
				continue
			}
		}
		started = true
		if _, _, err := r.step(ctx, key, c, op, &lastReported, func() (string, func(*v1.MysqlClusterStatus), error) {
			return r.runStage(ctx, scaleKind, c, op, stageEnv{})
		}); err != nil {
			return err
		}
	}
}

// scaleHandoff moves the primary's role off an ordinal the scale removes, by a switchover to
// the lowest healthy ordinal that stays, and reports whether it ran one.
func (r *Runner) scaleHandoff(ctx context.Context, c *v1.MysqlCluster, to int32, noSwitchover bool) (bool, error) {
	p, err := r.planScale(ctx, c, to, noSwitchover)
	if err != nil {
		return false, err
	}
	if p.Refusal != "" {
		return false, fmt.Errorf("%w: scale of %s to %d refused, nothing was changed: %s", outcome.ErrUnsafe, c.Name, to, p.Refusal)
	}
	for _, s := range p.Steps {
		if s.SwitchoverTo != nil {
			target := fmt.Sprintf("%s-%d", c.Name, *s.SwitchoverTo)
			r.Event(ctx, c, false, "ScaleHandoff", fmt.Sprintf("scale to %d removes the primary %s: switching over to %s first", to, c.Status.CurrentPrimary, target))
			return true, r.Switchover(ctx, client.ObjectKeyFromObject(c), SwitchoverOptions{To: target})
		}
	}
	return false, nil
}

// OrdinalOf is the StatefulSet ordinal of one of the cluster's pods (false for another name).
func OrdinalOf(c *v1.MysqlCluster, pod string) (int32, bool) { return ordinalOf(c, pod) }

// MemberCount is how many ordinals are members of the cluster now: the StatefulSet's pods while a
// scale is recorded (an instance it removes stays a member until it is detached), less an instance
// it adds and has not proven yet (never fenced through, elected, re-pointed or labelled by
// another operation); spec.replicas otherwise.
func MemberCount(c *v1.MysqlCluster) int32 {
	sc := c.Status.Scale
	if sc == nil || sc.Replicas <= 0 {
		return replicasOf(c)
	}
	n := sc.Replicas
	if sc.Action == scaleAdd && sc.Ordinal == n-1 && !slices.Contains(sc.Done, "+"+ScalePod(c, sc.Ordinal)) {
		n--
	}
	return n
}

// ScalePlan is what a scale would do, worked out from the recorded status; nothing changes.
type ScalePlan struct {
	Cluster  string   `json:"cluster"`
	From     int32    `json:"from"`
	To       int32    `json:"to"`
	Primary  string   `json:"primary"`
	Steps    []string `json:"steps,omitempty"`
	Refusal  string   `json:"refusal,omitempty"`
	SemiSync string   `json:"semiSync,omitempty"`
}

// PlanScale works out the scale of the cluster to n instances (see failover.PlanScale).
func (r *Runner) PlanScale(ctx context.Context, key client.ObjectKey, n int32, noSwitchover bool) (ScalePlan, error) {
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return ScalePlan{}, err
	}
	p, err := r.planScale(ctx, c, n, noSwitchover)
	if err != nil {
		return ScalePlan{}, err
	}
	from, err := r.liveReplicas(ctx, c)
	if err != nil {
		return ScalePlan{}, err
	}
	out := ScalePlan{Cluster: c.Name, From: from, To: n, Primary: c.Status.CurrentPrimary, Refusal: p.Refusal}
	for _, s := range p.Steps {
		out.Steps = append(out.Steps, s.String())
	}
	if w := semiSyncAcks(c); w > 0 {
		out.SemiSync = fmt.Sprintf("the primary waits for %d acknowledgement(s): a scale never leaves fewer replicas", w)
	}
	return out, nil
}

// planScale runs failover.PlanScale on the cluster as recorded: the StatefulSet's pods now, the
// primary's ordinal and which replicas the last observation saw replicating.
func (r *Runner) planScale(ctx context.Context, c *v1.MysqlCluster, to int32, noSwitchover bool) (failover.ScalePlan, error) {
	from, err := r.liveReplicas(ctx, c)
	if err != nil {
		return failover.ScalePlan{}, err
	}
	primary := -1
	if ord, ok := ordinalOf(c, c.Status.CurrentPrimary); ok {
		primary = int(ord)
	}
	healthy, quar := make([]bool, from), make([]bool, from)
	for _, in := range c.Status.Instances {
		if int(in.Ordinal) < len(healthy) && in.Role == v1.RoleReplica && in.Classification == "Replicating" && !quarantined(c, in.Name) {
			healthy[in.Ordinal] = true
		}
	}
	for k := range quar {
		quar[k] = quarantined(c, ScalePod(c, int32(k)))
	}
	return failover.PlanScale(failover.ScaleInput{
		From: int(from), To: int(to), Primary: primary, WaitForReplicas: int(semiSyncAcks(c)),
		Healthy: healthy, NoSwitchover: noSwitchover, Quarantined: quar,
	}), nil
}

// liveReplicas is the StatefulSet's replicas (a scale in progress: the count it holds).
func (r *Runner) liveReplicas(ctx context.Context, c *v1.MysqlCluster) (int32, error) {
	if sc := c.Status.Scale; sc != nil {
		return sc.Replicas, nil
	}
	n, err := stsReplicas(ctx, r.Kube, c)
	if n == 0 && err == nil {
		n = replicasOf(c)
	}
	return n, err
}

// recordScale records the scale in status.scale, once its plan is proven (a refused one records
// nothing), or a new count for a recorded one.
func (r *Runner) recordScale(ctx context.Context, c *v1.MysqlCluster, to int32, opts ScaleOptions) error {
	if c.Status.CurrentPrimary == "" || c.Status.Phase != v1.PhaseRunning && c.Status.Phase != v1.PhaseDegraded {
		return fmt.Errorf("%w: cluster %s is %s: a scale needs a bootstrapped cluster with a primary (see 'status %s')", outcome.ErrUnsafe, c.Name, c.Status.Phase, c.Name)
	}
	p, err := r.planScale(ctx, c, to, opts.NoSwitchover)
	if err != nil {
		return err
	}
	if p.Refusal != "" {
		return fmt.Errorf("%w: scale of %s to %d refused, nothing was changed: %s", outcome.ErrUnsafe, c.Name, to, p.Refusal)
	}
	// An instance removed while a rollout is unfinished keeps its volume, and one added again
	// later is made from the StatefulSet's current revision: an older image over data a newer
	// one may have rewritten.
	live := &appsv1.StatefulSet{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: specs.StatefulSetName(c)}, live); err == nil {
		why, err := rolloutAhead(ctx, r.Kube, live)
		if err != nil {
			return err
		}
		if why != "" {
			return fmt.Errorf("%w: scale of %s to %d refused, nothing was changed: %s; finish the rollout first ('resume %s' or 'upgrade %s')", outcome.ErrUnsafe, c.Name, to, why, c.Name, c.Name)
		}
	}
	from, err := r.liveReplicas(ctx, c)
	if err != nil {
		return err
	}
	if _, err := r.guard(fmt.Sprintf("record the scale of %s to %d", c.Name, to)); err != nil {
		return err
	}
	now := metav1.NewTime(r.Clock())
	err = UpdateStatus(ctx, r.Kube, c, func(s *v1.MysqlClusterStatus) error {
		if s.Operation != nil {
			return nil // someone started one; the loop re-reads it
		}
		if s.Scale == nil {
			s.Scale = &v1.ScaleStatus{ID: fmt.Sprintf("scale-%d", now.Unix()), From: from, Replicas: from}
		}
		s.Scale.To, s.Scale.DeleteData = to, s.Scale.DeleteData || opts.DeleteData
		return nil
	})
	_ = SyncPDB(ctx, r.Kube, c) // no eviction while a scale is recorded
	return err
}

// retargetScale records a new count for the scale this actor holds, refused like a new scale.
func (r *Runner) retargetScale(ctx context.Context, c *v1.MysqlCluster, op *v1.OperationStatus, opts ScaleOptions) error {
	p, err := r.planScale(ctx, c, opts.Replicas, opts.NoSwitchover)
	if err != nil {
		return err
	}
	if p.Refusal != "" {
		return fmt.Errorf("%w: scale of %s to %d refused (the scale to %d stays recorded at stage %s): %s", outcome.ErrUnsafe, c.Name, opts.Replicas, c.Status.Scale.To, op.Stage, p.Refusal)
	}
	for _, s := range p.Steps {
		if s.SwitchoverTo != nil {
			return fmt.Errorf("%w: a scale to %d would remove the primary %s, and a scale to %d is in progress: run 'resume %s' first, then scale again", outcome.ErrUnsafe, opts.Replicas, c.Status.CurrentPrimary, c.Status.Scale.To, c.Name)
		}
	}
	n, deleteData := opts.Replicas, opts.DeleteData
	return r.persist(ctx, c, op, StageScalePlanning, func(s *v1.MysqlClusterStatus) {
		s.Scale.To, s.Scale.DeleteData = n, s.Scale.DeleteData || deleteData
	})
}

// beginScale records the scale's operation (again, for a stopped one) at Planning.
func (r *Runner) beginScale(ctx context.Context, c *v1.MysqlCluster) error {
	sc := c.Status.Scale
	now := metav1.NewTime(r.Clock())
	op := v1.OperationStatus{ID: sc.ID, Type: OperationScale, Stage: StageScalePlanning, StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now}
	return r.begin(ctx, c, op, func(s *v1.MysqlClusterStatus) {
		s.Phase = v1.PhaseScaling
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Scaling",
			Message: fmt.Sprintf("scaling from %d to %d instances", sc.Replicas, sc.To)})
	})
}

// abortScale backs out a stopped scale (recorded, no operation running) that has no instance
// half added or half removed: the instances stay as they are, spec.replicas is set back to
// their count and status.scale is cleared, so that the budget opens again and other operations
// may run. An instance in flight is refused with the way out: an added one is backed out by a
// scale to the count without it, a detached one is finished by resume.
func (r *Runner) abortScale(ctx context.Context, c *v1.MysqlCluster) (string, error) {
	sc := c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	if sc.Action != "" && !slices.Contains(sc.Done, "+"+name) && !slices.Contains(sc.Done, "-"+name) {
		if sc.Action == scaleAdd {
			return "", fmt.Errorf("%w: the scale of %s stopped while adding %s: run 'scale %s --replicas %d' to back it out, or 'resume %s' to finish the scale to %d", outcome.ErrUnsafe, c.Name, name, c.Name, sc.Ordinal, c.Name, sc.To)
		}
		if sc.Replicas <= sc.Ordinal {
			return "", fmt.Errorf("%w: the scale of %s stopped after %s was detached: run 'resume %s' to finish removing it", outcome.ErrUnsafe, c.Name, name, c.Name)
		}
	}
	n := sc.Replicas
	if c.Spec.Replicas != n {
		if err := r.setSpecReplicas(ctx, c, n); err != nil {
			return "", err
		}
	}
	if _, err := r.guard(fmt.Sprintf("abort the scale of %s", c.Name)); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("scale of %s to %d aborted by %s: it stays at %d instances (spec.replicas %d)", c.Name, sc.To, r.Holder, n, n)
	err := UpdateStatus(ctx, r.Kube, c, func(s *v1.MysqlClusterStatus) error {
		if s.Scale == nil || s.Scale.ID != sc.ID || s.Operation != nil {
			return ErrLostRace
		}
		s.Scale = nil
		return nil
	})
	if errors.Is(err, ErrLostRace) {
		return "", fmt.Errorf("%w: the scale changed while it was being aborted; look again with 'status %s'", outcome.ErrHeld, c.Name)
	}
	if err != nil {
		return "", err
	}
	r.Event(ctx, c, true, "ScaleAborted", msg)
	_ = SyncPDB(ctx, r.Kube, c)
	return msg, nil
}
