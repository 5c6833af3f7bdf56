package gtid

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMariaDBPos(t *testing.T) {
	tests := []struct {
		in, want string
		count    uint64
	}{
		{"", "", 0},
		{"  \n", "", 0},
		{"0-1-100", "0-1-100", 100},
		{"1-2-7,0-1-100", "0-1-100,1-2-7", 107},
		{" 0-1-100 ,\n 3-4-5 ", "0-1-100,3-4-5", 105},
		// MariaDB reads every number with my_strtoll10, which is decimal
		// only: unlike MySQL's GTID parser it takes a leading zero as
		// decimal, so leading zeros read the same here as on the server
		// (server_test.go checks this against a real server).
		{"00-01-007", "0-1-7", 7},
		{"010-1-1", "10-1-1", 1},
		{"0-010-1", "0-10-1", 1},
		{"0-1-010", "0-1-10", 10},
		{"0-1-08", "0-1-8", 8},
		{"0-1-0", "0-1-0", 0},
		{"4294967295-4294967295-18446744073709551615", "4294967295-4294967295-18446744073709551615", 18446744073709551615},
	}
	for _, tt := range tests {
		p, err := ParseMariaDBPos(tt.in)
		if err != nil {
			t.Errorf("ParseMariaDBPos(%q): %v", tt.in, err)
			continue
		}
		if p.String() != tt.want || p.Count() != tt.count || p.IsEmpty() != (tt.want == "") {
			t.Errorf("ParseMariaDBPos(%q) = %q count %d, want %q count %d", tt.in, p, p.Count(), tt.want, tt.count)
		}
		again := MustParseMariaDBPos(p.String())
		if !again.Equal(p) {
			t.Errorf("round trip of %q gave %q", p, again)
		}
	}
}

func TestParseMariaDBPosInvalid(t *testing.T) {
	tests := []struct {
		in     string
		offset int
		reason string
	}{
		{"0-1", 3, "expected '-'"},
		{"0-1-", 4, "expected a decimal sequence number"},
		{"0--1-1", 2, "expected a decimal server_id"},
		{"a-1-1", 0, "expected a decimal domain id"},
		{"0-1-1,", 6, "expected a GTID after ','"},
		{"0-1-1,,1-1-1", 6, "expected a decimal domain id"},
		{"0-1-1 1-1-1", 6, "expected ',' or the end"},
		{"4294967296-1-1", 0, "domain id exceeds 4294967295"},
		{"0-4294967296-1", 2, "server_id exceeds 4294967295"},
		{"0-1-18446744073709551616", 4, "sequence number exceeds"},
		{"0-1-100,0-2-7", 8, "domain 0 appears twice"},
		{"-1-1-1", 0, "expected a decimal domain id"},
		{"0-1-1-1", 5, "expected ',' or the end"},
		{u1 + ":1", 1, "expected '-'"},
		// 0x prefixes and '-' signs are refused by the server as well.
		{"0x1-1-1", 1, "expected '-'"},
		{"0-0x1-1", 3, "expected '-'"},
		{"0-1-0x10", 5, "expected ',' or the end"},
		{"0-1--0", 4, "expected a decimal sequence number"},
		// The server reads a '+' sign, or spaces after a '-', as the same
		// number without them; refusing them is stricter, never a
		// different reading.
		{"+1-1-1", 0, "expected a decimal domain id"},
		{"0-+1-1", 2, "expected a decimal server_id"},
		{"0-1-+5", 4, "expected a decimal sequence number"},
		{"0- 1-1", 2, "expected a decimal server_id"},
	}
	for _, tt := range tests {
		_, err := ParseMariaDBPos(tt.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseMariaDBPos(%q) = %v, want *ParseError", tt.in, err)
			continue
		}
		if pe.Offset != tt.offset || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("ParseMariaDBPos(%q) = %v (offset %d), want offset %d and %q", tt.in, err, pe.Offset, tt.offset, tt.reason)
		}
	}
}

func TestParseMariaDBGTIDList(t *testing.T) {
	list, err := ParseMariaDBGTIDList("0-2-105,1-1-3,0-1-100")
	if err != nil {
		t.Fatal(err)
	}
	want := []MariaDBGTID{{0, 1, 100}, {0, 2, 105}, {1, 1, 3}}
	if len(list) != len(want) {
		t.Fatalf("list = %v", list)
	}
	for i := range want {
		if list[i] != want[i] {
			t.Fatalf("list = %v, want %v", list, want)
		}
	}
	if _, err := ParseMariaDBGTIDList("0-1-5,0-1-6"); err == nil || !strings.Contains(err.Error(), "appear twice") {
		t.Fatalf("duplicate (domain, server_id) error = %v", err)
	}
	if _, err := ParseMariaDBPos("0-2-105,0-1-100"); err == nil {
		t.Fatal("a binlog state with two servers in one domain is not a position")
	}
	g, err := ParseMariaDBGTID(" 1-2-3 ")
	if err != nil || g != (MariaDBGTID{1, 2, 3}) {
		t.Fatalf("ParseMariaDBGTID = %v, %v", g, err)
	}
	if _, err := ParseMariaDBGTID("1-2-3,4-5-6"); err == nil {
		t.Fatal("ParseMariaDBGTID accepted a list")
	}
}

