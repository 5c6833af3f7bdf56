package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// tailID is the row of the transaction no replica receives.
const tailID = 999999

// crashWithUnreceivedTail leaves the cluster's primary (pod-0) crashed and restarted holding one
// transaction no replica received. The supervisor is held (spec.paused: it checks and reports
// only) while the fault is arranged: the replicas' receivers are stopped, a commit waits for an
// acknowledgement that never comes (the client gets no success), and the server is killed; its
// crash recovery commits the transaction. Once the server answers again (read-only), the
// supervisor is released. It returns the tail's GTID position on the primary.
// whilePaused, if set, runs once the server answers again, before the supervisor is released.
func crashWithUnreceivedTail(t *testing.T, ctx context.Context, root, cluster string, whilePaused func()) string {
	t.Helper()
	primary := cluster + "-0"
	replicas := []string{cluster + "-1", cluster + "-2"}
	d0 := db(t, mustPodAddr(t, ctx, primary), root)
	if _, err := d0.ExecContext(ctx, "INSERT INTO app.w VALUES (?)", tailID-1); err != nil {
		t.Fatal(err)
	}
	for _, pod := range replicas {
		holdsAcked(t, ctx, pod, db(t, mustPodAddr(t, ctx, pod), root), []int{tailID - 1})
	}
	setPaused(t, ctx, cluster, true)
	for _, pod := range replicas {
		if _, err := db(t, mustPodAddr(t, ctx, pod), root).ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
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
	if whilePaused != nil {
		whilePaused()
	}
	// Released once the supervisor last saw the primary answer more than three intervals ago:
	// its repairer re-joins replicas to a primary seen answering that recently, and would let
	// them fetch the tail from the restarted server before the failover (a safe outcome, but not
	// the one under test).
	time.Sleep(4 * time.Second)
	setPaused(t, ctx, cluster, false)
	return tail
}

// superviseSettled starts watch on the cluster and waits until it is Healthy and its primary's
// server has run longer than the tail proof tells two server processes apart by (5 s): a process
// started moments before a crash is indistinguishable from its successor.
func superviseSettled(t *testing.T, ctx context.Context, cluster string) *watchProc {
	t.Helper()
	w := startWatch(t, nil, cluster)
	w.supervising(t, ctx)
	eventually(t, ctx, "a healthy supervised cluster", func() error {
		if c := getCluster(t, ctx, cluster); c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy {
			return errors.New("not Healthy yet")
		}
		return nil
	})
	time.Sleep(8 * time.Second)
	return w
}

// setPaused sets the cluster's spec.paused.
func setPaused(t *testing.T, ctx context.Context, cluster string, paused bool) {
	t.Helper()
	updateSpec(t, ctx, cluster, func(s *v1.MysqlClusterSpec) {
		s.Paused = paused
	})
}

// TestWatchReseedsCrashedPrimaryTail: a primary crashes holding a transaction no replica
// received (never acknowledged: semi-sync AFTER_SYNC), and comes back. `watch`, supervising
// from before the crash through the API server as from a workstation, fails over, quarantines the returning old primary with that
// transaction, proves it never acknowledged (the failover proved no acknowledged loss under
// semi-sync; the server answering is not the process its last check found alive, and restarted
// inside the window in which no commit could return unacknowledged; the other members ran since
// before that check; the extra transaction is its own, right after the new primary's last from
// it, and no other member holds it) and re-seeds it with no command typed: the cluster is back
// to three replicating instances, the discarded GTID is in the rebuild's history record and an
// Event, every write acknowledged under load is on every member, and the tail on none.
func TestWatchReseedsCrashedPrimaryTail(t *testing.T) {
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "rs", 3)
	defer deleteCluster(t, "rs")
	pods := []string{"rs-0", "rs-1", "rs-2"}
	w := superviseSettled(t, ctx, "rs")
	tail := crashWithUnreceivedTail(t, ctx, root, "rs", nil)
	wr, stopWriter := startPacedWriter(ctx, "rs", 1, 20*time.Millisecond)
	defer stopWriter()
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
	if fo == nil || fo.Result != "Succeeded" || fo.FormerPrimary != "rs-0" || fo.TransactionsLost != 0 || fo.FormerPrimarySeenAt == nil || fo.UnacknowledgedUntil == nil || fo.FormerPrimaryCheckedAt == nil {
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

// TestWatchKeepsTailWhenAReplicaRestarted is the attack on the re-seed's proof: the same crash,
// but a replica also restarts after it (as when a node fails and takes a primary and a replica
// with it). A replica that restarts loses the relay log it had received but not applied, so it
// may have acknowledged the tail and then lost it: the tail is no longer proven unacknowledged,
// `watch` leaves the old primary quarantined and says why, and a person's `rebuild` (here) or
// decision takes over.
func TestWatchKeepsTailWhenAReplicaRestarted(t *testing.T) {
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "rk", 3)
	defer deleteCluster(t, "rk")
	w := superviseSettled(t, ctx, "rk")
	crashWithUnreceivedTail(t, ctx, root, "rk", func() {
		d2 := db(t, mustPodAddr(t, ctx, "rk-2"), root)
		r.Kill(t, "default", "rk-2")
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
		defer rcancel()
		time.Sleep(500 * time.Millisecond)
		eventually(t, rctx, "rk-2 restarted and Ready", func() error {
			if err := d2.PingContext(rctx); err != nil {
				return err
			}
			p, err := r.Client.CoreV1().Pods("default").Get(rctx, "rk-2", metav1.GetOptions{})
			if err != nil || !podReady(p) {
				return fmt.Errorf("not Ready yet (%v)", err)
			}
			return nil
		})
	})
	eventually(t, ctx, "watch refusing the re-seed", func() error {
		if w.actions(t, "rebuild", "rk-0 stays quarantined for a person") == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	if n := w.actions(t, "rebuild", "did not run since before"); n != 1 {
		t.Errorf("the refusal names the restarted replica %d times, want once:\n%s", n, w.output())
	}
	time.Sleep(3 * repairEveryForTests)
	c := getCluster(t, ctx, "rk")
	if latestOf(c, orchestrate.OperationRebuild) != nil || len(c.Status.ErrantInstances) != 1 || c.Status.ErrantInstances[0].Name != "rk-0" || c.Status.ErrantInstances[0].ReseedStartedAt != nil {
		t.Fatalf("the old primary was re-seeded (or released) without proof: errant %+v, history %+v", c.Status.ErrantInstances, c.Status.History)
	}
	if w.actions(t, "rebuild", "rebuilding rk-0") != 0 {
		t.Fatal("watch began a re-seed")
	}
	// A person decides: the rebuild discards the tail.
	if res := mysqlctl(t, "rebuild", "rk", "rk-0", "--timeout", "3m"); res.code != 0 {
		t.Fatalf("rebuild: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	c = getCluster(t, ctx, "rk")
	if len(c.Status.ErrantInstances) != 0 {
		t.Fatalf("still quarantined after the rebuild: %+v", c.Status.ErrantInstances)
	}
	if rb := latestOf(c, orchestrate.OperationRebuild); rb == nil || rb.DiscardedGTIDs != "" {
		t.Fatalf("a person's rebuild records no proof of its own: %+v", rb)
	}
	if n := countTail(t, ctx, db(t, mustPodAddr(t, ctx, "rk-0"), root)); n != 0 {
		t.Error("rk-0 still holds the tail after its rebuild")
	}
}

// repairEveryForTests is the supervisor's repair round (orchestrate.repairEvery).
const repairEveryForTests = 3 * time.Second
