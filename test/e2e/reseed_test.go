package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// tailID is the row of the transaction no replica receives.
const tailID = 999999

// crashWithUnreceivedTail leaves the cluster's primary (pod-0) crashed and restarted holding one
// transaction no replica received: the replicas' receivers are stopped, a commit waits for an
// acknowledgement that never comes (the client gets no success), and the server is killed; its
// crash recovery commits the transaction. It returns the tail's GTID position on the primary.
func crashWithUnreceivedTail(t *testing.T, ctx context.Context, root, cluster string) string {
	t.Helper()
	primary := cluster + "-0"
	d0 := db(t, mustPodAddr(t, ctx, primary), root)
	if _, err := d0.ExecContext(ctx, "INSERT INTO app.w VALUES (?)", tailID-1); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{cluster + "-1", cluster + "-2"} {
		d := db(t, mustPodAddr(t, ctx, pod), root)
		holdsAcked(t, ctx, pod, d, []int{tailID - 1})
		if _, err := d.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	pos := func() string {
		var p string
		if err := d0.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := pos()
	uctx, ucancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err := d0.ExecContext(uctx, "INSERT INTO app.w VALUES (?)", tailID)
	ucancel()
	if err == nil {
		t.Fatal("a commit was acknowledged with no replica receiving")
	}
	tail := pos()
	if tail == before {
		t.Fatal("the unacknowledged transaction is not in the primary's binlog: the attack did not happen")
	}
	r.Kill(t, "default", primary)
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	eventually(t, rctx, primary+" restarted", func() error { return d0.PingContext(rctx) })
	if !readOnly(t, ctx, d0) {
		t.Fatal("the restarted primary is writable")
	}
	return tail
}

// TestWatchReseedsCrashedPrimaryTail: a primary crashes holding a transaction no replica
// received (never acknowledged: semi-sync AFTER_SYNC), and comes back. `watch`, through the
// API server as from a workstation, fails over, quarantines the returning old primary with that
// transaction, proves it never acknowledged (the failover proved no acknowledged loss under
// semi-sync; the server restarted inside the window in which no commit could return
// unacknowledged; the extra transaction is its own, right after the new primary's last from
// it, and no other member holds it) and re-seeds it with no command typed: the cluster is back
// to three replicating instances, the discarded GTID is in the rebuild's history record and an
// Event, every write acknowledged under load is on every member, and the tail on none.
func TestWatchReseedsCrashedPrimaryTail(t *testing.T) {
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "rs", 3)
	defer deleteCluster(t, "rs")
	// The crash must come after the primary was last seen healthy (the create's last look):
	// the proof refuses a restart it cannot place after that look.
	time.Sleep(3 * time.Second)
	pods := []string{"rs-0", "rs-1", "rs-2"}
	tail := crashWithUnreceivedTail(t, ctx, root, "rs")
	wr, stopWriter := startPacedWriter(ctx, "rs", 1, 20*time.Millisecond)
	defer stopWriter()
	w := startWatch(t, nil, "rs")
	w.supervising(t, ctx)
	var c *v1.MysqlCluster
	eventually(t, ctx, "the old primary re-seeded by watch", func() error {
		c = getCluster(t, ctx, "rs")
		rb := latestOf(c, orchestrate.OperationRebuild)
		if c.Status.Operation != nil || rb == nil || len(c.Status.ErrantInstances) > 0 {
			return fmt.Errorf("operation %v, rebuild %v, quarantined %+v", c.Status.Operation != nil, rb != nil, c.Status.ErrantInstances)
		}
		return nil
	})
	fo, rb := latestOf(c, orchestrate.OperationFailover), latestOf(c, orchestrate.OperationRebuild)
	t.Logf("failover: %+v\nrebuild: %+v", fo, rb)
	if fo == nil || fo.Result != "Succeeded" || fo.FormerPrimary != "rs-0" || fo.TransactionsLost != 0 || fo.FormerPrimarySeenAt == nil || fo.UnacknowledgedUntil == nil {
		t.Fatalf("the failover record does not carry the semi-sync window: %+v", fo)
	}
	// The tail position is domain-server-seq: what was discarded is exactly that transaction.
	if rb.Result != "Succeeded" || rb.DiscardedGTIDs != tail || !strings.Contains(rb.Message, "proven never acknowledged") {
		t.Fatalf("rebuild %+v, want %s discarded", rb, tail)
	}
	var texts []string
	eventually(t, ctx, "the re-seed's Events", func() error {
		var reasons map[string]bool
		reasons, texts = eventReasons(t, ctx, "rs")
		for _, want := range []string{"ReseedingUnacknowledged", "RebuildFinished"} {
			if !reasons[want] {
				return fmt.Errorf("no %s Event; recorded: %s", want, strings.Join(texts, "\n"))
			}
		}
		return nil
	})
	if w.actions(t, "rebuild", "rebuilding rs-0, discarding "+tail) != 1 {
		t.Errorf("watch did not report the re-seed once:\n%s", w.output())
	}
	np := c.Status.CurrentPrimary
	if np == "rs-0" {
		t.Fatal("the crashed primary is the primary again")
	}
	time.Sleep(2 * time.Second)
	stopWriter()
	wr.mu.Lock()
	acked := append([]int(nil), wr.acked...)
	wr.mu.Unlock()
	if len(acked) < 20 {
		t.Fatalf("only %d writes acknowledged under load", len(acked))
	}
	for _, pod := range pods {
		d := db(t, mustPodAddr(t, ctx, pod), root)
		if pod != np {
			replicatesFrom(t, ctx, pod, np, d)
		}
		holdsAcked(t, ctx, pod, d, acked)
		holdsAckedFrom(t, ctx, pod, d, acked)
		if n := countTail(t, ctx, d); n != 0 {
			t.Errorf("%s holds the discarded transaction", pod)
		}
	}
	if c.Status.Phase != v1.PhaseRunning {
		t.Errorf("phase %s", c.Status.Phase)
	}
	noPasswords(t, secret(t, ctx, "rs"), w.output(), w.stderr(), strings.Join(texts, "\n"))
}

func countTail(t *testing.T, ctx context.Context, d *sql.DB) int {
	t.Helper()
	var n int
	if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.w WHERE id = ?", tailID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
