package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// ApplyOptions holds the apply command's flags.
type ApplyOptions struct {
	create *CreateOptions
	Wait   bool
}

// NewCmdApply creates or updates a cluster from a file and converges its objects.
func NewCmdApply(f *cmdutil.Factory, runF func(*ApplyOptions) error) *cobra.Command {
	o := &ApplyOptions{create: &CreateOptions{f: f, Output: "yaml"}}
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update a cluster from a file and converge its objects",
		Long: `Apply server-side applies the MysqlCluster in FILE (creating it when absent) and then converges
the objects derived from it. Objects that already match send no write, so applying an unchanged
file changes nothing. A changed spec touches only what it changes; pods are never rolled by
apply: the StatefulSet's update partition keeps every pod on its template (rolling upgrades are
not built yet).

What the apply would change is worked out before anything is written, and then written while
holding the cluster's lease. Nothing at all is written when the apply is refused:
  - exit code 5 while another actor holds the cluster, or while an operation recorded in its
    status (a switchover, failover, …) would have its StatefulSet, configuration or Services
    changed under it: wait for it, or finish it with 'resume NAME' or undo it with 'abort NAME';
  - exit code 4 when fewer replicas would remove the current primary's pod: move the primary
    to a lower ordinal with 'switchover NAME --to NAME-0' first.

With --wait it also bootstraps a new cluster, or re-joins replicas of a running one, and waits.`,
		Example: example(f,
			"# Apply a cluster definition",
			"%[1]s apply -f manifests/examples/demo.yaml",
			"# Apply and wait until it runs",
			"%[1]s apply -f cluster.yaml --wait --timeout 10m"),
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Validate first: Complete reads the file it checks for.
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.create.File, "filename", "f", "", "The MysqlCluster YAML file")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "Bootstrap or re-join replicas and wait until the cluster runs")
	cmd.Flags().DurationVar(&o.create.Timeout, "timeout", 10*time.Minute, "With --wait: how long to wait")
	addDialerFlag(cmd, &o.create.Dialer)
	return cmd
}

// Validate checks the command line (pure).
func (o *ApplyOptions) Validate() error {
	if o.create.File == "" {
		return cmdutil.FlagErrorf("apply needs -f FILE")
	}
	return nil
}

// Complete reads the cluster definition from the file.
func (o *ApplyOptions) Complete() error { return o.create.Complete() }

// Run applies the cluster and its derived objects (see orchestrate.ApplyCluster for the guard
// against changing a cluster under a running operation or removing its primary).
func (o *ApplyOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	f, cluster := o.create.f, o.create.Cluster
	if _, err := orchestrate.RenderMyCnf(cluster); err != nil {
		return err
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	res, err := orchestrate.ApplyCluster(ctx, c, cluster, holderName())
	out := f.IOStreams.Out
	if res.Cluster != "" {
		fmt.Fprintf(out, "mysqlcluster.mysqlctl.io/%s %s\n", cluster.Name, res.Cluster)
	}
	if res.SecretCreated {
		fmt.Fprintf(out, "secret/%s created (random passwords)\n", orchestrate.SecretName(cluster))
	}
	for _, a := range res.Derived {
		if a.Result != orchestrate.Unchanged {
			fmt.Fprintf(out, "%s/%s %s\n", strings.ToLower(a.Kind), a.Name, a.Result)
		}
	}
	if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	if !o.Wait {
		return nil
	}
	return runBootstrap(ctx, f, client.ObjectKeyFromObject(cluster), o.create.Dialer, o.create.Timeout, true)
}
