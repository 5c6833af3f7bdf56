package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// The attack tests of the fencing token (fence.go). Each runs the attack
// twice on real servers: unfenced first (the control: the stale actor's
// late statement does change the server, so the fenced run cannot pass
// vacuously), then with epochs.

// fencePair is a primary and a read-only replica of it, with the
// orchestration account (created on the primary, replicated), shared by the
// fencing tests; each leaves the replica replicating and read-only.
type fencePair struct {
	P, R *mariadbtest.Server
}

var (
	fencePairOnce sync.Once
	fencePairVal  *fencePair
	// fenceEpochs hands each run its own epochs: a server's stored epoch
	// only grows, so runs never reuse one.
	fenceEpochs atomic.Int64
)

func sharedFencePair(t testing.TB) *fencePair {
	t.Helper()
	fencePairOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p := &fencePair{
			P: mariadbtest.StartShared(t, mariadbtest.Options{Name: "fence-p"}),
			R: mariadbtest.StartShared(t, mariadbtest.Options{Name: "fence-r"}),
		}
		root := connect(t, p.P, rootCreds())
		defer root.Close()
		must(t, root.EnsureUser(ctx, UserSpec{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, EnsureUserOptions{}))
		rr := connect(t, p.R, rootCreds())
		defer rr.Close()
		must(t, rr.Repoint(ctx, replSource(p.P)))
		must(t, rr.Fence(ctx))
		p.R.CatchUp(t, p.P)
		fencePairVal = p
	})
	if fencePairVal == nil {
		t.Fatal("the fencing pair failed to start in an earlier test")
	}
	return fencePairVal
}

// restore puts the replica back as the tests expect it, also after a failure.
func (p *fencePair) restore(t testing.TB) {
	t.Helper()
	p.R.Exec(t, "SET GLOBAL read_only = ON", "START SLAVE")
	p.R.CatchUp(t, p.P)
}

// epochs returns n fresh consecutive epochs, or n zeros (unfenced).
func epochs(fenced bool, n int) []int64 {
	out := make([]int64, n)
	if fenced {
		base := fenceEpochs.Add(int64(n)+10) + 1000
		for k := range out {
			out[k] = base + int64(k)
		}
	}
	return out
}

// actor connects the orchestration account to s under epoch (0: unfenced),
// with a Guard that always passes.
func actor(t testing.TB, s *mariadbtest.Server, epoch int64) *Instance {
	t.Helper()
	in := connect(t, s, orch)
	t.Cleanup(func() { _ = in.Close() })
	in.Epoch = func() int64 { return epoch }
	in.FenceWait = time.Second
	in.Guard = func(string) (time.Time, error) { return time.Time{}, nil }
	// The lease's authority: the newest actor's epoch is the one issued last.
	for n := newestActor.Load(); epoch > n && !newestActor.CompareAndSwap(n, epoch); n = newestActor.Load() {
	}
	in.Confirm = func(context.Context) error {
		if n := newestActor.Load(); n > epoch {
			return fmt.Errorf("lease lost: epoch %d was issued after %d", n, epoch)
		}
		return nil
	}
	return in
}

// newestActor is the highest epoch an actor was made for (see actor).
var newestActor atomic.Int64

// failpoint pauses the call number at of a hook until release is called.
type failpoint struct {
	at      int32
	calls   atomic.Int32
	reached chan struct{}
	resume  chan struct{}
}

func newFailpoint(at int32) *failpoint {
	return &failpoint{at: at, reached: make(chan struct{}), resume: make(chan struct{})}
}

func (f *failpoint) hit() {
	if f.calls.Add(1) == f.at {
		close(f.reached)
		<-f.resume
	}
}

func (f *failpoint) release() { close(f.resume) }

// pausedGuard makes in's Guard pass and then pause at its call number at:
// an actor that proved its lease and then froze before its statement went
// out.
func pausedGuard(in *Instance, at int32) *failpoint {
	fp := newFailpoint(at)
	in.Guard = func(string) (time.Time, error) { fp.hit(); return time.Time{}, nil }
	return fp
}

