package gtid

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The property tests compare the interval algebra with a brute-force model
// (explicit sets of transaction numbers) over a small universe, where every
// edge case (adjacency, holes, interval ends) is hit often.

const modelMax = 40

var modelSIDs = func() []SID {
	var out []SID
	for _, u := range []string{u1, u2, u3} {
		uuid, err := ParseUUID(u)
		if err != nil {
			panic(err)
		}
		out = append(out, SID{UUID: uuid}, SID{UUID: uuid, Tag: "t"})
	}
	return out
}()

type model map[SID]map[uint64]bool

func randomModel(r *rand.Rand) model {
	m := model{}
	for _, sid := range modelSIDs {
		if r.IntN(3) == 0 {
			continue
		}
		density := r.IntN(100)
		for n := uint64(1); n <= modelMax; n++ {
			if r.IntN(100) < density {
				if m[sid] == nil {
					m[sid] = map[uint64]bool{}
				}
				m[sid][n] = true
			}
		}
	}
	return m
}

// set builds the MySQLSet through its text form, with the intervals split
// and shuffled so that parsing and normalization are exercised as well.
func (m model) set(t *testing.T, r *rand.Rand) MySQLSet {
	t.Helper()
	var parts []string
	for sid, ns := range m {
		for n := range ns {
			parts = append(parts, fmt.Sprintf("%s:%d", sid, n))
		}
	}
	r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	text := ""
	for i, p := range parts {
		if i > 0 {
			text += ",\n "
		}
		text += p
	}
	s, err := ParseMySQLSet(text)
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	return s
}

func (m model) equals(s MySQLSet) bool {
	var count uint64
	for sid, ns := range m {
		for n := range ns {
			if !s.ContainsGTID(sid, n) {
				return false
			}
			count++
		}
	}
	return s.Count() == count
}

func combine(a, b model, keep func(inA, inB bool) bool) model {
	out := model{}
	for _, sid := range modelSIDs {
		for n := uint64(1); n <= modelMax; n++ {
			if keep(a[sid][n], b[sid][n]) {
				if out[sid] == nil {
					out[sid] = map[uint64]bool{}
				}
				out[sid][n] = true
			}
		}
	}
	return out
}

func deepCopy(s MySQLSet) MySQLSet {
	groups := make([]sidIntervals, len(s.groups))
	for i, g := range s.groups {
		groups[i] = sidIntervals{sid: g.sid, ivs: slices.Clone(g.ivs)}
	}
	return MySQLSet{groups: groups}
}

func identical(a, b MySQLSet) bool {
	return slices.EqualFunc(a.groups, b.groups, func(x, y sidIntervals) bool {
		return x.sid == y.sid && slices.Equal(x.ivs, y.ivs) && len(x.ivs) == len(y.ivs)
	})
}

