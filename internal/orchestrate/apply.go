package orchestrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// AnnotationDesiredHash records, on every object mysqlctl applies, a hash of what it applied.
// Together with a field-by-field check of the live object it lets Apply skip the request when
// nothing would change: the hash catches a field mysqlctl stopped setting (which a subset
// check cannot see), the subset check catches someone editing a field mysqlctl owns.
const AnnotationDesiredHash = "mysqlctl.io/desired-hash"

// ApplyResult says what Apply did.
type ApplyResult string

// Apply results, worded as kubectl words them.
const (
	Created    ApplyResult = "created"
	Configured ApplyResult = "configured"
	Unchanged  ApplyResult = "unchanged"
)

// DiffClient is the part of a Kubernetes client Diff needs: it only reads.
type DiffClient interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// ApplyClient is the part of a Kubernetes client Apply needs.
type ApplyClient interface {
	DiffClient
	Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error
}

var _ ApplyClient = client.Client(nil)

// Apply server-side applies obj under FieldOwner unless the live object already holds every
// field of obj and carries obj's hash, in which case it sends no write at all. Values the API
// server defaulted (fields obj does not set) are never a difference.
func Apply(ctx context.Context, c ApplyClient, obj client.Object) (ApplyResult, error) {
	desired, r, err := diff(ctx, c, obj)
	if err != nil || r == Unchanged {
		return r, err
	}
	verb := "apply"
	if r == Created {
		verb = "create"
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("%s %s %s: %w", verb, desired.GetKind(), desired.GetName(), err)
	}
	return r, nil
}

// Diff reports what Apply would do with obj (Created, Configured or Unchanged) by reading the
// live object, without writing anything. A guard decides on it before anything is written.
func Diff(ctx context.Context, c DiffClient, obj client.Object) (ApplyResult, error) {
	_, r, err := diff(ctx, c, obj)
	return r, err
}

// diff returns obj as Apply would send it and what sending it would do.
func diff(ctx context.Context, c DiffClient, obj client.Object) (*unstructured.Unstructured, ApplyResult, error) {
	desired, err := toApplyUnstructured(obj)
	if err != nil {
		return nil, "", err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	err = c.Get(ctx, client.ObjectKeyFromObject(desired), live)
	switch {
	case apierrors.IsNotFound(err):
		return desired, Created, nil
	case err != nil:
		return nil, "", fmt.Errorf("get %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	keepImmutable(live, desired)
	if live.GetAnnotations()[AnnotationDesiredHash] == desired.GetAnnotations()[AnnotationDesiredHash] &&
		Contains(live.Object, desired.Object) {
		return desired, Unchanged, nil
	}
	return desired, Configured, nil
}

// toApplyUnstructured converts a typed desired object into an apply configuration: without
// status and the zero values typed structs always carry (creationTimestamp: null), and with
// the desired-hash annotation.
func toApplyUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	m = prune(m).(map[string]any)
	u := &unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, fmt.Errorf("desired %T %s has no apiVersion/kind", obj, obj.GetName())
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationDesiredHash] = hex.EncodeToString(sum[:12])
	u.SetAnnotations(ann)
	return u, nil
}

// prune drops nil values (creationTimestamp: null and the like), which a typed struct
// serialises for fields it does not set. Empty maps stay: an empty emptyDir is meaningful.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if e != nil {
				out[k] = prune(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = prune(e)
		}
		return out
	}
	return v
}

// Contains reports whether live holds every field of desired with the same value. Maps are
// compared key by key (extra live keys are defaults or other owners' fields), lists element by
// element with equal length, scalars by value (numbers compared numerically, as JSON decoding
// may turn an int64 into a float64).
func Contains(live, desired any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			// An empty desired map matches an absent one.
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			if !Contains(l[k], dv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false
		}
		for i := range d {
			if !Contains(l[i], d[i]) {
				return false
			}
		}
		return true
	}
	if dn, ok := number(desired); ok {
		ln, ok := number(live)
		return ok && ln == dn
	}
	return reflect.DeepEqual(live, desired)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// keepImmutable keeps the live value of fields the API server refuses to change, so that an
// object created by an older mysqlctl still converges on everything else. A StatefulSet's
// podManagementPolicy is such a field: clusters created before it became Parallel keep
// OrderedReady until their StatefulSet is recreated.
func keepImmutable(live, desired *unstructured.Unstructured) {
	if desired.GetKind() != "StatefulSet" {
		return
	}
	if p, ok, _ := unstructured.NestedString(live.Object, "spec", "podManagementPolicy"); ok && p != "" {
		_ = unstructured.SetNestedField(desired.Object, p, "spec", "podManagementPolicy")
	}
}

// DryRunApply sends obj as Apply would, with dryRun=All: the API server validates, defaults
// and admits it and persists nothing. It returns the object as the server would have stored it.
func DryRunApply(ctx context.Context, c client.Writer, obj client.Object) (*unstructured.Unstructured, error) {
	desired, err := toApplyUnstructured(obj)
	if err != nil {
		return nil, err
	}
	//nolint:staticcheck // a Patch (unlike Apply) returns the object the server built.
	if err := c.Patch(ctx, desired, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, fmt.Errorf("apply %s %s (dry run): %w", desired.GetKind(), desired.GetName(), err)
	}
	return desired, nil
}
