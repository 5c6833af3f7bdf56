// Package rig runs the local rig that the project's end-to-end tests and `make demo` use: a real
// Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager and kube-scheduler, from
// internal/testenv) plus a node agent of our own that runs every pod the scheduler binds to its Node
// as real local processes — a real mariadbd per MariaDB pod, on the pod's own loopback address
// 127.0.X.Y:3306, with its data in a per-claim directory that outlives the pod.
//
// Tests start one rig per package and reach it through the API and through SQL:
//
//	var r *rig.Rig
//
//	func TestMain(m *testing.M) { os.Exit(rig.Main(m, &r, rig.Options{})) }
//
//	func TestSomething(t *testing.T) {
//		// r.Kubeconfig, r.Config, r.Client reach the API server as an admin.
//		addrs, err := r.ServiceAddrs(ctx, "default", "mariadb", "mysql") // ready endpoints, never a cluster IP
//		db, err := sql.Open("mysql", rig.DSN(addrs[0], "root", password))
//		r.Kill(t, "default", "mariadb-0")   // kill -9; restarted, restartCount+1
//		r.Freeze(t, "default", "mariadb-1") // SIGSTOP until r.Thaw (or the end of the test)
//		r.Cut(t, "default", "mariadb-2")    // partition until r.Restore (or the end of the test)
//	}
//
// The node serves the kubelet API (port-forward, exec, container logs) that the API server
// proxies to, so `kubectl port-forward|exec|logs` and mysqlctl's default dialer from a
// workstation (pods/portforward through the API server) work on the rig as on a real cluster.
//
// Main and StartT fail the package (or test) when anything the rig started survives its Stop:
// processes, iptables rules, cgroups. Everything binds loopback addresses only; the API server
// refuses loopback addresses in EndpointSlices, so the agent publishes FQDN EndpointSlices that
// ServiceAddrs follows to the pods (see ServiceAddrs).
//
// With Options.S3 the rig also runs the test world's S3-compatible object store (testenv.StartS3,
// versitygw from hack/build-s3.sh or MYSQLCTL_S3_BIN), its data in Dir/s3 and its endpoint and
// keys in Dir/s3.env (mode 0600); Stop and Down end it with the rest.
//
// The rig needs root (mount namespaces and iptables), mariadb-server and the control-plane
// binaries of hack/build-controlplane.sh (MYSQLCTL_CONTROLPLANE_BIN). The program in cmd/rig runs a
// rig in the background for people: rig up / down, fault injection, status.
package rig
