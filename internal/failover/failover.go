package failover

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// Check is one health check of the primary.
type Check struct {
	// PodUID is the pod incarnation checked; suspicion only accumulates across checks of the
	// same incarnation (a recreated pod starts afresh).
	PodUID string
	// PodState describes the pod object when it is not running: "absent", "terminating",
	// "phase Failed", …; empty when the pod object says it runs.
	PodState string
	// Reachable is true when the server answered the check.
	Reachable bool
	// Writable is true when it answered with read_only (and super_read_only) OFF.
	Writable bool
	// Refused is true when nothing listened at its address (connection refused).
	Refused bool
	// Uptime is how long the server has run, read (UptimeKnown) when it answered read-only: a
	// read-only primary that restarted is down for writes; one that did not was made
	// read-only by someone. It is read too when it answered writable and protected by
	// semi-sync: which server process was checked alive is evidence for the tail proof.
	Uptime      time.Duration
	UptimeKnown bool
	// UptimeAt is when the uptime was asked for, before the server read its clock (zero: At).
	// The server counts whole seconds, so its process started before UptimeAt-Uptime and after
	// UptimeAt-Uptime-1s.
	UptimeAt time.Time
	// At is when the check ended.
	At time.Time
	// Detail says why the check failed (already free of secrets).
	Detail string
}

// Verdict is what Judge concludes about the primary.
type Verdict string

// Verdicts.
const (
	// Alive: the primary answers and takes writes. A failover is refused.
	Alive Verdict = "Alive"
	// ReadOnly: the primary answers but is read-only, as a restarted server is. It can be
	// fenced over SQL, so a failover may proceed.
	ReadOnly Verdict = "ReadOnly"
	// Dead: unreachable for the threshold of consecutive checks and every reachable replica lost it.
	Dead Verdict = "Dead"
	// Unreachable: the checks failed, but the evidence is not enough to call it dead.
	Unreachable Verdict = "Unreachable"
)

// Judgement is Judge's verdict with the observations behind it.
type Judgement struct {
	Verdict  Verdict
	Reason   string
	Evidence []string
	// Corroborated is true when the primary failed its last check and every reachable replica
	// that replicates from it has lost it (none still receives), whatever the count of failed
	// checks: the replicas' heartbeat-bound view agrees that the primary is silent, so the
	// checks that confirm it may follow each other at once (see Assess).
	Corroborated bool
}

// Member is a reachable instance other than the primary.
type Member struct {
	// Name is the pod name.
	Name string
	// Ordinal orders ties.
	Ordinal int32
	// Snapshot is a complete observation.
	Snapshot topology.Snapshot
	// Quarantined instances are never candidates and never corroborate.
	Quarantined bool
	// LastKnownLag is the lag recorded before the primary failed, used when the server no
	// longer reports one (its receiver is disconnected).
	LastKnownLag *int64
}

// Source identifies the primary as its replicas know it: by the host name they replicate from,
// and by its server_id once they connected. Identity, not address: a pod recreated with a new
// IP is still the same source, and a reused IP is not.
type Source struct {
	Host     string
	ServerID uint32
}

// feeds reports whether the replica's receiver is configured for this source.
func (s Source) feeds(r *topology.ReplicaStatus) bool {
	return r.SourceHost == s.Host || s.ServerID != 0 && r.SourceServerID == s.ServerID
}

