package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

func mariaSnap(current, binlog, slave string) topology.Snapshot {
	s := topology.Snapshot{Flavor: topology.Flavor{Line: topology.MariaDB}}
	s.GTID.CurrentPos = gtid.MustParseMariaDBPos(current)
	s.GTID.BinlogPos = gtid.MustParseMariaDBPos(binlog)
	s.GTID.SlavePos = gtid.MustParseMariaDBPos(slave)
	return s
}

func withState(s topology.Snapshot, state string) topology.Snapshot {
	l, err := gtid.ParseMariaDBGTIDList(state)
	if err != nil {
		panic(err)
	}
	s.GTID.BinlogState = l
	return s
}

func TestDivergence(t *testing.T) {
	primary := withState(mariaSnap("0-1001-105", "0-1001-105", "0-1000-100"), "0-1000-100,0-1001-105")
	tests := []struct {
		name    string
		replica topology.Snapshot
		ok      bool
		count   int64
	}{
		{"behind on the same history", withState(mariaSnap("0-1000-100", "0-1000-100", "0-1000-100"), "0-1000-100"), true, 0},
		{"equal", withState(mariaSnap("0-1001-105", "0-1001-105", "0-1001-105"), "0-1000-100,0-1001-105"), true, 0},
		{"old primary with unacknowledged transactions, lower sequence than the new primary's", withState(mariaSnap("0-1000-102", "0-1000-102", ""), "0-1000-102"), false, 2},
		{"a replica's local write", withState(mariaSnap("0-1002-3", "0-1002-3", "0-1000-2"), "0-1000-2,0-1002-3"), false, 1},
		{"same sequence from another server, positions only", mariaSnap("0-1002-105", "0-1002-105", "0-1001-104"), false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := Divergence(primary, tt.replica)
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v (%+v)", ok, tt.ok, e)
			}
			if !ok && (e.Count != tt.count || e.ErrantGTIDs == "" || !strings.Contains(e.Reason, "transactions the primary does not have")) {
				t.Errorf("quarantine record %+v", e)
			}
		})
	}
	mysqlPrimary := topology.Snapshot{Flavor: topology.Flavor{Line: topology.MySQL80}}
	mysqlPrimary.GTID.Executed = gtid.MustParseMySQLSet("00000000-0000-0000-0000-000000000001:1-100")
	mysqlPrimary.GTID.Purged = gtid.MustParseMySQLSet("00000000-0000-0000-0000-000000000001:1-50")
	behind := topology.Snapshot{Flavor: mysqlPrimary.Flavor}
	behind.GTID.Executed = gtid.MustParseMySQLSet("00000000-0000-0000-0000-000000000001:1-40")
	if e, ok := Divergence(mysqlPrimary, behind); ok || !strings.Contains(e.Reason, "purged") {
		t.Errorf("a replica needing purged binlogs: ok %v %+v", ok, e)
	}
	behind.GTID.Executed = gtid.MustParseMySQLSet("00000000-0000-0000-0000-000000000001:1-60")
	if _, ok := Divergence(mysqlPrimary, behind); !ok {
		t.Error("a replica the binlogs still cover was refused")
	}
	errant := topology.Snapshot{Flavor: mysqlPrimary.Flavor}
	errant.GTID.Executed = gtid.MustParseMySQLSet("00000000-0000-0000-0000-000000000001:1-60,00000000-0000-0000-0000-000000000002:1-3")
	if e, ok := Divergence(mysqlPrimary, errant); ok || e.Count != 3 {
		t.Errorf("errant MySQL replica: ok %v %+v", ok, e)
	}
}

func TestResumesFromBinlog(t *testing.T) {
	if !resumesFromBinlog(mariaSnap("0-1000-101", "0-1000-101", "0-1001-90")) {
		t.Error("a former primary must resume from its binlog")
	}
	if resumesFromBinlog(mariaSnap("0-1000-101", "0-1000-101", "0-1000-101")) {
		t.Error("a replica resumes from gtid_slave_pos")
	}
	if resumesFromBinlog(mariaSnap("", "", "")) {
		t.Error("an empty server has nothing to resume")
	}
}

