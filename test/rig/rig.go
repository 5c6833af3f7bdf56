package rig

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/test/rig/internal/agent"
)

// Options configure a rig. The zero value is valid.
type Options struct {
	// Dir is the work directory (kubeconfig, state, logs, pod and volume directories). Empty: a new
	// temporary directory, removed by Stop.
	Dir string
	// SkipCRDs starts the API server without the CRDs of manifests/crd (for `mysqlctl install`).
	SkipCRDs bool
	// NodeName is the name of the rig's Node (default "rig-node").
	NodeName string
	// RestartBackoff is the first crash-loop back-off of a container (default 10s as in the kubelet;
	// the first restart after a crash is always immediate). MaxRestartBackoff caps it (default 5m).
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// ServiceAccountAdmission keeps the API server's ServiceAccount admission plugin on, as in a
	// real cluster (envtest turns it off): every pod then gets a token of its ServiceAccount from
	// the TokenRequest API, with ca.crt and namespace, at
	// /var/run/secrets/kubernetes.io/serviceaccount, so client-go's in-cluster configuration works.
	ServiceAccountAdmission bool
	// MysqlctlBinary is the mysqlctl binary that pods of mysqlctl's image (mysqlctl:latest, what
	// manifests/watch runs) run; without it such pods wait with ImageNotEmulated.
	MysqlctlBinary string
	// Log receives the node agent's and the control plane's output. Nil: Dir/rig.log.
	Log io.Writer
	// S3 also starts the test world's object store (versitygw from testenv.StartS3) with its data
	// in Dir/s3 and its connection settings and keys in Dir/s3.env (mode 0600, never printed).
	S3 bool
}

// Timings are the moments a rig reached its stages, for measurements.
type Timings struct {
	Start     time.Time `json:"start"`
	APIReady  time.Time `json:"apiReady"`  // kube-apiserver answers, CRDs loaded
	NodeReady time.Time `json:"nodeReady"` // Node registered, agent running
}

// Rig is a running local rig: a real control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) and the node agent that runs pods as local processes.
type Rig struct {
	// ID names the rig in iptables comments and cgroups.
	ID string
	// Dir is the work directory.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig (Dir/kubeconfig).
	Kubeconfig string
	// Config is an admin client configuration.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// NodeName is the Node the agent registered; NodeIP its address (127.0.X.1).
	NodeName, NodeIP string
	// Timings records the start-up.
	Timings Timings
	// S3 is the object store when Options.S3 is set, else nil.
	S3 *testenv.S3

	env         *testenv.Env
	agent       *agent.Agent
	stopControl func() error
	logFile     *os.File
	ownDir      bool
	state       *State
	stopOnce    sync.Once
	stopErr     error
	stoppedPIDs []int
}

// quietEnvtest silences controller-runtime's logger, which envtest uses and which otherwise prints a
// stack trace complaining that no logger was set.
var quietEnvtest sync.Once

