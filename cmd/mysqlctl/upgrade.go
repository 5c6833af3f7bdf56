package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// defaultUpgradeTimeout bounds a whole rollout unless --timeout says otherwise.
const defaultUpgradeTimeout = 30 * time.Minute

// UpgradeOptions holds the upgrade command's flags.
type UpgradeOptions struct {
	f *cmdutil.Factory

	Name         string
	Image        string
	Timeout      time.Duration
	BarrierBound time.Duration
	Dialer       string
	Wait         bool
	Plan         planFlags
	resumeOnly   bool
	// namespace is the cluster's namespace when it is not the command line's (apply -f of a
	// file that names one).
	namespace string
}

// NewCmdUpgrade rolls a new pod template (image, configuration, resources) out.
func NewCmdUpgrade(f *cmdutil.Factory, runF func(*UpgradeOptions) error) *cobra.Command {
	o := &UpgradeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "upgrade NAME [--image IMAGE]",
		Short: "Restart every instance on a new image or configuration, replicas first, primary last",
		Long: `Upgrade rolls the cluster's pod template out one pod at a time: a new image (--image), or a
changed mysqlConfig or resources already in the spec. The StatefulSet holds every pod back until
upgrade lowers its partition, one pod at a time, each step recorded in the cluster's status:

  Preparing         the cluster is healthy; the version rules hold against what the servers
                    report (no downgrade across a series, MySQL 8.0 to 8.4 only from 8.0.37, no
                    LTS skipped, MariaDB upward only, no change of product)
  TemplatePending   the next pod (replicas first, highest ordinal first) restarts on the new template
  TemplateReady     its barrier: it runs the version its image promises, replicates from the primary
                    with both threads running, has applied everything the primary had, and
                    acknowledges semi-sync when the spec asks; readiness alone is not enough
  ReplicasVerified  the primary's pod is next: its role moves first, by a switchover of its own
                    (fence, catch up, promote) to a replica already on the new template
  PrimaryReady      every pod runs the new template and the cluster is healthy

A barrier that does not hold within --barrier-timeout (5 minutes) stops the rollout with the
reason (exit code 4);
nothing restarts after it. 'resume NAME' continues an interrupted or stopped upgrade from
Preparing; writes stop only during the handoff switchover.`,
		Example: example(f,
			"# Move the cluster to MariaDB 11.4",
			"%[1]s upgrade demo --image mariadb:11.4",
			"# Show the order of restarts, the version checks and the switchover target, changing nothing",
			"%[1]s upgrade demo --image mariadb:11.4 --dry-run",
			"# Roll out a mysqlConfig change written by 'reconcile', or continue a stopped rollout",
			"%[1]s upgrade demo"),
		Args: cmdutil.ExactArgs(1, "the NAME of the cluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := validateTimeout(o.Timeout); err != nil {
				return err
			}
			if o.BarrierBound <= 0 {
				return cmdutil.FlagErrorf("--barrier-timeout must be positive")
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
	cmd.Flags().StringVar(&o.Image, "image", "", "The image to move to, with a version tag (for example mariadb:11.4); default: the spec's image")
	cmd.Flags().DurationVar(&o.BarrierBound, "barrier-timeout", 5*time.Minute, "How long each restarted pod may take to pass its barrier (a replica with a long backlog to apply needs more) before the rollout stops")
	addDialerFlag(cmd, &o.Dialer)
	addPlanFlags(cmd, &o.Plan)
	addOperationWaiting(cmd, &o.Wait, &o.Timeout, defaultUpgradeTimeout)
	return cmd
}

// Run checks the image, records it in the spec and rolls it out (or resumes the recorded upgrade).
func (o *UpgradeOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, cluster, err := loadClusterIn(ctx, o.f, o.namespace, o.Name)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cluster)
	if o.Image != "" {
		if _, err := failover.ParseImage(o.Image); err != nil {
			return fmt.Errorf("%w: %w", outcome.ErrInvalid, err)
		}
	}
	if up := cluster.Status.Upgrade; up != nil && o.Image != "" && up.ToImage != "" && up.ToImage != o.Image && !o.Plan.dryRun() {
		// Its pods may already run the recorded image: the rollout finishes (or is aborted)
		// before the spec names another.
		return fmt.Errorf("%w: the upgrade of %s to %s is recorded (%s): run 'resume %s' to finish it, or 'abort %s', then upgrade to %s",
			outcome.ErrUnsafe, cluster.Name, up.ToImage, up.Barrier, cluster.Name, cluster.Name, o.Image)
	}
	if o.Plan.dryRun() || (o.Image != "" && o.Image != cluster.Spec.Image) {
		// The version rules are checked against the servers before anything changes.
		p, err := planUpgrade(ctx, o.f, o.Dialer, o.Timeout, key, o.Image)
		if err != nil {
			return err
		}
		if o.Plan.dryRun() {
			return printUpgradePlan(o.f.IOStreams.Out, o.Plan.Output, p)
		}
		if err := upgradeRefused(p); err != nil {
			return err
		}
		if err := o.setImage(ctx, cluster); err != nil {
			return err
		}
	}
	start := time.Now()
	req := v1.Request{Type: orchestrate.RequestUpgrade}
	if o.resumeOnly {
		req = v1.Request{Type: orchestrate.RequestResume}
	}
	msg, err := runOrHand(ctx, o.f, cluster, o.Dialer, o.Timeout, o.Wait, req, func(ctx context.Context, r *orchestrate.Runner) error {
		return r.Upgrade(ctx, key, orchestrate.UpgradeOptions{ResumeOnly: o.resumeOnly, BarrierBound: o.BarrierBound})
	})
	if err != nil {
		return err
	}
	return reportOutcome(ctx, o.f, cluster, orchestrate.OperationUpgrade, o.Wait, msg, start)
}

