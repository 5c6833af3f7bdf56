// Package metrics exports what `watch` sees and does as Prometheus metrics. Every series
// carries the labels namespace and cluster (and instance where it is per instance). Names follow
// Prometheus conventions: the mysqlctl_ prefix, base units (seconds), _total counters.
//
// Sources: the supervisor's Observer hooks (checks, decisions, instance observations, which
// clusters this process supervises) and the MysqlCluster objects an informer delivers (HA
// state, phase, spec, and the operation history, from which failovers, switchovers and
// operation durations are counted once each).
package metrics

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/supervisor"
)

// haStates are the values of the state label of mysqlctl_cluster_ha_state.
var haStates = []v1.HAState{v1.HAHealthy, v1.HASuspected, v1.HAFailoverRequired, v1.HAFailoverInProgress, v1.HAVerifying, v1.HADegraded}

// Recorder holds the metrics of one process. It implements supervisor.Observer.
type Recorder struct {
	reg *prometheus.Registry

	leader, supervised, available, healthy, degraded, haState, lastCheck          *prometheus.GaugeVec
	semiSyncRequired, semiSyncActive, instances, instancesUp, errant, primaryRole *prometheus.GaugeVec
	instanceUp, ioRunning, sqlRunning, lag                                        *prometheus.GaugeVec
	backupConfigured, backupRunning, backupLastSuccess, backupLastFailure         *prometheus.GaugeVec
	backupDuration, backupStored, backupRead                                      *prometheus.GaugeVec
	backupFailures                                                                *prometheus.CounterVec
	backupScheduleNext, backupScheduleMissed                                      *prometheus.GaugeVec
	failovers, switchovers, refused, checks, checkErrors                          *prometheus.CounterVec
	opDuration, decision, checkDuration                                           *prometheus.HistogramVec

	start time.Time
	mu    sync.Mutex
	seen  map[client.ObjectKey]map[string]bool // history records already counted
	insts map[client.ObjectKey][]string        // instances with per-instance series
	// supervising holds since when this process supervises each cluster, checked when it last
	// checked its primary (for /healthz).
	supervising, checked map[client.ObjectKey]time.Time
}

var _ supervisor.Observer = (*Recorder)(nil)

const ns = "mysqlctl"

var (
	clusterLabels  = []string{"namespace", "cluster"}
	instanceLabels = []string{"namespace", "cluster", "instance"}
)

