package topology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// mysqlVocabulary is the table of words that changed across MySQL versions.
// MySQL renamed its replication vocabulary in steps (8.0.22 SHOW REPLICA
// STATUS and START/STOP REPLICA, 8.0.23 CHANGE REPLICATION SOURCE TO, 8.0.26
// the semisync_source/semisync_replica plugins) and 8.4 removed the old
// spellings, so the table is computed from the exact version.
// https://dev.mysql.com/doc/refman/8.0/en/replication-statements-replica.html
type mysqlVocabulary struct {
	replica          string // "REPLICA" or "SLAVE" in START/STOP/SHOW/RESET
	changeSource     string // "CHANGE REPLICATION SOURCE TO" or "CHANGE MASTER TO"
	opt              string // "SOURCE_" or "MASTER_" option prefix
	publicKey        string // GET_SOURCE_PUBLIC_KEY / GET_MASTER_PUBLIC_KEY / ""
	semiSource       string // rpl_semi_sync_source or rpl_semi_sync_master
	semiReplica      string // rpl_semi_sync_replica or rpl_semi_sync_slave
	semiSourceLib    string
	semiReplicaLib   string
	semiWaitForCount string // wait_for_replica_count or wait_for_slave_count
}

func vocabularyFor(v Version) mysqlVocabulary {
	w := mysqlVocabulary{
		replica:          "SLAVE",
		changeSource:     "CHANGE MASTER TO",
		opt:              "MASTER_",
		semiSource:       "rpl_semi_sync_master",
		semiReplica:      "rpl_semi_sync_slave",
		semiSourceLib:    "semisync_master.so",
		semiReplicaLib:   "semisync_slave.so",
		semiWaitForCount: "wait_for_slave_count",
	}
	if v.AtLeast(8, 0, 4) {
		// caching_sha2_password (the 8.0 default) needs the source's RSA key
		// when replication does not use TLS.
		w.publicKey = "GET_MASTER_PUBLIC_KEY"
	}
	if v.AtLeast(8, 0, 22) {
		w.replica = "REPLICA"
	}
	if v.AtLeast(8, 0, 23) {
		w.changeSource = "CHANGE REPLICATION SOURCE TO"
		w.opt = "SOURCE_"
		w.publicKey = "GET_SOURCE_PUBLIC_KEY"
	}
	if v.AtLeast(8, 0, 26) {
		w.semiSource = "rpl_semi_sync_source"
		w.semiReplica = "rpl_semi_sync_replica"
		w.semiSourceLib = "semisync_source.so"
		w.semiReplicaLib = "semisync_replica.so"
		w.semiWaitForCount = "wait_for_replica_count"
	}
	return w
}

// mysqlDialect serves MySQL 5.7, 8.0 and 8.4; its vocabulary table is the
// per-flavor part.
type mysqlDialect struct {
	f Flavor
	w mysqlVocabulary
}

func newMySQLDialect(f Flavor) mysqlDialect { return mysqlDialect{f: f, w: vocabularyFor(f.Version)} }

func (mysqlDialect) sealed() {}

func (d mysqlDialect) Flavor() Flavor { return d.f }

func (d mysqlDialect) StateQuery() Stmt {
	return stmt("SELECT @@global.server_id AS server_id, @@global.server_uuid AS server_uuid," +
		" @@global.read_only AS read_only, @@global.super_read_only AS super_read_only," +
		" @@global.log_bin AS log_bin, @@global.gtid_mode AS gtid_mode," +
		" @@global.gtid_executed AS gtid_executed, @@global.gtid_purged AS gtid_purged")
}

func (d mysqlDialect) ParseState(row map[string]string) (State, error) {
	var st State
	var err error
	if st.ServerID, err = parseUint32(row, "server_id"); err != nil {
		return st, err
	}
	st.ServerUUID = strings.ToLower(row["server_uuid"])
	if st.ReadOnly, err = parseBool(row, "read_only"); err != nil {
		return st, err
	}
	sro, err := parseBool(row, "super_read_only")
	if err != nil {
		return st, err
	}
	st.SuperReadOnly = &sro
	if st.LogBin, err = parseBool(row, "log_bin"); err != nil {
		return st, err
	}
	st.GTIDMode = strings.ToUpper(row["gtid_mode"])
	if st.GTID.Executed, err = gtid.ParseMySQLSet(row["gtid_executed"]); err != nil {
		return st, fmt.Errorf("gtid_executed: %w", err)
	}
	if st.GTID.Purged, err = gtid.ParseMySQLSet(row["gtid_purged"]); err != nil {
		return st, fmt.Errorf("gtid_purged: %w", err)
	}
	st.GTID.PurgedKnown = true
	return st, nil
}

func (d mysqlDialect) ReplicaStatusQuery() Stmt { return stmt("SHOW " + d.w.replica + " STATUS") }

