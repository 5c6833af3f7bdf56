package main

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
)

const crdLine = "customresourcedefinition.apiextensions.k8s.io/mysqlclusters.mysqlctl.io"

// TestInstall runs `mysqlctl install` against a real API server that starts without the CRD.
func TestInstall(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ext := apiextensionsclient.NewForConfigOrDie(env.Config)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	// The package's control plane starts with the CRD; remove it so install starts from nothing,
	// and leave it installed again for the other tests.
	removeCRD(ctx, t, ext)

	// Without the CRD, cluster commands say what to do.
	for _, args := range [][]string{{"get"}, {"create", "early", "--image", "mariadb:10.11"}} {
		r := runCommand(t, runOpts{}, append(args, "--kubeconfig", env.Kubeconfig)...)
		if r.code != cmdutil.ExitFailed || !strings.Contains(r.stderr, "the MysqlCluster CRD is not installed in this cluster: run 'mysqlctl install'") {
			t.Errorf("%v without the CRD: exit %d stderr %q", args, r.code, r.stderr)
		}
	}

	// A server-side dry run says what would happen and stores nothing.
	r := runCommand(t, runOpts{}, "install", "--dry-run=server", "--kubeconfig", env.Kubeconfig)
	if r.code != cmdutil.ExitOK || r.stdout != crdLine+" created (server dry run)\n" {
		t.Errorf("install --dry-run=server: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "mysqlclusters.mysqlctl.io", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("install --dry-run=server created the CRD (%v)", err)
	}

	r = runCommand(t, runOpts{}, "install", "--kubeconfig", env.Kubeconfig)
	if r.code != cmdutil.ExitOK {
		t.Fatalf("install: exit %d\n%s", r.code, r.stderr)
	}
	if r.stdout != crdLine+" created\n" {
		t.Errorf("first install stdout %q", r.stdout)
	}
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "mysqlclusters.mysqlctl.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		t.Fatalf("install returned before the CRD was established: %+v", crd.Status.Conditions)
	}

	// A second install changes nothing.
	r = runCommand(t, runOpts{}, "install", "--kubeconfig", env.Kubeconfig)
	if r.code != cmdutil.ExitOK || r.stdout != crdLine+" unchanged\n" {
		t.Fatalf("second install: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	again, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != crd.ResourceVersion || again.Generation != crd.Generation {
		t.Errorf("second install changed the CRD: resourceVersion %s→%s generation %d→%d",
			crd.ResourceVersion, again.ResourceVersion, crd.Generation, again.Generation)
	}

	// --rbac into a namespace, twice.
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = runCommand(t, runOpts{}, "install", "--rbac", "-n", "db", "--kubeconfig", env.Kubeconfig)
	want := crdLine + " unchanged\nserviceaccount/mysqlctl created\nrole.rbac.authorization.k8s.io/mysqlctl created\nrolebinding.rbac.authorization.k8s.io/mysqlctl created\n"
	if r.code != cmdutil.ExitOK || r.stdout != want {
		t.Fatalf("install --rbac: exit %d\nstdout %q\nwant   %q\nstderr %s", r.code, r.stdout, want, r.stderr)
	}
	r = runCommand(t, runOpts{}, "install", "--rbac", "-n", "db", "--kubeconfig", env.Kubeconfig)
	if strings.Count(r.stdout, " unchanged\n") != 4 {
		t.Errorf("second install --rbac changed something: %q", r.stdout)
	}
	r = runCommand(t, runOpts{}, "install", "--rbac", "-n", "db", "--dry-run=server", "--kubeconfig", env.Kubeconfig)
	if strings.Count(r.stdout, " unchanged (server dry run)\n") != 4 {
		t.Errorf("install --rbac --dry-run=server on an installed namespace: %q %q", r.stdout, r.stderr)
	}

	// The ServiceAccount can do what the CLI needs in its namespace, and nothing cluster-wide.
	sa := "system:serviceaccount:db:mysqlctl"
	allowed := func(ns, group, resource, sub, verb string) bool {
		t.Helper()
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   sa,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:db"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Group: group, Resource: resource, Subresource: sub, Verb: verb,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, c := range []struct {
		ns, group, resource, sub, verb string
		want                           bool
	}{
		{"db", "mysqlctl.io", "mysqlclusters", "status", "patch", true},
		{"db", "mysqlctl.io", "mysqlclusters", "", "create", true},
		{"db", "", "pods", "portforward", "create", true},
		{"db", "apps", "statefulsets", "", "patch", true},
		{"db", "coordination.k8s.io", "leases", "", "update", true},
		{"db", "", "pods", "exec", "create", false},
		{"other", "mysqlctl.io", "mysqlclusters", "", "get", false},
		{"", "apiextensions.k8s.io", "customresourcedefinitions", "", "delete", false},
	} {
		if got := allowed(c.ns, c.group, c.resource, c.sub, c.verb); got != c.want {
			t.Errorf("%s %s/%s %s in %q: allowed=%v, want %v", c.verb, c.resource, c.sub, c.group, c.ns, got, c.want)
		}
	}

	// A user without rights gets a sentence naming the verb and the resource, and exit 1.
	nobody, err := env.AddUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	r = runCommand(t, runOpts{}, "install", "--kubeconfig", nobody)
	if r.code != cmdutil.ExitFailed || !strings.Contains(r.stderr, "not allowed to get "+crdLine) {
		t.Errorf("unprivileged install: exit %d stderr %q", r.code, r.stderr)
	}
}

func removeCRD(ctx context.Context, t *testing.T, ext apiextensionsclient.Interface) {
	t.Helper()
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if err := crds.Delete(ctx, "mysqlclusters.mysqlctl.io", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	// Gone once the API server no longer serves it either: its discovery drops the group after
	// the object is deleted, and a command run in between still finds the kind.
	for {
		_, err := crds.Get(ctx, "mysqlclusters.mysqlctl.io", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := ext.Discovery().ServerResourcesForGroupVersion(v1.GroupVersion.String()); apierrors.IsNotFound(err) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("CRD not removed in time")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestInstallDryRun prints the objects and never contacts a server.
func TestInstallDryRun(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	r := runCommand(t, runOpts{}, "install", "--dry-run", "--rbac", "-n", "team-a", "--kubeconfig", "/nonexistent/kubeconfig", "--server", "https://127.0.0.1:1")
	if r.code != cmdutil.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{"kind: CustomResourceDefinition", "kind: ServiceAccount", "kind: Role\n", "kind: RoleBinding", "namespace: team-a", "---\n"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("dry-run output lacks %q", w)
		}
	}
}
