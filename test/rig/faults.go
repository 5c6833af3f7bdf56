package rig

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/test/rig/internal/agent"
)

// Fault is a failure the node agent injects into a pod (see the constants).
type Fault = agent.Fault

// The faults, as the node agent implements them.
const (
	// Kill sends SIGKILL to the pod's MariaDB container (a crash); it is restarted and its
	// restartCount grows.
	Kill = agent.Kill
	// Freeze stops the container with SIGSTOP: connections hang and probes time out.
	Freeze = agent.Freeze
	// Thaw resumes a frozen container.
	Thaw = agent.Thaw
	// Cut partitions the pod: packets to and from its address and from its processes are dropped
	// (iptables), except between the pod and its node; established connections hang.
	Cut = agent.Cut
	// Restore ends a Cut.
	Restore = agent.Restore
	// Lose makes the node forget the pod: its processes die, nothing restarts them, and the pod
	// object keeps its last status (a graceful delete then hangs, as with a dead node).
	Lose = agent.Lose
)

// Inject applies a fault to a pod's MariaDB container (or its first running one) or to the pod.
func (r *Rig) Inject(f Fault, namespace, pod string) error {
	return r.agent.Inject(f, namespace, pod, "")
}

// InjectContainer applies Kill, Freeze or Thaw to one named container of a pod.
func (r *Rig) InjectContainer(f Fault, namespace, pod, container string) error {
	return r.agent.Inject(f, namespace, pod, container)
}

// WipeClaim deletes the data of a PersistentVolumeClaim's volume, as a lost disk. A pod still
// running on it keeps its open files; its next start initialises an empty datadir.
func (r *Rig) WipeClaim(namespace, claim string) error {
	return r.agent.WipeClaim(namespace, claim)
}

// Kill sends SIGKILL to the pod's MariaDB server, failing the test if it cannot.
func (r *Rig) Kill(tb testing.TB, namespace, pod string) {
	tb.Helper()
	r.must(tb, Kill, namespace, pod)
}

// Freeze stops the pod's MariaDB server with SIGSTOP until Thaw (or the end of the test).
func (r *Rig) Freeze(tb testing.TB, namespace, pod string) {
	tb.Helper()
	r.must(tb, Freeze, namespace, pod)
	tb.Cleanup(func() { _ = r.Inject(Thaw, namespace, pod) })
}

// Thaw resumes a frozen server.
func (r *Rig) Thaw(tb testing.TB, namespace, pod string) {
	tb.Helper()
	r.must(tb, Thaw, namespace, pod)
}

// Cut partitions the pod until Restore (or the end of the test).
func (r *Rig) Cut(tb testing.TB, namespace, pod string) {
	tb.Helper()
	r.must(tb, Cut, namespace, pod)
	tb.Cleanup(func() { _ = r.Inject(Restore, namespace, pod) })
}

// Restore ends a Cut.
func (r *Rig) Restore(tb testing.TB, namespace, pod string) {
	tb.Helper()
	r.must(tb, Restore, namespace, pod)
}

// CutFrom partitions one process (a supervisor) from the pod, every other path intact: every
// packet the process sends to the pod's address is dropped, until the returned restore (or the
// end of the test).
func (r *Rig) CutFrom(tb testing.TB, pid int, namespace, pod string) (restore func()) {
	tb.Helper()
	undo, err := r.agent.CutProcess(pid, namespace, pod)
	if err != nil {
		tb.Fatalf("rig: cut process %d from %s/%s: %v", pid, namespace, pod, err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if err := undo(); err != nil {
				tb.Errorf("rig: restore the path from process %d to %s/%s: %v", pid, namespace, pod, err)
			}
		})
	}
	tb.Cleanup(restore)
	return restore
}

// Lose makes the node forget the pod.
func (r *Rig) Lose(tb testing.TB, namespace, pod string) {
	tb.Helper()
	r.must(tb, Lose, namespace, pod)
}

// WipePVC deletes a claim's data, failing the test if it cannot.
func (r *Rig) WipePVC(tb testing.TB, namespace, claim string) {
	tb.Helper()
	if err := r.WipeClaim(namespace, claim); err != nil {
		tb.Fatalf("rig: wipe claim %s/%s: %v", namespace, claim, err)
	}
}

func (r *Rig) must(tb testing.TB, f Fault, namespace, pod string) {
	tb.Helper()
	if err := r.Inject(f, namespace, pod); err != nil {
		tb.Fatalf("rig: %s %s/%s: %v", f, namespace, pod, err)
	}
}

// ExecResult is the exit code and output of Exec.
type ExecResult = agent.ExecResult

// Exec runs a command in a running container of a pod, as `kubectl exec` does (the rig has no
// kubelet API): inside the container's mount and UTS namespaces and its cgroup, with its
// environment. container may be empty (the pod's MariaDB container). A non-zero exit code is not
// an error; a command that cannot run or exceeds timeout is.
func (r *Rig) Exec(ctx context.Context, namespace, pod, container string, timeout time.Duration, command ...string) (ExecResult, error) {
	return r.agent.Exec(ctx, namespace, pod, container, command, timeout)
}

// Pods describes the pods the node agent runs: address, container PIDs, frozen, cut or lost.
func (r *Rig) Pods() []agent.PodInfo { return r.agent.Pods() }

// RestartAPIServer kills kube-apiserver with SIGKILL and starts it again after down, with the
// same arguments, certificates and port; it returns once the server is ready. Every client,
// the node agent and the controllers reconnect by themselves.
func (r *Rig) RestartAPIServer(ctx context.Context, down time.Duration) error {
	if err := r.env.RestartAPIServer(ctx, down); err != nil {
		return err
	}
	// The state file names the control plane's processes (for `rig down` from elsewhere).
	r.state.ControlPlane = nil
	for _, pid := range r.controlPlanePIDs() {
		if p, ok := procOf(pid); ok {
			r.state.ControlPlane = append(r.state.ControlPlane, p)
		}
	}
	return writeState(r.Dir, r.state)
}
