package supervisor

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// Cache starts one informer cache on the MysqlClusters in ns ("" for all) and on the pods
// and EndpointSlices mysqlctl manages there, and returns it once synced. The supervisor's checks
// read clusters and pods from it (no request per check), and its informers wake supervisors
// (see WakeOnChanges).
func Cache(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ns string) (crcache.Cache, error) {
	managed := labels.SelectorFromSet(labels.Set{specs.LabelManagedBy: specs.FieldOwner})
	opts := crcache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]crcache.ByObject{
			&corev1.Pod{}:                {Label: managed},
			&discoveryv1.EndpointSlice{}: {Label: managed},
		},
	}
	if ns != "" {
		opts.DefaultNamespaces = map[string]crcache.Config{ns: {}}
	}
	c, err := crcache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&v1.MysqlCluster{}, &corev1.Pod{}, &discoveryv1.EndpointSlice{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the informer cache did not sync: %w", ctx.Err())
	}
	return c, nil
}

// WakeOnChanges wakes a cluster's supervisor for a check at once, instead of at its next
// interval, when a change can matter to its primary: a pod deleted, readied, unreadied or
// re-addressed; the primary Service's endpoints; a new spec or a request left on the cluster.
// Status writes wake nothing (the supervisor makes them). Every cluster added, changed or
// deleted is also given to onCluster, when set (metrics).
func WakeOnChanges(ctx context.Context, c crcache.Cache, sup *Supervisor, onCluster func(c *v1.MysqlCluster, deleted bool)) error {
	wake := func(obj any) {
		if m, ok := obj.(metav1.Object); ok {
			if name := m.GetLabels()[specs.LabelInstance]; name != "" {
				sup.Wake(client.ObjectKey{Namespace: m.GetNamespace(), Name: name})
			}
		}
	}
	handlers := []struct {
		obj     client.Object
		changed func(old, cur any) bool
	}{
		{&corev1.Pod{}, podChanged},
		{&discoveryv1.EndpointSlice{}, func(old, cur any) bool {
			o, c := old.(*discoveryv1.EndpointSlice), cur.(*discoveryv1.EndpointSlice)
			return fmt.Sprint(o.Endpoints) != fmt.Sprint(c.Endpoints)
		}},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return err
		}
		changed := h.changed
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) {
				if changed(old, cur) {
					wake(cur)
				}
			},
			DeleteFunc: func(obj any) { wake(unwrapDeleted(obj)) },
		}); err != nil {
			return err
		}
	}
	inf, err := c.GetInformer(ctx, &v1.MysqlCluster{})
	if err != nil {
		return err
	}
	tell := func(obj any, deleted bool) {
		if mc, ok := unwrapDeleted(obj).(*v1.MysqlCluster); ok && onCluster != nil {
			onCluster(mc, deleted)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { tell(obj, false) },
		UpdateFunc: func(old, cur any) {
			o, c := old.(*v1.MysqlCluster), cur.(*v1.MysqlCluster)
			if o.Generation != c.Generation || o.Annotations[v1.AnnotationRequest] != c.Annotations[v1.AnnotationRequest] {
				sup.Wake(client.ObjectKeyFromObject(c))
			}
			tell(cur, false)
		},
		DeleteFunc: func(obj any) { tell(obj, true) },
	})
	return err
}

// unwrapDeleted returns the object of a deletion the informer learnt of late.
func unwrapDeleted(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// podChanged reports a change of a pod that can matter to its role: deletion begun, address,
// readiness, phase or a container restart.
func podChanged(old, cur any) bool {
	o, c := old.(*corev1.Pod), cur.(*corev1.Pod)
	ready := func(p *corev1.Pod) bool {
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodReady {
				return cd.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	restarts := func(p *corev1.Pod) (n int32) {
		for _, s := range p.Status.ContainerStatuses {
			n += s.RestartCount
		}
		return n
	}
	return (o.DeletionTimestamp == nil) != (c.DeletionTimestamp == nil) || o.Status.PodIP != c.Status.PodIP ||
		ready(o) != ready(c) || o.Status.Phase != c.Status.Phase || restarts(o) != restarts(c)
}
