package orchestrate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

func dialectOf(t *testing.T, version, comment string) topology.Dialect {
	t.Helper()
	f, err := topology.DetectFlavor(version, comment)
	if err != nil {
		t.Fatal(err)
	}
	d, err := topology.DialectFor(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSecretAppAccountKeys(t *testing.T) {
	s, err := specs.BuildSecret(testenv.Cluster())
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data[specs.SecretAppUser]) != specs.DefaultAppUser || string(s.Data[specs.SecretAppReadOnlyUser]) != specs.DefaultAppReadOnlyUser {
		t.Errorf("application user names %q %q", s.Data[specs.SecretAppUser], s.Data[specs.SecretAppReadOnlyUser])
	}
	seen := map[string]bool{}
	for _, k := range append(append([]string(nil), specs.SecretKeys...), specs.AppSecretKeys...) {
		v := string(s.Data[k])
		if len(v) != 32 || seen[v] {
			t.Errorf("%s: want 32 random characters, unlike every other key", k)
		}
		seen[v] = true
	}
	// A Secret made before application accounts existed is still complete.
	old := &corev1.Secret{Data: map[string][]byte{}}
	for _, k := range specs.SecretKeys {
		old.Data[k] = s.Data[k]
	}
	if m := specs.MissingSecretKeys(old); len(m) != 0 {
		t.Errorf("an existing Secret without application keys is refused: %v", m)
	}
	c, err := AccountCredentialsFromSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.MissingApp(), ","); got != "app-password,app-readonly-password" {
		t.Errorf("MissingApp = %s", got)
	}
	users, err := BootstrapAccounts(c)
	if err != nil || len(users) != 2 {
		t.Fatalf("without application passwords: %v %v", users, err)
	}
}

func TestAccountCredentialsFromSecret(t *testing.T) {
	s, _ := specs.BuildSecret(testenv.Cluster())
	c, err := AccountCredentialsFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.AppUser != "app" || c.AppReadOnlyUser != "app_ro" || string(c.AppPassword) != string(s.Data[specs.SecretAppPassword]) ||
		string(c.Orchestration) != string(s.Data[specs.SecretOrchestrationPassword]) || len(c.MissingApp()) != 0 {
		t.Errorf("credentials %+v", c)
	}
	// Passwords never print.
	if out := fmt.Sprintf("%v %+v %#v", c, c, c); strings.Contains(out, string(s.Data[specs.SecretAppPassword])) ||
		strings.Contains(out, string(s.Data[specs.SecretReplicationPassword])) {
		t.Errorf("credentials print a password: %s", out)
	}
	// The Secret may name the application accounts.
	s.Data[specs.SecretAppUser], s.Data[specs.SecretAppReadOnlyUser] = []byte("orders"), []byte(" orders_ro\n")
	if c, _ = AccountCredentialsFromSecret(s); c.AppUser != "orders" || c.AppReadOnlyUser != "orders_ro" {
		t.Errorf("named accounts %q %q", c.AppUser, c.AppReadOnlyUser)
	}
	delete(s.Data, specs.SecretOrchestrationPassword)
	_, err = AccountCredentialsFromSecret(s)
	if !errors.Is(err, ErrSecretIncomplete) || !strings.Contains(err.Error(), specs.SecretOrchestrationPassword) {
		t.Errorf("incomplete Secret: %v", err)
	}
	if _, err := AccountCredentialsFromSecret(nil); err == nil {
		t.Error("nil Secret accepted")
	}
}

