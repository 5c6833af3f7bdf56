package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// repairEvery is how often the supervisor looks for members to repair while the primary is
// healthy: a second writable instance (a returning old primary) to fence, a replica that does
// not replicate from the primary (or carries the wrong role label) to re-join or quarantine, a
// crashed former primary's proven unacknowledged tail to re-seed.
const repairEvery = 3 * time.Second

// repairMinGap keeps looks that a change woke (a pod Ready again) apart.
const repairMinGap = 500 * time.Millisecond

// secondWritableTimeout bounds the look at each non-primary instance: one that does not answer
// in that time cannot take writes through it either, and is looked at again next round.
const secondWritableTimeout = 500 * time.Millisecond

// repairLoop looks for repairs beside the detector until ctx ends; repairs run on actx (which
// outlives ctx by the grace period, so a stage in hand finishes). It acts only under the Lease,
// and yields to the detector: a failover cancels a repair in progress (a converge is then
// superseded).
func (w *watcher) repairLoop(ctx, actx context.Context, turned <-chan struct{}) {
	// The first look comes only after the detector's first turn (the repairer acts on the
	// recorded health, which the detector rewrites), and at a random point of a round after it:
	// started together, the repairers of many clusters would otherwise look together every
	// round. Then one look every round.
	select {
	case <-ctx.Done():
		return
	case <-turned:
	}
	if orchestrate.SleepCtx(ctx, upTo(repairEvery)) != nil {
		return
	}
	t := time.NewTicker(repairEvery)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		looked := time.Now()
		if err := w.repairOnce(actx); err != nil && ctx.Err() == nil {
			w.report(Transition{Action: "repair", Reason: err.Error()})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.repairWake:
			if orchestrate.SleepCtx(ctx, repairMinGap-time.Since(looked)) != nil {
				return
			}
		}
	}
}

// repairOnce looks (without the Lease) for what needs repair, and repairs it under the Lease.
func (w *watcher) repairOnce(ctx context.Context) error {
	if w.failing.Load() {
		return nil
	}
	obs := w.observer()
	c := &v1.MysqlCluster{}
	if err := obs.Kube.Get(ctx, w.key, c); err != nil {
		return nil //nolint:nilerr // the detector reports API errors
	}
	if c.Status.CurrentPrimary == "" || c.Spec.Paused {
		return nil
	}
	if op := c.Status.Operation; op != nil {
		if op.Type != orchestrate.OperationConverge || !w.primaryAnswered(c) || w.s.Runner.Clock().Before(w.convergeRetry) {
			return nil
		}
		err := w.continueConverge(ctx, c)
		if err != nil {
			// Not again every round: each attempt takes the Lease over (an Event and a
			// status write).
			w.convergeRetry = w.s.Runner.Clock().Add(failoverBackoff(c))
		}
		return err
	}
	pods, err := obs.Pods(ctx, c)
	if err != nil {
		return err
	}
	creds, err := obs.Credentials(ctx, c)
	if err != nil {
		return err
	}
	writable := w.writableOthers(ctx, obs, c, pods, creds)
	// Re-joining replicas is what a starved primary needs (its commits wait for an acknowledgement
	// that only a re-joined replica gives), and the starved primary is what keeps the recorded
	// health from Healthy: so the repairer also converges whenever this supervisor's own checks
	// found the primary answering writable, whatever the recorded state. A second writable
	// instance is fenced whatever the primary's health: an old primary that returns writable
	// while the new one is dead (inside the cooldown, say) must not take writes either.
	reopen := w.reopenWanted(c)
	if (c.Status.HA == nil || c.Status.HA.State != v1.HAHealthy) && !w.primaryAnswered(c) && !reopen {
		if len(writable) == 0 {
			return nil
		}
		return w.repair(ctx, c, writable, false, false, creds)
	}
	if len(writable) == 0 && !reopen {
		// A crashed former primary quarantined with what no replica received: re-seeded by
		// itself when that is proven never acknowledged.
		if acted, err := w.resumeReseed(ctx, c); acted || err != nil {
			return err
		}
		if acted, err := w.reseedTail(ctx, c); acted || err != nil {
			return err
		}
	}
	allReady := int32(len(pods)) == orchestrate.MemberCount(c)
	for _, p := range pods {
		allReady = allReady && orchestrate.PodReady(p)
	}
	converged := true
	if allReady {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		converged, err = obs.ReplicasConverged(cctx, c, false)
		cancel()
		if ce := topology.AsConfigError(err); ce != nil {
			// A replica the configuration keeps this supervisor from: no repair can reach it
			// either. Said once per refusal (every round would flood the log).
			if msg := ce.Error(); msg != w.repairRefused {
				w.repairRefused = msg
				return fmt.Errorf("cannot look at every replica: %w", ce)
			}
			return nil
		}
		if err != nil {
			return nil //nolint:nilerr // the primary is not ready: the detector's business
		}
		w.repairRefused = ""
	}
	if reopen {
		// The converge reopens the primary (semi-sync on, writable) and re-joins its replicas;
		// it needs no other sign that the cluster is not converged.
		return w.repair(ctx, c, writable, true, true, creds)
	}
	if len(writable) == 0 && converged {
		// A budget closed by an operation that ended without a word (an abort, a killed
		// actor) opens again once the cluster is converged and Healthy.
		if err := orchestrate.SyncPDB(ctx, obs.Kube, c); err != nil {
			return fmt.Errorf("updating the PodDisruptionBudget: %w", err)
		}
		return nil
	}
	return w.repair(ctx, c, writable, allReady && !converged, true, creds)
}

