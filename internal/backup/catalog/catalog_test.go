package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

const prefix = "team-a/"

func storeOf(t *testing.T, s *testenv.S3) *objectstore.Store {
	t.Helper()
	st, err := objectstore.New(objectstore.Config{Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket, Prefix: prefix, PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, PartTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// putBackup writes a backup of db/demo as the agent does: its objects, then its manifest.
func putBackup(t *testing.T, st *objectstore.Store, id string, names ...string) backup.Manifest {
	t.Helper()
	at, err := time.Parse("20060102T150405Z", id[:16])
	if err != nil {
		t.Fatal(err)
	}
	m := backup.Manifest{Format: backup.FormatVersion, ID: id, Namespace: "db", Cluster: "demo", Method: backup.MethodPhysical,
		Flavor: "mariadb", ServerVersion: "10.11.14-MariaDB", Source: "demo-2", GTIDPosition: "0-1000-42",
		StartedAt: at, FinishedAt: at.Add(9 * time.Second), Compression: "zstd"}
	for _, n := range names {
		o, err := st.Put(t.Context(), backup.Key("db", "demo", id, n), strings.NewReader("the bytes of "+n+" of "+id))
		if err != nil {
			t.Fatal(err)
		}
		m.Objects = append(m.Objects, backup.Object{Name: n, Size: o.Size, SHA256: o.SHA256})
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), backup.Key("db", "demo", id, backup.ManifestName), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return m
}

func states(es []catalog.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID+"="+string(e.State))
	}
	return out
}

// TestReadFromTheStore lists a real bucket: a complete backup, one with an object deleted from
// the store (damaged), a manifest cut short (unreadable), a directory without a manifest
// (incomplete); describes one, and names the nearest IDs of an unknown one.
func TestReadFromTheStore(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st, ctx := storeOf(t, s), t.Context()
	if es, err := catalog.Read(ctx, st, "db", "demo", ""); err != nil || len(es) != 0 {
		t.Fatalf("an empty bucket: %+v %v", es, err)
	}
	a := putBackup(t, st, "20261201T000000Z-a", "data.xb.zst", "binlog.zst")
	putBackup(t, st, "20261202T000000Z-b", "data.xb.zst", "binlog.zst")
	if err := st.Delete(ctx, backup.Key("db", "demo", "20261202T000000Z-b", "binlog.zst")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, backup.Key("db", "demo", "20261203T000000Z-c", backup.ManifestName), strings.NewReader(`{"format": 1, "id": "2026`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, backup.Key("db", "demo", "20261204T000000Z-d", "data.xb.zst"), strings.NewReader("half")); err != nil {
		t.Fatal(err)
	}
	putBackup(t, st, "20261205T000000Z-e", "data.xb.zst")

	es, err := catalog.Read(ctx, st, "db", "demo", "20261206T000000Z-f")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"20261206T000000Z-f=running", "20261205T000000Z-e=complete", "20261204T000000Z-d=incomplete",
		"20261203T000000Z-c=unreadable", "20261202T000000Z-b=damaged", "20261201T000000Z-a=complete"}
	if got := states(es); !slices.Equal(got, want) {
		t.Fatalf("Read = %q\nwant %q", got, want)
	}
	if p := es[4].Problems; len(p) != 1 || !strings.Contains(p[0], "binlog.zst is missing") {
		t.Errorf("damaged: %q", p)
	}

	e, err := catalog.ReadOne(ctx, st, "db", "demo", a.ID, "")
	if err != nil || e.State != catalog.Complete || e.Manifest == nil || e.Manifest.Objects[1] != a.Objects[1] || len(e.Listed) != 3 {
		t.Fatalf("ReadOne(%s) = %+v, %v", a.ID, e, err)
	}
	// Not the running one's ID: that entry is the running backup's only.
	if e, err := catalog.ReadOne(ctx, st, "db", "demo", "20261206T000000Z-f", ""); !catalog.IsNotFound(err) {
		t.Errorf("ReadOne of an ID with no directory, none running = %+v, %v", e, err)
	}
	_, err = catalog.ReadOne(ctx, st, "db", "demo", "20261202T120000Z", "")
	var nf *catalog.NotFoundError
	if !errors.As(err, &nf) || !slices.Equal(nf.Nearest, []string{"20261201T000000Z-a", "20261202T000000Z-b", "20261203T000000Z-c"}) ||
		!strings.Contains(err.Error(), "no backup 20261202T120000Z in db/demo/backups/ (the nearest: 20261201T000000Z-a, 20261202T000000Z-b, 20261203T000000Z-c)") {
		t.Errorf("an unknown ID: %v", err)
	}
	// Typed short: not an ID, never a key; the IDs it begins are the nearest.
	if _, err := catalog.ReadOne(ctx, st, "db", "demo", "20261203", ""); !errors.As(err, &nf) || !slices.Equal(nf.Nearest, []string{"20261203T000000Z-c"}) {
		t.Errorf("an ID typed short: %v", err)
	}
	// A path is no ID: nothing outside the cluster's directory is read.
	if _, err := catalog.ReadOne(ctx, st, "db", "demo", "20261201T000000Z-a/../20261202T000000Z-b", ""); !catalog.IsNotFound(err) {
		t.Errorf("an ID that is a path: %v", err)
	}
	// Another cluster has none.
	if _, err := catalog.ReadOne(ctx, st, "db", "other", a.ID, ""); !catalog.IsNotFound(err) || !strings.Contains(err.Error(), "there are no backups there") {
		t.Errorf("another cluster: %v", err)
	}
}

// killingStore is the real store; it records the keys deleted and, after the first, kills the
// server (as a crash would) so that the delete is interrupted.
type killingStore struct {
	*objectstore.Store
	s3      *testenv.S3
	deleted []string
	kill    bool
}

func (k *killingStore) Delete(ctx context.Context, key string) error {
	if err := k.Store.Delete(ctx, key); err != nil {
		return err
	}
	k.deleted = append(k.deleted, key)
	if k.kill && len(k.deleted) == 1 {
		return k.s3.Kill()
	}
	return nil
}

// TestDeleteInterruptedAndFinished deletes a backup from a real store that dies after the first
// object: the manifest went first, so what is left is listed as incomplete, never as a backup;
// deleting it again finishes, and aborts the upload left in its directory.
func TestDeleteInterruptedAndFinished(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st, ctx := storeOf(t, s), t.Context()
	m := putBackup(t, st, "20261201T000000Z-a", "data.xb.zst", "binlog.zst", "a-first.zst")
	keep := putBackup(t, st, "20261201T000000Z-b", "data.xb.zst")
	// An upload an aborted backup left in the directory (its parts are kept until aborted).
	up, err := s.Client().CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.Bucket), Key: aws.String(prefix + backup.Key("db", "demo", m.ID, "more.zst"))})
	if err != nil {
		t.Fatal(err)
	}
	e, err := catalog.ReadOne(ctx, st, "db", "demo", m.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	ks := &killingStore{Store: st, s3: s, kill: true}
	d, err := catalog.Delete(ctx, ks, "db", "demo", e, time.Now().Add(time.Minute))
	if err == nil || d.Objects != 1 || !strings.Contains(err.Error(), "deleted 1 of the 4 objects of backup "+m.ID) {
		t.Fatalf("a delete interrupted by the store's death = %+v, %v", d, err)
	}
	if ks.deleted[0] != backup.Key("db", "demo", m.ID, backup.ManifestName) {
		t.Errorf("deleted first: %s, want the manifest", ks.deleted[0])
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	es, err := catalog.Read(ctx, st, "db", "demo", "")
	if got := states(es); err != nil || !slices.Equal(got, []string{keep.ID + "=complete", m.ID + "=incomplete"}) {
		t.Fatalf("after the interrupted delete: %q %v", got, err)
	}

	e, err = catalog.ReadOne(ctx, st, "db", "demo", m.ID, "")
	if err != nil || e.State != catalog.Incomplete {
		t.Fatalf("the incomplete directory: %+v %v", e, err)
	}
	ks = &killingStore{Store: st, s3: s}
	d, err = catalog.Delete(ctx, ks, "db", "demo", e, time.Now().Add(time.Minute))
	want := []string{backup.Key("db", "demo", m.ID, "a-first.zst"), backup.Key("db", "demo", m.ID, "binlog.zst"), backup.Key("db", "demo", m.ID, "data.xb.zst")}
	if err != nil || d.Objects != 3 || d.Bytes != e.ListedBytes() || d.AbortedUploads != 1 || !slices.Equal(ks.deleted, want) {
		t.Fatalf("the second delete = %+v %v, deleted %q", d, err, ks.deleted)
	}
	es, err = catalog.Read(ctx, st, "db", "demo", "")
	if got := states(es); err != nil || !slices.Equal(got, []string{keep.ID + "=complete"}) {
		t.Errorf("after the second delete: %q %v", got, err)
	}
	uploads, err := s.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	if err != nil || len(uploads.Uploads) != 0 {
		t.Errorf("uploads left: %+v %v (started %s)", uploads, err, aws.ToString(up.UploadId))
	}
}
