package topology

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// holdReadLock takes FLUSH TABLES WITH READ LOCK on db from its own session
// (a backup, a person) and returns the function that releases it
// (idempotent, also run at cleanup).
func holdReadLock(t *testing.T, db *sql.DB) func() {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	must(t, err)
	if _, err := conn.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			_, _ = conn.ExecContext(ctx, "UNLOCK TABLES")
			_ = conn.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// storedThenReadLocked stores the first of n fresh epochs on the replica
// (which keeps replicating), then holds a global read lock on it.
func storedThenReadLocked(t *testing.T, n int) (*fencePair, []int64, func()) {
	t.Helper()
	p := sharedFencePair(t)
	t.Cleanup(func() { p.restore(t) })
	ctx := context.Background()
	e := epochs(true, n)
	must(t, actor(t, p.R, e[0]).StopReplica(ctx))
	must(t, actor(t, p.R, e[0]).StartReplica(ctx))
	// Caught up first: an applier still applying when the read lock is taken waits on it, and a
	// STOP SLAVE then waits on the applier (seen in a loaded CI run: the test's stop timed out).
	p.R.CatchUp(t, p.P)
	return p, e, holdReadLock(t, p.R.DB(t))
}

// waitStoredEpoch waits until s stores epoch (a kept session stores it once
// the read lock is gone).
func waitStoredEpoch(t *testing.T, p *fencePair, epoch int64) {
	t.Helper()
	want := strconv.FormatInt(epoch, 10)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.R.QueryString(t, "SELECT epoch FROM mysqlctl.fence")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored epoch %s, want %s", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLiveEpochUnstoredUnderReadLock: a newer actor stops the replica while
// a global read lock holds every write, so its epoch cannot be stored; the
// lock ends; an older actor's late START SLAVE must not land. Before the
// session kept its fence locks until its epoch was stored, the older session
// took the lock, read the older stored epoch and restarted replication.
func TestLiveEpochUnstoredUnderReadLock(t *testing.T) {
	p, e, release := storedThenReadLocked(t, 3)
	ctx := context.Background()
	older := actor(t, p.R, e[1])
	start := time.Now()
	if err := actor(t, p.R, e[2]).StopReplica(ctx); err != nil {
		t.Fatalf("the newer epoch's STOP SLAVE under the read lock: %v (a fence must not wait on a read lock)", err)
	}
	t.Logf("newer epoch %d stopped the replica under the read lock in %s", e[2], time.Since(start).Round(time.Millisecond))
	release()
	errOld := older.StartReplica(ctx)
	if running := replicaRunning(t, p.R); errOld == nil || running {
		t.Fatalf("the older epoch %d's START SLAVE landed after epoch %d stopped the replica (err %v, running %v)", e[1], e[2], errOld, running)
	}
	t.Logf("older epoch's late START SLAVE refused: %v", errOld)
	waitStoredEpoch(t, p, e[2])
}

// TestLiveEpochOlderNeverEndsNewer: under a global read lock a newer actor's
// session holds the fence lock with its epoch unstored, frozen before its
// statement; an older actor's session times out waiting for the lock and
// finds the older epoch stored. It must not end the newer session: it cannot
// prove its own lease is still the newest (Confirm), so it refuses, and the
// newer actor's STOP SLAVE runs.
func TestLiveEpochOlderNeverEndsNewer(t *testing.T) {
	p := sharedFencePair(t)
	t.Cleanup(func() { p.restore(t) })
	ctx := context.Background()
	e := epochs(true, 3)
	newer, older := actor(t, p.R, e[2]), actor(t, p.R, e[1])
	must(t, actor(t, p.R, e[0]).StopReplica(ctx))
	release := holdReadLock(t, p.R.DB(t))
	var errOld error
	errNew := late(t, pausedAfterFence(newer), func() error { return newer.StopReplica(ctx) }, func() error {
		errOld = older.StartReplica(ctx)
		return nil
	})
	release()
	if errNew != nil {
		t.Fatalf("the newer epoch's session was ended by an older one: %v", errNew)
	}
	if errOld == nil || replicaRunning(t, p.R) {
		t.Fatalf("the older epoch's START SLAVE ran (err %v, running %v)", errOld, replicaRunning(t, p.R))
	}
	t.Logf("older epoch refused: %v", errOld)
	waitStoredEpoch(t, p, e[2])
}

// TestLiveEpochForeignLockHolders: GET_LOCK needs no privilege, so an
// application account can take the fence's lock names. A guarded statement
// ends such sessions (they are not this tool's account) and goes on: one
// squatting the epoch's own lock, and more application sessions queued on
// the fence lock than the attempts an actor's stale sessions are allowed.
func TestLiveEpochForeignLockHolders(t *testing.T) {
	p := sharedFencePair(t)
	ctx := context.Background()
	root := connect(t, p.P, rootCreds())
	defer root.Close()
	must(t, root.EnsureUser(ctx, UserSpec{User: "appsq", Password: "appsq-Secret", Role: RoleAppReader}, EnsureUserOptions{}))
	p.R.CatchUp(t, p.P)
	app := p.R.OpenDB(t, "appsq", "appsq-Secret")
	defer app.Close()
	app.SetMaxOpenConns(20)

	t.Run("squatting the epoch lock", func(t *testing.T) {
		t.Cleanup(func() { p.restore(t) })
		e := epochs(true, 1)
		conn, err := app.Conn(ctx)
		must(t, err)
		defer conn.Close()
		var got sql.NullString
		must(t, conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", fenceEpochLock(e[0])).Scan(&got))
		if got.String != "1" {
			t.Fatalf("the application session did not get %s: %v", fenceEpochLock(e[0]), got)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := actor(t, p.R, e[0]).StopReplica(cctx); err != nil {
			t.Fatalf("an application session holding %s blocks the guarded statement: %v", fenceEpochLock(e[0]), err)
		}
		if replicaRunning(t, p.R) {
			t.Fatal("the replica still runs")
		}
	})
	t.Run("queued on the fence lock", func(t *testing.T) {
		t.Cleanup(func() { p.restore(t) })
		bg, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() { stop(); wg.Wait() }()
		queued := 2 * fenceKillAttempts
		for k := 0; k < queued; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := app.Conn(bg)
				if err != nil {
					return
				}
				defer conn.Close()
				var g sql.NullString
				_ = conn.QueryRowContext(bg, "SELECT GET_LOCK('mysqlctl.fence', 60)").Scan(&g)
				<-bg.Done()
			}()
		}
		deadline := time.Now().Add(5 * time.Second)
		for p.R.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'appsq' AND STATE LIKE '%lock%'") != strconv.Itoa(queued-1) {
			if time.Now().After(deadline) {
				t.Fatal("the application sessions did not queue on the fence lock")
			}
			time.Sleep(50 * time.Millisecond)
		}
		e := epochs(true, 1)
		start := time.Now()
		err := actor(t, p.R, e[0]).StopReplica(ctx)
		t.Logf("guarded STOP SLAVE past %d application sessions after %s: %v", queued, time.Since(start).Round(time.Millisecond), err)
		if err != nil {
			t.Fatalf("application sessions queued on the fence lock defeat the guarded statement: %v", errors.Unwrap(err))
		}
	})
}

// TestLiveEpochClaimBeforeProof: abort proves a candidate read-only before
// it rolls a failover back. An older actor's promotion (read_only=OFF) sent
// before it was paused must not land after the proof. With the epoch
// claimed before the read, it is refused; the control reads without
// claiming, and the late promotion lands after the proof.
func TestLiveEpochClaimBeforeProof(t *testing.T) {
	p := sharedFencePair(t)
	ctx := context.Background()
	for _, claim := range []bool{false, true} {
		name := "control-read-only"
		if claim {
			name = "claimed"
		}
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { p.restore(t) })
			e := epochs(true, 2)
			older, prover := actor(t, p.R, e[0]), actor(t, p.R, e[1])
			var proven bool
			errOld := late(t, pausedGuard(older, 1), func() error { return older.MakeWritable(ctx) }, func() error {
				if claim {
					if err := prover.ClaimEpoch(ctx); err != nil {
						return err
					}
				}
				w, err := prover.Writable(ctx)
				proven = !w
				return err
			})
			if !proven {
				t.Fatal("the candidate was not read-only when the prover read it")
			}
			if !claim {
				if errOld != nil || readOnly(t, p.R) {
					t.Fatalf("control: the late promotion did not land (err %v): the attack proves nothing", errOld)
				}
				return
			}
			if !errors.Is(errOld, ErrSuperseded) || !readOnly(t, p.R) {
				t.Fatalf("the older actor's promotion landed after the proof (err %v, read-only %v)", errOld, readOnly(t, p.R))
			}
		})
	}
}

