package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// TestRestoreIntoNewCluster: rows written, backed up, then changed and a table dropped on the
// source; `restore` (through the API server's port-forward, as from a workstation), killed before
// each of its stages and run again with the same command line, creates a new cluster whose data is
// the backup's exactly (same rows, equal CHECKSUM TABLE, the dropped table back, nothing written
// after the backup), whose GTID history continues from the backup's position, and whose second
// instance, added by a scale, replicates from it. A backup whose object was replaced in the bucket
// (same size, other bytes) is refused with the object named, and no server ever starts on it. No
// output holds a password or the bucket's key.
func TestRestoreIntoNewCluster(t *testing.T) {
	t.Parallel()
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const src, dst, bad = "rs", "rsr", "rsbad"
	if res := mysqlctl(t, "create", src, "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "256Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: exit %d\n%s", res.code, res.stderr)
	}
	defer deleteCluster(t, src)
	root := string(secret(t, ctx, src).Data[specs.SecretRootPassword])
	primary := db(t, mustPodAddr(t, ctx, src+"-0"), root)
	execAll(t, ctx, primary, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(64))",
		"INSERT INTO app.t SELECT seq, MD5(seq) FROM app.seq_1_to_3000", "CREATE TABLE app.keep (id INT PRIMARY KEY)", "INSERT INTO app.keep VALUES (1), (2)")
	want := checksum(t, ctx, primary, "app.t")

	s3 := testenv.StartS3T(t, testenv.S3Options{})
	useBucket(t, ctx, src, s3)
	rec := backupCreate(t, src, "--source", src+"-1")
	// After the backup: a row changed, rows added, a table dropped. None of it is restored.
	execAll(t, ctx, primary, "UPDATE app.t SET v = 'after' WHERE id = 1", "INSERT INTO app.t VALUES (3001, 'after')", "DROP TABLE app.keep")

	var outputs []string
	// Killed before each stage (the first run creates the cluster), then run again: one restore.
	args := []string{"restore", dst, "--from", src, "--replicas", "2"}
	for _, stage := range []string{orchestrate.StageRestoringData, orchestrate.StageStartingInstance, orchestrate.StageWaitingForPods, orchestrate.StageContinuingHistory} {
		outputs = append(outputs, killAt(t, ctx, stage, args...))
		if op := getCluster(t, ctx, dst).Status.Operation; op == nil || op.Stage != stage {
			t.Fatalf("after a kill at %s: operation %+v", stage, op)
		}
	}
	defer deleteCluster(t, dst)
	res := mysqlctl(t, append(args, "-o", "json")...)
	outputs = append(outputs, res.stdout, res.stderr)
	if res.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if all := strings.Join(outputs, "\n"); !regexp.MustCompile(`restoring data: [0-9.]+ [KMG]iB copied`).MatchString(all) {
		t.Errorf("no run said how far the restore's copy was:\n%s", all)
	}
	if !strings.Contains(res.stderr, "continuing the restore of backup "+rec.ID) {
		t.Errorf("the last run does not say it continues the restore:\n%s", res.stderr)
	}
	var out struct {
		BackupID, GTIDPosition, Phase string
		Replicas                      int32
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || out.BackupID != rec.ID || out.GTIDPosition != rec.GTIDPosition || out.Phase != string(v1.PhaseRunning) || out.Replicas != 2 {
		t.Errorf("output %q (%v): want backup %s at %s, Running, 2 instances", res.stdout, err, rec.ID, rec.GTIDPosition)
	}
	checkRestored(t, ctx, dst, root, want, rec.GTIDPosition)
	c := getCluster(t, ctx, dst)
	if rs := c.Status.Restore; rs == nil || rs.BackupID != rec.ID || rs.RestoredAt == nil || rs.HistoryContinuedAt == nil || rs.GTIDPosition != rec.GTIDPosition {
		t.Errorf("status.restore %+v: want backup %s restored at %s and its history continued", rs, rec.ID, rec.GTIDPosition)
	}
	if _, err := r.Client.BatchV1().Jobs("default").Get(ctx, specs.RestoreJobName(c), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the restore Job is left: %v", err)
	}

	checkRestoredElsewhere(t, ctx, src, rec.ID, root, want)

	// Deleted with its volume kept, and restored again under its name: the kept volume (written
	// to since) is never taken for a restore of the backup.
	if res := mysqlctl(t, "delete", dst, "--yes"); res.code != 0 {
		t.Fatalf("delete %s: exit %d %s", dst, res.code, res.stderr)
	}
	eventually(t, ctx, dst+" gone", func() error {
		if _, err := r.Client.AppsV1().StatefulSets("default").Get(ctx, dst, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("its StatefulSet: %v", err)
		}
		return nil
	})
	res = mysqlctl(t, "restore", dst, "--from", src, "--replicas", "1", "--timeout", "2m")
	outputs = append(outputs, res.stdout, res.stderr)
	if res.code != 4 || !strings.Contains(res.stderr, "was not made by this restore") {
		t.Errorf("restore onto a kept volume: exit %d; want 4, the claim refused:\n%s", res.code, res.stderr)
	}
	if sts, err := r.Client.AppsV1().StatefulSets("default").Get(ctx, dst, metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 0 {
		t.Errorf("after the refusal the StatefulSet %v (%v): want no instance", sts.Spec.Replicas, err)
	}

	outputs = append(outputs, restoreDamaged(t, ctx, s3, src, bad)...)
	sec := secret(t, ctx, src)
	noPasswords(t, sec, outputs...)
	for _, o := range outputs {
		if strings.Contains(o, s3.SecretKey) {
			t.Errorf("the bucket's secret key leaked into %.80q", o)
		}
	}
}

// checkRestoredElsewhere restores backup id of src into another namespace under src's own name
// (through port-forward, as the caller runs): the restore Job reads the bucket with the bucket
// Secret of that namespace, and the data there is the backup's (app.t's checksum want).
func checkRestoredElsewhere(t *testing.T, ctx context.Context, src, id, root, want string) {
	t.Helper()
	const ns = "rs-elsewhere"
	if _, err := r.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keys, err := r.Client.CoreV1().Secrets("default").Get(ctx, src+"-bucket", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keys.Name, Namespace: ns}, Data: keys.Data}
	if _, err := r.Client.CoreV1().Secrets(ns).Create(ctx, copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if res := mysqlctl(t, "delete", src, "--delete-data", "--yes", "-n", ns); res.code != 0 {
			t.Errorf("delete %s/%s: %d %s", ns, src, res.code, res.stderr)
		}
		if err := r.Client.CoreV1().Secrets(ns).Delete(context.Background(), copied.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the bucket Secret copied into %s: %v", ns, err)
		}
	}()
	start := time.Now()
	res := mysqlctl(t, "restore", src, "-n", ns, "--from", src+"/"+id, "--from-namespace", "default", "--replicas", "1")
	if res.code != 0 {
		t.Fatalf("restore into %s: exit %d\n%s", ns, res.code, res.stderr)
	}
	t.Logf("restored %s/%s into %s/%s in %s", "default", src, ns, src, time.Since(start).Round(time.Millisecond))
	addr, err := r.PodAddr(ctx, ns, src+"-0", 3306)
	if err != nil {
		t.Fatal(err)
	}
	if got := checksum(t, ctx, db(t, addr, root), "app.t"); got != want {
		t.Errorf("CHECKSUM TABLE app.t in %s: %s; backed up %s", ns, got, want)
	}
	if c := getClusterIn(t, ctx, ns, src); c.Status.Phase != v1.PhaseRunning || c.Status.Restore == nil || c.Status.Restore.BackupID != id {
		t.Errorf("%s/%s: phase %s, restore %+v; want Running, backup %s", ns, src, c.Status.Phase, c.Status.Restore, id)
	}
}

