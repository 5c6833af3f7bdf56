package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// planFlags are the --dry-run and -o flags of commands that can print their plan.
type planFlags struct {
	DryRun cmdutil.DryRun
	Output string
}

// dryRun reports whether only the plan is wanted. The plan is worked out by mysqlctl from the
// servers it observes, so there is no server-side variant.
func (p planFlags) dryRun() bool { return p.DryRun != "" && p.DryRun != cmdutil.DryRunNone }

func addPlanFlags(cmd *cobra.Command, p *planFlags) {
	cmdutil.AddDryRunFlag(cmd, &p.DryRun, "Print the plan, with the evidence it was decided from, and change nothing (none or client; a bare --dry-run means client)")
	cmd.Flags().StringVarP(&p.Output, "output", "o", "text", "Output format of --dry-run: text, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"text", cmdutil.OutputJSON, cmdutil.OutputYAML}, cobra.ShellCompDirectiveNoFileComp
	})
}

func (p planFlags) validate() error {
	if p.Output != "text" && !p.dryRun() {
		return cmdutil.FlagErrorf("-o applies to --dry-run only")
	}
	return cmdutil.ValidateOutput(p.Output, "text", cmdutil.OutputJSON, cmdutil.OutputYAML)
}

// withPlanner builds a Runner for read-only planning: no lease is taken and nothing is written.
func withPlanner(ctx context.Context, f *cmdutil.Factory, dialer string, timeout time.Duration, fn func(context.Context, *orchestrate.Runner) (orchestrate.Plan, error)) (orchestrate.Plan, error) {
	c, err := f.Client()
	if err != nil {
		return orchestrate.Plan{}, err
	}
	connect, closeFn, err := f.Connector(dialer)
	if err != nil {
		return orchestrate.Plan{}, err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := fn(ctx, &orchestrate.Runner{Kube: c, Connect: connect, Holder: holderName()})
	if err != nil && ctx.Err() != nil {
		// --timeout passed while planning: exit code 3, as for the operation itself.
		return p, fmt.Errorf("%w after %s while planning: %w", outcomeTimedOut(), timeout, err)
	}
	return p, err
}

// printPlan writes the plan and returns outcome.ErrUnsafe when the operation would refuse, so
// that a dry run's exit code says what the real run would do.
func printPlan(w io.Writer, format string, p orchestrate.Plan) error {
	if format != "text" {
		if err := cmdutil.PrintStructured(w, format, p); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "Plan for %s of %s (dry run: nothing was changed)\n", p.Type, p.Cluster)
		fmt.Fprintf(w, "  primary:    %s\n", p.Primary)
		if p.Verdict != "" {
			fmt.Fprintf(w, "  verdict:    %s\n", p.Verdict)
			for _, e := range p.Detection {
				fmt.Fprintf(w, "              - %s\n", e)
			}
		}
		if p.Fence != "" {
			fmt.Fprintf(w, "  fence:      %s\n", p.Fence)
		}
		if p.Candidate != "" {
			fmt.Fprintf(w, "  candidate:  %s (%s)\n", p.Candidate, p.CandidateReason)
			fmt.Fprintf(w, "  its GTIDs:  %s\n", p.CandidateGTIDSet)
		}
		for i, r := range p.Rejected {
			label := "  rejected:   "
			if i > 0 {
				label = "              "
			}
			fmt.Fprintf(w, "%s%s\n", label, r)
		}
		if p.Refusal == "" {
			fmt.Fprintf(w, "  stages:     %s\n", strings.Join(p.Stages, " → "))
		}
	}
	if p.Refusal != "" {
		return fmt.Errorf("%w: the %s would refuse: %s", outcome.ErrUnsafe, p.Type, p.Refusal)
	}
	return nil
}

// reportFinished prints the newest history record of the type, with the elapsed time.
func reportFinished(w io.Writer, c *v1.MysqlCluster, typ string, elapsed time.Duration) {
	msg := typ + " finished"
	for _, h := range c.Status.History {
		if h.Type == typ {
			msg = h.Message
			break
		}
	}
	fmt.Fprintf(w, "%s (%s)\n", msg, elapsed.Round(time.Millisecond))
}
