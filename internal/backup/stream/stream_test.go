package stream_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/seal"
	"github.com/mysqlctl/mysqlctl/internal/backup/stream"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

func store(t *testing.T) (*testenv.S3, *objectstore.Store) {
	t.Helper()
	s := testenv.StartS3T(t, testenv.S3Options{})
	st, err := objectstore.New(objectstore.Config{Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket, Prefix: "m/", PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, PartSize: 5 << 20, PartTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

// data is n bytes shaped like a data directory: runs of zeroes (free pages) between random
// pages, so that it compresses, but not to nothing.
func data(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i += 16 << 10 {
		if r.IntN(2) == 0 {
			for j := i; j < min(n, i+16<<10); j++ {
				b[j] = byte(r.Uint32())
			}
		}
	}
	return b
}

// TestUploadDownload streams 24 MiB through the compressor into the real store in parts and
// back: the bytes are the same, the stored object is smaller, and the manifest entry is what
// the store holds.
func TestUploadDownload(t *testing.T) {
	_, st := store(t)
	body := data(24 << 20)
	var raw stream.Counter
	o, n, err := stream.Upload(t.Context(), st, "b/data.xb.zst", "data.xb.zst", io.MultiReader(bytes.NewReader(body)), &raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(body)) || raw.Bytes() != n || o.Name != "data.xb.zst" || o.Size <= 0 || o.Size >= n*3/4 {
		t.Errorf("upload = %+v raw %d (counted %d), want raw %d compressed to under 3/4", o, n, raw.Bytes(), len(body))
	}
	t.Logf("%d bytes stored as %d", n, o.Size)
	var out bytes.Buffer
	got, err := stream.Download(t.Context(), st, "b/data.xb.zst", o, &out)
	if err != nil || got != n || !bytes.Equal(out.Bytes(), body) {
		t.Fatalf("download: %d bytes, %v; equal %v", got, err, bytes.Equal(out.Bytes(), body))
	}
}

type dying struct {
	r   io.Reader
	err error
}

func (d *dying) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, d.err
	}
	return n, err
}

// TestSourceDiesNothingStored: a backup tool that dies after 12 MiB (two parts sent) leaves no
// object and no incomplete upload, and the error says how far it got.
func TestSourceDiesNothingStored(t *testing.T) {
	_, st := store(t)
	_, _, err := stream.Upload(t.Context(), st, "b/data.xb.zst", "data.xb.zst",
		&dying{bytes.NewReader(data(12 << 20)), errors.New("mariadb-backup: exit status 1")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "mariadb-backup: exit status 1") || !strings.Contains(err.Error(), "after 12582912 bytes") {
		t.Fatalf("upload = %v", err)
	}
	if objs, err := st.List(t.Context(), ""); err != nil || len(objs) != 0 {
		t.Errorf("stored after a failed stream: %+v %v", objs, err)
	}
	if n, err := st.AbortIncomplete(t.Context(), "", time.Now()); err != nil || n != 0 {
		t.Errorf("incomplete uploads left: %d %v", n, err)
	}
}

// TestDamagedObjectRefused: an object changed in the store (one byte, on the store's disk) is
// refused by name when read back, whatever the decompressor made of it.
func TestDamagedObjectRefused(t *testing.T) {
	s, st := store(t)
	o, _, err := stream.Upload(t.Context(), st, "b/data.xb.zst", "data.xb.zst", bytes.NewReader(data(1<<20)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir, s.Bucket, "m", "b", "data.xb.zst")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Download(t.Context(), st, "b/data.xb.zst", o, io.Discard)
	// The zstd frame's own checksum or the manifest's SHA-256 finds it first: either way the
	// restore stops, naming the object.
	if !errors.Is(err, backup.ErrDamaged) || !strings.Contains(err.Error(), "b/data.xb.zst") {
		t.Fatalf("a damaged object read back, or unnamed: %v", err)
	}
	t.Logf("refused: %v", err)
}

// TestSwappedObjectRefused: a valid object that is not the one the manifest records (another
// backup's, copied over it) decompresses cleanly and is still refused, by the manifest's SHA-256.
func TestSwappedObjectRefused(t *testing.T) {
	_, st := store(t)
	o, _, err := stream.Upload(t.Context(), st, "b1/data.xb.zst", "data.xb.zst", bytes.NewReader(data(1<<20)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := stream.Upload(t.Context(), st, "b1/data.xb.zst", "data.xb.zst", bytes.NewReader(data(1<<19)), nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Download(t.Context(), st, "b1/data.xb.zst", o, io.Discard)
	if !errors.Is(err, backup.ErrDamaged) || !strings.Contains(err.Error(), "b1/data.xb.zst") {
		t.Fatalf("another valid object read as the recorded one: %v", err)
	}
}

// TestUploadDownloadEncrypted: a stream encrypted to a public key is stored in the real store as
// age's format (none of the plain bytes readable) and comes back whole with the private key; the
// wrong key is told apart from damage (nothing is read), and a byte changed in the store is damage,
// found by the SHA-256 without any key.
func TestUploadDownloadEncrypted(t *testing.T) {
	s3, st := store(t)
	key, other := mustKey(t), mustKey(t)
	to, err := seal.ParseRecipients([]string{key.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("acknowledged row\n"), 1<<20) // 17 MiB, parts of 5 MiB
	o, n, err := stream.Upload(t.Context(), st, "e/data.xb.zst", "data.xb.zst", bytes.NewReader(body), nil, to)
	if err != nil || n != int64(len(body)) {
		t.Fatalf("upload: %d, %v", n, err)
	}
	stored, err := st.Get(t.Context(), "e/data.xb.zst")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(stored)
	_ = stored.Close()
	if err != nil || int64(len(raw)) != o.Size || !bytes.HasPrefix(raw, []byte("age-encryption.org/v1")) || bytes.Contains(raw, []byte("acknowledged")) {
		t.Fatalf("stored %d bytes (%v), manifest %d: want age's format, nothing readable", len(raw), err, o.Size)
	}
	ids := func(k *age.X25519Identity) seal.Identities {
		is, err := seal.ParseIdentities(k.String())
		if err != nil {
			t.Fatal(err)
		}
		return is
	}
	var out bytes.Buffer
	if got, err := stream.DownloadCounted(t.Context(), st, "e/data.xb.zst", o, &out, nil, ids(key)); err != nil || got != n || !bytes.Equal(out.Bytes(), body) {
		t.Fatalf("download with the key: %d bytes, %v", got, err)
	}
	out.Reset()
	_, err = stream.DownloadCounted(t.Context(), st, "e/data.xb.zst", o, &out, nil, ids(other))
	if !errors.Is(err, seal.ErrNoIdentity) || errors.Is(err, backup.ErrDamaged) || out.Len() != 0 || !strings.Contains(err.Error(), "e/data.xb.zst") {
		t.Errorf("download with another key: %v, %d bytes; want ErrNoIdentity naming the object, nothing written", err, out.Len())
	}
	// A byte changed in the store, in the body and in the header's key stanza (which reads as a
	// key that does not match): damage, found by the SHA-256, whatever the key.
	for _, at := range []int{len(raw) / 2, bytes.Index(raw, []byte("X25519 ")) + 10} {
		changed := bytes.Clone(raw)
		changed[at] ^= 1
		if _, err := s3.Client().PutObject(t.Context(), &s3api.PutObjectInput{Bucket: &s3.Bucket, Key: ptrTo("m/e/data.xb.zst"), Body: bytes.NewReader(changed)}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.DownloadCounted(t.Context(), st, "e/data.xb.zst", o, io.Discard, nil, ids(key)); !errors.Is(err, backup.ErrDamaged) || errors.Is(err, seal.ErrNoIdentity) {
			t.Errorf("byte %d of %d changed in the store: %v; want ErrDamaged", at, len(raw), err)
		}
	}
}

func mustKey(t *testing.T) *age.X25519Identity {
	t.Helper()
	k, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ptrTo(s string) *string { return &s }
