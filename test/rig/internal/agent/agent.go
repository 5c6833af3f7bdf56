package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Config configures an agent.
type Config struct {
	// Dir is the agent's work directory: image/, pods/, volumes/ live here.
	Dir string
	// CacheDir keeps the mariadb datadir template between rigs (default ~/.cache/mysqlctl/rig).
	CacheDir string
	// RigID names the rig in iptables comments, the cgroup directory and the chain name.
	RigID string
	// NodeName is the Node the agent registers (default "rig-node").
	NodeName string
	// Capacity is the Node's capacity and allocatable (default 8 CPUs, 16Gi memory, 32 pods, or
	// $MYSQLCTL_RIG_MAX_PODS pods).
	Capacity corev1.ResourceList
	// StorageClass is the name of the StorageClass the agent provisions (default "rig"); it is
	// created as the default class.
	StorageClass string
	// RestartBackoff is the first crash-loop back-off (default 10s, the kubelet's), doubled per
	// crash up to MaxRestartBackoff (default 5m). The first restart after a crash is immediate.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// MysqlctlBinary is the host path of the mysqlctl binary that containers of mysqlctl's image
	// (mysqlctl:latest and any other tag) run; without it they wait with ImageNotEmulated.
	MysqlctlBinary string
	// Log receives the agent's log lines; nil discards them.
	Log io.Writer
	// KubeletTLS, when set, makes the node serve the kubelet API the API server proxies to
	// (port-forward, exec, containerLogs) on its address and KubeletPort, with the TLS
	// configuration it returns for that address: a serving certificate, and the client CA the
	// API server's kubelet client certificate must chain to.
	KubeletTLS func(nodeIP string) (*tls.Config, error)
}

// Agent is a running node agent.
type Agent struct {
	cfg    Config
	cs     kubernetes.Interface
	sub    *subnet
	net    *network
	img    *image
	nodeIP string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	logMu sync.Mutex

	mu          sync.Mutex
	workers     map[types.UID]*podWorker
	lost        map[types.UID]string
	confirmed   map[types.UID]bool // deletions the agent confirmed, until the informer sees them
	mountpoints []string           // mount points the agent had to create on the host
	stopped     bool
	kubeletPort int32 // the kubelet API's port, 0 when the node serves none
	// apiHost and apiPort are where pods reach the API server (KUBERNETES_SERVICE_HOST and
	// _PORT): its own loopback address, in place of the kubernetes Service's cluster IP.
	apiHost, apiPort string
	stopKubelet      func() // stops the kubelet API server

	podLister     corelisters.PodLister
	pvcLister     corelisters.PersistentVolumeClaimLister
	pvLister      corelisters.PersistentVolumeLister
	serviceLister corelisters.ServiceLister
	// ConfigMaps, Secrets and the rig's EndpointSlices are read from watch-fed caches, as the
	// kubelet's and the EndpointSlice controller's are: a request per volume refresh or per
	// Service and sync would load the API server in proportion to the pods the node runs.
	configMapLister corelisters.ConfigMapLister
	secretLister    corelisters.SecretLister
	sliceLister     discoverylisters.EndpointSliceLister
	sliceMu         sync.Mutex
	slices          map[string]*discoveryv1.EndpointSlice // what the rig last wrote or read fresh, by namespace/name
	dirty           chan struct{}                         // endpoints and hosts files need a refresh
	hostsMu         sync.Mutex                            // one writer of the pods' hosts files at a time (hosts.go)
}

