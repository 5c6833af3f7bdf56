package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mysqlctl/mysqlctl/test/rig"
)

func cmdUp(c *cli, args []string) error {
	fs := c.flags(false)
	crds := fs.Bool("crds", false, "load manifests/crd into the API server at start (default: no CRDs, for `mysqlctl install`)")
	s3 := fs.Bool("s3", false, "also run an S3-compatible object store (versitygw; settings and keys in DIR/s3.env)")
	foreground := fs.Bool("foreground", false, "run in the foreground until interrupted")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the rig to come up")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{"up takes no arguments"}
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	if st, err := rig.ReadState(dir); err == nil {
		if st.Owner.Alive() {
			_, _ = fmt.Fprintf(c.errOut, "a rig is already running in %s (pid %d)\n", dir, st.Owner.PID)
			printSummary(c, st)
			return nil
		}
		_, _ = fmt.Fprintf(c.errOut, "cleaning up a rig in %s whose process is gone\n", dir)
		if err := rig.Down(dir, 10*time.Second); err != nil {
			_, _ = fmt.Fprintf(c.errOut, "warning: %v\n", err)
		}
	}
	if *foreground {
		return serve(c, dir, *crds, *s3)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(dir, "rig.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	serveArgs := []string{"serve", "--dir", dir}
	if *crds {
		serveArgs = append(serveArgs, "--crds")
	}
	if *s3 {
		serveArgs = append(serveArgs, "--s3")
	}
	cmd := exec.Command(self, serveArgs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	_, _ = fmt.Fprintf(c.errOut, "starting the rig in %s (log: %s)\n", dir, logPath)
	deadline := time.After(*timeout)
	for {
		if st, err := rig.ReadState(dir); err == nil && st.Owner.PID == cmd.Process.Pid {
			_, _ = fmt.Fprintf(c.errOut, "rig up after %s (API ready after %s)\n", time.Since(start).Round(time.Millisecond),
				st.Timings.APIReady.Sub(st.Timings.Start).Round(time.Millisecond))
			printSummary(c, st)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the rig process exited (%w); last lines of %s:\n%s", err, logPath, tail(logPath, 30))
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("the rig did not come up within %s; see %s", *timeout, logPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printSummary(c *cli, st *rig.State) {
	_, _ = fmt.Fprintf(c.out, "rig %s running in %s\n", st.ID, st.Dir)
	_, _ = fmt.Fprintf(c.out, "  API server:  %s\n", st.Server)
	_, _ = fmt.Fprintf(c.out, "  node:        %s (%s; pods get addresses in %s0/24)\n", st.NodeName, st.NodeIP, strings.TrimSuffix(st.NodeIP, "1"))
	_, _ = fmt.Fprintf(c.out, "  kubeconfig:  %s\n", st.Kubeconfig)
	_, _ = fmt.Fprintf(c.out, "  export KUBECONFIG=%s\n", st.Kubeconfig)
	if st.S3 != nil {
		_, _ = fmt.Fprintf(c.out, "  object store: %s (path-style, region %s, bucket %s; keys in %s)\n",
			st.S3.Endpoint, st.S3.Region, st.S3.Bucket, st.S3.EnvFile)
	}
}

func cmdServe(c *cli, args []string) error {
	fs := c.flags(false)
	crds := fs.Bool("crds", false, "load manifests/crd")
	s3 := fs.Bool("s3", false, "also run the object store")
	if _, _, err := parse(fs, args); err != nil {
		return err
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	return serve(c, dir, *crds, *s3)
}

// serve runs a rig in this process until SIGINT or SIGTERM.
func serve(c *cli, dir string, crds, s3 bool) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	r, err := rig.Start(ctx, rig.Options{Dir: dir, SkipCRDs: !crds, S3: s3})
	if err != nil {
		return err
	}
	st, _ := rig.ReadState(dir)
	if st != nil {
		printSummary(c, st)
	}
	_, _ = fmt.Fprintf(c.errOut, "%s rig: running; stop with: rig down --dir %s\n", time.Now().Format(time.RFC3339), dir)
	select {
	case s := <-sigs:
		_, _ = fmt.Fprintf(c.errOut, "%s rig: %v: stopping\n", time.Now().Format(time.RFC3339), s)
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			_, _ = fmt.Fprintf(c.errOut, "%s rig: stopping\n", time.Now().Format(time.RFC3339))
		} else {
			<-sigs
		}
	}
	err = r.Stop()
	if left := r.Leftovers(); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
	}
	if err == nil {
		_, _ = fmt.Fprintf(c.errOut, "%s rig: stopped\n", time.Now().Format(time.RFC3339))
	}
	return err
}

func cmdDown(c *cli, args []string) error {
	fs := c.flags(false)
	keep := fs.Bool("keep-dir", false, "keep the work directory (logs, volumes)")
	timeout := fs.Duration("timeout", time.Minute, "how long the rig may take to stop before its processes are killed")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{"down takes no arguments"}
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, rig.StateFile)); errors.Is(err, os.ErrNotExist) {
		_, _ = fmt.Fprintf(c.errOut, "no rig is running in %s\n", dir)
	} else if err := rig.Down(dir, *timeout); err != nil {
		return err
	} else {
		_, _ = fmt.Fprintf(c.errOut, "rig in %s stopped\n", dir)
	}
	if !*keep {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

func cmdEnv(c *cli, args []string) error {
	st, err := state(c, args)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(c.out, "export KUBECONFIG=%s\nexport MYSQLCTL_RIG_DIR=%s\n", st.Kubeconfig, st.Dir)
	return nil
}

func cmdStatus(c *cli, args []string) error {
	st, err := state(c, args)
	if err != nil {
		return err
	}
	printSummary(c, st)
	_, _ = fmt.Fprintln(c.out)
	return listPods(c, st, "", true)
}

// state parses the common flags of a command without arguments and reads the rig's state.
func state(c *cli, args []string) (*rig.State, error) {
	fs := c.flags(false)
	pos, _, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usageError{"no arguments expected"}
	}
	return runningState(c.dir)
}

// runningState reads the state of a rig whose process is alive.
func runningState(dir string) (*rig.State, error) {
	st, err := rig.ReadState(dir)
	if err != nil {
		return nil, err
	}
	if !st.Owner.Alive() {
		return nil, fmt.Errorf("the rig in %s is not running (its process %d is gone); clean up with: rig down --dir %s", dir, st.Owner.PID, dir)
	}
	return st, nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
