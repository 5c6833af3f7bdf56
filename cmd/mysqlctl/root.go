package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

// Set at link time by the Makefile (-X main.version=… etc.).
var (
	version string
	commit  string
	date    string
)

// run executes the command line and returns the exit code; it is main's only call so that
// every deferred function runs before the process exits.
func run() cmdutil.ExitCode {
	// controller-runtime's client logs through a global logger; mysqlctl reports errors itself.
	ctrllog.SetLogger(logr.Discard())
	// So do client-go's informers (a watch that ended during an API server restart is retried
	// by them, and watch reports the API's errors itself): nothing is printed behind its back.
	klog.SetLogger(logr.Discard())
	f := newFactory(iostreams.System(), os.Args[0], os.Getenv)
	return execute(f, NewCmdRoot(f), os.Args[1:])
}

func newFactory(ios *iostreams.IOStreams, argv0 string, getenv func(string) string) *cmdutil.Factory {
	name := "mysqlctl"
	if strings.HasPrefix(filepath.Base(argv0), "kubectl-") {
		name = "kubectl mysql"
	}
	return &cmdutil.Factory{
		IOStreams:   ios,
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		Build:       cmdutil.NewBuildInfo(version, commit, date),
		DisplayName: name,
		Getenv:      getenv,
	}
}

// execute runs root with args and turns the outcome into an exit code, printing the error
// (and, for usage errors, the usage line) to stderr.
func execute(f *cmdutil.Factory, root *cobra.Command, args []string) cmdutil.ExitCode {
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return cmdutil.ExitOK
	}
	// cobra reports an unknown subcommand as a plain error; it is a usage error.
	if strings.HasPrefix(err.Error(), "unknown command ") {
		err = &cmdutil.FlagError{Err: err}
	}
	printError(f, cmd, err)
	return cmdutil.ExitCodeFor(err)
}

func printError(f *cmdutil.Factory, cmd *cobra.Command, err error) {
	ios := f.IOStreams
	st := ios.ErrStyles()
	fmt.Fprintf(ios.ErrOut, "%s %s\n", st.Error("error:"), err.Error())
	var flagErr *cmdutil.FlagError
	if errors.As(err, &flagErr) && cmd != nil {
		use := cmd.UseLine()
		if cmd.HasAvailableSubCommands() && !cmd.Runnable() {
			use = cmd.CommandPath() + " [command]"
		}
		fmt.Fprintf(ios.ErrOut, "\nUsage:\n  %s\n\nRun '%s --help' for more information.\n", use, cmd.CommandPath())
	}
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	var configFile, color string
	root := &cobra.Command{
		Use:   "mysqlctl",
		Short: "Create and operate MySQL primary/replica clusters on Kubernetes",
		Long: `mysqlctl creates MySQL (and MariaDB) primary/replica clusters on Kubernetes and operates
them: planned switchover, failover of a dead primary, rolling upgrades of the image or my.cnf
(replicas first, the primary's role handed over by switchover), and 'watch', a supervisor that
detects a dead primary and fails over by itself. Every operation records its stages and the evidence behind each decision in the MysqlCluster
status, so an interrupted operation resumes exactly where it stopped.

Connection flags (--kubeconfig, --context, -n) work as in kubectl. Flags marked configurable
can also be set with MYSQLCTL_<FLAG> environment variables or in the config file
(` + cmdutil.DefaultConfigFile() + `); flags on the command line win, then the
environment, then the config file.

Exit codes: 0 done, 1 failed, 2 usage error, 3 timed out, 4 refused as unsafe,
5 another actor holds the cluster, 6 refused by configuration (RBAC, or the API
server cannot reach a pod's node: the message says what to change).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: f.DisplayName},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.ApplyConfig(cmd.Flags(), configFile, f.Getenv); err != nil {
				return &cmdutil.FlagError{Err: err}
			}
			if err := f.IOStreams.SetColorMode(color); err != nil {
				return &cmdutil.FlagError{Err: err}
			}
			return nil
		},
	}
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	root.SetIn(f.IOStreams.In)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.FlagError{Err: err} })
	root.CompletionOptions.DisableDefaultCmd = true

	pf := root.PersistentFlags()
	f.ConfigFlags.AddFlags(pf)
	pf.StringVar(&configFile, "config", "", "Config file (default "+cmdutil.DefaultConfigFile()+"; also MYSQLCTL_CONFIG)")
	pf.StringVar(&color, "color", iostreams.ColorAuto, "Colour output: auto, always or never (NO_COLOR is honoured in auto)")
	cmdutil.MarkConfigurable(pf, "kubeconfig", "context", "namespace", "cluster", "user", "request-timeout", "color")
	_ = root.RegisterFlagCompletionFunc("color", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{iostreams.ColorAuto, iostreams.ColorAlways, iostreams.ColorNever}, cobra.ShellCompDirectiveNoFileComp
	})

	root.AddCommand(
		NewCmdVersion(f, nil),
		NewCmdCompletion(f, nil),
		NewCmdInstall(f, nil),
		NewCmdCreate(f, nil),
		NewCmdGet(f, nil),
		NewCmdDelete(f, nil),
		NewCmdApply(f, nil),
		NewCmdReconcile(f, nil),
		NewCmdStatus(f, nil),
		NewCmdSwitchover(f, nil),
		NewCmdUpgrade(f, nil),
		NewCmdScale(f, nil),
		NewCmdRebuild(f, nil),
		NewCmdFailover(f, nil),
		NewCmdResume(f, nil),
		NewCmdAbort(f, nil),
		NewCmdWatch(f, nil),
		NewCmdBackup(f),
		NewCmdRestore(f, nil),
		NewCmdAgent(f),
	)
	registerNameCompletion(root, f)
	return root
}

// example formats a help example: each entry is a "# comment" line followed by the command, with
// the program's display name substituted for "%[1]s".
func example(f *cmdutil.Factory, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 && strings.HasPrefix(l, "#") {
			b.WriteString("\n")
		}
		// Comment lines name no program: a plain replacement, never a format with a missing
		// verb (which printed "%!(EXTRA …)" after them).
		b.WriteString("  " + strings.ReplaceAll(l, "%[1]s", f.DisplayName) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
