package topology

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
//     waits for it is always of another epoch, or of another account.
//     GET_LOCK needs no privilege, so a session of an account that is not
//     an actor's (Instance.FenceAccounts) holding either name is ended.
//  2. The stored epoch is read in the next statement, not in the same
//     SELECT: the server may read a table row of a SELECT while optimizing
//     it (a const-table read by primary key), and InnoDB may take the read
//     view then, before GET_LOCK has waited out the previous holder, whose
//     write would then be missed.
//  3. A higher stored epoch refuses the statement (ErrSuperseded). When the
//     wait for fenceLock timed out and the stored epoch is not higher than
//     ours, the holder is either an older actor's session stuck mid-action or
//     a newer actor's whose epoch is not stored yet (step 4). The actor asks
//     its lease's authority (Instance.Confirm): if no newer epoch was issued,
//     the holder is older and is ended with KILL CONNECTION, which also
//     releases its locks, and the lock is asked for again; otherwise the
//     statement is refused.
//  4. A lower stored epoch is raised to ours, without binary logging (it
//     never replicates and never enters the GTID history) and through the
//     fence (see Dialect.FenceEpochWrite). A global read lock holds that
//     write: it is given up after a second (a fence must not wait on a
//     backup), and the session then keeps the locks after its action until
//     the epoch is stored (keepFence).
//  5. The session's statements run; the locks are released when the session
//     goes back to the pool.

// So once an actor ran one guarded statement on a server, no statement of
// an older epoch lands there any more: it either waits for the lock and
// then reads the newer epoch, or holds the lock and is killed first.

// FenceSchema is the schema mysqlctl keeps its own per-server state in. It
// is a system schema for this tool: never copied by a seed, never set aside
// by a rebuild, and closed to application accounts. Its tables are written
// without binary logging; the schema itself may also be created by a
// replicated statement (ReleaseAckWaiters), which creates nothing else.
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
// statement that asked for them. A session that holds the locks but could
// not store its epoch (a global read lock held writes) tries to store it
// again at each guarded statement.
func (s *pinnedSession) takeFence(ctx context.Context) error {
	epoch := s.i.epoch()
	if epoch == 0 {
		return nil
	}
	if s.epoch != 0 {
		if !s.unstored {
			return nil
		}
		_, err := s.readFenceEpoch(ctx, s.epoch, true)
		return err
	}
	own := fenceEpochLock(epoch)
	wait := lockSeconds(s.i.fenceWait())
	// The epoch's lock is asked for a second at a time: a holder that is not
	// this tool's account (an application squatting the name: GET_LOCK needs no
	// privilege) is ended between the waits.
	first := stmt("SELECT IF(GET_LOCK(?, 1) = 1, GET_LOCK(?, ?), -1) AS got, IS_USED_LOCK(?) AS own, IS_USED_LOCK(?) AS holder",
		own, fenceLock, wait, own, fenceLock)
	again := stmt("SELECT GET_LOCK(?, ?) AS got, IS_USED_LOCK(?) AS holder", fenceLock, wait, fenceLock)
	q, stale := first, 0
	for {
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
			if err := s.ownLockBusy(ctx, epoch, rows[0]["own"]); err != nil {
				return err
			}
			continue
		case "0", "1":
		default: // NULL: the server could not take the lock (an error, or this session was killed)
			return s.i.fail(s.op, fmt.Errorf("GET_LOCK on %s returned %q", s.i.Name, got), nil)
		}
		s.epoch, q = epoch, again // the epoch's lock is held from here on: release it
		if _, err := s.readFenceEpoch(ctx, epoch, got == "1"); err != nil || got == "1" {
			return err
		}
		if holder == "" {
			continue // released between the wait and the look: ask again
		}
		if stale, err = s.endHolder(ctx, holder, epoch, stale); err != nil {
			return err
		}
	}
}

