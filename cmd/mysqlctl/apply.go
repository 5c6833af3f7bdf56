package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// ApplyOptions holds the apply command's flags.
type ApplyOptions struct {
	create     *CreateOptions
	Wait       bool
	timeoutSet bool
}

// NewCmdApply creates or updates a cluster from a file and converges its objects.
func NewCmdApply(f *cmdutil.Factory, runF func(*ApplyOptions) error) *cobra.Command {
	o := &ApplyOptions{create: &CreateOptions{f: f, Output: "yaml"}}
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update a cluster from a file and converge its objects",
		Long: `Apply server-side applies the MysqlCluster in FILE (creating it when absent) and then converges
the objects derived from it. Objects that already match send no write, so applying an unchanged
file changes nothing. A changed spec touches only what it changes. A changed pod template (a
new image, mysqlConfig or resources) of a running cluster is rolled out by the same operation as
'upgrade NAME', started right after the apply and followed to its outcome (handed to the 'watch'
that supervises the cluster, when one does): replicas first, the primary's role handed over by
switchover, the old primary last. A new image is checked against the version rules before
anything is written (exit code 4 when refused).

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
			o.timeoutSet = cmd.Flags().Changed("timeout")
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
	cmd.Flags().DurationVar(&o.create.Timeout, "timeout", 10*time.Minute, "With --wait: how long to wait; for a rollout of a changed pod template: how long it may take (default 30m)")
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
	running, before, err := o.checkTemplateChange(ctx, c)
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
	if running {
		after, err := podTemplate(ctx, c, cluster)
		if err != nil {
			return err
		}
		if before != nil && after != nil && !equality.Semantic.DeepEqual(before, after) {
			return o.rollOut(ctx)
		}
	}
	if !o.Wait {
		return nil
	}
	return runBootstrap(ctx, f, client.ObjectKeyFromObject(cluster), o.create.Dialer, o.create.Timeout, true)
}

// checkTemplateChange reads, before anything is written, whether the cluster runs (so that a
// changed pod template is rolled out after the apply) and its StatefulSet's pod template. A new
// image is checked against the version rules first: a refused one changes nothing (exit 4).
func (o *ApplyOptions) checkTemplateChange(ctx context.Context, c client.Client) (bool, *corev1.PodTemplateSpec, error) {
	desired := o.create.Cluster
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		return false, nil, cmdutil.ExplainAPIError(err)
	}
	if live.Status.Phase != v1.PhaseRunning || live.Status.CurrentPrimary == "" {
		return false, nil, nil
	}
	if desired.Spec.Image != "" && desired.Spec.Image != live.Spec.Image {
		p, err := planUpgrade(ctx, o.create.f, o.create.Dialer, o.upgradeTimeout(), client.ObjectKeyFromObject(live), desired.Spec.Image)
		if err != nil {
			return false, nil, err
		}
		if err := upgradeRefused(p); err != nil {
			return false, nil, err
		}
	}
	tpl, err := podTemplate(ctx, c, live)
	return true, tpl, err
}

// podTemplate is the pod template of the cluster's StatefulSet (nil when it does not exist).
func podTemplate(ctx context.Context, c client.Client, cluster *v1.MysqlCluster) (*corev1.PodTemplateSpec, error) {
	sts := &appsv1.StatefulSet{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: orchestrate.StatefulSetName(cluster)}
	if err := c.Get(ctx, key, sts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, cmdutil.ExplainAPIError(err)
	}
	return &sts.Spec.Template, nil
}

// rollOut starts the upgrade of a running cluster whose pod template the apply changed: handed to
// the watch that supervises it, or run here, and followed to its outcome.
func (o *ApplyOptions) rollOut(ctx context.Context) error {
	f, name := o.create.f, o.create.Cluster.Name
	fmt.Fprintf(f.IOStreams.ErrOut, "the pod template of %s changed: rolling it out, one pod at a time (as '%s upgrade %s')\n", name, f.DisplayName, name)
	up := &UpgradeOptions{f: f, Name: name, Timeout: o.upgradeTimeout(), Dialer: o.create.Dialer, Wait: true}
	return up.Run(ctx)
}

// upgradeTimeout bounds a rollout started by apply: --timeout when given, else upgrade's default.
func (o *ApplyOptions) upgradeTimeout() time.Duration {
	if o.timeoutSet {
		return o.create.Timeout
	}
	return defaultUpgradeTimeout
}
