package supervisor

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// Observer is told what a supervisor sees and decides, for metrics. Its methods are called
// from the supervisor's goroutines (one set per cluster) and must not block.
type Observer interface {
	// Supervising says whether this process supervises the cluster (holds its supervisor
	// Lease) from now on.
	Supervising(key client.ObjectKey, on bool)
	// Checked is told every check of the primary and how long it took.
	Checked(key client.ObjectKey, ch failover.Check, took time.Duration)
	// Decided is told an automatic failover decision and the time since the first failed
	// check it counted.
	Decided(key client.ObjectKey, sinceFirstFailure time.Duration)
	// Refused is told an automatic failover that was refused before it began (the primary
	// answered after all, or the replicas disagreed): no operation records it.
	Refused(key client.ObjectKey)
	// Instances is told, every observeEvery, every instance as observed.
	Instances(key client.ObjectKey, views []InstanceView)
}

// InstanceView is one instance as the supervisor's observation pass saw it.
type InstanceView struct {
	Name string
	// Primary is true for the recorded primary.
	Primary bool
	// Up is true when the server answered a complete observation.
	Up bool
	// Replicating is true when replication is configured; IORunning and SQLRunning are its
	// threads (IORunning only when connected to its source).
	Replicating bool
	IORunning   bool
	SQLRunning  bool
	// LagSeconds is Seconds_Behind_Master, nil when unknown.
	LagSeconds *int64
	// Errant is true when the instance holds transactions the primary does not have.
	Errant bool
	// SemiSyncSourceActive is the primary's semi-sync source status (ON: waiting for
	// acknowledgements); only meaningful for the primary.
	SemiSyncSourceActive bool
}

// observeEvery is the time between two observation passes over every instance, after the
// second (which comes at a random point of the first period, see observeLoop); the primary's own
// check runs every detection interval regardless.
const observeEvery = 5 * time.Second

// observeLoop observes every instance of the cluster for the Observer until ctx ends.
func (w *watcher) observeLoop(ctx context.Context) {
	// The first pass runs at once; the second at a random point of the first period (then one
	// every period), so that the passes over many clusters watched together do not coincide.
	first := true
	for {
		every := observeEvery
		c := &v1.MysqlCluster{}
		if err := w.observer().Kube.Get(ctx, w.key, c); err == nil {
			every = max(every, orchestrate.DetectionInterval(c))
			// A pass that could not look (no pods listed, no Secret) changes nothing: the
			// series keep their last values rather than vanish while something is wrong.
			if views := w.observeInstances(ctx, c); c.Status.CurrentPrimary != "" && views != nil && w.s.Observer != nil {
				w.s.Observer.Instances(w.key, views)
			}
		}
		if first {
			first, every = false, upTo(every)
		}
		if orchestrate.SleepCtx(ctx, every) != nil {
			return
		}
	}
}

// observeInstances observes every pod of the cluster in parallel, each within a short timeout.
func (w *watcher) observeInstances(ctx context.Context, c *v1.MysqlCluster) []InstanceView {
	obs := w.observer()
	pods, err := obs.Pods(ctx, c)
	if err != nil {
		return nil
	}
	creds, err := obs.Credentials(ctx, c)
	if err != nil {
		return nil
	}
	octx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	snaps := map[string]topology.Snapshot{}
	details := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss := obs.OpenSessions(octx, []orchestrate.Instance{{Pod: p}}, creds)
			defer ss.Close()
			s, err := ss.Observe(p.Name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				details[p.Name] = err.Error()
				return
			}
			snaps[p.Name] = s
		}()
	}
	wg.Wait()
	primary, havePrimary := snaps[c.Status.CurrentPrimary]
	if c.Status.CurrentPrimary != "" && c.Status.Operation == nil || c.Status.Operation != nil && c.Status.Operation.Type == orchestrate.OperationConverge {
		// Between failovers (a failover's members are its own to judge): every member is
		// bounded, and those that stopped answering are recorded absent.
		var pp *corev1.Pod
		if havePrimary {
			for _, p := range pods {
				if p.Name == c.Status.CurrentPrimary {
					pp = p
				}
			}
		}
		w.trackAbsence(ctx, c, snaps, details, w.readPrimaryBound(ctx, obs, pp, creds))
	}
	var views []InstanceView
	for ord := range orchestrate.MemberCount(c) {
		name := fmt.Sprintf("%s-%d", c.Name, ord)
		s, up := snaps[name]
		v := InstanceView{Name: name, Primary: name == c.Status.CurrentPrimary, Up: up}
		if up && s.Replica != nil {
			v.Replicating = true
			v.IORunning = s.Replica.IOThread == topology.ThreadRunning
			v.SQLRunning = s.Replica.SQLRunning
			v.LagSeconds = s.Replica.SecondsBehind
		}
		if up && v.Primary {
			v.SemiSyncSourceActive = s.SemiSync.SourceActive
		}
		if up && !v.Primary && havePrimary {
			_, ancestor := orchestrate.Divergence(primary, s)
			v.Errant = !ancestor
		}
		views = append(views, v)
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Name < views[j].Name })
	return views
}
