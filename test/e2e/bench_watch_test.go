package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/test/rig"
)

// BenchmarkWatchOutage measures automatic failover with `watch` running and no command typed:
// from the fault to the first write acknowledged through the primary Service (the longest gap
// between acknowledged writes), detection included, for kill -9, freeze, network cut and a lost
// pod of the primary; with the acknowledged writes lost and the healthy replicas wrongly
// quarantined.
func BenchmarkWatchOutage(b *testing.B) {
	for _, mode := range []string{"kill", "freeze", "cut", "lose"} {
		b.Run(mode, func(b *testing.B) {
			t := &testing.T{}
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				var outages, moved []time.Duration
				lost, quarantined := 0, 0
				for run := 0; run < haRounds(); run++ {
					name := fmt.Sprintf("bw%s%d", mode[:2], run)
					outage, m, l, q := watchOutageRun(b, t, ctx, name, mode)
					outages, moved = append(outages, outage), append(moved, m)
					lost, quarantined = lost+l, quarantined+q
				}
				reportOutages(b, mode+": automatic failover", outages, lost, quarantined)
				// The client's own retries (a 2s write timeout) quantize the outage it sees;
				// this is the supervisor's part: fault to the new primary recorded.
				b.ReportMetric(float64(percentile(moved, 0.5).Milliseconds()), "p50-promoted-ms")
				b.ReportMetric(float64(percentile(moved, 0.95).Milliseconds()), "p95-promoted-ms")
				b.Logf("%s: fault to new primary recorded: %v", mode, moved)
			}
		})
	}
}

