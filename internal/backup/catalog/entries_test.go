package catalog

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
)

// snapshot builds what Read gathers: a listing and the manifests read, for cluster db/demo.
type snapshot struct {
	objs      []objectstore.Object
	manifests map[string]manifestRead
}

func newSnapshot() *snapshot { return &snapshot{manifests: map[string]manifestRead{}} }

// object lists an object of backup id.
func (s *snapshot) object(id, name string, size int64) *snapshot {
	s.objs = append(s.objs, objectstore.Object{Key: backup.Key("db", "demo", id, name), Size: size})
	return s
}

// backup lists a backup of id whose manifest records objects of the given sizes (data0, data1 …),
// all listed with the sizes listed.
func (s *snapshot) backup(id string, recorded, listed []int64) *snapshot {
	m := testManifest(id)
	for i, n := range recorded {
		m.Objects = append(m.Objects, backup.Object{Name: "data" + string(rune('0'+i)), Size: n, SHA256: strings.Repeat("a", 64)})
	}
	for i, n := range listed {
		s.object(id, "data"+string(rune('0'+i)), n)
	}
	s.object(id, backup.ManifestName, 700)
	s.manifests[id] = manifestRead{m: m}
	return s
}

func testManifest(id string) backup.Manifest {
	at := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	return backup.Manifest{Format: backup.FormatVersion, ID: id, Namespace: "db", Cluster: "demo", Method: backup.MethodPhysical,
		Flavor: "mariadb", ServerVersion: "10.11.14-MariaDB", Source: "demo-2", GTIDPosition: "0-1000-42",
		StartedAt: at, FinishedAt: at.Add(time.Minute), Compression: "zstd"}
}

// TestEntriesStates decides each kind of directory from a listing, newest first.
func TestEntriesStates(t *testing.T) {
	const (
		complete   = "20261201T000000Z-a"
		damaged    = "20261202T000000Z-b"
		unreadable = "20261203T000000Z-c"
		other      = "20261204T000000Z-d"
		incomplete = "20261205T000000Z-e"
		running    = "20261206T000000Z-f"
	)
	s := newSnapshot().
		backup(complete, []int64{3, 4}, []int64{3, 4}).
		backup(damaged, []int64{3, 4}, []int64{3}).
		object(unreadable, backup.ManifestName, 10).
		backup(other, []int64{3}, []int64{3}).
		object(incomplete, "data0", 99).
		object(running, "data0", 5)
	s.manifests[unreadable] = manifestRead{err: errors.New("backup manifest: unexpected EOF")}
	s.manifests[other] = manifestRead{m: testManifest("20261130T000000Z")}
	// Another cluster's backup and a key that is no backup's are not this cluster's.
	s.objs = append(s.objs, objectstore.Object{Key: backup.Key("db", "other", "20261207T000000Z", backup.ManifestName)},
		objectstore.Object{Key: backup.Dir("db", "demo") + "notes.txt"})

	got := entries("db", "demo", s.objs, s.manifests, running)
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID+"="+string(e.State))
	}
	want := []string{running + "=running", incomplete + "=incomplete", other + "=unreadable", unreadable + "=unreadable", damaged + "=damaged", complete + "=complete"}
	if !slices.Equal(ids, want) {
		t.Fatalf("entries = %q\nwant %q", ids, want)
	}
	byID := map[string]Entry{}
	for _, e := range got {
		byID[e.ID] = e
	}
	if e := byID[complete]; e.Manifest == nil || len(e.Problems) != 0 || e.ListedBytes() != 3+4+700 || len(e.Listed) != 3 || e.Listed[2].Name != backup.ManifestName {
		t.Errorf("complete: %+v", e)
	}
	if e := byID[damaged]; e.Manifest == nil || !slices.Equal(e.Problems, []string{backup.Key("db", "demo", damaged, "data1") + " is missing"}) {
		t.Errorf("damaged: %+v", e)
	}
	if e := byID[unreadable]; e.Manifest != nil || !slices.Equal(e.Problems, []string{"backup manifest: unexpected EOF"}) {
		t.Errorf("unreadable: %+v", e)
	}
	if e := byID[other]; e.Manifest != nil || len(e.Problems) != 1 || !strings.Contains(e.Problems[0], "names backup 20261130T000000Z of db/demo") {
		t.Errorf("a manifest of another backup: %+v", e)
	}
	if e := byID[incomplete]; e.Manifest != nil || e.ListedBytes() != 99 {
		t.Errorf("incomplete: %+v", e)
	}
}

