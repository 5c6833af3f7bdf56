package orchestrate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// upPreparing proves the cluster healthy and the version rules kept, then decides the next step
// from what the pods run. Every part of an upgrade (the first, the one after the handoff, a
// resumed one) starts here, so every decision is made from the pods as they are.
func (r *Runner) upPreparing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c := x.c
	sts, err := r.applyTemplate(ctx, c)
	if err != nil {
		return "", nil, err
	}
	if why, err := r.upHealthy(ctx, x); err != nil || why != "" {
		return r.upWait(ctx, x, why, err)
	}
	promise, err := failover.ParseImage(c.Spec.Image)
	if err != nil {
		return r.stopUpgrade(ctx, x, err.Error(), false)
	}
	from, versions, err := r.upVersions(x)
	if err != nil {
		return "", nil, err
	}
	if why := failover.CheckUpgrade(from, promise); why != "" {
		return r.stopUpgrade(ctx, x, why, false)
	}
	x.op.Message = "versions: " + strings.Join(versions, ", ")
	from0 := ""
	if p := x.byName[c.Status.CurrentPrimary].pod; p != nil && !podUpdated(p, sts) {
		from0 = containerImage(p)
	}
	next, change, err := r.upNext(ctx, x)
	return next, func(s *v1.MysqlClusterStatus) {
		if s.Upgrade.FromImage == "" {
			s.Upgrade.FromImage = from0
		}
		s.Upgrade.ToImage = c.Spec.Image
		if change != nil {
			change(s)
		}
	}, err
}

// upNext decides the step after a proven barrier (see failover.NextRollStep).
func (r *Runner) upNext(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c := x.c
	pods, err := r.pods(ctx, c)
	if err != nil {
		return "", nil, err
	}
	sts, err := r.applyTemplate(ctx, c)
	if err != nil {
		return "", nil, err
	}
	updated, primary := rollState(c, pods, sts)
	if primary < 0 {
		return "", nil, notYet("the primary %s has no pod", c.Status.CurrentPrimary)
	}
	step := failover.NextRollStep(updated, primary)
	name := func(ord int) string { return fmt.Sprintf("%s-%d", c.Name, ord) }
	switch {
	case step.Done:
		return StagePrimaryReady, func(s *v1.MysqlClusterStatus) { s.Upgrade.Pod = "" }, nil
	case step.Handoff:
		from, to := name(primary), name(step.HandoffTo)
		return StageReplicasVerified, func(s *v1.MysqlClusterStatus) {
			s.Upgrade.Pod, s.Upgrade.HandoffFrom, s.Upgrade.HandoffTo = "", from, to
			s.Operation.Message = fmt.Sprintf("the next pod to restart is the primary %s: its role moves to %s first", from, to)
		}, nil
	}
	k := int32(step.Ordinal)
	r.event(ctx, c, false, "UpgradeRestartingPod", fmt.Sprintf("upgrade %s: restarting %s on the new template", x.op.ID, name(step.Ordinal)))
	return StageTemplatePending, func(s *v1.MysqlClusterStatus) {
		s.Upgrade.Barrier, s.Upgrade.Pod, s.Upgrade.Partition = v1.UpgradeTemplatePending, name(step.Ordinal), &k
	}, nil
}

// upTemplatePending lowers the partition to the pod (persisted before this stage ran) and waits
// for the StatefulSet controller to recreate it on the new template and for it to be ready.
func (r *Runner) upTemplatePending(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, name := x.c, x.c.Status.Upgrade.Pod
	sts, err := r.applyTemplate(ctx, c)
	if err != nil {
		return "", nil, err
	}
	m, ready := x.byName[name]
	switch {
	case !ready || !podUpdated(m.pod, sts):
		why := fmt.Sprintf("waiting for %s to restart on template revision %s", name, sts.Status.UpdateRevision)
		return r.upWait(ctx, x, why, nil)
	}
	return StageTemplateReady, func(s *v1.MysqlClusterStatus) { s.Upgrade.Barrier = v1.UpgradeTemplateReady }, nil
}

