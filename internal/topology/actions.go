package topology

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// DB is what actions need from a connection pool: *sql.DB satisfies it. The
// pool must interpolate arguments on the client (go-sql-driver's
// InterpolateParams, which Open sets), because statements such as CHANGE
// MASTER cannot be prepared on the server.
type DB interface {
	Querier
	// ExecContext runs a statement without a result set.
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	// Conn pins one session, for statements that change session state
	// (sql_log_bin).
	Conn(ctx context.Context) (*sql.Conn, error)
}

var _ DB = (*sql.DB)(nil)

// ErrWaitTimeout is returned by WaitForGTID when the server's own wait timed
// out before the GTIDs were applied.
var ErrWaitTimeout = errors.New("timed out waiting for GTIDs to be applied")

// Instance runs this package's actions against one server. Each action is a
// short sequence of its dialect's statements; the flavor is detected on first
// use. Every action is idempotent, so a retried or resumed operation can
// repeat it safely.
type Instance struct {
	// Name identifies the instance in errors.
	Name string
	db   DB
	// secrets are removed from every error (the pool's own password).
	secrets []string
	// DefaultTimeout bounds an action whose context has no deadline.
	DefaultTimeout time.Duration
	// Guard, when set, is asked right before every statement that changes the
	// server, with a description of the action. An error stops the statement
	// from being sent; a non-zero deadline cuts the statement off there. An
	// orchestrator uses it to prove it still holds the cluster (a fencing
	// token), so that an actor that was paused and lost its lease sends
	// nothing when it wakes.
	Guard func(what string) (deadline time.Time, err error)

	mu      sync.Mutex
	dialect Dialect
	closer  func() error
}

// NewInstance wraps a pool. secrets are strings that must never appear in
// errors (typically the pool's password).
func NewInstance(name string, db DB, secrets ...string) *Instance {
	return &Instance{Name: name, db: db, secrets: secrets, DefaultTimeout: 30 * time.Second}
}

// WithDialect fixes the dialect instead of detecting it (tests, and callers
// that already observed the flavor).
func (i *Instance) WithDialect(d Dialect) *Instance {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.dialect = d
	return i
}

// DB returns the underlying pool.
func (i *Instance) DB() DB { return i.db }

// Close closes the pool when the Instance opened it (see Connect).
func (i *Instance) Close() error {
	if i.closer == nil {
		return nil
	}
	return i.closer()
}

// Observe observes this instance (see Observe). A successful observation
// also refreshes the dialect actions use, so a server upgraded in place
// (8.0 to 8.4, say) is addressed in its new dialect from then on.
func (i *Instance) Observe(ctx context.Context, opts ObserveOptions) Snapshot {
	opts.Secrets = append(opts.Secrets, i.secrets...)
	s := Observe(ctx, i.Name, i.db, opts)
	if s.Reachable && s.Flavor.Line != "" && (s.Err == nil || s.Err.Stage != "detect flavor") {
		i.mu.Lock()
		if i.dialect == nil || i.dialect.Flavor() != s.Flavor {
			if d, err := DialectFor(s.Flavor); err == nil {
				i.dialect = d
			}
		}
		i.mu.Unlock()
	}
	return s
}

// Dialect returns the instance's dialect, detecting the flavor once.
func (i *Instance) Dialect(ctx context.Context) (Dialect, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.dialect != nil {
		return i.dialect, nil
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	rows, err := queryRows(ctx, i.db, stmt(versionQuery))
	if err != nil {
		return nil, i.fail("detect flavor", err, nil)
	}
	if len(rows) != 1 {
		return nil, i.fail("detect flavor", errors.New("version query returned no row"), nil)
	}
	f, err := DetectFlavor(rows[0]["version"], rows[0]["version_comment"])
	if err != nil {
		return nil, i.fail("detect flavor", err, nil)
	}
	d, err := DialectFor(f)
	if err != nil {
		return nil, i.fail("detect flavor", err, nil)
	}
	i.dialect = d
	return d, nil
}

func (i *Instance) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || i.DefaultTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, i.DefaultTimeout)
}

