// Package objectstore is mysqlctl's client of an S3-compatible bucket, where backups go: objects
// are streamed in parts as they are produced (never a whole local copy first), each part under
// its own deadline, with a SHA-256 of every object; an upload that fails is aborted, so no
// partial object is ever listed; and the refusals a person must fix (credentials, a missing
// bucket) are told apart from a store that is down.
//
// It imports the AWS SDK and internal/outcome only. Credentials are never part of an error, a
// String or a log line.
package objectstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

const (
	// DefaultPartSize is the size of each uploaded part (S3's minimum is 5 MiB but for the last).
	DefaultPartSize = 16 << 20
	// DefaultPartTimeout bounds each request: a part's upload, a listing, a small object.
	DefaultPartTimeout = 2 * time.Minute
)

// Config names a bucket and how to reach it.
type Config struct {
	// Endpoint is the store's URL (empty: AWS S3 for Region).
	Endpoint string
	// Region is the region requests are signed for (default us-east-1).
	Region string
	// Bucket and Prefix: every key is Prefix + the key given.
	Bucket, Prefix string
	// PathStyle addresses the bucket in the path (most stores other than AWS need it).
	PathStyle bool
	// AccessKey and SecretKey sign requests (SigV4).
	AccessKey, SecretKey string
	// PartSize is the size of each part (default DefaultPartSize, at least 5 MiB).
	PartSize int64
	// PartTimeout bounds each request (default DefaultPartTimeout).
	PartTimeout time.Duration
}

// String names the bucket, never the keys.
func (c Config) String() string {
	return fmt.Sprintf("s3://%s/%s (endpoint %q, region %q)", c.Bucket, c.Prefix, c.Endpoint, c.Region)
}

// GoString is String: a %#v must not print the secret either.
func (c Config) GoString() string { return c.String() }

// Store is a bucket prefix that objects are streamed to and read from.
type Store struct {
	client      *s3.Client
	cfg         Config
	partSize    int64
	partTimeout time.Duration
	// uploadPage, when set, is the page size of listings of incomplete uploads (tests).
	uploadPage int32
}

// Object is an object in the store.
type Object struct {
	// Key is the object's key below the store's prefix.
	Key  string
	Size int64
	// SHA256 is the hex SHA-256 of the bytes Put wrote (empty when listed).
	SHA256       string
	LastModified time.Time
}

// New returns the store of cfg. It does no I/O.
func New(cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, outcome.Invalid("the object store needs a bucket")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	s := &Store{cfg: cfg, partSize: cfg.PartSize, partTimeout: cfg.PartTimeout}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if s.partSize < 5<<20 {
		return nil, outcome.Invalid(fmt.Sprintf("part size %d is below S3's minimum of 5 MiB", s.partSize))
	}
	if s.partTimeout <= 0 {
		s.partTimeout = DefaultPartTimeout
	}
	opts := s3.Options{
		Region:       cfg.Region,
		UsePathStyle: cfg.PathStyle,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, ""),
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	s.client = s3.New(opts)
	return s, nil
}

func (s *Store) key(k string) string { return s.cfg.Prefix + k }

// Put streams r to key and returns what was stored. A body shorter than one part is one request;
// a longer one is a multipart upload, sent part by part as r produces it (memory: one part).
// On any failure the upload is aborted, so the key holds either the whole body or nothing new.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (Object, error) {
	sum := sha256.New()
	buf := make([]byte, s.partSize)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Object{}, fmt.Errorf("read %s: %w", key, err)
	}
	if err != nil { // the whole body fits in one part
		sum.Write(buf[:n])
		rctx, cancel := context.WithTimeout(ctx, s.partTimeout)
		defer cancel()
		_, err := s.client.PutObject(rctx, &s3.PutObjectInput{
			Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.key(key)),
			Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			return Object{}, s.explain("upload "+key, err)
		}
		return Object{Key: key, Size: int64(n), SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
	}
	return s.putParts(ctx, key, buf, r, sum)
}

