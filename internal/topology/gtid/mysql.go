package gtid

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxTransactionID is the largest transaction number accepted in a MySQL GTID,
// 2^63-2. MySQL stores transaction numbers as signed 64-bit integers (rpl_gno)
// and reserves 2^63-1 (GNO_END) as "one past the last", so its GTID text
// parser refuses 2^63-1 and no server can produce it or anything larger.
const MaxTransactionID = math.MaxInt64 - 1

// MaxTagLength is the longest tag MySQL 8.4 accepts in a tagged GTID
// (https://dev.mysql.com/doc/refman/8.4/en/replication-gtids-concepts.html).
const MaxTagLength = 32

// UUID is a server UUID in binary form. Binary order equals the order of the
// lower-case text form, which is the order MySQL prints sets in.
type UUID [16]byte

// ParseUUID parses the 36-character hyphenated form, or the 32 hex digits
// without hyphens that MySQL also accepts, in either case.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	var digits string
	switch len(s) {
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, errors.New("UUID must be 8-4-4-4-12 hexadecimal digits")
		}
		digits = s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	case 32:
		digits = s
	default:
		return u, errors.New("UUID must be 36 characters (8-4-4-4-12) or 32 hexadecimal digits")
	}
	if _, err := hex.Decode(u[:], []byte(digits)); err != nil {
		return u, errors.New("UUID contains a character that is not a hexadecimal digit")
	}
	return u, nil
}

// String returns the lower-case hyphenated form.
func (u UUID) String() string {
	var buf [36]byte
	u.appendTo(buf[:0])
	return string(buf[:])
}

func (u UUID) appendTo(b []byte) []byte {
	const digits = "0123456789abcdef"
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, digits[c>>4], digits[c&0x0f])
	}
	return b
}

// SID identifies the source of a run of MySQL transactions: a server UUID and,
// since MySQL 8.4, an optional tag. The empty tag is the untagged GTID form.
type SID struct {
	// UUID is the originating server's server_uuid.
	UUID UUID
	// Tag is lower case; MySQL treats tags case-insensitively and prints them
	// in lower case.
	Tag string
}

// String returns "uuid" or "uuid:tag".
func (s SID) String() string {
	if s.Tag == "" {
		return s.UUID.String()
	}
	return s.UUID.String() + ":" + s.Tag
}

func compareSID(a, b SID) int {
	if c := bytes.Compare(a.UUID[:], b.UUID[:]); c != 0 {
		return c
	}
	return strings.Compare(a.Tag, b.Tag)
}

// Interval is an inclusive range of transaction numbers, Start <= End.
type Interval struct {
	// Start and End are the first and last transaction numbers.
	Start, End uint64
}

// Count returns the number of transactions in the interval.
func (iv Interval) Count() uint64 { return iv.End - iv.Start + 1 }

// String returns "n" for a single transaction and "n-m" otherwise, as MySQL
// prints it.
func (iv Interval) String() string {
	return string(iv.appendTo(nil))
}

func (iv Interval) appendTo(b []byte) []byte {
	b = strconv.AppendUint(b, iv.Start, 10)
	if iv.End != iv.Start {
		b = append(b, '-')
		b = strconv.AppendUint(b, iv.End, 10)
	}
	return b
}

// sidIntervals is one SID with its sorted, disjoint, non-adjacent intervals.
type sidIntervals struct {
	sid SID
	ivs []Interval
}

// MySQLSet is an immutable MySQL GTID set. The zero value is the empty set.
// Operations return new values and never modify their receiver or argument;
// results may share memory with inputs, which is safe because nothing is ever
// modified after construction.
type MySQLSet struct {
	groups []sidIntervals // sorted by SID, no empty interval lists
}