// ownLockBusy handles a busy epoch lock: a session of this account is of
// this epoch (one actor's goroutines) and is waited for, until the
// statement's deadline; any other account's session is ended.
func (s *pinnedSession) ownLockBusy(ctx context.Context, epoch int64, holder string) error {
	if holder != "" {
		switch who, err := s.holderAccount(ctx, holder); {
		case err != nil:
			return err
		case who == holderForeign:
			return s.killHolder(ctx, holder, epoch)
		}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 1500*time.Millisecond {
		return s.i.fail(s.op, fmt.Errorf("another session of lease epoch %d kept the fence lock of %s", epoch, s.i.Name), nil)
	}
	return nil
}

// endHolder ends the session holding the fence lock after the wait for it
// timed out and the stored epoch was found not newer than ours. A session of
// another account (an application queued on the name) is ended at once, and
// not counted. A session of this account is another actor's: it is ended
// only after Confirm proved that no newer epoch was issued, so that the
// holder is an older actor stuck mid-action and not a newer one whose epoch
// is not stored yet (a global read lock held its write). stale counts the
// actors' sessions ended so far; it returns the new count.
func (s *pinnedSession) endHolder(ctx context.Context, holder string, epoch int64, stale int) (int, error) {
	who, err := s.holderAccount(ctx, holder)
	switch {
	case err != nil:
		return stale, err
	case who == holderGone:
		return stale, nil
	case who == holderOurs:
		if stale >= fenceKillAttempts {
			return stale, s.i.fail(s.op, fmt.Errorf("the fence lock of %s is still held by session %s after %d sessions of older epochs were ended", s.i.Name, holder, stale), nil)
		}
		if err := s.i.confirm(ctx); err != nil {
			return stale, s.i.fail(s.op, fmt.Errorf("session %s holds the fence lock of %s and this actor cannot prove its lease epoch %d is still the newest, so it is not ended: %w", holder, s.i.Name, epoch, err), nil)
		}
		stale++
	}
	return stale, s.killHolder(ctx, holder, epoch)
}

// Who holds a lock, as holderAccount tells.
const (
	holderOurs = iota
	holderForeign
	holderGone
)

// holderAccount tells whether the session id is of an actor's account (this
// session's or one of Instance.FenceAccounts), of another account, or gone.
func (s *pinnedSession) holderAccount(ctx context.Context, id string) (int, error) {
	rows, err := s.raw(ctx, stmt("SELECT COUNT(*) AS n,"+
		" COALESCE(SUM(USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1) OR FIND_IN_SET(USER, ?) > 0), 0) AS ours"+
		" FROM information_schema.PROCESSLIST WHERE ID = ?", strings.Join(s.i.FenceAccounts, ","), id))
	switch {
	case err != nil:
		return 0, err
	case len(rows) != 1 || rows[0]["n"] == "0":
		return holderGone, nil
	case rows[0]["ours"] == "0":
		return holderForeign, nil
	}
	return holderOurs, nil
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
		s.unstored = s.unstored && stored != epoch
		return stored, nil
	}
	do, undo := s.d.FenceEpochWrite(epoch, missing, rows[0])
	// A global read lock (FLUSH TABLES WITH READ LOCK: a backup, a person) holds every write,
	// this one too: it waits a second at most, and the guarded statement then goes on with
	// the epoch not stored here (the next guarded statement stores it). Fencing a server, the
	// failover's safety step, must never wait on a read lock.
	do = append([]Stmt{stmt("SET SESSION lock_wait_timeout = 1")}, do...)
	undo = append(undo, stmt("SET SESSION lock_wait_timeout = DEFAULT"))
	s.unstored = false
	if err := s.runRestoring(ctx, do, undo); err != nil {
		if sqlErrorNumber(err) == erLockWaitTimeout && !s.broken {
			// Not stored: the session keeps the locks until it is (see keepFence), so
			// that no older epoch's session gets them meanwhile and reads the old epoch.
			s.unstored = true
			return stored, nil
		}
		return stored, err
	}
	return stored, nil
}

