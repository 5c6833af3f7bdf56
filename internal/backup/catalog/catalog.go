package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// Store is what the catalog needs of a bucket.
type Store interface {
	List(ctx context.Context, prefix string) ([]objectstore.Object, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	Delete(ctx context.Context, key string) error
	AbortIncomplete(ctx context.Context, prefix string, before time.Time) (int, error)
}

var _ Store = (*objectstore.Store)(nil)

// State is what a backup's directory holds.
type State string

// The states of a backup's directory.
const (
	// Complete is a valid manifest, and every object it records listed with its size.
	Complete State = "complete"
	// Damaged is a valid manifest with an object it records missing or of another size: a
	// restore refuses it.
	Damaged State = "damaged"
	// Unreadable is a manifest that is not valid (another format, cut short) or that names
	// another backup.
	Unreadable State = "unreadable"
	// Incomplete is a directory with objects and no manifest: a backup that failed or was
	// aborted before its commit marker, or a delete that was interrupted.
	Incomplete State = "incomplete"
	// Running is the backup recorded in status.backup.running: no manifest yet (and perhaps no
	// object listed yet: an upload in progress is not listed).
	Running State = "running"
	// Failed is a manifest of the backup status.backup.lastFailure names: it failed after its
	// copy finished (its source quarantined meanwhile, its Job's result lost); a restore
	// refuses it.
	Failed State = "failed"
	// Foreign is a manifest of another cluster of the same namespace and name (another UID: a
	// re-created cluster, or another Kubernetes cluster sharing the bucket and prefix).
	Foreign State = "foreign"
)

// Judge marks what only the cluster knows about an entry read from the bucket: a manifest of
// another cluster of the same name is Foreign, and the backup the status records as failed is
// Failed, whatever the bucket holds.
func (e Entry) Judge(c *v1.MysqlCluster) Entry {
	if e.Manifest == nil || (e.State != Complete && e.State != Damaged) {
		return e
	}
	if uid := e.Manifest.ClusterUID; c.UID != "" && uid != "" && uid != string(c.UID) {
		e.State = Foreign
		e.Problems = append(e.Problems, fmt.Sprintf("its manifest names cluster UID %s, and %s/%s is %s: another cluster of that name (re-created, or in another Kubernetes cluster sharing the bucket)",
			uid, c.Namespace, c.Name, c.UID))
		return e
	}
	if st := c.Status.Backup; st != nil && st.LastFailure != nil && st.LastFailure.ID == e.ID {
		e.State = Failed
		e.Problems = append(e.Problems, "recorded as failed (status.backup.lastFailure): "+st.LastFailure.Message)
	}
	return e
}

// Entry is one backup directory in the bucket.
type Entry struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	// Manifest is the backup's manifest (Complete and Damaged only).
	Manifest *backup.Manifest `json:"manifest,omitempty"`
	// Problems say what is wrong (Damaged and Unreadable only).
	Problems []string `json:"problems,omitempty"`
	// Listed are the objects in the directory, in name order, the manifest included.
	Listed []Listed `json:"listed"`
}

// Listed is an object found in a backup's directory.
type Listed struct {
	// Name is the object's name in the directory.
	Name         string    `json:"name"`
	Size         int64     `json:"size"`
	LastModified time.Time `json:"lastModified"`
}

// ListedBytes is the size of every object listed in the directory (what deleting it frees).
func (e Entry) ListedBytes() int64 {
	var n int64
	for _, o := range e.Listed {
		n += o.Size
	}
	return n
}

// maxManifest bounds the bytes read of a manifest: a real one is a few KiB.
const maxManifest = 1 << 20

// manifestRead is a manifest as read from the bucket, or why it cannot be used.
type manifestRead struct {
	m   backup.Manifest
	err error
}

