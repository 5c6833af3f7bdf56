package orchestrate

// The bootstrap (and converge) stages, one function each, walked by the stage engine (stage.go).

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

func (r *Runner) bsRecordingProvenance(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, members, observe := x.c, x.members, func(m Instance) (topology.Snapshot, error) { return x.ss.Observe(m.Pod.Name) }
	type rec struct {
		record v1.GTIDBootstrapRecord
		errant *v1.ErrantInstance
	}
	var recs []rec
	for _, m := range members {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-" + m.Pod.Name}, pvc); err != nil {
			return "", nil, fmt.Errorf("read the data volume claim of %s: %w", m.Pod.Name, err)
		}
		var existing *v1.GTIDBootstrapRecord
		for i := range c.Status.GTIDBootstrap {
			if c.Status.GTIDBootstrap[i].Ordinal == m.ordinal {
				existing = &c.Status.GTIDBootstrap[i]
			}
		}
		if existing != nil {
			if existing.PVCUID != string(pvc.UID) {
				recs = append(recs, rec{errant: &v1.ErrantInstance{
					Name:   m.Pod.Name,
					Reason: fmt.Sprintf("data volume %s has UID %s, but the provenance record names %s: this is not the data that was recorded", pvc.Name, pvc.UID, existing.PVCUID),
				}})
			}
			continue
		}
		s, err := observe(m)
		if err != nil {
			return "", nil, err
		}
		if err := flavorMatches(c, m.Pod.Name, s); err != nil {
			return "", nil, err
		}
		recs = append(recs, rec{record: v1.GTIDBootstrapRecord{
			Ordinal: m.ordinal, PVCUID: string(pvc.UID), ServerUUID: identity(s), BootstrapGTIDSet: executed(s),
			RecordedAt: metav1.NewTime(r.Clock()),
		}})
	}
	return StageCreatingUsers, func(s *v1.MysqlClusterStatus) {
		for _, x := range recs {
			if x.errant != nil {
				addErrant(s, *x.errant, r.Clock())
				continue
			}
			// Append-only: an ordinal recorded meanwhile is never rewritten.
			dup := false
			for _, e := range s.GTIDBootstrap {
				dup = dup || e.Ordinal == x.record.Ordinal
			}
			if !dup {
				s.GTIDBootstrap = append(s.GTIDBootstrap, x.record)
			}
		}
		sort.SliceStable(s.GTIDBootstrap, func(i, j int) bool { return s.GTIDBootstrap[i].Ordinal < s.GTIDBootstrap[j].Ordinal })
	}, nil
}

func (r *Runner) bsCreatingUsers(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, members, connect := x.c, x.members, func(m Instance) (*topology.Instance, error) { return x.ss.Connect(m.Pod.Name) }
	for _, m := range members {
		if quarantined(c, m.Pod.Name) {
			continue
		}
		in, err := connect(m)
		if err != nil {
			return "", nil, err
		}
		if err := r.ensureAccounts(ctx, c, in); err != nil {
			return "", nil, err
		}
	}
	return StageConfiguringPrimary, nil, nil
}

// ensureAccounts creates mysqlctl's accounts on one instance from the credentials Secret, as
// bootstrap does on every instance and a scale on each one it adds.
func (r *Runner) ensureAccounts(ctx context.Context, c *v1.MysqlCluster, in *topology.Instance) error {
	secret, err := CheckSecret(ctx, r.Kube, c)
	if err != nil {
		return err
	}
	accounts, err := AccountCredentialsFromSecret(secret)
	if err != nil {
		return err
	}
	specs, err := BootstrapAccounts(accounts)
	if err != nil {
		return err
	}
	// Without binary logging: accounts created on every instance before replication exists
	// must leave no GTIDs behind (they would be errant on the replicas).
	for _, u := range specs {
		if err := in.EnsureUser(ctx, u, topology.EnsureUserOptions{SkipBinlog: true}); err != nil {
			return err
		}
	}
	// Root last: no account keeps READ ONLY ADMIN, so read_only binds every client and
	// mysqlctl enables the privilege (a role) only on its own session, statement by statement.
	_, err = in.StripReadOnlyAdmin(ctx, RootUser, topology.EnsureUserOptions{SkipBinlog: true})
	return err
}

