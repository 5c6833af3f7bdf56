package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// BinDir returns the directory holding the control-plane binaries: MYSQLCTL_CONTROLPLANE_BIN,
// else KUBEBUILDER_ASSETS, else the output of hack/build-controlplane.sh (which builds them once
// and caches them by version). Every component must be present and executable.
func BinDir() (string, error) {
	binOnce.Do(func() { binDir, binErr = findBinDir() })
	return binDir, binErr
}

func findBinDir() (string, error) {
	for _, env := range []string{"MYSQLCTL_CONTROLPLANE_BIN", "KUBEBUILDER_ASSETS"} {
		if d := os.Getenv(env); d != "" {
			return d, checkBins(d, env)
		}
	}
	d, script, err := runBuildScript("build-controlplane.sh")
	if err != nil {
		return "", err
	}
	return d, checkBins(d, script)
}

// runBuildScript runs hack/NAME of the repository, which builds something once and prints where it
// is, and returns that path and the script's.
func runBuildScript(name string) (path, script string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	script = filepath.Join(root, "hack", name)
	var stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", script, fmt.Errorf("%s failed: %w\n%s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), script, nil
}

func checkBins(dir, from string) error {
	for _, c := range components {
		st, err := os.Stat(filepath.Join(dir, c))
		if err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("control-plane binary %s missing in %s (from %s): run hack/build-controlplane.sh", c, dir, from)
		}
	}
	return nil
}

// RepoRoot returns the repository root: the nearest directory upwards from the working
// directory that has manifests/ and hack/build-controlplane.sh (go test runs in the package dir).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "build-controlplane.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root (with hack/build-controlplane.sh) not found above the working directory")
		}
		dir = parent
	}
}

// childPIDs lists this process's children whose executable lives in dir.
func childPIDs(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != filepath.Clean(dir) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
