package backup_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func manifest(objs ...backup.Object) backup.Manifest {
	at := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	return backup.Manifest{Format: backup.FormatVersion, ID: backup.NewID(at, ""), Namespace: "db", Cluster: "demo", Method: backup.MethodPhysical,
		Flavor: "mariadb", ServerVersion: "10.11.14-MariaDB", Source: "demo-1", GTIDPosition: "0-1000-42",
		StartedAt: at, FinishedAt: at.Add(time.Minute), Compression: "zstd", Objects: objs}
}

func TestManifestRoundTripAndRefusals(t *testing.T) {
	m := manifest(backup.Object{Name: "data.xb.zst", Size: 3, SHA256: sum([]byte("abc"))})
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := backup.Decode(b)
	if err != nil || got.ID != "20261206T210000Z" || got.Objects[0] != m.Objects[0] || !got.StartedAt.Equal(m.StartedAt) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	if _, err := backup.Decode(bytes.Replace(b, []byte(`"format"`), []byte(`"encryption": "age", "format"`), 1)); !errors.Is(err, outcome.ErrInvalid) {
		t.Errorf("a manifest with an unknown field (a newer format) decoded: %v", err)
	}
	bad := m
	bad.Format, bad.ID, bad.Method = 2, "yesterday", "copy"
	bad.Objects = append(bad.Objects, backup.Object{Name: "manifest.json", SHA256: "x"}, m.Objects[0])
	err = bad.Validate()
	for _, want := range []string{"format 2", `id "yesterday"`, `method "copy"`, `object name "manifest.json"`, "data.xb.zst listed twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to name %s", err, want)
		}
	}
	if _, err := bad.Encode(); err == nil {
		t.Error("an invalid manifest was encoded")
	}
}

func TestListCompleteOnly(t *testing.T) {
	d := backup.Dir("db", "demo")
	objs := []objectstore.Object{
		{Key: d + "20261206T220000Z/data.xb.zst"}, // running: no manifest yet
		{Key: d + "20261206T210000Z/data.xb.zst"}, {Key: d + "20261206T210000Z/manifest.json"},
		{Key: d + "20261205T210000Z-b/manifest.json"}, {Key: d + "20261205T210000Z-b/data.xb.zst"},
		{Key: backup.Dir("db", "other") + "20261206T230000Z/manifest.json"}, // another cluster
		{Key: d + "notes.txt"}, {Key: d + "not-an-id/manifest.json"},
	}
	l := backup.List("db", "demo", objs)
	if strings.Join(l.Complete, ",") != "20261205T210000Z-b,20261206T210000Z" || strings.Join(l.Incomplete, ",") != "20261206T220000Z" {
		t.Errorf("List = %+v", l)
	}
}

func TestVerifiedReader(t *testing.T) {
	body := []byte("the data directory")
	o := backup.Object{Name: "data", Size: int64(len(body)), SHA256: sum(body)}
	if got, err := io.ReadAll(backup.Verified("k", o, bytes.NewReader(body))); err != nil || !bytes.Equal(got, body) {
		t.Errorf("intact: %q %v", got, err)
	}
	flipped := bytes.Clone(body)
	flipped[3] ^= 1
	for name, tc := range map[string]struct {
		r    []byte
		want string
	}{
		"a flipped bit": {flipped, "SHA-256"},
		"truncated":     {body[:5], "ended after 5 bytes"},
		"longer":        {append(bytes.Clone(body), 'x'), "longer than"},
	} {
		_, err := io.ReadAll(backup.Verified("bucket/db/demo/backups/x/data", o, bytes.NewReader(tc.r)))
		if !errors.Is(err, backup.ErrDamaged) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bucket/db/demo/backups/x/data") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDamagedBackupInTheStore writes a backup to the real store, then damages it there: a part
// deleted and a part's bytes changed on the store's disk are each found, with the object named,
// before anything is restored from it; a backup without its manifest is not listed.
func TestDamagedBackupInTheStore(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st, err := objectstore.New(objectstore.Config{Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket, Prefix: "mysqlctl/", PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	m := manifest()
	for _, name := range []string{"data.xb.zst", "binlog.zst"} {
		o, err := st.Put(ctx, backup.Key("db", "demo", m.ID, name), strings.NewReader("contents of "+name))
		if err != nil {
			t.Fatal(err)
		}
		m.Objects = append(m.Objects, backup.Object{Name: name, Size: o.Size, SHA256: o.SHA256})
	}
	listed, _ := st.List(ctx, backup.Dir("db", "demo"))
	if l := backup.List("db", "demo", listed); len(l.Complete) != 0 || len(l.Incomplete) != 1 {
		t.Fatalf("before its manifest: %+v", l)
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, backup.Key("db", "demo", m.ID, backup.ManifestName), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	listed, _ = st.List(ctx, backup.Dir("db", "demo"))
	if l := backup.List("db", "demo", listed); len(l.Complete) != 1 || backup.CheckPresent(m, listed) != nil {
		t.Fatalf("complete: %+v %v", l, backup.CheckPresent(m, listed))
	}

	// Damage one part on the store's own disk (same size, other bytes): only reading finds it.
	path := filepath.Join(s.Dir, s.Bucket, "mysqlctl", backup.Key("db", "demo", m.ID, "data.xb.zst"))
	if err := os.WriteFile(path, []byte("CONTENTS of data.xb.zst"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := st.Get(ctx, backup.Key("db", "demo", m.ID, "data.xb.zst"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(backup.Verified("data.xb.zst of "+m.ID, m.Objects[0], rc))
	_ = rc.Close()
	if !errors.Is(err, backup.ErrDamaged) || !strings.Contains(err.Error(), "data.xb.zst") {
		t.Errorf("a changed part read as intact: %v", err)
	}

	// Delete the other part: the listing finds it missing.
	if err := st.Delete(ctx, backup.Key("db", "demo", m.ID, "binlog.zst")); err != nil {
		t.Fatal(err)
	}
	listed, _ = st.List(ctx, backup.Dir("db", "demo"))
	if err := backup.CheckPresent(m, listed); !errors.Is(err, backup.ErrDamaged) || !strings.Contains(err.Error(), "binlog.zst is missing") {
		t.Errorf("a missing part: %v", err)
	}
}
