package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// A restore from a bucket alone (--from-url): the source cluster, and with it its Secret, may be
// gone (its namespace deleted, another Kubernetes cluster). The backups are read from the URL, the
// new cluster's spec comes from a MysqlCluster manifest (-f: the one the lost cluster was created
// from, typically), and the new cluster gets a Secret of its own, whose root password the restore
// sets in the restored data (spec.restore.resetPasswords).

// backupURL is what --from-url names: the backups of one cluster in a bucket, or one of them.
type backupURL struct {
	raw string
	// Bucket and Path are the URL's host and path (without its leading /).
	Bucket, Path string
}

// parseBackupURL checks the form s3://BUCKET/[PREFIX]NAMESPACE/NAME/backups/[BACKUP/], as 'backup
// list' and 'backup describe' print it. Which part of the path is the prefix is known only from the
// bucket's configuration (see split).
func parseBackupURL(s string) (backupURL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return backupURL{}, cmdutil.FlagErrorf("--from-url %q is not s3://BUCKET/[PREFIX]NAMESPACE/NAME/backups/[BACKUP] (as 'backup list' prints it)", s)
	}
	path := strings.TrimPrefix(u.Path, "/")
	if !strings.Contains("/"+path, "/backups/") && !strings.HasSuffix("/"+path, "/backups") {
		return backupURL{}, cmdutil.FlagErrorf("--from-url %q names no cluster's backups: give s3://BUCKET/[PREFIX]NAMESPACE/NAME/backups/[BACKUP] (as 'backup list' prints it)", s)
	}
	return backupURL{raw: s, Bucket: u.Host, Path: path}, nil
}

// split reads the source's namespace, name and backup ID (empty: the newest complete one) from the
// URL's path below the bucket's prefix.
func (b backupURL) split(bucket, prefix string) (ns, name, id string, err error) {
	where := "s3://" + bucket + "/" + prefix
	if b.Bucket != bucket || !strings.HasPrefix(b.Path, prefix) {
		return "", "", "", fmt.Errorf("%w: --from-url %s is not below the bucket of the manifest's spec.backup (%s): the new cluster reads the backup with that bucket's endpoint and keys, and keeps it for its own backups; make them agree",
			outcome.ErrInvalid, b.raw, where)
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(b.Path, prefix), "/")
	dir, id, _ := strings.Cut(rest, "/backups")
	id = strings.TrimPrefix(id, "/")
	ns, name, ok := strings.Cut(dir, "/")
	bad := !ok || strings.Contains(name, "/") || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1035Label(name)) > 0
	if bad || strings.Contains(id, "/") {
		return "", "", "", fmt.Errorf("%w: --from-url %s: below %s it should read NAMESPACE/NAME/backups/[BACKUP], and reads %s", outcome.ErrInvalid, b.raw, where, rest)
	}
	if id != "" {
		if err := backup.ValidateID(id); err != nil {
			return "", "", "", err
		}
	}
	return ns, name, id, nil
}

// fromURLSource is the source as the bucket and the manifest describe it: NAMESPACE/NAME of the
// URL with the manifest's spec (it may no longer exist anywhere), and the new cluster's namespace.
func (o *RestoreOptions) fromURLSource() (*v1.MysqlCluster, string, error) {
	co := &CreateOptions{f: o.f, File: o.File, Output: "yaml"}
	if err := co.Complete(); err != nil {
		return nil, "", err
	}
	spec := co.Cluster.Spec
	if spec.Backup == nil {
		return nil, "", cmdutil.FlagErrorf("%s has no spec.backup: a restore from a bucket alone reads the bucket with the endpoint, region and keys Secret it names", o.File)
	}
	ns, name, id, err := o.url.split(spec.Backup.Bucket, spec.Backup.Prefix)
	if err != nil {
		return nil, "", err
	}
	o.SourceName, o.BackupID = name, id
	src := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	return src, co.Cluster.Namespace, nil
}

