package failover

import (
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
)

func TestAckStall(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	waiting := func(ms int, acked int64) AckSample {
		return AckSample{At: at(ms), Active: true, Clients: 2, Wanted: 1, Waiting: 1, Acked: acked}
	}
	steps := []struct {
		name string
		a    AckSample
		want time.Duration
	}{
		{"a commit waits beside connected replicas: the wait begins", waiting(0, 10), 0},
		{"no acknowledgement since", waiting(1000, 10), time.Second},
		{"still none", waiting(2500, 10), 2500 * time.Millisecond},
		{"an acknowledgement was counted: a busy primary, a new wait", waiting(3000, 11), 0},
		{"none since that one", waiting(4000, 11), time.Second},
		{"nothing waits: over", AckSample{At: at(5000), Active: true, Clients: 2, Wanted: 1, Acked: 12}, 0},
		{"waits again", waiting(6000, 12), 0},
		{"a commit timed out (semi-sync fell back): a new wait", AckSample{At: at(7000), Active: true, Clients: 2, Wanted: 1, Waiting: 1, Acked: 12, Unacked: 1}, 0},
		{"too few replicas connected: starved, not this", AckSample{At: at(8000), Active: true, Clients: 0, Wanted: 1, Waiting: 3, Acked: 12, Unacked: 1}, 0},
		{"semi-sync off: nothing waits for an acknowledgement", AckSample{At: at(9000), Clients: 2, Wanted: 1, Waiting: 1, Acked: 12, Unacked: 1}, 0},
	}
	var s AckStall
	for _, st := range steps {
		if got := s.See(st.a); got != st.want {
			t.Fatalf("%s: stalled for %s, want %s", st.name, got, st.want)
		}
	}
	s.See(waiting(10000, 20))
	s.Reset()
	if got := s.See(waiting(12000, 20)); got != 0 {
		t.Errorf("after Reset: stalled for %s, want a new wait", got)
	}
}

func TestAcksLost(t *testing.T) {
	src := Source{Host: primaryIP}
	holding := mariadb("db-1", 1001, "0-1000-9", "0-1000-10", topology.ThreadRunning)
	holding2 := mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadRunning)
	behind := mariadb("db-2", 1002, "0-1000-9", "0-1000-9", topology.ThreadRunning)
	lost := mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting)
	quarantined := holding2
	quarantined.Quarantined = true
	elsewhere := holding2
	elsewhere.Snapshot.Replica = &topology.ReplicaStatus{SourceHost: "other", IOThread: topology.ThreadRunning}
	tests := []struct {
		name    string
		members []Member
		wanted  int64
		ok      bool
		holders string
		why     string
	}{
		{"one replica received the waiting commit: lost", []Member{holding, behind}, 1, true, "db-1", ""},
		{"both did", []Member{holding, holding2}, 1, true, "db-1,db-2", ""},
		{"two acknowledgements wanted, one holder", []Member{holding, behind}, 2, false, "db-1", "1 of the 2"},
		{"the replica has not received it: it may still come", []Member{behind}, 1, false, "", "0-1000-10"},
		{"a replica that lost the primary proves nothing", []Member{lost}, 1, false, "", "does not receive"},
		{"a quarantined replica never counts", []Member{quarantined}, 1, false, "", "quarantined"},
		{"a replica of another source never counts", []Member{elsewhere}, 1, false, "", "does not receive"},
		{"no bound read", []Member{holding}, 1, false, "", "no bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bound := "0-1000-10"
			if tt.name == "no bound read" {
				bound = ""
			}
			holders, why, ok := AcksLost(src, tt.members, bound, tt.wanted)
			if ok != tt.ok || strings.Join(holders, ",") != tt.holders || !strings.Contains(why, tt.why) {
				t.Errorf("AcksLost = %v, %q, %v; want %v, %q with %q", holders, why, ok, tt.ok, tt.holders, tt.why)
			}
		})
	}
}
