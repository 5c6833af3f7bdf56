package orchestrate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// hostileNames are table names an account with CREATE may choose: the injection the attack
// review made (a RENAME parsed out of the name, then a statement of its own run as root), and
// names with spaces, quotes, backticks, newlines, glob characters and a command substitution.
var hostileNames = []string{
	"x`/**/TO/**/`inj`.`y`;CREATE/**/USER/**/root@\"127.9.9.9\";#",
	"a b", "it's", `q"q`, "*", "new\nline", "$(touch %s)", "back`tick",
}

// hostileDatabases are database names of the same kind: one that reads as a dump option, and
// ones that match a system or aside schema's name but for case (information_schema compares
// names without case; the server, with lower_case_table_names=0, does not).
var hostileDatabases = []string{"inj", "sp ace*", "--all-databases", "back`tick", "SYS", "MYSQLCTL_ASIDE_app"}

func quoteIdent(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// seedPair starts a donor and a target as the seed Job finds them: mysqlctl's role exists on
// the target, the donor runs with gtid_strict_mode, and both hold the hostile names (the
// target's with a trigger, as a rebuild's old data may). marker is the file the command
// substitution in a name would create.
func seedPair(t *testing.T) (donor, target *mariadbtest.Server, marker string) {
	t.Helper()
	if err := mariadbtest.Available(); err != nil {
		t.Skip(err)
	}
	donor = mariadbtest.Start(t, mariadbtest.Options{Name: "donor", Args: []string{"--gtid-strict-mode=ON"}})
	target = mariadbtest.Start(t, mariadbtest.Options{Name: "target", Args: []string{"--gtid-strict-mode=ON"}})
	dir, err := os.MkdirTemp("", "inj") // short: the marker's path is part of a table name (64 characters at most)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	marker = filepath.Join(dir, "x")
	target.Exec(t, "CREATE ROLE "+topology.ReadOnlyAdminRole, "SET GLOBAL read_only = ON")
	for _, s := range []*mariadbtest.Server{donor, target} {
		for _, d := range hostileDatabases {
			s.Exec(t, "CREATE DATABASE "+quoteIdent(d))
			for i, n := range hostileNames {
				n = strings.ReplaceAll(n, "%s", marker)
				tbl := quoteIdent(d) + "." + quoteIdent(n)
				s.Exec(t, "CREATE TABLE "+tbl+" (i INT PRIMARY KEY)", fmt.Sprintf("INSERT INTO %s VALUES (%d)", tbl, i))
				if s == target {
					s.Exec(t, fmt.Sprintf("CREATE TRIGGER %s.%s BEFORE INSERT ON %s FOR EACH ROW SET NEW.i = NEW.i + 1", quoteIdent(d), quoteIdent(fmt.Sprintf("tr`%d", i)), tbl))
				}
			}
		}
	}
	donor.Exec(t, "CREATE USER 'appuser'@'%' IDENTIFIED BY 'x'", "GRANT SELECT ON `inj`.* TO 'appuser'@'%'")
	return donor, target, marker
}

// runSeed runs the seed Job's script from donor into target as the Job's container does (bash,
// the root password in MYSQL_PWD), with dir first on PATH when it is not empty.
func runSeed(t *testing.T, donor, target *mariadbtest.Server, aside bool, dir string) (string, error) {
	t.Helper()
	owned := []string{RootUser, "mariadb.sys", "", "PUBLIC", topology.ReadOnlyAdminRole, mariadbtest.ReplUser}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", seedScript(specs.ToolsFor(testenv.Cluster()), donor.Host, target.Host, owned, aside))
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+mariadbtest.RootPassword)
	if dir != "" {
		cmd.Env = append(cmd.Env, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestLiveSeedHostileNames is the attack on the seed Job: names chosen by an account with CREATE
// on both the donor and the rebuilt target. The copy succeeds, every table holds the donor's row,
// the target's old tables are set aside under their own names, and nothing in a name ran: no
// account was made, no file was created. (Before the names were quoted by the server, the
// script ran a RENAME parsed out of the first name and failed, so the instance could never be
// rebuilt.)
func TestLiveSeedHostileNames(t *testing.T) {
	donor, target, marker := seedPair(t)
	out, err := runSeed(t, donor, target, true, "")
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	for _, d := range hostileDatabases {
		for i, n := range hostileNames {
			n = strings.ReplaceAll(n, "%s", marker)
			if got := target.QueryString(t, fmt.Sprintf("SELECT GROUP_CONCAT(i) FROM %s.%s", quoteIdent(d), quoteIdent(n))); got != fmt.Sprint(i) {
				t.Errorf("%s.%q on the copy holds %s, want the donor's row %d", d, n, got, i)
			}
			if got := target.QueryString(t, fmt.Sprintf("SELECT GROUP_CONCAT(i) FROM %s.%s", quoteIdent(topology.AsidePrefix+d), quoteIdent(n))); got != fmt.Sprint(i) {
				t.Errorf("%s.%q set aside holds %s, want the target's old row %d", d, n, got, i)
			}
		}
	}
	if got := target.QueryString(t, "SELECT COUNT(*) FROM information_schema.triggers"); got != "0" {
		t.Errorf("%s triggers left on the copy (the old tables' triggers go, the donor has none)", got)
	}
	for _, s := range []*mariadbtest.Server{donor, target} {
		if got := s.QueryString(t, "SELECT COUNT(*) FROM mysql.user WHERE host = '127.9.9.9'"); got != "0" {
			t.Errorf("%s: an account made by a table name", s.Name)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a table name ran a command substitution (%s exists)", marker)
	}
	if got := target.QueryString(t, "SELECT COUNT(*) FROM mysql.user WHERE user = 'appuser'"); got != "1" {
		t.Errorf("the donor's application account is not on the copy")
	}
	if got, want := target.QueryString(t, "SELECT @@gtid_binlog_pos"), donor.QueryString(t, "SELECT @@gtid_binlog_pos"); got != want {
		t.Errorf("the copy's binary log starts at %q, the donor's is at %q", got, want)
	}
	target.ReplicateFrom(t, donor)
}

// TestLiveSeedChangesDuringCopy is the attack on the copy's consistency: a database made after
// the script listed the donor's databases but before the dump's snapshot (the copy missed it
// and replication would never bring it), and an account made after the snapshot but before
// the accounts were read (the copy held it, and replaying its CREATE USER stopped the replica
// with error 1396). Each copy fails, naming what changed; the next attempt, with nothing
// changing, copies both, and the copy replicates from the donor's position.
func TestLiveSeedChangesDuringCopy(t *testing.T) {
	donor, target, _ := seedPair(t)
	real, err := exec.LookPath("mariadb-dump")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, before, after, want string }{
		{"database before the snapshot", "CREATE DATABASE late", "", "databases changed"},
		{"account after the snapshot", "", "CREATE USER 'late'@'%' IDENTIFIED BY 'x'", "accounts or grants changed"},
	} {
		dir := t.TempDir()
		// The dump of the data (the one with --single-transaction) runs with a change of the
		// donor's just before or just after it.
		wrapper := fmt.Sprintf(`#!/bin/bash
data=false; case " $* " in *" --single-transaction "*) data=true;; esac
change() { [ "$data" = true ] && [ -n "$1" ] && mariadb -h %[1]s -P %[2]d -uroot -e "$1"; return 0; }
change %[3]q
%[4]s "$@"; rc=$?
change %[5]q
exit $rc
`, donor.Host, donor.Port, tc.before, real, tc.after)
		if err := os.WriteFile(filepath.Join(dir, "mariadb-dump"), []byte(wrapper), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := runSeed(t, donor, target, false, dir)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Fatalf("%s: the copy succeeded or failed for another reason (%v), want %q:\n%s", tc.name, err, tc.want, out)
		}
	}
	if out, err := runSeed(t, donor, target, false, ""); err != nil {
		t.Fatalf("seed with nothing changing: %v\n%s", err, out)
	}
	if got := target.QueryString(t, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'late'"); got != "1" {
		t.Errorf("the database made before the copy is not on it")
	}
	donor.Exec(t, "CREATE DATABASE after_copy", "DROP USER 'late'@'%'", "CREATE USER 'late'@'%' IDENTIFIED BY 'y'")
	target.ReplicateFrom(t, donor)
	if got := target.QueryString(t, "SELECT COUNT(*) FROM mysql.user WHERE user = 'late'"); got != "1" {
		t.Errorf("the account replayed after the copy is not on it")
	}
}
