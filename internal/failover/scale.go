package failover

import "fmt"

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
		return ScalePlan{Refusal: fmt.Sprintf("%d instances leave %d replicas, and semiSync.waitForReplicas is %d: lower it first, or keep at least %d instances", in.To, in.To-1, in.WaitForReplicas, in.WaitForReplicas+1)}
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
	for k := in.From - 1; k >= in.To; k-- {
		p.Steps = append(p.Steps, ScaleStep{Remove: ptrTo(k)})
	}
	return p
}

func ptrTo(v int) *int { return &v }
