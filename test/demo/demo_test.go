package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// hint is one line the demo prints under "Try:".
type hint struct{ cmd, comment string }

var hintLine = regexp.MustCompile(`^  (\S.*?)\s+# (.*)$`)

// parseHints reads the demo's output: the KUBECONFIG it exports and every suggested command.
func parseHints(out string) (kubeconfig string, hints []hint) {
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, "Try:"):
			in = true
		case !in:
		case strings.HasPrefix(line, "  export KUBECONFIG="):
			kubeconfig = strings.TrimPrefix(line, "  export KUBECONFIG=")
		case strings.HasPrefix(line, "Stop everything"):
			in = false
		default:
			if m := hintLine.FindStringSubmatch(line); m != nil {
				hints = append(hints, hint{cmd: m[1], comment: m[2]})
			}
		}
	}
	return kubeconfig, hints
}

// shell runs lines as a user's shell would, in the repository, with the printed KUBECONFIG.
type shell struct {
	t          *testing.T
	root, kube string
	path       string // a directory put first on PATH, or ""
}

func (s shell) command(ctx context.Context, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kube)
	if s.path != "" {
		cmd.Env = append(cmd.Env, "PATH="+s.path+":"+os.Getenv("PATH"))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs one line to its end and returns its output and exit code.
func (s shell) run(line string) (string, int) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := s.command(ctx, line).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("%s: %v", line, err)
	}
	s.t.Logf("$ %s  (exit %d)\n%s", line, code, out)
	return string(out), code
}

// must runs a line that has to succeed.
func (s shell) must(line string) string {
	s.t.Helper()
	out, code := s.run(line)
	if code != 0 {
		s.t.Fatalf("%s: exit %d\n%s", line, code, out)
	}
	return out
}

