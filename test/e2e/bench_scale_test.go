package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkScaleAddReplica measures adding one replica to a cluster holding
// MYSQLCTL_BENCH_SCALE_MB of data (default 1024) under a paced writer through the primary
// Service: `scale +1` until the new replica replicates and has caught up, first by replay (the
// primary's binary logs hold everything), then, after a scale down and a purge of the primary's
// binary logs, by copy from a donor; and the longest gap between acknowledged writes during the
// scale up and the scale down (which removes a replica, never the primary).
func BenchmarkScaleAddReplica(b *testing.B) {
	t := &testing.T{}
	ctx := context.Background()
	mb := 1024
	if v, err := strconv.Atoi(os.Getenv("MYSQLCTL_BENCH_SCALE_MB")); err == nil && v > 0 {
		mb = v
	}
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("benchsc%d", i)
		root := appCluster(t, ctx, name, 2)
		if t.Failed() {
			b.Fatal("cluster setup failed")
		}
		began := time.Now()
		loadData(b, ctx, name+"-0", root, mb)
		b.Logf("%d MB loaded in %s", mb, time.Since(began).Round(time.Second))

		scaleTimed := func(n int, args ...string) (time.Duration, time.Duration) {
			w, stop := startPacedWriter(ctx, name, (n+len(args))*10_000_000, 5*time.Millisecond)
			time.Sleep(time.Second)
			began := time.Now()
			res := mysqlctl(t, append([]string{"scale", name, "--replicas", fmt.Sprint(n), "--timeout", "30m"}, args...)...)
			took := time.Since(began)
			time.Sleep(time.Second)
			stop()
			if res.code != 0 {
				logs, _ := filepath.Glob(filepath.Join(r.Dir, "pods", "default_"+name+"-seed-*", "logs", "*.log"))
				for _, l := range logs {
					out, _ := os.ReadFile(l)
					b.Logf("%s:\n%s", l, out)
				}
				b.Fatalf("scale to %d: %d %s", n, res.code, res.stderr)
			}
			return took, w.maxGap()
		}
		replay, upGap := scaleTimed(3)
		c := getCluster(t, ctx, name)
		if rec := provenance(c, name+"-2"); rec == nil || rec.Method != "replay" {
			b.Fatalf("the first scale up was not by replay: %+v", rec)
		}
		_, downGap := scaleTimed(2, "--delete-data")
		primary := getCluster(t, ctx, name).Status.CurrentPrimary
		purgeBinlogs(t, ctx, db(t, mustPodAddr(t, ctx, primary), root))
		copied, copyGap := scaleTimed(3)
		if rec := provenance(getCluster(t, ctx, name), name+"-2"); rec == nil || rec.Method != "copy" {
			b.Fatalf("the scale up after the purge was not by copy: %+v", rec)
		}
		b.ReportMetric(float64(mb), "data-MB")
		b.ReportMetric(replay.Seconds(), "add-by-replay-s")
		b.ReportMetric(copied.Seconds(), "add-by-copy-s")
		b.ReportMetric(float64(max(upGap, copyGap).Milliseconds()), "scale-up-max-gap-ms")
		b.ReportMetric(float64(downGap.Milliseconds()), "scale-down-max-gap-ms")
		b.Logf("add by replay %s (gap %s), by copy %s (gap %s); remove (gap %s)", replay.Round(time.Millisecond), upGap, copied.Round(time.Millisecond), copyGap, downGap)
		deleteCluster(t, name)
	}
}

// loadData fills app.blob on the primary with about mb MB of 1 KB rows, 16 MB per transaction.
func loadData(b *testing.B, ctx context.Context, pod, root string, mb int) {
	t := &testing.T{}
	d := db(t, mustPodAddr(t, ctx, pod), root)
	for _, q := range []string{
		"CREATE TABLE app.blob (id INT AUTO_INCREMENT PRIMARY KEY, pad VARCHAR(1000))",
		"INSERT INTO app.blob (pad) VALUES (REPEAT('x', 1000))",
	} {
		if _, err := d.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	for rows := 1; rows < mb*1024; {
		n := min(rows, 16*1024, mb*1024-rows)
		if _, err := d.ExecContext(ctx, fmt.Sprintf("INSERT INTO app.blob (pad) SELECT pad FROM app.blob LIMIT %d", n)); err != nil {
			b.Fatal(err)
		}
		rows += n
	}
}