// New prepares an agent: it claims a loopback subnet, writes the emulated image and makes sure the
// datadir template exists. It starts nothing; call Start.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.NodeName == "" {
		cfg.NodeName = "rig-node"
	}
	if cfg.StorageClass == "" {
		cfg.StorageClass = "rig"
	}
	if cfg.RestartBackoff == 0 {
		cfg.RestartBackoff = 10 * time.Second
	}
	if cfg.MaxRestartBackoff == 0 {
		cfg.MaxRestartBackoff = 5 * time.Minute
	}
	if cfg.Capacity == nil {
		pods := resource.MustParse("32")
		// Benchmarks of many clusters need more (MYSQLCTL_RIG_MAX_PODS=96 for 30 clusters).
		if q, err := resource.ParseQuantity(os.Getenv("MYSQLCTL_RIG_MAX_PODS")); err == nil && q.Sign() > 0 {
			pods = q
		}
		cfg.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("8"),
			corev1.ResourceMemory:           resource.MustParse("16Gi"),
			corev1.ResourcePods:             pods,
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}
	}
	if cfg.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cfg.CacheDir = filepath.Join(base, "mysqlctl", "rig")
	}
	if cfg.RigID == "" {
		return nil, errors.New("agent: RigID is required")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("agent: the rig needs root (mount namespaces, bind mounts, iptables)")
	}
	for _, d := range []string{"pods", "volumes"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	img, err := prepareImage(ctx, cfg.Dir, cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	sub, stale, err := claimSubnet(cfg.RigID)
	if err != nil {
		return nil, err
	}
	if stale != "" {
		// The previous rig on this subnet died without cleaning up: remove what it left.
		_ = RemoveRules(stale)
		RemoveCgroups(stale)
	}
	a := &Agent{
		cfg:       cfg,
		sub:       sub,
		img:       img,
		nodeIP:    sub.nodeIP(),
		workers:   map[types.UID]*podWorker{},
		lost:      map[types.UID]string{},
		confirmed: map[types.UID]bool{},
		dirty:     make(chan struct{}, 1),
	}
	a.net = newNetwork(cfg.RigID, a.nodeIP)
	return a, nil
}

// NodeIP is the node's address (127.0.X.1); pods get 127.0.X.2 and up.
func (a *Agent) NodeIP() string { return a.nodeIP }

// NodeName is the registered Node's name.
func (a *Agent) NodeName() string { return a.cfg.NodeName }

// Start connects to the API server (restConfig needs the rights of a node and of a controller),
// registers the Node and the StorageClass and starts running pods. It returns once the Node is
// registered and the informers have synced.
func (a *Agent) Start(ctx context.Context, restConfig *rest.Config) error {
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "mysqlctl-rig-agent/" + a.cfg.NodeName
	// The API server warns that FQDN EndpointSlices are deprecated on every write of one; the
	// agent writes them knowingly (see endpoints.go).
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	a.cs = cs
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("agent: API server address %q: %w", cfg.Host, err)
	}
	a.apiHost, a.apiPort = u.Hostname(), u.Port()
	if a.apiPort == "" {
		a.apiPort = "443"
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())

	if a.cfg.KubeletTLS != nil {
		tlsConfig, err := a.cfg.KubeletTLS(a.nodeIP)
		if err != nil {
			return fmt.Errorf("kubelet API: %w", err)
		}
		if a.stopKubelet, err = a.serveKubelet(tlsConfig); err != nil {
			return err
		}
		a.kubeletPort = KubeletPort
	}
	if err := a.registerNode(ctx); err != nil {
		return err
	}
	if err := a.ensureStorageClass(ctx); err != nil {
		return err
	}

	nodePods := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
		}))
	all := informers.NewSharedInformerFactory(cs, 0)
	podInf := nodePods.Core().V1().Pods()
	a.podLister = podInf.Lister()
	pvcInf := all.Core().V1().PersistentVolumeClaims()
	pvInf := all.Core().V1().PersistentVolumes()
	svcInf := all.Core().V1().Services()
	a.pvcLister, a.pvLister, a.serviceLister = pvcInf.Lister(), pvInf.Lister(), svcInf.Lister()
	a.configMapLister = all.Core().V1().ConfigMaps().Lister()
	a.secretLister = all.Core().V1().Secrets().Lister()
	rigSlices := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelManagedBy + "=" + ManagedBy
		}))
	a.sliceLister = rigSlices.Discovery().V1().EndpointSlices().Lister()

	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.onPod(obj) },
		UpdateFunc: func(_, obj any) { a.onPod(obj) },
		DeleteFunc: func(obj any) { a.onPodDeleted(obj) },
	}); err != nil {
		return err
	}
	markDirty := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.markDirty() },
		UpdateFunc: func(any, any) { a.markDirty() },
		DeleteFunc: func(any) { a.markDirty() },
	}
	if _, err := svcInf.Informer().AddEventHandler(markDirty); err != nil {
		return err
	}
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.onClaim(obj) },
		UpdateFunc: func(_, obj any) { a.onClaim(obj) },
	}); err != nil {
		return err
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.onVolume(obj) },
		UpdateFunc: func(_, obj any) { a.onVolume(obj) },
	}); err != nil {
		return err
	}
	for _, f := range []informers.SharedInformerFactory{nodePods, all, rigSlices} {
		f.Start(a.ctx.Done())
	}
	for _, f := range []informers.SharedInformerFactory{nodePods, all, rigSlices} {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("agent: cache of %v did not sync", typ)
			}
		}
	}
	a.wg.Add(2)
	go func() { defer a.wg.Done(); a.heartbeat() }()
	go func() { defer a.wg.Done(); a.endpointsLoop() }()
	a.logf("node %s registered at %s; pods get 127.0.%d.2-254", a.cfg.NodeName, a.nodeIP, a.sub.x)
	return nil
}

