package orchestrate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// TestWeakenedProtectionShortensTheFenceDeadline: an observation of the primary that protects
// less than recorded (a lowered timeout, semi-sync off, a source fallen back to asynchronous)
// shortens or withdraws the receiver-fence proof at once; one that protects as much or more
// changes nothing here (proving more is observedChange's business).
func TestWeakenedProtectionShortensTheFenceDeadline(t *testing.T) {
	seen := metav1.NewTime(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC))
	cluster := func() *v1.MysqlCluster {
		return &v1.MysqlCluster{Status: v1.MysqlClusterStatus{CurrentPrimary: "db-0", Instances: []v1.InstanceStatus{
			{Name: "db-0", Role: v1.RolePrimary, SemiSyncSource: true, SemiSyncTimeoutSeconds: 86400, LastSeen: &seen},
			{Name: "db-1", Role: v1.RoleReplica},
		}}}
	}
	observed := func(mut func(*topology.SemiSyncState)) topology.Snapshot {
		s := topology.Snapshot{Name: "db-0", Reachable: true, SemiSync: topology.SemiSyncState{
			Available: true, SourceEnabled: true, SourceActive: true, WaitPoint: "AFTER_SYNC", WaitNoReplica: true,
			TimeoutMillis: 86400000, SourceClients: 2,
		}}
		if mut != nil {
			mut(&s.SemiSync)
		}
		return s
	}
	for _, tt := range []struct {
		name        string
		snap        topology.Snapshot
		wantChange  bool
		wantSource  bool
		wantTimeout int64
	}{
		{"as recorded", observed(nil), false, true, 86400},
		{"a longer timeout is not recorded here", observed(func(s *topology.SemiSyncState) { s.TimeoutMillis = 2 * 86400000 }), false, true, 86400},
		{"timeout lowered to an hour", observed(func(s *topology.SemiSyncState) { s.TimeoutMillis = 3600000 }), true, true, 3600},
		{"timeout lowered below the fence minimum", observed(func(s *topology.SemiSyncState) { s.TimeoutMillis = 1000 }), true, false, 1},
		{"semi-sync turned off", observed(func(s *topology.SemiSyncState) { s.SourceEnabled, s.SourceActive = false, false }), true, false, 86400},
		{"fallen back to asynchronous", observed(func(s *topology.SemiSyncState) { s.SourceActive = false }), true, false, 86400},
		{"commits no longer wait without replicas", observed(func(s *topology.SemiSyncState) { s.WaitNoReplica = false }), true, false, 86400},
		{"unreadable: nothing learnt", topology.Snapshot{Name: "db-0", Reachable: true, Warnings: []string{"semi-sync state unknown: timeout"}}, false, true, 86400},
		{"unreachable: nothing learnt", topology.Snapshot{Name: "db-0"}, false, true, 86400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster()
			change := weakenedProtection(c, "db-0", tt.snap)
			if (change != nil) != tt.wantChange {
				t.Fatalf("change %v, want %v", change != nil, tt.wantChange)
			}
			if change != nil {
				if err := change(&c.Status); err != nil {
					t.Fatal(err)
				}
			}
			got := c.Status.Instances[0]
			if got.SemiSyncSource != tt.wantSource || got.SemiSyncTimeoutSeconds != tt.wantTimeout || !got.LastSeen.Equal(&seen) {
				t.Errorf("recorded source %v timeout %d lastSeen %v, want %v %d %v", got.SemiSyncSource, got.SemiSyncTimeoutSeconds, got.LastSeen, tt.wantSource, tt.wantTimeout, seen)
			}
			d, _ := receiverFenceDeadline(c, "db-0")
			if tt.wantTimeout < 86400 && d != nil && !d.Time.Before(seen.Add(time.Duration(tt.wantTimeout)*time.Second)) {
				t.Errorf("fence deadline %s not shortened to within the observed timeout", d.Time)
			}
		})
	}
}

// TestConvergeClearsResolvedDegraded: a finished converge ends a Degraded condition whose cause it
// proved over (the reported case: "the primary answers but is read-only (it restarted)" from a
// refused failover stayed under phase Running and HA Healthy, and status said degraded), and
// leaves the others to their own way out.
func TestConvergeClearsResolvedDegraded(t *testing.T) {
	for _, tt := range []struct {
		reason string
		clears bool
	}{
		{"FailoverRefused", true}, {"FailoverRolledBack", true}, {"NewPrimaryLost", true}, {"PrimaryUnreachable", true},
		{ReasonFailoverWithheld, true}, {"Quarantined", true},
		{"UpgradeStopped", false}, {"SemiSyncInactive", false}, {"StageStopped", false},
	} {
		s := &v1.MysqlClusterStatus{Conditions: []metav1.Condition{{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: tt.reason, Message: "the primary db-1 answers but is read-only (it restarted)"}}}
		clearResolvedDegraded(s, "primary db-1; 2 replica(s) proven to replicate from it")
		d := s.Conditions[0]
		if cleared := d.Status == metav1.ConditionFalse; cleared != tt.clears {
			t.Errorf("%s: cleared %v, want %v (%+v)", tt.reason, cleared, tt.clears, d)
		}
		if tt.clears && (d.Reason != "Converged" || d.Message != "primary db-1; 2 replica(s) proven to replicate from it") {
			t.Errorf("%s: cleared as %s %q", tt.reason, d.Reason, d.Message)
		}
	}
}
