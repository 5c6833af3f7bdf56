package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

// VersionOptions holds the version command's flags.
type VersionOptions struct {
	f      *cmdutil.Factory
	Output string
}

// NewCmdVersion prints build information. It never builds a Kubernetes client.
func NewCmdVersion(f *cmdutil.Factory, runF func(*VersionOptions) error) *cobra.Command {
	o := &VersionOptions{f: f}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of mysqlctl",
		Example: example(f,
			"# Show the version",
			"%[1]s version",
			"# Machine-readable build information",
			"%[1]s version -o json"),
		Args: cmdutil.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run()
		},
	}
	cmdutil.AddOutputFlag(cmd, &o.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML)
	return cmd
}

// Validate checks the flags.
func (o *VersionOptions) Validate() error {
	return cmdutil.ValidateOutput(o.Output, cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML)
}

// Run prints the version: aligned and styled for a person, key<TAB>value lines for a script.
func (o *VersionOptions) Run() error {
	ios, b := o.f.IOStreams, o.f.Build
	if o.Output != cmdutil.OutputTable {
		return cmdutil.PrintStructured(ios.Out, o.Output, b)
	}
	if !ios.IsStdoutTTY() {
		_, err := fmt.Fprintf(ios.Out, "version\t%s\ncommit\t%s\nbuilt\t%s\ngo\t%s\nplatform\t%s\n",
			b.Version, b.Commit, b.Date, b.GoVersion, b.Platform)
		return err
	}
	st := ios.Styles()
	_, err := fmt.Fprintf(ios.Out, "%s %s\n  %s %s\n  %s %s\n  %s %s %s\n",
		st.Bold(o.f.DisplayName), b.Version,
		st.Faint("commit"), b.Commit,
		st.Faint("built "), b.Date,
		st.Faint("go    "), b.GoVersion, b.Platform)
	return err
}