func TestMariaDBRelate(t *testing.T) {
	tests := []struct {
		name, p, q string
		want       []Relation
		reached    bool
		contains   bool
		minus      string
	}{
		{"identical", "0-1-100", "0-1-100", []Relation{Same}, true, true, ""},
		{"behind", "0-1-90", "0-1-100", []Relation{Behind}, false, false, ""},
		{"ahead on the same server", "0-1-110", "0-1-100", []Relation{AheadSameServer}, true, true, "0-1-110"},
		{"ahead after a failover (or divergence)", "0-2-110", "0-1-100", []Relation{AheadOtherServer}, true, true, "0-2-110"},
		{"same seq from another server", "0-2-100", "0-1-100", []Relation{Diverged}, true, false, "0-2-100"},
		{"behind another server", "0-2-50", "0-1-100", []Relation{Behind}, false, false, ""},
		{"missing domain", "0-1-100", "0-1-100,1-1-5", []Relation{Same, Behind}, false, false, ""},
		{"extra domain", "0-1-100,1-1-5", "0-1-100", []Relation{Same, OnlyOurs}, true, true, "1-1-5"},
		{"empty q", "0-1-1", "", []Relation{OnlyOurs}, true, true, "0-1-1"},
		{"empty p", "", "0-1-1", []Relation{Behind}, false, false, ""},
		{"both empty", "", "", []Relation{}, true, true, ""},
		{"sequence 0 is no transaction", "0-1-0", "1-2-0", []Relation{Same, Same}, true, true, ""},
		{"sequence 0 from different servers", "0-1-0", "0-2-0", []Relation{Same}, true, true, ""},
		{"behind from sequence 0", "0-1-0", "0-1-3", []Relation{Behind}, false, false, ""},
		{
			"mixed", "0-1-100,2-3-9,5-1-1", "0-1-100,1-1-1,2-4-9",
			[]Relation{Same, Behind, Diverged, OnlyOurs},
			false, false, "2-3-9,5-1-1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, q := MustParseMariaDBPos(tt.p), MustParseMariaDBPos(tt.q)
			rels := p.Relate(q)
			if len(rels) != len(tt.want) {
				t.Fatalf("Relate = %v", rels)
			}
			for i, r := range rels {
				if r.Relation != tt.want[i] {
					t.Errorf("domain %d: %v, want %v (%s)", r.Domain, r.Relation, tt.want[i], r)
				}
			}
			if got := p.Reached(q); got != tt.reached {
				t.Errorf("Reached = %v", got)
			}
			if got := p.Contains(q); got != tt.contains {
				t.Errorf("Contains = %v", got)
			}
			if got := p.Subtract(q).String(); got != tt.minus {
				t.Errorf("p−q = %q, want %q", got, tt.minus)
			}
			if p.String() != MustParseMariaDBPos(tt.p).String() || q.String() != MustParseMariaDBPos(tt.q).String() {
				t.Error("inputs changed")
			}
		})
	}
}

func TestRelationProven(t *testing.T) {
	for r, proven := range map[Relation]bool{Same: true, Behind: true, Diverged: true, OnlyOurs: true, AheadSameServer: false, AheadOtherServer: false} {
		if r.Proven() != proven {
			t.Errorf("%v.Proven() = %v", r, r.Proven())
		}
	}
	rel := MustParseMariaDBPos("0-2-7").Relate(MustParseMariaDBPos("0-1-5,1-1-1"))
	if got := rel[0].String(); got != "domain 0: 0-2-7 vs 0-1-5: ahead (other server_id, unproven)" {
		t.Errorf("evidence line = %q", got)
	}
	if got := rel[1].String(); got != "domain 1: none vs 1-1-1: behind" {
		t.Errorf("evidence line = %q", got)
	}
}

func TestMariaDBUnion(t *testing.T) {
	p := MustParseMariaDBPos("0-1-100,1-1-5")
	q := MustParseMariaDBPos("0-2-120,2-3-1")
	u, err := p.Union(q)
	if err != nil {
		t.Fatal(err)
	}
	if u.String() != "0-2-120,1-1-5,2-3-1" {
		t.Fatalf("union = %s", u)
	}
	_, err = p.Union(MustParseMariaDBPos("0-9-100"))
	var de *DivergedError
	if !errors.As(err, &de) || de.Ours != (MariaDBGTID{0, 1, 100}) || de.Theirs != (MariaDBGTID{0, 9, 100}) {
		t.Fatalf("union of diverged positions: %v", err)
	}
	if !strings.Contains(err.Error(), "diverged in domain 0") {
		t.Fatalf("error text %q", err)
	}
}

func TestMariaDBAccessors(t *testing.T) {
	p := MustParseMariaDBPos("3-1-7,0-2-9")
	if g, ok := p.Domain(3); !ok || g != (MariaDBGTID{3, 1, 7}) {
		t.Fatalf("Domain(3) = %v %v", g, ok)
	}
	if _, ok := p.Domain(1); ok {
		t.Fatal("Domain(1) found")
	}
	gs := p.GTIDs()
	gs[0].Seq = 1
	if p.String() != "0-2-9,3-1-7" {
		t.Fatalf("GTIDs() aliases the position: %s", p)
	}
	q, err := NewMariaDBPos(MariaDBGTID{1, 1, 1}, MariaDBGTID{0, 1, 1})
	if err != nil || q.String() != "0-1-1,1-1-1" {
		t.Fatalf("NewMariaDBPos = %v %v", q, err)
	}
	if _, err := NewMariaDBPos(MariaDBGTID{1, 1, 1}, MariaDBGTID{1, 2, 1}); err == nil {
		t.Fatal("NewMariaDBPos accepted a duplicate domain")
	}
	var r MariaDBPos
	if err := r.UnmarshalText([]byte("0-1-2")); err != nil || r.String() != "0-1-2" {
		t.Fatalf("UnmarshalText = %v %v", r, err)
	}
	if b, _ := r.MarshalText(); string(b) != "0-1-2" {
		t.Fatalf("MarshalText = %s", b)
	}
}