func (r *Runner) bsConfiguringPrimary(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, primary, primaryName, connect, observe := x.c, x.primary, x.primaryName, func(m Instance) (*topology.Instance, error) { return x.ss.Connect(m.Pod.Name) }, func(m Instance) (topology.Snapshot, error) { return x.ss.Observe(m.Pod.Name) }
	if primary.Pod == nil || quarantined(c, primaryName) {
		return "", nil, fmt.Errorf("%w: the primary %s is quarantined or missing; no other instance is proven safe to take its place", outcome.ErrUnsafe, primaryName)
	}
	in, err := connect(primary)
	if err != nil {
		return "", nil, err
	}
	if c.Spec.SemiSync.SemiSyncEnabled() && c.Spec.Replicas > 1 {
		if err := r.enableSemiSyncSource(ctx, c, in); err != nil {
			return "", nil, err
		}
	}
	evidence := fmt.Sprintf("primary %s chosen: %s", primaryName, map[bool]string{true: "recorded as primary before", false: "ordinal 0 of a new cluster"}[c.Status.CurrentPrimary != ""])
	ps, err := observe(primary)
	if err != nil {
		return "", nil, err
	}
	id := identity(ps)
	return StageJoiningReplicas, func(s *v1.MysqlClusterStatus) {
		addKnownPrimary(s, id)
		s.CurrentPrimary = primaryName
		s.Operation.Evidence = &v1.OperationEvidence{Candidate: primaryName, CandidateReason: evidence}
	}, nil
}

func (r *Runner) bsJoiningReplicas(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, members, creds, ss, primary, primaryName, connect, observe := x.c, x.members, x.creds, x.ss, x.primary, x.primaryName, func(m Instance) (*topology.Instance, error) { return x.ss.Connect(m.Pod.Name) }, func(m Instance) (topology.Snapshot, error) { return x.ss.Observe(m.Pod.Name) }
	ps, err := observe(primary)
	if err != nil {
		return "", nil, err
	}
	var errant []v1.ErrantInstance
	for _, m := range members {
		if m.Pod.Name == primaryName || quarantined(c, m.Pod.Name) {
			continue
		}
		// A former primary that came back without restarting (a frozen or partitioned one)
		// still takes writes, and its commits may hang waiting for acknowledgements, which
		// would block a full observation: it is fenced before it is observed.
		if _, err := r.Refence(ctx, c, m.Pod, creds, false); err != nil {
			return "", nil, err
		}
		s, err := observe(m)
		if err != nil {
			return "", nil, err
		}
		if err := flavorMatches(c, m.Pod.Name, s); err != nil {
			return "", nil, err
		}
		e, ok, err := ss.ancestor(primaryName, ps, s)
		if err != nil {
			return "", nil, err
		}
		if !ok {
			e.Name = m.Pod.Name
			errant = append(errant, e)
			continue
		}
		in, err := connect(m)
		if err != nil {
			return "", nil, err
		}
		joined := replicatesFrom(s, specs.PodHost(c, primaryName))
		switch {
		case !joined:
			// A returning former primary resumes from its own binlog; its history was just
			// proven an ancestor of the primary's.
			if err := r.joinReplica(ctx, c, in, s, specs.PodHost(c, primaryName), x.ss.port(primaryName), creds); err != nil {
				return "", nil, err
			}
		case c.Spec.SemiSync.SemiSyncEnabled() && !s.SemiSync.ReplicaEnabled:
			// Enabling the replica side restarts the IO thread so that it connects as a
			// semi-sync replica and acknowledges commits.
			if err := in.EnableSemiSyncReplica(ctx); err != nil {
				return "", nil, err
			}
		}
	}
	if err := r.quarantine(ctx, c, ss, errant); err != nil {
		return "", nil, err
	}
	return StageOpeningPrimary, func(s *v1.MysqlClusterStatus) {
		for _, e := range errant {
			addErrant(s, e, r.Clock())
		}
	}, nil
}

func (r *Runner) bsOpeningPrimary(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, primary, primaryName, connect := x.c, x.primary, x.primaryName, func(m Instance) (*topology.Instance, error) { return x.ss.Connect(m.Pod.Name) }
	in, err := connect(primary)
	if err != nil {
		return "", nil, err
	}
	if err := r.openPrimary(ctx, c, in, primaryName); err != nil {
		return "", nil, err
	}
	return StageVerifyingConvergence, nil, nil
}