// ParseMySQLSet parses a GTID set as MySQL prints it (gtid_executed,
// Retrieved_Gtid_Set, GTID_SUBTRACT results): elements separated by commas,
// each a UUID followed by ":interval" and, for MySQL 8.4 tagged GTIDs,
// ":tag:interval" groups. Whitespace and newlines between tokens are ignored,
// UUIDs and tags may be in any case, the same UUID may appear several times,
// and intervals may overlap; the result is normalized. The empty string is
// the empty set.
//
// Transaction numbers must be plain decimal, from 1 to MaxTransactionID.
// MySQL reads them with strtoll in base 0, so it would take "010" as octal 8
// and "0x10" as hexadecimal 16; numbers with a leading zero, a 0x prefix or
// a sign are therefore refused rather than read differently from the server.
func ParseMySQLSet(s string) (MySQLSet, error) {
	p := mysqlParser{s: s}
	m, err := p.parse()
	if err != nil {
		return MySQLSet{}, err
	}
	return fromMap(m), nil
}

// MustParseMySQLSet is ParseMySQLSet for constants in tests and examples; it
// panics on invalid input.
func MustParseMySQLSet(s string) MySQLSet {
	set, err := ParseMySQLSet(s)
	if err != nil {
		panic(err)
	}
	return set
}

// NewMySQLSet builds a set from intervals per SID. Intervals may overlap or be
// unsorted; they are validated (1 <= Start <= End <= MaxTransactionID, tags
// well formed) and normalized.
func NewMySQLSet(m map[SID][]Interval) (MySQLSet, error) {
	cp := make(map[SID][]Interval, len(m))
	for sid, ivs := range m {
		tag, err := normalizeTag(sid.Tag)
		if err != nil {
			return MySQLSet{}, err
		}
		sid.Tag = tag
		for _, iv := range ivs {
			if iv.Start == 0 || iv.End < iv.Start || iv.End > MaxTransactionID {
				return MySQLSet{}, errors.New("invalid interval " + iv.String() + " for " + sid.String() + ": need 1 <= start <= end <= 2^63-2")
			}
		}
		cp[sid] = append(cp[sid], ivs...)
	}
	return fromMap(cp), nil
}

func fromMap(m map[SID][]Interval) MySQLSet {
	groups := make([]sidIntervals, 0, len(m))
	for sid, ivs := range m {
		if len(ivs) == 0 {
			continue
		}
		groups = append(groups, sidIntervals{sid: sid, ivs: normalizeIntervals(ivs)})
	}
	slices.SortFunc(groups, func(a, b sidIntervals) int { return compareSID(a.sid, b.sid) })
	return MySQLSet{groups: groups}
}

// normalizeIntervals sorts and merges overlapping or adjacent intervals in
// place (the slice belongs to the caller under construction).
func normalizeIntervals(ivs []Interval) []Interval {
	slices.SortFunc(ivs, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	out := ivs[:1]
	for _, iv := range ivs[1:] {
		last := &out[len(out)-1]
		// End is at most MaxTransactionID, so End+1 cannot overflow.
		if iv.Start <= last.End+1 {
			last.End = max(last.End, iv.End)
			continue
		}
		out = append(out, iv)
	}
	return slices.Clip(out)
}

// String returns the canonical text: UUIDs ascending, untagged intervals
// first, then tags ascending, intervals merged, elements joined by ",".
func (s MySQLSet) String() string {
	if len(s.groups) == 0 {
		return ""
	}
	n := 0
	for _, g := range s.groups {
		n += 38 + len(g.sid.Tag) + 1 + 12*len(g.ivs)
	}
	b := make([]byte, 0, n)
	for i, g := range s.groups {
		if i == 0 || g.sid.UUID != s.groups[i-1].sid.UUID {
			if i > 0 {
				b = append(b, ',')
			}
			b = g.sid.UUID.appendTo(b)
		}
		if g.sid.Tag != "" {
			b = append(b, ':')
			b = append(b, g.sid.Tag...)
		}
		for _, iv := range g.ivs {
			b = append(b, ':')
			b = iv.appendTo(b)
		}
	}
	return string(b)
}

// MarshalText implements encoding.TextMarshaler with the canonical form, so
// sets can be stored in JSON or YAML status fields as plain strings.
func (s MySQLSet) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *MySQLSet) UnmarshalText(text []byte) error {
	set, err := ParseMySQLSet(string(text))
	if err != nil {
		return err
	}
	*s = set
	return nil
}

