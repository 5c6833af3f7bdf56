package topology

import (
	"slices"
	"strings"
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// A small snapshot builder: each option changes one fact, so a table row
// states exactly what differs from a healthy replica.

const (
	uuidP = "11111111-1111-1111-1111-111111111111" // current primary
	uuidR = "22222222-2222-2222-2222-222222222222" // the replica being judged
	uuidO = "33333333-3333-3333-3333-333333333333" // a former primary
	uuidX = "44444444-4444-4444-4444-444444444444" // a server that was never primary
)

type opt func(*Snapshot)

func mysqlSnap(name string, opts ...opt) Snapshot {
	f, _ := DetectFlavor("8.4.3", "MySQL")
	sro := true
	s := Snapshot{
		Name: name, Reachable: true, Flavor: f,
		State: State{
			ServerID: 2, ServerUUID: uuidR, ReadOnly: true, SuperReadOnly: &sro, GTIDMode: "ON", LogBin: true,
			GTID: GTIDState{Executed: gtid.MustParseMySQLSet(uuidP + ":1-100")},
		},
	}
	zero := int64(0)
	s.Replica = &ReplicaStatus{
		SourceHost: "mysql-0.mysql", SourcePort: 3306, SourceServerID: 1, SourceUUID: uuidP,
		IOThread: ThreadRunning, SQLRunning: true, SecondsBehind: &zero, AutoPosition: true,
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func mysqlPrimary(executed string) *Snapshot {
	p := mysqlSnap("mysql-0", func(s *Snapshot) {
		s.ServerID, s.ServerUUID, s.ReadOnly, s.Replica = 1, uuidP, false, nil
		f := false
		s.SuperReadOnly = &f
		s.GTID.Executed = gtid.MustParseMySQLSet(executed)
	})
	return &p
}

func mariaSnap(name string, opts ...opt) Snapshot {
	f, _ := DetectFlavor("10.11.6-MariaDB", "")
	strict := true
	pos := gtid.MustParseMariaDBPos("0-1-100")
	s := Snapshot{
		Name: name, Reachable: true, Flavor: f,
		State: State{
			ServerID: 2, ReadOnly: true, GTIDStrictMode: &strict, GTIDMode: "ON", LogBin: true,
			GTID: GTIDState{BinlogPos: pos, SlavePos: pos, CurrentPos: pos, IOPos: pos, BinlogState: pos.GTIDs()},
		},
	}
	zero := int64(0)
	s.Replica = &ReplicaStatus{
		SourceHost: "mariadb-0.mariadb", SourcePort: 3306, SourceServerID: 1,
		IOThread: ThreadRunning, SQLRunning: true, SecondsBehind: &zero, AutoPosition: true, UsingGTID: "Slave_Pos",
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func mariaPrimary(binlog string) *Snapshot {
	p := mariaSnap("mariadb-0", func(s *Snapshot) {
		s.ServerID, s.ReadOnly, s.Replica = 1, false, nil
		pos := gtid.MustParseMariaDBPos(binlog)
		s.GTID = GTIDState{BinlogPos: pos, CurrentPos: pos, BinlogState: pos.GTIDs()}
	})
	return &p
}

func withExecuted(set string) opt {
	return func(s *Snapshot) { s.GTID.Executed = gtid.MustParseMySQLSet(set) }
}

func withMariaBinlog(binlogPos, binlogState string) opt {
	return func(s *Snapshot) {
		s.GTID.BinlogPos = gtid.MustParseMariaDBPos(binlogPos)
		s.GTID.CurrentPos = s.GTID.BinlogPos
		list, err := gtid.ParseMariaDBGTIDList(binlogState)
		if err != nil {
			panic(err)
		}
		s.GTID.BinlogState = list
	}
}

func withReplica(f func(r *ReplicaStatus)) opt { return func(s *Snapshot) { f(s.Replica) } }

func lagOf(n int64) func(r *ReplicaStatus) { return func(r *ReplicaStatus) { r.SecondsBehind = &n } }

func TestClassify(t *testing.T) {
	primary := mysqlPrimary(uuidP + ":1-100")
	mprimary := mariaPrimary("0-1-100")
	tests := []struct {
		name     string
		in       ClassifyInput
		want     Class
		findings []Class
		evidence []string
	}{
		{
			name: "unreachable: refused",
			in:   ClassifyInput{Instance: Snapshot{Name: "mysql-1", Err: &ObserveError{Kind: ErrorRefused, Stage: "connect", Message: "connection refused"}}},
			want: ClassUnreachable, evidence: []string{"not reachable (refused) during connect: connection refused"},
		},
		{
			name: "answered but observation failed",
			in:   ClassifyInput{Instance: Snapshot{Name: "mysql-1", Reachable: true, Err: &ObserveError{Kind: ErrorOther, Stage: "read state", Message: "boom"}}},
			want: ClassUnreachable, evidence: []string{"answered, but the observation failed"},
		},
		{
			name: "healthy replica",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1"), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassReplicating, findings: []Class{ClassReplicating},
			evidence: []string{"source mysql-0.mysql:3306 is the expected primary mysql-0 (server_id 1)", "0 seconds behind", "no errant transactions"},
		},
		{
			name: "fresh server",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1", withExecuted(""), func(s *Snapshot) { s.Replica = nil }), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassUninitialized, findings: []Class{ClassUninitialized},
		},
		{
			name: "fresh MariaDB server (sequence 0 is no history)",
			in: ClassifyInput{Instance: mariaSnap("mariadb-1", func(s *Snapshot) {
				s.Replica = nil
				s.GTID = GTIDState{SlavePos: gtid.MustParseMariaDBPos("0-1-0")}
			}), ExpectedPrimary: "mariadb-0", Primary: mprimary},
			want: ClassUninitialized,
		},
		{
			name: "history but no replication",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1", func(s *Snapshot) { s.Replica = nil }), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassWrongSource, evidence: []string{"no replication configured although mysql-0 is the expected primary"},
		},
		{
			name: "the expected primary",
			in:   ClassifyInput{Instance: *mysqlPrimary(uuidP + ":1-100"), ExpectedPrimary: "mysql-0"},
			want: ClassPrimary, findings: []Class{ClassPrimary},
		},
		{
			name: "a fenced expected primary says so",
			in: ClassifyInput{Instance: func() Snapshot {
				p := *mysqlPrimary(uuidP + ":1-100")
				p.ReadOnly = true
				return p
			}(), ExpectedPrimary: "mysql-0"},
			want: ClassPrimary, evidence: []string{"read_only is ON: the primary refuses writes"},
		},
		{
			name: "no expected primary: a lone writer looks like a primary",
			in:   ClassifyInput{Instance: *mysqlPrimary(uuidP + ":1-100")},
			want: ClassPrimary, evidence: []string{"no expected primary was given"},
		},
		{
			name: "lagging by seconds",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1", withReplica(lagOf(31))), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassLagging, evidence: []string{"31 seconds behind the source (threshold 30)"},
		},
		{
			name: "lag within a custom threshold",
			in: ClassifyInput{
				Instance: mysqlSnap("mysql-1", withReplica(lagOf(31))), ExpectedPrimary: "mysql-0", Primary: primary,
				Thresholds: Thresholds{MaxLagSeconds: 60},
			},
			want: ClassReplicating,
		},
		{
			name: "unknown lag is not zero and not lagging",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-1", withReplica(func(r *ReplicaStatus) { r.SecondsBehind = nil })),
				ExpectedPrimary: "mysql-0", Primary: primary,
			},
			want: ClassReplicating, evidence: []string{"lag unknown (Seconds_Behind is NULL)"},
		},
		{
			name: "lagging by transactions",
			in: ClassifyInput{
				Instance: mysqlSnap("mysql-1", withExecuted(uuidP+":1-40")), ExpectedPrimary: "mysql-0", Primary: primary,
				Thresholds: Thresholds{MaxTransactionsBehind: 50},
			},
			want: ClassLagging, evidence: []string{"60 transactions behind the primary's snapshot (threshold 50)"},
		},
		{
			name: "IO thread stopped",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-1", withReplica(func(r *ReplicaStatus) { r.IOThread, r.SecondsBehind = ThreadStopped, nil })),
				ExpectedPrimary: "mysql-0", Primary: primary,
			},
			want: ClassIOBroken, findings: []Class{ClassIOBroken}, evidence: []string{"IO thread No, last IO error 0"},
		},
		{
			name: "IO thread cannot connect",
			in: ClassifyInput{Instance: mysqlSnap("mysql-1", withReplica(func(r *ReplicaStatus) {
				r.IOThread, r.LastIOErrno, r.LastIOError = ThreadConnecting, 2003, "error connecting to master"
			})), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassIOBroken, evidence: []string{"last IO error 2003: error connecting to master"},
		},
		{
			name: "IO thread reconnecting after a lost connection",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-1", withReplica(func(r *ReplicaStatus) { r.IOThread = ThreadConnecting })),
				ExpectedPrimary: "mysql-0", Primary: primary,
			},
			want: ClassIOBroken, evidence: []string{"lost its connection"},
		},
		{
			name: "first connection still in progress",
			in: ClassifyInput{Instance: mysqlSnap("mysql-1", withExecuted(""), withReplica(func(r *ReplicaStatus) {
				r.IOThread, r.SourceServerID, r.SourceUUID, r.SecondsBehind = ThreadConnecting, 0, "", nil
			})), ExpectedPrimary: "mysql-0", Primary: primary, PrimaryAddresses: []SourceAddress{{Host: "mysql-0.mysql", Port: 3306}}},
			want: ClassBootstrapping, findings: []Class{ClassBootstrapping}, evidence: []string{"connecting to mysql-0.mysql:3306 for the first time"},
		},
		{
			name: "connected but nothing applied yet",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1", withExecuted("")), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassBootstrapping, evidence: []string{"no transactions applied yet"},
		},
		{
			name: "SQL thread failed",
			in: ClassifyInput{Instance: mysqlSnap("mysql-1", withReplica(func(r *ReplicaStatus) {
				r.SQLRunning, r.LastSQLErrno, r.LastSQLError, r.SecondsBehind = false, 1062, "Duplicate entry", nil
			})), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassSQLBroken, findings: []Class{ClassSQLBroken}, evidence: []string{"last SQL error 1062: Duplicate entry"},
		},
		{
			name: "wrong source by identity",
			in: ClassifyInput{Instance: mysqlSnap("mysql-2", withReplica(func(r *ReplicaStatus) {
				r.SourceHost, r.SourceServerID, r.SourceUUID = "mysql-1.mysql", 2, uuidR
			})), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassWrongSource, evidence: []string{"source server_uuid " + uuidR + " is not the expected primary mysql-0's " + uuidP},
		},
		{
			name: "wrong source by address while the primary is unreachable",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-2", withReplica(func(r *ReplicaStatus) { r.SourceHost = "mysql-1.mysql" })),
				ExpectedPrimary: "mysql-0", Primary: &Snapshot{Name: "mysql-0", Err: &ObserveError{Kind: ErrorTimeout}},
				PrimaryAddresses: []SourceAddress{{Host: "mysql-0.mysql", Port: 3306}}, History: History{PrimaryUUIDs: []string{uuidP}},
			},
			want: ClassWrongSource, evidence: []string{"source mysql-1.mysql:3306 is none of the expected primary mysql-0's addresses"},
		},
		{
			name: "right source by address (case-insensitive DNS)",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-2", withReplica(func(r *ReplicaStatus) { r.SourceHost = "MYSQL-0.mysql" })),
				ExpectedPrimary: "mysql-0", PrimaryAddresses: []SourceAddress{{Host: "mysql-0.mysql"}}, History: History{PrimaryUUIDs: []string{uuidP}},
			},
			want: ClassReplicating, evidence: []string{"is an address of the expected primary"},
		},
		{
			name: "no GTID auto-positioning",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-1", withReplica(func(r *ReplicaStatus) { r.AutoPosition = false })),
				ExpectedPrimary: "mysql-0", Primary: primary,
			},
			want: ClassWrongSource, evidence: []string{"does not use GTID auto-positioning"},
		},
		{
			name: "writable replica",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1", func(s *Snapshot) { s.ReadOnly = false }), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassWritableReplica, findings: []Class{ClassWritableReplica},
		},
		{
			name: "errant write, SQL thread broken by it, writable: Errant first",
			in: ClassifyInput{
				Instance: mysqlSnap("mysql-1", withExecuted(uuidP+":1-100,"+uuidR+":1-2"), func(s *Snapshot) { s.ReadOnly = false },
					withReplica(func(r *ReplicaStatus) { r.SQLRunning, r.LastSQLErrno = false, 1062 })),
				ExpectedPrimary: "mysql-0", Primary: primary,
			},
			want: ClassErrant, findings: []Class{ClassErrant, ClassSQLBroken, ClassWritableReplica},
			evidence: []string{"errant transactions (from no known primary): " + uuidR + ":1-2"},
		},
		{
			name: "transactions of a former primary are not errant",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-1", withExecuted(uuidO+":1-50,"+uuidP+":1-100")),
				ExpectedPrimary: "mysql-0", Primary: mysqlPrimary(uuidO + ":1-48," + uuidP + ":1-100"), History: History{PrimaryUUIDs: []string{uuidO}},
			},
			want: ClassReplicating, evidence: []string{"has 2 transactions from known primaries that the current primary's snapshot lacks: " + uuidO + ":49-50"},
		},
		{
			name: "seeded history is not errant",
			in: ClassifyInput{
				Instance:        mysqlSnap("mysql-1", withExecuted(uuidX+":1-7,"+uuidP+":1-100")),
				ExpectedPrimary: "mysql-0", Primary: primary, History: History{MySQL: gtid.MustParseMySQLSet(uuidX + ":1-7")},
			},
			want: ClassReplicating,
		},
		{
			name: "newer transactions of the current primary are an observation race",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1", withExecuted(uuidP+":1-103")), ExpectedPrimary: "mysql-0", Primary: primary},
			want: ClassReplicating, evidence: []string{"has 3 transactions of the current primary newer than its snapshot"},
		},
		{
			name: "errant check needs a reference",
			in:   ClassifyInput{Instance: mysqlSnap("mysql-1", withExecuted(uuidX+":1")), ExpectedPrimary: "mysql-0", PrimaryAddresses: []SourceAddress{{Host: "mysql-0.mysql"}}},
			want: ClassReplicating, evidence: []string{"errant check skipped: no primary snapshot and no known primary history"},
		},
		{
			name: "MariaDB healthy replica",
			in:   ClassifyInput{Instance: mariaSnap("mariadb-1"), ExpectedPrimary: "mariadb-0", Primary: mprimary},
			want: ClassReplicating, evidence: []string{"no errant transactions: every binlog GTID comes from a known primary"},
		},
		{
			name: "MariaDB local write on a replica",
			in: ClassifyInput{
				Instance:        mariaSnap("mariadb-1", withMariaBinlog("0-2-101", "0-1-100,0-2-101"), func(s *Snapshot) { s.ReadOnly = false }),
				ExpectedPrimary: "mariadb-0", Primary: mprimary,
			},
			want: ClassErrant, findings: []Class{ClassErrant, ClassWritableReplica},
			evidence: []string{"binlog holds 0-2-101 from server_id 2 (this replica itself: a local write), which was never a primary"},
		},
		{
			name: "MariaDB divergence at the same sequence number",
			in: ClassifyInput{
				Instance:        mariaSnap("mariadb-1", withMariaBinlog("0-2-101", "0-1-100,0-2-101")),
				ExpectedPrimary: "mariadb-0", Primary: mariaPrimary("0-1-101"), History: History{PrimaryServerIDs: []uint32{2}},
			},
			want: ClassErrant, evidence: []string{"diverged from the primary (proven): domain 0: 0-2-101 vs 0-1-101: diverged"},
		},
		{
			name: "MariaDB: the primary's newer transactions are an observation race",
			in: ClassifyInput{
				Instance:        mariaSnap("mariadb-1", withMariaBinlog("0-1-105", "0-1-105")),
				ExpectedPrimary: "mariadb-0", Primary: mprimary,
			},
			want: ClassReplicating, evidence: []string{"ahead of the primary's snapshot on its own sequence"},
		},
		{
			name: "MariaDB: a former primary's transactions are not errant",
			in: ClassifyInput{
				Instance:        mariaSnap("mariadb-1", withMariaBinlog("0-1-120", "0-3-90,0-1-120")),
				ExpectedPrimary: "mariadb-0", Primary: mariaPrimary("0-1-120"), History: History{PrimaryServerIDs: []uint32{3}},
			},
			want: ClassReplicating,
		},
		{
			name: "MariaDB: seeded history is not errant",
			in: ClassifyInput{
				Instance:        mariaSnap("mariadb-1", withMariaBinlog("0-1-100", "0-9-40,0-1-100")),
				ExpectedPrimary: "mariadb-0", Primary: mprimary, History: History{MariaDB: gtid.MustParseMariaDBPos("0-9-40")},
			},
			want: ClassReplicating,
		},
		{
			name: "MariaDB lagging by sequence numbers",
			in: ClassifyInput{
				Instance:        mariaSnap("mariadb-1", withMariaBinlog("0-1-20", "0-1-20")),
				ExpectedPrimary: "mariadb-0", Primary: mprimary, Thresholds: Thresholds{MaxTransactionsBehind: 10},
			},
			want: ClassLagging, evidence: []string{"80 transactions behind the primary's snapshot (threshold 10)"},
		},
		{
			name: "MariaDB wrong source by server_id",
			in: ClassifyInput{
				Instance:        mariaSnap("mariadb-2", withReplica(func(r *ReplicaStatus) { r.SourceServerID = 3 })),
				ExpectedPrimary: "mariadb-0", Primary: mprimary,
			},
			want: ClassWrongSource, evidence: []string{"source server_id 3 is not the expected primary mariadb-0's 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Classify(tt.in)
			if c.Class != tt.want {
				t.Fatalf("class %v (findings %v), want %v\n%s", c.Class, c.Findings, tt.want, strings.Join(c.Evidence, "\n"))
			}
			if c.Findings[0] != c.Class {
				t.Fatalf("findings %v do not start with the class", c.Findings)
			}
			if tt.findings != nil && !slices.Equal(c.Findings, tt.findings) {
				t.Errorf("findings %v, want %v\n%s", c.Findings, tt.findings, strings.Join(c.Evidence, "\n"))
			}
			for _, e := range tt.evidence {
				if !containsLine(c.Evidence, e) {
					t.Errorf("evidence lacks %q:\n%s", e, strings.Join(c.Evidence, "\n"))
				}
			}
			if len(c.Evidence) == 0 {
				t.Error("a verdict without evidence")
			}
			// Pure: the same input gives the same verdict.
			again := Classify(tt.in)
			if again.Class != c.Class || !slices.Equal(again.Evidence, c.Evidence) {
				t.Error("Classify is not deterministic")
			}
		})
	}
}
