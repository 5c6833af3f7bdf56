package topology

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// mariadbDialect serves MariaDB 10.11 and later.
// https://mariadb.com/kb/en/gtid/ and https://mariadb.com/kb/en/change-master-to/
type mariadbDialect struct{ f Flavor }

func (mariadbDialect) sealed() {}

func (d mariadbDialect) Flavor() Flavor { return d.f }

// StateQuery reads all four GTID variables: gtid_binlog_pos (last GTID
// written to this server's binlog per domain), gtid_slave_pos (last GTID
// applied by replication), gtid_current_pos (the two combined) and
// gtid_binlog_state (last GTID per domain and originating server, which
// keeps a trace of every server that ever wrote here).
func (d mariadbDialect) StateQuery() Stmt {
	return stmt("SELECT @@global.server_id AS server_id, @@global.gtid_domain_id AS gtid_domain_id," +
		" @@global.read_only AS read_only, @@global.log_bin AS log_bin, @@global.gtid_strict_mode AS gtid_strict_mode," +
		" @@global.gtid_binlog_pos AS gtid_binlog_pos, @@global.gtid_slave_pos AS gtid_slave_pos," +
		" @@global.gtid_current_pos AS gtid_current_pos, @@global.gtid_binlog_state AS gtid_binlog_state")
}

func (d mariadbDialect) ParseState(row map[string]string) (State, error) {
	var st State
	var err error
	if st.ServerID, err = parseUint32(row, "server_id"); err != nil {
		return st, err
	}
	if st.DomainID, err = parseUint32(row, "gtid_domain_id"); err != nil {
		return st, err
	}
	if st.ReadOnly, err = parseBool(row, "read_only"); err != nil {
		return st, err
	}
	if st.LogBin, err = parseBool(row, "log_bin"); err != nil {
		return st, err
	}
	strict, err := parseBool(row, "gtid_strict_mode")
	if err != nil {
		return st, err
	}
	st.GTIDStrictMode = &strict
	st.GTIDMode = "ON" // MariaDB always assigns GTIDs.
	for _, v := range []struct {
		col string
		dst *gtid.MariaDBPos
	}{
		{"gtid_binlog_pos", &st.GTID.BinlogPos},
		{"gtid_slave_pos", &st.GTID.SlavePos},
		{"gtid_current_pos", &st.GTID.CurrentPos},
	} {
		if *v.dst, err = gtid.ParseMariaDBPos(row[v.col]); err != nil {
			return st, fmt.Errorf("%s: %w", v.col, err)
		}
	}
	if st.GTID.BinlogState, err = gtid.ParseMariaDBGTIDList(row["gtid_binlog_state"]); err != nil {
		return st, fmt.Errorf("gtid_binlog_state: %w", err)
	}
	return st, nil
}

// ReplicaStatusQuery uses SHOW SLAVE STATUS, which every MariaDB version
// accepts (SHOW REPLICA STATUS is an alias since 10.5.1 and returns the same
// Slave_/Master_ column names).
func (d mariadbDialect) ReplicaStatusQuery() Stmt { return stmt("SHOW SLAVE STATUS") }

func (d mariadbDialect) ReceivedGTID(st *GTIDState, rs *ReplicaStatus) error {
	pos, err := gtid.ParseMariaDBPos(rs.GTIDIOPos)
	if err != nil {
		return fmt.Errorf("Gtid_IO_Pos: %w", err)
	}
	st.IOPos = pos
	return nil
}

// BinaryLogsQuery and BinlogStartQuery compute what MySQL calls gtid_purged:
// BINLOG_GTID_POS(oldest binlog, 4) is the position just before the first
// transaction still on disk, so a replica that has not reached it cannot be
// served from this server's binlogs.
func (d mariadbDialect) BinaryLogsQuery() (Stmt, bool) { return stmt("SHOW BINARY LOGS"), true }

func (d mariadbDialect) BinlogStartQuery(file string) Stmt {
	return stmt("SELECT BINLOG_GTID_POS(?, 4) AS pos", file)
}

func (d mariadbDialect) SemiSyncQueries() (Stmt, Stmt) {
	return stmt("SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync%'"), stmt("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync%'")
}

