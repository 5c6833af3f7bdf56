package topology

import (
	"strings"
	"time"
)

// renderDialect prints every statement a dialect produces for a fixed set of
// inputs, one "label: statement" per line, so that a test can pin the exact
// text per flavor.
func renderDialect(d Dialect) string {
	var b strings.Builder
	line := func(label string, stmts ...Stmt) {
		for _, s := range stmts {
			b.WriteString(label + ": " + s.String() + "\n")
		}
	}
	lineErr := func(label string, stmts []Stmt, err error) {
		if err != nil {
			b.WriteString(label + ": error: " + err.Error() + "\n")
			return
		}
		line(label, stmts...)
	}
	line("state", d.StateQuery())
	line("replica status", d.ReplicaStatusQuery())
	if s, ok := d.BinaryLogsQuery(); ok {
		line("binary logs", s)
		line("binlog start", d.BinlogStartQuery("mysql-bin.000001"))
	}
	vs, ss := d.SemiSyncQueries()
	line("semi-sync", vs, ss)
	line("stop", d.StopReplica())
	line("start", d.StartReplica())
	line("stop io", d.StopIOThread())
	line("start io", d.StartIOThread())
	line("fence", d.Fence()...)
	line("fence state", d.FenceStateQuery())
	line("writable", d.MakeWritable()...)
	line("fence epoch", d.FenceEpochQuery())
	do, undo := d.FenceEpochWrite(7, true, map[string]string{"super_read_only": "1"})
	line("fence epoch write", do...)
	line("fence epoch restore", undo...)
	do, undo = d.FenceEpochWrite(8, false, map[string]string{"read_only": "0", "super_read_only": "0"})
	line("fence epoch write (table exists, writable)", do...)
	line("fence epoch restore (table exists, writable)", undo...)
	do, undo = d.FenceEpochWrite(9, false, map[string]string{"read_only": "1", "super_read_only": "0"})
	line("fence epoch write (read_only without super_read_only)", do...)
	line("fence epoch restore (read_only without super_read_only)", undo...)
	q, err := d.ClientConnectionsQuery([]string{"monitor"})
	lineErr("connections", []Stmt{q}, err)
	line("kill", d.Kill(42))
	line("write-through sessions", d.WriteThroughSessionsQuery())
	line("write-through accounts", d.WriteThroughAccountsQuery())
	if on, off, ok := d.Elevate(); ok {
		line("elevate", on, off)
	}
	q, err = d.AccountHostsQuery("root")
	lineErr("account hosts", []Stmt{q}, err)
	stmts, err := d.StripReadOnlyBypass([]Account{{User: "root"}, {User: "root", Host: "localhost"}})
	lineErr("strip root", stmts, err)
	src := SourceSpec{Host: "mysql-0.mysql.db.svc", Port: 3306, User: "repl", Password: "s3cret"}
	stmts, err = d.ChangeSource(src)
	lineErr("change source", stmts, err)
	src.SSL, src.RetryCount, src.ConnectRetry, src.ResumeFromBinlog = true, 5, 1500*time.Millisecond, true
	stmts, err = d.ChangeSource(src)
	lineErr("change source (ssl)", stmts, err)
	line("reset", d.ResetReplication()...)
	line("continue-history", d.ContinueHistory("HISTORY")...)
	line("wait", d.WaitForGTID("G", 2500*time.Millisecond))
	for _, side := range []SemiSyncSide{SemiSyncSource, SemiSyncReplica} {
		if name, lib, ok := d.SemiSyncPlugin(side); ok {
			b.WriteString("plugin: " + name + " " + lib + "\n")
		}
	}
	stmts, err = d.EnableSemiSyncSource(SemiSyncSourceSpec{Timeout: 3 * time.Second, WaitForReplicas: 1})
	lineErr("semi-sync source on", stmts, err)
	line("semi-sync source off", d.DisableSemiSyncSource()...)
	line("semi-sync replica on", d.EnableSemiSyncReplica()...)
	line("semi-sync replica off", d.DisableSemiSyncReplica()...)
	stmts, err = d.EnsureUser(UserSpec{User: "repl", Password: "r"})
	lineErr("user repl", stmts, err)
	stmts, err = d.EnsureUser(UserSpec{User: "mysqlctl", Host: "%.svc.cluster.local", Password: "o", Role: RoleOrchestration})
	lineErr("user orch", stmts, err)
	stmts, err = d.EnsureUser(UserSpec{User: "app", Password: "w", Role: RoleAppWriter})
	lineErr("user app", stmts, err)
	stmts, err = d.EnsureUser(UserSpec{User: "app_ro", Password: "r", Role: RoleAppReader})
	lineErr("user app_ro", stmts, err)
	stmts, err = d.EnsureUser(UserSpec{User: "mysqlctl_backup", Password: "b", Role: RoleBackup})
	lineErr("user backup", stmts, err)
	return b.String()
}
