package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/supervisor"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// BenchmarkWatchManyClusters: one `watch` process supervises 1, 10 and 30 clusters of three real
// instances each, every one checked every second: the process's CPU (cores, over a minute), its
// RSS, the p99 of its checks of the primaries (from its own histogram), and the outage of an
// automatic failover of one cluster while all are watched, and last, as a control, the same with
// only that cluster watched while every other still runs. MYSQLCTL_BENCH_CLUSTERS overrides the
// sizes (for example "1,3"). The rig's node holds 32 pods (10 clusters): run 30 with
// MYSQLCTL_RIG_MAX_PODS=96.
func BenchmarkWatchManyClusters(b *testing.B) {
	sizes := []int{1, 10, 30}
	if v := os.Getenv("MYSQLCTL_BENCH_CLUSTERS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("MYSQLCTL_BENCH_CLUSTERS=%q", v)
			}
			sizes = append(sizes, n)
		}
	}
	t := &testing.T{}
	ctx := context.Background()
	var names []string
	defer func() {
		for _, n := range names {
			deleteCluster(t, n)
		}
	}()
	for _, n := range sizes {
		for len(names) < n {
			// Bootstraps in parallel, two at a time: three at a time (nine servers initializing
			// their data at once beside the running ones) stalled this 2-core machine's API
			// server past the create commands' Lease validity.
			var batch []string
			for i := range min(n-len(names), 2) {
				batch = append(batch, fmt.Sprintf("bm%d", len(names)+i))
			}
			var wg sync.WaitGroup
			for _, name := range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if name == "bm0" {
						appCluster(t, ctx, name, 3) // the one the writer writes to
					} else if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "128Mi", "--wait", "--timeout", "8m"); res.code != 0 {
						b.Errorf("create %s: exit %d\n%s", name, res.code, res.stderr)
						return
					}
					c := getCluster(t, ctx, name)
					c.Spec.Failover.Cooldown = &metav1.Duration{} // one failover per size, on the same cluster
					if err := kube(t).Update(ctx, c); err != nil {
						b.Errorf("cooldown of %s: %v", name, err)
					}
					if res := mysqlctl(t, "reconcile", name); res.code != 0 {
						b.Errorf("reconcile %s: %d %s", name, res.code, res.stderr)
					}
				}()
			}
			wg.Wait()
			if b.Failed() || t.Failed() {
				b.FailNow()
			}
			names = append(names, batch...)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				manyClustersRun(b, t, ctx, names[:n])
			}
		})
	}
	// The control: the same machine (every cluster's servers and probes running), one cluster
	// watched. Its outage against the largest size's separates what the supervisor costs from
	// what the loaded machine does.
	if len(names) > 1 {
		b.Run(fmt.Sprintf("%d-present-1-watched", len(names)), func(b *testing.B) {
			for range b.N {
				manyClustersRun(b, t, ctx, names[:1], names[0])
			}
		})
	}
}

