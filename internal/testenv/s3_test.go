package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// What backups need from the store: parts of 5 MiB (S3's minimum part size) streamed as they are
// produced, never the whole body first.
const (
	partSize   = 5 << 20
	streamSize = 20<<20 + 12345 // four full parts and a short fifth
)

// TestS3MultipartStreamRoundTrip uploads a streamed (unseekable, incompressible) body of ~20 MiB
// in 5 MiB parts with the SDK's transfer manager, lists it by prefix among other keys, reads it
// back with the same SHA-256, finds its bytes in the POSIX backend, and deletes it.
func TestS3MultipartStreamRoundTrip(t *testing.T) {
	logs := &lockedBuffer{}
	s := StartS3T(t, S3Options{Log: logs})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := s.Client()
	tm := transfermanager.New(c, func(o *transfermanager.Options) {
		o.PartSizeBytes = partSize
		o.MultipartUploadThreshold = partSize
		o.Concurrency = 2
	})

	key := "backups/demo/20261206T000000Z/data.xbstream"
	body := newStream(1, streamSize)
	up, err := tm.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: body,
	})
	if err != nil {
		t.Fatalf("multipart upload: %v", err)
	}
	if aws.ToString(up.UploadID) == "" || len(up.CompletedParts) != 5 {
		t.Fatalf("want a multipart upload of 5 parts, got upload ID %q and %d parts", aws.ToString(up.UploadID), len(up.CompletedParts))
	}
	sent := body.Sum()

	// Neighbours that a prefix must tell apart.
	for _, k := range []string{"backups/demo/20261206T000000Z/manifest.json", "backups/demo2/x", "backups/other/y", "top"} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	list := func(prefix string) []string {
		t.Helper()
		var keys []string
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(1)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("list %q: %v", prefix, err)
			}
			for _, o := range page.Contents {
				keys = append(keys, aws.ToString(o.Key))
				if aws.ToString(o.Key) == key && aws.ToInt64(o.Size) != streamSize {
					t.Errorf("listed size of %s: %d, want %d", key, aws.ToInt64(o.Size), streamSize)
				}
			}
		}
		return keys
	}
	if got, want := list("backups/demo/"), []string{"backups/demo/20261206T000000Z/data.xbstream", "backups/demo/20261206T000000Z/manifest.json"}; !slices.Equal(got, want) {
		t.Errorf("list backups/demo/ (one key a page) = %q, want %q", got, want)
	}

	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, get.Body)
	_ = get.Body.Close()
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if n != streamSize || !bytes.Equal(h.Sum(nil), sent) {
		t.Fatalf("read back %d bytes with SHA-256 %x, sent %d bytes with %x", n, h.Sum(nil), streamSize, sent)
	}
	// A real store: the object is a file of the POSIX backend.
	if st, err := os.Stat(filepath.Join(s.Dir, s.Bucket, filepath.FromSlash(key))); err != nil || st.Size() != streamSize {
		t.Errorf("backend file of %s: %v (size %d, want %d)", key, err, sizeOf(st), streamSize)
	}

	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	if status(err) != http.StatusNotFound {
		t.Errorf("head after delete: %v, want 404", err)
	}
	if got := list("backups/demo/"); !slices.Equal(got, []string{"backups/demo/20261206T000000Z/manifest.json"}) {
		t.Errorf("list after delete = %q", got)
	}
	assertNoKeys(t, s, logs.String())
}

// TestS3WrongKeysRefused: a request signed with a wrong secret or an unknown access key is refused
// with 403 and writes nothing, and the error does not carry either secret.
func TestS3WrongKeysRefused(t *testing.T) {
	logs := &lockedBuffer{}
	s := StartS3T(t, S3Options{Log: logs})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wrong := "wrong" + s.SecretKey[5:]
	for _, tc := range []struct {
		name, access, secret, code string
	}{
		{"wrong secret", s.AccessKey, wrong, "SignatureDoesNotMatch"},
		{"unknown access key", "VGWUNKNOWNACCESSKEY0", s.SecretKey, "InvalidAccessKeyId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.Client(func(o *s3.Options) {
				o.Credentials = credentials.NewStaticCredentialsProvider(tc.access, tc.secret, "")
			})
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("refused"), Body: strings.NewReader("x")})
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != tc.code || status(err) != http.StatusForbidden {
				t.Fatalf("put with %s: %v, want 403 %s", tc.name, err, tc.code)
			}
			if strings.Contains(err.Error(), s.SecretKey) || strings.Contains(err.Error(), wrong) {
				t.Errorf("the error shows a secret key: %v", err)
			}
			if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket)}); status(err) != http.StatusForbidden {
				t.Errorf("list with %s: %v, want 403", tc.name, err)
			}
		})
	}
	_, err := s.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("refused")})
	if status(err) != http.StatusNotFound {
		t.Errorf("a refused put wrote the object: head = %v, want 404", err)
	}
	assertNoKeys(t, s, logs.String())
}

