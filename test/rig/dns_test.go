package rig_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/test/rig"
)

// replicaStatus returns SHOW SLAVE STATUS as column → value ("" for NULL); nil when the server
// is not a replica.
func replicaStatus(t *testing.T, ctx context.Context, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		t.Fatalf("SHOW SLAVE STATUS: %v", err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		return nil
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}

// binlogDumpClients counts the replication connections a server is serving.
func binlogDumpClients(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'").Scan(&n)
	return n, err
}

// resolveIn resolves name with glibc inside a pod's mount namespace, as its server would.
func resolveIn(t *testing.T, ctx context.Context, namespace, pod, name string) (string, int) {
	t.Helper()
	res, err := r.Exec(ctx, namespace, pod, "", 10*time.Second, "getent", "ahostsv4", name)
	if err != nil {
		t.Fatalf("getent in %s: %v", pod, err)
	}
	if f := strings.Fields(res.Output); res.ExitCode == 0 && len(f) > 0 {
		return f[0], 0
	}
	return "", res.ExitCode
}

// TestReplicaFollowsPrimaryByDNSName proves that a server the rig runs resolves another pod's
// stable DNS name (<pod>.<governing Service>.<namespace>.svc, and the .svc.cluster.local form) to
// its current loopback address: a replica is pointed at its primary by name, the primary's pod is
// deleted and recreated by its StatefulSet with a new address, and the replica's IO thread
// reconnects to the new server by itself, with nothing run on the replica.
func TestReplicaFollowsPrimaryByDNSName(t *testing.T) {
	const dnsNS = "dnsname"
	hostsBefore, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	resolvBefore, _ := os.ReadFile("/etc/resolv.conf")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Two instances of the plain MariaDB StatefulSet, with pods managed in parallel as mysqlctl's
	// StatefulSet has them.
	manifest := strings.Replace(string(rig.MariaDBManifest), "replicas: 3", "replicas: 2", 1)
	manifest = strings.Replace(manifest, "  serviceName: mariadb\n", "  serviceName: mariadb\n  podManagementPolicy: Parallel\n", 1)
	if err := rig.Apply(ctx, r.Config, dnsNS, []byte(manifest)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Client.AppsV1().StatefulSets(dnsNS).Delete(context.Background(), "mariadb", metav1.DeleteOptions{})
	})
	pods, err := r.WaitPods(ctx, dnsNS, selector, 2)
	if err != nil {
		t.Fatal(err)
	}
	primary, replica := pods[0], pods[1]
	primaryHost := fmt.Sprintf("%s.%s.%s.svc", primary.Spec.Hostname, primary.Spec.Subdomain, dnsNS)
	if primaryHost != "mariadb-0.mariadb.dnsname.svc" {
		t.Fatalf("the StatefulSet controller gave %s hostname %q and subdomain %q", primary.Name, primary.Spec.Hostname, primary.Spec.Subdomain)
	}
	oldIP := primary.Status.PodIP

	// Names resolve inside the replica's mount namespace, both forms, and a client connects by name.
	// As with a cluster's DNS, a name follows the pod's readiness shortly after the API shows it
	// (the node publishes it at its next endpoint sync): it must resolve within seconds.
	for _, name := range []string{primaryHost, primaryHost + ".cluster.local"} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			ip, code := resolveIn(t, ctx, dnsNS, replica.Name, name)
			if ip == oldIP {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("in %s, %s resolves to %q (exit %d) 10 s after both pods were Ready, want %s", replica.Name, name, ip, code, oldIP)
			}
		}
	}
	res, err := r.Exec(ctx, dnsNS, replica.Name, "", 10*time.Second,
		"mariadb", "-h", primaryHost+".cluster.local", "-uroot", "-p"+password, "--connect-timeout=3", "-N", "-B", "-e", "SELECT @@hostname")
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Output) != primary.Name {
		t.Fatalf("client in %s connecting to %s: exit %d, %v: %q", replica.Name, primaryHost, res.ExitCode, err, res.Output)
	}
	// A name the cluster does not know fails at once and never reaches the host's resolver.
	start := time.Now()
	if ip, code := resolveIn(t, ctx, dnsNS, replica.Name, "mariadb-7.mariadb.dnsname.svc"); ip != "" {
		t.Errorf("an unknown pod name resolved to %s (exit %d)", ip, code)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("resolving an unknown name took %s", d)
	}
	if res, err := r.Exec(ctx, dnsNS, replica.Name, "", 10*time.Second, "cat", "/etc/resolv.conf"); err != nil || !strings.Contains(res.Output, "nameserver "+r.NodeIP+"\n") {
		t.Errorf("the pod's resolv.conf must name only the node's loopback address: %v %q", err, res.Output)
	}

	// Replication by name.
	pdb := open(t, oldIP+":3306")
	exec(t, ctx, pdb,
		"CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'repl-secret'",
		"GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'",
		"CREATE DATABASE IF NOT EXISTS dns",
		"CREATE TABLE IF NOT EXISTS dns.t (id INT PRIMARY KEY)",
		"INSERT INTO dns.t VALUES (1)",
	)
	rdb := open(t, replica.Status.PodIP+":3306")
	exec(t, ctx, rdb,
		"CHANGE MASTER TO MASTER_HOST='"+primaryHost+"', MASTER_PORT=3306, MASTER_USER='repl', MASTER_PASSWORD='repl-secret', "+
			"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
		"START SLAVE",
	)
	waitRow := func(id int) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			var n int
			err := rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM dns.t WHERE id = ?", id).Scan(&n)
			if err == nil && n == 1 {
				return time.Since(start)
			}
			if ctx.Err() != nil {
				t.Fatalf("row %d never reached the replica (%v); replica status: %v\n%s", id, err, replicaStatus(t, context.Background(), rdb), describeNS(t, dnsNS))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitRow(1)
	st := replicaStatus(t, ctx, rdb)
	if st["Master_Host"] != primaryHost || st["Slave_IO_Running"] != "Yes" {
		t.Fatalf("replica status: Master_Host=%q Slave_IO_Running=%q Last_IO_Error=%q", st["Master_Host"], st["Slave_IO_Running"], st["Last_IO_Error"])
	}
	if n, err := binlogDumpClients(ctx, pdb); err != nil || n != 1 {
		t.Fatalf("the primary at %s serves %d replication connections (%v), want the replica's", oldIP, n, err)
	}
	_ = pdb.Close()

	// The primary's pod is deleted; its StatefulSet recreates it with a new address.
	if err := r.Client.CoreV1().Pods(dnsNS).Delete(ctx, primary.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var recreated *corev1.Pod
	for recreated == nil {
		p, err := r.Client.CoreV1().Pods(dnsNS).Get(ctx, primary.Name, metav1.GetOptions{})
		if err == nil && p.UID != primary.UID && rig.IsReady(p) {
			recreated = p
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s was not recreated: %v\n%s", primary.Name, err, describeNS(t, dnsNS))
		}
		time.Sleep(50 * time.Millisecond)
	}
	newIP := recreated.Status.PodIP
	if newIP == oldIP || !net.ParseIP(newIP).IsLoopback() {
		t.Fatalf("recreated %s has address %s (was %s): want a new loopback address", primary.Name, newIP, oldIP)
	}
	t.Logf("%s recreated: %s → %s", primary.Name, oldIP, newIP)

	// Nothing is run on the replica: its IO thread resolves the name again and finds the new server.
	pdb = open(t, newIP+":3306")
	exec(t, ctx, pdb, "INSERT INTO dns.t VALUES (2)")
	took := waitRow(2)
	t.Logf("row written on the recreated primary reached the replica %s after the write", took.Round(time.Millisecond))
	st = replicaStatus(t, ctx, rdb)
	if st["Master_Host"] != primaryHost || st["Slave_IO_Running"] != "Yes" {
		t.Fatalf("replica status: Master_Host=%q Slave_IO_Running=%q Last_IO_Error=%q", st["Master_Host"], st["Slave_IO_Running"], st["Last_IO_Error"])
	}
	t.Logf("replica: Master_Host=%s Slave_IO_Running=%s Last_IO_Errno=%s Last_IO_Error=%q", st["Master_Host"], st["Slave_IO_Running"], st["Last_IO_Errno"], st["Last_IO_Error"])
	if n, err := binlogDumpClients(ctx, pdb); err != nil || n != 1 {
		t.Fatalf("the recreated primary at %s serves %d replication connections (%v), want the replica's", newIP, n, err)
	}
	// What the IO thread went through, from the replica's error log.
	for _, info := range r.Pods() {
		if info.Namespace == dnsNS && info.Name == replica.Name {
			log, _ := os.ReadFile(filepath.Join(info.Dir, "logs", "mariadb.log"))
			for _, line := range strings.Split(string(log), "\n") {
				if strings.Contains(line, "Slave I/O") || strings.Contains(line, "to master") {
					t.Logf("replica log: %s", line)
				}
			}
		}
	}
	for _, name := range []string{primaryHost, primaryHost + ".cluster.local"} {
		if ip, code := resolveIn(t, ctx, dnsNS, replica.Name, name); ip != newIP {
			t.Errorf("in %s, %s resolves to %q (exit %d), want the new %s", replica.Name, name, ip, code, newIP)
		}
	}

	// Only loopback addresses in the pods' hosts files; the host's own files untouched.
	for _, p := range []string{replica.Name, primary.Name} {
		res, err := r.Exec(ctx, dnsNS, p, "", 10*time.Second, "cat", "/etc/hosts")
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("cat /etc/hosts in %s: %v %q", p, err, res.Output)
		}
		for _, line := range strings.Split(res.Output, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			if ip := net.ParseIP(f[0]); ip == nil || !ip.IsLoopback() {
				t.Errorf("%s's /etc/hosts has a non-loopback address: %q", p, line)
			}
		}
	}
	if after, _ := os.ReadFile("/etc/hosts"); !bytes.Equal(after, hostsBefore) {
		t.Errorf("the host's /etc/hosts changed:\n%s", after)
	}
	if after, _ := os.ReadFile("/etc/resolv.conf"); !bytes.Equal(after, resolvBefore) {
		t.Errorf("the host's /etc/resolv.conf changed:\n%s", after)
	}
}

// describeNS summarises a namespace's pods for failure messages.
func describeNS(t *testing.T, namespace string) string {
	t.Helper()
	pods, err := r.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s uid=%s phase=%s ip=%s ready=%v deleting=%v\n", p.Name, p.UID, p.Status.Phase, p.Status.PodIP, rig.IsReady(&p), p.DeletionTimestamp != nil)
	}
	return b.String()
}
