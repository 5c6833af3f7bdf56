package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// upPreparing proves the cluster healthy and the version rules kept, adopts the pod template the
// spec makes now, then decides the next step from what the pods run. Every part of an upgrade
// (the first, the one after the handoff, a resumed one) starts here, so every decision is made
// from the pods as they are.
func (r *Runner) upPreparing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c := x.c
	if c.Spec.Replicas < 2 {
		return r.stopUpgrade(ctx, x, "a single instance cannot restart without stopping writes, and upgrade never restarts a primary in place: scale to 2 or more instances first", false)
	}
	promise, err := failover.ParseImage(c.Spec.Image)
	if err != nil {
		return r.stopUpgrade(ctx, x, err.Error(), false)
	}
	if done, next, change, err := r.upRejoinRestarted(ctx, x, ""); done {
		return next, change, err
	}
	if why, err := r.upHealthy(ctx, x); err != nil || why != "" {
		return "", nil, notYetOr(why, err)
	}
	versions, err := r.upVersions(x)
	if err != nil {
		return "", nil, err
	}
	if why := failover.CheckUpgradeAll(flavors(versions), promise); why != "" {
		return r.stopUpgrade(ctx, x, why, false)
	}
	hash, err := specs.TemplateHash(c)
	if err != nil {
		return "", nil, err
	}
	held, err := r.specHeld(ctx, c)
	if err != nil {
		return "", nil, err
	}
	adopt := func(s *v1.MysqlClusterStatus) {}
	// A template held behind an unfinished rollout is not adopted: the rollout goes on with the
	// live template (its partition is this upgrade's), and PrimaryReady comes back here for the
	// held one once every pod runs the live one.
	if up := c.Status.Upgrade; up.TemplateHash != hash && held == "" {
		// A template not rolled out before (the first Preparing, or the spec changed while the
		// upgrade was stopped): every pod is proven again, starting from partition = replicas.
		c.Status.Upgrade.TemplateHash, c.Status.Upgrade.Partition, c.Status.Upgrade.Done = hash, nil, nil
		adopt = func(s *v1.MysqlClusterStatus) {
			s.Upgrade.TemplateHash, s.Upgrade.Partition, s.Upgrade.Done = hash, nil, nil
		}
	}
	from := ""
	if p := x.byName[c.Status.CurrentPrimary].Pod; p != nil {
		from = containerImage(p)
	}
	next, change, err := r.upNext(ctx, x)
	msg := "versions: " + versionList(versions)
	return next, func(s *v1.MysqlClusterStatus) {
		adopt(s)
		if s.Upgrade.FromImage == "" && from != c.Spec.Image {
			s.Upgrade.FromImage = from
		}
		s.Upgrade.ToImage = c.Spec.Image
		if change != nil {
			change(s)
		}
		if s.Operation != nil && s.Operation.Message == "" {
			s.Operation.Message = msg
		}
	}, err
}

// upNext decides the step after a proven barrier (see failover.NextRollStep). A pod that runs
// the new template but has not passed its barrier (a rollout stopped there) is proven first.
func (r *Runner) upNext(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c := x.c
	up := c.Status.Upgrade
	if up.Stopping {
		return r.upAborted(ctx, x)
	}
	pods, err := r.Pods(ctx, c)
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
	name := func(ord int) string { return fmt.Sprintf("%s-%d", c.Name, ord) }
	for ord := len(updated) - 1; ord >= 0; ord-- {
		if updated[ord] && !slices.Contains(up.Done, name(ord)) && ord != primary {
			pod := name(ord)
			return StageTemplateReady, func(s *v1.MysqlClusterStatus) {
				s.Upgrade.Barrier, s.Upgrade.Pod = v1.UpgradeTemplateReady, pod
			}, nil
		}
	}
	step := failover.NextRollStep(updated, primary)
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
	if why, err := r.acksWithout(x, name(step.Ordinal)); err != nil || why != "" {
		if err != nil {
			return "", nil, err
		}
		return r.stopUpgrade(ctx, x, restartStallWay(why, c), false)
	}
	k := int32(step.Ordinal)
	r.Event(ctx, c, false, "UpgradeRestartingPod", fmt.Sprintf("upgrade %s: restarting %s on the new template", x.op.ID, name(step.Ordinal)))
	return StageTemplatePending, func(s *v1.MysqlClusterStatus) {
		s.Upgrade.Barrier, s.Upgrade.Pod, s.Upgrade.Partition = v1.UpgradeTemplatePending, name(step.Ordinal), &k
	}, nil
}

