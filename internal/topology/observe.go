package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// Querier is what observation needs from a connection pool; *sql.DB and
// *sql.Conn satisfy it.
type Querier interface {
	// QueryContext runs a statement that returns rows.
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var (
	_ Querier = (*sql.DB)(nil)
	_ Querier = (*sql.Conn)(nil)
)

// Snapshot is everything one observation learned about one instance. It is a
// plain value: decision code (Classify, failover) reads it without I/O.
type Snapshot struct {
	// Name identifies the instance (the pod name).
	Name string
	// ObservedAt is when the observation started, from the injected clock.
	ObservedAt time.Time

	// Reachable is true once the server answered a query.
	Reachable bool
	// Err is set when the observation failed or is incomplete; Reachable
	// tells whether the failure was reaching the server or a later step.
	Err *ObserveError
	// Warnings list optional parts that could not be read (for example the
	// semi-sync counters without the privilege); the snapshot is still
	// usable.
	Warnings []string

	// Flavor is what the server reported itself to be.
	Flavor Flavor
	// State holds identity, read-only flags and GTID history.
	State
	// Replica is nil when no replication is configured.
	Replica *ReplicaStatus
	// SemiSync is the semi-sync configuration and counters.
	SemiSync SemiSyncState
}

// Complete reports whether every essential query succeeded.
func (s Snapshot) Complete() bool { return s.Reachable && s.Err == nil }

// ObserveError says why an observation failed, without secrets.
type ObserveError struct {
	// Kind classifies the failure.
	Kind ErrorKind
	// Stage is "connect", "detect flavor", "read state", "replica status"
	// or "purged".
	Stage string
	// Message explains the failure, without secrets.
	Message string
	// Config is the refusal when Kind is ErrorConfig: the path to the
	// server is refused by configuration (see ConfigError).
	Config *ConfigError
}

// Error implements error.
func (e *ObserveError) Error() string { return e.Stage + ": " + e.Message }

// Unwrap returns the configuration refusal behind the failure, if any, so
// that errors.As finds it through an observation.
func (e *ObserveError) Unwrap() error {
	if e == nil || e.Config == nil {
		return nil
	}
	return e.Config
}

// ObserveOptions tune an observation.
type ObserveOptions struct {
	// Now is the clock (default time.Now); injected so tests and decision
	// code never depend on wall time.
	Now func() time.Time
	// Timeout bounds one instance's whole observation (default 5s).
	Timeout time.Duration
	// Secrets are removed from every error message (the password the
	// connection pool uses, for instance).
	Secrets []string
}

func (o ObserveOptions) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o ObserveOptions) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 5 * time.Second
}

// binlogListWait bounds the listing of the binary logs while commits wait for acknowledgements.
const binlogListWait = 500 * time.Millisecond

const versionQuery = "SELECT @@version AS version, @@version_comment AS version_comment"

// Observe gathers one instance's state: flavor, identity, read-only flags,
// GTID history, replication threads and semi-sync. It never returns an
// error: a failure is part of the snapshot, classified by kind, because an
// unreachable instance is an observation too. The connection's own errors
// decide the kind: the first query is what connects.
func Observe(ctx context.Context, name string, q Querier, opts ObserveOptions) Snapshot {
	snap := Snapshot{Name: name, ObservedAt: opts.now()}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()

	fail := func(stage string, err error) Snapshot {
		err = sanitize(err, opts.Secrets)
		kind := KindOf(err)
		if kind == ErrorOther && ctx.Err() != nil {
			// The driver reports a deadline hit mid-handshake as a broken
			// connection; the context knows better.
			kind = ErrorTimeout
		}
		snap.Err = &ObserveError{Kind: kind, Stage: stage, Message: err.Error(), Config: AsConfigError(err)}
		return snap
	}

	rows, err := queryRows(ctx, q, stmt(versionQuery))
	if err != nil {
		return fail("connect", err)
	}
	snap.Reachable = true
	if len(rows) != 1 {
		return fail("detect flavor", errors.New("version query returned no row"))
	}
	flavor, err := DetectFlavor(rows[0]["version"], rows[0]["version_comment"])
	snap.Flavor = flavor
	if err != nil {
		return fail("detect flavor", err)
	}
	d, err := DialectFor(flavor)
	if err != nil {
		return fail("detect flavor", err)
	}

	rows, err = queryRows(ctx, q, d.StateQuery())
	if err == nil && len(rows) != 1 {
		err = errors.New("state query returned no row")
	}
	if err != nil {
		return fail("read state", err)
	}
	if snap.State, err = d.ParseState(rows[0]); err != nil {
		return fail("read state", err)
	}

	rows, err = queryRows(ctx, q, d.ReplicaStatusQuery())
	if err != nil {
		return fail("replica status", err)
	}
	if row := defaultChannel(rows); row != nil {
		rs, err := ParseReplicaStatus(row)
		if err != nil {
			return fail("replica status", err)
		}
		snap.Replica = &rs
		if err := d.ReceivedGTID(&snap.GTID, &rs); err != nil {
			return fail("replica status", err)
		}
	}

	// Semi-sync is read before the binary logs: listing them waits for the binlog lock, which a
	// starved primary's commit leader holds while it waits for an acknowledgement (measured on
	// MariaDB 10.11: SHOW BINARY LOGS and SHOW MASTER STATUS block, the statements above do not).
	vs, ss := d.SemiSyncQueries()
	vars, err1 := queryVariables(ctx, q, vs)
	status, err2 := queryVariables(ctx, q, ss)
	semiSyncKnown := false
	if err := errors.Join(err1, err2); err != nil {
		snap.Warnings = append(snap.Warnings, "semi-sync state unknown: "+sanitize(err, opts.Secrets).Error())
	} else if snap.SemiSync, err = ParseSemiSync(vars, status); err != nil {
		snap.Warnings = append(snap.Warnings, "semi-sync state unreadable: "+err.Error())
	} else {
		semiSyncKnown = true
	}

	if s, ok := d.BinaryLogsQuery(); ok {
		switch {
		case !semiSyncKnown || snap.SemiSync.Starved():
			snap.Warnings = append(snap.Warnings, "purged position unknown: not read while commits may wait for a semi-sync acknowledgement (listing the binary logs would wait with them)")
		default:
			// Commits waiting beside enough connected replicas get their acknowledgements in
			// moments; the listing waits at most binlogListWait for them, and a primary whose
			// acknowledgements stopped anyway costs a check nothing but the purged position.
			lctx, cancel := ctx, context.CancelFunc(func() {})
			if snap.SemiSync.SourceActive && snap.SemiSync.WaitSessions > 0 {
				lctx, cancel = context.WithTimeout(ctx, binlogListWait)
			}
			if err := readPurgedPos(lctx, q, d, s, &snap.GTID); err != nil {
				snap.Warnings = append(snap.Warnings, "purged position unknown: "+sanitize(err, opts.Secrets).Error())
			}
			cancel()
		}
	}
	if ctx.Err() != nil {
		return fail("observe", ctx.Err())
	}
	return snap
}

