package topology

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// These tests pin, through the fake driver, the statement sequences that
// keep READ_ONLY ADMIN off every session that does not need it: on MariaDB
// the statements that need the privilege run on one pinned session between
// SET ROLE mysqlctl_read_only_admin and SET ROLE NONE, and nothing else
// does. accounts_live_test.go runs the same actions against real servers.

const (
	mariadbVersion = "10.11.6-MariaDB-log"
	setRole        = "SET ROLE " + ReadOnlyAdminRole
)

func mariadbFake(t *testing.T) (*fakeServer, Dialect) {
	t.Helper()
	f := newFakeServer(t)
	f.onRow(versionQuery, "version", mariadbVersion, "version_comment", "mariadb.org binary distribution")
	fl, err := DetectFlavor(mariadbVersion, "")
	must(t, err)
	d, err := DialectFor(fl)
	must(t, err)
	return f, d
}

func writeThroughRows() vertical {
	return vertical{cols: []string{"ID", "USER", "HOST", "COMMAND", "TIME", "WHY", "BLOCKING"}, rows: []Row{
		{"ID": "17", "USER": "root", "HOST": "10.0.0.9:4100", "COMMAND": "Sleep", "TIME": "3", "WHY": "holds READ_ONLY ADMIN (root@%)", "BLOCKING": "1"},
		{"ID": "17", "USER": "root", "HOST": "10.0.0.9:4100", "COMMAND": "Sleep", "TIME": "3", "WHY": "can SET ROLE r, which carries READ_ONLY ADMIN (root@%)", "BLOCKING": "0"},
		{"ID": "18", "USER": "mysqlctl", "HOST": "10.0.0.8:4101", "COMMAND": "Sleep", "TIME": "1", "WHY": "can SET ROLE mysqlctl_read_only_admin, which carries READ_ONLY ADMIN (mysqlctl@%)", "BLOCKING": "0"},
		{"ID": "21", "USER": "app", "HOST": "10.0.0.7:4102", "COMMAND": "Query", "TIME": "0", "WHY": "default role w carries READ_ONLY ADMIN (app@%)", "BLOCKING": "1"},
		{"ID": "21", "USER": "app", "HOST": "10.0.0.7:4102", "COMMAND": "Query", "TIME": "0", "WHY": "PUBLIC carries READ_ONLY ADMIN (%@%)", "BLOCKING": "1"},
	}}
}

