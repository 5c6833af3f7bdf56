package orchestrate

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// statusBackoff retries conflicts with jitter for a few seconds: status writers are few (one
// actor holds the lease; watch and a CLI may both record observations), and each retry re-reads.
var statusBackoff = wait.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 1, Cap: time.Second}

// StatusClient is the part of a Kubernetes client the status writer needs.
type StatusClient interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	Status() client.SubResourceWriter
}

var _ StatusClient = client.Client(nil)

// StatusChange is one small change to a cluster's status. It may return an error to abort the
// transaction (for example when a precondition read from the fresh status no longer holds).
type StatusChange func(*v1.MysqlClusterStatus) error

// UpdateStatus applies change to the cluster's current status as a compare-and-swap: it reads
// the live object, applies change, and writes with the resourceVersion it read, so a write
// based on a stale view fails with a conflict instead of overwriting someone else's progress.
// On conflict it re-reads and re-applies change (which must therefore be a pure function of
// the status it is given). Nothing is written when change leaves the status as it was.
// The cluster object passed in is updated to the written (or read) state.
func UpdateStatus(ctx context.Context, c StatusClient, cluster *v1.MysqlCluster, change StatusChange) error {
	key := client.ObjectKeyFromObject(cluster)
	return retry.RetryOnConflict(statusBackoff, func() error {
		live := &v1.MysqlCluster{}
		if err := c.Get(ctx, key, live); err != nil {
			return err
		}
		before := live.Status.DeepCopy()
		if err := change(&live.Status); err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(before, &live.Status) {
			live.DeepCopyInto(cluster)
			return nil
		}
		if err := c.Status().Update(ctx, live); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("write status of %s: %w", key, err)
		}
		live.DeepCopyInto(cluster)
		return nil
	})
}

// UpdateStatusFrom is UpdateStatus starting from the cluster as the caller holds it (read or
// written moments ago): change is applied to that copy and written conditionally on its
// resourceVersion, without a read first. Anything written since makes that write conflict, and
// a change that refuses the held copy may have been refused on old news: both fall back to
// UpdateStatus, which reads the live object. The outcome is UpdateStatus's, one read fewer.
func UpdateStatusFrom(ctx context.Context, c StatusClient, cluster *v1.MysqlCluster, change StatusChange) error {
	if cluster.ResourceVersion == "" {
		return UpdateStatus(ctx, c, cluster, change)
	}
	held := cluster.DeepCopy()
	if err := change(&held.Status); err == nil && !equality.Semantic.DeepEqual(&cluster.Status, &held.Status) {
		err := c.Status().Update(ctx, held)
		if err == nil {
			held.DeepCopyInto(cluster)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("write status of %s: %w", client.ObjectKeyFromObject(cluster), err)
		}
	}
	return UpdateStatus(ctx, c, cluster, change)
}
