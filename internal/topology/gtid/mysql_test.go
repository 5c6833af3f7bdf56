package gtid

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

const (
	u1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	u2 = "4aaa0b1c-71ca-11e1-9e33-c80aa9429562"
	u3 = "ffffffff-0000-0000-0000-000000000001"
)

func TestParseMySQLSetCanonical(t *testing.T) {
	tests := []struct {
		name, in, want string
		count          uint64
	}{
		{"empty", "", "", 0},
		{"only whitespace", " \n\t ", "", 0},
		{"single", u1 + ":1", u1 + ":1", 1},
		{"range", u1 + ":1-5", u1 + ":1-5", 5},
		{"several intervals", u1 + ":1-5:7-9", u1 + ":1-5:7-9", 8},
		{"adjacent intervals merge", u1 + ":1-5:6-9", u1 + ":1-9", 9},
		{"overlapping intervals merge", u1 + ":3-9:1-4", u1 + ":1-9", 9},
		{"unsorted intervals sort", u1 + ":20:7-9:1", u1 + ":1:7-9:20", 5},
		{"upper-case UUID", strings.ToUpper(u1) + ":1-2", u1 + ":1-2", 2},
		{"UUID without hyphens", strings.ReplaceAll(u1, "-", "") + ":1", u1 + ":1", 1},
		{"several UUIDs sorted", u2 + ":1-3," + u1 + ":1-5", u1 + ":1-5," + u2 + ":1-3", 8},
		{"repeated UUID merges", u1 + ":1-3," + u2 + ":4," + u1 + ":4-6", u1 + ":1-6," + u2 + ":4", 7},
		{
			"server output with newlines", u1 + ":1-5,\n" + u2 + ":1-3,\n" + u3 + ":10-20",
			u1 + ":1-5," + u2 + ":1-3," + u3 + ":10-20", 19,
		},
		{"whitespace around tokens", "  " + u1 + " : 1 - 5 : 7 ,\r\n\t" + u2 + " :2  ", u1 + ":1-5:7," + u2 + ":2", 7},
		{"tagged", u1 + ":tag1:1-3", u1 + ":tag1:1-3", 3},
		{"tagged after untagged", u1 + ":1-4:aaaa:1", u1 + ":1-4:aaaa:1", 5},
		{"tags sorted after untagged", u1 + ":zz:1:aa:2-3," + u1 + ":1-4", u1 + ":1-4:aa:2-3:zz:1", 7},
		{"intervals after a tag belong to it", u1 + ":zz:1:3-4", u1 + ":zz:1:3-4", 3},
		{"tag case folds", u1 + ":TaG_1:5:tag_1:6", u1 + ":tag_1:5-6", 2},
		{"tag with several intervals", u1 + ":t:1-3:5-7:9", u1 + ":t:1-3:5-7:9", 7},
		{
			"mixed tags and UUIDs (MySQL 8.4 manual example shape)",
			"896e7882-18fe-11ef-ab88-22222d34d411:1-4:aaaa:1:abc:1-3:bbbbb:1:bbbbbb:1:x:1,896e7882-18fe-11ef-ab88-22222d34d412:1-2",
			"896e7882-18fe-11ef-ab88-22222d34d411:1-4:aaaa:1:abc:1-3:bbbbb:1:bbbbbb:1:x:1,896e7882-18fe-11ef-ab88-22222d34d412:1-2", 13,
		},
		{"underscore tag", u1 + ":_x:1", u1 + ":_x:1", 1},
		{"max tag length", u1 + ":" + strings.Repeat("a", 32) + ":1", u1 + ":" + strings.Repeat("a", 32) + ":1", 1},
		{"max transaction id", u1 + ":9223372036854775806", u1 + ":9223372036854775806", 1},
		{"interval up to the max", u1 + ":1-9223372036854775806", u1 + ":1-9223372036854775806", 9223372036854775806},
		{"last two transaction ids", u1 + ":9223372036854775805-9223372036854775806", u1 + ":9223372036854775805-9223372036854775806", 2},
		{"tagged max", u1 + ":t:9223372036854775806", u1 + ":t:9223372036854775806", 1},
		{"zeros inside and at the end", u1 + ":10-100:1000:20304", u1 + ":10-100:1000:20304", 93},
		{"space after colon and around dash", u1 + ": 1 -\t5:\n7", u1 + ":1-5:7", 6},
		{"space before tag and its interval", u1 + ": t : 3", u1 + ":t:3", 1},
		{"MySQL output with newline after each comma", u1 + ":1-5,\n" + u2 + ":1-3", u1 + ":1-5," + u2 + ":1-3", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseMySQLSet(tt.in)
			if err != nil {
				t.Fatalf("ParseMySQLSet(%q): %v", tt.in, err)
			}
			if got := s.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			if got := s.Count(); got != tt.count {
				t.Fatalf("Count() = %d, want %d", got, tt.count)
			}
			if s.IsEmpty() != (tt.count == 0) {
				t.Fatalf("IsEmpty() = %v with %d transactions", s.IsEmpty(), tt.count)
			}
			// The canonical form is a fixed point.
			again, err := ParseMySQLSet(s.String())
			if err != nil || !again.Equal(s) || again.String() != s.String() {
				t.Fatalf("round trip of %q gave %q, %v", s.String(), again.String(), err)
			}
		})
	}
}