func (d mysqlDialect) ReceivedGTID(st *GTIDState, rs *ReplicaStatus) error {
	set, err := gtid.ParseMySQLSet(rs.RetrievedGTIDSet)
	if err != nil {
		return fmt.Errorf("Retrieved_Gtid_Set: %w", err)
	}
	st.Received = set
	return nil
}

func (d mysqlDialect) BinaryLogsQuery() (Stmt, bool) { return Stmt{}, false }

func (d mysqlDialect) BinlogStartQuery(string) Stmt { return Stmt{} }

func (d mysqlDialect) SemiSyncQueries() (Stmt, Stmt) {
	return stmt("SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync%'"), stmt("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync%'")
}

// Fence sets super_read_only, which implies read_only and, unlike it, also
// stops accounts with SUPER or CONNECTION_ADMIN.
// https://dev.mysql.com/doc/refman/8.4/en/server-system-variables.html#sysvar_super_read_only
func (d mysqlDialect) Fence() []Stmt { return []Stmt{stmt("SET GLOBAL super_read_only = ON")} }

func (d mysqlDialect) FenceStateQuery() Stmt {
	return stmt("SELECT @@global.read_only AS read_only, @@global.super_read_only AS super_read_only")
}

func (d mysqlDialect) MakeWritable() []Stmt {
	return []Stmt{stmt("SET GLOBAL super_read_only = OFF"), stmt("SET GLOBAL read_only = OFF")}
}

func (d mysqlDialect) FenceEpochQuery() Stmt {
	return stmt(fenceEpochSQL + ", @@global.read_only AS read_only, @@global.super_read_only AS super_read_only")
}

// FenceEpochWrite lifts super_read_only for the write when it is on, and
// only that: read_only stays on, so application accounts stay fenced during
// the write (the orchestration account's CONNECTION_ADMIN, or SUPER on 5.7,
// writes through read_only but not through super_read_only). It puts
// super_read_only back on whenever read_only is on, which mysqlctl never
// leaves without it: so a session killed between lifting and restoring (an
// older actor's, ended by a newer one; see fence.go) leaves a fenced server
// as it found it once the next epoch is written.
// https://dev.mysql.com/doc/refman/8.4/en/server-system-variables.html#sysvar_super_read_only
func (d mysqlDialect) FenceEpochWrite(epoch int64, create bool, state map[string]string) ([]Stmt, []Stmt) {
	do := []Stmt{stmt("SET SESSION sql_log_bin = 0")}
	var undo []Stmt
	if state["super_read_only"] == "1" {
		do = append(do, stmt("SET GLOBAL super_read_only = OFF"))
	}
	if state["super_read_only"] == "1" || state["read_only"] == "1" {
		undo = append(undo, stmt("SET GLOBAL super_read_only = ON"))
	}
	return append(do, fenceEpochWrite(epoch, create)...), append(undo, stmt("SET SESSION sql_log_bin = 1"))
}

func (d mysqlDialect) ClientConnectionsQuery(exclude []string) (Stmt, error) {
	return clientConnectionsSQL(exclude)
}

func (d mysqlDialect) Kill(id uint64) Stmt {
	return stmt("KILL CONNECTION " + strconv.FormatUint(id, 10))
}

// mysqlBypassAccounts lists the accounts read_only does not bind on MySQL:
// SUPER, and from 8.0 CONNECTION_ADMIN (directly or through a default
// role). super_read_only=ON binds them too, which is why the MySQL fence
// sets it and Instance reads this list only while super_read_only is off,
// as evidence. Roles made active by activate_all_roles_on_login or
// mandatory_roles are not followed. Written from the MySQL 5.7/8.0/8.4
// Reference Manuals (mysql.user, mysql.global_grants, mysql.default_roles);
// no MySQL server runs here.
func (d mysqlDialect) mysqlBypassAccounts() string {
	q := "SELECT User AS user, Host AS host, 'holds SUPER' AS why FROM mysql.user WHERE Super_priv = 'Y'"
	if d.f.Line == MySQL57 {
		return q
	}
	holders := "SELECT User AS u, Host AS h FROM mysql.user WHERE Super_priv = 'Y'" +
		" UNION SELECT USER, HOST FROM mysql.global_grants WHERE PRIV = 'CONNECTION_ADMIN'"
	return q +
		" UNION SELECT USER, HOST, 'holds CONNECTION_ADMIN' FROM mysql.global_grants WHERE PRIV = 'CONNECTION_ADMIN'" +
		" UNION SELECT d.USER, d.HOST, CONCAT('default role ', d.DEFAULT_ROLE_USER, ' carries SUPER or CONNECTION_ADMIN')" +
		" FROM mysql.default_roles d JOIN (" + holders + ") r ON r.u = d.DEFAULT_ROLE_USER AND r.h = d.DEFAULT_ROLE_HOST"
}

