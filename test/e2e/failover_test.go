package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// appCluster creates a cluster with an application account (no READ ONLY ADMIN: read_only
// stops it, as it stops every real application account) and its table.
func appCluster(t *testing.T, ctx context.Context, name string, replicas int, createArgs ...string) string {
	t.Helper()
	began := time.Now()
	res := mysqlctl(t, append([]string{"create", name, "--image", "mariadb:10.11", "--replicas", fmt.Sprint(replicas), "--storage-size", "128Mi", "--wait", "--timeout", "4m"}, createArgs...)...)
	if res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	if took := time.Since(began); took > time.Minute {
		// Seconds on an idle rig: a slow one shows where the time went.
		t.Logf("create %s took %s:\n%s", name, took.Round(time.Second), res.stderr)
	}
	sec := secret(t, ctx, name)
	root := string(sec.Data[specs.SecretRootPassword])
	// The application account exists (bootstrap creates it with a generated password); the
	// tests set a known one, in the Secret first: the Secret is the source of truth that every
	// converge (reconcile, watch's repairs) applies.
	sec.Data[specs.SecretAppPassword] = []byte("app-pass")
	if err := kube(t).Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE DATABASE app", "CREATE TABLE app.w (id INT PRIMARY KEY)", "ALTER USER app@'%' IDENTIFIED BY 'app-pass'",
	} {
		if _, err := db(t, mustPodAddr(t, ctx, name+"-0"), root).ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// startWriter runs a writer through the cluster's primary Service until the returned stop.
func startWriter(ctx context.Context, cluster string) (*writer, func()) {
	return startWriterAt(ctx, cluster, 1)
}

// startWriterAt starts the writer at id start, so that runs on one table never collide.
func startWriterAt(ctx context.Context, cluster string, start int) (*writer, func()) {
	return startPacedWriter(ctx, cluster, start, 0)
}

// startPacedWriter is startWriterAt with a pause after each acknowledged write.
func startPacedWriter(ctx context.Context, cluster string, start int, pace time.Duration) (*writer, func()) {
	return startWriterWith(ctx, cluster, &writer{start: start, pace: pace})
}

// startWriterWith runs w (its start, pace and timeout set by the caller) through the cluster's
// primary Service.
func startWriterWith(ctx context.Context, cluster string, w *writer) (*writer, func()) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(wctx, cluster+"-primary", "app-pass") }()
	return w, func() { cancel(); wg.Wait() }
}

// firstAckAfter is the first acknowledged write at or after t.
func (w *writer) firstAckAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ackAfter(t)
}

// firstAckElsewhere is the first write acknowledged at or after t by a server other than addr
// (zero when none was).
func (w *writer) firstAckElsewhere(t time.Time, addr string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, a := range w.ackTimes {
		if !a.Before(t) && w.ackAddrs[i] != addr {
			return a
		}
	}
	return time.Time{}
}

func (w *writer) ackAfter(t time.Time) (time.Time, bool) {
	for _, a := range w.ackTimes {
		if !a.Before(t) {
			return a, true
		}
	}
	return time.Time{}, false
}

// forceDelete removes a lost pod's object (its node will never confirm the graceful delete), so
// that the StatefulSet recreates it on its volume: the old primary returns.
func forceDelete(t *testing.T, ctx context.Context, pod string) {
	t.Helper()
	zero := int64(0)
	if err := r.Client.CoreV1().Pods("default").Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("force delete %s: %v", pod, err)
	}
}

func waitPodReady(t *testing.T, ctx context.Context, pod string, oldUID string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	eventually(t, cctx, pod+" back and Ready", func() error {
		p, err := r.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(p.UID) == oldUID || !podReady(p) {
			return fmt.Errorf("not yet (uid %s, phase %s)", p.UID, p.Status.Phase)
		}
		return nil
	})
}

// holdAppliers makes the appliers of the pods' servers wait: one session on each holds FLUSH
// TABLES WITH READ LOCK, so what the primary commits next is received, and acknowledged by
// semi-sync, but not applied. The candidate of a failover started now has a relay log to apply:
// WaitingForRelayLog has work to do. The returned function releases the locks (idempotent).
func holdAppliers(t *testing.T, ctx context.Context, root string, pods ...string) (release func()) {
	t.Helper()
	var conns []*sql.Conn
	release = func() {
		for _, c := range conns {
			_, _ = c.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
			_ = c.Close()
		}
		conns = nil
	}
	t.Cleanup(release)
	for _, p := range pods {
		c, err := db(t, mustPodAddr(t, ctx, p), root).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
			t.Fatalf("hold the applier of %s: %v", p, err)
		}
	}
	return release
}

