package topology

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// Epoch, when set and non-zero, is the fencing token the Guard's lease
	// goes with (a number that grows at every takeover): every guarded
	// statement then runs on a session that holds the server's fence lock
	// and has checked, on the server, that no newer epoch touched it (see
	// fence.go). A server touched by a newer epoch refuses with
	// ErrSuperseded. Nil or 0 leaves the server unfenced.
	Epoch func() int64
	// FenceWait is how long a fenced session waits for another epoch's
	// session to release the fence lock before it ends that session
	// (default DefaultFenceWait).
	FenceWait time.Duration
	// Superseded, when set, is told every ErrSuperseded refusal before the
	// action returns it, so that the caller stops acting everywhere at once
	// (an orchestrator marks its lease lost).
	Superseded func(error)
	// Confirm, when set, proves with a fresh round trip to the lease's
	// authority that no newer epoch than Epoch's was issued (a conditional
	// renewal of the Lease). A fenced session asks it before it ends another
	// actor's session that holds a server's fence lock: without the proof the
	// holder could be a newer actor whose epoch is not stored yet, and it is
	// not ended.
	Confirm func(ctx context.Context) error
	// Server identifies the server and the account the Instance reaches,
	// process-wide (Connect and Pools set it): a session kept holding the
	// fence locks (keepFence) is adopted by any Instance of the same Server
	// and epoch. Empty: by Instances of the same pool only.
	Server string
	// FenceAccounts are the accounts actors run guarded statements as, besides
	// the Instance's own: a session of any other account that holds a fence
	// lock name is an application's and is ended without asking Confirm.
	FenceAccounts []string

	mu      sync.Mutex
	dialect Dialect
	closer  func() error
	// afterFence, in tests, runs right before a guarded statement is sent
	// (after the fence check, when fenced): the pause of an actor stuck
	// mid-statement.
	afterFence func(op string)
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