// defaultChannel picks the default replication channel (MySQL multi-source
// names the others; MariaDB's SHOW SLAVE STATUS already shows only the
// default connection).
func defaultChannel(rows []Row) Row {
	for _, r := range rows {
		if r["Channel_Name"] == "" {
			return r
		}
	}
	if len(rows) > 0 {
		return rows[0]
	}
	return nil
}

func readPurgedPos(ctx context.Context, q Querier, d Dialect, list Stmt, st *GTIDState) error {
	rows, err := queryRows(ctx, q, list)
	if err != nil {
		if sqlErrorNumber(err) == erNoBinaryLogging {
			return errors.New("binary logging is off")
		}
		return err
	}
	if len(rows) == 0 {
		return errors.New("no binary logs")
	}
	oldest := rows[0]["Log_name"]
	rows, err = queryRows(ctx, q, d.BinlogStartQuery(oldest))
	if err != nil {
		return err
	}
	if len(rows) != 1 {
		return errors.New("BINLOG_GTID_POS returned no row")
	}
	text, ok := rows[0]["pos"]
	if !ok {
		return fmt.Errorf("BINLOG_GTID_POS is NULL for %s", oldest)
	}
	pos, err := gtid.ParseMariaDBPos(text)
	if err != nil {
		return fmt.Errorf("binlog start position: %w", err)
	}
	st.PurgedPos = pos
	st.PurgedKnown = true
	return nil
}

// queryRows runs a statement and returns every row as a Row (NULL columns
// absent).
func queryRows(ctx context.Context, q Querier, s Stmt) ([]Row, error) {
	rows, err := q.QueryContext(ctx, s.SQL, s.Args...)
	if err != nil {
		return nil, sanitize(err, s.secrets())
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []Row
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make(Row, len(cols))
		for i, c := range cols {
			if vals[i] != nil {
				row[c] = string(vals[i])
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, sanitize(err, s.secrets())
	}
	return out, nil
}

// queryVariables reads SHOW VARIABLES/STATUS style rows into a name → value
// map.
func queryVariables(ctx context.Context, q Querier, s Stmt) (map[string]string, error) {
	rows, err := queryRows(ctx, q, s)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r["Variable_name"]] = r["Value"]
	}
	return out, nil
}

// ObserveTarget is one instance for ObserveAll.
type ObserveTarget struct {
	// Name becomes Snapshot.Name.
	Name string
	// DB is the instance's connection pool.
	DB Querier
}

// ObserveAll observes every target in parallel, each with its own
// opts.Timeout, and returns the snapshots in the targets' order. One slow or
// partitioned instance therefore costs at most one timeout, not N.
func ObserveAll(ctx context.Context, targets []ObserveTarget, opts ObserveOptions) []Snapshot {
	out := make([]Snapshot, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			out[i] = Observe(ctx, t.Name, t.DB, opts)
		})
	}
	wg.Wait()
	return out
}
