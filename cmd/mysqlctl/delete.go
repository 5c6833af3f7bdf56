package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// DeleteOptions holds the delete command's flags.
type DeleteOptions struct {
	f *cmdutil.Factory

	Name       string
	DeleteData bool
	Yes        bool
}

// NewCmdDelete deletes a cluster.
func NewCmdDelete(f *cmdutil.Factory, runF func(*DeleteOptions) error) *cobra.Command {
	o := &DeleteOptions{f: f}
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a MySQL cluster",
		Long: `Delete a MysqlCluster. Kubernetes removes the objects it owns (StatefulSet, pods, Services,
ConfigMap, PodDisruptionBudget). The data volumes (PersistentVolumeClaims) and the credentials
Secret are kept, so creating the cluster again under the same name finds its data; add
--delete-data to remove them too.

On a terminal, delete asks for confirmation; --yes skips the question (required when not on a
terminal).`,
		Example: example(f,
			"# Delete the cluster, keep its data",
			"%[1]s delete demo",
			"# Delete everything, data included, without asking",
			"%[1]s delete demo --delete-data --yes"),
		Args: cmdutil.ExactArgs(1, "the NAME of the cluster to delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if !o.Yes && !f.IOStreams.IsStdinTTY() {
				return cmdutil.FlagErrorf("not on a terminal, so delete cannot ask for confirmation: add --yes")
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.DeleteData, "delete-data", false, "Also delete the data volumes and the credentials Secret")
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "Do not ask for confirmation")
	return cmd
}

// Run deletes the cluster (and with --delete-data its volumes and Secret).
func (o *DeleteOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	ns := cluster.Namespace
	ios := o.f.IOStreams
	if !o.Yes {
		what := "its data volumes and credentials Secret are kept"
		if o.DeleteData {
			what = "ITS DATA VOLUMES AND CREDENTIALS SECRET ARE DELETED TOO"
		}
		fmt.Fprintf(ios.ErrOut, "Delete MySQL cluster %s/%s (%s)? Type the cluster name to confirm: ", ns, o.Name, what)
		answer, _ := bufio.NewReader(ios.In).ReadString('\n')
		if strings.TrimSpace(answer) != o.Name {
			return fmt.Errorf("not confirmed: nothing deleted")
		}
	}
	if err := c.Delete(ctx, cluster, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return cmdutil.ExplainAPIError(err)
	}
	fmt.Fprintf(ios.Out, "mysqlcluster.mysqlctl.io/%s deleted\n", o.Name)
	if !o.DeleteData {
		return nil
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, pvcs, client.InNamespace(ns), client.MatchingLabels(specs.SelectorLabels(cluster))); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	for i := range pvcs.Items {
		if err := c.Delete(ctx, &pvcs.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return cmdutil.ExplainAPIError(err)
		}
		fmt.Fprintf(ios.Out, "persistentvolumeclaim/%s deleted\n", pvcs.Items[i].Name)
	}
	secret := &corev1.Secret{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: specs.SecretName(cluster)}, secret); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return cmdutil.ExplainAPIError(err)
	}
	if secret.Labels[specs.LabelManagedBy] != specs.FieldOwner {
		// A Secret the user brought is theirs to delete.
		fmt.Fprintf(ios.Out, "secret/%s kept (not created by mysqlctl)\n", secret.Name)
		return nil
	}
	if err := c.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return cmdutil.ExplainAPIError(err)
	}
	fmt.Fprintf(ios.Out, "secret/%s deleted\n", secret.Name)
	return nil
}
