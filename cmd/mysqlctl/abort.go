package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// AbortOptions holds the abort command's flags.
type AbortOptions struct {
	f *cmdutil.Factory

	Name    string
	Timeout time.Duration
	Dialer  string
	Wait    bool
}

// NewCmdAbort rolls back the operation recorded in a cluster's status.
func NewCmdAbort(f *cmdutil.Factory, runF func(*AbortOptions) error) *cobra.Command {
	o := &AbortOptions{f: f}
	cmd := &cobra.Command{
		Use:   "abort NAME",
		Short: "Roll back the switchover or failover recorded in a cluster's status",
		Long: `Abort rolls back an interrupted or stuck operation where a rollback is defined, and records it
in the history as Aborted:

  switchover, before Promoting   the old primary is made writable again
  failover, before Promoting     the replicas' receivers are restarted and the old primary is put
                                 back in the primary Service; the cluster stays Degraded

The rollback is recorded first (stage RollingBack) and then carried out, so an abort that is
itself interrupted is finished by 'resume NAME'. Once a candidate has been promoted it may have taken writes, so nothing can be rolled back: abort
refuses with exit code 4 and 'resume NAME' finishes the operation. Bootstrap has no rollback
either. With no operation recorded there is nothing to abort: it says so and exits 0. Abort takes the cluster's lease like any other change (exit code 5 if another
actor holds it).`,
		Example: example(f,
			"# Undo a switchover stuck waiting for its target",
			"%[1]s abort demo"),
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
	addOperationWaiting(cmd, &o.Wait, &o.Timeout, 2*time.Minute)
	addDialerFlag(cmd, &o.Dialer)
	return cmd
}

// Run rolls the recorded operation back under the cluster's lease.
func (o *AbortOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	msg, err := runOrHand(ctx, o.f, cluster, o.Dialer, o.Timeout, o.Wait, v1.Request{Type: orchestrate.RequestAbort}, func(ctx context.Context, r *orchestrate.Runner) error {
		msg, err := r.Abort(ctx, client.ObjectKeyFromObject(cluster))
		if err != nil {
			return err
		}
		fmt.Fprintln(o.f.IOStreams.Out, msg)
		return nil
	})
	if err == nil && msg != "" {
		fmt.Fprintln(o.f.IOStreams.Out, msg)
	}
	return err
}