// manyClustersRun measures one watch process over names; scope is what it is told to watch
// (none: every cluster in the namespace).
func manyClustersRun(b *testing.B, t *testing.T, ctx context.Context, names []string, scope ...string) {
	addr := freeAddr(t)
	w := startWatch(t, nil, append(scope, "--metrics-addr", addr)...)
	// Stopped as a Deployment stops it (SIGTERM: its Leases are released), so that the next run's
	// failover never waits for a killed supervisor's Lease to expire.
	defer func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			_ = w.cmd.Process.Signal(syscall.SIGKILL)
			<-w.done
		}
	}()
	// Every bench cluster supervised, every instance answering.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		sc, err := scrapeMetrics(ctx, addr)
		ready := 0
		var waiting []string
		if err == nil {
			for _, n := range names {
				cl := []string{"namespace", "default", "cluster", n}
				sup, _ := sc.get("mysqlctl_cluster_supervised", cl...)
				up, _ := sc.get("mysqlctl_cluster_instances_up", cl...)
				if sup == 1 && up == 3 {
					ready++
				} else {
					waiting = append(waiting, fmt.Sprintf("%s: supervised %v, instances up %v", n, sup, up))
				}
			}
		}
		if ready == len(names) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d clusters supervised with 3 instances up after 3 minutes (%v): %v\n%s\n%s", ready, len(names), err, waiting, w.output(), w.stderr())
		}
		time.Sleep(time.Second)
	}
	pid := w.cmd.Process.Pid
	cpu0, at0 := procCPU(b, pid), time.Now()
	time.Sleep(time.Minute)
	cores := (procCPU(b, pid) - cpu0).Seconds() / time.Since(at0).Seconds()
	rss := procRSS(b, pid)
	sc, err := scrapeMetrics(ctx, addr)
	if err != nil {
		b.Fatal(err)
	}
	p99 := sc.quantile(0.99, "mysqlctl_check_duration_seconds")

	// One cluster's primary is killed while every cluster is watched.
	victim := names[0]
	wr, stop := startWriter(ctx, victim)
	defer stop()
	time.Sleep(1500 * time.Millisecond)
	// The outage is a gap between acknowledged writes: on a loaded machine the writer may not
	// have written yet, and a gap that starts after the fault would measure nothing.
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, ok := wr.firstAckAfter(time.Time{}); ok {
			break
		}
		if time.Now().After(wait) {
			_, last := wr.failures()
			b.Fatalf("the writer to %s acknowledged nothing in 30 s: %s", victim, last)
		}
	}
	time.Sleep(500 * time.Millisecond)
	primary := getCluster(t, ctx, victim).Status.CurrentPrimary
	primaryAddr, err := r.PodAddr(ctx, "default", primary, 3306)
	if err != nil {
		b.Fatal(err)
	}
	faulted := time.Now()
	if err := r.Inject(rig.Kill, "default", primary); err != nil {
		b.Fatal(err)
	}
	killed := time.Now()
	deadline = time.Now().Add(time.Minute)
	var opStart time.Time // when the failover operation began, as it recorded
	for {
		c := getCluster(t, ctx, victim)
		if op := c.Status.Operation; op != nil && op.Type == orchestrate.OperationFailover && op.StartedAtMicro != nil && opStart.IsZero() {
			opStart = op.StartedAtMicro.Time
		}
		if _, acked := wr.firstAckAfter(faulted); acked && c.Status.CurrentPrimary != primary && c.Status.Operation == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no automatic failover of %s within a minute:\n%s", victim, w.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	outage := wr.maxGap()
	if err := wr.ackedOnlyByPrimary(primaryAddr, killed, opStart); err != nil {
		b.Fatalf("failover of %s (primary %s at %s killed at %s, failover from %s): %v\n%s", victim, primary, primaryAddr,
			faulted.Format("15:04:05.000"), opStart.Format("15:04:05.000"), err, w.output())
	}
	// Where the outage went: detection (the fault to the operation's start), the failover
	// operation (its recorded duration), and the rest (routing the writer to the new primary).
	var took time.Duration
	for _, h := range getCluster(t, ctx, victim).Status.History {
		if h.Type == orchestrate.OperationFailover && !h.FinishedAt.Time.Before(faulted.Truncate(time.Second)) {
			took = time.Duration(h.DurationMilliseconds) * time.Millisecond
			break
		}
	}
	detect, routed := time.Duration(0), time.Duration(0)
	if !opStart.IsZero() {
		detect, routed = opStart.Sub(faulted), wr.maxGapEnd().Sub(opStart.Add(took))
	}
	// The old primary re-joins before the next size runs. Killed while a commit waited for its
	// acknowledgement, it returns with that transaction and is quarantined: rebuilt, then.
	deadline = time.Now().Add(3 * time.Minute)
	rebuilt := 0
	for getCluster(t, ctx, victim).Status.HA == nil || !allReplicating(ctx, t, string(secret(t, ctx, victim).Data[specs.SecretRootPassword]), victim, getCluster(t, ctx, victim).Status.CurrentPrimary) {
		if time.Now().After(deadline) {
			b.Fatalf("%s did not re-join its old primary within 3 minutes", victim)
		}
		reviveCrashLooping(b, ctx, primary)
		c := getCluster(t, ctx, victim)
		if c.Status.Operation == nil && slices.ContainsFunc(c.Status.ErrantInstances, func(e v1.ErrantInstance) bool { return e.Name == primary }) {
			if res := mysqlctl(t, "rebuild", victim, primary, "--timeout", "5m"); res.code != 0 {
				b.Fatalf("rebuild of the quarantined old primary %s: exit %d\n%s", primary, res.code, res.stderr)
			}
			rebuilt++
		}
		time.Sleep(time.Second)
	}
	b.ReportMetric(cores, "cores")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
	b.ReportMetric(p99*1000, "check-p99-ms")
	b.ReportMetric(float64(outage.Milliseconds()), "outage-ms")
	b.ReportMetric(float64(detect.Milliseconds()), "detect-ms")
	b.ReportMetric(float64(took.Milliseconds()), "failover-ms")
	b.ReportMetric(float64(routed.Milliseconds()), "routed-ms")
	b.ReportMetric(float64(rebuilt), "old-primary-rebuilt")
	// Every sample is printed (b.Logf output is cut short after a few, and the reported
	// metrics are the last sample's).
	fmt.Printf("%d clusters: %.3f cores, RSS %.0f MB, check p99 %.1f ms, failover outage of %s %s (fault to failover start %s, failover %s, its end to the outage's end %s)\n",
		len(names), cores, float64(rss)/(1<<20), p99*1000, victim, outage, detect, took, routed)
	fmt.Printf("%d clusters: the failover of %s from the fault: %s\n", len(names), victim, timeline(b, w, "default/"+victim, faulted, opStart.Add(took)))
}

