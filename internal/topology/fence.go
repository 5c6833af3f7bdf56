package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// The server-side fencing token.
//
// The Guard proves on the client that the actor still holds the cluster's
// Lease, but a statement that passed it can still sit in a socket buffer or
// a port-forward stream while the actor is paused, and land after another
// actor took over. So every server keeps the highest Lease epoch that
// touched it, in FenceTable (InnoDB: it survives restarts), and a guarded
// session of an Instance with an Epoch runs its mutations only while it
// holds the server's fence lock (GET_LOCK(fenceLock)) and after it read a
// stored epoch not higher than its own:
//
//  1. GET_LOCK of its own epoch's lock (mysqlctl.fence.<epoch>), then of
//     fenceLock, in one query. Sessions of the same epoch (one actor's
//     goroutines) queue on the epoch's lock, so they wait for each other and
//     never meet on fenceLock: a session that holds fenceLock while another
//     waits for it is always of another epoch.
//  2. The stored epoch is read in the next statement, not in the same
//     SELECT: the server may read a table row of a SELECT while optimizing
//     it (a const-table read by primary key), and InnoDB may take the read
//     view then, before GET_LOCK has waited out the previous holder, whose
//     write would then be missed.
//  3. A higher stored epoch refuses the statement (ErrSuperseded). When the
//     wait for fenceLock timed out, the holder is another epoch's session;
//     if the stored epoch is not higher than ours, it is an older actor's
//     session stuck mid-action (a newer one stores its epoch right after it
//     gets the lock): it is ended with KILL CONNECTION, which also releases
//     its locks, and the lock is asked for again.
//  4. A lower stored epoch is raised to ours, without binary logging (it
//     never replicates and never enters the GTID history) and through the
//     fence (see Dialect.FenceEpochWrite).
//  5. The session's statements run; the locks are released when the session
//     goes back to the pool.
//
// So once an actor ran one guarded statement on a server, no statement of
// an older epoch lands there any more: it either waits for the lock and
// then reads the newer epoch, or holds the lock and is killed first.

// FenceSchema is the schema mysqlctl keeps its own per-server state in. It
// is a system schema for this tool: never copied by a seed, never set aside
// by a rebuild, and closed to application accounts.
const FenceSchema = "mysqlctl"

// FenceTable holds one row (id 1) with the highest Lease epoch that ran a
// guarded statement on the server.
const FenceTable = FenceSchema + ".fence"

// fenceLock is the user-level lock a guarded session holds while it runs.
const fenceLock = "mysqlctl.fence"

// fenceKillAttempts bounds how many stale holders one session ends before it
// gives up (each kill lets another waiting session of an older epoch in).
const fenceKillAttempts = 5

// ErrSuperseded means a server stores a newer Lease epoch than this actor's:
// another actor took the cluster over and touched that server, and the
// statement was not run. It is an outcome.ErrHeld, as a lost lease is.
var ErrSuperseded = fmt.Errorf("superseded by a newer lease epoch: %w", outcome.ErrHeld)

// DefaultFenceWait is how long a guarded session waits for another epoch's
// session to release the fence lock before it reads the stored epoch and
// ends that session (see Instance.FenceWait).
const DefaultFenceWait = 2 * time.Second

// fenceEpochLock is the lock sessions of one epoch queue on.
func fenceEpochLock(epoch int64) string { return fenceLock + "." + strconv.FormatInt(epoch, 10) }

// epoch returns the Instance's fencing token, 0 when unfenced.
func (i *Instance) epoch() int64 {
	if i.Epoch == nil {
		return 0
	}
	return max(i.Epoch(), 0)
}

func (i *Instance) fenceWait() time.Duration {
	if i.FenceWait > 0 {
		return i.FenceWait
	}
	return DefaultFenceWait
}

// lockSeconds is a GET_LOCK timeout in whole seconds, rounded up (at least 1).
func lockSeconds(d time.Duration) int64 { return max(ceilSeconds(d), 1) }

