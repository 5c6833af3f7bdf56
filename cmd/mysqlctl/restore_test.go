package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// TestRestoreChoosesAndRefuses: restore reads the source's bucket from where it runs and takes the
// newest complete backup (not the running one, not an incomplete directory), or the one named; a
// backup that is not complete, not there, or not one physical object is refused, and so is a
// NEWNAME that exists and is not this restore's, or a bad argument. Nothing is created by a dry
// run or a refusal, and no output holds the bucket's keys.
func TestRestoreChoosesAndRefuses(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	s3, _ := backupFixture(t)
	var outs []cmdResult
	defer func() { noBucketKeys(t, s3, outs...) }()
	check := func(what string, code cmdutil.ExitCode, stderr string, args ...string) cmdResult {
		t.Helper()
		r := runBK(t, runOpts{}, append([]string{"restore"}, args...)...)
		outs = append(outs, r)
		if r.code != code || !strings.Contains(r.stderr, stderr) {
			t.Errorf("%s: exit %d %q; want %d and %q", what, r.code, r.stderr, code, stderr)
		}
		return r
	}
	other := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "rst-other", Namespace: "default"}, Spec: v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 1}}
	if err := kubeClient(t).Create(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kubeClient(t).Delete(context.Background(), other) })
	// The source's credentials, and a Secret of another cluster's name with other passwords.
	for name, root := range map[string]string{"bkl-credentials": "source-root", "rst-clash-credentials": "other-root"} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string][]byte{}}
		for _, k := range specs.SecretKeys {
			sec.Data[k] = []byte("pw-" + k)
		}
		sec.Data[specs.SecretRootPassword] = []byte(root)
		if err := kubeClient(t).Create(t.Context(), sec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kubeClient(t).Delete(context.Background(), sec) })
	}
	before := snapshotNamespace(t, t.Context(), "default")

	r := check("dry run", cmdutil.ExitOK, "", "rst-new", "--from", "bkl", "--dry-run", "-o", "json")
	var out restoreOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.BackupID != bkNew || !out.DryRun || out.Replicas != 3 || out.Cluster != "default/rst-new" {
		t.Errorf("dry run %q (%v): want the newest complete backup %s, 3 instances", r.stdout, err, bkNew)
	}
	r = check("dry run, one backup", cmdutil.ExitOK, "", "rst-new", "--from", "bkl/"+bkNew, "--replicas", "2", "--dry-run")
	if !strings.Contains(r.stdout, "would restore backup "+bkNew+" of default/bkl") || !strings.Contains(r.stdout, "2 instance(s)") {
		t.Errorf("dry run table: %q", r.stdout)
	}
	check("an incomplete backup", cmdutil.ExitUnsafe, "backup "+bkHalf+" of bkl is incomplete, and only a complete backup is restored", "rst-new", "--from", "bkl/"+bkHalf)
	check("the running backup", cmdutil.ExitUnsafe, "is running, and only a complete backup is restored", "rst-new", "--from", "bkl/"+bkRunning)
	check("two objects", cmdutil.ExitUsage, "this mysqlctl restores a physical MariaDB backup of one object only", "rst-new", "--from", "bkl/"+bkOld)
	check("no such backup", cmdutil.ExitFailed, "backup list bkl", "rst-new", "--from", "bkl/20991231T000000Z")
	check("no such source", cmdutil.ExitFailed, "MysqlCluster default/nosuch not found", "rst-new", "--from", "nosuch")
	check("a cluster of that name", cmdutil.ExitUsage, "MysqlCluster default/rst-other already exists and is not a restore of bkl: choose another NEWNAME", "rst-other", "--from", "bkl")
	for _, image := range []string{"mariadb:10.6.20", "registry.example:5000/mariadb:11", "mariadb:11.4-noble"} {
		check("another series: "+image, cmdutil.ExitUsage, "backup "+bkNew+" was taken on 10.11.14-MariaDB-log (series 10.11) and the new cluster's image is "+image+": a physical backup restores only into its own series",
			"rst-new", "--from", "bkl", "--image", image, "--dry-run")
	}
	for _, image := range []string{"mariadb:10.11", "mariadb:10", "registry.example:5000/mariadb:10.11.9-jammy", "corp/mariadb:1.4", "mariadb:lts"} {
		check("the same series, or no series: "+image, cmdutil.ExitOK, "", "rst-new", "--from", "bkl", "--image", image, "--dry-run")
	}
	check("a digest", cmdutil.ExitOK, "", "rst-new", "--from", "bkl", "--image", "registry.example/mariadb@sha256:"+strings.Repeat("0", 64), "--dry-run")
	r = check("a Secret with other passwords", cmdutil.ExitUsage, "Secret default/rst-clash-credentials exists and its "+specs.SecretRootPassword+" is not bkl's", "rst-clash", "--from", "bkl")
	if strings.Contains(r.stderr, "other-root") || strings.Contains(r.stderr, "source-root") {
		t.Errorf("a password is printed: %q", r.stderr)
	}
	check("in place", cmdutil.ExitUsage, "restore in place is not supported", "bkl", "--from", "bkl")
	check("no --from", cmdutil.ExitUsage, "--from (or --from-url) is required", "rst-new")
	outs = append(outs, checkFromURL(t, check, bkNew)...)
	outs = append(outs, checkFromNamespace(t, bkNew)...)
	check("a bad name", cmdutil.ExitUsage, `NEWNAME "Rst_New" is not a valid cluster name`, "Rst_New", "--from", "bkl")
	check("a bad --from", cmdutil.ExitUsage, `--from "bkl/a/b" is not NAME or NAME/BACKUP`, "rst-new", "--from", "bkl/a/b")
	check("a negative count", cmdutil.ExitUsage, "--replicas -1", "rst-new", "--from", "bkl", "--replicas", "-1")
	if after := snapshotNamespace(t, t.Context(), "default"); !slices.Equal(before, after) {
		t.Errorf("a dry run or a refusal changed the namespace:\nbefore %v\nafter  %v", before, after)
	}

	// --wait=false creates the cluster (one instance, none started before the data is
	// restored), a copy of the source's Secret and its own Services, and leaves the rest to
	// reconcile.
	src := &v1.MysqlCluster{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "bkl"}, src); err != nil {
		t.Fatal(err)
	}
	src.Spec.PrimaryService, src.Spec.ReplicaService = "shop-db", "shop-db-ro"
	if err := kubeClient(t).Update(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	r = check("--wait=false", cmdutil.ExitOK, "The restore is carried out by 'reconcile rst-nowait'", "rst-nowait", "--from", "bkl", "--wait=false", "-o", "json")
	t.Cleanup(func() {
		_ = kubeClient(t).Delete(context.Background(), &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "rst-nowait", Namespace: "default"}})
		_ = kubeClient(t).Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rst-nowait-credentials", Namespace: "default"}})
	})
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.BackupID != bkNew || out.Phase != "" {
		t.Errorf("--wait=false output %q (%v)", r.stdout, err)
	}
	created := &v1.MysqlCluster{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "rst-nowait"}, created); err != nil {
		t.Fatal(err)
	}
	if sp := created.Spec; sp.Replicas != 1 || sp.Restore == nil || sp.Restore.BackupID != bkNew || sp.PrimaryService != "" || sp.ReplicaService != "" || sp.CredentialsSecretName != "" || sp.Flavor != v1.FlavorMariaDB {
		t.Errorf("created spec %+v: want one instance, the backup, no name of the source's objects, the backup's flavor", sp)
	}
	copied := &corev1.Secret{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "rst-nowait-credentials"}, copied); err != nil || string(copied.Data[specs.SecretRootPassword]) != "source-root" {
		t.Errorf("the new cluster's Secret: %v; want a copy of the source's", err)
	}
	sts := &appsv1.StatefulSet{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "rst-nowait"}, sts); err != nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != 0 {
		t.Errorf("the new cluster's StatefulSet (%v): want no instance before the data is restored", err)
	}
	for _, name := range []string{"shop-db", "shop-db-ro"} {
		svc := &corev1.Service{}
		if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, svc); err == nil {
			t.Errorf("the source's Service %s was written by the restore", name)
		}
	}
}

