package topology

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// The tests in this file run against real mariadbd processes on loopback
// addresses: a shared primary with two GTID replicas, plus dedicated servers
// for the destructive cases (an errant write, a fence).

func TestLiveObserveAndClassify(t *testing.T) {
	c := sharedCluster(t)
	targets := []ObserveTarget{}
	for _, name := range []string{"mariadb-0", "mariadb-1", "mariadb-2"} {
		targets = append(targets, ObserveTarget{Name: name, DB: c.inst[name].DB()})
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	snaps := ObserveAll(context.Background(), targets, ObserveOptions{Now: func() time.Time { return now }, Timeout: 5 * time.Second})
	p, r1, r2 := snaps[0], snaps[1], snaps[2]
	for i, s := range snaps {
		if !s.Complete() || s.Name != targets[i].Name || !s.ObservedAt.Equal(now) {
			t.Fatalf("snapshot %d: %+v %v", i, s.Err, s.Name)
		}
		if s.Flavor.Line != MariaDB || !s.Flavor.Version.AtLeast(10, 11, 0) || s.SuperReadOnly != nil {
			t.Errorf("%s flavor %v super_read_only %v", s.Name, s.Flavor, s.SuperReadOnly)
		}
		if s.GTIDStrictMode == nil || !*s.GTIDStrictMode || !s.LogBin || s.DomainID != 0 {
			t.Errorf("%s config: strict %v log_bin %v domain %d", s.Name, s.GTIDStrictMode, s.LogBin, s.DomainID)
		}
		if !s.SemiSync.Available || s.SemiSync.SourceEnabled || s.SemiSync.ReplicaEnabled {
			t.Errorf("%s semi-sync %+v", s.Name, s.SemiSync)
		}
		if !s.GTID.PurgedKnown || !s.GTID.PurgedPos.IsEmpty() {
			t.Errorf("%s purged %v %s (nothing was purged)", s.Name, s.GTID.PurgedKnown, s.GTID.PurgedPos)
		}
	}
	if p.ServerID != c.P.ServerID || r1.ServerID != c.R1.ServerID || r2.ServerID != c.R2.ServerID {
		t.Errorf("server ids %d %d %d", p.ServerID, r1.ServerID, r2.ServerID)
	}
	if p.ReadOnly || p.Replica != nil || p.GTID.BinlogPos.IsEmpty() {
		t.Errorf("primary: read_only %v replica %v binlog %s", p.ReadOnly, p.Replica, p.GTID.BinlogPos)
	}
	for _, r := range []Snapshot{r1, r2} {
		if !r.ReadOnly || r.Replica == nil {
			t.Fatalf("%s: %s", r.Name, describe(r))
		}
		rs := r.Replica
		if rs.SourceHost != c.P.Host || rs.SourcePort != 3306 || rs.SourceUser != "repl" || rs.SourceServerID != c.P.ServerID {
			t.Errorf("%s source %s@%s:%d id %d", r.Name, rs.SourceUser, rs.SourceHost, rs.SourcePort, rs.SourceServerID)
		}
		if !rs.Healthy() || !rs.AutoPosition || rs.UsingGTID != "Slave_Pos" || rs.SecondsBehind == nil || *rs.SecondsBehind != 0 {
			t.Errorf("%s replica status %+v", r.Name, rs)
		}
		// The replica's applied, received and binlogged positions all equal
		// the primary's binlog position: the algebra agrees with the server.
		for name, pos := range map[string]gtid.MariaDBPos{"slave": r.GTID.SlavePos, "io": r.GTID.IOPos, "binlog": r.GTID.BinlogPos} {
			if !pos.Equal(p.GTID.BinlogPos) {
				t.Errorf("%s %s pos %s, primary binlog %s", r.Name, name, pos, p.GTID.BinlogPos)
			}
		}
		if rel := r.GTID.SlavePos.Relate(p.GTID.BinlogPos); len(rel) != 1 || rel[0].Relation != gtid.Same {
			t.Errorf("%s relation %v", r.Name, rel)
		}
		if len(r.GTID.BinlogState) != 1 || r.GTID.BinlogState[0].ServerID != c.P.ServerID {
			t.Errorf("%s binlog state %v: only the primary wrote", r.Name, r.GTID.BinlogState)
		}
	}
	for _, s := range snaps {
		cl := Classify(ClassifyInput{Instance: s, ExpectedPrimary: "mariadb-0", Primary: &p})
		want := ClassReplicating
		if s.Name == "mariadb-0" {
			want = ClassPrimary
		}
		if cl.Class != want || len(cl.Findings) != 1 {
			t.Errorf("%s classified %v %v: %s", s.Name, cl.Class, cl.Findings, strings.Join(cl.Evidence, "; "))
		}
	}
}

func TestLiveStoppedIOThread(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	r2 := c.inst["mariadb-2"]
	must(t, r2.StopIOThread(ctx))
	t.Cleanup(func() {
		must(t, r2.StartIOThread(ctx))
		c.healthy(t)
	})
	before := c.observe(t, "mariadb-2")
	c.P.Exec(t, "INSERT INTO app.t (v) VALUES ('while the IO thread is stopped')")
	p := c.observe(t, "mariadb-0")
	s := c.observe(t, "mariadb-2")
	if s.Replica.IOThread != ThreadStopped || !s.Replica.SQLRunning {
		t.Fatalf("threads: %s", describe(s))
	}
	if s.Replica.SecondsBehind != nil {
		t.Errorf("lag %d reported while the IO thread is stopped; it is unknown", *s.Replica.SecondsBehind)
	}
	// Nothing new was received, so the received position has not reached
	// the primary.
	if !s.GTID.IOPos.Equal(before.GTID.IOPos) || s.GTID.IOPos.Reached(p.GTID.BinlogPos) {
		t.Errorf("received %s, before %s, primary %s", s.GTID.IOPos, before.GTID.IOPos, p.GTID.BinlogPos)
	}
	cl := Classify(ClassifyInput{Instance: s, ExpectedPrimary: "mariadb-0", Primary: &p, Thresholds: Thresholds{MaxTransactionsBehind: 100}})
	if cl.Class != ClassIOBroken || len(cl.Findings) != 1 || !containsLine(cl.Evidence, "IO thread No, last IO error 0") {
		t.Fatalf("classified %v %v: %s", cl.Class, cl.Findings, strings.Join(cl.Evidence, "; "))
	}
}

func TestLiveWaitForGTID(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	r1 := c.inst["mariadb-1"]
	p := c.observe(t, "mariadb-0")
	must(t, r1.WaitForGTID(ctx, p.GTID.BinlogPos.String(), 10*time.Second))

	g, _ := p.GTID.BinlogPos.Domain(0)
	g.Seq += 1000
	future, _ := gtid.NewMariaDBPos(g)
	err := r1.WaitForGTID(ctx, future.String(), time.Second)
	if !errors.Is(err, ErrWaitTimeout) || KindOf(err) != ErrorTimeout {
		t.Fatalf("waiting for a future position: %v", err)
	}

	// A wait started while the applier is stopped returns once it has
	// applied the position.
	must(t, r1.StopReplica(ctx))
	t.Cleanup(func() { c.healthy(t) })
	c.P.Exec(t, "INSERT INTO app.t (v) VALUES ('waited for')")
	target := c.observe(t, "mariadb-0").GTID.BinlogPos.String()
	if err := r1.WaitForGTID(ctx, target, time.Second); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("wait while stopped: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r1.WaitForGTID(ctx, target, 30*time.Second) }()
	must(t, r1.StartReplica(ctx))
	must(t, <-done)
	if got := c.R1.QueryString(t, "SELECT COUNT(*) FROM app.t WHERE v = 'waited for'"); got != "1" {
		t.Fatalf("row not applied after the wait returned: %s", got)
	}
}

func TestLiveRepoint(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	r2 := c.inst["mariadb-2"]
	t.Cleanup(func() {
		must(t, r2.Repoint(ctx, replSource(c.P)))
		c.healthy(t)
	})
	// Chain mariadb-2 below mariadb-1.
	must(t, r2.Repoint(ctx, replSource(c.R1)))
	eventually(t, "mariadb-2 connected to mariadb-1", func() (bool, string) {
		s := c.observe(t, "mariadb-2")
		return s.Replica.IORunning() && s.Replica.SourceServerID == c.R1.ServerID, describe(s)
	})
	c.P.Exec(t, "INSERT INTO app.t (v) VALUES ('through mariadb-1')")
	must(t, r2.WaitForGTID(ctx, c.observe(t, "mariadb-0").GTID.BinlogPos.String(), 20*time.Second))
	s := c.observe(t, "mariadb-2")
	if s.Replica.SourceHost != c.R1.Host {
		t.Fatalf("source host %s", s.Replica.SourceHost)
	}
	cl := c.classify(t, "mariadb-2")
	if cl.Class != ClassWrongSource || !containsLine(cl.Evidence, "source server_id "+strconv.FormatUint(uint64(c.R1.ServerID), 10)+" is not the expected primary mariadb-0's") {
		t.Fatalf("classified %v: %s", cl.Class, strings.Join(cl.Evidence, "; "))
	}

	// A replication account whose password needs quoting: the password is
	// a statement argument, interpolated by the driver.
	tricky := Secret(`q'u"o\te;--`)
	must(t, c.inst["mariadb-0"].EnsureUser(ctx, UserSpec{User: "repl2", Password: tricky, Role: RoleReplication}, EnsureUserOptions{}))
	c.R2.CatchUp(t, c.P)
	spec := replSource(c.P)
	spec.User, spec.Password = "repl2", tricky
	must(t, r2.Repoint(ctx, spec))
	eventually(t, "mariadb-2 connected to mariadb-0 as repl2", func() (bool, string) {
		s := c.observe(t, "mariadb-2")
		return s.Replica.IORunning() && s.Replica.SourceUser == "repl2" && s.Replica.SourceServerID == c.P.ServerID, describe(s)
	})
}

func TestLiveSemiSync(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	p, r1, r2 := c.inst["mariadb-0"], c.inst["mariadb-1"], c.inst["mariadb-2"]
	t.Cleanup(func() {
		must(t, p.DisableSemiSyncSource(ctx))
		must(t, r1.DisableSemiSyncReplica(ctx))
		must(t, r2.DisableSemiSyncReplica(ctx))
		must(t, r1.StartIOThread(ctx))
		must(t, r2.StartIOThread(ctx))
		for _, name := range []string{"mariadb-0", "mariadb-1", "mariadb-2"} {
			if s := c.observe(t, name).SemiSync; s.SourceEnabled || s.ReplicaEnabled {
				t.Errorf("%s semi-sync still on: %+v", name, s)
			}
		}
		eventually(t, "replicas stopped acknowledging", func() (bool, string) {
			s := c.observe(t, "mariadb-1")
			return !s.SemiSync.ReplicaActive, describe(s)
		})
		c.healthy(t)
	})

	must(t, p.EnableSemiSyncSource(ctx, SemiSyncSourceSpec{Timeout: 3 * time.Second}))
	must(t, r1.EnableSemiSyncReplica(ctx))
	must(t, r2.EnableSemiSyncReplica(ctx))
	eventually(t, "both replicas acknowledging", func() (bool, string) {
		s := c.observe(t, "mariadb-0")
		return s.SemiSync.SourceActive && s.SemiSync.SourceClients == 2, describe(s)
	})
	ps := c.observe(t, "mariadb-0").SemiSync
	if !ps.SourceEnabled || ps.WaitPoint != "AFTER_SYNC" || ps.TimeoutMillis != 3000 || ps.WaitForReplicas != 1 {
		t.Errorf("source configuration %+v", ps)
	}
	yes := ps.YesTx
	c.P.Exec(t, "INSERT INTO app.t (v) VALUES ('acknowledged')")
	if got := c.observe(t, "mariadb-0").SemiSync.YesTx; got != yes+1 {
		t.Errorf("acknowledged commits %d → %d", yes, got)
	}
	for _, name := range []string{"mariadb-1", "mariadb-2"} {
		if s := c.observe(t, name).SemiSync; !s.ReplicaEnabled || !s.ReplicaActive || s.SourceEnabled {
			t.Errorf("%s replica side %+v", name, s)
		}
	}

	// Starve the primary: with both IO threads stopped a commit waits for an
	// acknowledgement until the timeout, and the snapshot shows the waiting
	// session; afterwards the primary falls back to asynchronous commits.
	must(t, r1.StopIOThread(ctx))
	must(t, r2.StopIOThread(ctx))
	committed := make(chan error, 1)
	go func() {
		_, err := c.P.DB(t).ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('unacknowledged')")
		committed <- err
	}()
	eventually(t, "a session waiting for an acknowledgement", func() (bool, string) {
		s := c.observe(t, "mariadb-0")
		return s.SemiSync.WaitSessions >= 1, describe(s)
	})
	must(t, <-committed)
	s := c.observe(t, "mariadb-0").SemiSync
	if s.SourceActive || s.NoTx < 1 || !s.SourceEnabled {
		t.Errorf("after the timeout: %+v (want enabled, inactive, one unacknowledged commit)", s)
	}
}

func TestLiveEnsureUser(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	t.Cleanup(func() { c.healthy(t) })
	r1 := c.inst["mariadb-1"]
	before := c.observe(t, "mariadb-1").GTID.BinlogPos
	spec := UserSpec{User: "local_only", Password: "first", Role: RoleReplication}
	// Twice, the second time with a new password: idempotent and converging.
	must(t, r1.EnsureUser(ctx, spec, EnsureUserOptions{SkipBinlog: true}))
	spec.Password = "second"
	must(t, r1.EnsureUser(ctx, spec, EnsureUserOptions{SkipBinlog: true}))
	after := c.observe(t, "mariadb-1").GTID
	if !after.BinlogPos.Equal(before) || len(after.BinlogState) != 1 {
		t.Fatalf("SkipBinlog left GTIDs behind: %s → %s (%v)", before, after.BinlogPos, after.BinlogState)
	}
	// The pooled session got sql_log_bin back: a later write is binlogged.
	var logBin string
	must(t, r1.DB().(*sql.DB).QueryRowContext(ctx, "SELECT @@session.sql_log_bin").Scan(&logBin))
	if logBin != "1" {
		t.Fatalf("a pooled session has sql_log_bin=%s", logBin)
	}
	u := connect(t, c.R1, Credentials{User: "local_only", Password: "second"})
	defer u.Close()
	if s := u.Observe(ctx, ObserveOptions{}); !s.Reachable {
		t.Fatalf("log in with the converged password: %+v", s.Err)
	}
	if got := c.R1.QueryString(t, "SELECT COUNT(*) FROM mysql.user WHERE User = 'local_only'"); got != "1" {
		t.Fatalf("%s accounts", got)
	}
	if got := c.P.QueryString(t, "SELECT COUNT(*) FROM mysql.user WHERE User = 'local_only'"); got != "0" {
		t.Fatalf("the account reached the primary: %s", got)
	}
	c.R1.Exec(t, "SET SESSION sql_log_bin = 0", "DROP USER 'local_only'@'%'", "SET SESSION sql_log_bin = 1")
}

// TestLiveErrantWrite writes on a real replica and checks that the
// classification finds it, first as a local write and, once the primary
// writes the same sequence number, as a proven divergence that also breaks
// the SQL thread under gtid_strict_mode.
func TestLiveErrantWrite(t *testing.T) {
	ctx := context.Background()
	ps := mariadbtest.Start(t, mariadbtest.Options{Name: "errant-primary"})
	rs := mariadbtest.Start(t, mariadbtest.Options{Name: "errant-replica"})
	p, r := connect(t, ps, rootCreds()), connect(t, rs, rootCreds())
	defer p.Close()
	defer r.Close()
	must(t, r.Repoint(ctx, replSource(ps)))
	ps.Exec(t, "INSERT INTO app.t (v) VALUES ('x'), ('y')")
	rs.CatchUp(t, ps)
	classify := func() (Classification, Snapshot) {
		pSnap := p.Observe(ctx, ObserveOptions{})
		rSnap := r.Observe(ctx, ObserveOptions{})
		if !pSnap.Complete() || !rSnap.Complete() {
			t.Fatalf("observe: %+v %+v", pSnap.Err, rSnap.Err)
		}
		return Classify(ClassifyInput{Instance: rSnap, ExpectedPrimary: "errant-primary", Primary: &pSnap}), rSnap
	}
	// Not fenced yet: a writable replica, nothing errant.
	if cl, _ := classify(); cl.Class != ClassWritableReplica || len(cl.Findings) != 1 {
		t.Fatalf("before the write: %v %v", cl.Findings, cl.Evidence)
	}

	rs.Exec(t, "INSERT INTO app.t (v) VALUES ('errant')")
	cl, snap := classify()
	if snap.GTID.BinlogPos.Equal(snap.GTID.SlavePos) {
		t.Errorf("an errant write shows as gtid_binlog_pos ≠ gtid_slave_pos, got %s both", snap.GTID.BinlogPos)
	}
	own := strconv.FormatUint(uint64(rs.ServerID), 10)
	if cl.Class != ClassErrant || !cl.Has(ClassWritableReplica) ||
		!containsLine(cl.Evidence, "from server_id "+own+" (this replica itself: a local write), which was never a primary") {
		t.Fatalf("after the errant write: %v %v\n%s", cl.Class, cl.Findings, strings.Join(cl.Evidence, "\n"))
	}

	ps.Exec(t, "INSERT INTO app.t (v) VALUES ('conflicting sequence number')")
	eventually(t, "the replica's SQL thread to stop on the out-of-order GTID", func() (bool, string) {
		s := r.Observe(ctx, ObserveOptions{})
		return s.Replica != nil && !s.Replica.SQLRunning, describe(s)
	})
	cl, snap = classify()
	if cl.Class != ClassErrant || !cl.Has(ClassSQLBroken) || !containsLine(cl.Evidence, "diverged from the primary (proven)") {
		t.Fatalf("after the primary's write: %v %v\n%s", cl.Class, cl.Findings, strings.Join(cl.Evidence, "\n"))
	}
	if snap.Replica.LastSQLErrno == 0 || snap.Replica.LastSQLError == "" {
		t.Errorf("SQL error not reported: %s", describe(snap))
	}
}

// TestLiveFence fences a real primary that serves a replica and has an
// application session open.
func TestLiveFence(t *testing.T) {
	ctx := context.Background()
	fs := mariadbtest.Start(t, mariadbtest.Options{Name: "fence-primary"})
	frs := mariadbtest.Start(t, mariadbtest.Options{Name: "fence-replica"})
	root := connect(t, fs, rootCreds())
	defer root.Close()
	must(t, root.EnsureUser(ctx, UserSpec{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, EnsureUserOptions{}))
	fr := connect(t, frs, rootCreds())
	defer fr.Close()
	must(t, fr.Repoint(ctx, replSource(fs)))
	frs.CatchUp(t, fs)
	f := connect(t, fs, orch)
	defer f.Close()

	app := fs.OpenDB(t, mariadbtest.AppUser, mariadbtest.AppPassword)
	defer app.Close()
	held, err := app.Conn(ctx)
	must(t, err)
	defer held.Close()
	var appID uint64
	must(t, held.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&appID))
	if _, err := held.ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('before the fence')"); err != nil {
		t.Fatal(err)
	}

	must(t, f.Fence(ctx))
	// MariaDB's read_only does not stop accounts holding READ_ONLY ADMIN
	// (ALL PRIVILEGES includes it, as the template's root has): a root
	// session still writes, so the fence is read back but not verified
	// until that session is gone.
	fs.Exec(t, "INSERT INTO app.t (v) VALUES ('root still writes')")
	state, err := f.VerifyFence(ctx)
	must(t, err)
	if state.Verified || !state.ReadOnly || state.SuperReadOnly != nil || len(state.WriteThrough) == 0 {
		t.Fatalf("fence state %+v", state)
	}
	for _, wt := range state.WriteThrough {
		if wt.User != mariadbtest.RootUser || !strings.Contains(wt.Reason, "holds READ_ONLY ADMIN") {
			t.Errorf("write-through session %+v", wt)
		}
	}
	found := false
	for _, cc := range state.ClientConnections {
		found = found || (cc.ID == appID && cc.User == mariadbtest.AppUser)
		if cc.Command == "Binlog Dump" || cc.User == "system user" {
			t.Errorf("listed a replication or system thread: %+v", cc)
		}
	}
	if !found {
		t.Fatalf("the application's session %d is not listed: %+v", appID, state.ClientConnections)
	}

	// The application account (no READ_ONLY ADMIN) can no longer write, on
	// its open session or a new one.
	for _, q := range []func() error{
		func() error {
			_, err := held.ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('after the fence')")
			return err
		},
		func() error {
			_, err := app.ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('after the fence')")
			return err
		},
	} {
		var me *mysql.MySQLError
		if err := q(); !errors.As(err, &me) || me.Number != erOptionPreventsStmt {
			t.Fatalf("application write after the fence: %v", err)
		}
	}
	killed, err := f.KillClientConnections(ctx)
	must(t, err)
	var killedApp bool
	for _, k := range killed {
		killedApp = killedApp || k.ID == appID
	}
	if !killedApp {
		t.Fatalf("the application session was not killed: %+v", killed)
	}
	if err := held.PingContext(ctx); err == nil {
		t.Fatal("the killed application session still answers")
	}
	// Our own session survived, and so did the replica's binlog dump thread;
	// once root's sessions are gone (a killed session stays listed, as
	// Killed, until its thread has ended) the fence is verified.
	eventually(t, "the fence to verify after the kill", func() (bool, string) {
		state, err = f.VerifyFence(ctx)
		must(t, err)
		return state.Verified && len(state.WriteThrough) == 0, strings.Join(state.Evidence, "; ")
	})
	for _, cc := range state.ClientConnections {
		if cc.User == mariadbtest.AppUser {
			t.Errorf("application session survived: %+v", cc)
		}
	}
	fs.Exec(t, "INSERT INTO app.t (v) VALUES ('replicated after the kill')")
	frs.CatchUp(t, fs)
	if s := fr.Observe(ctx, ObserveOptions{}); !s.Complete() || !s.Replica.Healthy() {
		t.Fatalf("the replica lost its source: %s", describe(s))
	}

	must(t, f.MakeWritable(ctx))
	if _, err := app.ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('after the unfence')"); err != nil {
		t.Fatalf("write after MakeWritable: %v", err)
	}
	state, err = f.VerifyFence(ctx)
	must(t, err)
	if state.Verified || state.ReadOnly {
		t.Fatalf("still fenced: %+v", state)
	}
}