// TestEntriesRunningWithNothingListed: the running backup is an entry before its first object is
// listed (an upload in progress is not), and no other ID is taken for it.
func TestEntriesRunningWithNothingListed(t *testing.T) {
	s := newSnapshot().backup("20261201T000000Z-a", []int64{3}, []int64{3})
	got := entries("db", "demo", s.objs, s.manifests, "20261209T000000Z-z")
	if len(got) != 2 || got[0].ID != "20261209T000000Z-z" || got[0].State != Running || got[0].Listed == nil || len(got[0].Listed) != 0 {
		t.Errorf("entries = %+v", got)
	}
	if got := entries("db", "demo", nil, nil, ""); len(got) != 0 {
		t.Errorf("no listing, none running: %+v", got)
	}
}

func TestDeleteOrderOfAnEntry(t *testing.T) {
	e := Entry{ID: "20261201T000000Z-a", Listed: []Listed{{Name: "binlog", Size: 1}, {Name: backup.ManifestName, Size: 2}, {Name: "data", Size: 3}}}
	var got []string
	for _, l := range e.DeleteOrder() {
		got = append(got, l.Name)
	}
	if !slices.Equal(got, []string{backup.ManifestName, "binlog", "data"}) || e.Listed[0].Name != "binlog" {
		t.Errorf("DeleteOrder = %q (listed now %+v)", got, e.Listed)
	}
}

// TestJudge: a manifest of another cluster of the same name is foreign (and never complete), the
// backup the status records as failed is failed; entries without a manifest are left as read.
func TestJudge(t *testing.T) {
	s := newSnapshot().backup("20261206T210000Z-a", []int64{10}, []int64{10}).backup("20261206T220000Z-b", []int64{10}, []int64{10})
	ms := s.manifests["20261206T210000Z-a"]
	ms.m.ClusterUID = "uid-old"
	s.manifests["20261206T210000Z-a"] = ms
	es := entries("db", "demo", s.objs, s.manifests, "20261206T230000Z-c")
	c := &v1.MysqlCluster{}
	c.Namespace, c.Name, c.UID = "db", "demo", "uid-1"
	c.Status.Backup = &v1.BackupStatus{LastFailure: &v1.BackupRecord{ID: "20261206T220000Z-b", Message: "demo-2 was quarantined while it was copied"}}
	got := map[string]Entry{}
	for _, e := range es {
		got[e.ID] = e.Judge(c)
	}
	if e := got["20261206T210000Z-a"]; e.State != Foreign || !strings.Contains(strings.Join(e.Problems, ";"), "uid-old") {
		t.Errorf("another cluster's backup: %s %v", e.State, e.Problems)
	}
	if e := got["20261206T220000Z-b"]; e.State != Failed || !strings.Contains(strings.Join(e.Problems, ";"), "quarantined") {
		t.Errorf("the failed backup: %s %v", e.State, e.Problems)
	}
	if e := got["20261206T230000Z-c"]; e.State != Running {
		t.Errorf("the running one: %s", e.State)
	}
	c.Status.Backup = nil
	ms.m.ClusterUID = "uid-1"
	s.manifests["20261206T210000Z-a"] = ms
	for _, e := range entries("db", "demo", s.objs, s.manifests, "") {
		if e.Judge(c).State != Complete {
			t.Errorf("%s of this cluster, not failed: %s", e.ID, e.Judge(c).State)
		}
	}
}
