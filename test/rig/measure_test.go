package rig_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlctl/mysqlctl/test/rig"
)

// TestMeasure logs what the issue asks to measure: the rig's start-up, its memory at rest and how
// long a killed MariaDB pod takes to be Ready again. It asserts nothing about time (the numbers
// depend on the machine and its load); it fails only if the rig misbehaves.
func TestMeasure(t *testing.T) {
	mariadb(t)
	tm := r.Timings
	t.Logf("start → API ready (etcd, kube-apiserver, CRDs): %s", tm.APIReady.Sub(tm.Start).Round(time.Millisecond))
	t.Logf("start → node registered (controller-manager, scheduler, agent): %s", tm.NodeReady.Sub(tm.Start).Round(time.Millisecond))
	t.Logf("StatefulSet applied → 3 MariaDB pods Ready (OrderedReady, fresh volumes): %s", fixtureTime.Round(time.Millisecond))

	// Memory at rest: let the servers settle, then sum the resident sets.
	time.Sleep(3 * time.Second)
	total, lines := rss(append(r.PIDs(), os.Getpid()))
	t.Logf("RSS of the whole rig at rest (3 MariaDB pods): %d MiB\n%s", total>>20, lines)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var times []time.Duration
	for i := range 3 {
		pods := mariadb(t)
		pod := pods[i]
		before := restarts(&pod)
		start := time.Now()
		r.Kill(t, ns, pod.Name)
		podAfter(t, ctx, pod.Name, func(p *corev1.Pod) bool { return restarts(p) > before && rig.IsReady(p) })
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	t.Logf("kill -9 → Ready again (readiness period 1s): min %s, median %s, max %s",
		times[0].Round(time.Millisecond), times[1].Round(time.Millisecond), times[2].Round(time.Millisecond))
}

// rss sums the resident set sizes of pids and describes them by command name.
func rss(pids []int) (int64, string) {
	byName := map[string]int64{}
	count := map[string]int{}
	var total int64
	for _, pid := range pids {
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			continue
		}
		name := ""
		var kb int64
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Name:"); ok {
				name = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
		if pid == os.Getpid() {
			name = "test binary (node agent)"
		}
		byName[name] += kb << 10
		count[name]++
		total += kb << 10
	}
	var b strings.Builder
	for _, name := range sortedKeys(byName) {
		fmt.Fprintf(&b, "    %-28s ×%d %5d MiB\n", name, count[name], byName[name]>>20)
	}
	return total, b.String()
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// BenchmarkRigStart starts a complete second rig per iteration and reports the time to the API
// server, to three Ready MariaDB pods, and the rig's RSS at rest (run with -benchtime=1x).
func BenchmarkRigStart(b *testing.B) {
	for range b.N {
		start := time.Now()
		rg := rig.StartT(b, rig.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		if err := rig.Apply(ctx, rg.Config, "bench", rig.MariaDBManifest); err != nil {
			b.Fatal(err)
		}
		if _, err := rg.WaitPods(ctx, "bench", selector, 3); err != nil {
			b.Fatal(err)
		}
		cancel()
		ready := time.Since(start)
		time.Sleep(3 * time.Second)
		total, _ := rss(rg.PIDs())
		b.ReportMetric(rg.Timings.APIReady.Sub(start).Seconds(), "s-to-api")
		b.ReportMetric(ready.Seconds(), "s-to-3-ready")
		b.ReportMetric(float64(total>>20), "MiB-rss-without-agent")
		b.StopTimer()
		if err := rg.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
