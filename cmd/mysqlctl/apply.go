package main

import (
	"context"
	"fmt"
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
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
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
file changes nothing (unless a newer mysqlctl changed the pod template: that rolls out as below).
A changed spec touches only what it changes.

A changed pod template (a new image, mysqlConfig or resources) never restarts a pod by itself:
when the cluster is Running, apply then rolls it out by the same operation as 'upgrade NAME'
and follows it to its outcome (handed to the 'watch' that supervises the cluster, when one
does): replicas first, the primary's role handed over by switchover, the old primary last. So
does an apply whose pods still run an older template (an earlier rollout did not finish). A
cluster that is not Running, a single instance, or an upgrade recorded as stopped or aborted is
left to 'upgrade NAME', as stderr says. A rollout that fails exits with its own code; what the
apply wrote stays written.

What the apply would change is worked out before anything is written, and then written while
holding the cluster's lease. Nothing at all is written when the apply is refused:
  - exit code 5 while another actor holds the cluster, or while an operation recorded in its
    status (a switchover, failover, …) would have its StatefulSet, configuration or Services
    changed under it: wait for it, or finish it with 'resume NAME' or undo it with 'abort NAME';
  - exit code 4 when fewer replicas would remove the current primary's pod: move the primary
    to a lower ordinal with 'switchover NAME --to NAME-0' first;
  - exit code 4 when a new image breaks the version rules (checked against what the servers
    report, as 'upgrade --image' does).

With --wait it also bootstraps a new cluster, or re-joins replicas of a running one, and waits.
A rollout (or a scale) that apply starts is bounded by --timeout when it is given, else by
upgrade's own default (30m), with or without --wait.`,
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
	addBootstrapWaiting(cmd, &o.Wait, false, &o.create.Timeout, 10*time.Minute)
	addDialerFlag(cmd, &o.create.Dialer)
	return cmd
}

// Validate checks the command line (pure).
func (o *ApplyOptions) Validate() error {
	if o.create.File == "" {
		return cmdutil.FlagErrorf("apply needs -f FILE")
	}
	return validateTimeout(o.create.Timeout)
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
	if _, err := specs.RenderMyCnf(cluster); err != nil {
		return err
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	existed, before, err := o.checkImageChange(ctx, c)
	if err != nil {
		return err
	}
	res, err := orchestrate.ApplyCluster(ctx, c, cluster, holderName())
	out := f.IOStreams.Out
	if res.Cluster != "" {
		fmt.Fprintf(out, "mysqlcluster.mysqlctl.io/%s %s\n", cluster.Name, res.Cluster)
	}
	if res.SecretCreated {
		fmt.Fprintf(out, "secret/%s created (random passwords)\n", specs.SecretName(cluster))
	}
	for _, a := range res.Derived {
		if a.Result != orchestrate.Unchanged {
			fmt.Fprintln(out, a)
		}
	}
	if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	if existed {
		if err := o.scaleIfPending(ctx, c); err != nil {
			return err
		}
		if err := o.rollOutIfPending(ctx, c, before); err != nil {
			return err
		}
	}
	if !o.Wait {
		return nil
	}
	return runBootstrap(ctx, f, client.ObjectKeyFromObject(cluster), o.create.Dialer, o.create.Timeout, true)
}

// checkImageChange reads, before anything is written, whether the cluster exists and its
// StatefulSet's pod template. A new image for a cluster that has run is checked against the
// version rules (against what the servers report, or last reported): a refused one changes
// nothing (exit 4).
func (o *ApplyOptions) checkImageChange(ctx context.Context, c client.Client) (bool, *corev1.PodTemplateSpec, error) {
	desired := o.create.Cluster
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		return false, nil, cmdutil.ExplainAPIError(err)
	}
	if live.Status.CurrentPrimary != "" && desired.Spec.Image != "" && desired.Spec.Image != live.Spec.Image {
		p, err := planUpgrade(ctx, o.create.f, o.create.Dialer, o.upgradeTimeout(), client.ObjectKeyFromObject(live), desired.Spec.Image)
		if err != nil {
			return false, nil, err
		}
		if err := upgradeRefused(p); err != nil {
			return false, nil, err
		}
	}
	if n := desired.Spec.Replicas; live.Status.CurrentPrimary != "" && n != 0 && n != live.Spec.Replicas && !removesPrimary(live, n) {
		// The scale this apply starts is planned before anything is written (an apply that
		// would remove the primary's pod is refused later, with the switchover to run).
		p, err := planScale(ctx, o.create.f, o.create.Dialer, o.upgradeTimeout(), client.ObjectKeyFromObject(live), n, false)
		if err != nil {
			return false, nil, err
		}
		if p.Refusal != "" {
			return false, nil, fmt.Errorf("%w: scale of %s to %d refused, nothing was changed: %s", outcome.ErrUnsafe, p.Cluster, n, p.Refusal)
		}
	}
	tpl, err := podTemplate(ctx, c, live)
	return true, tpl, err
}

