package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"                 //nolint:staticcheck // the types client-go's SPDY upgrader uses
	spdystream "k8s.io/apimachinery/pkg/util/httpstream/spdy" //nolint:staticcheck // as above
	"k8s.io/client-go/rest"
)

// freeLoopbackAddr returns a loopback address on which nothing listens.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	for {
		host := fmt.Sprintf("127.%d.%d.%d", 64+rand.IntN(187), rand.IntN(256), 1+rand.IntN(254))
		l, err := net.Listen("tcp", host+":3306")
		if err != nil {
			continue
		}
		_ = l.Close()
		return host
	}
}

// silentListener accepts TCP connections and never answers, like a frozen
// server or a black-holed network path.
func silentListener(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", freeLoopbackAddr(t)+":3306")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	host, _, _ := net.SplitHostPort(l.Addr().String())
	return host
}

func assertNoSecret(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s contains a secret: %q", what, text)
		}
	}
	if strings.Contains(text, "@tcp(") {
		t.Errorf("%s contains a DSN: %q", what, text)
	}
}

// chainText concatenates the messages of err and everything it wraps, so a
// secret hidden in a wrapped cause is found too.
func chainText(err error) string {
	var b strings.Builder
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		b.WriteString(e.Error() + "\n" + fmt.Sprintf("%+v %#v", e, e) + "\n")
		switch x := e.(type) { //nolint:errorlint // walks the error tree itself, node by node
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return b.String()
}

func TestLiveErrorKindsWithoutSecrets(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	const wrong = "wrong-Pa55-Zq9x"
	tests := []struct {
		name   string
		target Target
		creds  Credentials
		kind   ErrorKind
		text   string
	}{
		{"refused", Target{Name: "ghost", Host: freeLoopbackAddr(t)}, orch, ErrorRefused, "connection refused"},
		{"auth", target(c.P), Credentials{User: "root", Password: wrong}, ErrorAuth, "Access denied for user 'root'"},
		{"timeout", Target{Name: "frozen", Host: silentListener(t)}, orch, ErrorTimeout, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			inst, err := Connect(tt.target, ConnectOptions{
				Dialer: DirectDialer{}, Credentials: tt.creds, ConnectTimeout: 700 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			must(t, err)
			defer inst.Close()
			s := inst.Observe(ctx, ObserveOptions{Timeout: time.Second})
			if s.Reachable || s.Err == nil || s.Err.Kind != tt.kind || s.Err.Stage != "connect" || !strings.Contains(s.Err.Message, tt.text) {
				t.Fatalf("snapshot error %+v", s.Err)
			}
			cl := Classify(ClassifyInput{Instance: s})
			if cl.Class != ClassUnreachable || !containsLine(cl.Evidence, "("+string(tt.kind)+")") {
				t.Errorf("classified %v %v", cl.Class, cl.Evidence)
			}
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			err = inst.Fence(actx)
			if err == nil || KindOf(err) != tt.kind {
				t.Fatalf("action error %v (kind %q)", err, KindOf(err))
			}
			var oe *OpError
			if !errors.As(err, &oe) || oe.Instance != tt.target.Name {
				t.Errorf("action error does not name the instance: %v", err)
			}
			secrets := []string{string(tt.creds.Password), string(orch.Password), "orch-Secret"}
			assertNoSecret(t, "observation error", fmt.Sprintf("%v %+v %#v", s.Err, s.Err, s), secrets...)
			assertNoSecret(t, "action error", chainText(err), secrets...)
			assertNoSecret(t, "driver log", logs.String(), secrets...)
		})
	}
}

// TestLiveServerEchoIsRedacted makes the server quote a statement that
// carries a password (a syntax error echoes the text near the error) and
// checks that the returned error has it removed, wrapped chain included.
func TestLiveServerEchoIsRedacted(t *testing.T) {
	c := sharedCluster(t)
	const pw = "echo-Secret-91x"
	inst := c.inst["mariadb-0"]
	err := inst.exec(context.Background(), "probe", Stmt{SQL: "SELEC ?", Args: []any{Secret(pw)}})
	var se *SQLError
	if !errors.As(err, &se) || se.Number != 1064 {
		t.Fatalf("error %v", err)
	}
	if !strings.Contains(se.Message, "[redacted]") {
		t.Fatalf("the server did not echo the statement, so this test proves nothing: %q", se.Message)
	}
	assertNoSecret(t, "echoed error", chainText(err), pw)
	// The pool's own password is redacted as well.
	err = inst.exec(context.Background(), "probe", Stmt{SQL: "SELEC '" + string(orch.Password) + "'"})
	assertNoSecret(t, "echoed pool password", chainText(err), "orch-Secret")
}

func TestSecretNeverPrints(t *testing.T) {
	opts := ConnectOptions{Dialer: DirectDialer{}, Credentials: Credentials{User: "u", Password: "p4ss-Word-xyz"}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("connecting", "opts", opts, "creds", opts.Credentials, "pw", opts.Credentials.Password)
	js, err := json.Marshal(opts.Credentials)
	must(t, err)
	for _, text := range []string{
		fmt.Sprintf("%v %+v %#v %s %q %x %X %10s", opts, opts, opts, opts.Credentials.Password, opts.Credentials.Password,
			opts.Credentials.Password, opts.Credentials.Password, opts.Credentials.Password),
		fmt.Sprint(opts.Credentials), logs.String(), string(js),
		Stmt{SQL: "X ?", Args: []any{opts.Credentials.Password}}.String(),
	} {
		if strings.Contains(text, "p4ss") || !strings.Contains(text, "[redacted]") {
			t.Errorf("printed %q", text)
		}
	}
	if v, err := opts.Credentials.Password.Value(); err != nil || v != "p4ss-Word-xyz" {
		t.Errorf("the driver must still receive the value: %v %v", v, err)
	}
}

func TestStaticDialer(t *testing.T) {
	c := sharedCluster(t)
	d := StaticDialer{Addrs: map[string]string{"primary": c.P.Addr(), "db/mariadb-1": c.R1.Addr()}}
	for _, tgt := range []Target{{Name: "primary"}, {Name: "other-name", Namespace: "db", Pod: "mariadb-1"}} {
		inst, err := Connect(tgt, ConnectOptions{Dialer: d, Credentials: orch})
		must(t, err)
		s := inst.Observe(context.Background(), ObserveOptions{})
		_ = inst.Close()
		if !s.Complete() {
			t.Fatalf("%s: %+v", tgt.Name, s.Err)
		}
	}
	_, err := d.DialContext(context.Background(), Target{Name: "unknown"})
	if err == nil || KindOf(err) != ErrorOther || !strings.Contains(err.Error(), "no static address") {
		t.Fatalf("unknown name: %v", err)
	}
	if _, err := (DirectDialer{}).DialContext(context.Background(), Target{Name: "x"}); err == nil {
		t.Fatal("direct dial without a host")
	}
	if _, err := Open(Target{Name: "x"}, ConnectOptions{}); err == nil {
		t.Fatal("Open without a dialer")
	}
}

// fakeAPIServer implements just enough of the API server's
// pods/{name}/portforward subresource (the SPDY protocol kubectl and the
// kubelet speak) to forward streams to real mariadbd listeners. WebSocket
// upgrade requests are refused, as an API server older than 1.30 would, so
// the dialer's fallback is exercised too.
type fakeAPIServer struct {
	srv       *httptest.Server
	pods      map[string]string // namespace/name → host:port
	wsTries   atomic.Int32
	upgrades  atomic.Int32
	forwarded atomic.Int32
}

func newFakeAPIServer(t *testing.T, pods map[string]string) *fakeAPIServer {
	f := &fakeAPIServer{pods: pods}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/namespaces/{ns}/pods/{pod}/portforward", f.portForward)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPIServer) config() *rest.Config { return &rest.Config{Host: f.srv.URL} }

func (f *fakeAPIServer) portForward(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		f.wsTries.Add(1)
		http.Error(w, "websocket port forwarding not supported here", http.StatusBadRequest)
		return
	}
	addr, ok := f.pods[r.PathValue("ns")+"/"+r.PathValue("pod")]
	if !ok {
		http.Error(w, `pods "`+r.PathValue("pod")+`" not found`, http.StatusNotFound)
		return
	}
	f.upgrades.Add(1)
	streams := make(chan httpstream.Stream, 16)
	w.Header().Set(httpstream.HeaderProtocolVersion, "portforward.k8s.io")
	conn := spdystream.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	type pair struct{ data, errs httpstream.Stream }
	pending := map[string]*pair{}
	for {
		select {
		case s := <-streams:
			id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
			p := pending[id]
			if p == nil {
				p = &pair{}
				pending[id] = p
			}
			if s.Headers().Get(corev1.StreamType) == corev1.StreamTypeError {
				p.errs = s
			} else {
				p.data = s
			}
			if p.data != nil && p.errs != nil {
				delete(pending, id)
				go f.forward(p.data, p.errs, addr, s.Headers().Get(corev1.PortHeader))
			}
		case <-conn.CloseChan():
			return
		}
	}
}

// forward mirrors the kubelet: dial the port inside the "pod", report a
// failure on the error stream, otherwise copy both ways.
func (f *fakeAPIServer) forward(data, errs httpstream.Stream, addr, port string) {
	defer errs.Close()
	defer data.Close()
	host, _, _ := net.SplitHostPort(addr)
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second)
	if err != nil {
		fmt.Fprintf(errs, "error forwarding port %s to pod: failed to connect to localhost:%s inside namespace: %v", port, port, err)
		return
	}
	defer c.Close()
	f.forwarded.Add(1)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, data)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(data, c)
	_ = data.Reset()
	<-done
}

func TestLivePortForward(t *testing.T) {
	c := sharedCluster(t)
	api := newFakeAPIServer(t, map[string]string{
		"db/mariadb-0": c.P.Addr(), "db/mariadb-1": c.R1.Addr(), "db/mariadb-2": c.R2.Addr(),
		"db/stopped": freeLoopbackAddr(t) + ":3306",
	})
	d, err := NewPortForwardDialer(api.config(), PortForwardOptions{DialTimeout: 5 * time.Second})
	must(t, err)
	defer d.Close()
	ctx := context.Background()

	var targets []ObserveTarget
	for _, name := range []string{"mariadb-0", "mariadb-1", "mariadb-2"} {
		inst, err := Connect(Target{Name: name, Namespace: "db", Pod: name}, ConnectOptions{Dialer: d, Credentials: orch})
		must(t, err)
		defer inst.Close()
		targets = append(targets, ObserveTarget{Name: name, DB: inst.DB()})
	}
	for round := range 3 {
		snaps := ObserveAll(ctx, targets, ObserveOptions{Timeout: 10 * time.Second})
		for i, s := range snaps {
			if !s.Complete() || s.ServerID != c.servers[targets[i].Name].ServerID {
				t.Fatalf("round %d %s through port-forward: %+v", round, s.Name, s.Err)
			}
		}
		if round == 0 {
			p := snaps[0]
			for _, s := range snaps[1:] {
				if cl := Classify(ClassifyInput{Instance: s, ExpectedPrimary: "mariadb-0", Primary: &p}); cl.Class != ClassReplicating {
					t.Errorf("%s through port-forward: %v", s.Name, cl.Findings)
				}
			}
		}
	}
	// One tunnel per pod, reused by every connection; the WebSocket attempt
	// fell back to SPDY.
	if got := api.upgrades.Load(); got != 3 {
		t.Errorf("%d SPDY tunnels for 3 pods", got)
	}
	if api.wsTries.Load() < 3 || api.forwarded.Load() < 3 {
		t.Errorf("websocket tries %d, forwarded streams %d", api.wsTries.Load(), api.forwarded.Load())
	}

	// Nothing listens inside the pod: refused, with the kubelet's words.
	dead, err := Connect(Target{Name: "stopped", Namespace: "db", Pod: "stopped"}, ConnectOptions{Dialer: d, Credentials: orch})
	must(t, err)
	defer dead.Close()
	s := dead.Observe(ctx, ObserveOptions{Timeout: 5 * time.Second})
	if s.Reachable || s.Err.Kind != ErrorRefused || !strings.Contains(s.Err.Message, "connection refused") {
		t.Fatalf("refused inside the pod: %+v", s.Err)
	}
	// No such pod: the API server refuses the upgrade.
	gone, err := Connect(Target{Name: "gone", Namespace: "db", Pod: "gone"}, ConnectOptions{Dialer: d, Credentials: orch})
	must(t, err)
	defer gone.Close()
	s = gone.Observe(ctx, ObserveOptions{Timeout: 5 * time.Second})
	if s.Reachable || s.Err.Kind != ErrorOther {
		t.Fatalf("unknown pod: %+v", s.Err)
	}
	assertNoSecret(t, "port-forward error", s.Err.Message, string(orch.Password))

	// SPDY only: no WebSocket attempt at all.
	before := api.wsTries.Load()
	spdyOnly, err := NewPortForwardDialer(api.config(), PortForwardOptions{SPDYOnly: true})
	must(t, err)
	defer spdyOnly.Close()
	inst, err := Connect(Target{Name: "mariadb-1", Namespace: "db", Pod: "mariadb-1"}, ConnectOptions{Dialer: spdyOnly, Credentials: orch})
	must(t, err)
	defer inst.Close()
	if s := inst.Observe(ctx, ObserveOptions{}); !s.Complete() {
		t.Fatalf("SPDY only: %+v", s.Err)
	}
	if api.wsTries.Load() != before {
		t.Error("SPDYOnly still tried WebSocket")
	}
	// An action through the tunnel, too. (The shared replicas are read-only;
	// whether the fence counts as verified depends on the test servers' root
	// sessions, which hold READ_ONLY ADMIN, so only the read-back is checked.)
	st, err := inst.VerifyFence(ctx)
	if err != nil || !st.ReadOnly {
		t.Fatalf("verify fence through port-forward: %+v %v", st, err)
	}

	// Closing the dialer ends the tunnels; the next dial opens a new one.
	must(t, d.Close())
	if s := ObserveAll(ctx, targets[:1], ObserveOptions{Timeout: 10 * time.Second})[0]; !s.Complete() {
		t.Fatalf("after closing the tunnels: %+v", s.Err)
	}

	if _, err := NewPortForwardDialer(nil, PortForwardOptions{}); err == nil {
		t.Error("nil config accepted")
	}
	if _, err := d.DialContext(ctx, Target{Name: "no-pod"}); err == nil {
		t.Error("dial without namespace and pod accepted")
	}
}

func TestPortForwardTimeout(t *testing.T) {
	// An "API server" that accepts TCP and never answers: dialing the tunnel
	// must end at the deadline with a timeout, not hang.
	host := silentListener(t)
	d, err := NewPortForwardDialer(&rest.Config{Host: "http://" + host + ":3306"}, PortForwardOptions{DialTimeout: 500 * time.Millisecond, SPDYOnly: true})
	must(t, err)
	defer d.Close()
	_, err = d.DialContext(context.Background(), Target{Name: "p", Namespace: "db", Pod: "p"})
	if err == nil || KindOf(err) != ErrorTimeout {
		t.Fatalf("error %v kind %q", err, KindOf(err))
	}
}