func TestBootstrapAccounts(t *testing.T) {
	s, _ := specs.BuildSecret(testenv.Cluster())
	c, _ := AccountCredentialsFromSecret(s)
	users, err := BootstrapAccounts(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		user string
		role topology.UserRole
	}{
		{ReplicationUser, topology.RoleReplication},
		{OrchestrationUser, topology.RoleOrchestration},
		{specs.DefaultAppUser, topology.RoleAppWriter},
		{specs.DefaultAppReadOnlyUser, topology.RoleAppReader},
	}
	if len(users) != len(want) {
		t.Fatalf("users %+v", users)
	}
	for i, w := range want {
		if users[i].User != w.user || users[i].Role != w.role || users[i].Password == "" || users[i].Host != "" {
			t.Errorf("spec %d = %s role %d, want %s role %d", i, users[i].User, users[i].Role, w.user, w.role)
		}
	}

	// What each account gets, per flavor: no account holds READ_ONLY ADMIN
	// itself; the application accounts get no global privilege, no role,
	// and are explicitly stripped of SUPER and READ_ONLY ADMIN on MariaDB;
	// the writer gets DML and DDL on every schema but the system schemas,
	// the reader SELECT.
	for _, d := range []topology.Dialect{dialectOf(t, "10.11.6-MariaDB", ""), dialectOf(t, "8.4.3", "MySQL"), dialectOf(t, "5.7.44", "MySQL")} {
		for _, spec := range users {
			stmts, err := d.EnsureUser(spec)
			if err != nil {
				t.Fatalf("%s %s: %v", d.Flavor(), spec.User, err)
			}
			var text []string
			for _, st := range stmts {
				text = append(text, st.String())
				if strings.Contains(st.SQL, string(spec.Password)) {
					t.Errorf("%s %s: password in the statement text", d.Flavor(), spec.User)
				}
			}
			all := strings.Join(text, "\n")
			if strings.Contains(all, string(spec.Password)) {
				t.Errorf("%s %s: password printed", d.Flavor(), spec.User)
			}
			if strings.Contains(all, "READ_ONLY ADMIN ON *.* TO '"+spec.User) || strings.Contains(all, "ALL PRIVILEGES") {
				t.Errorf("%s %s keeps the read_only bypass:\n%s", d.Flavor(), spec.User, all)
			}
			switch spec.Role {
			case topology.RoleAppWriter, topology.RoleAppReader:
				for _, st := range stmts {
					if strings.HasPrefix(st.SQL, "GRANT") && (strings.Contains(st.SQL, "*.*") || strings.Contains(st.SQL, "SUPER") ||
						strings.Contains(st.SQL, "ADMIN") || strings.Contains(st.SQL, topology.ReadOnlyAdminRole)) {
						t.Errorf("%s %s: %s", d.Flavor(), spec.User, st.SQL)
					}
				}
				wantGrant := "GRANT SELECT ON `%`.* TO '" + spec.User + "'@'%'"
				if spec.Role == topology.RoleAppWriter {
					wantGrant = "INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX"
				}
				if !strings.Contains(all, wantGrant) || !strings.Contains(all, "GRANT SHOW VIEW ON `mysql`.* TO '"+spec.User+"'@'%'") {
					t.Errorf("%s %s grants:\n%s", d.Flavor(), spec.User, all)
				}
				if d.Flavor().Line == topology.MariaDB && !strings.Contains(all, "REVOKE SUPER, READ_ONLY ADMIN ON *.* FROM '"+spec.User+"'@'%'") {
					t.Errorf("%s %s is not stripped of SUPER and READ_ONLY ADMIN:\n%s", d.Flavor(), spec.User, all)
				}
			case topology.RoleOrchestration:
				if d.Flavor().Line == topology.MariaDB && (!strings.Contains(all, "GRANT "+topology.ReadOnlyAdminRole+" TO 'mysqlctl'@'%'") ||
					!strings.Contains(all, "SET DEFAULT ROLE NONE FOR 'mysqlctl'@'%'")) {
					t.Errorf("orchestration account on MariaDB:\n%s", all)
				}
			}
		}
	}

	for name, mutate := range map[string]func(*AccountCredentials){
		"reserved root":        func(c *AccountCredentials) { c.AppUser = "root" },
		"reserved repl":        func(c *AccountCredentials) { c.AppReadOnlyUser = ReplicationUser },
		"same name twice":      func(c *AccountCredentials) { c.AppReadOnlyUser = c.AppUser },
		"unsafe name":          func(c *AccountCredentials) { c.AppUser = "a'; DROP USER root; --" },
		"no orchestration key": func(c *AccountCredentials) { c.Orchestration = "" },
	} {
		bad := c
		mutate(&bad)
		_, err := BootstrapAccounts(bad)
		if err == nil {
			t.Errorf("%s accepted", name)
			continue
		}
		for _, p := range []topology.Secret{c.Replication, c.Orchestration, c.AppPassword, c.AppReadOnlyPassword} {
			if strings.Contains(err.Error(), string(p)) {
				t.Errorf("%s: the error carries a password: %v", name, err)
			}
		}
	}
}

func TestRootReadOnlyAdminStrip(t *testing.T) {
	stmts, err := RootReadOnlyAdminStrip(dialectOf(t, "10.11.6-MariaDB", ""))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range stmts {
		got = append(got, s.String())
	}
	role := topology.ReadOnlyAdminRole
	want := []string{
		"CREATE ROLE IF NOT EXISTS " + role,
		"GRANT READ_ONLY ADMIN ON *.* TO " + role,
		"GRANT " + role + " TO 'root'@'%' WITH ADMIN OPTION",
		"GRANT " + role + " TO 'root'@'localhost' WITH ADMIN OPTION",
		"SET ROLE " + role,
		"REVOKE READ_ONLY ADMIN ON *.* FROM 'root'@'%'",
		"REVOKE READ_ONLY ADMIN ON *.* FROM 'root'@'localhost'",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("MariaDB strip:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if stmts, err := RootReadOnlyAdminStrip(dialectOf(t, "10.11.6-MariaDB", ""), "10.0.%"); err != nil || len(stmts) != 5 ||
		stmts[4].SQL != "REVOKE READ_ONLY ADMIN ON *.* FROM 'root'@'10.0.%'" {
		t.Errorf("one host: %v %v", stmts, err)
	}
	if _, err := RootReadOnlyAdminStrip(dialectOf(t, "10.11.6-MariaDB", ""), "x' OR 1"); err == nil {
		t.Error("unsafe host accepted")
	}
	// MySQL: super_read_only binds root, nothing to strip.
	if stmts, err := RootReadOnlyAdminStrip(dialectOf(t, "8.4.3", "MySQL")); err != nil || len(stmts) != 0 {
		t.Errorf("MySQL strip: %v %v", stmts, err)
	}
}
