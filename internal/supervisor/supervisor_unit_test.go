package supervisor

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
)

// TestSeedLastWritable: a supervisor that starts (or re-takes its Lease) learns from the status
// when the primary was last recorded writable, so a primary killed before its first check, and
// back read-only, counts as restarted; a replica's observation teaches nothing.
func TestSeedLastWritable(t *testing.T) {
	seen := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	older := metav1.NewTime(seen.Add(-time.Hour))
	c := &v1.MysqlCluster{Status: v1.MysqlClusterStatus{CurrentPrimary: "db-0", Instances: []v1.InstanceStatus{
		{Name: "db-0", Role: v1.RolePrimary, LastSeen: &older},
		{Name: "db-1", Role: v1.RoleReplica, LastSeen: &seen},
	}}}
	w := &watcher{s: &Supervisor{}}
	w.seed(c)
	if !w.lastWritable.Equal(older.Time) {
		t.Errorf("lastWritable %s, want the primary's %s", w.lastWritable, older.Time)
	}
	c.Status.Instances[0].LastSeen = &seen
	w = &watcher{s: &Supervisor{}, lastWritable: seen.Add(time.Minute)}
	w.seed(c)
	if !w.lastWritable.Equal(seen.Add(time.Minute)) {
		t.Errorf("a newer own observation was replaced by an older record: %s", w.lastWritable)
	}
}

// TestPhaseNext: only the first healthy check moves the next one; the re-checks that confirm a
// failure (Suspected) keep their cadence, also before the first healthy check, and a watcher
// moves its checks once.
func TestPhaseNext(t *testing.T) {
	tests := []struct {
		state       string
		phased      bool
		phase, done bool
	}{
		{failover.HAHealthy, false, true, true},
		{failover.HAHealthy, true, false, true},
		{failover.HASuspected, false, false, false},
		{failover.HASuspected, true, false, true},
		{failover.HAFailoverRequired, false, false, false},
		{failover.HADegraded, false, false, false},
	}
	for _, tt := range tests {
		phase, done := phaseNext(tt.state, tt.phased)
		if phase != tt.phase || done != tt.done {
			t.Errorf("phaseNext(%s, phased %v) = %v, %v; want %v, %v", tt.state, tt.phased, phase, done, tt.phase, tt.done)
		}
	}
}

// TestUpToSpreads: the point in a period where one cluster's periodic task runs lies inside
// the period and differs between clusters, so that the tasks of clusters supervised together
// spread over the period instead of running at the same instant.
func TestUpToSpreads(t *testing.T) {
	if d := upTo(0); d != 0 {
		t.Errorf("upTo(0) = %s", d)
	}
	const period = time.Second
	seen := map[time.Duration]bool{}
	var early, late int
	for range 1000 {
		d := upTo(period)
		if d < 0 || d >= period {
			t.Fatalf("upTo(%s) = %s: outside the period", period, d)
		}
		seen[d] = true
		if d < period/2 {
			early++
		} else {
			late++
		}
	}
	// 1000 draws: all in one half of the period has a probability of 2^-999.
	if len(seen) < 900 || early == 0 || late == 0 {
		t.Errorf("1000 draws: %d distinct, %d in the first half and %d in the second", len(seen), early, late)
	}
}

func TestWakeDelay(t *testing.T) {
	began := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, c := range []struct {
		name         string
		at, due      time.Duration // after began
		minGap, want time.Duration
	}{
		// A poke 10 ms into a strong re-check due at 62.5 ms waits for that, not the 125 ms gap.
		{"strong re-check keeps its pace", ms(10), ms(62) + ms(1)/2, ms(125), ms(52) + ms(1)/2},
		// A poke during a healthy interval starts the check at the gap.
		{"healthy interval shortened to the gap", ms(10), time.Second, ms(125), ms(115)},
		{"gap already passed", ms(300), time.Second, ms(125), 0},
		{"due already passed", ms(70), ms(62), ms(125), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := wakeDelay(began.Add(c.at), began, began.Add(c.due), c.minGap); got != c.want {
				t.Fatalf("wakeDelay = %v, want %v", got, c.want)
			}
		})
	}
}

func TestCountOnly(t *testing.T) {
	interval := time.Second
	strong, fast := failover.StrongRecheck(interval), interval/8
	last := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	suspected := func(n int32) *v1.HAStatus {
		at := metav1.NewTime(last)
		return &v1.HAStatus{State: v1.HASuspected, FailedChecks: n, SuspectedPodUID: "u1", LastFailedCheck: &at}
	}
	for _, c := range []struct {
		name    string
		h       *v1.HAStatus
		a       failover.Assessment
		failed  int32
		uid     string
		waiting bool
		want    bool
	}{
		{"a strong signal's second check, a quick re-check next", suspected(1), failover.Assessment{State: failover.HASuspected, Next: strong}, 2, "u1", false, true},
		{"the first failed check (a state change)", &v1.HAStatus{State: v1.HAHealthy}, failover.Assessment{State: failover.HASuspected, Next: strong}, 1, "u1", false, false},
		{"the failover called for", suspected(2), failover.Assessment{State: failover.HAFailoverRequired, Next: interval}, 3, "u1", false, false},
		{"a silence: re-checked at interval/8", suspected(1), failover.Assessment{State: failover.HASuspected, Next: fast}, 2, "u1", false, false},
		{"another pod", suspected(1), failover.Assessment{State: failover.HASuspected, Next: strong}, 2, "u2", false, false},
		{"the count fell", suspected(2), failover.Assessment{State: failover.HASuspected, Next: strong}, 1, "u1", false, false},
		{"waiting for the Lease", suspected(1), failover.Assessment{State: failover.HASuspected, Next: strong}, 2, "u1", true, false},
		{"no record yet", nil, failover.Assessment{State: failover.HASuspected, Next: strong}, 2, "u1", false, false},
		{"an interval since the check last recorded", suspected(4), failover.Assessment{State: failover.HASuspected, Next: strong}, 5, "u1", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := last.Add(strong)
			if c.name == "an interval since the check last recorded" {
				at = last.Add(interval)
			}
			if got := countOnly(c.h, c.a, c.failed, c.uid, c.waiting, at, interval); got != c.want {
				t.Fatalf("countOnly = %v, want %v", got, c.want)
			}
		})
	}
}
