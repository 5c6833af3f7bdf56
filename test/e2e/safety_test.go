package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// TestDeadPrimaryMidSwitchoverFailoverSupersedes: a switchover stopped at each stage before
// its promotion, and then its primary is lost. The switchover cannot finish or roll back without
// it; a failover takes over, records the switchover as superseded, and ends with a writable
// primary.
func TestDeadPrimaryMidSwitchoverFailoverSupersedes(t *testing.T) {
	for i, stage := range []string{orchestrate.StageValidating, orchestrate.StageFencing, orchestrate.StageWaitingForCandidate} {
		t.Run(stage, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			name := fmt.Sprintf("sup%d", i)
			root := appCluster(t, ctx, name, 2)
			defer deleteCluster(t, name)
			killAt(t, ctx, stage, "switchover", name)
			r.Lose(t, "default", name+"-0")
			defer forceDelete(t, context.Background(), name+"-0")

			res := mysqlctl(t, "failover", name, "--timeout", "2m")
			if res.code != 0 {
				t.Fatalf("failover after the switchover's primary died: exit %d\n%s", res.code, res.stderr)
			}
			c := getCluster(t, ctx, name)
			if c.Status.CurrentPrimary != name+"-1" || c.Status.Operation != nil || len(c.Status.History) < 2 {
				t.Fatalf("primary %s op %+v history %+v", c.Status.CurrentPrimary, c.Status.Operation, c.Status.History)
			}
			if h := c.Status.History[1]; h.Type != orchestrate.OperationSwitchover || h.Result != "Superseded" {
				t.Errorf("the switchover is recorded as %+v, want Superseded", h)
			}
			if h := c.Status.History[0]; h.Type != orchestrate.OperationFailover || h.Result != "Succeeded" {
				t.Errorf("the failover is recorded as %+v", h)
			}
			if readOnly(t, ctx, db(t, mustPodAddr(t, ctx, name+"-1"), root)) {
				t.Errorf("%s-1 is not writable after the failover", name)
			}
			// The superseding failover skips Confirming, whose judgement it made: the death is
			// recorded as an Event all the same.
			reasons, texts := eventReasons(t, ctx, name)
			requireEvents(t, reasons, texts, "PrimaryConfirmedDown", "SwitchoverSuperseded", "Promoted")
			// Two instances: the new primary has nobody to acknowledge, and status says so.
			if cond := metaCondition(c, v1.ConditionSemiSynchronous); cond == nil || cond.Status != metav1.ConditionFalse || c.Status.Phase != v1.PhaseDegraded {
				t.Errorf("a primary with no semi-sync replica: condition %+v phase %s", cond, c.Status.Phase)
			}
		})
	}
}

