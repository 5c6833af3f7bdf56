package objectstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

const part = 5 << 20

func storeOf(t *testing.T, s *testenv.S3, prefix string, mutate ...func(*objectstore.Config)) *objectstore.Store {
	t.Helper()
	cfg := objectstore.Config{Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket, Prefix: prefix, PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, PartSize: part, PartTimeout: 5 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	st, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// incomplete lists the multipart uploads in progress under prefix, straight from the store.
func incomplete(t *testing.T, s *testenv.S3, prefix string) int {
	t.Helper()
	out, err := s.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

// TestPutGetListDelete streams a small and a multipart object into the real store, reads both
// back byte for byte, lists them under the store's prefix only, and deletes them.
func TestPutGetListDelete(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	ctx := t.Context()
	st, other := storeOf(t, s, "backups/demo/"), storeOf(t, s, "backups/other/")
	if _, err := other.Put(ctx, "x", strings.NewReader("other")); err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{"b1/small": randomBytes(1000), "b1/big": randomBytes(2*part + 123)}
	for key, body := range bodies {
		obj, err := st.Put(ctx, key, io.MultiReader(bytes.NewReader(body))) // no Len: streamed
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if obj.Size != int64(len(body)) || obj.SHA256 != sha(body) || obj.Key != key {
			t.Errorf("put %s = %+v, want size %d sha %s", key, obj, len(body), sha(body))
		}
		rc, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("get %s: %d bytes (%v), want the %d put", key, len(got), err, len(body))
		}
	}
	objs, err := st.List(ctx, "b1/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Key != "b1/big" || objs[0].Size != 2*part+123 || objs[1].Key != "b1/small" || objs[1].Size != 1000 {
		t.Errorf("list = %+v", objs)
	}
	for key := range bodies {
		if err := st.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if objs, err := st.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Errorf("after delete: %+v %v", objs, err)
	}
	if objs, err := other.List(ctx, ""); err != nil || len(objs) != 1 {
		t.Errorf("the other prefix: %+v %v", objs, err)
	}
}

// failingReader yields n bytes, then fails (a backup tool that died mid-stream).
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("mariadb-backup exited with status 1")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

// TestFailedStreamLeavesNothing: a stream that fails after a part was uploaded leaves no object
// and no incomplete upload (it is aborted).
func TestFailedStreamLeavesNothing(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st := storeOf(t, s, "p/")
	_, err := st.Put(t.Context(), "b/data", &failingReader{n: part + part/2})
	if err == nil || !strings.Contains(err.Error(), "mariadb-backup exited") {
		t.Fatalf("put = %v, want the stream's error", err)
	}
	if objs, err := st.List(t.Context(), ""); err != nil || len(objs) != 0 {
		t.Errorf("listed after a failed upload: %+v %v", objs, err)
	}
	if n := incomplete(t, s, "p/"); n != 0 {
		t.Errorf("%d incomplete uploads left", n)
	}
}

// gatedReader yields one part, then tells waiting (the uploader has sent the first part and
// reads the next) and waits for gate before yielding the rest.
type gatedReader struct {
	first, rest   *bytes.Reader
	waiting, gate chan struct{}
	once          sync.Once
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.first.Len() > 0 {
		return g.first.Read(p)
	}
	g.once.Do(func() { close(g.waiting) })
	<-g.gate
	return g.rest.Read(p)
}

// TestStoreDownMidUpload: the store killed after the first part; the upload fails within its
// bounds (no hang), lists nothing once the store is back, the incomplete upload (whose abort
// could not reach the store) is removed by AbortIncomplete, and a retry succeeds.
func TestStoreDownMidUpload(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st := storeOf(t, s, "p/", func(c *objectstore.Config) { c.PartTimeout = 3 * time.Second })
	body := randomBytes(2*part + 1)
	g := &gatedReader{first: bytes.NewReader(body[:part]), rest: bytes.NewReader(body[part:]), waiting: make(chan struct{}), gate: make(chan struct{})}
	done := make(chan error, 1)
	began := time.Now()
	go func() { _, err := st.Put(context.Background(), "b/data", g); done <- err }()
	select {
	case <-g.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the first part was never sent")
	}
	if n := incomplete(t, s, "p/"); n != 1 {
		t.Fatalf("%d uploads in progress after the first part, want 1", n)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an upload to a dead store succeeded")
		}
		if !strings.Contains(err.Error(), "abort failed") {
			t.Errorf("the error does not say the abort failed: %v", err)
		}
		t.Logf("failed after %s: %v", time.Since(began).Round(time.Millisecond), err)
	case <-time.After(time.Minute):
		t.Fatal("the upload hung on a dead store")
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if objs, err := st.List(t.Context(), ""); err != nil || len(objs) != 0 {
		t.Errorf("listed after a failed upload: %+v %v", objs, err)
	}
	if n, err := st.AbortIncomplete(t.Context(), "", time.Now()); err != nil || n != 1 {
		t.Errorf("AbortIncomplete = %d, %v; want the one upload left", n, err)
	}
	if n := incomplete(t, s, "p/"); n != 0 {
		t.Errorf("%d incomplete uploads left", n)
	}
	obj, err := st.Put(t.Context(), "b/data", bytes.NewReader(body))
	if err != nil || obj.SHA256 != sha(body) {
		t.Fatalf("retry: %+v %v", obj, err)
	}
}

// TestFrozenStoreBoundedByPartTimeout: a store that accepts connections and answers nothing
// (SIGSTOP) fails a part after the part timeout, not never.
func TestFrozenStoreBoundedByPartTimeout(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st := storeOf(t, s, "p/", func(c *objectstore.Config) { c.PartTimeout = 2 * time.Second })
	pid := s.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	began := time.Now()
	_, err := st.Put(t.Context(), "b/data", bytes.NewReader(randomBytes(1000)))
	took := time.Since(began)
	if err == nil {
		t.Fatal("a put to a frozen store succeeded")
	}
	if took > 30*time.Second {
		t.Errorf("a put to a frozen store took %s with a 2 s part timeout", took)
	}
	t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
}

// TestRefusalsNeedAPerson: wrong keys and a missing bucket are configuration errors (exit code
// 6: retrying changes nothing) that say what to fix and never show the secret.
func TestRefusalsNeedAPerson(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	cases := map[string]func(*objectstore.Config){
		"wrong secret":   func(c *objectstore.Config) { c.SecretKey = "not-" + c.SecretKey },
		"unknown key":    func(c *objectstore.Config) { c.AccessKey = "nobody" },
		"missing bucket": func(c *objectstore.Config) { c.Bucket = "nothere" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			st := storeOf(t, s, "p/", mutate)
			_, err := st.Put(t.Context(), "k", strings.NewReader("x"))
			if !errors.Is(err, outcome.ErrConfig) {
				t.Fatalf("put = %v, want a configuration error", err)
			}
			want := "credentials"
			if name == "missing bucket" {
				want = "does not exist"
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("put = %v, want it to say %q", err, want)
			}
			if strings.Contains(err.Error(), s.SecretKey) {
				t.Errorf("the error shows the secret key")
			}
		})
	}
	cfg := objectstore.Config{Bucket: "b", AccessKey: "AK", SecretKey: "very-secret"}
	for _, out := range []string{cfg.String(), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)} {
		if strings.Contains(out, "very-secret") {
			t.Errorf("a printed Config shows the secret: %s", out)
		}
	}
}

