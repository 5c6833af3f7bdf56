package failover

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// PrimaryChange is the newest recorded operation that moved the primary (a failover or a
// switchover), as far as the tail proof needs it.
type PrimaryChange struct {
	// Type and Result of the operation (failover, Succeeded).
	Type, Result string
	// FormerPrimary is the instance it replaced.
	FormerPrimary string
	// Lost is the recorded count of acknowledged transactions lost: 0 when proven none.
	Lost int64
	// SeenAt is when the former primary was last observed healthy; Until is when its first
	// commit could have returned without an acknowledgement. Both zero when no semi-sync proof
	// was recorded.
	SeenAt, Until time.Time
	// CheckedAt is when the supervisor that started the failover last found the former primary
	// writable and protected by semi-sync (zero: not started by a supervisor that saw it so), and
	// CheckedStart when the server process that answered that check had started. Both are on
	// the clock of the process that proves (that supervisor's own).
	CheckedAt, CheckedStart time.Time
	// Written are that supervisor's recent checks that found the former primary writable and
	// protected, oldest first, each with what it had written to its binary log then.
	Written []WrittenAt
}

// WrittenAt is what a server had written to its binary log (a GTID position) at a time.
type WrittenAt struct {
	At   time.Time
	GTID string
}

// processSlack is how far apart two server start times must be to be two processes: uptime is
// read in whole seconds, and the server's clock may drift from this process's.
const processSlack = 5 * time.Second

// TailInput is what ProveUnacknowledgedTail judges: a quarantined former primary, observed
// now, against the primary that replaced it and every other member.
type TailInput struct {
	// Change is the newest primary change on record.
	Change PrimaryChange
	// Recorded is the quarantine record's errant transactions (status.errantInstances[].errantGTIDs).
	Recorded string
	// Primary and Instance are the current primary and the quarantined instance, observed now.
	Primary, Instance topology.Snapshot
	// Started is when the instance's server started (observed now minus its uptime); zero when
	// its uptime could not be read.
	Started time.Time
	// Others are every other member, observed now; OthersStarted is when each one's server
	// started (by name; absent when unknown).
	Others        []topology.Snapshot
	OthersStarted map[string]time.Time
	// Silent names the members that could not be observed.
	Silent []string
}

// TailProof is what a proven unacknowledged tail discards, and why that is safe.
type TailProof struct {
	// Discard lists the transactions (GTIDs) the re-seed throws away.
	Discard string
	// Count is how many there are.
	Count uint64
	// Evidence is one observation per line.
	Evidence []string
}

// startSlack absorbs the error in Started: uptime is read in whole seconds and the query takes
// its round trip.
const startSlack = 2 * time.Second

// ErrTailNotProven wraps every reason ProveUnacknowledgedTail refuses.
var ErrTailNotProven = errors.New("not proven to be an unacknowledged tail")

// ProveUnacknowledgedTail proves, from observations alone, that every transaction a quarantined
// former primary holds beyond the current primary is one its crash left unacknowledged, so that
// replacing its data loses nothing a client was told had committed. All of these must hold:
//   - the newest primary change is a failover that replaced this instance and proved, under
//     semi-sync, that no acknowledged transaction was lost: a commit returns only once a replica
//     received it, and the new primary held everything any replica received;
//   - the supervisor that started that failover found it writable and protected by semi-sync
//     at its last check, and the server answering now is another process than the one that
//     answered that check (their start times differ): that process died after the check, which
//     ended every session still waiting; the new one started (after it was last seen healthy)
//     before any commit could have returned without an acknowledgement (the semi-sync timeout),
//     and read-only, so no commit began after it;
//   - every transaction of the run was written after that check, and every other member's
//     server ran since before it: a replica loses what it received but had not applied when it
//     restarts, so one restarted after a transaction of the run was written may have
//     acknowledged it and lost it;
//   - what it holds beyond the primary is exactly a run of its own transactions right after the
//     primary's last one from it, the same run it was quarantined with (nothing added since);
//   - it is read-only and receives from nobody, and no other member holds any of the run (one
//     that did might have acknowledged it), every member observed.
func ProveUnacknowledgedTail(in TailInput) (TailProof, error) {
	name := in.Instance.Name
	if err := changeProves(in.Change, name); err != nil {
		return TailProof{}, err
	}
	var ev []string
	ev = append(ev, fmt.Sprintf("the failover that replaced %s proved no acknowledged transaction lost under semi-sync (%s was last seen healthy at %s; no commit could return unacknowledged before %s)",
		name, name, stamp(in.Change.SeenAt), stamp(in.Change.Until)))
	switch {
	case !in.Instance.Complete() || !in.Primary.Complete():
		return TailProof{}, notProven("%s or the primary %s was not fully observed", name, in.Primary.Name)
	case len(in.Silent) > 0:
		return TailProof{}, notProven("%s did not answer: it may hold (and may have acknowledged) part of the tail", strings.Join(in.Silent, ", "))
	}
	if err := restartProven(in); err != nil {
		return TailProof{}, err
	}
	ev = append(ev, fmt.Sprintf("%s's server restarted at %s: it is not the process (started at %s) that the supervisor's last check found writable and protected at %s, so that process died after the check and took every waiting session with it; the restart is inside the window, and the server is read-only",
		name, stamp(in.Started), stamp(in.Change.CheckedStart), stamp(in.Change.CheckedAt)))
	t, err := tailOf(in.Primary, in.Instance)
	if err != nil {
		return TailProof{}, err
	}
	if t.recorded != in.Recorded {
		return TailProof{}, notProven("%s now holds %s beyond the primary, not %s as when it was quarantined", name, t.recorded, in.Recorded)
	}
	ref, err := membersKeptWhatTheyReceived(in, t)
	if err != nil {
		return TailProof{}, err
	}
	for _, o := range in.Others {
		if o.Name != name && o.Name != in.Primary.Name && t.heldBy(o) {
			return TailProof{}, notProven("%s holds part of %s's tail: it may have acknowledged it", o.Name, name)
		}
	}
	ev = append(ev, fmt.Sprintf("every transaction of the run was written after the supervisor's check at %s (which found %s written), and every other member's server ran since before that check, so none lost a part it had received",
		stamp(ref.At), ref.GTID))
	ev = append(ev, fmt.Sprintf("%s holds %d transaction(s) of its own after the primary %s's last from it (%s), and no other member holds any", name, t.count, in.Primary.Name, t.discard))
	return TailProof{Discard: t.discard, Count: t.count, Evidence: ev}, nil
}

