package topology

import (
	"context"
	"slices"
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

// BenchmarkGuardedStatement measures one guarded statement (Fence: SET
// GLOBAL read_only = ON on a session that enabled ReadOnlyAdminRole) on a
// real MariaDB through the orchestration account, unfenced and fenced by an
// epoch the server already stores (the steady state: fence locks, the epoch
// read, the statement, the release; the one-off write of a new epoch is
// not in the loop). It reports the median and 95th percentile per
// statement; run with -benchtime=200x or more for stable percentiles.
func BenchmarkGuardedStatement(b *testing.B) {
	s := mariadbtest.Start(b, mariadbtest.Options{Name: "bench-fence"})
	ctx := context.Background()
	root := connect(b, s, rootCreds())
	must(b, root.EnsureUser(ctx, UserSpec{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, EnsureUserOptions{SkipBinlog: true}))
	_ = root.Close()
	for _, c := range []struct {
		name  string
		epoch int64
	}{{"unfenced", 0}, {"fenced", 7}} {
		b.Run(c.name, func(b *testing.B) {
			in := actor(b, s, c.epoch)
			must(b, in.Fence(ctx)) // warm pool; stores the epoch when fenced
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := in.Fence(ctx); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			reportPercentiles(b, took)
		})
	}
}

// reportPercentiles reports the median and 95th percentile of took (at
// least 10 rounds) in microseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	b.Helper()
	if len(took) < 10 {
		b.Logf("%d rounds: too few for percentiles (use -benchtime=200x)", len(took))
		return
	}
	slices.Sort(took)
	at := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.95), "p95-µs")
}