// upAborted ends an upgrade abort asked for, now that no pod is in flight. The partition stays
// where the rollout left it: a pod below it that is recreated (evicted, its node lost) comes back
// on the template it ran, never on an older one than its data was last opened with.
func (r *Runner) upAborted(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	up := x.c.Status.Upgrade
	msg := fmt.Sprintf("upgrade aborted before its next pod; pods on the new template: %s; the others keep the old one until the next 'upgrade %s'", orNone(withPod(up.Done, up.Pod)), x.c.Name)
	r.Event(ctx, x.c, true, "UpgradeAborted", msg)
	now := x.now
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Aborted", msg, 0)
		s.Upgrade.Done, s.Upgrade.Pod, s.Upgrade.Stopping, s.Upgrade.Held = withPod(s.Upgrade.Done, s.Upgrade.Pod), "", false, true
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
	case !ready || !podUpdated(m.Pod, sts):
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
	s, err := x.ss.Observe(name)
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
	if why := failover.CheckNotOlder(name, recordedFlavor(c, name), s.Flavor); why != "" {
		return r.stopUpgrade(ctx, x, why, false)
	}
	if done, next, change, err := r.upJoin(ctx, x, name, s); done {
		return next, change, err
	}
	if done, next, change, err := r.upRejoinRestarted(ctx, x, name); done {
		return next, change, err
	}
	if why, err := r.upHealthy(ctx, x); err != nil || why != "" {
		return r.upWait(ctx, x, why, err)
	}
	if err := r.labelRole(ctx, c, name, v1.RoleReplica); err != nil {
		return "", nil, err
	}
	r.Event(ctx, c, false, "UpgradePodReady", fmt.Sprintf("upgrade %s: %s runs %s, replicates from %s and is caught up", x.op.ID, name, s.Flavor, x.primaryName))
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
// skip_slave_start), once its history is proven an ancestor of the primary's. A replica whose
// receiver is connecting is left to it (its retry is a second); one replicating without the
// semi-sync replica side gets it. done reports that the stage's answer is decided here.
func (r *Runner) upJoin(ctx context.Context, x *stageEnv, name string, s topology.Snapshot) (done bool, next string, change func(*v1.MysqlClusterStatus), err error) {
	c, primary := x.c, x.primaryName
	ip := specs.PodHost(c, primary)
	wantSemi := c.Spec.SemiSync.SemiSyncEnabled() && !s.SemiSync.ReplicaEnabled
	configured := s.Replica != nil && s.Replica.SourceHost == ip && s.Replica.SQLRunning &&
		(s.Replica.IOThread == topology.ThreadRunning || s.Replica.IOThread == topology.ThreadConnecting)
	switch {
	case configured && !wantSemi && s.Replica.IOThread == topology.ThreadRunning:
		return false, "", nil, nil
	case configured && !wantSemi:
		return true, "", nil, notYet("%s connects to the primary %s: %s", name, primary, strings.TrimSpace(s.Replica.LastIOError))
	case configured:
		in, err := x.ss.Connect(name)
		if err == nil {
			err = in.EnableSemiSyncReplica(ctx)
		}
		return true, "", nil, notYetOr(name+" acknowledges semi-sync from now on", err)
	}
	ps, err := x.ss.Observe(primary)
	if err != nil {
		return true, "", nil, notYet("the primary %s: %v", primary, err)
	}
	if e, ok, err := x.ss.ancestor(primary, ps, s); err != nil || !ok {
		if err != nil {
			return true, "", nil, err
		}
		next, change, err = r.stopUpgrade(ctx, x, fmt.Sprintf("%s restarted with transactions the primary does not have (%s %s): it is not joined", name, e.Reason, e.ErrantGTIDs), true)
		return true, next, change, err
	}
	in, err := x.ss.Connect(name)
	if err == nil {
		err = r.joinReplica(ctx, c, in, s, ip, x.ss.port(primary), x.creds)
	}
	if err != nil {
		return true, "", nil, err
	}
	return true, "", nil, notYet("%s joined the primary %s again; waiting for it to catch up", name, primary)
}

// upRejoinRestarted joins the replicas other than except that restarted during the rollout
// (recreated by a node loss or a 'kubectl delete pod'): they come back with replication stopped
// and no error (skip_slave_start), and the barrier would wait for them to its bound with no
// supervisor running. Each is joined as the barrier's pod is, once its history is proven an
// ancestor of the primary's. done reports that the stage's answer is decided here.
func (r *Runner) upRejoinRestarted(ctx context.Context, x *stageEnv, except string) (done bool, next string, change func(*v1.MysqlClusterStatus), err error) {
	for _, m := range x.members {
		name := m.Pod.Name
		if name == except || name == x.primaryName || quarantined(x.c, name) {
			continue
		}
		s, err := x.ss.Observe(name)
		if err != nil || s.Replica != nil && (s.Replica.IOThread != topology.ThreadStopped || s.Replica.SQLRunning || s.Replica.LastIOError != "" || s.Replica.LastSQLError != "") {
			continue
		}
		if done, next, change, err := r.upJoin(ctx, x, name, s); done {
			return true, next, change, err
		}
	}
	return false, "", nil, nil
}

// upHealthy says why the cluster is not healthy enough for the next step ("" when it is): the
// primary writable, every replica replicating from it and caught up, and as many semi-sync
// acknowledgers connected as the spec asks.
func (r *Runner) upHealthy(ctx context.Context, x *stageEnv) (string, error) {
	c, primary := x.c, x.primaryName
	if len(x.members) < int(c.Spec.Replicas) {
		return fmt.Sprintf("%d of %d pods ready", len(x.members), c.Spec.Replicas), nil
	}
	ps, err := x.ss.Observe(primary)
	if ce := topology.AsConfigError(err); ce != nil {
		return "", ce // not a wait: see stopForConfig
	}
	if err != nil {
		return "the primary: " + err.Error(), nil
	}
	if ps.ReadOnly {
		return "the primary " + primary + " is read-only", nil
	}
	pending, refused, err := x.ss.pendingReplicas(c, x.members, primary, specs.PodHost(c, primary), ps)
	if err == nil && refused != nil {
		return "", refused // a replica no wait will reach: see stopForConfig
	}
	if err != nil || len(pending) > 0 {
		return strings.Join(pending, "; "), err
	}
	if want := semiSyncWanted(c); want > 0 {
		ps, err = x.ss.Observe(primary)
		if err != nil {
			return "the primary: " + err.Error(), nil
		}
		if ps.SemiSync.SourceClients < want {
			return fmt.Sprintf("the primary %s has %d semi-sync replica(s) connected, the spec asks for %d", primary, ps.SemiSync.SourceClients, want), nil
		}
	}
	return "", nil
}

// podVersion is what one instance reports (or last reported, when it does not answer now).
type podVersion struct {
	name   string
	flavor topology.Flavor
}

// upVersions returns every instance's version: observed from the ready members, and for the
// others the version status last recorded, so that an instance that is down still counts.
func (r *Runner) upVersions(x *stageEnv) ([]podVersion, error) {
	var out []podVersion
	for ord := range x.c.Spec.Replicas {
		name := fmt.Sprintf("%s-%d", x.c.Name, ord)
		if _, ok := x.byName[name]; ok {
			s, err := x.ss.Observe(name)
			if err != nil {
				return nil, err
			}
			out = append(out, podVersion{name, s.Flavor})
			continue
		}
		if f := recordedFlavor(x.c, name); f.Line != "" {
			out = append(out, podVersion{name, f})
		}
	}
	for _, v := range out[min(1, len(out)):] {
		if v.flavor.IsMariaDB() != out[0].flavor.IsMariaDB() {
			return nil, fmt.Errorf("the instances run different products: %s", versionList(out))
		}
	}
	return out, nil
}

func flavors(vs []podVersion) []topology.Flavor {
	out := make([]topology.Flavor, len(vs))
	for i, v := range vs {
		out[i] = v.flavor
	}
	return out
}

func versionList(vs []podVersion) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.name + " " + v.flavor.String()
	}
	return strings.Join(parts, ", ")
}

