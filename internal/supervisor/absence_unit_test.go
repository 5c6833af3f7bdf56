package supervisor

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// TestSighting: a member counts as possibly receiving unless the primary's list of connected
// replicas was read and does not name its (known) server_id, or it answered with its receiver
// stopped and is not listed.
func TestSighting(t *testing.T) {
	c := &v1.MysqlCluster{Status: v1.MysqlClusterStatus{Instances: []v1.InstanceStatus{{Name: "db-2", ServerID: 1002}}}}
	running := topology.Snapshot{Replica: &topology.ReplicaStatus{IOThread: topology.ThreadRunning}}
	running.ServerID = 1001
	stopped := topology.Snapshot{Replica: &topology.ReplicaStatus{IOThread: topology.ThreadStopped}}
	stopped.ServerID = 1001
	listed := primaryBound{pos: "0-1-5", listed: true, connected: []uint32{1002}}
	unlisted := primaryBound{pos: "0-1-5", listed: true}
	tests := []struct {
		name      string
		member    string
		s         topology.Snapshot
		up        bool
		b         primaryBound
		receiving bool
	}{
		{"answers, receiver running", "db-1", running, true, unlisted, true},
		{"answers, receiver stopped, not listed", "db-1", stopped, true, unlisted, false},
		{"silent, listed by the primary", "db-2", topology.Snapshot{}, false, listed, true},
		{"silent, not listed", "db-2", topology.Snapshot{}, false, unlisted, false},
		{"silent, the list unread", "db-2", topology.Snapshot{}, false, primaryBound{pos: "0-1-5"}, true},
		{"silent, server_id unknown", "db-3", topology.Snapshot{}, false, unlisted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sighting(c, tt.member, tt.s, tt.up, "", tt.b, 0)
			if got.Receiving != tt.receiving || got.Answered != tt.up || got.PrimaryPos != tt.b.pos {
				t.Errorf("sighting = %+v, want receiving %v", got, tt.receiving)
			}
		})
	}
}

// TestRecordAbsent: a converge records the members it left out, keeps an existing record but
// raises its bound to the converge's own (read now, so at least as high: the member may have
// received more since the recorded one), and names them in order.
func TestRecordAbsent(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &v1.MysqlClusterStatus{AbsentInstances: []v1.AbsentInstance{{Name: "db-2", Since: since, Bound: "0-1-7", Reason: "old"}}}
	names := orchestrate.RecordAbsent(s, map[string]string{"db-2": "refused", "db-1": "refused"}, map[string]string{"db-2": "0-1-9"}, "converge-1", since.Add(time.Hour))
	if strings.Join(names, ",") != "db-1,db-2" {
		t.Errorf("names %v", names)
	}
	if len(s.AbsentInstances) != 2 || s.AbsentInstances[0].Name != "db-1" || s.AbsentInstances[0].Bound != "" ||
		s.AbsentInstances[1].Bound != "0-1-9" || !strings.HasPrefix(s.AbsentInstances[1].Reason, "old; ") || !s.AbsentInstances[1].Since.Equal(&since) {
		t.Errorf("recorded %+v", s.AbsentInstances)
	}
	if !strings.Contains(s.AbsentInstances[0].Reason, "converge-1") {
		t.Errorf("the reason does not name the converge: %q", s.AbsentInstances[0].Reason)
	}
}

func TestAbsentPassed(t *testing.T) {
	got := orchestrate.AbsentPassed([]string{
		"db-1: safe, but less advanced or later in order",
		"db-2: absent since 2026-01-01T00:00:00Z, cannot be observed; harmless: the candidate holds its recorded bound 0-1-7,1-2-3, so it holds nothing the candidate lacks",
		"db-3: absent since 2026-01-01T00:00:00Z, cannot be observed; no bound recorded on what it received",
	})
	if strings.Join(got, "; ") != "db-2 (bound 0-1-7,1-2-3)" {
		t.Errorf("absentPassed = %q", got)
	}
}
