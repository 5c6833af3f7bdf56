package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/supervisor"
)

// TestRenderPanel: the live view's panel shows the HA state and its age, the primary, the
// operation's stage, the last check, one row per instance and the latest transitions, in a box.
func TestRenderPanel(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(-ago)); return &m }
	c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "demo"}, Status: v1.MysqlClusterStatus{
		CurrentPrimary: "demo-0",
		HA:             &v1.HAStatus{State: v1.HASuspected, Since: at(2 * time.Second)},
		Operation:      &v1.OperationStatus{Type: "failover", Stage: "Fencing"},
		Instances: []v1.InstanceStatus{
			{Name: "demo-0", Role: v1.RolePrimary, Classification: "Primary", GTIDExecuted: "0-1000-42", LastSeen: at(3 * time.Second)},
			{Name: "demo-1", Role: v1.RoleReplica, Classification: "Replicating", IOThread: "Yes", SQLThread: "Yes", LagSeconds: ptr.To[int64](0), GTIDExecuted: "0-1000-42", LastSeen: at(time.Second)},
		},
	}}
	p := panelState{
		check: failover.Check{At: now.Add(-300 * time.Millisecond), Detail: "connection refused"},
		transitions: []supervisor.Transition{
			{Time: now.Add(-2 * time.Second), From: "Healthy", To: "Suspected", Reason: "1 of 3 failed checks"},
			{Time: now.Add(-time.Second), Action: "failover", Reason: strings.Repeat("x", 150)},
		},
	}
	got := renderPanel(ios.Styles(), c, p, now)
	for _, want := range []string{
		"db/demo  Suspected for 2s  primary demo-0",
		"operation: failover at stage Fencing",
		"last check: 300ms ago, failed: connection refused",
		"demo-1    replica  Replicating  Yes  Yes  0s   0-1000-42  1s ago",
		"-> Suspected: 1 of 3 failed checks",
		"failover: " + strings.Repeat("x", 99) + "…",
		"╭", "╰",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("panel lacks %q:\n%s", want, got)
		}
	}
	t.Log("\n" + got)
	if strings.Contains(got, "\x1b[") {
		t.Errorf("escape sequences with colour off:\n%q", got)
	}
}
