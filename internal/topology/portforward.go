package topology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream" //nolint:staticcheck // client-go's portforward and spdy packages still take these types
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// PortForwardOptions tune a PortForwardDialer.
type PortForwardOptions struct {
	// DialTimeout bounds opening a tunnel to the API server and creating a
	// stream when the caller's context has no earlier deadline (default
	// 10s).
	DialTimeout time.Duration
	// IdleTimeout closes a pod's tunnel after this long without streams
	// (default 5m), so tunnels to deleted pods do not accumulate.
	IdleTimeout time.Duration
	// SPDYOnly skips the WebSocket attempt that kubectl makes first
	// (API servers before 1.30, or proxies that only pass SPDY).
	SPDYOnly bool
}

// PortForwardDialer reaches port 3306 of a pod through the API server's
// pods/portforward subresource, as `kubectl port-forward` does, but without
// a local listening socket: every MySQL connection is one data stream (plus
// its error stream) on a tunnel that is kept per pod and reused. It is the
// default out of cluster, where pod IPs are not routable.
type PortForwardDialer struct {
	config *rest.Config
	opts   PortForwardOptions

	mu      sync.Mutex
	tunnels map[string]*pfTunnel
	nextID  atomic.Int64
}

// pfTunnel is one pod's upgraded connection. closed is closed as soon as
// this package gives the tunnel up, before the connection's own CloseChan
// (which its reader goroutine closes later) and before writes queued by the
// SPDY framer fail, so that connections on it fail fast and cleanly.
type pfTunnel struct {
	httpstream.Connection
	closed chan struct{}
	once   sync.Once
}

func (t *pfTunnel) shut() {
	t.once.Do(func() {
		close(t.closed)
		_ = t.Close()
	})
}

func (t *pfTunnel) dead() bool {
	select {
	case <-t.closed:
		return true
	case <-t.CloseChan():
		return true
	default:
		return false
	}
}

var _ Dialer = (*PortForwardDialer)(nil)

// NewPortForwardDialer returns a dialer that tunnels through the API server
// described by config (which needs create on pods/portforward).
func NewPortForwardDialer(config *rest.Config, opts PortForwardOptions) (*PortForwardDialer, error) {
	if config == nil {
		return nil, errors.New("port-forward dialer needs a REST config")
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 5 * time.Minute
	}
	return &PortForwardDialer{config: rest.CopyConfig(config), opts: opts, tunnels: map[string]*pfTunnel{}}, nil
}

// Close closes every tunnel; connections using them fail.
func (d *PortForwardDialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, c := range d.tunnels {
		c.shut()
		delete(d.tunnels, k)
	}
	return nil
}

// DialContext implements Dialer. It returns once the MySQL server's greeting
// has arrived through the tunnel, so that a refused port inside the pod is
// reported here, with its kind, rather than as the driver's opaque
// "invalid connection".
func (d *PortForwardDialer) DialContext(ctx context.Context, t Target) (net.Conn, error) {
	if t.Namespace == "" || t.Pod == "" {
		return nil, &dialError{target: t.Name, kind: ErrorOther, err: errors.New("port forwarding needs the pod's namespace and name")}
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.DialTimeout)
	defer cancel()
	var lastErr error
	// A cached tunnel may have died since its last use; retry once on a
	// fresh one. A cached tunnel may also lead to an earlier pod of the same
	// name: the API server binds a tunnel to the pod it found when the tunnel
	// was made, and a kubelet forwards into that pod's sandbox, which is gone
	// once a StatefulSet recreates the pod (an upgrade, a rebuild, a deleted
	// pod). So a refusal on a cached tunnel is asked again on a fresh one;
	// only a fresh tunnel's refusal is the pod's answer. A refused connection
	// is not asked again: it came from a live sandbox whose port is closed
	// (the server is down or restarting), which is the pod's own answer, and
	// a failure detector checking a dead server must not pay a new tunnel
	// for every check.
	for attempt := 0; attempt < 2; attempt++ {
		tunnel, fresh, err := d.tunnel(ctx, t)
		if err != nil {
			return nil, newDialError(t, err)
		}
		c, err := d.open(ctx, tunnel, t)
		if err == nil {
			return c, nil
		}
		lastErr = err
		var remote *remoteForwardError
		if ctx.Err() != nil || errors.As(err, &remote) && (fresh || remote.ErrorKind() == ErrorRefused) {
			break
		}
		d.drop(t, tunnel)
	}
	return nil, newDialError(t, lastErr)
}

