package failover

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

const primaryIP = "127.0.9.10"

func ptr[T any](v T) *T { return &v }

// mariadb builds a MariaDB replica snapshot: current is gtid_current_pos, io the received
// position; the binlog state is derived from both.
func mariadb(name string, serverID uint32, current, io string, thread topology.ThreadState) Member {
	s := topology.Snapshot{Name: name, Reachable: true, Flavor: topology.Flavor{Line: topology.MariaDB}}
	s.ServerID = serverID
	s.GTID.CurrentPos = gtid.MustParseMariaDBPos(current)
	s.GTID.BinlogPos = s.GTID.CurrentPos
	s.GTID.BinlogState = s.GTID.CurrentPos.GTIDs()
	if io != "" {
		s.GTID.IOPos = gtid.MustParseMariaDBPos(io)
	}
	s.Replica = &topology.ReplicaStatus{SourceHost: primaryIP, IOThread: thread, SQLRunning: true}
	if thread != topology.ThreadRunning {
		s.Replica.LastIOError = "error reconnecting to master"
	}
	ord := int32(name[len(name)-1] - '0')
	return Member{Name: name, Ordinal: ord, Snapshot: s}
}

func withVersion(m Member, major, minor, patch int) Member {
	m.Snapshot.Flavor.Version = topology.Version{Major: major, Minor: minor, Patch: patch}
	return m
}

func mysqlMember(name string, ord int32, executed, received string) Member {
	s := topology.Snapshot{Name: name, Reachable: true, Flavor: topology.Flavor{Line: topology.MySQL80}}
	s.ServerUUID = "00000000-0000-0000-0000-00000000000" + string(rune('0'+ord))
	s.GTID.Executed = gtid.MustParseMySQLSet(executed)
	s.GTID.Received = gtid.MustParseMySQLSet(received)
	s.Replica = &topology.ReplicaStatus{SourceHost: primaryIP, IOThread: topology.ThreadConnecting, SQLRunning: true}
	return Member{Name: name, Ordinal: ord, Snapshot: s}
}

func TestJudge(t *testing.T) {
	down := Check{PodUID: "u1", Detail: "connection refused"}
	lost := []Member{mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting), mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadStopped)}
	tests := []struct {
		name    string
		checks  []Check
		members []Member
		want    Verdict
		reason  string
	}{
		{"writable primary is alive", []Check{{PodUID: "u1", Reachable: true, Writable: true}}, lost, Alive, "use switchover"},
		{"restarted read-only primary can be fenced over SQL", []Check{down, {PodUID: "u1", Reachable: true}}, lost, ReadOnly, "read-only"},
		{"threshold reached and replicas agree", []Check{down, down, down}, lost, Dead, "every reachable replica"},
		{"below threshold", []Check{down, down}, lost, Unreachable, "2 of the 3"},
		{"a reachable check resets the count", []Check{down, down, {PodUID: "u1", Reachable: true, Writable: true}, down}, lost, Unreachable, "1 of the 3"},
		{"a new pod incarnation resets the count", []Check{down, down, {PodUID: "u2", Detail: "refused"}}, lost, Unreachable, "1 of the 3"},
		{
			"a replica still receiving means unreachable, not dead",
			[]Check{down, down, down},
			[]Member{lost[0], mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadRunning)},
			Unreachable, "db-2 still receive",
		},
		{"no replica can corroborate", []Check{down, down, down}, nil, Unreachable, "no replica can corroborate"},
		{
			"a receiver stopped cleanly (maintenance STOP SLAVE) is no evidence of death",
			[]Check{down, down, down},
			func() []Member {
				m := mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadStopped)
				m.Snapshot.Replica.LastIOError = ""
				return []Member{m}
			}(),
			Unreachable, "no replica can corroborate",
		},
		{
			"quarantined replicas do not corroborate",
			[]Check{down, down, down},
			[]Member{{Name: "db-1", Quarantined: true, Snapshot: lost[0].Snapshot}},
			Unreachable, "no replica can corroborate",
		},
		{
			"a quarantined replica still receiving proves the primary alive",
			[]Check{down, down, down},
			[]Member{lost[0], {Name: "db-2", Quarantined: true, Snapshot: mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadRunning).Snapshot}},
			Unreachable, "db-2 still receive",
		},
		{
			"replicas of another source do not corroborate",
			[]Check{down, down, down},
			func() []Member {
				m := mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadStopped)
				m.Snapshot.Replica.SourceHost = "127.0.9.99"
				return []Member{m}
			}(),
			Unreachable, "no replica can corroborate",
		},
		{"pod state is evidence", []Check{down, down, {PodUID: "u1", PodState: "absent"}}, lost, Dead, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Judge("db-0", Source{Host: primaryIP}, tt.checks, 3, tt.members)
			if j.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s (%s; %v)", j.Verdict, tt.want, j.Reason, j.Evidence)
			}
			if !strings.Contains(j.Reason, tt.reason) {
				t.Errorf("reason %q does not mention %q", j.Reason, tt.reason)
			}
			if len(j.Evidence) == 0 {
				t.Error("no evidence recorded")
			}
		})
	}
}