func TestKnownHistory(t *testing.T) {
	c := &v1.MysqlCluster{}
	c.Name, c.Spec.Image = "db", "mariadb:10.11"
	c.Status.CurrentPrimary = "db-1"
	c.Status.KnownPrimaries = []string{"server_id:1000"}
	c.Status.Instances = []v1.InstanceStatus{{Name: "db-1", Role: v1.RolePrimary, ServerID: 1001}, {Name: "db-2", Role: v1.RoleReplica, ServerID: 1002}}
	c.Status.GTIDBootstrap = []v1.GTIDBootstrapRecord{{Ordinal: 0, BootstrapGTIDSet: "0-7-5", RecordedAt: metav1.Now()}, {Ordinal: 2, BootstrapGTIDSet: "1-9-9"}}
	c.Status.ErrantInstances = []v1.ErrantInstance{{Name: "db-2"}}
	h := knownHistory(c)
	if len(h.PrimaryServerIDs) != 2 || h.PrimaryServerIDs[0] != 1000 || h.PrimaryServerIDs[1] != 1001 {
		t.Errorf("primary server ids %v", h.PrimaryServerIDs)
	}
	if h.MariaDB.String() != "0-7-5" {
		t.Errorf("provenance %s: a quarantined instance's bootstrap set must not count", h.MariaDB)
	}
}