func (i *Instance) fail(op string, err error, s *Stmt) error {
	secrets := i.secrets
	if s != nil {
		secrets = append(secrets[:len(secrets):len(secrets)], s.secrets()...)
	}
	err = sanitize(err, secrets)
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Instance: i.Name, Op: op, Kind: KindOf(err), Err: err}
}

// exec runs statements in order on the pool.
func (i *Instance) exec(ctx context.Context, op string, stmts ...Stmt) error {
	ctx, cancel := i.bound(ctx)
	defer cancel()
	for _, s := range stmts {
		if err := i.execGuarded(ctx, i.db, op, s); err != nil {
			return err
		}
	}
	return nil
}

// execer runs one statement: the pool or a pinned session.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// execGuarded asks the Guard, then runs one statement within the Guard's deadline.
func (i *Instance) execGuarded(ctx context.Context, db execer, op string, s Stmt) error {
	if i.Guard != nil {
		deadline, err := i.Guard(op + " on " + i.Name)
		if err != nil {
			return &OpError{Instance: i.Name, Op: op, Kind: ErrorOther, Err: err}
		}
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	if _, err := db.ExecContext(ctx, s.SQL, s.Args...); err != nil {
		return i.fail(op, err, &s)
	}
	return nil
}

// do detects the dialect and runs the statements build returns.
func (i *Instance) do(ctx context.Context, op string, build func(Dialect) ([]Stmt, error)) error {
	d, err := i.Dialect(ctx)
	if err != nil {
		return err
	}
	stmts, err := build(d)
	if err != nil {
		return &OpError{Instance: i.Name, Op: op, Kind: ErrorOther, Err: err}
	}
	return i.exec(ctx, op, stmts...)
}

// Fence makes the server refuse client writes: super_read_only on MySQL,
// read_only on MariaDB. It does not end open sessions; see
// KillClientConnections and VerifyFence.
func (i *Instance) Fence(ctx context.Context) error {
	return i.do(ctx, "fence", func(d Dialect) ([]Stmt, error) { return d.Fence(), nil })
}

// FenceState is the result of VerifyFence.
type FenceState struct {
	// ReadOnly is @@global.read_only.
	ReadOnly bool
	// SuperReadOnly is nil on MariaDB.
	SuperReadOnly *bool
	// ClientConnections are the sessions a kill would still end.
	ClientConnections []ClientConnection
	// Verified is true when the server refuses writes from every account
	// that lacks the bypass privilege: super_read_only on MySQL, read_only on
	// MariaDB. Accounts with READ_ONLY ADMIN (MariaDB) can still write, which
	// is why a fence also kills client connections.
	Verified bool
	// Evidence is one sentence per fact checked.
	Evidence []string
}

// VerifyFence reads back the fence variables and the remaining client
// sessions; a fence counts only once it has been read back.
func (i *Instance) VerifyFence(ctx context.Context, exclude ...string) (FenceState, error) {
	var fs FenceState
	d, err := i.Dialect(ctx)
	if err != nil {
		return fs, err
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	q := d.FenceStateQuery()
	rows, err := queryRows(ctx, i.db, q)
	if err == nil && len(rows) != 1 {
		err = errors.New("fence query returned no row")
	}
	if err != nil {
		return fs, i.fail("verify fence", err, &q)
	}
	if fs.ReadOnly, err = parseBool(rows[0], "read_only"); err != nil {
		return fs, i.fail("verify fence", err, nil)
	}
	fs.Verified = fs.ReadOnly
	fs.Evidence = append(fs.Evidence, "read_only="+onOff(fs.ReadOnly))
	if _, ok := rows[0]["super_read_only"]; ok {
		sro, err := parseBool(rows[0], "super_read_only")
		if err != nil {
			return fs, i.fail("verify fence", err, nil)
		}
		fs.SuperReadOnly = &sro
		fs.Verified = fs.Verified && sro
		fs.Evidence = append(fs.Evidence, "super_read_only="+onOff(sro))
	}
	if fs.ClientConnections, err = i.ClientConnections(ctx, exclude...); err != nil {
		return fs, err
	}
	fs.Evidence = append(fs.Evidence, strconv.Itoa(len(fs.ClientConnections))+" client connections remain")
	return fs, nil
}

// ClientConnection is one client session in the process list.
type ClientConnection struct {
	// ID is the processlist id, the argument of KILL.
	ID uint64
	// User and Host are the account and the client's address.
	User string
	Host string
	// Command is Sleep, Query, …
	Command string
	// TimeSeconds is how long the session has been in its state.
	TimeSeconds int64
}

// ClientConnections lists client sessions other than this one, system
// threads, binlog dump threads and the excluded users.
func (i *Instance) ClientConnections(ctx context.Context, exclude ...string) ([]ClientConnection, error) {
	d, err := i.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	q, err := d.ClientConnectionsQuery(exclude)
	if err != nil {
		return nil, &OpError{Instance: i.Name, Op: "list connections", Kind: ErrorOther, Err: err}
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	rows, err := queryRows(ctx, i.db, q)
	if err != nil {
		return nil, i.fail("list connections", err, &q)
	}
	out := make([]ClientConnection, 0, len(rows))
	for _, r := range rows {
		id, err := strconv.ParseUint(r["ID"], 10, 64)
		if err != nil {
			return nil, i.fail("list connections", fmt.Errorf("connection id %q", r["ID"]), nil)
		}
		t, _ := strconv.ParseInt(r["TIME"], 10, 64)
		out = append(out, ClientConnection{ID: id, User: r["USER"], Host: r["HOST"], Command: r["COMMAND"], TimeSeconds: t})
	}
	return out, nil
}

// KillClientConnections ends every client session ClientConnections lists,
// and returns those it ended. A session that ended by itself in between is
// not an error. The caller's own pool loses its other idle connections too;
// the driver discards them and reconnects.
func (i *Instance) KillClientConnections(ctx context.Context, exclude ...string) ([]ClientConnection, error) {
	conns, err := i.ClientConnections(ctx, exclude...)
	if err != nil {
		return nil, err
	}
	d, _ := i.Dialect(ctx)
	var killed []ClientConnection
	for _, c := range conns {
		err := i.exec(ctx, "kill connection", d.Kill(c.ID))
		if err != nil && sqlErrorNumber(err) != erNoSuchThread {
			return killed, err
		}
		if err == nil {
			killed = append(killed, c)
		}
	}
	return killed, nil
}

// MakeWritable lifts the fence on a promoted primary.
func (i *Instance) MakeWritable(ctx context.Context) error {
	return i.do(ctx, "make writable", func(d Dialect) ([]Stmt, error) { return d.MakeWritable(), nil })
}

// StopReplica stops both replication threads.
func (i *Instance) StopReplica(ctx context.Context) error {
	return i.do(ctx, "stop replica", func(d Dialect) ([]Stmt, error) { return []Stmt{d.StopReplica()}, nil })
}

// StartReplica starts both replication threads.
func (i *Instance) StartReplica(ctx context.Context) error {
	return i.do(ctx, "start replica", func(d Dialect) ([]Stmt, error) { return []Stmt{d.StartReplica()}, nil })
}

// StopIOThread stops only the receiver; the applier drains the relay log.
// Stopping every replica's IO thread also starves a semi-sync primary of
// acknowledgements, which is one way to fence a primary that cannot be
// reached.
func (i *Instance) StopIOThread(ctx context.Context) error {
	return i.do(ctx, "stop IO thread", func(d Dialect) ([]Stmt, error) { return []Stmt{d.StopIOThread()}, nil })
}

// StartIOThread starts only the receiver.
func (i *Instance) StartIOThread(ctx context.Context) error {
	return i.do(ctx, "start IO thread", func(d Dialect) ([]Stmt, error) { return []Stmt{d.StartIOThread()}, nil })
}

// Repoint stops replication, points it at spec's source with GTID
// auto-positioning and starts it again.
func (i *Instance) Repoint(ctx context.Context, spec SourceSpec) error {
	return i.do(ctx, "re-point", func(d Dialect) ([]Stmt, error) {
		change, err := d.ChangeSource(spec)
		if err != nil {
			return nil, err
		}
		return append(append([]Stmt{d.StopReplica()}, change...), d.StartReplica()), nil
	})
}

// ResetReplication stops replication and forgets its configuration, as a
// promoted instance must.
func (i *Instance) ResetReplication(ctx context.Context) error {
	return i.do(ctx, "reset replication", func(d Dialect) ([]Stmt, error) { return d.ResetReplication(), nil })
}

// WaitForGTID waits on the server until gtidText (a MySQL GTID set or a
// MariaDB position, canonical text) has been applied, for at most timeout.
// It returns ErrWaitTimeout (wrapped) when the server's wait expired. The
// client side allows a few seconds more than timeout so that the server's
// answer, not a cut connection, ends the wait.
func (i *Instance) WaitForGTID(ctx context.Context, gtidText string, timeout time.Duration) error {
	d, err := i.Dialect(ctx)
	if err != nil {
		return err
	}
	q := d.WaitForGTID(gtidText, timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer cancel()
	rows, err := queryRows(ctx, i.db, q)
	if err != nil {
		return i.fail("wait for GTID", err, &q)
	}
	var res string
	var ok bool
	if len(rows) == 1 {
		for _, v := range rows[0] {
			res, ok = v, true
		}
	}
	if !ok {
		return i.fail("wait for GTID", errors.New("the wait function returned NULL (GTID mode off or invalid argument)"), nil)
	}
	if res != "0" {
		return &OpError{Instance: i.Name, Op: "wait for GTID", Kind: ErrorTimeout, Err: fmt.Errorf("%w: %s within %s", ErrWaitTimeout, gtidText, timeout)}
	}
	return nil
}

// EnableSemiSyncSource turns on the waiting side (loading the plugin first
// on MySQL). Enable it on the primary only: on a replica it makes every
// replicated commit wait for the timeout.
func (i *Instance) EnableSemiSyncSource(ctx context.Context, spec SemiSyncSourceSpec) error {
	if err := i.ensurePlugin(ctx, SemiSyncSource); err != nil {
		return err
	}
	return i.do(ctx, "enable semi-sync source", func(d Dialect) ([]Stmt, error) { return d.EnableSemiSyncSource(spec) })
}

// DisableSemiSyncSource turns the waiting side off.
func (i *Instance) DisableSemiSyncSource(ctx context.Context) error {
	if ok, err := i.pluginLoaded(ctx, SemiSyncSource); err != nil || !ok {
		return err
	}
	return i.do(ctx, "disable semi-sync source", func(d Dialect) ([]Stmt, error) { return d.DisableSemiSyncSource(), nil })
}

// EnableSemiSyncReplica turns on acknowledgements and restarts the IO
// thread, since the setting is read when the IO thread connects.
func (i *Instance) EnableSemiSyncReplica(ctx context.Context) error {
	if err := i.ensurePlugin(ctx, SemiSyncReplica); err != nil {
		return err
	}
	return i.do(ctx, "enable semi-sync replica", func(d Dialect) ([]Stmt, error) {
		return append(d.EnableSemiSyncReplica(), d.StopIOThread(), d.StartIOThread()), nil
	})
}

// DisableSemiSyncReplica turns acknowledgements off and restarts the IO
// thread.
func (i *Instance) DisableSemiSyncReplica(ctx context.Context) error {
	if ok, err := i.pluginLoaded(ctx, SemiSyncReplica); err != nil || !ok {
		return err
	}
	return i.do(ctx, "disable semi-sync replica", func(d Dialect) ([]Stmt, error) {
		return append(d.DisableSemiSyncReplica(), d.StopIOThread(), d.StartIOThread()), nil
	})
}

// pluginLoaded reports whether the side's plugin is active (always true
// where semi-sync is built in).
func (i *Instance) pluginLoaded(ctx context.Context, side SemiSyncSide) (bool, error) {
	d, err := i.Dialect(ctx)
	if err != nil {
		return false, err
	}
	name, _, needed := d.SemiSyncPlugin(side)
	if !needed {
		return true, nil
	}
	q := stmt("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ?", name)
	ctx, cancel := i.bound(ctx)
	defer cancel()
	rows, err := queryRows(ctx, i.db, q)
	if err != nil {
		return false, i.fail("check semi-sync plugin", err, &q)
	}
	return len(rows) == 1 && rows[0]["PLUGIN_STATUS"] == "ACTIVE", nil
}

func (i *Instance) ensurePlugin(ctx context.Context, side SemiSyncSide) error {
	ok, err := i.pluginLoaded(ctx, side)
	if err != nil || ok {
		return err
	}
	d, _ := i.Dialect(ctx)
	name, lib, _ := d.SemiSyncPlugin(side)
	err = i.exec(ctx, "install semi-sync plugin", stmt("INSTALL PLUGIN "+name+" SONAME '"+lib+"'"))
	switch {
	case err == nil, sqlErrorNumber(err) == erPluginInstalled:
		return nil
	case sqlErrorNumber(err) == erOptionPreventsStmt:
		// INSTALL PLUGIN writes mysql.plugin, which super_read_only
		// forbids; a fenced replica cannot load it at run time.
		return &OpError{
			Instance: i.Name, Op: "install semi-sync plugin", Kind: ErrorOther,
			Err: fmt.Errorf("%w (load %s at startup with plugin-load-add=%s instead)", err, name, lib),
		}
	default:
		return err
	}
}

// EnsureUserOptions tune EnsureUser.
type EnsureUserOptions struct {
	// SkipBinlog runs the statements with sql_log_bin=0 on one session, so
	// that creating the accounts on every instance before replication is
	// set up leaves no GTIDs behind (which would otherwise be errant
	// transactions on the replicas). Leave it false on a running primary,
	// whose replicas should receive the accounts.
	SkipBinlog bool
}

// EnsureUser creates or converges one account (idempotent: CREATE USER IF
// NOT EXISTS, ALTER USER, GRANT). Account statements are refused on a
// MySQL server with super_read_only, so accounts are created before an
// instance is fenced, or on the primary and replicated.
func (i *Instance) EnsureUser(ctx context.Context, spec UserSpec, opts EnsureUserOptions) error {
	d, err := i.Dialect(ctx)
	if err != nil {
		return err
	}
	stmts, err := d.EnsureUser(spec)
	if err != nil {
		return &OpError{Instance: i.Name, Op: "ensure user", Kind: ErrorOther, Err: err}
	}
	if !opts.SkipBinlog {
		return i.exec(ctx, "ensure user "+spec.User, stmts...)
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	conn, err := i.db.Conn(ctx)
	if err != nil {
		return i.fail("ensure user", err, nil)
	}
	defer func() { _ = conn.Close() }()
	run := func(s Stmt) error {
		return i.execGuarded(ctx, conn, "ensure user "+spec.User, s)
	}
	if err := run(stmt("SET SESSION sql_log_bin = 0")); err != nil {
		return err
	}
	var firstErr error
	for _, s := range stmts {
		if firstErr = run(s); firstErr != nil {
			break
		}
	}
	// The session must not return to the pool with binary logging off; if
	// it cannot be switched back on, the driver is told to discard it.
	if err := run(stmt("SET SESSION sql_log_bin = 1")); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(firstErr, err)
	}
	return firstErr
}
