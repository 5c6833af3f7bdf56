package rig_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/test/rig"
)

var r *rig.Rig

func TestMain(m *testing.M) {
	os.Exit(rig.Main(m, &r, rig.Options{RestartBackoff: time.Second}))
}

const (
	ns       = "rigtest"
	selector = "app=mariadb"
	password = "rig-demo-secret"
)

var (
	fixtureOnce sync.Once
	fixtureErr  error
	fixtureTime time.Duration
)

// mariadb applies the plain MariaDB StatefulSet once per package and waits until all three pods are
// Ready; every test that uses it starts from three Ready pods.
func mariadb(t *testing.T) []corev1.Pod {
	t.Helper()
	fixtureOnce.Do(func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if fixtureErr = rig.Apply(ctx, r.Config, ns, rig.MariaDBManifest); fixtureErr != nil {
			return
		}
		_, fixtureErr = r.WaitPods(ctx, ns, selector, 3)
		fixtureTime = time.Since(start)
	})
	if fixtureErr != nil {
		t.Fatalf("MariaDB StatefulSet: %v\n%s", fixtureErr, describe(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := r.WaitPods(ctx, ns, selector, 3)
	if err != nil {
		t.Fatalf("%v\n%s", err, describe(t))
	}
	return pods
}

// describe summarises the pods for failure messages.
func describe(t *testing.T) string {
	t.Helper()
	pods, err := r.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s phase=%s ip=%s ready=%v", p.Name, p.Status.Phase, p.Status.PodIP, rig.IsReady(&p))
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, " [%s restarts=%d state=%+v]", cs.Name, cs.RestartCount, cs.State)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func open(t *testing.T, addr string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", rig.DSN(addr, "root", password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestStatefulSetBecomesReady(t *testing.T) {
	pods := mariadb(t)
	t.Logf("3 MariaDB pods Ready %s after the StatefulSet was applied", fixtureTime.Round(time.Millisecond))
	seen := map[string]bool{}
	for _, p := range pods {
		if !strings.HasPrefix(p.Status.PodIP, "127.") || seen[p.Status.PodIP] {
			t.Errorf("pod %s has address %q: want its own loopback address", p.Name, p.Status.PodIP)
		}
		seen[p.Status.PodIP] = true
		if p.Spec.NodeName != r.NodeName {
			t.Errorf("pod %s runs on %q, want the rig's node %q", p.Name, p.Spec.NodeName, r.NodeName)
		}
	}
}

func TestConnectOnPodIP(t *testing.T) {
	pods := mariadb(t)
	ctx := context.Background()
	for i, p := range pods {
		db := open(t, p.Status.PodIP+":3306")
		var serverID int
		var version, hostname string
		if err := db.QueryRowContext(ctx, "SELECT @@server_id, @@version, @@hostname").Scan(&serverID, &version, &hostname); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		// The init container derived server-id from the ordinal and wrote it into conf.d.
		if want := 100 + i; serverID != want {
			t.Errorf("%s: server_id = %d, want %d", p.Name, serverID, want)
		}
		if hostname != p.Name {
			t.Errorf("%s: @@hostname = %q, want the pod's hostname", p.Name, hostname)
		}
		if !strings.Contains(version, "MariaDB") {
			t.Errorf("%s: version %q", p.Name, version)
		}
	}
	// The endpoints controller publishes ready pods shortly after they are Ready.
	deadline := time.Now().Add(30 * time.Second)
	for {
		addrs, err := r.ServiceAddrs(ctx, ns, "mariadb", "mysql")
		if err != nil {
			t.Fatal(err)
		}
		if len(addrs) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service endpoints = %v, want the 3 pods", addrs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestDataSurvivesPodRecreation(t *testing.T) {
	pods := mariadb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := pods[1]
	db := open(t, pod.Status.PodIP+":3306")
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS rig",
		"CREATE TABLE IF NOT EXISTS rig.t (id INT PRIMARY KEY, v VARCHAR(32))",
		"REPLACE INTO rig.t VALUES (1, 'survives')",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_ = db.Close()
	if err := r.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var recreated corev1.Pod
	for {
		p, err := r.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.UID != pod.UID && rig.IsReady(p) {
			recreated = *p
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("pod %s was not recreated and Ready: %v\n%s", pod.Name, err, describe(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
	db = open(t, recreated.Status.PodIP+":3306")
	var v string
	if err := db.QueryRowContext(ctx, "SELECT v FROM rig.t WHERE id = 1").Scan(&v); err != nil {
		t.Fatalf("reading the row back from the recreated pod: %v", err)
	}
	if v != "survives" {
		t.Fatalf("row = %q, want %q", v, "survives")
	}
}

// podAfter waits until pod satisfies ok.
func podAfter(t *testing.T, ctx context.Context, name string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	for {
		p, err := r.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(p) {
			return p
		}
		if ctx.Err() != nil {
			t.Fatalf("pod %s: condition not reached: %v\n%s", name, err, describe(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func restarts(p *corev1.Pod) int32 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "mariadb" {
			return cs.RestartCount
		}
	}
	return -1
}

func TestKillRestartsContainer(t *testing.T) {
	pods := mariadb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := pods[0]
	before := restarts(&pod)
	r.Kill(t, ns, pod.Name)
	p := podAfter(t, ctx, pod.Name, func(p *corev1.Pod) bool { return restarts(p) > before && rig.IsReady(p) })
	if p.UID != pod.UID {
		t.Fatalf("the pod was replaced; want the container restarted in place")
	}
	var last *corev1.ContainerStateTerminated
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "mariadb" {
			last = cs.LastTerminationState.Terminated
		}
	}
	if last == nil || last.ExitCode != 137 {
		t.Errorf("last termination = %+v, want exit code 137 (SIGKILL)", last)
	}
	db := open(t, p.Status.PodIP+":3306")
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("restarted server: %v", err)
	}
}

// TestRestartKeepsNeighboursTemporaryTables: a starting mariadbd deletes every #sql* file in its
// tmpdir (/tmp), taking them for leftovers of its own earlier run. Each container has a /tmp of its
// own, as in a real runtime; with the host's /tmp shared, a neighbour's restart deleted a running
// server's temporary table files (a bootstrap failed in CI with "Error on delete of
// '/tmp/#sql-temptable-…'").
func TestRestartKeepsNeighboursTemporaryTables(t *testing.T) {
	pods := mariadb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := open(t, pods[1].Status.PodIP+":3306")
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var tmpdir string
	if err := conn.QueryRowContext(ctx, "SELECT @@tmpdir").Scan(&tmpdir); err != nil || tmpdir != "/tmp" {
		t.Fatalf("@@tmpdir = %q (%v), want /tmp: the attack needs the server's default tmpdir", tmpdir, err)
	}
	for _, q := range []string{
		"SET SESSION sql_log_bin = 0",
		"CREATE TEMPORARY TABLE test.neighbour (a INT) ENGINE=Aria",
		"INSERT INTO test.neighbour VALUES (1), (2), (3)",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if out, err := r.Exec(ctx, ns, pods[1].Name, "mariadb", 10*time.Second, "sh", "-c", "ls /tmp | grep -c '^#sql'"); err != nil || out.ExitCode != 0 {
		t.Fatalf("the temporary table's files are not in the container's /tmp: %+v %v", out, err)
	}
	if _, err := os.Stat("/tmp"); err == nil {
		if m, _ := filepath.Glob("/tmp/#sql-temptable-*"); len(m) > 0 {
			t.Errorf("the host's /tmp holds %v: a container's /tmp must be its own", m)
		}
	}
	before := restarts(&pods[2])
	r.Kill(t, ns, pods[2].Name)
	podAfter(t, ctx, pods[2].Name, func(p *corev1.Pod) bool { return restarts(p) > before && rig.IsReady(p) })
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM test.neighbour").Scan(&n); err != nil || n != 3 {
		t.Errorf("after a neighbour's restart: %d rows, %v; want the temporary table's 3", n, err)
	}
	if _, err := conn.ExecContext(ctx, "DROP TEMPORARY TABLE test.neighbour"); err != nil {
		t.Errorf("after a neighbour's restart: drop the temporary table: %v", err)
	}
}

func TestFreezeMakesReadinessFalse(t *testing.T) {
	pods := mariadb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := pods[2]
	r.Freeze(t, ns, pod.Name)
	podAfter(t, ctx, pod.Name, func(p *corev1.Pod) bool { return !rig.IsReady(p) })
	addrs, err := r.ServiceAddrs(ctx, ns, "mariadb", "mysql")
	for err == nil && contains(addrs, pod.Status.PodIP+":3306") && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		addrs, err = r.ServiceAddrs(ctx, ns, "mariadb", "mysql")
	}
	if err != nil || contains(addrs, pod.Status.PodIP+":3306") {
		t.Fatalf("the frozen pod stayed in the Service's endpoints %v: %v", addrs, err)
	}
	r.Thaw(t, ns, pod.Name)
	p := podAfter(t, ctx, pod.Name, rig.IsReady)
	if restarts(p) != restarts(&pod) {
		t.Errorf("the frozen container was restarted (%d → %d); freeze must only affect readiness", restarts(&pod), restarts(p))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestNetworkCut(t *testing.T) {
	pods := mariadb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := pods[1]
	addr := pod.Status.PodIP + ":3306"
	// A connection established before the cut.
	db := open(t, addr)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.PingContext(ctx); err != nil {
		t.Fatal(err)
	}

	r.Cut(t, ns, pod.Name)
	qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
	var one int
	err = conn.QueryRowContext(qctx, "SELECT 1").Scan(&one)
	qcancel()
	if err == nil {
		t.Fatal("a query on a connection established before the cut succeeded")
	}
	fresh := open(t, addr)
	if err := fresh.PingContext(ctx); err == nil {
		t.Fatal("a new connection to the cut pod succeeded")
	}
	// The pod cannot reach out either: a client inside it cannot connect to another pod, while
	// the same client in a pod that is not cut can.
	probe := []string{"mariadb", "-h", pods[0].Status.PodIP, "-uroot", "-p" + password, "--connect-timeout=2", "-N", "-e", "SELECT 1"}
	if res, err := r.Exec(ctx, ns, pod.Name, "", 10*time.Second, probe...); err != nil || res.ExitCode == 0 {
		t.Fatalf("from the cut pod to %s: exit %d, %v (%s): want a failed connection", pods[0].Name, res.ExitCode, err, res.Output)
	}
	if res, err := r.Exec(ctx, ns, pods[2].Name, "", 10*time.Second, probe...); err != nil || res.ExitCode != 0 {
		t.Fatalf("from %s to %s: exit %d, %v (%s)", pods[2].Name, pods[0].Name, res.ExitCode, err, res.Output)
	}
	// The node still reaches the pod, as a kubelet does: the cut pod stays Ready.
	if p := podAfter(t, ctx, pod.Name, func(*corev1.Pod) bool { return true }); !rig.IsReady(p) {
		t.Errorf("the cut pod became not Ready; probes come from its node and must still pass")
	}

	r.Restore(t, ns, pod.Name)
	again := open(t, addr)
	var err2 error
	for {
		if err2 = again.PingContext(ctx); err2 == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err2 != nil {
		t.Fatalf("after restore: %v", err2)
	}
	if res, err := r.Exec(ctx, ns, pod.Name, "", 10*time.Second, probe...); err != nil || res.ExitCode != 0 {
		t.Fatalf("after restore, from the pod to %s: exit %d, %v (%s)", pods[0].Name, res.ExitCode, err, res.Output)
	}
}

// forceDelete deletes a pod with grace period 0, as `kubectl delete --force` does for a pod whose
// node is gone.
func forceDelete(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	grace := int64(0)
	if err := r.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
}

func exec(t *testing.T, ctx context.Context, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestLosePod(t *testing.T) {
	pods := mariadb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := pods[2]
	exec(t, ctx, open(t, pod.Status.PodIP+":3306"), "CREATE DATABASE IF NOT EXISTS kept")

	r.Lose(t, ns, pod.Name)
	for _, info := range r.Pods() {
		if info.Name == pod.Name && info.Namespace == ns && !info.Lost {
			t.Errorf("the agent still runs the lost pod: %+v", info)
		}
	}
	if err := open(t, pod.Status.PodIP+":3306").PingContext(ctx); err == nil {
		t.Fatal("the lost pod's server still answers")
	}
	// The pod object keeps its last status: nothing reports for it any more.
	p, err := r.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || p.UID != pod.UID || !rig.IsReady(p) {
		t.Fatalf("the lost pod's object changed: %v %+v", err, p.Status.Conditions)
	}
	// A graceful delete is never confirmed, as with a dead node.
	if err := r.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if p, err := r.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || p.UID != pod.UID {
		t.Fatalf("the lost pod's deletion was confirmed (%v); nobody runs it", err)
	}
	forceDelete(t, ctx, pod.Name)
	p = podAfter(t, ctx, pod.Name, func(p *corev1.Pod) bool { return p.UID != pod.UID && rig.IsReady(p) })
	var name string
	if err := open(t, p.Status.PodIP+":3306").QueryRowContext(ctx, "SHOW DATABASES LIKE 'kept'").Scan(&name); err != nil {
		t.Fatalf("the replacement pod lost the claim's data: %v", err)
	}
}

func TestWipeClaim(t *testing.T) {
	pods := mariadb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := pods[1]
	exec(t, ctx, open(t, pod.Status.PodIP+":3306"), "CREATE DATABASE IF NOT EXISTS wiped")

	// The node dies with its disk: nothing runs the pod, its data is gone.
	r.Lose(t, ns, pod.Name)
	r.WipePVC(t, ns, "data-"+pod.Name)
	forceDelete(t, ctx, pod.Name)
	p := podAfter(t, ctx, pod.Name, func(p *corev1.Pod) bool { return p.UID != pod.UID && rig.IsReady(p) })

	// The replacement initialised an empty datadir from the pod spec again: root password from
	// the Secret, server-id from the init container.
	db := open(t, p.Status.PodIP+":3306")
	var n, serverID int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'wiped'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("the wiped claim still has its data")
	}
	if err := db.QueryRowContext(ctx, "SELECT @@server_id").Scan(&serverID); err != nil || serverID != 101 {
		t.Errorf("server_id = %d, %v; want 101", serverID, err)
	}
}

// TestTeardownLeavesNothing starts a second rig, leaves it in the messiest state the faults allow
// (a frozen server, a cut network, a lost pod) and proves Stop removes every process, iptables
// rule and cgroup it made.
// TestTeardownLeavesNothing runs a rig with every part (pods under faults, the object store) and
// proves Stop ends all of it.
func TestTeardownLeavesNothing(t *testing.T) {
	rg := rig.StartT(t, rig.Options{S3: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	two := strings.Replace(string(rig.MariaDBManifest), "replicas: 3", "replicas: 2", 1)
	if err := rig.Apply(ctx, rg.Config, "teardown", []byte(two)); err != nil {
		t.Fatal(err)
	}
	if _, err := rg.WaitPods(ctx, "teardown", selector, 2); err != nil {
		t.Fatal(err)
	}
	for _, f := range []rig.Fault{rig.Freeze, rig.Cut} {
		if err := rg.Inject(f, "teardown", "mariadb-0"); err != nil {
			t.Fatal(err)
		}
	}
	if err := rg.Inject(rig.Lose, "teardown", "mariadb-1"); err != nil {
		t.Fatal(err)
	}
	pids := rg.PIDs()
	names := map[string]int{}
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
			names[strings.TrimSpace(string(b))]++
		}
	}
	// The object store answers with the keys of s3.env, which only its owner may read.
	env := filepath.Join(rg.Dir, "s3.env")
	if st, err := os.Stat(env); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", env, st.Mode().Perm())
	}
	if _, err := rg.S3.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &rg.S3.Bucket}); err != nil {
		t.Errorf("the rig's object store: %v", err)
	}
	for _, want := range []string{"etcd", "kube-apiserver", "mariadbd", "versitygw"} {
		if names[want] == 0 {
			t.Errorf("the rig's processes %v include no %s", names, want)
		}
	}
	if err := rg.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := rg.Leftovers(); len(left) > 0 {
		t.Fatalf("left behind after Stop:\n%s", strings.Join(left, "\n"))
	}
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(b), ") Z ") {
				t.Errorf("process %d is still running after Stop", pid)
			}
		}
	}
}

// TestRestartAPIServer: the API server comes back on the same address with the same
// certificates, and the node keeps running pods afterwards.
func TestRestartAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := r.PIDs()
	start := time.Now()
	if err := r.RestartAPIServer(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver back %s after its kill", time.Since(start).Round(time.Millisecond))
	if _, err := r.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("the old client after the restart: %v", err)
	}
	if slices.Equal(before, r.PIDs()) {
		t.Errorf("the control plane's PIDs did not change: %v", before)
	}
}
