package main

import (
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

// cmdResult is what one command invocation produced.
type cmdResult struct {
	stdout, stderr string
	code           cmdutil.ExitCode
}

// testBuild is a fixed build so version output is exact.
var testBuild = cmdutil.BuildInfo{Version: "v1.2.3", Commit: "0123abc", Date: "2026-11-29T10:00:00Z", GoVersion: "go1.26.8", Platform: "linux/amd64"}

type runOpts struct {
	tty     bool
	argv0   string
	env     map[string]string
	noColor bool
	// now, when set, is the commands' clock (ages in output are measured from it).
	now time.Time
	// stdin is what the command reads from its input (a person's answer to a question).
	stdin string
}

// runCommand runs the whole command tree in-process with buffer streams.
func runCommand(t *testing.T, o runOpts, args ...string) cmdResult {
	t.Helper()
	ios, in, out, errOut := iostreams.Test()
	in.WriteString(o.stdin)
	ios.SetTTY(o.tty)
	ios.SetNoColorEnv(o.noColor)
	if o.argv0 == "" {
		o.argv0 = "mysqlctl"
	}
	getenv := func(k string) string { return o.env[k] }
	f := newFactory(ios, o.argv0, getenv)
	f.Build = testBuild
	if !o.now.IsZero() {
		f.Now = func() time.Time { return o.now }
	}
	code := execute(f, NewCmdRoot(f), args)
	return cmdResult{stdout: out.String(), stderr: errOut.String(), code: code}
}
