package topology

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// The tests in this file close the "MariaDB fence hole" on real mariadbd
// 10.11 servers: read_only does not bind an account holding READ_ONLY
// ADMIN, which ALL PRIVILEGES (root, as the image's entrypoint makes it)
// includes. They pin what a root account stripped of the privilege can
// and cannot do on a read-only server, that every action mysqlctl needs
// still works through the Instance (which enables ReadOnlyAdminRole on the
// one session that needs it), that the application accounts are bound by
// read_only, and what VerifyFence counts as a session that writes through.

// errNo runs one statement and returns the server's error number (0: it
// succeeded).
func errNo(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any,
) (uint16, error) {
	_, err := db.ExecContext(ctx, q, args...)
	if err == nil {
		return 0, nil
	}
	if n := sqlErrorNumber(err); n != 0 {
		return n, err
	}
	return 0, err
}

// expectErr runs the statements on one session and checks each error
// number (0: success).
func expectErr(t *testing.T, ctx context.Context, who string, conn *sql.Conn, cases []struct {
	q    string
	args []any
	want uint16
},
) {
	t.Helper()
	for _, c := range cases {
		got, err := errNo(ctx, conn, c.q, c.args...)
		if got != c.want || (c.want == 0 && err != nil) {
			t.Errorf("%s: %s: error %d (%v), want %d", who, c.q, got, err, c.want)
		}
	}
}

func showGrants(t *testing.T, ctx context.Context, db DB, user, host string) string {
	t.Helper()
	rows, err := queryRows(ctx, db, stmt("SHOW GRANTS FOR '"+user+"'@'"+host+"'"))
	must(t, err)
	var out []string
	for _, r := range rows {
		for _, v := range r {
			out = append(out, v)
		}
	}
	return strings.Join(out, "\n")
}