// lagsBehind waits until one of the pods' servers has received more than it has applied (the
// most advanced replica, which a failover elects, holds the last acknowledged write).
func lagsBehind(t *testing.T, ctx context.Context, root string, pods ...string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dbs := map[string]*sql.DB{}
	for _, p := range pods {
		dbs[p] = db(t, mustPodAddr(t, ctx, p), root)
	}
	eventually(t, cctx, "a replica holds received transactions it has not applied", func() error {
		var seen []string
		for _, p := range pods {
			d := dbs[p]
			m, err := slaveStatus(ctx, d)
			if err != nil {
				return err
			}
			io := m["Gtid_IO_Pos"]
			if io == "" {
				seen = append(seen, p+" received nothing")
				continue
			}
			// -1: what it received is not applied (the wait times out at once).
			var waited int
			if err := d.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 0)", io).Scan(&waited); err != nil {
				return err
			}
			if waited == -1 {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s has applied all it received (%s)", p, io))
		}
		return errors.New(strings.Join(seen, "; "))
	})
}

// readOnly reports @@read_only of a pod's server.
func readOnly(t *testing.T, ctx context.Context, d *sql.DB) bool {
	t.Helper()
	var ro int
	if err := d.QueryRowContext(ctx, "SELECT @@read_only").Scan(&ro); err != nil {
		t.Fatal(err)
	}
	return ro == 1
}

// holdsAcked waits until the server holds every acknowledged write.
func holdsAcked(t *testing.T, ctx context.Context, pod string, d *sql.DB, acked []int) {
	t.Helper()
	if len(acked) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	eventually(t, cctx, pod+" holds every acknowledged write", func() error {
		var n int
		if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.w WHERE id <= ?", acked[len(acked)-1]).Scan(&n); err != nil {
			return err
		}
		if n < len(acked) {
			return fmt.Errorf("%d of %d acknowledged rows", n, len(acked))
		}
		return nil
	})
}

// replicatesFrom waits until the pod's server replicates from the primary pod with both threads.
func replicatesFrom(t *testing.T, ctx context.Context, pod, primary string, d *sql.DB) {
	t.Helper()
	host := podHost(primary)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	eventually(t, cctx, pod+" replicates from "+primary, func() error {
		m, err := slaveStatus(ctx, d)
		if err != nil {
			return err
		}
		if m["Master_Host"] != host || m["Slave_IO_Running"] != "Yes" || m["Slave_SQL_Running"] != "Yes" {
			return fmt.Errorf("source %s IO %s SQL %s %s %s", m["Master_Host"], m["Slave_IO_Running"], m["Slave_SQL_Running"], m["Last_IO_Error"], m["Last_SQL_Error"])
		}
		return nil
	})
}

// podHost is the stable DNS name replicas use for a pod of a cluster in the default namespace.
func podHost(pod string) string {
	cluster := pod[:strings.LastIndexByte(pod, '-')]
	return specs.PodHost(&v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: "default"}}, pod)
}

// slaveStatus reads SHOW SLAVE STATUS as column → value.
func slaveStatus(ctx context.Context, d *sql.DB) (map[string]string, error) {
	rows, err := d.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		return nil, fmt.Errorf("no replication configured")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for i, c := range cols {
		m[c] = vals[i].String
	}
	return m, rows.Err()
}

// eventReasons lists the reasons of the Events mysqlctl recorded on the cluster, with their texts.
func eventReasons(t *testing.T, ctx context.Context, cluster string) (map[string]bool, []string) {
	t.Helper()
	list, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + cluster})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	var texts []string
	for _, e := range list.Items {
		if e.Source.Component == orchestrate.EventSource {
			reasons[e.Reason] = true
			texts = append(texts, e.Reason+": "+e.Message)
		}
	}
	return reasons, texts
}

func requireEvents(t *testing.T, reasons map[string]bool, texts []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !reasons[w] {
			t.Errorf("no %s Event; recorded:\n%s", w, strings.Join(texts, "\n"))
		}
	}
}

