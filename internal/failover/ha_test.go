package failover

import (
	"strings"
	"testing"
	"time"
)

func TestAssess(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	refused := Check{PodUID: "a", Refused: true, Detail: "connection refused"}
	silent := Check{PodUID: "a", Detail: "i/o timeout"}
	alive := Check{PodUID: "a", Reachable: true, Writable: true}
	ro := Check{PodUID: "a", Reachable: true, Uptime: 0, UptimeKnown: true, At: now}
	roOld := Check{PodUID: "a", Reachable: true, Uptime: time.Hour, UptimeKnown: true, At: now}
	dead := Judgement{Verdict: Dead, Reason: "dead"}
	unreach := Judgement{Verdict: Unreachable, Reason: "replicas still receive"}
	auto := Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastWritable: now.Add(-5 * time.Second)}
	cases := []struct {
		name     string
		checks   []Check
		j        Judgement
		p        Policy
		state    string
		failover bool
		next     time.Duration
		reason   string
	}{
		{"alive", []Check{refused, alive}, Judgement{Verdict: Alive}, auto, HAHealthy, false, time.Second, "writable"},
		{"one refusal is suspicion, re-checked fast", []Check{alive, refused}, dead, auto, HASuspected, false, 62500 * time.Microsecond, "1 of the 3"},
		{"a silent primary is re-checked at the interval", []Check{silent, silent}, unreach, auto, HASuspected, false, time.Second, "2 of the 3"},
		{"threshold reached and replicas agree", []Check{refused, refused, refused}, dead, auto, HAFailoverRequired, true, time.Second, "dead"},
		{"restarted read-only counts with refusals", []Check{refused, refused, ro}, Judgement{Verdict: ReadOnly, Reason: "read-only"}, auto, HAFailoverRequired, true, time.Second, "read-only"},
		{"a refusal after it was writable proves the restart, whatever the uptime's whole seconds say", []Check{{PodUID: "a", Refused: true, At: now.Add(-300 * time.Millisecond)}, {PodUID: "a", Refused: true, At: now.Add(-200 * time.Millisecond)}, {PodUID: "a", Reachable: true, Uptime: time.Second, UptimeKnown: true, At: now}},
			Judgement{Verdict: ReadOnly, Reason: "read-only"}, Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastWritable: now.Add(-500 * time.Millisecond)}, HAFailoverRequired, true, time.Second, "read-only"},
		{"a refusal before it was last writable proves nothing", []Check{{PodUID: "a", Refused: true, At: now.Add(-3 * time.Second)}, {PodUID: "a", Reachable: true, Uptime: time.Second, UptimeKnown: true, At: now.Add(-200 * time.Millisecond)}, {PodUID: "a", Reachable: true, Uptime: time.Second, UptimeKnown: true, At: now}},
			Judgement{Verdict: ReadOnly, Reason: "read-only"}, Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastWritable: now.Add(-500 * time.Millisecond)}, HASuspected, false, time.Second, "has not restarted"},
		{"an uptime of 2 s read 2.5 s after it was writable may hide a start before: a person decides", []Check{
			{PodUID: "a", Reachable: true, Uptime: 2 * time.Second, UptimeKnown: true, At: now.Add(-200 * time.Millisecond)},
			{PodUID: "a", Reachable: true, Uptime: 2 * time.Second, UptimeKnown: true, At: now.Add(-100 * time.Millisecond)},
			{PodUID: "a", Reachable: true, Uptime: 2 * time.Second, UptimeKnown: true, At: now}},
			Judgement{Verdict: ReadOnly, Reason: "read-only"}, Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastWritable: now.Add(-2500 * time.Millisecond)}, HASuspected, false, time.Second, "has not restarted"},
		{"the uptime counts from when it was asked, not when the check ended", []Check{refused, refused,
			{PodUID: "a", Reachable: true, Uptime: 2 * time.Second, UptimeKnown: true, UptimeAt: now.Add(-800 * time.Millisecond), At: now}},
			Judgement{Verdict: ReadOnly, Reason: "read-only"}, Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastWritable: now.Add(-3500 * time.Millisecond)}, HASuspected, false, time.Second, "has not restarted"},
		{"an uptime a whole second short of the time since it was writable proves the restart", []Check{
			{PodUID: "a", Reachable: true, Uptime: 2 * time.Second, UptimeKnown: true, At: now.Add(-200 * time.Millisecond)},
			{PodUID: "a", Reachable: true, Uptime: 2 * time.Second, UptimeKnown: true, At: now.Add(-100 * time.Millisecond)},
			{PodUID: "a", Reachable: true, Uptime: 2 * time.Second, UptimeKnown: true, UptimeAt: now.Add(-10 * time.Millisecond), At: now}},
			Judgement{Verdict: ReadOnly, Reason: "read-only"}, Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastWritable: now.Add(-3100 * time.Millisecond)}, HAFailoverRequired, true, time.Second, "read-only"},
		{"read-only without a restart: a person decides", []Check{roOld, roOld, roOld}, Judgement{Verdict: ReadOnly, Reason: "read-only"}, auto, HASuspected, false, time.Second, "has not restarted"},
		{"read-only, never seen writable: a person decides", []Check{ro, ro, ro}, Judgement{Verdict: ReadOnly, Reason: "read-only"}, Policy{Threshold: 3, Interval: time.Second, Auto: true}, HASuspected, false, time.Second, "never saw it writable"},
		{"past the threshold, not dead: no fast re-checks", []Check{refused, refused, refused, refused}, Judgement{Verdict: Unreachable, Reason: "no replica can vouch"}, auto, HASuspected, false, time.Second, "vouch"},
		{"read-only, uptime unknown: a person decides", []Check{refused, refused, {PodUID: "a", Reachable: true, At: now}}, Judgement{Verdict: ReadOnly, Reason: "read-only"}, auto, HASuspected, false, time.Second, "has not restarted"},
		{"replicas still receive: never", []Check{silent, silent, silent, silent}, unreach, auto, HASuspected, false, time.Second, "still receive"},
		{"a new pod incarnation starts afresh", []Check{refused, refused, {PodUID: "b", Refused: true}}, dead, auto, HASuspected, false, 62500 * time.Microsecond, "1 of the 3"},
		{"paused", []Check{refused, refused, refused}, dead, Policy{Threshold: 3, Auto: true, Paused: true}, HAFailoverRequired, false, time.Second, "spec.paused"},
		{"auto off", []Check{refused, refused, refused}, dead, Policy{Threshold: 3}, HAFailoverRequired, false, time.Second, "failover.auto is false"},
		{"inside the cooldown", []Check{refused, refused, refused}, dead, Policy{Threshold: 3, Auto: true, Cooldown: 5 * time.Minute, LastFailover: now.Add(-time.Minute)}, HADegraded, false, time.Second, "mysqlctl failover demo"},
		{"past the cooldown", []Check{refused, refused, refused}, dead, Policy{Threshold: 3, Auto: true, Cooldown: 5 * time.Minute, LastFailover: now.Add(-6 * time.Minute)}, HAFailoverRequired, true, time.Second, "dead"},
		{"restarted read-only inside the cooldown: reopened in place", []Check{refused, refused, ro}, Judgement{Verdict: ReadOnly, Reason: "read-only"},
			Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastFailover: now.Add(-time.Minute), LastWritable: now.Add(-5 * time.Second)}, HASuspected, false, time.Second, "reopened in place"},
		{"made read-only inside the cooldown: a person decides", []Check{roOld, roOld, roOld}, Judgement{Verdict: ReadOnly, Reason: "read-only"},
			Policy{Threshold: 3, Interval: time.Second, Auto: true, Cooldown: 5 * time.Minute, LastFailover: now.Add(-time.Minute), LastWritable: now.Add(-5 * time.Second)}, HASuspected, false, time.Second, "has not restarted"},
		{"restarted read-only inside the cooldown, paused: nothing", []Check{refused, refused, ro}, Judgement{Verdict: ReadOnly, Reason: "read-only"},
			Policy{Threshold: 3, Interval: time.Second, Auto: true, Paused: true, Cooldown: 5 * time.Minute, LastFailover: now.Add(-time.Minute), LastWritable: now.Add(-5 * time.Second)}, HAFailoverRequired, false, time.Second, "spec.paused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Assess("demo", tc.checks, tc.j, tc.p, now)
			if a.State != tc.state || a.Failover != tc.failover || a.Next != tc.next || !strings.Contains(a.Reason, tc.reason) || a.Reopen != strings.Contains(tc.name, "reopened in place") {
				t.Errorf("Assess = %+v; want state %s failover %v next %s reason containing %q", a, tc.state, tc.failover, tc.next, tc.reason)
			}
		})
	}
}