func tunnelKey(t Target) string { return t.Namespace + "/" + t.Pod }

func (d *PortForwardDialer) drop(t Target, c *pfTunnel) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tunnels[tunnelKey(t)] == c {
		delete(d.tunnels, tunnelKey(t))
	}
	c.shut()
}

// tunnel returns the pod's cached tunnel, or a new one (fresh).
func (d *PortForwardDialer) tunnel(ctx context.Context, t Target) (*pfTunnel, bool, error) {
	key := tunnelKey(t)
	d.mu.Lock()
	if c, ok := d.tunnels[key]; ok {
		if !c.dead() {
			d.mu.Unlock()
			return c, false, nil
		}
		delete(d.tunnels, key)
	}
	d.mu.Unlock()

	conn, err := d.dialTunnel(ctx, t)
	if err != nil {
		return nil, false, err
	}
	c := &pfTunnel{Connection: conn, closed: make(chan struct{})}
	d.mu.Lock()
	defer d.mu.Unlock()
	if existing, ok := d.tunnels[key]; ok && !existing.dead() {
		c.shut()
		return existing, false, nil
	}
	d.tunnels[key] = c
	return c, true, nil
}

// dialTunnel upgrades a request to pods/NAME/portforward: WebSocket first
// with a fall back to SPDY, as kubectl does since 1.30.
func (d *PortForwardDialer) dialTunnel(ctx context.Context, t Target) (httpstream.Connection, error) {
	cfg := rest.CopyConfig(d.config)
	cfg.APIPath = "/api"
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/namespaces/" + url.PathEscape(t.Namespace) + "/pods/" + url.PathEscape(t.Pod) + "/portforward"

	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	var dialer httpstream.Dialer = &spdyDialer{client: &http.Client{Transport: transport}, upgrader: upgrader, url: &u, target: t}
	if !d.opts.SPDYOnly {
		ws, err := portforward.NewSPDYOverWebsocketDialer(&u, cfg)
		if err != nil {
			return nil, err
		}
		// The WebSocket transport reports its failures with the
		// k8s.io/streaming error types (as kubectl port-forward checks);
		// the apimachinery ones are checked as well for older paths. Any
		// refused WebSocket upgrade falls back, a 403 included: before
		// Kubernetes 1.35 a WebSocket upgrade (GET) was authorized as the
		// verb get, SPDY's (POST) as create, which is what users grant.
		// Whether a refusal is configuration is decided from SPDY's answer.
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err) ||
				httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}

	// httpstream.Dialer has no context; run it aside and abandon (and
	// close) a tunnel that arrives after the deadline.
	type result struct {
		c   httpstream.Connection
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("port-forward to %s/%s: %w", t.Namespace, t.Pod, r.err)
		}
		r.c.SetIdleTimeout(d.opts.IdleTimeout)
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.c != nil {
				_ = r.c.Close()
			}
		}()
		return nil, fmt.Errorf("port-forward to %s/%s: %w", t.Namespace, t.Pod, ctx.Err())
	}
}

// spdyDialer upgrades a POST to pods/NAME/portforward to SPDY, as client-go's
// spdy.NewDialer does, but keeps what the API server answered a refused
// upgrade with: client-go reduces it to text ("unable to upgrade connection:
// …"), and the status code is what tells configuration from a transient
// failure (see upgradeRefused).
type spdyDialer struct {
	client   *http.Client
	upgrader spdy.Upgrader
	url      *url.URL
	target   Target
}

