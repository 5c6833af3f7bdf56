// Package backup describes a backup as it lies in the bucket, so that listing and restoring
// need nothing but the bucket: each backup is a directory of objects and a manifest written
// last, the commit marker. A backup without its manifest is incomplete and never listed as a
// backup; every object is checked against the size and SHA-256 its manifest records before
// anything restored from it is used.
//
// It is pure: it imports internal/objectstore's types and internal/outcome only, does no I/O and
// reads no clock.
package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// FormatVersion is the manifest format this release writes and reads.
const FormatVersion = 1

// ManifestName is the object, in a backup's directory, that marks the backup complete.
const ManifestName = "manifest.json"

// Methods of taking a backup.
const (
	// MethodPhysical is a copy of the data directory (mariadb-backup, XtraBackup).
	MethodPhysical = "physical"
	// MethodLogical is a dump of the rows (mariadb-dump, mysqldump).
	MethodLogical = "logical"
)

// Manifest is what a backup is: written as the backup's last object.
type Manifest struct {
	Format int    `json:"format"`
	ID     string `json:"id"`
	// Namespace, Cluster and ClusterUID name the cluster backed up (a restore from a bucket
	// alone, with the cluster gone, needs them only to say where the backup came from).
	Namespace  string `json:"namespace"`
	Cluster    string `json:"cluster"`
	ClusterUID string `json:"clusterUID,omitempty"`
	Method     string `json:"method"`
	// Flavor (mysql or mariadb) and ServerVersion of the server the backup was taken from: a
	// physical backup restores only into the same flavor and series.
	Flavor        string `json:"flavor"`
	ServerVersion string `json:"serverVersion"`
	// Source is the instance the backup was taken from.
	Source string `json:"source"`
	// GTIDPosition is the GTID position the backup is consistent at (MariaDB's
	// gtid_binlog_pos, MySQL's gtid_executed): a restore continues the history from it.
	GTIDPosition string    `json:"gtidPosition"`
	StartedAt    time.Time `json:"startedAt"`
	FinishedAt   time.Time `json:"finishedAt"`
	// Compression of every object (zstd, gzip or none).
	Compression string `json:"compression"`
	// Objects are the backup's objects, in the order a restore reads them.
	Objects []Object `json:"objects"`
	// Encryption, when set, says every object is encrypted, and to which public keys: a restore
	// needs the private key of one of them. Sizes and SHA-256s are of the encrypted bytes.
	Encryption *Encryption `json:"encryption,omitempty"`
}

// Encryption is how a backup's objects are encrypted: with age (client-side), to Recipients.
type Encryption struct {
	Method     string   `json:"method"`
	Recipients []string `json:"recipients"`
}

// Object is one object of a backup, by its name in the backup's directory.
type Object struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

