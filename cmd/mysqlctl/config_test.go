package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestConfigPrecedence proves flags > MYSQLCTL_* environment > config file > default, using
// the color setting, whose effect is visible in version's output on a terminal.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	cfg := filepath.Join(dir, "mysqlctl", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	styled := func(r cmdResult) bool { return strings.Contains(r.stdout, "\x1b[") }

	// Default on a terminal: styled.
	if r := runCommand(t, runOpts{tty: true}, "version"); !styled(r) {
		t.Fatalf("default on a TTY should be styled: %q", r.stdout)
	}
	// Config file says never.
	if err := os.WriteFile(cfg, []byte("color: never\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCommand(t, runOpts{tty: true}, "version"); styled(r) {
		t.Errorf("config file color: never was ignored: %q", r.stdout)
	}
	// Environment beats the file.
	env := map[string]string{"MYSQLCTL_COLOR": "always"}
	if r := runCommand(t, runOpts{tty: true, env: env}, "version"); !styled(r) {
		t.Errorf("MYSQLCTL_COLOR=always did not beat the config file: %q", r.stdout)
	}
	// A flag beats both.
	if r := runCommand(t, runOpts{tty: true, env: env}, "version", "--color=never"); styled(r) {
		t.Errorf("--color=never did not beat MYSQLCTL_COLOR: %q", r.stdout)
	}
	// An explicit config file that does not exist is an error; a bad value names its source.
	r := runCommand(t, runOpts{}, "version", "--config", filepath.Join(dir, "missing.yaml"))
	if r.code != cmdutil.ExitUsage || !strings.Contains(r.stderr, "missing.yaml") {
		t.Errorf("missing explicit config: exit %d, stderr %q", r.code, r.stderr)
	}
	if err := os.WriteFile(cfg, []byte("request-timeout: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCommand(t, runOpts{}, "version")
	if r.code != cmdutil.ExitOK {
		// request-timeout is a string flag in cli-runtime and validated only when a client is
		// built; version never builds one, so a bad value there must not break it.
		t.Errorf("version failed on an unused bad setting: %d %s", r.code, r.stderr)
	}
}

// TestConfigNeverSetsOperationFlags: only connection and presentation flags are configurable,
// so an environment variable can never turn on a dangerous operation flag.
func TestConfigNeverSetsOperationFlags(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var got *InstallOptions
	env := map[string]string{"MYSQLCTL_RBAC": "true", "MYSQLCTL_DRY_RUN": "true", "MYSQLCTL_TIMEOUT": "7s"}
	ios, _, _, _ := iostreams.Test()
	f := newFactory(ios, "mysqlctl", func(k string) string { return env[k] })
	root := NewCmdRoot(f)
	for _, c := range root.Commands() {
		if c.Name() == "install" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(NewCmdInstall(f, func(o *InstallOptions) error { got = o; return nil }))
	if code := execute(f, root, []string{"install"}); code != cmdutil.ExitOK {
		t.Fatalf("exit %d", code)
	}
	if got.RBAC || got.DryRun != cmdutil.DryRunNone {
		t.Errorf("environment set operation flags: rbac=%v dry-run=%v", got.RBAC, got.DryRun)
	}
	if got.Timeout.String() != "7s" {
		t.Errorf("MYSQLCTL_TIMEOUT (configurable) not applied: %s", got.Timeout)
	}
}