// IsEmpty reports whether the set holds no transaction.
func (s MySQLSet) IsEmpty() bool { return len(s.groups) == 0 }

// Count returns the number of transactions in the set. It saturates at
// math.MaxUint64, which only a set spanning several full UUID ranges reaches.
func (s MySQLSet) Count() uint64 {
	var total uint64
	for _, g := range s.groups {
		for _, iv := range g.ivs {
			c := iv.Count()
			if total > math.MaxUint64-c {
				return math.MaxUint64
			}
			total += c
		}
	}
	return total
}

// SIDs returns the source identifiers present in the set, in canonical order.
func (s MySQLSet) SIDs() []SID {
	out := make([]SID, len(s.groups))
	for i, g := range s.groups {
		out[i] = g.sid
	}
	return out
}

// UUIDs returns the distinct server UUIDs present in the set, ascending; an
// errant set's UUIDs name the servers that produced the errant transactions.
func (s MySQLSet) UUIDs() []UUID {
	var out []UUID
	for i, g := range s.groups {
		if i == 0 || g.sid.UUID != s.groups[i-1].sid.UUID {
			out = append(out, g.sid.UUID)
		}
	}
	return out
}

// Intervals returns a copy of the intervals recorded for sid, ascending.
func (s MySQLSet) Intervals(sid SID) []Interval {
	if g, ok := s.find(sid); ok {
		return slices.Clone(g.ivs)
	}
	return nil
}

// ContainsGTID reports whether the single transaction sid:n is in the set.
func (s MySQLSet) ContainsGTID(sid SID, n uint64) bool {
	g, ok := s.find(sid)
	if !ok {
		return false
	}
	i, _ := slices.BinarySearchFunc(g.ivs, n, func(iv Interval, n uint64) int {
		if iv.End < n {
			return -1
		}
		if iv.Start > n {
			return 1
		}
		return 0
	})
	return i < len(g.ivs) && g.ivs[i].Start <= n && n <= g.ivs[i].End
}

func (s MySQLSet) find(sid SID) (sidIntervals, bool) {
	i, ok := slices.BinarySearchFunc(s.groups, sid, func(g sidIntervals, sid SID) int { return compareSID(g.sid, sid) })
	if !ok {
		return sidIntervals{}, false
	}
	return s.groups[i], true
}

// Equal reports whether both sets hold exactly the same transactions.
func (s MySQLSet) Equal(o MySQLSet) bool {
	return slices.EqualFunc(s.groups, o.groups, func(a, b sidIntervals) bool {
		return a.sid == b.sid && slices.Equal(a.ivs, b.ivs)
	})
}

// Contains reports whether every transaction of o is in s (o ⊆ s), the
// question GTID_SUBSET(o, s) answers on a MySQL server.
func (s MySQLSet) Contains(o MySQLSet) bool {
	i := 0
	for _, og := range o.groups {
		for i < len(s.groups) && compareSID(s.groups[i].sid, og.sid) < 0 {
			i++
		}
		if i == len(s.groups) || s.groups[i].sid != og.sid {
			return false
		}
		if !containsIntervals(s.groups[i].ivs, og.ivs) {
			return false
		}
	}
	return true
}

