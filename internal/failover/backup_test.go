package failover

import (
	"strings"
	"testing"
)

// TestChooseBackupSource: a replica by default, the highest listed, never one the primary needs
// for its semi-sync acknowledgements, never a quarantined, unready or primary-labelled one;
// --source chooses otherwise, and each refusal is of its kind and says how to choose.
func TestChooseBackupSource(t *testing.T) {
	m := func(name string, ready, replica, quarantined bool) BackupCandidate {
		return BackupCandidate{Name: name, Ready: ready, Replica: replica, Quarantined: quarantined}
	}
	three := []BackupCandidate{m("d-0", true, false, false), m("d-1", true, true, false), m("d-2", true, true, false)}
	for _, tc := range []struct {
		name    string
		members []BackupCandidate
		asked   string
		need    int
		want    BackupChoice
	}{
		{"highest ready replica", three, "", 1, BackupChoice{Source: "d-2"}},
		{"the only spare replica is unready", []BackupCandidate{three[0], three[1], m("d-2", false, true, false)}, "", 1, BackupChoice{Verdict: BackupUnsafe}},
		{"a pod not labelled replica is not one", []BackupCandidate{three[0], three[1], m("d-2", true, false, false)}, "", 1, BackupChoice{Verdict: BackupUnsafe}},
		{"no semi-sync: the one replica", three[:2], "replica", 0, BackupChoice{Source: "d-1"}},
		{"quarantined skipped", append(three[:3:3], m("d-3", true, true, true)), "", 1, BackupChoice{Source: "d-2"}},
		{"primary asked", three, "primary", 1, BackupChoice{Source: "d-0"}},
		{"primary asked, not ready", []BackupCandidate{m("d-0", false, false, false), three[1]}, "primary", 1, BackupChoice{Verdict: BackupWait}},
		{"pod asked", three[:2], "d-1", 1, BackupChoice{Source: "d-1"}},
		{"pod asked, quarantined", []BackupCandidate{three[0], m("d-1", true, true, true)}, "d-1", 0, BackupChoice{Verdict: BackupUnsafe}},
		{"pod asked, not ready", []BackupCandidate{three[0], m("d-1", false, true, false)}, "d-1", 0, BackupChoice{Verdict: BackupWait}},
		{"pod of another cluster", three, "other-1", 0, BackupChoice{Verdict: BackupInvalid}},
	} {
		find := func(name string) (BackupCandidate, bool) {
			for _, m := range tc.members {
				if m.Name == name {
					return m, true
				}
			}
			return BackupCandidate{}, false
		}
		got := ChooseBackupSource("d-0", tc.members, find, tc.asked, tc.need)
		if got.Verdict != tc.want.Verdict || got.Source != tc.want.Source || got.Why == "" {
			t.Errorf("%s: %+v, want verdict %d source %q with a reason", tc.name, got, tc.want.Verdict, tc.want.Source)
		}
		if got.Verdict == BackupUnsafe && !strings.Contains(got.Why, "--source") {
			t.Errorf("%s: %q does not say how to choose", tc.name, got.Why)
		}
	}
}
