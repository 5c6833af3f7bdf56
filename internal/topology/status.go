package topology

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// Row is one result row keyed by column name. A NULL column is absent from
// the map: that is the one way NULL survives the map[string]string shape,
// and it is how an unknown lag stays distinguishable from a lag of 0.
type Row = map[string]string

// State is what StateQuery returns: identity, read-only flags and GTID
// variables.
type State struct {
	// ServerID is @@server_id.
	ServerID uint32
	// ServerUUID is MySQL's server_uuid, lower case; empty on MariaDB.
	ServerUUID string
	// DomainID is MariaDB's gtid_domain_id; 0 on MySQL.
	DomainID uint32
	// ReadOnly is @@read_only.
	ReadOnly bool
	// SuperReadOnly is nil on MariaDB, which has no such variable.
	SuperReadOnly *bool
	// GTIDStrictMode is MariaDB's gtid_strict_mode; nil on MySQL.
	GTIDStrictMode *bool
	// GTIDMode is MySQL's gtid_mode (ON, OFF, ON_PERMISSIVE, …); MariaDB
	// always assigns GTIDs and reports "ON".
	GTIDMode string
	// LogBin is @@log_bin: without a binary log there is no GTID history to
	// serve replicas.
	LogBin bool
	// GTID is the GTID history.
	GTID GTIDState
}

// GTIDState is an instance's GTID history. MySQL fills the set fields,
// MariaDB the position fields; Flavor says which.
type GTIDState struct {
	// Executed is MySQL's gtid_executed.
	Executed gtid.MySQLSet
	// Purged is MySQL's gtid_purged: executed transactions no longer in
	// the binary logs, which this server cannot serve to a replica.
	Purged gtid.MySQLSet
	// Received is MySQL's Retrieved_Gtid_Set: transactions received into
	// the relay log, applied or not.
	Received gtid.MySQLSet

	// BinlogPos is MariaDB's gtid_binlog_pos.
	BinlogPos gtid.MariaDBPos
	// SlavePos is MariaDB's gtid_slave_pos.
	SlavePos gtid.MariaDBPos
	// CurrentPos is MariaDB's gtid_current_pos.
	CurrentPos gtid.MariaDBPos
	// IOPos is MariaDB's Gtid_IO_Pos: the last GTID received per domain.
	IOPos gtid.MariaDBPos
	// BinlogState is MariaDB's gtid_binlog_state: the last GTID of every
	// (domain, server_id) pair in the binlogs, hence every server that ever
	// wrote transactions that reached this binlog.
	BinlogState []gtid.MariaDBGTID
	// PurgedPos is the MariaDB counterpart of gtid_purged: the position at
	// the start of the oldest binary log still on disk.
	PurgedPos gtid.MariaDBPos

	// PurgedKnown is false when the purged boundary could not be read.
	PurgedKnown bool
}

// ThreadState is a replication thread's running state as the server prints
// it.
type ThreadState string

const (
	// ThreadRunning is "Yes".
	ThreadRunning ThreadState = "Yes"
	// ThreadStopped is "No".
	ThreadStopped ThreadState = "No"
	// ThreadConnecting is "Connecting": the IO thread runs but has no
	// connection to its source.
	ThreadConnecting ThreadState = "Connecting"
)

