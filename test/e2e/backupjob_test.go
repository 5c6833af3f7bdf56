package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/physical"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// TestBackupJobOnTheSourceNode runs the backup Job specs.BuildBackupJob makes against a replica of
// a real cluster, as DESIGN.md (b2) decided: scheduled on the replica's node with its data volume
// mounted read-only, mysqlctl's image copying the agent into the Job, the replica's own server
// image running mariadb-backup through the agent, the stream going to a real object store. The
// Job's termination message is the manifest written to the bucket, at the replica's GTID position;
// the bucket's object, restored into an empty directory, starts a server with every row.
func TestBackupJobOnTheSourceNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name = "bkjob"
	if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "256Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: exit %d\n%s", res.code, res.stderr)
	}
	defer deleteCluster(t, name)
	c := getCluster(t, ctx, name)
	sec := secret(t, ctx, name)
	root := string(sec.Data[specs.SecretRootPassword])

	// The backup account and its password in the cluster's Secret, as the backup operation will
	// make them.
	const backupPassword = "bkjob-backup-secret"
	sec.Data[specs.SecretBackupPassword] = []byte(backupPassword)
	if _, err := r.Client.CoreV1().Secrets("default").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	primary := db(t, mustPodAddr(t, ctx, name+"-0"), root)
	for _, q := range []string{
		"CREATE USER '" + specs.BackupUser + "'@'%' IDENTIFIED BY '" + backupPassword + "'",
		"GRANT RELOAD, PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO '" + specs.BackupUser + "'@'%'",
		"CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(64))",
		"INSERT INTO app.t SELECT seq, MD5(seq) FROM app.seq_1_to_5000",
	} {
		if _, err := primary.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	s3 := testenv.StartS3T(t, testenv.S3Options{})
	bucketSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-bucket", Namespace: "default"},
		Data: map[string][]byte{
			specs.BucketSecretAccessKey: []byte(s3.AccessKey), specs.BucketSecretSecretKey: []byte(s3.SecretKey),
		},
	}
	if _, err := r.Client.CoreV1().Secrets("default").Create(ctx, bucketSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = r.Client.CoreV1().Secrets("default").Delete(context.Background(), bucketSecret.Name, metav1.DeleteOptions{})
	}()

	source, err := r.Client.CoreV1().Pods("default").Get(ctx, name+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := backup.NewID(time.Now(), "")
	bucket := specs.Bucket{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, Prefix: "e2e/", PathStyle: true, SecretName: bucketSecret.Name}
	job, err := specs.BuildBackupJob(c, specs.BackupJobOptions{ID: id, Source: source, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.Client.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = r.Client.BatchV1().Jobs("default").Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}()
	pod := finishedJobPod(t, ctx, job.Name)
	t.Logf("backup Job %s finished in %s", job.Name, time.Since(start).Round(time.Millisecond))
	if pod.Spec.NodeName != source.Spec.NodeName {
		t.Errorf("the Job ran on %s, the source on %s", pod.Spec.NodeName, source.Spec.NodeName)
	}
	var msg string
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == specs.BackupComponent && cs.State.Terminated != nil {
			msg = cs.State.Terminated.Message
		}
	}
	var res struct {
		Result struct {
			Manifest backup.Manifest `json:"manifest"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(msg), &res); err != nil {
		t.Fatalf("termination message %q: %v", msg, err)
	}
	m := res.Result.Manifest
	replica := db(t, mustPodAddr(t, ctx, source.Name), root)
	var pos string
	if err := replica.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	if m.ID != id || m.Source != source.Name || m.Cluster != name || m.GTIDPosition != pos || len(m.Objects) != 1 {
		t.Errorf("manifest %+v: want backup %s of %s at the replica's position %s", m, id, source.Name, pos)
	}
	noPasswords(t, sec, msg)
	if strings.Contains(msg, s3.SecretKey) {
		t.Errorf("the termination message holds the bucket's secret key")
	}

	// The bucket holds the same manifest, and its object restores into a server with every row.
	st, err := objectstore.New(objectstore.Config{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, Prefix: "e2e/", PathStyle: true, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s3.Client().GetObject(ctx, &s3api.GetObjectInput{Bucket: &s3.Bucket, Key: ptr.To("e2e/" + backup.Key("default", name, id, backup.ManifestName))})
	if err != nil {
		t.Fatalf("the manifest in the bucket: %v", err)
	}
	b, _ := io.ReadAll(out.Body)
	_ = out.Body.Close()
	if stored, err := backup.Decode(b); err != nil || stored.Objects[0] != m.Objects[0] {
		t.Fatalf("stored manifest %+v (%v), reported %+v", stored, err, m)
	}
	dataDir := t.TempDir()
	if _, err := physical.Restore(ctx, physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: backup.Key("default", name, id, m.Objects[0].Name),
		Object: m.Objects[0], BackupID: id, DataDir: dataDir}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	restored := mariadbtest.Start(t, mariadbtest.Options{DataDir: dataDir})
	if n := restored.QueryString(t, "SELECT COUNT(*) FROM app.t"); n != "5000" {
		t.Errorf("the restored server has %s rows, want 5000", n)
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
