package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// Class is the verdict on one instance's replication health.
type Class string

// The classes, from the most to the least severe as Classify ranks them when
// several conditions hold at once.
const (
	// ClassUnreachable: the instance could not be observed (see Evidence for
	// the error kind). A partial observation (the server answered, a later
	// query failed) is reported here too: its state is unknown.
	ClassUnreachable Class = "Unreachable"
	// ClassUninitialized: reachable, no replication configured and no GTID
	// history: a fresh server waiting to be bootstrapped.
	ClassUninitialized Class = "Uninitialized"
	// ClassErrant: holds transactions no known primary produced (or, on
	// MariaDB, a proven divergence from the primary). Must not be promoted
	// and must not be re-pointed blindly.
	ClassErrant Class = "Errant"
	// ClassWrongSource: replicates from something other than the expected
	// primary, or not at all, or without GTID auto-positioning.
	ClassWrongSource Class = "WrongSource"
	// ClassSQLBroken: the SQL (applier) thread is stopped or failed.
	ClassSQLBroken Class = "SQLBroken"
	// ClassIOBroken: the IO (receiver) thread is stopped or cannot connect.
	ClassIOBroken Class = "IOBroken"
	// ClassWritableReplica: a replica with read_only off; any write to it
	// becomes an errant transaction.
	ClassWritableReplica Class = "WritableReplica"
	// ClassBootstrapping: replication is configured and healthy but the
	// instance has not received its first transactions yet.
	ClassBootstrapping Class = "Bootstrapping"
	// ClassLagging: healthy threads, but further behind than the threshold.
	ClassLagging Class = "Lagging"
	// ClassReplicating: healthy and close to the primary.
	ClassReplicating Class = "Replicating"
	// ClassPrimary: the expected primary itself (or, with no expected
	// primary given, an instance that is not replicating and has history).
	ClassPrimary Class = "Primary"
)

var severity = []Class{
	ClassUnreachable, ClassUninitialized, ClassErrant, ClassWrongSource, ClassSQLBroken,
	ClassIOBroken, ClassWritableReplica, ClassBootstrapping, ClassLagging, ClassReplicating, ClassPrimary,
}

// Classification is Classify's verdict with the evidence that led to it.
type Classification struct {
	// Class is the most severe finding.
	Class Class
	// Findings are all classes whose conditions hold, most severe first;
	// Findings[0] == Class. A replica can be SQLBroken and Errant at once:
	// the errant write is what broke the SQL thread under strict mode.
	Findings []Class
	// Evidence lists the observed facts, one sentence each, in the order
	// they were checked.
	Evidence []string
}

// Has reports whether c is among the findings.
func (c Classification) Has(class Class) bool { return slices.Contains(c.Findings, class) }

// SourceAddress is one host:port under which replicas may reach the expected
// primary (pod DNS name, pod IP, Service name).
type SourceAddress struct {
	// Host is compared case-insensitively with Source_Host.
	Host string
	// Port 0 matches any port.
	Port int
}

// History is what is known about transactions that legitimately
// originated on a primary. Failover code fills it from the cluster status
// (the gtidBootstrap provenance and every former primary's fenced GTID
// state), because a dead former primary cannot be asked.
type History struct {
	// MySQL is the union of GTID sets known to be legitimate although their
	// UUID never belonged to a primary (data seeded from a backup, for
	// example).
	MySQL gtid.MySQLSet
	// PrimaryUUIDs are the server_uuids of every instance that has been
	// primary. Transactions from them are never errant; transactions the
	// current primary lacks are reported as evidence.
	PrimaryUUIDs []string
	// PrimaryServerIDs are the MariaDB server_ids of every instance that has
	// been primary: the only legitimate originators in gtid_binlog_state.
	PrimaryServerIDs []uint32
	// MariaDB is a position known to be legitimate history (a seeded
	// gtid_slave_pos, for example).
	MariaDB gtid.MariaDBPos
}