// Stop kills every pod process (SIGKILL: a rig's data does not outlive it), removes the iptables
// chain, the cgroups and the mount points it created, and releases the subnet. It leaves the API
// objects alone. It is safe to call more than once.
func (a *Agent) Stop() error {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return nil
	}
	a.stopped = true
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	if a.cancel != nil {
		a.cancel()
	}
	if a.stopKubelet != nil {
		a.stopKubelet()
	}
	for _, w := range workers {
		w.shutdown()
	}
	a.wg.Wait()
	var errs []error
	if err := a.net.close(); err != nil {
		errs = append(errs, err)
	}
	a.mu.Lock()
	mps := a.mountpoints
	a.mountpoints = nil
	a.mu.Unlock()
	sort.Sort(sort.Reverse(sort.StringSlice(mps)))
	for _, mp := range mps {
		removeIfEmpty(mp)
	}
	a.sub.close()
	return errors.Join(errs...)
}

// removeIfEmpty removes an empty directory or an empty file (a mount point the agent created).
func removeIfEmpty(p string) {
	st, err := os.Lstat(p)
	if err != nil {
		return
	}
	if st.IsDir() {
		_ = syscall.Rmdir(p)
	} else if st.Mode().IsRegular() && st.Size() == 0 {
		_ = os.Remove(p)
	}
}

func (a *Agent) logf(format string, args ...any) {
	if a.cfg.Log == nil {
		return
	}
	a.logMu.Lock()
	defer a.logMu.Unlock()
	_, _ = fmt.Fprintf(a.cfg.Log, "%s agent: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (a *Agent) markDirty() {
	select {
	case a.dirty <- struct{}{}:
	default:
	}
}

// onPod hands a pod bound to this node to its worker, starting one for a pod seen the first time.
func (a *Agent) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.markDirty()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	if _, lost := a.lost[pod.UID]; lost || a.confirmed[pod.UID] {
		return
	}
	w, ok := a.workers[pod.UID]
	if !ok {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			if pod.DeletionTimestamp == nil {
				return
			}
		}
		w = newPodWorker(a, pod)
		a.workers[pod.UID] = w
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			w.run()
			a.mu.Lock()
			if a.workers[pod.UID] == w {
				delete(a.workers, pod.UID)
			}
			if w.confirmed {
				a.confirmed[pod.UID] = true
			}
			a.mu.Unlock()
		}()
	}
	w.update(pod)
}

func (a *Agent) onPodDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.markDirty()
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.lost, pod.UID)
	delete(a.confirmed, pod.UID)
	if w, ok := a.workers[pod.UID]; ok {
		w.gone()
	}
}

// worker finds the worker of a pod by namespace and name.
func (a *Agent) worker(namespace, name string) (*podWorker, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		if w.namespace == namespace && w.name == name {
			return w, nil
		}
	}
	for _, key := range a.lost {
		if key == namespace+"/"+name {
			return nil, fmt.Errorf("pod %s/%s is lost: the node no longer runs it", namespace, name)
		}
	}
	return nil, fmt.Errorf("pod %s/%s does not run on node %s", namespace, name, a.cfg.NodeName)
}

// addMountpoint records a directory the agent created on the host as a mount point.
func (a *Agent) addMountpoint(p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mountpoints = append(a.mountpoints, p)
}

// PIDs returns the process IDs of every pod process the agent runs (containers, probes, hooks).
func (a *Agent) PIDs() []int {
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	var pids []int
	for _, w := range workers {
		pids = append(pids, w.pids()...)
	}
	sort.Ints(pids)
	return pids
}

// PodInfo is what the agent knows about one pod it runs.
type PodInfo struct {
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	UID        string         `json:"uid"`
	IP         string         `json:"ip"`
	Containers map[string]int `json:"containers"` // running container → main PID
	Frozen     bool           `json:"frozen,omitempty"`
	Cut        bool           `json:"cut,omitempty"`
	Lost       bool           `json:"lost,omitempty"`
	Dir        string         `json:"dir"`
}

// Pods describes the pods the agent runs (and the ones it lost), sorted by namespace and name.
func (a *Agent) Pods() []PodInfo {
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	var out []PodInfo
	for uid, key := range a.lost {
		ns, name, _ := strings.Cut(key, "/")
		out = append(out, PodInfo{Namespace: ns, Name: name, UID: string(uid), Lost: true})
	}
	a.mu.Unlock()
	for _, w := range workers {
		out = append(out, w.info())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}
