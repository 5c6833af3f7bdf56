package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// CutProcess drops every packet that the process pid (every thread of it) sends to the pod's
// address, and nothing else: a partition between one client (a supervisor) and one pod while
// every other path works, replication included. The process is moved into a cgroup of its own
// under the rig's. The returned function restores the path.
func (a *Agent) CutProcess(pid int, namespace, name string) (func() error, error) {
	w, err := a.worker(namespace, name)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	if ip == "" {
		return nil, fmt.Errorf("pod %s has no address yet", w.key)
	}
	restore, err := a.net.cutProcess(pid, ip)
	if err == nil {
		a.logf("process %d: path to pod %s (%s) cut", pid, w.key, ip)
	}
	return restore, err
}

func (n *network) cutProcess(pid int, ip string) (func() error, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cgRig == "" {
		return nil, errors.New("cgroup v2 is unavailable: a cut of one process's path needs it")
	}
	if err := n.hook(); err != nil {
		return nil, err
	}
	dir := filepath.Join(n.cgRig, "proc-"+strconv.Itoa(pid))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return nil, fmt.Errorf("move process %d into its cgroup: %w", pid, err)
	}
	p := n.cgroupPath(dir)
	if p == "" {
		return nil, errors.New("the process's cgroup has no path iptables can match")
	}
	tag := RuleTag + " " + n.rigID + " path " + strconv.Itoa(pid) + " " + ip
	spec := []string{"-m", "cgroup", "--path", p, "-d", ip, "-m", "comment", "--comment", tag, "-j", "DROP"}
	// First in the chain: ahead of the rules that let the node's own traffic through.
	if err := iptables(append([]string{"-I", n.chain, "1"}, spec...)...); err != nil {
		return nil, err
	}
	return func() error {
		n.mu.Lock()
		defer n.mu.Unlock()
		return iptables(append([]string{"-D", n.chain}, spec...)...)
	}, nil
}
