package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// dialerEnvs are the two ways mysqlctl reaches MySQL: from a workstation through the API server's
// pods/portforward and the node's kubelet API (the default), and on the pod network.
var dialerEnvs = []struct{ name, env string }{
	{"direct", "MYSQLCTL_DIALER=direct"},
	{"port-forward", "MYSQLCTL_DIALER=port-forward"},
}

// BenchmarkWorkstationPath measures, in one run and on one cluster per dialer, what the
// workstation path costs against the direct one: a converged `reconcile` (the whole command), the
// longest write gap of a `switchover` under a writer, and a `watch` automatic failover after kill -9
// of the primary (fault to the new primary recorded, and fault to the first acknowledged write on
// it). Each is measured haRuns times per dialer, alternating the dialers round by round so that
// the machine's drift falls on both; p50 and p95 per dialer and the ratios are reported.
func BenchmarkWorkstationPath(b *testing.B) {
	t := &testing.T{}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		reconcile := map[string][]time.Duration{}
		gaps := map[string][]time.Duration{}
		promoted := map[string][]time.Duration{}
		outages := map[string][]time.Duration{}
		name := "bwsreconcile"
		appClusterB(b, t, ctx, name)
		for run := 0; run < haRuns; run++ {
			for _, d := range dialerEnvs {
				start := time.Now()
				if res := mysqlctlEnv(t, []string{d.env}, "reconcile", name, "--timeout", "2m"); res.code != 0 {
					b.Fatalf("%s reconcile: %d %s", d.name, res.code, res.stderr)
				}
				reconcile[d.name] = append(reconcile[d.name], time.Since(start))
			}
		}
		for run := 0; run < haRuns; run++ {
			for _, d := range dialerEnvs {
				w, stop := startWriterAt(ctx, name, (run*2+len(d.name))*1_000_000)
				time.Sleep(time.Second)
				res := mysqlctlEnv(t, []string{d.env}, "switchover", name, "--timeout", "2m")
				time.Sleep(time.Second)
				stop()
				if res.code != 0 {
					b.Fatalf("%s switchover: %d %s", d.name, res.code, res.stderr)
				}
				gaps[d.name] = append(gaps[d.name], w.maxGap())
			}
		}
		deleteCluster(t, name)
		for run := 0; run < haRuns; run++ {
			for _, d := range dialerEnvs {
				o, p, lost, _ := watchOutageRun(b, t, ctx, fmt.Sprintf("bws%s%d", d.name[:2], run), "kill", d.env)
				promoted[d.name], outages[d.name] = append(promoted[d.name], p), append(outages[d.name], o)
				if lost > 0 {
					b.Errorf("%s: %d acknowledged writes lost", d.name, lost)
				}
			}
		}
		for _, m := range []struct {
			what string
			v    map[string][]time.Duration
		}{{"reconcile", reconcile}, {"switchover-gap", gaps}, {"watch-promoted", promoted}, {"watch-outage", outages}} {
			direct, pf := m.v["direct"], m.v["port-forward"]
			b.ReportMetric(float64(percentile(direct, 0.5).Milliseconds()), m.what+"-direct-p50-ms")
			b.ReportMetric(float64(percentile(direct, 0.95).Milliseconds()), m.what+"-direct-p95-ms")
			b.ReportMetric(float64(percentile(pf, 0.5).Milliseconds()), m.what+"-pf-p50-ms")
			b.ReportMetric(float64(percentile(pf, 0.95).Milliseconds()), m.what+"-pf-p95-ms")
			b.ReportMetric(float64(percentile(pf, 0.5))/float64(percentile(direct, 0.5)), m.what+"-p50-ratio")
			fmt.Printf("%s: direct %v\n%s: port-forward %v\n", m.what, direct, m.what, pf)
		}
	}
}