// Dial implements httpstream.Dialer.
func (d *spdyDialer) Dial(protocols ...string) (httpstream.Connection, string, error) {
	req, err := http.NewRequest(http.MethodPost, d.url.String(), nil)
	if err != nil {
		return nil, "", err
	}
	for _, p := range protocols {
		req.Header.Add(httpstream.HeaderProtocolVersion, p)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		// No answer (the API server is down, restarting, or unreachable):
		// transient, never configuration. Reported as client-go's
		// spdy.Negotiate reports it.
		return nil, "", fmt.Errorf("error sending request: %v", err) //nolint:errorlint // as client-go: the kind of this SPDY-only failure stays ErrorOther, as it was
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, "", upgradeRefused(d.target, resp.StatusCode, body)
	}
	conn, err := d.upgrader.NewConnection(resp)
	if err != nil {
		return nil, "", err
	}
	return conn, resp.Header.Get(httpstream.HeaderProtocolVersion), nil
}

// upgradeError is a refused upgrade that is not known to be configuration:
// a pod not found (it may be being recreated under the same name), one with
// no node yet, an API server that is starting or overloaded (429, 503), a
// node that does not answer (it may be down: that is what failover is for).
type upgradeError struct {
	status int
	msg    string
}

func (e *upgradeError) Error() string {
	return fmt.Sprintf("unable to upgrade connection (HTTP %d): %s", e.status, e.msg)
}

// upgradeRefused classifies the API server's non-101 answer to a port-forward
// upgrade, from its status code and body (a metav1.Status when the API
// server itself answered; plain text when it echoes the kubelet's answer or
// a proxy answered). Configuration, returned as a *ConfigError:
//
//   - 403 from the API server (a Status): RBAC (or an admission rule) forbids
//     create on pods/portforward; the API server checks it before anything
//     else, so it is the same for every pod of the namespace.
//   - 401 or 403 in plain text: the kubelet (or a proxy) refuses the API
//     server's credentials. A 401 Status is the API server refusing ours,
//     which an exec credential plugin renews on the next request: transient.
//   - 400 "Upgrade request required": a proxy dropped the upgrade headers.
//   - 5xx "error dialing backend" whose cause never changes by itself: the
//     node's name does not resolve ("no such host"), the kubelet's certificate
//     is not trusted or refuses the API server's ("certificate", "x509",
//     "tls: bad certificate"), it speaks another scheme; and "no preferred
//     addresses found" (the node reports no address the API server uses).
//
// Everything else is transient: a refused connection, a timeout or no route
// to the kubelet (the node may be down, which must count toward a failover),
// 404 (a pod being recreated), 429 and 503 (an API server starting or
// overloaded).
func upgradeRefused(t Target, status int, body []byte) error {
	msg, apiStatus := refusalText(body)
	where := t.Namespace + "/" + t.Pod
	lower := strings.ToLower(msg)
	cfg := func(fix string) error { return &ConfigError{Target: where, Status: status, Reason: msg, Fix: fix} }
	direct := "or run mysqlctl on the pod network (in the cluster) with --dialer direct"
	switch {
	case status == http.StatusForbidden && apiStatus:
		return cfg(fmt.Sprintf("grant the user mysqlctl runs as the verb create on pods/portforward in namespace %s (the Role that 'mysqlctl install --rbac' applies has it), %s", t.Namespace, direct))
	case (status == http.StatusForbidden || status == http.StatusUnauthorized) && !apiStatus:
		return cfg("the kubelet of the pod's node (or a proxy on the way) refuses the API server's credentials: allow the API server's kubelet client (its certificate, and create on nodes/proxy), " + direct)
	case status == http.StatusBadRequest && strings.Contains(lower, "upgrade request required"):
		return cfg("a proxy between mysqlctl and the pod drops the connection upgrade: let it pass the Upgrade and Connection headers (SPDY and WebSocket), " + direct)
	case status >= 500 && (strings.Contains(lower, "error dialing backend") && backendMisconfigured(lower) || strings.Contains(lower, "no preferred addresses found")):
		return cfg("the API server cannot reach the kubelet of the pod's node (it must resolve the node's address and trust the kubelet's certificate: --kubelet-preferred-address-types, --kubelet-certificate-authority), " + direct)
	}
	return &upgradeError{status: status, msg: msg}
}

