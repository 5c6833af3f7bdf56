package backup_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"20261207T001359Z", "20261207T001359Z-k3x9qa"} {
		if err := backup.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	// Each of these, joined into a key, would name objects that are not one backup's.
	for _, id := range []string{"", "..", "20261207T001359Z/..", "20261207T001359Z/x", "2026", "20261207T001359Z-", "20261207T001359Z-K3X9QA", "../other/backups/20261207T001359Z"} {
		if err := backup.ValidateID(id); !errors.Is(err, outcome.ErrInvalid) || !strings.Contains(err.Error(), "not a backup ID") {
			t.Errorf("ValidateID(%q) = %v, want a refusal", id, err)
		}
	}
}

func TestNearest(t *testing.T) {
	ids := []string{"20261207T030000Z-c", "20261205T010000Z-a", "20261206T020000Z-b", "20261208T040000Z-d"}
	for _, tc := range []struct {
		id   string
		n    int
		want []string
	}{
		// Typed short: those it begins.
		{"20261206", 3, []string{"20261206T020000Z-b"}},
		{"2026120", 2, []string{"20261205T010000Z-a", "20261206T020000Z-b"}},
		// A time between two backups: the one before and the one after.
		{"20261206T120000Z", 2, []string{"20261206T020000Z-b", "20261207T030000Z-c"}},
		{"20261206T120000Z", 3, []string{"20261205T010000Z-a", "20261206T020000Z-b", "20261207T030000Z-c"}},
		// Before the first and after the last: the closest ones at that end.
		{"20260101T000000Z", 2, []string{"20261205T010000Z-a", "20261206T020000Z-b"}},
		{"20270101T000000Z", 2, []string{"20261207T030000Z-c", "20261208T040000Z-d"}},
		// A typo in the suffix: its neighbours in time.
		{"20261207T030000Z-x", 2, []string{"20261207T030000Z-c", "20261208T040000Z-d"}},
		{"20261207T030000Z-x", 9, []string{"20261205T010000Z-a", "20261206T020000Z-b", "20261207T030000Z-c", "20261208T040000Z-d"}},
	} {
		if got := backup.Nearest(ids, tc.id, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("Nearest(%q, %d) = %q, want %q", tc.id, tc.n, got, tc.want)
		}
	}
	if got := backup.Nearest(nil, "20261206", 3); len(got) != 0 {
		t.Errorf("Nearest of no IDs = %q", got)
	}
	if ids[0] != "20261207T030000Z-c" || ids[3] != "20261208T040000Z-d" {
		t.Errorf("Nearest changed its input: %q", ids)
	}
}

func TestDeleteOrderManifestFirst(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"data.xb.zst", backup.ManifestName, "binlog.zst"}, []string{backup.ManifestName, "binlog.zst", "data.xb.zst"}},
		{[]string{backup.ManifestName}, []string{backup.ManifestName}},
		// An incomplete directory (a delete interrupted after the manifest): the rest.
		{[]string{"data.xb.zst", "a.zst"}, []string{"a.zst", "data.xb.zst"}},
		{nil, []string{}},
	} {
		in := slices.Clone(tc.in)
		if got := backup.DeleteOrder(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("DeleteOrder(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("DeleteOrder changed its input to %q", tc.in)
		}
	}
}

func TestDamageNamesEachObject(t *testing.T) {
	m := manifest(backup.Object{Name: "data.xb.zst", Size: 3, SHA256: sum([]byte("abc"))}, backup.Object{Name: "binlog.zst", Size: 5, SHA256: sum([]byte("abcde"))})
	dir := backup.Key("db", "demo", m.ID, "")
	intact := []objectstore.Object{{Key: dir + "data.xb.zst", Size: 3}, {Key: dir + "binlog.zst", Size: 5}, {Key: dir + backup.ManifestName, Size: 900}}
	if got := backup.Damage(m, intact); len(got) != 0 {
		t.Errorf("Damage of an intact backup = %q", got)
	}
	got := backup.Damage(m, []objectstore.Object{{Key: dir + "data.xb.zst", Size: 2}, {Key: backup.Key("db", "demo", "20261206T210001Z", "binlog.zst"), Size: 5}})
	want := []string{dir + "data.xb.zst holds 2 bytes, the manifest says 3", dir + "binlog.zst is missing"}
	if !slices.Equal(got, want) {
		t.Errorf("Damage = %q, want %q", got, want)
	}
}