// Judge decides whether the primary is dead from the checks (oldest first), the primary as its
// replicas know it, and the reachable members. threshold is the number of consecutive failed
// checks of one pod incarnation required.
func Judge(primary string, source Source, checks []Check, threshold int, members []Member) Judgement {
	if len(checks) == 0 {
		return Judgement{Verdict: Unreachable, Reason: "the primary " + primary + " was not checked"}
	}
	last := checks[len(checks)-1]
	var ev []string
	if last.Reachable {
		if last.Writable {
			return Judgement{
				Verdict: Alive, Reason: "the primary " + primary + " answers and is writable: it is not dead (use switchover for a planned change)",
				Evidence: []string{primary + " answered and is writable"},
			}
		}
		return Judgement{
			Verdict: ReadOnly, Reason: "the primary " + primary + " answers but is read-only (it restarted); it can be fenced over SQL",
			Evidence: []string{primary + " answered with read_only=ON"},
		}
	}
	failed := 0
	for i := len(checks) - 1; i >= 0; i-- {
		c := checks[i]
		if c.Reachable || c.PodUID != last.PodUID {
			break
		}
		failed++
	}
	what := last.Detail
	if last.PodState != "" {
		what = "pod " + last.PodState
		if last.Detail != "" {
			what += "; " + last.Detail
		}
	}
	ev = append(ev, fmt.Sprintf("%s failed %d consecutive check(s) of pod uid %s (threshold %d): %s", primary, failed, last.PodUID, threshold, what))
	var agree, disagree []string
	for _, m := range members {
		r := m.Snapshot.Replica
		if m.Quarantined {
			// A quarantined replica never corroborates a death, but one still receiving from
			// the primary proves it alive.
			if r != nil && source.feeds(r) && r.IOThread == topology.ThreadRunning {
				disagree = append(disagree, m.Name)
				ev = append(ev, m.Name+" (quarantined) still receives from the primary (IO thread running)")
			}
			continue
		}
		switch {
		case r == nil:
			ev = append(ev, m.Name+" has no replication configured")
		case !source.feeds(r):
			ev = append(ev, fmt.Sprintf("%s replicates from %s (server_id %d), not from the primary %s (server_id %d)", m.Name, r.SourceHost, r.SourceServerID, source.Host, source.ServerID))
		case r.IOThread == topology.ThreadRunning:
			disagree = append(disagree, m.Name)
			ev = append(ev, m.Name+" still receives from the primary (IO thread running)")
		case r.IOThread != topology.ThreadConnecting && strings.TrimSpace(r.LastIOError) == "":
			// Stopped with no error: someone stopped it (maintenance STOP SLAVE); that says
			// nothing about the primary.
			ev = append(ev, m.Name+"'s receiver was stopped cleanly (no error): no evidence either way")
		case answeredError(r.LastIOErrno):
			// The primary itself sent that error (wrong password, too many connections, a
			// purged binlog): it answered, and its receiver's trouble says nothing about a death.
			ev = append(ev, fmt.Sprintf("%s's receiver is %s with an error the primary sent (%d: %s): no evidence of a death", m.Name, r.IOThread, r.LastIOErrno, strings.TrimSpace(r.LastIOError)))
		default:
			agree = append(agree, m.Name)
			detail := strings.TrimSpace(r.LastIOError)
			if detail == "" {
				detail = "no error recorded yet"
			}
			ev = append(ev, fmt.Sprintf("%s lost the primary: IO thread %s (%s)", m.Name, r.IOThread, detail))
		}
	}
	corroborated := len(disagree) == 0 && len(agree) > 0
	switch {
	case failed < threshold:
		return Judgement{Verdict: Unreachable, Reason: fmt.Sprintf("the primary %s failed %d of the %d consecutive checks required", primary, failed, threshold), Evidence: ev, Corroborated: corroborated}
	case len(disagree) > 0:
		return Judgement{Verdict: Unreachable, Reason: fmt.Sprintf("the primary %s is unreachable from here but %s still receive(s) from it: unreachable is not dead", primary, strings.Join(disagree, ", ")), Evidence: ev}
	case len(agree) == 0:
		return Judgement{Verdict: Unreachable, Reason: fmt.Sprintf("the primary %s is unreachable and no replica can corroborate that it is dead", primary), Evidence: ev}
	}
	return Judgement{Verdict: Dead, Reason: fmt.Sprintf("the primary %s failed %d consecutive checks and every reachable replica (%s) lost it", primary, failed, strings.Join(agree, ", ")), Evidence: ev, Corroborated: true}
}

// answeredError reports whether a receiver's last error is one a server sent (a server error
// code below 2000, other than the network errors 1152-1161 a receiver reports itself), rather than
// a lost, refused or timed-out connection (the client errors from 2000 and the network ones).
func answeredError(errno int) bool {
	return errno > 0 && errno < 2000 && (errno < 1152 || errno > 1161)
}

// ElectInput is what Elect looks at.
type ElectInput struct {
	// Members are the reachable instances other than the old primary.
	Members []Member
	// Missing are instances other than the old primary that could not be observed: they may
	// hold acknowledged transactions, so no candidate can be proven complete while one is
	// missing, unless Absent records a bound on what it received and the candidate holds it.
	Missing []string
	// Absent are the recorded absences (status.absentInstances): a missing member whose bound
	// the candidate holds cannot hold anything the candidate lacks.
	Absent []Absence
	// History is the known primaries and bootstrap provenance, for the errant check.
	History topology.History
	// MaxLag is the largest known lag a candidate may have (0: no bound).
	MaxLag time.Duration
	// Requested is the instance a person asked for (--to); empty lets Elect choose.
	Requested string
	// Force picks a candidate even when none is provably safe (the requested one, or the most
	// advanced non-quarantined replica), marking the decision unsafe.
	Force bool
}

