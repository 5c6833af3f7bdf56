package supervisor

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// sentinelPulse is how long the sentinel session sleeps on the primary at a time, and how late
// its answer may come (grace) before the silence is reported and a check starts at once: a
// quarter and an eighth of the detection interval (at least 100 and 50 ms). An established
// sentinel on a frozen or cut-off primary then starts a check within 375 ms of the fault at the
// default interval, instead of anywhere within the interval. A late answer is no failed check:
// the checks alone decide, and MinSilence still counts from the first check that failed.
func sentinelPulse(interval time.Duration) (sleep, grace time.Duration) {
	return max(interval/4, 100*time.Millisecond), max(interval/8, 50*time.Millisecond)
}

const (
	// sentinelLogin bounds a sentinel's login: it is never counted against a pulse.
	sentinelLogin = 5 * time.Second
	// sentinelSteady is how long a sentinel must have run for its end to count as the first of
	// a new series; sentinelMaxBackoff bounds the wait before another is started after runs
	// that ended by themselves on the same primary (a login refused, too many connections).
	sentinelSteady     = 30 * time.Second
	sentinelMaxBackoff = 30 * time.Second
)

// sentinelRun is one sentinel session's goroutine, as the detector started it.
type sentinelRun struct {
	id    string
	stop  context.CancelFunc
	done  chan struct{}
	began time.Time
	// ended is when the run ended (set before done is closed).
	ended time.Time
	// counted is set once its end was accounted for (by the detector's goroutine only).
	counted bool
	// failed is set when the run ended by itself (its login failed, or its session ended),
	// not because it was stopped.
	failed atomic.Bool
}

func (s *sentinelRun) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// watchSentinel keeps a sentinel session on the primary incarnation, called by every check that
// found it writable. When the session ends (the server died and its socket closed), or a sleep
// is answered late (frozen, cut off, or slow: at most once per interval), the next check starts
// at once. A login that fails pokes nothing (the checks judge the primary), and runs that end by
// themselves on the same primary are started again further and further apart, so that a
// sentinel that cannot live never turns into a loop of logins and checks.
func (w *watcher) watchSentinel(ctx context.Context, r orchestrate.Runner, p *corev1.Pod, creds orchestrate.Credentials, interval time.Duration) {
	id := string(p.UID) + "/" + p.Status.PodIP + "/" + interval.String()
	now := w.s.Runner.Clock()
	if s := w.sentinel; s != nil {
		switch {
		case s.id != id:
			// Another primary incarnation, or another interval: started afresh, at once.
			s.stop()
			w.sentinel, w.sentinelFails, w.sentinelRetry = nil, 0, time.Time{}
		case s.alive():
			return
		case !s.counted:
			// It ended by itself on this primary: the next waits, longer each time.
			s.counted = true
			if s.failed.Load() {
				if s.ended.Sub(s.began) >= sentinelSteady {
					w.sentinelFails = 0
				}
				w.sentinelFails++
				w.sentinelRetry = now.Add(min(interval<<min(w.sentinelFails-1, 10), sentinelMaxBackoff))
			}
		}
	}
	if now.Before(w.sentinelRetry) {
		return
	}
	if w.sentinel != nil {
		w.sentinel.stop() // ended: releases its context
	}
	sctx, cancel := context.WithCancel(ctx)
	run := &sentinelRun{id: id, stop: cancel, done: make(chan struct{}), began: now}
	w.sentinel = run
	go func() {
		defer close(run.done)
		if !w.runSentinel(sctx, r, p, creds, interval) && sctx.Err() == nil {
			run.failed.Store(true)
		}
		run.ended = w.s.Runner.Clock()
	}()
}

// runSentinel logs the sentinel in and keeps it asleep on the primary until ctx ends (true) or
// the session ends by itself (false).
func (w *watcher) runSentinel(ctx context.Context, r orchestrate.Runner, p *corev1.Pod, creds orchestrate.Credentials, interval time.Duration) bool {
	in, err := r.ConnectGuarded(ctx, p, topology.Credentials{User: "root", Password: creds.Root})
	if err != nil {
		return false
	}
	defer func() { _ = in.Close() }()
	lctx, cancel := context.WithTimeout(ctx, sentinelLogin)
	ss, err := in.OpenSentinel(lctx)
	cancel()
	if err != nil {
		return false
	}
	defer ss.Close()
	sleep, grace := sentinelPulse(interval)
	var lastLate atomic.Int64
	late := func() {
		t := w.s.Runner.Clock().UnixNano()
		if l := lastLate.Load(); l != 0 && t-l < int64(interval) {
			return
		}
		lastLate.Store(t)
		w.poke()
	}
	for ctx.Err() == nil {
		if err := ss.Pulse(ctx, sleep, grace, late); err != nil {
			if ctx.Err() == nil {
				w.poke()
			}
			return ctx.Err() != nil
		}
	}
	return true
}
