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
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
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
		Long: `Status prints a one-line health verdict, the operation in progress (with its stage), and one
row per instance: role, replication state, executed GTIDs, lag, restarts and pod state. Roles,
replication state and GTIDs are what mysqlctl last proved and recorded in the cluster's status;
pod state and restarts are read live from Kubernetes.

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
	if o.Output == cmdutil.OutputJSON || o.Output == cmdutil.OutputYAML {
		cluster.APIVersion, cluster.Kind = v1.GroupVersion.String(), "MysqlCluster"
		cluster.ManagedFields = nil
		return cmdutil.PrintStructured(ios.Out, o.Output, cluster)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(orchestrate.SelectorLabels(cluster))); err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	level, verdict := Verdict(cluster, byName)
	st := ios.Styles()
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
	sup, _ := orchestrate.SupervisorOf(ctx, c, cluster)
	ha := haLine(cluster, sup, time.Now())
	if ios.IsStdoutTTY() {
		styled := map[string]func(string) string{"healthy": st.Success, "attention": st.Warning, "degraded": st.Error}[level]
		if styled == nil {
			styled = st.Bold
		}
		fmt.Fprintf(ios.Out, "%s  %s  %s\n", st.Bold(cluster.Name), dash(string(cluster.Status.Phase)), styled(level+": "+verdict))
		fmt.Fprintf(ios.Out, "%s %s\n", st.Faint("operation:"), op)
		fmt.Fprintf(ios.Out, "%s %s\n\n", st.Faint("ha:"), ha)
	} else {
		fmt.Fprintf(ios.Out, "cluster\t%s\nphase\t%s\nverdict\t%s: %s\noperation\t%s\nha\t%s\n", cluster.Name, dash(string(cluster.Status.Phase)), level, verdict, op, ha)
	}
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
		if p != nil && p.Labels[orchestrate.LabelRole] != "" {
			role = p.Labels[orchestrate.LabelRole]
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

// haLine says who supervises the cluster and the HA state it recorded, with its first piece of
// evidence when it is not Healthy, and a request in progress.
func haLine(c *v1.MysqlCluster, sup orchestrate.Supervision, now time.Time) string {
	who := "no watch supervises it"
	if sup.Holder != "" && sup.RenewedRecently {
		who = "supervised by " + sup.Holder
	}
	h := c.Status.HA
	if h == nil {
		return who + "; no HA state recorded yet"
	}
	line := string(h.State)
	if h.Since != nil {
		line += " for " + duration.HumanDuration(now.Sub(h.Since.Time))
	}
	if h.State != v1.HAHealthy && len(h.Evidence) > 0 {
		line += " (" + h.Evidence[0] + ")"
	}
	if h.LastFailover != nil {
		line += "; last failover " + duration.HumanDuration(now.Sub(h.LastFailover.Time)) + " ago"
	}
	if r := c.Status.Request; r != nil && r.State == v1.RequestAccepted {
		line += fmt.Sprintf("; carrying out the %s request %s", r.Type, r.ID)
	}
	return line + "; " + who
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
