package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// starvedAdminPort is the second port the starved primary serves, as mysqlctl configures it
// (extra_port).
const starvedAdminPort = 33062

// TestLiveStarvedPrimaryReachableAndRepairable is the attack on a primary starved of
// acknowledgements (semi-sync on, no replica, commits waiting, and their sessions filling
// max_connections). Each guarantee comes with its control on the same server, so that the test
// cannot pass because the fault failed to happen:
//   - listing the binary logs blocks there (control), and Observe, which mysqlctl's liveness
//     check and every converge run, still completes;
//   - a replica pointed at the server's port is locked out with "Too many connections"
//     (control), and one pointed at the admin port (extra_port) gets in, acknowledges, and every
//     waiting commit completes.
func TestLiveStarvedPrimaryReachableAndRepairable(t *testing.T) {
	p := mariadbtest.Start(t, mariadbtest.Options{Name: "starved-p", Args: []string{
		"--rpl-semi-sync-master-enabled=ON", "--rpl-semi-sync-master-wait-no-slave=ON",
		"--rpl-semi-sync-master-timeout=600000", "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
		"--max-connections=10", "--extra-port=" + strconv.Itoa(starvedAdminPort), "--extra-max-connections=8",
	}})
	r := mariadbtest.Start(t, mariadbtest.Options{Name: "starved-r", Args: []string{"--rpl-semi-sync-slave-enabled=ON", "--read-only=ON"}})
	connectAdmin := func() *Instance {
		in, err := Connect(Target{Name: p.Name, Host: p.Host, Port: starvedAdminPort}, ConnectOptions{
			Dialer: DirectDialer{Timeout: 3 * time.Second}, Credentials: Credentials{User: mariadbtest.RootUser, Password: mariadbtest.RootPassword},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Close() })
		return in
	}
	admin := connectAdmin()

	// Writers fill every connection slot of the server's port (max_connections, at its minimum of 10, and the one
	// slot kept for an administrator) and wait for an acknowledgement.
	const writers = 12
	wdb := p.OpenDB(t, mariadbtest.RootUser, mariadbtest.RootPassword)
	wdb.SetMaxOpenConns(writers)
	t.Cleanup(func() { _ = wdb.Close() })
	wctx, cancelWriters := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelWriters()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked, refused := 0, 0
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := wdb.ExecContext(wctx, "INSERT INTO "+mariadbtest.AppTable+" (v) VALUES (?)", fmt.Sprint("w", i))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				acked++
			} else if strings.Contains(err.Error(), "1040") {
				refused++
			}
		}()
	}
	t.Cleanup(func() {
		// Whatever happened, release the writers before the servers stop.
		_, _ = admin.DB().ExecContext(context.Background(), "SET GLOBAL rpl_semi_sync_master_enabled = OFF")
		cancelWriters()
		wg.Wait()
	})
	waitFor(t, 30*time.Second, "commits waiting for an acknowledgement", func() (bool, string) {
		vs, err := queryVariables(context.Background(), admin.DB(), stmt("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'"))
		v := vs["Rpl_semi_sync_master_wait_sessions"]
		return err == nil && v != "" && v != "0", v
	})
	waitFor(t, 30*time.Second, "the server's port refusing root", func() (bool, string) {
		db := p.OpenDB(t, mariadbtest.RootUser, mariadbtest.RootPassword)
		defer func() { _ = db.Close() }()
		err := db.Ping()
		mu.Lock()
		a, rf := acked, refused
		mu.Unlock()
		n, _ := queryRows(context.Background(), admin.DB(), stmt("SELECT ID, USER, COMMAND, STATE FROM information_schema.PROCESSLIST"))
		return err != nil && strings.Contains(err.Error(), "1040"), fmt.Sprint(err, " acked ", a, " refused ", rf, " ", n)
	})

	// Control: listing the binary logs waits behind the starved commits.
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := admin.DB().ExecContext(cctx, "SHOW BINARY LOGS")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("control: SHOW BINARY LOGS on a starved primary returned %v, want it to wait (the fault did not happen)", err)
	}
	admin = connectAdmin() // the control's session stays blocked on the server

	s := admin.Observe(context.Background(), ObserveOptions{Timeout: 5 * time.Second})
	if !s.Complete() {
		t.Fatalf("Observe of a starved primary through its admin port: %v", s.Err)
	}
	if !s.SemiSync.Starved() || s.GTID.PurgedKnown || s.ReadOnly {
		t.Fatalf("Observe: starved %v purged known %v read_only %v (%+v)", s.SemiSync.Starved(), s.GTID.PurgedKnown, s.ReadOnly, s.SemiSync)
	}
	if !strings.Contains(strings.Join(s.Warnings, "; "), "purged position unknown") {
		t.Errorf("warnings %q do not say the purged position was not read", s.Warnings)
	}

	// The supervisor's sentinel session logs in through the admin port and answers its pulses
	// on time, every slot of the server's port taken (control: there it is refused, 1040).
	main, err := Connect(Target{Name: p.Name, Host: p.Host, Port: p.Port}, ConnectOptions{
		Dialer: DirectDialer{Timeout: 3 * time.Second}, Credentials: Credentials{User: mariadbtest.RootUser, Password: mariadbtest.RootPassword},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close()
	if ss, err := main.OpenSentinel(context.Background()); err == nil || !strings.Contains(err.Error(), "1040") {
		if ss != nil {
			ss.Close()
		}
		t.Fatalf("control: a sentinel through the full server port: %v, want Too many connections (1040)", err)
	}
	sentinel := connectAdmin()
	ss, err := sentinel.OpenSentinel(context.Background())
	if err != nil {
		t.Fatalf("a sentinel through the admin port of a starved primary: %v", err)
	}
	var late atomic.Int32
	for range 3 {
		if err := ss.Pulse(context.Background(), 100*time.Millisecond, 200*time.Millisecond, func() { late.Add(1) }); err != nil {
			t.Fatalf("a sentinel pulse through the admin port of a starved primary: %v", err)
		}
	}
	ss.Close()
	if n := late.Load(); n != 0 {
		t.Errorf("%d of 3 pulses answered late on a starved primary's admin port: a late answer starts a check", n)
	}

	// Control: through the server's port, replication is locked out.
	point := func(port int) {
		r.Exec(t, "STOP SLAVE", fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			p.Host, port, mariadbtest.ReplUser, mariadbtest.ReplPassword), "START SLAVE")
	}
	point(p.Port)
	waitFor(t, 30*time.Second, "the replica's IO thread refused by the server's port", func() (bool, string) {
		row := ioError(t, r)
		return strings.Contains(row, "1040") || strings.Contains(row, "Too many connections"), row
	})

	// Through the admin port the replica gets in, acknowledges, and the waiting commits finish.
	point(starvedAdminPort)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("writers still waiting 60 s after the replica joined through the admin port; replica: %s", ioError(t, r))
	}
	mu.Lock()
	defer mu.Unlock()
	if acked == 0 || acked+refused != writers {
		t.Fatalf("writers: %d acknowledged, %d refused (1040), of %d", acked, refused, writers)
	}
	t.Logf("%d commits waiting on the starved primary completed once the replica joined through the admin port (%d writers refused by the full server port)", acked, refused)
}

func ioError(t *testing.T, r *mariadbtest.Server) string {
	t.Helper()
	m, err := queryRows(context.Background(), r.DB(t), stmt("SHOW SLAVE STATUS"))
	if err != nil || len(m) == 0 {
		return fmt.Sprint("no replica status ", err)
	}
	return m[0]["Slave_IO_Running"] + " " + m[0]["Last_IO_Errno"] + " " + m[0]["Last_IO_Error"]
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last: %s)", what, d, last)
}