func (d mysqlDialect) WriteThroughSessionsQuery() Stmt {
	return stmt("SELECT p.ID, p.USER, p.HOST, p.COMMAND, p.TIME," +
		" CONCAT(b.why, ' (', b.user, '@', b.host, ')') AS WHY, 1 AS BLOCKING" +
		" FROM information_schema.PROCESSLIST p JOIN (" + d.mysqlBypassAccounts() + ") b ON b.user = p.USER" +
		" WHERE " + clientSessionFilter + " ORDER BY p.ID")
}

func (d mysqlDialect) WriteThroughAccountsQuery() Stmt {
	return stmt("SELECT b.user AS USER, b.host AS HOST, b.why AS WHY, 1 AS BLOCKING FROM (" +
		d.mysqlBypassAccounts() + ") b ORDER BY b.user, b.host")
}

// Elevate is not needed on MySQL: setting super_read_only takes
// SYSTEM_VARIABLES_ADMIN (or SUPER), and nothing writes through it.
func (d mysqlDialect) Elevate() (Stmt, Stmt, bool) { return Stmt{}, Stmt{}, false }

func (d mysqlDialect) AccountHostsQuery(user string) (Stmt, error) {
	if err := ValidateAccountName(user); err != nil {
		return Stmt{}, err
	}
	return stmt("SELECT Host AS host FROM mysql.user WHERE User = ? ORDER BY Host", user), nil
}

