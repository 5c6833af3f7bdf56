package failover

import (
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
)

func TestNextAbsence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type pass struct {
		s    Sighting
		want Tracked
	}
	tests := []struct {
		name   string
		start  Tracked
		passes []pass
	}{
		{
			name:  "a member that answers is bounded by the primary's position at every pass",
			start: NewTracked(),
			passes: []pass{
				{Sighting{At: at(0), Answered: true, Receiving: true, PrimaryPos: "0-1-10"}, Tracked{Bound: "0-1-10", ReceivingAt: at(0), Receiving: true}},
				{Sighting{At: at(5), Answered: true, Receiving: true, PrimaryPos: "0-1-20"}, Tracked{Bound: "0-1-20", ReceivingAt: at(5), Receiving: true}},
			},
		},
		{
			name:  "a member that stops answering is bounded by the first pass without it, then frozen",
			start: Tracked{Bound: "0-1-20", ReceivingAt: at(0), Receiving: true},
			passes: []pass{
				{Sighting{At: at(5), PrimaryPos: "0-1-30", Detail: "refused"}, Tracked{Bound: "0-1-30", ReceivingAt: at(0), AbsentSince: at(5), Misses: 1, Reason: "refused"}},
				{Sighting{At: at(10), PrimaryPos: "0-1-40", Detail: "refused"}, Tracked{Bound: "0-1-30", ReceivingAt: at(0), AbsentSince: at(5), Misses: 2, Reason: "refused"}},
			},
		},
		{
			name:  "an absent member the primary still lists is receiving: its bound follows the primary",
			start: Tracked{Bound: "0-1-20", AbsentSince: at(0), Misses: 3},
			passes: []pass{
				{Sighting{At: at(5), Receiving: true, PrimaryPos: "0-1-30"}, Tracked{Bound: "0-1-30", ReceivingAt: at(5), Receiving: true, AbsentSince: at(0), Misses: 4}},
				{Sighting{At: at(10), PrimaryPos: "0-1-40"}, Tracked{Bound: "0-1-40", ReceivingAt: at(5), AbsentSince: at(0), Misses: 5}},
				{Sighting{At: at(15), PrimaryPos: "0-1-50"}, Tracked{Bound: "0-1-40", ReceivingAt: at(5), AbsentSince: at(0), Misses: 6}},
			},
		},
		{
			name:  "a member with its receiver stopped is bounded at the first pass it misses, then frozen",
			start: Tracked{Bound: "0-1-20"},
			passes: []pass{
				{Sighting{At: at(5), PrimaryPos: "0-1-30"}, Tracked{Bound: "0-1-30", AbsentSince: at(5), Misses: 1}},
				{Sighting{At: at(10), PrimaryPos: "0-1-40"}, Tracked{Bound: "0-1-30", AbsentSince: at(5), Misses: 2}},
			},
		},
		{
			name:  "a pass that could not read the primary changes no bound",
			start: Tracked{Bound: "0-1-20", Receiving: true},
			passes: []pass{
				{Sighting{At: at(5), Detail: "timeout"}, Tracked{Bound: "0-1-20", Receiving: true, AbsentSince: at(5), Misses: 1, Reason: "timeout"}},
				{Sighting{At: at(10), PrimaryPos: "0-1-40"}, Tracked{Bound: "0-1-40", AbsentSince: at(5), Misses: 2}},
			},
		},
		{
			name:  "a member silent and not receiving is bounded afresh after a pass that could not read the primary",
			start: Tracked{Bound: "0-1-20", AbsentSince: at(0), Misses: 3},
			passes: []pass{
				{Sighting{At: at(5)}, Tracked{Bound: "0-1-20", Receiving: true, AbsentSince: at(0), Misses: 4}},
				{Sighting{At: at(10), PrimaryPos: "0-1-40"}, Tracked{Bound: "0-1-40", AbsentSince: at(0), Misses: 5}},
			},
		},
		{
			name:  "a supervisor that just started bounds a silent member at its first pass",
			start: NewTracked(),
			passes: []pass{
				{Sighting{At: at(0), PrimaryPos: "0-1-7"}, Tracked{Bound: "0-1-7", AbsentSince: at(0), Misses: 1}},
			},
		},
		{
			name:  "a member that answers again is no longer absent",
			start: Tracked{Bound: "0-1-20", AbsentSince: at(0), Misses: 4},
			passes: []pass{
				{Sighting{At: at(5), Answered: true, PrimaryPos: "0-1-30"}, Tracked{Bound: "0-1-30"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.start
			for i, p := range tt.passes {
				got = NextAbsence(got, p.s)
				if got != p.want {
					t.Fatalf("pass %d: got %+v, want %+v", i, got, p.want)
				}
			}
		})
	}
	if (Tracked{Misses: AbsentAfter - 1}).IsAbsent() || !(Tracked{Misses: AbsentAfter}).IsAbsent() {
		t.Errorf("IsAbsent does not wait for %d missed passes", AbsentAfter)
	}
}

func TestBoundHolds(t *testing.T) {
	my := mysqlMember("db-1", 1, "00000000-0000-0000-0000-000000000000:1-10", "00000000-0000-0000-0000-000000000000:1-12").Snapshot
	tests := []struct {
		name      string
		candidate topology.Snapshot
		bound     string
		ok        bool
		why       string
	}{
		{"MariaDB: applied", mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadRunning).Snapshot, "0-1000-10", true, ""},
		{"MariaDB: received counts", mariadb("db-1", 1001, "0-1000-10", "0-1000-15", topology.ThreadRunning).Snapshot, "0-1000-15", true, ""},
		{"MariaDB: behind", mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadRunning).Snapshot, "0-1000-11", false, "0-1000-11"},
		{"MariaDB: another domain", mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadRunning).Snapshot, "0-1000-10,1-1000-1", false, "1-1000-1"},
		{"MariaDB: a later server's number is no proof of an earlier server's", mariadb("db-1", 1001, "0-1001-12", "", topology.ThreadRunning).Snapshot, "0-1000-11", false, "server_id 1000"},
		{"MySQL: received counts", my, "00000000-0000-0000-0000-000000000000:1-12", true, ""},
		{"MySQL: lacking", my, "00000000-0000-0000-0000-000000000000:1-13", false, ":13"},
		{"no bound", my, "", false, "no bound"},
		{"unreadable bound", my, "not a set", false, "cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why, ok := BoundHolds(tt.candidate, tt.bound)
			if ok != tt.ok || !strings.Contains(why, tt.why) {
				t.Errorf("BoundHolds(%q) = %q, %v; want %v with %q", tt.bound, why, ok, tt.ok, tt.why)
			}
		})
	}
}
