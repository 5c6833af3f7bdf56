package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Options configure an object store. The zero value is valid.
type S3Options struct {
	// Bucket is the bucket created at start (default "mysqlctl-test").
	Bucket string
	// Region is the region the server signs for (default "us-east-1").
	Region string
	// Dir is the directory of the POSIX backend (a bucket per subdirectory, an object per file).
	// Empty: a directory in the store's own temporary directory, removed by Stop.
	Dir string
	// Log receives the server's output; nil discards it. The server logs no requests and never
	// sees its keys on the command line (they are passed in its environment).
	Log io.Writer
	// StartTimeout bounds the wait for the server to answer (default 30 s).
	StartTimeout time.Duration
}

// S3 is a running S3-compatible object store: versitygw serving a directory tree on a free
// loopback port, with a root user whose keys are generated at start and a bucket created.
// Its String and GoString never show the secret key, so printing an S3 in a test is safe.
type S3 struct {
	// Endpoint is the server's URL (http://127.0.0.1:PORT). Clients must use path-style addressing.
	Endpoint string
	// Region is the region the server expects in signatures.
	Region string
	// AccessKey and SecretKey are the root user's keys (SigV4).
	AccessKey, SecretKey string
	// Bucket is the bucket created at start.
	Bucket string
	// Dir is the POSIX backend's root directory: Dir/BUCKET/KEY holds an object's bytes.
	Dir string

	p *s3proc
}

// s3proc is the server process (behind a pointer so that an S3 can be copied).
type s3proc struct {
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	ownDir  string // the temporary directory Start made, removed by Stop
	iamDir  string
	addr    string // 127.0.0.1:PORT, kept by Restart
	bin     string
	log     io.Writer
	stopped bool
	stopErr error
}

// String describes the store without its secret key.
func (s S3) String() string {
	return fmt.Sprintf("S3{Endpoint: %s, Region: %s, Bucket: %s, AccessKey: %s, SecretKey: <redacted>, Dir: %s}",
		s.Endpoint, s.Region, s.Bucket, s.AccessKey, s.Dir)
}

// GoString is String, for %#v.
func (s S3) GoString() string { return s.String() }

// S3Bin returns the path of the versitygw binary: MYSQLCTL_S3_BIN, else the output of
// hack/build-s3.sh (which builds it once from the Go module proxy and caches it by version).
func S3Bin() (string, error) { return s3Bin() }

var s3Bin = sync.OnceValues(findS3Bin)

func findS3Bin() (string, error) {
	from := "MYSQLCTL_S3_BIN"
	bin := os.Getenv(from)
	if bin == "" {
		var err error
		if bin, from, err = runBuildScript("build-s3.sh"); err != nil {
			return "", err
		}
	}
	st, err := os.Stat(bin)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("versitygw binary %q (from %s) is missing or not executable: run hack/build-s3.sh", bin, from)
	}
	return bin, nil
}

// StartS3T starts an object store for one test and stops it when the test ends, failing the
// test if the server is still running afterwards.
func StartS3T(tb testing.TB, opts S3Options) *S3 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := StartS3(ctx, opts)
	if err != nil {
		tb.Fatalf("testenv: object store: %v", err)
	}
	tb.Cleanup(func() {
		pid := s.PID()
		if err := s.Stop(); err != nil {
			tb.Errorf("testenv: object store: stop: %v", err)
		}
		if alive(pid) {
			tb.Errorf("testenv: object store: versitygw %d still runs after Stop", pid)
		}
	})
	return s
}

