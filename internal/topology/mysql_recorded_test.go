package topology

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// These tests run the MySQL flavors end to end (Observe, Classify, actions)
// against recorded server output served by fakeServer. No MySQL server can
// run here (see README.md); the recordings follow the MySQL Reference Manual
// examples, and the fake refuses any statement it has no recording for, so
// the statements are pinned too.

const (
	mysqlStateSQL = "SELECT @@global.server_id AS server_id, @@global.server_uuid AS server_uuid," +
		" @@global.read_only AS read_only, @@global.super_read_only AS super_read_only," +
		" @@global.log_bin AS log_bin, @@global.gtid_mode AS gtid_mode," +
		" @@global.gtid_executed AS gtid_executed, @@global.gtid_purged AS gtid_purged"
	semiVarsSQL   = "SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync%'"
	semiStatusSQL = "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync%'"
)

var fixedNow = time.Date(2026, 3, 12, 10, 41, 7, 0, time.UTC)

func recordedMySQL(t *testing.T, version, stateFile, statusSQL, statusFile, semiPrefix string) *fakeServer {
	t.Helper()
	f := newFakeServer(t)
	f.onRow(versionQuery, "version", version, "version_comment", "MySQL Community Server - GPL")
	f.onFixture(mysqlStateSQL, stateFile)
	if statusFile == "" {
		f.onEmpty(statusSQL, "Replica_IO_State")
	} else {
		f.onFixture(statusSQL, statusFile)
	}
	if semiPrefix == "" {
		f.onEmpty(semiVarsSQL, "Variable_name", "Value")
		f.onEmpty(semiStatusSQL, "Variable_name", "Value")
	} else {
		f.onFixture(semiVarsSQL, semiPrefix+"-semisync-variables.txt")
		f.onFixture(semiStatusSQL, semiPrefix+"-semisync-status.txt")
	}
	return f
}

func primarySnapshot(t *testing.T, uuid, executed string) *Snapshot {
	t.Helper()
	f, _ := DetectFlavor("8.0.36", "MySQL")
	return &Snapshot{
		Name: "mysql-0", Reachable: true, Flavor: f,
		State: State{ServerID: 100, ServerUUID: uuid, GTID: GTIDState{Executed: gtid.MustParseMySQLSet(executed)}},
	}
}

func TestObserveRecordedMySQL80(t *testing.T) {
	f := recordedMySQL(t, "8.0.36", "mysql80-state.txt", "SHOW REPLICA STATUS", "mysql80-replica-status-sql-error.txt", "")
	db := f.db()
	defer db.Close()
	s := Observe(context.Background(), "mysql-2", db, ObserveOptions{Now: func() time.Time { return fixedNow }})
	if !s.Complete() {
		t.Fatalf("observation failed: %+v", s.Err)
	}
	if s.Flavor.Line != MySQL80 || !s.ObservedAt.Equal(fixedNow) || s.ServerUUID != "a1b2c3d4-0000-11ee-8000-0242ac120003" || s.ReadOnly {
		t.Errorf("snapshot: %+v", s)
	}
	if s.Replica == nil || s.Replica.SQLRunning || s.Replica.LastSQLErrno != 1062 || s.Replica.SecondsBehind != nil {
		t.Fatalf("replica status: %+v", s.Replica)
	}
	if got := s.GTID.Received.String(); got != "73f86016-978b-11ee-ade5-8d2a2a562feb:1-44" {
		t.Errorf("received = %s", got)
	}
	if s.SemiSync.Available {
		t.Error("semi-sync reported without its plugin variables")
	}
	wantStatements := []string{versionQuery, mysqlStateSQL, "SHOW REPLICA STATUS", semiVarsSQL, semiStatusSQL}
	if got := f.statements(); !slices.Equal(got, wantStatements) {
		t.Errorf("statements:\n%s", strings.Join(got, "\n"))
	}

	c := Classify(ClassifyInput{
		Instance: s, ExpectedPrimary: "mysql-0",
		Primary: primarySnapshot(t, "73f86016-978b-11ee-ade5-8d2a2a562feb", "73f86016-978b-11ee-ade5-8d2a2a562feb:1-44"),
	})
	if c.Class != ClassErrant || !c.Has(ClassSQLBroken) || !c.Has(ClassWritableReplica) || c.Has(ClassWrongSource) {
		t.Fatalf("classification %v %v\n%s", c.Class, c.Findings, strings.Join(c.Evidence, "\n"))
	}
	if !containsLine(c.Evidence, "errant transactions (from no known primary): a1b2c3d4-0000-11ee-8000-0242ac120003:1") {
		t.Errorf("evidence lacks the errant set:\n%s", strings.Join(c.Evidence, "\n"))
	}
}

