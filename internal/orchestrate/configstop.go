package orchestrate

// A dial that can never work (the API server refuses to port-forward: RBAC, a node it cannot
// reach by name or certificate; see topology.ConfigError) must not be waited for as if the
// member were down: the stage engine stops the operation at once with the refusal, and an
// operation that had changed nothing yet leaves nothing behind.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// untouched lists, per operation type, the stages at which the operation has changed nothing on
// any server: every stage before them, and they themselves up to the point a member is first
// reached, only observe (and record what they observed). An operation stopped there by a
// configuration refusal is withdrawn as if it had never begun.
var untouched = map[string][]string{
	OperationSwitchover: {StageValidating},
	OperationFailover:   {StageConfirming},
	OperationBootstrap:  {StageWaitingForPods, StageRecordingProvenance},
	OperationConverge:   {StageWaitingForPods, StageRecordingProvenance},
	OperationUpgrade:    {StageUpgradePreparing},
	OperationScale:      {StageScalePlanning},
	OperationRebuild:    {StageRebuildPreparing},
}

// statusFields are the parts of the status that beginning an operation changes besides the
// operation itself: the phase, the Progressing and Ready conditions, and the upgrade and scale
// records an upgrade or rebuild begins with.
type statusFields struct {
	phase              v1.Phase
	progressing, ready *metav1.Condition
	upgrade            *v1.UpgradeStatus
	scale              *v1.ScaleStatus
}

func beginFields(s *v1.MysqlClusterStatus) statusFields {
	f := statusFields{phase: s.Phase, upgrade: s.Upgrade.DeepCopy(), scale: s.Scale.DeepCopy()}
	if c := meta.FindStatusCondition(s.Conditions, v1.ConditionProgressing); c != nil {
		f.progressing = c.DeepCopy()
	}
	if c := meta.FindStatusCondition(s.Conditions, v1.ConditionReady); c != nil {
		f.ready = c.DeepCopy()
	}
	return f
}

// begun is what beginning the operation id changed: the fields as they were before and as the
// begin wrote them.
type begun struct {
	id            string
	before, after statusFields
}

// withdrawal is the status change that withdraws op, stopped by a configuration refusal before
// its first change, or nil when it cannot be withdrawn: it is past its untouched stages, or it
// was begun by another actor (one that died right after) and what its begin changed is not known.
// Each field goes back to what it was before the begin only while it still holds what the begin
// wrote: a change made since by someone else (a supervisor's record during a converge) is kept.
func (r *Runner) withdrawal(op *v1.OperationStatus) func(*v1.MysqlClusterStatus) {
	if !slices.Contains(untouched[op.Type], op.Stage) {
		return nil
	}
	b := r.began
	if b == nil || b.id != op.ID {
		return withdrawalOfOthers(op)
	}
	return func(s *v1.MysqlClusterStatus) {
		s.Operation = nil
		if s.Phase == b.after.phase {
			s.Phase = b.before.phase
		}
		restoreCondition(s, v1.ConditionProgressing, b.before.progressing, b.after.progressing)
		restoreCondition(s, v1.ConditionReady, b.before.ready, b.after.ready)
		if sameJSON(s.Upgrade, b.after.upgrade) {
			s.Upgrade = b.before.upgrade.DeepCopy()
		}
		if sameJSON(s.Scale, b.after.scale) {
			s.Scale = b.before.scale.DeepCopy()
		}
		if op.Type == OperationScale && s.Scale != nil && scaleNotBegun(s.Scale) {
			// A scale records its target before its operation (recordScale): with no
			// instance in flight and none done, that record is only the request.
			s.Scale = nil
		}
	}
}

// withdrawalOfOthers withdraws an operation another actor began, for the types whose begin is
// known without having seen it: a failover's begin changes nothing but the operation (its
// Confirming refusal withdraws it the same way); a switchover begins only from Running and sets
// the phase SwitchingOver and Progressing; a converge sets Progressing only. The others (a
// bootstrap's earlier phase, an upgrade's or a scale's records) stay recorded.
func withdrawalOfOthers(op *v1.OperationStatus) func(*v1.MysqlClusterStatus) {
	var phase v1.Phase
	var reason string
	switch op.Type {
	case OperationFailover:
		return func(s *v1.MysqlClusterStatus) { s.Operation = nil }
	case OperationSwitchover:
		phase, reason = v1.PhaseSwitchingOver, "SwitchingOver"
	case OperationConverge:
		reason = "Converging"
	default:
		return nil
	}
	return func(s *v1.MysqlClusterStatus) {
		s.Operation = nil
		if phase != "" && s.Phase == phase {
			s.Phase = v1.PhaseRunning
		}
		if p := meta.FindStatusCondition(s.Conditions, v1.ConditionProgressing); p != nil && p.Status == metav1.ConditionTrue && p.Reason == reason {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle",
				Message: fmt.Sprintf("%s %s withdrawn before it changed anything", op.Type, op.ID)})
		}
	}
}

