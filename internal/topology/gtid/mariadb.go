package gtid

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MariaDBGTID is one MariaDB global transaction ID: replication domain,
// originating server_id and sequence number
// (https://mariadb.com/kb/en/gtid/#the-domain-id).
type MariaDBGTID struct {
	// Domain is the replication domain (gtid_domain_id).
	Domain uint32
	// ServerID is the server_id of the server that originated the
	// transaction.
	ServerID uint32
	// Seq is the sequence number within the domain; 0 stands for no
	// transaction.
	Seq uint64
}

// String returns "domain-server_id-seq".
func (g MariaDBGTID) String() string { return string(g.appendTo(nil)) }

func (g MariaDBGTID) appendTo(b []byte) []byte {
	b = strconv.AppendUint(b, uint64(g.Domain), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(g.ServerID), 10)
	b = append(b, '-')
	return strconv.AppendUint(b, g.Seq, 10)
}

// ParseMariaDBGTID parses a single "domain-server_id-seq".
func ParseMariaDBGTID(s string) (MariaDBGTID, error) {
	p := mariadbParser{s: s, what: "MariaDB GTID"}
	p.skipSpace()
	g, err := p.gtid()
	if err != nil {
		return MariaDBGTID{}, err
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return MariaDBGTID{}, p.fail("unexpected text after the GTID")
	}
	return g, nil
}

// MariaDBPos is an immutable MariaDB GTID position: at most one GTID per
// replication domain, as in gtid_slave_pos, gtid_binlog_pos,
// gtid_current_pos and Gtid_IO_Pos. The zero value is the empty position.
// See the package documentation for what positions can and cannot prove.
type MariaDBPos struct {
	gtids []MariaDBGTID // sorted by domain, one per domain
}

// ParseMariaDBPos parses a comma-separated position. Whitespace and newlines
// between elements are ignored (the server itself refuses them, but outputs
// copied through terminals and YAML carry them). Two GTIDs for the same
// domain are refused, as the server refuses them for gtid_slave_pos (error
// 1943); use ParseMariaDBGTIDList for gtid_binlog_state. The empty string is
// the empty position.
func ParseMariaDBPos(s string) (MariaDBPos, error) {
	p := mariadbParser{s: s, what: "MariaDB GTID position"}
	list, offsets, err := p.list()
	if err != nil {
		return MariaDBPos{}, err
	}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(list[a].Domain, list[b].Domain) })
	out := make([]MariaDBGTID, 0, len(list))
	for k, i := range order {
		if k > 0 && list[order[k-1]].Domain == list[i].Domain {
			p.pos = offsets[i]
			return MariaDBPos{}, p.fail("domain " + strconv.FormatUint(uint64(list[i].Domain), 10) + " appears twice (" + list[order[k-1]].String() + " and " + list[i].String() + "); a position holds one GTID per domain")
		}
		out = append(out, list[i])
	}
	return MariaDBPos{gtids: out}, nil
}

// MustParseMariaDBPos is ParseMariaDBPos for constants in tests; it panics on
// invalid input.
func MustParseMariaDBPos(s string) MariaDBPos {
	p, err := ParseMariaDBPos(s)
	if err != nil {
		panic(err)
	}
	return p
}

// ParseMariaDBGTIDList parses a comma-separated list in which a domain may
// appear several times, once per originating server, as in
// @@gtid_binlog_state. The result is sorted by domain, then server_id; a
// repeated (domain, server_id) pair is refused because the server keeps only
// the last GTID of each pair.
func ParseMariaDBGTIDList(s string) ([]MariaDBGTID, error) {
	p := mariadbParser{s: s, what: "MariaDB GTID list"}
	list, offsets, err := p.list()
	if err != nil {
		return nil, err
	}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	key := func(g MariaDBGTID) uint64 { return uint64(g.Domain)<<32 | uint64(g.ServerID) }
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(key(list[a]), key(list[b])) })
	out := make([]MariaDBGTID, 0, len(list))
	for k, i := range order {
		if k > 0 && key(list[order[k-1]]) == key(list[i]) {
			p.pos = offsets[i]
			return nil, p.fail("domain " + strconv.FormatUint(uint64(list[i].Domain), 10) + " and server_id " + strconv.FormatUint(uint64(list[i].ServerID), 10) + " appear twice")
		}
		out = append(out, list[i])
	}
	return out, nil
}

