package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
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

// ClusterDomain is the DNS domain the rig's hosts files use for Services and pods.
const ClusterDomain = "cluster.local"

// PodDNSName is the name by which the rig's /etc/hosts (and its EndpointSlices) know a pod:
// hostname.subdomain.namespace.svc.cluster.local when the pod has both (StatefulSet pods do), else
// the pod A record a-b-c-d.namespace.pod.cluster.local.
func PodDNSName(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain != "" {
		return fmt.Sprintf("%s.%s.%s.svc.%s", pod.Spec.Hostname, pod.Spec.Subdomain, pod.Namespace, ClusterDomain)
	}
	return fmt.Sprintf("%s.%s.pod.%s", strings.ReplaceAll(pod.Status.PodIP, ".", "-"), pod.Namespace, ClusterDomain)
}

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
	readyIPs  []string
}

// viewServices computes every selector Service's endpoints from the pods this node runs, with the
// EndpointSlice controller's rules: a pod with an IP is an endpoint; ready = pod Ready and not
// terminating (or the Service publishes not-ready addresses), serving = pod Ready, terminating =
// deletion requested.
func (a *Agent) viewServices() ([]serviceView, []*corev1.Pod) {
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
			podReady := false
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					podReady = true
				}
			}
			terminating := pod.DeletionTimestamp != nil
			ready := (podReady && !terminating) || svc.Spec.PublishNotReadyAddresses
			serving := podReady || svc.Spec.PublishNotReadyAddresses
			ep := discoveryv1.Endpoint{
				Addresses:  []string{PodDNSName(pod)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
				NodeName:   ptr.To(pod.Spec.NodeName),
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
				ep.Hostname = ptr.To(pod.Spec.Hostname)
			}
			v.endpoints = append(v.endpoints, ep)
			if ready {
				v.readyIPs = append(v.readyIPs, pod.Status.PodIP)
			}
			if v.ports == nil {
				v.ports = servicePorts(svc, pod)
			}
		}
		if v.ports == nil {
			v.ports = []discoveryv1.EndpointPort{}
		}
		views = append(views, v)
	}
	return views, pods
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

func (a *Agent) syncEndpoints() {
	views, pods := a.viewServices()
	ctx, cancel := context.WithTimeout(a.ctx, 20*time.Second)
	defer cancel()
	for _, v := range views {
		if err := a.applySlice(ctx, v); err != nil && a.ctx.Err() == nil {
			a.logf("endpointslice for service %s/%s: %v", v.svc.Namespace, v.svc.Name, err)
		}
	}
	a.writeAllHosts(views, pods)
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
	slices := a.cs.DiscoveryV1().EndpointSlices(svc.Namespace)
	cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cur.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		return fmt.Errorf("endpointslice %s exists and is not managed by the rig", want.Name)
	}
	if equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(cur.Ports, want.Ports) &&
		equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) {
		return nil
	}
	want.ResourceVersion = cur.ResourceVersion
	_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
	return err
}

// writeAllHosts rewrites each running pod's /etc/hosts: the cluster DNS names of the rig's pods and
// Services, resolved to pod addresses (a Service name to its ready endpoints, never its cluster IP).
func (a *Agent) writeAllHosts(views []serviceView, pods []*corev1.Pod) {
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	for _, w := range workers {
		w.mu.Lock()
		ip := w.ip
		w.mu.Unlock()
		if ip == "" {
			continue
		}
		content := hostsContent(w.namespace, w.hostname(), ip, views, pods)
		if err := writeInPlace(w.hostsPath(), content); err != nil && !os.IsNotExist(err) {
			a.logf("hosts file of %s: %v", w.key, err)
		}
	}
}

// writeHosts writes one pod's hosts file from the current caches.
func (a *Agent) writeHosts(w *podWorker) error {
	views, pods := a.viewServices()
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	return writeInPlace(w.hostsPath(), hostsContent(w.namespace, w.hostname(), ip, views, pods))
}

func hostsContent(namespace, hostname, ip string, views []serviceView, pods []*corev1.Pod) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (mysqlctl rig): the cluster DNS names of the rig's pods and\n")
	b.WriteString("# Services, resolved to pod addresses. A Service name resolves to its ready endpoints.\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	self := ""
	for _, pod := range pods {
		if pod.Status.PodIP == ip && pod.Namespace == namespace {
			self = PodDNSName(pod)
		}
	}
	if self != "" {
		fmt.Fprintf(&b, "%s\t%s %s\n", ip, self, hostname)
	} else {
		fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
	}
	for _, pod := range pods {
		if pod.Status.PodIP == "" || pod.Status.PodIP == ip {
			continue
		}
		fmt.Fprintf(&b, "%s\t%s\n", pod.Status.PodIP, strings.Join(names(PodDNSName(pod), pod.Namespace, namespace), " "))
	}
	for _, v := range views {
		fqdn := fmt.Sprintf("%s.%s.svc.%s", v.svc.Name, v.svc.Namespace, ClusterDomain)
		for _, rip := range v.readyIPs {
			fmt.Fprintf(&b, "%s\t%s\n", rip, strings.Join(names(fqdn, v.svc.Namespace, namespace), " "))
		}
	}
	return b.Bytes()
}

// names lists the forms of a cluster FQDN a resolver with the pod's search path
// (ns.svc.cluster.local svc.cluster.local cluster.local) would accept.
func names(fqdn, objNS, podNS string) []string {
	out := []string{fqdn}
	base := strings.TrimSuffix(fqdn, "."+ClusterDomain)
	out = append(out, base) // x.ns.svc or a-b-c-d.ns.pod
	if strings.HasSuffix(base, ".svc") {
		out = append(out, strings.TrimSuffix(base, ".svc")) // x.ns
		if objNS == podNS {
			out = append(out, strings.TrimSuffix(base, "."+objNS+".svc")) // x
		}
	}
	return out
}

// writeInPlace rewrites a file's content without replacing its inode: the file is bind-mounted into
// running containers, which would keep seeing a replaced file's old inode.
func writeInPlace(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
