package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// ApplySnapshot is what applying a cluster definition would change, and the recorded state
// that decides whether it may: everything DecideApply needs, gathered without writing.
type ApplySnapshot struct {
	// Cluster is the cluster's name.
	Cluster string
	// Exists is whether the MysqlCluster exists already.
	Exists bool
	// SpecChanged is whether applying the definition changes the stored MysqlCluster (its spec,
	// labels or annotations).
	SpecChanged bool
	// Replicas is spec.replicas after the apply, PreviousReplicas before it (0 when new).
	Replicas, PreviousReplicas int32
	// CurrentPrimary is status.currentPrimary ("" before bootstrap).
	CurrentPrimary string
	// Operation is status.operation, the operation in progress (nil when none).
	Operation *v1.OperationStatus
	// Objects is what applying would do with each derived object, the credentials Secret
	// included (listed only when it would be created), in apply order.
	Objects []AppliedObject
}

// ApplyDecision is what an apply may write.
type ApplyDecision struct {
	// Changes names every object the apply changes ("mysqlcluster/demo", "statefulset/demo",
	// …); none when the apply has nothing to write.
	Changes []string
	// WriteDerived is whether the derived objects (and a missing Secret) are applied after the
	// MysqlCluster. It is false while an operation is recorded: its stages own them.
	WriteDerived bool
}

// Write reports whether the apply has anything to write (and so must hold the cluster's lease).
func (d ApplyDecision) Write() bool { return len(d.Changes) > 0 }

// DecideApply decides whether an apply may write what it would change. It is pure.
//
//   - Nothing to write: allowed, whatever else is going on (an unchanged definition applied
//     during an operation succeeds and writes nothing).
//   - An operation recorded in status: any change to a derived object is refused with
//     outcome.ErrHeld, naming the operation and how to finish or undo it. The operation's
//     stages scale, label and re-derive objects from what they recorded; an apply in between
//     would pull the StatefulSet or configuration from under them. The PodDisruptionBudget is
//     left out of the comparison then: it is derived from status, fails closed while any
//     operation runs, and differs from the live one only because the operation is running.
//     A change to the MysqlCluster alone (paused, failover settings) is allowed, under the lease.
//   - spec.replicas at or below the current primary's ordinal, when the StatefulSet or
//     spec.replicas would change: refused with outcome.ErrUnsafe. A StatefulSet scales down
//     from its highest ordinal, so the primary's pod would be deleted under its clients with
//     no failover planned; moving the primary first (switchover) makes the same apply safe.
//
// Another actor holding the lease is not judged here: AcquireLease refuses that at once.
func DecideApply(s ApplySnapshot) (ApplyDecision, error) {
	var derived []string
	stsChanges := false
	for _, o := range s.Objects {
		if o.Result == Unchanged || s.Operation != nil && o.Kind == "PodDisruptionBudget" {
			continue
		}
		derived = append(derived, objectRef(o.Kind, o.Name))
		if o.Kind == "StatefulSet" {
			stsChanges = true
		}
	}
	if s.Exists && s.CurrentPrimary != "" && s.Replicas != s.PreviousReplicas && !stsChanges {
		// The StatefulSet keeps its count (pinReplicas) until the scale this apply starts moves
		// it: the apply changes it all the same.
		derived = append(derived, objectRef("StatefulSet", s.Cluster))
		stsChanges = true
	}
	var changes []string
	if !s.Exists || s.SpecChanged {
		changes = append(changes, objectRef("MysqlCluster", s.Cluster))
	}
	changes = append(changes, derived...)
	if len(changes) == 0 {
		return ApplyDecision{}, nil
	}
	if op := s.Operation; op != nil && len(derived) > 0 {
		holder := op.Holder
		if holder == "" {
			holder = "unknown"
		}
		return ApplyDecision{}, fmt.Errorf("%w: %s %s is in progress on cluster %s (stage %s, holder %s), and this apply would change %s; nothing was changed. "+
			"Wait for it to finish ('status %s' shows it) or, if its holder is gone, finish it with 'resume %s' or roll it back with 'abort %s'; then apply again",
			outcome.ErrHeld, op.Type, op.ID, s.Cluster, op.Stage, holder, strings.Join(derived, ", "), s.Cluster, s.Cluster, s.Cluster)
	}
	named := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: s.Cluster}}
	if ord, ok := ordinalOf(named, s.CurrentPrimary); ok && s.Replicas <= ord && (stsChanges || s.Replicas != s.PreviousReplicas) {
		return ApplyDecision{}, fmt.Errorf("%w: spec.replicas %d would remove pod %s, the current primary of cluster %s (a StatefulSet removes its highest ordinals first); nothing was changed. "+
			"Move the primary to an instance below ordinal %d first, for example with 'mysqlctl switchover %s --to %s-0', then apply again",
			outcome.ErrUnsafe, s.Replicas, s.CurrentPrimary, s.Cluster, s.Replicas, s.Cluster, s.Cluster)
	}
	return ApplyDecision{Changes: changes, WriteDerived: s.Operation == nil}, nil
}

