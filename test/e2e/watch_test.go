package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/supervisor"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/test/rig"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// watchProc is a `watch` process running in the background.
type watchProc struct {
	cmd          *exec.Cmd
	mu           *sync.Mutex
	stdout, errb *bytes.Buffer
	done         chan struct{}
	err          error
}

// startWatch runs `mysqlctl watch ARGS -o json` with the extra environment.
func startWatch(t *testing.T, env []string, args ...string) *watchProc {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"watch"}, args...), "-o", "json", "--kubeconfig", r.Kubeconfig, "-n", "default")...)
	cmd.Env = cliEnv(t, env...)
	w := &watchProc{cmd: cmd, mu: &sync.Mutex{}, stdout: &bytes.Buffer{}, errb: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = syncWriter{w.mu, w.stdout}, syncWriter{w.mu, w.errb}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
		if t.Failed() {
			t.Logf("watch output:\n%s\nstderr:\n%s", w.output(), w.stderr())
		}
	})
	return w
}

func (w *watchProc) output() string { w.mu.Lock(); defer w.mu.Unlock(); return w.stdout.String() }
func (w *watchProc) stderr() string { w.mu.Lock(); defer w.mu.Unlock(); return w.errb.String() }

// transitions parses the JSON lines printed so far.
func (w *watchProc) transitions(t *testing.T) []supervisor.Transition {
	var out []supervisor.Transition
	for _, l := range strings.Split(strings.TrimSpace(w.output()), "\n") {
		if l == "" {
			continue
		}
		var tr supervisor.Transition
		if err := json.Unmarshal([]byte(l), &tr); err != nil {
			t.Fatalf("watch -o json printed a line that is not JSON: %q", l)
		}
		out = append(out, tr)
	}
	return out
}

// actions counts the transitions with the action whose reason contains text.
func (w *watchProc) actions(t *testing.T, action, text string) int {
	n := 0
	for _, tr := range w.transitions(t) {
		if tr.Action == action && strings.Contains(tr.Reason, text) {
			n++
		}
	}
	return n
}

// supervising waits until watch reports that it supervises.
func (w *watchProc) supervising(t *testing.T, ctx context.Context) {
	t.Helper()
	eventually(t, ctx, "watch supervising", func() error {
		if w.actions(t, "watch", "supervising") == 0 {
			return errors.New("not yet")
		}
		return nil
	})
}

// stop sends SIGTERM and returns the exit code and how long the process took to end.
func (w *watchProc) stop(t *testing.T) (int, time.Duration) {
	start := time.Now()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not end within 30s of SIGTERM")
	}
	var ee *exec.ExitError
	if errors.As(w.err, &ee) {
		return ee.ExitCode(), time.Since(start)
	}
	return 0, time.Since(start)
}

// rejoinedOrQuarantined waits, with no operation in progress, until the pod replicates with both
// threads or is quarantined.
func rejoinedOrQuarantined(t *testing.T, ctx context.Context, root, cluster, pod string) {
	t.Helper()
	eventually(t, ctx, pod+" re-joined or quarantined", func() error {
		c := getCluster(t, ctx, cluster)
		if c.Status.Operation != nil {
			return errors.New("an operation is in progress")
		}
		for _, e := range c.Status.ErrantInstances {
			if e.Name == pod {
				return nil
			}
		}
		s, err := slaveStatus(ctx, db(t, mustPodAddr(t, ctx, pod), root))
		if err != nil || s == nil || s["Slave_IO_Running"] != "Yes" || s["Slave_SQL_Running"] != "Yes" {
			return fmt.Errorf("not replicating yet: %v", err)
		}
		return nil
	})
}

// pdbAllows waits until the cluster's PodDisruptionBudget allows want voluntary evictions.
func pdbAllows(t *testing.T, ctx context.Context, cluster string, want int) {
	t.Helper()
	eventually(t, ctx, fmt.Sprintf("the PodDisruptionBudget of %s at maxUnavailable %d", cluster, want), func() error {
		pdb, err := r.Client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := pdb.Spec.MaxUnavailable; got == nil || got.IntValue() != want {
			return fmt.Errorf("maxUnavailable %v", got)
		}
		return nil
	})
}

func writableCount(t *testing.T, ctx context.Context, root string, pods ...string) int {
	n := 0
	for _, p := range pods {
		var ro int
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err == nil && ro == 0 {
			n++
		}
	}
	return n
}