func TestLiveResetReplicationOnPromotion(t *testing.T) {
	ctx := context.Background()
	ps := mariadbtest.Start(t, mariadbtest.Options{Name: "old-primary"})
	rs := mariadbtest.Start(t, mariadbtest.Options{Name: "new-primary"})
	p, r := connect(t, ps, rootCreds()), connect(t, rs, rootCreds())
	defer p.Close()
	defer r.Close()
	must(t, r.Repoint(ctx, replSource(ps)))
	must(t, r.Fence(ctx))
	ps.Exec(t, "INSERT INTO app.t (v) VALUES ('history')")
	rs.CatchUp(t, ps)

	// Promote: fence the old primary, drain, reset, make writable, and
	// re-point the old primary below the new one from its own binlog.
	must(t, p.Fence(ctx))
	must(t, r.WaitForGTID(ctx, p.Observe(ctx, ObserveOptions{}).GTID.BinlogPos.String(), 10*time.Second))
	must(t, r.ResetReplication(ctx))
	must(t, r.MakeWritable(ctx))
	rs.Exec(t, "INSERT INTO app.t (v) VALUES ('written on the new primary')")
	spec := replSource(rs)
	spec.ResumeFromBinlog = true
	must(t, p.Repoint(ctx, spec))
	ps.CatchUp(t, rs)

	newP := r.Observe(ctx, ObserveOptions{})
	oldP := p.Observe(ctx, ObserveOptions{})
	if newP.Replica != nil || newP.ReadOnly {
		t.Fatalf("new primary still a replica or read-only: %s", describe(newP))
	}
	cl := Classify(ClassifyInput{
		Instance: oldP, ExpectedPrimary: "new-primary", Primary: &newP,
		History: History{PrimaryServerIDs: []uint32{ps.ServerID}},
	})
	if cl.Class != ClassReplicating {
		t.Fatalf("old primary after re-pointing: %v %s", cl.Findings, strings.Join(cl.Evidence, "; "))
	}
	// Without the history of former primaries its own old writes would be
	// errant: the history input is what makes them legitimate.
	cl = Classify(ClassifyInput{Instance: oldP, ExpectedPrimary: "new-primary", Primary: &newP})
	if cl.Class != ClassErrant {
		t.Fatalf("without history: %v", cl.Findings)
	}
}