// checkRestored checks the restored cluster: app.t as it was backed up (its checksum want),
// app.keep back, nothing written after the backup; a write on its primary continues the backup's
// GTID history (a binary log begun anew would count from 1) and reaches its replica.
func checkRestored(t *testing.T, ctx context.Context, name, root, want, backupPos string) {
	t.Helper()
	p := db(t, mustPodAddr(t, ctx, name+"-0"), root)
	if got := checksum(t, ctx, p, "app.t"); got != want {
		t.Errorf("CHECKSUM TABLE app.t: restored %s, backed up %s", got, want)
	}
	var rows, keep int
	var v string
	if err := p.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM app.t), (SELECT COUNT(*) FROM app.keep), (SELECT v FROM app.t WHERE id = 1)").Scan(&rows, &keep, &v); err != nil {
		t.Fatal(err)
	}
	if rows != 3000 || keep != 2 || v == "after" {
		t.Errorf("restored: %d rows, app.keep %d rows, row 1 %q; want 3000, 2, not the change made after the backup", rows, keep, v)
	}
	execAll(t, ctx, p, "INSERT INTO app.t VALUES (9001, 'restored')")
	var pos string
	if err := p.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	before, err1 := gtid.ParseMariaDBPos(backupPos)
	after, err2 := gtid.ParseMariaDBPos(pos)
	b0, ok0 := before.Domain(0)
	a0, ok1 := after.Domain(0)
	if err1 != nil || err2 != nil || !ok0 || !ok1 || a0.Seq <= b0.Seq {
		t.Errorf("after a write the restored primary is at %q; the backup was at %q: want its history continued past it", pos, backupPos)
	} else {
		t.Logf("backup at %s, restored primary at %s after a write (%d transactions since the backup, mysqlctl's own included)", backupPos, pos, a0.Seq-b0.Seq)
	}
	replica := db(t, mustPodAddr(t, ctx, name+"-1"), root)
	eventually(t, ctx, "the write on the restored primary reaches its replica", func() error {
		var n int
		if err := replica.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.t WHERE id = 9001").Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("%d rows (%v)", n, err)
		}
		return nil
	})
	if got := checksum(t, ctx, replica, "app.keep"); got != checksum(t, ctx, p, "app.keep") {
		t.Errorf("the replica's app.keep differs from the primary's")
	}
}