// Fence sets read_only. MariaDB has no super_read_only: read_only stops
// every session without READ_ONLY ADMIN (which ALL PRIVILEGES carries; SUPER
// alone does not in 10.11), so a fence also kills client connections and
// its verification looks for sessions that can still write (see
// WriteThroughSessionsQuery). Setting read_only itself needs READ_ONLY
// ADMIN, so Instance runs this on a session that enabled ReadOnlyAdminRole.
// https://mariadb.com/kb/en/server-system-variables/#read_only
func (d mariadbDialect) Fence() []Stmt { return []Stmt{stmt("SET GLOBAL read_only = ON")} }

func (d mariadbDialect) FenceStateQuery() Stmt { return stmt("SELECT @@global.read_only AS read_only") }

func (d mariadbDialect) MakeWritable() []Stmt { return []Stmt{stmt("SET GLOBAL read_only = OFF")} }

func (d mariadbDialect) FenceEpochQuery() Stmt { return stmt(fenceEpochSQL) }

// FenceEpochWrite writes through read_only with ReadOnlyAdminRole enabled
// for the session (a server's root that holds READ_ONLY ADMIN itself gets
// error 1959 from SET ROLE, which Instance tolerates). sql_log_bin=0 keeps
// the write out of the binary log and so out of gtid_binlog_pos.
func (d mariadbDialect) FenceEpochWrite(epoch int64, create bool, _ map[string]string) ([]Stmt, []Stmt) {
	on, off, _ := d.Elevate()
	do := append([]Stmt{stmt("SET SESSION sql_log_bin = 0"), on}, fenceEpochWrite(epoch, create)...)
	return do, []Stmt{off, stmt("SET SESSION sql_log_bin = 1")}
}

func (d mariadbDialect) ClientConnectionsQuery(exclude []string) (Stmt, error) {
	return clientConnectionsSQL(exclude)
}

func (d mariadbDialect) Kill(id uint64) Stmt {
	return stmt("KILL CONNECTION " + strconv.FormatUint(id, 10))
}

// mariadbWriteThroughCTE finds the accounts that can write through
// read_only, without performance_schema (often off) and without trusting a
// single source:
//
//   - acct reads mysql.global_priv, which the server loads its privileges
//     from (and which fails loudly, error 1142, for a session that may not
//     read it, where information_schema would silently show less). The JSON
//     access bitmask has READ_ONLY ADMIN at bit 33; an entry written before
//     10.5.2 (no version_id, or an older one) that has SUPER (bit 15) gets
//     READ_ONLY ADMIN when the server loads it, and so does root@localhost's
//     {"access": 2^64-1} from mariadb-install-db.
//   - information_schema.USER_PRIVILEGES adds what the server holds in
//     memory (a table edited without FLUSH PRIVILEGES differs).
//   - carrier is every role that carries the privilege, directly or through
//     roles granted to it (mysql.roles_mapping rows with an empty Host).
//   - an account whose default role is a carrier writes from the moment it
//     logs in; if PUBLIC is a carrier (GRANT READ_ONLY ADMIN ON *.* TO
//     PUBLIC, or a carrier role granted to PUBLIC, both accepted by 10.11)
//     every account does.
//   - an account that was granted a carrier role but not as its default
//     must run SET ROLE first (BLOCKING 0): that is how this tool's own
//     accounts hold ReadOnlyAdminRole, and no application does it by
//     accident.
const mariadbWriteThroughCTE = "WITH RECURSIVE acct AS (" +
	"SELECT User AS name, Host AS host," +
	" COALESCE(JSON_VALUE(Priv, '$.is_role'), '') IN ('1', 'true') AS is_role," +
	" NULLIF(JSON_VALUE(Priv, '$.default_role'), '') AS default_role," +
	" ((CAST(JSON_VALUE(Priv, '$.access') AS UNSIGNED) & 8589934592) <> 0" +
	" OR ((CAST(JSON_VALUE(Priv, '$.access') AS UNSIGNED) & 32768) <> 0" +
	" AND CAST(COALESCE(JSON_VALUE(Priv, '$.version_id'), '0') AS UNSIGNED) < 100502)) AS holds" +
	" FROM mysql.global_priv)," +
	" carrier (name) AS (" +
	"SELECT name FROM acct WHERE is_role AND holds" +
	" UNION SELECT m.User FROM mysql.roles_mapping m JOIN carrier c ON m.Role = c.name WHERE m.Host = '')," +
	" bypass AS (" +
	"SELECT name AS user, host, 'holds READ_ONLY ADMIN' AS why, 1 AS blocking, 0 AS everyone FROM acct WHERE NOT is_role AND holds" +
	" UNION SELECT SUBSTRING(GRANTEE, 2, LOCATE('''@''', GRANTEE) - 2)," +
	" SUBSTRING(GRANTEE, LOCATE('''@''', GRANTEE) + 3, CHAR_LENGTH(GRANTEE) - LOCATE('''@''', GRANTEE) - 3)," +
	" 'holds READ_ONLY ADMIN', 1, 0 FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'READ_ONLY ADMIN'" +
	" UNION SELECT name, host, CONCAT('default role ', default_role, ' carries READ_ONLY ADMIN'), 1, 0" +
	" FROM acct WHERE NOT is_role AND default_role IN (SELECT name FROM carrier)" +
	" UNION SELECT '%', '%', 'PUBLIC carries READ_ONLY ADMIN', 1, 1 FROM carrier WHERE name = 'PUBLIC'" +
	" UNION SELECT m.User, m.Host, CONCAT('can SET ROLE ', m.Role, ', which carries READ_ONLY ADMIN'), 0, 0" +
	" FROM mysql.roles_mapping m JOIN carrier c ON m.Role = c.name WHERE m.Host <> '')"

