package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// RebuildOptions holds the rebuild command's flags.
type RebuildOptions struct {
	f *cmdutil.Factory

	Name       string
	Instance   string
	Donor      string
	Timeout    time.Duration
	Dialer     string
	Wait       bool
	resumeOnly bool
}

// NewCmdRebuild re-seeds a quarantined or broken replica from a donor.
func NewCmdRebuild(f *cmdutil.Factory, runF func(*RebuildOptions) error) *cobra.Command {
	o := &RebuildOptions{f: f}
	cmd := &cobra.Command{
		Use:   "rebuild NAME INSTANCE [--from DONOR]",
		Short: "Replace a quarantined or broken replica's data with a copy from a healthy one",
		Long: `Rebuild replaces the data of one replica (quarantined for errant or divergent transactions,
or broken) with a copy of a donor's, each step recorded in the cluster's status:

  RebuildPreparing   the instance is quarantined (out of both Services, never elected) and the
                     donor proven: it replicates from the primary and holds nothing the primary
                     lacks (--from names it; default: the lowest-ordinal such replica, else the
                     primary)
  RebuildDetaching   the instance stops replicating
  Seeding            a Job copies the donor into it without binary logging; its old tables are
                     set aside in mysqlctl_aside_* schemas, not dropped
  JoiningInstance    its history is proven an ancestor of the primary's; its provenance recorded
  VerifyingInstance  it replicates and has caught up: it rejoins the replica Service, its old
                     data is dropped and its quarantine released

The primary is never rebuilt (exit 4): switch over first. 'resume NAME' continues an interrupted
rebuild. 'watch' suggests a rebuild for a quarantined instance but never runs one by itself; a
rebuild typed while a 'watch' supervises the cluster is handed to that watch, as a switchover is.`,
		Example: example(f,
			"# Rebuild a quarantined replica from the healthiest replica",
			"%[1]s rebuild demo demo-2",
			"# Rebuild it from a chosen donor",
			"%[1]s rebuild demo demo-2 --from demo-1",
			"# Hand the rebuild to the running watch and return once it has taken it",
			"%[1]s rebuild demo demo-2 --wait=false"),
		Args: cmdutil.ExactArgs(2, "the NAME of the cluster and the INSTANCE to rebuild"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.Instance = args[0], args[1]
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.Donor, "from", "", "The replica to copy from (default: the lowest-ordinal replica that replicates and holds nothing the primary lacks, else the primary)")
	addDialerFlag(cmd, &o.Dialer)
	addOperationWaiting(cmd, &o.Wait, &o.Timeout, defaultScaleTimeout)
	return cmd
}

// Run rebuilds the instance (or resumes the recorded rebuild).
func (o *RebuildOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cluster)
	start := time.Now()
	req := v1.Request{Type: orchestrate.RequestRebuild, Instance: o.Instance, Donor: o.Donor}
	if o.resumeOnly {
		req = v1.Request{Type: orchestrate.RequestResume}
	}
	msg, err := runOrHand(ctx, o.f, cluster, o.Dialer, o.Timeout, o.Wait, req, func(ctx context.Context, r *orchestrate.Runner) error {
		return r.Rebuild(ctx, key, orchestrate.RebuildOptions{Instance: o.Instance, Donor: o.Donor, ResumeOnly: o.resumeOnly})
	})
	if err != nil {
		return err
	}
	return reportOutcome(ctx, o.f, cluster, orchestrate.OperationRebuild, o.Wait, msg, start)
}
