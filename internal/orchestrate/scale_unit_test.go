package orchestrate

import (
	"testing"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// TestMemberCount: while a scale is recorded, the StatefulSet's pods are the members (a replica
// being removed stays one until it is detached), less an instance being added and not proven
// yet; spec.replicas otherwise.
func TestMemberCount(t *testing.T) {
	tests := []struct {
		name  string
		spec  int32
		scale *v1.ScaleStatus
		want  int32
	}{
		{"no scale: spec.replicas", 3, nil, 3},
		{"scale recorded, nothing moved", 5, &v1.ScaleStatus{From: 3, To: 5, Replicas: 3}, 3},
		{"adding ordinal 3: not a member yet", 5, &v1.ScaleStatus{From: 3, To: 5, Replicas: 4, Action: scaleAdd, Ordinal: 3}, 3},
		{"ordinal 3 added: a member", 5, &v1.ScaleStatus{From: 3, To: 5, Replicas: 4, Action: scaleAdd, Ordinal: 3, Done: []string{"+demo-3"}}, 4},
		{"spec lowered, removing ordinal 4: still a member", 3, &v1.ScaleStatus{From: 5, To: 3, Replicas: 5, Action: scaleRemove, Ordinal: 4}, 5},
		{"ordinal 4 detached: no longer one", 3, &v1.ScaleStatus{From: 5, To: 3, Replicas: 4, Action: scaleRemove, Ordinal: 4}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.Replicas, c.Status.Scale = tt.spec, tt.scale })
			if got := MemberCount(c); got != tt.want {
				t.Fatalf("memberCount = %d, want %d", got, tt.want)
			}
		})
	}
}