// TestLiveEpochKeptSessionAdopted: an orchestrator opens a new pool per stage,
// so the session kept holding the fence under a read lock (its epoch
// unstored) must be adopted by the next Instance of the same server, account
// and epoch. Without that (found by review), the next stage's guarded
// statement waited on its own epoch's lock until its deadline, for as long
// as the read lock lasted.
func TestLiveEpochKeptSessionAdopted(t *testing.T) {
	p, e, release := storedThenReadLocked(t, 2)
	ctx := context.Background()
	must(t, actor(t, p.R, e[1]).StopReplica(ctx)) // unstored: kept
	next := actor(t, p.R, e[1])                   // the same actor's next stage: a new pool
	next.DefaultTimeout = 5 * time.Second
	start := time.Now()
	err := next.ClaimEpoch(ctx)
	t.Logf("the next Instance of the same epoch under the read lock: %v after %s", err, time.Since(start).Round(time.Millisecond))
	release()
	if err != nil {
		t.Fatalf("the actor blocked itself on a server under a read lock: %v", err)
	}
	waitStoredEpoch(t, p, e[1])
}

// TestLiveEpochKeptSessionNotAClient: a fence lists and ends client sessions;
// the session this actor keeps holding the fence lock is its own, never one
// of them. Before (found by review), the kill's session adopted that very
// connection and killed itself, and the locks dropped with the epoch unstored.
func TestLiveEpochKeptSessionNotAClient(t *testing.T) {
	p, e, release := storedThenReadLocked(t, 2)
	ctx := context.Background()
	a := actor(t, p.R, e[1])
	must(t, a.ClaimEpoch(ctx)) // unstored: kept
	// root excluded: the read lock's own session survives.
	if _, err := a.KillClientConnections(ctx, "repl", "root"); err != nil {
		t.Fatalf("the kill adopted the kept session and killed itself: %v", err)
	}
	if got := p.R.QueryString(t, "SELECT IS_USED_LOCK('mysqlctl.fence') IS NOT NULL"); got != "1" {
		t.Fatal("the fence lock was dropped with the epoch unstored")
	}
	release()
	waitStoredEpoch(t, p, e[1])
}