// notYetOr is err, or a wait for why.
func notYetOr(why string, err error) error {
	if err != nil {
		return err
	}
	return notYet("%s", why)
}

// bounded makes every wait of an upgrade stage end at the stage's bound: a stage that still
// waits then stops the rollout with what it waited for, the cluster marked Degraded. No
// upgrade waits forever (a supervisor resuming it would be stuck with it).
func bounded(run stageFunc) stageFunc {
	return func(r *Runner, ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
		next, change, err := run(r, ctx, x)
		var ny errNotYet
		if errors.As(err, &ny) && x.overdue {
			return r.stopUpgrade(ctx, x, fmt.Sprintf("stage %s did not hold within %s: %s", x.op.Stage, x.bound, ny.msg), true)
		}
		return next, change, err
	}
}

// upWait waits for a barrier (bounded stops it at the stage's bound).
func (r *Runner) upWait(_ context.Context, _ *stageEnv, why string, err error) (string, func(*v1.MysqlClusterStatus), error) {
	return "", nil, notYetOr(why, err)
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
	if done, next, change, err := r.upRejoinRestarted(ctx, x, ""); done {
		return next, change, err
	}
	if why, err := r.upHealthy(ctx, x); err != nil || why != "" {
		return "", nil, notYetOr(why, err)
	}
	versions, err := r.upVersions(x)
	if err != nil {
		return "", nil, err
	}
	promise, err := failover.ParseImage(c.Spec.Image)
	if err != nil {
		return r.stopUpgrade(ctx, x, err.Error(), false)
	}
	for _, v := range versions {
		if why := failover.CheckRunning(v.name, v.flavor, promise); why != "" {
			return r.stopUpgrade(ctx, x, why, false)
		}
	}
	up := c.Status.Upgrade
	if hash, err := specs.TemplateHash(c); err != nil || hash != up.TemplateHash {
		// The spec's template changed during the rollout, and was held until every pod ran the
		// one this upgrade rolled out: it is rolled out by the same upgrade, from Preparing.
		return r.upAdoptHeld(ctx, x, err)
	}
	done := c.DeepCopy()
	done.Status.Upgrade = nil
	if _, err := r.applyTemplate(ctx, done); err != nil {
		return "", nil, err
	}
	now := x.now
	msg := fmt.Sprintf("every pod restarted on %s in %s, replicas first, the primary's role handed over by switchover; %s", c.Spec.Image, now.Sub(opStart(x.op)).Round(time.Millisecond), versionList(versions))
	if up.FromImage != "" && up.FromImage != c.Spec.Image {
		msg = "from " + up.FromImage + ": " + msg
	}
	r.Event(ctx, c, false, "UpgradeSucceeded", msg)
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Succeeded", msg, 0)
		s.Upgrade = nil
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: msg})
	}, nil
}

