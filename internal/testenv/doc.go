// Package testenv starts a real Kubernetes control plane for tests: etcd and kube-apiserver
// (through controller-runtime's envtest), and optionally kube-controller-manager and
// kube-scheduler, all on free loopback ports in a temporary directory, with the CRDs from
// manifests/crd loaded (a missing directory is an error, never a silently empty API).
//
// The binaries are built from the Go module proxy by hack/build-controlplane.sh and cached by
// version. Set MYSQLCTL_CONTROLPLANE_BIN (or KUBEBUILDER_ASSETS) to their directory; when neither
// is set the script is run once to find or build them.
//
// Every process is stopped by PID on Stop, which Main and StartT arrange to run also when a test
// fails; the processes this package starts itself also get SIGKILL from the kernel if the test
// binary dies without cleaning up (Pdeathsig).
//
// StartS3 (or StartS3T) starts the object store of the test world: versitygw, a real
// S3-compatible server (SigV4, multipart uploads) over a directory tree, on a free port of
// 127.0.0.1 with generated keys and a bucket. hack/build-s3.sh builds it from the Go module proxy
// and caches it by version; MYSQLCTL_S3_BIN names the binary instead. Its keys reach it through
// its environment, never its command line, and an S3 value prints without its secret key.
//
// One control plane per test package is the intended use (a start costs a few seconds):
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }
package testenv