func replicaRunning(t testing.TB, s *mariadbtest.Server) bool {
	t.Helper()
	return s.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'SLAVES_RUNNING'") != "0"
}

func readOnly(t testing.TB, s *mariadbtest.Server) bool {
	t.Helper()
	return s.QueryString(t, "SELECT @@global.read_only") == "1"
}

// attackRuns runs an attack on the shared pair twice: unfenced (the
// control) and fenced, restoring the replica after each, also on failure.
func attackRuns(t *testing.T, run func(t *testing.T, p *fencePair, fenced bool)) {
	p := sharedFencePair(t)
	for _, fenced := range []bool{false, true} {
		name := "control-unfenced"
		if fenced {
			name = "fenced"
		}
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { p.restore(t) })
			run(t, p, fenced)
		})
	}
}

// late runs stale in the background until it reaches fp, runs meanwhile
// (the newer actor), lets stale go on and returns its result.
func late(t *testing.T, fp *failpoint, stale func() error, meanwhile func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- stale() }()
	<-fp.reached
	err := meanwhile()
	fp.release()
	staleErr := <-errc
	must(t, err)
	return staleErr
}

// TestLiveEpochLateStartOnFencedReplica: actor A (epoch n) proves its lease
// and freezes before its statement leaves; actor B (epoch n+1) takes over and
// fences the replica (STOP SLAVE) or the candidate (read_only=ON); A wakes
// and its late START SLAVE / read_only=OFF changes nothing and returns
// ErrSuperseded, an outcome.ErrHeld. Unfenced, the same late statement
// restarts replication / makes the replica writable.
func TestLiveEpochLateStartOnFencedReplica(t *testing.T) {
	p := sharedFencePair(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		late    func(*Instance) error
		fence   func(*Instance) error
		changed func() bool
	}{
		{"late START SLAVE", func(i *Instance) error { return i.StartReplica(ctx) }, func(i *Instance) error { return i.StopReplica(ctx) },
			func() bool { return replicaRunning(t, p.R) }},
		{"late read_only=OFF", func(i *Instance) error { return i.MakeWritable(ctx) }, func(i *Instance) error { return i.Fence(ctx) },
			func() bool { return !readOnly(t, p.R) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			attackRuns(t, func(t *testing.T, p *fencePair, fenced bool) {
				e := epochs(fenced, 2)
				a, b := actor(t, p.R, e[0]), actor(t, p.R, e[1])
				err := late(t, pausedGuard(a, 1), func() error { return c.late(a) }, func() error { return c.fence(b) })
				if !fenced {
					if err != nil || !c.changed() {
						t.Fatalf("control: the unfenced late statement did not land (err %v): the attack proves nothing", err)
					}
					return
				}
				if !errors.Is(err, ErrSuperseded) || !errors.Is(err, outcome.ErrHeld) {
					t.Fatalf("late statement of epoch %d after epoch %d: %v, want ErrSuperseded", e[0], e[1], err)
				}
				if c.changed() {
					t.Fatal("the late statement of the older epoch changed the replica")
				}
				if got := p.R.QueryString(t, "SELECT epoch FROM mysqlctl.fence"); got != strconv.FormatInt(e[1], 10) {
					t.Fatalf("stored epoch %s, want %d", got, e[1])
				}
			})
		})
	}
}

// pausedAfterFence makes in pause between its fence check and its first
// statement: an actor frozen mid-statement, holding the fence lock.
func pausedAfterFence(in *Instance) *failpoint {
	fp := newFailpoint(1)
	in.afterFence = func(string) { fp.hit() }
	return fp
}

