package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// TestWatchFailoverPastLostReplica (issue 32, item 2): with `watch` running and a writer on the
// primary Service, a replica's pod is lost for good (the node forgets it; the object stays
// Running and Ready). watch records it absent with a bound: the primary's position when it was
// last seen receiving. The primary's kill -9 is then failed over with no command typed, because
// the candidate holds that bound; every acknowledged write is on the new primary.
func TestWatchFailoverPastLostReplica(t *testing.T) {
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "wl", 3)
	defer deleteCluster(t, "wl")
	w := startWatch(t, nil, "wl")
	wr, stopWriter := startWriter(ctx, "wl")
	defer stopWriter()
	w.supervising(t, ctx)
	pdbAllows(t, ctx, "wl", 1) // Healthy, converged, nothing running
	primary := getCluster(t, ctx, "wl").Status.CurrentPrimary
	lost := "wl-2"
	if primary == lost {
		lost = "wl-1"
	}
	loseForGood(t, ctx, lost)
	absentRecorded(t, ctx, "wl", lost)

	next, killed := killPrimaryAndWaitFailover(t, ctx, w, wr, "wl", primary)
	if next == lost {
		t.Fatalf("the lost pod %s was promoted", lost)
	}
	stopWriter()
	checkAcked(t, ctx, root, next, wr)
	failoverEvidenceNames(t, ctx, "wl", lost)
	t.Logf("lost %s, killed %s at %s; new primary %s", lost, primary, killed.UTC().Format("15:04:05.000"), next)
}

// TestWatchFailoverPastLostOldPrimary: the primary's pod is lost for good and watch fails over
// (cooldown 0); the old primary never comes back and stays a member. It is recorded absent with
// the new primary's position at its promotion as its bound (it never received from the new
// primary). The new primary's kill -9 is then failed over automatically too, nothing
// acknowledged lost.
func TestWatchFailoverPastLostOldPrimary(t *testing.T) {
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "wo", 3)
	defer deleteCluster(t, "wo")
	updateSpec(t, ctx, "wo", func(s *v1.MysqlClusterSpec) {
		s.Failover.Cooldown = &metav1.Duration{}
	})
	if res := mysqlctl(t, "reconcile", "wo"); res.code != 0 { // the status describes the new spec
		t.Fatalf("reconcile: %d\n%s", res.code, res.stderr)
	}
	w := startWatch(t, nil, "wo")
	wr, stopWriter := startWriter(ctx, "wo")
	defer stopWriter()
	w.supervising(t, ctx)
	pdbAllows(t, ctx, "wo", 1)
	first := getCluster(t, ctx, "wo").Status.CurrentPrimary

	lostAt := time.Now()
	loseForGood(t, ctx, first)
	second := waitFailoverFrom(t, ctx, w, "wo", first)
	t.Logf("first failover: %s lost, %s promoted; first acknowledged write after %s", first, second, sinceAck(wr, lostAt))
	absentRecorded(t, ctx, "wo", first)
	// The surviving replica follows the new primary before the next death.
	eventually(t, ctx, "a Healthy cluster after the first failover", func() error {
		c := getCluster(t, ctx, "wo")
		if c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy || c.Status.Operation != nil {
			return fmt.Errorf("ha %+v, operation %v", c.Status.HA, c.Status.Operation != nil)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // writes go on through the new primary

	third, _ := killPrimaryAndWaitFailover(t, ctx, w, wr, "wo", second)
	if third == first {
		t.Fatalf("the lost old primary %s was promoted", first)
	}
	stopWriter()
	checkAcked(t, ctx, root, third, wr)
	failoverEvidenceNames(t, ctx, "wo", first)
}

// loseForGood makes the node forget the pod; the pod object is force-deleted when the test
// ends (its node will never confirm a graceful delete), so the cluster can be deleted.
func loseForGood(t *testing.T, ctx context.Context, pod string) {
	t.Helper()
	if err := r.Inject(rig.Lose, "default", pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		err := r.Client.CoreV1().Pods("default").Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Logf("force delete %s: %v", pod, err)
		}
	})
}

