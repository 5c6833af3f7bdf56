package physical_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/physical"
	"github.com/mysqlctl/mysqlctl/internal/backup/stream"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

func TestMain(m *testing.M) { os.Exit(mariadbtest.Main(m)) }

// backupUser is an account with only the privileges DESIGN.md names for a backup.
const (
	backupUser     = "mysqlctl_backup"
	backupPassword = "backup-test-secret"
)

func tools(t testing.TB) {
	t.Helper()
	for _, bin := range []string{physical.MariaDB.Backup, physical.MariaDB.Extract} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found (install the Debian package mariadb-backup): %v", bin, err)
		}
	}
}

func store(t testing.TB) (*testenv.S3, *objectstore.Store) {
	t.Helper()
	s := testenv.StartS3T(t, testenv.S3Options{})
	st, err := objectstore.New(objectstore.Config{Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket, Prefix: "p/", PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, PartSize: 5 << 20, PartTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

// source is a server with rows, and an account with the backup privileges only.
func source(t *testing.T, rows int) *mariadbtest.Server {
	t.Helper()
	src := mariadbtest.Start(t, mariadbtest.Options{})
	src.Exec(t,
		"CREATE USER '"+backupUser+"'@'%' IDENTIFIED BY '"+backupPassword+"'",
		"GRANT RELOAD, PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO '"+backupUser+"'@'%'",
		"CREATE TABLE app.rows (id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=InnoDB",
		fmt.Sprintf("INSERT INTO app.rows SELECT seq, REPEAT(MD5(seq), 6) FROM app.seq_1_to_%d", rows),
	)
	return src
}

func takeOptions(src *mariadbtest.Server, st *objectstore.Store, t testing.TB) physical.TakeOptions {
	return physical.TakeOptions{
		Tool: physical.MariaDB, Host: src.Host, Port: src.Port, User: backupUser,
		DataDir: src.DataDir, WorkDir: t.TempDir(),
		Env:   append(os.Environ(), "MYSQL_PWD="+backupPassword),
		Store: st, Key: "b1/" + physical.ObjectName,
	}
}

// TestBackupAndRestore takes a backup of a running server with writes going on, restores it into
// an empty directory, starts a server on it and checks: every row committed before the backup's
// position is there, CHECKSUM TABLE equals the source's at that position, and the GTID position
// the backup reports is the one the restored data records. The password is never in the tool's
// arguments.
func TestBackupAndRestore(t *testing.T) {
	tools(t)
	src := source(t, 20000)
	_, st := store(t)
	// Writes go on while the backup runs: the copy is consistent at the position it reports.
	ctx, stopWrites := context.WithCancel(t.Context())
	written := make(chan int, 1)
	go func() {
		db := src.DB(t)
		n := 0
		for ctx.Err() == nil {
			if _, err := db.ExecContext(ctx, "INSERT INTO app.t (v) VALUES ('during')"); err == nil {
				n++
			}
		}
		written <- n
	}()
	var raw stream.Counter
	var log bytes.Buffer
	o := takeOptions(src, st, t)
	o.Raw, o.Log = &raw, &log
	taken, err := physical.Take(t.Context(), o)
	stopWrites()
	n := <-written
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	t.Logf("backup: %d bytes of stream stored as %d, at %s %s:%d; %d writes during it", taken.RawBytes, taken.Object.Size, taken.GTIDPosition, taken.BinlogFile, taken.BinlogPos, n)
	if want := src.QueryString(t, "SELECT @@version"); taken.ServerVersion != want {
		t.Errorf("the tool reported server version %q, the server says %q", taken.ServerVersion, want)
	}
	if taken.GTIDPosition == "" || taken.BinlogFile == "" || taken.RawBytes != raw.Bytes() || taken.Object.Size <= 0 || taken.Object.Size >= taken.RawBytes {
		t.Errorf("taken = %+v (counted %d): want a GTID position, a binlog position and a compressed object", taken, raw.Bytes())
	}
	if strings.Contains(log.String(), backupPassword) {
		t.Errorf("the tool's messages hold the password")
	}
	// The source's checksum at the backup's position: a replica stopped there.
	want := checksumAt(t, src, taken.GTIDPosition)

	dataDir := t.TempDir()
	var extracted stream.Counter
	restored, err := physical.Restore(t.Context(), physical.RestoreOptions{
		Tool: physical.MariaDB, Store: st, Key: o.Key, Object: taken.Object, BackupID: "b1",
		DataDir: dataDir, UseMemory: "64M", Raw: &extracted,
	})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if restored.GTIDPosition != taken.GTIDPosition || extracted.Bytes() != taken.RawBytes {
		t.Errorf("restored at %q after %d bytes; the backup said %q, %d bytes", restored.GTIDPosition, extracted.Bytes(), taken.GTIDPosition, taken.RawBytes)
	}
	if _, err := os.Stat(filepath.Join(dataDir, ".mysqlctl-restore")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staging directory is left in the data directory: %v", err)
	}
	dst := mariadbtest.Start(t, mariadbtest.Options{DataDir: dataDir})
	if got := checksums(t, dst); got != want {
		t.Errorf("restored checksums %s, want the source's at the backup's position %s", got, want)
	}
	// Restoring again into the same directory is the finished restore, not a second one.
	again, err := physical.Restore(t.Context(), physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: o.Key, Object: taken.Object, BackupID: "b1", DataDir: dataDir})
	if err != nil || !again.Again || again.GTIDPosition != taken.GTIDPosition {
		t.Errorf("restore again = %+v, %v; want the finished restore's position", again, err)
	}
	if _, err := physical.Restore(t.Context(), physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: o.Key, Object: taken.Object, BackupID: "b2", DataDir: dataDir}); err == nil {
		t.Errorf("a restore of another backup into a restored directory was not refused")
	}
}

// checksumAt is the source's CHECKSUM TABLE of its tables as of gtid: a replica of it, stopped
// at that position.
func checksumAt(t *testing.T, src *mariadbtest.Server, gtid string) string {
	t.Helper()
	r := mariadbtest.Start(t, mariadbtest.Options{})
	r.Exec(t,
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos",
			src.Host, src.Port, mariadbtest.ReplUser, mariadbtest.ReplPassword),
		"START SLAVE UNTIL master_gtid_pos = '"+gtid+"'")
	deadline := time.Now().Add(time.Minute)
	for r.QueryString(t, "SELECT @@gtid_slave_pos") != gtid {
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not reach %s: at %s", gtid, r.QueryString(t, "SELECT @@gtid_slave_pos"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return checksums(t, r)
}

func checksums(t *testing.T, s *mariadbtest.Server) string {
	t.Helper()
	var b strings.Builder
	for _, tbl := range []string{"app.t", "app.rows"} {
		var name string
		var sum int64
		if err := s.DB(t).QueryRow("CHECKSUM TABLE "+tbl).Scan(&name, &sum); err != nil {
			t.Fatalf("%s: checksum %s: %v", s.Name, tbl, err)
		}
		fmt.Fprintf(&b, "%s=%d ", tbl, sum)
	}
	var n int
	if err := s.DB(t).QueryRow("SELECT COUNT(*) FROM app.rows").Scan(&n); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "rows=%d", n)
	return b.String()
}

