package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Options selects the optional control-plane components.
type Options struct {
	// ControllerManager also starts kube-controller-manager (needed for StatefulSets, PVC binding,
	// EndpointSlices, garbage collection).
	ControllerManager bool
	// Scheduler also starts kube-scheduler (needed for pods to be bound to nodes).
	Scheduler bool
	// SkipCRDs starts without loading manifests/crd (for tests of `mysqlctl install` itself).
	SkipCRDs bool
	// ServiceAccountAdmission keeps the API server's ServiceAccount admission plugin on (envtest
	// turns it off): every pod gets its ServiceAccount's token volume, as in a real cluster, and
	// pods are refused in a namespace until its default ServiceAccount exists. With
	// ControllerManager, Start returns once the default namespace's exists.
	ServiceAccountAdmission bool
	// Log receives the components' output; nil discards it.
	Log io.Writer
}

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same admin user.
	Kubeconfig string
	// Dir is the temporary directory holding certificates, kubeconfig and logs.
	Dir string
	// KubeletCA signs the API server's kubelet client certificate, which the API server presents
	// to nodes for logs, exec and port-forward; a node serves with a certificate it signs
	// (IssueServing) and accepts clients it signed, as a kubelet with --client-ca-file does. The
	// API server checks the node's certificate against it (--kubelet-certificate-authority) and
	// reaches nodes at their InternalIP, never by resolving their names.
	KubeletCA *CA

	binDir string
	env    *envtest.Environment
	mu     sync.Mutex
	procs  []*exec.Cmd
	done   []chan struct{}
	// own are the PIDs of this Env's components (other Envs of the process have their own).
	own []int
	// reaper kills own if this process dies without Stop (SIGKILL, a test timeout's panic):
	// envtest starts etcd and kube-apiserver without a parent-death signal.
	reaper     *exec.Cmd
	reaperPipe io.WriteCloser
	log        io.Writer
}

// Main starts a control plane, stores it in *env, runs the package's tests and stops it.
// It returns the exit code for os.Exit.
func Main(m *testing.M, env **Env, opts Options) int {
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// StartT starts a control plane for one test and stops it when the test ends.
func StartT(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := Start(opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("testenv: stop: %v", err)
		}
	})
	return e
}

