package gtid

import (
	"fmt"
	"testing"
)

// benchSet builds 100 UUIDs × 1000 intervals, each interval [k*step+lo,
// k*step+hi], the size of a long-lived topology with many former primaries.
func benchSet(b *testing.B, lo, hi uint64) MySQLSet {
	b.Helper()
	m := map[SID][]Interval{}
	for u := range 100 {
		uuid, err := ParseUUID(fmt.Sprintf("%08x-71ca-11e1-9e33-c80aa9429562", u*7919))
		if err != nil {
			b.Fatal(err)
		}
		ivs := make([]Interval, 1000)
		for k := range ivs {
			base := uint64(k) * 10
			ivs[k] = Interval{base + lo, base + hi}
		}
		m[SID{UUID: uuid}] = ivs
	}
	s, err := NewMySQLSet(m)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkMySQLSetContains(b *testing.B) {
	big := benchSet(b, 1, 6)
	sub := benchSet(b, 2, 5)
	b.ReportAllocs()
	for b.Loop() {
		if !big.Contains(sub) {
			b.Fatal("expected containment")
		}
	}
}

func BenchmarkMySQLSetSubtract(b *testing.B) {
	a := benchSet(b, 1, 6)
	c := benchSet(b, 4, 8)
	b.ReportAllocs()
	for b.Loop() {
		if a.Subtract(c).Count() != 100*1000*3 {
			b.Fatal("unexpected difference")
		}
	}
}

func BenchmarkMySQLSetUnion(b *testing.B) {
	a := benchSet(b, 1, 6)
	c := benchSet(b, 4, 8)
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Union(c)
	}
}

func BenchmarkParseMySQLSet(b *testing.B) {
	text := benchSet(b, 1, 6).String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMySQLSet(text); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMySQLSetString(b *testing.B) {
	s := benchSet(b, 1, 6)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.String()
	}
}