// TestAbortIncompleteEveryPage: incomplete uploads listed over several pages are all aborted,
// and one started after the cut-off is kept.
func TestAbortIncompleteEveryPage(t *testing.T) {
	s := testenv.StartS3T(t, testenv.S3Options{})
	st := storeOf(t, s, "p/")
	objectstore.SetUploadPage(st, 2)
	c := s.Client()
	for i := range 5 {
		if _, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(s.Bucket), Key: aws.String(fmt.Sprintf("p/b%d/data", i))}); err != nil {
			t.Fatal(err)
		}
	}
	// The store records whole seconds: the cut-off is the next whole second, the newer upload
	// starts after it.
	cut := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(cut) + 100*time.Millisecond)
	if _, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(s.Bucket), Key: aws.String("p/new/data")}); err != nil {
		t.Fatal(err)
	}
	n, err := st.AbortIncomplete(t.Context(), "", cut)
	if err != nil || n != 5 {
		t.Fatalf("AbortIncomplete = %d, %v; want the 5 older uploads", n, err)
	}
	if left := incomplete(t, s, "p/"); left != 1 {
		t.Errorf("%d incomplete uploads left, want the newer one", left)
	}
}

// TestCompleteTimeoutGrowsWithSize: completing an upload may assemble its parts into one file, in
// time that grows with the object (a 5 GB object took more than 10 s on versitygw), so its
// request is given a part's timeout and a second per 20 MiB.
func TestCompleteTimeoutGrowsWithSize(t *testing.T) {
	for _, tt := range []struct {
		size int64
		want time.Duration
	}{
		{0, 10 * time.Second},
		{5 << 20, 10 * time.Second},
		{5 << 30, 10*time.Second + 256*time.Second},
	} {
		if got := objectstore.CompleteTimeout(10*time.Second, tt.size); got != tt.want {
			t.Errorf("completeTimeout(10s, %d) = %s, want %s", tt.size, got, tt.want)
		}
	}
}