// TestS3StoppedMidUpload: the store stopping (SIGTERM) or crashing (SIGKILL) in the middle of a
// multipart upload (parts stored, more to come) makes the upload fail with an error well before
// the caller's deadline, never hang. After a crash and a restart no object was published, the
// incomplete upload is still listed (someone must abort it), and a retry succeeds.
func TestS3StoppedMidUpload(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*S3) error
	}{
		{"SIGTERM", (*S3).Stop},
		{"SIGKILL", (*S3).Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StartS3T(t, S3Options{})
			// Retries stay (a backup would keep them), with short back-offs so that the test is fast.
			c := s.Client(func(o *s3.Options) {
				o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), 200*time.Millisecond)
			})
			const deadline = 15 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			err := uploadInterrupted(ctx, t, s, c, "interrupted", func() error { return tc.stop(s) })
			took := time.Since(start)
			if err == nil {
				t.Fatal("the upload succeeded although the store stopped in the middle")
			}
			// transfermanager flattens causes into its message: the context tells a hang.
			if ctx.Err() != nil {
				t.Fatalf("the upload hung until the caller's %s deadline: %v", deadline, err)
			}
			t.Logf("upload failed after %s: %v", took.Round(time.Millisecond), err)
			if tc.name != "SIGKILL" {
				return
			}
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer rcancel()
			if err := s.Restart(rctx); err != nil {
				t.Fatalf("restart: %v", err)
			}
			c = s.Client()
			if _, err := c.HeadObject(rctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("interrupted")}); status(err) != http.StatusNotFound {
				t.Errorf("after the crash the object exists: head = %v, want 404", err)
			}
			mu, err := c.ListMultipartUploads(rctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket)})
			if err != nil {
				t.Fatal(err)
			}
			if len(mu.Uploads) != 1 || aws.ToString(mu.Uploads[0].Key) != "interrupted" {
				t.Fatalf("incomplete uploads after the crash: %d, want the interrupted one", len(mu.Uploads))
			}
			if _, err := c.AbortMultipartUpload(rctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.Bucket), Key: aws.String("interrupted"), UploadId: mu.Uploads[0].UploadId}); err != nil {
				t.Errorf("abort the interrupted upload: %v", err)
			}
			retry := newStream(2, streamSize)
			if _, err := transfermanager.New(c, func(o *transfermanager.Options) { o.PartSizeBytes = partSize }).UploadObject(rctx,
				&transfermanager.UploadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("interrupted"), Body: retry}); err != nil {
				t.Fatalf("retry after the restart: %v", err)
			}
		})
	}
}

// TestS3FrozenMidUpload: a store that stops answering (SIGSTOP: connections open, nothing read)
// in the middle of a multipart upload holds the upload until the caller's deadline and no longer:
// the SDK's client has no timeout of its own, so a backup must give every transfer a deadline.
func TestS3FrozenMidUpload(t *testing.T) {
	s := StartS3T(t, S3Options{})
	const deadline = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	pid := s.PID()
	// Runs before StartS3T's Stop (cleanups run last first): a stopped process ignores SIGTERM.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	start := time.Now()
	err := uploadInterrupted(ctx, t, s, s.Client(), "frozen", func() error { return syscall.Kill(pid, syscall.SIGSTOP) })
	took := time.Since(start)
	// transfermanager v0.5 flattens the cause into its message (errors.Is finds no
	// DeadlineExceeded in it): the caller's context says why.
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("upload to a frozen store: %v (context: %v), want a failure at the caller's deadline", err, ctx.Err())
	}
	// It ended with its deadline, not when the store woke up.
	if st := procState(pid); st != 'T' {
		t.Errorf("the store's state is %q when the upload returns, want T (still stopped)", st)
	}
	t.Logf("upload ended after %s: %v", took.Round(time.Millisecond), err)
}

// uploadInterrupted uploads a streamed body to key in 5 MiB parts, one at a time, and calls
// interrupt (the test fails if it errs) once the store holds a part and the body is in its third;
// it returns the upload's error.
func uploadInterrupted(ctx context.Context, t *testing.T, s *S3, c *s3.Client, key string, interrupt func() error) error {
	t.Helper()
	tm := transfermanager.New(c, func(o *transfermanager.Options) {
		o.PartSizeBytes = partSize
		o.MultipartUploadThreshold = partSize
		o.Concurrency = 1
	})
	body := newStream(2, streamSize)
	body.pauseAt, body.paused, body.resume = 2*partSize+partSize/2, make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(body.resume)
		select {
		case <-body.paused:
		case <-ctx.Done():
			done <- ctx.Err()
			return
		}
		if err := waitForStoredPart(ctx, s, key); err != nil {
			done <- err
			return
		}
		done <- interrupt()
	}()
	_, err := tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: body})
	if ierr := <-done; ierr != nil {
		t.Fatalf("interrupt the upload: %v", ierr)
	}
	return err
}