// upTemplateReady is the pod's barrier: it runs the version its image promises, replicates from
// the primary with both threads running, has applied everything the primary had, and
// acknowledges semi-sync when the spec asks; every other replica is caught up too. Readiness
// alone proves none of that.
func (r *Runner) upTemplateReady(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, name := x.c, x.c.Status.Upgrade.Pod
	s, err := x.ss.observe(name)
	if err != nil {
		return r.upWait(ctx, x, err.Error(), nil)
	}
	promise, err := failover.ParseImage(c.Spec.Image)
	if err != nil {
		return r.stopUpgrade(ctx, x, err.Error(), false)
	}
	if why := failover.CheckRunning(name, s.Flavor, promise); why != "" {
		return r.stopUpgrade(ctx, x, why, false)
	}
	if done, next, change, err := r.upJoin(ctx, x, name, s); done {
		return next, change, err
	}
	if why, err := r.upHealthy(ctx, x); err != nil || why != "" {
		return r.upWait(ctx, x, why, err)
	}
	if err := r.labelRole(ctx, c, name, v1.RoleReplica); err != nil {
		return "", nil, err
	}
	r.event(ctx, c, false, "UpgradePodReady", fmt.Sprintf("upgrade %s: %s runs %s, replicates from %s and is caught up", x.op.ID, name, s.Flavor, x.primaryName))
	next, change, err := r.upNext(ctx, x)
	version := s.Flavor.VersionString
	return next, func(s *v1.MysqlClusterStatus) {
		if !slices.Contains(s.Upgrade.Done, name) {
			s.Upgrade.Done = append(s.Upgrade.Done, name)
		}
		for i := range s.Instances {
			if s.Instances[i].Name == name {
				s.Instances[i].Version = version
			}
		}
		if change != nil {
			change(s)
		}
	}, err
}

// upJoin makes a restarted replica replicate again (replicas start with replication stopped:
// skip_slave_start), once its history is proven an ancestor of the primary's. done reports that
// the stage's answer is decided here.
func (r *Runner) upJoin(ctx context.Context, x *stageEnv, name string, s topology.Snapshot) (done bool, next string, change func(*v1.MysqlClusterStatus), err error) {
	c, primary := x.c, x.primaryName
	ip := PodHost(c, primary)
	if replicatesFrom(s, ip) && (!c.Spec.SemiSync.SemiSyncEnabled() || s.SemiSync.ReplicaEnabled) {
		return false, "", nil, nil
	}
	ps, err := x.ss.observe(primary)
	if err != nil {
		next, change, err = r.upWait(ctx, x, err.Error(), nil)
		return true, next, change, err
	}
	if e, ok, err := x.ss.ancestor(primary, ps, s); err != nil || !ok {
		if err != nil {
			return true, "", nil, err
		}
		next, change, err = r.stopUpgrade(ctx, x, fmt.Sprintf("%s restarted with transactions the primary does not have (%s %s): it is not joined", name, e.Reason, e.ErrantGTIDs), true)
		return true, next, change, err
	}
	in, err := x.ss.connect(name)
	if err == nil {
		err = r.joinReplica(ctx, c, in, s, ip, x.creds)
	}
	if err != nil {
		return true, "", nil, err
	}
	return true, "", nil, notYet("%s joined the primary %s again; waiting for it to catch up", name, primary)
}