// WriteThroughSessionsQuery joins the process list with the accounts
// mariadbWriteThroughCTE finds, by user name.
func (d mariadbDialect) WriteThroughSessionsQuery() Stmt {
	return stmt(mariadbWriteThroughCTE +
		" SELECT p.ID, p.USER, p.HOST, p.COMMAND, p.TIME," +
		" CONCAT(b.why, ' (', b.user, '@', b.host, ')') AS WHY, b.blocking AS BLOCKING" +
		" FROM information_schema.PROCESSLIST p JOIN bypass b ON b.everyone = 1 OR b.user = p.USER" +
		" WHERE " + clientSessionFilter + " ORDER BY p.ID, b.blocking DESC")
}

func (d mariadbDialect) WriteThroughAccountsQuery() Stmt {
	return stmt(mariadbWriteThroughCTE +
		" SELECT user AS USER, host AS HOST, why AS WHY, blocking AS BLOCKING FROM bypass ORDER BY user, host, blocking DESC")
}

// Elevate enables ReadOnlyAdminRole for this session. An account that was
// not granted the role gets error 1959, which Instance tolerates: such an
// account either holds READ_ONLY ADMIN itself (a server before its root
// account was stripped) or gets the server's own error from the statement
// that needed it.
func (d mariadbDialect) Elevate() (Stmt, Stmt, bool) {
	return stmt("SET ROLE " + ReadOnlyAdminRole), stmt("SET ROLE NONE"), true
}

func (d mariadbDialect) AccountHostsQuery(user string) (Stmt, error) {
	if err := ValidateAccountName(user); err != nil {
		return Stmt{}, err
	}
	return stmt("SELECT Host AS host FROM mysql.global_priv WHERE User = ?"+
		" AND COALESCE(JSON_VALUE(Priv, '$.is_role'), '') NOT IN ('1', 'true') ORDER BY Host", user), nil
}

// readOnlyAdminRoleStmts create ReadOnlyAdminRole and give it READ_ONLY
// ADMIN (both idempotent). The account that creates the role gets it WITH
// ADMIN OPTION, which is what lets it grant the role later: an account
// without the admin option gets error 1698 from GRANT role, even with ALL
// PRIVILEGES.
func readOnlyAdminRoleStmts() []Stmt {
	return []Stmt{
		stmt("CREATE ROLE IF NOT EXISTS " + ReadOnlyAdminRole),
		stmt("GRANT READ_ONLY ADMIN ON *.* TO " + ReadOnlyAdminRole),
	}
}