// ReplicaStatus is one row of SHOW REPLICA STATUS / SHOW SLAVE STATUS, with
// both the MySQL 8.0.22+ column names (Replica_*, Source_*) and the older
// ones that MySQL 5.7 and MariaDB keep (Slave_*, Master_*) mapped to one
// set of fields.
type ReplicaStatus struct {
	// SourceHost, SourcePort and SourceUser are what CHANGE MASTER / CHANGE
	// REPLICATION SOURCE set.
	SourceHost string
	SourcePort int
	SourceUser string
	// SourceServerID and SourceUUID identify the source the IO thread last
	// connected to (0 and "" before the first connection).
	SourceServerID uint32
	SourceUUID     string

	// IOThread is Replica_IO_Running (Slave_IO_Running).
	IOThread ThreadState
	// SQLRunning is Replica_SQL_Running (Slave_SQL_Running).
	SQLRunning bool
	// IOState and SQLState are the threads' state texts.
	IOState  string
	SQLState string

	// LastIOErrno and LastIOError are the receiver's last error (0, "" when
	// none).
	LastIOErrno int
	LastIOError string
	// LastSQLErrno and LastSQLError are the applier's last error.
	LastSQLErrno int
	LastSQLError string

	// SecondsBehind is Seconds_Behind_Source/Master; nil when the server
	// reports NULL (SQL thread stopped, IO thread disconnected). Unknown is
	// never reported as 0.
	SecondsBehind *int64

	// AutoPosition is MySQL's Auto_Position=1 or MariaDB's Using_Gtid other
	// than No: the replica positions itself by GTID.
	AutoPosition bool
	// UsingGTID is MariaDB's Using_Gtid (No, Slave_Pos, Current_Pos).
	UsingGTID string
	// RetrievedGTIDSet and ExecutedGTIDSet are MySQL's columns, raw.
	RetrievedGTIDSet string
	ExecutedGTIDSet  string
	// GTIDIOPos is MariaDB's Gtid_IO_Pos, raw.
	GTIDIOPos string

	// SQLDelay is the configured apply delay in seconds.
	SQLDelay int64
	// SQLRemainingDelay is nil unless a delayed replica is waiting.
	SQLRemainingDelay *int64
	// ConnectRetry is the reconnection interval in seconds.
	ConnectRetry int64
	// ChannelName is MySQL's replication channel ("" is the default).
	ChannelName string
}

// ParseReplicaStatus turns one status row into a ReplicaStatus. Columns
// absent from the row are NULL.
func ParseReplicaStatus(row Row) (ReplicaStatus, error) {
	var r ReplicaStatus
	var err error
	r.SourceHost = first(row, "Source_Host", "Master_Host")
	r.SourceUser = first(row, "Source_User", "Master_User")
	r.SourceUUID = strings.ToLower(first(row, "Source_UUID", "Master_UUID"))
	if r.SourcePort, err = intCol(row, "Source_Port", "Master_Port"); err != nil {
		return r, err
	}
	sid, err := int64Col(row, "Source_Server_Id", "Master_Server_Id")
	if err != nil {
		return r, err
	}
	if sid < 0 || sid > 1<<32-1 {
		return r, fmt.Errorf("column Source_Server_Id: %d out of range", sid)
	}
	r.SourceServerID = uint32(sid)

	io := first(row, "Replica_IO_Running", "Slave_IO_Running")
	switch strings.ToLower(io) {
	case "yes":
		r.IOThread = ThreadRunning
	case "connecting", "preparing":
		r.IOThread = ThreadConnecting
	case "no", "":
		r.IOThread = ThreadStopped
	default:
		return r, fmt.Errorf("column Replica_IO_Running: unexpected value %q", io)
	}
	r.SQLRunning = strings.EqualFold(first(row, "Replica_SQL_Running", "Slave_SQL_Running"), "yes")
	r.IOState = first(row, "Replica_IO_State", "Slave_IO_State")
	r.SQLState = first(row, "Replica_SQL_Running_State", "Slave_SQL_Running_State")

	if r.LastIOErrno, err = intCol(row, "Last_IO_Errno"); err != nil {
		return r, err
	}
	r.LastIOError = row["Last_IO_Error"]
	if r.LastSQLErrno, err = intCol(row, "Last_SQL_Errno"); err != nil {
		return r, err
	}
	r.LastSQLError = row["Last_SQL_Error"]
	if r.SecondsBehind, err = optInt64Col(row, "Seconds_Behind_Source", "Seconds_Behind_Master"); err != nil {
		return r, err
	}
	if r.SQLDelay, err = int64Col(row, "SQL_Delay"); err != nil {
		return r, err
	}
	if r.SQLRemainingDelay, err = optInt64Col(row, "SQL_Remaining_Delay"); err != nil {
		return r, err
	}
	if r.ConnectRetry, err = int64Col(row, "Connect_Retry"); err != nil {
		return r, err
	}

	r.UsingGTID = row["Using_Gtid"]
	r.GTIDIOPos = row["Gtid_IO_Pos"]
	r.RetrievedGTIDSet = row["Retrieved_Gtid_Set"]
	r.ExecutedGTIDSet = row["Executed_Gtid_Set"]
	r.ChannelName = row["Channel_Name"]
	if ap, ok := row["Auto_Position"]; ok {
		r.AutoPosition = ap == "1"
	} else {
		r.AutoPosition = r.UsingGTID != "" && !strings.EqualFold(r.UsingGTID, "No")
	}
	return r, nil
}

