// Package orchestrate applies what internal/specs builds and runs the persisted operations:
// the stage engine (stage.go), the Lease, bootstrap and converge, switchover, failover, upgrade,
// scale and rebuild, each a sequence of small named stages recorded in the MysqlCluster status.
// It also holds the watch supervisor (watch*.go, request.go's serving side): its loops, checks,
// repairs and request hand-off.
//
// It may import api/, internal/specs, internal/failover (pure decisions), internal/topology
// (SQL) and internal/outcome; nothing under internal/ imports it back.
package orchestrate
