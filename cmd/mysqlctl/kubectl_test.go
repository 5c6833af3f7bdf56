package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completions returns the candidates of a `__complete` answer (the last line is the directive).
func completions(out string) []string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var names []string
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, ":") || strings.HasPrefix(l, "Completion ended") {
			continue
		}
		name, _, _ := strings.Cut(l, "\t")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

var pluginDir = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "mysqlctl-plugin-")
	if err != nil {
		return "", err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-mysql"), "./cmd/mysqlctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	helper, err := os.ReadFile(filepath.Join(root, "hack", "kubectl_complete-mysql"))
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "kubectl_complete-mysql"), helper, 0o755)
})

// kubectl runs the control plane's kubectl with the plugin (built from this tree) on PATH.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	dir, err := pluginDir()
	if err != nil {
		t.Fatalf("build the plugin: %v", err)
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+env.Kubeconfig, "XDG_CONFIG_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// complete runs `__complete ARGS…` in-process; the last argument is the word being completed.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	r := runCommand(t, runOpts{}, append([]string{"__complete", "--kubeconfig", env.Kubeconfig}, args...)...)
	return completions(r.stdout)
}

// TestNameCompletion: cluster names after every command that takes NAME, instance names after
// --to (the primary left out), from the namespace on the line — in the binary and through
// kubectl's plugin completion (kubectl __complete mysql …).
func TestNameCompletion(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	const ns = "completion"
	for _, args := range [][]string{
		{"create", "alpha", "--image", "mariadb:10.11", "--replicas", "3", "-n", ns},
		{"create", "beta", "--image", "mariadb:10.11", "--replicas", "2", "-n", ns},
		{"create", "other", "--image", "mariadb:10.11", "-n", "default"},
	} {
		if ns := args[len(args)-1]; ns == "completion" {
			_ = kubeClient(t).Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
		if r := runK(t, args...); r.code != cmdutil.ExitOK {
			t.Fatalf("%v: %d %s", args, r.code, r.stderr)
		}
	}
	for _, c := range takesClusterName {
		if got := complete(t, c, "-n", ns, ""); !slices.Equal(got, []string{"alpha", "beta"}) {
			t.Errorf("%s NAME completes to %q, want alpha and beta (not other, in default)", c, got)
		}
	}
	if got := complete(t, "status", "-n", ns, "b"); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("status b completes to %q", got)
	}
	if got := complete(t, "switchover", "alpha", "-n", ns, "--to", ""); !slices.Equal(got, []string{"alpha-0", "alpha-1", "alpha-2"}) {
		t.Errorf("switchover alpha --to completes to %q", got)
	}
	if got := complete(t, "status", "alpha", "-n", ns, ""); len(got) != 0 {
		t.Errorf("a second NAME completes to %q", got)
	}
	// An unreachable API server completes nothing, at once, and prints no error.
	start := time.Now()
	r := runCommand(t, runOpts{}, "__complete", "status", "--kubeconfig", "/nonexistent", "")
	if got := completions(r.stdout); len(got) != 0 || time.Since(start) > 2*completionTimeout {
		t.Errorf("without an API server: %q after %s", got, time.Since(start))
	}

	// Through kubectl: its plugin completion runs kubectl_complete-mysql.
	if got := completions(kubectl(t, "__complete", "mysql", "status", "-n", ns, "")); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("kubectl mysql status completes to %q", got)
	}
	if got := completions(kubectl(t, "__complete", "mysql", "failover", "beta", "-n", ns, "--to", "")); !slices.Equal(got, []string{"beta-0", "beta-1"}) {
		t.Errorf("kubectl mysql failover beta --to completes to %q", got)
	}
}

// explainFields lists the field paths under path from `kubectl explain PATH --recursive`
// (FIELDS: one field per line, nested by two spaces).
func explainFields(out string) []string {
	var paths, stack []string
	inFields := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FIELDS:") {
			inFields = true
			continue
		}
		if !inFields || strings.TrimSpace(l) == "" {
			continue
		}
		indent := (len(l) - len(strings.TrimLeft(l, " "))) / 2
		name, _, typed := strings.Cut(strings.TrimSpace(l), "\t")
		if indent < 1 || !typed {
			continue // not a field line (an enum's values, say)
		}
		stack = append(stack[:min(indent-1, len(stack))], name)
		paths = append(paths, strings.Join(stack, "."))
	}
	return paths
}

// TestKubectlExplain: `kubectl explain` shows a description for every field of the CRD's spec
// and status, as served by the API server.
func TestKubectlExplain(t *testing.T) {
	for _, top := range []string{"spec", "status"} {
		fields := explainFields(kubectl(t, "explain", "mysqlcluster."+top, "--recursive"))
		if len(fields) < 10 {
			t.Fatalf("kubectl explain mysqlcluster.%s --recursive lists %d fields:\n%v", top, len(fields), fields)
		}
		for _, f := range fields {
			out := kubectl(t, "explain", "mysqlcluster."+top+"."+f)
			_, desc, ok := strings.Cut(out, "DESCRIPTION:")
			desc, _, _ = strings.Cut(desc, "FIELDS:")
			if d := strings.TrimSpace(desc); !ok || d == "" || d == "<empty>" || len(strings.Fields(d)) < 4 {
				t.Errorf("kubectl explain mysqlcluster.%s.%s shows no useful description:\n%s", top, f, out)
			}
		}
	}
}