// Decision is Elect's choice with its evidence.
type Decision struct {
	// Candidate is the chosen instance.
	Candidate string
	// CandidateSet is its received ∪ executed GTIDs: what it will have applied before promotion.
	CandidateSet string
	// Reason says why it was chosen.
	Reason string
	// Rejected says, for every other member, why it was not chosen.
	Rejected []string
	// Safe is false when Force chose a candidate that is not provably safe.
	Safe bool
	// Drained is true when the candidate had already applied everything it received when it
	// was observed (its relay log is drained): what it executed (on MariaDB gtid_current_pos
	// and the binlog state, which the promotion's own check reads too) holds CandidateSet, so
	// there is nothing left to wait for.
	Drained bool
}

// ErrNoSafeCandidate means no member is provably safe to promote.
var ErrNoSafeCandidate = errors.New("no safe candidate")

type judged struct {
	m      Member
	set    history
	reason string // why unsafe; empty when safe so far
	errant bool
	// harmless lists the absent members whose recorded bound this member holds.
	harmless []string
}

// Elect chooses the replica to promote.
func Elect(in ElectInput) (Decision, error) {
	var all []*judged
	for _, m := range in.Members {
		j := &judged{m: m}
		j.set, j.reason = receivedAndExecuted(m.Snapshot)
		r := m.Snapshot.Replica
		switch {
		case m.Quarantined:
			j.reason = "quarantined"
		case r == nil:
			j.reason = "not a replica (no replication configured)"
		case r.LastSQLErrno != 0:
			j.reason = fmt.Sprintf("applier stopped with error %d: %s", r.LastSQLErrno, r.LastSQLError)
		case !r.SQLRunning:
			j.reason = "applier (SQL thread) not running"
		}
		if !m.Quarantined {
			cl := topology.Classify(topology.ClassifyInput{Instance: m.Snapshot, History: in.History})
			if cl.Has(topology.ClassErrant) {
				j.errant = true
				j.reason = "errant transactions: " + errantEvidence(cl)
			}
		}
		if j.reason == "" && in.MaxLag > 0 {
			lag := m.LastKnownLag
			if r != nil && r.SecondsBehind != nil {
				lag = r.SecondsBehind
			}
			if lag != nil && time.Duration(*lag)*time.Second > in.MaxLag {
				j.reason = fmt.Sprintf("%ds behind (bound %s)", *lag, in.MaxLag)
			}
		}
		all = append(all, j)
	}
	// Containment: a candidate must hold everything every other legitimate member holds;
	// errant and quarantined members' histories do not count.
	for _, j := range all {
		if j.reason != "" {
			continue
		}
		for _, o := range all {
			if o == j || o.errant || o.m.Quarantined || o.set.empty() {
				continue
			}
			if lacking, ok := j.set.contains(o.set); !ok {
				j.reason = fmt.Sprintf("lacks transactions %s has: %s", o.m.Name, lacking)
				break
			}
		}
	}
	// Members that cannot be observed: each is harmless to a candidate that holds its recorded
	// bound, and blocks every other.
	if len(in.Missing) > 0 {
		for _, j := range all {
			if j.reason == "" {
				j.reason, j.harmless = weighAbsent(j.m.Snapshot, in.Missing, in.Absent)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *judged) int {
		if c := cmp.Compare(b.set.count(), a.set.count()); c != 0 {
			return c
		}
		// Mid-upgrade, replicas run mixed versions. Replication from an older source to a newer
		// replica is supported, the reverse is not: among equals, the oldest server is promoted,
		// so that no replica is left behind a source newer than itself.
		if c := compareServers(a.m.Snapshot.Flavor, b.m.Snapshot.Flavor); c != 0 {
			return c
		}
		return cmp.Compare(a.m.Ordinal, b.m.Ordinal)
	})
	var chosen *judged
	for _, j := range all {
		if j.reason != "" {
			continue
		}
		if in.Requested == "" || j.m.Name == in.Requested {
			chosen = j
			break
		}
	}
	d := Decision{Safe: true}
	switch {
	case chosen != nil && in.Requested != "":
		d.Reason = "requested with --to; holds every other survivor's transactions, no errant ones, within the lag bound"
	case chosen != nil:
		d.Reason = "holds every other survivor's transactions (most advanced), no errant ones, within the lag bound"
		newer, older := versionSkew(chosen, all)
		if newer != "" {
			d.Reason += "; the oldest server version (" + chosen.m.Snapshot.Flavor.Version.String() + ", older than " + newer + "), so no replica follows a newer source"
		}
		if older != "" {
			d.Reason += "; newer (" + chosen.m.Snapshot.Flavor.Version.String() + ") than " + older + ", which will follow a newer source until they are upgraded: the only candidate holding every transaction"
		}
	case in.Force:
		// Forced: the requested replica, else the most advanced one that is neither errant nor
		// stopped on an applier error, else the most advanced replica at all.
		for _, pass := range []func(*judged) bool{
			func(j *judged) bool { return !j.errant && j.m.Snapshot.Replica.LastSQLErrno == 0 },
			func(*judged) bool { return true },
		} {
			for _, j := range all {
				if j.m.Quarantined || j.m.Snapshot.Replica == nil {
					continue
				}
				if in.Requested != "" && j.m.Name != in.Requested || in.Requested == "" && !pass(j) {
					continue
				}
				chosen = j
				break
			}
			if chosen != nil {
				break
			}
		}
		d.Safe = false
		if chosen != nil {
			d.Reason = "FORCED: not provably safe (" + chosen.reason + ")"
		}
	}
	for _, j := range all {
		if chosen != nil && j == chosen {
			continue
		}
		why := j.reason
		if why == "" {
			why = "safe, but less advanced or later in order"
			if in.Requested != "" {
				why = "safe, but not the requested instance"
			}
		}
		d.Rejected = append(d.Rejected, j.m.Name+": "+why)
	}
	d.Rejected = append(d.Rejected, missingRejections(in, chosen)...)
	if chosen == nil {
		what := "no replica is provably safe to promote"
		if in.Requested != "" {
			what = "the requested instance " + in.Requested + " is not provably safe to promote"
		}
		if len(d.Rejected) > 0 {
			what += ": " + strings.Join(d.Rejected, "; ")
		}
		return d, fmt.Errorf("%w: %s", ErrNoSafeCandidate, what)
	}
	if len(chosen.harmless) > 0 && d.Safe {
		d.Reason += "; holds the recorded bound of every absent member (" + strings.Join(chosen.harmless, ", ") + ")"
	}
	d.Candidate, d.CandidateSet = chosen.m.Name, chosen.set.String()
	_, d.Drained = executed(chosen.m.Snapshot).contains(chosen.set)
	return d, nil
}

// missingRejections says, for every member that cannot be observed, why it was not chosen and,
// for a recorded absence, whether the chosen candidate holds its bound.
func missingRejections(in ElectInput, chosen *judged) []string {
	var out []string
	for _, name := range in.Missing {
		why := "cannot be observed"
		if i := slices.IndexFunc(in.Absent, func(a Absence) bool { return a.Name == name }); i >= 0 {
			why = "absent since " + in.Absent[i].Since.UTC().Format(time.RFC3339) + ", cannot be observed"
			switch {
			case in.Absent[i].Bound == "":
				why += "; no bound recorded on what it received"
			case chosen != nil && slices.ContainsFunc(chosen.harmless, func(h string) bool { return strings.HasPrefix(h, name+" ") }):
				why += "; harmless: the candidate holds its recorded bound " + in.Absent[i].Bound + ", so it holds nothing the candidate lacks"
			default:
				why += "; recorded bound " + in.Absent[i].Bound
			}
		}
		out = append(out, name+": "+why)
	}
	return out
}

// compareServers orders servers by version, oldest first; a server whose version is unknown
// comes after every known one.
func compareServers(a, b topology.Flavor) int {
	if ak, bk := a.Line != "", b.Line != ""; ak != bk || !ak {
		return cmp.Compare(boolRank(!ak), boolRank(!bk))
	}
	return compareVersions(a.Version, b.Version)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareVersions orders server versions, oldest first.
func compareVersions(a, b topology.Version) int {
	if c := cmp.Compare(a.Major, b.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Minor, b.Minor); c != 0 {
		return c
	}
	return cmp.Compare(a.Patch, b.Patch)
}

// versionSkew lists the members that will follow the chosen one (neither quarantined nor
// errant) whose known server versions are newer, and older, than the chosen one's.
func versionSkew(chosen *judged, all []*judged) (newer, older string) {
	var n, o []string
	for _, j := range all {
		if j == chosen || j.m.Quarantined || j.errant || j.m.Snapshot.Flavor.Line == "" || chosen.m.Snapshot.Flavor.Line == "" {
			continue
		}
		name := j.m.Name + " " + j.m.Snapshot.Flavor.Version.String()
		switch compareVersions(j.m.Snapshot.Flavor.Version, chosen.m.Snapshot.Flavor.Version) {
		case 1:
			n = append(n, name)
		case -1:
			o = append(o, name)
		}
	}
	return strings.Join(n, ", "), strings.Join(o, ", ")
}

func errantEvidence(cl topology.Classification) string {
	var out []string
	for _, e := range cl.Evidence {
		if strings.Contains(e, "errant") || strings.Contains(e, "never a primary") || strings.Contains(e, "diverged") {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return "see the instance's classification"
	}
	return strings.Join(out, "; ")
}

// history is an instance's received ∪ executed transactions in its flavor's form.
type history struct {
	mariadb bool
	set     gtid.MySQLSet
	pos     gtid.MariaDBPos
	// state is MariaDB's gtid_binlog_state: the last sequence number of every (domain,
	// server_id) in the binlog, which proves what positions cannot (see gtid.Relation).
	state []gtid.MariaDBGTID
}

// receivedAndExecuted is what the instance will have applied once its relay log is drained.
// On MariaDB the received position (Gtid_IO_Pos) is merged per domain with gtid_current_pos;
// a divergence between the two is reported as the reason the instance is unsafe.
func receivedAndExecuted(s topology.Snapshot) (history, string) {
	if s.Flavor.IsMariaDB() {
		h := executed(s)
		if s.GTID.IOPos.IsEmpty() {
			return h, ""
		}
		// What the relay log holds will be in the binlog once applied (log_slave_updates).
		for _, g := range s.GTID.IOPos.GTIDs() {
			i := slices.IndexFunc(h.state, func(x gtid.MariaDBGTID) bool { return x.Domain == g.Domain && x.ServerID == g.ServerID })
			switch {
			case i < 0:
				h.state = append(h.state, g)
			case h.state[i].Seq < g.Seq:
				h.state[i] = g
			}
		}
		u, err := s.GTID.CurrentPos.Union(s.GTID.IOPos)
		if err != nil {
			return h, "received and executed positions diverge: " + err.Error()
		}
		h.pos = u
		return h, ""
	}
	return history{set: s.GTID.Executed.Union(s.GTID.Received)}, ""
}

// executed is what the instance has applied: receivedAndExecuted without its relay log.
func executed(s topology.Snapshot) history {
	if s.Flavor.IsMariaDB() {
		return history{mariadb: true, pos: s.GTID.CurrentPos, state: slices.Clone(s.GTID.BinlogState)}
	}
	return history{set: s.GTID.Executed}
}

func (h history) empty() bool {
	if h.mariadb {
		return h.pos.IsEmpty()
	}
	return h.set.IsEmpty()
}

func (h history) count() uint64 {
	if h.mariadb {
		return h.pos.Count()
	}
	return h.set.Count()
}

func (h history) String() string {
	if h.mariadb {
		return h.pos.String()
	}
	return h.set.String()
}

// contains reports whether h holds all of o, and if not, what is lacking.
func (h history) contains(o history) (string, bool) {
	if h.mariadb {
		if !h.pos.Contains(o.pos) {
			return fmt.Sprintf("%s, not proven within %s", o.pos, h.pos), false
		}
		// Every server's transactions o holds must be held by h as far: with strict mode a
		// server's sequence numbers are linear, so a later last number is a proof.
		for _, g := range o.state {
			var have uint64
			for _, x := range h.state {
				if x.Domain == g.Domain && x.ServerID == g.ServerID {
					have = x.Seq
				}
			}
			if g.Seq > have {
				return fmt.Sprintf("%s (from server_id %d; it has that server only up to %d)", g, g.ServerID, have), false
			}
		}
		return "", true
	}
	if h.set.Contains(o.set) {
		return "", true
	}
	return o.set.Subtract(h.set).String(), false
}
