package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/crdschema"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// snapshotNamespace lists every object of every namespaced resource in ns, as
// "resource/name@resourceVersion", sorted: two equal snapshots mean nothing was created,
// changed or deleted in between.
func snapshotNamespace(t *testing.T, ctx context.Context, ns string) []string {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{} // v1 Endpoints are listed too, deprecated or not
	disc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	lists, err := disc.ServerPreferredNamespacedResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue // a CRD removed meanwhile
				}
				t.Fatalf("list %s: %v", r.Name, err)
			}
			for _, it := range items.Items {
				if r.Name == "events" && !fromMysqlctl(it.Object) {
					// The control plane's own Events recur on their own (a claim waiting for
					// its first consumer is reported again every few seconds): only
					// mysqlctl's count.
					continue
				}
				out = append(out, fmt.Sprintf("%s/%s@%s", r.Name, it.GetName(), it.GetResourceVersion()))
			}
		}
	}
	slices.Sort(out)
	return out
}

// fromMysqlctl reports whether an Event (core/v1 or events.k8s.io/v1, as unstructured) was
// reported by mysqlctl.
func fromMysqlctl(ev map[string]any) bool {
	for _, path := range [][]string{{"source", "component"}, {"deprecatedSource", "component"}, {"reportingController"}, {"reportingComponent"}} {
		if v, _, _ := unstructured.NestedString(ev, path...); strings.Contains(v, orchestrate.EventSource) {
			return true
		}
	}
	return false
}

