package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// TestBackupSurvivesKillsAbortAndRefusals attacks `backup create` through the API server's
// port-forward, on one cluster:
//   - the first backup from a replica whose applier is stopped waits until the backup account,
//     created on the primary, reaches it, rather than start a Job whose login is refused; a later
//     one waits until the replica replicates again (a copy would be older than its time says);
//   - one backup, its command SIGKILLed before each of its stages in turn and run again each
//     time, ends as one complete backup under the ID it began with;
//   - a command SIGKILLed between creating the backup Job and recording it is continued with the
//     same Job, which ran once;
//   - a refused source choice is withdrawn, not recorded as a failure;
//   - `backup abort` of a running copy deletes its Job and records it as aborted, and nothing of
//     it is listed as a backup; an abort after the copy finished (here of a run killed before it
//     recorded its Job) is refused (its manifest is in the bucket), and `backup create` records it;
//   - completions and failures are Events;
//   - wrong bucket credentials fail the Job: the failure is recorded with the store's refusal,
//     the Job deleted, nothing listed, and no key or password printed or stored.
func TestBackupSurvivesKillsAbortAndRefusals(t *testing.T) {
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "bkx"
	if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "256Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: exit %d\n%s", res.code, res.stderr)
	}
	defer deleteCluster(t, name)
	s3 := testenv.StartS3T(t, testenv.S3Options{})
	bucketSecret := useBucket(t, ctx, name, s3)
	store, err := objectstore.New(objectstore.Config{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, Prefix: "e2e/", PathStyle: true, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	source := []string{"--source", name + "-1"}
	var outputs []string

	// The default source on two instances is the only semi-sync acknowledger: refused, and
	// withdrawn, not recorded as a failed backup.
	res := mysqlctl(t, "backup", "create", name)
	outputs = append(outputs, res.stdout, res.stderr)
	if st := getCluster(t, ctx, name).Status.Backup; res.code != 4 || !strings.Contains(res.stderr, "--source primary") || (st != nil && (st.Running != nil || st.LastFailure != nil)) {
		t.Errorf("default source on 2 instances: exit %d %q, status %+v; want 4, nothing recorded", res.code, res.stderr, st)
	}

	// The first backup from a replica whose applier is stopped: the backup account, created on
	// the primary, has not reached it, so the Job waits (the tool's login would be refused).
	root := string(secret(t, ctx, name).Data[specs.SecretRootPassword])
	replica := db(t, mustPodAddr(t, ctx, name+"-1"), root)
	if _, err := replica.ExecContext(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	first := backupWhileApplierStopped(t, ctx, replica, name, "backup account to reach", source...)
	outputs = append(outputs, first.output)

	// Killed before each stage, and run again: one backup, under its first ID.
	var id string
	for _, stage := range orchestrate.BackupStages {
		// The same command line each time, as a person runs it again.
		outputs = append(outputs, killAt(t, ctx, stage, append([]string{"backup", "create", name}, source...)...))
		run := runningBackup(t, ctx, name)
		if run == nil || run.Stage != stage || (id != "" && run.ID != id) {
			t.Fatalf("after a kill at %s: running %+v, want backup %q at %s", stage, run, id, stage)
		}
		id = run.ID
	}
	rec := backupCreate(t, name, source...)
	outputs = append(outputs, rec.output)
	if rec.ID != id || !strings.Contains(rec.output, "continuing backup "+id) {
		t.Errorf("the continued backup is %s (want %s):\n%s", rec.ID, id, rec.output)
	}
	if got := completeBackups(t, ctx, store, name); !slices.Equal(got, []string{first.ID, id}) {
		t.Errorf("complete backups %v, want [%s %s]", got, first.ID, id)
	}

	// Killed between creating the Job and recording it: the same Job, run once; an abort once
	// its copy finished is refused (its manifest is in the bucket), and the run records it.
	f := startFrozen(t, ctx, orchestrate.StageBackupStartingJob, append([]string{"backup", "create", name}, source...)...)
	run := runningBackup(t, ctx, name)
	f.kill()
	outputs = append(outputs, f.output())
	if run == nil || run.Stage != orchestrate.StageBackupStartingJob {
		t.Fatalf("frozen before recording its Job: running %+v", run)
	}
	if _, err := r.Client.BatchV1().Jobs("default").Get(ctx, run.Job, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Job %s was not created before the kill: %v", run.Job, err)
	}
	finishedJobPod(t, ctx, run.Job)
	res = mysqlctl(t, "backup", "abort", name)
	outputs = append(outputs, res.stdout, res.stderr)
	if res.code != 2 || !strings.Contains(res.stderr, "finished copying") {
		t.Errorf("abort of a finished copy recorded at StartingJob: exit %d %q; want 2, refused", res.code, res.stderr)
	}
	rec = backupCreate(t, name)
	outputs = append(outputs, rec.output)
	pods, err := r.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + run.Job})
	if err != nil || rec.ID != run.ID || len(pods.Items) != 1 {
		t.Errorf("continued as %s (want %s); the Job ran %d pod(s) (%v), want 1", rec.ID, run.ID, len(pods.Items), err)
	}

	// Aborted while copying: the Job deleted, recorded as aborted, never listed.
	outputs = append(outputs, killAt(t, ctx, orchestrate.StageBackupCopying, append([]string{"backup", "create", name}, source...)...))
	aborted := runningBackup(t, ctx, name)
	res = mysqlctl(t, "backup", "abort", name)
	outputs = append(outputs, res.stdout, res.stderr)
	if res.code != 0 {
		t.Fatalf("backup abort: exit %d %s", res.code, res.stderr)
	}
	st := getCluster(t, ctx, name).Status.Backup
	if st.Running != nil || st.LastFailure == nil || st.LastFailure.ID != aborted.ID || !strings.Contains(st.LastFailure.Message, "aborted") {
		t.Errorf("after abort: %+v, want %s recorded as aborted, none running", st, aborted.ID)
	}
	jobGone(t, ctx, aborted.Job)

	want := []string{first.ID, id, run.ID}
	slices.Sort(want)
	if got := completeBackups(t, ctx, store, name); !slices.Equal(got, want) {
		t.Errorf("complete backups %v, want %v (the aborted %s never)", got, want, aborted.ID)
	}

	// The applier stopped once the account is there: the Job waits until the replica
	// replicates again (a copy of it now would be older than its time says).
	stale := backupWhileApplierStopped(t, ctx, replica, name, "to replicate from the primary", source...)
	outputs = append(outputs, stale.output)
	want = append(want, stale.ID)

	// Wrong credentials: the Job fails with the store's refusal, recorded; its Job deleted.
	good := bucketSecret.Data[specs.BucketSecretSecretKey]
	wrong := "wrong" + strings.Repeat("k", 35)
	setBucketKey(t, ctx, bucketSecret.Name, []byte(wrong))
	res = mysqlctl(t, append([]string{"backup", "create", name}, source...)...)
	outputs = append(outputs, res.stdout, res.stderr)
	st = getCluster(t, ctx, name).Status.Backup
	if res.code == 0 || st.Running != nil || st.LastFailure == nil || !strings.Contains(st.LastFailure.Message, "refused the credentials") {
		t.Errorf("with a wrong key: exit %d, status %+v; want a failure naming the refused credentials\n%s", res.code, st, res.stderr)
	} else {
		jobGone(t, ctx, specs.BackupJobName(getCluster(t, ctx, name), st.LastFailure.ID))
	}
	if got := completeBackups(t, ctx, store, name); !slices.Equal(got, want) {
		t.Errorf("complete backups %v after the refused one, want %v", got, want)
	}
	setBucketKey(t, ctx, bucketSecret.Name, good)

	// No key or password anywhere: outputs, status, Events.
	status, err := json.Marshal(getCluster(t, ctx, name).Status)
	if err != nil {
		t.Fatal(err)
	}
	events := eventMessages(t, ctx)
	for _, e := range []string{"backup " + id + " completed", "backup " + aborted.ID + " aborted", "refused the credentials"} {
		if !strings.Contains(events, e) {
			t.Errorf("no Event says %q", e)
		}
	}
	outputs = append(outputs, string(status), events)
	noPasswords(t, secret(t, ctx, name), outputs...)
	for _, txt := range outputs {
		for _, key := range []string{s3.SecretKey, wrong} {
			if strings.Contains(txt, key) {
				t.Errorf("a bucket key leaked into %.80q", txt)
			}
		}
	}
}