// TestLiveUptimeAndSentinel: Uptime reads the server's running time; a sentinel session
// returns nil when its sleep runs out and an error at once when its session is killed (as when
// the server dies and the socket closes).
func TestLiveUptimeAndSentinel(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	in := c.inst["mariadb-0"]
	up, err := in.Uptime(ctx)
	if err != nil || up < 0 || up > 24*time.Hour {
		t.Fatalf("Uptime = %s, %v", up, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if later, err := in.Uptime(ctx); err != nil || later <= up {
		t.Fatalf("Uptime %s then %s (%v): it must grow", up, later, err)
	}
	ss, err := in.OpenSentinel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	if err := ss.Pulse(ctx, 200*time.Millisecond, 5*time.Second, func() { t.Error("a pulse answered on time was reported late") }); err != nil {
		t.Fatalf("a sentinel whose sleep ran out: %v", err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- ss.Pulse(ctx, time.Minute, 5*time.Second, func() {}) }()
	id := ""
	for id == "" && time.Since(start) < 10*time.Second {
		id = c.P.QueryString(t, "SELECT COALESCE(MAX(ID), '') FROM information_schema.PROCESSLIST WHERE INFO LIKE 'DO SLEEP(60.000)%'")
		time.Sleep(20 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("the sentinel session never appeared")
	}
	c.P.Exec(t, "KILL CONNECTION "+id)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a killed sentinel session returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a killed sentinel session did not return")
	}
}

// TestLiveSentinelLateAnswer: a sentinel on a server frozen during its sleep is reported late once
// the sleep and its grace have passed (a sentinel that only waited for the answer would say
// nothing until the server thawed); the answer that comes after the thaw keeps the session, which
// goes on; and a server that stays silent past the statement's slack ends it with a timeout.
func TestLiveSentinelLateAnswer(t *testing.T) {
	s := mariadbtest.Start(t, mariadbtest.Options{Name: "sentinel-late"})
	ctx := context.Background()
	in := connect(t, s, rootCreds())
	defer in.Close()
	in.Guard = func(string) (time.Time, error) { return time.Time{}, nil }
	ss, err := in.OpenSentinel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	var late atomic.Int32
	report := func() { late.Add(1) }
	if err := ss.Pulse(ctx, 100*time.Millisecond, time.Second, report); err != nil || late.Load() != 0 {
		t.Fatalf("a pulse on a server that answers: %v, reported late %d time(s)", err, late.Load())
	}
	done := make(chan error, 1)
	go func() { done <- ss.Pulse(ctx, 300*time.Millisecond, 200*time.Millisecond, report) }()
	time.Sleep(100 * time.Millisecond)
	s.Freeze(t)
	time.Sleep(1500 * time.Millisecond)
	if n := late.Load(); n != 1 {
		t.Errorf("frozen 1.4 s into a 0.3 s sleep with 0.2 s of grace: reported late %d time(s), want 1", n)
	}
	s.Thaw(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the late answer after the thaw: %v; want the session kept", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pulse never returned after the thaw")
	}
	if err := ss.Pulse(ctx, 50*time.Millisecond, time.Second, report); err != nil {
		t.Fatalf("the session after a late answer: %v", err)
	}
	// Silent past the slack: the session ends.
	s.Freeze(t)
	defer s.Thaw(t)
	if err := ss.Pulse(ctx, 100*time.Millisecond, 100*time.Millisecond, func() {}); KindOf(err) != ErrorTimeout {
		t.Errorf("a pulse on a server silent past the slack: %v (kind %v); want a timeout", err, KindOf(err))
	}
}
