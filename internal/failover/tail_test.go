package failover

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// tailCase is a former primary db-0 (server 1000) replaced by db-1 (server 1001) after its crash
// left 0-1000-11..13 unreceived; db-2 follows db-1.
func tailCase() TailInput {
	seen := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	snap := func(name string, id uint32, state string) topology.Snapshot {
		s := topology.Snapshot{Name: name, Reachable: true, Flavor: topology.Flavor{Line: topology.MariaDB}}
		s.ServerID = id
		list, err := gtid.ParseMariaDBGTIDList(state)
		if err != nil {
			panic(err)
		}
		s.GTID.BinlogState = list
		var last gtid.MariaDBGTID
		for _, g := range list {
			if g.Seq >= last.Seq {
				last = g
			}
		}
		s.GTID.BinlogPos = gtid.MustParseMariaDBPos(last.String())
		s.GTID.CurrentPos = s.GTID.BinlogPos
		return s
	}
	self := snap("db-0", 1000, "0-1000-13")
	self.ReadOnly = true
	self.Replica = &topology.ReplicaStatus{IOThread: topology.ThreadStopped}
	primary := snap("db-1", 1001, "0-1000-10,0-1001-15")
	other := snap("db-2", 1002, "0-1000-10,0-1001-15")
	other.GTID.IOPos = gtid.MustParseMariaDBPos("0-1001-15")
	return TailInput{
		Change: PrimaryChange{Type: "failover", Result: "Succeeded", FormerPrimary: "db-0", SeenAt: seen, Until: seen.Add(21 * time.Hour), CheckedAt: seen.Add(30 * time.Second), CheckedStart: seen.Add(-time.Hour),
			Written: []WrittenAt{{At: seen.Add(28 * time.Second), GTID: "0-1000-10"}, {At: seen.Add(29 * time.Second), GTID: "0-1000-12"}}},
		Recorded: "0-1000-13",
		Primary:  primary, Instance: self, Started: seen.Add(40 * time.Second),
		Others: []topology.Snapshot{primary, other}, OthersStarted: map[string]time.Time{"db-1": seen.Add(-time.Hour), "db-2": seen.Add(-time.Hour)},
	}
}

func TestProveUnacknowledgedTail(t *testing.T) {
	got, err := ProveUnacknowledgedTail(tailCase())
	if err != nil {
		t.Fatal(err)
	}
	if got.Discard != "0-1000-11..0-1000-13" || got.Count != 3 || len(got.Evidence) != 4 {
		t.Fatalf("proof %+v", got)
	}
	one := tailCase()
	one.Instance.GTID.BinlogState = gtid.MustParseMariaDBPos("0-1000-11").GTIDs()
	one.Instance.GTID.BinlogPos = gtid.MustParseMariaDBPos("0-1000-11")
	one.Recorded = "0-1000-11"
	if got, err := ProveUnacknowledgedTail(one); err != nil || got.Discard != "0-1000-11" || got.Count != 1 {
		t.Fatalf("one transaction: %+v, %v", got, err)
	}
}