// StripReadOnlyBypass moves READ_ONLY ADMIN from the accounts into
// ReadOnlyAdminRole: the role is granted to each account (WITH ADMIN OPTION,
// so that root can still grant it to the orchestration account), enabled on
// this session, and only then is the privilege revoked from the accounts,
// so that the session keeps the right to revoke even when it is one of
// them. Every statement is idempotent: REVOKE of a privilege the account no
// longer holds succeeds when the session holds it (through the role).
// Sessions of the accounts opened before the REVOKE keep the privilege
// until they end (MariaDB computes global privileges at login); the caller
// kills them.
func (d mariadbDialect) StripReadOnlyBypass(accounts []Account) ([]Stmt, error) {
	if len(accounts) == 0 {
		return nil, nil
	}
	quoted := make([]string, len(accounts))
	for i, a := range accounts {
		q, err := a.quoted()
		if err != nil {
			return nil, err
		}
		quoted[i] = q
	}
	out := readOnlyAdminRoleStmts()
	for _, q := range quoted {
		out = append(out, stmt("GRANT "+ReadOnlyAdminRole+" TO "+q+" WITH ADMIN OPTION"))
	}
	out = append(out, stmt("SET ROLE "+ReadOnlyAdminRole))
	for _, q := range quoted {
		out = append(out, stmt("REVOKE READ_ONLY ADMIN ON *.* FROM "+q))
	}
	return out, nil
}

func (d mariadbDialect) StopReplica() Stmt   { return stmt("STOP SLAVE") }
func (d mariadbDialect) StartReplica() Stmt  { return stmt("START SLAVE") }
func (d mariadbDialect) StopIOThread() Stmt  { return stmt("STOP SLAVE IO_THREAD") }
func (d mariadbDialect) StartIOThread() Stmt { return stmt("START SLAVE IO_THREAD") }

// ChangeSource uses CHANGE MASTER TO … MASTER_USE_GTID=slave_pos; CHANGE
// REPLICATION SOURCE is a syntax error in MariaDB.
func (d mariadbDialect) ChangeSource(s SourceSpec) ([]Stmt, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	var out []Stmt
	if s.ResumeFromBinlog {
		out = append(out, stmt("SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos"))
	}
	q := "CHANGE MASTER TO MASTER_HOST = '" + s.Host + "', MASTER_PORT = " + strconv.Itoa(s.Port) +
		", MASTER_USER = '" + s.User + "', MASTER_PASSWORD = ?, MASTER_USE_GTID = slave_pos" +
		", MASTER_CONNECT_RETRY = " + strconv.FormatInt(s.connectRetrySeconds(), 10) + s.heartbeatClause("MASTER_")
	if s.SSL {
		q += ", MASTER_SSL = 1"
	}
	return append(out, stmt(q, s.Password)), nil
}

func (d mariadbDialect) ResetReplication() []Stmt {
	return []Stmt{stmt("STOP SLAVE"), stmt("RESET SLAVE ALL")}
}

// ContinueHistory sets gtid_binlog_state after RESET MASTER (which only an
// empty binary log accepts), and gtid_slave_pos with it: the restored data
// holds exactly that history, as a primary or as a replica.
func (d mariadbDialect) ContinueHistory(pos string) []Stmt {
	return []Stmt{stmt("RESET MASTER"), stmt("SET GLOBAL gtid_binlog_state = ?", pos), stmt("SET GLOBAL gtid_slave_pos = ?", pos)}
}

// WaitForGTID uses MASTER_GTID_WAIT, which returns 0 once gtid_slave_pos has
// reached the position and -1 on timeout; the timeout may be fractional.
func (d mariadbDialect) WaitForGTID(pos string, timeout time.Duration) Stmt {
	return stmt("SELECT MASTER_GTID_WAIT(?, ?)", pos, max(timeout, 0).Seconds())
}

func (d mariadbDialect) SemiSyncPlugin(SemiSyncSide) (string, string, bool) { return "", "", false }

