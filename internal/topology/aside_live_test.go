package topology

import (
	"context"
	"slices"
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// TestLiveDropAsideSchemas: only the schemas a rebuild set aside are dropped, without binary
// logging (the server's GTID position does not move), also on a read-only server, and a second
// call finds nothing to drop.
func TestLiveDropAsideSchemas(t *testing.T) {
	s := mariadbtest.Start(t, mariadbtest.Options{Name: "aside"})
	s.Exec(t, "CREATE DATABASE mysqlctl_aside_app", "CREATE TABLE mysqlctl_aside_app.t (i INT)",
		"CREATE DATABASE mysqlctl_aside_rogue", "CREATE DATABASE mysqlctlXasideXkeep", "CREATE DATABASE keepme")
	ctx := context.Background()
	in := connect(t, s, rootCreds())
	defer in.Close()
	must(t, in.Fence(ctx))
	before := s.QueryString(t, "SELECT @@gtid_binlog_pos")
	names, err := in.DropAsideSchemas(ctx)
	must(t, err)
	slices.Sort(names)
	if !slices.Equal(names, []string{"mysqlctl_aside_app", "mysqlctl_aside_rogue"}) {
		t.Fatalf("dropped %v, want the two aside schemas only", names)
	}
	if got := s.QueryString(t, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name IN ('mysqlctlXasideXkeep', 'keepme')"); got != "2" {
		t.Fatalf("%s of the other schemas left, want 2: '_' in the prefix must match itself only", got)
	}
	if after := s.QueryString(t, "SELECT @@gtid_binlog_pos"); after != before {
		t.Fatalf("the drop was binary-logged: gtid_binlog_pos %q -> %q", before, after)
	}
	if names, err := in.DropAsideSchemas(ctx); err != nil || len(names) != 0 {
		t.Fatalf("second drop: %v, %v", names, err)
	}
}
