package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// StatusOptions holds the status command's flags.
type StatusOptions struct {
	f *cmdutil.Factory

	Name   string
	Output string
}

// NewCmdStatus shows one cluster in detail.
func NewCmdStatus(f *cmdutil.Factory, runF func(*StatusOptions) error) *cobra.Command {
	o := &StatusOptions{f: f}
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a cluster's health, instances and current operation",
		Long: `Status prints a one-line health verdict, the operation in progress (with its stage), the
primary's health as last judged (the ha line), and one row per instance: role, replication
state, executed GTIDs, lag, restarts and pod state. Roles, replication state and GTIDs are what
mysqlctl last proved and recorded in the cluster's status; pod state and restarts are read live
from Kubernetes.

The ha line says who supervises the cluster now (the holder of its NAME-watch Lease). A 'watch'
that supervises it keeps its judgement current; otherwise the judgement is the last one made (by
a watch that has stopped, or by a reconcile that found the cluster converged) and counts as
current for a minute (at least three detection intervals): older, it is shown as "last judged
... ago, not current", never as the state now. Without a TTY the ha-judged, ha-judged-by,
ha-current and supervisor rows say the same for scripts, and -o json|yaml adds a "supervision"
object beside the cluster's fields.

A lag of "-" means unknown (the server reported NULL), never zero.`,
		Example: example(f,
			"# Health at a glance",
			"%[1]s status demo",
			"# Everything recorded, for scripts",
			"%[1]s status demo -o json"),
		Args: cmdutil.ExactArgs(1, "the NAME of the cluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := cmdutil.ValidateOutput(o.Output, cmdutil.OutputTable, cmdutil.OutputWide, cmdutil.OutputJSON, cmdutil.OutputYAML); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmdutil.AddOutputFlag(cmd, &o.Output, cmdutil.OutputTable, cmdutil.OutputWide, cmdutil.OutputJSON, cmdutil.OutputYAML)
	return cmd
}

// Run prints the status.
func (o *StatusOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, cluster, err := loadCluster(ctx, o.f, o.Name)
	if err != nil {
		return err
	}
	ns := cluster.Namespace
	ios := o.f.IOStreams
	now := o.f.Clock()
	sup, err := orchestrate.SupervisorOf(ctx, c, cluster)
	if err != nil {
		// Without the Lease no watch can be seen behind the record: it is judged on its own age.
		fmt.Fprintf(ios.ErrOut, "warning: %v\n", cmdutil.ExplainAPIError(err))
	}
	judged := orchestrate.JudgeHA(cluster, sup, now)
	if o.Output == cmdutil.OutputJSON || o.Output == cmdutil.OutputYAML {
		cluster.APIVersion, cluster.Kind = v1.GroupVersion.String(), "MysqlCluster"
		cluster.ManagedFields = nil
		return cmdutil.PrintStructured(ios.Out, o.Output, statusDocument{MysqlCluster: cluster, Supervision: judged})
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(specs.SelectorLabels(cluster))); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	level, verdict := Verdict(cluster, byName)
	printStatusHeader(ios, cluster, level, verdict, judged, now)
	headers := []string{"instance", "role", "state", "gtid", "lag", "restarts", "pod"}
	if o.Output == cmdutil.OutputWide {
		headers = append(headers, "version", "io", "sql", "last error")
	}
	t := cmdutil.NewTable(ios, headers...)
	recorded := map[string]v1.InstanceStatus{}
	for _, in := range cluster.Status.Instances {
		recorded[in.Name] = in
	}
	rows := cluster.Spec.Replicas
	if sc := cluster.Status.Scale; sc != nil {
		rows = max(rows, sc.Replicas) // a scale down in progress: the pods still there
	}
	for ord := int32(0); ord < rows; ord++ {
		name := fmt.Sprintf("%s-%d", cluster.Name, ord)
		in := recorded[name]
		role := string(in.Role)
		p := byName[name]
		if p != nil && p.Labels[specs.LabelRole] != "" {
			role = p.Labels[specs.LabelRole]
		}
		lag := "-"
		if in.LagSeconds != nil {
			lag = fmt.Sprintf("%ds", *in.LagSeconds)
		}
		restarts, podState := "-", "missing"
		if p != nil {
			var n int32
			for _, cs := range p.Status.ContainerStatuses {
				n += cs.RestartCount
			}
			restarts = fmt.Sprint(n)
			podState = string(p.Status.Phase)
			if podReadyCondition(p) {
				podState += "/Ready"
			}
		}
		row := []string{name, dash(role), dash(in.Classification), dash(in.GTIDExecuted), lag, restarts, podState}
		if o.Output == cmdutil.OutputWide {
			row = append(row, dash(in.Version), dash(in.IOThread), dash(in.SQLThread), dash(in.LastError))
		}
		t.AddRow(row...)
	}
	return t.Render()
}

// printStatusHeader prints the verdict, the operation and the ha line: styled on a terminal
// (a judgement that is not current in the warning colour), else as tab-separated rows with the
// judgement's time, judge, currency and supervisor in rows of their own.
func printStatusHeader(ios *iostreams.IOStreams, cluster *v1.MysqlCluster, level, verdict string, judged orchestrate.HAJudgement, now time.Time) {
	op := "none"
	if x := cluster.Status.Operation; x != nil {
		op = fmt.Sprintf("%s %s, stage %s", x.Type, x.ID, x.Stage)
		if x.Message != "" {
			op += ": " + x.Message
		}
	}
	if sc := cluster.Status.Scale; sc != nil {
		op += "; " + scaleLine(cluster, sc)
	}
	ha := haLine(cluster, judged, now)
	backup, hasBackup := backupLine(cluster, now)
	if !ios.IsStdoutTTY() {
		fmt.Fprintf(ios.Out, "cluster\t%s\nphase\t%s\nverdict\t%s: %s\noperation\t%s\nha\t%s\n", cluster.Name, dash(string(cluster.Status.Phase)), level, verdict, op, ha)
		if hasBackup {
			fmt.Fprintf(ios.Out, "backup\t%s\n", backup)
		}
		judgedAt := ""
		if judged.JudgedAt != nil {
			judgedAt = judged.JudgedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(ios.Out, "ha-judged\t%s\nha-judged-by\t%s\nha-current\t%t\nsupervisor\t%s\n", dash(judgedAt), dash(judged.JudgedBy), judged.Current, dash(judged.Supervisor))
		return
	}
	st := ios.Styles()
	styled := map[string]func(string) string{"healthy": st.Success, "attention": st.Warning, "degraded": st.Error}[level]
	if styled == nil {
		styled = st.Bold
	}
	if cluster.Status.HA != nil && !judged.Current {
		ha = st.Warning(ha) // a past judgement, not the cluster now
	}
	fmt.Fprintf(ios.Out, "%s  %s  %s\n", st.Bold(cluster.Name), dash(string(cluster.Status.Phase)), styled(level+": "+verdict))
	fmt.Fprintf(ios.Out, "%s %s\n", st.Faint("operation:"), op)
	if hasBackup {
		fmt.Fprintf(ios.Out, "%s %s\n", st.Faint("ha:"), ha)
		fmt.Fprintf(ios.Out, "%s %s\n\n", st.Faint("backup:"), backup)
		return
	}
	fmt.Fprintf(ios.Out, "%s %s\n\n", st.Faint("ha:"), ha)
}

// backupLine describes the cluster's backups: the one running, the last that succeeded, and a
// failure since. ok is false for a cluster that has no bucket and never had a backup.
func backupLine(c *v1.MysqlCluster, now time.Time) (line string, ok bool) {
	st := c.Status.Backup
	if st == nil {
		st = &v1.BackupStatus{}
	}
	if c.Spec.Backup == nil && st.Running == nil && st.Last == nil && st.LastFailure == nil {
		return "", false
	}
	var parts []string
	if r := st.Running; r != nil {
		run := fmt.Sprintf("%s running for %s, stage %s", r.ID, ago(now, r.StartedAt.Time), r.Stage)
		if r.Source != "" {
			run += " from " + r.Source
		}
		if r.Message != "" {
			run += ": " + r.Message
		}
		parts = append(parts, run)
	}
	if l := st.Last; l != nil {
		parts = append(parts, fmt.Sprintf("last %s %s ago: %s stored from %s in %s, at GTID %s", l.ID, ago(now, l.FinishedAt.Time),
			humanBytes(l.StoredBytes), dash(l.Source), l.FinishedAt.Sub(l.StartedAt.Time).Round(time.Second), dash(l.GTIDPosition)))
	} else {
		parts = append(parts, "no successful backup yet ('backup create "+c.Name+"' takes one)")
	}
	if f := st.LastFailure; f != nil && (st.Last == nil || f.FinishedAt.After(st.Last.FinishedAt.Time)) {
		parts = append(parts, fmt.Sprintf("failed since: %s %s ago: %s", f.ID, ago(now, f.FinishedAt.Time), f.Message))
	}
	if sched := scheduleLine(c, now); sched != "" {
		parts = append(parts, sched)
	}
	if rule, ok := catalog.RetentionOf(c); ok {
		parts = append(parts, "retention: "+rule.String())
	}
	if b := c.Spec.Backup; b != nil && b.Encryption != nil {
		parts = append(parts, fmt.Sprintf("encrypted to %d age key(s)", len(b.Encryption.Recipients)))
	}
	return strings.Join(parts, "; "), true
}

// scheduleLine describes how spec.backup.schedule is kept: the next time due and the times
// missed ("" without a schedule).
func scheduleLine(c *v1.MysqlCluster, now time.Time) string {
	if c.Spec.Backup == nil || c.Spec.Backup.Schedule == "" {
		return ""
	}
	expr := c.Spec.Backup.Schedule
	var rec *v1.BackupScheduleStatus
	if c.Status.Backup != nil {
		rec = c.Status.Backup.Schedule
	}
	if rec == nil || rec.Schedule != expr {
		return fmt.Sprintf("schedule %q not kept yet (a running 'watch %s' keeps it)", expr, c.Name)
	}
	line := fmt.Sprintf("schedule %q", expr)
	if rec.Next != nil {
		if rec.Next.After(now) {
			line += fmt.Sprintf(", next %s (in %s)", rec.Next.UTC().Format("2006-01-02 15:04 MST"), duration.HumanDuration(rec.Next.Sub(now)))
		} else {
			line += fmt.Sprintf(", due since %s ago", ago(now, rec.Next.Time))
		}
	}
	if rec.Missed > 0 && rec.LastMissed != nil {
		line += fmt.Sprintf(", %d missed (last %s ago: %s)", rec.Missed, ago(now, rec.LastMissed.Time), rec.LastMissedReason)
	}
	return line
}

func podReadyCondition(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Verdict is the one-line health summary: a level (healthy, attention, degraded, busy,
// pending) and a sentence. It is fail-closed: healthy only when the recorded status proves
// replication and every pod is live and ready.
func Verdict(c *v1.MysqlCluster, pods map[string]*corev1.Pod) (level, sentence string) {
	st := c.Status
	if cond := meta.FindStatusCondition(st.Conditions, v1.ConditionDegraded); st.Phase == v1.PhaseDegraded || (cond != nil && cond.Status == "True") {
		msg := "mysqlctl stopped because a step could not be proven safe"
		if cond != nil && cond.Message != "" {
			msg = cond.Message
		}
		return "degraded", msg
	}
	if st.Operation != nil {
		return "busy", fmt.Sprintf("%s in progress at stage %s", st.Operation.Type, st.Operation.Stage)
	}
	if st.Phase == "" || st.Phase == v1.PhasePending || st.CurrentPrimary == "" {
		return "pending", fmt.Sprintf("not bootstrapped yet: run 'reconcile %s'", c.Name)
	}
	var problems []string
	for ord := int32(0); ord < c.Spec.Replicas; ord++ {
		name := fmt.Sprintf("%s-%d", c.Name, ord)
		p := pods[name]
		switch {
		case p == nil:
			problems = append(problems, name+" has no pod")
		case !podReadyCondition(p):
			problems = append(problems, name+" is not ready")
		}
	}
	if cond := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "InstancesDown" {
		problems = append(problems, cond.Message)
	}
	for _, a := range st.AbsentInstances {
		// Its pod may still read Running and Ready (a lost node's pods do): the servers' own
		// silence is what the status records.
		what := a.Name + " does not answer (absent since " + a.Since.UTC().Format(time.RFC3339)
		if a.Bound != "" {
			what += "; a failover passes it once its candidate holds " + a.Bound + ")"
		} else {
			what += "; no bound on what it received: it blocks a failover)"
		}
		problems = append(problems, what)
	}
	if st.ObservedGeneration != c.Generation {
		problems = append(problems, "the spec changed since it was last converged")
	}
	if len(problems) > 0 {
		return "attention", strings.Join(problems, "; ")
	}
	replicas := 0
	for _, in := range st.Instances {
		if in.Role == v1.RoleReplica {
			replicas++
		}
	}
	return "healthy", fmt.Sprintf("primary %s writable; %d replica(s) proven replicating", st.CurrentPrimary, replicas)
}

// statusDocument is what status -o json|yaml prints: the MysqlCluster as recorded and, beside
// it, how current its recorded HA state is. supervision is decided at read time (JudgeHA) and
// never stored, so scripts need not redo that judgement from status.ha and the Lease.
type statusDocument struct {
	*v1.MysqlCluster
	Supervision orchestrate.HAJudgement `json:"supervision"`
}

// haLine says how the primary's health was last judged and who supervises the cluster. A
// current judgement reads as the state now ("Suspected for 12s"); one that is not (no watch
// stands behind it and it is older than HAStaleAfter) is shown as a past judgement with its
// age, never as the state now.
func haLine(c *v1.MysqlCluster, j orchestrate.HAJudgement, now time.Time) string {
	who := "no watch supervises it"
	if j.Supervisor != "" {
		who = "supervised by " + j.Supervisor
	}
	h := c.Status.HA
	if h == nil {
		return who + "; no HA state recorded yet"
	}
	evidence := ""
	if h.State != v1.HAHealthy && len(h.Evidence) > 0 {
		evidence = " (" + h.Evidence[0] + ")"
	}
	var line string
	switch {
	case !j.Current:
		line = "last judged " + string(h.State) + " " + judgedAgo(j, now) + evidence + ", not current"
	default:
		line = string(h.State)
		if h.Since != nil {
			line += " for " + ago(now, h.Since.Time)
		}
		line += evidence
		if j.Supervisor == "" || j.JudgedBy != orchestrate.JudgeWatch {
			line += ", judged " + judgedAgo(j, now) // not the watch that supervises it now
		}
	}
	if h.LastFailover != nil {
		line += "; last failover " + ago(now, h.LastFailover.Time) + " ago"
	}
	if r := c.Status.Request; r != nil && r.State == v1.RequestAccepted {
		line += fmt.Sprintf("; carrying out the %s request %s", r.Type, r.ID)
	}
	return line + "; " + who
}

// judgedAgo says by whom and how long ago the judgement was made: "by a watch 5m ago".
func judgedAgo(j orchestrate.HAJudgement, now time.Time) string {
	by := ""
	if j.JudgedBy != "" {
		by = "by a " + j.JudgedBy + " "
	}
	if j.JudgedAt == nil {
		return by + "at an unknown time"
	}
	return by + ago(now, j.JudgedAt.Time) + " ago"
}

// ago is the time from then to now for a person; a then ahead of now (another machine's clock)
// reads as 0s.
func ago(now, then time.Time) string {
	return duration.HumanDuration(max(now.Sub(then), 0))
}

// scaleLine describes the scale recorded in status: where it goes, the instance in flight and how
// it is seeded, or that it stopped and resume continues it.
func scaleLine(c *v1.MysqlCluster, sc *v1.ScaleStatus) string {
	line := fmt.Sprintf("scale %d -> %d instances", sc.From, sc.To)
	if sc.Action == "rebuild" {
		line = fmt.Sprintf("rebuild of %s-%d", c.Name, sc.Ordinal)
		if sc.Donor != "" {
			line += " from " + sc.Donor
		}
		if sc.Seeded {
			line += ", copied"
		}
		if c.Status.Operation == nil {
			line += " (stopped: 'resume " + c.Name + "' continues it, 'abort " + c.Name + "' ends it)"
		}
		return line
	}
	if sc.Action != "" {
		line += fmt.Sprintf(", %s %s-%d in flight", map[string]string{"add": "adding", "remove": "removing"}[sc.Action], c.Name, sc.Ordinal)
	}
	if sc.SeedMethod != "" {
		line += ", seeded by " + sc.SeedMethod
		if sc.Donor != "" {
			line += " from " + sc.Donor
		}
	}
	if c.Status.Operation == nil {
		line += " (stopped: 'resume " + c.Name + "' continues it)"
	}
	return line
}
