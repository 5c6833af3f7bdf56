package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
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
apply (a changed image or my.cnf waits for 'upgrade', which rolls one pod at a time).

With --wait it also bootstraps a new cluster, or re-joins replicas of a running one, and waits.`,
		Example: example(f,
			"# Apply a cluster definition",
			"%[1]s apply -f manifests/examples/demo.yaml",
			"# Apply and wait until it runs",
			"%[1]s apply -f cluster.yaml --wait --timeout 10m"),
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.create.File == "" {
				return cmdutil.FlagErrorf("apply needs -f FILE")
			}
			if err := o.create.Complete(); err != nil {
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

// Run applies the cluster and its derived objects.
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
	key := client.ObjectKeyFromObject(cluster)
	existed, before := true, &v1.MysqlCluster{}
	if err := c.Get(ctx, key, before); apierrors.IsNotFound(err) {
		existed = false
		if _, err := orchestrate.CheckSecret(ctx, c, cluster); err != nil {
			return err
		}
	} else if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cluster)
	if err != nil {
		return err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	u := &unstructured.Unstructured{Object: m}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(orchestrate.FieldOwner), client.ForceOwnership); err != nil {
		return explainInvalid(err)
	}
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, key, live); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	ios := f.IOStreams
	verb := "configured"
	switch {
	case !existed:
		verb = "created"
	case before.ResourceVersion == live.ResourceVersion:
		verb = "unchanged"
	}
	fmt.Fprintf(ios.Out, "mysqlcluster.mysqlctl.io/%s %s\n", live.Name, verb)
	created, err := orchestrate.EnsureSecret(ctx, c, live)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(ios.Out, "secret/%s created (random passwords)\n", orchestrate.SecretName(live))
	}
	applied, err := orchestrate.ApplyDerived(ctx, c, live, orchestrate.ConvergenceFromStatus(live, true))
	if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	for _, a := range applied {
		if a.Result != orchestrate.Unchanged {
			fmt.Fprintf(ios.Out, "%s/%s %s\n", strings.ToLower(a.Kind), a.Name, a.Result)
		}
	}
	if !o.Wait {
		return nil
	}
	return runBootstrap(ctx, f, key, o.create.Dialer, o.create.Timeout, true)
}
