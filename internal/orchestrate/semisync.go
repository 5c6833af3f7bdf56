package orchestrate

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// semiSyncWanted returns how many acknowledgements the spec asks the primary to wait for, or 0
// when it does not ask for semi-sync.
// semiSyncAcks is how many acknowledgements the spec asks the primary to wait for, whatever the
// instance count (0: semi-sync off): a scale must never leave fewer replicas than that.
func semiSyncAcks(c *v1.MysqlCluster) int64 {
	if !c.Spec.SemiSync.SemiSyncEnabled() {
		return 0
	}
	return max(int64(c.Spec.SemiSync.WaitForReplicas), 1)
}

func semiSyncWanted(c *v1.MysqlCluster) int64 {
	if !c.Spec.SemiSync.SemiSyncEnabled() || MemberCount(c) < 2 {
		return 0
	}
	return max(int64(c.Spec.SemiSync.WaitForReplicas), 1)
}

// settleSemiSync decides, from what the new primary reports, whether it waits for enough
// acknowledgements, before an operation that promoted it is called done. A source waiting for
// more semi-sync replicas than are connected blocks every commit: it is given until the stage
// is overdue for them to connect (not at all when fewer replicas than that replicate from it),
// then switched to asynchronous. The returned change records
// the SemiSynchronous condition; a primary running asynchronously while the spec asks for
// semi-sync leaves the cluster Degraded with the reason.
func (r *Runner) settleSemiSync(ctx context.Context, x *stageEnv, name string, s topology.Snapshot, replicating int) (func(*v1.MysqlClusterStatus), error) {
	want := semiSyncWanted(x.c)
	ss := s.SemiSync
	cond := metav1.Condition{Type: v1.ConditionSemiSynchronous, Status: metav1.ConditionTrue, Reason: "Acknowledged"}
	switch {
	case want == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "NotRequested", "spec.semiSync is off, or there is no replica: commits are acknowledged before any replica has them"
		return func(st *v1.MysqlClusterStatus) { meta.SetStatusCondition(&st.Conditions, cond) }, nil
	case ss.SourceEnabled && ss.SourceActive && ss.SourceClients >= want:
		cond.Message = fmt.Sprintf("%s waits for %d acknowledgement(s); %d semi-sync replica(s) connected", name, want, ss.SourceClients)
		return func(st *v1.MysqlClusterStatus) { meta.SetStatusCondition(&st.Conditions, cond) }, nil
	case ss.SourceEnabled && !x.overdue && int64(replicating) >= want:
		return nil, notYet("%s waits for %d semi-sync acknowledgement(s) but %d semi-sync replica(s) are connected", name, want, ss.SourceClients)
	case ss.SourceEnabled:
		// Too few replicas acknowledge: every commit would wait for the full timeout.
		in, err := x.ss.Connect(name)
		if err != nil {
			return nil, err
		}
		if err := in.DisableSemiSyncSource(ctx); err != nil {
			return nil, err
		}
	}
	cond.Status, cond.Reason = metav1.ConditionFalse, "TooFewAcknowledgers"
	cond.Message = fmt.Sprintf("%s runs asynchronously: spec.semiSync asks for %d acknowledgement(s) and %d semi-sync replica(s) are connected; commits acknowledged now can be lost if it fails (reconcile turns semi-sync on once enough replicas replicate)", name, want, ss.SourceClients)
	r.Event(ctx, x.c, true, "SemiSyncInactive", cond.Message)
	return func(st *v1.MysqlClusterStatus) {
		meta.SetStatusCondition(&st.Conditions, cond)
		for i := range st.Instances {
			if st.Instances[i].Name == name {
				st.Instances[i].SemiSyncSource = false // whatever was observed before this change
			}
		}
		st.Phase = v1.PhaseDegraded
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "SemiSyncInactive", Message: cond.Message})
	}, nil
}

// quarantinedCount is the number of quarantined instances.
func quarantinedCount(c *v1.MysqlCluster) int { return len(c.Status.ErrantInstances) }