// backupWhileApplierStopped stops the applier of the replica (db), runs `backup create NAME
// -o json [args]`, waits until the backup waits at StartingJob saying waitingFor, starts the
// applier again, and returns the backup, which must complete.
func backupWhileApplierStopped(t *testing.T, ctx context.Context, replica *sql.DB, name, waitingFor string, args ...string) createdBackup {
	t.Helper()
	if _, err := replica.ExecContext(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"backup", "create", name, "-o", "json", "--kubeconfig", r.Kubeconfig, "-n", "default"}, args...)...)
	cmd.Env = cliEnv(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the backup waits: "+waitingFor, func() error {
		if run := runningBackup(t, ctx, name); run == nil || run.Stage != orchestrate.StageBackupStartingJob || !strings.Contains(run.Message, waitingFor) {
			return fmt.Errorf("running %+v", run)
		}
		return nil
	})
	if _, err := replica.ExecContext(ctx, "START SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the backup once the applier runs again: %v\n%s", err, stderr.String())
	}
	rec := createdBackup{output: stdout.String() + stderr.String()}
	if err := json.Unmarshal(stdout.Bytes(), &rec.BackupRecord); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	return rec
}

// useBucket gives the cluster a bucket in s3 (prefix e2e/) and a Secret with its keys (NAME-bucket),
// deleted when the test ends.
func useBucket(t *testing.T, ctx context.Context, name string, s3 *testenv.S3) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-bucket", Namespace: "default"},
		Data: map[string][]byte{
			specs.BucketSecretAccessKey: []byte(s3.AccessKey), specs.BucketSecretSecretKey: []byte(s3.SecretKey),
		},
	}
	if _, err := r.Client.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Client.CoreV1().Secrets("default").Delete(context.Background(), sec.Name, metav1.DeleteOptions{})
	})
	updateSpec(t, ctx, name, func(s *v1.MysqlClusterSpec) {
		s.Backup = &v1.BackupSpec{Bucket: s3.Bucket, Endpoint: s3.Endpoint, Region: s3.Region, PathStyle: true, Prefix: "e2e/", CredentialsSecretName: sec.Name}
	})
	return sec
}

