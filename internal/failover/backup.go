package failover

import (
	"fmt"
	"strings"
)

// BackupCandidate is an instance as the choice of a backup's source sees it.
type BackupCandidate struct {
	Name string
	// Ready: its pod is ready. Replica: its pod is labelled a replica (the primary's is not).
	Ready, Replica bool
	// Quarantined: its data is not the cluster's (an errant instance).
	Quarantined bool
}

// BackupVerdict is what the choice of a backup's source concluded.
type BackupVerdict int

const (
	// BackupChosen: Source is the instance to copy.
	BackupChosen BackupVerdict = iota
	// BackupWait: the asked instance is not ready yet; asking again later may succeed.
	BackupWait
	// BackupInvalid: the asked instance is not a member of the cluster.
	BackupInvalid
	// BackupUnsafe: taking the backup there would weaken the cluster or copy the wrong data.
	BackupUnsafe
)

// BackupChoice is the source of a backup, or why there is none.
type BackupChoice struct {
	Verdict BackupVerdict
	Source  string
	// Why says why Source was chosen, or why none was.
	Why string
}

// The sources a backup may be asked for besides an instance's name.
const (
	BackupSourceReplica = "replica"
	BackupSourcePrimary = "primary"
)

// ChooseBackupSource decides which instance a backup copies. asked is "" or BackupSourceReplica
// (the default: a ready replica of members that is not quarantined and that the primary does not
// need for its semi-sync acknowledgements: semiSyncNeed of them must stay), BackupSourcePrimary,
// or an instance's name. find looks up a named instance (the primary, or the one asked for): an
// instance of the cluster need not be a member yet (a scale may be adding it). Among the eligible
// replicas it takes the one listed last (the highest ordinal: the lowest are the likeliest
// failover candidates and seed donors).
func ChooseBackupSource(primary string, members []BackupCandidate, find func(name string) (BackupCandidate, bool), asked string, semiSyncNeed int) BackupChoice {
	switch asked {
	case BackupSourcePrimary:
		if p, ok := find(primary); !ok || !p.Ready {
			return BackupChoice{Verdict: BackupWait, Why: fmt.Sprintf("the primary %q is not ready", primary)}
		}
		return BackupChoice{Source: primary, Why: "the primary, as asked (--source primary)"}
	case "", BackupSourceReplica:
	default:
		m, ok := find(asked)
		switch {
		case !ok:
			return BackupChoice{Verdict: BackupInvalid, Why: asked + " is not an instance of the cluster"}
		case m.Quarantined:
			return BackupChoice{Verdict: BackupUnsafe, Why: asked + " is quarantined: its data is not the cluster's; choose another instance with --source"}
		case !m.Ready:
			return BackupChoice{Verdict: BackupWait, Why: asked + " is not ready"}
		}
		return BackupChoice{Source: asked, Why: "asked for (--source " + asked + ")"}
	}
	var replicas []string
	for _, m := range members {
		if m.Name != primary && m.Ready && m.Replica && !m.Quarantined {
			replicas = append(replicas, m.Name)
		}
	}
	if len(replicas) <= semiSyncNeed {
		return BackupChoice{Verdict: BackupUnsafe, Why: fmt.Sprintf("%d ready replica(s) (%s), and the primary needs %d to acknowledge its commits (semiSync.waitForReplicas): a backup never takes one of them; take it from the primary with --source primary, or name an instance with --source POD",
			len(replicas), strings.Join(replicas, ", "), semiSyncNeed)}
	}
	return BackupChoice{Source: replicas[len(replicas)-1],
		Why: fmt.Sprintf("a ready replica, not quarantined; %d ready replica(s), %d needed for semi-sync acknowledgements", len(replicas), semiSyncNeed)}
}
