// Package orchestrate turns a MysqlCluster into the Kubernetes objects it owns and converges
// them, and runs the persisted operations (bootstrap, upgrade, scale) and the watch supervisor.
//
// The Build* functions are pure: from a cluster (and, where the desired state depends on it,
// an observed fact passed in) they return the desired object, with nothing defaulted that the
// API server would default differently, so a server-side apply of an unchanged spec is a no-op.
package orchestrate