// TestBackupRefusedLeavesNothing: a tool that fails (here: the account lacks a privilege the
// backup needs) ends the backup with the tool's own message, and nothing is stored under the key.
func TestBackupRefusedLeavesNothing(t *testing.T) {
	tools(t)
	src := source(t, 10)
	src.Exec(t, "REVOKE BINLOG MONITOR ON *.* FROM '"+backupUser+"'@'%'")
	_, st := store(t)
	o := takeOptions(src, st, t)
	_, err := physical.Take(t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "BINLOG MONITOR") {
		t.Fatalf("take without BINLOG MONITOR = %v; want the tool's refusal quoted", err)
	}
	if strings.Contains(err.Error(), backupPassword) {
		t.Errorf("the error holds the password: %v", err)
	}
	objs, lerr := st.List(t.Context(), "b1/")
	if lerr != nil || len(objs) != 0 {
		t.Errorf("after a failed backup the store holds %v (%v); want nothing", objs, lerr)
	}
}

// TestBackupStoreStoppedMidUpload: the store is killed while the stream is uploaded. The backup
// fails (the tool is stopped, not left blocked on its pipe), and after the store returns nothing
// is listed under the key; a second backup then succeeds.
func TestBackupStoreStoppedMidUpload(t *testing.T) {
	tools(t)
	src := source(t, 20000)
	s3, st := store(t)
	o := takeOptions(src, st, t)
	var raw stream.Counter
	o.Raw = &raw
	done := make(chan error, 1)
	go func() { _, err := physical.Take(t.Context(), o); done <- err }()
	for raw.Bytes() < 8<<20 {
		select {
		case err := <-done:
			t.Fatalf("the backup ended before the store was killed (%d bytes): %v", raw.Bytes(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := s3.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the backup succeeded with its store killed mid-upload")
		}
		t.Logf("failed as it should: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the backup did not end within 2 minutes of its store's death")
	}
	if err := s3.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if objs, err := st.List(t.Context(), "b1/"); err != nil || len(objs) != 0 {
		t.Errorf("after the failed backup the store lists %v (%v); want nothing", objs, err)
	}
	o.WorkDir = t.TempDir()
	if _, err := physical.Take(t.Context(), o); err != nil {
		t.Fatalf("the backup after the store returned: %v", err)
	}
}

// TestRestoreDamagedRefused: an object whose bytes are not its manifest's is refused with its key
// named, leaves no data a server would start on, and a restore of the right object into the same
// directory then succeeds (the interrupted run is wiped).
func TestRestoreDamagedRefused(t *testing.T) {
	tools(t)
	src := source(t, 100)
	_, st := store(t)
	o := takeOptions(src, st, t)
	taken, err := physical.Take(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	wrong := taken.Object
	wrong.SHA256 = strings.Repeat("0", 64)
	dataDir := t.TempDir()
	_, err = physical.Restore(t.Context(), physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: o.Key, Object: wrong, BackupID: "b1", DataDir: dataDir})
	if !errors.Is(err, backup.ErrDamaged) || !strings.Contains(err.Error(), o.Key) {
		t.Fatalf("restore of a damaged object = %v; want ErrDamaged naming %s", err, o.Key)
	}
	// Nothing but the restore's own mark and staging directory: no data a server would start on.
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".mysqlctl-restoring" && e.Name() != ".mysqlctl-restore" {
			t.Errorf("a damaged restore left %s in the data directory", e.Name())
		}
	}
	if _, err := physical.Restore(t.Context(), physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: o.Key, Object: taken.Object, BackupID: "b1", DataDir: dataDir}); err != nil {
		t.Fatalf("restore after the damaged one: %v", err)
	}
	// Somebody else's data is never wiped.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "ibdata1"), []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := physical.Restore(t.Context(), physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: o.Key, Object: taken.Object, BackupID: "b1", DataDir: other}); err == nil {
		t.Errorf("a restore into a directory holding other data was not refused")
	}
	if b, _ := os.ReadFile(filepath.Join(other, "ibdata1")); string(b) != "theirs" {
		t.Errorf("the refused restore changed the directory's data")
	}
}

