package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
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
	// BarrierBound is how long each barrier may take to hold (0: upgradeBarrierBound).
	BarrierBound time.Duration
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
		case op == nil && up != nil && up.Held && !started && opts.ResumeOnly:
			return fmt.Errorf("%w: the upgrade %s was aborted (pods on the new template: %s); run 'upgrade %s' to continue it", ErrAborted, up.ID, orNone(up.Done), c.Name)
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
				_ = SyncPDB(ctx, r.Kube, c)
				return upgradeResult(c)
			}
			if err := r.beginUpgrade(ctx, c, ""); err != nil {
				return err
			}
			started = true
			continue
		case isHandoff(c, op):
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
			return r.runStage(ctx, upgradeKind, c, op, stageEnv{bound: opts.BarrierBound})
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
	now := metav1.NewTime(r.Clock())
	if id == "" {
		id = fmt.Sprintf("upgrade-%d", now.Unix())
	}
	op := v1.OperationStatus{ID: id, Type: OperationUpgrade, Stage: StageUpgradePreparing, StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now}
	defer func() { _ = SyncPDB(ctx, r.Kube, c) }() // no eviction from here until the upgrade ends
	return r.begin(ctx, c, op, func(s *v1.MysqlClusterStatus) {
		if s.Upgrade == nil {
			s.Upgrade = &v1.UpgradeStatus{ID: id, Barrier: v1.UpgradePreparing, ToImage: c.Spec.Image}
		} else if s.Upgrade.StartedAt != nil {
			op.StartedAt = *s.Upgrade.StartedAt // the whole upgrade's duration counts
		}
		if s.Upgrade.StartedAt == nil {
			s.Upgrade.StartedAt = &now
		}
		s.Upgrade.HandoffFrom, s.Upgrade.HandoffTo, s.Upgrade.Held = "", "", false
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
		r.Event(ctx, c, false, "UpgradeHandoff", fmt.Sprintf("upgrade %s: switching the primary over from %s to %s before its pod restarts", up.ID, up.HandoffFrom, up.HandoffTo))
		// The handoff is a switchover of its own in the history, not the answer to the request
		// that began the upgrade (if any).
		sw := *r
		sw.RequestID = ""
		if err := sw.Switchover(ctx, client.ObjectKeyFromObject(c), SwitchoverOptions{To: up.HandoffTo}); err != nil {
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
			return RecordResult(h)
		}
	}
	return nil
}

// upgradeKind runs an upgrade.
var upgradeKind = &operationKind{
	stages: []namedStage{
		{StageUpgradePreparing, bounded((*Runner).upPreparing)},
		{StageTemplatePending, bounded((*Runner).upTemplatePending)},
		{StageTemplateReady, bounded((*Runner).upTemplateReady)},
		{StageReplicasVerified, (*Runner).upReplicasVerified},
		{StagePrimaryReady, bounded((*Runner).upPrimaryReady)},
	},
	guard:  (*Runner).upGuard,
	bounds: map[string]time.Duration{StageUpgradePreparing: upgradeBarrierBound, StageTemplatePending: upgradeBarrierBound, StageTemplateReady: upgradeBarrierBound, StagePrimaryReady: upgradeBarrierBound},
	prepare: func(r *Runner, ctx context.Context, x *stageEnv) error {
		if x.c.Status.Upgrade == nil {
			return fmt.Errorf("upgrade %s is recorded without status.upgrade: run 'abort %s'", x.op.ID, x.c.Name)
		}
		members, err := r.readyMembers(ctx, x.c)
		if err != nil {
			return err
		}
		x.members, x.byName = members, map[string]Instance{}
		for _, m := range members {
			x.byName[m.Pod.Name] = m
		}
		if x.creds, err = r.Credentials(ctx, x.c); err != nil {
			return err
		}
		x.ss = r.OpenSessions(ctx, members, x.creds)
		// A replica restarted under writes has a backlog: each check gives it long enough to
		// reach the primary's set as observed then, so that it converges on a moving target.
		x.ss.catchUp = 15 * time.Second
		x.primaryName = x.c.Status.CurrentPrimary
		return nil
	},
}

