package catalog_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

func entry(id string, state catalog.State, finished time.Time) catalog.Entry {
	e := catalog.Entry{ID: id, State: state}
	if state == catalog.Complete || state == catalog.Damaged || state == catalog.Failed || state == catalog.Foreign {
		e.Manifest = &backup.Manifest{ID: id, FinishedAt: finished}
	}
	return e
}

func expiredIDs(x []catalog.Expired) []string {
	var out []string
	for _, e := range x {
		out = append(out, e.Entry.ID)
	}
	return out
}

// TestExpire: the rule deletes complete backups past the newest keepLast or older than maxAge,
// never one of the newest minKeep (so never the newest), and the directories of failed copies
// older than the newest complete or running backup; it never deletes a running, damaged, failed
// or foreign backup, nor an incomplete directory newer than those, nor one when no backup is
// complete.
func TestExpire(t *testing.T) {
	now := time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	es := []catalog.Entry{
		entry("20261201T000000Z", catalog.Complete, now.Add(-9*day)),
		entry("20261202T000000Z", catalog.Damaged, now.Add(-8*day)),
		entry("20261203T000000Z", catalog.Incomplete, time.Time{}),
		entry("20261204T000000Z", catalog.Complete, now.Add(-6*day)),
		entry("20261205T000000Z", catalog.Foreign, now.Add(-5*day)),
		entry("20261206T000000Z", catalog.Failed, now.Add(-4*day)),
		entry("20261207T000000Z", catalog.Complete, now.Add(-3*day)),
		entry("20261208T000000Z", catalog.Complete, now.Add(-2*day)),
		entry("20261209T000000Z", catalog.Complete, now.Add(-1*day)),
		entry("20261210T000000Z", catalog.Incomplete, time.Time{}),
		entry("20261210T110000Z", catalog.Running, time.Time{}),
	}
	for _, c := range []struct {
		name string
		rule catalog.Retention
		want []string
	}{
		{"the newest 3", catalog.Retention{KeepLast: 3, MinKeep: 1},
			[]string{"20261201T000000Z", "20261203T000000Z", "20261204T000000Z", "20261210T000000Z"}},
		{"within 5 days", catalog.Retention{MaxAge: 5 * day, MinKeep: 1},
			[]string{"20261201T000000Z", "20261203T000000Z", "20261204T000000Z", "20261210T000000Z"}},
		{"within a day and a half: the newest kept by minKeep 2", catalog.Retention{MaxAge: 36 * time.Hour, MinKeep: 2},
			[]string{"20261201T000000Z", "20261203T000000Z", "20261204T000000Z", "20261207T000000Z", "20261210T000000Z"}},
		{"within an hour: never the newest (minKeep 0 counts as 1)", catalog.Retention{MaxAge: time.Hour},
			[]string{"20261201T000000Z", "20261203T000000Z", "20261204T000000Z", "20261207T000000Z", "20261208T000000Z", "20261210T000000Z"}},
		{"the newest 1, or within 2.5 days (either rule deletes)", catalog.Retention{KeepLast: 1, MaxAge: 60 * time.Hour, MinKeep: 1},
			[]string{"20261201T000000Z", "20261203T000000Z", "20261204T000000Z", "20261207T000000Z", "20261208T000000Z", "20261210T000000Z"}},
		{"the newest 10: only the failed copies' directories (older than the running backup)", catalog.Retention{KeepLast: 10, MinKeep: 1},
			[]string{"20261203T000000Z", "20261210T000000Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := expiredIDs(catalog.Expire(es, c.rule, now))
			if !slices.Equal(got, c.want) {
				t.Fatalf("expired %v, want %v", got, c.want)
			}
		})
	}
	// No complete backup at all: nothing goes, not even an incomplete directory older than the
	// running backup (it may be the only copy a person can still look at).
	// An incomplete directory newer than the newest complete backup and no backup running: kept.
	if got := catalog.Expire([]catalog.Entry{entry("20261201T000000Z", catalog.Complete, now), entry("20261202T000000Z", catalog.Incomplete, time.Time{})}, catalog.Retention{KeepLast: 1, MinKeep: 1}, now); len(got) != 0 {
		t.Errorf("an incomplete directory newer than the newest backup was expired: %v", expiredIDs(got))
	}
	if got := catalog.Expire([]catalog.Entry{entry("20261201T000000Z", catalog.Incomplete, time.Time{}), entry("20261202T000000Z", catalog.Damaged, now),
		entry("20261203T000000Z", catalog.Running, time.Time{})}, catalog.Retention{KeepLast: 1, MinKeep: 1}, now); len(got) != 0 {
		t.Errorf("with no complete backup, expired %v", expiredIDs(got))
	}
}

// TestPrune: on a real store, the rule's backups are deleted (every object, the manifest first)
// and the others stay listed as they were; listing them deletes nothing, and a backup that expires
// after the listing is not deleted with it.
func TestPrune(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st := storeOf(t, s)
	ids := []string{"20261201T000000Z", "20261202T000000Z", "20261203T000000Z", "20261204T000000Z"}
	for _, id := range ids {
		putBackup(t, st, id, "data.xbstream.zst")
	}
	c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "demo"}, Spec: v1.MysqlClusterSpec{Backup: &v1.BackupSpec{
		Retention: &v1.BackupRetention{KeepLast: 2},
	}}}
	rule, ok := catalog.RetentionOf(c)
	if !ok || rule.KeepLast != 2 || rule.MinKeep != 1 {
		t.Fatalf("RetentionOf = %+v, %v", rule, ok)
	}
	now := time.Date(2026, 12, 10, 0, 0, 0, 0, time.UTC)
	dry, err := catalog.Expiring(t.Context(), st, c, rule, now)
	if err != nil || !slices.Equal(expiredIDs(dry), ids[:2]) {
		t.Fatalf("expiring: %v, %v; want %v", expiredIDs(dry), err, ids[:2])
	}
	if es, _ := catalog.Read(t.Context(), st, "db", "demo", ""); len(es) != 4 {
		t.Fatalf("listing what expires deleted something: %d entries left", len(es))
	}
	// A newer backup completes between the listing (a person confirming it) and the delete:
	// the third backup expires now too, and still only what was listed is deleted.
	putBackup(t, st, "20261205T000000Z", "data.xbstream.zst")
	done, err := catalog.DeleteExpired(t.Context(), st, c, dry, now)
	if err != nil || !slices.Equal(expiredIDs(done), ids[:2]) {
		t.Fatalf("delete: %v, %v; want %v", expiredIDs(done), err, ids[:2])
	}
	es, err := catalog.Read(t.Context(), st, "db", "demo", "")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range es {
		left = append(left, e.ID+" "+string(e.State))
	}
	if want := []string{"20261205T000000Z complete", ids[3] + " complete", ids[2] + " complete"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if _, ok := catalog.RetentionOf(&v1.MysqlCluster{Spec: v1.MysqlClusterSpec{Backup: &v1.BackupSpec{}}}); ok {
		t.Errorf("a cluster without retention has a rule")
	}
	if !strings.Contains(rule.String(), "the newest 2") {
		t.Errorf("rule in words: %q", rule.String())
	}
}
