package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

// longCommands are the commands that carry out an operation, each with a command line that
// passes every check but --timeout's. Those that can hand the operation to a supervising watch
// wait by default; create, apply and reconcile wait (bootstrap) as their --wait says.
var longCommands = []struct {
	args      []string
	bootstrap bool // --wait runs the bootstrap here (create, apply, reconcile)
}{
	{[]string{"create", "demo"}, true},
	{[]string{"apply", "-f", "cluster.yaml"}, true},
	{[]string{"reconcile", "demo"}, true},
	{[]string{"restore", "demo2", "--from", "demo"}, true},
	{[]string{"switchover", "demo"}, false},
	{[]string{"failover", "demo"}, false},
	{[]string{"upgrade", "demo"}, false},
	{[]string{"scale", "demo", "--replicas", "3"}, false},
	{[]string{"rebuild", "demo", "demo-2"}, false},
	{[]string{"resume", "demo"}, false},
	{[]string{"abort", "demo"}, false},
}

// notLong are commands with a --timeout that carry out no operation: install waits for the
// CRD to be established, and nothing is recorded for 'resume' to continue.
var notLong = map[string]bool{"install": true}

// TestLongCommandsWaitAlike: every long command has --wait and --timeout with the same help
// text (one per kind of --wait), --timeout configurable like any other, and help that points to
// the one description of waiting, which names every long command. A command that grows either
// flag without joining the list fails here.
func TestLongCommandsWaitAlike(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	root := NewCmdRoot(newFactory(ios, "mysqlctl", func(string) string { return "" }))
	long := map[string]bool{}
	manual, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(manual), "## Dry runs and waiting")
	if !ok {
		t.Fatal(`docs/operations.md has no "## Dry runs and waiting" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, lc := range longCommands {
		name := lc.args[0]
		long[name] = true
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		wait, timeout := cmd.Flags().Lookup("wait"), cmd.Flags().Lookup("timeout")
		if wait == nil || timeout == nil {
			t.Errorf("%s: --wait %v, --timeout %v: want both", name, wait != nil, timeout != nil)
			continue
		}
		wantUsage, wantDefault := waitUsage, "true"
		if lc.bootstrap {
			wantUsage, wantDefault = bootstrapWaitUsage, map[bool]string{true: "true", false: "false"}[name == "reconcile" || name == "restore"]
		}
		if wait.Usage != wantUsage || wait.DefValue != wantDefault {
			t.Errorf("%s --wait: default %s, help %q\nwant default %s, help %q", name, wait.DefValue, wait.Usage, wantDefault, wantUsage)
		}
		if d, err := time.ParseDuration(timeout.DefValue); timeout.Usage != timeoutUsage || err != nil || d <= 0 {
			t.Errorf("%s --timeout: default %s, help %q\nwant a positive default, help %q", name, timeout.DefValue, timeout.Usage, timeoutUsage)
		}
		if !strings.HasSuffix(cmd.Long, "\n\n"+waitingSeeAlso) || strings.Count(cmd.Long, waitingSeeAlso) != 1 {
			t.Errorf("%s: its help does not end with the pointer to how waiting works:\n%s", name, cmd.Long)
		}
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("docs/operations.md \"Dry runs and waiting\" does not name `%s`", name)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Flags().Lookup("wait") != nil || c.Flags().Lookup("timeout") != nil {
			if !long[c.Name()] && !notLong[c.Name()] {
				t.Errorf("%s has --wait or --timeout but is not among the long commands that wait alike", c.CommandPath())
			}
		}
	}
	walk(root)
}

// TestLongCommandsRefuseNoTimeout: a --timeout that leaves no time to wait is a usage error on
// every long command, given on the command line or by the environment (it is configurable on
// each), before anything is contacted.
func TestLongCommandsRefuseNoTimeout(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, lc := range longCommands {
		for _, tc := range []struct {
			how  string
			args []string
			env  map[string]string
		}{
			{"flag", append(append([]string{}, lc.args...), "--timeout", "0s"), nil},
			{"environment", lc.args, map[string]string{"MYSQLCTL_TIMEOUT": "0s"}},
		} {
			t.Run(lc.args[0]+"/"+tc.how, func(t *testing.T) {
				r := runCommand(t, runOpts{env: tc.env}, tc.args...)
				if r.code != cmdutil.ExitUsage || !strings.Contains(r.stderr, "--timeout must be positive, got 0s") {
					t.Errorf("exit %d, stderr %q; want exit %d refusing the timeout", r.code, r.stderr, cmdutil.ExitUsage)
				}
			})
		}
	}
}

// TestRebuildFlags parses rebuild's command line without any I/O (runF): the instance, donor
// and dialer, and --wait and --timeout as every long command has them.
func TestRebuildFlags(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	parse := func(args ...string) (*RebuildOptions, cmdResult) {
		t.Helper()
		ios, _, out, errOut := iostreams.Test()
		f := newFactory(ios, "mysqlctl", func(string) string { return "" })
		root := NewCmdRoot(f)
		for _, c := range root.Commands() {
			if c.Name() == "rebuild" {
				root.RemoveCommand(c)
			}
		}
		var got *RebuildOptions
		root.AddCommand(NewCmdRebuild(f, func(o *RebuildOptions) error { got = o; return nil }))
		code := execute(f, root, append([]string{"rebuild"}, args...))
		return got, cmdResult{stdout: out.String(), stderr: errOut.String(), code: code}
	}
	o, r := parse("demo", "demo-2")
	if r.code != cmdutil.ExitOK || o == nil {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if o.Name != "demo" || o.Instance != "demo-2" || o.Donor != "" || !o.Wait || o.Timeout != defaultScaleTimeout || o.Dialer != cmdutil.DialerAuto {
		t.Errorf("defaults: %+v; want waiting, --timeout %s", *o, defaultScaleTimeout)
	}
	o, r = parse("demo", "demo-2", "--from", "demo-1", "--wait=false", "--timeout", "90s", "--dialer", "direct")
	if r.code != cmdutil.ExitOK || o == nil {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if o.Donor != "demo-1" || o.Wait || o.Timeout != 90*time.Second || o.Dialer != "direct" {
		t.Errorf("parsed %+v", *o)
	}
	for _, bad := range [][]string{{"demo"}, {"demo", "demo-2", "--timeout", "-1s"}, {"demo", "demo-2", "--wait=maybe"}} {
		if o, r := parse(bad...); r.code != cmdutil.ExitUsage || o != nil {
			t.Errorf("rebuild %q: exit %d (options %v), want a usage error before anything runs", bad, r.code, o)
		}
	}
}
