package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// releaseMaxBackoff bounds the pause after releases that failed in a row.
const releaseMaxBackoff = 5 * time.Minute

// releaseLostAcks follows, from each check of a writable primary, whether its commits wait for
// acknowledgements that stopped coming (failover.AckStall). After two detection intervals it
// looks, beside the checks, whether the replicas hold what the primary wrote: then the
// acknowledgements were lost, and one statement that changes nothing releases the commits
// (orchestrate.ReleaseLostAcks). The statement proves this supervisor's Lease, as the HA writes
// do, and that this supervisor's last check found the primary writable; a failed
// check cancels a release in progress (cancelRelease), so none lands on a primary being failed
// over.
func (w *watcher) releaseLostAcks(ctx context.Context, c *v1.MysqlCluster, v orchestrate.FailoverView, snap topology.Snapshot, creds orchestrate.Credentials, at time.Time) {
	primary := c.Status.CurrentPrimary
	if primary != w.ackPrimary {
		w.acks.Reset()
		w.ackPrimary = primary
	}
	interval := orchestrate.DetectionInterval(c)
	stalled := w.acks.See(failover.AckSampleOf(snap.SemiSync, at))
	if stalled < 2*interval || w.releasing.Load() || at.Before(w.releaseNext) {
		return
	}
	w.releasing.Store(true)
	w.releaseNext = at.Add(releaseBackoff(interval, w.releaseFails.Load()))
	rctx, cancel := context.WithCancel(ctx)
	w.releaseCancel.Store(&cancel)
	c = c.DeepCopy() // the detector goes on with its own
	go func() {
		defer func() { cancel(); w.releasing.Store(false) }()
		r := w.s.Runner
		r.Lease = nil
		r.SupervisorGuard = func(what string) error { return w.releaseGuard(rctx, interval, what) }
		what, done, err := r.ReleaseLostAcks(rctx, c, v, snap, creds)
		switch {
		case err != nil:
			w.releaseFails.Add(1)
			what = "releasing commits that wait for lost acknowledgements: " + err.Error()
			if errors.Is(err, topology.ErrReleasePending) {
				what = "commits wait for acknowledgements; " + topology.ErrReleasePending.Error() + ", so no other is sent"
			}
		case done:
			w.releaseFails.Store(0)
			w.releaseWhy = ""
			w.report(Transition{Action: "release", Primary: primary, Reason: what})
			w.poke()
			return
		default:
			w.releaseFails.Store(0)
			what = "commits wait for acknowledgements, left waiting: " + what
		}
		w.reportReleaseOnce(primary, what)
	}()
}

// releaseBackoff is how long after a release begins the next may: two detection intervals,
// doubled for each release that failed in a row, at most releaseMaxBackoff.
func releaseBackoff(interval time.Duration, fails int32) time.Duration {
	return min(2*interval<<min(max(fails, 0), 16), releaseMaxBackoff)
}

// reportReleaseOnce reports why commits are left waiting, once per reason: the release is looked
// at again every two intervals (longer after failures), and the same reason each time is not
// news. A release that succeeds is always reported, and a reason seen before it is news again.
func (w *watcher) reportReleaseOnce(primary, why string) {
	if why != w.releaseWhy {
		w.report(Transition{Action: "release", Primary: primary, Reason: why})
	}
	w.releaseWhy = why
}

// releaseGuard is proven right before the release's statement is sent: this supervisor holds
// its Lease, its last check found the primary writable (checks end at most an interval and a
// check's timeout apart), and no failed check has cancelled the release since it began (rctx).
func (w *watcher) releaseGuard(rctx context.Context, interval time.Duration, what string) error {
	if err := w.supGuard(what); err != nil {
		return err
	}
	if a := w.answeredAt.Load(); a == nil || w.s.Runner.Clock().Sub(*a) > interval+failover.CheckTimeout(interval) {
		return fmt.Errorf("refusing to %s: the primary was not found writable by the last check", what)
	}
	if err := rctx.Err(); err != nil {
		return fmt.Errorf("refusing to %s: the release was cancelled since it began, by a check that found the primary not writable or by shutdown (%w)", what, err)
	}
	return nil
}

// cancelRelease stops a release in progress: the check that calls it found the primary not
// writable.
func (w *watcher) cancelRelease() {
	if cancel := w.releaseCancel.Load(); cancel != nil {
		(*cancel)()
	}
}
