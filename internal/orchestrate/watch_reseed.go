package orchestrate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
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
		if e.Name == ch.FormerPrimary {
			return e, ch, true
		}
	}
	return v1.ErrantInstance{}, ch, false
}

// newestPrimaryChange is the newest recorded operation that may have moved the primary.
func newestPrimaryChange(c *v1.MysqlCluster) (failover.PrimaryChange, bool) {
	for _, h := range c.Status.History {
		switch h.Type {
		case OperationFailover, OperationSwitchover, OperationUpgrade, OperationBootstrap:
			ch := failover.PrimaryChange{Type: h.Type, Result: h.Result, FormerPrimary: h.FormerPrimary, Lost: h.TransactionsLost}
			if h.FormerPrimarySeenAt != nil && h.UnacknowledgedUntil != nil {
				ch.SeenAt, ch.Until = h.FormerPrimarySeenAt.Time, h.UnacknowledgedUntil.Time
			}
			return ch, true
		}
	}
	return failover.PrimaryChange{}, false
}

// proveTail observes every member and judges whether the quarantined instance e holds exactly
// the unacknowledged tail its crash left (failover.ProveUnacknowledgedTail).
func (r *Runner) proveTail(ctx context.Context, c *v1.MysqlCluster, e v1.ErrantInstance, ch failover.PrimaryChange) (failover.TailProof, error) {
	pods, err := r.pods(ctx, c)
	if err != nil {
		return failover.TailProof{}, err
	}
	creds, err := r.credentials(ctx, c)
	if err != nil {
		return failover.TailProof{}, err
	}
	in := failover.TailInput{Change: ch, Recorded: e.ErrantGTIDs}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for ord := int32(0); ord < memberCount(c); ord++ {
		p := pods[ord]
		name := fmt.Sprintf("%s-%d", c.Name, ord)
		if p == nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			in.Silent = append(in.Silent, name)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, started, ok := r.observeForTail(ctx, p, creds, p.Name == e.Name)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !ok:
				in.Silent = append(in.Silent, p.Name)
			case p.Name == e.Name:
				in.Instance, in.Started = s, started
			case p.Name == c.Status.CurrentPrimary:
				in.Primary = s
				in.Others = append(in.Others, s)
			default:
				in.Others = append(in.Others, s)
			}
		}()
	}
	wg.Wait()
	return failover.ProveUnacknowledgedTail(in)
}

// observeForTail observes one member (and, for the quarantined instance, when its server
// started); ok is false when it could not be observed fully.
func (r *Runner) observeForTail(ctx context.Context, p *corev1.Pod, creds credentials, self bool) (topology.Snapshot, time.Time, bool) {
	cctx, cancel := context.WithTimeout(ctx, tailObserveTimeout)
	defer cancel()
	in, err := r.connect(cctx, p, topology.Credentials{User: "root", Password: creds.root})
	if err != nil {
		return topology.Snapshot{}, time.Time{}, false
	}
	defer func() { _ = in.Close() }()
	s := in.Observe(cctx, topology.ObserveOptions{Now: r.now, Timeout: tailObserveTimeout, Secrets: []string{string(creds.root)}})
	if !s.Complete() {
		return s, time.Time{}, false
	}
	var started time.Time
	if self {
		if up, err := in.Uptime(cctx); err == nil {
			started = r.now().Add(-up)
		}
	}
	return s, started, true
}

// reseedTail rebuilds, with no person, a quarantined former primary whose extra transactions
// are proven to be the unacknowledged tail its crash left (spec.failover.reseedUnacknowledged).
// It looks without the Lease, then proves again under it before it begins the rebuild, which
// it runs to its end as a repair the detector can cancel (a cancelled rebuild is resumed like
// any recorded operation). It reports whether it found a candidate to act on.
func (w *watcher) reseedTail(ctx context.Context, c *v1.MysqlCluster) (bool, error) {
	e, ch, ok := reseedCandidate(c)
	if !ok {
		return false, nil
	}
	obs := w.observer()
	if _, err := obs.proveTail(ctx, c, e, ch); err != nil {
		if msg := err.Error(); msg != w.reseedRefused {
			w.reseedRefused = msg
			w.report(Transition{Action: "rebuild", Primary: c.Status.CurrentPrimary, Reason: fmt.Sprintf("%s stays quarantined for a person ('rebuild %s %s'): %s", e.Name, c.Name, e.Name, msg)})
		}
		return false, nil
	}
	w.reseedRefused = ""
	return true, w.cancellable(ctx, func(rctx context.Context) error {
		return w.withLease(rctx, c, false, func(ctx context.Context, r *Runner) error {
			cur := &v1.MysqlCluster{}
			if err := r.Kube.Get(ctx, w.key, cur); err != nil {
				return err
			}
			e, ch, ok := reseedCandidate(cur)
			if !ok || cur.Status.Operation != nil || cur.Status.CurrentPrimary != c.Status.CurrentPrimary || cur.Spec.Paused {
				return nil // changed while the Lease was taken
			}
			proof, err := r.proveTail(ctx, cur, e, ch)
			if err != nil {
				return nil //nolint:nilerr // reported by the next look, without the Lease
			}
			w.report(Transition{Action: "rebuild", Primary: cur.Status.CurrentPrimary, Reason: fmt.Sprintf("rebuilding %s, discarding %s: %s", e.Name, proof.Discard, strings.Join(proof.Evidence, "; "))})
			if err := r.Rebuild(ctx, w.key, RebuildOptions{Instance: e.Name, Discard: &proof}); err != nil {
				return err
			}
			w.report(Transition{Action: "rebuild", Primary: cur.Status.CurrentPrimary, Reason: e.Name + " rebuilt: it replicates again"})
			return nil
		})
	})
}