// checkFromURL: a restore from the bucket alone reads the backups at the URL with the bucket of
// the manifest given, and refuses a URL of another form, one outside that bucket, and flags that
// do not go together; its dry run names the newest complete backup, as --from does. Nothing is
// created (the caller compares the namespace before and after).
func checkFromURL(t *testing.T, check func(string, cmdutil.ExitCode, string, ...string) cmdResult, newest string) []cmdResult {
	t.Helper()
	src := &v1.MysqlCluster{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "bkl"}, src); err != nil {
		t.Fatal(err)
	}
	m := &v1.MysqlCluster{TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "MysqlCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "bkl", Namespace: "default"}, Spec: src.Spec}
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bkl.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b := src.Spec.Backup
	url := "s3://" + b.Bucket + "/" + b.Prefix + "default/bkl/backups/"
	var outs []cmdResult
	r := check("--from-url, dry run", cmdutil.ExitOK, "", "rst-url", "--from-url", url, "-f", file, "--dry-run", "-o", "json")
	outs = append(outs, r)
	var out struct {
		BackupID, From string
		DryRun         bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.BackupID != newest || out.From != url || !out.DryRun {
		t.Errorf("--from-url dry run %q (%v): want the newest complete backup %s from %s", r.stdout, err, newest, url)
	}
	r = check("--from-url, one backup", cmdutil.ExitOK, "", "rst-url", "--from-url", url+newest+"/", "-f", file, "--dry-run")
	outs = append(outs, r)
	if !strings.Contains(r.stdout, "would restore backup "+newest) {
		t.Errorf("--from-url of one backup: %q", r.stdout)
	}
	for _, c := range []struct {
		what string
		code cmdutil.ExitCode
		want string
		args []string
	}{
		{"no -f", cmdutil.ExitUsage, "--from-url needs -f FILE", []string{"--from-url", url}},
		{"-f alone", cmdutil.ExitUsage, "-f is for --from-url", []string{"--from", "bkl", "-f", file}},
		{"both", cmdutil.ExitUsage, "--from and --from-url cannot be combined", []string{"--from", "bkl", "--from-url", url, "-f", file}},
		{"not s3", cmdutil.ExitUsage, "is not s3://BUCKET/", []string{"--from-url", "https://example.invalid/x/backups/", "-f", file}},
		{"no backups directory", cmdutil.ExitUsage, "names no cluster's backups", []string{"--from-url", "s3://" + b.Bucket + "/default/bkl", "-f", file}},
		{"another bucket", cmdutil.ExitUsage, "is not below the bucket of the manifest's spec.backup", []string{"--from-url", "s3://other-bucket/" + b.Prefix + "default/bkl/backups/", "-f", file}},
		{"not an ID", cmdutil.ExitUsage, "is not a backup ID", []string{"--from-url", url + "latest", "-f", file}},
		{"no such backup", cmdutil.ExitFailed, "backup list bkl", []string{"--from-url", url + "20991231T000000Z", "-f", file}},
	} {
		outs = append(outs, check("--from-url: "+c.what, c.code, c.want, append([]string{"rst-url"}, c.args...)...))
	}
	return outs
}

// checkFromNamespace: a restore into another namespace than the source's reads the bucket with the
// bucket Secret of the new cluster's namespace: without it (or without the namespace) it is
// refused before anything is created there, naming what to create; with it, its dry run names the
// backup, and the restore creates the cluster and the copy of the source's credentials there, under
// the source's own name too. The same name in the same namespace is still a restore in place.
func checkFromNamespace(t *testing.T, newest string) []cmdResult {
	t.Helper()
	ctx, c := t.Context(), kubeClient(t)
	var outs []cmdResult
	run := func(what string, code cmdutil.ExitCode, want, ns string, args ...string) cmdResult {
		t.Helper()
		r := runCommand(t, runOpts{now: bkNow}, append(append([]string{"restore"}, args...), "--kubeconfig", env.Kubeconfig, "-n", ns)...)
		outs = append(outs, r)
		if r.code != code || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d %q; want %d and %q", what, r.code, r.stderr, code, want)
		}
		return r
	}
	const ns = "rst-elsewhere"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// A namespace is never removed here (no namespace controller runs): its objects are.
	before := snapshotNamespace(t, ctx, ns)
	run("no such namespace", cmdutil.ExitUsage, "the namespace rst-nowhere does not exist: create it", "rst-nowhere", "bkl", "--from", "bkl", "--from-namespace", "default", "--dry-run")
	run("no bucket Secret there", cmdutil.ExitUsage, "the Secret "+ns+"/bkl-bucket with the bucket's keys (spec.backup.credentialsSecretName of bkl) does not exist: create it", ns,
		"bkl", "--from", "bkl", "--from-namespace", "default", "--dry-run")
	run("--from-namespace alone", cmdutil.ExitUsage, "--from-namespace is for --from", ns, "bkl", "--from-namespace", "default")
	run("a bad namespace", cmdutil.ExitUsage, `--from-namespace "Default" is not a valid namespace`, ns, "bkl", "--from", "bkl", "--from-namespace", "Default")
	run("in place, named both ways", cmdutil.ExitUsage, "NEWNAME is the cluster the backup comes from (default/bkl)", "default", "bkl", "--from", "bkl", "--from-namespace", "default")
	if after := snapshotNamespace(t, ctx, ns); !slices.Equal(before, after) {
		t.Errorf("a refusal changed namespace %s:\nbefore %v\nafter  %v", ns, before, after)
	}

	// The bucket's keys in the new namespace, and keys that cannot read it: refused at once.
	keys := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "bkl-bucket"}, keys); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bkl-bucket"}, Data: map[string][]byte{
		specs.BucketSecretAccessKey: keys.Data[specs.BucketSecretAccessKey], specs.BucketSecretSecretKey: []byte("not-the-key")}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	run("keys that cannot read the bucket", cmdutil.ExitConfig, "the store refused the credentials (SignatureDoesNotMatch)", ns, "bkl", "--from", "bkl", "--from-namespace", "default", "--dry-run")
	sec.Data = keys.Data
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	before = snapshotNamespace(t, ctx, ns)
	r := run("dry run", cmdutil.ExitOK, "", ns, "bkl", "--from", "bkl", "--from-namespace", "default", "--dry-run", "-o", "json")
	var out restoreOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.BackupID != newest || out.Cluster != ns+"/bkl" || out.From != "default/bkl" {
		t.Errorf("dry run into %s: %q (%v); want backup %s of default/bkl into %s/bkl", ns, r.stdout, err, newest, ns)
	}
	if after := snapshotNamespace(t, ctx, ns); !slices.Equal(before, after) {
		t.Errorf("the dry run changed namespace %s:\nbefore %v\nafter  %v", ns, before, after)
	}
	run("created there", cmdutil.ExitOK, "The restore is carried out by 'reconcile bkl'", ns, "bkl", "--from", "bkl", "--from-namespace", "default", "--wait=false")
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "bkl", Namespace: ns}})
		_ = c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bkl-credentials", Namespace: ns}})
		_ = c.Delete(context.Background(), sec)
	})
	created := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bkl"}, created); err != nil {
		t.Fatal(err)
	}
	if rs := created.Spec.Restore; rs == nil || rs.SourceNamespace != "default" || rs.SourceCluster != "bkl" || rs.BackupID != newest {
		t.Errorf("%s/bkl restores %+v; want backup %s of default/bkl", ns, rs, newest)
	}
	copied := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bkl-credentials"}, copied); err != nil || string(copied.Data[specs.SecretRootPassword]) != "source-root" {
		t.Errorf("the credentials in %s: %v; want a copy of default/bkl-credentials", ns, err)
	}
	// Run again: the same restore, continued, not a clash with the source of the same name.
	run("run again", cmdutil.ExitOK, "continuing the restore of backup "+newest+" into bkl", ns, "bkl", "--from", "bkl", "--from-namespace", "default", "--wait=false")
	return outs
}
