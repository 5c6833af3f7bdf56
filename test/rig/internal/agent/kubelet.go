package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// KubeletPort is the port of the node's streaming server, the kubelet's default.
const KubeletPort = 10250

// The kubelet's streaming timeouts (its --streaming-connection-idle-timeout default is 4 h; a rig
// lives for a test run, so a shorter idle bound keeps abandoned tunnels from piling up).
const (
	streamIdleTimeout     = 30 * time.Minute
	streamCreationTimeout = 30 * time.Second
)

// serveKubelet starts the node's share of the kubelet API that the API server proxies to:
// port-forward, exec and container logs, on the node's address and KubeletPort, over TLS with the
// configuration tlsConfig returns (a serving certificate for the node's address, and the client CA
// that the API server's kubelet client certificate must chain to). The protocols are Kubernetes'
// own server side (k8s.io/cri-streaming), as a CRI runtime's streaming server uses: SPDY, and
// WebSocket for clients that speak it to a node directly; the API server tunnels its WebSocket
// clients to nodes over SPDY.
func (a *Agent) serveKubelet(tlsConfig *tls.Config) (stop func(), err error) {
	tlsConfig = tlsConfig.Clone()
	// Upgrades (SPDY, WebSocket) need HTTP/1.1.
	tlsConfig.NextProtos = []string{"http/1.1"}
	ln, err := tls.Listen("tcp", net.JoinHostPort(a.nodeIP, strconv.Itoa(KubeletPort)), tlsConfig)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/portForward/{namespace}/{pod}", a.handlePortForward)
	mux.HandleFunc("/portForward/{namespace}/{pod}/{uid}", a.handlePortForward)
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", a.handleExec)
	mux.HandleFunc("/exec/{namespace}/{pod}/{uid}/{container}", a.handleExec)
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.handleContainerLogs)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, pattern := mux.Handler(r); pattern == "" {
				a.logf("kubelet API: no handler for %s %s", r.Method, r.URL.Path)
			}
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		// Refused handshakes (a client without the CA's certificate) go to the rig's log.
		ErrorLog:    log.New(logWriter{a}, "kubelet API: ", 0),
		BaseContext: func(net.Listener) context.Context { return a.ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logf("kubelet API: %v", err)
		}
	}()
	a.logf("kubelet API (port-forward, exec, containerLogs) on https://%s", ln.Addr())
	return func() {
		// Close, not Shutdown: hijacked streaming connections are not the server's to wait for;
		// they end with the agent's context.
		_ = srv.Close()
		<-done
	}, nil
}

// logWriter passes what a standard logger writes to the agent's log.
type logWriter struct{ a *Agent }

func (w logWriter) Write(p []byte) (int, error) {
	w.a.logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// requestWorker finds the pod a kubelet API request names; a UID in the path must match.
func (a *Agent) requestWorker(w http.ResponseWriter, r *http.Request) (*podWorker, bool) {
	pw, err := a.worker(r.PathValue("namespace"), r.PathValue("pod"))
	if err == nil && r.PathValue("uid") != "" && string(pw.uid) != r.PathValue("uid") {
		err = fmt.Errorf("pod %s/%s has another UID than %s", pw.namespace, pw.name, r.PathValue("uid"))
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return nil, false
	}
	return pw, true
}

func (a *Agent) handlePortForward(w http.ResponseWriter, r *http.Request) {
	pw, ok := a.requestWorker(w, r)
	if !ok {
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, podForwarder{pw}, pw.key, string(pw.uid), opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// podForwarder connects port-forward streams to a pod's ports.
type podForwarder struct{ w *podWorker }

var _ portforward.PortForwarder = podForwarder{}

// PortForward copies between the stream and a connection to the pod's address and port, made from
// the node's address, as a kubelet connects inside the pod's network namespace: a network cut of
// the pod (which spares its node's address) leaves the path open, a frozen server holds it, and a
// port nothing listens on is refused.
func (f podForwarder) PortForward(ctx context.Context, _ string, _ string, port int32, stream io.ReadWriteCloser) error {
	defer func() { _ = stream.Close() }()
	// The tunnel was made for this pod instance: once it is gone (deleted, or recreated under
	// its name with another UID), its streams fail, as a kubelet's do when the sandbox is gone.
	if cur, err := f.w.a.worker(f.w.namespace, f.w.name); err != nil || cur != f.w {
		return fmt.Errorf("pod %s (uid %s) no longer runs on this node: its sandbox is gone", f.w.key, f.w.uid)
	}
	ip := f.w.podIP()
	if ip == "" {
		return fmt.Errorf("pod %s has no address yet", f.w.key)
	}
	conn, err := f.w.dialer(5*time.Second).DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside namespace of pod %s: %w", port, f.w.key, err)
	}
	defer func() { _ = conn.Close() }()
	fromPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(stream, conn)
		fromPod <- err
	}()
	toPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stream)
		// The client closed its side: pass the half-close on, and let the server finish.
		_ = conn.(*net.TCPConn).CloseWrite()
		toPod <- err
	}()
	select {
	case err = <-fromPod:
	case err = <-toPod:
		if err == nil {
			select {
			case err = <-fromPod:
			case <-ctx.Done():
			case <-f.w.goneCh:
			}
		}
	case <-ctx.Done():
	case <-f.w.goneCh:
		err = fmt.Errorf("pod %s is gone", f.w.key)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("forwarding port %d of pod %s: %w", port, f.w.key, err)
	}
	return nil
}

