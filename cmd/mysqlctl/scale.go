package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// defaultScaleTimeout bounds a whole scale unless --timeout says otherwise.
const defaultScaleTimeout = 30 * time.Minute

// ScaleOptions holds the scale command's flags.
type ScaleOptions struct {
	f *cmdutil.Factory

	Name         string
	Replicas     int32
	DeleteData   bool
	NoSwitchover bool
	Timeout      time.Duration
	Dialer       string
	Wait         bool
	Plan         planFlags
	resumeOnly   bool
	// namespace is the cluster's namespace when it is not the command line's (apply -f).
	namespace string
}

// NewCmdScale adds or removes instances.
func NewCmdScale(f *cmdutil.Factory, runF func(*ScaleOptions) error) *cobra.Command {
	o := &ScaleOptions{f: f}
	cmd := &cobra.Command{
		Use:   "scale NAME --replicas N",
		Short: "Add replicas seeded from the cluster, or remove instances without losing the primary",
		Long: `Scale moves the cluster to N instances, one instance at a time, each step recorded in the
cluster's status so that 'resume NAME' continues an interrupted scale where it stopped.

An instance is added in four stages:

  AddingInstance     its pod is created and becomes Ready (read-only, not replicating)
  Seeding            it gets its data: by replay when the primary's binary logs still hold every
                     transaction, otherwise by a copy from a donor replica (on MariaDB a Job
                     running mariadb-dump from the donor into it, loaded without binary logging
                     at the donor's GTID position)
  JoiningInstance    its history is proven an ancestor of the primary's (else it is quarantined)
                     and its provenance is recorded in status.gtidBootstrap
  VerifyingInstance  it replicates from the primary and has caught up; only then does it join
                     the replica Service

Instances are removed from the highest ordinal down: each leaves the replica Service and stops
replicating (DetachingInstance) before its pod is deleted (RemovingInstance). Its data volume is
kept unless --delete-data. When the primary's ordinal would go, its role first moves to the
lowest healthy ordinal that stays, by a switchover (refused with --no-switchover). A scale that
leaves fewer replicas than semiSync.waitForReplicas is refused (exit code 4): commits would stall.`,
		Example: example(f,
			"# Add two replicas to a 3-instance cluster",
			"%[1]s scale demo --replicas 5",
			"# Show the steps of a scale down, changing nothing",
			"%[1]s scale demo --replicas 2 --dry-run",
			"# Remove instances and delete their data volumes",
			"%[1]s scale demo --replicas 2 --delete-data"),
		Args: cmdutil.ExactArgs(1, "the NAME of the cluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if !cmd.Flags().Changed("replicas") {
				return cmdutil.FlagErrorf("--replicas is required: the number of instances, primary included (1 to 64)")
			}
			if o.Replicas < 1 || o.Replicas > 64 {
				return cmdutil.FlagErrorf("--replicas %d: a cluster has 1 to 64 instances", o.Replicas)
			}
			if err := validateTimeout(o.Timeout); err != nil {
				return err
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
	cmd.Flags().Int32Var(&o.Replicas, "replicas", 0, "The number of instances to have, primary included (1 to 64)")
	cmd.Flags().BoolVar(&o.DeleteData, "delete-data", false, "Delete the data volume of each removed instance (kept by default, and reused if it is added again)")
	cmd.Flags().BoolVar(&o.NoSwitchover, "no-switchover", false, "Refuse a scale that would remove the primary instead of switching over first")
	addDialerFlag(cmd, &o.Dialer)
	addPlanFlags(cmd, &o.Plan)
	addOperationWaiting(cmd, &o.Wait, &o.Timeout, defaultScaleTimeout)
	return cmd
}

// Run plans the scale, refuses what is unsafe, and carries it out (or hands it to the watch).
func (o *ScaleOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadClusterIn(ctx, o.f, o.namespace, o.Name)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cluster)
	if !o.resumeOnly {
		p, err := planScale(ctx, o.f, o.Dialer, o.Timeout, key, o.Replicas, o.NoSwitchover)
		if err != nil {
			return err
		}
		if o.Plan.dryRun() {
			return printScalePlan(o.f.IOStreams.Out, o.Plan.Output, p)
		}
		if p.Refusal != "" {
			return fmt.Errorf("%w: scale of %s to %d refused, nothing was changed: %s", outcome.ErrUnsafe, p.Cluster, p.To, p.Refusal)
		}
		if len(p.Steps) == 0 && cluster.Status.Scale == nil && cluster.Spec.Replicas == o.Replicas {
			fmt.Fprintf(o.f.IOStreams.Out, "%s already has %d instance(s): nothing to do\n", cluster.Name, o.Replicas)
			return nil
		}
	}
	start := time.Now()
	n := o.Replicas
	req := v1.Request{Type: orchestrate.RequestScale, Replicas: &n, DeleteData: o.DeleteData, NoSwitchover: o.NoSwitchover}
	if o.resumeOnly {
		req = v1.Request{Type: orchestrate.RequestResume}
	}
	msg, err := runOrHand(ctx, o.f, cluster, o.Dialer, o.Timeout, o.Wait, req, func(ctx context.Context, r *orchestrate.Runner) error {
		return r.Scale(ctx, key, orchestrate.ScaleOptions{Replicas: o.Replicas, DeleteData: o.DeleteData, NoSwitchover: o.NoSwitchover, ResumeOnly: o.resumeOnly})
	})
	if err != nil {
		return err
	}
	return reportOutcome(ctx, o.f, cluster, orchestrate.OperationScale, o.Wait, msg, start)
}

// planScale works out the scale from the recorded status; nothing changes.
func planScale(ctx context.Context, f *cmdutil.Factory, dialer string, timeout time.Duration, key client.ObjectKey, n int32, noSwitchover bool) (orchestrate.ScalePlan, error) {
	var p orchestrate.ScalePlan
	_, err := withPlanner(ctx, f, dialer, timeout, func(ctx context.Context, r *orchestrate.Runner) (orchestrate.Plan, error) {
		var err error
		p, err = r.PlanScale(ctx, key, n, noSwitchover)
		return orchestrate.Plan{}, err
	})
	return p, err
}

func printScalePlan(w io.Writer, format string, p orchestrate.ScalePlan) error {
	if format != "text" {
		return cmdutil.PrintStructured(w, format, p)
	}
	fmt.Fprintf(w, "Plan for scale of %s from %d to %d instances (dry run: nothing was changed)\n", p.Cluster, p.From, p.To)
	fmt.Fprintf(w, "  primary:    %s\n", p.Primary)
	if p.SemiSync != "" {
		fmt.Fprintf(w, "  semi-sync:  %s\n", p.SemiSync)
	}
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  step %d:     %s\n", i+1, s)
	}
	if p.Refusal != "" {
		fmt.Fprintf(w, "  refused:    %s\n", p.Refusal)
	}
	return nil
}
