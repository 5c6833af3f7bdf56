package main

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
)

// TestBackupPrune runs prune against a real API server and a real store: refused without a
// retention rule and, off a terminal, without --yes; a dry run and a refused confirmation delete
// nothing; then the rule (the newest complete backup only) deletes the older complete backup and
// the incomplete directory older than the running backup (a copy that failed), and leaves the
// newest complete backup and the running one. No output holds the bucket's keys.
func TestBackupPrune(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	s3, st := backupFixture(t)
	r := &bkRunner{t: t}
	defer func() { noBucketKeys(t, s3, r.outs...) }()
	left := func() []string {
		es, err := catalog.Read(t.Context(), st, "default", "bkl", bkRunning)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		slices.Sort(ids)
		return ids
	}
	all := []string{bkOld, bkNew, bkHalf, bkRunning}
	res := r.run(runOpts{}, "backup", "prune", "bkl", "--yes")
	if res.code != cmdutil.ExitUsage || !strings.Contains(res.stderr, "bkl has no spec.backup.retention") {
		t.Errorf("prune without a rule: exit %d %q", res.code, res.stderr)
	}
	c := &v1.MysqlCluster{}
	if err := kubeClient(t).Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "bkl"}, c); err != nil {
		t.Fatal(err)
	}
	// The API server refuses a rule that deletes nothing (minKeep alone).
	bad := c.DeepCopy()
	bad.Spec.Backup.Retention = &v1.BackupRetention{MinKeep: 2}
	if err := kubeClient(t).Update(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "backup.retention needs keepLast or maxAge") {
		t.Errorf("a retention of minKeep alone: %v; want it refused", err)
	}
	c.Spec.Backup.Retention = &v1.BackupRetention{KeepLast: 1}
	if err := kubeClient(t).Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	res = r.run(runOpts{}, "backup", "prune", "bkl")
	if res.code != cmdutil.ExitUsage || !strings.Contains(res.stderr, "add --yes") {
		t.Errorf("prune off a terminal without --yes: exit %d %q", res.code, res.stderr)
	}
	res = r.run(runOpts{}, "backup", "prune", "bkl", "--dry-run")
	if res.code != 0 || res.stdout != "would delete "+bkOld+" (complete, 3.9 KiB): older than the newest 1 complete backups (keepLast)\n"+
		"would delete "+bkHalf+" (incomplete, 1.8 KiB): incomplete, and older than the running backup "+bkRunning+" (a copy that failed or was aborted)\n" {
		t.Errorf("dry run: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	res = r.run(runOpts{tty: true, stdin: "no\n"}, "backup", "prune", "bkl")
	if res.code == 0 || !strings.Contains(res.stderr, "not confirmed: nothing deleted") {
		t.Errorf("a refused confirmation: exit %d %q", res.code, res.stderr)
	}
	if got := left(); !slices.Equal(got, all) {
		t.Fatalf("a dry run or a refusal deleted something: left %v", got)
	}
	res = r.run(runOpts{tty: true, stdin: "yes\n"}, "backup", "prune", "bkl")
	if res.code != 0 || !strings.Contains(res.stdout, "deleted "+bkOld+"\ndeleted "+bkHalf+"\n") {
		t.Errorf("prune: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	if got, want := left(), []string{bkNew, bkRunning}; !slices.Equal(got, want) {
		t.Errorf("after the prune %v are left, want %v", got, want)
	}
	res = r.run(runOpts{}, "backup", "prune", "bkl", "--yes")
	if res.code != 0 || res.stdout != "" || !strings.Contains(res.stderr, "nothing to prune") {
		t.Errorf("prune again: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
}
