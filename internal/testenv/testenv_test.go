package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestFullControlPlane starts every component, proves the controller-manager and the scheduler
// are working (a ServiceAccount token controller creates the default ServiceAccount; the
// scheduler reports a pod it cannot place), loads the CRDs, and proves Stop leaves no process.
func TestFullControlPlane(t *testing.T) {
	e, err := Start(Options{ControllerManager: true, Scheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = e.Stop()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := e.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(e.Config)
	if _, err := kube.Discovery().ServerResourcesForGroupVersion("mysqlctl.io/v1alpha1"); err != nil {
		t.Fatalf("CRDs from manifests/crd not served: %v", err)
	}
	// The controller-manager's serviceaccount controller creates "default" in every namespace.
	waitFor(ctx, t, "default ServiceAccount created by kube-controller-manager", func() bool {
		_, err := kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	// The scheduler marks an unschedulable pod (there are no nodes) PodScheduled=False.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "kube-scheduler to report the pod unschedulable", func() bool {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})

	pids := e.PIDs()
	if len(pids) != 4 {
		t.Errorf("expected 4 child components (etcd, apiserver, controller-manager, scheduler), found PIDs %v", pids)
	}
	dir := e.Dir
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for _, pid := range pids {
		// Signal 0 checks existence; reaped children are gone entirely.
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("work dir %s left behind: %v", dir, err)
	}
}

func TestMissingCRDDirectoryFails(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Run from a copy of the layout that lacks manifests/crd.
	tmp := t.TempDir()
	if err := os.MkdirAll(tmp+"/hack", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root+"/hack/build-controlplane.sh", tmp+"/hack/build-controlplane.sh"); err != nil {
		t.Fatal(err)
	}
	t.Chdir(tmp)
	e, err := Start(Options{})
	if err == nil {
		_ = e.Stop()
		t.Fatal("Start succeeded without manifests/crd")
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestComponentsDieWithTheTestBinary: a test binary killed with SIGKILL (no deferred Stop runs)
// leaves no etcd or kube-apiserver behind: the Env's reaper kills them by PID.
func TestComponentsDieWithTheTestBinary(t *testing.T) {
	if os.Getenv("MYSQLCTL_TESTENV_CHILD") == "1" {
		e, err := Start(Options{SkipCRDs: true})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("PIDS", strings.Trim(fmt.Sprint(e.PIDs()), "[]"))
		time.Sleep(time.Hour)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestComponentsDieWithTheTestBinary$")
	cmd.Env = append(os.Environ(), "MYSQLCTL_TESTENV_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "PIDS "); ok {
			for _, f := range strings.Fields(rest) {
				p, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, p)
			}
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(pids) < 2 {
		t.Fatalf("the child reported the PIDs %v (want etcd and kube-apiserver)", pids)
	}
	running := func() []int {
		var alive []int
		for _, p := range pids {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
			if err != nil {
				continue
			}
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' {
				alive = append(alive, p)
			}
		}
		return alive
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(running()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if alive := running(); len(alive) > 0 {
		for _, p := range alive {
			_ = syscall.Kill(p, syscall.SIGKILL) // ours: started by the child this test ran
		}
		t.Fatalf("components %v outlived the killed test binary", alive)
	}
}