// Start starts a rig. The caller must call Stop (StartT and Main arrange it).
func Start(ctx context.Context, opts Options) (_ *Rig, retErr error) {
	quietEnvtest.Do(func() { ctrllog.SetLogger(logr.Discard()) })
	r := &Rig{Timings: Timings{Start: time.Now()}}
	id := make([]byte, 5)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	r.ID = hex.EncodeToString(id)
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "mysqlctl-rig-")
		if err != nil {
			return nil, err
		}
		opts.Dir, r.ownDir = d, true
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := ReadState(dir); err == nil {
		return nil, fmt.Errorf("a rig already runs in %s (stop it with: rig down --dir %s)", dir, dir)
	}
	r.Dir = dir
	defer func() {
		if retErr != nil {
			_ = r.Stop()
		}
	}()
	logw := opts.Log
	if logw == nil {
		f, err := os.OpenFile(filepath.Join(dir, "rig.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		r.logFile, logw = f, f
	}
	logw = &syncWriter{w: logw}
	// The streaming server of the node's kubelet API reports its errors through klog: into the
	// rig's log, not the test's output.
	klog.LogToStderr(false)
	klog.SetOutput(logw)

	// The image and the datadir template are prepared while the control plane starts.
	var wg sync.WaitGroup
	var agErr error
	var kubeletCA *testenv.CA // set once the control plane runs, before the agent starts
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.agent, agErr = agent.New(ctx, agent.Config{
			Dir:               dir,
			RigID:             r.ID,
			NodeName:          opts.NodeName,
			RestartBackoff:    opts.RestartBackoff,
			MaxRestartBackoff: opts.MaxRestartBackoff,
			MysqlctlBinary:    opts.MysqlctlBinary,
			Log:               logw,
			KubeletTLS:        func(ip string) (*tls.Config, error) { return kubeletTLS(kubeletCA, ip) },
		})
	}()
	env, envErr := testenv.Start(testenv.Options{
		ControllerManager: true, Scheduler: true, SkipCRDs: opts.SkipCRDs, Log: logw,
		ServiceAccountAdmission: opts.ServiceAccountAdmission,
	})
	wg.Wait()
	r.env = env
	if envErr != nil {
		return nil, fmt.Errorf("control plane: %w", envErr)
	}
	kubeletCA = env.KubeletCA
	if agErr != nil {
		return nil, fmt.Errorf("node agent: %w", agErr)
	}
	r.Timings.APIReady = time.Now()
	r.Config = rest.CopyConfig(env.Config)
	r.Client, err = kubernetes.NewForConfig(r.Config)
	if err != nil {
		return nil, err
	}
	kc, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return nil, err
	}
	r.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(r.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	if err := r.agent.Start(ctx, env.Config); err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	r.NodeName, r.NodeIP = r.agent.NodeName(), r.agent.NodeIP()
	sock := filepath.Join(dir, "rig.sock")
	if len(sock) > 100 {
		sock = filepath.Join(os.TempDir(), "mysqlctl-rig-"+r.ID+".sock")
	}
	r.stopControl, err = r.agent.ServeControl(sock)
	if err != nil {
		return nil, err
	}
	r.Timings.NodeReady = time.Now()
	r.state = &State{
		ID: r.ID, Dir: dir, Kubeconfig: r.Kubeconfig, Server: r.Config.Host, Socket: sock,
		NodeName: r.NodeName, NodeIP: r.NodeIP, Timings: r.Timings,
	}
	if opts.S3 {
		if r.state.S3, err = r.startS3(ctx, logw); err != nil {
			return nil, fmt.Errorf("object store: %w", err)
		}
	}
	if p, ok := procOf(os.Getpid()); ok {
		r.state.Owner = p
	}
	for _, pid := range r.controlPlanePIDs() {
		if p, ok := procOf(pid); ok {
			r.state.ControlPlane = append(r.state.ControlPlane, p)
		}
	}
	if err := writeState(dir, r.state); err != nil {
		return nil, err
	}
	return r, nil
}

// startS3 starts the object store with its data in the work directory and writes its settings
// and keys to Dir/s3.env for people and scripts (`. s3.env` sets the AWS SDKs' and CLI's variables).
func (r *Rig) startS3(ctx context.Context, logw io.Writer) (*S3State, error) {
	s, err := testenv.StartS3(ctx, testenv.S3Options{Dir: filepath.Join(r.Dir, "s3"), Log: logw})
	if err != nil {
		return nil, err
	}
	r.S3 = s
	env := filepath.Join(r.Dir, "s3.env")
	content := fmt.Sprintf("AWS_ENDPOINT_URL=%s\nAWS_REGION=%s\nAWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nS3_BUCKET=%s\n",
		s.Endpoint, s.Region, s.AccessKey, s.SecretKey, s.Bucket)
	if err := os.WriteFile(env, []byte(content), 0o600); err != nil {
		return nil, err
	}
	st := &S3State{Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket, EnvFile: env}
	if p, ok := procOf(s.PID()); ok {
		st.Proc = p
	}
	return st, nil
}

// kubeletTLS is the node's kubelet API configuration, as a kubelet with --tls-cert-file and
// --client-ca-file has: a serving certificate for its address signed by the cluster's kubelet CA
// (which the API server checks), and only clients that CA signed (the API server's kubelet client).
func kubeletTLS(ca *testenv.CA, nodeIP string) (*tls.Config, error) {
	if ca == nil {
		return nil, errors.New("the control plane has no kubelet CA")
	}
	cert, err := ca.IssueServing("rig-node-kubelet", nodeIP)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// KubeletCA is the control plane's kubelet CA: it signed the node's serving certificate and the
// API server's kubelet client certificate.
func (r *Rig) KubeletCA() *testenv.CA { return r.env.KubeletCA }

// StartT starts a rig for one test (or benchmark) and stops it when the test ends, failing the test
// if anything the rig started is still running afterwards.
func StartT(tb testing.TB, opts Options) *Rig {
	tb.Helper()
	r, err := Start(context.Background(), opts)
	if err != nil {
		tb.Fatalf("rig: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.Stop(); err != nil {
			tb.Errorf("rig: stop: %v", err)
		}
		if left := r.Leftovers(); len(left) > 0 {
			tb.Errorf("rig: left behind after stop:\n%s", strings.Join(left, "\n"))
		}
	})
	return r
}

