package supervisor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLeaderElection runs two elections on one Lease against the real API server: exactly one
// supervises at a time; the standby prewatches meanwhile; when the leader stops (its context
// ends) it gives the Lease up only after its supervision returned, and the standby leads within
// seconds; a supervision that returns by itself ends the election instead of re-electing in a
// loop.
func TestLeaderElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var supervising, maxSupervising, standbys atomic.Int32
	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	supervise := func(who string, hold time.Duration) func(context.Context) {
		return func(ctx context.Context) {
			n := supervising.Add(1)
			for m := maxSupervising.Load(); n > m && !maxSupervising.CompareAndSwap(m, n); m = maxSupervising.Load() {
			}
			note(who + " supervises")
			<-ctx.Done()
			time.Sleep(hold) // the stage in hand finishing: the Lease must stay held meanwhile
			note(who + " stops")
			supervising.Add(-1)
		}
	}
	standby := func(ctx context.Context) { standbys.Add(1); <-ctx.Done() }
	elect := func(who string) LeaderElection {
		return LeaderElection{Namespace: "default", Name: "mysqlctl.watch-leader.test", Identity: who, SetLeader: func(bool) {}, Report: func(Transition) {}}
	}
	actx, stopA := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- elect("a").Run(actx, env.Config, supervise("a", 2*time.Second), standby) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; log %v", what, log)
			}
		}
	}
	waitFor("a to lead", func() bool { return supervising.Load() == 1 })
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	bDone := make(chan error, 1)
	go func() { bDone <- elect("b").Run(bctx, env.Config, supervise("b", 0), standby) }()
	waitFor("b to stand by", func() bool { return standbys.Load() >= 1 })
	time.Sleep(3 * time.Second)
	if supervising.Load() != 1 {
		t.Fatalf("%d supervising while a leads", supervising.Load())
	}

	stopped := time.Now()
	stopA()
	waitFor("b to lead after a stopped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) > 0 && log[len(log)-1] == "b supervises"
	})
	took := time.Since(stopped)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if maxSupervising.Load() != 1 {
		t.Errorf("%d supervised at once; log %v", maxSupervising.Load(), log)
	}
	// a's stage in hand took 2s: b must not have led before a stopped, nor waited a lease out.
	if took < 2*time.Second || took > 8*time.Second {
		t.Errorf("b led %s after a was told to stop, want after a's 2s stage and well within a lease duration; log %v", took, log)
	}
	stopB()
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}

	// A supervision that returns by itself (its one cluster was deleted) ends the election.
	terms := atomic.Int32{}
	cctx, stopC := context.WithCancel(ctx)
	defer stopC()
	done := make(chan error, 1)
	go func() {
		done <- elect("c").Run(cctx, env.Config, func(context.Context) { terms.Add(1) }, standby)
	}()
	select {
	case err := <-done:
		if err != nil || terms.Load() != 1 {
			t.Errorf("run after supervise returned by itself: err %v, %d terms (want 1)", err, terms.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run went on after supervise returned by itself (%d terms)", terms.Load())
	}

	if a, b := LeaderLeaseName(false, "db", "demo", ""), LeaderLeaseName(false, "db", "other", ""); a == b {
		t.Errorf("watch demo and watch other elect on the same Lease %s", a)
	}
	if a, b := LeaderLeaseName(true, "", "", ""), LeaderLeaseName(false, "db", "", ""); a == b {
		t.Errorf("-A and one namespace elect on the same Lease %s", a)
	}
}
