package agent

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// EndpointSlices the agent publishes carry this managed-by label value (the real controller's is
// endpointslice-controller.k8s.io, and it never touches slices managed by someone else).
const ManagedBy = "rig.mysqlctl.io"

// endpointsLoop keeps the rig's EndpointSlices and every pod's /etc/hosts current.
func (a *Agent) endpointsLoop() {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.dirty:
			// Let a burst of changes settle.
			select {
			case <-a.ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		case <-tick.C:
		}
		a.syncEndpoints()
	}
}

// serviceView is a Service's endpoints as the rig computes them.
type serviceView struct {
	svc       *corev1.Service
	endpoints []discoveryv1.Endpoint
	ports     []discoveryv1.EndpointPort
}

// viewServices computes every selector Service's endpoints from the pods this node runs, with the
// EndpointSlice controller's rules: a pod with an IP is an endpoint; ready = pod Ready and not
// terminating (or the Service publishes not-ready addresses), serving = pod Ready, terminating =
// deletion requested.
func (a *Agent) viewServices() []serviceView {
	pods, _ := a.podLister.List(labels.Everything())
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	svcs, _ := a.serviceLister.List(labels.Everything())
	var views []serviceView
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		v := serviceView{svc: svc}
		for _, pod := range pods {
			if pod.Namespace != svc.Namespace || !sel.Matches(labels.Set(pod.Labels)) || pod.Status.PodIP == "" {
				continue
			}
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			ready, serving, terminating := endpointConditions(pod, svc)
			ep := discoveryv1.Endpoint{
				Addresses:  []string{podFQDN(pod, pod.Status.PodIP, svcs)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
				NodeName:   ptr.To(pod.Spec.NodeName),
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
				ep.Hostname = ptr.To(pod.Spec.Hostname)
			}
			v.endpoints = append(v.endpoints, ep)
			if v.ports == nil {
				v.ports = servicePorts(svc, pod)
			}
		}
		if v.ports == nil {
			v.ports = []discoveryv1.EndpointPort{}
		}
		views = append(views, v)
	}
	return views
}

// servicePorts resolves the Service's target ports against a pod's container ports.
func servicePorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	ports := []discoveryv1.EndpointPort{}
	for _, sp := range svc.Spec.Ports {
		target := sp.TargetPort
		var num int32
		switch {
		case target.Type == intstr.String && target.StrVal != "":
			for _, c := range pod.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.Name == target.StrVal && (cp.Protocol == sp.Protocol || cp.Protocol == "" && sp.Protocol == corev1.ProtocolTCP) {
						num = cp.ContainerPort
					}
				}
			}
			if num == 0 {
				continue
			}
		case target.IntValue() != 0:
			num = int32(target.IntValue())
		default:
			num = sp.Port
		}
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(num), Protocol: ptr.To(proto), AppProtocol: sp.AppProtocol})
	}
	return ports
}

// sliceName is the name of the rig's EndpointSlice of a Service.
func sliceName(svc string) string {
	if len(svc) > 58 {
		svc = svc[:58]
	}
	return svc + "-rig"
}

// syncEndpoints rewrites the hosts files first (local and quick: a pod that just got a new
// address becomes resolvable at once), then the EndpointSlices (API writes).
func (a *Agent) syncEndpoints() {
	start := time.Now()
	a.writeAllHosts()
	hosts := time.Since(start)
	views := a.viewServices()
	ctx, cancel := context.WithTimeout(a.ctx, 20*time.Second)
	defer cancel()
	for _, v := range views {
		if err := a.applySlice(ctx, v); err != nil && a.ctx.Err() == nil {
			a.logf("endpointslice for service %s/%s: %v", v.svc.Namespace, v.svc.Name, err)
		}
	}
	// A slow sync delays every Service's routing after a change: reported, to be seen.
	if took := time.Since(start); took > 100*time.Millisecond {
		a.logf("endpoints of %d services synced in %s (hosts files %s)", len(views), took.Round(time.Millisecond), hosts.Round(time.Millisecond))
	}
}

func (a *Agent) applySlice(ctx context.Context, v serviceView) error {
	svc := v.svc
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      sliceName(svc.Name),
			Namespace: svc.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   ManagedBy,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints:   v.endpoints,
		Ports:       v.ports,
	}
	same := func(cur *discoveryv1.EndpointSlice) bool {
		return equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(cur.Ports, want.Ports) &&
			equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences)
	}
	// The common case (nothing changed) needs no request: the slice is what the rig last wrote
	// or read fresh, and the cache holds it so. The cache alone could be behind the rig's own
	// last write; anything else is decided on a fresh read.
	key := svc.Namespace + "/" + want.Name
	a.sliceMu.Lock()
	known, ok := a.slices[key]
	a.sliceMu.Unlock()
	if ok && same(known) {
		if cur, err := a.sliceLister.EndpointSlices(svc.Namespace).Get(want.Name); err == nil && same(cur) {
			return nil
		}
	}
	slices := a.cs.DiscoveryV1().EndpointSlices(svc.Namespace)
	cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
	case err != nil:
	case cur.Labels[discoveryv1.LabelManagedBy] != ManagedBy:
		return fmt.Errorf("endpointslice %s exists and is not managed by the rig", want.Name)
	case !same(cur):
		want.ResourceVersion = cur.ResourceVersion
		_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
	}
	a.sliceMu.Lock()
	defer a.sliceMu.Unlock()
	if a.slices == nil {
		a.slices = map[string]*discoveryv1.EndpointSlice{}
	}
	delete(a.slices, key)
	if err == nil {
		a.slices[key] = want
	}
	return err
}
