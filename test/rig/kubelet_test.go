package rig_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream" //nolint:staticcheck // client-go's portforward still takes this type
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"

	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// The node serves the kubelet API the API server proxies to; these tests go through the real API
// server, over both protocols current clients negotiate, as kubectl and mysqlctl do.

type dialerKind string

const (
	spdyProto      dialerKind = "SPDY"
	websocketProto dialerKind = "WebSocket"
)

func pfDialer(t *testing.T, kind dialerKind, pod string) httpstream.Dialer {
	t.Helper()
	u, err := url.Parse(strings.TrimSuffix(r.Config.Host, "/") + "/api/v1/namespaces/" + ns + "/pods/" + pod + "/portforward")
	if err != nil {
		t.Fatal(err)
	}
	if kind == websocketProto {
		// No fall-back: a WebSocket the API server refused would fail here.
		d, err := portforward.NewSPDYOverWebsocketDialer(u, r.Config)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tr, up, err := spdy.RoundTripperFor(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	return spdy.NewDialer(up, &http.Client{Transport: tr}, http.MethodPost, u)
}

// forward runs a client-go port-forward of the pod's port on a free local port and returns it.
func forward(t *testing.T, kind dialerKind, pod string, port int) (int, *bytes.Buffer) {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut bytes.Buffer
	fw, err := portforward.NewOnAddresses(pfDialer(t, kind, pod), []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var fwErr error
	go func() { fwErr = fw.ForwardPorts(); close(done) }()
	t.Cleanup(func() { close(stop); <-done })
	select {
	case <-ready:
	case <-done:
		t.Fatalf("%s port-forward to %s: %v", kind, pod, fwErr)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s port-forward to %s: not ready in 30s", kind, pod)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports: %v %v", ports, err)
	}
	return int(ports[0].Local), &errOut
}

func TestPortForwardThroughAPIServer(t *testing.T) {
	pods := mariadb(t)
	for _, kind := range []dialerKind{spdyProto, websocketProto} {
		t.Run(string(kind), func(t *testing.T) {
			pod := pods[0].Name
			local, _ := forward(t, kind, pod, 3306)
			db := open(t, "127.0.0.1:"+strconv.Itoa(local))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Several connections on one tunnel, each its own stream.
			for i := range 3 {
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatalf("connection %d through %s port-forward: %v", i, kind, err)
				}
				var host string
				if err := conn.QueryRowContext(ctx, "SELECT @@hostname").Scan(&host); err != nil {
					t.Fatal(err)
				}
				if host != pod {
					t.Errorf("connection %d reached %q, want %q", i, host, pod)
				}
				defer func() { _ = conn.Close() }()
			}
		})
	}
}

// mysqlctl's own port-forward dialer, over each protocol: a port nothing listens on in the pod is
// reported by the node on the error stream, and reaches the caller as refused.
func TestPortForwardRefusedPortSaysSo(t *testing.T) {
	pods := mariadb(t)
	for _, kind := range []dialerKind{spdyProto, websocketProto} {
		t.Run(string(kind), func(t *testing.T) {
			d, err := topology.NewPortForwardDialer(r.Config, topology.PortForwardOptions{SPDYOnly: kind == spdyProto})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			target := topology.Target{Name: pods[0].Name, Namespace: ns, Pod: pods[0].Name}
			conn, err := d.DialContext(ctx, target)
			if err != nil {
				t.Fatalf("port 3306: %v", err)
			}
			_ = conn.Close()
			target.Port = 3307
			conn, err = d.DialContext(ctx, target)
			if err == nil {
				_ = conn.Close()
				t.Fatal("port 3307, where nothing listens, was reached")
			}
			if topology.KindOf(err) != topology.ErrorRefused || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("port 3307: %v (kind %s), want refused", err, topology.KindOf(err))
			}
		})
	}
}