func TestElect(t *testing.T) {
	known := topology.History{PrimaryServerIDs: []uint32{1000}}
	tests := []struct {
		name      string
		in        ElectInput
		want      string
		safe      bool
		errPart   string
		rejectHas string
		reasonHas string
	}{
		{
			name: "most advanced wins",
			in: ElectInput{History: known, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
				mariadb("db-2", 1002, "0-1000-9", "0-1000-12", topology.ThreadConnecting),
			}},
			want: "db-2", safe: true, rejectHas: "db-1: lacks transactions db-2 has",
		},
		{
			name: "ties go to the lowest ordinal",
			in: ElectInput{History: known, Members: []Member{
				mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting),
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
			}},
			want: "db-1", safe: true, rejectHas: "db-2: safe, but less advanced",
		},
		{
			name: "mid-upgrade, the oldest server among equals wins: no replica follows a newer source",
			in: ElectInput{History: known, Members: []Member{
				withVersion(mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting), 11, 4, 0),
				withVersion(mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting), 10, 11, 6),
			}},
			want: "db-2", safe: true, rejectHas: "db-1: safe, but less advanced", reasonHas: "oldest server version (10.11.6, older than db-1 11.4.0)",
		},
		{
			name: "a newer server that holds more transactions still wins: data first",
			in: ElectInput{History: known, Members: []Member{
				withVersion(mariadb("db-1", 1001, "0-1000-11", "", topology.ThreadConnecting), 11, 4, 0),
				withVersion(mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting), 10, 11, 6),
			}},
			want: "db-1", safe: true, rejectHas: "db-2: lacks transactions db-1 has", reasonHas: "newer (11.4.0) than db-2 10.11.6, which will follow a newer source",
		},
		{
			name: "a server whose version is unknown comes after the known ones",
			in: ElectInput{History: known, Members: []Member{
				func() Member {
					m := mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting)
					m.Snapshot.Flavor.Line = ""
					return m
				}(),
				withVersion(mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting), 11, 4, 0),
			}},
			want: "db-2", safe: true, rejectHas: "db-1: safe, but less advanced",
		},
		{
			name: "an errant replica is never elected even when it looks most advanced",
			in: ElectInput{History: known, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
				func() Member {
					m := mariadb("db-2", 1002, "0-1002-11", "", topology.ThreadConnecting)
					m.Snapshot.GTID.BinlogState = []gtid.MariaDBGTID{{Domain: 0, ServerID: 1000, Seq: 10}, {Domain: 0, ServerID: 1002, Seq: 11}}
					return m
				}(),
			}},
			want: "db-1", safe: true, rejectHas: "db-2: errant transactions",
		},
		{
			name: "requested candidate that lacks transactions is refused",
			in: ElectInput{History: known, Requested: "db-1", Members: []Member{
				mariadb("db-1", 1001, "0-1000-8", "", topology.ThreadConnecting),
				mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting),
			}},
			errPart: "requested instance db-1 is not provably safe",
		},
		{
			name: "requested safe candidate is chosen over a more advanced one only if it holds everything",
			in: ElectInput{History: known, Requested: "db-2", Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
				mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting),
			}},
			want: "db-2", safe: true, rejectHas: "db-1: safe, but not the requested",
		},
		{
			name: "a missing member blocks: it may hold acknowledged transactions",
			in: ElectInput{History: known, Missing: []string{"db-2"}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
			}},
			errPart: "db-2 cannot be observed",
		},
		{
			name: "an absent member whose bound the candidate holds is harmless",
			in: ElectInput{History: known, Missing: []string{"db-2"}, Absent: []Absence{{Name: "db-2", Bound: "0-1000-9"}}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
			}},
			want: "db-1", safe: true, rejectHas: "db-2: absent since",
		},
		{
			name: "an absent member's bound counts what the candidate received, not only what it applied",
			in: ElectInput{History: known, Missing: []string{"db-2"}, Absent: []Absence{{Name: "db-2", Bound: "0-1000-12"}}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "0-1000-12", topology.ThreadConnecting),
			}},
			want: "db-1", safe: true, rejectHas: "harmless: the candidate holds its recorded bound 0-1000-12",
		},
		{
			name: "an absent member whose bound the candidate lacks blocks",
			in: ElectInput{History: known, Missing: []string{"db-2"}, Absent: []Absence{{Name: "db-2", Bound: "0-1000-11"}}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
			}},
			errPart: "db-1: not provably complete while db-2 cannot be observed: it lacks 0-1000-11",
		},
		{
			name: "an absent member without a bound blocks",
			in: ElectInput{History: known, Missing: []string{"db-2"}, Absent: []Absence{{Name: "db-2"}}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
			}},
			errPart: "no bound recorded",
		},
		{
			name: "a bound held by one candidate only elects that one",
			in: ElectInput{History: known, Missing: []string{"db-3"}, Absent: []Absence{{Name: "db-3", Bound: "0-1000-10"}}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-9", "", topology.ThreadConnecting),
				mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting),
			}},
			want: "db-2", safe: true, rejectHas: "db-3: absent since",
		},
		{
			name: "a bound from another server in the domain is not held on position alone",
			in: ElectInput{History: topology.History{PrimaryServerIDs: []uint32{1000, 1001}}, Missing: []string{"db-2"}, Absent: []Absence{{Name: "db-2", Bound: "0-1001-5"}}, Members: []Member{
				mariadb("db-1", 1002, "0-1000-10", "", topology.ThreadConnecting),
			}},
			errPart: "it lacks",
		},
		{
			name: "MySQL: an absent member's bound held",
			in: ElectInput{History: topology.History{PrimaryUUIDs: []string{"00000000-0000-0000-0000-000000000000"}}, Missing: []string{"db-3"},
				Absent: []Absence{{Name: "db-3", Bound: "00000000-0000-0000-0000-000000000000:1-11"}}, Members: []Member{
					mysqlMember("db-1", 1, "00000000-0000-0000-0000-000000000000:1-10", "00000000-0000-0000-0000-000000000000:1-12"),
				}},
			want: "db-1", safe: true, rejectHas: "harmless",
		},
		{
			name: "force overrides with an unsafe decision",
			in: ElectInput{History: known, Force: true, Missing: []string{"db-2"}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
			}},
			want: "db-1", safe: false,
		},
		{
			name: "lag above the bound is refused",
			in: ElectInput{History: known, MaxLag: 5 * time.Second, Members: []Member{
				func() Member {
					m := mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting)
					m.LastKnownLag = ptr(int64(60))
					return m
				}(),
			}},
			errPart: "60s behind",
		},
		{
			name: "a stopped applier is refused",
			in: ElectInput{History: known, Members: []Member{
				func() Member {
					m := mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting)
					m.Snapshot.Replica.SQLRunning, m.Snapshot.Replica.LastSQLErrno, m.Snapshot.Replica.LastSQLError = false, 1062, "Duplicate entry"
					return m
				}(),
			}},
			errPart: "applier stopped with error 1062",
		},
		{
			name: "MariaDB: a lower position from another server is not contained (binlog state proves it)",
			in: ElectInput{History: topology.History{PrimaryServerIDs: []uint32{1000, 1001}}, Members: []Member{
				func() Member {
					// Was primary (1001) for a while: 0-1001-105 is its last.
					m := mariadb("db-1", 1001, "0-1001-105", "", topology.ThreadConnecting)
					m.Snapshot.GTID.BinlogState = []gtid.MariaDBGTID{{Domain: 0, ServerID: 1000, Seq: 100}, {Domain: 0, ServerID: 1001, Seq: 105}}
					return m
				}(),
				func() Member {
					// Holds 0-1000-101, which db-1 never received although 101 < 105.
					m := mariadb("db-2", 1002, "0-1000-101", "", topology.ThreadConnecting)
					m.Snapshot.GTID.BinlogState = []gtid.MariaDBGTID{{Domain: 0, ServerID: 1000, Seq: 101}}
					return m
				}(),
			}},
			errPart: "db-1: lacks transactions db-2 has: 0-1000-101",
		},
		{
			name: "force prefers a clean replica over a more advanced errant one",
			in: ElectInput{History: known, Force: true, Missing: []string{"db-3"}, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
				func() Member {
					m := mariadb("db-2", 1002, "0-1002-11", "", topology.ThreadConnecting)
					m.Snapshot.GTID.BinlogState = []gtid.MariaDBGTID{{Domain: 0, ServerID: 1000, Seq: 10}, {Domain: 0, ServerID: 1002, Seq: 11}}
					return m
				}(),
			}},
			want: "db-1", safe: false,
		},
		{
			name: "MySQL: received transactions count",
			in: ElectInput{History: topology.History{PrimaryUUIDs: []string{"00000000-0000-0000-0000-000000000000"}}, Members: []Member{
				mysqlMember("db-1", 1, "00000000-0000-0000-0000-000000000000:1-10", "00000000-0000-0000-0000-000000000000:1-12"),
				mysqlMember("db-2", 2, "00000000-0000-0000-0000-000000000000:1-11", ""),
			}},
			want: "db-1", safe: true,
		},
		{
			name: "MySQL: an errant GTID disqualifies",
			in: ElectInput{History: topology.History{PrimaryUUIDs: []string{"00000000-0000-0000-0000-000000000000"}}, Members: []Member{
				mysqlMember("db-1", 1, "00000000-0000-0000-0000-000000000000:1-10,00000000-0000-0000-0000-000000000001:1", ""),
				mysqlMember("db-2", 2, "00000000-0000-0000-0000-000000000000:1-10", ""),
			}},
			want: "db-2", safe: true, rejectHas: "db-1: errant",
		},
		{
			name: "quarantined members are neither candidates nor counted",
			in: ElectInput{History: known, Members: []Member{
				mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting),
				func() Member {
					m := mariadb("db-2", 1002, "0-1000-20", "", topology.ThreadConnecting)
					m.Quarantined = true
					return m
				}(),
			}},
			want: "db-1", safe: true, rejectHas: "db-2: quarantined",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Elect(tt.in)
			if tt.errPart != "" {
				if !errors.Is(err, ErrNoSafeCandidate) || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("err = %v, want ErrNoSafeCandidate mentioning %q", err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatalf("Elect: %v", err)
			}
			if d.Candidate != tt.want || d.Safe != tt.safe {
				t.Fatalf("chose %s (safe %v), want %s (safe %v); rejected %v", d.Candidate, d.Safe, tt.want, tt.safe, d.Rejected)
			}
			if d.Reason == "" || d.CandidateSet == "" {
				t.Errorf("decision lacks evidence: %+v", d)
			}
			if !strings.Contains(d.Reason, tt.reasonHas) {
				t.Errorf("reason %q does not include %q", d.Reason, tt.reasonHas)
			}
			if tt.rejectHas != "" && !strings.Contains(strings.Join(d.Rejected, "\n"), tt.rejectHas) {
				t.Errorf("rejected %v does not include %q", d.Rejected, tt.rejectHas)
			}
		})
	}
}