// Read lists the cluster's backup directories, newest first, each with its state; running is
// the ID of status.backup.running ("" for none). A store that cannot be read is an error; a
// manifest that cannot be decoded is an Unreadable entry.
func Read(ctx context.Context, st Store, namespace, cluster, running string) ([]Entry, error) {
	objs, err := st.List(ctx, backup.Dir(namespace, cluster))
	if err != nil {
		return nil, err
	}
	manifests, err := readManifests(ctx, st, namespace, cluster, backup.List(namespace, cluster, objs).Complete)
	if err != nil {
		return nil, err
	}
	return entries(namespace, cluster, objs, manifests, running), nil
}

// ReadOne reads backup id's directory. An ID with no directory (and not running), or a string
// that is no ID (typed short, say: it is never made into a key), is a *NotFoundError naming the
// IDs nearest to it.
func ReadOne(ctx context.Context, st Store, namespace, cluster, id, running string) (Entry, error) {
	if backup.ValidateID(id) == nil {
		objs, err := st.List(ctx, backup.Key(namespace, cluster, id, ""))
		if err != nil {
			return Entry{}, err
		}
		manifests, err := readManifests(ctx, st, namespace, cluster, backup.List(namespace, cluster, objs).Complete)
		if err != nil {
			return Entry{}, err
		}
		if running != id {
			running = ""
		}
		if es := entries(namespace, cluster, objs, manifests, running); len(es) == 1 {
			return es[0], nil
		}
	}
	all, err := st.List(ctx, backup.Dir(namespace, cluster))
	if err != nil {
		return Entry{}, err
	}
	l := backup.List(namespace, cluster, all)
	return Entry{}, &NotFoundError{ID: id, Dir: backup.Dir(namespace, cluster), Nearest: backup.Nearest(slices.Concat(l.Complete, l.Incomplete), id, 3)}
}

// NotFoundError is a backup ID with no directory in the bucket.
type NotFoundError struct {
	ID, Dir string
	// Nearest are the IDs there closest to ID (backup.Nearest); none when there are no backups.
	Nearest []string
}

func (e *NotFoundError) Error() string {
	if len(e.Nearest) == 0 {
		return fmt.Sprintf("no backup %s in %s: there are no backups there", e.ID, e.Dir)
	}
	return fmt.Sprintf("no backup %s in %s (the nearest: %s)", e.ID, e.Dir, strings.Join(e.Nearest, ", "))
}

// readManifests reads the manifests of the complete backups ids. A manifest that is not valid is
// recorded as such; a store that cannot be read is an error.
func readManifests(ctx context.Context, st Store, namespace, cluster string, ids []string) (map[string]manifestRead, error) {
	out := map[string]manifestRead{}
	for _, id := range ids {
		key := backup.Key(namespace, cluster, id, backup.ManifestName)
		body, err := st.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(body, maxManifest+1))
		_ = body.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		if len(b) > maxManifest {
			out[id] = manifestRead{err: fmt.Errorf("%s is larger than %d bytes: not a manifest", key, maxManifest)}
			continue
		}
		m, err := backup.Decode(b)
		out[id] = manifestRead{m: m, err: err}
	}
	return out, nil
}

// entries decides what each directory listed in objs is, newest first. It is pure.
func entries(namespace, cluster string, objs []objectstore.Object, manifests map[string]manifestRead, running string) []Entry {
	l := backup.List(namespace, cluster, objs)
	byID := map[string][]objectstore.Object{}
	for _, id := range slices.Concat(l.Complete, l.Incomplete) {
		prefix := backup.Key(namespace, cluster, id, "")
		for _, o := range objs {
			if strings.HasPrefix(o.Key, prefix) {
				byID[id] = append(byID[id], o)
			}
		}
	}
	var out []Entry
	for _, id := range l.Complete {
		out = append(out, completeEntry(namespace, cluster, id, byID[id], manifests[id]))
	}
	for _, id := range l.Incomplete {
		e := Entry{ID: id, State: Incomplete, Listed: listed(namespace, cluster, id, byID[id])}
		if id == running {
			e.State = Running
		}
		out = append(out, e)
	}
	if running != "" && byID[running] == nil {
		out = append(out, Entry{ID: running, State: Running, Listed: []Listed{}})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(b.ID, a.ID) })
	return out
}