// setImage records the new image in the spec; the StatefulSet's partition keeps every pod on
// the old one until the upgrade moves it.
func (o *UpgradeOptions) setImage(ctx context.Context, cluster *v1.MysqlCluster) error {
	c, err := o.f.Client()
	if err != nil {
		return err
	}
	// A compare-and-swap on the spec read before the plan (its generation, which status writes
	// do not move): a spec another command changed after the version rules were checked
	// against it is not overwritten.
	image, err := json.Marshal(o.Image)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/generation","value":%d},{"op":"replace","path":"/spec/image","value":%s}]`, cluster.Generation, image)
	if err := c.Patch(ctx, cluster, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		// A failed test is refused as invalid (422): the generation read again tells it from
		// an image the API server's validation refuses.
		now := &v1.MysqlCluster{}
		if apierrors.IsInvalid(err) && c.Get(ctx, client.ObjectKeyFromObject(cluster), now) == nil && now.Generation != cluster.Generation {
			return fmt.Errorf("%w: %s changed while the upgrade was checked (another command wrote it); nothing was changed: look at 'status %s' and run the upgrade again", outcome.ErrHeld, cluster.Name, cluster.Name)
		}
		return fmt.Errorf("setting spec.image of %s: %w", cluster.Name, cmdutil.ExplainAPIError(err))
	}
	return nil
}

// planUpgrade works out the upgrade of the cluster to image ("": the spec's image), the
// version rules checked against what the servers report; nothing changes.
func planUpgrade(ctx context.Context, f *cmdutil.Factory, dialer string, timeout time.Duration, key client.ObjectKey, image string) (orchestrate.UpgradePlan, error) {
	var p orchestrate.UpgradePlan
	_, err := withPlanner(ctx, f, dialer, timeout, func(ctx context.Context, r *orchestrate.Runner) (orchestrate.Plan, error) {
		var err error
		p, err = r.PlanUpgrade(ctx, key, image)
		return orchestrate.Plan{}, err
	})
	return p, err
}

// upgradeRefused is the refusal (exit code 4) of a plan the version rules refuse.
func upgradeRefused(p orchestrate.UpgradePlan) error {
	if p.Refusal == "" {
		return nil
	}
	return fmt.Errorf("%w: upgrade of %s to %s refused, nothing was changed: %s", outcome.ErrUnsafe, p.Cluster, p.Image, p.Refusal)
}

func printUpgradePlan(w io.Writer, format string, p orchestrate.UpgradePlan) error {
	if format != "text" {
		return cmdutil.PrintStructured(w, format, p)
	}
	fmt.Fprintf(w, "Plan for upgrade of %s to %s (dry run: nothing was changed)\n", p.Cluster, p.Image)
	fmt.Fprintf(w, "  primary:    %s\n", p.Primary)
	for i, v := range p.Versions {
		label := "  versions:   "
		if i > 0 {
			label = "              "
		}
		fmt.Fprintf(w, "%s%s\n", label, v)
	}
	if p.VersionCheck != "" {
		fmt.Fprintf(w, "  check:      %s\n", p.VersionCheck)
	}
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  step %d:     %s\n", i+1, s)
	}
	if p.Refusal != "" {
		fmt.Fprintf(w, "  refused:    %s\n", p.Refusal)
		return fmt.Errorf("%w: %s", outcome.ErrUnsafe, p.Refusal)
	}
	return nil
}