// TestElectDrained: Drained says whether the chosen candidate has applied everything it
// received; a received transaction it has not applied (by set or by MariaDB's per-server
// binlog state) means WaitingForRelayLog must run.
func TestElectDrained(t *testing.T) {
	const u0 = "00000000-0000-0000-0000-000000000009"
	tests := []struct {
		name    string
		members []Member
		want    bool
	}{
		{"MySQL: received all applied", []Member{mysqlMember("db-1", 1, u0+":1-10", u0+":1-10"), mysqlMember("db-2", 2, u0+":1-9", u0+":1-9")}, true},
		{"MySQL: nothing received on this connection", []Member{mysqlMember("db-1", 1, u0+":1-10", ""), mysqlMember("db-2", 2, u0+":1-9", u0+":1-9")}, true},
		{"MySQL: one received transaction not applied", []Member{mysqlMember("db-1", 1, u0+":1-9", u0+":1-10"), mysqlMember("db-2", 2, u0+":1-9", u0+":1-9")}, false},
		{"MariaDB: received position applied", []Member{mariadb("db-1", 1001, "0-1000-10", "0-1000-10", topology.ThreadStopped), mariadb("db-2", 1002, "0-1000-9", "", topology.ThreadStopped)}, true},
		{"MariaDB: received position ahead of the applied one", []Member{mariadb("db-1", 1001, "0-1000-9", "0-1000-11", topology.ThreadStopped), mariadb("db-2", 1002, "0-1000-9", "", topology.ThreadStopped)}, false},
		{"MariaDB: another domain received, not applied", []Member{mariadb("db-1", 1001, "0-1000-10", "0-1000-10,1-1000-3", topology.ThreadStopped), mariadb("db-2", 1002, "0-1000-9", "", topology.ThreadStopped)}, false},
		{"MariaDB: position applied but the binlog lacks the source's server", []Member{func() Member {
			m := mariadb("db-1", 1001, "0-1000-10", "0-1000-10", topology.ThreadStopped)
			m.Snapshot.GTID.BinlogState = nil // applied without log_slave_updates: the binlog proves nothing
			return m
		}(), mariadb("db-2", 1002, "0-1000-9", "", topology.ThreadStopped)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Elect(ElectInput{Members: tt.members})
			if err != nil {
				t.Fatal(err)
			}
			if d.Candidate != "db-1" {
				t.Fatalf("candidate %s, want db-1 (%s)", d.Candidate, d.Reason)
			}
			if d.Drained != tt.want {
				t.Errorf("Drained = %v, want %v (candidate set %s)", d.Drained, tt.want, d.CandidateSet)
			}
		})
	}
}

