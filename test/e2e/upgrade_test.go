package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// writableMonitor samples every pod's @@read_only while an operation runs and remembers the
// most instances it ever saw writable at once.
type writableMonitor struct {
	mu      sync.Mutex
	most    int
	samples int
	at      string
}

func watchWritable(ctx context.Context, root string, pods ...string) (*writableMonitor, func()) {
	m := &writableMonitor{}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for mctx.Err() == nil {
			var writable []string
			for _, p := range pods {
				addr, err := r.PodAddr(mctx, "default", p, 3306)
				if err != nil {
					continue // restarting: not writable
				}
				d, err := sql.Open("mysql", rig.DSN(addr, "root", root)+"&timeout=500ms&readTimeout=500ms")
				if err != nil {
					continue
				}
				var ro int
				if d.QueryRowContext(mctx, "SELECT @@read_only").Scan(&ro) == nil && ro == 0 {
					writable = append(writable, p)
				}
				_ = d.Close()
			}
			m.mu.Lock()
			m.samples++
			if len(writable) > m.most {
				m.most, m.at = len(writable), strings.Join(writable, ", ")
			}
			m.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return m, func() { cancel(); <-done }
}

// podUIDs maps each pod of the cluster to its UID.
func podUIDs(t *testing.T, ctx context.Context, pods ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range pods {
		pod, err := r.Client.CoreV1().Pods("default").Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(pod.UID)
	}
	return out
}

// TestUpgrade rolls a new image and then a configuration change out over a 3-instance cluster
// while a client writes through the primary Service, and checks throughout that exactly one
// instance is writable at every sample and every acknowledged commit is kept on every instance:
//   - the plan of --dry-run names the order of restarts and the handoff, and changes nothing;
//   - the image upgrade's CLI is SIGKILLed at every stage (the handoff switchover's first stage
//     included) and `resume` finishes it each time from the recorded stage; every server then
//     reports the new version (the rig makes mariadb:11.4 report 11.4.0) and had its system tables
//     upgraded by the image's entrypoint (mariadb-upgrade, recorded in mysql_upgrade_info);
//   - a downgrade is refused with exit 4 and restarts nothing;
//   - a mysqlConfig change in the spec restarts nothing until `upgrade` runs; an upgrade aborted
//     with its first pod in flight stops once that pod has passed its barrier, the others not
//     restarted and every replica replicating; the next `upgrade` finishes the rollout;
//   - `apply -f` of a downgrade is refused with exit 4 and writes nothing; `apply -f` of a changed
//     mysqlConfig rolls it out by itself.
func TestUpgrade(t *testing.T) {
	t.Parallel()      // mostly waiting (Lease expiry, restarts): runs beside another such test, after the serial ones
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	began := time.Now()
	step := func(what string) { t.Logf("[%6.1fs] %s", time.Since(began).Seconds(), what) }
	root := appCluster(t, ctx, "up", 3)
	defer deleteCluster(t, "up")
	pods := []string{"up-0", "up-1", "up-2"}
	wr, stopWriter := startWriter(ctx, "up")
	defer stopWriter()
	mon, stopMon := watchWritable(ctx, root, pods...)
	defer stopMon()
	step("cluster created")

	plan := mysqlctl(t, "upgrade", "up", "--image", "mariadb:11.4", "--dry-run")
	if plan.code != 0 {
		t.Fatalf("upgrade --dry-run: exit %d\n%s%s", plan.code, plan.stdout, plan.stderr)
	}
	for _, want := range []string{"restart up-2", "restart up-1", "switchover up-0 -> up-2", "restart up-0", "MariaDB 10.11.", "to MariaDB 11.4: allowed"} {
		if !strings.Contains(plan.stdout, want) {
			t.Errorf("the plan does not say %q:\n%s", want, plan.stdout)
		}
	}
	if c := getCluster(t, ctx, "up"); c.Spec.Image != "mariadb:10.11" || c.Status.Upgrade != nil {
		t.Fatalf("--dry-run changed the cluster: image %s, upgrade %+v", c.Spec.Image, c.Status.Upgrade)
	}

	stages := []string{orchestrate.StageUpgradePreparing, orchestrate.StageTemplatePending, orchestrate.StageTemplateReady, orchestrate.StageReplicasVerified, orchestrate.StageValidating, orchestrate.StagePrimaryReady}
	for i, stage := range stages {
		args := []string{"resume", "up", "--timeout", "3m"}
		if i == 0 {
			args = []string{"upgrade", "up", "--image", "mariadb:11.4"}
		}
		out := killAt(t, ctx, stage, args...)
		c := getCluster(t, ctx, "up")
		if c.Status.Operation == nil || c.Status.Operation.Stage != stage || c.Status.Upgrade == nil {
			t.Fatalf("killed at %s, recorded operation %+v, upgrade %+v\n%s", stage, c.Status.Operation, c.Status.Upgrade, out)
		}
		step("killed at " + stage)
		if os.Getenv("MYSQLCTL_E2E_VERBOSE") != "" {
			t.Log(out)
		}
	}
	res := mysqlctl(t, "resume", "up", "--timeout", "3m")
	if res.code != 0 || !strings.Contains(res.stderr, "upgrade "+orchestrate.StagePrimaryReady) {
		t.Fatalf("the last resume: exit %d\n%s", res.code, res.stderr)
	}
	step("resumed to the end")
	c := getCluster(t, ctx, "up")
	if c.Status.Upgrade != nil || c.Status.Operation != nil || c.Status.History[0].Type != orchestrate.OperationUpgrade || c.Status.History[0].Result != "Succeeded" {
		t.Fatalf("after the resumes: upgrade %+v, operation %+v, history %+v", c.Status.Upgrade, c.Status.Operation, c.Status.History[0])
	}
	if !slices.ContainsFunc(c.Status.History, func(h v1.OperationRecord) bool {
		return h.Type == orchestrate.OperationSwitchover && h.Result == "Succeeded"
	}) {
		t.Fatalf("the handoff switchover is not in the history: %+v", c.Status.History)
	}
	for _, p := range pods {
		var v string
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@version").Scan(&v); err != nil || !strings.HasPrefix(v, "11.4.0") {
			t.Fatalf("%s reports %q (%v) after the upgrade to mariadb:11.4", p, v, err)
		}
		// The system tables were upgraded once the new version ran (MARIADB_AUTO_UPGRADE).
		if res, err := r.Exec(ctx, "default", p, "", 10*time.Second, "cat", "/var/lib/mysql/mysql_upgrade_info"); err != nil || res.Output != "11.4.0-MariaDB-rig" {
			t.Fatalf("%s: mysql_upgrade_info %+v (%v), want 11.4.0-MariaDB-rig: the system tables were not upgraded", p, res, err)
		}
	}

	// A downgrade across a series is refused before anything changes.
	uids := podUIDs(t, ctx, pods...)
	if res := mysqlctl(t, "upgrade", "up", "--image", "mariadb:10.11"); res.code != 4 || !strings.Contains(res.stderr, "downgrade") {
		t.Fatalf("downgrade: exit %d, want 4 naming the downgrade\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "up"); c.Spec.Image != "mariadb:11.4" || c.Status.Upgrade != nil {
		t.Fatalf("the refused downgrade changed the cluster: image %s, upgrade %+v", c.Spec.Image, c.Status.Upgrade)
	}

	// A configuration change in the spec waits for upgrade: reconcile restarts nothing.
	updateSpec(t, ctx, "up", func(s *v1.MysqlClusterSpec) {
		s.MysqlConfig = map[string]string{"max_connections": "321"}
	})
	if res := mysqlctl(t, "reconcile", "up"); res.code != 0 {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	for p, uid := range podUIDs(t, ctx, pods...) {
		if uids[p] != uid {
			t.Fatalf("a refused downgrade or the reconcile of a mysqlConfig change restarted %s", p)
		}
	}
	step("downgrade refused, reconcile restarted nothing")

	// Abort with the first pod in flight.
	killAt(t, ctx, orchestrate.StageTemplateReady, "upgrade", "up")
	inFlight := getCluster(t, ctx, "up").Status.Upgrade.Pod
	res = mysqlctl(t, "abort", "up", "--timeout", "3m")
	if res.code != 0 {
		t.Fatalf("abort: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	step("aborted with " + inFlight + " in flight")
	if os.Getenv("MYSQLCTL_E2E_VERBOSE") != "" {
		t.Log(res.stderr)
	}
	c = getCluster(t, ctx, "up")
	if up := c.Status.Upgrade; up == nil || !up.Held || up.Partition == nil || c.Status.Operation != nil || c.Status.History[0].Result != "Aborted" || c.Status.Phase != v1.PhaseRunning {
		t.Fatalf("after abort: phase %s, upgrade %+v, operation %+v, history %+v", c.Status.Phase, c.Status.Upgrade, c.Status.Operation, c.Status.History[0])
	}
	// Held where it stopped: a recreated pod keeps the template it runs, and no eviction is
	// allowed while the templates are mixed.
	pdbAllows(t, ctx, "up", 0)
	if res := mysqlctl(t, "resume", "up"); res.code != 0 || !strings.Contains(res.stdout, "was aborted") {
		t.Fatalf("resume of an aborted upgrade: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	restarted := 0
	for p, uid := range podUIDs(t, ctx, pods...) {
		if uids[p] != uid {
			restarted++
			if p != inFlight {
				t.Fatalf("abort let %s restart (the pod in flight was %s)", p, inFlight)
			}
		}
	}
	if restarted != 1 || !allReplicating(ctx, t, root, "up", c.Status.CurrentPrimary) {
		t.Fatalf("after abort: %d pods restarted, every replica replicating: %v", restarted, allReplicating(ctx, t, root, "up", c.Status.CurrentPrimary))
	}
	// A template changed while the upgrade is held restarts nothing, the pods on the held
	// partition included, until the upgrade adopts it.
	uids = podUIDs(t, ctx, pods...)
	c.Spec.MysqlConfig = map[string]string{"max_connections": "333"}
	if err := kube(t).Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	if res := mysqlctl(t, "reconcile", "up"); res.code != 0 {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	time.Sleep(3 * time.Second) // the StatefulSet controller would have acted by now
	for p, uid := range podUIDs(t, ctx, pods...) {
		if uids[p] != uid {
			t.Fatalf("a template changed during a held upgrade restarted %s", p)
		}
	}
	if res := mysqlctl(t, "upgrade", "up"); res.code != 0 {
		t.Fatalf("upgrade after abort: exit %d\n%s", res.code, res.stderr)
	}
	step("upgrade after abort finished")
	pdbAllows(t, ctx, "up", 1)
	for _, p := range pods {
		var n int
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@max_connections").Scan(&n); err != nil || n != 333 {
			t.Fatalf("%s: max_connections %d (%v) after the configuration rollout", p, n, err)
		}
	}
	applyRollsOut(t, ctx, root, pods)
	step("apply -f of a changed template rolled it out")
	stopMon()
	stopWriter()
	if mon.most != 1 {
		t.Fatalf("%d instances writable at once (%s) in %d samples", mon.most, mon.at, mon.samples)
	}
	for _, p := range pods {
		holdsAcked(t, ctx, p, db(t, mustPodAddr(t, ctx, p), root), wr.acked)
	}
	t.Logf("%d acknowledged writes, longest gap %s, %d samples of writability", len(wr.acked), wr.maxGap(), mon.samples)
}

// applyRollsOut applies the cluster from a file twice: with an older image (refused, exit 4,
// nothing written or restarted), then with a changed mysqlConfig, which apply rolls out itself.
func applyRollsOut(t *testing.T, ctx context.Context, root string, pods []string) {
	t.Helper()
	def := func(image, maxConn string) string {
		file := filepath.Join(t.TempDir(), "up.yaml")
		y := "apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: up\nspec:\n  image: " + image +
			"\n  replicas: 3\n  storage:\n    size: 128Mi\n  mysqlConfig:\n    max_connections: \"" + maxConn + "\"\n"
		if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	uids := podUIDs(t, ctx, pods...)
	before := getCluster(t, ctx, "up")
	res := mysqlctl(t, "apply", "-f", def("mariadb:10.11", "333"))
	if after := getCluster(t, ctx, "up"); res.code != 4 || !strings.Contains(res.stderr, "downgrade") || after.Generation != before.Generation || after.Spec.Image != "mariadb:11.4" {
		t.Fatalf("apply -f of a downgrade: exit %d (want 4), generation %d (was %d), image %s\n%s%s", res.code, after.Generation, before.Generation, after.Spec.Image, res.stdout, res.stderr)
	}
	res = mysqlctl(t, "apply", "-f", def("mariadb:11.4", "345"), "--timeout", "5m")
	if res.code != 0 || !strings.Contains(res.stderr, "rolling it out") || !strings.Contains(res.stderr, "upgrade "+orchestrate.StagePrimaryReady) {
		t.Fatalf("apply -f of a changed mysqlConfig: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for p, uid := range podUIDs(t, ctx, pods...) {
		var n int
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@max_connections").Scan(&n); err != nil || n != 345 || uids[p] == uid {
			t.Fatalf("%s after the apply: max_connections %d (%v), restarted %v", p, n, err, uids[p] != uid)
		}
	}
	if c := getCluster(t, ctx, "up"); c.Status.Upgrade != nil || c.Status.Operation != nil || c.Status.History[0].Type != orchestrate.OperationUpgrade || c.Status.History[0].Result != "Succeeded" {
		t.Fatalf("after the apply's rollout: upgrade %+v, operation %+v, history %+v", c.Status.Upgrade, c.Status.Operation, c.Status.History[0])
	}
}

// TestUpgradeStopsOnReplicaThatNeverCatchesUp: the first replica restarted by an upgrade is
// made to never apply what the primary commits (a replication delay of an hour, set once it runs
// the new template). Its barrier does not hold within --barrier-timeout, so the rollout stops
// with the reason (exit 4, history Failed), and no other pod restarts. Once the delay is gone,
// `resume` finishes the rollout and every committed row is on every instance.
func TestUpgradeStopsOnReplicaThatNeverCatchesUp(t *testing.T) {
	t.Parallel() // mostly waiting (Lease expiry, restarts): runs beside another such test, after the serial ones
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "ub", 3)
	defer deleteCluster(t, "ub")
	pods := []string{"ub-0", "ub-1", "ub-2"}
	primary := getCluster(t, ctx, "ub").Status.CurrentPrimary
	uids := podUIDs(t, ctx, pods...)

	killAt(t, ctx, orchestrate.StageTemplateReady, "upgrade", "ub", "--image", "mariadb:11.4")
	slow := getCluster(t, ctx, "ub").Status.Upgrade.Pod
	if slow == "" || slow == primary || podUIDs(t, ctx, slow)[slow] == uids[slow] {
		t.Fatalf("killed at %s: the pod in flight is %q (primary %s), restarted: %v", orchestrate.StageTemplateReady, slow, primary, slow != "" && podUIDs(t, ctx, slow)[slow] != uids[slow])
	}
	delay := func(seconds int) {
		eventually(t, ctx, "a replication delay on "+slow, func() error {
			d := db(t, mustPodAddr(t, ctx, slow), root)
			for _, q := range []string{"STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY=" + fmt.Sprint(seconds), "START SLAVE"} {
				if _, err := d.ExecContext(ctx, q); err != nil {
					return err
				}
			}
			return nil
		})
	}
	delay(3600)
	p := db(t, mustPodAddr(t, ctx, primary), root)
	for i := 1; i <= 5; i++ {
		if _, err := p.ExecContext(ctx, "INSERT INTO app.w VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
	}

	res := mysqlctl(t, "upgrade", "ub", "--barrier-timeout", "20s")
	if res.code != 4 || !strings.Contains(res.stderr, "did not hold within 20s") || !strings.Contains(res.stderr, slow) {
		t.Fatalf("upgrade with a replica that never catches up: exit %d (want 4, naming the bound and %s)\n%s%s", res.code, slow, res.stdout, res.stderr)
	}
	c := getCluster(t, ctx, "ub")
	if c.Status.Operation != nil || c.Status.Upgrade == nil || c.Status.History[0].Type != orchestrate.OperationUpgrade || c.Status.History[0].Result != "Failed" || c.Status.CurrentPrimary != primary {
		t.Fatalf("after the stopped rollout: operation %+v, upgrade %+v, history %+v, primary %s", c.Status.Operation, c.Status.Upgrade, c.Status.History[0], c.Status.CurrentPrimary)
	}
	for pod, uid := range podUIDs(t, ctx, pods...) {
		if pod != slow && uid != uids[pod] {
			t.Fatalf("the stopped rollout restarted %s after %s failed its barrier", pod, slow)
		}
	}

	delay(0)
	if res := mysqlctl(t, "resume", "ub", "--timeout", "5m"); res.code != 0 || !strings.Contains(res.stderr, "upgrade "+orchestrate.StagePrimaryReady) {
		t.Fatalf("resume once the replica catches up: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, pod := range pods {
		d := db(t, mustPodAddr(t, ctx, pod), root)
		var v string
		var n int
		if err := d.QueryRowContext(ctx, "SELECT @@version, (SELECT COUNT(*) FROM app.w WHERE id BETWEEN 1 AND 5)").Scan(&v, &n); err != nil || !strings.HasPrefix(v, "11.4.0") || n != 5 {
			t.Fatalf("%s after the resumed rollout: version %q, %d of 5 rows (%v)", pod, v, n, err)
		}
	}
}

// TestUpgradeTemplateChangeHeldMidRollout is the attack on a template change in the middle of a
// rollout: an upgrade to mariadb:11.4 is killed once hd-2 runs it, the configuration is changed
// (as 'kubectl patch' would), and the upgrade resumed. A new template written then made the
// pods below its partition come back, when recreated, at the StatefulSet's current revision:
// hd-2, deleted, started on 10.11 over the data directory 11.4 had run on. Now the change is
// held while the rollout is unfinished: the StatefulSet keeps the template it rolls out, hd-2
// comes back on 11.4, and the same upgrade then rolls the change out.
func TestUpgradeTemplateChangeHeldMidRollout(t *testing.T) {
	t.Parallel()
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "hd", 3)
	defer deleteCluster(t, "hd")
	version := func(p string) string {
		t.Helper()
		var v string
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@version").Scan(&v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return v
	}
	killAt(t, ctx, orchestrate.StageTemplateReady, "upgrade", "hd", "--image", "mariadb:11.4")
	if v := version("hd-2"); !strings.HasPrefix(v, "11.4") {
		t.Fatalf("hd-2 runs %s at its barrier, want 11.4", v)
	}
	// Another image while this upgrade is recorded: refused, the spec untouched.
	if res := mysqlctl(t, "upgrade", "hd", "--image", "mariadb:11.8"); res.code != 4 || !strings.Contains(res.stderr, "is recorded") {
		t.Fatalf("upgrade to another image while one is recorded: exit %d, want 4\n%s", res.code, res.stderr)
	}
	if img := getCluster(t, ctx, "hd").Spec.Image; img != "mariadb:11.4" {
		t.Fatalf("the refused upgrade wrote spec.image %s", img)
	}
	updateSpec(t, ctx, "hd", func(s *v1.MysqlClusterSpec) {
		s.MysqlConfig = map[string]string{"max_connections": "345"}
	})
	killAt(t, ctx, orchestrate.StageTemplatePending, "resume", "hd", "--timeout", "3m")
	sts, err := r.Client.AppsV1().StatefulSets("default").Get(ctx, "hd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := sts.Spec.Template.Spec.Containers[0].Image; img != "mariadb:11.4" || sts.Status.CurrentRevision == sts.Status.UpdateRevision {
		t.Fatalf("mid-rollout the StatefulSet rolls out %s (current %s, update %s)", img, sts.Status.CurrentRevision, sts.Status.UpdateRevision)
	}
	uid := podUIDs(t, ctx, "hd-2")["hd-2"]
	zero := int64(0)
	if err := r.Client.CoreV1().Pods("default").Delete(ctx, "hd-2", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitPodReady(t, ctx, "hd-2", uid)
	if v := version("hd-2"); !strings.HasPrefix(v, "11.4") {
		t.Fatalf("hd-2, recreated mid-rollout, runs %s over a data directory 11.4 had run on", v)
	}
	if res := mysqlctl(t, "resume", "hd", "--timeout", "5m"); res.code != 0 {
		t.Fatalf("resume to the end: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// The same upgrade rolled the held change out once every pod ran the template it started.
	maxConn := func(p string) int {
		t.Helper()
		var n int
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@max_connections").Scan(&n); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return n
	}
	for _, p := range []string{"hd-0", "hd-1", "hd-2"} {
		if v, n := version(p), maxConn(p); !strings.HasPrefix(v, "11.4") || n != 345 {
			t.Fatalf("%s runs %s with max_connections %d after the upgrade, want 11.4 and 345", p, v, n)
		}
	}
	// A change written and not rolled out (reconcile restarts nothing): a pod recreated now
	// comes back at the current revision with that revision's configuration. (One ConfigMap
	// shared by every revision gave it the new options, past every barrier.)
	updateSpec(t, ctx, "hd", func(s *v1.MysqlClusterSpec) {
		s.MysqlConfig = map[string]string{"max_connections": "400"}
	})
	if res := mysqlctl(t, "reconcile", "hd", "--timeout", "2m"); res.code != 0 || strings.Contains(res.stdout, "held") || !strings.Contains(res.stdout, "statefulset/hd configured") {
		t.Fatalf("reconcile of a configuration change after the rollout: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	uid = podUIDs(t, ctx, "hd-1")["hd-1"]
	if err := r.Client.CoreV1().Pods("default").Delete(ctx, "hd-1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitPodReady(t, ctx, "hd-1", uid)
	if n := maxConn("hd-1"); n != 345 {
		t.Fatalf("hd-1, recreated at the current revision, runs max_connections %d, want its revision's 345 (400 is not rolled out)", n)
	}
}

// TestTwoInstances: in a 2-instance cluster the replica is the primary's only semi-sync
// acknowledger, and restarting it for an upgrade stopped every commit until it was back (2.8 s on
// the demo; for good with an image that never starts, while watch saw a healthy primary). The
// upgrade is refused before anything changes, naming the ways out; so is a scale to 1; the way
// out (a third instance) works, and the scale back to 2 keeps the acknowledger.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	appCluster(t, ctx, "two", 2)
	defer deleteCluster(t, "two")
	uids := podUIDs(t, ctx, "two-0", "two-1")
	res := mysqlctl(t, "upgrade", "two", "--image", "mariadb:11.4")
	if res.code != 4 || !strings.Contains(res.stderr, "every commit would stall") || !strings.Contains(res.stderr, "--replicas 3") || !strings.Contains(res.stderr, "semiSync") {
		t.Fatalf("upgrade of a 2-instance semi-sync cluster: exit %d, want 4 naming the stall and the ways out\n%s%s", res.code, res.stdout, res.stderr)
	}
	if c := getCluster(t, ctx, "two"); c.Spec.Image != "mariadb:10.11" || c.Status.Upgrade != nil || c.Status.Operation != nil {
		t.Fatalf("the refused upgrade changed the cluster: image %s, upgrade %+v, operation %+v", c.Spec.Image, c.Status.Upgrade, c.Status.Operation)
	}
	for p, uid := range podUIDs(t, ctx, "two-0", "two-1") {
		if uids[p] != uid {
			t.Fatalf("%s restarted after a refused upgrade", p)
		}
	}
	if res := mysqlctl(t, "scale", "two", "--replicas", "1"); res.code != 4 || !strings.Contains(res.stderr, "nothing was changed") {
		t.Fatalf("scale of a 2-instance semi-sync cluster to 1: exit %d, want 4\n%s", res.code, res.stderr)
	}
	if res := mysqlctl(t, "scale", "two", "--replicas", "3", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("scale to 3: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := mysqlctl(t, "scale", "two", "--replicas", "2", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("scale back to 2: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if c := getCluster(t, ctx, "two"); c.Spec.Replicas != 2 || c.Status.Scale != nil || c.Status.Phase != v1.PhaseRunning {
		t.Fatalf("after the scales: replicas %d, scale %+v, phase %s", c.Spec.Replicas, c.Status.Scale, c.Status.Phase)
	}
}
