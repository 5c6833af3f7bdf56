package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
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
		if _, err := orchestrate.ApplyDerived(ctx, c, cluster, orchestrate.ConvergenceFromStatus(cluster, true)); err != nil {
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
