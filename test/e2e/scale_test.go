package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// TestScale scales a cluster 3 → 5 → 2 → 3 while a client writes through the primary Service,
// and checks throughout that exactly one instance is writable at every sample and, at the end,
// that every acknowledged commit is on every instance:
//   - --dry-run prints the steps and changes nothing;
//   - the scale up is SIGKILLed at each of its stages and `resume` finishes it each time; the new
//     instances are seeded by replay (the primary's binary logs hold everything) and join with
//     their provenance recorded;
//   - with the primary moved to the highest ordinal, the scale down switches over first, detaches
//     and removes the highest ordinals (SIGKILLed at both of its stages), deleting their volumes;
//   - a scale below what semiSync.waitForReplicas needs is refused with exit 4, changing nothing;
//   - after the primary purged its binary logs, the scale up seeds the new instance by a copy from
//     a donor (a Job), and the copy joins with every row.
func TestScale(t *testing.T) {
	t.Parallel()      // mostly waiting (Lease expiry after each kill): runs beside another such test
	viaPortForward(t) // as from a workstation: through the API server and the node
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	began := time.Now()
	step := func(what string) { t.Logf("[%6.1fs] %s", time.Since(began).Seconds(), what) }
	root := appCluster(t, ctx, "sc", 3)
	defer deleteCluster(t, "sc")
	all := []string{"sc-0", "sc-1", "sc-2", "sc-3", "sc-4"}
	// Paced (at most 200 writes/s): each added instance replays or copies the whole history.
	wr, stopWriter := startPacedWriter(ctx, "sc", 1, 5*time.Millisecond)
	defer stopWriter()
	mon, stopMon := watchWritable(ctx, root, all...)
	defer stopMon()
	step("cluster created")

	plan := mysqlctl(t, "scale", "sc", "--replicas", "5", "--dry-run")
	if plan.code != 0 || !strings.Contains(plan.stdout, "add ordinal 3") || !strings.Contains(plan.stdout, "add ordinal 4") {
		t.Fatalf("scale --dry-run: exit %d\n%s%s", plan.code, plan.stdout, plan.stderr)
	}
	if c := getCluster(t, ctx, "sc"); c.Spec.Replicas != 3 || c.Status.Scale != nil {
		t.Fatalf("--dry-run changed the cluster: replicas %d, scale %+v", c.Spec.Replicas, c.Status.Scale)
	}

	// Up, killed at every stage of the first instance.
	for i, stage := range []string{orchestrate.StageScalePlanning, orchestrate.StageAddingInstance, orchestrate.StageSeeding, orchestrate.StageJoiningInstance, orchestrate.StageVerifyingInstance} {
		args := []string{"resume", "sc", "--timeout", "3m"}
		if i == 0 {
			args = []string{"scale", "sc", "--replicas", "5"}
		}
		out := killAt(t, ctx, stage, args...)
		c := getCluster(t, ctx, "sc")
		if c.Status.Operation == nil || c.Status.Operation.Stage != stage || c.Status.Scale == nil {
			t.Fatalf("killed at %s, recorded operation %+v, scale %+v\n%s", stage, c.Status.Operation, c.Status.Scale, out)
		}
		if os.Getenv("MYSQLCTL_E2E_VERBOSE") != "" {
			t.Log(out)
		}
	}
	step("scale up killed at every stage")
	res := mysqlctl(t, "resume", "sc", "--timeout", "5m")
	if res.code != 0 {
		t.Fatalf("resume of the scale up: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	step("scaled up to 5")
	c := getCluster(t, ctx, "sc")
	scaled(t, c, 5)
	primary := c.Status.CurrentPrimary
	for _, p := range []string{"sc-3", "sc-4"} {
		replicatesFrom(t, ctx, p, primary, db(t, mustPodAddr(t, ctx, p), root))
		if rec := provenance(c, p); rec == nil || rec.Method != "replay" {
			t.Fatalf("%s: provenance %+v, want a replay record", p, rec)
		}
		if got := podLabel(t, ctx, p, specs.LabelRole); got != string(v1.RoleReplica) {
			t.Fatalf("%s has role %q after joining", p, got)
		}
	}

	// Down to 2 with the primary on the highest ordinal: it switches over first.
	if res := mysqlctl(t, "switchover", "sc", "--to", "sc-4"); res.code != 0 {
		t.Fatalf("switchover to sc-4: exit %d\n%s", res.code, res.stderr)
	}
	if res := mysqlctl(t, "scale", "sc", "--replicas", "2", "--no-switchover"); res.code != 4 || !strings.Contains(res.stderr, "--no-switchover") {
		t.Fatalf("scale down with --no-switchover over the primary: exit %d, want 4\n%s", res.code, res.stderr)
	}
	killAt(t, ctx, orchestrate.StageDetachingInstance, "scale", "sc", "--replicas", "2", "--delete-data")
	if c := getCluster(t, ctx, "sc"); c.Status.CurrentPrimary == "sc-4" || c.Status.Scale == nil {
		t.Fatalf("at DetachingInstance the primary is %s (scale %+v): the switchover did not come first", c.Status.CurrentPrimary, c.Status.Scale)
	}
	killAt(t, ctx, orchestrate.StageRemovingInstance, "resume", "sc", "--timeout", "3m")
	if res := mysqlctl(t, "resume", "sc", "--timeout", "5m"); res.code != 0 {
		t.Fatalf("resume of the scale down: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	step("scaled down to 2")
	c = getCluster(t, ctx, "sc")
	scaled(t, c, 2)
	primary = c.Status.CurrentPrimary
	if primary != "sc-0" && primary != "sc-1" {
		t.Fatalf("primary %s after the scale down to 2", primary)
	}
	for _, p := range []string{"sc-2", "sc-3", "sc-4"} {
		// The scale ends once the pod is terminating (no member any more); the kubelet removes
		// it soon after, later on a loaded node.
		gctx, gcancel := context.WithTimeout(ctx, time.Minute)
		eventually(t, gctx, "pod "+p+" gone after the scale down", func() error {
			if _, err := r.Client.CoreV1().Pods("default").Get(ctx, p, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		gcancel()
		// Deleted: gone once the claim's protection finalizer sees no pod using it.
		eventually(t, ctx, "the volume of "+p+" deleted (--delete-data)", func() error {
			pvc, err := r.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-"+p, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || err == nil && pvc.DeletionTimestamp != nil {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	}

	// Below the semi-sync quorum: refused, nothing changed.
	if res := mysqlctl(t, "scale", "sc", "--replicas", "1"); res.code != 4 || !strings.Contains(res.stderr, "waitForReplicas") {
		t.Fatalf("scale below the semi-sync quorum: exit %d, want 4\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "sc"); c.Spec.Replicas != 2 || c.Status.Scale != nil || c.Status.Operation != nil {
		t.Fatalf("the refused scale changed the cluster: replicas %d, scale %+v", c.Spec.Replicas, c.Status.Scale)
	}

	// Purge the primary's binary logs: a new instance cannot replay them, so it is copied.
	purgeBinlogs(t, ctx, db(t, mustPodAddr(t, ctx, primary), root))
	// A copy that fails part way (the dump stops at a view whose table is gone) fails its Job:
	// the scale stops, and the half-loaded instance is in no Service and never joined.
	pdb := db(t, mustPodAddr(t, ctx, primary), root)
	for _, q := range []string{"CREATE TABLE app.gone (i INT)", "CREATE VIEW app.broken AS SELECT i FROM app.gone", "DROP TABLE app.gone"} {
		if _, err := pdb.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	res = mysqlctl(t, "scale", "sc", "--replicas", "3", "--timeout", "5m")
	if res.code != 4 || !strings.Contains(res.stderr, "copy from") || !strings.Contains(res.stderr, "failed") {
		t.Fatalf("scale with a failing copy: exit %d, want 4 naming the failed copy\n%s%s", res.code, res.stdout, res.stderr)
	}
	if c := getCluster(t, ctx, "sc"); c.Status.Scale == nil || c.Status.Scale.Seeded || c.Status.Operation != nil || c.Status.Phase != v1.PhaseRunning {
		t.Fatalf("after the failed copy: phase %s, scale %+v, operation %+v", c.Status.Phase, c.Status.Scale, c.Status.Operation)
	}
	if got := podLabel(t, ctx, "sc-2", specs.LabelRole); got == string(v1.RoleReplica) || got == string(v1.RolePrimary) {
		t.Fatalf("the half-copied sc-2 has role %q", got)
	}
	// The failed Job is kept for its logs: neither it nor the scale's output holds a password.
	job, err := r.Client.BatchV1().Jobs("default").Get(ctx, "sc-seed-2", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the failed copy's Job was not kept: %v", err)
	}
	jobJSON, _ := json.Marshal(job)
	noPasswords(t, secret(t, ctx, "sc"), string(jobJSON), res.stdout, res.stderr)
	if _, err := pdb.ExecContext(ctx, "DROP VIEW app.broken"); err != nil {
		t.Fatal(err)
	}
	res = mysqlctl(t, "resume", "sc", "--timeout", "5m")
	if res.code != 0 {
		t.Fatalf("resume after the copy's cause was fixed: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	step("failed copy stopped the scale; resume scaled up to 3 by copy")
	c = getCluster(t, ctx, "sc")
	scaled(t, c, 3)
	if rec := provenance(c, "sc-2"); rec == nil || rec.Method != "copy" || rec.Donor == "" {
		t.Fatalf("sc-2: provenance %+v, want a copy record with its donor\n%s", rec, res.stderr)
	}
	replicatesFrom(t, ctx, "sc-2", primary, db(t, mustPodAddr(t, ctx, "sc-2"), root))
	// The copy's binlog state names every server the primary's does (an earlier primary's too):
	// a later failover or rejoin compares histories server by server.
	namesEveryServer(t, ctx, "sc-2", db(t, mustPodAddr(t, ctx, "sc-2"), root), db(t, mustPodAddr(t, ctx, primary), root))
	if _, err := r.Client.BatchV1().Jobs("default").Get(ctx, orchestrate.SeedJobName(c, 2), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the seed Job was left behind (%v)", err)
	}

	// apply -f of a new count starts the same scale; sc-3's volume was deleted, so it is copied too.
	yaml := filepath.Join(t.TempDir(), "sc.yaml")
	def := "apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: sc\nspec:\n  image: mariadb:10.11\n  replicas: 4\n  storage:\n    size: 128Mi\n"
	if err := os.WriteFile(yaml, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	res = mysqlctl(t, "apply", "-f", yaml, "--timeout", "5m")
	if res.code != 0 || !strings.Contains(res.stderr, "scaling to it") {
		t.Fatalf("apply -f of replicas 4: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	step("apply -f scaled up to 4")
	c = getCluster(t, ctx, "sc")
	scaled(t, c, 4)
	if rec := provenance(c, "sc-3"); rec == nil || rec.Method != "copy" {
		t.Fatalf("sc-3 after the apply: provenance %+v, want a copy record", rec)
	}
	if res := mysqlctl(t, "reconcile", "sc"); res.code != 0 {
		t.Fatalf("reconcile after the scale: exit %d\n%s", res.code, res.stderr)
	}
	pdbAllows(t, ctx, "sc", 1)

	// With a watch supervising, scale is handed to it and follows its outcome.
	w := startWatch(t, nil, "sc")
	w.supervising(t, ctx)
	res = mysqlctl(t, "scale", "sc", "--replicas", "3", "--timeout", "3m")
	if res.code != 0 {
		t.Fatalf("scale handed to the watch: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	c = getCluster(t, ctx, "sc")
	scaled(t, c, 3)
	if c.Status.History[0].RequestID == "" || c.Status.Request == nil || c.Status.Request.Type != orchestrate.RequestScale {
		t.Fatalf("the scale was not carried out by the watch: history %+v, request %+v", c.Status.History[0], c.Status.Request)
	}
	w.stop(t)
	step("scale handed to the watch")

	rebuildQuarantined(t, ctx, root, c.Status.CurrentPrimary)

	// A new count below an add in flight backs the instance out: it is removed, never joined.
	killAt(t, ctx, orchestrate.StageSeeding, "scale", "sc", "--replicas", "4")
	if res := mysqlctl(t, "scale", "sc", "--replicas", "3", "--timeout", "3m"); res.code != 0 {
		t.Fatalf("scale back to 3 with sc-3 in flight: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	c = getCluster(t, ctx, "sc")
	scaled(t, c, 3)
	if !strings.Contains(c.Status.History[0].Message, "-sc-3") {
		t.Fatalf("the backed-out instance is not in the scale's record: %+v", c.Status.History[0])
	}
	// The scale ends once the pod is deleting (a terminating pod is no member): it must be
	// terminating now, and gone once its server has stopped.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		p, err := r.Client.CoreV1().Pods("default").Get(ctx, "sc-3", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err == nil && p.DeletionTimestamp == nil {
			t.Fatalf("the backed-out sc-3 is not being deleted")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backed-out sc-3 still exists a minute after the scale (%v)", err)
		}
	}
	step("an add in flight backed out")

	stopMon()
	stopWriter()
	if mon.most != 1 {
		t.Fatalf("%d instances writable at once (%s) in %d samples", mon.most, mon.at, mon.samples)
	}
	for _, p := range []string{"sc-0", "sc-1", "sc-2"} {
		holdsAcked(t, ctx, p, db(t, mustPodAddr(t, ctx, p), root), wr.acked)
	}
	reasons, texts := eventReasons(t, ctx, "sc")
	requireEvents(t, reasons, texts, "ScaleAddingInstance", "ScaleSeeding", "ScaleInstanceAdded", "ScaleRemovingInstance", "ScaleInstanceRemoved", "ScaleFinished")
	statusJSON, _ := json.Marshal(getCluster(t, ctx, "sc").Status)
	noPasswords(t, secret(t, ctx, "sc"), append(texts, string(statusJSON))...)
	t.Logf("%d acknowledged writes, longest gap %s, %d samples of writability", len(wr.acked), wr.maxGap(), mon.samples)
}

// scaled checks that the last scale finished at n instances and left nothing recorded.
func scaled(t *testing.T, c *v1.MysqlCluster, n int32) {
	t.Helper()
	if c.Status.Scale != nil || c.Status.Operation != nil || c.Spec.Replicas != n || len(c.Status.History) == 0 ||
		c.Status.History[0].Type != orchestrate.OperationScale || c.Status.History[0].Result != "Succeeded" || len(c.Status.Instances) != int(n) {
		t.Fatalf("after the scale to %d: spec %d, scale %+v, operation %+v, instances %d, history %+v", n, c.Spec.Replicas, c.Status.Scale, c.Status.Operation, len(c.Status.Instances), c.Status.History)
	}
}

// provenance is the newest provenance record of the pod's ordinal.
func provenance(c *v1.MysqlCluster, pod string) *v1.GTIDBootstrapRecord {
	i := strings.LastIndex(pod, "-")
	var ord int32
	if _, err := fmt.Sscan(pod[i+1:], &ord); err != nil {
		return nil
	}
	recs := slices.Clone(c.Status.GTIDBootstrap)
	slices.Reverse(recs)
	for _, r := range recs {
		if r.Ordinal == ord {
			return &r
		}
	}
	return nil
}

func podLabel(t *testing.T, ctx context.Context, pod, label string) string {
	t.Helper()
	p, err := r.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Labels[label]
}

// purgeBinlogs purges every binary log of the server but the newest; a log a replica still reads
// is kept by the server, so the purge is repeated until only the newest is left.
func purgeBinlogs(t *testing.T, ctx context.Context, d *sql.DB) {
	t.Helper()
	eventually(t, ctx, "binary logs purged", func() error {
		elevated(t, ctx, d, "FLUSH BINARY LOGS")
		var file string
		if err := d.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&file, new(any), new(any), new(any)); err != nil {
			return err
		}
		elevated(t, ctx, d, fmt.Sprintf("PURGE BINARY LOGS TO '%s'", file))
		var first string
		if err := d.QueryRowContext(ctx, "SHOW BINARY LOGS").Scan(&first, new(any)); err != nil {
			return err
		}
		if first != file {
			return fmt.Errorf("the oldest binary log is %s, not %s (a replica still reads it)", first, file)
		}
		return nil
	})
}

// rebuildQuarantined makes a replica of sc errant by hand (a write of its own while it does not
// replicate), lets reconcile quarantine it, then rebuilds it: the primary is refused; killed at
// JoiningInstance, its old data is set aside (not dropped) and resume finishes; afterwards it
// replicates, its quarantine is released, and neither its errant write nor its old data is left.
func rebuildQuarantined(t *testing.T, ctx context.Context, root, primary string) {
	t.Helper()
	// The primary is sc-0 or sc-1 (the scale down to 2 kept it there): the victim is the other
	// one, and sc-2, the highest ordinal, is left as the primary's only acknowledger.
	victim := "sc-1"
	if primary == victim {
		victim = "sc-0"
	}
	vdb := db(t, mustPodAddr(t, ctx, victim), root)
	// A table whose name, pasted into the seed Job's SQL, made the Job run a statement of its
	// own as root (and fail, so that the instance could never be rebuilt): made on the primary,
	// replicated to the victim, set aside there and copied again by the rebuild.
	pdb := db(t, mustPodAddr(t, ctx, primary), root)
	if _, err := pdb.ExecContext(ctx, "CREATE TABLE app.`x``/**/TO/**/``app``.``y``;CREATE/**/USER/**/root@\"127.9.9.9\";#` (i INT)"); err != nil {
		t.Fatal(err)
	}
	elevated(t, ctx, vdb, "STOP SLAVE", "CREATE DATABASE rogue", "INSERT INTO app.w VALUES (-5)")
	if res := mysqlctl(t, "reconcile", "sc", "--timeout", "3m"); res.code != 4 {
		t.Fatalf("reconcile of an errant replica: exit %d, want 4 (Degraded)\n%s%s", res.code, res.stdout, res.stderr)
	}
	if c := getCluster(t, ctx, "sc"); len(c.Status.ErrantInstances) != 1 || c.Status.ErrantInstances[0].Name != victim {
		t.Fatalf("quarantined: %+v, want %s", c.Status.ErrantInstances, victim)
	}
	if res := mysqlctl(t, "rebuild", "sc", primary); res.code != 4 || !strings.Contains(res.stderr, "never rebuilt") {
		t.Fatalf("rebuild of the primary: exit %d, want 4\n%s", res.code, res.stderr)
	}
	// The other replica is the primary's only acknowledger now: its rebuild is refused at
	// RebuildPreparing and the refusal changes nothing (no stopped rebuild that blocks the next
	// one, no quarantine).
	other := "sc-2"
	if res := mysqlctl(t, "rebuild", "sc", other); res.code != 4 || !strings.Contains(res.stderr, "semi-sync") || !strings.Contains(res.stderr, "changed nothing") {
		t.Fatalf("rebuild of the last acknowledger %s: exit %d, want 4 and a refusal that changed nothing\n%s", other, res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "sc"); c.Status.Scale != nil || c.Status.Operation != nil || len(c.Status.ErrantInstances) != 1 || podLabel(t, ctx, other, specs.LabelRole) != string(v1.RoleReplica) {
		t.Fatalf("the refused rebuild left scale %+v, operation %+v, quarantined %+v", c.Status.Scale, c.Status.Operation, c.Status.ErrantInstances)
	}
	// A scale to 2 would remove sc-2, the last acknowledger: refused by the plan, before
	// anything is recorded (it was refused at DetachingInstance, a dead end).
	if res := mysqlctl(t, "scale", "sc", "--replicas", "2"); res.code != 4 || !strings.Contains(res.stderr, "nothing was changed") || !strings.Contains(res.stderr, "1 quarantined") {
		t.Fatalf("scale to 2 without its last acknowledger: exit %d, want 4 and a refusal that changed nothing\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "sc"); c.Status.Scale != nil || c.Status.Operation != nil || c.Spec.Replicas != 3 {
		t.Fatalf("the refused scale left scale %+v, operation %+v, spec.replicas %d", c.Status.Scale, c.Status.Operation, c.Spec.Replicas)
	}
	killAt(t, ctx, orchestrate.StageJoiningInstance, "rebuild", "sc", victim)
	var aside int
	if err := vdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name IN ('mysqlctl_aside_rogue', 'mysqlctl_aside_app')").Scan(&aside); err != nil || aside != 2 {
		t.Fatalf("old data set aside while the copy joins: %d schemas (%v), want 2", aside, err)
	}
	if res := mysqlctl(t, "resume", "sc", "--timeout", "5m"); res.code != 0 {
		t.Fatalf("resume of the rebuild: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	c := getCluster(t, ctx, "sc")
	if len(c.Status.ErrantInstances) != 0 || c.Status.Scale != nil || c.Status.Phase != v1.PhaseRunning || c.Status.History[0].Type != orchestrate.OperationRebuild || c.Status.History[0].Result != "Succeeded" {
		t.Fatalf("after the rebuild: phase %s, errant %+v, scale %+v, history %+v", c.Status.Phase, c.Status.ErrantInstances, c.Status.Scale, c.Status.History[0])
	}
	if rec := provenance(c, victim); rec == nil || rec.Method != "copy" || rec.Donor == "" {
		t.Fatalf("%s: provenance %+v, want a copy record", victim, rec)
	}
	if got := podLabel(t, ctx, victim, specs.LabelRole); got != string(v1.RoleReplica) {
		t.Fatalf("%s has role %q after the rebuild", victim, got)
	}
	for _, in := range c.Status.Instances {
		if in.Name == victim && (in.Role != v1.RoleReplica || in.Classification != "Replicating") {
			t.Fatalf("%s recorded as %s/%s after the rebuild", victim, in.Role, in.Classification)
		}
	}
	pdbAllows(t, ctx, "sc", 1) // converged again: drains may proceed
	replicatesFrom(t, ctx, victim, primary, vdb)
	var left int
	if err := vdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'rogue' OR schema_name LIKE 'mysqlctl\\_aside\\_%'").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d errant or aside schemas left on %s (%v)", left, victim, err)
	}
	if err := vdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.w WHERE id = -5").Scan(&left); err != nil || left != 0 {
		t.Fatalf("the errant row is still on %s (%d, %v)", victim, left, err)
	}
	if err := vdb.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM mysql.user WHERE host = '127.9.9.9') * 10 + (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'app' AND table_name LIKE 'x`%')").Scan(&left); err != nil || left != 1 {
		t.Fatalf("after the rebuild, %d (want 1: no account made by a table name, the table copied) on %s (%v)", left, victim, err)
	}
	reasons, texts := eventReasons(t, ctx, "sc")
	requireEvents(t, reasons, texts, "RebuildStarted", "RebuildFinished")
	t.Logf("%s rebuilt from %s", victim, provenance(c, victim).Donor)
}

// namesEveryServer fails unless the instance's gtid_binlog_state has an entry for every
// (domain, server_id) of the primary's, and the primary's names more than one server (else the
// check proves nothing).
func namesEveryServer(t *testing.T, ctx context.Context, name string, d, primary *sql.DB) {
	t.Helper()
	state := func(d *sql.DB) map[string]bool {
		var st string
		if err := d.QueryRowContext(ctx, "SELECT @@gtid_binlog_state").Scan(&st); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, g := range strings.Split(st, ",") {
			if f := strings.Split(strings.TrimSpace(g), "-"); len(f) == 3 {
				out[f[0]+"-"+f[1]] = true
			}
		}
		return out
	}
	have, want := state(d), state(primary)
	if len(want) < 2 {
		t.Fatalf("the primary's binlog state names %d server(s): the history has no earlier primary to check", len(want))
	}
	for k := range want {
		if !have[k] {
			t.Errorf("%s's binlog state lacks domain-server %s the primary's names (%v vs %v)", name, k, have, want)
		}
	}
}
