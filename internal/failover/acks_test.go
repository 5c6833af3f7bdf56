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
	semi := func(m Member) Member { m.Snapshot.SemiSync.ReplicaActive = true; return m }
	holding := semi(mariadb("db-1", 1001, "0-1000-9", "0-1000-10", topology.ThreadRunning))
	holding2 := semi(mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadRunning))
	behind := semi(mariadb("db-2", 1002, "0-1000-9", "0-1000-9", topology.ThreadRunning))
	lost := semi(mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting))
	async := mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadRunning)
	quarantined := holding2
	quarantined.Quarantined = true
	elsewhere := holding2
	elsewhere.Snapshot.Replica = &topology.ReplicaStatus{SourceHost: "other", IOThread: topology.ThreadRunning}
	primary := func(wanted int64) topology.Snapshot {
		p := mariadb("db-0", 1000, "0-1000-10", "", topology.ThreadStopped).Snapshot
		p.Replica, p.SemiSync.WaitForReplicas = nil, wanted
		return p
	}
	mysqlPrimary := mysqlMember("db-0", 0, "00000000-0000-0000-0000-000000000000:1-10", "").Snapshot
	tests := []struct {
		name    string
		primary topology.Snapshot
		members []Member
		ok      bool
		holders string
		why     string
	}{
		{"one replica received the waiting commit: lost", primary(0), []Member{holding, behind}, true, "db-1", ""},
		{"both did", primary(1), []Member{holding, holding2}, true, "db-1,db-2", ""},
		{"two acknowledgements wanted, one holder", primary(2), []Member{holding, behind}, false, "db-1", "1 of the 2"},
		{"the replica has not received it: it may still come", primary(1), []Member{behind}, false, "", "0-1000-10"},
		{"a replica that lost the primary proves nothing", primary(1), []Member{lost}, false, "", "does not receive"},
		{"an asynchronous replica acknowledges nothing", primary(1), []Member{async}, false, "", "semi-sync off"},
		{"a quarantined replica never counts", primary(1), []Member{quarantined}, false, "", "quarantined"},
		{"a replica of another source never counts", primary(1), []Member{elsewhere}, false, "", "does not receive"},
		{"MySQL is never proven", mysqlPrimary, []Member{holding}, false, "", "MySQL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			holders, why, ok := AcksLost(src, tt.primary, tt.members)
			if ok != tt.ok || strings.Join(holders, ",") != tt.holders || !strings.Contains(why, tt.why) {
				t.Errorf("AcksLost = %v, %q, %v; want %v, %q with %q", holders, why, ok, tt.ok, tt.holders, tt.why)
			}
		})
	}
}
