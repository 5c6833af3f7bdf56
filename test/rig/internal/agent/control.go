package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// FaultRequest is the body of POST /v1/faults on the control socket.
type FaultRequest struct {
	Fault     Fault  `json:"fault"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container,omitempty"`
}

// WipeRequest is the body of POST /v1/wipe on the control socket.
type WipeRequest struct {
	Namespace string `json:"namespace"`
	Claim     string `json:"claim"`
}

// ExecRequest is the body of POST /v1/exec on the control socket.
type ExecRequest struct {
	Namespace string        `json:"namespace"`
	Pod       string        `json:"pod"`
	Container string        `json:"container,omitempty"`
	Command   []string      `json:"command"`
	Timeout   time.Duration `json:"timeout"`
}

// ServeControl serves fault injection and the agent's view of its pods over HTTP on a Unix socket
// (only root can reach it: the socket is mode 0600). It returns a function that stops the server.
func (a *Agent) ServeControl(socketPath string) (func() error, error) {
	_ = os.Remove(socketPath)
	l, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(socketPath, 0o600); err != nil {
		_ = l.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/pods", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, a.Pods())
	})
	mux.HandleFunc("GET /v1/pids", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, a.PIDs())
	})
	mux.HandleFunc("POST /v1/faults", func(w http.ResponseWriter, r *http.Request) {
		var req FaultRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := a.Inject(req.Fault, req.Namespace, req.Pod, req.Container); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/exec", func(w http.ResponseWriter, r *http.Request) {
		var req ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Timeout <= 0 {
			req.Timeout = time.Minute
		}
		res, err := a.Exec(r.Context(), req.Namespace, req.Pod, req.Container, req.Command, req.Timeout)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, res)
	})
	mux.HandleFunc("POST /v1/wipe", func(w http.ResponseWriter, r *http.Request) {
		var req WipeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := a.WipeClaim(req.Namespace, req.Claim); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		_ = os.Remove(socketPath)
		return err
	}, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Client talks to an agent's control socket from another process (the rig CLI).
type Client struct {
	hc *http.Client
}

// NewClient returns a client for the control socket at socketPath.
func NewClient(socketPath string) *Client {
	return &Client{hc: &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		}},
	}}
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://rig"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("rig control socket: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		return errors.New(strings.TrimSpace(string(msg)))
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// Inject applies a fault to a pod (see Agent.Inject).
func (c *Client) Inject(ctx context.Context, f Fault, namespace, pod, container string) error {
	return c.do(ctx, http.MethodPost, "/v1/faults", FaultRequest{Fault: f, Namespace: namespace, Pod: pod, Container: container}, nil)
}

// WipeClaim deletes the data of a claim's volume (see Agent.WipeClaim).
func (c *Client) WipeClaim(ctx context.Context, namespace, claim string) error {
	return c.do(ctx, http.MethodPost, "/v1/wipe", WipeRequest{Namespace: namespace, Claim: claim}, nil)
}

// Pods returns the agent's view of its pods.
func (c *Client) Pods(ctx context.Context) ([]PodInfo, error) {
	var pods []PodInfo
	err := c.do(ctx, http.MethodGet, "/v1/pods", nil, &pods)
	return pods, err
}

// PIDs returns the PIDs of every pod process.
func (c *Client) PIDs(ctx context.Context) ([]int, error) {
	var pids []int
	err := c.do(ctx, http.MethodGet, "/v1/pids", nil, &pids)
	return pids, err
}

// Exec runs a command in a container (see Agent.Exec).
func (c *Client) Exec(ctx context.Context, namespace, pod, container string, command []string, timeout time.Duration) (ExecResult, error) {
	var res ExecResult
	err := c.do(ctx, http.MethodPost, "/v1/exec", ExecRequest{Namespace: namespace, Pod: pod, Container: container, Command: command, Timeout: timeout}, &res)
	return res, err
}
