package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mysqlctl/mysqlctl/test/rig/internal/agent"
)

// StateFile is the name of the file in a rig's work directory that describes the running rig, so
// that another process (rig down, rig kill, …) can find and stop it.
const StateFile = "rig.json"

// Proc identifies a process the rig started: the PID plus the kernel's start time, so that a PID
// reused by an unrelated process is never signalled.
type Proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // /proc/PID/stat field 22 (clock ticks after boot)
	Name  string `json:"name"`
}

// State describes a running rig.
type State struct {
	ID           string    `json:"id"`
	Dir          string    `json:"dir"`
	Kubeconfig   string    `json:"kubeconfig"`
	Server       string    `json:"server"`
	Socket       string    `json:"socket"`
	NodeName     string    `json:"nodeName"`
	NodeIP       string    `json:"nodeIP"`
	Owner        Proc      `json:"owner"`        // the process that runs the node agent
	ControlPlane []Proc    `json:"controlPlane"` // etcd, kube-apiserver, kube-controller-manager, kube-scheduler
	S3           *S3State  `json:"s3,omitempty"` // the object store, when the rig runs one
	Timings      Timings   `json:"timings"`
	Written      time.Time `json:"written"`
}

// S3State describes the rig's object store. Its keys are only in EnvFile (mode 0600).
type S3State struct {
	Endpoint string `json:"endpoint"`
	Region   string `json:"region"`
	Bucket   string `json:"bucket"`
	EnvFile  string `json:"envFile"`
	Proc     Proc   `json:"proc"`
}

// ReadState reads the state of the rig in dir.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no rig is running in %s (%s is missing)", dir, StateFile)
		}
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	return &st, nil
}

func writeState(dir string, st *State) error {
	st.Written = time.Now()
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+StateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, StateFile))
}

// procOf describes a running process, or returns ok=false when it is gone.
func procOf(pid int) (Proc, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Proc{}, false
	}
	i := bytes.LastIndexByte(data, ')')
	j := bytes.IndexByte(data, '(')
	if i < 0 || j < 0 {
		return Proc{}, false
	}
	name := string(data[j+1 : i])
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return Proc{}, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return Proc{}, false
	}
	return Proc{PID: pid, Start: start, Name: name}, true
}

// Alive reports whether p still runs (same PID and start time, not a zombie).
func (p Proc) Alive() bool { return p.alive() }

func (p Proc) alive() bool {
	cur, ok := procOf(p.PID)
	return ok && cur.Start == p.Start
}

// signal sends sig to p if it is still the same process.
func (p Proc) signal(sig syscall.Signal) {
	if p.PID > 1 && p.alive() {
		_ = syscall.Kill(p.PID, sig)
	}
}

// Down stops the rig running in dir from any process: it asks the process that owns the rig to stop
// (SIGTERM), which kills the pods and the control plane; whatever it recorded and is still running
// after timeout gets SIGKILL, and the rig's iptables rules and cgroups are removed. Only processes
// the rig recorded (same PID and start time) are signalled. The work directory is left in place.
func Down(dir string, timeout time.Duration) error {
	st, err := ReadState(dir)
	if err != nil {
		return err
	}
	var podProcs []Proc
	if st.Socket != "" && st.Owner.alive() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pids, err := agent.NewClient(st.Socket).PIDs(ctx)
		cancel()
		if err == nil {
			for _, pid := range pids {
				if p, ok := procOf(pid); ok {
					podProcs = append(podProcs, p)
				}
			}
		}
	}
	st.Owner.signal(syscall.SIGTERM)
	deadline := time.Now().Add(timeout)
	for st.Owner.alive() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	var errs []error
	if st.Owner.alive() {
		errs = append(errs, fmt.Errorf("rig process %d did not stop within %s: killed", st.Owner.PID, timeout))
		st.Owner.signal(syscall.SIGKILL)
	}
	procs := append(podProcs, st.ControlPlane...)
	if st.S3 != nil {
		procs = append(procs, st.S3.Proc)
	}
	for _, p := range procs {
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		for i := 0; p.alive() && i < 50; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if p.alive() {
			errs = append(errs, fmt.Errorf("process %d (%s) is still running", p.PID, p.Name))
		}
	}
	if err := agent.RemoveRules(st.ID); err != nil {
		errs = append(errs, err)
	}
	agent.RemoveCgroups(st.ID)
	_ = os.Remove(filepath.Join(dir, StateFile))
	return errors.Join(errs...)
}