// TestReceiverFencePastDeadlineRollsBack: a failover stopped after stopping the receivers is
// resumed after the fence's deadline (the old primary's semi-sync timeout): nothing is promoted,
// the receivers run again, and the cluster is Degraded with the reason.
func TestReceiverFencePastDeadlineRollsBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "dl", 3)
	defer deleteCluster(t, "dl")
	r.Lose(t, "default", "dl-0")
	defer forceDelete(t, context.Background(), "dl-0")
	killAt(t, ctx, orchestrate.StageElecting, "failover", "dl")
	c := getCluster(t, ctx, "dl")
	ev := c.Status.Operation.Evidence
	if ev == nil || ev.FenceStartedAt == nil || ev.FenceDeadline == nil || !ev.FenceDeadline.After(time.Now().Add(30*time.Minute)) {
		t.Fatalf("the receiver fence's start and deadline are not recorded: %+v", ev)
	}
	// An hour passes (the resume comes late): the deadline is behind us.
	past := metav1.NewTime(time.Now().Add(-time.Minute))
	if err := orchestrate.UpdateStatus(ctx, kube(t), c, func(s *v1.MysqlClusterStatus) error {
		s.Operation.Evidence.FenceDeadline = &past
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res := mysqlctl(t, "resume", "dl", "--timeout", "2m")
	if res.code != 4 || !strings.Contains(res.stderr, "passed its deadline") {
		t.Errorf("resume past the fence's deadline: exit %d\n%s", res.code, res.stderr)
	}
	c = getCluster(t, ctx, "dl")
	if c.Status.CurrentPrimary != "dl-0" || c.Status.Operation != nil || c.Status.Phase != v1.PhaseDegraded || c.Status.History[0].Result != "Failed" {
		t.Errorf("primary %s op %+v phase %s history %+v", c.Status.CurrentPrimary, c.Status.Operation, c.Status.Phase, c.Status.History[0])
	}
	for _, pod := range []string{"dl-1", "dl-2"} {
		d := db(t, mustPodAddr(t, ctx, pod), root)
		if !readOnly(t, ctx, d) {
			t.Errorf("%s was made writable", pod)
		}
		m, err := slaveStatus(ctx, d)
		if err != nil || m["Slave_IO_Running"] == "No" {
			t.Errorf("%s's receiver was not restarted: %v %v", pod, m["Slave_IO_Running"], err)
		}
	}
}

// TestFrozenReplicaDuringRepointing: the failover is interrupted at Repointing and a replica
// freezes; the resumed failover does not wait for it forever: it finishes, naming the replica.
func TestFrozenReplicaDuringRepointing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "fr", 3)
	defer deleteCluster(t, "fr")
	r.Lose(t, "default", "fr-0")
	defer forceDelete(t, context.Background(), "fr-0")
	killAt(t, ctx, orchestrate.StageRepointing, "failover", "fr")
	cand := getCluster(t, ctx, "fr").Status.Operation.Evidence.Candidate
	other := map[string]string{"fr-1": "fr-2", "fr-2": "fr-1"}[cand]
	r.Freeze(t, "default", other)
	defer r.Thaw(t, "default", other)
	res := mysqlctl(t, "resume", "fr", "--timeout", "3m")
	if res.code != 0 {
		t.Fatalf("resume with a frozen replica: exit %d\n%s", res.code, res.stderr)
	}
	c := getCluster(t, ctx, "fr")
	if h := c.Status.History[0]; h.Result != "Succeeded" || !strings.Contains(h.Message, other) || c.Status.CurrentPrimary != cand {
		t.Errorf("primary %s, history %+v: want success naming %s", c.Status.CurrentPrimary, h, other)
	}
	// Resumed at Repointing, it ends with a writable primary.
	if readOnly(t, ctx, db(t, mustPodAddr(t, ctx, cand), root)) {
		t.Errorf("the new primary %s is not writable", cand)
	}
}

// TestNewPrimaryRestartedDuringVerifying: the new primary restarts (read-only, as every server
// starts) while a switchover is at Verifying; the resumed switchover promotes it again instead
// of calling a cluster with no writable instance a success.
func TestNewPrimaryRestartedDuringVerifying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "rv", 2)
	defer deleteCluster(t, "rv")
	killAt(t, ctx, orchestrate.StageVerifying, "switchover", "rv")
	p := must(r.Client.CoreV1().Pods("default").Get(ctx, "rv-1", metav1.GetOptions{}))
	r.Kill(t, "default", "rv-1")
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
	eventually(t, cctx, "rv-1 restarted", func() error {
		q := must(r.Client.CoreV1().Pods("default").Get(ctx, "rv-1", metav1.GetOptions{}))
		restarts := int32(0)
		for _, s := range q.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
		before := int32(0)
		for _, s := range p.Status.ContainerStatuses {
			before += s.RestartCount
		}
		if restarts == before || !podReady(q) {
			return fmt.Errorf("restarts %d, ready %v", restarts, podReady(q))
		}
		return nil
	})
	ccancel()
	d1 := db(t, mustPodAddr(t, ctx, "rv-1"), root)
	if !readOnly(t, ctx, d1) {
		t.Fatal("the restarted server is writable before anyone promoted it")
	}
	res := mysqlctl(t, "resume", "rv", "--timeout", "2m")
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "switchover "+orchestrate.StagePromoting) {
		t.Errorf("the resumed switchover did not go back to Promoting:\n%s", res.stderr)
	}
	if readOnly(t, ctx, d1) || !readOnly(t, ctx, db(t, mustPodAddr(t, ctx, "rv-0"), root)) {
		t.Errorf("want exactly rv-1 writable")
	}
}