// putParts uploads the first part (buf, full) and the rest of r as a multipart upload.
func (s *Store) putParts(ctx context.Context, key string, buf []byte, r io.Reader, sum hash.Hash) (_ Object, retErr error) {
	rctx, cancel := context.WithTimeout(ctx, s.partTimeout)
	up, err := s.client.CreateMultipartUpload(rctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.key(key))})
	cancel()
	if err != nil {
		return Object{}, s.explain("start the upload of "+key, err)
	}
	defer func() {
		if retErr != nil {
			// On a context of its own: the upload's may be what ended.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.partTimeout)
			defer cancel()
			if _, err := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.key(key)), UploadId: up.UploadId}); err != nil {
				retErr = fmt.Errorf("%w (and its abort failed, AbortIncomplete removes it later: %v)", retErr, s.explain("abort", err))
			}
		}
	}()
	var parts []types.CompletedPart
	var size int64
	n := len(buf)
	for num := int32(1); n > 0; num++ {
		sum.Write(buf[:n])
		size += int64(n)
		rctx, cancel := context.WithTimeout(ctx, s.partTimeout)
		out, err := s.client.UploadPart(rctx, &s3.UploadPartInput{
			Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.key(key)), UploadId: up.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
		})
		cancel()
		if err != nil {
			return Object{}, s.explain(fmt.Sprintf("upload part %d of %s", num, key), err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(num), ETag: out.ETag,
			ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME,
			ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256})
		n, err = io.ReadFull(r, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return Object{}, fmt.Errorf("read %s after %d bytes: %w", key, size, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return Object{}, fmt.Errorf("upload %s: %w", key, err)
	}
	rctx, cancel = context.WithTimeout(ctx, completeTimeout(s.partTimeout, size))
	defer cancel()
	_, err = s.client.CompleteMultipartUpload(rctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.key(key)), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return Object{}, s.explain("complete the upload of "+key, err)
	}
	return Object{Key: key, Size: size, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

// completeRate is the slowest rate at which a store is expected to assemble an upload's parts.
const completeRate = 20 << 20 // bytes per second

// completeTimeout bounds the request that completes an upload of size bytes: a request's timeout,
// and the time to assemble the parts at completeRate, which stores that copy them into one file
// take (measured with versitygw's POSIX backend: a 5 GB object took more than 10 s).
func completeTimeout(request time.Duration, size int64) time.Duration {
	return request + time.Duration(size/completeRate)*time.Second
}

// Get opens key for reading; the caller closes the body. The request is bounded by ctx only
// (a large object reads for longer than a part's timeout).
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.key(key))})
	if err != nil {
		return nil, s.explain("read "+key, err)
	}
	return out.Body, nil
}

// List returns the complete objects whose keys start with prefix (below the store's prefix), in
// key order. An upload in progress or aborted is never listed.
func (s *Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var objs []Object
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(s.key(prefix))})
	for p.HasMorePages() {
		rctx, cancel := context.WithTimeout(ctx, s.partTimeout)
		page, err := p.NextPage(rctx)
		cancel()
		if err != nil {
			return nil, s.explain("list "+s.key(prefix), err)
		}
		for _, o := range page.Contents {
			objs = append(objs, Object{Key: aws.ToString(o.Key)[len(s.cfg.Prefix):], Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	return objs, nil
}

// Delete removes key; a key that does not exist is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	rctx, cancel := context.WithTimeout(ctx, s.partTimeout)
	defer cancel()
	if _, err := s.client.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.key(key))}); err != nil {
		return s.explain("delete "+key, err)
	}
	return nil
}

// AbortIncomplete aborts the multipart uploads under prefix started before before (an upload
// whose writer died, or whose abort failed, keeps its parts until then) and returns how many.
// It lists from the start again after each page's aborts, rather than paging on markers (an
// aborted upload is no longer a valid marker, and versitygw refuses its own upload-id markers),
// until a page holds nothing to abort: a whole page of newer uploads hides older ones after it.
func (s *Store) AbortIncomplete(ctx context.Context, prefix string, before time.Time) (int, error) {
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(s.key(prefix))}
	if s.uploadPage > 0 {
		in.MaxUploads = aws.Int32(s.uploadPage)
	}
	n := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, s.partTimeout)
		out, err := s.client.ListMultipartUploads(rctx, in)
		cancel()
		if err != nil {
			return n, s.explain("list the incomplete uploads under "+s.key(prefix), err)
		}
		aborted := 0
		for _, u := range out.Uploads {
			if u.Initiated != nil && !u.Initiated.Before(before) {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, s.partTimeout)
			_, err := s.client.AbortMultipartUpload(rctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: u.Key, UploadId: u.UploadId})
			cancel()
			if err != nil {
				return n, s.explain("abort the incomplete upload of "+aws.ToString(u.Key), err)
			}
			n++
			aborted++
		}
		if aborted == 0 || !aws.ToBool(out.IsTruncated) {
			return n, nil
		}
	}
}

// explain names what failed and, for the refusals retrying cannot fix, makes the error
// outcome.ErrConfig with what to do. The SDK's errors carry no credentials.
func (s *Store) explain(what string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "SignatureDoesNotMatch", "InvalidAccessKeyId", "XAdminUserNotFound", "AccessDenied", "InvalidToken", "ExpiredToken":
			return fmt.Errorf("%s in %s: the store refused the credentials (%s): check the access and secret keys in the backup Secret: %w",
				what, s.cfg, api.ErrorCode(), outcome.ErrConfig)
		case "NoSuchBucket":
			return fmt.Errorf("%s: the bucket %q does not exist at %q: create it, or name another: %w", what, s.cfg.Bucket, s.cfg.Endpoint, outcome.ErrConfig)
		}
	}
	return fmt.Errorf("%s in %s: %w", what, s.cfg, err)
}