// completeEntry is the entry of a directory with a manifest.
func completeEntry(namespace, cluster, id string, objs []objectstore.Object, mr manifestRead) Entry {
	e := Entry{ID: id, State: Complete, Listed: listed(namespace, cluster, id, objs)}
	m := mr.m
	switch {
	case mr.err != nil:
		e.State, e.Problems = Unreadable, []string{mr.err.Error()}
	case m.ID != id || m.Namespace != namespace || m.Cluster != cluster:
		e.State, e.Problems = Unreadable, []string{fmt.Sprintf("its manifest names backup %s of %s/%s", m.ID, m.Namespace, m.Cluster)}
	default:
		e.Manifest = &m
		if e.Problems = backup.Damage(m, objs); len(e.Problems) > 0 {
			e.State = Damaged
		}
	}
	return e
}

// listed is the directory's objects by name, in name order (never nil: an empty JSON list).
func listed(namespace, cluster, id string, objs []objectstore.Object) []Listed {
	prefix := backup.Key(namespace, cluster, id, "")
	out := []Listed{}
	for _, o := range objs {
		out = append(out, Listed{Name: strings.TrimPrefix(o.Key, prefix), Size: o.Size, LastModified: o.LastModified})
	}
	slices.SortFunc(out, func(a, b Listed) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Deletable refuses to delete the backup recorded as running: its Job may still write objects
// and its manifest after them.
func Deletable(c *v1.MysqlCluster, id string) error {
	if st := c.Status.Backup; st != nil && st.Running != nil && st.Running.ID == id {
		return fmt.Errorf("%w: backup %s of %s is running (status.backup.running, stage %s): stop it with 'backup abort %s' first, then delete it",
			outcome.ErrUnsafe, id, c.Name, st.Running.Stage, c.Name)
	}
	return nil
}

// DeleteOrder is the directory's objects in the order Delete removes them (backup.DeleteOrder:
// the manifest first).
func (e Entry) DeleteOrder() []Listed {
	byName := map[string]Listed{}
	names := make([]string, 0, len(e.Listed))
	for _, o := range e.Listed {
		byName[o.Name] = o
		names = append(names, o.Name)
	}
	out := make([]Listed, 0, len(names))
	for _, n := range backup.DeleteOrder(names) {
		out = append(out, byName[n])
	}
	return out
}

// Deleted is what Delete removed.
type Deleted struct {
	// Objects and Bytes count the objects deleted.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// AbortedUploads counts the incomplete multipart uploads aborted in the directory.
	AbortedUploads int `json:"abortedUploads"`
}

// Delete removes backup e's objects in backup.DeleteOrder (the manifest first), then aborts the
// multipart uploads under its directory that began before before (the copy of a backup whose
// Job was deleted). On an error it returns what it deleted until then; deleting the backup
// again finishes, since what is left is an incomplete directory.
func Delete(ctx context.Context, st Store, namespace, cluster string, e Entry, before time.Time) (Deleted, error) {
	var d Deleted
	for _, o := range e.DeleteOrder() {
		if err := st.Delete(ctx, backup.Key(namespace, cluster, e.ID, o.Name)); err != nil {
			return d, fmt.Errorf("deleted %d of the %d objects of backup %s: %w", d.Objects, len(e.Listed), e.ID, err)
		}
		d.Objects++
		d.Bytes += o.Size
	}
	n, err := st.AbortIncomplete(ctx, backup.Key(namespace, cluster, e.ID, ""), before)
	d.AbortedUploads = n
	if err != nil {
		return d, fmt.Errorf("deleted the %d objects of backup %s; aborting its incomplete uploads: %w", d.Objects, e.ID, err)
	}
	return d, nil
}

// IsNotFound reports whether err is a backup ID with no directory.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}