// objectRef names an object the way kubectl prints it: kind/name, the kind in lower case.
func objectRef(kind, name string) string { return strings.ToLower(kind) + "/" + name }

// ApplyClusterResult says what ApplyCluster wrote.
type ApplyClusterResult struct {
	// Cluster is what happened to the MysqlCluster: created, configured or unchanged ("" when
	// the apply stopped before deciding).
	Cluster ApplyResult
	// SecretCreated is true when the credentials Secret was generated.
	SecretCreated bool
	// Derived is what happened to each derived object; empty when none was applied.
	Derived []AppliedObject
}

// ApplyCluster applies a cluster definition (creating the cluster when absent) and converges
// its derived objects, as 'apply -f' does, under the guard of DecideApply:
//
//  1. gather what the apply would change without writing: the MysqlCluster as the API server
//     would store it (a server-side dry run, so the API server's defaults and validation apply
//     before anything is written) and the derived objects built from it, compared with the
//     live ones;
//  2. decide (DecideApply); a refusal or nothing to write returns before any write;
//  3. take the cluster's lease at once or not at all (another holder: outcome.ErrHeld naming
//     it), then gather and decide again, since an operation may have been recorded since the
//     first look;
//  4. write the MysqlCluster, then the Secret and derived objects, each write only while the
//     lease is provably held; release the lease.
//
// The derived objects are built from the MysqlCluster as stored after the write, which must
// be what was decided on: if someone else changed its spec in between, nothing derived is
// written and the error says to apply again.
func ApplyCluster(ctx context.Context, c client.Client, desired *v1.MysqlCluster, holder string) (ApplyClusterResult, error) {
	st, err := gatherApply(ctx, c, desired)
	if err != nil {
		return ApplyClusterResult{}, err
	}
	d, err := DecideApply(st.snap)
	if err != nil {
		return ApplyClusterResult{}, err
	}
	if !d.Write() {
		return ApplyClusterResult{Cluster: Unchanged}, nil
	}
	// st.next carries the recorded status: a recorded operation's epoch bounds the new one.
	lctx, lease, err := AcquireLease(ctx, c, st.next, holder, LeaseOptions{})
	if err != nil {
		if errors.Is(err, outcome.ErrHeld) {
			return ApplyClusterResult{}, fmt.Errorf("%w; this apply would change %s, so nothing was changed: apply again once that actor is done", err, strings.Join(d.Changes, ", "))
		}
		return ApplyClusterResult{}, err
	}
	defer lease.Release(context.WithoutCancel(ctx))

	if st, err = gatherApply(lctx, c, desired); err != nil {
		return ApplyClusterResult{}, err
	}
	if d, err = DecideApply(st.snap); err != nil {
		return ApplyClusterResult{}, err
	}
	if !d.Write() {
		return ApplyClusterResult{Cluster: Unchanged}, nil
	}
	return writeApply(lctx, c, lease, desired, st, d)
}

// applyState is what gatherApply read: the snapshot to decide on and what the writes need.
type applyState struct {
	snap ApplySnapshot
	// live is the stored MysqlCluster (nil when it does not exist yet).
	live *v1.MysqlCluster
	// next is the MysqlCluster the apply would store, with live's status.
	next *v1.MysqlCluster
}

// gatherApply reads what applying desired would change. Its only non-read request is the
// server-side dry run of the MysqlCluster, which the API server validates and then discards.
func gatherApply(ctx context.Context, c client.Client, desired *v1.MysqlCluster) (applyState, error) {
	key := client.ObjectKeyFromObject(desired)
	var st applyState
	live := &v1.MysqlCluster{}
	switch err := c.Get(ctx, key, live); {
	case err == nil:
		st.live = live
	case !apierrors.IsNotFound(err):
		return st, fmt.Errorf("read MysqlCluster %s: %w", key, err)
	}
	u, err := clusterApplyConfig(desired)
	if err != nil {
		return st, err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(specs.FieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
		return st, err
	}
	next := &v1.MysqlCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, next); err != nil {
		return st, fmt.Errorf("read the dry-run result for MysqlCluster %s: %w", key, err)
	}
	next.Status = v1.MysqlClusterStatus{}
	if st.live != nil {
		next.Status = *st.live.Status.DeepCopy()
	}
	st.next = next

	s := ApplySnapshot{
		Cluster:        desired.Name,
		Exists:         st.live != nil,
		Replicas:       replicasOf(next),
		CurrentPrimary: next.Status.CurrentPrimary,
		Operation:      next.Status.Operation,
	}
	if st.live != nil {
		s.PreviousReplicas = replicasOf(st.live)
		s.SpecChanged = !equality.Semantic.DeepEqual(st.live.Spec, next.Spec) ||
			!maps.Equal(st.live.Labels, next.Labels) || !maps.Equal(st.live.Annotations, next.Annotations)
	}
	secret, err := CheckSecret(ctx, c, next)
	if err != nil {
		return st, err
	}
	if secret == nil {
		s.Objects = append(s.Objects, AppliedObject{Kind: "Secret", Name: specs.SecretName(next), Result: Created})
	}
	derived, err := DiffDerived(ctx, c, next, specs.ConvergenceFromStatus(next, true))
	if err != nil {
		return st, err
	}
	s.Objects = append(s.Objects, derived...)
	st.snap = s
	return st, nil
}

