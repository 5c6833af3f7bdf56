package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// writer inserts increasing ids through the primary Service, following it to its current
// endpoint after every failure like a reconnecting application, and records every commit the
// server acknowledged.
type writer struct {
	// start is the first id written (default 1).
	start int
	// pace is the pause after each acknowledged write (0: none), for tests whose new instances
	// replay the whole history: an unpaced writer on loopback outruns a replica's applier.
	pace time.Duration
	// timeout bounds each write (0: 2 s): a write to a silent server fails after it, and the
	// next goes to whatever the primary Service then selects.
	timeout time.Duration
	mu      sync.Mutex
	acked   []int
	// ackTimes are when each acknowledged write returned, and ackAddrs the server address
	// ("ip:port") that acknowledged it.
	ackTimes []time.Time
	ackAddrs []string
	gaps     []time.Duration
	last     time.Time
	errors   int
	// lastErr is the last failed attempt's error.
	lastErr string
	// tooMany counts the attempts refused with "Too many connections" (1040).
	tooMany int
	// errLog is each failed attempt (the first 200): when it started, how long it took, where
	// it went and why it failed, for a benchmark's verbose output.
	errLog []string
}

func (w *writer) run(ctx context.Context, service, password string) {
	var conn *sql.DB
	addr := ""
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for id := max(1, w.start); ctx.Err() == nil; {
		if conn == nil {
			addrs, err := r.ServiceAddrs(ctx, "default", service, "mysql")
			if err != nil || len(addrs) != 1 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			addr = addrs[0]
			conn, _ = sql.Open("mysql", rig.DSN(addr, "app", password))
			conn.SetMaxOpenConns(1)
		}
		timeout := w.timeout
		if timeout <= 0 {
			timeout = 2 * time.Second
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		began := time.Now()
		_, err := conn.ExecContext(wctx, "INSERT INTO app.w VALUES (?)", id)
		cancel()
		if err != nil && strings.Contains(err.Error(), "Duplicate entry") {
			// An earlier attempt at this id committed without its acknowledgement reaching us
			// (the primary died after a replica received it): not acknowledged, move on.
			id++
			continue
		}
		if err != nil {
			w.mu.Lock()
			w.errors++
			w.lastErr = err.Error()
			if strings.Contains(w.lastErr, "1040") {
				w.tooMany++
			}
			if len(w.errLog) < 200 {
				w.errLog = append(w.errLog, fmt.Sprintf("%s +%s %s: %v", began.Format("15:04:05.000"), time.Since(began).Round(time.Millisecond), addr, err))
			}
			w.mu.Unlock()
			_ = conn.Close()
			conn = nil
			time.Sleep(10 * time.Millisecond)
			continue
		}
		now := time.Now()
		w.mu.Lock()
		if !w.last.IsZero() {
			w.gaps = append(w.gaps, now.Sub(w.last))
		}
		w.last = now
		w.acked = append(w.acked, id)
		w.ackTimes = append(w.ackTimes, now)
		w.ackAddrs = append(w.ackAddrs, addr)
		w.mu.Unlock()
		id++
		if w.pace > 0 {
			time.Sleep(w.pace)
		}
	}
}

// failedAttempts returns the log of failed attempts (errLog).
func (w *writer) failedAttempts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.errLog)
}

// failures returns the failed attempts and the last error.
func (w *writer) failures() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errors, w.lastErr
}

func (w *writer) maxGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var m time.Duration
	for _, g := range w.gaps {
		m = max(m, g)
	}
	return m
}

