package orchestrate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// TestSeedLastWritable: a supervisor that starts (or re-takes its Lease) learns from the status
// when the primary was last recorded writable, so a primary killed before its first check, and
// back read-only, counts as restarted; a replica's observation teaches nothing.
func TestSeedLastWritable(t *testing.T) {
	seen := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	older := metav1.NewTime(seen.Add(-time.Hour))
	c := &v1.MysqlCluster{Status: v1.MysqlClusterStatus{CurrentPrimary: "db-0", Instances: []v1.InstanceStatus{
		{Name: "db-0", Role: v1.RolePrimary, LastSeen: &older},
		{Name: "db-1", Role: v1.RoleReplica, LastSeen: &seen},
	}}}
	w := &watcher{s: &Supervisor{}}
	w.seed(c)
	if !w.lastWritable.Equal(older.Time) {
		t.Errorf("lastWritable %s, want the primary's %s", w.lastWritable, older.Time)
	}
	c.Status.Instances[0].LastSeen = &seen
	w = &watcher{s: &Supervisor{}, lastWritable: seen.Add(time.Minute)}
	w.seed(c)
	if !w.lastWritable.Equal(seen.Add(time.Minute)) {
		t.Errorf("a newer own observation was replaced by an older record: %s", w.lastWritable)
	}
}