// TestFencesByReceiversFromServerState: the receiver fence counts only when the server itself
// says it waits for acknowledgements (enabled and active, AFTER_SYNC, waiting with no replica
// connected, a timeout of at least an hour), never from the spec.
func TestFencesByReceiversFromServerState(t *testing.T) {
	good := topology.SemiSyncState{Available: true, SourceEnabled: true, SourceActive: true, WaitPoint: "AFTER_SYNC", WaitNoReplica: true, TimeoutMillis: (2 * time.Hour).Milliseconds()}
	tests := []struct {
		name string
		edit func(*topology.SemiSyncState)
		want bool
	}{
		{"waits", func(*topology.SemiSyncState) {}, true},
		{"source side off", func(s *topology.SemiSyncState) { s.SourceEnabled = false }, false},
		{"fell back to asynchronous", func(s *topology.SemiSyncState) { s.SourceActive = false }, false},
		{"AFTER_COMMIT", func(s *topology.SemiSyncState) { s.WaitPoint = "AFTER_COMMIT" }, false},
		{"does not wait with no replica", func(s *topology.SemiSyncState) { s.WaitNoReplica = false }, false},
		{"short timeout", func(s *topology.SemiSyncState) { s.TimeoutMillis = 10000 }, false},
	}
	for _, tt := range tests {
		s := good
		tt.edit(&s)
		if got := FencesByReceivers(topology.Snapshot{SemiSync: s}); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestReceiverFenceDeadline: the deadline counts from the last observation of the old primary
// (its isolation may have begun right after it), with its observed timeout minus a margin; a
// primary never observed has none, and one observed too long ago blocks the fence.
func TestReceiverFenceDeadline(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	seen := metav1.NewTime(now.Add(-10 * time.Minute))
	c := &v1.MysqlCluster{}
	on := true
	c.Spec.SemiSync.Enabled = &on
	c.Status.Instances = []v1.InstanceStatus{{Name: "db-0", LastSeen: &seen, SemiSyncTimeoutSeconds: 3600, SemiSyncSource: true}}
	d, why := receiverFenceDeadline(c, "db-0")
	if d == nil || !d.Equal(&metav1.Time{Time: seen.Add(time.Hour - 6*time.Minute)}) {
		t.Fatalf("deadline %v (%s), want lastSeen + 1h - 6m", d, why)
	}
	if d, why := receiverFenceDeadline(c, "db-1"); d != nil || !strings.Contains(why, "no recorded observation") {
		t.Errorf("never observed: %v %q", d, why)
	}
	members := []failover.Member{{Name: "db-1", Snapshot: topology.Snapshot{Replica: &topology.ReplicaStatus{}}}}
	if blocked, _ := receiverFenceBlockers(c, "db-0", members, nil, now); len(blocked) != 0 {
		t.Errorf("observed 10 minutes ago: blocked %v", blocked)
	}
	if !semiSyncProvenNow(c, "db-0", now) {
		t.Error("a semi-sync source observed 10 minutes ago is not taken as proof")
	}
	old := metav1.NewTime(now.Add(-2 * time.Hour))
	c.Status.Instances[0].LastSeen = &old
	if blocked, _ := receiverFenceBlockers(c, "db-0", members, nil, now); len(blocked) != 1 || !strings.Contains(blocked[0], "has passed") {
		t.Errorf("observed 2 hours ago with a 1h timeout: blocked %v", blocked)
	}
	// Two hours without an observation: it may have run asynchronously since; no proof.
	if semiSyncProvenNow(c, "db-0", now) {
		t.Error("an observation older than the semi-sync timeout is taken as proof that nothing acknowledged was lost")
	}
}

// TestFlavorMismatchRefused: a server that is not of spec.flavor is a clear error naming both.
func TestFlavorMismatchRefused(t *testing.T) {
	c := &v1.MysqlCluster{Spec: v1.MysqlClusterSpec{Image: "mysql:8.4", Flavor: v1.FlavorMySQL}}
	maria := topology.Snapshot{Flavor: topology.Flavor{Line: topology.MariaDB, VersionString: "10.11.6-MariaDB"}}
	err := flavorMatches(c, "db-0", maria)
	if !errors.Is(err, outcome.ErrUnsafe) || !strings.Contains(err.Error(), "spec.flavor is mysql but db-0 reports 10.11.6-MariaDB") {
		t.Errorf("mismatch: %v", err)
	}
	c.Spec.Flavor = v1.FlavorMariaDB
	if err := flavorMatches(c, "db-0", maria); err != nil {
		t.Errorf("match: %v", err)
	}
}

// TestMembersObservedAtOnce: a failover's view of its members is one round of observations, not
// one per member: every member's connection is asked for before any of them answers (a view
// taken one member after the other never gets past the first here). The members come back in
// the order of the ready pods, and one that cannot be reached is listed missing.
func TestMembersObservedAtOnce(t *testing.T) {
	c := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"}}
	var v FailoverView
	v.old = "m-0"
	for ord := range int32(5) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", ord)}}
		v.Ready = append(v.Ready, Instance{ordinal: ord, Pod: p})
	}
	v.missing = []string{"m-9"}
	const others = 4 // every ready pod but the old primary
	var mu sync.Mutex
	asked := 0
	all := make(chan struct{})
	r := &Runner{Connect: func(ctx context.Context, pod *corev1.Pod, _ topology.Credentials) (*topology.Instance, error) {
		if pod.Name == v.old {
			t.Errorf("the old primary %s was observed as a member", pod.Name)
		}
		mu.Lock()
		if asked++; asked == others {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the other members were not asked for while it was (observed one after the other)", pod.Name)
		}
		return nil, fmt.Errorf("%s unreachable", pod.Name)
	}}
	ss := r.OpenSessions(context.Background(), v.Ready, Credentials{})
	defer ss.Close()
	members, missing := v.Members(c, ss)
	if len(members) != 0 {
		t.Errorf("members %v: every connection failed", members)
	}
	if want := []string{"m-9", "m-1", "m-2", "m-3", "m-4"}; !slices.Equal(missing, want) {
		t.Errorf("missing %v, want %v", missing, want)
	}
}

// TestRelayLogApplied: Electing skips WaitingForRelayLog only for a candidate that has applied
// what it received and, when the old primary was fenced over SQL, every transaction of the
// fenced set.
func TestRelayLogApplied(t *testing.T) {
	cand := failover.Member{Name: "db-1", Snapshot: mariaSnap("0-1000-10", "0-1000-10", "0-1000-10")}
	other := failover.Member{Name: "db-2", Snapshot: mariaSnap("0-1000-12", "0-1000-12", "0-1000-12")}
	members := []failover.Member{cand, other}
	drained := failover.Decision{Candidate: "db-1", Drained: true}
	for _, tt := range []struct {
		name    string
		d       failover.Decision
		members []failover.Member
		fenced  string
		want    bool
	}{
		{"relay log not applied", failover.Decision{Candidate: "db-1"}, members, "", false},
		{"applied, fenced by its receivers", drained, members, "", true},
		{"applied, holds the fenced set", drained, members, "0-1000-10", true},
		{"applied, lacks some of the fenced set", drained, members, "0-1000-11", false},
		{"applied, the fenced set unreadable", drained, members, "not a position", false},
		{"the candidate not among the members observed", drained, []failover.Member{other}, "0-1000-10", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := relayLogApplied(tt.d, tt.members, tt.fenced); got != tt.want {
				t.Errorf("relayLogApplied = %v, want %v", got, tt.want)
			}
		})
	}
}
