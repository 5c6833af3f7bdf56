package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// ResumeOptions holds the resume command's flags.
type ResumeOptions struct {
	f *cmdutil.Factory

	Name    string
	Timeout time.Duration
	Dialer  string
	Wait    bool
}

// NewCmdResume continues the operation recorded in a cluster's status.
func NewCmdResume(f *cmdutil.Factory, runF func(*ResumeOptions) error) *cobra.Command {
	o := &ResumeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "resume NAME",
		Short: "Continue the operation recorded in a cluster's status",
		Long: `Resume continues the operation an interrupted command left in the cluster's status (a killed
laptop, a cancelled CI job) from exactly its recorded stage: a bootstrap, a converge, a
switchover, a failover, an upgrade, a scale or a rebuild. When the interrupted actor's lease has not expired yet, resume waits for it (a dead
actor stops renewing); an actor that is still alive is refused with exit code 5.`,
		Example: example(f,
			"# Continue whatever was interrupted",
			"%[1]s resume demo"),
		Args: cmdutil.ExactArgs(1, "the NAME of the cluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	addOperationWaiting(cmd, &o.Wait, &o.Timeout, 10*time.Minute)
	addDialerFlag(cmd, &o.Dialer)
	return cmd
}

// Run resumes the recorded operation.
func (o *ResumeOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	op := cluster.Status.Operation
	if up := cluster.Status.Upgrade; up != nil && up.Held && op == nil {
		fmt.Fprintf(o.f.IOStreams.Out, "nothing to resume: the upgrade %s of %s was aborted (pods on the new template: %s); run '%s upgrade %s' to continue it\n",
			up.ID, cluster.Name, strings.Join(up.Done, ", "), o.f.DisplayName, cluster.Name)
		return nil
	}
	if sc := cluster.Status.Scale; sc != nil && sc.Action == "rebuild" && (op == nil || op.Type == orchestrate.OperationRebuild) {
		return (&RebuildOptions{f: o.f, Name: o.Name, Timeout: o.Timeout, Dialer: o.Dialer, Wait: o.Wait, resumeOnly: true}).Run(ctx)
	}
	if cluster.Status.Scale != nil && (op == nil || op.Type == orchestrate.OperationScale) {
		// A scale continues as a whole, the instance in flight first.
		return (&ScaleOptions{f: o.f, Name: o.Name, Timeout: o.Timeout, Dialer: o.Dialer, Wait: o.Wait, Plan: planFlags{Output: "text"}, resumeOnly: true}).Run(ctx)
	}
	if cluster.Status.Upgrade != nil && (op == nil || op.Type == orchestrate.OperationUpgrade || orchestrate.IsHandoff(cluster, op)) {
		// An upgrade (its handoff switchover included) continues as a whole.
		return (&UpgradeOptions{f: o.f, Name: o.Name, Timeout: o.Timeout, Dialer: o.Dialer, Wait: o.Wait, Plan: planFlags{Output: "text"}, resumeOnly: true}).Run(ctx)
	}
	if op == nil {
		fmt.Fprintf(o.f.IOStreams.Out, "nothing to resume: no operation is recorded on %s\n", cluster.Name)
		return nil
	}
	key := client.ObjectKeyFromObject(cluster)
	switch op.Type {
	case orchestrate.OperationBootstrap, orchestrate.OperationConverge:
		msg, handed, err := handToWatch(ctx, o.f, cluster, v1.Request{Type: orchestrate.RequestResume}, o.Timeout, o.Wait)
		if handed || err != nil {
			if err == nil {
				fmt.Fprintln(o.f.IOStreams.Out, msg)
			}
			return err
		}
		if !o.Wait {
			return noWatchToHandTo(o.f, cluster, orchestrate.RequestResume)
		}
		return runBootstrap(ctx, o.f, key, o.Dialer, o.Timeout, true)
	case orchestrate.OperationSwitchover:
		return (&SwitchoverOptions{f: o.f, Name: o.Name, To: op.Target, Timeout: o.Timeout, CatchUpTimeout: 30 * time.Second, Dialer: o.Dialer, Wait: o.Wait, resumeOnly: true}).Run(ctx)
	case orchestrate.OperationFailover:
		// --force and its reason are in the recorded evidence: the resumed stages honour them.
		return (&FailoverOptions{f: o.f, Name: o.Name, To: op.Target, Timeout: o.Timeout, CatchUpTimeout: 30 * time.Second, Dialer: o.Dialer, Wait: o.Wait, Plan: planFlags{Output: "text"}, resumeOnly: true}).Run(ctx)
	}
	return fmt.Errorf("this mysqlctl cannot resume a %q operation (recorded by a newer version?)", op.Type)
}