// IORunning reports whether the IO thread is connected and receiving.
func (r ReplicaStatus) IORunning() bool { return r.IOThread == ThreadRunning }

// Healthy reports whether both threads run without a recorded error. It says
// nothing about lag or about replicating from the right source; Classify
// judges those.
func (r ReplicaStatus) Healthy() bool {
	return r.IORunning() && r.SQLRunning && r.LastIOErrno == 0 && r.LastSQLErrno == 0
}

// LagKnown reports whether the server could compute the lag.
func (r ReplicaStatus) LagKnown() bool { return r.SecondsBehind != nil }

// SemiSyncState is the semi-synchronous replication configuration and its
// live counters, for either side.
type SemiSyncState struct {
	// Available is true when the semi-sync variables exist (built in on
	// MariaDB, plugins loaded on MySQL).
	Available bool
	// SourceEnabled and ReplicaEnabled are the *_enabled variables.
	SourceEnabled bool
	// ReplicaEnabled is rpl_semi_sync_replica_enabled (slave on older
	// servers).
	ReplicaEnabled bool
	// SourceActive is Rpl_semi_sync_source_status (master on older
	// servers): ON while commits actually wait for acknowledgements; it turns
	// OFF after a timeout even though SourceEnabled stays ON.
	SourceActive bool
	// ReplicaActive is Rpl_semi_sync_replica_status: the IO thread
	// acknowledges.
	ReplicaActive bool
	// SourceClients is the number of connected semi-sync replicas.
	SourceClients int64
	// WaitSessions is the number of sessions waiting for an
	// acknowledgement right now; a starved primary has them pile up.
	WaitSessions int64
	// TimeoutMillis is the source's fallback timeout.
	TimeoutMillis int64
	// WaitForReplicas is MySQL's wait_for_replica_count (1 on MariaDB).
	WaitForReplicas int64
	// WaitPoint is AFTER_SYNC or AFTER_COMMIT.
	WaitPoint string
	// WaitNoReplica is rpl_semi_sync_master_wait_no_slave (MySQL:
	// rpl_semi_sync_source_wait_no_replica): when OFF, a source whose
	// semi-sync replicas all disconnect falls back to asynchronous at once
	// instead of waiting for the timeout.
	WaitNoReplica bool
	// NoTx and YesTx count commits not acknowledged / acknowledged.
	NoTx, YesTx int64
}

// Starved reports whether commits wait, or would wait, for an acknowledgement no replica is
// there to give: the source side is active with fewer semi-sync replicas connected than it waits
// for. A starved server's commit leader holds the binlog lock until one returns. (Sessions
// waiting beside enough connected replicas are a busy primary's normal state: theirs arrive.)
func (s SemiSyncState) Starved() bool {
	return s.SourceActive && s.SourceClients < max(s.WaitForReplicas, 1)
}