// Union returns s ∪ o.
func (s MySQLSet) Union(o MySQLSet) MySQLSet {
	if len(o.groups) == 0 {
		return s
	}
	if len(s.groups) == 0 {
		return o
	}
	out := make([]sidIntervals, 0, max(len(s.groups), len(o.groups)))
	i, j := 0, 0
	for i < len(s.groups) || j < len(o.groups) {
		var c int
		switch {
		case i == len(s.groups):
			c = 1
		case j == len(o.groups):
			c = -1
		default:
			c = compareSID(s.groups[i].sid, o.groups[j].sid)
		}
		switch {
		case c < 0:
			out = append(out, s.groups[i])
			i++
		case c > 0:
			out = append(out, o.groups[j])
			j++
		default:
			out = append(out, sidIntervals{sid: s.groups[i].sid, ivs: unionIntervals(s.groups[i].ivs, o.groups[j].ivs)})
			i++
			j++
		}
	}
	return MySQLSet{groups: out}
}

// Subtract returns s − o: the transactions of s that o lacks. For a replica's
// gtid_executed minus its primary's, these are the errant transactions.
func (s MySQLSet) Subtract(o MySQLSet) MySQLSet {
	if len(o.groups) == 0 || len(s.groups) == 0 {
		return s
	}
	out := make([]sidIntervals, 0, len(s.groups))
	j := 0
	for _, g := range s.groups {
		for j < len(o.groups) && compareSID(o.groups[j].sid, g.sid) < 0 {
			j++
		}
		if j == len(o.groups) || o.groups[j].sid != g.sid {
			out = append(out, g)
			continue
		}
		if ivs := subtractIntervals(g.ivs, o.groups[j].ivs); len(ivs) > 0 {
			out = append(out, sidIntervals{sid: g.sid, ivs: ivs})
		}
	}
	return MySQLSet{groups: out}
}

// Intersect returns s ∩ o.
func (s MySQLSet) Intersect(o MySQLSet) MySQLSet {
	var out []sidIntervals
	j := 0
	for _, g := range s.groups {
		for j < len(o.groups) && compareSID(o.groups[j].sid, g.sid) < 0 {
			j++
		}
		if j == len(o.groups) || o.groups[j].sid != g.sid {
			continue
		}
		if ivs := intersectIntervals(g.ivs, o.groups[j].ivs); len(ivs) > 0 {
			out = append(out, sidIntervals{sid: g.sid, ivs: ivs})
		}
	}
	return MySQLSet{groups: out}
}

// containsIntervals reports b ⊆ a. Because a's intervals are merged, each of
// b's intervals must lie inside a single interval of a.
func containsIntervals(a, b []Interval) bool {
	i := 0
	for _, y := range b {
		for i < len(a) && a[i].End < y.Start {
			i++
		}
		if i == len(a) || a[i].Start > y.Start || a[i].End < y.End {
			return false
		}
	}
	return true
}

func unionIntervals(a, b []Interval) []Interval {
	out := make([]Interval, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var next Interval
		if j == len(b) || (i < len(a) && a[i].Start <= b[j].Start) {
			next = a[i]
			i++
		} else {
			next = b[j]
			j++
		}
		if n := len(out); n > 0 && next.Start <= out[n-1].End+1 {
			out[n-1].End = max(out[n-1].End, next.End)
			continue
		}
		out = append(out, next)
	}
	return slices.Clip(out)
}