func TestParseMySQLSetInvalid(t *testing.T) {
	tests := []struct {
		name, in string
		offset   int
		reason   string
	}{
		{"UUID only", u1, 36, "has no transaction interval"},
		{"trailing colon", u1 + ":", 37, "expected a transaction interval or a tag"},
		{"short UUID", "3e11fa47-71ca:1", 0, "UUID must be"},
		{"non-hex UUID", "3e11fa47-71ca-11e1-9e33-c80aa942956g:1", 0, "UUID must be 36 characters"},
		{"misplaced hyphens", "3e11fa4-771ca-11e1-9e33-c80aa9429562:1", 0, "8-4-4-4-12"},
		{"zero", u1 + ":0", 37, "start at 1"},
		{"zero range", u1 + ":0-3", 37, "start at 1"},
		{"reversed", u1 + ":5-3", 39, "below its start"},
		// MySQL's largest transaction number is 2^63-2: 2^63-1 is GNO_END,
		// one past the last, and its parser refuses it.
		{"GNO_END", u1 + ":9223372036854775807", 37, `transaction number "9223372036854775807" exceeds 9223372036854775806 (2^63-2)`},
		{"2^63", u1 + ":9223372036854775808", 37, `transaction number "9223372036854775808" exceeds 9223372036854775806`},
		{"interval end at GNO_END", u1 + ":1-9223372036854775807", 39, `"9223372036854775807" exceeds 9223372036854775806`},
		{"interval at GNO_END", u1 + ":9223372036854775806-9223372036854775807", 57, `"9223372036854775807" exceeds`},
		{"tagged GNO_END", u1 + ":t:9223372036854775807", 39, `"9223372036854775807" exceeds`},
		{"max uint64", u1 + ":18446744073709551615", 37, `"18446744073709551615" exceeds`},
		{"overflow", u1 + ":99999999999999999999", 37, `"99999999999999999999" exceeds 9223372036854775806`},
		{"long number is shortened", u1 + ":" + strings.Repeat("1", 60), 37, `"111111111111111111111111…" exceeds`},
		// MySQL reads transaction numbers with strtoll(…, 0): a leading 0
		// means octal and 0x hexadecimal, so such text is refused.
		{"leading zero", u1 + ":010", 37, `transaction number "010" has a leading zero: MySQL would read it as octal`},
		{"leading zeros", u1 + ":007-10", 37, `"007" has a leading zero`},
		{"leading zero in interval end", u1 + ":1-010", 39, `"010" has a leading zero`},
		{"leading zero that is not octal", u1 + ":09", 37, `"09" has a leading zero`},
		{"leading zero after tag", u1 + ":t:01", 39, `"01" has a leading zero`},
		{"leading zero in second UUID", u1 + ":1," + u2 + ":02", 76, `"02" has a leading zero`},
		{"double zero", u1 + ":00", 37, "start at 1"},
		{"zero interval end", u1 + ":1-0", 39, "start at 1"},
		{"hexadecimal", u1 + ":0x10", 37, `transaction number "0x10" has a 0x prefix: MySQL would read it as hexadecimal`},
		{"upper-case hexadecimal", u1 + ":0X1F", 37, `"0X1F" has a 0x prefix`},
		{"hexadecimal interval end", u1 + ":1-0x10", 39, `"0x10" has a 0x prefix`},
		{"bare 0x", u1 + ":0x", 37, `"0x" has a 0x prefix`},
		{"hexadecimal after tag", u1 + ":t:0xa", 39, `"0xa" has a 0x prefix`},
		{"plus sign", u1 + ":+5", 37, `transaction number "+5" has a sign`},
		{"minus sign", u1 + ":-1", 37, `transaction number "-1" has a sign`},
		{"bare sign", u1 + ":+", 37, `transaction number "+" has a sign`},
		{"signed interval end", u1 + ":1-+5", 39, `"+5" has a sign`},
		{"negative interval end", u1 + ":1--5", 39, `"-5" has a sign`},
		{"signed after spaces", u1 + ": +5", 38, `"+5" has a sign`},
		{"space inside number", u1 + ":1 2", 38, `transaction number "1 2" has a space inside it`},
		{"tab inside number", u1 + ":12\t34-40", 39, `"12\t34" has a space inside it`},
		{"space inside interval end", u1 + ":1-2 3", 40, `"2 3" has a space inside it`},
		{"newline inside number", u1 + ":1\n2," + u2 + ":1", 38, `"1\n2" has a space inside it`},
		{"dangling dash", u1 + ":5-", 39, "expected a transaction number"},
		{"trailing comma", u1 + ":1,", 39, "expected a UUID after ','"},
		{"double comma", u1 + ":1,," + u2 + ":1", 39, "expected a UUID"},
		{"leading comma", "," + u1 + ":1", 0, "expected a UUID"},
		{"tag without intervals", u1 + ":tag", 40, `tag "tag" has no transaction interval`},
		{"tag followed by tag", u1 + ":a:b:1", 39, `tag "a" has no transaction interval`},
		{"tag too long", u1 + ":" + strings.Repeat("a", 33) + ":1", 37, "longer than 32"},
		{"bad character after colon", u1 + ":*1", 37, "expected a transaction interval"},
		{"letters after a number", u1 + ":12ab", 39, "expected ',' or ':'"},
		{"semicolon separator", u1 + ":1;" + u2 + ":1", 38, "expected ',' or ':'"},
		{"MariaDB position", "0-1-100", 0, "UUID must be"},
		{"garbage", "hello", 0, "expected a UUID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMySQLSet(tt.in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseMySQLSet(%q) error = %v, want *ParseError", tt.in, err)
			}
			if pe.Offset != tt.offset {
				t.Errorf("offset = %d, want %d (%v)", pe.Offset, tt.offset, err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
			if !strings.Contains(err.Error(), "⟨here⟩") || !strings.HasPrefix(err.Error(), "invalid MySQL GTID set at offset") {
				t.Errorf("error %q does not point at the offset", err)
			}
		})
	}
}