// New builds a Recorder with its own registry (Go and process collectors included).
func New() *Recorder {
	m := &Recorder{reg: prometheus.NewRegistry(), start: time.Now(), seen: map[client.ObjectKey]map[string]bool{}, insts: map[client.ObjectKey][]string{},
		supervising: map[client.ObjectKey]time.Time{}, checked: map[client.ObjectKey]time.Time{}}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, labels)
		m.reg.MustRegister(g)
		return g
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets}, labels)
		m.reg.MustRegister(h)
		return h
	}
	m.leader = gauge("leader", "1 when this process is the leader of its watch deployment (always 1 without --leader-elect).")
	m.supervised = gauge("cluster_supervised", "1 while this process supervises the cluster (holds its Lease NAME-watch).", clusterLabels...)
	m.available = gauge("cluster_available", "1 when the last check found the primary answering and writable.", clusterLabels...)
	m.lastCheck = gauge("cluster_last_check_timestamp_seconds", "When this process last checked the primary (Unix time); kept after it stops supervising, so max over processes goes stale when nobody checks.", clusterLabels...)
	m.healthy = gauge("cluster_healthy", "1 when the cluster's HA state is Healthy.", clusterLabels...)
	m.degraded = gauge("cluster_degraded", "1 when the cluster's phase is Degraded (the Degraded condition says why).", clusterLabels...)
	m.haState = gauge("cluster_ha_state", "1 for the cluster's current HA state (status.ha.state), 0 for the others.", "namespace", "cluster", "state")
	m.semiSyncRequired = gauge("cluster_semisync_required", "1 when the spec asks for semi-synchronous replication (enabled, more than one instance).", clusterLabels...)
	m.semiSyncActive = gauge("semisync_source_active", "1 when the primary reports semi-sync active (waiting for acknowledgements).", clusterLabels...)
	m.instances = gauge("cluster_instances", "Instances the spec asks for (spec.replicas).", clusterLabels...)
	m.instancesUp = gauge("cluster_instances_up", "Instances that answered the last observation.", clusterLabels...)
	m.errant = gauge("cluster_errant_instances", "Instances whose transactions are not an ancestor of the primary's (errant), observed or quarantined.", clusterLabels...)
	m.primaryRole = gauge("instance_primary", "1 for the instance recorded as primary.", instanceLabels...)
	m.instanceUp = gauge("instance_up", "1 when the instance answered the last observation.", instanceLabels...)
	m.ioRunning = gauge("replication_io_running", "1 when the replica's IO (receiver) thread runs and is connected to its source.", instanceLabels...)
	m.sqlRunning = gauge("replication_sql_running", "1 when the replica's SQL (applier) thread runs.", instanceLabels...)
	m.lag = gauge("replication_lag_seconds", "Replication lag the replica reports (Seconds_Behind_Master); absent when unknown.", instanceLabels...)
	m.failovers = counter("failovers_total", "Failovers finished, by result (Succeeded, Failed, Aborted, …), from the cluster's history.", "namespace", "cluster", "result")
	m.switchovers = counter("switchovers_total", "Switchovers finished, by result, from the cluster's history.", "namespace", "cluster", "result")
	m.refused = counter("failovers_refused_total", "Automatic failovers refused before they began (the primary answered after all, or the replicas disagreed).", clusterLabels...)
	m.checks = counter("checks_total", "Checks of the primary.", clusterLabels...)
	m.checkErrors = counter("check_errors_total", "Checks of the primary that did not find it answering and writable.", clusterLabels...)
	m.backupConfigured = gauge("backup_configured", "1 when the cluster names a bucket for its backups (spec.backup).", clusterLabels...)
	m.backupRunning = gauge("backup_running", "1 while a backup of the cluster runs (status.backup.running).", clusterLabels...)
	m.backupLastSuccess = gauge("backup_last_success_timestamp_seconds", "When the cluster's last successful backup finished (Unix time); absent when it has none.", clusterLabels...)
	m.backupLastFailure = gauge("backup_last_failure_timestamp_seconds", "When the cluster's last failed backup ended (Unix time); absent when none failed.", clusterLabels...)
	m.backupDuration = gauge("backup_last_duration_seconds", "Duration of the cluster's last successful backup, from its start to its manifest.", clusterLabels...)
	m.backupStored = gauge("backup_last_stored_bytes", "Bytes the cluster's last successful backup stored in the bucket (compressed).", clusterLabels...)
	m.backupRead = gauge("backup_last_read_bytes", "Bytes of data the cluster's last successful backup read from its source.", clusterLabels...)
	m.backupFailures = counter("backup_failures_total", "Backups that failed, as this process saw them end (status.backup.lastFailure).", clusterLabels...)
	m.backupScheduleNext = gauge("backup_schedule_next_timestamp_seconds", "When the next scheduled backup is due (Unix time; status.backup.schedule); absent without a kept schedule.", clusterLabels...)
	m.backupScheduleMissed = gauge("backup_schedule_missed", "Schedule times no backup was taken for since the schedule was set (status.backup.schedule); absent without a kept schedule.", clusterLabels...)
	m.opDuration = histogram("operation_duration_seconds", "Duration of finished operations, by type and result.",
		[]float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800}, "namespace", "cluster", "type", "result")
	m.decision = histogram("failover_decision_seconds", "Time from the first failed check of the primary to the automatic failover decision.",
		[]float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60}, clusterLabels...)
	m.checkDuration = histogram("check_duration_seconds", "Duration of one check of the primary.",
		[]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2}, clusterLabels...)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.leader.WithLabelValues().Set(1)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry the metrics are in (tests gather from it).
func (m *Recorder) Registry() *prometheus.Registry { return m.reg }

// SetLeader records whether this process leads.
func (m *Recorder) SetLeader(on bool) { m.leader.WithLabelValues().Set(b(on)) }

func b(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

// Supervising implements supervisor.Observer.
func (m *Recorder) Supervising(key client.ObjectKey, on bool) {
	m.supervised.WithLabelValues(key.Namespace, key.Name).Set(b(on))
	m.mu.Lock()
	if on {
		m.supervising[key] = time.Now()
	} else {
		delete(m.supervising, key)
	}
	m.mu.Unlock()
	if !on {
		// Only the supervising process reports what it observes.
		m.available.DeleteLabelValues(key.Namespace, key.Name)
		m.forgetInstances(key)
	}
}

// Checked implements supervisor.Observer.
func (m *Recorder) Checked(key client.ObjectKey, ch failover.Check, took time.Duration) {
	ok := ch.Reachable && ch.Writable
	m.checks.WithLabelValues(key.Namespace, key.Name).Inc()
	if !ok {
		m.checkErrors.WithLabelValues(key.Namespace, key.Name).Inc()
	}
	m.available.WithLabelValues(key.Namespace, key.Name).Set(b(ok))
	now := time.Now()
	m.lastCheck.WithLabelValues(key.Namespace, key.Name).Set(float64(now.UnixMilli()) / 1000)
	m.mu.Lock()
	m.checked[key] = now
	m.mu.Unlock()
	m.checkDuration.WithLabelValues(key.Namespace, key.Name).Observe(took.Seconds())
}

// Stalled names a cluster this process has supervised for longer than maxAge without
// checking its primary in the last maxAge (a hung supervisor: /healthz fails, and the pod is
// restarted), or returns "".
func (m *Recorder) Stalled(maxAge time.Duration) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for key, since := range m.supervising {
		if now.Sub(since) > maxAge && now.Sub(m.checked[key]) > maxAge {
			return key.String()
		}
	}
	return ""
}

