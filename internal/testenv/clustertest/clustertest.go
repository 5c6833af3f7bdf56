// Package clustertest holds the helpers the tests of orchestrate and supervisor share: clients of
// the test API server, dialers that count or are refused, and clusters recorded as a bootstrap
// leaves them. It imports testenv, specs and topology, never orchestrate.
package clustertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountingClient returns a client whose every non-read request is counted.
func CountingClient(t *testing.T, env *testenv.Env) (client.Client, *atomic.Int64) {
	t.Helper()
	var writes atomic.Int64
	c := WrappedClient(t, env, func(r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes.Add(1)
		}
	})
	return c, &writes
}

// WrappedClient returns a client of the test API server that shows every request to see
// before sending it (it may block, to make a request hang).
func WrappedClient(t *testing.T, env *testenv.Env, see func(*http.Request)) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			see(r)
			if err := r.Context().Err(); err != nil {
				return nil, err
			}
			return rt.RoundTrip(r)
		})
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// CountingDialer counts the dials it passes on to the real dialer it wraps.
type CountingDialer struct {
	topology.Dialer
	N atomic.Int32
}

func (d *CountingDialer) DialContext(ctx context.Context, t topology.Target) (net.Conn, error) {
	d.N.Add(1)
	return d.Dialer.DialContext(ctx, t)
}

// ConnectVia connects to the pods through dialer.
func ConnectVia(dialer topology.Dialer) func(context.Context, *corev1.Pod, topology.Credentials) (*topology.Instance, error) {
	return func(_ context.Context, pod *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
		return topology.Connect(topology.Target{Name: pod.Name, Namespace: pod.Namespace, Pod: pod.Name, Host: pod.Status.PodIP, Port: specs.MySQLPort},
			topology.ConnectOptions{Dialer: dialer, Credentials: creds})
	}
}

// ForbiddenDialer is the real port-forward dialer, as a user the test API server's RBAC grants
// nothing: every tunnel is refused with the API server's own 403, which the dialer classifies.
func ForbiddenDialer(t *testing.T, env *testenv.Env) *CountingDialer {
	t.Helper()
	kubeconfig, err := env.AddUser("no-portforward")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := topology.NewPortForwardDialer(cfg, topology.PortForwardOptions{DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pf.Close() })
	return &CountingDialer{Dialer: pf}
}

// RunningCluster creates a cluster recorded Running with its primary name-0, its ready pods, their
// data volume claims and the credentials Secret, as a bootstrap leaves them (no server behind the
// pods: the dialer never gets that far).
func RunningCluster(t *testing.T, ctx context.Context, kube client.Client, name string, bootstrapped bool) *v1.MysqlCluster {
	t.Helper()
	c := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	if err := kube.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	secret, err := specs.BuildSecret(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	for ord := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, ord), Namespace: "default", Labels: specs.SelectorLabels(c)},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: specs.ContainerName, Image: c.Spec.Image}}},
		}
		if err := kube.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.1.0.%d", ord+1),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		}
		if err := kube.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod.Name, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := kube.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	if !bootstrapped {
		return c
	}
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	s := &c.Status
	{
		s.Phase, s.CurrentPrimary = v1.PhaseRunning, name+"-0"
		for ord := range int32(3) {
			in := v1.InstanceStatus{Name: fmt.Sprintf("%s-%d", name, ord), Ordinal: ord, Role: v1.RoleReplica, Classification: "Replicating"}
			if ord == 0 {
				in.Role, in.Classification = v1.RolePrimary, "Primary"
			}
			s.Instances = append(s.Instances, in)
		}
		s.HA = &v1.HAStatus{State: v1.HAHealthy, Since: &then}
		s.History = []v1.OperationRecord{{ID: "bootstrap-1", Type: "bootstrap", Result: "Succeeded", StartedAt: then, FinishedAt: then, Message: "cluster is Running"}}
		s.Conditions = []metav1.Condition{
			{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Converged", Message: "replication proven", LastTransitionTime: then},
			{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: "cluster is Running", LastTransitionTime: then},
		}
	}
	if err := kube.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// RequestCluster creates a MysqlCluster (no pods: requests are status and annotations) in the
// real API server and returns the client, its key and a getter of its current state.
func RequestCluster(t *testing.T, ctx context.Context, env *testenv.Env, name string) (client.Client, client.ObjectKey, func() *v1.MysqlCluster) {
	t.Helper()
	c, _ := CountingClient(t, env)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	return c, key, func() *v1.MysqlCluster {
		t.Helper()
		cur := &v1.MysqlCluster{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		return cur
	}
}
