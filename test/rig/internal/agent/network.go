package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RuleTag starts the comment of every iptables rule a rig adds, followed by the rig's ID, so that
// rules can be found (and removed) even after a rig died without cleaning up.
const RuleTag = "mysqlctl-rig"

// ChainName is the iptables chain of a rig: INPUT and OUTPUT jump to it, and it holds the DROP rules
// of the pods whose network is cut.
func ChainName(rigID string) string {
	id := rigID
	if len(id) > 12 {
		id = id[:12]
	}
	return "MYSQLCTL-" + strings.ToUpper(id)
}

// network owns the rig's iptables chain and its cgroup tree.
type network struct {
	rigID  string
	chain  string
	nodeIP string

	mu       sync.Mutex
	hooked   bool
	cut      map[string][][]string // pod key → rule specs (without -A/-D and chain)
	cgMount  string                // cgroup2 mount point, "" when cgroup v2 is unavailable
	cgNSRoot string                // the mount's root inside the cgroup hierarchy (for xt_cgroup)
	cgRig    string                // host path of the rig's cgroup directory
}

func newNetwork(rigID, nodeIP string) *network {
	n := &network{rigID: rigID, chain: ChainName(rigID), nodeIP: nodeIP, cut: map[string][][]string{}}
	n.cgMount, n.cgNSRoot = findCgroup2()
	if n.cgMount != "" {
		dir := filepath.Join(n.cgMount, "mysqlctl-rig-"+rigID)
		if err := os.Mkdir(dir, 0o755); err == nil || errors.Is(err, os.ErrExist) {
			n.cgRig = dir
		}
	}
	return n
}

// findCgroup2 returns the mount point and root of the cgroup v2 hierarchy from /proc/self/mountinfo.
func findCgroup2() (mountPoint, root string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		line := sc.Text()
		i := strings.Index(line, " - ")
		if i < 0 {
			continue
		}
		post := strings.Fields(line[i+3:])
		pre := strings.Fields(line[:i])
		if len(post) < 1 || post[0] != "cgroup2" || len(pre) < 5 {
			continue
		}
		return pre[4], pre[3]
	}
	return "", ""
}

// podCgroup creates the cgroup of a pod and returns its host path ("" when cgroups are unavailable).
func (n *network) podCgroup(uid string) string {
	if n.cgRig == "" {
		return ""
	}
	dir := filepath.Join(n.cgRig, uid)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return ""
	}
	return dir
}

