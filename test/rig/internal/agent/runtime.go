package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mount is one bind mount in a container's mount namespace.
type mount struct {
	src, dst string
	readOnly bool
	// last mounts it after every other: its destination hides host paths that other mounts'
	// sources lie under (a container's private /tmp over the host's, where the pods' files are).
	last bool
}

// processSpec describes a container process.
type processSpec struct {
	argv     []string
	env      []string
	workDir  string
	hostname string
	mounts   []mount
	cgroup   string // host path of the pod's cgroup, or ""
	logPath  string
	user     *identity // run the command as this user (after the mounts); nil: as root
}

// identity is the user a container's command runs as, and whether it may gain privileges.
type identity struct {
	uid, gid   int64
	noNewPrivs bool
}

// process is a running (or finished) container process: the leader of its own process group, in a
// private mount and UTS namespace.
type process struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	done    chan struct{}

	mu       sync.Mutex
	reaped   bool // set under mu before the PID can be reused: no signal is sent after it
	frozen   bool
	finished time.Time
	exitCode int
	signal   syscall.Signal
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// setupScript is run by /bin/sh inside the new namespaces before the container's command replaces
// it: join the pod's cgroup, set the hostname, bind-mount the volumes (parents first) and change to
// the working directory.
func setupScript(spec processSpec) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	if spec.cgroup != "" {
		// Without the cgroup only the pod's outgoing traffic escapes a network cut: say so, but run.
		fmt.Fprintf(&b, "echo $$ > %s || echo 'rig: could not join the pod cgroup' >&2\n", shellQuote(spec.cgroup+"/cgroup.procs"))
	}
	if spec.hostname != "" {
		fmt.Fprintf(&b, "hostname %s\n", shellQuote(spec.hostname))
	}
	mounts := append([]mount(nil), spec.mounts...)
	sort.SliceStable(mounts, func(i, j int) bool {
		if mounts[i].last != mounts[j].last {
			return mounts[j].last
		}
		return strings.Count(mounts[i].dst, "/") < strings.Count(mounts[j].dst, "/")
	})
	for _, m := range mounts {
		fmt.Fprintf(&b, "mount --bind %s %s\n", shellQuote(m.src), shellQuote(m.dst))
		if m.readOnly {
			fmt.Fprintf(&b, "mount -o remount,bind,ro %s\n", shellQuote(m.dst))
		}
	}
	wd := spec.workDir
	if wd == "" {
		wd = "/"
	}
	fmt.Fprintf(&b, "cd %s\n", shellQuote(wd))
	if u := spec.user; u != nil {
		// setpriv (util-linux) drops to the user with no supplementary groups and no capabilities
		// left to inherit or regain, as a runtime starts a container's process.
		fmt.Fprintf(&b, "exec setpriv --reuid=%d --regid=%d --clear-groups --inh-caps=-all --bounding-set=-all", u.uid, u.gid)
		if u.noNewPrivs {
			b.WriteString(" --no-new-privs")
		}
		b.WriteString(` -- "$@"` + "\n")
	} else {
		b.WriteString(`exec "$@"` + "\n")
	}
	return b.String()
}

// startProcess starts a container process. Its output is appended to spec.logPath.
func startProcess(spec processSpec) (*process, error) {
	if len(spec.argv) == 0 {
		return nil, errors.New("container has no command")
	}
	logf, err := os.OpenFile(spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := append([]string{"-c", setupScript(spec), "container"}, spec.argv...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = spec.env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:      true,
		Pdeathsig:    syscall.SIGKILL,
		Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS,
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	go func() {
		waitExit(p.pid)
		p.mu.Lock()
		// The container is over when its main process is: whatever else it started goes too. The
		// unreaped leader keeps the process group ID from being reused until cmd.Wait below.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		err := cmd.Wait()
		_ = logf.Close()
		p.finished = time.Now()
		p.exitCode, p.signal = exitStatus(cmd, err)
		p.reaped = true
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// waitExit blocks until the child pid has exited, without reaping it: its PID (and process group
// ID) stay reserved, so signalling the group afterwards cannot hit an unrelated process.
func waitExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

func exitStatus(cmd *exec.Cmd, err error) (int, syscall.Signal) {
	if cmd.ProcessState == nil {
		return 128, 0
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return code, 0
	}
	if err != nil {
		return 128, 0
	}
	return 0, 0
}

// exited reports whether the process has finished.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// result returns the exit code, the signal that ended the process (0 if none) and when it ended.
func (p *process) result() (int, syscall.Signal, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.signal, p.finished
}

// signalGroup signals the process group; a frozen group is thawed first for fatal signals, so a
// SIGTERM is acted upon (SIGKILL works on stopped processes anyway).
func (p *process) signalGroup(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return nil
	}
	switch sig {
	case syscall.SIGSTOP:
		p.frozen = true
	case syscall.SIGCONT:
		p.frozen = false
	}
	err := syscall.Kill(-p.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// isFrozen reports whether the process group was stopped with SIGSTOP and not resumed.
func (p *process) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

// kill ends the process group with SIGKILL and waits for the main process.
func (p *process) kill() {
	_ = p.signalGroup(syscall.SIGKILL)
	<-p.done
}

// execResult is the outcome of a command run inside a container.
type execResult struct {
	exitCode int
	output   string
	err      error // the command could not run or timed out
}

// execIn runs argv inside the namespaces and the cgroup of the container whose main process is pid
// (as exec probes do), with the container's environment and working directory, and kills its
// whole process group when the timeout expires.
func execIn(ctx context.Context, pid int, cgroup string, argv, env []string, workDir string, timeout time.Duration) execResult {
	var out limitedBuffer
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, err := execStreams(ctx, pid, cgroup, argv, env, workDir, nil, &out, &out)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("command timed out after %s", timeout)
	}
	if err != nil {
		return execResult{exitCode: -1, output: out.String(), err: err}
	}
	return execResult{exitCode: code, output: out.String()}
}

// execStreams runs argv inside the namespaces and the cgroup of the container whose main process
// is pid (as `kubectl exec` does) with the given standard streams, and returns its exit code. When
// ctx ends first, the command's whole process group is killed and ctx's error returned.
func execStreams(ctx context.Context, pid int, cgroup string, argv, env []string, workDir string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("empty command")
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cgroup != "" {
		// Born in the pod's cgroup (clone3 CLONE_INTO_CGROUP), as an exec in a container is.
		fd, err := syscall.Open(cgroup, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err == nil {
			defer func() { _ = syscall.Close(fd) }()
			attr.UseCgroupFD, attr.CgroupFD = true, fd
		}
	}
	wd := workDir
	if wd == "" {
		wd = "/"
	}
	args := append([]string{"--target", strconv.Itoa(pid), "--mount", "--uts", "--wd=" + wd, "--"}, argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// A stdin that never ends (a client that keeps its stream open) must not keep Wait from
	// returning once the command has exited.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	child := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { waitExit(child); close(exited) }()
	var stopped error
	select {
	case <-exited:
	case <-ctx.Done():
		stopped = ctx.Err()
	}
	// The leader is not reaped yet, so its process group ID is still ours: end whatever is left.
	_ = syscall.Kill(-child, syscall.SIGKILL)
	<-exited
	err := cmd.Wait()
	if stopped != nil {
		return -1, stopped
	}
	code, _ := exitStatus(cmd, err)
	return code, nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps what fits and reports everything as written.
func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// String returns what was kept.
func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