func (r *Runner) bsVerifyingConvergence(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, members, ss, primary, primaryName, observe := x.c, x.members, x.ss, x.primary, x.primaryName, func(m Instance) (topology.Snapshot, error) { return x.ss.Observe(m.Pod.Name) }
	ps, err := observe(primary)
	if err != nil {
		return "", nil, err
	}
	snaps := map[string]topology.Snapshot{primaryName: ps}
	var pending []string
	for _, m := range members {
		if m.Pod.Name == primaryName || quarantined(c, m.Pod.Name) {
			continue
		}
		s, err := observe(m)
		if err != nil {
			return "", nil, err
		}
		snaps[m.Pod.Name] = s
		why, err := ss.caughtUp(m.Pod.Name, s, primaryName, specs.PodHost(c, primaryName), ps)
		if err != nil {
			return "", nil, err
		}
		if why != "" {
			pending = append(pending, why)
		}
	}
	if len(pending) > 0 {
		return "", nil, notYet("waiting for replicas: %s", strings.Join(pending, "; "))
	}
	for name := range snaps {
		if name != primaryName {
			if err := r.labelRole(ctx, c, name, v1.RoleReplica); err != nil {
				return "", nil, err
			}
		}
	}
	semi, err := r.settleSemiSync(ctx, x, primaryName, ps, len(snaps)-1)
	if err != nil {
		return "", nil, err
	}
	bounds := absentBounds(ctx, x)
	now := metav1.NewTime(r.Clock())
	instances := r.instanceStatuses(c, members, snaps, primaryName)
	for _, i := range c.Status.Instances {
		if _, left := x.absent[i.Name]; left {
			// As last observed (its server_id identifies it to the primary's list of
			// replicas, see internal/supervisor's trackAbsence), not dropped.
			instances = append(instances, i)
		}
	}
	sort.SliceStable(instances, func(i, j int) bool { return instances[i].Ordinal < instances[j].Ordinal })
	return stageDone, func(s *v1.MysqlClusterStatus) {
		op := s.Operation
		s.Instances = instances
		s.ReadyInstances = int32(len(snaps))
		s.Ready = fmt.Sprintf("%d/%d", len(snaps), c.Spec.Replicas)
		s.ObservedGeneration = c.Generation
		// Healthy, with a fresh count of failed checks, judged now by this operation; the last
		// failover's time stays, so the cooldown still counts from it after a converge.
		ha := &v1.HAStatus{State: v1.HAHealthy, Since: &now, JudgedAt: &now, JudgedBy: op.Type}
		if s.HA != nil {
			ha.LastFailover = s.HA.LastFailover
			if s.HA.State == v1.HAHealthy && s.HA.Since != nil {
				ha.Since = s.HA.Since
			}
		}
		s.HA = ha
		s.Phase = v1.PhaseRunning
		msg := fmt.Sprintf("primary %s; %d replica(s) proven to replicate from it", primaryName, len(snaps)-1)
		ready := metav1.ConditionTrue
		if len(s.ErrantInstances) > 0 {
			s.Phase = v1.PhaseDegraded
			ready = metav1.ConditionFalse
			msg += fmt.Sprintf("; %d instance(s) quarantined", len(s.ErrantInstances))
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "Quarantined", Message: msg})
		} else {
			clearResolvedDegraded(s, msg)
		}
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: ready, Reason: "ReplicationProven", Message: msg})
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "PrimaryWritable", Message: "primary " + primaryName + " is writable"})
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: "bootstrap finished"})
		if op.Type == OperationConverge {
			msg = "replicas re-joined: " + msg
		}
		if len(x.absent) > 0 {
			msg += "; left out, not answering (recorded absent): " + strings.Join(RecordAbsent(s, x.absent, bounds, op.ID, now.Time), ", ")
		}
		s.History = append([]v1.OperationRecord{{
			ID: op.ID, Type: op.Type, Result: "Succeeded", StartedAt: op.StartedAt, FinishedAt: now, Message: msg,
			DurationMilliseconds: now.Sub(opStart(op)).Milliseconds(),
		}}, s.History...)
		if len(s.History) > 20 {
			s.History = s.History[:20]
		}
		s.Operation = nil
		semi(s)
	}, nil
}

// enableSemiSyncSource makes the primary wait for the acknowledgements the spec asks for.
func (r *Runner) enableSemiSyncSource(ctx context.Context, c *v1.MysqlCluster, in *topology.Instance) error {
	spec := topology.SemiSyncSourceSpec{Timeout: 24 * time.Hour, WaitForReplicas: int(c.Spec.SemiSync.WaitForReplicas)}
	if c.Spec.SemiSync.Timeout != nil {
		spec.Timeout = c.Spec.SemiSync.Timeout.Duration
	}
	return in.EnableSemiSyncSource(ctx, spec)
}