func TestMySQLSetProperties(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 2000 {
		ma, mb := randomModel(r), randomModel(r)
		a, b := ma.set(t, r), mb.set(t, r)
		aCopy, bCopy := deepCopy(a), deepCopy(b)
		union, diff, inter := a.Union(b), a.Subtract(b), a.Intersect(b)

		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %d (seed %d): a=%s b=%s: %s", i, seed, a, b, fmt.Sprintf(format, args...))
		}
		if !ma.equals(a) {
			fail("a differs from its model")
		}
		if !combine(ma, mb, func(x, y bool) bool { return x || y }).equals(union) {
			fail("a∪b = %s differs from the model", union)
		}
		if !combine(ma, mb, func(x, y bool) bool { return x && !y }).equals(diff) {
			fail("a−b = %s differs from the model", diff)
		}
		if !combine(ma, mb, func(x, y bool) bool { return x && y }).equals(inter) {
			fail("a∩b = %s differs from the model", inter)
		}
		if !union.Contains(a) || !union.Contains(b) {
			fail("a∪b does not contain both")
		}
		if !diff.Intersect(b).IsEmpty() {
			fail("(a−b)∩b = %s", diff.Intersect(b))
		}
		if !diff.Union(inter).Equal(a) {
			fail("(a−b)∪(a∩b) ≠ a")
		}
		if !union.Equal(b.Union(a)) || !inter.Equal(b.Intersect(a)) {
			fail("∪ or ∩ not commutative")
		}
		contains := a.Contains(b)
		if contains != b.Subtract(a).IsEmpty() || contains != union.Equal(a) || contains != inter.Equal(b) {
			fail("Contains=%v disagrees with b−a, a∪b=a or a∩b=b", contains)
		}
		if union.Count() != a.Count()+b.Count()-inter.Count() {
			fail("|a∪b| = %d, |a|+|b|-|a∩b| = %d", union.Count(), a.Count()+b.Count()-inter.Count())
		}
		if a.Equal(b) != (a.String() == b.String()) {
			fail("Equal disagrees with the canonical text")
		}
		if again := MustParseMySQLSet(union.String()); !identical(again, union) {
			fail("round trip of %s changed it", union)
		}
		if !identical(a, aCopy) || !identical(b, bCopy) {
			fail("an operation modified its input")
		}
	}
}

func randomPos(r *rand.Rand) MariaDBPos {
	var gtids []MariaDBGTID
	for d := range uint32(4) {
		if r.IntN(3) == 0 {
			continue
		}
		gtids = append(gtids, MariaDBGTID{Domain: d, ServerID: 1 + uint32(r.IntN(3)), Seq: uint64(r.IntN(6))})
	}
	r.Shuffle(len(gtids), func(i, j int) { gtids[i], gtids[j] = gtids[j], gtids[i] })
	p, err := NewMariaDBPos(gtids...)
	if err != nil {
		panic(err)
	}
	return p
}

func TestMariaDBPosProperties(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range 5000 {
		p, q := randomPos(r), randomPos(r)
		pText, qText := p.String(), q.String()
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %d (seed %d): p=%s q=%s: %s", i, seed, p, q, fmt.Sprintf(format, args...))
		}
		if !p.Contains(p) || !p.Reached(p) || !p.Subtract(p).IsEmpty() {
			fail("a position must contain itself")
		}
		if p.Contains(q) && !p.Reached(q) {
			fail("Contains without Reached")
		}
		behind, diverged := false, false
		for _, rel := range p.Relate(q) {
			behind = behind || rel.Relation == Behind
			diverged = diverged || rel.Relation == Diverged
		}
		if p.Reached(q) != !behind {
			fail("Reached=%v but a Behind relation=%v", p.Reached(q), behind)
		}
		if p.Contains(q) != (!behind && !diverged) {
			fail("Contains=%v but behind=%v diverged=%v", p.Contains(q), behind, diverged)
		}
		diff := p.Subtract(q)
		if diff.IsEmpty() != q.Contains(p) {
			fail("p−q=%s empty=%v but q.Contains(p)=%v", diff, diff.IsEmpty(), q.Contains(p))
		}
		for _, g := range diff.GTIDs() {
			single, _ := NewMariaDBPos(g)
			if q.Contains(single) {
				fail("(p−q) holds %s, which q contains", g)
			}
			if !p.Contains(single) {
				fail("(p−q) holds %s, which p does not", g)
			}
		}
		union, err := p.Union(q)
		if (err != nil) != diverged {
			fail("Union error %v but diverged=%v", err, diverged)
		}
		if err == nil {
			if !union.Contains(p) || !union.Contains(q) {
				fail("p∪q = %s does not contain both", union)
			}
			if other, _ := q.Union(p); !other.Equal(union) {
				fail("∪ not commutative")
			}
		}
		if p.String() != pText || q.String() != qText {
			fail("an operation modified its input")
		}
		if !MustParseMariaDBPos(pText).Equal(p) {
			fail("round trip")
		}
	}
}
