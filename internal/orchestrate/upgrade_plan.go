package orchestrate

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// UpgradePlan is what an upgrade would do, worked out from the pods and the servers without
// changing anything.
type UpgradePlan struct {
	Cluster string `json:"cluster"`
	Primary string `json:"primary"`
	// Image is the image the pods would run.
	Image string `json:"image"`
	// Versions is what each instance reports now.
	Versions []string `json:"versions"`
	// VersionCheck is the verdict of the version rules.
	VersionCheck string `json:"versionCheck"`
	// Steps are the restarts and handoff switchovers, in order.
	Steps []string `json:"steps"`
	// Refusal is set when the upgrade would be refused, with the reason; nothing would change.
	Refusal string `json:"refusal,omitempty"`
}

// PlanUpgrade works out the upgrade of the cluster to image ("": the spec's image): the version
// rules against what the servers report, and the order of restarts and handoffs.
func (r *Runner) PlanUpgrade(ctx context.Context, key client.ObjectKey, image string) (UpgradePlan, error) {
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return UpgradePlan{}, err
	}
	if image != "" {
		c.Spec.Image = image
	}
	p := UpgradePlan{Cluster: c.Name, Primary: c.Status.CurrentPrimary, Image: c.Spec.Image}
	promise, err := failover.ParseImage(c.Spec.Image)
	if err != nil {
		p.Refusal = err.Error()
		return p, nil
	}
	members, err := r.readyMembers(ctx, c)
	if err != nil {
		return p, err
	}
	creds, err := r.Credentials(ctx, c)
	if err != nil {
		return p, err
	}
	x := &stageEnv{c: c, members: members, byName: map[string]Instance{}, ss: r.OpenSessions(ctx, members, creds)}
	defer x.ss.Close()
	for _, m := range members {
		x.byName[m.Pod.Name] = m
	}
	versions, err := r.upVersions(x)
	if err != nil {
		p.Refusal = err.Error()
		return p, nil
	}
	for _, v := range versions {
		p.Versions = append(p.Versions, v.name+" "+v.flavor.String())
	}
	if c.Spec.Replicas < 2 {
		p.Refusal = "a single instance cannot restart without stopping writes, and upgrade never restarts a primary in place: scale to 2 or more instances first"
		return p, nil
	}
	if why := failover.CheckUpgradeAll(flavors(versions), promise); why != "" {
		p.Refusal, p.VersionCheck = why, "refused"
		return p, nil
	}
	p.VersionCheck = fmt.Sprintf("%s to %s: allowed", versionList(versions), promise)
	x.primaryName = c.Status.CurrentPrimary
	if why, err := r.upRestartStalls(x); err != nil || why != "" {
		p.Refusal = why
		return p, err
	}
	updated, primary, err := r.planRollState(ctx, c)
	if err != nil {
		return p, err
	}
	p.Steps = rollSteps(c, updated, primary)
	return p, nil
}

// planRollState is rollState for a template not applied yet: when the StatefulSet's template
// differs from the one the cluster's spec makes, every pod would restart.
func (r *Runner) planRollState(ctx context.Context, c *v1.MysqlCluster) ([]bool, int, error) {
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	want, err := specs.BuildStatefulSet(c)
	if err != nil {
		return nil, 0, err
	}
	live := &appsv1.StatefulSet{}
	if err := r.Kube.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
		return nil, 0, err
	}
	updated, primary := rollState(c, pods, live)
	if !equality.Semantic.DeepDerivative(want.Spec.Template, live.Spec.Template) {
		clear(updated)
	}
	return updated, primary, nil
}

// rollSteps describes the rollout NextRollStep walks from this state.
func rollSteps(c *v1.MysqlCluster, updated []bool, primary int) []string {
	name := func(ord int) string { return fmt.Sprintf("%s-%d", c.Name, ord) }
	var steps []string
	if primary < 0 {
		return []string{"no primary pod: the upgrade would wait for it"}
	}
	for range 2 * len(updated) {
		st := failover.NextRollStep(updated, primary)
		switch {
		case st.Done:
			if len(steps) == 0 {
				steps = append(steps, "nothing to restart: every pod runs the current template")
			}
			return steps
		case st.Handoff:
			steps = append(steps, fmt.Sprintf("switchover %s -> %s (the handoff: fence, catch up, promote)", name(primary), name(st.HandoffTo)))
			primary = st.HandoffTo
		default:
			role := "replica"
			if st.Ordinal == primary {
				role = "the only instance: writes stop while it restarts"
			}
			steps = append(steps, fmt.Sprintf("restart %s (%s) on the new template; barrier: version, replicating, caught up, semi-sync", name(st.Ordinal), role))
			updated[st.Ordinal] = true
		}
	}
	return steps
}

// RolloutPending reports whether a pod of the cluster does not run the StatefulSet's current
// pod template: what 'upgrade' would roll out. A template the StatefulSet controller has not
// observed yet does not count here (the caller that wrote it knows it changed).
func (r *Runner) RolloutPending(ctx context.Context, c *v1.MysqlCluster) (bool, error) {
	sts := &appsv1.StatefulSet{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: specs.StatefulSetName(c)}, sts); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "" {
		return false, nil
	}
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return false, err
	}
	updated, _ := rollState(c, pods, sts)
	return slices.Contains(updated, false), nil
}
