package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// The backups of the fixture: two complete, one incomplete (no manifest) and the running one.
const (
	bkOld     = "20261205T010000Z-aaaaaa"
	bkNew     = "20261206T020000Z-bbbbbb"
	bkHalf    = "20261207T030000Z-cccccc"
	bkRunning = "20261208T040000Z-dddddd"
)

// bkNow is the clock of the fixture's commands, an hour after the running backup began.
var bkNow = time.Date(2026, 12, 8, 5, 0, 0, 0, time.UTC)

// bucketKeys are the store's keys as the bucket's Secret holds them.
func bucketKeys(s3 *testenv.S3) map[string][]byte {
	return map[string][]byte{specs.BucketSecretAccessKey: []byte(s3.AccessKey), specs.BucketSecretSecretKey: []byte(s3.SecretKey)}
}

// bucketCluster stores a cluster named name in "default" whose spec.backup names the store at
// endpoint under prefix p/, and NAME-bucket, the Secret of keys (none when keys is nil).
func bucketCluster(t *testing.T, s3 *testenv.S3, name, endpoint string, keys map[string][]byte) *v1.MysqlCluster {
	t.Helper()
	ctx, c := t.Context(), kubeClient(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-bucket", Namespace: "default"}, Data: keys}
	if keys != nil {
		if err := c.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3, Backup: &v1.BackupSpec{
			Bucket: s3.Bucket, Endpoint: endpoint, Region: s3.Region, PathStyle: true, Prefix: "p/", CredentialsSecretName: sec.Name,
		}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), cluster)
		_ = c.Delete(context.Background(), sec)
	})
	return cluster
}

// uidOf is the UID of cluster default/name (a backup's manifest names its cluster's UID; another
// UID is another cluster's), or a made-up one when there is no such cluster.
func uidOf(t *testing.T, name string) string {
	t.Helper()
	c := &v1.MysqlCluster{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, c); err != nil {
		return "uid-" + name
	}
	return string(c.UID)
}

// putBackupObjects writes a backup of default/cluster as the agent does: its objects, then (with
// a manifest) its manifest, finished nine seconds after the time in its ID.
func putBackupObjects(t *testing.T, st *objectstore.Store, cluster, id string, manifest bool, names ...string) {
	t.Helper()
	at, err := time.Parse("20060102T150405Z", id[:16])
	if err != nil {
		t.Fatal(err)
	}
	m := backup.Manifest{Format: backup.FormatVersion, ID: id, Namespace: "default", Cluster: cluster, ClusterUID: uidOf(t, cluster), Method: backup.MethodPhysical,
		Flavor: "mariadb", ServerVersion: "10.11.14-MariaDB-log", Source: cluster + "-2", GTIDPosition: "0-1000-" + id[6:8],
		StartedAt: at, FinishedAt: at.Add(9 * time.Second), Compression: "zstd"}
	for _, n := range names {
		o, err := st.Put(t.Context(), backup.Key("default", cluster, id, n), strings.NewReader(strings.Repeat(n+" of "+id+"\n", 40)))
		if err != nil {
			t.Fatal(err)
		}
		m.Objects = append(m.Objects, backup.Object{Name: n, Size: o.Size, SHA256: o.SHA256})
	}
	if !manifest {
		return
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), backup.Key("default", cluster, id, backup.ManifestName), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}