// TestWatchFailsOverByItself: with `watch` running and a writer on the primary Service, a
// replica's kill causes no failover; the primary's kill -9 is failed over with no command typed,
// ending with one writable instance that holds every acknowledged write; a second primary lost
// inside the cooldown is not failed over automatically (Degraded, with the command to run), and
// that command works; SIGTERM ends watch with exit 0 within seconds.
func TestWatchFailsOverByItself(t *testing.T) {
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "wa", 3)
	defer deleteCluster(t, "wa")
	pods := []string{"wa-0", "wa-1", "wa-2"}
	addr := freeAddr(t)
	w := startWatch(t, nil, "wa", "--metrics-addr", addr)
	wr, stopWriter := startWriter(ctx, "wa")
	defer stopWriter()
	w.supervising(t, ctx)
	primary := getCluster(t, ctx, "wa").Status.CurrentPrimary
	pdbAllows(t, ctx, "wa", 1) // Healthy, converged, nothing running
	// The metrics show a healthy cluster this process supervises, every instance answering
	// and both replicas replicating.
	cl := []string{"namespace", "default", "cluster", "wa"}
	eventually(t, ctx, "metrics of a healthy cluster", func() error {
		sc, err := scrapeMetrics(ctx, addr)
		if err != nil {
			return err
		}
		for _, want := range []struct {
			name   string
			labels []string
			value  float64
		}{
			{"mysqlctl_leader", nil, 1}, {"mysqlctl_cluster_supervised", cl, 1}, {"mysqlctl_cluster_available", cl, 1},
			{"mysqlctl_cluster_healthy", cl, 1}, {"mysqlctl_cluster_instances_up", cl, 3}, {"mysqlctl_semisync_source_active", cl, 1},
			{"mysqlctl_cluster_errant_instances", cl, 0}, {"mysqlctl_instance_primary", append(cl, "instance", primary), 1},
		} {
			if v, ok := sc.get(want.name, want.labels...); !ok || v != want.value {
				return fmt.Errorf("%s = %v (present %v), want %v", seriesKey(want.name, want.labels...), v, ok, want.value)
			}
		}
		for _, p := range pods {
			if p == primary {
				continue
			}
			for _, name := range []string{"mysqlctl_replication_io_running", "mysqlctl_replication_sql_running"} {
				if v, _ := sc.get(name, append(cl, "instance", p)...); v != 1 {
					return fmt.Errorf("%s of %s = %v", name, p, v)
				}
			}
		}
		return nil
	})
	if httpStatus(t, addr, "/healthz") != http.StatusOK || httpStatus(t, addr, "/readyz") != http.StatusOK {
		t.Error("/healthz or /readyz is not OK")
	}
	metricsSeen := startScraper(ctx, addr)
	defer metricsSeen.end()

	// A replica dies: not a reason to fail over.
	replica := "wa-1"
	if primary == replica {
		replica = "wa-2"
	}
	if err := r.Inject(rig.Kill, "default", replica); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if c := getCluster(t, ctx, "wa"); c.Status.CurrentPrimary != primary || w.actions(t, "failover", "") > 0 || c.Status.Operation != nil && c.Status.Operation.Type != orchestrate.OperationConverge {
		t.Fatalf("a replica's death moved the primary or started a failover: primary %s, operation %+v\n%s", c.Status.CurrentPrimary, c.Status.Operation, w.output())
	}
	// The restarted replica (replication is not started at boot) is re-joined by watch.
	eventually(t, ctx, "the restarted replica re-joined by watch", func() error {
		c := getCluster(t, ctx, "wa")
		if c.Status.Operation != nil {
			return errors.New("converging")
		}
		s, err := slaveStatus(ctx, db(t, mustPodAddr(t, ctx, replica), root))
		if err != nil || s == nil || s["Slave_IO_Running"] != "Yes" || s["Slave_SQL_Running"] != "Yes" {
			return fmt.Errorf("not replicating: %v", err)
		}
		return nil
	})
	if w.actions(t, "repair", "converging") == 0 {
		t.Error("watch did not report the repair of the restarted replica")
	}

	// The primary dies.
	killed := time.Now()
	if err := r.Inject(rig.Kill, "default", primary); err != nil {
		t.Fatal(err)
	}
	var next string
	eventually(t, ctx, "an automatic failover", func() error {
		c := getCluster(t, ctx, "wa")
		if c.Status.CurrentPrimary == primary || c.Status.Operation != nil {
			return fmt.Errorf("primary %s, operation %v", c.Status.CurrentPrimary, c.Status.Operation != nil)
		}
		next = c.Status.CurrentPrimary
		return nil
	})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	eventually(t, wctx, "a write acknowledged by the new primary", func() error {
		if _, ok := wr.firstAckAfter(killed); !ok {
			n, last := wr.failures()
			return fmt.Errorf("none yet (%d failed attempts, last: %s)", n, last)
		}
		return nil
	})
	ack, _ := wr.firstAckAfter(killed)
	t.Logf("kill -9 of %s at %s to the first acknowledged write on %s: %s", primary, killed.UTC().Format("15:04:05.000"), next, ack.Sub(killed).Round(time.Millisecond))
	// The scrapes saw the primary go and come back, and the failover counted once.
	eventually(t, ctx, "the failover in the metrics", func() error {
		sc, err := scrapeMetrics(ctx, addr)
		if err != nil {
			return err
		}
		if v, _ := sc.get("mysqlctl_failovers_total", append(cl, "result", "Succeeded")...); v != 1 {
			return fmt.Errorf("failovers_total{result=Succeeded} = %v", v)
		}
		if v, _ := sc.get("mysqlctl_failover_decision_seconds_count", cl...); v != 1 {
			return fmt.Errorf("failover_decision_seconds_count = %v", v)
		}
		if v, _ := sc.get("mysqlctl_operation_duration_seconds_count", append(cl, "type", "failover", "result", "Succeeded")...); v != 1 {
			return fmt.Errorf("operation_duration_seconds_count{failover,Succeeded} = %v", v)
		}
		if v, _ := sc.get("mysqlctl_instance_primary", append(cl, "instance", next)...); v != 1 {
			return fmt.Errorf("instance_primary of %s = %v", next, v)
		}
		return nil
	})
	if !metricsSeen.took(0, "mysqlctl_cluster_available", cl...) || !metricsSeen.took(1, "mysqlctl_cluster_ha_state", append(cl, "state", "FailoverInProgress")...) {
		t.Error("the scrapes never showed the primary unavailable and the failover in progress")
	}
	if os.Getenv("WATCH_DEBUG") != "" {
		t.Logf("%s\n%s", w.output(), w.stderr())
	}
	c := getCluster(t, ctx, "wa")
	if h := latestOf(c, orchestrate.OperationFailover); h == nil || h.Result != "Succeeded" {
		t.Fatalf("the latest failover in the history did not succeed: %+v", c.Status.History)
	}
	if c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy || c.Status.HA.LastFailover == nil {
		t.Errorf("status.ha after the failover: %+v", c.Status.HA)
	}
	if n := writableCount(t, ctx, root, pods...); n != 1 {
		t.Errorf("%d writable instances after the automatic failover, want 1", n)
	}
	stopWriter()
	holdsAcked(t, ctx, next, db(t, mustPodAddr(t, ctx, next), root), wr.acked)
	reasons, texts := eventReasons(t, ctx, "wa")
	requireEvents(t, reasons, texts, "HASuspected", "PrimaryConfirmedDown", "Promoted")

	// The old primary returned (restarted read-only); watch's repair judges it before anything
	// else fails: re-joined, or quarantined when it kept a transaction nobody acknowledged.
	rejoinedOrQuarantined(t, ctx, root, "wa", primary)

	// Inside the cooldown a second death is not failed over by itself. (A primary that restarts
	// is reopened in place, which is no failover: TestWatchReopensRestartedPrimaryInCooldown.
	// This one's pod is lost: nothing restarts it.)
	if err := r.Inject(rig.Lose, "default", next); err != nil {
		t.Fatal(err)
	}
	lostForced := false
	defer func() {
		if !lostForced {
			forceDelete(t, ctx, next)
		}
	}()
	eventually(t, ctx, "Degraded with the automatic failover withheld", func() error {
		c := getCluster(t, ctx, "wa")
		if c.Status.HA == nil || c.Status.HA.State != v1.HADegraded {
			return fmt.Errorf("ha %+v", c.Status.HA)
		}
		return nil
	})
	pdbAllows(t, ctx, "wa", 0) // Degraded: no voluntary eviction
	c = getCluster(t, ctx, "wa")
	if c.Status.CurrentPrimary != next || !strings.Contains(strings.Join(c.Status.HA.Evidence, " "), "mysqlctl failover wa") {
		t.Errorf("inside the cooldown: primary %s (want %s unchanged), evidence %q", c.Status.CurrentPrimary, next, c.Status.HA.Evidence)
	}
	if res := mysqlctl(t, "failover", "wa", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("the manual failover inside the cooldown: %d\n%s", res.code, res.stderr)
	}
	c = getCluster(t, ctx, "wa")
	if c.Status.CurrentPrimary == next || writableCount(t, ctx, root, pods...) != 1 {
		t.Errorf("after the manual failover: primary %s, %d writable", c.Status.CurrentPrimary, writableCount(t, ctx, root, pods...))
	}
	eventually(t, ctx, "watch sees the new primary Healthy", func() error {
		// Read with a context of its own: when the test's ends, the wait fails with the last
		// state seen, not with the read's "context deadline exceeded" (a loaded CI run).
		c := getCluster(t, context.Background(), "wa")
		if c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy {
			return fmt.Errorf("ha %+v phase %s", c.Status.HA, c.Status.Phase)
		}
		// Running, or Degraded only because a returned primary kept a transaction nobody
		// acknowledged and was quarantined: the withheld failover is no longer the reason.
		if d := metaCondition(c, v1.ConditionDegraded); c.Status.Phase != v1.PhaseRunning && (d == nil || d.Reason != "Quarantined") {
			return fmt.Errorf("phase %s, Degraded condition %+v", c.Status.Phase, d)
		}
		return nil
	})
	if n := w.actions(t, "failover", "the primary is dead"); n != 1 {
		t.Errorf("watch started %d automatic failovers, want 1", n)
	}
	forceDelete(t, ctx, next)
	lostForced = true
	// Each stage it entered is a line naming the cluster, stamped to the millisecond.
	stageLine := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z default/wa failover-\S+ failover (Confirming|Promoting)$`)
	if n := len(stageLine.FindAllString(w.stderr(), -1)); n < 2 {
		t.Errorf("watch's stage lines for the failover of default/wa: %d of Confirming and Promoting, want both; stderr:\n%s", n, w.stderr())
	}
	code, took := w.stop(t)
	if code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM: exit %d after %s; want 0 within 5s", code, took)
	}
	metricsSeen.end()
	noPasswords(t, secret(t, ctx, "wa"), w.output(), w.stderr(), metricsSeen.all())
}

// TestWatchKilledMidFailoverIsContinued: a watch fails over by itself and is SIGKILLed at a stage
// of the failover; a new watch takes the operation over once the dead one's leases expire and
// finishes it, with one writable instance. One cluster (cooldown 0) goes through every stage of
// a failover.
func TestWatchKilledMidFailoverIsContinued(t *testing.T) {
	t.Parallel() // mostly waiting (Lease expiry at every stage): runs beside other such tests, after the serial ones
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "wk", 3)
	defer deleteCluster(t, "wk")
	pods := []string{"wk-0", "wk-1", "wk-2"}
	updateSpec(t, ctx, "wk", func(s *v1.MysqlClusterSpec) {
		s.Failover.Cooldown = &metav1.Duration{}
		// While its applier is held (WaitingForRelayLog) a candidate's lag grows: the default
		// bound (30s) could reject it on a slow machine.
		s.Failover.MaxCandidateLag = &metav1.Duration{Duration: 5 * time.Minute}
	})
	if res := mysqlctl(t, "reconcile", "wk"); res.code != 0 { // the status describes the new spec
		t.Fatalf("reconcile: %d\n%s", res.code, res.stderr)
	}
	for _, stage := range []string{orchestrate.StageConfirming, orchestrate.StageFencing, orchestrate.StageElecting, orchestrate.StageWaitingForRelayLog,
		orchestrate.StagePromoting, orchestrate.StageMovingPrimary, orchestrate.StageRepointing, orchestrate.StageVerifying} {
		t.Run(stage, func(t *testing.T) { watchKilledAt(t, ctx, root, pods, stage) })
		if t.Failed() {
			return
		}
	}
	t.Run("ConvergeLeftByAKilledActor", func(t *testing.T) { watchSupersedesLeftConverge(t, ctx, root, pods) })
	if t.Failed() {
		return
	}
	t.Run("LiveConvergeGivesWay", func(t *testing.T) { watchOutlastsLiveConverge(t, ctx, root, pods) })
	if t.Failed() {
		return
	}
	t.Run("FenceBlockedWithoutCooldown", func(t *testing.T) { watchRetryFloor(t, ctx, root, pods) })
}

// watchOutlastsLiveConverge: a converge run elsewhere (a reconcile in a CI job) holds the
// cluster's Lease, renews it and waits (for a pod it reads as not ready) when the primary dies.
// The supervisor cannot take the Lease: it must keep its record of the dead primary fresh and
// mark its failover as waiting for the Lease (FailoverRequired, waitingForLease, rewritten at
// every check, never falling back to Suspected between refused attempts), reported once. The
// converge, seeing that, gives way: it ends with ErrHeld, its stage kept, and releases the
// Lease; the failover then supersedes it.
func watchOutlastsLiveConverge(t *testing.T, ctx context.Context, root string, pods []string) {
	c := healthyWK(t, ctx)
	primary := c.Status.CurrentPrimary
	notReady := aReplica(pods, primary)
	w := startWatch(t, nil, "wk")
	w.supervising(t, ctx)
	// The converge's client reads notReady as not ready: the converge waits for it.
	base, err := client.NewWithWatch(r.Config, client.Options{Scheme: clientScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	k := interceptor.NewClient(base, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if pl, ok := list.(*corev1.PodList); ok {
			for i := range pl.Items {
				if pl.Items[i].Name == notReady {
					pl.Items[i].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
				}
			}
		}
		return nil
	}})
	lctx, lease, err := orchestrate.AcquireLease(ctx, k, c, "reconcile-elsewhere", orchestrate.LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.WithoutCancel(ctx))
	opID := fmt.Sprintf("converge-%d", time.Now().Unix())
	if err := orchestrate.UpdateStatus(ctx, k, c, func(s *v1.MysqlClusterStatus) error {
		s.Operation = &v1.OperationStatus{ID: opID, Type: orchestrate.OperationConverge,
			Stage: orchestrate.StageWaitingForPods, Holder: lease.Holder, Epoch: lease.Epoch, StartedAt: metav1.Now()}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.Cut(t, "default", primary)
	// The record as a converge reads it, on this clock.
	var seen failover.RecordLiveness
	var lastRecord string
	var lastChange time.Time
	givesWay := func() (bool, string) {
		c := getCluster(t, ctx, "wk")
		ha := c.Status.HA
		if ha == nil || ha.LastFailedCheck == nil {
			return false, fmt.Sprintf("ha %+v", ha)
		}
		if rec := fmt.Sprint(ha.FailedChecks, ha.LastFailedCheck.Time); rec != lastRecord {
			lastRecord, lastChange = rec, time.Now()
		}
		seen.See(ha.FailedChecks, ha.LastFailedCheck.Time, time.Now())
		ok, _ := failover.ConvergeGivesWay(string(ha.State), ha.WaitingForLease != nil, &seen, failover.Policy{Interval: time.Second, Auto: true}, time.Now())
		return ok, fmt.Sprintf("%s, waiting for the Lease since %v, %d failed checks", ha.State, ha.WaitingForLease, ha.FailedChecks)
	}
	eventually(t, ctx, "the failover waiting for the Lease held by the converge", func() error {
		if ok, why := givesWay(); !ok {
			return errors.New(why)
		}
		return nil
	})
	// Held for a while: refused attempts must neither reset nor stop rewriting the record (a
	// check at least every few seconds: an interval and a refusal).
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if ok, why := givesWay(); !ok {
			t.Fatalf("while the converge held the cluster the record stopped saying the failover waits for it: %s", why)
		}
		if gap := time.Since(lastChange); gap > 5*time.Second {
			t.Fatalf("while the converge held the cluster the record was not rewritten for %s", gap.Round(time.Millisecond))
		}
		if lctx.Err() != nil {
			t.Fatalf("the converge's Lease was lost while it renewed: %v", lease.LostErr())
		}
	}
	if n := w.actions(t, "failover", "not started"); n != 1 {
		t.Errorf("the refused attempts were reported %d times, want once:\n%s", n, w.output())
	}
	// The converge runs (its holder went on with it): it must give way.
	runner := &orchestrate.Runner{Kube: k, Holder: lease.Holder, Epoch: lease.Epoch, Lease: lease,
		Connect: func(_ context.Context, p *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
			return topology.Connect(topology.Target{Name: p.Name, Host: p.Status.PodIP, Port: 3306}, topology.ConnectOptions{Dialer: topology.DirectDialer{Timeout: 2 * time.Second}, Credentials: creds})
		}}
	done := make(chan error, 1)
	go func() { done <- runner.Converge(lctx, client.ObjectKey{Namespace: "default", Name: "wk"}) }()
	select {
	case err := <-done:
		if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "gave way to a failover") {
			t.Errorf("the converge ended with %v, want ErrHeld: it gave way", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the converge kept the cluster while the failover waited for it")
	}
	lease.Release(ctx)
	eventually(t, ctx, "a failover superseding the converge", func() error {
		c := getCluster(t, ctx, "wk")
		if c.Status.CurrentPrimary == primary || c.Status.Operation != nil {
			return fmt.Errorf("primary %s, operation %+v", c.Status.CurrentPrimary, c.Status.Operation)
		}
		return nil
	})
	var rec *v1.OperationRecord
	after := getCluster(t, ctx, "wk")
	for i := range after.Status.History {
		if after.Status.History[i].ID == opID {
			rec = &after.Status.History[i]
		}
	}
	if rec == nil || rec.Result != "Superseded" {
		t.Errorf("the converge %s is not recorded as superseded: %+v", opID, rec)
	}
	if ha := after.Status.HA; ha != nil && ha.WaitingForLease != nil {
		t.Errorf("the wait for the Lease is still recorded after the failover: %+v", ha)
	}
	cutPrimaryBack(t, ctx, w, root, primary, pods)
}

// latestOf is the latest record of an operation of type typ in the history, nil if none: a
// watch's repairer may record a converge after it.
func latestOf(c *v1.MysqlCluster, typ string) *v1.OperationRecord {
	for i := range c.Status.History {
		if c.Status.History[i].Type == typ {
			return &c.Status.History[i]
		}
	}
	return nil
}

// healthyWK waits until wk is Healthy, with no operation and no errant instance (no writes
// ran, so every old primary re-joined), and returns it.
func healthyWK(t *testing.T, ctx context.Context) *v1.MysqlCluster {
	t.Helper()
	eventually(t, ctx, "a Healthy cluster with two replicas", func() error {
		c := getCluster(t, ctx, "wk")
		if c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy || c.Status.Operation != nil || len(c.Status.ErrantInstances) > 0 {
			return fmt.Errorf("ha %+v, operation %+v, errant %+v", c.Status.HA, c.Status.Operation, c.Status.ErrantInstances)
		}
		return nil
	})
	return getCluster(t, ctx, "wk")
}

// watchSupersedesLeftConverge: a converge whose actor was killed stays recorded. With the
// primary answering, the supervisor continues it. Left again, and the primary then cut off: a
// converge needs the primary, so continuing it cannot succeed; the supervisor must keep
// checking the primary and fail over, superseding the converge, instead of resuming the
// converge forever (a dead end with a dead primary).
func watchSupersedesLeftConverge(t *testing.T, ctx context.Context, root string, pods []string) {
	c := healthyWK(t, ctx)
	primary := c.Status.CurrentPrimary
	stopped := aReplica(pods, primary)
	leaveConverge := func() {
		t.Helper()
		// A replica that does not replicate: reconcile converges it, and is killed in the middle.
		if _, err := db(t, mustPodAddr(t, ctx, stopped), root).ExecContext(ctx, "STOP SLAVE"); err != nil {
			t.Fatal(err)
		}
		killAt(t, ctx, orchestrate.StageJoiningReplicas, "reconcile", "wk")
		if op := getCluster(t, ctx, "wk").Status.Operation; op == nil || op.Type != orchestrate.OperationConverge {
			t.Fatalf("no converge left recorded by the killed reconcile: %+v", op)
		}
	}
	leaveConverge()
	w := startWatch(t, nil, "wk")
	eventually(t, ctx, "the left converge continued by the watch", func() error {
		if op := getCluster(t, ctx, "wk").Status.Operation; op != nil {
			return fmt.Errorf("operation %s at %s", op.Type, op.Stage)
		}
		s, err := slaveStatus(ctx, db(t, mustPodAddr(t, ctx, stopped), root))
		if err != nil || s == nil || s["Slave_IO_Running"] != "Yes" {
			return fmt.Errorf("%s not replicating: %v", stopped, err)
		}
		return nil
	})
	if h := getCluster(t, ctx, "wk").Status.History; len(h) == 0 || h[0].Type != orchestrate.OperationConverge || h[0].Result != "Succeeded" {
		t.Errorf("history after the continued converge: %+v", h)
	}
	if w.actions(t, "resume", "continuing the converge") == 0 {
		t.Errorf("the watch did not report continuing the converge:\n%s", w.output())
	}
	if code, _ := w.stop(t); code != 0 {
		t.Errorf("watch: exit %d", code)
	}

	leaveConverge()
	r.Cut(t, "default", primary)
	w = startWatch(t, nil, "wk")
	eventually(t, ctx, "a failover superseding the converge", func() error {
		c := getCluster(t, ctx, "wk")
		if c.Status.CurrentPrimary == primary || c.Status.Operation != nil {
			return fmt.Errorf("primary %s, operation %+v", c.Status.CurrentPrimary, c.Status.Operation)
		}
		return nil
	})
	superseded := false
	for _, h := range getCluster(t, ctx, "wk").Status.History {
		superseded = superseded || h.Type == orchestrate.OperationConverge && h.Result == "Superseded"
	}
	if !superseded {
		t.Errorf("the converge is not recorded as superseded: %+v", getCluster(t, ctx, "wk").Status.History)
	}
	cutPrimaryBack(t, ctx, w, root, primary, pods)
}

// watchRetryFloor: with failover.cooldown 0, an automatic failover of a primary cut off the
// network whose fence is Blocked (a replica frozen: it could still acknowledge the old primary)
// fails with nothing promoted, and the supervisor does not try again every interval: the next
// attempt waits out the backoff floor, and succeeds once the replica answers again.
func watchRetryFloor(t *testing.T, ctx context.Context, root string, pods []string) {
	w := startWatch(t, nil, "wk")
	w.supervising(t, ctx)
	c := healthyWK(t, ctx)
	primary, frozen := c.Status.CurrentPrimary, ""
	for _, in := range c.Status.Instances {
		if in.Name != primary && in.Role == v1.RoleReplica {
			frozen = in.Name
		}
	}
	if frozen == "" {
		t.Fatalf("no replica to freeze: %+v", c.Status.Instances)
	}
	r.Freeze(t, "default", frozen)
	r.Cut(t, "default", primary)
	eventually(t, ctx, "the automatic failover failing on the Blocked fence", func() error {
		h := getCluster(t, ctx, "wk").Status.History
		if len(h) == 0 || h[0].Type != orchestrate.OperationFailover || h[0].Result != "Failed" {
			return errors.New("not yet")
		}
		if !strings.Contains(h[0].Message, "fence Blocked") {
			return fmt.Errorf("failed for another reason: %s", h[0].Message)
		}
		return nil
	})
	// Ten detection intervals: without the floor, cooldown 0 retries every interval or so.
	time.Sleep(10 * time.Second)
	if n := w.actions(t, "failover", "the primary is dead"); n != 1 {
		t.Fatalf("%d automatic failovers started within 10 s of a Blocked one with cooldown 0, want 1:\n%s", n, w.output())
	}
	if c := getCluster(t, ctx, "wk"); c.Status.CurrentPrimary != primary {
		t.Fatalf("a Blocked fence promoted %s", c.Status.CurrentPrimary)
	}
	r.Thaw(t, "default", frozen)
	eventually(t, ctx, "the retry after the backoff promotes a replica", func() error {
		c := getCluster(t, ctx, "wk")
		if c.Status.CurrentPrimary == primary || c.Status.Operation != nil {
			return fmt.Errorf("primary %s, operation %v", c.Status.CurrentPrimary, c.Status.Operation != nil)
		}
		return nil
	})
	var starts []time.Time
	for _, tr := range w.transitions(t) {
		if tr.Action == "failover" && strings.Contains(tr.Reason, "the primary is dead") {
			starts = append(starts, tr.Time)
		}
	}
	if len(starts) != 2 || starts[1].Sub(starts[0]) < 30*time.Second {
		t.Errorf("automatic failovers started at %v: want two, at least the 30 s floor apart", starts)
	}
	cutPrimaryBack(t, ctx, w, root, primary, pods)
}

// cutPrimaryBack restores the network of the cut old primary of wk: it is fenced, then re-joined
// or quarantined, leaving one writable instance; then it stops w.
func cutPrimaryBack(t *testing.T, ctx context.Context, w *watchProc, root, primary string, pods []string) {
	t.Helper()
	r.Restore(t, "default", primary)
	rejoinedOrQuarantined(t, ctx, root, "wk", primary)
	if n := writableCount(t, ctx, root, pods...); n != 1 {
		t.Errorf("%d writable instances, want 1", n)
	}
	if code, _ := w.stop(t); code != 0 {
		t.Errorf("watch: exit %d", code)
	}
}

func watchKilledAt(t *testing.T, ctx context.Context, root string, pods []string, stage string) {
	// At Promoting the watches run with --leader-elect: the second, started beside the first,
	// stands by until the first is killed, then leads and finishes the failover.
	elect := stage == orchestrate.StagePromoting
	args := []string{"wk"}
	if elect {
		args = append(args, "--leader-elect")
	}
	first := startWatch(t, []string{"MYSQLCTL_FAILPOINT_PAUSE_AT_STAGE=" + stage}, args...)
	first.supervising(t, ctx)
	var second *watchProc
	addr := freeAddr(t)
	if elect {
		second = startWatch(t, nil, "wk", "--leader-elect", "--metrics-addr", addr)
		eventually(t, ctx, "the second watch standing by for the leader", func() error {
			if second.actions(t, "standby", "the leader is") == 0 {
				return errors.New("not yet")
			}
			if sc, err := scrapeMetrics(ctx, addr); err != nil {
				return err
			} else if v, ok := sc.get("mysqlctl_leader"); !ok || v != 0 {
				return fmt.Errorf("mysqlctl_leader of the standby = %v", v)
			}
			return nil
		})
	}
	primary := getCluster(t, ctx, "wk").Status.CurrentPrimary
	release := func() {}
	if stage == orchestrate.StageWaitingForRelayLog {
		// Only a candidate with a relay log left to apply waits at this stage: the replicas
		// receive (and acknowledge) one more write but do not apply it.
		replicas := replicasOf(pods, primary)
		release = holdAppliers(t, ctx, root, replicas...)
		if _, err := db(t, mustPodAddr(t, ctx, primary), root).ExecContext(ctx, "INSERT INTO app.w SELECT COALESCE(MAX(id), 0) + 1 FROM app.w"); err != nil {
			t.Fatalf("write on %s: %v", primary, err)
		}
		lagsBehind(t, ctx, root, replicas...)
	}
	if err := r.Inject(rig.Kill, "default", primary); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the automatic failover held at "+stage, func() error {
		if !strings.Contains(first.stderr(), "failpoint: paused at stage "+stage) {
			return errors.New("not yet")
		}
		return nil
	})
	killed := time.Now()
	_ = first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	release()
	if c := getCluster(t, ctx, "wk"); c.Status.Operation == nil || c.Status.Operation.Stage != stage {
		t.Fatalf("no failover recorded at %s after the watch was killed: %+v", stage, c.Status.Operation)
	}
	pdbAllows(t, ctx, "wk", 0) // an operation runs: no voluntary eviction
	if !elect {
		second = startWatch(t, nil, "wk")
	}
	eventually(t, ctx, "the second watch finishes the failover", func() error {
		c := getCluster(t, ctx, "wk")
		if c.Status.Operation != nil || c.Status.CurrentPrimary == primary {
			return fmt.Errorf("operation %v, primary %s", c.Status.Operation != nil, c.Status.CurrentPrimary)
		}
		return nil
	})
	if second.actions(t, "resume", "continuing the failover") != 1 {
		t.Errorf("the second watch did not report resuming the failover:\n%s", second.output())
	}
	if elect {
		for _, tr := range second.transitions(t) {
			if tr.Action == "resume" && strings.Contains(tr.Reason, "continuing the failover") {
				t.Logf("leader SIGKILLed at %s; the standby continued the failover %s later", killed.UTC().Format("15:04:05.000"), tr.Time.Sub(killed).Round(100*time.Millisecond))
			}
		}
		if second.actions(t, "leader", "leading") != 1 {
			t.Errorf("the second watch did not report leading once:\n%s", second.output())
		}
		if sc, err := scrapeMetrics(ctx, addr); err != nil {
			t.Error(err)
		} else if v, _ := sc.get("mysqlctl_leader"); v != 1 {
			t.Errorf("mysqlctl_leader of the new leader = %v", v)
		}
	}
	c := getCluster(t, ctx, "wk")
	if h := latestOf(c, orchestrate.OperationFailover); h == nil || h.Result != "Succeeded" {
		t.Fatalf("history: %+v", c.Status.History)
	}
	if n := writableCount(t, ctx, root, pods...); n != 1 {
		t.Errorf("%d writable instances, want 1", n)
	}
	if second.actions(t, "failover", "the primary is dead") != 0 {
		t.Errorf("the second watch started another failover:\n%s", second.output())
	}
	// Once the old primary is judged (re-joined, or quarantined: then the roles are not
	// converged and the budget stays closed) and the cluster is Healthy, it opens again.
	rejoinedOrQuarantined(t, ctx, root, "wk", primary)
	if c := getCluster(t, ctx, "wk"); len(c.Status.ErrantInstances) == 0 {
		pdbAllows(t, ctx, "wk", 1)
	}
	if code, _ := second.stop(t); code != 0 {
		t.Errorf("second watch: exit %d", code)
	}
}

// TestWatchSilentPrimary: a frozen primary, and one cut off the network, answer nothing and close
// nothing. With watch running they are failed over once the replicas have lost them too; when the
// old primary comes back (thawed, network restored) watch fences it within a round and re-joins
// or quarantines it, with no command typed. One writable instance throughout, and every
// acknowledged write on the new primary.
func TestWatchSilentPrimary(t *testing.T) {
	for _, fault := range []string{"freeze", "cut"} {
		t.Run(fault, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			name := "ws" + fault[:1]
			pods := []string{name + "-0", name + "-1", name + "-2"}
			root := appCluster(t, ctx, name, 3)
			defer deleteCluster(t, name)
			w := startWatch(t, nil, name)
			wr, stopWriter := startWriter(ctx, name)
			defer stopWriter()
			w.supervising(t, ctx)
			time.Sleep(time.Second)
			primary := getCluster(t, ctx, name).Status.CurrentPrimary
			faulted := time.Now()
			if fault == "freeze" {
				r.Freeze(t, "default", primary)
			} else {
				r.Cut(t, "default", primary)
			}
			var next string
			eventually(t, ctx, "an automatic failover", func() error {
				c := getCluster(t, ctx, name)
				if c.Status.CurrentPrimary == primary || c.Status.Operation != nil {
					return fmt.Errorf("primary %s, operation %v", c.Status.CurrentPrimary, c.Status.Operation != nil)
				}
				next = c.Status.CurrentPrimary
				return nil
			})
			eventually(t, ctx, "a write acknowledged by the new primary", func() error {
				if _, ok := wr.firstAckAfter(faulted); !ok {
					return errors.New("none yet")
				}
				return nil
			})
			time.Sleep(500 * time.Millisecond)
			t.Logf("%s of %s: the longest gap between acknowledged writes %s (new primary %s)", fault, primary, wr.maxGap().Round(time.Millisecond), next)
			if os.Getenv("WATCH_DEBUG") != "" {
				t.Logf("%s\n%s", w.output(), w.stderr())
			}
			if fault == "freeze" {
				r.Thaw(t, "default", primary)
			} else {
				r.Restore(t, "default", primary)
			}
			d0 := db(t, mustPodAddr(t, ctx, primary), root)
			eventually(t, ctx, "the returning old primary fenced by watch", func() error {
				var ro int
				if err := d0.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
					return err
				}
				if ro != 1 {
					return errors.New("still writable")
				}
				return nil
			})
			rejoinedOrQuarantined(t, ctx, root, name, primary)
			stopWriter()
			if n := writableCount(t, ctx, root, pods...); n != 1 {
				t.Errorf("%d writable instances, want 1", n)
			}
			holdsAcked(t, ctx, next, db(t, mustPodAddr(t, ctx, next), root), wr.acked)
			if code, _ := w.stop(t); code != 0 {
				t.Errorf("watch exit %d", code)
			}
		})
	}
}

// TestWatchCutFromPrimaryOnly: the path between watch and the primary is cut while the replicas
// (and the application) still reach it. Watch cannot check the primary, but the replicas still
// receive from it: unreachable is not dead. No failover, the writes go on, and once the path
// heals the primary is Healthy again.
func TestWatchCutFromPrimaryOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	_, w := watchedCluster(t, ctx, "wp", 3)
	defer deleteCluster(t, "wp")
	wr, stopWriter := startWriter(ctx, "wp")
	defer stopWriter()
	primary := getCluster(t, ctx, "wp").Status.CurrentPrimary
	cut := time.Now()
	restore := r.CutFrom(t, w.cmd.Process.Pid, "default", primary)
	eventually(t, ctx, "watch suspects the primary it cannot reach", func() error {
		if c := getCluster(t, ctx, "wp"); c.Status.HA == nil || c.Status.HA.State != v1.HASuspected {
			return fmt.Errorf("ha %+v", c.Status.HA)
		}
		return nil
	})
	// Many thresholds' worth of failed checks, and past the replicas' net timeout.
	time.Sleep(10 * time.Second)
	c := getCluster(t, ctx, "wp")
	if c.Status.CurrentPrimary != primary || c.Status.Operation != nil || w.actions(t, "failover", "") > 0 {
		t.Fatalf("a supervisor cut from a live primary failed it over: primary %s, operation %+v\n%s", c.Status.CurrentPrimary, c.Status.Operation, w.output())
	}
	if ev := strings.Join(c.Status.HA.Evidence, " "); !strings.Contains(ev, "still receive") {
		t.Errorf("the Suspected state does not say that the replicas still receive: %q", ev)
	}
	if a, ok := wr.firstAckAfter(cut.Add(5 * time.Second)); !ok {
		t.Errorf("the application's writes stopped while only the supervisor was cut off")
	} else {
		t.Logf("writes acknowledged throughout (one at %s after the cut)", a.Sub(cut).Round(time.Millisecond))
	}
	restore()
	eventually(t, ctx, "Healthy once the path heals", func() error {
		if c := getCluster(t, ctx, "wp"); c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy {
			return fmt.Errorf("ha %+v", c.Status.HA)
		}
		return nil
	})
	if code, _ := w.stop(t); code != 0 {
		t.Errorf("watch exit %d", code)
	}
}

// TestWatchBriefStallsNoFailover: checks confirming a silence follow each other at once when
// every replica has lost the primary too (their net timeout is a second), so the failure
// threshold is reached sooner; a primary silent for less than the policy's minimum silence
// (1.5 s at the defaults: a long fsync, a paused VM, a CPU-starved node) must still never be
// failed over. Six 1.2 s freezes under writes, long enough for the replicas to corroborate, a
// few seconds apart: the supervisor suspects the primary, fails nothing over, and the writes go
// on on the same primary. (Without the minimum silence, three fast checks can end 1.25 s apart.)
func TestWatchBriefStallsNoFailover(t *testing.T) {
	// As from a workstation: the checks, the sentinel's pulses and a release of lost
	// acknowledgements all go through the API server's port-forward.
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, w := watchedCluster(t, ctx, "ws", 3)
	defer deleteCluster(t, "ws")
	wr, stopWriter := startWriter(ctx, "ws")
	defer stopWriter()
	primary := getCluster(t, ctx, "ws").Status.CurrentPrimary
	primaryAddr := mustPodAddr(t, ctx, primary)
	var thawed time.Time
	for range 6 {
		r.Freeze(t, "default", primary)
		time.Sleep(1200 * time.Millisecond)
		r.Thaw(t, "default", primary)
		thawed = time.Now()
		time.Sleep(3 * time.Second)
	}
	t.Logf("after the stalls: %s", semiSyncView(ctx, root, primary, "ws-0", "ws-1", "ws-2"))
	c := getCluster(t, ctx, "ws")
	if c.Status.CurrentPrimary != primary || w.actions(t, "failover", "") > 0 {
		t.Fatalf("a primary that stalled for 1.2 s was failed over: primary %s (was %s)\n%s", c.Status.CurrentPrimary, primary, w.output())
	}
	suspected := 0
	for _, tr := range w.transitions(t) {
		if tr.To == string(v1.HASuspected) {
			suspected++
		}
	}
	if suspected == 0 {
		t.Fatalf("no stall was noticed (no Suspected transition), so nothing was tested:\n%s", w.output())
	}
	// The writes go on on the same primary. Not at once: a frozen pod fails its readiness
	// probe, so the primary Service may select nothing until the kubelet probes it again; and
	// a freeze can lose the acknowledgement of a commit the replicas received (they reconnect
	// after their net timeout), which leaves it waiting with its row lock, and the writer
	// retrying that row behind it, until watch releases it (measured without the release: 4
	// of 8 loaded runs stalled past 30 s). Bounded, and the writer's failed attempts say why
	// when it is not met.
	actx, acancel := context.WithTimeout(ctx, 15*time.Second)
	defer acancel()
	eventually(t, actx, "a write acknowledged after the last stall", func() error {
		a, ok := wr.firstAckAfter(thawed)
		if !ok {
			tried := wr.failedAttempts()
			return fmt.Errorf("none yet; the writer's last failed attempts: %q; %s", tried[max(0, len(tried)-5):], semiSyncView(ctx, root, primary, "ws-0", "ws-1", "ws-2"))
		}
		if other := wr.firstAckElsewhere(thawed, primaryAddr); !other.IsZero() {
			t.Fatalf("a write after the stalls was acknowledged by a server other than the primary %s", primary)
		}
		t.Logf("first write acknowledged %s after the last thaw", a.Sub(thawed).Round(time.Millisecond))
		return nil
	})
	for _, tr := range w.transitions(t) {
		if tr.Action == "release" {
			t.Logf("watch: %s", tr.Reason)
		}
	}
	t.Logf("6 stalls of 1.2 s: suspected %d times, no failover; %d release(s) of lost acknowledgements", suspected, w.actions(t, "release", "released"))
	eventually(t, ctx, "Healthy after the stalls", func() error {
		if c := getCluster(t, ctx, "ws"); c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy {
			return fmt.Errorf("ha %+v", c.Status.HA)
		}
		return nil
	})
	if code, _ := w.stop(t); code != 0 {
		t.Errorf("watch exit %d", code)
	}
}

// TestWatchCarriesOutHandedRequests: while a watch supervises a cluster, switchover and failover
// typed in another terminal are handed to it (no exit 5), followed, and exit with its outcome; a
// second watch stands by and takes over at once when the first gets SIGTERM; a frozen watch's
// request is withdrawn once its Lease stops changing, and the command then runs itself.
func TestWatchCarriesOutHandedRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "wq", 3)
	defer deleteCluster(t, "wq")
	pods := []string{"wq-0", "wq-1", "wq-2"}
	first := startWatch(t, nil, "wq")
	first.supervising(t, ctx)
	second := startWatch(t, nil, "wq")
	eventually(t, ctx, "the second watch standing by", func() error {
		if second.actions(t, "standby", "holds cluster wq") == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	wr, stopWriter := startWriter(ctx, "wq")
	defer stopWriter()
	primary := getCluster(t, ctx, "wq").Status.CurrentPrimary
	target := pods[0]
	if target == primary {
		target = pods[1]
	}

	res := mysqlctl(t, "switchover", "wq", "--to", target)
	if res.code != 0 || !strings.Contains(res.stderr, "handed to it") {
		t.Fatalf("switchover while watch supervises: exit %d\n%s", res.code, res.stderr)
	}
	c := getCluster(t, ctx, "wq")
	if c.Status.CurrentPrimary != target || c.Status.Request == nil || c.Status.Request.State != v1.RequestSucceeded || c.Status.Request.Type != orchestrate.RequestSwitchover {
		t.Fatalf("after the handed switchover: primary %s (want %s), request %+v", c.Status.CurrentPrimary, target, c.Status.Request)
	}
	if _, ok := c.Annotations[v1.AnnotationRequest]; ok {
		t.Errorf("the request annotation stayed after its outcome was recorded: %q", c.Annotations[v1.AnnotationRequest])
	}
	if first.actions(t, "request", "succeeded") != 1 || second.actions(t, "request", "carrying out") != 0 {
		t.Errorf("the supervising watch did not carry the request out alone:\nfirst:\n%s\nsecond:\n%s", first.output(), second.output())
	}

	// A request the watch refuses exits with the refusal's code: a failover of a live primary.
	res = mysqlctl(t, "failover", "wq")
	if c := getCluster(t, ctx, "wq"); res.code != 4 || !strings.Contains(res.stderr, "handed to it") || c.Status.Request == nil || c.Status.Request.Outcome != orchestrate.OutcomeUnsafe || c.Status.CurrentPrimary != target {
		t.Fatalf("failover of a live primary through watch: exit %d (want 4), request %+v, primary %s\n%s", res.code, c.Status.Request, c.Status.CurrentPrimary, res.stderr)
	}

	// SIGTERM: the standing-by watch takes over at once and carries out the next request.
	if code, _ := first.stop(t); code != 0 {
		t.Fatalf("first watch exit %d", code)
	}
	second.supervising(t, ctx)
	res = mysqlctl(t, "switchover", "wq", "--to", primary)
	if res.code != 0 || !strings.Contains(res.stderr, "handed to it") || second.actions(t, "request", "succeeded") != 1 {
		t.Fatalf("switchover handed to the second watch: exit %d\n%s\n%s", res.code, res.stderr, second.output())
	}

	// --wait=false returns once the watch has taken the request (with the outcome, when the
	// watch was done by the time the request was read back); the watch finishes it.
	res = mysqlctl(t, "switchover", "wq", "--to", target, "--wait=false")
	if res.code != 0 || !strings.Contains(res.stderr, "taken by ") {
		t.Fatalf("switchover --wait=false: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	eventually(t, ctx, "the watch finishes the switchover it took", func() error {
		if c := getCluster(t, ctx, "wq"); c.Status.CurrentPrimary != target || c.Status.Request == nil || c.Status.Request.State != v1.RequestSucceeded {
			return fmt.Errorf("primary %s, request %+v", c.Status.CurrentPrimary, c.Status.Request)
		}
		return nil
	})

	// A frozen watch takes nothing: once its Lease has not changed for a lease duration the
	// request is withdrawn and the command runs itself.
	if err := second.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	target, primary = primary, target
	res = mysqlctl(t, "switchover", "wq", "--to", target)
	_ = second.cmd.Process.Signal(syscall.SIGCONT)
	if res.code != 0 || !strings.Contains(res.stderr, "withdrawn, running it here") {
		t.Fatalf("switchover with a frozen watch: exit %d\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "wq"); c.Status.CurrentPrimary != target {
		t.Fatalf("primary %s after the switchover run here, want %s", c.Status.CurrentPrimary, target)
	}
	time.Sleep(3 * time.Second) // the thawed watch finds nothing left to do
	if n := second.actions(t, "request", "carrying out"); n != 2 || getCluster(t, ctx, "wq").Annotations[v1.AnnotationRequest] != "" {
		t.Errorf("the withdrawn request was carried out after all (%d request reports):\n%s", n, second.output())
	}
	if n := writableCount(t, ctx, root, pods...); n != 1 {
		t.Errorf("%d writable instances, want 1", n)
	}
	stopWriter()
	holdsAcked(t, ctx, target, db(t, mustPodAddr(t, ctx, target), root), wr.acked)
	reasons, texts := eventReasons(t, ctx, "wq")
	requireEvents(t, reasons, texts, "RequestAccepted", "RequestSucceeded", "RequestFailed")
}

// TestWatchSurvivesAPIServerRestart: kube-apiserver is killed and comes back while watch
// supervises a healthy cluster under writes: no failover (the API's silence says nothing about
// MySQL), the writes go on, and afterwards watch still fails a killed primary over by itself.
func TestWatchSurvivesAPIServerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "wx", 3)
	defer deleteCluster(t, "wx")
	pods := []string{"wx-0", "wx-1", "wx-2"}
	w := startWatch(t, nil, "wx")
	w.supervising(t, ctx)
	wr, stopWriter := startWriter(ctx, "wx")
	defer stopWriter()
	primary := getCluster(t, ctx, "wx").Status.CurrentPrimary
	restarted := time.Now()
	if err := r.RestartAPIServer(ctx, 12*time.Second); err != nil { // longer than the Lease is valid
		t.Fatal(err)
	}
	t.Logf("kube-apiserver down for %s", time.Since(restarted).Round(time.Millisecond))
	// Its Lease ran out meanwhile: watch stands by and takes it again (nobody else holds it).
	eventually(t, ctx, "watch supervising again", func() error {
		if w.actions(t, "watch", "supervising") < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	c := getCluster(t, ctx, "wx")
	if c.Status.CurrentPrimary != primary || w.actions(t, "failover", "") != 0 || len(c.Status.History) > 0 && c.Status.History[0].Type == orchestrate.OperationFailover {
		t.Fatalf("the API server's restart led to a failover: primary %s (was %s)\n%s", c.Status.CurrentPrimary, primary, w.output())
	}
	if _, ok := wr.firstAckAfter(restarted.Add(2 * time.Second)); !ok {
		t.Errorf("no write acknowledged during the API server's restart")
	}

	// Watch still supervises: a kill of the primary is failed over with no command typed.
	if err := r.Inject(rig.Kill, "default", primary); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "an automatic failover after the API server's restart", func() error {
		c := getCluster(t, ctx, "wx")
		if c.Status.CurrentPrimary == primary || c.Status.Operation != nil {
			return fmt.Errorf("primary %s, operation %v", c.Status.CurrentPrimary, c.Status.Operation != nil)
		}
		return nil
	})
	next := getCluster(t, ctx, "wx").Status.CurrentPrimary
	if n := writableCount(t, ctx, root, pods...); n != 1 {
		t.Errorf("%d writable instances, want 1", n)
	}
	stopWriter()
	holdsAcked(t, ctx, next, db(t, mustPodAddr(t, ctx, next), root), wr.acked)
	if os.Getenv("WATCH_DEBUG") != "" {
		t.Logf("%s\n%s", w.output(), w.stderr())
	}
}

// TestWatchWokenByChanges: with a detection interval of a minute, a switchover handed to watch
// right after its first check is carried out within 20 s: the informer on the cluster wakes the
// supervisor when the request arrives, instead of its next interval.
func TestWatchWokenByChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	appCluster(t, ctx, "wi", 2)
	defer deleteCluster(t, "wi")
	updateSpec(t, ctx, "wi", func(s *v1.MysqlClusterSpec) {
		s.Failover.DetectionInterval = &metav1.Duration{Duration: time.Minute}
	})
	w := startWatch(t, nil, "wi")
	w.supervising(t, ctx)
	time.Sleep(2 * time.Second) // its first check is done; the next is a minute away
	res := mysqlctl(t, "switchover", "wi", "--timeout", "20s")
	if res.code != 0 || !strings.Contains(res.stderr, "handed to it") {
		t.Fatalf("switchover handed to a watch checking every minute: exit %d\n%s\n%s", res.code, res.stderr, w.output())
	}
}

// TestWatchObservesOnlyWhenAutoOff: with failover.auto false, a killed primary is reported
// (FailoverRequired, with the command to run) but never failed over by watch; the command a
// person then runs is handed to watch and fails over, leaving one writable instance.
func TestWatchObservesOnlyWhenAutoOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "wo", 3)
	defer deleteCluster(t, "wo")
	pods := []string{"wo-0", "wo-1", "wo-2"}
	updateSpec(t, ctx, "wo", func(s *v1.MysqlClusterSpec) {
		s.Failover.Auto = ptr.To(false)
	})
	w := startWatch(t, nil, "wo")
	w.supervising(t, ctx)
	primary := getCluster(t, ctx, "wo").Status.CurrentPrimary
	if err := r.Inject(rig.Kill, "default", primary); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "FailoverRequired reported with the command to run", func() error {
		c := getCluster(t, ctx, "wo")
		if c.Status.HA == nil || c.Status.HA.State != v1.HAFailoverRequired || !strings.Contains(strings.Join(c.Status.HA.Evidence, " "), "failover.auto is false: run 'mysqlctl failover wo'") {
			return fmt.Errorf("ha %+v", c.Status.HA)
		}
		return nil
	})
	time.Sleep(5 * time.Second) // five more intervals: still nothing done
	if c := getCluster(t, ctx, "wo"); c.Status.CurrentPrimary != primary || c.Status.Operation != nil || w.actions(t, "failover", "") != 0 {
		t.Fatalf("watch acted with failover.auto false: primary %s (was %s), operation %+v\n%s", c.Status.CurrentPrimary, primary, c.Status.Operation, w.output())
	}
	res := mysqlctl(t, "failover", "wo", "--timeout", "2m")
	if res.code != 0 || !strings.Contains(res.stderr, "handed to it") {
		t.Fatalf("the person's failover: exit %d\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "wo"); c.Status.CurrentPrimary == primary || writableCount(t, ctx, root, pods...) != 1 {
		t.Fatalf("after the person's failover: primary %s, %d writable", c.Status.CurrentPrimary, writableCount(t, ctx, root, pods...))
	}
}

// replicasOf is pods without the primary.
func replicasOf(pods []string, primary string) []string {
	return slices.DeleteFunc(slices.Clone(pods), func(p string) bool { return p == primary })
}

// aReplica is the last of pods that is not the primary.
func aReplica(pods []string, primary string) string {
	replica := ""
	for _, p := range pods {
		if p != primary {
			replica = p
		}
	}
	return replica
}

// semiSyncView describes, for a failure message, what the primary's sessions wait for (its
// semi-sync state and the states of its sessions) and each replica's receiver.
func semiSyncView(ctx context.Context, root, primary string, pods ...string) string {
	var b strings.Builder
	for _, pod := range pods {
		addr, err := r.PodAddr(ctx, "default", pod, 3306)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", pod, err)
			continue
		}
		d, err := sql.Open("mysql", "root:"+root+"@tcp("+addr+")/?timeout=2s&readTimeout=2s")
		if err != nil {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if pod == primary {
			var vars []string
			if rows, err := d.QueryContext(qctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_clients', 'Rpl_semi_sync_master_wait_sessions')"); err == nil {
				for rows.Next() {
					var k, v string
					if rows.Scan(&k, &v) == nil {
						vars = append(vars, k+"="+v)
					}
				}
				rows.Close()
			}
			var states []string
			if rows, err := d.QueryContext(qctx, "SELECT CONCAT(USER, ': ', COMMAND, ' ', IFNULL(STATE, ''), ' ', TIME, 's ', LEFT(IFNULL(INFO, ''), 60)) FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Sleep'"); err == nil {
				for rows.Next() {
					var st string
					if rows.Scan(&st) == nil {
						states = append(states, st)
					}
				}
				rows.Close()
			}
			var pos string
			_ = d.QueryRowContext(qctx, "SELECT @@gtid_binlog_pos").Scan(&pos)
			fmt.Fprintf(&b, "primary %s at %s %v sessions %q; ", pod, pos, vars, states)
		} else if st, err := slaveStatus(qctx, d); err != nil {
			fmt.Fprintf(&b, "replica %s: %v; ", pod, err)
		} else {
			fmt.Fprintf(&b, "replica %s IO %s (%s, %s) SQL %s at %s; ", pod, st["Slave_IO_Running"], st["Slave_IO_State"], st["Last_IO_Error"], st["Slave_SQL_Running"], st["Gtid_IO_Pos"])
		}
		cancel()
		_ = d.Close()
	}
	return b.String()
}
