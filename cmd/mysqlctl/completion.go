package main

import (
	"github.com/spf13/cobra"

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