// upHealthy says why the cluster is not healthy enough for the next step ("" when it is): the
// primary writable, every replica replicating from it and caught up, and as many semi-sync
// acknowledgers connected as the spec asks.
func (r *Runner) upHealthy(ctx context.Context, x *stageEnv) (string, error) {
	c, primary := x.c, x.primaryName
	if len(x.members) < int(c.Spec.Replicas) {
		return fmt.Sprintf("%d of %d pods ready", len(x.members), c.Spec.Replicas), nil
	}
	ps, err := x.ss.observe(primary)
	if err != nil {
		return "the primary: " + err.Error(), nil
	}
	if ps.ReadOnly {
		return "the primary " + primary + " is read-only", nil
	}
	pending, err := x.ss.pendingReplicas(c, x.members, primary, PodHost(c, primary), ps)
	if err != nil || len(pending) > 0 {
		return strings.Join(pending, "; "), err
	}
	if want := semiSyncWanted(c); want > 0 {
		ps, err = x.ss.observe(primary)
		if err != nil {
			return "the primary: " + err.Error(), nil
		}
		if ps.SemiSync.SourceClients < want {
			return fmt.Sprintf("the primary %s has %d semi-sync replica(s) connected, the spec asks for %d", primary, ps.SemiSync.SourceClients, want), nil
		}
	}
	return "", nil
}

// upVersions returns the lowest version the instances report and each one's version.
func (r *Runner) upVersions(x *stageEnv) (topology.Flavor, []string, error) {
	var low topology.Flavor
	var out []string
	for _, m := range x.members {
		s, err := x.ss.observe(m.pod.Name)
		if err != nil {
			return low, nil, err
		}
		out = append(out, m.pod.Name+" "+s.Flavor.String())
		if low.Line == "" || s.Flavor.IsMariaDB() != low.IsMariaDB() {
			if low.Line != "" {
				return low, nil, fmt.Errorf("the instances run different products (%s)", strings.Join(out, ", "))
			}
			low = s.Flavor
			continue
		}
		if !s.Flavor.Version.AtLeast(low.Version.Major, low.Version.Minor, low.Version.Patch) {
			low = s.Flavor
		}
	}
	return low, out, nil
}

// upWait waits for a barrier until its bound, then stops the rollout with the reason, the
// cluster marked Degraded (a pod that does not come back or catch up is a cluster not healthy).
func (r *Runner) upWait(ctx context.Context, x *stageEnv, why string, err error) (string, func(*v1.MysqlClusterStatus), error) {
	if err != nil {
		return "", nil, err
	}
	if !x.overdue {
		return "", nil, notYet("%s", why)
	}
	return r.stopUpgrade(ctx, x, fmt.Sprintf("stage %s did not hold within %s: %s", x.op.Stage, upgradeBarrierBound, why), true)
}

// upReplicasVerified ends this part of the upgrade: the operation record is cleared (no history:
// the upgrade goes on) so that the handoff can run as a switchover of its own, after which the
// upgrade continues from Preparing under the same ID.
func (r *Runner) upReplicasVerified(_ context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	return "", func(s *v1.MysqlClusterStatus) {
		s.Upgrade.Barrier = v1.UpgradeReplicasVerified
		s.Operation = nil
		s.Phase = v1.PhaseRunning
	}, nil
}

// upPrimaryReady proves the finished cluster (the primary on the new template and writable,
// every replica caught up), resets the partition and ends the upgrade.
func (r *Runner) upPrimaryReady(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c := x.c
	if why, err := r.upHealthy(ctx, x); err != nil || why != "" {
		return r.upWait(ctx, x, why, err)
	}
	_, versions, err := r.upVersions(x)
	if err != nil {
		return "", nil, err
	}
	done := c.DeepCopy()
	done.Status.Upgrade = nil
	if _, err := r.applyTemplate(ctx, done); err != nil {
		return "", nil, err
	}
	up := c.Status.Upgrade
	now := x.now
	msg := fmt.Sprintf("every pod restarted on %s in %s, replicas first, the primary's role handed over by switchover; %s", c.Spec.Image, now.Sub(opStart(x.op)).Round(time.Millisecond), strings.Join(versions, ", "))
	if up.FromImage != "" && up.FromImage != c.Spec.Image {
		msg = "from " + up.FromImage + ": " + msg
	}
	r.event(ctx, c, false, "UpgradeSucceeded", msg)
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Succeeded", msg, 0)
		s.Upgrade = nil
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: msg})
	}, nil
}

// containerImage is the image of the pod's MySQL container.
func containerImage(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == ContainerName {
			return c.Image
		}
	}
	return ""
}
