package topology

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

func TestMain(m *testing.M) { os.Exit(mariadbtest.Main(m)) }

// orchestration account the live tests connect with: created through
// EnsureUser, so its privilege list is proven sufficient on a real server.
var orch = Credentials{User: "orch", Password: "orch-Secret-7f3b'\\q"}

// liveCluster is one primary with two GTID replicas, shared by the tests of
// this package (each test leaves it healthy again).
type liveCluster struct {
	P, R1, R2 *mariadbtest.Server
	servers   map[string]*mariadbtest.Server
	inst      map[string]*Instance
}

var (
	clusterOnce sync.Once
	cluster     *liveCluster
)

func sharedCluster(t testing.TB) *liveCluster {
	t.Helper()
	clusterOnce.Do(func() { cluster = buildCluster(t) })
	if cluster == nil {
		t.Fatal("the shared MariaDB cluster failed to start in an earlier test")
	}
	return cluster
}

func target(s *mariadbtest.Server) Target {
	return Target{Name: s.Name, Namespace: "db", Pod: s.Name, Host: s.Host, Port: s.Port}
}

func connect(t testing.TB, s *mariadbtest.Server, creds Credentials) *Instance {
	t.Helper()
	i, err := Connect(target(s), ConnectOptions{Dialer: DirectDialer{Timeout: 2 * time.Second}, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// asMysqlctlLeavesIt gives s's accounts what mysqlctl's bootstrap gives them, without binary
// logging: the orchestration account, and root without its own way through read_only (its
// sessions pass only after enabling the orchestration role).
func asMysqlctlLeavesIt(ctx context.Context, t testing.TB, s *mariadbtest.Server) {
	t.Helper()
	setup := connect(t, s, rootCreds())
	defer func() { _ = setup.Close() }()
	setup.Guard = func(string) (time.Time, error) { return time.Time{}, nil }
	must(t, setup.EnsureUser(ctx, UserSpec{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, EnsureUserOptions{SkipBinlog: true}))
	if _, err := setup.StripReadOnlyAdmin(ctx, mariadbtest.RootUser, EnsureUserOptions{SkipBinlog: true}); err != nil {
		t.Fatal(err)
	}
}

func rootCreds() Credentials {
	return Credentials{User: mariadbtest.RootUser, Password: mariadbtest.RootPassword}
}

func replSource(s *mariadbtest.Server) SourceSpec {
	return SourceSpec{Host: s.Host, Port: s.Port, User: mariadbtest.ReplUser, Password: mariadbtest.ReplPassword, ConnectRetry: time.Second}
}

func buildCluster(t testing.TB) *liveCluster {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &liveCluster{
		P:  mariadbtest.StartShared(t, mariadbtest.Options{Name: "mariadb-0"}),
		R1: mariadbtest.StartShared(t, mariadbtest.Options{Name: "mariadb-1"}),
		R2: mariadbtest.StartShared(t, mariadbtest.Options{Name: "mariadb-2"}),
	}
	c.servers = map[string]*mariadbtest.Server{"mariadb-0": c.P, "mariadb-1": c.R1, "mariadb-2": c.R2}
	// The orchestration account is created on the primary with binary
	// logging on, so the replicas receive it through replication.
	root := connect(t, c.P, rootCreds())
	defer root.Close()
	must(t, root.EnsureUser(ctx, UserSpec{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, EnsureUserOptions{}))
	c.P.Exec(t, "INSERT INTO app.t (v) VALUES ('a'), ('b')")
	for _, r := range []*mariadbtest.Server{c.R1, c.R2} {
		ri := connect(t, r, rootCreds())
		must(t, ri.Repoint(ctx, replSource(c.P)))
		must(t, ri.Fence(ctx))
		_ = ri.Close()
		r.CatchUp(t, c.P)
	}
	c.inst = map[string]*Instance{}
	for name, s := range c.servers {
		i := connect(t, s, orch)
		c.inst[name] = i
	}
	return c
}

func (c *liveCluster) observe(t testing.TB, name string) Snapshot {
	t.Helper()
	s := c.inst[name].Observe(context.Background(), ObserveOptions{Timeout: 5 * time.Second})
	if !s.Complete() {
		t.Fatalf("observing %s: %+v", name, s.Err)
	}
	return s
}

func (c *liveCluster) classify(t testing.TB, name string) Classification {
	t.Helper()
	p := c.observe(t, "mariadb-0")
	return Classify(ClassifyInput{
		Instance: c.observe(t, name), ExpectedPrimary: "mariadb-0", Primary: &p,
		PrimaryAddresses: []SourceAddress{{Host: c.P.Host, Port: c.P.Port}},
	})
}

// healthy asserts, and restores where needed, the shared cluster's steady
// state so that tests stay independent.
func (c *liveCluster) healthy(t testing.TB) {
	t.Helper()
	for _, r := range []*mariadbtest.Server{c.R1, c.R2} {
		r.CatchUp(t, c.P)
		if got := c.classify(t, r.Name); got.Class != ClassReplicating {
			t.Fatalf("%s is %v after the test: %v", r.Name, got.Class, got.Evidence)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond (every 50 ms, for at most 30 s) for server-side
// state that changes asynchronously, such as an IO thread reconnecting. It
// bounds the wait only; no test asserts how long anything took.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened; last state: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(s Snapshot) string {
	r := "no replica status"
	if s.Replica != nil {
		r = fmt.Sprintf("IO=%s SQL=%v source=%s:%d id=%d ioerr=%d %q sqlerr=%d %q", s.Replica.IOThread, s.Replica.SQLRunning,
			s.Replica.SourceHost, s.Replica.SourcePort, s.Replica.SourceServerID, s.Replica.LastIOErrno, s.Replica.LastIOError,
			s.Replica.LastSQLErrno, s.Replica.LastSQLError)
	}
	return fmt.Sprintf("%s binlog=%s slave=%s io=%s semisync=%+v %s", s.Name, s.GTID.BinlogPos, s.GTID.SlavePos, s.GTID.IOPos, s.SemiSync, r)
}
