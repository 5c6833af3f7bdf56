package agent

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The rig has no cluster DNS server. What CoreDNS and the kubelet give a real pod, the agent gives
// every container through two files of the pod's directory, bind-mounted read-only in the
// container's mount namespace (the host's own /etc/hosts and /etc/resolv.conf are never written):
//
//   - /etc/hosts: the kubelet's lines (localhost, the pod's own address and hostname) and, standing
//     in for CoreDNS, the cluster DNS names of the pods this node runs and of the Services that
//     select them, each resolved to a pod's loopback address:
//     <hostname>.<subdomain>.<namespace>.svc.cluster.local for a pod whose spec.hostname and
//     spec.subdomain name it in a headless Service that selects it (a StatefulSet's pods in its
//     governing Service) while that Service publishes it (the pod is Ready and not terminating,
//     or the Service publishes not-ready addresses), <a-b-c-d>.<namespace>.pod.cluster.local for
//     every pod, and <service>.<namespace>.svc.cluster.local for the ready endpoints of every
//     selector Service (a ClusterIP Service resolves to its endpoints: the rig has no cluster
//     IPs). Each name also appears in the shorter forms the pod's DNS search path would complete.
//   - /etc/resolv.conf: the search path and options of dnsPolicy ClusterFirst, with the node's
//     own address as the name server, where nothing listens: a name that is not in /etc/hosts
//     fails at once (as an unknown cluster name gets NXDOMAIN) instead of reaching the host's
//     resolver, which could answer with a non-loopback address.
//
// The hosts files follow every change (a pod started, stopped, got a new address, became Ready or
// not; a Service created, changed or deleted): the agent rewrites them in place, keeping the
// inode that the bind mounts pin (a renamed replacement would never be seen inside the
// containers), and glibc reads /etc/hosts afresh on each lookup, so a server resolving a name
// again (a replica's IO thread reconnecting) gets the current address with no restart.

// ClusterDomain is the DNS domain the rig's hosts files use for Services and pods.
const ClusterDomain = "cluster.local"

// podAddr is a pod whose sandbox holds an address now.
type podAddr struct {
	pod *corev1.Pod
	ip  string
}

// addressedPods lists the workers whose sandboxes hold an address now and their pods with those
// addresses, sorted by namespace and name. Only a running sandbox's address is ever written into
// a hosts file: a pod the node lost, or one whose sandbox is gone, has released its address,
// which another pod may get next.
func (a *Agent) addressedPods() ([]*podWorker, []podAddr) {
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	var ws []*podWorker
	var pods []podAddr
	for _, w := range workers {
		w.mu.Lock()
		ip, pod, ok := w.ip, w.pod, w.addressed
		w.mu.Unlock()
		if !ok || ip == "" {
			continue
		}
		ws = append(ws, w)
		pods = append(pods, podAddr{pod: pod, ip: ip})
	}
	sort.Slice(pods, func(i, j int) bool { return podLess(pods[i].pod, pods[j].pod) })
	sort.Slice(ws, func(i, j int) bool { return podLess(ws[i].currentPod(), ws[j].currentPod()) })
	return ws, pods
}

func podLess(a, b *corev1.Pod) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// services returns the Services from the cache, sorted (so an unchanged cluster gives an unchanged
// hosts file, which is then not rewritten).
func (a *Agent) services() []*corev1.Service {
	svcs, _ := a.serviceLister.List(labels.Everything())
	sort.Slice(svcs, func(i, j int) bool {
		if svcs[i].Namespace != svcs[j].Namespace {
			return svcs[i].Namespace < svcs[j].Namespace
		}
		return svcs[i].Name < svcs[j].Name
	})
	return svcs
}