// restartProven checks that the server answering now is another process than the one the
// supervisor last found alive and protected, started inside the semi-sync window, read-only and
// receiving from nobody.
func restartProven(in TailInput) error {
	name := in.Instance.Name
	switch {
	case in.Change.CheckedAt.IsZero():
		return notProven("the failover away from %s was not started by this supervisor after its checks found it writable and protected by semi-sync (only that supervisor's own clock places the crash)", name)
	case in.Started.IsZero():
		return notProven("the uptime of %s could not be read, so no restart is proven", name)
	case !in.Started.After(in.Change.CheckedStart.Add(processSlack)):
		return notProven("%s's server (started at %s) is the process the supervisor found alive and writable at %s (started at %s): it has not restarted, and a session may still wait on a commit",
			name, stamp(in.Started), stamp(in.Change.CheckedAt), stamp(in.Change.CheckedStart))
	case in.Started.Add(-startSlack).Before(in.Change.SeenAt):
		return notProven("%s's server started at %s, not after it was last seen healthy (%s): a session may still wait on a commit", name, stamp(in.Started), stamp(in.Change.SeenAt))
	case !in.Started.Add(startSlack).Before(in.Change.Until):
		return notProven("%s's server started at %s, after %s: a commit may have returned without an acknowledgement before the crash", name, stamp(in.Started), stamp(in.Change.Until))
	case !in.Instance.ReadOnly:
		return notProven("%s is writable", name)
	case in.Instance.Replica != nil && in.Instance.Replica.IOThread != topology.ThreadStopped:
		return notProven("%s still receives from a source (IO thread %s)", name, in.Instance.Replica.IOThread)
	}
	return nil
}

// membersKeptWhatTheyReceived finds the supervisor's latest check before the whole run was
// written and checks that every other member's server ran since before it: a replica loses
// what it received but had not applied when it restarts, so one restarted after part of the
// run was written may have acknowledged it and lost it.
func membersKeptWhatTheyReceived(in TailInput, t tail) (WrittenAt, error) {
	name := in.Instance.Name
	var ref WrittenAt
	for _, w := range in.Change.Written {
		if t.after(w.GTID) {
			ref = w
		}
	}
	if ref.At.IsZero() {
		return ref, notProven("no check of the supervisor found %s before its run (%s) was written: a member that restarted since may have acknowledged part of it and lost it", name, t.discard)
	}
	for _, o := range in.Others {
		if o.Name == name {
			continue
		}
		if st, ok := in.OthersStarted[o.Name]; !ok || !st.Before(ref.At) {
			return ref, notProven("%s's server did not run since before %s's run was written (the check at %s): restarted since, it may have acknowledged part of it and lost it", o.Name, name, stamp(ref.At))
		}
	}
	return ref, nil
}

func changeProves(ch PrimaryChange, name string) error {
	switch {
	case ch.Type != "failover" || ch.Result != "Succeeded" || ch.FormerPrimary != name:
		return notProven("the newest primary change on record is not a successful failover away from %s", name)
	case ch.Lost != 0 || ch.SeenAt.IsZero() || ch.Until.IsZero():
		return notProven("the failover away from %s did not prove, under semi-sync, that no acknowledged transaction was lost", name)
	}
	return nil
}

func notProven(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrTailNotProven}, args...)...)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// tail is a former primary's own run of transactions beyond the primary.
type tail struct {
	discard  string
	count    uint64
	recorded string // in the quarantine record's form
	heldBy   func(topology.Snapshot) bool
	// after reports whether the whole run comes after a written GTID position.
	after func(pos string) bool
}

func tailOf(primary, self topology.Snapshot) (tail, error) {
	if self.Flavor.IsMariaDB() {
		return mariadbTail(primary, self)
	}
	return mysqlTail(primary, self)
}