// watchOutageRun injects the fault into the primary of a fresh cluster under a writer while a
// watch (with the extra environment, such as its dialer) supervises it; it returns the writer's
// longest gap, the time from the fault to the new primary recorded, the acknowledged writes lost
// and the healthy replicas quarantined.
func watchOutageRun(b *testing.B, t *testing.T, ctx context.Context, name, mode string, env ...string) (time.Duration, time.Duration, int, int) {
	root := appClusterB(b, t, ctx, name)
	defer deleteCluster(t, name)
	w := startWatch(t, env, name)
	defer func() { _ = w.cmd.Process.Signal(syscall.SIGKILL); <-w.done }()
	// A client whose statements time out after a second: a write stuck on the silent primary
	// fails then, and the next goes where the primary Service points (with the default 2 s, the
	// client's own retries quantize what it sees to 2 s steps).
	wr, stop := startWriterWith(ctx, name, &writer{start: 1, timeout: time.Second})
	defer stop()
	time.Sleep(1500 * time.Millisecond)
	for i := 0; i < 100; i++ {
		if _, ok := wr.firstAckAfter(time.Time{}); ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, ok := wr.firstAckAfter(time.Time{}); !ok {
		b.Fatalf("%s: the writer had no write acknowledged before the fault", name)
	}
	primary := getCluster(t, ctx, name).Status.CurrentPrimary
	oldAddr, err := r.PodAddr(ctx, "default", primary, 3306)
	if err != nil {
		b.Fatal(err)
	}
	faults := map[string]rig.Fault{"kill": rig.Kill, "freeze": rig.Freeze, "cut": rig.Cut, "lose": rig.Lose}
	faulted := time.Now()
	if err := r.Inject(faults[mode], "default", primary); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	var moved time.Duration
	for {
		c := getCluster(t, ctx, name)
		if moved == 0 && c.Status.CurrentPrimary != primary {
			moved = time.Since(faulted)
		}
		acked := !wr.firstAckElsewhere(faulted, oldAddr).IsZero()
		if c.Status.CurrentPrimary != primary && c.Status.Operation == nil && acked {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: no automatic failover within a minute:\n%s\n%s", mode, w.output(), w.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	// The outage is from the fault to the first write another server acknowledged: a reply the
	// killed primary had already sent may still arrive after the kill.
	outage := wr.firstAckElsewhere(faulted, oldAddr).Sub(faulted)
	c := getCluster(t, ctx, name)
	missing := missingAcked(t, ctx, c.Status.CurrentPrimary, root, wr.acked)
	for _, i := range missing {
		// What the run needs to be understood: which write, when and by whom it was acknowledged.
		fmt.Printf("%s %s: acknowledged write %d (at %s by %s, %s after the fault) is not on the new primary %s (old %s)\n",
			name, mode, wr.acked[i], wr.ackTimes[i].Format("15:04:05.000"), wr.ackAddrs[i], wr.ackTimes[i].Sub(faulted).Round(time.Millisecond),
			c.Status.CurrentPrimary, primary)
	}
	if len(missing) > 0 {
		fmt.Printf("watch output:\n%s\n%s\n", w.output(), w.stderr())
	}
	lost := len(missing)
	if os.Getenv("MYSQLCTL_BENCH_VERBOSE") != "" {
		fmt.Printf("%s %s: fault at %s, new primary recorded after %s, first write acknowledged elsewhere after %s\nwriter's failed attempts:\n  %s\n%s\n%s\n",
			name, mode, faulted.Format("15:04:05.000"), moved.Round(time.Millisecond), outage.Round(time.Millisecond),
			strings.Join(wr.failedAttempts(), "\n  "), w.output(), w.stderr())
	}
	quarantined := 0
	for _, e := range c.Status.ErrantInstances {
		if e.Name != primary {
			quarantined++
		}
	}
	switch mode {
	case "freeze":
		_ = r.Inject(rig.Thaw, "default", primary)
	case "cut":
		_ = r.Inject(rig.Restore, "default", primary)
	case "lose":
		zero := int64(0)
		_ = r.Client.CoreV1().Pods("default").Delete(ctx, primary, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	return outage, moved, lost, quarantined
}

// BenchmarkWatchFalsePositiveSoak runs `watch` on a healthy cluster under writes for
// MYSQLCTL_SOAK (default 10m) while replicas are killed at random and the supervisor's own path
// to the primary is cut at random (3-8 s; the replicas still receive from it), never both
// replicas at once. Nothing here is a dead primary: it reports the failovers started (the goal
// is 0), the primary changes, the longest write gap and the acknowledged writes lost.
func BenchmarkWatchFalsePositiveSoak(b *testing.B) {
	soak := 10 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("MYSQLCTL_SOAK")); err == nil && d > 0 {
		soak = d
	}
	t := &testing.T{}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bsoak%d", i)
		root := appClusterB(b, t, ctx, name)
		w := startWatch(t, nil, name)
		wr, stop := startWriter(ctx, name)
		w.supervising(t, ctx)
		primary := getCluster(t, ctx, name).Status.CurrentPrimary
		rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		kills, cuts := 0, 0
		var timeline []string
		event := func(f string, args ...any) {
			timeline = append(timeline, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(f, args...))
		}
		end := time.Now().Add(soak)
		for time.Now().Before(end) {
			time.Sleep(time.Duration(3+rnd.IntN(8)) * time.Second)
			if rnd.IntN(2) == 0 {
				replica := fmt.Sprintf("%s-%d", name, rnd.IntN(3))
				if replica == primary || !allReplicating(ctx, t, root, name, primary) {
					continue // never a second replica while one has not re-joined yet
				}
				if err := r.Inject(rig.Kill, "default", replica); err == nil {
					kills++
					event("kill %s", replica)
				}
				continue
			}
			restore := r.CutFrom(b, w.cmd.Process.Pid, "default", primary)
			event("cut watch from %s", primary)
			time.Sleep(time.Duration(3000+rnd.IntN(5000)) * time.Millisecond)
			restore()
			event("restore")
			cuts++
		}
		time.Sleep(5 * time.Second)
		stop()
		c := getCluster(t, ctx, name)
		failovers := w.actions(t, "failover", "")
		lost := lostAcked(t, ctx, c.Status.CurrentPrimary, root, wr.acked)
		b.ReportMetric(float64(failovers), "failovers")
		b.ReportMetric(float64(lost), "lost-acked")
		b.ReportMetric(float64(wr.maxGap().Milliseconds()), "max-write-gap-ms")
		b.Logf("soak %s: %d replica kills, %d supervisor-primary cuts, %d failover actions, primary %s -> %s, %d acknowledged writes, %d lost, longest write gap %s",
			soak, kills, cuts, failovers, primary, c.Status.CurrentPrimary, len(wr.acked), lost, wr.maxGap().Round(time.Millisecond))
		if gaps := longGaps(wr, 3*time.Second); len(gaps) > 0 || os.Getenv("MYSQLCTL_SOAK_DEBUG") != "" {
			b.Logf("write gaps over 3s: %v\ntimeline:\n%s\nwatch:\n%s", gaps, strings.Join(timeline, "\n"), w.output())
		}
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
		deleteCluster(t, name)
	}
}

// allReplicating reports whether every instance but the primary replicates with both threads.
func allReplicating(ctx context.Context, t *testing.T, root, cluster, primary string) bool {
	for i := range 3 {
		pod := fmt.Sprintf("%s-%d", cluster, i)
		if pod == primary {
			continue
		}
		addr, err := r.PodAddr(ctx, "default", pod, 3306)
		if err != nil {
			return false
		}
		s, err := slaveStatus(ctx, db(t, addr, root))
		if err != nil || s == nil || s["Slave_IO_Running"] != "Yes" || s["Slave_SQL_Running"] != "Yes" {
			return false
		}
	}
	return true
}

// longGaps lists the writer's gaps between acknowledged writes longer than d, with when they
// ended.
func longGaps(w *writer, d time.Duration) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i := 1; i < len(w.ackTimes); i++ {
		if g := w.ackTimes[i].Sub(w.ackTimes[i-1]); g > d {
			out = append(out, fmt.Sprintf("%s until %s", g.Round(time.Millisecond), w.ackTimes[i].Format("15:04:05.000")))
		}
	}
	return out
}
