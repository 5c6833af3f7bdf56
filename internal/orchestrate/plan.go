package orchestrate

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
)

// Plan is what an operation would do, decided from a fresh observation with the same code the
// operation runs; producing it changes nothing.
type Plan struct {
	Type    string `json:"type"`
	Cluster string `json:"cluster"`
	// Primary is the current (old) primary.
	Primary string `json:"primary"`
	// Verdict and Detection: what failover detection concluded about the primary, and from what.
	Verdict   string   `json:"verdict,omitempty"`
	Detection []string `json:"detection,omitempty"`
	// Fence is how the old primary would be fenced.
	Fence string `json:"fence,omitempty"`
	// Candidate is the instance that would be promoted, with its GTID set and why.
	Candidate        string   `json:"candidate,omitempty"`
	CandidateGTIDSet string   `json:"candidateGTIDSet,omitempty"`
	CandidateReason  string   `json:"candidateReason,omitempty"`
	Rejected         []string `json:"rejected,omitempty"`
	// Refusal is set when the operation would refuse, with the reason; nothing would change.
	Refusal string `json:"refusal,omitempty"`
	// Stages are the stages the operation would run.
	Stages []string `json:"stages"`
}

// PlanSwitchover decides a switchover's target as Validating would.
func (r *Runner) PlanSwitchover(ctx context.Context, key client.ObjectKey, opts SwitchoverOptions) (Plan, error) {
	opts.defaults()
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return Plan{}, err
	}
	p := Plan{
		Type: OperationSwitchover, Cluster: key.Name, Primary: c.Status.CurrentPrimary, Stages: SwitchoverStages,
		Fence: "read_only=ON (super_read_only=ON on MySQL) and client connections killed, verified; rolled back if the target does not catch up within " + opts.CatchUpTimeout.String(),
	}
	if op := c.Status.Operation; op != nil {
		p.Refusal = fmt.Sprintf("operation %s (%s) is in progress at stage %s", op.ID, op.Type, op.Stage)
		return p, nil
	}
	if c.Status.Phase != v1.PhaseRunning || c.Status.CurrentPrimary == "" {
		p.Refusal = fmt.Sprintf("cluster is %s, not Running", c.Status.Phase)
		return p, nil
	}
	members, err := r.members(ctx, c)
	if err != nil {
		p.Refusal = err.Error()
		return p, nil
	}
	creds, err := r.Credentials(ctx, c)
	if err != nil {
		return p, err
	}
	byName := map[string]Instance{}
	for _, m := range members {
		byName[m.Pod.Name] = m
	}
	ss := r.OpenSessions(ctx, members, creds)
	defer ss.Close()
	e, refusal, err := switchoverCandidate(c, members, byName, ss.Observe, c.Status.CurrentPrimary, opts)
	if err != nil {
		p.Refusal = err.Error()
		return p, nil
	}
	if refusal != "" {
		p.Refusal = refusal
		return p, nil
	}
	p.Candidate, p.CandidateGTIDSet, p.CandidateReason, p.Rejected = e.Candidate, e.CandidateGTIDSet, e.CandidateReason, e.Rejected
	return p, nil
}

// PlanFailover confirms the primary's state and runs the election as a failover would, without
// fencing anything: the fence it reports is the one the failover would try.
func (r *Runner) PlanFailover(ctx context.Context, key client.ObjectKey, opts FailoverOptions) (Plan, error) {
	opts.defaults()
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return Plan{}, err
	}
	old := c.Status.CurrentPrimary
	p := Plan{Type: OperationFailover, Cluster: key.Name, Primary: old, Stages: FailoverStages}
	if op := c.Status.Operation; op != nil {
		p.Refusal = fmt.Sprintf("operation %s (%s) is in progress at stage %s", op.ID, op.Type, op.Stage)
		return p, nil
	}
	if old == "" {
		p.Refusal = "the cluster has no recorded primary"
		return p, nil
	}
	v, err := r.FailoverView(ctx, c, old)
	if err != nil {
		return p, err
	}
	creds, err := r.Credentials(ctx, c)
	if err != nil {
		return p, err
	}
	ss := r.OpenSessions(ctx, v.Ready, creds)
	defer ss.Close()
	j, refused := r.confirm(ctx, c, v, ss, creds, opts)
	if refused != nil && !opts.Force {
		return p, refused // no plan can be judged through a refused path
	}
	p.Verdict, p.Detection = string(j.Verdict), j.Evidence
	switch {
	case j.Verdict == failover.Alive, j.Verdict == failover.Unreachable && !opts.Force:
		p.Refusal = j.Reason
		return p, nil
	case j.Verdict == failover.ReadOnly:
		p.Fence = fenceBySQL
	default:
		p.Fence = fenceByReceivers
	}
	members, missing := v.Members(c, ss)
	// The receivers are still running here: what the election sees after the fence can only
	// be more, never less, than this.
	d, err := failover.Elect(failover.ElectInput{
		Members: members, Missing: missing, History: knownHistory(c), MaxLag: maxCandidateLag(c),
		Requested: opts.To, Force: opts.Force,
	})
	p.Rejected = d.Rejected
	if err != nil {
		p.Refusal = err.Error()
		return p, nil
	}
	p.Candidate, p.CandidateGTIDSet, p.CandidateReason = d.Candidate, d.CandidateSet, d.Reason
	return p, nil
}
