package orchestrate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

func backupPods(c *v1.MysqlCluster, ready ...bool) map[int32]*corev1.Pod {
	out := map[int32]*corev1.Pod{}
	for i, r := range ready {
		role := v1.RoleReplica
		if i == 0 {
			role = v1.RolePrimary
		}
		p := &corev1.Pod{}
		p.Name = fmt.Sprintf("%s-%d", c.Name, i)
		p.Labels = map[string]string{specs.LabelRole: string(role)}
		p.Status.Phase, p.Status.PodIP = corev1.PodRunning, fmt.Sprintf("127.0.9.%d", i+1)
		status := corev1.ConditionFalse
		if r {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		out[int32(i)] = p
	}
	return out
}

// TestChooseBackupSource: a replica by default, never one the primary needs for its semi-sync
// acknowledgements, never a quarantined or unready one; --source chooses otherwise.
func TestChooseBackupSource(t *testing.T) {
	semi := func(n int32) func(*v1.MysqlCluster) {
		return func(c *v1.MysqlCluster) {
			c.Spec.Replicas, c.Spec.SemiSync.WaitForReplicas, c.Status.CurrentPrimary = n, 1, "demo-0"
		}
	}
	for _, tc := range []struct {
		name    string
		c       *v1.MysqlCluster
		ready   []bool
		source  string
		want    string
		wantErr error // nil: chosen; errNotYet-ness is checked by wantWait
		wait    bool
	}{
		{"highest ready replica", testenv.Cluster(semi(3)), []bool{true, true, true}, "", "demo-2", nil, false},
		{"unready replica skipped, the other is needed", testenv.Cluster(semi(3)), []bool{true, true, false}, "", "", outcome.ErrUnsafe, false},
		{"only acknowledger refused", testenv.Cluster(semi(2)), []bool{true, true}, "", "", outcome.ErrUnsafe, false},
		{"no semi-sync: the one replica", testenv.Cluster(semi(2), func(c *v1.MysqlCluster) { c.Spec.SemiSync.Enabled = new(bool) }), []bool{true, true}, "replica", "demo-1", nil, false},
		{"quarantined skipped", testenv.Cluster(semi(4), func(c *v1.MysqlCluster) {
			c.Status.ErrantInstances = []v1.ErrantInstance{{Name: "demo-3"}}
		}), []bool{true, true, true, true}, "", "demo-2", nil, false},
		{"primary asked", testenv.Cluster(semi(2)), []bool{true, true}, "primary", "demo-0", nil, false},
		{"pod asked", testenv.Cluster(semi(2)), []bool{true, true}, "demo-1", "demo-1", nil, false},
		{"pod asked, quarantined", testenv.Cluster(semi(3), func(c *v1.MysqlCluster) {
			c.Status.ErrantInstances = []v1.ErrantInstance{{Name: "demo-1"}}
		}), []bool{true, true, true}, "demo-1", "", outcome.ErrUnsafe, false},
		{"pod asked, not ready", testenv.Cluster(semi(3)), []bool{true, false, true}, "demo-1", "", nil, true},
		{"pod of another cluster", testenv.Cluster(semi(3)), []bool{true, true, true}, "other-1", "", outcome.ErrInvalid, false},
		{"pod asked beyond the members (a scale adding it)", testenv.Cluster(semi(3)), []bool{true, true, true, true}, "demo-3", "demo-3", nil, false},
		{"pod asked, no pod yet", testenv.Cluster(semi(3)), []bool{true, true, true}, "demo-7", "", nil, true},
	} {
		got, reason, err := chooseBackupSource(tc.c, backupPods(tc.c, tc.ready...), tc.source)
		var ny errNotYet
		switch {
		case tc.wait:
			if !errors.As(err, &ny) {
				t.Errorf("%s: %q, %v; want a wait", tc.name, got, err)
			}
		case tc.wantErr != nil:
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: %q, %v; want %v", tc.name, got, err, tc.wantErr)
			}
		case err != nil || got != tc.want || reason == "":
			t.Errorf("%s: %q (%q), %v; want %s", tc.name, got, reason, err, tc.want)
		}
		if tc.wantErr == outcome.ErrInvalid && err != nil && !strings.Contains(err.Error(), tc.source+" is not an instance of cluster demo") {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.wantErr == outcome.ErrUnsafe && err != nil && !strings.Contains(err.Error(), "--source") {
			t.Errorf("%s: %v does not say how to choose", tc.name, err)
		}
	}
}