// ParseSemiSync reads SHOW GLOBAL VARIABLES/STATUS LIKE 'rpl_semi_sync%'
// rows (Variable_name → Value). MySQL 8.0.26 renamed master/slave to
// source/replica in these names; the names are folded to one spelling here
// so that a single parser serves every flavor.
func ParseSemiSync(variables, status map[string]string) (SemiSyncState, error) {
	v := foldSemiSyncNames(variables)
	st := foldSemiSyncNames(status)
	s := SemiSyncState{Available: len(v) > 0}
	if !s.Available {
		return s, nil
	}
	onOff := func(m map[string]string, k string) bool {
		x := strings.ToUpper(m[k])
		return x == "ON" || x == "1"
	}
	num := func(m map[string]string, k string) (int64, error) {
		x, ok := m[k]
		if !ok || x == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a number", k, x)
		}
		return n, nil
	}
	s.SourceEnabled = onOff(v, "rpl_semi_sync_master_enabled")
	s.ReplicaEnabled = onOff(v, "rpl_semi_sync_slave_enabled")
	s.SourceActive = onOff(st, "rpl_semi_sync_master_status")
	s.ReplicaActive = onOff(st, "rpl_semi_sync_slave_status")
	s.WaitPoint = strings.ToUpper(v["rpl_semi_sync_master_wait_point"])
	s.WaitNoReplica = onOff(v, "rpl_semi_sync_master_wait_no_slave") || onOff(v, "rpl_semi_sync_master_wait_no_replica")
	var err error
	for _, f := range []struct {
		m   map[string]string
		k   string
		dst *int64
	}{
		{v, "rpl_semi_sync_master_timeout", &s.TimeoutMillis},
		{v, "rpl_semi_sync_master_wait_for_slave_count", &s.WaitForReplicas},
		{st, "rpl_semi_sync_master_clients", &s.SourceClients},
		{st, "rpl_semi_sync_master_wait_sessions", &s.WaitSessions},
		{st, "rpl_semi_sync_master_no_tx", &s.NoTx},
		{st, "rpl_semi_sync_master_yes_tx", &s.YesTx},
	} {
		if *f.dst, err = num(f.m, f.k); err != nil {
			return s, err
		}
	}
	if _, ok := v["rpl_semi_sync_master_wait_for_slave_count"]; !ok && len(v) > 0 {
		s.WaitForReplicas = 1
	}
	return s, nil
}

func foldSemiSyncNames(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	r := strings.NewReplacer("_source_", "_master_", "_replica_", "_slave_", "_for_replica_", "_for_slave_")
	for k, val := range m {
		k = strings.ToLower(k)
		if !strings.HasPrefix(k, "rpl_semi_sync_") {
			continue
		}
		// The replacer handles the side name right after the prefix and
		// wait_for_replica_count.
		k = "rpl_semi_sync_" + r.Replace("_" + strings.TrimPrefix(k, "rpl_semi_sync_"))[1:]
		out[k] = val
	}
	return out
}

// first returns the first present column among names, so one parser reads
// both the MySQL 8.0.22+ and the older column names.
func first(row Row, names ...string) string {
	for _, n := range names {
		if v, ok := row[n]; ok {
			return v
		}
	}
	return ""
}

func intCol(row Row, names ...string) (int, error) {
	n, err := int64Col(row, names...)
	return int(n), err
}

// int64Col reads a numeric column; absent (NULL) or empty reads as 0.
func int64Col(row Row, names ...string) (int64, error) {
	p, err := optInt64Col(row, names...)
	if p == nil {
		return 0, err
	}
	return *p, err
}

// optInt64Col reads a nullable numeric column: nil for NULL.
func optInt64Col(row Row, names ...string) (*int64, error) {
	for _, n := range names {
		v, ok := row[n]
		if !ok {
			continue
		}
		if v == "" {
			return nil, nil
		}
		x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not an integer", n, v)
		}
		return &x, nil
	}
	return nil, nil
}

func parseUint32(row Row, col string) (uint32, error) {
	v, ok := row[col]
	if !ok {
		return 0, fmt.Errorf("column %s is NULL", col)
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("column %s: %q is not a 32-bit unsigned integer", col, v)
	}
	return uint32(n), nil
}

func parseBool(row Row, col string) (bool, error) {
	v, ok := row[col]
	if !ok {
		return false, fmt.Errorf("column %s is NULL", col)
	}
	switch strings.ToUpper(v) {
	case "1", "ON", "YES", "TRUE":
		return true, nil
	case "0", "OFF", "NO", "FALSE":
		return false, nil
	default:
		return false, fmt.Errorf("column %s: %q is not a boolean", col, v)
	}
}