// waitForStoredPart waits until the store holds at least one part of an incomplete upload of key.
func waitForStoredPart(ctx context.Context, s *S3, key string) error {
	c := s.Client()
	for {
		mu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket), Prefix: aws.String(key)})
		if err == nil && len(mu.Uploads) == 1 {
			parts, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), UploadId: mu.Uploads[0].UploadId})
			if err == nil && len(parts.Parts) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no part of %s stored: %w", key, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestS3StartStop: the store listens on loopback only, keeps its keys off its command line and out
// of its output and of its printed form, and Stop ends the process and removes its directory.
func TestS3StartStop(t *testing.T) {
	logs := &lockedBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartS3(ctx, S3Options{Log: logs, Bucket: "other-bucket", Region: "eu-test-1"})
	if err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	t.Cleanup(func() { _ = s.Stop() })
	if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
		t.Errorf("endpoint %s is not on 127.0.0.1", s.Endpoint)
	}
	if _, err := s.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("other-bucket")}); err != nil {
		t.Errorf("bucket not created: %v", err)
	}
	// A signature for another region is refused: the region is part of the store's contract.
	_, err = s.Client(func(o *s3.Options) { o.Region = "us-east-1" }).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("other-bucket")})
	if err == nil {
		t.Errorf("a request signed for us-east-1 was accepted by a store in eu-test-1")
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cmdline, []byte(s.SecretKey)) || bytes.Contains(cmdline, []byte(s.AccessKey)) {
		t.Errorf("the command line of versitygw shows its keys")
	}
	assertNoKeys(t, s, logs.String())

	dir := s.Dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) || s.PID() != 0 {
		t.Errorf("versitygw %d still runs after Stop", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s left behind: %v", dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// TestS3DataOutlivesTheServer: a store started over the directory of a stopped one (new keys)
// serves its bucket and objects, as the rig's store does after `rig down --keep-dir` and `rig up`.
func TestS3DataOutlivesTheServer(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := StartS3T(t, S3Options{Dir: dir})
	if _, err := first.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(first.Bucket), Key: aws.String("kept"), Body: strings.NewReader("kept")}); err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	second := StartS3T(t, S3Options{Dir: dir})
	if second.SecretKey == first.SecretKey {
		t.Fatal("the second store has the first one's keys")
	}
	get, err := second.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(second.Bucket), Key: aws.String("kept")})
	if err != nil {
		t.Fatalf("the second store does not serve the first one's object: %v", err)
	}
	b, err := io.ReadAll(get.Body)
	_ = get.Body.Close()
	if err != nil || string(b) != "kept" {
		t.Errorf("read %q, %v", b, err)
	}
}

// assertNoKeys fails when the store's output or its printed forms show a key.
func assertNoKeys(t *testing.T, s *S3, logs string) {
	t.Helper()
	for _, form := range []string{logs, fmt.Sprint(s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), fmt.Sprintf("%v", *s)} {
		if strings.Contains(form, s.SecretKey) {
			t.Errorf("the secret key shows in %q", form)
		}
	}
	if strings.Contains(logs, s.AccessKey) {
		t.Errorf("the access key shows in the store's output:\n%s", logs)
	}
}

// procState is a process's state letter from /proc/PID/stat (0 when it is gone).
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

// status is the HTTP status of an SDK error (0 for none).
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// stream is an unseekable, incompressible body of n bytes that hashes what it hands out, as a
// backup tool's pipe would be; it can pause once at pauseAt until resume is closed.
type stream struct {
	rng     *rand.ChaCha8
	left    int64
	done    int64
	hash    hash.Hash
	pauseAt int64
	paused  chan struct{}
	resume  chan struct{}
}

func newStream(seed byte, n int64) *stream {
	return &stream{rng: rand.NewChaCha8([32]byte{seed}), left: n, hash: sha256.New()}
}

// Read fills p with the next bytes.
func (s *stream) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	if s.paused != nil && s.done >= s.pauseAt {
		close(s.paused)
		s.paused = nil
		<-s.resume
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	if s.paused != nil && s.done+int64(len(p)) > s.pauseAt {
		p = p[:s.pauseAt-s.done]
	}
	n, _ := s.rng.Read(p)
	_, _ = s.hash.Write(p[:n])
	s.left -= int64(n)
	s.done += int64(n)
	return n, nil
}

// Sum is the SHA-256 of everything read.
func (s *stream) Sum() []byte { return s.hash.Sum(nil) }

// lockedBuffer collects a process's output written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