// writeAllHosts rewrites the hosts file of every pod whose sandbox holds an address. Writers are
// serialised and each computes from the state it finds under the lock, so the last write is
// never older than the last change it follows.
func (a *Agent) writeAllHosts() {
	a.hostsMu.Lock()
	defer a.hostsMu.Unlock()
	ws, pods := a.addressedPods()
	svcs := a.services()
	cluster := map[string][]byte{} // by namespace
	for _, w := range ws {
		w.mu.Lock()
		ip, ok := w.ip, w.addressed
		w.mu.Unlock()
		if !ok {
			continue // torn down meanwhile
		}
		pod := w.currentPod()
		lines, ok := cluster[pod.Namespace]
		if !ok {
			lines = clusterHosts(pod.Namespace, pods, svcs)
			cluster[pod.Namespace] = lines
		}
		content := append(hostsHead(podAddr{pod: pod, ip: ip}, w.hostname()), lines...)
		if err := writeInPlace(w.hostsPath(), content); err != nil && !os.IsNotExist(err) {
			a.logf("hosts file of %s: %v", w.key, err)
		}
	}
}

// writeDNSFiles writes the hosts and resolv.conf files of a pod whose sandbox was just set up.
func (a *Agent) writeDNSFiles(w *podWorker) error {
	a.hostsMu.Lock()
	defer a.hostsMu.Unlock()
	_, pods := a.addressedPods()
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	if err := writeInPlace(w.resolvConfPath(), resolvConf(w.namespace, a.nodeIP)); err != nil {
		return err
	}
	return writeInPlace(w.hostsPath(), hostsContent(podAddr{pod: w.currentPod(), ip: ip}, w.hostname(), pods, a.services()))
}

// isLoopback reports whether ip is a loopback address: the only kind the rig ever writes.
func isLoopback(ip string) bool {
	parsed := net.ParseIP(ip)
	return parsed != nil && parsed.IsLoopback()
}

// podReady reports the pod's Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// endpointConditions are the conditions the EndpointSlice controller gives a pod's endpoint in a
// Service: ready = Ready and not terminating, or the Service publishes not-ready addresses;
// serving = Ready (or published regardless); terminating = deletion requested.
func endpointConditions(pod *corev1.Pod, svc *corev1.Service) (ready, serving, terminating bool) {
	isReady := podReady(pod)
	terminating = pod.DeletionTimestamp != nil
	ready = (isReady && !terminating) || svc.Spec.PublishNotReadyAddresses
	serving = isReady || svc.Spec.PublishNotReadyAddresses
	return ready, serving, terminating
}

// publishes reports whether svc selects pod and its DNS answers include the pod now: the
// endpoint exists (same namespace, selected, not finished) and is ready. CoreDNS serves only ready
// endpoints of a headless Service.
func publishes(svc *corev1.Service, pod *corev1.Pod) bool {
	if svc.Namespace != pod.Namespace || len(svc.Spec.Selector) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	ready, _, _ := endpointConditions(pod, svc)
	return ready
}

// governingService returns the headless Service that gives pod its hostname record (the Service
// named by spec.subdomain, in the pod's namespace, selecting it), or nil. The StatefulSet
// controller sets spec.hostname to the pod's name and spec.subdomain to spec.serviceName.
func governingService(pod *corev1.Pod, svcs []*corev1.Service) *corev1.Service {
	if pod.Spec.Hostname == "" || pod.Spec.Subdomain == "" {
		return nil
	}
	for _, svc := range svcs {
		if svc.Namespace != pod.Namespace || svc.Name != pod.Spec.Subdomain || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			continue
		}
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			return svc
		}
	}
	return nil
}

// hostnameFQDN is hostname.subdomain.namespace.svc.cluster.local (the pod must have both).
func hostnameFQDN(pod *corev1.Pod) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", pod.Spec.Hostname, pod.Spec.Subdomain, pod.Namespace, ClusterDomain)
}

// ipFQDN is the pod A record a-b-c-d.namespace.pod.cluster.local.
func ipFQDN(namespace, ip string) string {
	return fmt.Sprintf("%s.%s.pod.%s", strings.ReplaceAll(ip, ".", "-"), namespace, ClusterDomain)
}

// podFQDN is the name by which the rig knows a pod in its EndpointSlices: its hostname record
// when a governing headless Service exists, else its pod A record.
func podFQDN(pod *corev1.Pod, ip string, svcs []*corev1.Service) string {
	if governingService(pod, svcs) != nil {
		return hostnameFQDN(pod)
	}
	return ipFQDN(pod.Namespace, ip)
}