// backendMisconfigured reports whether the cause of an "error dialing
// backend" (the API server dialing the kubelet) is one that stays until the
// configuration changes. A refused connection, a timeout, no route or a reset
// are not: they are what a node that is down looks like.
func backendMisconfigured(lower string) bool {
	for _, s := range []string{
		"no such host",         // the node's name does not resolve where the API server runs
		"x509:", "certificate", // the kubelet's certificate is not trusted, or ours is refused
		"server gave http response to https", // the kubelet speaks another scheme
		"first record does not look like a tls handshake",
	} {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return false
}

// refusalText is a refusal's body as one short line: the message of a
// metav1.Status (apiStatus true) or the text itself. Proxies answer with
// whole HTML pages; a line is enough to say who refused.
// credentialLike matches a credential's name and what follows it, in a refusal's text.
// An Authorization header's value runs to the end of its line (a scheme, then the credential).
var credentialLike = regexp.MustCompile(`(?i)(authorization)(\s*[=:]?\s*)[^\n]+|(bearer|token|password|secret)(\s*[=:]?\s*)[^\s,;"']+`)

func refusalText(body []byte) (string, bool) {
	var st struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	msg, apiStatus := string(body), false
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		msg, apiStatus = st.Message, true
	} else {
		// A kubelet's or a proxy's answer: its first line only (a proxy may echo the request,
		// headers included).
		msg, _, _ = strings.Cut(strings.TrimSpace(msg), "\n")
	}
	// The text goes into errors, Events and status: nothing that looks like a credential.
	msg = credentialLike.ReplaceAllString(msg, "${1}${2}${3}${4}[redacted]")
	msg = strings.Join(strings.Fields(msg), " ")
	if msg == "" {
		msg = "no message"
	}
	if r := []rune(msg); len(r) > 300 {
		msg = string(r[:300]) + "…"
	}
	return msg, apiStatus
}

// remoteForwardError is what the kubelet reported on the error stream, for
// instance that nothing listens on the port inside the pod.
type remoteForwardError struct{ msg string }

func (e *remoteForwardError) Error() string { return "port-forward: " + e.msg }

func (e *remoteForwardError) ErrorKind() ErrorKind {
	if strings.Contains(strings.ToLower(e.msg), "connection refused") {
		return ErrorRefused
	}
	return ErrorOther
}

func (d *PortForwardDialer) open(ctx context.Context, tunnel *pfTunnel, t Target) (net.Conn, error) {
	id := strconv.FormatInt(d.nextID.Add(1), 10)
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(t.port()))
	headers.Set(corev1.PortForwardRequestIDHeader, id)
	errStream, err := createStream(ctx, tunnel, headers)
	if err != nil {
		return nil, err
	}
	// Only the server writes on the error stream.
	_ = errStream.Close()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := createStream(ctx, tunnel, headers)
	if err != nil {
		tunnel.RemoveStreams(errStream)
		return nil, err
	}
	c := &streamConn{
		tunnel:  tunnel,
		data:    data,
		errs:    errStream,
		errDone: make(chan struct{}),
		local:   pfAddr("port-forward"),
		remote:  pfAddr(t.Namespace + "/" + t.Pod + ":" + strconv.Itoa(t.port())),
	}
	go c.watchErrors()
	if err := c.prefetch(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func createStream(ctx context.Context, tunnel httpstream.Connection, h http.Header) (httpstream.Stream, error) {
	type result struct {
		s   httpstream.Stream
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := tunnel.CreateStream(h.Clone())
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.s != nil {
				_ = r.s.Reset()
				tunnel.RemoveStreams(r.s)
			}
		}()
		return nil, ctx.Err()
	}
}

type pfAddr string

func (a pfAddr) Network() string { return "port-forward" }
func (a pfAddr) String() string  { return string(a) }

// streamConn is one port-forwarded connection as a net.Conn.
type streamConn struct {
	tunnel *pfTunnel
	data   httpstream.Stream
	errs   httpstream.Stream

	errDone   chan struct{} // closed once the error stream has ended
	remoteErr error         // set before errDone is closed

	buf []byte // bytes read by prefetch, served first

	local, remote net.Addr
	closeOnce     sync.Once

	readDL, writeDL deadline
}

