package main

import (
	"encoding/json"
	"testing"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

func TestVersionOutput(t *testing.T) {
	// Config resolution must not pick up a config file from the machine running the tests.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	tests := []struct {
		name   string
		opts   runOpts
		args   []string
		stdout string
	}{
		{
			name:   "not a terminal: key<TAB>value lines, no escapes",
			args:   []string{"version"},
			stdout: "version\tv1.2.3\ncommit\t0123abc\nbuilt\t2026-11-29T10:00:00Z\ngo\tgo1.26.8\nplatform\tlinux/amd64\n",
		},
		{
			name: "terminal: aligned and styled",
			opts: runOpts{tty: true},
			args: []string{"version"},
			stdout: "\x1b[1mmysqlctl\x1b[0m v1.2.3\n" +
				"  \x1b[2mcommit\x1b[0m 0123abc\n" +
				"  \x1b[2mbuilt \x1b[0m 2026-11-29T10:00:00Z\n" +
				"  \x1b[2mgo    \x1b[0m go1.26.8 linux/amd64\n",
		},
		{
			name:   "terminal with NO_COLOR: aligned, no escapes",
			opts:   runOpts{tty: true, noColor: true},
			args:   []string{"version"},
			stdout: "mysqlctl v1.2.3\n  commit 0123abc\n  built  2026-11-29T10:00:00Z\n  go     go1.26.8 linux/amd64\n",
		},
		{
			name:   "terminal with --color never",
			opts:   runOpts{tty: true},
			args:   []string{"version", "--color", "never"},
			stdout: "mysqlctl v1.2.3\n  commit 0123abc\n  built  2026-11-29T10:00:00Z\n  go     go1.26.8 linux/amd64\n",
		},
		{
			name:   "as the kubectl plugin it names itself kubectl mysql",
			opts:   runOpts{tty: true, argv0: "/usr/local/bin/kubectl-mysql", noColor: true},
			args:   []string{"version"},
			stdout: "kubectl mysql v1.2.3\n  commit 0123abc\n  built  2026-11-29T10:00:00Z\n  go     go1.26.8 linux/amd64\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCommand(t, tt.opts, tt.args...)
			if r.code != cmdutil.ExitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if r.stdout != tt.stdout {
				t.Errorf("stdout:\n got %q\nwant %q", r.stdout, tt.stdout)
			}
		})
	}
}

func TestVersionJSON(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, tty := range []bool{false, true} {
		r := runCommand(t, runOpts{tty: tty}, "version", "-o", "json")
		if r.code != cmdutil.ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var got cmdutil.BuildInfo
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("not JSON (tty=%v): %v\n%s", tty, err, r.stdout)
		}
		if got != testBuild {
			t.Errorf("tty=%v: got %+v, want %+v", tty, got, testBuild)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	tests := []struct {
		name   string
		opts   runOpts
		args   []string
		stderr string
	}{
		{
			name: "unknown flag, not a terminal",
			args: []string{"version", "--bogus"},
			stderr: "error: unknown flag: --bogus\n\nUsage:\n  mysqlctl version [flags]\n\n" +
				"Run 'mysqlctl version --help' for more information.\n",
		},
		{
			name: "unknown flag, terminal: error styled",
			opts: runOpts{tty: true},
			args: []string{"version", "--bogus"},
			stderr: "\x1b[1;31merror:\x1b[0m unknown flag: --bogus\n\nUsage:\n  mysqlctl version [flags]\n\n" +
				"Run 'mysqlctl version --help' for more information.\n",
		},
		{
			name: "bad output format",
			args: []string{"version", "-o", "xml"},
			stderr: "error: invalid output format \"xml\": use one of table, json, yaml\n\nUsage:\n  mysqlctl version [flags]\n\n" +
				"Run 'mysqlctl version --help' for more information.\n",
		},
		{
			name: "unexpected argument",
			args: []string{"version", "now"},
			stderr: "error: mysqlctl version takes no arguments, got \"now\"\n\nUsage:\n  mysqlctl version [flags]\n\n" +
				"Run 'mysqlctl version --help' for more information.\n",
		},
		{
			name: "unknown command",
			args: []string{"frobnicate"},
			stderr: "error: unknown command \"frobnicate\" for \"mysqlctl\"\n\nUsage:\n  mysqlctl [command]\n\n" +
				"Run 'mysqlctl --help' for more information.\n",
		},
		{
			name: "bad --color",
			args: []string{"version", "--color", "sometimes"},
			stderr: "error: invalid --color \"sometimes\": use auto, always or never\n\nUsage:\n  mysqlctl version [flags]\n\n" +
				"Run 'mysqlctl version --help' for more information.\n",
		},
		{
			name: "completion without a shell",
			args: []string{"completion"},
			stderr: "error: completion needs exactly one shell: bash, zsh, fish or powershell\n\nUsage:\n  mysqlctl completion bash|zsh|fish|powershell [flags]\n\n" +
				"Run 'mysqlctl completion --help' for more information.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCommand(t, tt.opts, tt.args...)
			if r.code != cmdutil.ExitUsage {
				t.Errorf("exit code %d, want %d", r.code, cmdutil.ExitUsage)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			if r.stderr != tt.stderr {
				t.Errorf("stderr:\n got %q\nwant %q", r.stderr, tt.stderr)
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	want := map[string]string{
		"bash":       "__start_mysqlctl",
		"zsh":        "#compdef mysqlctl",
		"fish":       "complete -c mysqlctl",
		"powershell": "Register-ArgumentCompleter",
	}
	for sh, marker := range want {
		r := runCommand(t, runOpts{}, "completion", sh)
		if r.code != cmdutil.ExitOK {
			t.Fatalf("%s: exit %d: %s", sh, r.code, r.stderr)
		}
		if !contains(r.stdout, marker) {
			t.Errorf("%s completion lacks %q", sh, marker)
		}
	}
}