// A tunnel is bound to the pod instance the API server found when it was made. After the pod is
// recreated under its name (new UID, new address), the old tunnel's streams fail on the node, and
// mysqlctl's dialer must not keep the failing tunnel: its next dial reaches the new pod.
func TestPortForwardFollowsRecreatedPod(t *testing.T) {
	pods := mariadb(t)
	pod := pods[len(pods)-1]
	for _, kind := range []dialerKind{spdyProto, websocketProto} {
		t.Run(string(kind), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			d, err := topology.NewPortForwardDialer(r.Config, topology.PortForwardOptions{SPDYOnly: kind == spdyProto})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Close() }()
			target := topology.Target{Name: pod.Name, Namespace: ns, Pod: pod.Name}
			conn, err := d.DialContext(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.Close()
			old := podAfter(t, ctx, pod.Name, func(*corev1.Pod) bool { return true })
			forceDelete(t, ctx, pod.Name)
			now := podAfter(t, ctx, pod.Name, func(p *corev1.Pod) bool { return p.UID != old.UID && rig.IsReady(p) })
			if now.Status.PodIP == old.Status.PodIP {
				t.Logf("the new pod has the old address %s", now.Status.PodIP)
			}
			conn, err = d.DialContext(ctx, target)
			if err != nil {
				t.Fatalf("after the pod was recreated (uid %s -> %s): %v", old.UID, now.UID, err)
			}
			_ = conn.Close()
		})
	}
}

// A pooled connection the server closed (KILL, wait_timeout) is noticed before the next statement
// is written to it: database/sql retries on a new connection, as it does on TCP, instead of failing
// the statement with "invalid connection" (which `watch` would count as a failed check).
func TestPortForwardPooledConnectionClosedByServer(t *testing.T) {
	pods := mariadb(t)
	pod := pods[0].Name
	d, err := topology.NewPortForwardDialer(r.Config, topology.PortForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	mysql.RegisterDialContext("rigtest-pf", func(ctx context.Context, _ string) (net.Conn, error) {
		return d.DialContext(ctx, topology.Target{Name: pod, Namespace: ns, Pod: pod})
	})
	viaPF, err := sql.Open("mysql", "root:"+password+"@rigtest-pf(pod)/")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = viaPF.Close() }()
	viaPF.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var id int64
	if err := viaPF.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	direct := open(t, pods[0].Status.PodIP+":3306")
	if _, err := direct.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the node has ended the stream by then
	var next int64
	if err := viaPF.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&next); err != nil {
		t.Fatalf("the statement after the server closed the pooled connection: %v", err)
	}
	if next == id {
		t.Fatalf("still on the killed connection %d", id)
	}
}

func execPod(t *testing.T, kind dialerKind, pod, stdin string, cmd ...string) (string, string, error) {
	t.Helper()
	req := r.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "mariadb", Command: cmd, Stdin: stdin != "", Stdout: true, Stderr: true}, scheme.ParameterCodec)
	var ex remotecommand.Executor
	var err error
	if kind == websocketProto {
		ex, err = remotecommand.NewWebSocketExecutor(r.Config, http.MethodGet, req.URL().String())
	} else {
		ex, err = remotecommand.NewSPDYExecutor(r.Config, http.MethodPost, req.URL())
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}
	if stdin != "" {
		opts.Stdin = strings.NewReader(stdin)
	}
	err = ex.StreamWithContext(ctx, opts)
	return out.String(), errOut.String(), err
}

func TestExecThroughAPIServer(t *testing.T) {
	pods := mariadb(t)
	pod := pods[0].Name
	for _, kind := range []dialerKind{spdyProto, websocketProto} {
		t.Run(string(kind), func(t *testing.T) {
			// In the container: its hostname, its mounts, its environment.
			out, errOut, err := execPod(t, kind, pod, "", "sh", "-c", `hostname; test -d /var/lib/mysql/mysql && echo datadir; echo "$MARIADB_ROOT_PASSWORD" | wc -c; echo oops >&2; exit 3`)
			var exit utilexec.ExitError
			if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
				t.Fatalf("exit: %v (%T), want exit status 3", err, err)
			}
			if want := pod + "\ndatadir\n" + strconv.Itoa(len(password)+1) + "\n"; out != want {
				t.Errorf("stdout %q, want %q", out, want)
			}
			if errOut != "oops\n" {
				t.Errorf("stderr %q", errOut)
			}
			out, _, err = execPod(t, kind, pod, "through stdin\n", "cat")
			if err != nil || out != "through stdin\n" {
				t.Errorf("cat: %q %v", out, err)
			}
			// The image's client in the container reaches the server on its socket.
			out, _, err = execPod(t, kind, pod, "", "sh", "-c", `MYSQL_PWD="$MARIADB_ROOT_PASSWORD" mariadb --protocol=socket -uroot -N -B -e "SELECT @@hostname"`)
			if err != nil || strings.TrimSpace(out) != pod {
				t.Errorf("mariadb in the container: %q %v", out, err)
			}
		})
	}
}

