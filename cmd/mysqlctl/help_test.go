package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

// TestHelpRendersAndExamplesParse renders every command's help as mysqlctl and as kubectl
// mysql: no formatting debris ("%!"), and every example line is a command line of this program
// whose command exists and whose flags parse.
func TestHelpRendersAndExamplesParse(t *testing.T) {
	for _, argv0 := range []string{"mysqlctl", "kubectl-mysql"} {
		ios, _, _, _ := iostreams.Test()
		f := newFactory(ios, argv0, func(string) string { return "" })
		root := NewCmdRoot(f)
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			for _, sub := range c.Commands() {
				walk(sub)
			}
			var path []string
			for p := c; p.HasParent(); p = p.Parent() {
				path = append([]string{p.Name()}, path...)
			}
			r := runCommand(t, runOpts{argv0: argv0}, append(path, "--help")...)
			if r.code != 0 || strings.Contains(r.stdout, "%!") {
				t.Errorf("%s %v --help: exit %d\n%s", argv0, path, r.code, r.stdout)
			}
			for _, line := range strings.Split(c.Example, "\n") {
				l := strings.TrimSpace(line)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				i := strings.Index(l, f.DisplayName+" ")
				if i < 0 {
					t.Errorf("%s: example %q does not run %s", c.CommandPath(), l, f.DisplayName)
					continue
				}
				rest := l[i+len(f.DisplayName):]
				if j := strings.IndexAny(rest, ")|><;&"); j >= 0 {
					rest = rest[:j]
				}
				args := strings.Fields(rest)
				for k := range args {
					args[k] = strings.Trim(args[k], `"'`)
				}
				found, flags, err := root.Find(args)
				if err != nil || found == root {
					t.Errorf("%s: example %q names no command: %v", c.CommandPath(), l, err)
					continue
				}
				if err := found.ParseFlags(flags); err != nil {
					t.Errorf("%s: example %q: %v", c.CommandPath(), l, err)
				}
			}
		}
		walk(root)
	}
}