func subtractIntervals(a, b []Interval) []Interval {
	// Each hole cut into an interval of a can add one interval; len(a) is
	// enough in the common case and keeps this to one allocation.
	out := make([]Interval, 0, len(a))
	j := 0
	for _, x := range a {
		start, end := x.Start, x.End
		for j < len(b) && b[j].End < start {
			j++
		}
		consumed := false
		for k := j; k < len(b) && b[k].Start <= end; k++ {
			if b[k].Start > start {
				out = append(out, Interval{start, b[k].Start - 1})
			}
			if b[k].End >= end {
				consumed = true
				break
			}
			start = b[k].End + 1
		}
		if !consumed {
			out = append(out, Interval{start, end})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return slices.Clip(out)
}

func intersectIntervals(a, b []Interval) []Interval {
	var out []Interval
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo := max(a[i].Start, b[j].Start)
		hi := min(a[i].End, b[j].End)
		if lo <= hi {
			out = append(out, Interval{lo, hi})
		}
		if a[i].End < b[j].End {
			i++
		} else {
			j++
		}
	}
	return out
}

// mysqlParser is a hand-written scanner: the grammar is tiny, and a scanner
// can report the exact offset of the first bad character.
type mysqlParser struct {
	s   string
	pos int
}

func (p *mysqlParser) fail(reason string) error {
	return &ParseError{What: "MySQL GTID set", Input: p.s, Offset: p.pos, Reason: reason}
}

func (p *mysqlParser) skipSpace() { p.pos = p.skipSpaceFrom(p.pos) }

// skipSpaceFrom returns the offset of the first non-space byte at or after i.
func (p *mysqlParser) skipSpaceFrom(i int) int {
	for i < len(p.s) && isSpace(p.s[i]) {
		i++
	}
	return i
}

func (p *mysqlParser) parse() (map[SID][]Interval, error) {
	m := map[SID][]Interval{}
	p.skipSpace()
	if p.pos == len(p.s) {
		return m, nil
	}
	for {
		p.skipSpace()
		uuid, err := p.uuid()
		if err != nil {
			return nil, err
		}
		sid := SID{UUID: uuid}
		// seen is true once the current UUID or tag has at least one interval:
		// MySQL never prints a source without transactions, and accepting one
		// would hide truncated input.
		seen := false
		for {
			p.skipSpace()
			if p.pos == len(p.s) || p.s[p.pos] != ':' {
				break
			}
			p.pos++
			p.skipSpace()
			if p.pos == len(p.s) {
				return nil, p.fail("expected a transaction interval or a tag after ':'")
			}
			switch c := p.s[p.pos]; {
			case isDigit(c) || c == '+' || c == '-':
				// A sign is refused by number, with a reason.
				iv, err := p.interval()
				if err != nil {
					return nil, err
				}
				m[sid] = append(m[sid], iv)
				seen = true
			case isTagStart(c):
				if !seen && sid.Tag != "" {
					return nil, p.fail("tag " + strconv.Quote(sid.Tag) + " has no transaction interval")
				}
				tag, err := p.tag()
				if err != nil {
					return nil, err
				}
				sid.Tag = tag
				seen = false
			default:
				return nil, p.fail("expected a transaction interval (digits) or a tag (letter or '_') after ':'")
			}
		}
		if !seen {
			if sid.Tag != "" {
				return nil, p.fail("tag " + strconv.Quote(sid.Tag) + " has no transaction interval")
			}
			return nil, p.fail("UUID " + uuid.String() + " has no transaction interval")
		}
		p.skipSpace()
		if p.pos == len(p.s) {
			return m, nil
		}
		if p.s[p.pos] != ',' {
			return nil, p.fail("expected ',' or ':' or the end of the set")
		}
		p.pos++
		p.skipSpace()
		if p.pos == len(p.s) {
			return nil, p.fail("expected a UUID after ','")
		}
	}
}

func (p *mysqlParser) uuid() (UUID, error) {
	start := p.pos
	for p.pos < len(p.s) && (isHex(p.s[p.pos]) || p.s[p.pos] == '-') {
		p.pos++
	}
	if p.pos == start {
		return UUID{}, p.fail("expected a UUID")
	}
	u, err := ParseUUID(p.s[start:p.pos])
	if err != nil {
		p.pos = start
		return UUID{}, p.fail(err.Error())
	}
	return u, nil
}

func (p *mysqlParser) tag() (string, error) {
	start := p.pos
	for p.pos < len(p.s) && isTagChar(p.s[p.pos]) {
		p.pos++
	}
	if p.pos-start > MaxTagLength {
		p.pos = start
		return "", p.fail("tag longer than 32 characters")
	}
	return strings.ToLower(p.s[start:p.pos]), nil
}

func (p *mysqlParser) interval() (Interval, error) {
	start, err := p.number()
	if err != nil {
		return Interval{}, err
	}
	end := start
	save := p.pos
	p.skipSpace()
	if p.pos < len(p.s) && p.s[p.pos] == '-' {
		p.pos++
		p.skipSpace()
		at := p.pos
		if end, err = p.number(); err != nil {
			return Interval{}, err
		}
		if end < start {
			p.pos = at
			return Interval{}, p.fail("interval end " + strconv.FormatUint(end, 10) + " is below its start " + strconv.FormatUint(start, 10))
		}
	} else {
		p.pos = save
	}
	return Interval{start, end}, nil
}

// number reads one transaction number. MySQL reads these with strtoll in base
// 0 (parse_gno), which takes a leading "0" as octal, "0x" as hexadecimal and
// accepts a sign; anything but plain decimal digits without a leading zero
// is refused here, so that no text is read as a different number than the
// server would read it. Whitespace before the number has been skipped by the
// caller, as strtoll skips it.
func (p *mysqlParser) number() (uint64, error) {
	start := p.pos
	if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
		return 0, p.fail("transaction number " + quoteNumber(p.s[start:p.wordEnd(start+1)]) + " has a sign: write it as plain decimal digits")
	}
	if p.pos+1 < len(p.s) && p.s[p.pos] == '0' && (p.s[p.pos+1] == 'x' || p.s[p.pos+1] == 'X') {
		return 0, p.fail("transaction number " + quoteNumber(p.s[start:p.wordEnd(start)]) + " has a 0x prefix: MySQL would read it as hexadecimal; write it in decimal")
	}
	for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return 0, p.fail("expected a transaction number")
	}
	digits := p.s[start:p.pos]
	// After a number only '-', ':', ',' or the end may follow, never
	// another digit: "1 2" is one number with a space inside, not two.
	if next := p.skipSpaceFrom(p.pos); next > p.pos && next < len(p.s) && isDigit(p.s[next]) {
		return 0, p.fail("transaction number " + quoteNumber(p.s[start:p.wordEnd(next)]) + " has a space inside it")
	}
	if strings.TrimLeft(digits, "0") == "" {
		p.pos = start
		return 0, p.fail("transaction numbers start at 1")
	}
	if digits[0] == '0' {
		p.pos = start
		return 0, p.fail("transaction number " + quoteNumber(digits) + " has a leading zero: MySQL would read it as octal; write it without leading zeros")
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > MaxTransactionID {
		p.pos = start
		return 0, p.fail("transaction number " + quoteNumber(digits) + " exceeds " + strconv.FormatUint(MaxTransactionID, 10) + " (2^63-2), the largest MySQL allows")
	}
	return n, nil
}

// wordEnd returns the offset after the letters and digits starting at i: the
// extent of a malformed number such as "0x1f" or "+12", for error messages.
func (p *mysqlParser) wordEnd(i int) int {
	for i < len(p.s) && (isDigit(p.s[i]) || isTagStart(p.s[i])) {
		i++
	}
	return i
}

// quoteNumber quotes the text of a refused number, shortened so that a
// runaway digit string does not make the error message unreadable.
func quoteNumber(s string) string {
	const limit = 24
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strconv.Quote(s)
}

func normalizeTag(tag string) (string, error) {
	if tag == "" {
		return "", nil
	}
	if len(tag) > MaxTagLength || !isTagStart(tag[0]) {
		return "", errors.New("invalid GTID tag " + strconv.Quote(tag) + ": up to 32 letters, digits or '_', starting with a letter or '_'")
	}
	for i := 1; i < len(tag); i++ {
		if !isTagChar(tag[i]) {
			return "", errors.New("invalid GTID tag " + strconv.Quote(tag) + ": up to 32 letters, digits or '_', starting with a letter or '_'")
		}
	}
	return strings.ToLower(tag), nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
func isTagStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isTagChar(c byte) bool  { return isTagStart(c) || isDigit(c) }
