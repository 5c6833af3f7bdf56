package orchestrate

import (
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// TestBinlogHolds: ContinuingHistory resets only a binary log that holds nothing, and takes one
// that holds the backup's position (an earlier run did it) as done.
func TestBinlogHolds(t *testing.T) {
	want := gtid.MustParseMariaDBPos("0-7-9")
	for _, tc := range []struct {
		state string
		holds bool
	}{
		{"", false},
		{"0-7-9", true},
		{"0-7-9,0-3-12", true}, // the restored primary wrote since
		{"0-7-8", false},
		{"0-3-2", false},  // a history of its own
		{"0-3-12", false}, // one that counts further is not the backup's
		{"1-7-9", false},
	} {
		st, err := gtid.ParseMariaDBGTIDList(tc.state)
		if err != nil {
			t.Fatal(err)
		}
		if got := binlogHolds(st, want); got != tc.holds {
			t.Errorf("state %q: holds %v, want %v", tc.state, got, tc.holds)
		}
	}
}
