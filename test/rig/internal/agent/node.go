package agent

import (
	"context"
	"fmt"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Heartbeat periods: the kubelet's defaults (lease renewed every 10 s of a 40 s lease; the
// node-lifecycle controller's grace period is 50 s).
const (
	leaseDuration       = 40 * time.Second
	leaseRenewInterval  = 10 * time.Second
	nodeStatusInterval  = time.Minute
	kubeNodeLeaseNS     = "kube-node-lease"
	rigKubeletVersion   = "v1.37.2-rig"
	rigRuntimeVersion   = "rig://0.1"
	labelHostname       = "kubernetes.io/hostname"
	labelOS             = "kubernetes.io/os"
	labelArch           = "kubernetes.io/arch"
	nodeRoleLabelPrefix = "node-role.kubernetes.io/"
)

// registerNode creates (or takes over) the Node and reports it Ready.
func (a *Agent) registerNode(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: a.cfg.NodeName,
			Labels: map[string]string{
				labelHostname:                 a.cfg.NodeName,
				labelOS:                       "linux",
				labelArch:                     runtime.GOARCH,
				nodeRoleLabelPrefix + "rig":   "",
				"mysqlctl.io/rig-node-subnet": fmt.Sprintf("127.0.%d.0-24", a.sub.x),
			},
		},
	}
	if _, err := a.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node: %w", err)
	}
	if err := a.updateNodeStatus(ctx); err != nil {
		return err
	}
	return a.renewLease(ctx)
}

func (a *Agent) nodeStatus(now metav1.Time) corev1.NodeStatus {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Capacity:    a.cfg.Capacity.DeepCopy(),
		Allocatable: a.cfg.Capacity.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "mysqlctl rig node agent is posting ready status"),
		},
		// The API server reaches the node at its InternalIP (the control plane runs with
		// --kubelet-preferred-address-types=InternalIP): the node's name resolves nowhere.
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: a.nodeIP},
			{Type: corev1.NodeHostName, Address: a.cfg.NodeName},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: a.kubeletPort}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               a.cfg.RigID,
			SystemUUID:              a.cfg.RigID,
			BootID:                  a.cfg.RigID,
			KernelVersion:           kernelVersion(),
			OSImage:                 "mysqlctl rig (MariaDB " + a.img.version + ")",
			ContainerRuntimeVersion: rigRuntimeVersion,
			KubeletVersion:          rigKubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            runtime.GOARCH,
		},
	}
}

// updateNodeStatus writes the Node's status, keeping the transition times of unchanged conditions.
func (a *Agent) updateNodeStatus(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		node, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		st := a.nodeStatus(metav1.Now())
		for i, c := range st.Conditions {
			for _, old := range node.Status.Conditions {
				if old.Type == c.Type && old.Status == c.Status {
					st.Conditions[i].LastTransitionTime = old.LastTransitionTime
				}
			}
		}
		node.Status = st
		_, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) || attempt > 5 {
			if err != nil {
				return fmt.Errorf("update node status: %w", err)
			}
			return nil
		}
	}
}

// renewLease creates or renews the node's Lease in kube-node-lease.
func (a *Agent) renewLease(ctx context.Context) error {
	leases := a.cs.CoordinationV1().Leases(kubeNodeLeaseNS)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Namespace: kubeNodeLeaseNS},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(a.cfg.NodeName),
				LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}
		if node, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{}); err == nil {
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(a.cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDuration / time.Second))
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the Lease and re-posts the node status until the agent stops.
func (a *Agent) heartbeat() {
	lease := time.NewTicker(leaseRenewInterval)
	defer lease.Stop()
	status := time.NewTicker(nodeStatusInterval)
	defer status.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-lease.C:
			ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
			if err := a.renewLease(ctx); err != nil && a.ctx.Err() == nil {
				a.logf("renew lease: %v", err)
			}
			cancel()
		case <-status.C:
			ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
			if err := a.updateNodeStatus(ctx); err != nil && a.ctx.Err() == nil {
				a.logf("node status: %v", err)
			}
			cancel()
		}
	}
}