// TestCutPrimaryReturnsWithHungCommits: the primary is cut off the network while clients write,
// so its commits hang waiting for acknowledgements; it is failed over and the network heals.
// The returning old primary still says read_only=0 with commits stuck: reconcile fences it
// first, finishes, leaves no session behind, and an application account cannot write there.
func TestCutPrimaryReturnsWithHungCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "hc", 3)
	defer deleteCluster(t, "hc")
	addr0 := mustPodAddr(t, ctx, "hc-0")
	d0 := db(t, addr0, root)
	r.Cut(t, "default", "hc-0")
	// Direct sessions of the application: the cut primary cannot acknowledge them.
	stop := make(chan struct{})
	defer close(stop)
	for i := range 4 {
		go func() {
			app, err := sql.Open("mysql", rig.DSN(addr0, "app", "app-pass"))
			if err != nil {
				return
			}
			defer func() { _ = app.Close() }()
			for id := 100000 * (i + 1); ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
				_, _ = app.ExecContext(wctx, "INSERT INTO app.w VALUES (?)", id)
				wcancel()
			}
		}()
	}
	if res := mysqlctl(t, "failover", "hc", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("failover of a cut primary: %d\n%s", res.code, res.stderr)
	}
	r.Restore(t, "default", "hc-0")
	if readOnly(t, ctx, d0) {
		t.Log("the old primary was already read-only when the network healed")
	}
	res := mysqlctl(t, "reconcile", "hc", "--timeout", "2m")
	if !reconciled(res) {
		t.Fatalf("reconcile with a returning old primary whose commits hang: exit %d\n%s", res.code, res.stderr)
	}
	if !readOnly(t, ctx, d0) {
		t.Error("the returned old primary is writable after reconcile")
	}
	appDB, err := sql.Open("mysql", rig.DSN(addr0, "app", "app-pass"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = appDB.Close() }()
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = appDB.ExecContext(wctx, "INSERT INTO app.w VALUES (999999)")
	wcancel()
	if err == nil {
		t.Error("an application write was acknowledged by the old primary")
	}
	var hung int
	if err := d0.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE '%semi-sync%' OR INFO LIKE 'SHOW BINARY LOGS%' OR INFO LIKE 'SHOW MASTER%'").Scan(&hung); err != nil {
		t.Fatal(err)
	}
	if hung != 0 {
		t.Errorf("%d hung session(s) left on the old primary", hung)
	}
}

// TestRecreatedPrimaryKeepsItsReplicas: the primary's pod is deleted and comes back with a new
// IP; its replica follows it by name and reconnects with no command run.
func TestRecreatedPrimaryKeepsItsReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "id", 2)
	defer deleteCluster(t, "id")
	before := must(r.Client.CoreV1().Pods("default").Get(ctx, "id-0", metav1.GetOptions{}))
	forceDelete(t, ctx, "id-0")
	waitPodReady(t, ctx, "id-0", string(before.UID))
	after := must(r.Client.CoreV1().Pods("default").Get(ctx, "id-0", metav1.GetOptions{}))
	if after.Status.PodIP == before.Status.PodIP {
		t.Logf("the recreated pod got its old IP %s back", after.Status.PodIP)
	}
	d0 := db(t, mustPodAddr(t, ctx, "id-0"), root)
	// It restarted read-only; open it by hand to see a write travel (no mysqlctl command runs).
	elevated(t, ctx, d0, "SET GLOBAL read_only = OFF")
	if _, err := d0.ExecContext(ctx, "INSERT INTO app.w VALUES (424242)"); err != nil {
		t.Fatal(err)
	}
	replicatesFrom(t, ctx, "id-1", "id-0", db(t, mustPodAddr(t, ctx, "id-1"), root))
	holdsAcked(t, ctx, "id-1", db(t, mustPodAddr(t, ctx, "id-1"), root), []int{424242})
}

