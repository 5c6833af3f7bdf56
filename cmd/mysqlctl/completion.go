package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

// NewCmdCompletion prints a shell completion script. It never builds a Kubernetes client.
func NewCmdCompletion(f *cmdutil.Factory, runF func(shell string) error) *cobra.Command {
	shells := []string{"bash", "zsh", "fish", "powershell"}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print a completion script for the given shell. The scripts are also committed under
completions/ in the repository. For the kubectl plugin, kubectl (1.26+) completes
"kubectl mysql" through the kubectl_complete-mysql helper that "make install" installs.`,
		Example: example(f,
			"# Load completion into the current bash session",
			"source <(%[1]s completion bash)",
			"# Install for zsh",
			"%[1]s completion zsh > \"${fpath[1]}/_mysqlctl\""),
		ValidArgs: shells,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.FlagErrorf("completion needs exactly one shell: bash, zsh, fish or powershell")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(args[0])
			}
			root, out := cmd.Root(), f.IOStreams.Out
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return cmdutil.FlagErrorf("unsupported shell %q: use bash, zsh, fish or powershell", args[0])
		},
	}
}

// takesClusterName lists the commands whose one argument is the NAME of an existing cluster.
var takesClusterName = []string{"status", "switchover", "failover", "resume", "abort", "reconcile", "delete", "watch", "upgrade", "scale", "rebuild"}

// registerNameCompletion completes cluster names after every command that takes NAME, and
// instance names after --to, from the cluster the connection flags point at (-n, --context,
// --kubeconfig given on the line being completed count).
func registerNameCompletion(root *cobra.Command, f *cmdutil.Factory) {
	for _, c := range root.Commands() {
		if !slices.Contains(takesClusterName, c.Name()) {
			continue
		}
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 && cmd.Name() == "rebuild" {
				return instanceNames(cmd.Context(), f, args[0], toComplete), cobra.ShellCompDirectiveNoFileComp
			}
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return clusterNames(cmd.Context(), f, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		for _, flag := range []string{"to", "from"} {
			if c.Flags().Lookup(flag) == nil {
				continue
			}
			_ = c.RegisterFlagCompletionFunc(flag, func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return instanceNames(cmd.Context(), f, args[0], toComplete), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
}

// completionTimeout bounds the API calls a completion makes: a shell must not hang on a slow
// or unreachable API server.
const completionTimeout = 3 * time.Second

// clusterNames lists the clusters of the namespace whose names start with prefix (none when
// the API server cannot be asked).
func clusterNames(ctx context.Context, f *cmdutil.Factory, prefix string) []string {
	ctx, c, ns, cancel, ok := completionClient(ctx, f)
	defer cancel()
	if !ok {
		return nil
	}
	list := &v1.MysqlClusterList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []string
	for _, item := range list.Items {
		if strings.HasPrefix(item.Name, prefix) {
			out = append(out, item.Name)
		}
	}
	return out
}

// instanceNames lists the instances of the cluster (NAME-0 … NAME-N-1), the current primary
// left out: it is never the target of --to.
func instanceNames(ctx context.Context, f *cmdutil.Factory, cluster, prefix string) []string {
	_, _, mc, cancel := completionCluster(ctx, f, cluster)
	defer cancel()
	if mc == nil {
		return nil
	}
	var out []string
	for i := range mc.Spec.Replicas {
		name := fmt.Sprintf("%s-%d", cluster, i)
		if name != mc.Status.CurrentPrimary && strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// completionCluster is completionClient and the named cluster of the line's namespace (nil when
// it cannot be read).
func completionCluster(ctx context.Context, f *cmdutil.Factory, name string) (context.Context, client.Client, *v1.MysqlCluster, context.CancelFunc) {
	ctx, c, ns, cancel, ok := completionClient(ctx, f)
	if !ok {
		return ctx, nil, nil, cancel
	}
	mc := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
		return ctx, nil, nil, cancel
	}
	return ctx, c, mc, cancel
}

// completionClient returns a bounded context, a client and the namespace of the line being
// completed; ok is false when the connection flags lead nowhere (completion then offers nothing).
func completionClient(ctx context.Context, f *cmdutil.Factory) (context.Context, client.Client, string, context.CancelFunc, bool) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	c, err := f.Client()
	if err != nil {
		return ctx, nil, "", cancel, false
	}
	ns, err := f.Namespace()
	return ctx, c, ns, cancel, err == nil
}
