package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

// Every long command (one that carries out an operation, which can take minutes) waits the same
// way: the same --wait and --timeout, with the same help text, the same exit code 3 when the
// timeout passes, and one description of it all, in docs/operations.md, "Dry runs and waiting", which
// each one's help names. The flags are added here only, so they cannot drift apart.

// waitingSeeAlso ends the long help of every long command.
const waitingSeeAlso = `Waiting: --wait and --timeout work as for every long command (docs/operations.md, "Dry runs and waiting").`

// waitUsage is --wait on a command whose operation can be handed to a supervising watch.
const waitUsage = "Wait for the outcome and exit with it (progress on stderr). --wait=false hands the operation to the " +
	"running 'watch' that supervises the cluster and returns once it has taken it; without such a watch it is refused"

// bootstrapWaitUsage is --wait on the commands that write a cluster's objects and can then
// bootstrap it (or re-join its replicas): create, apply and reconcile.
const bootstrapWaitUsage = "Bootstrap the cluster (or re-join its replicas) and wait until it runs (progress on stderr); " +
	"--wait=false only writes its objects, and 'reconcile NAME' does the rest later"

// timeoutUsage is --timeout on every long command.
const timeoutUsage = "How long to wait for the outcome: once it passes, the command exits with code 3 and what it began " +
	"stays recorded at its stage ('resume NAME' continues it)"

// addOperationWaiting adds --wait (on by default; off hands the operation to the supervising
// watch) and --timeout (default def) to a command that carries out an operation, and points its
// help to how waiting works.
func addOperationWaiting(cmd *cobra.Command, wait *bool, timeout *time.Duration, def time.Duration) {
	cmd.Flags().BoolVar(wait, "wait", true, waitUsage)
	addTimeoutFlag(cmd, timeout, def)
}

// addBootstrapWaiting adds --wait (default waitDefault: run the bootstrap, or the re-join of
// replicas, here and wait for it) and --timeout (default def) to create, apply and reconcile,
// and points their help to how waiting works.
func addBootstrapWaiting(cmd *cobra.Command, wait *bool, waitDefault bool, timeout *time.Duration, def time.Duration) {
	cmd.Flags().BoolVar(wait, "wait", waitDefault, bootstrapWaitUsage)
	addTimeoutFlag(cmd, timeout, def)
}

// addTimeoutFlag adds the configurable --timeout and the help's pointer to how waiting works.
func addTimeoutFlag(cmd *cobra.Command, timeout *time.Duration, def time.Duration) {
	cmd.Flags().DurationVar(timeout, "timeout", def, timeoutUsage)
	cmdutil.MarkConfigurable(cmd.Flags(), "timeout")
	cmd.Long += "\n\n" + waitingSeeAlso
}

// validateTimeout refuses a --timeout that leaves no time to wait (a usage error, exit 2).
func validateTimeout(d time.Duration) error {
	if d <= 0 {
		return cmdutil.FlagErrorf("--timeout must be positive, got %s", d)
	}
	return nil
}

// reportOutcome prints how an operation carried out through runOrHand ended: with --wait, the
// finished operation's record as it is now in status; with --wait=false, that the supervising
// watch took it and how to follow it (msg), never an earlier operation's record.
func reportOutcome(ctx context.Context, f *cmdutil.Factory, cluster *v1.MysqlCluster, typ string, wait bool, msg string, start time.Time) error {
	if !wait {
		fmt.Fprintln(f.IOStreams.Out, msg)
		return nil
	}
	_, after, err := loadClusterIn(ctx, f, cluster.Namespace, cluster.Name)
	if err != nil {
		return err
	}
	reportFinished(f.IOStreams.Out, after, typ, time.Since(start))
	return nil
}
