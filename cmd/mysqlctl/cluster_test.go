package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

func kubeClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: cmdutil.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runK(t *testing.T, args ...string) cmdResult {
	t.Helper()
	return runCommand(t, runOpts{}, append(args, "--kubeconfig", env.Kubeconfig)...)
}

// noSecrets fails if any password of the Secret appears in any output.
func noSecrets(t *testing.T, s *corev1.Secret, outputs ...string) {
	t.Helper()
	for k, v := range s.Data {
		if !strings.Contains(k, "password") {
			continue // account names are not secret
		}
		for _, out := range outputs {
			if len(v) > 0 && strings.Contains(out, string(v)) {
				t.Errorf("the %s password appears in output", k)
			}
		}
	}
}

func TestCreateGetDelete(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := kubeClient(t)

	r := runK(t, "create", "demo", "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "1Gi", "-n", "default")
	want := "mysqlcluster.mysqlctl.io/demo created\nsecret/demo-credentials created (random passwords)\n" +
		"configmap/demo-config-HASH created\nservice/demo-instances created\nservice/demo-primary created\n" +
		"service/demo-replicas created\npoddisruptionbudget/demo created\nstatefulset/demo created\n"
	// The ConfigMap is named by its content (16 hex digits).
	if got := regexp.MustCompile(`demo-config-[0-9a-f]{16} `).ReplaceAllString(r.stdout, "demo-config-HASH "); r.code != cmdutil.ExitOK || got != want {
		t.Fatalf("create: exit %d\nstdout %q\nwant   %q\nstderr %s", r.code, r.stdout, want, r.stderr)
	}
	cluster := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, cluster); err != nil {
		t.Fatal(err)
	}
	if cluster.Spec.Flavor != v1.FlavorMariaDB || cluster.Spec.PrimaryService != "demo-primary" || cluster.Spec.Replicas != 3 {
		t.Errorf("spec not defaulted as expected: %+v", cluster.Spec)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-credentials"}, secret); err != nil {
		t.Fatal(err)
	}
	if len(secret.Data) != 7 || len(secret.OwnerReferences) != 0 {
		t.Errorf("secret: %d keys, owners %v", len(secret.Data), secret.OwnerReferences)
	}
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, sts); err != nil {
		t.Fatal(err)
	}
	if len(sts.OwnerReferences) != 1 || sts.OwnerReferences[0].UID != cluster.UID {
		t.Errorf("StatefulSet not owned by the cluster: %+v", sts.OwnerReferences)
	}

	again := runK(t, "create", "demo", "--image", "mariadb:10.11", "-n", "default")
	if again.code != cmdutil.ExitFailed || !strings.Contains(again.stderr, "MysqlCluster default/demo already exists") {
		t.Errorf("second create: exit %d stderr %q", again.code, again.stderr)
	}

	// get, for scripts and as JSON.
	g := runK(t, "get", "-n", "default")
	if !regexp.MustCompile(`^demo\t-\t-\t-\t\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).MatchString(g.stdout) {
		t.Errorf("get (not a terminal): %q", g.stdout)
	}
	gj := runK(t, "get", "-n", "default", "-o", "json")
	var list v1.MysqlClusterList
	if err := json.Unmarshal([]byte(gj.stdout), &list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "demo" {
		t.Errorf("get -o json: %v %q", err, gj.stdout)
	}
	noSecrets(t, secret, r.stdout, r.stderr, again.stderr, g.stdout, gj.stdout)

	// delete: not on a terminal it must be told --yes.
	d := runK(t, "delete", "demo", "-n", "default")
	if d.code != cmdutil.ExitUsage || !strings.Contains(d.stderr, "add --yes") {
		t.Errorf("delete without --yes: exit %d %q", d.code, d.stderr)
	}
	d = runK(t, "delete", "demo", "-n", "default", "--yes")
	if d.code != cmdutil.ExitOK || d.stdout != "mysqlcluster.mysqlctl.io/demo deleted\n" {
		t.Fatalf("delete: exit %d %q %q", d.code, d.stdout, d.stderr)
	}
	// The garbage collector (kube-controller-manager) removes the owned objects; the Secret stays.
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(sts), &appsv1.StatefulSet{})
		if apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("owned StatefulSet not garbage-collected after delete")
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); err != nil {
		t.Errorf("credentials Secret must be kept without --delete-data: %v", err)
	}
}

func TestCreateDryRunPrintsNoSecretsAndCreatesNothing(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	r := runCommand(t, runOpts{}, "create", "dry", "--image", "mysql:8.4", "-n", "team", "--dry-run", "--kubeconfig", "/nonexistent")
	if r.code != cmdutil.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{"kind: MysqlCluster", "kind: Secret", "kind: StatefulSet", "kind: ConfigMap", "kind: PodDisruptionBudget", "namespace: team", "gtid_mode = ON"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("dry-run lacks %q", w)
		}
	}
	// The Secret shows placeholders (base64 of the placeholder text), never generated passwords.
	if strings.Count(r.stdout, "PGdlbmVyYXRlZCBhdCBjcmVhdGUgdW5sZXNzIHRoZSBTZWNyZXQgZXhpc3RzPg==") != 7 {
		t.Errorf("Secret data must be placeholders:\n%s", r.stdout)
	}

	// --dry-run=server: every object goes to the real API server with dryRun=All and comes back
	// defaulted (a server-assigned uid, the StatefulSet's defaults); nothing is stored, and the
	// Secret's generated passwords are never printed.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r = runK(t, "create", "srvdry", "--image", "mariadb:10.11", "-n", "default", "--dry-run=server")
	if r.code != cmdutil.ExitOK {
		t.Fatalf("--dry-run=server: exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{"kind: MysqlCluster", "kind: Secret", "kind: StatefulSet", "kind: PodDisruptionBudget", "uid: ", "revisionHistoryLimit: 10"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("--dry-run=server output lacks %q", w)
		}
	}
	if strings.Count(r.stdout, "PGdlbmVyYXRlZCBhdCBjcmVhdGUgdW5sZXNzIHRoZSBTZWNyZXQgZXhpc3RzPg==") != 7 {
		t.Errorf("--dry-run=server: Secret data must be placeholders:\n%s", r.stdout)
	}
	c := kubeClient(t)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "srvdry"}, &v1.MysqlCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("--dry-run=server stored the cluster (%v)", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "srvdry-credentials"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("--dry-run=server stored the Secret (%v)", err)
	}
}

func TestApplyFromFile(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	file := filepath.Join(t.TempDir(), "c.yaml")
	write := func(replicas int) {
		t.Helper()
		y := fmt.Sprintf("apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: fromfile\nspec:\n  image: mariadb:10.11\n  replicas: %d\n", replicas)
		if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(3)
	r := runK(t, "apply", "-f", file, "-n", "default")
	if r.code != cmdutil.ExitOK || !strings.HasPrefix(r.stdout, "mysqlcluster.mysqlctl.io/fromfile created\nsecret/fromfile-credentials created") {
		t.Fatalf("first apply: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runK(t, "apply", "-f", file, "-n", "default")
	if r.code != cmdutil.ExitOK || r.stdout != "mysqlcluster.mysqlctl.io/fromfile unchanged\n" {
		t.Errorf("unchanged apply: %d %q %q", r.code, r.stdout, r.stderr)
	}
	write(5)
	r = runK(t, "apply", "-f", file, "-n", "default")
	if r.code != cmdutil.ExitOK || r.stdout != "mysqlcluster.mysqlctl.io/fromfile configured\nstatefulset/fromfile configured\n" {
		t.Errorf("changed apply: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runK(t, "apply", "-n", "default"); r.code != cmdutil.ExitUsage {
		t.Errorf("apply without -f: %d", r.code)
	}
}

// TestPermissionDenied: a user without rights learns which verb on which resource is missing,
// and nothing is created.
func TestPermissionDenied(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	nobody, err := env.AddUser("nobody-create")
	if err != nil {
		t.Fatal(err)
	}
	r := runCommand(t, runOpts{}, "create", "denied", "--image", "mariadb:10.11", "-n", "default", "--kubeconfig", nobody)
	if r.code != cmdutil.ExitFailed || !strings.Contains(r.stderr, `permission denied: mysqlclusters.mysqlctl.io "denied" is forbidden: User "nobody-create" cannot get resource "mysqlclusters"`) {
		t.Errorf("create as nobody: %d %q", r.code, r.stderr)
	}
}
