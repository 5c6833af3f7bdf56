package supervisor

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// tailObserveTimeout bounds the look at each member for the tail proof.
const tailObserveTimeout = 2 * time.Second

// reseedCandidate returns the quarantined instance that the newest primary change replaced (a
// crashed former primary, quarantined with what no replica received), if any.
func reseedCandidate(c *v1.MysqlCluster) (v1.ErrantInstance, failover.PrimaryChange, bool) {
	ch, ok := newestPrimaryChange(c)
	if !ok || ch.FormerPrimary == "" || !c.Spec.Failover.AutoEnabled() || !c.Spec.Failover.ReseedEnabled() || c.Status.Scale != nil {
		return v1.ErrantInstance{}, ch, false
	}
	for _, e := range c.Status.ErrantInstances {
		if e.Name == ch.FormerPrimary && e.ReseedStartedAt == nil {
			return e, ch, true
		}
	}
	return v1.ErrantInstance{}, ch, false
}

// newestPrimaryChange is the newest recorded operation that may have moved the primary.
func newestPrimaryChange(c *v1.MysqlCluster) (failover.PrimaryChange, bool) {
	for _, h := range c.Status.History {
		switch h.Type {
		case orchestrate.OperationFailover, orchestrate.OperationSwitchover, orchestrate.OperationUpgrade, orchestrate.OperationBootstrap:
			ch := failover.PrimaryChange{Type: h.Type, Result: h.Result, FormerPrimary: h.FormerPrimary, Lost: h.TransactionsLost}
			if h.FormerPrimarySeenAt != nil && h.UnacknowledgedUntil != nil {
				ch.SeenAt, ch.Until = h.FormerPrimarySeenAt.Time, h.UnacknowledgedUntil.Time
			}
			if h.FormerPrimaryCheckedAt != nil {
				ch.CheckedAt = h.FormerPrimaryCheckedAt.Time // replaced by ownCheck
			}
			return ch, true
		}
	}
	return failover.PrimaryChange{}, false
}

// ownCheck puts in ch this supervisor's own record of the check the failover recorded (on its
// monotonic clock, the one its checks read), or clears the check when this supervisor did not
// make it (another process, or this one restarted since): only the supervisor that checked the
// old primary alive can place its crash after that check without comparing two hosts' clocks.
func (w *watcher) ownCheck(ch failover.PrimaryChange) failover.PrimaryChange {
	pc := w.failedOver.Load()
	d := time.Duration(0)
	if pc != nil {
		d = pc.at.Sub(ch.CheckedAt)
	}
	if pc == nil || pc.primary != ch.FormerPrimary || ch.CheckedAt.IsZero() || d <= -time.Second || d >= time.Second || clockStopped(pc.at, w.s.Runner.Clock()) {
		ch.CheckedAt, ch.CheckedStart, ch.Written = time.Time{}, time.Time{}, nil
		return ch
	}
	ch.CheckedAt, ch.CheckedStart, ch.Written = pc.at, pc.started, pc.written
	return ch
}

// clockStopped reports whether this process's monotonic clock and the wall clock disagree by
// more than a second between at and now (both read from the supervisor's clock): the machine
// slept (a laptop lid closed; the monotonic clock stops, the servers' uptimes do not) or the
// wall clock was stepped. Start times derived from uptimes then no longer compare with at.
func clockStopped(at, now time.Time) bool {
	return clocksDisagree(now.Sub(at), now.Round(0).Sub(at.Round(0)))
}

// clocksDisagree reports whether an interval measured on the monotonic clock and on the wall
// clock differ by more than a second.
func clocksDisagree(mono, wall time.Duration) bool {
	d := mono - wall
	return d > time.Second || d < -time.Second
}

// proveTail observes every member and judges whether the quarantined instance e holds exactly
// the unacknowledged tail its crash left (failover.ProveUnacknowledgedTail).
func proveTail(ctx context.Context, r *orchestrate.Runner, c *v1.MysqlCluster, e v1.ErrantInstance, ch failover.PrimaryChange) (failover.TailProof, error) {
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return failover.TailProof{}, err
	}
	creds, err := r.Credentials(ctx, c)
	if err != nil {
		return failover.TailProof{}, err
	}
	in := failover.TailInput{Change: ch, Recorded: e.ErrantGTIDs, OthersStarted: map[string]time.Time{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for ord := int32(0); ord < orchestrate.MemberCount(c); ord++ {
		p := pods[ord]
		name := fmt.Sprintf("%s-%d", c.Name, ord)
		if p == nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			in.Silent = append(in.Silent, name)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, started, ok := observeForTail(ctx, r, p, creds)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !ok:
				in.Silent = append(in.Silent, p.Name)
			case p.Name == e.Name:
				in.Instance, in.Started = s, started
			default:
				if p.Name == c.Status.CurrentPrimary {
					in.Primary = s
				}
				in.Others = append(in.Others, s)
				if !started.IsZero() {
					in.OthersStarted[p.Name] = started
				}
			}
		}()
	}
	wg.Wait()
	proof, err := failover.ProveUnacknowledgedTail(in)
	if err == nil && !in.Instance.Flavor.IsMariaDB() {
		// Proven, but a rebuild of a MySQL instance needs CLONE, which is not implemented: it
		// would be refused at its first stage.
		return proof, fmt.Errorf("%w: %s is MySQL, which 'rebuild' cannot re-seed yet", failover.ErrTailNotProven, e.Name)
	}
	return proof, err
}