// NewMariaDBPos builds a position from GTIDs, refusing two for one domain.
func NewMariaDBPos(gtids ...MariaDBGTID) (MariaDBPos, error) {
	var b strings.Builder
	for i, g := range gtids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(g.String())
	}
	return ParseMariaDBPos(b.String())
}

// String returns the canonical text: GTIDs ascending by domain, joined by ","
// exactly as the server prints @@gtid_slave_pos.
func (p MariaDBPos) String() string {
	b := make([]byte, 0, 24*len(p.gtids))
	for i, g := range p.gtids {
		if i > 0 {
			b = append(b, ',')
		}
		b = g.appendTo(b)
	}
	return string(b)
}

// MarshalText implements encoding.TextMarshaler with the canonical form.
func (p MariaDBPos) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *MariaDBPos) UnmarshalText(text []byte) error {
	pos, err := ParseMariaDBPos(string(text))
	if err != nil {
		return err
	}
	*p = pos
	return nil
}

// IsEmpty reports whether the position has no domain.
func (p MariaDBPos) IsEmpty() bool { return len(p.gtids) == 0 }

// Count returns the sum of the sequence numbers over all domains. Under
// gtid_strict_mode every domain's sequence numbers grow by one per
// transaction along one linear history, so this is the number of
// transactions that history holds; where sequence numbers were set by hand
// (gtid_seq_no) it is an upper bound. Saturates at math.MaxUint64.
func (p MariaDBPos) Count() uint64 {
	var total uint64
	for _, g := range p.gtids {
		if total > math.MaxUint64-g.Seq {
			return math.MaxUint64
		}
		total += g.Seq
	}
	return total
}

// GTIDs returns a copy of the position's GTIDs, ascending by domain.
func (p MariaDBPos) GTIDs() []MariaDBGTID { return slices.Clone(p.gtids) }

// Domain returns the GTID recorded for domain, if any.
func (p MariaDBPos) Domain(domain uint32) (MariaDBGTID, bool) {
	i, ok := slices.BinarySearchFunc(p.gtids, domain, func(g MariaDBGTID, d uint32) int { return cmp.Compare(g.Domain, d) })
	if !ok {
		return MariaDBGTID{}, false
	}
	return p.gtids[i], true
}

// Equal reports whether both positions hold exactly the same GTIDs.
func (p MariaDBPos) Equal(q MariaDBPos) bool { return slices.Equal(p.gtids, q.gtids) }

// Relation says how a position p stands to a position q in one domain.
type Relation int

const (
	// Same: both hold the identical GTID (proven).
	Same Relation = iota
	// Behind: p's sequence number is lower than q's, or p lacks the domain:
	// p lacks at least q's last transaction (proven).
	Behind
	// AheadSameServer: p's sequence number is higher and both GTIDs come from
	// the same server_id. Under gtid_strict_mode one server's sequence in a
	// domain is linear, so p is inferred to have q's transaction; positions
	// cannot prove it.
	AheadSameServer
	// AheadOtherServer: p's sequence number is higher but from a different
	// server_id. This is what a legitimate failover looks like and also what
	// a divergent history looks like; positions alone cannot tell them apart.
	AheadOtherServer
	// Diverged: equal sequence numbers from different server_ids. Two
	// different transactions hold the same number in one domain, so the
	// histories diverged (proven, given strict mode).
	Diverged
	// OnlyOurs: q has no GTID in this domain; p holds transactions q never
	// saw (proven).
	OnlyOurs
)

// String returns the relation's name as used in evidence strings.
func (r Relation) String() string {
	switch r {
	case Same:
		return "same"
	case Behind:
		return "behind"
	case AheadSameServer:
		return "ahead (same server_id)"
	case AheadOtherServer:
		return "ahead (other server_id, unproven)"
	case Diverged:
		return "diverged"
	case OnlyOurs:
		return "only ours"
	default:
		return "unknown"
	}
}

// Proven reports whether positions alone prove the relation. Only the two
// "ahead" relations are inferences.
func (r Relation) Proven() bool { return r != AheadSameServer && r != AheadOtherServer }

