package topology

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/statements/*.txt from the dialects")

// dialectCases are the flavors whose statements are pinned. 8.0.21 sits
// before MySQL's 8.0.22/8.0.23/8.0.26 renames, 8.0.36 after them.
var dialectCases = []struct {
	file, version, comment string
}{
	{"mysql-5.7.44.txt", "5.7.44-log", "MySQL Community Server (GPL)"},
	{"mysql-8.0.21.txt", "8.0.21", "MySQL Community Server - GPL"},
	{"mysql-8.0.36.txt", "8.0.36", "MySQL Community Server - GPL"},
	{"mysql-8.4.3.txt", "8.4.3", "MySQL Community Server - GPL"},
	{"mariadb-10.11.6.txt", "10.11.6-MariaDB-log", "mariadb.org binary distribution"},
}

// TestDialectStatementsPinned compares every statement of every flavor with
// the reviewed text in testdata/statements. The MySQL texts follow the MySQL
// 5.7/8.0/8.4 Reference Manuals (they cannot run against a live MySQL here);
// the MariaDB text is also exercised against real servers in this package.
// After an intended change, run `go test -run TestDialectStatementsPinned
// -update` and review the diff.
func TestDialectStatementsPinned(t *testing.T) {
	for _, c := range dialectCases {
		t.Run(c.file, func(t *testing.T) {
			f, err := DetectFlavor(c.version, c.comment)
			if err != nil {
				t.Fatal(err)
			}
			d, err := DialectFor(f)
			if err != nil {
				t.Fatal(err)
			}
			got := renderDialect(d)
			path := filepath.Join("testdata", "statements", c.file)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("statements for %s changed:\n--- want\n%s\n--- got\n%s", f, want, got)
			}
		})
	}
}

// TestDialectKeyDifferences spells out, next to the code, the differences
// TESTENV.md lists, so that a reader does not have to open the golden files.
func TestDialectKeyDifferences(t *testing.T) {
	dialect := func(version, comment string) Dialect {
		f, err := DetectFlavor(version, comment)
		if err != nil {
			t.Fatal(err)
		}
		d, err := DialectFor(f)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	src := SourceSpec{Host: "mysql-0", Port: 3306, User: "repl", Password: "pw"}
	for _, tt := range []struct {
		d                      Dialect
		status, fence, prefix  string
		wait                   string
		semiSource, semiPlugin string
	}{
		{
			dialect("5.7.44", "MySQL"), "SHOW SLAVE STATUS", "SET GLOBAL super_read_only = ON",
			"CHANGE MASTER TO MASTER_HOST = 'mysql-0', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = ?, MASTER_AUTO_POSITION = 1",
			"SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", "SET GLOBAL rpl_semi_sync_master_enabled = ON", "semisync_master.so",
		},
		{
			dialect("8.0.36", "MySQL"), "SHOW REPLICA STATUS", "SET GLOBAL super_read_only = ON",
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'mysql-0', SOURCE_PORT = 3306, SOURCE_USER = 'repl', SOURCE_PASSWORD = ?, SOURCE_AUTO_POSITION = 1",
			"SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", "SET GLOBAL rpl_semi_sync_source_enabled = ON", "semisync_source.so",
		},
		{
			dialect("8.4.3", "MySQL"), "SHOW REPLICA STATUS", "SET GLOBAL super_read_only = ON",
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'mysql-0', SOURCE_PORT = 3306, SOURCE_USER = 'repl', SOURCE_PASSWORD = ?, SOURCE_AUTO_POSITION = 1",
			"SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", "SET GLOBAL rpl_semi_sync_source_enabled = ON", "semisync_source.so",
		},
		{
			dialect("10.11.6-MariaDB", ""), "SHOW SLAVE STATUS", "SET GLOBAL read_only = ON",
			"CHANGE MASTER TO MASTER_HOST = 'mysql-0', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = ?, MASTER_USE_GTID = slave_pos",
			"SELECT MASTER_GTID_WAIT(?, ?)", "SET GLOBAL rpl_semi_sync_master_enabled = ON", "",
		},
	} {
		f := tt.d.Flavor()
		if got := tt.d.ReplicaStatusQuery().SQL; got != tt.status {
			t.Errorf("%s status: %q", f, got)
		}
		if got := tt.d.Fence()[0].SQL; got != tt.fence {
			t.Errorf("%s fence: %q", f, got)
		}
		change, err := tt.d.ChangeSource(src)
		if err != nil || !strings.HasPrefix(change[len(change)-1].SQL, tt.prefix) {
			t.Errorf("%s change source: %v %v", f, change, err)
		}
		if strings.Contains(change[len(change)-1].SQL, "pw") || change[len(change)-1].Args[0] != Secret("pw") {
			t.Errorf("%s: the password must travel as a Secret argument, not in the text", f)
		}
		hb := src
		hb.HeartbeatPeriod = 500 * time.Millisecond
		word := "MASTER_"
		if strings.Contains(tt.prefix, "SOURCE_HOST") {
			word = "SOURCE_"
		}
		if change, err := tt.d.ChangeSource(hb); err != nil || !strings.Contains(change[len(change)-1].SQL, ", "+word+"HEARTBEAT_PERIOD = 0.500") {
			t.Errorf("%s heartbeat: %v %v", f, change, err)
		}
		if got := tt.d.WaitForGTID("x", time.Second).SQL; got != tt.wait {
			t.Errorf("%s wait: %q", f, got)
		}
		on, err := tt.d.EnableSemiSyncSource(SemiSyncSourceSpec{Timeout: time.Second})
		if err != nil || on[len(on)-1].SQL != tt.semiSource {
			t.Errorf("%s semi-sync: %v %v", f, on, err)
		}
		_, lib, _ := tt.d.SemiSyncPlugin(SemiSyncSource)
		if lib != tt.semiPlugin {
			t.Errorf("%s plugin library %q", f, lib)
		}
	}
}

func TestDialectRejectsUnsafeInput(t *testing.T) {
	f, _ := DetectFlavor("8.4.3", "MySQL")
	d, _ := DialectFor(f)
	m, _ := DetectFlavor("10.11.6-MariaDB", "")
	md, _ := DialectFor(m)
	for _, spec := range []SourceSpec{
		{Host: "x'; DROP TABLE t; --", Port: 3306, User: "repl"},
		{Host: "", Port: 3306, User: "repl"},
		{Host: "h", Port: 0, User: "repl"},
		{Host: "h", Port: 70000, User: "repl"},
		{Host: "h", Port: 3306, User: "re'pl"},
		{Host: "h", Port: 3306, User: "repl", RetryCount: -1},
	} {
		if _, err := d.ChangeSource(spec); err == nil {
			t.Errorf("MySQL ChangeSource(%+v) accepted", spec)
		}
		if _, err := md.ChangeSource(spec); err == nil {
			t.Errorf("MariaDB ChangeSource(%+v) accepted", spec)
		}
	}
	for _, u := range []UserSpec{
		{User: "a'b", Password: "x"},
		{User: "ok", Host: "h'", Password: "x"},
		{User: "ok"},
		{User: strings.Repeat("a", 33), Password: "x"},
	} {
		if _, err := d.EnsureUser(u); err == nil {
			t.Errorf("EnsureUser(%+v) accepted", u)
		}
	}
	if _, err := d.ClientConnectionsQuery([]string{"x' OR 1=1 --"}); err == nil {
		t.Error("ClientConnectionsQuery accepted an unsafe user name")
	}
	if _, err := md.EnableSemiSyncSource(SemiSyncSourceSpec{Timeout: time.Second, WaitForReplicas: 2}); err == nil {
		t.Error("MariaDB accepted waiting for two semi-sync replicas")
	}
	if _, err := d.EnableSemiSyncSource(SemiSyncSourceSpec{}); err == nil {
		t.Error("zero semi-sync timeout accepted")
	}
}

func TestDialectForUnknown(t *testing.T) {
	if _, err := DialectFor(Flavor{}); err == nil {
		t.Fatal("DialectFor accepted an undetected flavor")
	}
}