// TestLiveEpochStaleLockHolderKilled: actor A (epoch n) holds the replica's
// fence lock and freezes before its START SLAVE goes out; actor B (epoch
// n+1) waits FenceWait for the lock, finds the stored epoch not newer than
// its own, ends A's session and stops the replica. A's late START SLAVE
// fails on its ended session: the replica stays stopped. Unfenced, A's late
// START SLAVE restarts replication after B stopped it.
func TestLiveEpochStaleLockHolderKilled(t *testing.T) {
	ctx := context.Background()
	attackRuns(t, func(t *testing.T, p *fencePair, fenced bool) {
		e := epochs(fenced, 2)
		a, b := actor(t, p.R, e[0]), actor(t, p.R, e[1])
		err := late(t, pausedAfterFence(a), func() error { return a.StartReplica(ctx) }, func() error { return b.StopReplica(ctx) })
		running := replicaRunning(t, p.R)
		if !fenced {
			if err != nil || !running {
				t.Fatalf("control: the unfenced late START SLAVE did not land (err %v, running %v): the attack proves nothing", err, running)
			}
			return
		}
		if err == nil || running {
			t.Fatalf("the stale holder's START SLAVE landed after the newer epoch stopped the replica (err %v, running %v)", err, running)
		}
		if got := p.R.QueryString(t, "SELECT IS_USED_LOCK('mysqlctl.fence')"); got != "NULL" {
			t.Fatalf("the fence lock is still held by session %s", got)
		}
	})
}

// TestLiveEpochSameEpochWaits: two sessions of one actor (the same epoch)
// meet on the replica: the first holds the fence lock, frozen before its
// START SLAVE; the second (STOP SLAVE) waits for it, well past FenceWait,
// instead of ending it, and runs after it, so both succeed in that order and
// the replica ends stopped. Unfenced, the second does not wait: its STOP
// lands first and the first's late START restarts replication.
func TestLiveEpochSameEpochWaits(t *testing.T) {
	ctx := context.Background()
	attackRuns(t, func(t *testing.T, p *fencePair, fenced bool) {
		e := epochs(fenced, 1)
		a1, a2 := actor(t, p.R, e[0]), actor(t, p.R, e[0])
		var early bool
		err2 := make(chan error, 1)
		e1 := late(t, pausedAfterFence(a1), func() error { return a1.StartReplica(ctx) }, func() error {
			go func() { err2 <- a2.StopReplica(ctx) }()
			// Longer than FenceWait, after which a session of another epoch
			// would end a1's (TestLiveEpochStaleLockHolderKilled).
			select {
			case err := <-err2:
				early = true
				err2 <- err
			case <-time.After(3 * a2.fenceWait()):
			}
			return nil
		})
		e2 := <-err2
		running := replicaRunning(t, p.R)
		if !fenced {
			if !early || !running {
				t.Fatalf("control: unfenced, the second session should not wait and the late START should land (early %v, running %v)", early, running)
			}
			return
		}
		if early || e1 != nil || e2 != nil || running {
			t.Fatalf("same epoch: second finished before the first %v, first %v, second %v, running %v; want the second to wait and run last", early, e1, e2, running)
		}
	})
}