// until polls a kubectl jsonpath query until ok accepts its value.
func (s shell) until(what, query string, ok func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		out, err := s.command(context.Background(), query).Output()
		last = strings.TrimSpace(string(out))
		if err == nil && ok(last) {
			return last
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.t.Fatalf("%s: last %q", what, last)
	return ""
}

// background is a long-running printed command (watch).
type background struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (b *background) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

func (b *background) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// TestDemoPrintedCommands runs `make demo` on a rig of its own, then every command it prints, as
// printed, with no extra flag: mysqlctl reaches MySQL through the API server's pods/portforward and
// the node's kubelet API, as from a workstation.
func TestDemoPrintedCommands(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.BinDir(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mysqlctl-demo-test-")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "MYSQLCTL_DEMO_DIR="+dir)
	t.Cleanup(func() {
		down := exec.Command("hack/demo-down.sh")
		down.Dir, down.Env = root, env
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("make demo-down: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	demo := exec.Command("make", "--no-print-directory", "demo")
	demo.Dir, demo.Env = root, env
	start := time.Now()
	out, err := demo.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	t.Logf("make demo took %s", time.Since(start).Round(time.Second))
	kube, hints := parseHints(string(out))
	if kube != filepath.Join(dir, "kubeconfig") || len(hints) < 8 {
		t.Fatalf("the demo printed KUBECONFIG %q and %d hints:\n%s", kube, len(hints), out)
	}
	sh := shell{t: t, root: root, kube: kube}
	ran := runHints(t, sh, dir, hints)
	for _, h := range hints {
		if !ran[h.cmd] {
			t.Errorf("the demo prints %q, which this test does not run: give it a check", h.cmd)
		}
	}
	if t.Failed() {
		return
	}
	// The README's first block, on the same rig, as a user whose kubeconfig's namespace is
	// "readme" and who installed mysqlctl on PATH.
	rsh := readmeShell(t, sh, kubectlOf(hints))
	block := readmeBlock(t, root)
	ran = runReadme(t, rsh, dir, kubectlOf(hints), block)
	for _, h := range block {
		if !ran[h.cmd] {
			t.Errorf("README's first block has %q, which this test does not run: give it a check", h.cmd)
		}
	}
}

// readmeShell is a shell with mysqlctl on PATH and a kubeconfig whose namespace is "readme".
func readmeShell(t *testing.T, sh shell, kubectl string) shell {
	pathDir := t.TempDir()
	if err := os.Symlink(filepath.Join(sh.root, "bin", "mysqlctl"), filepath.Join(pathDir, "mysqlctl")); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(pathDir, "kubeconfig")
	sh.must(fmt.Sprintf("cp %s %s && %s create namespace readme && KUBECONFIG=%s %s config set-context --current --namespace=readme", sh.kube, kc, kubectl, kc, kubectl))
	return shell{t: t, root: sh.root, kube: kc, path: pathDir}
}

// runHints runs each printed line in order and checks what it did; it returns the lines it ran.
func runHints(t *testing.T, sh shell, dir string, hints []hint) map[string]bool {
	ran := map[string]bool{}
	kubectl := kubectlOf(hints)
	primary := func() string {
		return sh.until("the primary", kubectl+" get mysqlcluster demo -o jsonpath='{.status.currentPrimary}'",
			func(s string) bool { return s != "" })
	}
	podField := func(pod, path string) string {
		return fmt.Sprintf("%s get pod %s -o jsonpath='%s'", kubectl, pod, path)
	}
	var watch *background
	for _, h := range hints {
		fields := strings.Fields(h.cmd)
		last := fields[len(fields)-1]
		switch {
		case strings.HasSuffix(fields[0], "kubectl") && fields[1] == "get":
			out := sh.must(h.cmd)
			if strings.Count(out, "Running") != 3 || !strings.Contains(out, "demo-2") {
				t.Errorf("%s: want three Running pods:\n%s", h.cmd, out)
			}
		case strings.HasSuffix(fields[0], "kubectl") && fields[1] == "logs":
			if out := sh.must(h.cmd); !strings.Contains(out, "ready for connections") {
				t.Errorf("%s: no server output:\n%s", h.cmd, out)
			}
		case h.cmd == "bin/mysqlctl status demo":
			if out := sh.must(h.cmd); !strings.Contains(out, "primary") {
				t.Errorf("%s: no primary shown:\n%s", h.cmd, out)
			}
		case h.cmd == "bin/mysqlctl switchover demo --wait":
			before := primary()
			sh.must(h.cmd)
			if after := primary(); after == before {
				t.Errorf("%s: the primary is still %s", h.cmd, after)
			}
		case h.cmd == "bin/mysqlctl watch demo":
			watch = startBackground(t, sh, h.cmd)
		case fields[1] == "kill":
			before := sh.until("restarts", podField(last, "{.status.containerStatuses[0].restartCount}"), func(string) bool { return true })
			sh.must(h.cmd)
			sh.until(last+" restarted and Ready", podField(last, "{.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}"),
				func(s string) bool { return s != before+" true" && strings.HasSuffix(s, " true") })
		case fields[1] == "freeze":
			sh.must(h.cmd)
			sh.until(last+" not Ready", podField(last, "{.status.containerStatuses[0].ready}"), func(s string) bool { return s == "false" })
			sh.must(strings.Replace(h.cmd, " freeze ", " thaw ", 1)) // the comment's "bin/rig thaw …"
			sh.until(last+" Ready again", podField(last, "{.status.containerStatuses[0].ready}"), func(s string) bool { return s == "true" })
		case fields[1] == "cut":
			sh.must(h.cmd)
			sh.must(strings.Replace(h.cmd, " cut ", " restore ", 1)) // the comment's "bin/rig restore …"
		case fields[1] == "logs":
			if out := sh.must(h.cmd); !strings.Contains(out, "mariadbd") {
				t.Errorf("%s: no server output:\n%s", h.cmd, out)
			}
		case fields[1] == "status":
			if out := sh.must(h.cmd); !strings.Contains(out, "demo-0") {
				t.Errorf("%s: no pods shown:\n%s", h.cmd, out)
			}
		default:
			continue
		}
		ran[h.cmd] = true
	}
	if watch == nil {
		t.Fatal("the demo does not print a watch command")
	}
	checkWatchFailsOver(t, sh, dir, kubectl, watch, primary)
	return ran
}

// checkWatchFailsOver kills the primary as the demo's kill line does and expects the printed watch
// to fail over by itself, then to end on Ctrl-C.
func checkWatchFailsOver(t *testing.T, sh shell, dir, kubectl string, watch *background, primary func() string) {
	old := primary()
	sh.must(fmt.Sprintf("bin/rig kill --dir %s %s", dir, old))
	sh.until("a new primary chosen by watch", kubectl+" get mysqlcluster demo -o jsonpath='{.status.currentPrimary}'",
		func(s string) bool { return s != "" && s != old })
	select {
	case <-watch.done:
		t.Fatalf("watch ended:\n%s", watch.output())
	default:
	}
	if !strings.Contains(watch.output(), "Promoting") {
		t.Errorf("watch did not report the failover's stages:\n%s", watch.output())
	}
	_ = syscall.Kill(-watch.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-watch.done:
	case <-time.After(30 * time.Second):
		t.Errorf("watch did not end within 30s of Ctrl-C:\n%s", watch.output())
	}
}

func startBackground(t *testing.T, sh shell, line string) *background {
	b := &background{cmd: sh.command(context.Background(), line), done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = b, b
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
		t.Logf("$ %s\n%s", line, b.output())
	})
	return b
}

// kubectlOf is the kubectl the demo printed (the one on PATH or the control plane's).
func kubectlOf(hints []hint) string {
	for _, h := range hints {
		if f := strings.Fields(h.cmd); strings.HasSuffix(f[0], "kubectl") {
			return f[0]
		}
	}
	return "kubectl"
}

// readmeBlock returns the command lines of the README's "A first cluster" block.
func readmeBlock(t *testing.T, root string) []hint {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "## A first cluster\n")
	if !ok {
		t.Fatal(`README.md has no "## A first cluster" section`)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal(`README.md's "A first cluster" has no sh block`)
	}
	var hints []hint
	for _, line := range strings.Split(block, "\n") {
		cmd, comment, _ := strings.Cut(line, "# ")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			hints = append(hints, hint{cmd: cmd, comment: strings.TrimSpace(comment)})
		}
	}
	return hints
}

// runReadme runs the README's first block line by line and checks each outcome; it returns the
// lines it ran.
func runReadme(t *testing.T, sh shell, dir, kubectl string, block []hint) map[string]bool {
	ran := map[string]bool{}
	field := func(path string) string {
		out, _ := sh.command(context.Background(), kubectl+" get mysqlcluster demo -o jsonpath='"+path+"'").Output()
		return strings.TrimSpace(string(out))
	}
	healthy := func(what string) {
		sh.until(what, kubectl+" get mysqlcluster demo -o jsonpath='{.status.phase}/{.status.operation.type}/{.status.readyReplicas}'",
			func(s string) bool { return strings.HasPrefix(s, "Running//") })
	}
	for _, h := range block {
		fields := strings.Fields(h.cmd)
		switch sub := fields[1]; {
		case sub == "install" || sub == "reconcile" || sub == "resume" || sub == "abort":
			sh.must(h.cmd)
		case sub == "create":
			if out := sh.must(h.cmd); !strings.Contains(out, "Running") {
				t.Errorf("%s: not Running:\n%s", h.cmd, out)
			}
		case sub == "status" || sub == "get":
			if out := sh.must(h.cmd); !strings.Contains(out, "demo") {
				t.Errorf("%s: the cluster is not shown:\n%s", h.cmd, out)
			}
		case sub == "apply":
			sh.must(h.cmd)
			healthy("Healthy after apply")
		case sub == "switchover":
			sh.must(h.cmd)
			if p := field("{.status.currentPrimary}"); p != fields[len(fields)-1] {
				t.Errorf("%s: the primary is %s", h.cmd, p)
			}
		case sub == "failover" && strings.Contains(h.cmd, "--dry-run"):
			// The primary answers: the plan refuses (exit 4) and changes nothing.
			before := field("{.status.currentPrimary}")
			if out, code := sh.run(h.cmd); code != 4 || !strings.Contains(out, "writable") {
				t.Errorf("%s on a healthy cluster: exit %d, want 4 (the primary is writable):\n%s", h.cmd, code, out)
			}
			if after := field("{.status.currentPrimary}"); after != before {
				t.Errorf("%s changed the primary from %s to %s", h.cmd, before, after)
			}
		case sub == "failover":
			readmeFailover(t, sh, dir, kubectl, h.cmd, field)
			healthy("Healthy after the failover and the old primary's return")
		case sub == "upgrade" && strings.Contains(h.cmd, "--dry-run"):
			if out := sh.must(h.cmd); !strings.Contains(out, "11.4") {
				t.Errorf("%s: the plan does not name the new version:\n%s", h.cmd, out)
			}
		case sub == "upgrade":
			sh.must(h.cmd)
			if img := field("{.spec.image}"); img != "mariadb:11.4" {
				t.Errorf("%s: spec.image %s", h.cmd, img)
			}
			healthy("Healthy after the upgrade")
		case sub == "watch":
			w := startBackground(t, sh, h.cmd)
			sh.until("watch supervising", "true", func(string) bool { return strings.Contains(w.output(), "supervising") })
			_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGINT)
			select {
			case <-w.done:
			case <-time.After(30 * time.Second):
				t.Errorf("watch did not end within 30s of Ctrl-C:\n%s", w.output())
			}
		case sub == "delete":
			// On a terminal, as a user types it: it asks for the cluster's name.
			out := sh.must(fmt.Sprintf("printf 'demo\\n' | script -qec %q /dev/null", h.cmd))
			if !strings.Contains(out, "Type the cluster name to confirm") {
				t.Errorf("%s did not ask for confirmation:\n%s", h.cmd, out)
			}
			sh.until("the cluster gone", kubectl+" get mysqlcluster -o name", func(s string) bool { return s == "" })
		default:
			continue
		}
		ran[h.cmd] = true
	}
	return ran
}

// readmeFailover makes the README's premise true (the primary is dead: frozen), runs the printed
// failover, then brings the old primary back as a user would (thaw; a rebuild if it was
// quarantined).
func readmeFailover(t *testing.T, sh shell, dir, kubectl, line string, field func(string) string) {
	old := field("{.status.currentPrimary}")
	sh.must(fmt.Sprintf("bin/rig freeze --dir %s -n readme %s", dir, old))
	out, code := sh.run(line)
	sh.must(fmt.Sprintf("bin/rig thaw --dir %s -n readme %s", dir, old))
	if code != 0 {
		t.Fatalf("%s with the primary frozen: exit %d\n%s", line, code, out)
	}
	if p := field("{.status.currentPrimary}"); p == old || p == "" {
		t.Fatalf("%s: the primary is still %q", line, p)
	}
	// The thawed old primary is fenced; it is quarantined if it holds what the new one lacks.
	time.Sleep(5 * time.Second)
	if strings.Contains(field("{.status.errantInstances[*].name}"), old) {
		sh.must("mysqlctl rebuild demo " + old)
	} else {
		sh.must("mysqlctl reconcile demo")
	}
}