// TestCorroboratedSilenceConfirmsFast: a primary that only times out is re-checked at the full
// interval (the path from the supervisor may be what failed) unless every reachable replica has
// lost it too; then the confirming checks follow at once. One replica still receiving, or no
// replica to ask, keeps the full interval, and corroboration never lowers the threshold.
func TestCorroboratedSilenceConfirmsFast(t *testing.T) {
	silent := Check{PodUID: "u1", Detail: "i/o timeout"}
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	silentAt := func(d time.Duration) Check { c := silent; c.At = start.Add(d); return c }
	refusedAt := func(d time.Duration) Check {
		return Check{PodUID: "u1", Refused: true, Detail: "connection refused", At: start.Add(d)}
	}
	lost := []Member{mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting), mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadStopped)}
	receiving := []Member{lost[0], mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadRunning)}
	p := Policy{Threshold: 3, Interval: time.Second, Auto: true}
	now := time.Now()
	for _, tc := range []struct {
		name    string
		checks  []Check
		members []Member
		next    time.Duration
		state   string
	}{
		{"every replica lost it", []Check{silent}, lost, 125 * time.Millisecond, HASuspected},
		{"one replica still receives", []Check{silent}, receiving, time.Second, HASuspected},
		{"no replica to ask", []Check{silent}, nil, time.Second, HASuspected},
		{"two corroborated silences are still below the threshold", []Check{silent, silent}, lost, 125 * time.Millisecond, HASuspected},
		{"the threshold declares it dead", []Check{silentAt(0), silentAt(time.Second), silentAt(2 * time.Second)}, lost, time.Second, HAFailoverRequired},
		// Fast re-checks reach the threshold before the primary has been silent for
		// MinSilence (1.5 s here): a stall that short is never failed over.
		{"three fast silences are too short a silence", []Check{silentAt(0), silentAt(625 * time.Millisecond), silentAt(1250 * time.Millisecond)}, lost, 125 * time.Millisecond, HASuspected},
		{"the next check is timed to end at the minimum silence", []Check{silentAt(0), silentAt(300 * time.Millisecond), silentAt(600 * time.Millisecond)}, lost, 400 * time.Millisecond, HASuspected},
		{"a silence as long as the minimum declares it dead", []Check{silentAt(0), silentAt(625 * time.Millisecond), silentAt(1250 * time.Millisecond), silentAt(1500 * time.Millisecond)}, lost, time.Second, HAFailoverRequired},
		{"refusals are no silence: the count alone", []Check{refusedAt(0), refusedAt(125 * time.Millisecond), refusedAt(250 * time.Millisecond)}, lost, time.Second, HAFailoverRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := Judge("db-0", Source{Host: primaryIP}, tc.checks, 3, tc.members)
			a := Assess("c", tc.checks, j, p, now)
			if a.Next != tc.next || a.State != tc.state {
				t.Errorf("next %s state %s (%s), want %s %s", a.Next, a.State, a.Reason, tc.next, tc.state)
			}
			if a.Failover != (tc.state == HAFailoverRequired) {
				t.Errorf("failover %v after %d checks", a.Failover, len(tc.checks))
			}
		})
	}
}

