package supervisor

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// secretTTL is how long the supervisor's observations reuse a credentials Secret read: a
// password changed in the Secret reaches the servers only through a converge anyway.
const secretTTL = 10 * time.Second

// cachedReads is the client of the supervisor's observations: clusters and pods come from an
// informer cache (no request per check), Secrets from a copy at most secretTTL old, and every
// other read and every write go to the API server. Actions never use it: they run on the
// supervisor's Runner under the Lease and read afresh.
type cachedReads struct {
	client.Client
	cache   client.Reader
	secrets *secretMemo
}

func (c cachedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch o := obj.(type) {
	case *v1.MysqlCluster, *corev1.Pod:
		if c.cache != nil {
			return c.cache.Get(ctx, key, obj, opts...)
		}
	case *corev1.Secret:
		if c.secrets != nil {
			return c.secrets.get(ctx, c.Client, key, o)
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c cachedReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *v1.MysqlClusterList, *corev1.PodList:
		if c.cache != nil {
			return c.cache.List(ctx, list, opts...)
		}
	}
	return c.Client.List(ctx, list, opts...)
}

// secretMemo keeps Secrets read recently.
type secretMemo struct {
	mu   sync.Mutex
	byID map[client.ObjectKey]memoSecret
}

type memoSecret struct {
	s   *corev1.Secret
	err error
	at  time.Time
}

func (m *secretMemo) get(ctx context.Context, c client.Reader, key client.ObjectKey, into *corev1.Secret) error {
	m.mu.Lock()
	e, ok := m.byID[key]
	m.mu.Unlock()
	if !ok || time.Since(e.at) > secretTTL {
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		if err != nil && ctx.Err() != nil {
			return err // this caller's deadline, not an answer to remember
		}
		e = memoSecret{s: s, err: err, at: time.Now()}
		m.mu.Lock()
		if m.byID == nil {
			m.byID = map[client.ObjectKey]memoSecret{}
		}
		m.byID[key] = e
		m.mu.Unlock()
	}
	if e.err != nil {
		return e.err
	}
	e.s.DeepCopyInto(into)
	return nil
}

// observer is the Runner of the supervisor's looks: it holds no Lease (every mutation is
// refused), reads through cachedReads and connects through ObserveConnect.
func (w *watcher) observer() orchestrate.Runner {
	obs := w.s.Runner
	obs.Lease = observeOnly{}
	obs.Kube = cachedReads{Client: obs.Kube, cache: w.s.Cache, secrets: &w.s.secrets}
	if w.s.ObserveConnect != nil {
		obs.Connect = w.s.ObserveConnect
	}
	return obs
}