// observeForTail observes one member, and when its server started (zero when its uptime could
// not be read); ok is false when it could not be observed fully.
func observeForTail(ctx context.Context, r *orchestrate.Runner, p *corev1.Pod, creds orchestrate.Credentials) (topology.Snapshot, time.Time, bool) {
	cctx, cancel := context.WithTimeout(ctx, tailObserveTimeout)
	defer cancel()
	in, err := r.ConnectGuarded(cctx, p, topology.Credentials{User: "root", Password: creds.Root})
	if err != nil {
		return topology.Snapshot{}, time.Time{}, false
	}
	defer func() { _ = in.Close() }()
	s := in.Observe(cctx, topology.ObserveOptions{Now: r.Clock, Timeout: tailObserveTimeout, Secrets: []string{string(creds.Root)}})
	if !s.Complete() {
		return s, time.Time{}, false
	}
	var started time.Time
	if up, err := in.Uptime(cctx); err == nil {
		started = r.Clock().Add(-up)
	}
	return s, started, true
}

// reseedTail rebuilds, with no person, a quarantined former primary whose extra transactions
// are proven to be the unacknowledged tail its crash left (spec.failover.reseedUnacknowledged).
// It looks without the Lease, then proves again under it before it begins the rebuild, which
// it runs to its end as a repair the detector can cancel (a failover that supersedes it leaves
// it to resumeReseed). It reports whether it began a rebuild.
func (w *watcher) reseedTail(ctx context.Context, c *v1.MysqlCluster) (bool, error) {
	e, ch, ok := reseedCandidate(c)
	if !ok {
		return false, nil
	}
	ch = w.ownCheck(ch)
	obs := w.observer()
	if _, err := proveTail(ctx, &obs, c, e, ch); err != nil {
		// Once per reason (its times vary by a second from one look to the next).
		if key := stamps.ReplaceAllString(err.Error(), "T"); key != w.reseedRefused {
			w.reseedRefused = key
			w.report(Transition{Action: "rebuild", Primary: c.Status.CurrentPrimary, Reason: fmt.Sprintf("%s stays quarantined for a person ('rebuild %s %s'): %s", e.Name, c.Name, e.Name, err)})
		}
		return false, nil
	}
	w.reseedRefused = ""
	began := false
	err := w.cancellable(ctx, func(rctx context.Context) error {
		return w.withLease(rctx, c, false, func(ctx context.Context, r *orchestrate.Runner) error {
			cur := &v1.MysqlCluster{}
			if err := r.Kube.Get(ctx, w.key, cur); err != nil {
				return err
			}
			e, ch, ok := reseedCandidate(cur)
			ch = w.ownCheck(ch)
			if !ok || cur.Status.Operation != nil || cur.Status.CurrentPrimary != c.Status.CurrentPrimary || cur.Spec.Paused {
				return nil // changed while the Lease was taken
			}
			proof, err := proveTail(ctx, r, cur, e, ch)
			if err != nil {
				return nil //nolint:nilerr // reported by the next look, without the Lease
			}
			began = true
			w.report(Transition{Action: "rebuild", Primary: cur.Status.CurrentPrimary, Reason: fmt.Sprintf("rebuilding %s, discarding %s: %s", e.Name, proof.Discard, strings.Join(proof.Evidence, "; "))})
			if err := r.Rebuild(ctx, w.key, orchestrate.RebuildOptions{Instance: e.Name, Discard: &proof}); err != nil {
				return err
			}
			w.report(Transition{Action: "rebuild", Primary: cur.Status.CurrentPrimary, Reason: e.Name + " rebuilt: it replicates again"})
			return nil
		})
	})
	return began, err
}

// resumableReseed reports whether the cluster holds a re-seed watch began by itself that a
// failover superseded (its newest rebuild record says so), with the policy still on: one that
// stopped on a failure of its own waits for a person ('resume' once fixed, or 'abort').
func resumableReseed(c *v1.MysqlCluster) bool {
	sc := c.Status.Scale
	if c.Status.Operation != nil || sc == nil || sc.Action != orchestrate.ScaleRebuild || sc.Discard == "" ||
		!c.Spec.Failover.AutoEnabled() || !c.Spec.Failover.ReseedEnabled() || c.Spec.Paused {
		return false
	}
	for _, h := range c.Status.History {
		if h.Type == orchestrate.OperationRebuild {
			return h.Result == "Superseded" && h.ID == sc.ID
		}
	}
	return false
}

// stamps matches the times in a refusal.
var stamps = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// resumeReseed continues a re-seed watch began by itself that a failover superseded (see
// resumableReseed): left recorded, it would keep every converge away. A person's stopped
// rebuild, or one stopped on a failure of its own, is theirs to resume.
func (w *watcher) resumeReseed(ctx context.Context, c *v1.MysqlCluster) (bool, error) {
	if !resumableReseed(c) || w.s.Runner.Clock().Before(w.reseedRetry) {
		return false, nil
	}
	sc := c.Status.Scale
	err := w.cancellable(ctx, func(rctx context.Context) error {
		return w.withLease(rctx, c, false, func(ctx context.Context, r *orchestrate.Runner) error {
			w.report(Transition{Action: "rebuild", Primary: c.Status.CurrentPrimary, Reason: fmt.Sprintf("continuing the re-seed of %s that stopped", orchestrate.ScalePod(c, sc.Ordinal))})
			return r.Rebuild(ctx, w.key, orchestrate.RebuildOptions{ResumeOnly: true})
		})
	})
	if err != nil {
		// Not again every round: each attempt takes the Lease over.
		w.reseedRetry = w.s.Runner.Clock().Add(failoverBackoff(c))
	}
	return true, err
}