func TestParseErrorExcerptIsShort(t *testing.T) {
	long := strings.Repeat(u1+":1,", 200) + "oops"
	_, err := ParseMySQLSet(long)
	if err == nil {
		t.Fatal("expected an error")
	}
	if len(err.Error()) > 200 {
		t.Fatalf("error message is %d bytes long: %q", len(err.Error()), err)
	}
}

func TestMySQLSetAlgebra(t *testing.T) {
	tests := []struct {
		name                       string
		a, b                       string
		union, aMinusB, bMinusA    string
		intersect                  string
		aContainsB, bContainsA, eq bool
	}{
		{
			name: "both empty", aContainsB: true, bContainsA: true, eq: true,
		},
		{
			name: "empty and non-empty", a: u1 + ":1-5",
			union: u1 + ":1-5", aMinusB: u1 + ":1-5", aContainsB: true,
		},
		{
			name: "subset", a: u1 + ":1-10", b: u1 + ":3-4:7",
			union: u1 + ":1-10", aMinusB: u1 + ":1-2:5-6:8-10", intersect: u1 + ":3-4:7", aContainsB: true,
		},
		{
			name: "disjoint UUIDs", a: u1 + ":1-3", b: u2 + ":1-3",
			union: u1 + ":1-3," + u2 + ":1-3", aMinusB: u1 + ":1-3", bMinusA: u2 + ":1-3",
		},
		{
			name: "overlap", a: u1 + ":1-5", b: u1 + ":4-8",
			union: u1 + ":1-8", aMinusB: u1 + ":1-3", bMinusA: u1 + ":6-8", intersect: u1 + ":4-5",
		},
		{
			name: "adjacent unions merge", a: u1 + ":1-5", b: u1 + ":6-8",
			union: u1 + ":1-8", aMinusB: u1 + ":1-5", bMinusA: u1 + ":6-8",
		},
		{
			name: "equal", a: u1 + ":1-5," + u2 + ":7", b: u2 + ":7," + u1 + ":1-3:4-5",
			union: u1 + ":1-5," + u2 + ":7", intersect: u1 + ":1-5," + u2 + ":7", aContainsB: true, bContainsA: true, eq: true,
		},
		{
			name: "errant transaction on a replica", a: u1 + ":1-100," + u2 + ":1", b: u1 + ":1-100",
			union: u1 + ":1-100," + u2 + ":1", aMinusB: u2 + ":1", intersect: u1 + ":1-100", aContainsB: true,
		},
		{
			name: "gap inside", a: u1 + ":1-10", b: u1 + ":1-4:6-10",
			union: u1 + ":1-10", aMinusB: u1 + ":5", intersect: u1 + ":1-4:6-10", aContainsB: true,
		},
		{
			name: "b spans two intervals of a", a: u1 + ":1-4:6-10", b: u1 + ":3-7",
			union: u1 + ":1-10", aMinusB: u1 + ":1-2:8-10", bMinusA: u1 + ":5", intersect: u1 + ":3-4:6-7",
		},
		{
			name: "tags are separate sources", a: u1 + ":1-5", b: u1 + ":t:1-5",
			union: u1 + ":1-5:t:1-5", aMinusB: u1 + ":1-5", bMinusA: u1 + ":t:1-5",
		},
		{
			name: "tagged subtract", a: u1 + ":1-5:t:1-9", b: u1 + ":t:2-3",
			union: u1 + ":1-5:t:1-9", aMinusB: u1 + ":1-5:t:1:4-9", intersect: u1 + ":t:2-3", aContainsB: true,
		},
		{
			name: "many small holes", a: u1 + ":1-20", b: u1 + ":2:4:6:8:10-19",
			union: u1 + ":1-20", aMinusB: u1 + ":1:3:5:7:9:20", intersect: u1 + ":2:4:6:8:10-19", aContainsB: true,
		},
		{
			name: "maximum transaction numbers", a: u1 + ":9223372036854775800-9223372036854775806", b: u1 + ":9223372036854775806",
			union: u1 + ":9223372036854775800-9223372036854775806", aMinusB: u1 + ":9223372036854775800-9223372036854775805",
			intersect: u1 + ":9223372036854775806", aContainsB: true,
		},
		{
			name: "full range minus its ends", a: u1 + ":1-9223372036854775806", b: u1 + ":2-9223372036854775805",
			union: u1 + ":1-9223372036854775806", aMinusB: u1 + ":1:9223372036854775806",
			intersect: u1 + ":2-9223372036854775805", aContainsB: true,
		},
		{
			name: "adjacent at the maximum", a: u1 + ":9223372036854775806", b: u1 + ":1-9223372036854775805",
			union: u1 + ":1-9223372036854775806", aMinusB: u1 + ":9223372036854775806", bMinusA: u1 + ":1-9223372036854775805",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := MustParseMySQLSet(tt.a), MustParseMySQLSet(tt.b)
			aText, bText := a.String(), b.String()
			check := func(op, got, want string) {
				t.Helper()
				if got != want {
					t.Errorf("%s = %q, want %q", op, got, want)
				}
			}
			check("a∪b", a.Union(b).String(), tt.union)
			check("b∪a", b.Union(a).String(), tt.union)
			check("a−b", a.Subtract(b).String(), tt.aMinusB)
			check("b−a", b.Subtract(a).String(), tt.bMinusA)
			check("a∩b", a.Intersect(b).String(), tt.intersect)
			check("b∩a", b.Intersect(a).String(), tt.intersect)
			if got := a.Contains(b); got != tt.aContainsB {
				t.Errorf("a.Contains(b) = %v", got)
			}
			if got := b.Contains(a); got != tt.bContainsA {
				t.Errorf("b.Contains(a) = %v", got)
			}
			if got := a.Equal(b); got != tt.eq {
				t.Errorf("a.Equal(b) = %v", got)
			}
			if a.String() != aText || b.String() != bText {
				t.Errorf("inputs changed: a %q → %q, b %q → %q", aText, a.String(), bText, b.String())
			}
		})
	}
}

