package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// TestStaleActorDoesNothing is the paused-actor attack on the fencing token. Actor A freezes
// (SIGSTOP, as a laptop lid or a VM pause would) right before the first statement of Promoting;
// `reconcile` then names the stopped operation and its absent holder; `resume` takes the
// operation over and finishes it; another switchover moves the primary back. When A wakes it
// must execute no statement and write nothing: exactly one instance stays writable.
func TestStaleActorDoesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if res := mysqlctl(t, "create", "stale", "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi", "--wait", "--timeout", "3m"); res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, "stale")
	root := string(secret(t, ctx, "stale").Data[specs.SecretRootPassword])

	a := startFrozen(t, ctx, orchestrate.StagePromoting, "switchover", "stale", "--to", "stale-1")
	defer a.kill()

	// The stopped switchover blocks reconcile, which says who left it and what continues it
	// (after A's lease expired by this process's own observation).
	res := mysqlctl(t, "reconcile", "stale", "--timeout", "1m")
	if res.code != 4 || !strings.Contains(res.stderr, "no longer holds the cluster") || !strings.Contains(res.stderr, "resume stale") {
		t.Errorf("reconcile of a cluster whose operation's holder is gone: exit %d\n%s", res.code, res.stderr)
	}
	if res := mysqlctl(t, "resume", "stale", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("resume: %d\n%s", res.code, res.stderr)
	}
	if p := getCluster(t, ctx, "stale").Status.CurrentPrimary; p != "stale-1" {
		t.Fatalf("after resume the primary is %s, want stale-1", p)
	}
	if res := mysqlctl(t, "switchover", "stale", "--to", "stale-0", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("second switchover: %d\n%s", res.code, res.stderr)
	}
	before := getCluster(t, ctx, "stale")
	if before.Status.CurrentPrimary != "stale-0" {
		t.Fatalf("after the second switchover the primary is %s", before.Status.CurrentPrimary)
	}
	dbs := map[string]*sql.DB{}
	counters := map[string]map[string]string{}
	for _, pod := range []string{"stale-0", "stale-1"} {
		dbs[pod] = db(t, mustPodAddr(t, ctx, pod), root)
		counters[pod] = replicationCounters(t, ctx, dbs[pod])
	}
	labels := roleLabels(t, ctx, "stale-0", "stale-1")

	code, stderr := a.wake(t)
	if code != 5 || !strings.Contains(stderr, "lease") {
		t.Errorf("the woken stale actor: exit %d (want 5, lease lost)\n%s", code, stderr)
	}
	after := getCluster(t, ctx, "stale")
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the stale actor wrote the cluster: status %+v", after.Status.Operation)
	}
	if got := roleLabels(t, ctx, "stale-0", "stale-1"); got != labels {
		t.Errorf("the stale actor moved labels: %s → %s", labels, got)
	}
	for pod, d := range dbs {
		if got := replicationCounters(t, ctx, d); fmt.Sprint(got) != fmt.Sprint(counters[pod]) {
			t.Errorf("the stale actor ran statements on %s: %v → %v", pod, counters[pod], got)
		}
	}
	if readOnly(t, ctx, dbs["stale-0"]) || !readOnly(t, ctx, dbs["stale-1"]) {
		t.Errorf("want exactly stale-0 writable: stale-0 read-only %v, stale-1 read-only %v", readOnly(t, ctx, dbs["stale-0"]), readOnly(t, ctx, dbs["stale-1"]))
	}
}