// absentRecorded waits until the cluster's status records the pod absent with a bound. Not
// recorded within a minute is an error, but the test goes on: what follows shows what the
// missing record costs.
func absentRecorded(t *testing.T, ctx context.Context, cluster, pod string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c := getCluster(t, ctx, cluster)
		for _, a := range c.Status.AbsentInstances {
			if a.Name == pod && a.Bound != "" {
				t.Logf("%s recorded absent: since %s, bound %s, last seen receiving at %v: %s", a.Name, a.Since.UTC().Format(time.RFC3339), a.Bound, a.ReceivingAt, a.Reason)
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Errorf("%s not recorded absent with a bound: absent instances %+v", pod, c.Status.AbsentInstances)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// explainer is a running watch whose output explains a failure: a process the test started
// (watchProc) or the pods of the in-cluster Deployment (inClusterWatch).
type explainer interface{ output() string }

// waitFailoverFrom waits until a failover away from old finished and returns the new primary.
func waitFailoverFrom(t *testing.T, ctx context.Context, w explainer, cluster, old string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var next string
	var last *v1.MysqlCluster
	for next == "" {
		c := getCluster(t, ctx, cluster)
		last = c
		if c.Status.CurrentPrimary != old && c.Status.Operation == nil {
			next = c.Status.CurrentPrimary
			break
		}
		select {
		case <-cctx.Done():
			t.Fatalf("no automatic failover from %s: primary %s, ha %+v, operation %+v, history %+v\nwatch:\n%s", old, last.Status.CurrentPrimary, last.Status.HA, last.Status.Operation, last.Status.History, w.output())
		case <-time.After(250 * time.Millisecond):
		}
	}
	if h := latestOf(last, orchestrate.OperationFailover); h == nil || h.Result != "Succeeded" {
		t.Fatalf("the latest failover did not succeed: %+v", last.Status.History)
	}
	return next
}

// killPrimaryAndWaitFailover kills the primary with SIGKILL, waits for the automatic failover
// and for the first write acknowledged after the kill, and reports the time between.
func killPrimaryAndWaitFailover(t *testing.T, ctx context.Context, w explainer, wr *writer, cluster, primary string) (string, time.Time) {
	t.Helper()
	killed := time.Now()
	if err := r.Inject(rig.Kill, "default", primary); err != nil {
		t.Fatal(err)
	}
	next := waitFailoverFrom(t, ctx, w, cluster, primary)
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	eventually(t, wctx, "a write acknowledged by the new primary", func() error {
		if _, ok := wr.firstAckAfter(killed); !ok {
			n, last := wr.failures()
			return fmt.Errorf("none yet (%d failed attempts, last: %s)", n, last)
		}
		return nil
	})
	t.Logf("kill -9 of %s at %s to the first acknowledged write on %s: %s", primary, killed.UTC().Format("15:04:05.000"), next, sinceAck(wr, killed))
	return next, killed
}

// sinceAck is the time from t to the first write acknowledged at or after it.
func sinceAck(wr *writer, t time.Time) string {
	a, ok := wr.firstAckAfter(t)
	if !ok {
		return "none"
	}
	return a.Sub(t).Round(time.Millisecond).String()
}

// checkAcked checks, row by row, that every acknowledged write is on the primary, and that
// exactly one live instance is writable.
func checkAcked(t *testing.T, ctx context.Context, root, primary string, wr *writer) {
	t.Helper()
	wr.mu.Lock()
	acked := append([]int(nil), wr.acked...)
	wr.mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	d := db(t, mustPodAddr(t, ctx, primary), root)
	holdsAcked(t, ctx, primary, d, acked)
	rows, err := d.QueryContext(ctx, "SELECT id FROM app.w")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	have := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var lost []int
	for _, id := range acked {
		if !have[id] {
			lost = append(lost, id)
		}
	}
	t.Logf("%d acknowledged writes checked on %s: %d lost", len(acked), primary, len(lost))
	if len(lost) > 0 {
		t.Errorf("acknowledged writes lost: %v", lost)
	}
}

// failoverEvidenceNames checks that the election's recorded evidence (its Event) says why the
// absent member did not block it.
func failoverEvidenceNames(t *testing.T, ctx context.Context, cluster, absent string) {
	t.Helper()
	_, texts := eventReasons(t, ctx, cluster)
	for _, e := range texts {
		if strings.HasPrefix(e, "FenceVerified") {
			t.Logf("%s", e)
		}
	}
	for _, e := range texts {
		if strings.Contains(e, "elected") && strings.Contains(e, absent+": absent") && strings.Contains(e, "bound") {
			t.Logf("%s", e)
			return
		}
	}
	t.Errorf("no election's Event says why the absent %s did not block it:\n%s", absent, strings.Join(texts, "\n"))
}

// TestReconcileLeavesOutLostMember: a replica's pod is lost for good (its object stays Running
// and Ready) and another replica's replication is stopped; `reconcile` repairs what answers (the
// stopped replica replicates again), leaves the lost one out, records it absent with a bound (the
// primary no longer lists it among its replicas) and succeeds: a converge does not need every
// member to answer. A second reconcile writes nothing. Then the primary is killed and a person's
// `failover`, with no --force and no watch, passes the absent member: every acknowledged write
// is on the new primary.
func TestReconcileLeavesOutLostMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "rl", 3)
	defer deleteCluster(t, "rl")
	wr, stopWriter := startWriter(ctx, "rl")
	defer stopWriter()
	loseForGood(t, ctx, "rl-2")
	if _, err := db(t, mustPodAddr(t, ctx, "rl-1"), root).ExecContext(ctx, "STOP SLAVE"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the primary notices the lost replica's connection gone
	res := mysqlctl(t, "reconcile", "rl", "--timeout", "2m")
	if res.code != 0 {
		t.Fatalf("reconcile with a lost member: exit %d\n%s", res.code, res.stderr)
	}
	c := getCluster(t, ctx, "rl")
	if len(c.Status.AbsentInstances) != 1 || c.Status.AbsentInstances[0].Name != "rl-2" || c.Status.AbsentInstances[0].Bound == "" {
		t.Fatalf("absent instances after the converge: %+v", c.Status.AbsentInstances)
	}
	t.Logf("recorded: %+v", c.Status.AbsentInstances[0])
	if h := latestOf(c, orchestrate.OperationConverge); h == nil || h.Result != "Succeeded" || !strings.Contains(h.Message, "rl-2") {
		t.Errorf("the converge's record does not name the member it left out: %+v", h)
	}
	replicatesFrom(t, ctx, "rl-1", "rl-0", db(t, mustPodAddr(t, ctx, "rl-1"), root))
	rv := c.ResourceVersion
	if res := mysqlctl(t, "reconcile", "rl"); res.code != 0 {
		t.Fatalf("second reconcile: exit %d\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "rl"); c.ResourceVersion != rv {
		t.Errorf("a second reconcile with the lost member recorded absent wrote the status: %+v", c.Status.Operation)
	}

	killed := time.Now()
	if err := r.Inject(rig.Kill, "default", "rl-0"); err != nil {
		t.Fatal(err)
	}
	if res := mysqlctl(t, "failover", "rl", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("failover past the absent member: exit %d\n%s", res.code, res.stderr)
	}
	next := getCluster(t, ctx, "rl").Status.CurrentPrimary
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	eventually(t, wctx, "a write acknowledged by the new primary", func() error {
		if _, ok := wr.firstAckAfter(killed); !ok {
			return errors.New("none yet")
		}
		return nil
	})
	t.Logf("kill -9 of rl-0 to the first acknowledged write on %s (failover typed at once): %s", next, sinceAck(wr, killed))
	stopWriter()
	checkAcked(t, ctx, root, next, wr)
	failoverEvidenceNames(t, ctx, "rl", "rl-2")
}
