package topology

import (
	"strings"
	"testing"
)

func TestParseReplicaStatusRecorded(t *testing.T) {
	lag := func(n int64) *int64 { return &n }
	tests := []struct {
		file          string
		host          string
		port          int
		io            ThreadState
		sql           bool
		lag           *int64
		ioErr, sqlErr int
		sourceID      uint32
		sourceUUID    string
		auto          bool
		received      string
		healthy       bool
	}{
		{
			"mysql80-replica-status.txt", "mysql-0.mysql.db.svc", 3306, ThreadRunning, true, lag(0), 0, 0, 100,
			"73f86016-978b-11ee-ade5-8d2a2a562feb", true, "73f86016-978b-11ee-ade5-8d2a2a562feb:1-42", true,
		},
		{
			"mysql80-replica-status-sql-error.txt", "mysql-0.mysql.db.svc", 3306, ThreadRunning, false, nil, 0, 1062, 100,
			"73f86016-978b-11ee-ade5-8d2a2a562feb", true, "73f86016-978b-11ee-ade5-8d2a2a562feb:1-44", false,
		},
		{
			"mysql84-replica-status.txt", "mysql-1.mysql.db.svc.cluster.local", 3306, ThreadRunning, true, lag(95), 0, 0, 2,
			"896e7882-18fe-11ef-ab88-22222d34d412", true, "896e7882-18fe-11ef-ab88-22222d34d412:1-900:batch:1-12", true,
		},
		{
			"mysql57-slave-status.txt", "mysql-0.mysql.db.svc", 3306, ThreadConnecting, true, nil, 2003, 0, 100,
			"3e11fa47-71ca-11e1-9e33-c80aa9429562", true, "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", false,
		},
		{
			"mariadb1011-slave-status.txt", "127.0.77.1", 3306, ThreadRunning, true, lag(0), 0, 0, 1,
			"", true, "", true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			v := readVertical(t, tt.file)
			if len(v.rows) != 1 {
				t.Fatalf("%d rows", len(v.rows))
			}
			r, err := ParseReplicaStatus(v.rows[0])
			if err != nil {
				t.Fatal(err)
			}
			if r.SourceHost != tt.host || r.SourcePort != tt.port || r.SourceUser != "repl" {
				t.Errorf("source = %s@%s:%d", r.SourceUser, r.SourceHost, r.SourcePort)
			}
			if r.IOThread != tt.io || r.SQLRunning != tt.sql {
				t.Errorf("threads IO=%s SQL=%v", r.IOThread, r.SQLRunning)
			}
			if (r.SecondsBehind == nil) != (tt.lag == nil) || (tt.lag != nil && *r.SecondsBehind != *tt.lag) {
				t.Errorf("lag = %v, want %v", r.SecondsBehind, tt.lag)
			}
			if tt.lag == nil && r.LagKnown() {
				t.Error("NULL lag reported as known")
			}
			if r.LastIOErrno != tt.ioErr || r.LastSQLErrno != tt.sqlErr {
				t.Errorf("errors IO=%d SQL=%d", r.LastIOErrno, r.LastSQLErrno)
			}
			if tt.ioErr != 0 && r.LastIOError == "" || tt.sqlErr != 0 && r.LastSQLError == "" {
				t.Error("error text lost")
			}
			if r.SourceServerID != tt.sourceID || r.SourceUUID != tt.sourceUUID {
				t.Errorf("source identity %d %q", r.SourceServerID, r.SourceUUID)
			}
			if r.AutoPosition != tt.auto {
				t.Errorf("AutoPosition = %v", r.AutoPosition)
			}
			if r.RetrievedGTIDSet != tt.received {
				t.Errorf("Retrieved_Gtid_Set = %q", r.RetrievedGTIDSet)
			}
			if r.Healthy() != tt.healthy {
				t.Errorf("Healthy() = %v", r.Healthy())
			}
			if r.SQLRemainingDelay != nil {
				t.Errorf("SQL_Remaining_Delay NULL read as %d", *r.SQLRemainingDelay)
			}
		})
	}
	r, _ := ParseReplicaStatus(readVertical(t, "mariadb1011-slave-status.txt").rows[0])
	if r.UsingGTID != "Slave_Pos" || r.GTIDIOPos != "0-1-105" || r.ConnectRetry != 1 {
		t.Errorf("MariaDB columns: %+v", r)
	}
	r, _ = ParseReplicaStatus(readVertical(t, "mysql84-replica-status.txt").rows[0])
	if !strings.Contains(r.ExecutedGTIDSet, "\n") {
		t.Error("the recorded multi-line Executed_Gtid_Set lost its line break; the fixture parser is wrong")
	}
}