// TestReconcileRefreshesPrimaryObservation: the receiver fence's deadline counts from the last
// observation of the primary; a converged reconcile records a fresh one once it is old, so a
// cluster left alone does not become unable to fail over.
func TestReconcileRefreshesPrimaryObservation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	appCluster(t, ctx, "seen", 2)
	defer deleteCluster(t, "seen")
	c := getCluster(t, ctx, "seen")
	stale := metav1.NewTime(time.Now().Add(-30 * time.Hour))
	if err := orchestrate.UpdateStatus(ctx, kube(t), c, func(s *v1.MysqlClusterStatus) error {
		for i := range s.Instances {
			if s.Instances[i].Name == "seen-0" {
				s.Instances[i].LastSeen = &stale
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if res := mysqlctl(t, "reconcile", "seen", "--timeout", "1m"); res.code != 0 {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	for _, i := range getCluster(t, ctx, "seen").Status.Instances {
		if i.Name == "seen-0" && (i.LastSeen == nil || time.Since(i.LastSeen.Time) > time.Minute || !i.SemiSyncSource) {
			t.Errorf("the primary's observation was not refreshed: lastSeen %v, semi-sync source %v", i.LastSeen, i.SemiSyncSource)
		}
	}
}

// TestCandidateFrozenAtPromoting: a switchover stops at Promoting and its candidate freezes. The
// candidate may already be writable, so nothing else may be promoted and the old primary may not
// be reopened: resume waits out the stage's bound, then stops with exit 4, the cluster Degraded
// with what to do, the candidate out of every Service and the operation kept at Promoting. Then
// either the candidate thaws and resume finishes, or it restarts (read-only) and abort rolls
// back; both end with exactly one writable instance.
func TestCandidateFrozenAtPromoting(t *testing.T) {
	t.Parallel() // mostly waiting (Lease expiry, restarts): runs beside another such test, after the serial ones
	for _, way := range []string{"thaw-resume", "restart-abort"} {
		t.Run(way, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			name := "cf" + way[:1]
			pods := []string{name + "-0", name + "-1", name + "-2"}
			root := appCluster(t, ctx, name, 3)
			defer deleteCluster(t, name)
			old := getCluster(t, ctx, name).Status.CurrentPrimary
			killAt(t, ctx, orchestrate.StagePromoting, "switchover", name)
			c := getCluster(t, ctx, name)
			if c.Status.Operation == nil || c.Status.Operation.Evidence == nil || c.Status.Operation.Evidence.Candidate == "" {
				t.Fatalf("no switchover with a candidate recorded at Promoting: %+v", c.Status.Operation)
			}
			cand := c.Status.Operation.Evidence.Candidate
			r.Freeze(t, "default", cand)
			start := time.Now()
			res := mysqlctl(t, "resume", name, "--timeout", "3m")
			if res.code != 4 || !strings.Contains(res.stderr, "stopped answering") {
				t.Fatalf("resume with a frozen candidate: want exit 4 naming it, got %d after %s\n%s", res.code, time.Since(start).Round(time.Second), res.stderr)
			}
			c = getCluster(t, ctx, name)
			if c.Status.Phase != v1.PhaseDegraded || c.Status.Operation == nil || c.Status.Operation.Stage != orchestrate.StagePromoting {
				t.Fatalf("after the bound: phase %s, operation %+v; want Degraded with the switchover kept at Promoting", c.Status.Phase, c.Status.Operation)
			}
			if d := metaCondition(c, v1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, cand) {
				t.Errorf("Degraded condition does not name the candidate: %+v", d)
			}
			if l := roleLabels(t, ctx, cand); strings.Contains(l, "replica") || strings.Contains(l, "primary") {
				t.Errorf("the candidate that may be writable is still in a Service: %s", l)
			}
			if !readOnly(t, ctx, db(t, mustPodAddr(t, ctx, old), root)) {
				t.Error("the old primary was reopened while the candidate may be writable")
			}
			want := cand
			if way == "thaw-resume" {
				r.Thaw(t, "default", cand)
				if res := mysqlctl(t, "resume", name, "--timeout", "3m"); res.code != 0 {
					t.Fatalf("resume after the candidate thawed: %d\n%s", res.code, res.stderr)
				}
			} else {
				if res := mysqlctl(t, "abort", name); res.code != 4 {
					t.Errorf("abort while the candidate is frozen: want exit 4, got %d\n%s", res.code, res.stderr)
				}
				r.Thaw(t, "default", cand)
				if err := r.Inject(rig.Kill, "default", cand); err != nil {
					t.Fatal(err)
				}
				eventually(t, ctx, "the candidate answers read-only after its restart", func() error {
					var ro int
					if err := db(t, mustPodAddr(t, ctx, cand), root).QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
						return err
					}
					if ro != 1 {
						return fmt.Errorf("writable")
					}
					return nil
				})
				if res := mysqlctl(t, "abort", name); res.code != 0 {
					t.Fatalf("abort with the candidate restarted read-only: %d\n%s", res.code, res.stderr)
				}
				want = old
			}
			c = getCluster(t, ctx, name)
			if c.Status.CurrentPrimary != want || c.Status.Operation != nil {
				t.Errorf("after the way out: primary %s, operation %+v; want %s and none", c.Status.CurrentPrimary, c.Status.Operation, want)
			}
			if n := writableCount(t, ctx, root, pods...); n != 1 {
				t.Errorf("%d writable instances, want 1", n)
			}
		})
	}
}