func TestMySQLSetAccessors(t *testing.T) {
	s := MustParseMySQLSet(u2 + ":1-3:t:9," + u1 + ":5:7-8")
	sids := s.SIDs()
	if len(sids) != 3 || sids[0].String() != u1 || sids[1].String() != u2 || sids[2].String() != u2+":t" {
		t.Fatalf("SIDs() = %v", sids)
	}
	if uuids := s.UUIDs(); len(uuids) != 2 || uuids[0].String() != u1 || uuids[1].String() != u2 {
		t.Fatalf("UUIDs() = %v", uuids)
	}
	ivs := s.Intervals(sids[0])
	if len(ivs) != 2 || ivs[0] != (Interval{5, 5}) || ivs[1] != (Interval{7, 8}) {
		t.Fatalf("Intervals = %v", ivs)
	}
	ivs[0].Start = 1 // the copy must not alias the set
	if s.String() != u1+":5:7-8,"+u2+":1-3:t:9" {
		t.Fatalf("modifying Intervals' result changed the set: %s", s)
	}
	for n, want := range map[uint64]bool{4: false, 5: true, 6: false, 7: true, 8: true, 9: false} {
		if got := s.ContainsGTID(sids[0], n); got != want {
			t.Errorf("ContainsGTID(%d) = %v", n, got)
		}
	}
	if s.ContainsGTID(SID{UUID: sids[0].UUID, Tag: "nope"}, 5) {
		t.Error("ContainsGTID matched an absent tag")
	}
}