func TestObserveRecordedMySQL84(t *testing.T) {
	f := recordedMySQL(t, "8.4.3", "mysql84-state.txt", "SHOW REPLICA STATUS", "mysql84-replica-status.txt", "mysql84")
	db := f.db()
	defer db.Close()
	s := Observe(context.Background(), "mysql-2", db, ObserveOptions{})
	if !s.Complete() {
		t.Fatalf("observation failed: %+v", s.Err)
	}
	if s.Flavor.Line != MySQL84 || s.SuperReadOnly == nil || !*s.SuperReadOnly {
		t.Errorf("flavor/flags: %v %v", s.Flavor, s.SuperReadOnly)
	}
	if s.Replica.SecondsBehind == nil || *s.Replica.SecondsBehind != 95 {
		t.Errorf("lag %v", s.Replica.SecondsBehind)
	}
	if !s.SemiSync.SourceEnabled || s.SemiSync.WaitSessions != 3 || s.SemiSync.SourceClients != 2 {
		t.Errorf("semi-sync %+v", s.SemiSync)
	}
	primary := primarySnapshot(t, "896e7882-18fe-11ef-ab88-22222d34d412",
		"896e7882-18fe-11ef-ab88-22222d34d411:1-4:aaaa:1,896e7882-18fe-11ef-ab88-22222d34d412:1-900:batch:1-12")
	primary.ServerID = 2
	c := Classify(ClassifyInput{
		Instance: s, ExpectedPrimary: "mysql-0", Primary: primary,
		Thresholds: Thresholds{MaxLagSeconds: 60, MaxTransactionsBehind: 10},
	})
	if c.Class != ClassLagging || len(c.Findings) != 1 {
		t.Fatalf("classification %v %v\n%s", c.Class, c.Findings, strings.Join(c.Evidence, "\n"))
	}
	for _, want := range []string{"95 seconds behind the source (threshold 60)", "52 transactions behind the primary's snapshot (threshold 10)"} {
		if !containsLine(c.Evidence, want) {
			t.Errorf("evidence lacks %q:\n%s", want, strings.Join(c.Evidence, "\n"))
		}
	}
}

func TestObserveRecordedMySQL57(t *testing.T) {
	f := recordedMySQL(t, "5.7.44-log", "mysql57-state.txt", "SHOW SLAVE STATUS", "mysql57-slave-status.txt", "mysql57")
	db := f.db()
	defer db.Close()
	s := Observe(context.Background(), "mysql-1", db, ObserveOptions{})
	if !s.Complete() {
		t.Fatalf("observation failed: %+v", s.Err)
	}
	if s.Flavor.Line != MySQL57 || s.ServerUUID != "4aaa0b1c-71ca-11e1-9e33-c80aa9429562" || *s.SuperReadOnly {
		t.Errorf("flavor/identity: %v %q", s.Flavor, s.ServerUUID)
	}
	if !s.SemiSync.ReplicaEnabled || !s.SemiSync.ReplicaActive {
		t.Errorf("semi-sync %+v", s.SemiSync)
	}
	c := Classify(ClassifyInput{
		Instance: s, ExpectedPrimary: "mysql-0",
		PrimaryAddresses: []SourceAddress{{Host: "mysql-0.mysql.db.svc", Port: 3306}},
		History:          History{PrimaryUUIDs: []string{"3e11fa47-71ca-11e1-9e33-c80aa9429562"}},
	})
	if c.Class != ClassIOBroken || len(c.Findings) != 1 {
		t.Fatalf("classification %v %v\n%s", c.Class, c.Findings, strings.Join(c.Evidence, "\n"))
	}
	if !containsLine(c.Evidence, "IO thread Connecting, last IO error 2003") {
		t.Errorf("evidence:\n%s", strings.Join(c.Evidence, "\n"))
	}
}

