package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestApplyRefusesRemovingThePrimary: after a switchover to the highest ordinal, 'apply -f'
// with one replica fewer would delete the primary's pod. It exits 4 before writing anything,
// says which switchover makes it safe, and the StatefulSet and the spec keep both instances.
func TestApplyRefusesRemovingThePrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name = "guard"
	if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "2", "--storage-size", "128Mi", "--wait", "--timeout", "3m"); res.code != 0 {
		t.Fatalf("create: %d %s", res.code, res.stderr)
	}
	defer deleteCluster(t, name)
	if res := mysqlctl(t, "switchover", name, "--to", name+"-1"); res.code != 0 {
		t.Fatalf("switchover: %d %s", res.code, res.stderr)
	}
	before := getCluster(t, ctx, name)
	if before.Status.CurrentPrimary != name+"-1" || before.Status.Operation != nil {
		t.Fatalf("after the switchover: primary %q, operation %+v", before.Status.CurrentPrimary, before.Status.Operation)
	}

	file := filepath.Join(t.TempDir(), "guard.yaml")
	def := "apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: " + name +
		"\nspec:\n  image: mariadb:10.11\n  replicas: 1\n  storage:\n    size: 128Mi\n"
	if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	res := mysqlctl(t, "apply", "-f", file)
	if res.code != 4 || res.stdout != "" ||
		!strings.Contains(res.stderr, "would remove pod "+name+"-1, the current primary") ||
		!strings.Contains(res.stderr, "'mysqlctl switchover "+name+" --to "+name+"-0', then apply again") {
		t.Errorf("apply with replicas 1: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	sts, err := r.Client.AppsV1().StatefulSets("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 2 {
		t.Errorf("StatefulSet replicas %v after the refused apply, want 2", sts.Spec.Replicas)
	}
	after := getCluster(t, ctx, name)
	if after.Spec.Replicas != 2 || after.Generation != before.Generation || after.Status.CurrentPrimary != name+"-1" {
		t.Errorf("the refused apply changed the cluster: replicas %d, generation %d (was %d), primary %q",
			after.Spec.Replicas, after.Generation, before.Generation, after.Status.CurrentPrimary)
	}
}
