package topology

import (
	"context"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// BenchmarkObserveAllFive observes five real MariaDB instances (a primary,
// two replicas of the shared cluster and two more replicas started here) in
// parallel through warm connection pools, as a watch loop does every
// second. Each iteration is one full observation of all five.
func BenchmarkObserveAllFive(b *testing.B) {
	c := sharedCluster(b)
	ctx := context.Background()
	targets := []ObserveTarget{}
	for _, name := range []string{"mariadb-0", "mariadb-1", "mariadb-2"} {
		targets = append(targets, ObserveTarget{Name: name, DB: c.inst[name].DB()})
	}
	for _, name := range []string{"bench-3", "bench-4"} {
		s := mariadbtest.Start(b, mariadbtest.Options{Name: name})
		root := connect(b, s, rootCreds())
		must(b, root.Repoint(ctx, replSource(c.P)))
		_ = root.Close()
		s.CatchUp(b, c.P)
		inst := connect(b, s, orch)
		b.Cleanup(func() { _ = inst.Close() })
		targets = append(targets, ObserveTarget{Name: name, DB: inst.DB()})
	}
	opts := ObserveOptions{Timeout: 5 * time.Second}
	for _, s := range ObserveAll(ctx, targets, opts) {
		if !s.Complete() {
			b.Fatalf("%s: %+v", s.Name, s.Err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range ObserveAll(ctx, targets, opts) {
			if !s.Complete() {
				b.Fatalf("%s: %+v", s.Name, s.Err)
			}
		}
	}
}

// BenchmarkClassify measures the pure decision step for one healthy MySQL
// replica, the part a watch loop repeats for every instance.
func BenchmarkClassify(b *testing.B) {
	in := ClassifyInput{
		Instance: mysqlSnap("mysql-1"), ExpectedPrimary: "mysql-0", Primary: mysqlPrimary(uuidP + ":1-100"),
		Thresholds: Thresholds{MaxTransactionsBehind: 10},
	}
	b.ReportAllocs()
	for b.Loop() {
		if Classify(in).Class != ClassReplicating {
			b.Fatal("unexpected class")
		}
	}
}
