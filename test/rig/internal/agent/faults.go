package agent

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Fault is a failure the agent can inject into a pod it runs.
type Fault string

// The faults. Kill, Freeze and Thaw act on one container (the pod's MariaDB server by default);
// Cut, Restore and Lose on the whole pod.
const (
	// Kill ends the container with SIGKILL, as a crash or the OOM killer would; the agent restarts
	// it according to the restart policy and counts the restart.
	Kill Fault = "kill"
	// Freeze stops the container's processes with SIGSTOP: connections are accepted by the kernel
	// but nothing answers, and the probes time out.
	Freeze Fault = "freeze"
	// Thaw resumes a frozen container with SIGCONT.
	Thaw Fault = "thaw"
	// Cut drops every packet to and from the pod's address and every packet its processes send,
	// except to and from the node (whose probes keep working, as a kubelet's do in a partition).
	// Established connections hang, as across a real partition.
	Cut Fault = "cut"
	// Restore undoes Cut.
	Restore Fault = "restore"
	// Lose makes the node forget the pod: its processes are killed, nothing restarts them and its
	// status is never written again; the pod object keeps its last status. Deleting it then hangs
	// in Terminating, as with a dead node, until it is deleted with grace period 0.
	Lose Fault = "lose"
)

// Faults lists every pod fault, for usage messages.
var Faults = []Fault{Kill, Freeze, Thaw, Cut, Restore, Lose}

// Inject applies a fault to a pod. container may be empty: the pod's MariaDB container, else its
// first running container.
func (a *Agent) Inject(f Fault, namespace, name, container string) error {
	w, err := a.worker(namespace, name)
	if err != nil {
		return err
	}
	switch f {
	case Cut:
		w.mu.Lock()
		ip, cg := w.ip, w.cgroup
		w.mu.Unlock()
		if ip == "" {
			return fmt.Errorf("pod %s has no address yet", w.key)
		}
		if err := a.net.cutPod(w.key, ip, cg); err != nil {
			return err
		}
		a.logf("pod %s: network cut", w.key)
		return nil
	case Restore:
		if err := a.net.restorePod(w.key); err != nil {
			return err
		}
		a.logf("pod %s: network restored", w.key)
		return nil
	case Lose:
		w.lose()
		select {
		case <-w.lostDone:
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("pod %s: its worker did not stop within a minute", w.key)
		}
	}
	var sig syscall.Signal
	switch f {
	case Kill:
		sig = syscall.SIGKILL
	case Freeze:
		sig = syscall.SIGSTOP
	case Thaw:
		sig = syscall.SIGCONT
	default:
		return fmt.Errorf("unknown fault %q (one of %v)", f, Faults)
	}
	w.mu.Lock()
	target := pickContainer(w, container)
	var p *process
	if target != nil {
		p = target.proc
	}
	w.mu.Unlock()
	if p == nil {
		if container != "" {
			return fmt.Errorf("pod %s: container %q is not running", w.key, container)
		}
		return fmt.Errorf("pod %s: no container is running", w.key)
	}
	if err := p.signalGroup(sig); err != nil {
		return fmt.Errorf("pod %s: %s: %w", w.key, f, err)
	}
	a.logf("pod %s: %s container %s (pid %d)", w.key, f, target.spec.Name, p.pid)
	return nil
}

// ExecResult is the outcome of Exec.
type ExecResult struct {
	ExitCode int    `json:"exitCode"`
	Output   string `json:"output"` // stdout and stderr, the first 4 KiB
}

// Exec runs a command in a running container, as `kubectl exec` would: in its mount and UTS
// namespaces and its cgroup, with its environment and working directory. container may be empty
// (the pod's MariaDB container, else its first running one).
func (a *Agent) Exec(ctx context.Context, namespace, name, container string, argv []string, timeout time.Duration) (ExecResult, error) {
	w, err := a.worker(namespace, name)
	if err != nil {
		return ExecResult{}, err
	}
	w.mu.Lock()
	c := pickContainer(w, container)
	var pid int
	var env []string
	var wd string
	if c != nil {
		pid, env, wd = c.proc.pid, c.env, c.workDir
	}
	cg := w.cgroup
	w.mu.Unlock()
	if c == nil {
		return ExecResult{}, fmt.Errorf("pod %s: container %q is not running", w.key, container)
	}
	res := execIn(ctx, pid, cg, argv, env, wd, timeout)
	if res.err != nil {
		return ExecResult{ExitCode: res.exitCode, Output: res.output}, res.err
	}
	return ExecResult{ExitCode: res.exitCode, Output: res.output}, nil
}

// pickContainer finds a running container by name, or the server (else the first running one)
// when name is empty. w.mu is held.
func pickContainer(w *podWorker, name string) *ctr {
	var target *ctr
	for _, c := range w.containers {
		if !c.running || c.proc == nil {
			continue
		}
		switch {
		case name != "" && c.spec.Name == name:
			target = c
		case name == "" && c.server && (target == nil || !target.server):
			target = c
		case name == "" && target == nil:
			target = c
		}
	}
	return target
}