// TestConcurrentSwitchoversOneWins starts two switchovers at the same moment, three times: one
// succeeds, the other is refused with exit 5 naming the holder, and the primary moves once.
func TestConcurrentSwitchoversOneWins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if res := mysqlctl(t, "create", "twin", "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi", "--wait", "--timeout", "3m"); res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, "twin")
	for round := range 3 {
		before := getCluster(t, ctx, "twin")
		var wg sync.WaitGroup
		results := make([]result, 2)
		for i := range results {
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = mysqlctl(t, "switchover", "twin", "--timeout", "2m") }()
		}
		wg.Wait()
		codes := []int{results[0].code, results[1].code}
		won, refused := 0, 0
		for _, res := range results {
			switch {
			case res.code == 0:
				won++
			case res.code == 5 && strings.Contains(res.stderr, "holds cluster twin"):
				refused++
			}
		}
		if won != 1 || refused != 1 {
			t.Fatalf("round %d: exits %v, want one 0 and one 5 naming the holder\n%s\n%s", round, codes, results[0].stderr, results[1].stderr)
		}
		after := getCluster(t, ctx, "twin")
		if after.Status.CurrentPrimary == before.Status.CurrentPrimary {
			t.Errorf("round %d: the primary did not move", round)
		}
		if n := len(after.Status.History) - len(before.Status.History); n != 1 && len(after.Status.History) < 20 {
			t.Errorf("round %d: %d operations recorded, want 1", round, n)
		}
	}
}

// frozen is a CLI process that stopped itself at a failpoint.
type frozen struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	mu     *sync.Mutex
	done   chan struct{}
}

// syncWriter serialises writes to a buffer that is read while the process runs.
type syncWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// startFrozen runs the CLI with the stop-before-mutation failpoint at stage and returns once the
// process has stopped itself there.
func startFrozen(t *testing.T, ctx context.Context, stage string, args ...string) *frozen {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", r.Kubeconfig, "-n", "default")...)
	cmd.Env = cliEnv(t, "MYSQLCTL_FAILPOINT_STOP_BEFORE_MUTATION="+stage)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &frozen{cmd: cmd, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	reached := make(chan bool, 1)
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(pipe)
		signalled := false
		out := syncWriter{f.mu, f.stderr}
		for sc.Scan() {
			fmt.Fprintln(out, sc.Text())
			if !signalled && strings.Contains(sc.Text(), "failpoint: stopping before") {
				signalled = true
				reached <- true
			}
		}
		if !signalled {
			reached <- false
		}
	}()
	if !<-reached {
		f.kill()
		t.Fatalf("the CLI ended before stopping at %s:\n%s", stage, f.output())
	}
	// The line is printed right before SIGSTOP: wait until the kernel shows it stopped.
	for i := 0; ; i++ {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err == nil && processState(stat) == "T" {
			break
		}
		if i > 200 {
			f.kill()
			t.Fatalf("the CLI did not stop itself at %s", stage)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return f
}

// processState returns the state field of /proc/PID/stat.
func processState(stat []byte) string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return ""
	}
	return string(stat[i+2])
}

func (f *frozen) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stderr.String()
}

// wake resumes the process and waits for it to exit.
func (f *frozen) wake(t *testing.T) (int, string) {
	t.Helper()
	if err := f.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	<-f.done
	err := f.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), f.output()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, f.output()
}

// kill ends the process if it still runs (cleanup on failure).
func (f *frozen) kill() {
	if f.cmd.ProcessState == nil {
		_ = f.cmd.Process.Signal(syscall.SIGKILL)
		_ = f.cmd.Process.Signal(syscall.SIGCONT)
		<-f.done
		_ = f.cmd.Wait()
	}
}

// replicationCounters reads the server's counters of statements that change replication or
// end sessions, and its read_only flag: a statement sent by a stale actor changes one of them.
func replicationCounters(t *testing.T, ctx context.Context, d *sql.DB) map[string]string {
	t.Helper()
	rows, err := d.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Com\\_%' AND Variable_name NOT LIKE 'Com\\_show%' AND (Variable_name LIKE '%slave%' OR Variable_name LIKE '%master%' OR Variable_name LIKE '%replica%' OR Variable_name LIKE '%kill%' OR Variable_name LIKE '%reset%')")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no statement counters found")
	}
	var ro string
	if err := d.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
		t.Fatal(err)
	}
	out["read_only"] = ro
	return out
}

// roleLabels renders the role labels of the pods.
func roleLabels(t *testing.T, ctx context.Context, pods ...string) string {
	t.Helper()
	var parts []string
	for _, name := range pods {
		p := must(r.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}))
		parts = append(parts, name+"="+p.Labels[specs.LabelRole])
	}
	return strings.Join(parts, ",")
}
