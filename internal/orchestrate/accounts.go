package orchestrate

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// The accounts of a cluster, and what keeps read_only binding on MariaDB.
//
// On MariaDB read_only does not bind an account that holds READ_ONLY ADMIN, and ALL
// PRIVILEGES (what the image's entrypoint gives root) includes it; SUPER alone does not in
// 10.11. Changing read_only needs that same privilege, so the accounts that fence cannot
// simply lose it: it moves into topology.ReadOnlyAdminRole, which root and the orchestration
// account are granted but which is nobody's default role. topology enables it with SET ROLE
// on one pinned session for the statements that need it (SET GLOBAL read_only, SET GLOBAL
// gtid_slave_pos, account statements on a read-only server) and disables it again, so a
// plain root session, like an application's, is refused by read_only (error 1290). What a
// root session without the role can and cannot do on a read-only MariaDB 10.11 server is
// listed in internal/topology/accounts_live_test.go.
//
// On MySQL, SUPER and CONNECTION_ADMIN bypass read_only but not super_read_only, which the
// MySQL fence sets (and the generated my.cnf sets at start), so nothing is stripped there.

// RootUser is the administrative account the images create from their root password.
const RootUser = "root"

// RootAccountHosts are the host parts of root that the official mariadb and mysql images
// create (MARIADB_ROOT_HOST / MYSQL_ROOT_HOST default to '%', plus localhost for the socket).
// topology.Instance.StripReadOnlyAdmin finds the real list on each server.
var RootAccountHosts = []string{"%", "localhost"}

// AccountCredentials are the account names and passwords of a cluster, read from its
// credentials Secret. Passwords are topology.Secret values and never print.
type AccountCredentials struct {
	// Replication and Orchestration are the passwords of ReplicationUser and
	// OrchestrationUser.
	Replication, Orchestration topology.Secret
	// AppUser is the writing application account (DefaultAppUser unless the Secret names
	// another); AppPassword is empty when the Secret has no SecretAppPassword.
	AppUser     string
	AppPassword topology.Secret
	// AppReadOnlyUser is the read-only application account (DefaultAppReadOnlyUser unless
	// the Secret names another); AppReadOnlyPassword is empty when the Secret has no
	// SecretAppReadOnlyPassword.
	AppReadOnlyUser     string
	AppReadOnlyPassword topology.Secret
}

// AccountCredentialsFromSecret reads the account credentials from the credentials Secret. A
// Secret without the required keys (SecretKeys) is an error naming the keys, never a value;
// application user names default when their keys are absent or empty.
func AccountCredentialsFromSecret(s *corev1.Secret) (AccountCredentials, error) {
	if s == nil {
		return AccountCredentials{}, errors.New("no credentials Secret")
	}
	if missing := specs.MissingSecretKeys(s); len(missing) > 0 {
		return AccountCredentials{}, fmt.Errorf("%w: Secret %s/%s lacks the key(s) %s",
			ErrSecretIncomplete, s.Namespace, s.Name, strings.Join(quoteAll(missing), ", "))
	}
	name := func(key, def string) string {
		if v := strings.TrimSpace(string(s.Data[key])); v != "" {
			return v
		}
		return def
	}
	return AccountCredentials{
		Replication:         topology.Secret(s.Data[specs.SecretReplicationPassword]),
		Orchestration:       topology.Secret(s.Data[specs.SecretOrchestrationPassword]),
		AppUser:             name(specs.SecretAppUser, specs.DefaultAppUser),
		AppPassword:         topology.Secret(s.Data[specs.SecretAppPassword]),
		AppReadOnlyUser:     name(specs.SecretAppReadOnlyUser, specs.DefaultAppReadOnlyUser),
		AppReadOnlyPassword: topology.Secret(s.Data[specs.SecretAppReadOnlyPassword]),
	}, nil
}

// MissingApp lists the application password keys the Secret lacked; BootstrapAccounts
// leaves those accounts out (a Secret made before application accounts existed, or by hand).
func (c AccountCredentials) MissingApp() []string {
	var out []string
	if c.AppPassword == "" {
		out = append(out, specs.SecretAppPassword)
	}
	if c.AppReadOnlyPassword == "" {
		out = append(out, specs.SecretAppReadOnlyPassword)
	}
	return out
}

