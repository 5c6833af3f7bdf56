package orchestrate

import (
	"slices"
	"strings"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DetectionInterval is how often the supervisor checks the primary (failover.detectionInterval,
// default 1s).
func DetectionInterval(c *v1.MysqlCluster) time.Duration {
	if d := c.Spec.Failover.DetectionInterval; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return time.Second
}

// FailoverCooldown is the least time between two automatic failovers (failover.cooldown,
// default 5m).
func FailoverCooldown(c *v1.MysqlCluster) time.Duration {
	if d := c.Spec.Failover.Cooldown; d != nil {
		return d.Duration
	}
	return 5 * time.Minute
}

// PolicyOf is the automatic-failover policy the spec and the last failover set.
func PolicyOf(c *v1.MysqlCluster) failover.Policy {
	p := failover.Policy{
		Threshold: int(c.Spec.Failover.FailureThreshold), Interval: DetectionInterval(c),
		Auto: c.Spec.Failover.Auto == nil || *c.Spec.Failover.Auto, Paused: c.Spec.Paused, Cooldown: FailoverCooldown(c),
	}
	if h := c.Status.HA; h != nil && h.LastFailover != nil {
		p.LastFailover = h.LastFailover.Time
	}
	return p
}

// ReasonFailoverWithheld is the Degraded reason of an automatic failover the supervisor withheld.
const ReasonFailoverWithheld = "AutomaticFailoverWithheld"

// ClearWithheld ends the Degraded condition of an automatic failover withheld, once the primary
// is judged healthy (msg says how).
func ClearWithheld(s *v1.MysqlClusterStatus, msg string) {
	if d := meta.FindStatusCondition(s.Conditions, v1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue && d.Reason == ReasonFailoverWithheld {
		s.Phase = v1.PhaseRunning
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "PrimaryHealthy", Message: msg})
	}
}

// LastMessage is the newest history message of the type.
func LastMessage(c *v1.MysqlCluster, typ string) string {
	for _, h := range c.Status.History {
		if h.Type == typ {
			return strings.TrimSpace(h.Message)
		}
	}
	return ""
}

// BoundOf is the position a primary serves its replicas: gtid_binlog_pos on MariaDB (what its
// binary log holds), gtid_executed on MySQL.
func BoundOf(s topology.Snapshot) string {
	if s.Flavor.IsMariaDB() {
		return s.GTID.BinlogPos.String()
	}
	return s.GTID.Executed.String()
}

// absences are the recorded absent members as the election weighs them.
func absences(c *v1.MysqlCluster) []failover.Absence {
	var out []failover.Absence
	for _, a := range c.Status.AbsentInstances {
		out = append(out, failover.Absence{Name: a.Name, Bound: a.Bound, Since: a.Since.Time})
	}
	return out
}

// RecordedAbsent reports whether the member is recorded absent.
func RecordedAbsent(c *v1.MysqlCluster, name string) bool {
	return slices.ContainsFunc(c.Status.AbsentInstances, func(a v1.AbsentInstance) bool { return a.Name == name })
}
