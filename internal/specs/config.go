package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// ConfigFileName is the my.cnf fragment in the ConfigMap. The init container copies it next to
// the per-instance server-id fragment in /etc/mysql/conf.d, which both official images read.
const ConfigFileName = "mysqlctl.cnf"

// ReplicaNetTimeout is how long a replica waits for data (or a heartbeat, sent four times in
// it) before it reconnects: how fast replicas can corroborate that a silent primary is gone, and
// how long stopping a receiver stuck connecting to a silent primary can take (a receiver in its
// connection handshake cannot be interrupted until that times out). A healthy primary sends a
// heartbeat every quarter second, so a replica never gives up on one that is merely idle. One
// second is the servers' minimum; both a frozen or partitioned primary's detection and its
// receiver fence wait for it (BenchmarkWatchOutage/freeze and /cut).
const ReplicaNetTimeout = time.Second

// ReplicaHeartbeat is the heartbeat period every replica asks its source for (set with the
// source, so it does not depend on the net timeout in force when replication was configured):
// four heartbeats per net timeout, so an idle primary never looks silent.
const ReplicaHeartbeat = ReplicaNetTimeout / 4

// RenderMyCnf renders the [mysqld] section for the cluster's flavor: GTID replication with
// binary logs on every instance (any replica may become primary), durable flushing (an
// acknowledged commit is on disk), read-only at start (nothing is writable until mysqlctl has
// proven which instance is the primary), replication not started automatically (mysqlctl points
// it), and semi-sync variables. The user's mysqlConfig is appended in key order; owned keys are
// refused (the CRD refuses them too; this guards objects that bypassed validation).
//
// Options that exist only in some server versions carry the "loose_" prefix, which makes mysqld
// ignore them where unknown instead of refusing to start (MySQL and MariaDB manuals, "Program
// Option Modifiers").
func RenderMyCnf(c *v1.MysqlCluster) (string, error) {
	var b strings.Builder
	w := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	b.WriteString("# Rendered by mysqlctl from MysqlCluster " + c.Namespace + "/" + c.Name + "; edit spec.mysqlConfig instead.\n")
	b.WriteString("[mysqld]\n")
	timeoutMS := int64(24 * 3600 * 1000)
	if t := c.Spec.SemiSync.Timeout; t != nil {
		timeoutMS = t.Milliseconds()
	}
	flavor := c.Spec.Flavor
	if flavor == "" {
		flavor = v1.FlavorFromImage(c.Spec.Image)
	}
	w("skip_name_resolve", "ON")
	w("log_bin", "mysql-bin")
	w("relay_log", "relay-bin")
	w("binlog_format", "ROW")
	w("sync_binlog", "1")
	w("innodb_flush_log_at_trx_commit", "1")
	w("read_only", "ON")
	// A second port for mysqlctl and replication (AdminPort): commits that wait for an
	// acknowledgement hold their sessions, and a starved primary's sessions can fill
	// max_connections; the replicas that would acknowledge and the supervisor that would repair
	// must still get in.
	adminPort := fmt.Sprint(AdminPort)
	switch {
	case !adminPortServed(c):
	case flavor == v1.FlavorMariaDB:
		w("extra_port", adminPort)
		w("extra_max_connections", fmt.Sprint(adminMaxConnections))
	default:
		// MySQL 8.0.14+: only accounts with SERVICE_CONNECTION_ADMIN may use it.
		w("loose_admin_address", "0.0.0.0")
		w("loose_admin_port", adminPort)
		w("loose_create_admin_listener_thread", "ON")
	}
	// Replicas must notice a frozen or partitioned primary quickly: detection asks them to
	// agree that the primary is gone before it is declared dead. The heartbeat asked for is a
	// quarter of this (ReplicaHeartbeat).
	netTimeout := fmt.Sprint(int(ReplicaNetTimeout.Seconds()))
	switch flavor {
	case v1.FlavorMariaDB:
		w("slave_net_timeout", netTimeout)
	default:
		w("loose_replica_net_timeout", netTimeout)
		w("loose_slave_net_timeout", netTimeout)
	}
	switch flavor {
	case v1.FlavorMariaDB:
		w("log_slave_updates", "ON")
		w("gtid_strict_mode", "ON")
		w("gtid_domain_id", "0")
		w("skip_slave_start", "ON")
		// Semi-sync is built into MariaDB 10.3+; mysqlctl switches the master side on the
		// primary and the slave side on replicas at run time.
		w("rpl_semi_sync_master_enabled", "OFF")
		w("rpl_semi_sync_slave_enabled", "OFF")
		w("rpl_semi_sync_master_wait_point", "AFTER_SYNC")
		w("rpl_semi_sync_master_wait_no_slave", "ON")
		w("rpl_semi_sync_master_timeout", fmt.Sprint(timeoutMS))
		// A semi-sync replica's STOP SLAVE first opens a connection to its source to end its
		// binlog dump there, and returns only when that succeeds or times out: against a frozen
		// or partitioned primary the receiver fence waited this (default 5; 2.0 s measured
		// here). One second is its minimum (0 waits far longer). MariaDB only.
		w("rpl_semi_sync_slave_kill_conn_timeout", "1")
		// No init_rpl_role=SLAVE: its crash recovery rolls back what is only prepared in
		// InnoDB, and with the binlog on that includes commits a client was told succeeded
		// (InnoDB does not flush their commit record). A killed primary therefore keeps a
		// tail no replica acknowledged, and after a failover it is quarantined, not rejoined.
	default:
		w("gtid_mode", "ON")
		w("enforce_gtid_consistency", "ON")
		w("super_read_only", "ON")
		w("loose_log_replica_updates", "ON")
		w("loose_log_slave_updates", "ON")
		w("loose_skip_replica_start", "ON")
		w("loose_skip_slave_start", "ON")
		// The semi-sync plugins are loaded at start: super_read_only (on from the start)
		// refuses INSTALL PLUGIN. Their names changed in 8.0.26 (semisync_source/_replica);
		// servers before that have only semisync_master/_slave. A plugin that fails to load is
		// logged and the server starts without it, so an unknown image tag gets the new names.
		if mysqlBefore8026(c.Spec.Image) {
			w("plugin_load_add", "semisync_master.so")
			w("plugin_load_add", "semisync_slave.so")
		} else {
			w("plugin_load_add", "semisync_source.so")
			w("plugin_load_add", "semisync_replica.so")
		}
		w("loose_rpl_semi_sync_source_enabled", "OFF")
		w("loose_rpl_semi_sync_replica_enabled", "OFF")
		w("loose_rpl_semi_sync_source_wait_no_replica", "ON")
		w("loose_rpl_semi_sync_master_wait_no_slave", "ON")
		w("loose_rpl_semi_sync_source_wait_point", "AFTER_SYNC")
		w("loose_rpl_semi_sync_source_timeout", fmt.Sprint(timeoutMS))
		w("loose_rpl_semi_sync_master_wait_point", "AFTER_SYNC")
		w("loose_rpl_semi_sync_master_timeout", fmt.Sprint(timeoutMS))
	}
	keys := make([]string, 0, len(c.Spec.MysqlConfig))
	for k := range c.Spec.MysqlConfig {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var refused []string
	for _, k := range keys {
		if v1.IsOwnedConfigKey(k) {
			refused = append(refused, k)
			continue
		}
		v := c.Spec.MysqlConfig[k]
		if strings.ContainsAny(k+v, "\n\r") || strings.ContainsAny(k, "=[] \t#") {
			return "", outcome.Invalid(fmt.Sprintf("mysqlConfig %q: keys and values must be single-line option names and values", k))
		}
		w(k, v)
	}
	if len(refused) > 0 {
		return "", outcome.Invalid(fmt.Sprintf("mysqlConfig must not set keys that mysqlctl manages: %s (remove them: mysqlctl sets them itself)", strings.Join(refused, ", ")))
	}
	return b.String(), nil
}

// BuildConfigMap returns the ConfigMap with the rendered my.cnf.
func BuildConfigMap(c *v1.MysqlCluster) (*corev1.ConfigMap, error) {
	cnf, err := RenderMyCnf(c)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta:   TypeMeta("v1", "ConfigMap"),
		ObjectMeta: ObjectMeta(c, ConfigMapName(c, cnf), "config"),
		Data:       map[string]string{ConfigFileName: cnf},
	}, nil
}