// upAdoptHeld goes back to Preparing once the template held during the rollout can be written
// (the StatefulSet records the rolled-out revision as current), so that the same upgrade rolls
// it out; until then it waits.
func (r *Runner) upAdoptHeld(ctx context.Context, x *stageEnv, err error) (string, func(*v1.MysqlClusterStatus), error) {
	if err != nil {
		return "", nil, err
	}
	held, err := r.specHeld(ctx, x.c)
	if err != nil || held != "" {
		return "", nil, notYetOr("the template changed during the rollout waits for the StatefulSet to record the rolled-out revision as current: "+held, err)
	}
	r.Event(ctx, x.c, false, "UpgradeTemplateChanged", fmt.Sprintf("upgrade %s: every pod runs the template it started; the template changed meanwhile is rolled out next", x.op.ID))
	return StageUpgradePreparing, func(s *v1.MysqlClusterStatus) {
		s.Upgrade.Barrier, s.Upgrade.Pod = v1.UpgradePreparing, ""
	}, nil
}

// specHeld says why the pod template the spec makes would be held now ("" when it would be
// written; nothing is written here).
func (r *Runner) specHeld(ctx context.Context, c *v1.MysqlCluster) (string, error) {
	sts, err := specs.BuildStatefulSet(c)
	if err != nil {
		return "", err
	}
	return holdTemplate(ctx, r.Kube, sts, nil)
}

