package supervisor

import (
	"context"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// releaseLostAcks follows, from each check of a writable primary, whether its commits wait for
// acknowledgements that stopped coming (failover.AckStall). After two detection intervals it
// looks, beside the checks, whether the replicas hold what the primary wrote: then the
// acknowledgements were lost, and one statement that changes nothing releases the commits
// (orchestrate.ReleaseLostAcks). Its write proves this supervisor's Lease, as the HA writes do.
func (w *watcher) releaseLostAcks(ctx context.Context, c *v1.MysqlCluster, v orchestrate.FailoverView, snap topology.Snapshot, creds orchestrate.Credentials, at time.Time) {
	primary := c.Status.CurrentPrimary
	if primary != w.ackPrimary {
		w.acks.Reset()
		w.ackPrimary = primary
	}
	interval := orchestrate.DetectionInterval(c)
	stalled := w.acks.See(failover.AckSampleOf(snap.SemiSync, orchestrate.SemiSyncWanted(c), at))
	if stalled < 2*interval || w.releasing.Load() || at.Before(w.releaseNext) {
		return
	}
	w.releasing.Store(true)
	w.releaseNext = at.Add(2 * interval)
	go func() {
		defer w.releasing.Store(false)
		r := w.s.Runner
		r.Lease, r.SupervisorGuard = nil, w.supGuard
		what, done, err := r.ReleaseLostAcks(ctx, c, v, snap, creds)
		switch {
		case err != nil:
			w.report(Transition{Action: "release", Primary: primary, Reason: "releasing commits that wait for lost acknowledgements: " + err.Error()})
		case done:
			w.report(Transition{Action: "release", Primary: primary, Reason: what})
			w.poke()
		case what != w.releaseWhy:
			// Not proven lost: said once per reason (it is looked at again every two intervals).
			w.report(Transition{Action: "release", Primary: primary, Reason: "commits wait for acknowledgements, left waiting: " + what})
		}
		w.releaseWhy = what
	}()
}
