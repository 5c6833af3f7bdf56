package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// Held is the result of a StatefulSet whose new pod template was not written because a rollout
// is unfinished (see holdTemplate).
const Held ApplyResult = "held"

// holdTemplate reads the live StatefulSet want would replace and the pods it owns, and decides
// with failover.HoldTemplate whether want's template may be written. When it is held, want is
// changed in place to keep the live template, and the partition is never raised: it stays where
// it is, or goes down to lower (an upgrade stepping on the rollout of the live template, which
// is the one it recorded; nil for none). The rollout in progress goes on with the template it
// started, and the change is written once it has finished. The reason says why ("" when want
// may be written as built). keep holds any change whatever the pods run, with keep as the
// reason (an upgrade rolls out the template it adopted, and adopts another only at Preparing).
func holdTemplate(ctx context.Context, kube client.Reader, want *appsv1.StatefulSet, lower *int32, keep ...string) (string, error) {
	live := &appsv1.StatefulSet{}
	err := kube.Get(ctx, client.ObjectKeyFromObject(want), live)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	liveTpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&live.Spec.Template)
	if err != nil {
		return "", err
	}
	wantTpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&want.Spec.Template)
	if err != nil {
		return "", err
	}
	changed := !Contains(liveTpl, wantTpl)
	if !changed {
		return "", nil
	}
	why, err := rolloutAhead(ctx, kube, live)
	if err != nil {
		return "", err
	}
	if why == "" && len(keep) > 0 {
		why = keep[0]
	}
	wp := partitionOf(want)
	if why == "" {
		// A new template is only ever written with every pod held back: the upgrade lowers
		// the partition for it afterwards, one pod at a time behind its barriers.
		if wp != nil && want.Spec.Replicas != nil {
			*wp = *want.Spec.Replicas
		}
		return "", nil
	}
	want.Spec.Template = *live.Spec.Template.DeepCopy()
	if lp := partitionOf(live); lp != nil && wp != nil {
		*wp = *lp
		if lower != nil && *lower < *wp {
			*wp = *lower
		}
	}
	return why, nil
}

// rolloutAhead says which pods of the live StatefulSet ran an image its current revision does
// not have (failover.HoldTemplate: "" when none).
func rolloutAhead(ctx context.Context, kube client.Reader, live *appsv1.StatefulSet) (string, error) {
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.InNamespace(live.Namespace), client.MatchingLabels(live.Spec.Selector.MatchLabels)); err != nil {
		return "", err
	}
	var revs []failover.PodRevision
	for _, p := range pods.Items {
		revs = append(revs, failover.PodRevision{Name: p.Name, Revision: p.Labels[revisionLabel], Image: containerImage(&p), Ran: containerRan(&p)})
	}
	return failover.HoldTemplate(live.Status.CurrentRevision, revisionImage(ctx, kube, live.Namespace, live.Status.CurrentRevision), revs), nil
}

// containerRan reports whether the pod's database container ever started (one whose image never
// pulled never touched the data directory).
func containerRan(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == specs.ContainerName {
			return cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil
		}
	}
	return false
}

// revisionImage is the database image of the StatefulSet's revision rev, read from the
// ControllerRevision the controller keeps for it ("" when it cannot be read).
func revisionImage(ctx context.Context, kube client.Reader, ns, rev string) string {
	cr := &appsv1.ControllerRevision{}
	if rev == "" || kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: rev}, cr) != nil {
		return ""
	}
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if json.Unmarshal(cr.Data.Raw, &data) != nil {
		return ""
	}
	return templateImage(&data.Spec.Template)
}

// partitionOf is the StatefulSet's rolling-update partition (nil when it has none).
func partitionOf(s *appsv1.StatefulSet) *int32 {
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		return ru.Partition
	}
	return nil
}

// pruneClient is what pruneConfigMaps needs of a Kubernetes client.
type pruneClient interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
}

// pruneConfigMaps deletes the cluster's ConfigMaps that nothing may read any more: kept are the
// one the spec renders, every one a pod mounts, and every one a revision of the StatefulSet
// names (the live template, and each ControllerRevision the controller keeps, the current one
// included, from which a deleted pod is recreated). Housekeeping only: a client that may not
// list or delete leaves them, and the cluster's deletion removes them all (they are owned).
func pruneConfigMaps(ctx context.Context, pc pruneClient, c *v1.MysqlCluster) {
	cnf, err := specs.RenderMyCnf(c)
	if err != nil {
		return
	}
	cms := &corev1.ConfigMapList{}
	if pc.List(ctx, cms, client.InNamespace(c.Namespace), client.MatchingLabels(specs.LabelsWith(c, "config"))) != nil || len(cms.Items) < 2 {
		return
	}
	var refs [][]byte
	revs := &appsv1.ControllerRevisionList{}
	pods := &corev1.PodList{}
	sts := &appsv1.StatefulSetList{}
	sel := client.MatchingLabels(specs.SelectorLabels(c))
	if pc.List(ctx, revs, client.InNamespace(c.Namespace), sel) != nil || pc.List(ctx, pods, client.InNamespace(c.Namespace), sel) != nil ||
		pc.List(ctx, sts, client.InNamespace(c.Namespace), sel) != nil {
		return
	}
	for _, r := range revs.Items {
		refs = append(refs, r.Data.Raw)
	}
	for _, p := range pods.Items {
		b, _ := json.Marshal(p.Spec.Volumes)
		refs = append(refs, b)
	}
	for _, s := range sts.Items {
		b, _ := json.Marshal(s.Spec.Template.Spec.Volumes)
		refs = append(refs, b)
	}
	keep := specs.ConfigMapName(c, cnf)
	for i := range cms.Items {
		cm := &cms.Items[i]
		quoted := []byte(strconv.Quote(cm.Name))
		if cm.Name == keep || slices.ContainsFunc(refs, func(b []byte) bool { return bytes.Contains(b, quoted) }) {
			continue
		}
		_ = pc.Delete(ctx, cm, client.Preconditions{ResourceVersion: &cm.ResourceVersion})
	}
}