// settledSnapshot waits until the namespace stops changing (controllers finish reacting to the
// set-up) and returns its snapshot.
func settledSnapshot(t *testing.T, ctx context.Context, ns string) []string {
	t.Helper()
	prev := snapshotNamespace(t, ctx, ns)
	for range 30 {
		time.Sleep(time.Second)
		cur := snapshotNamespace(t, ctx, ns)
		if slices.Equal(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatalf("namespace %s never settled", ns)
	return nil
}

// checkRefusal asserts what a user sees when a bad input is refused: the documented exit code,
// one "error:" line that names the problem and the way out, no Go stack trace.
func checkRefusal(t *testing.T, r cmdResult, code cmdutil.ExitCode, says ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr %q", r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if !strings.HasPrefix(lines[0], "error: ") {
		t.Errorf("stderr does not begin with one error line: %q", r.stderr)
	}
	if n := strings.Count(r.stderr, "error:"); n != 1 {
		t.Errorf("%d error lines, want 1: %q", n, r.stderr)
	}
	for _, s := range says {
		if !strings.Contains(lines[0], s) {
			t.Errorf("error line lacks %q: %q", s, lines[0])
		}
	}
	for _, trace := range []string{"panic", "goroutine ", ".go:", "runtime."} {
		if strings.Contains(r.stderr, trace) {
			t.Errorf("stderr shows a stack trace (%q): %q", trace, r.stderr)
		}
	}
}

// TestBadInputTour runs every bad input a user could type against the real API server and
// checks each is refused with the README's exit code and one clear line, and that nothing in
// the namespace was created, changed or deleted.
func TestBadInputTour(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := kubeClient(t)
	const ns = "tour"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// A running cluster to change, and an incomplete credentials Secret to refuse.
	if r := runK(t, "create", "base", "--image", "mariadb:10.11", "--replicas", "1", "-n", ns); r.code != cmdutil.ExitOK {
		t.Fatalf("create base: %d %s", r.code, r.stderr)
	}
	partial := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partial-credentials"},
		Data:       map[string][]byte{"root-password": []byte("s3cret-root-value")},
	}
	if err := c.Create(ctx, partial); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unreadable := file("unreadable.yaml", "apiVersion: mysqlctl.io/v1alpha1\n")
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(unreadable); err == nil {
		f.Close()
		unreadable = filepath.Join(dir, "missing.yaml") // running as root: use a file that is not there
	}
	renamed := file("renamed.yaml", "apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: base\nspec:\n  image: mariadb:10.11\n  replicas: 1\n  primaryService: elsewhere\n")
	otherNS := file("other-ns.yaml", "apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: base\n  namespace: elsewhere\nspec:\n  image: mariadb:10.11\n  replicas: 1\n")
	wrongKind := file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\ndata:\n  a: b\n")
	zero := file("zero.yaml", "apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: zero\nspec:\n  image: mariadb:10.11\n  replicas: 0\n")

	cases := []struct {
		name string
		args []string
		code cmdutil.ExitCode
		says []string
	}{
		{"replicas 0", []string{"create", "t1", "--image", "mariadb:10.11", "--replicas", "0"}, cmdutil.ExitUsage, []string{"spec.replicas", "greater than or equal to 1"}},
		{"replicas 65", []string{"create", "t1", "--image", "mariadb:10.11", "--replicas", "65"}, cmdutil.ExitUsage, []string{"spec.replicas", "less than or equal to 64"}},
		{"replicas 0 in a file", []string{"apply", "-f", zero}, cmdutil.ExitUsage, []string{"spec.replicas", "greater than or equal to 1"}},
		{"replicas 0 dry run", []string{"create", "t1", "--image", "mariadb:10.11", "--replicas", "0", "--dry-run"}, cmdutil.ExitUsage, []string{"spec.replicas"}},
		{"replicas 0 server dry run", []string{"create", "t1", "--image", "mariadb:10.11", "--replicas", "0", "--dry-run=server"}, cmdutil.ExitUsage, []string{"spec.replicas"}},
		{"invalid image", []string{"create", "t1", "--image", "NOT AN IMAGE"}, cmdutil.ExitUsage, []string{"spec.image", "mysql:8.4"}},
		{"negative storage", []string{"create", "t1", "--image", "mariadb:10.11", "--storage-size", "-5Gi"}, cmdutil.ExitUsage, []string{"spec.storage.size", "10Gi"}},
		{"storage not a quantity", []string{"create", "t1", "--image", "mariadb:10.11", "--storage-size", "lots"}, cmdutil.ExitUsage, []string{"spec.storage.size"}},
		{"quorum above replicas", []string{"create", "t1", "--image", "mariadb:10.11", "--replicas", "2", "--semi-sync-wait-for", "2"}, cmdutil.ExitUsage, []string{"waitForReplicas must be less than replicas"}},
		{"immutable field changed", []string{"apply", "-f", renamed}, cmdutil.ExitUsage, []string{"API server refused", "primaryService"}},
		{"owned my.cnf key", []string{"create", "t1", "--image", "mariadb:10.11", "--mysql-config", "log-bin=OFF"}, cmdutil.ExitUsage, []string{"spec.mysqlConfig", "must not set options that mysqlctl manages", "remove them"}},
		{"incomplete credentials Secret", []string{"create", "partial", "--image", "mariadb:10.11"}, cmdutil.ExitUsage, []string{`lacks the key(s) "replication-password"`, "delete the Secret"}},
		{"unknown cluster", []string{"status", "nosuch"}, cmdutil.ExitFailed, []string{"nosuch not found", "get -n tour"}},
		{"unknown cluster to switch over", []string{"switchover", "nosuch"}, cmdutil.ExitFailed, []string{"nosuch not found"}},
		{"wrong context", []string{"status", "base", "--context", "nosuch"}, cmdutil.ExitUsage, []string{`context "nosuch" does not exist`, "get-contexts"}},
		{"namespace of the file and -n differ", []string{"apply", "-f", otherNS}, cmdutil.ExitUsage, []string{`names namespace "elsewhere"`, `--namespace says "tour"`}},
		{"unreadable file", []string{"apply", "-f", unreadable}, cmdutil.ExitUsage, []string{"cannot read -f"}},
		{"wrong kind", []string{"create", "-f", wrongKind}, cmdutil.ExitUsage, []string{"ConfigMap", "want kind MysqlCluster"}},
		{"no name", []string{"create"}, cmdutil.ExitUsage, []string{"needs a NAME or -f FILE"}},
		{"bad name", []string{"create", "Bad_Name"}, cmdutil.ExitUsage, []string{"invalid cluster name", "Bad_Name"}},
		{"file and flags", []string{"create", "x", "-f", renamed, "--replicas", "5"}, cmdutil.ExitUsage, []string{"cannot be combined"}},
		{"config without a value", []string{"create", "x", "--mysql-config", "novalue"}, cmdutil.ExitUsage, []string{"KEY=VALUE"}},
		{"bad dry-run strategy", []string{"create", "t1", "--image", "mariadb:10.11", "--dry-run=maybe"}, cmdutil.ExitUsage, []string{"none, client, server"}},
		{"no watch to hand to", []string{"switchover", "base", "--wait=false"}, cmdutil.ExitUsage, []string{"--wait=false", "none runs", "watch base"}},
		{"server dry run of a plan", []string{"switchover", "base", "--dry-run=server"}, cmdutil.ExitUsage, []string{"none, client"}},
	}
	before := settledSnapshot(t, ctx, ns)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runK(t, append(tc.args, "-n", ns)...)
			checkRefusal(t, r, tc.code, tc.says...)
			if strings.Contains(r.stdout+r.stderr, "s3cret-root-value") {
				t.Error("a password from the Secret was printed")
			}
			if after := snapshotNamespace(t, ctx, ns); !slices.Equal(before, after) {
				t.Errorf("the namespace changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}

	// Last, as it removes the CRD (and every cluster with it) until 'install' puts it back.
	t.Run("no CRD installed", func(t *testing.T) {
		crds := dynamic.NewForConfigOrDie(env.Config).Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
		const crd = "mysqlclusters.mysqlctl.io"
		if err := crds.Delete(ctx, crd, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if r := runK(t, "install"); r.code != cmdutil.ExitOK {
				t.Errorf("install after the tour: %d %s", r.code, r.stderr)
			}
		})
		for {
			if _, err := crds.Get(ctx, crd, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		before := settledSnapshot(t, ctx, ns)
		r := runK(t, "create", "t1", "--image", "mariadb:10.11", "-n", ns)
		checkRefusal(t, r, cmdutil.ExitFailed, "CRD is not installed", "install")
		if after := snapshotNamespace(t, ctx, ns); !slices.Equal(before, after) {
			t.Errorf("the namespace changed:\nbefore %v\nafter  %v", before, after)
		}
	})
}

// TestClientValidationMatchesAPIServer: `--dry-run=client` (and every create and apply) refuses
// exactly what the API server refuses, with the API server's message: each bad spec is
// validated on this machine and sent to the real API server with dryRun=All.
func TestClientValidationMatchesAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clusters := dynamic.NewForConfigOrDie(env.Config).Resource(v1.GroupVersion.WithResource("mysqlclusters")).Namespace("default")
	base := func(spec map[string]any) map[string]any {
		s := map[string]any{"image": "mariadb:10.11"}
		for k, v := range spec {
			s[k] = v
		}
		return map[string]any{
			"apiVersion": v1.GroupVersion.String(), "kind": "MysqlCluster",
			"metadata": map[string]any{"name": "same", "namespace": "default"},
			"spec":     s,
		}
	}
	for name, spec := range map[string]map[string]any{
		"valid":              {},
		"replicas 0":         {"replicas": int64(0)},
		"replicas 65":        {"replicas": int64(65)},
		"image":              {"image": "NOT AN IMAGE"},
		"storage":            {"storage": map[string]any{"size": "-5Gi"}},
		"flavor":             {"flavor": "oracle"},
		"quorum":             {"replicas": int64(2), "semiSync": map[string]any{"waitForReplicas": int64(2)}},
		"threshold":          {"failover": map[string]any{"failureThreshold": int64(0)}},
		"owned key":          {"mysqlConfig": map[string]any{"log-bin": "OFF"}},
		"wrong type":         {"replicas": "three"},
		"two errors at once": {"replicas": int64(0), "image": ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, localErr := validateCluster(ctx, base(spec))
			_, serverErr := clusters.Create(ctx, &unstructured.Unstructured{Object: base(spec)}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if (localErr == nil) != (serverErr == nil) {
				t.Fatalf("local %v, API server %v", localErr, serverErr)
			}
			if serverErr == nil {
				return
			}
			// The same errors (the validator's order is a map's, on both sides).
			v, err := crdschema.Embedded()
			if err != nil {
				t.Fatal(err)
			}
			raw := base(spec)
			v.Default(raw)
			if local, server := causes(crdschema.Invalid("same", v.Validate(ctx, raw))), causes(serverErr); !slices.Equal(local, server) {
				t.Errorf("errors differ:\nlocal  %q\nserver %q", local, server)
			}
			if !strings.HasPrefix(localErr.Error(), `MysqlCluster.mysqlctl.io "same" is invalid: `) {
				t.Errorf("local message %q", localErr)
			}
			if cmdutil.ExitCodeFor(localErr) != cmdutil.ExitUsage {
				t.Errorf("exit %d for %v", cmdutil.ExitCodeFor(localErr), localErr)
			}
		})
	}
}

// causes lists an API error's causes as "field: message", sorted.
func causes(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return []string{err.Error()}
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	slices.Sort(out)
	return out
}