func TestParseReplicaStatusInvalid(t *testing.T) {
	for _, row := range []Row{
		{"Source_Port": "x"},
		{"Replica_IO_Running": "Maybe"},
		{"Seconds_Behind_Source": "soon"},
		{"Source_Server_Id": "-1"},
		{"Last_IO_Errno": "1.5"},
	} {
		if _, err := ParseReplicaStatus(row); err == nil {
			t.Errorf("ParseReplicaStatus(%v) accepted", row)
		}
	}
	// The two spellings must not be confused: an empty lag column is NULL,
	// and the older name is read when the newer is absent.
	r, err := ParseReplicaStatus(Row{"Seconds_Behind_Master": "7", "Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes"})
	if err != nil || r.SecondsBehind == nil || *r.SecondsBehind != 7 || !r.Healthy() {
		t.Fatalf("old column names: %+v %v", r, err)
	}
}

func TestParseSemiSyncRecorded(t *testing.T) {
	vars := func(file string) map[string]string {
		m := map[string]string{}
		for _, r := range readVertical(t, file).rows {
			m[r["Variable_name"]] = r["Value"]
		}
		return m
	}
	s, err := ParseSemiSync(vars("mysql84-semisync-variables.txt"), vars("mysql84-semisync-status.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := SemiSyncState{
		Available: true, SourceEnabled: true, SourceActive: true, SourceClients: 2, WaitSessions: 3,
		TimeoutMillis: 10000, WaitForReplicas: 1, WaitPoint: "AFTER_SYNC", WaitNoReplica: true, NoTx: 1, YesTx: 1203,
	}
	if s != want {
		t.Errorf("MySQL 8.4 source:\n got %+v\nwant %+v", s, want)
	}
	s, err = ParseSemiSync(vars("mysql57-semisync-variables.txt"), vars("mysql57-semisync-status.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Available || s.SourceEnabled || !s.ReplicaEnabled || !s.ReplicaActive || s.SourceActive || s.WaitForReplicas != 1 {
		t.Errorf("MySQL 5.7 replica: %+v", s)
	}
	s, err = ParseSemiSync(nil, nil)
	if err != nil || s.Available {
		t.Errorf("no plugin: %+v %v", s, err)
	}
	if _, err := ParseSemiSync(map[string]string{"rpl_semi_sync_master_timeout": "ten"}, nil); err == nil {
		t.Error("non-numeric timeout accepted")
	}
}

func TestParseStateRecorded(t *testing.T) {
	f, _ := DetectFlavor("8.4.3", "MySQL")
	d, _ := DialectFor(f)
	st, err := d.ParseState(readVertical(t, "mysql84-state.txt").rows[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.ServerID != 3 || st.ServerUUID != "896e7882-18fe-11ef-ab88-22222d34d413" || !st.ReadOnly || st.SuperReadOnly == nil || !*st.SuperReadOnly {
		t.Errorf("identity/flags: %+v", st)
	}
	if got := st.GTID.Executed.String(); got != "896e7882-18fe-11ef-ab88-22222d34d411:1-4:aaaa:1,896e7882-18fe-11ef-ab88-22222d34d412:1-850:batch:1-10" {
		t.Errorf("executed = %s", got)
	}
	if st.GTID.Executed.Count() != 4+1+850+10 || !st.GTID.PurgedKnown || st.GTID.Purged.Count() != 5 {
		t.Errorf("counts: executed %d purged %d", st.GTID.Executed.Count(), st.GTID.Purged.Count())
	}
	for _, bad := range []Row{
		{"server_id": "x"},
		{"server_id": "1", "read_only": "maybe"},
		{"server_id": "1", "read_only": "0", "super_read_only": "0", "log_bin": "1", "gtid_executed": "nope"},
	} {
		if _, err := d.ParseState(bad); err == nil {
			t.Errorf("ParseState(%v) accepted", bad)
		}
	}
}