// killHolder ends the session holding a fence lock: an older epoch's or
// another account's (see endHolder). A session that ended meanwhile is not
// an error.
func (s *pinnedSession) killHolder(ctx context.Context, holder string, epoch int64) error {
	id, err := strconv.ParseUint(holder, 10, 64)
	if err != nil {
		return s.i.fail(s.op, fmt.Errorf("fence lock holder %q", holder), nil)
	}
	k := s.d.Kill(id)
	if _, err := s.conn.ExecContext(ctx, k.SQL, k.Args...); err != nil && sqlErrorNumber(err) != erNoSuchThread {
		return s.i.fail(s.op, fmt.Errorf("ending session %d holding the fence lock (this actor's lease epoch %d): %w", id, epoch, err), &k)
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

// A session that holds the fence locks but could not store its epoch (a
// global read lock holds every write) does not give them back when its
// action ends: releasing them would let an older epoch's late session take
// them, read the older stored epoch and land after this actor's statement.
// A keeper goroutine holds the session and tries to store the epoch every
// keepRetry until it is stored (then the locks are released) or the session
// fails (it is discarded, and the server releases the locks). The next
// session of the same pool and epoch adopts it instead of waiting for it.

// keepRetry is how often a kept session tries to store its epoch again.
const keepRetry = time.Second

// keeperKey files a kept session under the server, the account and the epoch:
// Instance.Server when set (Connect and Pools set it), else the pool.
type keeperKey struct {
	server string
	db     DB
	epoch  int64
}

func (i *Instance) keeperKey(epoch int64) keeperKey {
	if i.Server != "" {
		return keeperKey{server: i.Server, epoch: epoch}
	}
	return keeperKey{db: i.db, epoch: epoch}
}

type fenceKeeper struct {
	s    *pinnedSession
	id   uint64 // the session's CONNECTION_ID()
	stop chan struct{}
	done chan struct{}
}

// keepers holds the kept sessions by pool and epoch.
var keepers sync.Map

// keepFence hands the session to a keeper; the caller must not touch its
// connection afterwards.
func (i *Instance) keepFence(s *pinnedSession) {
	k := &fenceKeeper{s: s, stop: make(chan struct{}), done: make(chan struct{})}
	key := i.keeperKey(s.epoch)
	s.op = "store the fence epoch"
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	rows, err := s.raw(ctx, stmt("SELECT CONNECTION_ID() AS id"))
	cancel()
	if err == nil && len(rows) == 1 {
		k.id, err = strconv.ParseUint(rows[0]["id"], 10, 64)
	}
	if err != nil || len(rows) != 1 {
		s.discard()
		return
	}
	if _, taken := keepers.LoadOrStore(key, k); taken {
		// Cannot happen (one session of an epoch holds its lock at a time); let the
		// server release the locks rather than hold two sessions.
		s.discard()
		return
	}
	go k.run(key)
}

func (k *fenceKeeper) run(key keeperKey) {
	defer close(k.done)
	s := k.s
	for {
		select {
		case <-k.stop:
			return // adopted
		case <-time.After(keepRetry):
		}
		ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
		_, err := s.readFenceEpoch(ctx, s.epoch, true)
		if err == nil && s.unstored {
			cancel()
			continue
		}
		if !keepers.CompareAndDelete(key, k) {
			cancel()
			return // adopted while it tried: the adopter owns the session now
		}
		if err == nil {
			err = s.releaseFence(ctx)
		}
		cancel()
		if err != nil || s.broken {
			s.discard()
			return
		}
		_ = s.conn.Close()
		return
	}
}

// adoptFence takes over the kept session of the server, account and epoch,
// if any. A session the keeper found broken is not adopted.
func (i *Instance) adoptFence(epoch int64) *sql.Conn {
	v, ok := keepers.LoadAndDelete(i.keeperKey(epoch))
	if !ok {
		return nil
	}
	k := v.(*fenceKeeper)
	close(k.stop)
	<-k.done
	if k.s.broken {
		k.s.discard()
		return nil
	}
	return k.s.conn
}

// keptSessions are the ids of the sessions this process keeps on the
// Instance's server (any epoch): this actor's own, never a client session to
// list, end or count against a fence.
func (i *Instance) keptSessions() map[uint64]bool {
	var out map[uint64]bool
	keepers.Range(func(key, v any) bool {
		kk := key.(keeperKey)
		if kk.server == i.Server && (i.Server != "" || kk.db == i.db) {
			if out == nil {
				out = map[uint64]bool{}
			}
			out[v.(*fenceKeeper).id] = true
		}
		return true
	})
	return out
}

// discard closes the session's connection so that it never goes back to the
// pool; the server ends the session and releases its locks.
func (s *pinnedSession) discard() {
	_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = s.conn.Close()
}

// confirm proves, with a fresh round trip to the lease's authority, that the
// Instance's epoch is still the newest issued (see Instance.Confirm).
func (i *Instance) confirm(ctx context.Context) error {
	if i.Confirm == nil {
		return errors.New("no way to confirm the lease is set")
	}
	return i.Confirm(ctx)
}