// Thresholds tune Lagging.
type Thresholds struct {
	// MaxLagSeconds: a larger Seconds_Behind is Lagging (0 means 30).
	MaxLagSeconds int64
	// MaxTransactionsBehind: more missing primary transactions is Lagging
	// (0 disables the check).
	MaxTransactionsBehind uint64
}

// DefaultMaxLagSeconds applies when Thresholds.MaxLagSeconds is 0.
const DefaultMaxLagSeconds = 30

// ClassifyInput is everything Classify looks at; it is plain data so that
// tests and failover planning build it without any I/O.
type ClassifyInput struct {
	// Instance is the snapshot being judged.
	Instance Snapshot
	// ExpectedPrimary is the name of the instance that should be primary;
	// empty when unknown (no WrongSource judgement is then possible).
	ExpectedPrimary string
	// Primary is the latest snapshot of the expected primary, when one was
	// taken; its identity is what proves a replica's source right or wrong.
	Primary *Snapshot
	// PrimaryAddresses are used when the identity cannot be compared (the
	// replica never connected, or the primary is unreachable).
	PrimaryAddresses []SourceAddress
	// History is the known-primary GTID history for the errant check.
	History History
	// Thresholds tune Lagging.
	Thresholds Thresholds
}

// Classify judges one instance. It is pure: the same input always gives the
// same verdict, and every rule leaves a sentence in Evidence.
func Classify(in ClassifyInput) Classification {
	c := classifier{in: in}
	c.run()
	slices.SortStableFunc(c.findings, func(a, b Class) int {
		return slices.Index(severity, a) - slices.Index(severity, b)
	})
	c.findings = slices.Compact(c.findings)
	return Classification{Class: c.findings[0], Findings: c.findings, Evidence: c.evidence}
}

type classifier struct {
	in       ClassifyInput
	findings []Class
	evidence []string
}

func (c *classifier) find(class Class, format string, args ...any) {
	c.findings = append(c.findings, class)
	c.note(format, args...)
}

func (c *classifier) note(format string, args ...any) {
	c.evidence = append(c.evidence, fmt.Sprintf(format, args...))
}

func (c *classifier) primary() *Snapshot {
	if p := c.in.Primary; p != nil && p.Complete() {
		return p
	}
	return nil
}

func (c *classifier) run() {
	s := c.in.Instance
	if !s.Reachable {
		if s.Err != nil {
			c.find(ClassUnreachable, "not reachable (%s) during %s: %s", s.Err.Kind, s.Err.Stage, s.Err.Message)
		} else {
			c.find(ClassUnreachable, "not reachable")
		}
		return
	}
	if s.Err != nil {
		c.find(ClassUnreachable, "answered, but the observation failed (%s) during %s: %s; state unknown", s.Err.Kind, s.Err.Stage, s.Err.Message)
		return
	}
	c.note("%s, server_id %d, read_only=%s%s", s.Flavor, s.ServerID, onOff(s.ReadOnly), superReadOnlyText(s.State))
	if s.GTIDMode != "ON" {
		c.note("gtid_mode=%s: without GTIDs neither auto-positioning nor the errant check is possible", s.GTIDMode)
	}

	if c.in.ExpectedPrimary != "" && s.Name == c.in.ExpectedPrimary {
		c.classifyPrimary()
		return
	}
	history := hasHistory(s)
	if s.Replica == nil {
		switch {
		case !history:
			c.find(ClassUninitialized, "no replication configured and no GTID history")
		case c.in.ExpectedPrimary == "":
			c.find(ClassPrimary, "no replication configured, GTID history %s; no expected primary was given, so this looks like a primary", executedText(s))
			return
		default:
			c.find(ClassWrongSource, "no replication configured although %s is the expected primary (GTID history %s)", c.in.ExpectedPrimary, executedText(s))
		}
		if history {
			c.checkErrant()
		}
		c.checkWritable()
		return
	}
	c.checkErrant()
	c.checkSource()
	c.checkThreads()
	c.checkWritable()
	if !c.broken() {
		c.checkProgress(history)
	}
	if len(c.findings) == 0 {
		c.find(ClassReplicating, "replicating from the expected source within thresholds")
	}
}