// Main starts a rig, stores it in *r, runs the package's tests, stops the rig and checks that
// nothing it started is left (processes, iptables rules, cgroups). It returns the exit code:
//
//	var r *rig.Rig
//
//	func TestMain(m *testing.M) { os.Exit(rig.Main(m, &r, rig.Options{})) }
func Main(m *testing.M, r **Rig, opts Options) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	rg, err := Start(ctx, opts)
	cancel()
	if err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "rig: %v\n", err)
		return 1
	}
	*r = rg
	code := m.Run()
	stopStart := time.Now()
	if err := rg.Stop(); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "rig: stop: %v\n", err)
		code = max(code, 1)
	}
	if left := rg.Leftovers(); len(left) > 0 {
		_, _ = fmt.Fprintf(os.Stderr, "rig: left behind after stop:\n%s\n", strings.Join(left, "\n"))
		code = max(code, 1)
	}
	if testing.Verbose() {
		t := rg.Timings
		_, _ = fmt.Fprintf(os.Stderr, "rig: API ready %s after start, node ready %s after start; stop took %s\n",
			t.APIReady.Sub(t.Start).Round(time.Millisecond), t.NodeReady.Sub(t.Start).Round(time.Millisecond),
			time.Since(stopStart).Round(time.Millisecond))
	}
	return code
}

// PIDs returns the process IDs of everything the rig runs: the control-plane components and every
// pod process.
func (r *Rig) PIDs() []int {
	var pids []int
	if r.env != nil {
		pids = append(pids, r.controlPlanePIDs()...)
	}
	if r.agent != nil {
		pids = append(pids, r.agent.PIDs()...)
	}
	if r.S3 != nil && r.S3.PID() != 0 {
		pids = append(pids, r.S3.PID())
	}
	sort.Ints(pids)
	return pids
}

// controlPlanePIDs picks this rig's components out of testenv's PIDs, which are every control-plane
// child of the process (several rigs can run in one test binary): kube-apiserver by its secure
// port, etcd by the URL that apiserver uses, the controller-manager and the scheduler by their
// kubeconfig.
func (r *Rig) controlPlanePIDs() []int {
	u, err := url.Parse(r.env.Config.Host)
	if err != nil {
		return nil
	}
	cands := r.env.PIDs()
	var own []int
	etcdURL := ""
	for _, pid := range cands {
		args := cmdline(pid)
		if slices.Contains(args, "--secure-port="+u.Port()) {
			own = append(own, pid)
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
					etcdURL = v
				}
			}
		}
	}
	for _, pid := range cands {
		args := cmdline(pid)
		switch {
		case slices.Contains(args, "--kubeconfig="+r.env.Kubeconfig):
			own = append(own, pid)
		case etcdURL != "" && slices.ContainsFunc(args, func(a string) bool {
			return strings.HasPrefix(a, "--listen-client-urls=") && strings.Contains(a, etcdURL)
		}):
			own = append(own, pid)
		}
	}
	return own
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// Stop kills every pod process, stops the control plane and the object store, removes the rig's iptables rules and
// cgroups, and removes the work directory if Start created it. Safe to call more than once.
func (r *Rig) Stop() error {
	r.stopOnce.Do(func() {
		r.stoppedPIDs = r.PIDs()
		var errs []error
		if r.stopControl != nil {
			if err := r.stopControl(); err != nil {
				errs = append(errs, fmt.Errorf("control socket: %w", err))
			}
		}
		if r.agent != nil {
			if err := r.agent.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("node agent: %w", err))
			}
		}
		if r.env != nil {
			if err := r.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("control plane: %w", err))
			}
		}
		if r.S3 != nil {
			if err := r.S3.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("object store: %w", err))
			}
		}
		if r.Dir != "" {
			_ = os.Remove(filepath.Join(r.Dir, StateFile))
		}
		if r.logFile != nil {
			_ = r.logFile.Close()
		}
		if r.ownDir {
			if err := os.RemoveAll(r.Dir); err != nil {
				errs = append(errs, err)
			}
		}
		r.stopErr = errors.Join(errs...)
	})
	return r.stopErr
}

// Leftovers lists what a stopped rig left behind: processes it ran that are still alive, iptables
// rules that mention it and its cgroup directory. It is empty after a clean Stop.
func (r *Rig) Leftovers() []string {
	var left []string
	for _, pid := range r.stoppedPIDs {
		if p, ok := procOf(pid); ok {
			left = append(left, fmt.Sprintf("process %d (%s)", p.PID, p.Name))
		}
	}
	rules, err := agent.RulesLeft(r.ID)
	if err != nil {
		left = append(left, err.Error())
	}
	for _, rule := range rules {
		left = append(left, "iptables rule: "+rule)
	}
	if agent.CgroupLeft(r.ID) {
		left = append(left, "cgroup directory mysqlctl-rig-"+r.ID)
	}
	return left
}

// syncWriter serialises writes from the agent and the control-plane components.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p under the lock.
func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
