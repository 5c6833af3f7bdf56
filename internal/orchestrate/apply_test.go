package orchestrate

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

func desiredObjects(t *testing.T, c *v1.MysqlCluster) []client.Object {
	t.Helper()
	sts, err := specs.BuildStatefulSet(c)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := specs.BuildConfigMap(c)
	if err != nil {
		t.Fatal(err)
	}
	return []client.Object{cm, specs.BuildHeadlessService(c), specs.BuildPrimaryService(c), specs.BuildReplicaService(c), sts, specs.BuildPDB(c, specs.Convergence{})}
}

// TestApplyWritesOnlyWhatChanged proves against a real API server: the first apply creates
// everything; an unchanged spec applied again sends zero write requests even though the server
// defaulted many fields; a change touches only the objects it changes; an out-of-band edit of
// an owned field is repaired; a field mysqlctl stops setting is removed.
func TestApplyWritesOnlyWhatChanged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, writes := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "apply", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3, MysqlConfig: map[string]string{"max_connections": "100"}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	applyAll := func(cl *v1.MysqlCluster) map[string]ApplyResult {
		t.Helper()
		out := map[string]ApplyResult{}
		for _, o := range desiredObjects(t, cl) {
			r, err := Apply(ctx, c, o)
			if err != nil {
				t.Fatal(err)
			}
			out[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName()] = r
		}
		return out
	}

	writes.Store(0)
	for k, r := range applyAll(cluster) {
		if r != Created {
			t.Errorf("first apply %s: %s", k, r)
		}
	}
	if n := writes.Load(); n != 6 {
		t.Errorf("first apply sent %d writes, want 6", n)
	}

	writes.Store(0)
	for k, r := range applyAll(cluster) {
		if r != Unchanged {
			t.Errorf("second apply %s: %s", k, r)
		}
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("unchanged spec sent %d write requests, want 0", n)
	}

	// Scaling touches the StatefulSet only (the PDB is derived from convergence, not replicas).
	cluster.Spec.Replicas = 5
	writes.Store(0)
	got := applyAll(cluster)
	if n := writes.Load(); n != 1 || got["StatefulSet/apply"] != Configured {
		t.Errorf("replicas change: %d writes, results %v", n, got)
	}

	// A my.cnf change makes a ConfigMap of its own (pods of the earlier revision keep reading
	// theirs) and changes the template that names it, nothing else.
	cluster.Spec.MysqlConfig = map[string]string{"max_connections": "200"}
	cnf, err := specs.RenderMyCnf(cluster)
	if err != nil {
		t.Fatal(err)
	}
	writes.Store(0)
	got = applyAll(cluster)
	if n := writes.Load(); n != 2 || got["ConfigMap/"+specs.ConfigMapName(cluster, cnf)] != Created || got["StatefulSet/apply"] != Configured {
		t.Errorf("config change: %d writes, results %v", n, got)
	}

	// Someone edits an owned field: the next apply repairs it.
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "apply-primary"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector[specs.LabelRole] = "replica"
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if r, err := Apply(ctx, c, specs.BuildPrimaryService(cluster)); err != nil || r != Configured {
		t.Fatalf("repair: %v %v", r, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector[specs.LabelRole] != "primary" {
		t.Errorf("selector not repaired: %v", svc.Spec.Selector)
	}

	// A key removed from mysqlConfig: a ConfigMap without it.
	cluster.Spec.MysqlConfig = nil
	cm, _ := specs.BuildConfigMap(cluster)
	if r, err := Apply(ctx, c, cm); err != nil || r != Created {
		t.Fatalf("removal: %v %v", r, err)
	}
	live := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), live); err != nil {
		t.Fatal(err)
	}
	if live.Data[specs.ConfigFileName] != cm.Data[specs.ConfigFileName] {
		t.Errorf("ConfigMap not converged:\n%s", live.Data[specs.ConfigFileName])
	}
}

func TestContains(t *testing.T) {
	live := map[string]any{"a": int64(1), "b": map[string]any{"c": "x", "d": true}, "l": []any{map[string]any{"n": "1", "extra": 2.0}}}
	for name, tc := range map[string]struct {
		desired any
		want    bool
	}{
		"subset":               {map[string]any{"b": map[string]any{"c": "x"}}, true},
		"number kinds":         {map[string]any{"a": 1.0}, true},
		"different":            {map[string]any{"a": int64(2)}, false},
		"missing":              {map[string]any{"z": "1"}, false},
		"list element subset":  {map[string]any{"l": []any{map[string]any{"n": "1"}}}, true},
		"list length differs":  {map[string]any{"l": []any{map[string]any{}, map[string]any{}}}, false},
		"empty map vs missing": {map[string]any{"e": map[string]any{}}, true},
	} {
		if got := Contains(live, tc.desired); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// TestApplyKeepsImmutablePodManagementPolicy: a StatefulSet created by an older mysqlctl with
// OrderedReady pod management (immutable) still converges: apply keeps the live policy instead
// of failing on every reconcile, and a second apply writes nothing.
func TestApplyKeepsImmutablePodManagementPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, writes := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	old, err := specs.BuildStatefulSet(cluster)
	if err != nil {
		t.Fatal(err)
	}
	old.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	old.Spec.Template.Annotations = map[string]string{"legacy": "yes"}
	if _, err := Apply(ctx, c, old); err != nil {
		t.Fatal(err)
	}
	cur, err := specs.BuildStatefulSet(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("new StatefulSets use %s", cur.Spec.PodManagementPolicy)
	}
	if r, err := Apply(ctx, c, cur); err != nil || r != Configured {
		t.Fatalf("apply over a legacy StatefulSet: %s %v", r, err)
	}
	writes.Store(0)
	cur, _ = specs.BuildStatefulSet(cluster)
	if r, err := Apply(ctx, c, cur); err != nil || r != Unchanged || writes.Load() != 0 {
		t.Errorf("second apply: %s %v, %d writes", r, err, writes.Load())
	}
	live := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cur), live); err != nil {
		t.Fatal(err)
	}
	if live.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || live.Spec.Template.Annotations["legacy"] != "" {
		t.Errorf("live policy %s, template annotations %v", live.Spec.PodManagementPolicy, live.Spec.Template.Annotations)
	}
}