// setBucketKey replaces the secret key in the bucket's Secret.
func setBucketKey(t *testing.T, ctx context.Context, secretName string, key []byte) {
	t.Helper()
	sec, err := r.Client.CoreV1().Secrets("default").Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data[specs.BucketSecretSecretKey] = key
	if _, err := r.Client.CoreV1().Secrets("default").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func runningBackup(t *testing.T, ctx context.Context, name string) *v1.BackupRun {
	t.Helper()
	if st := getCluster(t, ctx, name).Status.Backup; st != nil {
		return st.Running
	}
	return nil
}

// createdBackup is a backup `backup create -o json` completed, with what the command printed.
type createdBackup struct {
	v1.BackupRecord
	output string
}

// backupCreate runs `backup create NAME -o json [args]`, which must complete a backup.
func backupCreate(t *testing.T, name string, args ...string) createdBackup {
	t.Helper()
	res := mysqlctl(t, append([]string{"backup", "create", name, "-o", "json"}, args...)...)
	if res.code != 0 {
		t.Fatalf("backup create: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var rec createdBackup
	if err := json.Unmarshal([]byte(res.stdout), &rec.BackupRecord); err != nil {
		t.Fatalf("output %q: %v", res.stdout, err)
	}
	rec.output = res.stdout + res.stderr
	return rec
}

// completeBackups lists the IDs of the cluster's backups with a manifest in the bucket.
func completeBackups(t *testing.T, ctx context.Context, store *objectstore.Store, name string) []string {
	t.Helper()
	objs, err := store.List(ctx, backup.Dir("default", name))
	if err != nil {
		t.Fatal(err)
	}
	return backup.List("default", name, objs).Complete
}

// jobGone waits for the Job to be deleted.
func jobGone(t *testing.T, ctx context.Context, job string) {
	t.Helper()
	eventually(t, ctx, "Job "+job+" deleted", func() error {
		_, err := r.Client.BatchV1().Jobs("default").Get(ctx, job, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("the Job is still there")
		}
		return err
	})
}

// eventMessages is every Event's message in the namespace.
func eventMessages(t *testing.T, ctx context.Context) string {
	t.Helper()
	events, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range events.Items {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}