// StripReadOnlyBypass returns nothing on MySQL: SUPER and CONNECTION_ADMIN
// bypass read_only but not super_read_only, which the MySQL fence sets (and
// the generated my.cnf sets at start), so root keeps its privileges.
func (d mysqlDialect) StripReadOnlyBypass(accounts []Account) ([]Stmt, error) {
	for _, a := range accounts {
		if _, err := a.quoted(); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (d mysqlDialect) StopReplica() Stmt   { return stmt("STOP " + d.w.replica) }
func (d mysqlDialect) StartReplica() Stmt  { return stmt("START " + d.w.replica) }
func (d mysqlDialect) StopIOThread() Stmt  { return stmt("STOP " + d.w.replica + " IO_THREAD") }
func (d mysqlDialect) StartIOThread() Stmt { return stmt("START " + d.w.replica + " IO_THREAD") }

func (d mysqlDialect) ChangeSource(s SourceSpec) ([]Stmt, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	o := d.w.opt
	parts := []string{
		o + "HOST = '" + s.Host + "'",
		o + "PORT = " + strconv.Itoa(s.Port),
		o + "USER = '" + s.User + "'",
		o + "PASSWORD = ?",
		o + "AUTO_POSITION = 1",
		o + "CONNECT_RETRY = " + strconv.FormatInt(s.connectRetrySeconds(), 10),
	}
	if s.RetryCount > 0 {
		parts = append(parts, o+"RETRY_COUNT = "+strconv.Itoa(s.RetryCount))
	}
	if h := s.heartbeatClause(o); h != "" {
		parts = append(parts, strings.TrimPrefix(h, ", "))
	}
	if s.SSL {
		parts = append(parts, o+"SSL = 1")
	}
	if d.w.publicKey != "" {
		parts = append(parts, d.w.publicKey+" = 1")
	}
	return []Stmt{stmt(d.w.changeSource+" "+strings.Join(parts, ", "), s.Password)}, nil
}

func (d mysqlDialect) ResetReplication() []Stmt {
	return []Stmt{stmt("STOP " + d.w.replica), stmt("RESET " + d.w.replica + " ALL")}
}

// ContinueHistory empties gtid_executed (RESET BINARY LOGS AND GTIDS from 8.4,
// RESET MASTER before) and declares the set as purged: the server holds it,
// and its binary logs do not.
func (d mysqlDialect) ContinueHistory(set string) []Stmt {
	reset := "RESET MASTER"
	if d.f.Version.AtLeast(8, 4, 0) {
		reset = "RESET BINARY LOGS AND GTIDS"
	}
	return []Stmt{stmt(reset), stmt("SET GLOBAL gtid_purged = ?", set)}
}

// WaitForGTID uses WAIT_FOR_EXECUTED_GTID_SET, which returns 0 once the set
// is in gtid_executed and 1 on timeout. The timeout is whole seconds, at
// least 1, because 5.7 takes an integer.
func (d mysqlDialect) WaitForGTID(set string, timeout time.Duration) Stmt {
	return stmt("SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", set, max(ceilSeconds(timeout), 1))
}

func (d mysqlDialect) SemiSyncPlugin(side SemiSyncSide) (string, string, bool) {
	if side == SemiSyncSource {
		return d.w.semiSource, d.w.semiSourceLib, true
	}
	return d.w.semiReplica, d.w.semiReplicaLib, true
}

func (d mysqlDialect) EnableSemiSyncSource(s SemiSyncSourceSpec) ([]Stmt, error) {
	if s.Timeout <= 0 {
		return nil, errors.New("semi-sync timeout must be positive")
	}
	n := max(s.WaitForReplicas, 1)
	p := d.w.semiSource
	return []Stmt{
		stmt("SET GLOBAL " + p + "_timeout = " + strconv.FormatInt(s.Timeout.Milliseconds(), 10)),
		stmt("SET GLOBAL " + p + "_" + d.w.semiWaitForCount + " = " + strconv.Itoa(n)),
		stmt("SET GLOBAL " + p + "_wait_point = 'AFTER_SYNC'"),
		stmt("SET GLOBAL " + p + "_enabled = ON"),
	}, nil
}

func (d mysqlDialect) DisableSemiSyncSource() []Stmt {
	return []Stmt{stmt("SET GLOBAL " + d.w.semiSource + "_enabled = OFF")}
}

func (d mysqlDialect) EnableSemiSyncReplica() []Stmt {
	return []Stmt{stmt("SET GLOBAL " + d.w.semiReplica + "_enabled = ON")}
}

func (d mysqlDialect) DisableSemiSyncReplica() []Stmt {
	return []Stmt{stmt("SET GLOBAL " + d.w.semiReplica + "_enabled = OFF")}
}

// EnsureUser uses CREATE USER IF NOT EXISTS (5.7.6+) and then ALTER USER so
// that a changed password converges too. The orchestration role uses the
// dynamic privileges of 8.0 instead of SUPER, which 8.0 deprecates.
func (d mysqlDialect) EnsureUser(u UserSpec) ([]Stmt, error) {
	acct, err := u.account()
	if err != nil {
		return nil, err
	}
	out := []Stmt{
		stmt("CREATE USER IF NOT EXISTS "+acct+" IDENTIFIED BY ?", u.Password),
		stmt("ALTER USER "+acct+" IDENTIFIED BY ?", u.Password),
	}
	switch u.Role {
	case RoleReplication:
		out = append(out, stmt("GRANT REPLICATION SLAVE ON *.* TO "+acct))
		out = append(out, d.adminInterfaceGrant(acct)...)
	case RoleOrchestration:
		if d.f.Line == MySQL57 {
			out = append(out, stmt("GRANT RELOAD, PROCESS, SUPER, REPLICATION SLAVE, REPLICATION CLIENT, CREATE USER ON *.* TO "+acct+" WITH GRANT OPTION"))
		} else {
			out = append(out,
				stmt("GRANT RELOAD, PROCESS, REPLICATION SLAVE, REPLICATION CLIENT, CREATE USER ON *.* TO "+acct+" WITH GRANT OPTION"),
				stmt("GRANT SYSTEM_VARIABLES_ADMIN, SESSION_VARIABLES_ADMIN, REPLICATION_SLAVE_ADMIN, CONNECTION_ADMIN, BINLOG_ADMIN ON *.* TO "+acct),
			)
		}
		out = append(out, d.adminInterfaceGrant(acct)...)
		// INSTALL PLUGIN writes mysql.plugin (semi-sync plugins).
		out = append(out, stmt("GRANT INSERT, DELETE ON mysql.plugin TO "+acct), fenceGrant(acct))
	case RoleBackup:
		out = append(out, stmt("GRANT RELOAD, PROCESS, LOCK TABLES, REPLICATION CLIENT ON *.* TO "+acct))
		if d.f.Line != MySQL57 {
			out = append(out, stmt("GRANT BACKUP_ADMIN ON *.* TO "+acct), stmt("GRANT SELECT ON performance_schema.log_status TO "+acct))
		}
	case RoleAppWriter, RoleAppReader:
		// No global privilege is granted, so neither SUPER nor
		// CONNECTION_ADMIN; super_read_only binds every account anyway.
		grants, err := appGrants(u.Role, acct)
		if err != nil {
			return nil, err
		}
		out = append(out, grants...)
	default:
		return nil, fmt.Errorf("unknown role %d", u.Role)
	}
	return out, nil
}

// adminInterfaceGrant lets an account in through the administrative interface (admin_port,
// 8.0.14+), which mysqlctl and replication use so that a server whose max_connections are taken
// still lets them in; older servers have neither the interface nor the privilege.
func (d mysqlDialect) adminInterfaceGrant(acct string) []Stmt {
	if d.f.Line == MySQL57 || !d.f.Version.AtLeast(8, 0, 14) {
		return nil
	}
	return []Stmt{stmt("GRANT SERVICE_CONNECTION_ADMIN ON *.* TO " + acct)}
}
