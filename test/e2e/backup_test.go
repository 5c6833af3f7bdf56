package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/physical"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// TestBackupCreate takes a backup with `backup create` through the API server's port-forward, as
// from a workstation, as DESIGN.md (b2) decided: a Job on the chosen replica's node with its data
// volume mounted read-only, mysqlctl's image copying the agent into it, the replica's own server
// image running mariadb-backup through the agent, the stream going to a real object store. The
// backup account is created on the primary and its password added to the Secret; status.backup.last
// records the manifest the Job wrote to the bucket, at the replica's GTID position; the bucket's
// object, restored into an empty directory, starts a server with every row. No secret is printed.
func TestBackupCreate(t *testing.T) {
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name = "bk"
	if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "256Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: exit %d\n%s", res.code, res.stderr)
	}
	defer deleteCluster(t, name)
	root := string(secret(t, ctx, name).Data[specs.SecretRootPassword])
	primary := db(t, mustPodAddr(t, ctx, name+"-0"), root)
	for _, q := range []string{
		"CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(64))",
		"INSERT INTO app.t SELECT seq, MD5(seq) FROM app.seq_1_to_5000",
	} {
		if _, err := primary.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// Without spec.backup: refused, saying what to set.
	if res := mysqlctl(t, "backup", "create", name); res.code != 2 || !strings.Contains(res.stderr, "spec.backup") {
		t.Errorf("backup create without spec.backup: exit %d %q; want 2 naming spec.backup", res.code, res.stderr)
	}

	s3 := testenv.StartS3T(t, testenv.S3Options{})
	useBucket(t, ctx, name, s3)

	start := time.Now()
	res := mysqlctl(t, "backup", "create", name, "-o", "json")
	if res.code != 0 {
		t.Fatalf("backup create: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("backup create took %s", time.Since(start).Round(time.Millisecond))
	for _, stage := range orchestrate.BackupStages {
		if !strings.Contains(res.stderr, " "+stage) {
			t.Errorf("no progress line for stage %s in:\n%s", stage, res.stderr)
		}
	}
	// The copy's progress, read from the Job's log through the API server.
	if !regexp.MustCompile(`backup copying: [0-9.]+ [KMG]iB copied`).MatchString(res.stderr) {
		t.Errorf("no line says how far the copy is:\n%s", res.stderr)
	}
	var rec v1.BackupRecord
	if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil {
		t.Fatalf("output %q: %v", res.stdout, err)
	}
	c := getCluster(t, ctx, name)
	if st := c.Status.Backup; st == nil || st.Running != nil || st.Last == nil || st.Last.ID != rec.ID {
		t.Fatalf("status.backup %+v: want the backup %s recorded as the last, none running", st, rec.ID)
	}
	if rec.Source != name+"-2" || rec.StoredBytes <= 0 || rec.RawBytes <= rec.StoredBytes {
		t.Errorf("record %+v: want a copy of %s-2 (the highest-ordinal replica), compressed", rec, name)
	}
	replica := db(t, mustPodAddr(t, ctx, rec.Source), root)
	var pos string
	if err := replica.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	if rec.GTIDPosition != pos {
		t.Errorf("backup at %q, the idle replica at %q", rec.GTIDPosition, pos)
	}
	job, err := r.Client.BatchV1().Jobs("default").Get(ctx, specs.BackupJobName(c, rec.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := finishedJobPod(t, ctx, job.Name)
	src, err := r.Client.CoreV1().Pods("default").Get(ctx, rec.Source, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != src.Spec.NodeName {
		t.Errorf("the Job ran on %s, the source on %s (%v)", pod.Spec.NodeName, src.Spec.NodeName, err)
	}
	sec := secret(t, ctx, name)
	if len(sec.Data[specs.SecretBackupPassword]) == 0 {
		t.Errorf("the Secret has no %s", specs.SecretBackupPassword)
	}
	// Neither the output, the Job's result, the status nor an Event holds a password or the key.
	status, err := json.Marshal(c.Status)
	if err != nil {
		t.Fatal(err)
	}
	events, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var evText strings.Builder
	for _, e := range events.Items {
		evText.WriteString(e.Message + "\n")
	}
	texts := []string{res.stdout, res.stderr, pod.Status.ContainerStatuses[0].State.Terminated.Message, string(status), evText.String()}
	noPasswords(t, sec, texts...)
	for _, txt := range texts {
		if strings.Contains(txt, s3.SecretKey) {
			t.Errorf("the bucket's secret key leaked into %.80q", txt)
		}
	}

	if res := mysqlctl(t, "backup", "abort", name); res.code != 2 || !strings.Contains(res.stderr, "no backup in progress") {
		t.Errorf("backup abort with none running: exit %d %q; want 2", res.code, res.stderr)
	}

	// The bucket holds the manifest, and its object restores into a server with every row.
	st, err := objectstore.New(objectstore.Config{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, Prefix: "e2e/", PathStyle: true, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s3.Client().GetObject(ctx, &s3api.GetObjectInput{Bucket: &s3.Bucket, Key: ptr.To("e2e/" + backup.Key("default", name, rec.ID, backup.ManifestName))})
	if err != nil {
		t.Fatalf("the manifest in the bucket: %v", err)
	}
	b, _ := io.ReadAll(out.Body)
	_ = out.Body.Close()
	m, err := backup.Decode(b)
	if err != nil || m.GTIDPosition != rec.GTIDPosition || m.Source != rec.Source {
		t.Fatalf("stored manifest %+v (%v), recorded %+v", m, err, rec)
	}
	dataDir := t.TempDir()
	if _, err := physical.Restore(ctx, physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: backup.Key("default", name, rec.ID, m.Objects[0].Name),
		Object: m.Objects[0], BackupID: rec.ID, DataDir: dataDir}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	// The restored accounts are the cluster's (its root password): the test server skips grants.
	restored := mariadbtest.Start(t, mariadbtest.Options{DataDir: dataDir, Args: []string{"--skip-grant-tables"}})
	if n := restored.QueryString(t, "SELECT COUNT(*) FROM app.t"); n != "5000" {
		t.Errorf("the restored server has %s rows, want 5000", n)
	}
	// The backup account came with the data (mysql.global_priv).
	if n := restored.QueryString(t, "SELECT COUNT(*) FROM mysql.global_priv WHERE User = '"+specs.BackupUser+"'"); n != "1" {
		t.Errorf("the backup account is not in the restored data: %s", n)
	}

	listDescribeDelete(t, ctx, name, s3, st, m, sec)
}

// listDescribeDelete runs backup list, describe and delete on the cluster's one backup m, read
// from the bucket by the CLI as from a workstation: listed (table and JSON), described with every
// object present; with its object deleted in the store, described as damaged (exit 4); refused
// without --yes off a terminal; deleted with --yes, and no longer listed. No output holds a
// password of sec or a key of the store.
func listDescribeDelete(t *testing.T, ctx context.Context, name string, s3 *testenv.S3, st *objectstore.Store, m backup.Manifest, sec *corev1.Secret) {
	t.Helper()
	var outs []string
	run := func(args ...string) result {
		t.Helper()
		res := mysqlctl(t, append([]string{"backup"}, args...)...)
		outs = append(outs, res.stdout, res.stderr)
		return res
	}
	start := time.Now()
	defer func() {
		t.Logf("backup list, describe and delete took %s", time.Since(start).Round(time.Millisecond))
		noPasswords(t, sec, outs...)
		for _, txt := range outs {
			if strings.Contains(txt, s3.SecretKey) || strings.Contains(txt, s3.AccessKey) {
				t.Errorf("a bucket key leaked into %.80q", txt)
			}
		}
	}()
	res := run("list", name)
	row := fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%s\tcomplete\n", m.ID, m.FinishedAt.UTC().Format(time.RFC3339), m.FinishedAt.Sub(m.StartedAt).Round(time.Second),
		m.Source, m.Objects[0].Size, m.GTIDPosition, m.ServerVersion)
	if res.code != 0 || res.stdout != row {
		t.Errorf("backup list: exit %d\n got %q\nwant %q\n%s", res.code, res.stdout, row, res.stderr)
	}
	// --endpoint: here the same address as the cluster's.
	res = run("list", name, "-o", "json", "--endpoint", s3.Endpoint)
	var list struct {
		Backups    []backup.Manifest `json:"backups"`
		Incomplete []string          `json:"incomplete"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil || len(list.Backups) != 1 || list.Backups[0].ID != m.ID ||
		list.Backups[0].Objects[0] != m.Objects[0] || len(list.Incomplete) != 0 {
		t.Errorf("backup list -o json: %+v %v\n%s", list, err, res.stdout)
	}
	res = run("describe", name, m.ID)
	if res.code != 0 || !strings.Contains(res.stdout, "complete: all 1 objects present") || !strings.Contains(res.stdout, m.Objects[0].SHA256) {
		t.Errorf("backup describe: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	if err := st.Delete(ctx, backup.Key("default", name, m.ID, m.Objects[0].Name)); err != nil {
		t.Fatal(err)
	}
	res = run("describe", name, m.ID)
	if missing := backup.Key("default", name, m.ID, m.Objects[0].Name) + " is missing"; res.code != 4 || !strings.Contains(res.stdout, "DAMAGED: "+missing) || !strings.Contains(res.stderr, "is damaged: "+missing) {
		t.Errorf("backup describe of the damaged backup: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res = run("delete", name, m.ID); res.code != 2 || !strings.Contains(res.stderr, "add --yes") {
		t.Errorf("backup delete off a terminal without --yes: exit %d %q", res.code, res.stderr)
	}
	res = run("delete", name, m.ID, "--yes")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "backup "+m.ID+" of "+name+" deleted: 1 object(s)") || !strings.Contains(res.stderr, "status.backup.last still names backup "+m.ID) {
		t.Errorf("backup delete --yes: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	if res = run("list", name); res.code != 0 || res.stdout != "" || res.stderr != "no backups of "+name+" in s3://"+s3.Bucket+"/e2e/default/"+name+"/backups/\n" {
		t.Errorf("backup list after the delete: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
}

// finishedJobPod waits for a Job to complete and returns its pod; a failed Job fails the test with
// its pod's termination message.
func finishedJobPod(t *testing.T, ctx context.Context, job string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, ctx, "Job "+job+" completes", func() error {
		j, err := r.Client.BatchV1().Jobs("default").Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, err := r.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
		if err != nil || len(pods.Items) == 0 {
			return fmt.Errorf("no pod yet (%v)", err)
		}
		pod = &pods.Items[0]
		failed := slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
			return c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue
		})
		if failed {
			t.Fatalf("Job %s failed: %+v", job, pod.Status.ContainerStatuses)
		}
		if j.Status.Succeeded == 0 {
			return fmt.Errorf("not complete: %+v", j.Status)
		}
		return nil
	})
	return pod
}
