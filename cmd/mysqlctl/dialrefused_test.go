package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// TestPortForwardForbiddenExitCode: a user granted everything mysqlctl needs but create on
// pods/portforward runs a switchover through the default dialer. The real API server refuses
// the port-forward (403); the command must end at once with exit code 6 and one error line that
// says what to grant, print no password, and leave the cluster's status as it was.
func TestPortForwardForbiddenExitCode(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := kubeClient(t)
	const name = "pf-refused"

	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	secret, err := specs.BuildSecret(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	for ord := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, ord), Namespace: "default", Labels: specs.SelectorLabels(cluster)},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: specs.ContainerName, Image: cluster.Spec.Image}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.2.0.%d", ord+1),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	if err := orchestrate.UpdateStatus(ctx, c, cluster, func(s *v1.MysqlClusterStatus) error {
		s.Phase, s.CurrentPrimary = v1.PhaseRunning, name+"-0"
		s.Conditions = []metav1.Condition{{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: "cluster is Running", LastTransitionTime: then}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), before); err != nil {
		t.Fatal(err)
	}

	// Everything of the Role 'install --rbac' applies, but pods/portforward.
	const user = "pf-refused-user"
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: "default"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"mysqlctl.io"}, Resources: []string{"mysqlclusters", "mysqlclusters/status"}, Verbs: all},
			{APIGroups: []string{"", "apps", "policy", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io"},
				Resources: []string{"pods", "secrets", "services", "configmaps", "persistentvolumeclaims", "statefulsets", "poddisruptionbudgets", "leases", "endpointslices", "events"}, Verbs: all},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: "default"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig, err := env.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	r := runCommand(t, runOpts{}, "switchover", name, "-n", "default", "--dialer", "port-forward", "--kubeconfig", kubeconfig)
	t.Logf("stderr:\n%s", r.stderr)
	if r.code != cmdutil.ExitConfig {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, cmdutil.ExitConfig, r.stderr)
	}
	var errLines []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if strings.HasPrefix(l, "error:") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "create on pods/portforward in namespace default") ||
		!strings.Contains(errLines[0], "nothing is recorded") || strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("stderr:\n%s\nwant one error line saying what to grant", r.stderr)
	}
	noSecrets(t, secret, r.stdout, r.stderr)

	after := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), after); err != nil {
		t.Fatal(err)
	}
	if after.Status.Operation != nil || after.Status.Phase != v1.PhaseRunning || len(after.Status.History) != 0 ||
		fmt.Sprint(after.Status.Conditions) != fmt.Sprint(before.Status.Conditions) {
		t.Errorf("status after the refusal: phase %s, operation %+v, history %d, conditions %v (before %v)",
			after.Status.Phase, after.Status.Operation, len(after.Status.History), after.Status.Conditions, before.Status.Conditions)
	}
}