func TestNewMySQLSet(t *testing.T) {
	uuid, err := ParseUUID(u1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewMySQLSet(map[SID][]Interval{
		{UUID: uuid}:             {{5, 9}, {1, 4}},
		{UUID: uuid, Tag: "ABC"}: {{2, 2}},
		{UUID: uuid, Tag: "x"}:   nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), u1+":1-9:abc:2"; got != want {
		t.Fatalf("NewMySQLSet = %q, want %q", got, want)
	}
	for _, bad := range []map[SID][]Interval{
		{{UUID: uuid}: {{0, 1}}},
		{{UUID: uuid}: {{3, 2}}},
		{{UUID: uuid}: {{1, math.MaxInt64}}},
		{{UUID: uuid}: {{1, math.MaxInt64 + 1}}},
		{{UUID: uuid}: {{math.MaxUint64, math.MaxUint64}}},
		{{UUID: uuid, Tag: "9x"}: {{1, 1}}},
		{{UUID: uuid, Tag: "a-b"}: {{1, 1}}},
	} {
		if _, err := NewMySQLSet(bad); err == nil {
			t.Errorf("NewMySQLSet(%v) accepted invalid input", bad)
		}
	}
}

func TestMySQLSetJSON(t *testing.T) {
	type status struct {
		Executed MySQLSet `json:"executed"`
	}
	in := status{Executed: MustParseMySQLSet(u1 + ":1-5:t:3")}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"executed":"`+u1+`:1-5:t:3"}` {
		t.Fatalf("json = %s", b)
	}
	var out status
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Executed.Equal(in.Executed) {
		t.Fatalf("json round trip = %s", out.Executed)
	}
	if err := json.Unmarshal([]byte(`{"executed":"nope"}`), &out); err == nil {
		t.Fatal("invalid JSON set accepted")
	}
}

func TestCountSaturates(t *testing.T) {
	var parts []string
	for i := range 3 {
		parts = append(parts, strings.Replace(u1, "3e", "0"+string(rune('a'+i)), 1)+":1-9223372036854775806")
	}
	s := MustParseMySQLSet(strings.Join(parts, ","))
	if s.Count() != math.MaxUint64 {
		t.Fatalf("Count() = %d, want saturation", s.Count())
	}
}

// TestMySQLSetNearMaximum checks that nothing overflows with intervals that
// end at MaxTransactionID: counting, merging, cutting holes and printing.
func TestMySQLSetNearMaximum(t *testing.T) {
	const maxText = "9223372036854775806"
	if MaxTransactionID != 1<<63-2 || strconv.FormatUint(MaxTransactionID, 10) != maxText {
		t.Fatalf("MaxTransactionID = %d, want 2^63-2", uint64(MaxTransactionID))
	}
	full := MustParseMySQLSet(u1 + ":1-" + maxText)
	if got := full.Count(); got != MaxTransactionID {
		t.Fatalf("Count() = %d, want %d", got, uint64(MaxTransactionID))
	}
	// Two full UUIDs hold 2^64-4 transactions: exact, no saturation yet.
	two := full.Union(MustParseMySQLSet(u2 + ":1-" + maxText))
	if got := two.Count(); got != math.MaxUint64-3 {
		t.Fatalf("Count() of two full UUIDs = %d, want %d", got, uint64(math.MaxUint64-3))
	}
	if got := two.String(); got != u1+":1-"+maxText+","+u2+":1-"+maxText {
		t.Fatalf("String() = %q", got)
	}
	last := MustParseMySQLSet(u1 + ":" + maxText)
	if got := full.Subtract(last).String(); got != u1+":1-9223372036854775805" {
		t.Fatalf("full − last = %q", got)
	}
	if got := full.Subtract(full); !got.IsEmpty() {
		t.Fatalf("full − full = %q", got)
	}
	if got := full.Subtract(last).Union(last); !got.Equal(full) {
		t.Fatalf("(full − last) ∪ last = %q", got)
	}
	if got := last.Union(MustParseMySQLSet(u1 + ":9223372036854775805")).String(); got != u1+":9223372036854775805-"+maxText {
		t.Fatalf("adjacent union at the maximum = %q", got)
	}
	sid := full.SIDs()[0]
	for n, want := range map[uint64]bool{1: true, MaxTransactionID: true, MaxTransactionID + 1: false, math.MaxUint64: false} {
		if got := full.ContainsGTID(sid, n); got != want {
			t.Errorf("ContainsGTID(%d) = %v", n, got)
		}
	}
	built, err := NewMySQLSet(map[SID][]Interval{sid: {{MaxTransactionID, MaxTransactionID}, {1, MaxTransactionID - 1}}})
	if err != nil || !built.Equal(full) {
		t.Fatalf("NewMySQLSet up to the maximum = %q, %v", built, err)
	}
	if again := MustParseMySQLSet(full.String()); !again.Equal(full) {
		t.Fatalf("round trip of %q = %q", full, again)
	}
}

func TestParseErrorForLongNumberIsShort(t *testing.T) {
	_, err := ParseMySQLSet(u1 + ":" + strings.Repeat("9", 5000))
	if err == nil {
		t.Fatal("expected an error")
	}
	if len(err.Error()) > 250 {
		t.Fatalf("error message is %d bytes long: %q", len(err.Error()), err)
	}
}
