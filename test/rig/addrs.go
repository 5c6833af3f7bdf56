package rig

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlctl/mysqlctl/test/rig/internal/agent"
)

// PodInfo is the node agent's view of one pod.
type PodInfo = agent.PodInfo

// ServiceAddrs returns the "ip:port" addresses of a Service's ready endpoints, found by following
// its EndpointSlices to the pods' loopback addresses; never the cluster IP. port names the
// Service port ("" for the first one).
//
// The API server refuses loopback addresses in IPv4 EndpointSlices, so the real EndpointSlice
// controller cannot publish the rig's pods; the node agent publishes FQDN slices (managed by
// rig.mysqlctl.io) with the same endpoint conditions, whose targetRefs lead to the pods. IPv4
// slices are followed too, should a slice ever carry addresses directly.
func ServiceAddrs(ctx context.Context, cs kubernetes.Interface, namespace, service, port string) ([]string, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service,
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	addrs := []string{}
	for _, s := range slices.Items {
		num := int32(0)
		for i, p := range s.Ports {
			if p.Port != nil && ((port == "" && i == 0) || (p.Name != nil && *p.Name == port)) {
				num = *p.Port
			}
		}
		if num == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				continue
			}
			var ips []string
			switch s.AddressType {
			case discoveryv1.AddressTypeFQDN:
				if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
					continue
				}
				pod, err := cs.CoreV1().Pods(ep.TargetRef.Namespace).Get(ctx, ep.TargetRef.Name, metav1.GetOptions{})
				if err != nil || pod.UID != ep.TargetRef.UID || pod.Status.PodIP == "" {
					continue
				}
				ips = []string{pod.Status.PodIP}
			default:
				ips = ep.Addresses
			}
			for _, ip := range ips {
				if err := checkLoopback(ip); err != nil {
					return nil, fmt.Errorf("service %s/%s: %w", namespace, service, err)
				}
				a := net.JoinHostPort(ip, strconv.Itoa(int(num)))
				if !seen[a] {
					seen[a] = true
					addrs = append(addrs, a)
				}
			}
		}
	}
	sort.Strings(addrs)
	return addrs, nil
}

// ServiceAddrs returns the ready endpoint addresses of a Service (see the function ServiceAddrs).
func (r *Rig) ServiceAddrs(ctx context.Context, namespace, service, port string) ([]string, error) {
	return ServiceAddrs(ctx, r.Client, namespace, service, port)
}

// PodAddr returns "podIP:port" of a pod, refusing any address outside 127.0.0.0/8.
func PodAddr(ctx context.Context, cs kubernetes.Interface, namespace, pod string, port int) (string, error) {
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s/%s has no IP yet", namespace, pod)
	}
	if err := checkLoopback(p.Status.PodIP); err != nil {
		return "", err
	}
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), nil
}

// PodAddr returns "podIP:port" of a pod.
func (r *Rig) PodAddr(ctx context.Context, namespace, pod string, port int) (string, error) {
	return PodAddr(ctx, r.Client, namespace, pod, port)
}

func checkLoopback(ip string) error {
	parsed := net.ParseIP(ip)
	if parsed == nil || !parsed.IsLoopback() {
		return fmt.Errorf("refusing to use %q: the rig only connects to loopback addresses", ip)
	}
	return nil
}

// DSN returns a go-sql-driver/mysql DSN for addr with bounded network steps (connect 3 s, read and
// write 10 s), so that a frozen or cut server fails a test instead of hanging it.
func DSN(addr, user, password string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = addr
	cfg.Timeout = 3 * time.Second
	cfg.ReadTimeout = 10 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	cfg.InterpolateParams = true
	return cfg.FormatDSN()
}

// WaitPods waits until count pods matching selector in namespace are Running and Ready (count 0:
// every matching pod, at least one), and returns them sorted by name.
func WaitPods(ctx context.Context, cs kubernetes.Interface, namespace, selector string, count int) ([]corev1.Pod, error) {
	var last string
	for {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			ready := 0
			for _, p := range pods.Items {
				if IsReady(&p) {
					ready++
				}
			}
			want := count
			if want == 0 {
				want = max(len(pods.Items), 1)
			}
			if ready >= want && (count == 0 || len(pods.Items) == count) {
				sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
				return pods.Items, nil
			}
			last = fmt.Sprintf("%d of %d ready", ready, want)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for pods %q in %s: %s: %w", selector, namespace, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitPods waits for ready pods (see the function WaitPods).
func (r *Rig) WaitPods(ctx context.Context, namespace, selector string, count int) ([]corev1.Pod, error) {
	return WaitPods(ctx, r.Client, namespace, selector, count)
}

// IsReady reports whether a pod is Running, not being deleted, and its Ready condition is True.
func IsReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
