package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// SwitchoverOptions holds the switchover command's flags.
type SwitchoverOptions struct {
	f *cmdutil.Factory

	Name           string
	To             string
	Timeout        time.Duration
	CatchUpTimeout time.Duration
	Dialer         string
	Wait           bool
	Plan           planFlags
	resumeOnly     bool
}

// NewCmdSwitchover moves the primary role in a planned way.
func NewCmdSwitchover(f *cmdutil.Factory, runF func(*SwitchoverOptions) error) *cobra.Command {
	o := &SwitchoverOptions{f: f}
	cmd := &cobra.Command{
		Use:   "switchover NAME [--to INSTANCE]",
		Short: "Move the primary role to a replica with zero data loss",
		Long: `Switchover is a planned primary change. Stage by stage, each recorded in the cluster's status
with its evidence before the next begins:

  Validating           the target replicates from the primary, threads running, lag within bounds,
                       no errant transactions (without --to: the most advanced such replica)
  Fencing              the primary is made read-only and its client connections are killed; the
                       fence is verified and the primary's GTID set at that moment recorded
  WaitingForCandidate  the target applies everything up to that set (bounded by --catch-up-timeout;
                       on timeout the fence is undone and the switchover fails, exit code 4)
  Promoting            the target stops replicating, becomes semi-sync source and writable
  MovingPrimary        the role labels move, so the primary Service follows
  Repointing           the other replicas and the old primary replicate from the new primary
  Verifying            every replica is proven to replicate from it

Writes are refused from the fence to the promotion (typically well under a second). Only one
actor changes a cluster at a time: a second one gets exit code 5 naming the holder. An
interrupted switchover continues with 'resume NAME'.`,
		Example: example(f,
			"# Hand the primary role to demo-1",
			"%[1]s switchover demo --to demo-1",
			"# Let mysqlctl choose the best replica",
			"%[1]s switchover demo",
			"# Show which replica would be chosen, and why, without changing anything",
			"%[1]s switchover demo --dry-run"),
		Args: cmdutil.ExactArgs(1, "the NAME of the cluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if o.CatchUpTimeout <= 0 {
				return cmdutil.FlagErrorf("--catch-up-timeout must be positive, got %s", o.CatchUpTimeout)
			}
			if err := o.Plan.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.To, "to", "", "The replica to promote (default: the best candidate)")
	cmd.Flags().DurationVar(&o.CatchUpTimeout, "catch-up-timeout", 30*time.Second, "How long the fenced primary waits for the target to catch up before the switchover is undone")
	addDialerFlag(cmd, &o.Dialer)
	addPlanFlags(cmd, &o.Plan)
	addOperationWaiting(cmd, &o.Wait, &o.Timeout, 5*time.Minute)
	return cmd
}

// Run performs (or resumes) the switchover under the cluster's lease.
func (o *SwitchoverOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cluster)
	opts := orchestrate.SwitchoverOptions{To: o.To, CatchUpTimeout: o.CatchUpTimeout, ResumeOnly: o.resumeOnly}
	if o.Plan.dryRun() {
		p, err := withPlanner(ctx, o.f, o.Dialer, o.Timeout, func(ctx context.Context, r *orchestrate.Runner) (orchestrate.Plan, error) {
			return r.PlanSwitchover(ctx, key, opts)
		})
		if err != nil {
			return err
		}
		return printPlan(o.f.IOStreams.Out, o.Plan.Output, p)
	}
	start := time.Now()
	req := v1.Request{Type: orchestrate.RequestSwitchover, To: o.To, CatchUpTimeout: &metav1.Duration{Duration: o.CatchUpTimeout}}
	if o.resumeOnly {
		req = v1.Request{Type: orchestrate.RequestResume}
	}
	msg, err := runOrHand(ctx, o.f, cluster, o.Dialer, o.Timeout, o.Wait, req, func(ctx context.Context, r *orchestrate.Runner) error {
		return r.Switchover(ctx, key, opts)
	})
	if err != nil {
		return err
	}
	return reportOutcome(ctx, o.f, cluster, orchestrate.OperationSwitchover, o.Wait, msg, start)
}

// withRunner takes the cluster's lease, builds a Runner with progress on stderr, runs fn, and
// releases the lease. A deadline becomes exit code 3; another holder exit code 5.
func withRunner(ctx context.Context, f *cmdutil.Factory, cluster *v1.MysqlCluster, dialer string, timeout time.Duration, fn func(context.Context, *orchestrate.Runner) error) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	connect, closeFn, err := f.Connector(dialer)
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	holder := holderName()
	// A command that would continue a recorded operation waits for a dead holder's lease to
	// expire; one that would start a new operation is refused at once while another actor
	// holds the cluster.
	lctx, lease, err := orchestrate.AcquireLease(ctx, c, cluster, holder, orchestrate.LeaseOptions{Wait: cluster.Status.Operation != nil})
	if err != nil {
		return err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	ios := f.IOStreams
	start := time.Now()
	r := &orchestrate.Runner{
		Kube: c, Connect: connect, Holder: holder, Epoch: lease.Epoch, Lease: lease,
		Progress: func(op v1.OperationStatus) {
			line := fmt.Sprintf("[%6.1fs] %s %s", time.Since(start).Seconds(), op.Type, op.Stage)
			if op.Message != "" {
				line += ": " + op.Message
			}
			fmt.Fprintln(ios.ErrOut, line)
		},
	}
	armFailpoints(f, r)
	err = fn(lctx, r)
	if lerr := lease.LostErr(); lerr != nil {
		// Why it was lost (taken over, deleted, or not renewed in time) comes first: the
		// action's own error is only how the loss cut it short.
		return fmt.Errorf("lost the lease on %s (%w); its recorded stage is kept for whoever holds it now: %w", cluster.Name, lerr, err)
	}
	if err != nil && ctx.Err() != nil {
		// The command's own --timeout passed (a server's dial or query timeout inside it is
		// reported as itself).
		return fmt.Errorf("%w after %s: %w (run 'resume %s' to continue from the recorded stage)", outcomeTimedOut(), timeout, err, cluster.Name)
	}
	return err
}