// StartS3 starts versitygw with its POSIX backend on a free port of 127.0.0.1 and creates the
// bucket. The caller must call Stop; on an error nothing is left running.
func StartS3(ctx context.Context, opts S3Options) (_ *S3, retErr error) {
	bin, err := S3Bin()
	if err != nil {
		return nil, err
	}
	s := &S3{Region: opts.Region, Bucket: opts.Bucket, Dir: opts.Dir, p: &s3proc{}}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	if s.Bucket == "" {
		s.Bucket = "mysqlctl-test"
	}
	own, err := os.MkdirTemp("", "mysqlctl-s3-")
	if err != nil {
		return nil, err
	}
	s.p.ownDir = own
	defer func() {
		if retErr != nil {
			_ = s.Stop()
		}
	}()
	if s.Dir == "" {
		s.Dir = filepath.Join(own, "data")
	}
	// The gateway's own IAM store, next to (never inside) the backend root, where it would be a
	// bucket. With it an unknown access key gets S3's 403 InvalidAccessKeyId; with the gateway's
	// single-account mode it gets a 404 XAdminUserNotFound that no S3 client expects.
	s.p.iamDir = filepath.Join(own, "iam")
	for _, d := range []string{s.Dir, s.p.iamDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	// AWS's own shapes: a 20-character key ID and a 40-character secret.
	if s.AccessKey, err = randomKey(10); err != nil {
		return nil, err
	}
	s.AccessKey = "VGW" + strings.ToUpper(s.AccessKey[:17])
	if s.SecretKey, err = randomKey(20); err != nil {
		return nil, err
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A free port is picked by binding :0 and closing it; another process can take it before the
	// server binds it, so a server that exits at once is started again on another port.
	for attempt := 1; ; attempt++ {
		err := s.start(ctx, bin, logw)
		if err == nil {
			break
		}
		var early *exitedEarly
		if !errors.As(err, &early) || attempt == 3 {
			return nil, err
		}
		s.p.addr = ""
	}
	if err := s.createBucket(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// exitedEarly is a server that exited before it answered (a port taken in between, say).
type exitedEarly struct{ err error }

func (e *exitedEarly) Error() string { return fmt.Sprintf("versitygw exited during start: %v", e.err) }

func (s *S3) start(ctx context.Context, bin string, logw io.Writer) error {
	s.p.bin, s.p.log = bin, logw
	addr := s.p.addr
	if addr == "" {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	cmd := exec.Command(bin,
		"--port", addr,
		"--region", s.Region,
		"--health", "/health",
		"--quiet",
		"--iam-dir", s.p.iamDir,
		"posix", s.Dir)
	// The keys go in the environment, never on the command line (/proc/PID/cmdline is world
	// readable); no other VGW_ setting of the caller's environment reaches the server.
	cmd.Env = append(scrubbedEnv(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logw, logw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start versitygw: %w", err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	s.p.mu.Lock()
	s.p.cmd, s.p.done = cmd, done
	s.p.mu.Unlock()
	if s.p.addr != addr { // a Restart keeps the address: Endpoint is not written again
		s.Endpoint, s.p.addr = "http://"+addr, addr
	}
	hc := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return &exitedEarly{err: waitErr}
		case <-ctx.Done():
			return fmt.Errorf("versitygw did not answer on %s: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// createBucket creates the bucket, or keeps it when S3Options.Dir already holds it (a store
// started again over the data of an earlier one, whose root user had other keys).
func (s *S3) createBucket(ctx context.Context) error {
	c := s.Client()
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if errors.As(err, &owned) || errors.As(err, &exists) {
		_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)})
	}
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", s.Bucket, err)
	}
	return nil
}

// Client returns an AWS SDK client for the store: path-style addressing, SigV4 with the root
// user's keys, the store's region. Options can change any of it (a wrong key, retries).
func (s *S3) Client(optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}, optFns...)
}

// PID is the server's process ID (0 when it is not running).
func (s *S3) PID() int {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.cmd == nil || s.p.cmd.Process == nil {
		return 0
	}
	select {
	case <-s.p.done:
		return 0
	default:
		return s.p.cmd.Process.Pid
	}
}

// Stop stops the server by its PID (SIGTERM, then SIGKILL after 5 s: a graceful shutdown waits
// for open connections) and removes the temporary directory Start made (the data with it unless
// S3Options.Dir named another). Safe to call more than once; the server cannot be restarted.
func (s *S3) Stop() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.stopped {
		return s.p.stopErr
	}
	s.p.stopped = true
	if s.p.cmd != nil {
		_ = s.p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.p.done:
		case <-time.After(5 * time.Second):
			_ = s.p.cmd.Process.Kill()
			<-s.p.done
		}
	}
	if s.p.ownDir != "" {
		s.p.stopErr = os.RemoveAll(s.p.ownDir)
	}
	return s.p.stopErr
}

// Kill kills the server with SIGKILL (as a crash or an OOM kill would) and waits until it is gone;
// the data directory stays until Stop.
func (s *S3) Kill() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.cmd == nil {
		return errors.New("versitygw is not running")
	}
	_ = s.p.cmd.Process.Kill()
	<-s.p.done
	return nil
}

// Restart starts the server again after Kill, on the same address with the same keys and data,
// as a store that comes back after a crash; it returns once the server answers.
func (s *S3) Restart(ctx context.Context) error {
	s.p.mu.Lock()
	running := s.p.cmd != nil && !isClosed(s.p.done)
	stopped := s.p.stopped
	s.p.mu.Unlock()
	if running || stopped {
		return errors.New("versitygw is running or stopped for good: Restart follows Kill")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return s.start(ctx, s.p.bin, s.p.log)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// scrubbedEnv is this process's environment without the variables versitygw reads its settings
// and root keys from.
func scrubbedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VGW_") || strings.HasPrefix(name, "ROOT_") ||
			name == "LOGFILE" || name == "WEBHOOK" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func randomKey(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