// writableOthers returns the instances other than the primary that answer writable, looked at
// in parallel, each within secondWritableTimeout.
func (w *watcher) writableOthers(ctx context.Context, obs orchestrate.Runner, c *v1.MysqlCluster, pods map[int32]*corev1.Pod, creds orchestrate.Credentials) []*corev1.Pod {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Name == c.Status.CurrentPrimary || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, secondWritableTimeout)
			defer cancel()
			in, err := obs.ConnectGuarded(cctx, p, topology.Credentials{User: "root", Password: creds.Root})
			if err != nil {
				return
			}
			defer func() { _ = in.Close() }()
			if ok, err := in.Writable(cctx); err == nil && ok {
				mu.Lock()
				out = append(out, p)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// reopenWanted reports whether the detector judged, within the last three intervals, that the
// primary is to be reopened in place (see failover.Assessment.Reopen).
func (w *watcher) reopenWanted(c *v1.MysqlCluster) bool {
	at := w.reopenAt.Load()
	return at != nil && w.s.Runner.Clock().Sub(*at) < 3*orchestrate.DetectionInterval(c)
}

// primaryAnswered reports whether this supervisor's own checks found the primary writable
// within the last three intervals.
func (w *watcher) primaryAnswered(c *v1.MysqlCluster) bool {
	at := w.answeredAt.Load()
	return at != nil && w.s.Runner.Clock().Sub(*at) < 3*orchestrate.DetectionInterval(c)
}

// continueConverge continues a converge recorded by an actor that stopped (or by this
// repairer, cut short), as a repair the detector can cancel to fail over. It waits for a dead
// holder's Lease to expire, as resume does.
func (w *watcher) continueConverge(ctx context.Context, c *v1.MysqlCluster) error {
	return w.cancellable(ctx, func(rctx context.Context) error {
		return w.withLeaseOpts(rctx, c, orchestrate.LeaseOptions{Wait: true}, func(ctx context.Context, r *orchestrate.Runner) error {
			cur := &v1.MysqlCluster{}
			if err := r.Kube.Get(ctx, w.key, cur); err != nil {
				return err
			}
			op := cur.Status.Operation
			if op == nil || op.Type != orchestrate.OperationConverge || cur.Spec.Paused || !w.primaryAnswered(cur) {
				return nil // changed while the Lease was awaited
			}
			w.report(Transition{Action: "resume", Primary: cur.Status.CurrentPrimary, Reason: fmt.Sprintf("continuing the converge %s from stage %s (its holder %s stopped)", op.ID, op.Stage, op.Holder)})
			return r.Converge(ctx, w.key)
		})
	})
}

// cancellable runs fn as a repair: under the act lock (none runs when the lock is taken), with a
// context the detector cancels to fail over. Cancelled, or refused the Lease because another
// actor holds the cluster, it returns nil.
func (w *watcher) cancellable(ctx context.Context, fn func(context.Context) error) error {
	if !w.act.TryLock() {
		return nil
	}
	defer w.act.Unlock()
	// The cancel is published before failing is read: a detector that sets failing after this
	// point finds it and cancels; one that set it before is seen here.
	rctx, cancel := context.WithCancel(ctx)
	w.repairCancel.Store(&cancel)
	defer func() { w.repairCancel.Store(nil); cancel() }()
	if w.failing.Load() {
		return nil
	}
	err := fn(rctx)
	var na errNotAcquired
	if err != nil && (rctx.Err() != nil && ctx.Err() == nil || errors.As(err, &na)) {
		return nil // cancelled by the detector, or another actor holds the cluster
	}
	return err
}

// repair fences every second writable instance, then converges the cluster (re-joining each
// replica whose history allows it, quarantining the others), under the Lease. The detector can
// cancel it to fail over.
// healthy says whether the primary answers: only then does a fence lead to a converge (which
// needs the primary).
func (w *watcher) repair(ctx context.Context, c *v1.MysqlCluster, writable []*corev1.Pod, converge, healthy bool, creds orchestrate.Credentials) error {
	return w.cancellable(ctx, func(rctx context.Context) error {
		return w.repairUnderLease(rctx, c, writable, converge, healthy, creds)
	})
}

func (w *watcher) repairUnderLease(rctx context.Context, c *v1.MysqlCluster, writable []*corev1.Pod, converge, healthy bool, creds orchestrate.Credentials) error {
	return w.withLease(rctx, c, false, func(ctx context.Context, r *orchestrate.Runner) error {
		// What was observed before the Lease may be stale: act only on the same primary with
		// no operation in between (refence looks at each instance again before fencing it).
		cur := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, w.key, cur); err != nil {
			return err
		}
		if cur.Status.Operation != nil || cur.Status.CurrentPrimary != c.Status.CurrentPrimary {
			return nil
		}
		var names []string
		for _, p := range writable {
			fenced, err := r.Refence(ctx, c, p, creds, false)
			if err != nil {
				return err
			}
			if fenced {
				names = append(names, p.Name)
			}
		}
		if len(names) > 0 {
			msg := fmt.Sprintf("a second writable instance (%s) beside the primary %s was fenced over SQL", strings.Join(names, ", "), c.Status.CurrentPrimary)
			r.Event(ctx, c, true, "SecondWritableFenced", msg)
			w.report(Transition{Action: "fence", Primary: c.Status.CurrentPrimary, Reason: msg})
			converge = healthy
		}
		if !converge {
			return nil
		}
		w.report(Transition{Action: "repair", Primary: c.Status.CurrentPrimary, Reason: "members do not all replicate from the primary: converging (re-join, or quarantine what diverged)"})
		if err := r.Converge(ctx, w.key); err != nil {
			return err
		}
		after := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, w.key, after); err == nil {
			w.report(Transition{Action: "repair", Primary: after.Status.CurrentPrimary, Reason: fmt.Sprintf("converge finished: cluster %s", after.Status.Phase)})
		}
		return nil
	})
}

// stopRepair cancels a repair in progress and waits until it has released the Lease.
func (w *watcher) stopRepair() {
	if c := w.repairCancel.Load(); c != nil {
		(*c)()
	}
	w.act.Lock()
}
