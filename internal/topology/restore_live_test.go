package topology

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// TestRestoredServerHistoryAndFence: a server restored from another cluster's backup holds that
// cluster's fencing epoch (higher than this cluster's) and an empty binary log. This cluster's
// fenced statements are refused until ForgetFence removes the epoch; ContinueHistory then starts
// the binary log at the backup's position, and the server's next transaction follows it. Once the
// history is continued, a late ForgetFence (an actor paused past its guard) changes nothing: the
// epoch this cluster stored stays, so no older actor's statement can land.
func TestRestoredServerHistoryAndFence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := mariadbtest.Start(t, mariadbtest.Options{Name: "restored"})
	pass := func(string) (time.Time, error) { return time.Time{}, nil }
	// As a restore leaves it: root without its own way through read_only (mysqlctl strips it,
	// the role lets its sessions through), the source's fence row, no binary log of its own,
	// read-only.
	asMysqlctlLeavesIt(ctx, t, s)
	s.Exec(t, "CREATE DATABASE IF NOT EXISTS "+FenceSchema,
		"CREATE TABLE IF NOT EXISTS "+FenceTable+" (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, epoch BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
		"REPLACE INTO "+FenceTable+" VALUES (1, 1000000)", "RESET MASTER")
	fenced := connect(t, s, rootCreds())
	defer fenced.Close()
	fenced.Epoch, fenced.Guard, fenced.FenceWait = func() int64 { return 5 }, pass, time.Second
	fenced.FenceAccounts = []string{mariadbtest.RootUser}
	fenced.Confirm = func(context.Context) error { return nil }
	plain := connect(t, s, rootCreds())
	defer plain.Close()
	plain.Guard = pass
	must(t, plain.Fence(ctx)) // read-only

	if err := fenced.ContinueHistory(ctx, "0-7-9"); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("with the restored epoch in place: %v, want ErrSuperseded (the control)", err)
	}
	if err := fenced.ForgetFence(ctx); err == nil {
		t.Errorf("a fenced session forgot the fence")
	}
	if err := plain.ForgetFence(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.QueryString(t, "SELECT COUNT(*) FROM "+FenceTable); n != "0" {
		t.Fatalf("%s rows left in the fence table", n)
	}
	if err := fenced.ContinueHistory(ctx, "0-7-9"); err != nil {
		t.Fatal(err)
	}
	if st, sp := s.QueryString(t, "SELECT @@gtid_binlog_state"), s.QueryString(t, "SELECT @@gtid_slave_pos"); st != "0-7-9" || sp != "0-7-9" {
		t.Errorf("after ContinueHistory: gtid_binlog_state %q, gtid_slave_pos %q; want 0-7-9 both", st, sp)
	}
	must(t, plain.MakeWritable(ctx))
	s.Exec(t, "CREATE DATABASE after_restore")
	if pos, want := s.QueryString(t, "SELECT @@gtid_binlog_pos"), fmt.Sprintf("0-%d-10", s.ServerID); pos != want {
		t.Errorf("the first write after the restore is at %q, want %q (the backup's history continued)", pos, want)
	}
	// A late ForgetFence, once the history is continued, deletes nothing.
	if err := plain.ForgetFence(ctx); err != nil {
		t.Fatal(err)
	}
	if e := s.QueryString(t, "SELECT epoch FROM "+FenceTable+" WHERE id = 1"); e != "5" {
		t.Errorf("the stored epoch after a late ForgetFence is %q, want this cluster's 5", e)
	}
}