// scaleNotBegun reports whether a scale record holds nothing but its request: no instance added,
// removed, seeded or in flight.
func scaleNotBegun(sc *v1.ScaleStatus) bool {
	return sc.Action == "" && len(sc.Done) == 0 && !sc.Seeded && sc.SeedJob == "" && sc.Replicas == sc.From
}

// restoreCondition puts the condition of type typ back to before (removed when there was none),
// if it is still as after.
func restoreCondition(s *v1.MysqlClusterStatus, typ string, before, after *metav1.Condition) {
	if !sameJSON(meta.FindStatusCondition(s.Conditions, typ), after) {
		return
	}
	if before == nil {
		meta.RemoveStatusCondition(&s.Conditions, typ)
		return
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			s.Conditions[i] = *before.DeepCopy() // as it was, its transition time included
		}
	}
}

// sameJSON reports whether a and b are stored the same: what begin wrote is compared with what
// the API server gives back, which keeps times to the second only.
func sameJSON(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// stopsAtRefusal reports whether a configuration refusal stops op at once: an operation that can
// still be withdrawn or aborted at its stage, and every operation other than a switchover or a
// failover. A switchover or failover past its point of no return (the candidate promoted) has to
// finish by its stages' own bounds instead.
func stopsAtRefusal(op *v1.OperationStatus) bool {
	if op.Type != OperationSwitchover && op.Type != OperationFailover {
		return true
	}
	return slices.Contains(untouched[op.Type], op.Stage) || slices.Contains(abortable[op.Type], op.Stage)
}

// stopForConfig ends the run of op at a configuration refusal ce: no retry changes it, and
// waiting out the stage's bound would only leave the cluster in the operation's phase for
// minutes. An operation still at an untouched stage is withdrawn (see withdrawal): no operation,
// no history record, the phase and conditions as they were; an Event says why. Any other stays
// recorded at its stage with the refusal as its message, for resume (or abort) once the
// configuration is fixed. The error returned wraps ce (outcome.ErrConfig).
func (r *Runner) stopForConfig(ctx context.Context, key client.ObjectKey, c *v1.MysqlCluster, op *v1.OperationStatus, ce *topology.ConfigError) error {
	if restore := r.withdrawal(op); restore != nil {
		err := r.persist(ctx, c, op, op.Stage, restore)
		if err != nil && !errors.Is(err, ErrLostRace) {
			return fmt.Errorf("%s of %s stopped at stage %s by a configuration refusal (%v), and withdrawing it failed: %w", op.Type, key, op.Stage, ce, err)
		}
		if err == nil {
			r.began = nil
			r.Event(ctx, c, true, "OperationWithdrawn", fmt.Sprintf("%s %s withdrawn at stage %s before it changed anything: %v", op.Type, op.ID, op.Stage, ce))
			r.syncPDB(ctx, c) // the budget the begin closed opens again if the status allows it
		}
		return fmt.Errorf("%s of %s stopped before it changed anything (nothing is recorded): %w", op.Type, key, ce)
	}
	next := fmt.Sprintf("run 'resume %s' once it is fixed", c.Name)
	if slices.Contains(abortable[op.Type], op.Stage) || op.Type == OperationUpgrade || op.Type == OperationRebuild || op.Type == OperationConverge {
		next += fmt.Sprintf(", or 'abort %s'", c.Name)
	}
	msg := fmt.Sprintf("stopped: %v; %s", ce, next)
	if op.Message != msg {
		_ = r.persist(ctx, c, op, op.Stage, func(s *v1.MysqlClusterStatus) { s.Operation.Message = msg })
		r.Event(ctx, c, true, "OperationStopped", fmt.Sprintf("%s %s stopped at stage %s: %s", op.Type, op.ID, op.Stage, msg))
	}
	return fmt.Errorf("%s of %s stopped at stage %s, which stays recorded (%s): %w", op.Type, key, op.Stage, next, ce)
}
