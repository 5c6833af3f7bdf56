package mariadbtest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestStartAndReplicate proves the helper's contract: two servers on their own
// loopback addresses, the test accounts present, no GTID history at start, and
// GTID replication working with the repl account.
func TestStartAndReplicate(t *testing.T) {
	primary := Start(t, Options{Name: "primary"})
	replica := Start(t, Options{Name: "replica"})
	if primary.Host == replica.Host {
		t.Fatalf("both servers got address %s", primary.Host)
	}
	if !strings.HasPrefix(primary.Host, "127.") {
		t.Fatalf("server bound to %s, want a loopback address", primary.Host)
	}
	if got := primary.QueryString(t, "SELECT @@global.gtid_binlog_pos"); got != "" {
		t.Fatalf("fresh server has GTID history %q", got)
	}
	if got := primary.QueryString(t, "SELECT @@global.server_id"); got != itoa(primary.ServerID) {
		t.Fatalf("server_id = %s, want %d", got, primary.ServerID)
	}
	primary.Exec(t, "INSERT INTO app.t (v) VALUES ('one')")
	replica.ReplicateFrom(t, primary)
	if got := replica.QueryString(t, "SELECT v FROM app.t"); got != "one" {
		t.Fatalf("replicated row = %q", got)
	}
	if got, want := replica.QueryString(t, "SELECT @@global.gtid_slave_pos"), primary.QueryString(t, "SELECT @@global.gtid_binlog_pos"); got != want {
		t.Fatalf("replica gtid_slave_pos %q, primary gtid_binlog_pos %q", got, want)
	}
}

// TestFreezeAndKill checks that a frozen server is thawed by the cleanup and a
// killed one is reaped, so neither leaks a process.
func TestFreezeAndKill(t *testing.T) {
	s := Start(t, Options{})
	s.Freeze(t)
	s.Thaw(t)
	if got := s.QueryString(t, "SELECT 1"); got != "1" {
		t.Fatalf("thawed server answered %q", got)
	}
	s.Freeze(t)
	k := Start(t, Options{})
	k.Kill(t)
	select {
	case <-k.done:
	default:
		t.Fatal("killed server was not waited for")
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