// flavorMatches refuses an instance whose server is not of the flavor the spec names: the
// my.cnf was rendered in spec.flavor's dialect, so the mismatch is an error to fix, never
// something to guess around.
func flavorMatches(c *v1.MysqlCluster, name string, s topology.Snapshot) error {
	want := c.Spec.Flavor
	if want == "" {
		want = v1.FlavorFromImage(c.Spec.Image)
	}
	if want == v1.FlavorMariaDB && s.Flavor.IsMySQL() || want == v1.FlavorMySQL && s.Flavor.IsMariaDB() {
		return fmt.Errorf("%w: spec.flavor is %s but %s reports %s: its configuration was rendered for the wrong server; set spec.flavor to match the image", outcome.ErrUnsafe, want, name, s.Flavor.VersionString)
	}
	return nil
}

// RecordAbsent records the members a converge left out because they did not answer, keeping
// what is recorded of those already absent (their bound above all: only the supervisor's
// observation passes know one), and returns their names, sorted.
func RecordAbsent(s *v1.MysqlClusterStatus, absent, bounds map[string]string, opID string, now time.Time) []string {
	names := make([]string, 0, len(absent))
	for name := range absent {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if i := slices.IndexFunc(s.AbsentInstances, func(a v1.AbsentInstance) bool { return a.Name == name }); i >= 0 {
			// The converge's bound (the primary's position read after its replica list, which
			// does not name the member) is read now: it is at least the recorded one, which the
			// member may have passed since (reconnecting between two passes). The higher bound
			// is the safe one.
			if a := &s.AbsentInstances[i]; bounds[name] != "" && a.Bound != bounds[name] {
				a.Reason, _, _ = strings.Cut(a.Reason, "; "+NoBoundYet)
				a.Reason, _, _ = strings.Cut(a.Reason, "; "+boundByConverge)
				a.Bound, a.Reason = bounds[name], a.Reason+"; "+boundByConverge
			}
			continue
		}
		a := v1.AbsentInstance{
			Name: name, Since: metav1.NewTime(now.Truncate(time.Second)),
			Reason: "did not answer the converge " + opID + ": " + absent[name] + "; " + NoBoundYet,
		}
		if bounds[name] != "" {
			a.Bound, a.Reason = bounds[name], "did not answer the converge "+opID+": "+absent[name]+"; "+boundByConverge
		}
		s.AbsentInstances = append(s.AbsentInstances, a)
	}
	sort.Slice(s.AbsentInstances, func(i, j int) bool { return s.AbsentInstances[i].Name < s.AbsentInstances[j].Name })
	return names
}

// NoBoundYet ends the reason of an absence recorded without a bound.
const NoBoundYet = "no bound known yet (a supervisor's observation passes record one)"

// boundByConverge says where a converge's bound comes from.
const boundByConverge = "bound: the primary's position read after its list of connected replicas did not name it"

// absentBounds bounds the members a converge left out: a member the primary's list of connected
// replicas does not name (by its recorded server_id) received at most the primary's position read
// after that list. A member named, or one whose server_id is unknown, gets no bound here.
func absentBounds(ctx context.Context, x *stageEnv) map[string]string {
	if len(x.absent) == 0 {
		return nil
	}
	in, err := x.ss.Connect(x.primaryName)
	if err != nil {
		return nil
	}
	ids, err := in.ReplicaServerIDs(ctx)
	if err != nil {
		return nil
	}
	ps, err := x.ss.Observe(x.primaryName)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, i := range x.c.Status.Instances {
		if _, left := x.absent[i.Name]; left && i.ServerID != 0 && !slices.Contains(ids, uint32(i.ServerID)) {
			out[i.Name] = BoundOf(ps)
		}
	}
	return out
}

// resolvedByConvergence are the reasons of a Degraded condition that a finished converge (the
// recorded primary writable, every member replicating from it or recorded absent, nothing
// quarantined) proves over: what they said (a refused or rolled back failover, a lost or
// unreachable primary, a withheld automatic failover, a quarantine) is no longer the cluster's
// state. Others (an upgrade stopped, semi-sync inactive, a stage that stopped) have their own
// way out.
var resolvedByConvergence = []string{"FailoverRefused", "FailoverRolledBack", ReasonNewPrimaryLost, "PrimaryUnreachable", ReasonFailoverWithheld, "Quarantined"}

// clearResolvedDegraded ends a Degraded condition a finished converge proved over, so that
// status says what the cluster is now (msg, the converge's finding) rather than what it was.
func clearResolvedDegraded(s *v1.MysqlClusterStatus, msg string) {
	d := meta.FindStatusCondition(s.Conditions, v1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || !slices.Contains(resolvedByConvergence, d.Reason) {
		return
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "Converged", Message: msg})
}
