package v1alpha1

import (
	"slices"
	"strings"
)

// OwnedConfigKeys are the my.cnf options mysqlctl renders itself because replication and failover
// safety depend on them; the CRD refuses them in spec.mysqlConfig (names compared lower-case with
// '-' read as '_', as mysqld does). Every option starting with OwnedConfigPrefix is refused too.
// The CEL rule on MysqlClusterSpec.MysqlConfig repeats this list; a test keeps the two equal.
var OwnedConfigKeys = []string{
	"server_id", "gtid_mode", "enforce_gtid_consistency", "gtid_strict_mode", "gtid_domain_id",
	"log_bin", "log_slave_updates", "log_replica_updates", "read_only", "super_read_only",
	"bind_address", "port", "socket", "datadir", "relay_log", "report_host", "skip_slave_start",
	"skip_replica_start", "binlog_format", "sync_binlog", "innodb_flush_log_at_trx_commit",
	"slave_net_timeout", "replica_net_timeout",
	"extra_port", "extra_max_connections", "admin_address", "admin_port", "create_admin_listener_thread",
}

// OwnedConfigPrefix is the prefix of the semi-sync options mysqlctl owns.
const OwnedConfigPrefix = "rpl_semi_sync"

// OptionModifiers are the prefixes mysqld accepts in front of any option name ("Program Option
// Modifiers" in the MySQL and MariaDB manuals): skip_log_bin turns the binary log off, so an
// owned key is refused under any of them.
var OptionModifiers = []string{"loose_", "skip_", "enable_", "disable_", "maximum_"}

// IsOwnedConfigKey reports whether a my.cnf option name is one mysqlctl renders itself:
// compared lower-case with '-' read as '_' and option modifiers removed, as mysqld reads it.
func IsOwnedConfigKey(key string) bool {
	k := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	for stripped := true; stripped; {
		stripped = false
		for _, m := range OptionModifiers {
			if rest, ok := strings.CutPrefix(k, m); ok && rest != "" {
				if slices.Contains(OwnedConfigKeys, k) {
					// skip_slave_start is itself an owned option name.
					return true
				}
				k, stripped = rest, true
			}
		}
	}
	return slices.Contains(OwnedConfigKeys, k) || strings.HasPrefix(k, OwnedConfigPrefix)
}

// FlavorFromImage guesses the flavor from an image reference's repository name: "mariadb" when
// the last path element of the repository contains it, "mysql" otherwise. It is only a default
// for rendering configuration; the running server's version is authoritative.
func FlavorFromImage(image string) Flavor {
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		repo = repo[i+1:]
	}
	if i := strings.Index(repo, ":"); i >= 0 {
		repo = repo[:i]
	}
	if strings.Contains(strings.ToLower(repo), "mariadb") {
		return FlavorMariaDB
	}
	return FlavorMySQL
}

// Default fills the fields whose defaults depend on other fields (the CRD defaults the rest):
// the Service and Secret names from the cluster name, and the flavor from the image.
// Set fields are never changed.
func (c *MysqlCluster) Default() {
	if c.Spec.PrimaryService == "" {
		c.Spec.PrimaryService = c.Name + "-primary"
	}
	if c.Spec.ReplicaService == "" {
		c.Spec.ReplicaService = c.Name + "-replicas"
	}
	if c.Spec.CredentialsSecretName == "" {
		c.Spec.CredentialsSecretName = c.Name + "-credentials"
	}
	if c.Spec.Flavor == "" && c.Spec.Image != "" {
		c.Spec.Flavor = FlavorFromImage(c.Spec.Image)
	}
}

// SemiSyncEnabled reports whether semi-synchronous replication is on (the default).
func (s SemiSyncSpec) SemiSyncEnabled() bool { return s.Enabled == nil || *s.Enabled }

// AutoEnabled reports whether automatic failover is on (the default).
func (f FailoverSpec) AutoEnabled() bool { return f.Auto == nil || *f.Auto }

// ReseedEnabled reports whether watch may re-seed a crashed old primary's proven unacknowledged
// transactions by itself (the default).
func (f FailoverSpec) ReseedEnabled() bool {
	return f.ReseedUnacknowledged == nil || *f.ReseedUnacknowledged
}
