package supervisor

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// reseedCluster: db-0 crashed, was replaced by a failover that recorded its semi-sync window and
// this supervisor's last check, and is quarantined with its tail.
func reseedCluster(checked time.Time) *v1.MysqlCluster {
	at := metav1.NewTime(checked.Truncate(time.Second))
	seen := metav1.NewTime(checked.Add(-time.Minute))
	until := metav1.NewTime(checked.Add(20 * time.Hour))
	return &v1.MysqlCluster{Status: v1.MysqlClusterStatus{
		CurrentPrimary: "db-1",
		History: []v1.OperationRecord{
			{ID: "converge-2", Type: orchestrate.OperationConverge, Result: "Succeeded"},
			{ID: "failover-1", Type: orchestrate.OperationFailover, Result: "Succeeded", FormerPrimary: "db-0", FormerPrimarySeenAt: &seen, UnacknowledgedUntil: &until, FormerPrimaryCheckedAt: &at},
		},
		ErrantInstances: []v1.ErrantInstance{{Name: "db-0", ErrantGTIDs: "0-1000-5", Count: 1}},
	}}
}

// TestReseedCandidate: only the former primary of the newest primary change, quarantined and
// not re-seeded before, with the policy on, is a candidate.
func TestReseedCandidate(t *testing.T) {
	no := false
	cases := []struct {
		name   string
		change func(*v1.MysqlCluster)
		want   bool
	}{
		{"the crashed former primary", func(*v1.MysqlCluster) {}, true},
		{"already tried once (a person aborted it)", func(c *v1.MysqlCluster) {
			now := metav1.Now()
			c.Status.ErrantInstances[0].ReseedStartedAt = &now
		}, false},
		{"another instance quarantined", func(c *v1.MysqlCluster) { c.Status.ErrantInstances[0].Name = "db-2" }, false},
		{"a switchover since", func(c *v1.MysqlCluster) {
			c.Status.History = append([]v1.OperationRecord{{Type: orchestrate.OperationSwitchover, Result: "Succeeded", FormerPrimary: "db-2"}}, c.Status.History...)
		}, false},
		{"policy off", func(c *v1.MysqlCluster) { c.Spec.Failover.ReseedUnacknowledged = &no }, false},
		{"automatic failover off", func(c *v1.MysqlCluster) { c.Spec.Failover.Auto = &no }, false},
		{"a rebuild recorded", func(c *v1.MysqlCluster) { c.Status.Scale = &v1.ScaleStatus{Action: orchestrate.ScaleRebuild} }, false},
	}
	for _, tc := range cases {
		c := reseedCluster(time.Now())
		tc.change(c)
		if _, _, got := reseedCandidate(c); got != tc.want {
			t.Errorf("%s: candidate %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestOwnCheck: the proof gets this supervisor's own check (monotonic times) only when it is the
// check the failover recorded; another process's record, a restarted supervisor (no check in
// memory) or another primary's check gives none.
func TestOwnCheck(t *testing.T) {
	checked := time.Now().Add(-10 * time.Second)
	c := reseedCluster(checked)
	_, ch, ok := reseedCandidate(c)
	if !ok {
		t.Fatal("not a candidate")
	}
	w := &watcher{s: &Supervisor{}}
	if got := w.ownCheck(ch); !got.CheckedAt.IsZero() {
		t.Error("a supervisor with no check of its own (restarted since the failover) proves with the record")
	}
	var pc *protectedCheck
	pc = pc.next("db-0", checked.Add(-time.Second), checked.Add(-time.Hour), "0-1000-3")
	pc = pc.next("db-0", checked, checked.Add(-time.Hour), "0-1000-4")
	w.failedOver.Store(pc)
	got := w.ownCheck(ch)
	if !got.CheckedAt.Equal(checked) || len(got.Written) != 2 || got.Written[1].GTID != "0-1000-4" || !got.CheckedStart.Equal(checked.Add(-time.Hour)) {
		t.Errorf("own check not used: %+v", got)
	}
	w.failedOver.Store(&protectedCheck{primary: "db-0", at: checked.Add(-5 * time.Second), started: checked.Add(-time.Hour)})
	if got := w.ownCheck(ch); !got.CheckedAt.IsZero() {
		t.Error("a check other than the recorded one was used")
	}
	w.failedOver.Store(&protectedCheck{primary: "db-2", at: checked, started: checked.Add(-time.Hour)})
	if got := w.ownCheck(ch); !got.CheckedAt.IsZero() {
		t.Error("another primary's check was used")
	}
}

// TestProtectedChecksKept: a supervisor keeps its recent protected checks of one primary, the
// oldest dropped past protectedKept; another primary starts afresh.
func TestProtectedChecksKept(t *testing.T) {
	var pc *protectedCheck
	at := time.Now()
	for i := range protectedKept + 5 {
		pc = pc.next("db-0", at.Add(time.Duration(i)*time.Second), at, fmt.Sprintf("0-1000-%d", i))
	}
	if len(pc.written) != protectedKept || pc.written[len(pc.written)-1].GTID != fmt.Sprintf("0-1000-%d", protectedKept+4) || pc.written[0].GTID != "0-1000-5" {
		t.Fatalf("kept %d, first %s, last %s", len(pc.written), pc.written[0].GTID, pc.written[len(pc.written)-1].GTID)
	}
	if pc = pc.next("db-1", at, at, "0-1001-1"); len(pc.written) != 1 {
		t.Errorf("another primary's checks kept: %d", len(pc.written))
	}
}

// TestClockStopped: readings of one process agree; an interval the wall clock saw longer than
// the monotonic one (a machine that slept 3 s, whose monotonic clock stopped) or shorter (a
// stepped wall clock) is found.
func TestClockStopped(t *testing.T) {
	at := time.Now()
	if clockStopped(at, time.Now()) {
		t.Error("readings of one process disagree")
	}
	if !clocksDisagree(10*time.Second, 13*time.Second) || !clocksDisagree(10*time.Second, 7*time.Second) {
		t.Error("a 3 s disagreement is not found")
	}
	if clocksDisagree(10*time.Second, 10*time.Second+500*time.Millisecond) {
		t.Error("half a second of jitter counts as a sleep")
	}
}

// TestResumableReseed: only a re-seed watch began by itself that a failover superseded is
// continued by itself, while the policy is on.
func TestResumableReseed(t *testing.T) {
	base := func() *v1.MysqlCluster {
		c := reseedCluster(time.Now())
		c.Status.Scale = &v1.ScaleStatus{ID: "rebuild-1", Action: orchestrate.ScaleRebuild, Discard: "0-1000-5"}
		c.Status.History = append([]v1.OperationRecord{{ID: "failover-2", Type: orchestrate.OperationFailover, Result: "Succeeded"},
			{ID: "rebuild-1", Type: orchestrate.OperationRebuild, Result: "Superseded"}}, c.Status.History...)
		return c
	}
	if !resumableReseed(base()) {
		t.Error("a superseded automatic re-seed is not continued")
	}
	no := false
	for name, change := range map[string]func(*v1.MysqlCluster){
		"a person's rebuild":         func(c *v1.MysqlCluster) { c.Status.Scale.Discard = "" },
		"stopped on its own failure": func(c *v1.MysqlCluster) { c.Status.History[1].Result = "Failed" },
		"policy off":                 func(c *v1.MysqlCluster) { c.Spec.Failover.ReseedUnacknowledged = &no },
		"paused":                     func(c *v1.MysqlCluster) { c.Spec.Paused = true },
		"an operation runs":          func(c *v1.MysqlCluster) { c.Status.Operation = &v1.OperationStatus{ID: "x"} },
		"another rebuild's record":   func(c *v1.MysqlCluster) { c.Status.History[1].ID = "rebuild-0" },
	} {
		c := base()
		change(c)
		if resumableReseed(c) {
			t.Errorf("%s: continued by itself", name)
		}
	}
}
