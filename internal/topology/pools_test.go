package topology

import (
	"context"
	"database/sql"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// countingDialer counts the TCP connections made.
type countingDialer struct {
	Dialer
	n *atomic.Int64
}

func (d countingDialer) DialContext(ctx context.Context, t Target) (net.Conn, error) {
	d.n.Add(1)
	return d.Dialer.DialContext(ctx, t)
}

func connectionID(t *testing.T, in *Instance) string {
	t.Helper()
	var id string
	if err := in.DB().(*sql.DB).QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestLivePools: a check through the pools reuses one logged-in connection, never reaches a
// server its pool was not opened for (new address, new pod UID, new password), and never hides
// a server's death behind a connection that was open before it.
func TestLivePools(t *testing.T) {
	c := sharedCluster(t)
	dials := &atomic.Int64{}
	now := time.Now()
	pools := &Pools{Options: ConnectOptions{Dialer: countingDialer{DirectDialer{Timeout: 2 * time.Second}, dials}}, Now: func() time.Time { return now }}
	defer pools.Close()
	ctx := context.Background()
	observe := func(tg Target, uid string, creds Credentials) (Snapshot, *Instance) {
		t.Helper()
		in, err := pools.Instance(tg, uid, creds)
		if err != nil {
			t.Fatal(err)
		}
		return in.Observe(ctx, ObserveOptions{Timeout: 2 * time.Second}), in
	}

	// Ten checks, one connection.
	first := ""
	for k := range 10 {
		s, in := observe(target(c.P), "uid-1", orch)
		if !s.Complete() {
			t.Fatalf("check %d: %v", k, s.Err)
		}
		if err := in.Close(); err != nil {
			t.Fatal(err) // a pooled Instance's Close leaves the pool open
		}
		if id := connectionID(t, in); first == "" {
			first = id
		} else if id != first {
			t.Fatalf("check %d ran on connection %s, the first on %s: not reused", k, id, first)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("10 checks dialed %d times, want 1", n)
	}

	// The same pod name at another address (a pod that returned with a new IP) is the other
	// server, through a new pool; the old pool is closed.
	_, old := observe(target(c.P), "uid-1", orch)
	moved := target(c.R1)
	moved.Name, moved.Pod = c.P.Name, c.P.Name
	s, _ := observe(moved, "uid-1", orch)
	want := c.R1.QueryString(t, "SELECT @@server_id")
	if !s.Complete() || strconv.FormatUint(uint64(s.State.ServerID), 10) != want {
		t.Fatalf("after the address changed the check reached server_id %d (%v), want %s", s.State.ServerID, s.Err, want)
	}
	if err := old.DB().(*sql.DB).PingContext(ctx); err == nil {
		t.Fatal("the pool of the old address is still open")
	}
	if pools.Len() != 1 {
		t.Fatalf("%d pools open, want 1", pools.Len())
	}

	// A new pod UID or a new password opens a new pool too.
	before := dials.Load()
	observe(moved, "uid-2", orch)
	if dials.Load() == before {
		t.Fatal("a new pod UID reused the previous incarnation's connection")
	}
	before = dials.Load()
	if s, _ := observe(moved, "uid-2", Credentials{User: orch.User, Password: "wrong"}); s.Reachable || s.Err == nil || s.Err.Kind != ErrorAuth {
		t.Fatalf("a changed password was not tried afresh: reachable %v, err %v", s.Reachable, s.Err)
	}
	if dials.Load() == before {
		t.Fatal("a new password reused a connection logged in with the old one")
	}

	// Unused pools are closed.
	observe(target(c.R2), "uid-3", orch)
	now = now.Add(3 * time.Minute)
	observe(target(c.R2), "uid-3", orch)
	if pools.Len() != 1 {
		t.Fatalf("%d pools open after the others stayed unused for 3 minutes, want 1", pools.Len())
	}

	if err := pools.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Instance(target(c.P), "uid-1", orch); err == nil {
		t.Fatal("closed pools opened a pool")
	}
}

// TestLivePoolsSeeDeath: a server that dies or hangs after its pool logged in is seen dead by
// the next check, not answered for by a connection opened before.
func TestLivePoolsSeeDeath(t *testing.T) {
	for _, fault := range []string{"kill", "freeze"} {
		t.Run(fault, func(t *testing.T) {
			s := mariadbtest.Start(t, mariadbtest.Options{Name: "pooled-" + fault})
			pools := &Pools{Options: ConnectOptions{Dialer: DirectDialer{Timeout: time.Second}}}
			defer pools.Close()
			in, err := pools.Instance(target(s), "uid", rootCreds())
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if snap := in.Observe(ctx, ObserveOptions{Timeout: time.Second}); !snap.Complete() {
				t.Fatal(snap.Err)
			}
			want := ErrorRefused
			if fault == "kill" {
				s.Kill(t)
			} else {
				s.Freeze(t)
				defer s.Thaw(t)
				want = ErrorTimeout
			}
			in, err = pools.Instance(target(s), "uid", rootCreds())
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			began := time.Now()
			snap := in.Observe(cctx, ObserveOptions{Timeout: time.Second})
			if snap.Complete() || snap.Err == nil {
				t.Fatalf("the %s server answered a check through its pool", fault)
			}
			if snap.Err.Kind != want {
				t.Fatalf("check of a %s server: kind %s (%v), want %s", fault, snap.Err.Kind, snap.Err, want)
			}
			if d := time.Since(began); d > 3*time.Second {
				t.Fatalf("the check of a %s server took %s with a 1s timeout", fault, d)
			}
		})
	}
}
