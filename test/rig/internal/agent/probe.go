package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeKind names a container probe.
type probeKind int

const (
	probeNone probeKind = iota
	probeStartup
	probeReadiness
	probeLiveness
)

// String names the probe as the pod spec does.
func (k probeKind) String() string {
	switch k {
	case probeStartup:
		return "startup"
	case probeReadiness:
		return "readiness"
	case probeLiveness:
		return "liveness"
	}
	return "none"
}

// startProbes runs the container's probes with the kubelet's semantics: the startup probe first
// (liveness and readiness wait for it), each probe every periodSeconds after initialDelaySeconds
// counted from the container's start, a result changing after successThreshold consecutive
// successes or failureThreshold consecutive failures. Results go to the worker as events.
func (w *podWorker) startProbes(ctx context.Context, c *ctr, inst int, p *process) {
	spec := c.spec
	env, wd := c.env, c.workDir
	name := spec.Name
	started := p.started
	report := func(kind probeKind, ok bool) {
		select {
		case w.events <- workerEvent{container: name, instance: inst, probe: kind, ok: ok}:
		case <-ctx.Done():
		}
	}
	go func() {
		if sp := spec.StartupProbe; sp != nil {
			ok := w.probeLoop(ctx, sp, probeStartup, &spec, p, env, wd, started, true, func(ok bool) bool {
				report(probeStartup, ok)
				return false // the first result (success or failure) ends the startup probe
			})
			if !ok {
				return
			}
		}
		if rp := spec.ReadinessProbe; rp != nil {
			go w.probeLoop(ctx, rp, probeReadiness, &spec, p, env, wd, started, false, func(ok bool) bool {
				report(probeReadiness, ok)
				return true
			})
		}
		if lp := spec.LivenessProbe; lp != nil {
			go w.probeLoop(ctx, lp, probeLiveness, &spec, p, env, wd, started, true, func(ok bool) bool {
				if !ok {
					report(probeLiveness, false)
					return false
				}
				return true
			})
		}
	}()
}

// probeLoop probes until ctx ends or onChange returns false; it returns the last result.
// initialResult is the assumed result before the first probe (success for liveness and startup,
// failure for readiness, as in the kubelet).
func (w *podWorker) probeLoop(ctx context.Context, pr *corev1.Probe, kind probeKind, c *corev1.Container, p *process,
	env []string, wd string, started time.Time, initialResult bool, onChange func(bool) bool,
) bool {
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	if pr.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	success := int(max(pr.SuccessThreshold, 1))
	failure := int(max(pr.FailureThreshold, 1))
	if pr.FailureThreshold == 0 {
		failure = 3
	}
	delay := time.Until(started.Add(time.Duration(pr.InitialDelaySeconds) * time.Second))
	if delay > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
	}
	result := initialResult
	if kind == probeStartup {
		result = false
	}
	okRun, failRun := 0, 0
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		ok := w.runProbe(ctx, pr, c, p, env, wd, timeout)
		if ctx.Err() != nil {
			return false
		}
		if ok {
			okRun, failRun = okRun+1, 0
		} else {
			okRun, failRun = 0, failRun+1
		}
		switch {
		case ok && !result && okRun >= success:
			result = true
			if !onChange(true) {
				return true
			}
		case !ok && failRun >= failure && (result || kind != probeReadiness):
			result = false
			if !onChange(false) {
				return false
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
		}
	}
}

// runProbe runs one probe. Network probes come from the node's address, as a kubelet's come from
// its node, so that a network cut of the pod does not hide it from its own node.
func (w *podWorker) runProbe(ctx context.Context, pr *corev1.Probe, c *corev1.Container, p *process, env []string, wd string, timeout time.Duration) bool {
	switch {
	case pr.Exec != nil:
		res := execIn(ctx, p.pid, w.cgroupPath(), pr.Exec.Command, env, wd, timeout)
		return res.err == nil && res.exitCode == 0
	case pr.TCPSocket != nil:
		port, err := resolvePort(pr.TCPSocket.Port, c)
		if err != nil {
			return false
		}
		host := pr.TCPSocket.Host
		if host == "" {
			host = w.podIP()
		}
		conn, err := w.dialer(timeout).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	case pr.HTTPGet != nil:
		port, err := resolvePort(pr.HTTPGet.Port, c)
		if err != nil {
			return false
		}
		host := pr.HTTPGet.Host
		if host == "" {
			host = w.podIP()
		}
		scheme := "http"
		if pr.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		client := &http.Client{
			Timeout:   timeout,
			Transport: &http.Transport{DialContext: w.dialer(timeout).DialContext, DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), pr.HTTPGet.Path), nil)
		if err != nil {
			return false
		}
		for _, h := range pr.HTTPGet.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	}
	// gRPC probes are not supported by the rig: they fail, visibly.
	return false
}

func (w *podWorker) cgroupPath() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cgroup
}

func (w *podWorker) podIP() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ip
}

func (w *podWorker) dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(w.a.nodeIP)}}
}

// resolvePort turns a probe's port (number or container port name) into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

// serverPort is the port a MariaDB container listens on: its port named mysql, else its first
// TCP port, else 3306.
func serverPort(c *corev1.Container) int {
	for _, cp := range c.Ports {
		if cp.Name == "mysql" {
			return int(cp.ContainerPort)
		}
	}
	for _, cp := range c.Ports {
		if cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP {
			return int(cp.ContainerPort)
		}
	}
	return 3306
}

// watchAnswer sets answered once the server at the pod's address sends its protocol greeting, which
// it does only when it has finished starting.
func (w *podWorker) watchAnswer(ctx context.Context, answered *atomic.Bool, port int) {
	addr := net.JoinHostPort(w.podIP(), strconv.Itoa(port))
	for ctx.Err() == nil {
		conn, err := w.dialer(time.Second).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 1)
			_, err = conn.Read(buf)
			_ = conn.Close()
			if err == nil {
				answered.Store(true)
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