// replicasOf is spec.replicas as the StatefulSet gets it (0 means the default, 3).
func replicasOf(c *v1.MysqlCluster) int32 {
	if c.Spec.Replicas == 0 {
		return 3
	}
	return c.Spec.Replicas
}

// clusterApplyConfig is the MysqlCluster as apply sends it: no status, and without the zero
// creationTimestamp a typed struct serialises (it would be a field this owner claims).
func clusterApplyConfig(c *v1.MysqlCluster) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// writeApply performs the decided writes while the lease is held.
func writeApply(ctx context.Context, c client.Client, lease *Lease, desired *v1.MysqlCluster, st applyState, d ApplyDecision) (ApplyClusterResult, error) {
	key := client.ObjectKeyFromObject(desired)
	res := ApplyClusterResult{Cluster: Unchanged}
	if !st.snap.Exists || st.snap.SpecChanged {
		if err := lease.Check(); err != nil {
			return ApplyClusterResult{}, err
		}
		u, err := clusterApplyConfig(desired)
		if err != nil {
			return ApplyClusterResult{}, err
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
			return ApplyClusterResult{}, err
		}
	}
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, key, live); err != nil {
		return ApplyClusterResult{}, fmt.Errorf("read MysqlCluster %s: %w", key, err)
	}
	switch {
	case st.live == nil:
		res.Cluster = Created
	case st.snap.SpecChanged && st.live.ResourceVersion != live.ResourceVersion:
		res.Cluster = Configured
	}
	if !d.WriteDerived {
		return res, nil
	}
	if !equality.Semantic.DeepEqual(live.Spec, st.next.Spec) {
		return res, fmt.Errorf("the spec of MysqlCluster %s changed while it was being applied (another writer); its derived objects were left as they were: apply again", key)
	}
	if err := lease.Check(); err != nil {
		return res, err
	}
	created, err := EnsureSecret(ctx, c, live)
	res.SecretCreated = created
	if err != nil {
		return res, err
	}
	res.Derived, err = applyDerived(ctx, c, live, specs.ConvergenceFromStatus(live, true), lease.Check)
	return res, err
}

// pinReplicas returns the cluster to build derived objects from: for a bootstrapped cluster
// whose spec.replicas asks for another count than its StatefulSet has, a copy whose StatefulSet
// keeps the replicas it has. A scale moves them, one instance at a time, seeding and joining each
// added instance and detaching each removed one (ScalePending tells the caller to run it).
func pinReplicas(ctx context.Context, c DiffClient, cl *v1.MysqlCluster) (*v1.MysqlCluster, error) {
	if cl.Status.CurrentPrimary == "" || cl.Status.Scale != nil {
		return cl, nil
	}
	n, err := stsReplicas(ctx, c, cl)
	if err != nil || n == 0 || n == replicasOf(cl) {
		return cl, err
	}
	pinned := cl.DeepCopy()
	pinned.Status.Scale = &v1.ScaleStatus{Replicas: n}
	return pinned, nil
}

// stsReplicas is the replicas of the cluster's StatefulSet (0 when it does not exist).
func stsReplicas(ctx context.Context, c DiffClient, cl *v1.MysqlCluster) (int32, error) {
	sts := &appsv1.StatefulSet{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: specs.StatefulSetName(cl)}, sts); {
	case apierrors.IsNotFound(err):
		return 0, nil
	case err != nil:
		return 0, err
	case sts.Spec.Replicas == nil:
		return 1, nil
	}
	return *sts.Spec.Replicas, nil
}

// ScalePending reports whether a bootstrapped cluster's StatefulSet holds another count than
// spec.replicas, or a scale is recorded: 'scale' (or 'resume') has instances to add or remove.
func ScalePending(ctx context.Context, c DiffClient, cl *v1.MysqlCluster) (bool, error) {
	if cl.Status.Scale != nil {
		return true, nil
	}
	if cl.Status.CurrentPrimary == "" {
		return false, nil
	}
	n, err := stsReplicas(ctx, c, cl)
	return n != 0 && n != replicasOf(cl), err
}