func TestObserveRecordedPrimaryWithoutReplication(t *testing.T) {
	f := recordedMySQL(t, "8.0.36", "mysql80-state.txt", "SHOW REPLICA STATUS", "", "")
	db := f.db()
	defer db.Close()
	s := Observe(context.Background(), "mysql-0", db, ObserveOptions{})
	if !s.Complete() || s.Replica != nil {
		t.Fatalf("snapshot %+v %+v", s.Err, s.Replica)
	}
	if c := Classify(ClassifyInput{Instance: s, ExpectedPrimary: "mysql-0"}); c.Class != ClassPrimary {
		t.Fatalf("classification %v", c.Class)
	}
}

func TestObserveRecordedFailures(t *testing.T) {
	f := newFakeServer(t)
	f.onRow(versionQuery, "version", "5.6.51", "version_comment", "MySQL Community Server (GPL)")
	db := f.db()
	defer db.Close()
	s := Observe(context.Background(), "old", db, ObserveOptions{})
	if !s.Reachable || s.Err == nil || s.Err.Stage != "detect flavor" || !strings.Contains(s.Err.Message, "5.7, 8.0 and 8.4 are supported") {
		t.Fatalf("unsupported version: %+v", s.Err)
	}
	if c := Classify(ClassifyInput{Instance: s}); c.Class != ClassUnreachable || !containsLine(c.Evidence, "answered, but the observation failed") {
		t.Fatalf("classification %v %v", c.Class, c.Evidence)
	}

	f = recordedMySQL(t, "8.0.36", "mysql80-state.txt", "SHOW REPLICA STATUS", "mysql80-replica-status.txt", "")
	f.fail(semiVarsSQL, errors.New("Error 1227: Access denied; you need the PROCESS privilege"))
	db2 := f.db()
	defer db2.Close()
	s = Observe(context.Background(), "r", db2, ObserveOptions{})
	if !s.Complete() || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "semi-sync state unknown") {
		t.Fatalf("optional part failing: %+v %v", s.Err, s.Warnings)
	}

	f = recordedMySQL(t, "8.0.36", "mysql80-state.txt", "SHOW REPLICA STATUS", "mysql80-replica-status.txt", "")
	f.fail("SHOW REPLICA STATUS", errors.New("boom"))
	db3 := f.db()
	defer db3.Close()
	s = Observe(context.Background(), "r", db3, ObserveOptions{})
	if s.Complete() || s.Err.Stage != "replica status" || s.Err.Kind != ErrorOther {
		t.Fatalf("replica status failing: %+v", s.Err)
	}
}

