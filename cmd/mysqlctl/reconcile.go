package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// ReconcileOptions holds the reconcile command's flags.
type ReconcileOptions struct {
	f *cmdutil.Factory

	Name    string
	Timeout time.Duration
	Dialer  string
	Wait    bool
}

// NewCmdReconcile converges a cluster's objects and drives its bootstrap to the end.
func NewCmdReconcile(f *cmdutil.Factory, runF func(*ReconcileOptions) error) *cobra.Command {
	o := &ReconcileOptions{f: f}
	cmd := &cobra.Command{
		Use:   "reconcile NAME",
		Short: "Converge a cluster's objects to its spec and finish its bootstrap",
		Long: `Reconcile applies the objects derived from the cluster's spec (sending nothing when they already
match) and, when the cluster has not been bootstrapped yet or a bootstrap was interrupted, runs
the bootstrap from the stage recorded in its status until the cluster is Running.

Progress goes to stderr, one line per stage change. Exit code 3 when --timeout passes first (the
recorded stage stays, and a later reconcile resumes there). --wait=false only applies the
objects: no bootstrap, and no re-join of replicas.`,
		Example: example(f,
			"# Converge and wait until the cluster runs",
			"%[1]s reconcile demo",
			"# From inside the cluster, reaching pods directly",
			"%[1]s reconcile demo --dialer direct --timeout 10m"),
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
	addBootstrapWaiting(cmd, &o.Wait, true, &o.Timeout, 10*time.Minute)
	addDialerFlag(cmd, &o.Dialer)
	return cmd
}

func addDialerFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "dialer", cmdutil.DialerAuto, "How to reach MySQL in pods: auto, direct (pod IP) or port-forward (through the API server)")
	cmdutil.MarkConfigurable(cmd.Flags(), "dialer")
}

// Run applies the derived objects and bootstraps.
func (o *ReconcileOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	if _, err := orchestrate.EnsureSecret(ctx, c, cluster); err != nil {
		return err
	}
	var applied []orchestrate.AppliedObject
	if cluster.Status.Operation == nil && cluster.Status.Scale == nil {
		// While an operation or a scale is recorded its stages own the derived objects (a
		// StatefulSet applied from this read could undo a scale's step): nothing is applied.
		if applied, err = orchestrate.ApplyDerived(ctx, c, cluster, specs.ConvergenceFromStatus(cluster, true)); err != nil {
			return cmdutil.ExplainAPIError(err)
		}
	}
	for _, a := range applied {
		if a.Result != orchestrate.Unchanged {
			fmt.Fprintln(o.f.IOStreams.Out, a)
		}
	}
	if !o.Wait {
		return nil
	}
	return runBootstrap(ctx, o.f, client.ObjectKeyFromObject(cluster), o.Dialer, o.Timeout, true)
}

// loadCluster reads the named cluster in the namespace of the connection flags.
func loadCluster(ctx context.Context, f *cmdutil.Factory, name string) (client.Client, *v1.MysqlCluster, error) {
	return loadClusterIn(ctx, f, "", name)
}

// loadClusterIn is loadCluster in namespace ns ("": the command line's namespace).
func loadClusterIn(ctx context.Context, f *cmdutil.Factory, ns, name string) (client.Client, *v1.MysqlCluster, error) {
	c, err := f.Client()
	if err != nil {
		return nil, nil, err
	}
	if ns == "" {
		var err error
		if ns, err = f.Namespace(); err != nil {
			return nil, nil, err
		}
	}
	cluster := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("MysqlCluster %s/%s not found: '%s get -n %s' lists the clusters there (another namespace: -n NAMESPACE)", ns, name, f.DisplayName, ns)
		}
		return nil, nil, cmdutil.ExplainAPIError(err)
	}
	return c, cluster, nil
}

// failpointPauseAtStage names an environment variable that makes a bootstrap hold at a stage
// (before running it) until the process is killed. Only end-to-end tests set it.
const failpointPauseAtStage = "MYSQLCTL_FAILPOINT_PAUSE_AT_STAGE"