// removesPrimary reports whether n instances leave out the recorded primary's ordinal.
func removesPrimary(c *v1.MysqlCluster, n int32) bool {
	ord, ok := orchestrate.OrdinalOf(c, c.Status.CurrentPrimary)
	return ok && ord >= n
}

// rollOutIfPending starts the upgrade of a running cluster whose pods do not all run the pod
// template: because this apply changed it, or because an earlier one did and its rollout did not
// finish. A recorded upgrade (stopped or aborted) is left to 'upgrade', and so is a cluster that
// cannot roll now; both are said on stderr.
func (o *ApplyOptions) rollOutIfPending(ctx context.Context, c client.Client, before *corev1.PodTemplateSpec) error {
	f, name := o.create.f, o.create.Cluster.Name
	after, err := podTemplate(ctx, c, o.create.Cluster)
	if err != nil {
		return err
	}
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(o.create.Cluster), live); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	pending := before != nil && after != nil && !equality.Semantic.DeepEqual(before, after)
	if !pending && live.Status.Upgrade == nil {
		if pending, err = (&orchestrate.Runner{Kube: c}).RolloutPending(ctx, live); err != nil {
			return cmdutil.ExplainAPIError(err)
		}
	}
	later := func(why string) error {
		fmt.Fprintf(f.IOStreams.ErrOut, "the pod template of %s is not rolled out: %s; '%s upgrade %s' rolls it out\n", name, why, f.DisplayName, name)
		return nil
	}
	switch {
	case !pending && live.Status.Upgrade != nil:
		return later("an upgrade is recorded (stopped or aborted)")
	case !pending:
		return nil
	case live.Status.Phase != v1.PhaseRunning || live.Status.CurrentPrimary == "":
		return later(fmt.Sprintf("the cluster is %s, not Running", live.Status.Phase))
	case live.Spec.Replicas < 2:
		return later("a single instance cannot restart without stopping writes, so apply never restarts it")
	}
	fmt.Fprintf(f.IOStreams.ErrOut, "the pod template of %s changed: rolling it out, one pod at a time (as '%s upgrade %s')\n", name, f.DisplayName, name)
	up := &UpgradeOptions{f: f, Name: name, namespace: live.Namespace, Timeout: o.upgradeTimeout(), Dialer: o.create.Dialer, Wait: true}
	if err := up.Run(ctx); err != nil {
		return fmt.Errorf("the apply was written, and its rollout did not finish: %w; '%s upgrade %s' continues it", err, f.DisplayName, name)
	}
	return nil
}

// scaleIfPending runs the scale of a bootstrapped cluster whose spec.replicas this apply (or an
// earlier one) changed: the StatefulSet keeps its count until the scale moves it, one instance
// at a time.
func (o *ApplyOptions) scaleIfPending(ctx context.Context, c client.Client) error {
	f, name := o.create.f, o.create.Cluster.Name
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(o.create.Cluster), live); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	pending, err := orchestrate.ScalePending(ctx, c, live)
	if err != nil || !pending {
		return cmdutil.ExplainAPIError(err)
	}
	fmt.Fprintf(f.IOStreams.ErrOut, "spec.replicas of %s is %d: scaling to it, one instance at a time (as '%s scale %s --replicas %d')\n", name, live.Spec.Replicas, f.DisplayName, name, live.Spec.Replicas)
	sc := &ScaleOptions{f: f, Name: name, namespace: live.Namespace, Replicas: live.Spec.Replicas, Timeout: o.upgradeTimeout(), Dialer: o.create.Dialer, Wait: true, Plan: planFlags{Output: "text"}}
	if err := sc.Run(ctx); err != nil {
		return fmt.Errorf("the apply was written, and its scale did not finish: %w; '%s resume %s' continues it", err, f.DisplayName, name)
	}
	return nil
}

// podTemplate is the pod template of the cluster's StatefulSet (nil when it does not exist).
func podTemplate(ctx context.Context, c client.Client, cluster *v1.MysqlCluster) (*corev1.PodTemplateSpec, error) {
	sts := &appsv1.StatefulSet{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: specs.StatefulSetName(cluster)}
	if err := c.Get(ctx, key, sts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, cmdutil.ExplainAPIError(err)
	}
	return &sts.Spec.Template, nil
}

// upgradeTimeout bounds a rollout started by apply: --timeout when given, else upgrade's default.
func (o *ApplyOptions) upgradeTimeout() time.Duration {
	if o.timeoutSet {
		return o.create.Timeout
	}
	return defaultUpgradeTimeout
}