func (a *Agent) handleExec(w http.ResponseWriter, r *http.Request) {
	pw, ok := a.requestWorker(w, r)
	if !ok {
		return
	}
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "no command given", http.StatusBadRequest)
		return
	}
	container := r.PathValue("container")
	if pw.container(container) == nil {
		http.Error(w, fmt.Sprintf("container %q not found in pod %s", container, pw.key), http.StatusNotFound)
		return
	}
	remotecommand.ServeExec(w, r, containerExecutor{pw}, pw.key, string(pw.uid), container, cmd, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// containerExecutor runs commands in a pod's running containers.
type containerExecutor struct{ w *podWorker }

var _ remotecommand.Executor = containerExecutor{}

// ExecInContainer runs cmd in the container's namespaces and cgroup with its environment and
// working directory. The rig allocates no terminal: with tty the command's output is one stream,
// and resize events are ignored.
func (e containerExecutor) ExecInContainer(ctx context.Context, _ string, _ string, container string, cmd []string,
	in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, timeout time.Duration,
) error {
	if resize != nil {
		go func() {
			for range resize { //nolint:revive // drained: the rig has no terminal to resize
			}
		}()
	}
	e.w.mu.Lock()
	c := e.w.container(container)
	var pid int
	var env []string
	var wd string
	if c != nil && c.running && c.proc != nil {
		pid, env, wd = c.proc.pid, c.env, c.workDir
	}
	cg := e.w.cgroup
	e.w.mu.Unlock()
	if pid == 0 {
		return fmt.Errorf("container %q of pod %s is not running", container, e.w.key)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// A nil io.WriteCloser converts to a nil io.Writer: the stream was not asked for.
	stdout, stderr := io.Writer(out), io.Writer(errOut)
	if tty && stderr == nil {
		stderr = stdout
	}
	code, err := execStreams(ctx, pid, cg, cmd, env, wd, in, stdout, stderr)
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// handleContainerLogs serves a container's output as the kubelet does: the current (or, with
// previous=true, the last terminated) instance, optionally its last tailLines lines or limitBytes
// bytes, and with follow=true what it writes until it exits.
func (a *Agent) handleContainerLogs(w http.ResponseWriter, r *http.Request) {
	pw, ok := a.requestWorker(w, r)
	if !ok {
		return
	}
	name := r.PathValue("container")
	q := r.URL.Query()
	pw.mu.Lock()
	c := pw.container(name)
	var instance int
	var running bool
	if c != nil {
		instance, running = c.instance, c.running
	}
	pw.mu.Unlock()
	if c == nil {
		http.Error(w, fmt.Sprintf("container %q in pod %q is not available", name, pw.name), http.StatusBadRequest)
		return
	}
	previous := q.Get("previous") == "true"
	if previous {
		instance--
		running = false
	}
	if instance < 1 {
		msg := fmt.Sprintf("container %q in pod %q is waiting to start", name, pw.name)
		if previous {
			msg = fmt.Sprintf("previous terminated container %q in pod %q not found", name, pw.name)
		}
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	path := filepath.Join(pw.dir, "logs", name+".log")
	data, err := os.ReadFile(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body, end := instanceLog(data, instance)
	body = tailLog(body, q.Get("tailLines"), q.Get("limitBytes"))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(body)
	if q.Get("follow") != "true" || !running || end >= 0 {
		return
	}
	a.followLog(r.Context(), w, pw, c, instance, path, int64(len(data)))
}

// followLog streams what the container instance appends to its log from offset on, until the
// instance ends or the client goes.
func (a *Agent) followLog(ctx context.Context, w http.ResponseWriter, pw *podWorker, c *ctr, instance int, path string, offset int64) {
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		if _, err := f.Seek(offset, io.SeekStart); err == nil {
			data, _ := io.ReadAll(f)
			offset += int64(len(data))
			if i := bytes.Index(data, []byte(startMarker)); i >= 0 {
				data = data[:i] // the next instance's output is not this one's
			}
			if len(data) > 0 {
				_, _ = w.Write(data)
				if flusher != nil {
					flusher.Flush()
				}
			}
		}
		_ = f.Close()
		pw.mu.Lock()
		same := c.instance == instance && c.running
		pw.mu.Unlock()
		if !same {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-pw.goneCh:
			return
		case <-tick.C:
		}
	}
}

// startMarker begins the line the agent writes into a container's log at each start.
const startMarker = "---- rig: start #"

// instanceLog returns the output of the instance-th start (1-based) from a log holding every start,
// without the agent's marker lines, and the offset where the next start begins (-1: none yet).
func instanceLog(data []byte, instance int) ([]byte, int) {
	var out []byte
	n, end := 0, -1
	offset := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	sc.Split(scanLinesKeepEnd)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(startMarker)) {
			n++
			if n == instance+1 {
				end = offset
				break
			}
		} else if n == instance {
			out = append(out, line...)
		}
		offset += len(line)
	}
	return out, end
}

// scanLinesKeepEnd splits after each newline and keeps it, so that output is passed on unchanged.
func scanLinesKeepEnd(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// tailLog keeps the last tailLines lines and then at most limitBytes bytes (empty: no bound).
func tailLog(b []byte, tailLines, limitBytes string) []byte {
	if n, err := strconv.Atoi(tailLines); err == nil && n >= 0 {
		lines := bytes.SplitAfter(b, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		b = bytes.Join(lines, nil)
	}
	if n, err := strconv.Atoi(limitBytes); err == nil && n >= 0 && len(b) > n {
		b = b[:n]
	}
	return b
}
