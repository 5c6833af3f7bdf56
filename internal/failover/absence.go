package failover

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// A member that stops answering (its pod lost, its node gone) stays a member until a person
// deletes it. Nothing can be asked of it, but one thing can be known: an upper bound on what it
// received. Everything a member receives comes from the primary, so the primary's GTID position,
// read after the member was last able to receive from it, holds all of it. A candidate that holds
// that bound holds everything the absent member can hold; the absence cannot hide an
// acknowledged transaction from it, and the failover need not wait for the member.
//
// The bound is advanced at every observation pass in which the member may be receiving: it
// answered with its receiver not stopped, or the primary lists it among its connected replicas
// (SHOW SLAVE HOSTS, SHOW REPLICAS), and at the first pass after that (what it received between
// the two passes is at most what the primary held at the second), and at the first pass it
// misses. A pass in which the primary does not answer says nothing and changes no bound. What
// no pass can see is a member silent to mysqlctl that connects to the primary and leaves again
// between two passes; the receiver fence never passes a silent member, and a fence over SQL
// bounds everything by the fenced primary's own set.

// Sighting is what one observation pass saw of a member other than the primary.
type Sighting struct {
	// At is when the pass read the primary's position.
	At time.Time
	// Answered is true when the member answered a complete observation.
	Answered bool
	// Receiving is true when the member may have been receiving from the primary during the
	// pass: it answered with its receiver configured and not stopped, or the primary listed it
	// among its connected replicas, or the primary's list could not be read.
	Receiving bool
	// PrimaryPos is the primary's GTID position, read after the member and the primary's list
	// of replicas; empty when the primary did not answer (the pass then changes no bound).
	PrimaryPos string
	// Detail says why the member did not answer (free of secrets).
	Detail string
}

// Tracked is what the supervisor keeps of a member between observation passes.
type Tracked struct {
	// Bound is the latest upper bound on what the member received; empty when none is known.
	Bound string
	// ReceivingAt is when the member was last seen able to receive.
	ReceivingAt time.Time
	// Receiving is true when the member may have been receiving at the last pass, or nothing
	// is known of it yet (a supervisor that just started).
	Receiving bool
	// AbsentSince is when the member first did not answer, zero while it answers; Misses
	// counts the consecutive passes it did not answer.
	AbsentSince time.Time
	Misses      int
	// Reason is the last reason it did not answer.
	Reason string
}

// AbsentAfter is how many consecutive observation passes a member must miss before it is
// recorded absent: one slow answer is not an absence.
const AbsentAfter = 2

// NewTracked is the tracking of a member the supervisor has not observed yet: it may have been
// receiving, so the first pass that reads the primary bounds it.
func NewTracked() Tracked { return Tracked{Receiving: true} }

// NextAbsence is the member's tracking after one observation pass.
func NextAbsence(prev Tracked, s Sighting) Tracked {
	next := prev
	if s.Answered {
		next.AbsentSince, next.Misses, next.Reason = time.Time{}, 0, ""
	} else {
		if next.AbsentSince.IsZero() {
			next.AbsentSince = s.At
		}
		next.Misses++
		next.Reason = s.Detail
	}
	if s.PrimaryPos == "" {
		// The primary was not read: nothing bounds this pass, and what the member did meanwhile
		// is unknown, so the next pass that reads the primary bounds it afresh.
		if s.Answered && s.Receiving {
			next.ReceivingAt = s.At
		}
		next.Receiving = true
		return next
	}
	if s.Answered || s.Receiving || prev.Receiving || prev.Misses == 0 {
		// Whatever it received up to now is within the primary's position read now. A member
		// that answered is bounded by it too, even with its receiver stopped, and so is one at
		// the first pass it misses: it may have started its receiver since the last pass.
		next.Bound = s.PrimaryPos
	}
	if s.Receiving {
		next.ReceivingAt = s.At
	}
	next.Receiving = s.Receiving
	return next
}

// IsAbsent reports whether the member is to be recorded absent.
func (t Tracked) IsAbsent() bool { return t.Misses >= AbsentAfter }

// Absence is an absent member as Elect weighs it: a member that cannot be observed, with the
// recorded bound on what it received.
type Absence struct {
	// Name is the pod name.
	Name string
	// Bound is the recorded upper bound; empty when none is known (the member then blocks).
	Bound string
	// Since is when it was first found not answering.
	Since time.Time
}

// BoundHolds reports whether the candidate, as observed (what it received and executed), holds
// the bound: then the absent member cannot hold any transaction the candidate lacks. When it
// does not, the answer says what it lacks. A bound that cannot be read in the candidate's
// flavor is never held.
func BoundHolds(candidate topology.Snapshot, bound string) (string, bool) {
	if strings.TrimSpace(bound) == "" {
		return "no bound is recorded", false
	}
	h, why := receivedAndExecuted(candidate)
	if why != "" {
		return why, false
	}
	b, err := boundHistory(candidate.Flavor.IsMariaDB(), bound)
	if err != nil {
		return "the bound " + bound + " cannot be read: " + err.Error(), false
	}
	return h.contains(b)
}

// boundHistory reads a recorded bound as a history. On MariaDB a bound is a position: each of its
// GTIDs was the last one a server wrote in its domain, which is also what that server's entry of
// gtid_binlog_state proves.
func boundHistory(mariadb bool, bound string) (history, error) {
	if !mariadb {
		set, err := gtid.ParseMySQLSet(bound)
		return history{set: set}, err
	}
	pos, err := gtid.ParseMariaDBPos(bound)
	if err != nil {
		return history{}, err
	}
	return history{mariadb: true, pos: pos, state: pos.GTIDs()}, nil
}

// weighAbsent judges, for a candidate, every member that cannot be observed: harmless when the
// candidate holds its recorded bound; otherwise the reason the candidate is not provably
// complete. harmless lists the absent members passed, with their bounds, for the evidence.
func weighAbsent(candidate topology.Snapshot, missing []string, absent []Absence) (reason string, harmless []string) {
	var blocking []string
	for _, name := range missing {
		i := slices.IndexFunc(absent, func(a Absence) bool { return a.Name == name })
		if i < 0 || absent[i].Bound == "" {
			blocking = append(blocking, name)
			continue
		}
		if lacking, ok := BoundHolds(candidate, absent[i].Bound); !ok {
			return fmt.Sprintf("not provably complete while %s cannot be observed: it lacks %s of its recorded bound %s", name, lacking, absent[i].Bound), nil
		}
		harmless = append(harmless, name+" (bound "+absent[i].Bound+")")
	}
	if len(blocking) > 0 {
		return "not provably complete while " + strings.Join(blocking, ", ") + " cannot be observed (no bound recorded on what it received)", nil
	}
	return "", harmless
}