// restoreDamaged takes a backup, replaces its object in the bucket with other bytes of the same
// size (the listing still shows it complete), and restores it: refused, the object named, the
// new cluster's StatefulSet never given an instance. It returns what the commands printed.
func restoreDamaged(t *testing.T, ctx context.Context, s3 *testenv.S3, src, name string) []string {
	t.Helper()
	rec := backupCreate(t, src, "--source", src+"-1")
	key := "e2e/" + backup.Key("default", src, rec.ID, "data.xbstream.zst")
	if _, err := s3.Client().PutObject(ctx, &s3api.PutObjectInput{Bucket: &s3.Bucket, Key: ptr.To(key), Body: bytes.NewReader(make([]byte, rec.StoredBytes))}); err != nil {
		t.Fatal(err)
	}
	defer deleteCluster(t, name)
	res := mysqlctl(t, "restore", name, "--from", src+"/"+rec.ID, "--timeout", "3m")
	if res.code == 0 || !strings.Contains(res.stderr, "data.xbstream.zst") {
		t.Errorf("restore of a replaced object: exit %d; want a failure naming the object:\n%s", res.code, res.stderr)
	}
	sts, err := r.Client.AppsV1().StatefulSets("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != 0 {
		t.Errorf("after the refused restore the StatefulSet %v (%v): want 0 replicas", sts.Spec.Replicas, err)
	}
	if op := getCluster(t, ctx, name).Status.Operation; op == nil || op.Stage != orchestrate.StageRestoringData {
		t.Errorf("after the refused restore: operation %+v, want it kept at RestoringData", op)
	}
	return []string{res.stdout, res.stderr}
}

func execAll(t *testing.T, ctx context.Context, d *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := d.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// checksum is CHECKSUM TABLE's value for the table.
func checksum(t *testing.T, ctx context.Context, d *sql.DB, table string) string {
	t.Helper()
	var name, sum string
	if err := d.QueryRowContext(ctx, "CHECKSUM TABLE "+table).Scan(&name, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}