// mariadbTail: gtid_binlog_state keeps the last sequence number of every (domain, server) that
// reached the binlog. The tail is the one entry beyond the primary's record of it; it must be
// the instance's own, the newest of its domain, and the primary must know the server (it then
// replicated it up to have; in strict mode every sequence number after it up to the entry's
// was written by the instance).
func mariadbTail(primary, self topology.Snapshot) (tail, error) {
	var extra []ServerRun
	for _, run := range BeyondPrimary(primary.GTID.BinlogState, self.GTID.BinlogState) {
		if !run.Known {
			return tail{}, notProven("%s holds %s, from a server the primary never replicated", self.Name, run.Last)
		}
		extra = append(extra, run)
	}
	if len(extra) != 1 {
		return tail{}, notProven("%s holds %d runs of transactions beyond the primary, not one", self.Name, len(extra))
	}
	g, have := extra[0].Last, extra[0].Have
	last, ok := self.GTID.BinlogPos.Domain(g.Domain)
	switch {
	case g.ServerID != self.ServerID:
		return tail{}, notProven("%s's extra transactions (%s) were written by server %d, not by it (%d)", self.Name, g, g.ServerID, self.ServerID)
	case !ok || last != g:
		return tail{}, notProven("%s's extra transactions (%s) are not the newest of their domain", self.Name, g)
	}
	first := gtid.MariaDBGTID{Domain: g.Domain, ServerID: g.ServerID, Seq: have + 1}
	discard := first.String()
	if g.Seq > have+1 {
		discard += ".." + g.String()
	}
	holds := func(o topology.Snapshot) bool {
		for _, h := range o.GTID.BinlogState {
			if h.Domain == g.Domain && h.ServerID == g.ServerID && h.Seq > have {
				return true
			}
		}
		for _, pos := range []gtid.MariaDBPos{o.GTID.IOPos, o.GTID.SlavePos, o.GTID.CurrentPos, o.GTID.BinlogPos} {
			if h, ok := pos.Domain(g.Domain); ok && h.ServerID == g.ServerID && h.Seq > have {
				return true
			}
		}
		return false
	}
	after := func(pos string) bool {
		p, err := gtid.ParseMariaDBPos(pos)
		if err != nil || pos == "" {
			return false
		}
		c, _ := p.Domain(g.Domain)
		return c.Seq < first.Seq
	}
	return tail{discard: discard, count: g.Seq - have, recorded: g.String(), heldBy: holds, after: after}, nil
}

// ServerRun is one server's transactions an instance holds beyond the primary's record of that
// server: Last is the instance's last one; Have is the primary's last one from it, when Known.
type ServerRun struct {
	Last  gtid.MariaDBGTID
	Have  uint64
	Known bool
}

// BeyondPrimary compares two gtid_binlog_state lists (the last sequence number of every
// (domain, server_id) that reached each binlog): it returns every server whose transactions the
// instance holds beyond the primary's record of that server. In strict mode a known server's
// run is every sequence number after Have up to Last.Seq; of an unknown one only Last is sure.
func BeyondPrimary(primary, self []gtid.MariaDBGTID) []ServerRun {
	var out []ServerRun
	for _, g := range self {
		if g.Seq == 0 {
			continue
		}
		run := ServerRun{Last: g}
		for _, p := range primary {
			if p.Domain == g.Domain && p.ServerID == g.ServerID {
				run.Have, run.Known = p.Seq, true
			}
		}
		if !run.Known || g.Seq > run.Have {
			out = append(out, run)
		}
	}
	return out
}

// mysqlTail: the extra set must be one interval of the instance's own server_uuid, starting
// right after the primary's last transaction from it.
func mysqlTail(primary, self topology.Snapshot) (tail, error) {
	extra := self.GTID.Executed.Subtract(primary.GTID.Executed)
	sids := extra.SIDs()
	if len(sids) != 1 || sids[0].UUID.String() != strings.ToLower(self.ServerUUID) {
		return tail{}, notProven("%s's extra transactions (%s) are not a run of its own (%s)", self.Name, extra, self.ServerUUID)
	}
	ivs := extra.Intervals(sids[0])
	prev := primary.GTID.Executed.Intervals(sids[0])
	if len(ivs) != 1 || len(prev) == 0 || prev[len(prev)-1].End+1 != ivs[0].Start || slices.ContainsFunc(prev, func(iv gtid.Interval) bool { return iv.Start > ivs[0].End }) {
		return tail{}, notProven("%s's extra transactions (%s) do not directly follow the primary's last one from it", self.Name, extra)
	}
	holds := func(o topology.Snapshot) bool {
		return !o.GTID.Executed.Union(o.GTID.Received).Intersect(extra).IsEmpty()
	}
	after := func(pos string) bool {
		p, err := gtid.ParseMySQLSet(pos)
		return err == nil && pos != "" && p.Intersect(extra).IsEmpty()
	}
	return tail{discard: extra.String(), count: ivs[0].Count(), recorded: extra.String(), heldBy: holds, after: after}, nil
}