// Start starts a control plane. The caller must call Stop.
func Start(opts Options) (_ *Env, retErr error) {
	// controller-runtime's clients log through a global logger and print a stack trace when
	// none is set; tests report through their own errors.
	ctrllog.SetLogger(logr.Discard())
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mysqlctl-testenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, binDir: bin}
	defer func() {
		if retErr != nil {
			_ = e.Stop()
		}
	}()
	e.env = &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if !opts.SkipCRDs {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		e.env.CRDDirectoryPaths = []string{filepath.Join(root, "manifests", "crd")}
		e.env.ErrorIfCRDPathMissing = true
	}
	if err := e.configureKubeletClient(); err != nil {
		return nil, err
	}
	if opts.ServiceAccountAdmission {
		e.env.ControlPlane.GetAPIServer().Configure().Disable("disable-admission-plugins")
	}
	before := childPIDs(bin)
	cfg, err := e.env.Start()
	e.adopt(before)
	if err != nil {
		return nil, fmt.Errorf("start etcd and kube-apiserver from %s: %w", bin, err)
	}
	if err := e.startReaper(); err != nil {
		return nil, err
	}
	user, err := e.env.AddUser(envtest.User{Name: "mysqlctl-test-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return nil, fmt.Errorf("create admin user: %w", err)
	}
	e.Config = user.Config()
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	e.log = logw
	certDir := e.env.ControlPlane.APIServer.CertDir
	if opts.ControllerManager {
		ca := filepath.Join(dir, "ca.crt")
		if err := os.WriteFile(ca, cfg.CAData, 0o600); err != nil {
			return nil, err
		}
		if err := e.startProcess(filepath.Join(bin, "kube-controller-manager"), logw,
			"--kubeconfig="+e.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
			"--root-ca-file="+ca,
			"--use-service-account-credentials=false",
			// Faster convergence for tests; the defaults are tuned for large clusters.
			"--concurrent-statefulset-syncs=5",
		); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := e.startProcess(filepath.Join(bin, "kube-scheduler"), logw,
			"--kubeconfig="+e.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
		); err != nil {
			return nil, err
		}
	}
	if opts.ServiceAccountAdmission && opts.ControllerManager {
		if err := e.waitDefaultServiceAccount(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// waitDefaultServiceAccount waits until the controller-manager has created the default
// namespace's default ServiceAccount: until then the ServiceAccount admission plugin refuses pods.
func (e *Env) waitDefaultServiceAccount() error {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			return fmt.Errorf("the default ServiceAccount was not created: %w", err)
		}
	}
}

// configureKubeletClient makes the kubelet CA and the API server's client certificate, and
// points the API server at them.
func (e *Env) configureKubeletClient() error {
	ca, err := NewCA("mysqlctl-testenv-kubelet-ca")
	if err != nil {
		return err
	}
	// kubeadm's name and group for this certificate: system:masters may use every node API.
	client, err := ca.IssueClient("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.Dir, "kubelet-ca.crt"), ca.CertPEM, 0o600); err != nil {
		return err
	}
	if err := writePEM(e.Dir, "kubelet-client.crt", "kubelet-client.key", client); err != nil {
		return err
	}
	e.KubeletCA = ca
	e.env.ControlPlane.GetAPIServer().Configure().
		Set("kubelet-client-certificate", filepath.Join(e.Dir, "kubelet-client.crt")).
		Set("kubelet-client-key", filepath.Join(e.Dir, "kubelet-client.key")).
		Set("kubelet-certificate-authority", filepath.Join(e.Dir, "kubelet-ca.crt")).
		Set("kubelet-preferred-address-types", "InternalIP")
	return nil
}

// startProcess starts a component as a child that the kernel kills if this process dies.
func (e *Env) startProcess(path string, log io.Writer, args ...string) error {
	cmd := exec.Command(path, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", filepath.Base(path), err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.mu.Lock()
	e.procs = append(e.procs, cmd)
	e.done = append(e.done, done)
	e.own = append(e.own, cmd.Process.Pid)
	e.mu.Unlock()
	return nil
}

// adopt records as this Env's the component processes that appeared since before was taken.
func (e *Env) adopt(before []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, pid := range childPIDs(e.binDir) {
		if !slices.Contains(before, pid) {
			e.own = append(e.own, pid)
		}
	}
}

// startReaper starts a shell that waits on a pipe only this process holds open: when this
// process dies, the pipe closes and the shell kills etcd and kube-apiserver by PID. Stop ends
// the reaper first, so it never kills anything after a normal stop (PIDs may be reused).
func (e *Env) startReaper() error {
	e.mu.Lock()
	pids := make([]string, 0, len(e.own))
	for _, p := range e.own {
		pids = append(pids, strconv.Itoa(p))
	}
	e.mu.Unlock()
	if len(pids) == 0 {
		return nil
	}
	cmd := exec.Command("sh", "-c", "read _ ; kill -9 "+strings.Join(pids, " ")+" 2>/dev/null")
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the reaper: %w", err)
	}
	e.reaper, e.reaperPipe = cmd, w
	return nil
}

func (e *Env) stopReaper() {
	if e.reaper == nil {
		return
	}
	_ = e.reaper.Process.Kill()
	_ = e.reaper.Wait()
	_ = e.reaperPipe.Close()
	e.reaper = nil
}

// Stop stops every component by PID (the ones started here with SIGTERM, then SIGKILL after
// 10 s; etcd and kube-apiserver through envtest) and removes the temporary directory.
func (e *Env) Stop() error {
	e.mu.Lock()
	procs, done := e.procs, e.done
	e.procs, e.done = nil, nil
	e.mu.Unlock()
	e.stopReaper()
	for i, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		select {
		case <-done[i]:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done[i]
		}
	}
	var errs []error
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Dir != "" {
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PIDs returns the process IDs of this Env's control-plane components that still run (envtest
// does not expose etcd's and kube-apiserver's PIDs: they are found in /proc when it starts them),
// so tests can prove that Stop left nothing running.
func (e *Env) PIDs() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	alive := childPIDs(e.binDir)
	var out []int
	for _, p := range e.own {
		if slices.Contains(alive, p) {
			out = append(out, p)
		}
	}
	return out
}

// RestartAPIServer kills kube-apiserver with SIGKILL (as a crash or an OOM kill would), waits
// down, and starts it again with the same arguments, certificates and port; it returns once
// the server answers /readyz again. Clients keep their configuration.
func (e *Env) RestartAPIServer(ctx context.Context, down time.Duration) error {
	pid, args := 0, []string(nil)
	for _, p := range e.PIDs() {
		if a := cmdlineOf(p); len(a) > 0 && filepath.Base(a[0]) == "kube-apiserver" {
			pid, args = p, a
		}
	}
	if pid == 0 {
		return errors.New("no kube-apiserver of this control plane runs")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill kube-apiserver %d: %w", pid, err)
	}
	for alive(pid) {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	if err := sleep(ctx, down); err != nil {
		return err
	}
	if err := e.startProcess(args[0], e.log, args[1:]...); err != nil {
		return err
	}
	e.stopReaper()
	if err := e.startReaper(); err != nil {
		return err
	}
	for {
		if err := e.Healthy(ctx); err == nil {
			return nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("kube-apiserver did not come back: %w", err)
		}
	}
}

// cmdlineOf returns a process's arguments.
func cmdlineOf(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Healthy reports whether the API server answers /readyz.
func (e *Env) Healthy(ctx context.Context) error {
	rc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(e.Config.Host, "/")+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := rc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// AddUser creates a client-certificate user with the given groups (none: a user with no
// permissions at all) and returns the path of a kubeconfig for it.
func (e *Env) AddUser(name string, groups ...string) (string, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	p := filepath.Join(e.Dir, "kubeconfig-"+name)
	return p, os.WriteFile(p, kc, 0o600)
}
