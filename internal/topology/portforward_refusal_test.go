package topology

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// refusingAPIServer is a TLS "API server" whose pods/portforward answers every upgrade, the
// WebSocket attempt (GET) and the SPDY one (POST), with the same refusal, as a real one does
// for RBAC (the authorizer answers before the protocol matters) and for a node it cannot dial.
type refusingAPIServer struct {
	srv       *httptest.Server
	status    int
	body      string
	ws, posts atomic.Int32
}

func newRefusingAPIServer(t *testing.T, status int, body string) *refusingAPIServer {
	t.Helper()
	f := &refusingAPIServer{status: status, body: body}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/namespaces/{ns}/pods/{pod}/portforward", func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			f.ws.Add(1)
		} else {
			f.posts.Add(1)
		}
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// tlsConfigFor is a client configuration that trusts the test server's certificate, as a
// kubeconfig's certificate-authority-data does.
func tlsConfigFor(srv *httptest.Server) *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// apiStatus is the metav1.Status body the API server writes with an error.
func apiStatus(code int, reason, msg string) string {
	b, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	})
	return string(b)
}

// TestPortForwardRefusalClassified drives the real PortForwardDialer (WebSocket first, SPDY
// fallback) against API servers that refuse the upgrade: refusals that no retry changes come back
// as a *ConfigError (outcome.ErrConfig, kind ErrorConfig) with one line saying what to do; the
// failures a node that is down, a pod being recreated or an API server restarting produce do not.
func TestPortForwardRefusalClassified(t *testing.T) {
	rbac := `pods "demo-0" is forbidden: User "alice" cannot create resource "pods/portforward" in API group "" in the namespace "db"`
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		config   bool
		fix      string // in the ConfigError's Fix
		wantKind ErrorKind
	}{
		{name: "RBAC forbids create on pods/portforward", status: 403, body: apiStatus(403, "Forbidden", rbac),
			config: true, fix: "verb create on pods/portforward in namespace db"},
		{name: "node name does not resolve", status: 500,
			body:   apiStatus(500, "", "error dialing backend: dial tcp: lookup rig-node on 127.0.0.53:53: no such host"),
			config: true, fix: "--dialer direct"},
		{name: "kubelet certificate not trusted", status: 500,
			body:   apiStatus(500, "", "error dialing backend: tls: failed to verify certificate: x509: certificate signed by unknown authority"),
			config: true, fix: "cannot reach the kubelet"},
		{name: "kubelet refuses the API server", status: 403,
			body:   "Forbidden (user=kube-apiserver-kubelet-client, verb=create, resource=nodes, subresource=proxy)",
			config: true, fix: "refuses the API server's credentials"},
		{name: "proxy drops the upgrade", status: 400, body: apiStatus(400, "BadRequest", "Upgrade request required"),
			config: true, fix: "Upgrade and Connection headers"},
		{name: "node refuses connections (down, restarting)", status: 500,
			body: apiStatus(500, "", "error dialing backend: dial tcp 10.0.0.7:10250: connect: connection refused"), wantKind: ErrorOther},
		{name: "node does not answer", status: 500,
			body: apiStatus(500, "", "error dialing backend: dial tcp 10.0.0.7:10250: i/o timeout"), wantKind: ErrorOther},
		{name: "pod not found (recreated under its name)", status: 404,
			body: apiStatus(404, "NotFound", `pods "demo-0" not found`), wantKind: ErrorOther},
		{name: "API server starting", status: 503, body: "service unavailable", wantKind: ErrorOther},
		{name: "API server throttling", status: 429, body: apiStatus(429, "TooManyRequests", "too many requests"), wantKind: ErrorOther},
		{name: "our token expired (renewed on the next request)", status: 401, body: apiStatus(401, "Unauthorized", "Unauthorized"), wantKind: ErrorOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newRefusingAPIServer(t, tc.status, tc.body)
			d, err := NewPortForwardDialer(tlsConfigFor(api.srv), PortForwardOptions{DialTimeout: 5 * time.Second})
			must(t, err)
			defer d.Close()
			_, err = d.DialContext(context.Background(), Target{Name: "demo-0", Namespace: "db", Pod: "demo-0"})
			if err == nil {
				t.Fatal("dial succeeded")
			}
			if api.ws.Load() != 1 || api.posts.Load() != 1 {
				t.Errorf("%d WebSocket and %d SPDY attempts, want one of each (a refused WebSocket upgrade falls back)", api.ws.Load(), api.posts.Load())
			}
			ce := AsConfigError(err)
			if !tc.config {
				if ce != nil || errors.Is(err, outcome.ErrConfig) || KindOf(err) != tc.wantKind {
					t.Fatalf("a transient refusal classified as configuration (kind %s): %v", KindOf(err), err)
				}
				if !strings.Contains(err.Error(), "HTTP "+strconv.Itoa(tc.status)) {
					t.Errorf("the status is not reported: %v", err)
				}
				return
			}
			if ce == nil || !errors.Is(err, outcome.ErrConfig) || KindOf(err) != ErrorConfig {
				t.Fatalf("not a configuration error (kind %s): %v", KindOf(err), err)
			}
			if ce.Status != tc.status || ce.Target != "db/demo-0" || !strings.Contains(ce.Fix, tc.fix) {
				t.Errorf("status %d target %s fix %q, want %d db/demo-0 and %q", ce.Status, ce.Target, ce.Fix, tc.status, tc.fix)
			}
			if msg := ce.Error(); strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, "db/demo-0") {
				t.Errorf("message is not one line naming the pod: %q", msg)
			}
		})
	}

	t.Run("RBAC refusal through an observation", func(t *testing.T) {
		api := newRefusingAPIServer(t, 403, apiStatus(403, "Forbidden", rbac))
		d, err := NewPortForwardDialer(tlsConfigFor(api.srv), PortForwardOptions{})
		must(t, err)
		defer d.Close()
		inst, err := Connect(Target{Name: "demo-0", Namespace: "db", Pod: "demo-0"}, ConnectOptions{Dialer: d, Credentials: orch})
		must(t, err)
		defer inst.Close()
		s := inst.Observe(context.Background(), ObserveOptions{Timeout: 5 * time.Second, Secrets: []string{string(orch.Password)}})
		var ce *ConfigError
		if s.Reachable || s.Err == nil || s.Err.Kind != ErrorConfig || !errors.As(s.Err, &ce) || ce.Status != 403 {
			t.Fatalf("observation through a forbidden port-forward: %+v", s.Err)
		}
		assertNoSecret(t, "configuration error", s.Err.Error(), string(orch.Password))
	})

	t.Run("API server not listening", func(t *testing.T) {
		api := newRefusingAPIServer(t, 403, apiStatus(403, "Forbidden", rbac))
		cfg := tlsConfigFor(api.srv)
		api.srv.Close()
		d, err := NewPortForwardDialer(cfg, PortForwardOptions{})
		must(t, err)
		defer d.Close()
		_, err = d.DialContext(context.Background(), Target{Name: "demo-0", Namespace: "db", Pod: "demo-0"})
		if err == nil || AsConfigError(err) != nil || errors.Is(err, outcome.ErrConfig) || KindOf(err) == ErrorConfig {
			t.Fatalf("an API server that is down: kind %s: %v", KindOf(err), err)
		}
	})
}

