// Package stream moves a backup's bytes between a tool's pipe and the bucket: Upload compresses
// a stream (mariadb-backup's xbstream, a dump) with zstd as it is produced and puts it as one
// object in parts, never holding more than a part; Download reads an object back, checks it
// against its manifest entry and decompresses it.
//
// It imports internal/backup and internal/objectstore.
package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/seal"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
)

// Compression is the name recorded in a manifest for what Upload writes.
const Compression = "zstd"

// Counter counts the bytes read through it (for progress: bytes done, rate, time left).
type Counter struct{ n atomic.Int64 }

// Bytes is the count so far.
func (c *Counter) Bytes() int64 {
	if c == nil {
		return 0
	}
	return c.n.Load()
}

// Add counts n more bytes (a nil Counter counts nothing).
func (c *Counter) Add(n int64) {
	if c != nil {
		c.n.Add(n)
	}
}

type counting struct {
	r io.Reader
	c *Counter
}

func (cr counting) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.c.Add(int64(n))
	return n, err
}

// Upload compresses r and streams it to key. It returns the object as a manifest records it
// (named name: the compressed size and SHA-256) and the uncompressed size. When r fails, or ends
// the context, nothing is stored under key (the upload is aborted). raw, when set, counts the
// uncompressed bytes as they are read.
//
// With recipients (to), the compressed stream is encrypted to them (internal/backup/seal) before it
// is put: the object's size and SHA-256 are those of the encrypted bytes.
func Upload(ctx context.Context, st *objectstore.Store, key, name string, r io.Reader, raw *Counter, to []age.Recipient) (backup.Object, int64, error) {
	pr, pw := io.Pipe()
	var read int64
	go func() {
		sealed, err := seal.Seal(pw, to)
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		enc, err := zstd.NewWriter(sealed, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		n, err := io.Copy(enc, counting{r, raw})
		read = n
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
		if cerr := sealed.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			// The reading side (Put) fails with this error, and aborts the upload.
			pw.CloseWithError(fmt.Errorf("read the stream after %d bytes: %w", n, err))
			return
		}
		_ = pw.Close()
	}()
	obj, err := st.Put(ctx, key, pr)
	// Put may have failed first (the store): stop the compressor, which then returns.
	pr.CloseWithError(errors.New("the upload ended"))
	if err != nil {
		return backup.Object{}, 0, err
	}
	return backup.Object{Name: name, Size: obj.Size, SHA256: obj.SHA256}, read, nil
}

// Download writes the decompressed bytes of key, whose manifest entry is o, to w and returns
// how many. The object's size and SHA-256 are checked as it is read: a damaged object ends in a
// backup.ErrDamaged error naming key, and what was written to w before it must not be used.
func Download(ctx context.Context, st *objectstore.Store, key string, o backup.Object, w io.Writer) (int64, error) {
	return DownloadCounted(ctx, st, key, o, w, nil, seal.Identities{})
}

// DownloadCounted is Download that also counts the object's (compressed) bytes as they are read,
// into read when it is set: how far through the object a restore is (progress). An encrypted
// object is decrypted with ids (none of which opening it is seal.ErrNoIdentity, not damage).
func DownloadCounted(ctx context.Context, st *objectstore.Store, key string, o backup.Object, w io.Writer, read *Counter, ids seal.Identities) (int64, error) {
	body, err := st.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	defer func() { _ = body.Close() }()
	vr := backup.Verified(key, o, counting{body, read})
	plain, err := seal.Open(vr, ids)
	switch {
	case errors.Is(err, seal.ErrNoIdentity):
		// A damaged header reads as a key that does not match: the rest of the object decides.
		if _, verr := io.Copy(io.Discard, vr); errors.Is(verr, backup.ErrDamaged) {
			return 0, verr
		}
		return 0, fmt.Errorf("%s: %w", key, err)
	case err != nil:
		plain = failing{err}
	}
	dec, err := zstd.NewReader(plain, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	n, err := io.Copy(w, dec)
	if err != nil {
		// Tell damage from a failed read: the rest of the object decides. Bytes that are not the
		// manifest's, or the manifest's bytes that do not decompress, are damage.
		_, verr := io.Copy(io.Discard, vr)
		switch {
		case errors.Is(verr, backup.ErrDamaged):
			return n, verr
		case verr == nil && ctx.Err() == nil:
			return n, fmt.Errorf("%s is the object its manifest records but does not decrypt or decompress (%v): %w", key, err, backup.ErrDamaged)
		}
		return n, fmt.Errorf("read %s: %w", key, err)
	}
	// The decoder may stop at the end of its last frame before the object's end: read the rest,
	// so that the check sees every byte.
	if _, err := io.Copy(io.Discard, vr); err != nil {
		return n, err
	}
	return n, nil
}

// failing is a reader whose every Read fails with its error (an object whose encryption header
// does not parse: the decompressor meets the error, and the rest of the object decides whether it
// is damage).
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// WriteManifest checks m and writes it into its backup's directory: the commit marker, written
// last, after every object it lists is stored.
func WriteManifest(ctx context.Context, st *objectstore.Store, m backup.Manifest) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	_, err = st.Put(ctx, backup.Key(m.Namespace, m.Cluster, m.ID, backup.ManifestName), bytes.NewReader(b))
	return err
}
