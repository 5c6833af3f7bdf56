package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// BenchmarkKillSoak kills the primary of one 3-instance cluster with `kill -9`, round after
// round (MYSQLCTL_KILL_ROUNDS, default 20), under four writers through the primary Service,
// while `watch` supervises it with no cooldown and no command is typed. Each round waits until
// the cluster is back to three replicating instances with nothing quarantined and no operation
// (the goal: every round), then kills the new primary. It reports the time from the kill to
// that state (p50, p95), the rounds in which watch re-seeded a crashed primary's unacknowledged
// tail by itself, the rounds that did not come back, and the acknowledged writes lost (goal 0).
// The killed pods restart after the rig kubelet's crash-loop back-off, which grows to minutes as
// the same pods are killed again: MYSQLCTL_RIG_RESTART_BACKOFF=1s MYSQLCTL_RIG_MAX_RESTART_BACKOFF=5s
// keep 20 rounds to minutes; restart-to-back is mysqlctl's own part either way.
func BenchmarkKillSoak(b *testing.B) {
	rounds := 20
	if n, err := strconv.Atoi(os.Getenv("MYSQLCTL_KILL_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	t := &testing.T{}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bks%d", i)
		root := appClusterB(b, t, ctx, name)
		c := getCluster(t, ctx, name)
		c.Spec.Failover.Cooldown = &metav1.Duration{}
		if err := kube(t).Update(ctx, c); err != nil {
			b.Fatal(err)
		}
		w := startWatch(t, nil, name)
		var writers []*writer
		for k := range 4 {
			wr, stop := startPacedWriter(ctx, name, 1+k*10_000_000, 10*time.Millisecond)
			writers = append(writers, wr)
			defer stop()
		}
		w.supervising(t, ctx)
		var back, moved, rejoined []time.Duration
		reseeds, stuck := 0, 0
		// What a stuck round needs to be understood: the watch's transitions and the status.
		stuckReport := func(round int, what string) {
			c := getCluster(t, ctx, name)
			status, _ := json.MarshalIndent(c.Status, "", "  ")
			path := filepath.Join(os.TempDir(), fmt.Sprintf("mysqlctl-killsoak-%s-round%d.log", name, round))
			_ = os.WriteFile(path, []byte(w.output()+"\n"+w.stderr()+"\n"+string(status)), 0o600)
			b.Logf("round %d: %s; watch output and status in %s", round, what, path)
		}
		for round := 0; round < rounds; round++ {
			if !waitBack(ctx, t, root, name, 3*time.Minute) {
				stuck++
				stuckReport(round, "the cluster did not come back by itself")
				break
			}
			time.Sleep(time.Second) // writes flowing again before the next fault
			before := getCluster(t, ctx, name)
			primary := before.Status.CurrentPrimary
			restarts, _ := podRestarts(ctx, primary)
			killed := time.Now()
			if err := r.Inject(rig.Kill, "default", primary); err != nil {
				b.Fatal(err)
			}
			// The killed pod's container restarts after the kubelet's crash-loop back-off (10 s,
			// doubled per crash within 10 minutes, up to 5 minutes): the cluster cannot be whole
			// before, so the wait covers it, and mysqlctl's own part is counted from the restart.
			if !waitMoved(ctx, t, name, primary, time.Minute) {
				stuck++
				stuckReport(round, "no failover after the kill of "+primary)
				break
			}
			moved = append(moved, time.Since(killed))
			restarted, ok := waitRestarted(ctx, primary, restarts, 6*time.Minute)
			if !ok || !waitBack(ctx, t, root, name, 3*time.Minute) {
				stuck++
				stuckReport(round, "after the kill of "+primary+" the cluster did not come back by itself")
				break
			}
			back = append(back, time.Since(killed))
			rejoined = append(rejoined, time.Since(restarted))
			after := getCluster(t, ctx, name)
			if rb := latestOf(after, orchestrate.OperationRebuild); rb != nil && rb.DiscardedGTIDs != "" && rb.FinishedAt.After(killed.Add(-time.Second)) {
				reseeds++
				b.Logf("round %d: %s re-seeded by watch, discarding %s", round, primary, rb.DiscardedGTIDs)
			}
		}
		lost := 0
		final := getCluster(t, ctx, name).Status.CurrentPrimary
		for _, wr := range writers {
			wr.mu.Lock()
			acked := append([]int(nil), wr.acked...)
			wr.mu.Unlock()
			lost += lostAcked(t, ctx, final, root, acked)
		}
		b.ReportMetric(float64(percentile(back, 0.5).Milliseconds()), "p50-back-ms")
		b.ReportMetric(float64(percentile(back, 0.95).Milliseconds()), "p95-back-ms")
		b.ReportMetric(float64(percentile(moved, 0.5).Milliseconds()), "p50-new-primary-ms")
		b.ReportMetric(float64(percentile(moved, 0.95).Milliseconds()), "p95-new-primary-ms")
		b.ReportMetric(float64(percentile(rejoined, 0.5).Milliseconds()), "p50-restart-to-back-ms")
		b.ReportMetric(float64(percentile(rejoined, 0.95).Milliseconds()), "p95-restart-to-back-ms")
		b.ReportMetric(float64(len(back)), "rounds-back")
		b.ReportMetric(float64(stuck), "rounds-stuck")
		b.ReportMetric(float64(reseeds), "auto-reseeds")
		b.ReportMetric(float64(lost), "acked-lost")
		b.Logf("kill soak: %d of %d rounds back to 3 replicating instances with no command (%d re-seeded by watch), %d acknowledged writes lost; kill to new primary %v; kill to back %v; killed pod's restart to back %v",
			len(back), rounds, reseeds, lost, moved, back, rejoined)
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
		deleteCluster(t, name)
	}
}

// podRestarts is the pod's containers' restart count (-1 when it cannot be read).
func podRestarts(ctx context.Context, pod string) (int32, bool) {
	p, err := r.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return -1, false
	}
	n := int32(0)
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n, podReady(p)
}

// waitRestarted waits until the pod's restart count passed before and the pod is Ready again,
// and returns when it was found so.
func waitRestarted(ctx context.Context, pod string, before int32, within time.Duration) (time.Time, bool) {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n, ready := podRestarts(ctx, pod); n > before && ready {
			return time.Now(), true
		}
	}
	return time.Time{}, false
}

// waitMoved waits until the recorded primary is another instance.
func waitMoved(ctx context.Context, t *testing.T, name, from string, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if c := getCluster(t, ctx, name); c.Status.CurrentPrimary != from {
			return true
		}
	}
	return false
}

// waitBack waits until no operation runs, nothing is quarantined, and every instance but the
// primary replicates from it with both threads.
func waitBack(ctx context.Context, t *testing.T, root, name string, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		c := getCluster(t, ctx, name)
		if c.Status.Operation == nil && len(c.Status.ErrantInstances) == 0 && allReplicating(ctx, t, root, name, c.Status.CurrentPrimary) {
			return true
		}
	}
	return false
}
