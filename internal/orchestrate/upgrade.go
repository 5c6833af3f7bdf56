package orchestrate

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// OperationUpgrade is the type of a rolling restart of every pod onto the StatefulSet's current
// pod template (a new image, configuration or resources).
const OperationUpgrade = "upgrade"

// Upgrade stages. Preparing decides every next step from what the pods run; TemplatePending and
// TemplateReady repeat for each pod, replicas first and highest ordinal first; ReplicasVerified
// hands the primary's role over by switchover (a switchover operation of its own, recorded in
// the history) before the primary's pod restarts; PrimaryReady proves the finished cluster.
const (
	StageUpgradePreparing = "Preparing"
	StageTemplatePending  = "TemplatePending"
	StageTemplateReady    = "TemplateReady"
	StageReplicasVerified = "ReplicasVerified"
	StagePrimaryReady     = "PrimaryReady"
)

// UpgradeStages lists the stages in order.
var UpgradeStages = []string{StageUpgradePreparing, StageTemplatePending, StageTemplateReady, StageReplicasVerified, StagePrimaryReady}

// upgradeBarrierBound is how long a restarted pod may take to run the new template and pass its
// barrier (replicating, caught up, acknowledging) before the rollout stops with the reason.
const upgradeBarrierBound = 5 * time.Minute

// revisionLabel is the label the StatefulSet controller sets on each pod: the revision of the
// pod template the pod was created from.
const revisionLabel = "controller-revision-hash"

// UpgradeOptions tune an upgrade.
type UpgradeOptions struct {
	// ResumeOnly continues the recorded upgrade and never starts one.
	ResumeOnly bool
}

// Upgrade restarts every pod onto the StatefulSet's current pod template, one at a time behind
// barriers of evidence, or resumes the upgrade recorded in status (also one paused for its
// handoff switchover, or stopped by a barrier).
func (r *Runner) Upgrade(ctx context.Context, key client.ObjectKey, opts UpgradeOptions) error {
	started := false
	lastReported := ""
	for {
		c := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, key, c); err != nil {
			return err
		}
		op, up := c.Status.Operation, c.Status.Upgrade
		switch {
		case op == nil && up != nil && (!started || up.HandoffFrom != ""):
			// Between the upgrade's own stages: the primary's role is being handed over, or a
			// stopped upgrade is continued.
			started = true
			if err := r.upgradeBetween(ctx, c); err != nil {
				return err
			}
			continue
		case op == nil:
			if started || opts.ResumeOnly {
				return upgradeResult(c)
			}
			if err := r.beginUpgrade(ctx, c, ""); err != nil {
				return err
			}
			started = true
			continue
		case op.Type == OperationSwitchover && up != nil:
			started = true
			if err := r.Switchover(ctx, key, SwitchoverOptions{To: op.Target, ResumeOnly: true}); err != nil {
				return handoffFailed(c, err)
			}
			continue
		case op.Type != OperationUpgrade:
			return r.otherOperation(c, op)
		}
		started = true
		if _, _, err := r.step(ctx, key, c, op, &lastReported, func() (string, func(*v1.MysqlClusterStatus), error) {
			return r.runStage(ctx, upgradeKind, c, op, stageEnv{})
		}); err != nil {
			return err
		}
	}
}

// beginUpgrade records a new upgrade operation, or the next part of one (id set) once its
// handoff switchover is done.
func (r *Runner) beginUpgrade(ctx context.Context, c *v1.MysqlCluster, id string) error {
	if id == "" && (c.Status.Phase != v1.PhaseRunning || c.Status.CurrentPrimary == "") {
		return fmt.Errorf("%w: cluster %s is %s, not Running: an upgrade needs a healthy primary and replicas (see 'status %s')", outcome.ErrUnsafe, c.Name, c.Status.Phase, c.Name)
	}
	now := metav1.NewTime(r.now())
	if id == "" {
		id = fmt.Sprintf("upgrade-%d", now.Unix())
	}
	op := v1.OperationStatus{ID: id, Type: OperationUpgrade, Stage: StageUpgradePreparing, StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now}
	return r.begin(ctx, c, op, func(s *v1.MysqlClusterStatus) {
		if s.Upgrade == nil {
			s.Upgrade = &v1.UpgradeStatus{ID: id, Barrier: v1.UpgradePreparing, ToImage: c.Spec.Image}
		} else if s.Upgrade.StartedAt != nil {
			op.StartedAt = *s.Upgrade.StartedAt // the whole upgrade's duration counts
		}
		if s.Upgrade.StartedAt == nil {
			s.Upgrade.StartedAt = &now
		}
		s.Upgrade.HandoffFrom, s.Upgrade.HandoffTo = "", ""
		s.Operation.StartedAt = op.StartedAt
		s.Phase = v1.PhaseUpgrading
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Upgrading", Message: "rolling upgrade in progress"})
	})
}