func (c *classifier) broken() bool {
	return slices.ContainsFunc(c.findings, func(x Class) bool {
		return x == ClassIOBroken || x == ClassSQLBroken || x == ClassWrongSource
	})
}

func (c *classifier) classifyPrimary() {
	s := c.in.Instance
	c.find(ClassPrimary, "is the expected primary")
	if s.ReadOnly {
		c.note("read_only is ON: the primary refuses writes (fenced or not yet promoted)")
	}
	if r := s.Replica; r != nil && (r.IORunning() || r.SQLRunning) {
		c.note("the primary itself replicates from %s:%d (IO %s, SQL running=%v)", r.SourceHost, r.SourcePort, r.IOThread, r.SQLRunning)
	}
	if ss := s.SemiSync; ss.SourceEnabled {
		c.note("semi-sync source enabled, active=%v, %d semi-sync replicas, %d sessions waiting", ss.SourceActive, ss.SourceClients, ss.WaitSessions)
	}
}

func (c *classifier) checkWritable() {
	s := c.in.Instance
	if !s.ReadOnly {
		c.find(ClassWritableReplica, "read_only is OFF on a replica: any client write becomes an errant transaction")
	}
}

func (c *classifier) checkSource() {
	r := c.in.Instance.Replica
	if !r.AutoPosition {
		c.find(ClassWrongSource, "replication does not use GTID auto-positioning (Auto_Position/Using_Gtid off)")
	}
	if c.in.ExpectedPrimary == "" {
		c.note("replicates from %s:%d; no expected primary given, source not judged", r.SourceHost, r.SourcePort)
		return
	}
	if p := c.primary(); p != nil && r.SourceServerID != 0 {
		// The identity the IO thread saw on its last connection is
		// stronger evidence than a host name, which may be an alias.
		switch {
		case p.ServerUUID != "" && r.SourceUUID != "":
			if p.ServerUUID != r.SourceUUID {
				c.find(ClassWrongSource, "source server_uuid %s is not the expected primary %s's %s", r.SourceUUID, p.Name, p.ServerUUID)
				return
			}
		case p.ServerID != r.SourceServerID:
			c.find(ClassWrongSource, "source server_id %d is not the expected primary %s's %d", r.SourceServerID, p.Name, p.ServerID)
			return
		}
		c.note("source %s:%d is the expected primary %s (server_id %d)", r.SourceHost, r.SourcePort, p.Name, r.SourceServerID)
		return
	}
	if len(c.in.PrimaryAddresses) == 0 {
		c.note("replicates from %s:%d; the expected primary's identity and addresses are unknown, source not judged", r.SourceHost, r.SourcePort)
		return
	}
	for _, a := range c.in.PrimaryAddresses {
		if strings.EqualFold(a.Host, r.SourceHost) && (a.Port == 0 || a.Port == r.SourcePort) {
			c.note("source %s:%d is an address of the expected primary %s", r.SourceHost, r.SourcePort, c.in.ExpectedPrimary)
			return
		}
	}
	c.find(ClassWrongSource, "source %s:%d is none of the expected primary %s's addresses", r.SourceHost, r.SourcePort, c.in.ExpectedPrimary)
}