// cgroupPIDs lists the processes in a pod's cgroup.
func cgroupPIDs(dir string) []int {
	if dir == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeCgroup removes a pod's cgroup once its processes are gone (rmdir fails while any remain).
func removeCgroup(dir string) {
	if dir == "" {
		return
	}
	for range 50 {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupPath is the path xt_cgroup matches for a cgroup directory.
func (n *network) cgroupPath(dir string) string {
	rel, err := filepath.Rel(n.cgMount, dir)
	if err != nil {
		return ""
	}
	return filepath.Join(n.cgNSRoot, rel)
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hook creates the rig's chain: INPUT and OUTPUT jump to it; traffic to and from the node address
// (the agent's probes, as a kubelet probes from the node itself) is never cut.
func (n *network) hook() error {
	if n.hooked {
		return nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("iptables is not installed (apt-get install iptables): network cuts need it")
	}
	tag := RuleTag + " " + n.rigID
	if err := iptables("-N", n.chain); err != nil {
		return err
	}
	n.hooked = true
	for _, spec := range [][]string{
		{"-A", n.chain, "-s", n.nodeIP, "-j", "RETURN"},
		{"-A", n.chain, "-d", n.nodeIP, "-j", "RETURN"},
		{"-I", "INPUT", "1", "-m", "comment", "--comment", tag, "-j", n.chain},
		{"-I", "OUTPUT", "1", "-m", "comment", "--comment", tag, "-j", n.chain},
	} {
		if err := iptables(spec...); err != nil {
			return err
		}
	}
	return nil
}

// cutPod drops every packet to or from ip and every packet sent by a process in the pod's cgroup
// (a pod's outgoing connections leave from 127.0.0.1, not from its own address).
func (n *network) cutPod(key, ip, cgroup string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.cut[key]; ok {
		return nil
	}
	if err := n.hook(); err != nil {
		return err
	}
	tag := RuleTag + " " + n.rigID + " cut " + key
	specs := [][]string{
		{"-d", ip, "-m", "comment", "--comment", tag, "-j", "DROP"},
		{"-s", ip, "-m", "comment", "--comment", tag, "-j", "DROP"},
	}
	if cgroup != "" {
		if p := n.cgroupPath(cgroup); p != "" {
			specs = append(specs, []string{"-m", "cgroup", "--path", p, "-m", "comment", "--comment", tag, "-j", "DROP"})
		}
	}
	var added [][]string
	for _, s := range specs {
		if err := iptables(append([]string{"-A", n.chain}, s...)...); err != nil {
			for _, a := range added {
				_ = iptables(append([]string{"-D", n.chain}, a...)...)
			}
			return err
		}
		added = append(added, s)
	}
	n.cut[key] = added
	return nil
}

// restorePod removes a pod's cut rules.
func (n *network) restorePod(key string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	specs, ok := n.cut[key]
	if !ok {
		return nil
	}
	var errs []error
	for _, s := range specs {
		if err := iptables(append([]string{"-D", n.chain}, s...)...); err != nil {
			errs = append(errs, err)
		}
	}
	delete(n.cut, key)
	return errors.Join(errs...)
}

// isCut reports whether a pod's network is cut.
func (n *network) isCut(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.cut[key]
	return ok
}

// close removes the chain and the rig's cgroup directory.
func (n *network) close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	if n.hooked {
		if err := RemoveRules(n.rigID); err != nil {
			errs = append(errs, err)
		}
		n.hooked = false
		n.cut = map[string][][]string{}
	}
	if n.cgRig != "" {
		RemoveCgroups(n.rigID)
	}
	return errors.Join(errs...)
}

// RemoveRules deletes a rig's jumps from INPUT and OUTPUT and its chain. It is safe to call for a rig
// that never cut anything, and from another process (rig down).
func RemoveRules(rigID string) error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	chain := ChainName(rigID)
	tag := RuleTag + " " + rigID
	var errs []error
	for _, parent := range []string{"INPUT", "OUTPUT"} {
		for range 10 {
			if err := iptables("-D", parent, "-m", "comment", "--comment", tag, "-j", chain); err != nil {
				break
			}
		}
	}
	if err := exec.Command("iptables", "-w", "5", "-n", "-L", chain).Run(); err == nil {
		if err := iptables("-F", chain); err != nil {
			errs = append(errs, err)
		}
		if err := iptables("-X", chain); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RulesLeft lists the iptables rules (in iptables -S form) that mention a rig, for tests that prove
// teardown removed them.
func RulesLeft(rigID string) ([]string, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, nil
	}
	out, err := exec.Command("iptables", "-w", "5", "-S").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("iptables -S: %w: %s", err, out)
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, ChainName(rigID)) || strings.Contains(line, RuleTag+" "+rigID) {
			left = append(left, line)
		}
	}
	return left, nil
}

// rigCgroupDir is the host path of a rig's cgroup directory, or "" without cgroup v2.
func rigCgroupDir(rigID string) string {
	mnt, _ := findCgroup2()
	if mnt == "" {
		return ""
	}
	return filepath.Join(mnt, "mysqlctl-rig-"+rigID)
}

// RemoveCgroups removes a rig's cgroup directories (they can only go once their processes are
// gone). It is safe to call from another process (rig down).
func RemoveCgroups(rigID string) {
	dir := rigCgroupDir(rigID)
	if dir == "" {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	removeCgroup(dir)
}

// CgroupLeft reports whether a rig's cgroup directory still exists.
func CgroupLeft(rigID string) bool {
	dir := rigCgroupDir(rigID)
	if dir == "" {
		return false
	}
	_, err := os.Stat(dir)
	return err == nil
}
