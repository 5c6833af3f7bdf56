package main

import (
	"strings"
	"testing"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

// TestFailoverAndAbortUsage: bad flag combinations are usage errors that say how to fix them,
// caught before anything is contacted.
func TestFailoverAndAbortUsage(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"failover", "demo", "--force"}, "--force needs --reason TEXT"},
		{[]string{"failover", "demo", "--force", "--reason", "  "}, "--force needs --reason TEXT"},
		{[]string{"failover", "demo", "--reason", "because"}, "--reason goes with --force"},
		{[]string{"failover", "demo", "-o", "json"}, "-o applies to --dry-run only"},
		{[]string{"failover", "demo", "--dry-run", "-o", "xml"}, `invalid output format "xml"`},
		{[]string{"failover", "demo", "--timeout", "0s"}, "must be positive"},
		{[]string{"failover"}, "the NAME of the cluster"},
		{[]string{"switchover", "demo", "-o", "yaml"}, "-o applies to --dry-run only"},
		{[]string{"abort"}, "the NAME of the cluster"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runCommand(t, runOpts{}, tt.args...)
			if r.code != cmdutil.ExitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", r.code, r.stderr, cmdutil.ExitUsage, tt.want)
			}
		})
	}
}
