package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

// GetOptions holds the get command's flags.
type GetOptions struct {
	f *cmdutil.Factory

	AllNamespaces bool
	Output        string
	Now           func() time.Time
}

// NewCmdGet lists clusters.
func NewCmdGet(f *cmdutil.Factory, runF func(*GetOptions) error) *cobra.Command {
	o := &GetOptions{f: f, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "get",
		Short: "List MySQL clusters",
		Example: example(f,
			"# Clusters in the current namespace",
			"%[1]s get",
			"# In every namespace, as JSON",
			"%[1]s get -A -o json"),
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.ValidateOutput(o.Output, cmdutil.OutputTable, cmdutil.OutputWide, cmdutil.OutputJSON, cmdutil.OutputYAML); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List clusters in every namespace")
	cmdutil.AddOutputFlag(cmd, &o.Output, cmdutil.OutputTable, cmdutil.OutputWide, cmdutil.OutputJSON, cmdutil.OutputYAML)
	return cmd
}

// Run lists the clusters.
func (o *GetOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := o.f.Client()
	if err != nil {
		return err
	}
	var opts []client.ListOption
	if !o.AllNamespaces {
		ns, err := o.f.Namespace()
		if err != nil {
			return err
		}
		opts = append(opts, client.InNamespace(ns))
	}
	list := &v1.MysqlClusterList{}
	if err := c.List(ctx, list, opts...); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	ios := o.f.IOStreams
	switch o.Output {
	case cmdutil.OutputJSON, cmdutil.OutputYAML:
		list.APIVersion, list.Kind = v1.GroupVersion.String(), "MysqlClusterList"
		return cmdutil.PrintStructured(ios.Out, o.Output, list)
	}
	if len(list.Items) == 0 {
		if ios.IsStdoutTTY() {
			fmt.Fprintln(ios.ErrOut, "No MySQL clusters found.")
		}
		return nil
	}
	headers := []string{"name", "phase", "primary", "ready", "age"}
	if o.AllNamespaces {
		headers = append([]string{"namespace"}, headers...)
	}
	if o.Output == cmdutil.OutputWide {
		headers = append(headers, "image", "operation")
	}
	t := cmdutil.NewTable(ios, headers...)
	for _, m := range list.Items {
		age := m.CreationTimestamp.UTC().Format(time.RFC3339)
		if ios.IsStdoutTTY() {
			age = duration.HumanDuration(o.Now().Sub(m.CreationTimestamp.Time))
		}
		row := []string{m.Name, dash(string(m.Status.Phase)), dash(m.Status.CurrentPrimary), dash(m.Status.Ready), age}
		if o.AllNamespaces {
			row = append([]string{m.Namespace}, row...)
		}
		if o.Output == cmdutil.OutputWide {
			op := "-"
			if m.Status.Operation != nil {
				op = m.Status.Operation.Type + "/" + m.Status.Operation.Stage
			}
			row = append(row, m.Spec.Image, op)
		}
		t.AddRow(row...)
	}
	return t.Render()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