// TestFailoverAfterPrimaryLoss: the primary's pod is lost (its processes die, nothing restarts
// them, the pod object keeps saying Running) while a client writes, and one replica holds an
// errant write. `failover` confirms the death with the replicas, fences by stopping their
// receivers, elects the clean replica, never the errant one, which it quarantines; every
// acknowledged write survives, exactly one instance is writable. When the old primary returns,
// reconcile rejoins it as a replica (its history is contained in the new primary's).
func TestFailoverAfterPrimaryLoss(t *testing.T) {
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "fl", 3)
	defer deleteCluster(t, "fl")
	// An errant write on fl-2 (root bypasses read_only on MariaDB).
	elevated(t, ctx, db(t, mustPodAddr(t, ctx, "fl-2"), root), "CREATE DATABASE rogue")
	// The plan while the primary is alive: refused, nothing changed.
	if res := mysqlctl(t, "failover", "fl", "--dry-run"); res.code != 4 || !strings.Contains(res.stderr, "writable") {
		t.Errorf("dry run on a live primary: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if res := mysqlctl(t, "failover", "fl"); res.code != 4 || !strings.Contains(res.stderr, "use switchover") {
		t.Errorf("failover of a live primary: exit %d\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "fl"); c.Status.CurrentPrimary != "fl-0" || c.Status.Operation != nil {
		t.Fatalf("a refused failover changed the cluster: %+v", c.Status)
	}

	w, stop := startWriter(ctx, "fl")
	time.Sleep(time.Second)
	oldUID := string(must(r.Client.CoreV1().Pods("default").Get(ctx, "fl-0", metav1.GetOptions{})).UID)
	lostAt := time.Now()
	r.Lose(t, "default", "fl-0")
	plan := mysqlctl(t, "failover", "fl", "--dry-run", "-o", "json")
	res := mysqlctl(t, "failover", "fl", "--timeout", "2m")
	if res.code != 0 {
		stop()
		t.Fatalf("failover: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	eventually(t, actx, "a write acknowledged after the failover\n"+res.stderr, func() error {
		if _, ok := w.firstAckAfter(lostAt); !ok {
			n, last := w.failures()
			return fmt.Errorf("none yet (%d failed attempts, last: %s)", n, last)
		}
		return nil
	})
	acancel()
	time.Sleep(500 * time.Millisecond)
	stop()
	t.Logf("dry run before the failover:\n%s%s", plan.stdout, plan.stderr)
	if !strings.Contains(plan.stdout, `"candidate": "fl-1"`) {
		t.Errorf("dry run did not plan fl-1:\n%s%s", plan.stdout, plan.stderr)
	}
	firstAck, ok := w.firstAckAfter(lostAt)
	if !ok {
		t.Fatal("no write was acknowledged after the failover")
	}
	t.Logf("primary lost → first acknowledged write: %s (%d acknowledged, %d failed attempts)\n%s", firstAck.Sub(lostAt).Round(time.Millisecond), len(w.acked), w.errors, res.stderr)

	c := getCluster(t, ctx, "fl")
	if c.Status.CurrentPrimary != "fl-1" || c.Status.Operation != nil {
		t.Fatalf("primary %s, operation %+v", c.Status.CurrentPrimary, c.Status.Operation)
	}
	if h := c.Status.History[0]; h.Type != orchestrate.OperationFailover || h.Result != "Succeeded" || h.TransactionsLost != 0 {
		t.Errorf("history %+v", h)
	}
	if len(c.Status.ErrantInstances) != 1 || c.Status.ErrantInstances[0].Name != "fl-2" || c.Status.ErrantInstances[0].Count < 1 {
		t.Errorf("errant instances %+v", c.Status.ErrantInstances)
	}
	if p := must(r.Client.CoreV1().Pods("default").Get(ctx, "fl-2", metav1.GetOptions{})); p.Labels[specs.LabelRole] != string(v1.RoleQuarantined) {
		t.Errorf("fl-2 labelled %q", p.Labels[specs.LabelRole])
	}
	reasons, texts := eventReasons(t, ctx, "fl")
	requireEvents(t, reasons, texts, "FailoverStarted", "PrimaryConfirmedDown", "FenceVerified", "CandidateElected", "Promoted", "Quarantined", "FailoverSucceeded")
	if !strings.Contains(strings.Join(texts, "\n"), "fl-2: errant") {
		t.Errorf("the election's Event does not say why fl-2 was rejected:\n%s", strings.Join(texts, "\n"))
	}
	noPasswords(t, secret(t, ctx, "fl"), res.stdout, res.stderr, plan.stdout, plan.stderr, strings.Join(texts, "\n"), fmt.Sprintf("%+v", c.Status))

	d1, d2 := db(t, mustPodAddr(t, ctx, "fl-1"), root), db(t, mustPodAddr(t, ctx, "fl-2"), root)
	if readOnly(t, ctx, d1) || !readOnly(t, ctx, d2) {
		t.Errorf("want exactly fl-1 writable")
	}
	holdsAcked(t, ctx, "fl-1", d1, w.acked)

	// The old primary returns read-only. It may hold a transaction it wrote to its binlog but
	// that no replica received when it died (never acknowledged): then reconcile quarantines it
	// with that divergence; otherwise it proves the history contained and rejoins it.
	forceDelete(t, ctx, "fl-0")
	waitPodReady(t, ctx, "fl-0", oldUID)
	d0 := db(t, mustPodAddr(t, ctx, "fl-0"), root)
	if !readOnly(t, ctx, d0) {
		t.Error("the returning old primary is writable")
	}
	extra := rowsMissingOn(t, ctx, d0, d1)
	acked := map[int]bool{}
	for _, id := range w.acked {
		acked[id] = true
	}
	for _, id := range extra {
		if acked[id] {
			t.Errorf("acknowledged write %d is on the old primary only", id)
		}
	}
	rec := mysqlctl(t, "reconcile", "fl", "--timeout", "2m")
	if !reconciled(rec) {
		t.Fatalf("reconcile: %d %s", rec.code, rec.stderr)
	}
	c = getCluster(t, ctx, "fl")
	t.Logf("old primary returned with %d unacknowledged row(s) %v; errant after reconcile: %+v", len(extra), extra, c.Status.ErrantInstances)
	// Rows alone cannot tell: the writer retries an unacknowledged id on the new primary, so
	// the old primary's copy of that row is a different transaction. The GTIDs decide.
	if quarantined := slices.ContainsFunc(c.Status.ErrantInstances, func(e v1.ErrantInstance) bool { return e.Name == "fl-0" }); quarantined || len(extra) > 0 {
		if !quarantined || c.Status.ErrantInstances[1].Count < max(1, int64(len(extra))) {
			t.Errorf("a divergent old primary was not quarantined with its transactions: %+v", c.Status.ErrantInstances)
		}
		if showsReplication(ctx, t, d0) {
			t.Error("the divergent old primary was rejoined")
		}
		return
	}
	replicatesFrom(t, ctx, "fl-0", "fl-1", d0)
	holdsAcked(t, ctx, "fl-0", d0, w.acked)
	if len(c.Status.ErrantInstances) != 1 {
		t.Errorf("after the return: errant %+v", c.Status.ErrantInstances)
	}
}

// rowsMissingOn lists the app.w ids a holds and b does not.
func rowsMissingOn(t *testing.T, ctx context.Context, a, b *sql.DB) []int {
	t.Helper()
	ids := func(d *sql.DB) map[int]bool {
		rows, err := d.QueryContext(ctx, "SELECT id FROM app.w")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int]bool{}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out[id] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	have, other := ids(a), ids(b)
	var out []int
	for id := range have {
		if !other[id] {
			out = append(out, id)
		}
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestFailoverAfterFreezeQuarantinesReturningPrimary: the primary holds a transaction no
// replica received (their receivers were stopped, so semi-sync never acknowledged it), then
// freezes. `failover` confirms the death (the replicas lost it), promotes a replica and loses
// nothing acknowledged. When the old primary thaws it is still writable and holds the
// unacknowledged transaction: reconcile puts it read-only and quarantines it with that
// divergent transaction, never rejoining it.
func TestFailoverAfterFreezeQuarantinesReturningPrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "ff", 3)
	defer deleteCluster(t, "ff")
	d0 := db(t, mustPodAddr(t, ctx, "ff-0"), root)
	if _, err := d0.ExecContext(ctx, "INSERT INTO app.w VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"ff-1", "ff-2"} {
		d := db(t, mustPodAddr(t, ctx, pod), root)
		holdsAcked(t, ctx, pod, d, []int{1})
		if _, err := d.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	// Never acknowledged: no replica receives it.
	uctx, ucancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err := d0.ExecContext(uctx, "INSERT INTO app.w VALUES (2)")
	ucancel()
	if err == nil {
		t.Fatal("a commit was acknowledged with no replica receiving")
	}
	r.Freeze(t, "default", "ff-0")
	// Receivers stopped cleanly (a maintenance STOP SLAVE) say nothing about the primary: the
	// failover is refused, and the refusal changes nothing but an Event.
	before := getCluster(t, ctx, "ff")
	res := mysqlctl(t, "failover", "ff", "--timeout", "2m")
	if after := getCluster(t, ctx, "ff"); res.code != 4 || after.Status.Phase != before.Status.Phase || len(after.Status.History) != len(before.Status.History) || after.Status.Operation != nil {
		t.Fatalf("failover with receivers stopped cleanly: exit %d, phase %s → %s, history %d → %d, op %+v\n%s",
			res.code, before.Status.Phase, after.Status.Phase, len(before.Status.History), len(after.Status.History), after.Status.Operation, res.stderr)
	}
	// Started again, they try the frozen primary and lose it: now its death is corroborated.
	for _, pod := range []string{"ff-1", "ff-2"} {
		if _, err := db(t, mustPodAddr(t, ctx, pod), root).ExecContext(ctx, "START SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	res = mysqlctl(t, "failover", "ff", "--timeout", "2m")
	if res.code != 0 {
		t.Fatalf("failover: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("failover of a frozen primary:\n%s%s", res.stdout, res.stderr)
	c := getCluster(t, ctx, "ff")
	np := c.Status.CurrentPrimary
	if np == "ff-0" || c.Status.History[0].Result != "Succeeded" || c.Status.History[0].TransactionsLost != 0 {
		t.Fatalf("primary %s history %+v", np, c.Status.History[0])
	}
	dn := db(t, mustPodAddr(t, ctx, np), root)
	holdsAcked(t, ctx, np, dn, []int{1})

	r.Thaw(t, "default", "ff-0")
	if res := mysqlctl(t, "reconcile", "ff", "--timeout", "2m"); !reconciled(res) {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	c = getCluster(t, ctx, "ff")
	if len(c.Status.ErrantInstances) != 1 || c.Status.ErrantInstances[0].Name != "ff-0" || c.Status.ErrantInstances[0].Count < 1 || c.Status.Phase != v1.PhaseDegraded {
		t.Fatalf("after the return: phase %s errant %+v", c.Status.Phase, c.Status.ErrantInstances)
	}
	t.Logf("quarantined: %+v", c.Status.ErrantInstances[0])
	if !readOnly(t, ctx, d0) {
		t.Error("the returned old primary is still writable")
	}
	if showsReplication(ctx, t, d0) {
		t.Error("the divergent old primary was rejoined")
	}
	writable := 0
	for _, pod := range []string{"ff-0", "ff-1", "ff-2"} {
		if !readOnly(t, ctx, db(t, mustPodAddr(t, ctx, pod), root)) {
			writable++
		}
	}
	if writable != 1 {
		t.Errorf("%d writable instances", writable)
	}
	var n int
	if err := dn.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.w WHERE id = 2").Scan(&n); err != nil || n != 0 {
		t.Errorf("the unacknowledged row is on the new primary (%d, %v)", n, err)
	}
}

// TestFailoverNoSafeCandidate: the only replica holds an errant write and the primary is lost:
// no promotion, the cluster is Degraded with the reason persisted, exit code 4. A second actor
// is refused with exit code 5 first.
func TestFailoverNoSafeCandidate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "fn", 2)
	defer deleteCluster(t, "fn")
	elevated(t, ctx, db(t, mustPodAddr(t, ctx, "fn-1"), root), "CREATE DATABASE rogue")
	r.Lose(t, "default", "fn-0")
	defer forceDelete(t, context.Background(), "fn-0")

	c := getCluster(t, ctx, "fn")
	_, lease, err := orchestrate.AcquireLease(ctx, kube(t), c, "someone-else", orchestrate.LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := mysqlctl(t, "failover", "fn")
	lease.Release(ctx)
	if res.code != 5 || !strings.Contains(res.stderr, "someone-else") {
		t.Errorf("second actor: exit %d %s", res.code, res.stderr)
	}

	res = mysqlctl(t, "failover", "fn", "--timeout", "2m")
	if res.code != 4 || !strings.Contains(res.stderr, "no replica is provably safe") {
		t.Fatalf("failover: exit %d\n%s", res.code, res.stderr)
	}
	c = getCluster(t, ctx, "fn")
	deg := metaCondition(c, v1.ConditionDegraded)
	if c.Status.Phase != v1.PhaseDegraded || c.Status.CurrentPrimary != "fn-0" || deg == nil || !strings.Contains(deg.Message, "errant") {
		t.Errorf("phase %s primary %s degraded %+v", c.Status.Phase, c.Status.CurrentPrimary, deg)
	}
	if h := c.Status.History[0]; h.Result != "Failed" || !strings.Contains(h.Message, "nothing was promoted") {
		t.Errorf("history %+v", h)
	}
	if !readOnly(t, ctx, db(t, mustPodAddr(t, ctx, "fn-1"), root)) {
		t.Error("fn-1 was made writable")
	}
}

func metaCondition(c *v1.MysqlCluster, typ string) *metav1.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == typ {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// TestFailoverResumesAfterKillAtEveryStage loses the primary's pod (its processes die, nothing
// restarts them), then SIGKILLs the failover CLI while it holds at each failover stage; `resume`
// finishes from the recorded stage every time, with exactly one writable instance and every
// acknowledged write present. The lost pod then returns and reconcile rejoins it. Abort is
// exercised too: refused past promotion, a rollback before it.
func TestFailoverResumesAfterKillAtEveryStage(t *testing.T) {
	t.Parallel() // mostly waiting (Lease expiry, restarts): runs beside another such test, after the serial ones
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "fk", 3)
	defer deleteCluster(t, "fk")
	pods := []string{"fk-0", "fk-1", "fk-2"}
	// While its applier is held (WaitingForRelayLog below) a candidate's lag grows: the
	// default bound (30s) could reject it on a slow machine.
	updateSpec(t, ctx, "fk", func(s *v1.MysqlClusterSpec) {
		s.Failover.MaxCandidateLag = &metav1.Duration{Duration: 5 * time.Minute}
	})
	crash := func(i int) (string, string) {
		primary := getCluster(t, ctx, "fk").Status.CurrentPrimary
		if _, err := db(t, mustPodAddr(t, ctx, primary), root).ExecContext(ctx, "INSERT INTO app.w VALUES (?)", i); err != nil {
			t.Fatalf("write %d on primary %s: %v", i, primary, err)
		}
		uid := string(must(r.Client.CoreV1().Pods("default").Get(ctx, primary, metav1.GetOptions{})).UID)
		r.Lose(t, "default", primary)
		return primary, uid
	}
	// bringBack returns the lost old primary and rejoins it.
	bringBack := func(pod, uid string) {
		forceDelete(t, ctx, pod)
		waitPodReady(t, ctx, pod, uid)
		if res := mysqlctl(t, "reconcile", "fk", "--timeout", "2m"); res.code != 0 {
			t.Fatalf("reconcile after %s returned: %d %s", pod, res.code, res.stderr)
		}
	}
	check := func(stage, before string, n int) {
		c := getCluster(t, ctx, "fk")
		if c.Status.Operation != nil || c.Status.CurrentPrimary == before || len(c.Status.ErrantInstances) != 0 {
			t.Fatalf("after %s: primary %s → %s, op %+v, errant %+v", stage, before, c.Status.CurrentPrimary, c.Status.Operation, c.Status.ErrantInstances)
		}
		writable := 0
		for _, pod := range pods {
			d := db(t, mustPodAddr(t, ctx, pod), root)
			if !readOnly(t, ctx, d) {
				writable++
			} else {
				replicatesFrom(t, ctx, pod, c.Status.CurrentPrimary, d)
			}
			holdsAcked(t, ctx, pod, d, seq(n))
		}
		if writable != 1 {
			t.Fatalf("after %s: %d writable instances", stage, writable)
		}
	}
	i := 0
	for _, stage := range orchestrate.FailoverStages {
		i++
		// Only a candidate with a relay log left to apply waits at WaitingForRelayLog; one that
		// has applied everything goes from Electing straight to Promoting.
		release := func() {}
		var held []string
		if stage == orchestrate.StageWaitingForRelayLog {
			held = replicasOf(pods, getCluster(t, ctx, "fk").Status.CurrentPrimary)
			release = holdAppliers(t, ctx, root, held...)
		}
		before, uid := crash(i)
		if held != nil {
			lagsBehind(t, ctx, root, held...)
		}
		out := killAt(t, ctx, stage, "failover", "fk")
		release()
		c := getCluster(t, ctx, "fk")
		if c.Status.Operation == nil || c.Status.Operation.Stage != stage {
			t.Fatalf("killed at %s, recorded %+v\n%s", stage, c.Status.Operation, out)
		}
		if stage == orchestrate.StagePromoting {
			// The candidate had applied the one write seconds before the failover elected it:
			// nothing to wait for.
			ev := c.Status.Operation.Evidence
			if ev == nil || !strings.Contains(ev.CandidateReason, "WaitingForRelayLog is skipped") || strings.Contains(out, "failover "+orchestrate.StageWaitingForRelayLog) {
				t.Errorf("the failover waited for a relay log with nothing in it: evidence %+v\n%s", ev, out)
			}
		}
		res := mysqlctl(t, "resume", "fk", "--timeout", "2m")
		if res.code != 0 {
			t.Fatalf("resume after kill at %s: %d\n%s", stage, res.code, res.stderr)
		}
		if !strings.Contains(res.stderr, "failover "+stage) {
			t.Errorf("resume did not start at %s:\n%s", stage, res.stderr)
		}
		if h := getCluster(t, ctx, "fk").Status.History[0]; h.Result != "Succeeded" || h.TransactionsLost != 0 {
			t.Fatalf("after resume at %s: history %+v", stage, h)
		}
		bringBack(before, uid)
		check(stage, before, i)
	}

	// Abort past promotion is refused; resume finishes.
	i++
	before, uid := crash(i)
	killAt(t, ctx, orchestrate.StageMovingPrimary, "failover", "fk")
	if res := mysqlctl(t, "abort", "fk", "--timeout", "1m"); res.code != 4 || !strings.Contains(res.stderr, "past promotion") {
		t.Errorf("abort past promotion: exit %d %s", res.code, res.stderr)
	}
	if res := mysqlctl(t, "resume", "fk", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("resume: %d %s", res.code, res.stderr)
	}
	bringBack(before, uid)
	check("abort refused", before, i)

	// Abort before promotion rolls back: the receivers run again, the old primary is back in
	// the primary Service, nothing was promoted, the cluster says Degraded. When the old
	// primary returns, reconcile finds it read-only: a new failover then succeeds.
	i++
	before, uid = crash(i)
	killAt(t, ctx, orchestrate.StageElecting, "failover", "fk")
	res := mysqlctl(t, "abort", "fk", "--timeout", "1m")
	if res.code != 0 {
		t.Fatalf("abort: %d %s", res.code, res.stderr)
	}
	c := getCluster(t, ctx, "fk")
	if c.Status.Operation != nil || c.Status.CurrentPrimary != before || c.Status.History[0].Result != "Aborted" || c.Status.Phase != v1.PhaseDegraded {
		t.Fatalf("after abort: op %+v primary %s history %+v phase %s", c.Status.Operation, c.Status.CurrentPrimary, c.Status.History[0], c.Status.Phase)
	}
	if p := must(r.Client.CoreV1().Pods("default").Get(ctx, before, metav1.GetOptions{})); p.Labels[specs.LabelRole] != string(v1.RolePrimary) {
		t.Errorf("%s labelled %q after abort", before, p.Labels[specs.LabelRole])
	}
	for _, pod := range pods {
		if pod == before {
			continue
		}
		m, err := slaveStatus(ctx, db(t, mustPodAddr(t, ctx, pod), root))
		if err != nil {
			t.Fatal(err)
		}
		if m["Slave_IO_Running"] == "No" {
			t.Errorf("%s receiver not restarted by abort", pod)
		}
	}
	if res := mysqlctl(t, "failover", "fk", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("failover after abort: %d %s", res.code, res.stderr)
	}
	bringBack(before, uid)
	check("failover after abort", before, i)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// TestFailoverAfterFreezeUnderWrites: the primary freezes while a client writes; the replicas'
// receivers still look connected until their net timeout, so `failover` keeps checking until
// they agree, then fails over. Nothing acknowledged is lost. When the primary thaws it is
// still writable: reconcile fences it and either rejoins or quarantines it, leaving exactly one
// writable instance.
func TestFailoverAfterFreezeUnderWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "fz", 3)
	defer deleteCluster(t, "fz")
	w, stop := startWriter(ctx, "fz")
	time.Sleep(time.Second)
	frozeAt := time.Now()
	r.Freeze(t, "default", "fz-0")
	res := mysqlctl(t, "failover", "fz", "--timeout", "2m")
	if res.code != 0 {
		stop()
		t.Fatalf("failover: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	eventually(t, actx, "a write acknowledged after the failover", func() error {
		if _, ok := w.firstAckAfter(frozeAt.Add(time.Second)); !ok {
			n, last := w.failures()
			return fmt.Errorf("none yet (%d failed attempts, last: %s)", n, last)
		}
		return nil
	})
	acancel()
	stop()
	t.Logf("freeze → failover: longest write gap %s\n%s", w.maxGap(), res.stderr)
	c := getCluster(t, ctx, "fz")
	np := c.Status.CurrentPrimary
	if np == "fz-0" || c.Status.History[0].Result != "Succeeded" || c.Status.History[0].TransactionsLost != 0 {
		t.Fatalf("primary %s history %+v", np, c.Status.History[0])
	}
	holdsAcked(t, ctx, np, db(t, mustPodAddr(t, ctx, np), root), w.acked)

	r.Thaw(t, "default", "fz-0")
	if res := mysqlctl(t, "reconcile", "fz", "--timeout", "2m"); !reconciled(res) {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	writable := 0
	for _, pod := range []string{"fz-0", "fz-1", "fz-2"} {
		if !readOnly(t, ctx, db(t, mustPodAddr(t, ctx, pod), root)) {
			writable++
			if pod != np {
				t.Errorf("%s is writable, the primary is %s", pod, np)
			}
		}
	}
	if writable != 1 {
		t.Errorf("%d writable instances", writable)
	}
	c = getCluster(t, ctx, "fz")
	d0 := db(t, mustPodAddr(t, ctx, "fz-0"), root)
	if slices.ContainsFunc(c.Status.ErrantInstances, func(e v1.ErrantInstance) bool { return e.Name == "fz-0" }) {
		t.Logf("the thawed primary was quarantined: %+v", c.Status.ErrantInstances)
		if showsReplication(ctx, t, d0) {
			t.Error("the quarantined old primary replicates")
		}
		return
	}
	replicatesFrom(t, ctx, "fz-0", np, d0)
	holdsAcked(t, ctx, "fz-0", d0, w.acked)
}

// reconciled reports whether reconcile finished: Running (exit 0), or Degraded with the reason
// (exit 4, a returning instance that could not be proven safe was quarantined).
func reconciled(res result) bool {
	return res.code == 0 && strings.Contains(res.stdout, "is Running") ||
		res.code == 4 && strings.Contains(res.stdout, "is Degraded")
}

// TestKilledPrimaryReturnsWithUnacknowledgedTail: the primary writes a transaction to its binlog
// that no replica receives (their receivers are stopped, so semi-sync never acknowledges it and
// the client never gets its commit), and is killed. It restarts read-only in the same pod with the
// transaction committed by its crash recovery (a replica's recovery would cut it, but would also
// roll back commits a client was told succeeded). The replicas, started again, may fetch it from
// the restarted server before the failover fences them: then it is on every member, an outcome
// the client never learnt, and nothing diverges. Otherwise the old primary is quarantined with
// that one transaction and `rebuild` makes it a replica again without it. Either way the failover
// loses nothing acknowledged, exactly one instance is writable, and no member silently differs.
func TestKilledPrimaryReturnsWithUnacknowledgedTail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "kt", 3)
	defer deleteCluster(t, "kt")
	d0 := db(t, mustPodAddr(t, ctx, "kt-0"), root)
	if _, err := d0.ExecContext(ctx, "INSERT INTO app.w VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"kt-1", "kt-2"} {
		d := db(t, mustPodAddr(t, ctx, pod), root)
		holdsAcked(t, ctx, pod, d, []int{1})
		if _, err := d.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	binlogPos := func(d *sql.DB) string {
		var pos string
		if err := d.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
			t.Fatal(err)
		}
		return pos
	}
	before := binlogPos(d0)
	uctx, ucancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err := d0.ExecContext(uctx, "INSERT INTO app.w VALUES (2)")
	ucancel()
	if err == nil {
		t.Fatal("a commit was acknowledged with no replica receiving")
	}
	if binlogPos(d0) == before {
		t.Fatal("the unacknowledged transaction is not in the primary's binlog: the attack did not happen")
	}
	r.Kill(t, "default", "kt-0")
	// The server restarts in the same pod (same address), on the same data, read-only.
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	eventually(t, rctx, "kt-0 restarted", func() error { return d0.PingContext(rctx) })
	if !readOnly(t, ctx, d0) {
		t.Fatal("the restarted primary is writable")
	}
	for _, pod := range []string{"kt-1", "kt-2"} {
		if _, err := db(t, mustPodAddr(t, ctx, pod), root).ExecContext(ctx, "START SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	// Read-only after its restart, it is down for writes: fail over, then converge.
	if res := mysqlctl(t, "failover", "kt", "--timeout", "2m"); res.code != 0 {
		t.Fatalf("failover: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	c := getCluster(t, ctx, "kt")
	np := c.Status.CurrentPrimary
	if np == "kt-0" || c.Status.History[0].Result != "Succeeded" || c.Status.History[0].TransactionsLost != 0 {
		t.Fatalf("primary %s, history %+v", np, c.Status.History[0])
	}
	if res := mysqlctl(t, "reconcile", "kt", "--timeout", "2m"); !reconciled(res) {
		t.Fatalf("reconcile: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	c = getCluster(t, ctx, "kt")
	tail := map[string]int{}
	for _, pod := range []string{"kt-0", "kt-1", "kt-2"} {
		var n int
		if err := db(t, mustPodAddr(t, ctx, pod), root).QueryRowContext(ctx, "SELECT COUNT(*) FROM app.w WHERE id = 2").Scan(&n); err != nil {
			t.Fatal(err)
		}
		tail[pod] = n
	}
	everywhere := tail["kt-0"] == 1 && tail["kt-1"] == 1 && tail["kt-2"] == 1
	t.Logf("the unacknowledged row after the failover: %v; errant %+v", tail, c.Status.ErrantInstances)
	switch {
	case everywhere:
		if len(c.Status.ErrantInstances) != 0 || c.Status.Phase != v1.PhaseRunning {
			t.Fatalf("the tail is on every member, yet: phase %s, errant %+v", c.Status.Phase, c.Status.ErrantInstances)
		}
	case tail["kt-0"] == 1 && tail["kt-1"] == 0 && tail["kt-2"] == 0:
		if len(c.Status.ErrantInstances) != 1 || c.Status.ErrantInstances[0].Name != "kt-0" || c.Status.ErrantInstances[0].Count != 1 {
			t.Fatalf("the old primary alone holds the tail, yet: phase %s, errant %+v", c.Status.Phase, c.Status.ErrantInstances)
		}
		if showsReplication(ctx, t, d0) {
			t.Error("the divergent old primary was rejoined")
		}
		if res := mysqlctl(t, "rebuild", "kt", "kt-0", "--timeout", "5m"); res.code != 0 {
			t.Fatalf("rebuild: %d\n%s\n%s", res.code, res.stdout, res.stderr)
		}
		c = getCluster(t, ctx, "kt")
		if len(c.Status.ErrantInstances) != 0 || c.Status.Phase != v1.PhaseRunning || c.Status.CurrentPrimary != np {
			t.Fatalf("after the rebuild: primary %s, phase %s, errant %+v", c.Status.CurrentPrimary, c.Status.Phase, c.Status.ErrantInstances)
		}
		tail["kt-0"] = 0
	default:
		t.Fatalf("members differ on the unacknowledged row: %v (errant %+v)", tail, c.Status.ErrantInstances)
	}
	replicatesFrom(t, ctx, "kt-0", np, d0)
	holdsAcked(t, ctx, "kt-0", d0, []int{1})
	writable := 0
	for _, pod := range []string{"kt-0", "kt-1", "kt-2"} {
		d := db(t, mustPodAddr(t, ctx, pod), root)
		if !readOnly(t, ctx, d) {
			writable++
		}
		var n int
		if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.w WHERE id = 2").Scan(&n); err != nil || n != tail["kt-1"] {
			t.Errorf("%s holds the unacknowledged row %d time(s) (%v), the new primary's side %d", pod, n, err, tail["kt-1"])
		}
	}
	if writable != 1 {
		t.Errorf("%d writable instances", writable)
	}
}