func sessionID(t *testing.T, ctx context.Context, conn *sql.Conn) uint64 {
	t.Helper()
	var id uint64
	must(t, conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
	return id
}

func pin(t *testing.T, ctx context.Context, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(ctx)
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ids(cs []ClientConnection) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// TestLiveReadOnlyAdminStrip bootstraps one read-only server the way
// bootstrap does (accounts and the strip of root without binary logging),
// then runs everything mysqlctl does on a read-only MariaDB as root after
// the strip, and checks that root and the application accounts can no
// longer write through read_only.
func TestLiveReadOnlyAdminStrip(t *testing.T) {
	ctx := context.Background()
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "strip-source"})
	srv := mariadbtest.Start(t, mariadbtest.Options{Name: "strip-server"})
	root := connect(t, srv, rootCreds())
	defer root.Close()

	// Every instance starts read-only (read_only = ON in my.cnf).
	must(t, root.Fence(ctx))
	before := root.Observe(ctx, ObserveOptions{}).GTID
	writer := UserSpec{User: "appw", Password: "appw-S3cret'\\x", Role: RoleAppWriter}
	reader := UserSpec{User: "appr", Password: "appr-S3cret", Role: RoleAppReader}
	for _, u := range []UserSpec{{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, writer, reader} {
		must(t, root.EnsureUser(ctx, u, EnsureUserOptions{SkipBinlog: true}))
	}

	// A root session opened before the strip keeps READ_ONLY ADMIN (MariaDB
	// computes global privileges at login), so the strip ends it.
	rootPool := srv.OpenDB(t, mariadbtest.RootUser, mariadbtest.RootPassword)
	defer rootPool.Close()
	stale := pin(t, ctx, rootPool)
	staleID := sessionID(t, ctx, stale)

	res, err := root.StripReadOnlyAdmin(ctx, "root", EnsureUserOptions{SkipBinlog: true})
	must(t, err)
	if fmt.Sprint(res.Accounts) != "[root@% root@localhost]" || !slices.Contains(ids(res.Killed), staleID) {
		t.Fatalf("strip: accounts %v, killed %+v (want the session %d)", res.Accounts, res.Killed, staleID)
	}
	if err := stale.PingContext(ctx); err == nil {
		t.Fatal("a root session opened before the strip survived it")
	}
	// Again, now from a root session that no longer holds the privilege
	// itself: idempotent through the role.
	res, err = root.StripReadOnlyAdmin(ctx, "root", EnsureUserOptions{SkipBinlog: true})
	must(t, err)
	if len(res.Accounts) != 2 {
		t.Fatalf("second strip: %+v", res)
	}
	after := root.Observe(ctx, ObserveOptions{}).GTID
	if !after.BinlogPos.Equal(before.BinlogPos) || len(after.BinlogState) != len(before.BinlogState) {
		t.Fatalf("accounts and strip left GTIDs behind: %s → %s", before.BinlogPos, after.BinlogPos)
	}

	for _, host := range []string{"%", "localhost"} {
		g := showGrants(t, ctx, root.DB(), "root", host)
		if strings.Contains(g, "READ_ONLY ADMIN") || strings.Contains(g, "ALL PRIVILEGES") ||
			!strings.Contains(g, "GRANT `"+ReadOnlyAdminRole+"` TO `root`@`"+host+"` WITH ADMIN OPTION") ||
			!strings.Contains(g, "SUPER") || !strings.Contains(g, "CONNECTION ADMIN") {
			t.Errorf("grants of root@%s after the strip:\n%s", host, g)
		}
	}
	// No account keeps the bypass; root and the orchestration account can
	// enable the role.
	accts, err := root.WriteThroughAccounts(ctx)
	must(t, err)
	var elevatable []string
	for _, a := range accts {
		if a.Blocking {
			t.Errorf("%s still writes through read_only: %s", a.Account, a.Reason)
			continue
		}
		elevatable = append(elevatable, a.Account.String())
	}
	if !slices.Contains(elevatable, "root@%") || !slices.Contains(elevatable, "root@localhost") || !slices.Contains(elevatable, orch.User+"@%") ||
		slices.Contains(elevatable, "appw@%") || slices.Contains(elevatable, "appr@%") {
		t.Errorf("accounts that may enable the role: %v", elevatable)
	}

	// What a plain root session (no SET ROLE) can do on the read-only
	// server. Writes, read_only itself, gtid_slave_pos, account statements
	// (even with sql_log_bin=0) and plugins are refused; replication
	// control, semi-sync, KILL and temporary tables are not.
	app := srv.OpenDB(t, mariadbtest.AppUser, mariadbtest.AppPassword)
	defer app.Close()
	appConn := pin(t, ctx, app)
	appID := sessionID(t, ctx, appConn)
	plain := pin(t, ctx, rootPool)
	type c = struct {
		q    string
		args []any
		want uint16
	}
	expectErr(t, ctx, "root after the strip", plain, []c{
		{"INSERT INTO app.t (v) VALUES ('root after the strip')", nil, erOptionPreventsStmt},
		{"UPDATE app.t SET v = 'x'", nil, erOptionPreventsStmt},
		{"CREATE TABLE app.u (a INT)", nil, erOptionPreventsStmt},
		{"SET GLOBAL read_only = OFF", nil, erSpecificAccessDenied},
		{"SET GLOBAL read_only = ON", nil, erSpecificAccessDenied},
		{"SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos", nil, erOptionPreventsStmt},
		{"SET SESSION sql_log_bin = 0", nil, 0},
		{"CREATE USER IF NOT EXISTS 'x'@'%' IDENTIFIED BY 'x-S3cret'", nil, erOptionPreventsStmt},
		{"CREATE USER IF NOT EXISTS 'appr'@'%' IDENTIFIED BY 'appr-S3cret'", nil, erOptionPreventsStmt},
		{"GRANT SELECT ON app.* TO 'appr'@'%'", nil, erOptionPreventsStmt},
		{"REVOKE READ_ONLY ADMIN ON *.* FROM 'appr'@'%'", nil, erAccessDenied},
		{"SET SESSION sql_log_bin = 1", nil, 0},
		{"INSTALL SONAME 'auth_ed25519'", nil, erOptionPreventsStmt},
		{"CREATE TEMPORARY TABLE app.tmp (a INT)", nil, 0},
		{"INSERT INTO app.tmp VALUES (1)", nil, 0},
		{"STOP SLAVE", nil, 0},
		{"CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
			[]any{src.Host, src.Port, mariadbtest.ReplUser, mariadbtest.ReplPassword}, 0},
		{"START SLAVE", nil, 0},
		{"STOP SLAVE IO_THREAD", nil, 0},
		{"START SLAVE IO_THREAD", nil, 0},
		{"STOP SLAVE", nil, 0},
		{"RESET SLAVE ALL", nil, 0},
		{"SET GLOBAL rpl_semi_sync_slave_enabled = ON", nil, 0},
		{"SET GLOBAL rpl_semi_sync_slave_enabled = OFF", nil, 0},
		{"SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'", nil, 0},
		{"SET GLOBAL rpl_semi_sync_master_enabled = ON", nil, 0},
		{"SET GLOBAL rpl_semi_sync_master_enabled = OFF", nil, 0},
		{"FLUSH BINARY LOGS", nil, 0},
		{fmt.Sprintf("KILL CONNECTION %d", appID), nil, 0},
		// With the role enabled the same session may change read_only; after
		// SET ROLE NONE it may not.
		{"SET ROLE " + ReadOnlyAdminRole, nil, 0},
		{"SET GLOBAL read_only = ON", nil, 0},
		{"SET ROLE NONE", nil, 0},
		{"SET GLOBAL read_only = ON", nil, erSpecificAccessDenied},
		{"INSERT INTO app.t (v) VALUES ('root after SET ROLE NONE')", nil, erOptionPreventsStmt},
	})
	var wait string
	must(t, plain.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT('', 1)").Scan(&wait))
	if err := appConn.PingContext(ctx); err == nil {
		t.Error("KILL from root after the strip left the application session alive")
	}

	// Everything mysqlctl does on a read-only server, through a new root
	// Instance (the actions enable the role where needed).
	r := connect(t, srv, rootCreds())
	defer r.Close()
	must(t, r.Fence(ctx))
	// Root's sessions killed by the strip count until their threads are
	// gone; after that the fence verifies with root sessions connected.
	var fs FenceState
	eventually(t, "the fence of the stripped server to verify", func() (bool, string) {
		fs, err = r.VerifyFence(ctx)
		must(t, err)
		return fs.Verified && len(fs.WriteThrough) == 0, fmt.Sprintf("%+v", fs)
	})
	if !slices.Contains(ids(fs.MayElevate), sessionID(t, ctx, plain)) {
		t.Errorf("the plain root session is not listed as one that may enable the role: %+v", fs.MayElevate)
	}
	if _, err := r.KillClientConnections(ctx); err != nil {
		t.Fatal(err)
	}
	spec := replSource(src)
	spec.ResumeFromBinlog = true // SET GLOBAL gtid_slave_pos: needs the role
	must(t, r.Repoint(ctx, spec))
	src.Exec(t, "INSERT INTO app.t (v) VALUES ('from the source')")
	srv.CatchUp(t, src)
	must(t, r.StopIOThread(ctx))
	must(t, r.StartIOThread(ctx))
	must(t, r.WaitForGTID(ctx, src.QueryString(t, "SELECT @@global.gtid_binlog_pos"), 10*time.Second))
	must(t, r.EnableSemiSyncReplica(ctx))
	must(t, r.DisableSemiSyncReplica(ctx))
	must(t, r.EnableSemiSyncSource(ctx, SemiSyncSourceSpec{Timeout: time.Second}))
	must(t, r.DisableSemiSyncSource(ctx))
	reader.Password = "appr-S3cret-2"
	must(t, r.EnsureUser(ctx, reader, EnsureUserOptions{SkipBinlog: true}))
	must(t, r.EnsureUser(ctx, UserSpec{User: mariadbtest.ReplUser, Password: mariadbtest.ReplPassword, Role: RoleReplication}, EnsureUserOptions{SkipBinlog: true}))
	if _, err := r.StripReadOnlyAdmin(ctx, "root", EnsureUserOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := r.Observe(ctx, ObserveOptions{}); !s.Complete() || !s.ReadOnly || s.Replica == nil || !s.Replica.Healthy() {
		t.Fatalf("replica after the actions: %s", describe(s))
	}
	must(t, r.StopReplica(ctx))
	must(t, r.ResetReplication(ctx))
	must(t, r.MakeWritable(ctx))

	// Writable: root and the writer write; the writer has no global or
	// system-schema power; the reader only reads.
	rootNow := srv.OpenDB(t, mariadbtest.RootUser, mariadbtest.RootPassword)
	defer rootNow.Close()
	if _, err := rootNow.ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('root, writable')"); err != nil {
		t.Fatal(err)
	}
	w := srv.OpenDB(t, writer.User, string(writer.Password))
	defer w.Close()
	wHeld := pin(t, ctx, w)
	expectErr(t, ctx, "writer, writable", wHeld, []c{
		{"CREATE DATABASE appdb", nil, 0},
		{"CREATE TABLE appdb.t (id INT PRIMARY KEY, v VARCHAR(20))", nil, 0},
		{"INSERT INTO appdb.t VALUES (1, 'a')", nil, 0},
		{"INSERT INTO app.t (v) VALUES ('writer')", nil, 0},
		{"SELECT COUNT(*) FROM mysql.global_priv", nil, 1142},
		{"UPDATE mysql.global_priv SET Priv = '{}' WHERE User = 'nobody'", nil, 1142},
		{"CREATE TABLE mysql.evil (a INT)", nil, 1142},
		{"DROP DATABASE mysql", nil, erDBAccessDenied},
		{"SET GLOBAL read_only = ON", nil, erSpecificAccessDenied},
		{"SET ROLE " + ReadOnlyAdminRole, nil, erInvalidRole},
	})
	rd := srv.OpenDB(t, reader.User, string(reader.Password))
	defer rd.Close()
	expectErr(t, ctx, "reader", pin(t, ctx, rd), []c{
		{"SELECT COUNT(*) FROM appdb.t", nil, 0},
		{"INSERT INTO appdb.t VALUES (2, 'b')", nil, 1142},
		{"CREATE DATABASE readerdb", nil, erDBAccessDenied},
		{"SELECT COUNT(*) FROM mysql.global_priv", nil, 1142},
	})

	// Fenced again: neither root nor the writer writes, on a session opened
	// before the fence or on new ones (reconnecting changes nothing).
	must(t, r.Fence(ctx))
	for attempt := range 2 {
		fresh := srv.OpenDB(t, mariadbtest.RootUser, mariadbtest.RootPassword)
		if n, _ := errNo(ctx, fresh, "INSERT INTO app.t (v) VALUES ('root, fenced')"); n != erOptionPreventsStmt {
			t.Errorf("root write on a read-only server (connection %d): error %d, want %d", attempt, n, erOptionPreventsStmt)
		}
		_ = fresh.Close()
		wNew := srv.OpenDB(t, writer.User, string(writer.Password))
		if n, _ := errNo(ctx, wNew, "INSERT INTO appdb.t VALUES (3, 'c')"); n != erOptionPreventsStmt {
			t.Errorf("writer on a new connection %d: error %d", attempt, n)
		}
		_ = wNew.Close()
	}
	expectErr(t, ctx, "writer, held across the fence", wHeld, []c{
		{"INSERT INTO appdb.t VALUES (4, 'd')", nil, erOptionPreventsStmt},
		{"CREATE TABLE appdb.u (a INT)", nil, erOptionPreventsStmt},
		{"DROP TABLE appdb.t", nil, erOptionPreventsStmt},
	})
	fs, err = r.VerifyFence(ctx)
	must(t, err)
	if !fs.Verified || len(fs.WriteThrough) != 0 || len(fs.ClientConnections) == 0 {
		t.Fatalf("fence with the writer's session open: %+v", fs)
	}

	// The orchestration account fences and verifies through the role too,
	// and cannot create application accounts (it lacks their privileges
	// WITH GRANT OPTION); its error carries no password.
	o := connect(t, srv, orch)
	defer o.Close()
	must(t, o.MakeWritable(ctx))
	must(t, o.Fence(ctx))
	if fs, err := o.VerifyFence(ctx); err != nil || !fs.Verified {
		t.Fatalf("verify as the orchestration account: %+v %v", fs, err)
	}
	err = o.EnsureUser(ctx, writer, EnsureUserOptions{SkipBinlog: true})
	if err == nil {
		t.Fatal("the orchestration account granted application privileges it does not hold")
	}
	assertNoSecret(t, "EnsureUser error", err.Error(), string(writer.Password), string(orch.Password))
}

// TestLiveFenceWriteThrough: VerifyFence is not verified while a session
// of an account that writes through read_only is connected (READ_ONLY ADMIN
// directly, by default role, or through PUBLIC), and is verified once that
// session is killed. A session that could only enable a role with SET ROLE
// is listed but not counted.
func TestLiveFenceWriteThrough(t *testing.T) {
	ctx := context.Background()
	srv := mariadbtest.Start(t, mariadbtest.Options{Name: "write-through"})
	root := connect(t, srv, rootCreds()) // the template's root still holds READ_ONLY ADMIN
	defer root.Close()
	must(t, root.EnsureUser(ctx, UserSpec{User: orch.User, Password: orch.Password, Role: RoleOrchestration}, EnsureUserOptions{SkipBinlog: true}))
	must(t, root.EnsureUser(ctx, UserSpec{User: "appw", Password: "appw-pw", Role: RoleAppWriter}, EnsureUserOptions{SkipBinlog: true}))
	admin := func(q string) {
		t.Helper()
		if _, err := root.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range []string{
		"CREATE USER 'roadm'@'%' IDENTIFIED BY 'roadm-pw'",
		"GRANT READ_ONLY ADMIN ON *.* TO 'roadm'@'%'",
		"GRANT INSERT ON app.* TO 'roadm'@'%'",
		"CREATE ROLE rw_role",
		"GRANT READ_ONLY ADMIN ON *.* TO rw_role",
		"CREATE ROLE outer_role",
		"GRANT rw_role TO outer_role",
		"CREATE USER 'defrole'@'%' IDENTIFIED BY 'defrole-pw'",
		"GRANT INSERT ON app.* TO 'defrole'@'%'",
		"GRANT outer_role TO 'defrole'@'%'",
		"SET DEFAULT ROLE outer_role FOR 'defrole'@'%'",
		"CREATE USER 'setrole'@'%' IDENTIFIED BY 'setrole-pw'",
		"GRANT INSERT ON app.* TO 'setrole'@'%'",
		"GRANT rw_role TO 'setrole'@'%'",
	} {
		admin(q)
	}
	f := connect(t, srv, orch)
	defer f.Close()
	must(t, f.Fence(ctx))

	// killAll ends every client session except the verifier's own, and the
	// fence then verifies.
	killAll := func(what string) {
		t.Helper()
		if _, err := f.KillClientConnections(ctx); err != nil {
			t.Fatal(err)
		}
		// A killed session stays in the process list (Killed) until its
		// thread ends, and counts until then.
		eventually(t, what+": the fence to verify after the kill", func() (bool, string) {
			fs, err := f.VerifyFence(ctx)
			must(t, err)
			return fs.Verified && len(fs.WriteThrough) == 0, strings.Join(fs.Evidence, "; ")
		})
	}
	killAll("the template's root sessions")

	// writesThrough opens a session of user, proves it writes through
	// read_only, and expects VerifyFence to name it with reason.
	writesThrough := func(user, password, reason string) {
		t.Helper()
		db := srv.OpenDB(t, user, password)
		defer db.Close()
		conn := pin(t, ctx, db)
		id := sessionID(t, ctx, conn)
		if _, err := conn.ExecContext(ctx, "INSERT INTO app.t (v) VALUES (?)", "through the fence as "+user); err != nil {
			t.Fatalf("%s did not write through read_only: %v", user, err)
		}
		fs, err := f.VerifyFence(ctx)
		must(t, err)
		var found *ClientConnection
		for k := range fs.WriteThrough {
			if fs.WriteThrough[k].ID == id {
				found = &fs.WriteThrough[k]
			}
		}
		if fs.Verified || !fs.ReadOnly || found == nil || found.User != user || !strings.Contains(found.Reason, reason) {
			t.Fatalf("%s's session %d: %+v", user, id, fs)
		}
		if !containsLine(fs.Evidence, "sessions can write through read_only") {
			t.Errorf("evidence %q", fs.Evidence)
		}
		killAll(user)
		if err := conn.PingContext(ctx); err == nil {
			t.Fatalf("%s's session survived the kill", user)
		}
	}
	writesThrough("roadm", "roadm-pw", "holds READ_ONLY ADMIN (roadm@%)")
	writesThrough("defrole", "defrole-pw", "default role outer_role carries READ_ONLY ADMIN (defrole@%)")

	// A role that is not the default must be enabled first: the session is
	// refused until it runs SET ROLE, so it is listed without counting.
	sr := srv.OpenDB(t, "setrole", "setrole-pw")
	defer sr.Close()
	srConn := pin(t, ctx, sr)
	srID := sessionID(t, ctx, srConn)
	if n, _ := errNo(ctx, srConn, "INSERT INTO app.t (v) VALUES ('before SET ROLE')"); n != erOptionPreventsStmt {
		t.Fatalf("a session with a non-default role wrote through read_only: %d", n)
	}
	fs, err := f.VerifyFence(ctx)
	must(t, err)
	if !fs.Verified || !slices.Contains(ids(fs.MayElevate), srID) || slices.Contains(ids(fs.WriteThrough), srID) {
		t.Fatalf("non-default role: %+v", fs)
	}
	killAll("setrole")

	// PUBLIC holding READ_ONLY ADMIN (accepted by 10.11) lets every
	// account through, here the template's application account.
	admin("GRANT READ_ONLY ADMIN ON *.* TO PUBLIC")
	writesThrough(mariadbtest.AppUser, mariadbtest.AppPassword, "PUBLIC carries READ_ONLY ADMIN")
	admin("REVOKE READ_ONLY ADMIN ON *.* FROM PUBLIC")
	killAll("root after PUBLIC")

	// What no grant table shows: a session opened before a REVOKE keeps the
	// privilege. VerifyFence cannot see it, which is why a fence kills every
	// client session before it verifies, and StripReadOnlyAdmin ends the
	// stripped user's sessions.
	ro := srv.OpenDB(t, "roadm", "roadm-pw")
	defer ro.Close()
	roConn := pin(t, ctx, ro)
	roID := sessionID(t, ctx, roConn)
	admin("REVOKE READ_ONLY ADMIN ON *.* FROM 'roadm'@'%'")
	if _, err := roConn.ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('stale privilege')"); err != nil {
		t.Fatalf("MariaDB no longer keeps a revoked global privilege for the session's lifetime: %v", err)
	}
	fs, err = f.VerifyFence(ctx)
	must(t, err)
	if slices.Contains(ids(fs.WriteThrough), roID) || !slices.Contains(ids(fs.ClientConnections), roID) {
		t.Fatalf("stale session: %+v", fs)
	}
	killAll("the stale session")
	if err := roConn.PingContext(ctx); err == nil {
		t.Fatal("the stale session survived the kill")
	}
	ro2 := srv.OpenDB(t, "roadm", "roadm-pw")
	defer ro2.Close()
	if n, _ := errNo(ctx, ro2, "INSERT INTO app.t (v) VALUES ('after reconnecting')"); n != erOptionPreventsStmt {
		t.Fatalf("roadm after reconnecting: %d", n)
	}

	// The application writer made by EnsureUser never writes through.
	w := srv.OpenDB(t, "appw", "appw-pw")
	defer w.Close()
	if n, _ := errNo(ctx, w, "INSERT INTO app.t (v) VALUES ('appw')"); n != erOptionPreventsStmt {
		t.Fatalf("appw on a fenced server: %d", n)
	}
	if fs, err := f.VerifyFence(ctx); err != nil || !fs.Verified {
		t.Fatalf("with the application writer connected: %+v %v", fs, err)
	}
}
