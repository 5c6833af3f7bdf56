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

// Fence sets read_only. MariaDB has no super_read_only: from 10.11 read_only
// stops every account without READ_ONLY ADMIN (which ALL PRIVILEGES still
// carries), so a fence also kills client connections.
// https://mariadb.com/kb/en/server-system-variables/#read_only
func (d mariadbDialect) Fence() []Stmt { return []Stmt{stmt("SET GLOBAL read_only = ON")} }

func (d mariadbDialect) FenceStateQuery() Stmt { return stmt("SELECT @@global.read_only AS read_only") }

func (d mariadbDialect) MakeWritable() []Stmt { return []Stmt{stmt("SET GLOBAL read_only = OFF")} }

func (d mariadbDialect) ClientConnectionsQuery(exclude []string) (Stmt, error) {
	return clientConnectionsSQL(exclude)
}

func (d mariadbDialect) Kill(id uint64) Stmt {
	return stmt("KILL CONNECTION " + strconv.FormatUint(id, 10))
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
		", MASTER_CONNECT_RETRY = " + strconv.FormatInt(s.connectRetrySeconds(), 10)
	if s.SSL {
		q += ", MASTER_SSL = 1"
	}
	return append(out, stmt(q, s.Password)), nil
}

func (d mariadbDialect) ResetReplication() []Stmt {
	return []Stmt{stmt("STOP SLAVE"), stmt("RESET SLAVE ALL")}
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

// EnsureUser grants the orchestration account the fine-grained privileges of
// MariaDB 10.5+ rather than ALL: READ_ONLY ADMIN lets it work on a fenced
// server, CONNECTION ADMIN lets it kill client sessions, the replication
// admin privileges cover CHANGE MASTER, gtid_slave_pos and semi-sync.
func (d mariadbDialect) EnsureUser(u UserSpec) ([]Stmt, error) {
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
	case RoleOrchestration:
		out = append(out, stmt("GRANT RELOAD, PROCESS, REPLICATION SLAVE, BINLOG MONITOR, BINLOG ADMIN,"+
			" REPLICATION MASTER ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR, CONNECTION ADMIN,"+
			" READ_ONLY ADMIN, CREATE USER ON *.* TO "+acct+" WITH GRANT OPTION"))
	default:
		return nil, fmt.Errorf("unknown role %d", u.Role)
	}
	return out, nil
}