// TestSwitchoverUnderWrites: a planned switchover to a named and then to an automatic target
// while a client writes continuously: every acknowledged commit survives on every instance,
// exactly one instance is writable afterwards, and the old primary replicates from the new one.
func TestSwitchoverUnderWrites(t *testing.T) {
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if res := mysqlctl(t, "create", "sw", "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "128Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, "sw")
	root := string(secret(t, ctx, "sw").Data[specs.SecretRootPassword])
	addrs, err := r.ServiceAddrs(ctx, "default", "sw-primary", "mysql")
	if err != nil || len(addrs) != 1 {
		t.Fatalf("primary endpoints %v %v", addrs, err)
	}
	// The application account bootstrap created has no global privilege: read_only stops it,
	// as it stops every real application account; the test gives it a known password.
	for _, q := range []string{
		"CREATE DATABASE app", "CREATE TABLE app.w (id INT PRIMARY KEY)",
		"ALTER USER app@'%' IDENTIFIED BY 'app-pass'",
	} {
		if _, err := db(t, addrs[0], root).ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	for round, target := range []string{"sw-1", ""} {
		w := &writer{}
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); w.run(wctx, "sw-primary", "app-pass") }()
		time.Sleep(time.Second)
		before := getCluster(t, ctx, "sw").Status.CurrentPrimary
		args := []string{"switchover", "sw"}
		if target != "" {
			args = append(args, "--to", target)
		}
		res := mysqlctl(t, append(args, "--timeout", "90s")...)
		if res.code != 0 {
			stop()
			wg.Wait()
			t.Fatalf("round %d: switchover: %d\n%s\n%s", round, res.code, res.stdout, res.stderr)
		}
		time.Sleep(time.Second)
		stop()
		wg.Wait()
		c := getCluster(t, ctx, "sw")
		newPrimary := c.Status.CurrentPrimary
		if newPrimary == before || (target != "" && newPrimary != target) {
			t.Fatalf("round %d: primary %s → %s (target %q)", round, before, newPrimary, target)
		}
		h := c.Status.History[0]
		if h.Type != orchestrate.OperationSwitchover || h.Result != "Succeeded" || h.TransactionsLost != 0 || c.Status.Operation != nil {
			t.Errorf("round %d: history %+v op %+v", round, h, c.Status.Operation)
		}
		t.Logf("round %d: %s → %s; %d acknowledged writes, %d failed attempts, longest write gap %s (CLI: %s)",
			round, before, newPrimary, len(w.acked), w.errors, w.maxGap(), strings.TrimSpace(res.stdout))

		// Exactly one writable instance, and every acknowledged commit everywhere.
		writable := 0
		for i := 0; i < 3; i++ {
			pod := fmt.Sprintf("sw-%d", i)
			addr, err := r.PodAddr(ctx, "default", pod, 3306)
			if err != nil {
				t.Fatal(err)
			}
			d := db(t, addr, root)
			var ro int
			if err := d.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
				t.Fatal(err)
			}
			if ro == 0 {
				writable++
				if pod != newPrimary {
					t.Errorf("round %d: %s is writable but %s is the primary", round, pod, newPrimary)
				}
			}
			cctx, ccancel := context.WithTimeout(ctx, time.Minute)
			eventually(t, cctx, pod+" holds every acknowledged write", func() error {
				var n, maxID int
				if err := d.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(MAX(id),0) FROM app.w WHERE id <= ?", w.acked[len(w.acked)-1]).Scan(&n, &maxID); err != nil {
					return err
				}
				if n < len(w.acked) {
					return fmt.Errorf("%d of %d acknowledged rows", n, len(w.acked))
				}
				return nil
			})
			ccancel()
			if _, err := d.ExecContext(ctx, "DELETE FROM app.w WHERE 1=0"); err != nil && pod == newPrimary {
				t.Errorf("new primary refuses writes: %v", err)
			}
		}
		if writable != 1 {
			t.Errorf("round %d: %d writable instances, want exactly 1", round, writable)
		}
		if _, err := db(t, mustPodAddr(t, ctx, newPrimary), root).ExecContext(ctx, "TRUNCATE app.w"); err != nil {
			t.Fatal(err)
		}
	}
}