// exec runs statements in order on the pool; with an Epoch, on one fenced
// session.
func (i *Instance) exec(ctx context.Context, op string, stmts ...Stmt) error {
	if i.epoch() != 0 {
		d, err := i.Dialect(ctx)
		if err != nil {
			return err
		}
		return i.withSession(ctx, op, d, sessionOptions{}, func(s *pinnedSession) error { return s.execAll(stmts) })
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	for _, s := range stmts {
		ctx, cancel, err := i.guard(ctx, op)
		if err != nil {
			return err
		}
		if h := i.afterFence; h != nil {
			h(op)
		}
		_, err = i.db.ExecContext(ctx, s.SQL, s.Args...)
		cancel()
		if err != nil {
			return i.fail(op, err, &s)
		}
	}
	return nil
}

// guard asks the Guard about one statement of op and returns the context
// cut off at the Guard's deadline.
func (i *Instance) guard(ctx context.Context, op string) (context.Context, context.CancelFunc, error) {
	if i.Guard == nil {
		return ctx, func() {}, nil
	}
	deadline, err := i.Guard(op + " on " + i.Name)
	if err != nil {
		return nil, nil, &OpError{Instance: i.Name, Op: op, Kind: ErrorOther, Err: err}
	}
	if deadline.IsZero() {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	return ctx, cancel, nil
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

// doElevated is do for statements that need the right to change read_only
// or to write through it: on MariaDB they run on one pinned session that
// enabled ReadOnlyAdminRole first (see withSession); elsewhere as do.
func (i *Instance) doElevated(ctx context.Context, op string, build func(Dialect) ([]Stmt, error)) error {
	d, err := i.Dialect(ctx)
	if err != nil {
		return err
	}
	if _, _, ok := d.Elevate(); !ok {
		return i.do(ctx, op, build)
	}
	stmts, err := build(d)
	if err != nil {
		return &OpError{Instance: i.Name, Op: op, Kind: ErrorOther, Err: err}
	}
	return i.withSession(ctx, op, d, sessionOptions{elevate: true}, func(s *pinnedSession) error { return s.execAll(stmts) })
}

// pinnedSession runs statements on one connection of the pool.
type pinnedSession struct {
	i    *Instance
	d    Dialect
	ctx  context.Context
	conn *sql.Conn
	op   string
	// epoch is the lease epoch whose fence locks the session holds (0: none).
	epoch int64
	// unstored is set while the session holds the fence locks but could not
	// store its epoch (see keepFence).
	unstored bool
	// broken is set when the session could not be restored: it is
	// discarded instead of going back to the pool.
	broken bool
}

// exec asks the Guard, takes the fence (once per session, with an Epoch)
// and runs one statement on the session.
func (s *pinnedSession) exec(st Stmt) error {
	ctx, cancel, err := s.i.guard(s.ctx, s.op)
	if err != nil {
		return err
	}
	defer cancel()
	if err := s.takeFence(ctx); err != nil {
		return err
	}
	if h := s.i.afterFence; h != nil {
		h(s.op)
	}
	if _, err := s.conn.ExecContext(ctx, st.SQL, st.Args...); err != nil {
		return s.i.fail(s.op, err, &st)
	}
	return nil
}

// execAll runs statements in order on the session, stopping at the first
// error.
func (s *pinnedSession) execAll(stmts []Stmt) error {
	for _, st := range stmts {
		if err := s.exec(st); err != nil {
			return err
		}
	}
	return nil
}

// query runs a read on the session.
func (s *pinnedSession) query(st Stmt) ([]Row, error) {
	rows, err := queryRows(s.ctx, s.conn, st)
	if err != nil {
		return nil, s.i.fail(s.op, err, &st)
	}
	return rows, nil
}

// sessionOptions say how withSession prepares the session.
type sessionOptions struct {
	// elevate enables the dialect's elevation (MariaDB: SET ROLE
	// ReadOnlyAdminRole). An account that was not granted the role (error
	// 1959) goes on without it: it holds READ_ONLY ADMIN itself, or the
	// statement that needs it fails with the server's own error.
	elevate bool
	// skipBinlog switches binary logging off for the session.
	skipBinlog bool
}

// withSession pins one connection, prepares it as o says, runs fn and
// restores the session (SET ROLE NONE, sql_log_bin = 1). A session that
// cannot be restored is discarded instead of going back to the pool, so
// that no pooled session keeps the role or runs without binary logging.
func (i *Instance) withSession(ctx context.Context, op string, d Dialect, o sessionOptions, fn func(*pinnedSession) error) (err error) {
	ctx, cancel := i.bound(ctx)
	defer cancel()
	s := &pinnedSession{i: i, d: d, ctx: ctx, op: op}
	if e := i.epoch(); e != 0 {
		if s.conn = i.adoptFence(e); s.conn != nil {
			s.epoch, s.unstored = e, true
		}
	}
	if s.conn == nil {
		if s.conn, err = i.db.Conn(ctx); err != nil {
			return i.fail(op, err, nil)
		}
	}
	conn := s.conn
	var undo []Stmt
	defer func() {
		// Restoring the session changes nothing on the server, so it is not
		// put to the Guard: an actor that lost its lease meanwhile still
		// drops the role instead of leaving the session to be discarded.
		var undoErr error
		for k := len(undo) - 1; k >= 0; k-- {
			if _, e := conn.ExecContext(ctx, undo[k].SQL, undo[k].Args...); e != nil {
				undoErr = errors.Join(undoErr, i.fail(op, e, &undo[k]))
			}
		}
		if s.unstored && undoErr == nil && !s.broken {
			i.keepFence(s)
			return
		}
		rctx, rcancel := restoreContext(ctx)
		undoErr = errors.Join(undoErr, s.releaseFence(rctx))
		rcancel()
		if undoErr != nil || s.broken {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, undoErr)
		}
		_ = conn.Close()
	}()
	if o.skipBinlog {
		if err := s.exec(stmt("SET SESSION sql_log_bin = 0")); err != nil {
			return err
		}
		undo = append(undo, stmt("SET SESSION sql_log_bin = 1"))
	}
	if o.elevate {
		if on, off, ok := d.Elevate(); ok {
			switch err := s.exec(on); {
			case err == nil:
				undo = append(undo, off)
			case sqlErrorNumber(err) != erInvalidRole:
				return err
			}
		}
	}
	return fn(s)
}

// ClaimEpoch runs a guarded statement that changes nothing, so that the
// server stores the Instance's epoch (see fence.go), or, while a global read
// lock holds the write, this process keeps the fence lock until it is
// stored: from then on no statement of an older epoch lands there. A caller that reads a server's
// state to prove something an older actor could still change (that a
// candidate was never made writable) claims the epoch first and reads after.
// Without an Epoch it only asks the Guard.
func (i *Instance) ClaimEpoch(ctx context.Context) error {
	return i.exec(ctx, "claim the fence epoch", stmt("DO 0"))
}

// ReleaseAckWaiters commits one binary-logged statement that changes nothing
// (CREATE DATABASE IF NOT EXISTS FenceSchema) on a writable semi-sync source:
// a replica acknowledges it once it has received it, and so everything
// before it, which releases every commit still waiting for an
// acknowledgement that was lost (see failover.AcksLost). It runs without
// ReadOnlyAdminRole, so a fenced server (read_only on MariaDB,
// super_read_only on MySQL) refuses it and its history gains nothing.
//
// A release whose own acknowledgement does not come keeps waiting on the
// server after its client gave up: while one does, no other is sent
// (ErrReleasePending), so releases never pile up waiting sessions.
func (i *Instance) ReleaseAckWaiters(ctx context.Context) error {
	const op = "release commits waiting for a lost acknowledgement"
	release := "CREATE DATABASE IF NOT EXISTS " + FenceSchema
	waiting, err := queryRows(ctx, i.db, stmt("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = ?", release))
	if err != nil {
		return i.fail(op, err, nil)
	}
	if len(waiting) > 0 {
		return &OpError{Instance: i.Name, Op: op, Kind: ErrorOther, Err: ErrReleasePending}
	}
	return i.exec(ctx, op, stmt(release))
}

// ErrReleasePending means an earlier ReleaseAckWaiters still waits on the
// server for its own acknowledgement.
var ErrReleasePending = errors.New("an earlier release still waits for its own acknowledgement")

// Fence makes the server refuse client writes: super_read_only on MySQL,
// read_only on MariaDB (set from a session that enabled ReadOnlyAdminRole,
// since changing read_only needs READ_ONLY ADMIN). It does not end open
// sessions; see KillClientConnections and VerifyFence.
func (i *Instance) Fence(ctx context.Context) error {
	return i.doElevated(ctx, "fence", func(d Dialect) ([]Stmt, error) { return d.Fence(), nil })
}

// FenceState is the result of VerifyFence.
type FenceState struct {
	// ReadOnly is @@global.read_only.
	ReadOnly bool
	// SuperReadOnly is nil on MariaDB.
	SuperReadOnly *bool
	// ClientConnections are the sessions a kill would still end.
	ClientConnections []ClientConnection
	// WriteThrough are the remaining client sessions whose account can
	// write through the fence (Reason says why): on MariaDB, accounts that
	// hold READ_ONLY ADMIN, directly, through their default role or through
	// PUBLIC; on MySQL while super_read_only is off, accounts with SUPER or
	// CONNECTION_ADMIN. Excluded users are listed too: excluding a user
	// from kills does not stop it from writing.
	WriteThrough []ClientConnection
	// MayElevate are remaining sessions (MariaDB) whose account could
	// enable a role carrying READ_ONLY ADMIN with SET ROLE, as this tool's
	// own accounts can. They do not count against the fence: a session
	// writes through it only after that explicit statement.
	MayElevate []ClientConnection
	// Verified is true when the fence is read back (super_read_only on
	// MySQL, read_only on MariaDB) and no WriteThrough session remains.
	Verified bool
	// Evidence is one sentence per fact checked.
	Evidence []string
}

// VerifyFence reads back the fence variables, the client sessions that can
// still write through the fence and the remaining client sessions; a fence
// counts only once it has been read back and no session that can write
// through it remains. Every query runs on one session, so that the session
// that verifies is exactly the one CONNECTION_ID() leaves out.
//
// On MariaDB the write-through query reads mysql.global_priv and
// mysql.roles_mapping (RoleOrchestration is granted SELECT on both); an
// account that may not read them gets an error, never a silent "verified".
// On MySQL, super_read_only=ON binds SUPER and CONNECTION_ADMIN as well, so
// the query runs only while it is off, for the evidence, and a failure of
// it is recorded rather than returned (the fence is unverified either way).
func (i *Instance) VerifyFence(ctx context.Context, exclude ...string) (FenceState, error) {
	var fs FenceState
	d, err := i.Dialect(ctx)
	if err != nil {
		return fs, err
	}
	err = i.withSession(ctx, "verify fence", d, sessionOptions{}, func(s *pinnedSession) error {
		q := d.FenceStateQuery()
		rows, err := s.query(q)
		if err != nil {
			return err
		}
		if len(rows) != 1 {
			return i.fail("verify fence", errors.New("fence query returned no row"), nil)
		}
		if fs.ReadOnly, err = parseBool(rows[0], "read_only"); err != nil {
			return i.fail("verify fence", err, nil)
		}
		fs.Verified = fs.ReadOnly
		fs.Evidence = append(fs.Evidence, "read_only="+onOff(fs.ReadOnly))
		if _, ok := rows[0]["super_read_only"]; ok {
			sro, err := parseBool(rows[0], "super_read_only")
			if err != nil {
				return i.fail("verify fence", err, nil)
			}
			fs.SuperReadOnly = &sro
			fs.Verified = fs.Verified && sro
			fs.Evidence = append(fs.Evidence, "super_read_only="+onOff(sro))
		}
		if fs.SuperReadOnly != nil && *fs.SuperReadOnly {
			fs.Evidence = append(fs.Evidence, "super_read_only=ON binds SUPER and CONNECTION_ADMIN sessions too")
		} else {
			wt, may, err := writeThrough(s, d)
			switch {
			case err != nil && fs.SuperReadOnly == nil:
				return err
			case err != nil:
				fs.Evidence = append(fs.Evidence, "could not list sessions that write through read_only: "+err.Error())
			default:
				fs.WriteThrough, fs.MayElevate = wt, may
				fs.Verified = fs.Verified && len(wt) == 0
				fs.Evidence = append(fs.Evidence, writeThroughEvidence(wt, may)...)
			}
		}
		q, err = d.ClientConnectionsQuery(exclude)
		if err != nil {
			return &OpError{Instance: i.Name, Op: "verify fence", Kind: ErrorOther, Err: err}
		}
		rows, err = s.query(q)
		if err != nil {
			return err
		}
		if fs.ClientConnections, err = parseConnections(rows); err != nil {
			return i.fail("verify fence", err, nil)
		}
		fs.Evidence = append(fs.Evidence, strconv.Itoa(len(fs.ClientConnections))+" client connections remain")
		return nil
	})
	if err != nil {
		// A partial read-back never counts as a verified fence.
		fs.Verified = false
	}
	return fs, err
}

// writeThrough runs the dialect's write-through query on s and splits the
// sessions into those that can write now and those that could after SET
// ROLE.
func writeThrough(s *pinnedSession, d Dialect) (blocking, elevatable []ClientConnection, err error) {
	rows, err := s.query(d.WriteThroughSessionsQuery())
	if err != nil {
		return nil, nil, err
	}
	blocking, elevatable, err = groupWriteThrough(rows)
	if err != nil {
		return nil, nil, s.i.fail(s.op, err, nil)
	}
	if kept := s.i.keptSessions(); kept != nil {
		// This actor's own sessions, kept holding the fence (keepFence): they run nothing.
		own := func(c ClientConnection) bool { return kept[c.ID] }
		blocking, elevatable = slices.DeleteFunc(blocking, own), slices.DeleteFunc(elevatable, own)
	}
	return blocking, elevatable, nil
}

// groupWriteThrough folds the write-through rows (one per session and
// reason) into one ClientConnection per session, in the order of the rows.
// A session counts as writing through when any of its reasons is blocking;
// its Reason lists the blocking reasons only, or else the others.
func groupWriteThrough(rows []Row) (blocking, elevatable []ClientConnection, err error) {
	type entry struct {
		c           ClientConnection
		block, soft []string
	}
	var order []uint64
	byID := map[uint64]*entry{}
	for _, r := range rows {
		cs, err := parseConnections([]Row{r})
		if err != nil {
			return nil, nil, err
		}
		c := cs[0]
		e, ok := byID[c.ID]
		if !ok {
			e = &entry{c: c}
			byID[c.ID] = e
			order = append(order, c.ID)
		}
		why := r["WHY"]
		if r["BLOCKING"] == "0" {
			if !slices.Contains(e.soft, why) {
				e.soft = append(e.soft, why)
			}
		} else if !slices.Contains(e.block, why) {
			e.block = append(e.block, why)
		}
	}
	for _, id := range order {
		e := byID[id]
		if len(e.block) > 0 {
			e.c.Reason = strings.Join(e.block, "; ")
			blocking = append(blocking, e.c)
			continue
		}
		e.c.Reason = strings.Join(e.soft, "; ")
		elevatable = append(elevatable, e.c)
	}
	return blocking, elevatable, nil
}

// writeThroughEvidence describes the write-through sessions in sentences.
func writeThroughEvidence(blocking, elevatable []ClientConnection) []string {
	describe := func(cs []ClientConnection) string {
		parts := make([]string, len(cs))
		for k, c := range cs {
			state := ""
			if c.Command == "Killed" {
				// Killed but not gone yet: what it was committing can still land.
				state = ", being killed"
			}
			parts[k] = fmt.Sprintf("%d %s from %s%s (%s)", c.ID, c.User, c.Host, state, c.Reason)
		}
		return strings.Join(parts, ", ")
	}
	var out []string
	if len(blocking) == 0 {
		out = append(out, "no remaining session can write through read_only")
	} else {
		out = append(out, fmt.Sprintf("%d sessions can write through read_only: %s", len(blocking), describe(blocking)))
	}
	if len(elevatable) > 0 {
		out = append(out, fmt.Sprintf("%d sessions could enable a role that writes through read_only with SET ROLE (not counted): %s",
			len(elevatable), describe(elevatable)))
	}
	return out
}

// WriteThroughAccount is an account whose sessions can write through the
// fence (see Dialect.WriteThroughAccountsQuery).
type WriteThroughAccount struct {
	Account
	// Reason says how the account gets past read_only.
	Reason string
	// Blocking is false when the account must first enable a role with
	// SET ROLE.
	Blocking bool
}

// WriteThroughAccounts lists the accounts that can write through the fence
// (MariaDB: READ_ONLY ADMIN directly, through a default role or PUBLIC,
// and, with Blocking false, through a role they may enable; MySQL: SUPER or
// CONNECTION_ADMIN, which super_read_only binds). Bootstrap evidence uses
// it to show that no account the tool made keeps the bypass.
func (i *Instance) WriteThroughAccounts(ctx context.Context) ([]WriteThroughAccount, error) {
	d, err := i.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	q := d.WriteThroughAccountsQuery()
	rows, err := queryRows(ctx, i.db, q)
	if err != nil {
		return nil, i.fail("list write-through accounts", err, &q)
	}
	out := make([]WriteThroughAccount, 0, len(rows))
	for _, r := range rows {
		out = append(out, WriteThroughAccount{
			Account: Account{User: r["USER"], Host: r["HOST"]}, Reason: r["WHY"], Blocking: r["BLOCKING"] != "0",
		})
	}
	return out, nil
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
	// Reason says, for a session in FenceState.WriteThrough or MayElevate,
	// how its account gets past read_only.
	Reason string
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
	out, err := parseConnections(rows)
	if err != nil {
		return nil, i.fail("list connections", err, nil)
	}
	if kept := i.keptSessions(); kept != nil {
		out = slices.DeleteFunc(out, func(c ClientConnection) bool { return kept[c.ID] })
	}
	return out, nil
}

// parseConnections reads process-list rows (ID, USER, HOST, COMMAND, TIME).
func parseConnections(rows []Row) ([]ClientConnection, error) {
	out := make([]ClientConnection, 0, len(rows))
	for _, r := range rows {
		id, err := strconv.ParseUint(r["ID"], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("connection id %q", r["ID"])
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
	return i.doElevated(ctx, "make writable", func(d Dialect) ([]Stmt, error) { return d.MakeWritable(), nil })
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
// auto-positioning and starts it again. With ResumeFromBinlog on MariaDB it
// sets gtid_slave_pos, which writes mysql.gtid_slave_pos and so needs
// READ_ONLY ADMIN on a read-only server: those statements run elevated.
func (i *Instance) Repoint(ctx context.Context, spec SourceSpec) error {
	if spec.SemiSync {
		if err := i.ensurePlugin(ctx, SemiSyncReplica); err != nil {
			return err
		}
	}
	do := i.do
	if spec.ResumeFromBinlog {
		do = i.doElevated
	}
	return do(ctx, "re-point", func(d Dialect) ([]Stmt, error) {
		change, err := d.ChangeSource(spec)
		if err != nil {
			return nil, err
		}
		out := append([]Stmt{d.StopReplica()}, change...)
		if spec.SemiSync {
			out = append(out, d.EnableSemiSyncReplica()...)
		}
		return append(out, d.StartReplica()), nil
	})
}

// ResetReplication stops replication and forgets its configuration, as a
// promoted instance must.
func (i *Instance) ResetReplication(ctx context.Context) error {
	return i.do(ctx, "reset replication", func(d Dialect) ([]Stmt, error) { return d.ResetReplication(), nil })
}

// ContinueHistory resets the binary logs and sets the server's GTID state to
// position (see Dialect.ContinueHistory). Only for a restored server whose
// binary log is empty: the caller proves that first.
func (i *Instance) ContinueHistory(ctx context.Context, position string) error {
	// The server is read-only until the bootstrap opens it: RESET MASTER needs the elevation.
	return i.doElevated(ctx, "continue the GTID history", func(d Dialect) ([]Stmt, error) { return d.ContinueHistory(position), nil })
}

// ForgetFence removes the epoch stored in FenceTable, without binary logging
// and through read_only, on an Instance without an Epoch. It is for a server
// restored from a backup only, before anything of its new cluster touched it:
// the stored epoch came with the backup and counts another cluster's Lease,
// which would refuse every statement of this one's. A server without the
// table has nothing to forget.
func (i *Instance) ForgetFence(ctx context.Context) error {
	const op = "forget the restored fencing token"
	if i.epoch() != 0 {
		return &OpError{Instance: i.Name, Op: op, Kind: ErrorOther, Err: errors.New("a fenced session cannot forget the fence")}
	}
	d, err := i.Dialect(ctx)
	if err != nil {
		return err
	}
	err = i.withSession(ctx, op, d, sessionOptions{elevate: true, skipBinlog: true}, func(s *pinnedSession) error {
		// Only while the binary log is empty: once the history is continued, the stored epoch
		// is this cluster's, and a late delete (an actor paused past its guard) is a no-op.
		return s.exec(stmt("DELETE FROM " + FenceTable + " WHERE @@global.gtid_binlog_state = ''"))
	})
	if n := sqlErrorNumber(err); n == erNoSuchTable || n == erBadDB {
		return nil
	}
	return err
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
	// RequireWritable runs the statements without ReadOnlyAdminRole, so that
	// read_only refuses them (error 1290) on any server but a writable
	// primary: an actor that is not the cluster's operation (a backup) must
	// never write on a fenced old primary, where a write is an errant
	// transaction.
	RequireWritable bool
}

// EnsureUser creates or converges one account (idempotent: CREATE USER IF
// NOT EXISTS, ALTER USER, GRANT). Account statements are refused on a
// MySQL server with super_read_only, so accounts are created before an
// instance is fenced, or on the primary and replicated. On MariaDB
// read_only refuses them too (error 1290, also with sql_log_bin=0 and for
// an account that exists), so they run on a session that enabled
// ReadOnlyAdminRole (or whose account still holds READ_ONLY ADMIN itself,
// as root does before StripReadOnlyAdmin).
func (i *Instance) EnsureUser(ctx context.Context, spec UserSpec, opts EnsureUserOptions) error {
	d, err := i.Dialect(ctx)
	if err != nil {
		return err
	}
	stmts, err := d.EnsureUser(spec)
	if err != nil {
		return &OpError{Instance: i.Name, Op: "ensure user", Kind: ErrorOther, Err: err}
	}
	op := "ensure user " + spec.User
	_, _, elevate := d.Elevate()
	if !opts.SkipBinlog && (!elevate || opts.RequireWritable) {
		return i.exec(ctx, op, stmts...)
	}
	return i.withSession(ctx, op, d, sessionOptions{elevate: elevate, skipBinlog: opts.SkipBinlog}, func(s *pinnedSession) error {
		for _, st := range stmts {
			if err := s.exec(st); err != nil {
				return err
			}
		}
		return nil
	})
}

// StripResult is what StripReadOnlyAdmin did.
type StripResult struct {
	// Accounts are the accounts of the user that were stripped.
	Accounts []Account
	// Killed are the user's other sessions, ended because they were opened
	// before the REVOKE and may still carry the privilege.
	Killed []ClientConnection
}

// StripReadOnlyAdmin takes the read_only bypass away from every account
// named user (root: the image's entrypoint creates root@'%' and
// root@localhost with ALL PRIVILEGES, which includes READ_ONLY ADMIN on
// MariaDB) while leaving them able to fence: see
// Dialect.StripReadOnlyBypass. Then it ends the user's other sessions,
// because MariaDB computes a session's global privileges at login and a
// session opened before the REVOKE keeps writing through read_only (seen
// on 10.11.19); this includes idle connections of this Instance's own pool,
// which the driver replaces. It is idempotent and a no-op on MySQL, where
// super_read_only binds SUPER. With SkipBinlog the statements leave no
// GTIDs behind, as EnsureUser's do.
//
// Run it after the EnsureUser calls on the same instance (the orchestration
// account's statements create ReadOnlyAdminRole too; either order works, but
// a server whose root was stripped accepts account statements only from a
// session that enables the role, which this package does by itself).
func (i *Instance) StripReadOnlyAdmin(ctx context.Context, user string, opts EnsureUserOptions) (StripResult, error) {
	var res StripResult
	d, err := i.Dialect(ctx)
	if err != nil {
		return res, err
	}
	hostsQ, err := d.AccountHostsQuery(user)
	if err != nil {
		return res, &OpError{Instance: i.Name, Op: "strip read-only admin", Kind: ErrorOther, Err: err}
	}
	// Where the dialect has nothing to strip (MySQL), nothing is sent.
	if probe, err := d.StripReadOnlyBypass([]Account{{User: user}}); err != nil || len(probe) == 0 {
		if err != nil {
			return res, &OpError{Instance: i.Name, Op: "strip read-only admin", Kind: ErrorOther, Err: err}
		}
		return res, nil
	}
	on, _, elevate := d.Elevate()
	err = i.withSession(ctx, "strip read-only admin from "+user, d, sessionOptions{elevate: elevate, skipBinlog: opts.SkipBinlog}, func(s *pinnedSession) error {
		rows, err := s.query(hostsQ)
		if err != nil {
			return err
		}
		for _, r := range rows {
			res.Accounts = append(res.Accounts, Account{User: user, Host: r["host"]})
		}
		stmts, err := d.StripReadOnlyBypass(res.Accounts)
		if err != nil {
			return &OpError{Instance: i.Name, Op: s.op, Kind: ErrorOther, Err: err}
		}
		for _, st := range stmts {
			err := s.exec(st)
			if err != nil && !(st.SQL == on.SQL && sqlErrorNumber(err) == erInvalidRole) {
				return err
			}
		}
		q := stmt("SELECT p.ID, p.USER, p.HOST, p.COMMAND, p.TIME FROM information_schema.PROCESSLIST p WHERE "+
			clientSessionFilter+" AND p.USER = ? ORDER BY p.ID", user)
		if rows, err = s.query(q); err != nil {
			return err
		}
		conns, err := parseConnections(rows)
		if err != nil {
			return i.fail(s.op, err, nil)
		}
		for _, c := range conns {
			err := s.exec(d.Kill(c.ID))
			if err != nil && sqlErrorNumber(err) != erNoSuchThread {
				return err
			}
			if err == nil {
				res.Killed = append(res.Killed, c)
			}
		}
		return nil
	})
	return res, err
}

// AsidePrefix starts the name of every schema a rebuild set an instance's old data aside in.
const AsidePrefix = "mysqlctl_aside_"

// DropAsideSchemas drops the schemas a rebuild set the instance's old data aside in (names
// starting with AsidePrefix), without binary logging (they were never replicated, and their
// drop must not be either), and returns their names.
func (i *Instance) DropAsideSchemas(ctx context.Context) ([]string, error) {
	d, err := i.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	_, _, elevate := d.Elevate()
	var names []string
	err = i.withSession(ctx, "drop aside schemas", d, sessionOptions{elevate: elevate, skipBinlog: true}, func(s *pinnedSession) error {
		rows, err := s.query(stmt("SELECT schema_name AS name FROM information_schema.schemata WHERE BINARY schema_name LIKE ?", strings.ReplaceAll(AsidePrefix, "_", `\_`)+"%"))
		if err != nil {
			return err
		}
		for _, r := range rows {
			names = append(names, r["name"])
		}
		for _, n := range names {
			if err := s.exec(stmt("DROP DATABASE IF EXISTS `" + strings.ReplaceAll(n, "`", "``") + "`")); err != nil {
				return err
			}
		}
		return nil
	})
	return names, err
}
