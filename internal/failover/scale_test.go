package failover

import (
	"strings"
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

func TestPlanScale(t *testing.T) {
	tests := []struct {
		name    string
		in      ScaleInput
		steps   []string
		refusal string
	}{
		{"up one at a time", ScaleInput{From: 3, To: 5, Primary: 0, WaitForReplicas: 1},
			[]string{"add ordinal 3", "add ordinal 4"}, ""},
		{"down, highest first, primary stays", ScaleInput{From: 5, To: 2, Primary: 1, WaitForReplicas: 1},
			[]string{"remove ordinal 4", "remove ordinal 3", "remove ordinal 2"}, ""},
		{"down past the primary: its role moves first to the lowest healthy ordinal that stays",
			ScaleInput{From: 3, To: 2, Primary: 2, WaitForReplicas: 1, Healthy: []bool{false, true, false}},
			[]string{"switchover to ordinal 1", "remove ordinal 2"}, ""},
		{"down past the primary with no healthy replica left", ScaleInput{From: 3, To: 2, Primary: 2, Healthy: []bool{false, false, false}},
			nil, "no instance below 2 is a healthy replica"},
		{"down past the primary with --no-switchover", ScaleInput{From: 3, To: 2, Primary: 2, NoSwitchover: true, Healthy: []bool{true, true, true}},
			nil, "--no-switchover"},
		{"below the semi-sync quorum", ScaleInput{From: 3, To: 2, Primary: 0, WaitForReplicas: 2},
			nil, "waits for 2 semi-sync acknowledgement(s)"},
		{"semi-sync off allows one instance", ScaleInput{From: 3, To: 1, Primary: 0},
			[]string{"remove ordinal 2", "remove ordinal 1"}, ""},
		{"zero instances", ScaleInput{From: 3, To: 0, Primary: 0}, nil, "1 to 64"},
		{"65 instances", ScaleInput{From: 3, To: 65, Primary: 0}, nil, "1 to 64"},
		{"no change", ScaleInput{From: 3, To: 3, Primary: 0, WaitForReplicas: 1}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanScale(tt.in)
			if !strings.Contains(p.Refusal, tt.refusal) || (tt.refusal == "") != (p.Refusal == "") {
				t.Fatalf("refusal %q, want one containing %q", p.Refusal, tt.refusal)
			}
			if p.Refusal != "" && len(p.Steps) > 0 {
				t.Fatalf("a refused plan has steps: %v", p.Steps)
			}
			if len(p.Steps) != len(tt.steps) {
				t.Fatalf("steps %v, want %v", p.Steps, tt.steps)
			}
			for i, s := range p.Steps {
				if !strings.HasPrefix(s.String(), tt.steps[i]) {
					t.Errorf("step %d is %q, want %q", i, s, tt.steps[i])
				}
			}
		})
	}
}

func TestChooseSeed(t *testing.T) {
	maria := func(current, purged string, known bool) topology.Snapshot {
		s := topology.Snapshot{Flavor: topology.Flavor{Line: topology.MariaDB}}
		s.GTID.CurrentPos = gtid.MustParseMariaDBPos(current)
		s.GTID.PurgedPos = gtid.MustParseMariaDBPos(purged)
		s.GTID.PurgedKnown = known
		return s
	}
	mysql := func(executed, purged string) topology.Snapshot {
		s := topology.Snapshot{Flavor: topology.Flavor{Line: topology.MySQL80}}
		s.GTID.Executed = gtid.MustParseMySQLSet(executed)
		s.GTID.Purged = gtid.MustParseMySQLSet(purged)
		return s
	}
	const u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	tests := []struct {
		name            string
		primary, joiner topology.Snapshot
		want, reason    string
	}{
		{"nothing purged: an empty instance replays", maria("0-1000-50", "", true), maria("", "", true), SeedReplay, "covers"},
		{"purged past an empty instance: copy", maria("0-1000-50", "0-1000-20", true), maria("", "", true), SeedCopy, "purged"},
		{"purged before a returning instance's position: replay", maria("0-1000-50", "0-1000-20", true), maria("0-1000-30", "", true), SeedReplay, "covers"},
		{"purged past a returning instance's position: copy", maria("0-1000-50", "0-1000-40", true), maria("0-1000-30", "", true), SeedCopy, "purged"},
		{"purged boundary unknown: copy, never a guess", maria("0-1000-50", "", false), maria("", "", true), SeedCopy, "could not be read"},
		{"MySQL: nothing purged", mysql(u+":1-50", ""), mysql("", ""), SeedReplay, "hold every transaction"},
		{"MySQL: purged what the instance lacks", mysql(u+":1-50", u+":1-20"), mysql("", ""), SeedCopy, u + ":1-20"},
		{"MySQL: purged only what the instance has", mysql(u+":1-50", u+":1-20"), mysql(u+":1-30", ""), SeedReplay, "hold every transaction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := ChooseSeed(tt.primary, tt.joiner)
			if got != tt.want || !strings.Contains(reason, tt.reason) {
				t.Fatalf("ChooseSeed = %s (%s), want %s naming %q", got, reason, tt.want, tt.reason)
			}
		})
	}
}

// A scale-down that keeps a quarantined replica and removes the last one that acknowledges is
// refused by the plan: the quarantined replica acknowledges nothing.
func TestPlanScaleCountsOnlyAcknowledgers(t *testing.T) {
	in := ScaleInput{From: 3, To: 2, Primary: 0, WaitForReplicas: 1, Healthy: []bool{false, false, true}, Quarantined: []bool{false, true, false}}
	if p := PlanScale(in); !strings.Contains(p.Refusal, "1 quarantined") {
		t.Fatalf("scale 3 -> 2 keeping only a quarantined replica: %+v", p)
	}
	in.Quarantined = []bool{false, false, false}
	if p := PlanScale(in); p.Refusal != "" || len(p.Steps) != 1 {
		t.Fatalf("scale 3 -> 2 keeping a replica that acknowledges: %+v", p)
	}
	// The handoff's target is the primary afterwards: the replica left must be another one.
	in = ScaleInput{From: 3, To: 2, Primary: 2, WaitForReplicas: 1, Healthy: []bool{true, false, false}, Quarantined: []bool{false, true, false}}
	if p := PlanScale(in); p.Refusal == "" {
		t.Fatalf("scale 3 -> 2 with a handoff to the only healthy replica, the other quarantined: %+v", p)
	}
}