func mustPodAddr(t *testing.T, ctx context.Context, pod string) string {
	t.Helper()
	a, err := r.PodAddr(ctx, "default", pod, 3306)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSecondActorIsRefused: while another actor holds the cluster's lease, a switchover exits
// with code 5 and names the holder, and changes nothing.
func TestSecondActorIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if res := mysqlctl(t, "create", "held", "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi", "--wait", "--timeout", "3m"); res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, "held")
	// The plan changes nothing and names the only possible target.
	plan := mysqlctl(t, "switchover", "held", "--dry-run", "-o", "json")
	if plan.code != 0 || !strings.Contains(plan.stdout, `"candidate": "held-1"`) {
		t.Errorf("switchover --dry-run: exit %d\n%s%s", plan.code, plan.stdout, plan.stderr)
	}
	c := getCluster(t, ctx, "held")
	if c.Status.CurrentPrimary != "held-0" || c.Status.Operation != nil {
		t.Fatalf("the dry run changed the cluster: %+v", c.Status)
	}
	_, lease, err := orchestrate.AcquireLease(ctx, kube(t), c, "someone-else", orchestrate.LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := mysqlctl(t, "switchover", "held")
	lease.Release(ctx)
	if res.code != 5 || !strings.Contains(res.stderr, "someone-else holds cluster held") {
		t.Errorf("second actor: exit %d, stderr %q", res.code, res.stderr)
	}
	after := getCluster(t, ctx, "held")
	if after.Status.CurrentPrimary != c.Status.CurrentPrimary || after.Status.Operation != nil {
		t.Errorf("refused switchover changed the cluster: %+v", after.Status)
	}

	// A switchover killed after fencing the primary is aborted: the rollback is recorded, the
	// old primary is writable again and back in the primary Service.
	killAt(t, ctx, orchestrate.StageWaitingForCandidate, "switchover", "held")
	if c := getCluster(t, ctx, "held"); c.Status.Operation == nil || c.Status.Operation.Stage != orchestrate.StageWaitingForCandidate {
		t.Fatalf("killed at WaitingForCandidate, recorded %+v", c.Status.Operation)
	}
	root := string(secret(t, ctx, "held").Data[specs.SecretRootPassword])
	if !readOnly(t, ctx, db(t, mustPodAddr(t, ctx, "held-0"), root)) {
		t.Fatal("held-0 is not fenced at WaitingForCandidate")
	}
	res = mysqlctl(t, "abort", "held", "--timeout", "1m")
	if res.code != 0 {
		t.Fatalf("abort: %d %s", res.code, res.stderr)
	}
	after = getCluster(t, ctx, "held")
	if after.Status.Operation != nil || after.Status.CurrentPrimary != "held-0" || after.Status.History[0].Result != "Aborted" {
		t.Errorf("after abort: op %+v primary %s history %+v", after.Status.Operation, after.Status.CurrentPrimary, after.Status.History[0])
	}
	if readOnly(t, ctx, db(t, mustPodAddr(t, ctx, "held-0"), root)) {
		t.Error("held-0 is still fenced after abort")
	}
	if p := must(r.Client.CoreV1().Pods("default").Get(ctx, "held-0", metav1.GetOptions{})); p.Labels[specs.LabelRole] != string(v1.RolePrimary) {
		t.Errorf("held-0 labelled %q after abort", p.Labels[specs.LabelRole])
	}
	// Nothing in progress is a plain answer, not a refusal, and records nothing.
	if res := mysqlctl(t, "abort", "held"); res.code != 0 || !strings.Contains(res.stdout, "nothing to abort") {
		t.Errorf("abort with nothing in progress: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if again := getCluster(t, ctx, "held"); len(again.Status.History) != len(after.Status.History) || again.Status.Operation != nil {
		t.Errorf("abort with nothing in progress changed the status: history %d → %d, op %+v", len(after.Status.History), len(again.Status.History), again.Status.Operation)
	}
}

// TestSwitchoverResumesAfterKillAtEveryStage SIGKILLs the CLI while it holds at each switchover
// stage; `resume` (after the dead actor's lease expires) finishes from the recorded stage, with
// exactly one writable instance and nothing lost.
func TestSwitchoverResumesAfterKillAtEveryStage(t *testing.T) {
	t.Parallel() // mostly waiting (Lease expiry, restarts): runs beside another such test, after the serial ones
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if res := mysqlctl(t, "create", "swk", "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi", "--wait", "--timeout", "3m"); res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, "swk")
	root := string(secret(t, ctx, "swk").Data[specs.SecretRootPassword])
	if _, err := db(t, mustPodAddr(t, ctx, "swk-0"), root).ExecContext(ctx, "CREATE TABLE mysql.swk_marker (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for i, stage := range orchestrate.SwitchoverStages {
		before := getCluster(t, ctx, "swk").Status.CurrentPrimary
		if _, err := db(t, mustPodAddr(t, ctx, before), root).ExecContext(ctx, "INSERT INTO mysql.swk_marker VALUES (?)", i); err != nil {
			t.Fatalf("stage %s: write on primary %s: %v", stage, before, err)
		}
		out := killAt(t, ctx, stage, "switchover", "swk")
		c := getCluster(t, ctx, "swk")
		if c.Status.Operation == nil || c.Status.Operation.Stage != stage {
			t.Fatalf("killed at %s, recorded %+v\n%s", stage, c.Status.Operation, out)
		}
		res := mysqlctl(t, "resume", "swk", "--timeout", "2m")
		if res.code != 0 {
			t.Fatalf("resume after kill at %s: %d\n%s", stage, res.code, res.stderr)
		}
		if !strings.Contains(res.stderr, "switchover "+stage) {
			t.Errorf("resume did not start at %s:\n%s", stage, res.stderr)
		}
		after := getCluster(t, ctx, "swk")
		if after.Status.Operation != nil || after.Status.CurrentPrimary == before || after.Status.History[0].TransactionsLost != 0 {
			t.Fatalf("after resume at %s: primary %s → %s, op %+v, history %+v", stage, before, after.Status.CurrentPrimary, after.Status.Operation, after.Status.History[0])
		}
		writable := 0
		for _, pod := range []string{"swk-0", "swk-1"} {
			d := db(t, mustPodAddr(t, ctx, pod), root)
			var ro, n int
			if err := d.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
				t.Fatal(err)
			}
			if ro == 0 {
				writable++
			}
			cctx, ccancel := context.WithTimeout(ctx, time.Minute)
			eventually(t, cctx, pod+" has every marker", func() error {
				if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.swk_marker").Scan(&n); err != nil {
					return err
				}
				if n != i+1 {
					return fmt.Errorf("%d markers, want %d", n, i+1)
				}
				return nil
			})
			ccancel()
		}
		if writable != 1 {
			t.Errorf("after resume at %s: %d writable instances", stage, writable)
		}
	}
}

// killAt runs the CLI with the pause failpoint at stage, SIGKILLs it there, and returns what it
// printed.
func killAt(t *testing.T, ctx context.Context, stage string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", r.Kubeconfig, "-n", "default")...)
	cmd.Env = cliEnv(t, "MYSQLCTL_FAILPOINT_PAUSE_AT_STAGE="+stage)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen []string
	sc := bufio.NewScanner(stderr)
	reached := false
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), "failpoint: paused at stage "+stage) {
			reached = true
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if !reached {
		t.Fatalf("the CLI ended before stage %s:\n%s", stage, strings.Join(seen, "\n"))
	}
	return strings.Join(seen, "\n")
}
