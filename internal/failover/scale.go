package failover

import (
	"fmt"

	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// ScaleInput is what PlanScale looks at.
type ScaleInput struct {
	// From and To are the instance counts now and asked for.
	From, To int
	// Primary is the primary's ordinal (-1: none known).
	Primary int
	// WaitForReplicas is the semi-sync acknowledgement count the spec asks for (0: semi-sync off).
	WaitForReplicas int
	// Healthy says, per ordinal below From, whether the instance replicates from the primary and
	// is caught up: only such a replica may take the primary's role before a scale-down.
	Healthy []bool
	// NoSwitchover refuses a scale-down that would remove the primary instead of moving it.
	NoSwitchover bool
	// Quarantined says, per ordinal below From, that the instance is quarantined: it
	// acknowledges nothing, so a scale-down counts it out of the acknowledgers that stay.
	Quarantined []bool
}

// ScaleStep is one step of a scale: an instance added or removed, or the primary's role moved
// off an ordinal that goes.
type ScaleStep struct {
	// Add or Remove name the ordinal added (seeded, joined, verified) or removed (stopped from
	// replicating, taken out of the replica Service, then its pod deleted).
	Add, Remove *int
	// SwitchoverTo is the ordinal the primary's role moves to first.
	SwitchoverTo *int
}

func (s ScaleStep) String() string {
	switch {
	case s.SwitchoverTo != nil:
		return fmt.Sprintf("switchover to ordinal %d (the primary's ordinal goes)", *s.SwitchoverTo)
	case s.Add != nil:
		return fmt.Sprintf("add ordinal %d: seed, join, verify", *s.Add)
	default:
		return fmt.Sprintf("remove ordinal %d: stop replicating, leave the replica Service, delete the pod", *s.Remove)
	}
}

// ScalePlan is PlanScale's answer: the steps in order, or why the scale is refused.
type ScalePlan struct {
	Steps   []ScaleStep
	Refusal string
}

// PlanScale orders a scale from From to To instances. Up: ordinals From..To-1 are added one at
// a time. Down: the highest ordinals go, highest first; when the primary's ordinal would go,
// its role moves first to the lowest healthy ordinal that stays (refused with NoSwitchover, or
// when none is healthy). A scale that leaves fewer replicas than semi-sync's WaitForReplicas
// needs is refused: writes would stall on acknowledgements nobody can send.
func PlanScale(in ScaleInput) ScalePlan {
	switch {
	case in.To < 1 || in.To > 64:
		return ScalePlan{Refusal: fmt.Sprintf("%d instances: a cluster has 1 to 64", in.To)}
	case in.WaitForReplicas > 0 && in.To-1 < in.WaitForReplicas:
		way := fmt.Sprintf("lower semiSync.waitForReplicas first, or keep at least %d instances", in.WaitForReplicas+1)
		if in.WaitForReplicas == 1 {
			way = "a single instance has no replica to acknowledge: set semiSync.enabled to false first, or keep at least 2 instances"
		}
		return ScalePlan{Refusal: fmt.Sprintf("%d instances leave %d replicas, and the primary waits for %d semi-sync acknowledgement(s) (semiSync.waitForReplicas): %s", in.To, in.To-1, in.WaitForReplicas, way)}
	}
	var p ScalePlan
	for k := in.From; k < in.To; k++ {
		p.Steps = append(p.Steps, ScaleStep{Add: ptrTo(k)})
	}
	if in.To >= in.From {
		return p
	}
	if in.Primary >= in.To {
		if in.NoSwitchover {
			return ScalePlan{Refusal: fmt.Sprintf("ordinal %d, the primary, would be removed and --no-switchover was given: switch over to an ordinal below %d first", in.Primary, in.To)}
		}
		to := -1
		for k := 0; k < in.To && k < len(in.Healthy); k++ {
			if in.Healthy[k] {
				to = k
				break
			}
		}
		if to < 0 {
			return ScalePlan{Refusal: fmt.Sprintf("ordinal %d, the primary, would be removed and no instance below %d is a healthy replica to take its role", in.Primary, in.To)}
		}
		p.Steps = append(p.Steps, ScaleStep{SwitchoverTo: ptrTo(to)})
	}
	if why := acknowledgersLeft(in, p); why != "" {
		return ScalePlan{Refusal: why}
	}
	for k := in.From - 1; k >= in.To; k-- {
		p.Steps = append(p.Steps, ScaleStep{Remove: ptrTo(k)})
	}
	return p
}

// acknowledgersLeft says why a scale-down would leave the primary (after the plan's handoff, if
// any) fewer replicas that can acknowledge than semi-sync waits for ("" when it would not): a
// quarantined replica that stays is no acknowledger, and removing the others stalls every commit.
func acknowledgersLeft(in ScaleInput, p ScalePlan) string {
	if in.WaitForReplicas == 0 {
		return ""
	}
	primary := in.Primary
	for _, s := range p.Steps {
		if s.SwitchoverTo != nil {
			primary = *s.SwitchoverTo
		}
	}
	acks, quarantined := 0, 0
	for k := 0; k < in.To; k++ {
		switch {
		case k == primary:
		case k < len(in.Quarantined) && in.Quarantined[k]:
			quarantined++
		default:
			acks++
		}
	}
	if acks >= in.WaitForReplicas {
		return ""
	}
	return fmt.Sprintf("%d instances leave %d replica(s) that can acknowledge (%d quarantined), and the primary waits for %d semi-sync acknowledgement(s): every commit would stall; rebuild the quarantined replica first ('rebuild'), or keep more instances", in.To, acks, quarantined, in.WaitForReplicas)
}

func ptrTo(v int) *int { return &v }

// Seed methods: how an added (or rebuilt) instance gets its data before it replicates.
const (
	// SeedReplay joins the instance as it is: the primary's binary logs still hold every
	// transaction it lacks, and replication replays them.
	SeedReplay = "replay"
	// SeedCopy copies a donor's data into the instance first (MySQL: CLONE; MariaDB: a logical
	// copy loaded without binary logging at the donor's GTID position): the primary purged
	// binary logs the instance would need.
	SeedCopy = "copy"
)

// ChooseSeed decides how the instance joiner gets its data from the primary's state: replay when
// the primary's binary logs are proven to hold everything joiner lacks, copy otherwise (also
// when the primary's purged boundary could not be read: replay cannot be proven to work). The
// reason names the evidence. Whether joiner's history is an ancestor of the primary's is judged
// separately, at the join.
func ChooseSeed(primary, joiner topology.Snapshot) (method, reason string) {
	if joiner.Flavor.IsMariaDB() {
		have, purged := joiner.GTID.CurrentPos, primary.GTID.PurgedPos
		switch {
		case !primary.GTID.PurgedKnown:
			return SeedCopy, "the primary's purged binary log position could not be read, so replaying its binary logs is not proven to work"
		case have.Contains(purged):
			return SeedReplay, fmt.Sprintf("the primary's binary logs start at [%s], which the instance's position [%s] covers: it replays the rest", purged, have)
		default:
			return SeedCopy, fmt.Sprintf("the primary's binary logs start at [%s], after the instance's position [%s]: the transactions between were purged", purged, have)
		}
	}
	need := primary.GTID.Executed.Subtract(joiner.GTID.Executed)
	if gone := need.Intersect(primary.GTID.Purged); !gone.IsEmpty() {
		return SeedCopy, fmt.Sprintf("the primary purged binary logs holding %s, which the instance lacks", gone)
	}
	return SeedReplay, fmt.Sprintf("the primary's binary logs hold every transaction the instance lacks (purged: [%s])", primary.GTID.Purged)
}