// Decided implements supervisor.Observer.
func (m *Recorder) Decided(key client.ObjectKey, since time.Duration) {
	m.decision.WithLabelValues(key.Namespace, key.Name).Observe(since.Seconds())
}

// Refused implements supervisor.Observer.
func (m *Recorder) Refused(key client.ObjectKey) {
	m.refused.WithLabelValues(key.Namespace, key.Name).Inc()
}

// Instances implements supervisor.Observer.
func (m *Recorder) Instances(key client.ObjectKey, views []supervisor.InstanceView) {
	// Series are updated in place and only those that no longer apply are deleted: a scrape
	// never finds an instance's series missing between two passes (which would restart the
	// `for:` timers of the alerts on them).
	up, errant := 0, 0
	active := false
	var names []string
	for _, v := range views {
		l := []string{key.Namespace, key.Name, v.Name}
		names = append(names, v.Name)
		m.instanceUp.WithLabelValues(l...).Set(b(v.Up))
		m.primaryRole.WithLabelValues(l...).Set(b(v.Primary))
		if v.Up {
			up++
		}
		if v.Errant {
			errant++
		}
		if v.Primary {
			active = v.SemiSyncSourceActive
		}
		if v.Primary || !v.Up {
			m.ioRunning.DeleteLabelValues(l...)
			m.sqlRunning.DeleteLabelValues(l...)
			m.lag.DeleteLabelValues(l...)
			continue
		}
		m.ioRunning.WithLabelValues(l...).Set(b(v.Replicating && v.IORunning))
		m.sqlRunning.WithLabelValues(l...).Set(b(v.Replicating && v.SQLRunning))
		if v.LagSeconds != nil {
			m.lag.WithLabelValues(l...).Set(float64(*v.LagSeconds))
		} else {
			m.lag.DeleteLabelValues(l...)
		}
	}
	m.mu.Lock()
	old := m.insts[key]
	m.insts[key] = names
	m.mu.Unlock()
	for _, n := range old {
		if !slices.Contains(names, n) {
			m.deleteInstance(key, n)
		}
	}
	m.instancesUp.WithLabelValues(key.Namespace, key.Name).Set(float64(up))
	m.semiSyncActive.WithLabelValues(key.Namespace, key.Name).Set(b(active))
	m.errant.WithLabelValues(key.Namespace, key.Name).Set(float64(errant))
}

// deleteInstance deletes every per-instance series of one instance.
func (m *Recorder) deleteInstance(key client.ObjectKey, name string) {
	for _, g := range []*prometheus.GaugeVec{m.instanceUp, m.primaryRole, m.ioRunning, m.sqlRunning, m.lag} {
		g.DeleteLabelValues(key.Namespace, key.Name, name)
	}
}

// forgetInstances deletes the per-instance series of the cluster (an instance removed, or the
// cluster no longer supervised here, leaves no stale series).
func (m *Recorder) forgetInstances(key client.ObjectKey) {
	m.mu.Lock()
	names := m.insts[key]
	delete(m.insts, key)
	m.mu.Unlock()
	for _, n := range names {
		m.deleteInstance(key, n)
	}
	if names != nil {
		m.instancesUp.DeleteLabelValues(key.Namespace, key.Name)
		m.semiSyncActive.DeleteLabelValues(key.Namespace, key.Name)
		m.errant.DeleteLabelValues(key.Namespace, key.Name)
	}
}

