package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// A socket keeps the cgroup it was created in: the cgroup rule drops what new sockets send,
	// and the connections the process already holds to ip (a connection pool's) are dropped by
	// their ports, both ways, so that they fall silent as in a real partition.
	specs := [][]string{{"-m", "cgroup", "--path", p, "-d", ip, "-m", "comment", "--comment", tag, "-j", "DROP"}}
	conns, err := connectionsTo(pid, ip)
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		specs = append(specs,
			[]string{"-p", "tcp", "-s", c.local, "--sport", c.localPort, "-d", ip, "--dport", c.remotePort, "-m", "comment", "--comment", tag, "-j", "DROP"},
			[]string{"-p", "tcp", "-s", ip, "--sport", c.remotePort, "-d", c.local, "--dport", c.localPort, "-m", "comment", "--comment", tag, "-j", "DROP"})
	}
	var added [][]string
	undo := func() error {
		var errs []error
		for _, spec := range added {
			errs = append(errs, iptables(append([]string{"-D", n.chain}, spec...)...))
		}
		return errors.Join(errs...)
	}
	for _, spec := range specs {
		// First in the chain: ahead of the rules that let the node's own traffic through.
		if err := iptables(append([]string{"-I", n.chain, "1"}, spec...)...); err != nil {
			return nil, errors.Join(err, undo())
		}
		added = append(added, spec)
	}
	return func() error {
		n.mu.Lock()
		defer n.mu.Unlock()
		return undo()
	}, nil
}

// tcpConn is one TCP connection of a process, addresses as iptables takes them.
type tcpConn struct{ local, localPort, remotePort string }

// connectionsTo lists the TCP connections the process pid holds to ip: its socket inodes (from
// /proc/PID/fd) matched against its network namespace's IPv4 socket table (/proc/PID/net/tcp).
func connectionsTo(pid int, ip string) ([]tcpConn, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	table, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil, err
	}
	var out []tcpConn
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		lip, lport, err1 := hexAddr(f[1])
		rip, rport, err2 := hexAddr(f[2])
		if err1 != nil || err2 != nil || rip != ip {
			continue
		}
		out = append(out, tcpConn{local: lip, localPort: lport, remotePort: rport})
	}
	return out, nil
}

// hexAddr decodes an IPv4 "ADDR:PORT" of /proc/net/tcp (the address in host byte order, which
// is little-endian on the machines the rig runs on).
func hexAddr(s string) (ip, port string, err error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(a) != 8 {
		return "", "", fmt.Errorf("unexpected address %q", s)
	}
	v, err := strconv.ParseUint(a, 16, 32)
	if err != nil {
		return "", "", err
	}
	pn, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", "", err
	}
	return fmt.Sprintf("%d.%d.%d.%d", byte(v), byte(v>>8), byte(v>>16), byte(v>>24)), strconv.FormatUint(pn, 10), nil
}