// DomainRelation is the relation of two positions in one domain, with the
// GTIDs compared (a missing side has ok=false).
type DomainRelation struct {
	// Domain is the replication domain compared.
	Domain uint32
	// Ours and Theirs are p's and q's GTIDs in the domain.
	Ours, Theirs MariaDBGTID
	// HasOurs and HasTheirs say whether each side has the domain at all.
	HasOurs   bool
	HasTheirs bool
	// Relation is the verdict.
	Relation Relation
}

// String renders the comparison as one evidence line.
func (d DomainRelation) String() string {
	side := func(g MariaDBGTID, ok bool) string {
		if !ok {
			return "none"
		}
		return g.String()
	}
	return "domain " + strconv.FormatUint(uint64(d.Domain), 10) + ": " + side(d.Ours, d.HasOurs) + " vs " + side(d.Theirs, d.HasTheirs) + ": " + d.Relation.String()
}

// Relate compares p with q domain by domain over the domains of both,
// ascending. A domain missing from one side is treated as sequence number 0,
// which is how the server treats it: a GTID with sequence number 0 (as left
// by SET GLOBAL gtid_slave_pos='0-1-0') stands for no transaction at all.
func (p MariaDBPos) Relate(q MariaDBPos) []DomainRelation {
	out := make([]DomainRelation, 0, max(len(p.gtids), len(q.gtids)))
	i, j := 0, 0
	for i < len(p.gtids) || j < len(q.gtids) {
		var d DomainRelation
		switch {
		case j == len(q.gtids) || (i < len(p.gtids) && p.gtids[i].Domain < q.gtids[j].Domain):
			d = DomainRelation{Domain: p.gtids[i].Domain, Ours: p.gtids[i], HasOurs: true}
			i++
		case i == len(p.gtids) || q.gtids[j].Domain < p.gtids[i].Domain:
			d = DomainRelation{Domain: q.gtids[j].Domain, Theirs: q.gtids[j], HasTheirs: true}
			j++
		default:
			d = DomainRelation{Domain: p.gtids[i].Domain, Ours: p.gtids[i], Theirs: q.gtids[j], HasOurs: true, HasTheirs: true}
			i++
			j++
		}
		d.Relation = relate(d)
		out = append(out, d)
	}
	return out
}

func relate(d DomainRelation) Relation {
	a, b := d.Ours, d.Theirs
	switch {
	case a.Seq == 0 && b.Seq == 0:
		// Neither side holds a transaction in this domain.
		return Same
	case !d.HasTheirs:
		return OnlyOurs
	case !d.HasOurs || a.Seq < b.Seq:
		return Behind
	case a == b:
		return Same
	case a.Seq == b.Seq:
		return Diverged
	case a.ServerID == b.ServerID:
		return AheadSameServer
	default:
		return AheadOtherServer
	}
}

// Reached reports whether p has reached q in every domain of q by sequence
// number alone, which is exactly what MASTER_GTID_WAIT(q, 0) answers on a
// server whose gtid_slave_pos is p: server_ids are ignored, and a domain
// missing from p counts as sequence number 0 (so only q's GTIDs with
// sequence number 0 are reached in it).
func (p MariaDBPos) Reached(q MariaDBPos) bool {
	for _, g := range q.gtids {
		have, _ := p.Domain(g.Domain)
		if have.Seq < g.Seq {
			return false
		}
	}
	return true
}

// Contains reports whether p covers q as far as positions can tell: p has
// reached q in every domain and no domain shows the proven divergence of an
// equal, non-zero sequence number from a different server. A true answer with
// an AheadOtherServer relation is not a proof of shared history (see Relate).
func (p MariaDBPos) Contains(q MariaDBPos) bool {
	for _, g := range q.gtids {
		if !p.containsGTID(g) {
			return false
		}
	}
	return true
}

func (p MariaDBPos) containsGTID(g MariaDBGTID) bool {
	if g.Seq == 0 {
		return true
	}
	have, ok := p.Domain(g.Domain)
	return ok && (have.Seq > g.Seq || have == g)
}