// TestLiveEpochSurvivesRestartWithoutGTID: a fence write leaves
// gtid_binlog_pos (and so the GTID history) unchanged, FenceTable is
// InnoDB, and after a crash (SIGKILL) and restart the server still refuses
// the older epoch's statement. Unfenced, the same statement lands.
func TestLiveEpochSurvivesRestartWithoutGTID(t *testing.T) {
	s := mariadbtest.Start(t, mariadbtest.Options{Name: "fence-restart"})
	ctx := context.Background()
	root := connect(t, s, rootCreds())
	defer root.Close()
	must(t, root.EnsureUser(ctx, UserSpec{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, EnsureUserOptions{SkipBinlog: true}))
	s.Exec(t, "INSERT INTO app.t (v) VALUES ('before')") // a history to keep
	before := s.QueryString(t, "SELECT @@gtid_binlog_pos")
	e := epochs(true, 2)
	must(t, actor(t, s, e[1]).Fence(ctx))
	if got := s.QueryString(t, "SELECT @@gtid_binlog_pos"); got != before {
		t.Fatalf("the fence write moved gtid_binlog_pos %q -> %q", before, got)
	}
	if got := s.QueryString(t, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mysqlctl' AND TABLE_NAME = 'fence'"); got != "InnoDB" {
		t.Fatalf("mysqlctl.fence engine %s", got)
	}
	// An application writer, whose grants cover every other schema through
	// the wildcard, cannot touch the token.
	must(t, root.EnsureUser(ctx, UserSpec{User: "appw", Password: "appw-Secret", Role: RoleAppWriter}, EnsureUserOptions{SkipBinlog: true}))
	s.Exec(t, "SET GLOBAL read_only = OFF") // so that only the grants refuse
	app := s.OpenDB(t, "appw", "appw-Secret")
	if _, err := app.ExecContext(ctx, "UPDATE app.t SET v = v"); err != nil {
		t.Fatalf("control: the application account cannot write its own data: %v", err)
	}
	for _, q := range []string{"UPDATE mysqlctl.fence SET epoch = 0", "DELETE FROM mysqlctl.fence", "DROP TABLE mysqlctl.fence",
		"CREATE TABLE mysqlctl.other (i INT)", "DROP DATABASE mysqlctl"} {
		if _, err := app.ExecContext(ctx, q); err == nil {
			t.Fatalf("the application account ran %q", q)
		}
	}
	// An account without the grant (one made by an older mysqlctl) fails closed.
	ungranted := connect(t, s, Credentials{User: "appw", Password: "appw-Secret"})
	defer ungranted.Close()
	ungranted.Epoch = func() int64 { return e[1] }
	if err := ungranted.Fence(ctx); err == nil || !strings.Contains(err.Error(), "ensure the orchestration account again") {
		t.Fatalf("a fenced statement of an account without the grant on mysqlctl.*: %v", err)
	}
	s.Restart(t)
	s.Exec(t, "SET GLOBAL read_only = ON") // read_only itself does not survive a restart
	if got := s.QueryString(t, "SELECT epoch FROM mysqlctl.fence"); got != strconv.FormatInt(e[1], 10) {
		t.Fatalf("stored epoch after restart %s, want %d", got, e[1])
	}
	err := actor(t, s, e[0]).MakeWritable(ctx)
	if !errors.Is(err, ErrSuperseded) || !readOnly(t, s) {
		t.Fatalf("older epoch after restart: %v, read_only %v; want ErrSuperseded and read_only kept", err, readOnly(t, s))
	}
	// Control: the same statement without a token lands.
	must(t, actor(t, s, 0).MakeWritable(ctx))
	if readOnly(t, s) {
		t.Fatal("control: the unfenced MakeWritable did not land")
	}
	if got := s.QueryString(t, "SELECT @@gtid_binlog_pos"); got != before {
		t.Fatalf("gtid_binlog_pos %q -> %q", before, got)
	}
}

// TestLiveEpochSessionOnKilledPooledConnection: fenced, every action runs on
// a pinned session; one whose pooled connection was ended meanwhile (a kill
// of client sessions ends this pool's idle ones too) still succeeds over
// TCP, where the driver's liveness check at check-out lets database/sql
// take another connection. (Over port-forward that check cannot see a
// closed stream; a pinned session does not retry its first statement there.)
func TestLiveEpochSessionOnKilledPooledConnection(t *testing.T) {
	p := sharedFencePair(t)
	ctx := context.Background()
	in := actor(t, p.R, epochs(true, 1)[0])
	must(t, in.Fence(ctx)) // leaves an idle connection in the pool
	ids := p.R.DB(t).QueryRowContext(ctx, "SELECT GROUP_CONCAT(ID) FROM information_schema.PROCESSLIST WHERE USER = ?", orch.User)
	var list string
	must(t, ids.Scan(&list))
	for _, id := range strings.Split(list, ",") {
		p.R.Exec(t, "KILL CONNECTION "+id)
	}
	must(t, in.Fence(ctx))
}
