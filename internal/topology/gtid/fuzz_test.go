package gtid

import (
	"errors"
	"testing"
)

// FuzzParseMySQLSet checks that any input either fails with a *ParseError or
// yields a set whose canonical text is a fixed point and whose algebra with
// itself is consistent; nothing may panic.
func FuzzParseMySQLSet(f *testing.F) {
	for _, seed := range []string{
		"", u1 + ":1-5:7-9", u1 + ":1-5,\n" + u2 + ":1", u1 + ":tag:1-3", u1 + ":1-4:aaaa:1:abc:1-3",
		u1 + ":0", u1 + ":5-3", u1 + ":9223372036854775807", u1 + ":", ",", "0-1-100", u1 + ":t",
		u1 + ":1-9223372036854775806", u1 + ":010", u1 + ":0x1f", u1 + ":+5", u1 + ":1--5", u1 + ":1 2", u1 + ": 1 - 5",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseMySQLSet(in)
		if err != nil {
			if pe := (*ParseError)(nil); !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			_ = err.Error()
			return
		}
		for _, sid := range s.SIDs() {
			for _, iv := range s.Intervals(sid) {
				if iv.Start == 0 || iv.End < iv.Start || iv.End > MaxTransactionID {
					t.Fatalf("%q parsed to interval %v of %s", in, iv, sid)
				}
			}
		}
		text := s.String()
		again, err := ParseMySQLSet(text)
		if err != nil {
			t.Fatalf("canonical text %q does not parse: %v", text, err)
		}
		if !again.Equal(s) || again.String() != text {
			t.Fatalf("round trip %q → %q", text, again.String())
		}
		if !s.Contains(s) || !s.Subtract(s).IsEmpty() || !s.Union(s).Equal(s) || !s.Intersect(s).Equal(s) {
			t.Fatalf("algebra with itself fails for %q", text)
		}
		_ = s.Count()
	})
}

// FuzzParseMariaDBPos is the same for MariaDB positions and GTID lists.
func FuzzParseMariaDBPos(f *testing.F) {
	for _, seed := range []string{"", "0-1-100", "1-2-7,0-1-100", " 0-1-1 ,\n2-3-4", "0-1-1,0-2-2", "4294967296-1-1", "0-1-", ",0-1-1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = ParseMariaDBGTIDList(in)
		_, _ = ParseMariaDBGTID(in)
		p, err := ParseMariaDBPos(in)
		if err != nil {
			if pe := (*ParseError)(nil); !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		again, err := ParseMariaDBPos(p.String())
		if err != nil || !again.Equal(p) {
			t.Fatalf("round trip of %q: %q, %v", p, again, err)
		}
		if !p.Contains(p) || !p.Subtract(p).IsEmpty() {
			t.Fatalf("algebra with itself fails for %q", p)
		}
		if u, err := p.Union(p); err != nil || !u.Equal(p) {
			t.Fatalf("p∪p = %v, %v", u, err)
		}
	})
}