// Subtract returns the GTIDs of p that q does not contain: domains q lacks,
// domains where p is ahead, and domains where the two diverged (GTIDs with
// sequence number 0 hold no transaction and are never part of a difference).
// The result is empty exactly when q.Contains(p).
func (p MariaDBPos) Subtract(q MariaDBPos) MariaDBPos {
	var out []MariaDBGTID
	for _, g := range p.gtids {
		if !q.containsGTID(g) {
			out = append(out, g)
		}
	}
	return MariaDBPos{gtids: out}
}

// Union returns the position that has reached both p and q: per domain the
// GTID with the higher sequence number. Equal sequence numbers from different
// servers cannot be combined and yield a *DivergedError.
func (p MariaDBPos) Union(q MariaDBPos) (MariaDBPos, error) {
	out := make([]MariaDBGTID, 0, max(len(p.gtids), len(q.gtids)))
	for _, rel := range p.Relate(q) {
		switch {
		case rel.Relation == Diverged:
			return MariaDBPos{}, &DivergedError{Ours: rel.Ours, Theirs: rel.Theirs}
		case rel.Relation == Behind || !rel.HasOurs:
			out = append(out, rel.Theirs)
		case rel.Relation == Same && rel.HasTheirs && rel.Theirs.ServerID < rel.Ours.ServerID:
			// Only reachable for two sequence-number-0 entries; choosing the
			// lower server_id keeps Union commutative.
			out = append(out, rel.Theirs)
		default:
			out = append(out, rel.Ours)
		}
	}
	return MariaDBPos{gtids: out}, nil
}

type mariadbParser struct {
	s    string
	pos  int
	what string
}

func (p *mariadbParser) fail(reason string) error {
	return &ParseError{What: p.what, Input: p.s, Offset: p.pos, Reason: reason}
}

func (p *mariadbParser) skipSpace() {
	for p.pos < len(p.s) && isSpace(p.s[p.pos]) {
		p.pos++
	}
}

// list parses comma-separated GTIDs and returns each one's starting offset
// so that later checks can point at the offending element.
func (p *mariadbParser) list() ([]MariaDBGTID, []int, error) {
	var out []MariaDBGTID
	var offsets []int
	p.skipSpace()
	if p.pos == len(p.s) {
		return nil, nil, nil
	}
	for {
		p.skipSpace()
		offsets = append(offsets, p.pos)
		g, err := p.gtid()
		if err != nil {
			return nil, nil, err
		}
		out = append(out, g)
		p.skipSpace()
		if p.pos == len(p.s) {
			return out, offsets, nil
		}
		if p.s[p.pos] != ',' {
			return nil, nil, p.fail("expected ',' or the end of the position")
		}
		p.pos++
		p.skipSpace()
		if p.pos == len(p.s) {
			return nil, nil, p.fail("expected a GTID after ','")
		}
	}
}

func (p *mariadbParser) gtid() (MariaDBGTID, error) {
	domain, err := p.number("domain id", math.MaxUint32)
	if err != nil {
		return MariaDBGTID{}, err
	}
	if err := p.dash(); err != nil {
		return MariaDBGTID{}, err
	}
	server, err := p.number("server_id", math.MaxUint32)
	if err != nil {
		return MariaDBGTID{}, err
	}
	if err := p.dash(); err != nil {
		return MariaDBGTID{}, err
	}
	seq, err := p.number("sequence number", math.MaxUint64)
	if err != nil {
		return MariaDBGTID{}, err
	}
	return MariaDBGTID{Domain: uint32(domain), ServerID: uint32(server), Seq: seq}, nil
}

func (p *mariadbParser) dash() error {
	if p.pos == len(p.s) || p.s[p.pos] != '-' {
		return p.fail("expected '-' (a MariaDB GTID is domain-server_id-sequence)")
	}
	p.pos++
	return nil
}

func (p *mariadbParser) number(name string, limit uint64) (uint64, error) {
	start := p.pos
	for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return 0, p.fail("expected a decimal " + name)
	}
	n, err := strconv.ParseUint(p.s[start:p.pos], 10, 64)
	if err != nil || n > limit {
		p.pos = start
		return 0, p.fail(name + " exceeds " + strconv.FormatUint(limit, 10))
	}
	return n, nil
}