// containerImage is the image of the pod's MySQL container.
func containerImage(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == specs.ContainerName {
			return c.Image
		}
	}
	return ""
}

// withPod is names with pod added when it is not there yet.
func withPod(names []string, pod string) []string {
	if pod == "" || slices.Contains(names, pod) {
		return names
	}
	return append(slices.Clone(names), pod)
}

// upGuard runs before every upgrade stage: a primary that stops answering ends the rollout
// (recorded Failed, status.upgrade kept for resume) once it has failed for as long as the
// supervisor's detection takes, so that the Lease is released and a failover can run instead
// of waiting behind a barrier that cannot hold.
func (r *Runner) upGuard(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	if why, err := r.primaryGone(x); err != nil || why != "" {
		if err != nil {
			return "", nil, err
		}
		return r.stopUpgrade(ctx, x, why+": the upgrade stops so that a failover can run", false)
	}
	return "", nil, nil
}

// primaryGone says why, once the primary has not answered for the supervisor's detection time
// (failureThreshold × detectionInterval, counted across the operation's stages and runs of this
// actor): a long operation (upgrade, scale) stops then, releasing the cluster so that a failover
// can run. "" while it answers, or has not been silent that long. A path to the primary refused
// by configuration is no silence of the primary: it is returned as the error, and the stage
// engine stops the operation with it.
func (r *Runner) primaryGone(x *stageEnv) (string, error) {
	key := "primary-down/" + x.op.ID
	if r.attempts == nil {
		r.attempts = map[string]time.Time{}
	}
	_, err := x.ss.Observe(x.primaryName)
	if err == nil {
		delete(r.attempts, key)
		return "", nil
	}
	if ce := topology.AsConfigError(err); ce != nil {
		return "", ce
	}
	since, ok := r.attempts[key]
	if !ok {
		r.attempts[key] = x.now
		return "", nil
	}
	bound := time.Duration(max(x.c.Spec.Failover.FailureThreshold, 1)) * DetectionInterval(x.c)
	if x.now.Sub(since) < bound {
		return "", nil
	}
	delete(r.attempts, key)
	return fmt.Sprintf("the primary %s has not answered for %s (%v)", x.primaryName, x.now.Sub(since).Round(time.Second), err), nil
}

// upRestartStalls says why restarting a replica, as every rollout does one at a time, would
// stall the primary's commits ("" when it would not): the primary would have fewer semi-sync
// replicas connected than it waits for until the replica is back (and for good if it never
// comes back), while the supervisor sees a healthy primary.
func (r *Runner) upRestartStalls(x *stageEnv) (string, error) {
	for _, m := range x.members {
		if m.Pod.Name == x.primaryName || quarantined(x.c, m.Pod.Name) {
			continue
		}
		if why, err := r.acksWithout(x, m.Pod.Name); err != nil || why != "" {
			return restartStallWay(why, x.c), err
		}
	}
	return "", nil
}

// restartStallWay is the refusal of a restart that would stall the primary, with the ways out.
func restartStallWay(why string, c *v1.MysqlCluster) string {
	n := max(int32(semiSyncAcks(c))+2, c.Spec.Replicas+1)
	return fmt.Sprintf("restarting a replica: %s; scale %s to %d instances first ('scale %s --replicas %d'), or lower spec.semiSync.waitForReplicas (or set spec.semiSync.enabled to false) for the upgrade",
		why, c.Name, n, c.Name, n)
}

// recordedFlavor is the version status last recorded for the instance (zero when none).
func recordedFlavor(c *v1.MysqlCluster, name string) topology.Flavor {
	for _, i := range c.Status.Instances {
		if i.Name == name && i.Version != "" {
			if f, err := topology.DetectFlavor(i.Version, ""); err == nil {
				return f
			}
		}
	}
	return topology.Flavor{}
}
