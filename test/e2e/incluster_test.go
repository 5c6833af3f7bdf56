package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mysqlctl/mysqlctl/internal/supervisor"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// The in-cluster watch of manifests/watch: its namespace, Deployment, labels and leader Lease.
const (
	inClusterNS       = "mysqlctl"
	inClusterApp      = "app.kubernetes.io/name=mysqlctl,app.kubernetes.io/component=watch"
	inClusterLease    = "mysqlctl.watch-leader"
	inClusterWatchCtr = "watch"
)

// inClusterWatch is the Deployment of manifests/watch running on the rig.
type inClusterWatch struct{}

// output is every watch pod's state and log, read through the API server (the node's
// containerLogs), and what the rig's node said about them.
func (w inClusterWatch) output() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := r.Client.CoreV1().Pods(inClusterNS).List(ctx, metav1.ListOptions{LabelSelector: inClusterApp})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		st, _ := json.Marshal(p.Status.ContainerStatuses)
		logs, err := r.Client.CoreV1().Pods(inClusterNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: inClusterWatchCtr}).DoRaw(ctx)
		fmt.Fprintf(&b, "---- %s %s %s\nlog (%v):\n%s\n", p.Name, p.Status.Phase, st, err, logs)
	}
	if agentLog, err := os.ReadFile(filepath.Join(r.Dir, "rig.log")); err == nil {
		b.WriteString("---- the node about them:\n")
		for _, l := range strings.Split(string(agentLog), "\n") {
			if strings.Contains(l, "agent: ") && strings.Contains(l, inClusterNS+"/") {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// deployInClusterWatch applies every file of manifests/watch, unmodified, as `kubectl apply -f
// manifests/watch/` does, and removes it all when the test ends (waiting until the pods are gone,
// so that no later test is supervised by them).
func deployInClusterWatch(t *testing.T, ctx context.Context) inClusterWatch {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "manifests", "watch", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("manifests/watch: %v", err)
	}
	sort.Strings(files)
	var all bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString("---\n")
		all.Write(b)
		all.WriteString("\n")
	}
	w := inClusterWatch{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("in-cluster watch logs:\n%s", w.output())
		}
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cs := r.Client
		fg := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}
		for _, del := range []func() error{
			func() error { return cs.AppsV1().Deployments(inClusterNS).Delete(cctx, "mysqlctl-watch", fg) },
			func() error {
				return cs.RbacV1().ClusterRoleBindings().Delete(cctx, "mysqlctl-watch", metav1.DeleteOptions{})
			},
			func() error { return cs.RbacV1().ClusterRoles().Delete(cctx, "mysqlctl-watch", metav1.DeleteOptions{}) },
			func() error { return cs.CoreV1().Namespaces().Delete(cctx, inClusterNS, metav1.DeleteOptions{}) },
		} {
			if err := del(); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove manifests/watch: %v", err)
			}
		}
		for {
			pods, err := cs.CoreV1().Pods(inClusterNS).List(cctx, metav1.ListOptions{})
			if err == nil && len(pods.Items) == 0 {
				break
			}
			select {
			case <-cctx.Done():
				t.Errorf("the watch pods are still there: %v", err)
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
		// The namespace goes too (its Lease and Events), so that a next run applies afresh.
		for {
			_, err := cs.CoreV1().Namespaces().Get(cctx, inClusterNS, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return
			}
			select {
			case <-cctx.Done():
				t.Errorf("namespace %s is still there: %v", inClusterNS, err)
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	if err := rig.Apply(ctx, r.Config, inClusterNS, all.Bytes()); err != nil {
		t.Fatalf("apply manifests/watch: %v", err)
	}
	return w
}

// watchPods returns the names of the Deployment's pods that are Ready.
func watchPods(ctx context.Context) ([]string, error) {
	pods, err := r.Client.CoreV1().Pods(inClusterNS).List(ctx, metav1.ListOptions{LabelSelector: inClusterApp})
	if err != nil {
		return nil, err
	}
	var ready []string
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && podReady(p) {
			ready = append(ready, p.Name)
		}
	}
	sort.Strings(ready)
	return ready, nil
}

// holderPod is the pod a Lease holder identity names (mysqlctl@HOSTNAME/PID-NONCE: a pod's
// hostname is its name).
func holderPod(identity string) string {
	host, _, _ := strings.Cut(strings.TrimPrefix(identity, "mysqlctl@"), "/")
	return host
}

// TestInClusterWatchFailsOver runs manifests/watch as a cluster would: the Deployment's two pods
// run mysqlctl's image (the rig maps mysqlctl:latest to the binary under test), as the
// ServiceAccount mysqlctl-watch under the shipped ClusterRole exactly, with a bound token from
// the TokenRequest API mounted where client-go's in-cluster configuration reads it and
// KUBERNETES_SERVICE_HOST naming the API server; they elect a leader, and when the primary of a
// cluster is killed the in-cluster leader fails it over with no acknowledged write lost. When the
// leader's pod is deleted, another watch pod leads and supervises the cluster.
// Not parallel: a watch of every namespace would supervise the other tests' clusters too.
func TestInClusterWatchFailsOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	began := time.Now()
	w := deployInClusterWatch(t, ctx)

	// Both replicas run and answer their readiness probe (/readyz on the metrics port).
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	eventually(t, rctx, "two watch pods ready", func() error {
		ready, err := watchPods(ctx)
		if err == nil && len(ready) != 2 {
			err = fmt.Errorf("ready: %v", ready)
		}
		return err
	})
	pods, _ := watchPods(ctx)
	t.Logf("watch pods %v ready %s after apply", pods, time.Since(began).Round(time.Millisecond))
	for _, p := range pods {
		pod, err := r.Client.CoreV1().Pods(inClusterNS).Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sa := pod.Spec.ServiceAccountName; sa != "mysqlctl-watch" {
			t.Errorf("pod %s runs as serviceaccount %q", p, sa)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("container %s of %s restarted %d times", cs.Name, p, cs.RestartCount)
			}
		}
	}

	// One of them leads.
	var leader string
	eventually(t, ctx, "a leader elected", func() error {
		l, err := r.Client.CoordinationV1().Leases(inClusterNS).Get(ctx, inClusterLease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil {
			return errors.New("no holder")
		}
		leader = holderPod(*l.Spec.HolderIdentity)
		for _, p := range pods {
			if p == leader {
				return nil
			}
		}
		return fmt.Errorf("holder %q is none of the watch pods %v", *l.Spec.HolderIdentity, pods)
	})
	t.Logf("leader %s elected %s after apply", leader, time.Since(began).Round(time.Millisecond))

	// A cluster the leader supervises: it takes the cluster's Lease.
	const name = "incluster"
	root := appCluster(t, ctx, name, 3)
	defer deleteCluster(t, name)
	eventually(t, ctx, "the leader supervising "+name, func() error {
		l, err := r.Client.CoordinationV1().Leases("default").Get(ctx, name+"-watch", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || holderPod(*l.Spec.HolderIdentity) != leader {
			return fmt.Errorf("lease holder %v", ptr.Deref(l.Spec.HolderIdentity, ""))
		}
		return nil
	})

	// The primary is killed under writes: the in-cluster leader fails it over.
	wr, stopWriter := startWriter(ctx, name)
	defer stopWriter()
	eventually(t, ctx, "a first write", func() error {
		if _, ok := wr.firstAckAfter(began); !ok {
			return errors.New("none yet")
		}
		return nil
	})
	primary := getCluster(t, ctx, name).Status.CurrentPrimary
	next, killed := killPrimaryAndWaitFailover(t, ctx, w, wr, name, primary)
	stopWriter()
	t.Logf("in-cluster failover %s -> %s: first write acknowledged %s after the kill", primary, next, sinceAck(wr, killed))
	checkAcked(t, ctx, root, next, wr)

	// It was the leader's doing: its log, read through the API server, reports the failover.
	logs, err := r.Client.CoreV1().Pods(inClusterNS).GetLogs(leader, &corev1.PodLogOptions{Container: inClusterWatchCtr}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failovers := 0
	for _, line := range strings.Split(string(logs), "\n") {
		var tr supervisor.Transition
		if json.Unmarshal([]byte(line), &tr) == nil && tr.Cluster == name && tr.Action == "failover" {
			failovers++
		}
	}
	if failovers == 0 {
		t.Errorf("the leader's log reports no failover of %s:\n%s", name, logs)
	}
	// The standby stayed a standby: the cluster's Lease never left the leader.
	if l, err := r.Client.CoordinationV1().Leases("default").Get(ctx, name+"-watch", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if h := holderPod(ptr.Deref(l.Spec.HolderIdentity, "")); h != leader {
		t.Errorf("the cluster's Lease is held by %q, not the leader %s", h, leader)
	}

	// The leader's pod is deleted, as `kubectl delete pod` does (SIGTERM, then its grace period):
	// another watch pod (the standby, or the Deployment's replacement, whichever takes the Lease
	// first) leads and supervises the cluster.
	deleted := time.Now()
	if err := r.Client.CoreV1().Pods(inClusterNS).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var newLeader string
	hctx, hcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer hcancel()
	eventually(t, hctx, "another watch pod supervising "+name, func() error {
		holders := map[string]bool{}
		for _, lease := range []struct{ ns, name string }{{inClusterNS, inClusterLease}, {"default", name + "-watch"}} {
			l, err := r.Client.CoordinationV1().Leases(lease.ns).Get(ctx, lease.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			h := holderPod(ptr.Deref(l.Spec.HolderIdentity, ""))
			if h == leader || !strings.HasPrefix(h, "mysqlctl-watch-") {
				return fmt.Errorf("lease %s/%s held by %q", lease.ns, lease.name, h)
			}
			holders[h], newLeader = true, h
		}
		if len(holders) != 1 {
			return fmt.Errorf("the leader Lease and the cluster's have different holders: %v", holders)
		}
		return nil
	})
	t.Logf("leader pod %s deleted: %s leads and supervises %s %s later", leader, newLeader, name, time.Since(deleted).Round(time.Millisecond))
}