func TestContainerLogsThroughAPIServer(t *testing.T) {
	pods := mariadb(t)
	pod := pods[len(pods)-1].Name
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := func(o *corev1.PodLogOptions) (string, error) {
		o.Container = "mariadb"
		b, err := r.Client.CoreV1().Pods(ns).GetLogs(pod, o).DoRaw(ctx)
		return string(b), err
	}
	all, err := logs(&corev1.PodLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all, "ready for connections") {
		t.Fatalf("the server's log lacks its start:\n%s", all)
	}
	if strings.Contains(all, "---- rig:") {
		t.Errorf("the agent's start markers leak into the log:\n%s", all)
	}
	tail, err := logs(&corev1.PodLogOptions{TailLines: ptr.To(int64(2))})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(tail, "\n"); n != 2 || !strings.HasSuffix(all, tail) {
		t.Errorf("tailLines=2 gave %d lines %q, not the end of the log", n, tail)
	}

	// A follow stream ends when its container does; previous then serves that instance.
	stream, err := r.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "mariadb", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	followed := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stream); followed <- string(b) }()
	before := restarts(podAfter(t, ctx, pod, func(*corev1.Pod) bool { return true }))
	r.Kill(t, ns, pod)
	var got string
	select {
	case got = <-followed:
	case <-ctx.Done():
		t.Fatal("the follow stream did not end when the container was killed")
	}
	if !strings.Contains(got, "ready for connections") {
		t.Errorf("the follow stream lacks the instance's output:\n%s", got)
	}
	podAfter(t, ctx, pod, func(p *corev1.Pod) bool { return restarts(p) > before && rig.IsReady(p) })
	prev, err := logs(&corev1.PodLogOptions{Previous: true})
	if err != nil {
		t.Fatal(err)
	}
	if prev != got && !strings.HasPrefix(prev, got) {
		t.Errorf("previous=true is not what the follow stream saw:\nprevious %q\nfollowed %q", prev, got)
	}
	cur, err := logs(&corev1.PodLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur == prev || !strings.Contains(cur, "ready for connections") {
		t.Errorf("the current log is not the new instance's:\n%s", cur)
	}
}

// kubectl's own port-forward, exec and logs work on the rig as on a real cluster.
func TestKubectlStreamingCommands(t *testing.T) {
	pods := mariadb(t)
	pod := pods[0].Name
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(ctx context.Context, args ...string) *osexec.Cmd {
		return osexec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", r.Kubeconfig, "-n", ns}, args...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := kubectl(ctx, "exec", pod, "-c", "mariadb", "--", "hostname").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != pod {
		t.Errorf("kubectl exec: %q %v", out, err)
	}
	out, err = kubectl(ctx, "logs", pod, "-c", "mariadb", "--tail=50").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mariadbd") {
		t.Errorf("kubectl logs: %q %v", out, err)
	}
	pf := kubectl(ctx, "port-forward", "--address=127.0.0.1", "pod/"+pod, ":3306")
	stdout, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	pf.Stderr = &stderr
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	// "Forwarding from 127.0.0.1:NNNNN -> 3306"
	line := make([]byte, 256)
	n, _ := stdout.Read(line)
	var local int
	if _, err := fmt.Sscanf(string(line[:n]), "Forwarding from 127.0.0.1:%d -> 3306", &local); err != nil {
		t.Fatalf("kubectl port-forward printed %q (%v), stderr %q", line[:n], err, stderr.String())
	}
	db := open(t, "127.0.0.1:"+strconv.Itoa(local))
	var host string
	if err := db.QueryRowContext(ctx, "SELECT @@hostname").Scan(&host); err != nil || host != pod {
		t.Errorf("through kubectl port-forward: %q %v (stderr %q)", host, err, stderr.String())
	}
}