// TestResetRootPassword restores a backup whose root password is not the new cluster's (a
// restore from a bucket alone) and sets it: the server then opens with the new password only,
// every row is there, nothing was written to a binary log, and a second run changes nothing. A
// run that fails names the cause, never the password.
func TestResetRootPassword(t *testing.T) {
	tools(t)
	src := source(t, 500)
	_, st := store(t)
	o := takeOptions(src, st, t)
	taken, err := physical.Take(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := checksumAt(t, src, taken.GTIDPosition)
	dataDir := t.TempDir()
	if _, err := physical.Restore(t.Context(), physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: o.Key, Object: taken.Object, BackupID: "b1", DataDir: dataDir}); err != nil {
		t.Fatal(err)
	}
	const newRoot = "n3w-root-pa55word"
	for run := range 2 {
		if err := physical.ResetRootPassword(t.Context(), physical.ResetOptions{DataDir: dataDir, Password: newRoot}); err != nil {
			t.Fatalf("reset (run %d): %v", run+1, err)
		}
	}
	dst := mariadbtest.Start(t, mariadbtest.Options{DataDir: dataDir, RootPassword: newRoot})
	if got := checksums(t, dst); got != want {
		t.Errorf("checksums after the reset %s, want the backup's %s", got, want)
	}
	if pos := dst.QueryString(t, "SELECT @@gtid_binlog_pos"); pos != "" {
		t.Errorf("the reset wrote to the binary log: gtid_binlog_pos %q", pos)
	}
	old, err := sql.Open("mysql", dst.DSN(mariadbtest.RootUser, mariadbtest.RootPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	var me *mysql.MySQLError
	if err := old.PingContext(t.Context()); !errors.As(err, &me) || me.Number != 1045 {
		t.Errorf("the old root password after the reset: %v; want access denied (1045)", err)
	}
	// A directory no server starts on: the error says why, and holds no password.
	err = physical.ResetRootPassword(t.Context(), physical.ResetOptions{DataDir: filepath.Join(t.TempDir(), "missing"), Password: newRoot, StartTimeout: 20 * time.Second})
	if err == nil || strings.Contains(err.Error(), newRoot) {
		t.Errorf("reset on a missing directory = %v; want an error without the password", err)
	}
}