// TestPortForwardUpgradeAccepted: a 101 is a tunnel, over TLS as from a kubeconfig. The API
// server answers the WebSocket attempt with a 403 and SPDY with 101, as one before Kubernetes
// 1.35 did for a user granted only create on pods/portforward: the fallback must not give up on
// the 403.
func TestPortForwardUpgradeAccepted(t *testing.T) {
	// A "server" inside the pod that speaks first, as MySQL does.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "greeting")
			_ = c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port

	f := &fakeAPIServer{pods: map[string]string{"db/demo-0": l.Addr().String()}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/namespaces/{ns}/pods/{pod}/portforward", func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			f.wsTries.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, apiStatus(403, "Forbidden", `pods "demo-0" is forbidden: User "alice" cannot get resource "pods/portforward" in API group "" in the namespace "db"`))
			return
		}
		f.portForward(w, r)
	})
	f.srv = httptest.NewTLSServer(mux)
	defer f.srv.Close()

	d, err := NewPortForwardDialer(tlsConfigFor(f.srv), PortForwardOptions{DialTimeout: 5 * time.Second})
	must(t, err)
	defer d.Close()
	c, err := d.DialContext(context.Background(), Target{Name: "demo-0", Namespace: "db", Pod: "demo-0", Port: port})
	if err != nil {
		t.Fatalf("dial after a 101: %v", err)
	}
	defer c.Close()
	b := make([]byte, len("greeting"))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "greeting" {
		t.Fatalf("read %q: %v", b, err)
	}
	if f.wsTries.Load() != 1 || f.upgrades.Load() != 1 {
		t.Errorf("%d WebSocket attempts and %d SPDY upgrades, want 1 and 1", f.wsTries.Load(), f.upgrades.Load())
	}
}

// A refusal's text reaches errors, Events and status: a proxy that echoes the request must not
// carry its credentials there, and only its first line is kept.
func TestRefusalTextRedactsCredentials(t *testing.T) {
	body := []byte("403 Forbidden: Authorization: Bearer abc.def.ghi\nX-Echo: password=hunter2\n")
	msg, api := refusalText(body)
	if api || strings.Contains(msg, "abc.def.ghi") || strings.Contains(msg, "hunter2") || strings.Contains(msg, "X-Echo") {
		t.Errorf("refusal text %q (api %v) keeps a credential or a second line", msg, api)
	}
	if !strings.Contains(msg, "403 Forbidden") {
		t.Errorf("refusal text %q lost the refusal", msg)
	}
}