// EnableSemiSyncSource sets the wait point to AFTER_SYNC (MariaDB's default
// is AFTER_COMMIT, which lets other sessions see a transaction that a
// failover can still lose).
func (d mariadbDialect) EnableSemiSyncSource(s SemiSyncSourceSpec) ([]Stmt, error) {
	if s.Timeout <= 0 {
		return nil, errors.New("semi-sync timeout must be positive")
	}
	if s.WaitForReplicas > 1 {
		return nil, errors.New("MariaDB semi-sync waits for exactly one replica acknowledgement")
	}
	return []Stmt{
		stmt("SET GLOBAL rpl_semi_sync_master_timeout = " + strconv.FormatInt(s.Timeout.Milliseconds(), 10)),
		stmt("SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'"),
		stmt("SET GLOBAL rpl_semi_sync_master_enabled = ON"),
	}, nil
}

func (d mariadbDialect) DisableSemiSyncSource() []Stmt {
	return []Stmt{stmt("SET GLOBAL rpl_semi_sync_master_enabled = OFF")}
}

func (d mariadbDialect) EnableSemiSyncReplica() []Stmt {
	return []Stmt{stmt("SET GLOBAL rpl_semi_sync_slave_enabled = ON")}
}

func (d mariadbDialect) DisableSemiSyncReplica() []Stmt {
	return []Stmt{stmt("SET GLOBAL rpl_semi_sync_slave_enabled = OFF")}
}

// EnsureUser grants the orchestration account the fine-grained privileges
// of MariaDB 10.5+ rather than ALL: CONNECTION ADMIN lets it kill client
// sessions, the replication admin privileges cover CHANGE MASTER and
// semi-sync, SELECT on mysql.global_priv and mysql.roles_mapping lets it
// find sessions that write through a fence. READ_ONLY ADMIN, needed to set
// read_only, to set gtid_slave_pos and to change accounts on a read-only
// server, comes only through ReadOnlyAdminRole, never as a default role;
// an account made by an earlier version that held the privilege itself
// loses it here.
//
// The application roles get schema privileges only (see appGrants) and
// explicitly neither SUPER nor READ_ONLY ADMIN nor a default role, so that
// read_only binds them whatever was granted by hand before. Granting them
// needs an account that holds those privileges WITH GRANT OPTION (root),
// not the orchestration account.
func (d mariadbDialect) EnsureUser(u UserSpec) ([]Stmt, error) {
	acct, err := u.account()
	if err != nil {
		return nil, err
	}
	user := []Stmt{
		stmt("CREATE USER IF NOT EXISTS "+acct+" IDENTIFIED BY ?", u.Password),
		stmt("ALTER USER "+acct+" IDENTIFIED BY ?", u.Password),
	}
	switch u.Role {
	case RoleReplication:
		return append(user, stmt("GRANT REPLICATION SLAVE ON *.* TO "+acct)), nil
	case RoleOrchestration:
		out := append(readOnlyAdminRoleStmts(), user...)
		return append(out,
			stmt("GRANT RELOAD, PROCESS, REPLICATION SLAVE, BINLOG MONITOR, BINLOG ADMIN,"+
				" REPLICATION MASTER ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR, CONNECTION ADMIN,"+
				" CREATE USER ON *.* TO "+acct+" WITH GRANT OPTION"),
			stmt("GRANT SELECT ON mysql.global_priv TO "+acct),
			stmt("GRANT SELECT ON mysql.roles_mapping TO "+acct),
			fenceGrant(acct),
			stmt("GRANT "+ReadOnlyAdminRole+" TO "+acct),
			stmt("REVOKE READ_ONLY ADMIN ON *.* FROM "+acct),
			stmt("SET DEFAULT ROLE NONE FOR "+acct),
		), nil
	case RoleBackup:
		return append(user,
			stmt("GRANT RELOAD, PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO "+acct),
			stmt("SET DEFAULT ROLE NONE FOR "+acct),
		), nil
	case RoleAppWriter, RoleAppReader:
		grants, err := appGrants(u.Role, acct)
		if err != nil {
			return nil, err
		}
		out := append(user, grants...)
		return append(out,
			stmt("REVOKE SUPER, READ_ONLY ADMIN ON *.* FROM "+acct),
			stmt("SET DEFAULT ROLE NONE FOR "+acct),
		), nil
	default:
		return nil, fmt.Errorf("unknown role %d", u.Role)
	}
}