// TestActionsRecordedMySQL84 pins the exact statement sequence of every
// action on MySQL 8.4 through the action layer (plugin checks, installs,
// IO thread restarts, sql_log_bin handling).
func TestActionsRecordedMySQL84(t *testing.T) {
	f := newFakeServer(t)
	f.onRow(versionQuery, "version", "8.4.3", "version_comment", "MySQL Community Server - GPL")
	f.onRow("SELECT @@global.read_only AS read_only, @@global.super_read_only AS super_read_only", "read_only", 1, "super_read_only", 1)
	connections := "SELECT ID, USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()" +
		" AND USER NOT IN ('system user', 'event_scheduler') AND COMMAND NOT IN ('Binlog Dump', 'Binlog Dump GTID', 'Daemon', 'Killed') ORDER BY ID"
	f.on(connections, vertical{cols: []string{"ID", "USER", "HOST", "COMMAND", "TIME"}, rows: []Row{
		{"ID": "17", "USER": "app", "HOST": "127.0.0.9:41000", "COMMAND": "Sleep", "TIME": "3"},
		{"ID": "18", "USER": "app", "HOST": "127.0.0.9:41001", "COMMAND": "Query", "TIME": "0"},
	}})
	f.onRow("SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", "WAIT_FOR_EXECUTED_GTID_SET(?, ?)", 0)
	f.onEmpty("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ?", "PLUGIN_STATUS")
	db := f.db()
	defer db.Close()
	inst := NewInstance("mysql-0", db)
	ctx := context.Background()

	steps := []struct {
		name string
		run  func() error
		want []string
	}{
		{"fence", func() error { return inst.Fence(ctx) }, []string{versionQuery, "SET GLOBAL super_read_only = ON"}},
		{"verify", func() error {
			fs, err := inst.VerifyFence(ctx)
			if err == nil && (!fs.Verified || len(fs.ClientConnections) != 2) {
				err = errors.New("fence not verified")
			}
			return err
		}, []string{"SELECT @@global.read_only AS read_only, @@global.super_read_only AS super_read_only", connections}},
		{"kill", func() error {
			killed, err := inst.KillClientConnections(ctx)
			if err == nil && len(killed) != 2 {
				err = errors.New("not both killed")
			}
			return err
		}, []string{connections, "KILL CONNECTION 17", "KILL CONNECTION 18"}},
		{"stop io", func() error { return inst.StopIOThread(ctx) }, []string{"STOP REPLICA IO_THREAD"}},
		{
			"wait", func() error { return inst.WaitForGTID(ctx, "73f86016-978b-11ee-ade5-8d2a2a562feb:1-44", 3*time.Second) },
			[]string{"SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?) [73f86016-978b-11ee-ade5-8d2a2a562feb:1-44, 3]"},
		},
		{"reset", func() error { return inst.ResetReplication(ctx) }, []string{"STOP REPLICA", "RESET REPLICA ALL"}},
		{"writable", func() error { return inst.MakeWritable(ctx) }, []string{"SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}},
		{"repoint", func() error {
			return inst.Repoint(ctx, SourceSpec{Host: "mysql-1.mysql", Port: 3306, User: "repl", Password: "pa'ss\\word"})
		}, []string{
			"STOP REPLICA",
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'mysql-1.mysql', SOURCE_PORT = 3306, SOURCE_USER = 'repl', SOURCE_PASSWORD = ?," +
				" SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 10, GET_SOURCE_PUBLIC_KEY = 1 [pa'ss\\word]",
			"START REPLICA",
		}},
		{"semi-sync source", func() error {
			return inst.EnableSemiSyncSource(ctx, SemiSyncSourceSpec{Timeout: 10 * time.Second, WaitForReplicas: 1})
		}, []string{
			"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ? [rpl_semi_sync_source]",
			"INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so'",
			"SET GLOBAL rpl_semi_sync_source_timeout = 10000",
			"SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = 1",
			"SET GLOBAL rpl_semi_sync_source_wait_point = 'AFTER_SYNC'",
			"SET GLOBAL rpl_semi_sync_source_enabled = ON",
		}},
		{"semi-sync replica", func() error { return inst.EnableSemiSyncReplica(ctx) }, []string{
			"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ? [rpl_semi_sync_replica]",
			"INSTALL PLUGIN rpl_semi_sync_replica SONAME 'semisync_replica.so'",
			"SET GLOBAL rpl_semi_sync_replica_enabled = ON",
			"STOP REPLICA IO_THREAD",
			"START REPLICA IO_THREAD",
		}},
		{"semi-sync off without plugin is a no-op", func() error { return inst.DisableSemiSyncSource(ctx) }, []string{
			"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ? [rpl_semi_sync_source]",
		}},
		{"user", func() error {
			return inst.EnsureUser(ctx, UserSpec{User: "repl", Password: "r"}, EnsureUserOptions{SkipBinlog: true})
		}, []string{
			"SET SESSION sql_log_bin = 0",
			"CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY ? [r]",
			"ALTER USER 'repl'@'%' IDENTIFIED BY ? [r]",
			"GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'",
			// Replication reaches the source on its administrative interface (8.0.14+).
			"GRANT SERVICE_CONNECTION_ADMIN ON *.* TO 'repl'@'%'",
			"SET SESSION sql_log_bin = 1",
		}},
	}
	for _, step := range steps {
		f.reset()
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := f.statements(); !slices.Equal(got, step.want) {
			t.Errorf("%s sent:\n%s\nwant:\n%s", step.name, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
	}

	// A wait that times out on the server is ErrWaitTimeout, of kind timeout.
	f.onRow("SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", "r", 1)
	err := inst.WaitForGTID(ctx, "73f86016-978b-11ee-ade5-8d2a2a562feb:1-45", time.Second)
	if !errors.Is(err, ErrWaitTimeout) || KindOf(err) != ErrorTimeout {
		t.Fatalf("wait timeout: %v (%s)", err, KindOf(err))
	}
	f.onRow("SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", "r", nil)
	if err := inst.WaitForGTID(ctx, "x", time.Second); err == nil || errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("NULL wait result: %v", err)
	}
}

// TestActionsRecordedOlderMySQL checks the version-dependent words on the
// action path of 5.7 and 8.0.21.
func TestActionsRecordedOlderMySQL(t *testing.T) {
	for _, tt := range []struct {
		version string
		want    []string
	}{
		{"5.7.44-log", []string{
			versionQuery, "STOP SLAVE",
			"CHANGE MASTER TO MASTER_HOST = 'mysql-1', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = ?, MASTER_AUTO_POSITION = 1, MASTER_CONNECT_RETRY = 10 [pw]",
			"START SLAVE",
			"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ? [rpl_semi_sync_slave]",
			"SET GLOBAL rpl_semi_sync_slave_enabled = OFF", "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD",
		}},
		{"8.0.21", []string{
			versionQuery, "STOP SLAVE",
			"CHANGE MASTER TO MASTER_HOST = 'mysql-1', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = ?, MASTER_AUTO_POSITION = 1, MASTER_CONNECT_RETRY = 10, GET_MASTER_PUBLIC_KEY = 1 [pw]",
			"START SLAVE",
			"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ? [rpl_semi_sync_slave]",
			"SET GLOBAL rpl_semi_sync_slave_enabled = OFF", "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD",
		}},
	} {
		f := newFakeServer(t)
		f.onRow(versionQuery, "version", tt.version, "version_comment", "MySQL Community Server")
		f.onRow("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ?", "PLUGIN_STATUS", "ACTIVE")
		db := f.db()
		inst := NewInstance("mysql-0", db)
		ctx := context.Background()
		if err := inst.Repoint(ctx, SourceSpec{Host: "mysql-1", Port: 3306, User: "repl", Password: "pw"}); err != nil {
			t.Fatal(err)
		}
		if err := inst.DisableSemiSyncReplica(ctx); err != nil {
			t.Fatal(err)
		}
		if got := f.statements(); !slices.Equal(got, tt.want) {
			t.Errorf("%s sent:\n%s", tt.version, strings.Join(got, "\n"))
		}
		_ = db.Close()
	}
}

func containsLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func TestSemiSyncPluginOnFencedMySQLReplica(t *testing.T) {
	f := newFakeServer(t)
	f.onRow(versionQuery, "version", "8.4.3", "version_comment", "MySQL Community Server - GPL")
	f.onEmpty("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ?", "PLUGIN_STATUS")
	f.fail("INSTALL PLUGIN rpl_semi_sync_replica SONAME 'semisync_replica.so'", &mysql.MySQLError{
		Number: 1290, Message: "The MySQL server is running with the --super-read-only option so it cannot execute this statement",
	})
	db := f.db()
	defer db.Close()
	err := NewInstance("mysql-1", db).EnableSemiSyncReplica(context.Background())
	if err == nil || !strings.Contains(err.Error(), "plugin-load-add=semisync_replica.so") || !strings.Contains(err.Error(), "super-read-only") {
		t.Fatalf("error %v", err)
	}
	if got := f.statements(); slices.Contains(got, "SET GLOBAL rpl_semi_sync_replica_enabled = ON") {
		t.Fatalf("enabled without the plugin: %v", got)
	}
}

// TestInstanceFollowsUpgrade: a server upgraded in place (8.0.21 → 8.4.3)
// is addressed in its new dialect once it has been observed again.
func TestInstanceFollowsUpgrade(t *testing.T) {
	f := recordedMySQL(t, "8.0.21", "mysql80-state.txt", "SHOW SLAVE STATUS", "", "")
	db := f.db()
	defer db.Close()
	inst := NewInstance("mysql-1", db)
	ctx := context.Background()
	if s := inst.Observe(ctx, ObserveOptions{}); !s.Complete() {
		t.Fatalf("%+v", s.Err)
	}
	must(t, inst.StopReplica(ctx))
	f.onRow(versionQuery, "version", "8.4.3", "version_comment", "MySQL Community Server - GPL")
	f.onEmpty("SHOW REPLICA STATUS", "Replica_IO_State")
	if s := inst.Observe(ctx, ObserveOptions{}); !s.Complete() || s.Flavor.Line != MySQL84 {
		t.Fatalf("%+v %v", s.Err, s.Flavor)
	}
	f.reset()
	must(t, inst.StopReplica(ctx))
	if got := f.statements(); !slices.Equal(got, []string{"STOP REPLICA"}) {
		t.Fatalf("after the upgrade: %v", got)
	}
}

// TestActionsRecordedMySQL84Fenced pins the statement sequence of a fenced
// statement on MySQL 8.4 (fence.go): the fence locks, the stored epoch read
// after them, the first write of the token (table created, super_read_only
// lifted for it alone and put back, no binary logging), the statement, the
// release; and a refusal of an older epoch, which sends no statement.
func TestActionsRecordedMySQL84Fenced(t *testing.T) {
	f := newFakeServer(t)
	f.onRow(versionQuery, "version", "8.4.3", "version_comment", "MySQL Community Server - GPL")
	lockSQL := "SELECT IF(GET_LOCK(?, 1) = 1, GET_LOCK(?, ?), -1) AS got, IS_USED_LOCK(?) AS own, IS_USED_LOCK(?) AS holder"
	epochSQL := "SELECT (SELECT epoch FROM mysqlctl.fence WHERE id = 1) AS epoch, @@global.read_only AS read_only, @@global.super_read_only AS super_read_only"
	releaseSQL := "SELECT RELEASE_LOCK(?) AS fence, RELEASE_LOCK(?) AS own"
	f.onRow(lockSQL, "got", 1, "own", 12, "holder", 12)
	f.onRow(releaseSQL, "fence", 1, "own", 1)
	f.fail(epochSQL, &mysql.MySQLError{Number: erNoSuchTable, Message: "Table 'mysqlctl.fence' doesn't exist"})
	stateSQL := "SELECT @@global.read_only AS read_only, @@global.super_read_only AS super_read_only"
	f.onRow(stateSQL, "read_only", 1, "super_read_only", 1)
	db := f.db()
	defer db.Close()
	inst := NewInstance("mysql-0", db)
	inst.Epoch = func() int64 { return 5 }
	ctx := context.Background()
	lock := lockSQL + " [mysqlctl.fence.5, mysqlctl.fence, 2, mysqlctl.fence.5, mysqlctl.fence]"
	release := releaseSQL + " [mysqlctl.fence, mysqlctl.fence.5]"

	must(t, inst.Fence(ctx))
	want := []string{
		versionQuery, lock, epochSQL, stateSQL,
		// A global read lock holds the write at most a second (the fence goes on unstored).
		"SET SESSION lock_wait_timeout = 1",
		"SET SESSION sql_log_bin = 0",
		"SET GLOBAL super_read_only = OFF",
		"CREATE DATABASE IF NOT EXISTS mysqlctl",
		"CREATE TABLE IF NOT EXISTS mysqlctl.fence (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, epoch BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
		"INSERT INTO mysqlctl.fence (id, epoch) VALUES (1, ?) ON DUPLICATE KEY UPDATE epoch = GREATEST(epoch, ?) [5, 5]",
		"SET GLOBAL super_read_only = ON",
		"SET SESSION sql_log_bin = 1",
		"SET SESSION lock_wait_timeout = DEFAULT",
		"SET GLOBAL super_read_only = ON",
		release,
	}
	if got := f.statements(); !slices.Equal(got, want) {
		t.Errorf("first fenced statement sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	f.mu.Lock()
	delete(f.errs, epochSQL)
	f.mu.Unlock()
	for _, c := range []struct {
		stored any
		want   []string
		err    error
	}{
		{5, []string{lock, epochSQL, "STOP REPLICA", release}, nil},
		{9, []string{lock, epochSQL, release}, ErrSuperseded},
	} {
		f.reset()
		f.onRow(epochSQL, "epoch", c.stored, "read_only", 1, "super_read_only", 1)
		if err := inst.StopReplica(ctx); !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Fatalf("stored epoch %v: %v, want %v", c.stored, err, c.err)
		}
		if got := f.statements(); !slices.Equal(got, c.want) {
			t.Errorf("stored epoch %v sent:\n%s\nwant:\n%s", c.stored, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}
