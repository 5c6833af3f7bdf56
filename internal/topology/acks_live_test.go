package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// TestLiveLostAckReleased is the attack on a primary that lost an acknowledgement: a single
// writer commits on a semi-sync primary with two replicas (net timeout 1 s, as mysqlctl sets it)
// and retries the same row after a timeout, as an application does; the primary is frozen for
// 1.2 s until a commit is left waiting although both replicas received it and are connected (the
// control: it still waits 2 s later, no acknowledgement counted). ReleaseAckWaiters then releases
// it and the writer goes on. On a fenced server (read-only, root as mysqlctl leaves it) the same
// statement is refused and adds nothing to its history; and while a release that got no
// acknowledgement still waits on the server, no second one is sent.
func TestLiveLostAckReleased(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := mariadbtest.Start(t, mariadbtest.Options{Name: "lostack-p", Args: []string{
		"--rpl-semi-sync-master-enabled=ON", "--rpl-semi-sync-master-wait-no-slave=ON",
		"--rpl-semi-sync-master-timeout=600000", "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
	}})
	var replicas []*mariadbtest.Server
	for _, name := range []string{"lostack-r1", "lostack-r2"} {
		r := mariadbtest.Start(t, mariadbtest.Options{Name: name, Args: []string{"--read-only=ON", "--rpl-semi-sync-slave-enabled=ON", "--slave-net-timeout=1"}})
		r.ReplicateFrom(t, p)
		replicas = append(replicas, r)
	}
	for _, s := range append([]*mariadbtest.Server{p}, replicas...) {
		asMysqlctlLeavesIt(ctx, t, s)
	}
	pass := func(string) (time.Time, error) { return time.Time{}, nil }
	p.Exec(t, "CREATE TABLE app.w (id INT PRIMARY KEY)")
	status := func(name string) string {
		return p.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name)
	}

	var written atomic.Int64
	wctx, stopWriter := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		open := func() *sql.DB {
			db, _ := sql.Open("mysql", p.DSN(mariadbtest.RootUser, mariadbtest.RootPassword))
			db.SetMaxOpenConns(1)
			return db
		}
		db := open()
		defer func() { _ = db.Close() }()
		for id := int64(1); wctx.Err() == nil; {
			c, cancel := context.WithTimeout(wctx, 2*time.Second)
			_, err := db.ExecContext(c, "INSERT INTO app.w VALUES (?)", id)
			cancel()
			if err == nil || sqlErrorNumber(err) == 1062 {
				written.Store(id)
				id++
				continue
			}
			_ = db.Close()
			db = open()
		}
	}()
	defer func() {
		stopWriter()
		p.Thaw(t)
		_, _ = p.DB(t).Exec("SET GLOBAL rpl_semi_sync_master_enabled = OFF")
		<-done
	}()

	stuck := false
	for round := 0; round < 25 && !stuck; round++ {
		p.Freeze(t)
		time.Sleep(1200 * time.Millisecond)
		p.Thaw(t)
		time.Sleep(1500 * time.Millisecond)
		acked, w0 := status("RPL_SEMI_SYNC_MASTER_YES_TX"), written.Load()
		time.Sleep(time.Second)
		if status("RPL_SEMI_SYNC_MASTER_WAIT_SESSIONS") == "0" || written.Load() != w0 {
			continue
		}
		pos := p.QueryString(t, "SELECT @@global.gtid_binlog_pos")
		held := 0
		for _, r := range replicas {
			if r.QueryString(t, "SELECT @@global.gtid_slave_pos") == pos {
				held++
			}
		}
		time.Sleep(time.Second)
		stuck = status("RPL_SEMI_SYNC_MASTER_WAIT_SESSIONS") != "0" && status("RPL_SEMI_SYNC_MASTER_YES_TX") == acked &&
			status("RPL_SEMI_SYNC_MASTER_CLIENTS") == "2" && written.Load() == w0 && held == len(replicas)
		t.Logf("freeze %d: primary at %s, held by %d replicas, %s waiting, stuck %v", round+1, pos, held, status("RPL_SEMI_SYNC_MASTER_WAIT_SESSIONS"), stuck)
	}
	if !stuck {
		t.Fatal("control: no freeze left a commit waiting for an acknowledgement its replicas hold (the fault did not happen)")
	}

	// A fenced server refuses the statement, and its history gains nothing.
	r := connect(t, replicas[0], rootCreds())
	defer r.Close()
	r.Guard = pass
	before := replicas[0].QueryString(t, "SELECT @@global.gtid_binlog_pos")
	if err := r.ReleaseAckWaiters(ctx); sqlErrorNumber(err) != erOptionPreventsStmt {
		t.Fatalf("ReleaseAckWaiters on a read-only replica = %v; want refused by read_only (1290)", err)
	}
	if after := replicas[0].QueryString(t, "SELECT @@global.gtid_binlog_pos"); after != before {
		t.Fatalf("the refused statement changed the replica's history: %q -> %q", before, after)
	}

	// On the primary it releases the waiting commit, and the writer goes on.
	in := connect(t, p, rootCreds())
	defer in.Close()
	in.Guard = pass
	w0 := written.Load()
	began := time.Now()
	must(t, in.ReleaseAckWaiters(ctx))
	waitFor(t, 10*time.Second, "the writer going on after the release", func() (bool, string) {
		return written.Load() > w0+10, status("RPL_SEMI_SYNC_MASTER_WAIT_SESSIONS") + " waiting"
	})
	t.Logf("released: the writer went on %s after the statement", time.Since(began).Round(time.Millisecond))

	// A release whose own acknowledgement does not come (no replica receives any more) keeps
	// waiting on the server after its client gave up; no second one is sent beside it.
	for _, r := range replicas {
		r.Exec(t, "STOP SLAVE")
	}
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	err := in.ReleaseAckWaiters(sctx)
	scancel()
	if err == nil {
		t.Fatal("a release with no replica to acknowledge it returned")
	}
	waitFor(t, 10*time.Second, "a second release refused while the first waits", func() (bool, string) {
		err := in.ReleaseAckWaiters(ctx)
		return errors.Is(err, ErrReleasePending), fmt.Sprint(err)
	})
	if n := p.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'CREATE DATABASE IF NOT EXISTS "+FenceSchema+"'"); n != "1" {
		t.Errorf("%s release sessions wait on the primary, want 1", n)
	}
}