// Cluster records what the cluster object says: HA state, phase, spec, and operations that
// finished since this process started (each counted once).
func (m *Recorder) Cluster(c *v1.MysqlCluster) {
	l := []string{c.Namespace, c.Name}
	state := v1.HAState("")
	if c.Status.HA != nil {
		state = c.Status.HA.State
	}
	for _, s := range haStates {
		m.haState.WithLabelValues(c.Namespace, c.Name, string(s)).Set(b(s == state))
	}
	m.healthy.WithLabelValues(l...).Set(b(state == v1.HAHealthy))
	m.degraded.WithLabelValues(l...).Set(b(c.Status.Phase == v1.PhaseDegraded))
	m.instances.WithLabelValues(l...).Set(float64(c.Spec.Replicas))
	m.semiSyncRequired.WithLabelValues(l...).Set(b(c.Spec.Replicas > 1 && (c.Spec.SemiSync.Enabled == nil || *c.Spec.SemiSync.Enabled)))
	// Counters exist from 0, so that increase() sees the first failover of a cluster.
	for _, r := range []string{"Succeeded", "Failed", "Aborted"} {
		m.failovers.WithLabelValues(c.Namespace, c.Name, r).Add(0)
		m.switchovers.WithLabelValues(c.Namespace, c.Name, r).Add(0)
	}
	m.refused.WithLabelValues(l...).Add(0)
	key := client.ObjectKeyFromObject(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := m.seen[key]
	if seen == nil {
		seen = map[string]bool{}
		m.seen[key] = seen
	}
	m.backups(c, seen)
	for _, h := range c.Status.History {
		if seen[h.ID] || h.FinishedAt.Time.Before(m.start.Truncate(time.Second)) {
			continue
		}
		seen[h.ID] = true
		switch h.Type {
		case orchestrate.OperationFailover:
			m.failovers.WithLabelValues(c.Namespace, c.Name, h.Result).Inc()
		case orchestrate.OperationSwitchover:
			m.switchovers.WithLabelValues(c.Namespace, c.Name, h.Result).Inc()
		}
		d := h.FinishedAt.Sub(h.StartedAt.Time).Seconds()
		if h.DurationMilliseconds > 0 {
			d = float64(h.DurationMilliseconds) / 1000
		}
		m.opDuration.WithLabelValues(c.Namespace, c.Name, h.Type, h.Result).Observe(d)
	}
}

// backups records the cluster's backup status; a failure is counted once (seen) and only when it
// ended after this process started.
func (m *Recorder) backups(c *v1.MysqlCluster, seen map[string]bool) {
	l := []string{c.Namespace, c.Name}
	m.backupConfigured.WithLabelValues(l...).Set(b(c.Spec.Backup != nil && c.Spec.Backup.Bucket != ""))
	st := c.Status.Backup
	if st == nil {
		st = &v1.BackupStatus{}
	}
	m.backupRunning.WithLabelValues(l...).Set(b(st.Running != nil))
	if rec := st.Schedule; rec != nil && c.Spec.Backup != nil && rec.Schedule == c.Spec.Backup.Schedule && rec.Next != nil {
		m.backupScheduleNext.WithLabelValues(l...).Set(float64(rec.Next.Unix()))
		m.backupScheduleMissed.WithLabelValues(l...).Set(float64(rec.Missed))
	} else {
		m.backupScheduleNext.DeleteLabelValues(l...)
		m.backupScheduleMissed.DeleteLabelValues(l...)
	}
	m.backupFailures.WithLabelValues(l...).Add(0)
	if last := st.Last; last != nil {
		m.backupLastSuccess.WithLabelValues(l...).Set(float64(last.FinishedAt.Unix()))
		m.backupDuration.WithLabelValues(l...).Set(last.FinishedAt.Sub(last.StartedAt.Time).Seconds())
		m.backupStored.WithLabelValues(l...).Set(float64(last.StoredBytes))
		m.backupRead.WithLabelValues(l...).Set(float64(last.RawBytes))
	} else {
		for _, g := range []*prometheus.GaugeVec{m.backupLastSuccess, m.backupDuration, m.backupStored, m.backupRead} {
			g.DeleteLabelValues(l...)
		}
	}
	f := st.LastFailure
	if f == nil {
		m.backupLastFailure.DeleteLabelValues(l...)
		return
	}
	m.backupLastFailure.WithLabelValues(l...).Set(float64(f.FinishedAt.Unix()))
	if id := "backup/" + f.ID; !seen[id] && !f.FinishedAt.Time.Before(m.start.Truncate(time.Second)) {
		seen[id] = true
		m.backupFailures.WithLabelValues(l...).Inc()
	}
}

// Forget deletes every series of a deleted cluster.
func (m *Recorder) Forget(key client.ObjectKey) {
	m.forgetInstances(key)
	m.mu.Lock()
	delete(m.seen, key)
	m.mu.Unlock()
	match := prometheus.Labels{"namespace": key.Namespace, "cluster": key.Name}
	for _, g := range []*prometheus.GaugeVec{m.supervised, m.available, m.healthy, m.degraded, m.haState, m.semiSyncRequired, m.instances, m.lastCheck,
		m.backupConfigured, m.backupRunning, m.backupLastSuccess, m.backupLastFailure, m.backupDuration, m.backupStored, m.backupRead,
		m.backupScheduleNext, m.backupScheduleMissed} {
		g.DeletePartialMatch(match)
	}
	for _, c := range []*prometheus.CounterVec{m.failovers, m.switchovers, m.refused, m.backupFailures} {
		c.DeletePartialMatch(match)
	}
	m.mu.Lock()
	delete(m.supervising, key)
	delete(m.checked, key)
	m.mu.Unlock()
}