// takeFence makes the session hold the server's fence lock under the
// Instance's epoch, once per session (see the package comment above). It
// runs its statements directly on the session: they are part of the guarded
// statement that asked for them.
func (s *pinnedSession) takeFence(ctx context.Context) error {
	epoch := s.i.epoch()
	if epoch == 0 || s.epoch != 0 {
		return nil
	}
	own := fenceEpochLock(epoch)
	// Another session of this epoch may run a whole action: wait as long as
	// this statement may.
	ownWait := s.i.DefaultTimeout
	if dl, ok := ctx.Deadline(); ok {
		ownWait = time.Until(dl)
	}
	wait := lockSeconds(s.i.fenceWait())
	q := stmt("SELECT IF(GET_LOCK(?, ?) = 1, GET_LOCK(?, ?), -1) AS got, IS_USED_LOCK(?) AS holder",
		own, lockSeconds(ownWait), fenceLock, wait, fenceLock)
	for attempt := 0; ; attempt++ {
		rows, err := s.raw(ctx, q)
		if err != nil {
			return err
		}
		if len(rows) != 1 {
			return s.i.fail(s.op, errors.New("fence lock query returned no row"), nil)
		}
		got, holder := rows[0]["got"], rows[0]["holder"]
		switch got {
		case "-1":
			return s.i.fail(s.op, fmt.Errorf("another session of lease epoch %d kept the fence lock of %s", epoch, s.i.Name), nil)
		case "0", "1":
		default: // NULL: the server could not take the lock (an error, or this session was killed)
			return s.i.fail(s.op, fmt.Errorf("GET_LOCK on %s returned %q", s.i.Name, got), nil)
		}
		s.epoch = epoch // the epoch's lock is held from here on: release it
		if _, err := s.readFenceEpoch(ctx, epoch, got == "1"); err != nil || got == "1" {
			return err
		}
		switch {
		case holder == "":
			// Released between the wait and the look: ask again.
		case attempt >= fenceKillAttempts:
			return s.i.fail(s.op, fmt.Errorf("the fence lock of %s is still held by session %s after %d sessions of older epochs were ended", s.i.Name, holder, attempt), nil)
		default:
			if err := s.killStale(ctx, holder, epoch); err != nil {
				return err
			}
		}
		q = stmt("SELECT GET_LOCK(?, ?) AS got, IS_USED_LOCK(?) AS holder", fenceLock, wait, fenceLock)
	}
}

// readFenceEpoch reads the stored epoch, refuses when it is newer than
// epoch and, when the session holds the fence lock (locked), raises it to
// epoch. It returns the epoch read.
func (s *pinnedSession) readFenceEpoch(ctx context.Context, epoch int64, locked bool) (int64, error) {
	q := s.d.FenceEpochQuery()
	rows, err := s.raw(ctx, q)
	missing := false
	switch n := sqlErrorNumber(err); {
	case n == erNoSuchTable || n == erBadDB:
		// Never written here: created by the write below, which needs the fence
		// state the failed query did not return (MySQL: super_read_only).
		missing = true
		if rows, err = s.raw(ctx, s.d.FenceStateQuery()); err != nil {
			return 0, err
		}
		if len(rows) != 1 {
			return 0, s.i.fail(s.op, errors.New("fence state query returned no row"), nil)
		}
		delete(rows[0], "epoch")
	case n == erTableAccessDenied || n == erDBAccessDenied:
		// Fail closed: an account made by an older mysqlctl lacks the grant until the
		// accounts are ensured again (as root, which holds every privilege).
		return 0, s.i.fail(s.op, fmt.Errorf("%w (the account needs CREATE, SELECT, INSERT, UPDATE on %s.*: ensure the orchestration account again)", err, FenceSchema), nil)
	case err != nil:
		return 0, err
	case len(rows) != 1:
		return 0, s.i.fail(s.op, errors.New("fence epoch query returned no row"), nil)
	}
	var stored int64
	if v, ok := rows[0]["epoch"]; ok {
		if stored, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, s.i.fail(s.op, fmt.Errorf("fence epoch %q", v), nil)
		}
	}
	if stored > epoch {
		err := &OpError{Instance: s.i.Name, Op: s.op, Kind: ErrorOther,
			Err: fmt.Errorf("%w: %s was touched under lease epoch %d, this actor holds epoch %d", ErrSuperseded, s.i.Name, stored, epoch)}
		if s.i.Superseded != nil {
			s.i.Superseded(err)
		}
		return stored, err
	}
	if !locked || stored == epoch {
		return stored, nil
	}
	do, undo := s.d.FenceEpochWrite(epoch, missing, rows[0])
	// A global read lock (FLUSH TABLES WITH READ LOCK: a backup, a person) holds every write,
	// this one too: it waits a second at most, and the guarded statement then goes on with
	// the epoch not stored here (the next guarded statement stores it). Fencing a server, the
	// failover's safety step, must never wait on a read lock.
	do = append([]Stmt{stmt("SET SESSION lock_wait_timeout = 1")}, do...)
	undo = append(undo, stmt("SET SESSION lock_wait_timeout = DEFAULT"))
	if err := s.runRestoring(ctx, do, undo); err != nil {
		if sqlErrorNumber(err) == erLockWaitTimeout && !s.broken {
			return stored, nil
		}
		return stored, err
	}
	return stored, nil
}