// upgradeBetween continues an upgrade that has no operation recorded: it runs the handoff
// switchover the upgrade asked for, then records the upgrade's next part; an upgrade a barrier
// stopped starts again from Preparing.
func (r *Runner) upgradeBetween(ctx context.Context, c *v1.MysqlCluster) error {
	up := c.Status.Upgrade
	if up.HandoffFrom != "" && c.Status.CurrentPrimary == up.HandoffFrom {
		r.event(ctx, c, false, "UpgradeHandoff", fmt.Sprintf("upgrade %s: switching the primary over from %s to %s before its pod restarts", up.ID, up.HandoffFrom, up.HandoffTo))
		if err := r.Switchover(ctx, client.ObjectKeyFromObject(c), SwitchoverOptions{To: up.HandoffTo}); err != nil {
			return handoffFailed(c, err)
		}
	}
	return r.beginUpgrade(ctx, c, up.ID)
}

// handoffFailed is the error of an upgrade whose handoff switchover did not complete: the
// upgrade stays recorded (the partition holds the primary's pod back) for resume or abort.
func handoffFailed(c *v1.MysqlCluster, err error) error {
	return fmt.Errorf("upgrade of %s paused before the primary's pod restarts: the handoff switchover did not complete: %w; run 'resume %s' to try it again, or 'abort %s' to stop the upgrade with the cluster as it is", c.Name, err, c.Name, c.Name)
}

// upgradeResult reports the last upgrade's result from history.
func upgradeResult(c *v1.MysqlCluster) error {
	for _, h := range c.Status.History {
		if h.Type == OperationUpgrade {
			return recordResult(h)
		}
	}
	return nil
}

// upgradeKind runs an upgrade.
var upgradeKind = &operationKind{
	stages: []namedStage{
		{StageUpgradePreparing, (*Runner).upPreparing},
		{StageTemplatePending, (*Runner).upTemplatePending},
		{StageTemplateReady, (*Runner).upTemplateReady},
		{StageReplicasVerified, (*Runner).upReplicasVerified},
		{StagePrimaryReady, (*Runner).upPrimaryReady},
	},
	bounds: map[string]time.Duration{StageUpgradePreparing: upgradeBarrierBound, StageTemplatePending: upgradeBarrierBound, StageTemplateReady: upgradeBarrierBound, StagePrimaryReady: upgradeBarrierBound},
	prepare: func(r *Runner, ctx context.Context, x *stageEnv) error {
		if x.c.Status.Upgrade == nil {
			return fmt.Errorf("upgrade %s is recorded without status.upgrade: run 'abort %s'", x.op.ID, x.c.Name)
		}
		members, err := r.readyMembers(ctx, x.c)
		if err != nil {
			return err
		}
		x.members, x.byName = members, map[string]instance{}
		for _, m := range members {
			x.byName[m.pod.Name] = m
		}
		if x.creds, err = r.credentials(ctx, x.c); err != nil {
			return err
		}
		x.ss = r.openSessions(ctx, members, x.creds)
		x.primaryName = x.c.Status.CurrentPrimary
		return nil
	},
}

// applyTemplate applies the StatefulSet with the partition status.upgrade records and returns
// it once the controller has observed it (its update revision is then the current template's).
func (r *Runner) applyTemplate(ctx context.Context, c *v1.MysqlCluster) (*appsv1.StatefulSet, error) {
	sts, err := BuildStatefulSet(c)
	if err != nil {
		return nil, err
	}
	if _, err := r.guard("apply the StatefulSet of " + c.Name); err != nil {
		return nil, err
	}
	if _, err := Apply(ctx, r.Kube, sts); err != nil {
		return nil, err
	}
	live := &appsv1.StatefulSet{}
	if err := r.Kube.Get(ctx, client.ObjectKeyFromObject(sts), live); err != nil {
		return nil, err
	}
	if live.Status.ObservedGeneration < live.Generation || live.Status.UpdateRevision == "" {
		return nil, notYet("the StatefulSet controller has not observed generation %d of %s yet", live.Generation, live.Name)
	}
	return live, nil
}

// podUpdated reports whether the pod was created from the StatefulSet's current template.
func podUpdated(p *corev1.Pod, sts *appsv1.StatefulSet) bool {
	return p != nil && p.Labels[revisionLabel] == sts.Status.UpdateRevision
}

// rollState is which ordinals run the current template, and where the primary is.
func rollState(c *v1.MysqlCluster, pods map[int32]*corev1.Pod, sts *appsv1.StatefulSet) (updated []bool, primary int) {
	updated = make([]bool, c.Spec.Replicas)
	primary = -1
	for ord := range c.Spec.Replicas {
		p := pods[ord]
		updated[ord] = podUpdated(p, sts)
		if p != nil && p.Name == c.Status.CurrentPrimary {
			primary = int(ord)
		}
	}
	return updated, primary
}

// stopUpgrade ends the upgrade operation as Failed with the reason, keeping status.upgrade (the
// partition keeps holding the pods not yet restarted back); degraded marks the cluster Degraded.
// 'resume' continues it from Preparing once the cause is fixed; 'abort' ends it.
func (r *Runner) stopUpgrade(ctx context.Context, x *stageEnv, reason string, degraded bool) (string, func(*v1.MysqlClusterStatus), error) {
	msg := fmt.Sprintf("%s; the rollout stopped before the next pod (run 'resume %s' once fixed, or 'abort %s')", reason, x.c.Name, x.c.Name)
	r.event(ctx, x.c, true, "UpgradeStopped", msg)
	now := x.now
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Failed", msg, 0)
		if degraded {
			s.Phase = v1.PhaseDegraded
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "UpgradeStopped", Message: msg})
		}
	}, nil
}