// hostsContent is the /etc/hosts of the pod self (whose hostname is hostname), given the pods of
// the node whose sandboxes hold addresses and the cluster's Services. Only loopback addresses are
// written.
func hostsContent(self podAddr, hostname string, pods []podAddr, svcs []*corev1.Service) []byte {
	return append(hostsHead(self, hostname), clusterHosts(self.pod.Namespace, pods, svcs)...)
}

// hostsHead is the part of a pod's hosts file that is its own: localhost and the kubelet's line
// for the pod itself.
func hostsHead(self podAddr, hostname string) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (mysqlctl rig).\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if isLoopback(self.ip) {
		if self.pod.Spec.Subdomain != "" && self.pod.Spec.Hostname != "" {
			fmt.Fprintf(&b, "%s\t%s %s\n", self.ip, hostnameFQDN(self.pod), hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", self.ip, hostname)
		}
	}
	return b.Bytes()
}

// clusterHosts is the cluster DNS part of the hosts file of a pod in namespace ns: the same for
// every pod of a namespace (only the short names a search path completes depend on it), so it
// is computed once per namespace, not once per pod.
func clusterHosts(ns string, pods []podAddr, svcs []*corev1.Service) []byte {
	var b bytes.Buffer
	b.WriteString("# Cluster DNS (the rig has no DNS server): the pods of this node and the Services selecting them.\n")
	for _, p := range pods {
		if !isLoopback(p.ip) {
			continue
		}
		var all []string
		if svc := governingService(p.pod, svcs); svc != nil && publishes(svc, p.pod) {
			all = append(all, names(hostnameFQDN(p.pod), p.pod.Namespace, ns)...)
		}
		all = append(all, names(ipFQDN(p.pod.Namespace, p.ip), p.pod.Namespace, ns)...)
		fmt.Fprintf(&b, "%s\t%s\n", p.ip, strings.Join(all, " "))
	}
	for _, svc := range svcs {
		fqdn := fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, ClusterDomain)
		for _, p := range pods {
			if isLoopback(p.ip) && publishes(svc, p.pod) {
				fmt.Fprintf(&b, "%s\t%s\n", p.ip, strings.Join(names(fqdn, svc.Namespace, ns), " "))
			}
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

// resolvConf is a pod's /etc/resolv.conf: the search path and ndots of dnsPolicy ClusterFirst and
// a name server at the node's address, on which nothing listens, so that a name missing from
// /etc/hosts fails at once and no lookup ever leaves the loopback network.
func resolvConf(namespace, nodeIP string) []byte {
	return fmt.Appendf(nil, "# mysqlctl rig: no cluster DNS server; cluster names are in /etc/hosts.\n"+
		"search %[1]s.svc.%[2]s svc.%[2]s %[2]s\nnameserver %[3]s\noptions ndots:5 timeout:1 attempts:1\n",
		namespace, ClusterDomain, nodeIP)
}

// writeInPlace gives a file new content without replacing its inode: it is bind-mounted into
// running containers, which would keep seeing a replaced file's old inode. A reader (glibc opens
// /etc/hosts on every lookup) never sees an empty or partial file: the new content is written
// over the old one in one write, padded with a comment line to the old length when shorter, and
// only then is the file cut to the new length.
func writeInPlace(path string, content []byte) error {
	if len(content) > 0 && content[len(content)-1] != '\n' {
		content = append(content[:len(content):len(content)], '\n')
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	old, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return err
	}
	if bytes.Equal(old, content) {
		return f.Close()
	}
	buf := padTo(content, len(old))
	if _, err := f.WriteAt(buf, 0); err != nil {
		_ = f.Close()
		return err
	}
	if len(buf) != len(content) {
		if err := f.Truncate(int64(len(content))); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

// padTo returns content (which ends with a newline) followed by a comment line that brings it to
// size bytes, or content itself when it is not shorter: what a reader sees between the write and
// the truncation of writeInPlace is then the new content and a comment.
func padTo(content []byte, size int) []byte {
	pad := size - len(content)
	if pad <= 0 {
		return content
	}
	buf := make([]byte, 0, size)
	buf = append(buf, content...)
	if pad > 1 {
		buf = append(buf, '#')
		buf = append(buf, bytes.Repeat([]byte{' '}, pad-2)...)
	}
	return append(buf, '\n')
}
