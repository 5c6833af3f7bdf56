package topology

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Stmt is one SQL statement with its arguments. Values that vary (GTID sets,
// passwords) travel as arguments and are interpolated by the driver, which
// knows the server's quoting rules (including NO_BACKSLASH_ESCAPES);
// identifiers that cannot be arguments (user and host names) are validated
// against a strict pattern before they are written into the text.
type Stmt struct {
	// SQL is the statement text with ? placeholders.
	SQL string
	// Args are the placeholder values; passwords are Secret values.
	Args []any
}

// String renders the statement for evidence and logs; Secret arguments print
// as [redacted].
func (s Stmt) String() string {
	if len(s.Args) == 0 {
		return s.SQL
	}
	parts := make([]string, len(s.Args))
	for i, a := range s.Args {
		switch v := a.(type) {
		case Secret:
			parts[i] = v.String()
		case string:
			parts[i] = fmt.Sprintf("%q", v)
		default:
			parts[i] = fmt.Sprint(v)
		}
	}
	return s.SQL + " [" + strings.Join(parts, ", ") + "]"
}

func (s Stmt) secrets() []string {
	var out []string
	for _, a := range s.Args {
		if v, ok := a.(Secret); ok && v != "" {
			out = append(out, string(v))
		}
	}
	return out
}

func stmt(sql string, args ...any) Stmt { return Stmt{SQL: sql, Args: args} }

// Dialect owns every statement this tool sends to one server flavor, so the
// differences listed in TESTENV.md live in exactly one place per flavor and
// can be pinned by tests. Implementations are pure: they build statements
// and parse rows, and never talk to a server. The set of implementations is
// closed (see DialectFor).
type Dialect interface {
	// Flavor is the server flavor the statements are for.
	Flavor() Flavor

	// StateQuery returns one row with identity, read-only flags and GTID
	// variables under the column names ParseState reads.
	StateQuery() Stmt
	// ParseState reads StateQuery's row (NULL columns absent).
	ParseState(row map[string]string) (State, error)
	// ReplicaStatusQuery is SHOW REPLICA STATUS or SHOW SLAVE STATUS.
	ReplicaStatusQuery() Stmt
	// ReceivedGTID parses the received-transactions column of a replica
	// status row into the GTID state (Retrieved_Gtid_Set or Gtid_IO_Pos).
	ReceivedGTID(st *GTIDState, rs *ReplicaStatus) error
	// BinaryLogsQuery lists the binary logs; with BinlogStartQuery on the
	// oldest one it yields the MariaDB "purged" boundary. ok is false where
	// the flavor reports gtid_purged directly.
	BinaryLogsQuery() (s Stmt, ok bool)
	// BinlogStartQuery returns the GTID position at the start of a binary log.
	BinlogStartQuery(file string) Stmt
	// SemiSyncQueries read the semi-sync variables and status counters.
	SemiSyncQueries() (variables, status Stmt)

	// Fence makes the server refuse writes from clients.
	Fence() []Stmt
	// FenceStateQuery returns read_only and, where it exists,
	// super_read_only.
	FenceStateQuery() Stmt
	// MakeWritable undoes Fence.
	MakeWritable() []Stmt
	// ClientConnectionsQuery lists client connections that a fence should
	// end: not this session, not system or event-scheduler threads, not
	// binlog dump threads serving replicas (they must keep draining the old
	// primary's binlog), and not the users in exclude.
	ClientConnectionsQuery(exclude []string) (Stmt, error)
	// Kill ends one connection.
	Kill(id uint64) Stmt
	// WriteThroughSessionsQuery lists the client sessions (not this one,
	// not system, event-scheduler or binlog dump threads) whose account may
	// write through read_only, one row per session and reason, with the
	// columns ID, USER, HOST, COMMAND, TIME, WHY and BLOCKING (1: the
	// session can write now; 0: it would first have to enable a role with
	// SET ROLE). Sessions are matched to accounts by user name only, because
	// the process list does not say which host entry a session matched.
	WriteThroughSessionsQuery() Stmt
	// WriteThroughAccountsQuery lists the accounts whose sessions
	// WriteThroughSessionsQuery reports, with the columns USER, HOST, WHY
	// and BLOCKING (USER and HOST are "%" for "every account").
	WriteThroughAccountsQuery() Stmt
	// FenceEpochQuery reads the epoch stored in FenceTable (column epoch,
	// NULL without a row) and what FenceEpochWrite needs to know of the
	// server. It fails with error 1146 when the table does not exist yet.
	FenceEpochQuery() Stmt
	// FenceEpochWrite returns the statements that raise the stored epoch to
	// epoch (creating FenceTable first when create is set), with binary
	// logging off for the session and through the fence, and those that put
	// back what they lifted, run whatever happened. state is
	// FenceEpochQuery's row.
	FenceEpochWrite(epoch int64, create bool, state map[string]string) (do, undo []Stmt)
	// Elevate returns the statement that gives this session the right to
	// change read_only and to write through it (MariaDB: SET ROLE of
	// ReadOnlyAdminRole) and the one that takes it back; ok is false where
	// no such step exists or is needed (MySQL).
	Elevate() (on, off Stmt, ok bool)
	// AccountHostsQuery lists, in a column "host", the host parts of the
	// accounts (not roles) named user.
	AccountHostsQuery(user string) (Stmt, error)
	// StripReadOnlyBypass returns the statements that take the read_only
	// bypass away from the accounts while leaving them able to fence (on
	// MariaDB: READ_ONLY ADMIN moves into ReadOnlyAdminRole, which the
	// accounts may enable per session). It returns nil where super_read_only
	// already binds every account (MySQL).
	StripReadOnlyBypass(accounts []Account) ([]Stmt, error)

	// StopReplica, StartReplica, StopIOThread and StartIOThread control the
	// replication threads; stopping only the IO thread lets the SQL thread
	// drain the relay log, which failover relies on.
	StopReplica() Stmt
	// StartReplica starts both threads.
	StartReplica() Stmt
	// StopIOThread stops only the receiver.
	StopIOThread() Stmt
	// StartIOThread starts only the receiver.
	StartIOThread() Stmt
	// ChangeSource points replication at a source with GTID
	// auto-positioning. Replication must be stopped first.
	ChangeSource(spec SourceSpec) ([]Stmt, error)
	// ResetReplication forgets the replication configuration of a promoted
	// instance.
	ResetReplication() []Stmt
	// ContinueHistory starts the binary log again with the GTID history of a
	// restored backup (a MariaDB position or a MySQL GTID set): the binary logs
	// are reset, and the server's GTID state is set to the position, so that
	// its next transaction follows it.
	ContinueHistory(position string) []Stmt
	// WaitForGTID blocks on the server until the GTID set or position gtid
	// has been applied or timeout passed; the statement returns one integer,
	// 0 when applied.
	WaitForGTID(gtid string, timeout time.Duration) Stmt

	// SemiSyncPlugin names the plugin a side needs loaded and its library,
	// or ok=false when semi-sync is built in.
	SemiSyncPlugin(side SemiSyncSide) (name, library string, ok bool)
	// EnableSemiSyncSource and the other three set the semi-sync variables.
	// A replica's change takes effect when its IO thread reconnects.
	EnableSemiSyncSource(spec SemiSyncSourceSpec) ([]Stmt, error)
	// DisableSemiSyncSource turns the waiting side off.
	DisableSemiSyncSource() []Stmt
	// EnableSemiSyncReplica turns acknowledgements on.
	EnableSemiSyncReplica() []Stmt
	// DisableSemiSyncReplica turns acknowledgements off.
	DisableSemiSyncReplica() []Stmt

	// EnsureUser creates an account or converges it (password, grants);
	// running it twice is harmless.
	EnsureUser(spec UserSpec) ([]Stmt, error)

	sealed()
}

// DialectFor returns the dialect of a detected flavor.
func DialectFor(f Flavor) (Dialect, error) {
	switch f.Line {
	case MariaDB:
		return mariadbDialect{f: f}, nil
	case MySQL57, MySQL80, MySQL84:
		return newMySQLDialect(f), nil
	default:
		return nil, fmt.Errorf("%w: no dialect for %q", ErrUnsupportedFlavor, f.Line)
	}
}

// SourceSpec says where a replica replicates from.
type SourceSpec struct {
	// Host and Port as the replica must reach them (a pod's stable DNS
	// name in a cluster).
	Host string
	// Port is the source's MySQL port.
	Port int
	// User is the replication account.
	User string
	// Password is the replication account's password.
	Password Secret
	// ConnectRetry is the interval between reconnection attempts (default
	// 10s, rounded up to whole seconds as the server requires).
	ConnectRetry time.Duration
	// HeartbeatPeriod is how often the source sends a heartbeat to an idle replica (0 keeps
	// the server default, half of the replica's net timeout when the statement runs). A short
	// one lets replicas tell a silent source from an idle one quickly.
	HeartbeatPeriod time.Duration
	// RetryCount bounds reconnection attempts on MySQL (0 keeps the server
	// default); MariaDB has only the global master_retry_count.
	RetryCount int
	// SSL requires TLS on the replication connection.
	SSL bool
	// ResumeFromBinlog, on MariaDB, first copies gtid_binlog_pos into
	// gtid_slave_pos: a demoted primary's own writes are in its binlog but
	// not in gtid_slave_pos, and MASTER_USE_GTID=slave_pos would otherwise
	// ask the new source for transactions it already has. MySQL's
	// auto-positioning uses gtid_executed and needs no such step.
	ResumeFromBinlog bool
	// SemiSync turns the replica's acknowledging side on before replication starts, so that
	// its first connection is a semi-sync one. A source starved of acknowledgements flags the
	// events it waits for only to a semi-sync replica: one that first catches up without the
	// side on and then reconnects with it has already received the waited transaction, is
	// never asked for it, and, when no new commit can reach the binary log (every session of
	// the source waits behind that one), the source waits for good (measured on MariaDB 10.11).
	SemiSync bool
}

// SemiSyncSide is the source or the replica side of semi-sync replication.
type SemiSyncSide int

const (
	// SemiSyncSource is the primary, which waits for acknowledgements.
	SemiSyncSource SemiSyncSide = iota
	// SemiSyncReplica is a replica, which acknowledges.
	SemiSyncReplica
)

// SemiSyncSourceSpec configures the waiting side.
type SemiSyncSourceSpec struct {
	// Timeout after which the source falls back to asynchronous commits.
	Timeout time.Duration
	// WaitForReplicas is how many acknowledgements a commit waits for
	// (MySQL only; MariaDB always waits for one).
	WaitForReplicas int
}

// UserRole selects the privileges EnsureUser grants.
type UserRole int

const (
	// RoleReplication can only stream binlogs (REPLICATION SLAVE).
	RoleReplication UserRole = iota
	// RoleOrchestration can do everything this package does: observe,
	// fence, kill connections, re-point, wait, semi-sync, create the
	// replication account, keep the fencing token (CREATE, SELECT, INSERT,
	// UPDATE on FenceSchema). It gets no data privileges beyond that. On
	// MariaDB it does not hold READ_ONLY ADMIN: it is granted
	// ReadOnlyAdminRole, which this package enables only on the one session
	// that runs a statement needing it.
	RoleOrchestration
	// RoleAppWriter is an application account: DML and DDL on every schema
	// except the system schemas (mysql, sys, performance_schema, and this
	// tool's FenceSchema), no global
	// privilege, so read_only (MariaDB) and super_read_only (MySQL) stop it.
	RoleAppWriter
	// RoleAppReader is a read-only application account: SELECT on every
	// schema except mysql, sys and FenceSchema.
	RoleAppReader
	// RoleBackup can take a physical backup and nothing else: MariaDB's
	// mariadb-backup needs RELOAD (BACKUP STAGE), PROCESS, BINLOG MONITOR
	// (the binlog position) and SLAVE MONITOR; MySQL's XtraBackup needs
	// RELOAD, PROCESS, LOCK TABLES, REPLICATION CLIENT and, from 8.0,
	// BACKUP_ADMIN and SELECT on performance_schema.log_status. No data
	// privilege: the copy reads files, not rows.
	RoleBackup
)

// ReadOnlyAdminRole is the MariaDB role that carries READ_ONLY ADMIN, the
// privilege that both writes through read_only and is needed to change
// read_only at all (SET GLOBAL read_only answers error 1227 without it, in
// either direction, on MariaDB 10.11). No account keeps the privilege
// itself: accounts that fence are granted this role, never as a default
// role, and this package enables it (SET ROLE) only on a pinned session for
// the statements that need it, then disables it again. A session that has
// not run SET ROLE is bound by read_only like any application session.
const ReadOnlyAdminRole = "mysqlctl_read_only_admin"

// Account is a user@host pair.
type Account struct {
	// User is the account name.
	User string
	// Host is the host part (default "%").
	Host string
}

// String renders 'user'@'host' (unvalidated; for messages).
func (a Account) String() string {
	host := a.Host
	if host == "" {
		host = "%"
	}
	return a.User + "@" + host
}

// quoted renders 'user'@'host' after validating both parts, because
// account names cannot be statement arguments.
func (a Account) quoted() (string, error) {
	host := a.Host
	if host == "" {
		host = "%"
	}
	if err := ValidateAccountName(a.User); err != nil {
		return "", err
	}
	if !accountHostPattern.MatchString(host) {
		return "", fmt.Errorf("invalid account host %q", host)
	}
	return "'" + a.User + "'@'" + host + "'", nil
}

// ValidateAccountName accepts the user names this package writes into
// statements: 1-32 letters, digits, '_', '.', '-'.
func ValidateAccountName(name string) error {
	if !accountNamePattern.MatchString(name) {
		return fmt.Errorf("invalid user name %q: 1-32 letters, digits, '_', '.', '-'", name)
	}
	return nil
}

// UserSpec describes one account.
type UserSpec struct {
	// User is the account name (letters, digits, '_', '.', '-').
	User string
	// Host is the account's host part (default "%").
	Host string
	// Password is set on creation and on every later call.
	Password Secret
	// Role selects the grants.
	Role UserRole
}

var (
	accountNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)
	accountHostPattern = regexp.MustCompile(`^[A-Za-z0-9_.%:/-]{1,255}$`)
	hostPattern        = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,255}$`)
)

// account renders 'user'@'host' after validating both parts, because
// account names cannot be statement arguments.
func (u UserSpec) account() (string, error) {
	acct, err := Account{User: u.User, Host: u.Host}.quoted()
	if err != nil {
		return "", err
	}
	if u.Password == "" {
		return "", errors.New("an account needs a password")
	}
	return acct, nil
}

func (s SourceSpec) validate() error {
	if !hostPattern.MatchString(s.Host) {
		return fmt.Errorf("invalid source host %q", s.Host)
	}
	if s.Port < 1 || s.Port > 65535 {
		return fmt.Errorf("invalid source port %d", s.Port)
	}
	if !accountNamePattern.MatchString(s.User) {
		return fmt.Errorf("invalid replication user %q", s.User)
	}
	if s.RetryCount < 0 {
		return fmt.Errorf("invalid retry count %d", s.RetryCount)
	}
	return nil
}

func (s SourceSpec) connectRetrySeconds() int64 {
	if s.ConnectRetry <= 0 {
		return 10
	}
	return int64((s.ConnectRetry + time.Second - 1) / time.Second)
}

// heartbeatClause is ", <prefix>HEARTBEAT_PERIOD = s" when a period is set (the servers take
// fractional seconds, to the millisecond).
func (s SourceSpec) heartbeatClause(prefix string) string {
	if s.HeartbeatPeriod <= 0 {
		return ""
	}
	return ", " + prefix + "HEARTBEAT_PERIOD = " + strconv.FormatFloat(s.HeartbeatPeriod.Seconds(), 'f', 3, 64)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// clientConnectionsSQL is shared by every flavor: information_schema
// PROCESSLIST exists in all of them (deprecated but present in MySQL 8.4).
func clientConnectionsSQL(exclude []string) (Stmt, error) {
	q := "SELECT ID, USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST" +
		" WHERE ID <> CONNECTION_ID()" +
		" AND USER NOT IN ('system user', 'event_scheduler')" +
		" AND COMMAND NOT IN ('Binlog Dump', 'Binlog Dump GTID', 'Daemon', 'Killed')"
	var args []any
	if len(exclude) > 0 {
		for _, u := range exclude {
			if !accountNamePattern.MatchString(u) {
				return Stmt{}, fmt.Errorf("invalid user name %q", u)
			}
			args = append(args, u)
		}
		q += " AND USER NOT IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(exclude)), ", ") + ")"
	}
	return Stmt{SQL: q + " ORDER BY ID", Args: args}, nil
}

// clientSessionFilter is the part of a process-list query that keeps client
// sessions: not this session, not system or event-scheduler threads, not
// the binlog dump threads that serve replicas. Sessions being killed stay
// in: until they are gone, what they were doing can still commit.
const clientSessionFilter = "p.ID <> CONNECTION_ID()" +
	" AND p.USER NOT IN ('system user', 'event_scheduler')" +
	" AND p.COMMAND NOT IN ('Binlog Dump', 'Binlog Dump GTID', 'Daemon')"

// appWriterPrivileges are the schema privileges of RoleAppWriter: data
// and schema changes, routines, triggers and events, nothing global.
const appWriterPrivileges = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES," +
	" CREATE TEMPORARY TABLES, LOCK TABLES, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE," +
	" EXECUTE, TRIGGER, EVENT"

// appGrants grants an application account its schema privileges on every
// schema through the wildcard `%`, then gives the system schemas entries of
// their own. Database-level grants are not added up: the server uses the
// most specific matching entry, so an exact entry for `mysql` (SHOW VIEW,
// which reads nothing but view definitions) replaces the wildcard there.
// Verified on MariaDB 10.11: the writer creates databases and tables but
// gets error 1142/1044 on mysql.* and sys.*; FenceSchema gets the same
// exact entry, so no application account can create, read or change the
// fencing token (FenceTable). performance_schema refuses
// SHOW VIEW grants, so it gets SELECT (the wildcard would give SELECT too,
// and its own rules refuse DDL; the exact entry takes UPDATE of the setup
// tables and TRUNCATE away). On MySQL this relies on partial_revokes=OFF
// (the default), under which `%` is a wildcard in database grants (MySQL
// 8.2 deprecates that use).
func appGrants(role UserRole, acct string) ([]Stmt, error) {
	switch role {
	case RoleAppWriter:
		return []Stmt{
			stmt("GRANT " + appWriterPrivileges + " ON `%`.* TO " + acct),
			stmt("GRANT SHOW VIEW ON `mysql`.* TO " + acct),
			stmt("GRANT SHOW VIEW ON `sys`.* TO " + acct),
			stmt("GRANT SHOW VIEW ON `" + FenceSchema + "`.* TO " + acct),
			stmt("GRANT SELECT ON `performance_schema`.* TO " + acct),
		}, nil
	case RoleAppReader:
		return []Stmt{
			stmt("GRANT SELECT ON `%`.* TO " + acct),
			stmt("GRANT SHOW VIEW ON `mysql`.* TO " + acct),
			stmt("GRANT SHOW VIEW ON `sys`.* TO " + acct),
			stmt("GRANT SHOW VIEW ON `" + FenceSchema + "`.* TO " + acct),
		}, nil
	default:
		return nil, fmt.Errorf("unknown role %d", role)
	}
}

// fenceEpochWrite are the statements of FenceEpochWrite that every flavor
// shares, between its own steps that lift and restore the fence: the
// schema and table (created only when missing: on a read-only server they
// need the same rights as the write) and the write, which never lowers the
// stored epoch.
func fenceEpochWrite(epoch int64, create bool) []Stmt {
	var out []Stmt
	if create {
		out = append(out,
			stmt("CREATE DATABASE IF NOT EXISTS "+FenceSchema),
			stmt("CREATE TABLE IF NOT EXISTS "+FenceTable+" (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, epoch BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"))
	}
	return append(out, stmt("INSERT INTO "+FenceTable+" (id, epoch) VALUES (1, ?) ON DUPLICATE KEY UPDATE epoch = GREATEST(epoch, ?)", epoch, epoch))
}

// fenceEpochSQL reads the stored epoch (NULL without a row).
const fenceEpochSQL = "SELECT (SELECT epoch FROM " + FenceTable + " WHERE id = 1) AS epoch"

// fenceGrant gives the orchestration account what the fencing token needs.
func fenceGrant(acct string) Stmt {
	return stmt("GRANT CREATE, SELECT, INSERT, UPDATE ON `" + FenceSchema + "`.* TO " + acct)
}