// configHash identifies a my.cnf (16 hex digits of its SHA-256).
func configHash(cnf string) string {
	sum := sha256.Sum256([]byte(cnf))
	return hex.EncodeToString(sum[:8])
}

// mysqlBefore8026 reports whether the image's tag names a MySQL version before 8.0.26 (5.7, or
// 8.0.0–8.0.25), whose semi-sync plugins still have the master/slave names.
func mysqlBefore8026(image string) bool { return mysqlTagBefore80(image, 26) }

// adminPortServed reports whether the cluster's servers serve AdminPort: MariaDB's extra_port
// (every supported version), MySQL's administrative interface from 8.0.14. An image whose tag
// names no version is taken as recent.
func adminPortServed(c *v1.MysqlCluster) bool {
	flavor := c.Spec.Flavor
	if flavor == "" {
		flavor = v1.FlavorFromImage(c.Spec.Image)
	}
	return flavor == v1.FlavorMariaDB || !mysqlTagBefore80(c.Spec.Image, 14)
}

// mysqlTagBefore80 reports whether the image's tag names a MySQL version before 8.0.patch (5.7
// included).
func mysqlTagBefore80(image string, patch80 int) bool {
	tag := image
	if i := strings.LastIndex(tag, "@"); i >= 0 {
		tag = tag[:i]
	}
	i := strings.LastIndex(tag, ":")
	if i < 0 || strings.Contains(tag[i:], "/") {
		return false
	}
	tag = tag[i+1:]
	var major, minor, patch int
	n, _ := fmt.Sscanf(tag, "%d.%d.%d", &major, &minor, &patch)
	switch {
	case n >= 1 && major < 8:
		return true
	case n == 3 && major == 8 && minor == 0:
		return patch < patch80
	}
	return false
}
