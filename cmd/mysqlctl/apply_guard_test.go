package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// TestApplyGuardExitCodes: 'apply -f' that would delete the primary's pod exits 4, one that
// would change a cluster with an operation recorded exits 5; both print nothing on stdout, say
// on stderr what to run instead, and leave the cluster as it was. The unchanged file still
// applies.
func TestApplyGuardExitCodes(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := kubeClient(t)
	file := filepath.Join(t.TempDir(), "guarded.yaml")
	write := func(replicas int) {
		t.Helper()
		y := fmt.Sprintf("apiVersion: mysqlctl.io/v1alpha1\nkind: MysqlCluster\nmetadata:\n  name: guarded\nspec:\n  image: mariadb:10.11\n  replicas: %d\n", replicas)
		if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(3)
	if r := runK(t, "apply", "-f", file, "-n", "default"); r.code != cmdutil.ExitOK {
		t.Fatalf("first apply: %d %q", r.code, r.stderr)
	}
	defer func() {
		_ = c.Delete(context.Background(), &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"}})
	}()
	key := client.ObjectKey{Namespace: "default", Name: "guarded"}
	setStatus := func(change func(*v1.MysqlClusterStatus)) {
		t.Helper()
		cl := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
		if err := orchestrate.UpdateStatus(ctx, c, cl, func(s *v1.MysqlClusterStatus) error { change(s); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	untouched := func(what string) {
		t.Helper()
		cl, sts := &v1.MysqlCluster{}, &appsv1.StatefulSet{}
		if err := c.Get(ctx, key, cl); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, key, sts); err != nil {
			t.Fatal(err)
		}
		if cl.Spec.Replicas != 3 || *sts.Spec.Replicas != 3 {
			t.Errorf("%s: spec.replicas %d, StatefulSet replicas %d, want both 3", what, cl.Spec.Replicas, *sts.Spec.Replicas)
		}
	}

	setStatus(func(s *v1.MysqlClusterStatus) { s.Phase, s.CurrentPrimary = v1.PhaseRunning, "guarded-2" })
	write(2)
	r := runK(t, "apply", "-f", file, "-n", "default")
	if r.code != cmdutil.ExitUnsafe || r.stdout != "" ||
		!strings.Contains(r.stderr, "refused as unsafe: spec.replicas 2 would remove pod guarded-2, the current primary of cluster guarded") ||
		!strings.Contains(r.stderr, "'mysqlctl switchover guarded --to guarded-0', then apply again") {
		t.Errorf("apply removing the primary: %d %q %q", r.code, r.stdout, r.stderr)
	}
	untouched("after removing the primary was refused")

	setStatus(func(s *v1.MysqlClusterStatus) {
		s.Phase, s.CurrentPrimary = v1.PhaseSwitchingOver, "guarded-0"
		s.Operation = &v1.OperationStatus{ID: "switchover-9", Type: orchestrate.OperationSwitchover, Stage: orchestrate.StageFencing, Holder: "mysqlctl@gone/7", StartedAt: metav1.Now()}
	})
	r = runK(t, "apply", "-f", file, "-n", "default")
	if r.code != cmdutil.ExitHeld || r.stdout != "" ||
		!strings.Contains(r.stderr, "held by another actor: switchover switchover-9 is in progress on cluster guarded") ||
		!strings.Contains(r.stderr, "'resume guarded'") || !strings.Contains(r.stderr, "'abort guarded'") {
		t.Errorf("apply during a switchover: %d %q %q", r.code, r.stdout, r.stderr)
	}
	untouched("after a change during a switchover was refused")

	write(3)
	r = runK(t, "apply", "-f", file, "-n", "default")
	if r.code != cmdutil.ExitOK || r.stdout != "mysqlcluster.mysqlctl.io/guarded unchanged\n" {
		t.Errorf("unchanged apply during a switchover: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