// TestAnsweredErrorsDoNotCorroborate: a receiver whose last error came from the primary itself
// (a wrong password, too many connections) shows the primary answered; only lost, refused or
// timed-out connections (and a receiver still connecting with no error) corroborate a death.
func TestAnsweredErrorsDoNotCorroborate(t *testing.T) {
	silent := []Check{{PodUID: "u1", Detail: "i/o timeout"}, {PodUID: "u1", Detail: "i/o timeout"}, {PodUID: "u1", Detail: "i/o timeout"}}
	for _, tc := range []struct {
		errno int
		dead  bool
	}{{0, true}, {2003, true}, {2013, true}, {1159, true}, {1045, false}, {1040, false}, {1236, false}} {
		m1 := mariadb("db-1", 1001, "0-1000-10", "", topology.ThreadConnecting)
		m2 := mariadb("db-2", 1002, "0-1000-10", "", topology.ThreadConnecting)
		m1.Snapshot.Replica.LastIOErrno, m2.Snapshot.Replica.LastIOErrno = tc.errno, tc.errno
		j := Judge("db-0", Source{Host: primaryIP}, silent, 3, []Member{m1, m2})
		if (j.Verdict == Dead) != tc.dead || j.Corroborated != tc.dead {
			t.Errorf("receivers connecting with error %d: verdict %s corroborated %v, want dead %v (%s)", tc.errno, j.Verdict, j.Corroborated, tc.dead, j.Reason)
		}
	}
}