var (
	idPattern   = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z(-[a-z0-9]{1,16})?$`)
	namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	shaPattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// NewID is the ID of a backup started at t: its UTC time to the second, so IDs sort by time,
// and a suffix (lower-case letters and digits, may be empty) for two started in one second.
func NewID(t time.Time, suffix string) string {
	id := t.UTC().Format("20060102T150405Z")
	if suffix != "" {
		id += "-" + suffix
	}
	return id
}

// Dir is the directory, below the store's prefix, of the cluster's backups.
func Dir(namespace, cluster string) string { return namespace + "/" + cluster + "/backups/" }

// Key is the key, below the store's prefix, of a backup's object.
func Key(namespace, cluster, id, name string) string {
	return Dir(namespace, cluster) + id + "/" + name
}

// Validate reports everything wrong with m, at once.
func (m Manifest) Validate() error {
	var bad []string
	if m.Format != FormatVersion {
		bad = append(bad, fmt.Sprintf("format %d is not %d (written by another mysqlctl release?)", m.Format, FormatVersion))
	}
	if !idPattern.MatchString(m.ID) {
		bad = append(bad, fmt.Sprintf("id %q is not of the form 20261206T210000Z", m.ID))
	}
	if m.Namespace == "" || m.Cluster == "" {
		bad = append(bad, "no namespace or cluster")
	}
	if m.Method != MethodPhysical && m.Method != MethodLogical {
		bad = append(bad, fmt.Sprintf("method %q is neither %s nor %s", m.Method, MethodPhysical, MethodLogical))
	}
	if m.Flavor != "mysql" && m.Flavor != "mariadb" {
		bad = append(bad, fmt.Sprintf("flavor %q is neither mysql nor mariadb", m.Flavor))
	}
	if m.StartedAt.IsZero() || m.FinishedAt.Before(m.StartedAt) {
		bad = append(bad, "no start, or a finish before it")
	}
	if len(m.Objects) == 0 {
		bad = append(bad, "no objects")
	}
	if e := m.Encryption; e != nil && (e.Method != "age" || len(e.Recipients) == 0) {
		bad = append(bad, fmt.Sprintf("encryption %q to %d recipient(s): want age, to at least one", e.Method, len(e.Recipients)))
	}
	seen := map[string]bool{}
	for _, o := range m.Objects {
		switch {
		case !namePattern.MatchString(o.Name) || o.Name == ManifestName:
			bad = append(bad, fmt.Sprintf("object name %q", o.Name))
		case seen[o.Name]:
			bad = append(bad, fmt.Sprintf("object %s listed twice", o.Name))
		case o.Size < 0 || !shaPattern.MatchString(o.SHA256):
			bad = append(bad, fmt.Sprintf("object %s: size %d, sha256 %q", o.Name, o.Size, o.SHA256))
		}
		seen[o.Name] = true
	}
	if len(bad) > 0 {
		return outcome.Invalid("backup manifest: " + strings.Join(bad, "; "))
	}
	return nil
}

// Encode returns the manifest's bytes, once it is valid.
func (m Manifest) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	return append(b, '\n'), err
}

// Decode reads a manifest and validates it; unknown fields are refused (a newer format).
func Decode(b []byte) (Manifest, error) {
	var m Manifest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return Manifest{}, outcome.Invalid(fmt.Sprintf("backup manifest: %v", err))
	}
	return m, m.Validate()
}

// Listing is what a cluster's backup directory holds.
type Listing struct {
	// Complete are the IDs of the backups with a manifest, oldest first.
	Complete []string
	// Incomplete are the IDs of directories with objects but no manifest: a backup running, or
	// one that failed before its commit marker. They are never restored from.
	Incomplete []string
}

// List sorts the objects under Dir(namespace, cluster) into complete and incomplete backups.
func List(namespace, cluster string, objs []objectstore.Object) Listing {
	dir := Dir(namespace, cluster)
	has := map[string]bool{}
	var ids []string
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Key, dir)
		id, name, found := strings.Cut(rest, "/")
		if !ok || !found || !idPattern.MatchString(id) {
			continue
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
		if name == ManifestName {
			has[id] = true
		}
	}
	slices.Sort(ids)
	var l Listing
	for _, id := range ids {
		if has[id] {
			l.Complete = append(l.Complete, id)
		} else {
			l.Incomplete = append(l.Incomplete, id)
		}
	}
	return l
}

// CheckPresent compares the manifest with the objects listed in its backup's directory: every
// object must be there with its recorded size. The error names each that is not.
func CheckPresent(m Manifest, objs []objectstore.Object) error {
	if bad := Damage(m, objs); len(bad) > 0 {
		return fmt.Errorf("backup %s is damaged: %s: %w", m.ID, strings.Join(bad, "; "), ErrDamaged)
	}
	return nil
}

// Damage is CheckPresent's findings, one sentence per object of the manifest that is missing
// from objs or listed with another size (none: every object is there). A listing shows sizes
// only: a changed byte is found when the object is read (Verified).
func Damage(m Manifest, objs []objectstore.Object) []string {
	size := map[string]int64{}
	prefix := Key(m.Namespace, m.Cluster, m.ID, "")
	for _, o := range objs {
		if name, ok := strings.CutPrefix(o.Key, prefix); ok {
			size[name] = o.Size
		}
	}
	var bad []string
	for _, o := range m.Objects {
		got, ok := size[o.Name]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s is missing", prefix+o.Name))
		case got != o.Size:
			bad = append(bad, fmt.Sprintf("%s holds %d bytes, the manifest says %d", prefix+o.Name, got, o.Size))
		}
	}
	return bad
}

// ErrDamaged means a backup's objects are not what its manifest records: it is not restored.
var ErrDamaged = errors.New("backup damaged")

// Verified wraps the reader of object o: it returns o's bytes and, at their end, io.EOF only when
// their size and SHA-256 are the manifest's; otherwise an ErrDamaged error naming the object.
// Whatever read it must not use what it read before that EOF (a restore prepares nothing from a
// reader that ended in an error).
func Verified(key string, o Object, r io.Reader) io.Reader {
	return &verified{key: key, o: o, r: r, h: sha256.New()}
}

type verified struct {
	key string
	o   Object
	r   io.Reader
	h   hash.Hash
	n   int64
}

func (v *verified) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.o.Size {
		return n, fmt.Errorf("%s is longer than the %d bytes its manifest records: %w", v.key, v.o.Size, ErrDamaged)
	}
	if errors.Is(err, io.EOF) {
		if v.n != v.o.Size {
			return n, fmt.Errorf("%s ended after %d bytes, its manifest records %d: %w", v.key, v.n, v.o.Size, ErrDamaged)
		}
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.o.SHA256 {
			return n, fmt.Errorf("%s has SHA-256 %s, its manifest records %s: %w", v.key, got, v.o.SHA256, ErrDamaged)
		}
	}
	return n, err
}
