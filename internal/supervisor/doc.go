// Package supervisor is the plumbing of `watch` around orchestrate's Supervisor: the informer
// cache its checks read and whose changes wake it (Cache, WakeOnChanges), and the leader
// election of `watch --leader-elect` (LeaderElection, LeaderLeaseName).
//
// It imports api/, internal/specs (labels) and internal/orchestrate; only cmd/mysqlctl imports
// it. The supervisor's loops, checks, repairs and request hand-off are orchestrate's Supervisor
// (internal/orchestrate/watch*.go), which shares the operations' Runner.
package supervisor