// The node is reached at its InternalIP with the certificate the control plane's kubelet CA
// signed, and serves only clients that CA signed, as a kubelet with --client-ca-file does.
func TestKubeletAPIChecksBothSides(t *testing.T) {
	mariadb(t)
	node, err := r.Client.CoreV1().Nodes().Get(context.Background(), r.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		t.Fatal("the Node does not publish its kubelet port")
	}
	var internal string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = a.Address
		}
	}
	if internal != r.NodeIP {
		t.Fatalf("InternalIP %q, want the node's loopback address %s", internal, r.NodeIP)
	}
	addr := net.JoinHostPort(internal, strconv.Itoa(int(port)))
	ca := r.KubeletCA()
	// A client without a certificate of the kubelet CA is refused.
	other, err := testenv.NewCA("someone-else")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.IssueClient("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's certificate": {stranger}} {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs, MinVersion: tls.VersionTLS12}}}
		resp, err := c.Get("https://" + addr + "/containerLogs/" + ns + "/" + "mariadb-0" + "/mariadb")
		if err == nil {
			_ = resp.Body.Close()
			t.Errorf("%s: the node answered %s", name, resp.Status)
		}
	}
	// The API server's own client certificate is served (the node's certificate verifies against
	// the kubelet CA for its IP, or this client would fail).
	client, err := ca.IssueClient("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get("https://" + addr + "/containerLogs/" + ns + "/mariadb-0/mariadb?tailLines=1")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the API server's client: %s", resp.Status)
	}
}

// `kubectl logs job/NAME`, which a failed copy's message suggests, shows the output of a Job's
// failed pod (the seed Job runs from the cluster's image; its pod stays, Failed, for its logs).
func TestKubectlLogsOfFailedJob(t *testing.T) {
	mariadb(t) // the namespace and a node running pods
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	backoff := int32(0)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "fails", Namespace: ns},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "seed", Image: "mariadb:10.11", Command: []string{"bash", "-c", "echo 'mysqlctl seed: the copy failed here' >&2; exit 1"}}},
		}}},
	}
	if _, err := r.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = r.Client.BatchV1().Jobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}()
	for {
		got, err := r.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(got.Status.Conditions, func(c batchv1.JobCondition) bool {
			return c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue
		}) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the Job did not fail: %+v\n%s", got.Status, describe(t))
		case <-time.After(200 * time.Millisecond):
		}
	}
	out, err := osexec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", r.Kubeconfig, "-n", ns, "logs", "job/"+job.Name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "the copy failed here") {
		t.Fatalf("kubectl logs job/%s: %q %v", job.Name, out, err)
	}
}

// TestTerminationMessages: each container's termination message is its own file at its
// terminationMessagePath, reported when it exits; with FallbackToLogsOnError a failed container
// that wrote none reports its log's tail, as the kubelet does.
func TestTerminationMessages(t *testing.T) {
	mariadb(t) // the namespace and a node running pods
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := func(name, script string) corev1.Container {
		return corev1.Container{Name: name, Image: "mariadb:10.11", Command: []string{"bash", "-c", script}}
	}
	fallback := sh("fails", "echo 'the tail of the log'; exit 3")
	fallback.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	custom := sh("custom", "echo -n at-its-path > /dev/mysqlctl-result")
	custom.TerminationMessagePath = "/dev/mysqlctl-result"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "messages", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			Volumes:        []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers: []corev1.Container{sh("init", "echo -n from-init > /dev/termination-log")},
			Containers: []corev1.Container{
				// An emptyDir is world-writable whatever the umask, as the kubelet makes it.
				withScratch(sh("result", `[ "$(stat -c %a /scratch)" = 777 ] || exit 9; sleep 0.5; echo -n '{"result":1}' > /dev/termination-log`)),
				fallback, custom,
			},
		},
	}
	if _, err := r.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Client.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) }()
	p := podAfter(t, ctx, pod.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	want := map[string]string{"init": "from-init", "result": `{"result":1}`, "fails": "the tail of the log", "custom": "at-its-path"}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		term := cs.State.Terminated
		if term == nil {
			t.Errorf("container %s has not terminated: %+v", cs.Name, cs.State)
			continue
		}
		if term.Message != want[cs.Name] {
			t.Errorf("container %s: termination message %q, want %q", cs.Name, term.Message, want[cs.Name])
		}
	}
}

func withScratch(c corev1.Container) corev1.Container {
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: "/scratch"})
	return c
}