// BootstrapAccounts returns the accounts bootstrap ensures on every instance, in this order:
// the replication account (REPLICATION SLAVE), the orchestration account (administration
// without data privileges; on MariaDB it is granted topology.ReadOnlyAdminRole instead of
// READ_ONLY ADMIN), the writing application account (DML and DDL on every non-system schema)
// and the read-only application account (SELECT on every non-system schema). topology.FenceSchema,
// where each server keeps its fencing token, counts as a system schema: the orchestration
// account keeps the token there, and the application accounts get no privilege on it. The application
// accounts have no global privilege at all, so neither SUPER nor READ_ONLY ADMIN, no role,
// and read_only (MariaDB) or super_read_only (MySQL) binds them; an application account whose
// password the Secret lacks is left out (see MissingApp).
//
// Pure: it validates the names (topology.ValidateAccountName; all distinct; root and the
// tool's own accounts are reserved) and returns errors that name keys, never values. The
// application accounts must be ensured by root: granting schema privileges needs an account
// that holds them WITH GRANT OPTION, which the orchestration account does not.
func BootstrapAccounts(c AccountCredentials) ([]topology.UserSpec, error) {
	if c.Replication == "" || c.Orchestration == "" {
		return nil, fmt.Errorf("%w: the replication and orchestration passwords (%s, %s) are required",
			ErrSecretIncomplete, specs.SecretReplicationPassword, specs.SecretOrchestrationPassword)
	}
	users := []topology.UserSpec{
		{User: ReplicationUser, Password: c.Replication, Role: topology.RoleReplication},
		{User: OrchestrationUser, Password: c.Orchestration, Role: topology.RoleOrchestration},
	}
	for _, app := range []struct {
		user, key string
		password  topology.Secret
		role      topology.UserRole
	}{
		{c.AppUser, specs.SecretAppUser, c.AppPassword, topology.RoleAppWriter},
		{c.AppReadOnlyUser, specs.SecretAppReadOnlyUser, c.AppReadOnlyPassword, topology.RoleAppReader},
	} {
		if app.password == "" {
			continue
		}
		if err := topology.ValidateAccountName(app.user); err != nil {
			return nil, fmt.Errorf("Secret key %s: %w", app.key, err)
		}
		users = append(users, topology.UserSpec{User: app.user, Password: app.password, Role: app.role})
	}
	seen := map[string]bool{RootUser: true}
	for _, s := range users {
		if seen[s.User] {
			return nil, fmt.Errorf("account name %q is used twice or is reserved (%s, %s, %s are mysqlctl's)",
				s.User, RootUser, ReplicationUser, OrchestrationUser)
		}
		seen[s.User] = true
	}
	return users, nil
}

// RootReadOnlyAdminStrip returns the statements that take READ ONLY ADMIN away from root's
// accounts on MariaDB while leaving root able to fence through topology.ReadOnlyAdminRole:
// create the role and give it READ_ONLY ADMIN, grant it to each root@host (WITH ADMIN
// OPTION), enable it on the session (SET ROLE), then REVOKE READ_ONLY ADMIN ON *.* from each
// root@host. hosts defaults to RootAccountHosts. Every statement is idempotent once the
// session holds the privilege (directly, or through the role on a later run). It returns nil
// on MySQL, where super_read_only binds root.
//
// These are the statements for a plan or dry run. To apply them, call
// topology.Instance.StripReadOnlyAdmin, which reads root's real host list, runs them on one
// session with binary logging off when asked, tolerates a session that cannot SET ROLE yet,
// and ends root's other sessions, which keep the privilege until they reconnect.
func RootReadOnlyAdminStrip(d topology.Dialect, hosts ...string) ([]topology.Stmt, error) {
	if len(hosts) == 0 {
		hosts = RootAccountHosts
	}
	accounts := make([]topology.Account, len(hosts))
	for i, h := range hosts {
		accounts[i] = topology.Account{User: RootUser, Host: h}
	}
	return d.StripReadOnlyBypass(accounts)
}