// Each case breaks one link of the proof; every one must be refused with its reason.
func TestProveUnacknowledgedTailRefuses(t *testing.T) {
	pos := func(s string) gtid.MariaDBPos { return gtid.MustParseMariaDBPos(s) }
	cases := []struct {
		name   string
		change func(*TailInput)
		reason string
	}{
		{"a switchover, not a failover", func(in *TailInput) { in.Change.Type = "switchover" }, "not a successful failover"},
		{"another instance was replaced", func(in *TailInput) { in.Change.FormerPrimary = "db-2" }, "not a successful failover"},
		{"loss unknown", func(in *TailInput) { in.Change.Lost = -1 }, "did not prove"},
		{"no semi-sync window recorded", func(in *TailInput) { in.Change.Until = time.Time{} }, "did not prove"},
		{"uptime unknown", func(in *TailInput) { in.Started = time.Time{} }, "uptime"},
		{"no supervisor check recorded (a failover a person ran, or started after the crash)", func(in *TailInput) { in.Change.CheckedAt = time.Time{} }, "not started by this supervisor"},
		{"the process the supervisor checked alive (frozen, never restarted: sessions may still wait)", func(in *TailInput) {
			in.Started = in.Change.CheckedStart.Add(time.Second)
		}, "has not restarted"},
		{"restarted, reopened and checked alive, then frozen", func(in *TailInput) {
			in.Change.CheckedStart = in.Started.Add(-500 * time.Millisecond)
		}, "has not restarted"},
		{"an acknowledging replica restarted after the crash (relay log lost)", func(in *TailInput) { in.OthersStarted["db-2"] = in.Change.CheckedAt.Add(time.Millisecond) }, "db-2's server did not run since before"},
		{"no check before the run was written (an acknowledging replica restarted before may have lost it)", func(in *TailInput) {
			in.Change.Written = in.Change.Written[1:]
		}, "no check of the supervisor found db-0 before"},
		{"no position recorded", func(in *TailInput) { in.Change.Written = nil }, "no check of the supervisor found db-0 before"},
		{"a replica restarted after the run began but before the last check", func(in *TailInput) {
			in.OthersStarted["db-2"] = in.Change.Written[0].At.Add(time.Millisecond)
		}, "db-2's server did not run since before db-0's run was written"},
		{"a member's start unknown", func(in *TailInput) { delete(in.OthersStarted, "db-1") }, "db-1's server did not run since before"},
		{"no restart since last seen healthy (a frozen primary: sessions may still wait)", func(in *TailInput) {
			in.Change.CheckedAt, in.Started = in.Change.SeenAt.Add(-2*time.Minute), in.Change.SeenAt.Add(-time.Minute)
			in.Change.CheckedStart = in.Change.SeenAt.Add(-3 * time.Hour)
			for k := range in.OthersStarted {
				in.OthersStarted[k] = in.Change.SeenAt.Add(-time.Hour)
			}
		}, "not after it was last seen healthy"},
		{"restarted past the semi-sync timeout (a commit may have returned unacknowledged)", func(in *TailInput) { in.Started = in.Change.Until.Add(time.Minute) }, "without an acknowledgement"},
		{"writable", func(in *TailInput) { in.Instance.ReadOnly = false }, "writable"},
		{"still receiving", func(in *TailInput) { in.Instance.Replica.IOThread = topology.ThreadRunning }, "receives"},
		{"a member silent", func(in *TailInput) { in.Silent = []string{"db-2"} }, "db-2 did not answer"},
		{"another member received part of the tail", func(in *TailInput) { in.Others[1].GTID.IOPos = pos("0-1000-11") }, "db-2 holds part"},
		{"another member applied part of the tail", func(in *TailInput) {
			in.Others[1].GTID.BinlogState = gtid.MustParseMariaDBPos("0-1000-12").GTIDs()
		}, "db-2 holds part"},
		{"written by another server", func(in *TailInput) {
			in.Instance.GTID.BinlogState = []gtid.MariaDBGTID{{Domain: 0, ServerID: 1000, Seq: 10}, {Domain: 0, ServerID: 1001, Seq: 16}}
			in.Instance.GTID.BinlogPos = pos("0-1001-16")
		}, "written by server 1001"},
		{"two runs", func(in *TailInput) {
			in.Instance.GTID.BinlogState = []gtid.MariaDBGTID{{Domain: 0, ServerID: 1000, Seq: 13}, {Domain: 1, ServerID: 1000, Seq: 2}}
			in.Primary.GTID.BinlogState = append(in.Primary.GTID.BinlogState, gtid.MariaDBGTID{Domain: 1, ServerID: 1000, Seq: 1})
		}, "2 runs"},
		{"a server the primary never replicated", func(in *TailInput) {
			in.Instance.GTID.BinlogState = []gtid.MariaDBGTID{{Domain: 0, ServerID: 1000, Seq: 10}, {Domain: 0, ServerID: 77, Seq: 11}}
		}, "never replicated"},
		{"not the newest of its domain", func(in *TailInput) { in.Instance.GTID.BinlogPos = pos("0-1002-14") }, "not the newest"},
		{"more written since the quarantine", func(in *TailInput) { in.Recorded = "0-1000-12" }, "not 0-1000-12 as when it was quarantined"},
		{"not fully observed", func(in *TailInput) { in.Instance.Err = &topology.ObserveError{Stage: "read state"} }, "not fully observed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tailCase()
			tc.change(&in)
			_, err := ProveUnacknowledgedTail(in)
			if !errors.Is(err, ErrTailNotProven) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v, want a refusal naming %q", err, tc.reason)
			}
		})
	}
}

func TestProveUnacknowledgedTailMySQL(t *testing.T) {
	in := tailCase()
	self := mysqlMember("db-0", 0, "00000000-0000-0000-0000-000000000000:1-13", "").Snapshot
	self.ReadOnly, self.Replica = true, &topology.ReplicaStatus{IOThread: topology.ThreadStopped}
	primary := mysqlMember("db-1", 1, "00000000-0000-0000-0000-000000000000:1-10,00000000-0000-0000-0000-000000000001:1-5", "").Snapshot
	other := mysqlMember("db-2", 2, "00000000-0000-0000-0000-000000000000:1-10,00000000-0000-0000-0000-000000000001:1-5", "").Snapshot
	in.Instance, in.Primary, in.Others = self, primary, []topology.Snapshot{primary, other}
	in.Recorded = "00000000-0000-0000-0000-000000000000:11-13"
	in.Change.Written = []WrittenAt{{At: in.Change.CheckedAt, GTID: "00000000-0000-0000-0000-000000000000:1-10"}}
	got, err := ProveUnacknowledgedTail(in)
	if err != nil || got.Count != 3 || got.Discard != in.Recorded {
		t.Fatalf("%+v, %v", got, err)
	}
	in.Change.Written = []WrittenAt{{At: in.Change.CheckedAt, GTID: "00000000-0000-0000-0000-000000000000:1-11"}}
	if _, err := ProveUnacknowledgedTail(in); err == nil || !strings.Contains(err.Error(), "no check of the supervisor") {
		t.Fatalf("part of the run written before the only check, yet: %v", err)
	}
	in.Change.Written = []WrittenAt{{At: in.Change.CheckedAt, GTID: "00000000-0000-0000-0000-000000000000:1-10"}}
	in.Others[1].GTID.Received = gtid.MustParseMySQLSet("00000000-0000-0000-0000-000000000000:11")
	if _, err := ProveUnacknowledgedTail(in); !errors.Is(err, ErrTailNotProven) {
		t.Fatalf("a member received part of the tail, yet: %v", err)
	}
	in = tailCase()
	gap := mysqlMember("db-0", 0, "00000000-0000-0000-0000-000000000000:1-10:12-13", "").Snapshot
	gap.ReadOnly, gap.Replica = true, nil
	in.Instance, in.Primary, in.Others = gap, primary, []topology.Snapshot{primary}
	in.Recorded = "00000000-0000-0000-0000-000000000000:12-13"
	if _, err := ProveUnacknowledgedTail(in); err == nil || !strings.Contains(err.Error(), "not a run of its own") && !strings.Contains(err.Error(), "directly follow") {
		t.Fatalf("a tail that does not follow the primary's last: %v", err)
	}
}