// backupFixture is cluster bkl with the fixture's backups in a real store, status.backup
// recording bkRunning as running (at stage Copying, from bkl-2) and bkNew as the last.
func backupFixture(t *testing.T) (*testenv.S3, *objectstore.Store) {
	t.Helper()
	s3 := testenv.StartS3T(t, testenv.S3Options{})
	cluster := bucketCluster(t, s3, "bkl", s3.Endpoint, bucketKeys(s3))
	st, err := objectstore.New(objectstore.Config{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, Prefix: "p/", PathStyle: true, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	putBackupObjects(t, st, "bkl", bkOld, true, "data.xbstream.zst", "binlog.zst")
	putBackupObjects(t, st, "bkl", bkNew, true, "data.xbstream.zst")
	putBackupObjects(t, st, "bkl", bkHalf, false, "data.xbstream.zst")
	putBackupObjects(t, st, "bkl", bkRunning, false, "data.xbstream.zst")
	started := metav1.NewTime(time.Date(2026, 12, 8, 4, 0, 0, 0, time.UTC))
	cluster.Status.Backup = &v1.BackupStatus{
		Running: &v1.BackupRun{ID: bkRunning, Stage: "Copying", Source: "bkl-2", StartedAt: started, Job: "bkl-backup-" + strings.ToLower(bkRunning)},
		Last:    &v1.BackupRecord{ID: bkNew, Source: "bkl-2", StartedAt: started, FinishedAt: started},
	}
	if err := kubeClient(t).Status().Update(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	return s3, st
}

// runBK runs a command against the control plane with the fixture's clock.
func runBK(t *testing.T, o runOpts, args ...string) cmdResult {
	t.Helper()
	o.now = bkNow
	return runCommand(t, o, append(args, "--kubeconfig", env.Kubeconfig, "-n", "default")...)
}

// noBucketKeys fails when any output holds the store's keys.
func noBucketKeys(t *testing.T, s3 *testenv.S3, rs ...cmdResult) {
	t.Helper()
	for _, r := range rs {
		for _, k := range []string{s3.SecretKey, s3.AccessKey} {
			if strings.Contains(r.stdout+r.stderr, k) {
				t.Errorf("a bucket key appears in output %.80q", r.stdout+r.stderr)
			}
		}
	}
}

// TestBackupListDescribeDelete runs list, describe and delete against a real API server and a
// real store: exact output on and off a terminal, the check of a backup damaged in the store,
// the refusals (the running backup, no terminal without --yes, an answer that is not the ID), a
// delete that leaves the others, and no key of the bucket in any output.
func TestBackupListDescribeDelete(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	s3, st := backupFixture(t)
	r := &bkRunner{t: t}
	defer func() { noBucketKeys(t, s3, r.outs...) }()
	bkListAndDescribe(t, r)

	// One object deleted in the store: describe reports it damaged, exit 4; list marks it.
	if err := st.Delete(t.Context(), backup.Key("default", "bkl", bkNew, "data.xbstream.zst")); err != nil {
		t.Fatal(err)
	}
	res := r.run(runOpts{}, "backup", "describe", "bkl", bkNew)
	missing := "default/bkl/backups/" + bkNew + "/data.xbstream.zst is missing"
	if res.code != cmdutil.ExitUnsafe || !strings.Contains(res.stdout, "State:           DAMAGED: "+missing+"\n") ||
		!strings.Contains(res.stderr, "error: refused as unsafe: backup "+bkNew+" of bkl is damaged: "+missing+"; a restore would refuse it") {
		t.Errorf("describe of a damaged backup: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res = r.run(runOpts{}, "backup", "list", "bkl"); !strings.Contains(res.stdout, bkNew+"\t2026-12-06T02:00:09Z\t9s\tbkl-2\t1800\t0-1000-06\t10.11.14-MariaDB-log\tdamaged\n") {
		t.Errorf("list after the damage:\n%s", res.stdout)
	}
	bkDeletes(t, r)
}

// bkRunner runs the fixture's commands and keeps every output.
type bkRunner struct {
	t    *testing.T
	outs []cmdResult
}

func (b *bkRunner) run(o runOpts, args ...string) cmdResult {
	b.t.Helper()
	r := runBK(b.t, o, args...)
	b.outs = append(b.outs, r)
	return r
}

// want checks a command's exit code and its exact output.
func want(t *testing.T, what string, r cmdResult, code cmdutil.ExitCode, stdout string) {
	t.Helper()
	if r.code != code || r.stdout != stdout {
		t.Errorf("%s: exit %d (want %d)\n got %q\nwant %q\nstderr %q", what, r.code, code, r.stdout, stdout, r.stderr)
	}
}

// bkListAndDescribe checks list and describe of the fixture as it was written.
func bkListAndDescribe(t *testing.T, b *bkRunner) {
	t.Helper()
	run := b.run
	want(t, "list", run(runOpts{}, "backup", "list", "bkl"), 0,
		bkRunning+"\t-\t-\tbkl-2\t1800\t-\t-\trunning\n"+
			bkHalf+"\t-\t-\t-\t1800\t-\t-\tincomplete\n"+
			bkNew+"\t2026-12-06T02:00:09Z\t9s\tbkl-2\t1800\t0-1000-06\t10.11.14-MariaDB-log\tcomplete\n"+
			bkOld+"\t2026-12-05T01:00:09Z\t9s\tbkl-2\t3320\t0-1000-05\t10.11.14-MariaDB-log\tcomplete\n")
	want(t, "list on a terminal", run(runOpts{tty: true, noColor: true}, "backup", "list", "bkl"), 0, ""+
		"ID                        TAKEN      DURATION   SOURCE   STORED    GTID        VERSION                STATE\n"+
		"20261208T040000Z-dddddd   -          -          bkl-2    1.8 KiB   -           -                      running\n"+
		"20261207T030000Z-cccccc   -          -          -        1.8 KiB   -           -                      incomplete\n"+
		"20261206T020000Z-bbbbbb   2d2h ago   9s         bkl-2    1.8 KiB   0-1000-06   10.11.14-MariaDB-log   complete\n"+
		"20261205T010000Z-aaaaaa   3d3h ago   9s         bkl-2    3.2 KiB   0-1000-05   10.11.14-MariaDB-log   complete\n")
	r := run(runOpts{}, "backup", "list", "bkl", "-o", "json")
	var list backupListOutput
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 {
		t.Fatalf("list -o json: exit %d %v\n%s", r.code, err, r.stdout)
	}
	if len(list.Backups) != 2 || list.Backups[0].ID != bkNew || list.Backups[1].ID != bkOld || len(list.Backups[1].Objects) != 2 ||
		strings.Join(list.Incomplete, ",") != bkRunning+","+bkHalf || list.Running != bkRunning || list.Damaged == nil || len(list.Damaged) != 0 ||
		list.Location != "s3://mysqlctl-test/p/default/bkl/backups/" {
		t.Errorf("list -o json = %+v", list)
	}

	want(t, "describe", run(runOpts{}, "backup", "describe", "bkl", bkOld), 0, ""+
		"Backup:          20261205T010000Z-aaaaaa\n"+
		"Cluster:         default/bkl\n"+
		"Location:        s3://mysqlctl-test/p/default/bkl/backups/20261205T010000Z-aaaaaa/\n"+
		"State:           complete: all 2 objects present\n"+
		"Cluster UID:     "+uidOf(t, "bkl")+"\n"+
		"Format:          1\n"+
		"Method:          physical\n"+
		"Flavor:          mariadb\n"+
		"Server version:  10.11.14-MariaDB-log\n"+
		"Source:          bkl-2\n"+
		"GTID position:   0-1000-05\n"+
		"Started:         2026-12-05T01:00:00Z\n"+
		"Finished:        2026-12-05T01:00:09Z (took 9s)\n"+
		"Compression:     zstd\n"+
		"Encryption:      none\n"+
		"Stored:          3.2 KiB (3320 bytes) in 2 object(s)\n"+
		"Objects (as the manifest records them):\n"+
		"  NAME                SIZE   SHA-256\n"+
		"  data.xbstream.zst   1800   fbec03e87b368827f8f965e8a9a8fe336f8f654bbd660835b4ce62c3f570010c\n"+
		"  binlog.zst          1520   d0ab9ca59ea0173251eae512c202f73a93dc473a7fffaa3fbbafc77290c0d5f1\n")
	r = run(runOpts{}, "backup", "describe", "bkl", bkOld, "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "state: complete\n") || !strings.Contains(r.stdout, "sha256: d0ab9ca59ea0173251eae512c202f73a93dc473a7fffaa3fbbafc77290c0d5f1\n") {
		t.Errorf("describe -o yaml: exit %d\n%s", r.code, r.stdout)
	}
	r = run(runOpts{}, "backup", "describe", "bkl", bkRunning)
	if r.code != 0 || !strings.Contains(r.stdout, "State:     running (status.backup.running, stage Copying, source bkl-2): no manifest yet\n") {
		t.Errorf("describe of the running backup: exit %d\n%s", r.code, r.stdout)
	}
	r = run(runOpts{}, "backup", "describe", "bkl", bkHalf)
	if r.code != cmdutil.ExitUnsafe || !strings.Contains(r.stdout, "State:     incomplete: no manifest") || !strings.Contains(r.stdout, "  data.xbstream.zst   1800   2026-") ||
		!strings.Contains(r.stderr, "is incomplete: it has no manifest; a restore would refuse it ('mysqlctl backup delete bkl "+bkHalf+"' removes it)") {
		t.Errorf("describe of an incomplete backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for id, nearest := range map[string]string{"20261206": bkNew, "20261206T120000Z": bkOld + ", " + bkNew + ", " + bkHalf} {
		r = run(runOpts{}, "backup", "describe", "bkl", id)
		if r.code != cmdutil.ExitFailed || r.stdout != "" || !strings.Contains(r.stderr, "no backup "+id+" in default/bkl/backups/ (the nearest: "+nearest+"): 'mysqlctl backup list bkl' lists the backups") {
			t.Errorf("describe of %s: exit %d %q", id, r.code, r.stderr)
		}
	}
}

// bkDeletes checks delete's refusals, dry run and deletes on the fixture with bkNew damaged.
func bkDeletes(t *testing.T, b *bkRunner) {
	t.Helper()
	run := b.run
	beforeDeletes := run(runOpts{}, "backup", "list", "bkl", "-o", "json")
	var list backupListOutput
	if err := json.Unmarshal([]byte(beforeDeletes.stdout), &list); err != nil || len(list.Damaged) != 1 || list.Damaged[0].ID != bkNew ||
		list.Damaged[0].State != "damaged" || len(list.Damaged[0].Problems) != 1 || len(list.Backups) != 2 {
		t.Errorf("list -o json of a damaged backup: %v\n%s", err, beforeDeletes.stdout)
	}

	// Delete: refusals first, nothing deleted by them.
	r := run(runOpts{}, "backup", "delete", "bkl", bkRunning, "--yes")
	if r.code != cmdutil.ExitUnsafe || !strings.Contains(r.stderr, "backup "+bkRunning+" of bkl is running (status.backup.running, stage Copying): stop it with 'backup abort bkl' first") {
		t.Errorf("delete of the running backup: exit %d %q", r.code, r.stderr)
	}
	r = run(runOpts{}, "backup", "delete", "bkl", bkNew)
	if r.code != cmdutil.ExitUsage || !strings.Contains(r.stderr, "not on a terminal, so backup delete cannot ask for confirmation: add --yes") {
		t.Errorf("delete without a terminal or --yes: exit %d %q", r.code, r.stderr)
	}
	want(t, "delete --dry-run", run(runOpts{}, "backup", "delete", "bkl", bkOld, "--dry-run"), 0,
		"backup "+bkOld+" of bkl (complete, 3 object(s), 3.9 KiB) would be deleted from s3://mysqlctl-test/p/default/bkl/backups/"+bkOld+"/, in this order:\n"+
			// The manifest's size follows its cluster UID's length (36 for a real one).
			fmt.Sprintf("  manifest.json (%d bytes)\n  binlog.zst (1520 bytes)\n  data.xbstream.zst (1800 bytes)\n", 679+len(uidOf(t, "bkl"))))
	r = run(runOpts{tty: true, noColor: true, stdin: "yes\n"}, "backup", "delete", "bkl", bkNew)
	// The manifest left (535 bytes with a 7-character cluster UID) grows with the real UID's length.
	left := 535 + len(uidOf(t, "bkl"))
	if r.code != cmdutil.ExitFailed || r.stdout != "" || !strings.HasPrefix(r.stderr, "Delete backup "+bkNew+fmt.Sprintf(" of bkl (damaged, 1 object(s), %d B) from", left)+" s3://mysqlctl-test/p/default/bkl/backups/"+bkNew+"/? Type the backup ID to confirm: error: not confirmed: nothing deleted") {
		t.Errorf("delete answered with another word: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	want(t, "list after the refusals and the dry run", run(runOpts{}, "backup", "list", "bkl", "-o", "json"), 0, beforeDeletes.stdout)

	// Confirmed on a terminal; status.backup.last names it, and stays.
	r = run(runOpts{tty: true, noColor: true, stdin: bkNew + "\n"}, "backup", "delete", "bkl", bkNew)
	if r.code != 0 || r.stdout != "backup "+bkNew+fmt.Sprintf(" of bkl deleted: 1 object(s), %d B (%d bytes)\n", left, left) ||
		!strings.HasSuffix(r.stderr, "status.backup.last still names backup "+bkNew+": it records the last backup taken, and is left as it is\n") {
		t.Errorf("delete confirmed: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	want(t, "delete --yes of an incomplete backup", run(runOpts{}, "backup", "delete", "bkl", bkHalf, "--yes"), 0,
		"backup "+bkHalf+" of bkl deleted: 1 object(s), 1.8 KiB (1800 bytes)\n")
	want(t, "list after the deletes", run(runOpts{}, "backup", "list", "bkl"), 0,
		bkRunning+"\t-\t-\tbkl-2\t1800\t-\t-\trunning\n"+
			bkOld+"\t2026-12-05T01:00:09Z\t9s\tbkl-2\t3320\t0-1000-05\t10.11.14-MariaDB-log\tcomplete\n")
	r = run(runOpts{}, "backup", "delete", "bkl", bkHalf, "--yes")
	if r.code != cmdutil.ExitFailed || !strings.Contains(r.stderr, "no backup "+bkHalf+" in default/bkl/backups/ (the nearest: "+bkOld+", "+bkRunning+")") {
		t.Errorf("delete of a deleted backup: exit %d %q", r.code, r.stderr)
	}
	got := &v1.MysqlCluster{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "bkl"}, got); err != nil || got.Status.Backup.Last.ID != bkNew || got.Status.Backup.Running.ID != bkRunning {
		t.Errorf("status.backup changed: %+v %v", got.Status.Backup, err)
	}

	// Completion: the cluster, then its backups' IDs, read from the bucket.
	if got := complete(t, "backup", "describe", "-n", "default", "bkl", "2026"); strings.Join(got, ",") != bkOld+","+bkRunning {
		t.Errorf("backup describe bkl completes to %q", got)
	}
	if got := complete(t, "backup", "list", "-n", "default", "bk"); !slices.Contains(got, "bkl") {
		t.Errorf("backup list completes to %q", got)
	}
}

// TestBackupBucketRefusals: each way the bucket cannot be read says what to do, with its exit
// code, and never prints a key: no spec.backup or a Secret without the keys (bad input, 2), keys
// the store refuses (6), an endpoint this machine cannot reach (1, naming --endpoint, which then
// reaches it), a malformed --endpoint (2).
func TestBackupBucketRefusals(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	s3 := testenv.StartS3T(t, testenv.S3Options{})
	var outs []cmdResult
	defer func() { noBucketKeys(t, s3, outs...) }()
	check := func(what string, code cmdutil.ExitCode, stderr string, args ...string) cmdResult {
		t.Helper()
		r := runBK(t, runOpts{}, args...)
		outs = append(outs, r)
		if r.code != code || !strings.Contains(r.stderr, stderr) {
			t.Errorf("%s: exit %d %q; want %d and %q", what, r.code, r.stderr, code, stderr)
		}
		return r
	}
	none := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "bkr-none", Namespace: "default"}, Spec: v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3}}
	if err := kubeClient(t).Create(t.Context(), none); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kubeClient(t).Delete(context.Background(), none) })
	for _, cmd := range [][]string{{"list", "bkr-none"}, {"describe", "bkr-none", bkOld}, {"delete", "bkr-none", bkOld, "--yes"}} {
		check("backup "+cmd[0]+" without spec.backup", cmdutil.ExitUsage, "cluster bkr-none has no spec.backup: set the bucket and the Secret with its keys", append([]string{"backup"}, cmd...)...)
	}
	bucketCluster(t, s3, "bkr-nosecret", s3.Endpoint, nil)
	check("no Secret", cmdutil.ExitUsage, "the Secret default/bkr-nosecret-bucket with the bucket's keys (spec.backup.credentialsSecretName of bkr-nosecret) does not exist: create it: "+
		"kubectl create secret generic bkr-nosecret-bucket -n default --from-literal=access-key-id=... --from-literal=secret-access-key=...", "backup", "list", "bkr-nosecret")
	bucketCluster(t, s3, "bkr-nokey", s3.Endpoint, map[string][]byte{specs.BucketSecretAccessKey: []byte(s3.AccessKey)})
	check("a key missing", cmdutil.ExitUsage, `the Secret default/bkr-nokey-bucket (spec.backup.credentialsSecretName of bkr-nokey) has no ["secret-access-key"]: set both keys: kubectl create secret generic`,
		"backup", "list", "bkr-nokey")
	bucketCluster(t, s3, "bkr-wrongkey", s3.Endpoint, map[string][]byte{specs.BucketSecretAccessKey: []byte(s3.AccessKey), specs.BucketSecretSecretKey: []byte("not-" + s3.SecretKey)})
	r := check("keys the store refuses", cmdutil.ExitConfig, "the store refused the credentials (SignatureDoesNotMatch): check the access and secret keys in the backup Secret", "backup", "list", "bkr-wrongkey")
	if strings.Contains(r.stderr, "not-"+s3.SecretKey) {
		t.Errorf("the wrong key is printed: %q", r.stderr)
	}

	// The address the cluster reaches the store at is not this machine's: --endpoint is.
	bucketCluster(t, s3, "bkr-far", "http://127.0.0.1:1", bucketKeys(s3))
	check("an unreachable endpoint", cmdutil.ExitFailed, "connection refused (spec.backup.endpoint is the address the cluster reaches the store at: if this machine cannot reach it, give one it can with --endpoint)",
		"backup", "list", "bkr-far")
	r = check("--endpoint", cmdutil.ExitOK, "no backups of bkr-far in s3://mysqlctl-test/p/default/bkr-far/backups/\n", "backup", "list", "bkr-far", "--endpoint", s3.Endpoint)
	if r.stdout != "" {
		t.Errorf("list of no backups printed %q", r.stdout)
	}
	r = check("--endpoint -o json", cmdutil.ExitOK, "", "backup", "list", "bkr-far", "--endpoint", s3.Endpoint, "-o", "json")
	if want := `{
  "cluster": "default/bkr-far",
  "location": "s3://mysqlctl-test/p/default/bkr-far/backups/",
  "backups": [],
  "incomplete": [],
  "damaged": []
}
`; r.stdout != want {
		t.Errorf("list -o json of no backups = %q, want %q", r.stdout, want)
	}
	check("a malformed --endpoint", cmdutil.ExitUsage, `--endpoint "127.0.0.1:9000" is not an http:// or https:// URL`, "backup", "list", "bkr-far", "--endpoint", "127.0.0.1:9000")
}