// failpointHoldAtStage names an environment variable, STAGE=DURATION, that makes `watch` hold
// the first run of a stage for that long (before running it) and then go on: a fault injected
// meanwhile meets the operation at that stage (end-to-end tests only).
const failpointHoldAtStage = "MYSQLCTL_FAILPOINT_HOLD_AT_STAGE"

// failpointStopBeforeMutation names an environment variable that makes the CLI stop itself
// (SIGSTOP) right before the first mutation of the named stage (end-to-end tests only).
const failpointStopBeforeMutation = "MYSQLCTL_FAILPOINT_STOP_BEFORE_MUTATION"

// armFailpoints sets r's test hooks from failpointPauseAtStage and failpointStopBeforeMutation
// (end-to-end tests only; nothing happens without them).
func armFailpoints(f *cmdutil.Factory, r *orchestrate.Runner) {
	ios := f.IOStreams
	if stage := f.Getenv(failpointPauseAtStage); stage != "" {
		// Announce the stage, then hold until killed.
		r.BeforeStage = func(ctx context.Context, s string) {
			if s == stage {
				fmt.Fprintf(ios.ErrOut, "failpoint: paused at stage %s\n", s)
				<-ctx.Done()
			}
		}
	}
	if stage := f.Getenv(failpointStopBeforeMutation); stage != "" {
		// Freeze this process (SIGSTOP, as a laptop lid or a VM pause would) right before the
		// first mutation of the stage; SIGCONT resumes it.
		var once sync.Once
		r.BeforeMutation = func(s, what string) {
			if s == stage {
				once.Do(func() {
					fmt.Fprintf(ios.ErrOut, "failpoint: stopping before %s at stage %s\n", what, s)
					stopSelf()
				})
			}
		}
	}
}

// runBootstrap drives the bootstrap (or, with converge, re-joins replicas) under the lease,
// with progress on stderr.
func runBootstrap(ctx context.Context, f *cmdutil.Factory, key client.ObjectKey, dialer string, timeout time.Duration, converge bool) error {
	_, cluster, err := loadCluster(ctx, f, key.Name)
	if err != nil {
		return err
	}
	err = withRunner(ctx, f, cluster, dialer, timeout, func(ctx context.Context, r *orchestrate.Runner) error {
		if converge {
			return r.Converge(ctx, key)
		}
		return r.Bootstrap(ctx, key)
	})
	if err != nil {
		return err
	}
	return reportPhase(ctx, f, key)
}

// reportPhase prints the cluster's phase as it is now; a Degraded cluster is reported with its
// reason and exit code 4, never as Running.
func reportPhase(ctx context.Context, f *cmdutil.Factory, key client.ObjectKey) error {
	_, after, err := loadCluster(ctx, f, key.Name)
	if err != nil {
		return err
	}
	phase := after.Status.Phase
	if phase == v1.PhaseRunning {
		fmt.Fprintf(f.IOStreams.Out, "mysqlcluster.mysqlctl.io/%s is Running\n", key.Name)
		return nil
	}
	reason := ""
	if c := meta.FindStatusCondition(after.Status.Conditions, v1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		reason = ": " + c.Message
	}
	fmt.Fprintf(f.IOStreams.Out, "mysqlcluster.mysqlctl.io/%s is %s%s\n", key.Name, phase, reason)
	// Degraded: what could be done was done, and what could not be proven safe was refused.
	return fmt.Errorf("%w: cluster %s is %s%s", outcome.ErrUnsafe, key.Name, phase, reason)
}

// holderName names this process in Leases and operation records: the host and PID a person
// can find it by, and a per-process nonce, because two containers on one host can share a
// hostname and both run as PID 1.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("mysqlctl@%s/%d-%s", host, os.Getpid(), processNonce)
}

var processNonce = newNonce()

// newNonce returns six random hex digits.
func newNonce() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func outcomeTimedOut() error { return outcome.ErrTimedOut }