// watchErrors reads the error stream to its end. A message means the
// forwarding failed; the data stream is reset so that a blocked Read
// returns and reports it.
func (c *streamConn) watchErrors() {
	msg, err := io.ReadAll(c.errs)
	switch {
	case len(msg) > 0:
		c.remoteErr = &remoteForwardError{msg: strings.TrimSpace(string(msg))}
		_ = c.data.Reset()
	case err != nil && !errors.Is(err, io.EOF):
		c.remoteErr = fmt.Errorf("port-forward error stream: %w", err)
	}
	close(c.errDone)
}

// prefetch waits for the server's first bytes (MySQL servers speak first)
// or for the forwarding to fail.
func (c *streamConn) prefetch(ctx context.Context) error {
	type result struct {
		n   int
		err error
	}
	b := make([]byte, 4096)
	done := make(chan result, 1)
	go func() {
		n, err := c.data.Read(b)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		if r.n > 0 {
			c.buf = b[:r.n]
			return nil
		}
		return c.readError(r.err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readError prefers the kubelet's explanation over a bare EOF.
func (c *streamConn) readError(err error) error {
	if c.readDL.expired() {
		return timeoutError{}
	}
	select {
	case <-c.errDone:
	case <-time.After(time.Second):
	}
	select {
	case <-c.errDone:
		if c.remoteErr != nil {
			return c.remoteErr
		}
	default:
	}
	if err == nil {
		err = io.EOF
	}
	return err
}

func (c *streamConn) Read(p []byte) (int, error) {
	if c.readDL.expired() {
		return 0, timeoutError{}
	}
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	n, err := c.data.Read(p)
	if err != nil && n == 0 {
		return 0, c.readError(err)
	}
	return n, nil
}

func (c *streamConn) Write(p []byte) (int, error) {
	if c.writeDL.expired() {
		return 0, timeoutError{}
	}
	// A dead tunnel may still accept bytes into a buffer. Failing here, with
	// nothing written, lets the driver report driver.ErrBadConn and
	// database/sql retry the statement on a fresh connection, instead of an
	// "invalid connection" surfacing from the read that follows.
	if c.tunnel.dead() {
		return 0, net.ErrClosed
	}
	// The node ends the error stream when it stops forwarding this connection:
	// the server closed it (a KILL, wait_timeout, a restart), or it failed.
	// Nothing written now can reach the server. Failing with nothing written
	// lets the driver report driver.ErrBadConn and database/sql retry on a new
	// connection, as it does for a pooled TCP connection the server closed
	// (which the driver detects on the socket before reuse; a stream gives it
	// no socket to check).
	select {
	case <-c.errDone:
		if c.remoteErr != nil {
			return 0, c.remoteErr
		}
		return 0, net.ErrClosed
	default:
	}
	n, err := c.data.Write(p)
	if err != nil && c.writeDL.expired() {
		return n, timeoutError{}
	}
	return n, err
}

func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		c.readDL.set(time.Time{}, nil)
		c.writeDL.set(time.Time{}, nil)
		_ = c.data.Close()
		_ = c.data.Reset()
		c.tunnel.RemoveStreams(c.data, c.errs)
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr  { return c.local }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

// Streams have no deadlines; an expired deadline resets the stream, which
// ends the connection (the driver discards a connection after any timeout
// anyway).
func (c *streamConn) SetDeadline(t time.Time) error {
	c.readDL.set(t, c.abort)
	c.writeDL.set(t, c.abort)
	return nil
}

func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.readDL.set(t, c.abort)
	return nil
}

func (c *streamConn) SetWriteDeadline(t time.Time) error {
	c.writeDL.set(t, c.abort)
	return nil
}

func (c *streamConn) abort() { _ = c.data.Reset() }

type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	passed bool
}

func (d *deadline) set(t time.Time, onExpire func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.passed = false
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		d.passed = true
		onExpire()
		return
	}
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		d.passed = true
		d.mu.Unlock()
		onExpire()
	})
}

func (d *deadline) expired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.passed
}

// timeoutError is what net.Conn reports for a passed deadline.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded || target == context.DeadlineExceeded
}