func TestConvergeGivesWay(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	auto := Policy{Interval: 2 * time.Second, Auto: true}
	window := 6*time.Second + GiveWaySlack
	// A record the converge saw rewritten d before now; the supervisor's own times are far off
	// the converge's clock on purpose: only the change counts.
	rewritten := func(d time.Duration) *RecordLiveness {
		l := &RecordLiveness{}
		written := now.Add(-3 * time.Hour)
		l.See(3, written, now.Add(-d-time.Second))
		l.See(4, written.Add(time.Second), now.Add(-d))
		return l
	}
	seenOnce := &RecordLiveness{}
	seenOnce.See(3, now, now)
	same := &RecordLiveness{}
	same.See(3, now, now.Add(-time.Second))
	same.See(3, now, now)
	countOnly := &RecordLiveness{}
	countOnly.See(99, now, now.Add(-time.Second))
	countOnly.See(100, now, now)
	cases := []struct {
		name    string
		state   string
		waiting bool
		l       *RecordLiveness
		p       Policy
		want    bool
	}{
		{"dead, refused the Lease, rewritten just now", HAFailoverRequired, true, rewritten(0), auto, true},
		{"rewritten at the edge of the window", HAFailoverRequired, true, rewritten(window), auto, true},
		{"not rewritten within the window: the supervisor may be gone", HAFailoverRequired, true, rewritten(window + time.Millisecond), auto, false},
		{"seen once only: liveness not shown", HAFailoverRequired, true, seenOnce, auto, false},
		{"seen twice, unchanged", HAFailoverRequired, true, same, auto, false},
		{"only the count changed (same second)", HAFailoverRequired, true, countOnly, auto, true},
		{"not refused the Lease (backing off, or refused by its own checks)", HAFailoverRequired, false, rewritten(0), auto, false},
		{"suspected only", HASuspected, true, rewritten(0), auto, false},
		{"withheld (Degraded)", HADegraded, true, rewritten(0), auto, false},
		{"failover.auto false: nobody fails over", HAFailoverRequired, true, rewritten(0), Policy{Interval: time.Second}, false},
		{"paused: nobody fails over", HAFailoverRequired, true, rewritten(0), Policy{Interval: time.Second, Auto: true, Paused: true}, false},
		{"interval unset counts as one second", HAFailoverRequired, true, rewritten(3*time.Second + GiveWaySlack), Policy{Auto: true}, true},
		{"interval unset, older than that", HAFailoverRequired, true, rewritten(3*time.Second + GiveWaySlack + time.Millisecond), Policy{Auto: true}, false},
	}
	for _, tc := range cases {
		got, why := ConvergeGivesWay(tc.state, tc.waiting, tc.l, tc.p, now)
		if got != tc.want {
			t.Errorf("%s: gives way %v, want %v", tc.name, got, tc.want)
		}
		if got && why == "" {
			t.Errorf("%s: no reason given", tc.name)
		}
	}
}