func TestReadOnlyAdminRecordedMariaDB(t *testing.T) {
	f, d := mariadbFake(t)
	f.onRow("SELECT @@global.read_only AS read_only", "read_only", 1)
	f.on(d.WriteThroughSessionsQuery().SQL, writeThroughRows())
	conns, _ := d.ClientConnectionsQuery(nil)
	f.on(conns.SQL, vertical{cols: []string{"ID", "USER", "HOST", "COMMAND", "TIME"}, rows: []Row{
		{"ID": "17", "USER": "root", "HOST": "10.0.0.9:4100", "COMMAND": "Sleep", "TIME": "3"},
	}})
	hosts, _ := d.AccountHostsQuery("root")
	f.on(hosts.SQL, vertical{cols: []string{"host"}, rows: []Row{{"host": "%"}, {"host": "localhost"}}})
	killList := "SELECT p.ID, p.USER, p.HOST, p.COMMAND, p.TIME FROM information_schema.PROCESSLIST p WHERE " +
		clientSessionFilter + " AND p.USER = ? ORDER BY p.ID"
	f.on(killList, vertical{cols: []string{"ID", "USER", "HOST", "COMMAND", "TIME"}, rows: []Row{
		{"ID": "17", "USER": "root", "HOST": "10.0.0.9:4100", "COMMAND": "Sleep", "TIME": "3"},
	}})
	db := f.db()
	defer db.Close()
	inst := NewInstance("mariadb-0", db)
	ctx := context.Background()
	var fs FenceState
	var strip StripResult

	steps := []struct {
		name string
		run  func() error
		want []string
	}{
		{"fence", func() error { return inst.Fence(ctx) }, []string{versionQuery, setRole, "SET GLOBAL read_only = ON", "SET ROLE NONE"}},
		{"verify", func() (err error) { fs, err = inst.VerifyFence(ctx); return err }, []string{
			"SELECT @@global.read_only AS read_only", d.WriteThroughSessionsQuery().SQL, conns.SQL,
		}},
		{"writable", func() error { return inst.MakeWritable(ctx) }, []string{setRole, "SET GLOBAL read_only = OFF", "SET ROLE NONE"}},
		{"repoint from binlog", func() error {
			return inst.Repoint(ctx, SourceSpec{Host: "mariadb-1.db", Port: 3306, User: "repl", Password: "pw", ResumeFromBinlog: true})
		}, []string{
			setRole, "STOP SLAVE", "SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos",
			"CHANGE MASTER TO MASTER_HOST = 'mariadb-1.db', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = ?," +
				" MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 10 [pw]",
			"START SLAVE", "SET ROLE NONE",
		}},
		{"repoint", func() error {
			return inst.Repoint(ctx, SourceSpec{Host: "mariadb-1.db", Port: 3306, User: "repl", Password: "pw"})
		}, []string{
			"STOP SLAVE",
			"CHANGE MASTER TO MASTER_HOST = 'mariadb-1.db', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = ?," +
				" MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 10 [pw]",
			"START SLAVE",
		}},
		{"stop io needs no role", func() error { return inst.StopIOThread(ctx) }, []string{"STOP SLAVE IO_THREAD"}},
		{"kill needs no role", func() error { _, err := inst.KillClientConnections(ctx); return err }, []string{conns.SQL, "KILL CONNECTION 17"}},
		{"user", func() error {
			return inst.EnsureUser(ctx, UserSpec{User: "app", Password: "w", Role: RoleAppWriter}, EnsureUserOptions{SkipBinlog: true})
		}, []string{
			"SET SESSION sql_log_bin = 0", setRole,
			"CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY ? [w]",
			"ALTER USER 'app'@'%' IDENTIFIED BY ? [w]",
			"GRANT " + appWriterPrivileges + " ON `%`.* TO 'app'@'%'",
			"GRANT SHOW VIEW ON `mysql`.* TO 'app'@'%'",
			"GRANT SHOW VIEW ON `sys`.* TO 'app'@'%'",
			"GRANT SHOW VIEW ON `mysqlctl`.* TO 'app'@'%'",
			"GRANT SELECT ON `performance_schema`.* TO 'app'@'%'",
			"REVOKE SUPER, READ_ONLY ADMIN ON *.* FROM 'app'@'%'",
			"SET DEFAULT ROLE NONE FOR 'app'@'%'",
			"SET ROLE NONE", "SET SESSION sql_log_bin = 1",
		}},
		{"user with binlog", func() error {
			return inst.EnsureUser(ctx, UserSpec{User: "repl", Password: "r"}, EnsureUserOptions{})
		}, []string{
			setRole, "CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY ? [r]", "ALTER USER 'repl'@'%' IDENTIFIED BY ? [r]",
			"GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'", "SET ROLE NONE",
		}},
		{"strip root", func() (err error) {
			strip, err = inst.StripReadOnlyAdmin(ctx, "root", EnsureUserOptions{SkipBinlog: true})
			return err
		}, []string{
			"SET SESSION sql_log_bin = 0", setRole, hosts.SQL + " [root]",
			"CREATE ROLE IF NOT EXISTS " + ReadOnlyAdminRole,
			"GRANT READ_ONLY ADMIN ON *.* TO " + ReadOnlyAdminRole,
			"GRANT " + ReadOnlyAdminRole + " TO 'root'@'%' WITH ADMIN OPTION",
			"GRANT " + ReadOnlyAdminRole + " TO 'root'@'localhost' WITH ADMIN OPTION",
			setRole,
			"REVOKE READ_ONLY ADMIN ON *.* FROM 'root'@'%'",
			"REVOKE READ_ONLY ADMIN ON *.* FROM 'root'@'localhost'",
			killList + " [root]", "KILL CONNECTION 17",
			"SET ROLE NONE", "SET SESSION sql_log_bin = 1",
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

	// The fence is read back but not verified: root's session 17 and app's
	// session 21 can write through read_only; 18 could only after SET ROLE.
	if fs.Verified || !fs.ReadOnly || fs.SuperReadOnly != nil {
		t.Fatalf("fence state %+v", fs)
	}
	if len(fs.WriteThrough) != 2 || fs.WriteThrough[0].ID != 17 || fs.WriteThrough[0].Reason != "holds READ_ONLY ADMIN (root@%)" ||
		fs.WriteThrough[1].ID != 21 || fs.WriteThrough[1].Reason != "default role w carries READ_ONLY ADMIN (app@%); PUBLIC carries READ_ONLY ADMIN (%@%)" {
		t.Errorf("write-through sessions %+v", fs.WriteThrough)
	}
	if len(fs.MayElevate) != 1 || fs.MayElevate[0].ID != 18 || fs.MayElevate[0].User != "mysqlctl" {
		t.Errorf("sessions that may elevate %+v", fs.MayElevate)
	}
	if !containsLine(fs.Evidence, "2 sessions can write through read_only: 17 root from 10.0.0.9:4100 (holds READ_ONLY ADMIN (root@%))") ||
		!containsLine(fs.Evidence, "1 sessions could enable a role that writes through read_only with SET ROLE (not counted)") {
		t.Errorf("evidence %q", fs.Evidence)
	}
	if len(strip.Accounts) != 2 || strip.Accounts[1] != (Account{User: "root", Host: "localhost"}) || len(strip.Killed) != 1 || strip.Killed[0].ID != 17 {
		t.Errorf("strip result %+v", strip)
	}
}

// TestReadOnlyAdminRoleMissing: an account that was not granted the role
// (error 1959) goes on without it, and the session is not told to drop a
// role it never had; any other SET ROLE error stops the action before the
// statement that needed the role.
func TestReadOnlyAdminRoleMissing(t *testing.T) {
	f, _ := mariadbFake(t)
	f.fail(setRole, &mysql.MySQLError{Number: erInvalidRole, Message: "Invalid role specification"})
	db := f.db()
	defer db.Close()
	inst := NewInstance("mariadb-0", db)
	ctx := context.Background()
	must(t, inst.Fence(ctx))
	if got, want := f.statements(), []string{versionQuery, setRole, "SET GLOBAL read_only = ON"}; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}

	f2, _ := mariadbFake(t)
	f2.fail(setRole, &mysql.MySQLError{Number: 2013, Message: "Lost connection"})
	db2 := f2.db()
	defer db2.Close()
	err := NewInstance("mariadb-0", db2).MakeWritable(ctx)
	if err == nil || sqlErrorNumber(err) != 2013 {
		t.Fatalf("MakeWritable after a failed SET ROLE: %v", err)
	}
	if got := f2.statements(); slices.Contains(got, "SET GLOBAL read_only = OFF") {
		t.Errorf("sent the statement although the role could not be enabled: %q", got)
	}
}

// TestVerifyFenceWriteThroughRecordedMySQL: with super_read_only off, the
// sessions that SUPER or CONNECTION_ADMIN let through are listed as
// evidence; a failing query is recorded, not returned (the fence is
// unverified either way); with super_read_only on the query is not sent.
func TestVerifyFenceWriteThroughRecordedMySQL(t *testing.T) {
	fl, _ := DetectFlavor("8.4.3", "MySQL")
	d, _ := DialectFor(fl)
	conns, _ := d.ClientConnectionsQuery([]string{"repl"})
	setup := func(sro int, wtErr error) (*fakeServer, *Instance) {
		f := newFakeServer(t)
		f.onRow(versionQuery, "version", "8.4.3", "version_comment", "MySQL Community Server - GPL")
		f.onRow("SELECT @@global.read_only AS read_only, @@global.super_read_only AS super_read_only", "read_only", 1, "super_read_only", sro)
		f.on(d.WriteThroughSessionsQuery().SQL, vertical{cols: []string{"ID", "USER", "HOST", "COMMAND", "TIME", "WHY", "BLOCKING"}, rows: []Row{
			{"ID": "9", "USER": "root", "HOST": "10.0.0.9:4100", "COMMAND": "Sleep", "TIME": "3", "WHY": "holds SUPER (root@%)", "BLOCKING": "1"},
		}})
		if wtErr != nil {
			f.fail(d.WriteThroughSessionsQuery().SQL, wtErr)
		}
		f.onEmpty(conns.SQL, "ID", "USER", "HOST", "COMMAND", "TIME")
		db := f.db()
		t.Cleanup(func() { _ = db.Close() })
		return f, NewInstance("mysql-0", db)
	}
	ctx := context.Background()

	f, inst := setup(0, nil)
	fs, err := inst.VerifyFence(ctx, "repl")
	must(t, err)
	if fs.Verified || len(fs.WriteThrough) != 1 || fs.WriteThrough[0].Reason != "holds SUPER (root@%)" {
		t.Errorf("super_read_only off: %+v", fs)
	}
	if got := f.statements(); len(got) != 4 || got[2] != d.WriteThroughSessionsQuery().SQL {
		t.Errorf("sent %q", got)
	}

	_, inst = setup(0, &mysql.MySQLError{Number: 1142, Message: "SELECT command denied"})
	fs, err = inst.VerifyFence(ctx, "repl")
	must(t, err)
	if fs.Verified || !containsLine(fs.Evidence, "could not list sessions that write through read_only") {
		t.Errorf("failing write-through query: %+v", fs)
	}

	f, inst = setup(1, nil)
	fs, err = inst.VerifyFence(ctx, "repl")
	must(t, err)
	if !fs.Verified || len(fs.WriteThrough) != 0 || slices.Contains(f.statements(), d.WriteThroughSessionsQuery().SQL) {
		t.Errorf("super_read_only on: %+v, sent %q", fs, f.statements())
	}
}

// TestReadOnlyAdminMariaDBFailsLoudly: on MariaDB a session that may not
// read the grant tables gets an error from VerifyFence, never "verified".
func TestReadOnlyAdminMariaDBFailsLoudly(t *testing.T) {
	f, d := mariadbFake(t)
	f.onRow("SELECT @@global.read_only AS read_only", "read_only", 1)
	f.fail(d.WriteThroughSessionsQuery().SQL, &mysql.MySQLError{Number: 1142, Message: "SELECT command denied to user for table `mysql`.`global_priv`"})
	db := f.db()
	defer db.Close()
	fs, err := NewInstance("mariadb-0", db).VerifyFence(context.Background())
	var oe *OpError
	if err == nil || !errors.As(err, &oe) || fs.Verified {
		t.Fatalf("VerifyFence without access to the grant tables: %+v %v", fs, err)
	}
}

func TestAppAccountsHaveNoGlobalPrivilege(t *testing.T) {
	for _, c := range dialectCases {
		f, err := DetectFlavor(c.version, c.comment)
		must(t, err)
		d, err := DialectFor(f)
		must(t, err)
		for _, role := range []UserRole{RoleAppWriter, RoleAppReader} {
			stmts, err := d.EnsureUser(UserSpec{User: "app", Password: "pw", Role: role})
			must(t, err)
			for _, s := range stmts {
				if strings.HasPrefix(s.SQL, "GRANT") && (strings.Contains(s.SQL, " ON *.*") || strings.Contains(s.SQL, "SUPER") ||
					strings.Contains(s.SQL, "READ_ONLY") || strings.Contains(s.SQL, "ADMIN") || strings.Contains(s.SQL, ReadOnlyAdminRole)) {
					t.Errorf("%s role %d: %s", f, role, s.SQL)
				}
				if strings.Contains(s.SQL, "pw") {
					t.Errorf("%s: password in statement text: %s", f, s.SQL)
				}
			}
		}
		stmts, err := d.EnsureUser(UserSpec{User: "mysqlctl", Password: "pw", Role: RoleOrchestration})
		must(t, err)
		for _, s := range stmts {
			if strings.HasPrefix(s.SQL, "GRANT") && strings.Contains(s.SQL, "READ_ONLY ADMIN ON *.* TO 'mysqlctl'") {
				t.Errorf("%s: the orchestration account holds READ_ONLY ADMIN itself: %s", f, s.SQL)
			}
		}
	}
}
