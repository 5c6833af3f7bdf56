package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// BenchmarkCreateToRunning measures `create --wait` of a 3-instance cluster on the rig, from
// the command's start to the cluster proven Running (pods start one after another).
func BenchmarkCreateToRunning(b *testing.B) {
	t := &testing.T{}
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench%d", i)
		b.StartTimer()
		res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "128Mi", "--wait", "--timeout", "5m")
		b.StopTimer()
		if res.code != 0 {
			b.Fatalf("create: %d %s", res.code, res.stderr)
		}
		deleteCluster(t, name)
	}
}

type countingRT struct {
	rt            http.RoundTripper
	reads, writes *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		c.reads.Add(1)
	} else {
		c.writes.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// BenchmarkConvergedReconcile measures one reconcile of a converged 3-instance cluster (derived
// objects applied, replicas checked): its time and its API requests (reads and writes per op;
// writes must be 0).
func BenchmarkConvergedReconcile(b *testing.B) {
	t := &testing.T{}
	res := mysqlctl(t, "create", "benchrc", "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "128Mi", "--wait", "--timeout", "5m")
	if res.code != 0 {
		b.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, "benchrc")
	var reads, writes atomic.Int64
	cfg := rest.CopyConfig(r.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, &reads, &writes} }
	c, err := client.New(cfg, client.Options{Scheme: clientScheme(nil)})
	if err != nil {
		b.Fatal(err)
	}
	runner := &orchestrate.Runner{Kube: c, Connect: func(_ context.Context, p *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
		return topology.Connect(topology.Target{Name: p.Name, Host: p.Status.PodIP, Port: 3306}, topology.ConnectOptions{Dialer: topology.DirectDialer{Timeout: 5 * time.Second}, Credentials: creds})
	}}
	key := client.ObjectKey{Namespace: "default", Name: "benchrc"}
	ctx := context.Background()
	reads.Store(0)
	writes.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cluster := &v1.MysqlCluster{}
		if err := c.Get(ctx, key, cluster); err != nil {
			b.Fatal(err)
		}
		if _, err := orchestrate.ApplyDerived(ctx, c, cluster, specs.ConvergenceFromStatus(cluster, true)); err != nil {
			b.Fatal(err)
		}
		if err := runner.Converge(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(reads.Load())/float64(b.N), "api-reads/op")
	b.ReportMetric(float64(writes.Load())/float64(b.N), "api-writes/op")
}

// haRuns is how many switchovers or failovers one benchmark op measures (p50/p95 need ≥ 10).
const haRuns = 10

// haRounds is haRuns, or MYSQLCTL_HA_RUNS when set (fewer rounds to look at one run's detail
// with MYSQLCTL_BENCH_VERBOSE, more for a tighter p95).
func haRounds() int {
	if n, err := strconv.Atoi(os.Getenv("MYSQLCTL_HA_RUNS")); err == nil && n > 0 {
		return n
	}
	return haRuns
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// lostAcked counts the acknowledged writes the primary does not hold.
func lostAcked(t *testing.T, ctx context.Context, primary, root string, acked []int) int {
	return len(missingAcked(t, ctx, primary, root, acked))
}

// missingAcked returns the indexes in acked of the writes the primary does not hold. A read that
// fails is tried again (a connection error proves nothing); one that keeps failing counts as lost.
func missingAcked(t *testing.T, ctx context.Context, primary, root string, acked []int) []int {
	d := db(t, mustPodAddr(t, ctx, primary), root)
	var missing []int
	for i, id := range acked {
		n, err := -1, error(nil)
		for try := 0; try < 5; try++ {
			if err = d.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.w WHERE id = ?", id).Scan(&n); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil || n != 1 {
			missing = append(missing, i)
		}
	}
	return missing
}

// BenchmarkSwitchoverUnavailability measures, over haRuns switchovers of a 3-instance cluster
// under a continuous writer (application account, through the primary Service), the longest
// gap between two acknowledged writes, and the acknowledged writes lost (expected 0).
func BenchmarkSwitchoverUnavailability(b *testing.B) {
	t := &testing.T{}
	ctx := context.Background()
	root := appClusterB(b, t, ctx, "benchsw")
	defer deleteCluster(t, "benchsw")
	for i := 0; i < b.N; i++ {
		var gaps []time.Duration
		lost, quarantined := 0, 0
		for run := 0; run < haRuns; run++ {
			w, stop := startWriterAt(ctx, "benchsw", (run+1)*1_000_000)
			time.Sleep(time.Second)
			res := mysqlctl(t, "switchover", "benchsw", "--timeout", "2m")
			time.Sleep(time.Second)
			stop()
			if res.code != 0 {
				b.Fatalf("switchover: %d %s", res.code, res.stderr)
			}
			gaps = append(gaps, w.maxGap())
			c := getCluster(t, ctx, "benchsw")
			lost += lostAcked(t, ctx, c.Status.CurrentPrimary, root, w.acked)
			quarantined += len(c.Status.ErrantInstances)
		}
		// Every instance is healthy: any quarantine under the writer is a false one.
		b.ReportMetric(float64(quarantined), "false-quarantines")
		b.ReportMetric(float64(percentile(gaps, 0.5).Milliseconds()), "p50-unavailable-ms")
		b.ReportMetric(float64(percentile(gaps, 0.95).Milliseconds()), "p95-unavailable-ms")
		b.ReportMetric(float64(lost), "acked-lost")
		b.Logf("switchover write gaps: %v", gaps)
	}
}

// BenchmarkFailoverOutage measures, over haRuns failovers, the write outage around the primary's
// failure (the longest gap between two writes acknowledged through the primary Service, the
// second of which reaches the new primary) (whose EndpointSlices name the new
// primary by then), with `failover` run right after the failure and a continuous writer using an
// application account; and the acknowledged writes lost (expected 0). Each run uses a fresh
// 3-instance cluster, so that no pod is in restart back-off. Failures:
//   - kill: kill -9 of mariadbd; the container restarts read-only and is fenced over SQL.
//   - lose: the pod's processes die and nothing restarts them; the replicas' receivers are stopped.
func BenchmarkFailoverOutage(b *testing.B) {
	for _, mode := range []string{"kill", "lose"} {
		b.Run(mode, func(b *testing.B) {
			t := &testing.T{}
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				var outages []time.Duration
				lost, quarantined := 0, 0
				for run := 0; run < haRuns; run++ {
					name := fmt.Sprintf("bfo%s%d", mode, run)
					root := appClusterB(b, t, ctx, name)
					w, stop := startWriter(ctx, name)
					time.Sleep(time.Second)
					primary := getCluster(t, ctx, name).Status.CurrentPrimary
					fault := rig.Kill
					if mode == "lose" {
						fault = rig.Lose
					}
					failed := time.Now()
					if err := r.Inject(fault, "default", primary); err != nil {
						b.Fatal(err)
					}
					res := mysqlctl(t, "failover", name, "--timeout", "2m")
					if res.code != 0 {
						stop()
						b.Fatalf("failover: %d %s", res.code, res.stderr)
					}
					deadline := time.Now().Add(30 * time.Second)
					for {
						if _, ok := w.firstAckAfter(failed); ok || time.Now().After(deadline) {
							break
						}
						time.Sleep(20 * time.Millisecond)
					}
					time.Sleep(500 * time.Millisecond)
					stop()
					if _, ok := w.firstAckAfter(failed); !ok {
						b.Fatalf("no write acknowledged after the failover:\n%s", res.stderr)
					}
					// The longest gap between acknowledged writes spans the failure: from the
					// last commit the dying primary acknowledged to the first on the new one
					// (the fault's own timestamp races with writes still in flight).
					outages = append(outages, w.maxGap())
					c := getCluster(t, ctx, name)
					lost += lostAcked(t, ctx, c.Status.CurrentPrimary, root, w.acked)
					for _, e := range c.Status.ErrantInstances {
						if e.Name != primary { // a healthy replica judged errant under the writer
							quarantined++
						}
					}
					if mode == "lose" {
						zero := int64(0)
						_ = r.Client.CoreV1().Pods("default").Delete(ctx, primary, metav1.DeleteOptions{GracePeriodSeconds: &zero})
					}
					deleteCluster(t, name)
				}
				reportOutages(b, mode+": failover", outages, lost, quarantined)
			}
		})
	}
}

func appClusterB(b *testing.B, t *testing.T, ctx context.Context, name string) string {
	root := appCluster(t, ctx, name, 3)
	if t.Failed() {
		b.Fatal("cluster setup failed")
	}
	return root
}

// reportOutages reports the percentiles of the outages with the acknowledged writes lost and the
// healthy replicas wrongly quarantined.
func reportOutages(b *testing.B, what string, outages []time.Duration, lost, quarantined int) {
	b.ReportMetric(float64(percentile(outages, 0.5).Milliseconds()), "p50-outage-ms")
	b.ReportMetric(float64(percentile(outages, 0.95).Milliseconds()), "p95-outage-ms")
	b.ReportMetric(float64(lost), "acked-lost")
	b.ReportMetric(float64(quarantined), "false-quarantines")
	b.Logf("%s outages: %v", what, outages)
}

// upgradeRuns is how many whole-cluster rollouts BenchmarkUpgradeUnavailability measures.
const upgradeRuns = 5

// BenchmarkUpgradeUnavailability measures, over upgradeRuns rollouts of a 3-instance cluster
// (each a mysqlConfig change, so that every pod restarts, the primary's role handed over once)
// under a continuous writer through the primary Service: the longest gap between acknowledged
// writes, the whole upgrade's duration, and the acknowledged writes lost (expected 0).
func BenchmarkUpgradeUnavailability(b *testing.B) {
	t := &testing.T{}
	ctx := context.Background()
	root := appClusterB(b, t, ctx, "benchup")
	defer deleteCluster(t, "benchup")
	for i := 0; i < b.N; i++ {
		var gaps, durations []time.Duration
		lost := 0
		for run := 0; run < upgradeRuns; run++ {
			c := getCluster(t, ctx, "benchup")
			c.Spec.MysqlConfig = map[string]string{"max_connections": fmt.Sprint(200 + i*upgradeRuns + run)}
			if err := kube(t).Update(ctx, c); err != nil {
				b.Fatal(err)
			}
			w, stop := startWriterAt(ctx, "benchup", (i*upgradeRuns+run+1)*1_000_000)
			time.Sleep(time.Second)
			began := time.Now()
			res := mysqlctl(t, "upgrade", "benchup", "--timeout", "10m")
			took := time.Since(began)
			time.Sleep(time.Second)
			stop()
			if res.code != 0 {
				b.Fatalf("upgrade: %d %s", res.code, res.stderr)
			}
			gaps, durations = append(gaps, w.maxGap()), append(durations, took)
			lost += lostAcked(t, ctx, getCluster(t, ctx, "benchup").Status.CurrentPrimary, root, w.acked)
		}
		b.ReportMetric(float64(percentile(gaps, 0.5).Milliseconds()), "p50-unavailable-ms")
		b.ReportMetric(float64(percentile(gaps, 1).Milliseconds()), "max-unavailable-ms")
		b.ReportMetric(percentile(durations, 0.5).Seconds(), "p50-upgrade-s")
		b.ReportMetric(float64(lost), "acked-lost")
		b.Logf("upgrade write gaps %v, durations %v", gaps, durations)
	}
}