// timeline is what the watch process said about one cluster from the fault to the end of its
// failover, each line at its offset from the fault: its transitions (HA states and actions) and
// the stages it entered, so that a slow failover shows which step took the time.
func timeline(b *testing.B, w *watchProc, key string, from, to time.Time) string {
	type event struct {
		at   time.Time
		what string
	}
	var events []event
	for _, l := range strings.Split(w.output(), "\n") {
		var tr supervisor.Transition
		if json.Unmarshal([]byte(l), &tr) != nil || tr.Namespace+"/"+tr.Cluster != key {
			continue
		}
		what := tr.Action
		if tr.To != "" {
			what = tr.From + "->" + tr.To
		}
		events = append(events, event{tr.Time, what})
	}
	// Stage lines: "<time> <namespace/name> <operation id> <type> <stage>".
	for _, l := range strings.Split(w.stderr(), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 || f[1] != key {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if err != nil {
			b.Fatalf("a stage line of watch with no time: %q", l)
		}
		events = append(events, event{at, f[4]})
	}
	events = append(events, event{to, "end"})
	slices.SortStableFunc(events, func(x, y event) int { return x.at.Compare(y.at) })
	var out []string
	for _, e := range events {
		if !e.at.Before(from) && !e.at.After(to) {
			out = append(out, fmt.Sprintf("+%dms %s", e.at.Sub(from).Milliseconds(), e.what))
		}
	}
	return strings.Join(out, ", ")
}

// procCPU is the user+system CPU time the process used so far.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start at state (field 3).
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}

// procRSS is the process's resident set size in bytes.
func procRSS(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// maxGapEnd is when the longest gap between acknowledged writes ended.
func (w *writer) maxGapEnd() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var end time.Time
	var m time.Duration
	for i := 1; i < len(w.ackTimes); i++ {
		if g := w.ackTimes[i].Sub(w.ackTimes[i-1]); g > m {
			m, end = g, w.ackTimes[i]
		}
	}
	return end
}

// ackedOnlyByPrimary fails when a write was acknowledged by a server that was not the one
// writable server: by the killed primary well after its kill (SIGKILL is sent, not awaited: a
// reply already on its way may still arrive), or by any other server before the failover
// began (two writable servers). A failover whose start was not seen (it ran between two
// polls) began no earlier than the kill.
func (w *writer) ackedOnlyByPrimary(primaryAddr string, killed, failoverStart time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if failoverStart.IsZero() {
		failoverStart = killed
	}
	for i, at := range w.ackTimes {
		switch addr := w.ackAddrs[i]; {
		case addr == primaryAddr && at.After(killed.Add(100*time.Millisecond)):
			return fmt.Errorf("the killed primary %s acknowledged a write at %s", addr, at.Format("15:04:05.000"))
		case addr != primaryAddr && at.Before(failoverStart):
			return fmt.Errorf("%s acknowledged a write at %s while %s was the primary", addr, at.Format("15:04:05.000"), primaryAddr)
		}
	}
	return nil
}

// reviveCrashLooping deletes the pod when its container waits in the kubelet's crash-loop
// back-off: a primary killed every few minutes by this benchmark never runs the 10 minutes
// that reset the back-off, which reaches minutes; its StatefulSet recreates it at once on its
// volume, as an operator would.
func reviveCrashLooping(b *testing.B, ctx context.Context, pod string) {
	p, err := r.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		return
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
			b.Logf("%s waits in CrashLoopBackOff (%s): deleting it", pod, cs.State.Waiting.Message)
			if err := r.Client.CoreV1().Pods("default").Delete(ctx, pod, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				b.Fatalf("delete %s: %v", pod, err)
			}
			return
		}
	}
}

// TestAckedOnlyByPrimary: the benchmark's guard fails on each kind of write no single primary
// could have acknowledged, and passes a failover's acknowledgements.
func TestAckedOnlyByPrimary(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const old, other = "127.0.9.1:3306", "127.0.9.2:3306"
	killed, start := at(1000), at(1400)
	for _, tc := range []struct {
		name  string
		addrs []string
		times []time.Time
		start time.Time
		bad   bool
	}{
		{"a failover", []string{old, old, other}, []time.Time{at(900), at(1050), at(1700)}, start, false},
		{"the killed primary answers later", []string{old, old}, []time.Time{at(900), at(1200)}, start, true},
		{"another server before the failover", []string{old, other}, []time.Time{at(900), at(1300)}, start, true},
		{"another server before the kill, the failover's start unseen", []string{other, old}, []time.Time{at(800), at(900)}, time.Time{}, true},
		{"the failover's start unseen", []string{old, other}, []time.Time{at(900), at(1700)}, time.Time{}, false},
	} {
		w := &writer{ackAddrs: tc.addrs, ackTimes: tc.times}
		if err := w.ackedOnlyByPrimary(old, killed, tc.start); (err != nil) != tc.bad {
			t.Errorf("%s: %v, want failure %v", tc.name, err, tc.bad)
		}
	}
}