func (c *classifier) checkThreads() {
	r := c.in.Instance.Replica
	if !r.SQLRunning || r.LastSQLErrno != 0 {
		c.find(ClassSQLBroken, "SQL thread running=%v, last SQL error %d: %s", r.SQLRunning, r.LastSQLErrno, r.LastSQLError)
	}
	switch {
	case r.IOThread == ThreadStopped || r.LastIOErrno != 0:
		c.find(ClassIOBroken, "IO thread %s, last IO error %d: %s", r.IOThread, r.LastIOErrno, r.LastIOError)
	case r.IOThread == ThreadConnecting && r.SourceServerID == 0:
		c.find(ClassBootstrapping, "IO thread connecting to %s:%d for the first time", r.SourceHost, r.SourcePort)
	case r.IOThread == ThreadConnecting:
		c.find(ClassIOBroken, "IO thread lost its connection to %s:%d and is reconnecting", r.SourceHost, r.SourcePort)
	}
}

func (c *classifier) checkProgress(history bool) {
	s := c.in.Instance
	r := s.Replica
	p := c.primary()
	if !history {
		if p != nil && hasHistory(*p) {
			c.find(ClassBootstrapping, "no transactions applied yet while the primary has %s", executedText(*p))
		} else {
			c.note("no transactions anywhere yet")
		}
		return
	}
	maxLag := c.in.Thresholds.MaxLagSeconds
	if maxLag <= 0 {
		maxLag = DefaultMaxLagSeconds
	}
	switch {
	case r.SecondsBehind == nil:
		c.note("lag unknown (Seconds_Behind is NULL)")
	case *r.SecondsBehind > maxLag:
		c.find(ClassLagging, "%d seconds behind the source (threshold %d)", *r.SecondsBehind, maxLag)
	default:
		c.note("%d seconds behind the source", *r.SecondsBehind)
	}
	if p == nil || c.in.Thresholds.MaxTransactionsBehind == 0 {
		return
	}
	behind := transactionsBehind(s, *p)
	if behind > c.in.Thresholds.MaxTransactionsBehind {
		c.find(ClassLagging, "%d transactions behind the primary's snapshot (threshold %d)", behind, c.in.Thresholds.MaxTransactionsBehind)
	}
}

// transactionsBehind counts the primary's transactions the instance has not
// applied: a set difference on MySQL, sequence-number gaps per domain on
// MariaDB (exact under strict mode along one history).
func transactionsBehind(s, p Snapshot) uint64 {
	if s.Flavor.IsMariaDB() {
		var n uint64
		for _, rel := range s.GTID.CurrentPos.Relate(p.GTID.CurrentPos) {
			if rel.Relation == gtid.Behind {
				n += rel.Theirs.Seq - rel.Ours.Seq
			}
		}
		return n
	}
	return p.GTID.Executed.Subtract(s.GTID.Executed).Count()
}

func (c *classifier) checkErrant() {
	if c.in.Instance.Flavor.IsMariaDB() {
		c.checkErrantMariaDB()
		return
	}
	c.checkErrantMySQL()
}

// checkErrantMySQL: errant = executed − known history − the primary's
// executed set, keeping only UUIDs that never belonged to a primary.
// Transactions from the current primary's own UUID that its snapshot lacks
// come from observing the replica after the primary (both are observed in
// parallel), not from an errant write.
func (c *classifier) checkErrantMySQL() {
	s := c.in.Instance
	p := c.primary()
	if p == nil && c.in.History.MySQL.IsEmpty() && len(c.in.History.PrimaryUUIDs) == 0 {
		c.note("errant check skipped: no primary snapshot and no known primary history")
		return
	}
	known := c.in.History.MySQL
	primaryUUIDs := slices.Clone(c.in.History.PrimaryUUIDs)
	if p != nil {
		known = known.Union(p.GTID.Executed)
		primaryUUIDs = append(primaryUUIDs, p.ServerUUID)
	}
	extra := s.GTID.Executed.Subtract(known)
	if extra.IsEmpty() {
		c.note("no errant transactions: executed set is within the known primaries' history")
		return
	}
	var errant, fromPrimaries gtid.MySQLSet
	for _, sid := range extra.SIDs() {
		part, _ := gtid.NewMySQLSet(map[gtid.SID][]gtid.Interval{sid: extra.Intervals(sid)})
		if slices.Contains(primaryUUIDs, sid.UUID.String()) {
			fromPrimaries = fromPrimaries.Union(part)
		} else {
			errant = errant.Union(part)
		}
	}
	if !fromPrimaries.IsEmpty() {
		if p != nil && fromPrimaries.SIDs()[0].UUID.String() == p.ServerUUID && len(fromPrimaries.UUIDs()) == 1 {
			c.note("has %d transactions of the current primary newer than its snapshot (observed later): %s", fromPrimaries.Count(), fromPrimaries)
		} else {
			c.note("has %d transactions from known primaries that the current primary's snapshot lacks: %s", fromPrimaries.Count(), fromPrimaries)
		}
	}
	if !errant.IsEmpty() {
		c.find(ClassErrant, "errant transactions (from no known primary): %s", errant)
	}
}

