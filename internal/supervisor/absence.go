package supervisor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// absenceTimeout bounds the pass's second look at the primary: its connected replicas and its
// position, read after every member was observed.
const absenceTimeout = 2 * time.Second

// primaryBound is what an observation pass read of the primary after its members: which
// replicas were connected to it, and its position then (an upper bound on what any of them
// received so far). pos is empty when the primary did not answer.
type primaryBound struct {
	pos       string
	connected []uint32
	listed    bool // connected could be read
	at        time.Time
}

// readPrimaryBound lists the primary's connected replicas and then reads its position, in that
// order: whatever a replica listed, or not listed, had received is within the position read
// after the list.
func (w *watcher) readPrimaryBound(ctx context.Context, obs orchestrate.Runner, pod *corev1.Pod, creds orchestrate.Credentials) primaryBound {
	b := primaryBound{at: obs.Clock()}
	if pod == nil || pod.Status.PodIP == "" {
		return b
	}
	ctx, cancel := context.WithTimeout(ctx, absenceTimeout)
	defer cancel()
	ss := obs.OpenSessions(ctx, []orchestrate.Instance{{Pod: pod}}, creds)
	defer ss.Close()
	in, err := ss.Connect(pod.Name)
	if err != nil {
		return b
	}
	ids, err := in.ReplicaServerIDs(ctx)
	b.connected, b.listed = ids, err == nil
	ps, err := ss.Observe(pod.Name)
	if err != nil {
		return b
	}
	b.pos, b.at = orchestrate.BoundOf(ps), obs.Clock()
	return b
}

// sighting is what the pass saw of one member other than the primary. id is the member's
// server_id as last known (0: unknown), for a member that does not answer.
func sighting(c *v1.MysqlCluster, name string, s topology.Snapshot, up bool, detail string, b primaryBound, id uint32) failover.Sighting {
	out := failover.Sighting{At: b.at, Answered: up, PrimaryPos: b.pos, Detail: detail}
	if up {
		id = s.ServerID
		out.Receiving = s.Replica != nil && s.Replica.IOThread != topology.ThreadStopped
	} else if i := slices.IndexFunc(c.Status.Instances, func(i v1.InstanceStatus) bool { return i.Name == name }); i >= 0 && c.Status.Instances[i].ServerID != 0 {
		id = uint32(c.Status.Instances[i].ServerID) // server_id is 32 bits
	}
	// Not listed by the primary is proof only when the list was read and the member's
	// server_id is known.
	out.Receiving = out.Receiving || !b.listed || id == 0 || slices.Contains(b.connected, id)
	return out
}

// trackAbsence advances every member's tracking with this pass and records the members that
// stopped answering, with their bounds, in status.absentInstances.
func (w *watcher) trackAbsence(ctx context.Context, c *v1.MysqlCluster, snaps map[string]topology.Snapshot, details map[string]string, b primaryBound) {
	if w.absence == nil {
		w.absence, w.serverIDs = map[string]failover.Tracked{}, map[string]uint32{}
	}
	var want []v1.AbsentInstance
	for ord := range orchestrate.MemberCount(c) {
		name := fmt.Sprintf("%s-%d", c.Name, ord)
		if name == c.Status.CurrentPrimary {
			delete(w.absence, name) // a primary is judged by the checks, not bounded
			continue
		}
		prev, ok := w.absence[name]
		if !ok {
			prev = trackedFrom(c, name)
		}
		s, up := snaps[name]
		if up {
			w.serverIDs[name] = s.ServerID
		}
		t := failover.NextAbsence(prev, sighting(c, name, s, up, details[name], b, w.serverIDs[name]))
		if !up && orchestrate.RecordedAbsent(c, name) {
			t.Misses = max(t.Misses, failover.AbsentAfter) // recorded by a converge that left it out
		}
		w.absence[name] = t
		if t.IsAbsent() {
			want = append(want, absentRecord(c, name, t))
		}
	}
	if absentEqual(c.Status.AbsentInstances, want) {
		return
	}
	err := orchestrate.UpdateStatus(ctx, w.s.Runner.Kube, c, func(s *v1.MysqlClusterStatus) error {
		// Written only by the supervisor that holds its Lease, and never under an operation
		// but a converge: a failover reads these bounds, and a stale pass must not lower them.
		if err := w.supGuard("record absent members"); err != nil {
			return err
		}
		if s.Operation != nil && s.Operation.Type != orchestrate.OperationConverge {
			return orchestrate.ErrLostRace
		}
		s.AbsentInstances = want
		return nil
	})
	if err != nil {
		return // the next pass tries again
	}
	for _, a := range want {
		if !slices.ContainsFunc(c.Status.AbsentInstances, func(r v1.AbsentInstance) bool { return r.Name == a.Name && r.Bound == a.Bound }) {
			w.report(Transition{Action: "absent", Reason: fmt.Sprintf("%s is absent (bound %q): %s", a.Name, a.Bound, a.Reason)})
		}
	}
}

// trackedFrom starts a member's tracking from its recorded absence, so that a bound survives a
// supervisor's restart; a member with no record may have been receiving.
func trackedFrom(c *v1.MysqlCluster, name string) failover.Tracked {
	for _, a := range c.Status.AbsentInstances {
		if a.Name == name {
			t := failover.Tracked{Bound: a.Bound, AbsentSince: a.Since.Time, Misses: failover.AbsentAfter, Reason: a.Reason}
			if a.ReceivingAt != nil {
				t.ReceivingAt = a.ReceivingAt.Time
			}
			return t
		}
	}
	return failover.NewTracked()
}

// absentRecord is the status record of an absent member; a recorded one keeps its reason.
func absentRecord(c *v1.MysqlCluster, name string, t failover.Tracked) v1.AbsentInstance {
	a := v1.AbsentInstance{Name: name, Since: metav1.NewTime(t.AbsentSince.Truncate(time.Second)), Bound: t.Bound}
	if !t.ReceivingAt.IsZero() {
		at := metav1.NewTime(t.ReceivingAt.Truncate(time.Second))
		a.ReceivingAt = &at
	}
	a.Reason = fmt.Sprintf("did not answer %d consecutive observations: %s", t.Misses, t.Reason)
	if t.Bound != "" {
		a.Reason += "; bound: the primary's position read after it was last able to receive"
	}
	for _, r := range c.Status.AbsentInstances {
		if r.Name == name {
			a.Since, a.Reason = r.Since, r.Reason
			if t.Bound != "" && r.Bound == "" {
				// A converge recorded it without a bound: this pass knows one.
				a.Reason, _, _ = strings.Cut(r.Reason, "; "+orchestrate.NoBoundYet)
				a.Reason += "; bound: the primary's position read after it was last able to receive"
			}
		}
	}
	return a
}

// absentEqual reports whether two lists of absent members say the same (the reason aside).
func absentEqual(a, b []v1.AbsentInstance) bool {
	return slices.EqualFunc(a, b, func(x, y v1.AbsentInstance) bool {
		return x.Name == y.Name && x.Bound == y.Bound && x.Since.Equal(&y.Since) && x.ReceivingAt.Equal(y.ReceivingAt)
	})
}
