package specs

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// Convergence is what the PodDisruptionBudget is derived from. Every field must be proven
// true for a voluntary disruption to be allowed; unknown counts as false.
type Convergence struct {
	// ReplicasConverged: the StatefulSet runs spec.replicas pods, all proven in their role.
	ReplicasConverged bool
	// ImageConverged: every pod runs spec.image (no rollout pending).
	ImageConverged bool
	// RolesConverged: exactly one primary, every other instance a healthy replica of it.
	RolesConverged bool
	// HAHealthy: the supervisor's HA state is Healthy and no operation is in progress.
	HAHealthy bool
}

// Converged reports whether every condition holds.
func (cv Convergence) Converged() bool {
	return cv.ReplicasConverged && cv.ImageConverged && cv.RolesConverged && cv.HAHealthy
}

// ConvergenceFromStatus derives what it can from the recorded status; image convergence comes
// from the StatefulSet and is passed in.
func ConvergenceFromStatus(c *v1.MysqlCluster, imageConverged bool) Convergence {
	st := c.Status
	roles := st.CurrentPrimary != "" && len(st.ErrantInstances) == 0
	for _, in := range st.Instances {
		if in.Role != v1.RolePrimary && in.Role != v1.RoleReplica {
			roles = false
		}
	}
	return Convergence{
		ReplicasConverged: st.ObservedGeneration == c.Generation && st.ReadyInstances == c.Spec.Replicas && int32(len(st.Instances)) == c.Spec.Replicas,
		ImageConverged:    imageConverged,
		RolesConverged:    roles,
		HAHealthy:         st.Operation == nil && st.Upgrade == nil && st.Scale == nil && (st.HA == nil || st.HA.State == v1.HAHealthy) && st.Phase == v1.PhaseRunning,
	}
}

// ackersAfterDisruption reports whether, with any one instance gone (a replica, or the primary
// replaced by one of its replicas), the primary still has as many replicas as its commits wait
// for: an eviction that leaves fewer would stop every commit until the instance is back (a
// starved primary). Without semi-sync nothing waits.
func ackersAfterDisruption(c *v1.MysqlCluster) bool {
	if !c.Spec.SemiSync.SemiSyncEnabled() {
		return true
	}
	wait := max(c.Spec.SemiSync.WaitForReplicas, 1)
	// A member recorded absent acknowledges nothing, whatever its pod's readiness says.
	return c.Spec.Replicas-2-int32(len(c.Status.AbsentInstances)) >= wait
}

// BuildPDB returns the PodDisruptionBudget, derived fail-closed: maxUnavailable 1 only when the
// cluster is fully converged and the instances left after one disruption can still acknowledge
// every commit (ackersAfterDisruption), 0 otherwise. A single-instance cluster never allows a
// disruption, nor a 2-instance cluster with semi-sync (its one replica is the only acknowledger).
// Unhealthy pods may always be evicted (AlwaysAllow would let a drain take a healthy replica
// while another is broken; IfHealthyBudget keeps the budget honest).
func BuildPDB(c *v1.MysqlCluster, cv Convergence) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(0)
	if cv.Converged() && c.Spec.Replicas > 1 && ackersAfterDisruption(c) {
		maxUnavailable = intstr.FromInt32(1)
	}
	policy := policyv1.IfHealthyBudget
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   TypeMeta("policy/v1", "PodDisruptionBudget"),
		ObjectMeta: ObjectMeta(c, c.Name, "disruption-budget"),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &maxUnavailable,
			Selector:                   &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			UnhealthyPodEvictionPolicy: &policy,
		},
	}
}
