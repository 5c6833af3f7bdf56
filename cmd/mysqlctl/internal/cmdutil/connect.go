package cmdutil

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// Dialer names accepted by --dialer.
const (
	DialerAuto        = "auto"
	DialerDirect      = "direct"
	DialerPortForward = "port-forward"
)

// Connector returns how commands reach port 3306 of a pod: "direct" dials the pod IP (inside
// the cluster, and on the local rig whose pods have loopback addresses), "port-forward" tunnels
// through the API server (the default outside a cluster), "auto" picks direct inside a pod and
// port-forward elsewhere. The returned close function releases port-forward tunnels.
func (f *Factory) Connector(name string) (orchestrate.Connector, func(), error) {
	dialer, closeFn, err := f.dialer(name)
	if err != nil {
		return nil, nil, err
	}
	return func(_ context.Context, pod *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
		in, err := topology.Connect(podTarget(pod), topology.ConnectOptions{Dialer: dialer, Credentials: creds})
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", pod.Name, err)
		}
		return in, nil
	}, closeFn, nil
}

// PooledConnector is Connector for a caller that observes the same servers again and again
// (watch): one connection pool per pod incarnation, kept between calls (see topology.Pools).
// Closing an Instance it returns does nothing; the returned close function closes every pool.
func (f *Factory) PooledConnector(name string) (orchestrate.Connector, func(), error) {
	dialer, closeDialer, err := f.dialer(name)
	if err != nil {
		return nil, nil, err
	}
	pools := &topology.Pools{Options: topology.ConnectOptions{Dialer: dialer}}
	return func(_ context.Context, pod *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
			in, err := pools.Instance(podTarget(pod), string(pod.UID), creds)
			if err != nil {
				return nil, fmt.Errorf("connect to %s: %w", pod.Name, err)
			}
			return in, nil
		}, func() {
			_ = pools.Close()
			closeDialer()
		}, nil
}

func podTarget(pod *corev1.Pod) topology.Target {
	return topology.Target{Name: pod.Name, Namespace: pod.Namespace, Pod: pod.Name, Host: pod.Status.PodIP, Port: specs.PodPort(pod)}
}

// dialer resolves a --dialer name.
func (f *Factory) dialer(name string) (topology.Dialer, func(), error) {
	if name == DialerAuto || name == "" {
		name = DialerPortForward
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			name = DialerDirect
		}
	}
	switch name {
	case DialerDirect:
		return topology.DirectDialer{Timeout: 5 * time.Second}, func() {}, nil
	case DialerPortForward:
		cfg, err := f.RESTConfig()
		if err != nil {
			return nil, nil, err
		}
		pf, err := topology.NewPortForwardDialer(cfg, topology.PortForwardOptions{})
		if err != nil {
			return nil, nil, err
		}
		var once sync.Once
		return pf, func() { once.Do(func() { _ = pf.Close() }) }, nil
	default:
		return nil, nil, FlagErrorf("invalid --dialer %q: use auto, direct or port-forward", name)
	}
}
