package gtid

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

func TestMain(m *testing.M) { os.Exit(mariadbtest.Main(m)) }

// TestMariaDBServerAgrees cross-checks the MariaDB position algebra against a
// real server where the server can compute the answer itself:
//
//   - canonical text: SET GLOBAL gtid_slave_pos = p, then @@gtid_slave_pos
//     is the server's own rendering of p;
//   - Reached: MASTER_GTID_WAIT(q, 0) returns 0 exactly when the server's
//     gtid_slave_pos has reached q;
//   - validity: the server refuses the same malformed positions.
//
// MariaDB has no GTID_SUBSET/SUBTRACT, so Contains and Subtract are covered
// by the property tests instead; the divergent cases below record where the
// server's "reached" and our stricter Contains deliberately differ.
func TestMariaDBServerAgrees(t *testing.T) {
	srv := mariadbtest.Start(t, mariadbtest.Options{Name: "gtid-oracle"})
	db := srv.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	divergentReached := 0
	for i := range 150 {
		p := randomPos(r)
		if _, err := db.ExecContext(ctx, "SET GLOBAL gtid_slave_pos = ?", p.String()); err != nil {
			t.Fatalf("SET gtid_slave_pos=%q: %v", p, err)
		}
		var printed string
		if err := db.QueryRowContext(ctx, "SELECT @@global.gtid_slave_pos").Scan(&printed); err != nil {
			t.Fatal(err)
		}
		if printed != p.String() {
			t.Fatalf("server prints %q, we print %q", printed, p)
		}
		for range 8 {
			q := randomPos(r)
			if r.IntN(4) == 0 {
				q = nudge(r, p)
			}
			var res int
			if err := db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 0)", q.String()).Scan(&res); err != nil {
				t.Fatalf("MASTER_GTID_WAIT(%q): %v", q, err)
			}
			serverReached := res == 0
			if serverReached != p.Reached(q) {
				t.Fatalf("case %d (seed %d): slave_pos %s, wait for %s: server reached=%v, Reached=%v", i, seed, p, q, serverReached, p.Reached(q))
			}
			if serverReached && !p.Contains(q) {
				// The server ignores server_ids; Contains refuses a proven
				// divergence. Check that this is the only difference.
				divergentReached++
				found := false
				for _, rel := range p.Relate(q) {
					found = found || rel.Relation == Diverged
				}
				if !found {
					t.Fatalf("server reached %s from %s, Contains refused without a divergence", q, p)
				}
			}
		}
	}
	t.Logf("%d cases where the server calls a diverged position reached and Contains refuses it", divergentReached)

	validity := []string{
		"0-1-1", "00-01-007", "0-1-0", "4294967295-4294967295-18446744073709551615", "1-2-7,0-1-100",
		"0-1-1,0-2-2", "4294967296-1-1", "0-4294967296-1", "0-1-", "a-1-1", "0-1-1,", ",0-1-1", "0-1", "0--1-1", "0-1-1-1",
		// Leading zeros are decimal to the server too; 0x and '-' are refused.
		"010-1-1", "0-010-1", "0-1-010", "0-1-08", "0x1-1-1", "0-0x1-1", "0-1-0x10", "-0-1-1", "0-1--0", "0 -1-1", "0-1-1 5",
	}
	for _, in := range validity {
		_, err := db.ExecContext(ctx, "SET GLOBAL gtid_slave_pos = ?", in)
		var me *mysql.MySQLError
		if err != nil && !errors.As(err, &me) {
			t.Fatalf("SET gtid_slave_pos=%q: %v", in, err)
		}
		p, ours := ParseMariaDBPos(in)
		if (err == nil) != (ours == nil) {
			t.Errorf("%q: server error %v, our error %v", in, err, ours)
			continue
		}
		if err == nil {
			var printed string
			if err := db.QueryRowContext(ctx, "SELECT @@global.gtid_slave_pos").Scan(&printed); err != nil {
				t.Fatal(err)
			}
			if printed != p.String() {
				t.Errorf("%q: server prints %q, we print %q", in, printed, p)
			}
		}
	}
	var empty sql.NullString
	if _, err := db.ExecContext(ctx, "SET GLOBAL gtid_slave_pos = ''"); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT @@global.gtid_slave_pos").Scan(&empty); err != nil || empty.String != "" {
		t.Fatalf("empty position printed as %q, %v", empty.String, err)
	}
}

// nudge derives a position close to p (same domains, sequence numbers ±1,
// sometimes another server_id) so that the boundary cases are frequent.
func nudge(r *rand.Rand, p MariaDBPos) MariaDBPos {
	gtids := p.GTIDs()
	for i := range gtids {
		switch r.IntN(4) {
		case 0:
			if gtids[i].Seq > 0 {
				gtids[i].Seq--
			}
		case 1:
			gtids[i].Seq++
		case 2:
			gtids[i].ServerID = 1 + uint32(r.IntN(3))
		}
	}
	out, err := NewMariaDBPos(gtids...)
	if err != nil {
		panic(err)
	}
	return out
}
