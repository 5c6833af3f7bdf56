// Package orchestrate applies what internal/specs builds and runs the persisted operations:
// the stage engine (stage.go), the Lease, bootstrap and converge, switchover, failover, upgrade,
// scale, rebuild and backup, each a sequence of small named stages recorded in the MysqlCluster
// status, and the client side of requests to a supervisor (request.go). Its Runner is what the
// commands and the supervisor (internal/supervisor) act through.
//
// It may import api/, internal/specs, internal/failover (pure decisions), internal/topology and
// internal/topology/gtid (SQL), internal/backup and internal/outcome; only cmd/mysqlctl (and its
// cmdutil), internal/supervisor and internal/metrics import it.
package orchestrate
