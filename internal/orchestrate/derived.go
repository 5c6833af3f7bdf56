package orchestrate

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// ErrSecretIncomplete means the credentials Secret exists but lacks required keys (a bad input:
// exit code 2).
var ErrSecretIncomplete = outcome.Invalid("credentials Secret incomplete")

// CheckSecret reads the credentials Secret. It returns (nil, nil) when there is none (mysqlctl
// will generate one) and an error naming every missing key when it exists but is incomplete.
func CheckSecret(ctx context.Context, c client.Reader, cluster *v1.MysqlCluster) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: specs.SecretName(cluster)}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", cluster.Namespace, specs.SecretName(cluster), err)
	}
	if missing := specs.MissingSecretKeys(s); len(missing) > 0 {
		return nil, fmt.Errorf("%w: Secret %s/%s lacks the key(s) %s: add them, or delete the Secret to let mysqlctl generate random passwords",
			ErrSecretIncomplete, cluster.Namespace, s.Name, strings.Join(quoteAll(missing), ", "))
	}
	return s, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// EnsureSecret creates the credentials Secret with random passwords when it does not exist.
// An existing Secret is never modified. It reports whether it created one.
func EnsureSecret(ctx context.Context, c client.Client, cluster *v1.MysqlCluster) (bool, error) {
	existing, err := CheckSecret(ctx, c, cluster)
	if err != nil || existing != nil {
		return false, err
	}
	if cluster.Spec.Restore != nil {
		// Random passwords would not open the restored data, which holds the source's.
		return false, fmt.Errorf("%w: the credentials Secret %s/%s of %s, restored from %s, does not exist: it is a copy of %s's Secret, which 'restore %s --from %s' makes",
			outcome.ErrInvalid, cluster.Namespace, specs.SecretName(cluster), cluster.Name, cluster.Spec.Restore.SourceCluster, cluster.Spec.Restore.SourceCluster,
			cluster.Name, cluster.Spec.Restore.SourceCluster)
	}
	s, err := specs.BuildSecret(cluster)
	if err != nil {
		return false, err
	}
	if err := c.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Created concurrently: fine as long as it is complete.
			_, err := CheckSecret(ctx, c, cluster)
			return false, err
		}
		// The error names the object, never its data.
		return false, fmt.Errorf("create Secret %s/%s: %s", s.Namespace, s.Name, apierrors.ReasonForError(err))
	}
	return true, nil
}

// DerivedObjects returns every object derived from the cluster except the Secret, in apply
// order: configuration and Services before the StatefulSet whose pods use them.
func DerivedObjects(cluster *v1.MysqlCluster, cv specs.Convergence) ([]client.Object, error) {
	cm, err := specs.BuildConfigMap(cluster)
	if err != nil {
		return nil, err
	}
	sts, err := specs.BuildStatefulSet(cluster)
	if err != nil {
		return nil, err
	}
	return []client.Object{cm, specs.BuildHeadlessService(cluster), specs.BuildPrimaryService(cluster), specs.BuildReplicaService(cluster), specs.BuildPDB(cluster, cv), sts}, nil
}

// AppliedObject is one object Apply handled.
type AppliedObject struct {
	Kind, Name string
	Result     ApplyResult
	// Reason says why the object was Held.
	Reason string
}

// String is the object's line as kubectl prints it ("statefulset/db configured"), with the
// reason of a hold.
func (a AppliedObject) String() string {
	s := fmt.Sprintf("%s/%s %s", strings.ToLower(a.Kind), a.Name, a.Result)
	if a.Reason != "" {
		s += ": " + a.Reason
	}
	return s
}

// DerivedClient is the part of a Kubernetes client ApplyDerived needs: Apply's, the lists of
// holdTemplate, and the deletes of pruneConfigMaps.
type DerivedClient interface {
	ApplyClient
	pruneClient
}

// ApplyDerived applies every derived object (not the Secret) and reports what changed.
func ApplyDerived(ctx context.Context, c DerivedClient, cluster *v1.MysqlCluster, cv specs.Convergence) ([]AppliedObject, error) {
	return applyDerived(ctx, c, cluster, cv, nil)
}

// applyDerived is ApplyDerived with a guard asked before every object is applied (nil: none):
// an actor holding the cluster's lease passes its validity check, so that an actor that lost
// the lease halfway stops before the next write. A new pod template is held while a rollout is
// unfinished (holdTemplate), reported Held; its ConfigMap is written (no pod reads it before the
// template does). ConfigMaps no revision of the StatefulSet reads any more are deleted.
func applyDerived(ctx context.Context, c DerivedClient, cluster *v1.MysqlCluster, cv specs.Convergence, guard func() error) ([]AppliedObject, error) {
	cluster, err := pinReplicas(ctx, c, cluster)
	if err != nil {
		return nil, err
	}
	objs, err := DerivedObjects(cluster, cv)
	if err != nil {
		return nil, err
	}
	held := ""
	for _, o := range objs {
		if sts, ok := o.(*appsv1.StatefulSet); ok {
			if held, err = holdTemplate(ctx, c, sts, nil); err != nil {
				return nil, err
			}
		}
	}
	var out []AppliedObject
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if guard != nil {
			if err := guard(); err != nil {
				return out, err
			}
		}
		r, err := Apply(ctx, c, o)
		if err != nil {
			return out, err
		}
		a := AppliedObject{Kind: kind, Name: o.GetName(), Result: r}
		if _, sts := o.(*appsv1.StatefulSet); sts && held != "" {
			a.Result, a.Reason = Held, "its new pod template waits: "+held
		}
		out = append(out, a)
	}
	pruneConfigMaps(ctx, c, cluster)
	return out, nil
}

// DiffDerived reports what ApplyDerived would do with every derived object, reading only.
func DiffDerived(ctx context.Context, c DiffClient, cluster *v1.MysqlCluster, cv specs.Convergence) ([]AppliedObject, error) {
	cluster, err := pinReplicas(ctx, c, cluster)
	if err != nil {
		return nil, err
	}
	objs, err := DerivedObjects(cluster, cv)
	if err != nil {
		return nil, err
	}
	out := make([]AppliedObject, 0, len(objs))
	for _, o := range objs {
		r, err := Diff(ctx, c, o)
		if err != nil {
			return nil, err
		}
		out = append(out, AppliedObject{Kind: o.GetObjectKind().GroupVersionKind().Kind, Name: o.GetName(), Result: r})
	}
	return out, nil
}
