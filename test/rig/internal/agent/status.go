package agent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podReadyToStartContainers is the condition the kubelet sets once the sandbox (network) exists.
const podReadyToStartContainers corev1.PodConditionType = "PodReadyToStartContainers"

// buildStatus computes the pod status the kubelet would report for the worker's state, starting
// from the current status so that conditions owned by others (PodScheduled, DisruptionTarget, …)
// are kept.
func (w *podWorker) buildStatus(cur *corev1.PodStatus) *corev1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := cur.DeepCopy()
	pod := w.pod
	if w.ip != "" {
		st.PodIP = w.ip
		st.PodIPs = []corev1.PodIP{{IP: w.ip}}
	}
	st.HostIP = w.a.nodeIP
	st.HostIPs = []corev1.HostIP{{IP: w.a.nodeIP}}
	if w.startTime != nil && st.StartTime == nil {
		st.StartTime = w.startTime
	}

	initDone := true
	var initStatuses, statuses []corev1.ContainerStatus
	running, waiting, stopped, succeeded, failedCount := 0, 0, 0, 0, 0
	allReady := true
	for _, c := range w.containers {
		cs := corev1.ContainerStatus{
			Name:         c.spec.Name,
			Image:        c.spec.Image,
			ImageID:      "rig://" + c.spec.Image,
			RestartCount: c.restartCount,
		}
		if c.server {
			cs.ImageID = "rig://mariadbd@" + w.a.img.version
		}
		if c.instance > 0 {
			cs.ContainerID = w.containerID(c)
		}
		switch {
		case c.running:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: secs(c.startedAt)}
			cs.Started = ptr.To(c.started)
			cs.Ready = c.ready && c.started && !c.init
			if !c.init && c.spec.ReadinessProbe == nil {
				cs.Ready = c.started
			}
		case c.terminated != nil:
			cs.State.Terminated = c.terminated
			cs.Started = ptr.To(false)
		default:
			reason, msg := c.waitingReason, c.waitingMessage
			if reason == "" {
				reason = "ContainerCreating"
				if !c.init && !initDoneFor(w.containers) {
					reason = "PodInitializing"
				}
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
			cs.Started = ptr.To(false)
		}
		if c.lastTerminated != nil {
			cs.LastTerminationState.Terminated = c.lastTerminated
		}
		if c.init {
			if c.terminated == nil || c.terminated.ExitCode != 0 {
				initDone = false
			}
			initStatuses = append(initStatuses, cs)
			continue
		}
		if !cs.Ready {
			allReady = false
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failedCount++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
		statuses = append(statuses, cs)
	}
	st.InitContainerStatuses = initStatuses
	st.ContainerStatuses = statuses

	// The phase, as the kubelet's getPhase computes it.
	policy := pod.Spec.RestartPolicy
	switch {
	case w.failed:
		st.Phase = corev1.PodFailed
	case !initDone:
		st.Phase = corev1.PodPending
	case waiting > 0:
		st.Phase = corev1.PodPending
	case running > 0:
		st.Phase = corev1.PodRunning
	case stopped > 0:
		switch {
		case policy == corev1.RestartPolicyAlways || policy == "":
			st.Phase = corev1.PodRunning
		case stopped == succeeded:
			st.Phase = corev1.PodSucceeded
		case policy == corev1.RestartPolicyOnFailure:
			st.Phase = corev1.PodRunning
		default:
			st.Phase = corev1.PodFailed
		}
	default:
		st.Phase = corev1.PodPending
	}
	if w.terminating && running == 0 && stopped > 0 {
		// A deleted pod whose containers are all gone ends in a terminal phase before the kubelet
		// removes it: Succeeded when every container exited 0 (a clean SIGTERM shutdown), else
		// Failed (kubelet getPhase with podIsTerminal).
		if failedCount > 0 || stopped != succeeded {
			st.Phase = corev1.PodFailed
		} else {
			st.Phase = corev1.PodSucceeded
		}
	}

	ready := allReady && st.Phase == corev1.PodRunning
	podReady := ready
	for _, g := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range cur.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		podReady = podReady && ok
	}
	boolStatus := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	notReadyReason := "ContainersNotReady"
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		notReadyReason = "PodCompleted"
	}
	setCondition(st, podReadyToStartContainers, boolStatus(w.sandbox && !w.terminating || running > 0), "")
	initReason := ""
	if !initDone {
		initReason = "ContainersNotInitialized"
	}
	setCondition(st, corev1.PodInitialized, boolStatus(initDone), initReason)
	readyReason := ""
	if !ready {
		readyReason = notReadyReason
	}
	setCondition(st, corev1.ContainersReady, boolStatus(ready), readyReason)
	if !podReady && ready {
		readyReason = "ReadinessGatesNotReady"
	}
	setCondition(st, corev1.PodReady, boolStatus(podReady), readyReason)
	return st
}

// secs drops what the API cannot store (sub-second precision, the monotonic clock), so that a
// status built here compares equal to the same status read back.
func secs(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

func initDoneFor(cs []*ctr) bool {
	for _, c := range cs {
		if c.init && (c.terminated == nil || c.terminated.ExitCode != 0) {
			return false
		}
	}
	return true
}

// setCondition sets a condition, keeping its transition time when the status is unchanged.
func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, reason string) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != s {
			c.LastTransitionTime = secs(time.Now())
		}
		c.Status, c.Reason = s, reason
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: secs(time.Now())})
}

// writeStatus writes the pod's status through the status subresource when it changed.
func (w *podWorker) writeStatus(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	pod := w.currentPod()
	st := w.buildStatus(&pod.Status)
	if equality.Semantic.DeepEqual(st, &pod.Status) {
		return
	}
	for attempt := 0; attempt < 5; attempt++ {
		p := pod.DeepCopy()
		p.Status = *st
		ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
		updated, err := w.a.cs.CoreV1().Pods(w.namespace).UpdateStatus(ctx2, p, metav1.UpdateOptions{})
		cancel()
		if err == nil {
			w.update(updated)
			return
		}
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		if !apierrors.IsConflict(err) {
			w.a.logf("pod %s: update status: %v", w.key, err)
			return
		}
		ctx2, cancel = context.WithTimeout(ctx, 10*time.Second)
		fresh, err := w.a.cs.CoreV1().Pods(w.namespace).Get(ctx2, w.name, metav1.GetOptions{})
		cancel()
		if err != nil || fresh.UID != w.uid {
			return
		}
		pod = fresh
		w.update(fresh)
		st = w.buildStatus(&fresh.Status)
	}
}
