package cmdutil

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// DryRun is the value of a --dry-run flag, as in kubectl: none, client or server.
type DryRun string

// The --dry-run strategies.
const (
	// DryRunNone carries the command out.
	DryRunNone DryRun = "none"
	// DryRunClient works out and prints what would happen on this machine; nothing is sent
	// that could change anything.
	DryRunClient DryRun = "client"
	// DryRunServer sends the writes with dryRun=All: the API server validates and defaults them,
	// persists nothing.
	DryRunServer DryRun = "server"
)

// dryRunValue is the pflag.Value of --dry-run; it accepts only the strategies it is given.
type dryRunValue struct {
	target  *DryRun
	allowed []DryRun
}

func (v *dryRunValue) String() string { return string(*v.target) }
func (v *dryRunValue) Type() string   { return "string" }

func (v *dryRunValue) Set(s string) error {
	// The old boolean spelling (--dry-run=true) keeps working, as it does in kubectl.
	switch s {
	case "true":
		s = string(DryRunClient)
	case "false":
		s = string(DryRunNone)
	}
	for _, a := range v.allowed {
		if DryRun(s) == a {
			*v.target = a
			return nil
		}
	}
	names := make([]string, len(v.allowed))
	for i, a := range v.allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%q is not a dry-run strategy: use %s", s, strings.Join(names, ", "))
}

// AddDryRunFlag adds --dry-run[=STRATEGY] to cmd. A bare --dry-run means client. allowed lists
// the strategies the command implements beyond none and client.
func AddDryRunFlag(cmd *cobra.Command, target *DryRun, usage string, extra ...DryRun) {
	*target = DryRunNone
	allowed := append([]DryRun{DryRunNone, DryRunClient}, extra...)
	cmd.Flags().Var(&dryRunValue{target: target, allowed: allowed}, "dry-run", usage)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = string(DryRunClient)
	_ = cmd.RegisterFlagCompletionFunc("dry-run", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}
