package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

// copyProgressEvery is how often a backup or restore that waits looks how far its copy is (the
// agent prints its progress every agentProgressEvery, and once more when the copy ends).
// MYSQLCTL_PROGRESS_EVERY (a duration) sets it.
const copyProgressEvery = 5 * time.Second

// line renders a copy's progress for the terminal: what was copied, the rate, and the time left
// when the total is known.
func (p agentProgress) line() string {
	s := humanBytes(p.Bytes) + " copied"
	if p.Seconds <= 0 {
		return s
	}
	s += fmt.Sprintf(" in %s, %s/s", time.Duration(p.Seconds)*time.Second, humanBytes(p.Bytes/int64(p.Seconds)))
	if p.Total > 0 && p.Done > 0 && p.Done < p.Total {
		left := time.Duration(float64(p.Seconds) * float64(p.Total-p.Done) / float64(p.Done) * float64(time.Second))
		s += fmt.Sprintf(", about %d%% done, %s left", p.Done*100/p.Total, left.Round(time.Second))
	}
	return s
}

// jobProgress reads the newest progress line the agent of job printed to its pod's log, through
// the API server (pods/log). ok is false when there is none yet.
func jobProgress(ctx context.Context, cs kubernetes.Interface, ns, job string) (agentProgress, bool) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil || len(pods.Items) == 0 {
		return agentProgress{}, false
	}
	newest := pods.Items[0]
	for _, p := range pods.Items[1:] {
		if p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	tail := int64(20)
	raw, err := cs.CoreV1().Pods(ns).GetLogs(newest.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return agentProgress{}, false
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var p agentProgress
		if json.Unmarshal(lines[i], &p) == nil && p.Stage != "" {
			return p, true
		}
	}
	return agentProgress{}, false
}

// followCopy prints, every copyProgressEvery until the returned stop is called, how far the copy
// of the Job that job names is (job returns "" while no copy runs). Each line is printed once.
func followCopy(ctx context.Context, f *cmdutil.Factory, ns string, job func(context.Context) string, print func(string)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	cfg, err := f.RESTConfig()
	var cs kubernetes.Interface
	if err == nil {
		cs, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		cancel()
		return func() {}
	}
	go func() {
		defer close(done)
		every := copyProgressEvery
		if d, err := time.ParseDuration(f.Getenv("MYSQLCTL_PROGRESS_EVERY")); err == nil && d > 0 {
			every = d
		}
		t := time.NewTicker(every)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			name := job(ctx)
			if name == "" {
				continue
			}
			if p, ok := jobProgress(ctx, cs, ns, name); ok && p.line() != last {
				last = p.line()
				print(last)
			}
		}
	}()
	return func() { cancel(); <-done }
}
