package supervisor

import (
	"context"
	"fmt"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// cannotCheck is the supervisor's turn when the check of the primary was refused by
// configuration: the refusal is about the path, not the primary, so the check is no evidence
// either way. It counts toward no failover, and it breaks the run of consecutive failed checks
// (failed checks must be consecutive looks at the primary). The HA state is recorded Suspected
// with the refusal and what to do as its reason, and the refusal is reported loudly: it is
// returned (the supervisor prints each distinct error once, as a log line) and, once per
// distinct refusal, raised as a Warning Event. The supervisor keeps running and checks again
// every interval, so it resumes by itself once the configuration is fixed.
func (w *watcher) cannotCheck(ctx context.Context, c *v1.MysqlCluster, ch failover.Check, refused *topology.ConfigError) error {
	w.checks = nil
	primary := c.Status.CurrentPrimary
	reason := fmt.Sprintf("the primary %s cannot be checked from here: %v; that says nothing about the primary, and no failover is counted until this is fixed", primary, refused)
	a := failover.Assessment{State: failover.HASuspected, Reason: reason, Next: orchestrate.DetectionInterval(c)}
	j := failover.Judgement{Verdict: failover.Unreachable, Reason: reason}
	if err := w.record(ctx, c, a, j, ch); err != nil {
		return err
	}
	err := fmt.Errorf("supervising %s: %w", c.Name, refused)
	if err.Error() != w.lastErr {
		written := c.DeepCopy()
		w.side.Do(ctx, func(ctx context.Context) {
			w.s.Runner.Event(ctx, written, true, "PrimaryUncheckable", reason)
		})
	}
	return err
}
