// Package supervisor is `watch`: the loop that checks each cluster's primary and records the HA
// state with its evidence (supervisor.go), the observation pass and absent members (observe.go,
// absence.go), the repairer (repair.go, reseed.go), the hand-off of requests left by commands
// (request.go), the informer cache its checks read (informers.go) and the leader election of
// `watch --leader-elect` (leader.go). It acts only through orchestrate's Runner and operations,
// under the cluster's Lease; its decisions are internal/failover's.
//
// It imports api/, internal/specs, internal/failover, internal/topology, internal/outcome and
// internal/orchestrate; only cmd/mysqlctl and internal/metrics import it.
package supervisor