// checkErrantMariaDB works from what positions can prove (see package gtid):
// every GTID in gtid_binlog_state must come from a server that has been
// primary (a local write on a replica carries the replica's own server_id),
// and the binlog position must not diverge from the primary's.
func (c *classifier) checkErrantMariaDB() {
	s := c.in.Instance
	p := c.primary()
	known := slices.Clone(c.in.History.PrimaryServerIDs)
	if p != nil {
		known = append(known, p.ServerID)
	}
	if len(known) == 0 && c.in.History.MariaDB.IsEmpty() {
		c.note("errant check skipped: no primary snapshot and no known primary server_ids")
		return
	}
	state := s.GTID.BinlogState
	if len(state) == 0 {
		state = s.GTID.BinlogPos.GTIDs()
	}
	found := false
	for _, g := range state {
		if g.Seq == 0 || slices.Contains(known, g.ServerID) {
			continue
		}
		single, _ := gtid.NewMariaDBPos(g)
		if c.in.History.MariaDB.Contains(single) {
			continue
		}
		found = true
		who := "server_id " + strconv.FormatUint(uint64(g.ServerID), 10)
		if g.ServerID == s.ServerID {
			who += " (this replica itself: a local write)"
		}
		c.find(ClassErrant, "binlog holds %s from %s, which was never a primary", g, who)
	}
	if p != nil {
		for _, rel := range s.GTID.BinlogPos.Relate(p.GTID.BinlogPos) {
			switch {
			case rel.Relation == gtid.Diverged:
				found = true
				c.find(ClassErrant, "diverged from the primary (proven): %s", rel)
			case rel.Relation == gtid.OnlyOurs && rel.Ours.ServerID != p.ServerID && slices.Contains(known, rel.Ours.ServerID):
				c.note("holds a domain the primary lacks, from former primary server_id %d: %s", rel.Ours.ServerID, rel)
			case rel.Relation == gtid.AheadOtherServer && slices.Contains(known, rel.Ours.ServerID):
				c.note("ahead of the primary with a former primary's transactions (not provable from positions): %s", rel)
			case rel.Relation == gtid.AheadSameServer:
				c.note("ahead of the primary's snapshot on its own sequence (observed later): %s", rel)
			}
		}
	}
	if !found {
		c.note("no errant transactions: every binlog GTID comes from a known primary")
	}
}

func hasHistory(s Snapshot) bool {
	if s.Flavor.IsMariaDB() {
		return s.GTID.CurrentPos.Count() > 0 || s.GTID.BinlogPos.Count() > 0 || s.GTID.SlavePos.Count() > 0
	}
	return !s.GTID.Executed.IsEmpty()
}

func executedText(s Snapshot) string {
	if s.Flavor.IsMariaDB() {
		return "gtid_current_pos " + quoteOrEmpty(s.GTID.CurrentPos.String())
	}
	return "gtid_executed " + quoteOrEmpty(s.GTID.Executed.String())
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func superReadOnlyText(s State) string {
	if s.SuperReadOnly == nil {
		return ""
	}
	return ", super_read_only=" + onOff(*s.SuperReadOnly)
}