// killStale ends the session holding the fence lock, which is of another
// epoch (see takeFence) and, since the stored epoch is not higher than
// ours, of an older one. A session that ended meanwhile is not an error.
func (s *pinnedSession) killStale(ctx context.Context, holder string, epoch int64) error {
	id, err := strconv.ParseUint(holder, 10, 64)
	if err != nil {
		return s.i.fail(s.op, fmt.Errorf("fence lock holder %q", holder), nil)
	}
	k := s.d.Kill(id)
	if _, err := s.conn.ExecContext(ctx, k.SQL, k.Args...); err != nil && sqlErrorNumber(err) != erNoSuchThread {
		return s.i.fail(s.op, fmt.Errorf("ending session %d of an older lease epoch than %d holding the fence lock: %w", id, epoch, err), &k)
	}
	return nil
}

// runRestoring runs do in order, stopping at the first error, and then
// every statement of undo whatever happened. A session whose undo failed
// must not go back to the pool (see releaseFence).
func (s *pinnedSession) runRestoring(ctx context.Context, do, undo []Stmt) error {
	var err error
	for k := range do {
		if _, e := s.conn.ExecContext(ctx, do[k].SQL, do[k].Args...); e != nil {
			// A role this account was not granted (it holds READ_ONLY ADMIN
			// itself, or the write fails with the server's own error).
			if sqlErrorNumber(e) == erInvalidRole {
				continue
			}
			err = s.i.fail(s.op, e, &do[k])
			break
		}
	}
	rctx, cancel := restoreContext(ctx)
	defer cancel()
	for k := range undo {
		if _, e := s.conn.ExecContext(rctx, undo[k].SQL, undo[k].Args...); e != nil {
			s.broken = true
			err = errors.Join(err, s.i.fail(s.op, e, &undo[k]))
		}
	}
	return err
}

// releaseFence gives the fence locks back: fenceLock first, so that a
// session of the same epoch waiting for the epoch's lock never finds
// fenceLock still held by this one. RELEASE_LOCK of a lock this session
// does not hold changes nothing.
func (s *pinnedSession) releaseFence(ctx context.Context) error {
	if s.epoch == 0 {
		return nil
	}
	q := stmt("SELECT RELEASE_LOCK(?) AS fence, RELEASE_LOCK(?) AS own", fenceLock, fenceEpochLock(s.epoch))
	s.epoch = 0
	if _, err := s.raw(ctx, q); err != nil {
		s.broken = true
		return err
	}
	return nil
}

// raw runs a read on the session without asking the Guard.
func (s *pinnedSession) raw(ctx context.Context, q Stmt) ([]Row, error) {
	rows, err := queryRows(ctx, s.conn, q)
	if err != nil {
		return nil, s.i.fail(s.op, err, &q)
	}
	return rows, nil
}

// restoreTimeout bounds the statements that put a session back as the pool
// expects it.
const restoreTimeout = 5 * time.Second

// restoreContext is ctx without its cancellation, bounded by
// restoreTimeout: a session is restored even when the action's deadline
// passed (a session that cannot be is discarded).
func restoreContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
}