// applyTemplate applies the configuration the pods start with and the StatefulSet with the
// partition status.upgrade records, and returns the StatefulSet once the controller has
// observed it (its update revision is then the current template's).
func (r *Runner) applyTemplate(ctx context.Context, c *v1.MysqlCluster) (*appsv1.StatefulSet, error) {
	cm, err := specs.BuildConfigMap(c)
	if err != nil {
		return nil, err
	}
	sts, err := specs.BuildStatefulSet(c)
	if err != nil {
		return nil, err
	}
	objs := []client.Object{cm, sts}
	var lower *int32
	var keep []string
	if up := c.Status.Upgrade; up != nil {
		lower = up.Partition
		if up.TemplateHash != specs.StatefulSetTemplateHash(sts) {
			// Not the template this upgrade adopted (the spec changed during the rollout): the
			// rollout goes on with the live one; PrimaryReady goes back to Preparing for it.
			keep = []string{"the spec's template changed during the rollout; it is rolled out once every pod runs the one rolling out now"}
		}
	}
	held, err := holdTemplate(ctx, r.Kube, sts, lower, keep...)
	if err != nil {
		return nil, err
	}
	if held != "" {
		// The rollout goes on with the template it started (and its pods' configuration);
		// one that would roll out another image than the spec's cannot go on.
		if img := templateImage(&sts.Spec.Template); img != c.Spec.Image {
			return nil, fmt.Errorf("%w: spec.image is %s, and the rollout of %s is unfinished: %s; set spec.image back to %s and run 'resume %s' to finish it, then upgrade to %s",
				outcome.ErrUnsafe, c.Spec.Image, img, held, img, c.Name, c.Spec.Image)
		}
	}
	for _, o := range objs {
		deadline, err := r.guard("apply the " + o.GetObjectKind().GroupVersionKind().Kind + " of " + c.Name)
		if err != nil {
			return nil, err
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			// A write still in flight when the lease runs out is cut off: a paused actor that
			// wakes after losing the cluster cannot land a template another actor replaced.
			actx, cancel = context.WithDeadline(ctx, deadline)
		}
		_, err = Apply(actx, r.Kube, o)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	pruneConfigMaps(ctx, r.Kube, c)
	live := &appsv1.StatefulSet{}
	if err := r.Kube.Get(ctx, client.ObjectKeyFromObject(sts), live); err != nil {
		return nil, err
	}
	if live.Status.ObservedGeneration < live.Generation || live.Status.UpdateRevision == "" {
		return nil, notYet("the StatefulSet controller has not observed generation %d of %s yet", live.Generation, live.Name)
	}
	return live, nil
}

// templateImage is the image of the MySQL container of a pod template.
func templateImage(t *corev1.PodTemplateSpec) string {
	return containerImage(&corev1.Pod{Spec: t.Spec})
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
	r.Event(ctx, x.c, true, "UpgradeStopped", msg)
	now := x.now
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Failed", msg, 0)
		if degraded {
			s.Phase = v1.PhaseDegraded
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "UpgradeStopped", Message: msg})
		}
	}, nil
}

// abortUpgrade stops an upgrade before its next pod. A pod in flight (restarting, or restarted
// and not yet proven) is first carried through its barrier, so that the cluster is left
// consistent: every pod replicating, some on the new template and some on the old. The partition
// keeps holding where the rollout stopped (status.upgrade stays, marked Held), so that no pod
// changes template, also when recreated, until 'upgrade' continues the rollout.
func (r *Runner) abortUpgrade(ctx context.Context, c *v1.MysqlCluster) (string, error) {
	op, key, up := c.Status.Operation, client.ObjectKeyFromObject(c), c.Status.Upgrade
	if up.Held && op == nil {
		return nothingToAbort(key), nil
	}
	if op != nil && (op.Stage == StageTemplatePending || op.Stage == StageTemplateReady) {
		msg := fmt.Sprintf("abort asked by %s: the rollout stops once %s has passed its barrier", r.Holder, up.Pod)
		if err := r.persist(ctx, c, op, op.Stage, func(s *v1.MysqlClusterStatus) {
			s.Upgrade.Stopping, s.Operation.Message = true, msg
		}); err != nil {
			return "", err
		}
		if err := r.Upgrade(ctx, key, UpgradeOptions{ResumeOnly: true}); err != nil && !errors.Is(err, ErrAborted) {
			return "", err
		}
		if err := r.Kube.Get(ctx, key, c); err != nil {
			return "", err
		}
		return LastMessage(c, OperationUpgrade), nil
	}
	msg := fmt.Sprintf("upgrade aborted by %s before its next pod; pods on the new template: %s; the others keep the old one until the next 'upgrade %s'", r.Holder, orNone(up.Done), c.Name)
	if _, err := r.guard("abort the upgrade of " + c.Name); err != nil {
		return "", err
	}
	now := r.Clock()
	err := UpdateStatus(ctx, r.Kube, c, func(s *v1.MysqlClusterStatus) error {
		if s.Upgrade == nil || s.Upgrade.ID != up.ID {
			return ErrLostRace
		}
		if s.Operation == nil {
			start := metav1.NewTime(now)
			if s.Upgrade.StartedAt != nil {
				start = *s.Upgrade.StartedAt
			}
			s.Operation = &v1.OperationStatus{ID: up.ID, Type: OperationUpgrade, StartedAt: start}
		} else if s.Operation.Type != OperationUpgrade || s.Operation.Holder != r.Holder || s.Operation.Epoch != r.Epoch {
			return ErrLostRace
		}
		finish(s, now, "Aborted", msg, 0)
		s.Upgrade.Held, s.Upgrade.Stopping, s.Upgrade.Pod, s.Upgrade.HandoffFrom, s.Upgrade.HandoffTo = true, false, "", "", ""
		return nil
	})
	if err != nil {
		return "", err
	}
	r.Event(ctx, c, true, "UpgradeAborted", msg)
	return msg, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// isHandoff reports whether op is the handoff switchover of the upgrade recorded in status (a
// switchover a person started during a stopped upgrade is not).
func isHandoff(c *v1.MysqlCluster, op *v1.OperationStatus) bool {
	up := c.Status.Upgrade
	return up != nil && op != nil && op.Type == OperationSwitchover && up.HandoffFrom != "" && op.Target == up.HandoffTo
}

// IsHandoff is isHandoff for commands.
func IsHandoff(c *v1.MysqlCluster, op *v1.OperationStatus) bool { return isHandoff(c, op) }

// HandoffPending reports an upgrade between its own stages whose handoff switchover has not
// begun (or has finished) and whose next part is not recorded yet.
func HandoffPending(c *v1.MysqlCluster) bool {
	up := c.Status.Upgrade
	return c.Status.Operation == nil && up != nil && up.HandoffFrom != ""
}