// runFromURL restores from the bucket alone (or continues the restore that created NEWNAME).
func (o *RestoreOptions) runFromURL(ctx context.Context) error {
	src, ns, err := o.fromURLSource()
	if err != nil {
		return err
	}
	c, err := o.f.Client()
	if err != nil {
		return err
	}
	target, err := o.existingRestore(ctx, c, ns, src)
	if err != nil {
		return err
	}
	out := restoreOutput{Cluster: ns + "/" + o.Name, From: o.url.raw, Replicas: o.replicas(src)}
	if target == nil {
		b, err := o.bucketIn(ctx, c, src, ns)
		if err != nil {
			return err
		}
		m, obj, err := o.chooseIn(ctx, src, b)
		if err != nil {
			return err
		}
		target = restoreTarget(src, ns, o.Name, o.Image, m, obj)
		// The manifest's spec is the new cluster's, the names it gives its objects included.
		target.Spec.PrimaryService, target.Spec.ReplicaService, target.Spec.CredentialsSecretName = src.Spec.PrimaryService, src.Spec.ReplicaService, src.Spec.CredentialsSecretName
		target.Spec.Restore.ResetPasswords = true
		if err := sameSeries(m, target.Spec.Image); err != nil {
			return err
		}
		out.BackupTaken = &m.FinishedAt
	}
	out.BackupID, out.GTIDPosition = target.Spec.Restore.BackupID, target.Spec.Restore.GTIDPosition
	return o.createAndCarryOut(ctx, c, src, target, out, ensureOwnSecret)
}

// bucketIn opens the bucket with the configuration of the source's spec.backup (with --from-url, the
// manifest's) and the keys of its Secret in the new cluster's namespace ns (where it must be
// created first, when it is not the source's).
func (o *RestoreOptions) bucketIn(ctx context.Context, c client.Client, src *v1.MysqlCluster, ns string) (*clusterBucket, error) {
	holder := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.Name}, Spec: src.Spec}
	cfg, err := catalog.StoreConfig(ctx, c, holder)
	if err != nil {
		return nil, cmdutil.ExplainAPIError(err)
	}
	return newClusterBucket(src, cfg, o.Endpoint)
}

// newClusterBucket is the store of cfg (reached at endpoint, when given), for the backups of
// cluster; the copy of cfg it keeps holds no keys.
func newClusterBucket(cluster *v1.MysqlCluster, cfg objectstore.Config, endpoint string) (*clusterBucket, error) {
	if endpoint != "" {
		cfg.Endpoint = endpoint
	}
	cfg.PartTimeout = bucketRequestTimeout
	st, err := objectstore.New(cfg)
	if err != nil {
		return nil, err
	}
	cfg.AccessKey, cfg.SecretKey = "", ""
	return &clusterBucket{cluster: cluster, cfg: cfg, store: st, endpoint: endpoint}, nil
}

// ensureOwnSecret makes sure the new cluster has its credentials Secret: one that exists (a
// person may have created it, with the old passwords or new ones) is used when it holds every
// key; otherwise one is created with new random passwords. The restore sets root's password in
// the restored data to the Secret's, and the bootstrap every other account's.
func ensureOwnSecret(ctx context.Context, c client.Client, _ *v1.MysqlCluster, target *v1.MysqlCluster) (bool, error) {
	have := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: target.Namespace, Name: specs.SecretName(target)}, have)
	switch {
	case err == nil:
		if missing := specs.MissingSecretKeys(have); len(missing) > 0 {
			return false, fmt.Errorf("%w: the credentials Secret %s/%s lacks %v: delete it to have new passwords generated, or add them",
				outcome.ErrInvalid, have.Namespace, have.Name, missing)
		}
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, cmdutil.ExplainAPIError(err)
	}
	s, err := specs.BuildSecret(target)
	if err != nil {
		return false, err
	}
	if err := c.Create(ctx, s); err != nil {
		// The error names the object, never its data.
		return false, errors.New("create Secret " + s.Namespace + "/" + s.Name + ": " + string(apierrors.ReasonForError(err)))
	}
	return true, nil
}
