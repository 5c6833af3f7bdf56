package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// wakeOnChanges starts informers on the pods and EndpointSlices mysqlctl manages and on the
// MysqlClusters in ns ("" for all): a change that can matter to a cluster's primary (a pod
// deleted, readied, unreadied or re-addressed; the primary Service's endpoints; a new spec or
// a request left on the cluster) wakes that cluster's supervisor for a check at once, instead
// of at its next interval. Status writes do not wake anything (the supervisor makes them).
// Every cluster added, changed or deleted is also given to onCluster, when set (metrics).
func wakeOnChanges(ctx context.Context, cfg *rest.Config, ns string, sup *orchestrate.Supervisor, onCluster func(c *v1.MysqlCluster, deleted bool)) (cache.InformerSynced, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	managed := labels.SelectorFromSet(labels.Set{orchestrate.LabelManagedBy: orchestrate.FieldOwner}).String()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }))
	wake := func(obj any) {
		if m, ok := obj.(metav1.Object); ok {
			if name := m.GetLabels()[orchestrate.LabelInstance]; name != "" {
				sup.Wake(client.ObjectKey{Namespace: m.GetNamespace(), Name: name})
			}
		}
	}
	handlers := []struct {
		inf     cache.SharedIndexInformer
		changed func(old, cur any) bool
	}{
		{f.Core().V1().Pods().Informer(), podChanged},
		{f.Discovery().V1().EndpointSlices().Informer(), func(old, cur any) bool {
			o, c := old.(*discoveryv1.EndpointSlice), cur.(*discoveryv1.EndpointSlice)
			return fmt.Sprint(o.Endpoints) != fmt.Sprint(c.Endpoints)
		}},
	}
	for _, h := range handlers {
		changed := h.changed
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) {
				if changed(old, cur) {
					wake(cur)
				}
			},
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				wake(obj)
			},
		}); err != nil {
			return nil, err
		}
	}
	gvr := v1.GroupVersion.WithResource("mysqlclusters")
	clusters := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil).ForResource(gvr).Informer()
	tell := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if onCluster == nil || !ok {
			return
		}
		c := &v1.MysqlCluster{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c) == nil {
			onCluster(c, deleted)
		}
	}
	if _, err := clusters.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { tell(obj, false) },
		UpdateFunc: func(old, cur any) {
			o, c := old.(*unstructured.Unstructured), cur.(*unstructured.Unstructured)
			if o.GetGeneration() != c.GetGeneration() || o.GetAnnotations()[v1.AnnotationRequest] != c.GetAnnotations()[v1.AnnotationRequest] {
				sup.Wake(client.ObjectKey{Namespace: c.GetNamespace(), Name: c.GetName()})
			}
			tell(cur, false)
		},
		DeleteFunc: func(obj any) { tell(obj, true) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	go clusters.Run(ctx.Done())
	return clusters.HasSynced, nil
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
