package catalog

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// NoBackupSpec is the refusal of a backup command for a cluster without spec.backup (bad input,
// exit code 2): it says what to set.
func NoBackupSpec(c *v1.MysqlCluster) error {
	return fmt.Errorf("%w: cluster %s has no spec.backup: set the bucket and the Secret with its keys (see 'mysqlctl backup --help')", outcome.ErrInvalid, c.Name)
}

// StoreConfig is cluster c's bucket as its spec.backup names it (bucket, prefix, endpoint,
// region, path style), with the keys of the Secret spec.backup.credentialsSecretName read
// through kube. The keys are only ever in the returned Config, whose String never shows them;
// no error holds them. A missing spec.backup, Secret or key is bad input (outcome.ErrInvalid,
// as for the cluster's own credentials Secret), and the error says what to create.
func StoreConfig(ctx context.Context, kube client.Reader, c *v1.MysqlCluster) (objectstore.Config, error) {
	b := c.Spec.Backup
	if b == nil {
		return objectstore.Config{}, NoBackupSpec(c)
	}
	s := &corev1.Secret{}
	err := kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: b.CredentialsSecretName}, s)
	if apierrors.IsNotFound(err) {
		return objectstore.Config{}, outcome.Invalid(fmt.Sprintf("the Secret %s/%s with the bucket's keys (spec.backup.credentialsSecretName of %s) does not exist: create it: %s",
			c.Namespace, b.CredentialsSecretName, c.Name, createSecretCommand(c.Namespace, b.CredentialsSecretName)))
	}
	if err != nil {
		return objectstore.Config{}, fmt.Errorf("read the Secret %s/%s with the bucket's keys: %w", c.Namespace, b.CredentialsSecretName, err)
	}
	var missing []string
	for _, k := range []string{specs.BucketSecretAccessKey, specs.BucketSecretSecretKey} {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return objectstore.Config{}, outcome.Invalid(fmt.Sprintf("the Secret %s/%s (spec.backup.credentialsSecretName of %s) has no %q: set both keys: %s --dry-run=client -o yaml | kubectl apply -f -",
			c.Namespace, b.CredentialsSecretName, c.Name, missing, createSecretCommand(c.Namespace, b.CredentialsSecretName)))
	}
	return objectstore.Config{
		Endpoint: b.Endpoint, Region: b.Region, Bucket: b.Bucket, Prefix: b.Prefix, PathStyle: b.PathStyle,
		AccessKey: string(s.Data[specs.BucketSecretAccessKey]), SecretKey: string(s.Data[specs.BucketSecretSecretKey]),
	}, nil
}

// createSecretCommand is the command that creates the bucket's Secret, the keys left for a
// person to fill in.
func createSecretCommand(namespace, name string) string {
	return fmt.Sprintf("kubectl create secret generic %s -n %s --from-literal=%s=... --from-literal=%s=...",
		name, namespace, specs.BucketSecretAccessKey, specs.BucketSecretSecretKey)
}
