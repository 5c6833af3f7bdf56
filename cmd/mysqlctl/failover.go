package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// FailoverOptions holds the failover command's flags.
type FailoverOptions struct {
	f *cmdutil.Factory

	Name           string
	To             string
	Force          bool
	Reason         string
	Timeout        time.Duration
	CatchUpTimeout time.Duration
	Dialer         string
	Wait           bool
	Plan           planFlags
	resumeOnly     bool
}

// NewCmdFailover replaces a dead primary.
func NewCmdFailover(f *cmdutil.Factory, runF func(*FailoverOptions) error) *cobra.Command {
	o := &FailoverOptions{f: f}
	cmd := &cobra.Command{
		Use:   "failover NAME [--to INSTANCE] [--force --reason TEXT]",
		Short: "Replace a dead primary with the safest replica",
		Long: `Failover is the unplanned primary change, for a primary that is dead. Stage by stage, each
recorded in the cluster's status with its evidence before the next begins:

  Confirming          the primary is checked failover.failureThreshold times, failover.detectionInterval
                      apart, and the replicas must agree: their receivers lost it. A primary that answers
                      and is writable is alive (use switchover); one the replicas still receive from is
                      unreachable, not dead. Either way the failover is refused (exit code 4).
  Fencing             the primary leaves the primary Service. If it answers (it restarted read-only) it
                      is fenced over SQL; otherwise every replica's receiver is stopped, which starves a
                      semi-synchronous primary of acknowledgements so that it cannot commit (this
                      needs semiSync enabled with a timeout of at least 1h, and every replica
                      reachable; when only silent replicas keep it from being proven, the old
                      primary is waited for, up to 30s, to be fenced over SQL). A fence that cannot
                      be proven is Blocked: the cluster is marked Degraded and nothing is promoted.
  Electing            a candidate must hold every other survivor's received and executed transactions,
                      have no errant ones (judged against the known primaries and the bootstrap
                      provenance) and no lag above failover.maxCandidateLag. A member that does not
                      answer blocks it, unless status.absentInstances records a bound on what that
                      member received (the primary's position after it was last able to receive)
                      and the candidate holds it. With no safe candidate the cluster is marked
                      Degraded with the reasons, and nothing is promoted.
  WaitingForRelayLog  the candidate applies everything it received (skipped when Electing saw it
                      had applied it all, and the fenced primary's set if it was fenced over SQL)
  Promoting           it stops replicating, becomes semi-sync source and writable
  MovingPrimary       the role labels move, so the primary Service follows
  Repointing          the other replicas replicate from it if their history is an ancestor of its own;
                      otherwise they are quarantined (status.errantInstances, out of the replica Service)
  Verifying           every serving replica is proven to replicate from it

When the old primary returns, 'reconcile' rejoins it as a replica only if its GTID set is contained
in the new primary's; otherwise it is quarantined with its divergent transactions.

--force, with --reason, overrides an unconfirmed death, a Blocked fence and the lack of a provably
safe candidate; the reason is recorded in the status, the history and an Event. An interrupted
failover continues with 'resume NAME'; before promotion, 'abort NAME' rolls it back.`,
		Example: example(f,
			"# The primary is dead: promote the safest replica",
			"%[1]s failover demo",
			"# See what a failover would do, and why, without doing it",
			"%[1]s failover demo --dry-run",
			"# A person knows better than the evidence (recorded as such)",
			`%[1]s failover demo --to demo-2 --force --reason "node demo-node-1 powered off, confirmed by the DC"`),
		Args: cmdutil.ExactArgs(1, "the NAME of the cluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if o.CatchUpTimeout <= 0 {
				return cmdutil.FlagErrorf("--catch-up-timeout must be positive, got %s", o.CatchUpTimeout)
			}
			if o.Force && strings.TrimSpace(o.Reason) == "" {
				return cmdutil.FlagErrorf("--force needs --reason TEXT: the reason is recorded with the forced decision")
			}
			if !o.Force && o.Reason != "" {
				return cmdutil.FlagErrorf("--reason goes with --force")
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
	cmd.Flags().StringVar(&o.To, "to", "", "The replica to promote (default: the safest candidate); it must still pass every check unless --force")
	cmd.Flags().BoolVar(&o.Force, "force", false, "Override an unconfirmed death, a Blocked fence or the lack of a provably safe candidate (needs --reason)")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why --force is justified; recorded in the status, the history and an Event")
	cmd.Flags().DurationVar(&o.CatchUpTimeout, "catch-up-timeout", 30*time.Second, "How long to wait for the candidate's relay log (and a reachable old primary's fenced transactions)")
	addDialerFlag(cmd, &o.Dialer)
	addPlanFlags(cmd, &o.Plan)
	addOperationWaiting(cmd, &o.Wait, &o.Timeout, 5*time.Minute)
	return cmd
}

func (o *FailoverOptions) options() orchestrate.FailoverOptions {
	return orchestrate.FailoverOptions{To: o.To, Force: o.Force, Reason: o.Reason, CatchUpTimeout: o.CatchUpTimeout, ResumeOnly: o.resumeOnly}
}

// Run performs (or resumes) the failover under the cluster's lease, or prints its plan.
func (o *FailoverOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cluster)
	if o.Plan.dryRun() {
		p, err := withPlanner(ctx, o.f, o.Dialer, o.Timeout, func(ctx context.Context, r *orchestrate.Runner) (orchestrate.Plan, error) {
			return r.PlanFailover(ctx, key, o.options())
		})
		if err != nil {
			return err
		}
		return printPlan(o.f.IOStreams.Out, o.Plan.Output, p)
	}
	start := time.Now()
	fo := o.options()
	req := v1.Request{Type: orchestrate.RequestFailover, To: fo.To, Force: fo.Force, Reason: fo.Reason, CatchUpTimeout: &metav1.Duration{Duration: fo.CatchUpTimeout}}
	if o.resumeOnly {
		req = v1.Request{Type: orchestrate.RequestResume}
	}
	msg, err := runOrHand(ctx, o.f, cluster, o.Dialer, o.Timeout, o.Wait, req, func(ctx context.Context, r *orchestrate.Runner) error {
		return r.Failover(ctx, key, fo)
	})
	if err != nil {
		return err
	}
	return reportOutcome(ctx, o.f, cluster, orchestrate.OperationFailover, o.Wait, msg, start)
}
